// test_model.c: the forward pass, the engine and the session API on the CPU backend, and
// their invariants, on small random models.
//  - full recompute, and chunked prefill + batched decode of two sequences, equal a plain
//    double-precision forward (ref_forward, model_reference.h, shared with test_cuda.c);
//  - prefill + decode with a KV cache equals full recompute at every position
//    (max relative error <= 1e-4) for MHA, GQA and MQA, with and without window and sinks;
//  - batched decode of several sequences equals decoding each alone;
//  - truncate rolls a session back exactly (what speculative decoding needs); a context that
//    does not fit is an error that leaves the session as it was; greedy generation feeds
//    back each argmax and stops where its callback says; session_perplexity is
//    llama-perplexity's number, computed plainly from each chunk's full forward;
//  - GQA equals MHA with each KV head repeated; window >= length equals full attention;
//  - linear / NTK / YaRN scaling with factor 1 equal plain RoPE, and their factor > 1 shapes;
//  - the KV cache holds 2 * L * S * n_kv * hd * sizeof(float) bytes; MLA's latent cache
//    L * S * (d_c + d_r) floats, CLA's ceil(L / kv_share) layers;
//  - MLA: the absorbed path (the default) equals the naive one (decompressed K and V) within
//    1e-5 relative, in prefill chunks and in batched decode steps of two sequences; both
//    equal the double-precision reference (naive MLA written out) and cache = recompute;
//  - CLA: kv_share 1 is the plain model bit for bit; kv_share 2 (and 3 layers in sets of 2)
//    matches the reference and cache = recompute;
//  - model_forward_flops counts MLA's absorbed path and CLA's missing KV projections;
//  - the thread governor, on made-up step times: it keeps every thread while they are faster,
//    moves to one at its first probe when the threads are slow (a busy machine), back when
//    they are fast again, probes ever less often while its choice holds, and never probes
//    with one thread allowed.
// Run: make build/tests/test_model && ./build/tests/test_model
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <math.h>
#include <string.h>

#include "common.h"
#include "model_reference.h"
#include "sampler.h"
#include "session.h"


// A config whose layers share keys and values in sets of kv_share (CLA).
static Config cla_config(Config c, int n_layers, int kv_share) {
    c.n_layers = n_layers;
    c.kv_share = kv_share;
    return c;
}

// c with n_layers layers, every k-th global (full attention, RoPE base theta_global), the
// others local at c's window and sinks: Gemma 3's hybrid at small scale.
static Config hybrid_config(Config c, int n_layers, int k, float theta_global) {
    c.n_layers = n_layers;
    c.global_every = k;
    c.rope_theta_global = theta_global;
    return c;
}

static void test_forward_matches_reference(void **state) {
    (void)state;
    Config configs[] = {small_config(4, 4, 0, 0),           small_config(4, 2, 5, 2),
                        small_config(4, 1, 0, 0),           small_mla_config(4, 16, 4, 0, 0),
                        small_mla_config(4, 16, 4, 5, 2),   cla_config(small_config(4, 2, 0, 0), 3, 2),
                        cla_config(small_mla_config(4, 16, 4, 0, 0), 2, 2),
                        hybrid_config(small_config(4, 1, 5, 2), 3, 2, 1e6f),
                        hybrid_config(small_mla_config(4, 16, 4, 5, 0), 3, 3, 0.0f)};
    for (int i = 0; i < (int)(sizeof configs / sizeof configs[0]); i++) {
        configs[i].tied_embeddings = i == 1;
        Model m;
        random_model(&m, &configs[i], 10 + i, 0.3f);
        int T = 23, V = configs[i].vocab_size, tokens[23];
        random_tokens(tokens, T, V, i);
        float *got = mallocCheck((size_t)T * V * 4), *want = mallocCheck((size_t)T * V * 4);
        model_forward_full(&m, tokens, T, got, 1);
        ref_forward(&m, tokens, T, want, NULL, DTYPE_F32);
        assert_true(max_rel_error(got, want, (size_t)T * V) <= 1e-4);
        free(got);
        free(want);
        model_free(&m);
        // and the server-like run: chunked prefill, then batched decode of two sequences
        double e = backend_vs_reference(&configs[i], ops_cpu(), DTYPE_F32, NULL);
        if (!(e <= 1e-4)) fail_msg("config %d: batched decode vs reference: relative error %g", i, e);
    }
}

