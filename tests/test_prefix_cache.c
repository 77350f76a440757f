// test_prefix_cache.c: automatic prefix caching (experiments/engine/prefix_cache.h), hash-keyed
// and radix, over the paged KV pool.
//  - a cached prefix gives bit-identical logits to recomputing it: a sequence that takes a
//    cached prefix and computes the rest gets, at every position it computes and in its greedy
//    continuation, exactly the logits of a contiguous session of the whole text; the part of a
//    block shared by radix is copied before the write, so the cached text still gives the
//    same logits to the next sequence that takes it;
//  - what each index finds: hash whole blocks only, radix down to the token, neither the last
//    prompt token; a finished sequence's part-filled last block only in radix;
//  - eviction never frees a referenced block, under a random mix of matches, writes, inserts,
//    truncations and releases on a small pool: every row of every sequence still holds the
//    token that sequence wrote there (the pool's rows hold tokens, written through the block
//    tables and copied on write by the pool; they would show a block handed to another while held, a write into a cached block, or a match
//    that hands over the wrong tokens), reference counts equal the tables holding each block,
//    free + evictable + held = all blocks, radix never leaves an indexed block without its
//    parent, and closing the cache frees everything;
//  - two sequences that computed one prefix at once: hash indexes the second's blocks past the
//    duplicates, radix stops at them; eviction follows the release order (a prefix's tail
//    first), radix taking leaves only.
// Run: make build/tests/test_prefix_cache && ./build/tests/test_prefix_cache
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <stdlib.h>
#include <string.h>

#include "model_reference.h"
#include "prefix_cache.h"
#include "rng.h"

// ---- through the engine ---------------------------------------------------------------------

// A's text is computed and cached; B shares its first SHARED tokens and goes on with its own;
// then C is A's text again.
static void check_cached_logits(PrefixCacheKind kind) {
    enum { N = 45, SHARED = 30, BS = 8 };
    Config c = small_config(4, 2, 0, 0);
    Model m;
    random_model(&m, &c, 11, 0.3f);
    Engine e;
    engine_open(&e, &m, ops_cpu(), DTYPE_F32, 16, c.seq_len);
    int V = c.vocab_size, ta[N], tb[N];
    random_tokens(ta, N, V, 3);
    memcpy(tb, ta, SHARED * sizeof(int));
    random_tokens(tb + SHARED, N - SHARED, V, 4);
    float *want_a = session_logits(&e, ta, N), *want_b = session_logits(&e, tb, N);
    float *got = mallocCheck((size_t)N * V * sizeof(float));
    KVPool pool;
    kv_pool_alloc(&pool, ops_cpu(), config_kv_layers(&c), c.n_kv_heads * c.head_dim, BS, 24);
    PrefixCache pc;
    prefix_cache_open(&pc, &pool, kind);
    PagedSeq a, b, a2;
    paged_seq_open(&a, &pool, N);
    paged_seq_open(&b, &pool, N);
    paged_seq_open(&a2, &pool, N);

    assert_int_equal(prefix_cache_match(&pc, &a, ta, N), 0);
    paged_feed(&e, &a, ta, 0, N, 16, got);
    assert_memory_equal(got, want_a, (size_t)N * V * sizeof(float));
    prefix_cache_insert(&pc, &a, ta, N, 1);
    paged_seq_release(&a); // a's blocks stay cached, unreferenced

    int hit = prefix_cache_match(&pc, &b, tb, N);
    assert_int_equal(hit, kind == PREFIX_CACHE_HASH ? SHARED / BS * BS : SHARED);
    paged_feed(&e, &b, tb, hit, N, 16, got);
    assert_memory_equal(got, want_b + (size_t)hit * V, (size_t)(N - hit) * V * sizeof(float));
    prefix_cache_insert(&pc, &b, tb, N, 1);
    paged_seq_release(&b);

    hit = prefix_cache_match(&pc, &a2, ta, N); // radix: all but the last token, hash: whole blocks
    assert_int_equal(hit, kind == PREFIX_CACHE_HASH ? (N - 1) / BS * BS : N - 1);
    paged_feed(&e, &a2, ta, hit, N, 16, got);
    assert_memory_equal(got, want_a + (size_t)hit * V, (size_t)(N - hit) * V * sizeof(float));
    paged_seq_close(&a2);
    paged_seq_close(&b);
    paged_seq_close(&a);
    prefix_cache_close(&pc);
    assert_int_equal(pool.n_free, pool.n_blocks);
    kv_pool_free(&pool);
    free(want_a), free(want_b), free(got);
    engine_close(&e);
    model_free(&m);
}

