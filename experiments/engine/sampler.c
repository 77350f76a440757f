// sampler.c: logits processors and sampling; sampler.h documents the pipeline and its order.
// Tests: `make build/tests/test_sampler && ./build/tests/test_sampler`.
//
// Cost at vocab V, expected O(V) with nothing sorted: a pass to check and copy the logits,
// penalties over the history window only, then greedy is an argmax; otherwise one pass gathers
// the candidates (top-k through a k-heap, after which only k need an exp), one exp per
// candidate, and top-p is a quickselect steered by probability mass after dropping tokens that
// provably cannot be in the nucleus. The kept candidates come out in no particular order,
// which neither the distribution nor the draw needs.
#include "sampler.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "rng.h"

SamplerParams sampler_params_default(void) {
    return (SamplerParams){
        .temperature = 1.0f,
        .top_k = 0,
        .top_p = 1.0f,
        .min_p = 0.0f,
        .repetition_penalty = 1.0f,
        .presence_penalty = 0.0f,
        .frequency_penalty = 0.0f,
        .penalty_window = 64,
        .seed = 42,
    };
}

// Written so that NaN fails every check (comparisons with NaN are false).
int sampler_params_validate(const SamplerParams *p, Error *err) {
    if (!(p->temperature >= 0.0f && isfinite(p->temperature)))
        return error_set(err, "sampler: temperature must be a finite number >= 0 (0 = greedy), got %g",
                         p->temperature);
    if (p->top_k < 0) return error_set(err, "sampler: top_k must be >= 0 (0 = off), got %d", p->top_k);
    if (!(p->top_p > 0.0f && p->top_p <= 1.0f))
        return error_set(err, "sampler: top_p must be in (0, 1] (1 = off), got %g", p->top_p);
    if (!(p->min_p >= 0.0f && p->min_p <= 1.0f))
        return error_set(err, "sampler: min_p must be in [0, 1] (0 = off), got %g", p->min_p);
    if (!(p->repetition_penalty > 0.0f && isfinite(p->repetition_penalty)))
        return error_set(err, "sampler: repetition_penalty must be a finite number > 0 (1 = off), got %g",
                         p->repetition_penalty);
    if (!isfinite(p->presence_penalty))
        return error_set(err, "sampler: presence_penalty must be finite (0 = off), got %g", p->presence_penalty);
    if (!isfinite(p->frequency_penalty))
        return error_set(err, "sampler: frequency_penalty must be finite (0 = off), got %g", p->frequency_penalty);
    if (p->penalty_window < 0)
        return error_set(err, "sampler: penalty_window must be >= 0 (0 = whole history), got %d", p->penalty_window);
    return 0;
}

int sampler_init(Sampler *s, int vocab_size, const SamplerParams *p, Error *err) {
    memset(s, 0, sizeof *s);
    if (vocab_size <= 0) return error_set(err, "sampler: vocab_size must be > 0, got %d", vocab_size);
    if (sampler_params_validate(p, err)) return -1;
    s->params = *p;
    s->vocab_size = vocab_size;
    s->rng = rng_seed(p->seed);
    s->logits = mallocCheck((size_t)vocab_size * sizeof *s->logits);
    s->candidates = mallocCheck((size_t)vocab_size * sizeof *s->candidates);
    s->weights = mallocCheck((size_t)vocab_size * sizeof *s->weights);
    s->counts = callocCheck((size_t)vocab_size, sizeof *s->counts);
    return 0;
}

void sampler_free(Sampler *s) {
    free(s->logits);
    free(s->candidates);
    free(s->weights);
    free(s->counts);
    memset(s, 0, sizeof *s);
}

// --- step 1: penalties --------------------------------------------------------------------

static int penalties_off(const SamplerParams *p) {
    return p->repetition_penalty == 1.0f && p->presence_penalty == 0.0f && p->frequency_penalty == 0.0f;
}

