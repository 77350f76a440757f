// vec.h: the SIMD vocabulary the CPU kernels share (internal to kernels/cpu): a float vector
// as wide as the build's widest registers, a fused multiply-add on it, lane-wise max and
// e^x, and the dot products. gcc does not vectorise a float reduction without -ffast-math
// (it may not reorder the additions), and at -march=native it prefers 256-bit vectors even
// where the CPU has 512-bit ones, so the kernels that need the width write it out with these.
//
// VEC_BITS is the width: 512 where the build targets AVX-512, 256 with AVX, else 32 (one
// float: plain scalar code). `-DVEC_BITS=256` or `-DVEC_BITS=32` builds a narrower path on a
// wider machine; make test runs the kernels' tests at every width this machine can run.
#ifndef INFERLAB_KERNELS_CPU_VEC_H
#define INFERLAB_KERNELS_CPU_VEC_H

#include <math.h>
#include <stddef.h>
#include <stdint.h>
#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif

#ifndef VEC_BITS
#if defined(__AVX512F__)
#define VEC_BITS 512
#elif defined(__AVX__)
#define VEC_BITS 256
#else
#define VEC_BITS 32
#endif
#endif
#define VEC_WIDTH (VEC_BITS / 32) // floats per vector

typedef float vf __attribute__((vector_size(VEC_BITS / 8), aligned(4)));   // unaligned loads
typedef int32_t vi __attribute__((vector_size(VEC_BITS / 8), aligned(4))); // its lanes as bits
typedef signed char vc __attribute__((vector_size(VEC_WIDTH), aligned(1))); // VEC_WIDTH int8

static inline vf vf_load(const float *p) { return *(const vf *)p; }
// The first n < VEC_WIDTH lanes from p, the others 0: a ragged end in one vector operation.
static inline vf vf_load_partial(const float *p, int n) {
#if VEC_BITS == 512
    return (vf)_mm512_maskz_loadu_ps((__mmask16)((1u << n) - 1), p);
#else
    float lanes[VEC_WIDTH] = {0};
    for (int k = 0; k < n; k++) lanes[k] = p[k];
    return vf_load(lanes);
#endif
}
static inline void vf_store(float *p, vf x) { *(vf *)p = x; }
// The first n < VEC_WIDTH lanes of x to p; the memory after them is not touched.
static inline void vf_store_partial(float *p, vf x, int n) {
#if VEC_BITS == 512
    _mm512_mask_storeu_ps(p, (__mmask16)((1u << n) - 1), (__m512)x);
#else
    for (int k = 0; k < n; k++) p[k] = x[k];
#endif
}
// A loop over n floats a vector at a time takes vf_lanes(j, n) lanes at offset j: VEC_WIDTH,
// or fewer at the ragged end, which the _lanes load and store mask.
static inline int vf_lanes(size_t j, size_t n) { return n - j < VEC_WIDTH ? (int)(n - j) : VEC_WIDTH; }
static inline vf vf_load_lanes(const float *p, int lanes) {
    return lanes == VEC_WIDTH ? vf_load(p) : vf_load_partial(p, lanes);
}
static inline void vf_store_lanes(float *p, vf x, int lanes) {
    if (lanes == VEC_WIDTH) vf_store(p, x);
    else vf_store_partial(p, x, lanes);
}
static inline vf vf_splat(float x) { return x - (vf){0}; } // x - 0 is x for every x, x + 0 is not (-0)

// a * b + c, rounded once where the build has FMA (-std=c11 turns off gcc's contraction).
static inline vf vf_madd(vf a, vf b, vf c) {
#if VEC_BITS == 512
    return (vf)_mm512_fmadd_ps((__m512)a, (__m512)b, (__m512)c);
#elif VEC_BITS == 256 && defined(__FMA__)
    return (vf)_mm256_fmadd_ps((__m256)a, (__m256)b, (__m256)c);
#elif VEC_BITS == 32 && (defined(__FMA__) || defined(__ARM_FEATURE_FMA))
    return (vf){fmaf(a[0], b[0], c[0])};
#else
    return a * b + c;
#endif
}

// The larger lane of a and b; b where a is NaN (as x86's maxps).
static inline vf vf_max(vf a, vf b) {
#if VEC_BITS == 512
    return (vf)_mm512_max_ps((__m512)a, (__m512)b);
#elif VEC_BITS == 256
    return (vf)_mm256_max_ps((__m256)a, (__m256)b);
#else
    vi a_larger = a > b; // all ones where a > b (false for NaN)
    return (vf)(((vi)a & a_larger) | ((vi)b & ~a_larger));
#endif
}

static inline float vf_sum(vf x) {
    float s = 0.0f;
    for (int k = 0; k < VEC_WIDTH; k++) s += x[k];
    return s;
}

