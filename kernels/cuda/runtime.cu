// runtime.cu: the CUDA backend's runtime (see kernels_cuda.h): device probe and setup, the
// checked-call reporters, a tracking allocator (current and peak bytes, for the memory
// columns of the benchmarks), host <-> device copies, dtype conversion, random fills, and
// CUDA-event timing.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda_common.h"

void cuda_check(cudaError_t err, const char *file, int line) {
    if (err != cudaSuccess) die("CUDA error at %s:%d: %s", file, line, cudaGetErrorString(err));
}

void cublas_check(cublasStatus_t status, const char *file, int line) {
    if (status != CUBLAS_STATUS_SUCCESS)
        die("cuBLAS error at %s:%d: %s", file, line, cublasGetStatusString(status));
}

// ---- device -----------------------------------------------------------------------------------

// The kernels are compiled for sm_80 and sm_90 (plus PTX for newer): older GPUs cannot run them.
#define MIN_COMPUTE_MAJOR 8

static cublasHandle_t g_cublas;
static void *g_cublas_workspace;
// cuBLAS's own workspace, given up front so it never allocates behind the tracking allocator
// (32 MiB is what NVIDIA recommends for Hopper).
#define CUBLAS_WORKSPACE_BYTES ((size_t)32 << 20)

int cuda_available(char *why, size_t why_len) {
    int n = 0;
    cudaError_t err = cudaGetDeviceCount(&n);
    if (err != cudaSuccess) {
        snprintf(why, why_len, "%s", cudaGetErrorString(err));
        cudaGetLastError(); // clear it: no driver is an answer, not a failure
        return 0;
    }
    if (n == 0) {
        snprintf(why, why_len, "no CUDA device");
        return 0;
    }
    cudaDeviceProp p;
    cudaCheck(cudaGetDeviceProperties(&p, 0));
    if (p.major < MIN_COMPUTE_MAJOR) {
        snprintf(why, why_len, "%s has compute capability %d.%d; the CUDA kernels need 8.0 or newer",
                 p.name, p.major, p.minor);
        return 0;
    }
    return 1;
}

void cuda_init(void) {
    char why[256];
    if (!cuda_available(why, sizeof why)) die("no usable CUDA device: %s", why);
    cudaCheck(cudaSetDevice(0));
    cublasCheck(cublasCreate(&g_cublas));
    cudaCheck(cudaMalloc(&g_cublas_workspace, CUBLAS_WORKSPACE_BYTES));
    cublasCheck(cublasSetWorkspace(g_cublas, g_cublas_workspace, CUBLAS_WORKSPACE_BYTES));
}

void cuda_shutdown(void) {
    if (g_cublas) cublasCheck(cublasDestroy(g_cublas));
    cudaCheck(cudaFree(g_cublas_workspace));
    g_cublas = NULL;
    g_cublas_workspace = NULL;
}

cublasHandle_t cuda_cublas(void) {
    if (!g_cublas) die("CUDA backend used before cuda_init()");
    return g_cublas;
}

void cuda_device_info(CudaDeviceInfo *info) {
    int dev;
    cudaDeviceProp p;
    cudaCheck(cudaGetDevice(&dev));
    cudaCheck(cudaGetDeviceProperties(&p, dev));
    snprintf(info->name, sizeof info->name, "%s", p.name);
    info->memory_bytes = p.totalGlobalMem;
    info->l2_bytes = (size_t)p.l2CacheSize;
    info->sm_count = p.multiProcessorCount;
    info->major = p.major;
    info->minor = p.minor;
}

void cuda_device_name(char *buf, size_t len) {
    CudaDeviceInfo d;
    cuda_device_info(&d);
    snprintf(buf, len, "%s, sm_%d%d, %d SMs, %.1f GiB", d.name, d.major, d.minor, d.sm_count,
             d.memory_bytes / 1073741824.0);
}

// ---- tracking allocator -------------------------------------------------------------------------
// A short list of live allocations (a run holds tens, not thousands), so cuda_free knows sizes.

typedef struct {
    void *p;
    size_t bytes;
} Allocation;

static Allocation *g_allocs;
static int g_n_allocs, g_cap_allocs;
static size_t g_allocated, g_peak;

static void track(void *p, size_t bytes) {
    if (g_n_allocs == g_cap_allocs) {
        g_cap_allocs = g_cap_allocs ? 2 * g_cap_allocs : 64;
        g_allocs = (Allocation *)reallocCheck(g_allocs, (size_t)g_cap_allocs * sizeof(Allocation));
    }
    g_allocs[g_n_allocs++] = (Allocation){p, bytes};
    g_allocated += bytes;
    if (g_allocated > g_peak) g_peak = g_allocated;
}

void *cuda_try_malloc(size_t bytes) {
    void *p = NULL;
    cudaError_t err = cudaMalloc(&p, bytes ? bytes : 1);
    if (err == cudaErrorMemoryAllocation) {
        cudaGetLastError(); // not sticky: clear it and let the caller decide
        return NULL;
    }
    cudaCheck(err);
    track(p, bytes);
    return p;
}

void *cuda_malloc_at(size_t bytes, const char *file, int line) {
    void *p = cuda_try_malloc(bytes);
    if (!p) die("out of device memory allocating %zu bytes at %s:%d", bytes, file, line);
    return p;
}

void cuda_free(void *p) {
    if (!p) return;
    for (int i = 0; i < g_n_allocs; i++) {
        if (g_allocs[i].p != p) continue;
        g_allocated -= g_allocs[i].bytes;
        g_allocs[i] = g_allocs[--g_n_allocs];
        cudaCheck(cudaFree(p));
        return;
    }
    die("cuda_free: %p was not allocated by cuda_malloc", p);
}

