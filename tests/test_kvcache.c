// test_kvcache.c: the ring KV cache (window + sinks, bounded memory) and StreamingLLM's
// position rule, on small random models and on the attention kernel.
//  - a ring cache whose window covers the whole stream gives full attention's logits, bit for
//    bit (the same keys in the same order, read from other rows);
//  - a ring cache gives the logits of the contiguous cache with the same window mask at every
//    position of a stream many times longer than the ring, bit for bit, for 0, 1 and 4 sinks,
//    both position rules, decoding and chunked prefill, and after a rollback;
//  - the ring's rows stay n_sink + window + chunk - 1 however long the stream (bytes and
//    allocator), and a forward that would overwrite its own window is an error;
//  - a hybrid model's cache (rings for its local layers, contiguous global layers) gives the
//    all-contiguous cache's logits bit for bit, and holds only the local layers' rings;
//  - StreamingLLM's rule in attention_kv equals a double-precision reference that caches keys
//    unrotated and rotates q and k at their positions within the cache (tolerance 1e-4).
// Run: make build/tests/test_kvcache && ./build/tests/test_kvcache
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <string.h>

#include "common.h"
#include "kernels.h"
#include "model_reference.h"
#include "session.h"


// Feed tokens (n) to a session: a prefill of the first n_prefill, then one decode step each.
// logits (n, V): row i predicts token i + 1.
static void feed_stream(Session *s, const int *tokens, int n, int n_prefill, float *logits) {
    Error err;
    int V = s->engine->config.vocab_size;
    if (session_prefill(s, tokens, n_prefill, logits, &err)) fail_msg("%s", err.msg);
    for (int i = n_prefill; i < n; i++) {
        if (session_decode(s, tokens[i], &err)) fail_msg("%s", err.msg);
        memcpy(logits + (size_t)i * V, s->logits, (size_t)V * sizeof(float));
    }
}

// The logits of a stream through a contiguous cache (ring_chunk 0) or a ring, on model m.
static float *stream_logits(const Model *m, const int *tokens, int n, int n_prefill, int ring_chunk) {
    Engine e;
    Session s;
    float *logits = mallocCheck((size_t)n * m->config.vocab_size * sizeof(float));
    int ring_rows = m->config.n_sink + m->config.window + ring_chunk - 1;
    engine_open(&e, m, ops_cpu(), DTYPE_F32, MAX_ROWS, ring_rows > n ? ring_rows : n);
    if (ring_chunk) session_open_ring(&s, &e, ring_chunk);
    else session_open(&s, &e, n);
    feed_stream(&s, tokens, n, n_prefill, logits);
    if (ring_chunk) assert_int_equal(s.cache.capacity, m->config.n_sink + m->config.window + ring_chunk - 1);
    assert_int_equal(s.cache.n_layers, config_kv_layers(&m->config)); // CLA: one cache layer per set
    session_close(&s);
    engine_close(&e);
    return logits;
}

static void test_ring_covering_the_stream_is_full_attention(void **state) {
    (void)state;
    enum { T = 40 };
    int tokens[T];
    random_tokens(tokens, T, 67, 5);
    int sinks[] = {0, 2};
    for (int i = 0; i < 2; i++) {
        Model full, ring;
        Config c = small_config(4, 2, 0, 0);
        random_model(&full, &c, 31, 0.3f);
        c.window = T; // window >= length: the ring never evicts
        c.n_sink = sinks[i];
        random_model(&ring, &c, 31, 0.3f);
        float *want = stream_logits(&full, tokens, T, 7, 0);
        for (int chunk = 1; chunk <= MAX_ROWS; chunk += MAX_ROWS - 1) {
            float *got = stream_logits(&ring, tokens, T, 7, chunk);
            assert_memory_equal(got, want, (size_t)T * c.vocab_size * sizeof(float));
            free(got);
        }
        free(want);
        model_free(&full);
        model_free(&ring);
    }
}

