// trainer.c: forward with saved activations, backward, AdamW, batches, validation, checkpoints
// and the training loop (see trainer.h), over the kernels of kernels.h.
#include "trainer.h"

#include <cblas.h>
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bench.h"
#include "corpus.h"
#include "csv.h"
#include "progress.h"
#include "rng.h"
#include "sampler.h"

// The compute is kernels.h's (the layers forward and backward, the cross-entropy, AdamW); what
// forks here is MLA's copying of rows between its latent, decompressed and per-head layouts,
// on one thread below this many elements, as kernels/cpu/parallel.h's PARALLEL_MIN_MACS.
#define PARALLEL_MIN_ELEMS (1 << 16)
// The evaluations during training score the same passkeys and repeated strings every time.
#define TRAIN_EVAL_SEED 4242
#define PREFIX_MATCH_SEQS 8

TrainConfig train_config_default(void) {
    TrainConfig tc;
    memset(&tc, 0, sizeof tc);
    tc.batch_size = 8;
    tc.seq_len = 128;
    tc.grad_accum = 1;
    tc.steps = 100;
    tc.warmup_steps = 10;
    tc.lr = 1e-3f;
    tc.min_lr_ratio = 0.1f;
    tc.weight_decay = 0.1f;
    tc.beta1 = 0.9f;
    tc.beta2 = 0.95f;
    tc.adam_eps = 1e-8f;
    tc.grad_clip = 1.0f;
    tc.init_std = 0.02f;
    tc.n_phases = 1; // phases[0] is all text
    tc.eval_every = 100;
    tc.seed = 1;
    return tc;
}

// Why the data schedule does not fit the run, or NULL.
static const char *phases_invalid(const TrainConfig *tc) {
    if (tc->n_phases < 1 || tc->n_phases > TRAIN_MAX_PHASES) return "n_phases not in 1 .. TRAIN_MAX_PHASES";
    long steps = 0;
    for (int i = 0; i < tc->n_phases; i++) {
        const TrainPhase *p = &tc->phases[i];
        int last = i == tc->n_phases - 1;
        if (p->steps < 0 || (!last && p->steps == 0)) return "a phase's steps must be >= 1 (the last's >= 0)";
        steps += p->steps;
        if (p->seq_len != 0 && (p->seq_len < 2 || p->seq_len > tc->seq_len))
            return "a phase's seq_len must be 0 or in 2 .. seq_len";
        if (!(p->copy_frac >= 0.0f && p->passkey_frac >= 0.0f && p->copy_frac + p->passkey_frac <= 1.0f))
            return "a phase's copy_frac and passkey_frac must be >= 0 with a sum <= 1";
        if (p->gap_from < 0 || !(p->gap_widen >= 0.0f && p->gap_widen <= 1.0f))
            return "a phase's gap_from must be >= 0 and gap_widen in [0, 1]";
    }
    return steps > tc->steps ? "the phases have more steps than the run" : NULL;
}

int train_config_validate(const TrainConfig *tc, const Config *c, char *why, size_t why_len) {
    const char *bad = NULL;
    if (tc->batch_size < 1 || tc->seq_len < 2 || tc->grad_accum < 1 || tc->steps < 1 || tc->eval_every < 1)
        bad = "batch_size, grad_accum, steps and eval_every must be >= 1, seq_len >= 2";
    else if (tc->seq_len > c->seq_len) bad = "training seq_len exceeds the model's seq_len";
    else if ((size_t)tc->batch_size * tc->seq_len > (1u << 24)) bad = "batch_size * seq_len over 2^24 tokens";
    else if (tc->warmup_steps < 0 || tc->warmup_steps > tc->steps) bad = "warmup_steps not in 0 .. steps";
    else if (!(tc->lr > 0.0f && tc->lr < 1.0f)) bad = "lr not in (0, 1)";
    else if (!(tc->min_lr_ratio >= 0.0f && tc->min_lr_ratio <= 1.0f)) bad = "min_lr_ratio not in [0, 1]";
    else if (!(tc->weight_decay >= 0.0f && tc->weight_decay < 1.0f)) bad = "weight_decay not in [0, 1)";
    else if (!(tc->beta1 >= 0.0f && tc->beta1 < 1.0f && tc->beta2 >= 0.0f && tc->beta2 < 1.0f))
        bad = "AdamW betas not in [0, 1)";
    else if (!(tc->adam_eps > 0.0f) || !(tc->grad_clip >= 0.0f) || !(tc->init_std > 0.0f))
        bad = "adam_eps and init_std must be > 0, grad_clip >= 0";
    else if (tc->eval_passkeys < 0) bad = "eval_passkeys must be >= 0";
    else if (c->global_every) bad = "the trainer's forward has one attention for every layer (no local / global layers)";
    else if (c->arch != ARCH_LLAMA || c->embed_scale || c->rope_style != ROPE_STYLE_NORM || c->ffn_act != GLU_SILU)
        bad = "the trainer trains Llamas (no Gemma 3 tensors or options: embedding scale, NEOX RoPE, GeGLU)";
    else bad = phases_invalid(tc);
    if (bad && why) snprintf(why, why_len, "%s", bad);
    return bad == NULL;
}

float train_lr(const TrainConfig *tc, int step) {
    if (step < tc->warmup_steps) return tc->lr * (float)(step + 1) / (float)tc->warmup_steps;
    int decay_steps = tc->steps - tc->warmup_steps;
    double progress = decay_steps > 1 ? (double)(step - tc->warmup_steps) / (decay_steps - 1) : 1.0;
    if (progress > 1.0) progress = 1.0;
    double floor = (double)tc->lr * tc->min_lr_ratio;
    return (float)(floor + 0.5 * (tc->lr - floor) * (1.0 + cos(M_PI * progress)));
}

const TrainPhase *train_phase(const TrainConfig *tc, int step, int *into, int *length) {
    int start = 0;
    for (int i = 0; i < tc->n_phases - 1; i++) {
        if (step < start + tc->phases[i].steps) {
            *into = step - start;
            *length = tc->phases[i].steps;
            return &tc->phases[i];
        }
        start += tc->phases[i].steps;
    }
    *into = step - start;
    *length = tc->steps - start;
    return &tc->phases[tc->n_phases - 1];
}

void train_phase_shape(const TrainConfig *tc, const TrainPhase *p, int *B, int *T) {
    *T = p->seq_len > 0 ? p->seq_len : tc->seq_len;
    *B = (int)((long)tc->batch_size * tc->seq_len / *T);
}

int train_passkey_gap(const TrainConfig *tc, int step) {
    int into, length, B, T;
    const TrainPhase *p = train_phase(tc, step, &into, &length);
    if (p->gap_from == 0) return 0;
    train_phase_shape(tc, p, &B, &T);
    double widen_steps = (double)p->gap_widen * length;
    double progress = widen_steps > 0.0 ? into / widen_steps : 0.0;
    if (progress > 1.0) progress = 1.0;
    return p->gap_from + (int)((T - p->gap_from) * progress);
}

// --- trainer -------------------------------------------------------------------------------

