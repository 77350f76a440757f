// gemm.cu: cuBLAS matmul wrappers in four precisions (fp32, tf32, fp16, bf16; fp32 output and
// accumulation throughout) and the matmul-rate benchmark that gives the card's measured
// tensor-core ceiling (see kernels_cuda.h).
#include <string.h>

#include "cuda_common.h"

static const char *GEMM_NAMES[] = {"fp32", "tf32", "fp16", "bf16"};

const char *gemm_mode_name(GemmMode m) { return m >= GEMM_FP32 && m <= GEMM_BF16 ? GEMM_NAMES[m] : "?"; }

int gemm_mode_from_name(const char *name) {
    for (int i = 0; i < 4; i++)
        if (strcmp(name, GEMM_NAMES[i]) == 0) return i;
    return -1;
}

DType gemm_input_dtype(GemmMode m) {
    return m == GEMM_FP16 ? DTYPE_F16 : m == GEMM_BF16 ? DTYPE_BF16 : DTYPE_F32;
}

// cuBLAS is column-major: the row-major out (T, d) is the column-major out^T (d, T), and
// out^T = w x^T, where the row-major w (d, n) read column-major is w^T (hence OP_T) and the
// row-major x (T, n) read column-major is x^T (OP_N). llm.c's matmul_forward does the same.
void cuda_matmul(float *out, const void *x, const void *w, int T, int n, int d, GemmMode mode) {
    const float one = 1.0f, zero = 0.0f;
    cudaDataType_t in = cuda_data_type(gemm_input_dtype(mode));
    cublasComputeType_t compute = mode == GEMM_TF32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
    cublasCheck(cublasGemmEx(cuda_cublas(), CUBLAS_OP_T, CUBLAS_OP_N, d, T, n, &one, w, in, n, x, in, n, &zero,
                             out, CUDA_R_32F, d, compute, CUBLAS_GEMM_DEFAULT));
}

typedef struct {
    float *out;
    void *x, *w;
    int M, N, K;
    GemmMode mode;
} MatmulBench;

static void matmul_bench_call(void *ctx) {
    MatmulBench *b = (MatmulBench *)ctx;
    cuda_matmul(b->out, b->x, b->w, b->M, b->K, b->N, b->mode);
}

double cuda_matmul_bench(GemmMode mode, int M, int N, int K, int warmup, int reps, BenchStats *time) {
    DType t = gemm_input_dtype(mode);
    MatmulBench b = {NULL, NULL, NULL, M, N, K, mode};
    b.out = (float *)cudaMallocCheck((size_t)M * N * sizeof(float));
    b.x = cudaMallocCheck((size_t)M * K * dtype_size(t));
    b.w = cudaMallocCheck((size_t)N * K * dtype_size(t));
    cuda_fill_normal(b.x, t, (size_t)M * K, 1.0f, 1);
    cuda_fill_normal(b.w, t, (size_t)N * K, 1.0f, 2);
    *time = cuda_bench_run(matmul_bench_call, &b, warmup, reps);
    cuda_free(b.out);
    cuda_free(b.x);
    cuda_free(b.w);
    return 2.0 * M * N * K / (time->median_ms * 1e-3) / 1e12;
}
