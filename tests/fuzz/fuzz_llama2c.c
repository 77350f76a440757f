// fuzz_llama2c.c: libFuzzer target for llama2.c checkpoint import (llama2c_load_model: the
// legacy and version-1 headers, the exact file size they imply, the weight sections).
// An error return is fine; a crash, leak, hang or UB report is a bug. Run: make fuzz.
#include <stdint.h>

#include "fuzz_input.h"
#include "llama2c.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    Model m;
    Error err;
    if (llama2c_load_model(fuzz_input_file(data, size, ".bin"), &m, &err) == 0) model_free(&m);
    return 0;
}
