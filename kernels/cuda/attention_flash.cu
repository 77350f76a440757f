// attention_flash.cu: our FlashAttention-2-style forward kernel (see kernels_cuda.h).
//
// A block of 4 warps takes BR = 64 queries of one (b, h); each warp owns 16 of them and
// keeps their Q fragments, running max m, running sum l and output O in registers. Key and
// value tiles of BC = 64 rows stream through shared memory, double-buffered: cp.async
// fetches tile j + 1 while the warps compute on tile j. Per tile, a warp computes its
// 16 x 64 scores S = Q K^T with mma.sync, rescales them to base 2 (scale * log2 e, so the
// exponentials are exp2f), takes the new row max, turns S into P = exp2(S - m) in
// registers, rescales O and l by exp2(m_old - m_new), and adds P V with mma.sync. The
// accumulator layout of S is the A-operand layout P needs, so P never leaves registers.
// Only at the end is O divided by l. Causal blocks stop at the diagonal tile; tiles that
// cross the diagonal or the end of the sequence mask their scores to -inf.
//
// Memory: nothing beyond q, k, v and out. Shared memory 5 x 64 x (D + 8) elements
// (Q, and two buffers each of K and V): 45 KiB at D = 64, 85 KiB at D = 128.
#include "mma.h"

#define BR 64        // queries per block: 4 warps x 16 rows
#define BC 64        // keys per tile
#define THREADS 128
#define PAD 8        // elements of padding per shared row: 16-byte-aligned rows, no bank conflicts
static_assert(BR == 64 && BC == 64, "load_tile_async copies tiles of 64 rows");

// Start copying rows t0 .. t0 + 63 of a (T, D) matrix into shared memory with row stride
// D + PAD, 16 bytes per cp.async; rows past the end of the sequence become zeros (so padded
// keys and values contribute exactly nothing, never stale NaNs).
template <typename T, int D>
__device__ __forceinline__ void load_tile_async(T *dst, const T *src, int t0, int T_len) {
    constexpr int CHUNKS = D / 8; // 16-byte chunks per row
    for (int c = threadIdx.x; c < 64 * CHUNKS; c += THREADS) {
        int row = c / CHUNKS, col = (c % CHUNKS) * 8;
        bool valid = t0 + row < T_len;
        cp_async_16(dst + row * (D + PAD) + col, src + (valid ? (size_t)(t0 + row) * D + col : 0), valid);
    }
}

