// fuzz_gguf_model.c: libFuzzer target for model_load_gguf, the path a llama.cpp-made GGUF takes
// into the lab (config keys with Llama defaults, tensor shapes and types, the "llama" or
// "inferlab-bpe" vocabulary rebuilt and checked), then one encode/decode with what loaded.
// An error return is fine; a crash, leak, hang or UB report is a bug. Run: make fuzz.
#include <stdint.h>
#include <stdlib.h>

#include "fuzz_input.h"
#include "gguf.h"

static const unsigned char TEXT[] = "In the beginning God created the heaven and the earth. 1234";

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    Model m;
    Tokenizer tok;
    Error err;
    if (model_load_gguf(fuzz_input_file(data, size, ".gguf"), &m, &tok, &err) != 0) return 0;
    int ids[sizeof TEXT + 3];
    size_t n = tokenizer_encode(&tok, TEXT, sizeof TEXT - 1, true, true, ids);
    size_t len;
    free(tokenizer_decode(&tok, ids, n, &len));
    tokenizer_free(&tok);
    model_free(&m);
    return 0;
}
