// paged.h: a paged KV cache (vLLM's PagedAttention): one pool of fixed-size blocks of KV rows
// shared by every sequence, a block table per sequence, a free list, reference counts, and
// prefix sharing by fork with copy-on-write on the first divergent write.
//
//   KVPool pool; kv_pool_alloc(&pool, ops, config_kv_layers(c), c->n_kv_heads * c->head_dim, 16, n_blocks);
//   PagedSeq a, b; paged_seq_open(&a, &pool, max_positions); paged_seq_open(&b, &pool, max_positions);
//   if (paged_seq_prepare(&a, 0, n)) ...out of blocks...;  // map positions 0 .. n - 1 for writing
//   KVCache *c = &a.cache; engine_forward(&e, &c, ...);     // the forward sees a.cache's layout
//   paged_seq_fork(&b, &a);                                 // b shares a's blocks (refcounts + 1)
//   paged_seq_prepare(&b, n, 1);                            // b's write at n copies the shared block first
//   paged_seq_close(&b); paged_seq_close(&a); kv_pool_free(&pool);
//
// The pool's rows are (L, n_blocks * block_size, n_kv_heads * head_dim) for keys and for values,
// in the backend's memory; a sequence's cache field is a view of them (kvcache.h's KVCache with
// a paged KVLayout, ops.h) that engine_forward takes like any other cache: position j is at row
// j % block_size of block table[j / block_size]. The block table lives on the host and is
// uploaded to backend memory whenever it changes (the kernels read that copy). Bookkeeping
// (reference counts, free list) is host-side. A pool of kv_dim 0 holds no rows at all, only
// the bookkeeping: what a simulated server (a step-cost model instead of a model) needs.
// A prefix cache (prefix_cache.h) may be attached: the blocks it indexes are copied before a
// write like shared ones, and when nobody holds them they wait, evictable, instead of being
// free; a block is taken from the free list first and evicted from the cache only when none
// is left. MLA's latent cache is not paged here.
// Tests: make build/tests/test_paged && ./build/tests/test_paged
#pragma once

#include "kvcache.h"

typedef struct {
    const Ops *ops;
    int n_layers, kv_dim;    // kv_dim = n_kv_heads * head_dim
    int block_size, n_blocks;
    float *key, *value;      // (L, n_blocks * block_size, kv_dim), backend memory
    int *ref;                // host (n_blocks): sequences holding each block; 0 = free
    int *free_list;          // host (n_blocks): a stack of the free blocks
    int n_free;
    unsigned char *indexed;  // host (n_blocks): 1 while the prefix cache indexes the block
    struct PrefixCache *index; // the attached prefix cache, or NULL
} KVPool;

typedef struct {
    KVPool *pool;
    KVCache cache;   // the view the forward reads: the pool's rows, layout.blocks = table_dev
    int *table;      // host (max_blocks): block of each block_size positions
    int *table_dev;  // backend (max_blocks): the copy the kernels read
    int max_blocks;
} PagedSeq;

// A pool of n_blocks blocks of block_size positions, n_layers layers of kv_dim keys and
// kv_dim values per position (kv_dim 0: bookkeeping only, no rows).
void kv_pool_alloc(KVPool *p, const Ops *ops, int n_layers, int kv_dim, int block_size, int n_blocks);
void kv_pool_free(KVPool *p);
// Blocks that hold n positions: ceil(n / block_size).
static inline int kv_pool_blocks_for(const KVPool *p, int n) { return (n + p->block_size - 1) / p->block_size; }
// Bytes of the pool: 2 * L * n_blocks * block_size * kv_dim * sizeof(float).
size_t kv_pool_bytes(const KVPool *p);
// Blocks a sequence can still take: the free ones and the prefix cache's evictable ones.
int kv_pool_available(const KVPool *p);

// An empty sequence of up to max_positions positions on the pool (it holds no block yet).
void paged_seq_open(PagedSeq *s, KVPool *p, int max_positions);
// Give every block back (a shared block stays with its other holders) and free the table.
void paged_seq_close(PagedSeq *s);
// Drop every block and empty the sequence (preemption: it is recomputed later).
void paged_seq_release(PagedSeq *s);
// Blocks that paged_seq_prepare(s, pos, n) would take from the pool: new blocks for positions
// past those mapped, and copies of shared (or prefix-cached) blocks that the write touches.
int paged_seq_blocks_needed(const PagedSeq *s, int pos, int n);
// Make positions pos .. pos + n - 1 writable (pos <= the sequence's length): map new blocks
// past the end and copy every shared or prefix-cached block in that range to a private one
// (copy-on-write), so no other sequence, and no cached prefix, sees the write. 0, or -1 with
// nothing changed when the pool has too few available blocks or n positions exceed
// max_positions.
int paged_seq_prepare(PagedSeq *s, int pos, int n);
// dst (open and empty, same pool) becomes a copy of src that shares all its blocks: the
// prefix src has cached, at no memory cost until one of them writes into a shared block.
void paged_seq_fork(PagedSeq *dst, const PagedSeq *src);
// Append block b of the pool to s's table as a shared block (held once more) and make s's
// length `len`: how a prefix cache hands over a cached block.
void paged_seq_share_block(PagedSeq *s, int b, int len);
// Keep the first n positions (n <= length); blocks past them go back to the pool, the last
// first (so a prefix cache evicts a prefix's tail before its head).
void paged_seq_truncate(PagedSeq *s, int n);
static inline int paged_seq_len(const PagedSeq *s) { return s->cache.len; }
static inline int paged_seq_n_blocks(const PagedSeq *s) { return s->cache.layout.n_blocks; }
