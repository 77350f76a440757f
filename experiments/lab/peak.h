// peak.h: this machine's peak figures, measured, for the roofline and the hardware budget:
// memory bandwidth with STREAM's copy and triad kernels (McCalpin's STREAM conventions:
// arrays of doubles each at least 4x the last-level cache, bytes counted as the arrays a
// kernel names, reads plus writes, write-allocate traffic not counted, 1 GB/s = 1e9 bytes/s),
// sgemm FLOP/s with a large square cblas_sgemm (2 n^3 FLOPs), and the physical ceiling the
// sgemm is measured against: a register-only loop of independent fused multiply-adds at the
// widest vector width this build targets (2 FLOPs per lane per FMA).
// In the harness because several experiments measure against these figures: hardware_budget
// (the machine's row and roofline), attention_kernels (the sgemm ceiling of its chart) and
// quantization (the STREAM bandwidth its decode is held to).
//
//   size_t n = stream_array_len(peak_llc_bytes(), 64u << 20);
//   StreamResult r = stream_measure(STREAM_TRIAD, n, omp_get_max_threads(), 10);
//   SgemmPeak s = peak_sgemm(2048, 3, 10, 1.0, 1);
//   FmaPeak f = peak_fma(omp_get_max_threads(), 10);
#pragma once

#include <stddef.h>
#include <stdint.h>

#include "bench.h"

typedef enum { STREAM_COPY, STREAM_TRIAD } StreamKernel;

const char *stream_kernel_name(StreamKernel k); // "copy", "triad"

// The kernels, on `threads` OpenMP threads with a static schedule:
//   copy:  c[i] = a[i]
//   triad: a[i] = b[i] + scalar * c[i]
void stream_copy(double *c, const double *a, size_t n, int threads);
void stream_triad(double *a, const double *b, const double *c, double scalar, size_t n, int threads);

// Bytes STREAM counts for one pass over n elements: 16 n (copy), 24 n (triad).
double stream_bytes(StreamKernel k, size_t n);

// Size of the largest CPU cache in bytes: sysfs (what this CPU sees), else sysconf; 0 when
// neither says.
size_t peak_llc_bytes(void);

// Elements per array: at least 4 x llc_bytes (STREAM's rule) and at least min_bytes.
size_t stream_array_len(size_t llc_bytes, size_t min_bytes);

typedef struct {
    StreamKernel kernel;
    int threads;
    size_t n;          // doubles per array
    BenchStats time;   // per pass, ms
    double gb_s_median, gb_s_p10, gb_s_p90, gb_s_best; // rates of the median, p90, p10 and fastest pass
} StreamResult;

// Time `reps` passes (after one untimed pass) over three fresh arrays of n doubles, first
// touched by the threads that run the kernel (so pages land near them), then check every
// element of the result; a wrong value is a bug and dies.
StreamResult stream_measure(StreamKernel k, size_t n, int threads, int reps);

typedef struct {
    int n;              // side of the square matrices
    BenchStats time;    // per call, ms
    double gflop_s_median, gflop_s_best;
} SgemmPeak;

// cblas_sgemm of two random (n, n) fp32 matrices on OpenBLAS's current thread count: one
// untimed call, then min_reps .. max_reps timed ones within budget_s seconds.
SgemmPeak peak_sgemm(int n, int min_reps, int max_reps, double budget_s, uint64_t seed);

typedef struct {
    int threads;
    int lanes;          // fp32 lanes per FMA: 16 (AVX-512), 8 (AVX2 + FMA), 1 (scalar fmaf)
    const char *isa;    // "avx512", "avx2+fma", "scalar"
    BenchStats time;    // per pass, ms
    double gflop_s_median, gflop_s_p10, gflop_s_p90, gflop_s_best;
} FmaPeak;

// Time `reps` passes (after one untimed pass) of the FMA loop on `threads` OpenMP threads,
// each running the whole loop; dies if the loop's result is not the value it must compute.
FmaPeak peak_fma(int threads, int reps);
