// fuzz_llama2c_tokenizer.c: libFuzzer target for llama2.c's tokenizer.bin
// (tokenizer_load_llama2c, every token up to the end of the file), then run.c-style encoding
// and decoding of a fixed text with the vocabulary that loaded.
// An error return is fine; a crash, leak, hang or UB report is a bug. Run: make fuzz.
#include <stdint.h>
#include <stdlib.h>

#include "fuzz_input.h"
#include "tokenizer.h"

static const unsigned char TEXT[] = "Hello world, \xe2\x86\x92 caf\xc3\xa9 \xff 42";

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    Tokenizer tok;
    Error err;
    if (tokenizer_load_llama2c(&tok, fuzz_input_file(data, size, ".bin"), 0, &err) != 0) return 0;
    int ids[sizeof TEXT + 3];
    size_t n = tokenizer_encode(&tok, TEXT, sizeof TEXT - 1, true, false, ids);
    size_t len;
    free(tokenizer_decode(&tok, ids, n, &len));
    tokenizer_free(&tok);
    return 0;
}
