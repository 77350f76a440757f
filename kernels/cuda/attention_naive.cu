// attention_naive.cu: full-sequence attention the way unfused framework code runs it (see
// kernels_cuda.h): two cuBLAS strided-batched GEMMs around a softmax kernel, with the whole
// (B, H, T, T) score matrix and probability matrix materialised in device memory. Its time
// and memory are the baseline the flash kernel is measured against.
#include <math.h>

#include "cuda_common.h"

size_t cuda_attention_naive_workspace(int B, int H, int T, DType t) {
    return 2 * (size_t)B * H * T * T * dtype_size(t); // S and P
}

// Row-major (T, D) tensors read column-major are their transposes, so (as in cuda_matmul):
//   S^T (T keys x T queries) = K Q^T   -> GEMM(OP_T on K, OP_N on Q), ld = D, into ld = T
//   O^T (D x T)              = V^T P^T -> GEMM(OP_N on V, OP_N on P), V ld = D, P ld = T
// with one (b, h) pair per batch entry, T * D (or T * T) elements apart.
void cuda_attention_naive(void *out, const void *q, const void *k, const void *v, void *workspace, int B, int H,
                          int T, int D, DType t, int causal) {
    cublasHandle_t handle = cuda_cublas();
    cudaDataType_t type = cuda_data_type(t);
    long long td = (long long)T * D, tt = (long long)T * T;
    int batch = B * H;
    void *S = workspace, *P = (char *)workspace + (size_t)batch * tt * dtype_size(t);
    const float scale = 1.0f / sqrtf((float)D), one = 1.0f, zero = 0.0f;
    cublasCheck(cublasGemmStridedBatchedEx(handle, CUBLAS_OP_T, CUBLAS_OP_N, T, T, D, &scale, k, type, D, td, q,
                                           type, D, td, &zero, S, type, T, tt, batch, CUBLAS_COMPUTE_32F,
                                           CUBLAS_GEMM_DEFAULT));
    softmax_rows_launch(P, S, t, batch * T, T, causal ? T : 0);
    cublasCheck(cublasGemmStridedBatchedEx(handle, CUBLAS_OP_N, CUBLAS_OP_N, D, T, T, &one, v, type, D, td, P, type,
                                           T, tt, &zero, out, type, D, td, batch, CUBLAS_COMPUTE_32F,
                                           CUBLAS_GEMM_DEFAULT));
}
