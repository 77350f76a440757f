// attention_cuda.h: the GPU half of project 15 (attention_cuda.c), the body of
// `bin/attention_kernels --backend cuda` (run by `make report` on a machine with a GPU, and
// by `make gpu-check` with --summary).
//
// Full-sequence attention, naive (cuBLAS GEMMs around a softmax kernel, the (B, H, T, T)
// scores and probabilities materialised) against our flash kernel and cuDNN's fused SDPA,
// through cuda_attention_bench (attention_bench.h): at the seeds' shape B=4 H=12 T=2048 D=64 in
// fp16 (without and with the causal mask), in bf16 and at D=128, then fp16 T sweeps from 512
// to max_t, without and with the mask. A point an implementation cannot run (cuDNN under a
// causal mask, a naive matrix that does not fit) is left out of the CSV and reported on
// stderr. Then the cuBLAS matmul rate in fp32, tf32, fp16 and bf16: the card's measured
// ceiling for the attention kernels' rate. Writes the GPU's rows (backend cuda) of the two
// tables the CPU's sweep writes too, under the same columns:
//   attention_kernels.csv  ATTENTION_COLUMNS: time, GFLOP/s, workspace and peak device memory, error
//   sgemm_peak.csv         MATMUL_PEAK_COLUMNS: times, GFLOP/s, per mode
// The shared column lists are here, where the CUDA build and the CPU's main.c both see them.
// The measurements are available only when built with CUDA (INFERLAB_CUDA).
//
//   CudaAttentionRun run;
//   cuda_attention_experiment("quick", 0, &gemm_csv, &attention_csv, &run);
//   ... run.device, run.attn[i] ...
//   cuda_attention_run_free(&run);
#pragma once

#define ATTENTION_COLUMNS                                                                                    \
    "backend,seq_len,causal,impl,batch,heads,head_dim,threads,reps,time_ms_median,time_ms_p10,time_ms_p90,"     \
    "gflop_s,work_bytes,io_bytes,max_abs_err,dtype,peak_bytes,max_rel_err,rows_checked"
#define MATMUL_PEAK_COLUMNS "backend,n,threads,reps,time_ms_median,time_ms_p10,time_ms_p90,gflop_s,gflop_s_best,mode"

#ifdef INFERLAB_CUDA

#include "attention_bench.h"
#include "csv.h"
#include "kernels_cuda.h"

typedef struct {
    CudaAttnShape s;
    int seeds; // one of the seeds' comparisons at T = 2048 (summarised first)
} CudaAttnPoint;

typedef struct {
    CudaAttnPoint p;
    CudaAttnImpl impl;
    int ok; // 0: the implementation could not run this point
    CudaAttnResult r;
} CudaAttnMeasured;

typedef struct {
    char device[256];                 // cuda_device_name
    int gemm_size;                    // side of the square matmuls
    double gemm_tflops[GEMM_BF16 + 1]; // by GemmMode
    CudaAttnMeasured *attn;           // point-major: point i's implementation j at i * CUDA_ATTN_COUNT + j
    int n_attn;
} CudaAttentionRun;

// The sweep's points (at most max) for a longest sequence max_t; returns their number.
int cuda_attention_points(CudaAttnPoint *out, int max, int max_t);

// Measure everything above on a device that can be used (backend_require) and write the
// rows; max_t 0 is the profile's (16384, quick 4096). Calls cuda_init and cuda_shutdown itself.
void cuda_attention_experiment(const char *profile, int max_t, CsvWriter *gemm, CsvWriter *attention,
                               CudaAttentionRun *run);
void cuda_attention_run_free(CudaAttentionRun *run);

#endif // INFERLAB_CUDA
