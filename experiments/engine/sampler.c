// sampler.c: logits processors and sampling; sampler.h documents the chain and each stage.
// Tests: `make build/tests/test_sampler && ./build/tests/test_sampler`.
//
// Cost at vocab V, expected O(V) for every stage but mirostat v1 and a typical-p over many
// candidates, with nothing sorted: a pass to check and copy the logits and gather the
// candidates, penalties and DRY over the history window, top-k through a k-heap, top-p and
// typical-p as a quickselect steered by probability mass (top-p first drops the tokens that
// provably cannot be in the nucleus). The kept candidates come out in no particular order,
// which neither the distribution nor the draw needs.
#include "sampler.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rng.h"

const SamplerChain SAMPLER_CHAIN_LLAMA = {
    .stage = {SAMPLER_PENALTIES, SAMPLER_DRY, SAMPLER_TOP_N_SIGMA, SAMPLER_TOP_K, SAMPLER_TYPICAL, SAMPLER_TOP_P,
              SAMPLER_MIN_P, SAMPLER_XTC, SAMPLER_TEMPERATURE},
    .length = 9,
};
const SamplerChain SAMPLER_CHAIN_VLLM = {
    .stage = {SAMPLER_PENALTIES, SAMPLER_TEMPERATURE, SAMPLER_MIN_P, SAMPLER_TOP_K, SAMPLER_TOP_P},
    .length = 5,
};

SamplerParams sampler_params_default(void) {
    return (SamplerParams){
        .temperature = 1.0f,
        .dynatemp_range = 0.0f,
        .dynatemp_exponent = 1.0f,
        .top_k = 0,
        .top_p = 1.0f,
        .min_p = 0.0f,
        .typical_p = 1.0f,
        .top_n_sigma = 0.0f,
        .xtc_probability = 0.0f,
        .xtc_threshold = 0.1f,
        .repetition_penalty = 1.0f,
        .presence_penalty = 0.0f,
        .frequency_penalty = 0.0f,
        .penalty_window = 64,
        .dry_multiplier = 0.0f,
        .dry_base = 1.75f,
        .dry_allowed_length = 2,
        .dry_penalty_last_n = 64,
        .mirostat = 0,
        .mirostat_tau = 5.0f,
        .mirostat_eta = 0.1f,
        .chain = SAMPLER_CHAIN_VLLM,
        .seed = 42,
    };
}

// --- parameters and chains ------------------------------------------------------------------

static const char *const STAGE_NAMES[SAMPLER_STAGE_KINDS] = {
    [SAMPLER_PENALTIES] = "penalties", [SAMPLER_DRY] = "dry",     [SAMPLER_TOP_N_SIGMA] = "top_n_sigma",
    [SAMPLER_TOP_K] = "top_k",         [SAMPLER_TYPICAL] = "typ_p", [SAMPLER_TOP_P] = "top_p",
    [SAMPLER_MIN_P] = "min_p",         [SAMPLER_XTC] = "xtc",     [SAMPLER_TEMPERATURE] = "temperature",
};

const char *sampler_stage_name(SamplerStage stage) {
    return stage >= 0 && stage < SAMPLER_STAGE_KINDS ? STAGE_NAMES[stage] : "?";
}

// Written so that NaN fails every check (comparisons with NaN are false).
#define CHECK(ok, ...)                                                  \
    do {                                                                \
        if (!(ok)) return error_set(err, "sampler: " __VA_ARGS__);      \
    } while (0)

