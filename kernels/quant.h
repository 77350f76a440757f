// quant.h: the quantised weight formats of inferlab (kernels/cpu/quant.c): their byte layouts,
// round-to-nearest quantisation, dequantisation, the dequantise-dot kernels and the integer
// dots (ggml's vec_dot arithmetic) that ops->matmul runs for them on the CPU. Plain
// double-accumulating twins are in reference.h; tests/test_quant.c and tests/test_ggml_quants.c
// check every kernel against them (and the dequantisation against PyPI gguf's, bit for bit).
// No model types.
//
// A quantised matrix is rows of blocks, row-major; a row's bytes are dtype_row_bytes(t, cols)
// and row r starts at r * dtype_row_bytes(t, cols). Blocks follow one another along the row.
// All multi-byte fields are little-endian; fp16 is IEEE half. "Nibble pairs" below: byte j of
// 16 holds weight j in its low nibble and weight j + 16 in its high nibble.
//
//   q8_0        ggml's Q8_0 (GGUF type 8): 32 weights per block, { fp16 d; int8 q[32] } =
//               34 bytes, w = q * d with d = amax / 127.              8.5 bits per weight
//   q4_0        ggml's Q4_0 (GGUF type 2): 32 weights per block, { fp16 d; uint8 q[16] } =
//               18 bytes of nibble pairs, w = (nibble - 8) * d with d = (the signed value of
//               largest magnitude) / -8.                              4.5 bits per weight
//   q4_1        ggml's Q4_1 (GGUF type 3): 32 weights per block, { fp16 d; fp16 m; uint8 q[16] }
//               = 20 bytes of nibble pairs, w = nibble * d + m with m = the block's min,
//               d = (max - min) / 15 (int4-g32's layout, byte for byte). 5 bits per weight
//   q5_0        ggml's Q5_0 (GGUF type 6): 32 weights per block, { fp16 d; uint8 qh[4];
//               uint8 q[16] } = 22 bytes; weight j's code is its nibble (nibble pairs) | bit j
//               of the little-endian uint32 qh << 4, w = (code - 16) * d with d = (the signed
//               value of largest magnitude) / -16.                    5.5 bits per weight
//   q4_k        ggml's Q4_K (GGUF type 12), read only: super-blocks of 256 weights, { fp16 d;
//               fp16 dmin; uint8 scales[12]; uint8 q[128] } = 144 bytes: 8 sub-blocks of 32,
//               each with a 6-bit scale sc and a 6-bit min m packed in scales (ggml's
//               get_scale_min_k4: sub-block j < 4: sc = s[j] & 63, m = s[j + 4] & 63; j >= 4:
//               sc = (s[j + 4] & 15) | (s[j - 4] >> 6) << 4, m = (s[j + 4] >> 4) | (s[j] >> 6) << 4);
//               q[32 i .. 32 i + 31] hold sub-block 2i in their low nibbles, 2i + 1 in their high
//               ones; w = (d * sc) * nibble - (dmin * m).             4.5 bits per weight
//   q6_k        ggml's Q6_K (GGUF type 14), read only: super-blocks of 256, { uint8 ql[128];
//               uint8 qh[64]; int8 scales[16]; fp16 d } = 210 bytes, d LAST. Each half h of
//               128 weights uses ql[64 h ..], qh[32 h ..], scales[8 h ..]: weight 32 c + l
//               (c = 0..3, l = 0..31) is code = (ql[l + 32 (c & 1)] >> 4 (c >> 1) & 15)
//               | (qh[l] >> 2 c & 3) << 4, w = (d * scales[2 c + l / 16]) * (code - 32).
//                                                                     6.5625 bits per weight
//   int8        one int8 per weight and a float scale per row (per output channel): a row is
//               { float s; int8 q[cols] }, w = q * s, s = amax / 127.  8 + 32 / cols bits
//   int4-gG     G = 32, 64, 128 weights per group, asymmetric: { fp16 d; fp16 m; uint8 q[G/2] },
//               w = nibble * d + m with m = the group's min, d = (max - min) / 15; byte j holds
//               weight j (low nibble) and j + G/2 (high), as Q4_0 pairs its halves. A row whose
//               length is not a multiple of G ends in one shorter group (even length) of the
//               same form.                                            4 + 32 / G bits
//
// ggml's types are ggml's byte for byte and need rows of whole blocks (cols % 32 == 0, or
// % 256 for the k-quants), as ggml does; dtype_holds_row says whether a type can hold a row of
// cols. Dequantisation computes in fp32 exactly as ggml's dequantize_row_* (and PyPI gguf's
// gguf.quants.dequantize) do, product by product, so its floats are theirs bit for bit.
#pragma once

