// test_spec_model.c: the speculative decoding cost model and findings
// (experiments/speculative/spec_model.h): expected tokens per step against the closed form and
// its limits, the predicted speed-up against hand-computed cases (v = 1 is the paper's
// formula), and the two questions over drafts of given sizes.
// Run: make build/tests/test_spec_model && ./build/tests/test_spec_model
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <math.h>

#include "spec_model.h"

static void test_expected_tokens_closed_form(void **state) {
    (void)state;
    for (int gamma = 1; gamma <= 15; gamma++)
        for (double alpha = 0.05; alpha < 1.0; alpha += 0.1)
            assert_float_equal(spec_expected_tokens(alpha, gamma), (1 - pow(alpha, gamma + 1)) / (1 - alpha), 1e-12);
}

// alpha = 0: only the target's token; alpha = 1: every draft and the bonus token.
static void test_expected_tokens_limits(void **state) {
    (void)state;
    assert_float_equal(spec_expected_tokens(0.0, 4), 1.0, 0.0);
    assert_float_equal(spec_expected_tokens(1.0, 4), 5.0, 0.0);
    assert_float_equal(spec_expected_tokens(1.0, 1), 2.0, 0.0);
    assert_true(isnan(spec_expected_tokens(NAN, 4)));
}

static void test_predicted_speedup(void **state) {
    (void)state;
    // alpha 0.8, gamma 4: E = (1 - 0.8^5) / 0.2 = 3.3616
    double e = (1 - pow(0.8, 5)) / 0.2;
    // the paper's formula (v = 1): E / (gamma c + 1)
    assert_float_equal(spec_predicted_speedup(0.8, 4, 0.05, 1.0), e / 1.2, 1e-12);
    // a verification of 5 rows costing 2.5 steps
    assert_float_equal(spec_predicted_speedup(0.8, 4, 0.05, 2.5), e / 2.7, 1e-12);
    // a free draft that is always right: gamma + 1 tokens for one verification
    assert_float_equal(spec_predicted_speedup(1.0, 3, 0.0, 1.0), 4.0, 0.0);
    // a draft as slow as the target can never pay
    assert_true(spec_predicted_speedup(0.99, 4, 1.0, 1.0) < 1.0);
}

// The counted model with nothing left out (no sampler cost, gamma drafts in gamma draft calls)
// is the formula; each cost it adds lowers the prediction, and drafting fewer tokens than gamma
// (a lookup without a match) verifies fewer rows.
static void test_predicted_speedup_counted(void **state) {
    (void)state;
    double verify[] = {0.25, 0.30, 0.38, 0.45, 0.55}; // ms of 1 .. 5 rows
    SpecCosts c = {0.05, 0.0, verify, 5};
    for (int gamma = 1; gamma <= 4; gamma++)
        for (double alpha = 0.1; alpha < 1.0; alpha += 0.2)
            assert_float_equal(spec_predicted_speedup_counted(alpha, &c, gamma, gamma),
                               spec_predicted_speedup(alpha, gamma, 0.05 / 0.25, verify[gamma] / 0.25), 1e-12);
    double free_sampler = spec_predicted_speedup_counted(0.7, &c, 4, 4);
    SpecCosts sampled = {0.05, 0.02, verify, 5};
    assert_true(spec_predicted_speedup_counted(0.7, &sampled, 4, 4) < free_sampler);
    assert_true(spec_predicted_speedup_counted(0.7, &c, 4, 5) < free_sampler); // a catch-up call
    // 2.5 drafts per step: E(0.7, 2.5) tokens for half of a 3-row and half of a 4-row forward
    double e = (1 - pow(0.7, 3.5)) / 0.3, step = 2.5 * 0.05 + 0.5 * (0.38 + 0.45);
    assert_float_equal(spec_predicted_speedup_counted(0.7, &c, 2.5, 2.5), e * 0.25 / step, 1e-12);
    assert_float_equal(spec_predicted_speedup_counted(1.0, &c, 2.0, 2.0), 3 * 0.25 / (0.1 + 0.38), 1e-12);
    assert_true(isnan(spec_predicted_speedup_counted(NAN, &c, 2.0, 2.0)));
}

static void test_smaller_is_higher(void **state) {
    (void)state;
    double sizes[] = {3e4, 1e4, 8e4}; // not in size order
    double faster[] = {1.5, 1.9, 1.2}, mixed[] = {1.5, 1.4, 1.2}, tie[] = {1.5, 1.5, 1.2};
    assert_int_equal(spec_smaller_is_higher(sizes, faster, 3), 1);
    assert_int_equal(spec_smaller_is_higher(sizes, mixed, 3), 0);
    assert_int_equal(spec_smaller_is_higher(sizes, tie, 3), 0);
    assert_int_equal(spec_smaller_is_higher(sizes, faster, 1), 1);
}

static void test_smallest_is_lowest(void **state) {
    (void)state;
    double sizes[] = {3e4, 1e4, 8e4};
    double lowest[] = {0.6, 0.2, 0.7}, not_lowest[] = {0.1, 0.2, 0.7}, tie[] = {0.2, 0.2, 0.7};
    assert_int_equal(spec_smallest_is_lowest(sizes, lowest, 3), 1);
    assert_int_equal(spec_smallest_is_lowest(sizes, not_lowest, 3), 0);
    assert_int_equal(spec_smallest_is_lowest(sizes, tie, 3), 0);
    assert_int_equal(spec_smallest_is_lowest(sizes, lowest, 1), 0);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_expected_tokens_closed_form),
        cmocka_unit_test(test_expected_tokens_limits),
        cmocka_unit_test(test_predicted_speedup),
        cmocka_unit_test(test_predicted_speedup_counted),
        cmocka_unit_test(test_smaller_is_higher),
        cmocka_unit_test(test_smallest_is_lowest),
    };
    return cmocka_run_group_tests_name("spec_model", tests, NULL, NULL);
}