// Gemma 3's options through the one forward against the plain reference: MQA and GQA, local
// layers (window 5) on a ring beside global ones at their own RoPE base. The tolerance is
// GeGLU's: the engine's fp16 GELU table rounds each activation by up to 2^-11 relative where
// the reference is exact; a missing norm, a wrong RoPE pairing or scale errs by O(1).
static void test_gemma3_forward_matches_reference(void **state) {
    (void)state;
    Config configs[] = {small_gemma3_config(4, 1, 5, 3, 3, 1e6f), small_gemma3_config(4, 2, 0, 2, 0, 0.0f)};
    for (int i = 0; i < (int)(sizeof configs / sizeof configs[0]); i++) {
        Model m;
        random_model(&m, &configs[i], 30 + i, 0.3f);
        assert_non_null(m.weights.rms_q);
        assert_non_null(m.weights.rms_post_ffn);
        int T = 23, V = configs[i].vocab_size, tokens[23];
        random_tokens(tokens, T, V, i);
        float *got = mallocCheck((size_t)T * V * 4), *want = mallocCheck((size_t)T * V * 4);
        model_forward_full(&m, tokens, T, got, 1);
        ref_forward(&m, tokens, T, want, NULL, DTYPE_F32);
        double e = max_rel_error(got, want, (size_t)T * V);
        if (!(e <= 1e-2)) fail_msg("gemma3 config %d: forward vs reference: relative error %g", i, e);
        free(got);
        free(want);
        model_free(&m);
        e = backend_vs_reference(&configs[i], ops_cpu(), DTYPE_F32, NULL);
        if (!(e <= 1e-2)) fail_msg("gemma3 config %d: batched decode vs reference: relative error %g", i, e);
    }
}

// Prefill the first n_prefill tokens (in chunks of max_rows), then decode the rest one by
// one; every position's logits must match full recompute.
static double cache_vs_recompute_error(const Config *c, int T, int n_prefill, int max_rows) {
    Model m;
    random_model(&m, c, 7, 0.3f);
    int V = c->vocab_size, *tokens = mallocCheck(T * sizeof(int));
    random_tokens(tokens, T, V, 3);
    float *full = mallocCheck((size_t)T * V * 4), *cached = mallocCheck((size_t)T * V * 4);
    model_forward_full(&m, tokens, T, full, 1);

    Engine e;
    Session s;
    Error err;
    engine_open(&e, &m, ops_cpu(), DTYPE_F32, max_rows, T);
    session_open(&s, &e, T);
    if (session_prefill(&s, tokens, n_prefill, cached, &err)) fail_msg("%s", err.msg);
    for (int t = n_prefill; t < T; t++) {
        if (session_decode(&s, tokens[t], &err)) fail_msg("%s", err.msg);
        memcpy(cached + (size_t)t * V, s.logits, V * sizeof(float));
    }
    assert_int_equal(session_len(&s), T);

    double worst = 0.0;
    for (int t = 0; t < T; t++) {
        double err_t = max_rel_error(cached + (size_t)t * V, full + (size_t)t * V, V);
        if (err_t > worst) worst = err_t;
    }
    session_close(&s);
    engine_close(&e);
    free(tokens);
    free(full);
    free(cached);
    model_free(&m);
    return worst;
}

static void test_cache_equals_recompute(void **state) {
    (void)state;
    int heads[][2] = {{4, 4}, {4, 2}, {4, 1}, {4, 0}}; // MHA, GQA, MQA, MLA (0)
    int windows[][2] = {{0, 0}, {6, 0}, {6, 2}}; // full, window, window + sinks
    for (int h = 0; h < 4; h++)
        for (int w = 0; w < 3; w++)
            for (int share = 1; share <= 2; share++) {
                Config c = heads[h][1] ? small_config(heads[h][0], heads[h][1], windows[w][0], windows[w][1])
                                       : small_mla_config(heads[h][0], 16, 4, windows[w][0], windows[w][1]);
                c.kv_share = share;
                double e = cache_vs_recompute_error(&c, 30, 9, 4);
                if (!(e <= 1e-4))
                    fail_msg("heads %d/%d (0: MLA) window %d sinks %d kv_share %d: rel error %g", heads[h][0],
                             heads[h][1], windows[w][0], windows[w][1], share, e);
            }
}

// Two sequences through an engine on the absorbed or the naive MLA path: prefill in chunks of
// 4 rows, then batched decode steps of both (rows of two caches in one forward).
static void mla_run(const Model *m, int naive, int tokens[2][24], float *logits[2]) {
    int V = m->config.vocab_size, lens[2] = {17, 6};
    Engine e;
    Session seq[2];
    Session *ptrs[2] = {&seq[0], &seq[1]};
    Error err;
    engine_open(&e, m, ops_cpu(), DTYPE_F32, 4, 24);
    e.mla_naive = naive;
    for (int b = 0; b < 2; b++) {
        session_open(&seq[b], &e, 24);
        if (session_prefill(&seq[b], tokens[b], lens[b], logits[b], &err)) fail_msg("%s", err.msg);
    }
    for (int i = 0; i < 5; i++) {
        int next[2] = {tokens[0][lens[0] + i], tokens[1][lens[1] + i]};
        if (session_decode_batch(ptrs, next, 2, &err)) fail_msg("%s", err.msg);
        for (int b = 0; b < 2; b++) memcpy(logits[b] + (size_t)(lens[b] + i) * V, seq[b].logits, V * sizeof(float));
    }
    for (int b = 0; b < 2; b++) session_close(&seq[b]);
    engine_close(&e);
}

