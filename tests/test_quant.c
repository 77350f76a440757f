// test_quant.c: the quantised weight formats and kernels of kernels/quant.h, every CPU type
// (fp32, q8_0, q4_0, q4_1, q5_0, q4_k, q6_k, int8, int4-gG). Stored rows are random valid blocks
// for ggml's types and quantised N(0, 1) floats for the lab's own (quant_blocks.h).
//   - q8_0 / q4_0 bytes equal blocks built by hand from ggml's layout (q4_1 / q5_0 / the k-quants:
//     test_ggml_quants, against PyPI gguf's bytes and floats);
//   - quantise -> dequantise round trips stay within each format's bound on random data;
//   - dequantize_row equals the per-weight reference (ref_dequantize_weight) within 2^-18 of the
//     largest |weight| of its 32 (the kernels round d q + m or (d sc) q - dmin m per product, the
//     reference once in double, and a weight may cancel to far below its terms); dot_row (the SIMD
//     decode kernel compiled for this target) and matmul_typed's float paths (row-streaming for
//     R <= 16, tiled dequantise + sgemm above) agree with the double-accumulating reference within
//     2e-5 * sum |w_i x_i| per output;
//   - the integer dot (every type with one, against its activation format): dot_row_int and
//     matmul_typed's integer path (every R) agree with ref_dot_row_int, the same integer sums done
//     the plain way and combined in double, within (blocks + 8) * 2^-23 * sum |terms| (fp32
//     summation of the block terms, in any order); and with the double dot of the weights and x
//     itself within the activation rounding bound: sum_j |w_j| (d/2 + 127 |fp16(d) - d|) per Q8_0 /
//     Q8_1 block (d = amax / 127: the codes' half step plus the stored scale's fp16 rounding),
//     sum_j |w_j| |d| / 2 per Q8_K block (fp32 d), and q4_1's m * s term by |m| (|s - d sum q| +
//     the block's 32 half steps), each (1 + 1e-5), plus 2e-5 * sum |w_i x_i|;
//   - matmul_typed's row r is bit for bit the single-row result (and dot_row_int's on that row's
//     activation codes): up to 16 rows on the float path, up to 40 (prefill) on the integer one;
//   - outlier columns (LLM.int8()): matmul_typed adds them exactly to the quantised part;
//   - no kernel reads past its row: at every length 1..300 a type can hold, with NaN bytes after
//     every buffer, each kernel (dequantise, float dot, integer dot, matmul's decode rows, tiled
//     path and integer prefill) still agrees with the reference. make test also runs this file on
//     the kernels built at narrower vectors (test_quant_vec256, test_quant_vec32).
// Run: make build/tests/test_quant && build/tests/test_quant
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <math.h>
#include <string.h>

#include "common.h"
#include "kernels.h"
#include "quant.h"
#include "quant_blocks.h"
#include "reference.h"
#include "test_util.h"

// the types quantize_row writes
static const DType QUANT_TYPES[] = {DTYPE_Q8_0, DTYPE_Q4_0, DTYPE_Q4_1, DTYPE_Q5_0, DTYPE_I8, DTYPE_I4_G32, DTYPE_I4_G64, DTYPE_I4_G128};
#define N_QUANT_TYPES (int)(sizeof QUANT_TYPES / sizeof QUANT_TYPES[0])
// every quantised type the CPU runs (the read-only k-quants too)
static const DType ALL_TYPES[] = {DTYPE_Q8_0, DTYPE_Q4_0, DTYPE_Q4_1, DTYPE_Q5_0, DTYPE_Q4_K, DTYPE_Q6_K,
                                  DTYPE_I8,   DTYPE_I4_G32, DTYPE_I4_G64, DTYPE_I4_G128};
#define N_ALL_TYPES (int)(sizeof ALL_TYPES / sizeof ALL_TYPES[0])

// Row lengths: whole blocks, and (for the types that allow them) rows ending in a short group.
static const int LENGTHS[] = {32, 192, 512, 4096, 176, 301};

