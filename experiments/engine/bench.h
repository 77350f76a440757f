// bench.h: the timing methodology every experiment shares.
// A measurement runs the function `warmup` times untimed, then `reps` times timed with a
// monotonic clock, and reports the median, p10, p90, min and max in milliseconds.
#pragma once

typedef struct {
    double median_ms, p10_ms, p90_ms, min_ms, max_ms;
    int reps;
} BenchStats;

double now_seconds(void); // monotonic clock

// Summarise `n` samples in milliseconds (sorts a copy).
BenchStats bench_stats(const double *samples_ms, int n);

// Time fn(ctx): warmup untimed calls, then reps timed ones.
BenchStats bench_run(void (*fn)(void *ctx), void *ctx, int warmup, int reps);
