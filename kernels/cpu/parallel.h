// parallel.h: how the CPU kernels decide between one thread and all (internal to kernels/cpu).
//
// A decode step's matmuls, attention and pointwise ops are small: a 256 x 256 matrix-vector
// product takes about 10 us on one core, the same order as an OpenMP fork and barrier. And a
// barrier that waits for a thread descheduled by another process costs a whole scheduler time
// slice (issue 18: a tiny model decoded at 2 tok/s on 2 threads with a build running, 5,000 on
// one). So a kernel forks only for work of at least PARALLEL_MIN_MACS multiply-adds.
#ifndef INFERLAB_KERNELS_CPU_PARALLEL_H
#define INFERLAB_KERNELS_CPU_PARALLEL_H

#define PARALLEL_MIN_MACS (1 << 16)

// Matmuls of up to this many input rows stream each weight row once and dot it with every
// input row (kernels.c, quant.c): a decode step, a speculative verification, a small batch.
#define MATVEC_MAX_ROWS 16

#endif
