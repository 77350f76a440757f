// train.h: training the Llama-style decoder of model.h from scratch: the forward pass with
// saved activations, the backward pass of every layer, AdamW with warmup + cosine learning
// rate, gradient clipping and accumulation, batches (with passkey needles), validation in
// bits per byte, checkpoint / resume, and the training loop with its CSV log.
//
// The forward computes what model_forward_full computes (same kernels for norms, matmuls,
// RoPE, SwiGLU; attention written out so that its probabilities are kept for the backward).
// Gradients, and the two AdamW moments, live in float blocks laid out like Model.params,
// mapped with weights_map; a tied head's gradient therefore lands on the embedding's.
// Matmuls (forward and backward, attention included) go through OpenBLAS sgemm; everything
// else is OpenMP loops. OpenBLAS's OpenMP build (the Makefile links it) shares the thread pool.
// With one thread a run is bit-reproducible from its seed, and resuming from a checkpoint
// gives the same weights as not stopping.
//
// Tests: make build/tests/test_train && ./build/tests/test_train
#pragma once

#include <stddef.h>
#include <stdint.h>

#include "common.h"
#include "kernels.h"
#include "model.h"
#include "tokenizer.h"

typedef struct {
    int batch_size;      // B: sequences per micro-batch
    int seq_len;         // T: tokens per sequence (<= the model's seq_len)
    int grad_accum;      // micro-batches per optimiser step
    int steps;           // optimiser steps
    int warmup_steps;    // linear warmup from 0 to lr
    float lr;            // peak learning rate
    float min_lr_ratio;  // cosine decay ends at lr * min_lr_ratio
    float weight_decay;  // AdamW decoupled decay, on matrices (not on norm gains)
    float beta1, beta2, adam_eps;
    float grad_clip;     // clip the global gradient norm to this; 0 = no clipping
    float init_std;      // weights ~ N(0, init_std); wo and w2 scaled by 1/sqrt(2L)
    float passkey_frac;  // fraction of training sequences that carry a passkey needle
    int eval_every;      // steps between validation evaluations (and log rows)
    int eval_tokens;     // validation tokens of the evaluations during training (evenly
                         // spaced windows); the last one uses all. 0 = all every time
    uint64_t seed;       // initialisation and batch sampling
} TrainConfig;

// Defaults for the optimiser fields (AdamW 0.9 / 0.95, eps 1e-8, wd 0.1, clip 1, std 0.02,
// min lr ratio 0.1); the caller sets sizes, steps, lr and seed.
TrainConfig train_config_default(void);
// Check a training config against a model config; 0 and a reason when they do not fit.
int train_config_validate(const TrainConfig *tc, const Config *c, char *why, size_t why_len);

// Learning rate of optimiser step `step` (0-based): linear warmup, then cosine to the floor.
float train_lr(const TrainConfig *tc, int step);

// One row of the training log (also kept in checkpoints, so a resumed log is whole).
typedef struct {
    int step;            // optimiser steps done
    double train_loss;   // mean training loss (nats / token) over the steps since the last row
    double val_loss;     // validation loss (nats / token)
    double val_bpb;      // validation bits per byte
    double lr;           // learning rate of the last step
    double tokens_per_s; // training throughput since the last row (evaluation excluded)
} TrainLogRow;

// Activations of one forward pass over B x T tokens (N = B * T rows), kept for the backward.
typedef struct {
    int max_rows;     // rows allocated per layer: tc.batch_size * tc.seq_len
    int B, T;         // of the last forward
    float *resid;     // (L + 1, N, C) residual stream entering each layer, and the last
    float *resid_mid; // (L, N, C) after the attention block
    float *xn_att;    // (L, N, C) rmsnorm(resid)
    float *q;         // (L, N, n_heads * hd) after RoPE
    float *k;         // (L, N, n_kv * hd) after RoPE
    float *v;         // (L, N, n_kv * hd)
    float *probs;     // (L, B, n_heads, T, T) attention probabilities (0 where not visible)
    float *att;       // (L, N, n_heads * hd) attention output
    float *xn_ffn;    // (L, N, C)
    float *gate;      // (L, N, H) w1 x
    float *up;        // (L, N, H) w3 x
    float *act;       // (L, N, H) silu(gate) * up
    float *xn_final;  // (N, C)
    float *logits;    // (N, V) logits; after a forward with targets, their softmax
    float *row_loss;  // (N) -log p(target), 0 where there is no target
    int *inputs;      // (N)
    int *targets;     // (N)
    // backward scratch
    float *d_resid, *d_xn, *d_q, *d_k, *d_v, *d_att, *d_gate, *d_up; // (N, width)
} Activations;

typedef struct {
    Model model;        // the weights being trained (owned)
    TrainConfig tc;
    float *grads;       // (n_params) like model.params
    Weights grad;       // mapped into grads
    float *adam_m, *adam_v;
    int step;           // optimiser steps done
    Activations acts;
    float *inv_freq;    // (hd / 2) RoPE frequencies
    float mscale;
    TrainLogRow *log;   // rows so far
    int n_log, cap_log;
} Trainer;

// A trainer for config c with weights initialised from tc->seed.
void trainer_init(Trainer *t, const Config *c, const TrainConfig *tc);
void trainer_free(Trainer *t);

