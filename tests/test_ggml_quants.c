// test_ggml_quants.c: ggml's block formats and activation formats in the lab (kernels/quant.h),
// held to PyPI gguf (llama.cpp's gguf-py) and to ggml's arithmetic:
//   - the traits of q4_1, q5_0, q4_k, q6_k: GGUF ids 3, 6, 12, 14, blocks of 20, 22, 144, 210
//     bytes, names, which rows they hold, and that the k-quants are read only (quantize_row dies
//     naming the type);
//   - dequantize_row equals gguf.quants.dequantize BIT FOR BIT on 32 random valid blocks of each
//     of Q8_0, Q4_0, Q4_1, Q5_0, Q4_K, Q6_K (tests/fixtures/quants/blocks.bin, written by
//     scripts/gen_quant_fixtures.py), and quantize_row equals gguf.quants.quantize byte for byte
//     on random floats for the types the lab writes (Q8_0, Q4_0, Q4_1, Q5_0: ggml's _ref rules);
//   - dot_row on those blocks agrees with the double dot of gguf's floats within
//     2e-5 * sum |w_i x_i|;
//   - the activation formats: Q8_0 / Q8_1 / Q8_K blocks built by hand (exact codes, scales, s,
//     bsums; rounding half to even; zero blocks; zero-padded short blocks), and on random rows of
//     several magnitudes each block's fields equal ggml's formulas evaluated the plain way, every
//     value within its stated distance of x;
//   - the integer dots at the formats' extremes (Q8_0 codes -128 times activation codes +-127,
//     Q4_K scales 63 with nibbles 15, Q6_K scales -128 with codes -32 ...) equal the exact integer
//     reference (ref_dot_row_int) within its fp32 summation bound: nothing saturates.
// make test also runs this file on the kernels built at narrower vectors (test_ggml_quants_vec256,
// test_ggml_quants_vec32). Run from the repository root (or with INFERLAB_ROOT set):
// make build/tests/test_ggml_quants && build/tests/test_ggml_quants
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common.h"
#include "quant.h"
#include "quant_blocks.h"
#include "reference.h"
#include "test_util.h"

// ---- traits -----------------------------------------------------------------------------------

static void test_traits_of_ggml_types(void **state) {
    (void)state;
    const struct {
        DType t;
        const char *name;
        int gguf, block, bytes, read_only;
    } want[] = {
        {DTYPE_Q4_1, "q4_1", 3, 32, 20, 0},    {DTYPE_Q5_0, "q5_0", 6, 32, 22, 0},
        {DTYPE_Q4_K, "q4_k", 12, 256, 144, 1}, {DTYPE_Q6_K, "q6_k", 14, 256, 210, 1},
        {DTYPE_Q8_0, "q8_0", 8, 32, 34, 0},    {DTYPE_Q4_0, "q4_0", 2, 32, 18, 0},
    };
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
        DType t = want[i].t;
        assert_string_equal(dtype_name(t), want[i].name);
        assert_int_equal(dtype_from_name(want[i].name), t);
        assert_int_equal(dtype_traits(t)->gguf_type, want[i].gguf);
        assert_int_equal(dtype_from_gguf_type(want[i].gguf), t);
        assert_int_equal(dtype_block_elems(t, 4096), want[i].block);
        assert_int_equal(dtype_block_bytes(t, want[i].block), want[i].bytes);
        assert_int_equal(dtype_row_bytes(t, 2048), (size_t)2048 / want[i].block * want[i].bytes);
        assert_int_equal(dtype_can_quantize(t), !want[i].read_only);
        assert_true(dtype_is_quantized(t));
        assert_true(dtype_has_int_dot(t));
        assert_true(dtype_holds_row(t, 512));
        assert_false(dtype_holds_row(t, want[i].block + 16));
    }
    assert_false(dtype_holds_row(DTYPE_Q4_K, 640)); // Gemma's 640-wide matrices cannot be k-quants
    assert_int_equal(quant_act_type(DTYPE_Q4_1), ACT_Q8_1);
    assert_int_equal(quant_act_type(DTYPE_Q5_0), ACT_Q8_0);
    assert_int_equal(quant_act_type(DTYPE_Q4_K), ACT_Q8_K);
    assert_int_equal(quant_act_type(DTYPE_Q6_K), ACT_Q8_K);
    assert_int_equal(quant_act_type(DTYPE_I8), ACT_Q8_0);
    assert_int_equal(quant_act_type(DTYPE_I4_G32), ACT_NONE);
    assert_int_equal(act_row_bytes(ACT_Q8_0, 64), 68);
    assert_int_equal(act_row_bytes(ACT_Q8_1, 40), 72); // a short last block takes a whole one
    assert_int_equal(act_row_bytes(ACT_Q8_K, 512), 584);
    for (int t = 0; t < DTYPE_COUNT; t++) { // every name and id maps back to its type
        assert_int_equal(dtype_from_name(dtype_name((DType)t)), t);
        if (dtype_traits((DType)t)->gguf_type >= 0) assert_int_equal(dtype_from_gguf_type(dtype_traits((DType)t)->gguf_type), t);
    }
}

