// model.c: config checks, weight layout, the engine (a model placed on a backend) and the
// forward pass of the Llama-style decoder (see model.h). One routine, engine_forward, runs
// every mode on every backend, through the ops table: prefill is R rows of one sequence,
// decode is one row for each of B sequences, full recompute is a prefill into an empty cache.
#include "model.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"
#include "rng.h"

// Largest dimension we accept: keeps every size computation far from overflow.
#define MAX_DIM (1 << 20)

Config config_default(void) {
    Config c;
    memset(&c, 0, sizeof c);
    c.norm_eps = 1e-5f;
    c.rope.theta = 10000.0f;
    c.rope.scaling = ROPE_NONE;
    c.rope.factor = 1.0f;
    c.rope.beta_fast = 32.0f;
    c.rope.beta_slow = 1.0f;
    return c;
}

int config_validate(const Config *c, char *why, size_t why_len) {
    const char *bad = NULL;
    int dims[] = {c->dim, c->hidden_dim, c->n_layers, c->n_heads, c->n_kv_heads, c->head_dim,
                  c->vocab_size, c->seq_len};
    for (size_t i = 0; i < sizeof dims / sizeof dims[0]; i++)
        if (dims[i] <= 0 || dims[i] > MAX_DIM) bad = "a dimension is not in 1 .. 2^20";
    if (!bad && c->n_heads % c->n_kv_heads != 0) bad = "n_heads is not a multiple of n_kv_heads";
    else if (!bad && c->head_dim % 2 != 0) bad = "head_dim is odd (RoPE rotates pairs)";
    else if (!bad && (c->window < 0 || c->n_sink < 0)) bad = "window or n_sink is negative";
    else if (!bad && !(c->norm_eps > 0.0f)) bad = "norm_eps is not positive";
    else if (!bad && !(c->rope.theta > 1.0f)) bad = "rope theta is not > 1";
    else if (!bad && (c->rope.scaling < ROPE_NONE || c->rope.scaling > ROPE_YARN)) bad = "unknown rope scaling";
    else if (!bad && !(c->rope.factor >= 1.0f && c->rope.factor <= 1024.0f)) bad = "rope factor not in [1, 1024]";
    else if (!bad && c->rope.scaling == ROPE_YARN &&
             (c->rope.orig_ctx <= 0 || !(c->rope.beta_fast > c->rope.beta_slow)))
        bad = "yarn needs orig_ctx > 0 and beta_fast > beta_slow";
    else if (!bad && model_param_count(c) > ((size_t)1 << 34)) bad = "more than 2^34 parameters";
    if (bad && why) snprintf(why, why_len, "%s", bad);
    return bad == NULL;
}

size_t model_param_count(const Config *c) {
    size_t C = c->dim, H = c->hidden_dim, L = c->n_layers, V = c->vocab_size;
    size_t q = (size_t)c->n_heads * c->head_dim, kv = (size_t)c->n_kv_heads * c->head_dim;
    size_t per_layer = C + q * C + 2 * kv * C + C * q + C + 3 * H * C;
    return V * C + L * per_layer + C + (c->tied_embeddings ? 0 : V * C);
}

void weights_map(Weights *w, const Config *c, float *p) {
    size_t C = c->dim, H = c->hidden_dim, L = c->n_layers, V = c->vocab_size;
    size_t q = (size_t)c->n_heads * c->head_dim, kv = (size_t)c->n_kv_heads * c->head_dim;
    w->token_embedding = p; p += V * C;
    w->rms_att = p;         p += L * C;
    w->wq = p;              p += L * q * C;
    w->wk = p;              p += L * kv * C;
    w->wv = p;              p += L * kv * C;
    w->wo = p;              p += L * C * q;
    w->rms_ffn = p;         p += L * C;
    w->w1 = p;              p += L * H * C;
    w->w2 = p;              p += L * C * H;
    w->w3 = p;              p += L * H * C;
    w->rms_final = p;       p += C;
    w->wcls = c->tied_embeddings ? w->token_embedding : p;
}

void model_alloc(Model *m, const Config *c) {
    m->config = *c;
    m->n_params = model_param_count(c);
    // Weights are read as long sequential streams every decode step: on 2 MiB-aligned memory
    // (huge pages where THP allows) the streams cross no 4 KiB page boundaries, at which
    // hardware prefetchers stop.
    m->params = mallocHugeCheck(m->n_params * sizeof(float));
    weights_map(&m->weights, c, m->params);
}

void model_init_random(Model *m, uint64_t seed, float std) {
    const Config *c = &m->config;
    uint64_t rng = rng_seed(seed);
    for (size_t i = 0; i < m->n_params; i++) m->params[i] = std * rng_normal(&rng);
    Weights *w = &m->weights;
    for (size_t i = 0; i < (size_t)c->n_layers * c->dim; i++) w->rms_att[i] = w->rms_ffn[i] = 1.0f;
    for (int i = 0; i < c->dim; i++) w->rms_final[i] = 1.0f;
}