template <typename T, int D>
__global__ void __launch_bounds__(THREADS)
flash_forward_kernel(T *out, const T *q, const T *k, const T *v, int T_len, float scale_log2, int causal) {
    constexpr int LD = D + PAD;
    extern __shared__ __align__(16) unsigned char smem[];
    T *q_s = reinterpret_cast<T *>(smem); // (BR, LD)
    T *kv_s = q_s + BR * LD;               // buffer b: K at kv_s + 2 b BC LD, V after it

    // Causal blocks near the end of the sequence have the most tiles: start them first.
    int q0 = (causal ? gridDim.x - 1 - blockIdx.x : blockIdx.x) * BR;
    size_t head = (size_t)blockIdx.y * T_len * D; // (b, h) offset
    q += head;
    k += head;
    v += head;
    out += head;
    int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
    int row0 = q0 + warp * 16 + g; // this thread's two query rows: row0 and row0 + 8

    int n_tiles = (T_len + BC - 1) / BC;
    if (causal) n_tiles = min(n_tiles, (q0 + BR - 1) / BC + 1); // up to the tile holding the last query
    load_tile_async<T, D>(q_s, q, q0, T_len);
    load_tile_async<T, D>(kv_s, k, 0, T_len);
    load_tile_async<T, D>(kv_s + BC * LD, v, 0, T_len);
    cp_async_commit();
    cp_async_wait<0>();
    __syncthreads();
    uint32_t qa[D / 16][4]; // the warp's 16 x D slice of Q as A fragments
    const T *qw = q_s + warp * 16 * LD;
#pragma unroll
    for (int kk = 0; kk < D / 16; kk++) {
        int col = kk * 16 + 2 * t;
        qa[kk][0] = load_pair(qw + g * LD + col);
        qa[kk][1] = load_pair(qw + (g + 8) * LD + col);
        qa[kk][2] = load_pair(qw + g * LD + col + 8);
        qa[kk][3] = load_pair(qw + (g + 8) * LD + col + 8);
    }

    float o[D / 8][4]; // O as D / 8 accumulator tiles of 16 x 8
#pragma unroll
    for (int j = 0; j < D / 8; j++) o[j][0] = o[j][1] = o[j][2] = o[j][3] = 0.0f;
    float m[2] = {-INFINITY, -INFINITY}; // running max of rows row0, row0 + 8 (base-2 units)
    float l[2] = {0.0f, 0.0f};           // this thread's share of their running sums

    for (int tile = 0; tile < n_tiles; tile++) {
        int k0 = tile * BC;
        const T *k_s = kv_s + (tile & 1) * 2 * BC * LD, *v_s = k_s + BC * LD;
        // Prefetch the next tile into the other buffer, which every warp finished reading
        // before the barrier that ended the previous iteration; then wait for this tile.
        if (tile + 1 < n_tiles) {
            T *next = kv_s + ((tile + 1) & 1) * 2 * BC * LD;
            load_tile_async<T, D>(next, k, k0 + BC, T_len);
            load_tile_async<T, D>(next + BC * LD, v, k0 + BC, T_len);
            cp_async_commit();
            cp_async_wait<1>();
        } else {
            cp_async_wait<0>();
        }
        __syncthreads(); // this tile's copies, from every thread, are visible

        // S = Q K^T: 8 accumulator tiles of 16 queries x 8 keys. B[d][key] = K[key][d], so a
        // B fragment is two adjacent elements of one K row.
        float s[BC / 8][4];
#pragma unroll
        for (int j = 0; j < BC / 8; j++) {
            s[j][0] = s[j][1] = s[j][2] = s[j][3] = 0.0f;
            const T *kr = k_s + (j * 8 + g) * LD + 2 * t;
#pragma unroll
            for (int kk = 0; kk < D / 16; kk++) {
                uint32_t b[2] = {load_pair(kr + kk * 16), load_pair(kr + kk * 16 + 8)};
                mma_16816<T>(s[j], qa[kk], b);
            }
        }

        // Scale to base 2; mask keys past the end and, when causal, keys after the query.
        bool mask = k0 + BC > T_len || (causal && k0 + BC - 1 > q0 + warp * 16);
#pragma unroll
        for (int j = 0; j < BC / 8; j++)
#pragma unroll
            for (int e = 0; e < 4; e++) {
                int key = k0 + j * 8 + 2 * t + (e & 1), row = row0 + (e >= 2 ? 8 : 0);
                float x = s[j][e] * scale_log2;
                if (mask && (key >= T_len || (causal && key > row))) x = -INFINITY;
                s[j][e] = x;
            }

        // New row max: over this thread's columns, then the 4 threads sharing the row.
        float m_new[2] = {m[0], m[1]};
#pragma unroll
        for (int j = 0; j < BC / 8; j++) {
            m_new[0] = fmaxf(m_new[0], fmaxf(s[j][0], s[j][1]));
            m_new[1] = fmaxf(m_new[1], fmaxf(s[j][2], s[j][3]));
        }
        float alpha[2], base[2];
#pragma unroll
        for (int i = 0; i < 2; i++) {
            m_new[i] = fmaxf(m_new[i], __shfl_xor_sync(0xffffffffu, m_new[i], 1));
            m_new[i] = fmaxf(m_new[i], __shfl_xor_sync(0xffffffffu, m_new[i], 2));
            base[i] = m_new[i] == -INFINITY ? 0.0f : m_new[i]; // a row with nothing visible yet: no NaN
            alpha[i] = exp2f(m[i] - base[i]);
            m[i] = m_new[i];
        }

        // P = exp2(S - m), row sums, and the rescale of what came before.
        float sum[2] = {0.0f, 0.0f};
#pragma unroll
        for (int j = 0; j < BC / 8; j++)
#pragma unroll
            for (int e = 0; e < 4; e++) {
                s[j][e] = exp2f(s[j][e] - base[e >> 1]);
                sum[e >> 1] += s[j][e];
            }
        l[0] = l[0] * alpha[0] + sum[0];
        l[1] = l[1] * alpha[1] + sum[1];
#pragma unroll
        for (int j = 0; j < D / 8; j++) {
            o[j][0] *= alpha[0];
            o[j][1] *= alpha[0];
            o[j][2] *= alpha[1];
            o[j][3] *= alpha[1];
        }

        // O += P V, 16 keys at a time. P's A fragment for keys 16 kk .. 16 kk + 15 is the
        // accumulators of S tiles 2 kk and 2 kk + 1, rounded to T. V's B fragments come
        // from ldmatrix.trans, two 8-wide column tiles per call: lane 8i + r addresses key
        // row r (+ 8 for odd i) and column block i / 2 of the 16 columns at 16 dp.
#pragma unroll
        for (int kk = 0; kk < BC / 16; kk++) {
            uint32_t pa[4] = {pack_pair<T>(s[2 * kk][0], s[2 * kk][1]), pack_pair<T>(s[2 * kk][2], s[2 * kk][3]),
                              pack_pair<T>(s[2 * kk + 1][0], s[2 * kk + 1][1]),
                              pack_pair<T>(s[2 * kk + 1][2], s[2 * kk + 1][3])};
            int i = lane / 8, r = lane % 8;
            const T *vrow = v_s + (kk * 16 + r + (i & 1) * 8) * LD + (i >> 1) * 8;
#pragma unroll
            for (int dp = 0; dp < D / 16; dp++) {
                uint32_t b[4];
                ldmatrix_x4_trans(b, vrow + dp * 16);
                mma_16816<T>(o[2 * dp], pa, b);
                mma_16816<T>(o[2 * dp + 1], pa, b + 2);
            }
        }
        __syncthreads(); // every warp is done with this buffer before it is refilled
    }

    // O / l, with l summed over the 4 threads sharing each row.
#pragma unroll
    for (int i = 0; i < 2; i++) {
        l[i] += __shfl_xor_sync(0xffffffffu, l[i], 1);
        l[i] += __shfl_xor_sync(0xffffffffu, l[i], 2);
        l[i] = 1.0f / l[i];
    }
#pragma unroll
    for (int j = 0; j < D / 8; j++) {
        int col = j * 8 + 2 * t;
        if (row0 < T_len)
            *reinterpret_cast<uint32_t *>(out + (size_t)row0 * D + col) = pack_pair<T>(o[j][0] * l[0], o[j][1] * l[0]);
        if (row0 + 8 < T_len)
            *reinterpret_cast<uint32_t *>(out + (size_t)(row0 + 8) * D + col) =
                pack_pair<T>(o[j][2] * l[1], o[j][3] * l[1]);
    }
}

