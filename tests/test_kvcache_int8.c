// test_kvcache_int8.c: the int8 KV cache (kvcache.h, KVRows.dtype in ops.h): rows of int8 codes
// with a float scale per token and KV head, quantised by kv_write and read by attention_kv.
//  - kv_write's codes and scales: each head's slice of a row is round(x / s) with s = amax / 127,
//    so every value comes back within s / 2;
//  - attention_kv over an int8 cache equals the double-precision reference on the dequantised
//    keys and values (1e-4 relative, 1e-5 absolute, as the fp32 kernel), for MHA and GQA,
//    windows and sinks, several rows;
//  - and differs from fp32 attention on the original keys and values by at most the stated
//    bound: with eps = the largest |q . (k^ - k)| * scale over the visible keys, the softmax
//    weights move by at most e^(2 eps) - 1 in sum, so an output moves by at most
//    (e^(2 eps) - 1) * max |v^| + max |v^ - v| (+ 1e-5 of fp32 rounding);
//  - kv_cache_bytes counts int8 rows and their scales: 2 L rows n_kv (hd + 4);
//  - a session of an engine with kv_dtype = int8 decodes a random model to logits within 5% (max
//    relative) of the fp32 cache's, a sanity bound for the whole forward (the kernel bound above
//    is the exact one), and CUDA / ring caches refuse it (see ops_cuda.cu, session.c).
// Run: make build/tests/test_kvcache_int8 && ./build/tests/test_kvcache_int8
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <math.h>
#include <string.h>

#include "common.h"
#include "kernels.h"
#include "model_reference.h"
#include "session.h"

// The dequantised rows of one int8 cache layer: (n, kv_dim) from codes and (n, n_kv) scales.
static void dequantize_cache(float *out, const int8_t *codes, const float *scales, int n, int n_kv, int hd) {
    for (int j = 0; j < n; j++)
        for (int g = 0; g < n_kv; g++)
            for (int d = 0; d < hd; d++) {
                size_t i = ((size_t)j * n_kv + g) * hd + d;
                out[i] = codes[i] * scales[(size_t)j * n_kv + g];
            }
}

static void check_int8_attention(int n_heads, int n_kv, int hd, int n_q, int pos0, int window, int n_sink) {
    uint64_t rng = rng_seed(n_heads * 100 + n_kv * 10 + pos0 + window + hd);
    int n_keys = pos0 + n_q, kv_dim = n_kv * hd;
    AttentionShape s = {n_heads, n_kv, hd, window, n_sink, 0.25f, .value_dim = hd};
    size_t nkv = (size_t)n_keys * kv_dim;
    float *q = mallocCheck((size_t)n_q * n_heads * hd * sizeof(float)), *k = mallocCheck(nkv * sizeof(float));
    float *v = mallocCheck(nkv * sizeof(float)), *kd = mallocCheck(nkv * sizeof(float)), *vd = mallocCheck(nkv * sizeof(float));
    fill_normal(q, (size_t)n_q * n_heads * hd, 1.0f, &rng);
    fill_normal(k, nkv, 1.0f, &rng);
    fill_normal(v, nkv, 1.0f, &rng);
    int8_t *kc = mallocCheck(nkv), *vc = mallocCheck(nkv);
    float *ks = mallocCheck((size_t)n_keys * n_kv * sizeof(float)), *vs = mallocCheck((size_t)n_keys * n_kv * sizeof(float));
    int *pos = mallocCheck(n_keys * sizeof(int));
    void **keys = mallocCheck(n_keys * sizeof(void *)), **values = mallocCheck(n_keys * sizeof(void *));
    float **kss = mallocCheck(n_keys * sizeof(float *)), **vss = mallocCheck(n_keys * sizeof(float *));
    for (int r = 0; r < n_keys; r++) pos[r] = r, keys[r] = kc, values[r] = vc, kss[r] = ks, vss[r] = vs;
    // every position written through kv_write, as a prefill would
    KVRows all = {n_keys, pos, keys, values, NULL, DTYPE_I8, n_kv, kss, vss};
    ops_cpu()->kv_write(&all, k, v, kv_dim);
    dequantize_cache(kd, kc, ks, n_keys, n_kv, hd);
    dequantize_cache(vd, vc, vs, n_keys, n_kv, hd);
    for (size_t i = 0; i < nkv; i++) {
        float sk = ks[i / hd], sv = vs[i / hd]; // (row, head) of value i
        if (!(fabsf(kd[i] - k[i]) <= sk / 2 * (1 + 1e-6f) && fabsf(vd[i] - v[i]) <= sv / 2 * (1 + 1e-6f)))
            fail_msg("int8 kv value %zu: key %g -> %g (s %g), value %g -> %g (s %g)", i, k[i], kd[i], sk, v[i], vd[i], sv);
    }

    size_t n_out = (size_t)n_q * n_heads * hd;
    float *got = mallocCheck(n_out * sizeof(float)), *want = mallocCheck(n_out * sizeof(float));
    float *fp32 = mallocCheck(n_out * sizeof(float));
    KVRows kv = {n_q, pos + pos0, keys, values, NULL, DTYPE_I8, n_kv, kss, vss};
    size_t scratch_bytes = attention_kv_scratch_bytes(&s, n_keys);
    float *scratch = mallocCheck(scratch_bytes);
    attention_kv(got, q, &kv, &s, scratch, scratch_bytes);
    ref_attention_kv(want, q, kd, vd, n_q, pos0, &s);
    assert_close(got, want, n_out, 1e-4, 1e-5);

    ref_attention_kv(fp32, q, k, v, n_q, pos0, &s);
    for (int r = 0; r < n_q; r++)
        for (int h = 0; h < n_heads; h++) {
            int g = h / (n_heads / n_kv), p = pos0 + r;
            const float *qh = q + ((size_t)r * n_heads + h) * hd;
            double eps = 0.0, vmax = 0.0, verr = 0.0;
            for (int j = 0; j <= p; j++) {
                if (!attention_visible(p, j, window, n_sink)) continue;
                double e = 0.0;
                for (int d = 0; d < hd; d++) {
                    size_t i = ((size_t)j * n_kv + g) * hd + d;
                    e += (double)qh[d] * (kd[i] - k[i]);
                    vmax = fmax(vmax, fabs(vd[i]));
                    verr = fmax(verr, fabs((double)vd[i] - v[i]));
                }
                eps = fmax(eps, fabs(e) * s.scale);
            }
            double bound = (exp(2 * eps) - 1) * vmax + verr + 1e-5;
            for (int d = 0; d < hd; d++) {
                size_t o = ((size_t)r * n_heads + h) * hd + d;
                if (!(fabs((double)got[o] - fp32[o]) <= bound))
                    fail_msg("int8 kv attention row %d head %d dim %d: %g, fp32 %g, bound %g", r, h, d, got[o], fp32[o], bound);
            }
        }
    free(q), free(k), free(v), free(kd), free(vd), free(kc), free(vc), free(ks), free(vs), free(pos);
    free(keys), free(values), free(kss), free(vss), free(got), free(want), free(fp32), free(scratch);
}