void model_free(Model *m) {
    free(m->params);
    m->params = NULL;
}

// Keys visible to a query at position p (see attention_visible).
static double visible_keys(const Config *c, int p) {
    if (c->window == 0 || p < c->window) return p + 1;
    int sinks_outside = c->n_sink < p + 1 - c->window ? c->n_sink : p + 1 - c->window;
    return c->window + sinks_outside;
}

double model_forward_flops(const Config *c, int n_new, int n_past, int head_rows) {
    double C = c->dim, H = c->hidden_dim, q = (double)c->n_heads * c->head_dim;
    double kv = (double)c->n_kv_heads * c->head_dim;
    double per_token = 2.0 * c->n_layers * (C * q + 2 * C * kv + q * C + 3 * C * H);
    double keys = 0.0;
    for (int p = n_past; p < n_past + n_new; p++) keys += visible_keys(c, p);
    double attention = 2.0 * 2.0 * c->n_layers * q * keys; // Q.K^T and P.V
    return per_token * n_new + attention + 2.0 * C * c->vocab_size * head_rows;
}

// ---- engine: weights on the backend --------------------------------------------------------

// Backend address of host weight p inside a block holding the host block in type t.
static const void *in_block(const void *block, DType t, const Model *m, const float *p) {
    return (const char *)block + (size_t)(p - m->params) * dtype_size(t);
}

static Tensor tensor_at(const Engine *e, const Model *m, const float *p, int rows, int cols) {
    Tensor t = {e->dtype, in_block(e->matrices ? e->matrices : m->params, e->dtype, m, p), rows, cols};
    return t;
}

// The weight block in the engine's dtype in backend memory: the host block itself where the
// backend reads host memory and no conversion is wanted, else a converted copy.
static void place_matrices(Engine *e, const Model *m) {
    const Ops *ops = e->ops;
    e->matrices = NULL;
    if (ops->host_memory && e->dtype == DTYPE_F32) return;
    size_t n = m->n_params;
    e->matrices = ops->alloc(n * dtype_size(e->dtype));
    if (e->dtype == DTYPE_F32) {
        ops->upload(e->matrices, m->params, n * sizeof(float));
    } else { // stage in fp32, round in backend memory
        float *staging = ops->alloc(n * sizeof(float));
        ops->upload(staging, m->params, n * sizeof(float));
        ops->convert(e->matrices, e->dtype, staging, DTYPE_F32, n);
        ops->free(staging);
    }
}

// Norm gains stay fp32: rms_att (L, C) | rms_ffn (L, C) | rms_final (C).
static void place_norms(Engine *e, const Model *m, const float **att, const float **ffn) {
    const Weights *w = &m->weights;
    size_t LC = (size_t)m->config.n_layers * m->config.dim, C = m->config.dim;
    e->norms = NULL;
    if (e->ops->host_memory) {
        *att = w->rms_att;
        *ffn = w->rms_ffn;
        e->rms_final = w->rms_final;
        return;
    }
    e->norms = e->ops->alloc((2 * LC + C) * sizeof(float));
    e->ops->upload(e->norms, w->rms_att, LC * sizeof(float));
    e->ops->upload(e->norms + LC, w->rms_ffn, LC * sizeof(float));
    e->ops->upload(e->norms + 2 * LC, w->rms_final, C * sizeof(float));
    *att = e->norms;
    *ffn = e->norms + LC;
    e->rms_final = e->norms + 2 * LC;
}

static void map_layers(Engine *e, const Model *m, const float *att, const float *ffn) {
    const Config *c = &m->config;
    const Weights *w = &m->weights;
    size_t C = c->dim, H = c->hidden_dim;
    size_t q = (size_t)c->n_heads * c->head_dim, kv = (size_t)c->n_kv_heads * c->head_dim;
    e->layers = mallocCheck((size_t)c->n_layers * sizeof(LayerWeights));
    for (int l = 0; l < c->n_layers; l++) {
        LayerWeights *lw = &e->layers[l];
        lw->rms_att = att + l * C;
        lw->rms_ffn = ffn + l * C;
        lw->wq = tensor_at(e, m, w->wq + l * q * C, (int)q, (int)C);
        lw->wk = tensor_at(e, m, w->wk + l * kv * C, (int)kv, (int)C);
        lw->wv = tensor_at(e, m, w->wv + l * kv * C, (int)kv, (int)C);
        lw->wo = tensor_at(e, m, w->wo + l * C * q, (int)C, (int)q);
        lw->w1 = tensor_at(e, m, w->w1 + l * H * C, (int)H, (int)C);
        lw->w2 = tensor_at(e, m, w->w2 + l * C * H, (int)C, (int)H);
        lw->w3 = tensor_at(e, m, w->w3 + l * H * C, (int)H, (int)C);
    }
    e->token_embedding = tensor_at(e, m, w->token_embedding, c->vocab_size, (int)C);
    e->wcls = tensor_at(e, m, w->wcls, c->vocab_size, (int)C);
}

