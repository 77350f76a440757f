// test_attention_full.c: attention_naive and attention_flash (kernels/cpu/attention_full.c)
// against the double-precision reference, causal and not, on random N(0, 1) inputs over
// shapes that cover one token, T not a multiple of the 128-row tile, head dims that are not
// a multiple of the register block (two vectors: 32 floats at 512 bits, 16 at 256), and
// several batches and heads; make test runs it at 512, 256 and 32 bits (vec.h). Tolerance:
// |fast - ref| <= 1e-5 + 1e-4 |ref| elementwise (float accumulation over up to 300 keys).
// Also: large scores (online-softmax rescaling), thread-count independence of flash, and
// the working memory each reports.
// Run: make build/tests/test_attention_full && ./build/tests/test_attention_full
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

typedef size_t (*AttentionFn)(float *out, const float *q, const float *k, const float *v,
                              const AttentionFullShape *s);

typedef struct {
    AttentionFullShape s;
    float *q, *k, *v, *want;
    size_t n;
} Case;

// Random q, k, v of std `std` and the reference output for shape s.
static Case case_new(int B, int H, int T, int D, int causal, float std, uint64_t seed) {
    Case c = {.s = {B, H, T, D, causal}};
    c.n = (size_t)B * H * T * D;
    uint64_t rng = rng_seed(seed);
    c.q = mallocCheck(c.n * sizeof(float));
    c.k = mallocCheck(c.n * sizeof(float));
    c.v = mallocCheck(c.n * sizeof(float));
    c.want = mallocCheck(c.n * sizeof(float));
    fill_normal(c.q, c.n, std, &rng);
    fill_normal(c.k, c.n, std, &rng);
    fill_normal(c.v, c.n, 1.0f, &rng);
    ref_attention_full(c.want, c.q, c.k, c.v, &c.s);
    return c;
}

static void case_free(Case *c) {
    free(c->q);
    free(c->k);
    free(c->v);
    free(c->want);
}

// Run fn on c into a fresh buffer (filled with NaN, so unwritten outputs fail) and check it.
static size_t check_case(AttentionFn fn, const Case *c) {
    float *got = mallocCheck(c->n * sizeof(float));
    for (size_t i = 0; i < c->n; i++) got[i] = NAN;
    size_t bytes = fn(got, c->q, c->k, c->v, &c->s);
    assert_close(got, c->want, c->n, 1e-4, 1e-5);
    free(got);
    return bytes;
}

static const int shapes[][4] = { // B, H, T, D
    {1, 1, 1, 64},  {2, 3, 37, 64}, {1, 2, 130, 32}, {1, 1, 200, 48},
    {2, 2, 128, 64}, {1, 1, 77, 128}, {1, 3, 300, 16}, {3, 1, 65, 8},
};

static void check_all_shapes(AttentionFn fn) {
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++)
        for (int causal = 0; causal <= 1; causal++) {
            const int *sh = shapes[i];
            Case c = case_new(sh[0], sh[1], sh[2], sh[3], causal, 1.0f, 100 + 2 * i + causal);
            check_case(fn, &c);
            case_free(&c);
        }
}

static void test_naive_matches_reference(void **state) {
    (void)state;
    check_all_shapes(attention_naive);
}

static void test_flash_matches_reference(void **state) {
    (void)state;
    check_all_shapes(attention_flash);
}

// Scores with a spread of tens: each row's maximum moves from tile to tile, so the online
// softmax must rescale its partial sums correctly, and most e^x underflow.
static void test_large_scores(void **state) {
    (void)state;
    for (int causal = 0; causal <= 1; causal++) {
        Case c = case_new(1, 2, 257, 64, causal, 2.5f, 7 + causal);
        check_case(attention_naive, &c);
        check_case(attention_flash, &c);
        case_free(&c);
    }
}

// Each flash output row is computed by one thread in a fixed order, so the result must not
// depend on how many threads share the work.
static void test_flash_thread_independent(void **state) {
    (void)state;
    Case c = case_new(2, 2, 190, 64, 1, 1.0f, 42);
    float *one = mallocCheck(c.n * sizeof(float)), *many = mallocCheck(c.n * sizeof(float));
    int saved = omp_get_max_threads();
    omp_set_num_threads(1);
    attention_flash(one, c.q, c.k, c.v, &c.s);
    omp_set_num_threads(3);
    attention_flash(many, c.q, c.k, c.v, &c.s);
    omp_set_num_threads(saved);
    assert_memory_equal(one, many, c.n * sizeof(float));
    free(one);
    free(many);
    case_free(&c);
}

// Naive holds one (T, T) float matrix; flash the same few tiles per thread whatever T, B
// and H are, far less than that matrix once T is in the hundreds.
static void test_working_memory(void **state) {
    (void)state;
    Case small = case_new(1, 1, 64, 64, 0, 1.0f, 5), big = case_new(2, 2, 600, 64, 1, 1.0f, 6);
    assert_int_equal(check_case(attention_naive, &small), (size_t)64 * 64 * sizeof(float));
    assert_int_equal(check_case(attention_naive, &big), (size_t)600 * 600 * sizeof(float));
    size_t flash_small = check_case(attention_flash, &small), flash_big = check_case(attention_flash, &big);
    assert_int_equal(flash_small, flash_big);
    size_t threads = (size_t)omp_get_max_threads(), per_thread = flash_big / threads;
    assert_int_equal(flash_big % threads, 0);
    assert_true(per_thread > 0 && per_thread < (size_t)600 * 600 * sizeof(float) / 4);
    case_free(&small);
    case_free(&big);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_naive_matches_reference), cmocka_unit_test(test_flash_matches_reference),
        cmocka_unit_test(test_large_scores),            cmocka_unit_test(test_flash_thread_independent),
        cmocka_unit_test(test_working_memory),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
