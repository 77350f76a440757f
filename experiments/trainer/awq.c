// awq.c: activation-aware int4 weight quantisation with folded scales (see awq.h).
#include "awq.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"
#include "kernels.h"
#include "quant.h"
#include "quant_weights.h"

// One group of matrices sharing an input: the input X (N, n), the matrices (each (rows_i, n)).
typedef struct {
    const float *x;
    int n;
    float *w[3];
    int rows[3];
    int n_w;
} Group;

// Output error of the group with its weights scaled by s, quantised to t and unscaled:
// sum || X W^T - (X / s) Q(W diag(s))^T ||^2. y: each matrix's fp32 outputs X W^T.
static double group_error(const Group *g, DType t, const float *s, float *const *y, int N, float *xs, float *wq,
                          float *out) {
    int n = g->n;
#pragma omp parallel for
    for (int r = 0; r < N; r++)
        for (int j = 0; j < n; j++) xs[(size_t)r * n + j] = g->x[(size_t)r * n + j] / s[j];
    double err = 0.0;
    size_t rb = dtype_row_bytes(t, n);
    for (int i = 0; i < g->n_w; i++) {
#pragma omp parallel
        {
            uint8_t *q = mallocCheck(rb);
#pragma omp for
            for (int o = 0; o < g->rows[i]; o++) { // the int4 round trip, row by row (rows are independent)
                float *row = wq + (size_t)o * n;
                for (int j = 0; j < n; j++) row[j] = g->w[i][(size_t)o * n + j] * s[j];
                quantize_row(t, q, row, n);
                dequantize_row(t, row, q, n);
            }
            free(q);
        }
        matmul(out, xs, wq, N, n, g->rows[i]); // (N, rows)
        for (size_t k = 0; k < (size_t)N * g->rows[i]; k++) { // in order: the sum does not depend on the threads
            double d = (double)out[k] - y[i][k];
            err += d * d;
        }
    }
    return err;
}

// s = s_x^alpha / sqrt(max * min) over the channels (alpha = 0: exactly 1).
static void scales_at(float *s, const double *s_x, int n, double alpha) {
    double lo = INFINITY, hi = 0.0;
    for (int j = 0; j < n; j++) {
        s[j] = (float)pow(s_x[j], alpha);
        lo = fmin(lo, s[j]);
        hi = fmax(hi, s[j]);
    }
    float norm = (float)sqrt(hi * lo);
    for (int j = 0; j < n; j++) s[j] /= norm;
}

// The best scales of a group over the alpha grid into s; returns the alpha.
static double search_group(const Group *g, DType t, const double *s_x, int N, double max_alpha, float *s,
                           double *best_err, double *rtn_err) {
    int n = g->n, widest = 0;
    for (int i = 0; i < g->n_w; i++) widest = g->rows[i] > widest ? g->rows[i] : widest;
    float *xs = mallocCheck((size_t)N * n * sizeof(float)), *wq = mallocCheck((size_t)widest * n * sizeof(float));
    float *out = mallocCheck((size_t)N * widest * sizeof(float)), *try_s = mallocCheck(n * sizeof(float));
    float *y[3];
    for (int i = 0; i < g->n_w; i++) {
        y[i] = mallocCheck((size_t)N * g->rows[i] * sizeof(float));
        matmul(y[i], g->x, g->w[i], N, n, g->rows[i]);
    }
    double best_alpha = 0.0;
    *best_err = INFINITY;
    int steps = max_alpha > 0 ? AWQ_GRID - 1 : 0;
    for (int k = 0; k <= steps; k++) {
        double alpha = steps ? max_alpha * k / steps : 0.0;
        scales_at(try_s, s_x, n, alpha);
        double err = group_error(g, t, try_s, y, N, xs, wq, out);
        if (k == 0) *rtn_err = err;
        if (err < *best_err) {
            *best_err = err;
            best_alpha = alpha;
            memcpy(s, try_s, n * sizeof(float));
        }
    }
    for (int i = 0; i < g->n_w; i++) free(y[i]);
    free(xs), free(wq), free(out), free(try_s);
    return best_alpha;
}

// Mean |x| of each of n channels over N rows.
static void channel_means(double *s_x, const float *x, int N, int n) {
    for (int j = 0; j < n; j++) s_x[j] = 0.0;
    for (int r = 0; r < N; r++)
        for (int j = 0; j < n; j++) s_x[j] += fabs(x[(size_t)r * n + j]);
    for (int j = 0; j < n; j++) s_x[j] = s_x[j] / N + 1e-8; // (a dead channel stays finite)
}