static float *random_floats(size_t n, float std, uint64_t *rng) {
    float *x = mallocCheck(n * sizeof(float));
    fill_normal(x, n, std, rng);
    return x;
}

static void test_q8_0_block_layout(void **state) {
    (void)state;
    // x = 0.5 * q with q = 8j - 127: amax = 63.5, so d = 0.5 (fp16 0x3800) and the codes are q.
    float x[32];
    uint8_t want[34] = {0x00, 0x38}, got[34];
    for (int j = 0; j < 32; j++) {
        x[j] = 0.5f * (8 * j - 127);
        want[2 + j] = (uint8_t)(int8_t)(8 * j - 127);
    }
    assert_int_equal(dtype_row_bytes(DTYPE_Q8_0, 32), 34);
    quantize_row(DTYPE_Q8_0, got, x, 32);
    assert_memory_equal(got, want, sizeof want);
}

static void test_q4_0_block_layout(void **state) {
    (void)state;
    // x = 0.25 * (c - 8): the largest magnitude is x[0] = -2 (c = 0), so d = -2 / -8 = 0.25
    // (fp16 0x3400) and the nibbles are c; byte j = c[j] | c[j + 16] << 4.
    int c[32];
    float x[32];
    for (int j = 0; j < 16; j++) c[j] = j;
    for (int j = 16; j < 32; j++) c[j] = (j * 7) % 15 + 1;
    for (int j = 0; j < 32; j++) x[j] = 0.25f * (c[j] - 8);
    uint8_t want[18] = {0x00, 0x34}, got[18];
    for (int j = 0; j < 16; j++) want[2 + j] = (uint8_t)(c[j] | c[j + 16] << 4);
    assert_int_equal(dtype_row_bytes(DTYPE_Q4_0, 32), 18);
    quantize_row(DTYPE_Q4_0, got, x, 32);
    assert_memory_equal(got, want, sizeof want);
}

static void test_bits_per_weight(void **state) {
    (void)state;
    assert_true(dtype_bits_per_weight(DTYPE_F32, 64) == 32.0);
    assert_true(dtype_bits_per_weight(DTYPE_Q8_0, 4096) == 8.5);
    assert_true(dtype_bits_per_weight(DTYPE_Q4_0, 4096) == 4.5);
    assert_true(dtype_bits_per_weight(DTYPE_I8, 4096) == 8.0 + 32.0 / 4096);
    assert_true(dtype_bits_per_weight(DTYPE_I4_G32, 4096) == 5.0);
    assert_true(dtype_bits_per_weight(DTYPE_I4_G64, 4096) == 4.5);
    assert_true(dtype_bits_per_weight(DTYPE_I4_G128, 4096) == 4.25);
    assert_true(dtype_bits_per_weight(DTYPE_Q4_1, 4096) == 5.0);
    assert_true(dtype_bits_per_weight(DTYPE_Q5_0, 4096) == 5.5);
    assert_true(dtype_bits_per_weight(DTYPE_Q4_K, 4096) == 4.5);
    assert_true(dtype_bits_per_weight(DTYPE_Q6_K, 4096) == 6.5625);
    for (int t = 0; t < DTYPE_COUNT; t++) assert_int_equal(dtype_row_bytes((DType)t, 0), 0); // an empty tensor
    // 192 = 128 + 64: one group of each, 68 + 36 bytes
    assert_int_equal(dtype_row_bytes(DTYPE_I4_G128, 192), 104);
    assert_false(dtype_holds_row(DTYPE_Q8_0, 176));
    assert_false(dtype_holds_row(DTYPE_Q4_0, 48));
    assert_true(dtype_holds_row(DTYPE_I4_G64, 176));
    assert_false(dtype_holds_row(DTYPE_I4_G32, 301));
    assert_true(dtype_holds_row(DTYPE_I8, 301));
}

