// test_speculative.c: speculative decoding (experiments/engine/speculative.h) is exact.
//   - greedy (T = 0): the output equals plain greedy decoding token for token, for a draft
//     of random weights (everything rejected), the target itself as draft (nothing rejected),
//     a perturbed copy of the target (some of each) and the lookup draft, at gamma 1, 2, 4,
//     8 and 15, also with a repetition penalty (whose history must include the drafts) and
//     after a prompt prefilled through sgemm; a callback's stop ends the generation there;
//   - sampling (T > 0): on a tiny model (V = 20) the 1st, 2nd and (gamma + 1)-th generated
//     tokens of 10^4 seeded runs follow the target's exact marginals (enumerated over every
//     path with the target alone) by Pearson's chi-square at alpha = 0.001 each, at T = 1 and
//     at T = 0.8 with top-k, top-p and a repetition penalty, for a model draft and the lookup
//     draft; and the same test rejects four wrong rules (accept if p > q, the first draft
//     committed unverified, p instead of the residual after a rejection, the bonus drawn from
//     the last draft's row), so it has the power to catch them;
//   - rollback: after every step, both caches' first len positions are bit for bit those of
//     a cache built by prefilling the accepted tokens alone;
//   - bookkeeping: acceptance rate and mean accepted length from the counts, totals that add,
//     the top-2 logit margin;
//   - bad input (gamma outside [1, 15], a draft of another vocabulary, too few verification
//     rows, a context that does not fit, sessions that do not hold the context) is an error.
// Run: make build/tests/test_speculative && ./build/tests/test_speculative
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <math.h>
#include <string.h>

#include "chi_square.h"
#include "common.h"
#include "kernels.h"
#include "model_reference.h"
#include "speculative.h"

// Every forward of <= 16 rows rounds as single rows (kernels.c); the targets' engines take
// prompts in up to 64 rows, through sgemm, as experiments do.
enum { ROWS = 16, PREFILL_ROWS = 64 };

// A target and a draft (a model, or none: the lookup draft), each on its own engine.
typedef struct {
    Engine target_engine, draft_engine;
    Session target, draft;
    int has_draft;
} Pair;

static void pair_open(Pair *p, const Model *target, const Model *draft, int capacity) {
    p->has_draft = draft != NULL;
    engine_open(&p->target_engine, target, ops_cpu(), DTYPE_F32, PREFILL_ROWS, capacity);
    session_open(&p->target, &p->target_engine, capacity);
    if (!draft) return;
    engine_open(&p->draft_engine, draft, ops_cpu(), DTYPE_F32, ROWS, capacity);
    session_open(&p->draft, &p->draft_engine, capacity);
}

static void pair_close(Pair *p) {
    session_close(&p->target);
    engine_close(&p->target_engine);
    if (!p->has_draft) return;
    session_close(&p->draft);
    engine_close(&p->draft_engine);
}

static Session *pair_draft(Pair *p) { return p->has_draft ? &p->draft : NULL; }

static void prefill_or_fail(Session *s, const int *tokens, int n) {
    Error err;
    if (session_prefill(s, tokens, n, NULL, &err)) fail_msg("prefill: %s", err.msg);
}

// Bring both sessions to "holds tokens[0..n) with its logits" from any longer state.
static void pair_reset(Pair *p, const int *tokens, int n) {
    Session *ss[2] = {&p->target, pair_draft(p)};
    for (int i = 0; i < 2 && ss[i]; i++) {
        session_truncate(ss[i], n - 1);
        prefill_or_fail(ss[i], tokens + n - 1, 1);
    }
}

static Sampler sampler_or_fail(int V, SamplerParams sp) {
    Sampler s;
    Error err;
    if (sampler_init(&s, V, &sp, &err)) fail_msg("sampler_init: %s", err.msg);
    return s;
}

static Speculative speculative_or_fail(Pair *p, Sampler *s, int gamma) {
    Speculative sd;
    Error err;
    SpecParams sp = spec_params_default();
    sp.gamma = gamma;
    if (speculative_init(&sd, &p->target, pair_draft(p), s, &sp, &err)) fail_msg("speculative_init: %s", err.msg);
    return sd;
}

