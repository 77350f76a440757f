// model_cuda.c: the model's forward pass on the GPU (see model_cuda.h). forward_rows below
// is model.c's forward_rows step for step: embedding, then per layer RMSNorm, q/k/v
// matmuls, RoPE, the cache append, attention, output matmul and residual add, RMSNorm,
// SwiGLU MLP and residual add; then the final norm and the head. Rows may belong to
// different sequences (decode) or be consecutive positions of one (prefill), exactly as on
// the CPU; each row carries its own position and its own cache pointers per layer.
// Compiled only with CUDA (INFERLAB_CUDA).
#ifdef INFERLAB_CUDA

#include "model_cuda.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"

// ---- KV cache ---------------------------------------------------------------------------------

static size_t layer_floats(const CudaKVCache *c) { return (size_t)c->capacity * c->n_kv_heads * c->head_dim; }

void cuda_kv_cache_alloc(CudaKVCache *c, int n_layers, int n_kv_heads, int head_dim, int capacity) {
    c->n_layers = n_layers;
    c->n_kv_heads = n_kv_heads;
    c->head_dim = head_dim;
    c->capacity = capacity;
    c->len = 0;
    size_t bytes = (size_t)n_layers * layer_floats(c) * sizeof(float);
    c->key = cudaMallocCheck(bytes);
    c->value = cudaMallocCheck(bytes);
}

void cuda_kv_cache_free(CudaKVCache *c) {
    cuda_free(c->key);
    cuda_free(c->value);
    c->key = c->value = NULL;
}

void cuda_kv_cache_reset(CudaKVCache *c) { c->len = 0; }

size_t cuda_kv_cache_bytes(const CudaKVCache *c) { return 2 * (size_t)c->n_layers * layer_floats(c) * sizeof(float); }

// ---- weights ----------------------------------------------------------------------------------

// Device address of the CPU weight `p` inside the converted block: same element offset.
static const void *device_weight(const CudaModel *g, const Model *m, const float *p) {
    return (const char *)g->matrices + (size_t)(p - m->params) * cuda_dtype_size(g->dtype);
}

void cuda_model_upload(CudaModel *g, const Model *m, GemmMode gemm) {
    const Config *c = &m->config;
    size_t L = c->n_layers, C = c->dim;
    g->config = *c;
    g->gemm = gemm;
    g->dtype = gemm_input_dtype(gemm);
    g->matrices = cudaMallocCheck(m->n_params * cuda_dtype_size(g->dtype));
    if (g->dtype == CUDA_FP32) {
        cuda_upload(g->matrices, m->params, m->n_params * sizeof(float));
    } else { // stage in fp32, round on the device
        float *staging = cudaMallocCheck(m->n_params * sizeof(float));
        cuda_upload(staging, m->params, m->n_params * sizeof(float));
        cuda_convert(g->matrices, g->dtype, staging, CUDA_FP32, m->n_params);
        cuda_free(staging);
    }
    const Weights *w = &m->weights;
    g->token_embedding = device_weight(g, m, w->token_embedding);
    g->wq = device_weight(g, m, w->wq);
    g->wk = device_weight(g, m, w->wk);
    g->wv = device_weight(g, m, w->wv);
    g->wo = device_weight(g, m, w->wo);
    g->w1 = device_weight(g, m, w->w1);
    g->w2 = device_weight(g, m, w->w2);
    g->w3 = device_weight(g, m, w->w3);
    g->wcls = device_weight(g, m, w->wcls);

    g->norms = cudaMallocCheck((2 * L * C + C) * sizeof(float));
    cuda_upload(g->norms, w->rms_att, L * C * sizeof(float));
    cuda_upload(g->norms + L * C, w->rms_ffn, L * C * sizeof(float));
    cuda_upload(g->norms + 2 * L * C, w->rms_final, C * sizeof(float));
    g->rms_att = g->norms;
    g->rms_ffn = g->norms + L * C;
    g->rms_final = g->norms + 2 * L * C;
}

void cuda_model_free(CudaModel *g) {
    cuda_free(g->matrices);
    cuda_free(g->norms);
    g->matrices = NULL;
    g->norms = NULL;
}

size_t cuda_model_bytes(const CudaModel *g) {
    const Config *c = &g->config;
    return model_param_count(c) * cuda_dtype_size(g->dtype) + (2 * (size_t)c->n_layers + 1) * c->dim * sizeof(float);
}

// ---- run state --------------------------------------------------------------------------------

