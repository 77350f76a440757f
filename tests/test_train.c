// test_train.c: the trainer.
//  - every layer's backward (kernels.h's: matmul, RMSNorm, RoPE of whole heads and of MLA's
//    decoupled part, SwiGLU, attention MHA / GQA / MQA with and without window + sinks,
//    cross-entropy; test_kernels.c compares each with its reference) and the whole model's
//    (MHA, GQA, MQA, MLA (every new tensor: wkv_a, wkv_b), CLA (kv_share 2 and 3, sets of
//    uneven size), MLA + CLA;
//    tied and untied head; window + sinks) against central finite differences, checked twice:
//    element by element on sampled entries (|analytic - numeric| <= 2e-3 + 2e-2 |numeric|)
//    and along the gradient direction, where the difference quotient must equal |grad|
//    to 1e-2 relative;
//  - the training forward's logits equal model_forward_full's (max relative error 1e-4),
//    also for MLA (the engine's absorbed path vs the trainer's naive form), CLA, MLA + CLA;
//  - a tiny model overfits a short text to a loss below 0.05 nats / token;
//  - three AdamW steps equal the update written out in double (bias correction, decay on
//    matrices only, global-norm clipping);
//  - per-token loss weights: the weighted cross-entropy's and the weighted model loss's
//    gradients against finite differences;
//  - batches follow their step's phase: text rows are BOS + windows of the stream with text
//    targets everywhere; passkey rows answer with their needle's number within the gap
//    limit, answer targets on the answer only; copy rows (in the copy phase's shorter
//    shape) hold one digit string twice, answer targets exactly on the second copy after
//    its first token; each kind's weights sum to 1; reproducible from (seed, step, micro);
//  - the schedule: phase boundaries, shapes, the widening gap, bad schedules refused;
//  - the prefix-matching score of uniform attention is the known 1 / (position + 1) mean;
//  - the batched passkey scorer gives the engine evaluator's score;
//  - the same seed gives bit-identical weights (1 thread); a run stopped at a checkpoint
//    and resumed gives bit-identical weights to an uninterrupted one;
//  - gradients with 2 threads equal those with 1 (max relative error 1e-5): no races;
//  - the warmup + cosine schedule, and checkpoints of another key or damaged are refused.
// The tests run on one thread: their models are tiny.
// Run: make build/tests/test_train && ./build/tests/test_train
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <stdint.h>
#include <string.h>
#include <unistd.h>

#include "corpus.h"
#include "kernels.h"
#include "model.h"
#include "session.h"
#include "test_util.h"
#include "tokenizer.h"
#include "trainer.h"
#include "zoo.h"

// --- finite differences ----------------------------------------------------------------------

typedef double (*LossFn)(void *ctx);

#define FD_STEP 1e-2
#define FD_RTOL 2e-2
#define FD_ATOL 2e-3
#define FD_DIR_RTOL 1e-2
#define FD_SAMPLES 24

static double central_difference(LossFn f, void *ctx, float *p, size_t i, double h) {
    float saved = p[i];
    p[i] = saved + (float)h;
    double up = f(ctx);
    p[i] = saved - (float)h;
    double down = f(ctx);
    p[i] = saved;
    return (up - down) / (2.0 * h);
}

// Check grad (n) of f with respect to param (n): sampled elements, then the gradient direction.
static void check_gradient(const char *what, LossFn f, void *ctx, float *param, const float *grad, size_t n) {
    uint64_t rng = rng_seed(n * 31 + 7);
    for (int s = 0; s < FD_SAMPLES && s < (int)n; s++) {
        size_t i = n <= FD_SAMPLES ? (size_t)s : rng_u64(&rng) % n;
        double numeric = central_difference(f, ctx, param, i, FD_STEP);
        double err = fabs(grad[i] - numeric);
        if (!(err <= FD_ATOL + FD_RTOL * fabs(numeric)))
            fail_msg("%s[%zu]: analytic %.6g, finite difference %.6g", what, i, grad[i], numeric);
    }
    double norm2 = 0.0;
    for (size_t i = 0; i < n; i++) norm2 += (double)grad[i] * grad[i];
    double norm = sqrt(norm2);
    if (norm < 1e-6) fail_msg("%s: gradient is zero; the check would prove nothing", what);
    float *saved = mallocCheck(n * sizeof(float));
    memcpy(saved, param, n * sizeof(float));
    double h = FD_STEP / 4;
    for (size_t i = 0; i < n; i++) param[i] = saved[i] + (float)(h * grad[i] / norm);
    double up = f(ctx);
    for (size_t i = 0; i < n; i++) param[i] = saved[i] - (float)(h * grad[i] / norm);
    double down = f(ctx);
    memcpy(param, saved, n * sizeof(float));
    free(saved);
    double directional = (up - down) / (2.0 * h);
    if (!(fabs(directional - norm) <= FD_DIR_RTOL * norm))
        fail_msg("%s: derivative along the gradient %.6g, |gradient| %.6g", what, directional, norm);
}

static float *random_floats(size_t n, float std, uint64_t seed) {
    float *x = mallocCheck(n * sizeof(float));
    uint64_t rng = rng_seed(seed);
    fill_normal(x, n, std, &rng);
    return x;
}

// sum_i w_i y_i in double: a scalar loss whose d/dy is w.
static double weighted_sum(const float *y, const float *w, size_t n) {
    double s = 0.0;
    for (size_t i = 0; i < n; i++) s += (double)y[i] * w[i];
    return s;
}

// --- layer checks ------------------------------------------------------------------------

typedef struct {
    int N, n, d;
    float *x, *w, *y, *wy;
} MatmulCase;

static double matmul_loss(void *ctx) {
    MatmulCase *m = ctx;
    matmul(m->y, m->x, m->w, m->N, m->n, m->d);
    return weighted_sum(m->y, m->wy, (size_t)m->N * m->d);
}

static void test_matmul_backward(void **state) {
    (void)state;
    MatmulCase m = {6, 10, 7, random_floats(60, 1, 1), random_floats(70, 1, 2), random_floats(42, 1, 3),
                    random_floats(42, 1, 4)};
    float *dx = callocCheck(60, sizeof(float)), *dw = callocCheck(70, sizeof(float));
    matmul_backward(dx, dw, m.wy, m.x, m.w, m.N, m.n, m.d);
    check_gradient("matmul dx", matmul_loss, &m, m.x, dx, 60);
    check_gradient("matmul dw", matmul_loss, &m, m.w, dw, 70);
    free(m.x), free(m.w), free(m.y), free(m.wy), free(dx), free(dw);
}

typedef struct {
    int N, C;
    float *x, *w, *y, *wy;
} NormCase;

static double rmsnorm_loss(void *ctx) {
    NormCase *c = ctx;
    rmsnorm(c->y, c->x, c->w, c->N, c->C, 1e-5f);
    return weighted_sum(c->y, c->wy, (size_t)c->N * c->C);
}