// A copy of m with N(0, std) added to every weight: a draft that mostly agrees with m.
static void perturbed_model(Model *d, const Model *m, uint64_t seed, float std) {
    model_alloc(d, &m->config);
    uint64_t rng = rng_seed(seed);
    for (size_t i = 0; i < m->n_params; i++) d->params[i] = m->params[i] + std * rng_normal(&rng);
}

// --- greedy: token for token ------------------------------------------------------------------

enum { PROMPT = 12, LONG_PROMPT = 24, NEW = 40, CAPACITY = 64 };

// Plain decoding with the target: prefill, then session_generate.
static void plain_generate(const Model *m, SamplerParams sp, int *tokens, int n, int n_new) {
    Engine e;
    Session s;
    Error err;
    Sampler smp = sampler_or_fail(m->config.vocab_size, sp);
    engine_open(&e, m, ops_cpu(), DTYPE_F32, PREFILL_ROWS, CAPACITY);
    session_open(&s, &e, CAPACITY);
    prefill_or_fail(&s, tokens, n);
    if (session_generate(&s, &smp, tokens, n, n_new, NULL, NULL, &err) != n_new) fail_msg("generate: %s", err.msg);
    session_close(&s);
    engine_close(&e);
    sampler_free(&smp);
}

// Speculative greedy output must equal plain greedy output; returns the run's statistics.
static SpecStats check_greedy(const Model *target, const Model *draft, int gamma, SamplerParams sp, int prompt) {
    int V = target->config.vocab_size, want[LONG_PROMPT + NEW], got[LONG_PROMPT + NEW];
    random_tokens(want, prompt, V, 5);
    memcpy(got, want, sizeof want);
    plain_generate(target, sp, want, prompt, NEW);
    Pair p;
    pair_open(&p, target, draft, CAPACITY);
    prefill_or_fail(&p.target, got, prompt);
    if (draft) prefill_or_fail(&p.draft, got, prompt);
    Sampler s = sampler_or_fail(V, sp);
    Speculative sd = speculative_or_fail(&p, &s, gamma);
    Error err;
    if (speculative_generate(&sd, got, prompt, NEW, NULL, NULL, &err) != NEW) fail_msg("speculative: %s", err.msg);
    for (int i = prompt; i < prompt + NEW; i++)
        if (got[i] != want[i])
            fail_msg("%s draft, gamma %d: token %d is %d, greedy decoding gives %d", draft ? "model" : "lookup", gamma,
                     i - prompt, got[i], want[i]);
    SpecStats st = sd.stats;
    assert_int_equal(st.generated, NEW);
    speculative_free(&sd);
    sampler_free(&s);
    pair_close(&p);
    return st;
}

// The target of the greedy tests and a draft close to it (a perturbed copy: mostly right, so
// steps accept some drafts, then reject).
static void target_and_close_draft(Model *target, Model *close, const Config *c) {
    random_model(target, c, 31, 0.3f);
    perturbed_model(close, target, 33, 0.03f);
}

static SamplerParams greedy_params(void) {
    SamplerParams p = sampler_params_default();
    p.temperature = 0.0f;
    return p;
}

static const int GAMMAS[] = {1, 2, 4, 8, 15};
enum { N_GAMMAS = sizeof GAMMAS / sizeof GAMMAS[0] };

static void test_greedy_equals_plain_decoding(void **state) {
    (void)state;
    Config c = small_config(4, 2, 0, 0);
    Model target, stranger, close;
    target_and_close_draft(&target, &close, &c);
    random_model(&stranger, &c, 32, 0.3f); // a different random model: a draft that is mostly wrong
    SamplerParams greedy = greedy_params();
    for (int g = 0; g < N_GAMMAS; g++) {
        SpecStats self = check_greedy(&target, &target, GAMMAS[g], greedy, PROMPT);
        assert_int_equal(self.accepted, self.drafted); // the target as its own draft: all accepted
        SpecStats other = check_greedy(&target, &stranger, GAMMAS[g], greedy, PROMPT);
        assert_true(other.accepted < other.drafted); // the rejection path ran
        SpecStats near = check_greedy(&target, &close, GAMMAS[g], greedy, PROMPT);
        assert_true(near.accepted > 0 && near.accepted < near.drafted);
        SpecStats lookup = check_greedy(&target, NULL, GAMMAS[g], greedy, PROMPT);
        assert_true(lookup.drafted > 0);
        print_message("gamma %2d: accepted/drafted  self %ld/%ld  random %ld/%ld  perturbed %ld/%ld  lookup %ld/%ld\n",
                      GAMMAS[g], self.accepted, self.drafted, other.accepted, other.drafted, near.accepted,
                      near.drafted, lookup.accepted, lookup.drafted);
    }
    SamplerParams penalised = greedy;
    penalised.repetition_penalty = 1.5f;
    check_greedy(&target, &stranger, 4, penalised, PROMPT);
    check_greedy(&target, &close, 4, penalised, PROMPT);
    check_greedy(&target, NULL, 4, penalised, PROMPT);
    // a prompt of more than 16 rows goes through sgemm, which rounds unlike the verification's
    // rows: p_1 must come from the prompt's own logits, not from a recomputation
    check_greedy(&target, &close, 4, greedy, LONG_PROMPT);
    check_greedy(&target, NULL, 8, greedy, LONG_PROMPT);
    model_free(&target);
    model_free(&stranger);
    model_free(&close);
}

