// reference_attention.c: plain double-precision full-sequence attention, the ground truth
// for attention_naive and attention_flash (see reference.h). Single-threaded and slow.
#include <math.h>
#include <stdlib.h>

#include "common.h"
#include "reference.h"

void ref_attention_full_row(double *out, const float *q, const float *k, const float *v,
                            const AttentionFullShape *s, int b, int h, int t) {
    int T = s->T, D = s->D, n = s->causal ? t + 1 : T;
    size_t head = ((size_t)b * s->H + h) * T * D; // offset of (b, h) in (B, H, T, D)
    const float *qt = q + head + (size_t)t * D;
    double *p = mallocCheck((size_t)n * sizeof(double));
    double scale = 1.0 / sqrt((double)D), max = -INFINITY;
    for (int j = 0; j < n; j++) {
        const float *kj = k + head + (size_t)j * D;
        double dot = 0.0;
        for (int d = 0; d < D; d++) dot += (double)qt[d] * kj[d];
        p[j] = dot * scale;
        if (p[j] > max) max = p[j];
    }
    double sum = 0.0;
    for (int j = 0; j < n; j++) sum += p[j] = exp(p[j] - max);
    for (int d = 0; d < D; d++) out[d] = 0.0;
    for (int j = 0; j < n; j++) {
        const float *vj = v + head + (size_t)j * D;
        for (int d = 0; d < D; d++) out[d] += p[j] * vj[d];
    }
    for (int d = 0; d < D; d++) out[d] /= sum;
    free(p);
}

void ref_attention_full(float *out, const float *q, const float *k, const float *v, const AttentionFullShape *s) {
    double *row = mallocCheck((size_t)s->D * sizeof(double));
    for (int b = 0; b < s->B; b++)
        for (int h = 0; h < s->H; h++)
            for (int t = 0; t < s->T; t++) {
                ref_attention_full_row(row, q, k, v, s, b, h, t);
                float *o = out + (((size_t)b * s->H + h) * s->T + t) * s->D;
                for (int d = 0; d < s->D; d++) o[d] = (float)row[d];
            }
    free(row);
}
