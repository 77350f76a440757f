// kvcache.c: the contiguous per-sequence KV cache (see kvcache.h).
#include "kvcache.h"

#include "common.h"

static size_t layer_floats(const KVCache *c) { return (size_t)c->capacity * c->n_kv_heads * c->head_dim; }

static void cache_alloc(KVCache *c, const Ops *ops, int n_layers, int n_kv_heads, int head_dim, int capacity,
                        int values) {
    c->ops = ops;
    c->n_layers = n_layers;
    c->n_kv_heads = n_kv_heads;
    c->head_dim = head_dim;
    c->capacity = capacity;
    c->len = 0;
    size_t bytes = (size_t)n_layers * layer_floats(c) * sizeof(float);
    c->key = ops->alloc(bytes);
    c->value = values ? ops->alloc(bytes) : NULL;
}

void kv_cache_alloc(KVCache *c, const Ops *ops, int n_layers, int n_kv_heads, int head_dim, int capacity) {
    cache_alloc(c, ops, n_layers, n_kv_heads, head_dim, capacity, 1);
}

// One "head" of row_dim: the rows hold keys, the values are read from them.
void kv_cache_alloc_latent(KVCache *c, const Ops *ops, int n_layers, int row_dim, int capacity) {
    cache_alloc(c, ops, n_layers, 1, row_dim, capacity, 0);
}

void kv_cache_free(KVCache *c) {
    c->ops->free(c->key);
    c->ops->free(c->value);
    c->key = c->value = NULL;
}

void kv_cache_truncate(KVCache *c, int n) {
    if (n < 0 || n > c->len) die("kv_cache_truncate: %d positions of %d", n, c->len);
    c->len = n;
}

size_t kv_cache_bytes(const KVCache *c) {
    return (c->value ? 2 : 1) * (size_t)c->n_layers * layer_floats(c) * sizeof(float);
}

float *kv_cache_layer_key(const KVCache *c, int layer) { return c->key + layer * layer_floats(c); }
float *kv_cache_layer_value(const KVCache *c, int layer) {
    return (c->value ? c->value : c->key) + layer * layer_floats(c);
}