static void scale_cols(float *w, int rows, int n, const float *s) {
    for (int o = 0; o < rows; o++)
        for (int j = 0; j < n; j++) w[(size_t)o * n + j] *= s[j];
}

void awq_quantize(Model *m, DType t, const Calibration *cal, double max_alpha, AwqResult *res) {
    const Config *c = &m->config;
    if (c->n_layers > AWQ_MAX_LAYERS) die("awq: %d layers (at most %d)", c->n_layers, AWQ_MAX_LAYERS);
    if (t != DTYPE_I4_G32 && t != DTYPE_I4_G64 && t != DTYPE_I4_G128) die("awq: %s is not an int4-gG type", dtype_name(t));
    if (cal->L != c->n_layers || cal->C != c->dim || cal->H != c->hidden_dim)
        die("awq: the calibration is of another model's shape");
    memset(res, 0, sizeof *res);
    int N = cal->N, C = c->dim, H = c->hidden_dim, hd = c->head_dim, qd = c->n_heads * hd, kvd = c->n_kv_heads * hd;
    int group_size = c->n_heads / c->n_kv_heads, widest = C > H ? C : H;
    widest = widest > qd ? widest : qd;
    double *s_x = mallocCheck(widest * sizeof(double));
    float *s = mallocCheck(widest * sizeof(float));
    Weights *w = &m->weights;
    for (int l = 0; l < c->n_layers; l++) {
        float *wq = w->wq + (size_t)l * qd * C, *wk = w->wk + (size_t)l * kvd * C, *wv = w->wv + (size_t)l * kvd * C;
        float *wo = w->wo + (size_t)l * C * qd, *w1 = w->w1 + (size_t)l * H * C, *w2 = w->w2 + (size_t)l * C * H;
        float *w3 = w->w3 + (size_t)l * H * C;
        Group groups[AWQ_GROUPS] = {
            {calibration_input(cal, c, INPUT_ATTN_NORM, l), C, {wq, wk, wv}, {qd, kvd, kvd}, 3},
            {calibration_input(cal, c, INPUT_ATTN_OUT, l), qd, {wo}, {C}, 1},
            {calibration_input(cal, c, INPUT_FFN_NORM, l), C, {w1, w3}, {H, H}, 2},
            {calibration_input(cal, c, INPUT_FFN_ACT, l), H, {w2}, {C}, 1},
        };
        for (int g = 0; g < AWQ_GROUPS; g++) {
            const Group *G = &groups[g];
            channel_means(s_x, G->x, N, G->n);
            if (g == AWQ_ATTN_OUT) // query heads sharing a KV head share its channels' scale
                for (int kv = 0; kv < c->n_kv_heads; kv++)
                    for (int d = 0; d < hd; d++) {
                        double mean = 0.0;
                        for (int h = kv * group_size; h < (kv + 1) * group_size; h++) mean += s_x[h * hd + d];
                        for (int h = kv * group_size; h < (kv + 1) * group_size; h++) s_x[h * hd + d] = mean / group_size;
                    }
            res->alpha[l][g] = search_group(G, t, s_x, N, max_alpha, s, &res->error[l][g], &res->error_rtn[l][g]);
            // fold: scale the inputs' columns by s, the operation before by 1 / s
            for (int i = 0; i < G->n_w; i++) scale_cols(G->w[i], G->rows[i], G->n, s);
            if (g == AWQ_ATTN_IN || g == AWQ_MLP_IN) {
                float *gain = (g == AWQ_ATTN_IN ? w->rms_att : w->rms_ffn) + (size_t)l * C;
                for (int j = 0; j < C; j++) gain[j] /= s[j];
            } else if (g == AWQ_ATTN_OUT) { // value channel (kv, d) is output channel (h, d) of its heads
                for (int kv = 0; kv < c->n_kv_heads; kv++)
                    for (int d = 0; d < hd; d++)
                        for (int j = 0; j < C; j++) wv[(size_t)(kv * hd + d) * C + j] /= s[kv * group_size * hd + d];
            } else { // w2's input channel j is silu(gate_j) * up_j: scale w3's row j
                for (int j = 0; j < H; j++)
                    for (int k = 0; k < C; k++) w3[(size_t)j * C + k] /= s[j];
            }
        }
    }
    free(s_x), free(s);
    if (m->quant) quant_weights_free(m->quant);
    else m->quant = mallocCheck(sizeof *m->quant);
    quant_weights_build(m->quant, m, t);
}
