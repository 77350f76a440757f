// model.c: config checks, weight layout, the engine (a model placed on a backend) and the
// forward pass of the Llama-style decoder (see model.h). One routine, engine_forward, runs
// every mode on every backend, through the ops table: prefill is R rows of one sequence,
// decode is one row for each of B sequences, full recompute is a prefill into an empty cache.
#include "model.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "arch.h"
#include "common.h"
#include "quant.h"
#include "quant_weights.h"
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
    c.kv_share = 1;
    return c;
}

int config_validate(const Config *c, char *why, size_t why_len) {
    const char *bad = NULL;
    int dims[] = {c->dim, c->hidden_dim, c->n_layers, c->n_heads, c->n_kv_heads, c->head_dim,
                  c->vocab_size, c->seq_len};
    for (size_t i = 0; i < sizeof dims / sizeof dims[0]; i++)
        if (dims[i] <= 0 || dims[i] > MAX_DIM) bad = "a dimension is not in 1 .. 2^20";
    if (!bad && (c->kv_lora_rank < 0 || c->kv_lora_rank > MAX_DIM || c->rope_dim < 0 || c->rope_dim > MAX_DIM))
        bad = "kv_lora_rank or rope_dim is not in 0 .. 2^20";
    else if (!bad && (c->kv_share < 1 || c->kv_share > c->n_layers)) bad = "kv_share is not in 1 .. n_layers";
    else if (!bad && c->kv_lora_rank == 0 && c->rope_dim != 0) bad = "rope_dim is set but the model is not MLA";
    else if (!bad && c->kv_lora_rank > 0 && (c->rope_dim < 2 || c->rope_dim % 2 != 0))
        bad = "MLA needs an even rope_dim >= 2 (RoPE rotates pairs)";
    else if (!bad && c->kv_lora_rank > 0 && c->n_kv_heads != c->n_heads)
        bad = "MLA has a key and value per head: n_kv_heads must equal n_heads";
    else if (!bad && c->kv_lora_rank > 0 && c->cache_positions)
        bad = "StreamingLLM's position rule is not implemented for MLA (it would rotate whole latent rows)";
    else if (!bad && c->n_heads % c->n_kv_heads != 0) bad = "n_heads is not a multiple of n_kv_heads";
    else if (!bad && c->head_dim % 2 != 0) bad = "head_dim is odd (RoPE rotates pairs)";
    else if (!bad && (c->window < 0 || c->n_sink < 0)) bad = "window or n_sink is negative";
    else if (!bad && (c->global_every < 0 || c->global_every > c->n_layers)) bad = "global_every is not in 0 .. n_layers";
    else if (!bad && !(c->rope_theta_global == 0.0f || c->rope_theta_global > 1.0f))
        bad = "the global layers' rope theta is not > 1 (or 0: the local one)";
    else if (!bad && c->global_windowed && !(c->global_windowed == 1 && c->global_every && c->window))
        bad = "global_windowed is 1 only in a hybrid with a window (global_every and window set)";
    else if (!bad && c->global_every && c->cache_positions)
        bad = "StreamingLLM's position rule is for windowed models, not local/global hybrids";
    else if (!bad && ((int)c->arch < 0 || c->arch >= ARCH_COUNT)) bad = "unknown architecture";
    else if (!bad && c->arch == ARCH_GEMMA3 && (c->kv_lora_rank || c->kv_share != 1))
        bad = "Gemma 3 has no MLA or CLA tensors";
    else if (!bad && (c->rope_style < ROPE_STYLE_NORM || c->rope_style > ROPE_STYLE_NEOX)) bad = "unknown RoPE style";
    else if (!bad && (c->ffn_act < GLU_SILU || c->ffn_act > GLU_GELU_TANH)) bad = "unknown MLP activation";
    else if (!bad && c->cache_positions && c->rope_style != ROPE_STYLE_NORM)
        bad = "StreamingLLM's position rule re-rotates sinks in NORM pairs only";
    else if (!bad && !(c->embed_scale >= 0.0f && c->embed_scale <= 1e6f)) bad = "embed_scale is not in 0 .. 1e6";
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

ModelDims model_dims(const Config *c) {
    ModelDims d;
    int mla = c->kv_lora_rank > 0;
    d.qk = (size_t)c->head_dim + c->rope_dim;
    d.q = (size_t)c->n_heads * d.qk;
    d.o = (size_t)c->n_heads * c->head_dim;
    d.kv = mla ? 0 : (size_t)c->n_kv_heads * c->head_dim;
    d.latent = mla ? (size_t)c->kv_lora_rank + c->rope_dim : 0;
    d.kv_b = mla ? 2 * (size_t)c->n_heads * c->head_dim : 0;
    d.L_kv = (size_t)config_kv_layers(c);
    return d;
}

size_t model_param_count(const Config *c) {
    const Arch *a = model_arch(c);
    size_t n = 0;
    for (int i = 0; i < a->n_tensors; i++) n += tensor_floats(c, &a->tensors[i]);
    return n;
}

// Each tensor kind's instances in a run, in the table's order (arch.h); a tied head is the
// embedding.
void weights_map(Weights *w, const Config *c, float *p) {
    const Arch *a = model_arch(c);
    memset(w, 0, sizeof *w); // the kinds another architecture has stay NULL
    for (int i = 0; i < a->n_tensors; i++) {
        *(float **)((char *)w + a->tensors[i].field) = p;
        p += tensor_floats(c, &a->tensors[i]);
    }
    if (c->tied_embeddings) w->wcls = w->token_embedding;
}

void model_alloc(Model *m, const Config *c) {
    m->config = *c;
    m->n_params = model_param_count(c);
    // Weights are read as long sequential streams every decode step: on 2 MiB-aligned memory
    // (huge pages where THP allows) the streams cross no 4 KiB page boundaries, at which
    // hardware prefetchers stop.
    m->params = mallocHugeCheck(m->n_params * sizeof(float));
    m->quant = NULL;
    weights_map(&m->weights, c, m->params);
}

void model_init_random(Model *m, uint64_t seed, float std) {
    const Config *c = &m->config;
    uint64_t rng = rng_seed(seed);
    for (size_t i = 0; i < m->n_params; i++) m->params[i] = std * rng_normal(&rng);
    const Arch *a = model_arch(c);
    for (int i = 0; i < a->n_tensors; i++) { // norm gains: the vector kinds
        const TensorSpec *s = &a->tensors[i];
        float *g = tensor_host(&m->weights, s);
        for (size_t j = 0; s->rows == DIM_NONE && j < tensor_floats(c, s); j++) g[j] = 1.0f;
    }
}

void model_free(Model *m) {
    if (m->quant) quant_weights_free(m->quant);
    free(m->quant);
    m->quant = NULL;
    free(m->params);
    m->params = NULL;
}

int config_has_local_layers(const Config *c) { return c->global_every > 1 && c->window > 0; }

int config_full_attention_layers(const Config *c) {
    int n = 0;
    for (int l = 0; l < c->n_layers; l++) n += config_layer_attention(c, l).window == 0;
    return n;
}

LayerAttention config_layer_attention(const Config *c, int l) {
    int global = c->global_every > 0 && l % c->global_every == c->global_every - 1;
    if (global && !c->global_windowed) return (LayerAttention){1, 0, 0};
    return (LayerAttention){global, c->window, c->n_sink};
}

// Keys visible to a query at position p on layer l, summed over the layers (see
// attention_visible).
static double visible_keys(const Config *c, int p) {
    double keys = 0.0;
    for (int l = 0; l < c->n_layers; l++) {
        LayerAttention la = config_layer_attention(c, l);
        keys += attention_visible_keys(p, la.window, la.n_sink).count;
    }
    return keys;
}

// absorbed: MLA as inference runs it (latent queries and outputs); else as the trainer runs
// it (every head's keys and values expanded from the latent once per token).
static double forward_flops(const Config *c, int n_new, int n_past, int head_rows, int absorbed) {
    double C = c->dim, H = c->hidden_dim, nh = c->n_heads, L = c->n_layers;
    ModelDims d = model_dims(c);
    int latent = c->kv_lora_rank && absorbed;
    // per head: query / key dims of a score, value dims of an output
    double score_dim = latent ? (double)d.latent : (double)d.qk;
    double value_dim = latent ? c->kv_lora_rank : c->head_dim;
    double per_layer = C * nh * score_dim + C * nh * value_dim + 3 * C * H; // wq, wo, MLP
    double per_kv_layer = 2 * C * d.kv + C * d.latent + (latent ? 0.0 : (double)d.kv_b * c->kv_lora_rank);
    double per_token = 2.0 * (L * per_layer + d.L_kv * per_kv_layer);
    double keys = 0.0;
    for (int p = n_past; p < n_past + n_new; p++) keys += visible_keys(c, p);
    double attention = 2.0 * nh * (score_dim + value_dim) * keys; // Q.K^T and P.V, every layer
    return per_token * n_new + attention + 2.0 * C * c->vocab_size * head_rows;
}

double model_forward_flops(const Config *c, int n_new, int n_past, int head_rows) {
    return forward_flops(c, n_new, n_past, head_rows, 1);
}

double model_forward_flops_expanded(const Config *c, int n_new, int n_past, int head_rows) {
    return forward_flops(c, n_new, n_past, head_rows, 0);
}

// A hybrid cache serves a model with local layers beside global ones and no CLA (whose sets
// could mix the kinds) or MLA (whose latent rows have no ring).
static int hybrid_cache(const Config *c) { return config_has_local_layers(c) && c->kv_share == 1 && !c->kv_lora_rank; }

size_t model_kv_cache_rows(const Config *c, int g, int capacity, int chunk) {
    size_t ring = (size_t)c->n_sink + c->window + chunk - 1;
    if (hybrid_cache(c) && !config_layer_attention(c, g).global && ring < (size_t)capacity) return ring;
    return (size_t)capacity;
}

void model_kv_cache_alloc(KVCache *kv, const Ops *ops, const Config *c, int capacity, int chunk) {
    if (c->kv_lora_rank) kv_cache_alloc_latent(kv, ops, config_kv_layers(c), config_kv_row(c), capacity);
    else if (hybrid_cache(c))
        kv_cache_alloc_hybrid(kv, ops, c->n_layers, c->n_kv_heads, c->head_dim, capacity, c->global_every, c->n_sink,
                              c->window, chunk);
    else kv_cache_alloc(kv, ops, config_kv_layers(c), c->n_kv_heads, c->head_dim, capacity);
}

// ---- engine: weights on the backend --------------------------------------------------------

// A tensor at host weight p of a host block, read from that block's backend copy (the host
// block itself when there is none): the same offset, in elements of type t.
static Tensor block_tensor(DType t, const void *backend, const float *host, const float *p, int rows, int cols) {
    const char *base = backend ? backend : (const void *)host;
    Tensor x = {t, base + (size_t)(p - host) * dtype_size(t), rows, cols, NULL};
    return x;
}

static Tensor tensor_at(const Engine *e, const Model *m, const float *p, int rows, int cols) {
    if (e->quant) return *quant_weights_find(e->quant, p);
    return block_tensor(e->dtype, e->matrices, m->params, p, rows, cols);
}

// The quantised matrices to run, if any: the checkpoint's, or m's quantised into e->dtype.
static void place_quantized(Engine *e, const Model *m) {
    e->quant = NULL;
    e->own_quant = 0;
    if (m->quant && (e->dtype == DTYPE_F32 || e->dtype == m->quant->dtype)) {
        e->quant = m->quant;
        e->dtype = m->quant->dtype;
    } else if (dtype_is_quantized(e->dtype)) {
        e->quant = mallocCheck(sizeof *e->quant);
        e->own_quant = 1;
        quant_weights_build(e->quant, m, e->dtype);
    }
    if (e->quant && !e->ops->host_memory)
        die("engine_open: %s weights run on the CPU only (not implemented on %s)", dtype_name(e->dtype), e->ops->name);
}

// A host fp32 block of n floats in backend memory, in the engine's dtype: NULL where the
// backend reads host memory and no conversion is wanted (the host block serves), else a copy.
static void *place_block(const Engine *e, const float *host, size_t n) {
    const Ops *ops = e->ops;
    if (ops->host_memory && e->dtype == DTYPE_F32) return NULL;
    void *block = ops->alloc(n * dtype_size(e->dtype));
    if (e->dtype == DTYPE_F32) {
        ops->upload(block, host, n * sizeof(float));
    } else { // stage in fp32, round in backend memory
        float *staging = ops->alloc(n * sizeof(float));
        ops->upload(staging, host, n * sizeof(float));
        ops->convert(block, e->dtype, staging, DTYPE_F32, n);
        ops->free(staging);
    }
    return block;
}

// Norm gains stay fp32. Where the backend cannot read host memory they are copied into one
// block, each vector kind's run after the previous one's, in the table's order (arch.h).
static void place_norms(Engine *e, const Model *m) {
    const Config *c = &m->config;
    const Arch *a = model_arch(c);
    e->norms = NULL;
    if (e->ops->host_memory) return;
    e->norms = e->ops->alloc(arch_vector_floats(c) * sizeof(float));
    size_t at = 0;
    for (int i = 0; i < a->n_tensors; i++) {
        const TensorSpec *s = &a->tensors[i];
        if (s->rows != DIM_NONE) continue;
        e->ops->upload(e->norms + at, tensor_host(&m->weights, s), tensor_floats(c, s) * sizeof(float));
        at += tensor_floats(c, s);
    }
}

// The backend copy of the norm gains at host weight p (p itself where the backend reads host
// memory): the same offset within its kind's run.
static const float *norm_at(const Engine *e, const Model *m, const float *p) {
    if (!e->norms) return p;
    const Config *c = &m->config;
    const Arch *a = model_arch(c);
    size_t at = 0;
    for (int i = 0; i < a->n_tensors; i++) {
        const TensorSpec *s = &a->tensors[i];
        if (s->rows != DIM_NONE) continue;
        const float *run = tensor_host(&m->weights, s);
        if (p >= run && p < run + tensor_floats(c, s)) return e->norms + at + (p - run);
        at += tensor_floats(c, s);
    }
    die("norm_at: a norm gain outside every vector kind");
}

// ---- MLA: the matrices engine_open derives from wq, wkv_b and wo ------------------------------
// Per head h, with q_C = W_qC,h x and k_C = W_uk,h c (W_uk,h: (hd, d_c)):
//   q_C . k_C = (W_uk,h^T W_qC,h x) . c      so the absorbed query's latent part is W_uk,h^T W_qC,h
//   W_o,h (W_uv,h (sum_j p_j c_j)) = (W_o,h W_uv,h) (sum_j p_j c_j)   so the output projection absorbs W_uv
// and the naive path expands a latent row [c; k_R] to every head's [k_C; k_R] and v with
// matrices whose k_R columns are zero for k_C and v, and the identity for k_R (exact copies).

// Floats of the MLA block: wq_abs and wo_abs per layer, k_dec and v_dec per KV layer.
static size_t mla_floats(const Config *c, size_t *per_layer, size_t *per_kv_layer) {
    ModelDims d = model_dims(c);
    size_t C = c->dim, nh = c->n_heads, dc = c->kv_lora_rank;
    *per_layer = nh * d.latent * C + C * nh * dc;
    *per_kv_layer = (size_t)d.q * d.latent + (size_t)d.o * d.latent;
    return c->n_layers * *per_layer + d.L_kv * *per_kv_layer;
}

// wq_abs (n_heads * (d_c + d_r), C) and wo_abs (C, n_heads * d_c) of one layer whose keys and
// values come from wkv_b (n_heads * 2 hd, d_c); sums in double.
static void mla_absorb(float *wq_abs, float *wo_abs, const float *wq, const float *wkv_b, const float *wo,
                       const Config *c) {
    int C = c->dim, nh = c->n_heads, hd = c->head_dim, dc = c->kv_lora_rank, dr = c->rope_dim;
    int qk = hd + dr, lat = dc + dr, o = nh * hd;
    for (int h = 0; h < nh; h++) {
        const float *wqc = wq + (size_t)h * qk * C, *uk = wkv_b + (size_t)h * 2 * hd * dc, *uv = uk + (size_t)hd * dc;
        float *qa = wq_abs + (size_t)h * lat * C;
        for (int i = 0; i < dc; i++)
            for (int col = 0; col < C; col++) {
                double acc = 0.0;
                for (int k = 0; k < hd; k++) acc += (double)uk[(size_t)k * dc + i] * wqc[(size_t)k * C + col];
                qa[(size_t)i * C + col] = (float)acc;
            }
        memcpy(qa + (size_t)dc * C, wqc + (size_t)hd * C, (size_t)dr * C * sizeof(float)); // W_qR
        for (int row = 0; row < C; row++)
            for (int i = 0; i < dc; i++) {
                double acc = 0.0;
                for (int k = 0; k < hd; k++) acc += (double)wo[(size_t)row * o + h * hd + k] * uv[(size_t)k * dc + i];
                wo_abs[(size_t)row * nh * dc + (size_t)h * dc + i] = (float)acc;
            }
    }
}

// k_dec (n_heads * (hd + d_r), d_c + d_r) and v_dec (n_heads * hd, d_c + d_r) from wkv_b.
static void mla_expand(float *k_dec, float *v_dec, const float *wkv_b, const Config *c) {
    int nh = c->n_heads, hd = c->head_dim, dc = c->kv_lora_rank, dr = c->rope_dim, lat = dc + dr, qk = hd + dr;
    memset(k_dec, 0, (size_t)nh * qk * lat * sizeof(float));
    memset(v_dec, 0, (size_t)nh * hd * lat * sizeof(float));
    for (int h = 0; h < nh; h++) {
        const float *uk = wkv_b + (size_t)h * 2 * hd * dc, *uv = uk + (size_t)hd * dc;
        for (int k = 0; k < hd; k++) {
            memcpy(k_dec + ((size_t)h * qk + k) * lat, uk + (size_t)k * dc, (size_t)dc * sizeof(float));
            memcpy(v_dec + ((size_t)h * hd + k) * lat, uv + (size_t)k * dc, (size_t)dc * sizeof(float));
        }
        for (int j = 0; j < dr; j++) k_dec[((size_t)h * qk + hd + j) * lat + dc + j] = 1.0f;
    }
}

// Fill e->mla_host (layer l's wq_abs | wo_abs, then KV layer g's k_dec | v_dec) and place it.
static void mla_prepare(Engine *e, const Model *m) {
    const Config *c = &m->config;
    const Weights *w = &m->weights;
    ModelDims d = model_dims(c);
    size_t per_layer, per_kv_layer, n = mla_floats(c, &per_layer, &per_kv_layer), C = c->dim;
    e->mla_host = mallocCheck(n * sizeof(float));
    for (int l = 0; l < c->n_layers; l++) {
        float *at = e->mla_host + l * per_layer;
        const float *kv_b = w->wkv_b + (size_t)(l / c->kv_share) * d.kv_b * c->kv_lora_rank;
        mla_absorb(at, at + (size_t)c->n_heads * d.latent * C, w->wq + l * (size_t)d.q * C, kv_b,
                   w->wo + l * C * d.o, c);
    }
    for (size_t g = 0; g < d.L_kv; g++) {
        float *at = e->mla_host + c->n_layers * per_layer + g * per_kv_layer;
        mla_expand(at, at + (size_t)d.q * d.latent, w->wkv_b + (size_t)g * d.kv_b * c->kv_lora_rank, c);
    }
    e->mla_matrices = place_block(e, e->mla_host, n);
}

static Tensor mla_tensor(const Engine *e, const float *p, int rows, int cols) {
    return block_tensor(e->dtype, e->mla_matrices, e->mla_host, p, rows, cols);
}

static void map_mla_layer(Engine *e, LayerWeights *lw, const Model *m, int l) {
    const Config *c = &m->config;
    ModelDims d = model_dims(c);
    size_t per_layer, per_kv_layer, C = c->dim, nh = c->n_heads;
    mla_floats(c, &per_layer, &per_kv_layer);
    const float *at = e->mla_host + l * per_layer;
    const float *kv_at = e->mla_host + c->n_layers * per_layer + (size_t)(l / c->kv_share) * per_kv_layer;
    lw->wq_abs = mla_tensor(e, at, (int)nh * d.latent, (int)C);
    lw->wo_abs = mla_tensor(e, at + nh * d.latent * C, (int)C, (int)nh * c->kv_lora_rank);
    lw->k_dec = mla_tensor(e, kv_at, d.q, d.latent);
    lw->v_dec = mla_tensor(e, kv_at + (size_t)d.q * d.latent, d.o, d.latent);
}

// Every stored tensor where the forward reads it (TensorSpec.engine): a matrix as a Tensor on
// the backend, a norm gain as a pointer; then MLA's derived matrices. A tied head is the
// embedding; a CLA layer without keys and values of its own keeps empty wk / wv.
static void map_layers(Engine *e, const Model *m) {
    const Config *c = &m->config;
    e->layers = callocCheck((size_t)c->n_layers, sizeof(LayerWeights));
    size_t n = model_tensors(c, &m->weights, NULL);
    ModelTensor *t = mallocCheck(n * sizeof *t);
    model_tensors(c, &m->weights, t);
    for (size_t i = 0; i < n; i++) {
        if (t[i].spec->engine == NOT_PLACED) continue;
        char *slot = (t[i].layer < 0 ? (char *)e : (char *)&e->layers[t[i].layer]) + t[i].spec->engine;
        if (t[i].rows) *(Tensor *)slot = tensor_at(e, m, t[i].data, (int)t[i].rows, (int)t[i].cols);
        else *(const float **)slot = norm_at(e, m, t[i].data);
    }
    free(t);
    if (c->tied_embeddings) e->wcls = e->token_embedding;
    for (int l = 0; c->kv_lora_rank && l < c->n_layers; l++) map_mla_layer(e, &e->layers[l], m, l);
}

// ---- engine: scratch ------------------------------------------------------------------------

static size_t max2(size_t a, size_t b) { return a > b ? a : b; }

// RoPE frequencies (rot / 2) in backend memory, and the attention temperature.
static float *rope_table(const Ops *ops, int rot, const RopeConfig *rc, float *mscale) {
    float *host = mallocCheck((size_t)rot / 2 * sizeof(float));
    *mscale = rope_frequencies(host, rot, rc);
    float *table = ops->alloc((size_t)rot / 2 * sizeof(float));
    ops->upload(table, host, (size_t)rot / 2 * sizeof(float));
    free(host);
    return table;
}

// Matmul scratch for R rows of inputs up to cols wide: the most any matrix the engine runs needs
// (a file's matrices may each have their own type: Gemma's Q8_K activation rows outgrow Q8_0's).
static size_t matmul_scratch(const Engine *e, int R, int cols) {
    size_t bytes = e->ops->matmul_scratch_bytes(e->dtype, R, cols);
    for (int i = 0; e->quant && i < e->quant->n; i++) {
        size_t b = e->ops->matmul_scratch_bytes(e->quant->tensors[i].dtype, R, cols);
        bytes = b > bytes ? b : bytes;
    }
    return bytes;
}

// The attention paths of a layer: MHA / GQA / MQA, and MLA absorbed (queries against the
// latent rows: one KV head whose key is [c_kv; k_R] and whose value is its c_kv) or naive
// (every head's keys [k_C; k_R] and values decompressed from them).
typedef enum { PATH_HEADS, PATH_MLA_ABSORBED, PATH_MLA_NAIVE } AttentionPath;

// A layer's attention shape on a path: its window and sinks from attn, and the RoPE tables a
// sink's query is rotated back with (StreamingLLM's rule) from inv_freq.
static AttentionShape attention_shape(const Config *c, AttentionPath path, LayerAttention attn, const float *inv_freq) {
    int hd = c->head_dim, lat = c->kv_lora_rank + c->rope_dim, qk = hd + c->rope_dim;
    AttentionShape s = {c->n_heads, c->n_kv_heads, hd, attn.window, attn.n_sink, 1.0f / sqrtf((float)hd),
                        .value_dim = hd, .cache_positions = c->cache_positions, .inv_freq = inv_freq};
    if (path == PATH_MLA_ABSORBED)
        s = (AttentionShape){c->n_heads, 1, lat, attn.window, attn.n_sink, 1.0f / sqrtf((float)qk),
                             .value_dim = c->kv_lora_rank, .value_stride = lat};
    if (path == PATH_MLA_NAIVE)
        s = (AttentionShape){c->n_heads, c->n_heads, qk, attn.window, attn.n_sink, 1.0f / sqrtf((float)qk),
                             .value_dim = hd};
    return s;
}

// Attention scratch for every path the config's layers may take (an MLA engine switches
// between absorbed and naive: Engine.mla_naive).
static size_t attention_scratch(const Ops *ops, const Config *c, int max_keys) {
    LayerAttention full = {0};
    AttentionShape heads = attention_shape(c, PATH_HEADS, full, NULL);
    if (!c->kv_lora_rank) return ops->attention_scratch_bytes(&heads, max_keys);
    AttentionShape absorbed = attention_shape(c, PATH_MLA_ABSORBED, full, NULL);
    AttentionShape naive = attention_shape(c, PATH_MLA_NAIVE, full, NULL);
    return max2(ops->attention_scratch_bytes(&absorbed, max_keys), ops->attention_scratch_bytes(&naive, max_keys));
}

static void runstate_alloc(RunState *s, const Engine *e, const Config *c, int max_rows, int max_keys) {
    const Ops *ops = e->ops;
    size_t R = max_rows, C = c->dim, H = c->hidden_dim, Lkv = config_kv_layers(c), V = c->vocab_size;
    ModelDims d = model_dims(c);
    int mla = c->kv_lora_rank > 0;
    size_t q = max2(d.q, (size_t)c->n_heads * d.latent);             // naive or absorbed queries
    size_t att = max2(d.o, (size_t)c->n_heads * c->kv_lora_rank);    // their outputs
    size_t widest = max2(max2(C, H), max2(max2(q, att), d.latent)); // matmul input widths
    // MLA's naive path multiplies a whole sequence's latent rows at once
    size_t matmul_rows = mla && (size_t)max_keys > R ? (size_t)max_keys : R;
    int rot = mla ? c->rope_dim : c->head_dim;
    s->max_rows = max_rows;
    s->max_keys = max_keys;
    s->x = ops->alloc(R * C * sizeof(float));
    s->xb = ops->alloc(R * C * sizeof(float));
    s->q = ops->alloc(R * q * sizeof(float));
    s->k = ops->alloc(R * (mla ? d.latent : d.kv) * sizeof(float));
    s->v = mla ? NULL : ops->alloc(R * d.kv * sizeof(float));
    s->att = ops->alloc(R * att * sizeof(float));
    s->proj = ops->alloc(R * C * sizeof(float));
    s->hb = ops->alloc(R * H * sizeof(float));
    s->hb2 = ops->alloc(R * H * sizeof(float));
    s->logits = ops->alloc((R < HEAD_ROWS ? R : HEAD_ROWS) * V * sizeof(float));
    s->matmul_scratch = ops->alloc(matmul_scratch(e, (int)matmul_rows, (int)widest));
    s->attn_scratch_bytes = attention_scratch(ops, c, max_keys);
    s->attn_scratch = ops->alloc(s->attn_scratch_bytes);
    s->tokens = ops->alloc(R * sizeof(int));
    s->pos = ops->alloc(R * sizeof(int));
    s->layouts = ops->alloc(Lkv * R * sizeof(KVLayout));
    s->layouts_host = mallocCheck(Lkv * R * sizeof(KVLayout));
    s->keys = ops->alloc(Lkv * R * sizeof(void *));
    s->values = ops->alloc(Lkv * R * sizeof(void *));
    s->pos_host = mallocCheck(R * sizeof(int));
    s->keys_host = mallocCheck(Lkv * R * sizeof(void *));
    s->values_host = mallocCheck(Lkv * R * sizeof(void *));
    s->key_scales = ops->alloc(Lkv * R * sizeof(float *));
    s->value_scales = ops->alloc(Lkv * R * sizeof(float *));
    s->key_scales_host = mallocCheck(Lkv * R * sizeof(float *));
    s->value_scales_host = mallocCheck(Lkv * R * sizeof(float *));
    if (mla) {
        s->k_dec = ops->alloc((size_t)max_keys * d.q * sizeof(float));
        s->v_dec = ops->alloc((size_t)max_keys * d.o * sizeof(float));
        s->k_dec_rows = ops->alloc(R * sizeof(void *));
        s->v_dec_rows = ops->alloc(R * sizeof(void *));
        void **rows = mallocCheck(2 * R * sizeof(void *));
        for (size_t r = 0; r < R; r++) rows[r] = s->k_dec, rows[R + r] = s->v_dec;
        ops->upload(s->k_dec_rows, rows, R * sizeof(void *));
        ops->upload(s->v_dec_rows, rows + R, R * sizeof(void *));
        free(rows);
    }

    s->inv_freq = rope_table(ops, rot, &c->rope, &s->mscale);
    s->inv_freq_global = NULL;
    if (c->rope_theta_global && c->rope_theta_global != c->rope.theta) {
        RopeConfig global = c->rope;
        global.theta = c->rope_theta_global;
        s->inv_freq_global = rope_table(ops, rot, &global, &s->mscale_global);
    }
}

static void runstate_free(RunState *s, const Ops *ops) {
    void *bufs[] = {s->x,      s->xb,          s->q,           s->k,      s->v,        s->att,
                    s->proj,   s->hb,          s->hb2,         s->logits, s->matmul_scratch,
                    s->attn_scratch, s->inv_freq, s->inv_freq_global, s->tokens, s->pos, s->keys, s->values,
                    s->k_dec,  s->v_dec,       s->k_dec_rows,  s->v_dec_rows, s->layouts, s->key_scales,
                    s->value_scales};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++) ops->free(bufs[i]);
    free(s->logits_host);
    free(s->pos_host);
    free(s->layouts_host);
    free(s->keys_host);
    free(s->values_host);
    free(s->key_scales_host);
    free(s->value_scales_host);
    memset(s, 0, sizeof *s);
}