// ---- engine: scratch ------------------------------------------------------------------------

static void runstate_alloc(RunState *s, const Ops *ops, const Config *c, DType dtype, int max_rows, int max_keys) {
    size_t R = max_rows, C = c->dim, H = c->hidden_dim, L = c->n_layers, V = c->vocab_size;
    size_t q = (size_t)c->n_heads * c->head_dim, kv = (size_t)c->n_kv_heads * c->head_dim;
    size_t widest = C > H ? C : H;
    widest = widest > q ? widest : q;
    s->max_rows = max_rows;
    s->max_keys = max_keys;
    s->x = ops->alloc(R * C * sizeof(float));
    s->xb = ops->alloc(R * C * sizeof(float));
    s->q = ops->alloc(R * q * sizeof(float));
    s->k = ops->alloc(R * kv * sizeof(float));
    s->v = ops->alloc(R * kv * sizeof(float));
    s->att = ops->alloc(R * q * sizeof(float));
    s->proj = ops->alloc(R * C * sizeof(float));
    s->hb = ops->alloc(R * H * sizeof(float));
    s->hb2 = ops->alloc(R * H * sizeof(float));
    s->logits = ops->alloc(R * V * sizeof(float));
    s->matmul_scratch = ops->alloc(ops->matmul_scratch_bytes(dtype, (int)R, (int)widest));
    s->attn_scratch_bytes = ops->attention_scratch_bytes(max_keys);
    s->attn_scratch = ops->alloc(s->attn_scratch_bytes);
    s->tokens = ops->alloc(R * sizeof(int));
    s->pos = ops->alloc(R * sizeof(int));
    s->layouts = ops->alloc(R * sizeof(KVLayout));
    s->layouts_host = mallocCheck(R * sizeof(KVLayout));
    s->keys = ops->alloc(L * R * sizeof(float *));
    s->values = ops->alloc(L * R * sizeof(float *));
    s->logits_host = mallocCheck(R * V * sizeof(float));
    s->pos_host = mallocCheck(R * sizeof(int));
    s->keys_host = mallocCheck(L * R * sizeof(float *));
    s->values_host = mallocCheck(L * R * sizeof(float *));

    float *inv_freq = mallocCheck((size_t)c->head_dim / 2 * sizeof(float));
    s->mscale = rope_frequencies(inv_freq, c->head_dim, &c->rope);
    s->inv_freq = ops->alloc((size_t)c->head_dim / 2 * sizeof(float));
    ops->upload(s->inv_freq, inv_freq, (size_t)c->head_dim / 2 * sizeof(float));
    free(inv_freq);
}

static void runstate_free(RunState *s, const Ops *ops) {
    void *bufs[] = {s->x,      s->xb,          s->q,           s->k,      s->v,        s->att,
                    s->proj,   s->hb,          s->hb2,         s->logits, s->matmul_scratch,
                    s->attn_scratch, s->inv_freq, s->tokens,   s->pos,    s->keys,     s->values,
                    s->layouts};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++) ops->free(bufs[i]);
    free(s->logits_host);
    free(s->pos_host);
    free(s->layouts_host);
    free(s->keys_host);
    free(s->values_host);
    memset(s, 0, sizeof *s);
}

void engine_open(Engine *e, const Model *m, const Ops *ops, DType dtype, int max_rows, int max_keys) {
    memset(e, 0, sizeof *e);
    e->ops = ops;
    e->config = m->config;
    e->dtype = dtype;
    const float *att, *ffn;
    place_matrices(e, m);
    place_norms(e, m, &att, &ffn);
    map_layers(e, m, att, ffn);
    runstate_alloc(&e->s, ops, &m->config, dtype, max_rows, max_keys);
}

void engine_close(Engine *e) {
    runstate_free(&e->s, e->ops);
    e->ops->free(e->matrices);
    e->ops->free(e->norms);
    free(e->layers);
    memset(e, 0, sizeof *e);
}

size_t engine_weight_bytes(const Engine *e) {
    const Config *c = &e->config;
    return model_param_count(c) * dtype_size(e->dtype) + (2 * (size_t)c->n_layers + 1) * c->dim * sizeof(float);
}

// ---- the forward pass -----------------------------------------------------------------------

