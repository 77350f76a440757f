// outliers.c: LLM.int8()-style outlier-aware int8 weights (see outliers.h).
#include "outliers.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "arch.h"
#include "common.h"
#include "quant_weights.h"

// Largest |x| per channel of x (N, n).
static float *channel_max(const float *x, int N, int n) {
    float *mx = mallocCheck((size_t)n * sizeof(float));
    for (int j = 0; j < n; j++) mx[j] = 0.0f;
    for (int t = 0; t < N; t++)
        for (int j = 0; j < n; j++) mx[j] = fmaxf(mx[j], fabsf(x[(size_t)t * n + j]));
    return mx;
}

void outlier_calibrate(OutlierCalibration *oc, const Model *m, const Calibration *cal) {
    const Config *c = &m->config;
    ModelTensor *t = model_matrix_list(m, &oc->n);
    oc->rows = mallocCheck(oc->n * sizeof(int));
    oc->cols = mallocCheck(oc->n * sizeof(int));
    oc->col_max = mallocCheck(oc->n * sizeof(float *));
    for (int i = 0; i < oc->n; i++) {
        const float *x = calibration_input(cal, c, t[i].spec->input, t[i].layer);
        if (!x && t[i].spec->input != INPUT_TIED_HEAD)
            die("outlier int8: the input of %s is not calibrated", t[i].name);
        oc->rows[i] = (int)t[i].rows;
        oc->cols[i] = (int)t[i].cols;
        oc->col_max[i] = x ? channel_max(x, cal->N, oc->cols[i]) : NULL;
    }
    free(t);
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
