// ops_cpu.c: the CPU backend table (ops.h) over the kernels of kernels.h. Backend memory is
// host memory, so upload and download are copies; weights are fp32 or one of the quantised
// types of kernels/quant.h, each with its own dequantise-dot kernel.
#include <malloc.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"
#include "kernels.h"
#include "quant.h"

// Backend memory is counted by the backend, block by block, at the size the C allocator
// reserved for it (malloc_usable_size: the request rounded up to the allocator's chunk). The
// heap's own statistics (mallinfo2) cannot serve: under AddressSanitizer every block comes
// from the sanitizer's allocator, which glibc's statistics never see.
static size_t cpu_bytes_in_use;

static void *cpu_alloc(size_t bytes) {
    void *p = mallocCheck(bytes);
    __atomic_add_fetch(&cpu_bytes_in_use, malloc_usable_size(p), __ATOMIC_RELAXED);
    return p;
}
static void cpu_free(void *p) {
    if (!p) return;
    __atomic_sub_fetch(&cpu_bytes_in_use, malloc_usable_size(p), __ATOMIC_RELAXED);
    free(p);
}
static void cpu_copy(void *dst, const void *src, size_t bytes) { memcpy(dst, src, bytes); }

static size_t cpu_allocated_bytes(void) { return __atomic_load_n(&cpu_bytes_in_use, __ATOMIC_RELAXED); }

static void cpu_convert(void *dst, DType dst_t, const void *src, DType src_t, size_t n) {
    if (dst_t != DTYPE_F32 || src_t != DTYPE_F32)
        die("cpu convert: %s to %s is not supported", dtype_name(src_t), dtype_name(dst_t));
    memmove(dst, src, n * sizeof(float));
}

static void cpu_matmul(float *out, const float *x, const Tensor *w, int R, void *scratch) {
    if (w->dtype != DTYPE_F32 && !dtype_is_quantized(w->dtype))
        die("cpu matmul: %s weights are not supported", dtype_name(w->dtype));
    matmul_typed(out, x, w, R, scratch);
}

static void cpu_add(float *x, const float *y, size_t n) {
    for (size_t i = 0; i < n; i++) x[i] += y[i];
}

static void cpu_scale(float *x, float a, size_t n) {
    for (size_t i = 0; i < n; i++) x[i] *= a;
}

static void cpu_embedding(float *out, const Tensor *table, const int *tokens, int R) {
    if (table->dtype != DTYPE_F32 && !dtype_is_quantized(table->dtype))
        die("cpu embedding: %s tables are not supported", dtype_name(table->dtype));
    size_t C = table->cols, row_bytes = dtype_row_bytes(table->dtype, table->cols);
    const TensorOutliers *o = table->outliers;
    for (int r = 0; r < R; r++) { // (R, C)
        dequantize_row(table->dtype, out + r * C, (const char *)table->data + tokens[r] * row_bytes, (int)C);
        for (int k = 0; o && k < o->n; k++) out[r * C + o->cols[k]] = o->w[(size_t)tokens[r] * o->n + k];
    }
}

static void cpu_rope(float *x, int R, int n_heads, int head_dim, int rot_dim, const int *pos, const float *inv_freq,
                     float mscale, RopeStyle style) {
    for (int r = 0; r < R; r++) {
        float *row = x + (size_t)r * n_heads * head_dim;
        if (rot_dim == head_dim) {
            rope_rotate(row, n_heads, head_dim, pos[r], inv_freq, mscale, style);
            continue;
        }
        for (int h = 0; h < n_heads; h++) // the last rot_dim dims of each head
            rope_rotate(row + (size_t)h * head_dim + head_dim - rot_dim, 1, rot_dim, pos[r], inv_freq, mscale, style);
    }
}

static void cpu_glu(float *out, const float *gate, const float *up, int R, int H, GluAct act) {
    if (act == GLU_GELU_TANH) geglu_tanh(out, gate, up, R, H);
    else swiglu(out, gate, up, R, H);
}

// One row of an int8 cache: each of the n_scales heads' slices quantised with its own scale.
static void kv_quantize_row(int8_t *dst, float *scales, const float *x, int kv_dim, int n_scales) {
    int hd = kv_dim / n_scales;
    for (int g = 0; g < n_scales; g++) {
        const float *xg = x + (size_t)g * hd;
        float amax = 0.0f;
        for (int i = 0; i < hd; i++) amax = fmaxf(amax, fabsf(xg[i]));
        float s = amax / 127.0f, is = s ? 1.0f / s : 0.0f;
        scales[g] = s;
        for (int i = 0; i < hd; i++) dst[(size_t)g * hd + i] = (int8_t)roundf(xg[i] * is);
    }
}

static void cpu_kv_write(const KVRows *kv, const float *k, const float *v, int kv_dim) {
    if (kv->dtype != DTYPE_F32 && (kv->dtype != DTYPE_I8 || !v || kv->n_scales < 1 || kv_dim % kv->n_scales))
        die("cpu kv_write: a %s cache of rows of %d in %d heads (values %s)", dtype_name(kv->dtype), kv_dim,
            kv->n_scales, v ? "given" : "in the keys");
    for (int r = 0; r < kv->R; r++) {
        int row = kv->layouts ? kv_layout_row(kv->layouts[r], kv->pos[r]) : kv->pos[r];
        size_t at = (size_t)row * kv_dim;
        if (kv->dtype == DTYPE_I8) {
            float *ks = kv->key_scales[r] + (size_t)row * kv->n_scales, *vs = kv->value_scales[r] + (size_t)row * kv->n_scales;
            kv_quantize_row((int8_t *)kv->keys[r] + at, ks, k + (size_t)r * kv_dim, kv_dim, kv->n_scales);
            kv_quantize_row((int8_t *)kv->values[r] + at, vs, v + (size_t)r * kv_dim, kv_dim, kv->n_scales);
            continue;
        }
        memcpy((float *)kv->keys[r] + at, k + (size_t)r * kv_dim, kv_dim * sizeof(float));
        if (v) memcpy((float *)kv->values[r] + at, v + (size_t)r * kv_dim, kv_dim * sizeof(float));
    }
}

static void cpu_attention(float *out, const float *q, const KVRows *kv, const AttentionShape *s, void *scratch,
                          size_t scratch_bytes) {
    attention_kv(out, q, kv, s, scratch, scratch_bytes);
}

static const Ops CPU_OPS = {
    .name = "cpu",
    .host_memory = 1,
    .alloc = cpu_alloc,
    .free = cpu_free,
    .upload = cpu_copy,
    .download = cpu_copy,
    .allocated_bytes = cpu_allocated_bytes,
    .convert = cpu_convert,
    .matmul = cpu_matmul,
    .matmul_scratch_bytes = matmul_typed_scratch_bytes,
    .rmsnorm = rmsnorm,
    .glu = cpu_glu,
    .add = cpu_add,
    .scale = cpu_scale,
    .embedding = cpu_embedding,
    .rope = cpu_rope,
    .kv_write = cpu_kv_write,
    .attention = cpu_attention,
    .attention_scratch_bytes = attention_kv_scratch_bytes,
};

const Ops *ops_cpu(void) { return &CPU_OPS; }

#ifndef INFERLAB_CUDA
const Ops *ops_cuda(void) { return NULL; }
#endif
