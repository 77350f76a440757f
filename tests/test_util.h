// test_util.h: small helpers shared by the cmocka tests: random fills and closeness checks.
#pragma once

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "rng.h"

// Fill x with N(0, std) from the given RNG state (never all zeros).
static inline void fill_normal(float *x, size_t n, float std, uint64_t *rng) {
    for (size_t i = 0; i < n; i++) x[i] = std * rng_normal(rng);
}

// Largest |got - want| / (atol + rtol * |want|) over n elements: <= 1 means close.
static inline double close_ratio(const float *got, const float *want, size_t n, double rtol, double atol) {
    double worst = 0.0;
    for (size_t i = 0; i < n; i++) {
        double r = fabs((double)got[i] - want[i]) / (atol + rtol * fabs((double)want[i]));
        if (!(r <= worst)) worst = r; // NaN propagates as "not close"
    }
    return worst;
}

// Max relative error of a vector, normalised by its largest magnitude (logit comparisons).
static inline double max_rel_error(const float *got, const float *want, size_t n) {
    double err = 0.0, scale = 1e-30;
    for (size_t i = 0; i < n; i++) {
        double e = fabs((double)got[i] - want[i]);
        if (!(e <= err)) err = e;
        if (fabs(want[i]) > scale) scale = fabs(want[i]);
    }
    return err / scale;
}

#define assert_close(got, want, n, rtol, atol)                                              \
    do {                                                                                    \
        double r_ = close_ratio(got, want, n, rtol, atol);                                  \
        if (!(r_ <= 1.0)) fail_msg("%s vs %s: error %.3g x tolerance (rtol %g, atol %g)", #got, \
                                   #want, r_, (double)(rtol), (double)(atol));              \
    } while (0)

// |got - want| <= tol, or a failure naming the expression and both values.
#define assert_near(got, want, tol)                                                                  \
    do {                                                                                             \
        double g_ = (got), w_ = (want);                                                              \
        if (!(fabs(g_ - w_) <= (tol))) fail_msg("%s = %.10g, want %.10g (tol %g)", #got, g_, w_, (double)(tol)); \
    } while (0)
