// quant.c: the quantised weight formats (layouts in kernels/quant.h): round-to-nearest
// quantisation by ggml's rules, dequantisation (ggml's arithmetic, bit for bit), the SIMD
// dequantise-dot kernels, the activation formats and integer dots of ggml's vec_dot, and
// matmul_typed (integer dots at every row count, or row-streaming float dots and the tiled
// dequantise + sgemm path of prefill). Tests: make build/tests/test_quant build/tests/test_ggml_quants
// && build/tests/test_quant && build/tests/test_ggml_quants
#include "quant.h"

#include <cblas.h>
#include <float.h>
#include <math.h>
#include <string.h>

#include "common.h"
#include "kernels.h"
#include "parallel.h"
#include "vec.h"

#if defined(__AVX2__) || defined(__AVX512F__) || defined(__F16C__)
#include <immintrin.h>
#endif

// Dequantisation must round each product and sum as ggml does (no fused multiply-adds): gcc
// contracts nothing under -std=c11; clang contracts within an expression unless told not to.
#ifdef __clang__
#pragma STDC FP_CONTRACT OFF
#endif

// ---- half precision -----------------------------------------------------------------------

float fp16_to_fp32(uint16_t h) {
    uint32_t sign = (uint32_t)(h >> 15) << 31, exp = (h >> 10) & 0x1f, mant = h & 0x3ff, bits;
    if (exp == 0x1f) bits = sign | 0x7f800000u | (mant << 13);          // inf, NaN
    else if (exp != 0) bits = sign | ((exp + 112) << 23) | (mant << 13); // rebias 15 -> 127
    else {                                                               // zero, subnormal: mant * 2^-24
        float f = (float)mant * 5.9604644775390625e-8f;
        memcpy(&bits, &f, 4);
        bits |= sign;
    }
    float f;
    memcpy(&f, &bits, 4);
    return f;
}

uint16_t fp32_to_fp16(float f) {
    uint32_t x;
    memcpy(&x, &f, 4);
    uint16_t sign = (uint16_t)((x >> 16) & 0x8000);
    uint32_t ax = x & 0x7fffffffu;
    if (ax > 0x7f800000u) return sign | 0x7e00;  // NaN stays NaN (quiet)
    if (ax >= 0x477ff000u) return sign | 0x7c00; // >= 65520 rounds past the largest half: inf
    if (ax < 0x38800000u) {                      // below 2^-14: a subnormal half, in units of 2^-24
        float a;
        memcpy(&a, &ax, 4);
        return sign | (uint16_t)nearbyintf(a * 16777216.0f); // default rounding: to nearest even
    }
    // Normal: drop 13 mantissa bits rounding to nearest even (a carry may bump the exponent).
    uint32_t rounded = ax + 0xfffu + ((ax >> 13) & 1u);
    return sign | (uint16_t)((rounded - (112u << 23)) >> 13);
}

// The kernels' scale loads: F16C's conversion where the target has it (the same exact widening).
static inline float half_at(const uint8_t *p) {
    uint16_t h;
    memcpy(&h, p, 2);
#ifdef __F16C__
    return _cvtsh_ss(h);
#else
    return fp16_to_fp32(h);
#endif
}

static inline void put_half(uint8_t *p, float f) {
    uint16_t h = fp32_to_fp16(f);
    memcpy(p, &h, 2);
}

static inline float float_at(const uint8_t *p) {
    float f;
    memcpy(&f, p, sizeof f);
    return f;
}

static inline uint32_t u32_at(const uint8_t *p) {
    uint32_t v;
    memcpy(&v, p, sizeof v);
    return v;
}

// ---- the formats --------------------------------------------------------------------------
// Sizes come from the traits table (kernels/dtype.c); this file holds the CPU's kernels.

// Block k of a row and its length.
static inline int block_len(int B, int n, int k) { return n - k * B < B ? n - k * B : B; }

// Q4_K's 6-bit scale and min of sub-block j (0..7) from its 12 packed bytes (layout: quant.h).
static inline void k4_scale_min(const uint8_t *s, int j, int *sc, int *m) {
    if (j < 4) {
        *sc = s[j] & 63;
        *m = s[j + 4] & 63;
    } else {
        *sc = (s[j + 4] & 0x0F) | (s[j - 4] >> 6) << 4;
        *m = (s[j + 4] >> 4) | (s[j] >> 6) << 4;
    }
}

// Q4_K and Q6_K block offsets (quant.h): Q4_K { d 0; dmin 2; scales 4; q 16 }, Q6_K { ql 0;
// qh 128; scales 192; d 208 }.
enum { Q4K_BYTES = 144, Q6K_BYTES = 210, QK = 256 };

// ---- quantisation: ggml's round-to-nearest rules (quantize_row_*_ref) -----------------------

static void quantize_q8_0(uint8_t *b, const float *x, int len) {
    (void)len; // always a whole block
    float amax = 0.0f;
    for (int j = 0; j < 32; j++) amax = fmaxf(amax, fabsf(x[j]));
    float d = amax / 127.0f, id = d ? 1.0f / d : 0.0f;
    put_half(b, d);
    for (int j = 0; j < 32; j++) b[2 + j] = (uint8_t)(int8_t)roundf(x[j] * id);
}

// The signed value of largest magnitude of 32 (the first such), as Q4_0 and Q5_0 scale by it.
static float signed_max32(const float *x) {
    float amax = 0.0f, max = 0.0f;
    for (int j = 0; j < 32; j++)
        if (fabsf(x[j]) > amax) amax = fabsf(x[j]), max = x[j];
    return max;
}

static void quantize_q4_0(uint8_t *b, const float *x, int len) {
    (void)len; // always a whole block
    float d = signed_max32(x) / -8.0f, id = d ? 1.0f / d : 0.0f;
    put_half(b, d);
    for (int j = 0; j < 16; j++) {
        int lo = (int8_t)(x[j] * id + 8.5f), hi = (int8_t)(x[j + 16] * id + 8.5f);
        b[2 + j] = (uint8_t)((lo < 15 ? lo : 15) | (hi < 15 ? hi : 15) << 4);
    }
}

// Q5_0: codes 0..31 = round(x / d) + 16 with d = max / -16; nibbles as Q4_0's, fifth bits in qh.
static void quantize_q5_0(uint8_t *b, const float *x, int len) {
    (void)len; // always a whole block
    float d = signed_max32(x) / -16.0f, id = d ? 1.0f / d : 0.0f;
    put_half(b, d);
    uint32_t qh = 0;
    for (int j = 0; j < 16; j++) {
        int lo = (int8_t)(x[j] * id + 16.5f), hi = (int8_t)(x[j + 16] * id + 16.5f);
        lo = lo < 31 ? lo : 31, hi = hi < 31 ? hi : 31;
        b[6 + j] = (uint8_t)((lo & 0x0F) | (hi & 0x0F) << 4);
        qh |= (uint32_t)(lo >> 4) << j | (uint32_t)(hi >> 4) << (j + 16);
    }
    memcpy(b + 2, &qh, 4);
}

static void quantize_int8_row(uint8_t *b, const float *x, int n) {
    float amax = 0.0f;
    for (int j = 0; j < n; j++) amax = fmaxf(amax, fabsf(x[j]));
    float s = amax / 127.0f, is = s ? 1.0f / s : 0.0f;
    memcpy(b, &s, sizeof s);
    for (int j = 0; j < n; j++) b[4 + j] = (uint8_t)(int8_t)roundf(x[j] * is);
}

// int4-gG groups and Q4_1 blocks (the same layout; ggml's quantize_row_q4_1_ref at n = 32).
static void quantize_int4_group(uint8_t *b, const float *x, int n) {
    float min = FLT_MAX, max = -FLT_MAX;
    for (int j = 0; j < n; j++) min = fminf(min, x[j]), max = fmaxf(max, x[j]);
    float d = (max - min) / 15.0f, id = d ? 1.0f / d : 0.0f;
    put_half(b, d);
    put_half(b + 2, min);
    int half = n / 2;
    for (int j = 0; j < half; j++) {
        int lo = (int8_t)((x[j] - min) * id + 0.5f), hi = (int8_t)((x[j + half] - min) * id + 0.5f);
        b[4 + j] = (uint8_t)((lo < 15 ? lo : 15) | (hi < 15 ? hi : 15) << 4);
    }
}

static void copy_f32_in(uint8_t *b, const float *x, int n) { memcpy(b, x, (size_t)n * sizeof(float)); }

// ---- dequantisation: one block to fp32, ggml's products in ggml's order ----------------------

static void dequantize_q8_0(float *y, const uint8_t *b, int len) {
    (void)len; // always a whole block
    float d = half_at(b);
    for (int j = 0; j < 32; j++) y[j] = (int8_t)b[2 + j] * d;
}

static void dequantize_q4_0(float *y, const uint8_t *b, int len) {
    (void)len; // always a whole block
    float d = half_at(b);
    for (int j = 0; j < 16; j++) {
        y[j] = ((b[2 + j] & 0x0F) - 8) * d;
        y[j + 16] = ((b[2 + j] >> 4) - 8) * d;
    }
}

static void dequantize_q5_0(float *y, const uint8_t *b, int len) {
    (void)len; // always a whole block
    float d = half_at(b);
    uint32_t qh = u32_at(b + 2);
    for (int j = 0; j < 16; j++) {
        int lo = (b[6 + j] & 0x0F) | (int)((qh >> j) & 1) << 4, hi = (b[6 + j] >> 4) | (int)((qh >> (j + 16)) & 1) << 4;
        y[j] = (lo - 16) * d;
        y[j + 16] = (hi - 16) * d;
    }
}

static void dequantize_q4_k(float *y, const uint8_t *b, int len) {
    (void)len; // always a whole super-block
    float d = half_at(b), dmin = half_at(b + 2);
    const uint8_t *q = b + 16;
    for (int j = 0; j < 8; j += 2, q += 32, y += 64) {
        int sc0, m0, sc1, m1;
        k4_scale_min(b + 4, j, &sc0, &m0);
        k4_scale_min(b + 4, j + 1, &sc1, &m1);
        float d0 = d * sc0, mm0 = dmin * m0, d1 = d * sc1, mm1 = dmin * m1;
        for (int l = 0; l < 32; l++) {
            y[l] = d0 * (q[l] & 0x0F) - mm0;
            y[l + 32] = d1 * (q[l] >> 4) - mm1;
        }
    }
}

static void dequantize_q6_k(float *y, const uint8_t *b, int len) {
    (void)len; // always a whole super-block
    float d = half_at(b + 208);
    for (int h = 0; h < 2; h++, y += 128) {
        const uint8_t *ql = b + 64 * h, *qh = b + 128 + 32 * h;
        const int8_t *sc = (const int8_t *)(b + 192 + 8 * h);
        for (int l = 0; l < 32; l++) {
            int is = l / 16;
            int q0 = ((ql[l] & 0x0F) | ((qh[l] >> 0) & 3) << 4) - 32;
            int q1 = ((ql[l + 32] & 0x0F) | ((qh[l] >> 2) & 3) << 4) - 32;
            int q2 = ((ql[l] >> 4) | ((qh[l] >> 4) & 3) << 4) - 32;
            int q3 = ((ql[l + 32] >> 4) | ((qh[l] >> 6) & 3) << 4) - 32;
            y[l] = d * sc[is] * q0;
            y[l + 32] = d * sc[is + 2] * q1;
            y[l + 64] = d * sc[is + 4] * q2;
            y[l + 96] = d * sc[is + 6] * q3;
        }
    }
}

static void dequantize_int8_row(float *y, const uint8_t *b, int n) {
    float s = float_at(b);
    for (int j = 0; j < n; j++) y[j] = (int8_t)b[4 + j] * s;
}

// int4-gG groups and Q4_1 blocks: nibble * d + m, two roundings as ggml's dequantize_row_q4_1
static void dequantize_int4_group(float *y, const uint8_t *b, int n) {
    float d = half_at(b), m = half_at(b + 2);
    int half = n / 2;
    for (int j = 0; j < half; j++) {
        y[j] = (b[4 + j] & 0x0F) * d + m;
        y[j + half] = (b[4 + j] >> 4) * d + m;
    }
}

static void copy_f32_out(float *y, const uint8_t *b, int n) { memcpy(y, b, (size_t)n * sizeof(float)); }

