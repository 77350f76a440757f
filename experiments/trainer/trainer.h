// trainer.h: training the Llama-style decoder of model.h from scratch: the forward pass with
// saved activations, the backward pass of every layer, AdamW with warmup + cosine learning
// rate, gradient clipping and accumulation, per-token loss weights, a data schedule of
// phases (text, copy sequences, passkeys with a widening needle-to-question gap), validation
// in bits per byte, retrieval diagnostics (passkey accuracy, prefix-matching score),
// checkpoint / resume, and the training loop with its CSV log.
//
// The loss of a step is the mean loss over its text targets plus, in its own mean, the loss
// over its answer targets (passkey answers, second copies of copy sequences): an answer is a
// few tokens of a sequence, so inside one mean over all tokens it would get almost no gradient.
//
// The forward computes what model_forward_full computes (same kernels for norms, matmuls,
// RoPE, SwiGLU; kernels.h's attention_forward, which keeps its probabilities for the backward).
// MLA trains in its naive form (keys and values decompressed from the latent per head, which
// the engine's absorbed path equals); CLA layers share their set's first layer's keys and
// values, and their gradients add up there.
// Gradients, and the two AdamW moments, live in float blocks laid out like Model.params,
// mapped with weights_map; a tied head's gradient therefore lands on the embedding's.
// Every layer's forward and backward, the cross-entropy and AdamW are kernels of kernels.h:
// matmuls (attention's included) through OpenBLAS sgemm, the rest OpenMP loops whose reductions
// do not depend on the number of threads. OpenBLAS's OpenMP build (the Makefile links it)
// shares the thread pool.
// With one thread a run is bit-reproducible from its seed, and resuming from a checkpoint
// gives the same weights as not stopping.
//
// Tests: make build/tests/test_train && ./build/tests/test_train
#pragma once

#include <stddef.h>
#include <stdint.h>

#include "common.h"
#include "corpus.h"
#include "kernels.h"
#include "model.h"
#include "tokenizer.h"

#define TRAIN_MAX_PHASES 4
#define TRAIN_MAX_LAYERS 16 // prefix-matching scores the log keeps (one per layer)

// One phase of a data schedule: what the sequences of its steps are made of.
typedef struct {
    int steps;          // optimiser steps of this phase; the last phase runs to the end
    int seq_len;        // tokens per sequence, 0 = the run's seq_len. A shorter one packs
                        // batch_size * seq_len(run) / seq_len sequences into a micro-batch, so a
                        // step trains on as many tokens (short contexts form the copy circuit fast)
    float copy_frac;    // fraction of sequences that are copy sequences (corpus.h)
    float passkey_frac; // fraction that are passkey sequences; the rest are text
    int gap_from;       // passkeys: at most this many filler tokens between needle and question
                        // at the phase's start; 0 = no limit
    float gap_widen;    // the limit widens linearly to the whole sequence over this fraction of
                        // the phase's steps (0: it stays gap_from)
    int filler_text;    // 1: copy and passkey sequences also train language modelling on their
                        // filler (text targets everywhere but the digit strings and the needle)
} TrainPhase;

typedef struct {
    int batch_size;      // B: sequences per micro-batch (of seq_len tokens)
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
    TrainPhase phases[TRAIN_MAX_PHASES]; // the data schedule, in order
    int n_phases;
    int eval_every;      // steps between validation evaluations (and log rows)
    int eval_tokens;     // validation tokens of the evaluations during training (evenly
                         // spaced windows); the last one uses all. 0 = all every time
    int eval_passkeys;   // held-out passkeys scored at each evaluation (random depths); 0 = none
    uint64_t seed;       // initialisation and batch sampling
} TrainConfig;

// Defaults for the optimiser fields (AdamW 0.9 / 0.95, eps 1e-8, wd 0.1, clip 1, std 0.02,
// min lr ratio 0.1) and a schedule of one all-text phase; the caller sets sizes, steps, lr
// and seed.
TrainConfig train_config_default(void);
// Check a training config against a model config; 0 and a reason when they do not fit.
int train_config_validate(const TrainConfig *tc, const Config *c, char *why, size_t why_len);

// Learning rate of optimiser step `step` (0-based): linear warmup, then cosine to the floor.
float train_lr(const TrainConfig *tc, int step);

// The phase of step `step` (0-based); *into = steps of the phase before this one, *length =
// the phase's steps (the last phase's run to tc->steps).
const TrainPhase *train_phase(const TrainConfig *tc, int step, int *into, int *length);
// Sequences and tokens per sequence of a micro-batch in this phase.
void train_phase_shape(const TrainConfig *tc, const TrainPhase *p, int *B, int *T);
// The needle-to-question gap limit of passkeys at step `step` (filler tokens); 0 = none.
int train_passkey_gap(const TrainConfig *tc, int step);

// One row of the training log (also kept in checkpoints, so a resumed log is whole).
typedef struct {
    int step;            // optimiser steps done
    double train_loss;   // mean objective (text mean + answer mean) over the steps since the last row
    double text_loss;    // mean loss of text targets (nats / token) over those steps; NAN: none
    double answer_loss;  // mean loss of answer targets over those steps; NAN: none
    double val_loss;     // validation loss (nats / token)
    double val_bpb;      // validation bits per byte
    double lr;           // learning rate of the last step
    double tokens_per_s; // training throughput since the last row (evaluation excluded)
    double passkey_exact, passkey_tokens; // passkey_evaluate of eval_passkeys keys; NAN: none
    double prefix_match[TRAIN_MAX_LAYERS]; // train_prefix_matching, per layer
} TrainLogRow;