static void test_rmsnorm_backward(void **state) {
    (void)state;
    int N = 20, C = 12; // 20 rows: more than one reduction chunk holds rows
    NormCase c = {N, C, random_floats(N * C, 1, 5), random_floats(C, 0.3f, 6), random_floats(N * C, 1, 7),
                  random_floats(N * C, 1, 8)};
    for (int i = 0; i < C; i++) c.w[i] += 1.0f;
    float *dx = random_floats(N * C, 1, 9), *dx0 = mallocCheck(N * C * sizeof(float));
    float *dw = callocCheck(C, sizeof(float));
    memcpy(dx0, dx, N * C * sizeof(float)); // backward adds: start from non-zero
    rmsnorm_backward(dx, dw, c.wy, c.x, c.w, N, C, 1e-5f);
    for (int i = 0; i < N * C; i++) dx[i] -= dx0[i];
    check_gradient("rmsnorm dx", rmsnorm_loss, &c, c.x, dx, N * C);
    check_gradient("rmsnorm dw", rmsnorm_loss, &c, c.w, dw, C);
    free(c.x), free(c.w), free(c.y), free(c.wy), free(dx), free(dx0), free(dw);
}

typedef struct {
    int N, T, heads, hd, rot;
    float *x, *y, *wy, *inv_freq;
    float mscale;
} RopeCase;

static double rope_loss(void *ctx) {
    RopeCase *c = ctx;
    size_t n = (size_t)c->N * c->heads * c->hd;
    memcpy(c->y, c->x, n * sizeof(float));
    rope_forward(c->y, c->N, c->T, c->heads, c->hd, c->rot, c->inv_freq, c->mscale);
    return weighted_sum(c->y, c->wy, n);
}

// Whole heads, then MLA's decoupled part (the last rot of each head's dims).
static void test_rope_backward(void **state) {
    (void)state;
    RopeConfig rc = {10000.0f, ROPE_YARN, 4.0f, 8, 32.0f, 1.0f}; // YaRN: mscale != 1 is covered
    for (int rot = 8; rot >= 4; rot -= 4) {
        RopeCase c = {12, 6, 3, 8, rot, random_floats(288, 1, 10), mallocCheck(288 * sizeof(float)),
                      random_floats(288, 1, 11), mallocCheck(4 * sizeof(float)), 0};
        c.mscale = rope_frequencies(c.inv_freq, c.rot, &rc);
        assert_true(c.mscale > 1.01f);
        float *dx = mallocCheck(288 * sizeof(float));
        memcpy(dx, c.wy, 288 * sizeof(float));
        rope_backward(dx, c.N, c.T, c.heads, c.hd, c.rot, c.inv_freq, c.mscale);
        check_gradient(rot == c.hd ? "rope dx" : "partial rope dx", rope_loss, &c, c.x, dx, 288);
        free(c.x), free(c.y), free(c.wy), free(c.inv_freq), free(dx);
    }
}

typedef struct {
    size_t n;
    float *gate, *up, *y, *wy;
} SwigluCase;

static double swiglu_loss(void *ctx) {
    SwigluCase *c = ctx;
    swiglu(c->y, c->gate, c->up, 1, (int)c->n);
    return weighted_sum(c->y, c->wy, c->n);
}

static void test_swiglu_backward(void **state) {
    (void)state;
    SwigluCase c = {50, random_floats(50, 2, 12), random_floats(50, 1, 13), mallocCheck(200), random_floats(50, 1, 14)};
    float *dg = mallocCheck(200), *du = mallocCheck(200);
    swiglu_backward(dg, du, c.wy, c.gate, c.up, c.n);
    check_gradient("swiglu d gate", swiglu_loss, &c, c.gate, dg, c.n);
    check_gradient("swiglu d up", swiglu_loss, &c, c.up, du, c.n);
    free(c.gate), free(c.up), free(c.y), free(c.wy), free(dg), free(du);
}

typedef struct {
    int B, T;
    AttentionShape s;
    float *q, *k, *v, *out, *probs, *wy;
} AttentionCase;

static double attention_loss(void *ctx) {
    AttentionCase *c = ctx;
    attention_forward(c->out, c->probs, c->q, c->k, c->v, c->B, c->T, &c->s);
    return weighted_sum(c->out, c->wy, (size_t)c->B * c->T * c->s.n_heads * c->s.head_dim);
}

static void check_attention(int n_heads, int n_kv_heads, int window, int n_sink) {
    int B = 2, T = 7, hd = 4;
    size_t nq = (size_t)B * T * n_heads * hd, nkv = (size_t)B * T * n_kv_heads * hd;
    AttentionCase c = {B, T, {n_heads, n_kv_heads, hd, window, n_sink, 0.5f, .value_dim = hd},
                       random_floats(nq, 1, 15), random_floats(nkv, 1, 16), random_floats(nkv, 1, 17),
                       mallocCheck(nq * 4), mallocCheck((size_t)B * n_heads * T * T * 4), random_floats(nq, 1, 18)};
    float *dq = mallocCheck(nq * 4), *dk = mallocCheck(nkv * 4), *dv = mallocCheck(nkv * 4);
    attention_loss(&c);
    attention_backward(dq, dk, dv, c.wy, c.probs, c.q, c.k, c.v, B, T, &c.s);
    char what[64];
    snprintf(what, sizeof what, "attention %d/%d heads window %d sinks %d: dq", n_heads, n_kv_heads, window, n_sink);
    check_gradient(what, attention_loss, &c, c.q, dq, nq);
    what[strlen(what) - 1] = 'k';
    check_gradient(what, attention_loss, &c, c.k, dk, nkv);
    what[strlen(what) - 1] = 'v';
    check_gradient(what, attention_loss, &c, c.v, dv, nkv);
    free(c.q), free(c.k), free(c.v), free(c.out), free(c.probs), free(c.wy), free(dq), free(dk), free(dv);
}

static void test_attention_backward(void **state) {
    (void)state;
    check_attention(4, 4, 0, 0); // MHA
    check_attention(4, 2, 0, 0); // GQA
    check_attention(4, 1, 0, 0); // MQA
    check_attention(4, 2, 3, 1); // GQA, sliding window with a sink
}

typedef struct {
    int N, V;
    float *logits, *scratch, *row_loss;
    int *targets;
    const float *weights; // NULL: the plain summed loss
} XentCase;

static double xent_loss(void *ctx) {
    XentCase *c = ctx;
    memcpy(c->scratch, c->logits, (size_t)c->N * c->V * sizeof(float));
    double total = crossentropy_forward(c->scratch, c->row_loss, c->targets, c->N, c->V);
    return c->weights ? weighted_sum(c->row_loss, c->weights, (size_t)c->N) : total;
}