// Window 6 over a stream of 90 tokens: the ring (at most 4 + 6 + 3 rows) wraps 7 or more times.
static void test_ring_equals_contiguous_window_mask(void **state) {
    (void)state;
    enum { T = 90, WINDOW = 6 };
    int tokens[T];
    random_tokens(tokens, T, 67, 6);
    int sinks[] = {0, 1, 4};
    for (int i = 0; i < 3; i++)
        for (int rule = 0; rule < 2; rule++) {
            Config c = small_config(4, 2, WINDOW, sinks[i]);
            c.cache_positions = rule;
            Model m;
            random_model(&m, &c, 40 + i, 0.3f);
            float *want = stream_logits(&m, tokens, T, 11, 0);
            for (int chunk = 1; chunk <= MAX_ROWS; chunk += MAX_ROWS - 1) { // prefill 1 or 4 at a time
                float *got = stream_logits(&m, tokens, T, 11, chunk);
                assert_memory_equal(got, want, (size_t)T * c.vocab_size * sizeof(float));
                free(got);
            }
            free(want);
            model_free(&m);
        }
}

// A hybrid model (4 layers, 1 and 3 global at their own RoPE base, 0 and 2 local with window 6
// and 2 sinks) through its own cache (session_open: rings for the local layers, contiguous
// global layers) gives the logits of the same model through an all-contiguous cache, bit for
// bit, over a stream that wraps the rings many times, decoding and in prefill chunks of 4; the
// cache holds the global layers' positions and only the rings of the local ones. Its "all
// local" ablation (Config.global_windowed) streams through rings alone, bit for bit.
static void test_hybrid_cache_equals_contiguous(void **state) {
    (void)state;
    enum { T = 70, WINDOW = 6, SINKS = 2 };
    int tokens[T];
    random_tokens(tokens, T, 67, 9);
    Config c = small_config(4, 2, WINDOW, SINKS);
    c.n_layers = 4;
    c.global_every = 2;
    c.rope_theta_global = 1e6f;
    Model m;
    random_model(&m, &c, 44, 0.3f);
    int V = c.vocab_size;
    float *want = mallocCheck((size_t)T * V * sizeof(float)), *got = mallocCheck((size_t)T * V * sizeof(float));
    Engine e;
    Session hybrid, flat;
    engine_open(&e, &m, ops_cpu(), DTYPE_F32, MAX_ROWS, T);
    session_open(&flat, &e, T);
    kv_cache_free(&flat.cache); // the same model through one contiguous layout
    kv_cache_alloc(&flat.cache, ops_cpu(), c.n_layers, c.n_kv_heads, c.head_dim, T);
    session_open(&hybrid, &e, T);
    assert_int_equal(hybrid.cache.global_every, 2);
    assert_int_equal(kv_cache_layer_layout(&hybrid.cache, 0).ring, WINDOW + MAX_ROWS - 1);
    assert_int_equal(kv_cache_layer_layout(&hybrid.cache, 1).ring, 0);
    size_t row = 2 * (size_t)c.n_kv_heads * c.head_dim * sizeof(float); // a key and a value row
    assert_int_equal(kv_cache_bytes(&hybrid.cache), row * (2 * T + 2 * (SINKS + WINDOW + MAX_ROWS - 1)));
    feed_stream(&flat, tokens, T, 13, want);
    feed_stream(&hybrid, tokens, T, 13, got);
    assert_memory_equal(got, want, (size_t)T * V * sizeof(float));
    // a session no longer than a ring's rows keeps its local layers contiguous, at its own
    // length, and the window still masks (position 9 sees sinks 0, 1 and 4 .. 9)
    enum { SHORT = 10 };
    Session brief;
    session_open(&brief, &e, SHORT);
    assert_int_equal(kv_cache_layer_layout(&brief.cache, 0).ring, 0);
    assert_int_equal(kv_cache_bytes(&brief.cache), row * c.n_layers * SHORT);
    assert_int_equal(model_kv_cache_rows(&c, 0, SHORT, MAX_ROWS), SHORT);
    session_truncate(&flat, 0);
    feed_stream(&flat, tokens, SHORT, MAX_ROWS, want);
    feed_stream(&brief, tokens, SHORT, MAX_ROWS, got);
    assert_memory_equal(got, want, (size_t)SHORT * V * sizeof(float));
    session_close(&brief);
    // and with every layer at the window (no global layer), the logits differ: the global
    // layers did see past it
    Config local = c;
    local.global_every = 0;
    local.rope_theta_global = 0.0f;
    Model ml;
    random_model(&ml, &local, 44, 0.3f);
    float *windowed = stream_logits(&ml, tokens, T, 13, 0);
    assert_true(max_rel_error(windowed + (size_t)(T - 1) * V, want + (size_t)(T - 1) * V, V) > 1e-3);
    // the "all local" ablation (global layers windowed, at their own RoPE base) runs through one
    // ring for every layer and gives its contiguous cache's logits bit for bit
    m.config.global_windowed = 1;
    float *all_local = stream_logits(&m, tokens, T, 13, 0);
    for (int chunk = 1; chunk <= MAX_ROWS; chunk += MAX_ROWS - 1) {
        float *ring = stream_logits(&m, tokens, T, 13, chunk);
        assert_memory_equal(ring, all_local, (size_t)T * V * sizeof(float));
        free(ring);
    }
    free(all_local);
    session_close(&hybrid);
    session_close(&flat);
    engine_close(&e);
    free(want), free(got), free(windowed);
    model_free(&m);
    model_free(&ml);
}