// The absorbed path (W_uk in the queries, W_uv in the output projection) computes what the
// naive one (K and V decompressed from the latent cache) computes, to fp32 rounding; also at
// the full zoo's attn-mla shape (dim 128, 8 heads of 16, d_c 64, d_r 8, 3 layers), with
// weights of std 0.05: at 0.3 its activations grow about 3x per matmul and fp32 rounding
// alone reaches 3e-5 (trained models: 3e-7).
static void test_mla_absorbed_equals_naive(void **state) {
    (void)state;
    Config full = cla_config(small_mla_config(8, 64, 8, 0, 0), 3, 1);
    full.dim = 128;
    full.hidden_dim = 352;
    full.head_dim = 16;
    Config configs[] = {small_mla_config(4, 16, 4, 0, 0), small_mla_config(4, 24, 6, 7, 2),
                        cla_config(small_mla_config(2, 48, 6, 0, 0), 3, 2), full};
    float stds[] = {0.3f, 0.3f, 0.3f, 0.05f};
    for (int i = 0; i < 4; i++) {
        Model m;
        random_model(&m, &configs[i], 60 + i, stds[i]);
        int V = configs[i].vocab_size, tokens[2][24];
        random_tokens(tokens[0], 24, V, 1);
        random_tokens(tokens[1], 24, V, 2);
        float *absorbed[2], *naive[2];
        for (int b = 0; b < 2; b++) {
            absorbed[b] = mallocCheck((size_t)24 * V * 4);
            naive[b] = mallocCheck((size_t)24 * V * 4);
        }
        mla_run(&m, 0, tokens, absorbed);
        mla_run(&m, 1, tokens, naive);
        int n[2] = {22, 11}; // 17 + 5 and 6 + 5 rows of logits
        for (int b = 0; b < 2; b++) {
            double e = max_rel_error(absorbed[b], naive[b], (size_t)n[b] * V);
            if (!(e <= 1e-5)) fail_msg("config %d sequence %d: absorbed vs naive: relative error %g", i, b, e);
            // the paths really differ in what they multiply (else the check would prove nothing)
            assert_memory_not_equal(absorbed[b], naive[b], (size_t)n[b] * V * sizeof(float));
            free(absorbed[b]);
            free(naive[b]);
        }
        model_free(&m);
    }
}

// kv_share 1 is the plain model: llama2.c's weight layout (what existing checkpoints hold),
// and the same logits as a model of the same weights whose config never mentions CLA (a
// config from config_default). kv_share 2 removes the second layer's KV weights and does
// change the logits (the second layer attends to the first's keys and values).
static void test_cla_factor_one_equals_plain(void **state) {
    (void)state;
    Config plain = small_config(4, 2, 0, 0), one = plain;
    plain.n_layers = one.n_layers = 3;
    one.kv_share = 1;
    assert_int_equal(config_default().kv_share, 1);
    Model a, b;
    random_model(&a, &plain, 71, 0.3f);
    model_alloc(&b, &one);
    assert_int_equal(a.n_params, b.n_params);
    memcpy(b.params, a.params, a.n_params * sizeof(float));
    size_t C = 48, V = 67, L = 3, q = 48, kv = 24, H = 96; // llama2.c's order and sizes
    const Weights *w = &b.weights;
    assert_int_equal(w->rms_att - b.params, V * C);
    assert_int_equal(w->wq - b.params, V * C + L * C);
    assert_int_equal(w->wk - b.params, V * C + L * C + L * q * C);
    assert_int_equal(w->wv - w->wk, L * kv * C);
    assert_int_equal(w->wo - w->wv, L * kv * C);
    assert_int_equal(w->rms_ffn - w->wo, L * C * q);
    assert_int_equal(w->rms_final - w->rms_ffn, L * C + 3 * L * H * C);
    int T = 20, tokens[20];
    random_tokens(tokens, T, (int)V, 9);
    float la[20 * 67], lb[20 * 67];
    model_forward_full(&a, tokens, T, la, 1);
    model_forward_full(&b, tokens, T, lb, 1);
    assert_memory_equal(la, lb, sizeof la);
    Config two = cla_config(small_config(4, 2, 0, 0), 3, 2);
    assert_int_equal(model_param_count(&two), model_param_count(&plain) - 2 * kv * C);
    Model s2;
    random_model(&s2, &two, 71, 0.3f);
    model_forward_full(&s2, tokens, T, lb, 1);
    assert_true(max_rel_error(lb, la, (size_t)T * V) > 1e-3);
    model_free(&a);
    model_free(&b);
    model_free(&s2);
}

