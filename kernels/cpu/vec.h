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

// Horizontal sums run in ggml-cpu's order, so that a reduction rounds as llama.cpp's CPU
// backend rounds it (the lab checks its forward against llama.cpp's token for token). Lanes
// are folded by halves, lane l taking lane l + h for h = W/2, W/4, ... down to 1 (what gcc's
// _mm512_reduce_add_ps does); at 256 bits ggml's dot halves once to 4 lanes and then adds
// adjacent pairs (two hadds): (a0 + a1) + (a2 + a3). `a` is an array of VEC_WIDTH floats or
// vectors. Bit-for-bit agreement holds for AVX-512 builds; ggml's AVX2 code has an exp and a
// softmax reduction of its own that the narrower widths here do not copy.
#define VEC_REDUCE_LANES(a)                                                                   \
    do {                                                                                      \
        for (int h_ = VEC_WIDTH / 2; h_ >= (VEC_BITS == 256 ? 4 : 1); h_ /= 2)                \
            for (int l_ = 0; l_ < h_; l_++) (a)[l_] = (a)[l_] + (a)[l_ + h_];                 \
        if (VEC_BITS == 256) (a)[0] = ((a)[0] + (a)[1]) + ((a)[2] + (a)[3]);                  \
    } while (0)

static inline float vf_reduce(vf x) {
    float lanes[VEC_WIDTH];
    for (int k = 0; k < VEC_WIDTH; k++) lanes[k] = x[k];
    VEC_REDUCE_LANES(lanes);
    return lanes[0];
}

static inline vf vf_min(vf a, vf b) { return -vf_max(-a, -b); }

// 2^k for integer lanes k in [-126, 127], written into the exponent bits.
static inline vf vf_pow2i(vi k) { return (vf)((k + 127) << 23); }

// e^x as ggml-cpu computes it on AVX-512 (ggml_v_expf, from Arm's optimized-routines): x =
// n ln2 + b with n = round(x / ln2) (the 1.5 * 2^23 trick, fused), b by a two-part ln2 (fused
// steps), e^b by a degree-5 polynomial in Estrin form on fused multiply-adds, times 2^n; n past
// +-192 gives inf or 0. Max error about 1.5 ulp. The 2^n scaling is done in two exact halves
// (AVX-512's scalef in portable code): rounding happens once, also for subnormal results.
// A NaN stays NaN; -inf gives 0 and +inf inf.
static inline vf vf_exp(vf x) {
    vf z = vf_madd(x, vf_splat(0x1.715476p+0f), vf_splat(0x1.8p23f));
    vf n = z - 0x1.8p23f;
    vf b = vf_madd(-n, vf_splat(0x1.62e4p-1f), x);
    b = vf_madd(-n, vf_splat(0x1.7f7d1cp-20f), b);
    vf u = b * b;
    vf hi = vf_madd(vf_madd(vf_splat(0x1.0e4020p-7f), b, vf_splat(0x1.573e2ep-5f)), u,
                    vf_madd(vf_splat(0x1.555e66p-3f), b, vf_splat(0x1.fffdb6p-2f)));
    vf j = vf_madd(hi, u, vf_madd(vf_splat(0x1.ffffecp-1f), b, vf_splat(1.0f)));
    vi k = __builtin_convertvector(vf_min(vf_max(n, vf_splat(-192.0f)), vf_splat(192.0f)), vi);
    vi k1 = k >> 1;
    vf r = j * vf_pow2i(k1) * vf_pow2i(k - k1);
    vi under = n < -192.0f, over = n > 192.0f;
    r = (vf)((vi)r & ~under);
    return (vf)(((vi)r & ~over) | ((vi)vf_splat(INFINITY) & over));
}

// e^x for softmax arguments x <= 0 (x - max), with the NaN of -inf - -inf (a row or tile with
// nothing visible yet) mapped to exactly 0, as -inf is.
static inline vf vf_exp_nonpos(vf x) { return vf_exp(vf_max(x, vf_splat(-INFINITY))); }

