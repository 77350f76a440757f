// mma.h: the PTX primitives the flash kernel is built from (inline assembly, sm_80 and
// newer): warp-level tensor-core MMA and matrix loads, with the register layouts they imply,
// and asynchronous global-to-shared copies.
//
// mma.sync m16n8k16, row.col, fp16 or bf16 inputs, fp32 accumulators. With lane = 4 g + t
// (g = lane / 4 the "group", t = lane % 4):
//   A (16 x 16), 4 registers of 2 elements:  a[0] = A[g][2t, 2t+1]    a[1] = A[g+8][2t, 2t+1]
//                                            a[2] = A[g][2t+8, 2t+9]  a[3] = A[g+8][2t+8, 2t+9]
//   B (16 x 8),  2 registers:                b[0] = B[2t, 2t+1][g]    b[1] = B[2t+8, 2t+9][g]
//   C (16 x 8),  4 floats:                   c[0..1] = C[g][2t, 2t+1] c[2..3] = C[g+8][2t, 2t+1]
// The lower-indexed element of a pair sits in the low 16 bits.
#pragma once

#include <stdint.h>

#include "cuda_common.h"

// c += a b for one 16x8x16 tile.
template <typename T> __device__ __forceinline__ void mma_16816(float c[4], const uint32_t a[4], const uint32_t b[2]);

template <> __device__ __forceinline__ void mma_16816<__half>(float c[4], const uint32_t a[4], const uint32_t b[2]) {
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
                 "{%0,%1,%2,%3};\n"
                 : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}

template <>
__device__ __forceinline__ void mma_16816<__nv_bfloat16>(float c[4], const uint32_t a[4], const uint32_t b[2]) {
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
                 "{%0,%1,%2,%3};\n"
                 : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}

// Four 8x8 matrices of 16-bit elements from shared memory, transposed on the way: lanes
// 8i .. 8i+7 give the addresses of rows 0..7 of matrix i (16 bytes each, 16-byte aligned),
// and lane 4g + t receives in r[i] the elements (row 2t, column g) and (row 2t+1, column g)
// of matrix i. For a row-major (key, dim) V tile that is exactly an mma B fragment of V.
__device__ __forceinline__ void ldmatrix_x4_trans(uint32_t r[4], const void *smem_row) {
    unsigned addr = (unsigned)__cvta_generic_to_shared(smem_row);
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(addr)
                 : "memory");
}

// Two adjacent 16-bit elements as one register (p must be 4-byte aligned).
template <typename T> __device__ __forceinline__ uint32_t load_pair(const T *p) {
    return *reinterpret_cast<const uint32_t *>(p);
}

// Two floats rounded to T and packed as one register, a in the low half.
template <typename T> __device__ __forceinline__ uint32_t pack_pair(float a, float b);

template <> __device__ __forceinline__ uint32_t pack_pair<__half>(float a, float b) {
    union { __half2 h; uint32_t u; } v;
    v.h = __floats2half2_rn(a, b);
    return v.u;
}

template <> __device__ __forceinline__ uint32_t pack_pair<__nv_bfloat16>(float a, float b) {
    union { __nv_bfloat162 h; uint32_t u; } v;
    v.h = __floats2bfloat162_rn(a, b);
    return v.u;
}

// Asynchronous 16-byte copy from global to shared memory (bypassing L1); when !valid the
// 16 bytes are zero-filled instead (src is then not read, but must be a valid address).
// Copies issued since the last commit form a group; wait<N> blocks until at most N groups
// are still in flight. Other threads see the data only after a __syncthreads().
__device__ __forceinline__ void cp_async_16(void *smem_dst, const void *src, bool valid) {
    unsigned dst = (unsigned)__cvta_generic_to_shared(smem_dst);
    int src_bytes = valid ? 16 : 0;
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src), "r"(src_bytes) : "memory");
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::: "memory"); }
template <int N> __device__ __forceinline__ void cp_async_wait() {
    asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
}
