// fuzz_quant_blocks.c: libFuzzer target for the block decoders of kernels/cpu/quant.c on arbitrary
// bytes: a weight row of any quantised CPU type (ggml's Q8_0, Q4_0, Q4_1, Q5_0, Q4_K, Q6_K and the
// lab's int8 / int4-gG) is dequantised and dotted with arbitrary floats (NaN and inf included) by
// the float dot, the activations are quantised to the type's activation format and dotted by the
// integer dot, the integer dot also runs on arbitrary activation bytes, and matmul_typed runs the
// row twice over decode and prefill row counts. Any result is fine (NaN included); a crash, an
// out-of-bounds read (each buffer is exactly its size) or UB is a bug. Run: make fuzz
// FUZZ_SECONDS=N, or build-fuzz/fuzz_quant_blocks -runs=N.
//
// Input: byte 0 picks the type, byte 1 the row length (1 to 4 blocks; int8 any length 1..256,
// int4-gG possibly ending in a short group), then two rows' bytes (the second is the one dotted),
// then the activations' bytes (read as floats, and again as an activation row), each zero-padded
// when the input is short.
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_input.h"
#include "quant.h"

static const DType TYPES[] = {DTYPE_Q8_0, DTYPE_Q4_0, DTYPE_Q4_1, DTYPE_Q5_0, DTYPE_Q4_K,
                              DTYPE_Q6_K, DTYPE_I8,   DTYPE_I4_G32, DTYPE_I4_G64, DTYPE_I4_G128};
#define N_TYPES (int)(sizeof TYPES / sizeof TYPES[0])

// n bytes from the input at *at (zero-padded past its end) into a buffer of exactly n bytes
static void *take(const uint8_t *data, size_t size, size_t *at, size_t n) {
    uint8_t *p = malloc(n ? n : 1);
    if (!p) abort();
    size_t have = *at < size ? size - *at : 0, k = have < n ? have : n;
    if (k) memcpy(p, data + *at, k);
    memset(p + k, 0, n - k);
    *at += k;
    return p;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 2) return 0;
    DType t = TYPES[data[0] % N_TYPES];
    int B = dtype_traits(t)->block, n;
    if (B == 0) n = 1 + data[1]; // int8: one row scale, any length
    else n = (1 + data[1] % 4) * B;
    if (dtype_traits(t)->short_last && (data[1] & 0x80)) n -= 2 * (1 + (data[1] >> 2) % (B / 2 - 1)); // a short last group
    if (!dtype_holds_row(t, n)) abort(); // the lengths above are all storable

    size_t at = 2, rb = dtype_row_bytes(t, n);
    enum { D = 2 }; // two weight rows, for matmul_typed
    uint8_t *w = take(data, size, &at, D * rb);
    size_t x_at = at; // the activations' bytes: as floats, and again as an activation row
    float *x = take(data, size, &at, (size_t)n * sizeof(float));
    float *y = malloc((size_t)n * sizeof(float));
    if (!y) abort();

    dequantize_row(t, y, w + rb, n);
    volatile float sink = dot_row(t, w + rb, x, n);
    (void)sink;

    ActType a = quant_act_type(t);
    if (a != ACT_NONE) {
        size_t ab = act_row_bytes(a, n);
        uint8_t *xq = malloc(ab);
        if (!xq) abort();
        quantize_act_row(a, xq, x, n);
        sink = dot_row_int(t, w + rb, xq, n);
        free(xq);
        uint8_t *raw = take(data, size, &x_at, ab);
        sink = dot_row_int(t, w + rb, raw, n);
        free(raw);
    }

    // matmul_typed over D rows: decode rows, and prefill rows (integer dot or dequantise + sgemm)
    const int rows[2] = {1, 17};
    for (int k = 0; k < 2; k++) {
        int R = rows[k];
        float *xs = malloc((size_t)R * n * sizeof(float)), *out = malloc((size_t)R * D * sizeof(float));
        size_t sb = matmul_typed_scratch_bytes(t, R, n);
        void *scratch = malloc(sb ? sb : 1);
        if (!xs || !out || !scratch) abort();
        for (int r = 0; r < R; r++) memcpy(xs + (size_t)r * n, x, (size_t)n * sizeof(float));
        Tensor tw = {t, w, D, n, NULL};
        for (int on = 0; on <= 1; on++) {
            int was = quant_int_dot_enable(on);
            matmul_typed(out, xs, &tw, R, sb ? scratch : NULL);
            quant_int_dot_enable(was);
        }
        free(xs), free(out), free(scratch);
    }
    free(w), free(x), free(y);
    return 0;
}