static void test_cached_prefix_logits_hash(void **state) {
    (void)state;
    check_cached_logits(PREFIX_CACHE_HASH);
}

static void test_cached_prefix_logits_radix(void **state) {
    (void)state;
    check_cached_logits(PREFIX_CACHE_RADIX);
}

// ---- bookkeeping ------------------------------------------------------------------------------

enum { BS = 4, N_BLOCKS = 24, SEQS = 5, MAXLEN = 40 };

// A pool of one layer of one-float rows, each row holding the token written there: the
// pool's own copy-on-write copies them as it would copy keys and values.
typedef struct {
    KVPool pool;
    PrefixCache pc;
    PagedSeq seq[SEQS];
    int tokens[SEQS][MAXLEN];
} World;

static void world_open(World *w, PrefixCacheKind kind) {
    memset(w, 0, sizeof *w);
    kv_pool_alloc(&w->pool, ops_cpu(), 1, 1, BS, N_BLOCKS);
    prefix_cache_open(&w->pc, &w->pool, kind);
    for (int i = 0; i < SEQS; i++) paged_seq_open(&w->seq[i], &w->pool, MAXLEN);
}

static float *row_of(World *w, const PagedSeq *s, int p) { return &w->pool.key[s->table[p / BS] * BS + p % BS]; }

// Write tokens[pos .. pos + n) of sequence i (0 when the pool is short: nothing changes).
static int world_write(World *w, int i, int pos, int n) {
    PagedSeq *s = &w->seq[i];
    if (paged_seq_prepare(s, pos, n)) return 0;
    for (int p = pos; p < pos + n; p++) *row_of(w, s, p) = (float)w->tokens[i][p];
    s->cache.len = pos + n;
    return 1;
}

static void check_world(World *w) {
    KVPool *p = &w->pool;
    int held[N_BLOCKS] = {0}, on_free[N_BLOCKS] = {0}, n_held = 0, n_lru = 0;
    for (int i = 0; i < SEQS; i++) {
        const PagedSeq *s = &w->seq[i];
        for (int k = 0; k < paged_seq_n_blocks(s); k++) held[s->table[k]]++;
        for (int q = 0; q < paged_seq_len(s); q++)
            if (*row_of(w, s, q) != (float)w->tokens[i][q]) fail_msg("sequence %d's row %d was overwritten", i, q);
    }
    for (int k = 0; k < p->n_free; k++) on_free[p->free_list[k]]++;
    for (int b = w->pc.lru_head; b >= 0; b = w->pc.lru_next[b]) {
        assert_int_equal(p->ref[b], 0);
        assert_true(p->indexed[b]);
        n_lru++;
    }
    assert_int_equal(n_lru, w->pc.n_evictable);
    for (int b = 0; b < N_BLOCKS; b++) {
        assert_int_equal(p->ref[b], held[b]);
        assert_int_equal(on_free[b], held[b] == 0 && !p->indexed[b]);
        n_held += held[b] > 0;
        if (p->indexed[b] && w->pc.kind == PREFIX_CACHE_RADIX && w->pc.parent[b] >= 0)
            assert_true(p->indexed[w->pc.parent[b]]);
        if (p->indexed[b]) // a cached block holds the tokens it is indexed by
            for (int j = 0; j < w->pc.n_tokens[b]; j++) assert_true(p->key[b * BS + j] == (float)w->pc.tokens[b * BS + j]);
    }
    assert_int_equal(p->n_free + w->pc.n_evictable + n_held, N_BLOCKS);
}

