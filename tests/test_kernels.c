// test_kernels.c: every CPU kernel in kernels.h against its double-precision reference
// (kernels/reference.h) on random inputs (attention also with values narrower or wider than
// keys and with MLA's latent rows, where values are part of the keys; RoPE of a head's tail). Tolerance: |fast - ref| <= atol + rtol * |ref|
// elementwise, with rtol = 1e-4 and atol 1e-5 (1e-4 for long dot products). The trainer's
// kernels (backward passes, attention with probabilities, cross-entropy, AdamW) state theirs at
// each check; their finite-difference checks are test_train.c's.
// Run: make build/tests/test_kernels && ./build/tests/test_kernels
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <omp.h>
#include <string.h>

#include "common.h"
#include "kernels.h"
#include "reference.h"
#include "test_util.h"
#include "cpu/vec.h" // its inline primitives, compiled into this test at the build's own width

static float *random_buffer(size_t n, uint64_t *rng) {
    float *x = mallocCheck(n * sizeof(float));
    fill_normal(x, n, 1.0f, rng);
    return x;
}

static void check_matmul(int T, int n, int d) {
    uint64_t rng = rng_seed(T * 1000 + n + d);
    float *x = random_buffer((size_t)T * n, &rng), *w = random_buffer((size_t)d * n, &rng);
    float *got = mallocCheck((size_t)T * d * sizeof(float)), *want = mallocCheck((size_t)T * d * sizeof(float));
    matmul(got, x, w, T, n, d);
    ref_matmul(want, x, w, T, n, d);
    assert_close(got, want, (size_t)T * d, 1e-4, 1e-4);
    free(x); free(w); free(got); free(want);
}

static void test_matmul(void **state) {
    (void)state;
    check_matmul(1, 288, 768);  // matrix-vector path
    check_matmul(1, 301, 4000); // n not a multiple of 8 (tail loops)
    check_matmul(1, 5, 3);      // shorter than one vector
    check_matmul(7, 33, 65);    // odd sizes, a few rows
    check_matmul(17, 33, 65);   // sgemm path
    check_matmul(64, 288, 288);
}

// Up to 16 rows, row t of a matmul is bit for bit the single-row result on x_t: what lets a
// speculative verification of several tokens round exactly as decoding them one by one.
static void test_matmul_rows_match_single_rows(void **state) {
    (void)state;
    uint64_t rng = rng_seed(9);
    int shapes[][3] = {{2, 288, 768}, {9, 301, 130}, {16, 5, 3}};
    for (int s = 0; s < 3; s++) {
        int T = shapes[s][0], n = shapes[s][1], d = shapes[s][2];
        float *x = random_buffer((size_t)T * n, &rng), *w = random_buffer((size_t)d * n, &rng);
        float *rows = mallocCheck((size_t)T * d * sizeof(float)), *one = mallocCheck((size_t)d * sizeof(float));
        matmul(rows, x, w, T, n, d);
        for (int t = 0; t < T; t++) {
            matmul(one, x + (size_t)t * n, w, 1, n, d);
            assert_memory_equal(rows + (size_t)t * d, one, (size_t)d * sizeof(float));
        }
        free(x); free(w); free(rows); free(one);
    }
}

static void test_rmsnorm(void **state) {
    (void)state;
    uint64_t rng = rng_seed(1);
    int T = 37, C = 130;
    float *x = random_buffer((size_t)T * C, &rng), *wt = random_buffer(C, &rng);
    float got[37 * 130], want[37 * 130];
    rmsnorm(got, x, wt, T, C, 1e-5f);
    ref_rmsnorm(want, x, wt, T, C, 1e-5f);
    assert_close(got, want, (size_t)T * C, 1e-4, 1e-5);
    rmsnorm(x, x, wt, T, C, 1e-5f); // in place is allowed
    assert_close(x, want, (size_t)T * C, 1e-4, 1e-5);
    free(x); free(wt);
}

// Rows longer and shorter than a vector, ragged ends, large logits (the max subtraction),
// and each row's log-sum-exp.
static void test_softmax(void **state) {
    (void)state;
    uint64_t rng = rng_seed(2);
    int lengths[] = {301, 5, 16, 2048};
    for (int c = 0; c < 4; c++) {
        int rows = 40, n = lengths[c];
        float *x = random_buffer((size_t)rows * n, &rng), lse[40], want_lse[40];
        for (int i = 0; i < rows * n; i++) x[i] *= 30.0f;
        float *y = mallocCheck((size_t)rows * n * sizeof(float));
        memcpy(y, x, (size_t)rows * n * sizeof(float));
        softmax_rows(x, rows, n, lse);
        ref_softmax_rows(y, rows, n, want_lse);
        assert_close(x, y, (size_t)rows * n, 1e-4, 1e-6);
        assert_close(lse, want_lse, rows, 1e-5, 1e-5);
        free(x); free(y);
    }
}

static void test_rope(void **state) {
    (void)state;
    uint64_t rng = rng_seed(3);
    int H = 6, hd = 48;
    float inv_freq[24];
    for (int i = 0; i < hd / 2; i++) inv_freq[i] = powf(10000.0f, -2.0f * i / hd);
    for (int pos = 0; pos < 4000; pos += 333) {
        RopeStyle style = pos % 2 ? ROPE_STYLE_NEOX : ROPE_STYLE_NORM; // both pairings
        float *x = random_buffer((size_t)H * hd, &rng), y[6 * 48];
        memcpy(y, x, sizeof y);
        rope_rotate(x, H, hd, pos, inv_freq, 1.3f, style);
        ref_rope_rotate(y, H, hd, pos, inv_freq, 1.3f, style);
        // angles up to 4000 rad, grown by repeated float multiplication as ggml grows them
        // (theta_i = theta_(i-1) r): up to a few ulps of 2.4e-4 rad where the old single
        // product was off by half of one, so 5e-4 absolute (was 2e-4)
        assert_close(x, y, (size_t)H * hd, 1e-4, 5e-4);
        free(x);
    }
}

