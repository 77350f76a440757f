// reference.c: the plain double-precision versions of the kernels in kernels.h, the
// ground truth for tests (see reference.h). Written for clarity, not speed.
#include "reference.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"
#include "quant.h"

void ref_matmul(float *out, const float *x, const float *w, int T, int n, int d) {
    for (int t = 0; t < T; t++)
        for (int o = 0; o < d; o++) {
            double acc = 0.0;
            for (int i = 0; i < n; i++) acc += (double)x[(size_t)t * n + i] * w[(size_t)o * n + i];
            out[(size_t)t * d + o] = (float)acc;
        }
}

void ref_rmsnorm(float *out, const float *x, const float *weight, int T, int C, float eps) {
    for (int t = 0; t < T; t++) {
        double ss = 0.0;
        for (int i = 0; i < C; i++) ss += (double)x[t * C + i] * x[t * C + i];
        double inv = 1.0 / sqrt(ss / C + eps);
        for (int i = 0; i < C; i++) out[t * C + i] = (float)(x[t * C + i] * inv * weight[i]);
    }
}

void ref_softmax_rows(float *x, int rows, int n, float *lse) {
    for (int r = 0; r < rows; r++) {
        float *row = x + (size_t)r * n;
        double max = row[0], sum = 0.0;
        for (int i = 1; i < n; i++) max = fmax(max, row[i]);
        for (int i = 0; i < n; i++) sum += exp(row[i] - max);
        for (int i = 0; i < n; i++) row[i] = (float)(exp(row[i] - max) / sum);
        if (lse) lse[r] = (float)(max + log(sum));
    }
}

void ref_rope_rotate(float *x, int n_heads, int head_dim, int pos, const float *inv_freq, float mscale, RopeStyle style) {
    int half = head_dim / 2;
    for (int h = 0; h < n_heads; h++)
        for (int i = 0; i < half; i++) {
            double angle = (double)pos * inv_freq[i];
            float *a_at = x + h * head_dim + (style == ROPE_STYLE_NEOX ? i : 2 * i);
            float *b_at = style == ROPE_STYLE_NEOX ? a_at + half : a_at + 1;
            double a = *a_at, b = *b_at;
            *a_at = (float)(mscale * (a * cos(angle) - b * sin(angle)));
            *b_at = (float)(mscale * (a * sin(angle) + b * cos(angle)));
        }
}

void ref_swiglu(float *out, const float *gate, const float *up, int T, int H) {
    for (size_t i = 0; i < (size_t)T * H; i++) {
        double g = gate[i];
        out[i] = (float)(g / (1.0 + exp(-g)) * up[i]);
    }
}

void ref_geglu_tanh(float *out, const float *gate, const float *up, int T, int H) {
    for (size_t i = 0; i < (size_t)T * H; i++) {
        double g = gate[i];
        out[i] = (float)(0.5 * g * (1.0 + tanh(sqrt(2.0 / 3.14159265358979323846) * (g + 0.044715 * g * g * g))) * up[i]);
    }
}

void ref_swiglu_backward(float *d_gate, float *d_up, const float *d_out, const float *gate, const float *up,
                         size_t n) {
    for (size_t i = 0; i < n; i++) {
        double g = gate[i], dout = d_out[i], sig = 1.0 / (1.0 + exp(-g));
        d_gate[i] = (float)(dout * up[i] * sig * (1.0 + g * (1.0 - sig)));
        d_up[i] = (float)(dout * g * sig);
    }
}

void ref_attention_kv(float *out, const float *q, const float *k, const float *v, int n_q, int pos0,
                      const AttentionShape *s) {
    int hd = s->head_dim, vd = attention_value_dim(s), group = s->n_heads / s->n_kv_heads;
    size_t q_stride = (size_t)s->n_heads * hd, out_stride = (size_t)s->n_heads * vd;
    size_t ks = attention_key_stride(s), vs = attention_value_stride(s);
    double *w = mallocCheck((size_t)(pos0 + n_q) * sizeof(double));
    for (int t = 0; t < n_q; t++) {
        int p = pos0 + t;
        for (int h = 0; h < s->n_heads; h++) {
            const float *qh = q + (size_t)t * q_stride + h * hd;
            int kvh = h / group;
            double max = -INFINITY, sum = 0.0;
            for (int j = 0; j <= p; j++) {
                if (!attention_visible(p, j, s->window, s->n_sink)) continue;
                double dot = 0.0;
                for (int i = 0; i < hd; i++) dot += (double)qh[i] * k[(size_t)j * ks + kvh * hd + i];
                w[j] = dot * s->scale;
                max = fmax(max, w[j]);
            }
            for (int j = 0; j <= p; j++)
                if (attention_visible(p, j, s->window, s->n_sink)) sum += exp(w[j] - max);
            for (int i = 0; i < vd; i++) {
                double acc = 0.0;
                for (int j = 0; j <= p; j++)
                    if (attention_visible(p, j, s->window, s->n_sink))
                        acc += exp(w[j] - max) / sum * v[(size_t)j * vs + kvh * vd + i];
                out[(size_t)t * out_stride + h * vd + i] = (float)acc;
            }
        }
    }
    free(w);
}