// The largest error a weight of block [x, x + len) may have after a round trip through t.
static double round_trip_bound(DType t, const float *x, int len) {
    double amax = 0.0, min = INFINITY, max = -INFINITY;
    for (int j = 0; j < len; j++) {
        amax = fmax(amax, fabs(x[j]));
        min = fmin(min, x[j]);
        max = fmax(max, x[j]);
    }
    double fp16 = 1.0 / 2048; // relative rounding of an fp16 scale
    switch (t) {
    case DTYPE_Q8_0: return amax / 127 / 2 + amax * fp16;  // half a step, + 127 codes x the scale's rounding
    case DTYPE_Q4_0: return amax / 8 + amax * fp16;        // the side opposite the max clamps at 7 d
    case DTYPE_Q5_0: return amax / 16 + amax * fp16;       // ... at 15 d
    case DTYPE_I8: return amax / 127 / 2 * (1 + 1e-6);     // fp32 scale
    default: return (max - min) / 15 / 2 + (fabs(min) + (max - min)) * fp16; // d and m rounded to fp16
    }
}

static void test_round_trip_within_bound(void **state) {
    (void)state;
    uint64_t rng = rng_seed(16);
    for (int k = 0; k < N_QUANT_TYPES; k++)
        for (size_t l = 0; l < sizeof LENGTHS / sizeof LENGTHS[0]; l++) {
            DType t = QUANT_TYPES[k];
            int n = LENGTHS[l];
            if (!dtype_holds_row(t, n)) continue;
            float *x = random_floats(n, 0.05f, &rng), *y = mallocCheck(n * sizeof(float));
            x[n / 3] = 0.6f; // an outlier
            uint8_t *q = mallocCheck(dtype_row_bytes(t, n));
            quantize_row(t, q, x, n);
            dequantize_row(t, y, q, n);
            int B = dtype_block_elems(t, n);
            for (int b = 0; b * B < n; b++) {
                int len = n - b * B < B ? n - b * B : B;
                double bound = round_trip_bound(t, x + b * B, len);
                for (int j = b * B; j < b * B + len; j++)
                    if (!(fabs((double)y[j] - x[j]) <= bound))
                        fail_msg("%s n=%d weight %d: %g -> %g, error %.3g > bound %.3g", dtype_name(t), n, j, x[j],
                                 y[j], fabs((double)y[j] - x[j]), bound);
            }
            free(x), free(y), free(q);
        }
}

// dequantize_row's weights against the reference's: within 2^-18 of the largest |weight| of each
// 32 (header: the kernels round per product, as ggml, the reference once; with random scales a
// weight d q + m may cancel to far below its terms, which are at most 32 times that largest).
static void check_dequantized(DType t, const float *y, const void *row, int n) {
    for (int c = 0; c < n; c += 32) {
        int e = c + 32 < n ? c + 32 : n;
        double big = 0.0;
        for (int i = c; i < e; i++) big = fmax(big, fabs((double)ref_dequantize_weight(t, row, n, i)));
        for (int i = c; i < e; i++) {
            float want = ref_dequantize_weight(t, row, n, i);
            if (!(fabs((double)y[i] - want) <= 0x1p-18 * big))
                fail_msg("dequantize_row %s n=%d weight %d: %.9g, reference %.9g", dtype_name(t), n, i, y[i], want);
        }
    }
}

static void test_dequantize_matches_reference(void **state) {
    (void)state;
    uint64_t rng = rng_seed(17);
    for (int k = 0; k < N_ALL_TYPES; k++)
        for (size_t l = 0; l < sizeof LENGTHS / sizeof LENGTHS[0]; l++) {
            DType t = ALL_TYPES[k];
            int n = LENGTHS[l];
            if (!dtype_holds_row(t, n)) continue;
            float *y = mallocCheck(n * sizeof(float));
            uint8_t *q = mallocCheck(dtype_row_bytes(t, n));
            random_rows(t, q, 1, n, &rng);
            dequantize_row(t, y, q, n);
            check_dequantized(t, y, q, n);
            free(y), free(q);
        }
}

// |got - want| <= 2e-5 * sum_i |w_i x_i| for one output; scale is that sum.
static void assert_dot_close(const char *what, DType t, double got, double want, double scale) {
    if (!(fabs(got - want) <= 2e-5 * scale))
        fail_msg("%s %s: %.9g, reference %.9g (|w x| sum %.4g)", what, dtype_name(t), got, want, scale);
}

