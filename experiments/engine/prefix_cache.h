// prefix_cache.h: automatic prefix caching over a paged KV pool (paged.h). Blocks that a
// sequence has computed stay indexed by the tokens they hold after it lets them go, so a later
// sequence whose prompt starts with the same tokens takes them instead of recomputing them.
// Two indexes over the same pool, as the two serving engines that made this standard keep it:
//   hash   vLLM's automatic prefix caching: every full block is keyed by a hash of its tokens
//          chained with its parent's key (so the key names the whole prefix up to the block's
//          end); a lookup hashes the prompt block by block and stops at the first miss; only
//          full blocks are indexed; when the pool runs dry, the least recently released
//          unreferenced block is evicted, wherever it sits in its prefix (its descendants stay
//          indexed but unreachable until the same prefix is computed again).
//   radix  SGLang's RadixAttention on paged memory: a tree of blocks, each node a child of the
//          block before it, matched token by token, so a prompt shares the part of a block it
//          agrees with (a finished sequence's partly filled last block included) and copies it
//          on its first write; eviction takes the least recently used unreferenced leaf only,
//          so no cached block is ever unreachable.
// The cache holds no reference: a block is held by the sequences whose tables list it (the
// pool's ref count). An indexed block is immutable (paged_seq_prepare copies it before a
// write, as it copies a shared block), and when no sequence holds it any more it is evictable
// instead of free: kv_pool_available() counts it, and the pool evicts it (through this
// index) only when no free block is left. Eviction therefore never touches a block that a
// sequence holds (test_prefix_cache).
//
//   KVPool pool; kv_pool_alloc(&pool, ...);
//   PrefixCache pc; prefix_cache_open(&pc, &pool, PREFIX_CACHE_HASH);   // attaches to the pool
//   int hit = prefix_cache_match(&pc, &seq, prompt, n);     // seq (empty) now holds hit positions
//   ... prefill positions hit .. n - 1, decode ...
//   prefix_cache_insert(&pc, &seq, tokens, seq_len, 0);     // its full blocks, while it runs
//   prefix_cache_insert(&pc, &seq, tokens, seq_len, 1);     // all it has, before it lets them go
//   paged_seq_release(&seq); prefix_cache_close(&pc); kv_pool_free(&pool);
// Tests: make build/tests/test_prefix_cache && ./build/tests/test_prefix_cache
#pragma once

#include <stdint.h>

#include "paged.h"

typedef enum { PREFIX_CACHE_OFF, PREFIX_CACHE_HASH, PREFIX_CACHE_RADIX, PREFIX_CACHE_COUNT } PrefixCacheKind;
extern const char *const PREFIX_CACHE_NAMES[PREFIX_CACHE_COUNT]; // off, hash, radix

typedef struct PrefixCache {
    KVPool *pool;
    PrefixCacheKind kind;
    int block_size;
    // per block of the pool, meaningful while pool->indexed[b]
    int *n_tokens;           // (n_blocks) tokens it holds: block_size, or fewer (radix: a last block)
    int *tokens;             // (n_blocks, block_size)
    uint64_t *key;           // (n_blocks) hash: the chained hash of the prefix through the block
    int *parent, *first_child, *next_sibling; // (n_blocks) radix: the tree (-1: none; parent -1: the root)
    int root_first_child;
    int *bucket, n_buckets;  // hash: chains of blocks by key (n_buckets a power of two)
    int *bucket_next;        // (n_blocks)
    // the unreferenced indexed blocks, least recently released first
    int *lru_prev, *lru_next; // (n_blocks)
    int lru_head, lru_tail, n_evictable;
    // statistics since open
    long queries, hits;       // prompt tokens looked up, tokens found
    long evictions;
} PrefixCache;

// An index of `kind` (not OFF) attached to the pool, which must have no indexed block yet.
void prefix_cache_open(PrefixCache *pc, KVPool *pool, PrefixCacheKind kind);
// Detach from the pool: its unreferenced indexed blocks become free.
void prefix_cache_close(PrefixCache *pc);
// The longest cached prefix of tokens[0 .. n - 1], at most n - 1 tokens (the last prompt token
// is always computed: its logits are the next token's), given to the empty sequence s: its
// blocks are appended to s's table as shared blocks and s's length set to the positions
// matched. Returns them (hash: a multiple of the block size).
int prefix_cache_match(PrefixCache *pc, PagedSeq *s, const int *tokens, int n);
// Index the blocks of s that hold tokens[0 .. n - 1] (n <= s's length: positions computed):
// its full blocks, and with `partial` (radix only) the part-filled last one, which s must not
// write again (call it just before s lets its blocks go). A block whose tokens are cached
// already in another block (two sequences computed one prefix at once) stays out: hash goes on
// with the blocks after it; radix stops there, so that every indexed block a sequence holds
// has its ancestors held too, and an unreferenced block's descendants are unreferenced: the
// least recently used unreferenced leaf always exists when an unreferenced block does.
void prefix_cache_insert(PrefixCache *pc, const PagedSeq *s, const int *tokens, int n, int partial);

// The pool's side (paged.c): a block nobody holds any more, and one held again.
void prefix_cache_unused(PrefixCache *pc, int block);
void prefix_cache_used(PrefixCache *pc, int block);
// Remove one unreferenced block from the index and return it (held by nobody, indexed no
// more), or -1 when none can go.
int prefix_cache_evict(PrefixCache *pc);
