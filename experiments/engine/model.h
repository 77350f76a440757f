// model.h: a Llama-style decoder: config, host weights, and the one forward pass, which runs
// on any backend of ops.h through an Engine (the model placed on that backend).
//
//   tokens -> embedding -> L x [ RMSNorm -> attention (RoPE, MHA/GQA/MQA/MLA, CLA, window, sinks)
//                                -> + RMSNorm -> SwiGLU MLP -> + ] -> RMSNorm -> output head -> logits
//
// Gemma 3 (Config.arch, arch.h) runs through the same pass with its options: the embedding
// scaled by sqrt(C), QK-norm (each head's q and k RMS-normed with gains shared by the heads,
// before RoPE), NEOX RoPE pairs, local and global layers with their own RoPE bases, GeGLU
// (tanh-GELU), and RMSNorms on each block's output before the residual add.
//
// MLA (DeepSeek-V2, kv_lora_rank = d_c > 0): keys and values come from a latent
// c_kv = W_dkv h (d_c); per head k_C = W_uk c_kv and v = W_uv c_kv (hd each); a decoupled RoPE
// key k_R = RoPE(W_kr h) (d_r = rope_dim) is shared by all heads; the query of a head is
// [q_C (hd); RoPE(q_R) (d_r)] and scores are scaled by 1/sqrt(hd + d_r). The cache holds only
// the rows [c_kv; k_R] (d_c + d_r floats per token and layer). No RMSNorm on c_kv (DeepSeek
// has one; this lab leaves it out). Two inference paths (Engine.mla_naive): absorbed (the
// default) folds W_uk into the query and W_uv into the output projection at engine_open, so
// attention is MQA-like over the latent rows; naive decompresses K and V from the cache of
// each sequence every forward, then runs ordinary attention.
// Local and global layers (Config.global_every, Gemma 3's 5:1 hybrid): every k-th layer attends
// to the whole causal context with its own RoPE base, the others to the window and sinks;
// config_layer_attention gives a layer's kind. A cache serves both kinds when it is
// contiguous (a ring cannot serve a global layer: kv_cache_fits says so per layer).
// CLA (cross-layer attention, Brandon et al. 2024, kv_share = s > 1): layer l uses the keys
// and values of layer s * (l / s), which alone has KV weights; the cache holds ceil(L / s)
// layers.
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

// The architectures the lab runs, one tensor table each (arch.c).
typedef enum { ARCH_LLAMA = 0, ARCH_GEMMA3, ARCH_COUNT } ArchId;

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
    int kv_lora_rank;    // MLA's latent d_c; 0 = not MLA (n_kv_heads is then n_heads)
    int rope_dim;        // MLA's decoupled RoPE dims d_r (even); 0 unless MLA
    int kv_share;        // CLA: adjacent layers per set of keys and values; 1 = no sharing
    // Local and global layers (Gemma 3, character.ai's hybrid): 0, every layer attends as window
    // and n_sink say; k > 0, layer l is global (full causal attention) when l % k == k - 1 and
    // local (window, n_sink) otherwise. Gemma 3 270M: k = 6, five local layers to one global.
    int global_every;
    float rope_theta_global; // global layers' RoPE base (Gemma 3: 1e6); 0 = rope.theta
    // 1: the global layers attend through the window and sinks too, keeping their RoPE base
    // (long_context's "all local" ablation of a hybrid; window = 0 is its "all global"); 0: as built.
    int global_windowed;
    // The architecture (arch.h): its table says which tensors a model has, and the forward
    // applies those it finds (QK-norm, post-norms); these options say how it runs the rest.
    ArchId arch;           // ARCH_LLAMA (0) or ARCH_GEMMA3
    float embed_scale;     // embedding rows times this (Gemma: sqrt(dim)); 0: none
    RopeStyle rope_style;  // NORM (Llama) or NEOX (Gemma) pairs (ops.h)
    GluAct ffn_act;        // the gate's activation: SiLU (Llama) or tanh-GELU (Gemma)
} Config;

