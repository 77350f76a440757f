// quant.c: the quantised weight formats (layouts in kernels/quant.h): round-to-nearest
// quantisation by ggml's rules, dequantisation, the SIMD dequantise-dot kernels of decode and
// the tiled dequantise + sgemm path of prefill. Tests: make build/tests/test_quant &&
// build/tests/test_quant
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

// ---- the formats --------------------------------------------------------------------------
// Sizes come from the traits table (kernels/dtype.c); this file holds the CPU's kernels.

// Block k of a row and its length.
static inline int block_len(int B, int n, int k) { return n - k * B < B ? n - k * B : B; }

// ---- quantisation: ggml's round-to-nearest rules (quantize_row_q8_0 / q4_0 / q4_1) ----------

static void quantize_q8_0(uint8_t *b, const float *x, int len) {
    (void)len; // always a whole block
    float amax = 0.0f;
    for (int j = 0; j < 32; j++) amax = fmaxf(amax, fabsf(x[j]));
    float d = amax / 127.0f, id = d ? 1.0f / d : 0.0f;
    put_half(b, d);
    for (int j = 0; j < 32; j++) b[2 + j] = (uint8_t)(int8_t)roundf(x[j] * id);
}

static void quantize_q4_0(uint8_t *b, const float *x, int len) {
    (void)len; // always a whole block
    float amax = 0.0f, max = 0.0f; // max: the signed value of largest magnitude
    for (int j = 0; j < 32; j++)
        if (fabsf(x[j]) > amax) amax = fabsf(x[j]), max = x[j];
    float d = max / -8.0f, id = d ? 1.0f / d : 0.0f;
    put_half(b, d);
    for (int j = 0; j < 16; j++) {
        int lo = (int8_t)(x[j] * id + 8.5f), hi = (int8_t)(x[j + 16] * id + 8.5f);
        b[2 + j] = (uint8_t)((lo < 15 ? lo : 15) | (hi < 15 ? hi : 15) << 4);
    }
}

static void quantize_int8_row(uint8_t *b, const float *x, int n) {
    float amax = 0.0f;
    for (int j = 0; j < n; j++) amax = fmaxf(amax, fabsf(x[j]));
    float s = amax / 127.0f, is = s ? 1.0f / s : 0.0f;
    memcpy(b, &s, sizeof s);
    for (int j = 0; j < n; j++) b[4 + j] = (uint8_t)(int8_t)roundf(x[j] * is);
}

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

// ---- dequantisation: one block to fp32 --------------------------------------------------------

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

static void dequantize_int8_row(float *y, const uint8_t *b, int n) {
    float s;
    memcpy(&s, b, sizeof s);
    for (int j = 0; j < n; j++) y[j] = (int8_t)b[4 + j] * s;
}

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
// The CPU backend's dispatch: for each weight type it runs, a block's quantisation and
// dequantisation, the row dot with fp32 x (decode) and, where one exists, the row dot with an
// act-q8 row (the integer dot). The layouts themselves are the traits table's (dtype.h).

