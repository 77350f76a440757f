// backward.c: the trainer's kernels (see kernels.h): the backward passes of matmul, RMSNorm,
// RoPE and attention, the attention forward that keeps its probabilities for the backward, the
// cross-entropy and its gradient, and AdamW with the gradient norm it clips by. (SwiGLU's
// backward sits in kernels.c, beside its forward.)
//
// Every loop splits over rows, heads or fixed chunks, never over a sum: a reduction (RMSNorm's
// dw, the sum of squares) adds REDUCE_CHUNKS fixed partials in order, so no result depends on
// the number of threads. Matmuls go through OpenBLAS's sgemm, which OpenBLAS's OpenMP build runs
// on one thread inside a parallel region.
#include <cblas.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"
#include "kernels.h"
#include "parallel.h"

#define REDUCE_CHUNKS 16
// Attention works on blocks of this many query rows, each against only the keys up to its
// last query (causality skips the blocks above the diagonal).
#define ATT_BLOCK 64

void matmul_backward(float *dx, float *dw, const float *dy, const float *x, const float *w, int N, int n,
                     int d) {
    if (dx) // dx (N, n) += dy (N, d) @ w (d, n)
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, N, n, d, 1.0f, dy, d, w, n, 1.0f, dx, n);
    // dw (d, n) += dy^T (d, N) @ x (N, n)
    cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, d, n, N, 1.0f, dy, d, x, n, 1.0f, dw, n);
}

static float row_rstd(const float *x, int C, float eps) {
    float ss = 0.0f;
    #pragma omp simd reduction(+ : ss)
    for (int i = 0; i < C; i++) ss += x[i] * x[i];
    return 1.0f / sqrtf(ss / C + eps);
}

// Rows [r0, r1): dx added to, their share of dw into pw (C).
static void rmsnorm_backward_rows(float *dx, float *pw, const float *dy, const float *x, const float *w, int r0,
                                  int r1, int C, float eps) {
    for (int r = r0; r < r1; r++) {
        const float *xr = x + (size_t)r * C, *dyr = dy + (size_t)r * C;
        float *dxr = dx + (size_t)r * C;
        float rstd = row_rstd(xr, C, eps), dot = 0.0f;
        #pragma omp simd reduction(+ : dot)
        for (int i = 0; i < C; i++) dot += dyr[i] * w[i] * xr[i];
        // d/dx of x * rstd * w: rstd * dy * w - rstd^3 / C * x * sum(dy * w * x)
        float coef = rstd * rstd * rstd * dot / C;
        for (int i = 0; i < C; i++) {
            dxr[i] += rstd * dyr[i] * w[i] - coef * xr[i];
            pw[i] += dyr[i] * xr[i] * rstd;
        }
    }
}

void rmsnorm_backward(float *dx, float *dw, const float *dy, const float *x, const float *w, int N, int C,
                      float eps) {
    float *partial = callocCheck((size_t)REDUCE_CHUNKS * C, sizeof(float)); // (chunks, C) of dw
    PARALLEL_FOR((double)N * C, schedule(static), for (int chunk = 0; chunk < REDUCE_CHUNKS; chunk++) {
        rmsnorm_backward_rows(dx, partial + (size_t)chunk * C, dy, x, w, (int)((long)N * chunk / REDUCE_CHUNKS),
                              (int)((long)N * (chunk + 1) / REDUCE_CHUNKS), C, eps);
    });
    for (int chunk = 0; chunk < REDUCE_CHUNKS; chunk++)
        for (int i = 0; i < C; i++) dw[i] += partial[(size_t)chunk * C + i];
    free(partial);
}

// Turn the last rot_dim dims of every head of every row by its position; sign -1 turns back.
static void rope_rows(float *x, int N, int T, int n_heads, int hd, int rot_dim, const float *inv_freq, float mscale,
                      int sign) {
    PARALLEL_FOR((double)N * n_heads * hd, schedule(static), for (int r = 0; r < N; r++) {
        float *row = x + (size_t)r * n_heads * hd;
        if (rot_dim == hd) rope_rotate(row, n_heads, hd, sign * (r % T), inv_freq, mscale, ROPE_STYLE_NORM);
        else
            for (int h = 0; h < n_heads; h++)
                rope_rotate(row + (size_t)h * hd + hd - rot_dim, 1, rot_dim, sign * (r % T), inv_freq, mscale, ROPE_STYLE_NORM);
    });
}

void rope_forward(float *x, int N, int T, int n_heads, int head_dim, int rot_dim, const float *inv_freq,
                  float mscale) {
    rope_rows(x, N, T, n_heads, head_dim, rot_dim, inv_freq, mscale, 1);
}

