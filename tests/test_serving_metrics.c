// test_serving_metrics.c: the serving experiment's metrics (experiments/serving/metrics.h)
// on three requests whose statistics are worked by hand below with numpy's formulas:
//   - TTFT, TPOT, ITL and E2EL: mean, median, std, p10/p50/p90/p99, in ms;
//   - the wrong variants they must not equal: the sample std (ddof 1), a one-token request's
//     TPOT counted as 0, ITL averaged per request instead of pooled;
//   - throughputs (requests, output tokens, prompt + output tokens per second);
//   - goodput under each objective alone and together, with requests exactly at a threshold
//     (vLLM: value <= threshold is met) and a one-token request meeting any TPOT objective
//     (vLLM takes its TPOT as 0 there); the MLPerf objectives and their scaling;
//   - no requests, only one-token requests, the CSV columns and cells, and the errors.
// Run: make build/tests/test_serving_metrics && ./build/tests/test_serving_metrics
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <math.h>
#include <string.h>

#include "metrics.h"

// Times are multiples of 1/8 s, exact in binary, so a value at a threshold is exactly there.
//   A: sent 0, 8 prompt tokens, tokens at 0.5 0.625 0.75 1.0 1.5
//      TTFT 0.5, E2EL 1.5, TPOT (1.5 - 0.5) / 4 = 0.25, gaps 0.125 0.125 0.25 0.5
//   B: sent 1, 4 prompt tokens, tokens at 1.25 1.375 1.5
//      TTFT 0.25, E2EL 0.5, TPOT (0.5 - 0.25) / 2 = 0.125, gaps 0.125 0.125
//   C: sent 2, 6 prompt tokens, one token at 3.0
//      TTFT 1.0, E2EL 1.0, no TPOT (0 for goodput), no gaps
// over a run of 4 s.
static const double TOKENS_A[] = {0.5, 0.625, 0.75, 1.0, 1.5}, TOKENS_B[] = {1.25, 1.375, 1.5}, TOKENS_C[] = {3.0};
static const RequestTiming REQS[] = {{0.0, 8, 5, TOKENS_A}, {1.0, 4, 3, TOKENS_B}, {2.0, 6, 1, TOKENS_C}};
enum { N_REQS = 3 };
#define DURATION_S 4.0
static const double PCT[] = {10, 50, 90, 99};
enum { N_PCT = 4 };

