// cuda_bench.c: bin/cuda_bench, the GPU measurements behind `make gpu-check`
// (scripts/gpu_check.sh).
//
//   bin/cuda_bench [--out DIR] [--quick] [--max-t N]
//
// Full-sequence attention on the GPU, naive (cuBLAS GEMMs around a softmax kernel, the
// (B, H, T, T) scores and probabilities materialised) against our flash kernel: at the
// seeds' shape B=4 H=12 T=2048 D=64 in fp16 (causal and not), in bf16 and at D=128, and a
// causal fp16 sweep of T up to --max-t (16384; 4096 with --quick). Each point: median time
// from CUDA events after warm-up, TFLOP/s, peak device memory (q, k, v, out and workspace),
// and the error against the CPU's double-precision reference on 32 query rows. Then the
// cuBLAS matmul rate in fp32, tf32, fp16 and bf16: the card's measured tensor-core ceiling
// that the flash kernel's TFLOP/s is set against. Writes under --out:
//   cuda_attention.csv  impl, dtype, causal, batch, heads, seq_len, head_dim -> times, TFLOP/s, memory, error
//   cuda_gemm.csv       mode, m, n, k -> times, TFLOP/s
// and prints a summary table on stdout. Exits 2 when there is no usable device (or the
// build has no CUDA), so a script can tell "not run" from "failed".
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "common.h"

#ifdef INFERLAB_CUDA

#include "csv.h"
#include "kernels_cuda.h"
#include "meta.h"

typedef struct {
    int B, H, T, D;
    CudaDtype dtype;
    int causal;
    int seeds; // one of the seeds' comparisons (summarised first)
} Point;

typedef struct {
    Point p;
    CudaAttnImpl impl;
    int ok;
    CudaAttnResult r;
} Measured;

// The seeds' shape and its variants, then the rest of the causal fp16 T sweep.
static int attention_points(Point *out, int max, int max_t) {
    Point fixed[] = {{4, 12, 2048, 64, CUDA_FP16, 0, 1}, {4, 12, 2048, 64, CUDA_FP16, 1, 1},
                     {4, 12, 2048, 64, CUDA_BF16, 1, 1}, {4, 6, 2048, 128, CUDA_FP16, 1, 1}};
    int n = 0;
    for (size_t i = 0; i < sizeof fixed / sizeof fixed[0] && n < max; i++) out[n++] = fixed[i];
    for (int T = 512; T <= max_t && n < max; T *= 2)
        if (T != 2048) out[n++] = (Point){4, 12, T, 64, CUDA_FP16, 1, 0}; // 2048 is a seeds' point already
    return n;
}

static void print_summary(const char *device, const Measured *m, int n, const double *gemm_tflops, int gemm_size) {
    printf("\n== GPU check summary: %s\n", device);
    printf("cuBLAS matmul %d^3, TFLOP/s:", gemm_size);
    for (int i = GEMM_FP32; i <= GEMM_BF16; i++) printf("  %s %.1f", gemm_mode_name(i), gemm_tflops[i]);
    printf("\n\nattention (B, H, T, D, dtype, causal): time, rate, peak device memory, error vs CPU reference\n");
    printf("%-5s %2s %3s %6s %4s %-4s %6s %10s %8s %10s %9s %9s\n", "impl", "B", "H", "T", "D", "type", "causal",
           "median_ms", "TFLOP/s", "peak_MiB", "max_rel", "%bf16mm");
    for (int i = 0; i < n; i++) {
        const Point *p = &m[i].p;
        if (!m[i].ok) {
            printf("%-5s %2d %3d %6d %4d %-4s %6d   not run\n", cuda_attn_impl_name(m[i].impl), p->B, p->H, p->T, p->D,
                   cuda_dtype_name(p->dtype), p->causal);
            continue;
        }
        const CudaAttnResult *r = &m[i].r;
        printf("%-5s %2d %3d %6d %4d %-4s %6d %10.3f %8.1f %10.1f %9.2e %8.1f%%\n", cuda_attn_impl_name(m[i].impl), p->B,
               p->H, p->T, p->D, cuda_dtype_name(p->dtype), p->causal, r->time.median_ms, r->tflops,
               r->peak_bytes / 1048576.0, r->max_rel_error, 100.0 * r->tflops / gemm_tflops[GEMM_BF16]);
    }
    // naive / flash at every point both ran
    printf("\nflash speed-up and memory saving over naive:\n");
    for (int i = 0; i + 1 < n; i += 2)
        if (m[i].ok && m[i + 1].ok)
            printf("  T=%-6d D=%-4d %s causal=%d: %.1fx faster, %.1fx less memory\n", m[i].p.T, m[i].p.D,
                   cuda_dtype_name(m[i].p.dtype), m[i].p.causal, m[i].r.time.median_ms / m[i + 1].r.time.median_ms,
                   (double)m[i].r.peak_bytes / m[i + 1].r.peak_bytes);
}