// The max of x[0 .. n) (n >= 1) into *max, and e^(x[j] - max) in place; returns the sum of
// the exps. ggml's soft_max order: each vector's exps are summed across lanes (vf_reduce) and
// the vector sums added in double. The ragged end goes through one vector padded with -inf
// (whose e^x is 0), so every element takes the same vf_exp: llama.cpp's rows are padded to
// a multiple of 256 keys with masked ones, whose exps are 0. The row softmaxes, attention and
// the cross-entropy share it.
static inline double vf_exp_shifted_sum(float *restrict x, int n, float *max) {
    vf m = vf_splat(-INFINITY);
    int j = 0;
    for (; j + VEC_WIDTH <= n; j += VEC_WIDTH) m = vf_max(m, vf_load(x + j));
    float tail[VEC_WIDTH];
    int rest = n - j;
    for (int k = 0; k < VEC_WIDTH; k++) tail[k] = k < rest ? x[j + k] : -INFINITY;
    m = vf_max(m, vf_load(tail));
    float mx = m[0];
    for (int k = 1; k < VEC_WIDTH; k++) mx = m[k] > mx ? m[k] : mx;
    vf vmax = vf_splat(mx);
    double sum = 0.0;
    for (j = 0; j + VEC_WIDTH <= n; j += VEC_WIDTH) {
        vf e = vf_exp_nonpos(vf_load(x + j) - vmax);
        vf_store(x + j, e);
        sum += vf_reduce(e);
    }
    if (rest) {
        vf e = vf_exp_nonpos(vf_load(tail) - vmax);
        vf_store_partial(x + j, e, rest);
        sum += vf_reduce(e);
    }
    *max = mx;
    return sum;
}

// 1 / (1 + e^-x); e^-x overflows to inf for x < -88.7, giving 0.
static inline vf vf_sigmoid(vf x) { return 1.0f / (1.0f + vf_exp(-x)); }

// The dot products run in ggml_vec_dot_f32's order: four accumulators of a vector each over
// steps of 4 vectors, folded (0 + 2) + (1 + 3) and reduced across lanes (vf_reduce); the
// n % (4 VEC_WIDTH) elements after them are added one by one to that float, the last n % 8
// with a fused multiply-add (as gcc compiled ggml's tail loop: 16- and 8-wide products, then
// scalar fmas). b is fp32 (b_f32) or int8 codes (b_i8, the int8 KV cache's keys).
#define VEC_STEP (4 * VEC_WIDTH)

static inline float dot_f32_any(const float *restrict a, const float *restrict b_f32, const signed char *restrict b_i8,
                                int n) {
    vf s0 = {0}, s1 = {0}, s2 = {0}, s3 = {0};
    int j = 0;
#define DOT_B(at) (b_f32 ? vf_load(b_f32 + (at)) : __builtin_convertvector(*(const vc *)(b_i8 + (at)), vf))
    for (; j + VEC_STEP <= n; j += VEC_STEP) {
        s0 = vf_madd(vf_load(a + j), DOT_B(j), s0);
        s1 = vf_madd(vf_load(a + j + VEC_WIDTH), DOT_B(j + VEC_WIDTH), s1);
        s2 = vf_madd(vf_load(a + j + 2 * VEC_WIDTH), DOT_B(j + 2 * VEC_WIDTH), s2);
        s3 = vf_madd(vf_load(a + j + 3 * VEC_WIDTH), DOT_B(j + 3 * VEC_WIDTH), s3);
    }
#undef DOT_B
    float s = vf_reduce((s0 + s2) + (s1 + s3));
    int fused = n - (n - j) % 8;
    for (; j < fused; j++) s += a[j] * (b_f32 ? b_f32[j] : (float)b_i8[j]);
    for (; j < n; j++) s = fmaf(a[j], b_f32 ? b_f32[j] : (float)b_i8[j], s);
    return s;
}

static inline float dot_f32(const float *restrict a, const float *restrict b, int n) {
    return dot_f32_any(a, b, NULL, n);
}

