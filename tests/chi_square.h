// chi_square.h: Pearson's goodness-of-fit test, shared by the tests that check draws against
// a distribution (test_sampler.c, test_speculative.c).
#pragma once

#include <math.h>
#include <stdlib.h>

#include "common.h"

static const float *chi_square_key_; // chi_square's sort reads the expectations through this

// Ascending expected probability, then ascending id.
static inline int chi_square_compare_(const void *a, const void *b) {
    int i = *(const int *)a, j = *(const int *)b;
    if (chi_square_key_[i] != chi_square_key_[j]) return chi_square_key_[i] < chi_square_key_[j] ? -1 : 1;
    return i - j;
}

// Pearson's statistic of observed counts against expected probabilities (n draws), pooling
// the smallest expectations until every bin expects >= 5. Sets *df = bins - 1. Tokens of
// probability zero are not binned: the caller checks that none was drawn.
static inline double chi_square(const int *observed, const float *expected_p, int V, int n_draws, int *df) {
    int *order = mallocCheck((size_t)V * sizeof(int)), m = 0;
    for (int i = 0; i < V; i++)
        if (expected_p[i] > 0) order[m++] = i;
    chi_square_key_ = expected_p;
    qsort(order, (size_t)m, sizeof(int), chi_square_compare_);
    double stat = 0.0, e = 0.0, o = 0.0, last_e = 0.0, last_o = 0.0;
    int bins = 0;
    for (int r = 0; r < m; r++) {
        e += (double)n_draws * expected_p[order[r]];
        o += observed[order[r]];
        if (e >= 5.0 || r == m - 1) {
            if (e < 5.0 && bins > 0) { // a short last bin joins the one before
                stat -= (last_o - last_e) * (last_o - last_e) / last_e;
                e += last_e;
                o += last_o;
                bins--;
            }
            stat += (o - e) * (o - e) / e;
            bins++;
            last_e = e, last_o = o;
            e = o = 0.0;
        }
    }
    free(order);
    *df = bins - 1;
    return stat;
}

// The alpha = 0.001 critical value of chi-square with df degrees of freedom (Wilson-Hilferty:
// df * (1 - 2/(9 df) + z * sqrt(2/(9 df)))^3, z = 3.0902 the normal's 0.999 quantile).
static inline double chi_square_critical_001(int df) {
    double a = 2.0 / (9.0 * df), c = 1.0 - a + 3.0902 * sqrt(a);
    return df * c * c * c;
}