// The measurements and the summary; 2 when no device can be used.
static int run(const CliCommon *common, int max_t) {
    Error err;
    int quick = strcmp(common->profile, "quick") == 0;
    int warmup = quick ? 1 : 3, reps = quick ? 3 : 10, gemm_size = quick ? 4096 : 8192;
    char why[256];
    if (!cuda_available(why, sizeof why)) {
        fprintf(stderr, "cuda_bench: not run: %s\n", why);
        return 2;
    }
    cuda_init();
    char device[256];
    cuda_device_name(device, sizeof device);
    if (meta_make_dir(common->out_dir, &err) != 0) die("%s", err.msg);

    char path[1024];
    snprintf(path, sizeof path, "%s/cuda_gemm.csv", common->out_dir);
    CsvWriter gemm_csv = csv_open(path, "mode,m,n,k,median_ms,p10_ms,p90_ms,reps,tflop_s");
    BenchStats gemm_time[4];
    double gemm_tflops[4];
    for (int mode = GEMM_FP32; mode <= GEMM_BF16; mode++) {
        cli_progress("cuda_bench: %s matmul", gemm_mode_name(mode));
        gemm_tflops[mode] = cuda_matmul_bench(mode, gemm_size, gemm_size, gemm_size, warmup, reps, &gemm_time[mode]);
        csv_row(&gemm_csv, "%s,%d,%d,%d,%.6g,%.6g,%.6g,%d,%.6g", gemm_mode_name(mode), gemm_size, gemm_size, gemm_size,
                gemm_time[mode].median_ms, gemm_time[mode].p10_ms, gemm_time[mode].p90_ms, gemm_time[mode].reps,
                gemm_tflops[mode]);
    }
    csv_close(&gemm_csv);

    enum { MAX_POINTS = 32 };
    Point points[MAX_POINTS];
    int n = attention_points(points, MAX_POINTS, max_t);
    Measured *m = callocCheck(2 * (size_t)n, sizeof(Measured));
    snprintf(path, sizeof path, "%s/cuda_attention.csv", common->out_dir);
    CsvWriter att_csv = csv_open(path, "impl,dtype,causal,batch,heads,seq_len,head_dim,median_ms,p10_ms,p90_ms,reps,"
                                       "tflop_s,peak_bytes,max_abs_error,max_rel_error,rows_checked");
    for (int i = 0; i < n; i++)
        for (int impl = CUDA_ATTN_NAIVE; impl <= CUDA_ATTN_FLASH; impl++) {
            Measured *x = &m[2 * i + impl];
            const Point *p = &points[i];
            x->p = *p;
            x->impl = impl;
            cli_progress("cuda_bench: %s attention T=%d D=%d %s causal=%d", cuda_attn_impl_name(impl), p->T, p->D,
                         cuda_dtype_name(p->dtype), p->causal);
            CudaAttnShape s = {p->B, p->H, p->T, p->D, p->dtype, p->causal};
            if (cuda_attention_bench(impl, &s, warmup, reps, 1234, &x->r, &err) != 0) {
                cli_progress_done();
                fprintf(stderr, "cuda_bench: skipped: %s\n", err.msg);
                continue;
            }
            x->ok = 1;
            const CudaAttnResult *r = &x->r;
            csv_row(&att_csv, "%s,%s,%d,%d,%d,%d,%d,%.6g,%.6g,%.6g,%d,%.6g,%zu,%.6g,%.6g,%d", cuda_attn_impl_name(impl),
                    cuda_dtype_name(p->dtype), p->causal, p->B, p->H, p->T, p->D, r->time.median_ms, r->time.p10_ms,
                    r->time.p90_ms, r->time.reps, r->tflops, r->peak_bytes, r->max_abs_error, r->max_rel_error,
                    r->rows_checked);
        }
    csv_close(&att_csv);
    cli_progress_done();

    HwInfo hw;
    hw_probe(&hw);
    MetaEntry extra[] = {{"cuda_device", device}};
    if (meta_write(common->out_dir, &hw, common->profile, extra, 1, &err) != 0) die("%s", err.msg);
    print_summary(device, m, 2 * n, gemm_tflops, gemm_size);
    free(m);
    cuda_shutdown();
    return 0;
}

#else // built without CUDA

static int run(const CliCommon *common, int max_t) {
    (void)common;
    (void)max_t;
    fprintf(stderr, "cuda_bench: not run: built without CUDA (CUDA=0 or no nvcc)\n");
    return 2;
}

#endif

int main(int argc, char **argv) {
    static const struct option opts[] = {CLI_COMMON_OPTIONS, {"max-t", required_argument, 0, 'T'}, {0, 0, 0, 0}};
    CliCommon common;
    cli_common_defaults(&common);
    long max_t = 0;
    Error err;
    for (int c; (c = getopt_long(argc, argv, "", opts, NULL)) != -1;) {
        if (c == 'T') {
            if (cli_parse_long("--max-t", optarg, 512, 1 << 20, &max_t, &err)) cli_usage_error("cuda_bench", err.msg);
        } else if (cli_common_option(&common, c, optarg, &err) != 1) {
            cli_usage_error("cuda_bench", c == '?' ? "unknown option" : err.msg);
        }
    }
    if (common.help) {
        printf("usage: bin/cuda_bench [options]\n"
               "  --max-t N        longest sequence of the attention sweep (default 16384, quick 4096)\n" CLI_COMMON_HELP);
        return 0;
    }
    if (optind < argc) cli_usage_error("cuda_bench", "unexpected argument");
    if (!max_t) max_t = strcmp(common.profile, "quick") == 0 ? 4096 : 16384;
    return run(&common, (int)max_t);
}