// out[i] = dot_f32(a, b[i], n) for count <= 16 rows b[i], bit for bit. At 512 bits with n a
// multiple of VEC_STEP (no scalar tail) the lane reductions run together: each level of
// vf_reduce's halving tree adds the same lane pairs of every row, the rows packed two, four,
// eight, then sixteen to a vector by shuffles (rows past count are zeros that no row's lanes
// meet), 15 vector adds in all instead of a four-level reduction per row (an attention row's
// scores over 16 keys; a weight row against up to 16 input rows). Elsewhere, and below 4 rows,
// one dot_f32 per row.
static inline void dot_f32_rows(float *restrict out, const float *restrict a, const float *const *b, int count, int n) {
#if VEC_BITS == 512
    if (n % VEC_STEP == 0 && count >= 4) {
        __m512 v[16];
        for (int i = 0; i < 16; i++) {
            vf s0 = {0}, s1 = {0}, s2 = {0}, s3 = {0};
            for (int j = 0; i < count && j < n; j += VEC_STEP) {
                s0 = vf_madd(vf_load(a + j), vf_load(b[i] + j), s0);
                s1 = vf_madd(vf_load(a + j + VEC_WIDTH), vf_load(b[i] + j + VEC_WIDTH), s1);
                s2 = vf_madd(vf_load(a + j + 2 * VEC_WIDTH), vf_load(b[i] + j + 2 * VEC_WIDTH), s2);
                s3 = vf_madd(vf_load(a + j + 3 * VEC_WIDTH), vf_load(b[i] + j + 3 * VEC_WIDTH), s3);
            }
            v[i] = (__m512)((s0 + s2) + (s1 + s3));
        }
        // h = 8: rows 2k, 2k + 1 -> lanes 0..7 and 8..15 of v[k]
        for (int k = 0; k < 8; k++)
            v[k] = _mm512_add_ps(_mm512_shuffle_f32x4(v[2 * k], v[2 * k + 1], _MM_SHUFFLE(1, 0, 1, 0)),
                                 _mm512_shuffle_f32x4(v[2 * k], v[2 * k + 1], _MM_SHUFFLE(3, 2, 3, 2)));
        // h = 4: rows 4k .. 4k + 3 -> 128-bit quarters 0..3 of v[k]
        for (int k = 0; k < 4; k++)
            v[k] = _mm512_add_ps(_mm512_shuffle_f32x4(v[2 * k], v[2 * k + 1], _MM_SHUFFLE(2, 0, 2, 0)),
                                 _mm512_shuffle_f32x4(v[2 * k], v[2 * k + 1], _MM_SHUFFLE(3, 1, 3, 1)));
        // h = 2: quarter j of v[k] holds rows 8k + j (lanes 0, 1) and 8k + 4 + j (lanes 2, 3)
        for (int k = 0; k < 2; k++)
            v[k] = _mm512_add_ps(_mm512_shuffle_ps(v[2 * k], v[2 * k + 1], _MM_SHUFFLE(1, 0, 1, 0)),
                                 _mm512_shuffle_ps(v[2 * k], v[2 * k + 1], _MM_SHUFFLE(3, 2, 3, 2)));
        // h = 1: lane 4j + t holds row j + 4t
        __m512 r = _mm512_add_ps(_mm512_shuffle_ps(v[0], v[1], _MM_SHUFFLE(2, 0, 2, 0)),
                                 _mm512_shuffle_ps(v[0], v[1], _MM_SHUFFLE(3, 1, 3, 1)));
        const __m512i row_order = _mm512_setr_epi32(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15);
        _mm512_mask_storeu_ps(out, (__mmask16)((1u << count) - 1), _mm512_permutexvar_ps(row_order, r));
        return;
    }
#endif
    for (int i = 0; i < count; i++) out[i] = dot_f32(a, b[i], n);
}

// The dot of fp32 a with int8 codes b, in dot_f32's order.
static inline float dot_f32_i8(const float *restrict a, const signed char *restrict b, int n) {
    return dot_f32_any(a, NULL, b, n);
}

#endif
