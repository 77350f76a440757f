// cuda_bench.c: bin/cuda_bench, the GPU measurements behind `make gpu-check`
// (scripts/gpu_check.sh).
//
//   bin/cuda_bench [--out DIR] [--quick] [--max-t N]
//
// The same measurements as `bin/attention_kernels --backend cuda` (experiments/engine/
// attention_cuda.h): full-sequence attention on the GPU, naive (cuBLAS GEMMs around a softmax
// kernel, the (B, H, T, T) scores and probabilities materialised) against our flash kernel
// and cuDNN's fused SDPA, at the seeds' shape B=4 H=12 T=2048 D=64 in fp16 (causal and not),
// in bf16 and at D=128, and fp16 sweeps of T up to --max-t (16384; 4096 with --quick). Each
// point: median time from CUDA events after warm-up, TFLOP/s, peak device memory (q, k, v,
// out and workspace), and the error against the CPU's double-precision reference on 32 query
// rows. Then the cuBLAS matmul rate in fp32, tf32, fp16 and bf16: the card's measured
// tensor-core ceiling that the kernels' TFLOP/s is set against. Writes under --out:
//   cuda_attention.csv  backend, impl, dtype, causal, batch, heads, seq_len, head_dim -> times, TFLOP/s, memory, error
//   cuda_gemm.csv       backend, mode, m, n, k -> times, TFLOP/s
// and, unlike attention_kernels, prints a summary table on stdout. Exits 2 when there is no
// usable device (or the build has no CUDA), so a script can tell "not run" from "failed".
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "common.h"

#ifdef INFERLAB_CUDA

#include "attention_cuda.h"

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

// The measurements and the summary; 2 when no device can be used.
static int run(const CliCommon *common, int max_t) {
    CudaAttentionRun r;
    char why[256];
    if (cuda_attention_experiment(common->out_dir, common->profile, max_t, &r, why, sizeof why) == 2) {
        fprintf(stderr, "cuda_bench: not run: %s\n", why);
        return 2;
    }
    print_summary(&r);
    cuda_attention_run_free(&r);
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
    return run(&common, (int)max_t); // 0: the profile's
}

