// attention_kernels.c: project 15, naive vs flash attention, on the CPU or the GPU.
// CPU (the default): sweeps the sequence length T (powers of two from 128) at head dim 64,
// fp32, causal and not, and for each kernel in kernels.h (attention_naive, attention_flash)
// records the median time with p10/p90, achieved GFLOP/s (4 B H T^2 D, halved when causal),
// the working memory it allocated, and its max abs error against the double-precision
// reference on a sample of rows. Also measures this machine's sgemm peak (a large square
// cblas_sgemm) so the report can draw it as a ceiling.
// GPU (--backend cuda): naive (cuBLAS), our flash kernel and cuDNN's fused SDPA in fp16 /
// bf16 at the seeds' shape B=4 H=12 T=2048 D=64 and over T sweeps, against the cuBLAS matmul
// ceiling (experiments/engine/attention_cuda.h, shared with bin/cuda_bench); exits 2 without
// a usable device.
//
//   bin/attention_kernels [--quick] [--out DIR] [--threads N] [--t-max N] [--batch N] [--heads N]
//   bin/attention_kernels --backend cuda [--quick] [--out DIR] [--t-max N]
//
// Writes under DIR, with the backend as every row's first column: attention_kernels.csv and
// sgemm_peak.csv (CPU), or cuda_attention.csv and cuda_gemm.csv (GPU); merges DIR/meta.csv.
#include <getopt.h>
#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attention_cuda.h"
#include "backend.h"
#include "bench.h"
#include "cli.h"
#include "common.h"
#include "csv.h"
#include "hw.h"
#include "kernels.h"
#include "meta.h"
#include "peak.h"
#include "reference.h"
#include "rng.h"

enum { HEAD_DIM = 64, T_MIN = 128, CHECK_ROWS = 64 }; // CHECK_ROWS: reference rows per head

// Repetitions follow from the work, not from the clock, so that every column but the
// timings is the same on every run: enough calls for about gflop_per_point of work, at
// least min_reps and at most max_reps.
typedef struct {
    int t_max, batch, heads;
    int sgemm_n;           // side of the square sgemm that measures the peak
    int min_reps, max_reps;
    double gflop_per_point;
    unsigned long seed;
} Settings;

static Settings settings_for(const char *profile) {
    if (strcmp(profile, "quick") == 0)
        return (Settings){.t_max = 256, .batch = 1, .heads = 2, .sgemm_n = 256, .min_reps = 3, .max_reps = 5,
                          .gflop_per_point = 0.05, .seed = 1};
    return (Settings){.t_max = 16384, .batch = 1, .heads = 4, .sgemm_n = 2048, .min_reps = 3, .max_reps = 50,
                      .gflop_per_point = 20.0, .seed = 1};
}

static int reps_for(double gflop_per_call, const Settings *st) {
    double reps = ceil(st->gflop_per_point / gflop_per_call);
    return reps < st->min_reps ? st->min_reps : reps > st->max_reps ? st->max_reps : (int)reps;
}

static void usage(void) {
    printf("Usage: attention_kernels [options]\n"
           "Naive vs flash attention on the CPU (or the GPU): time, GFLOP/s, working memory and error vs T.\n\n"
           "  --t-max N        longest sequence of the sweep (CPU 128, 256, ...: full 16384, quick 256;\n"
           "                   GPU 512, 1024, ...: full 16384, quick 4096)\n"
           "  --batch N        batch size B (CPU only; default 1)\n"
           "  --heads N        heads H (CPU only; full: 4, quick: 2)\n"
           "  --seed N         seed of the random q, k, v (CPU only; default 1)\n" BACKEND_HELP CLI_COMMON_HELP
           "\nWrites attention_kernels.csv and sgemm_peak.csv under --out (GPU: cuda_attention.csv and\n"
           "cuda_gemm.csv), and merges meta.csv. --backend cuda exits 2 when no CUDA device can be used.\n");
}

// --- timing harness -----------------------------------------------------------------------

typedef size_t (*AttentionFn)(float *out, const float *q, const float *k, const float *v,
                              const AttentionFullShape *s);

typedef struct {
    AttentionFn fn;
    float *out;
    const float *q, *k, *v;
    AttentionFullShape shape;
} AttentionCall;

static void run_attention(void *ctx) {
    AttentionCall *c = ctx;
    c->fn(c->out, c->q, c->k, c->v, &c->shape);
}

static float *random_floats(size_t n, uint64_t *rng) {
    float *x = mallocCheck(n * sizeof(float));
    for (size_t i = 0; i < n; i++) x[i] = rng_normal(rng);
    return x;
}

// --- sgemm peak -----------------------------------------------------------------------------

