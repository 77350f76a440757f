// test_render_ticks.c: axis ticks (render/ticks.c) and number formats (render/numfmt.c).
// Linear axes: hand-checked cases, then random ranges over many magnitudes, where the ticks
// must cover the data, stay within max_major, be evenly spaced on the 1-2-2.5-5 staircase,
// and use the smallest such step that fits (MaxNLocator's rule). Log axes: decades, minor
// ticks, skipped decades, the one-decade case, log2, and bad ranges. Formats: a table of
// values and expected strings for every format spec.
// Run: make build/tests/test_render_ticks && ./build/tests/test_render_ticks
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "numfmt.h"
#include "ticks.h"

static int major_values(const Axis *a, double *out) {
    int n = 0;
    for (int i = 0; i < a->n; i++)
        if (a->ticks[i].major) out[n++] = a->ticks[i].value;
    return n;
}

static void expect_majors(const Axis *a, const double *want, const char *const *labels, int n) {
    double got[MAX_TICKS];
    int k = major_values(a, got);
    if (k != n) fail_msg("got %d major ticks, want %d", k, n);
    for (int i = 0, j = 0; i < a->n; i++) {
        if (!a->ticks[i].major) continue;
        if (fabs(got[j] - want[j]) > 1e-9 * fmax(1, fabs(want[j]))) fail_msg("tick %d: %g, want %g", j, got[j], want[j]);
        if (labels && strcmp(a->ticks[i].label, labels[j]) != 0)
            fail_msg("tick %d: label '%s', want '%s'", j, a->ticks[i].label, labels[j]);
        j++;
    }
}

// --- linear -------------------------------------------------------------------------------

static void test_linear_cases(void **state) {
    (void)state;
    Axis a;
    assert_int_equal(axis_ticks(&a, SCALE_LINEAR, 0, 1, 6), 0);
    expect_majors(&a, (double[]){0, 0.2, 0.4, 0.6, 0.8, 1}, (const char *[]){"0.0", "0.2", "0.4", "0.6", "0.8", "1.0"}, 6);
    assert_true(a.lo == 0 && a.hi == 1);

    axis_ticks(&a, SCALE_LINEAR, 0, 9.3, 6); // widened to whole steps
    expect_majors(&a, (double[]){0, 2, 4, 6, 8, 10}, (const char *[]){"0", "2", "4", "6", "8", "10"}, 6);
    assert_true(a.hi == 10);

    axis_ticks(&a, SCALE_LINEAR, 0, 10, 5); // 2 needs six ticks: 2.5 is the next step
    expect_majors(&a, (double[]){0, 2.5, 5, 7.5, 10}, (const char *[]){"0.0", "2.5", "5.0", "7.5", "10.0"}, 5);

    axis_ticks(&a, SCALE_LINEAR, -3.7, 12.1, 8);
    expect_majors(&a, (double[]){-5, -2.5, 0, 2.5, 5, 7.5, 10, 12.5}, NULL, 8);

    axis_ticks(&a, SCALE_LINEAR, 1.2e6, 4.9e6, 5); // a shared exponent for large values
    assert_int_equal(a.exponent, 6);
    expect_majors(&a, (double[]){1e6, 2e6, 3e6, 4e6, 5e6}, (const char *[]){"1", "2", "3", "4", "5"}, 5);

    axis_ticks(&a, SCALE_LINEAR, 0.0012, 0.0047, 6);
    assert_int_equal(a.exponent, 0);
    expect_majors(&a, (double[]){0.001, 0.002, 0.003, 0.004, 0.005},
                  (const char *[]){"0.001", "0.002", "0.003", "0.004", "0.005"}, 5);

    axis_ticks(&a, SCALE_LINEAR, 5, 5, 6); // an empty range is widened around the value
    assert_true(a.lo < 5 && a.hi > 5);
    axis_ticks(&a, SCALE_LINEAR, 0, 0, 6);
    assert_true(a.lo < 0 && a.hi > 0);
    assert_int_equal(axis_ticks(&a, SCALE_LINEAR, 0, NAN, 6), -1);
    assert_int_equal(axis_ticks(&a, SCALE_LINEAR, -INFINITY, 1, 6), -1);
}

