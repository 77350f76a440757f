// test_peak.c: the STREAM kernels and their byte counting, the array sizing rule, and the
// measurement harnesses of experiments/lab/peak.c (values only: timings are never asserted).
//
//   make build/tests/test_peak && ./build/tests/test_peak
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdlib.h>

#include "peak.h"
#include "rng.h"

static double *random_doubles(size_t n, uint64_t *rng) {
    double *x = malloc(n * sizeof(double));
    for (size_t i = 0; i < n; i++) x[i] = rng_normal(rng) + 1e-3 * rng_uniform(rng);
    return x;
}

// Copy and triad against a plain loop, on 1 and 2 threads, with lengths that split unevenly.
static void test_kernels_match_reference(void **state) {
    (void)state;
    uint64_t rng = rng_seed(3);
    static const size_t lengths[] = {1, 7, 1001, 65537};
    for (size_t li = 0; li < sizeof lengths / sizeof lengths[0]; li++)
        for (int threads = 1; threads <= 2; threads++) {
            size_t n = lengths[li];
            double *a = random_doubles(n, &rng), *b = random_doubles(n, &rng), *c = random_doubles(n, &rng);
            stream_copy(c, a, n, threads);
            for (size_t i = 0; i < n; i++) assert_true(c[i] == a[i]);
            double *c2 = random_doubles(n, &rng);
            stream_triad(a, b, c2, 3.0, n, threads);
            for (size_t i = 0; i < n; i++) {
                double want = b[i] + 3.0 * c2[i];
                if (!(fabs(a[i] - want) <= 1e-15 * (fabs(want) + 1.0)))
                    fail_msg("triad n=%zu threads=%d: a[%zu] = %.17g, want %.17g", n, threads, i, a[i], want);
            }
            free(a);
            free(b);
            free(c);
            free(c2);
        }
}

static void test_byte_counting(void **state) {
    (void)state;
    assert_true(stream_bytes(STREAM_COPY, 1000) == 16000.0);  // read a, write c
    assert_true(stream_bytes(STREAM_TRIAD, 1000) == 24000.0); // read b and c, write a
    // Each array is 4x the LLC, or min_bytes when that is larger.
    assert_int_equal(stream_array_len(32u << 20, 64u << 20), (128u << 20) / 8);
    assert_int_equal(stream_array_len(1u << 20, 64u << 20), (64u << 20) / 8);
    assert_int_equal(stream_array_len(0, 8000), 1000);
}

static void test_measure_reports_consistent_rates(void **state) {
    (void)state;
    size_t n = 1 << 16;
    for (int k = STREAM_COPY; k <= STREAM_TRIAD; k++) {
        StreamResult r = stream_measure((StreamKernel)k, n, 2, 5);
        assert_int_equal(r.time.reps, 5);
        assert_int_equal(r.threads, 2);
        double gb = stream_bytes((StreamKernel)k, n) * 1e-9;
        assert_true(fabs(r.gb_s_median - gb / (r.time.median_ms * 1e-3)) <= 1e-9 * r.gb_s_median);
        assert_true(fabs(r.gb_s_best - gb / (r.time.min_ms * 1e-3)) <= 1e-9 * r.gb_s_best);
        assert_true(r.gb_s_p10 <= r.gb_s_median && r.gb_s_median <= r.gb_s_p90 && r.gb_s_p90 <= r.gb_s_best);
    }
    SgemmPeak s = peak_sgemm(96, 2, 4, 0.0, 1);
    assert_int_equal(s.n, 96);
    assert_int_equal(s.time.reps, 2); // budget 0 s: min_reps only
    double gflop = 2.0 * 96 * 96 * 96 * 1e-9;
    assert_true(fabs(s.gflop_s_median - gflop / (s.time.median_ms * 1e-3)) <= 1e-9 * s.gflop_s_median);
    assert_true(s.gflop_s_best >= s.gflop_s_median);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_kernels_match_reference),
        cmocka_unit_test(test_byte_counting),
        cmocka_unit_test(test_measure_reports_consistent_rates),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