// The bookkeeping over SpecStats: acceptance = accepted / drafted, the judged acceptance =
// accepted / judged (one rejection at most per step), mean accepted length =
// generated / steps = 1 + accepted / steps, per-position counts that sum to the totals, and
// totals over two generations that add up; NAN before anything is drafted or stepped.
static void test_acceptance_bookkeeping(void **state) {
    (void)state;
    Config c = small_config(4, 2, 0, 0);
    Model target, close;
    target_and_close_draft(&target, &close, &c);
    SamplerParams greedy = greedy_params();
    SpecStats a = check_greedy(&target, &close, 4, greedy, PROMPT), b = check_greedy(&target, NULL, 2, greedy, PROMPT);
    assert_true(a.accepted > 0 && a.accepted < a.drafted);
    assert_float_equal(speculative_acceptance_rate(&a), (double)a.accepted / a.drafted, 1e-15);
    assert_float_equal(speculative_mean_accepted_len(&a), (double)NEW / a.steps, 1e-15);
    assert_float_equal(speculative_mean_accepted_len(&a), 1.0 + (double)a.accepted / a.steps, 1e-12);
    long drafted = 0, accepted = 0;
    for (int i = 0; i < SPEC_MAX_GAMMA; i++) drafted += a.drafted_at[i], accepted += a.accepted_at[i];
    assert_int_equal(drafted, a.drafted);
    assert_int_equal(accepted, a.accepted);
    // judged: every accepted draft and at most one rejected draft per step, at least one
    // rejection here (a.accepted < a.drafted); the drafts after a rejection are not judged
    assert_true(a.judged > a.accepted && a.judged <= a.accepted + a.steps && a.judged < a.drafted);
    assert_float_equal(speculative_judged_acceptance(&a), (double)a.accepted / a.judged, 1e-15);
    assert_true(speculative_judged_acceptance(&a) > speculative_acceptance_rate(&a));
    SpecStats same = check_greedy(&target, &target, 4, greedy, PROMPT); // a draft equal to the target
    assert_int_equal(same.judged, same.accepted);
    assert_int_equal(same.accepted, same.drafted);
    SpecStats sum = {0};
    speculative_stats_add(&sum, &a);
    speculative_stats_add(&sum, &b);
    assert_int_equal(sum.steps, a.steps + b.steps);
    assert_int_equal(sum.generated, 2 * NEW);
    assert_int_equal(sum.drafted_at[1], a.drafted_at[1] + b.drafted_at[1]);
    assert_int_equal(sum.target_calls, a.target_calls + b.target_calls);
    assert_int_equal(sum.judged, a.judged + b.judged);
    assert_float_equal(sum.draft_s, a.draft_s + b.draft_s, 1e-12);
    assert_float_equal(speculative_acceptance_rate(&sum), (double)(a.accepted + b.accepted) / (a.drafted + b.drafted),
                       1e-15);
    float logits[] = {0.5f, 2.0f, -1.0f, 1.25f};
    assert_float_equal(speculative_top2_margin(logits, 4), 0.75, 0.0);
    SpecStats none = {0};
    assert_true(isnan(speculative_acceptance_rate(&none)) && isnan(speculative_mean_accepted_len(&none)) &&
                isnan(speculative_judged_acceptance(&none)));
    model_free(&target);
    model_free(&close);
}