// The CPU table's rope with rot_dim < head_dim (MLA's decoupled part): the last rot_dim dims
// of each head turn as rope_rotate turns a head of rot_dim; the rest stays bit for bit.
static void test_rope_partial(void **state) {
    (void)state;
    uint64_t rng = rng_seed(13);
    enum { R = 3, H = 4, HD = 20, ROT = 6 };
    float inv_freq[ROT / 2];
    for (int i = 0; i < ROT / 2; i++) inv_freq[i] = powf(10000.0f, -2.0f * i / ROT);
    int pos[R] = {0, 7, 1234};
    for (RopeStyle style = ROPE_STYLE_NORM; style <= ROPE_STYLE_NEOX; style++) {
        float *x = random_buffer((size_t)R * H * HD, &rng), want[R * H * HD];
        memcpy(want, x, sizeof want);
        ops_cpu()->rope(x, R, H, HD, ROT, pos, inv_freq, 1.3f, style);
        for (int r = 0; r < R; r++)
            for (int h = 0; h < H; h++)
                ref_rope_rotate(want + ((size_t)r * H + h) * HD + HD - ROT, 1, ROT, pos[r], inv_freq, 1.3f, style);
        for (int i = 0; i < R * H * HD; i++)
            if (i % HD < HD - ROT) assert_true(x[i] == want[i]);
        assert_close(x, want, (size_t)R * H * HD, 1e-4, 2e-4);
        free(x);
    }
}

// NEOX pairs dim i with dim i + d/2: rotating a head by a quarter turn (angle pi/2) moves
// each first-half value into the second half, negating the other way.
static void test_rope_neox_pairs(void **state) {
    (void)state;
    enum { HD = 8 };
    float x[HD] = {1, 2, 3, 4, 5, 6, 7, 8}, inv_freq[HD / 2];
    for (int i = 0; i < HD / 2; i++) inv_freq[i] = (float)(3.14159265358979323846 / 2);
    rope_rotate(x, 1, HD, 1, inv_freq, 1.0f, ROPE_STYLE_NEOX);
    float want[HD] = {-5, -6, -7, -8, 1, 2, 3, 4};
    assert_close(x, want, HD, 1e-6, 1e-6);
}

// GeGLU through ggml's fp16 table against the exact tanh-form GELU: within the half rounding
// of the gate and of the result (2 * 2^-11 relative, plus an absolute floor near 0 where the
// derivative is 0.5); exactly 0 and g * up beyond -10 and 10; and one value worked by hand.
static void test_geglu_tanh(void **state) {
    (void)state;
    uint64_t rng = rng_seed(14);
    int T = 5, H = 301;
    size_t n = (size_t)T * H;
    float *g = random_buffer(n, &rng), *u = random_buffer(n, &rng);
    for (size_t i = 0; i < n; i += 3) g[i] *= 8.0f;
    g[0] = -12.0f, g[1] = 12.0f, g[2] = 1.0f;
    float *got = mallocCheck(n * sizeof(float)), *want = mallocCheck(n * sizeof(float));
    geglu_tanh(got, g, u, T, H);
    ref_geglu_tanh(want, g, u, T, H);
    assert_close(got, want, n, 2e-3, 1e-3);
    assert_true(got[0] == 0.0f && got[1] == 12.0f * u[1]);
    // gelu(1) = 0.5 (1 + tanh(0.79788456 * 1.044715)) = 0.841192, whose nearest half is 0.84130859375
    assert_true(got[2] == 0.84130859375f * u[2]);
    free(g); free(u); free(got); free(want);
}

// Lengths with a ragged end and gates out to +-40 (the sigmoid's two branches, e^-|g|
// underflowing); the backward also with d_out aliasing d_up, as the trainer calls it.
static void test_swiglu(void **state) {
    (void)state;
    uint64_t rng = rng_seed(4);
    int sizes[][2] = {{9, 1000}, {1, 7}, {3, 37}};
    for (int c = 0; c < 3; c++) {
        int T = sizes[c][0], H = sizes[c][1];
        size_t n = (size_t)T * H;
        float *g = random_buffer(n, &rng), *u = random_buffer(n, &rng), *dout = random_buffer(n, &rng);
        for (size_t i = 0; i < n; i += 5) g[i] *= 10.0f;
        g[0] = 40.0f, g[n - 1] = -40.0f;
        float *got = mallocCheck(n * sizeof(float)), *want = mallocCheck(n * sizeof(float));
        float *dg = mallocCheck(n * sizeof(float)), *want_dg = mallocCheck(n * sizeof(float));
        swiglu(got, g, u, T, H);
        ref_swiglu(want, g, u, T, H);
        assert_close(got, want, n, 1e-4, 1e-6);
        ref_swiglu_backward(want_dg, want, dout, g, u, n);
        memcpy(got, dout, n * sizeof(float));
        swiglu_backward(dg, got, got, g, u, n); // d_out is d_up
        assert_close(dg, want_dg, n, 1e-4, 1e-6);
        assert_close(got, want, n, 1e-4, 1e-6);
        free(g); free(u); free(dout); free(got); free(want); free(dg); free(want_dg);
    }
}

