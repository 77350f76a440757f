// test_sampler.c: the sampler (experiments/engine/sampler.h) against plain references.
//   - the distribution of every chain equals a reference chain written here from each stage's
//     definition, in double with full sorts (|p - p_ref| <= 1e-5 per token, the same
//     candidate count): the vLLM chain's temperature / top-k / top-p / min-p / penalties on
//     random N(0, sigma) logits up to vocab 32000 and on ordered, tied and masked logits; and
//     llama.cpp's samplers (typical, top-n-sigma, XTC, DRY with breakers, dynamic temperature,
//     logit bias, mirostat 1 and 2) alone, in both named orders and in custom ones;
//   - draws at a fixed seed follow the distribution: Pearson chi-square over bins of expected
//     count >= 5 stays below the alpha = 0.001 critical value (Wilson-Hilferty:
//     df * (1 - 2/(9 df) + 3.0902 * sqrt(2/(9 df)))^3), and the same counts are rejected
//     against a deliberately wrong variant (typical ordered by probability, XTC removing every
//     token above its threshold, mirostat's surprise in nats, dynamic temperature left static,
//     the other chain order ...), so the test has power; tokens outside the candidate set are
//     never drawn; XTC's draws follow the mixture its coin makes;
//   - mirostat's mu after each draw, DRY's penalty on hand-made histories (runs, breakers of
//     one and two tokens, a breaker never penalised, the window), chain names and aliases,
//     top-n log-probabilities;
//   - greedy is the argmax; CTRL repetition and OpenAI presence/frequency penalties match
//     their formulas bit for bit; same seed, same tokens; bad parameters and logits fail
//     with a message naming the parameter.
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

// --- the reference chain: each stage from its definition, in double, with full sorts ------

typedef struct {
    int id;
    double logit, p, key; // key: the stage's order, higher first
} Ref;

static int ref_by_key(const void *a, const void *b) {
    const Ref *x = a, *y = b;
    if (x->key != y->key) return x->key > y->key ? -1 : 1;
    return x->id - y->id;
}

static void ref_sort_by_logit(Ref *c, int n) {
    for (int i = 0; i < n; i++) c[i].key = c[i].logit;
    qsort(c, (size_t)n, sizeof *c, ref_by_key);
}

// p <- softmax of the logits over c (n); returns the entropy in nats.
static double ref_softmax(Ref *c, int n) {
    double max = -INFINITY, z = 0.0, h = 0.0;
    for (int i = 0; i < n; i++) max = fmax(max, c[i].logit);
    for (int i = 0; i < n; i++) z += c[i].p = exp(c[i].logit - max);
    for (int i = 0; i < n; i++) c[i].p /= z, h -= c[i].p > 0 ? c[i].p * log(c[i].p) : 0.0;
    return h;
}

// The shortest prefix of c sorted by key whose mass reaches target.
static int ref_prefix_mass(Ref *c, int n, double target) {
    qsort(c, (size_t)n, sizeof *c, ref_by_key);
    double cum = 0.0;
    for (int r = 0; r < n; r++)
        if ((cum += c[r].p) >= target) return r + 1;
    return n;
}

// DRY by its definition: for each earlier position j of the window, the longest run ending
// at j that equals the run ending at the window's last token, counted one token at a time.
static void ref_dry(const SamplerParams *p, Ref *c, int n, const int *h, int n_history) {
    int len = p->dry_penalty_last_n < 0 || n_history < p->dry_penalty_last_n ? n_history : p->dry_penalty_last_n;
    if (p->dry_multiplier == 0.0f || p->dry_penalty_last_n == 0 || len <= p->dry_allowed_length) return;
    const int *w = h + n_history - len;
    int limit = len;
    for (int i = 0; i < len && limit == len; i++) { // i tokens back: the latest breaker
        int longest = -1;
        for (int b = 0; b < p->n_dry_breakers; b++) {
            const SamplerBreaker *br = &p->dry_breakers[b];
            if (br->head != w[len - 1 - i] || br->n_tail > i) continue;
            int ok = 1;
            for (int t = 0; t < br->n_tail; t++) ok &= br->tail[t] == w[len - i + t];
            if (ok && br->n_tail > longest) longest = br->n_tail;
        }
        if (longest >= 0) limit = i - longest;
    }
    if (limit < p->dry_allowed_length) return;
    for (int r = 0; r < n; r++) {
        int best = -1, single = 0;
        for (int b = 0; b < p->n_dry_breakers; b++) single |= p->dry_breakers[b].head == c[r].id && !p->dry_breakers[b].n_tail;
        for (int j = 0; j + 1 < len; j++) {
            if (w[j + 1] != c[r].id) continue;
            int run = 0;
            while (run <= j && w[j - run] == w[len - 1 - run]) run++;
            if (run > limit) run = limit;
            if (run >= p->dry_allowed_length && run > best) best = run;
        }
        if (best < 0 || single) continue;
        int e = best - p->dry_allowed_length, max_e = p->dry_base > 1.000001f ? (int)(88.7228391 / log(p->dry_base)) : 0;
        c[r].logit -= p->dry_multiplier * pow(p->dry_base, max_e > 0 && e > max_e ? max_e : e);
    }
}