void cuda_runstate_alloc(CudaRunState *s, const Config *c, int max_rows) {
    size_t R = max_rows, C = c->dim, H = c->hidden_dim, L = c->n_layers;
    size_t q = (size_t)c->n_heads * c->head_dim, kv = (size_t)c->n_kv_heads * c->head_dim;
    size_t widest = C > H ? C : H;
    widest = widest > q ? widest : q;
    s->max_rows = max_rows;
    s->x = cudaMallocCheck(R * C * sizeof(float));
    s->xb = cudaMallocCheck(R * C * sizeof(float));
    s->q = cudaMallocCheck(R * q * sizeof(float));
    s->k = cudaMallocCheck(R * kv * sizeof(float));
    s->v = cudaMallocCheck(R * kv * sizeof(float));
    s->att = cudaMallocCheck(R * q * sizeof(float));
    s->proj = cudaMallocCheck(R * C * sizeof(float));
    s->hb = cudaMallocCheck(R * H * sizeof(float));
    s->hb2 = cudaMallocCheck(R * H * sizeof(float));
    s->act = cudaMallocCheck(R * widest * sizeof(float)); // sized for the widest dtype
    s->logits = cudaMallocCheck(R * c->vocab_size * sizeof(float));
    s->tokens = cudaMallocCheck(R * sizeof(int));
    s->pos = cudaMallocCheck(R * sizeof(int));
    s->keys = cudaMallocCheck(L * R * sizeof(float *));
    s->values = cudaMallocCheck(L * R * sizeof(float *));
    s->pos_host = mallocCheck(R * sizeof(int));
    s->keys_host = mallocCheck(L * R * sizeof(float *));
    s->values_host = mallocCheck(L * R * sizeof(float *));

    float *inv_freq = mallocCheck((size_t)c->head_dim / 2 * sizeof(float));
    s->mscale = rope_frequencies(inv_freq, c->head_dim, &c->rope);
    s->inv_freq = cudaMallocCheck((size_t)c->head_dim / 2 * sizeof(float));
    cuda_upload(s->inv_freq, inv_freq, (size_t)c->head_dim / 2 * sizeof(float));
    free(inv_freq);
}

void cuda_runstate_free(CudaRunState *s) {
    void *dev[] = {s->x,      s->xb,     s->q,   s->k,        s->v,      s->att,  s->proj, s->hb,
                   s->hb2,    s->act,    s->logits, s->inv_freq, s->tokens, s->pos, s->keys, s->values};
    for (size_t i = 0; i < sizeof dev / sizeof dev[0]; i++) cuda_free(dev[i]);
    free(s->pos_host);
    free(s->keys_host);
    free(s->values_host);
    memset(s, 0, sizeof *s);
}

// ---- forward ----------------------------------------------------------------------------------

// out (R, d) = in (R, n) @ w (d, n)^T, w in the model's dtype; in is rounded to it first.
static void linear(const CudaModel *g, CudaRunState *s, float *out, const float *in, const void *w, int R, int n,
                   int d) {
    const void *x = in;
    if (g->dtype != CUDA_FP32) {
        cuda_convert(s->act, g->dtype, in, CUDA_FP32, (size_t)R * n);
        x = s->act;
    }
    cuda_matmul(out, x, w, R, n, d, g->gemm);
}

// Layer l's slice of a stacked weight whose layers hold `per_layer` elements each.
static const void *layer_weight(const CudaModel *g, const void *w, int l, size_t per_layer) {
    return (const char *)w + (size_t)l * per_layer * cuda_dtype_size(g->dtype);
}

// Rows' positions and, for every layer, the base of each row's cache keys and values.
static void upload_rows(const CudaModel *g, CudaRunState *s, CudaKVCache **caches, const int *tokens,
                        const int *pos, int R) {
    int L = g->config.n_layers;
    for (int r = 0; r < R; r++) s->pos_host[r] = pos[r];
    for (int l = 0; l < L; l++)
        for (int r = 0; r < R; r++) {
            size_t at = (size_t)l * layer_floats(caches[r]);
            s->keys_host[(size_t)l * R + r] = caches[r]->key + at;
            s->values_host[(size_t)l * R + r] = caches[r]->value + at;
        }
    cuda_upload(s->tokens, tokens, (size_t)R * sizeof(int));
    cuda_upload(s->pos, s->pos_host, (size_t)R * sizeof(int));
    cuda_upload(s->keys, s->keys_host, (size_t)L * R * sizeof(float *));
    cuda_upload(s->values, s->values_host, (size_t)L * R * sizeof(float *));
}