// attention_kv over one sequence's rows pos0 .. pos0 + n_q - 1 against the reference. Keys
// and values that no query sees (beyond the window, not sinks) are NaN: a kernel that reads
// a hidden key lets the NaN into its output.
static void check_attention(int n_heads, int n_kv, int n_q, int pos0, int window, int n_sink) {
    uint64_t rng = rng_seed(n_heads * 100 + n_kv * 10 + pos0 + window);
    int hd = 16, n_keys = pos0 + n_q, kv_dim = n_kv * hd;
    AttentionShape s = {n_heads, n_kv, hd, window, n_sink, 0.25f, .value_dim = hd};
    float *q = random_buffer((size_t)n_q * n_heads * hd, &rng);
    float *k = random_buffer((size_t)n_keys * kv_dim, &rng), *v = random_buffer((size_t)n_keys * kv_dim, &rng);
    for (int j = 0; j < n_keys; j++) {
        int seen = 0;
        for (int p = pos0; p < n_keys; p++) seen |= attention_visible(p, j, window, n_sink);
        for (int i = 0; !seen && i < kv_dim; i++) k[(size_t)j * kv_dim + i] = v[(size_t)j * kv_dim + i] = NAN;
    }
    size_t n_out = (size_t)n_q * n_heads * hd;
    float *got = mallocCheck(n_out * sizeof(float)), *want = mallocCheck(n_out * sizeof(float));
    int *pos = mallocCheck(n_q * sizeof(int));
    void **keys = mallocCheck(n_q * sizeof(void *)), **values = mallocCheck(n_q * sizeof(void *));
    for (int r = 0; r < n_q; r++) {
        pos[r] = pos0 + r;
        keys[r] = k;
        values[r] = v;
    }
    KVRows kv = {n_q, pos, keys, values, .layouts = NULL};
    size_t scratch_bytes = attention_kv_scratch_bytes(&s, n_keys);
    float *scratch = mallocCheck(scratch_bytes);
    attention_kv(got, q, &kv, &s, scratch, scratch_bytes);
    ref_attention_kv(want, q, k, v, n_q, pos0, &s);
    assert_close(got, want, n_out, 1e-4, 1e-5);
    free(q); free(k); free(v); free(got); free(want); free(pos); free(keys); free(values); free(scratch);
}

// Rows of different sequences in one call (a batched decode step): each row must read its
// own cache, at its own position.
static void test_attention_kv_rows_of_many_sequences(void **state) {
    (void)state;
    uint64_t rng = rng_seed(77);
    enum { B = 3, HEADS = 4, KV = 2, HD = 16, CAP = 40 };
    int pos[B] = {5, 39, 0};
    AttentionShape s = {HEADS, KV, HD, 0, 0, 0.25f, .value_dim = HD};
    void *k[B], *v[B];
    float *q = random_buffer((size_t)B * HEADS * HD, &rng);
    float got[B * HEADS * HD], want[HEADS * HD];
    for (int b = 0; b < B; b++) {
        k[b] = random_buffer((size_t)CAP * KV * HD, &rng);
        v[b] = random_buffer((size_t)CAP * KV * HD, &rng);
    }
    KVRows kv = {B, pos, k, v, .layouts = NULL};
    size_t bytes = attention_kv_scratch_bytes(&s, CAP);
    float *scratch = mallocCheck(bytes);
    attention_kv(got, q, &kv, &s, scratch, bytes);
    for (int b = 0; b < B; b++) {
        ref_attention_kv(want, q + (size_t)b * HEADS * HD, k[b], v[b], 1, pos[b], &s);
        assert_close(got + (size_t)b * HEADS * HD, want, HEADS * HD, 1e-4, 1e-5);
        free(k[b]);
        free(v[b]);
    }
    free(q);
    free(scratch);
}

// Values narrower than keys, and values that are part of the key rows (MLA's latent cache:
// one KV head whose key is [c; k_R] and whose value is its c), against the reference.
static void check_attention_values(int n_heads, int n_kv, int hd, int vd, int latent, int window, int n_sink) {
    uint64_t rng = rng_seed(n_heads * 31 + vd + latent);
    int n_q = 9, pos0 = 14, n_keys = pos0 + n_q;
    AttentionShape s = {n_heads, n_kv, hd, window, n_sink, 0.3f, .value_dim = vd};
    if (latent) s.value_stride = n_kv * hd; // values read the key rows
    size_t kw = (size_t)n_kv * hd, vw = latent ? kw : (size_t)n_kv * vd;
    float *q = random_buffer((size_t)n_q * n_heads * hd, &rng), *k = random_buffer((size_t)n_keys * kw, &rng);
    float *v = latent ? k : random_buffer((size_t)n_keys * vw, &rng);
    size_t n_out = (size_t)n_q * n_heads * vd;
    float *got = mallocCheck(n_out * sizeof(float)), *want = mallocCheck(n_out * sizeof(float));
    int pos[9];
    void *keys[9], *values[9];
    for (int r = 0; r < n_q; r++) pos[r] = pos0 + r, keys[r] = k, values[r] = v;
    KVRows kv = {n_q, pos, keys, values, .layouts = NULL};
    size_t scratch_bytes = attention_kv_scratch_bytes(&s, n_keys);
    float *scratch = mallocCheck(scratch_bytes);
    attention_kv(got, q, &kv, &s, scratch, scratch_bytes);
    ref_attention_kv(want, q, k, v, n_q, pos0, &s);
    assert_close(got, want, n_out, 1e-4, 1e-5);
    if (!latent) free(v);
    free(q); free(k); free(got); free(want); free(scratch);
}