typedef struct {
    void (*quantize_block)(uint8_t *b, const float *x, int len);
    void (*dequantize_block)(float *y, const uint8_t *b, int len);
    float (*dot)(DType t, const uint8_t *row, const float *x, int n);
    float (*int_dot)(const uint8_t *row, const uint8_t *xq, int n); // NULL: no integer dot
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

void quantize_row(DType t, void *dst, const float *src, int n) {
    check_row("quantize_row", t, n);
    const CpuType *kt = cpu_kernels("quantize_row", t);
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
// Every kernel below is written once over four primitives: 16 int8 codes (loaded, or the low or
// high nibbles of 16 bytes minus a bias), and 16-lane vectors with p += codes * x, s += x (the
// sums of a block) and acc += p * d (a block's sum scaled into the row's total). A block's
// products chain only within the block; the accumulator takes one FMA per block, so the loads
// and conversions of consecutive blocks overlap. Each target implements the primitives.

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
static inline Codes codes_i8(const uint8_t *p) { return _mm_loadu_si128((const __m128i *)p); }
static inline Codes codes_nibbles(const uint8_t *p, int high, int bias) {
    __m128i b = _mm_loadu_si128((const __m128i *)p);
    if (high) b = _mm_srli_epi16(b, 4);
    return _mm_sub_epi8(_mm_and_si128(b, _mm_set1_epi8(0x0F)), _mm_set1_epi8((char)bias));
}
#else
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

static float dot_int8(DType t, const uint8_t *b, const float *x, int n) {
    (void)t;
    float s;
    memcpy(&s, b, sizeof s);
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

// sum over a group of (q d + m) x = d * sum q x + m * sum x
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

// ---- integer dot products: q8_0 / int8 weights times an int8 activation row ----------------
// llama.cpp's q8_0 x q8_0 scheme: the activation row is quantised once per matmul (quant.h's
// act-q8 blocks), so a block of 32 weights costs 32 int8 x int8 products summed exactly in int32
// and one FMA by the two scales. x86 multiplies unsigned by signed bytes (VNNI's dpbusd, AVX2's
// maddubs), so the products are taken as |w| times x carrying w's sign; |-128| = 128 fits an
// unsigned byte and x's codes lie in [-127, 127], so nothing overflows or saturates (maddubs'
// int16 pair sums stay within 2 * 128 * 127).

#define ACT_BLOCK 32
#define ACT_BLOCK_BYTES (sizeof(float) + ACT_BLOCK) // { float d; int8 q[32] }

size_t act_q8_row_bytes(int n) { return (size_t)((n + ACT_BLOCK - 1) / ACT_BLOCK) * ACT_BLOCK_BYTES; }

void quantize_act_row(void *dst, const float *x, int n) {
    uint8_t *b = dst;
    for (int k = 0; k * ACT_BLOCK < n; k++, b += ACT_BLOCK_BYTES) {
        int len = block_len(ACT_BLOCK, n, k);
        const float *xb = x + (size_t)k * ACT_BLOCK;
        float amax = 0.0f;
        for (int j = 0; j < len; j++) amax = fmaxf(amax, fabsf(xb[j]));
        float d = amax / 127.0f, id = d ? 1.0f / d : 0.0f;
        memcpy(b, &d, sizeof d);
        for (int j = 0; j < ACT_BLOCK; j++) b[4 + j] = j < len ? (uint8_t)(int8_t)roundf(xb[j] * id) : 0;
    }
}

static inline float act_scale(const uint8_t *b) {
    float d;
    memcpy(&d, b, sizeof d);
    return d;
}

// IAcc: a row's running sum; iacc_block adds d * sum_j w[j] x[j] over one block of 32 codes.
#if VEC_BITS >= 256 && defined(__AVX2__) && defined(__FMA__)
#if VEC_BITS == 512 && defined(__AVX512VNNI__) && defined(__AVX512VL__)
#define INT_DOT_NAME "avx512-vnni"
static inline __m256i dot_u8s8(__m256i u, __m256i s) { return _mm256_dpbusd_epi32(_mm256_setzero_si256(), u, s); }
#elif defined(__AVXVNNI__)
#define INT_DOT_NAME "avx-vnni"
static inline __m256i dot_u8s8(__m256i u, __m256i s) { return _mm256_dpbusd_avx_epi32(_mm256_setzero_si256(), u, s); }
#else
#define INT_DOT_NAME "avx2"
static inline __m256i dot_u8s8(__m256i u, __m256i s) {
    return _mm256_madd_epi16(_mm256_maddubs_epi16(u, s), _mm256_set1_epi16(1));
}
#endif
#define INT_DOT_SIMD 1
typedef __m256 IAcc;
static inline IAcc iacc_zero(void) { return _mm256_setzero_ps(); }
static inline IAcc iacc_block(IAcc acc, const uint8_t *w, const uint8_t *x, float d) {
    __m256i wv = _mm256_loadu_si256((const __m256i *)w), xv = _mm256_loadu_si256((const __m256i *)x);
    __m256i p = dot_u8s8(_mm256_sign_epi8(wv, wv), _mm256_sign_epi8(xv, wv)); // 8 int32 sums of 4
    return _mm256_fmadd_ps(_mm256_cvtepi32_ps(p), _mm256_set1_ps(d), acc);
}
static inline float iacc_sum(IAcc a) {
    __m128 q = _mm_add_ps(_mm256_castps256_ps128(a), _mm256_extractf128_ps(a, 1));
    q = _mm_add_ps(q, _mm_movehl_ps(q, q));
    q = _mm_add_ss(q, _mm_movehdup_ps(q));
    return _mm_cvtss_f32(q);
}
#else
#define INT_DOT_NAME "scalar"
#define INT_DOT_SIMD 0
typedef float IAcc;
static inline IAcc iacc_zero(void) { return 0.0f; }
static inline IAcc iacc_block(IAcc acc, const uint8_t *w, const uint8_t *x, float d) {
    int32_t sum = 0;
    for (int j = 0; j < ACT_BLOCK; j++) sum += (int8_t)w[j] * (int8_t)x[j];
    return acc + d * (float)sum;
}
static inline float iacc_sum(IAcc a) { return a; }
#endif

const char *quant_int_dot_name(void) { return INT_DOT_NAME; }

static int int_dot_enabled = INT_DOT_SIMD;

int quant_int_dot_enable(int on) {
    int was = int_dot_enabled;
    int_dot_enabled = on;
    return was;
}

static float int_dot_q8_0(const uint8_t *b, const uint8_t *xq, int n) {
    IAcc acc = iacc_zero();
    for (int k = 0; k < n / 32; k++, b += 34, xq += ACT_BLOCK_BYTES)
        acc = iacc_block(acc, b + 2, xq + 4, half_at(b) * act_scale(xq));
    return iacc_sum(acc);
}

static float int_dot_int8(const uint8_t *b, const uint8_t *xq, int n) {
    float s;
    memcpy(&s, b, sizeof s);
    const uint8_t *q = b + 4;
    IAcc acc = iacc_zero();
    int k = 0;
    for (; (k + 1) * ACT_BLOCK <= n; k++, xq += ACT_BLOCK_BYTES)
        acc = iacc_block(acc, q + k * ACT_BLOCK, xq + 4, act_scale(xq));
    float sum = iacc_sum(acc);
    if (k * ACT_BLOCK < n) { // a row's last, shorter block (its activation codes are zero-padded)
        int32_t tail = 0;
        for (int j = k * ACT_BLOCK; j < n; j++) tail += (int8_t)q[j] * (int8_t)xq[4 + j - k * ACT_BLOCK];
        sum += act_scale(xq) * (float)tail;
    }
    return s * sum;
}

// clang-format off
static const CpuType CPU_TYPES[DTYPE_COUNT] = {
    [DTYPE_F32]     = {copy_f32_in,         copy_f32_out,          dot_plain_f32, NULL},
    [DTYPE_Q8_0]    = {quantize_q8_0,       dequantize_q8_0,       dot_q8_0,      int_dot_q8_0},
    [DTYPE_Q4_0]    = {quantize_q4_0,       dequantize_q4_0,       dot_q4_0,      NULL},
    [DTYPE_I8]      = {quantize_int8_row,   dequantize_int8_row,   dot_int8,      int_dot_int8},
    [DTYPE_I4_G32]  = {quantize_int4_group, dequantize_int4_group, dot_int4,      NULL},
    [DTYPE_I4_G64]  = {quantize_int4_group, dequantize_int4_group, dot_int4,      NULL},
    [DTYPE_I4_G128] = {quantize_int4_group, dequantize_int4_group, dot_int4,      NULL},
    // fp16 / bf16: no CPU kernels (the CUDA backend runs them)
};
// clang-format on

static const CpuType *cpu_type(DType t) {
    if ((int)t < 0 || t >= DTYPE_COUNT) die("quant: %d is not a weight type", (int)t);
    return &CPU_TYPES[t];
}

int dtype_has_int_dot(DType t) { return cpu_type(t)->int_dot != NULL; }

float dot_row_int(DType t, const void *row, const void *xq, int n) {
    if (!dtype_has_int_dot(t)) die("dot_row_int: %s weights have no integer dot", dtype_name(t));
    return cpu_type(t)->int_dot(row, xq, n);
}

// ---- matmul on typed weights ------------------------------------------------------------------

#define TILE_FLOATS (1 << 16)   // prefill: weight rows dequantised per sgemm, ~256 KB (L2)

size_t matmul_typed_scratch_bytes(DType t, int R, int cols) {
    if (!dtype_is_quantized(t)) return 0;
    size_t act = dtype_has_int_dot(t) ? (size_t)(R < MATVEC_MAX_ROWS ? R : MATVEC_MAX_ROWS) * act_q8_row_bytes(cols) : 0;
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

// Decode rows: each weight row read once and dotted with every input row, in floats or, for
// the types with an integer dot (when enabled), against the rows quantised to act-q8 first.
static void matvec_rows(float *out, const float *x, const Tensor *w, int R, void *scratch) {
    int n = w->cols, d = w->rows;
    const uint8_t *base = w->data;
    size_t rb = dtype_row_bytes(w->dtype, n);
    const CpuType *kt = cpu_kernels("matmul", w->dtype);
    if (int_dot_enabled && kt->int_dot) {
        if (!scratch) die("matmul: %s weights' integer dot needs scratch", dtype_name(w->dtype));
        size_t xb = act_q8_row_bytes(n);
        uint8_t *xq = scratch;
        for (int r = 0; r < R; r++) quantize_act_row(xq + r * xb, x + (size_t)r * n, n);
        PARALLEL_FOR((double)R * n * d, schedule(static), for (int i = 0; i < d; i++) {
            for (int r = 0; r < R; r++) out[(size_t)r * d + i] = kt->int_dot(base + i * rb, xq + r * xb, n);
        });
        return;
    }
    PARALLEL_FOR((double)R * n * d, schedule(static), for (int i = 0; i < d; i++) {
        for (int r = 0; r < R; r++) out[(size_t)r * d + i] = kt->dot(w->dtype, base + i * rb, x + (size_t)r * n, n);
    });
}

void matmul_typed(float *out, const float *x, const Tensor *w, int R, void *scratch) {
    int n = w->cols, d = w->rows;
    if (w->dtype == DTYPE_F32) {
        matmul(out, x, w->data, R, n, d);
    } else if (R <= MATVEC_MAX_ROWS) {
        check_row("matmul", w->dtype, n);
        matvec_rows(out, x, w, R, scratch);
    } else {
        check_row("matmul", w->dtype, n);
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
    if (w->outliers) add_outlier_columns(out, x, w, R);
}
