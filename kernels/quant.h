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

// The integer dot (llama.cpp's q8_0 x q8_0 vec_dot): decode with q8_0 or int8 weights quantises
// each activation row once per matmul to act-q8, blocks of 32 values { float d; int8 q[32] }
// with d = amax / 127 and q = round(x / d) (a row's last block zero-padded), and sums int8 x int8
// products in int32 per block (AVX-512 VNNI, AVX-VNNI or AVX2 where compiled, plain C
// otherwise: quant_int_dot_name), times the weight block's scale and d. Rounding x moves each
// value by at most d / 2, so the result differs from the float dot of the same weights with x by
// at most sum over blocks k of d_k / 2 * sum_{j in k} |w_j| (plus fp32 rounding).
size_t act_q8_row_bytes(int n);
void quantize_act_row(void *dst, const float *x, int n);
int dtype_has_int_dot(DType t); // q8_0, int8
float dot_row_int(DType t, const void *row, const void *xq, int n);
const char *quant_int_dot_name(void); // "avx512-vnni", "avx-vnni", "avx2", "scalar"
// Whether matmul_typed's decode rows take the integer dot (default: where a SIMD one is compiled;
// else the float dequantise-dot). Returns the previous setting. Not thread-safe: set it between runs.
int quant_int_dot_enable(int on);

// out (R, rows) = x (R, cols) @ w^T for a weight matrix of any type: ops->matmul on the CPU.
// R <= 16: each weight row is read once and dotted with every input row by dot_row or the integer
// dot (so row r is bit for bit the R == 1 result on x_r, as matmul's fp32 path); R > 16
// (prefill): tiles of weight rows dequantised to fp32 into scratch, then sgemm. w->outliers'
// fp32 columns are added to either. scratch: matmul_typed_scratch_bytes.
void matmul_typed(float *out, const float *x, const Tensor *w, int R, void *scratch);
size_t matmul_typed_scratch_bytes(DType t, int R, int cols);