// A callback's stop ends the generation at that token, uncounted, with the sessions rolled
// back to hold no more than the tokens counted.
static void test_callback_stops_generation(void **state) {
    (void)state;
    Config c = small_config(4, 2, 0, 0);
    Model target, close;
    target_and_close_draft(&target, &close, &c);
    SamplerParams greedy = greedy_params();
    int want[PROMPT + NEW], got[PROMPT + NEW];
    random_tokens(want, PROMPT, c.vocab_size, 5);
    memcpy(got, want, sizeof want);
    plain_generate(&target, greedy, want, PROMPT, NEW);
    Pair p;
    pair_open(&p, &target, &close, CAPACITY);
    prefill_or_fail(&p.target, got, PROMPT);
    prefill_or_fail(&p.draft, got, PROMPT);
    Sampler s = sampler_or_fail(c.vocab_size, greedy);
    Speculative sd = speculative_or_fail(&p, &s, 8);
    Error err;
    StopAt stop = {.stop_at = 7, .seen = 0};
    assert_int_equal(speculative_generate(&sd, got, PROMPT, NEW, stop_at, &stop, &err), 6);
    assert_memory_equal(got, want, (PROMPT + 7) * sizeof(int)); // the stop token is written too
    assert_true(session_len(&p.target) <= PROMPT + 6 && session_len(&p.draft) <= PROMPT + 6);
    speculative_free(&sd);
    sampler_free(&s);
    pair_close(&p);
    model_free(&target);
    model_free(&close);
}

// --- sampling: chi-square against the exact marginals --------------------------------------

enum { TINY_V = 20, CHI_GAMMA = 3, CHI_POSITIONS = CHI_GAMMA + 1, CHI_RUNS = 10000, CHI_PROMPT = 6, TINY_LEN = 32 };
static const int CHECKED[] = {0, 1, CHI_GAMMA}; // the 1st, 2nd and (gamma + 1)-th token
enum { N_CHECKED = sizeof CHECKED / sizeof CHECKED[0] };

// A tiny model: V 20, so 10^4 runs fill every bin and paths can be enumerated.
static Config tiny_config(void) {
    Config c = config_default();
    c.dim = 16;
    c.hidden_dim = 32;
    c.n_layers = 1;
    c.n_heads = 2;
    c.n_kv_heads = 1;
    c.head_dim = 8;
    c.vocab_size = TINY_V;
    c.seq_len = TINY_LEN;
    return c;
}

// marginal[d][x] += weight * P(token d after the prompt is x), over every path of plain
// target sampling from tokens[0..n) (s holds them, with their logits) up to CHI_POSITIONS.
static void enumerate_marginals(Session *s, Sampler *smp, int *tokens, int n, int depth, double weight,
                                double marginal[CHI_POSITIONS][TINY_V]) {
    float probs[TINY_V];
    Error err;
    if (sampler_distribution(smp, s->logits, tokens, n, probs, &err) < 0) fail_msg("%s", err.msg);
    for (int x = 0; x < TINY_V; x++) marginal[depth][x] += weight * probs[x];
    if (depth + 1 == CHI_POSITIONS) return;
    for (int x = 0; x < TINY_V; x++) {
        if (probs[x] == 0.0f) continue;
        tokens[n] = x;
        if (session_decode(s, x, &err)) fail_msg("%s", err.msg);
        enumerate_marginals(s, smp, tokens, n + 1, depth + 1, weight * probs[x], marginal);
        session_truncate(s, n);
    }
}

typedef struct {
    double stat[N_CHECKED], critical[N_CHECKED];
    int impossible[N_CHECKED]; // draws of a token plain sampling never produces there
} ChiSquare;

static int chi_square_fits(const ChiSquare *r) {
    for (int c = 0; c < N_CHECKED; c++)
        if (r->impossible[c] || r->stat[c] > r->critical[c]) return 0;
    return 1;
}