int sampler_params_validate(const SamplerParams *p, Error *err) {
    CHECK(p->temperature >= 0.0f && isfinite(p->temperature),
          "temperature must be a finite number >= 0 (0 = greedy), got %g", p->temperature);
    CHECK(p->dynatemp_range >= 0.0f && isfinite(p->dynatemp_range),
          "dynatemp_range must be a finite number >= 0 (0 = off), got %g", p->dynatemp_range);
    CHECK(p->dynatemp_exponent > 0.0f && isfinite(p->dynatemp_exponent),
          "dynatemp_exponent must be a finite number > 0, got %g", p->dynatemp_exponent);
    CHECK(p->top_k >= 0, "top_k must be >= 0 (0 = off), got %d", p->top_k);
    CHECK(p->top_p > 0.0f && p->top_p <= 1.0f, "top_p must be in (0, 1] (1 = off), got %g", p->top_p);
    CHECK(p->min_p >= 0.0f && p->min_p <= 1.0f, "min_p must be in [0, 1] (0 = off), got %g", p->min_p);
    CHECK(p->typical_p > 0.0f && p->typical_p <= 1.0f, "typical_p must be in (0, 1] (1 = off), got %g",
          p->typical_p);
    CHECK(p->top_n_sigma >= 0.0f && isfinite(p->top_n_sigma),
          "top_n_sigma must be a finite number >= 0 (0 = off), got %g", p->top_n_sigma);
    CHECK(p->xtc_probability >= 0.0f && p->xtc_probability <= 1.0f,
          "xtc_probability must be in [0, 1] (0 = off), got %g", p->xtc_probability);
    CHECK(p->xtc_threshold >= 0.0f && p->xtc_threshold <= 1.0f,
          "xtc_threshold must be in [0, 1] (above 0.5 = off), got %g", p->xtc_threshold);
    CHECK(p->repetition_penalty > 0.0f && isfinite(p->repetition_penalty),
          "repetition_penalty must be a finite number > 0 (1 = off), got %g", p->repetition_penalty);
    CHECK(isfinite(p->presence_penalty), "presence_penalty must be finite (0 = off), got %g", p->presence_penalty);
    CHECK(isfinite(p->frequency_penalty), "frequency_penalty must be finite (0 = off), got %g", p->frequency_penalty);
    CHECK(p->penalty_window >= 0, "penalty_window must be >= 0 (0 = whole history), got %d", p->penalty_window);
    CHECK(p->dry_multiplier >= 0.0f && isfinite(p->dry_multiplier),
          "dry_multiplier must be a finite number >= 0 (0 = off), got %g", p->dry_multiplier);
    CHECK(p->dry_base >= 1.0f && isfinite(p->dry_base), "dry_base must be a finite number >= 1, got %g", p->dry_base);
    CHECK(p->dry_allowed_length >= 0, "dry_allowed_length must be >= 0, got %d", p->dry_allowed_length);
    CHECK(p->dry_penalty_last_n >= -1, "dry_penalty_last_n must be >= -1 (0 = off, -1 = whole history), got %d",
          p->dry_penalty_last_n);
    CHECK(p->n_dry_breakers >= 0 && (p->n_dry_breakers == 0 || p->dry_breakers),
          "dry_breakers: %d breakers but no array", p->n_dry_breakers);
    CHECK(p->mirostat >= 0 && p->mirostat <= 2, "mirostat must be 0 (off), 1 or 2, got %d", p->mirostat);
    CHECK(p->mirostat_tau > 0.0f && isfinite(p->mirostat_tau), "mirostat_tau must be a finite number > 0, got %g",
          p->mirostat_tau);
    CHECK(p->mirostat_eta > 0.0f && p->mirostat_eta <= 1.0f, "mirostat_eta must be in (0, 1], got %g",
          p->mirostat_eta);
    CHECK(p->n_logit_bias >= 0 && (p->n_logit_bias == 0 || p->logit_bias),
          "logit_bias: %d biases but no array", p->n_logit_bias);
    for (int i = 0; i < p->n_logit_bias; i++)
        CHECK(isfinite(p->logit_bias[i].bias) || p->logit_bias[i].bias == -INFINITY,
              "logit_bias of token %d must be finite or -inf, got %g", p->logit_bias[i].token, p->logit_bias[i].bias);
    CHECK(p->chain.length >= 0 && p->chain.length <= SAMPLER_MAX_CHAIN, "chain has %d samplers (at most %d)",
          p->chain.length, SAMPLER_MAX_CHAIN);
    for (int i = 0; i < p->chain.length; i++)
        CHECK(p->chain.stage[i] >= 0 && p->chain.stage[i] < SAMPLER_STAGE_KINDS, "chain: sampler %d is unknown (%d)", i,
              (int)p->chain.stage[i]);
    return 0;
}

// The name in spec[0..len) as a stage: llama.cpp's names and aliases, '-' read as '_'.
static int stage_from_name(const char *name, size_t len) {
    static const struct {
        const char *name;
        SamplerStage stage;
    } ALIASES[] = {{"typical", SAMPLER_TYPICAL}, {"typ", SAMPLER_TYPICAL}, {"typical_p", SAMPLER_TYPICAL},
                   {"nucleus", SAMPLER_TOP_P},   {"temp", SAMPLER_TEMPERATURE}};
    char buf[32];
    if (len >= sizeof buf) return -1;
    for (size_t i = 0; i < len; i++) buf[i] = name[i] == '-' ? '_' : name[i];
    buf[len] = 0;
    for (int s = 0; s < SAMPLER_STAGE_KINDS; s++)
        if (!strcmp(buf, STAGE_NAMES[s])) return s;
    for (size_t a = 0; a < sizeof ALIASES / sizeof ALIASES[0]; a++)
        if (!strcmp(buf, ALIASES[a].name)) return ALIASES[a].stage;
    return -1;
}