static float *alloc_floats(size_t n) { return mallocCheck(n * sizeof(float)); }

// Widths of the saved keys and values: the attention's (MLA: decompressed, every head's
// [k_C; k_R] and v), one set per KV layer.
static int key_width(const Config *c) { ModelDims d = model_dims(c); return c->kv_lora_rank ? d.q : d.kv; }
static int value_width(const Config *c) { ModelDims d = model_dims(c); return c->kv_lora_rank ? d.o : d.kv; }

static void activations_alloc(Activations *a, const Config *c, int max_rows, int B, int T) {
    size_t N = max_rows, L = c->n_layers, C = c->dim, H = c->hidden_dim, V = c->vocab_size;
    ModelDims d = model_dims(c);
    size_t Lkv = d.L_kv, qd = d.q, od = d.o, kd = key_width(c), vd = value_width(c);
    memset(a, 0, sizeof *a);
    a->max_rows = max_rows;
    a->resid = alloc_floats((L + 1) * N * C);
    a->resid_mid = alloc_floats(L * N * C);
    a->xn_att = alloc_floats(L * N * C);
    a->q = alloc_floats(L * N * qd);
    a->k = alloc_floats(Lkv * N * kd);
    a->v = alloc_floats(Lkv * N * vd);
    a->kv_latent = alloc_floats(Lkv * N * d.latent);
    a->probs = alloc_floats(L * (size_t)B * c->n_heads * T * T);
    a->att = alloc_floats(L * N * od);
    a->xn_ffn = alloc_floats(L * N * C);
    a->gate = alloc_floats(L * N * H);
    a->up = alloc_floats(L * N * H);
    a->act = alloc_floats(L * N * H);
    a->xn_final = alloc_floats(N * C);
    a->logits = alloc_floats(N * V);
    a->row_loss = alloc_floats(N);
    a->inputs = mallocCheck(N * sizeof(int));
    a->targets = mallocCheck(N * sizeof(int));
    a->d_resid = alloc_floats(N * C);
    a->d_xn = alloc_floats(N * C);
    a->d_q = alloc_floats(N * qd);
    a->d_k = alloc_floats(N * kd);
    a->d_v = alloc_floats(N * vd);
    a->d_k_part = alloc_floats(c->kv_share > 1 ? N * kd : 0);
    a->d_v_part = alloc_floats(c->kv_share > 1 ? N * vd : 0);
    a->kv_b = alloc_floats(N * d.kv_b);
    a->d_latent = alloc_floats(N * d.latent);
    a->d_att = alloc_floats(N * od);
    a->d_gate = alloc_floats(N * H);
    a->d_up = alloc_floats(N * H);
}

static void activations_free(Activations *a) {
    void *bufs[] = {a->resid, a->resid_mid, a->xn_att, a->q, a->k, a->v, a->kv_latent, a->probs, a->att,
                    a->xn_ffn, a->gate, a->up, a->act, a->xn_final, a->logits, a->row_loss, a->inputs,
                    a->targets, a->d_resid, a->d_xn, a->d_q, a->d_k, a->d_v, a->d_k_part, a->d_v_part,
                    a->kv_b, a->d_latent, a->d_att, a->d_gate, a->d_up};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++) free(bufs[i]);
    memset(a, 0, sizeof *a);
}

void trainer_init(Trainer *t, const Config *c, const TrainConfig *tc) {
    memset(t, 0, sizeof *t);
    t->tc = *tc;
    model_alloc(&t->model, c);
    model_init_random(&t->model, tc->seed, tc->init_std);
    // GPT-2's scaled init: each residual branch adds to the stream 2L times.
    float resid_scale = 1.0f / sqrtf(2.0f * c->n_layers);
    size_t n_wo = (size_t)c->n_layers * c->dim * c->n_heads * c->head_dim;
    size_t n_w2 = (size_t)c->n_layers * c->dim * c->hidden_dim;
    for (size_t i = 0; i < n_wo; i++) t->model.weights.wo[i] *= resid_scale;
    for (size_t i = 0; i < n_w2; i++) t->model.weights.w2[i] *= resid_scale;
    size_t n = t->model.n_params;
    t->grads = callocCheck(n, sizeof(float));
    weights_map(&t->grad, c, t->grads);
    t->adam_m = callocCheck(n, sizeof(float));
    t->adam_v = callocCheck(n, sizeof(float));
    activations_alloc(&t->acts, c, tc->batch_size * tc->seq_len, tc->batch_size, tc->seq_len);
    int rot = c->kv_lora_rank ? c->rope_dim : c->head_dim; // the dims RoPE turns per head
    t->inv_freq = alloc_floats((size_t)rot / 2);
    t->mscale = rope_frequencies(t->inv_freq, rot, &c->rope);
}

void trainer_free(Trainer *t) {
    model_free(&t->model);
    activations_free(&t->acts);
    free(t->grads);
    free(t->adam_m);
    free(t->adam_v);
    free(t->inv_freq);
    free(t->log);
    memset(t, 0, sizeof *t);
}

// The attention the trainer runs: MHA / GQA / MQA, or MLA's naive form (every head's
// decompressed keys [k_C; k_R] of hd + d_r dims and values of hd), which the engine's absorbed
// path equals.
static AttentionShape attention_shape(const Config *c) {
    int qk = c->head_dim + c->rope_dim;
    AttentionShape s = {c->n_heads, c->n_kv_heads, qk, c->window, c->n_sink, 1.0f / sqrtf((float)qk),
                        .value_dim = c->head_dim}; // training: text positions (cache_positions 0)
    return s;
}

// Per-layer slices of the activation buffers (each holds max_rows rows per layer).
#define LAYER(buf, l, width) ((buf) + (size_t)(l) * a->max_rows * (width))

// RoPE of rows whose heads are qk wide: MLA turns the last d_r dims, other models all of them.
static void rope_heads(const Trainer *t, float *x, int N, int T, int n_heads, int width, int sign) {
    const Config *c = &t->model.config;
    int rot_dim = c->kv_lora_rank ? c->rope_dim : width;
    if (sign > 0) rope_forward(x, N, T, n_heads, width, rot_dim, t->inv_freq, t->mscale);
    else rope_backward(x, N, T, n_heads, width, rot_dim, t->inv_freq, t->mscale);
}