static double uniform(uint64_t *s) {
    *s ^= *s << 13, *s ^= *s >> 7, *s ^= *s << 17;
    return (*s >> 11) * (1.0 / 9007199254740992.0);
}

// Ticks for lo..hi on a staircase step `step`: how many would there be?
static int count_for_step(double lo, double hi, double step) {
    return (int)(ceil(hi / step - 1e-9) - floor(lo / step + 1e-9)) + 1;
}

static void test_linear_random(void **state) {
    (void)state;
    uint64_t rng = 0x9E3779B97F4A7C15ull;
    for (int iter = 0; iter < 2000; iter++) {
        double mag = pow(10, -8 + 16 * uniform(&rng));
        double lo = (uniform(&rng) - 0.5) * 4 * mag, hi = lo + (0.01 + uniform(&rng)) * mag;
        int max_major = 2 + (int)(uniform(&rng) * 9);
        Axis a;
        assert_int_equal(axis_ticks(&a, SCALE_LINEAR, lo, hi, max_major), 0);
        double v[MAX_TICKS];
        int n = major_values(&a, v);
        int across_zero = lo < 0 && hi > 0;
        assert_true(n >= 2 && n <= (max_major == 2 && across_zero ? 3 : max_major));
        assert_true(a.lo <= lo + 1e-9 * mag && a.hi >= hi - 1e-9 * mag); // covers the data
        double step = v[1] - v[0];
        for (int i = 2; i < n; i++) assert_true(fabs(v[i] - v[i - 1] - step) <= 1e-6 * step);
        double m = step / pow(10, floor(log10(step) + 1e-9));
        assert_true(fabs(m - 1) < 1e-6 || fabs(m - 2) < 1e-6 || fabs(m - 2.5) < 1e-6 || fabs(m - 5) < 1e-6);
        // the next smaller staircase step would need more ticks than allowed
        double smaller = fabs(m - 1) < 1e-6 ? step / 2 : fabs(m - 2) < 1e-6 ? step / 2 : fabs(m - 2.5) < 1e-6 ? step * 0.8 : step / 2;
        assert_true(count_for_step(lo, hi, smaller) > (n > max_major ? n : max_major));
        for (int i = 1; i < a.n; i++) assert_string_not_equal(a.ticks[i].label, a.ticks[i - 1].label);
    }
}

// --- logarithmic --------------------------------------------------------------------------

static void test_log_decades(void **state) {
    (void)state;
    Axis a;
    assert_int_equal(axis_ticks(&a, SCALE_LOG10, 3, 4000, 10), 0);
    expect_majors(&a, (double[]){10, 100, 1000}, (const char *[]){"10", "100", "1000"}, 3);
    assert_true(a.lo < 3 && a.lo > 1 && a.hi > 4000 && a.hi < 1e4); // a margin, not whole decades
    int minors = 0;
    for (int i = 0; i < a.n; i++) minors += !a.ticks[i].major;
    assert_true(minors >= 20); // 2..9 in every decade inside the range
    for (int i = 1; i < a.n; i++) assert_true(a.ticks[i].value > a.ticks[i - 1].value);

    axis_ticks(&a, SCALE_LOG10, 1e-6, 1e6, 5); // too many decades: every third is labelled
    expect_majors(&a, (double[]){1e-6, 1e-3, 1, 1e3, 1e6}, (const char *[]){"10⁻⁶", "0.001", "1", "1000", "10⁶"}, 5);

    axis_ticks(&a, SCALE_LOG10, 20, 80, 8); // inside one decade: whole decade, 2 and 5 labelled
    expect_majors(&a, (double[]){10, 20, 50, 100}, (const char *[]){"10", "20", "50", "100"}, 4);
    assert_true(a.lo == 10 && a.hi == 100);

    axis_ticks(&a, SCALE_LOG10, 0.6, 40, 8); // two decades labelled: 2 and 5 × 10ᵏ join them
    expect_majors(&a, (double[]){0.5, 1, 2, 5, 10, 20}, (const char *[]){"0.5", "1", "2", "5", "10", "20"}, 6);
}

