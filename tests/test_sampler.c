// test_sampler.c: the sampler (experiments/engine/sampler.h) against plain references.
//   - filtered distributions equal a full-sort, double-precision reference filter written
//     here from the definitions (|p - p_ref| <= 1e-5 per token, same candidate count), on
//     random N(0, sigma) logits up to vocab 32000 and on ordered, tied and masked logits;
//   - draws at a fixed seed follow the filtered distribution: Pearson chi-square over bins
//     of expected count >= 5 stays below the alpha = 0.001 critical value (Wilson-Hilferty:
//     df * (1 - 2/(9 df) + 3.0902 * sqrt(2/(9 df)))^3), and the same counts are rejected
//     against a wrong distribution, so the test has power; tokens outside the candidate set
//     are never drawn;
//   - greedy is the argmax; CTRL repetition and OpenAI presence/frequency penalties match
//     their formulas bit for bit; same seed, same tokens; bad parameters and logits fail.
// Run: make build/tests/test_sampler && ./build/tests/test_sampler
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <string.h>

#include "chi_square.h"
#include "common.h"
#include "sampler.h"
#include "test_util.h"

// --- helpers ------------------------------------------------------------------------------

static Sampler make_sampler(int vocab, SamplerParams p) {
    Sampler s;
    Error err;
    if (sampler_init(&s, vocab, &p, &err)) fail_msg("sampler_init: %s", err.msg);
    return s;
}

static float *random_logits(int n, float sigma, uint64_t *rng) {
    float *x = mallocCheck((size_t)n * sizeof(float));
    fill_normal(x, (size_t)n, sigma, rng);
    return x;
}

static const double *sort_key; // ref_compare reads the logits through this

static int ref_compare(const void *a, const void *b) {
    int i = *(const int *)a, j = *(const int *)b;
    if (sort_key[i] != sort_key[j]) return sort_key[i] > sort_key[j] ? -1 : 1;
    return i - j;
}

// The reference pipeline, step by step as sampler.h defines it, in double with a full sort.
// Writes probs (V) and returns the number of candidates.
static int ref_distribution(const SamplerParams *p, const float *logits, int V, const int *history, int n_history,
                            double *probs) {
    double *l = mallocCheck((size_t)V * sizeof(double));
    int *count = callocCheck((size_t)V, sizeof(int)), *order = mallocCheck((size_t)V * sizeof(int));
    for (int i = 0; i < V; i++) l[i] = logits[i];
    int start = p->penalty_window > 0 && n_history > p->penalty_window ? n_history - p->penalty_window : 0;
    for (int i = start; i < n_history; i++) count[history[i]]++;
    for (int t = 0; t < V; t++) {
        if (count[t] == 0 || l[t] == -INFINITY) continue;
        l[t] = l[t] > 0 ? l[t] / p->repetition_penalty : l[t] * p->repetition_penalty;
        l[t] -= p->presence_penalty + p->frequency_penalty * count[t];
    }
    int n = 0;
    for (int i = 0; i < V; i++)
        if (l[i] > -INFINITY) order[n++] = i;
    sort_key = l;
    qsort(order, (size_t)n, sizeof(int), ref_compare);
    double *q = callocCheck((size_t)n, sizeof(double)); // q[r]: probability of the r-th best
    if (p->temperature == 0.0f) {
        n = 1;
        q[0] = 1.0;
    } else {
        for (int r = 0; r < n; r++) q[r] = exp((l[order[r]] - l[order[0]]) / p->temperature);
        if (p->top_k > 0 && p->top_k < n) n = p->top_k;
        double z = 0.0;
        for (int r = 0; r < n; r++) z += q[r];
        for (int r = 0; r < n; r++) q[r] /= z;
        if (p->top_p < 1.0f) {
            double cum = 0.0;
            int r = 0;
            while (r < n && (cum += q[r]) < p->top_p) r++;
            if (r < n) n = r + 1;
        }
        int kept = 1;
        while (kept < n && q[kept] >= p->min_p * q[0]) kept++;
        n = kept;
        z = 0.0;
        for (int r = 0; r < n; r++) z += q[r];
        for (int r = 0; r < n; r++) q[r] /= z;
    }
    memset(probs, 0, (size_t)V * sizeof(double));
    for (int r = 0; r < n; r++) probs[order[r]] = q[r];
    free(l); free(count); free(order); free(q);
    return n;
}