// ---- the CPU's kernels per type ---------------------------------------------------------------
// The CPU backend's dispatch: for each weight type it runs, a block's quantisation (NULL for the
// read-only types) and dequantisation, the row dot with fp32 x and, where one exists, the row dot
// with a quantised activation row (the integer dot) and that row's format. The layouts themselves
// are the traits table's (dtype.h).

// R activation rows (R <= MATVEC_MAX_ROWS) in a weight type's activation format, for its
// integer dot.
typedef struct {
    const uint8_t *q; // (R, stride) activation rows
    size_t stride;    // bytes between rows
    int R;
    // the blocks' d (and Q8_1's s) as fp32, block-major, (blocks, MATVEC_MAX_ROWS): d[k *
    // MATVEC_MAX_ROWS + r] is row r's block k (act_scales_fill), so that a kernel reads a block's
    // scales for all its rows in one load.
    const float *d, *s;
} ActRows;

typedef struct {
    void (*quantize_block)(uint8_t *b, const float *x, int len);
    void (*dequantize_block)(float *y, const uint8_t *b, int len);
    float (*dot)(DType t, const uint8_t *row, const float *x, int n);
    // out[i + r * out_stride] = weight row i . activation row r, i < nrows (row_bytes apart),
    // r < x->R; NULL: no integer dot
    void (*int_dot)(const uint8_t *rows, size_t row_bytes, int nrows, const ActRows *x, int n, float *out,
                    size_t out_stride);
    ActType act; // int_dot's activation format
} CpuType;

static const CpuType *cpu_type(DType t); // the table, after the kernels it names

static void check_row(const char *what, DType t, int n) {
    if (!dtype_holds_row(t, n)) die("%s: a row of %d weights cannot be stored as %s", what, n, dtype_name(t));
}

// The CPU's kernels for t, or death naming the caller when it has none.
static const CpuType *cpu_kernels(const char *what, DType t) {
    const CpuType *k = cpu_type(t);
    if (!k->dot) die("%s: %s weights are not supported on the CPU", what, dtype_name(t));
    return k;
}

// The CPU's quantiser for t, or death saying why there is none.
static const CpuType *cpu_quantizer(const char *what, DType t) {
    const CpuType *kt = cpu_kernels(what, t);
    if (!dtype_can_quantize(t) || !kt->quantize_block)
        die("%s: the lab reads %s weights but cannot write them (it has no quantiser for them; "
            "llama.cpp's llama-quantize makes them)", what, dtype_name(t));
    return kt;
}

void quantize_row(DType t, void *dst, const float *src, int n) {
    const CpuType *kt = cpu_quantizer("quantize_row", t);
    check_row("quantize_row", t, n);
    uint8_t *b = dst;
    int B = dtype_block_elems(t, n);
    for (int k = 0; k * B < n; k++) {
        int len = block_len(B, n, k);
        kt->quantize_block(b, src + (size_t)k * B, len);
        b += dtype_block_bytes(t, len);
    }
}

void dequantize_row(DType t, float *dst, const void *src, int n) {
    check_row("dequantize_row", t, n);
    const CpuType *kt = cpu_kernels("dequantize_row", t);
    const uint8_t *b = src;
    int B = dtype_block_elems(t, n);
    for (int k = 0; k * B < n; k++) {
        int len = block_len(B, n, k);
        kt->dequantize_block(dst + (size_t)k * B, b, len);
        b += dtype_block_bytes(t, len);
    }
}

void quantize_matrix(DType t, void *dst, const float *src, int rows, int cols) {
    cpu_quantizer("quantize_matrix", t); // before any thread starts
    check_row("quantize_matrix", t, cols);
    size_t rb = dtype_row_bytes(t, cols);
    #pragma omp parallel for schedule(static)
    for (int r = 0; r < rows; r++) quantize_row(t, (uint8_t *)dst + r * rb, src + (size_t)r * cols, cols);
}

void dequantize_matrix(DType t, float *dst, const void *src, int rows, int cols) {
    check_row("dequantize_matrix", t, cols);
    size_t rb = dtype_row_bytes(t, cols);
    #pragma omp parallel for schedule(static) if (rows > 8)
    for (int r = 0; r < rows; r++)
        dequantize_row(t, dst + (size_t)r * cols, (const uint8_t *)src + r * rb, cols);
}

// ---- SIMD: 16 weights at a time -------------------------------------------------------------
// The width follows vec.h's VEC_BITS (512: AVX-512, 256: AVX2 + FMA, 32: scalar), so the
// narrower builds of make test run the narrower paths on a wider machine.
// Every float-dot kernel below is written once over a few primitives: 16 int8 codes (loaded, the
// low or high nibbles of 16 bytes minus a bias, Q5_0's nibbles with their fifth bits, Q6_K's
// nibbles with their two high bits), and 16-lane vectors with p += codes * x, s += x (the sums of
// a block) and acc += p * d (a block's sum scaled into the row's total). A block's products chain
// only within the block; the accumulator takes one FMA per block, so the loads and conversions of
// consecutive blocks overlap. Each target implements the primitives.

#if VEC_BITS == 512
#define SIMD_NAME "avx512"
typedef __m128i Codes;
typedef __m512 Vec;
static inline Vec vec_zero(void) { return _mm512_setzero_ps(); }
static inline float vec_sum(Vec a) { return _mm512_reduce_add_ps(a); }
static inline Vec vec_dot16(Vec p, Codes c, const float *x) {
    return _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(c)), _mm512_loadu_ps(x), p);
}
static inline Vec vec_add16(Vec s, const float *x) { return _mm512_add_ps(s, _mm512_loadu_ps(x)); }
static inline Vec vec_scale_add(Vec acc, Vec p, float d) { return _mm512_fmadd_ps(p, _mm512_set1_ps(d), acc); }
#elif VEC_BITS == 256 && defined(__AVX2__) && defined(__FMA__)
#define SIMD_NAME "avx2"
typedef __m128i Codes;
typedef struct { __m256 lo, hi; } Vec;
static inline Vec vec_zero(void) { return (Vec){_mm256_setzero_ps(), _mm256_setzero_ps()}; }
static inline float vec_sum(Vec a) {
    __m256 s = _mm256_add_ps(a.lo, a.hi);
    __m128 q = _mm_add_ps(_mm256_castps256_ps128(s), _mm256_extractf128_ps(s, 1));
    q = _mm_add_ps(q, _mm_movehl_ps(q, q));
    q = _mm_add_ss(q, _mm_movehdup_ps(q));
    return _mm_cvtss_f32(q);
}
static inline __m256 cvt8(__m128i c8) { return _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(c8)); }
static inline Vec vec_dot16(Vec p, Codes c, const float *x) {
    return (Vec){_mm256_fmadd_ps(cvt8(c), _mm256_loadu_ps(x), p.lo),
                 _mm256_fmadd_ps(cvt8(_mm_srli_si128(c, 8)), _mm256_loadu_ps(x + 8), p.hi)};
}
static inline Vec vec_add16(Vec s, const float *x) {
    return (Vec){_mm256_add_ps(s.lo, _mm256_loadu_ps(x)), _mm256_add_ps(s.hi, _mm256_loadu_ps(x + 8))};
}
static inline Vec vec_scale_add(Vec acc, Vec p, float d) {
    __m256 vd = _mm256_set1_ps(d);
    return (Vec){_mm256_fmadd_ps(p.lo, vd, acc.lo), _mm256_fmadd_ps(p.hi, vd, acc.hi)};
}
#else
#define SIMD_NAME "scalar"
typedef struct { int8_t v[16]; } Codes;
typedef struct { float v[16]; } Vec;
static inline Vec vec_zero(void) { return (Vec){{0}}; }
static inline float vec_sum(Vec a) {
    float s = 0.0f;
    for (int i = 0; i < 16; i++) s += a.v[i];
    return s;
}
static inline Vec vec_dot16(Vec p, Codes c, const float *x) {
    for (int i = 0; i < 16; i++) p.v[i] += c.v[i] * x[i];
    return p;
}
static inline Vec vec_add16(Vec s, const float *x) {
    for (int i = 0; i < 16; i++) s.v[i] += x[i];
    return s;
}
static inline Vec vec_scale_add(Vec acc, Vec p, float d) {
    for (int i = 0; i < 16; i++) acc.v[i] += p.v[i] * d;
    return acc;
}
#endif

#if VEC_BITS == 512 || (VEC_BITS == 256 && defined(__AVX2__) && defined(__FMA__))
#define CODES_SIMD 1
static inline Codes codes_i8(const uint8_t *p) { return _mm_loadu_si128((const __m128i *)p); }
// (p[i] >> 4 high) & 15
static inline __m128i nibbles16(const uint8_t *p, int high) {
    __m128i b = _mm_loadu_si128((const __m128i *)p);
    if (high) b = _mm_srli_epi16(b, 4);
    return _mm_and_si128(b, _mm_set1_epi8(0x0F));
}
static inline Codes codes_nibbles(const uint8_t *p, int high, int bias) {
    return _mm_sub_epi8(nibbles16(p, high), _mm_set1_epi8((char)bias));
}
// 16 bytes, byte i = 0x10 where bit i of bits16 is set, else 0
static inline __m128i bits16_to_0x10(uint32_t bits16) {
    const __m128i spread = _mm_setr_epi8(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1);
    const __m128i bit = _mm_setr_epi8(1, 2, 4, 8, 16, 32, 64, -128, 1, 2, 4, 8, 16, 32, 64, -128);
    __m128i b = _mm_and_si128(_mm_shuffle_epi8(_mm_cvtsi32_si128((int)bits16), spread), bit);
    return _mm_and_si128(_mm_cmpeq_epi8(b, bit), _mm_set1_epi8(0x10));
}
// Q5_0's 16 weights of one half: nibbles | fifth bits << 4, minus 16
static inline Codes codes_q5(const uint8_t *qs, uint32_t qh, int high) {
    __m128i hb = bits16_to_0x10(high ? qh >> 16 : qh & 0xFFFF);
    return _mm_sub_epi8(_mm_or_si128(nibbles16(qs, high), hb), _mm_set1_epi8(16));
}
// Q6_K: ((ql >> 4 high) & 15) | ((qh >> shift) & 3) << 4, minus 32, for 16 weights
static inline Codes codes_q6(const uint8_t *ql, const uint8_t *qh, int high, int shift) {
    __m128i h = _mm_and_si128(_mm_srli_epi16(_mm_loadu_si128((const __m128i *)qh), shift), _mm_set1_epi8(3));
    return _mm_sub_epi8(_mm_or_si128(nibbles16(ql, high), _mm_slli_epi16(h, 4)), _mm_set1_epi8(32));
}
#else
#define CODES_SIMD 0
static inline Codes codes_i8(const uint8_t *p) {
    Codes c;
    memcpy(c.v, p, 16);
    return c;
}
static inline Codes codes_nibbles(const uint8_t *p, int high, int bias) {
    Codes c;
    for (int i = 0; i < 16; i++) c.v[i] = (int8_t)(((high ? p[i] >> 4 : p[i]) & 0x0F) - bias);
    return c;
}
static inline Codes codes_q5(const uint8_t *qs, uint32_t qh, int high) {
    Codes c;
    for (int i = 0; i < 16; i++)
        c.v[i] = (int8_t)((((high ? qs[i] >> 4 : qs[i]) & 0x0F) | (int)((qh >> (i + 16 * high)) & 1) << 4) - 16);
    return c;
}
static inline Codes codes_q6(const uint8_t *ql, const uint8_t *qh, int high, int shift) {
    Codes c;
    for (int i = 0; i < 16; i++) c.v[i] = (int8_t)((((high ? ql[i] >> 4 : ql[i]) & 0x0F) | ((qh[i] >> shift) & 3) << 4) - 32);
    return c;
}
#endif

const char *quant_simd_name(void) { return SIMD_NAME; }

static float dot_q8_0(DType t, const uint8_t *b, const float *x, int n) {
    (void)t;
    Vec acc = vec_zero();
    for (int k = 0; k < n / 32; k++, b += 34, x += 32) {
        Vec p = vec_dot16(vec_dot16(vec_zero(), codes_i8(b + 2), x), codes_i8(b + 18), x + 16);
        acc = vec_scale_add(acc, p, half_at(b));
    }
    return vec_sum(acc);
}