// One layer's attention, as the config gives it.
typedef struct {
    int global;        // a global layer: RoPE at rope_theta_global where that is set
    int window, n_sink; // as attention_visible takes them: 0, 0 (full causal) on a global layer
                        // unless global_windowed
} LayerAttention;
LayerAttention config_layer_attention(const Config *c, int l);
// Does the config have local layers beside global ones (global_every > 1 and a window)?
int config_has_local_layers(const Config *c);
// Layers that attend to the whole causal context (no window): all L without a window, a
// hybrid's global layers, none in the all-local ablation.
int config_full_attention_layers(const Config *c);

// Layers with their own keys and values (and KV weights): ceil(L / kv_share).
static inline int config_kv_layers(const Config *c) { return (c->n_layers + c->kv_share - 1) / c->kv_share; }
// Floats one token adds to one KV layer's cache: 2 * n_kv * hd, or MLA's d_c + d_r.
static inline int config_kv_row(const Config *c) {
    return c->kv_lora_rank ? c->kv_lora_rank + c->rope_dim : 2 * c->n_kv_heads * c->head_dim;
}
// Bytes one token adds to the whole cache (fp32): config_kv_layers * config_kv_row * 4.
static inline size_t config_kv_bytes_per_token(const Config *c) {
    return (size_t)config_kv_layers(c) * config_kv_row(c) * sizeof(float);
}

// The host weights: fp32, the trainer's and the checkpoint files' form.
// All weights live in one float block, laid out in this order (llama2.c's order,
// per kind across layers), so that trainers can mirror it for gradients and moments.
// L_kv = config_kv_layers (L without CLA); qk = hd, or hd + d_r under MLA. The MLA tensors
// are empty in other models and wk / wv in MLA ones, so a plain model's layout is llama2.c's.
typedef struct {
    float *token_embedding; // (V, C)
    float *rms_att;         // (L, C)
    float *wq;              // (L, n_heads * qk, C); MLA: per head [q_C (hd); q_R (d_r)]
    float *wk;              // (L_kv, n_kv_heads * hd, C)
    float *wv;              // (L_kv, n_kv_heads * hd, C)
    float *wkv_a;           // MLA (L_kv, d_c + d_r, C): [W_dkv; W_kr] (llama.cpp's attn_kv_a_mqa)
    float *wkv_b;           // MLA (L_kv, n_heads * 2 * hd, d_c): per head [W_uk; W_uv] (attn_kv_b)
    float *wo;              // (L, C, n_heads * hd)
    float *rms_ffn;         // (L, C)
    float *w1;              // (L, H, C) gate
    float *w2;              // (L, C, H) down
    float *w3;              // (L, H, C) up
    float *rms_final;       // (C)
    float *wcls;            // (V, C); points at token_embedding when tied
    // Gemma 3's (NULL in a Llama): QK-norm gains shared by the heads, and the norms of each
    // block's output before its residual add
    float *rms_q, *rms_k;               // (L, hd)
    float *rms_post_att, *rms_post_ffn; // (L, C)
} Weights;

struct QuantWeights; // quant_weights.h
struct TensorSpec;   // arch.h

typedef struct {
    Config config;
    Weights weights;
    float *params;     // the block Weights points into (owned)
    size_t n_params;
    // The matrices as a quantised checkpoint stores them (owned; NULL for fp32 / fp16 files).
    // params then holds their dequantised values; engines run the quantised tensors.
    struct QuantWeights *quant;
} Model;

// Check a config for internal consistency; on failure return 0 and write the reason.
int config_validate(const Config *c, char *why, size_t why_len);
// A config with Llama defaults filled in (eps 1e-5, theta 10000, no scaling, untied).
Config config_default(void);