// Random sequences over a small vocabulary (so prompts share prefixes), written, cached,
// truncated and released at random on a pool too small to keep everything.
static void run_random(PrefixCacheKind kind, uint64_t seed) {
    World w;
    world_open(&w, kind);
    uint64_t rng = rng_seed(seed);
    int stems[3][MAXLEN];
    for (int k = 0; k < 3; k++) random_tokens(stems[k], MAXLEN, 5, seed + k);
    for (int step = 0; step < 3000; step++) {
        int i = (int)(rng_u64(&rng) % SEQS), op = (int)(rng_u64(&rng) % 4);
        PagedSeq *s = &w.seq[i];
        int len = paged_seq_len(s);
        if (len == 0) { // a new prompt: a stem, then its own tokens from a random point
            int n = 2 + (int)(rng_u64(&rng) % (MAXLEN - 2)), own = (int)(rng_u64(&rng) % (n + 1));
            memcpy(w.tokens[i], stems[rng_u64(&rng) % 3], MAXLEN * sizeof(int));
            random_tokens(w.tokens[i] + own, MAXLEN - own, 5, rng_u64(&rng));
            int hit = prefix_cache_match(&w.pc, s, w.tokens[i], n);
            assert_true(hit < n);
            if (kind == PREFIX_CACHE_HASH) assert_int_equal(hit % BS, 0);
            if (!world_write(&w, i, hit, n - hit)) paged_seq_release(s);
        } else if (op == 0 && len < MAXLEN) {
            world_write(&w, i, len, 1 + (int)(rng_u64(&rng) % (MAXLEN - len)));
        } else if (op == 1) {
            prefix_cache_insert(&w.pc, s, w.tokens[i], len, 0);
        } else if (op == 2) {
            paged_seq_truncate(s, (int)(rng_u64(&rng) % (len + 1)));
        } else {
            prefix_cache_insert(&w.pc, s, w.tokens[i], len, 1);
            paged_seq_release(s);
        }
        check_world(&w);
    }
    assert_true(w.pc.evictions > 0);             // the pool was small enough to evict
    assert_true(w.pc.hits > w.pc.queries / 10);  // and the stems were found
    for (int i = 0; i < SEQS; i++) paged_seq_close(&w.seq[i]);
    prefix_cache_close(&w.pc);
    assert_int_equal(w.pool.n_free, N_BLOCKS);
    kv_pool_free(&w.pool);
}

static void test_eviction_never_frees_a_held_block(void **state) {
    (void)state;
    for (uint64_t seed = 1; seed <= 4; seed++) {
        run_random(PREFIX_CACHE_HASH, seed);
        run_random(PREFIX_CACHE_RADIX, seed);
    }
}

// Sequences 0 and 1 compute the same first two blocks at once (both miss), then differ in
// the third. Hash indexes 1's third block though its first two are duplicates left out; radix
// stops at the first duplicate. Released 1 then 0 (each tail first), the evictions follow the
// release order: hash takes 1's third block, then 0's third; radix 0's third, then its second
// (a leaf once the third has gone).
static void test_duplicates_and_eviction_order(void **state) {
    (void)state;
    for (int kind = PREFIX_CACHE_HASH; kind <= PREFIX_CACHE_RADIX; kind++) {
        World w;
        world_open(&w, kind);
        random_tokens(w.tokens[0], MAXLEN, 50, 1);
        memcpy(w.tokens[1], w.tokens[0], MAXLEN * sizeof(int));
        random_tokens(w.tokens[1] + 2 * BS, MAXLEN - 2 * BS, 50, 2);
        for (int i = 0; i < 2; i++) {
            assert_int_equal(prefix_cache_match(&w.pc, &w.seq[i], w.tokens[i], 3 * BS), 0);
            assert_true(world_write(&w, i, 0, 3 * BS));
        }
        int a[3], b[3];
        memcpy(a, w.seq[0].table, sizeof a);
        memcpy(b, w.seq[1].table, sizeof b);
        prefix_cache_insert(&w.pc, &w.seq[0], w.tokens[0], 3 * BS, 0);
        prefix_cache_insert(&w.pc, &w.seq[1], w.tokens[1], 3 * BS, 0);
        assert_true(w.pool.indexed[a[0]] && w.pool.indexed[a[1]] && w.pool.indexed[a[2]]);
        assert_true(!w.pool.indexed[b[0]] && !w.pool.indexed[b[1]]);
        assert_int_equal(w.pool.indexed[b[2]], kind == PREFIX_CACHE_HASH);
        paged_seq_release(&w.seq[1]);
        paged_seq_release(&w.seq[0]);
        check_world(&w);
        int want[2] = {kind == PREFIX_CACHE_HASH ? b[2] : a[2], kind == PREFIX_CACHE_HASH ? a[2] : a[1]};
        for (int k = 0; k < 2; k++) {
            int victim = prefix_cache_evict(&w.pc);
            assert_int_equal(victim, want[k]);
            assert_true(w.pool.ref[victim] == 0 && !w.pool.indexed[victim]);
            w.pool.free_list[w.pool.n_free++] = victim; // what the pool does with a block once its user lets it go
            check_world(&w);
        }
        for (int i = 0; i < SEQS; i++) paged_seq_close(&w.seq[i]);
        prefix_cache_close(&w.pc);
        assert_int_equal(w.pool.n_free, N_BLOCKS);
        kv_pool_free(&w.pool);
    }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_cached_prefix_logits_hash),
        cmocka_unit_test(test_cached_prefix_logits_radix),
        cmocka_unit_test(test_eviction_never_frees_a_held_block),
        cmocka_unit_test(test_duplicates_and_eviction_order),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
