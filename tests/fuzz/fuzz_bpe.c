// fuzz_bpe.c: libFuzzer target for byte-level BPE on arbitrary bytes (experiments/formats/
// tokenizer.c): encode then decode must give the input back, with a tokenizer trained once at
// start-up and, for one input in 8 (training is the slow part), with one trained on the
// input's first TRAIN_BYTES (a small vocabulary on a short text);
// every token's piece is at most TOKENIZER_MAX_PIECE bytes, and the pre-split rule must cover
// the input in non-empty chunks (which have no length limit).
// A mismatch aborts (a bug, like a crash). Run: make fuzz.
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "tokenizer.h"

static const char TRAINING_TEXT[] =
    "In the beginning God created the heaven and the earth. And the earth was without form, and "
    "void; and darkness was upon the face of the deep. 12 34 567 -- \xe2\x86\x92 caf\xc3\xa9\n\n\t";

#define TRAIN_BYTES 256

static Tokenizer trained;

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc, (void)argv;
    Error err;
    if (tokenizer_train_bpe(&trained, (const unsigned char *)TRAINING_TEXT, sizeof TRAINING_TEXT - 1, 300, &err))
        abort();
    return 0;
}

static void check_round_trip(const Tokenizer *t, const uint8_t *data, size_t size) {
    int *ids = malloc(tokenizer_max_tokens(size) * sizeof *ids);
    size_t n = tokenizer_encode(t, data, size, true, true, ids), len;
    for (size_t i = 0; i < n; i++) {
        size_t piece_len;
        tokenizer_piece(t, -1, ids[i], &piece_len);
        if (piece_len > TOKENIZER_MAX_PIECE) abort();
    }
    unsigned char *back = tokenizer_decode(t, ids, n, &len);
    if (len != size || memcmp(back, data, size) != 0) abort();
    free(back);
    free(ids);
}

static void check_chunks(const uint8_t *data, size_t size) {
    for (size_t pos = 0, end; pos < size; pos = end) {
        end = tokenizer_chunk_end(data, size, pos);
        if (end <= pos || end > size) abort();
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    check_chunks(data, size);
    check_round_trip(&trained, data, size);
    Tokenizer own;
    Error err;
    size_t train = size < TRAIN_BYTES ? size : TRAIN_BYTES;
    if (size > 0 && data[0] % 8 == 0 && tokenizer_train_bpe(&own, data, train, 256 + 2 + data[0] / 8, &err) == 0) {
        check_round_trip(&own, data, size);
        tokenizer_free(&own);
    }
    return 0;
}