// quantize_row on a read-only type ends the process with a message naming the type.
static void test_quantize_row_refuses_k_quants(void **state) {
    (void)state;
    const DType types[] = {DTYPE_Q4_K, DTYPE_Q6_K};
    for (int k = 0; k < 2; k++) {
        int fds[2];
        assert_int_equal(pipe(fds), 0);
        fflush(stderr);
        pid_t pid = fork();
        assert_true(pid >= 0);
        if (pid == 0) {
            dup2(fds[1], 2);
            float x[256] = {1.0f};
            uint8_t q[256];
            quantize_row(types[k], q, x, 256);
            _exit(0);
        }
        close(fds[1]);
        char msg[512] = {0};
        size_t got = 0;
        for (ssize_t r; got < sizeof msg - 1 && (r = read(fds[0], msg + got, sizeof msg - 1 - got)) > 0;) got += (size_t)r;
        close(fds[0]);
        int status;
        waitpid(pid, &status, 0);
        assert_true(WIFEXITED(status) && WEXITSTATUS(status) != 0);
        if (!strstr(msg, dtype_name(types[k])) || !strstr(msg, "cannot write")) fail_msg("message: %s", msg);
    }
}

// ---- gguf's floats and bytes (tests/fixtures/quants/blocks.bin) --------------------------------

typedef struct {
    int gguf_type, n_blocks, block_bytes, block_elems;
    uint8_t *blocks;
    float *floats;
} FixtureType;

typedef struct {
    int n_deq, n_q;
    FixtureType deq[8], q[8];
} Fixture;

static const char *root(void) {
    const char *r = getenv("INFERLAB_ROOT");
    return r ? r : ".";
}

static uint32_t read_u32(FILE *f) {
    uint8_t b[4];
    if (fread(b, 1, 4, f) != 4) fail_msg("blocks.bin: truncated");
    return b[0] | (uint32_t)b[1] << 8 | (uint32_t)b[2] << 16 | (uint32_t)b[3] << 24;
}

static void read_exact(FILE *f, void *dst, size_t n) {
    if (fread(dst, 1, n, f) != n) fail_msg("blocks.bin: truncated");
}

// deq: blocks then floats; q: floats then blocks (the generator's order)
static void read_fixture_type(FILE *f, FixtureType *t, int floats_first) {
    t->gguf_type = (int)read_u32(f), t->n_blocks = (int)read_u32(f);
    t->block_bytes = (int)read_u32(f), t->block_elems = (int)read_u32(f);
    size_t nb = (size_t)t->n_blocks * t->block_bytes, nf = (size_t)t->n_blocks * t->block_elems;
    t->blocks = mallocCheck(nb), t->floats = mallocCheck(nf * sizeof(float));
    if (floats_first) read_exact(f, t->floats, nf * sizeof(float)), read_exact(f, t->blocks, nb);
    else read_exact(f, t->blocks, nb), read_exact(f, t->floats, nf * sizeof(float));
}