static double abs_dot(DType t, const void *row, const float *x, int n) {
    double s = 0.0;
    for (int i = 0; i < n; i++) s += fabs((double)ref_dequantize_weight(t, row, n, i) * x[i]);
    return s;
}

static void test_dot_matches_reference(void **state) {
    (void)state;
    uint64_t rng = rng_seed(18);
    print_message("dot_row compiled for: %s\n", quant_simd_name());
    for (int k = 0; k < N_ALL_TYPES; k++)
        for (size_t l = 0; l < sizeof LENGTHS / sizeof LENGTHS[0]; l++) {
            DType t = ALL_TYPES[k];
            int n = LENGTHS[l];
            if (!dtype_holds_row(t, n)) continue;
            float *x = random_floats(n, 1.0f, &rng);
            uint8_t *q = mallocCheck(dtype_row_bytes(t, n));
            random_rows(t, q, 1, n, &rng);
            assert_dot_close("dot_row", t, dot_row(t, q, x, n), ref_dot_row(t, q, x, n), abs_dot(t, q, x, n));
            free(x), free(q);
        }
}

// ---- the integer dot ---------------------------------------------------------------------------

// dot_row_int's result against ref_dot_row_int: the same exact integer sums, so only the fp32
// summation of the block terms differs: within (blocks + 8) * 2^-23 * sum |terms|.
static void assert_int_dot_exact(const char *what, DType t, double got, const void *row, const void *xq, int n) {
    double abs_terms, want = ref_dot_row_int(t, row, xq, n, &abs_terms);
    int blocks = (n + act_block_elems(quant_act_type(t)) - 1) / act_block_elems(quant_act_type(t));
    if (!(fabs(got - want) <= (blocks + 8) * 0x1p-23 * abs_terms))
        fail_msg("%s %s n=%d: %.9g, exact integer reference %.9g (sum |terms| %.4g)", what, dtype_name(t), n, got, want,
                 abs_terms);
}

// The activation rounding bound of the header against the double dot of w with x itself.
static double act_rounding_bound(DType t, const void *row, const float *x, const uint8_t *xq, int n) {
    ActType a = quant_act_type(t);
    int B = act_block_elems(a);
    size_t bb = act_row_bytes(a, B);
    double bound = 0.0;
    for (int k0 = 0; k0 < n; k0 += B) {
        int k1 = k0 + B < n ? k0 + B : n;
        const uint8_t *b = xq + (size_t)(k0 / B) * bb;
        float amax = 0.0f;
        for (int i = k0; i < k1; i++) amax = fmaxf(amax, fabsf(x[i]));
        double e; // the most a value of this block moves
        if (a == ACT_Q8_K) {
            float d;
            memcpy(&d, b, sizeof d);
            e = fabs((double)d) / 2;
        } else {
            uint16_t h;
            memcpy(&h, b, 2);
            float d = amax / 127.0f;
            e = (double)d / 2 + 127 * fabs((double)fp16_to_fp32(h) - d);
        }
        for (int i = k0; i < k1; i++) {
            double w = ref_dequantize_weight(t, row, n, i);
            if (t == DTYPE_Q4_1) { // the codes' part d_w q of w: the min m_w goes through s below
                uint16_t hm;
                memcpy(&hm, (const uint8_t *)row + (size_t)(i / 32) * 20 + 2, 2);
                w -= fp16_to_fp32(hm);
            }
            bound += fabs(w) * e;
        }
        if (t == DTYPE_Q4_1) { // m_w * s_a against m_w * sum x: |s - d sum q| + 32 half steps
            uint16_t hm, hd, hs;
            memcpy(&hm, (const uint8_t *)row + (size_t)(k0 / 32) * 20 + 2, 2);
            memcpy(&hd, b, 2), memcpy(&hs, b + 2, 2);
            int sum = 0;
            for (int j = 0; j < 32; j++) sum += (int8_t)b[4 + j];
            float d = amax / 127.0f;
            bound += fabs((double)fp16_to_fp32(hm)) * (fabs((double)fp16_to_fp32(hs) - (double)d * sum) + 32 * e);
        }
    }
    return bound * (1 + 1e-5);
}