static void test_batched_decode_equals_single(void **state) {
    (void)state;
    Config c = small_config(4, 2, 0, 0);
    Model m;
    random_model(&m, &c, 5, 0.3f);
    enum { B = 3 };
    int V = c.vocab_size, lens[B] = {4, 9, 1}, toks[B][12];
    Engine e;
    Session seqs[B], solo;
    Session *ptrs[B];
    Error err;
    engine_open(&e, &m, ops_cpu(), DTYPE_F32, 16, 16);
    for (int b = 0; b < B; b++) {
        random_tokens(toks[b], 12, V, 100 + b);
        session_open(&seqs[b], &e, 16);
        if (session_prefill(&seqs[b], toks[b], lens[b], NULL, &err)) fail_msg("%s", err.msg);
        ptrs[b] = &seqs[b];
    }
    int next[B] = {toks[0][lens[0]], toks[1][lens[1]], toks[2][lens[2]]};
    if (session_decode_batch(ptrs, next, B, &err)) fail_msg("%s", err.msg);
    session_open(&solo, &e, 16);
    for (int b = 0; b < B; b++) {
        session_truncate(&solo, 0);
        if (session_prefill(&solo, toks[b], lens[b] + 1, NULL, &err)) fail_msg("%s", err.msg);
        assert_true(max_rel_error(seqs[b].logits, solo.logits, V) <= 1e-5);
        session_close(&seqs[b]);
    }
    session_close(&solo);
    engine_close(&e);
    model_free(&m);
}

// Rolling back is what speculative decoding does after a rejection: feed 20 tokens, truncate
// to 12, feed 8 others; the logits must be those of the 12 + 8 tokens fed from nothing, at
// every position (so no key or value of the discarded tokens survives), and a prompt of one
// row recomputed after truncate(n - 1) gives the same logits again.
static void test_truncate_rolls_back(void **state) {
    (void)state;
    Config c = small_config(4, 2, 6, 2);
    Model m;
    random_model(&m, &c, 31, 0.3f);
    int V = c.vocab_size, first[20], second[20];
    random_tokens(first, 20, V, 1);
    memcpy(second, first, 12 * sizeof(int));
    random_tokens(second + 12, 8, V, 2);
    float *rolled = mallocCheck((size_t)8 * V * 4), *fresh = mallocCheck((size_t)20 * V * 4);
    Engine e;
    Session s;
    Error err;
    engine_open(&e, &m, ops_cpu(), DTYPE_F32, 4, 20);
    session_open(&s, &e, 20);
    if (session_prefill(&s, first, 20, NULL, &err)) fail_msg("%s", err.msg);
    session_truncate(&s, 12);
    assert_int_equal(session_len(&s), 12);
    for (int i = 0; i < 8; i++) {
        if (session_decode(&s, second[12 + i], &err)) fail_msg("%s", err.msg);
        memcpy(rolled + (size_t)i * V, s.logits, V * sizeof(float));
    }
    model_forward_full(&m, second, 20, fresh, 1);
    assert_true(max_rel_error(rolled, fresh + (size_t)12 * V, (size_t)8 * V) <= 1e-5);
    float last[67];
    memcpy(last, s.logits, sizeof last);
    session_truncate(&s, 19);
    if (session_decode(&s, second[19], &err)) fail_msg("%s", err.msg);
    assert_memory_equal(last, s.logits, sizeof last);
    session_close(&s);
    engine_close(&e);
    free(rolled);
    free(fresh);
    model_free(&m);
}

typedef struct {
    int calls;
    double last;
} ChunkLog;

static void log_chunk(void *ctx, int chunk, double ppl) {
    ChunkLog *l = ctx;
    assert_int_equal(chunk, ++l->calls);
    l->last = ppl;
}