// ---- the trainer's kernels -------------------------------------------------------------------

void ref_matmul_backward(float *dx, float *dw, const float *dy, const float *x, const float *w, int N, int n,
                         int d) {
    for (int r = 0; dx && r < N; r++)
        for (int i = 0; i < n; i++) {
            double acc = 0.0;
            for (int o = 0; o < d; o++) acc += (double)dy[(size_t)r * d + o] * w[(size_t)o * n + i];
            dx[(size_t)r * n + i] = (float)(dx[(size_t)r * n + i] + acc);
        }
    for (int o = 0; o < d; o++)
        for (int i = 0; i < n; i++) {
            double acc = 0.0;
            for (int r = 0; r < N; r++) acc += (double)dy[(size_t)r * d + o] * x[(size_t)r * n + i];
            dw[(size_t)o * n + i] = (float)(dw[(size_t)o * n + i] + acc);
        }
}

// y_i = x_i r w_i with r = (sum x^2 / C + eps)^-1/2: dx_i = r dy_i w_i - r^3 / C x_i sum_j dy_j w_j x_j,
// dw_i = sum over rows of dy_i x_i r.
void ref_rmsnorm_backward(float *dx, float *dw, const float *dy, const float *x, const float *w, int N, int C,
                          float eps) {
    double *dw_acc = callocCheck((size_t)C, sizeof(double));
    for (int r = 0; r < N; r++) {
        const float *xr = x + (size_t)r * C, *dyr = dy + (size_t)r * C;
        double ss = 0.0, dot = 0.0;
        for (int i = 0; i < C; i++) {
            ss += (double)xr[i] * xr[i];
            dot += (double)dyr[i] * w[i] * xr[i];
        }
        double rstd = 1.0 / sqrt(ss / C + eps);
        for (int i = 0; i < C; i++) {
            double d = rstd * dyr[i] * w[i] - rstd * rstd * rstd / C * xr[i] * dot;
            dx[(size_t)r * C + i] = (float)(dx[(size_t)r * C + i] + d);
            dw_acc[i] += (double)dyr[i] * xr[i] * rstd;
        }
    }
    for (int i = 0; i < C; i++) dw[i] = (float)(dw[i] + dw_acc[i]);
    free(dw_acc);
}

static void ref_rope_rows(float *x, int N, int T, int n_heads, int head_dim, int rot_dim, const float *inv_freq,
                          float mscale, int sign) {
    for (int r = 0; r < N; r++)
        for (int h = 0; h < n_heads; h++)
            ref_rope_rotate(x + ((size_t)r * n_heads + h) * head_dim + head_dim - rot_dim, 1, rot_dim, sign * (r % T),
                            inv_freq, mscale, ROPE_STYLE_NORM);
}

void ref_rope_forward(float *x, int N, int T, int n_heads, int head_dim, int rot_dim, const float *inv_freq,
                      float mscale) {
    ref_rope_rows(x, N, T, n_heads, head_dim, rot_dim, inv_freq, mscale, 1);
}

void ref_rope_backward(float *dx, int N, int T, int n_heads, int head_dim, int rot_dim, const float *inv_freq,
                       float mscale) {
    ref_rope_rows(dx, N, T, n_heads, head_dim, rot_dim, inv_freq, mscale, -1);
}

