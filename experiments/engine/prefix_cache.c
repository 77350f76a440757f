// prefix_cache.c: automatic prefix caching over a paged KV pool, hash-keyed (vLLM) or a radix
// tree of blocks (SGLang) (see prefix_cache.h).
#include "prefix_cache.h"

#include <stdlib.h>
#include <string.h>

const char *const PREFIX_CACHE_NAMES[PREFIX_CACHE_COUNT] = {"off", "hash", "radix"};

#define ROOT_KEY 0x6a09e667f3bcc909ULL // the empty prefix's key (any constant)

// FNV-1a over the tokens from the parent's key, then splitmix64's finaliser to spread the bits
// over the buckets.
static uint64_t chain_key(uint64_t parent, const int *tokens, int n) {
    uint64_t h = parent;
    for (int i = 0; i < n; i++) h = (h ^ (uint32_t)tokens[i]) * 0x100000001b3ULL;
    h ^= h >> 30;
    h *= 0xbf58476d1ce4e5b9ULL;
    h ^= h >> 27;
    h *= 0x94d049bb133111ebULL;
    return h ^ (h >> 31);
}

static int *tokens_of(const PrefixCache *pc, int b) { return pc->tokens + (size_t)b * pc->block_size; }

static int common_prefix(const int *a, const int *b, int n) {
    int k = 0;
    while (k < n && a[k] == b[k]) k++;
    return k;
}

void prefix_cache_open(PrefixCache *pc, KVPool *pool, PrefixCacheKind kind) {
    if (kind != PREFIX_CACHE_HASH && kind != PREFIX_CACHE_RADIX) die("prefix_cache_open: kind %d", kind);
    if (pool->index) die("prefix_cache_open: the pool has a prefix cache already");
    int n = pool->n_blocks, bs = pool->block_size;
    memset(pc, 0, sizeof *pc);
    pc->pool = pool;
    pc->kind = kind;
    pc->block_size = bs;
    pc->n_tokens = mallocCheck(n * sizeof(int));
    pc->tokens = mallocCheck((size_t)n * bs * sizeof(int));
    pc->key = mallocCheck(n * sizeof(uint64_t));
    pc->parent = mallocCheck(n * sizeof(int));
    pc->first_child = mallocCheck(n * sizeof(int));
    pc->next_sibling = mallocCheck(n * sizeof(int));
    pc->bucket_next = mallocCheck(n * sizeof(int));
    pc->lru_prev = mallocCheck(n * sizeof(int));
    pc->lru_next = mallocCheck(n * sizeof(int));
    for (pc->n_buckets = 16; pc->n_buckets < 2 * n; pc->n_buckets *= 2) {}
    pc->bucket = mallocCheck(pc->n_buckets * sizeof(int));
    for (int i = 0; i < pc->n_buckets; i++) pc->bucket[i] = -1;
    pc->root_first_child = pc->lru_head = pc->lru_tail = -1;
    pool->index = pc;
}

void prefix_cache_close(PrefixCache *pc) {
    KVPool *p = pc->pool;
    for (int b = 0; b < p->n_blocks; b++) {
        if (!p->indexed[b]) continue;
        p->indexed[b] = 0;
        if (p->ref[b] == 0) p->free_list[p->n_free++] = b;
    }
    p->index = NULL;
    free(pc->n_tokens), free(pc->tokens), free(pc->key), free(pc->parent), free(pc->first_child);
    free(pc->next_sibling), free(pc->bucket), free(pc->bucket_next), free(pc->lru_prev), free(pc->lru_next);
    memset(pc, 0, sizeof *pc);
}

// ---- the list of unreferenced indexed blocks --------------------------------------------------

static void lru_unlink(PrefixCache *pc, int b) {
    int prev = pc->lru_prev[b], next = pc->lru_next[b];
    if (prev >= 0) pc->lru_next[prev] = next;
    else pc->lru_head = next;
    if (next >= 0) pc->lru_prev[next] = prev;
    else pc->lru_tail = prev;
    pc->n_evictable--;
}

void prefix_cache_unused(PrefixCache *pc, int b) {
    pc->lru_prev[b] = pc->lru_tail;
    pc->lru_next[b] = -1;
    if (pc->lru_tail >= 0) pc->lru_next[pc->lru_tail] = b;
    else pc->lru_head = b;
    pc->lru_tail = b;
    pc->n_evictable++;
}

void prefix_cache_used(PrefixCache *pc, int b) { lru_unlink(pc, b); }

// ---- the two indexes ----------------------------------------------------------------------------

static int *bucket_of(PrefixCache *pc, uint64_t key) { return &pc->bucket[key & (uint64_t)(pc->n_buckets - 1)]; }

// hash: the indexed full block of this key holding these tokens, or -1.
static int hash_find(PrefixCache *pc, uint64_t key, const int *tokens) {
    for (int b = *bucket_of(pc, key); b >= 0; b = pc->bucket_next[b])
        if (pc->key[b] == key && memcmp(tokens_of(pc, b), tokens, pc->block_size * sizeof(int)) == 0) return b;
    return -1;
}

static int *children_of(PrefixCache *pc, int node) { return node < 0 ? &pc->root_first_child : &pc->first_child[node]; }