size_t cuda_allocated_bytes(void) { return g_allocated; }
size_t cuda_peak_bytes(void) { return g_peak; }
void cuda_reset_peak(void) { g_peak = g_allocated; }

void cuda_upload(void *dst, const void *src, size_t bytes) {
    cudaCheck(cudaMemcpy(dst, src, bytes, cudaMemcpyHostToDevice));
}
void cuda_download(void *dst, const void *src, size_t bytes) {
    cudaCheck(cudaMemcpy(dst, src, bytes, cudaMemcpyDeviceToHost));
}
void cuda_synchronize(void) { cudaCheck(cudaDeviceSynchronize()); }

// ---- conversion and random fills ------------------------------------------------------------

template <typename D, typename S>
__global__ void convert_kernel(D *dst, const S *src, size_t n) {
    GRID_STRIDE_LOOP(i, n) dst[i] = from_float<D>(to_float(src[i]));
}

template <typename D>
static void convert_from(D *dst, const void *src, DType src_t, size_t n) {
    unsigned blocks = elementwise_blocks(n);
    switch (src_t) {
    case DTYPE_F32: convert_kernel<<<blocks, 256>>>(dst, (const float *)src, n); break;
    case DTYPE_F16: convert_kernel<<<blocks, 256>>>(dst, (const __half *)src, n); break;
    case DTYPE_BF16: convert_kernel<<<blocks, 256>>>(dst, (const __nv_bfloat16 *)src, n); break;
    default: die("cuda convert: %s is not implemented on CUDA", dtype_name(src_t));
    }
    cudaCheckLaunch();
}

void cuda_convert(void *dst, DType dst_t, const void *src, DType src_t, size_t n) {
    if (n == 0) return;
    switch (dst_t) {
    case DTYPE_F32: convert_from((float *)dst, src, src_t, n); break;
    case DTYPE_F16: convert_from((__half *)dst, src, src_t, n); break;
    case DTYPE_BF16: convert_from((__nv_bfloat16 *)dst, src, src_t, n); break;
    default: die("cuda convert: %s is not implemented on CUDA", dtype_name(dst_t));
    }
}

void cuda_round_trip(float *x, size_t n, DType t) {
    if (t == DTYPE_F32 || n == 0) return;
    float *f = (float *)cudaMallocCheck(n * sizeof(float));
    void *h = cudaMallocCheck(n * dtype_size(t));
    cuda_upload(f, x, n * sizeof(float));
    cuda_convert(h, t, f, DTYPE_F32, n);
    cuda_convert(f, DTYPE_F32, h, t, n);
    cuda_download(x, f, n * sizeof(float));
    cuda_free(f);
    cuda_free(h);
}

// splitmix64 of (seed, index): independent random bits per element, in any order.
__device__ __forceinline__ unsigned long long mix64(unsigned long long z) {
    z += 0x9E3779B97F4A7C15ull;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

template <typename T>
__global__ void fill_normal_kernel(T *x, size_t n, float std, unsigned long long seed) {
    GRID_STRIDE_LOOP(i, n) {
        unsigned long long r = mix64(seed * 0x2545F4914F6CDD1Dull + i);
        // Box-Muller from two 24-bit uniforms; u1 in (0, 1] keeps the log finite
        float u1 = ((r >> 40) + 1) * (1.0f / 16777216.0f), u2 = ((r >> 16) & 0xFFFFFF) * (1.0f / 16777216.0f);
        x[i] = from_float<T>(std * sqrtf(-2.0f * logf(u1)) * cospif(2.0f * u2));
    }
}

void cuda_fill_normal(void *x, DType t, size_t n, float std, unsigned long long seed) {
    if (n == 0) return;
    unsigned blocks = elementwise_blocks(n);
    switch (t) {
    case DTYPE_F32: fill_normal_kernel<<<blocks, 256>>>((float *)x, n, std, seed); break;
    case DTYPE_F16: fill_normal_kernel<<<blocks, 256>>>((__half *)x, n, std, seed); break;
    case DTYPE_BF16: fill_normal_kernel<<<blocks, 256>>>((__nv_bfloat16 *)x, n, std, seed); break;
    default: die("cuda fill: %s is not implemented on CUDA", dtype_name(t));
    }
    cudaCheckLaunch();
}

// ---- timing -------------------------------------------------------------------------------------

BenchStats cuda_bench_run(void (*fn)(void *ctx), void *ctx, int warmup, int reps) {
    if (reps < 1) die("cuda_bench_run: reps must be >= 1");
    for (int i = 0; i < warmup; i++) fn(ctx);
    cudaEvent_t *events = (cudaEvent_t *)mallocCheck(2 * (size_t)reps * sizeof(cudaEvent_t));
    for (int i = 0; i < 2 * reps; i++) cudaCheck(cudaEventCreate(&events[i]));
    // Each call between its own pair of events; one synchronisation at the end, so host
    // launch overhead overlaps device work as it does in a real pipeline.
    for (int i = 0; i < reps; i++) {
        cudaCheck(cudaEventRecord(events[2 * i]));
        fn(ctx);
        cudaCheck(cudaEventRecord(events[2 * i + 1]));
    }
    cudaCheck(cudaEventSynchronize(events[2 * reps - 1]));
    double *ms = (double *)mallocCheck((size_t)reps * sizeof(double));
    for (int i = 0; i < reps; i++) {
        float t;
        cudaCheck(cudaEventElapsedTime(&t, events[2 * i], events[2 * i + 1]));
        ms[i] = t;
    }
    for (int i = 0; i < 2 * reps; i++) cudaCheck(cudaEventDestroy(events[i]));
    BenchStats s = bench_stats(ms, reps);
    free(ms);
    free(events);
    return s;
}