static int ref_stage(const SamplerParams *p, SamplerStage stage, Ref *c, int n, const int *h, int n_history) {
    switch (stage) {
    case SAMPLER_PENALTIES: {
        int start = p->penalty_window > 0 && n_history > p->penalty_window ? n_history - p->penalty_window : 0;
        for (int r = 0; r < n; r++) {
            int count = 0;
            for (int i = start; i < n_history; i++) count += h[i] == c[r].id;
            if (count == 0) continue;
            double l = c[r].logit > 0 ? c[r].logit / p->repetition_penalty : c[r].logit * p->repetition_penalty;
            c[r].logit = l - (p->presence_penalty + (double)p->frequency_penalty * count);
        }
        return n;
    }
    case SAMPLER_DRY: ref_dry(p, c, n, h, n_history); return n;
    case SAMPLER_TOP_N_SIGMA: {
        if (p->top_n_sigma <= 0.0f || n <= 1) return n;
        double mean = 0.0, var = 0.0, max = -INFINITY;
        for (int r = 0; r < n; r++) mean += c[r].logit / n, max = fmax(max, c[r].logit);
        for (int r = 0; r < n; r++) var += (c[r].logit - mean) * (c[r].logit - mean) / n;
        ref_sort_by_logit(c, n);
        while (c[n - 1].logit < max - p->top_n_sigma * sqrt(var)) n--;
        return n;
    }
    case SAMPLER_TOP_K: ref_sort_by_logit(c, n); return p->top_k > 0 && p->top_k < n ? p->top_k : n;
    case SAMPLER_TYPICAL: {
        if (p->typical_p >= 1.0f) return n;
        double h_nats = ref_softmax(c, n);
        for (int r = 0; r < n; r++) c[r].key = -fabs(-log(c[r].p) - h_nats);
        return ref_prefix_mass(c, n, p->typical_p);
    }
    case SAMPLER_TOP_P:
        if (p->top_p >= 1.0f) return n;
        ref_softmax(c, n);
        for (int r = 0; r < n; r++) c[r].key = c[r].logit;
        return ref_prefix_mass(c, n, p->top_p);
    case SAMPLER_MIN_P:
        if (p->min_p <= 0.0f) return n;
        ref_sort_by_logit(c, n);
        ref_softmax(c, n);
        while (c[n - 1].p < p->min_p * c[0].p) n--;
        return n;
    case SAMPLER_XTC: { // the coin always falls (tests use xtc_probability 1 here)
        if (p->xtc_probability <= 0.0f || p->xtc_threshold > 0.5f || n < 2) return n;
        ref_sort_by_logit(c, n);
        ref_softmax(c, n);
        int above = 0;
        while (above < n && c[above].p >= p->xtc_threshold) above++;
        if (above < 2) return n;
        memmove(c, c + above - 1, (size_t)(n - above + 1) * sizeof *c);
        return n - above + 1;
    }
    case SAMPLER_TEMPERATURE: {
        double t = p->temperature;
        if (p->dynatemp_range > 0.0f && n > 1) {
            double lo = fmax(0.0, t - p->dynatemp_range), hi = t + p->dynatemp_range;
            t = lo + (hi - lo) * pow(ref_softmax(c, n) / log((double)n), p->dynatemp_exponent);
        }
        if (t <= 0.0) {
            ref_sort_by_logit(c, n);
            return 1;
        }
        for (int r = 0; r < n; r++) c[r].logit /= t;
        return n;
    }
    default: fail_msg("unknown stage %d", (int)stage);
    }
    return n;
}

