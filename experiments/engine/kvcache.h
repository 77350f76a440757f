// kvcache.h: the KV cache of one sequence, in its backend's memory (ops.h).
// Contiguous: for each layer the keys and values of every cached position,
//   key, value: (L, capacity, n_kv_heads * head_dim), fp32,
// so position p of layer l is row p of kv_cache_layer_key(c, l). Its size is
// 2 * L * capacity * n_kv_heads * head_dim * sizeof(float) bytes. A latent cache (MLA) holds
// one row of row_dim floats per position and layer, (L, capacity, row_dim), and its values
// are read from those rows (kv_cache_layer_value = kv_cache_layer_key): L * capacity * row_dim
// * sizeof(float) bytes. With CLA, L is the model's layers that have keys and values of their
// own (model_kv_cache_alloc shapes a cache for a model). The forward pass reaches a
// cache only through the per-layer row pointers of a KVRows view (ops.h), so a ring cache
// (window + sinks, bounded memory) or a paged one (block tables) can stand behind the same
// view.
#pragma once

#include <stddef.h>

#include "ops.h"

typedef struct {
    const Ops *ops; // whose memory key and value live in
    int n_layers, n_kv_heads, head_dim;
    int capacity;   // positions allocated
    int len;        // positions filled
    float *key;     // (L, capacity, n_kv_heads * head_dim)
    float *value;   // (L, capacity, n_kv_heads * head_dim); NULL in a latent cache
} KVCache;

void kv_cache_alloc(KVCache *c, const Ops *ops, int n_layers, int n_kv_heads, int head_dim, int capacity);
// A latent cache: rows of row_dim floats whose values are part of the keys' rows.
void kv_cache_alloc_latent(KVCache *c, const Ops *ops, int n_layers, int row_dim, int capacity);
void kv_cache_free(KVCache *c);
// Keep the first n positions (n <= len): what follows is overwritten by the next forward.
void kv_cache_truncate(KVCache *c, int n);
// Bytes the cache holds: 2 * L * capacity * n_kv * hd * sizeof(element) (latent: one row each).
size_t kv_cache_bytes(const KVCache *c);
// Base of layer l's keys / values: (capacity, n_kv_heads * head_dim), backend memory.
float *kv_cache_layer_key(const KVCache *c, int layer);
float *kv_cache_layer_value(const KVCache *c, int layer);