void engine_open(Engine *e, const Model *m, const Ops *ops, DType dtype, int max_rows, int max_keys) {
    memset(e, 0, sizeof *e);
    e->ops = ops;
    e->config = m->config;
    e->dtype = dtype;
    place_quantized(e, m);
    e->matrices = e->quant ? NULL : place_block(e, m->params, m->n_params);
    place_norms(e, m);
    if (m->config.kv_lora_rank) mla_prepare(e, m);
    map_layers(e, m);
    runstate_alloc(&e->s, e, &m->config, max_rows, max_keys);
}

void engine_close(Engine *e) {
    runstate_free(&e->s, e->ops);
    e->ops->free(e->matrices);
    e->ops->free(e->norms);
    if (e->own_quant) {
        quant_weights_free(e->quant);
        free(e->quant);
    }
    e->ops->free(e->mla_matrices);
    free(e->mla_host);
    free(e->layers);
    memset(e, 0, sizeof *e);
}

float *engine_logits_host(Engine *e, int R) {
    RunState *s = &e->s;
    if (R > s->logits_host_rows) {
        free(s->logits_host);
        s->logits_host = mallocCheck((size_t)R * e->config.vocab_size * sizeof(float));
        s->logits_host_rows = R;
    }
    return s->logits_host;
}