// CHI_RUNS speculative generations of CHI_POSITIONS tokens with the acceptance rule `accept`,
// their checked positions tested against the target's exact marginals.
static ChiSquare chi_square_runs(const Model *target, const Model *draft, SamplerParams sp, SpecAcceptFn accept) {
    int tokens[TINY_LEN];
    random_tokens(tokens, CHI_PROMPT, TINY_V, 17);
    Pair p;
    pair_open(&p, target, draft, TINY_LEN);
    prefill_or_fail(&p.target, tokens, CHI_PROMPT);
    if (draft) prefill_or_fail(&p.draft, tokens, CHI_PROMPT);
    Sampler s = sampler_or_fail(TINY_V, sp);
    static double marginal[CHI_POSITIONS][TINY_V];
    memset(marginal, 0, sizeof marginal);
    enumerate_marginals(&p.target, &s, tokens, CHI_PROMPT, 0, 1.0, marginal);
    Speculative sd = speculative_or_fail(&p, &s, CHI_GAMMA);
    sd.accept = accept;
    static int counts[N_CHECKED][TINY_V];
    memset(counts, 0, sizeof counts);
    Error err;
    for (int run = 0; run < CHI_RUNS; run++) {
        pair_reset(&p, tokens, CHI_PROMPT);
        if (speculative_generate(&sd, tokens, CHI_PROMPT, CHI_POSITIONS, NULL, NULL, &err) != CHI_POSITIONS)
            fail_msg("speculative: %s", err.msg);
        for (int c = 0; c < N_CHECKED; c++) counts[c][tokens[CHI_PROMPT + CHECKED[c]]]++;
    }
    ChiSquare r;
    for (int c = 0; c < N_CHECKED; c++) {
        float expected[TINY_V];
        r.impossible[c] = 0;
        for (int x = 0; x < TINY_V; x++) {
            expected[x] = (float)marginal[CHECKED[c]][x];
            r.impossible[c] |= expected[x] == 0.0f && counts[c][x] > 0;
        }
        int df;
        r.stat[c] = chi_square(counts[c], expected, TINY_V, CHI_RUNS, &df);
        r.critical[c] = chi_square_critical_001(df);
        if (df < 1) fail_msg("only %d chi-square bins", df + 1);
    }
    print_message("  %s draft, T %g k %d p %g rep %g: acceptance %.3f; chi2 (critical) token 1 %.1f (%.1f), "
                  "2 %.1f (%.1f), %d %.1f (%.1f)%s\n",
                  draft ? "model" : "lookup", sp.temperature, sp.top_k, sp.top_p, sp.repetition_penalty,
                  (double)sd.stats.accepted / sd.stats.drafted, r.stat[0], r.critical[0], r.stat[1], r.critical[1],
                  CHI_GAMMA + 1, r.stat[2], r.critical[2],
                  r.impossible[0] | r.impossible[1] | r.impossible[2] ? ", impossible tokens drawn" : "");
    speculative_free(&sd);
    sampler_free(&s);
    pair_close(&p);
    return r;
}

// Wrong rules, each a classic bug, to show that chi_square_runs catches them.
typedef enum { ACCEPT_IF_P_GT_Q, FIRST_DRAFT_UNVERIFIED, RESIDUAL_IS_P, BONUS_FROM_LAST_DRAFT_ROW } Bug;
static const char *const BUG_NAMES[] = {"accept if p > q", "first draft unverified", "p instead of the residual",
                                        "bonus from the last draft's row"};
static Bug bug;

static int buggy_accept(Sampler *s, const float *p, const float *q, int *drafts, int g, float *residual, Error *err) {
    size_t V = (size_t)s->vocab_size;
    for (int i = 0; i < g; i++) {
        const float *pi = p + i * V, *qi = q + i * V;
        int d = drafts[i], accept;
        if (bug == ACCEPT_IF_P_GT_Q) accept = pi[d] > qi[d];
        else if (bug == FIRST_DRAFT_UNVERIFIED && i == 0) accept = 1;
        else accept = (double)rng_uniform(&s->rng) * qi[d] < pi[d];
        if (accept) continue;
        int any = 0;
        for (size_t x = 0; x < V; x++) {
            residual[x] = pi[x] > qi[x] ? pi[x] - qi[x] : 0.0f;
            any |= residual[x] > 0.0f;
        }
        int t = sampler_draw(s, bug == RESIDUAL_IS_P || !any ? pi : residual, (int)V, err);
        if (t < 0) return -1;
        drafts[i] = t;
        return i;
    }
    int bonus = sampler_draw(s, p + (bug == BONUS_FROM_LAST_DRAFT_ROW && g > 0 ? g - 1 : g) * V, (int)V, err);
    if (bonus < 0) return -1;
    drafts[g] = bonus;
    return g;
}