// y = mscale * R(p) x, so dx = mscale * R(p)^T dy = mscale * R(-p) dy.
void rope_backward(float *dx, int N, int T, int n_heads, int head_dim, int rot_dim, const float *inv_freq,
                   float mscale) {
    rope_rows(dx, N, T, n_heads, head_dim, rot_dim, inv_freq, mscale, -1);
}

// One (sequence, head) per task, its matmuls as sgemm calls over row blocks of ATT_BLOCK queries.
void attention_forward(float *out, float *probs, const float *q, const float *k, const float *v, int B,
                       int T, const AttentionShape *s) {
    int hd = s->head_dim, vd = attention_value_dim(s), nh = s->n_heads, group = s->n_heads / s->n_kv_heads;
    int qs = nh * hd, ks = s->n_kv_heads * hd, vs = s->n_kv_heads * vd, os = nh * vd;
    PARALLEL_FOR((double)B * nh * T * T * hd, collapse(2) schedule(dynamic, 1), for (int b = 0; b < B; b++) {
        for (int h = 0; h < nh; h++) {
            const float *qh = q + (size_t)b * T * qs + h * hd;                // (T, hd) stride qs
            const float *kh = k + (size_t)b * T * ks + (h / group) * hd;      // (T, hd) stride ks
            const float *vh = v + (size_t)b * T * vs + (h / group) * vd;      // (T, vd) stride vs
            float *p = probs + ((size_t)b * nh + h) * T * T;                  // (T, T)
            float *oh = out + (size_t)b * T * os + h * vd;
            for (int i0 = 0; i0 < T; i0 += ATT_BLOCK) {
                int rows = T - i0 < ATT_BLOCK ? T - i0 : ATT_BLOCK, keys = i0 + rows;
                float *pb = p + (size_t)i0 * T;
                // scores (rows, keys) = scale * Q[i0 ..] K[0 .. keys)^T
                cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, rows, keys, hd, s->scale, qh + (size_t)i0 * qs,
                            qs, kh, ks, 0.0f, pb, T);
                for (int i = i0; i < i0 + rows; i++) {
                    float *row = p + (size_t)i * T;
                    VisibleKeys vis = attention_visible_keys(i, s->window, s->n_sink);
                    for (int j = vis.n_sinks; j < vis.lo; j++) row[j] = -INFINITY;
                    softmax_rows(row, 1, i + 1, NULL); // hidden keys get exactly 0
                    memset(row + i + 1, 0, (size_t)(T - i - 1) * sizeof(float));
                }
                // out (rows, vd) = P[i0 .., 0 .. keys) V[0 .. keys)
                cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, rows, vd, keys, 1.0f, pb, T, vh, vs, 0.0f,
                            oh + (size_t)i0 * os, os);
            }
        }
    });
}

// With S = scale Q K^T (masked), P = softmax(S), O = P V:
//   dV = P^T dO, dP = dO V^T, dS = P * (dP - rowsum(P * dP)), dQ = scale dS K, dK = scale dS^T Q.
// One (sequence, KV head) per task, so the query heads that share a KV head accumulate
// its dK and dV without races. Hidden keys have P = 0, hence dS = 0.
void attention_backward(float *dq, float *dk, float *dv, const float *d_out, const float *probs,
                        const float *q, const float *k, const float *v, int B, int T,
                        const AttentionShape *s) {
    int hd = s->head_dim, vd = attention_value_dim(s), nh = s->n_heads, nkv = s->n_kv_heads, group = nh / nkv;
    int qs = nh * hd, ks = nkv * hd, vs = nkv * vd, os = nh * vd;
    int block = T < ATT_BLOCK ? T : ATT_BLOCK;
    PARALLEL_FOR((double)B * nh * T * T * hd, collapse(2) schedule(dynamic, 1), for (int b = 0; b < B; b++) {
        for (int g = 0; g < nkv; g++) {
            float *dsb = mallocCheck((size_t)block * T * sizeof(float)); // (block, T) dP, then dS
            const float *kg = k + (size_t)b * T * ks + g * hd, *vg = v + (size_t)b * T * vs + g * vd;
            float *dkg = dk + (size_t)b * T * ks + g * hd, *dvg = dv + (size_t)b * T * vs + g * vd;
            for (int j = 0; j < T; j++) {
                memset(dkg + (size_t)j * ks, 0, hd * sizeof(float));
                memset(dvg + (size_t)j * vs, 0, vd * sizeof(float));
            }
            for (int h = g * group; h < (g + 1) * group; h++) {
                const float *p = probs + ((size_t)b * nh + h) * T * T;
                const float *qh = q + (size_t)b * T * qs + h * hd, *doh = d_out + (size_t)b * T * os + h * vd;
                float *dqh = dq + (size_t)b * T * qs + h * hd;
                for (int i0 = 0; i0 < T; i0 += ATT_BLOCK) {
                    int rows = T - i0 < ATT_BLOCK ? T - i0 : ATT_BLOCK, keys = i0 + rows;
                    const float *pb = p + (size_t)i0 * T, *dob = doh + (size_t)i0 * os, *qb = qh + (size_t)i0 * qs;
                    // dP (rows, keys) = dO V^T
                    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, rows, keys, vd, 1.0f, dob, os, vg, vs,
                                0.0f, dsb, T);
                    for (int i = 0; i < rows; i++) {
                        const float *pr = pb + (size_t)i * T;
                        float *dr = dsb + (size_t)i * T, row_dot = 0.0f;
                        for (int j = 0; j < keys; j++) row_dot += pr[j] * dr[j];
                        for (int j = 0; j < keys; j++) dr[j] = pr[j] * (dr[j] - row_dot) * s->scale;
                    }
                    // dQ (rows, hd) = dS K; dK (keys, hd) += dS^T Q; dV (keys, hd) += P^T dO
                    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, rows, hd, keys, 1.0f, dsb, T, kg, ks,
                                0.0f, dqh + (size_t)i0 * qs, qs);
                    cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, keys, hd, rows, 1.0f, dsb, T, qb, qs,
                                1.0f, dkg, ks);
                    cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, keys, vd, rows, 1.0f, pb, T, dob, os,
                                1.0f, dvg, vs);
                }
            }
            free(dsb);
        }
    });
}