// Forward pass over inputs (B, T) (B <= tc.batch_size, T <= tc.seq_len): every position
// p of a row sits at position p. With targets (B, T) (-1 = no target), returns the summed
// cross-entropy in nats and the logits buffer holds probabilities; without, returns 0 and
// acts.logits holds the logits (N, V).
double trainer_forward(Trainer *t, const int *inputs, const int *targets, int B, int T);
// Backward of scale * (the summed loss of the last forward), added to the gradients.
void trainer_backward(Trainer *t, float scale);
void trainer_zero_grad(Trainer *t);
// Clip, AdamW at train_lr(step), step++. Returns the gradient norm before clipping.
float trainer_update(Trainer *t);

// --- the layers' backward passes (exposed for the gradient-check tests) ---
// Each adds to its gradient outputs (dx, dw, ...) rather than overwriting them, except
// where noted. Shapes: N rows; x (N, n) etc.

// Backward of kernels.h's matmul y (N, d) = x (N, n) w^T, w (d, n):
// dx (N, n) += dy w, dw (d, n) += dy^T x. dx may be NULL.
void matmul_backward(float *dx, float *dw, const float *dy, const float *x, const float *w, int N, int n,
                     int d);
// y = rmsnorm(x) * w: dx (N, C) += ..., dw (C) += ...
void rmsnorm_backward(float *dx, float *dw, const float *dy, const float *x, const float *w, int N, int C,
                      float eps);
// Rows are B sequences of T positions; row r sits at position r % T. In place on x (N, heads * hd).
void rope_forward(float *x, int N, int T, int n_heads, int hd, const float *inv_freq, float mscale);
void rope_backward(float *dx, int N, int T, int n_heads, int hd, const float *inv_freq, float mscale);
// out = silu(gate) * up: d_gate, d_up (N, H) are overwritten.
void swiglu_backward(float *d_gate, float *d_up, const float *d_out, const float *gate, const float *up,
                     size_t n);
// Causal attention of B sequences of T positions, masked by attention_visible.
// q (B*T, nh*hd), k and v (B*T, nkv*hd), out (B*T, nh*hd), probs (B, nh, T, T).
void attention_forward(float *out, float *probs, const float *q, const float *k, const float *v, int B,
                       int T, const AttentionShape *s);
// dq, dk, dv are overwritten.
void attention_backward(float *dq, float *dk, float *dv, const float *d_out, const float *probs,
                        const float *q, const float *k, const float *v, int B, int T,
                        const AttentionShape *s);
// logits (N, V) -> probabilities in place; row_loss[r] = -log p(targets[r]) (0 when the
// target is -1). Returns the summed loss.
double crossentropy_forward(float *logits, float *row_loss, const int *targets, int N, int V);
// probabilities -> d logits of scale * summed loss, in place (rows without target: 0).
void crossentropy_backward(float *probs, const int *targets, int N, int V, float scale);

// --- data ---

typedef struct {
    const int *train;       // training token stream
    size_t n_train;
    const int *val;         // validation token stream
    size_t n_val;
    const Tokenizer *tok;   // BOS, passkey needles, and the bytes each token stands for
} TrainData;

// Micro-batch `micro` of step `step`: B sequences of T + 1 tokens, as inputs (B, T) and
// targets (B, T) shifted by one. A sequence is BOS then a random window of the training
// stream or, with probability passkey_frac, a passkey sequence (corpus.h) of random length in
// [passkey_min_len, T + 1] (haystacks of every size up to the context) continued by a window
// of the training stream. A pure function of (seed, step, micro), so a resumed run sees
// the same data.
void train_sample_batch(const TrainData *d, const TrainConfig *tc, int step, int micro, int *inputs,
                        int *targets);

// Validation loss: the validation stream cut into windows of T tokens, each after a BOS, so
// every token is predicted once; max_tokens < n_val evaluates evenly spaced windows holding
// about that many tokens. Returns nats per token; *bits_per_byte = total bits / the bytes of
// the predicted tokens.
double train_evaluate(Trainer *t, const TrainData *d, size_t max_tokens, double *bits_per_byte);

// Floating-point operations of training on B sequences of T tokens (forward + backward =
// 3 x forward).
double train_flops(const Config *c, int B, int T);

// --- checkpoints: weights, moments, step and log, keyed so a stale one is refused ---
// Written atomically; a failed write is fatal.
void trainer_save(const Trainer *t, const char *path, uint64_t key);
// Load into a trainer made with the same configs. -1 with err when the file is not a
// checkpoint of this key and size, or is damaged.
int trainer_load(Trainer *t, const char *path, uint64_t key, Error *err);

// --- the loop ---

typedef struct {
    const char *label;          // progress bar label (a TTY on stderr only)
    const char *log_path;       // CSV log, rewritten at every evaluation; NULL = none
    const char *checkpoint_path;// NULL = no checkpoints
    int checkpoint_every;       // steps
    uint64_t key;               // identifies the run in its checkpoints
    int stop_at;                // stop after this many steps (< tc.steps: a test interruption); 0 = all
} TrainRun;

typedef struct {
    double val_loss, val_bpb;   // at the end
    double seconds;             // training time of this call, evaluations excluded
    double wall_seconds;        // all of this call
    double tokens;              // tokens trained on in this call
    double flops;               // model FLOPs of those steps
    int resumed_from;           // step the run resumed at (0 = fresh)
} TrainResult;

// Train t from t->step to tc.steps (resuming from run->checkpoint_path when it holds this
// key), evaluating every eval_every steps and at the end. 0, or -1 with err.
int train_run(Trainer *t, const TrainData *d, const TrainRun *run, TrainResult *res, Error *err);