// The keys and values of KV layer g from the normed input xa (N, C) of its first layer.
// MLA: latent rows [c_kv; RoPE(k_R)] = RoPE(W_kv_a xa) (saved), W_kv_b c_kv per head
// [k_C; v], and the keys [k_C; k_R] / values every head attends with.
static void keys_forward(Trainer *t, int g, const float *xa, int N, int T) {
    const Config *c = &t->model.config;
    const Weights *w = &t->model.weights;
    Activations *a = &t->acts;
    ModelDims d = model_dims(c);
    int C = c->dim, kd = key_width(c), vd = value_width(c);
    float *k = LAYER(a->k, g, kd), *v = LAYER(a->v, g, vd);
    if (!c->kv_lora_rank) {
        matmul(k, xa, w->wk + (size_t)g * d.kv * C, N, C, d.kv); // (N, n_kv * hd)
        matmul(v, xa, w->wv + (size_t)g * d.kv * C, N, C, d.kv);
        rope_forward(k, N, T, c->n_kv_heads, c->head_dim, c->head_dim, t->inv_freq, t->mscale);
        return;
    }
    int nh = c->n_heads, hd = c->head_dim, dc = c->kv_lora_rank, dr = c->rope_dim, qk = d.qk, lat = d.latent;
    float *latent = LAYER(a->kv_latent, g, lat);
    matmul(latent, xa, w->wkv_a + (size_t)g * lat * C, N, C, lat); // (N, d_c + d_r)
    rope_forward(latent, N, T, 1, lat, dr, t->inv_freq, t->mscale);
    // kv_b (N, n_heads * 2 hd) = c_kv (the first d_c of each latent row) @ W_kv_b^T
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, N, d.kv_b, dc, 1.0f, latent, lat,
                w->wkv_b + (size_t)g * d.kv_b * dc, dc, 0.0f, a->kv_b, d.kv_b);
    #pragma omp parallel for schedule(static) if ((size_t)N * d.kv_b >= PARALLEL_MIN_ELEMS)
    for (int r = 0; r < N; r++)
        for (int h = 0; h < nh; h++) {
            const float *kc = a->kv_b + (size_t)r * d.kv_b + (size_t)h * 2 * hd;
            float *kr = k + (size_t)r * kd + (size_t)h * qk;
            memcpy(kr, kc, hd * sizeof(float));
            memcpy(kr + hd, latent + (size_t)r * lat + dc, dr * sizeof(float));
            memcpy(v + (size_t)r * vd + (size_t)h * hd, kc + hd, hd * sizeof(float));
        }
}

// Backward of keys_forward: d_k, d_v (N, widths) hold d keys and d values of KV layer g (all
// its layers' together); adds to d_xn and the KV weights' gradients. d_k is overwritten.
static void keys_backward(Trainer *t, int g, const float *xa, int N, int T) {
    const Config *c = &t->model.config;
    const Weights *w = &t->model.weights, *gr = &t->grad;
    Activations *a = &t->acts;
    ModelDims d = model_dims(c);
    int C = c->dim, kd = key_width(c), vd = value_width(c);
    if (!c->kv_lora_rank) {
        rope_backward(a->d_k, N, T, c->n_kv_heads, c->head_dim, c->head_dim, t->inv_freq, t->mscale);
        size_t at = (size_t)g * d.kv * C;
        matmul_backward(a->d_xn, gr->wk + at, a->d_k, xa, w->wk + at, N, C, d.kv);
        matmul_backward(a->d_xn, gr->wv + at, a->d_v, xa, w->wv + at, N, C, d.kv);
        return;
    }
    int nh = c->n_heads, hd = c->head_dim, dc = c->kv_lora_rank, dr = c->rope_dim, qk = d.qk, lat = d.latent;
    const float *latent = LAYER(a->kv_latent, g, lat), *wkv_b = w->wkv_b + (size_t)g * d.kv_b * dc;
    // d kv_b per head [d k_C; d v]; d k_R sums over the heads that share it
    #pragma omp parallel for schedule(static) if ((size_t)N * d.kv_b >= PARALLEL_MIN_ELEMS)
    for (int r = 0; r < N; r++) {
        float *dl = a->d_latent + (size_t)r * lat;
        memset(dl + dc, 0, dr * sizeof(float));
        for (int h = 0; h < nh; h++) {
            const float *dk = a->d_k + (size_t)r * kd + (size_t)h * qk;
            float *db = a->kv_b + (size_t)r * d.kv_b + (size_t)h * 2 * hd;
            memcpy(db, dk, hd * sizeof(float));
            memcpy(db + hd, a->d_v + (size_t)r * vd + (size_t)h * hd, hd * sizeof(float));
            for (int j = 0; j < dr; j++) dl[dc + j] += dk[hd + j];
        }
    }
    // d c_kv (N, d_c) = d kv_b @ W_kv_b; d W_kv_b += d kv_b^T c_kv
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, N, dc, d.kv_b, 1.0f, a->kv_b, d.kv_b, wkv_b, dc, 0.0f,
                a->d_latent, lat);
    cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, d.kv_b, dc, N, 1.0f, a->kv_b, d.kv_b, latent, lat, 1.0f,
                gr->wkv_b + (size_t)g * d.kv_b * dc, dc);
    rope_backward(a->d_latent, N, T, 1, lat, dr, t->inv_freq, t->mscale);
    size_t at = (size_t)g * lat * C;
    matmul_backward(a->d_xn, gr->wkv_a + at, a->d_latent, xa, w->wkv_a + at, N, C, lat);
}

double trainer_forward(Trainer *t, const int *inputs, const int *targets, int B, int T) {
    const Config *c = &t->model.config;
    const Weights *w = &t->model.weights;
    Activations *a = &t->acts;
    if (B * T > a->max_rows || T > t->tc.seq_len || B < 1 || T < 1)
        die("trainer_forward: batch %d x %d exceeds the trainer's %d x %d", B, T, t->tc.batch_size, t->tc.seq_len);
    ModelDims d = model_dims(c);
    int N = B * T, C = c->dim, H = c->hidden_dim, V = c->vocab_size;
    int qd = d.q, od = d.o, kd = key_width(c), vd = value_width(c);
    size_t probs_per_layer = (size_t)B * c->n_heads * T * T;
    AttentionShape shape = attention_shape(c);
    a->B = B;
    a->T = T;
    memcpy(a->inputs, inputs, (size_t)N * sizeof(int));
    for (int r = 0; r < N; r++) {
        if (inputs[r] < 0 || inputs[r] >= V) die("trainer_forward: token %d outside the vocabulary", inputs[r]);
        memcpy(a->resid + (size_t)r * C, w->token_embedding + (size_t)inputs[r] * C, C * sizeof(float));
    }
    for (int l = 0; l < c->n_layers; l++) {
        int g = l / c->kv_share; // the KV layer it reads (CLA: its set's first layer computes it)
        float *x = LAYER(a->resid, l, C), *mid = LAYER(a->resid_mid, l, C), *out = LAYER(a->resid, l + 1, C);
        float *xa = LAYER(a->xn_att, l, C), *q = LAYER(a->q, l, qd), *k = LAYER(a->k, g, kd);
        float *v = LAYER(a->v, g, vd), *att = LAYER(a->att, l, od), *xf = LAYER(a->xn_ffn, l, C);
        float *gate = LAYER(a->gate, l, H), *up = LAYER(a->up, l, H), *act = LAYER(a->act, l, H);
        float *probs = a->probs + l * probs_per_layer;

        rmsnorm(xa, x, w->rms_att + (size_t)l * C, N, C, c->norm_eps);
        matmul(q, xa, w->wq + (size_t)l * qd * C, N, C, qd); // (N, n_heads * qk)
        rope_heads(t, q, N, T, c->n_heads, d.qk, 1);
        if (l % c->kv_share == 0) keys_forward(t, g, xa, N, T);
        attention_forward(att, probs, q, k, v, B, T, &shape);
        matmul(mid, att, w->wo + (size_t)l * C * od, N, od, C);
        add_inplace(mid, x, (size_t)N * C);

        rmsnorm(xf, mid, w->rms_ffn + (size_t)l * C, N, C, c->norm_eps);
        matmul(gate, xf, w->w1 + (size_t)l * H * C, N, C, H); // (N, H)
        matmul(up, xf, w->w3 + (size_t)l * H * C, N, C, H);
        swiglu(act, gate, up, N, H);
        matmul(out, act, w->w2 + (size_t)l * C * H, N, H, C);
        add_inplace(out, mid, (size_t)N * C);
    }
    rmsnorm(a->xn_final, LAYER(a->resid, c->n_layers, C), w->rms_final, N, C, c->norm_eps);
    matmul(a->logits, a->xn_final, w->wcls, N, C, V); // (N, V)
    if (!targets) {
        for (int r = 0; r < N; r++) a->targets[r] = -1;
        return 0.0;
    }
    for (int r = 0; r < N; r++)
        if (targets[r] < -1 || targets[r] >= V) die("trainer_forward: target %d outside the vocabulary", targets[r]);
    memcpy(a->targets, targets, (size_t)N * sizeof(int));
    return crossentropy_forward(a->logits, a->row_loss, a->targets, N, V);
}