int sampler_chain_parse(const char *spec, SamplerChain *chain, Error *err) {
    if (!strcmp(spec, "llama.cpp") || !strcmp(spec, "llama")) return *chain = SAMPLER_CHAIN_LLAMA, 0;
    if (!strcmp(spec, "vllm")) return *chain = SAMPLER_CHAIN_VLLM, 0;
    SamplerChain c = {.length = 0};
    for (const char *at = spec; *at;) {
        size_t len = strcspn(at, ";, ");
        if (len > 0) {
            int stage = stage_from_name(at, len);
            if (stage < 0)
                return error_set(err, "sampler: unknown sampler '%.*s' in '%s' (known: penalties, dry, top_n_sigma, "
                                      "top_k, typ_p, top_p, min_p, xtc, temperature; or the chains llama.cpp, vllm)",
                                 (int)len, at, spec);
            if (c.length == SAMPLER_MAX_CHAIN)
                return error_set(err, "sampler: more than %d samplers in '%s'", SAMPLER_MAX_CHAIN, spec);
            c.stage[c.length++] = stage;
        }
        at += len + (at[len] != 0);
    }
    *chain = c;
    return 0;
}

void sampler_chain_format(const SamplerChain *chain, char *buf, size_t n) {
    size_t used = 0;
    if (n) buf[0] = 0;
    for (int i = 0; i < chain->length && used < n; i++)
        used += (size_t)snprintf(buf + used, n - used, "%s%s", i ? ";" : "", sampler_stage_name(chain->stage[i]));
}

// --- set-up ---------------------------------------------------------------------------------

static int check_token(int token, int V, const char *what, Error *err) {
    if (token < 0 || token >= V) return error_set(err, "sampler: %s token %d is outside the vocabulary [0, %d)", what, token, V);
    return 0;
}

int sampler_init(Sampler *s, int vocab_size, const SamplerParams *p, Error *err) {
    memset(s, 0, sizeof *s);
    if (vocab_size <= 0) return error_set(err, "sampler: vocab_size must be > 0, got %d", vocab_size);
    if (sampler_params_validate(p, err)) return -1;
    for (int i = 0; i < p->n_logit_bias; i++)
        if (check_token(p->logit_bias[i].token, vocab_size, "logit_bias", err)) return -1;
    for (int i = 0; i < p->n_dry_breakers; i++) {
        const SamplerBreaker *b = &p->dry_breakers[i];
        if (check_token(b->head, vocab_size, "dry breaker", err)) return -1;
        if (b->n_tail < 0 || b->n_tail > SAMPLER_BREAKER_MAX_TAIL)
            return error_set(err, "sampler: dry breaker %d has %d tail tokens (0..%d)", i, b->n_tail,
                             SAMPLER_BREAKER_MAX_TAIL);
        for (int j = 0; j < b->n_tail; j++)
            if (check_token(b->tail[j], vocab_size, "dry breaker", err)) return -1;
    }
    s->params = *p;
    s->vocab_size = vocab_size;
    s->rng = rng_seed(p->seed);
    s->xtc_rng = rng_seed(p->seed ^ 0x7874636f696e21ull); // "xtcoin!": a stream apart from the draws
    s->mu = 2.0f * p->mirostat_tau;
    size_t V = (size_t)vocab_size;
    s->logits = mallocCheck(V * sizeof *s->logits);
    s->candidates = mallocCheck(V * sizeof *s->candidates);
    s->weights = mallocCheck(V * sizeof *s->weights);
    s->counts = callocCheck(V, sizeof *s->counts);
    s->repeat = callocCheck(V, sizeof *s->repeat);
    s->breaker_kind = callocCheck(V, 1);
    s->breakers = mallocCheck(((size_t)p->n_dry_breakers + 1) * sizeof *s->breakers);
    s->biases = mallocCheck(((size_t)p->n_logit_bias + 1) * sizeof *s->biases);
    if (p->n_dry_breakers) memcpy(s->breakers, p->dry_breakers, (size_t)p->n_dry_breakers * sizeof *s->breakers);
    if (p->n_logit_bias) memcpy(s->biases, p->logit_bias, (size_t)p->n_logit_bias * sizeof *s->biases);
    s->params.dry_breakers = s->breakers;
    s->params.logit_bias = s->biases;
    for (int i = 0; i < p->n_dry_breakers; i++) {
        unsigned char *kind = &s->breaker_kind[s->breakers[i].head];
        if (s->breakers[i].n_tail == 0) *kind = 1;
        else if (*kind == 0) *kind = 2;
    }
    return 0;
}

