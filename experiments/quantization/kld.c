// kld.c: KL divergence, next-token probability shifts and top-token agreement of a quantised
// model against a baseline (see kld.h).
#include "kld.h"

#include <math.h>
#include <stdlib.h>

#include "common.h"

static int argmax(const float *x, int V) {
    int best = 0;
    for (int i = 1; i < V; i++)
        if (x[i] > x[best]) best = i;
    return best;
}

// log(sum exp(x)) in double, shifted by the maximum.
static double log_sum_exp(const float *x, int V) {
    float max = x[argmax(x, V)];
    double sum = 0.0;
    for (int i = 0; i < V; i++) sum += exp((double)x[i] - max);
    return max + log(sum);
}

void kld_log_softmax(float *out, const float *logits, int V) {
    double lse = log_sum_exp(logits, V);
    for (int i = 0; i < V; i++) out[i] = (float)(logits[i] - lse);
}

KldPosition kld_position(const float *base_logprobs, const float *q_logits, int V, int target) {
    double lse_q = log_sum_exp(q_logits, V), kl = 0.0;
    for (int i = 0; i < V; i++) {
        double lp = base_logprobs[i];
        kl += exp(lp) * (lp - (q_logits[i] - lse_q));
    }
    double log_q = q_logits[target] - lse_q;
    return (KldPosition){kl, -(double)base_logprobs[target], -log_q, exp(log_q) - exp((double)base_logprobs[target]),
                         argmax(base_logprobs, V) == argmax(q_logits, V)};
}

void kld_add(KldStats *s, KldPosition p) {
    if (s->n == s->cap) {
        s->cap = s->cap ? 2 * s->cap : 1024;
        s->klds = reallocCheck(s->klds, s->cap * sizeof(double));
    }
    s->klds[s->n++] = p.kl;
    s->kld_sum += p.kl;
    s->nll_base += p.nll_base;
    s->nll_q += p.nll_q;
    s->dp_sum += p.dp;
    s->dp_sq_sum += p.dp * p.dp;
    s->same_top += p.same_top;
}

static int compare_doubles(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

// The q-quantile of sorted x (n > 0): the element at rank ceil(q n) - 1 (nearest rank).
static double quantile(const double *x, size_t n, double q) {
    size_t rank = (size_t)ceil(q * (double)n);
    return x[rank > 0 ? rank - 1 : 0];
}

KldSummary kld_summary(KldStats *s) {
    if (s->n == 0) die("kld_summary: no positions");
    double n = (double)s->n;
    qsort(s->klds, s->n, sizeof(double), compare_doubles);
    KldSummary k;
    k.kld_mean = s->kld_sum / n;
    k.kld_median = quantile(s->klds, s->n, 0.5);
    k.kld_p99 = quantile(s->klds, s->n, 0.99);
    k.kld_max = s->klds[s->n - 1];
    k.delta_p_mean = s->dp_sum / n;
    k.delta_p_rms = sqrt(s->dp_sq_sum / n);
    k.same_top = (double)s->same_top / n;
    k.ppl_base = exp(s->nll_base / n);
    k.ppl_q = exp(s->nll_q / n);
    k.ppl_ratio = k.ppl_q / k.ppl_base;
    return k;
}

void kld_free(KldStats *s) {
    free(s->klds);
    *s = (KldStats){0};
}