// Unweighted, then with per-row loss weights (the gradient of sum_r w_r loss_r; w_r = 0
// rows get none).
static void test_crossentropy_backward(void **state) {
    (void)state;
    int N = 5, V = 9, targets[5] = {3, 0, -1, 8, 3};
    float weights[5] = {0.5f, 2.0f, 1.0f, 0.0f, 0.25f};
    XentCase c = {N, V, random_floats(N * V, 2, 19), mallocCheck(N * V * 4), mallocCheck(N * 4), targets, NULL};
    double loss = xent_loss(&c);
    double want = 0.0, want_weighted = 0.0; // the loss from its definition, in double
    for (int r = 0; r < N; r++) {
        if (targets[r] < 0) continue;
        double sum = 0.0;
        for (int i = 0; i < V; i++) sum += exp(c.logits[r * V + i]);
        want += log(sum) - c.logits[r * V + targets[r]];
        want_weighted += weights[r] * (log(sum) - c.logits[r * V + targets[r]]);
    }
    assert_true(fabs(loss - want) <= 1e-5 * want);
    float *grad = mallocCheck(N * V * 4);
    for (int weighted = 0; weighted < 2; weighted++) {
        c.weights = weighted ? weights : NULL;
        loss = xent_loss(&c);
        if (weighted) assert_true(fabs(loss - want_weighted) <= 1e-5 * want_weighted);
        crossentropy_backward(c.scratch, targets, c.weights, N, V, 1.0f);
        memcpy(grad, c.scratch, N * V * 4);
        for (int i = 0; i < V; i++) assert_true(grad[2 * V + i] == 0.0f); // no target, no gradient
        if (weighted)
            for (int i = 0; i < V; i++) assert_true(grad[3 * V + i] == 0.0f); // weight 0, no gradient
        check_gradient(weighted ? "weighted cross-entropy d logits" : "cross-entropy d logits", xent_loss, &c,
                       c.logits, grad, N * V);
    }
    free(c.logits), free(c.scratch), free(c.row_loss), free(grad);
}

// --- whole model -----------------------------------------------------------------------------

static Config tiny_config(int n_heads, int n_kv_heads, int tied, int window, int n_sink) {
    Config c = config_default();
    c.dim = 16;
    c.hidden_dim = 24;
    c.n_layers = 2;
    c.n_heads = n_heads;
    c.n_kv_heads = n_kv_heads;
    c.head_dim = 4;
    c.vocab_size = 23;
    c.seq_len = 16;
    c.tied_embeddings = tied;
    c.window = window;
    c.n_sink = n_sink;
    return c;
}

static TrainConfig tiny_train_config(int B, int T) {
    TrainConfig tc = train_config_default();
    tc.batch_size = B;
    tc.seq_len = T;
    tc.init_std = 0.3f; // far from uniform logits, so every path carries gradient
    return tc;
}

typedef struct {
    Trainer *t;
    const int *inputs, *targets;
    int B, T;
    const float *weights; // per-row loss weights; NULL: the plain summed loss
} ModelCase;

static double model_loss(void *ctx) {
    ModelCase *m = ctx;
    double total = trainer_forward(m->t, m->inputs, m->targets, m->B, m->T);
    return m->weights ? weighted_sum(m->t->acts.row_loss, m->weights, (size_t)m->B * m->T) : total;
}

// weighted: rows get the loss weights of a batch with text and answer targets (each kind's
// weights summing to 1), and only the whole gradient is checked.
static void check_config_gradients(Config c, int weighted) {
    int B = 2, T = 8, n_heads = c.n_heads, n_kv_heads = c.n_kv_heads, tied = c.tied_embeddings, window = c.window;
    TrainConfig tc = tiny_train_config(B, T);
    Trainer t;
    trainer_init(&t, &c, &tc);
    uint64_t rng = rng_seed(42);
    for (int i = 0; i < c.n_layers * c.dim; i++) { // gains away from 1
        t.model.weights.rms_att[i] = 1.0f + 0.3f * rng_normal(&rng);
        t.model.weights.rms_ffn[i] = 1.0f + 0.3f * rng_normal(&rng);
    }
    int inputs[16], targets[16];
    for (int i = 0; i < B * T; i++) {
        inputs[i] = (int)(rng_u64(&rng) % c.vocab_size);
        targets[i] = i == 5 ? -1 : (int)(rng_u64(&rng) % c.vocab_size);
    }
    float weights[16];
    for (int i = 0; i < B * T; i++) weights[i] = i < T ? 1.0f / (T - 1) : i >= 2 * T - 3 ? 1.0f / 3 : 0.0f;
    ModelCase m = {&t, inputs, targets, B, T, weighted ? weights : NULL};
    trainer_zero_grad(&t);
    model_loss(&m);
    trainer_backward(&t, m.weights, 1.0f);
    // Each tensor on its own (element samples and its own gradient direction), then all at once.
    const Weights *w = &t.model.weights, *g = &t.grad;
    ModelDims d = model_dims(&c);
    size_t C = c.dim, H = c.hidden_dim, L = c.n_layers, V = c.vocab_size, Lkv = d.L_kv;
    struct { const char *name; float *p; const float *g; size_t n; } tensors[] = {
        {"token_embedding", w->token_embedding, g->token_embedding, V * C}, {"rms_att", w->rms_att, g->rms_att, L * C},
        {"wq", w->wq, g->wq, L * d.q * C}, {"wk", w->wk, g->wk, Lkv * d.kv * C}, {"wv", w->wv, g->wv, Lkv * d.kv * C},
        {"wkv_a", w->wkv_a, g->wkv_a, Lkv * d.latent * C},
        {"wkv_b", w->wkv_b, g->wkv_b, Lkv * d.kv_b * c.kv_lora_rank},
        {"wo", w->wo, g->wo, L * C * d.o}, {"rms_ffn", w->rms_ffn, g->rms_ffn, L * C}, {"w1", w->w1, g->w1, L * H * C},
        {"w2", w->w2, g->w2, L * C * H}, {"w3", w->w3, g->w3, L * H * C}, {"rms_final", w->rms_final, g->rms_final, C},
        {"wcls", w->wcls, g->wcls, tied ? 0 : V * C}};
    char what[128];
    for (size_t i = 0; i < sizeof tensors / sizeof tensors[0] && !weighted; i++) {
        if (tensors[i].n == 0) continue;
        snprintf(what, sizeof what, "model %d/%d heads mla %d/%d kv_share %d tied %d window %d: %s", n_heads,
                 n_kv_heads, c.kv_lora_rank, c.rope_dim, c.kv_share, tied, window, tensors[i].name);
        check_gradient(what, model_loss, &m, tensors[i].p, tensors[i].g, tensors[i].n);
    }
    snprintf(what, sizeof what, "model %d/%d heads mla %d/%d kv_share %d tied %d window %d%s: all", n_heads,
             n_kv_heads, c.kv_lora_rank, c.rope_dim, c.kv_share, tied, window, weighted ? " weighted" : "");
    check_gradient(what, model_loss, &m, t.model.params, t.grads, t.model.n_params);
    trainer_free(&t);
}

