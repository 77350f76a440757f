// model_reference.h: what the model tests of every backend share (test_model.c for the CPU,
// test_cuda.c for the GPU): small random models, a plain reference forward written with the
// double-precision reference kernels, and a server-like run of two sequences through an
// engine of any backend (chunked prefill, then batched decode steps).
#pragma once

#include <math.h>
#include <string.h>

#include "common.h"
#include "model.h"
#include "paged.h"
#include "reference.h"
#include "session.h"
#include "test_util.h"

// A small config: C 48, H 96, L 2, hd 12, V 67, context 64; heads, window and sinks as given.
static inline Config small_config(int n_heads, int n_kv_heads, int window, int n_sink) {
    Config c = config_default();
    c.dim = 48;
    c.hidden_dim = 96;
    c.n_layers = 2;
    c.n_heads = n_heads;
    c.n_kv_heads = n_kv_heads;
    c.head_dim = 12;
    c.vocab_size = 67;
    c.seq_len = 64;
    c.window = window;
    c.n_sink = n_sink;
    return c;
}

// small_config made MLA: d_c = kv_lora_rank, d_r = rope_dim (n_kv_heads = n_heads).
static inline Config small_mla_config(int n_heads, int kv_lora_rank, int rope_dim, int window, int n_sink) {
    Config c = small_config(n_heads, n_heads, window, n_sink);
    c.kv_lora_rank = kv_lora_rank;
    c.rope_dim = rope_dim;
    return c;
}

// A model with N(0, std) weights and random (not unit) norm gains, so a wrong gain index
// cannot hide.
static inline void random_model(Model *m, const Config *c, uint64_t seed, float std) {
    char why[128];
    if (!config_validate(c, why, sizeof why)) fail_msg("bad test config: %s", why);
    model_alloc(m, c);
    model_init_random(m, seed, std);
    uint64_t rng = rng_seed(seed + 99);
    for (int i = 0; i < c->n_layers * c->dim; i++) {
        m->weights.rms_att[i] = 1.0f + 0.2f * rng_normal(&rng);
        m->weights.rms_ffn[i] = 1.0f + 0.2f * rng_normal(&rng);
    }
    float *gemma_norms[] = {m->weights.rms_q, m->weights.rms_k, m->weights.rms_post_att, m->weights.rms_post_ffn};
    int widths[] = {c->head_dim, c->head_dim, c->dim, c->dim};
    for (int k = 0; k < 4; k++)
        for (int i = 0; gemma_norms[k] && i < c->n_layers * widths[k]; i++) gemma_norms[k][i] = 1.0f + 0.2f * rng_normal(&rng);
}

// small_config made a Gemma 3: its tensors (QK-norm, post-norms) and options (embedding scale,
// NEOX RoPE, GeGLU), n_layers layers with every k-th global at RoPE base theta_global.
static inline Config small_gemma3_config(int n_heads, int n_kv_heads, int window, int n_layers, int k,
                                         float theta_global) {
    Config c = small_config(n_heads, n_kv_heads, window, 0);
    c.arch = ARCH_GEMMA3;
    c.n_layers = n_layers;
    c.global_every = k;
    c.rope_theta_global = theta_global;
    c.embed_scale = sqrtf((float)c.dim);
    c.rope_style = ROPE_STYLE_NEOX;
    c.ffn_act = GLU_GELU_TANH;
    c.tied_embeddings = 1;
    return c;
}

static inline void random_tokens(int *tokens, int n, int vocab, uint64_t seed) {
    uint64_t rng = rng_seed(seed);
    for (int i = 0; i < n; i++) tokens[i] = (int)(rng_u64(&rng) % vocab);
}

// A generation callback (SessionTokenFn) that stops at the stop_at-th token it sees.
typedef struct {
    int stop_at, seen;
} StopAt;

static inline int stop_at(void *ctx, int token) {
    (void)token;
    StopAt *s = ctx;
    return ++s->seen == s->stop_at;
}

// Rounds n floats in place to a backend's matmul input type (NULL: no rounding).
typedef void (*RoundFn)(float *x, size_t n, DType t);

