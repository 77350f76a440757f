// test_paged.c: the paged KV cache (experiments/engine/paged.h) and the paged layout of the
// attention kernel (ops.h's KVLayout, kernels/cpu/attention_kv.c).
//  - attention over a paged cache with a random block table equals attention over the same
//    rows laid out contiguously, bit for bit (the kernel visits the same keys in the same
//    order, only reading them from other rows), for MHA, GQA with a window and sinks, and
//    MQA, several query rows per sequence; kv_write puts each row where the table says;
//  - a model's logits through a paged sequence equal a contiguous session's, bit for bit;
//  - copy-on-write: after a fork, writes of the fork leave the original's rows and logits
//    untouched, and each continues exactly as a sequence of its own;
//  - the allocator never leaks or double-frees under a random sequence of appends, forks,
//    truncations and releases: after every operation each block's reference count is the
//    number of tables that hold it, the free list holds exactly the unreferenced blocks once
//    each, and at the end every block is free.
// Run: make build/tests/test_paged && ./build/tests/test_paged
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"
#include "kernels.h"
#include "model_reference.h"
#include "paged.h"
#include "rng.h"

static void fill_random(float *x, size_t n, uint64_t *rng) {
    for (size_t i = 0; i < n; i++) x[i] = rng_normal(rng);
}

// A random injective block table of n entries over a pool of n_blocks blocks.
static void random_table(int *table, int n, int n_blocks, uint64_t *rng) {
    int *perm = mallocCheck(n_blocks * sizeof(int));
    for (int b = 0; b < n_blocks; b++) perm[b] = b;
    for (int b = n_blocks - 1; b > 0; b--) {
        int j = (int)(rng_u64(rng) % (uint64_t)(b + 1)), t = perm[b];
        perm[b] = perm[j];
        perm[j] = t;
    }
    memcpy(table, perm, n * sizeof(int));
    free(perm);
}

