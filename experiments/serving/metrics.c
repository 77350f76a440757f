// metrics.c: the serving experiment's metrics as vLLM's serving benchmark computes them
// (metrics.h says what was confirmed in vLLM's source).
// Tests: make build/tests/test_serving_metrics && ./build/tests/test_serving_metrics
#include "metrics.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

const double SERVING_DEFAULT_PERCENTILES[SERVING_N_DEFAULT_PERCENTILES] = {50, 90, 99};
// mlcommons/inference loadgen/mlperf.conf: llama2-70b and llama2-70b-interactive, Server
const SloSet SLO_MLPERF_SERVER = {"server", 2000, 200, 0};
const SloSet SLO_MLPERF_INTERACTIVE = {"interactive", 450, 40, 0};

// vLLM keeps its times in seconds and multiplies each statistic by 1000 at the end
#define MS_PER_S 1000.0

// ---- checks -----------------------------------------------------------------------------------

static int check_percentiles(const double *q, int n, Error *err) {
    if (n < 0 || n > SERVING_MAX_PERCENTILES)
        return error_set(err, "serving metrics: %d percentiles asked, 0 to %d kept", n, SERVING_MAX_PERCENTILES);
    for (int i = 0; i < n; i++)
        if (!(q[i] >= 0 && q[i] <= 100)) return error_set(err, "serving metrics: percentile %g outside [0, 100]", q[i]);
    return 0;
}

static int check_requests(const RequestTiming *reqs, int n, double duration_s, Error *err) {
    if (n < 0) return error_set(err, "serving metrics: %d requests", n);
    if (!(duration_s > 0 && isfinite(duration_s)))
        return error_set(err, "serving metrics: a duration of %g s (throughputs divide by it)", duration_s);
    for (int i = 0; i < n; i++) {
        const RequestTiming *r = &reqs[i];
        if (r->n_out < 1) return error_set(err, "serving metrics: request %d has %d output tokens", i, r->n_out);
        if (r->prompt_tokens < 0)
            return error_set(err, "serving metrics: request %d has %d prompt tokens", i, r->prompt_tokens);
        // written negated so that a NaN fails too
        if (!(r->token_s[0] >= r->sent_s))
            return error_set(err, "serving metrics: request %d's first token (%g s) precedes its sending (%g s)", i,
                             r->token_s[0], r->sent_s);
        for (int k = 1; k < r->n_out; k++)
            if (!(r->token_s[k] >= r->token_s[k - 1]))
                return error_set(err, "serving metrics: request %d's token %d (%g s) precedes token %d (%g s)", i, k,
                                 r->token_s[k], k - 1, r->token_s[k - 1]);
    }
    return 0;
}

// ---- one request's latencies, seconds ---------------------------------------------------------

static double ttft_s(const RequestTiming *r) { return r->token_s[0] - r->sent_s; }
static double e2el_s(const RequestTiming *r) { return r->token_s[r->n_out - 1] - r->sent_s; }
// vLLM's (latency - ttft) / (output_len - 1); a one-token request has none, and goodput
// takes it as 0
static double tpot_s(const RequestTiming *r) {
    return r->n_out > 1 ? (e2el_s(r) - ttft_s(r)) / (r->n_out - 1) : 0.0;
}

// ---- numpy's statistics -----------------------------------------------------------------------

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

// Linear interpolation from the nearer end (numpy's form), so t = 1 gives b exactly
static double lerp(double a, double b, double t) {
    double d = b - a;
    return t >= 0.5 ? b - d * (1 - t) : a + d * t;
}

// np.percentile(x, q), method "linear": the virtual index (n - 1) q / 100 between the ranks
// either side of it. sorted (n >= 1) ascending.
static double percentile(const double *sorted, long n, double q) {
    double at = (n - 1) * (q / 100.0);
    long lo = (long)floor(at);
    if (lo >= n - 1) return sorted[n - 1];
    return lerp(sorted[lo], sorted[lo + 1], at - lo);
}

// np.median: the middle value, or the mean of the middle two
static double median(const double *sorted, long n) {
    return n % 2 ? sorted[n / 2] : (sorted[n / 2 - 1] + sorted[n / 2]) / 2;
}

// x (n, seconds) summarised in ms; sorts x. n = 0 gives zeros (vLLM's np.mean(x or 0)).
static LatencySummary summarise(double *x, long n, const double *q, int n_q) {
    LatencySummary s = {.n = n, .n_pct = n_q};
    if (n == 0) return s;
    qsort(x, (size_t)n, sizeof(double), cmp_double);
    double sum = 0, sq = 0;
    for (long i = 0; i < n; i++) sum += x[i];
    double mean = sum / n;
    for (long i = 0; i < n; i++) sq += (x[i] - mean) * (x[i] - mean);
    s.mean = MS_PER_S * mean;
    s.median = MS_PER_S * median(x, n);
    s.std = MS_PER_S * sqrt(sq / n); // ddof 0: divide by n, not n - 1
    for (int k = 0; k < n_q; k++) s.pct[k] = MS_PER_S * percentile(x, n, q[k]);
    return s;
}

