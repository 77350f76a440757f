// test_model.c: the forward pass and its invariants, on small random models.
//  - model_forward_full equals a plain double-precision forward written here (ref_forward);
//  - prefill + decode with a KV cache equals full recompute at every position
//    (max relative error <= 1e-4) for MHA, GQA and MQA, with and without window and sinks;
//  - batched decode of several sequences equals decoding each alone;
//  - GQA equals MHA with each KV head repeated; window >= length equals full attention;
//  - linear / NTK / YaRN scaling with factor 1 equal plain RoPE, and their factor > 1 shapes;
//  - the KV cache holds 2 * L * S * n_kv * hd * sizeof(float) bytes.
// Run: make build/tests/test_model && ./build/tests/test_model
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <string.h>

#include "common.h"
#include "kernels.h"
#include "model.h"
#include "reference.h"
#include "test_util.h"

static Config small_config(int n_heads, int n_kv_heads, int window, int n_sink) {
    Config c = config_default();
    c.dim = 48;
    c.hidden_dim = 96;
    c.n_layers = 2;
    c.n_heads = n_heads;
    c.n_kv_heads = n_kv_heads;
    c.head_dim = 12;
    c.vocab_size = 67;
    c.seq_len = 64;
    c.window = window;
    c.n_sink = n_sink;
    return c;
}

static void random_model(Model *m, const Config *c, uint64_t seed) {
    char why[128];
    assert_true(config_validate(c, why, sizeof why));
    model_alloc(m, c);
    model_init_random(m, seed, 0.3f);
    // random (not unit) norm gains, so a wrong gain index cannot hide
    uint64_t rng = rng_seed(seed + 99);
    for (int i = 0; i < c->n_layers * c->dim; i++) {
        m->weights.rms_att[i] = 1.0f + 0.2f * rng_normal(&rng);
        m->weights.rms_ffn[i] = 1.0f + 0.2f * rng_normal(&rng);
    }
}

static void random_tokens(int *tokens, int n, int vocab, uint64_t seed) {
    uint64_t rng = rng_seed(seed);
    for (int i = 0; i < n; i++) tokens[i] = (int)(rng_u64(&rng) % vocab);
}

// A plain forward of every position with the reference kernels, attention computed
// over the whole sequence at once: independent of cache bookkeeping and chunking.
static void ref_forward(const Model *m, const int *tokens, int T, float *logits) {
    const Config *c = &m->config;
    const Weights *w = &m->weights;
    int C = c->dim, H = c->hidden_dim, hd = c->head_dim, qd = c->n_heads * hd, kvd = c->n_kv_heads * hd;
    float *x = mallocCheck((size_t)T * C * 4), *xb = mallocCheck((size_t)T * C * 4);
    float *q = mallocCheck((size_t)T * qd * 4), *k = mallocCheck((size_t)T * kvd * 4);
    float *v = mallocCheck((size_t)T * kvd * 4), *att = mallocCheck((size_t)T * qd * 4);
    float *proj = mallocCheck((size_t)T * C * 4), *h1 = mallocCheck((size_t)T * H * 4), *h3 = mallocCheck((size_t)T * H * 4);
    float inv_freq[64];
    float mscale = rope_frequencies(inv_freq, hd, &c->rope);
    AttentionShape s = {c->n_heads, c->n_kv_heads, hd, c->window, c->n_sink, 1.0f / sqrtf((float)hd)};
    for (int t = 0; t < T; t++) memcpy(x + t * C, w->token_embedding + (size_t)tokens[t] * C, C * 4);
    for (int l = 0; l < c->n_layers; l++) {
        ref_rmsnorm(xb, x, w->rms_att + l * C, T, C, c->norm_eps);
        ref_matmul(q, xb, w->wq + (size_t)l * qd * C, T, C, qd);
        ref_matmul(k, xb, w->wk + (size_t)l * kvd * C, T, C, kvd);
        ref_matmul(v, xb, w->wv + (size_t)l * kvd * C, T, C, kvd);
        for (int t = 0; t < T; t++) {
            ref_rope_rotate(q + t * qd, c->n_heads, hd, t, inv_freq, mscale);
            ref_rope_rotate(k + t * kvd, c->n_kv_heads, hd, t, inv_freq, mscale);
        }
        ref_attention_kv(att, q, k, v, T, 0, &s);
        ref_matmul(proj, att, w->wo + (size_t)l * C * qd, T, qd, C);
        for (int i = 0; i < T * C; i++) x[i] += proj[i];
        ref_rmsnorm(xb, x, w->rms_ffn + l * C, T, C, c->norm_eps);
        ref_matmul(h1, xb, w->w1 + (size_t)l * H * C, T, C, H);
        ref_matmul(h3, xb, w->w3 + (size_t)l * H * C, T, C, H);
        ref_swiglu(h1, h1, h3, T, H);
        ref_matmul(proj, h1, w->w2 + (size_t)l * C * H, T, H, C);
        for (int i = 0; i < T * C; i++) x[i] += proj[i];
    }
    ref_rmsnorm(xb, x, w->rms_final, T, C, c->norm_eps);
    ref_matmul(logits, xb, w->wcls, T, C, c->vocab_size);
    float *bufs[] = {x, xb, q, k, v, att, proj, h1, h3};
    for (int i = 0; i < 9; i++) free(bufs[i]);
}

