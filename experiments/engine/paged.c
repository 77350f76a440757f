// paged.c: the paged KV cache: block pool, block tables, fork and copy-on-write (see paged.h).
#include "paged.h"

#include <stdlib.h>
#include <string.h>

#include "prefix_cache.h"

static size_t layer_floats(const KVPool *p) { return (size_t)p->n_blocks * p->block_size * p->kv_dim; }

void kv_pool_alloc(KVPool *p, const Ops *ops, int n_layers, int kv_dim, int block_size, int n_blocks) {
    if (block_size < 1 || n_blocks < 1 || n_layers < 0 || kv_dim < 0)
        die("kv_pool_alloc: %d blocks of %d positions, %d layers of %d", n_blocks, block_size, n_layers, kv_dim);
    p->ops = ops;
    p->n_layers = n_layers;
    p->kv_dim = kv_dim;
    p->block_size = block_size;
    p->n_blocks = n_blocks;
    size_t bytes = n_layers * layer_floats(p) * sizeof(float);
    p->key = bytes ? ops->alloc(bytes) : NULL;
    p->value = bytes ? ops->alloc(bytes) : NULL;
    p->ref = calloc(n_blocks, sizeof(int));
    p->indexed = calloc(n_blocks, 1);
    p->index = NULL;
    p->free_list = mallocCheck(n_blocks * sizeof(int));
    if (!p->ref || !p->indexed) die("kv_pool_alloc: out of memory for %d reference counts", n_blocks);
    // the stack pops block 0 first, so a fresh pool hands out blocks in order
    for (int b = 0; b < n_blocks; b++) p->free_list[b] = n_blocks - 1 - b;
    p->n_free = n_blocks;
}

void kv_pool_free(KVPool *p) {
    p->ops->free(p->key);
    p->ops->free(p->value);
    if (p->index) die("kv_pool_free: close its prefix cache first");
    free(p->ref);
    free(p->free_list);
    free(p->indexed);
    p->key = p->value = NULL;
    p->ref = p->free_list = NULL;
    p->indexed = NULL;
}

size_t kv_pool_bytes(const KVPool *p) { return 2 * (size_t)p->n_layers * layer_floats(p) * sizeof(float); }

int kv_pool_available(const KVPool *p) { return p->n_free + (p->index ? p->index->n_evictable : 0); }

// A free block, or else one the prefix cache evicts.
static int block_take(KVPool *p) {
    int b = p->n_free > 0 ? p->free_list[--p->n_free] : p->index ? prefix_cache_evict(p->index) : -1;
    if (b < 0) die("kv_pool: no free block (callers check paged_seq_blocks_needed first)");
    if (p->ref[b] != 0 || p->indexed[b]) die("kv_pool: block %d taken while held %d times", b, p->ref[b]);
    p->ref[b] = 1;
    return b;
}

static void block_hold(KVPool *p, int b) {
    if (p->ref[b]++ == 0 && p->indexed[b]) prefix_cache_used(p->index, b);
}

static void block_drop(KVPool *p, int b) {
    if (b < 0 || b >= p->n_blocks || p->ref[b] <= 0) die("kv_pool: block %d dropped but not held", b);
    if (--p->ref[b] > 0) return;
    if (p->indexed[b]) prefix_cache_unused(p->index, b);
    else p->free_list[p->n_free++] = b;
}

// A write into block b must go to a copy: another sequence holds it, or it is a cached prefix.
static int block_shared(const KVPool *p, int b) { return p->ref[b] > 1 || p->indexed[b]; }

// Copy block src's rows of every layer, keys and values, to block dst (backend to backend).
static void block_copy(KVPool *p, int dst, int src) {
    if (!p->key) return; // bookkeeping only
    size_t n = (size_t)p->block_size * p->kv_dim;
    for (int l = 0; l < p->n_layers; l++) {
        size_t base = l * layer_floats(p);
        p->ops->convert(p->key + base + dst * n, DTYPE_F32, p->key + base + src * n, DTYPE_F32, n);
        p->ops->convert(p->value + base + dst * n, DTYPE_F32, p->value + base + src * n, DTYPE_F32, n);
    }
}

