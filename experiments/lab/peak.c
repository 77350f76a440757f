// peak.c: STREAM copy/triad bandwidth and sgemm FLOP/s of this machine (see peak.h).
#include "peak.h"

#include <cblas.h>
#include <omp.h>
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

// ---- the FMA ceiling ------------------------------------------------------------------------
// FMA_CHAINS independent accumulators hide the FMA latency: a core issues up to two FMAs per
// cycle with a latency of four (Skylake-X, Zen 4), so at least eight must be in flight; twelve
// fit in the 16 vector registers of AVX2 beside the two constants. The compiler must not
// contract or reorder them, so the loop uses the intrinsics, not a * b + c.
enum { FMA_CHAINS = 12, FMA_ITERS = 1 << 21 };

#if defined(__AVX512F__)
#include <immintrin.h>
typedef __m512 FmaVec;
static const int FMA_LANES = 16;
static const char FMA_ISA[] = "avx512";
#define FMA_SET1(x) _mm512_set1_ps(x)
#define FMA_MADD(a, b, c) _mm512_fmadd_ps(a, b, c)
#define FMA_SUM(v) _mm512_reduce_add_ps(v)
#elif defined(__AVX2__) && defined(__FMA__)
#include <immintrin.h>
typedef __m256 FmaVec;
static const int FMA_LANES = 8;
static const char FMA_ISA[] = "avx2+fma";
#define FMA_SET1(x) _mm256_set1_ps(x)
#define FMA_MADD(a, b, c) _mm256_fmadd_ps(a, b, c)
static float FMA_SUM(__m256 v) {
    float f[8];
    _mm256_storeu_ps(f, v);
    return f[0] + f[1] + f[2] + f[3] + f[4] + f[5] + f[6] + f[7];
}
#else
#include <math.h>
typedef float FmaVec;
static const int FMA_LANES = 1;
static const char FMA_ISA[] = "scalar";
#define FMA_SET1(x) (x)
#define FMA_MADD(a, b, c) fmaf(a, b, c)
#define FMA_SUM(v) (v)
#endif

// acc <- acc * 1 + 2^-20, FMA_ITERS times on each chain: every step is exact in fp32 (the
// accumulators stay below 2^2), so the sum is known and checks that every FMA ran. The 1 is
// read from a volatile so that the compiler cannot turn the FMA into an add.
static volatile float FMA_ONE = 1.0f;

static float fma_loop(void) {
    const FmaVec one = FMA_SET1(FMA_ONE), step = FMA_SET1(1.0f / (1 << 20));
    FmaVec acc[FMA_CHAINS];
    for (int c = 0; c < FMA_CHAINS; c++) acc[c] = FMA_SET1(0.0f);
    for (int i = 0; i < FMA_ITERS; i++) {
        #pragma GCC unroll 12
        for (int c = 0; c < FMA_CHAINS; c++) acc[c] = FMA_MADD(acc[c], one, step);
    }
    float sum = 0.0f;
    for (int c = 0; c < FMA_CHAINS; c++) sum += FMA_SUM(acc[c]);
    return sum;
}

typedef struct {
    int threads;
    float *results; // (threads)
} FmaCall;

static void run_fma(void *ctx) {
    FmaCall *f = ctx;
    #pragma omp parallel num_threads(f->threads)
    f->results[omp_get_thread_num()] = fma_loop();
}

FmaPeak peak_fma(int threads, int reps) {
    FmaCall f = {threads, mallocCheck((size_t)threads * sizeof(float))};
    FmaPeak p = {.threads = threads, .lanes = FMA_LANES, .isa = FMA_ISA};
    p.time = bench_run(run_fma, &f, 1, reps);
    float want = (float)FMA_CHAINS * FMA_LANES * ((float)FMA_ITERS / (1 << 20));
    for (int t = 0; t < threads; t++)
        if (f.results[t] != want) die("FMA probe: thread %d computed %g, want %g", t, f.results[t], want);
    double gflop = 2.0 * FMA_CHAINS * FMA_LANES * (double)FMA_ITERS * threads * 1e-9;
    p.gflop_s_median = gflop / (p.time.median_ms * 1e-3);
    p.gflop_s_p10 = gflop / (p.time.p90_ms * 1e-3);
    p.gflop_s_p90 = gflop / (p.time.p10_ms * 1e-3);
    p.gflop_s_best = gflop / (p.time.min_ms * 1e-3);
    free(f.results);
    return p;
}
