// stream.cu: device memory bandwidth, McCalpin's STREAM copy and triad on the GPU (see
// kernels_cuda.h), the device twin of experiments/lab/peak.c's CPU kernels, for the
// hardware budget's measured GPU row. Grid-stride loops over doubles; each pass between its
// own pair of CUDA events.
#include "cuda_common.h"

__global__ void stream_copy_kernel(double *c, const double *a, size_t n) {
    GRID_STRIDE_LOOP(i, n) c[i] = a[i];
}

__global__ void stream_triad_kernel(double *a, const double *b, const double *c, double scalar, size_t n) {
    GRID_STRIDE_LOOP(i, n) a[i] = b[i] + scalar * c[i];
}

__global__ void fill_kernel(double *x, double value, size_t n) {
    GRID_STRIDE_LOOP(i, n) x[i] = value;
}

// Counts the elements of x that differ from want (a device int).
__global__ void count_wrong_kernel(int *wrong, const double *x, double want, size_t n) {
    GRID_STRIDE_LOOP(i, n) if (x[i] != want) atomicAdd(wrong, 1);
}

#define TRIAD_SCALAR 3.0

typedef struct {
    int triad;
    double *a, *b, *c;
    size_t n;
} StreamCall;

static void stream_pass(void *ctx) {
    StreamCall *s = (StreamCall *)ctx;
    unsigned blocks = elementwise_blocks(s->n);
    if (s->triad) stream_triad_kernel<<<blocks, 256>>>(s->a, s->b, s->c, TRIAD_SCALAR, s->n);
    else stream_copy_kernel<<<blocks, 256>>>(s->c, s->a, s->n);
    cudaCheckLaunch();
}

BenchStats cuda_stream_bench(int triad, size_t n, int warmup, int reps) {
    StreamCall s = {triad, (double *)cudaMallocCheck(n * sizeof(double)), (double *)cudaMallocCheck(n * sizeof(double)),
                    (double *)cudaMallocCheck(n * sizeof(double)), n};
    unsigned blocks = elementwise_blocks(n);
    fill_kernel<<<blocks, 256>>>(s.a, 1.0, n); // as peak.c: a = 1, b = 2, c = 0.5
    fill_kernel<<<blocks, 256>>>(s.b, 2.0, n);
    fill_kernel<<<blocks, 256>>>(s.c, 0.5, n);
    cudaCheckLaunch();
    BenchStats t = cuda_bench_run(stream_pass, &s, warmup, reps);
    // every pass writes the same values: copy c = a = 1; triad a = 2 + 3 * 0.5
    int *wrong = (int *)cudaMallocCheck(sizeof(int)), wrong_host = 0;
    cuda_upload(wrong, &wrong_host, sizeof(int));
    count_wrong_kernel<<<blocks, 256>>>(wrong, triad ? s.a : s.c, triad ? 2.0 + TRIAD_SCALAR * 0.5 : 1.0, n);
    cudaCheckLaunch();
    cuda_download(&wrong_host, wrong, sizeof(int));
    if (wrong_host) die("STREAM %s on the device: %d of %zu elements wrong", triad ? "triad" : "copy", wrong_host, n);
    cuda_free(wrong);
    cuda_free(s.a);
    cuda_free(s.b);
    cuda_free(s.c);
    return t;
}