static void test_attention_kv_value_dims(void **state) {
    (void)state;
    check_attention_values(4, 4, 20, 16, 0, 0, 0); // MLA naive: keys [k_C; k_R], values of hd
    check_attention_values(6, 2, 10, 14, 0, 5, 1); // GQA, values wider than keys, window + sink
    check_attention_values(4, 1, 22, 16, 1, 0, 0); // MLA absorbed: latent rows of 16 + 6
    check_attention_values(4, 1, 22, 16, 1, 6, 2); // ... with a window and sinks
}

static void test_attention_kv(void **state) {
    (void)state;
    check_attention(4, 4, 17, 0, 0, 0);  // MHA prefill
    check_attention(4, 2, 5, 30, 0, 0);  // GQA, continuing a sequence
    check_attention(4, 1, 1, 63, 0, 0);  // MQA decode step
    check_attention(6, 3, 40, 10, 8, 0); // sliding window
    check_attention(6, 2, 40, 10, 8, 3); // window with sinks
    check_attention(4, 2, 1, 200, 16, 4); // a decode step far beyond the window
}

// attention_kv attends the query heads that share a KV head in blocks, reading each key once
// for the block: every head's output must be the bits of that head attended alone, which MHA
// over the KV heads copied once per query head gives. Head dims where the blocked paths run
// (64: whole vectors of four, 80: a short last block), more than 16 keys, one row (the block
// split for the threads) and many, full attention and a window with sinks.
static void check_grouped_heads(int n_heads, int n_kv, int hd, int n_q, int pos0, int window, int n_sink) {
    uint64_t rng = rng_seed(n_heads * 1000 + n_kv * 100 + hd + n_q);
    int n_keys = pos0 + n_q, group = n_heads / n_kv;
    AttentionShape gqa = {n_heads, n_kv, hd, window, n_sink, 0.125f, .value_dim = hd};
    AttentionShape mha = {n_heads, n_heads, hd, window, n_sink, 0.125f, .value_dim = hd};
    float *q = random_buffer((size_t)n_q * n_heads * hd, &rng);
    float *k = random_buffer((size_t)n_keys * n_kv * hd, &rng), *v = random_buffer((size_t)n_keys * n_kv * hd, &rng);
    float *k_mha = mallocCheck((size_t)n_keys * n_heads * hd * sizeof(float));
    float *v_mha = mallocCheck((size_t)n_keys * n_heads * hd * sizeof(float));
    for (int j = 0; j < n_keys; j++)
        for (int h = 0; h < n_heads; h++) {
            memcpy(k_mha + ((size_t)j * n_heads + h) * hd, k + ((size_t)j * n_kv + h / group) * hd, hd * sizeof(float));
            memcpy(v_mha + ((size_t)j * n_heads + h) * hd, v + ((size_t)j * n_kv + h / group) * hd, hd * sizeof(float));
        }
    size_t n_out = (size_t)n_q * n_heads * hd;
    float *got = mallocCheck(n_out * sizeof(float)), *want = mallocCheck(n_out * sizeof(float));
    int pos[64];
    void *keys[64], *values[64], *keys_mha[64], *values_mha[64];
    assert_true(n_q <= 64);
    for (int r = 0; r < n_q; r++) pos[r] = pos0 + r, keys[r] = k, values[r] = v, keys_mha[r] = k_mha, values_mha[r] = v_mha;
    KVRows kv = {n_q, pos, keys, values, .layouts = NULL}, kv_mha = {n_q, pos, keys_mha, values_mha, .layouts = NULL};
    size_t bytes = attention_kv_scratch_bytes(&gqa, n_keys), bytes_mha = attention_kv_scratch_bytes(&mha, n_keys);
    float *scratch = mallocCheck(bytes), *scratch_mha = mallocCheck(bytes_mha);
    attention_kv(got, q, &kv, &gqa, scratch, bytes);
    attention_kv(want, q, &kv_mha, &mha, scratch_mha, bytes_mha);
    assert_memory_equal(got, want, n_out * sizeof(float));
    free(q); free(k); free(v); free(k_mha); free(v_mha); free(got); free(want); free(scratch); free(scratch_mha);
}

static void test_attention_kv_grouped_heads_are_single_heads(void **state) {
    (void)state;
    check_grouped_heads(4, 1, 64, 1, 300, 0, 0);    // MQA decode step (Gemma 3's 4 heads on one KV head)
    check_grouped_heads(4, 1, 64, 40, 260, 0, 0);   // MQA prefill rows
    check_grouped_heads(9, 3, 64, 1, 200, 0, 0);    // GQA-3 decode (SmolLM2's 9 heads on 3)
    check_grouped_heads(9, 3, 80, 24, 100, 0, 0);   // ... prefill, head dims past whole vectors of four
    check_grouped_heads(8, 1, 64, 17, 150, 48, 4);  // 8 heads on one: two blocks of 4; a window with sinks
    check_grouped_heads(6, 2, 16, 33, 40, 0, 0);    // small heads (the scalar and short paths)
}