static float dot_q4_0(DType t, const uint8_t *b, const float *x, int n) {
    (void)t;
    Vec acc = vec_zero();
    for (int k = 0; k < n / 32; k++, b += 18, x += 32) {
        Vec p = vec_dot16(vec_dot16(vec_zero(), codes_nibbles(b + 2, 0, 8), x), codes_nibbles(b + 2, 1, 8), x + 16);
        acc = vec_scale_add(acc, p, half_at(b));
    }
    return vec_sum(acc);
}

static float dot_q5_0(DType t, const uint8_t *b, const float *x, int n) {
    (void)t;
    Vec acc = vec_zero();
    for (int k = 0; k < n / 32; k++, b += 22, x += 32) {
        uint32_t qh = u32_at(b + 2);
        Vec p = vec_dot16(vec_dot16(vec_zero(), codes_q5(b + 6, qh, 0), x), codes_q5(b + 6, qh, 1), x + 16);
        acc = vec_scale_add(acc, p, half_at(b));
    }
    return vec_sum(acc);
}

// sum over a sub-block of (d sc q - dmin m) x = (d sc) * sum q x - (dmin m) * sum x
static float dot_q4_k(DType t, const uint8_t *b, const float *x, int n) {
    (void)t;
    Vec acc = vec_zero(), acc_m = vec_zero();
    for (int k = 0; k < n / QK; k++, b += Q4K_BYTES) {
        float d = half_at(b), dmin = half_at(b + 2);
        for (int j = 0; j < 8; j++, x += 32) {
            const uint8_t *q = b + 16 + 32 * (j / 2);
            int sc, m, high = j & 1;
            k4_scale_min(b + 4, j, &sc, &m);
            Vec p = vec_dot16(vec_dot16(vec_zero(), codes_nibbles(q, high, 0), x), codes_nibbles(q + 16, high, 0), x + 16);
            acc = vec_scale_add(acc, p, d * sc);
            acc_m = vec_scale_add(acc_m, vec_add16(vec_add16(vec_zero(), x), x + 16), dmin * m);
        }
    }
    return vec_sum(acc) - vec_sum(acc_m);
}

// 16 weights at a time, each 16 with its scale: sum (d sc) * sum (q - 32) x
static float dot_q6_k(DType t, const uint8_t *b, const float *x, int n) {
    (void)t;
    Vec acc = vec_zero();
    for (int k = 0; k < n / QK; k++, b += Q6K_BYTES) {
        float d = half_at(b + 208);
        for (int h = 0; h < 2; h++, x += 128) {
            const uint8_t *ql = b + 64 * h, *qh = b + 128 + 32 * h;
            const int8_t *sc = (const int8_t *)(b + 192 + 8 * h);
            for (int c = 0; c < 4; c++)
                for (int g = 0; g < 2; g++) {
                    Codes q = codes_q6(ql + 32 * (c & 1) + 16 * g, qh + 16 * g, c >> 1, 2 * c);
                    acc = vec_scale_add(acc, vec_dot16(vec_zero(), q, x + 32 * c + 16 * g), d * sc[2 * c + g]);
                }
        }
    }
    return vec_sum(acc);
}

static float dot_int8(DType t, const uint8_t *b, const float *x, int n) {
    (void)t;
    float s = float_at(b);
    const uint8_t *q = b + 4;
    Vec p0 = vec_zero(), p1 = vec_zero(); // one scale for the row: two chains of products
    int j = 0;
    for (; j + 32 <= n; j += 32) {
        p0 = vec_dot16(p0, codes_i8(q + j), x + j);
        p1 = vec_dot16(p1, codes_i8(q + j + 16), x + j + 16);
    }
    float tail = 0.0f;
    for (; j < n; j++) tail += (int8_t)q[j] * x[j];
    return s * (vec_sum(p0) + vec_sum(p1) + tail);
}

// int4-gG groups and Q4_1 blocks: sum over a group of (q d + m) x = d * sum q x + m * sum x
static float dot_int4(DType t, const uint8_t *b, const float *x, int n) {
    int G = dtype_block_elems(t, n);
    Vec acc = vec_zero(), acc_m = vec_zero();
    float tail = 0.0f;
    for (int k = 0; k * G < n; k++) {
        int len = block_len(G, n, k), half = len / 2, j = 0;
        const float *xg = x + (size_t)k * G;
        float d = half_at(b), m = half_at(b + 2);
        Vec p = vec_zero(), sx = vec_zero();
        for (; j + 16 <= half; j += 16) {
            p = vec_dot16(vec_dot16(p, codes_nibbles(b + 4 + j, 0, 0), xg + j), codes_nibbles(b + 4 + j, 1, 0), xg + half + j);
            sx = vec_add16(vec_add16(sx, xg + j), xg + half + j);
        }
        acc = vec_scale_add(acc, p, d);
        acc_m = vec_scale_add(acc_m, sx, m);
        for (; j < half; j++)
            tail += ((b[4 + j] & 0x0F) * d + m) * xg[j] + ((b[4 + j] >> 4) * d + m) * xg[half + j];
        b += dtype_block_bytes(t, len);
    }
    return vec_sum(acc) + vec_sum(acc_m) + tail;
}

static float dot_plain_f32(DType t, const uint8_t *row, const float *x, int n) {
    (void)t;
    return dot_f32((const float *)row, x, n);
}

float dot_row(DType t, const void *row, const float *x, int n) { return cpu_kernels("dot_row", t)->dot(t, row, x, n); }

// ---- activation formats: ggml's vec_dot types (layouts in quant.h) ---------------------------

enum { Q8_0_BYTES = 34, Q8_1_BYTES = 36, Q8_K_BYTES = 292 };

const char *act_type_name(ActType a) {
    switch (a) {
    case ACT_Q8_0: return "q8_0";
    case ACT_Q8_1: return "q8_1";
    case ACT_Q8_K: return "q8_k";
    default: return "none";
    }
}

static void check_act(const char *what, ActType a) {
    if (a != ACT_Q8_0 && a != ACT_Q8_1 && a != ACT_Q8_K) die("%s: %d is not an activation format", what, (int)a);
}

int act_block_elems(ActType a) {
    check_act("act_block_elems", a);
    return a == ACT_Q8_K ? QK : 32;
}

size_t act_row_bytes(ActType a, int n) {
    check_act("act_row_bytes", a);
    int B = act_block_elems(a);
    size_t bytes = a == ACT_Q8_0 ? Q8_0_BYTES : a == ACT_Q8_1 ? Q8_1_BYTES : Q8_K_BYTES;
    return n > 0 ? (size_t)((n + B - 1) / B) * bytes : 0;
}

// An int8 code from v, rounded half to even as x86's _mm256_round_ps(v, _MM_ROUND_NEAREST) and
// ggml's nearest_int do. The clamp to [-127, 127] changes no finite input of the formats below
// (|v| <= 127 up to rounding) and keeps a NaN or infinite one (from a NaN or inf activation)
// from being an undefined conversion.
static inline int8_t round_code(float v) {
    v = v < 127.0f ? v : 127.0f; // NaN -> 127
    v = v > -127.0f ? v : -127.0f;
    return (int8_t)rintf(v);
}

