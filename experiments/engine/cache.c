// cache.c: the contiguous per-sequence KV cache (see cache.h).
#include "cache.h"

#include <stdlib.h>

#include "common.h"

static size_t layer_floats(const KVCache *c) {
    return (size_t)c->capacity * c->n_kv_heads * c->head_dim;
}

void kv_cache_alloc(KVCache *c, int n_layers, int n_kv_heads, int head_dim, int capacity) {
    c->n_layers = n_layers;
    c->n_kv_heads = n_kv_heads;
    c->head_dim = head_dim;
    c->capacity = capacity;
    c->len = 0;
    size_t n = (size_t)n_layers * layer_floats(c);
    c->key = mallocCheck(n * sizeof(float));
    c->value = mallocCheck(n * sizeof(float));
}

void kv_cache_free(KVCache *c) {
    free(c->key);
    free(c->value);
    c->key = c->value = NULL;
}

void kv_cache_reset(KVCache *c) { c->len = 0; }

size_t kv_cache_bytes(const KVCache *c) {
    return 2 * (size_t)c->n_layers * layer_floats(c) * sizeof(float);
}

float *kv_cache_layer_key(const KVCache *c, int layer) { return c->key + layer * layer_floats(c); }
float *kv_cache_layer_value(const KVCache *c, int layer) { return c->value + layer * layer_floats(c); }