// The ceiling the report draws: a large square sgemm on the same threads (engine/peak.h).
static void write_sgemm_peak(const char *dir, const Settings *st, int threads) {
    int n = st->sgemm_n;
    int reps = reps_for(2.0 * n * n * (double)n * 1e-9, st);
    SgemmPeak p = peak_sgemm(n, reps, reps, 0.0, st->seed);
    char path[1024];
    snprintf(path, sizeof path, "%s/sgemm_peak.csv", dir);
    CsvWriter w = csv_open(path, "backend,n,threads,reps,time_ms_median,time_ms_p10,time_ms_p90,gflop_s,gflop_s_best");
    csv_row(&w, "cpu,%d,%d,%d,%.6g,%.6g,%.6g,%.6g,%.6g", n, threads, p.time.reps, p.time.median_ms, p.time.p10_ms,
            p.time.p90_ms, p.gflop_s_median, p.gflop_s_best);
    csv_close(&w);
    fprintf(stderr, "attention_kernels: sgemm %d^3 on %d threads: %.1f GFLOP/s (median of %d)\n", n, threads,
            p.gflop_s_median, p.time.reps);
}

// --- accuracy -------------------------------------------------------------------------------

// The rows checked against the reference: all of them for short sequences, else CHECK_ROWS
// spread evenly from the first to the last (the last sees the most keys).
static int check_row(int i, int T) { return T <= CHECK_ROWS ? i : (int)((long)i * (T - 1) / (CHECK_ROWS - 1)); }

// Reference outputs of the checked rows of every head: (B, H, rows, D) in double.
static double *reference_rows(const float *q, const float *k, const float *v, const AttentionFullShape *s,
                              int rows) {
    double *ref = mallocCheck((size_t)s->B * s->H * rows * s->D * sizeof(double));
    #pragma omp parallel for collapse(2) schedule(dynamic, 1)
    for (int bh = 0; bh < s->B * s->H; bh++)
        for (int i = 0; i < rows; i++)
            ref_attention_full_row(ref + ((size_t)bh * rows + i) * s->D, q, k, v, s, bh / s->H, bh % s->H,
                                   check_row(i, s->T));
    return ref;
}

static double max_abs_error(const float *out, const double *ref, const AttentionFullShape *s, int rows) {
    double worst = 0.0;
    for (int bh = 0; bh < s->B * s->H; bh++)
        for (int i = 0; i < rows; i++) {
            const float *o = out + ((size_t)bh * s->T + check_row(i, s->T)) * s->D;
            const double *r = ref + ((size_t)bh * rows + i) * s->D;
            for (int d = 0; d < s->D; d++) {
                double e = fabs((double)o[d] - r[d]);
                if (!(e <= worst)) worst = e; // a NaN output makes the error NaN, not 0
            }
        }
    return worst;
}

// --- the sweep ------------------------------------------------------------------------------

// Naive's (T, T) matrix plus q, k, v, out must fit in half the physical memory.
static int fits_in_memory(int T, const Settings *st, long long mem_bytes) {
    double need = 4.0 * T * T + 4.0 * 4.0 * st->batch * st->heads * (double)T * HEAD_DIM;
    return mem_bytes <= 0 || need < 0.5 * (double)mem_bytes;
}

static void sweep(const char *dir, const Settings *st, int threads, long long mem_bytes) {
    static const struct {
        const char *name;
        AttentionFn fn;
    } impls[] = {{"naive", attention_naive}, {"flash", attention_flash}};
    char path[1024];
    snprintf(path, sizeof path, "%s/attention_kernels.csv", dir);
    CsvWriter w = csv_open(path, "backend,seq_len,causal,impl,batch,heads,head_dim,threads,reps,time_ms_median,"
                                 "time_ms_p10,time_ms_p90,gflop_s,work_bytes,io_bytes,max_abs_err");
    for (int T = T_MIN; T <= st->t_max; T *= 2) {
        if (!fits_in_memory(T, st, mem_bytes)) {
            fprintf(stderr, "attention_kernels: T = %d and longer skipped: the naive (T, T) matrix does not fit\n", T);
            break;
        }
        AttentionFullShape s = {st->batch, st->heads, T, HEAD_DIM, 0};
        size_t n = (size_t)s.B * s.H * T * HEAD_DIM;
        uint64_t rng = rng_seed(st->seed * 1000003u + (unsigned)T);
        float *q = random_floats(n, &rng), *k = random_floats(n, &rng), *v = random_floats(n, &rng);
        float *out = mallocCheck(n * sizeof(float));
        int rows = T < CHECK_ROWS ? T : CHECK_ROWS;
        for (s.causal = 0; s.causal <= 1; s.causal++) {
            double *ref = reference_rows(q, k, v, &s, rows);
            double gflop = 4.0 * s.B * s.H * (double)T * T * HEAD_DIM * 1e-9 * (s.causal ? 0.5 : 1.0);
            for (size_t i = 0; i < sizeof impls / sizeof impls[0]; i++) {
                cli_progress("attention_kernels: T = %d, %s, %s", T, s.causal ? "causal" : "full", impls[i].name);
                // The accuracy run doubles as the warm-up.
                for (size_t j = 0; j < n; j++) out[j] = NAN; // an output left unwritten shows as NaN error
                size_t work = impls[i].fn(out, q, k, v, &s);
                double err = max_abs_error(out, ref, &s, rows);
                AttentionCall call = {impls[i].fn, out, q, k, v, s};
                BenchStats b = bench_run(run_attention, &call, 0, reps_for(gflop, st));
                csv_row(&w, "cpu,%d,%d,%s,%d,%d,%d,%d,%d,%.6g,%.6g,%.6g,%.6g,%zu,%zu,%.6g", T, s.causal, impls[i].name,
                        s.B, s.H, s.D, threads, b.reps, b.median_ms, b.p10_ms, b.p90_ms,
                        gflop / (b.median_ms * 1e-3), work, 4 * n * sizeof(float), err);
            }
            free(ref);
        }
        free(q);
        free(k);
        free(v);
        free(out);
    }
    cli_progress_done();
    csv_close(&w);
}