static void check_model_gradients(int n_heads, int n_kv_heads, int tied, int window, int n_sink, int weighted) {
    check_config_gradients(tiny_config(n_heads, n_kv_heads, tied, window, n_sink), weighted);
}

// MLA: d_c 8, d_r 2 (tiny_config's head_dim is 4); CLA: kv_share layers per set of keys and values.
static Config tiny_mla_config(int tied, int window, int n_sink) {
    Config c = tiny_config(4, 4, tied, window, n_sink);
    c.kv_lora_rank = 8;
    c.rope_dim = 2;
    return c;
}

static Config with_layers(Config c, int n_layers, int kv_share) {
    c.n_layers = n_layers;
    c.kv_share = kv_share;
    return c;
}

static void test_model_gradients_mha(void **state) {
    (void)state;
    check_model_gradients(4, 4, 0, 0, 0, 0);
}

static void test_model_gradients_gqa(void **state) {
    (void)state;
    check_model_gradients(4, 2, 1, 0, 0, 0);
    check_model_gradients(4, 2, 0, 3, 1, 0);
    check_model_gradients(4, 2, 1, 0, 0, 1);
}

static void test_model_gradients_mqa(void **state) {
    (void)state;
    check_model_gradients(4, 1, 1, 0, 0, 0);
}

static void test_model_gradients_mla(void **state) {
    (void)state;
    check_config_gradients(tiny_mla_config(0, 0, 0), 0);
    check_config_gradients(tiny_mla_config(1, 3, 1), 0);
    check_config_gradients(with_layers(tiny_mla_config(1, 0, 0), 3, 2), 0); // MLA + CLA
}

static void test_model_gradients_cla(void **state) {
    (void)state;
    check_config_gradients(with_layers(tiny_config(4, 2, 1, 0, 0), 2, 2), 0);
    check_config_gradients(with_layers(tiny_config(4, 1, 0, 3, 1), 3, 2), 0); // sets {0, 1}, {2}
    check_config_gradients(with_layers(tiny_config(4, 2, 1, 0, 0), 3, 3), 1);
}

// The trainer's logits equal the engine's (model_forward_full: MLA on its absorbed path).
static void check_forward_matches_model(Config c) {
    int T = 12;
    TrainConfig tc = tiny_train_config(2, T);
    Trainer t;
    trainer_init(&t, &c, &tc);
    int tokens[24];
    uint64_t rng = rng_seed(3);
    for (int i = 0; i < 24; i++) tokens[i] = (int)(rng_u64(&rng) % c.vocab_size);
    trainer_forward(&t, tokens, NULL, 2, T);
    float *want = mallocCheck((size_t)T * c.vocab_size * sizeof(float));
    for (int b = 0; b < 2; b++) {
        model_forward_full(&t.model, tokens + b * T, T, want, 1);
        double err = max_rel_error(t.acts.logits + (size_t)b * T * c.vocab_size, want, (size_t)T * c.vocab_size);
        if (!(err <= 1e-4))
            fail_msg("mla %d kv_share %d sequence %d: training forward vs model_forward_full: %.3g", c.kv_lora_rank,
                     c.kv_share, b, err);
    }
    free(want);
    trainer_free(&t);
}

static void test_forward_matches_model(void **state) {
    (void)state;
    Config c = tiny_config(4, 2, 0, 5, 1);
    c.rope.scaling = ROPE_YARN; // mscale != 1 on both sides
    c.rope.factor = 2.0f;
    c.rope.orig_ctx = 8;
    check_forward_matches_model(c);
    check_forward_matches_model(tiny_mla_config(0, 5, 1));
    check_forward_matches_model(with_layers(tiny_config(4, 2, 1, 0, 0), 3, 2));
    check_forward_matches_model(with_layers(tiny_mla_config(1, 0, 0), 3, 2));
}

// --- training ------------------------------------------------------------------------------

static const char TEXT[] =
    "In the beginning God created the heaven and the earth. And the earth was without form, and void; "
    "and darkness was upon the face of the deep. And the Spirit of God moved upon the face of the waters.";

typedef struct {
    Tokenizer tok;
    int *tokens;
    size_t n;
    TrainData data;
} SmallData;

static void small_data(SmallData *s, int vocab_size) {
    Error err;
    if (tokenizer_train_bpe(&s->tok, (const unsigned char *)TEXT, strlen(TEXT), vocab_size, &err))
        fail_msg("%s", err.msg);
    s->tokens = mallocCheck(tokenizer_max_tokens(strlen(TEXT)) * sizeof(int));
    s->n = tokenizer_encode(&s->tok, (const unsigned char *)TEXT, strlen(TEXT), false, false, s->tokens);
    s->data = (TrainData){s->tokens, s->n, s->tokens, s->n, &s->tok};
}

static void small_data_free(SmallData *s) {
    tokenizer_free(&s->tok);
    free(s->tokens);
}

static Config small_model_config(const Tokenizer *tok) {
    Config c = tiny_config(4, 2, 1, 0, 0);
    c.dim = 32;
    c.hidden_dim = 64;
    c.head_dim = 8;
    c.vocab_size = tok->vocab_size;
    c.seq_len = 128;
    return c;
}

static void train_steps(Trainer *t, const TrainData *d, int steps, int stop_at, const char *ckpt) {
    TrainRun run = {NULL, NULL, ckpt, 0, 1234, stop_at};
    TrainResult res;
    Error err;
    t->tc.steps = steps;
    if (train_run(t, d, &run, &res, &err)) fail_msg("train_run: %s", err.msg);
}

static void test_overfits_short_text(void **state) {
    (void)state;
    SmallData s;
    small_data(&s, 300);
    Config c = small_model_config(&s.tok);
    assert_true(s.n <= (size_t)c.seq_len);
    TrainConfig tc = train_config_default();
    tc.batch_size = 2;
    tc.seq_len = (int)s.n; // every sequence is BOS + the whole text: nothing is ambiguous
    tc.steps = 300;
    tc.warmup_steps = 20;
    tc.lr = 1e-2f;
    tc.weight_decay = 0.0f;
    tc.eval_every = 300;
    Trainer t;
    trainer_init(&t, &c, &tc);
    train_steps(&t, &s.data, tc.steps, 0, NULL);
    double bpb, loss = train_evaluate(&t, &s.data, 0, &bpb);
    if (!(loss < 0.05)) fail_msg("loss after %d steps on %zu tokens: %.4f nats / token", tc.steps, s.n, loss);
    trainer_free(&t);
    small_data_free(&s);
}