void sampler_free(Sampler *s) {
    free(s->logits);
    free(s->candidates);
    free(s->weights);
    free(s->counts);
    free(s->repeat);
    free(s->z);
    free(s->breaker_kind);
    free(s->breakers);
    free(s->biases);
    memset(s, 0, sizeof *s);
}

int sampler_is_stateless(const Sampler *s) {
    if (s->params.mirostat) return 0;
    for (int i = 0; i < s->params.chain.length; i++)
        if (s->params.chain.stage[i] == SAMPLER_XTC && s->params.xtc_probability > 0.0f &&
            s->params.xtc_threshold <= 0.5f)
            return 0;
    return 1;
}

// --- candidates -----------------------------------------------------------------------------

// Best first: higher key, then lower id. A strict total order, so selection is deterministic.
// Bitwise operators rather than && and ||: no branches, which the partition below relies on.
static inline int better(const SamplerCandidate *a, const SamplerCandidate *b) {
    return (a->key > b->key) | ((a->key == b->key) & (a->id < b->id));
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

static void key_by_logit(SamplerCandidate *c, int n) {
    for (int i = 0; i < n; i++) c[i].key = c[i].logit;
}

// The best candidate by logit (lowest id on ties).
static int best_candidate(const SamplerCandidate *c, int n) {
    int best = 0;
    for (int i = 1; i < n; i++)
        if (c[i].logit > c[best].logit || (c[i].logit == c[best].logit && c[i].id < c[best].id)) best = i;
    return best;
}

// c[i].p <- exp(logit - max) (the max gets exactly 1); returns their sum in double.
static double unnormalised_probs(SamplerCandidate *c, int n) {
    float max = c[best_candidate(c, n)].logit;
    double sum = 0.0;
    for (int i = 0; i < n; i++) sum += c[i].p = expf(c[i].logit - max);
    return sum;
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

// Keep the k best by key of c (n), in place and in no particular order; returns how many. One
// pass with a k-heap in c[0..k): most candidates lose a single comparison against its worst.
static int keep_best_k(SamplerCandidate *c, int n, int k) {
    if (k >= n) return n;
    for (int j = k / 2 - 1; j >= 0; j--) sift_down(c, k, j);
    for (int i = k; i < n; i++)
        if (better(&c[i], &c[0])) {
            c[0] = c[i];
            sift_down(c, k, 0);
        }
    return k;
}

// Sort c (n) best first by key.
static int compare_candidates(const void *a, const void *b) {
    return better(a, b) ? -1 : better(b, a) ? 1 : 0;
}

// Quickselect's step on c[lo..hi) (at least 2): a median-of-three pivot ends at the returned
// m with the better candidates before it and the worse after; *better_mass gets the p-sum of
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
        mass += wins ? t.p : 0.0f;
    }
    swap_candidates(&c[m], &c[last]);
    *better_mass = mass;
    return m;
}

// Rearrange c (n) so that c[0..L) is the shortest best-first (by key) prefix whose p-sum
// reaches target, in no particular order, and return L (n if no prefix does). A quickselect
// that steers by mass instead of by count, so nothing is sorted. Expected O(n).
static int select_by_mass(SamplerCandidate *c, int n, double target) {
    int lo = 0, hi = n; // c[0..lo) are the lo best and hold `before` < target; L is in (lo, hi]
    double before = 0.0;
    while (hi - lo > 1) {
        double better_mass;
        int m = partition(c, lo, hi, &better_mass);
        if (before + better_mass >= target) {
            hi = m;
        } else if (before + better_mass + c[m].p >= target) {
            return m + 1;
        } else {
            before += better_mass + c[m].p;
            lo = m + 1;
        }
    }
    // lo == hi happens only if the sums, regrouped, round below target: hi still reached it
    return hi > lo ? lo + 1 : hi;
}

// Keep the candidates with p >= threshold (order not kept); returns how many.
static int keep_p_at_least(SamplerCandidate *c, int n, float threshold) {
    int kept = 0;
    for (int i = 0; i < n; i++)
        if (c[i].p >= threshold) c[kept++] = c[i];
    return kept;
}

static int keep_logit_at_least(SamplerCandidate *c, int n, float threshold) {
    int kept = 0;
    for (int i = 0; i < n; i++)
        if (c[i].logit >= threshold) c[kept++] = c[i];
    return kept;
}

// Entropy in nats of the distribution p / mass over c (n).
static double entropy(const SamplerCandidate *c, int n, double mass) {
    double h = 0.0;
    for (int i = 0; i < n; i++)
        if (c[i].p > 0.0f) h -= c[i].p / mass * log(c[i].p / mass);
    return h;
}

// --- the stages -----------------------------------------------------------------------------

// Each stage takes the candidates c (n >= 1) and returns how many it keeps (>= 1), first.