void trainer_backward(Trainer *t, const float *weights, float scale) {
    const Config *c = &t->model.config;
    const Weights *w = &t->model.weights;
    const Weights *g = &t->grad;
    Activations *a = &t->acts;
    ModelDims d = model_dims(c);
    int B = a->B, T = a->T, N = B * T, C = c->dim, H = c->hidden_dim, V = c->vocab_size;
    int qd = d.q, od = d.o, kd = key_width(c), vd = value_width(c), L = c->n_layers;
    size_t probs_per_layer = (size_t)B * c->n_heads * T * T;
    size_t NC = (size_t)N * C;
    AttentionShape shape = attention_shape(c);

    crossentropy_backward(a->logits, a->targets, weights, N, V, scale); // logits now hold d logits
    memset(a->d_xn, 0, NC * sizeof(float));
    matmul_backward(a->d_xn, g->wcls, a->logits, a->xn_final, w->wcls, N, C, V);
    memset(a->d_resid, 0, NC * sizeof(float));
    rmsnorm_backward(a->d_resid, g->rms_final, a->d_xn, LAYER(a->resid, c->n_layers, C), w->rms_final, N, C,
                     c->norm_eps);

    for (int l = L - 1; l >= 0; l--) {
        int kv_layer = l / c->kv_share;
        float *x = LAYER(a->resid, l, C), *mid = LAYER(a->resid_mid, l, C);
        float *xa = LAYER(a->xn_att, l, C), *q = LAYER(a->q, l, qd), *k = LAYER(a->k, kv_layer, kd);
        float *v = LAYER(a->v, kv_layer, vd), *att = LAYER(a->att, l, od), *xf = LAYER(a->xn_ffn, l, C);
        float *gate = LAYER(a->gate, l, H), *up = LAYER(a->up, l, H), *act = LAYER(a->act, l, H);
        float *probs = a->probs + l * probs_per_layer;

        // MLP block: out = mid + w2(silu(w1 xf) * w3 xf); d_resid holds d out
        memset(a->d_up, 0, (size_t)N * H * sizeof(float)); // first d act, then d up
        matmul_backward(a->d_up, g->w2 + (size_t)l * C * H, a->d_resid, act, w->w2 + (size_t)l * C * H, N, H, C);
        swiglu_backward(a->d_gate, a->d_up, a->d_up, gate, up, (size_t)N * H);
        memset(a->d_xn, 0, NC * sizeof(float));
        matmul_backward(a->d_xn, g->w1 + (size_t)l * H * C, a->d_gate, xf, w->w1 + (size_t)l * H * C, N, C, H);
        matmul_backward(a->d_xn, g->w3 + (size_t)l * H * C, a->d_up, xf, w->w3 + (size_t)l * H * C, N, C, H);
        rmsnorm_backward(a->d_resid, g->rms_ffn + (size_t)l * C, a->d_xn, mid, w->rms_ffn + (size_t)l * C, N, C,
                         c->norm_eps); // d_resid: d mid

        // attention block: mid = x + wo(attention(rope(wq xa), keys, values)). The layers of a
        // CLA set share keys and values: the last (visited first) starts their gradients in
        // d_k, d_v, the others add theirs, and the first backpropagates them through the KV weights.
        int last_of_set = l == L - 1 || (l + 1) % c->kv_share == 0;
        float *dk = last_of_set ? a->d_k : a->d_k_part, *dv = last_of_set ? a->d_v : a->d_v_part;
        memset(a->d_att, 0, (size_t)N * od * sizeof(float));
        matmul_backward(a->d_att, g->wo + (size_t)l * C * od, a->d_resid, att, w->wo + (size_t)l * C * od, N, od, C);
        attention_backward(a->d_q, dk, dv, a->d_att, probs, q, k, v, B, T, &shape);
        if (!last_of_set) {
            add_inplace(a->d_k, dk, (size_t)N * kd);
            add_inplace(a->d_v, dv, (size_t)N * vd);
        }
        rope_heads(t, a->d_q, N, T, c->n_heads, d.qk, -1);
        memset(a->d_xn, 0, NC * sizeof(float));
        matmul_backward(a->d_xn, g->wq + (size_t)l * qd * C, a->d_q, xa, w->wq + (size_t)l * qd * C, N, C, qd);
        if (l % c->kv_share == 0) keys_backward(t, kv_layer, xa, N, T);
        rmsnorm_backward(a->d_resid, g->rms_att + (size_t)l * C, a->d_xn, x, w->rms_att + (size_t)l * C, N, C,
                         c->norm_eps); // d_resid: d x
    }
    // Rows with the same token add to one embedding row: kept serial, so no races.
    for (int r = 0; r < N; r++) {
        float *row = g->token_embedding + (size_t)a->inputs[r] * C;
        const float *dd = a->d_resid + (size_t)r * C;
        for (int i = 0; i < C; i++) row[i] += dd[i];
    }
}

void trainer_zero_grad(Trainer *t) { memset(t->grads, 0, t->model.n_params * sizeof(float)); }

// AdamW on params [from, to): the shared hyperparameters of this step, and this range's decay.
static void adamw_range(Trainer *t, size_t from, size_t to, float lr, float decay, float grad_scale) {
    const TrainConfig *tc = &t->tc;
    if (to <= from) return;
    AdamW h = {lr, tc->beta1, tc->beta2, tc->adam_eps, decay, grad_scale, t->step};
    adamw(t->model.params + from, t->grads + from, t->adam_m + from, t->adam_v + from, to - from, &h);
}