// Filler: TEXT ten times; the tokenizer also learns the passkey phrases, so needles are short.
static void passkey_data(SmallData *s) {
    static const char PHRASES[] = "The number of the key is 12345. Keep it in thine heart, and forget not the "
                                  "number.\nWhat is the number of the key? The number of the key is 67890.\n";
    size_t len = 10 * strlen(TEXT);
    char *text = mallocCheck(len + sizeof PHRASES);
    for (int i = 0; i < 10; i++) memcpy(text + i * strlen(TEXT), TEXT, strlen(TEXT));
    memcpy(text + len, PHRASES, sizeof PHRASES);
    Error err;
    if (tokenizer_train_bpe(&s->tok, (const unsigned char *)text, strlen(text), 360, &err)) fail_msg("%s", err.msg);
    s->tokens = mallocCheck(tokenizer_max_tokens(len) * sizeof(int));
    s->n = tokenizer_encode(&s->tok, (const unsigned char *)text, len, false, false, s->tokens);
    s->data = (TrainData){s->tokens, s->n, s->tokens, s->n, &s->tok};
    free(text);
}

static int has_digit_piece(const Tokenizer *tok, int token) {
    if (token < 0) return 0; // a row's missing last target
    size_t len;
    const unsigned char *p = tokenizer_piece(tok, -1, token, &len);
    for (size_t i = 0; i < len; i++)
        if (p[i] >= '0' && p[i] <= '9') return 1;
    return 0;
}

// Row b of a batch as its whole sequence (inputs and the last target, -1 when it has none);
// checks that every target is the next input.
static void row_sequence(const Batch *bt, int b, int *seq) {
    const int *in = bt->inputs + (size_t)b * bt->T, *tg = bt->targets + (size_t)b * bt->T;
    memcpy(seq, in, (size_t)bt->T * sizeof(int));
    seq[bt->T] = tg[bt->T - 1];
    for (int i = 0; i + 1 < bt->T; i++)
        if (tg[i] >= 0) assert_int_equal(tg[i], in[i + 1]);
    for (int i = 0; i < bt->T; i++) assert_true((tg[i] >= 0) == (bt->kind[(size_t)b * bt->T + i] != TARGET_NONE));
}

// Each kind's weights are 1 / its count: each kind sums to 1 (its own mean).
static void check_weights(const Batch *bt) {
    double sum[3] = {0};
    int count[3] = {0};
    for (int i = 0; i < bt->B * bt->T; i++) {
        sum[bt->kind[i]] += bt->weights[i];
        count[bt->kind[i]]++;
    }
    assert_int_equal(count[TARGET_TEXT], bt->n_text);
    assert_int_equal(count[TARGET_ANSWER], bt->n_answer);
    assert_true(sum[TARGET_NONE] == 0.0);
    if (bt->n_text) assert_float_equal(sum[TARGET_TEXT], 1.0, 1e-5);
    if (bt->n_answer) assert_float_equal(sum[TARGET_ANSWER], 1.0, 1e-5);
}

// A text row: BOS, a window of the stream, a text target at every position.
static void check_text_row(const SmallData *s, const Batch *bt, int b, const int *seq) {
    assert_int_equal(seq[0], s->tok.bos_id);
    for (int i = 0; i < bt->T; i++) assert_int_equal(bt->kind[(size_t)b * bt->T + i], TARGET_TEXT);
    int found = 0;
    for (size_t o = 0; o + bt->T <= s->n && !found; o++) found = memcmp(s->tokens + o, seq + 1, (size_t)bt->T * sizeof(int)) == 0;
    assert_true(found);
}

// A passkey row: the needle's number answers the question; answer targets on the answer's
// tokens; at most max_gap filler tokens between the needle and the question. With filler
// text, text targets on all the rest but the needle (whose tokens exactly get none).
static void check_passkey_row(const SmallData *s, const Batch *bt, int b, const int *seq, int max_gap, int filler) {
    size_t len;
    char *text = (char *)tokenizer_decode(&s->tok, seq, (size_t)bt->T + 1, &len);
    char *needle = strstr(text, "The number of the key is "), *question = strstr(text, "\nWhat is the number of the key? The number of the key is ");
    assert_non_null(needle);
    assert_non_null(question);
    assert_memory_equal(needle + 24, question + 56, 6); // " 48213" after "is", as in the needle
    char *needle_end = strstr(needle, "forget not the number.\n") + 23;
    int ids[512];
    size_t between = tokenizer_encode(&s->tok, (const unsigned char *)needle_end, (size_t)(question - needle_end), false, false, ids);
    assert_true((int)between <= max_gap);
    char answer[16];
    snprintf(answer, sizeof answer, " %.5s", question + 57);
    int answer_len = (int)tokenizer_encode(&s->tok, (const unsigned char *)answer, strlen(answer), false, false, ids);
    assert_memory_equal(seq + bt->T + 1 - answer_len, ids, (size_t)answer_len * sizeof(int));
    const unsigned char *kind = bt->kind + (size_t)b * bt->T;
    int none_from = -1, none_to = -1; // the run of targets without loss, with filler text
    for (int i = 0; i < bt->T; i++) {
        if (i >= bt->T - answer_len) assert_int_equal(kind[i], TARGET_ANSWER);
        else if (!filler) assert_int_equal(kind[i], TARGET_NONE);
        else if (kind[i] == TARGET_NONE) {
            if (none_from < 0) none_from = i;
            assert_true(none_to < 0 || none_to == i); // one run
            none_to = i + 1;
        } else assert_int_equal(kind[i], TARGET_TEXT);
    }
    if (filler) { // the run predicts exactly the needle
        char *none = (char *)tokenizer_decode(&s->tok, seq + none_from + 1, (size_t)(none_to - none_from), &len);
        assert_int_equal(needle_end - needle, (long)strlen(none));
        assert_memory_equal(none, needle, strlen(none));
        free(none);
    }
    free(text);
}

// A copy row: its digit tokens form two equal runs; the answer targets predict exactly the
// second run's tokens after its first. With filler text, the targets that predict the first
// run and the second's first token have none, all others are text.
static void check_copy_row(const SmallData *s, const Batch *bt, int b, const int *seq, int filler) {
    int runs[2][2], n_runs = 0; // [start, end) of each copy: " " + digits, or " d" + digits
    for (int i = 1; i < bt->T; i++) {
        size_t len;
        const unsigned char *piece = tokenizer_piece(&s->tok, -1, seq[i], &len);
        int starts = piece[0] == ' ' && (len == 1 ? has_digit_piece(&s->tok, seq[i + 1]) : has_digit_piece(&s->tok, seq[i]));
        if (!starts) continue;
        int end = len == 1 ? i + 2 : i + 1;
        while (end < bt->T + 1 && seq[end] >= 0 && has_digit_piece(&s->tok, seq[end]) &&
               tokenizer_piece(&s->tok, -1, seq[end], &len)[0] != ' ')
            end++;
        assert_true(n_runs < 2);
        runs[n_runs][0] = i;
        runs[n_runs][1] = end;
        n_runs++;
    }
    assert_int_equal(n_runs, 2);
    int len = runs[0][1] - runs[0][0];
    assert_int_equal(runs[1][1] - runs[1][0], len);
    assert_memory_equal(seq + runs[0][0], seq + runs[1][0], (size_t)len * sizeof(int));
    for (int i = 0; i < bt->T; i++) {
        int predicts = i + 1; // target i is token i + 1
        int in_first = predicts >= runs[0][0] && predicts < runs[0][1];
        int want = predicts > runs[1][0] && predicts < runs[1][1] ? TARGET_ANSWER
                   : !filler || in_first || predicts == runs[1][0] ? TARGET_NONE
                                                                   : TARGET_TEXT;
        assert_int_equal(bt->kind[(size_t)b * bt->T + i], want);
    }
}