const Tensor *engine_layer_matrix(const Engine *e, int l, const TensorSpec *s) {
    if (s->rows == DIM_NONE || s->engine == NOT_PLACED || s->scope == TENSOR_MODEL || s->scope == TENSOR_UNTIED_HEAD)
        die("engine_layer_matrix: %s is not a per-layer matrix the forward reads", s->name);
    return (const Tensor *)((const char *)&e->layers[l] + s->engine);
}

size_t engine_weight_bytes(const Engine *e) {
    const Config *c = &e->config;
    size_t n = model_param_count(c), norms = arch_vector_floats(c) * sizeof(float);
    if (e->quant) return e->quant->bytes + norms;
    if (c->kv_lora_rank) { // the absorbed path reads wq_abs, wo_abs for wq, wo, and no wkv_b
        ModelDims d = model_dims(c);
        size_t per_layer, per_kv_layer, C = c->dim;
        mla_floats(c, &per_layer, &per_kv_layer);
        n = n - c->n_layers * (d.q * C + C * d.o) - d.L_kv * d.kv_b * c->kv_lora_rank + c->n_layers * per_layer;
    }
    return n * dtype_size(e->dtype) + norms;
}

// ---- the forward pass -----------------------------------------------------------------------

// Tokens, positions and every KV layer's cache rows of the R rows, into backend memory.
static void stage_rows(Engine *e, KVCache **caches, const int *tokens, const int *pos, int R) {
    RunState *s = &e->s;
    int Lkv = config_kv_layers(&e->config);
    for (int r = 0; r < R; r++) s->pos_host[r] = pos[r];
    for (int l = 0; l < Lkv; l++)
        for (int r = 0; r < R; r++) {
            s->layouts_host[(size_t)l * R + r] = kv_cache_layer_layout(caches[r], l);
            s->keys_host[(size_t)l * R + r] = kv_cache_layer_key(caches[r], l);
            s->values_host[(size_t)l * R + r] = kv_cache_layer_value(caches[r], l);
            s->key_scales_host[(size_t)l * R + r] = kv_cache_layer_key_scale(caches[r], l);
            s->value_scales_host[(size_t)l * R + r] = kv_cache_layer_value_scale(caches[r], l);
        }
    e->ops->upload(s->tokens, tokens, (size_t)R * sizeof(int));
    e->ops->upload(s->pos, s->pos_host, (size_t)R * sizeof(int));
    e->ops->upload(s->layouts, s->layouts_host, (size_t)Lkv * R * sizeof(KVLayout));
    e->ops->upload(s->keys, s->keys_host, (size_t)Lkv * R * sizeof(void *));
    e->ops->upload(s->values, s->values_host, (size_t)Lkv * R * sizeof(void *));
    e->ops->upload(s->key_scales, s->key_scales_host, (size_t)Lkv * R * sizeof(float *));
    e->ops->upload(s->value_scales, s->value_scales_host, (size_t)Lkv * R * sizeof(float *));
}