float trainer_update(Trainer *t) {
    const Weights *w = &t->model.weights;
    const Config *c = &t->model.config;
    float norm = (float)sqrt(sum_squares(t->grads, t->model.n_params));
    float clip = t->tc.grad_clip > 0.0f && norm > t->tc.grad_clip ? t->tc.grad_clip / norm : 1.0f;
    float lr = train_lr(&t->tc, t->step);
    t->step++;
    // Norm gains are not decayed: the three gain ranges split the block into decayed runs.
    size_t L = c->n_layers, C = c->dim;
    size_t gains[3][2] = {{w->rms_att - t->model.params, L * C},
                          {w->rms_ffn - t->model.params, L * C},
                          {w->rms_final - t->model.params, C}};
    size_t at = 0;
    for (int i = 0; i < 3; i++) {
        adamw_range(t, at, gains[i][0], lr, t->tc.weight_decay, clip);
        adamw_range(t, gains[i][0], gains[i][0] + gains[i][1], lr, 0.0f, clip);
        at = gains[i][0] + gains[i][1];
    }
    adamw_range(t, at, t->model.n_params, lr, t->tc.weight_decay, clip);
    return norm;
}

// --- data ----------------------------------------------------------------------------------

// A state for sequence b of micro-batch `micro` of step `step`: batches are a pure function
// of (seed, step, micro), so a resumed run sees the same data.
static uint64_t batch_rng(const TrainConfig *tc, int step, int micro, int b) {
    uint64_t index = ((uint64_t)step * tc->grad_accum + micro) * tc->batch_size + b;
    return rng_seed(tc->seed ^ (0x9E3779B97F4A7C15ull * (index + 1)));
}

void batch_alloc(Batch *b, const TrainConfig *tc) {
    size_t n = (size_t)tc->batch_size * tc->seq_len;
    memset(b, 0, sizeof *b);
    b->inputs = mallocCheck(n * sizeof(int));
    b->targets = mallocCheck(n * sizeof(int));
    b->kind = mallocCheck(n);
    b->weights = mallocCheck(n * sizeof(float));
}

void batch_free(Batch *b) {
    free(b->inputs);
    free(b->targets);
    free(b->kind);
    free(b->weights);
    memset(b, 0, sizeof *b);
}

// seq (T + 1 tokens) as row b: inputs its first T, targets its last T, every target of kind
// `kind` (TARGET_NONE: no target).
static void batch_put(Batch *bt, int b, const int *seq, unsigned char kind) {
    int T = bt->T;
    memcpy(bt->inputs + (size_t)b * T, seq, (size_t)T * sizeof(int));
    memcpy(bt->targets + (size_t)b * T, seq + 1, (size_t)T * sizeof(int));
    memset(bt->kind + (size_t)b * T, kind, (size_t)T);
    if (kind == TARGET_NONE)
        for (int i = 0; i < T; i++) bt->targets[(size_t)b * T + i] = -1;
}

// The targets of row b that predict tokens [from, to) of its sequence become of kind `kind`.
static void batch_mark(Batch *bt, int b, const int *seq, int from, int to, unsigned char kind) {
    for (int i = from - 1; i < to - 1 && i < bt->T; i++) {
        if (i < 0) continue;
        bt->kind[(size_t)b * bt->T + i] = kind;
        bt->targets[(size_t)b * bt->T + i] = kind == TARGET_NONE ? -1 : seq[i + 1];
    }
}

// Weights: each kind's targets share a weight of 1 (its own mean).
static void batch_weights(Batch *b) {
    size_t n = (size_t)b->B * b->T;
    b->n_text = b->n_answer = 0;
    for (size_t i = 0; i < n; i++) {
        b->n_text += b->kind[i] == TARGET_TEXT;
        b->n_answer += b->kind[i] == TARGET_ANSWER;
    }
    for (size_t i = 0; i < n; i++)
        b->weights[i] = b->kind[i] == TARGET_TEXT ? 1.0f / b->n_text
                        : b->kind[i] == TARGET_ANSWER ? 1.0f / b->n_answer
                                                      : 0.0f;
}

void train_sample_batch(const TrainData *d, const TrainConfig *tc, int step, int micro, Batch *bt) {
    int into, length;
    const TrainPhase *phase = train_phase(tc, step, &into, &length);
    train_phase_shape(tc, phase, &bt->B, &bt->T);
    int T = bt->T;
    PasskeyPlace place = {-1.0f, train_passkey_gap(tc, step), 0};
    int *seq = mallocCheck((size_t)(T + 1) * sizeof(int));
    Error err;
    for (int b = 0; b < bt->B; b++) {
        uint64_t rng = batch_rng(tc, step, micro, b);
        float u = rng_uniform(&rng);
        unsigned char filler = phase->filler_text ? TARGET_TEXT : TARGET_NONE;
        if (u < phase->copy_frac) {
            CopyLayout L;
            if (copy_sequence(d->tok, seq, T + 1, d->train, d->n_train, &rng, &L, &err)) die("copy batch: %s", err.msg);
            // nothing predicts the copies' digits but the second copy's after its first
            batch_put(bt, b, seq, filler);
            batch_mark(bt, b, seq, L.first_at, L.first_at + L.len, TARGET_NONE);
            batch_mark(bt, b, seq, L.second_at, L.second_at + 1, TARGET_NONE);
            batch_mark(bt, b, seq, L.second_at + 1, L.second_at + L.len, TARGET_ANSWER);
        } else if (u < phase->copy_frac + phase->passkey_frac) {
            PasskeyLayout L;
            if (passkey_sequence_placed(d->tok, seq, T + 1, d->train, d->n_train, &rng, &place, &L, &err))
                die("passkey batch: %s", err.msg);
            batch_put(bt, b, seq, filler);
            batch_mark(bt, b, seq, L.needle_at, L.needle_at + L.needle_len, TARGET_NONE); // its number is random
            batch_mark(bt, b, seq, L.prompt_len, T + 1, TARGET_ANSWER);
        } else {
            seq[0] = d->tok->bos_id;
            size_t offset = rng_u64(&rng) % (d->n_train - (size_t)T + 1);
            memcpy(seq + 1, d->train + offset, (size_t)T * sizeof(int));
            batch_put(bt, b, seq, TARGET_TEXT);
        }
    }
    batch_weights(bt);
    free(seq);
}

double train_evaluate(Trainer *t, const TrainData *d, size_t max_tokens, double *bits_per_byte) {
    int B = t->tc.batch_size, T = t->tc.seq_len;
    int *inputs = mallocCheck((size_t)B * T * sizeof(int)), *targets = mallocCheck((size_t)B * T * sizeof(int));
    size_t n_windows = (d->n_val + T - 1) / T, n_eval = n_windows;
    if (max_tokens > 0 && max_tokens < d->n_val) n_eval = (max_tokens + T - 1) / T;
    double nats = 0.0, tokens = 0.0, bytes = 0.0;
    for (size_t w0 = 0; w0 < n_eval; w0 += B) {
        int nb = n_eval - w0 < (size_t)B ? (int)(n_eval - w0) : B;
        for (int b = 0; b < nb; b++) {
            size_t start = (w0 + b) * n_windows / n_eval * T; // this window predicts val[start .. start + T)
            for (int i = 0; i < T; i++) {
                size_t p = start + i;
                int have = p < d->n_val;
                inputs[b * T + i] = i == 0 || !have ? d->tok->bos_id : d->val[p - 1];
                targets[b * T + i] = have ? d->val[p] : -1;
                if (!have) continue;
                size_t len;
                tokenizer_piece(d->tok, -1, d->val[p], &len);
                bytes += len;
                tokens += 1;
            }
        }
        nats += trainer_forward(t, inputs, targets, nb, T);
    }
    free(inputs);
    free(targets);
    if (bits_per_byte) *bits_per_byte = nats / M_LN2 / bytes;
    return nats / tokens;
}