static int distribution_or_fail(Sampler *s, const float *logits, const int *history, int n_history, float *probs) {
    Error err;
    int n = sampler_distribution(s, logits, history, n_history, probs, &err);
    if (n < 0) fail_msg("sampler_distribution: %s", err.msg);
    return n;
}

// --- filtered distributions vs the reference --------------------------------------------------

static void compare_with_reference(const float *logits, int V, SamplerParams p, const int *history, int n_history,
                                   const char *what) {
    float *probs = mallocCheck((size_t)V * sizeof(float));
    double *want = mallocCheck((size_t)V * sizeof(double));
    Sampler s = make_sampler(V, p);
    int n = distribution_or_fail(&s, logits, history, n_history, probs);
    int n_want = ref_distribution(&p, logits, V, history, n_history, want);
    if (n != n_want)
        fail_msg("%s, V=%d T=%g k=%d p=%g min_p=%g: %d candidates, reference %d", what, V, p.temperature, p.top_k,
                 p.top_p, p.min_p, n, n_want);
    for (int i = 0; i < V; i++)
        if (fabs(probs[i] - want[i]) > 1e-5)
            fail_msg("%s, V=%d T=%g k=%d p=%g min_p=%g: token %d has p=%.8g, reference %.8g", what, V, p.temperature,
                     p.top_k, p.top_p, p.min_p, i, probs[i], want[i]);
    sampler_free(&s);
    free(probs); free(want);
}

static void check_against_reference(int V, float sigma, SamplerParams p, int n_history, uint64_t seed) {
    uint64_t rng = rng_seed(seed);
    float *logits = random_logits(V, sigma, &rng);
    int *history = mallocCheck((size_t)(n_history + 1) * sizeof(int));
    for (int i = 0; i < n_history; i++) history[i] = (int)(rng_u64(&rng) % (uint64_t)(V < 50 ? V : 50));
    compare_with_reference(logits, V, p, history, n_history, "random logits");
    free(logits); free(history);
}

static SamplerParams params_with(float T, int top_k, float top_p, float min_p) {
    SamplerParams p = sampler_params_default();
    p.temperature = T;
    p.top_k = top_k;
    p.top_p = top_p;
    p.min_p = min_p;
    return p;
}

static void test_distribution_matches_reference(void **state) {
    (void)state;
    const SamplerParams cases[] = {
        params_with(1.0f, 0, 1.0f, 0.0f),   params_with(0.7f, 0, 1.0f, 0.0f),   params_with(1.5f, 40, 1.0f, 0.0f),
        params_with(1.0f, 1, 1.0f, 0.0f),   params_with(1.0f, 0, 0.9f, 0.0f),   params_with(1.0f, 0, 0.5f, 0.0f),
        params_with(1.0f, 0, 0.99f, 0.0f),  params_with(1.0f, 0, 1.0f, 0.05f),  params_with(0.8f, 0, 1.0f, 0.3f),
        params_with(1.0f, 0, 1.0f, 1.0f),   params_with(1.2f, 50, 0.9f, 0.0f),  params_with(1.0f, 500, 0.95f, 0.01f),
        params_with(0.9f, 0, 0.8f, 0.05f),  params_with(1.0f, 2000, 1.0f, 0.0f), params_with(0.0f, 10, 0.5f, 0.1f),
        params_with(1.0f, 0, 1e-6f, 0.0f),  params_with(1.0f, 300, 1.0f, 0.0f), params_with(1.0f, 20, 1.0f, 0.0f),
    };
    int n_cases = (int)(sizeof cases / sizeof cases[0]);
    // sigma 0.3 makes the distribution nearly flat, so top-p needs thousands of tokens and
    // the block-wise sort runs many blocks; sigma 3 makes it peaked
    const float sigmas[] = {0.3f, 1.0f, 3.0f};
    for (int c = 0; c < n_cases; c++)
        for (int si = 0; si < 3; si++) {
            check_against_reference(32000, sigmas[si], cases[c], 0, 100 + c * 3 + si);
            check_against_reference(37, sigmas[si], cases[c], 0, 200 + c * 3 + si);
        }
}

