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