// --backend cuda: the GPU sweep (attention_cuda.h); exits 2 without a usable device.
static int run_cuda(const CliCommon *common, int t_max) {
    backend_require(BACKEND_CUDA, "attention_kernels");
#ifdef INFERLAB_CUDA
    double start = now_seconds();
    CudaAttentionRun run;
    char why[256];
    if (cuda_attention_experiment(common->out_dir, common->profile, t_max, &run, why, sizeof why) == 2) {
        fprintf(stderr, "attention_kernels: not run: no usable CUDA device (%s)\n", why);
        return 2;
    }
    fprintf(stderr, "attention_kernels: wrote %s/cuda_attention.csv and cuda_gemm.csv on %s in %.1f s\n",
            common->out_dir, run.device, now_seconds() - start);
    cuda_attention_run_free(&run);
#else
    (void)common, (void)t_max;
#endif
    return 0;
}

int main(int argc, char **argv) {
    enum { OPT_T_MAX = 1, OPT_BATCH, OPT_HEADS, OPT_SEED, OPT_BACKEND };
    static const struct option options[] = {
        CLI_COMMON_OPTIONS,
        {"t-max", required_argument, 0, OPT_T_MAX},
        {"batch", required_argument, 0, OPT_BATCH},
        {"heads", required_argument, 0, OPT_HEADS},
        {"seed", required_argument, 0, OPT_SEED},
        {"backend", required_argument, 0, OPT_BACKEND},
        {0, 0, 0, 0},
    };
    CliCommon common;
    cli_common_defaults(&common);
    long t_max = 0, batch = 0, heads = 0, seed = -1;
    Backend backend = BACKEND_CPU;
    Error err;
    for (int c; (c = getopt_long(argc, argv, "", options, NULL)) != -1;) {
        int bad = 0;
        switch (c) {
        case OPT_T_MAX: bad = cli_parse_long("--t-max", optarg, T_MIN, 1 << 20, &t_max, &err); break;
        case OPT_BATCH: bad = cli_parse_long("--batch", optarg, 1, 1024, &batch, &err); break;
        case OPT_HEADS: bad = cli_parse_long("--heads", optarg, 1, 1024, &heads, &err); break;
        case OPT_SEED: bad = cli_parse_long("--seed", optarg, 0, 1L << 31, &seed, &err); break;
        case OPT_BACKEND: bad = backend_parse(optarg, &backend, &err); break;
        case '?': cli_usage_error(argv[0], "unknown option or missing value");
        default:
            if (cli_common_option(&common, c, optarg, &err) != 1) bad = 1;
        }
        if (bad) cli_usage_error(argv[0], err.msg);
    }
    if (optind < argc) cli_usage_error(argv[0], "unexpected argument");
    if (common.help) {
        usage();
        return 0;
    }
    if (backend == BACKEND_CUDA) {
        if (batch || heads || seed >= 0)
            cli_usage_error(argv[0], "--batch, --heads and --seed apply to the CPU sweep; the GPU's is fixed");
        return run_cuda(&common, (int)t_max);
    }
    Settings st = settings_for(common.profile);
    if (t_max) st.t_max = (int)t_max;
    if (batch) st.batch = (int)batch;
    if (heads) st.heads = (int)heads;
    if (seed >= 0) st.seed = (unsigned long)seed;

    kernels_set_threads(common.threads);
    int threads = omp_get_max_threads();
    HwInfo hw;
    hw_probe(&hw);
    if (meta_make_dir(common.out_dir, &err)) die("%s", err.msg);
    char threads_text[16];
    snprintf(threads_text, sizeof threads_text, "%d", threads);
    MetaEntry extra[] = {{"attention_kernels_threads", threads_text}};
    if (meta_write(common.out_dir, &hw, common.profile, extra, 1, &err)) die("%s", err.msg);

    double start = now_seconds();
    write_sgemm_peak(common.out_dir, &st, threads);
    sweep(common.out_dir, &st, threads, hw.mem_bytes);
    fprintf(stderr, "attention_kernels: wrote %s/attention_kernels.csv in %.1f s\n", common.out_dir,
            now_seconds() - start);
    return 0;
}