static void load_fixture(Fixture *fx) {
    char path[1024];
    snprintf(path, sizeof path, "%s/tests/fixtures/quants/blocks.bin", root());
    FILE *f = fopen(path, "rb");
    if (!f) fail_msg("%s: cannot open (scripts/gen_quant_fixtures.py writes it; run from the repository root)", path);
    char magic[4];
    read_exact(f, magic, 4);
    assert_memory_equal(magic, "IQFX", 4);
    assert_int_equal(read_u32(f), 1);
    fx->n_deq = (int)read_u32(f);
    assert_true(fx->n_deq >= 6 && fx->n_deq <= 8);
    for (int i = 0; i < fx->n_deq; i++) read_fixture_type(f, &fx->deq[i], 0);
    fx->n_q = (int)read_u32(f);
    assert_true(fx->n_q >= 4 && fx->n_q <= 8);
    for (int i = 0; i < fx->n_q; i++) read_fixture_type(f, &fx->q[i], 1);
    uint8_t extra;
    assert_int_equal(fread(&extra, 1, 1, f), 0);
    fclose(f);
}

static void free_fixture(Fixture *fx) {
    for (int i = 0; i < fx->n_deq; i++) free(fx->deq[i].blocks), free(fx->deq[i].floats);
    for (int i = 0; i < fx->n_q; i++) free(fx->q[i].blocks), free(fx->q[i].floats);
}

static DType fixture_dtype(const FixtureType *t) {
    int d = dtype_from_gguf_type(t->gguf_type);
    if (d < 0) fail_msg("blocks.bin: GGUF type %d is no weight type of the lab", t->gguf_type);
    assert_int_equal(dtype_block_elems((DType)d, t->block_elems * 8), t->block_elems);
    assert_int_equal(dtype_block_bytes((DType)d, t->block_elems), t->block_bytes);
    return (DType)d;
}

static void test_dequantize_equals_gguf(void **state) {
    (void)state;
    Fixture fx;
    load_fixture(&fx);
    int seen = 0;
    for (int i = 0; i < fx.n_deq; i++) {
        const FixtureType *ft = &fx.deq[i];
        DType t = fixture_dtype(ft);
        seen |= 1 << t;
        int n = ft->n_blocks * ft->block_elems; // the blocks as one row
        float *y = mallocCheck(n * sizeof(float)), *rows = mallocCheck(n * sizeof(float));
        dequantize_row(t, y, ft->blocks, n);
        dequantize_matrix(t, rows, ft->blocks, ft->n_blocks, ft->block_elems); // and as a block per row
        for (int j = 0; j < n; j++) {
            if (memcmp(&y[j], &ft->floats[j], 4) != 0 || memcmp(&rows[j], &ft->floats[j], 4) != 0)
                fail_msg("%s block %d weight %d: %.9g (as rows %.9g), gguf %.9g", dtype_name(t), j / ft->block_elems,
                         j % ft->block_elems, y[j], rows[j], ft->floats[j]);
            // the reference, within 2^-18 of the largest of its 32 (test_quant's bound)
            double big = 0.0;
            for (int m = j / 32 * 32; m < j / 32 * 32 + 32; m++) big = fmax(big, fabs((double)ft->floats[m]));
            if (!(fabs((double)ref_dequantize_weight(t, ft->blocks, n, j) - ft->floats[j]) <= 0x1p-18 * big))
                fail_msg("ref_dequantize_weight %s weight %d: %.9g, gguf %.9g", dtype_name(t), j,
                         ref_dequantize_weight(t, ft->blocks, n, j), ft->floats[j]);
        }
        free(y), free(rows);
    }
    const DType need[] = {DTYPE_Q8_0, DTYPE_Q4_0, DTYPE_Q4_1, DTYPE_Q5_0, DTYPE_Q4_K, DTYPE_Q6_K};
    for (int k = 0; k < 6; k++)
        if (!(seen >> need[k] & 1)) fail_msg("blocks.bin holds no %s blocks", dtype_name(need[k]));
    free_fixture(&fx);
}