// RoPE on the last rot of every head (width wide) of the T rows of x (T, n_heads * wide).
static inline void ref_rope_rows(float *x, int T, int n_heads, int wide, int rot, const float *inv_freq, float mscale,
                                 RopeStyle style) {
    for (int i = 0; i < T; i++)
        for (int h = 0; h < n_heads; h++)
            ref_rope_rotate(x + ((size_t)i * n_heads + h) * wide + wide - rot, 1, rot, i, inv_freq, mscale, style);
}

// A plain forward of every position of one sequence with the reference kernels, attention
// over the whole sequence at once: independent of caches, chunking and backends. Gemma 3's
// options as the config and tensors give them (GeGLU with the exact GELU, which the engine's
// fp16 table rounds: ~1e-3 relative per activation). MLA in its
// naive form (keys and values decompressed per head); CLA layers reuse their set's first
// layer's keys and values. round, when set, rounds each matmul input to t where a backend
// with t weights rounds it (the weights themselves must already be rounded), so it computes
// what that backend computes, up to accumulation order (for MHA / GQA / MQA: MLA's absorbed
// path rounds other inputs). logits (T, V).
static inline void ref_forward(const Model *m, const int *tokens, int T, float *logits, RoundFn round, DType t) {
    const Config *c = &m->config;
    const Weights *w = &m->weights;
    ModelDims d = model_dims(c);
    int mla = c->kv_lora_rank > 0, nh = c->n_heads, hd = c->head_dim, dc = c->kv_lora_rank, dr = c->rope_dim;
    int C = c->dim, H = c->hidden_dim, qd = d.q, od = d.o, lat = d.latent;
    int kw = mla ? d.q : d.kv, vw = mla ? d.o : d.kv, rot = mla ? dr : hd;
    float *x = mallocCheck((size_t)T * C * 4), *xb = mallocCheck((size_t)T * C * 4);
    float *q = mallocCheck((size_t)T * qd * 4), *k = mallocCheck((size_t)T * kw * 4);
    float *v = mallocCheck((size_t)T * vw * 4), *att = mallocCheck((size_t)T * od * 4);
    float *latent = mallocCheck((size_t)T * lat * 4 + 4), *ckv = mallocCheck((size_t)T * dc * 4 + 4);
    float *kv_b = mallocCheck((size_t)T * d.kv_b * 4 + 4);
    float *proj = mallocCheck((size_t)T * C * 4), *h1 = mallocCheck((size_t)T * H * 4), *h3 = mallocCheck((size_t)T * H * 4);
    // local layers' RoPE, and global layers' (Config.global_every) at their own base
    RopeConfig rope_global = c->rope;
    if (c->rope_theta_global) rope_global.theta = c->rope_theta_global;
    float *inv_freq = mallocCheck((size_t)rot / 2 * sizeof(float)), *inv_freq_g = mallocCheck((size_t)rot / 2 * sizeof(float));
    float mscale = rope_frequencies(inv_freq, rot, &c->rope), mscale_g = rope_frequencies(inv_freq_g, rot, &rope_global);
#define ROUND(buf, n) \
    if (round) round(buf, n, t)
    for (int i = 0; i < T; i++) memcpy(x + (size_t)i * C, w->token_embedding + (size_t)tokens[i] * C, C * 4);
    for (size_t i = 0; c->embed_scale && i < (size_t)T * C; i++) x[i] *= c->embed_scale;
    for (int l = 0; l < c->n_layers; l++) {
        size_t g = (size_t)(l / c->kv_share);
        int global = c->global_every && l % c->global_every == c->global_every - 1;
        const float *freq = global ? inv_freq_g : inv_freq;
        float msc = global ? mscale_g : mscale;
        AttentionShape s = {nh, mla ? nh : c->n_kv_heads, d.qk, global ? 0 : c->window, global ? 0 : c->n_sink,
                            1.0f / sqrtf((float)d.qk), .value_dim = hd};
        ref_rmsnorm(xb, x, w->rms_att + l * C, T, C, c->norm_eps);
        ROUND(xb, (size_t)T * C);
        ref_matmul(q, xb, w->wq + (size_t)l * qd * C, T, C, qd);
        if (w->rms_q) ref_rmsnorm(q, q, w->rms_q + (size_t)l * hd, T * nh, hd, c->norm_eps); // QK-norm
        ref_rope_rows(q, T, nh, d.qk, rot, freq, msc, c->rope_style);
        if (l % c->kv_share == 0 && !mla) {
            ref_matmul(k, xb, w->wk + g * d.kv * C, T, C, d.kv);
            ref_matmul(v, xb, w->wv + g * d.kv * C, T, C, d.kv);
            if (w->rms_k) ref_rmsnorm(k, k, w->rms_k + (size_t)l * hd, T * c->n_kv_heads, hd, c->norm_eps);
            ref_rope_rows(k, T, c->n_kv_heads, hd, hd, freq, msc, c->rope_style);
        } else if (l % c->kv_share == 0) { // [c_kv; RoPE(k_R)], then every head's [k_C; k_R] and v
            ref_matmul(latent, xb, w->wkv_a + g * lat * C, T, C, lat);
            ref_rope_rows(latent, T, 1, lat, dr, freq, msc, c->rope_style);
            for (int i = 0; i < T; i++) memcpy(ckv + (size_t)i * dc, latent + (size_t)i * lat, dc * 4);
            ref_matmul(kv_b, ckv, w->wkv_b + g * d.kv_b * dc, T, dc, d.kv_b);
            for (int i = 0; i < T; i++)
                for (int h = 0; h < nh; h++) {
                    const float *kc = kv_b + (size_t)i * d.kv_b + (size_t)h * 2 * hd;
                    memcpy(k + (size_t)i * kw + (size_t)h * d.qk, kc, hd * 4);
                    memcpy(k + (size_t)i * kw + (size_t)h * d.qk + hd, latent + (size_t)i * lat + dc, dr * 4);
                    memcpy(v + (size_t)i * vw + (size_t)h * hd, kc + hd, hd * 4);
                }
        }
        ref_attention_kv(att, q, k, v, T, 0, &s);
        ROUND(att, (size_t)T * od);
        ref_matmul(proj, att, w->wo + (size_t)l * C * od, T, od, C);
        if (w->rms_post_att) ref_rmsnorm(proj, proj, w->rms_post_att + (size_t)l * C, T, C, c->norm_eps);
        for (size_t i = 0; i < (size_t)T * C; i++) x[i] += proj[i];
        ref_rmsnorm(xb, x, w->rms_ffn + l * C, T, C, c->norm_eps);
        ROUND(xb, (size_t)T * C);
        ref_matmul(h1, xb, w->w1 + (size_t)l * H * C, T, C, H);
        ref_matmul(h3, xb, w->w3 + (size_t)l * H * C, T, C, H);
        if (c->ffn_act == GLU_GELU_TANH) ref_geglu_tanh(h1, h1, h3, T, H);
        else ref_swiglu(h1, h1, h3, T, H);
        ROUND(h1, (size_t)T * H);
        ref_matmul(proj, h1, w->w2 + (size_t)l * C * H, T, H, C);
        if (w->rms_post_ffn) ref_rmsnorm(proj, proj, w->rms_post_ffn + (size_t)l * C, T, C, c->norm_eps);
        for (size_t i = 0; i < (size_t)T * C; i++) x[i] += proj[i];
    }
    ref_rmsnorm(xb, x, w->rms_final, T, C, c->norm_eps);
    ROUND(xb, (size_t)T * C);
#undef ROUND
    ref_matmul(logits, xb, w->wcls, T, C, c->vocab_size);
    float *bufs[] = {x, xb, q, k, v, att, latent, ckv, kv_b, proj, h1, h3, inv_freq, inv_freq_g};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++) free(bufs[i]);
}