// The attention blocks: from the normed input s->xb to the block's output s->proj (R, C).
// own_kv: this layer computes the keys and values it reads (CLA's later layers of a set
// read those the set's first layer wrote into the cache in this same forward).

// Hand the tap, if one is set, an activation about to be multiplied (rows (R, cols) at pos).
static void tap(const Engine *e, TensorInput input, int layer, const float *x, const int *pos, int R, int cols) {
    if (e->tap) e->tap(e->tap_ctx, input, layer, x, pos, R, cols);
}

// Layer l's attention (local or global) and the RoPE tables it rotates with.
typedef struct {
    LayerAttention attn;
    const float *inv_freq;
    float mscale;
} LayerPlan;

static LayerPlan layer_plan(const Engine *e, int l) {
    const RunState *s = &e->s;
    LayerPlan lp = {config_layer_attention(&e->config, l), s->inv_freq, s->mscale};
    if (lp.attn.global && s->inv_freq_global) lp.inv_freq = s->inv_freq_global, lp.mscale = s->mscale_global;
    return lp;
}

// MHA / GQA / MQA.
static void attention_heads(Engine *e, const LayerWeights *w, const LayerPlan *lp, const KVRows *kv, int l, int R,
                            int own_kv) {
    const Ops *ops = e->ops;
    const Config *c = &e->config;
    RunState *s = &e->s;
    int hd = c->head_dim, kv_dim = c->n_kv_heads * hd;
    AttentionShape shape = attention_shape(c, PATH_HEADS, lp->attn, lp->inv_freq);
    ops->matmul(s->q, s->xb, &w->wq, R, s->matmul_scratch); // (R, n_heads * hd)
    if (w->rms_q) ops->rmsnorm(s->q, s->q, w->rms_q, R * c->n_heads, hd, c->norm_eps); // QK-norm: per head
    ops->rope(s->q, R, c->n_heads, hd, hd, s->pos, lp->inv_freq, lp->mscale, c->rope_style);
    if (own_kv) {
        ops->matmul(s->k, s->xb, &w->wk, R, s->matmul_scratch); // (R, n_kv * hd)
        ops->matmul(s->v, s->xb, &w->wv, R, s->matmul_scratch);
        if (w->rms_k) ops->rmsnorm(s->k, s->k, w->rms_k, R * c->n_kv_heads, hd, c->norm_eps);
        ops->rope(s->k, R, c->n_kv_heads, hd, hd, s->pos, lp->inv_freq, lp->mscale, c->rope_style);
        ops->kv_write(kv, s->k, s->v, kv_dim);
    }
    ops->attention(s->att, s->q, kv, &shape, s->attn_scratch, s->attn_scratch_bytes);
    tap(e, INPUT_ATTN_OUT, l, s->att, s->pos_host, R, c->n_heads * hd);
    ops->matmul(s->proj, s->att, &w->wo, R, s->matmul_scratch); // (R, C)
}