// P (T, T) of head h of sequence b in double: row i the softmax of scale q_i . k_j over the keys
// j <= i that attention_visible lets it see, 0 elsewhere.
static void ref_attention_probs(double *P, const float *q, const float *k, int b, int h, int T,
                                const AttentionShape *s) {
    int hd = s->head_dim, group = s->n_heads / s->n_kv_heads;
    size_t qs = (size_t)s->n_heads * hd, ks = (size_t)s->n_kv_heads * hd;
    for (int i = 0; i < T; i++) {
        const float *qi = q + ((size_t)b * T + i) * qs + (size_t)h * hd;
        double *row = P + (size_t)i * T, max = -INFINITY, sum = 0.0;
        for (int j = 0; j < T; j++) {
            row[j] = 0.0;
            if (j > i || !attention_visible(i, j, s->window, s->n_sink)) continue;
            const float *kj = k + ((size_t)b * T + j) * ks + (size_t)(h / group) * hd;
            double dot = 0.0;
            for (int d = 0; d < hd; d++) dot += (double)qi[d] * kj[d];
            row[j] = dot * s->scale;
            max = fmax(max, row[j]);
        }
        for (int j = 0; j <= i; j++)
            if (attention_visible(i, j, s->window, s->n_sink)) sum += row[j] = exp(row[j] - max);
        for (int j = 0; j <= i; j++) row[j] /= sum;
    }
}

void ref_attention_forward(float *out, float *probs, const float *q, const float *k, const float *v, int B, int T,
                           const AttentionShape *s) {
    int nh = s->n_heads, vd = attention_value_dim(s), group = nh / s->n_kv_heads;
    size_t vs = (size_t)s->n_kv_heads * vd, os = (size_t)nh * vd;
    double *P = mallocCheck((size_t)T * T * sizeof(double));
    for (int b = 0; b < B; b++)
        for (int h = 0; h < nh; h++) {
            ref_attention_probs(P, q, k, b, h, T, s);
            for (size_t e = 0; e < (size_t)T * T; e++) probs[((size_t)b * nh + h) * T * T + e] = (float)P[e];
            for (int i = 0; i < T; i++)
                for (int d = 0; d < vd; d++) {
                    double acc = 0.0;
                    for (int j = 0; j <= i; j++)
                        acc += P[(size_t)i * T + j] * v[((size_t)b * T + j) * vs + (size_t)(h / group) * vd + d];
                    out[((size_t)b * T + i) * os + (size_t)h * vd + d] = (float)acc;
                }
        }
    free(P);
}

// dP_ij = dO_i . v_j, dS_ij = P_ij (dP_ij - sum_j' P_ij' dP_ij'), dq_i = scale sum_j dS_ij k_j,
// dk_j = scale sum_i dS_ij q_i, dv_j = sum_i P_ij dO_i (dk, dv summed over the heads sharing them).
void ref_attention_backward(float *dq, float *dk, float *dv, const float *d_out, const float *probs,
                            const float *q, const float *k, const float *v, int B, int T, const AttentionShape *s) {
    (void)probs;
    int nh = s->n_heads, nkv = s->n_kv_heads, hd = s->head_dim, vd = attention_value_dim(s), group = nh / nkv;
    size_t qs = (size_t)nh * hd, ks = (size_t)nkv * hd, vs = (size_t)nkv * vd, os = (size_t)nh * vd;
    double *P = mallocCheck((size_t)T * T * sizeof(double)), *dS = mallocCheck((size_t)T * sizeof(double));
    double *dK = mallocCheck((size_t)T * hd * sizeof(double)), *dV = mallocCheck((size_t)T * vd * sizeof(double));
    for (int b = 0; b < B; b++)
        for (int g = 0; g < nkv; g++) {
            memset(dK, 0, (size_t)T * hd * sizeof(double));
            memset(dV, 0, (size_t)T * vd * sizeof(double));
            const float *kg = k + (size_t)b * T * ks + (size_t)g * hd, *vg = v + (size_t)b * T * vs + (size_t)g * vd;
            for (int h = g * group; h < (g + 1) * group; h++) {
                ref_attention_probs(P, q, k, b, h, T, s);
                for (int i = 0; i < T; i++) {
                    const float *doi = d_out + ((size_t)b * T + i) * os + (size_t)h * vd;
                    const float *qi = q + ((size_t)b * T + i) * qs + (size_t)h * hd;
                    const double *pi = P + (size_t)i * T;
                    double row_dot = 0.0;
                    for (int j = 0; j <= i; j++) {
                        double dp = 0.0;
                        for (int d = 0; d < vd; d++) dp += (double)doi[d] * vg[(size_t)j * vs + d];
                        dS[j] = dp;
                        row_dot += pi[j] * dp;
                    }
                    for (int j = 0; j <= i; j++) dS[j] = pi[j] * (dS[j] - row_dot) * s->scale;
                    for (int d = 0; d < hd; d++) {
                        double acc = 0.0;
                        for (int j = 0; j <= i; j++) acc += dS[j] * kg[(size_t)j * ks + d];
                        dq[((size_t)b * T + i) * qs + (size_t)h * hd + d] = (float)acc;
                    }
                    for (int j = 0; j <= i; j++) {
                        for (int d = 0; d < hd; d++) dK[(size_t)j * hd + d] += dS[j] * qi[d];
                        for (int d = 0; d < vd; d++) dV[(size_t)j * vd + d] += pi[j] * doi[d];
                    }
                }
            }
            for (int j = 0; j < T; j++) {
                for (int d = 0; d < hd; d++) dk[((size_t)b * T + j) * ks + (size_t)g * hd + d] = (float)dK[(size_t)j * hd + d];
                for (int d = 0; d < vd; d++) dv[((size_t)b * T + j) * vs + (size_t)g * vd + d] = (float)dV[(size_t)j * vd + d];
            }
        }
    free(P), free(dS), free(dK), free(dV);
}