static void test_log2(void **state) {
    (void)state;
    Axis a;
    assert_int_equal(axis_ticks(&a, SCALE_LOG2, 128, 8192, 8), 0);
    expect_majors(&a, (double[]){128, 256, 512, 1024, 2048, 4096, 8192},
                  (const char *[]){"128", "256", "512", "1024", "2048", "4096", "8192"}, 7);
    axis_ticks(&a, SCALE_LOG2, 1, 1 << 20, 6); // 21 powers: every fourth
    expect_majors(&a, (double[]){1, 16, 256, 4096, 65536, 1048576}, NULL, 6);
}

static void test_log_bad_ranges(void **state) {
    (void)state;
    Axis a;
    assert_int_equal(axis_ticks(&a, SCALE_LOG10, 0, 10, 6), -1);
    assert_int_equal(axis_ticks(&a, SCALE_LOG10, -1, 10, 6), -1);
    assert_int_equal(axis_ticks(&a, SCALE_LOG2, 1e-300, 1e300, 6), -1); // more decades than ticks
    assert_int_equal(axis_ticks(&a, SCALE_LOG10, 7, 7, 6), 0);          // one value: a decade each way
    assert_true(a.lo < 7 && a.hi > 7);
}

static void test_fraction_and_scale_names(void **state) {
    (void)state;
    Axis a;
    axis_ticks(&a, SCALE_LOG10, 1, 100, 6);
    assert_true(fabs(axis_fraction(&a, sqrt(a.lo * a.hi)) - 0.5) < 1e-12);
    assert_true(isnan(axis_fraction(&a, 0)));
    axis_ticks(&a, SCALE_LINEAR, 0, 10, 6);
    assert_true(fabs(axis_fraction(&a, 5) - 0.5) < 1e-12);
    Scale s;
    assert_int_equal(scale_parse("log2", &s), 0);
    assert_int_equal(s, SCALE_LOG2);
    assert_int_equal(scale_parse("log", &s), 0);
    assert_int_equal(s, SCALE_LOG10);
    assert_int_equal(scale_parse("logarithmic", &s), -1);
}

// --- number formats -----------------------------------------------------------------------

static void test_formats(void **state) {
    (void)state;
    static const struct {
        double v;
        const char *spec, *want;
    } cases[] = {
        {23.4567, "3", "23.5"},       {0.000123456, "", "1.23×10⁻⁴"}, {1234.5678, "3", "1235"},
        {9.9996, "3", "10"},          {2.5, ".2f", "2.50"},           {-0.0001, ".2f", "0.00"},
        {1024, "int", "1024"},        {-0.4, "int", "0"},             {1.5e9, "si", "1.5 G"},
        {999.96, "si", "1 k"},        {0.000123, "si", "123 μ"},      {512, "si", "512 "},
        {1610612736, "bytes", "1.5 GiB"}, {512, "bytes", "512 B"},    {0.125, "percent", "12.5%"},
        {-2.5e10, "", "-2.5×10¹⁰"},   {0, "", "0"},                   {1e9, "", "1×10⁹"},
        {3.14159265, "6", "3.14159"}, {100, "2", "100"},              {0.1 + 0.2, "", "0.3"},
        {NAN, "3", "n/a"},            {INFINITY, "", "∞"},            {-INFINITY, "si", "−∞"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        NumberFormat f;
        assert_int_equal(numfmt_parse(cases[i].spec, &f), 0);
        char buf[64];
        numfmt_format(cases[i].v, f, buf, sizeof buf);
        if (strcmp(buf, cases[i].want) != 0) fail_msg("%g as '%s': '%s', want '%s'", cases[i].v, cases[i].spec, buf, cases[i].want);
    }
    NumberFormat f;
    assert_int_equal(numfmt_parse(" .1f ", &f), 0);
    assert_int_equal(f.kind, FMT_FIXED);
    static const char *bad[] = {"abc", ".f", ".2", "16", "0", "%g", "3x"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) assert_int_equal(numfmt_parse(bad[i], &f), -1);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_linear_cases), cmocka_unit_test(test_linear_random),
        cmocka_unit_test(test_log_decades),  cmocka_unit_test(test_log2),
        cmocka_unit_test(test_log_bad_ranges), cmocka_unit_test(test_fraction_and_scale_names),
        cmocka_unit_test(test_formats),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