// ---- the trainer's kernels (kernels/cpu/backward.c) ----
// Against their references on random inputs, each at a size that runs on one thread and one
// that forks (>= parallel.h's PARALLEL_MIN_MACS of work). Gradient outputs that the kernels add
// to start from random values. Their finite-difference checks are test_train.c's.

// Copies of n floats.
static float *clone(const float *x, size_t n) {
    float *y = mallocCheck(n * sizeof(float));
    memcpy(y, x, n * sizeof(float));
    return y;
}

// Tolerance rtol 1e-4, atol 1e-4: dw sums over up to 300 rows of unit-normal products.
static void check_matmul_backward(int N, int n, int d, int with_dx) {
    uint64_t rng = rng_seed(N * 7 + n * 3 + d);
    float *x = random_buffer((size_t)N * n, &rng), *w = random_buffer((size_t)d * n, &rng);
    float *dy = random_buffer((size_t)N * d, &rng), *dx = random_buffer((size_t)N * n, &rng);
    float *dw = random_buffer((size_t)d * n, &rng);
    float *want_dx = clone(dx, (size_t)N * n), *want_dw = clone(dw, (size_t)d * n);
    matmul_backward(with_dx ? dx : NULL, dw, dy, x, w, N, n, d);
    ref_matmul_backward(with_dx ? want_dx : NULL, want_dw, dy, x, w, N, n, d);
    assert_close(dx, want_dx, (size_t)N * n, 1e-4, 1e-4); // untouched without dx
    assert_close(dw, want_dw, (size_t)d * n, 1e-4, 1e-4);
    free(x); free(w); free(dy); free(dx); free(dw); free(want_dx); free(want_dw);
}

static void test_matmul_backward(void **state) {
    (void)state;
    check_matmul_backward(5, 7, 3, 1);
    check_matmul_backward(40, 33, 65, 1);
    check_matmul_backward(40, 33, 65, 0); // dx NULL: only dw
    check_matmul_backward(300, 64, 96, 1);
}

// Tolerance rtol 1e-4, atol 1e-4 (dw sums over up to 600 rows).
static void check_rmsnorm_backward(int N, int C) {
    uint64_t rng = rng_seed(N * 13 + C);
    float *x = random_buffer((size_t)N * C, &rng), *w = random_buffer(C, &rng), *dy = random_buffer((size_t)N * C, &rng);
    float *dx = random_buffer((size_t)N * C, &rng), *dw = random_buffer(C, &rng);
    float *want_dx = clone(dx, (size_t)N * C), *want_dw = clone(dw, C);
    rmsnorm_backward(dx, dw, dy, x, w, N, C, 1e-5f);
    ref_rmsnorm_backward(want_dx, want_dw, dy, x, w, N, C, 1e-5f);
    assert_close(dx, want_dx, (size_t)N * C, 1e-4, 1e-4);
    assert_close(dw, want_dw, C, 1e-4, 1e-4);
    free(x); free(w); free(dy); free(dx); free(dw); free(want_dx); free(want_dw);
}

static void test_rmsnorm_backward(void **state) {
    (void)state;
    check_rmsnorm_backward(5, 12);   // fewer rows than reduction chunks
    check_rmsnorm_backward(37, 130);
    check_rmsnorm_backward(600, 128); // forks
}

// Forward and backward, whole heads and the last rot_dim dims; tolerance rtol 1e-4, atol 2e-4
// (test_rope's: float angles).
static void check_rope_rows(int B, int T, int H, int hd, int rot) {
    uint64_t rng = rng_seed(B * 100 + T + rot);
    size_t n = (size_t)B * T * H * hd;
    float inv_freq[32];
    for (int i = 0; i < rot / 2; i++) inv_freq[i] = powf(10000.0f, -2.0f * i / rot);
    for (int backward = 0; backward < 2; backward++) {
        float *x = random_buffer(n, &rng), *want = clone(x, n);
        if (backward) {
            rope_backward(x, B * T, T, H, hd, rot, inv_freq, 1.3f);
            ref_rope_backward(want, B * T, T, H, hd, rot, inv_freq, 1.3f);
        } else {
            rope_forward(x, B * T, T, H, hd, rot, inv_freq, 1.3f);
            ref_rope_forward(want, B * T, T, H, hd, rot, inv_freq, 1.3f);
        }
        assert_close(x, want, n, 1e-4, 2e-4);
        free(x); free(want);
    }
}

static void test_rope_rows(void **state) {
    (void)state;
    check_rope_rows(3, 20, 4, 16, 16);
    check_rope_rows(3, 20, 4, 22, 6);   // MLA's decoupled part
    check_rope_rows(4, 128, 8, 16, 16); // forks
}