// Whole blocks go 16 values at a time: at 512 bits as one AVX-512 vector, at 256 as two AVX2 ones,
// whose lanes run round_code's and the scans' operations (x86's max and min return their second
// operand on a NaN, which is how fmaxf skips a NaN and round_code sends one to 127; the maxima and
// integer sums do not depend on their order), elsewhere as the plain loops.
#if VEC_BITS == 256 && defined(__AVX2__)
static inline __m256 abs8(const float *x) { return _mm256_andnot_ps(_mm256_set1_ps(-0.0f), _mm256_loadu_ps(x)); }
// round_code(x * scale) of 8 values, as int32
static inline __m256i codes8(const float *x, float scale) {
    __m256 v = _mm256_mul_ps(_mm256_loadu_ps(x), _mm256_set1_ps(scale));
    v = _mm256_max_ps(_mm256_min_ps(v, _mm256_set1_ps(127.0f)), _mm256_set1_ps(-127.0f));
    return _mm256_cvtps_epi32(_mm256_round_ps(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
}
#endif
static inline float amax16(const float *x, float m) { // max(m, |x|) over 16 values, NaNs skipped
#if VEC_BITS == 512
    return fmaxf(m, _mm512_reduce_max_ps(_mm512_max_ps(_mm512_abs_ps(_mm512_loadu_ps(x)), _mm512_setzero_ps())));
#elif VEC_BITS == 256 && defined(__AVX2__)
    __m256 z = _mm256_setzero_ps(), a = _mm256_max_ps(_mm256_max_ps(abs8(x), z), _mm256_max_ps(abs8(x + 8), z));
    __m128 h = _mm_max_ps(_mm256_castps256_ps128(a), _mm256_extractf128_ps(a, 1));
    h = _mm_max_ps(h, _mm_movehl_ps(h, h));
    return fmaxf(m, _mm_cvtss_f32(_mm_max_ss(h, _mm_movehdup_ps(h))));
#else
    for (int j = 0; j < 16; j++) m = fmaxf(m, fabsf(x[j]));
    return m;
#endif
}

// round_code(x * scale) of 16 values into q; returns their sum
static inline int codes16(int8_t *q, const float *x, float scale) {
#if VEC_BITS == 512
    __m512 v = _mm512_mul_ps(_mm512_loadu_ps(x), _mm512_set1_ps(scale));
    v = _mm512_max_ps(_mm512_min_ps(v, _mm512_set1_ps(127.0f)), _mm512_set1_ps(-127.0f));
    __m512i c = _mm512_cvtps_epi32(_mm512_roundscale_ps(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
    _mm_storeu_si128((__m128i *)q, _mm512_cvtepi32_epi8(c));
    return _mm512_reduce_add_epi32(c);
#elif VEC_BITS == 256 && defined(__AVX2__)
    __m256i a = codes8(x, scale), b = codes8(x + 8, scale);
    // packs work within 128-bit halves: a0-3 b0-3 | a4-7 b4-7, put back in order as a0-7 | b0-7
    __m256i p = _mm256_permute4x64_epi64(_mm256_packs_epi32(a, b), 0xD8);
    _mm_storeu_si128((__m128i *)q, _mm_packs_epi16(_mm256_castsi256_si128(p), _mm256_extracti128_si256(p, 1)));
    __m128i t = _mm_add_epi32(_mm256_castsi256_si128(_mm256_add_epi32(a, b)), _mm256_extracti128_si256(_mm256_add_epi32(a, b), 1));
    t = _mm_add_epi32(t, _mm_shuffle_epi32(t, 0x4E));
    return _mm_cvtsi128_si32(_mm_add_epi32(t, _mm_shuffle_epi32(t, 0xB1)));
#else
    int sum = 0;
    for (int j = 0; j < 16; j++) sum += q[j] = round_code(x[j] * scale);
    return sum;
#endif
}

// Q8_0 (q at b + 2) and Q8_1 (s at b + 2, q at b + 4): ggml-cpu's x86 quantize_row_q8_0 / _q8_1
// (AVX and AVX2 builds: id = 127 / amax, codes rounded half to even; its scalar _ref builds use
// 1 / d and roundf, which can differ by a code on ties); a short last block is zero-padded.
static void act_q8_block(uint8_t *b, const float *x, int len, int with_sum) {
    float amax = 0.0f;
    int8_t *q = (int8_t *)(b + (with_sum ? 4 : 2));
    int sum = 0;
    if (len == 32) {
        amax = amax16(x + 16, amax16(x, 0.0f));
    } else {
        for (int j = 0; j < len; j++) amax = fmaxf(amax, fabsf(x[j]));
    }
    float d = amax / 127.0f, id = amax != 0.0f ? 127.0f / amax : 0.0f;
    if (len == 32) {
        sum = codes16(q, x, id) + codes16(q + 16, x + 16, id);
    } else {
        for (int j = 0; j < 32; j++) {
            q[j] = j < len ? round_code(x[j] * id) : 0;
            sum += q[j];
        }
    }
    put_half(b, d);
    if (with_sum) put_half(b + 2, d * (float)sum);
}

// The first of x's len values of largest magnitude (NaNs skipped; 0 for none), its magnitude in
// *amax: in a whole Q8_K block the magnitude first, then the first value that has it.
static float largest_magnitude(const float *x, int len, float *amax) {
    float a = 0.0f, max = 0.0f;
    if (len == QK) {
        for (int j = 0; j < QK; j += 16) a = amax16(x + j, a);
        for (int j = 0; j < QK && a != 0.0f; j++)
            if (fabsf(x[j]) == a) {
                max = x[j];
                break;
            }
    } else {
        for (int j = 0; j < len; j++)
            if (fabsf(x[j]) > a) a = fabsf(x[j]), max = x[j];
    }
    *amax = a;
    return max;
}

// Q8_K: ggml's quantize_row_q8_K_ref (which ggml-cpu's quantize_row_q8_K is on x86).
static void act_q8_k_block(uint8_t *b, const float *x, int len) {
    float amax, max = largest_magnitude(x, len, &amax);
    int8_t *q = (int8_t *)(b + 4);
    int16_t bsums[16] = {0};
    float d = 0.0f;
    if (amax != 0.0f) {
        float iscale = -127.0f / max;
        if (len == QK) {
            for (int g = 0; g < 16; g++) bsums[g] = (int16_t)codes16(q + 16 * g, x + 16 * g, iscale);
        } else {
            for (int j = 0; j < QK; j++) q[j] = j < len ? round_code(iscale * x[j]) : 0;
            for (int j = 0; j < QK; j++) bsums[j / 16] = (int16_t)(bsums[j / 16] + q[j]);
        }
        d = 1.0f / iscale;
    } else {
        memset(q, 0, QK);
    }
    memcpy(b, &d, sizeof d);
    memcpy(b + 4 + QK, bsums, sizeof bsums);
}

void quantize_act_row(ActType a, void *dst, const float *x, int n) {
    uint8_t *b = dst;
    int B = act_block_elems(a);
    size_t bytes = act_row_bytes(a, B);
    for (int k = 0; k * B < n; k++, b += bytes) {
        int len = block_len(B, n, k);
        const float *xb = x + (size_t)k * B;
        if (a == ACT_Q8_K) act_q8_k_block(b, xb, len);
        else act_q8_block(b, xb, len, a == ACT_Q8_1);
    }
}

// ---- integer dot products: a stored row times a quantised activation row --------------------
// One mechanism serves every type: a block's (or sub-block's) weight codes are unpacked to 32
// int8 with SIMD (I8x32), then isum_add multiplies them with the activation's 32 int8 codes and
// adds the products, exactly, into 8 int32 lanes (ISum; lane k takes codes 4k .. 4k + 3, as
// ggml's mul_sum_i8_pairs does), each half of 16 codes times its own integer scale where the
// format has one (Q4_K's per 32, Q6_K's per 16). facc_fma_row adds ISum's lanes times a block's
// fp32 scale for that row (RowScales) into 8 fp32 lanes (FAcc), summed at the end. x86 multiplies
// unsigned by signed bytes (VNNI's dpbusd, AVX2's maddubs), so the products are taken as |w| times
// x carrying w's sign (isum_add; isum_add_unsigned where the codes are unsigned already);
// |-128| = 128 fits an unsigned byte and the activation codes lie in [-127, 127], so nothing
// overflows or saturates (maddubs' int16 pair sums stay within 2 * 128 * 127; a lane of a
// super-block within 8 * 4 * 128 * 32 * 127 < 2^31).
//
// The VNNI forms at VEC_BITS 512 (AVX512-VNNI, else AVX-VNNI), and AVX-VNNI on a 256-bit machine
// without AVX-512; otherwise AVX2's maddubs, so the 256-bit build of make test runs maddubs on an
// AVX-512 machine. Lanes, scales and sums are ggml-cpu's x86 kernels' (quant.h), so the SIMD builds
// round as llama.cpp's vec_dot does. The scalar build sums each block in one int32 and adds
// d * sum in fp32, the same integers in another float order.

#if VEC_BITS >= 256 && defined(__AVX2__) && defined(__FMA__)
#if VEC_BITS == 512 && defined(__AVX512VNNI__) && defined(__AVX512VL__)
#define INT_DOT_NAME "avx512-vnni"
#define INT_DOT_VNNI 1
static inline __m256i dot_u8s8(__m256i u, __m256i s) { return _mm256_dpbusd_epi32(_mm256_setzero_si256(), u, s); }
#elif defined(__AVXVNNI__) && (VEC_BITS == 512 || !defined(__AVX512F__))
#define INT_DOT_NAME "avx-vnni"
#define INT_DOT_VNNI 1
static inline __m256i dot_u8s8(__m256i u, __m256i s) { return _mm256_dpbusd_avx_epi32(_mm256_setzero_si256(), u, s); }
#else
#define INT_DOT_NAME "avx2"
#define INT_DOT_VNNI 0
#endif
#define INT_DOT_SIMD 1
typedef __m256i I8x32;
typedef __m256i ISum;
typedef __m256 FAcc;
static inline I8x32 i8_load(const uint8_t *p) { return _mm256_loadu_si256((const __m256i *)p); }
// 16 bytes of nibble pairs: codes 0..15 the low nibbles, 16..31 the high ones, minus bias
// (the 16 bytes loaded into both halves, the upper half's shifted down a nibble: one shift, one
// blend and one mask)
static inline I8x32 i8_nibble_pairs(const uint8_t *p, int bias) {
    __m256i b = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)p));
    __m256i v = _mm256_and_si256(_mm256_blend_epi32(b, _mm256_srli_epi16(b, 4), 0xF0), _mm256_set1_epi8(0x0F));
    return bias ? _mm256_sub_epi8(v, _mm256_set1_epi8((char)bias)) : v;
}
// the low (high = 0) or high nibbles of 32 bytes
static inline I8x32 i8_nibbles(const uint8_t *p, int high) {
    __m256i b = i8_load(p);
    if (high) b = _mm256_srli_epi16(b, 4);
    return _mm256_and_si256(b, _mm256_set1_epi8(0x0F));
}
// Q5_0: nibble pairs | bit j of qh << 4, minus 16
static inline I8x32 i8_q5(const uint8_t *qs, const uint8_t *qh) {
    const __m256i spread = _mm256_setr_epi8(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1,  //
                                            2, 2, 2, 2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3);
    const __m256i bit = _mm256_set1_epi64x((long long)0x8040201008040201ull);
    __m256i set = _mm256_cmpeq_epi8(_mm256_and_si256(_mm256_shuffle_epi8(_mm256_set1_epi32((int)u32_at(qh)), spread), bit), bit);
    // code - 16: the nibble where the bit is set, else the nibble with 0xF0 or'd in (n - 16 as int8)
    return _mm256_or_si256(i8_nibble_pairs(qs, 0), _mm256_andnot_si256(set, _mm256_set1_epi8((char)0xF0)));
}
// Q6_K's unsigned codes 0..63, ((ql >> 4 high) & 15) | ((qh >> shift) & 3) << 4, for 32 weights
// (the -32 is taken off the sums: isum_sub_q6_offset)
static inline I8x32 i8_q6(const uint8_t *ql, const uint8_t *qh, int high, int shift) {
    __m256i h = _mm256_and_si256(_mm256_srli_epi16(i8_load(qh), shift), _mm256_set1_epi8(3));
    return _mm256_or_si256(i8_nibbles(ql, high), _mm256_slli_epi16(h, 4));
}
static inline ISum isum_zero(void) { return _mm256_setzero_si256(); }
// s + sc_lo * (u's bytes 0..15 . v) + sc_hi * (bytes 16..31 . v), lane by lane, u unsigned and v
// signed bytes (one = 1: no scales)
static inline ISum isum_add_u8(ISum s, __m256i u, __m256i v, int sc_lo, int sc_hi, int one) {
#if INT_DOT_VNNI
    __m256i p = dot_u8s8(u, v); // lanes 0..3: codes 0..15, lanes 4..7: codes 16..31
    if (!one) p = _mm256_mullo_epi32(p, _mm256_setr_epi32(sc_lo, sc_lo, sc_lo, sc_lo, sc_hi, sc_hi, sc_hi, sc_hi));
#else
    __m256i sc = one ? _mm256_set1_epi16(1) : _mm256_set_m128i(_mm_set1_epi16((short)sc_hi), _mm_set1_epi16((short)sc_lo));
    __m256i p = _mm256_madd_epi16(_mm256_maddubs_epi16(u, v), sc);
#endif
    return _mm256_add_epi32(s, p);
}
// s + sc_lo * (codes 0..15 . x) + sc_hi * (codes 16..31 . x), lane by lane (one = 1: no scales)
static inline ISum isum_add(ISum s, I8x32 w, const uint8_t *x, int sc_lo, int sc_hi, int one) {
    return isum_add_u8(s, _mm256_sign_epi8(w, w), _mm256_sign_epi8(i8_load(x), w), sc_lo, sc_hi, one);
}
// the same for codes known to lie in 0..127 (Q4_1's, Q4_K's, Q6_K's unsigned ones): they multiply
// the activation codes as they are, without the sign transfer (the same integers: a zero code's
// products are zero either way)
static inline ISum isum_add_unsigned(ISum s, I8x32 w, const uint8_t *x, int sc_lo, int sc_hi, int one) {
    return isum_add_u8(s, w, i8_load(x), sc_lo, sc_hi, one);
}
// Q6_K's offset: lane k -= 32 * (bsums[2k] scales[2k] + bsums[2k + 1] scales[2k + 1])
static inline ISum isum_sub_q6_offset(ISum s, const uint8_t *bsums, const int8_t *scales) {
    __m256i b = _mm256_loadu_si256((const __m256i *)bsums), sc = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)scales));
    return _mm256_sub_epi32(s, _mm256_slli_epi32(_mm256_madd_epi16(b, sc), 5));
}
static inline FAcc facc_zero(void) { return _mm256_setzero_ps(); }
static inline float facc_sum(FAcc a) {
    __m128 q = _mm_add_ps(_mm256_extractf128_ps(a, 1), _mm256_castps256_ps128(a));
    q = _mm_add_ps(q, _mm_movehl_ps(q, q));
    q = _mm_add_ss(q, _mm_movehdup_ps(q));
    return _mm_cvtss_f32(q);
}
// Q4_K's min terms: 4 fp32 lanes, lane l += d * (m[2l] B[2l] + m[2l + 1] B[2l + 1]), as ggml's,
// B[j] = bsums[2j] + bsums[2j + 1] (an activation super-block's 16 int16 sums; |B| <= 32 * 127
// fits the int16 add). K4Mins: a weight super-block's 8 mins as int16.
typedef __m128 MAcc;
typedef __m128i K4Mins;
static inline K4Mins k4_mins(const uint8_t m[8]) { return _mm_cvtepu8_epi16(_mm_loadl_epi64((const __m128i *)m)); }
static inline MAcc macc_zero(void) { return _mm_setzero_ps(); }
static inline MAcc macc_fma_mins(MAcc acc, K4Mins m, const uint8_t *bsums, float d) {
    __m128i B = _mm_hadd_epi16(_mm_loadu_si128((const __m128i *)bsums), _mm_loadu_si128((const __m128i *)(bsums + 16)));
    return _mm_fmadd_ps(_mm_set1_ps(d), _mm_cvtepi32_ps(_mm_madd_epi16(m, B)), acc);
}
static inline float macc_sum(MAcc a) {
    a = _mm_add_ps(a, _mm_movehl_ps(a, a));
    return _mm_cvtss_f32(_mm_add_ss(a, _mm_movehdup_ps(a)));
}
// A block's scales for INT_DOT_REG_ROWS activation rows: w times the rows' fp32 activation scales
// (ActRows' table) in one multiply, kept in memory so that each row's FMA broadcasts its own with a
// load (a permute per row cost a vector uop on the busy ports: q4_1 at 8 rows ran ~20% slower).
typedef struct { float v[8]; } RowScales;
static inline RowScales row_scales(float w, const float *table) {
    RowScales d;
    _mm256_storeu_ps(d.v, _mm256_mul_ps(_mm256_set1_ps(w), _mm256_loadu_ps(table)));
    return d;
}
static inline float row_scale(RowScales d, int r) { return d.v[r]; }
// Per-row fp32 sums across blocks (q4_1's m * s terms), one row a lane, in a register.
typedef __m256 RowSums;
static inline RowSums row_sums_zero(void) { return _mm256_setzero_ps(); }
static inline RowSums row_sums_add(RowSums a, float w, const float *table) {
    return _mm256_add_ps(a, _mm256_mul_ps(_mm256_set1_ps(w), _mm256_loadu_ps(table)));
}
static inline float row_sum(RowSums a, int r) {
    float lanes[8];
    _mm256_storeu_ps(lanes, a);
    return lanes[r];
}
static inline FAcc facc_fma_row(FAcc acc, ISum s, const RowScales *d, int r) {
    return _mm256_fmadd_ps(_mm256_broadcast_ss(&d->v[r]), _mm256_cvtepi32_ps(s), acc);
}
#else
#define INT_DOT_NAME "scalar"
#define INT_DOT_SIMD 0
typedef struct { int8_t v[32]; } I8x32;
typedef int32_t ISum;
typedef float FAcc;
static inline I8x32 i8_load(const uint8_t *p) {
    I8x32 c;
    memcpy(c.v, p, 32);
    return c;
}
static inline I8x32 i8_nibble_pairs(const uint8_t *p, int bias) {
    I8x32 c;
    for (int j = 0; j < 16; j++) c.v[j] = (int8_t)((p[j] & 0x0F) - bias), c.v[j + 16] = (int8_t)((p[j] >> 4) - bias);
    return c;
}
static inline I8x32 i8_nibbles(const uint8_t *p, int high) {
    I8x32 c;
    for (int j = 0; j < 32; j++) c.v[j] = (int8_t)((high ? p[j] >> 4 : p[j]) & 0x0F);
    return c;
}
static inline I8x32 i8_q5(const uint8_t *qs, const uint8_t *qh) {
    I8x32 c = i8_nibble_pairs(qs, 0);
    uint32_t bits = u32_at(qh);
    for (int j = 0; j < 32; j++) c.v[j] = (int8_t)((c.v[j] | (int)((bits >> j) & 1) << 4) - 16);
    return c;
}
static inline I8x32 i8_q6(const uint8_t *ql, const uint8_t *qh, int high, int shift) {
    I8x32 c;
    for (int j = 0; j < 32; j++) c.v[j] = (int8_t)(((high ? ql[j] >> 4 : ql[j]) & 0x0F) | ((qh[j] >> shift) & 3) << 4);
    return c;
}
// The sum of 16 int8 x int8 products. GCC 12 (12.2) vectorises such a sum with VNNI's vpdpbusd
// where the target has it, which multiplies unsigned by signed bytes: wrong for every negative
// weight (this build on an AVX-512 VNNI machine summed garbage; test_quant_vec32 caught it). So
// the loop stays scalar under GCC: this is the scalar build's path, its speed secondary.
#if defined(__GNUC__) && !defined(__clang__)
__attribute__((noinline, optimize("no-tree-vectorize")))
#endif
static int32_t dot_i8x16(const int8_t *w, const uint8_t *x) {
    int32_t sum = 0;
    for (int j = 0; j < 16; j++) sum += w[j] * (int8_t)x[j];
    return sum;
}
static inline ISum isum_zero(void) { return 0; }
static inline ISum isum_add(ISum s, I8x32 w, const uint8_t *x, int sc_lo, int sc_hi, int one) {
    (void)one;
    return s + sc_lo * dot_i8x16(w.v, x) + sc_hi * dot_i8x16(w.v + 16, x + 16);
}
static inline ISum isum_add_unsigned(ISum s, I8x32 w, const uint8_t *x, int sc_lo, int sc_hi, int one) {
    return isum_add(s, w, x, sc_lo, sc_hi, one);
}
// (in uint32, wrapping as the SIMD lanes do, where bsums are not our quantiser's: no overflow UB)
static inline ISum isum_sub_q6_offset(ISum s, const uint8_t *bsums, const int8_t *scales) {
    int64_t off = 0;
    for (int i = 0; i < 16; i++) {
        int16_t b;
        memcpy(&b, bsums + 2 * i, 2);
        off += b * scales[i];
    }
    return (ISum)((uint32_t)s - 32u * (uint32_t)off);
}
static inline FAcc facc_zero(void) { return 0.0f; }
static inline float facc_sum(FAcc a) { return a; }
typedef float MAcc;
typedef struct { int m[8]; } K4Mins;
static inline K4Mins k4_mins(const uint8_t m[8]) {
    K4Mins k;
    for (int j = 0; j < 8; j++) k.m[j] = m[j];
    return k;
}
static inline MAcc macc_zero(void) { return 0.0f; }
static inline MAcc macc_fma_mins(MAcc acc, K4Mins m, const uint8_t *bsums, float d) {
    int16_t b[16];
    memcpy(b, bsums, sizeof b);
    int32_t sum = 0;
    for (int j = 0; j < 8; j++) sum += m.m[j] * (b[2 * j] + b[2 * j + 1]);
    return acc + d * (float)sum;
}
static inline float macc_sum(MAcc a) { return a; }
typedef struct { float v[8]; } RowScales;
static inline RowScales row_scales(float w, const float *table) {
    RowScales d;
    for (int r = 0; r < 8; r++) d.v[r] = w * table[r];
    return d;
}
static inline float row_scale(RowScales d, int r) { return d.v[r]; }
typedef RowScales RowSums;
static inline RowSums row_sums_zero(void) { return (RowSums){{0}}; }
static inline RowSums row_sums_add(RowSums a, float w, const float *table) {
    for (int r = 0; r < 8; r++) a.v[r] += w * table[r];
    return a;
}
static inline float row_sum(RowSums a, int r) { return a.v[r]; }
static inline FAcc facc_fma_row(FAcc acc, ISum s, const RowScales *d, int r) { return acc + d->v[r] * (float)s; }
#endif

