// model.h: a Llama-style decoder: config, weights, run state, and the forward pass.
//
//   tokens -> embedding -> L x [ RMSNorm -> attention (RoPE, MHA/GQA/MQA, window, sinks) -> +
//                                RMSNorm -> SwiGLU MLP -> + ] -> RMSNorm -> output head -> logits
//
// Three ways to run it:
//   model_prefill      many tokens of one sequence at once, appending to its KV cache
//   model_decode       one token for each of B sequences, each against its own cache
//   model_forward_full all positions of a sequence from scratch, reusing nothing
//                      (the no-cache baseline: generation calls it once per new token)
// Shapes use C = dim, H = hidden_dim, V = vocab_size, L = n_layers, hd = head_dim.
#pragma once

#include <stddef.h>
#include <stdint.h>

#include "cache.h"
#include "rope.h"

typedef struct {
    int dim;             // C: residual stream width
    int hidden_dim;      // H: SwiGLU hidden width
    int n_layers;        // L
    int n_heads;         // query heads
    int n_kv_heads;      // key/value heads: = n_heads (MHA), divisor (GQA), 1 (MQA)
    int head_dim;        // hd
    int vocab_size;      // V
    int seq_len;         // maximum context
    int window;          // sliding attention window; 0 = full attention
    int n_sink;          // attention-sink tokens visible outside the window
    int tied_embeddings; // output head shares the token embedding matrix
    float norm_eps;      // RMSNorm epsilon (1e-5)
    RopeConfig rope;
} Config;

// All weights live in one float block, laid out in this order (llama2.c's order,
// per kind across layers), so that trainers can mirror it for gradients and moments.
typedef struct {
    float *token_embedding; // (V, C)
    float *rms_att;         // (L, C)
    float *wq;              // (L, n_heads * hd, C)
    float *wk;              // (L, n_kv_heads * hd, C)
    float *wv;              // (L, n_kv_heads * hd, C)
    float *wo;              // (L, C, n_heads * hd)
    float *rms_ffn;         // (L, C)
    float *w1;              // (L, H, C) gate
    float *w2;              // (L, C, H) down
    float *w3;              // (L, H, C) up
    float *rms_final;       // (C)
    float *wcls;            // (V, C); points at token_embedding when tied
} Weights;

typedef struct {
    Config config;
    Weights weights;
    float *params;     // the block Weights points into (owned)
    size_t n_params;
} Model;

// Check a config for internal consistency; on failure return 0 and write the reason.
int config_validate(const Config *c, char *why, size_t why_len);
// A config with Llama defaults filled in (eps 1e-5, theta 10000, no scaling, untied).
Config config_default(void);

// Number of floats in the weight block, and the mapping of pointers into it.
size_t model_param_count(const Config *c);
void weights_map(Weights *w, const Config *c, float *params);

// Allocate a model with uninitialised weights; model_init_random fills them with
// N(0, std) (norm gains 1), reproducibly from seed.
void model_alloc(Model *m, const Config *c);
void model_init_random(Model *m, uint64_t seed, float std);
void model_free(Model *m);

// Floating-point operations of a forward pass over n_new tokens that attend to n_past
// cached positions before them (multiply-add = 2 FLOPs): the matmuls of every layer and
// the head, plus Q.K^T and P.V over the visible keys (window and sinks respected).
// Prefill of T tokens: (T, 0); one decode step at position p: (1, p); recomputing
// everything for position p: (p + 1, 0) with only the last row's head, see head_rows.
double model_forward_flops(const Config *c, int n_new, int n_past, int head_rows);

// Scratch buffers for a forward pass over up to max_rows tokens at once.
typedef struct {
    int max_rows;
    float *x;       // (R, C) residual stream
    float *xb;      // (R, C) normed input
    float *q;       // (R, n_heads * hd)
    float *k;       // (R, n_kv * hd)
    float *v;       // (R, n_kv * hd)
    float *att;     // (R, n_heads * hd) attention output
    float *proj;    // (R, C)
    float *hb;      // (R, H) gate
    float *hb2;     // (R, H) up
    float *inv_freq; // (hd / 2)
    float mscale;
} RunState;

void runstate_alloc(RunState *s, const Config *c, int max_rows);
void runstate_free(RunState *s);

// Run n_tokens of one sequence starting at position cache->len; appends their keys and
// values to the cache. logits: (n_tokens, V) if all_logits, else (V) for the last token.
void model_prefill(Model *m, RunState *s, KVCache *cache, const int *tokens, int n_tokens,
                   float *logits, int all_logits);

// One new token for each of B sequences; caches[b] receives tokens[b] at position
// caches[b]->len. logits (B, V).
void model_decode(Model *m, RunState *s, KVCache **caches, const int *tokens, int B, float *logits);

// The no-cache baseline: all n_tokens positions computed from scratch. logits as in prefill.
void model_forward_full(Model *m, const int *tokens, int n_tokens, float *logits, int all_logits);
