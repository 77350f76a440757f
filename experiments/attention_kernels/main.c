// attention_kernels/main.c: bin/attention_kernels, project 15, naive vs flash attention, on the
// CPU or the GPU.
// CPU (the default): sweeps the sequence length T (powers of two from 128) at head dim 64,
// fp32, causal and not, and for each kernel in kernels.h (attention_naive, attention_flash)
// records the median time with p10/p90, achieved GFLOP/s (4 B H T^2 D, halved when causal),
// the working memory it allocated, and its max abs error against the double-precision
// reference on a sample of rows. Also measures this machine's sgemm peak (a large square
// cblas_sgemm) so the report can draw it as a ceiling.
// GPU (--backend cuda): naive (cuBLAS), our flash kernel and cuDNN's fused SDPA in fp16 /
// bf16 at the seeds' shape B=4 H=12 T=2048 D=64 and over T sweeps, against the cuBLAS matmul
// ceiling (attention_cuda.h, beside this file); exits 2 without a usable device. With
// --summary it also prints a summary table on stdout: that is `make gpu-check`
// (scripts/gpu_check.sh), which bin/cuda_bench used to run.
//
//   bin/attention_kernels [--quick] [--out DIR] [--threads N] [--t-max N] [--batch N] [--heads N]
//   bin/attention_kernels --backend cuda [--quick] [--out DIR] [--t-max N] [--summary]
//
// Writes under DIR attention_kernels.csv and sgemm_peak.csv, tables of both backends: every
// row starts with its backend, and a run replaces its own backend's rows; merges meta.csv.
#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attention_cuda.h"
#include "bench.h"
#include "common.h"
#include "kernels.h"
#include "lab.h"
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

// Both backends' rows under the same columns; a cell that does not apply to a backend is
// empty (threads on the GPU; the relative error and the rows checked on the CPU).
enum { TABLE_ATTENTION, TABLE_MATMUL_PEAK };
static const LabTable TABLES[] = {
    {"attention_kernels", ATTENTION_COLUMNS,
     "seq_len, causal, impl, shape, dtype -> time, GFLOP/s, memory, error", LAB_BOTH},
    {"sgemm_peak", MATMUL_PEAK_COLUMNS, "the matmul ceiling: cblas_sgemm (CPU), cuBLAS per mode (GPU)", LAB_BOTH},
    {0},
};

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

// The ceiling the report draws: a large square sgemm on the same threads (experiments/lab/peak.h).
static void write_sgemm_peak(LabRun *r, const Settings *st, int threads) {
    int n = st->sgemm_n;
    int reps = reps_for(2.0 * n * n * (double)n * 1e-9, st);
    SgemmPeak p = peak_sgemm(n, reps, reps, 0.0, st->seed);
    CsvWriter w = lab_csv(r, TABLE_MATMUL_PEAK);
    csv_row(&w, "cpu,%d,%d,%d,%.6g,%.6g,%.6g,%.6g,%.6g,fp32", n, threads, p.time.reps, p.time.median_ms,
            p.time.p10_ms, p.time.p90_ms, p.gflop_s_median, p.gflop_s_best);
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

static void sweep(LabRun *r, const Settings *st, int threads) {
    static const struct {
        const char *name;
        AttentionFn fn;
    } impls[] = {{"naive", attention_naive}, {"flash", attention_flash}};
    CsvWriter w = lab_csv(r, TABLE_ATTENTION);
    for (int T = T_MIN; T <= st->t_max; T *= 2) {
        if (!fits_in_memory(T, st, r->hw.mem_bytes)) {
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
                progress("attention_kernels: T = %d, %s, %s", T, s.causal ? "causal" : "full", impls[i].name);
                // The accuracy run doubles as the warm-up.
                for (size_t j = 0; j < n; j++) out[j] = NAN; // an output left unwritten shows as NaN error
                size_t work = impls[i].fn(out, q, k, v, &s);
                double err = max_abs_error(out, ref, &s, rows);
                AttentionCall call = {impls[i].fn, out, q, k, v, s};
                BenchStats b = bench_run(run_attention, &call, 0, reps_for(gflop, st));
                size_t io = 4 * n * sizeof(float);
                csv_row(&w, "cpu,%d,%d,%s,%d,%d,%d,%d,%d,%.6g,%.6g,%.6g,%.6g,%zu,%zu,%.6g,fp32,%zu,,", T, s.causal,
                        impls[i].name, s.B, s.H, s.D, threads, b.reps, b.median_ms, b.p10_ms, b.p90_ms,
                        gflop / (b.median_ms * 1e-3), work, io, err, work + io);
            }
            free(ref);
        }
        free(q);
        free(k);
        free(v);
        free(out);
    }
    csv_close(&w);
}

// --- the GPU ----------------------------------------------------------------------------------