// one block of 32 codes against 32 activation codes, no scales
static inline ISum isum_block(I8x32 w, const uint8_t *x) { return isum_add(isum_zero(), w, x, 1, 1, 1); }
const char *quant_int_dot_name(void) { return INT_DOT_NAME; }

static int int_dot_enabled = INT_DOT_SIMD;

int quant_int_dot_enable(int on) {
    int was = int_dot_enabled;
    int_dot_enabled = on;
    return was;
}

// The integer dots: W weight rows (rb bytes apart) against R activation rows (R <= INT_DOT_REG_ROWS;
// R = 1 is a decode step). Each weight block is decoded once, then met by every row's codes; each
// output keeps its own accumulator and sums its blocks in the single-row order, so output (w, r) is
// bit for bit what W = R = 1 gives on weight row w and activation row r alone (ggml's vec_dot,
// test_ggml_quants). W > 1 only gives the core more independent chains (a row's blocks are a chain
// of dependent FMAs, 4 cycles each on Zen 3, and q4_1's m * s sums a second); which W pays for a
// decode step is measured per type (INT_DOT_REGS). W and R are compile-time constants at every
// call, so the W * R accumulators live in registers.
#define INT_DOT_INLINE inline __attribute__((always_inline))
#define INT_DOT_MAX_W 4
#define INT_DOT_UNROLL _Pragma("GCC unroll 8") // loops over W, R and sub-blocks: unrolled, their values registers

// A decode step streams each weight row once (SmolLM2-135M's 96 MB, Gemma 3 270M's 247 MB a
// token), and the hardware prefetcher alone kept a core at about half its STREAM rate: each
// kernel asks for the weight bytes WEIGHT_PREFETCH_BYTES ahead of the block it decodes. bin/bench
// tg64 on an Intel Xeon (family 6 model 207, 2 vCPUs), two rounds, tok/s without / with 2048
// bytes ahead: SmolLM2 1 thread 39.7, 41.3 / 57.4, 51.9; Gemma 3 1 thread 18.7, 17.5 / 30.8,
// 25.5, 2 threads 33.8, 25.3 / 48.3, 43.7 (1024 and 4096 bytes fell between).
#define WEIGHT_PREFETCH_BYTES 2048
static inline void prefetch_weights(const uint8_t *b, int block_bytes) {
    for (int at = 0; at < block_bytes; at += 64) __builtin_prefetch(b + WEIGHT_PREFETCH_BYTES + at);
}

static inline const uint8_t *act_block(const ActRows *x, int r, int k, size_t block_bytes) {
    return x->q + r * x->stride + k * block_bytes;
}

// Block k's column of a scale table (ActRows): its rows' scales, one float each.
static inline const float *act_scales(const float *table, int k) { return table + k * MATVEC_MAX_ROWS; }

// Rows r0 .. r0 + INT_DOT_REG_ROWS - 1 of x (fewer at its end), its scale tables' columns with them.
#define INT_DOT_REG_ROWS 8
static inline ActRows act_rows_part(const ActRows *x, int r0) {
    int R = x->R - r0 < INT_DOT_REG_ROWS ? x->R - r0 : INT_DOT_REG_ROWS;
    return (ActRows){x->q + r0 * x->stride, x->stride, R, x->d ? x->d + r0 : NULL, x->s ? x->s + r0 : NULL};
}

// Q8_0 / Q4_0 / Q5_0 weights (decoded by `codes`) x Q8_0 activations: sumf += (d_w * d_a) * sumi
static INT_DOT_INLINE void q8_0_family_rows(const uint8_t *b, size_t rb, int W, const ActRows *x, int n, float *out,
                                            size_t os, int R, int block_bytes, I8x32 (*codes)(const uint8_t *b)) {
    FAcc acc[INT_DOT_MAX_W][INT_DOT_REG_ROWS];
    INT_DOT_UNROLL
    for (int v = 0; v < W; v++)
        INT_DOT_UNROLL
        for (int r = 0; r < R; r++) acc[v][r] = facc_zero();
    for (int k = 0; k < n / 32; k++)
        INT_DOT_UNROLL
        for (int v = 0; v < W; v++) {
            const uint8_t *bk = b + v * rb + k * block_bytes;
            prefetch_weights(bk, block_bytes);
            I8x32 w = codes(bk);
            RowScales dd = row_scales(half_at(bk), act_scales(x->d, k));
            INT_DOT_UNROLL
            for (int r = 0; r < R; r++) acc[v][r] = facc_fma_row(acc[v][r], isum_block(w, act_block(x, r, k, Q8_0_BYTES) + 2), &dd, r);
        }
    INT_DOT_UNROLL
    for (int v = 0; v < W; v++)
        INT_DOT_UNROLL
        for (int r = 0; r < R; r++) out[v + r * os] = facc_sum(acc[v][r]);
}
static inline I8x32 q8_0_codes(const uint8_t *b) { return i8_load(b + 2); }
static inline I8x32 q4_0_codes(const uint8_t *b) { return i8_nibble_pairs(b + 2, 8); }
static inline I8x32 q5_0_codes(const uint8_t *b) { return i8_q5(b + 6, b + 2); }
static inline I8x32 q4_1_codes(const uint8_t *b) { return i8_nibble_pairs(b + 4, 0); }
static INT_DOT_INLINE void q8_0_rows(const uint8_t *b, size_t rb, int W, const ActRows *x, int n, float *out, size_t os, int R) {
    q8_0_family_rows(b, rb, W, x, n, out, os, R, 34, q8_0_codes);
}
static INT_DOT_INLINE void q4_0_rows(const uint8_t *b, size_t rb, int W, const ActRows *x, int n, float *out, size_t os, int R) {
    q8_0_family_rows(b, rb, W, x, n, out, os, R, 18, q4_0_codes);
}
static INT_DOT_INLINE void q5_0_rows(const uint8_t *b, size_t rb, int W, const ActRows *x, int n, float *out, size_t os, int R) {
    q8_0_family_rows(b, rb, W, x, n, out, os, R, 22, q5_0_codes);
}

// Q4_1 x Q8_1: sumf += (d_w * d_a) * sumi + m_w * s_a (the m terms summed apart, added at the end;
// the codes are unsigned: isum_add_unsigned)
static INT_DOT_INLINE void q4_1_rows(const uint8_t *b, size_t rb, int W, const ActRows *x, int n, float *out, size_t os, int R) {
    FAcc acc[INT_DOT_MAX_W][INT_DOT_REG_ROWS];
    RowSums summs[INT_DOT_MAX_W];
    INT_DOT_UNROLL
    for (int v = 0; v < W; v++) {
        summs[v] = row_sums_zero();
        INT_DOT_UNROLL
        for (int r = 0; r < R; r++) acc[v][r] = facc_zero();
    }
    for (int k = 0; k < n / 32; k++)
        INT_DOT_UNROLL
        for (int v = 0; v < W; v++) {
            const uint8_t *bk = b + v * rb + k * 20;
            prefetch_weights(bk, 20);
            I8x32 w = q4_1_codes(bk);
            RowScales dd = row_scales(half_at(bk), act_scales(x->d, k));
            summs[v] = row_sums_add(summs[v], half_at(bk + 2), act_scales(x->s, k));
            INT_DOT_UNROLL
            for (int r = 0; r < R; r++)
                acc[v][r] = facc_fma_row(acc[v][r], isum_add_unsigned(isum_zero(), w, act_block(x, r, k, Q8_1_BYTES) + 4, 1, 1, 1), &dd, r);
        }
    INT_DOT_UNROLL
    for (int v = 0; v < W; v++)
        INT_DOT_UNROLL
        for (int r = 0; r < R; r++) out[v + r * os] = facc_sum(acc[v][r]) + row_sum(summs[v], r);
}