// Tokens, positions and every layer's cache rows of the R rows, into backend memory.
static void stage_rows(Engine *e, KVCache **caches, const int *tokens, const int *pos, int R) {
    RunState *s = &e->s;
    int L = e->config.n_layers;
    for (int r = 0; r < R; r++) {
        s->pos_host[r] = pos[r];
        s->layouts_host[r] = caches[r]->layout;
    }
    for (int l = 0; l < L; l++)
        for (int r = 0; r < R; r++) {
            s->keys_host[(size_t)l * R + r] = kv_cache_layer_key(caches[r], l);
            s->values_host[(size_t)l * R + r] = kv_cache_layer_value(caches[r], l);
        }
    e->ops->upload(s->tokens, tokens, (size_t)R * sizeof(int));
    e->ops->upload(s->pos, s->pos_host, (size_t)R * sizeof(int));
    e->ops->upload(s->layouts, s->layouts_host, (size_t)R * sizeof(KVLayout));
    e->ops->upload(s->keys, s->keys_host, (size_t)L * R * sizeof(float *));
    e->ops->upload(s->values, s->values_host, (size_t)L * R * sizeof(float *));
}

void engine_forward(Engine *e, KVCache **caches, const int *tokens, const int *pos, int R, float *logits,
                    int all_logits) {
    const Ops *ops = e->ops;
    const Config *c = &e->config;
    RunState *s = &e->s;
    int C = c->dim, H = c->hidden_dim, hd = c->head_dim, kv_dim = c->n_kv_heads * hd;
    AttentionShape shape = {c->n_heads, c->n_kv_heads, hd, c->window, c->n_sink, 1.0f / sqrtf((float)hd),
                            c->cache_positions, s->inv_freq};
    if (R > s->max_rows) die("engine_forward: %d rows exceed the engine's %d", R, s->max_rows);
    for (int r = 0, n; r < R; r += n) { // n: the rows of caches[r]'s sequence, consecutive
        Error err;
        for (n = 1; r + n < R && caches[r + n] == caches[r];) n++;
        if (kv_cache_fits(caches[r], pos[r], pos[r + n - 1] - pos[r] + 1, c->window, c->n_sink, &err))
            die("engine_forward: %s", err.msg);
        if (attention_visible_keys(pos[r + n - 1], c->window, c->n_sink).count > s->max_keys)
            die("engine_forward: position %d sees more keys than the engine's %d", pos[r + n - 1], s->max_keys);
    }

    stage_rows(e, caches, tokens, pos, R);
    ops->embedding(s->x, &e->token_embedding, s->tokens, R); // (R, C)

    for (int l = 0; l < c->n_layers; l++) {
        const LayerWeights *w = &e->layers[l];
        KVRows kv = {R, s->pos, s->keys + (size_t)l * R, s->values + (size_t)l * R, s->layouts};
        // attention block
        ops->rmsnorm(s->xb, s->x, w->rms_att, R, C, c->norm_eps);
        ops->matmul(s->q, s->xb, &w->wq, R, s->matmul_scratch); // (R, n_heads * hd)
        ops->matmul(s->k, s->xb, &w->wk, R, s->matmul_scratch); // (R, n_kv * hd)
        ops->matmul(s->v, s->xb, &w->wv, R, s->matmul_scratch);
        ops->rope(s->q, R, c->n_heads, hd, s->pos, s->inv_freq, s->mscale);
        ops->rope(s->k, R, c->n_kv_heads, hd, s->pos, s->inv_freq, s->mscale);
        ops->kv_write(&kv, s->k, s->v, kv_dim);
        ops->attention(s->att, s->q, &kv, &shape, s->attn_scratch, s->attn_scratch_bytes);
        ops->matmul(s->proj, s->att, &w->wo, R, s->matmul_scratch); // (R, C)
        ops->add(s->x, s->proj, (size_t)R * C);

        // MLP block: w2(silu(w1 x) * w3 x)
        ops->rmsnorm(s->xb, s->x, w->rms_ffn, R, C, c->norm_eps);
        ops->matmul(s->hb, s->xb, &w->w1, R, s->matmul_scratch); // (R, H)
        ops->matmul(s->hb2, s->xb, &w->w3, R, s->matmul_scratch);
        ops->swiglu(s->hb, s->hb, s->hb2, R, H);
        ops->matmul(s->proj, s->hb, &w->w2, R, s->matmul_scratch); // (R, C)
        ops->add(s->x, s->proj, (size_t)R * C);
    }

    for (int r = 0; r < R; r++)
        if (pos[r] + 1 > caches[r]->len) caches[r]->len = pos[r] + 1;

    if (!logits) return;
    int first = all_logits ? 0 : R - 1, n = R - first;
    ops->rmsnorm(s->xb, s->x + (size_t)first * C, e->rms_final, n, C, c->norm_eps);
    ops->matmul(s->logits, s->xb, &e->wcls, n, s->matmul_scratch); // (n, V)
    ops->download(logits, s->logits, (size_t)n * c->vocab_size * sizeof(float));
}