// Ordered, equal and two-valued logits: ties decided by id, and the inputs that trip up
// selection algorithms (already sorted, reverse sorted, all equal).
static void test_distribution_on_structured_logits(void **state) {
    (void)state;
    enum { V = 1000 };
    static float logits[6][V];
    const char *names[6] = {"ascending", "descending", "all equal", "two values", "sawtooth", "V shape"};
    for (int i = 0; i < V; i++) {
        logits[0][i] = 0.01f * i;
        logits[1][i] = -0.01f * i;
        logits[2][i] = 0.5f;
        logits[3][i] = i % 3 ? 1.0f : 0.0f;
        logits[4][i] = 0.05f * (i % 37);
        logits[5][i] = 0.01f * abs(i - V / 2); // the best come first and last
    }
    const SamplerParams cases[] = {
        params_with(0.0f, 0, 1.0f, 0.0f),  params_with(1.0f, 1, 1.0f, 0.0f),   params_with(1.0f, 5, 1.0f, 0.0f),
        params_with(1.0f, 100, 1.0f, 0.0f), params_with(1.0f, 999, 1.0f, 0.0f), params_with(1.0f, 0, 0.01f, 0.0f),
        params_with(1.0f, 0, 0.5f, 0.0f),  params_with(0.5f, 0, 0.9f, 0.0f),   params_with(1.0f, 0, 1.0f, 0.5f),
        params_with(1.0f, 300, 0.7f, 0.2f),
    };
    for (int l = 0; l < 6; l++)
        for (int c = 0; c < (int)(sizeof cases / sizeof cases[0]); c++)
            compare_with_reference(logits[l], V, cases[c], NULL, 0, names[l]);
    // a flat distribution and top_p < 1/V: the single most likely token (the lowest id)
    compare_with_reference(logits[2], 10, params_with(1.0f, 0, 0.05f, 0.0f), NULL, 0, "all equal, tiny top_p");
}

static void test_distribution_with_penalties_matches_reference(void **state) {
    (void)state;
    SamplerParams p = params_with(0.9f, 0, 0.9f, 0.02f);
    p.repetition_penalty = 1.3f;
    p.presence_penalty = 0.4f;
    p.frequency_penalty = 0.2f;
    p.penalty_window = 64;
    check_against_reference(32000, 2.0f, p, 300, 7); // window cuts the history
    check_against_reference(1000, 2.0f, p, 40, 8);
    p.penalty_window = 0; // whole history
    p.repetition_penalty = 0.8f; // < 1 favours repeats
    check_against_reference(1000, 2.0f, p, 300, 9);
}

// Masked (-inf) tokens are never candidates, and a distribution is still returned around them.
static void test_masked_logits(void **state) {
    (void)state;
    int V = 20; // 7 of them masked
    uint64_t rng = rng_seed(3);
    float *logits = random_logits(V, 1.0f, &rng);
    for (int i = 0; i < V; i += 3) logits[i] = -INFINITY;
    float probs[20];
    double want[20];
    const SamplerParams cases[] = {params_with(1.0f, 0, 1.0f, 0.0f), params_with(1.0f, 5, 0.9f, 0.0f),
                                   params_with(1.0f, 18, 1.0f, 0.0f)};
    const int n_want[] = {13, 5, 13};
    for (int c = 0; c < 3; c++) {
        Sampler s = make_sampler(V, cases[c]);
        int n = distribution_or_fail(&s, logits, NULL, 0, probs);
        assert_int_equal(n, n_want[c]);
        assert_int_equal(n, ref_distribution(&cases[c], logits, V, NULL, 0, want));
        for (int i = 0; i < V; i++) {
            assert_true(fabs(probs[i] - want[i]) <= 1e-6);
            if (i % 3 == 0) assert_true(probs[i] == 0.0f);
        }
        sampler_free(&s);
    }
    free(logits);
}