static int check_history(const Sampler *s, const int *history, int from, int n_history, Error *err) {
    if (n_history > 0 && !history) return error_set(err, "sampler: history is NULL but n_history is %d", n_history);
    for (int i = from; i < n_history; i++)
        if (history[i] < 0 || history[i] >= s->vocab_size)
            return error_set(err, "sampler: history token %d (position %d) is outside the vocabulary [0, %d)",
                             history[i], i, s->vocab_size);
    return 0;
}

// count[t] for the tokens of the last `window` history tokens (0: all), which the caller
// checked; returns the window's start.
static int count_window(Sampler *s, const int *history, int n_history, int window) {
    int start = (window > 0 && n_history > window) ? n_history - window : 0;
    for (int i = start; i < n_history; i++) s->counts[history[i]]++;
    return start;
}

static void clear_counts(Sampler *s, const int *history, int start, int n_history) {
    for (int i = start; i < n_history; i++) s->counts[history[i]] = 0;
}

static float penalised(const SamplerParams *p, float l, int count) {
    l = l > 0.0f ? l / p->repetition_penalty : l * p->repetition_penalty;
    return l - (p->presence_penalty + p->frequency_penalty * (float)count);
}

static int penalties_off(const SamplerParams *p) {
    return p->repetition_penalty == 1.0f && p->presence_penalty == 0.0f && p->frequency_penalty == 0.0f;
}

static int stage_penalties(Sampler *s, SamplerCandidate *c, int n, const int *history, int n_history, Error *err) {
    const SamplerParams *p = &s->params;
    if (penalties_off(p) || n_history <= 0) return n;
    int start = count_window(s, history, n_history, p->penalty_window);
    int overflowed = -1;
    for (int i = 0; i < n; i++) {
        int count = s->counts[c[i].id];
        if (count == 0) continue;
        c[i].logit = penalised(p, c[i].logit, count);
        if (!isfinite(c[i].logit) && overflowed < 0) overflowed = c[i].id;
    }
    clear_counts(s, history, start, n_history);
    if (overflowed >= 0)
        return error_set(err, "sampler: penalties push the logit of token %d out of float range", overflowed);
    return n;
}

int sampler_apply_penalties(Sampler *s, float *logits, const int *history, int n_history, Error *err) {
    const SamplerParams *p = &s->params;
    if (penalties_off(p) || n_history <= 0) return 0;
    if (check_history(s, history, 0, n_history, err)) return -1;
    int start = count_window(s, history, n_history, p->penalty_window);
    int overflowed = -1;
    // each distinct token once, at its first occurrence in the window; zeroing its count
    // there both skips the repeats and leaves counts all zero for the next call
    for (int i = start; i < n_history; i++) {
        int t = history[i], count = s->counts[t];
        if (count == 0) continue;
        s->counts[t] = 0;
        if (logits[t] == -INFINITY) continue; // masked stays masked
        logits[t] = penalised(p, logits[t], count);
        if (!isfinite(logits[t]) && overflowed < 0) overflowed = t;
    }
    if (overflowed >= 0)
        return error_set(err, "sampler: penalties push the logit of token %d out of float range", overflowed);
    return 0;
}

// DRY's repeat limit: the distance back to the most recent sequence breaker in the window w
// (n tokens, oldest first), less the breaker's tail; n if there is none.
static int dry_repeat_limit(const Sampler *s, const int *w, int n) {
    for (int i = 0; i < n; i++) { // i tokens from the end
        int head = w[n - 1 - i];
        if (!s->breaker_kind[head]) continue;
        int longest = -1;
        for (int b = 0; b < s->params.n_dry_breakers; b++) {
            const SamplerBreaker *br = &s->breakers[b];
            if (br->head != head || br->n_tail <= longest || br->n_tail > i) continue;
            int match = 1;
            for (int j = 0; j < br->n_tail && match; j++) match = br->tail[j] == w[n - 1 - i + 1 + j];
            if (match) longest = br->n_tail;
        }
        if (longest >= 0) return i - longest;
    }
    return n;
}

// z[k] (k = 1..n-1) <- the length of the longest common suffix of w[0..n) and w[0..n-k): how
// many tokens ending at w[n-1-k] repeat the window's last ones. The Z-function of the reversed
// window, O(n).
static void suffix_matches(int *z, const int *w, int n) {
#define REV(i) w[n - 1 - (i)]
    int l = 0, r = 0; // [l, r): the rightmost match box found so far
    for (int k = 1; k < n; k++) {
        int len = k < r ? (z[k - l] < r - k ? z[k - l] : r - k) : 0;
        while (k + len < n && REV(len) == REV(k + len)) len++;
        z[k] = len;
        if (k + len > r) l = k, r = k + len;
    }
#undef REV
}

