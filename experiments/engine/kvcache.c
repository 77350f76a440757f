// kvcache.c: the per-sequence KV cache, contiguous or ring (see kvcache.h).
#include "kvcache.h"

static int is_local(const KVCache *c, int layer) {
    return c->global_every > 0 && layer % c->global_every != c->global_every - 1;
}
// Rows of layer l, and the rows of the layers before it.
static size_t rows_of(const KVCache *c, int layer) { return is_local(c, layer) ? (size_t)c->local_rows : (size_t)c->capacity; }
static size_t rows_before(const KVCache *c, int layer) {
    size_t rows = 0;
    for (int l = 0; l < layer; l++) rows += rows_of(c, l);
    return rows;
}
static size_t row_floats(const KVCache *c) { return (size_t)c->n_kv_heads * c->head_dim; }
static size_t element_bytes(const KVCache *c) { return c->dtype == DTYPE_I8 ? 1 : sizeof(float); }
static size_t row_scales(const KVCache *c) { return c->dtype == DTYPE_I8 ? (size_t)c->n_kv_heads : 0; }

KVLayout kv_cache_layer_layout(const KVCache *c, int layer) { return is_local(c, layer) ? c->local_layout : c->layout; }

// Fields first (a hybrid's local layers set by the caller), then the rows of every layer.
static void cache_init(KVCache *c, const Ops *ops, DType dtype, int n_layers, int n_kv_heads, int head_dim, int rows,
                       KVLayout layout, int window) {
    if (dtype != DTYPE_F32 && dtype != DTYPE_I8) die("kv cache: %s rows are not supported", dtype_name(dtype));
    c->dtype = dtype;
    c->ops = ops;
    c->n_layers = n_layers;
    c->n_kv_heads = n_kv_heads;
    c->head_dim = head_dim;
    c->capacity = rows;
    c->len = 0;
    c->layout = layout;
    c->window = window;
    c->global_every = 0;
    c->local_layout = (KVLayout){0};
    c->local_rows = 0;
}

static void cache_alloc_rows(KVCache *c, int values) {
    const Ops *ops = c->ops;
    size_t rows = rows_before(c, c->n_layers);
    size_t bytes = rows * row_floats(c) * element_bytes(c), scales = rows * row_scales(c);
    c->key = ops->alloc(bytes);
    c->value = values ? ops->alloc(bytes) : NULL;
    c->key_scale = scales ? ops->alloc(scales * sizeof(float)) : NULL;
    c->value_scale = scales ? ops->alloc(scales * sizeof(float)) : NULL;
}

void kv_cache_alloc(KVCache *c, const Ops *ops, int n_layers, int n_kv_heads, int head_dim, int capacity) {
    kv_cache_alloc_typed(c, ops, DTYPE_F32, n_layers, n_kv_heads, head_dim, capacity);
}

void kv_cache_alloc_typed(KVCache *c, const Ops *ops, DType dtype, int n_layers, int n_kv_heads, int head_dim,
                          int capacity) {
    cache_init(c, ops, dtype, n_layers, n_kv_heads, head_dim, capacity, (KVLayout){0}, 0);
    cache_alloc_rows(c, 1);
}

// One "head" of row_dim: the rows hold keys, the values are read from them.
void kv_cache_alloc_latent(KVCache *c, const Ops *ops, int n_layers, int row_dim, int capacity) {
    cache_init(c, ops, DTYPE_F32, n_layers, 1, row_dim, capacity, (KVLayout){0}, 0);
    cache_alloc_rows(c, 0);
}

void kv_cache_alloc_ring(KVCache *c, const Ops *ops, int n_layers, int n_kv_heads, int head_dim, int n_sink,
                         int window, int chunk) {
    if (window < 1 || n_sink < 0 || chunk < 1)
        die("kv_cache_alloc_ring: window %d, %d sinks, chunk %d", window, n_sink, chunk);
    int ring = window + chunk - 1;
    cache_init(c, ops, DTYPE_F32, n_layers, n_kv_heads, head_dim, n_sink + ring, (KVLayout){.sinks = n_sink, .ring = ring},
               window);
    cache_alloc_rows(c, 1);
}