static void test_int_dot_matches_reference(void **state) {
    (void)state;
    uint64_t rng = rng_seed(23);
    print_message("integer dot compiled for: %s\n", quant_int_dot_name());
    for (int k = 0; k < N_ALL_TYPES; k++)
        for (size_t l = 0; l < sizeof LENGTHS / sizeof LENGTHS[0]; l++) {
            DType t = ALL_TYPES[k];
            int n = LENGTHS[l];
            if (!dtype_has_int_dot(t) || !dtype_holds_row(t, n)) continue;
            ActType a = quant_act_type(t);
            float *x = random_floats(n, 1.0f, &rng);
            x[n / 2] = 9.0f; // an outlier sets its block's scale
            uint8_t *q = mallocCheck(dtype_row_bytes(t, n)), *xq = mallocCheck(act_row_bytes(a, n));
            random_rows(t, q, 1, n, &rng);
            quantize_act_row(a, xq, x, n);
            double got = dot_row_int(t, q, xq, n);
            assert_int_dot_exact("dot_row_int", t, got, q, xq, n);
            double exact = ref_dot_row(t, q, x, n), bound = act_rounding_bound(t, q, x, xq, n) + 2e-5 * abs_dot(t, q, x, n);
            if (!(fabs(got - exact) <= bound))
                fail_msg("dot_row_int %s n=%d: %.9g, float-x reference %.9g, bound %.3g", dtype_name(t), n, got, exact, bound);
            free(x), free(q), free(xq);
        }
}

// LLM.int8()'s decomposition: an int8 matrix with zeroed outlier columns plus those columns in
// fp32 equals the reference of the int8 part plus the exact fp32 columns.
static void test_matmul_adds_outlier_columns(void **state) {
    (void)state;
    uint64_t rng = rng_seed(24);
    enum { N = 192, D = 40, NO = 3 };
    int cols[NO] = {5, 77, 190};
    for (int R = 1; R <= 20; R += 19) { // decode rows and prefill rows (tiled sgemm or the integer dot)
        for (int int_dot = 0; int_dot <= 1; int_dot++) {
            int was = quant_int_dot_enable(int_dot);
            float *w = random_floats((size_t)D * N, 1.0f, &rng), *x = random_floats((size_t)R * N, 1.0f, &rng);
            float wo[D * NO];
            for (int i = 0; i < D; i++)
                for (int k = 0; k < NO; k++) {
                    wo[i * NO + k] = 40.0f * w[i * N + cols[k]]; // the outliers: far beyond the rest
                    w[i * N + cols[k]] = 0.0f;
                }
            size_t rb = dtype_row_bytes(DTYPE_I8, N);
            uint8_t *q = mallocCheck(D * rb);
            quantize_matrix(DTYPE_I8, q, w, D, N);
            TensorOutliers o = {NO, cols, wo};
            Tensor plain = {DTYPE_I8, q, D, N, NULL}, split = {DTYPE_I8, q, D, N, &o};
            size_t sb = matmul_typed_scratch_bytes(DTYPE_I8, R, N);
            void *scratch = mallocCheck(sb ? sb : 1);
            float *got = mallocCheck((size_t)R * D * sizeof(float)), *base = mallocCheck((size_t)R * D * sizeof(float));
            matmul_typed(got, x, &split, R, scratch);
            matmul_typed(base, x, &plain, R, scratch);
            for (int r = 0; r < R; r++)
                for (int i = 0; i < D; i++) {
                    double fp32 = 0.0, scale = 0.0;
                    for (int k = 0; k < NO; k++) {
                        fp32 += (double)wo[i * NO + k] * x[(size_t)r * N + cols[k]];
                        scale += fabs((double)wo[i * NO + k] * x[(size_t)r * N + cols[k]]);
                    }
                    scale += fabs(base[(size_t)r * D + i]);
                    double want = base[(size_t)r * D + i] + fp32, e = fabs(got[(size_t)r * D + i] - want);
                    if (!(e <= 1e-6 * scale))
                        fail_msg("outliers R=%d int_dot=%d out %d: %.9g, want %.9g", R, int_dot, i, got[(size_t)r * D + i], want);
                }
            free(w), free(x), free(q), free(scratch), free(got), free(base);
            quant_int_dot_enable(was);
        }
    }
}