static int stage_dry(Sampler *s, SamplerCandidate *c, int n, const int *history, int n_history) {
    const SamplerParams *p = &s->params;
    if (p->dry_multiplier == 0.0f || p->dry_penalty_last_n == 0) return n;
    int len = p->dry_penalty_last_n < 0 || n_history < p->dry_penalty_last_n ? n_history : p->dry_penalty_last_n;
    if (len <= p->dry_allowed_length) return n;
    const int *w = history + (n_history - len);
    int limit = dry_repeat_limit(s, w, len);
    if (limit < p->dry_allowed_length) return n;
    if (len > s->z_capacity) { // the window may be longer than the vocabulary
        s->z_capacity = len;
        s->z = reallocCheck(s->z, (size_t)len * sizeof *s->z);
    }
    suffix_matches(s->z, w, len);
    // the token after each repeated run would extend it: keep each token's longest run (+ 1)
    for (int k = 1; k < len; k++) {
        int run = s->z[k] < limit ? s->z[k] : limit;
        int next = w[len - k];
        if (run >= p->dry_allowed_length && run + 1 > s->repeat[next]) s->repeat[next] = run + 1;
    }
    // exponents past this would overflow the penalty (llama.cpp's clamp)
    int max_exponent = p->dry_base > 1.000001f ? (int)(88.7228391f / logf(p->dry_base)) : 0;
    for (int i = 0; i < n; i++) {
        int run = s->repeat[c[i].id] - 1;
        if (run < 0 || s->breaker_kind[c[i].id] == 1) continue;
        int exponent = run - p->dry_allowed_length;
        if (max_exponent > 0 && exponent > max_exponent) exponent = max_exponent;
        c[i].logit -= p->dry_multiplier * powf(p->dry_base, (float)exponent);
    }
    for (int k = 1; k < len; k++) s->repeat[w[len - k]] = 0;
    return n;
}

static int stage_top_n_sigma(const Sampler *s, SamplerCandidate *c, int n) {
    float nsigma = s->params.top_n_sigma;
    if (nsigma <= 0.0f || n <= 1) return n;
    double sum = 0.0, sq = 0.0;
    for (int i = 0; i < n; i++) sum += c[i].logit;
    double mean = sum / n;
    for (int i = 0; i < n; i++) sq += (c[i].logit - mean) * (c[i].logit - mean);
    float max = c[best_candidate(c, n)].logit, sigma = (float)sqrt(sq / n);
    return keep_logit_at_least(c, n, max - nsigma * sigma);
}

static int stage_top_k(const Sampler *s, SamplerCandidate *c, int n) {
    if (s->params.top_k <= 0) return n;
    key_by_logit(c, n);
    return keep_best_k(c, n, s->params.top_k);
}

// A token with p < (1 - top_p) / (n - 1) is never in the nucleus: if the max survives, the
// at most n - 1 tokens below that bound hold less than 1 - top_p of the mass, so the mass
// top_p is reached before them. Returned in units of p (max 1), lowered slightly so that
// rounding can only keep a token too many, and capped at 1 so that the max survives.
static float nucleus_bound(float top_p, int n, double mass) {
    if (n <= 1) return 0.0f;
    double bound = 0.999 * (1.0 - top_p) / (n - 1) * mass;
    return bound < 1.0 ? (float)bound : 1.0f;
}

static int stage_top_p(const Sampler *s, SamplerCandidate *c, int n) {
    float top_p = s->params.top_p;
    if (top_p >= 1.0f) return n;
    double mass = unnormalised_probs(c, n);
    int kept = keep_p_at_least(c, n, nucleus_bound(top_p, n, mass));
    key_by_logit(c, kept);
    return select_by_mass(c, kept, (double)top_p * mass);
}

// llama.cpp's form: p >= min_p * p_max as logits.
static int stage_min_p(const Sampler *s, SamplerCandidate *c, int n) {
    if (s->params.min_p <= 0.0f) return n;
    return keep_logit_at_least(c, n, c[best_candidate(c, n)].logit + logf(s->params.min_p));
}

// Closest to the entropy first: key = -|-log p - H|.
static int stage_typical(const Sampler *s, SamplerCandidate *c, int n) {
    float typical_p = s->params.typical_p;
    if (typical_p >= 1.0f) return n;
    double mass = unnormalised_probs(c, n), h = entropy(c, n, mass);
    for (int i = 0; i < n; i++) c[i].key = -(float)fabs(-log(c[i].p / mass) - h);
    return select_by_mass(c, n, (double)typical_p * mass);
}