// Two sequences, as a server runs them: prefill each (9 and 5 tokens, in chunks of
// MAX_ROWS rows), then STEPS decode steps of both at once, on an engine of ops with dtype
// weights. logits[b] (PROMPT_LENS[b] + STEPS, V): row i is the prediction after token i.
enum { N_SEQ = 2, STEPS = 3, MAX_ROWS = 4, MAX_LEN = 9 + STEPS };
static const int PROMPT_LENS[N_SEQ] = {9, 5};

static inline void run_sequences(const Model *m, const Ops *ops, DType dtype, int tokens[N_SEQ][MAX_LEN],
                          float *logits[N_SEQ]) {
    const Config *c = &m->config;
    int V = c->vocab_size;
    Engine e;
    Session seq[N_SEQ];
    Session *ptrs[N_SEQ];
    Error err;
    engine_open(&e, m, ops, dtype, MAX_ROWS, c->seq_len);
    for (int b = 0; b < N_SEQ; b++) {
        session_open(&seq[b], &e, c->seq_len);
        ptrs[b] = &seq[b];
        if (session_prefill(&seq[b], tokens[b], PROMPT_LENS[b], logits[b], &err)) fail_msg("%s", err.msg);
    }
    for (int i = 0; i < STEPS; i++) {
        int next[N_SEQ];
        for (int b = 0; b < N_SEQ; b++) next[b] = tokens[b][PROMPT_LENS[b] + i];
        if (session_decode_batch(ptrs, next, N_SEQ, &err)) fail_msg("%s", err.msg);
        for (int b = 0; b < N_SEQ; b++)
            memcpy(logits[b] + (size_t)(PROMPT_LENS[b] + i) * V, seq[b].logits, V * sizeof(float));
    }
    for (int b = 0; b < N_SEQ; b++) {
        assert_int_equal(session_len(&seq[b]), PROMPT_LENS[b] + STEPS);
        session_close(&seq[b]);
    }
    engine_close(&e);
}