// The trainer's attention, forward (output and probabilities) and backward, against the
// references. Tolerances: probabilities rtol 1e-4, atol 1e-6; output and gradients rtol 1e-4,
// atol 1e-5. Hidden keys' and future keys' probabilities are exactly 0.
static void check_attention_train(int B, int T, int n_heads, int n_kv, int hd, int vd, int window, int n_sink) {
    uint64_t rng = rng_seed(B * 1000 + T * 10 + n_kv + window);
    AttentionShape s = {n_heads, n_kv, hd, window, n_sink, 1.0f / sqrtf((float)hd), .value_dim = vd};
    size_t nq = (size_t)B * T * n_heads * hd, nk = (size_t)B * T * n_kv * hd, nv = (size_t)B * T * n_kv * vd;
    size_t no = (size_t)B * T * n_heads * vd, np = (size_t)B * n_heads * T * T;
    float *q = random_buffer(nq, &rng), *k = random_buffer(nk, &rng), *v = random_buffer(nv, &rng);
    float *d_out = random_buffer(no, &rng);
    float *out = mallocCheck(no * 4), *want_out = mallocCheck(no * 4), *p = mallocCheck(np * 4), *want_p = mallocCheck(np * 4);
    attention_forward(out, p, q, k, v, B, T, &s);
    ref_attention_forward(want_out, want_p, q, k, v, B, T, &s);
    assert_close(p, want_p, np, 1e-4, 1e-6);
    assert_close(out, want_out, no, 1e-4, 1e-5);
    for (size_t e = 0; e < np; e++) {
        int i = (int)(e / T % T), j = (int)(e % T);
        if (j > i || !attention_visible(i, j, window, n_sink)) assert_true(p[e] == 0.0f);
    }
    float *dq = mallocCheck(nq * 4), *dk = mallocCheck(nk * 4), *dv = mallocCheck(nv * 4);
    float *want_dq = mallocCheck(nq * 4), *want_dk = mallocCheck(nk * 4), *want_dv = mallocCheck(nv * 4);
    attention_backward(dq, dk, dv, d_out, p, q, k, v, B, T, &s);
    ref_attention_backward(want_dq, want_dk, want_dv, d_out, want_p, q, k, v, B, T, &s);
    assert_close(dq, want_dq, nq, 1e-4, 1e-5);
    assert_close(dk, want_dk, nk, 1e-4, 1e-5);
    assert_close(dv, want_dv, nv, 1e-4, 1e-5);
    free(q); free(k); free(v); free(d_out); free(out); free(want_out); free(p); free(want_p);
    free(dq); free(dk); free(dv); free(want_dq); free(want_dk); free(want_dv);
}

static void test_attention_train(void **state) {
    (void)state;
    check_attention_train(2, 9, 4, 4, 8, 8, 0, 0);    // MHA
    check_attention_train(2, 9, 4, 2, 8, 8, 0, 0);    // GQA
    check_attention_train(1, 9, 4, 1, 8, 8, 0, 0);    // MQA
    check_attention_train(2, 13, 4, 2, 8, 8, 4, 2);   // GQA, sliding window with sinks
    check_attention_train(2, 9, 4, 4, 20, 16, 0, 0);  // MLA's naive form: keys [k_C; k_R], values of hd
    check_attention_train(2, 70, 4, 2, 16, 16, 0, 0); // two row blocks; forks
    check_attention_train(2, 70, 4, 2, 16, 12, 20, 1);
}

// Logits of spread 3, targets with a -1, weights with a 0. Tolerances: probabilities and
// d logits rtol 1e-4, atol 1e-6; losses rtol 1e-5, atol 1e-5.
static void check_crossentropy(int N, int V, int weighted) {
    uint64_t rng = rng_seed(N * 3 + V + weighted);
    float *logits = random_buffer((size_t)N * V, &rng), *weights = random_buffer(N, &rng);
    int *targets = mallocCheck(N * sizeof(int));
    for (int r = 0; r < N; r++) targets[r] = r % 7 == 3 ? -1 : (int)(rng_u64(&rng) % V);
    for (int r = 0; r < N; r++) weights[r] = r % 5 == 1 ? 0.0f : fabsf(weights[r]);
    for (size_t i = 0; i < (size_t)N * V; i++) logits[i] *= 3.0f;
    float *want = clone(logits, (size_t)N * V), *loss = mallocCheck(N * 4), *want_loss = mallocCheck(N * 4);
    double total = crossentropy_forward(logits, loss, targets, N, V);
    double want_total = ref_crossentropy_forward(want, want_loss, targets, N, V);
    assert_close(logits, want, (size_t)N * V, 1e-4, 1e-6);
    assert_close(loss, want_loss, N, 1e-5, 1e-5);
    assert_true(fabs(total - want_total) <= 1e-5 * fabs(want_total));
    const float *w = weighted ? weights : NULL;
    crossentropy_backward(logits, targets, w, N, V, 0.5f);
    ref_crossentropy_backward(want, targets, w, N, V, 0.5f);
    assert_close(logits, want, (size_t)N * V, 1e-4, 1e-6);
    for (int r = 0; r < N; r++)
        if (targets[r] < 0 || (w && w[r] == 0.0f))
            for (int i = 0; i < V; i++) assert_true(logits[(size_t)r * V + i] == 0.0f);
    free(logits); free(weights); free(targets); free(want); free(loss); free(want_loss);
}

static void test_crossentropy(void **state) {
    (void)state;
    check_crossentropy(9, 5, 0);
    check_crossentropy(9, 301, 1);
    check_crossentropy(300, 301, 1); // forks
}

// Three steps with fresh gradients, clipping and decay, then without decay; tolerance rtol
// 1e-5, atol 1e-6 on parameters and moments.
static void check_adamw(size_t n) {
    uint64_t rng = rng_seed(n);
    float *p = random_buffer(n, &rng), *m = calloc(n, sizeof(float)), *v = calloc(n, sizeof(float));
    float *want_p = clone(p, n), *want_m = clone(m, n), *want_v = clone(v, n);
    for (int step = 1; step <= 3; step++) {
        float *g = random_buffer(n, &rng);
        AdamW h = {1e-3f, 0.9f, 0.95f, 1e-8f, step < 3 ? 0.1f : 0.0f, 0.5f, step};
        adamw(p, g, m, v, n, &h);
        ref_adamw(want_p, g, want_m, want_v, n, &h);
        assert_close(p, want_p, n, 1e-5, 1e-6);
        assert_close(m, want_m, n, 1e-5, 1e-6);
        assert_close(v, want_v, n, 1e-5, 1e-6);
        free(g);
    }
    free(p); free(m); free(v); free(want_p); free(want_m); free(want_v);
}