// One path of matmul_typed against the reference: the integer dot's against the exact integer
// reference on the same activation codes, the float paths' against the double dot of x.
static void check_matmul_typed_path(DType t, int R, int n, int d, uint64_t *rng, int int_dot) {
    float *x = random_floats((size_t)R * n, 1.0f, rng);
    size_t rb = dtype_row_bytes(t, n);
    ActType a = quant_act_type(t);
    uint8_t *q = mallocCheck(d * rb), *xq = a != ACT_NONE ? mallocCheck(act_row_bytes(a, n)) : NULL;
    random_rows(t, q, d, n, rng);
    Tensor tw = {t, q, d, n, NULL};
    size_t sb = matmul_typed_scratch_bytes(t, R, n);
    void *scratch = sb ? mallocCheck(sb) : NULL;
    float *out = mallocCheck((size_t)R * d * sizeof(float));
    matmul_typed(out, x, &tw, R, scratch);
    for (int r = 0; r < R; r++) {
        const float *xr = x + (size_t)r * n;
        if (int_dot) quantize_act_row(a, xq, xr, n);
        for (int i = 0; i < d; i++) {
            if (int_dot)
                assert_int_dot_exact(R > 16 ? "matmul (integer dot, prefill)" : "matmul (integer dot)", t, out[(size_t)r * d + i],
                                     q + i * rb, xq, n);
            else
                assert_dot_close(R > 16 ? "matmul (tiled sgemm)" : "matmul (row-streaming)", t, out[(size_t)r * d + i],
                                 ref_dot_row(t, q + i * rb, xr, n), abs_dot(t, q + i * rb, xr, n));
        }
    }
    free(x), free(q), free(xq), free(scratch), free(out);
}

// matmul_typed against the reference dot of every (row, output) pair; R spans decode and
// prefill, each on the float paths and (for the types that have one) the integer dot.
static void check_matmul_typed(DType t, int R, int n, int d, uint64_t *rng) {
    for (int int_dot = 0; int_dot <= dtype_has_int_dot(t); int_dot++) {
        int was = quant_int_dot_enable(int_dot);
        check_matmul_typed_path(t, R, n, d, rng, int_dot);
        quant_int_dot_enable(was);
    }
}

static void test_matmul_typed_matches_reference(void **state) {
    (void)state;
    uint64_t rng = rng_seed(19);
    for (int k = 0; k < N_ALL_TYPES; k++) {
        DType t = ALL_TYPES[k];
        int n = dtype_holds_row(t, 192) ? 192 : 256;
        check_matmul_typed(t, 1, n, 64, &rng);
        check_matmul_typed(t, 5, 512, 33, &rng);
        check_matmul_typed(t, 40, n, 700, &rng); // several tiles of weight rows
        if (dtype_holds_row(t, 176)) check_matmul_typed(t, 20, 176, 48, &rng);
    }
}

