// quant_weights.c: a model's matrices in quantised form (see quant_weights.h).
#include "quant_weights.h"

#include <stdlib.h>
#include <string.h>

#include "arch.h"
#include "common.h"
#include "quant.h"

void quant_weights_layout(QuantWeights *q, const Model *m, DType dtype, const DType *types) {
    // MLA's engine derives its attention matrices from fp32 host weights (model.c, mla_prepare)
    if (m->config.kv_lora_rank) die("quantised weights: MLA models are not supported (only fp32)");
    memset(q, 0, sizeof *q);
    ModelTensor *t = model_matrix_list(m, &q->n);
    q->dtype = dtype;
    q->host = mallocCheck(q->n * sizeof *q->host);
    q->tensors = mallocCheck(q->n * sizeof *q->tensors);
    size_t block = 0, *offset = mallocCheck(q->n * sizeof(size_t));
    for (int i = 0; i < q->n; i++) {
        int rows = (int)t[i].rows, cols = (int)t[i].cols;
        DType dt = types ? types[i] : dtype_holds_row(dtype, cols) ? dtype : DTYPE_F32;
        if (!dtype_holds_row(dt, cols)) die("quant_weights_layout: rows of %d cannot be %s", cols, dtype_name(dt));
        size_t bytes = (size_t)rows * dtype_row_bytes(dt, cols);
        q->host[i] = t[i].data;
        q->tensors[i] = (Tensor){dt, NULL, rows, cols, NULL};
        offset[i] = block;
        if (dt != DTYPE_F32) block += (bytes + 63) / 64 * 64; // each tensor on a cache line
        q->bytes += bytes;
    }
    q->block = mallocHugeCheck(block ? block : 1);
    for (int i = 0; i < q->n; i++)
        q->tensors[i].data = q->tensors[i].dtype == DTYPE_F32 ? (const void *)q->host[i]
                                                               : (const void *)((char *)q->block + offset[i]);
    free(offset);
    free(t);
}

ModelTensor *model_matrix_list(const Model *m, int *n) {
    size_t count = model_matrices(&m->config, &m->weights, NULL);
    ModelTensor *t = mallocCheck((count ? count : 1) * sizeof *t);
    model_matrices(&m->config, &m->weights, t);
    *n = (int)count;
    return t;
}

void quant_weights_build(QuantWeights *q, const Model *m, DType t) {
    quant_weights_layout(q, m, t, NULL);
    for (int i = 0; i < q->n; i++) {
        Tensor *x = &q->tensors[i];
        if (x->dtype != DTYPE_F32) quantize_matrix(x->dtype, (void *)x->data, q->host[i], x->rows, x->cols);
    }
}

void quant_weights_set_outliers(QuantWeights *q, int i, int n, const int *cols, const float *w) {
    Tensor *x = &q->tensors[i];
    if (!q->outliers) {
        q->outliers = mallocCheck(q->n * sizeof *q->outliers);
        memset(q->outliers, 0, q->n * sizeof *q->outliers);
    }
    TensorOutliers *o = &q->outliers[i];
    if (o->n) die("quant_weights_set_outliers: matrix %d has outlier columns already", i);
    for (int k = 0; k < n; k++)
        if (cols[k] < 0 || cols[k] >= x->cols || (k && cols[k] <= cols[k - 1]))
            die("quant_weights_set_outliers: column %d of %d (not increasing within %d)", cols[k], n, x->cols);
    if (n == 0) return;
    int *c = mallocCheck((size_t)n * sizeof(int));
    float *ow = mallocCheck((size_t)x->rows * n * sizeof(float));
    memcpy(c, cols, (size_t)n * sizeof(int));
    memcpy(ow, w, (size_t)x->rows * n * sizeof(float));
    *o = (TensorOutliers){n, c, ow};
    x->outliers = o;
    q->bytes += (size_t)n * sizeof(int) + (size_t)x->rows * n * sizeof(float);
}

void quant_weights_build_outliers(QuantWeights *q, const Model *m, const float *const *col_max, float threshold) {
    quant_weights_layout(q, m, DTYPE_I8, NULL);
    for (int i = 0; i < q->n; i++) {
        Tensor *x = &q->tensors[i];
        int R = x->rows, n = x->cols, k = 0;
        int *cols = mallocCheck((size_t)n * sizeof(int));
        for (int j = 0; col_max[i] && j < n; j++)
            if (col_max[i][j] > threshold) cols[k++] = j;
        float *w = mallocCheck((size_t)R * n * sizeof(float)), *ow = mallocCheck((size_t)R * (k ? k : 1) * sizeof(float));
        memcpy(w, q->host[i], (size_t)R * n * sizeof(float));
        for (int r = 0; r < R; r++) // the outlier columns out of the int8 part
            for (int c = 0; c < k; c++) ow[(size_t)r * k + c] = w[(size_t)r * n + cols[c]], w[(size_t)r * n + cols[c]] = 0.0f;
        quantize_matrix(DTYPE_I8, (void *)x->data, w, R, n);
        quant_weights_set_outliers(q, i, k, cols, ow);
        free(cols), free(w), free(ow);
    }
}

void quant_weights_free(QuantWeights *q) {
    for (int i = 0; q->outliers && i < q->n; i++) free((void *)q->outliers[i].cols), free((void *)q->outliers[i].w);
    free(q->outliers);
    free(q->host);
    free(q->tensors);
    free(q->block);
    memset(q, 0, sizeof *q);
}

const Tensor *quant_weights_find(const QuantWeights *q, const float *p) {
    for (int i = 0; i < q->n; i++)
        if (q->host[i] == p) return &q->tensors[i];
    return NULL;
}

void quant_weights_dequantize_into(const QuantWeights *q, Model *m) {
    for (int i = 0; i < q->n; i++) {
        const Tensor *x = &q->tensors[i];
        float *dst = m->params + (q->host[i] - m->params);
        if (x->dtype != DTYPE_F32) dequantize_matrix(x->dtype, dst, x->data, x->rows, x->cols);
        const TensorOutliers *o = x->outliers;
        for (int r = 0; o && r < x->rows; r++)
            for (int k = 0; k < o->n; k++) dst[(size_t)r * x->cols + o->cols[k]] = o->w[(size_t)r * o->n + k];
    }
}

double quant_weights_bits_per_weight(const QuantWeights *q) {
    double weights = 0.0;
    for (int i = 0; i < q->n; i++) weights += (double)q->tensors[i].rows * q->tensors[i].cols;
    return 8.0 * q->bytes / weights;
}