#include <stddef.h>
#include <stdint.h>

#include "ops.h"

// IEEE half <-> single: exact widening; narrowing rounds to nearest even (overflow -> inf).
float fp16_to_fp32(uint16_t h);
uint16_t fp32_to_fp16(float f);

// One row of n weights: src fp32 -> dst in t (round to nearest, ggml's quantize_row_*_ref rules
// for its types), and back. Plain types: fp32 / fp16 / bf16 conversion. quantize_row dies, saying
// so, for the read-only types (dtype_can_quantize).
void quantize_row(DType t, void *dst, const float *src, int n);
void dequantize_row(DType t, float *dst, const void *src, int n);
// Whole matrices (rows, cols), rows split across threads.
void quantize_matrix(DType t, void *dst, const float *src, int rows, int cols);
void dequantize_matrix(DType t, float *dst, const void *src, int rows, int cols);

// The dot of one stored row of n weights with x (n) in fp32: the float decode kernel. Quantised
// types dequantise 16 weights at a time into SIMD registers (AVX-512 or AVX2 + FMA where the
// compiler targets them, scalar otherwise; quant_simd_name says which was compiled).
float dot_row(DType t, const void *row, const float *x, int n);
const char *quant_simd_name(void); // "avx512", "avx2", "scalar"

// ---- the integer dot: ggml's vec_dot on quantised activations --------------------------------
// A weight type with an integer dot reads the activation row quantised once per matmul into its
// activation format (ggml's vec_dot_type for it), and sums code x code products exactly in int32
// per block, then combines the blocks in fp32 with ggml's formula:
//
//   ACT_Q8_0  { fp16 d; int8 q[32] } = 34 bytes per 32 values (q8_0, q4_0, q5_0 weights; int8's
//             rows too), quantised as ggml-cpu's x86 quantize_row_q8_0 does: amax = max |x|,
//             d = amax / 127 (fp32, stored as fp16), q = round-half-even(x * (127 / amax)).
//             Block: sumf += (d_w * d_a) * sumi, sumi = sum_j w_j q_j (w_j: the weight's signed
//             code: q8_0 q, q4_0 nibble - 8, q5_0 code - 16). int8 rows: s * sum_k d_a,k * sumi_k.
//   ACT_Q8_1  { fp16 d; fp16 s; int8 q[32] } = 36 bytes (q4_1 weights): Q8_0's d and q, and
//             s = fp16(d * sum_j q_j) with d the unrounded fp32 d (ggml's quantize_row_q8_1).
//             Block: sumf += (d_w * d_a) * sumi + m_w * s_a, sumi = sum_j nibble_j q_j.
//   ACT_Q8_K  { float d; int8 q[256]; int16 bsums[16] } = 292 bytes per 256 (q4_k, q6_k weights),
//             ggml's quantize_row_q8_K: max = the signed value of largest |x| (the first such),
//             iscale = -127 / max, q = min(127, round-half-even(iscale * x)), d = 1 / iscale,
//             bsums[i] = sum of q[16 i .. 16 i + 15]; an all-zero block has d = 0, q = 0, bsums 0.
//             q4_k super-block: sumf += (d_a * d) * sum_j sc_j sumi_j
//                                     - (d_a * dmin) * sum_j m_j (bsums[2j] + bsums[2j + 1]),
//             sumi_j = sum over sub-block j of nibble * q.
//             q6_k super-block: sumf += (d_a * d) * sum_i scales_i * sum_{16 codes of i} (code - 32) q.
// The int32 sums are exact (no intermediate saturates: x86's unsigned x signed byte products take
// |w| with q carrying w's sign, and every pair sum stays within int16). The SIMD builds (AVX-512
// VNNI / AVX-VNNI / AVX2, quant_int_dot_name) combine the blocks as ggml-cpu's x86 vec_dot kernels
// do: the same int32 lanes (lane k: codes 4k .. 4k + 3 of each 32), one FMA per block into 8 fp32
// lanes, q4_1's m * s and q4_k's min terms apart (4 lanes for q4_k), q6_k's -32 taken off through
// bsums, the same final sums; their activation rows and dots were bit for bit ggml's (compiled from
// llama.cpp's source at -march=native and x86-64-v3, random rows of every type). The scalar build
// adds d * sumi per block in one fp32 sum: the same integers, agreeing to fp32 rounding. A row whose
// length is not a multiple of the activation block (int8 rows) ends in a zero-padded block.
//
// Against the float dot of the same weights with x itself, the act rounding moves each x_j by at
// most d/2 + 127 |fp16(d) - d| (Q8_0 / Q8_1 blocks, d = amax / 127) or |d| / 2 (Q8_K, fp32 d),
// times |w_j|; q4_1's m * s term also carries s's fp16 rounding (tests/test_quant.c states it).
typedef enum { ACT_NONE = 0, ACT_Q8_0, ACT_Q8_1, ACT_Q8_K } ActType;