// --- draws vs the distribution: chi-square --------------------------------------------------

// Draw n times with params p at a fixed seed; the counts must fit the filtered distribution
// and must not fit the distribution of params `wrong`.
static void check_draws(SamplerParams p, SamplerParams wrong, const int *history, int n_history) {
    const int V = 40, n_draws = 40000;
    uint64_t rng = rng_seed(11);
    float *logits = random_logits(V, 2.0f, &rng);
    float probs[40], wrong_probs[40];
    int counts[40] = {0}, df;
    Sampler s = make_sampler(V, p), w = make_sampler(V, wrong);
    int n = distribution_or_fail(&s, logits, history, n_history, probs);
    distribution_or_fail(&w, logits, history, n_history, wrong_probs);
    Error err;
    for (int d = 0; d < n_draws; d++) {
        int t = sampler_sample(&s, logits, history, n_history, &err);
        if (t < 0 || t >= V) fail_msg("sampler_sample returned %d: %s", t, err.msg);
        counts[t]++;
    }
    for (int i = 0; i < V; i++)
        if (probs[i] == 0.0f && counts[i] > 0) fail_msg("token %d is not a candidate but was drawn %d times", i, counts[i]);
    double stat = chi_square(counts, probs, V, n_draws, &df), crit = chi_square_critical_001(df);
    if (df < 1 || stat > crit)
        fail_msg("T=%g k=%d p=%g min_p=%g (%d candidates): chi2 %.2f > critical %.2f (df %d)", p.temperature, p.top_k,
                 p.top_p, p.min_p, n, stat, crit, df);
    // power: the same counts against a different distribution must be rejected (or draw a
    // token that distribution cannot produce)
    int impossible = 0;
    for (int i = 0; i < V; i++) impossible |= wrong_probs[i] == 0.0f && counts[i] > 0;
    double wrong_stat = chi_square(counts, wrong_probs, V, n_draws, &df);
    if (!impossible && wrong_stat <= chi_square_critical_001(df))
        fail_msg("chi-square cannot tell T=%g k=%d p=%g min_p=%g from the wrong distribution (%.2f)", p.temperature,
                 p.top_k, p.top_p, p.min_p, wrong_stat);
    sampler_free(&s);
    sampler_free(&w);
    free(logits);
}

static void test_draws_temperature(void **state) {
    (void)state;
    check_draws(params_with(0.8f, 0, 1.0f, 0.0f), params_with(1.0f, 0, 1.0f, 0.0f), NULL, 0);
    check_draws(params_with(2.0f, 0, 1.0f, 0.0f), params_with(1.6f, 0, 1.0f, 0.0f), NULL, 0);
}

static void test_draws_top_k(void **state) {
    (void)state;
    check_draws(params_with(1.0f, 8, 1.0f, 0.0f), params_with(1.0f, 0, 1.0f, 0.0f), NULL, 0);
    check_draws(params_with(1.5f, 20, 1.0f, 0.0f), params_with(1.5f, 25, 1.0f, 0.0f), NULL, 0);
}

static void test_draws_top_p(void **state) {
    (void)state;
    check_draws(params_with(1.0f, 0, 0.8f, 0.0f), params_with(1.0f, 0, 1.0f, 0.0f), NULL, 0);
    check_draws(params_with(1.5f, 0, 0.95f, 0.0f), params_with(1.5f, 0, 1.0f, 0.0f), NULL, 0);
}

