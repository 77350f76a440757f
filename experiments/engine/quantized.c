// quantized.c: a model's matrices in quantised form (see quantized.h).
#include "quantized.h"

#include <stdlib.h>
#include <string.h>

#include "common.h"
#include "quant.h"

int model_matrices(const Model *m, const float **host, int *rows, int *cols) {
    const Config *c = &m->config;
    const Weights *w = &m->weights;
    size_t C = c->dim, H = c->hidden_dim;
    size_t q = (size_t)c->n_heads * c->head_dim, kv = (size_t)c->n_kv_heads * c->head_dim;
    int n = 0;
#define MATRIX(p, r, k) (host[n] = (p), rows[n] = (int)(r), cols[n] = (int)(k), n++)
    MATRIX(w->token_embedding, c->vocab_size, C);
    for (int l = 0; l < c->n_layers; l++) {
        MATRIX(w->wq + l * q * C, q, C);
        MATRIX(w->wk + l * kv * C, kv, C);
        MATRIX(w->wv + l * kv * C, kv, C);
        MATRIX(w->wo + l * C * q, C, q);
        MATRIX(w->w1 + l * H * C, H, C);
        MATRIX(w->w2 + l * C * H, C, H);
        MATRIX(w->w3 + l * H * C, H, C);
    }
    if (!c->tied_embeddings) MATRIX(w->wcls, c->vocab_size, C);
#undef MATRIX
    return n;
}

static int max_matrices(const Model *m) { return 7 * m->config.n_layers + 2; }

void quant_weights_layout(QuantWeights *q, const Model *m, DType dtype, const DType *types) {
    // model_matrices lists a plain model's matrices: MLA's latent projections and a CLA set's
    // missing K/V layers are not in it.
    if (m->config.kv_lora_rank || m->config.kv_share > 1)
        die("quantised weights: MLA and cross-layer KV sharing models are not supported (only fp32)");
    memset(q, 0, sizeof *q);
    int cap = max_matrices(m), *rows = mallocCheck(cap * sizeof(int)), *cols = mallocCheck(cap * sizeof(int));
    q->dtype = dtype;
    q->host = mallocCheck(cap * sizeof *q->host);
    q->tensors = mallocCheck(cap * sizeof *q->tensors);
    q->n = model_matrices(m, q->host, rows, cols);
    size_t block = 0, *offset = mallocCheck(q->n * sizeof(size_t));
    for (int i = 0; i < q->n; i++) {
        DType t = types ? types[i] : dtype_holds_row(dtype, cols[i]) ? dtype : DTYPE_F32;
        if (!dtype_holds_row(t, cols[i])) die("quant_weights_layout: rows of %d cannot be %s", cols[i], dtype_name(t));
        size_t bytes = (size_t)rows[i] * dtype_row_bytes(t, cols[i]);
        q->tensors[i] = (Tensor){t, NULL, rows[i], cols[i], NULL};
        offset[i] = block;
        if (t != DTYPE_F32) block += (bytes + 63) / 64 * 64; // each tensor on a cache line
        q->bytes += bytes;
    }
    q->block = mallocHugeCheck(block ? block : 1);
    for (int i = 0; i < q->n; i++)
        q->tensors[i].data = q->tensors[i].dtype == DTYPE_F32 ? (const void *)q->host[i]
                                                               : (const void *)((char *)q->block + offset[i]);
    free(offset);
    free(rows);
    free(cols);
}

void quant_weights_build(QuantWeights *q, const Model *m, DType t) {
    quant_weights_layout(q, m, t, NULL);
    for (int i = 0; i < q->n; i++) {
        Tensor *x = &q->tensors[i];
        if (x->dtype != DTYPE_F32) quantize_matrix(x->dtype, (void *)x->data, q->host[i], x->rows, x->cols);
    }
}

void quant_weights_free(QuantWeights *q) {
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
    }
}

double quant_weights_bits_per_weight(const QuantWeights *q) {
    double weights = 0.0;
    for (int i = 0; i < q->n; i++) weights += (double)q->tensors[i].rows * q->tensors[i].cols;
    return 8.0 * q->bytes / weights;
}