static void test_quantize_equals_gguf(void **state) {
    (void)state;
    Fixture fx;
    load_fixture(&fx);
    for (int i = 0; i < fx.n_q; i++) {
        const FixtureType *ft = &fx.q[i];
        DType t = fixture_dtype(ft);
        int n = ft->n_blocks * ft->block_elems;
        uint8_t *q = mallocCheck(dtype_row_bytes(t, n));
        quantize_row(t, q, ft->floats, n);
        for (int b = 0; b < ft->n_blocks; b++)
            if (memcmp(q + (size_t)b * ft->block_bytes, ft->blocks + (size_t)b * ft->block_bytes, ft->block_bytes) != 0)
                fail_msg("quantize_row %s block %d differs from gguf.quants.quantize's", dtype_name(t), b);
        free(q);
    }
    free_fixture(&fx);
}

// The float decode dot on gguf's blocks against the double dot of gguf's floats.
static void test_dot_on_gguf_blocks(void **state) {
    (void)state;
    Fixture fx;
    load_fixture(&fx);
    uint64_t rng = rng_seed(31);
    for (int i = 0; i < fx.n_deq; i++) {
        const FixtureType *ft = &fx.deq[i];
        DType t = fixture_dtype(ft);
        int n = ft->n_blocks * ft->block_elems;
        float *x = mallocCheck(n * sizeof(float));
        fill_normal(x, n, 1.0f, &rng);
        double want = 0.0, scale = 0.0;
        for (int j = 0; j < n; j++) want += (double)ft->floats[j] * x[j], scale += fabs((double)ft->floats[j] * x[j]);
        double got = dot_row(t, ft->blocks, x, n);
        if (!(fabs(got - want) <= 2e-5 * scale)) fail_msg("dot_row %s: %.9g, gguf's floats %.9g", dtype_name(t), got, want);
        free(x);
    }
    free_fixture(&fx);
}

// ---- activation formats -------------------------------------------------------------------------

static uint16_t half_bits(const uint8_t *p) {
    uint16_t h;
    memcpy(&h, p, 2);
    return h;
}