// Two sequences of S1 and S2 positions; the last nq1 and nq2 positions of each are queries.
static void check_paged_attention(AttentionShape s, int S1, int S2, int nq1, int nq2, int bs, uint64_t seed) {
    uint64_t rng = rng_seed(seed);
    int kv_dim = s.n_kv_heads * s.head_dim, qd = s.n_heads * s.head_dim, R = nq1 + nq2;
    int S[2] = {S1, S2}, n_blocks = (S1 + bs - 1) / bs + (S2 + bs - 1) / bs + 5;
    float *k[2], *v[2], *pool_k = calloc((size_t)n_blocks * bs * kv_dim, sizeof(float)),
                        *pool_v = calloc((size_t)n_blocks * bs * kv_dim, sizeof(float));
    int *tables = mallocCheck(n_blocks * sizeof(int));
    random_table(tables, n_blocks, n_blocks, &rng);
    KVLayout paged[2];
    for (int q = 0; q < 2; q++) {
        k[q] = mallocCheck((size_t)S[q] * kv_dim * sizeof(float));
        v[q] = mallocCheck((size_t)S[q] * kv_dim * sizeof(float));
        fill_random(k[q], (size_t)S[q] * kv_dim, &rng);
        fill_random(v[q], (size_t)S[q] * kv_dim, &rng);
        // sequence 1's table follows sequence 0's in the shuffled blocks
        paged[q] = (KVLayout){.block_size = bs, .n_blocks = (S[q] + bs - 1) / bs,
                              .blocks = tables + (q ? (S1 + bs - 1) / bs : 0)};
        for (int j = 0; j < S[q]; j++) {
            size_t row = kv_layout_row(paged[q], j);
            memcpy(pool_k + row * kv_dim, k[q] + (size_t)j * kv_dim, kv_dim * sizeof(float));
            memcpy(pool_v + row * kv_dim, v[q] + (size_t)j * kv_dim, kv_dim * sizeof(float));
        }
    }
    float *qry = mallocCheck((size_t)R * qd * sizeof(float));
    fill_random(qry, (size_t)R * qd, &rng);
    int pos[R];
    void *keys[R], *values[R], *pool_keys[R], *pool_values[R];
    KVLayout contiguous[R], layouts[R];
    for (int r = 0; r < R; r++) {
        int q = r >= nq1;
        pos[r] = q ? S2 - nq2 + (r - nq1) : S1 - nq1 + r;
        keys[r] = k[q];
        values[r] = v[q];
        pool_keys[r] = pool_k;
        pool_values[r] = pool_v;
        contiguous[r] = (KVLayout){0};
        layouts[r] = paged[q];
    }
    size_t scratch_bytes = attention_kv_scratch_bytes(&s, S1 > S2 ? S1 : S2);
    float *scratch = mallocCheck(scratch_bytes), *want = mallocCheck((size_t)R * qd * sizeof(float)),
          *got = mallocCheck((size_t)R * qd * sizeof(float));
    KVRows flat = {R, pos, keys, values, .layouts = contiguous}, rows = {R, pos, pool_keys, pool_values, .layouts = layouts};
    attention_kv(want, qry, &flat, &s, scratch, scratch_bytes);
    attention_kv(got, qry, &rows, &s, scratch, scratch_bytes);
    assert_memory_equal(got, want, (size_t)R * qd * sizeof(float));

    // kv_write through the paged layout: row r lands at its position's row of its table
    float *new_k = mallocCheck((size_t)R * kv_dim * sizeof(float)), *new_v = mallocCheck((size_t)R * kv_dim * sizeof(float));
    fill_random(new_k, (size_t)R * kv_dim, &rng);
    fill_random(new_v, (size_t)R * kv_dim, &rng);
    ops_cpu()->kv_write(&rows, new_k, new_v, kv_dim);
    for (int r = 0; r < R; r++) {
        size_t row = kv_layout_row(layouts[r], pos[r]);
        assert_memory_equal(pool_k + row * kv_dim, new_k + (size_t)r * kv_dim, kv_dim * sizeof(float));
        assert_memory_equal(pool_v + row * kv_dim, new_v + (size_t)r * kv_dim, kv_dim * sizeof(float));
    }
    for (int q = 0; q < 2; q++) {
        free(k[q]);
        free(v[q]);
    }
    free(pool_k), free(pool_v), free(tables), free(qry), free(scratch), free(want), free(got), free(new_k), free(new_v);
}

static void test_paged_attention_equals_contiguous(void **state) {
    (void)state;
    AttentionShape mha = {4, 4, 16, 0, 0, 0.25f, 0, 0, 0, 0, NULL};
    AttentionShape gqa = {6, 2, 8, 13, 3, 0.35f, 0, 0, 0, 0, NULL};
    AttentionShape mqa = {4, 1, 32, 0, 0, 0.18f, 0, 0, 0, 0, NULL};
    for (int seed = 1; seed <= 4; seed++) {
        check_paged_attention(mha, 70, 33, 5, 1, 16, seed);
        check_paged_attention(gqa, 90, 41, 7, 3, 8, 10 + seed);
        check_paged_attention(mqa, 17, 1, 2, 1, 4, 20 + seed); // a sequence of one position
        check_paged_attention(mha, 48, 16, 16, 16, 16, 30 + seed); // whole blocks, whole prompts
    }
}

// ---- through the engine ---------------------------------------------------------------------