ActType quant_act_type(DType t);       // t's activation format; ACT_NONE when it has no integer dot
const char *act_type_name(ActType a);  // "q8_0", "q8_1", "q8_k", "none"
int act_block_elems(ActType a);        // values per activation block: 32 or 256
size_t act_row_bytes(ActType a, int n);
void quantize_act_row(ActType a, void *dst, const float *x, int n);
int dtype_has_int_dot(DType t); // q8_0, q4_0, q4_1, q5_0, q4_k, q6_k, int8
// The dot of a stored row of n weights with an activation row in quant_act_type(t)'s format.
float dot_row_int(DType t, const void *row, const void *xq, int n);
const char *quant_int_dot_name(void); // "avx512-vnni", "avx-vnni", "avx2", "scalar"
// Whether matmul_typed takes the integer dot for the types that have one (default: where a SIMD
// one is compiled; else the float dequantise-dot and sgemm). Returns the previous setting. Not
// thread-safe: set it between runs.
int quant_int_dot_enable(int on);

// out (R, rows) = x (R, cols) @ w^T for a weight matrix of any type: ops->matmul on the CPU.
// Types with an integer dot, when it is enabled, at every R: the R input rows quantised once to
// the activation format, then each task's 16 weight rows met by the input rows 8 at a time (their
// accumulators in registers), each weight block decoded once for those 8 and every output summed
// in dot_row_int's order; so row r of a prefill is bit for bit the R == 1 (decode) result on x_r.
// Otherwise: R <= 16: each weight row is read once and dotted with every input row by dot_row (so
// row r is bit for bit the R == 1 result on x_r, as matmul's fp32 path); R > 16 (prefill): tiles of
// weight rows dequantised to fp32 into scratch, then sgemm. w->outliers' fp32 columns are added to
// any of them. scratch: matmul_typed_scratch_bytes (enough for either path, whichever
// quant_int_dot_enable selects when matmul_typed runs).
void matmul_typed(float *out, const float *x, const Tensor *w, int R, void *scratch);
size_t matmul_typed_scratch_bytes(DType t, int R, int cols);