int train_passkey_score(Trainer *t, const Tokenizer *tok, const int *filler, size_t n_filler, int ctx, float depth,
                        int n_samples, uint64_t seed, PasskeyScore *score, Error *err) {
    if (ctx > t->tc.seq_len) return error_set(err, "passkey context %d exceeds the trainer's %d", ctx, t->tc.seq_len);
    int V = t->model.config.vocab_size, max_B = t->acts.max_rows / ctx;
    int *seqs = mallocCheck((size_t)max_B * ctx * sizeof(int));
    PasskeyLayout *layouts = mallocCheck((size_t)max_B * sizeof(PasskeyLayout));
    uint64_t rng = rng_seed(seed);
    double exact = 0.0, right = 0.0, tokens = 0.0;
    int rc = 0;
    for (int done = 0; done < n_samples && rc == 0;) {
        int B = n_samples - done < max_B ? n_samples - done : max_B;
        for (int b = 0; b < B && rc == 0; b++)
            rc = passkey_eval_sequence(tok, seqs + (size_t)b * ctx, ctx, filler, n_filler, depth, &rng, &layouts[b], err);
        if (rc) break;
        trainer_forward(t, seqs, NULL, B, ctx);
        for (int b = 0; b < B; b++) {
            const PasskeyLayout *L = &layouts[b];
            int ok = 0;
            for (int i = 0; i < L->answer_len; i++) { // row p's logits predict token p + 1
                size_t row = (size_t)b * ctx + L->prompt_len - 1 + i;
                ok += sampler_argmax(t->acts.logits + row * V, V) == seqs[(size_t)b * ctx + L->prompt_len + i];
            }
            exact += ok == L->answer_len;
            right += ok;
            tokens += L->answer_len;
        }
        done += B;
    }
    free(seqs);
    free(layouts);
    if (rc) return -1;
    score->exact = n_samples > 0 ? exact / n_samples : 0.0;
    score->tokens = tokens > 0 ? right / tokens : 0.0;
    return 0;
}

// Fill B sequences of T tokens as train_prefix_matching describes; m tokens repeat.
static void repeated_random_tokens(int *tokens, int B, int T, int m, int bos, int V, uint64_t *rng) {
    for (int b = 0; b < B; b++) {
        int *row = tokens + (size_t)b * T;
        row[0] = bos;
        for (int i = 1; i < T; i++) row[i] = i <= 2 * m && i > m ? row[i - m] : (int)(rng_u64(rng) % (uint64_t)V);
    }
}

void train_prefix_matching(Trainer *t, int bos, int n_seqs, uint64_t seed, double *best) {
    const Config *c = &t->model.config;
    int T = t->tc.seq_len, max_B = t->acts.max_rows / T, m = (T - 1) / 2, L = c->n_layers, nh = c->n_heads;
    double *score = callocCheck((size_t)L * nh, sizeof(double));
    int *tokens = mallocCheck((size_t)max_B * T * sizeof(int));
    uint64_t rng = rng_seed(seed);
    for (int done = 0; done < n_seqs;) {
        int B = n_seqs - done < max_B ? n_seqs - done : max_B;
        repeated_random_tokens(tokens, B, T, m, bos, c->vocab_size, &rng);
        trainer_forward(t, tokens, NULL, B, T);
        for (int l = 0; l < L; l++)
            for (int b = 0; b < B; b++)
                for (int h = 0; h < nh; h++) {
                    const float *p = t->acts.probs + (((size_t)l * B + b) * nh + h) * T * T; // (T, T)
                    // query 1 + m + i holds the i-th repeated token; 2 + i follows its first occurrence
                    for (int i = 0; i < m; i++) score[l * nh + h] += p[(size_t)(1 + m + i) * T + 2 + i];
                }
        done += B;
    }
    for (int l = 0; l < L; l++) {
        best[l] = 0.0;
        for (int h = 0; h < nh; h++) {
            double s = score[l * nh + h] / ((double)n_seqs * m);
            best[l] = s > best[l] ? s : best[l];
        }
    }
    free(score);
    free(tokens);
}

double train_flops(const Config *c, int B, int T) { return 3.0 * B * model_forward_flops_expanded(c, T, 0, T); }

// --- checkpoints -------------------------------------------------------------------------

static const char CKPT_MAGIC[8] = {'I', 'L', 'T', 'R', 'A', 'I', 'N', '1'};
#define CKPT_VERSION 2
#define CKPT_ROW_VALUES (9 + TRAIN_MAX_LAYERS)
#define CKPT_ROW_BYTES (4 + CKPT_ROW_VALUES * 8)

// Layout: magic, u32 version, u64 key, i32 step, u64 n_params, i32 n_log, params, adam m,
// adam v (n_params floats each), then n_log rows of (i32 step, CKPT_ROW_VALUES f64: the
// row's fields in order).

static void row_to_values(const TrainLogRow *r, double *v) {
    double head[9] = {r->train_loss, r->text_loss, r->answer_loss, r->val_loss, r->val_bpb, r->lr,
                      r->tokens_per_s, r->passkey_exact, r->passkey_tokens};
    memcpy(v, head, sizeof head);
    memcpy(v + 9, r->prefix_match, sizeof r->prefix_match);
}

static TrainLogRow row_from_values(int step, const double *v) {
    TrainLogRow r = {step, v[0], v[1], v[2], v[3], v[4], v[5], v[6], v[7], v[8], {0}};
    memcpy(r.prefix_match, v + 9, sizeof r.prefix_match);
    return r;
}
static size_t ckpt_size(size_t n_params, int n_log) {
    return 8 + 4 + 8 + 4 + 8 + 4 + 3 * n_params * sizeof(float) + (size_t)n_log * CKPT_ROW_BYTES;
}

void trainer_save(const Trainer *t, const char *path, uint64_t key) {
    AtomicFile af = atomic_open(path);
    uint32_t version = CKPT_VERSION;
    int32_t step = t->step, n_log = t->n_log;
    uint64_t n = t->model.n_params;
    fwriteCheck(CKPT_MAGIC, 1, 8, af.f);
    fwriteCheck(&version, 4, 1, af.f);
    fwriteCheck(&key, 8, 1, af.f);
    fwriteCheck(&step, 4, 1, af.f);
    fwriteCheck(&n, 8, 1, af.f);
    fwriteCheck(&n_log, 4, 1, af.f);
    fwriteCheck(t->model.params, sizeof(float), n, af.f);
    fwriteCheck(t->adam_m, sizeof(float), n, af.f);
    fwriteCheck(t->adam_v, sizeof(float), n, af.f);
    for (int i = 0; i < t->n_log; i++) {
        const TrainLogRow *r = &t->log[i];
        int32_t s = r->step;
        double vals[CKPT_ROW_VALUES];
        row_to_values(r, vals);
        fwriteCheck(&s, 4, 1, af.f);
        fwriteCheck(vals, 8, CKPT_ROW_VALUES, af.f);
    }
    atomic_commit(&af);
}

