// cuda_common.h: what every .cu file of the CUDA backend shares (C++, nvcc only): checked
// CUDA and cuBLAS calls that name the file and line of the call on failure (llm.c's
// cudaCheck / cublasCheck), the shared cuBLAS handle, element-type helpers usable in
// templates, and launch-size arithmetic.
#pragma once

#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include "kernels_cuda.h"

void cuda_check(cudaError_t err, const char *file, int line);
void cublas_check(cublasStatus_t status, const char *file, int line);
#define cudaCheck(call) cuda_check((call), __FILE__, __LINE__)
#define cublasCheck(call) cublas_check((call), __FILE__, __LINE__)
// After a kernel launch: catches bad launch configurations at the launch site.
#define cudaCheckLaunch() cuda_check(cudaGetLastError(), __FILE__, __LINE__)

// The handle cuda_init created; dies if cuda_init was not called.
cublasHandle_t cuda_cublas(void);

static inline unsigned ceil_div(size_t n, size_t d) { return (unsigned)((n + d - 1) / d); }

// Blocks of 256 threads for an elementwise grid-stride loop over n: enough to fill the GPU,
// capped so huge n loops instead of launching millions of blocks.
static inline unsigned elementwise_blocks(size_t n) {
    unsigned b = ceil_div(n, 256);
    return b < 1 ? 1 : (b > 65536 ? 65536 : b);
}
#define GRID_STRIDE_LOOP(i, n) \
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < (n); i += (size_t)gridDim.x * blockDim.x)

// Element access for kernels templated on the storage type: compute in fp32 always.
__device__ __forceinline__ float to_float(float x) { return x; }
__device__ __forceinline__ float to_float(__half x) { return __half2float(x); }
__device__ __forceinline__ float to_float(__nv_bfloat16 x) { return __bfloat162float(x); }

template <typename T> __device__ __forceinline__ T from_float(float x);
template <> __device__ __forceinline__ float from_float<float>(float x) { return x; }
template <> __device__ __forceinline__ __half from_float<__half>(float x) { return __float2half_rn(x); }
template <> __device__ __forceinline__ __nv_bfloat16 from_float<__nv_bfloat16>(float x) {
    return __float2bfloat16_rn(x);
}

// cudaDataType of a storage type, for cuBLAS.
static inline cudaDataType_t cuda_data_type(DType t) {
    return t == DTYPE_F16 ? CUDA_R_16F : t == DTYPE_BF16 ? CUDA_R_16BF : CUDA_R_32F;
}

// Sum (MAX = false) or max (MAX = true) over a warp, every lane receiving the result.
template <bool MAX> __device__ __forceinline__ float warp_reduce(float v) {
    for (int o = 16; o > 0; o >>= 1) {
        float w = __shfl_xor_sync(0xffffffffu, v, o);
        v = MAX ? fmaxf(v, w) : v + w;
    }
    return v;
}

// The same over a block of blockDim.x threads (a multiple of 32, at most 1024), every thread
// receiving the result. scratch: 32 floats of shared memory, reusable after the call.
template <bool MAX> __device__ __forceinline__ float block_reduce(float v, float *scratch) {
    int lane = threadIdx.x % 32, warp = threadIdx.x / 32, n_warps = blockDim.x / 32;
    v = warp_reduce<MAX>(v);
    __syncthreads(); // scratch may still be read by a previous call
    if (lane == 0) scratch[warp] = v;
    __syncthreads();
    v = lane < n_warps ? scratch[lane] : (MAX ? -INFINITY : 0.0f);
    return warp_reduce<MAX>(v);
}

// Softmax of each row of in (rows, n) into out, both of type t (in place is allowed), in fp32.
// causal_period > 0 treats the rows as stacked (T, T) score matrices with T = causal_period:
// row r sees columns j <= r % T, and the rest get probability 0 (pointwise.cu).
void softmax_rows_launch(void *out, const void *in, DType t, int rows, int n, int causal_period);
