// test_cuda.c: the CUDA backend (kernels_cuda.h, ops_cuda) against the CPU's plain
// references on random inputs. Tolerances: fp32 kernels 1e-4 relative (|gpu - ref| <=
// atol + 1e-4 |ref| elementwise), fp16 / bf16 / tf32 1e-2 relative to the largest
// reference magnitude (max_rel_error), inputs rounded to the dtype before the reference
// sees them, so only the kernel's own error is measured.
//   - matmul in fp32, tf32, fp16, bf16 (sgemv-like T = 1 and odd shapes);
//   - RMSNorm (also in place), softmax (large logits), SwiGLU, residual add, RoPE at many
//     positions, embedding lookup (fp32 and bf16 tables), argmax (ties: first index), dtype
//     conversion (round-trip error within half an ulp of the format);
//   - model attention rows: MHA / GQA, window and sinks, contexts over several key chunks,
//     rows of a prefill chunk and rows of different sequences in one call, the cache append;
//   - naive attention (fp32, fp16, bf16) and the flash kernel (fp16, bf16, D = 64, 128;
//     T = 1, a multiple of the tile, and not), causal and not, against ref_attention_full;
//     cuDNN's fused attention the same way without the mask (its plan executed twice), and
//     which shapes it accepts (host-only: this one runs without a device too);
//   - the attention benchmark (experiments/attention_kernels/attention_bench.h): its error is
//     small and its peak memory is exactly q, k, v, out (+ the naive workspace); unsupported
//     shapes return an error;
//   - a whole model (MHA; GQA with window, sinks and YaRN; MQA with tied embeddings) through
//     the one forward pass on the CUDA ops table: chunked prefill and three batched decode
//     steps of two sequences give, in fp32, the CPU engine's logits and the reference
//     forward's (model_reference.h, 1e-4); in fp16 and bf16 those of the reference with
//     weights and matmul inputs rounded where the GPU rounds them (1e-2); MLA (absorbed) and
//     CLA in fp32 the same way (1e-4);
//   - a ring KV cache (window + sinks, both position rules) over a stream longer than the
//     ring: the CPU's logits (1e-4);
//   - a paged KV cache (paged.h: block pool and table in device memory, blocks not in order,
//     a fork whose first write copies a shared block on the device): two sequences that share
//     a prefix give the CPU's logits (1e-4).
// Without a device or driver (or built with CUDA=0) every test that needs one reports itself
// skipped. None of it has run on a GPU yet: it was written on a machine without one.
// Run: make build/tests/test_cuda && ./build/tests/test_cuda
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <math.h>
#include <string.h>

#include "common.h"
#include "test_util.h"

#ifdef INFERLAB_CUDA

#include "attention_bench.h"
#include "kernels_cuda.h"
#include "model_reference.h"
#include "paged.h"

static int g_device; // a usable device was found by the group setup
static char g_why[256];

#define REQUIRE_DEVICE()      \
    do {                      \
        if (!g_device) skip(); \
    } while (0)