static int stage_xtc(Sampler *s, SamplerCandidate *c, int n) {
    const SamplerParams *p = &s->params;
    if (p->xtc_probability <= 0.0f || p->xtc_threshold > 0.5f || n < 2) return n;
    if (rng_uniform(&s->xtc_rng) > p->xtc_probability) return n;
    double mass = unnormalised_probs(c, n);
    int above = 0, last = -1; // the least likely of the tokens at or above the threshold
    for (int i = 0; i < n; i++) {
        if (c[i].p / mass < p->xtc_threshold) continue;
        above++;
        c[i].key = c[i].logit;
        if (last < 0 || better(&c[last], &c[i])) last = i;
    }
    if (above < 2) return n;
    SamplerCandidate keep = c[last];
    int kept = 0;
    for (int i = 0; i < n; i++)
        if (c[i].p / mass < p->xtc_threshold) c[kept++] = c[i];
    c[kept++] = keep;
    return kept;
}

static int keep_only_best(SamplerCandidate *c, int n) {
    c[0] = c[best_candidate(c, n)];
    return 1;
}

static int scale_by_temperature(SamplerCandidate *c, int n, float t) {
    if (t <= 0.0f) return keep_only_best(c, n);
    for (int i = 0; i < n; i++) c[i].logit /= t;
    return n;
}

static int stage_temperature(const Sampler *s, SamplerCandidate *c, int n) {
    const SamplerParams *p = &s->params;
    float t = p->temperature;
    if (p->dynatemp_range > 0.0f && n > 1) {
        float lo = fmaxf(0.0f, t - p->dynatemp_range), hi = t + p->dynatemp_range;
        double mass = unnormalised_probs(c, n);
        double normalised = entropy(c, n, mass) / log((double)n);
        t = lo + (hi - lo) * powf((float)normalised, p->dynatemp_exponent);
    }
    return scale_by_temperature(c, n, t);
}

// Mirostat 1: estimate the Zipf exponent s from the 100 most likely, then top-k with the k
// whose expected surprise is mu (Basu et al., as llama.cpp computes it, on the candidates
// sorted whole as llama.cpp sorts them).
static int stage_mirostat_v1(const Sampler *s, SamplerCandidate *c, int n) {
    enum { M = 100 };
    key_by_logit(c, n);
    qsort(c, (size_t)n, sizeof *c, compare_candidates);
    unnormalised_probs(c, n); // the ratios p_i / p_(i+1) are all the estimate needs
    float sum_tb = 0.0f, sum_tt = 0.0f;
    for (int i = 0; i + 1 < M && i + 1 < n; i++) {
        float t_i = logf((float)(i + 2) / (float)(i + 1)), b_i = logf(c[i].p / c[i + 1].p);
        sum_tb += t_i * b_i;
        sum_tt += t_i * t_i;
    }
    float s_hat = sum_tb / sum_tt, eps = s_hat - 1.0f;
    float k = powf(eps * powf(2.0f, s->mu) / (1.0f - powf((float)s->vocab_size, -eps)), 1.0f / s_hat);
    // a NaN k (one candidate, or a flat top: s_hat 0) keeps them all, as int(NaN) does not promise
    return k >= 1.0f && k < (float)n ? (int)k : k < 1.0f ? 1 : n;
}

// Mirostat 2: drop the tokens whose surprise -log2 p exceeds mu; the most likely always stays.
static int stage_mirostat_v2(const Sampler *s, SamplerCandidate *c, int n) {
    double mass = unnormalised_probs(c, n);
    SamplerCandidate best = c[best_candidate(c, n)];
    int kept = 0;
    for (int i = 0; i < n; i++)
        if (-log2(c[i].p / mass) <= s->mu) c[kept++] = c[i];
    if (kept == 0) c[kept++] = best;
    return kept;
}

// --- the chain ------------------------------------------------------------------------------

// Copy logits to dst, refusing NaN and +inf; -inf masks a token, but not every token. The
// copy loop only flags trouble (so it stays cheap); a second pass names the token.
static int copy_checked_logits(float *dst, const float *logits, int n, Error *err) {
    int bad = 0;
    for (int i = 0; i < n; i++) {
        dst[i] = logits[i];
        bad |= !(logits[i] < INFINITY); // NaN or +inf
    }
    for (int i = 0; bad && i < n; i++) {
        if (isnan(logits[i])) return error_set(err, "sampler: the logit of token %d is NaN", i);
        if (logits[i] == INFINITY) return error_set(err, "sampler: the logit of token %d is +inf", i);
    }
    return 0;
}