// Batches follow the phase of their step: copy rows in the copy phase's shorter shape,
// passkey rows with their gap limit, text rows, and the filler's text targets where the phase
// asks for them; loss weights are each kind's mean; a pure function of (seed, step, micro).
static void test_sample_batch(void **state) {
    (void)state;
    SmallData s;
    passkey_data(&s);
    TrainConfig tc = train_config_default();
    tc.batch_size = 6;
    tc.seq_len = passkey_min_len(&s.tok) + 40;
    tc.steps = 40;
    tc.n_phases = 4;
    tc.phases[0] = (TrainPhase){.steps = 10, .seq_len = tc.seq_len / 2, .copy_frac = 1.0f};
    tc.phases[1] = (TrainPhase){.steps = 10, .passkey_frac = 1.0f, .gap_from = 3};
    tc.phases[2] = (TrainPhase){.steps = 10, .copy_frac = 0.3f, .passkey_frac = 0.3f, .filler_text = 1};
    tc.phases[3] = (TrainPhase){0};
    Batch bt, again;
    batch_alloc(&bt, &tc);
    batch_alloc(&again, &tc);
    int seq[1024], kinds[3] = {0};
    for (int step = 0; step < 40; step += 3) {
        train_sample_batch(&s.data, &tc, step, 1, &bt);
        int phase = step / 10;
        assert_int_equal(bt.T, phase == 0 ? tc.seq_len / 2 : tc.seq_len);
        assert_int_equal(bt.B, phase == 0 ? 2 * tc.batch_size : tc.batch_size);
        check_weights(&bt);
        for (int b = 0; b < bt.B; b++) {
            row_sequence(&bt, b, seq);
            size_t len;
            char *text = (char *)tokenizer_decode(&s.tok, seq, (size_t)bt.T + (seq[bt.T] >= 0), &len);
            int kind = strstr(text, "What is the number of the key?") ? 1 : strpbrk(text, "0123456789") ? 0 : 2;
            free(text);
            kinds[kind]++;
            if (phase == 0 || phase == 1) assert_int_equal(kind, phase == 0 ? 0 : 1);
            if (phase == 3) assert_int_equal(kind, 2);
            if (kind == 0) check_copy_row(&s, &bt, b, seq, phase == 2);
            else if (kind == 1) check_passkey_row(&s, &bt, b, seq, phase == 1 ? 3 : tc.seq_len, phase == 2);
            else check_text_row(&s, &bt, b, seq);
        }
        train_sample_batch(&s.data, &tc, step, 1, &again);
        assert_memory_equal(bt.inputs, again.inputs, (size_t)bt.B * bt.T * sizeof(int));
        train_sample_batch(&s.data, &tc, step + 1, 1, &again);
        assert_memory_not_equal(bt.inputs, again.inputs, (size_t)bt.B * bt.T * sizeof(int));
    }
    for (int k = 0; k < 3; k++) assert_true(kinds[k] > 0);
    batch_free(&bt);
    batch_free(&again);
    small_data_free(&s);
}

// Phases switch at their boundaries, short-context phases keep a step's tokens, and the
// passkey gap limit widens linearly from gap_from to the whole context.
static void test_schedule(void **state) {
    (void)state;
    TrainConfig tc = train_config_default();
    Config c = tiny_config(4, 2, 1, 0, 0);
    c.seq_len = 128;
    tc.batch_size = 4;
    tc.seq_len = 128;
    tc.steps = 100;
    tc.n_phases = 3;
    tc.phases[0] = (TrainPhase){.steps = 10, .seq_len = 32, .copy_frac = 1.0f};
    tc.phases[1] = (TrainPhase){.steps = 40, .passkey_frac = 0.5f, .gap_from = 8, .gap_widen = 0.5f};
    tc.phases[2] = (TrainPhase){.copy_frac = 0.25f, .passkey_frac = 0.25f};
    char why[128];
    assert_true(train_config_validate(&tc, &c, why, sizeof why));
    struct { int step, phase, into, length; } want[] = {{0, 0, 0, 10}, {9, 0, 9, 10}, {10, 1, 0, 40},
                                                          {49, 1, 39, 40}, {50, 2, 0, 50}, {99, 2, 49, 50}};
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
        int into, length;
        const TrainPhase *p = train_phase(&tc, want[i].step, &into, &length);
        assert_ptr_equal(p, &tc.phases[want[i].phase]);
        assert_int_equal(into, want[i].into);
        assert_int_equal(length, want[i].length);
    }
    int B, T;
    train_phase_shape(&tc, &tc.phases[0], &B, &T);
    assert_int_equal(T, 32);
    assert_int_equal(B, 16);
    train_phase_shape(&tc, &tc.phases[1], &B, &T);
    assert_int_equal(T, 128);
    assert_int_equal(B, 4);
    assert_int_equal(train_passkey_gap(&tc, 5), 0);               // no limit in the copy phase
    assert_int_equal(train_passkey_gap(&tc, 10), 8);              // gap_from at the phase's start
    assert_int_equal(train_passkey_gap(&tc, 20), 8 + 120 / 2);    // halfway through the widening
    assert_int_equal(train_passkey_gap(&tc, 30), 128);            // widened over 50% of 40 steps
    assert_int_equal(train_passkey_gap(&tc, 49), 128);
    assert_int_equal(train_passkey_gap(&tc, 50), 0);
    // schedules that do not fit the run are refused
    TrainConfig bad = tc;
    bad.phases[1].steps = 95;
    assert_false(train_config_validate(&bad, &c, why, sizeof why));
    bad = tc;
    bad.phases[2].copy_frac = 0.8f;
    assert_false(train_config_validate(&bad, &c, why, sizeof why));
    bad = tc;
    bad.phases[0].seq_len = 256;
    assert_false(train_config_validate(&bad, &c, why, sizeof why));
    bad = tc;
    bad.phases[0].steps = 0;
    assert_false(train_config_validate(&bad, &c, why, sizeof why));
}