#define assert_rel_error(got, want, n, tol)                                                   \
    do {                                                                                      \
        double e_ = max_rel_error(got, want, n);                                              \
        if (!(e_ <= (tol))) fail_msg("%s vs %s: relative error %.3g > %g", #got, #want, e_, (double)(tol)); \
    } while (0)

static float *random_buffer(size_t n, float std, uint64_t *rng) {
    float *x = mallocCheck(n * sizeof(float));
    fill_normal(x, n, std, rng);
    return x;
}

// A device copy of host floats, stored as dtype t.
static void *to_device(const float *x, size_t n, DType t) {
    float *f = cudaMallocCheck(n * sizeof(float));
    cuda_upload(f, x, n * sizeof(float));
    if (t == DTYPE_F32) return f;
    void *d = cudaMallocCheck(n * dtype_size(t));
    cuda_convert(d, t, f, DTYPE_F32, n);
    cuda_free(f);
    return d;
}

// A host copy of a device tensor of dtype t, as floats.
static float *to_host(const void *x, size_t n, DType t) {
    float *f = cudaMallocCheck(n * sizeof(float)), *h = mallocCheck(n * sizeof(float));
    cuda_convert(f, DTYPE_F32, x, t, n);
    cuda_download(h, f, n * sizeof(float));
    cuda_free(f);
    return h;
}

// ---- matmul ---------------------------------------------------------------------------------

static void check_matmul(GemmMode mode, int T, int n, int d) {
    uint64_t rng = rng_seed(T * 1000 + n + d + mode);
    DType t = gemm_input_dtype(mode);
    float *x = random_buffer((size_t)T * n, 1.0f, &rng), *w = random_buffer((size_t)d * n, 1.0f, &rng);
    cuda_round_trip(x, (size_t)T * n, t); // the reference sees what the GPU sees
    cuda_round_trip(w, (size_t)d * n, t);
    void *x_d = to_device(x, (size_t)T * n, t), *w_d = to_device(w, (size_t)d * n, t);
    float *out_d = cudaMallocCheck((size_t)T * d * sizeof(float));
    cuda_matmul(out_d, x_d, w_d, T, n, d, mode);
    float *got = to_host(out_d, (size_t)T * d, DTYPE_F32), *want = mallocCheck((size_t)T * d * sizeof(float));
    ref_matmul(want, x, w, T, n, d);
    if (mode == GEMM_FP32) assert_close(got, want, (size_t)T * d, 1e-4, 1e-4);
    else assert_rel_error(got, want, (size_t)T * d, 1e-2);
    cuda_free(x_d); cuda_free(w_d); cuda_free(out_d);
    free(x); free(w); free(got); free(want);
}

static void test_matmul(void **state) {
    (void)state;
    REQUIRE_DEVICE();
    for (int mode = GEMM_FP32; mode <= GEMM_BF16; mode++) {
        check_matmul(mode, 1, 288, 768);
        check_matmul(mode, 7, 33, 65);
        check_matmul(mode, 64, 288, 288);
    }
}

// ---- pointwise ------------------------------------------------------------------------------

static void test_rmsnorm(void **state) {
    (void)state;
    REQUIRE_DEVICE();
    uint64_t rng = rng_seed(1);
    int T = 37, C = 1030; // C over the block size: threads loop
    size_t n = (size_t)T * C;
    float *x = random_buffer(n, 1.0f, &rng), *w = random_buffer(C, 1.0f, &rng), *want = mallocCheck(n * 4);
    float *x_d = to_device(x, n, DTYPE_F32), *w_d = to_device(w, C, DTYPE_F32), *out_d = cudaMallocCheck(n * 4);
    ref_rmsnorm(want, x, w, T, C, 1e-5f);
    cuda_rmsnorm(out_d, x_d, w_d, T, C, 1e-5f);
    float *got = to_host(out_d, n, DTYPE_F32);
    assert_close(got, want, n, 1e-4, 1e-5);
    free(got);
    cuda_rmsnorm(x_d, x_d, w_d, T, C, 1e-5f); // in place is allowed
    got = to_host(x_d, n, DTYPE_F32);
    assert_close(got, want, n, 1e-4, 1e-5);
    cuda_free(x_d); cuda_free(w_d); cuda_free(out_d);
    free(x); free(w); free(want); free(got);
}

static void test_softmax(void **state) {
    (void)state;
    REQUIRE_DEVICE();
    uint64_t rng = rng_seed(2);
    int rows = 40, n = 301;
    size_t N = (size_t)rows * n;
    float *x = random_buffer(N, 30.0f, &rng); // large logits: the max must be subtracted
    float *x_d = to_device(x, N, DTYPE_F32);
    cuda_softmax_rows(x_d, rows, n);
    ref_softmax_rows(x, rows, n, NULL);
    float *got = to_host(x_d, N, DTYPE_F32);
    assert_close(got, x, N, 1e-4, 1e-6);
    cuda_free(x_d);
    free(x); free(got);
}

static void test_swiglu_and_add(void **state) {
    (void)state;
    REQUIRE_DEVICE();
    uint64_t rng = rng_seed(3);
    int T = 5, H = 777;
    size_t n = (size_t)T * H;
    float *g = random_buffer(n, 2.0f, &rng), *u = random_buffer(n, 1.0f, &rng), *want = mallocCheck(n * 4);
    float *g_d = to_device(g, n, DTYPE_F32), *u_d = to_device(u, n, DTYPE_F32), *out_d = cudaMallocCheck(n * 4);
    ref_geglu_tanh(want, g, u, T, H); // GeGLU: within the half rounding of gate and GELU
    cuda_glu(out_d, g_d, u_d, T, H, GLU_GELU_TANH);
    float *got = to_host(out_d, n, DTYPE_F32);
    assert_close(got, want, n, 2e-3, 1e-3);
    free(got);
    ref_swiglu(want, g, u, T, H);
    cuda_glu(out_d, g_d, u_d, T, H, GLU_SILU);
    got = to_host(out_d, n, DTYPE_F32);
    assert_close(got, want, n, 1e-4, 1e-6);
    free(got);
    cuda_add(out_d, u_d, n);
    got = to_host(out_d, n, DTYPE_F32);
    for (size_t i = 0; i < n; i++) want[i] += u[i];
    assert_close(got, want, n, 1e-6, 1e-6);
    cuda_free(g_d); cuda_free(u_d); cuda_free(out_d);
    free(g); free(u); free(want); free(got);
}

static void test_rope(void **state) {
    (void)state;
    REQUIRE_DEVICE();
    uint64_t rng = rng_seed(4);
    enum { R = 7, H = 6, HD = 48 };
    float inv_freq[HD / 2];
    for (int i = 0; i < HD / 2; i++) inv_freq[i] = powf(10000.0f, -2.0f * i / HD);
    int pos[R] = {0, 1, 333, 666, 999, 1332, 1998};
    float *x = random_buffer((size_t)R * H * HD, 1.0f, &rng);
    float *x_d = to_device(x, (size_t)R * H * HD, DTYPE_F32), *f_d = to_device(inv_freq, HD / 2, DTYPE_F32);
    int *pos_d = cudaMallocCheck(sizeof pos);
    cuda_upload(pos_d, pos, sizeof pos);
    RopeStyle style = ROPE_STYLE_NEOX; // the NORM pairing runs in every model test
    cuda_rope(x_d, R, H, HD, HD, pos_d, f_d, 1.3f, style);
    for (int r = 0; r < R; r++) ref_rope_rotate(x + (size_t)r * H * HD, H, HD, pos[r], inv_freq, 1.3f, style);
    float *got = to_host(x_d, (size_t)R * H * HD, DTYPE_F32);
    // angles up to 2000 rad: float argument rounding bounds the agreement (as on the CPU)
    assert_close(got, x, (size_t)R * H * HD, 1e-4, 2e-4);
    cuda_free(x_d); cuda_free(f_d); cuda_free(pos_d);
    free(x); free(got);
}

static void test_embedding(void **state) {
    (void)state;
    REQUIRE_DEVICE();
    uint64_t rng = rng_seed(5);
    enum { V = 50, C = 37, R = 6 };
    int tokens[R] = {0, 49, 7, 7, 13, 2};
    float *table = random_buffer((size_t)V * C, 1.0f, &rng);
    int *tok_d = cudaMallocCheck(sizeof tokens);
    cuda_upload(tok_d, tokens, sizeof tokens);
    float *out_d = cudaMallocCheck((size_t)R * C * 4);
    for (DType t = DTYPE_F32; t <= DTYPE_BF16; t++) {
        float *rounded = mallocCheck((size_t)V * C * 4);
        memcpy(rounded, table, (size_t)V * C * 4);
        cuda_round_trip(rounded, (size_t)V * C, t);
        void *table_d = to_device(table, (size_t)V * C, t);
        cuda_embedding(out_d, table_d, t, tok_d, R, C);
        float *got = to_host(out_d, (size_t)R * C, DTYPE_F32);
        for (int r = 0; r < R; r++) // a lookup is exact
            assert_memory_equal(got + r * C, rounded + (size_t)tokens[r] * C, C * sizeof(float));
        cuda_free(table_d);
        free(rounded); free(got);
    }
    cuda_free(tok_d); cuda_free(out_d);
    free(table);
}

static void test_argmax(void **state) {
    (void)state;
    REQUIRE_DEVICE();
    uint64_t rng = rng_seed(6);
    enum { ROWS = 9, N = 1001 };
    float *x = random_buffer((size_t)ROWS * N, 1.0f, &rng);
    x[3 * N + 500] = x[3 * N + 900] = 10.0f; // a tie: the first index wins
    x[4 * N + N - 1] = 10.0f;                // the last element
    float *x_d = to_device(x, (size_t)ROWS * N, DTYPE_F32);
    int *arg_d = cudaMallocCheck(ROWS * sizeof(int)), got[ROWS];
    cuda_argmax_rows(arg_d, x_d, ROWS, N);
    cuda_download(got, arg_d, sizeof got);
    for (int r = 0; r < ROWS; r++) {
        int want = 0;
        for (int j = 1; j < N; j++)
            if (x[(size_t)r * N + j] > x[(size_t)r * N + want]) want = j;
        assert_int_equal(got[r], want);
    }
    assert_int_equal(got[3], 500);
    cuda_free(x_d); cuda_free(arg_d);
    free(x);
}

static void test_convert(void **state) {
    (void)state;
    REQUIRE_DEVICE();
    uint64_t rng = rng_seed(7);
    size_t n = 100003;
    float *x = random_buffer(n, 3.0f, &rng), *y = mallocCheck(n * 4);
    // round to nearest: relative error at most half an ulp (2^-11 fp16, 2^-8 bf16)
    double half_ulp[] = {0.0, 1.0 / 2048, 1.0 / 256};
    for (DType t = DTYPE_F16; t <= DTYPE_BF16; t++) {
        memcpy(y, x, n * 4);
        cuda_round_trip(y, n, t);
        double worst = 0.0;
        int changed = 0;
        for (size_t i = 0; i < n; i++) {
            if (fabsf(x[i]) < 1e-4f) continue; // fp16 subnormals have absolute, not relative, steps
            double e = fabs((double)y[i] - x[i]) / fabs(x[i]);
            worst = e > worst ? e : worst;
            changed += y[i] != x[i];
        }
        assert_true(worst <= half_ulp[t]);
        assert_true(changed > 0); // it did round
        float *z = mallocCheck(n * 4);
        memcpy(z, y, n * 4);
        cuda_round_trip(z, n, t); // representable values pass unchanged
        assert_memory_equal(z, y, n * 4);
        free(z);
    }
    free(x); free(y);
}

// ---- model attention --------------------------------------------------------------------------

// n_q rows of one sequence at positions pos0 .. pos0 + n_q - 1 of a cache of S positions,
// plus one decode row of a second sequence at position S2 - 1, all in one call, against
// ref_attention_kv for each sequence.
static void check_attention_rows(AttentionShape shape, int S, int n_q, int S2, uint64_t seed) {
    uint64_t rng = rng_seed(seed);
    int hd = shape.head_dim, qd = shape.n_heads * hd, kvd = shape.n_kv_heads * hd, R = n_q + 1;
    float *q = random_buffer((size_t)R * qd, 1.0f, &rng);
    float *k1 = random_buffer((size_t)S * kvd, 1.0f, &rng), *v1 = random_buffer((size_t)S * kvd, 1.0f, &rng);
    float *k2 = random_buffer((size_t)S2 * kvd, 1.0f, &rng), *v2 = random_buffer((size_t)S2 * kvd, 1.0f, &rng);
    float *k1_d = to_device(k1, (size_t)S * kvd, DTYPE_F32), *v1_d = to_device(v1, (size_t)S * kvd, DTYPE_F32);
    float *k2_d = to_device(k2, (size_t)S2 * kvd, DTYPE_F32), *v2_d = to_device(v2, (size_t)S2 * kvd, DTYPE_F32);
    float *q_d = to_device(q, (size_t)R * qd, DTYPE_F32), *out_d = cudaMallocCheck((size_t)R * qd * 4);
    float *keys[8], *values[8];
    int pos[8];
    for (int r = 0; r < n_q; r++) {
        keys[r] = k1_d;
        values[r] = v1_d;
        pos[r] = S - n_q + r;
    }
    keys[n_q] = k2_d;
    values[n_q] = v2_d;
    pos[n_q] = S2 - 1;
    float **keys_d = cudaMallocCheck(R * sizeof(float *)), **values_d = cudaMallocCheck(R * sizeof(float *));
    int *pos_d = cudaMallocCheck(R * sizeof(int));
    cuda_upload(keys_d, keys, R * sizeof(float *));
    cuda_upload(values_d, values, R * sizeof(float *));
    cuda_upload(pos_d, pos, R * sizeof(int));
    cuda_attention_rows(out_d, q_d, keys_d, values_d, pos_d, NULL, R, &shape);
    float *got = to_host(out_d, (size_t)R * qd, DTYPE_F32), *want = mallocCheck((size_t)R * qd * 4);
    ref_attention_kv(want, q, k1, v1, n_q, S - n_q, &shape);
    ref_attention_kv(want + (size_t)n_q * qd, q + (size_t)n_q * qd, k2, v2, 1, S2 - 1, &shape);
    assert_close(got, want, (size_t)R * qd, 1e-4, 1e-5);

    // the append: row r's k and v land at position pos[r] of its cache, nothing else moves
    float *kn = random_buffer((size_t)R * kvd, 1.0f, &rng), *vn = random_buffer((size_t)R * kvd, 1.0f, &rng);
    float *kn_d = to_device(kn, (size_t)R * kvd, DTYPE_F32), *vn_d = to_device(vn, (size_t)R * kvd, DTYPE_F32);
    cuda_kv_append(keys_d, values_d, kn_d, vn_d, pos_d, NULL, R, kvd);
    float *k2_after = to_host(k2_d, (size_t)S2 * kvd, DTYPE_F32), *v1_after = to_host(v1_d, (size_t)S * kvd, DTYPE_F32);
    memcpy(k2 + (size_t)(S2 - 1) * kvd, kn + (size_t)n_q * kvd, kvd * 4);
    memcpy(v1 + (size_t)(S - n_q) * kvd, vn, (size_t)n_q * kvd * 4);
    assert_memory_equal(k2_after, k2, (size_t)S2 * kvd * 4);
    assert_memory_equal(v1_after, v1, (size_t)S * kvd * 4);

    void *dev[] = {k1_d, v1_d, k2_d, v2_d, q_d, out_d, keys_d, values_d, pos_d, kn_d, vn_d};
    for (size_t i = 0; i < sizeof dev / sizeof dev[0]; i++) cuda_free(dev[i]);
    float *host[] = {q, k1, v1, k2, v2, got, want, kn, vn, k2_after, v1_after};
    for (size_t i = 0; i < sizeof host / sizeof host[0]; i++) free(host[i]);
}

static void test_attention_rows(void **state) {
    (void)state;
    REQUIRE_DEVICE();
    // hd 20: lanes past the head dimension idle; 300 keys: three chunks of 128
    AttentionShape mha = {6, 6, 20, 0, 0, 1.0f / sqrtf(20.0f), .value_dim = 20};
    AttentionShape gqa = {6, 2, 20, 0, 0, 1.0f / sqrtf(20.0f), .value_dim = 20};
    AttentionShape wide = {6, 3, 20, 200, 2, 1.0f / sqrtf(20.0f), .value_dim = 20};  // sinks + window span two chunks
    AttentionShape narrow = {6, 3, 20, 50, 2, 1.0f / sqrtf(20.0f), .value_dim = 20};
    AttentionShape mqa_hd128 = {4, 1, 128, 7, 1, 1.0f / sqrtf(128.0f), .value_dim = 128};
    check_attention_rows(mha, 300, 4, 9, 11);
    check_attention_rows(gqa, 300, 5, 1, 12); // a decode row at position 0
    check_attention_rows(wide, 300, 7, 250, 13);
    check_attention_rows(narrow, 300, 7, 60, 14);
    check_attention_rows(narrow, 40, 3, 45, 15); // window wider than the context
    check_attention_rows(mqa_hd128, 130, 2, 3, 16);
}

// ---- full-sequence attention ------------------------------------------------------------------

typedef enum { NAIVE, FLASH, CUDNN } Impl;

static void check_full_attention(Impl impl, DType t, int B, int H, int T, int D, int causal) {
    uint64_t rng = rng_seed(1000 * T + D + 7 * causal + 3 * t);
    size_t n = (size_t)B * H * T * D;
    float *q = random_buffer(n, 1.0f, &rng), *k = random_buffer(n, 1.0f, &rng), *v = random_buffer(n, 1.0f, &rng);
    cuda_round_trip(q, n, t);
    cuda_round_trip(k, n, t);
    cuda_round_trip(v, n, t);
    void *q_d = to_device(q, n, t), *k_d = to_device(k, n, t), *v_d = to_device(v, n, t);
    void *out_d = cudaMallocCheck(n * dtype_size(t)), *ws = NULL;
    if (impl == NAIVE) {
        ws = cudaMallocCheck(cuda_attention_naive_workspace(B, H, T, t));
        cuda_attention_naive(out_d, q_d, k_d, v_d, ws, B, H, T, D, t, causal);
    } else if (impl == FLASH) {
        cuda_attention_flash(out_d, q_d, k_d, v_d, B, H, T, D, t, causal);
    } else {
        Error err;
        CudnnAttention *plan = cuda_attention_cudnn_plan(B, H, T, D, t, causal, &err);
        if (!plan) fail_msg("cuDNN %s B=%d H=%d T=%d D=%d: %s", dtype_name(t), B, H, T, D, err.msg);
        size_t bytes = cuda_attention_cudnn_workspace(plan);
        ws = bytes ? cudaMallocCheck(bytes) : NULL;
        for (int i = 0; i < 2; i++) cuda_attention_cudnn(plan, out_d, q_d, k_d, v_d, ws); // the second reuses the binding
        cuda_attention_cudnn_free(plan);
    }
    float *got = to_host(out_d, n, t), *want = mallocCheck(n * 4);
    AttentionFullShape s = {B, H, T, D, causal};
    ref_attention_full(want, q, k, v, &s);
    if (t == DTYPE_F32) assert_close(got, want, n, 1e-4, 1e-5);
    else assert_rel_error(got, want, n, 1e-2);
    void *dev[] = {q_d, k_d, v_d, out_d, ws};
    for (int i = 0; i < 5; i++) cuda_free(dev[i]);
    free(q); free(k); free(v); free(got); free(want);
}

static void test_attention_naive(void **state) {
    (void)state;
    REQUIRE_DEVICE();
    for (DType t = DTYPE_F32; t <= DTYPE_BF16; t++)
        for (int causal = 0; causal <= 1; causal++) {
            check_full_attention(NAIVE, t, 2, 3, 77, 40, causal);
            check_full_attention(NAIVE, t, 1, 2, 1, 64, causal);
        }
}

static void test_attention_flash(void **state) {
    (void)state;
    REQUIRE_DEVICE();
    int Ts[] = {1, 64, 200};
    for (DType t = DTYPE_F16; t <= DTYPE_BF16; t++)
        for (int D = 64; D <= 128; D += 64)
            for (int i = 0; i < 3; i++)
                for (int causal = 0; causal <= 1; causal++) check_full_attention(FLASH, t, 2, 3, Ts[i], D, causal);
    assert_true(cuda_attention_flash_supported(64, DTYPE_BF16));
    assert_false(cuda_attention_flash_supported(40, DTYPE_F16));
    assert_false(cuda_attention_flash_supported(64, DTYPE_F32));
}

// What cuDNN's fused attention accepts is decided on the host: this runs without a device.
static void test_attention_cudnn_support(void **state) {
    (void)state;
    char why[256];
    if (!cuda_attention_cudnn_supported(64, DTYPE_F16, 0, why, sizeof why)) {
        assert_non_null(strstr(why, "built without cuDNN")); // the stub says so for every shape
        assert_false(cuda_attention_cudnn_supported(128, DTYPE_BF16, 0, why, sizeof why));
        return;
    }
    assert_true(cuda_attention_cudnn_supported(128, DTYPE_BF16, 0, why, sizeof why));
    assert_false(cuda_attention_cudnn_supported(64, DTYPE_F16, 1, why, sizeof why));
    assert_non_null(strstr(why, "causal"));
    assert_false(cuda_attention_cudnn_supported(64, DTYPE_F32, 0, why, sizeof why));
    assert_false(cuda_attention_cudnn_supported(42, DTYPE_F16, 0, why, sizeof why));
}

static void test_attention_cudnn(void **state) {
    (void)state;
    REQUIRE_DEVICE();
    char why[256];
    if (!cuda_attention_cudnn_supported(64, DTYPE_F16, 0, why, sizeof why)) {
        printf("test_cuda: cuDNN attention: %s\n", why);
        skip();
    }
    int Ts[] = {1, 64, 200};
    for (DType t = DTYPE_F16; t <= DTYPE_BF16; t++)
        for (int D = 64; D <= 128; D += 64)
            for (int i = 0; i < 3; i++) check_full_attention(CUDNN, t, 2, 3, Ts[i], D, 0);
    Error err;
    assert_null(cuda_attention_cudnn_plan(1, 2, 64, 64, DTYPE_F16, 1, &err)); // causal: unsupported, and says so
    assert_non_null(strstr(err.msg, "causal"));
}

static void test_attention_bench(void **state) {
    (void)state;
    REQUIRE_DEVICE();
    CudaAttnShape s = {1, 2, 256, 64, DTYPE_F16, 1};
    size_t io = 4 * (size_t)1 * 2 * 256 * 64 * 2; // q, k, v, out in fp16
    for (CudaAttnImpl impl = CUDA_ATTN_NAIVE; impl <= CUDA_ATTN_FLASH; impl++) {
        CudaAttnResult r;
        Error err;
        if (cuda_attention_bench(impl, &s, 1, 3, 42, &r, &err)) fail_msg("%s", err.msg);
        assert_true(r.max_rel_error <= 1e-2);
        assert_int_equal(r.rows_checked, 32);
        assert_int_equal(r.time.reps, 3);
        assert_true(r.time.median_ms > 0.0 && r.tflops > 0.0);
        size_t ws = impl == CUDA_ATTN_NAIVE ? cuda_attention_naive_workspace(1, 2, 256, DTYPE_F16) : 0;
        assert_int_equal(r.peak_bytes, io + ws);
    }
    CudaAttnShape bad = {1, 2, 256, 40, DTYPE_F16, 0};
    CudaAttnResult r;
    Error err;
    assert_int_equal(cuda_attention_bench(CUDA_ATTN_FLASH, &bad, 1, 3, 42, &r, &err), -1);
    assert_non_null(strstr(err.msg, "D=40"));
    // cuDNN: not under the causal mask; without it, q, k, v, out and at least nothing more
    assert_int_equal(cuda_attention_bench(CUDA_ATTN_CUDNN, &s, 1, 3, 42, &r, &err), -1);
    char why[256];
    if (cuda_attention_cudnn_supported(64, DTYPE_F16, 0, why, sizeof why)) {
        s.causal = 0;
        if (cuda_attention_bench(CUDA_ATTN_CUDNN, &s, 1, 3, 42, &r, &err)) fail_msg("%s", err.msg);
        assert_true(r.max_rel_error <= 1e-2);
        assert_true(r.peak_bytes >= io);
    }
}

// ---- a whole model ----------------------------------------------------------------------------

static Config gpu_test_config(int n_kv_heads, int window, int n_sink, RopeScaling scaling) {
    Config c = small_config(4, n_kv_heads, window, n_sink);
    c.rope.scaling = scaling;
    if (scaling == ROPE_YARN) {
        c.rope.factor = 2.0f;
        c.rope.orig_ctx = 16;
    }
    return c;
}

// GPU fp32 against the CPU engine on the same model and tokens: the two backends run the
// one forward pass, so they agree to rounding.
static double gpu_vs_cpu(const Config *c) {
    Model m;
    random_model(&m, c, 23, 0.15f);
    uint64_t rng = rng_seed(24);
    int tokens[N_SEQ][MAX_LEN], V = c->vocab_size;
    float *gpu[N_SEQ], *cpu[N_SEQ];
    for (int b = 0; b < N_SEQ; b++) {
        for (int i = 0; i < MAX_LEN; i++) tokens[b][i] = (int)(rng_u64(&rng) % V);
        gpu[b] = mallocCheck((size_t)MAX_LEN * V * sizeof(float));
        cpu[b] = mallocCheck((size_t)MAX_LEN * V * sizeof(float));
    }
    run_sequences(&m, ops_cuda(), DTYPE_F32, tokens, gpu);
    run_sequences(&m, ops_cpu(), DTYPE_F32, tokens, cpu);
    double worst = 0.0;
    for (int b = 0; b < N_SEQ; b++) {
        double e = max_rel_error(gpu[b], cpu[b], (size_t)(PROMPT_LENS[b] + STEPS) * V);
        worst = e > worst ? e : worst;
        free(gpu[b]);
        free(cpu[b]);
    }
    model_free(&m);
    return worst;
}

// The shared forward through the CUDA ops table: chunked prefill and batched decode of two
// sequences, in fp32 against the CPU engine and the reference (1e-4), in fp16 and bf16
// against the reference with weights and matmul inputs rounded where the GPU rounds them
// (1e-2; against fp32 activations bf16 differs by about 1e-2 on its own: that is the
// format's precision, not the kernels' error).
static void test_model_decode(void **state) {
    (void)state;
    REQUIRE_DEVICE();
    Config configs[] = {gpu_test_config(4, 0, 0, ROPE_NONE), gpu_test_config(2, 6, 1, ROPE_YARN),
                        gpu_test_config(1, 0, 0, ROPE_NONE)};
    configs[2].tied_embeddings = 1;
    DType dtypes[] = {DTYPE_F32, DTYPE_F16, DTYPE_BF16};
    for (int i = 0; i < 3; i++) {
        double vs_cpu = gpu_vs_cpu(&configs[i]);
        if (!(vs_cpu <= 1e-4)) fail_msg("config %d fp32: relative logit error %.3g vs the CPU engine", i, vs_cpu);
        for (int d = 0; d < 3; d++) {
            double tol = dtypes[d] == DTYPE_F32 ? 1e-4 : 1e-2;
            double vs_ref = backend_vs_reference(&configs[i], ops_cuda(), dtypes[d], cuda_round_trip);
            if (!(vs_ref <= tol))
                fail_msg("config %d %s: relative logit error %.3g vs the reference (tolerance %g)", i,
                         dtype_name(dtypes[d]), vs_ref, tol);
        }
    }
}

// MLA (the absorbed path: latent rows, values read from the key rows, RoPE on the heads'
// tails) and CLA through the CUDA table, fp32: the CPU engine's logits and the reference's.
static void test_model_decode_mla_cla(void **state) {
    (void)state;
    REQUIRE_DEVICE();
    Config configs[] = {small_mla_config(4, 16, 4, 0, 0), small_mla_config(4, 24, 6, 6, 1),
                        gpu_test_config(2, 0, 0, ROPE_NONE)};
    configs[2].kv_share = 2;
    for (int i = 0; i < 3; i++) {
        double vs_cpu = gpu_vs_cpu(&configs[i]);
        double vs_ref = backend_vs_reference(&configs[i], ops_cuda(), DTYPE_F32, NULL);
        if (!(vs_cpu <= 1e-4 && vs_ref <= 1e-4))
            fail_msg("config %d fp32: relative logit error %.3g vs the CPU engine, %.3g vs the reference", i, vs_cpu,
                     vs_ref);
    }
}

// The logits of a stream of n tokens (a prefill of 9 in chunks of 4, then decode steps)
// through a ring session (chunk 4) on a backend. logits (n, V).
static void ring_stream(const Model *m, const Ops *ops, const int *tokens, int n, float *logits) {
    Engine e;
    Session s;
    Error err;
    int V = m->config.vocab_size;
    engine_open(&e, m, ops, DTYPE_F32, 4, n);
    session_open_ring(&s, &e, 4);
    if (session_prefill(&s, tokens, 9, logits, &err)) fail_msg("%s", err.msg);
    for (int i = 9; i < n; i++) {
        if (session_decode(&s, tokens[i], &err)) fail_msg("%s", err.msg);
        memcpy(logits + (size_t)i * V, s.logits, (size_t)V * sizeof(float));
    }
    session_close(&s);
    engine_close(&e);
}

// A ring KV cache (window 5, 2 sinks) on the GPU, both position rules, over a stream many
// times longer than the ring: the CPU's logits (test_kvcache checks those against the
// contiguous cache) to 1e-4.
static void test_ring_cache(void **state) {
    (void)state;
    REQUIRE_DEVICE();
    enum { T = 60 };
    for (int rule = 0; rule < 2; rule++) {
        Config c = gpu_test_config(2, 5, 2, ROPE_NONE);
        c.cache_positions = rule;
        Model m;
        random_model(&m, &c, 31 + rule, 0.3f);
        int tokens[T], V = c.vocab_size;
        random_tokens(tokens, T, V, 5);
        float *gpu = mallocCheck((size_t)T * V * sizeof(float)), *cpu = mallocCheck((size_t)T * V * sizeof(float));
        ring_stream(&m, ops_cuda(), tokens, T, gpu);
        ring_stream(&m, ops_cpu(), tokens, T, cpu);
        double e = max_rel_error(gpu, cpu, (size_t)T * V);
        if (!(e <= 1e-4)) fail_msg("ring cache, rule %d: relative logit error %.3g vs the CPU", rule, e);
        free(gpu);
        free(cpu);
        model_free(&m);
    }
}

// Sequence a: a prefill of 11 (blocks of 4, a third block half full) and decode steps; b forks
// it after the prefill and decodes its own tokens, its first write copying the shared block.
// logits: a's (n, V) then b's (n - 11, V).
static void paged_streams(const Model *m, const Ops *ops, const int *ta, const int *tb, int n, float *logits) {
    enum { P = 11, BS = 4 };
    const Config *c = &m->config;
    int V = c->vocab_size;
    Engine e;
    engine_open(&e, m, ops, DTYPE_F32, 4, n);
    KVPool pool;
    kv_pool_alloc(&pool, ops, config_kv_layers(c), c->n_kv_heads * c->head_dim, BS, 2 * (n + BS) / BS + 4);
    PagedSeq other, a, b;
    paged_seq_open(&other, &pool, 4 * BS);
    paged_seq_open(&a, &pool, n);
    paged_seq_open(&b, &pool, n);
    if (paged_seq_prepare(&other, 0, 3 * BS)) fail_msg("pool too small"); // a's blocks are not the first ones
    paged_feed(&e, &a, ta, 0, P, 4, logits);
    paged_seq_fork(&b, &a);
    paged_seq_close(&other); // freed blocks come back in another order
    float *la = logits + (size_t)P * V, *lb = logits + (size_t)n * V;
    for (int i = P; i < n; i++) {
        paged_feed(&e, &b, tb, i, i + 1, 1, lb + (size_t)(i - P) * V);
        paged_feed(&e, &a, ta, i, i + 1, 1, la + (size_t)(i - P) * V);
    }
    paged_seq_close(&a);
    paged_seq_close(&b);
    if (pool.n_free != pool.n_blocks) fail_msg("%d blocks leaked", pool.n_blocks - pool.n_free);
    kv_pool_free(&pool);
    engine_close(&e);
}

static void test_paged_cache(void **state) {
    (void)state;
    REQUIRE_DEVICE();
    enum { T = 30 };
    Config c = gpu_test_config(2, 0, 0, ROPE_NONE);
    Model m;
    random_model(&m, &c, 41, 0.3f);
    int V = c.vocab_size, ta[T], tb[T];
    random_tokens(ta, T, V, 6);
    memcpy(tb, ta, sizeof ta);
    random_tokens(tb + 11, T - 11, V, 7);
    size_t n = (size_t)(2 * T - 11) * V;
    float *gpu = mallocCheck(n * sizeof(float)), *cpu = mallocCheck(n * sizeof(float));
    paged_streams(&m, ops_cuda(), ta, tb, T, gpu);
    paged_streams(&m, ops_cpu(), ta, tb, T, cpu);
    double e = max_rel_error(gpu, cpu, n);
    if (!(e <= 1e-4)) fail_msg("paged cache: relative logit error %.3g vs the CPU", e);
    free(gpu);
    free(cpu);
    model_free(&m);
}

static int setup(void **state) {
    (void)state;
    g_device = cuda_available(g_why, sizeof g_why);
    if (g_device) {
        cuda_init();
        char name[256];
        cuda_device_name(name, sizeof name);
        printf("test_cuda: device %s\n", name);
    } else {
        printf("test_cuda: no usable CUDA device (%s): every test that needs one is skipped\n", g_why);
    }
    return 0;
}

static int teardown(void **state) {
    (void)state;
    if (g_device) cuda_shutdown();
    return 0;
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_matmul),          cmocka_unit_test(test_rmsnorm),
        cmocka_unit_test(test_softmax),         cmocka_unit_test(test_swiglu_and_add),
        cmocka_unit_test(test_rope),            cmocka_unit_test(test_embedding),
        cmocka_unit_test(test_argmax),          cmocka_unit_test(test_convert),
        cmocka_unit_test(test_attention_rows),  cmocka_unit_test(test_attention_naive),
        cmocka_unit_test(test_attention_flash), cmocka_unit_test(test_attention_cudnn_support),
        cmocka_unit_test(test_attention_cudnn), cmocka_unit_test(test_attention_bench),
        cmocka_unit_test(test_model_decode),    cmocka_unit_test(test_ring_cache),
        cmocka_unit_test(test_paged_cache),
        cmocka_unit_test(test_model_decode_mla_cla),
    };
    return cmocka_run_group_tests_name("cuda", tests, setup, teardown);
}

#else // built without CUDA

static void test_built_without_cuda(void **state) {
    (void)state;
    printf("test_cuda: built without CUDA (CUDA=0 or no nvcc): skipped\n");
    skip();
}

int main(void) {
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_built_without_cuda)};
    return cmocka_run_group_tests_name("cuda", tests, NULL, NULL);
}

#endif
