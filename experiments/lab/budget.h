// budget.h: the hardware budget of LLM inference (project 16), as pure functions on plain
// structs: for a model's shape, a precision and a machine's peak figures, how many bytes the
// weights and the KV cache take, how many KV tokens fit beside the weights, and lower bounds
// on decode and prefill time from the roofline model
//
//   time >= max(FLOPs / peak FLOP/s, bytes moved / memory bandwidth)
//
// Also reads the two reference tables the budget is computed over: hardware datasheets
// (templates/hardware.csv) and model shapes (templates/model_presets.csv). In the harness, not
// the engine, because it is the experiments' arithmetic over the report's reference tables, not
// the model runtime: hardware_budget, attention_variants and serving compute with it.
//
//   ModelShape *models; HardwareSpec *hws; int n_models, n_hws;
//   if (budget_load_models("templates/model_presets.csv", &models, &n_models, &err)) die("%s", err.msg);
//   Budget b = budget_compute(&models[i], &hws[j], (Precision){NUM_BF16, NUM_BF16}, 610, 64, 1024);
//
// Conventions: bytes are bytes (1 GB = 1e9 bytes; GiB = 2^30), a multiply-add is 2 FLOPs,
// "context" is the number of tokens a decode step attends to (the KV positions it reads).
#pragma once

#include "common.h"
#include "model.h"

typedef enum { NUM_FP32, NUM_BF16, NUM_INT8, NUM_INT4 } NumFormat;

double num_format_bytes(NumFormat d); // 4, 2, 1, 0.5
const char *num_format_name(NumFormat d);

// Weights stored as `weights`; activations, the KV cache and the math in `act`. int8/int4
// weights are weight-only quantisation (dequantised into bf16 math; their scales are not
// counted), so act is bf16 or fp32.
typedef struct {
    NumFormat weights;
    NumFormat act;
} Precision;

// What the formulas need to know about a model. Attention: MHA (n_kv_heads = n_heads), GQA
// (a divisor), MQA (1), or MLA (kv_lora_rank > 0: the cache holds a kv_lora_rank latent and a
// rope_head_dim decoupled RoPE key per layer, shared by all heads). Mixture of experts:
// n_params_active < n_params.
typedef struct {
    char name[64];
    double n_params;        // every parameter, all experts included
    double n_params_active; // the parameters one token's forward pass uses
    int n_layers, dim, hidden_dim, n_heads, n_kv_heads, head_dim, vocab_size;
    int max_context;        // the context the model was trained for
    int window;             // sliding attention window; 0 = full attention
    int global_every;       // a local/global hybrid (Gemma 3: 6): every k-th layer attends to the
                            // whole context, the others to the window; 0 = every layer as window says
    int kv_lora_rank;       // MLA latent width; 0 = not MLA
    int rope_head_dim;      // MLA decoupled RoPE key width (0 unless MLA)
    int tied_embeddings;    // the output head is the embedding matrix
    char source[512];       // where the numbers come from
} ModelShape;

typedef struct {
    char name[64];
    char kind[16];             // gpu | cpu
    double memory_bytes;       // device memory (GB as the datasheet writes it, x 1e9)
    double bandwidth_bytes_s;  // memory bandwidth
    double bf16_flop_s;        // dense (no 2:4 sparsity) bf16 tensor FLOP/s
    double fp32_flop_s;        // fp32 FLOP/s
    char source[512];
} HardwareSpec;

// The engine's model as a shape (dense, never MLA): what the budget knows of our own models
// and of the published ones the engine runs (a hybrid's global_every kept).
ModelShape budget_shape_from_config(const Config *c, const char *name, const char *source);

// --- memory -------------------------------------------------------------------------------

double budget_weight_bytes(const ModelShape *m, NumFormat weights);
// Bytes one token adds to the KV cache: 2 * L * n_kv_heads * head_dim * bytes (keys and
// values), or for MLA L * (kv_lora_rank + rope_head_dim) * bytes.
double budget_kv_bytes_per_token(const ModelShape *m, NumFormat kv);
// KV positions one sequence of `context` tokens keeps per layer, averaged over the layers:
// min(context, window) with a window; a hybrid's global layers keep the whole context.
double budget_kv_tokens_per_sequence(const ModelShape *m, int context);
// KV tokens that fit in memory beside the weights: floor((memory - weights) / per token),
// 0 when the weights alone do not fit.
double budget_kv_tokens_fit(const ModelShape *m, const HardwareSpec *hw, Precision p);

