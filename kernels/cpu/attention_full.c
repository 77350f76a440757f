// attention_full.c: full-sequence attention two ways (see kernels.h, project 15).
//
//   naive  scores = q k^T (T, T) per head, mask + softmax per row, out = scores v.
//          Two sgemms that OpenBLAS runs near the machine's peak, but the (T, T) matrix
//          is written, read, rewritten and read again: 16 T^2 bytes of traffic per head.
//   flash  a (BR, BC) tile of scores at a time, folded into the output with an online
//          softmax, so the scores never leave the cache and causal runs skip every tile
//          above the diagonal. The tile products are plain C loops blocked so gcc keeps the
//          accumulators in vector registers (-O2 -march=native).
//
// Both use one vectorisable exp (exp_nonpos), so the comparison is about memory and
// fusion, not about two different exps.
// Test: make build/tests/test_attention_full && ./build/tests/test_attention_full
#include "kernels.h"

#include <cblas.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"

// -std=c11 turns off gcc's contraction of a * b + c into one fused multiply-add, so ask
// for it where the hardware has it (gcc then vectorises fmaf into vfmadd).
#if defined(__FMA__) || defined(__ARM_FEATURE_FMA)
#define MADD(a, b, c) fmaf(a, b, c)
#else
#define MADD(a, b, c) ((a) * (b) + (c))
#endif

// e^x for softmax arguments x <= 0, in branch-free arithmetic that vectorises (libm's
// expf is a scalar call, and at 8K tokens a head needs 67M of them). x = n ln2 + r with
// n = round(x / ln2) and |r| <= ln2 / 2; e^r by its degree-6 Taylor series (relative
// error < 1.3e-7 there); 2^n by writing n + 127 into the float's exponent bits, or 0 once
// that underflows (x < -87.3). |x| is clamped to 100 on the bits, as integers, because a
// float compare-and-select there stops gcc vectorising under strict IEEE semantics; that
// also maps -inf to exactly 0. The sign is forced negative: callers pass x <= 0.
static inline float exp_nonpos(float x) {
    union { float f; int32_t i; } u = {.f = x}; // C11 allows type punning through a union
    int32_t magnitude = u.i & 0x7fffffff;
    u.i = (magnitude > 0x42c80000 ? 0x42c80000 : magnitude) | (int32_t)0x80000000; // -min(|x|, 100)
    float xc = u.f;
    float n = (xc * 1.44269504f + 12582912.0f) - 12582912.0f; // round to nearest via 1.5 * 2^23
    float r = MADD(n, -0.693145752f, xc);                      // ln2 in two parts (Cody-Waite)
    r = MADD(n, -1.42860677e-6f, r);
    float p = MADD(r, 1.0f / 720.0f, 1.0f / 120.0f);
    p = MADD(p, r, 1.0f / 24.0f);
    p = MADD(p, r, 1.0f / 6.0f);
    p = MADD(p, r, 0.5f);
    p = MADD(p, r, 1.0f);
    p = MADD(p, r, 1.0f);
    int32_t biased = (int32_t)n + 127;
    u.i = (biased < 0 ? 0 : biased) << 23;
    return p * u.f;
}

// --- naive ------------------------------------------------------------------------------

static float row_max(const float *restrict s, int n) {
    float m = -INFINITY;
    #pragma omp simd reduction(max : m)
    for (int j = 0; j < n; j++) m = s[j] > m ? s[j] : m;
    return m;
}

// s[j] = e^(s[j] - m) for j < n; returns their sum.
static float exp_shifted_sum(float *restrict s, int n, float m) {
    float sum = 0.0f;
    #pragma omp simd reduction(+ : sum)
    for (int j = 0; j < n; j++) {
        s[j] = exp_nonpos(s[j] - m);
        sum += s[j];
    }
    return sum;
}

// Softmax of each row of scores (T, T) over its visible keys; hidden ones become 0 so the
// sgemm with V can run over full rows.
static void masked_softmax_rows(float *scores, int T, int causal) {
    #pragma omp parallel for schedule(static)
    for (int t = 0; t < T; t++) {
        float *row = scores + (size_t)t * T;
        int n = causal ? t + 1 : T;
        float inv = 1.0f / exp_shifted_sum(row, n, row_max(row, n));
        for (int j = 0; j < n; j++) row[j] *= inv;
        for (int j = n; j < T; j++) row[j] = 0.0f;
    }
}

size_t attention_naive(float *out, const float *q, const float *k, const float *v, const AttentionFullShape *s) {
    int T = s->T, D = s->D;
    size_t bytes = (size_t)T * T * sizeof(float);
    float *scores = mallocCheck(bytes); // (T, T)
    float scale = 1.0f / sqrtf((float)D);
    for (int bh = 0; bh < s->B * s->H; bh++) {
        size_t head = (size_t)bh * T * D;
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, T, T, D, scale, q + head, D, k + head, D, 0.0f,
                    scores, T);
        masked_softmax_rows(scores, T, s->causal);
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, T, D, T, 1.0f, scores, T, v + head, D, 0.0f,
                    out + head, D);
    }
    free(scores);
    return bytes;
}

