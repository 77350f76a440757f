// bench.c: the shared timing methodology (see bench.h): warm-up, repetitions on a
// monotonic clock, and order statistics of the samples.
#include "bench.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common.h"

double now_seconds(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int compare_doubles(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

// Quantile q of sorted samples, linear between closest ranks (numpy's default):
// position q * (n - 1), so the median of an even count is the mean of the middle two.
static double quantile_sorted(const double *sorted, int n, double q) {
    double pos = q * (n - 1);
    int lo = (int)pos;
    if (lo >= n - 1) return sorted[n - 1];
    double frac = pos - lo;
    return sorted[lo] + frac * (sorted[lo + 1] - sorted[lo]);
}

BenchStats bench_stats(const double *samples_ms, int n) {
    if (n < 1) die("bench_stats: no samples");
    double *sorted = mallocCheck((size_t)n * sizeof(double));
    memcpy(sorted, samples_ms, (size_t)n * sizeof(double));
    qsort(sorted, (size_t)n, sizeof(double), compare_doubles);
    BenchStats s;
    s.median_ms = quantile_sorted(sorted, n, 0.5);
    s.p10_ms = quantile_sorted(sorted, n, 0.1);
    s.p90_ms = quantile_sorted(sorted, n, 0.9);
    s.min_ms = sorted[0];
    s.max_ms = sorted[n - 1];
    s.reps = n;
    free(sorted);
    return s;
}

BenchStats bench_run_budget(void (*fn)(void *ctx), void *ctx, int warmup, int min_reps, int max_reps,
                            double budget_s) {
    if (min_reps < 1 || max_reps < min_reps) die("bench: need 1 <= min_reps <= max_reps");
    for (int i = 0; i < warmup; i++) fn(ctx);
    double *samples = mallocCheck((size_t)max_reps * sizeof(double));
    int n = 0;
    double start = now_seconds();
    while (n < max_reps && (n < min_reps || now_seconds() - start < budget_s)) {
        double t0 = now_seconds();
        fn(ctx);
        samples[n++] = 1e3 * (now_seconds() - t0);
    }
    BenchStats s = bench_stats(samples, n);
    free(samples);
    return s;
}

BenchStats bench_run(void (*fn)(void *ctx), void *ctx, int warmup, int reps) {
    return bench_run_budget(fn, ctx, warmup, reps, reps, 0.0);
}
