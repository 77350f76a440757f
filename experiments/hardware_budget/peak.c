// peak.c: STREAM copy/triad bandwidth and sgemm FLOP/s of this machine (see peak.h).
#include "peak.h"

#include <cblas.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "common.h"
#include "rng.h"

const char *stream_kernel_name(StreamKernel k) { return k == STREAM_COPY ? "copy" : "triad"; }

void stream_copy(double *c, const double *a, size_t n, int threads) {
    #pragma omp parallel for simd schedule(static) num_threads(threads)
    for (size_t i = 0; i < n; i++) c[i] = a[i];
}

void stream_triad(double *a, const double *b, const double *c, double scalar, size_t n, int threads) {
    #pragma omp parallel for simd schedule(static) num_threads(threads)
    for (size_t i = 0; i < n; i++) a[i] = b[i] + scalar * c[i];
}

double stream_bytes(StreamKernel k, size_t n) {
    return (k == STREAM_COPY ? 2.0 : 3.0) * sizeof(double) * (double)n;
}

// A cache size from sysfs text such as "32768K" or "1M"; 0 when unreadable.
static size_t read_cache_size(const char *path) {
    FILE *f = fopen(path, "r");
    if (!f) return 0;
    unsigned long long v = 0;
    char unit = 0;
    int got = fscanf(f, "%llu%c", &v, &unit);
    fclose(f);
    if (got < 1) return 0;
    if (unit == 'K') v <<= 10;
    else if (unit == 'M') v <<= 20;
    return (size_t)v;
}

size_t peak_llc_bytes(void) {
    size_t largest = 0;
    for (int i = 0; i < 8; i++) {
        char path[96];
        snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu0/cache/index%d/size", i);
        size_t s = read_cache_size(path);
        if (s > largest) largest = s;
    }
    if (largest > 0) return largest;
    long l3 = sysconf(_SC_LEVEL3_CACHE_SIZE), l2 = sysconf(_SC_LEVEL2_CACHE_SIZE);
    return l3 > 0 ? (size_t)l3 : l2 > 0 ? (size_t)l2 : 0;
}

size_t stream_array_len(size_t llc_bytes, size_t min_bytes) {
    size_t bytes = 4 * llc_bytes > min_bytes ? 4 * llc_bytes : min_bytes;
    return bytes / sizeof(double);
}

typedef struct {
    StreamKernel kernel;
    double *a, *b, *c;
    size_t n;
    int threads;
} StreamCall;

static const double TRIAD_SCALAR = 3.0;

static void run_stream(void *ctx) {
    StreamCall *s = ctx;
    if (s->kernel == STREAM_COPY) stream_copy(s->c, s->a, s->n, s->threads);
    else stream_triad(s->a, s->b, s->c, TRIAD_SCALAR, s->n, s->threads);
}

// Every pass writes the same values: copy c = a = 1, triad a = b + 3 c = 2 + 1.5.
static void check_stream(const StreamCall *s) {
    const double *out = s->kernel == STREAM_COPY ? s->c : s->a;
    double want = s->kernel == STREAM_COPY ? 1.0 : 2.0 + TRIAD_SCALAR * 0.5;
    for (size_t i = 0; i < s->n; i++)
        if (out[i] != want)
            die("stream %s: element %zu is %g, want %g", stream_kernel_name(s->kernel), i, out[i], want);
}

StreamResult stream_measure(StreamKernel k, size_t n, int threads, int reps) {
    StreamCall s = {k, mallocCheck(n * sizeof(double)), mallocCheck(n * sizeof(double)),
                    mallocCheck(n * sizeof(double)), n, threads};
    #pragma omp parallel for schedule(static) num_threads(threads)
    for (size_t i = 0; i < n; i++) {
        s.a[i] = 1.0;
        s.b[i] = 2.0;
        s.c[i] = 0.5;
    }
    StreamResult r = {.kernel = k, .threads = threads, .n = n};
    r.time = bench_run(run_stream, &s, 1, reps);
    check_stream(&s);
    double gb = stream_bytes(k, n) * 1e-9;
    r.gb_s_median = gb / (r.time.median_ms * 1e-3);
    r.gb_s_p10 = gb / (r.time.p90_ms * 1e-3); // the slow tail of time is the low tail of rate
    r.gb_s_p90 = gb / (r.time.p10_ms * 1e-3);
    r.gb_s_best = gb / (r.time.min_ms * 1e-3);
    free(s.a);
    free(s.b);
    free(s.c);
    return r;
}

typedef struct {
    int n;
    float *a, *b, *c;
} SgemmCall;

static void run_sgemm(void *ctx) {
    SgemmCall *g = ctx;
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, g->n, g->n, g->n, 1.0f, g->a, g->n, g->b, g->n, 0.0f,
                g->c, g->n);
}

SgemmPeak peak_sgemm(int n, int min_reps, int max_reps, double budget_s, uint64_t seed) {
    size_t nn = (size_t)n * n;
    SgemmCall g = {n, mallocCheck(nn * sizeof(float)), mallocCheck(nn * sizeof(float)),
                   mallocCheck(nn * sizeof(float))};
    uint64_t rng = rng_seed(seed);
    for (size_t i = 0; i < nn; i++) {
        g.a[i] = rng_normal(&rng);
        g.b[i] = rng_normal(&rng);
    }
    SgemmPeak p = {.n = n};
    p.time = bench_run_budget(run_sgemm, &g, 1, min_reps, max_reps, budget_s);
    double gflop = 2.0 * n * (double)n * n * 1e-9;
    p.gflop_s_median = gflop / (p.time.median_ms * 1e-3);
    p.gflop_s_best = gflop / (p.time.min_ms * 1e-3);
    free(g.a);
    free(g.b);
    free(g.c);
    return p;
}