static void test_full_forward_matches_reference(void **state) {
    (void)state;
    Config configs[] = {small_config(4, 4, 0, 0), small_config(4, 2, 5, 2), small_config(4, 1, 0, 0)};
    for (int i = 0; i < 3; i++) {
        configs[i].tied_embeddings = i == 1;
        Model m;
        random_model(&m, &configs[i], 10 + i);
        int T = 23, V = configs[i].vocab_size, tokens[23];
        random_tokens(tokens, T, V, i);
        float *got = mallocCheck((size_t)T * V * 4), *want = mallocCheck((size_t)T * V * 4);
        model_forward_full(&m, tokens, T, got, 1);
        ref_forward(&m, tokens, T, want);
        assert_true(max_rel_error(got, want, (size_t)T * V) <= 1e-4);
        free(got); free(want);
        model_free(&m);
    }
}

// Prefill the first n_prefill tokens (in chunks of max_rows), then decode the rest one by
// one; every position's logits must match full recompute.
static double cache_vs_recompute_error(const Config *c, int T, int n_prefill, int max_rows) {
    Model m;
    random_model(&m, c, 7);
    int V = c->vocab_size, *tokens = mallocCheck(T * sizeof(int));
    random_tokens(tokens, T, V, 3);
    float *full = mallocCheck((size_t)T * V * 4), *cached = mallocCheck((size_t)T * V * 4);
    model_forward_full(&m, tokens, T, full, 1);

    KVCache cache;
    RunState s;
    kv_cache_alloc(&cache, c->n_layers, c->n_kv_heads, c->head_dim, T);
    runstate_alloc(&s, c, max_rows);
    model_prefill(&m, &s, &cache, tokens, n_prefill, cached, 1);
    KVCache *caches[1] = {&cache};
    for (int t = n_prefill; t < T; t++) model_decode(&m, &s, caches, &tokens[t], 1, cached + (size_t)t * V);
    assert_int_equal(cache.len, T);

    double worst = 0.0;
    for (int t = 0; t < T; t++) {
        double e = max_rel_error(cached + (size_t)t * V, full + (size_t)t * V, V);
        if (e > worst) worst = e;
    }
    runstate_free(&s);
    kv_cache_free(&cache);
    free(tokens); free(full); free(cached);
    model_free(&m);
    return worst;
}

static void test_cache_equals_recompute(void **state) {
    (void)state;
    int heads[][2] = {{4, 4}, {4, 2}, {4, 1}}; // MHA, GQA, MQA
    int windows[][2] = {{0, 0}, {6, 0}, {6, 2}}; // full, window, window + sinks
    for (int h = 0; h < 3; h++)
        for (int w = 0; w < 3; w++) {
            Config c = small_config(heads[h][0], heads[h][1], windows[w][0], windows[w][1]);
            double e = cache_vs_recompute_error(&c, 30, 9, 4);
            if (!(e <= 1e-4)) fail_msg("heads %d/%d window %d sinks %d: rel error %g", heads[h][0], heads[h][1],
                                       windows[w][0], windows[w][1], e);
        }
}

