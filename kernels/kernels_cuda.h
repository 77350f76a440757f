// kernels_cuda.h: the CUDA backend of inferlab's kernels (kernels/cuda/*.cu), callable from C.
// Built only when nvcc is found (the Makefile then defines INFERLAB_CUDA); C code that uses it
// guards itself with #ifdef INFERLAB_CUDA.
//
// Tensor pointers are device (GPU memory) pointers unless a comment says host; shapes and
// layouts are those of the CPU twins in kernels.h (row-major; a weight w of shape (d, n)
// maps an input row of n to an output row of d). All work runs on the default stream, in
// order; functions that return host data synchronise. Every CUDA and cuBLAS call is checked:
// a failure prints the file and line of the call and exits (llm.c's cudaCheck style).
//
// Usage:
//   char why[256];
//   if (!cuda_available(why, sizeof why)) { printf("skipped: %s\n", why); return; }
//   cuda_init();
//   float *x = cudaMallocCheck(n * sizeof(float));  ... cuda_rmsnorm(x, x, w, T, C, eps) ...
//   cuda_free(x);
//   cuda_shutdown();
#pragma once

#include <stddef.h>

#ifdef __cplusplus
extern "C" { // the C headers below carry no linkage guards of their own
#endif

#include "bench.h"
#include "common.h"
#include "ops.h"

// ---- device, memory, conversion (kernels/cuda/runtime.cu) ---------------------------------
// Element types are ops.h's DType.

// 1 when a CUDA device can be used; otherwise 0 and why (for example the runtime's
// "CUDA driver version is insufficient for CUDA runtime version", or "no CUDA device").
// Safe to call on a machine without a driver: that is a skip, not an error.
int cuda_available(char *why, size_t why_len);

// Select device 0 and create the cuBLAS handle; dies if no device. cuda_shutdown undoes it.
void cuda_init(void);
void cuda_shutdown(void);

// "NVIDIA H200, sm_90, 132 SMs, 140.4 GiB" into buf.
void cuda_device_name(char *buf, size_t len);

// The current device's figures the hardware budget needs.
typedef struct {
    char name[256];      // "NVIDIA H200"
    size_t memory_bytes; // global memory
    size_t l2_bytes;     // L2 cache
    int sm_count, major, minor;
} CudaDeviceInfo;
void cuda_device_info(CudaDeviceInfo *info);

// Device allocations go through a tracking allocator so benchmarks can report the peak
// bytes held, as PyTorch's max_memory_allocated does. cudaMallocCheck dies (naming the
// call site) when the device is out of memory; cuda_try_malloc returns NULL instead.
void *cuda_malloc_at(size_t bytes, const char *file, int line);
#define cudaMallocCheck(bytes) cuda_malloc_at(bytes, __FILE__, __LINE__)
void *cuda_try_malloc(size_t bytes);
void cuda_free(void *p_dev); // NULL is allowed
size_t cuda_allocated_bytes(void);
size_t cuda_peak_bytes(void);
void cuda_reset_peak(void);  // peak := what is allocated now

void cuda_upload(void *dst_dev, const void *src, size_t bytes);
void cuda_download(void *dst, const void *src_dev, size_t bytes);
void cuda_synchronize(void);

// dst[i] = (dst_t) src[i] for n elements, on the device (round to nearest even).
void cuda_convert(void *dst_dev, DType dst_t, const void *src_dev, DType src_t, size_t n);
// Host arrays: float to a dtype and back, via the device (round to nearest even).
void cuda_round_trip(float *x, size_t n, DType t); // x := (float)(t)x
// Fill n elements of type t with N(0, std) numbers from a counter-based generator:
// the same seed gives the same values on every GPU.
void cuda_fill_normal(void *x_dev, DType t, size_t n, float std, unsigned long long seed);

// Time the device work that fn(ctx) enqueues: warmup untimed calls, then reps calls, each
// between its own pair of CUDA events (ms).
BenchStats cuda_bench_run(void (*fn)(void *ctx), void *ctx, int warmup, int reps);

// ---- device memory bandwidth (kernels/cuda/stream.cu) --------------------------------------

// STREAM's copy (c = a, 16 n bytes per pass) and triad (a = b + s c, 24 n bytes), the kernels
// of experiments/lab/peak.h, on three device arrays of n doubles: warmup untimed passes,
// then reps passes each between its own pair of CUDA events (ms); then every element of the
// result is checked (a wrong value dies). triad: 0 copy, 1 triad.
BenchStats cuda_stream_bench(int triad, size_t n, int warmup, int reps);

// ---- pointwise and row kernels, fp32 (kernels/cuda/pointwise.cu) --------------------------
// Same contracts as the CPU kernels in kernels.h, with device pointers.

void cuda_rmsnorm(float *out, const float *x, const float *weight, int T, int C, float eps);
void cuda_softmax_rows(float *x, int rows, int n);
void cuda_glu(float *out, const float *gate, const float *up, int T, int H, GluAct act);
// x += y, n elements (the residual adds).
void cuda_add(float *x, const float *y, size_t n);
// x *= a, n elements.
void cuda_scale(float *x, float a, size_t n);
// rope_rotate for R rows at once: row r of x (R, n_heads * head_dim) is at position pos[r];
// only the last rot_dim dims of each head turn (rot_dim = head_dim: all of it, ops.h's rope).
// pos (R) and inv_freq (rot_dim / 2) are device arrays.
void cuda_rope(float *x, int R, int n_heads, int head_dim, int rot_dim, const int *pos, const float *inv_freq,
               float mscale, RopeStyle style);
// out (R, C) fp32 = rows tokens[r] of table (V, C) of type t; tokens is a device array.
void cuda_embedding(float *out, const void *table, DType t, const int *tokens, int R, int C);
// out[r] = index of the largest element of row r of x (rows, n) (first one on ties);
// out is a device array. Greedy decoding without copying the logits back.
void cuda_argmax_rows(int *out, const float *x, int rows, int n);

// ---- matmul: cuBLAS wrappers (kernels/cuda/gemm.cu) -----------------------------------------

// Precision of a matmul: its inputs' storage type and its math. Output and accumulation are fp32.
//   FP32  fp32 inputs, fp32 FMA (the CPU's numbers, to 1e-4)
//   TF32  fp32 inputs, tensor cores rounding inputs to TF32 (10-bit mantissa)
//   FP16  fp16 inputs, tensor cores
//   BF16  bf16 inputs, tensor cores
typedef enum { GEMM_FP32 = 0, GEMM_TF32, GEMM_FP16, GEMM_BF16 } GemmMode;

const char *gemm_mode_name(GemmMode m); // "fp32", "tf32", "fp16", "bf16"
int gemm_mode_from_name(const char *name); // -1 on an unknown name
DType gemm_input_dtype(GemmMode m);

// out (T, d) fp32 = x (T, n) @ w (d, n)^T; x and w in gemm_input_dtype(mode).
void cuda_matmul(float *out, const void *x, const void *w, int T, int n, int d, GemmMode mode);

// The rate of an (M, N, K) matmul in this mode on random inputs: warmup untimed calls, then
// reps timed with CUDA events. flops = 2 M N K. Returns TFLOP/s at the median time.
double cuda_matmul_bench(GemmMode mode, int M, int N, int K, int warmup, int reps, BenchStats *time);

// ---- model attention against KV caches, fp32 (kernels/cuda/attention_kv.cu) ---------------

// attention_kv for R query rows that may belong to different sequences (a batched decode
// step, or the rows of one prefill chunk): row r of q (R, n_heads, head_dim) is at position
// pos[r] and attends to keys 0 .. pos[r] (window and sinks as in attention_visible, and
// StreamingLLM's position rule when shape->cache_positions) stored in keys[r], values[r],
// rows of the shape's key / value strides (ops.h's AttentionShape), position j at row
// kv_layout_row(layouts[r], j) (j when layouts is NULL). pos, keys, values and layouts are
// device arrays (keys and values of device pointers). out (R, n_heads, value_dim). Any
// head_dim; online softmax over key chunks, so no score buffer grows with the context; only
// visible keys are read.
void cuda_attention_rows(float *out, const float *q, float *const *keys, float *const *values,
                         const int *pos, const KVLayout *layouts, int R, const AttentionShape *shape);

// Write row r of k and v (R, kv_dim) at position pos[r] of keys[r] / values[r] (at its row
// in layouts[r]; device arrays as above): appending a step's keys and values to each
// sequence's cache. v = NULL writes the keys only (values that live in the key rows).
void cuda_kv_append(float *const *keys, float *const *values, const float *k, const float *v,
                    const int *pos, const KVLayout *layouts, int R, int kv_dim);

// ---- full-sequence attention: naive vs flash (project 15) ----------------------------------
// q, k, v, out: (B, H, T, D) contiguous on the device, all of one dtype, 16-byte aligned
// (as cudaMallocCheck returns them); scale 1/sqrt(D); causal: query t sees keys j <= t.

// Naive (kernels/cuda/attention_naive.cu), as PyTorch code without a fused kernel runs it:
// scores S = scale Q K^T by a cuBLAS strided-batched GEMM into a (B, H, T, T) buffer, a
// softmax kernel (with the causal mask) into a second (B, H, T, T) buffer P, then O = P V by
// another batched GEMM. Any D, fp32 / fp16 / bf16 (S and P in that dtype; fp32 accumulation).
// workspace: cuda_attention_naive_workspace() bytes (S and P).
size_t cuda_attention_naive_workspace(int B, int H, int T, DType t);
void cuda_attention_naive(void *out, const void *q, const void *k, const void *v, void *workspace,
                          int B, int H, int T, int D, DType t, int causal);

// Flash (kernels/cuda/attention_flash.cu): our FlashAttention-2-style forward kernel. Each
// block takes 64 queries of one (b, h) and streams 64-key tiles of K and V through shared
// memory (double-buffered with cp.async); tensor-core MMAs (mma.sync m16n8k16, fp32
// accumulation) compute the scores and P V; an online softmax (running max and sum per
// row) keeps O exact without storing scores; causal runs skip tiles above the diagonal.
// No workspace.
// Supports fp16 and bf16 with D = 64 or 128: cuda_attention_flash_supported says so.
int cuda_attention_flash_supported(int D, DType t);
void cuda_attention_flash(void *out, const void *q, const void *k, const void *v, int B, int H,
                          int T, int D, DType t, int causal);

// cuDNN (kernels/cuda/attention_cudnn.cu): the vendor's fused attention, the analogue of
// PyTorch's SDPA, driven from C through cuDNN's backend descriptor API: a graph of the one
// CUDNN_BACKEND_OPERATION_SDPA_FWD_DESCRIPTOR node (cuDNN >= 9.13), whose engine the
// heuristics pick. fp16 / bf16, D a multiple of 8 up to 128, and no causal mask: cuDNN 9.19's
// node has no mask attribute (its element-wise score-modifier subgraph arrives in 9.21), and
// the alternative, the primitive-operation graph cudnn-frontend builds for its C++ users, is
// not reproduced here (see the .cu file). Built as a stub when cudnn.h is not found.
// Building a plan is slow next to a call (an engine may compile its kernel at run time), so
// it is made once per shape:
//   CudnnAttention *p = cuda_attention_cudnn_plan(B, H, T, D, DTYPE_F16, 0, &err); // NULL: err says why
//   void *ws = cudaMallocCheck(cuda_attention_cudnn_workspace(p));
//   cuda_attention_cudnn(p, out, q, k, v, ws); ...
//   cuda_attention_cudnn_free(p);
typedef struct CudnnAttention CudnnAttention;
// 1 when this build's cuDNN can run the shape; else 0 and why.
int cuda_attention_cudnn_supported(int D, DType t, int causal, char *why, size_t why_len);
CudnnAttention *cuda_attention_cudnn_plan(int B, int H, int T, int D, DType t, int causal, Error *err);
size_t cuda_attention_cudnn_workspace(const CudnnAttention *p); // bytes the plan needs (may be 0)
void cuda_attention_cudnn(CudnnAttention *p, void *out, const void *q, const void *k, const void *v,
                          void *workspace);
void cuda_attention_cudnn_free(CudnnAttention *p); // NULL is allowed

#ifdef __cplusplus
}
#endif
