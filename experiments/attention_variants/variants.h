// variants.h: the arithmetic of bin/attention_variants (main.c beside this file), as pure
// functions a test can check by hand: how many KV-cache elements and bytes a token costs
// each attention variant of the engine (the formula, and the allocator's bytes to check it
// against), how many tokens a fixed KV budget holds, the same for the real models of
// templates/model_presets.csv, and the zoo's record of a trained variant.
//
//   AvKv kv = av_kv(&model.config);                      // 2 * n_kv * hd floats per token-layer...
//   size_t measured = av_kv_allocated_bytes(ops_cpu(), &model.config, 4096);
//   long batch = av_budget_batch(1 << 30, kv.bytes_per_token, 4096);
//
// Conventions: the engine's caches hold fp32 (4-byte) elements; "per token-layer" is per
// token and per layer of the model, averaged over its layers (so a model whose layers share
// caches pays less per layer than it caches in each cached layer); budgets are bytes and
// their token counts are rounded down (a sequence fits whole or not at all).
#pragma once

#include <stddef.h>

#include "budget.h"
#include "common.h"
#include "model.h"

// The engine's KV-cache elements are fp32.
#define AV_ELEMENT_BYTES 4

// What one token adds to the cache of a model.
typedef struct {
    int cached_layers;              // layers that keep a cache of their own
    double elements_per_cached_layer; // floats one token adds to each of them: keys and values
    double elements_per_token_layer;  // cached_layers * elements_per_cached_layer / n_layers
    double bytes_per_token;           // over all layers, AV_ELEMENT_BYTES each
} AvKv;

// The formula: MHA, GQA and MQA cache a key and a value of head_dim for each of n_kv_heads
// KV heads, 2 * n_kv_heads * head_dim floats per token in each cached layer; MLA caches the
// latent and the decoupled RoPE key, kv_lora_rank + rope_dim; with cross-layer sharing only
// ceil(n_layers / kv_share) layers keep a cache.
AvKv av_kv(const Config *c);
// Bytes a cache of `capacity` positions takes by the formula: capacity * bytes_per_token.
size_t av_kv_formula_bytes(const Config *c, int capacity);
// A cache of `capacity` positions by layer kind, for a published model's table: a
// full-attention layer holds every position; a windowed layer of a hybrid cache (Gemma 3's
// local layers) its ring, whatever the capacity (model_kv_cache_rows, one-token forwards).
typedef struct {
    int full_layers;             // layers that attend to the whole context (config_full_attention_layers)
    double full_layer_bytes;     // one full-attention KV layer: capacity positions
    double windowed_layer_bytes; // one windowed KV layer of a hybrid cache; 0 without one
    double mha_bytes;            // the same shape with MHA in every layer, all of them full: the
                                 // baseline the model's attention saves against
} AvLayerKinds;
AvLayerKinds av_kv_layer_kinds(const Config *c, int capacity);
// Bytes the backend's allocator hands out for the cache a session of this model allocates
// (model_kv_cache_alloc) with `capacity` positions: ops->allocated_bytes across the allocation.
// The formula's bytes plus the allocator's own overhead (chunk headers, page rounding).
size_t av_kv_allocated_bytes(const Ops *ops, const Config *c, int capacity);

// Positions a KV budget of budget_bytes holds at bytes_per_token: floor(budget / per token).
long av_budget_tokens(double budget_bytes, double bytes_per_token);
// Sequences of `context` positions each that fit in the budget together: the largest batch
// with batch * context * bytes_per_token <= budget_bytes.
long av_budget_batch(double budget_bytes, double bytes_per_token, int context);

// A model of the presets table, cached in 2-byte elements (fp16 / bf16), beside its own shape
// with full MHA (as many KV heads as query heads: 2 * n_heads * head_dim per token-layer), the
// baseline its attention saves against.
typedef struct {
    char attention[16];              // "mha", "mqa", "gqa-<n_kv>", "mla"
    double elements_per_token_layer; // 2 * n_kv * hd, or MLA's kv_lora_rank + rope_head_dim
    double mha_elements_per_token_layer;
    double reduction_vs_mha;         // mha_elements / elements
    double bytes_per_token;          // every layer, 2 bytes an element (budget_kv_bytes_per_token)
    long context_fit;                // KV positions in memory_bytes, the cache alone
    double context_fit_beside_weights; // beside 2-byte weights (budget_kv_tokens_fit); 0 when they do not fit
} AvPresetKv;

AvPresetKv av_preset_kv(const ModelShape *m, double memory_bytes);
// The attention column of a shape: "mla" (kv_lora_rank > 0), "mha", "mqa" or "gqa-<n_kv_heads>".
void av_attention_name(char *out, size_t size, int n_heads, int n_kv_heads, int kv_lora_rank);

// The zoo's record of a trained model: bin/train's <name>.summary.csv in the models directory.
typedef struct {
    double params, val_bits_per_byte, passkey_accuracy;
} AvRecord;

// Read <dir>/<name>.summary.csv: exactly one row, named `name`. -1 with err naming the file
// and the fault otherwise.
int av_read_record(const char *dir, const char *name, AvRecord *out, Error *err);