// --- flash ------------------------------------------------------------------------------
//
// Per query tile of BR rows the scores are kept transposed, st (BC keys, BR queries), so
// that every softmax step is a vector operation across queries (no horizontal max or
// sum) and both products read q, k, v the way they lie in memory:
//   st (BC, BR) = k_tile (BC, D) @ qt (D, BR)    qt: the query tile transposed and scaled,
//                                                packed once per query tile
//   o  (BR, D) += st^T (BR, BC) @ v_tile (BC, D)
// k and v tiles are used in place; only a ragged last tile, or a head dim that is not a
// multiple of NR, is first copied into zero-padded buffers.

enum {
    MR = 6,  // register block of tile_matmul: MR rows x NR columns of accumulators,
    NR = 16, // 12 AVX2 registers, enough independent FMAs to hide their latency
    BR = 96, // queries per tile (a multiple of MR and of NR)
    BC = 96, // keys per tile (a multiple of MR)
};

// c (M, N) (+)= a (M, K) @ b (K, N). a's element (i, p) is a[i * a_row + p * a_col], so a
// can be read transposed in place; b and c are row-major with leading dimensions ldb, ldc.
// M is a multiple of MR, N of NR. Each MR x NR block of c is summed in accumulators that
// live in registers across the whole K loop: per step, MR broadcasts and NR/8 loads feed
// MR * NR/8 vector FMAs.
static void tile_matmul(float *restrict c, int ldc, const float *restrict a, int a_row, int a_col,
                        const float *restrict b, int ldb, int M, int N, int K, int accumulate) {
    for (int i = 0; i < M; i += MR)
        for (int j = 0; j < N; j += NR) {
            float acc[MR][NR];
            for (int r = 0; r < MR; r++)
                for (int x = 0; x < NR; x++) acc[r][x] = 0.0f;
            if (accumulate)
                for (int r = 0; r < MR; r++)
                    for (int x = 0; x < NR; x++) acc[r][x] = c[(i + r) * ldc + j + x];
            for (int p = 0; p < K; p++) {
                const float *brow = b + p * ldb + j, *acol = a + i * a_row + p * a_col;
                #pragma GCC unroll 6
                for (int r = 0; r < MR; r++) {
                    float ar = acol[r * a_row];
                    #pragma omp simd
                    for (int x = 0; x < NR; x++) acc[r][x] = MADD(ar, brow[x], acc[r][x]);
                }
            }
            for (int r = 0; r < MR; r++)
                for (int x = 0; x < NR; x++) c[(i + r) * ldc + j + x] = acc[r][x];
        }
}

// One thread's buffers. Dp is D rounded up to NR; padding columns stay zero from
// allocation, so they add nothing to any product.
typedef struct {
    int Dp;
    float *qt; // (Dp, BR) query tile, transposed, times 1/sqrt(D)
    float *st; // (BC, BR) scores, then probabilities, transposed
    float *o;  // (BR, Dp) output accumulator, unnormalised
    float *k;  // (BC, Dp) padded copy of a ragged key tile
    float *v;  // (BC, Dp) padded copy of a ragged value tile
    float *m;  // (BR) running max of each query's scores
    float *l;  // (BR) running sum of each query's e^(score - m)
} FlashTiles;

// Bytes of one thread's buffers, rounded up to whole cache lines for aligned_alloc.
static size_t flash_tiles_bytes(int D) {
    size_t Dp = (size_t)(D + NR - 1) / NR * NR;
    size_t bytes = (Dp * BR + (size_t)BC * BR + BR * Dp + 2 * BC * Dp + 2 * BR) * sizeof(float);
    return (bytes + 63) / 64 * 64;
}

static FlashTiles flash_tiles_alloc(int D) {
    FlashTiles w;
    w.Dp = (D + NR - 1) / NR * NR;
    size_t bytes = flash_tiles_bytes(D);
    float *base = aligned_alloc(64, bytes);
    if (!base) die("attention_flash: out of memory allocating %zu bytes", bytes);
    memset(base, 0, bytes);
    w.qt = base;
    w.st = w.qt + w.Dp * BR;
    w.o = w.st + BC * BR;
    w.k = w.o + BR * w.Dp;
    w.v = w.k + BC * w.Dp;
    w.m = w.v + BC * w.Dp;
    w.l = w.m + BR;
    return w;
}