// Mirostat's truncation at the given mu, after temperature.
static int ref_mirostat(const SamplerParams *p, double mu, int V, Ref *c, int n) {
    n = ref_stage(p, SAMPLER_TEMPERATURE, c, n, NULL, 0);
    ref_sort_by_logit(c, n);
    ref_softmax(c, n);
    if (p->mirostat == 2) {
        int kept = 1;
        while (kept < n && -log2(c[kept].p) <= mu) kept++;
        return kept;
    }
    double tb = 0.0, tt = 0.0;
    for (int i = 0; i + 1 < 100 && i + 1 < n; i++) {
        double t = log((i + 2.0) / (i + 1.0));
        tb += t * log(c[i].p / c[i + 1].p), tt += t * t;
    }
    double s_hat = tb / tt, k = pow((s_hat - 1) * pow(2, mu) / (1 - pow(V, 1 - s_hat)), 1 / s_hat);
    return k >= 1 && k < n ? (int)k : k < 1 ? 1 : n;
}

// The reference distribution of params p (mirostat at mu = 2 tau): probs (V), returns the
// number of candidates.
static int ref_distribution(const SamplerParams *p, const float *logits, int V, const int *history, int n_history,
                            double *probs) {
    Ref *c = mallocCheck((size_t)V * sizeof *c);
    double *l = mallocCheck((size_t)V * sizeof *l);
    for (int i = 0; i < V; i++) l[i] = logits[i];
    for (int b = 0; b < p->n_logit_bias; b++) l[p->logit_bias[b].token] += p->logit_bias[b].bias;
    int n = 0;
    for (int i = 0; i < V; i++)
        if (l[i] > -INFINITY) c[n++] = (Ref){.id = i, .logit = l[i]};
    if (p->mirostat) n = ref_mirostat(p, 2.0 * p->mirostat_tau, V, c, n);
    for (int st = 0; !p->mirostat && st < p->chain.length; st++)
        n = ref_stage(p, p->chain.stage[st], c, n, history, n_history);
    ref_softmax(c, n);
    memset(probs, 0, (size_t)V * sizeof(double));
    for (int r = 0; r < n; r++) probs[c[r].id] = c[r].p;
    free(c); free(l);
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

enum { DRAW_V = 40, N_DRAWS = 40000 };

// The counts of N_DRAWS draws must fit `expected` (and draw nothing it gives probability 0),
// and must not fit `wrong`, so the test has the power to see that variant.
static void check_counts(const int *counts, const float *expected, const float *wrong, const char *what) {
    int df;
    for (int i = 0; i < DRAW_V; i++)
        if (expected[i] == 0.0f && counts[i] > 0) fail_msg("%s: token %d is not a candidate but was drawn %d times", what, i, counts[i]);
    double stat = chi_square(counts, expected, DRAW_V, N_DRAWS, &df), crit = chi_square_critical_001(df);
    if (df < 1 || stat > crit) fail_msg("%s: chi2 %.2f > critical %.2f (df %d)", what, stat, crit, df);
    int impossible = 0;
    for (int i = 0; i < DRAW_V; i++) impossible |= wrong[i] == 0.0f && counts[i] > 0;
    double wrong_stat = chi_square(counts, wrong, DRAW_V, N_DRAWS, &df);
    if (!impossible && wrong_stat <= chi_square_critical_001(df))
        fail_msg("%s: chi-square cannot tell it from the wrong variant (%.2f)", what, wrong_stat);
}

static float *draw_logits(void) {
    uint64_t rng = rng_seed(11);
    return random_logits(DRAW_V, 2.0f, &rng);
}

// Draw N_DRAWS times with params p at a fixed seed; the counts must fit the filtered
// distribution and must not fit the distribution of params `wrong`.
static void check_draws(SamplerParams p, SamplerParams wrong, const int *history, int n_history) {
    float *logits = draw_logits();
    float probs[DRAW_V], wrong_probs[DRAW_V];
    int counts[DRAW_V] = {0};
    Sampler s = make_sampler(DRAW_V, p), w = make_sampler(DRAW_V, wrong);
    int n = distribution_or_fail(&s, logits, history, n_history, probs);
    distribution_or_fail(&w, logits, history, n_history, wrong_probs);
    Error err;
    for (int d = 0; d < N_DRAWS; d++) {
        int t = sampler_sample(&s, logits, history, n_history, &err);
        if (t < 0 || t >= DRAW_V) fail_msg("sampler_sample returned %d: %s", t, err.msg);
        counts[t]++;
    }
    char what[400], chain[160];
    sampler_chain_format(&p.chain, chain, sizeof chain);
    snprintf(what, sizeof what, "T=%g k=%d p=%g min_p=%g typ=%g nsigma=%g [%s] (%d candidates)", p.temperature,
             p.top_k, p.top_p, p.min_p, p.typical_p, p.top_n_sigma, chain, n);
    check_counts(counts, probs, wrong_probs, what);
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

// --- the llama.cpp samplers and the chain ---------------------------------------------------

static SamplerParams llama_params(float T) {
    SamplerParams p = sampler_params_default();
    p.chain = SAMPLER_CHAIN_LLAMA;
    p.temperature = T;
    return p;
}

static SamplerChain chain_of(const char *spec) {
    SamplerChain c;
    Error err;
    if (sampler_chain_parse(spec, &c, &err)) fail_msg("%s", err.msg);
    return c;
}

// Every sampler, alone and in both named chains and in custom orders, against the reference.
static void test_llama_samplers_match_reference(void **state) {
    (void)state;
    static const SamplerBreaker breakers[] = {{.head = 7}, {.head = 3, .n_tail = 1, .tail = {4}}};
    static const SamplerLogitBias biases[] = {{5, 4.0f}, {6, -INFINITY}, {17, -2.5f}};
    SamplerParams cases[24];
    int n = 0;
    for (int i = 0; i < 3; i++) cases[n] = llama_params(1.0f), cases[n++].typical_p = (float[]){0.9f, 0.5f, 0.2f}[i];
    for (int i = 0; i < 2; i++) cases[n] = llama_params(0.8f), cases[n++].top_n_sigma = (float[]){1.0f, 2.5f}[i];
    for (int i = 0; i < 3; i++) {
        cases[n] = llama_params(1.0f);
        cases[n].xtc_probability = 1.0f; // the coin always falls; a coin is tested by its draws below
        cases[n++].xtc_threshold = (float[]){0.1f, 0.02f, 0.3f}[i];
    }
    cases[n] = llama_params(0.7f), cases[n++].dynatemp_range = 0.5f;
    cases[n] = llama_params(1.0f), cases[n].dynatemp_range = 1.0f, cases[n++].dynatemp_exponent = 2.0f;
    cases[n] = llama_params(0.3f), cases[n++].dynatemp_range = 0.8f; // the range's low end clamps at 0
    // llama.cpp's CLI defaults in both orders
    for (int i = 0; i < 2; i++) {
        cases[n] = llama_params(0.8f);
        cases[n].chain = i ? SAMPLER_CHAIN_VLLM : SAMPLER_CHAIN_LLAMA;
        cases[n].top_k = 40, cases[n].top_p = 0.95f, cases[n++].min_p = 0.05f;
    }
    cases[n] = llama_params(1.0f);
    cases[n].dry_multiplier = 0.8f, cases[n].dry_breakers = breakers, cases[n++].n_dry_breakers = 2;
    cases[n] = llama_params(1.0f);
    cases[n].dry_multiplier = 1.5f, cases[n].dry_allowed_length = 0, cases[n].dry_base = 3.0f;
    cases[n++].dry_penalty_last_n = -1;
    cases[n] = llama_params(1.0f), cases[n].logit_bias = biases, cases[n++].n_logit_bias = 3;
    cases[n] = llama_params(1.0f), cases[n].mirostat = 2, cases[n++].mirostat_tau = 3.0f;
    cases[n] = llama_params(1.0f), cases[n].mirostat = 2, cases[n++].mirostat_tau = 8.0f;
    cases[n] = llama_params(1.2f), cases[n].mirostat = 1, cases[n++].mirostat_tau = 4.0f;
    cases[n] = llama_params(0.9f), cases[n].chain = chain_of("top_k;temperature;typ_p;min_p");
    cases[n].top_k = 100, cases[n].typical_p = 0.7f, cases[n++].min_p = 0.02f;
    cases[n] = llama_params(1.3f), cases[n].chain = chain_of("xtc;top_n_sigma;penalties;top_p");
    cases[n].xtc_probability = 1.0f, cases[n].top_n_sigma = 2.0f, cases[n].repetition_penalty = 1.3f;
    cases[n++].top_p = 0.9f;
    // a repetitive history: DRY finds runs, the penalties find counts
    int history[300];
    for (int i = 0; i < 300; i++) history[i] = (i % 23 < 12 ? i % 23 : (i * 7) % 19) + (i > 200 ? 3 : 0);
    for (int c = 0; c < n; c++)
        for (int si = 0; si < 3; si++) {
            float sigma = (float[]){0.3f, 1.0f, 3.0f}[si];
            uint64_t rng = rng_seed(700 + c * 3 + si);
            float *big = random_logits(32000, sigma, &rng), *small = random_logits(37, sigma, &rng);
            compare_with_reference(big, 32000, cases[c], history, 300, "random logits, V 32000");
            compare_with_reference(small, 37, cases[c], history, 300, "random logits, V 37");
            free(big); free(small);
        }
}

// Each sampler's draws fit its distribution, and the chi-square rejects the usual wrong
// variant: typical ordered by probability (top-p), top-n-sigma at another n, dynamic
// temperature left static, the filters before temperature instead of after.
static void test_draws_llama_samplers(void **state) {
    (void)state;
    SamplerParams p = llama_params(1.0f), wrong = p;
    p.typical_p = 0.6f, wrong.top_p = 0.6f;
    check_draws(p, wrong, NULL, 0);
    p = llama_params(1.0f), wrong = p;
    p.top_n_sigma = 1.0f, wrong.top_n_sigma = 1.4f;
    check_draws(p, wrong, NULL, 0);
    p = llama_params(1.0f), wrong = p;
    p.dynatemp_range = 0.8f;
    check_draws(p, wrong, NULL, 0);
    p = llama_params(1.5f), p.top_p = 0.8f, wrong = p, wrong.chain = SAMPLER_CHAIN_VLLM;
    check_draws(p, wrong, NULL, 0);
    p = llama_params(0.7f), p.min_p = 0.1f, p.top_k = 12, wrong = p, wrong.chain = SAMPLER_CHAIN_VLLM;
    check_draws(p, wrong, NULL, 0);
}

// XTC's coin: the draws follow (1 - q) * untouched + q * excluded. The wrong variant removes
// every token above the threshold, the least likely of them too.
static void test_draws_xtc(void **state) {
    (void)state;
    const float q = 0.5f, threshold = 0.08f;
    float *logits = draw_logits();
    SamplerParams p = llama_params(1.0f), always = p;
    p.xtc_probability = q, p.xtc_threshold = threshold;
    always.xtc_probability = 1.0f, always.xtc_threshold = threshold;
    Sampler plain = make_sampler(DRAW_V, llama_params(1.0f)), cut = make_sampler(DRAW_V, always);
    float untouched[DRAW_V], excluded[DRAW_V], expected[DRAW_V], wrong[DRAW_V];
    distribution_or_fail(&plain, logits, NULL, 0, untouched);
    int kept = distribution_or_fail(&cut, logits, NULL, 0, excluded);
    assert_true(kept < DRAW_V); // the logits have two or more tokens above the threshold
    // the wrong variant: drop all of them, renormalise the rest
    double rest = 0.0;
    for (int i = 0; i < DRAW_V; i++) rest += untouched[i] < threshold ? untouched[i] : 0.0;
    for (int i = 0; i < DRAW_V; i++) {
        expected[i] = (1 - q) * untouched[i] + q * excluded[i];
        wrong[i] = (1 - q) * untouched[i] + q * (untouched[i] < threshold ? (float)(untouched[i] / rest) : 0.0f);
    }
    Sampler s = make_sampler(DRAW_V, p);
    int counts[DRAW_V] = {0};
    Error err;
    for (int d = 0; d < N_DRAWS; d++) counts[sampler_sample(&s, logits, NULL, 0, &err)]++;
    check_counts(counts, expected, wrong, "xtc 0.5 / 0.08");
    assert_false(sampler_is_stateless(&s));
    assert_true(sampler_is_stateless(&plain));
    sampler_free(&s); sampler_free(&plain); sampler_free(&cut);
    free(logits);
}

// Mirostat 2's first draw from fresh samplers (mu = 2 tau) fits its truncation; the wrong
// variant measures surprise in nats instead of bits (tau / ln 2 in bits).
static void test_draws_mirostat(void **state) {
    (void)state;
    float *logits = draw_logits();
    SamplerParams p = llama_params(1.0f), wrong;
    p.mirostat = 2, p.mirostat_tau = 2.0f;
    wrong = p, wrong.mirostat_tau = 2.0f / (float)M_LN2;
    float expected[DRAW_V], wrong_probs[DRAW_V];
    Sampler s = make_sampler(DRAW_V, p), w = make_sampler(DRAW_V, wrong);
    distribution_or_fail(&s, logits, NULL, 0, expected);
    distribution_or_fail(&w, logits, NULL, 0, wrong_probs);
    sampler_free(&s); sampler_free(&w);
    int counts[DRAW_V] = {0};
    Error err;
    for (int d = 0; d < N_DRAWS; d++) {
        p.seed = (uint64_t)d;
        s = make_sampler(DRAW_V, p);
        counts[sampler_sample(&s, logits, NULL, 0, &err)]++;
        sampler_free(&s);
    }
    check_counts(counts, expected, wrong_probs, "mirostat 2, tau 2");
    free(logits);
}

// mu starts at 2 tau and after each draw moves by eta times the drawn token's surprise (in
// bits, under the truncated distribution) less tau; the next truncation uses the new mu.
static void test_mirostat_mu_update(void **state) {
    (void)state;
    for (int version = 1; version <= 2; version++) {
        float *logits = draw_logits();
        SamplerParams p = llama_params(1.0f);
        p.mirostat = version, p.mirostat_tau = 3.0f, p.mirostat_eta = 0.25f;
        Sampler s = make_sampler(DRAW_V, p);
        Error err;
        float probs[DRAW_V];
        double mu = 6.0;
        int history[20];
        for (int step = 0; step < 20; step++) {
            assert_true(fabs(s.mu - mu) < 1e-5);
            double want[DRAW_V];
            distribution_or_fail(&s, logits, NULL, 0, probs);
            Ref *c = mallocCheck(DRAW_V * sizeof *c);
            for (int i = 0; i < DRAW_V; i++) c[i] = (Ref){.id = i, .logit = logits[i]};
            int n = ref_mirostat(&p, mu, DRAW_V, c, DRAW_V);
            ref_softmax(c, n);
            memset(want, 0, sizeof want);
            for (int r = 0; r < n; r++) want[c[r].id] = c[r].p;
            free(c);
            for (int i = 0; i < DRAW_V; i++) assert_true(fabs(probs[i] - want[i]) < 1e-5);
            int t = sampler_sample(&s, logits, history, step, &err);
            assert_true(probs[t] > 0.0f);
            history[step] = t;
            mu -= 0.25 * (-log2(want[t]) - 3.0);
        }
        assert_true(fabs(s.mu - mu) < 1e-4);
        sampler_free(&s);
        free(logits);
    }
}

// DRY on hand-made histories, V = 10, multiplier 1, base 2, allowed length 2: the penalty
// is visible as log(p_t / p_0) - (l_t - l_0).
static double dry_penalty_of(const int *history, int n_history, int token, const SamplerBreaker *breakers,
                             int n_breakers) {
    const float logits[10] = {0.3f, -0.2f, 0.5f, 1.0f, 0.1f, -0.7f, 0.0f, 0.4f, 0.2f, -0.1f};
    SamplerParams p = llama_params(1.0f);
    p.chain = chain_of("dry");
    p.dry_multiplier = 1.0f, p.dry_base = 2.0f, p.dry_allowed_length = 2;
    p.dry_breakers = breakers, p.n_dry_breakers = n_breakers;
    Sampler s = make_sampler(10, p);
    float probs[10];
    distribution_or_fail(&s, logits, history, n_history, probs);
    sampler_free(&s);
    int other = token == 0 ? 9 : 0; // a token no run precedes in these histories
    return -(log(probs[token] / probs[other]) - (logits[token] - logits[other]));
}

static void test_dry_on_hand_made_sequences(void **state) {
    (void)state;
    const int abc[] = {1, 2, 3, 4, 1, 2, 3};
    // "1 2 3" repeats: 4 would make it a run of 4 > 2 allowed: 2^(3 - 2)
    assert_true(fabs(dry_penalty_of(abc, 7, 4, NULL, 0) - 2.0) < 1e-5);
    assert_true(fabs(dry_penalty_of(abc, 7, 1, NULL, 0)) < 1e-5); // no run of 2 precedes a 1
    // a longer repeat: "5 6 1 2 3" then "5 6 1 2" ... run of 4 before 3: 2^(4 - 2)
    const int longer[] = {5, 6, 1, 2, 3, 8, 5, 6, 1, 2};
    assert_true(fabs(dry_penalty_of(longer, 10, 3, NULL, 0) - 4.0) < 1e-5);
    // breakers: a single-token breaker 2 one token back limits runs to 1 < allowed: no penalty
    const SamplerBreaker two = {.head = 2}, two_three = {.head = 2, .n_tail = 1, .tail = {3}},
                         nine = {.head = 9};
    assert_true(fabs(dry_penalty_of(abc, 7, 4, &two, 1)) < 1e-5);
    // "2 3" as a two-token breaker ending the history: limit 0
    assert_true(fabs(dry_penalty_of(abc, 7, 4, &two_three, 1)) < 1e-5);
    // a breaker the history lacks changes nothing
    assert_true(fabs(dry_penalty_of(abc, 7, 4, &nine, 1) - 2.0) < 1e-5);
    // a single-token breaker is never penalised itself: 7 would extend "5 6" (run 2: 2^0),
    // and 7 two tokens back limits runs to 2
    const int fifty_six[] = {5, 6, 7, 5, 6};
    const SamplerBreaker seven = {.head = 7};
    assert_true(fabs(dry_penalty_of(fifty_six, 5, 7, NULL, 0) - 1.0) < 1e-5);
    assert_true(fabs(dry_penalty_of(fifty_six, 5, 7, &seven, 1)) < 1e-5);
    // the window: with the last 4 tokens only, "1 2 3 4 1 2 3" has no earlier "1 2 3"
    SamplerParams p = llama_params(1.0f);
    p.chain = chain_of("dry"), p.dry_multiplier = 1.0f, p.dry_base = 2.0f, p.dry_penalty_last_n = 4;
    Sampler s = make_sampler(10, p);
    float probs[10], flat[10] = {0};
    distribution_or_fail(&s, flat, abc, 7, probs);
    for (int i = 0; i < 10; i++) assert_true(fabs(probs[i] - 0.1f) < 1e-6);
    sampler_free(&s);
}

static void test_chain_names(void **state) {
    (void)state;
    SamplerChain c = chain_of("penalties;dry;top_n_sigma;top_k;typ_p;top_p;min_p;xtc;temperature");
    assert_memory_equal(&c, &SAMPLER_CHAIN_LLAMA, sizeof c);
    c = chain_of("llama.cpp");
    assert_memory_equal(&c, &SAMPLER_CHAIN_LLAMA, sizeof c);
    c = chain_of("vllm");
    assert_memory_equal(&c, &SAMPLER_CHAIN_VLLM, sizeof c);
    c = chain_of("top-k, temp;typical nucleus");
    assert_int_equal(c.length, 4);
    assert_int_equal(c.stage[0], SAMPLER_TOP_K);
    assert_int_equal(c.stage[1], SAMPLER_TEMPERATURE);
    assert_int_equal(c.stage[2], SAMPLER_TYPICAL);
    assert_int_equal(c.stage[3], SAMPLER_TOP_P);
    char buf[200];
    sampler_chain_format(&SAMPLER_CHAIN_VLLM, buf, sizeof buf);
    assert_string_equal(buf, "penalties;temperature;min_p;top_k;top_p");
    Error err = {{0}};
    assert_int_equal(sampler_chain_parse("top_k;topp;temperature", &c, &err), -1);
    assert_non_null(strstr(err.msg, "'topp'"));
}

// Logit bias moves the listed logits before any sampler; -inf takes a token out.
static void test_logit_bias(void **state) {
    (void)state;
    const float logits[4] = {1.0f, 2.0f, 0.5f, -1.0f};
    const SamplerLogitBias biases[] = {{0, 1.5f}, {1, -INFINITY}};
    SamplerParams p = llama_params(0.0f);
    p.logit_bias = biases, p.n_logit_bias = 2;
    Sampler s = make_sampler(4, p);
    Error err;
    assert_int_equal(sampler_sample(&s, logits, NULL, 0, &err), 0); // 2.5 beats the forbidden 2.0
    sampler_free(&s);
    p.temperature = 1.0f;
    s = make_sampler(4, p);
    float probs[4];
    assert_int_equal(distribution_or_fail(&s, logits, NULL, 0, probs), 3);
    assert_true(probs[1] == 0.0f);
    assert_true(fabs(log(probs[0] / probs[2]) - 2.0) < 1e-5);
    sampler_free(&s);
    const SamplerLogitBias outside[] = {{4, 1.0f}};
    p.logit_bias = outside, p.n_logit_bias = 1;
    assert_int_equal(sampler_init(&s, 4, &p, &err), -1);
    assert_non_null(strstr(err.msg, "logit_bias"));
}

static void test_top_logprobs(void **state) {
    (void)state;
    uint64_t rng = rng_seed(77);
    float *logits = random_logits(500, 2.0f, &rng);
    int ids[5];
    float lp[5];
    sampler_top_logprobs(logits, 500, 5, ids, lp);
    double z = 0.0;
    for (int i = 0; i < 500; i++) z += exp((double)logits[i]);
    for (int r = 0; r < 5; r++) {
        int rank = 0;
        for (int i = 0; i < 500; i++) rank += logits[i] > logits[ids[r]];
        assert_int_equal(rank, r);
        assert_true(fabs(lp[r] - (logits[ids[r]] - log(z))) < 1e-4);
    }
    free(logits);
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
    const float bad_typical[] = {0.0f, 1.5f, NAN};
    for (int i = 0; i < 3; i++) p = d, p.typical_p = bad_typical[i], expect_invalid(p, "typical_p");
    p = d, p.top_n_sigma = -1.0f, expect_invalid(p, "top_n_sigma");
    p = d, p.xtc_probability = 1.5f, expect_invalid(p, "xtc_probability");
    p = d, p.xtc_threshold = -0.1f, expect_invalid(p, "xtc_threshold");
    p = d, p.dynatemp_range = -0.5f, expect_invalid(p, "dynatemp_range");
    p = d, p.dynatemp_exponent = 0.0f, expect_invalid(p, "dynatemp_exponent");
    p = d, p.dry_multiplier = -1.0f, expect_invalid(p, "dry_multiplier");
    p = d, p.dry_base = 0.5f, expect_invalid(p, "dry_base");
    p = d, p.dry_allowed_length = -1, expect_invalid(p, "dry_allowed_length");
    p = d, p.dry_penalty_last_n = -2, expect_invalid(p, "dry_penalty_last_n");
    p = d, p.mirostat = 3, expect_invalid(p, "mirostat");
    p = d, p.mirostat_tau = 0.0f, expect_invalid(p, "mirostat_tau");
    p = d, p.mirostat_eta = 1.5f, expect_invalid(p, "mirostat_eta");
    const SamplerLogitBias nan_bias[] = {{0, NAN}};
    p = d, p.logit_bias = nan_bias, p.n_logit_bias = 1, expect_invalid(p, "logit_bias");
    p = d, p.chain.length = SAMPLER_MAX_CHAIN + 1, expect_invalid(p, "chain");
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
        cmocka_unit_test(test_llama_samplers_match_reference),
        cmocka_unit_test(test_draws_llama_samplers),
        cmocka_unit_test(test_draws_xtc),
        cmocka_unit_test(test_draws_mirostat),
        cmocka_unit_test(test_mirostat_mu_update),
        cmocka_unit_test(test_dry_on_hand_made_sequences),
        cmocka_unit_test(test_chain_names),
        cmocka_unit_test(test_logit_bias),
        cmocka_unit_test(test_top_logprobs),
        cmocka_unit_test(test_invalid_params_rejected),
        cmocka_unit_test(test_bad_logits_and_history_rejected),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
