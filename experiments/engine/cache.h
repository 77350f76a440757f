// cache.h: the contiguous per-sequence KV cache.
// For each layer it holds keys and values of every cached position:
//   key, value: (L, capacity, n_kv_heads * head_dim), fp32.
// Its size is 2 * L * capacity * n_kv_heads * head_dim * sizeof(float) bytes.
#pragma once

#include <stddef.h>

typedef struct {
    int n_layers, n_kv_heads, head_dim;
    int capacity;   // positions allocated
    int len;        // positions filled
    float *key;     // (L, capacity, n_kv_heads * head_dim)
    float *value;   // (L, capacity, n_kv_heads * head_dim)
} KVCache;

void kv_cache_alloc(KVCache *c, int n_layers, int n_kv_heads, int head_dim, int capacity);
void kv_cache_free(KVCache *c);
void kv_cache_reset(KVCache *c);
// Bytes the cache holds: 2 * L * capacity * n_kv * hd * sizeof(element).
size_t kv_cache_bytes(const KVCache *c);
// Base of layer l's keys / values: (capacity, n_kv_heads * head_dim).
float *kv_cache_layer_key(const KVCache *c, int layer);
float *kv_cache_layer_value(const KVCache *c, int layer);
