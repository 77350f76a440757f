// attention_bench.h: one measurement of a full-sequence attention implementation on the GPU
// (attention_bench.cu, beside this file): the benchmark behind attention_kernels --backend
// cuda. It drives the CUDA backend's naive, flash and cuDNN attention (kernels_cuda.h) and
// belongs to this experiment, not to the kernels. Available only when built with CUDA
// (INFERLAB_CUDA); the Makefile compiles the .cu files of an experiment's directory with nvcc
// and links them into its program.
//
//   CudaAttnShape s = {4, 12, 2048, 64, DTYPE_F16, 1};
//   CudaAttnResult r;
//   if (cuda_attention_bench(CUDA_ATTN_FLASH, &s, 2, 10, 42, &r, &err)) ... err.msg ...
#pragma once

#include "kernels_cuda.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum { CUDA_ATTN_NAIVE = 0, CUDA_ATTN_FLASH, CUDA_ATTN_CUDNN, CUDA_ATTN_COUNT } CudaAttnImpl;
const char *cuda_attn_impl_name(CudaAttnImpl impl); // "naive", "flash", "cudnn"

typedef struct {
    int B, H, T, D;
    DType dtype;
    int causal;
} CudaAttnShape;

typedef struct {
    BenchStats time;      // CUDA-event times of one call after warm-up, ms
    double flops;         // 4 B H T^2 D, halved when causal (the work a causal kernel must do)
    double tflops;        // flops / median time
    size_t peak_bytes;    // peak device bytes held while it ran: q, k, v, out and its workspace (cuDNN's
                          // handle and plan hold device memory of their own, not counted)
    double max_abs_error; // vs the double-precision CPU reference on the inputs as rounded
    double max_rel_error; // max_abs_error / max |reference|
    int rows_checked;     // query rows compared (a spread sample: the whole reference is O(T^2))
} CudaAttnResult;

// Random N(0, 1) q, k, v of the shape (from seed), warmup untimed calls, reps timed calls,
// then the error check. cuDNN's plan is built before the warm-up, outside the timing.
// Returns 0, or -1 with err set when the implementation does not support the shape or it
// does not fit in device memory (nothing is left allocated).
int cuda_attention_bench(CudaAttnImpl impl, const CudaAttnShape *s, int warmup, int reps,
                         unsigned long long seed, CudaAttnResult *r, Error *err);

#ifdef __cplusplus
}
#endif
