// kvcache.h: the KV cache of one sequence, in its backend's memory (ops.h).
// For each layer the keys and values of the cached positions,
//   key, value: (L, rows, n_kv_heads * head_dim), fp32,
// position p of layer l at row kv_layout_row(c->layout, p) of kv_cache_layer_key(c, l):
//   contiguous  row p, up to capacity positions;
//   ring        (window + sinks, StreamingLLM's cache) the first n_sink positions for good, then
//               a ring of window + chunk - 1 rows, so memory stays n_sink + window + chunk - 1
//               rows however long the stream: enough for every query of a forward of up to
//               chunk new positions to see its window (chunk 1, decoding: n_sink + window).
//   hybrid      (a model of local and global layers, Config.global_every = k) layer l is local
//               when l % k != k - 1 and keeps a ring of its window as above (local_rows rows),
//               the global layers are contiguous: memory grows only with the global layers.
// Its size is 2 * L * rows * n_kv_heads * head_dim * sizeof(float) bytes (rows: per layer). An int8 cache
// (kv_cache_alloc_typed, DTYPE_I8) holds int8 codes instead, plus one float scale per row and
// KV head for keys and for values: 2 * L * rows * n_kv_heads * (head_dim + 4) bytes. A latent cache (MLA)
// holds one row of row_dim floats per position and layer, (L, rows, row_dim), and its values
// are read from those rows (kv_cache_layer_value = kv_cache_layer_key): L * rows * row_dim *
// sizeof(float) bytes. With CLA, L is the model's layers that have keys and values of their
// own (model_kv_cache_alloc shapes a cache for a model). The forward pass reaches a cache
// only through the per-layer row pointers and layouts of a KVRows view (ops.h), so a paged one
// (paged.h: a view of a block pool through a block table) stands behind the same view.
// Tests: make build/tests/test_kvcache && ./build/tests/test_kvcache
#pragma once

#include <stddef.h>

#include "common.h"
#include "ops.h"

typedef struct {
    const Ops *ops;   // whose memory key and value live in
    int n_layers, n_kv_heads, head_dim;
    int capacity;     // rows allocated per layer (a hybrid's global layers)
    int len;          // positions fed (a ring keeps only its sinks and its last ones)
    KVLayout layout;  // ring == 0: contiguous (every layer's, but a hybrid's local layers')
    int window;       // ring: the attention window it was sized for (a hybrid's local layers')
    int global_every;      // hybrid: k > 0, layer l local unless l % k == k - 1; 0: one layout
    KVLayout local_layout; // hybrid: the local layers' ring
    int local_rows;        // hybrid: rows of a local layer
    DType dtype;      // the rows' elements: DTYPE_F32, or DTYPE_I8 (contiguous caches)
    void *key;        // (L, capacity, n_kv_heads * head_dim) elements of dtype
    void *value;      // (L, capacity, n_kv_heads * head_dim); NULL in a latent cache
    float *key_scale, *value_scale; // DTYPE_I8: (L, capacity, n_kv_heads); NULL otherwise
} KVCache;

void kv_cache_alloc(KVCache *c, const Ops *ops, int n_layers, int n_kv_heads, int head_dim, int capacity);
// A contiguous cache whose rows are of dtype: DTYPE_F32 (kv_cache_alloc) or DTYPE_I8.
void kv_cache_alloc_typed(KVCache *c, const Ops *ops, DType dtype, int n_layers, int n_kv_heads, int head_dim,
                          int capacity);
// A latent cache: rows of row_dim floats whose values are part of the keys' rows.
void kv_cache_alloc_latent(KVCache *c, const Ops *ops, int n_layers, int row_dim, int capacity);
// A ring cache for attention over a window of `window` positions plus n_sink sinks, fed at
// most `chunk` positions per forward: n_sink + window + chunk - 1 rows.
void kv_cache_alloc_ring(KVCache *c, const Ops *ops, int n_layers, int n_kv_heads, int head_dim, int n_sink,
                         int window, int chunk);
// A hybrid cache: every global_every-th layer contiguous (capacity positions), the others a ring
// for window + n_sink fed at most chunk positions per forward (n_sink + window + chunk - 1
// rows), or contiguous too when capacity is no more than that.
void kv_cache_alloc_hybrid(KVCache *c, const Ops *ops, int n_layers, int n_kv_heads, int head_dim, int capacity,
                           int global_every, int n_sink, int window, int chunk);
void kv_cache_free(KVCache *c);
// Keep the first n positions (n <= len): what follows is overwritten by the next forward. A
// ring rolls back at most chunk positions (older rows are overwritten), or to 0.
void kv_cache_truncate(KVCache *c, int n);
// Can one forward write positions pos .. pos + n - 1 of layer l for attention with this window
// and these sinks? Contiguous: they lie within capacity. Ring: the attention is windowed,
// within the ring's window, with no more sinks than it keeps, and n <= chunk. 0, or -1 with err.
int kv_cache_fits(const KVCache *c, int layer, int pos, int n, int window, int n_sink, Error *err);
// Layer l's layout (a hybrid's local layers: their ring).
KVLayout kv_cache_layer_layout(const KVCache *c, int layer);
// The most positions one forward may write: a ring's chunk, a contiguous cache's capacity (a
// hybrid: the smaller).
int kv_cache_max_chunk(const KVCache *c);
// Bytes the cache holds: 2 * rows * n_kv * hd * sizeof(element) summed over the layers (latent:
// one row each), plus an int8 cache's scales.
size_t kv_cache_bytes(const KVCache *c);
// Base of layer l's keys / values: (capacity, n_kv_heads * head_dim) elements of the cache's
// dtype, backend memory.
void *kv_cache_layer_key(const KVCache *c, int layer);
void *kv_cache_layer_value(const KVCache *c, int layer);
// An int8 cache's scales of layer l: (capacity, n_kv_heads); NULL for fp32.
float *kv_cache_layer_key_scale(const KVCache *c, int layer);
float *kv_cache_layer_value_scale(const KVCache *c, int layer);