static void test_sampling_matches_target_distribution(void **state) {
    (void)state;
    Config c = tiny_config();
    Model target, draft;
    random_model(&target, &c, 41, 0.3f);
    perturbed_model(&draft, &target, 42, 0.05f); // acceptance about 0.5: every path runs often
    SamplerParams plain = sampler_params_default(), filtered = plain;
    filtered.temperature = 0.8f;
    filtered.top_k = 8;
    filtered.top_p = 0.9f;
    filtered.repetition_penalty = 1.3f;
    SamplerParams settings[] = {plain, filtered};
    for (int i = 0; i < 2; i++) {
        const Model *drafts[] = {&draft, NULL};
        for (int d = 0; d < 2; d++) {
            ChiSquare r = chi_square_runs(&target, drafts[d], settings[i], speculative_accept);
            if (!chi_square_fits(&r)) fail_msg("speculative sampling does not follow the target's distribution");
        }
    }
    for (Bug b = ACCEPT_IF_P_GT_Q; b <= BONUS_FROM_LAST_DRAFT_ROW; b++) {
        bug = b;
        print_message("wrong rule: %s\n", BUG_NAMES[b]);
        ChiSquare r = chi_square_runs(&target, &draft, plain, buggy_accept);
        if (chi_square_fits(&r)) fail_msg("the chi-square test does not catch the wrong rule '%s'", BUG_NAMES[b]);
    }
    model_free(&target);
    model_free(&draft);
}

// --- rollback: the caches are those of the accepted tokens alone ---------------------------

// s's first len positions, every layer's keys and values, equal a fresh prefill of tokens.
static void assert_cache_is_prefill(const Session *s, const Model *m, const int *tokens, const char *which) {
    int len = session_len(s), kvd = m->config.n_kv_heads * m->config.head_dim;
    Engine e;
    Session fresh;
    engine_open(&e, m, ops_cpu(), DTYPE_F32, ROWS, CAPACITY);
    session_open(&fresh, &e, CAPACITY);
    prefill_or_fail(&fresh, tokens, len);
    size_t bytes = (size_t)len * kvd * sizeof(float);
    for (int l = 0; l < m->config.n_layers; l++) {
        if (memcmp(kv_cache_layer_key(&s->cache, l), kv_cache_layer_key(&fresh.cache, l), bytes) ||
            memcmp(kv_cache_layer_value(&s->cache, l), kv_cache_layer_value(&fresh.cache, l), bytes))
            fail_msg("the %s's cache of %d positions differs from a prefill of them (layer %d)", which, len, l);
    }
    session_close(&fresh);
    engine_close(&e);
}

static void test_rollback_leaves_prefill_caches(void **state) {
    (void)state;
    Config c = small_config(4, 2, 0, 0);
    Model target, stranger;
    random_model(&target, &c, 61, 0.3f);
    random_model(&stranger, &c, 62, 0.3f);
    const Model *drafts[] = {&stranger, NULL};
    for (int d = 0; d < 2; d++) {
        int tokens[PROMPT + NEW];
        random_tokens(tokens, PROMPT, c.vocab_size, 7);
        Pair p;
        pair_open(&p, &target, drafts[d], CAPACITY);
        prefill_or_fail(&p.target, tokens, PROMPT);
        if (drafts[d]) prefill_or_fail(&p.draft, tokens, PROMPT);
        Sampler s = sampler_or_fail(c.vocab_size, sampler_params_default());
        Speculative sd = speculative_or_fail(&p, &s, 4);
        Error err;
        int rejections = 0;
        for (int n = PROMPT; n < PROMPT + NEW;) {
            SpecStep step;
            int got = speculative_step(&sd, tokens, n, PROMPT + NEW - n, &step, &err);
            if (got < 0) fail_msg("step: %s", err.msg);
            n += got;
            rejections += step.accepted < step.drafted;
            assert_int_equal(session_len(&p.target), n - 1);
            assert_cache_is_prefill(&p.target, &target, tokens, "target");
            if (drafts[d]) {
                assert_true(session_len(&p.draft) <= n);
                assert_cache_is_prefill(&p.draft, drafts[d], tokens, "draft");
            }
        }
        assert_true(rejections > 0);
        speculative_free(&sd);
        sampler_free(&s);
        pair_close(&p);
    }
    model_free(&target);
    model_free(&stranger);
}