double crossentropy_forward(float *logits, float *row_loss, const int *targets, int N, int V) {
    float *lse = mallocCheck((size_t)N * sizeof(float));
    for (int r = 0; r < N; r++) row_loss[r] = targets[r] >= 0 ? logits[(size_t)r * V + targets[r]] : 0.0f;
    softmax_rows(logits, N, V, lse);
    double total = 0.0;
    for (int r = 0; r < N; r++) {
        row_loss[r] = targets[r] >= 0 ? lse[r] - row_loss[r] : 0.0f; // -log p, exact where p underflows
        total += row_loss[r];
    }
    free(lse);
    return total;
}

void crossentropy_backward(float *probs, const int *targets, const float *weights, int N, int V, float scale) {
    PARALLEL_FOR((double)N * V, schedule(static), for (int r = 0; r < N; r++) {
        float *row = probs + (size_t)r * V;
        float w = weights ? scale * weights[r] : scale;
        if (targets[r] < 0 || w == 0.0f) {
            memset(row, 0, (size_t)V * sizeof(float));
            continue;
        }
        for (int i = 0; i < V; i++) row[i] *= w;
        row[targets[r]] -= w;
    });
}

void add_inplace(float *x, const float *y, size_t n) {
    PARALLEL_FOR((double)n, schedule(static), for (size_t i = 0; i < n; i++) x[i] += y[i];);
}

double sum_squares(const float *x, size_t n) {
    double partial[REDUCE_CHUNKS];
    PARALLEL_FOR((double)n, schedule(static), for (int chunk = 0; chunk < REDUCE_CHUNKS; chunk++) {
        double s = 0.0;
        for (size_t i = n * chunk / REDUCE_CHUNKS; i < n * (chunk + 1) / REDUCE_CHUNKS; i++) s += (double)x[i] * x[i];
        partial[chunk] = s;
    });
    double total = 0.0;
    for (int chunk = 0; chunk < REDUCE_CHUNKS; chunk++) total += partial[chunk];
    return total;
}

void adamw(float *p, const float *g, float *m, float *v, size_t n, const AdamW *h) {
    float b1 = h->beta1, b2 = h->beta2, lr = h->lr, decay = h->decay, grad_scale = h->grad_scale;
    float b1c = 1.0f - powf(b1, (float)h->step), b2c = 1.0f - powf(b2, (float)h->step);
    PARALLEL_FOR((double)n, schedule(static), for (size_t i = 0; i < n; i++) {
        float gi = g[i] * grad_scale;
        m[i] = b1 * m[i] + (1.0f - b1) * gi;
        v[i] = b2 * v[i] + (1.0f - b2) * gi * gi;
        float m_hat = m[i] / b1c, v_hat = v[i] / b2c;
        p[i] -= lr * (m_hat / (sqrtf(v_hat) + h->eps) + decay * p[i]);
    });
}
