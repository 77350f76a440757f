// spec_model.h: the cost model of speculative decoding (Leviathan et al. 2023, section 3.3),
// and the two questions bin/speculative answers from its sweep. Tests:
// make build/tests/test_spec_model && ./build/tests/test_spec_model
//
// If each draft is accepted independently with probability alpha, a step of gamma drafts adds
//   E(alpha, gamma) = 1 + alpha + ... + alpha^gamma = (1 - alpha^(gamma+1)) / (1 - alpha)
// tokens (gamma + 1 at alpha = 1), and costs gamma draft steps plus one target forward over
// gamma + 1 rows. In units of one target decode step that is gamma * c + v(gamma + 1), where
// c = draft step time / target step time and v(k) = time of a k-row target forward / a 1-row
// one. Plain decoding adds one token per target step, so the predicted speed-up is
//   E(alpha, gamma) / (gamma * c + v(gamma + 1));
// v = 1 (verification as cheap as one step: a GPU with idle parallel units) is the paper's.
#pragma once

// E(alpha, gamma), summed term by term so alpha = 1 needs no special case; NAN for NAN alpha.
double spec_expected_tokens(double alpha, int gamma);

// E(alpha, gamma) / (gamma * c + v), v being v(gamma + 1).
double spec_predicted_speedup(double alpha, int gamma, double c, double v);

// The same prediction with every cost the formula leaves out, in measured milliseconds, and
// the run's own counts per step instead of gamma: a step makes draft_calls draft forwards
// (decode steps and the catch-up after a rejection), drafts n_drafted tokens (fewer than gamma
// when a lookup finds no match) and so processes n_drafted distributions q, verifies
// n_drafted + 1 rows and processes their n_drafted + 1 distributions p; it adds
// E(alpha, n_drafted) tokens (the closed form at a fractional count). Plain decoding costs one
// target step and one distribution per token. verify_ms[k - 1] is a k-row target forward
// (k = 1 .. max_rows; a fractional row count interpolates linearly).
typedef struct {
    double draft_step_ms;    // one draft forward (or lookup search)
    double distribution_ms;  // the sampler's processed distribution and draw, one row
    const double *verify_ms; // (max_rows)
    int max_rows;
} SpecCosts;
double spec_predicted_speedup_counted(double alpha, const SpecCosts *c, double n_drafted, double draft_calls);

// Over n drafts of the given sizes (parameter counts), with one value each (a best speed-up,
// an acceptance rate): 1 if every draft smaller than another has a strictly higher value
// ("is a smaller draft always faster?"), else 0.
int spec_smaller_is_higher(const double *sizes, const double *values, int n);

// 1 if the smallest draft's value is strictly below every other draft's ("does the weakest
// draft lower the acceptance rate?"), else 0; 0 for fewer than two drafts.
int spec_smallest_is_lowest(const double *sizes, const double *values, int n);