double ref_crossentropy_forward(float *logits, float *row_loss, const int *targets, int N, int V) {
    double total = 0.0;
    for (int r = 0; r < N; r++) {
        float *row = logits + (size_t)r * V;
        double max = row[0], sum = 0.0;
        for (int i = 1; i < V; i++) max = fmax(max, row[i]);
        for (int i = 0; i < V; i++) sum += exp(row[i] - max);
        double lse = max + log(sum), loss = targets[r] >= 0 ? lse - row[targets[r]] : 0.0;
        for (int i = 0; i < V; i++) row[i] = (float)exp(row[i] - lse);
        row_loss[r] = (float)loss;
        total += loss;
    }
    return total;
}

void ref_crossentropy_backward(float *probs, const int *targets, const float *weights, int N, int V, float scale) {
    for (int r = 0; r < N; r++) {
        double w = weights ? (double)scale * weights[r] : scale;
        for (int i = 0; i < V; i++) {
            float *e = probs + (size_t)r * V + i;
            *e = targets[r] < 0 ? 0.0f : (float)(w * (*e - (i == targets[r] ? 1.0 : 0.0)));
        }
    }
}

void ref_add_inplace(float *x, const float *y, size_t n) {
    for (size_t i = 0; i < n; i++) x[i] = (float)((double)x[i] + y[i]);
}

double ref_sum_squares(const float *x, size_t n) {
    double s = 0.0;
    for (size_t i = 0; i < n; i++) s += (double)x[i] * x[i];
    return s;
}

void ref_adamw(float *p, const float *g, float *m, float *v, size_t n, const AdamW *h) {
    double b1 = h->beta1, b2 = h->beta2, b1c = 1.0 - pow(b1, h->step), b2c = 1.0 - pow(b2, h->step);
    for (size_t i = 0; i < n; i++) {
        double gi = (double)g[i] * h->grad_scale, mi = b1 * m[i] + (1.0 - b1) * gi, vi = b2 * v[i] + (1.0 - b2) * gi * gi;
        p[i] = (float)(p[i] - h->lr * (mi / b1c / (sqrt(vi / b2c) + h->eps) + h->decay * p[i]));
        m[i] = (float)mi;
        v[i] = (float)vi;
    }
}

// ---- quantised formats ------------------------------------------------------------------------
// Each weight from its block by the layouts of quant.h, one at a time: its integer code and the
// block's scales, then the value in double (rounded once to float). The kernels round ggml's way
// (products in fp32), so they agree to an ulp or two of the terms; tests/test_ggml_quants.c holds
// them to gguf's floats bit for bit.

static double half_d(const uint8_t *p) {
    uint16_t h;
    memcpy(&h, p, 2);
    return fp16_to_fp32(h);
}

// Q4_K sub-block j's 6-bit scale and min (get_scale_min_k4, written out from the layout).
static void ref_k4_scale_min(const uint8_t *s, int j, int *sc, int *m) {
    *sc = j < 4 ? s[j] & 63 : (s[j + 4] & 15) | (s[j - 4] >> 6) << 4;
    *m = j < 4 ? s[j + 4] & 63 : (s[j + 4] >> 4) | (s[j] >> 6) << 4;
}