// The largest relative logit error of run_sequences on ops / dtype against ref_forward, over
// both sequences, for a random model of config c (weights rounded by round to dtype first).
static inline double backend_vs_reference(const Config *c, const Ops *ops, DType dtype, RoundFn round) {
    Model m;
    random_model(&m, c, 21, 0.15f);
    if (round) round(m.params, m.n_params, dtype); // the reference sees the weights the backend stores
    uint64_t rng = rng_seed(22);
    int tokens[N_SEQ][MAX_LEN], V = c->vocab_size;
    float *got[N_SEQ], *ref = mallocCheck((size_t)MAX_LEN * V * sizeof(float));
    for (int b = 0; b < N_SEQ; b++) {
        for (int i = 0; i < MAX_LEN; i++) tokens[b][i] = (int)(rng_u64(&rng) % V);
        got[b] = mallocCheck((size_t)MAX_LEN * V * sizeof(float));
    }
    run_sequences(&m, ops, dtype, tokens, got);
    double worst = 0.0;
    for (int b = 0; b < N_SEQ; b++) {
        int n = PROMPT_LENS[b] + STEPS;
        ref_forward(&m, tokens[b], n, ref, round, dtype);
        double e = max_rel_error(got[b], ref, (size_t)n * V);
        worst = e > worst ? e : worst;
        free(got[b]);
    }
    free(ref);
    model_free(&m);
    return worst;
}

// Feed tokens[from .. to) to a paged sequence in forwards of up to `chunk` rows; logits
// (to - from, V) in host memory.
static inline void paged_feed(Engine *e, PagedSeq *s, const int *tokens, int from, int to, int chunk, float *logits) {
    for (int p = from; p < to; p += chunk) {
        int R = to - p < chunk ? to - p : chunk, pos[R];
        KVCache *caches[R];
        for (int r = 0; r < R; r++) {
            caches[r] = &s->cache;
            pos[r] = p + r;
        }
        if (paged_seq_prepare(s, p, R)) fail_msg("paged_seq_prepare refused %d positions at %d", R, p);
        engine_forward(e, caches, tokens + p, pos, R, logits + (size_t)(p - from) * e->config.vocab_size, 1);
        assert_int_equal(paged_seq_len(s), p + R);
    }
}

// A contiguous session's logits of every position of tokens (n): (n, V), the caller frees them.
static inline float *session_logits(Engine *e, const int *tokens, int n) {
    Session s;
    Error err;
    float *logits = mallocCheck((size_t)n * e->config.vocab_size * sizeof(float));
    session_open(&s, e, n);
    if (session_prefill(&s, tokens, n, logits, &err)) fail_msg("%s", err.msg);
    session_close(&s);
    return logits;
}
