// pointwise.cu: the transformer's row and elementwise kernels on the GPU (see kernels_cuda.h):
// RMSNorm, softmax, SwiGLU / GeGLU, residual add, RoPE, embedding lookup and argmax. Each mirrors
// its CPU twin in kernels/cpu/kernels.c operation for operation, in fp32, so the two agree
// to rounding.
#include "cuda_common.h"

// ---- RMSNorm: one block per row ---------------------------------------------------------------

__global__ void rmsnorm_kernel(float *out, const float *x, const float *weight, int C, float eps) {
    __shared__ float scratch[32];
    const float *xr = x + (size_t)blockIdx.x * C;
    float *o = out + (size_t)blockIdx.x * C;
    float ss = 0.0f;
    for (int i = threadIdx.x; i < C; i += blockDim.x) ss += xr[i] * xr[i];
    ss = block_reduce<false>(ss, scratch);
    float inv = 1.0f / sqrtf(ss / C + eps);
    for (int i = threadIdx.x; i < C; i += blockDim.x) o[i] = xr[i] * inv * weight[i];
}

void cuda_rmsnorm(float *out, const float *x, const float *weight, int T, int C, float eps) {
    if (T <= 0) return;
    rmsnorm_kernel<<<T, 256>>>(out, x, weight, C, eps);
    cudaCheckLaunch();
}

// ---- softmax: one warp per row ----------------------------------------------------------------
// One pass keeps each lane's running max and its sum of exponentials relative to that max
// (rescaled when the max grows); the lanes then agree on the row's max and sum, and a
// second pass writes the probabilities. Reading x twice, writing once.

#define SOFTMAX_ROWS_PER_BLOCK 8

template <typename T>
__global__ void softmax_rows_kernel(T *out, const T *in, int rows, int n, int causal_period) {
    int row = blockIdx.x * SOFTMAX_ROWS_PER_BLOCK + threadIdx.x / 32, lane = threadIdx.x % 32;
    if (row >= rows) return; // a whole warp at once: no shuffle loses a partner
    const T *x = in + (size_t)row * n;
    T *y = out + (size_t)row * n;
    int visible = causal_period > 0 ? min(n, row % causal_period + 1) : n;
    float m = -INFINITY, s = 0.0f;
    for (int j = lane; j < visible; j += 32) {
        float v = to_float(x[j]);
        if (v > m) {
            s = s * expf(m - v) + 1.0f;
            m = v;
        } else {
            s += expf(v - m);
        }
    }
    float row_max = warp_reduce<true>(m);
    s = m == -INFINITY ? 0.0f : s * expf(m - row_max); // lanes that saw nothing add nothing
    float inv = 1.0f / warp_reduce<false>(s);
    for (int j = lane; j < n; j += 32)
        y[j] = from_float<T>(j < visible ? expf(to_float(x[j]) - row_max) * inv : 0.0f);
}

void softmax_rows_launch(void *out, const void *in, DType t, int rows, int n, int causal_period) {
    if (rows <= 0) return;
    unsigned blocks = ceil_div(rows, SOFTMAX_ROWS_PER_BLOCK), threads = 32 * SOFTMAX_ROWS_PER_BLOCK;
    switch (t) {
    case DTYPE_F32:
        softmax_rows_kernel<<<blocks, threads>>>((float *)out, (const float *)in, rows, n, causal_period);
        break;
    case DTYPE_F16:
        softmax_rows_kernel<<<blocks, threads>>>((__half *)out, (const __half *)in, rows, n, causal_period);
        break;
    case DTYPE_BF16:
        softmax_rows_kernel<<<blocks, threads>>>((__nv_bfloat16 *)out, (const __nv_bfloat16 *)in, rows, n,
                                                 causal_period);
        break;
    default: die("cuda softmax: %s is not implemented on CUDA", dtype_name(t));
    }
    cudaCheckLaunch();
}

void cuda_softmax_rows(float *x, int rows, int n) { softmax_rows_launch(x, x, DTYPE_F32, rows, n, 0); }

// ---- elementwise ------------------------------------------------------------------------------

// GeGLU's GELU as the CPU's table gives it (kernels.h geglu_tanh): the gate and the result
// rounded to half, to nearest even, beyond +-10 the identity or 0.
__device__ float gelu_tanh_f16(float g) {
    if (g <= -10.0f) return 0.0f;
    if (g >= 10.0f) return g;
    float h = __half2float(__float2half_rn(g));
    return __half2float(__float2half_rn(0.5f * h * (1.0f + tanhf(0.79788456080286535587989211986876f * h * (1.0f + 0.044715f * h * h)))));
}

__global__ void glu_kernel(float *out, const float *gate, const float *up, size_t n, GluAct act) {
    GRID_STRIDE_LOOP(i, n) {
        float g = gate[i];
        out[i] = (act == GLU_GELU_TANH ? gelu_tanh_f16(g) : g / (1.0f + expf(-g))) * up[i];
    }
}