static void table_upload(PagedSeq *s) {
    if (s->cache.layout.n_blocks > 0)
        s->pool->ops->upload(s->table_dev, s->table, (size_t)s->cache.layout.n_blocks * sizeof(int));
}

void paged_seq_open(PagedSeq *s, KVPool *p, int max_positions) {
    s->pool = p;
    s->max_blocks = kv_pool_blocks_for(p, max_positions);
    if (s->max_blocks < 1) s->max_blocks = 1;
    s->table = mallocCheck(s->max_blocks * sizeof(int));
    s->table_dev = p->ops->alloc(s->max_blocks * sizeof(int));
    KVCache *c = &s->cache;
    memset(c, 0, sizeof *c);
    c->ops = p->ops;
    c->n_layers = p->n_layers;
    c->n_kv_heads = 1; // rows of kv_dim: the layer stride is what kv_cache_layer_key needs
    c->head_dim = p->kv_dim;
    c->capacity = p->n_blocks * p->block_size;
    c->key = p->key;
    c->value = p->value;
    c->layout.block_size = p->block_size;
    c->layout.blocks = s->table_dev;
}

void paged_seq_release(PagedSeq *s) { paged_seq_truncate(s, 0); }

void paged_seq_close(PagedSeq *s) {
    paged_seq_release(s);
    free(s->table);
    s->pool->ops->free(s->table_dev);
    s->table = s->table_dev = NULL;
}

int paged_seq_blocks_needed(const PagedSeq *s, int pos, int n) {
    if (n <= 0) return 0;
    int first = pos / s->pool->block_size, last = (pos + n - 1) / s->pool->block_size, need = 0;
    for (int i = first; i <= last; i++) need += i >= s->cache.layout.n_blocks || block_shared(s->pool, s->table[i]);
    return need;
}

int paged_seq_prepare(PagedSeq *s, int pos, int n) {
    KVPool *p = s->pool;
    if (n <= 0) return 0;
    if (pos < 0 || pos > s->cache.len || kv_pool_blocks_for(p, pos + n) > s->max_blocks) return -1;
    if (paged_seq_blocks_needed(s, pos, n) > kv_pool_available(p)) return -1;
    int first = pos / p->block_size, last = (pos + n - 1) / p->block_size;
    for (int i = first; i <= last; i++) {
        if (i >= s->cache.layout.n_blocks) {
            s->table[s->cache.layout.n_blocks++] = block_take(p);
        } else if (block_shared(p, s->table[i])) { // the first divergent write into a shared block
            int mine = block_take(p);
            block_copy(p, mine, s->table[i]);
            block_drop(p, s->table[i]);
            s->table[i] = mine;
        }
    }
    table_upload(s);
    return 0;
}

void paged_seq_fork(PagedSeq *dst, const PagedSeq *src) {
    if (dst->pool != src->pool || dst->cache.layout.n_blocks || dst->max_blocks < src->cache.layout.n_blocks)
        die("paged_seq_fork: the copy must be an empty sequence of the same pool with room for %d blocks",
            src->cache.layout.n_blocks);
    for (int i = 0; i < src->cache.layout.n_blocks; i++) {
        dst->table[i] = src->table[i];
        block_hold(src->pool, src->table[i]);
    }
    dst->cache.layout.n_blocks = src->cache.layout.n_blocks;
    dst->cache.len = src->cache.len;
    table_upload(dst);
}

void paged_seq_share_block(PagedSeq *s, int b, int len) {
    KVPool *p = s->pool;
    int i = s->cache.layout.n_blocks;
    if (b < 0 || b >= p->n_blocks || i >= s->max_blocks || len <= i * p->block_size || len > (i + 1) * p->block_size)
        die("paged_seq_share_block: block %d as block %d of %d ending at position %d", b, i, s->max_blocks, len);
    block_hold(p, b);
    s->table[s->cache.layout.n_blocks++] = b;
    s->cache.len = len;
    table_upload(s);
}

void paged_seq_truncate(PagedSeq *s, int n) {
    if (n < 0 || n > s->cache.len) die("paged_seq_truncate: %d positions of %d", n, s->cache.len);
    int keep = kv_pool_blocks_for(s->pool, n);
    while (s->cache.layout.n_blocks > keep) block_drop(s->pool, s->table[--s->cache.layout.n_blocks]);
    s->cache.len = n;
}
