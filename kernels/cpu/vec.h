// vec.h: the one SIMD helper the CPU kernels share, a float dot product. Internal to
// kernels/cpu. gcc does not vectorise a float reduction without -ffast-math (it may not
// reorder the additions), so the reordering is written out: four independent 8-wide
// accumulators, which also hide the FMA latency.
#ifndef INFERLAB_KERNELS_CPU_VEC_H
#define INFERLAB_KERNELS_CPU_VEC_H

typedef float v8f __attribute__((vector_size(32), aligned(4))); // unaligned 8-float vector

static inline float dot_f32(const float *restrict a, const float *restrict b, int n) {
    v8f s0 = {0}, s1 = {0}, s2 = {0}, s3 = {0};
    int j = 0;
    for (; j + 32 <= n; j += 32) {
        s0 += *(const v8f *)(a + j) * *(const v8f *)(b + j);
        s1 += *(const v8f *)(a + j + 8) * *(const v8f *)(b + j + 8);
        s2 += *(const v8f *)(a + j + 16) * *(const v8f *)(b + j + 16);
        s3 += *(const v8f *)(a + j + 24) * *(const v8f *)(b + j + 24);
    }
    for (; j + 8 <= n; j += 8) s0 += *(const v8f *)(a + j) * *(const v8f *)(b + j);
    v8f s = (s0 + s1) + (s2 + s3);
    float sum = 0.0f;
    for (int k = 0; k < 8; k++) sum += s[k];
    for (; j < n; j++) sum += a[j] * b[j];
    return sum;
}

typedef signed char v8c __attribute__((vector_size(8), aligned(1))); // unaligned 8 int8

// The dot of fp32 a with int8 codes b (the int8 KV cache's keys), in dot_f32's order.
static inline float dot_f32_i8(const float *restrict a, const signed char *restrict b, int n) {
    v8f s0 = {0}, s1 = {0};
    int j = 0;
    for (; j + 16 <= n; j += 16) {
        s0 += *(const v8f *)(a + j) * __builtin_convertvector(*(const v8c *)(b + j), v8f);
        s1 += *(const v8f *)(a + j + 8) * __builtin_convertvector(*(const v8c *)(b + j + 8), v8f);
    }
    v8f s = s0 + s1;
    float sum = 0.0f;
    for (int k = 0; k < 8; k++) sum += s[k];
    for (; j < n; j++) sum += a[j] * b[j];
    return sum;
}

#endif