// Row r of a matmul of R rows is bit for bit the single-row result on x_r: up to 16 rows on the
// float path (the row-streaming decode kernel), at every R up to 40 on the integer one (prefill
// included), where it is also dot_row_int on x_r's activation codes. The integer kernels take
// their rows 8 at a time and decode steps several weight rows at once, so R runs through every
// count of a part that has its own kernel and D is no multiple of 4 (a group's leftover rows).
static void test_matmul_typed_rows_match_single_rows(void **state) {
    (void)state;
    uint64_t rng = rng_seed(20);
    enum { RMAX = 40, D = 50 };
    for (int k = 0; k < N_ALL_TYPES; k++) {
        DType t = ALL_TYPES[k];
        int n = dtype_holds_row(t, 288) ? 288 : 512; // not a multiple of 256 where the type allows it
        size_t rb = dtype_row_bytes(t, n);
        float *x = random_floats((size_t)RMAX * n, 1.0f, &rng), *rows = mallocCheck((size_t)RMAX * D * sizeof(float)), one[D];
        uint8_t *q = mallocCheck(D * rb);
        random_rows(t, q, D, n, &rng);
        Tensor tw = {t, q, D, n, NULL};
        size_t sb = matmul_typed_scratch_bytes(t, RMAX, n);
        void *scratch = sb ? mallocCheck(sb) : NULL;
        for (int int_dot = 0; int_dot <= dtype_has_int_dot(t); int_dot++) {
            int was = quant_int_dot_enable(int_dot);
            const int Rs[] = {2, 3, 4, 5, 6, 7, 8, 9, 16, 17, 31, 40};
            for (size_t m = 0; m < sizeof Rs / sizeof Rs[0]; m++) {
                int R = Rs[m];
                if (!int_dot && R > 16) continue;
                matmul_typed(rows, x, &tw, R, scratch);
                for (int r = 0; r < R; r++) {
                    matmul_typed(one, x + (size_t)r * n, &tw, 1, scratch);
                    if (memcmp(rows + (size_t)r * D, one, sizeof one) != 0)
                        fail_msg("%s int_dot=%d R=%d: row %d differs from the single-row matmul", dtype_name(t), int_dot, R, r);
                    if (int_dot) {
                        ActType a = quant_act_type(t);
                        uint8_t *xq = mallocCheck(act_row_bytes(a, n));
                        quantize_act_row(a, xq, x + (size_t)r * n, n);
                        for (int i = 0; i < D; i++) {
                            float want = dot_row_int(t, q + i * rb, xq, n);
                            if (memcmp(&rows[(size_t)r * D + i], &want, sizeof want) != 0)
                                fail_msg("%s R=%d: out (%d, %d) %.9g, dot_row_int %.9g", dtype_name(t), R, r, i, rows[(size_t)r * D + i], want);
                        }
                        free(xq);
                    }
                }
            }
            quant_int_dot_enable(was);
        }
        free(x), free(rows), free(q), free(scratch);
    }
}

// ---- reads past the end --------------------------------------------------------------------
// Every buffer a kernel is given ends in POISON_BYTES of 0xFF, a NaN wherever a float is read
// from them, so a kernel that reads past its row (a ragged end or an empty last block handled
// wrongly) returns NaN or a wrong value in the plain build, not only under AddressSanitizer.
#define POISON_BYTES 64

static void *poisoned(size_t bytes) {
    uint8_t *p = mallocCheck(bytes + POISON_BYTES);
    memset(p + bytes, 0xFF, POISON_BYTES);
    return p;
}

static float *poisoned_floats(const float *x, size_t n) {
    float *p = poisoned(n * sizeof(float));
    memcpy(p, x, n * sizeof(float));
    return p;
}