// The batched training-forward scorer gives the engine evaluator's score (same keys, same
// haystacks, answer fed back), on a model trained a little so that some answers come out.
static void test_passkey_score_matches_evaluator(void **state) {
    (void)state;
    SmallData s;
    passkey_data(&s);
    Config c = small_model_config(&s.tok);
    TrainConfig tc = train_config_default();
    tc.batch_size = 4;
    tc.seq_len = passkey_min_len(&s.tok) + 24;
    tc.steps = 40;
    tc.lr = 1e-2f;
    tc.eval_every = 40;
    tc.phases[0] = (TrainPhase){.passkey_frac = 1.0f};
    Trainer t;
    trainer_init(&t, &c, &tc);
    train_steps(&t, &s.data, tc.steps, 0, NULL);
    int n = 12;
    for (float depth = -1.0f; depth <= 1.0f; depth += 1.0f) {
        PasskeyScore batched, engine;
        Error err;
        assert_int_equal(train_passkey_score(&t, &s.tok, s.tokens, s.n, tc.seq_len, depth, n, 99, &batched, &err), 0);
        assert_int_equal(passkey_evaluate(&t.model, &s.tok, s.tokens, s.n, tc.seq_len, depth, n, 99, &engine, &err), 0);
        if (!(batched.tokens > 0.0)) fail_msg("no answer token right: the comparison would prove little");
        assert_float_equal(batched.exact, engine.exact, 1e-9);
        assert_float_equal(batched.tokens, engine.tokens, 1e-9);
    }
    Error err;
    PasskeyScore score;
    assert_int_equal(train_passkey_score(&t, &s.tok, s.tokens, s.n, tc.seq_len + 1, -1.0f, n, 99, &score, &err), -1);
    trainer_free(&t);
    small_data_free(&s);
}

// With zero query weights every head attends uniformly, so the score of a query at position
// q on its one target key is 1 / (q + 1): the exact mean is known.
static void test_prefix_matching(void **state) {
    (void)state;
    Config c = tiny_config(4, 2, 1, 0, 0);
    int T = 15, m = (T - 1) / 2;
    TrainConfig tc = tiny_train_config(3, T);
    Trainer t;
    trainer_init(&t, &c, &tc);
    memset(t.model.weights.wq, 0, (size_t)c.n_layers * c.n_heads * c.head_dim * c.dim * sizeof(float));
    double best[2], want = 0.0;
    train_prefix_matching(&t, 0, 5, 7, best);
    for (int i = 0; i < m; i++) want += 1.0 / (1 + m + i + 1) / m; // query 1 + m + i
    for (int l = 0; l < c.n_layers; l++)
        if (fabs(best[l] - want) > 1e-6) fail_msg("layer %d: uniform attention scores %.6g, want %.6g", l, best[l], want);
    trainer_free(&t);
}

static TrainConfig determinism_config(void) {
    TrainConfig tc = train_config_default();
    tc.batch_size = 3;
    tc.seq_len = 24;
    tc.grad_accum = 2;
    tc.warmup_steps = 3;
    tc.eval_every = 5;
    tc.seed = 77;
    return tc;
}

static void test_same_seed_same_weights(void **state) {
    (void)state;
    SmallData s;
    small_data(&s, 300);
    Config c = small_model_config(&s.tok);
    TrainConfig tc = determinism_config();
    Trainer a, b;
    trainer_init(&a, &c, &tc);
    trainer_init(&b, &c, &tc);
    train_steps(&a, &s.data, 12, 0, NULL);
    train_steps(&b, &s.data, 12, 0, NULL);
    assert_memory_equal(a.model.params, b.model.params, a.model.n_params * sizeof(float));
    // and a different seed gives different weights
    tc.seed++;
    Trainer other;
    trainer_init(&other, &c, &tc);
    train_steps(&other, &s.data, 12, 0, NULL);
    assert_memory_not_equal(a.model.params, other.model.params, a.model.n_params * sizeof(float));
    trainer_free(&a);
    trainer_free(&b);
    trainer_free(&other);
    small_data_free(&s);
}

static void test_resume_equals_uninterrupted(void **state) {
    (void)state;
    SmallData s;
    small_data(&s, 300);
    Config c = small_model_config(&s.tok);
    TrainConfig tc = determinism_config();
    char ckpt[64];
    snprintf(ckpt, sizeof ckpt, "/tmp/test_train_%d.ckpt", (int)getpid());
    remove(ckpt);
    Trainer whole, first, second;
    trainer_init(&whole, &c, &tc);
    train_steps(&whole, &s.data, 12, 0, NULL);
    trainer_init(&first, &c, &tc);
    train_steps(&first, &s.data, 12, 7, ckpt); // stops after step 7, leaving a checkpoint
    assert_int_equal(first.step, 7);
    trainer_init(&second, &c, &tc); // a fresh process would start like this
    train_steps(&second, &s.data, 12, 0, ckpt);
    assert_memory_equal(whole.model.params, second.model.params, whole.model.n_params * sizeof(float));
    assert_memory_equal(whole.adam_v, second.adam_v, whole.model.n_params * sizeof(float));
    assert_int_equal(second.n_log, whole.n_log); // the log survives the interruption
    for (int i = 0; i < whole.n_log; i++) assert_true(whole.log[i].val_loss == second.log[i].val_loss);

    // A checkpoint of another key, or a truncated one, is refused and leaves the trainer alone.
    Error err;
    assert_int_equal(trainer_load(&second, ckpt, 999, &err), -1);
    assert_non_null(strstr(err.msg, "another model"));
    FILE *f = fopen(ckpt, "r+b");
    assert_non_null(f);
    assert_int_equal(ftruncate(fileno(f), 100), 0);
    fclose(f);
    assert_int_equal(trainer_load(&second, ckpt, 1234, &err), -1);
    assert_memory_equal(whole.model.params, second.model.params, whole.model.n_params * sizeof(float));
    remove(ckpt);
    trainer_free(&whole);
    trainer_free(&first);
    trainer_free(&second);
    small_data_free(&s);
}