// session_perplexity is llama-perplexity's number: per chunk of ctx tokens from an empty cache,
// its first token replaced by BOS, the tokens after the first half scored. Checked against that
// computed plainly from each chunk's full forward, with log-softmax in double (the routine sums
// float exps in double: 1e-6 relative); the caller's tokens come back unchanged, on_chunk sees
// chunks 1..n in order, its last value the result; and BOS -1 keeps the chunks' first tokens.
static void test_session_perplexity_is_llama_perplexitys(void **state) {
    (void)state;
    enum { CTX = 16, CHUNKS = 3, BOS = 1 };
    Config c = small_config(4, 2, 6, 2);
    Model m;
    random_model(&m, &c, 81, 0.5f);
    int V = c.vocab_size, tokens[CHUNKS * CTX + 5], copy[CHUNKS * CTX + 5];
    random_tokens(tokens, CHUNKS * CTX + 5, V, 3);
    memcpy(copy, tokens, sizeof tokens);
    Engine e;
    Session s;
    Error err;
    engine_open(&e, &m, ops_cpu(), DTYPE_F32, 8, CTX);
    session_open(&s, &e, CTX);
    float *logits = mallocCheck((size_t)CTX * V * sizeof(float));
    for (int bos = -1; bos <= BOS; bos += BOS + 1) {
        double nll = 0.0;
        long count = 0;
        for (int ch = 0; ch < CHUNKS; ch++) {
            int chunk[CTX];
            memcpy(chunk, tokens + ch * CTX, sizeof chunk);
            if (bos >= 0) chunk[0] = bos;
            model_forward_full(&m, chunk, CTX, logits, 1);
            for (int k = CTX / 2; k + 1 < CTX; k++, count++) {
                const float *row = logits + (size_t)k * V;
                double max = row[0], sum = 0.0;
                for (int v = 1; v < V; v++) max = row[v] > max ? row[v] : max;
                for (int v = 0; v < V; v++) sum += exp(row[v] - max);
                nll -= row[chunk[k + 1]] - max - log(sum);
            }
        }
        double want = exp(nll / count);
        ChunkLog log = {0};
        double got = session_perplexity(&s, tokens, CTX, CHUNKS, bos, log_chunk, &log, &err);
        if (got < 0) fail_msg("%s", err.msg);
        if (fabs(got / want - 1.0) > 1e-6) fail_msg("BOS %d: perplexity %.9g, computed plainly %.9g", bos, got, want);
        assert_int_equal(log.calls, CHUNKS);
        assert_true(log.last == got);
        assert_memory_equal(tokens, copy, sizeof tokens);
    }
    free(logits);
    session_close(&s);
    engine_close(&e);
    model_free(&m);
}

// Feeding k <= 16 tokens in one prefill (a speculative verification) gives, bit for bit, the
// logits of decoding them one at a time: the two paths round alike, so greedy speculative
// decoding can reproduce greedy decoding token for token.
static void test_verify_rows_equal_decode_steps(void **state) {
    (void)state;
    Config c = small_config(4, 2, 0, 0);
    Model m;
    random_model(&m, &c, 51, 0.3f);
    int V = c.vocab_size, tokens[30];
    random_tokens(tokens, 30, V, 6);
    float *rows = mallocCheck((size_t)9 * V * 4);
    Engine e;
    Session a, b;
    Error err;
    engine_open(&e, &m, ops_cpu(), DTYPE_F32, 16, 30);
    session_open(&a, &e, 30);
    session_open(&b, &e, 30);
    if (session_prefill(&a, tokens, 21, NULL, &err) || session_prefill(&b, tokens, 21, NULL, &err))
        fail_msg("%s", err.msg);
    if (session_prefill(&a, tokens + 21, 9, rows, &err)) fail_msg("%s", err.msg);
    for (int i = 0; i < 9; i++) {
        if (session_decode(&b, tokens[21 + i], &err)) fail_msg("%s", err.msg);
        assert_memory_equal(rows + (size_t)i * V, b.logits, (size_t)V * sizeof(float));
    }
    session_close(&a);
    session_close(&b);
    engine_close(&e);
    free(rows);
    model_free(&m);
}

// A context that does not fit is an error, and leaves the session as it was.
static void test_session_overflow_is_an_error(void **state) {
    (void)state;
    Config c = small_config(4, 4, 0, 0);
    Model m;
    random_model(&m, &c, 3, 0.3f);
    int tokens[10] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10};
    Engine e;
    Session s;
    Error err;
    engine_open(&e, &m, ops_cpu(), DTYPE_F32, 4, 8);
    session_open(&s, &e, 8);
    assert_int_equal(session_prefill(&s, tokens, 6, NULL, &err), 0);
    assert_int_equal(session_prefill(&s, tokens, 3, NULL, &err), -1);
    assert_non_null(strstr(err.msg, "does not fit"));
    assert_int_equal(session_len(&s), 6);
    assert_int_equal(session_decode(&s, 1, &err), 0);
    assert_int_equal(session_decode(&s, 1, &err), 0);
    assert_int_equal(session_decode(&s, 1, &err), -1);
    assert_int_equal(session_len(&s), 8);
    session_close(&s);
    engine_close(&e);
    model_free(&m);
}