static void test_act_blocks_by_hand(void **state) {
    (void)state;
    // Q8_0 / Q8_1: x = 0.25 (8j - 127): amax = 31.75, 127 / amax = 4 exactly, codes 8j - 127,
    // d = 0.25 (fp16 0x3400); sum of codes -96, so Q8_1's s = fp16(0.25 * -96) = -24 (0xCE00).
    float x[40];
    for (int j = 0; j < 32; j++) x[j] = 0.25f * (8 * j - 127);
    uint8_t b0[34], b1[36];
    quantize_act_row(ACT_Q8_0, b0, x, 32);
    quantize_act_row(ACT_Q8_1, b1, x, 32);
    assert_int_equal(half_bits(b0), 0x3400);
    assert_int_equal(half_bits(b1), 0x3400);
    assert_int_equal(half_bits(b1 + 2), 0xCE00);
    for (int j = 0; j < 32; j++) {
        assert_int_equal((int8_t)b0[2 + j], 8 * j - 127);
        assert_int_equal((int8_t)b1[4 + j], 8 * j - 127);
    }
    // rounding half to even, as x86's round_ps and ggml's nearest_int: amax 127 makes x * id = x
    for (int j = 0; j < 32; j++) x[j] = 0.0f;
    x[0] = 127.0f, x[1] = 2.5f, x[2] = -3.5f, x[3] = 0.5f, x[4] = 1.5f, x[5] = -0.5f;
    quantize_act_row(ACT_Q8_0, b0, x, 32);
    const int even[6] = {127, 2, -4, 0, 2, 0};
    for (int j = 0; j < 6; j++) assert_int_equal((int8_t)b0[2 + j], even[j]);
    // a short last block (40 = 32 + 8) is zero-padded, its scale from its own 8 values
    for (int j = 0; j < 40; j++) x[j] = (float)(j - 20);
    uint8_t b2[68];
    memset(b2, 0x55, sizeof b2);
    quantize_act_row(ACT_Q8_0, b2, x, 40);
    assert_int_equal(half_bits(b2 + 34), fp32_to_fp16(19.0f / 127.0f));
    for (int j = 8; j < 32; j++) assert_int_equal(b2[34 + 2 + j], 0);
    assert_int_equal((int8_t)b2[34 + 2 + 7], 127); // x = 19, the block's max
    // all zeros: d = 0, codes 0
    float z[256] = {0};
    quantize_act_row(ACT_Q8_0, b0, z, 32);
    assert_int_equal(half_bits(b0), 0);
    for (int j = 0; j < 32; j++) assert_int_equal(b0[2 + j], 0);

    // Q8_K: the first value of largest magnitude is -63.5, so iscale = -127 / -63.5 = 2, d = 0.5,
    // codes 2x; 0.25 and 0.75 round half to even (0.5 -> 0, 1.5 -> 2); bsums of 16.
    float k[256];
    int want[256];
    for (int j = 0; j < 256; j++) want[j] = (j * 37) % 253 - 126, k[j] = 0.5f * want[j];
    k[0] = -63.5f, want[0] = -127;
    k[9] = 63.5f, want[9] = 127; // as large, later: the first one sets the sign
    k[3] = 0.25f, want[3] = 0;
    k[4] = 0.75f, want[4] = 2;
    uint8_t q8k[292];
    quantize_act_row(ACT_Q8_K, q8k, k, 256);
    float d;
    memcpy(&d, q8k, 4);
    assert_true(d == 0.5f);
    for (int j = 0; j < 256; j++)
        if ((int8_t)q8k[4 + j] != want[j]) fail_msg("q8_k code %d: %d, want %d", j, (int8_t)q8k[4 + j], want[j]);
    for (int g = 0; g < 16; g++) {
        int16_t bs, sum = 0;
        memcpy(&bs, q8k + 260 + 2 * g, 2);
        for (int j = 0; j < 16; j++) sum = (int16_t)(sum + want[16 * g + j]);
        assert_int_equal(bs, sum);
    }
    // the opposite sign: max = +63.5 first makes iscale = -2, codes -2x, d = -0.5
    for (int j = 0; j < 256; j++) k[j] = -k[j];
    quantize_act_row(ACT_Q8_K, q8k, k, 256);
    memcpy(&d, q8k, 4);
    assert_true(d == -0.5f);
    assert_int_equal((int8_t)q8k[4], -127);
    // all zeros, and a short block of 40 (zero-padded codes and bsums)
    memset(q8k, 0x55, sizeof q8k);
    quantize_act_row(ACT_Q8_K, q8k, z, 256);
    memcpy(&d, q8k, 4);
    assert_true(d == 0.0f);
    for (int j = 4; j < 292; j++) assert_int_equal(q8k[j], 0);
    uint8_t two[584];
    float k2[296];
    for (int j = 0; j < 296; j++) k2[j] = (float)((j % 7) - 3);
    quantize_act_row(ACT_Q8_K, two, k2, 296);
    for (int j = 40; j < 256; j++) assert_int_equal(two[292 + 4 + j], 0);
    for (int g = 3; g < 16; g++) assert_int_equal(two[292 + 260 + 2 * g] | two[292 + 261 + 2 * g], 0);
}