static void test_paged_engine_equals_session(void **state) {
    (void)state;
    enum { T = 50 };
    Config c = small_config(4, 2, 0, 0);
    Model m;
    random_model(&m, &c, 5, 0.3f);
    Engine e;
    engine_open(&e, &m, ops_cpu(), DTYPE_F32, 16, c.seq_len);
    int tokens[T];
    random_tokens(tokens, T, c.vocab_size, 9);
    float *want = session_logits(&e, tokens, T), *got = mallocCheck((size_t)T * c.vocab_size * sizeof(float));
    KVPool pool;
    kv_pool_alloc(&pool, ops_cpu(), config_kv_layers(&c), c.n_kv_heads * c.head_dim, 8, 20);
    // take a few blocks first so the sequence's blocks are not the pool's first ones
    PagedSeq other, s;
    paged_seq_open(&other, &pool, T);
    paged_seq_open(&s, &pool, T);
    assert_int_equal(paged_seq_prepare(&other, 0, 11), 0);
    int chunks[] = {1, 5, 16};
    for (int i = 0; i < 3; i++) {
        paged_seq_truncate(&s, 0);
        paged_feed(&e, &s, tokens, 0, T, chunks[i], got);
        assert_memory_equal(got, want, (size_t)T * c.vocab_size * sizeof(float));
    }
    paged_seq_close(&s);
    paged_seq_close(&other);
    assert_int_equal(pool.n_free, pool.n_blocks);
    kv_pool_free(&pool);
    free(want);
    free(got);
    engine_close(&e);
    model_free(&m);
}

// Sequence a caches P tokens (not a whole number of blocks), b forks it; b then writes its
// own continuation into the shared last block (copy-on-write), a writes its own afterwards.
static void test_copy_on_write(void **state) {
    (void)state;
    enum { P = 21, N = 40, BS = 8 };
    Config c = small_config(4, 2, 0, 0);
    Model m;
    random_model(&m, &c, 6, 0.3f);
    Engine e;
    engine_open(&e, &m, ops_cpu(), DTYPE_F32, 16, c.seq_len);
    int V = c.vocab_size, kv_dim = c.n_kv_heads * c.head_dim, L = config_kv_layers(&c);
    int ta[N], tb[N];
    random_tokens(ta, N, V, 1);
    memcpy(tb, ta, P * sizeof(int));
    random_tokens(tb + P, N - P, V, 2); // b diverges at position P
    float *want_a = session_logits(&e, ta, N), *want_b = session_logits(&e, tb, N);
    float *got = mallocCheck((size_t)N * V * sizeof(float));
    KVPool pool;
    kv_pool_alloc(&pool, ops_cpu(), L, kv_dim, BS, 16);
    PagedSeq a, b;
    paged_seq_open(&a, &pool, N);
    paged_seq_open(&b, &pool, N);
    paged_feed(&e, &a, ta, 0, P, 16, got);
    int used = pool.n_blocks - pool.n_free;
    paged_seq_fork(&b, &a);
    assert_int_equal(pool.n_blocks - pool.n_free, used); // sharing costs no block
    assert_int_equal(paged_seq_len(&b), P);
    // a's rows, every layer, keys and values, before b writes anything
    size_t layer = (size_t)pool.n_blocks * BS * kv_dim, bytes = 2 * L * layer * sizeof(float);
    float *before = mallocCheck(bytes);
    memcpy(before, pool.key, bytes / 2);
    memcpy(before + L * layer, pool.value, bytes / 2);
    assert_int_equal(paged_seq_blocks_needed(&b, P, 1), 1); // the shared partial block is copied
    paged_feed(&e, &b, tb, P, N, 1, got);
    assert_memory_equal(got, want_b + (size_t)P * V, (size_t)(N - P) * V * sizeof(float));
    for (int l = 0; l < L; l++)
        for (int j = 0; j < P; j++) {
            size_t row = (size_t)kv_layout_row(a.cache.layout, j) * kv_dim;
            assert_memory_equal(pool.key + l * layer + row, before + l * layer + row, kv_dim * sizeof(float));
            assert_memory_equal(pool.value + l * layer + row, before + (L + l) * layer + row, kv_dim * sizeof(float));
        }
    assert_int_not_equal(b.table[P / BS], a.table[P / BS]);
    assert_int_equal(b.table[0], a.table[0]); // the full blocks stay shared
    paged_feed(&e, &a, ta, P, N, 3, got);
    assert_memory_equal(got, want_a + (size_t)P * V, (size_t)(N - P) * V * sizeof(float));
    paged_seq_close(&a);
    paged_seq_close(&b);
    assert_int_equal(pool.n_free, pool.n_blocks);
    kv_pool_free(&pool);
    free(before), free(want_a), free(want_b), free(got);
    engine_close(&e);
    model_free(&m);
}

