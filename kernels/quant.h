// quant.h: the quantised weight formats of inferlab (kernels/cpu/quant.c): their byte layouts,
// round-to-nearest quantisation, dequantisation and the dequantise-dot kernels that
// ops->matmul runs for them on the CPU. Plain double-accumulating twins are in reference.h;
// tests/test_quant.c checks every kernel against them. No model types.
//
// A quantised matrix is rows of blocks, row-major; a row's bytes are dtype_row_bytes(t, cols)
// and row r starts at r * dtype_row_bytes(t, cols). Blocks follow one another along the row:
//
//   q8_0        ggml's Q8_0 (GGUF type 8): 32 weights per block, { fp16 d; int8 q[32] } =
//               34 bytes, w = q * d with d = amax / 127.              8.5 bits per weight
//   q4_0        ggml's Q4_0 (GGUF type 2): 32 weights per block, { fp16 d; uint8 q[16] } =
//               18 bytes; byte j holds weight j in its low nibble and weight j + 16 in its
//               high nibble, w = (nibble - 8) * d with d = (the signed value of largest
//               magnitude) / -8.                                      4.5 bits per weight
//   int8        one int8 per weight and a float scale per row (per output channel): a row is
//               { float s; int8 q[cols] }, w = q * s, s = amax / 127.  8 + 32 / cols bits
//   int4-gG     G = 32, 64, 128 weights per group, asymmetric: { fp16 d; fp16 m; uint8 q[G/2] },
//               w = nibble * d + m with m = the group's min, d = (max - min) / 15; byte j holds
//               weight j (low nibble) and j + G/2 (high), as Q4_0 pairs its halves. A row whose
//               length is not a multiple of G ends in one shorter group (even length) of the
//               same form.                                            4 + 32 / G bits
//
// q8_0 and q4_0 are ggml's types byte for byte and need rows of whole blocks (cols % 32 == 0),
// as ggml does; dtype_holds_row says whether a type can hold a row of cols. One rule serves
// every block type: a row is ceil(cols / block) blocks, the last one possibly shorter.
#pragma once

#include <stddef.h>
#include <stdint.h>

#include "ops.h"

// IEEE half <-> single: exact widening; narrowing rounds to nearest even (overflow -> inf).
float fp16_to_fp32(uint16_t h);
uint16_t fp32_to_fp16(float f);

int dtype_is_quantized(DType t);
// Weights per block of a row of cols (plain types: 1; int8: the whole row).
int dtype_block_elems(DType t, int cols);
// Can a row of cols be stored in t? (q8_0 / q4_0: whole blocks; int4-gG: even length.)
int dtype_holds_row(DType t, int cols);
size_t dtype_row_bytes(DType t, int cols);
// Bits per weight of a (rows, cols) matrix in t, scales included.
double dtype_bits_per_weight(DType t, int cols);

// One row of n weights: src fp32 -> dst in t (round to nearest, ggml's rules for its types),
// and back. Plain types: fp32 / fp16 / bf16 conversion.
void quantize_row(DType t, void *dst, const float *src, int n);
void dequantize_row(DType t, float *dst, const void *src, int n);
// Whole matrices (rows, cols), rows split across threads.
void quantize_matrix(DType t, void *dst, const float *src, int rows, int cols);
void dequantize_matrix(DType t, float *dst, const void *src, int rows, int cols);

// The dot of one stored row of n weights with x (n) in fp32: the decode kernel. Quantised
// types dequantise 16 weights at a time into SIMD registers (AVX-512 or AVX2 + FMA where the
// compiler targets them, scalar otherwise; quant_simd_name says which was compiled).
float dot_row(DType t, const void *row, const float *x, int n);
const char *quant_simd_name(void); // "avx512", "avx2", "scalar"

// out (R, rows) = x (R, cols) @ w^T for a weight matrix of any type: ops->matmul on the CPU.
// R <= 16: each weight row is read once and dotted with every input row by dot_row (so row r is
// bit for bit the R == 1 result on x_r, as matmul's fp32 path); R > 16 (prefill): tiles of
// weight rows dequantised to fp32 into scratch, then sgemm. scratch: matmul_typed_scratch_bytes.
void matmul_typed(float *out, const float *x, const Tensor *w, int R, void *scratch);
size_t matmul_typed_scratch_bytes(DType t, int R, int cols);