static void test_draws_min_p(void **state) {
    (void)state;
    check_draws(params_with(1.0f, 0, 1.0f, 0.05f), params_with(1.0f, 0, 1.0f, 0.0f), NULL, 0);
    check_draws(params_with(1.5f, 0, 1.0f, 0.2f), params_with(1.5f, 0, 1.0f, 0.1f), NULL, 0);
}

static void test_draws_combined_with_penalties(void **state) {
    (void)state;
    SamplerParams p = params_with(1.3f, 20, 0.9f, 0.02f), wrong = p;
    p.repetition_penalty = 1.5f;
    p.frequency_penalty = 0.3f;
    const int history[] = {0, 1, 2, 3, 3, 3, 4, 5, 6, 7, 8, 9, 9};
    check_draws(p, wrong, history, 13);
}

static void test_draw_from_weights(void **state) {
    (void)state;
    const float weights[] = {1.0f, 0.0f, 3.0f, 2.0f, 0.5f};
    const float probs[] = {1 / 6.5f, 0.0f, 3 / 6.5f, 2 / 6.5f, 0.5f / 6.5f};
    int counts[5] = {0}, df;
    Sampler s = make_sampler(5, sampler_params_default());
    Error err;
    for (int d = 0; d < 20000; d++) {
        int t = sampler_draw(&s, weights, 5, &err);
        if (t < 0) fail_msg("sampler_draw: %s", err.msg);
        counts[t]++;
    }
    assert_int_equal(counts[1], 0);
    double stat = chi_square(counts, probs, 5, 20000, &df);
    assert_int_equal(df, 3);
    assert_true(stat <= chi_square_critical_001(df));
    sampler_free(&s);
}

// --- greedy ---------------------------------------------------------------------------------

static void test_greedy_is_argmax(void **state) {
    (void)state;
    int V = 1000;
    uint64_t rng = rng_seed(5);
    float *probs = mallocCheck((size_t)V * sizeof(float));
    SamplerParams p = params_with(0.0f, 0, 1.0f, 0.0f);
    Sampler s = make_sampler(V, p);
    Error err;
    for (int trial = 0; trial < 20; trial++) {
        float *logits = random_logits(V, 1.0f + trial, &rng);
        int best = 0;
        for (int i = 1; i < V; i++)
            if (logits[i] > logits[best]) best = i;
        assert_int_equal(sampler_sample(&s, logits, NULL, 0, &err), best);
        assert_int_equal(distribution_or_fail(&s, logits, NULL, 0, probs), 1);
        for (int i = 0; i < V; i++) assert_true(probs[i] == (i == best ? 1.0f : 0.0f));
        free(logits);
    }
    sampler_free(&s);
    free(probs);
    // ties go to the lower id; top_k = 1 at any temperature is greedy too
    float tied[6] = {0.5f, 2.0f, -1.0f, 3.0f, 1.0f, 3.0f};
    s = make_sampler(6, p);
    assert_int_equal(sampler_sample(&s, tied, NULL, 0, &err), 3);
    sampler_free(&s);
    s = make_sampler(6, params_with(5.0f, 1, 1.0f, 0.0f));
    for (int d = 0; d < 50; d++) assert_int_equal(sampler_sample(&s, tied, NULL, 0, &err), 3);
    sampler_free(&s);
}

static void test_greedy_after_penalties(void **state) {
    (void)state;
    float logits[4] = {5.0f, 4.5f, 1.0f, -2.0f};
    SamplerParams p = params_with(0.0f, 0, 1.0f, 0.0f);
    p.repetition_penalty = 1.5f; // 5 / 1.5 = 3.33 < 4.5
    Sampler s = make_sampler(4, p);
    Error err;
    int history[] = {0};
    assert_int_equal(sampler_sample(&s, logits, NULL, 0, &err), 0);
    assert_int_equal(sampler_sample(&s, logits, history, 1, &err), 1);
    sampler_free(&s);
}

