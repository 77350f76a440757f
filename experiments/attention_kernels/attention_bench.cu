// attention_bench.cu: one measurement of a full-sequence attention implementation on the GPU
// (see attention_bench.h), the CUDA half of the attention_kernels experiment: random inputs,
// CUDA-event timing after warm-up, the peak device memory the run held (tracking allocator),
// and the error against the CPU's double-precision reference on a spread of query rows. It
// drives the kernels through kernels_cuda.h, and takes the CUDA backend's checked calls and
// element types from its shared header, kernels/cuda/cuda_common.h.
#include <math.h>
#include <stdlib.h>

#include "attention_bench.h"
#include "cuda/cuda_common.h"

extern "C" {
#include "reference.h"
}

// Query rows compared with the reference: a spread over (b, h, t), first and last included.
#define CHECK_ROWS 32

static const char *IMPL_NAMES[] = {"naive", "flash", "cudnn"};

const char *cuda_attn_impl_name(CudaAttnImpl impl) {
    return impl >= CUDA_ATTN_NAIVE && impl < CUDA_ATTN_COUNT ? IMPL_NAMES[impl] : "?";
}

typedef struct {
    CudaAttnImpl impl;
    CudaAttnShape s;
    void *q, *k, *v, *out, *workspace;
    CudnnAttention *plan; // cuDNN's execution plan for the shape
} AttnRun;

static void attn_call(void *ctx) {
    AttnRun *a = (AttnRun *)ctx;
    const CudaAttnShape *s = &a->s;
    switch (a->impl) {
    case CUDA_ATTN_NAIVE:
        cuda_attention_naive(a->out, a->q, a->k, a->v, a->workspace, s->B, s->H, s->T, s->D, s->dtype, s->causal);
        break;
    case CUDA_ATTN_FLASH: cuda_attention_flash(a->out, a->q, a->k, a->v, s->B, s->H, s->T, s->D, s->dtype, s->causal); break;
    default: cuda_attention_cudnn(a->plan, a->out, a->q, a->k, a->v, a->workspace);
    }
}

static void attn_free(AttnRun *a) {
    void *bufs[] = {a->q, a->k, a->v, a->out, a->workspace};
    for (int i = 0; i < 5; i++) cuda_free(bufs[i]);
    cuda_attention_cudnn_free(a->plan);
}

// Workspace bytes of the implementation at this shape; for cuDNN, its plan is built first
// (into a->plan). -1 with err set when the implementation cannot run the shape.
static int workspace_bytes(AttnRun *a, size_t *bytes, Error *err) {
    const CudaAttnShape *s = &a->s;
    char why[256];
    *bytes = 0;
    switch (a->impl) {
    case CUDA_ATTN_NAIVE: *bytes = cuda_attention_naive_workspace(s->B, s->H, s->T, s->dtype); return 0;
    case CUDA_ATTN_FLASH:
        if (cuda_attention_flash_supported(s->D, s->dtype)) return 0;
        return error_set(err, "flash: %s with D=%d not supported (fp16 or bf16, D = 64 or 128)",
                         dtype_name(s->dtype), s->D);
    case CUDA_ATTN_CUDNN:
        if (!cuda_attention_cudnn_supported(s->D, s->dtype, s->causal, why, sizeof why))
            return error_set(err, "cudnn: %s", why);
        if (!(a->plan = cuda_attention_cudnn_plan(s->B, s->H, s->T, s->D, s->dtype, s->causal, err))) return -1;
        *bytes = cuda_attention_cudnn_workspace(a->plan);
        return 0;
    default: return error_set(err, "attention bench: unknown implementation %d", (int)a->impl);
    }
}

// A device tensor of n elements of type t, as host floats.
static float *download_floats(const void *x, DType t, size_t n) {
    float *f = (float *)mallocCheck(n * sizeof(float));
    if (t == DTYPE_F32) {
        cuda_download(f, x, n * sizeof(float));
        return f;
    }
    uint16_t *raw = (uint16_t *)mallocCheck(n * 2);
    cuda_download(raw, x, n * 2);
    for (size_t i = 0; i < n; i++) {
        if (t == DTYPE_F16) {
            __half_raw h;
            h.x = raw[i];
            f[i] = __half2float(__half(h));
        } else {
            __nv_bfloat16_raw b;
            b.x = raw[i];
            f[i] = __bfloat162float(__nv_bfloat16(b));
        }
    }
    free(raw);
    return f;
}