// Every token whose (biased) logit is not -inf becomes a candidate; returns how many.
static int gather_candidates(Sampler *s, Error *err) {
    const SamplerParams *p = &s->params;
    for (int i = 0; i < p->n_logit_bias; i++) s->logits[p->logit_bias[i].token] += p->logit_bias[i].bias;
    int n = 0;
    for (int i = 0; i < s->vocab_size; i++)
        if (s->logits[i] > -INFINITY) s->candidates[n++] = (SamplerCandidate){.logit = s->logits[i], .id = i};
    if (n == 0) return error_set(err, "sampler: every logit is -inf, nothing to sample");
    for (int i = 0; i < n; i++)
        if (!isfinite(s->candidates[i].logit))
            return error_set(err, "sampler: the logit bias pushes the logit of token %d out of float range",
                             s->candidates[i].id);
    return n;
}

static int run_stage(Sampler *s, SamplerStage stage, int n, const int *history, int n_history, Error *err) {
    SamplerCandidate *c = s->candidates;
    switch (stage) {
    case SAMPLER_PENALTIES: return stage_penalties(s, c, n, history, n_history, err);
    case SAMPLER_DRY: return stage_dry(s, c, n, history, n_history);
    case SAMPLER_TOP_N_SIGMA: return stage_top_n_sigma(s, c, n);
    case SAMPLER_TOP_K: return stage_top_k(s, c, n);
    case SAMPLER_TYPICAL: return stage_typical(s, c, n);
    case SAMPLER_TOP_P: return stage_top_p(s, c, n);
    case SAMPLER_MIN_P: return stage_min_p(s, c, n);
    case SAMPLER_XTC: return stage_xtc(s, c, n);
    case SAMPLER_TEMPERATURE: return stage_temperature(s, c, n);
    default: return error_set(err, "sampler: unknown stage %d", (int)stage);
    }
}

// Logit bias and the chain (or mirostat's): the kept candidates in s->candidates[0..n) with
// p = exp(logit - max); returns n (or -1) and sets *mass to their p-sum.
static int run_chain(Sampler *s, const float *logits, const int *history, int n_history, double *mass, Error *err) {
    const SamplerParams *p = &s->params;
    if (check_history(s, history, 0, n_history, err)) return -1;
    if (copy_checked_logits(s->logits, logits, s->vocab_size, err)) return -1;
    int n = gather_candidates(s, err);
    if (n < 0) return -1;
    if (p->mirostat) {
        n = scale_by_temperature(s->candidates, n, p->temperature);
        n = p->mirostat == 1 ? stage_mirostat_v1(s, s->candidates, n) : stage_mirostat_v2(s, s->candidates, n);
    } else {
        for (int i = 0; i < p->chain.length && n > 0; i++) n = run_stage(s, p->chain.stage[i], n, history, n_history, err);
    }
    if (n < 0) return -1;
    *mass = unnormalised_probs(s->candidates, n);
    return n;
}

int sampler_distribution(Sampler *s, const float *logits, const int *history, int n_history, float *probs_out,
                         Error *err) {
    double mass;
    int n = run_chain(s, logits, history, n_history, &mass, err);
    if (n < 0) return -1;
    memset(probs_out, 0, (size_t)s->vocab_size * sizeof *probs_out);
    for (int i = 0; i < n; i++) probs_out[s->candidates[i].id] = (float)(s->candidates[i].p / mass);
    return n;
}

// --- the draw -------------------------------------------------------------------------------

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
    int n = run_chain(s, logits, history, n_history, &mass, err);
    if (n < 0) return -1;
    int k = 0;
    if (n > 1) {
        for (int i = 0; i < n; i++) s->weights[i] = s->candidates[i].p;
        k = draw_index(&s->rng, s->weights, n, mass);
    }
    if (s->params.mirostat) { // mu follows the surprise of what was drawn
        float surprise = -log2f((float)(s->candidates[k].p / mass));
        s->mu -= s->params.mirostat_eta * (surprise - s->params.mirostat_tau);
    }
    return s->candidates[k].id;
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

// --- log-probabilities ----------------------------------------------------------------------

void sampler_top_logprobs(const float *logits, int V, int n, int *ids, float *logprobs) {
    float max = logits[sampler_argmax(logits, V)];
    double sum = 0.0;
    for (int i = 0; i < V; i++) sum += expf(logits[i] - max);
    float log_z = max + (float)log(sum);
    // n passes of a selection: n is a handful (llama.cpp's --n-probs), V is the vocabulary
    for (int r = 0; r < n; r++) {
        int best = -1;
        for (int i = 0; i < V; i++) {
            int taken = 0;
            for (int q = 0; q < r && !taken; q++) taken = ids[q] == i;
            if (!taken && (best < 0 || logits[i] > logits[best])) best = i;
        }
        ids[r] = best;
        logprobs[r] = logits[best] - log_z;
    }
}