static int read_exact(FILE *f, void *p, size_t size, size_t n) { return fread(p, size, n, f) == n; }

static void log_append(Trainer *t, const TrainLogRow *row) {
    if (t->n_log == t->cap_log) {
        t->cap_log = t->cap_log ? 2 * t->cap_log : 16;
        t->log = reallocCheck(t->log, (size_t)t->cap_log * sizeof(TrainLogRow));
    }
    t->log[t->n_log++] = *row;
}

int trainer_load(Trainer *t, const char *path, uint64_t key, Error *err) {
    FILE *f = fopen(path, "rb");
    if (!f) return error_set(err, "%s: %s", path, strerror(errno));
    char magic[8];
    uint32_t version = 0;
    uint64_t file_key = 0, n = 0;
    int32_t step = -1, n_log = -1;
    int ok = read_exact(f, magic, 1, 8) && read_exact(f, &version, 4, 1) && read_exact(f, &file_key, 8, 1) &&
             read_exact(f, &step, 4, 1) && read_exact(f, &n, 8, 1) && read_exact(f, &n_log, 4, 1);
    const char *bad = !ok ? "truncated header"
                      : memcmp(magic, CKPT_MAGIC, 8) != 0 ? "not an inferlab training checkpoint"
                      : version != CKPT_VERSION ? "unsupported checkpoint version"
                      : file_key != key ? "checkpoint of another model, corpus or code version"
                      : n != t->model.n_params ? "parameter count differs from the model's"
                      : step < 0 || step > t->tc.steps ? "step out of range"
                      : n_log < 0 || n_log > step + 1 ? "log length out of range"
                      : NULL;
    if (!bad && (fseek(f, 0, SEEK_END) != 0 || (size_t)ftell(f) != ckpt_size(n, n_log))) bad = "wrong file size";
    if (bad) {
        fclose(f);
        return error_set(err, "%s: %s", path, bad);
    }
    fseek(f, (long)ckpt_size(0, 0), SEEK_SET);
    float *blocks = alloc_floats(3 * n); // params, m, v: copied in only when all is read
    TrainLogRow *rows = mallocCheck(((size_t)n_log + 1) * sizeof(TrainLogRow));
    ok = read_exact(f, blocks, sizeof(float), 3 * n);
    for (int i = 0; ok && i < n_log; i++) {
        int32_t s;
        double vals[CKPT_ROW_VALUES];
        ok = read_exact(f, &s, 4, 1) && read_exact(f, vals, 8, CKPT_ROW_VALUES);
        if (ok) rows[i] = row_from_values(s, vals);
    }
    fclose(f);
    for (size_t i = 0; ok && i < 3 * n; i++) ok = isfinite(blocks[i]);
    if (!ok) {
        free(blocks);
        free(rows);
        return error_set(err, "%s: damaged (a read failed or a value is not finite)", path);
    }
    memcpy(t->model.params, blocks, n * sizeof(float));
    memcpy(t->adam_m, blocks + n, n * sizeof(float));
    memcpy(t->adam_v, blocks + 2 * n, n * sizeof(float));
    t->step = step;
    t->n_log = 0;
    for (int i = 0; i < n_log; i++) log_append(t, &rows[i]);
    free(blocks);
    free(rows);
    return 0;
}

// --- the loop ------------------------------------------------------------------------------

// A number as the log writes it: empty where there is none (NAN).
static const char *log_number(char *buf, size_t size, double x) {
    if (isnan(x)) buf[0] = '\0';
    else snprintf(buf, size, "%.6g", x);
    return buf;
}

static void write_log(const Trainer *t, const char *path) {
    char header[1024] = "step,train_loss,text_loss,answer_loss,val_loss,val_bits_per_byte,lr,tokens_per_s,"
                        "passkey_exact,passkey_tokens";
    int L = t->model.config.n_layers < TRAIN_MAX_LAYERS ? t->model.config.n_layers : TRAIN_MAX_LAYERS;
    for (int l = 0; l < L; l++) snprintf(header + strlen(header), sizeof header - strlen(header), ",prefix_match_l%d", l);
    strcat(header, ",prefix_match_max");
    CsvWriter w = csv_open(path, header);
    for (int i = 0; i < t->n_log; i++) {
        const TrainLogRow *r = &t->log[i];
        char line[1024], b[4][32];
        int n = snprintf(line, sizeof line, "%d,%.6g,%s,%s,%.6g,%.6g,%.6g,%.6g,%s,%s", r->step, r->train_loss,
                         log_number(b[0], 32, r->text_loss), log_number(b[1], 32, r->answer_loss), r->val_loss,
                         r->val_bpb, r->lr, r->tokens_per_s, log_number(b[2], 32, r->passkey_exact),
                         log_number(b[3], 32, r->passkey_tokens));
        double max = 0.0;
        for (int l = 0; l < L; l++) {
            n += snprintf(line + n, sizeof line - n, ",%.6g", r->prefix_match[l]);
            max = r->prefix_match[l] > max ? r->prefix_match[l] : max;
        }
        snprintf(line + n, sizeof line - n, ",%.6g", max);
        csv_row(&w, "%s", line);
    }
    csv_close(&w);
}

// "label [#####.....] step 120/2000 loss 3.214 12.3k tok/s ETA 1:23" (a terminal only).
static void progress_bar(const char *label, int step, int steps, double loss, double tok_s, double eta_s) {
    enum { WIDTH = 24 };
    char bar[WIDTH + 1];
    int filled = (int)((double)WIDTH * step / steps);
    for (int i = 0; i < WIDTH; i++) bar[i] = i < filled ? '#' : '.';
    bar[WIDTH] = '\0';
    int eta = eta_s > 0 && eta_s < 1e6 ? (int)eta_s : 0;
    progress("%-14s [%s] step %d/%d loss %.3f %.1fk tok/s ETA %d:%02d", label, bar, step, steps, loss,
                 tok_s / 1000.0, eta / 60, eta % 60);
}