// --- penalties ------------------------------------------------------------------------------

static void test_repetition_penalty_ctrl_rule(void **state) {
    (void)state;
    int V = 16;
    uint64_t rng = rng_seed(21);
    float *logits = random_logits(V, 2.0f, &rng), *got = mallocCheck((size_t)V * sizeof(float));
    logits[0] = 1.75f, logits[1] = -0.5f, logits[2] = -INFINITY, logits[3] = 0.0f;
    SamplerParams p = sampler_params_default();
    p.repetition_penalty = 1.7f;
    p.penalty_window = 8;
    // oldest first: tokens 10 and 11 fall outside the window of the last 8
    const int history[] = {10, 11, 0, 1, 1, 1, 2, 3, 0, 5, 5};
    const int in_window[] = {0, 1, 2, 3, 5};
    Sampler s = make_sampler(V, p);
    Error err;
    memcpy(got, logits, (size_t)V * sizeof(float));
    if (sampler_apply_penalties(&s, got, history, 11, &err)) fail_msg("%s", err.msg);
    for (int t = 0; t < V; t++) {
        int penalised = 0;
        for (int j = 0; j < 5; j++) penalised |= in_window[j] == t;
        // CTRL: once per distinct token, however often it occurs
        float want = !penalised ? logits[t] : logits[t] > 0 ? logits[t] / 1.7f : logits[t] * 1.7f;
        if (!(got[t] == want || (got[t] == -INFINITY && want == -INFINITY)))
            fail_msg("token %d: penalised logit %.9g, CTRL rule gives %.9g", t, got[t], want);
    }
    assert_true(got[0] < logits[0] && got[1] < logits[1] && got[10] == logits[10]);
    sampler_free(&s);
    free(logits); free(got);
}

static void test_presence_frequency_penalties(void **state) {
    (void)state;
    float logits[6] = {2.0f, -1.0f, 0.5f, 3.0f, -0.25f, 1.0f}, got[6];
    SamplerParams p = sampler_params_default();
    p.presence_penalty = 0.5f;
    p.frequency_penalty = 0.25f;
    p.penalty_window = 0;
    const int history[] = {0, 0, 0, 1, 3, 0, 4, 4};
    const int count[6] = {4, 1, 0, 1, 2, 0};
    Sampler s = make_sampler(6, p);
    Error err;
    memcpy(got, logits, sizeof got);
    if (sampler_apply_penalties(&s, got, history, 8, &err)) fail_msg("%s", err.msg);
    for (int t = 0; t < 6; t++) {
        float want = logits[t] - (0.5f * (count[t] > 0) + 0.25f * count[t]);
        if (got[t] != want) fail_msg("token %d: %.9g, OpenAI rule gives %.9g", t, got[t], want);
    }
    assert_true(got[0] == 0.5f); // 2 - (0.5 + 4 * 0.25), by hand
    sampler_free(&s);
    // the penalties move the distribution: with temperature 1, p_i / p_j = exp(l'_i - l'_j)
    float probs[6];
    s = make_sampler(6, p);
    distribution_or_fail(&s, logits, history, 8, probs);
    assert_true(fabs(log(probs[0] / probs[2]) - (0.5 - 0.5)) < 1e-5);
    assert_true(fabs(log(probs[4] / probs[5]) - (-1.25 - 1.0)) < 1e-5);
    sampler_free(&s);
}

// --- reproducibility ------------------------------------------------------------------------

static void generate(SamplerParams p, int *tokens, int n) {
    int V = 500;
    uint64_t rng = rng_seed(31); // the "model": fixed random logits per step
    float *logits = mallocCheck((size_t)V * sizeof(float));
    Sampler s = make_sampler(V, p);
    Error err;
    for (int i = 0; i < n; i++) {
        fill_normal(logits, (size_t)V, 2.0f, &rng);
        tokens[i] = sampler_sample(&s, logits, tokens, i, &err);
        if (tokens[i] < 0) fail_msg("%s", err.msg);
    }
    sampler_free(&s);
    free(logits);
}

