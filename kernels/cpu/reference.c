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

void ref_rope_rotate(float *x, int n_heads, int head_dim, int pos, const float *inv_freq, float mscale) {
    for (int h = 0; h < n_heads; h++)
        for (int i = 0; i < head_dim / 2; i++) {
            double angle = (double)pos * inv_freq[i];
            double a = x[h * head_dim + 2 * i], b = x[h * head_dim + 2 * i + 1];
            x[h * head_dim + 2 * i] = (float)(mscale * (a * cos(angle) - b * sin(angle)));
            x[h * head_dim + 2 * i + 1] = (float)(mscale * (a * sin(angle) + b * cos(angle)));
        }
}

void ref_swiglu(float *out, const float *gate, const float *up, int T, int H) {
    for (size_t i = 0; i < (size_t)T * H; i++) {
        double g = gate[i];
        out[i] = (float)(g / (1.0 + exp(-g)) * up[i]);
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

// ---- quantised formats ------------------------------------------------------------------------

float ref_dequantize_weight(DType t, const void *row, int n, int i) {
    if (t == DTYPE_F32) return ((const float *)row)[i];
    int B = dtype_block_elems(t, n), k = i / B, p = i % B;
    int len = n - k * B < B ? n - k * B : B;
    const uint8_t *b = (const uint8_t *)row + (k ? dtype_row_bytes(t, k * B) : 0); // k whole blocks before
    uint16_t h[2];
    memcpy(h, b, sizeof h);
    switch (t) {
    case DTYPE_Q8_0: return (float)((double)(int8_t)b[2 + p] * fp16_to_fp32(h[0]));
    case DTYPE_Q4_0: {
        int byte = b[2 + p % 16], nibble = p < 16 ? byte & 0x0F : byte >> 4;
        return (float)((double)(nibble - 8) * fp16_to_fp32(h[0]));
    }
    case DTYPE_I8: {
        float s;
        memcpy(&s, b, sizeof s);
        return (float)((double)(int8_t)b[4 + p] * s);
    }
    case DTYPE_I4_G32: case DTYPE_I4_G64: case DTYPE_I4_G128: {
        int half = len / 2, byte = b[4 + p % half], nibble = p < half ? byte & 0x0F : byte >> 4;
        return (float)((double)nibble * fp16_to_fp32(h[0]) + fp16_to_fp32(h[1]));
    }
    default: die("ref_dequantize_weight: %s is not a CPU weight type", dtype_name(t));
    }
}

double ref_dot_row(DType t, const void *row, const float *x, int n) {
    double acc = 0.0;
    for (int i = 0; i < n; i++) acc += (double)ref_dequantize_weight(t, row, n, i) * x[i];
    return acc;
}

double ref_act_q8_value(const void *xq, int i) {
    const uint8_t *b = (const uint8_t *)xq + (size_t)(i / 32) * (sizeof(float) + 32);
    float d;
    memcpy(&d, b, sizeof d);
    return (double)d * (int8_t)b[4 + i % 32];
}

double ref_dot_row_act_q8(DType t, const void *row, const void *xq, int n) {
    double acc = 0.0;
    for (int i = 0; i < n; i++) acc += (double)ref_dequantize_weight(t, row, n, i) * ref_act_q8_value(xq, i);
    return acc;
}
