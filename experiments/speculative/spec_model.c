// spec_model.c: the speculative decoding cost model and findings (see spec_model.h).
#include "spec_model.h"

#include <math.h>

double spec_expected_tokens(double alpha, int gamma) {
    double sum = 0.0, term = 1.0;
    for (int i = 0; i <= gamma; i++, term *= alpha) sum += term;
    return isnan(alpha) ? NAN : sum;
}

double spec_predicted_speedup(double alpha, int gamma, double c, double v) {
    return spec_expected_tokens(alpha, gamma) / (gamma * c + v);
}

// E(alpha, n) for a real n >= 0: (1 - alpha^(n+1)) / (1 - alpha), n + 1 at alpha = 1.
static double expected_tokens_real(double alpha, double n) {
    return alpha >= 1.0 ? n + 1.0 : (1.0 - pow(alpha, n + 1.0)) / (1.0 - alpha);
}

static double verify_ms_at(const SpecCosts *c, double rows) {
    int lo = (int)floor(rows);
    if (lo < 1) lo = 1;
    if (lo >= c->max_rows) return c->verify_ms[c->max_rows - 1];
    double frac = rows - lo;
    return (1.0 - frac) * c->verify_ms[lo - 1] + frac * c->verify_ms[lo];
}

double spec_predicted_speedup_counted(double alpha, const SpecCosts *c, double n_drafted, double draft_calls) {
    if (isnan(alpha)) return NAN;
    double step_ms = draft_calls * c->draft_step_ms + verify_ms_at(c, n_drafted + 1.0) +
                     (2.0 * n_drafted + 1.0) * c->distribution_ms;
    double plain_ms = c->verify_ms[0] + c->distribution_ms;
    return expected_tokens_real(alpha, n_drafted) * plain_ms / step_ms;
}

int spec_smaller_is_higher(const double *sizes, const double *values, int n) {
    for (int i = 0; i < n; i++)
        for (int j = 0; j < n; j++)
            if (sizes[i] < sizes[j] && !(values[i] > values[j])) return 0;
    return 1;
}

int spec_smallest_is_lowest(const double *sizes, const double *values, int n) {
    if (n < 2) return 0;
    int smallest = 0;
    for (int i = 1; i < n; i++)
        if (sizes[i] < sizes[smallest]) smallest = i;
    for (int i = 0; i < n; i++)
        if (i != smallest && !(values[smallest] < values[i])) return 0;
    return 1;
}