static void test_same_seed_same_tokens(void **state) {
    (void)state;
    SamplerParams p = params_with(1.0f, 40, 0.95f, 0.01f);
    p.repetition_penalty = 1.2f;
    p.frequency_penalty = 0.1f;
    int a[200], b[200], c[200];
    generate(p, a, 200);
    generate(p, b, 200);
    assert_memory_equal(a, b, sizeof a);
    p.seed += 1;
    generate(p, c, 200);
    assert_memory_not_equal(a, c, sizeof a);
}

// A single candidate needs no draw, so greedy steps leave the RNG stream where it was.
static void test_single_candidate_draws_nothing(void **state) {
    (void)state;
    const float logits[4] = {0.5f, 2.0f, -1.0f, 1.0f}, weights[4] = {1.0f, 1.0f, 1.0f, 1.0f};
    Sampler greedy = make_sampler(4, params_with(0.0f, 0, 1.0f, 0.0f)),
            fresh = make_sampler(4, params_with(0.0f, 0, 1.0f, 0.0f));
    Error err;
    for (int i = 0; i < 10; i++) assert_int_equal(sampler_sample(&greedy, logits, NULL, 0, &err), 1);
    for (int i = 0; i < 50; i++)
        assert_int_equal(sampler_draw(&greedy, weights, 4, &err), sampler_draw(&fresh, weights, 4, &err));
    sampler_free(&greedy);
    sampler_free(&fresh);
}

// --- invalid input --------------------------------------------------------------------------

static void expect_invalid(SamplerParams p, const char *field) {
    Error err = {{0}};
    Sampler s;
    assert_int_equal(sampler_params_validate(&p, &err), -1);
    if (!strstr(err.msg, field)) fail_msg("message '%s' does not name %s", err.msg, field);
    assert_int_equal(sampler_init(&s, 10, &p, &err), -1);
}

static void test_invalid_params_rejected(void **state) {
    (void)state;
    const SamplerParams d = sampler_params_default();
    SamplerParams p;
    const float bad_temperature[] = {-0.1f, NAN, INFINITY};
    for (int i = 0; i < 3; i++) p = d, p.temperature = bad_temperature[i], expect_invalid(p, "temperature");
    p = d, p.top_k = -1, expect_invalid(p, "top_k");
    const float bad_top_p[] = {0.0f, -0.2f, 1.5f, NAN};
    for (int i = 0; i < 4; i++) p = d, p.top_p = bad_top_p[i], expect_invalid(p, "top_p");
    const float bad_min_p[] = {-0.1f, 1.1f, NAN};
    for (int i = 0; i < 3; i++) p = d, p.min_p = bad_min_p[i], expect_invalid(p, "min_p");
    const float bad_penalty[] = {0.0f, -1.0f, NAN, INFINITY};
    for (int i = 0; i < 4; i++) p = d, p.repetition_penalty = bad_penalty[i], expect_invalid(p, "repetition_penalty");
    p = d, p.presence_penalty = NAN, expect_invalid(p, "presence_penalty");
    p = d, p.presence_penalty = INFINITY, expect_invalid(p, "presence_penalty");
    p = d, p.frequency_penalty = -INFINITY, expect_invalid(p, "frequency_penalty");
    p = d, p.penalty_window = -1, expect_invalid(p, "penalty_window");
    // the edges of each range are valid
    p = params_with(0.0f, 0, 1.0f, 1.0f);
    Error err;
    assert_int_equal(sampler_params_validate(&p, &err), 0);
    Sampler s;
    assert_int_equal(sampler_init(&s, 0, &d, &err), -1);
    assert_non_null(strstr(err.msg, "vocab_size"));
}