// session_generate: greedy generation picks each logit row's argmax, feeds it back, stops
// where the callback says (not counting that token), and never feeds the last token.
static void test_generate_greedy(void **state) {
    (void)state;
    Config c = small_config(4, 2, 0, 0);
    Model m;
    random_model(&m, &c, 41, 0.5f);
    int V = c.vocab_size, tokens[32] = {5, 9, 2};
    Sampler greedy;
    SamplerParams p = sampler_params_default();
    p.temperature = 0.0f;
    Error err;
    if (sampler_init(&greedy, V, &p, &err)) fail_msg("%s", err.msg);
    Engine e;
    Session s;
    engine_open(&e, &m, ops_cpu(), DTYPE_F32, 8, 32);
    session_open(&s, &e, 32);
    if (session_prefill(&s, tokens, 3, NULL, &err)) fail_msg("%s", err.msg);
    assert_int_equal(session_generate(&s, &greedy, tokens, 3, 10, NULL, NULL, &err), 10);
    assert_int_equal(session_len(&s), 12); // the 10th token was never fed
    float *all = mallocCheck((size_t)13 * V * 4);
    model_forward_full(&m, tokens, 13, all, 1);
    for (int i = 3; i < 13; i++) {
        const float *row = all + (size_t)(i - 1) * V;
        int best = 0;
        for (int j = 1; j < V; j++) best = row[j] > row[best] ? j : best;
        assert_int_equal(tokens[i], best);
    }
    session_truncate(&s, 2); // back to the prompt, its last token fed again for its logits
    if (session_decode(&s, tokens[2], &err)) fail_msg("%s", err.msg);
    StopAt stop = {4, 0};
    assert_int_equal(session_generate(&s, &greedy, tokens, 3, 10, stop_at, &stop, &err), 3);
    assert_int_equal(session_len(&s), 6);
    free(all);
    session_close(&s);
    engine_close(&e);
    sampler_free(&greedy);
    model_free(&m);
}

static void test_gqa_equals_mha_with_repeated_heads(void **state) {
    (void)state;
    Config cg = small_config(4, 2, 0, 0), cm = small_config(4, 4, 0, 0);
    Model g, mha;
    random_model(&g, &cg, 11, 0.3f);
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
    random_model(&a, &full, 21, 0.3f);
    random_model(&b, &wide, 21, 0.3f);
    int T = 25, tokens[25], V = full.vocab_size;
    random_tokens(tokens, T, V, 8);
    float la[25 * 67], lb[25 * 67];
    model_forward_full(&a, tokens, T, la, 1);
    model_forward_full(&b, tokens, T, lb, 1);
    assert_memory_equal(la, lb, sizeof la);
    // every layer global (global_every 1) is full attention whatever the window
    Config all_global = hybrid_config(small_config(4, 2, 4, 1), full.n_layers, 1, 0.0f);
    Model g;
    random_model(&g, &all_global, 21, 0.3f);
    model_forward_full(&g, tokens, T, lb, 1);
    assert_memory_equal(la, lb, sizeof la);
    model_free(&g);
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
        kv_cache_alloc(&c, ops_cpu(), shapes[i][0], shapes[i][1], shapes[i][2], shapes[i][3]);
        size_t expect = 2ull * shapes[i][0] * shapes[i][3] * shapes[i][1] * shapes[i][2] * sizeof(float);
        assert_int_equal(kv_cache_bytes(&c), expect);
        kv_cache_free(&c);
    }
    // a model's cache: MLA holds (d_c + d_r) floats per token and layer, CLA ceil(L / s) layers
    struct { Config c; size_t per_token; } models[] = {
        {small_config(4, 2, 0, 0), 2 * 2 * 2 * 12 * 4},
        {small_mla_config(4, 16, 4, 0, 0), 2 * (16 + 4) * 4},
        {cla_config(small_config(4, 2, 0, 0), 3, 2), 2 * 2 * 2 * 12 * 4},
        {cla_config(small_config(4, 2, 0, 0), 4, 2), 2 * 2 * 2 * 12 * 4},
        {cla_config(small_mla_config(4, 16, 4, 0, 0), 3, 3), 1 * (16 + 4) * 4},
    };
    for (size_t i = 0; i < sizeof models / sizeof models[0]; i++) {
        KVCache c;
        assert_int_equal(config_kv_bytes_per_token(&models[i].c), models[i].per_token);
        model_kv_cache_alloc(&c, ops_cpu(), &models[i].c, 100, 1);
        assert_int_equal(kv_cache_bytes(&c), 100 * models[i].per_token);
        if (models[i].c.kv_lora_rank) assert_ptr_equal(kv_cache_layer_value(&c, 0), kv_cache_layer_key(&c, 0));
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
    c = small_mla_config(4, 16, 4, 0, 0);
    assert_true(config_validate(&c, why, sizeof why));
    c.n_kv_heads = 2; // MLA has a key and value per head
    assert_false(config_validate(&c, why, sizeof why));
    c = small_mla_config(4, 16, 3, 0, 0); // odd RoPE part
    assert_false(config_validate(&c, why, sizeof why));
    c = small_config(4, 4, 0, 0);
    c.rope_dim = 4; // a RoPE part without MLA
    assert_false(config_validate(&c, why, sizeof why));
    c = small_config(4, 4, 0, 0);
    c.kv_share = 3; // more than the 2 layers
    assert_false(config_validate(&c, why, sizeof why));
    c.kv_share = 0;
    assert_false(config_validate(&c, why, sizeof why));
    c = hybrid_config(small_config(4, 4, 8, 0), 2, 2, 1e6f);
    assert_true(config_validate(&c, why, sizeof why));
    c.global_every = 3; // more than the 2 layers
    assert_false(config_validate(&c, why, sizeof why));
    c.global_every = 2;
    c.rope_theta_global = 0.5f;
    assert_false(config_validate(&c, why, sizeof why));
    c.rope_theta_global = 0.0f;
    c.global_windowed = 1; // the "all local" ablation of a hybrid with a window
    assert_true(config_validate(&c, why, sizeof why));
    c.global_windowed = 2;
    assert_false(config_validate(&c, why, sizeof why));
    c.global_windowed = 1;
    c.window = 0; // no window to attend through
    assert_false(config_validate(&c, why, sizeof why));
    c.window = 8;
    c.global_every = 0; // no global layers to ablate
    assert_false(config_validate(&c, why, sizeof why));
    c.global_every = 2;
    c.global_windowed = 0;
    c.cache_positions = 1; // StreamingLLM's rule is for windowed models
    assert_false(config_validate(&c, why, sizeof why));
}