#ifdef INFERLAB_CUDA
// The table `make gpu-check` prints last (--summary).
static void print_summary(const CudaAttentionRun *run) {
    const double *gemm = run->gemm_tflops;
    printf("\n== GPU check summary: %s\n", run->device);
    printf("cuBLAS matmul %d^3, TFLOP/s:", run->gemm_size);
    for (int i = GEMM_FP32; i <= GEMM_BF16; i++) printf("  %s %.1f", gemm_mode_name(i), gemm[i]);
    printf("\n\nattention (B, H, T, D, dtype, causal): time, rate, peak device memory, error vs CPU reference\n");
    printf("%-5s %2s %3s %6s %4s %-4s %6s %10s %8s %10s %9s %9s\n", "impl", "B", "H", "T", "D", "type", "causal",
           "median_ms", "TFLOP/s", "peak_MiB", "max_rel", "%bf16mm");
    for (int i = 0; i < run->n_attn; i++) {
        const CudaAttnMeasured *m = &run->attn[i];
        const CudaAttnShape *s = &m->p.s;
        printf("%-5s %2d %3d %6d %4d %-4s %6d", cuda_attn_impl_name(m->impl), s->B, s->H, s->T, s->D,
               dtype_name(s->dtype), s->causal);
        if (!m->ok) {
            printf("   not run\n");
            continue;
        }
        const CudaAttnResult *r = &m->r;
        printf(" %10.3f %8.1f %10.1f %9.2e %8.1f%%\n", r->time.median_ms, r->tflops, r->peak_bytes / 1048576.0,
               r->max_rel_error, 100.0 * r->tflops / gemm[GEMM_BF16]);
    }
    // each fused kernel against naive, at every point where both ran
    printf("\nspeed-up and memory saving over naive:\n");
    for (int i = 0; i < run->n_attn; i += CUDA_ATTN_COUNT) {
        const CudaAttnMeasured *naive = &run->attn[i + CUDA_ATTN_NAIVE];
        const CudaAttnShape *s = &naive->p.s;
        for (int impl = CUDA_ATTN_FLASH; impl < CUDA_ATTN_COUNT; impl++) {
            const CudaAttnMeasured *m = &run->attn[i + impl];
            if (naive->ok && m->ok)
                printf("  %-5s T=%-6d D=%-4d %s causal=%d: %.1fx faster, %.1fx less memory\n",
                       cuda_attn_impl_name(impl), s->T, s->D, dtype_name(s->dtype), s->causal,
                       naive->r.time.median_ms / m->r.time.median_ms, (double)naive->r.peak_bytes / m->r.peak_bytes);
        }
    }
}
#endif

// --backend cuda: the GPU sweep (attention_cuda.h); lab_main has checked for a device.
static void run_cuda(LabRun *r, int t_max, int summary) {
#ifdef INFERLAB_CUDA
    double start = now_seconds();
    CsvWriter gemm = lab_csv(r, TABLE_MATMUL_PEAK), attention = lab_csv(r, TABLE_ATTENTION);
    CudaAttentionRun run;
    cuda_attention_experiment(r->profile, t_max, &gemm, &attention, &run);
    csv_close(&gemm);
    csv_close(&attention);
    lab_meta(r, "cuda_device", "%s", run.device);
    fprintf(stderr, "attention_kernels: wrote the GPU's rows of %s/attention_kernels.csv and sgemm_peak.csv on %s in "
            "%.1f s\n", r->out_dir, run.device, now_seconds() - start);
    if (summary) print_summary(&run);
    cuda_attention_run_free(&run);
#else
    (void)r, (void)t_max, (void)summary; // lab_main has ended a CUDA run in a build without CUDA
#endif
}

// --- main -------------------------------------------------------------------------------------

static long t_max, batch, heads, seed = -1; // 0 (seed -1): the profile's
static int summary;

static const LabOption OPTIONS[] = {
    {.name = "t-max", .kind = LAB_INT, .value = &t_max, .arg = "N",
     .help = "longest sequence of the sweep (CPU 128, 256, ...: full 16384, quick 256;\n"
     "GPU 512, 1024, ...: full 16384, quick 4096)",
     .min = T_MIN, .max = 1 << 20},
    {.name = "batch", .kind = LAB_INT, .value = &batch, .arg = "N", .help = "batch size B (CPU only; default 1)",
     .min = 1, .max = 1024},
    {.name = "heads", .kind = LAB_INT, .value = &heads, .arg = "N", .help = "heads H (CPU only; full: 4, quick: 2)",
     .min = 1, .max = 1024},
    {.name = "seed", .kind = LAB_INT, .value = &seed, .arg = "N",
     .help = "seed of the random q, k, v (CPU only; default 1)", .min = 0, .max = 1L << 31},
    {.name = "summary", .kind = LAB_FLAG, .value = &summary,
     .help = "with --backend cuda: print a summary table on stdout (make gpu-check)"},
    {0},
};

static int run(LabRun *r) {
    if (r->backend == BACKEND_CUDA) {
        if (batch || heads || seed >= 0)
            cli_usage_error("attention_kernels", "--batch, --heads and --seed apply to the CPU sweep; the GPU's is fixed");
        run_cuda(r, (int)t_max, summary);
        return 0;
    }
    if (summary) cli_usage_error("attention_kernels", "--summary applies to --backend cuda");
    Settings st = settings_for(r->profile);
    if (t_max) st.t_max = (int)t_max;
    if (batch) st.batch = (int)batch;
    if (heads) st.heads = (int)heads;
    if (seed >= 0) st.seed = (unsigned long)seed;
    int threads = omp_get_max_threads();
    lab_meta(r, "attention_kernels_threads", "%d", threads);

    double start = now_seconds();
    write_sgemm_peak(r, &st, threads);
    sweep(r, &st, threads);
    fprintf(stderr, "attention_kernels: wrote %s/attention_kernels.csv in %.1f s\n", r->out_dir, now_seconds() - start);
    return 0;
}

static const Experiment ATTENTION_KERNELS = {
    "attention_kernels", "[options]",
    "Naive vs flash attention on the CPU (or the GPU): time, GFLOP/s, working memory and error vs T.",
    OPTIONS, TABLES, LAB_COMMON | LAB_BACKEND, NULL, run};

int main(int argc, char **argv) { return lab_main(&ATTENTION_KERNELS, argc, argv); }