// MLA's cache rows [c_kv; RoPE(k_R)] (R, d_c + d_r), written by both paths.
static void mla_write_latent(Engine *e, const LayerWeights *w, const LayerPlan *lp, const KVRows *kv, int R) {
    const Config *c = &e->config;
    RunState *s = &e->s;
    int lat = c->kv_lora_rank + c->rope_dim;
    e->ops->matmul(s->k, s->xb, &w->wkv_a, R, s->matmul_scratch); // (R, d_c + d_r)
    e->ops->rope(s->k, R, 1, lat, c->rope_dim, s->pos, lp->inv_freq, lp->mscale, c->rope_style);
    e->ops->kv_write(kv, s->k, NULL, lat);
}

// MLA absorbed: queries [W_uk^T q_C; RoPE(q_R)] per head against the latent rows (one KV head,
// values = the rows' c_kv), the latent outputs through wo_abs.
static void attention_mla_absorbed(Engine *e, const LayerWeights *w, const LayerPlan *lp, const KVRows *kv, int R,
                                   int own_kv) {
    const Ops *ops = e->ops;
    const Config *c = &e->config;
    RunState *s = &e->s;
    int lat = c->kv_lora_rank + c->rope_dim;
    AttentionShape shape = attention_shape(c, PATH_MLA_ABSORBED, lp->attn, lp->inv_freq);
    if (own_kv) mla_write_latent(e, w, lp, kv, R);
    ops->matmul(s->q, s->xb, &w->wq_abs, R, s->matmul_scratch); // (R, n_heads * (d_c + d_r))
    ops->rope(s->q, R, c->n_heads, lat, c->rope_dim, s->pos, lp->inv_freq, lp->mscale, c->rope_style);
    ops->attention(s->att, s->q, kv, &shape, s->attn_scratch, s->attn_scratch_bytes); // (R, n_heads * d_c)
    ops->matmul(s->proj, s->att, &w->wo_abs, R, s->matmul_scratch);                   // (R, C)
}

