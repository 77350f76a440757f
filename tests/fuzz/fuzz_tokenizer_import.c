// fuzz_tokenizer_import.c: libFuzzer target for the vocabulary import that a GGUF's tokenizer
// goes through (gguf.c's tokenizer_from_gguf ends in these): a llama.cpp / SentencePiece
// vocabulary of pieces and scores (tokenizer_from_pieces) and a BPE merge list
// (tokenizer_from_merges), decoded from the input without the GGUF framing so that the fuzzer
// spends its time on the vocabulary rules; then an encode and decode with what was built.
// Input: byte 0 picks the kind; pieces are {u8 length, bytes, f32 score} records, merges are
// {u16 left, u16 right} records. An error return is fine; a crash, leak, hang or UB report is
// a bug. Run: make fuzz.
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "tokenizer.h"

#define MAX_PIECES 4096

static const unsigned char TEXT[] = "Hello world, \xe2\x86\x92 caf\xc3\xa9 \xff 42 the the";

static int pieces_from_input(Tokenizer *t, const uint8_t *p, size_t size, Error *err) {
    const unsigned char **pieces = malloc(MAX_PIECES * sizeof *pieces);
    int *lens = malloc(MAX_PIECES * sizeof *lens), n = 0;
    float *scores = malloc(MAX_PIECES * sizeof *scores);
    for (size_t at = 0; n < MAX_PIECES && at < size && at + 1 + p[at] + 4 <= size; n++) {
        lens[n] = p[at];
        pieces[n] = p + at + 1;
        memcpy(&scores[n], p + at + 1 + lens[n], 4);
        at += 1 + (size_t)lens[n] + 4;
    }
    int rc = tokenizer_from_pieces(t, pieces, lens, scores, n, err);
    free(pieces), free(lens), free(scores);
    return rc;
}

static int merges_from_input(Tokenizer *t, const uint8_t *p, size_t size, Error *err) {
    int n = (int)(size / 4), *merges = malloc((size_t)(2 * n + 1) * sizeof *merges);
    for (int i = 0; i < 2 * n; i++) merges[i] = p[2 * i] | p[2 * i + 1] << 8;
    int rc = tokenizer_from_merges(t, merges, n, err);
    free(merges);
    return rc;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size == 0) return 0;
    Tokenizer t;
    Error err;
    int rc = data[0] & 1 ? merges_from_input(&t, data + 1, size - 1, &err)
                         : pieces_from_input(&t, data + 1, size - 1, &err);
    if (rc != 0) return 0;
    int ids[sizeof TEXT + 3];
    size_t n = tokenizer_encode(&t, TEXT, sizeof TEXT - 1, true, true, ids), len;
    free(tokenizer_decode(&t, ids, n, &len));
    tokenizer_free(&t);
    return 0;
}