static void test_batched_decode_equals_single(void **state) {
    (void)state;
    Config c = small_config(4, 2, 0, 0);
    Model m;
    random_model(&m, &c, 5);
    enum { B = 3 };
    int V = c.vocab_size, lens[B] = {4, 9, 1}, toks[B][12];
    KVCache caches[B], solo;
    KVCache *ptrs[B];
    RunState s;
    runstate_alloc(&s, &c, 16);
    for (int b = 0; b < B; b++) {
        random_tokens(toks[b], 12, V, 100 + b);
        kv_cache_alloc(&caches[b], c.n_layers, c.n_kv_heads, c.head_dim, 16);
        float scratch[67];
        model_prefill(&m, &s, &caches[b], toks[b], lens[b], scratch, 0);
        ptrs[b] = &caches[b];
    }
    int next[B] = {toks[0][lens[0]], toks[1][lens[1]], toks[2][lens[2]]};
    float batched[B * 67], alone[67];
    model_decode(&m, &s, ptrs, next, B, batched);
    kv_cache_alloc(&solo, c.n_layers, c.n_kv_heads, c.head_dim, 16);
    for (int b = 0; b < B; b++) {
        kv_cache_reset(&solo);
        model_prefill(&m, &s, &solo, toks[b], lens[b] + 1, alone, 0);
        assert_true(max_rel_error(batched + b * V, alone, V) <= 1e-5);
        kv_cache_free(&caches[b]);
    }
    kv_cache_free(&solo);
    runstate_free(&s);
    model_free(&m);
}

static void test_gqa_equals_mha_with_repeated_heads(void **state) {
    (void)state;
    Config cg = small_config(4, 2, 0, 0), cm = small_config(4, 4, 0, 0);
    Model g, mha;
    random_model(&g, &cg, 11);
    model_alloc(&mha, &cm);
    // same weights, except each of GQA's KV heads is repeated for its group of query heads
    int C = cg.dim, hd = cg.head_dim, group = cg.n_heads / cg.n_kv_heads;
    const Weights *wg = &g.weights;
    Weights *wm = &mha.weights;
    size_t shared_before = (size_t)(wg->wk - g.params);
    memcpy(mha.params, g.params, shared_before * sizeof(float)); // embedding, rms_att, wq
    for (int l = 0; l < cg.n_layers; l++)
        for (int h = 0; h < cm.n_kv_heads; h++) {
            size_t src = ((size_t)l * cg.n_kv_heads + h / group) * hd * C, dst = ((size_t)l * cm.n_kv_heads + h) * hd * C;
            memcpy(wm->wk + dst, wg->wk + src, (size_t)hd * C * sizeof(float));
            memcpy(wm->wv + dst, wg->wv + src, (size_t)hd * C * sizeof(float));
        }
    size_t rest = g.n_params - (size_t)(wg->wo - g.params);
    memcpy(wm->wo, wg->wo, rest * sizeof(float)); // wo .. end share the layout
    int T = 20, tokens[20], V = cg.vocab_size;
    random_tokens(tokens, T, V, 4);
    float a[20 * 67], b[20 * 67];
    model_forward_full(&g, tokens, T, a, 1);
    model_forward_full(&mha, tokens, T, b, 1);
    assert_true(max_rel_error(a, b, (size_t)T * V) <= 1e-5);
    model_free(&g);
    model_free(&mha);
}

static void test_wide_window_equals_full_attention(void **state) {
    (void)state;
    Config full = small_config(4, 2, 0, 0), wide = small_config(4, 2, 25, 3);
    Model a, b;
    random_model(&a, &full, 21);
    random_model(&b, &wide, 21);
    int T = 25, tokens[25], V = full.vocab_size;
    random_tokens(tokens, T, V, 8);
    float la[25 * 67], lb[25 * 67];
    model_forward_full(&a, tokens, T, la, 1);
    model_forward_full(&b, tokens, T, lb, 1);
    assert_memory_equal(la, lb, sizeof la);
    // and a window shorter than the sequence does change the result
    b.config.window = 4;
    model_forward_full(&b, tokens, T, lb, 1);
    assert_true(max_rel_error(lb, la, (size_t)T * V) > 1e-3);
    model_free(&a);
    model_free(&b);
}

