// attention_kv.cu: the engine's attention on the GPU, fp32 (see kernels_cuda.h): query rows
// against their sequences' KV caches, contiguous or ring (KVLayout, ops.h), GQA-aware, with
// sliding window, attention sinks and StreamingLLM's position rule, only the visible keys
// read; and the append of a step's keys and values to those caches. The GPU twin of
// kernels/cpu/attention_kv.c; any head_dim, value_dim and row strides (MLA's latent rows
// included), so it runs every model the CPU runs.
#include "cuda_common.h"

// Keys scored per step of the online softmax: one per thread of the block.
#define KV_CHUNK 128
#define KV_WARPS (KV_CHUNK / 32)

// Key k of the visible list (attention_visible_keys, ops.h): its position in the text.
__device__ int visible_key(const VisibleKeys &vis, int k) { return k < vis.n_sinks ? k : vis.lo + (k - vis.n_sinks); }

// One block per (row, head). Keys stream through in chunks of KV_CHUNK: each warp scores
// keys with its lanes splitting the head dimension (coalesced reads of a key), then the
// block rescales its running output by exp(old max - new max) and adds the chunk's
// probability-weighted values, each thread owning some of the head's dimensions.
__global__ void __launch_bounds__(KV_CHUNK)
attention_rows_kernel(float *out, const float *q, float *const *keys, float *const *values, const int *pos,
                      const KVLayout *layouts, AttentionShape s) {
    // q (hd) | running output (vd) | chunk scores (KV_CHUNK) | q for the sinks (hd)
    extern __shared__ float smem[];
    __shared__ float scratch[32];
    // ops.h's defaults (attention_value_dim and the strides), spelled out: device code
    int r = blockIdx.x, h = blockIdx.y, hd = s.head_dim, vd = s.value_dim ? s.value_dim : hd;
    size_t key_stride = s.key_stride ? s.key_stride : (size_t)s.n_kv_heads * hd;
    size_t value_stride = s.value_stride ? s.value_stride : (size_t)s.n_kv_heads * vd;
    int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
    float *q_s = smem, *acc = smem + hd, *p_s = smem + hd + vd, *q_sink = smem + hd + vd + KV_CHUNK;
    size_t g = (size_t)(h / (s.n_heads / s.n_kv_heads));
    const float *K = keys[r] + g * hd, *V = values[r] + g * vd;
    const float *qr = q + ((size_t)r * s.n_heads + h) * hd;
    VisibleKeys vis = attention_visible_keys(pos[r], s.window, s.n_sink);
    KVLayout layout = layouts ? layouts[r] : KVLayout{};
    // StreamingLLM's rule: the sinks are scored against q rotated back by the evicted count
    int shift_sinks = s.cache_positions && vis.evicted > 0;

    for (int i = threadIdx.x; i < hd; i += blockDim.x) q_s[i] = qr[i];
    for (int i = threadIdx.x; i < vd; i += blockDim.x) acc[i] = 0.0f;
    if (shift_sinks)
        for (int i = threadIdx.x; i < hd / 2; i += blockDim.x) {
            float angle = -vis.evicted * s.inv_freq[i], c = cosf(angle), sn = sinf(angle);
            float a = qr[2 * i], b = qr[2 * i + 1];
            q_sink[2 * i] = a * c - b * sn;
            q_sink[2 * i + 1] = a * sn + b * c;
        }
    __syncthreads();
    float m = -INFINITY, l = 0.0f; // running max and sum, the same in every thread
    for (int c0 = 0; c0 < vis.count; c0 += KV_CHUNK) {
        int n = min(KV_CHUNK, vis.count - c0);
        for (int kk = warp; kk < n; kk += KV_WARPS) {
            int key = visible_key(vis, c0 + kk);
            const float *kj = K + (size_t)kv_layout_row(layout, key) * key_stride;
            const float *qk = shift_sinks && c0 + kk < vis.n_sinks ? q_sink : q_s;
            float dot = 0.0f;
            for (int i = lane; i < hd; i += 32) dot += qk[i] * kj[i];
            dot = warp_reduce<false>(dot);
            if (lane == 0) p_s[kk] = dot * s.scale;
        }
        __syncthreads();
        float score = threadIdx.x < n ? p_s[threadIdx.x] : -INFINITY;
        float m_new = fmaxf(m, block_reduce<true>(score, scratch)); // finite: the chunk holds a key
        float e = threadIdx.x < n ? expf(score - m_new) : 0.0f;
        float alpha = expf(m - m_new); // 0 on the first chunk
        l = l * alpha + block_reduce<false>(e, scratch);
        m = m_new;
        p_s[threadIdx.x] = e; // each thread rewrites only the slot it read
        __syncthreads();
        for (int i = threadIdx.x; i < vd; i += blockDim.x) {
            float a = acc[i] * alpha;
            for (int kk = 0; kk < n; kk++)
                a += p_s[kk] * V[(size_t)kv_layout_row(layout, visible_key(vis, c0 + kk)) * value_stride + i];
            acc[i] = a;
        }
        __syncthreads(); // p_s is overwritten by the next chunk
    }
    float *o = out + ((size_t)r * s.n_heads + h) * vd;
    for (int i = threadIdx.x; i < vd; i += blockDim.x) o[i] = acc[i] / l;
}

void cuda_attention_rows(float *out, const float *q, float *const *keys, float *const *values, const int *pos,
                         const KVLayout *layouts, int R, const AttentionShape *shape) {
    if (R <= 0) return;
    if (shape->n_heads > 65535) die("cuda_attention_rows: %d heads exceed the grid's 65535", shape->n_heads);
    size_t smem = (2 * (size_t)shape->head_dim + attention_value_dim(shape) + KV_CHUNK) * sizeof(float);
    attention_rows_kernel<<<dim3(R, shape->n_heads), KV_CHUNK, smem>>>(out, q, keys, values, pos, layouts, *shape);
    cudaCheckLaunch();
}

__global__ void kv_append_kernel(float *const *keys, float *const *values, const float *k, const float *v,
                                 const int *pos, const KVLayout *layouts, int kv_dim, size_t n) {
    GRID_STRIDE_LOOP(idx, n) {
        size_t r = idx / kv_dim;
        int row = layouts ? kv_layout_row(layouts[r], pos[r]) : pos[r];
        size_t at = (size_t)row * kv_dim + idx % kv_dim;
        keys[r][at] = k[idx];
        if (v) values[r][at] = v[idx];
    }
}

void cuda_kv_append(float *const *keys, float *const *values, const float *k, const float *v, const int *pos,
                    const KVLayout *layouts, int R, int kv_dim) {
    size_t n = (size_t)R * kv_dim;
    if (n == 0) return;
    kv_append_kernel<<<elementwise_blocks(n), 256>>>(keys, values, k, v, pos, layouts, kv_dim, n);
    cudaCheckLaunch();
}