static void test_int8_attention_matches_reference(void **state) {
    (void)state;
    check_int8_attention(4, 4, 16, 5, 20, 0, 0); // MHA, a prefill chunk
    check_int8_attention(4, 2, 16, 1, 37, 0, 0); // GQA decode
    check_int8_attention(4, 1, 16, 6, 30, 9, 2); // MQA, window and sinks
    check_int8_attention(2, 1, 40, 3, 12, 0, 0); // head dims with a ragged end in the key dot
    check_int8_attention(2, 2, 7, 3, 12, 0, 0);
}

static void test_int8_cache_bytes(void **state) {
    (void)state;
    KVCache c, f;
    kv_cache_alloc_typed(&c, ops_cpu(), DTYPE_I8, 3, 2, 16, 50);
    kv_cache_alloc(&f, ops_cpu(), 3, 2, 16, 50);
    assert_int_equal(kv_cache_bytes(&c), 2 * 3 * 50 * 2 * (16 + 4));
    assert_int_equal(kv_cache_bytes(&f), 2 * 3 * 50 * 2 * 16 * 4);
    assert_int_equal(c.dtype, DTYPE_I8);
    assert_ptr_equal((char *)kv_cache_layer_key(&c, 1), (char *)c.key + 50 * 2 * 16);
    assert_ptr_equal(kv_cache_layer_value_scale(&c, 2), c.value_scale + 2 * 50 * 2);
    assert_null(kv_cache_layer_key_scale(&f, 0));
    kv_cache_free(&c);
    kv_cache_free(&f);
}

static void test_int8_session_close_to_fp32(void **state) {
    (void)state;
    Config c = small_config(4, 2, 0, 0);
    Model m;
    random_model(&m, &c, 41, 0.15f);
    int n = 24, V = c.vocab_size, tokens[24];
    for (int i = 0; i < n; i++) tokens[i] = (i * 5 + 1) % V;
    float *logits[2];
    for (int t = 0; t < 2; t++) {
        Engine e;
        Session s;
        Error err;
        engine_open(&e, &m, ops_cpu(), DTYPE_F32, MAX_ROWS, c.seq_len);
        e.kv_dtype = t ? DTYPE_I8 : DTYPE_F32;
        session_open(&s, &e, c.seq_len);
        assert_int_equal(s.cache.dtype, e.kv_dtype);
        logits[t] = mallocCheck((size_t)n * V * sizeof(float));
        if (session_prefill(&s, tokens, 8, logits[t], &err)) fail_msg("%s", err.msg);
        for (int i = 8; i < n; i++) {
            if (session_decode(&s, tokens[i], &err)) fail_msg("%s", err.msg);
            memcpy(logits[t] + (size_t)i * V, s.logits, V * sizeof(float));
        }
        session_close(&s);
        engine_close(&e);
    }
    double e = max_rel_error(logits[1], logits[0], (size_t)n * V);
    print_message("int8 KV cache: max relative logit error %g against fp32\n", e);
    assert_true(e > 0.0 && e <= 0.05);
    free(logits[0]), free(logits[1]);
    model_free(&m);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_int8_attention_matches_reference),
        cmocka_unit_test(test_int8_cache_bytes),
        cmocka_unit_test(test_int8_session_close_to_fp32),
    };
    return cmocka_run_group_tests_name("kvcache_int8", tests, NULL, NULL);
}
