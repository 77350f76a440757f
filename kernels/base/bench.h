// bench.h: the timing methodology every experiment shares.
// A measurement runs the function `warmup` times untimed, then `reps` times timed with a
// monotonic clock, and reports the median, p10, p90, min and max in milliseconds.
#pragma once

typedef struct {
    double median_ms, p10_ms, p90_ms, min_ms, max_ms;
    int reps;
} BenchStats;

double now_seconds(void); // monotonic clock

// Summarise `n` >= 1 samples in milliseconds (sorts a copy). Quantiles interpolate linearly
// between closest ranks at position q * (n - 1), as numpy's default does.
BenchStats bench_stats(const double *samples_ms, int n);

// Time fn(ctx): warmup untimed calls, then reps timed ones.
BenchStats bench_run(void (*fn)(void *ctx), void *ctx, int warmup, int reps);

// Time fn(ctx) for a sweep whose calls range from microseconds to seconds: warmup untimed
// calls, then at least min_reps timed ones, continuing while fewer than max_reps have run
// and the timed calls have taken less than budget_s seconds in all. The repetition count
// then depends on the clock; use bench_run where it must be reproducible.
BenchStats bench_run_budget(void (*fn)(void *ctx), void *ctx, int warmup, int min_reps, int max_reps,
                            double budget_s);