// Fold one key tile's scores st (n, BR) into the running softmax of every query: hide the
// keys a query may not see (causal: key k0 + j after query q0 + i), raise each query's
// max, rescale what it has accumulated by e^(m_old - m_new), and turn scores into
// e^(score - m_new). A query that has seen no key yet has m = -inf, and e^(-inf - -inf)
// comes out 0 from exp_nonpos, so its empty sums stay empty.
static void online_softmax_tile(FlashTiles *w, int q0, int k0, int n, int causal) {
    float *st = w->st;
    if (causal)
        for (int j = 0; j < n; j++) {
            int hidden = k0 + j - q0; // queries 0 .. hidden - 1 of the tile precede key k0 + j
            for (int i = 0; i < (hidden < BR ? hidden : BR); i++) st[j * BR + i] = -INFINITY;
        }
    float m_new[BR], alpha[BR];
    memcpy(m_new, w->m, sizeof m_new);
    for (int j = 0; j < n; j++) {
        #pragma omp simd
        for (int i = 0; i < BR; i++) m_new[i] = st[j * BR + i] > m_new[i] ? st[j * BR + i] : m_new[i];
    }
    #pragma omp simd
    for (int i = 0; i < BR; i++) {
        alpha[i] = exp_nonpos(w->m[i] - m_new[i]);
        w->m[i] = m_new[i];
        w->l[i] *= alpha[i];
    }
    for (int j = 0; j < n; j++) {
        #pragma omp simd
        for (int i = 0; i < BR; i++) {
            st[j * BR + i] = exp_nonpos(st[j * BR + i] - m_new[i]);
            w->l[i] += st[j * BR + i];
        }
    }
    for (int i = 0; i < BR; i++) {
        float *o = w->o + i * w->Dp;
        #pragma omp simd
        for (int d = 0; d < w->Dp; d++) o[d] *= alpha[i];
    }
}

// Queries q0 .. q0 + m - 1 of one head: q, k, v, out point at the head's (T, D).
static void flash_query_tile(FlashTiles *w, float *out, const float *q, const float *k, const float *v, int q0,
                             int m, const AttentionFullShape *s) {
    int T = s->T, D = s->D, Dp = w->Dp;
    float scale = 1.0f / sqrtf((float)D);
    for (int i = 0; i < m; i++)
        for (int d = 0; d < D; d++) w->qt[d * BR + i] = q[(size_t)(q0 + i) * D + d] * scale;
    for (int i = 0; i < BR; i++) {
        w->m[i] = -INFINITY;
        w->l[i] = 0.0f;
    }
    memset(w->o, 0, (size_t)BR * Dp * sizeof(float));
    int k_end = s->causal ? q0 + m : T; // causal: no key after the tile's last query
    for (int k0 = 0; k0 < k_end; k0 += BC) {
        int n = k_end - k0 < BC ? k_end - k0 : BC;
        const float *kt = k + (size_t)k0 * D, *vt = v + (size_t)k0 * D;
        int ld = D;
        if (n < BC || D != Dp) { // ragged: pad into the thread's buffers
            for (int j = 0; j < n; j++) {
                memcpy(w->k + j * Dp, kt + (size_t)j * D, (size_t)D * sizeof(float));
                memcpy(w->v + j * Dp, vt + (size_t)j * D, (size_t)D * sizeof(float));
            }
            kt = w->k, vt = w->v, ld = Dp;
        }
        tile_matmul(w->st, BR, kt, ld, 1, w->qt, BR, BC, BR, Dp, 0); // st (BC, BR); rows >= n unused
        online_softmax_tile(w, q0, k0, n, s->causal);
        tile_matmul(w->o, Dp, w->st, 1, BR, vt, ld, BR, Dp, n, 1); // o += st^T (BR, n) @ v (n, Dp)
    }
    for (int i = 0; i < m; i++) {
        float inv = 1.0f / w->l[i];
        for (int d = 0; d < D; d++) out[(size_t)(q0 + i) * D + d] = w->o[i * Dp + d] * inv;
    }
}

size_t attention_flash(float *out, const float *q, const float *k, const float *v, const AttentionFullShape *s) {
    int T = s->T, D = s->D, BH = s->B * s->H;
    int n_tiles = (T + BR - 1) / BR;
    long n_items = (long)BH * n_tiles;
    size_t bytes = 0;
    #pragma omp parallel reduction(+ : bytes)
    {
        FlashTiles w = flash_tiles_alloc(D);
        bytes = flash_tiles_bytes(D);
        // Last query tiles first: under a causal mask they cost the most, and handing them
        // out early leaves the cheap ones to even out the threads' finishing times.
        #pragma omp for schedule(dynamic, 1)
        for (long item = 0; item < n_items; item++) {
            int tile = n_tiles - 1 - (int)(item / BH), bh = (int)(item % BH);
            size_t head = (size_t)bh * T * D;
            int q0 = tile * BR, m = T - q0 < BR ? T - q0 : BR;
            flash_query_tile(&w, out + head, q + head, k + head, v + head, q0, m, s);
        }
        free(w.qt);
    }
    return bytes;
}