// Cross-layer KV sharing through a ring (3 layers in sets of 2: two cache layers) gives the
// contiguous cache's logits bit for bit.
static void test_ring_with_shared_layers(void **state) {
    (void)state;
    enum { T = 50, WINDOW = 6 };
    int tokens[T];
    random_tokens(tokens, T, 67, 8);
    Config c = small_config(4, 2, WINDOW, 2);
    c.n_layers = 3;
    c.kv_share = 2;
    Model m;
    random_model(&m, &c, 50, 0.3f);
    float *want = stream_logits(&m, tokens, T, 11, 0), *got = stream_logits(&m, tokens, T, 11, 4);
    assert_memory_equal(got, want, (size_t)T * c.vocab_size * sizeof(float));
    free(got);
    free(want);
    model_free(&m);
}

// StreamingLLM's rule changes the sinks' scores once positions are evicted, and only then.
static void test_position_rule_moves_only_evicted_sinks(void **state) {
    (void)state;
    enum { T = 30, WINDOW = 5 };
    int tokens[T];
    random_tokens(tokens, T, 67, 8);
    Config c = small_config(4, 2, WINDOW, 2);
    Model text, cache;
    random_model(&text, &c, 50, 0.3f);
    c.cache_positions = 1;
    random_model(&cache, &c, 50, 0.3f);
    float *a = stream_logits(&text, tokens, T, 1, 1), *b = stream_logits(&cache, tokens, T, 1, 1);
    size_t V = c.vocab_size, same = (WINDOW + 2) * V; // positions 0 .. window + sinks - 1 evict nothing
    assert_memory_equal(a, b, same * sizeof(float));
    assert_true(max_rel_error(a + same, b + same, (T - WINDOW - 2) * V) > 1e-3);
    free(a);
    free(b);
    model_free(&text);
    model_free(&cache);
}