static void test_adamw(void **state) {
    (void)state;
    check_adamw(100);
    check_adamw(70001); // forks
}

// The sum of squares to 1e-12 relative (double partials), add_inplace exactly (a float sum
// rounds the same from double).
static void test_sum_squares_add(void **state) {
    (void)state;
    uint64_t rng = rng_seed(5);
    size_t sizes[] = {7, 1000, 100003}; // fewer than the chunks; forks, ragged chunks
    for (int c = 0; c < 3; c++) {
        size_t n = sizes[c];
        float *x = random_buffer(n, &rng), *y = random_buffer(n, &rng), *want = clone(x, n);
        double got = sum_squares(x, n), ref = ref_sum_squares(x, n);
        assert_true(fabs(got - ref) <= 1e-12 * ref);
        add_inplace(x, y, n);
        ref_add_inplace(want, y, n);
        assert_memory_equal(x, want, n * sizeof(float));
        free(x); free(y); free(want);
    }
}

// The reductions add fixed chunks in order and attention's tasks are independent: one thread
// gives the same bits as all of them (at sizes that fork).
static void test_train_kernels_thread_independent(void **state) {
    (void)state;
    int threads = omp_get_max_threads();
    uint64_t rng = rng_seed(6);
    enum { N = 600, C = 128, B = 2, T = 70, H = 4, KV = 2, HD = 16 };
    size_t nx = (size_t)N * C, nq = (size_t)B * T * H * HD, nk = (size_t)B * T * KV * HD, np = (size_t)B * H * T * T;
    AttentionShape s = {H, KV, HD, 0, 0, 0.25f, .value_dim = HD};
    float *x = random_buffer(nx, &rng), *w = random_buffer(C, &rng), *dy = random_buffer(nx, &rng);
    float *q = random_buffer(nq, &rng), *k = random_buffer(nk, &rng), *v = random_buffer(nk, &rng);
    float *d_out = random_buffer(nq, &rng);
    struct {
        float *dx, *dw, *out, *p, *dq, *dk, *dv;
        double ss;
    } run[2];
    for (int r = 0; r < 2; r++) {
        kernels_set_threads(r == 0 ? 1 : threads);
        run[r].dx = calloc(nx, 4), run[r].dw = calloc(C, 4), run[r].out = malloc(nq * 4), run[r].p = malloc(np * 4);
        run[r].dq = malloc(nq * 4), run[r].dk = malloc(nk * 4), run[r].dv = malloc(nk * 4);
        rmsnorm_backward(run[r].dx, run[r].dw, dy, x, w, N, C, 1e-5f);
        attention_forward(run[r].out, run[r].p, q, k, v, B, T, &s);
        attention_backward(run[r].dq, run[r].dk, run[r].dv, d_out, run[r].p, q, k, v, B, T, &s);
        run[r].ss = sum_squares(dy, nx);
    }
    kernels_set_threads(threads);
    assert_memory_equal(run[0].dx, run[1].dx, nx * 4);
    assert_memory_equal(run[0].dw, run[1].dw, C * 4);
    assert_memory_equal(run[0].out, run[1].out, nq * 4);
    assert_memory_equal(run[0].p, run[1].p, np * 4);
    assert_memory_equal(run[0].dq, run[1].dq, nq * 4);
    assert_memory_equal(run[0].dk, run[1].dk, nk * 4);
    assert_memory_equal(run[0].dv, run[1].dv, nk * 4);
    assert_true(run[0].ss == run[1].ss);
    for (int r = 0; r < 2; r++) {
        free(run[r].dx); free(run[r].dw); free(run[r].out); free(run[r].p);
        free(run[r].dq); free(run[r].dk); free(run[r].dv);
    }
    free(x); free(w); free(dy); free(q); free(k); free(v); free(d_out);
}

// The kernels round as llama.cpp's CPU backend (ggml-cpu) does on an AVX-512 build, which is
// what lets the engine's greedy tokens and logits equal llama.cpp's bit for bit. The recorded
// values are libggml-cpu's own (ggml_vec_dot_f32, ggml_vec_soft_max_f32's exps and double sum,
// ggml_vec_swiglu_f32) on fixed inputs; RoPE is checked against ggml's formula (the angle chain
// theta_i = theta_(i-1) r, cosf / sinf, a c - b s and a s + b c fused as gcc fuses them),
// computed here with this machine's libm as ggml's would be. dot_f32 and the exp are vec.h's
// at this object's width, so they are checked when that is 512 bits; swiglu over whole
// vectors and rope_rotate round alike at every width (on a machine with FMA).
static float ggml_pattern_a(int i) { return (float)((i * 37 + 11) % 101) / 33.0f - 1.5f; }
static float ggml_pattern_b(int i) { return (float)((i * 53 + 7) % 89) / 17.0f - 2.75f; }