void cuda_glu(float *out, const float *gate, const float *up, int T, int H, GluAct act) {
    size_t n = (size_t)T * H;
    if (n == 0) return;
    glu_kernel<<<elementwise_blocks(n), 256>>>(out, gate, up, n, act);
    cudaCheckLaunch();
}

__global__ void add_kernel(float *x, const float *y, size_t n) {
    GRID_STRIDE_LOOP(i, n) x[i] += y[i];
}

void cuda_add(float *x, const float *y, size_t n) {
    if (n == 0) return;
    add_kernel<<<elementwise_blocks(n), 256>>>(x, y, n);
    cudaCheckLaunch();
}

__global__ void scale_kernel(float *x, float a, size_t n) {
    GRID_STRIDE_LOOP(i, n) x[i] *= a;
}

void cuda_scale(float *x, float a, size_t n) {
    if (n == 0) return;
    scale_kernel<<<elementwise_blocks(n), 256>>>(x, a, n);
    cudaCheckLaunch();
}

// ---- RoPE: one thread per rotated pair --------------------------------------------------------

__global__ void rope_kernel(float *x, int R, int n_heads, int head_dim, int rot_dim, const int *pos,
                            const float *inv_freq, float mscale, RopeStyle style) {
    int half = rot_dim / 2;
    size_t n = (size_t)R * n_heads * half;
    GRID_STRIDE_LOOP(idx, n) {
        int i = idx % half;
        size_t rh = idx / half; // (row, head)
        int r = (int)(rh / n_heads);
        float angle = (float)pos[r] * inv_freq[i]; // as the CPU rounds it: int * float in fp32
        float c = cosf(angle) * mscale, s = sinf(angle) * mscale;
        float *part = x + rh * head_dim + (head_dim - rot_dim);
        float *pa = part + (style == ROPE_STYLE_NEOX ? i : 2 * i), *pb = style == ROPE_STYLE_NEOX ? pa + half : pa + 1;
        float a = *pa, b = *pb;
        *pa = a * c - b * s;
        *pb = a * s + b * c;
    }
}

void cuda_rope(float *x, int R, int n_heads, int head_dim, int rot_dim, const int *pos, const float *inv_freq,
               float mscale, RopeStyle style) {
    size_t n = (size_t)R * n_heads * (rot_dim / 2);
    if (n == 0) return;
    rope_kernel<<<elementwise_blocks(n), 256>>>(x, R, n_heads, head_dim, rot_dim, pos, inv_freq, mscale, style);
    cudaCheckLaunch();
}

// ---- embedding lookup ---------------------------------------------------------------------------

template <typename T>
__global__ void embedding_kernel(float *out, const T *table, const int *tokens, int R, int C) {
    size_t n = (size_t)R * C;
    GRID_STRIDE_LOOP(i, n) {
        size_t r = i / C, c = i % C;
        out[i] = to_float(table[(size_t)tokens[r] * C + c]);
    }
}

void cuda_embedding(float *out, const void *table, DType t, const int *tokens, int R, int C) {
    size_t n = (size_t)R * C;
    if (n == 0) return;
    unsigned blocks = elementwise_blocks(n);
    switch (t) {
    case DTYPE_F32: embedding_kernel<<<blocks, 256>>>(out, (const float *)table, tokens, R, C); break;
    case DTYPE_F16: embedding_kernel<<<blocks, 256>>>(out, (const __half *)table, tokens, R, C); break;
    case DTYPE_BF16: embedding_kernel<<<blocks, 256>>>(out, (const __nv_bfloat16 *)table, tokens, R, C); break;
    default: die("cuda embedding: %s tables are not implemented on CUDA", dtype_name(t));
    }
    cudaCheckLaunch();
}

// ---- argmax: one warp per row ---------------------------------------------------------------------

__global__ void argmax_rows_kernel(int *out, const float *x, int rows, int n) {
    int row = blockIdx.x * 8 + threadIdx.x / 32, lane = threadIdx.x % 32;
    if (row >= rows) return;
    const float *xr = x + (size_t)row * n;
    float best = -INFINITY;
    int arg = -1; // lanes visit ascending indices, so strict > keeps the first of equal values
    for (int j = lane; j < n; j += 32)
        if (arg < 0 || xr[j] > best) {
            best = xr[j];
            arg = j;
        }
    for (int o = 16; o > 0; o >>= 1) {
        float other = __shfl_xor_sync(0xffffffffu, best, o);
        int other_arg = __shfl_xor_sync(0xffffffffu, arg, o);
        if (other_arg >= 0 && (arg < 0 || other > best || (other == best && other_arg < arg))) {
            best = other;
            arg = other_arg;
        }
    }
    if (lane == 0) out[row] = arg;
}

void cuda_argmax_rows(int *out, const float *x, int rows, int n) {
    if (rows <= 0) return;
    argmax_rows_kernel<<<ceil_div(rows, 8), 256>>>(out, x, rows, n);
    cudaCheckLaunch();
}