// Rolling a ring back by up to chunk positions and feeding other tokens gives what the
// contiguous cache gives.
static void test_ring_rollback(void **state) {
    (void)state;
    enum { T = 50, CUT = 33 };
    Config c = small_config(4, 2, 6, 1);
    Model m;
    random_model(&m, &c, 60, 0.3f);
    int tokens[T], other[3];
    random_tokens(tokens, T, 67, 9);
    random_tokens(other, 3, 67, 10);
    Engine e;
    Session ring, flat;
    Error err;
    engine_open(&e, &m, ops_cpu(), DTYPE_F32, MAX_ROWS, T);
    session_open_ring(&ring, &e, MAX_ROWS);
    session_open(&flat, &e, T);
    Session *both[2] = {&ring, &flat};
    for (int k = 0; k < 2; k++) {
        if (session_prefill(both[k], tokens, CUT + 3, NULL, &err)) fail_msg("%s", err.msg);
        session_truncate(both[k], CUT - 1); // 4 back: the ring's chunk
        if (session_prefill(both[k], other, 3, NULL, &err)) fail_msg("%s", err.msg);
    }
    assert_memory_equal(ring.logits, flat.logits, (size_t)c.vocab_size * sizeof(float));
    session_close(&ring);
    session_close(&flat);
    engine_close(&e);
    model_free(&m);
}

static void test_ring_memory_is_bounded(void **state) {
    (void)state;
    Config c = small_config(4, 2, 8, 4);
    Model m;
    random_model(&m, &c, 70, 0.3f);
    enum { T = 400 };
    int tokens[T];
    random_tokens(tokens, T, 67, 11);
    Engine e;
    Session s;
    Error err;
    engine_open(&e, &m, ops_cpu(), DTYPE_F32, MAX_ROWS, 64);
    size_t before = ops_cpu()->allocated_bytes();
    session_open_ring(&s, &e, 1);
    size_t rows = 4 + 8, want = 2 * (size_t)c.n_layers * rows * c.n_kv_heads * c.head_dim * sizeof(float);
    assert_int_equal(kv_cache_bytes(&s.cache), want);
    assert_true(ops_cpu()->allocated_bytes() - before >= want);
    for (int i = 0; i < T; i++)
        if (session_decode(&s, tokens[i], &err)) fail_msg("%s", err.msg);
    assert_int_equal(session_len(&s), T); // far past the engine's 64 keys and the ring's 12 rows
    assert_int_equal(kv_cache_bytes(&s.cache), want);
    // a decode-only ring refuses a forward of two positions, and attention it cannot serve
    assert_int_equal(kv_cache_fits(&s.cache, 0, T, 2, 8, 4, &err), -1);
    assert_non_null(strstr(err.msg, "overwrite"));
    assert_int_equal(kv_cache_fits(&s.cache, 0, T, 1, 9, 4, &err), -1);
    assert_int_equal(kv_cache_fits(&s.cache, 0, T, 1, 0, 0, &err), -1);
    assert_int_equal(kv_cache_fits(&s.cache, 0, T, 1, 8, 5, &err), -1);
    assert_int_equal(kv_cache_fits(&s.cache, 0, T, 1, 4, 2, &err), 0); // a smaller window is fine
    session_close(&s);
    engine_close(&e);
    model_free(&m);
}

// ---- the kernel: StreamingLLM's rule against a reference written from its definition ----------

// Rotate the pairs of x (hd) by angle pos * inv_freq[i], in double.
static void rotate_double(double *out, const float *x, int hd, double pos, const float *inv_freq) {
    for (int i = 0; i < hd / 2; i++) {
        double a = x[2 * i], b = x[2 * i + 1], t = pos * inv_freq[i];
        out[2 * i] = a * cos(t) - b * sin(t);
        out[2 * i + 1] = a * sin(t) + b * cos(t);
    }
}