// radix: the child of `node` that agrees longest with tokens[0 .. n - 1], and that length.
static int radix_best_child(PrefixCache *pc, int node, const int *tokens, int n, int *agree) {
    int best = -1;
    *agree = 0;
    for (int c = *children_of(pc, node); c >= 0; c = pc->next_sibling[c]) {
        int k = common_prefix(tokens_of(pc, c), tokens, pc->n_tokens[c] < n ? pc->n_tokens[c] : n);
        if (k > *agree) best = c, *agree = k;
    }
    return best;
}

static void index_block(PrefixCache *pc, int b, int parent, uint64_t key, const int *tokens, int n) {
    memcpy(tokens_of(pc, b), tokens, n * sizeof(int));
    pc->n_tokens[b] = n;
    pc->key[b] = key;
    if (pc->kind == PREFIX_CACHE_HASH) {
        int *head = bucket_of(pc, key);
        pc->bucket_next[b] = *head;
        *head = b;
    } else {
        int *head = children_of(pc, parent);
        pc->parent[b] = parent;
        pc->first_child[b] = -1;
        pc->next_sibling[b] = *head;
        *head = b;
    }
    pc->pool->indexed[b] = 1;
    if (pc->pool->ref[b] == 0) prefix_cache_unused(pc, b);
}

// Take b out of the index (and out of the evictable list when nobody holds it).
static void unindex_block(PrefixCache *pc, int b) {
    int *link = pc->kind == PREFIX_CACHE_HASH ? bucket_of(pc, pc->key[b]) : children_of(pc, pc->parent[b]);
    int *next = pc->kind == PREFIX_CACHE_HASH ? pc->bucket_next : pc->next_sibling;
    while (*link != b) link = &next[*link];
    *link = next[b];
    if (pc->pool->ref[b] == 0) lru_unlink(pc, b);
    pc->pool->indexed[b] = 0;
}

int prefix_cache_evict(PrefixCache *pc) {
    int b = pc->lru_head;
    if (pc->kind == PREFIX_CACHE_RADIX) // a leaf; one exists, for a held node's ancestors are held (insert)
        while (b >= 0 && pc->first_child[b] >= 0) b = pc->lru_next[b];
    if (b < 0) return -1;
    unindex_block(pc, b);
    pc->evictions++;
    return b;
}

int prefix_cache_match(PrefixCache *pc, PagedSeq *s, const int *tokens, int n) {
    if (s->pool != pc->pool || paged_seq_len(s) != 0) die("prefix_cache_match: an empty sequence of the cache's pool");
    int bs = pc->block_size, limit = n - 1, pos = 0;
    if (limit > s->max_blocks * bs) limit = s->max_blocks * bs;
    if (pc->kind == PREFIX_CACHE_HASH) {
        for (uint64_t key = ROOT_KEY; pos + bs <= limit; pos += bs) {
            key = chain_key(key, tokens + pos, bs);
            int b = hash_find(pc, key, tokens + pos);
            if (b < 0) break;
            paged_seq_share_block(s, b, pos + bs);
        }
    } else {
        for (int node = -1; pos < limit;) {
            int agree, c = radix_best_child(pc, node, tokens + pos, limit - pos < bs ? limit - pos : bs, &agree);
            if (c < 0) break;
            paged_seq_share_block(s, c, pos + agree);
            pos += agree;
            if (agree < bs) break; // a block shared in part is copied on its first write: nothing below it
            node = c;
        }
    }
    pc->queries += n;
    pc->hits += pos;
    return pos;
}

// radix: a part-filled sibling that the new node b extends is dominated by it: drop it.
static void drop_dominated(PrefixCache *pc, int b) {
    for (int c = *children_of(pc, pc->parent[b]), next; c >= 0; c = next) {
        next = pc->next_sibling[c];
        if (c == b || pc->n_tokens[c] >= pc->n_tokens[b] ||
            common_prefix(tokens_of(pc, c), tokens_of(pc, b), pc->n_tokens[c]) < pc->n_tokens[c])
            continue;
        int unheld = pc->pool->ref[c] == 0;
        unindex_block(pc, c);
        if (unheld) pc->pool->free_list[pc->pool->n_free++] = c;
    }
}

void prefix_cache_insert(PrefixCache *pc, const PagedSeq *s, const int *tokens, int n, int partial) {
    int bs = pc->block_size;
    if (n > paged_seq_len(s)) die("prefix_cache_insert: %d tokens of a sequence of %d positions", n, paged_seq_len(s));
    uint64_t key = ROOT_KEY;
    for (int i = 0, node = -1; i * bs < n; i++) {
        int b = s->table[i], count = n - i * bs < bs ? n - i * bs : bs;
        const int *t = tokens + (size_t)i * bs;
        if (count < bs && (!partial || pc->kind == PREFIX_CACHE_HASH)) return;
        if (pc->kind == PREFIX_CACHE_HASH) {
            key = chain_key(key, t, bs);
            if (!pc->pool->indexed[b] && hash_find(pc, key, t) < 0) index_block(pc, b, -1, key, t, bs);
            continue;
        }
        if (pc->pool->indexed[b]) { // s took it from the cache: it is the node on this path
            node = b;
            continue;
        }
        int agree;
        if (radix_best_child(pc, node, t, count, &agree) >= 0 && agree == count) return; // see the header
        index_block(pc, b, node, 0, t, count);
        drop_dominated(pc, b);
        node = b;
    }
}