static int near(double got, double want) { return fabs(got - want) <= 1e-9 * fmax(1.0, fabs(want)); }
#define assert_near(got, want)                                                                          \
    do {                                                                                                \
        if (!near(got, want)) fail_msg("%s = %.17g, want %.17g", #got, (double)(got), (double)(want));  \
    } while (0)

static ServingMetrics metrics_of(const RequestTiming *reqs, int n) {
    ServingMetrics m;
    Error err;
    if (serving_metrics(reqs, n, DURATION_S, PCT, N_PCT, &m, &err)) fail_msg("%s", err.msg);
    return m;
}

static Goodput goodput_of(double ttft_ms, double tpot_ms, double e2el_ms) {
    SloSet slo = {"test", ttft_ms, tpot_ms, e2el_ms};
    Goodput g;
    Error err;
    if (serving_goodput(REQS, N_REQS, DURATION_S, &slo, &g, &err)) fail_msg("%s", err.msg);
    return g;
}

// --- the latencies ---------------------------------------------------------------------------

static void test_ttft(void **state) {
    (void)state;
    // sorted 0.25 0.5 1; mean 7/12; deviations -4/12 -1/12 5/12, squares 42/144:
    // population variance 42/144/3 = 7/72, sample 42/144/2 = 7/48
    // percentile: index 2q/100: p10 at 0.2 -> 0.25 + 0.2 * 0.25 = 0.3; p90 at 1.8 -> 0.5 + 0.8 * 0.5 = 0.9;
    // p99 at 1.98 -> 0.99
    ServingMetrics m = metrics_of(REQS, N_REQS);
    assert_int_equal(m.ttft_ms.n, 3);
    assert_near(m.ttft_ms.mean, 1e3 * 7.0 / 12);
    assert_near(m.ttft_ms.median, 500);
    assert_near(m.ttft_ms.std, 1e3 * sqrt(7.0 / 72));
    assert_int_equal(m.ttft_ms.n_pct, N_PCT);
    assert_near(m.ttft_ms.pct[0], 300);
    assert_near(m.ttft_ms.pct[1], 500);
    assert_near(m.ttft_ms.pct[2], 900);
    assert_near(m.ttft_ms.pct[3], 990);
}

static void test_tpot_leaves_out_one_token_requests(void **state) {
    (void)state;
    // A 0.25, B 0.125 (C has one token): mean = median = 0.1875, population std 0.0625;
    // index q/100: p10 0.125 + 0.1 * 0.125 = 0.1375, p90 0.2375, p99 0.24875
    ServingMetrics m = metrics_of(REQS, N_REQS);
    assert_int_equal(m.tpot_ms.n, 2);
    assert_near(m.tpot_ms.mean, 187.5);
    assert_near(m.tpot_ms.median, 187.5);
    assert_near(m.tpot_ms.std, 62.5);
    assert_near(m.tpot_ms.pct[0], 137.5);
    assert_near(m.tpot_ms.pct[1], 187.5);
    assert_near(m.tpot_ms.pct[2], 237.5);
    assert_near(m.tpot_ms.pct[3], 248.75);
    assert_false(near(m.tpot_ms.mean, 125)); // C's TPOT taken as 0: (0.25 + 0.125 + 0) / 3
}

static void test_itl_pools_every_gap(void **state) {
    (void)state;
    // pooled, sorted: 0.125 x4, 0.25, 0.5; mean 1.25 / 6 = 5/24; median (0.125 + 0.125) / 2;
    // deviations -2/24 x4, 1/24, 7/24, squares 66/576: population variance 11/576, std sqrt(11) / 24;
    // index 5q/100: p10 at 0.5 -> 0.125, p50 at 2.5 -> 0.125, p90 at 4.5 -> 0.375, p99 at 4.95 -> 0.4875
    ServingMetrics m = metrics_of(REQS, N_REQS);
    assert_int_equal(m.itl_ms.n, 6);
    assert_near(m.itl_ms.mean, 1e3 * 5.0 / 24);
    assert_near(m.itl_ms.median, 125);
    assert_near(m.itl_ms.std, 1e3 * sqrt(11.0) / 24);
    assert_near(m.itl_ms.pct[0], 125);
    assert_near(m.itl_ms.pct[1], 125);
    assert_near(m.itl_ms.pct[2], 375);
    assert_near(m.itl_ms.pct[3], 487.5);
    assert_false(near(m.itl_ms.mean, 187.5)); // per-request means (0.25 + 0.125) / 2: not pooled
}

static void test_e2el(void **state) {
    (void)state;
    // sorted 0.5 1 1.5: mean = median 1, population variance 0.5 / 3;
    // index 2q/100: p10 0.6, p90 1.4, p99 1.49
    ServingMetrics m = metrics_of(REQS, N_REQS);
    assert_int_equal(m.e2el_ms.n, 3);
    assert_near(m.e2el_ms.mean, 1000);
    assert_near(m.e2el_ms.median, 1000);
    assert_near(m.e2el_ms.std, 1e3 * sqrt(0.5 / 3));
    assert_near(m.e2el_ms.pct[0], 600);
    assert_near(m.e2el_ms.pct[1], 1000);
    assert_near(m.e2el_ms.pct[2], 1400);
    assert_near(m.e2el_ms.pct[3], 1490);
}

// numpy's np.std divides by n (ddof 0); the sample std (n - 1) differs on every list here.
static void test_std_is_population_not_sample(void **state) {
    (void)state;
    ServingMetrics m = metrics_of(REQS, N_REQS);
    assert_near(m.ttft_ms.std, 1e3 * sqrt(7.0 / 72));
    assert_false(near(m.ttft_ms.std, 1e3 * sqrt(7.0 / 48)));
    assert_near(m.tpot_ms.std, 62.5);
    assert_false(near(m.tpot_ms.std, 62.5 * sqrt(2.0)));
    assert_false(near(m.itl_ms.std, 1e3 * sqrt(66.0 / 576 / 5)));
    assert_false(near(m.e2el_ms.std, 1e3 * sqrt(0.5 / 2)));
}

static void test_percentile_ends_and_order(void **state) {
    (void)state;
    // p0 and p100 are the extremes; the percentiles keep the caller's order
    const double pct[] = {100, 0, 50};
    ServingMetrics m;
    Error err;
    assert_int_equal(serving_metrics(REQS, N_REQS, DURATION_S, pct, 3, &m, &err), 0);
    assert_int_equal(m.n_percentiles, 3);
    assert_near(m.percentiles[0], 100);
    assert_near(m.ttft_ms.pct[0], 1000);
    assert_near(m.ttft_ms.pct[1], 250);
    assert_near(m.ttft_ms.pct[2], 500);
    assert_near(m.itl_ms.pct[0], 500);
    assert_near(m.itl_ms.pct[1], 125);
}

// --- throughputs and the run -----------------------------------------------------------------

static void test_throughputs(void **state) {
    (void)state;
    // 3 requests, 8 + 4 + 6 = 18 prompt and 5 + 3 + 1 = 9 output tokens in 4 s
    ServingMetrics m = metrics_of(REQS, N_REQS);
    assert_int_equal(m.completed, 3);
    assert_int_equal(m.total_input, 18);
    assert_int_equal(m.total_output, 9);
    assert_near(m.duration_s, DURATION_S);
    assert_near(m.request_throughput, 0.75);
    assert_near(m.output_throughput, 2.25);
    assert_near(m.total_token_throughput, 6.75);
}

static void test_empty_lists_give_zeros(void **state) {
    (void)state;
    // no requests: every statistic 0 (vLLM's np.mean(x or 0)), throughputs 0
    ServingMetrics m = metrics_of(REQS, 0);
    assert_int_equal(m.completed, 0);
    assert_int_equal(m.ttft_ms.n, 0);
    assert_true(m.ttft_ms.mean == 0 && m.ttft_ms.std == 0 && m.ttft_ms.pct[3] == 0);
    assert_true(m.request_throughput == 0 && m.total_token_throughput == 0);
    // C alone: no TPOT and no gaps, its TTFT and E2EL
    m = metrics_of(&REQS[2], 1);
    assert_int_equal(m.tpot_ms.n, 0);
    assert_int_equal(m.itl_ms.n, 0);
    assert_true(m.tpot_ms.mean == 0 && m.itl_ms.median == 0);
    assert_near(m.ttft_ms.mean, 1000);
    assert_near(m.e2el_ms.pct[1], 1000);
    assert_int_equal(m.tpot_ms.n_pct, N_PCT);
}

// --- goodput ---------------------------------------------------------------------------------

static void assert_goodput(Goodput g, int n_good) {
    assert_int_equal(g.n_good, n_good);
    assert_near(g.goodput, n_good / DURATION_S);
    assert_near(g.good_frac, n_good / (double)N_REQS);
}

static void test_goodput_each_objective_alone(void **state) {
    (void)state;
    // TTFT <= 500: A (exactly 0.5) and B; C's 1.0 fails. With `<` only B would pass.
    assert_goodput(goodput_of(500, 0, 0), 2);
    assert_goodput(goodput_of(499, 0, 0), 1);
    // TPOT <= 125: B (exactly 0.125) and C (one token: TPOT 0); A's 0.25 fails
    assert_goodput(goodput_of(0, 125, 0), 2);
    // a tiny TPOT objective: only C, whose TPOT is 0
    assert_goodput(goodput_of(0, 1e-6, 0), 1);
    // E2EL <= 1000: B and C (exactly 1.0); A's 1.5 fails
    assert_goodput(goodput_of(0, 0, 1000), 2);
    // negative is unset like 0
    assert_goodput(goodput_of(-1, -1, 1000), 2);
}

static void test_goodput_objectives_together(void **state) {
    (void)state;
    // TTFT 500 and TPOT 125: A fails TPOT, C fails TTFT, B meets both
    assert_goodput(goodput_of(500, 125, 0), 1);
    // TTFT 1000 and TPOT 200: A fails TPOT; B; C (TTFT exactly 1.0, TPOT 0)
    assert_goodput(goodput_of(1000, 200, 0), 2);
    // every request at or under every threshold: A's TPOT 0.25, E2EL 1.5, C's TTFT 1.0
    assert_goodput(goodput_of(1000, 250, 1500), 3);
    // E2EL 1000 removes A, TTFT 250 removes C too
    assert_goodput(goodput_of(250, 0, 1000), 1);
}

static void test_mlperf_objectives_and_scaling(void **state) {
    (void)state;
    assert_string_equal(SLO_MLPERF_SERVER.name, "server");
    assert_true(SLO_MLPERF_SERVER.ttft_ms == 2000 && SLO_MLPERF_SERVER.tpot_ms == 200 &&
                SLO_MLPERF_SERVER.e2el_ms <= 0);
    assert_string_equal(SLO_MLPERF_INTERACTIVE.name, "interactive");
    assert_true(SLO_MLPERF_INTERACTIVE.ttft_ms == 450 && SLO_MLPERF_INTERACTIVE.tpot_ms == 40 &&
                SLO_MLPERF_INTERACTIVE.e2el_ms <= 0);
    SloSet s = slo_scaled(SLO_MLPERF_SERVER, 0.5);
    assert_string_equal(s.name, "server");
    assert_true(s.ttft_ms == 1000 && s.tpot_ms == 100 && s.e2el_ms <= 0); // unset stays unset
    Goodput g;
    Error err;
    // server: TTFT <= 2000, TPOT <= 200: A's TPOT 0.25 fails
    assert_int_equal(serving_goodput(REQS, N_REQS, DURATION_S, &SLO_MLPERF_SERVER, &g, &err), 0);
    assert_goodput(g, 2);
    // interactive x 10: TTFT <= 4500, TPOT <= 400: all three
    s = slo_scaled(SLO_MLPERF_INTERACTIVE, 10);
    assert_int_equal(serving_goodput(REQS, N_REQS, DURATION_S, &s, &g, &err), 0);
    assert_goodput(g, 3);
    // unscaled interactive: TTFT <= 450 leaves B alone, whose TPOT 125 > 40
    assert_int_equal(serving_goodput(REQS, N_REQS, DURATION_S, &SLO_MLPERF_INTERACTIVE, &g, &err), 0);
    assert_goodput(g, 0);
}

// --- CSV -------------------------------------------------------------------------------------

static void test_csv(void **state) {
    (void)state;
    char buf[256];
    Error err;
    const double pct[] = {50, 90, 99.9};
    assert_int_equal(latency_columns(buf, sizeof buf, "ttft_ms", pct, 3, &err), 0);
    assert_string_equal(buf, "ttft_ms_mean,ttft_ms_median,ttft_ms_std,ttft_ms_p50,ttft_ms_p90,ttft_ms_p99.9");
    assert_int_equal(latency_columns(buf, sizeof buf, "itl_ms", pct, 0, &err), 0);
    assert_string_equal(buf, "itl_ms_mean,itl_ms_median,itl_ms_std");
    // TTFT at p10 p50 p90 p99: 583.33.., 500, 311.80478.., 300, 500, 900, 990
    ServingMetrics m = metrics_of(REQS, N_REQS);
    assert_int_equal(latency_cells(buf, sizeof buf, &m.ttft_ms, &err), 0);
    assert_string_equal(buf, "583.333,500,311.805,300,500,900,990");
    // the columns of the same list name as many cells
    char cols[256];
    assert_int_equal(latency_columns(cols, sizeof cols, "ttft_ms", m.percentiles, m.n_percentiles, &err), 0);
    int commas_cols = 0, commas_cells = 0;
    for (char *c = cols; *c; c++) commas_cols += *c == ',';
    for (char *c = buf; *c; c++) commas_cells += *c == ',';
    assert_int_equal(commas_cols, commas_cells);
    // too small a buffer is an error, not a cut line
    assert_int_equal(latency_columns(buf, 20, "ttft_ms", pct, 3, &err), -1);
    assert_non_null(strstr(err.msg, "CSV"));
    assert_int_equal(latency_cells(buf, 10, &m.ttft_ms, &err), -1);
}

// --- errors ----------------------------------------------------------------------------------

static void expect_metrics_error(const RequestTiming *reqs, int n, double duration_s, const double *pct, int n_pct,
                                 const char *what) {
    ServingMetrics m;
    Error err = {{0}};
    assert_int_equal(serving_metrics(reqs, n, duration_s, pct, n_pct, &m, &err), -1);
    if (!strstr(err.msg, what)) fail_msg("error \"%s\" does not say \"%s\"", err.msg, what);
}

static void test_errors(void **state) {
    (void)state;
    const double before[] = {0.5}, backwards[] = {1.0, 0.75}, nan_time[] = {NAN};
    RequestTiming no_tokens = {0.0, 1, 0, TOKENS_C}, early = {1.0, 1, 1, before}, back = {0.0, 1, 2, backwards},
                  nan_req = {0.0, 1, 1, nan_time};
    expect_metrics_error(&no_tokens, 1, DURATION_S, PCT, N_PCT, "0 output tokens");
    expect_metrics_error(&early, 1, DURATION_S, PCT, N_PCT, "precedes its sending");
    expect_metrics_error(&back, 1, DURATION_S, PCT, N_PCT, "token 1");
    expect_metrics_error(&nan_req, 1, DURATION_S, PCT, N_PCT, "precedes its sending");
    expect_metrics_error(REQS, N_REQS, 0.0, PCT, N_PCT, "duration");
    const double bad[] = {50, 100.5}, nan_pct[] = {NAN};
    expect_metrics_error(REQS, N_REQS, DURATION_S, bad, 2, "100.5");
    expect_metrics_error(REQS, N_REQS, DURATION_S, nan_pct, 1, "outside");
    const double many[SERVING_MAX_PERCENTILES + 1] = {0};
    expect_metrics_error(REQS, N_REQS, DURATION_S, many, SERVING_MAX_PERCENTILES + 1, "percentiles");
    // goodput with no threshold set: vLLM has no goodput then
    SloSet none = {"none", 0, -1, 0};
    Goodput g;
    Error err;
    assert_int_equal(serving_goodput(REQS, N_REQS, DURATION_S, &none, &g, &err), -1);
    assert_non_null(strstr(err.msg, "\"none\""));
    assert_int_equal(serving_goodput(&early, 1, DURATION_S, &SLO_MLPERF_SERVER, &g, &err), -1);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_ttft),
        cmocka_unit_test(test_tpot_leaves_out_one_token_requests),
        cmocka_unit_test(test_itl_pools_every_gap),
        cmocka_unit_test(test_e2el),
        cmocka_unit_test(test_std_is_population_not_sample),
        cmocka_unit_test(test_percentile_ends_and_order),
        cmocka_unit_test(test_throughputs),
        cmocka_unit_test(test_empty_lists_give_zeros),
        cmocka_unit_test(test_goodput_each_objective_alone),
        cmocka_unit_test(test_goodput_objectives_together),
        cmocka_unit_test(test_mlperf_objectives_and_scaling),
        cmocka_unit_test(test_csv),
        cmocka_unit_test(test_errors),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