int cuda_attention_flash_supported(int D, DType t) {
    return (D == 64 || D == 128) && (t == DTYPE_F16 || t == DTYPE_BF16);
}

template <typename T, int D>
static void launch_flash(void *out, const void *q, const void *k, const void *v, int B, int H, int T_len,
                         int causal) {
    size_t smem = 5 * BR * (D + PAD) * sizeof(T); // past the 48 KiB default at D = 128
    static bool configured = false;
    if (!configured) {
        cudaCheck(cudaFuncSetAttribute(flash_forward_kernel<T, D>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                       (int)smem));
        configured = true;
    }
    float scale_log2 = 1.4426950408889634f / sqrtf((float)D); // 1/sqrt(D) * log2(e)
    dim3 grid((T_len + BR - 1) / BR, B * H);
    flash_forward_kernel<T, D><<<grid, THREADS, smem>>>((T *)out, (const T *)q, (const T *)k, (const T *)v, T_len,
                                                        scale_log2, causal);
    cudaCheckLaunch();
}

void cuda_attention_flash(void *out, const void *q, const void *k, const void *v, int B, int H, int T, int D,
                          DType t, int causal) {
    if (!cuda_attention_flash_supported(D, t))
        die("cuda_attention_flash: %s with head dim %d is not supported (fp16 or bf16, D = 64 or 128)",
            dtype_name(t), D);
    if (B * H > 65535) die("cuda_attention_flash: B * H = %d exceeds the grid's 65535", B * H);
    if (T <= 0) return;
    if (t == DTYPE_F16) {
        if (D == 64) launch_flash<__half, 64>(out, q, k, v, B, H, T, causal);
        else launch_flash<__half, 128>(out, q, k, v, B, H, T, causal);
    } else {
        if (D == 64) launch_flash<__nv_bfloat16, 64>(out, q, k, v, B, H, T, causal);
        else launch_flash<__nv_bfloat16, 128>(out, q, k, v, B, H, T, causal);
    }
}
