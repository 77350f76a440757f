// parallel.h: how the CPU kernels decide between one thread and all (internal to kernels/cpu).
//
// A decode step's matmuls, attention and pointwise ops are small: a 256 x 256 matrix-vector
// product takes about 10 us on one core, the same order as an OpenMP fork and barrier. And a
// barrier that waits for a thread descheduled by another process costs a whole scheduler time
// slice (a tiny model decoded at 2 tok/s on 2 threads with a build running, 5,000 on
// one). So a kernel forks only for work of at least PARALLEL_MIN_MACS multiply-adds.
#ifndef INFERLAB_KERNELS_CPU_PARALLEL_H
#define INFERLAB_KERNELS_CPU_PARALLEL_H

#include <omp.h>

#define PARALLEL_MIN_MACS (1 << 16)

// Is work of `macs` multiply-adds worth a fork here: enough of it, more than one thread, and
// not already inside a parallel region (the trainer calls kernels from its own).
static inline int parallel_worth(double macs) {
    return macs >= PARALLEL_MIN_MACS && omp_get_max_threads() > 1 && !omp_in_parallel();
}

// PARALLEL_FOR(macs, clauses, for (...) ...) runs the loop as `omp parallel for clauses` when
// parallel_worth(macs), else as plain code outside any OpenMP region. Entering a region costs
// about 0.4 us even when an if clause keeps it to one thread (0.6 us nested; gcc 12's libgomp
// on the EPYC Zen 4), and a decode step of the lab's 4-layer target entered ~46 of them in
// 0.16 ms (its f32 matvecs keep theirs: kernels.c says why).
#define PARALLEL_PRAGMA(x) _Pragma(#x)
#define PARALLEL_FOR(macs, clauses, ...)                                                           \
    do {                                                                                         \
        if (parallel_worth(macs)) {                                                              \
            PARALLEL_PRAGMA(omp parallel for clauses)                                            \
            __VA_ARGS__                                                                          \
        } else {                                                                                 \
            __VA_ARGS__                                                                          \
        }                                                                                        \
    } while (0)

// Matmuls of up to this many input rows stream each weight row once and dot it with every
// input row (kernels.c, quant.c): a decode step, a speculative verification, a small batch.
#define MATVEC_MAX_ROWS 16

#endif