// Weight p of a block of t: its code (signed, offset removed), the scale it is multiplied by
// (*scale, in double: d, or d * sc) and what is added (*add: q4_1's and int4's m, q4_k's
// -dmin * m; else 0). Integer scales (k-quants' sc) go to *isc with the block's float d in *scale.
typedef struct {
    int code;     // w = scale * isc * code + add
    int isc;      // the sub-block's integer scale (k-quants), else 1
    double scale; // the block's (or row's) fp16 / fp32 scale
    double add;
    int imin;     // q4_k: the sub-block's integer min (add = -dmin * imin), else 0
    double dmin;  // q4_k's dmin, else 0
} RefWeight;

static RefWeight ref_weight(DType t, const void *row, int n, int i) {
    int B = dtype_block_elems(t, n), k = i / B, p = i % B;
    int len = n - k * B < B ? n - k * B : B;
    const uint8_t *b = (const uint8_t *)row + (k ? dtype_row_bytes(t, k * B) : 0); // k whole blocks before
    RefWeight w = {0, 1, 0.0, 0.0, 0, 0.0};
    switch (t) {
    case DTYPE_Q8_0: w.code = (int8_t)b[2 + p], w.scale = half_d(b); break;
    case DTYPE_Q4_0: {
        int byte = b[2 + p % 16];
        w.code = (p < 16 ? byte & 0x0F : byte >> 4) - 8, w.scale = half_d(b);
        break;
    }
    case DTYPE_Q5_0: {
        uint32_t qh;
        memcpy(&qh, b + 2, 4);
        int byte = b[6 + p % 16];
        w.code = ((p < 16 ? byte & 0x0F : byte >> 4) | (int)((qh >> p) & 1) << 4) - 16, w.scale = half_d(b);
        break;
    }
    case DTYPE_I8: {
        float s;
        memcpy(&s, b, sizeof s);
        w.code = (int8_t)b[4 + p], w.scale = s;
        break;
    }
    case DTYPE_Q4_1: case DTYPE_I4_G32: case DTYPE_I4_G64: case DTYPE_I4_G128: {
        int half = len / 2, byte = b[4 + p % half];
        w.code = p < half ? byte & 0x0F : byte >> 4, w.scale = half_d(b), w.add = half_d(b + 2);
        break;
    }
    case DTYPE_Q4_K: {
        int j = p / 32, l = p % 32, byte = b[16 + 32 * (j / 2) + l];
        ref_k4_scale_min(b + 4, j, &w.isc, &w.imin);
        w.code = j % 2 ? byte >> 4 : byte & 0x0F, w.scale = half_d(b), w.dmin = half_d(b + 2);
        w.add = -w.dmin * w.imin;
        break;
    }
    case DTYPE_Q6_K: {
        int h = p / 128, c = p % 128 / 32, l = p % 32;
        int lo = b[64 * h + 32 * (c & 1) + l], hi = b[128 + 32 * h + l];
        w.code = (((c >> 1) ? lo >> 4 : lo & 0x0F) | ((hi >> (2 * c)) & 3) << 4) - 32;
        w.isc = (int8_t)b[192 + 8 * h + 2 * c + l / 16], w.scale = half_d(b + 208);
        break;
    }
    default: die("ref_dequantize_weight: %s is not a CPU weight type", dtype_name(t));
    }
    return w;
}

float ref_dequantize_weight(DType t, const void *row, int n, int i) {
    if (t == DTYPE_F32) return ((const float *)row)[i];
    RefWeight w = ref_weight(t, row, n, i);
    return (float)(w.scale * w.isc * w.code + w.add);
}

double ref_dot_row(DType t, const void *row, const float *x, int n) {
    double acc = 0.0;
    for (int i = 0; i < n; i++) acc += (double)ref_dequantize_weight(t, row, n, i) * x[i];
    return acc;
}

// ---- activation formats (quant.h) -------------------------------------------------------------

static size_t ref_act_block_bytes(ActType a) { return a == ACT_Q8_0 ? 34 : a == ACT_Q8_1 ? 36 : 292; }
static int ref_act_block(ActType a) { return a == ACT_Q8_K ? 256 : 32; }

