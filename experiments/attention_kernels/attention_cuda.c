// attention_cuda.c: the GPU half of project 15 (see attention_cuda.h): the sweep's points,
// the matmul ceiling, the attention measurements and their CSVs. Compiled only with CUDA
// (INFERLAB_CUDA).
#ifdef INFERLAB_CUDA

#include "attention_cuda.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "progress.h"

enum { MAX_POINTS = 64, SEED = 1234 };

// Repetitions and sizes per profile.
typedef struct {
    int warmup, reps, gemm_size, max_t;
} Settings;

static Settings settings_for(const char *profile) {
    if (strcmp(profile, "quick") == 0) return (Settings){.warmup = 1, .reps = 3, .gemm_size = 4096, .max_t = 4096};
    return (Settings){.warmup = 3, .reps = 10, .gemm_size = 8192, .max_t = 16384};
}

int cuda_attention_points(CudaAttnPoint *out, int max, int max_t) {
    const CudaAttnPoint fixed[] = {
        {.s = {.B = 4, .H = 12, .T = 2048, .D = 64, .dtype = DTYPE_F16, .causal = 0}, .seeds = 1},
        {.s = {.B = 4, .H = 12, .T = 2048, .D = 64, .dtype = DTYPE_F16, .causal = 1}, .seeds = 1},
        {.s = {.B = 4, .H = 12, .T = 2048, .D = 64, .dtype = DTYPE_BF16, .causal = 1}, .seeds = 1},
        {.s = {.B = 4, .H = 6, .T = 2048, .D = 128, .dtype = DTYPE_F16, .causal = 1}, .seeds = 1},
    };
    int n = 0;
    for (size_t i = 0; i < sizeof fixed / sizeof fixed[0] && n < max; i++) out[n++] = fixed[i];
    for (int causal = 0; causal <= 1; causal++)
        for (int T = 512; T <= max_t && n < max; T *= 2)
            if (T != 2048) // T = 2048 is among the seeds' points above
                out[n++] = (CudaAttnPoint){.s = {.B = 4, .H = 12, .T = T, .D = 64, .dtype = DTYPE_F16, .causal = causal},
                                           .seeds = 0};
    return n;
}

// sgemm_peak.csv's GPU rows: the cuBLAS matmul rate in every mode at size^3.
static void measure_gemm(CsvWriter *w, const Settings *st, CudaAttentionRun *run) {
    int n = run->gemm_size = st->gemm_size;
    for (int mode = GEMM_FP32; mode <= GEMM_BF16; mode++) {
        progress("cuda: %s matmul %d^3", gemm_mode_name(mode), n);
        BenchStats t;
        run->gemm_tflops[mode] = cuda_matmul_bench(mode, n, n, n, st->warmup, st->reps, &t);
        double gflop = 2.0 * n * (double)n * n * 1e-9;
        csv_row(w, "cuda,%d,,%d,%.6g,%.6g,%.6g,%.6g,%.6g,%s", n, t.reps, t.median_ms, t.p10_ms, t.p90_ms,
                1e3 * run->gemm_tflops[mode], gflop / (t.min_ms * 1e-3), gemm_mode_name(mode));
    }
}

// attention_kernels.csv's GPU rows: every implementation at every point it can run. The
// workspace is the peak device memory beyond q, k, v and out.
static void measure_attention(CsvWriter *w, const Settings *st, int max_t, CudaAttentionRun *run) {
    CudaAttnPoint points[MAX_POINTS];
    int n = cuda_attention_points(points, MAX_POINTS, max_t);
    run->n_attn = n * CUDA_ATTN_COUNT;
    run->attn = callocCheck((size_t)run->n_attn, sizeof(CudaAttnMeasured));
    for (int i = 0; i < n; i++)
        for (int impl = 0; impl < CUDA_ATTN_COUNT; impl++) {
            CudaAttnMeasured *m = &run->attn[i * CUDA_ATTN_COUNT + impl];
            const CudaAttnShape *s = &points[i].s;
            m->p = points[i];
            m->impl = impl;
            progress("cuda: %s attention T=%d D=%d %s causal=%d", cuda_attn_impl_name(impl), s->T, s->D,
                         dtype_name(s->dtype), s->causal);
            Error err;
            if (cuda_attention_bench(impl, s, st->warmup, st->reps, SEED, &m->r, &err) != 0) {
                progress_done();
                fprintf(stderr, "cuda: skipped: %s\n", err.msg);
                continue;
            }
            m->ok = 1;
            const CudaAttnResult *r = &m->r;
            size_t io = 4 * (size_t)s->B * s->H * s->T * s->D * dtype_size(s->dtype);
            size_t work = r->peak_bytes > io ? r->peak_bytes - io : 0;
            csv_row(w, "cuda,%d,%d,%s,%d,%d,%d,,%d,%.6g,%.6g,%.6g,%.6g,%zu,%zu,%.6g,%s,%zu,%.6g,%d", s->T, s->causal,
                    cuda_attn_impl_name(impl), s->B, s->H, s->D, r->time.reps, r->time.median_ms, r->time.p10_ms,
                    r->time.p90_ms, 1e3 * r->tflops, work, io, r->max_abs_error, dtype_name(s->dtype),
                    r->peak_bytes, r->max_rel_error, r->rows_checked);
        }
    progress_done();
}

void cuda_attention_experiment(const char *profile, int max_t, CsvWriter *gemm, CsvWriter *attention,
                               CudaAttentionRun *run) {
    memset(run, 0, sizeof *run);
    Settings st = settings_for(profile);
    if (max_t <= 0) max_t = st.max_t;
    cuda_init();
    cuda_device_name(run->device, sizeof run->device);
    measure_gemm(gemm, &st, run);
    measure_attention(attention, &st, max_t, run);
    cuda_shutdown();
}

void cuda_attention_run_free(CudaAttentionRun *run) {
    free(run->attn);
    run->attn = NULL;
    run->n_attn = 0;
}

#endif // INFERLAB_CUDA