static void expect_sampling_error(Sampler *s, const float *logits, const int *history, int n_history,
                                  const char *what) {
    Error err = {{0}};
    float probs[8];
    assert_int_equal(sampler_sample(s, logits, history, n_history, &err), -1);
    if (!strstr(err.msg, what)) fail_msg("message '%s' does not say %s", err.msg, what);
    err.msg[0] = 0;
    assert_int_equal(sampler_distribution(s, logits, history, n_history, probs, &err), -1);
    if (!strstr(err.msg, what)) fail_msg("message '%s' does not say %s", err.msg, what);
}

static void test_bad_logits_and_history_rejected(void **state) {
    (void)state;
    SamplerParams p = params_with(1.0f, 0, 0.9f, 0.0f);
    p.repetition_penalty = 0.5f; // multiplies positive logits by 2: 3e38 overflows
    Sampler s = make_sampler(8, p);
    float logits[8] = {0.1f, 0.2f, 0.3f, NAN, 0.5f, 0.6f, 0.7f, 0.8f};
    expect_sampling_error(&s, logits, NULL, 0, "token 3 is NaN");
    logits[3] = INFINITY;
    expect_sampling_error(&s, logits, NULL, 0, "+inf");
    for (int i = 0; i < 8; i++) logits[i] = -INFINITY;
    expect_sampling_error(&s, logits, NULL, 0, "every logit is -inf");
    for (int i = 0; i < 8; i++) logits[i] = 0.1f * i;
    const int bad_low[] = {1, -1}, bad_high[] = {8};
    expect_sampling_error(&s, logits, bad_low, 2, "outside the vocabulary");
    expect_sampling_error(&s, logits, bad_high, 1, "outside the vocabulary");
    expect_sampling_error(&s, logits, NULL, 3, "NULL");
    logits[2] = 3e38f;
    const int history[] = {2, 2, 4};
    expect_sampling_error(&s, logits, history, 3, "out of float range");
    // an error leaves the sampler usable: same distribution as a fresh sampler
    logits[2] = 0.2f;
    float got[8], want[8];
    distribution_or_fail(&s, logits, history, 3, got);
    Sampler fresh = make_sampler(8, p);
    distribution_or_fail(&fresh, logits, history, 3, want);
    assert_memory_equal(got, want, sizeof got);
    // weights for sampler_draw
    Error err;
    const float negative[] = {1.0f, -0.5f}, zero[] = {0.0f, 0.0f}, nan_weight[] = {NAN, 1.0f};
    assert_int_equal(sampler_draw(&s, negative, 2, &err), -1);
    assert_int_equal(sampler_draw(&s, zero, 2, &err), -1);
    assert_int_equal(sampler_draw(&s, nan_weight, 2, &err), -1);
    assert_int_equal(sampler_draw(&s, negative, 0, &err), -1);
    sampler_free(&s);
    sampler_free(&fresh);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_distribution_matches_reference),
        cmocka_unit_test(test_distribution_on_structured_logits),
        cmocka_unit_test(test_distribution_with_penalties_matches_reference),
        cmocka_unit_test(test_masked_logits),
        cmocka_unit_test(test_draws_temperature),
        cmocka_unit_test(test_draws_top_k),
        cmocka_unit_test(test_draws_top_p),
        cmocka_unit_test(test_draws_min_p),
        cmocka_unit_test(test_draws_combined_with_penalties),
        cmocka_unit_test(test_draw_from_weights),
        cmocka_unit_test(test_greedy_is_argmax),
        cmocka_unit_test(test_greedy_after_penalties),
        cmocka_unit_test(test_repetition_penalty_ctrl_rule),
        cmocka_unit_test(test_presence_frequency_penalties),
        cmocka_unit_test(test_same_seed_same_tokens),
        cmocka_unit_test(test_single_candidate_draws_nothing),
        cmocka_unit_test(test_invalid_params_rejected),
        cmocka_unit_test(test_bad_logits_and_history_rejected),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