static void test_rounds_as_ggml(void **state) {
    (void)state;
    float a[256];
    for (int i = 0; i < 256; i++) a[i] = ggml_pattern_a(i);
#if VEC_BITS == 512
    float b[256];
    for (int i = 0; i < 256; i++) b[i] = ggml_pattern_b(i);
    const int ns[3] = {64, 100, 256};
    const float dots[3] = {-0x1.b9d6eep+3f, -0x1.b3d26p+2f, -0x1.c2e8b2p+1f};
    for (int k = 0; k < 3; k++) assert_true(dot_f32(a, b, ns[k]) == dots[k]);
    const float exps[8] = {0x1p-145f, 0x1.8d3ac8p-111f, 0x1.323cf8p-76f, 0x1.d82deep-42f,
                           0x1.6c0502p-7f, 0x1.18a2aap+28f, 0x1.b0b40ap+62f, 0x1.4d960ap+97f};
    for (int k = 0; k < 32; k += 4) assert_true(vf_exp(vf_splat(-100.5f + 6.0f * k))[0] == exps[k / 4]);
    float row[64], max;
    for (int i = 0; i < 64; i++) row[i] = 3.0f * ggml_pattern_a(i);
    assert_true(vf_exp_shifted_sum(row, 64, &max) == 0x1.d3d19p+2);
#endif
#if defined(__FMA__)
    float g[64], u[64], out[64];
    for (int i = 0; i < 64; i++) g[i] = 8.0f * ggml_pattern_a(i), u[i] = ggml_pattern_b(i);
    swiglu(out, g, u, 1, 64);
    const float silus[8] = {0x1.f9d686p-10f, -0x1.dc0f76p-4f, -0x1.707974p+3f, -0x1.91ea1ep-7f,
                            -0x1.3c87aep-1f, -0x1.b16b44p+4f, -0x1.0f28f2p-5f, -0x1.9d38c2p+2f};
    for (int i = 0; i < 8; i++) assert_true(out[i] == silus[i]);
#endif
    float inv_freq[32], r = powf(10000.0f, -2.0f / 64), x[64], want[64], theta = 1234.0f;
    inv_freq[0] = 1.0f;
    for (int i = 1; i < 32; i++) inv_freq[i] = inv_freq[i - 1] * r; // rope.c's plain table
    for (int i = 0; i < 64; i++) x[i] = want[i] = a[i];
    for (int i = 0; i < 32; i++, theta *= r) {
        float c = cosf(theta), sn = sinf(theta), x0 = want[2 * i], x1 = want[2 * i + 1];
        want[2 * i] = fmaf(x0, c, -(x1 * sn));
        want[2 * i + 1] = fmaf(x0, sn, x1 * c);
    }
    rope_rotate(x, 1, 64, 1234, inv_freq, 1.0f, ROPE_STYLE_NORM);
    assert_memory_equal(x, want, sizeof x);
}

// dot_f32_rows (an attention row's scores over up to 16 keys; a weight row against up to 16
// input rows) equals dot_f32 row by row bit for bit, for every count 1..16, at lengths with and
// without dot_f32's scalar tail and on rows of mixed magnitudes, where a reduction in another
// order would round differently; it writes nothing past count.
static void test_dot_f32_rows_is_dot_f32(void **state) {
    (void)state;
    uint64_t rng = rng_seed(1616);
    const int ns[] = {64, 128, 256, 100, 8};
    for (size_t c = 0; c < sizeof ns / sizeof ns[0]; c++) {
        int n = ns[c];
        float *a = random_buffer((size_t)n, &rng), *b = random_buffer((size_t)16 * n, &rng);
        for (int i = 0; i < 16 * n; i++) b[i] *= (float)(1 << (i % 13)); // spread the exponents
        const float *rows[16];
        for (int i = 0; i < 16; i++) rows[i] = b + (size_t)((i * 7) % 16) * n; // rows in any order
        for (int count = 1; count <= 16; count++) {
            float got[17], want[16];
            got[count] = -1.0f;
            dot_f32_rows(got, a, rows, count, n);
            for (int i = 0; i < count; i++) want[i] = dot_f32(a, rows[i], n);
            assert_memory_equal(got, want, (size_t)count * sizeof(float));
            assert_true(got[count] == -1.0f);
        }
        free(a), free(b);
    }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_matmul), cmocka_unit_test(test_matmul_rows_match_single_rows),  cmocka_unit_test(test_rmsnorm), cmocka_unit_test(test_softmax),
        cmocka_unit_test(test_rope),    cmocka_unit_test(test_swiglu),
        cmocka_unit_test(test_rope_neox_pairs),
        cmocka_unit_test(test_geglu_tanh),  cmocka_unit_test(test_attention_kv),
        cmocka_unit_test(test_attention_kv_rows_of_many_sequences), cmocka_unit_test(test_rope_partial),
        cmocka_unit_test(test_attention_kv_value_dims),
        cmocka_unit_test(test_attention_kv_grouped_heads_are_single_heads),
        cmocka_unit_test(test_matmul_backward), cmocka_unit_test(test_rmsnorm_backward), cmocka_unit_test(test_rope_rows),
        cmocka_unit_test(test_attention_train), cmocka_unit_test(test_crossentropy), cmocka_unit_test(test_adamw),
        cmocka_unit_test(test_sum_squares_add), cmocka_unit_test(test_train_kernels_thread_independent),
        cmocka_unit_test(test_rounds_as_ggml), cmocka_unit_test(test_dot_f32_rows_is_dot_f32),
    };
    return cmocka_run_group_tests_name("kernels", tests, NULL, NULL);
}