static int check_data(const Trainer *t, const TrainData *d, Error *err) {
    const TrainConfig *tc = &t->tc;
    if (d->n_train < (size_t)tc->seq_len)
        return error_set(err, "the training text has %zu tokens, fewer than a sequence of %d", d->n_train,
                         tc->seq_len);
    if (d->n_val == 0) return error_set(err, "the validation text is empty");
    if (d->tok->vocab_size != t->model.config.vocab_size)
        return error_set(err, "tokenizer has %d tokens, the model %d", d->tok->vocab_size, t->model.config.vocab_size);
    for (int i = 0; i < tc->n_phases; i++) {
        int B, T;
        train_phase_shape(tc, &tc->phases[i], &B, &T);
        if (tc->phases[i].passkey_frac > 0.0f && T + 1 < passkey_min_len(d->tok))
            return error_set(err, "phase %d: seq_len %d is too short for passkey sequences (%d tokens)", i + 1, T,
                             passkey_min_len(d->tok));
        if (tc->phases[i].copy_frac > 0.0f && T + 1 < 3 * COPY_MIN_DIGITS + 1)
            return error_set(err, "phase %d: seq_len %d is too short for copy sequences", i + 1, T);
    }
    return 0;
}

// What one step trained on: its objective, and the summed losses and counts of each kind.
typedef struct {
    double objective, text_nats, answer_nats;
    long n_text, n_answer;
} StepLoss;

static void add_kind_losses(StepLoss *sl, const Trainer *t, const Batch *b) {
    const float *row_loss = t->acts.row_loss;
    for (size_t i = 0; i < (size_t)b->B * b->T; i++) {
        if (b->kind[i] == TARGET_TEXT) sl->text_nats += row_loss[i];
        else if (b->kind[i] == TARGET_ANSWER) sl->answer_nats += row_loss[i];
    }
    sl->n_text += b->n_text;
    sl->n_answer += b->n_answer;
}

// One optimiser step over grad_accum micro-batches: the objective is the mean of the
// micro-batches' (text mean + answer mean).
static void train_step(Trainer *t, const TrainData *d, Batch *b, StepLoss *sl) {
    const TrainConfig *tc = &t->tc;
    memset(sl, 0, sizeof *sl);
    trainer_zero_grad(t);
    for (int micro = 0; micro < tc->grad_accum; micro++) {
        train_sample_batch(d, tc, t->step, micro, b);
        StepLoss m = {0};
        trainer_forward(t, b->inputs, b->targets, b->B, b->T);
        add_kind_losses(&m, t, b);
        trainer_backward(t, b->weights, 1.0f / (float)tc->grad_accum);
        sl->objective += ((m.n_text ? m.text_nats / m.n_text : 0.0) + (m.n_answer ? m.answer_nats / m.n_answer : 0.0)) /
                         tc->grad_accum;
        sl->text_nats += m.text_nats, sl->answer_nats += m.answer_nats;
        sl->n_text += m.n_text, sl->n_answer += m.n_answer;
    }
    trainer_update(t);
}

// The evaluation row after the interval's steps: validation, then the retrieval diagnostics.
static int evaluate_row(Trainer *t, const TrainData *d, int last, TrainLogRow *row, Error *err) {
    const TrainConfig *tc = &t->tc;
    row->val_loss = train_evaluate(t, d, last ? 0 : (size_t)tc->eval_tokens, &row->val_bpb);
    row->passkey_exact = row->passkey_tokens = NAN;
    if (tc->eval_passkeys > 0 && tc->seq_len >= passkey_min_len(d->tok)) {
        PasskeyScore score;
        if (train_passkey_score(t, d->tok, d->val, d->n_val, tc->seq_len, -1.0f, tc->eval_passkeys, TRAIN_EVAL_SEED,
                                &score, err))
            return -1;
        row->passkey_exact = score.exact;
        row->passkey_tokens = score.tokens;
    }
    double *best = mallocCheck((size_t)t->model.config.n_layers * sizeof(double));
    train_prefix_matching(t, d->tok->bos_id, PREFIX_MATCH_SEQS, TRAIN_EVAL_SEED, best);
    for (int l = 0; l < t->model.config.n_layers && l < TRAIN_MAX_LAYERS; l++) row->prefix_match[l] = best[l];
    free(best);
    return 0;
}

int train_run(Trainer *t, const TrainData *d, const TrainRun *run, TrainResult *res, Error *err) {
    const TrainConfig *tc = &t->tc;
    if (check_data(t, d, err)) return -1;
    memset(res, 0, sizeof *res);
    if (run->checkpoint_path && access(run->checkpoint_path, F_OK) == 0) {
        Error load_err;
        if (trainer_load(t, run->checkpoint_path, run->key, &load_err) == 0) res->resumed_from = t->step;
        else fprintf(stderr, "note: not resuming: %s\n", load_err.msg);
    }
    int stop = run->stop_at > 0 && run->stop_at < tc->steps ? run->stop_at : tc->steps;
    Batch batch;
    batch_alloc(&batch, tc);
    double step_tokens = (double)tc->batch_size * tc->seq_len * tc->grad_accum;
    double start = now_seconds(), interval_start = start, interval_tokens = 0.0, interval_flops = 0.0;
    StepLoss interval = {0};
    int interval_steps = 0, rc = 0;
    while (t->step < stop && rc == 0) {
        float lr = train_lr(tc, t->step);
        StepLoss sl;
        train_step(t, d, &batch, &sl);
        interval_tokens += step_tokens;
        interval_flops += tc->grad_accum * train_flops(&t->model.config, batch.B, batch.T);
        interval.objective += sl.objective;
        interval.text_nats += sl.text_nats, interval.answer_nats += sl.answer_nats;
        interval.n_text += sl.n_text, interval.n_answer += sl.n_answer;
        interval_steps++;
        double elapsed = now_seconds() - interval_start;
        double tok_s = (res->tokens + interval_tokens) / (res->seconds + elapsed);
        if (run->label)
            progress_bar(run->label, t->step, tc->steps, sl.objective, tok_s,
                         (tc->steps - t->step) * (res->seconds + elapsed) / (t->step - res->resumed_from));
        int last = t->step == tc->steps, evaluate = last || t->step % tc->eval_every == 0;
        if (evaluate || t->step == stop) { // close the interval's accounting
            res->seconds += elapsed;
            res->tokens += interval_tokens;
            res->flops += interval_flops;
        }
        if (evaluate) {
            TrainLogRow row = {t->step, interval.objective / interval_steps,
                               interval.n_text ? interval.text_nats / interval.n_text : NAN,
                               interval.n_answer ? interval.answer_nats / interval.n_answer : NAN,
                               0, 0, lr, interval_tokens / elapsed, NAN, NAN, {0}};
            rc = evaluate_row(t, d, last, &row, err);
            log_append(t, &row);
            if (run->log_path) write_log(t, run->log_path);
            memset(&interval, 0, sizeof interval);
            interval_tokens = interval_flops = 0.0;
            interval_steps = 0;
            interval_start = now_seconds();
        }
        if (rc == 0 && run->checkpoint_path && t->step < tc->steps &&
            ((run->checkpoint_every > 0 && t->step % run->checkpoint_every == 0) || t->step == stop))
            trainer_save(t, run->checkpoint_path, run->key);
    }
    if (t->n_log > 0) {
        res->val_loss = t->log[t->n_log - 1].val_loss;
        res->val_bpb = t->log[t->n_log - 1].val_bpb;
    }
    if (run->label) progress_done();
    res->wall_seconds = now_seconds() - start;
    batch_free(&batch);
    return rc;
}