// Max |out - ref| over CHECK_ROWS query rows, and max |ref| over them.
static void check_rows(const AttnRun *a, CudaAttnResult *r) {
    const CudaAttnShape *s = &a->s;
    size_t n = (size_t)s->B * s->H * s->T * s->D;
    float *q = download_floats(a->q, s->dtype, n), *k = download_floats(a->k, s->dtype, n);
    float *v = download_floats(a->v, s->dtype, n), *out = download_floats(a->out, s->dtype, n);
    AttentionFullShape fs = {s->B, s->H, s->T, s->D, s->causal};
    double *ref = (double *)mallocCheck((size_t)s->D * sizeof(double));
    double err = 0.0, scale = 0.0;
    int n_rows = s->B * s->H * s->T < CHECK_ROWS ? s->B * s->H * s->T : CHECK_ROWS;
    for (int i = 0; i < n_rows; i++) {
        // row i of an even spread over the flattened (b, h, t) index
        long long flat = n_rows == 1 ? 0 : (long long)i * ((long long)s->B * s->H * s->T - 1) / (n_rows - 1);
        int t = (int)(flat % s->T), bh = (int)(flat / s->T);
        ref_attention_full_row(ref, q, k, v, &fs, bh / s->H, bh % s->H, t);
        const float *o = out + ((size_t)bh * s->T + t) * s->D;
        for (int d = 0; d < s->D; d++) {
            double e = fabs(o[d] - ref[d]);
            if (!(e <= err)) err = e; // NaN is the worst error
            if (fabs(ref[d]) > scale) scale = fabs(ref[d]);
        }
    }
    r->max_abs_error = err;
    r->max_rel_error = err / (scale > 0.0 ? scale : 1.0);
    r->rows_checked = n_rows;
    free(ref);
    free(q);
    free(k);
    free(v);
    free(out);
}

int cuda_attention_bench(CudaAttnImpl impl, const CudaAttnShape *s, int warmup, int reps, unsigned long long seed,
                         CudaAttnResult *r, Error *err) {
    if (s->B < 1 || s->H < 1 || s->T < 1 || s->D < 1 || reps < 1 || warmup < 0)
        return error_set(err, "attention bench: bad shape B=%d H=%d T=%d D=%d or reps %d", s->B, s->H, s->T, s->D,
                         reps);
    AttnRun a = {impl, *s, NULL, NULL, NULL, NULL, NULL, NULL};
    size_t n = (size_t)s->B * s->H * s->T * s->D, bytes = n * dtype_size(s->dtype), ws;
    if (workspace_bytes(&a, &ws, err) != 0) return -1;
    size_t free_bytes, total_bytes;
    cudaCheck(cudaMemGetInfo(&free_bytes, &total_bytes));
    if (4 * bytes + ws > free_bytes) {
        attn_free(&a);
        return error_set(err, "%s at T=%d needs %.2f GiB of device memory; %.2f GiB free", cuda_attn_impl_name(impl),
                         s->T, (4 * bytes + ws) / 1073741824.0, free_bytes / 1073741824.0);
    }

    cuda_reset_peak();
    size_t before = cuda_allocated_bytes();
    a.q = cuda_try_malloc(bytes);
    a.k = cuda_try_malloc(bytes);
    a.v = cuda_try_malloc(bytes);
    a.out = cuda_try_malloc(bytes);
    a.workspace = ws ? cuda_try_malloc(ws) : NULL;
    if (!a.q || !a.k || !a.v || !a.out || (ws && !a.workspace)) {
        attn_free(&a);
        return error_set(err, "%s at T=%d: out of device memory", cuda_attn_impl_name(impl), s->T);
    }
    cuda_fill_normal(a.q, s->dtype, n, 1.0f, seed);
    cuda_fill_normal(a.k, s->dtype, n, 1.0f, seed + 1);
    cuda_fill_normal(a.v, s->dtype, n, 1.0f, seed + 2);

    r->time = cuda_bench_run(attn_call, &a, warmup, reps);
    r->peak_bytes = cuda_peak_bytes() - before;
    r->flops = 4.0 * s->B * s->H * (double)s->T * s->T * s->D * (s->causal ? 0.5 : 1.0);
    r->tflops = r->flops / (r->time.median_ms * 1e-3) / 1e12;
    check_rows(&a, r);
    attn_free(&a);
    return 0;
}
