// quant_blocks.h: random stored rows of any CPU weight type for the quantisation tests
// (test_quant.c, test_ggml_quants.c). ggml's block types get random valid blocks: every byte
// random (so every code, nibble, fifth bit and packed 6-bit scale takes arbitrary values, Q8_0's
// -128 included), then each fp16 scale redrawn sane: |d| in [1e-3, 1] with either sign, Q4_1's m
// and Q4_K's dmin in [-1, 1]; the lab's own types (int8, int4-gG) and fp32 are quantised from
// N(0, 1) floats, as only the lab's quantiser makes them. Never all zeros.
#pragma once

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"
#include "quant.h"
#include "rng.h"

static inline void put_random_half(uint8_t *p, int is_scale, uint64_t *rng) {
    float v;
    if (is_scale) {
        v = expf(logf(1e-3f) * rng_uniform(rng)); // log-uniform in [1e-3, 1]
        if (rng_u64(rng) & 1) v = -v;
    } else {
        v = 2.0f * rng_uniform(rng) - 1.0f;
    }
    uint16_t h = fp32_to_fp16(v);
    memcpy(p, &h, 2);
}

// Does random_row fill t with random valid blocks (ggml's types) rather than quantised floats?
static inline int random_blocks_type(DType t) {
    return t == DTYPE_Q8_0 || t == DTYPE_Q4_0 || t == DTYPE_Q4_1 || t == DTYPE_Q5_0 || t == DTYPE_Q4_K || t == DTYPE_Q6_K;
}

// rows stored rows of n weights of t into dst (rows * dtype_row_bytes(t, n) bytes).
static inline void random_rows(DType t, void *dst, int rows, int n, uint64_t *rng) {
    size_t rb = dtype_row_bytes(t, n);
    uint8_t *b = dst;
    if (!random_blocks_type(t)) {
        float *x = mallocCheck((size_t)rows * n * sizeof(float));
        for (size_t i = 0; i < (size_t)rows * n; i++) x[i] = rng_normal(rng);
        quantize_matrix(t, dst, x, rows, n);
        free(x);
        return;
    }
    for (size_t i = 0; i < (size_t)rows * rb; i++) b[i] = (uint8_t)rng_u64(rng);
    int B = dtype_block_elems(t, n);
    size_t bb = dtype_block_bytes(t, B);
    for (size_t k = 0; k < (size_t)rows * (n / B); k++) {
        uint8_t *blk = b + k * bb;
        switch (t) {
        case DTYPE_Q6_K: put_random_half(blk + 208, 1, rng); break; // d is last
        case DTYPE_Q4_1: case DTYPE_Q4_K: put_random_half(blk, 1, rng), put_random_half(blk + 2, 0, rng); break;
        default: put_random_half(blk, 1, rng);
        }
    }
}