int sampler_apply_penalties(Sampler *s, float *logits, const int *history, int n_history, Error *err) {
    const SamplerParams *p = &s->params;
    if (penalties_off(p) || n_history <= 0) return 0;
    if (!history) return error_set(err, "sampler: history is NULL but n_history is %d", n_history);
    int start = (p->penalty_window > 0 && n_history > p->penalty_window) ? n_history - p->penalty_window : 0;
    const int *window = history + start;
    int n = n_history - start;
    for (int i = 0; i < n; i++) {
        if (window[i] < 0 || window[i] >= s->vocab_size)
            return error_set(err, "sampler: history token %d (position %d) is outside the vocabulary [0, %d)",
                             window[i], start + i, s->vocab_size);
    }
    for (int i = 0; i < n; i++) s->counts[window[i]]++;
    // Each distinct token is penalised once, at its first occurrence in the window; zeroing
    // its count there both skips the repeats and leaves counts all zero for the next call.
    int overflowed = -1;
    for (int i = 0; i < n; i++) {
        int t = window[i], count = s->counts[t];
        if (count == 0) continue;
        s->counts[t] = 0;
        float l = logits[t];
        if (l == -INFINITY) continue; // masked stays masked
        l = l > 0.0f ? l / p->repetition_penalty : l * p->repetition_penalty;
        l -= p->presence_penalty + p->frequency_penalty * (float)count;
        if (!isfinite(l) && overflowed < 0) overflowed = t;
        logits[t] = l;
    }
    if (overflowed >= 0)
        return error_set(err, "sampler: penalties push the logit of token %d out of float range", overflowed);
    return 0;
}

// --- steps 2-6: temperature and filters -----------------------------------------------------

// Best first: higher logit, then lower id. A strict total order, so selection is deterministic.
// Bitwise operators rather than && and ||: no branches, which the partition below relies on.
static inline int better(const SamplerCandidate *a, const SamplerCandidate *b) {
    return (a->logit > b->logit) | ((a->logit == b->logit) & (a->id < b->id));
}

static inline void swap_candidates(SamplerCandidate *a, SamplerCandidate *b) {
    SamplerCandidate t = *a;
    *a = *b;
    *b = t;
}

int sampler_argmax(const float *x, int n) {
    int best = 0;
    float max = x[0];
    for (int i = 1; i < n; i++)
        if (x[i] > max) max = x[i], best = i;
    return best;
}

// c <- every token whose logit is not -inf; returns how many.
static int gather_all(SamplerCandidate *c, const float *logits, int vocab_size) {
    int n = 0;
    for (int i = 0; i < vocab_size; i++)
        if (logits[i] > -INFINITY) c[n++] = (SamplerCandidate){.logit = logits[i], .id = i};
    return n;
}

// Restore the heap order of c (n) below i; the heap keeps its worst candidate at c[0].
static void sift_down(SamplerCandidate *c, int n, int i) {
    for (;;) {
        int worst = i, left = 2 * i + 1, right = left + 1;
        if (left < n && better(&c[worst], &c[left])) worst = left;
        if (right < n && better(&c[worst], &c[right])) worst = right;
        if (worst == i) return;
        swap_candidates(&c[i], &c[worst]);
        i = worst;
    }
}

// c <- the k best tokens whose logit is not -inf (fewer if there are not k), in no particular
// order; returns how many. One pass with a k-heap: most tokens lose a single comparison
// against the heap's worst, so this costs about V comparisons plus O(k log k log V) updates.
static int gather_top_k(SamplerCandidate *c, const float *logits, int vocab_size, int k) {
    int n = 0;
    for (int i = 0; i < vocab_size; i++) {
        if (logits[i] == -INFINITY) continue;
        SamplerCandidate t = {.logit = logits[i], .id = i};
        if (n < k) {
            c[n++] = t;
            if (n == k)
                for (int j = k / 2 - 1; j >= 0; j--) sift_down(c, k, j);
        } else if (better(&t, &c[0])) {
            c[0] = t;
            sift_down(c, k, 0);
        }
    }
    return n;
}

static double sum_e(const SamplerCandidate *c, int n) {
    double sum = 0.0;
    for (int i = 0; i < n; i++) sum += c[i].e;
    return sum;
}