// Random rows: every block's fields are ggml's formulas evaluated here the plain way, and every
// value d q lies within its stated distance of x (quant.h): Q8_0 / Q8_1 d/2 + 127 |fp16(d) - d|,
// Q8_K |d| / 2, each (1 + 1e-5).
// round_code's rule written out: clamp to [-127, 127] with NaN going to 127, then round half to even
static int plain_code(float v) {
    if (!(v < 127.0f)) return 127;
    return v > -127.0f ? (int)rintf(v) : -127;
}

// Whole blocks with NaN, +-inf and values of equal magnitude and opposite sign: the codes, scales
// and sums are the scalar rules' (NaNs skipped by the maximum, sent to 127 as codes; the first
// value of largest magnitude sets Q8_K's sign), whichever width the build quantises with.
static void test_act_blocks_with_nan_and_inf(void **state) {
    (void)state;
    uint64_t rng = rng_seed(31);
    for (int trial = 0; trial < 4; trial++) {
        float x[256];
        fill_normal(x, 256, 2.0f, &rng);
        for (int j = 0; j < 256; j++)
            if ((j * 7 + trial) % 23 == 0) x[j] = j % 2 ? NAN : -NAN; // NaNs in every lane position
        x[17] = -6.5f, x[200] = 6.5f, x[40] = 6.5f; // the largest magnitude, first negative
        if (trial >= 2) x[90] = trial == 2 ? INFINITY : -INFINITY;
        if (trial == 3) x[3] = INFINITY;
        for (int a = 0; a < 3; a++) {
            ActType at = (ActType[]){ACT_Q8_0, ACT_Q8_1, ACT_Q8_K}[a];
            int B = act_block_elems(at);
            uint8_t q[2 * 292];
            quantize_act_row(at, q, x, 256);
            size_t bb = act_row_bytes(at, B);
            for (int k0 = 0; k0 < 256; k0 += B) {
                const uint8_t *b = q + (size_t)(k0 / B) * bb;
                float amax = 0.0f, max = 0.0f;
                for (int j = 0; j < B; j++)
                    if (fabsf(x[k0 + j]) > amax) amax = fabsf(x[k0 + j]), max = x[k0 + j];
                if (at == ACT_Q8_K) {
                    float iscale = -127.0f / max, d;
                    memcpy(&d, b, 4);
                    assert_true(memcmp(&d, &(float){1.0f / iscale}, 4) == 0);
                    for (int j = 0; j < B; j++) assert_int_equal((int8_t)b[4 + j], plain_code(iscale * x[k0 + j]));
                } else {
                    float d = amax / 127.0f, id = amax != 0.0f ? 127.0f / amax : 0.0f;
                    const uint8_t *codes = b + (at == ACT_Q8_1 ? 4 : 2);
                    int sum = 0;
                    assert_int_equal(half_bits(b), fp32_to_fp16(d));
                    for (int j = 0; j < B; j++) {
                        assert_int_equal((int8_t)codes[j], plain_code(x[k0 + j] * id));
                        sum += plain_code(x[k0 + j] * id);
                    }
                    if (at == ACT_Q8_1) assert_int_equal(half_bits(b + 2), fp32_to_fp16(d * (float)sum));
                }
            }
        }
    }
}