static void test_rope_scalings(void **state) {
    (void)state;
    int hd = 64;
    RopeConfig plain = {10000.0f, ROPE_NONE, 1.0f, 256, 32.0f, 1.0f};
    float base[32], f[32];
    assert_true(rope_frequencies(base, hd, &plain) == 1.0f);
    for (int s = ROPE_LINEAR; s <= ROPE_YARN; s++) { // factor 1: identical to plain RoPE
        RopeConfig rc = plain;
        rc.scaling = s;
        assert_true(rope_frequencies(f, hd, &rc) == 1.0f);
        assert_close(f, base, 32, 1e-6, 0.0);
    }
    RopeConfig lin = plain, ntk = plain, yarn = plain;
    lin.scaling = ROPE_LINEAR; lin.factor = 4.0f;
    ntk.scaling = ROPE_NTK;    ntk.factor = 4.0f;
    yarn.scaling = ROPE_YARN;  yarn.factor = 4.0f;
    rope_frequencies(f, hd, &lin);
    for (int i = 0; i < 32; i++) assert_true(fabsf(f[i] - base[i] / 4.0f) <= 1e-6f * base[i]);
    rope_frequencies(f, hd, &ntk); // highest frequency kept, lowest divided by the factor
    assert_true(fabsf(f[0] - base[0]) <= 1e-6f);
    assert_true(fabsf(f[31] - base[31] / 4.0f) <= 1e-4f * base[31]);
    float mscale = rope_frequencies(f, hd, &yarn);
    assert_true(fabsf(mscale - (0.1f * logf(4.0f) + 1.0f)) <= 1e-6f);
    for (int i = 0; i < 32; i++) {
        double rotations = 256 * base[i] / (2 * M_PI);
        if (rotations > 32) assert_true(f[i] == base[i]);                             // fast: kept
        if (rotations < 1) assert_true(fabsf(f[i] - base[i] / 4.0f) <= 1e-6f * base[i]); // slow: interpolated
        assert_true(f[i] <= base[i] && f[i] >= base[i] / 4.0f * 0.999999f);
    }
}

static void test_kv_cache_bytes(void **state) {
    (void)state;
    int shapes[][4] = {{2, 4, 12, 64}, {6, 1, 48, 256}, {12, 8, 64, 1000}};
    for (int i = 0; i < 3; i++) {
        KVCache c;
        kv_cache_alloc(&c, shapes[i][0], shapes[i][1], shapes[i][2], shapes[i][3]);
        size_t expect = 2ull * shapes[i][0] * shapes[i][3] * shapes[i][1] * shapes[i][2] * sizeof(float);
        assert_int_equal(kv_cache_bytes(&c), expect);
        kv_cache_free(&c);
    }
}

static void test_config_validate(void **state) {
    (void)state;
    char why[128];
    Config c = small_config(4, 3, 0, 0);
    assert_false(config_validate(&c, why, sizeof why));
    assert_non_null(strstr(why, "n_kv_heads"));
    c = small_config(4, 4, 0, 0);
    c.head_dim = 11;
    assert_false(config_validate(&c, why, sizeof why));
    c = small_config(4, 4, 0, 0);
    c.dim = -5;
    assert_false(config_validate(&c, why, sizeof why));
    c = small_config(4, 4, 0, 0);
    c.vocab_size = 1 << 20;
    c.dim = 1 << 20; // 2^40 parameters
    assert_false(config_validate(&c, why, sizeof why));
}

static void test_forward_flops(void **state) {
    (void)state;
    Config c = small_config(4, 2, 0, 0); // C 48, H 96, q 48, kv 24, L 2, V 67
    double matmul = 2.0 * 2 * (48 * 48 + 2 * 48 * 24 + 48 * 48 + 3 * 48 * 96);
    // prefill of 3 tokens: keys 1 + 2 + 3 = 6, head on the last row
    double want = 3 * matmul + 4.0 * 2 * 48 * 6 + 2.0 * 48 * 67;
    assert_true(fabs(model_forward_flops(&c, 3, 0, 1) - want) < 1e-6);
    // decode at position 10 with a window of 4 and 2 sinks: 4 + 2 keys visible
    c.window = 4;
    c.n_sink = 2;
    want = matmul + 4.0 * 2 * 48 * 6 + 2.0 * 48 * 67;
    assert_true(fabs(model_forward_flops(&c, 1, 10, 1) - want) < 1e-6);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_full_forward_matches_reference),
        cmocka_unit_test(test_cache_equals_recompute),
        cmocka_unit_test(test_batched_decode_equals_single),
        cmocka_unit_test(test_gqa_equals_mha_with_repeated_heads),
        cmocka_unit_test(test_wide_window_equals_full_attention),
        cmocka_unit_test(test_rope_scalings),
        cmocka_unit_test(test_kv_cache_bytes),
        cmocka_unit_test(test_config_validate),
        cmocka_unit_test(test_forward_flops),
    };
    return cmocka_run_group_tests_name("model", tests, NULL, NULL);
}
