// attention_full.c: full-sequence attention two ways (see kernels.h, project 15).
//
//   naive  scores = q k^T (T, T) per head, mask + softmax per row, out = scores v.
//          Two sgemms that OpenBLAS runs near the machine's peak, but the (T, T) matrix
//          is written, read, rewritten and read again: 16 T^2 bytes of traffic per head.
//   flash  a (BR, BC) tile of scores at a time, folded into the output with an online
//          softmax, so the scores never leave the cache and causal runs skip every tile
//          above the diagonal. The tile products are register-blocked loops on vec.h's
//          vectors: 512 bits wide where the CPU has AVX-512, 256 with AVX2, else scalar.
//
// Both use one vectorised exp (vf_exp_nonpos), so the comparison is about memory and
// fusion, not about two different exps.
// Test: make build/tests/test_attention_full && ./build/tests/test_attention_full
#include "kernels.h"

#include <cblas.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"
#include "vec.h"

// --- naive ------------------------------------------------------------------------------

// Softmax of each row of scores (T, T) over its visible keys; hidden ones become 0 so the
// sgemm with V can run over full rows.
static void masked_softmax_rows(float *scores, int T, int causal) {
    #pragma omp parallel for schedule(static)
    for (int t = 0; t < T; t++) {
        float *row = scores + (size_t)t * T;
        int n = causal ? t + 1 : T;
        softmax_rows(row, 1, n, NULL);
        memset(row + n, 0, (size_t)(T - n) * sizeof(float));
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

// Sizes measured on the 2-core EPYC Zen 4 (flash GFLOP/s at T = 1K and 2K, no mask, 2
// threads, interleaved medians): MR 6 -> 8 gained ~2%, 96 -> 128-row tiles
// ~6% (64 gave nothing); the tiles of a thread, ~200 KB, sit in its L2.
enum {
    MR = 8,             // register block of tile_matmul: MR rows x NR columns of accumulators,
    NR = 2 * VEC_WIDTH, // 16 vector registers, enough independent FMAs to hide their latency
    BR = 128,           // queries per tile (a multiple of MR and of NR at every VEC_WIDTH)
    BC = 128,           // keys per tile (a multiple of MR)
};

// c (M, N) (+)= a (M, K) @ b (K, N). a's element (i, p) is a[i * a_row + p * a_col], so a
// can be read transposed in place; b and c are row-major with leading dimensions ldb, ldc.
// M is a multiple of MR, N of NR. Each MR x NR block of c is summed in accumulators that
// live in registers across the whole K loop: per step, MR broadcasts and two loads feed
// 2 MR vector FMAs.
static void tile_matmul(float *restrict c, int ldc, const float *restrict a, int a_row, int a_col,
                        const float *restrict b, int ldb, int M, int N, int K, int accumulate) {
    for (int i = 0; i < M; i += MR)
        for (int j = 0; j < N; j += NR) {
            vf acc[MR][2];
            for (int r = 0; r < MR; r++) {
                const float *cr = c + (i + r) * ldc + j;
                acc[r][0] = accumulate ? vf_load(cr) : (vf){0};
                acc[r][1] = accumulate ? vf_load(cr + VEC_WIDTH) : (vf){0};
            }
            for (int p = 0; p < K; p++) {
                const float *brow = b + p * ldb + j, *acol = a + i * a_row + p * a_col;
                vf b0 = vf_load(brow), b1 = vf_load(brow + VEC_WIDTH);
                #pragma GCC unroll 8
                for (int r = 0; r < MR; r++) {
                    vf ar = vf_splat(acol[r * a_row]);
                    acc[r][0] = vf_madd(ar, b0, acc[r][0]);
                    acc[r][1] = vf_madd(ar, b1, acc[r][1]);
                }
            }
            for (int r = 0; r < MR; r++) {
                float *cr = c + (i + r) * ldc + j;
                vf_store(cr, acc[r][0]);
                vf_store(cr + VEC_WIDTH, acc[r][1]);
            }
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
    enum { NV = BR / VEC_WIDTH }; // vectors per row of st: the tile's queries
    float *st = w->st;
    if (causal)
        for (int j = 0; j < n; j++) {
            int hidden = k0 + j - q0; // queries 0 .. hidden - 1 of the tile precede key k0 + j
            for (int i = 0; i < (hidden < BR ? hidden : BR); i++) st[j * BR + i] = -INFINITY;
        }
    vf m[NV], l[NV], alpha[NV];
    for (int v = 0; v < NV; v++) m[v] = vf_load(w->m + v * VEC_WIDTH);
    for (int j = 0; j < n; j++)
        for (int v = 0; v < NV; v++) m[v] = vf_max(vf_load(st + j * BR + v * VEC_WIDTH), m[v]);
    for (int v = 0; v < NV; v++) {
        alpha[v] = vf_exp_nonpos(vf_load(w->m + v * VEC_WIDTH) - m[v]);
        l[v] = vf_load(w->l + v * VEC_WIDTH) * alpha[v];
    }
    for (int j = 0; j < n; j++)
        for (int v = 0; v < NV; v++) {
            vf e = vf_exp_nonpos(vf_load(st + j * BR + v * VEC_WIDTH) - m[v]);
            vf_store(st + j * BR + v * VEC_WIDTH, e);
            l[v] += e;
        }
    for (int v = 0; v < NV; v++) {
        vf_store(w->m + v * VEC_WIDTH, m[v]);
        vf_store(w->l + v * VEC_WIDTH, l[v]);
    }
    for (int i = 0; i < BR; i++) {
        float *o = w->o + i * w->Dp;
        vf a = vf_splat(alpha[i / VEC_WIDTH][i % VEC_WIDTH]);
        for (int d = 0; d < w->Dp; d += VEC_WIDTH) vf_store(o + d, vf_load(o + d) * a);
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