// One weight type at row length n: dequantize_row, dot_row, the integer dot where the type
// has one, and matmul_typed's decode rows (float and integer dot), tiled prefill path and integer
// prefill.
static void check_row_reads(DType t, int n, uint64_t *rng) {
    enum { D = 2, R_DECODE = 3, R_PREFILL = 17 }; // decode rows are R <= 16 (quant.h)
    size_t rb = dtype_row_bytes(t, n);
    ActType a = quant_act_type(t);
    float *xs = random_floats((size_t)R_PREFILL * n, 1.0f, rng);
    uint8_t *q = poisoned(D * rb), *xq = poisoned(a != ACT_NONE ? act_row_bytes(a, n) : 0);
    float *x = poisoned_floats(xs, n), *y = poisoned(n * sizeof(float));
    random_rows(t, q, D, n, rng);
    // the last row of the matrix, so that its end is the buffer's
    const uint8_t *row = q + rb;
    dequantize_row(t, y, row, n);
    check_dequantized(t, y, row, n);
    assert_dot_close("dot_row (poisoned ends)", t, dot_row(t, row, x, n), ref_dot_row(t, row, x, n), abs_dot(t, row, x, n));
    if (a != ACT_NONE) {
        quantize_act_row(a, xq, x, n);
        assert_int_dot_exact("dot_row_int (poisoned ends)", t, dot_row_int(t, row, xq, n), row, xq, n);
    }
    const int rows[] = {R_DECODE, R_PREFILL};
    for (int k = 0; k < 2; k++) {
        int R = rows[k];
        float *xr = poisoned_floats(xs, (size_t)R * n), *out = mallocCheck((size_t)R * D * sizeof(float));
        size_t sb = matmul_typed_scratch_bytes(t, R, n);
        void *scratch = poisoned(sb);
        Tensor tw = {t, q, D, n, NULL};
        for (int int_dot = 0; int_dot <= dtype_has_int_dot(t); int_dot++) {
            int was = quant_int_dot_enable(int_dot);
            matmul_typed(out, xr, &tw, R, scratch);
            quant_int_dot_enable(was);
            for (int r = 0; r < R; r++)
                for (int i = 0; i < D; i++) {
                    const uint8_t *wi = q + i * rb;
                    const float *x_r = xr + (size_t)r * n;
                    if (int_dot) { // against the same activation codes
                        quantize_act_row(a, xq, x_r, n);
                        assert_int_dot_exact("matmul (integer dot, poisoned ends)", t, out[(size_t)r * D + i], wi, xq, n);
                    } else {
                        assert_dot_close("matmul (poisoned ends)", t, out[(size_t)r * D + i], ref_dot_row(t, wi, x_r, n),
                                         abs_dot(t, wi, x_r, n));
                    }
                }
        }
        free(xr), free(out), free(scratch);
    }
    free(xs), free(q), free(xq), free(x), free(y);
}

static void test_kernels_read_only_their_rows(void **state) {
    (void)state;
    uint64_t rng = rng_seed(24);
    for (int n = 1; n <= 300; n++) {
        check_row_reads(DTYPE_F32, n, &rng);
        for (int k = 0; k < N_ALL_TYPES; k++)
            if (dtype_holds_row(ALL_TYPES[k], n)) check_row_reads(ALL_TYPES[k], n, &rng);
    }
}

// The CPU's embedding op reads quantised tables by dequantising the token's row.
static void test_embedding_dequantizes_rows(void **state) {
    (void)state;
    uint64_t rng = rng_seed(21);
    enum { V = 10, C = 64 };
    float *table = random_floats(V * C, 1.0f, &rng), got[3 * C], want[C];
    uint8_t q[V * 36 * 2];
    quantize_matrix(DTYPE_Q4_0, q, table, V, C);
    Tensor t = {DTYPE_Q4_0, q, V, C, NULL};
    int tokens[3] = {7, 0, 9};
    ops_cpu()->embedding(got, &t, tokens, 3);
    for (int r = 0; r < 3; r++) {
        dequantize_row(DTYPE_Q4_0, want, q + tokens[r] * dtype_row_bytes(DTYPE_Q4_0, C), C);
        assert_memory_equal(got + r * C, want, sizeof want);
    }
    free(table);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_q8_0_block_layout),
        cmocka_unit_test(test_q4_0_block_layout),
        cmocka_unit_test(test_bits_per_weight),
        cmocka_unit_test(test_round_trip_within_bound),
        cmocka_unit_test(test_dequantize_matches_reference),
        cmocka_unit_test(test_dot_matches_reference),
        cmocka_unit_test(test_matmul_typed_matches_reference),
        cmocka_unit_test(test_matmul_typed_rows_match_single_rows),
        cmocka_unit_test(test_embedding_dequantizes_rows),
        cmocka_unit_test(test_int_dot_matches_reference),
        cmocka_unit_test(test_matmul_adds_outlier_columns),
        cmocka_unit_test(test_kernels_read_only_their_rows),
    };
    return cmocka_run_group_tests_name("quant", tests, NULL, NULL);
}
