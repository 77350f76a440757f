// outliers.c: LLM.int8()-style outlier-aware int8 weights (see outliers.h).
#include "outliers.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"
#include "quantized.h"
#include "train.h"

// Largest |x| per channel of x (N, n).
static float *channel_max(const float *x, int N, int n) {
    float *mx = mallocCheck((size_t)n * sizeof(float));
    for (int j = 0; j < n; j++) mx[j] = 0.0f;
    for (int t = 0; t < N; t++)
        for (int j = 0; j < n; j++) mx[j] = fmaxf(mx[j], fabsf(x[(size_t)t * n + j]));
    return mx;
}

void outlier_calibrate(OutlierCalibration *oc, const Model *m, const int *tokens, int B, int T) {
    const Config *c = &m->config;
    if (c->kv_lora_rank || c->kv_share > 1) die("outlier int8: MLA and cross-layer KV sharing models are not supported");
    Trainer tr;
    trainer_calibrate(&tr, m, tokens, B, T);
    const Activations *a = &tr.acts;

    int cap = 7 * c->n_layers + 2, N = B * T, C = c->dim, H = c->hidden_dim, qd = c->n_heads * c->head_dim;
    const float **host = mallocCheck(cap * sizeof *host);
    oc->rows = mallocCheck(cap * sizeof(int));
    oc->cols = mallocCheck(cap * sizeof(int));
    oc->n = model_matrices(m, host, oc->rows, oc->cols);
    oc->col_max = mallocCheck(oc->n * sizeof(float *));
    // model_matrices' order: the embedding, 7 per layer (wq wk wv wo w1 w2 w3), an untied head
    oc->col_max[0] = c->tied_embeddings ? channel_max(a->xn_final, N, C) : NULL;
    for (int l = 0; l < c->n_layers; l++) {
        float **mx = oc->col_max + 1 + 7 * l;
        const float *xn_att = a->xn_att + (size_t)l * N * C, *xn_ffn = a->xn_ffn + (size_t)l * N * C;
        for (int k = 0; k < 3; k++) mx[k] = channel_max(xn_att, N, C);
        mx[3] = channel_max(a->att + (size_t)l * N * qd, N, qd);
        mx[4] = channel_max(xn_ffn, N, C);
        mx[5] = channel_max(a->act + (size_t)l * N * H, N, H);
        mx[6] = channel_max(xn_ffn, N, C);
    }
    if (!c->tied_embeddings) oc->col_max[oc->n - 1] = channel_max(a->xn_final, N, C);
    free(host);
    trainer_free(&tr);
}

void outlier_calibration_free(OutlierCalibration *oc) {
    for (int i = 0; i < oc->n; i++) free(oc->col_max[i]);
    free(oc->col_max), free(oc->cols), free(oc->rows);
    memset(oc, 0, sizeof *oc);
}

double outlier_column_fraction(const OutlierCalibration *oc, float threshold) {
    double kept = 0.0, all = 0.0;
    for (int i = 0; i < oc->n; i++)
        for (int j = 0; oc->col_max[i] && j < oc->cols[i]; j++) kept += oc->col_max[i][j] > threshold, all += 1.0;
    return all > 0.0 ? kept / all : 0.0;
}

double outlier_weight_fraction(const OutlierCalibration *oc, float threshold) {
    double kept = 0.0, all = 0.0;
    for (int i = 0; i < oc->n; i++) {
        all += (double)oc->rows[i] * oc->cols[i];
        for (int j = 0; oc->col_max[i] && j < oc->cols[i]; j++) kept += oc->col_max[i][j] > threshold ? oc->rows[i] : 0;
    }
    return kept / all;
}

static int cmp_float(const void *a, const void *b) {
    float x = *(const float *)a, y = *(const float *)b;
    return (x > y) - (x < y);
}

float outlier_channel_quantile(const OutlierCalibration *oc, double q) {
    size_t n = 0, k = 0;
    for (int i = 0; i < oc->n; i++) n += oc->col_max[i] ? (size_t)oc->cols[i] : 0;
    if (n == 0) die("outlier int8: no calibrated input channels");
    float *all = mallocCheck(n * sizeof(float));
    for (int i = 0; i < oc->n; i++)
        for (int j = 0; oc->col_max[i] && j < oc->cols[i]; j++) all[k++] = oc->col_max[i][j];
    qsort(all, n, sizeof(float), cmp_float);
    size_t at = (size_t)floor(q * (double)(n - 1) + 0.5);
    float v = all[at];
    free(all);
    return v;
}

void outlier_quantize(Model *m, const OutlierCalibration *oc, float threshold) {
    if (m->quant) quant_weights_free(m->quant);
    else m->quant = mallocCheck(sizeof *m->quant);
    quant_weights_build_outliers(m->quant, m, (const float *const *)oc->col_max, threshold);
}