void kv_cache_alloc_hybrid(KVCache *c, const Ops *ops, int n_layers, int n_kv_heads, int head_dim, int capacity,
                           int global_every, int n_sink, int window, int chunk) {
    if (window < 1 || n_sink < 0 || chunk < 1 || global_every < 1 || global_every > n_layers)
        die("kv_cache_alloc_hybrid: window %d, %d sinks, chunk %d, global every %d of %d layers", window, n_sink, chunk,
            global_every, n_layers);
    int ring = window + chunk - 1;
    cache_init(c, ops, DTYPE_F32, n_layers, n_kv_heads, head_dim, capacity, (KVLayout){0}, window);
    c->global_every = global_every;
    if (capacity > n_sink + ring) {
        c->local_layout = (KVLayout){.sinks = n_sink, .ring = ring};
        c->local_rows = n_sink + ring;
    } else { // a context no longer than the ring: the local layers keep it as the global ones do
        c->local_rows = capacity;
    }
    cache_alloc_rows(c, 1);
}

void kv_cache_free(KVCache *c) {
    c->ops->free(c->key);
    c->ops->free(c->value);
    c->ops->free(c->key_scale);
    c->ops->free(c->value_scale);
    c->key = c->value = c->key_scale = c->value_scale = NULL;
}

// The ring a cache keeps (its own, or a hybrid's local layers'); ring == 0: none.
static KVLayout ring_of(const KVCache *c) { return c->global_every ? c->local_layout : c->layout; }

int kv_cache_max_chunk(const KVCache *c) {
    KVLayout ring = ring_of(c);
    if (!ring.ring) return c->capacity;
    int chunk = ring.ring - c->window + 1;
    return c->global_every && c->capacity < chunk ? c->capacity : chunk;
}

void kv_cache_truncate(KVCache *c, int n) {
    if (n < 0 || n > c->len) die("kv_cache_truncate: %d positions of %d", n, c->len);
    // a ring's position len - 1 overwrote len - 1 - ring, which the window of the query at n
    // (n - window + 1 ..) needs unless len - n <= ring - window + 1 = chunk
    if (ring_of(c).ring && n > 0 && c->len - n > kv_cache_max_chunk(c))
        die("kv_cache_truncate: a ring cache rolls back at most %d positions, not %d", kv_cache_max_chunk(c),
            c->len - n);
    c->len = n;
}

int kv_cache_fits(const KVCache *c, int layer, int pos, int n, int window, int n_sink, Error *err) {
    KVLayout layout = kv_cache_layer_layout(c, layer);
    if (layout.blocks) {
        if (pos < 0 || n < 0 || pos + n > c->layout.n_blocks * c->layout.block_size)
            return error_set(err, "context of %d tokens does not fit in the %d blocks of %d positions mapped",
                             pos + n, c->layout.n_blocks, c->layout.block_size);
        return 0;
    }
    if (!layout.ring) {
        if (pos < 0 || n < 0 || pos + n > c->capacity)
            return error_set(err, "context of %d tokens does not fit in a KV cache of %d positions", pos + n,
                             c->capacity);
        return 0;
    }
    if (window == 0 || window > c->window || n_sink > layout.sinks)
        return error_set(err, "a ring cache of window %d and %d sinks cannot serve attention of window %d and %d sinks",
                         c->window, layout.sinks, window, n_sink);
    if (n < 0 || n > kv_cache_max_chunk(c))
        return error_set(err, "%d positions in one forward overwrite a ring cache's window (at most %d)", n,
                         kv_cache_max_chunk(c));
    return 0;
}

size_t kv_cache_bytes(const KVCache *c) {
    size_t rows = rows_before(c, c->n_layers);
    return (c->value ? 2 : 1) * rows * (row_floats(c) * element_bytes(c) + row_scales(c) * sizeof(float));
}

static void *layer_rows(const KVCache *c, void *base, int layer) {
    return (char *)base + rows_before(c, layer) * row_floats(c) * element_bytes(c);
}

void *kv_cache_layer_key(const KVCache *c, int layer) { return layer_rows(c, c->key, layer); }
void *kv_cache_layer_value(const KVCache *c, int layer) { return layer_rows(c, c->value ? c->value : c->key, layer); }
float *kv_cache_layer_key_scale(const KVCache *c, int layer) {
    return c->key_scale ? c->key_scale + rows_before(c, layer) * row_scales(c) : NULL;
}
float *kv_cache_layer_value_scale(const KVCache *c, int layer) {
    return c->value_scale ? c->value_scale + rows_before(c, layer) * row_scales(c) : NULL;
}