static void test_act_formats_on_random_rows(void **state) {
    (void)state;
    uint64_t rng = rng_seed(29);
    const int lengths[] = {32, 96, 256, 300, 1024};
    const float scales[] = {1e-3f, 1.0f, 100.0f};
    const ActType acts[] = {ACT_Q8_0, ACT_Q8_1, ACT_Q8_K};
    for (int a = 0; a < 3; a++)
        for (int l = 0; l < 5; l++)
            for (int s = 0; s < 3; s++) {
                ActType at = acts[a];
                int n = lengths[l], B = act_block_elems(at);
                float *x = mallocCheck(n * sizeof(float));
                fill_normal(x, n, scales[s], &rng);
                x[n / 3] *= 8.0f; // an outlier
                size_t bytes = act_row_bytes(at, n), bb = act_row_bytes(at, B);
                uint8_t *xq = mallocCheck(bytes);
                quantize_act_row(at, xq, x, n);
                for (int k0 = 0; k0 < n; k0 += B) {
                    const uint8_t *b = xq + (size_t)(k0 / B) * bb;
                    int len = n - k0 < B ? n - k0 : B, sum = 0;
                    float amax = 0.0f, max = 0.0f;
                    for (int j = 0; j < len; j++)
                        if (fabsf(x[k0 + j]) > amax) amax = fabsf(x[k0 + j]), max = x[k0 + j];
                    double e;
                    if (at == ACT_Q8_K) {
                        float iscale = -127.0f / max, d;
                        memcpy(&d, b, 4);
                        assert_true(d == 1.0f / iscale);
                        e = fabs((double)d) / 2;
                        for (int j = 0; j < B; j++) {
                            int want = j < len ? (int)rintf(iscale * x[k0 + j]) : 0;
                            want = want < 127 ? want : 127;
                            if ((int8_t)b[4 + j] != want) fail_msg("q8_k n=%d code %d: %d, want %d", n, k0 + j, (int8_t)b[4 + j], want);
                        }
                        for (int g = 0; g < 16; g++) {
                            int16_t bs;
                            int gsum = 0;
                            memcpy(&bs, b + 260 + 2 * g, 2);
                            for (int j = 0; j < 16; j++) gsum += (int8_t)b[4 + 16 * g + j];
                            assert_int_equal(bs, gsum);
                        }
                    } else {
                        float d = amax / 127.0f, id = 127.0f / amax;
                        const uint8_t *q = b + (at == ACT_Q8_1 ? 4 : 2);
                        assert_int_equal(half_bits(b), fp32_to_fp16(d));
                        e = (double)d / 2 + 127 * fabs((double)fp16_to_fp32(half_bits(b)) - d);
                        for (int j = 0; j < B; j++) {
                            int want = j < len ? (int)rintf(x[k0 + j] * id) : 0;
                            if ((int8_t)q[j] != want) fail_msg("%s n=%d code %d: %d, want %d", act_type_name(at), n, k0 + j, (int8_t)q[j], want);
                            assert_true(want >= -127 && want <= 127);
                            sum += want;
                        }
                        if (at == ACT_Q8_1) assert_int_equal(half_bits(b + 2), fp32_to_fp16(d * (float)sum));
                    }
                    for (int j = 0; j < len; j++) {
                        double v = ref_act_value(at, xq, k0 + j);
                        if (!(fabs(v - x[k0 + j]) <= e * (1 + 1e-5)))
                            fail_msg("%s n=%d value %d: %.9g -> %.9g (bound %.3g)", act_type_name(at), n, k0 + j, x[k0 + j], v, e);
                    }
                }
                free(x), free(xq);
            }
}

// ---- the integer dots at their extremes ---------------------------------------------------------

static void put_half_at(uint8_t *p, float f) {
    uint16_t h = fp32_to_fp16(f);
    memcpy(p, &h, 2);
}

static void check_extreme(const char *what, DType t, const uint8_t *row, const float *x, int n) {
    ActType a = quant_act_type(t);
    uint8_t *xq = mallocCheck(act_row_bytes(a, n));
    quantize_act_row(a, xq, x, n);
    double abs_terms, want = ref_dot_row_int(t, row, xq, n, &abs_terms), got = dot_row_int(t, row, xq, n);
    int blocks = n / act_block_elems(a);
    if (!(fabs(got - want) <= (blocks + 8) * 0x1p-23 * abs_terms))
        fail_msg("%s (%s): %.9g, exact integer reference %.9g", what, dtype_name(t), got, want);
    free(xq);
}