// --- bad input --------------------------------------------------------------------------------

static void expect_error(int rc, const Error *err, const char *needle) {
    assert_int_equal(rc, -1);
    if (!strstr(err->msg, needle)) fail_msg("error '%s' does not mention '%s'", err->msg, needle);
}

static void test_bad_input_is_an_error(void **state) {
    (void)state;
    Config c = small_config(4, 2, 0, 0), other = c;
    other.vocab_size = 50;
    Model target, foreign;
    random_model(&target, &c, 71, 0.3f);
    random_model(&foreign, &other, 72, 0.3f);
    Sampler s = sampler_or_fail(c.vocab_size, sampler_params_default());
    Speculative sd;
    Error err;
    SpecParams sp = spec_params_default();

    Pair p;
    pair_open(&p, &target, &foreign, 16);
    sp.gamma = 4;
    expect_error(speculative_init(&sd, &p.target, &p.draft, &s, &sp, &err), &err, "vocabulary");
    pair_close(&p);

    pair_open(&p, &target, &target, 16);
    int bad_gammas[] = {0, -1, SPEC_MAX_GAMMA + 1};
    for (int i = 0; i < 3; i++) {
        sp.gamma = bad_gammas[i];
        expect_error(speculative_init(&sd, &p.target, &p.draft, &s, &sp, &err), &err, "gamma must be in [1, 15]");
    }
    sp = spec_params_default();
    sp.ngram_min = 0;
    expect_error(speculative_init(&sd, &p.target, NULL, &s, &sp, &err), &err, "ngram_min");
    // samplers whose distribution is not a function of the tokens cannot be verified exactly
    sp = spec_params_default();
    SamplerParams stateful[2] = {sampler_params_default(), sampler_params_default()};
    stateful[0].mirostat = 2;
    stateful[1].chain = SAMPLER_CHAIN_LLAMA, stateful[1].xtc_probability = 0.5f;
    for (int i = 0; i < 2; i++) {
        Sampler m = sampler_or_fail(c.vocab_size, stateful[i]);
        expect_error(speculative_init(&sd, &p.target, &p.draft, &m, &sp, &err), &err, "mirostat");
        sampler_free(&m);
    }

    // a context that does not fit: nothing is fed, and the boundary case itself fits
    sp = spec_params_default();
    int tokens[32];
    random_tokens(tokens, 10, c.vocab_size, 3);
    prefill_or_fail(&p.target, tokens, 10);
    prefill_or_fail(&p.draft, tokens, 10);
    if (speculative_init(&sd, &p.target, &p.draft, &s, &sp, &err)) fail_msg("%s", err.msg);
    expect_error(speculative_generate(&sd, tokens, 10, 8, NULL, NULL, &err), &err, "does not fit");
    assert_int_equal(session_len(&p.target), 10);
    assert_int_equal(session_len(&p.draft), 10);
    expect_error(speculative_generate(&sd, tokens, 9, 2, NULL, NULL, &err), &err, "not the 9 tokens");
    expect_error(speculative_step(&sd, tokens, 0, 1, NULL, &err), &err, "at least one token");
    assert_int_equal(speculative_generate(&sd, tokens, 10, 7, NULL, NULL, &err), 7); // 16 positions: fits
    speculative_free(&sd);
    pair_close(&p);

    // gamma + 1 rows must fit one forward of the target engine
    Engine small;
    Session t;
    engine_open(&small, &target, ops_cpu(), DTYPE_F32, 4, 16);
    session_open(&t, &small, 16);
    sp.gamma = 4;
    expect_error(speculative_init(&sd, &t, NULL, &s, &sp, &err), &err, "verification rows");
    session_close(&t);
    engine_close(&small);

    sampler_free(&s);
    model_free(&target);
    model_free(&foreign);
}

int main(void) {
    kernels_set_threads(1); // tiny matmuls: threads cost more than they give, and the results do not depend on them
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_greedy_equals_plain_decoding),
        cmocka_unit_test(test_callback_stops_generation),
        cmocka_unit_test(test_acceptance_bookkeeping),
        cmocka_unit_test(test_sampling_matches_target_distribution),
        cmocka_unit_test(test_rollback_leaves_prefill_caches),
        cmocka_unit_test(test_bad_input_is_an_error),
    };
    return cmocka_run_group_tests_name("speculative", tests, NULL, NULL);
}