// Value i's block, its code and its scale d (fp16, or Q8_K's fp32).
static const uint8_t *ref_act_at(ActType a, const void *xq, int i, int *code, double *d) {
    if (a != ACT_Q8_0 && a != ACT_Q8_1 && a != ACT_Q8_K) die("ref_act_value: %d is not an activation format", (int)a);
    int B = ref_act_block(a);
    const uint8_t *b = (const uint8_t *)xq + (size_t)(i / B) * ref_act_block_bytes(a);
    if (a == ACT_Q8_K) {
        float f;
        memcpy(&f, b, sizeof f);
        *d = f, *code = (int8_t)b[4 + i % B];
    } else {
        *d = half_d(b), *code = (int8_t)b[(a == ACT_Q8_1 ? 4 : 2) + i % B];
    }
    return b;
}

double ref_act_value(ActType a, const void *xq, int i) {
    int code;
    double d;
    ref_act_at(a, xq, i, &code, &d);
    return d * code;
}

double ref_dot_row_act(DType t, ActType a, const void *row, const void *xq, int n) {
    double acc = 0.0;
    for (int i = 0; i < n; i++) acc += (double)ref_dequantize_weight(t, row, n, i) * ref_act_value(a, xq, i);
    return acc;
}

// The integer dot the plain way: per block (an activation block of 32, or a q4_k / q6_k
// super-block of 256) the exact integer sums in int64, the block's float scales as ggml forms
// them (fp32 products: d_w * d_a, and q4_k's d_a * d, d_a * dmin, q4_1's m_w * s_a), and the
// blocks combined in double. *abs_terms: the sum of |every term| (products weighted by their
// block scales, and the min terms), which bounds any float summation order's rounding.
double ref_dot_row_int(DType t, const void *row, const void *xq, int n, double *abs_terms) {
    ActType a = t == DTYPE_Q4_1 ? ACT_Q8_1 : t == DTYPE_Q4_K || t == DTYPE_Q6_K ? ACT_Q8_K : ACT_Q8_0;
    if (t != DTYPE_Q8_0 && t != DTYPE_Q4_0 && t != DTYPE_Q5_0 && t != DTYPE_I8 && t != DTYPE_Q4_1 && t != DTYPE_Q4_K &&
        t != DTYPE_Q6_K)
        die("ref_dot_row_int: %s has no integer dot", dtype_name(t));
    int B = ref_act_block(a);
    double acc = 0.0, abs_acc = 0.0;
    for (int k0 = 0; k0 < n; k0 += B) {
        int k1 = k0 + B < n ? k0 + B : n, code_a;
        double da;
        const uint8_t *ab = ref_act_at(a, xq, k0, &code_a, &da);
        int64_t sumi = 0, abs_sumi = 0, msum = 0, abs_msum = 0;
        RefWeight w0 = ref_weight(t, row, n, k0);
        for (int i = k0; i < k1; i++) {
            RefWeight w = ref_weight(t, row, n, i);
            ref_act_at(a, xq, i, &code_a, &da);
            int64_t p = (int64_t)w.isc * w.code * code_a;
            sumi += p, abs_sumi += p < 0 ? -p : p;
            msum += (int64_t)w.imin * code_a, abs_msum += (int64_t)w.imin * (code_a < 0 ? -code_a : code_a);
        }
        float fa = (float)da, fd;
        switch (t) {
        case DTYPE_I8: fd = fa; break; // the row scale multiplies the total, below
        case DTYPE_Q4_K: case DTYPE_Q6_K: fd = fa * (float)w0.scale; break;
        default: fd = (float)w0.scale * fa;
        }
        acc += (double)fd * sumi, abs_acc += fabs((double)fd) * abs_sumi;
        if (t == DTYPE_Q4_1) { // + m_w * s_a
            double ms = (double)((float)w0.add * (float)half_d(ab + 2));
            acc += ms, abs_acc += fabs(ms);
        } else if (t == DTYPE_Q4_K) { // - (d_a * dmin) * sum m q
            float dm = fa * (float)w0.dmin;
            acc -= (double)dm * msum, abs_acc += fabs((double)dm) * abs_msum;
        }
    }
    if (t == DTYPE_I8) {
        float s;
        memcpy(&s, row, sizeof s);
        acc *= s, abs_acc *= fabs((double)s);
    }
    if (abs_terms) *abs_terms = abs_acc;
    return acc;
}