// --- work -----------------------------------------------------------------------------------

// Parameters a token multiplies with: the active ones less the input embedding table (a
// row lookup, unless tied to the head) and the RMSNorm gains (2 per layer and a final one).
double budget_matmul_params(const ModelShape *m);
// FLOPs of Q.K^T and P.V for one query-key pair, summed over layers and heads. MLA decode is
// taken in its absorbed form (scores over latent + RoPE key, values over the latent: 2 H
// (2 r + rope) per layer); MLA prefill expands keys and values per head (2 H (hd + rope) +
// 2 H hd per layer); otherwise 4 H hd per layer.
double budget_attention_flops_per_pair(const ModelShape *m, int decode);
// One decode step of `batch` sequences, each attending to `context` tokens.
double budget_decode_flops(const ModelShape *m, int batch, int context);
// Weights read by that step, all of them but the input embedding table: a dense model reads
// every weight once per step; a mixture of experts min(total, batch x active) parameters
// (every token routed to experts no other token uses). Plus each sequence's KV positions.
double budget_decode_bytes(const ModelShape *m, Precision p, int batch, int context);
// Prefill of `tokens` tokens of one sequence (causal, window respected): the weights read
// once and the KV written; activations are assumed to stay on chip.
double budget_prefill_flops(const ModelShape *m, int tokens);
double budget_prefill_bytes(const ModelShape *m, Precision p, int tokens);
// One decode step's SwiGLU MLP of one layer at `batch` rows (dense MLP of width
// hidden_dim): 6 B C H FLOPs over 3 C H weights and the (B, C) input and output rows.
double budget_mlp_flops(const ModelShape *m, int batch);
double budget_mlp_bytes(const ModelShape *m, Precision p, int batch);

// --- the roofline ---------------------------------------------------------------------------

// Peak FLOP/s for the precision's math: fp32 or bf16 (int8/int4 weights use bf16 math).
double budget_peak_flop_s(const HardwareSpec *hw, Precision p);
// The intensity (FLOP/byte) above which the hardware is compute-bound: peak / bandwidth.
double budget_ridge(const HardwareSpec *hw, Precision p);

typedef struct {
    double flops, bytes;
    double intensity;          // flops / bytes
    double attainable_flop_s;  // min(peak, intensity x bandwidth)
    double time_s;             // max(flops / peak, bytes / bandwidth): the lower bound
    int compute_bound;         // flops / peak > bytes / bandwidth
} Roofline;

Roofline budget_roofline(const HardwareSpec *hw, Precision p, double flops, double bytes);

// The budget table's row for one model x precision x hardware.
typedef struct {
    double weight_bytes, kv_bytes_per_token, kv_tokens_fit;
    double kv_bytes_large;  // KV of large_batch sequences of `context` tokens
    int fits_large;         // weights + that KV fit in memory
    Roofline decode_1;      // one decode step at batch 1 with its KV
    Roofline decode_large;  // one decode step at large_batch with their KV
    double throughput_tok_s; // large_batch / decode_large.time_s
    Roofline prefill;       // prefill of prefill_tokens
} Budget;

Budget budget_compute(const ModelShape *m, const HardwareSpec *hw, Precision p, int context, int large_batch,
                      int prefill_tokens);

// --- reference tables ---------------------------------------------------------------------

// Read a table of HardwareSpec / ModelShape rows. Columns are found by name in the header
// (order free, extra columns ignored); blank lines are skipped. Any fault (missing file or
// column, wrong field count, a number that is not one or out of range, a duplicate name,
// an inconsistent shape) returns -1 with err naming the file and line. *out is malloc'd.
//   hardware.csv:      name,kind,memory_bytes,bandwidth_bytes_s,bf16_flop_s,fp32_flop_s,source
//   model_presets.csv: name,n_params,n_params_active,n_layers,dim,hidden_dim,n_heads,n_kv_heads,
//                      head_dim,vocab_size,max_context,window,kv_lora_rank,rope_head_dim,
//                      tied_embeddings,source
int budget_load_hardware(const char *path, HardwareSpec **out, int *n, Error *err);
int budget_load_models(const char *path, ModelShape **out, int *n, Error *err);