// ---- the run's metrics ------------------------------------------------------------------------

int serving_metrics(const RequestTiming *reqs, int n, double duration_s, const double *percentiles,
                    int n_percentiles, ServingMetrics *m, Error *err) {
    if (check_percentiles(percentiles, n_percentiles, err) || check_requests(reqs, n, duration_s, err)) return -1;
    *m = (ServingMetrics){.completed = n, .duration_s = duration_s, .n_percentiles = n_percentiles};
    for (int k = 0; k < n_percentiles; k++) m->percentiles[k] = percentiles[k];
    long n_gaps = 0;
    for (int i = 0; i < n; i++) {
        m->total_input += reqs[i].prompt_tokens;
        m->total_output += reqs[i].n_out;
        n_gaps += reqs[i].n_out - 1;
    }
    double *ttft = mallocCheck((size_t)n * sizeof(double)), *tpot = mallocCheck((size_t)n * sizeof(double)),
           *e2el = mallocCheck((size_t)n * sizeof(double)), *itl = mallocCheck((size_t)n_gaps * sizeof(double));
    int n_tpot = 0;
    long n_itl = 0;
    for (int i = 0; i < n; i++) {
        const RequestTiming *r = &reqs[i];
        ttft[i] = ttft_s(r);
        e2el[i] = e2el_s(r);
        if (r->n_out > 1) tpot[n_tpot++] = tpot_s(r); // one-token requests are left out
        for (int k = 1; k < r->n_out; k++) itl[n_itl++] = r->token_s[k] - r->token_s[k - 1];
    }
    m->ttft_ms = summarise(ttft, n, percentiles, n_percentiles);
    m->tpot_ms = summarise(tpot, n_tpot, percentiles, n_percentiles);
    m->itl_ms = summarise(itl, n_itl, percentiles, n_percentiles);
    m->e2el_ms = summarise(e2el, n, percentiles, n_percentiles);
    m->request_throughput = n / duration_s;
    m->output_throughput = m->total_output / duration_s;
    m->total_token_throughput = (m->total_input + m->total_output) / duration_s;
    free(ttft), free(tpot), free(e2el), free(itl);
    return 0;
}

// vLLM's test, `slo >= value` with the threshold in seconds; an unset threshold always holds
static int meets(double slo_ms, double value_s) { return slo_ms <= 0 || slo_ms / MS_PER_S >= value_s; }

int serving_goodput(const RequestTiming *reqs, int n, double duration_s, const SloSet *slo, Goodput *g,
                    Error *err) {
    if (check_requests(reqs, n, duration_s, err)) return -1;
    if (slo->ttft_ms <= 0 && slo->tpot_ms <= 0 && slo->e2el_ms <= 0)
        return error_set(err, "serving metrics: the objectives \"%s\" set no threshold", slo->name);
    *g = (Goodput){0};
    for (int i = 0; i < n; i++) {
        const RequestTiming *r = &reqs[i];
        g->n_good += meets(slo->ttft_ms, ttft_s(r)) && meets(slo->tpot_ms, tpot_s(r)) && meets(slo->e2el_ms, e2el_s(r));
    }
    g->goodput = g->n_good / duration_s;
    g->good_frac = n > 0 ? (double)g->n_good / n : 0.0;
    return 0;
}

SloSet slo_scaled(SloSet slo, double factor) {
    slo.ttft_ms *= factor;
    slo.tpot_ms *= factor;
    slo.e2el_ms *= factor;
    return slo;
}

// ---- CSV --------------------------------------------------------------------------------------

// printf at buf + *at, advancing *at; -1 with err when it does not fit
__attribute__((format(printf, 5, 6))) static int append(char *buf, size_t size, size_t *at, Error *err,
                                                        const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    int len = vsnprintf(buf + *at, size - *at, fmt, ap);
    va_end(ap);
    if (len < 0 || (size_t)len >= size - *at)
        return error_set(err, "serving metrics: a CSV line of more than %zu bytes", size);
    *at += (size_t)len;
    return 0;
}

int latency_columns(char *buf, size_t size, const char *prefix, const double *percentiles, int n_percentiles,
                    Error *err) {
    size_t at = 0;
    if (check_percentiles(percentiles, n_percentiles, err) ||
        append(buf, size, &at, err, "%s_mean,%s_median,%s_std", prefix, prefix, prefix))
        return -1;
    for (int k = 0; k < n_percentiles; k++)
        if (append(buf, size, &at, err, ",%s_p%g", prefix, percentiles[k])) return -1;
    return 0;
}

int latency_cells(char *buf, size_t size, const LatencySummary *s, Error *err) {
    size_t at = 0;
    if (s->n_pct < 0 || s->n_pct > SERVING_MAX_PERCENTILES)
        return error_set(err, "serving metrics: a summary of %d percentiles", s->n_pct);
    if (append(buf, size, &at, err, "%.6g,%.6g,%.6g", s->mean, s->median, s->std)) return -1;
    for (int k = 0; k < s->n_pct; k++)
        if (append(buf, size, &at, err, ",%.6g", s->pct[k])) return -1;
    return 0;
}