// ---- paired rows: two activation rows per 512-bit vector (AVX512-VNNI) -----------------------
// From R = 2 up, the Q8_0 family and Q4_1 take two activation rows per instruction: a block's 32
// weight codes fill both halves of a 512-bit vector, row r's 32 codes the low half and row r + 1's
// the high half, so one dpbusd makes both rows' 8 lane sums (the same exact integers as isum_block)
// and one FMA adds both rows' lanes times their own scales into a pair accumulator whose halves
// are the two rows' FAcc. Each half sees the single-row kernel's operations in its order, so every
// output is still bit for bit the R = 1 result. The scales come from ActRows' fp32 tables: one
// multiply scales a block for all 16 rows (d_w * d_a is exact in fp32: two fp16 significands),
// then a permute hands each pair its two rows' scales.
#if VEC_BITS == 512 && defined(__AVX512VNNI__) && defined(__AVX512BW__)
#define INT_DOT_PAIRS 1

// (lo's 32 codes, hi's 32 codes) as one vector
static inline __m512i pair_load(const uint8_t *lo, const uint8_t *hi) {
    __m256i a = _mm256_loadu_si256((const __m256i *)lo), b = _mm256_loadu_si256((const __m256i *)hi);
    return _mm512_inserti64x4(_mm512_castsi256_si512(a), b, 1);
}

// lanes 0..7 the scale of row 2p, lanes 8..15 that of row 2p + 1, from (MATVEC_MAX_ROWS) scales
static inline __m512 pair_scales(__m512 all, int p) {
    __m512i idx = _mm512_inserti64x4(_mm512_set1_epi32(2 * p), _mm256_set1_epi32(2 * p + 1), 1);
    return _mm512_permutexvar_ps(idx, all);
}

// the row in a pair's high half: 2p + 1, or 2p again for an odd R's last pair (its half unused)
static inline int pair_hi(int p, int R) { return 2 * p + 1 < R ? 2 * p + 1 : 2 * p; }

// out[r * os] and out[(r + 1) * os] (when r + 1 < R): facc_sum of each half's 8 lanes plus that
// row's add[0 or 1] where the kernel has a second sum, as the single-row kernels end
static inline void pair_store(__m512 acc, float *out, size_t os, int r, int R, const float add[2]) {
    float lo = facc_sum(_mm512_castps512_ps256(acc)), hi = facc_sum(_mm512_extractf32x8_ps(acc, 1));
    out[r * os] = add ? lo + add[0] : lo;
    if (r + 1 < R) out[(r + 1) * os] = add ? hi + add[1] : hi;
}

// Q8_0 family (signed codes: |w| times x with w's sign, as isum_add) and Q4_1 (codes 0..15 taken
// as they are; with_min: the m_w * s_a terms summed per row in fp32, as q4_1_rows does), P pairs
// of rows (an odd R's last pair repeats its row and keeps one half).
static INT_DOT_INLINE void pairs_rows(const uint8_t *b, const ActRows *x, int n, float *out, size_t os, int R, int P,
                                      int block_bytes, int act_bytes, int with_min, I8x32 (*codes)(const uint8_t *b)) {
    __m512 acc[MATVEC_MAX_ROWS / 2], summs = _mm512_setzero_ps();
#pragma GCC unroll 8
    for (int p = 0; p < P; p++) acc[p] = _mm512_setzero_ps();
    int code_at = with_min ? 4 : 2;
    for (int k = 0; k < n / 32; k++, b += block_bytes) {
        prefetch_weights(b, block_bytes);
        I8x32 w = codes(b);
        __m512i wv = _mm512_broadcast_i64x4(with_min ? w : _mm256_sign_epi8(w, w));
        __mmask64 neg = with_min ? 0 : _mm512_movepi8_mask(_mm512_broadcast_i64x4(w));
        __m512 d = _mm512_mul_ps(_mm512_set1_ps(half_at(b)), _mm512_loadu_ps(x->d + k * MATVEC_MAX_ROWS));
        if (with_min) {
            __m512 m = _mm512_mul_ps(_mm512_set1_ps(half_at(b + 2)), _mm512_loadu_ps(x->s + k * MATVEC_MAX_ROWS));
            summs = _mm512_add_ps(summs, m);
        }
#pragma GCC unroll 8 // a constant P: every pair's accumulator in a register
        for (int p = 0; p < P; p++) {
            __m512i xv = pair_load(act_block(x, 2 * p, k, act_bytes) + code_at, act_block(x, pair_hi(p, R), k, act_bytes) + code_at);
            if (!with_min) xv = _mm512_mask_sub_epi8(xv, neg, _mm512_setzero_si512(), xv);
            __m512i s = _mm512_dpbusd_epi32(_mm512_setzero_si512(), wv, xv);
            acc[p] = _mm512_fmadd_ps(pair_scales(d, p), _mm512_cvtepi32_ps(s), acc[p]);
        }
    }
    float m[MATVEC_MAX_ROWS];
    _mm512_storeu_ps(m, summs);
#pragma GCC unroll 8
    for (int p = 0; p < P; p++) pair_store(acc[p], out, os, 2 * p, R, with_min ? m + 2 * p : NULL);
}

static INT_DOT_INLINE void q8_0_pairs(const uint8_t *b, const ActRows *x, int n, float *out, size_t os, int R, int P) {
    pairs_rows(b, x, n, out, os, R, P, 34, Q8_0_BYTES, 0, q8_0_codes);
}
static INT_DOT_INLINE void q4_0_pairs(const uint8_t *b, const ActRows *x, int n, float *out, size_t os, int R, int P) {
    pairs_rows(b, x, n, out, os, R, P, 18, Q8_0_BYTES, 0, q4_0_codes);
}
static INT_DOT_INLINE void q5_0_pairs(const uint8_t *b, const ActRows *x, int n, float *out, size_t os, int R, int P) {
    pairs_rows(b, x, n, out, os, R, P, 22, Q8_0_BYTES, 0, q5_0_codes);
}
static INT_DOT_INLINE void q4_1_pairs(const uint8_t *b, const ActRows *x, int n, float *out, size_t os, int R, int P) {
    pairs_rows(b, x, n, out, os, R, P, 20, Q8_1_BYTES, 1, q4_1_codes);
}

// the 8 fp32 lanes of row r's MAcc-like half (lanes 0, 2, 4, 6 of acc's half h) as macc_sum adds them
static inline float pair_macc_sum(__m512 acc, int h) {
    __m256 half = h ? _mm512_extractf32x8_ps(acc, 1) : _mm512_castps512_ps256(acc);
    return macc_sum(_mm256_castps256_ps128(_mm256_permutevar8x32_ps(half, _mm256_setr_epi32(0, 2, 4, 6, 0, 2, 4, 6))));
}

// Q4_K x Q8_K for pairs of rows (q4_k_rows' sums): a sub-block's lane sums (|sum| <= 4 * 15 * 127
// fits int16) times its scale by madd_epi16 against (sc, 0), exact as the single-row mullo; the
// min terms m_j * (bsums[2j] + bsums[2j + 1]) by madd_epi16 of the bsums against each m_j twice,
// neighbouring sub-blocks added so that lane 2l holds the single-row kernel's MAcc lane l.
static INT_DOT_INLINE void q4_k_pairs(const uint8_t *b, const ActRows *x, int n, float *out, size_t os, int R, int P) {
    __m512 acc[MATVEC_MAX_ROWS / 2], acc_m[MATVEC_MAX_ROWS / 2];
#pragma GCC unroll 8
    for (int p = 0; p < P; p++) acc[p] = _mm512_setzero_ps(), acc_m[p] = _mm512_setzero_ps();
    for (int k = 0; k < n / QK; k++, b += Q4K_BYTES) {
        prefetch_weights(b, Q4K_BYTES);
        __m512i w[8], sc[8];
        int16_t m2[16];
        for (int j = 0; j < 8; j++) {
            int scj, mj;
            k4_scale_min(b + 4, j, &scj, &mj);
            w[j] = _mm512_broadcast_i64x4(i8_nibbles(b + 16 + 32 * (j / 2), j & 1));
            sc[j] = _mm512_set1_epi32(scj);
            m2[2 * j] = m2[2 * j + 1] = (int16_t)mj;
        }
        __m512i mins = _mm512_broadcast_i64x4(_mm256_loadu_si256((const __m256i *)m2));
        __m512 da = _mm512_loadu_ps(x->d + k * MATVEC_MAX_ROWS);
        __m512 dd = _mm512_mul_ps(_mm512_set1_ps(half_at(b)), da), dm = _mm512_mul_ps(_mm512_set1_ps(-half_at(b + 2)), da);
#pragma GCC unroll 8
        for (int p = 0; p < P; p++) {
            const uint8_t *lo = act_block(x, 2 * p, k, Q8_K_BYTES), *hi = act_block(x, pair_hi(p, R), k, Q8_K_BYTES);
            __m512i s = _mm512_setzero_si512();
            for (int j = 0; j < 8; j++) {
                __m512i q = _mm512_dpbusd_epi32(_mm512_setzero_si512(), w[j], pair_load(lo + 4 + 32 * j, hi + 4 + 32 * j));
                s = _mm512_add_epi32(s, _mm512_madd_epi16(q, sc[j]));
            }
            __m512i mb = _mm512_madd_epi16(pair_load(lo + 4 + QK, hi + 4 + QK), mins);
            mb = _mm512_add_epi32(mb, _mm512_shuffle_epi32(mb, _MM_PERM_CDAB));
            acc[p] = _mm512_fmadd_ps(pair_scales(dd, p), _mm512_cvtepi32_ps(s), acc[p]);
            acc_m[p] = _mm512_fmadd_ps(pair_scales(dm, p), _mm512_cvtepi32_ps(mb), acc_m[p]);
        }
    }
#pragma GCC unroll 8
    for (int p = 0; p < P; p++) {
        float m[2] = {pair_macc_sum(acc_m[p], 0), pair_macc_sum(acc_m[p], 1)};
        pair_store(acc[p], out, os, 2 * p, R, m);
    }
}

// (sc_lo in lanes 0..3, sc_hi in lanes 4..7 of each half) as madd_epi16's (sc, 0) int16 pairs
static inline __m512i pair_lane_scales(int sc_lo, int sc_hi) {
    int lo = sc_lo & 0xFFFF, hi = sc_hi & 0xFFFF;
    return _mm512_broadcast_i64x4(_mm256_setr_epi32(lo, lo, lo, lo, hi, hi, hi, hi));
}

// Q6_K x Q8_K for pairs of rows (q6_k_rows' sums): the unsigned codes' lane sums (|sum| <= 4 * 63
// * 127 fits int16) times each half's scale by madd_epi16, and 32 * (bsums . scales) taken off.
static INT_DOT_INLINE void q6_k_pairs(const uint8_t *b, const ActRows *x, int n, float *out, size_t os, int R, int P) {
    __m512 acc[MATVEC_MAX_ROWS / 2];
#pragma GCC unroll 8
    for (int p = 0; p < P; p++) acc[p] = _mm512_setzero_ps();
    for (int k = 0; k < n / QK; k++, b += Q6K_BYTES) {
        prefetch_weights(b, Q6K_BYTES);
        __m512i w[8], sc[8]; // sub-blocks c = 0..3 of halves h = 0, 1
        const int8_t *scales = (const int8_t *)(b + 192);
        for (int h = 0; h < 2; h++)
            for (int c = 0; c < 4; c++) {
                w[4 * h + c] = _mm512_broadcast_i64x4(i8_q6(b + 64 * h + 32 * (c & 1), b + 128 + 32 * h, c >> 1, 2 * c));
                sc[4 * h + c] = pair_lane_scales(scales[8 * h + 2 * c], scales[8 * h + 2 * c + 1]);
            }
        __m512i sc16 = _mm512_broadcast_i64x4(_mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)scales)));
        __m512 dd = _mm512_mul_ps(_mm512_loadu_ps(x->d + k * MATVEC_MAX_ROWS), _mm512_set1_ps(half_at(b + 208)));
