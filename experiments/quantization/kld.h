// kld.h: how far a quantised model's next-token distributions move from a baseline's, as
// llama-perplexity --kl-divergence reports it, for bin/quantization's published models (main.c
// beside this file). Pure functions over logits, checked by hand in tests/test_kld.c.
//
//   KldStats s = {0};
//   kld_add(&s, kld_position(base_logprobs, q_logits, V, target)); // per scored position
//   KldSummary k = kld_summary(&s);        // mean KLD, p99, RMS dp, same top, ppl ratio
//   kld_free(&s);
// kld_position is pure, so positions can be computed in parallel and added in order.
//
// Per position, with P the baseline's softmax and Q the quantised model's: KL(P || Q) =
// sum_i P_i (log P_i - log Q_i) in nats; dp = Q(target) - P(target), the change in the
// probability of the token that came next; "same top" when both argmaxes agree (the first index
// of the largest logit wins a tie in either); and each model's -log p(target), whose means give
// the two perplexities. Sums are in double.
#pragma once

#include <stddef.h>

// Baseline log-probabilities of one position: log_softmax(logits) (V), in float.
void kld_log_softmax(float *out, const float *logits, int V);

// One position's comparison: base_logprobs from kld_log_softmax of the baseline's logits,
// q_logits the quantised model's raw logits, target the token that followed.
typedef struct {
    double kl;              // KL(P || Q), nats
    double nll_base, nll_q; // -log P(target), -log Q(target)
    double dp;              // Q(target) - P(target)
    int same_top;           // the argmaxes agree
} KldPosition;
KldPosition kld_position(const float *base_logprobs, const float *q_logits, int V, int target);

typedef struct {
    size_t n;                     // positions added
    double kld_sum;               // sum of KL(P || Q), nats
    double nll_base, nll_q;       // sums of -log P(target), -log Q(target)
    double dp_sum, dp_sq_sum;     // sums of dp and dp^2
    size_t same_top;              // positions whose argmaxes agree
    double *klds;                 // (n) every position's KL, for the percentiles (malloc'd)
    size_t cap;
} KldStats;

void kld_add(KldStats *s, KldPosition p);

typedef struct {
    double kld_mean, kld_median, kld_p99, kld_max; // nats
    double delta_p_mean, delta_p_rms;              // probability of the next token, Q - P
    double same_top;                               // fraction of positions
    double ppl_base, ppl_q, ppl_ratio;             // exp(mean -log p); ratio = ppl_q / ppl_base
} KldSummary;

// The statistics over every position added (n > 0). Sorts s->klds.
KldSummary kld_summary(KldStats *s);
void kld_free(KldStats *s);
