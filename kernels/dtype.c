// dtype.c: the weight types' traits table (dtype.h) and the row arithmetic every layer shares.
// Test: make build/tests/test_quant && build/tests/test_quant (test_bits_per_weight and the
// layout tests check these sizes against hand-built blocks).
#include "dtype.h"

#include <string.h>

#include "common.h"

// clang-format off
static const DTypeTraits TRAITS[DTYPE_COUNT] = {
    [DTYPE_F32]     = {.name = "fp32",      .gguf_type = 0,    .block = 0,   .scale_bytes = 0, .code_bits = 32},
    [DTYPE_F16]     = {.name = "fp16",      .gguf_type = 1,    .block = 0,   .scale_bytes = 0, .code_bits = 16},
    // ggml's BF16 is type 30; the lab neither reads nor writes bf16 files
    [DTYPE_BF16]    = {.name = "bf16",      .gguf_type = -1,   .block = 0,   .scale_bytes = 0, .code_bits = 16},
    [DTYPE_Q8_0]    = {.name = "q8_0",      .gguf_type = 8,    .block = 32,  .scale_bytes = 2, .code_bits = 8},
    [DTYPE_Q4_0]    = {.name = "q4_0",      .gguf_type = 2,    .block = 32,  .scale_bytes = 2, .code_bits = 4},
    // ours, far above ggml's ids, so llama.cpp rejects the files instead of misreading them
    [DTYPE_I8]      = {.name = "int8",      .gguf_type = 1024, .block = 0,   .scale_bytes = 4, .code_bits = 8},
    [DTYPE_I4_G32]  = {.name = "int4-g32",  .gguf_type = 1025, .block = 32,  .scale_bytes = 4, .code_bits = 4, .short_last = 1},
    [DTYPE_I4_G64]  = {.name = "int4-g64",  .gguf_type = 1026, .block = 64,  .scale_bytes = 4, .code_bits = 4, .short_last = 1},
    [DTYPE_I4_G128] = {.name = "int4-g128", .gguf_type = 1027, .block = 128, .scale_bytes = 4, .code_bits = 4, .short_last = 1},
    // ggml's: {fp16 d, m; 16 bytes of nibbles} = 20; {fp16 d; u8 qh[4]; 16 bytes of nibbles} = 22
    [DTYPE_Q4_1]    = {.name = "q4_1",      .gguf_type = 3,    .block = 32,  .scale_bytes = 4, .code_bits = 4},
    [DTYPE_Q5_0]    = {.name = "q5_0",      .gguf_type = 6,    .block = 32,  .scale_bytes = 2, .code_bits = 5},
    // ggml's k-quants, read only: {fp16 d, dmin; u8 scales[12]; 128 bytes of nibbles} = 144;
    // {u8 ql[128]; u8 qh[64]; i8 scales[16]; fp16 d} = 210
    [DTYPE_Q4_K]    = {.name = "q4_k",      .gguf_type = 12,   .block = 256, .scale_bytes = 16, .code_bits = 4, .read_only = 1},
    [DTYPE_Q6_K]    = {.name = "q6_k",      .gguf_type = 14,   .block = 256, .scale_bytes = 18, .code_bits = 6, .read_only = 1},
};
// clang-format on

static int is_dtype(DType t) { return (int)t >= 0 && (int)t < DTYPE_COUNT; }

const DTypeTraits *dtype_traits(DType t) {
    if (!is_dtype(t)) die("dtype_traits: %d is not a weight type", (int)t);
    return &TRAITS[t];
}

const char *dtype_name(DType t) { return is_dtype(t) ? TRAITS[t].name : "?"; }

int dtype_from_name(const char *name) {
    for (int i = 0; i < DTYPE_COUNT; i++)
        if (strcmp(name, TRAITS[i].name) == 0) return i;
    return -1;
}

int dtype_from_gguf_type(int id) {
    for (int i = 0; i < DTYPE_COUNT; i++)
        if (id >= 0 && TRAITS[i].gguf_type == id) return i;
    return -1;
}

int dtype_is_quantized(DType t) { return dtype_traits(t)->scale_bytes > 0; }

int dtype_can_quantize(DType t) { return !dtype_traits(t)->read_only; }

size_t dtype_size(DType t) { return dtype_is_quantized(t) ? 0 : (size_t)dtype_traits(t)->code_bits / 8; }

int dtype_block_elems(DType t, int cols) {
    int B = dtype_traits(t)->block;
    return B ? B : cols;
}

size_t dtype_block_bytes(DType t, int n) {
    const DTypeTraits *tt = dtype_traits(t);
    return (size_t)tt->scale_bytes + (size_t)n * tt->code_bits / 8;
}

int dtype_holds_row(DType t, int cols) {
    if (cols <= 0) return 0;
    const DTypeTraits *tt = dtype_traits(t);
    int last = tt->block ? cols % tt->block : 0;
    return last == 0 || (tt->short_last && last % 2 == 0);
}

size_t dtype_row_bytes(DType t, int cols) {
    if (cols <= 0) return 0; // an empty tensor (a layer without that matrix) has no bytes
    int B = dtype_block_elems(t, cols), full = cols / B, last = cols % B;
    return (size_t)full * dtype_block_bytes(t, B) + (last ? dtype_block_bytes(t, last) : 0);
}

double dtype_bits_per_weight(DType t, int cols) { return 8.0 * dtype_row_bytes(t, cols) / cols; }
