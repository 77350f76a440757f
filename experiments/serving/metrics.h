// metrics.h: the serving experiment's metrics, computed as vLLM's serving benchmark computes
// them (vllm/benchmarks/serve.py, calculate_metrics; the times from
// vllm/benchmarks/lib/endpoint_request_func.py), from plain per-request timings, so the
// module depends on nothing of the scheduler's.
//
//   RequestTiming t[n] = {{sent_s, prompt_tokens, n_out, token_s}, ...};
//   ServingMetrics m;
//   serving_metrics(t, n, duration_s, SERVING_DEFAULT_PERCENTILES, SERVING_N_DEFAULT_PERCENTILES, &m, &err);
//   SloSet slo = slo_scaled(SLO_MLPERF_SERVER, 10.0);   // a model 10x slower than the 70B
//   Goodput g;
//   serving_goodput(t, n, duration_s, &slo, &g, &err);
//   latency_columns(buf, size, "ttft_ms", m.percentiles, m.n_percentiles, &err);  // a CSV header part
//   latency_cells(buf, size, &m.ttft_ms, &err);                                    // its row part
//
// What was read in vLLM's source (vllm-project/vllm, the files above, at commits 009e6d4 and
// 02cfb53) and is done here:
//   - every time is from the moment the request was sent (st): TTFT = first token - st,
//     E2EL ("latency") = last token - st, ITL = each gap between consecutive tokens;
//   - TPOT = (E2EL - TTFT) / (output tokens - 1), only for requests of more than one token:
//     a one-token request is left out of the TPOT statistics, but for goodput its TPOT
//     counts as 0 ("if output_len <= 1, we regard tpot as 0 for goodput"), so it always
//     meets a TPOT objective;
//   - ITL pools every request's gaps into one list;
//   - each list is summarised in seconds and scaled to ms: np.mean, np.median, np.std
//     (ddof 0: the population std) and np.percentile at the caller's percentiles (linear
//     interpolation between the closest ranks); an empty list gives 0 everywhere (np.mean(x or 0));
//     medians and percentiles equal numpy's to the bit (the same interpolation formula), means and
//     stds to rounding (numpy sums pairwise): checked against numpy 2.4 on random runs;
//   - request throughput = completed / duration, output token throughput = output tokens /
//     duration, total token throughput = (prompt + output tokens) / duration;
//   - goodput = requests meeting every objective given / duration, an objective met when
//     the request's value <= the threshold (`s >= r`, thresholds converted ms -> s first);
//     an objective not given is not checked, and with none given vLLM reports no goodput
//     (here: an error). vLLM rejects negative thresholds; here 0 or less means "not set".
// Added here: the fraction of requests meeting the objectives (good / completed).
// Not done: vLLM's failed requests (every request here completed, n_out >= 1) and its
// tokens counted by re-tokenising text (the token times here are per token).
//
// The named objectives are MLPerf Inference's for Llama-2-70B (mlcommons/inference,
// loadgen/mlperf.conf at 001712e): llama2-70b.Server ttft_latency = 2000, tpot_latency = 200 ms ("server")
// and llama2-70b-interactive.Server ttft_latency = 450, tpot_latency = 40 ms ("interactive").
// MLPerf applies them to the 99th percentile of TTFT and TPOT over the run; here they are
// vLLM's per-request goodput objectives.
//
// Tests: make build/tests/test_serving_metrics && ./build/tests/test_serving_metrics
#pragma once

#include <stddef.h>

#include "common.h"

#define SERVING_MAX_PERCENTILES 8

// p50, p90, p99
enum { SERVING_N_DEFAULT_PERCENTILES = 3 };
extern const double SERVING_DEFAULT_PERCENTILES[SERVING_N_DEFAULT_PERCENTILES];

// One completed request, times in seconds on one clock.
typedef struct {
    double sent_s;         // when it was sent (arrived at the server)
    int prompt_tokens;
    int n_out;             // output tokens, >= 1
    const double *token_s; // (n_out) when each output token came, >= sent_s, nondecreasing
} RequestTiming;

// One latency's statistics, in ms. n = 0: every statistic is 0, as in vLLM.
typedef struct {
    long n;                                // values summarised (requests, or gaps for ITL)
    double mean, median, std;              // std: population (ddof 0)
    int n_pct;                             // = ServingMetrics.n_percentiles
    double pct[SERVING_MAX_PERCENTILES];   // at ServingMetrics.percentiles, in their order
} LatencySummary;

typedef struct {
    int completed;                          // requests
    long total_input, total_output;         // prompt and output tokens
    double duration_s;
    double request_throughput;              // requests / s
    double output_throughput;               // output tokens / s
    double total_token_throughput;          // (prompt + output tokens) / s
    int n_percentiles;
    double percentiles[SERVING_MAX_PERCENTILES];
    LatencySummary ttft_ms, tpot_ms, itl_ms, e2el_ms;
} ServingMetrics;

// Service-level objectives in ms; a threshold <= 0 is not set.
typedef struct {
    const char *name;
    double ttft_ms, tpot_ms, e2el_ms;
} SloSet;

extern const SloSet SLO_MLPERF_SERVER;      // "server": TTFT <= 2000 ms, TPOT <= 200 ms
extern const SloSet SLO_MLPERF_INTERACTIVE; // "interactive": TTFT <= 450 ms, TPOT <= 40 ms

typedef struct {
    int n_good;          // requests meeting every objective set
    double goodput;      // n_good / duration, requests / s
    double good_frac;    // n_good / completed (0 with no requests)
} Goodput;

// The metrics of the n requests (n >= 0) served in duration_s (> 0), with the latencies'
// percentiles at percentiles (n_percentiles of them, 0..SERVING_MAX_PERCENTILES, each in
// [0, 100]). 0, or -1 with err (a request without tokens, a token before its request was
// sent or before the token ahead of it, a bad duration or percentile).
int serving_metrics(const RequestTiming *reqs, int n, double duration_s, const double *percentiles,
                    int n_percentiles, ServingMetrics *m, Error *err);

// The goodput of the n requests under slo, by vLLM's rule. 0, or -1 with err (what
// serving_metrics rejects, or an slo that sets no threshold).
int serving_goodput(const RequestTiming *reqs, int n, double duration_s, const SloSet *slo, Goodput *g,
                    Error *err);

// slo with every threshold multiplied by factor (> 0), its name kept: the objectives of a
// model `factor` times slower than the one they were set for. Unset thresholds stay unset.
SloSet slo_scaled(SloSet slo, double factor);

// CSV: "<prefix>_mean,<prefix>_median,<prefix>_std,<prefix>_p<q>,..." for each percentile q
// (printed %g: p50, p99.9) into buf, and a summary's values in the same order (%.6g each),
// without a trailing comma. 0, or -1 with err (buf too small, a bad percentile list).
int latency_columns(char *buf, size_t size, const char *prefix, const double *percentiles, int n_percentiles,
                    Error *err);
int latency_cells(char *buf, size_t size, const LatencySummary *s, Error *err);