// Widths of the weight matrices, in floats (size_t: products of unvalidated dims stay exact).
typedef struct {
    size_t qk;     // query / key dims of a head: hd, or hd + d_r under MLA
    size_t q;      // n_heads * qk: wq's rows
    size_t o;      // n_heads * hd: the attention output, wo's columns
    size_t kv;     // n_kv * hd: wk's and wv's rows (0 under MLA)
    size_t latent; // d_c + d_r: wkv_a's rows, a latent cache row (0 unless MLA)
    size_t kv_b;   // n_heads * 2 * hd: wkv_b's rows (0 unless MLA)
    size_t L_kv;   // config_kv_layers
} ModelDims;
ModelDims model_dims(const Config *c);

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
// the head, plus Q.K^T and P.V over the visible keys (window and sinks respected). CLA
// layers without their own keys and values skip those projections; MLA counts the absorbed
// path (inference's default): latent queries, scores over d_c + d_r, P.V over d_c.
// Prefill of T tokens: (T, 0); one decode step at position p: (1, p); recomputing
// everything for position p: (p + 1, 0) with only the last row's head, see head_rows.
double model_forward_flops(const Config *c, int n_new, int n_past, int head_rows);
// The same with MLA's keys and values expanded from the latent once per token, the form the
// trainer runs (queries and keys of hd + d_r, values of hd); model_forward_flops otherwise.
double model_forward_flops_expanded(const Config *c, int n_new, int n_past, int head_rows);

// ---- the model placed on a backend, and its one forward pass ---------------------------------

// One layer's weights as the forward reads them: matrices as typed tensors, norm gains fp32,
// all in the backend's memory.
// A CLA layer without keys and values of its own has no wk / wv (or MLA kv tensors): it
// reads those of the layer before it that has them.
typedef struct {
    const float *rms_att, *rms_ffn; // (C)
    const float *rms_q, *rms_k;     // (hd) QK-norm gains, or NULL: no QK-norm
    const float *rms_post_att, *rms_post_ffn; // (C) the blocks' output norms, or NULL: none
    Tensor wq;                      // (n_heads * qk, C)
    Tensor wk, wv;                  // (n_kv * hd, C)
    Tensor wo;                      // (C, n_heads * hd)
    // MLA: the stored kv_a, and what engine_open folds (absorbed path) or expands (naive path)
    Tensor wkv_a;                   // (d_c + d_r, C)
    Tensor wq_abs;                  // (n_heads * (d_c + d_r), C): per head [W_uk^T W_qC; W_qR]
    Tensor wo_abs;                  // (C, n_heads * d_c): per head W_o,h W_uv,h
    Tensor k_dec;                   // (n_heads * (hd + d_r), d_c + d_r): latent row -> per head [k_C; k_R]
    Tensor v_dec;                   // (n_heads * hd, d_c + d_r): latent row -> per head v
    Tensor w1, w3;                  // (H, C) gate, up
    Tensor w2;                      // (C, H) down
} LayerWeights;

// Rows the output head takes at a time (engine_forward downloads each slice of logits).
#define HEAD_ROWS 16

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
    float *logits;     // (min(R, HEAD_ROWS), V): the head runs over HEAD_ROWS rows at a time
    float *logits_host; // host (logits_host_rows, V): engine_logits_host's buffer, grown on demand
    int logits_host_rows;
    void *matmul_scratch;
    void *attn_scratch;
    size_t attn_scratch_bytes;
    float *inv_freq;   // (hd / 2)
    float mscale;
    float *inv_freq_global; // global layers' frequencies when their base differs, else NULL
    float mscale_global;
    int *tokens, *pos; // (R)
    KVLayout *layouts; // (R) each row's cache layout
    KVLayout *layouts_host;
    void **keys, **values;            // (L_kv, R): each row's cache rows of each KV layer (the cache's dtype)
    int *pos_host;                    // host staging of pos
    void **keys_host, **values_host;  // host staging of keys, values
    float **key_scales, **value_scales;           // (L_kv, R): int8 caches' scales (NULL entries for fp32)
    float **key_scales_host, **value_scales_host; // host staging
    // MLA's naive path: one sequence's decompressed keys and values, and (R) pointers at them
    float *k_dec, *v_dec;             // (max_keys, n_heads * (hd + d_r)), (max_keys, n_heads * hd)
    void **k_dec_rows, **v_dec_rows;  // (R), every entry k_dec / v_dec
} RunState;

// The activation a matrix multiplies (its input columns): what arch.h's table names for each
// matrix, and what the forward hands an EngineTap, for calibration (AWQ, LLM.int8()).
typedef enum {
    INPUT_NONE = 0,
    INPUT_ATTN_NORM,  // the attention's normed input
    INPUT_ATTN_OUT,   // the attention's output (heads concatenated)
    INPUT_FFN_NORM,   // the MLP's normed input
    INPUT_FFN_ACT,    // the MLP's activation, gate(x) * up(x)
    INPUT_FINAL_NORM, // the final normed residual: the head's input
    INPUT_TIED_HEAD,  // the embedding: the final normed residual when the head is tied to it,
                      // else none (a table only looked up)
    INPUT_LATENT,     // MLA's latent c_kv
} TensorInput;