// Keep the candidates with e >= threshold (order not kept); returns how many.
static int drop_below(SamplerCandidate *c, int n, float threshold) {
    int kept = 0;
    for (int i = 0; i < n; i++)
        if (c[i].e >= threshold) c[kept++] = c[i];
    return kept;
}

// A token with p < (1 - top_p) / (n - 1) is never in the nucleus: if the max survives, the
// at most n - 1 tokens below that bound hold less than 1 - top_p of the mass, so the mass
// top_p is reached before them. Returned in units of e, lowered slightly so that rounding
// can only keep a token too many, and capped at the max's e (1) so that the max survives.
static float nucleus_bound(float top_p, int n, double mass) {
    if (top_p >= 1.0f || n <= 1) return 0.0f;
    double bound = 0.999 * (1.0 - top_p) / (n - 1) * mass;
    return bound < 1.0 ? (float)bound : 1.0f;
}

// Quickselect's step on c[lo..hi) (at least 2): a median-of-three pivot ends at the returned
// m with the better candidates before it and the worse after; *better_mass gets the e-sum of
// c[lo..m). The median of three keeps ordered input (equal logits, ordered by id) from the
// quadratic worst case; the loop swaps unconditionally so it has no branch to mispredict.
static int partition(SamplerCandidate *c, int lo, int hi, double *better_mass) {
    int mid = lo + (hi - lo) / 2, last = hi - 1;
    if (better(&c[mid], &c[lo])) swap_candidates(&c[mid], &c[lo]);
    if (better(&c[last], &c[lo])) swap_candidates(&c[last], &c[lo]);
    if (better(&c[last], &c[mid])) swap_candidates(&c[last], &c[mid]);
    swap_candidates(&c[mid], &c[last]); // the median becomes the pivot, parked at the end
    SamplerCandidate pivot = c[last];
    int m = lo;
    double mass = 0.0;
    for (int i = lo; i < last; i++) {
        // c[lo..m) beat the pivot, c[m..i) do not: swapping c[i] into c[m] and advancing m
        // only if it wins keeps both true
        SamplerCandidate t = c[i];
        int wins = better(&t, &pivot);
        c[i] = c[m];
        c[m] = t;
        m += wins;
        mass += wins ? t.e : 0.0f;
    }
    swap_candidates(&c[m], &c[last]);
    *better_mass = mass;
    return m;
}

// Rearrange c (n) so that c[0..L) is the shortest best-first prefix whose e-sum reaches
// target, in no particular order, and return L (n if no prefix does). A quickselect that
// steers by mass instead of by count, so nothing is sorted. Expected O(n).
static int select_nucleus(SamplerCandidate *c, int n, double target) {
    int lo = 0, hi = n; // c[0..lo) are the lo best and hold `before` < target; L is in (lo, hi]
    double before = 0.0;
    while (hi - lo > 1) {
        double better_mass;
        int m = partition(c, lo, hi, &better_mass);
        if (before + better_mass >= target) {
            hi = m;
        } else if (before + better_mass + c[m].e >= target) {
            return m + 1;
        } else {
            before += better_mass + c[m].e;
            lo = m + 1;
        }
    }
    // lo == hi happens only if the sums, regrouped, round below target: hi still reached it
    return hi > lo ? lo + 1 : hi;
}

// Steps 2-6 on the penalised s->logits (at least one > -inf): leaves the kept candidates in
// s->candidates[0..n), returns n and sets *kept_mass to their e-sum.
static int filter_candidates(Sampler *s, double *kept_mass) {
    const SamplerParams *p = &s->params;
    SamplerCandidate *c = s->candidates;
    int best = sampler_argmax(s->logits, s->vocab_size);
    float max = s->logits[best];
    if (p->temperature == 0.0f) {
        c[0] = (SamplerCandidate){.logit = max, .e = 1.0f, .id = best};
        *kept_mass = 1.0;
        return 1;
    }
    // temperature keeps the order, so top-k selects on logits and only the k kept need exp
    int n = p->top_k > 0 ? gather_top_k(c, s->logits, s->vocab_size, p->top_k)
                         : gather_all(c, s->logits, s->vocab_size);
    // (l - max) / T rather than l / T - max / T: no overflow for tiny T, and the max gets e = 1
    for (int i = 0; i < n; i++) c[i].e = expf((c[i].logit - max) / p->temperature);
    double mass = sum_e(c, n); // the distribution top-p renormalises over
    // min-p keeps p >= min_p * p_max, i.e. e >= min_p: a best-first prefix, so it may be
    // taken before top-p as long as top-p still measures mass against `mass`
    float threshold = fmaxf(p->min_p, nucleus_bound(p->top_p, n, mass));
    if (threshold > 0.0f) n = drop_below(c, n, threshold);
    if (p->top_p < 1.0f) n = select_nucleus(c, n, (double)p->top_p * mass);
    *kept_mass = sum_e(c, n);
    return n;
}