// The forward pass over R rows (model.c's forward_rows). head: compute the logits of all
// rows (all_logits) or of the last one into s->logits, and copy them to logits if non-NULL.
static void forward_rows(CudaModel *g, CudaRunState *s, CudaKVCache **caches, const int *tokens, const int *pos,
                         int R, int head, float *logits, int all_logits) {
    const Config *c = &g->config;
    int C = c->dim, H = c->hidden_dim, hd = c->head_dim;
    int q_dim = c->n_heads * hd, kv_dim = c->n_kv_heads * hd;
    AttentionShape shape = {c->n_heads, c->n_kv_heads, hd, c->window, c->n_sink, 1.0f / sqrtf((float)hd)};

    upload_rows(g, s, caches, tokens, pos, R);
    cuda_embedding(s->x, g->token_embedding, g->dtype, s->tokens, R, C); // (R, C)

    for (int l = 0; l < c->n_layers; l++) {
        float *const *keys = s->keys + (size_t)l * R, *const *values = s->values + (size_t)l * R;
        // attention block
        cuda_rmsnorm(s->xb, s->x, g->rms_att + (size_t)l * C, R, C, c->norm_eps);
        linear(g, s, s->q, s->xb, layer_weight(g, g->wq, l, (size_t)q_dim * C), R, C, q_dim);  // (R, n_heads * hd)
        linear(g, s, s->k, s->xb, layer_weight(g, g->wk, l, (size_t)kv_dim * C), R, C, kv_dim); // (R, n_kv * hd)
        linear(g, s, s->v, s->xb, layer_weight(g, g->wv, l, (size_t)kv_dim * C), R, C, kv_dim);
        cuda_rope(s->q, R, c->n_heads, hd, s->pos, s->inv_freq, s->mscale);
        cuda_rope(s->k, R, c->n_kv_heads, hd, s->pos, s->inv_freq, s->mscale);
        cuda_kv_append(keys, values, s->k, s->v, s->pos, R, kv_dim);
        cuda_attention_rows(s->att, s->q, keys, values, s->pos, R, &shape);
        linear(g, s, s->proj, s->att, layer_weight(g, g->wo, l, (size_t)C * q_dim), R, q_dim, C);
        cuda_add(s->x, s->proj, (size_t)R * C);

        // MLP block: w2(silu(w1 x) * w3 x)
        cuda_rmsnorm(s->xb, s->x, g->rms_ffn + (size_t)l * C, R, C, c->norm_eps);
        linear(g, s, s->hb, s->xb, layer_weight(g, g->w1, l, (size_t)H * C), R, C, H); // (R, H)
        linear(g, s, s->hb2, s->xb, layer_weight(g, g->w3, l, (size_t)H * C), R, C, H);
        cuda_swiglu(s->hb, s->hb, s->hb2, R, H);
        linear(g, s, s->proj, s->hb, layer_weight(g, g->w2, l, (size_t)C * H), R, H, C);
        cuda_add(s->x, s->proj, (size_t)R * C);
    }

    for (int r = 0; r < R; r++)
        if (pos[r] + 1 > caches[r]->len) caches[r]->len = pos[r] + 1;

    if (!head) return;
    int first = all_logits ? 0 : R - 1, n = R - first;
    cuda_rmsnorm(s->xb, s->x + (size_t)first * C, g->rms_final, n, C, c->norm_eps);
    linear(g, s, s->logits, s->xb, g->wcls, n, C, c->vocab_size); // (n, V)
    if (logits) cuda_download(logits, s->logits, (size_t)n * c->vocab_size * sizeof(float));
}

static void check_fits(const CudaKVCache *cache, int n_tokens) {
    if (cache->len + n_tokens > cache->capacity)
        die("context of %d tokens does not fit in a KV cache of %d positions", cache->len + n_tokens,
            cache->capacity);
}

void cuda_model_prefill(CudaModel *g, CudaRunState *s, CudaKVCache *cache, const int *tokens, int n_tokens,
                        float *logits, int all_logits) {
    check_fits(cache, n_tokens);
    CudaKVCache **caches = mallocCheck((size_t)s->max_rows * sizeof(CudaKVCache *));
    int *pos = mallocCheck((size_t)s->max_rows * sizeof(int));
    for (int done = 0; done < n_tokens;) {
        int R = n_tokens - done < s->max_rows ? n_tokens - done : s->max_rows;
        for (int r = 0; r < R; r++) {
            caches[r] = cache;
            pos[r] = cache->len + r;
        }
        // Chunks before the last only fill the cache, unless every position's logits are wanted.
        int last = done + R == n_tokens;
        float *out = logits && all_logits ? logits + (size_t)done * g->config.vocab_size : (last ? logits : NULL);
        forward_rows(g, s, caches, tokens + done, pos, R, all_logits || last, out, all_logits);
        done += R;
    }
    free(caches);
    free(pos);
}

void cuda_model_decode(CudaModel *g, CudaRunState *s, CudaKVCache **caches, const int *tokens, int B,
                       float *logits) {
    if (B > s->max_rows) die("decode batch %d exceeds the run state's %d rows", B, s->max_rows);
    int *pos = mallocCheck((size_t)B * sizeof(int));
    for (int b = 0; b < B; b++) {
        check_fits(caches[b], 1);
        pos[b] = caches[b]->len;
    }
    forward_rows(g, s, caches, tokens, pos, B, 1, logits, 1);
    free(pos);
}

#endif // INFERLAB_CUDA