// One head, one query at position p: keys unrotated, each visible key rotated at its index in
// the cache's order (the sinks 0 .. n - 1, then the window), the query at the last index.
static void ref_cache_position_attention(double *out, const float *q_raw, const float *k_raw, const float *v,
                                         int p, int hd, int window, int n_sink, const float *inv_freq) {
    VisibleKeys vis = attention_visible_keys(p, window, n_sink);
    double qr[64], kr[64], w[256], max = -INFINITY, sum = 0.0;
    rotate_double(qr, q_raw, hd, vis.count - 1, inv_freq);
    for (int i = 0; i < vis.count; i++) {
        int j = i < vis.n_sinks ? i : vis.lo + i - vis.n_sinks;
        rotate_double(kr, k_raw + (size_t)j * hd, hd, i, inv_freq);
        w[i] = 0.0;
        for (int d = 0; d < hd; d++) w[i] += qr[d] * kr[d] / sqrt((double)hd);
        max = fmax(max, w[i]);
    }
    for (int i = 0; i < vis.count; i++) sum += exp(w[i] - max);
    for (int d = 0; d < hd; d++) out[d] = 0.0;
    for (int i = 0; i < vis.count; i++) {
        int j = i < vis.n_sinks ? i : vis.lo + i - vis.n_sinks;
        for (int d = 0; d < hd; d++) out[d] += exp(w[i] - max) / sum * v[(size_t)j * hd + d];
    }
}

static void test_cache_positions_kernel_matches_reference(void **state) {
    (void)state;
    enum { HD = 16, N = 120 };
    uint64_t rng = rng_seed(12);
    float inv_freq[HD / 2];
    RopeConfig rc = {10000.0f, ROPE_NONE, 1.0f, 0, 32.0f, 1.0f};
    rope_frequencies(inv_freq, HD, &rc);
    float *k_raw = mallocCheck((size_t)N * HD * 4), *k = mallocCheck((size_t)N * HD * 4);
    float *v = mallocCheck((size_t)N * HD * 4), q_raw[HD], q[HD], got[HD];
    fill_normal(k_raw, (size_t)N * HD, 1.0f, &rng);
    fill_normal(v, (size_t)N * HD, 1.0f, &rng);
    fill_normal(q_raw, HD, 1.0f, &rng);
    for (int j = 0; j < N; j++) { // cached as the engine caches them: rotated at text positions
        memcpy(k + (size_t)j * HD, k_raw + (size_t)j * HD, HD * 4);
        rope_rotate(k + (size_t)j * HD, 1, HD, j, inv_freq, 1.0f, ROPE_STYLE_NORM);
    }
    int windows[] = {7, 30, 7}, sinks[] = {4, 1, 0};
    for (int t = 0; t < 3; t++)
        for (int p = 0; p < N; p += 13) {
            memcpy(q, q_raw, sizeof q);
            rope_rotate(q, 1, HD, p, inv_freq, 1.0f, ROPE_STYLE_NORM);
            AttentionShape s = {1, 1, HD, windows[t], sinks[t], 0.25f, .value_dim = HD, .cache_positions = 1, .inv_freq = inv_freq};
            void *keys[1] = {k}, *values[1] = {v};
            KVRows kv = {1, &p, keys, values, .layouts = NULL};
            size_t scratch_bytes = attention_kv_scratch_bytes(&s, N);
            float *scratch = mallocCheck(scratch_bytes);
            attention_kv(got, q, &kv, &s, scratch, scratch_bytes);
            free(scratch);
            double want[HD];
            float want_f[HD];
            ref_cache_position_attention(want, q_raw, k_raw, v, p, HD, windows[t], sinks[t], inv_freq);
            for (int d = 0; d < HD; d++) want_f[d] = (float)want[d];
            assert_close(got, want_f, HD, 1e-4, 1e-4);
        }
    free(k_raw);
    free(k);
    free(v);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_ring_covering_the_stream_is_full_attention),
        cmocka_unit_test(test_ring_equals_contiguous_window_mask),
        cmocka_unit_test(test_ring_with_shared_layers),
        cmocka_unit_test(test_hybrid_cache_equals_contiguous),
        cmocka_unit_test(test_position_rule_moves_only_evicted_sinks),
        cmocka_unit_test(test_ring_rollback),
        cmocka_unit_test(test_ring_memory_is_bounded),
        cmocka_unit_test(test_cache_positions_kernel_matches_reference),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