// long_context's "all local" ablation of a hybrid (Config.global_windowed): the global layers
// attend through the window but keep their RoPE base. At one base for every layer it is the
// plain windowed model bit for bit; at Gemma's two bases it is not (the base was kept); and
// past the window it differs from the hybrid as built (the global layers saw further).
static void test_all_local_ablation(void **state) {
    (void)state;
    Config windowed = small_config(4, 2, 4, 1);
    windowed.n_layers = 2;
    Config one_base = hybrid_config(windowed, 2, 2, 0.0f), two_bases = hybrid_config(windowed, 2, 2, 1e6f);
    one_base.global_windowed = two_bases.global_windowed = 1;
    Config as_built = hybrid_config(windowed, 2, 2, 1e6f);
    Config configs[] = {windowed, one_base, two_bases, as_built};
    enum { N = sizeof configs / sizeof configs[0], T = 25, V = 67 };
    int tokens[T];
    random_tokens(tokens, T, V, 12);
    float logits[N][T * V];
    for (int i = 0; i < N; i++) {
        Model m;
        random_model(&m, &configs[i], 23, 0.3f); // the same weights in every config
        model_forward_full(&m, tokens, T, logits[i], 1);
        model_free(&m);
    }
    assert_memory_equal(logits[1], logits[0], sizeof logits[0]);
    assert_true(max_rel_error(logits[2], logits[1], (size_t)T * V) > 1e-3);
    assert_true(max_rel_error(logits[3], logits[2], (size_t)T * V) > 1e-3);
    // layers that see the whole context: none windowed, one global of two, none all local
    Config full = windowed;
    full.window = 0;
    assert_int_equal(config_full_attention_layers(&full), 2);
    assert_int_equal(config_full_attention_layers(&as_built), 1);
    assert_int_equal(config_full_attention_layers(&one_base), 0);
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
    // the same with layer 1 global: it sees all 11 keys, layer 0 its 6
    Config hybrid = hybrid_config(c, 2, 2, 0.0f);
    want = matmul + 4.0 * 48 * (6 + 11) + 2.0 * 48 * 67;
    assert_true(fabs(model_forward_flops(&hybrid, 1, 10, 1) - want) < 1e-6);
    // CLA, 3 layers in sets of 2: two layers project keys and values
    Config cla = cla_config(small_config(4, 2, 0, 0), 3, 2);
    matmul = 2.0 * (3 * (48 * 48 + 48 * 48 + 3 * 48 * 96) + 2 * (2 * 48 * 24));
    want = 3 * matmul + 3 * 4.0 * 48 * 6 + 2.0 * 48 * 67;
    assert_true(fabs(model_forward_flops(&cla, 3, 0, 1) - want) < 1e-6);
    // MLA absorbed, d_c 16, d_r 4, 4 heads: queries of 20 per head, latent outputs of 16,
    // kv_a of 20 rows; scores over 20 dims and P.V over 16 per head and key
    Config mla = small_mla_config(4, 16, 4, 0, 0);
    matmul = 2.0 * 2 * (48 * 4 * 20 + 48 * 4 * 16 + 3 * 48 * 96 + 48 * 20);
    want = 3 * matmul + 2.0 * 2 * 4 * (20 + 16) * 6 + 2.0 * 48 * 67;
    assert_true(fabs(model_forward_flops(&mla, 3, 0, 1) - want) < 1e-6);
    // expanded (the trainer's form): queries of hd + d_r = 16, outputs of hd = 12, W_kv_b
    // (4 * 2 * 12 rows of 16) once per token, scores over 16 dims and P.V over 12
    matmul = 2.0 * 2 * (48 * 4 * 16 + 48 * 4 * 12 + 3 * 48 * 96 + 48 * 20 + 96 * 16);
    want = 3 * matmul + 2.0 * 2 * 4 * (16 + 12) * 6 + 2.0 * 48 * 67;
    assert_true(fabs(model_forward_flops_expanded(&mla, 3, 0, 1) - want) < 1e-6);
    assert_true(model_forward_flops_expanded(&c, 1, 10, 1) == model_forward_flops(&c, 1, 10, 1));
}