// One trainer_update against AdamW written out in double: bias-corrected moments, decay on
// matrices only, the gradient clipped to grad_clip by its global norm.
static void test_adamw_step(void **state) {
    (void)state;
    Config c = tiny_config(4, 2, 0, 0, 0);
    TrainConfig tc = tiny_train_config(1, 4);
    tc.lr = 1e-2f;
    tc.warmup_steps = 0;
    tc.weight_decay = 0.1f;
    tc.grad_clip = 0.5f;
    Trainer t;
    trainer_init(&t, &c, &tc);
    size_t n = t.model.n_params;
    double *p = mallocCheck(n * sizeof(double)), *m = callocCheck(n, sizeof(double)), *v = callocCheck(n, sizeof(double));
    for (size_t i = 0; i < n; i++) p[i] = t.model.params[i];
    uint64_t rng = rng_seed(8);
    const Weights *w = &t.model.weights;
    size_t LC = (size_t)c.n_layers * c.dim, att = w->rms_att - t.model.params, ffn = w->rms_ffn - t.model.params,
           fin = w->rms_final - t.model.params;
    for (int step = 1; step <= 3; step++) {
        fill_normal(t.grads, n, 0.05f, &rng);
        double norm = 0.0;
        for (size_t i = 0; i < n; i++) norm += (double)t.grads[i] * t.grads[i];
        norm = sqrt(norm);
        assert_true(norm > tc.grad_clip); // clipping is exercised
        double lr = train_lr(&tc, step - 1), scale = tc.grad_clip / norm;
        for (size_t i = 0; i < n; i++) {
            double g = t.grads[i] * scale;
            m[i] = 0.9 * m[i] + 0.1 * g;
            v[i] = 0.95 * v[i] + 0.05 * g * g;
            double m_hat = m[i] / (1 - pow(0.9, step)), v_hat = v[i] / (1 - pow(0.95, step));
            int gain = (i >= att && i < att + LC) || (i >= ffn && i < ffn + LC) || (i >= fin && i < fin + c.dim);
            double decay = gain ? 0.0 : 0.1; // norm gains are not decayed
            p[i] -= lr * (m_hat / (sqrt(v_hat) + 1e-8) + decay * p[i]);
        }
        float got_norm = trainer_update(&t);
        assert_float_equal(got_norm, norm, 1e-4 * norm);
    }
    for (size_t i = 0; i < n; i++)
        if (!(fabs(t.model.params[i] - p[i]) <= 1e-6 + 1e-5 * fabs(p[i])))
            fail_msg("param %zu after 3 AdamW steps: %.9g, want %.9g", i, t.model.params[i], p[i]);
    free(p), free(m), free(v);
    trainer_free(&t);
}

// The parallel paths (work above the single-thread thresholds) give the gradients of the
// serial ones: a race in a backward pass would show here.
static void test_threads_agree(void **state) {
    (void)state;
    Config c = tiny_config(4, 2, 1, 0, 0);
    c.dim = 64;
    c.hidden_dim = 128;
    c.head_dim = 16;
    c.vocab_size = 300;
    c.seq_len = 64;
    int B = 4, T = 64;
    TrainConfig tc = tiny_train_config(B, T);
    int inputs[256], targets[256];
    uint64_t rng = rng_seed(12);
    for (int i = 0; i < B * T; i++) {
        inputs[i] = (int)(rng_u64(&rng) % c.vocab_size);
        targets[i] = (int)(rng_u64(&rng) % c.vocab_size);
    }
    float *grads[2];
    for (int threads = 1; threads <= 2; threads++) {
        kernels_set_threads(threads);
        Trainer t;
        trainer_init(&t, &c, &tc);
        trainer_zero_grad(&t);
        trainer_forward(&t, inputs, targets, B, T);
        trainer_backward(&t, NULL, 1.0f / (B * T));
        grads[threads - 1] = mallocCheck(t.model.n_params * sizeof(float));
        memcpy(grads[threads - 1], t.grads, t.model.n_params * sizeof(float));
        if (threads == 2) {
            double err = max_rel_error(grads[1], grads[0], t.model.n_params);
            if (!(err <= 1e-5)) fail_msg("gradients with 2 threads vs 1: max relative error %.3g", err);
        }
        trainer_free(&t);
    }
    kernels_set_threads(1);
    free(grads[0]);
    free(grads[1]);
}

// The zoo scores retrieval where it was taught: every model with copy or passkey data in its
// schedule is scored on passkeys during training and after it (the target over the grid of
// contexts, the others at the training context), a text-only model never; only the target
// logs a 16-point training curve.
static void test_zoo_evaluations(void **state) {
    (void)state;
    const char *profiles[] = {"quick", "full"};
    for (int p = 0; p < 2; p++) {
        Zoo z;
        Error err;
        if (zoo_for_profile(&z, profiles[p], &err)) fail_msg("%s", err.msg);
        for (int i = 0; i < z.n_models; i++) {
            const ZooModel *m = &z.models[i];
            int retrieves = 0;
            for (int k = 0; k < m->train.n_phases; k++)
                retrieves |= m->train.phases[k].copy_frac > 0 || m->train.phases[k].passkey_frac > 0;
            int target = strcmp(m->role, "target") == 0;
            if (!retrieves && (m->train.eval_passkeys != 0 || m->passkey_contexts != 0))
                fail_msg("%s %s: text-only, yet scored on passkeys", profiles[p], m->name);
            if (retrieves && (m->train.eval_passkeys <= 0 || m->passkey_contexts != (target ? 3 : 1)))
                fail_msg("%s %s: taught to retrieve, not scored as declared", profiles[p], m->name);
            assert_int_equal(m->train.eval_every, m->train.steps / (target ? 16 : 4));
        }
        assert_true(zoo_with_role(&z, "target", 0)->passkey_contexts == 3);
    }
}

static void test_lr_schedule(void **state) {
    (void)state;
    TrainConfig tc = train_config_default();
    tc.steps = 100;
    tc.warmup_steps = 10;
    tc.lr = 1e-3f;
    tc.min_lr_ratio = 0.1f;
    assert_float_equal(train_lr(&tc, 0), 1e-4f, 1e-9f);
    assert_float_equal(train_lr(&tc, 9), 1e-3f, 1e-9f);
    assert_float_equal(train_lr(&tc, 10), 1e-3f, 1e-9f);
    assert_float_equal(train_lr(&tc, 99), 1e-4f, 1e-9f);
    for (int s = 10; s < 99; s++) assert_true(train_lr(&tc, s + 1) <= train_lr(&tc, s));
    assert_float_equal(train_lr(&tc, 10 + 89 / 2), 0.55e-3f, 2e-5f); // cosine midpoint
}

int main(void) {
    kernels_set_threads(1); // the models here are tiny: one thread is fastest (and deterministic)
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_matmul_backward),
        cmocka_unit_test(test_rmsnorm_backward),
        cmocka_unit_test(test_rope_backward),
        cmocka_unit_test(test_swiglu_backward),
        cmocka_unit_test(test_attention_backward),
        cmocka_unit_test(test_crossentropy_backward),
        cmocka_unit_test(test_model_gradients_mha),
        cmocka_unit_test(test_model_gradients_gqa),
        cmocka_unit_test(test_model_gradients_mqa),
        cmocka_unit_test(test_model_gradients_mla),
        cmocka_unit_test(test_model_gradients_cla),
        cmocka_unit_test(test_forward_matches_model),
        cmocka_unit_test(test_overfits_short_text),
        cmocka_unit_test(test_sample_batch),
        cmocka_unit_test(test_schedule),
        cmocka_unit_test(test_prefix_matching),
        cmocka_unit_test(test_passkey_score_matches_evaluator),
        cmocka_unit_test(test_same_seed_same_weights),
        cmocka_unit_test(test_resume_equals_uninterrupted),
        cmocka_unit_test(test_adamw_step),
        cmocka_unit_test(test_threads_agree),
        cmocka_unit_test(test_lr_schedule),
        cmocka_unit_test(test_zoo_evaluations),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