// e^x for softmax arguments x <= 0, in branch-free arithmetic (libm's expf is a scalar call,
// and at 8K tokens a head needs 67M of them). x = n ln2 + r with n = round(x / ln2) and
// |r| <= ln2 / 2; e^r by its degree-6 Taylor series (relative error < 1.3e-7 there); 2^n by
// writing n + 127 into the float's exponent bits, or 0 once that underflows (x < -87.3).
// x is clamped to -100 first, which also maps -inf, and the NaN of -inf - -inf, to exactly 0.
static inline vf vf_exp_nonpos(vf x) {
    vf xc = vf_max(x, vf_splat(-100.0f)); // NaN -> -100
    vf n = (xc * 1.44269504f + 12582912.0f) - 12582912.0f; // round to nearest via 1.5 * 2^23
    vf r = vf_madd(n, vf_splat(-0.693145752f), xc);         // ln2 in two parts (Cody-Waite)
    r = vf_madd(n, vf_splat(-1.42860677e-6f), r);
    vf p = vf_madd(r, vf_splat(1.0f / 720.0f), vf_splat(1.0f / 120.0f));
    p = vf_madd(p, r, vf_splat(1.0f / 24.0f));
    p = vf_madd(p, r, vf_splat(1.0f / 6.0f));
    p = vf_madd(p, r, vf_splat(0.5f));
    p = vf_madd(p, r, vf_splat(1.0f));
    p = vf_madd(p, r, vf_splat(1.0f));
    vi biased = __builtin_convertvector(n, vi) + 127;
    vi scale_bits = (biased & ~(biased < 0)) << 23; // 2^n, or 0 below 2^-126
    return p * (vf)scale_bits;
}

// The max of x[0 .. n) (n >= 1) into *max, and e^(x[j] - max) in place; returns the sum of
// the exps. The ragged end goes through one vector padded with -inf (whose e^x is 0), so
// every element takes the same vf_exp_nonpos. The row softmaxes and the cross-entropy share it.
static inline float vf_exp_shifted_sum(float *restrict x, int n, float *max) {
    vf m = vf_splat(-INFINITY);
    int j = 0;
    for (; j + VEC_WIDTH <= n; j += VEC_WIDTH) m = vf_max(m, vf_load(x + j));
    float tail[VEC_WIDTH];
    int rest = n - j;
    for (int k = 0; k < VEC_WIDTH; k++) tail[k] = k < rest ? x[j + k] : -INFINITY;
    m = vf_max(m, vf_load(tail));
    float mx = m[0];
    for (int k = 1; k < VEC_WIDTH; k++) mx = m[k] > mx ? m[k] : mx;
    vf sum = {0}, vmax = vf_splat(mx);
    for (j = 0; j + VEC_WIDTH <= n; j += VEC_WIDTH) {
        vf e = vf_exp_nonpos(vf_load(x + j) - vmax);
        vf_store(x + j, e);
        sum += e;
    }
    if (rest) {
        vf e = vf_exp_nonpos(vf_load(tail) - vmax);
        vf_store_partial(x + j, e, rest);
        sum += e;
    }
    *max = mx;
    return vf_sum(sum);
}

// 1 / (1 + e^-x), from e^-|x| <= 1 so that nothing overflows: 1 / (1 + e) for x >= 0,
// e / (1 + e) below.
static inline vf vf_sigmoid(vf x) {
    vf e = vf_exp_nonpos(-vf_max(x, -x));
    vf s = 1.0f / (1.0f + e);
    vi negative = x < 0;
    return (vf)(((vi)(e * s) & negative) | ((vi)s & ~negative));
}

static inline float dot_f32(const float *restrict a, const float *restrict b, int n) {
    // four independent accumulators hide the FMA latency
    vf s0 = {0}, s1 = {0}, s2 = {0}, s3 = {0};
    int j = 0;
    for (; j + 4 * VEC_WIDTH <= n; j += 4 * VEC_WIDTH) {
        s0 = vf_madd(vf_load(a + j), vf_load(b + j), s0);
        s1 = vf_madd(vf_load(a + j + VEC_WIDTH), vf_load(b + j + VEC_WIDTH), s1);
        s2 = vf_madd(vf_load(a + j + 2 * VEC_WIDTH), vf_load(b + j + 2 * VEC_WIDTH), s2);
        s3 = vf_madd(vf_load(a + j + 3 * VEC_WIDTH), vf_load(b + j + 3 * VEC_WIDTH), s3);
    }
    for (; j + VEC_WIDTH <= n; j += VEC_WIDTH) s0 = vf_madd(vf_load(a + j), vf_load(b + j), s0);
    if (j < n) s1 = vf_madd(vf_load_partial(a + j, n - j), vf_load_partial(b + j, n - j), s1);
    return vf_sum((s0 + s1) + (s2 + s3));
}

// The dot of fp32 a with int8 codes b (the int8 KV cache's keys), in dot_f32's order.
static inline float dot_f32_i8(const float *restrict a, const signed char *restrict b, int n) {
    vf s0 = {0}, s1 = {0};
    int j = 0;
    for (; j + 2 * VEC_WIDTH <= n; j += 2 * VEC_WIDTH) {
        s0 = vf_madd(vf_load(a + j), __builtin_convertvector(*(const vc *)(b + j), vf), s0);
        s1 = vf_madd(vf_load(a + j + VEC_WIDTH), __builtin_convertvector(*(const vc *)(b + j + VEC_WIDTH), vf), s1);
    }
    for (; j + VEC_WIDTH <= n; j += VEC_WIDTH)
        s0 = vf_madd(vf_load(a + j), __builtin_convertvector(*(const vc *)(b + j), vf), s0);
    if (j < n) { // the ragged end in one vector, as dot_f32's
        signed char codes[VEC_WIDTH] = {0};
        for (int k = 0; j + k < n; k++) codes[k] = b[j + k];
        s1 = vf_madd(vf_load_partial(a + j, n - j), __builtin_convertvector(*(const vc *)codes, vf), s1);
    }
    return vf_sum(s0 + s1);
}

#endif