// ---- the allocator ----------------------------------------------------------------------------

static void check_counts(const KVPool *p, PagedSeq *seqs, int n) {
    int *holders = calloc(p->n_blocks, sizeof(int)), *on_free = calloc(p->n_blocks, sizeof(int));
    for (int i = 0; i < n; i++)
        for (int k = 0; k < paged_seq_n_blocks(&seqs[i]); k++) holders[seqs[i].table[k]]++;
    for (int k = 0; k < p->n_free; k++) on_free[p->free_list[k]]++;
    int used = 0;
    for (int b = 0; b < p->n_blocks; b++) {
        assert_int_equal(p->ref[b], holders[b]);
        assert_int_equal(on_free[b], holders[b] == 0); // free exactly once, or held
        used += holders[b] > 0;
    }
    assert_int_equal(used + p->n_free, p->n_blocks);
    free(holders);
    free(on_free);
}

static void test_allocator_random_sequence(void **state) {
    (void)state;
    enum { SEQS = 12, MAXLEN = 90, BS = 8, BLOCKS = 40, OPS = 4000 };
    for (int real = 0; real <= 1; real++) {
        KVPool pool;
        kv_pool_alloc(&pool, ops_cpu(), real ? 2 : 0, real ? 6 : 0, BS, BLOCKS);
        PagedSeq seqs[SEQS];
        for (int i = 0; i < SEQS; i++) paged_seq_open(&seqs[i], &pool, MAXLEN);
        uint64_t rng = rng_seed(77 + real);
        int forks = 0, refused = 0;
        for (int op = 0; op < OPS; op++) {
            PagedSeq *s = &seqs[rng_u64(&rng) % SEQS];
            int len = paged_seq_len(s), kind = (int)(rng_u64(&rng) % 10);
            if (kind < 5) { // append n positions (a prefill chunk or a decode step)
                int n = 1 + (int)(rng_u64(&rng) % 20);
                int need = paged_seq_blocks_needed(s, len, n), free_before = pool.n_free;
                if (paged_seq_prepare(s, len, n) == 0) {
                    s->cache.len = len + n; // what a forward's writes do
                    assert_int_equal(pool.n_free, free_before - need);
                } else {
                    refused++;
                    assert_int_equal(pool.n_free, free_before); // a refusal changes nothing
                    assert_int_equal(paged_seq_len(s), len);
                }
            } else if (kind < 7) { // rewrite a position inside (a shared block is copied first)
                if (len > 0) {
                    int at = (int)(rng_u64(&rng) % len);
                    if (paged_seq_prepare(s, at, 1) == 0) assert_int_equal(pool.ref[s->table[at / BS]], 1);
                }
            } else if (kind < 8) {
                paged_seq_truncate(s, len ? (int)(rng_u64(&rng) % (len + 1)) : 0);
            } else if (kind < 9) {
                paged_seq_release(s);
            } else { // fork a non-empty sequence into an empty one
                PagedSeq *src = &seqs[rng_u64(&rng) % SEQS];
                if (paged_seq_len(s) == 0 && paged_seq_n_blocks(s) == 0 && src != s && paged_seq_len(src) > 0) {
                    paged_seq_fork(s, src);
                    forks++;
                }
            }
            check_counts(&pool, seqs, SEQS);
        }
        assert_true(forks > 50);
        assert_true(refused > 10); // the pool ran out often enough to test refusals
        for (int i = 0; i < SEQS; i++) paged_seq_close(&seqs[i]);
        assert_int_equal(pool.n_free, pool.n_blocks);
        for (int b = 0; b < BLOCKS; b++) assert_int_equal(pool.ref[b], 0);
        kv_pool_free(&pool);
    }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_paged_attention_equals_contiguous),
        cmocka_unit_test(test_paged_engine_equals_session),
        cmocka_unit_test(test_copy_on_write),
        cmocka_unit_test(test_allocator_random_sequence),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
