// ops_cuda.cu: the CUDA backend table (ops.h) over the kernels of kernels_cuda.h. Backend
// memory is device memory from the tracking allocator; matmuls run on cuBLAS in the weights'
// type (fp32 inputs rounded to fp16 / bf16 into the scratch first), everything else in fp32.
// Needs cuda_init() before the first op.
#include "cuda_common.h"

static void *gpu_alloc(size_t bytes) { return cudaMallocCheck(bytes); }
static void gpu_free(void *p) { cuda_free(p); }
static void gpu_upload(void *dst, const void *src, size_t bytes) { cuda_upload(dst, src, bytes); }
static void gpu_download(void *dst, const void *src, size_t bytes) { cuda_download(dst, src, bytes); }

static GemmMode gemm_mode_of(DType t) { return t == DTYPE_F16 ? GEMM_FP16 : t == DTYPE_BF16 ? GEMM_BF16 : GEMM_FP32; }

static void gpu_matmul(float *out, const float *x, const Tensor *w, int R, void *scratch) {
    const void *in = x;
    if (w->dtype != DTYPE_F32 && w->dtype != DTYPE_F16 && w->dtype != DTYPE_BF16)
        die("cuda matmul: %s weights are not implemented on CUDA", dtype_name(w->dtype));
    if (w->dtype != DTYPE_F32) {
        cuda_convert(scratch, w->dtype, x, DTYPE_F32, (size_t)R * w->cols);
        in = scratch;
    }
    cuda_matmul(out, in, w->data, R, w->cols, w->rows, gemm_mode_of(w->dtype));
}

static size_t gpu_matmul_scratch_bytes(DType t, int R, int cols) {
    return t == DTYPE_F32 ? 0 : (size_t)R * cols * dtype_size(t);
}

static void gpu_embedding(float *out, const Tensor *table, const int *tokens, int R) {
    cuda_embedding(out, table->data, table->dtype, tokens, R, table->cols);
}

static void gpu_kv_write(const KVRows *kv, const float *k, const float *v, int kv_dim) {
    if (kv->dtype != DTYPE_F32) die("cuda kv_write: the %s KV cache is not implemented on CUDA", dtype_name(kv->dtype));
    // fp32 rows: the only KV type on CUDA (checked above)
    cuda_kv_append((float *const *)kv->keys, (float *const *)kv->values, k, v, kv->pos, kv->layouts, kv->R, kv_dim);
}

static void gpu_attention(float *out, const float *q, const KVRows *kv, const AttentionShape *s, void *scratch,
                          size_t scratch_bytes) {
    (void)scratch, (void)scratch_bytes; // online softmax over key chunks: no score buffer
    if (kv->dtype != DTYPE_F32) die("cuda attention: the %s KV cache is not implemented on CUDA", dtype_name(kv->dtype));
    cuda_attention_rows(out, q, (float *const *)kv->keys, (float *const *)kv->values, kv->pos, kv->layouts, kv->R, s);
}

static size_t gpu_attention_scratch_bytes(const AttentionShape *s, int max_keys) {
    (void)s, (void)max_keys;
    return 0;
}

static Ops make_cuda_ops(void) {
    Ops o = {};
    o.name = "cuda";
    o.alloc = gpu_alloc;
    o.free = gpu_free;
    o.upload = gpu_upload;
    o.download = gpu_download;
    o.allocated_bytes = cuda_allocated_bytes;
    o.convert = cuda_convert;
    o.matmul = gpu_matmul;
    o.matmul_scratch_bytes = gpu_matmul_scratch_bytes;
    o.rmsnorm = cuda_rmsnorm;
    o.glu = cuda_glu;
    o.add = cuda_add;
    o.scale = cuda_scale;
    o.embedding = gpu_embedding;
    o.rope = cuda_rope;
    o.kv_write = gpu_kv_write;
    o.attention = gpu_attention;
    o.attention_scratch_bytes = gpu_attention_scratch_bytes;
    return o;
}

static const Ops CUDA_OPS = make_cuda_ops();

extern "C" const Ops *ops_cuda(void) { return &CUDA_OPS; }