// Copy logits to dst, refusing NaN and +inf; -inf masks a token, but not every token. The
// copy loop only flags trouble (so it stays cheap); a second pass names the token.
static int copy_checked_logits(float *dst, const float *logits, int n, Error *err) {
    int bad = 0, any_finite = 0;
    for (int i = 0; i < n; i++) {
        dst[i] = logits[i];
        bad |= !(logits[i] < INFINITY); // NaN or +inf
        any_finite |= logits[i] > -INFINITY;
    }
    for (int i = 0; bad && i < n; i++) {
        if (isnan(logits[i])) return error_set(err, "sampler: the logit of token %d is NaN", i);
        if (logits[i] == INFINITY) return error_set(err, "sampler: the logit of token %d is +inf", i);
    }
    if (!any_finite) return error_set(err, "sampler: every logit is -inf, nothing to sample");
    return 0;
}

// Steps 1-6: returns the number of candidates (s->candidates[0..n)) or -1.
static int run_filters(Sampler *s, const float *logits, const int *history, int n_history, double *kept_mass,
                       Error *err) {
    if (copy_checked_logits(s->logits, logits, s->vocab_size, err)) return -1;
    if (sampler_apply_penalties(s, s->logits, history, n_history, err)) return -1;
    return filter_candidates(s, kept_mass);
}

int sampler_distribution(Sampler *s, const float *logits, const int *history, int n_history, float *probs_out,
                         Error *err) {
    double mass;
    int n = run_filters(s, logits, history, n_history, &mass, err);
    if (n < 0) return -1;
    memset(probs_out, 0, (size_t)s->vocab_size * sizeof *probs_out);
    for (int i = 0; i < n; i++) probs_out[s->candidates[i].id] = (float)(s->candidates[i].e / mass);
    return n;
}

// --- step 7: the draw -----------------------------------------------------------------------

// Inverse CDF: u in [0, total) falls in exactly one weight's interval, because `total` was
// summed in this same order and precision; so the last index is only reached when it is due.
static int draw_index(uint64_t *rng, const float *w, int n, double total) {
    double u = rng_uniform(rng) * total, cum = 0.0;
    for (int i = 0; i < n - 1; i++) {
        cum += w[i];
        if (u < cum) return i;
    }
    return n - 1;
}

int sampler_sample(Sampler *s, const float *logits, const int *history, int n_history, Error *err) {
    double mass;
    int n = run_filters(s, logits, history, n_history, &mass, err);
    if (n < 0) return -1;
    if (n == 1) return s->candidates[0].id;
    for (int i = 0; i < n; i++) s->weights[i] = s->candidates[i].e;
    return s->candidates[draw_index(&s->rng, s->weights, n, mass)].id;
}

int sampler_draw(Sampler *s, const float *weights, int n, Error *err) {
    if (n <= 0) return error_set(err, "sampler: cannot draw from %d weights", n);
    double total = 0.0;
    for (int i = 0; i < n; i++) {
        if (!(weights[i] >= 0.0f && isfinite(weights[i])))
            return error_set(err, "sampler: weight %d is %g; weights must be finite and >= 0", i, weights[i]);
        total += weights[i];
    }
    if (total == 0.0) return error_set(err, "sampler: all %d weights are zero", n);
    return draw_index(&s->rng, weights, n, total);
}