#pragma GCC unroll 8
        for (int p = 0; p < P; p++) {
            const uint8_t *lo = act_block(x, 2 * p, k, Q8_K_BYTES), *hi = act_block(x, pair_hi(p, R), k, Q8_K_BYTES);
            __m512i s = _mm512_setzero_si512();
            for (int h = 0; h < 2; h++)
                for (int c = 0; c < 4; c++) {
                    int at = 4 + 128 * h + 32 * c;
                    __m512i q = _mm512_dpbusd_epi32(_mm512_setzero_si512(), w[4 * h + c], pair_load(lo + at, hi + at));
                    s = _mm512_add_epi32(s, _mm512_madd_epi16(q, sc[4 * h + c]));
                }
            __m512i off = _mm512_madd_epi16(pair_load(lo + 4 + QK, hi + 4 + QK), sc16);
            s = _mm512_sub_epi32(s, _mm512_slli_epi32(off, 5));
            acc[p] = _mm512_fmadd_ps(pair_scales(dd, p), _mm512_cvtepi32_ps(s), acc[p]);
        }
    }
#pragma GCC unroll 8
    for (int p = 0; p < P; p++) pair_store(acc[p], out, os, 2 * p, R, NULL);
}

// The paired kernel of a type, instantiated for each count of pairs (1 .. MATVEC_MAX_ROWS / 2) so
// that the accumulators stay in registers: a verification of k rows runs as fast per pair as a
// prefill's 16 (with a run-time count they lived on the stack: pp8 1 thread 138 tok/s).
#define PAIRS_ENTRY(type)                                                                        \
    static void pairs_##type(const uint8_t *b, const ActRows *x, int n, float *out, size_t os) { \
        switch ((x->R + 1) / 2) {                                                                \
        case 1: type##_pairs(b, x, n, out, os, x->R, 1); break;                                  \
        case 2: type##_pairs(b, x, n, out, os, x->R, 2); break;                                  \
        case 3: type##_pairs(b, x, n, out, os, x->R, 3); break;                                  \
        case 4: type##_pairs(b, x, n, out, os, x->R, 4); break;                                  \
        case 5: type##_pairs(b, x, n, out, os, x->R, 5); break;                                  \
        case 6: type##_pairs(b, x, n, out, os, x->R, 6); break;                                  \
        case 7: type##_pairs(b, x, n, out, os, x->R, 7); break;                                  \
        default: type##_pairs(b, x, n, out, os, x->R, 8); break;                                 \
        }                                                                                        \
    }
_Static_assert(MATVEC_MAX_ROWS == 16, "PAIRS_ENTRY instantiates 1 .. 8 pairs");
#else
#define INT_DOT_PAIRS 0
#endif

// The lab's int8 rows x Q8_0 activations: s * sum_k d_a,k * sumi_k; a row's last, shorter block
// goes through a zero-padded copy (its activation codes are zero-padded too).
static INT_DOT_INLINE void int8_rows(const uint8_t *b, size_t rb, int W, const ActRows *x, int n, float *out, size_t os, int R) {
    FAcc acc[INT_DOT_MAX_W][INT_DOT_REG_ROWS];
    INT_DOT_UNROLL
    for (int v = 0; v < W; v++)
        INT_DOT_UNROLL
        for (int r = 0; r < R; r++) acc[v][r] = facc_zero();
    for (int k = 0; k * 32 < n; k++)
        INT_DOT_UNROLL
        for (int v = 0; v < W; v++) {
            const uint8_t *q = b + v * rb + 4 + k * 32;
            prefetch_weights(q, 32);
            I8x32 w;
            if ((k + 1) * 32 <= n) {
                w = i8_load(q);
            } else {
                uint8_t last[32] = {0};
                memcpy(last, q, (size_t)(n - k * 32));
                w = i8_load(last);
            }
            RowScales da = row_scales(1.0f, act_scales(x->d, k));
            INT_DOT_UNROLL
            for (int r = 0; r < R; r++) acc[v][r] = facc_fma_row(acc[v][r], isum_block(w, act_block(x, r, k, Q8_0_BYTES) + 2), &da, r);
        }
    INT_DOT_UNROLL
    for (int v = 0; v < W; v++)
        INT_DOT_UNROLL
        for (int r = 0; r < R; r++) out[v + r * os] = float_at(b + v * rb) * facc_sum(acc[v][r]);
}

// Q4_K x Q8_K per super-block: sumf += (d_a * d) * sum_j sc_j sumi_j - (d_a * dmin) * sum_j m_j bsum_j,
// bsum_j = bsums[2j] + bsums[2j + 1] (the min terms in MAcc's lanes, pairs of sub-blocks, as ggml's)
static INT_DOT_INLINE void q4_k_rows(const uint8_t *b, size_t rb, int W, const ActRows *x, int n, float *out, size_t os, int R) {
    FAcc acc[INT_DOT_MAX_W][INT_DOT_REG_ROWS];
    MAcc acc_m[INT_DOT_MAX_W][INT_DOT_REG_ROWS];
    INT_DOT_UNROLL
    for (int v = 0; v < W; v++)
        INT_DOT_UNROLL
        for (int r = 0; r < R; r++) acc[v][r] = facc_zero(), acc_m[v][r] = macc_zero();
    for (int k = 0; k < n / QK; k++)
        INT_DOT_UNROLL
        for (int v = 0; v < W; v++) {
            const uint8_t *bk = b + v * rb + k * Q4K_BYTES;
            prefetch_weights(bk, Q4K_BYTES);
            I8x32 w[8];
            uint8_t sc[8], m[8];
            INT_DOT_UNROLL
            for (int j = 0; j < 8; j++) {
                int scj, mj;
                k4_scale_min(bk + 4, j, &scj, &mj);
                sc[j] = (uint8_t)scj, m[j] = (uint8_t)mj;
                w[j] = i8_nibbles(bk + 16 + 32 * (j / 2), j & 1);
            }
            K4Mins mins = k4_mins(m);
            RowScales dd = row_scales(half_at(bk), act_scales(x->d, k)), dm = row_scales(-half_at(bk + 2), act_scales(x->d, k));
            INT_DOT_UNROLL
            for (int r = 0; r < R; r++) {
                const uint8_t *xq = act_block(x, r, k, Q8_K_BYTES), *q8 = xq + 4;
                ISum s = isum_zero();
                INT_DOT_UNROLL
                for (int j = 0; j < 8; j++) s = isum_add_unsigned(s, w[j], q8 + 32 * j, sc[j], sc[j], 0);
                acc[v][r] = facc_fma_row(acc[v][r], s, &dd, r);
                acc_m[v][r] = macc_fma_mins(acc_m[v][r], mins, xq + 4 + QK, row_scale(dm, r));
            }
        }
    INT_DOT_UNROLL
    for (int v = 0; v < W; v++)
        INT_DOT_UNROLL
        for (int r = 0; r < R; r++) out[v + r * os] = facc_sum(acc[v][r]) + macc_sum(acc_m[v][r]);
}

// Q6_K x Q8_K per super-block: sumf += (d_a * d) * sum_i scales_i * sum_{16 of i} (code - 32) q,
// the products taken on the unsigned codes and 32 * sum_i scales_i bsums_i taken off each lane
// pair's share, as ggml's AVX2 kernel does (the same integers, in the same fp32 lanes).
static INT_DOT_INLINE void q6_k_rows(const uint8_t *b, size_t rb, int W, const ActRows *x, int n, float *out, size_t os, int R) {
    FAcc acc[INT_DOT_MAX_W][INT_DOT_REG_ROWS];
    INT_DOT_UNROLL
    for (int v = 0; v < W; v++)
        INT_DOT_UNROLL
        for (int r = 0; r < R; r++) acc[v][r] = facc_zero();
    for (int k = 0; k < n / QK; k++)
        INT_DOT_UNROLL
        for (int v = 0; v < W; v++) {
            const uint8_t *bk = b + v * rb + k * Q6K_BYTES;
            prefetch_weights(bk, Q6K_BYTES);
            I8x32 w[8]; // sub-block j: c = j % 4 of half h = j / 4
            INT_DOT_UNROLL
            for (int j = 0; j < 8; j++) {
                int h = j / 4, c = j % 4;
                w[j] = i8_q6(bk + 64 * h + 32 * (c & 1), bk + 128 + 32 * h, c >> 1, 2 * c);
            }
            const int8_t *sc = (const int8_t *)(bk + 192);
            RowScales dd = row_scales(half_at(bk + 208), act_scales(x->d, k));
            INT_DOT_UNROLL
            for (int r = 0; r < R; r++) {
                const uint8_t *xq = act_block(x, r, k, Q8_K_BYTES), *q8 = xq + 4;
                ISum s = isum_zero();
                INT_DOT_UNROLL
                for (int j = 0; j < 8; j++) s = isum_add_unsigned(s, w[j], q8 + 32 * j, sc[2 * j], sc[2 * j + 1], 0);
                s = isum_sub_q6_offset(s, xq + 4 + QK, sc);
                acc[v][r] = facc_fma_row(acc[v][r], s, &dd, r);
            }
        }
    INT_DOT_UNROLL
    for (int v = 0; v < W; v++)
        INT_DOT_UNROLL
        for (int r = 0; r < R; r++) out[v + r * os] = facc_sum(acc[v][r]);
}

// nrows weight rows against x's rows (R <= INT_DOT_REG_ROWS, a compile-time constant here), W at a
// time and the remainder one by one.
#define INT_DOT_GROUPS(type, R_, W_)                                                      \
    do {                                                                                  \
        int i = 0;                                                                        \
        for (; i + (W_) <= nrows; i += (W_)) type##_rows(b + i * rb, rb, W_, x, n, out + i, os, R_); \
        for (; i < nrows; i++) type##_rows(b + i * rb, rb, 1, x, n, out + i, os, R_);      \
    } while (0)

// The table's integer dots: nrows weight rows against x's R rows, INT_DOT_REG_ROWS activation rows
// at a time (each part re-reads the task's weight rows, from L1), every R instantiated apart so
// that its accumulators stay in registers. One row (a decode step) takes decode_w weight rows at
// once, two rows 2; from 3 rows on, the rows themselves are the independent chains. decode_w per
// type, measured on a 47-80 MB matrix of 576 (1024 for the k-quants) columns at 1 and 2 threads on
// an AMD EPYC Zen 3 (AVX2): q4_1, whose m * s sums make a second chain, ran 5.5 ms at 4 rows against
// 6.0-9.7 at 1; q8_0 ran 4.8-5.4 ms at 1 row against 7.0-7.8 at 2 or 4; q4_k ran as fast at 1 as at
// 2 (5.7-5.9 ms, 1 thread), q6_k faster at 1 (4.4 ms against 5.0; 2.2 against 3.1-4.7 at 2 threads).
#define INT_DOT_REGS(type, name, decode_w)                                                                 \
    static void int_dot_rows_##type(const uint8_t *b, size_t rb, int nrows, const ActRows *x, int n, float *out, \
                                    size_t os) {                                                           \
        switch (x->R) {                                                                                    \
        case 1: INT_DOT_GROUPS(type, 1, decode_w); break;                                                  \
        case 2: INT_DOT_GROUPS(type, 2, 2); break;                                                         \
        case 3: INT_DOT_GROUPS(type, 3, 1); break;                                                         \
        case 4: INT_DOT_GROUPS(type, 4, 1); break;                                                         \
        case 5: INT_DOT_GROUPS(type, 5, 1); break;                                                         \
        case 6: INT_DOT_GROUPS(type, 6, 1); break;                                                         \
        case 7: INT_DOT_GROUPS(type, 7, 1); break;                                                         \
        default: INT_DOT_GROUPS(type, 8, 1); break;                                                        \
        }                                                                                                  \
    }                                                                                                      \
    static void name(const uint8_t *b, size_t rb, int nrows, const ActRows *x, int n, float *out, size_t os) { \
        for (int r0 = 0; r0 < x->R; r0 += INT_DOT_REG_ROWS) {                                              \
            ActRows part = act_rows_part(x, r0);                                                           \
            int_dot_rows_##type(b, rb, nrows, &part, n, out + r0 * os, os);                                \
        }                                                                                                  \
    }