// Activations of one forward pass over B x T tokens (N = B * T rows), kept for the backward.
// qk = hd (MLA: hd + d_r); keys and values are kept per KV layer (L_kv = config_kv_layers): MLA's
// as the attention reads them, decompressed: kw = n_heads * qk and vw = n_heads * hd (else
// kw = vw = n_kv * hd).
typedef struct {
    int max_rows;     // rows allocated per layer: tc.batch_size * tc.seq_len
    int B, T;         // of the last forward
    float *resid;     // (L + 1, N, C) residual stream entering each layer, and the last
    float *resid_mid; // (L, N, C) after the attention block
    float *xn_att;    // (L, N, C) rmsnorm(resid)
    float *q;         // (L, N, n_heads * qk) after RoPE (MLA: per head [q_C; RoPE(q_R)])
    float *k;         // (L_kv, N, kw) after RoPE (MLA: per head [k_C; RoPE(k_R)])
    float *v;         // (L_kv, N, vw)
    float *kv_latent; // MLA (L_kv, N, d_c + d_r): [c_kv; RoPE(k_R)], what the engine caches
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
    float *d_k_part, *d_v_part; // CLA (N, kw), (N, vw): one layer's share of a set's d keys, d values
    float *kv_b;                // MLA (N, n_heads * 2 hd): W_kv_b c_kv, then its gradient
    float *d_latent;            // MLA (N, d_c + d_r)
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
// Forward pass over inputs (B, T) (B * T <= tc.batch_size * tc.seq_len, T <= tc.seq_len): every position
// p of a row sits at position p. With targets (B, T) (-1 = no target), returns the summed
// cross-entropy in nats and the logits buffer holds probabilities; without, returns 0 and
// acts.logits holds the logits (N, V).
double trainer_forward(Trainer *t, const int *inputs, const int *targets, int B, int T);
// Backward of scale * sum_r weights[r] * loss_r over the rows of the last forward (weights
// NULL: all 1), added to the gradients.
void trainer_backward(Trainer *t, const float *weights, float scale);
void trainer_zero_grad(Trainer *t);
// Clip, AdamW at train_lr(step), step++. Returns the gradient norm before clipping.
float trainer_update(Trainer *t);

// (The layers' kernels, forward and backward, the cross-entropy and AdamW are kernels.h's:
// matmul_backward, rmsnorm_backward, rope_forward / rope_backward, swiglu_backward,
// attention_forward / attention_backward, crossentropy_forward / crossentropy_backward, adamw.)

// --- data ---

typedef struct {
    const int *train;       // training token stream
    size_t n_train;
    const int *val;         // validation token stream
    size_t n_val;
    const Tokenizer *tok;   // BOS, passkey needles, and the bytes each token stands for
} TrainData;

// What a target is there for: the loss of a step is the mean over its TARGET_TEXT targets
// plus the mean over its TARGET_ANSWER targets.
enum { TARGET_NONE, TARGET_TEXT, TARGET_ANSWER };

// One micro-batch: B sequences of T tokens (the phase's shape), at most tc.batch_size *
// tc.seq_len tokens.
typedef struct {
    int B, T;
    int *inputs, *targets;  // (B, T); targets -1 where there is none
    unsigned char *kind;    // (B, T) TARGET_*
    float *weights;         // (B, T) loss weights: 1 / (targets of the kind in the micro-batch)
    int n_text, n_answer;   // targets of each kind
} Batch;

void batch_alloc(Batch *b, const TrainConfig *tc);
void batch_free(Batch *b);

// Micro-batch `micro` of step `step`, in the shape of the step's phase. Each sequence is drawn
// by the phase's fractions:
//   - copy: a copy sequence of T + 1 tokens (corpus.h), answer targets on the second copy
//     after its first token;
//   - passkey: a passkey sequence of T + 1 tokens with a training key, the needle within
//     train_passkey_gap filler tokens of the question, answer targets on the answer;
//   - in both, with filler_text, text targets on the rest but the first copy, the second
//     copy's first token and the needle (none there); without, no other targets;
//   - text: BOS then a random window of the training stream, text targets everywhere.
// Inputs are the first T tokens, targets the last T. A pure function of (seed, step, micro),
// so a resumed run sees the same data.
void train_sample_batch(const TrainData *d, const TrainConfig *tc, int step, int micro, Batch *b);

// Validation loss: the validation stream cut into windows of T tokens, each after a BOS, so
// every token is predicted once; max_tokens < n_val evaluates evenly spaced windows holding
// about that many tokens. Returns nats per token; *bits_per_byte = total bits / the bytes of
// the predicted tokens.
double train_evaluate(Trainer *t, const TrainData *d, size_t max_tokens, double *bits_per_byte);

// passkey_evaluate (corpus.h) through the training forward: n_samples held-out passkeys of
// ctx <= tc.seq_len tokens from seed and the filler stream, batched, scored with the answer
// fed back (which is what greedy decoding reproduces while it is right), so the same seed
// gives the same score as the engine's evaluator at a fraction of the time. 0, or -1 with err.
int train_passkey_score(Trainer *t, const Tokenizer *tok, const int *filler, size_t n_filler, int ctx, float depth,
                        int n_samples, uint64_t seed, PasskeyScore *score, Error *err);

// Prefix-matching score (Olsson et al. 2022) of every head: over n_seqs sequences of T =
// tc.seq_len tokens, bos then a string of (T - 1) / 2 random tokens repeated once (and one
// more random token when T is even), the mean attention from each token of the second copy
// to the token after its first occurrence. best[l] (n_layers) = the best head's score in
// layer l: an induction head scores near 1, uniform attention 1 / (position + 1).
void train_prefix_matching(Trainer *t, int bos, int n_seqs, uint64_t seed, double *best);

// Floating-point operations of training on B sequences of T tokens (forward + backward =
// 3 x forward, MLA in the trainer's expanded form: model_forward_flops_expanded).
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