// MLA naive: for each sequence among the rows, decompress its cached rows into every head's
// keys [k_C; k_R] and values, then ordinary attention with queries [q_C; RoPE(q_R)].
static void attention_mla_naive(Engine *e, const LayerWeights *w, const LayerPlan *lp, const KVRows *kv, int kv_layer,
                                KVCache **caches, int R, int own_kv) {
    const Ops *ops = e->ops;
    const Config *c = &e->config;
    RunState *s = &e->s;
    int nh = c->n_heads, hd = c->head_dim, qk = hd + c->rope_dim;
    AttentionShape shape = attention_shape(c, PATH_MLA_NAIVE, lp->attn, lp->inv_freq);
    if (own_kv) mla_write_latent(e, w, lp, kv, R);
    ops->matmul(s->q, s->xb, &w->wq, R, s->matmul_scratch); // (R, n_heads * (hd + d_r))
    ops->rope(s->q, R, nh, qk, c->rope_dim, s->pos, lp->inv_freq, lp->mscale, c->rope_style);
    for (int r0 = 0, r1; r0 < R; r0 = r1) { // rows r0 .. r1 - 1: one sequence
        if (kv_cache_layer_layout(caches[r0], kv_layer).ring) die("engine_forward: MLA's naive path reads contiguous caches only");
        int n = 0;
        for (r1 = r0; r1 < R && caches[r1] == caches[r0]; r1++) n = s->pos_host[r1] + 1 > n ? s->pos_host[r1] + 1 : n;
        const float *rows = s->keys_host[(size_t)kv_layer * R + r0]; // a latent cache is fp32
        ops->matmul(s->k_dec, rows, &w->k_dec, n, s->matmul_scratch); // (n, n_heads * (hd + d_r))
        ops->matmul(s->v_dec, rows, &w->v_dec, n, s->matmul_scratch); // (n, n_heads * hd)
        KVRows seq = {r1 - r0, s->pos + r0, s->k_dec_rows, s->v_dec_rows, .layouts = NULL};
        ops->attention(s->att + (size_t)r0 * nh * hd, s->q + (size_t)r0 * nh * qk, &seq, &shape, s->attn_scratch,
                       s->attn_scratch_bytes);
    }
    ops->matmul(s->proj, s->att, &w->wo, R, s->matmul_scratch); // (R, C)
}