_Static_assert(INT_DOT_REG_ROWS == 8, "INT_DOT_REGS instantiates 1 .. 8 rows");
#define INT_DOT_ENTRY(type, decode_w) INT_DOT_REGS(type, int_dot_##type, decode_w)
// ... and where the paired kernel exists, it takes R >= 2.
#if INT_DOT_PAIRS
#define INT_DOT_PAIRED_ENTRY(type, decode_w)                                                           \
    PAIRS_ENTRY(type)                                                                                  \
    INT_DOT_REGS(type, int_dot_regs_##type, decode_w)                                                  \
    static void int_dot_##type(const uint8_t *b, size_t rb, int nrows, const ActRows *x, int n, float *out, size_t os) { \
        if (x->R == 1)                                                                                 \
            int_dot_regs_##type(b, rb, nrows, x, n, out, os);                                          \
        else                                                                                           \
            for (int i = 0; i < nrows; i++) pairs_##type(b + i * rb, x, n, out + i, os);               \
    }
#else
#define INT_DOT_PAIRED_ENTRY(type, decode_w) INT_DOT_ENTRY(type, decode_w)
#endif
INT_DOT_PAIRED_ENTRY(q8_0, 1)
INT_DOT_PAIRED_ENTRY(q4_0, 1)
INT_DOT_PAIRED_ENTRY(q5_0, 1)
INT_DOT_PAIRED_ENTRY(q4_1, 4)
INT_DOT_ENTRY(int8, 1)
INT_DOT_PAIRED_ENTRY(q4_k, 1)
INT_DOT_PAIRED_ENTRY(q6_k, 1)

// clang-format off
static const CpuType CPU_TYPES[DTYPE_COUNT] = {
    [DTYPE_F32]     = {copy_f32_in,         copy_f32_out,          dot_plain_f32, NULL,         ACT_NONE},
    [DTYPE_Q8_0]    = {quantize_q8_0,       dequantize_q8_0,       dot_q8_0,      int_dot_q8_0, ACT_Q8_0},
    [DTYPE_Q4_0]    = {quantize_q4_0,       dequantize_q4_0,       dot_q4_0,      int_dot_q4_0, ACT_Q8_0},
    [DTYPE_Q4_1]    = {quantize_int4_group, dequantize_int4_group, dot_int4,      int_dot_q4_1, ACT_Q8_1},
    [DTYPE_Q5_0]    = {quantize_q5_0,       dequantize_q5_0,       dot_q5_0,      int_dot_q5_0, ACT_Q8_0},
    [DTYPE_Q4_K]    = {NULL,                dequantize_q4_k,       dot_q4_k,      int_dot_q4_k, ACT_Q8_K},
    [DTYPE_Q6_K]    = {NULL,                dequantize_q6_k,       dot_q6_k,      int_dot_q6_k, ACT_Q8_K},
    [DTYPE_I8]      = {quantize_int8_row,   dequantize_int8_row,   dot_int8,      int_dot_int8, ACT_Q8_0},
    [DTYPE_I4_G32]  = {quantize_int4_group, dequantize_int4_group, dot_int4,      NULL,         ACT_NONE},
    [DTYPE_I4_G64]  = {quantize_int4_group, dequantize_int4_group, dot_int4,      NULL,         ACT_NONE},
    [DTYPE_I4_G128] = {quantize_int4_group, dequantize_int4_group, dot_int4,      NULL,         ACT_NONE},
    // fp16 / bf16: no CPU kernels (the CUDA backend runs them)
};
// clang-format on

static const CpuType *cpu_type(DType t) {
    if ((int)t < 0 || t >= DTYPE_COUNT) die("quant: %d is not a weight type", (int)t);
    return &CPU_TYPES[t];
}

int dtype_has_int_dot(DType t) { return cpu_type(t)->int_dot != NULL; }

ActType quant_act_type(DType t) { return cpu_type(t)->int_dot ? cpu_type(t)->act : ACT_NONE; }

// ---- matmul on typed weights ------------------------------------------------------------------

#define TILE_FLOATS (1 << 16) // prefill's float path: weight rows dequantised per sgemm, ~256 KB (L2)
#define INT_TILE_ROWS 16      // the integer path: weight rows per task, dotted 16 input rows at a time

// The kernels' scale tables beside R quantised activation rows of n columns: per group of
// MATVEC_MAX_ROWS rows, (blocks, MATVEC_MAX_ROWS) floats of d and as many of s (ActRows).
static size_t act_scales_floats(ActType a, int R, int n) {
    if (R < 1 || a == ACT_NONE) return 0;
    size_t groups = (size_t)(R + MATVEC_MAX_ROWS - 1) / MATVEC_MAX_ROWS;
    size_t blocks = (size_t)(n + act_block_elems(a) - 1) / act_block_elems(a);
    return 2 * groups * blocks * MATVEC_MAX_ROWS;
}

// Where the tables start in scratch: after the activation rows, 64-byte aligned.
static size_t act_scales_offset(ActType a, int R, int n) { return ((size_t)R * act_row_bytes(a, n) + 63) & ~(size_t)63; }

// Fill group g's tables: its rows' block scales widened to fp32, block-major (unused rows: 0).
static void act_scales_fill(float *d, float *sv, ActType a, const uint8_t *xq, size_t xb, int rows, int n) {
    int B = act_block_elems(a), blocks = (n + B - 1) / B;
    memset(d, 0, (size_t)blocks * MATVEC_MAX_ROWS * sizeof(float));
    memset(sv, 0, (size_t)blocks * MATVEC_MAX_ROWS * sizeof(float));
    size_t bytes = act_row_bytes(a, B);
    for (int r = 0; r < rows; r++)
        for (int k = 0; k < blocks; k++) {
            const uint8_t *blk = xq + r * xb + k * bytes;
            d[k * MATVEC_MAX_ROWS + r] = a == ACT_Q8_K ? float_at(blk) : half_at(blk);
            if (a == ACT_Q8_1) sv[k * MATVEC_MAX_ROWS + r] = half_at(blk + 2);
        }
}

float dot_row_int(DType t, const void *row, const void *xq, int n) {
    if (!dtype_has_int_dot(t)) die("dot_row_int: %s weights have no integer dot", dtype_name(t));
    check_row("dot_row_int", t, n);
    ActType a = cpu_type(t)->act;
    size_t table = act_scales_floats(a, 1, n) / 2;
    float *scales = mallocCheck(2 * table * sizeof(float)), out;
    act_scales_fill(scales, scales + table, a, xq, 0, 1, n);
    ActRows x = {xq, 0, 1, scales, scales + table};
    cpu_type(t)->int_dot(row, 0, 1, &x, n, &out, 1);
    free(scales);
    return out;
}

size_t matmul_typed_scratch_bytes(DType t, int R, int cols) {
    if (!dtype_is_quantized(t) || R <= 0 || cols <= 0) return 0;
    ActType a = quant_act_type(t);
    size_t scales = act_scales_floats(a, R, cols);
    size_t act = a == ACT_NONE ? 0 : act_scales_offset(a, R, cols) + scales * sizeof(float);
    if (R <= MATVEC_MAX_ROWS) return act;
    size_t tile = (size_t)(cols > TILE_FLOATS ? cols : TILE_FLOATS) * sizeof(float);
    return tile > act ? tile : act;
}

// out (R, d) += x's outlier columns (R, n) @ their fp32 weights (d, n)^T
static void add_outlier_columns(float *out, const float *x, const Tensor *w, int R) {
    const TensorOutliers *o = w->outliers;
    int d = w->rows, n = w->cols;
    PARALLEL_FOR((double)R * d * o->n, schedule(static), for (int i = 0; i < d; i++) {
        for (int r = 0; r < R; r++) {
            const float *xr = x + (size_t)r * n, *wi = o->w + (size_t)i * o->n;
            float acc = 0.0f;
            for (int k = 0; k < o->n; k++) acc += wi[k] * xr[o->cols[k]];
            out[(size_t)r * d + i] += acc;
        }
    });
}

// The integer dot at any R: the input rows quantised once into scratch, then tasks of weight rows
// (one row each for decode, INT_TILE_ROWS for prefill), each weight row dotted with the input rows
// MATVEC_MAX_ROWS at a time by one kernel call that decodes each of its blocks once. Every output
// sums as the single-row kernel does, whatever the loop order: prefill rows equal decode rows bit
// for bit.
static void matmul_int(float *out, const float *x, const Tensor *w, int R, void *scratch, const CpuType *kt) {
    int n = w->cols, d = w->rows;
    if (!scratch) die("matmul: %s weights' integer dot needs scratch", dtype_name(w->dtype));
    const uint8_t *base = w->data;
    size_t rb = dtype_row_bytes(w->dtype, n), xb = act_row_bytes(kt->act, n);
    uint8_t *xq = scratch;
    PARALLEL_FOR((double)R * n, schedule(static), for (int r = 0; r < R; r++) {
        quantize_act_row(kt->act, xq + r * xb, x + (size_t)r * n, n);
    });
    size_t table = act_scales_floats(kt->act, R, n) / 2;
    size_t per_group = (size_t)(n + act_block_elems(kt->act) - 1) / act_block_elems(kt->act) * MATVEC_MAX_ROWS;
    float *scales = (float *)(xq + act_scales_offset(kt->act, R, n));
    for (int r0 = 0; r0 < R; r0 += MATVEC_MAX_ROWS) {
        float *dg = scales + (size_t)(r0 / MATVEC_MAX_ROWS) * per_group;
        act_scales_fill(dg, dg + table, kt->act, xq + r0 * xb, xb, R - r0 < MATVEC_MAX_ROWS ? R - r0 : MATVEC_MAX_ROWS, n);
    }
    int tile = INT_TILE_ROWS, tasks = (d + tile - 1) / tile;
    PARALLEL_FOR((double)R * n * d, schedule(static), for (int task = 0; task < tasks; task++) {
        int i0 = task * tile, i1 = i0 + tile < d ? i0 + tile : d;
        for (int r0 = 0; r0 < R; r0 += MATVEC_MAX_ROWS) {
            const float *dg = scales + (size_t)(r0 / MATVEC_MAX_ROWS) * per_group;
            ActRows rows = {xq + r0 * xb, xb, R - r0 < MATVEC_MAX_ROWS ? R - r0 : MATVEC_MAX_ROWS, dg, dg + table};
            kt->int_dot(base + i0 * rb, rb, i1 - i0, &rows, n, out + (size_t)r0 * d + i0, (size_t)d);
        }
    });
}

// Decode rows in floats: each weight row read once and dotted with every input row.
static void matvec_rows(float *out, const float *x, const Tensor *w, int R, const CpuType *kt) {
    int n = w->cols, d = w->rows;
    const uint8_t *base = w->data;
    size_t rb = dtype_row_bytes(w->dtype, n);
    PARALLEL_FOR((double)R * n * d, schedule(static), for (int i = 0; i < d; i++) {
        for (int r = 0; r < R; r++) out[(size_t)r * d + i] = kt->dot(w->dtype, base + i * rb, x + (size_t)r * n, n);
    });
}

void matmul_typed(float *out, const float *x, const Tensor *w, int R, void *scratch) {
    int n = w->cols, d = w->rows;
    if (w->dtype == DTYPE_F32) {
        matmul(out, x, w->data, R, n, d);
    } else {
        check_row("matmul", w->dtype, n);
        const CpuType *kt = cpu_kernels("matmul", w->dtype);
        if (int_dot_enabled && kt->int_dot) {
            matmul_int(out, x, w, R, scratch, kt);
        } else if (R <= MATVEC_MAX_ROWS) {
            matvec_rows(out, x, w, R, kt);
        } else {
            if (!scratch) die("matmul: %s weights over %d rows need scratch", dtype_name(w->dtype), R);
            const uint8_t *base = w->data;
            size_t rb = dtype_row_bytes(w->dtype, n);
            int tile = n > TILE_FLOATS ? 1 : TILE_FLOATS / n;
            for (int i0 = 0; i0 < d; i0 += tile) {
                int rows = d - i0 < tile ? d - i0 : tile;
                dequantize_matrix(w->dtype, scratch, base + i0 * rb, rows, n); // (rows, n)
                cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, R, rows, n, 1.0f, x, n, scratch, n, 0.0f, out + i0, d);
            }
        }
    }
    if (w->outliers) add_outlier_columns(out, x, w, R);
}