static void test_int_dots_at_extremes(void **state) {
    (void)state;
    enum { N = 512 };
    float xneg[N], xpos[N], xalt[N];
    for (int j = 0; j < N; j++) xneg[j] = -1.0f, xpos[j] = 1.0f, xalt[j] = j % 2 ? 1.0f : -1.0f; // codes +-127
    const float *xs[3] = {xneg, xpos, xalt};
    uint8_t row[N / 256 * 210 + N / 32 * 36];
    for (int v = 0; v < 3; v++) {
        // q8_0: every code -128 (a file may hold it; ggml's quantiser never makes it) or +127
        for (int c = 0; c < 2; c++) {
            for (int k = 0; k < N / 32; k++) {
                put_half_at(row + 34 * k, 0.5f);
                memset(row + 34 * k + 2, c ? 0x7F : 0x80, 32);
            }
            check_extreme("q8_0 codes -128 / 127", DTYPE_Q8_0, row, xs[v], N);
        }
        // q4_0 / q4_1 / q5_0: every nibble 0 or 15, every fifth bit set
        for (int c = 0; c < 2; c++) {
            uint8_t nib = c ? 0xFF : 0x00;
            for (int k = 0; k < N / 32; k++) {
                put_half_at(row + 18 * k, -0.75f), memset(row + 18 * k + 2, nib, 16);
            }
            check_extreme("q4_0 nibbles 0 / 15", DTYPE_Q4_0, row, xs[v], N);
            for (int k = 0; k < N / 32; k++) {
                put_half_at(row + 20 * k, 0.75f), put_half_at(row + 20 * k + 2, -1.0f), memset(row + 20 * k + 4, nib, 16);
            }
            check_extreme("q4_1 nibbles 0 / 15", DTYPE_Q4_1, row, xs[v], N);
            for (int k = 0; k < N / 32; k++) {
                put_half_at(row + 22 * k, 0.75f), memset(row + 22 * k + 2, nib, 4), memset(row + 22 * k + 6, nib, 16);
            }
            check_extreme("q5_0 codes 0 / 31", DTYPE_Q5_0, row, xs[v], N);
        }
        // q4_k: scales and mins 63, nibbles 15; q6_k: scales -128 and 127 with codes -32 and 31
        for (int k = 0; k < N / 256; k++) {
            uint8_t *b = row + 144 * k;
            put_half_at(b, 1.0f), put_half_at(b + 2, 0.5f);
            memset(b + 4, 0xFF, 12), memset(b + 16, 0xFF, 128);
        }
        check_extreme("q4_k scales 63, nibbles 15", DTYPE_Q4_K, row, xs[v], N);
        for (int c = 0; c < 2; c++) {
            for (int k = 0; k < N / 256; k++) {
                uint8_t *b = row + 210 * k;
                memset(b, c ? 0xFF : 0x00, 192);         // codes 63 - 32 = 31, or 0 - 32 = -32
                memset(b + 192, c ? 0x7F : 0x80, 16);    // scales 127, or -128
                put_half_at(b + 208, 1.0f);
            }
            check_extreme("q6_k scales -128 / 127, codes -32 / 31", DTYPE_Q6_K, row, xs[v], N);
        }
    }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_traits_of_ggml_types),
        cmocka_unit_test(test_quantize_row_refuses_k_quants),
        cmocka_unit_test(test_dequantize_equals_gguf),
        cmocka_unit_test(test_quantize_equals_gguf),
        cmocka_unit_test(test_dot_on_gguf_blocks),
        cmocka_unit_test(test_act_blocks_by_hand),
        cmocka_unit_test(test_act_formats_on_random_rows), cmocka_unit_test(test_act_blocks_with_nan_and_inf),
        cmocka_unit_test(test_int_dots_at_extremes),
    };
    return cmocka_run_group_tests_name("ggml_quants", tests, NULL, NULL);
}