// Feed the governor `steps` steps whose time depends only on the thread count it picks.
static void governor_run(ThreadGovernor *g, int steps, double one_thread_s, double all_threads_s) {
    for (int i = 0; i < steps; i++) {
        int t = thread_governor_next(g);
        assert_true(t == 1 || t == g->max_threads);
        thread_governor_record(g, t == 1 ? one_thread_s : all_threads_s);
    }
}

static void test_thread_governor(void **state) {
    (void)state;
    ThreadGovernor g;
    thread_governor_init(&g, 2);
    governor_run(&g, 200, 2e-3, 1.1e-3); // idle: 2 threads win
    assert_int_equal(g.threads, 2);
    assert_int_equal(g.switches, 0);
    assert_true(g.interval > 16); // each confirmed choice doubles the wait for the next probe
    governor_run(&g, 300, 2e-3, 40e-3); // busy: the barrier waits for a descheduled thread
    assert_int_equal(g.threads, 1);
    assert_int_equal(g.switches, 1); // and its probes at 2 threads keep losing
    governor_run(&g, 300, 2e-3, 1.1e-3); // the other process ended: back to 2 at a probe
    assert_int_equal(g.threads, 2);
    assert_int_equal(g.switches, 2);
    // erratic steps (one in four slow): compared over windows of steps, 2 threads still win
    thread_governor_init(&g, 2);
    for (int i = 0; i < 400; i++) {
        int t = thread_governor_next(&g);
        thread_governor_record(&g, t == 1 ? 2e-3 : i % 4 == 0 ? 3e-3 : 1.1e-3);
    }
    assert_int_equal(g.threads, 2);
    assert_int_equal(g.switches, 0);
    // busy, with the slow steps in bursts (4 of every 16 steps wait a time slice): probes
    // come at multiples of 16 steps, right after 12 fast ones, so the latest few steps at 2
    // threads look fast; the mean since the last probe does not
    thread_governor_init(&g, 2);
    for (int i = 0; i < 300; i++) {
        int t = thread_governor_next(&g);
        thread_governor_record(&g, t == 1 ? 2.4e-3 : i % 16 < 4 ? 10e-3 : 1.9e-3);
    }
    assert_int_equal(g.threads, 1);
    // a probe that wins by less than the margin changes nothing
    thread_governor_init(&g, 2);
    governor_run(&g, 100, 1.05e-3, 1.1e-3);
    assert_int_equal(g.threads, 2);
    thread_governor_init(&g, 1);
    for (int i = 0; i < 50; i++) {
        assert_int_equal(thread_governor_next(&g), 1);
        thread_governor_record(&g, 1e-3);
    }
    assert_int_equal(g.switches, 0);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_forward_matches_reference),
        cmocka_unit_test(test_gemma3_forward_matches_reference),
        cmocka_unit_test(test_cache_equals_recompute),
        cmocka_unit_test(test_batched_decode_equals_single),
        cmocka_unit_test(test_truncate_rolls_back),
        cmocka_unit_test(test_verify_rows_equal_decode_steps),
        cmocka_unit_test(test_session_overflow_is_an_error),
        cmocka_unit_test(test_generate_greedy),
        cmocka_unit_test(test_gqa_equals_mha_with_repeated_heads),
        cmocka_unit_test(test_mla_absorbed_equals_naive),
        cmocka_unit_test(test_cla_factor_one_equals_plain),
        cmocka_unit_test(test_wide_window_equals_full_attention),
        cmocka_unit_test(test_all_local_ablation),
        cmocka_unit_test(test_rope_scalings),
        cmocka_unit_test(test_kv_cache_bytes),
        cmocka_unit_test(test_config_validate),
        cmocka_unit_test(test_forward_flops),
        cmocka_unit_test(test_thread_governor),
        cmocka_unit_test(test_session_perplexity_is_llama_perplexitys),
    };
    return cmocka_run_group_tests_name("model", tests, NULL, NULL);
}
