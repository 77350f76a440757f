// model.h: a Llama-style decoder: config, host weights, and the one forward pass, which runs
// on any backend of ops.h through an Engine (the model placed on that backend).
//
//   tokens -> embedding -> L x [ RMSNorm -> attention (RoPE, MHA/GQA/MQA, window, sinks) -> +
//                                RMSNorm -> SwiGLU MLP -> + ] -> RMSNorm -> output head -> logits
//
// engine_forward runs every mode as rows: a prefill chunk (many positions of one sequence),
// a batched decode step (one position of each of B sequences), a full recompute (a prefill
// into an emptied cache). Sessions (session.h) drive it; experiments use sessions.
// Shapes use C = dim, H = hidden_dim, V = vocab_size, L = n_layers, hd = head_dim.
#pragma once

#include <stddef.h>
#include <stdint.h>

#include "kvcache.h"
#include "ops.h"
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
    int cache_positions; // 1: StreamingLLM's rule, RoPE at positions in the cache (ops.h); inference only
    int tied_embeddings; // output head shares the token embedding matrix
    float norm_eps;      // RMSNorm epsilon (1e-5)
    RopeConfig rope;
} Config;

// The host weights: fp32, the trainer's and the checkpoint files' form.
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

// ---- the model placed on a backend, and its one forward pass ---------------------------------

// One layer's weights as the forward reads them: matrices as typed tensors, norm gains fp32,
// all in the backend's memory.
typedef struct {
    const float *rms_att, *rms_ffn; // (C)
    Tensor wq;                      // (n_heads * hd, C)
    Tensor wk, wv;                  // (n_kv * hd, C)
    Tensor wo;                      // (C, n_heads * hd)
    Tensor w1, w3;                  // (H, C) gate, up
    Tensor w2;                      // (C, H) down
} LayerWeights;

// Scratch for a forward over up to max_rows rows whose caches hold up to max_keys
// positions, in backend memory unless marked host. Allocated once: a step allocates nothing.
typedef struct {
    int max_rows, max_keys;
    float *x;          // (R, C) residual stream
    float *xb;         // (R, C) normed input
    float *q;          // (R, n_heads * hd)
    float *k, *v;      // (R, n_kv * hd)
    float *att;        // (R, n_heads * hd) attention output
    float *proj;       // (R, C)
    float *hb, *hb2;   // (R, H) gate, up
    float *logits;     // (R, V)
    float *logits_host; // host (R, V): a batched step's logits before they go to each session
    void *matmul_scratch;
    void *attn_scratch;
    size_t attn_scratch_bytes;
    float *inv_freq;   // (hd / 2)
    float mscale;
    int *tokens, *pos; // (R)
    KVLayout *layouts; // (R) each row's cache layout
    KVLayout *layouts_host;
    float **keys, **values;           // (L, R): each row's cache rows of each layer
    int *pos_host;                    // host staging of pos
    float **keys_host, **values_host; // host staging of keys, values
} RunState;

// A model ready to run on one backend: its weights converted to `dtype` in the backend's
// memory (the CPU's fp32 weights are used in place), and its scratch. One Engine serves any
// number of sequences (sessions, session.h), one forward at a time.
typedef struct {
    const Ops *ops;
    Config config;
    DType dtype;
    Tensor token_embedding;  // (V, C)
    Tensor wcls;             // (V, C)
    const float *rms_final;  // (C)
    LayerWeights *layers;    // host array (L)
    void *matrices;          // owned backend copy of the weight block in dtype, or NULL (borrowed)
    float *norms;            // owned backend copy of the norm gains, or NULL (borrowed)
    RunState s;
} Engine;

// Place m on the backend ops with its matrices in dtype; scratch for max_rows rows and caches
// of up to max_keys positions. m must outlive the engine (the CPU reads its weights in place).
void engine_open(Engine *e, const Model *m, const Ops *ops, DType dtype, int max_rows, int max_keys);
void engine_close(Engine *e);
// Backend bytes of the weights as the forward reads them.
size_t engine_weight_bytes(const Engine *e);

// The forward pass, the same for every backend and mode: row r is token tokens[r] at position
// pos[r] of the sequence cached in caches[r], whose keys and values it writes there. Rows of
// one sequence are consecutive and in order (a prefill chunk); a batched decode step has one
// row per sequence. R <= max_rows, every row sees at most max_keys keys, and each cache can
// take its rows (kv_cache_fits).
// logits (host): (R, V) if all_logits, else (V) of the last row; NULL skips the head.
void engine_forward(Engine *e, KVCache **caches, const int *tokens, const int *pos, int R, float *logits,
                    int all_logits);