// A tap on the forward (calibration.h): when set, engine_forward calls it with each activation
// a matrix multiplies, before the matmul: rows (R, cols) of layer `layer` (-1 for the head's
// input) at positions pos (host), in backend memory (host memory on the CPU backend).
typedef void (*EngineTap)(void *ctx, TensorInput input, int layer, const float *x, const int *pos, int R, int cols);

// A model ready to run on one backend: its weights converted to `dtype` in the backend's
// memory (the CPU's fp32 weights are used in place), and its scratch. A quantised dtype
// (kernels/quant.h) quantises the host matrices round-to-nearest (quant_weights.h; CPU only); a
// model loaded from a quantised checkpoint runs its stored tensors when dtype is DTYPE_F32 (what
// every experiment asks for) or their own type, so every experiment runs a quantised file as is. One Engine serves any
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
    struct QuantWeights *quant; // the quantised matrices run, or NULL (owned when own_quant)
    int own_quant;
    float *norms;            // owned backend copy of the norm gains, or NULL (borrowed)
    float *mla_host;         // MLA: the folded and expanded matrices (host, owned)
    void *mla_matrices;      // their backend copy in dtype, or NULL (the CPU reads mla_host)
    int mla_naive;           // MLA: 0 = absorbed attention (the default), 1 = decompress K and V
    DType kv_dtype;          // the cache type sessions open with: DTYPE_F32 (the default) or DTYPE_I8
    struct ThreadGovernor *governor; // picks each decode step's threads (session.h), or NULL: fixed
    EngineTap tap;           // NULL, or called with every matmul's input (calibration)
    void *tap_ctx;
    RunState s;
} Engine;

// Place m on the backend ops with its matrices in dtype (e->dtype: the type run); scratch for max_rows rows and caches
// of up to max_keys positions. m must outlive the engine (the CPU reads its weights in place).
void engine_open(Engine *e, const Model *m, const Ops *ops, DType dtype, int max_rows, int max_keys);
void engine_close(Engine *e);
// Backend bytes of the weights as the forward reads them.
size_t engine_weight_bytes(const Engine *e);
// A host buffer for R rows of logits (R, V), the engine's own: a batched step's logits before
// they go to each session. Grown when R exceeds every earlier request, so steady decoding
// allocates nothing.
float *engine_logits_host(Engine *e, int R);
// The matrix of kind s (arch.h) that layer l's forward reads (an empty Tensor where the layer
// has none, as a CLA layer without keys and values of its own); s per layer and placed.
const Tensor *engine_layer_matrix(const Engine *e, int l, const struct TensorSpec *s);

// The forward pass, the same for every backend and mode: row r is token tokens[r] at position
// pos[r] of the sequence cached in caches[r], whose keys and values it writes there. Rows of
// one sequence are consecutive and in order (a prefill chunk); a batched decode step has one
// row per sequence. R <= max_rows, every row sees at most max_keys keys, and each cache can
// take its rows (kv_cache_fits).
// logits (host): (R, V) if all_logits, else (V) of the last row; NULL skips the head.
// caches[r] must be made by model_kv_cache_alloc for this config.
void engine_forward(Engine *e, KVCache **caches, const int *tokens, const int *pos, int R, float *logits,
                    int all_logits);

// A cache of `capacity` positions shaped for the model: config_kv_layers layers of
// n_kv * hd keys and values, or MLA's latent rows of d_c + d_r (values read from them). A model
// with local layers beside global ones (config_has_local_layers, no CLA) gets a hybrid cache:
// each local layer a ring of its window for forwards of at most chunk positions, the global
// layers contiguous. Other caches ignore chunk.
void model_kv_cache_alloc(KVCache *kv, const Ops *ops, const Config *c, int capacity, int chunk);
// Positions the cache of KV layer g holds in it: capacity, or a hybrid's local layer's ring.
size_t model_kv_cache_rows(const Config *c, int g, int capacity, int chunk);