void engine_forward(Engine *e, KVCache **caches, const int *tokens, const int *pos, int R, float *logits,
                    int all_logits) {
    const Ops *ops = e->ops;
    const Config *c = &e->config;
    RunState *s = &e->s;
    int C = c->dim, H = c->hidden_dim;
    if (R > s->max_rows) die("engine_forward: %d rows exceed the engine's %d", R, s->max_rows);
    for (int r = 0, n; r < R; r += n) { // n: the rows of caches[r]'s sequence, consecutive
        Error err;
        for (n = 1; r + n < R && caches[r + n] == caches[r];) n++;
        for (int l = 0; l < c->n_layers; l++) { // each layer's attention, local or global
            LayerAttention la = config_layer_attention(c, l);
            if (kv_cache_fits(caches[r], l / c->kv_share, pos[r], pos[r + n - 1] - pos[r] + 1, la.window, la.n_sink, &err))
                die("engine_forward: layer %d: %s", l, err.msg);
            if (attention_visible_keys(pos[r + n - 1], la.window, la.n_sink).count > s->max_keys)
                die("engine_forward: position %d sees more keys than the engine's %d", pos[r + n - 1], s->max_keys);
        }
        if (caches[r]->dtype != caches[0]->dtype)
            die("engine_forward: one forward over %s and %s KV caches", dtype_name(caches[0]->dtype),
                dtype_name(caches[r]->dtype));
    }

    stage_rows(e, caches, tokens, pos, R);
    ops->embedding(s->x, &e->token_embedding, s->tokens, R); // (R, C)
    if (c->embed_scale) ops->scale(s->x, c->embed_scale, (size_t)R * C);

    for (int l = 0; l < c->n_layers; l++) {
        const LayerWeights *w = &e->layers[l];
        int kv_layer = l / c->kv_share, own_kv = l % c->kv_share == 0;
        KVRows kv = {R, s->pos, s->keys + (size_t)kv_layer * R, s->values + (size_t)kv_layer * R, s->layouts + (size_t)kv_layer * R,
                     caches[0]->dtype, c->n_kv_heads, s->key_scales + (size_t)kv_layer * R,
                     s->value_scales + (size_t)kv_layer * R};
        LayerPlan lp = layer_plan(e, l);
        // attention block
        ops->rmsnorm(s->xb, s->x, w->rms_att, R, C, c->norm_eps);
        tap(e, INPUT_ATTN_NORM, l, s->xb, s->pos_host, R, C);
        if (!c->kv_lora_rank) attention_heads(e, w, &lp, &kv, l, R, own_kv);
        else if (e->mla_naive) attention_mla_naive(e, w, &lp, &kv, kv_layer, caches, R, own_kv);
        else attention_mla_absorbed(e, w, &lp, &kv, R, own_kv);
        if (w->rms_post_att) ops->rmsnorm(s->proj, s->proj, w->rms_post_att, R, C, c->norm_eps);
        ops->add(s->x, s->proj, (size_t)R * C);

        // MLP block: w2(act(w1 x) * w3 x)
        ops->rmsnorm(s->xb, s->x, w->rms_ffn, R, C, c->norm_eps);
        tap(e, INPUT_FFN_NORM, l, s->xb, s->pos_host, R, C);
        ops->matmul(s->hb, s->xb, &w->w1, R, s->matmul_scratch); // (R, H)
        ops->matmul(s->hb2, s->xb, &w->w3, R, s->matmul_scratch);
        ops->glu(s->hb, s->hb, s->hb2, R, H, c->ffn_act);
        tap(e, INPUT_FFN_ACT, l, s->hb, s->pos_host, R, H);
        ops->matmul(s->proj, s->hb, &w->w2, R, s->matmul_scratch); // (R, C)
        if (w->rms_post_ffn) ops->rmsnorm(s->proj, s->proj, w->rms_post_ffn, R, C, c->norm_eps);
        ops->add(s->x, s->proj, (size_t)R * C);
    }

    for (int r = 0; r < R; r++)
        if (pos[r] + 1 > caches[r]->len) caches[r]->len = pos[r] + 1;

    if (!logits) return;
    // The head over HEAD_ROWS rows at a time, each slice downloaded as it is done: the backend
    // holds (HEAD_ROWS, V) logits, not (R, V) (at V = 262144 a 512-row prefill would take 512 MiB).
    int first = all_logits ? 0 : R - 1, V = c->vocab_size;
    for (int r0 = first; r0 < R; r0 += HEAD_ROWS) {
        int n = R - r0 < HEAD_ROWS ? R - r0 : HEAD_ROWS;
        ops->rmsnorm(s->xb, s->x + (size_t)r0 * C, e->rms_final, n, C, c->norm_eps);
        tap(e, INPUT_FINAL_NORM, -1, s->xb, s->pos_host + r0, n, C);
        ops->matmul(s->logits, s->xb, &e->wcls, n, s->matmul_scratch); // (n, V)
        ops->download(logits + (size_t)(r0 - first) * V, s->logits, (size_t)n * V * sizeof(float));
    }
}
