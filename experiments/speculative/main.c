// speculative/main.c: bin/speculative, project 10: how much a draft speeds up exact sampling
// from the target, and whether the cost model of spec_model.h explains it.
//
//   bin/speculative --model out/models/full/target.gguf
//       --drafts out/models/full/draft-xs.gguf,out/models/full/draft-s.gguf,out/models/full/draft-m.gguf
//       [--corpus FILE] [--seed S] [--out DIR] [--profile quick|full] [--threads N]
//
// Every draft checkpoint given (named by its file stem), then the model-free prompt-lookup
// draft ("lookup"), continues the same held-out prompts at every gamma and temperature of the
// sweep (full: gamma 1, 2, 3, 4, 6, 8 x T 0, 0.7, 1, 4 prompts of 64 tokens + 128 generated;
// quick: gamma 1, 2, 4, 8 x T 0, 1, 2 prompts of 32 + 48), and the target alone
// (session_generate: "plain") continues them beside every setting. Prompts: BOS and the
// validation text from a line start at n evenly spaced points
// (the corpus must be the models' training text: default $CORPUS, else the KJV), each prompt
// of the same length and continued for the same number of tokens (end tokens do not stop it);
// prompt b samples with seed S + b in every run. At T = 0 every speculative output must equal
// plain greedy decoding token for token: a divergence is reported (stderr and the
// matches_plain / divergence_margin columns) with the target's top-2 logit margin there.
//
// Timing: a run is one pass over every prompt; only generation is timed (not the prompt
// prefills of target and draft). Each setting runs once untimed (warm-up), then `reps` timed
// runs that must produce the same tokens, each beside a plain run (plain, speculative, plain,
// ...: a loaded machine's drift weighs on both); times are the median over runs with p10 /
// p90, and the counts and time shares are those of the median run (counts are equal in every run).
// The cost model's c and v(k) come from single forwards timed after prompt 0 (bench_run).
//
// Writes under --out (a row's keys first; every table but the findings starts with the backend, cpu):
//   speculative_runs.csv       temperature, draft, gamma -> counts, acceptance, measured and
//                              predicted speed-up, times. Definitions:
//     acceptance_rate     accepted / drafted: drafts accepted over drafts proposed (vLLM's
//                         "draft acceptance rate"; the drafts after a rejection count as not
//                         accepted although the target never judged them)
//     judged_acceptance   alpha = accepted / judged, judged = the accepted drafts plus each
//                         step's first rejected one: the acceptance probability of a draft the
//                         target looks at, which the independent-acceptance formula assumes
//     mean_accepted_len   tokens added per speculative step = generated / steps
//                         = 1 + accepted / steps (vLLM's "mean acceptance length"): each
//                         step is one target verification over its drafts and adds the
//                         accepted drafts plus one token of the target's own
//     drafts_per_step     drafted / steps (gamma, less at the end of a generation and for
//                         lookup steps that found no match)
//     predicted_accepted_len  (1 - alpha^(gamma+1)) / (1 - alpha) at the measured judged alpha
//     speedup             plain_ms_median / spec_ms_median, the same prompts and tokens count
//     spec_tok_s, plain_tok_s  generated tokens / median time
//     draft_time_share, target_time_share  drafting (draft catch-up and steps, q, draws,
//                         lookup) and verifying (the target's forward, p, the acceptance
//                         rule) over the whole generation time, of the median run
//     cost_c, verify_v    c of the draft and v(gamma + 1) from speculative_cost/verify.csv
//     predicted_speedup   E / (gamma c + v(gamma + 1)); predicted_speedup_v1: with v = 1
//     predicted_error     predicted_speedup / speedup - 1
//     distribution_ms     the sampler's distribution and draw of one row at T (median)
//     predicted_speedup_counted  the prediction with the costs the formula leaves out
//                         (spec_model.h): the run's own drafts and draft calls per step, the
//                         sampler's work on every distribution, measured verify times
//     predicted_error_counted  predicted_speedup_counted / speedup - 1
//   speculative_positions.csv  temperature, draft, gamma, position i -> steps that drafted
//                              position i, steps that accepted drafts 1..i, their ratio, and
//                              alpha^i at the judged alpha (what independent acceptance predicts)
//   speculative_alpha.csv      temperature, draft -> alpha pooled over every gamma
//   speculative_cost.csv       model -> median single-token decode time and c = its time /
//                              the target's (lookup: one n-gram search)
//   speculative_verify.csv     rows k = 1..max gamma + 1 -> time of a k-row target forward
//                              (every row's logits) and v(k) = time / the 1-row time
//   speculative_findings.csv   finding, temperature -> draft, gamma, value, verdict: the best
//                              speed-up (overall, per temperature, per draft), whether a
//                              smaller draft is always faster, whether the weakest lowers alpha
// Non-timing columns are bit-reproducible for the same seed and thread count; the timing
// ones are *_ms_*, *_tok_s, speedup, *_time_share, cost_c, verify_v, predicted_speedup*,
// predicted_error and the findings' speed-ups.
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"
#include "checkpoint.h"
#include "corpus.h"
#include "lab.h"
#include "session.h"
#include "spec_model.h"
#include "speculative.h"

#define COUNT(a) ((int)(sizeof(a) / sizeof((a)[0])))
#define MAX_DRAFTS 8            // checkpoints, then the lookup draft
#define BYTES_PER_TOKEN_BOUND 16 // text encoded per prompt: prompt_len * this many bytes

typedef struct {
    int n_prompts, prompt_len, gen_len; // prompts of prompt_len tokens (BOS first), gen_len more each
    const int *gammas;
    int n_gammas;
    const double *temperatures;
    int n_temperatures;
    int warmup, reps; // generation runs over every prompt: untimed, then timed
    int step_reps;    // timed single forwards of the cost model
} Sizes;

static const int FULL_GAMMAS[] = {1, 2, 3, 4, 6, 8};
static const double FULL_TEMPERATURES[] = {0, 0.7, 1.0};
static const int QUICK_GAMMAS[] = {1, 2, 4, 8};
static const double QUICK_TEMPERATURES[] = {0, 1.0};
static const Sizes FULL = {
    .n_prompts = 4, .prompt_len = 64, .gen_len = 128,
    .gammas = FULL_GAMMAS, .n_gammas = COUNT(FULL_GAMMAS),
    .temperatures = FULL_TEMPERATURES, .n_temperatures = COUNT(FULL_TEMPERATURES),
    .warmup = 1, .reps = 3,
    .step_reps = 200,
};
static const Sizes QUICK = {
    .n_prompts = 2, .prompt_len = 32, .gen_len = 48,
    .gammas = QUICK_GAMMAS, .n_gammas = COUNT(QUICK_GAMMAS),
    .temperatures = QUICK_TEMPERATURES, .n_temperatures = COUNT(QUICK_TEMPERATURES),
    .warmup = 1, .reps = 3,
    .step_reps = 30,
};

typedef struct {
    char name[64];   // the checkpoint's file stem, or "lookup"
    const char *path; // NULL for lookup
    Model model;
    Engine engine;
    Session session;
    double params;   // parameter count; 0 for lookup
    BenchStats step; // one draft step: a decode, or one lookup search
} Draft;

static int is_lookup(const Draft *d) { return d->path == NULL; }

typedef struct {
    const Sizes *sz;
    int max_gamma;
    Model model;   // the target
    Tokenizer tok;
    Corpus corpus;
    Engine engine;
    Session session;
    Draft drafts[MAX_DRAFTS];
    int n_drafts;
    int *prompts;  // (n_prompts, prompt_len)
    uint64_t seed;
    BenchStats target_step;
    BenchStats *verify;       // (max_gamma + 1): [k - 1] is a k-row forward
    BenchStats *distribution; // (n_temperatures): the sampler's distribution and draw of one row
} SpecRun;

// --- inputs -----------------------------------------------------------------------------------

static const char *model_path, *tokenizer_path, *corpus_path, *drafts_arg;
static uint64_t seed;

// Prompt i: BOS, then the validation text from the first line start at or after offset
// i * val_len / n, cut to prompt_len tokens.
static void choose_prompts(SpecRun *lab) {
    const Corpus *c = &lab->corpus;
    int n = lab->sz->n_prompts, P = lab->sz->prompt_len;
    size_t max_bytes = (size_t)P * BYTES_PER_TOKEN_BOUND;
    int *buf = mallocCheck(tokenizer_max_tokens(max_bytes) * sizeof(int));
    lab->prompts = mallocCheck((size_t)n * P * sizeof(int));
    for (int i = 0; i < n; i++) {
        size_t at = (size_t)i * c->val_len / n;
        while (at > 0 && at < c->val_len && c->val[at - 1] != '\n') at++;
        size_t bytes = c->val_len - at < max_bytes ? c->val_len - at : max_bytes;
        int got = (int)tokenizer_encode(&lab->tok, (const unsigned char *)c->val + at, bytes, false, false, buf);
        if (got < P - 1)
            die("speculative: the validation text of %s is too short for %d prompts of %d tokens", c->source, n, P);
        int *prompt = lab->prompts + (size_t)i * P;
        prompt[0] = lab->tok.bos_id;
        memcpy(prompt + 1, buf, (size_t)(P - 1) * sizeof(int));
    }
    free(buf);
}

static void check_fits(const char *path, const Config *c, const Sizes *sz) {
    if (sz->prompt_len + sz->gen_len > c->seq_len)
        die("speculative: %s: prompts of %d tokens + %d generated exceed its context of %d", path, sz->prompt_len,
            sz->gen_len, c->seq_len);
}

// --drafts A,B,C: the checkpoints in the order given, then the lookup draft.
static void parse_drafts(SpecRun *lab, char *list) {
    char *paths[MAX_DRAFTS - 1];
    Error err;
    int n = split_comma_list(list, paths, MAX_DRAFTS - 1, &err);
    if (n < 0) die("speculative: --drafts '%s': %s", drafts_arg, err.msg);
    for (int i = 0; i < n; i++) {
        Draft *d = &lab->drafts[lab->n_drafts++];
        d->path = paths[i];
        if (path_stem(d->name, sizeof d->name, paths[i], &err)) die("speculative: --drafts: %s", err.msg);
    }
    snprintf(lab->drafts[lab->n_drafts++].name, sizeof lab->drafts[0].name, "lookup");
    for (int i = 0; i < lab->n_drafts; i++)
        for (int j = 0; j < i; j++)
            if (strcmp(lab->drafts[i].name, lab->drafts[j].name) == 0)
                die("speculative: --drafts: two drafts are named '%s' (a draft is named by its file stem; "
                    "lookup is the model-free one)", lab->drafts[i].name);
}

// The target, its tokenizer, the corpus and the prompts, every draft checkpoint, and an
// engine and session each (room for the prompt in one pass and gamma + 1 verification rows).
static void load_inputs(SpecRun *lab) {
    Error err;
    if (checkpoint_load(model_path, tokenizer_path, &lab->model, &lab->tok, &err)) die("%s", err.msg);
    const Config *tc = &lab->model.config;
    if (lab->tok.vocab_size != tc->vocab_size)
        die("speculative: %s: the tokenizer has %d tokens but the model %d", model_path, lab->tok.vocab_size,
            tc->vocab_size);
    const char *corpus = corpus_path ? corpus_path : getenv("CORPUS");
    if (corpus_load(&lab->corpus, corpus && *corpus ? corpus : NULL, &err)) die("%s", err.msg);
    choose_prompts(lab);
    int positions = lab->sz->prompt_len + lab->sz->gen_len;
    int rows = lab->sz->prompt_len > lab->max_gamma + 1 ? lab->sz->prompt_len : lab->max_gamma + 1;
    check_fits(model_path, tc, lab->sz);
    engine_open(&lab->engine, &lab->model, ops_cpu(), DTYPE_F32, rows, positions);
    session_open(&lab->session, &lab->engine, positions);
    for (int i = 0; i < lab->n_drafts; i++) {
        Draft *d = &lab->drafts[i];
        if (is_lookup(d)) continue;
        if (checkpoint_load(d->path, NULL, &d->model, NULL, &err)) die("%s", err.msg);
        if (d->model.config.vocab_size != tc->vocab_size)
            die("speculative: draft %s has a vocabulary of %d tokens, the target %s one of %d", d->path,
                d->model.config.vocab_size, model_path, tc->vocab_size);
        check_fits(d->path, &d->model.config, lab->sz);
        d->params = (double)d->model.n_params;
        engine_open(&d->engine, &d->model, ops_cpu(), DTYPE_F32, rows, positions);
        session_open(&d->session, &d->engine, positions);
    }
}

static void free_inputs(SpecRun *lab) {
    for (int i = 0; i < lab->n_drafts; i++) {
        Draft *d = &lab->drafts[i];
        if (is_lookup(d)) continue;
        session_close(&d->session);
        engine_close(&d->engine);
        model_free(&d->model);
    }
    session_close(&lab->session);
    engine_close(&lab->engine);
    free(lab->prompts);
    free(lab->verify), free(lab->distribution);
    corpus_free(&lab->corpus);
    tokenizer_free(&lab->tok);
    model_free(&lab->model);
}

// --- the cost model: single forwards ----------------------------------------------------------

// Bring a session to "holds tokens[0..n) with its logits".
static void reset_session(Session *s, const int *tokens, int n) {
    Error err;
    session_truncate(s, 0);
    if (session_prefill(s, tokens, n, NULL, &err)) die("speculative: %s", err.msg);
}

// One forward after the prompt, rolled back after: `rows` tokens in one pass (a decode step
// for 1 row without all_logits; a verification with every row's logits), or a lookup search.
typedef struct {
    Session *session; // NULL: a lookup search over tokens[0..n)
    const int *tokens;
    int n, rows;
    float *all_logits;
} Forward;

static void forward_once(const Forward *f, int *scratch) {
    Error err;
    if (!f->session) {
        SpecParams sp = spec_params_default();
        memcpy(scratch, f->tokens, (size_t)f->n * sizeof(int)); // lookup_draft appends its proposal
        lookup_draft(scratch, f->n, 1, sp.ngram_min, sp.ngram_max);
        return;
    }
    if (session_prefill(f->session, f->tokens + f->n, f->rows, f->all_logits, &err)) die("speculative: %s", err.msg);
    session_truncate(f->session, f->n);
}

static Sampler make_sampler(const SpecRun *lab, double temperature, int prompt) {
    SamplerParams p = sampler_params_default();
    p.temperature = (float)temperature;
    p.seed = lab->seed + (uint64_t)prompt;
    Sampler s;
    Error err;
    if (sampler_init(&s, lab->model.config.vocab_size, &p, &err)) die("speculative: %s", err.msg);
    return s;
}

// The sampler's work on one distribution at each temperature of the sweep (what a step does
// for every draft's q and every verified row's p, and plain decoding once per token): the
// processed distribution of the target's logits after tokens[0..n) and a draw from it.
// ms: room for step_reps timings.
static void measure_distributions(SpecRun *lab, const int *tokens, int n, double *ms) {
    int V = lab->model.config.vocab_size, reps = lab->sz->step_reps;
    float *probs = mallocCheck((size_t)V * sizeof(float));
    reset_session(&lab->session, tokens, n);
    lab->distribution = mallocCheck((size_t)lab->sz->n_temperatures * sizeof(BenchStats));
    for (int t = 0; t < lab->sz->n_temperatures; t++) {
        Sampler s = make_sampler(lab, lab->sz->temperatures[t], 0);
        Error err;
        for (int rep = -3; rep < reps; rep++) {
            double t0 = now_seconds();
            if (sampler_distribution(&s, lab->session.logits, tokens, n, probs, &err) < 0 ||
                sampler_draw(&s, probs, V, &err) < 0)
                die("speculative: %s", err.msg);
            if (rep >= 0) ms[rep] = 1e3 * (now_seconds() - t0);
        }
        lab->distribution[t] = bench_stats(ms, reps);
        sampler_free(&s);
    }
    free(probs);
}

// Time every forward of the cost model: the target's decode step, each draft's step, and the
// target's verification of 1..max_gamma + 1 rows, after prompt 0. They are timed round-robin,
// one call of each per round after 3 untimed rounds, so that a burst of load on the machine
// falls on all of them alike rather than on whichever was being timed.
static void measure_costs(SpecRun *lab) {
    int P = lab->sz->prompt_len, V = lab->model.config.vocab_size, K = lab->max_gamma + 1, reps = lab->sz->step_reps;
    int n = 1 + lab->n_drafts + K;
    progress("speculative: timing single forwards of the target and each draft");
    // the prompt, then K tokens more (prompt 0's own: any real tokens do); room for a lookup's
    int *tokens = mallocCheck((size_t)(P + K) * sizeof(int)), *scratch = mallocCheck((size_t)(P + 1) * sizeof(int));
    memcpy(tokens, lab->prompts, (size_t)P * sizeof(int));
    for (int i = 0; i < K; i++) tokens[P + i] = lab->prompts[1 + i % (P - 1)];
    float *logits = mallocCheck((size_t)K * V * sizeof(float));
    Forward *f = mallocCheck((size_t)n * sizeof(Forward));
    f[0] = (Forward){&lab->session, tokens, P, 1, NULL};
    reset_session(&lab->session, tokens, P);
    for (int i = 0; i < lab->n_drafts; i++) {
        Draft *d = &lab->drafts[i];
        f[1 + i] = (Forward){is_lookup(d) ? NULL : &d->session, tokens, P, 1, NULL};
        if (!is_lookup(d)) reset_session(&d->session, tokens, P);
    }
    for (int k = 1; k <= K; k++) f[lab->n_drafts + k] = (Forward){&lab->session, tokens, P, k, logits};
    double *ms = mallocCheck((size_t)n * reps * sizeof(double)); // (n, reps)
    for (int rep = -3; rep < reps; rep++)
        for (int i = 0; i < n; i++) {
            double t0 = now_seconds();
            forward_once(&f[i], scratch);
            if (rep >= 0) ms[(size_t)i * reps + rep] = 1e3 * (now_seconds() - t0);
        }
    lab->target_step = bench_stats(ms, reps);
    for (int i = 0; i < lab->n_drafts; i++) lab->drafts[i].step = bench_stats(ms + (size_t)(1 + i) * reps, reps);
    lab->verify = mallocCheck((size_t)K * sizeof(BenchStats));
    for (int k = 1; k <= K; k++) lab->verify[k - 1] = bench_stats(ms + (size_t)(lab->n_drafts + k) * reps, reps);
    measure_distributions(lab, tokens, P, ms);
    free(ms), free(f), free(logits), free(scratch), free(tokens);
}

static double cost_c(const SpecRun *lab, const Draft *d) {
    return d->step.median_ms / lab->target_step.median_ms;
}

static double verify_v(const SpecRun *lab, int rows) {
    return lab->verify[rows - 1].median_ms / lab->verify[0].median_ms;
}

// --- generation runs --------------------------------------------------------------------------


// One run: every prompt continued for gen_len tokens, by the target alone (d NULL) or by
// speculative decoding with d at gamma. out (n_prompts, gen_len) gets the tokens, stats
// (speculative only) the counts and times summed over prompts. Returns the seconds spent
// generating.
static double generate_run(SpecRun *lab, Draft *d, int gamma, double temperature, int *out, SpecStats *stats) {
    int P = lab->sz->prompt_len, G = lab->sz->gen_len;
    int *seq = mallocCheck((size_t)(P + G) * sizeof(int));
    Session *draft = d && !is_lookup(d) ? &d->session : NULL;
    SpecParams sp = spec_params_default();
    sp.gamma = gamma;
    double seconds = 0.0;
    memset(stats, 0, sizeof *stats);
    Error err;
    for (int b = 0; b < lab->sz->n_prompts; b++) {
        memcpy(seq, lab->prompts + (size_t)b * P, (size_t)P * sizeof(int));
        reset_session(&lab->session, seq, P);
        if (draft) reset_session(draft, seq, P);
        Sampler s = make_sampler(lab, temperature, b);
        Speculative sd;
        if (d && speculative_init(&sd, &lab->session, draft, &s, &sp, &err)) die("speculative: %s", err.msg);
        double t0 = now_seconds();
        int got = d ? speculative_generate(&sd, seq, P, G, NULL, NULL, &err)
                    : session_generate(&lab->session, &s, seq, P, G, NULL, NULL, &err);
        seconds += now_seconds() - t0;
        if (got != G) die("speculative: %s, prompt %d: %s", d ? d->name : "plain decoding", b, err.msg);
        if (d) speculative_stats_add(stats, &sd.stats), speculative_free(&sd);
        memcpy(out + (size_t)b * G, seq + P, (size_t)G * sizeof(int));
        sampler_free(&s);
    }
    free(seq);
    return seconds;
}

// A setting measured: warm-up, then timed runs that must all give the same tokens.
typedef struct {
    BenchStats ms;   // generation time of a run over every prompt
    SpecStats stats; // of the run whose time is closest to the median (counts: of every run)
    int *tokens;     // (n_prompts, gen_len)
} Measured;

// The runs of one side of a comparison (plain decoding: d NULL) as they are made.
typedef struct {
    Draft *d;
    int gamma;
    double temperature;
    Measured m;
    int *again;       // a later run's tokens, checked against the first's
    double *ms;       // (reps)
    SpecStats *stats; // (reps)
    SpecStats first;
} Series;

static Series series_open(const SpecRun *lab, Draft *d, int gamma, double temperature) {
    size_t n_tokens = (size_t)lab->sz->n_prompts * lab->sz->gen_len;
    return (Series){d, gamma, temperature, {.tokens = mallocCheck(n_tokens * sizeof(int))},
                    mallocCheck(n_tokens * sizeof(int)), mallocCheck(lab->sz->reps * sizeof(double)),
                    mallocCheck(lab->sz->reps * sizeof(SpecStats)), {0}};
}

// Run `rep` (negative: a warm-up, -warmup the first of all).
static void series_run(Series *s, SpecRun *lab, int rep) {
    int is_first = rep == -lab->sz->warmup;
    SpecStats *st = rep < 0 ? &s->first : &s->stats[rep];
    double seconds = generate_run(lab, s->d, s->gamma, s->temperature, is_first ? s->m.tokens : s->again, st);
    size_t n_tokens = (size_t)lab->sz->n_prompts * lab->sz->gen_len;
    if (!is_first && (memcmp(s->m.tokens, s->again, n_tokens * sizeof(int)) != 0 || st->drafted != s->first.drafted ||
                      st->accepted != s->first.accepted))
        die("speculative: %s at gamma %d, T = %g: a repeated run gave other tokens", s->d ? s->d->name : "plain",
            s->gamma, s->temperature);
    if (is_first && rep >= 0) s->first = *st;
    if (rep >= 0) s->ms[rep] = 1e3 * seconds;
}

static int closest_to(const double *x, int n, double value) {
    int best = 0;
    for (int i = 1; i < n; i++)
        if (fabs(x[i] - value) < fabs(x[best] - value)) best = i;
    return best;
}

static Measured series_close(Series *s, const SpecRun *lab) {
    int reps = lab->sz->reps;
    s->m.ms = bench_stats(s->ms, reps);
    s->m.stats = s->stats[closest_to(s->ms, reps, s->m.ms.median_ms)];
    free(s->again), free(s->ms), free(s->stats);
    return s->m;
}

// The target's top-2 logit margin before generated token j of prompt b, as plain decoding
// computed it (the prompt in one prefill, then one decode step per token).
static double top2_margin(SpecRun *lab, int b, const int *plain, int j) {
    int P = lab->sz->prompt_len, V = lab->model.config.vocab_size;
    Error err;
    reset_session(&lab->session, lab->prompts + (size_t)b * P, P);
    for (int i = 0; i < j; i++)
        if (session_decode(&lab->session, plain[i], &err)) die("speculative: %s", err.msg);
    return speculative_top2_margin(lab->session.logits, V);
}

// T = 0: the margin at the first token where speculative output left plain greedy decoding
// (also reported on stderr), or NAN when every prompt's tokens agree.
static double greedy_divergence(SpecRun *lab, const Draft *d, int gamma, const int *plain, const int *spec) {
    int G = lab->sz->gen_len;
    for (int b = 0; b < lab->sz->n_prompts; b++) {
        const int *x = plain + (size_t)b * G, *y = spec + (size_t)b * G;
        for (int j = 0; j < G; j++) {
            if (x[j] == y[j]) continue;
            double margin = top2_margin(lab, b, x, j);
            fprintf(stderr, "speculative: WARNING: %s at gamma %d, T = 0, prompt %d: generated token %d is %d, "
                    "plain greedy decoding's %d (the target's top-2 logit margin there: %.3g)\n", d->name, gamma, b,
                    j, y[j], x[j], margin);
            return margin;
        }
    }
    return NAN;
}

// --- the sweep ---------------------------------------------------------------------------------

// One setting: speculative decoding and, run for run beside it, plain decoding of the same
// prompts, so that a change in the machine's speed weighs on both alike.
typedef struct {
    Measured m, plain;
    double divergence_margin; // NAN: same tokens as plain (or T > 0)
} Result;

typedef struct {
    Result *spec; // (n_temperatures, n_drafts, n_gammas)
} Sweep;

static Result *result_at(const SpecRun *lab, const Sweep *s, int t, int d, int g) {
    return &s->spec[((size_t)t * lab->n_drafts + d) * lab->sz->n_gammas + g];
}

static void measure_setting(SpecRun *lab, Draft *d, int gamma, double temperature, Result *r) {
    Series plain = series_open(lab, NULL, 0, temperature), spec = series_open(lab, d, gamma, temperature);
    for (int rep = -lab->sz->warmup; rep < lab->sz->reps; rep++) {
        series_run(&plain, lab, rep);
        series_run(&spec, lab, rep);
    }
    r->plain = series_close(&plain, lab);
    r->m = series_close(&spec, lab);
    r->divergence_margin = temperature == 0 ? greedy_divergence(lab, d, gamma, r->plain.tokens, r->m.tokens) : NAN;
}

static Sweep run_sweep(SpecRun *lab) {
    const Sizes *sz = lab->sz;
    int per_t = lab->n_drafts * sz->n_gammas, total = sz->n_temperatures * per_t;
    Sweep s = {mallocCheck((size_t)total * sizeof(Result))};
    for (int t = 0; t < sz->n_temperatures; t++)
        for (int d = 0; d < lab->n_drafts; d++)
            for (int g = 0; g < sz->n_gammas; g++) {
                progress_step(t * per_t + d * sz->n_gammas + g, total, "speculative: %s at gamma %d, T = %g",
                              lab->drafts[d].name, sz->gammas[g], sz->temperatures[t]);
                measure_setting(lab, &lab->drafts[d], sz->gammas[g], sz->temperatures[t], result_at(lab, &s, t, d, g));
            }
    return s;
}

static void sweep_free(const SpecRun *lab, Sweep *s) {
    for (int t = 0; t < lab->sz->n_temperatures; t++)
        for (int d = 0; d < lab->n_drafts; d++)
            for (int g = 0; g < lab->sz->n_gammas; g++) {
                Result *r = result_at(lab, s, t, d, g);
                free(r->m.tokens), free(r->plain.tokens);
            }
    free(s->spec);
}

// --- the tables --------------------------------------------------------------------------------

enum { TABLE_RUNS, TABLE_POSITIONS, TABLE_ALPHA, TABLE_COST, TABLE_VERIFY, TABLE_FINDINGS };
static const LabTable TABLES[] = {
    {"speculative_runs",
     "backend,temperature,draft,gamma,draft_params,prompts,gen_tokens,steps,drafted,accepted,acceptance_rate,"
     "judged_acceptance,mean_accepted_len,drafts_per_step,target_calls,draft_calls,predicted_accepted_len,matches_plain,"
     "divergence_margin,reps,spec_ms_median,spec_ms_p10,spec_ms_p90,plain_ms_median,plain_ms_p10,plain_ms_p90,"
     "spec_tok_s,plain_tok_s,speedup,draft_time_share,target_time_share,cost_c,verify_v,predicted_speedup,"
     "predicted_speedup_v1,predicted_error,distribution_ms,predicted_speedup_counted,predicted_error_counted",
     "temperature, draft, gamma -> acceptance, mean accepted length, measured and predicted speed-up", LAB_CPU},
    {"speculative_positions", "backend,temperature,draft,gamma,position,drafted,accepted,acceptance_rate,iid_rate",
     "temperature, draft, gamma, draft position -> how often drafts 1..i were all accepted", LAB_CPU},
    {"speculative_alpha", "backend,temperature,draft,draft_params,drafted,accepted,acceptance_rate",
     "temperature, draft -> acceptance rate pooled over every gamma", LAB_CPU},
    {"speculative_cost", "backend,model,params,step_ms_median,step_ms_p10,step_ms_p90,reps,cost_c",
     "model -> single-token step time and c = its time / the target's", LAB_CPU},
    {"speculative_verify", "backend,rows,time_ms_median,time_ms_p10,time_ms_p90,reps,verify_v",
     "rows k -> time of a k-row target forward and v(k) = its time / the 1-row time", LAB_CPU},
    {"speculative_findings", "finding,temperature,draft,gamma,value,verdict",
     "best speed-ups; is a smaller draft always faster; does the weakest draft lower alpha", LAB_CPU},
    {0},
};

static void write_runs(LabRun *r, const SpecRun *lab, const Sweep *s) {
    const Sizes *sz = lab->sz;
    int n_tokens = sz->n_prompts * sz->gen_len;
    double *verify_ms = mallocCheck((size_t)(lab->max_gamma + 1) * sizeof(double));
    for (int k = 0; k <= lab->max_gamma; k++) verify_ms[k] = lab->verify[k].median_ms;
    CsvWriter w = lab_csv(r, TABLE_RUNS);
    for (int t = 0; t < sz->n_temperatures; t++) {
        for (int d = 0; d < lab->n_drafts; d++)
            for (int g = 0; g < sz->n_gammas; g++) {
                const Draft *dr = &lab->drafts[d];
                const Result *res = result_at(lab, s, t, d, g);
                const Measured *plain = &res->plain;
                const SpecStats *st = &res->m.stats;
                int gamma = sz->gammas[g];
                double T = sz->temperatures[t], alpha = speculative_judged_acceptance(st);
                double spec_ms = res->m.ms.median_ms, total_s = 1e-3 * spec_ms, speedup = plain->ms.median_ms / spec_ms;
                double c = cost_c(lab, dr), v = verify_v(lab, gamma + 1);
                double predicted = spec_predicted_speedup(alpha, gamma, c, v);
                SpecCosts costs = {dr->step.median_ms, lab->distribution[t].median_ms, verify_ms, lab->max_gamma + 1};
                double counted = spec_predicted_speedup_counted(alpha, &costs, (double)st->drafted / st->steps,
                                                                (double)st->draft_calls / st->steps);
                double matches = T == 0 ? (double)isnan(res->divergence_margin) : NAN;
                csv_row(&w,
                        "cpu,%.6g,%s,%d,%.6g,%d,%d,%ld,%ld,%ld,%.6g,%.6g,%.6g,%.6g,%ld,%ld,%.6g,%.6g,%.6g,%d,"
                        "%.6g,%.6g,%.6g,%.6g,%.6g,%.6g,%.6g,%.6g,%.6g,%.6g,%.6g,%.6g,%.6g,%.6g,%.6g,%.6g,%.6g,%.6g,%.6g",
                        T, dr->name, gamma, dr->params, sz->n_prompts, n_tokens, st->steps, st->drafted, st->accepted,
                        speculative_acceptance_rate(st), alpha, speculative_mean_accepted_len(st), (double)st->drafted / st->steps, st->target_calls,
                        st->draft_calls, spec_expected_tokens(alpha, gamma), matches, res->divergence_margin, sz->reps,
                        spec_ms, res->m.ms.p10_ms, res->m.ms.p90_ms, plain->ms.median_ms, plain->ms.p10_ms,
                        plain->ms.p90_ms, n_tokens / total_s, n_tokens / (1e-3 * plain->ms.median_ms), speedup,
                        st->draft_s / total_s, st->target_s / total_s, c, v, predicted,
                        spec_predicted_speedup(alpha, gamma, c, 1.0), predicted / speedup - 1,
                        lab->distribution[t].median_ms, counted, counted / speedup - 1);
            }
    }
    csv_close(&w);
    free(verify_ms);
}

static void write_positions(LabRun *r, const SpecRun *lab, const Sweep *s) {
    const Sizes *sz = lab->sz;
    CsvWriter w = lab_csv(r, TABLE_POSITIONS);
    for (int t = 0; t < sz->n_temperatures; t++)
        for (int d = 0; d < lab->n_drafts; d++)
            for (int g = 0; g < sz->n_gammas; g++) {
                const SpecStats *st = &result_at(lab, s, t, d, g)->m.stats;
                double alpha = speculative_judged_acceptance(st);
                for (int i = 0; i < sz->gammas[g]; i++) {
                    long drafted = st->drafted_at[i], accepted = st->accepted_at[i];
                    csv_row(&w, "cpu,%.6g,%s,%d,%d,%ld,%ld,%.6g,%.6g", sz->temperatures[t], lab->drafts[d].name,
                            sz->gammas[g], i + 1, drafted, accepted, drafted > 0 ? (double)accepted / drafted : NAN,
                            pow(alpha, i + 1));
                }
            }
    csv_close(&w);
}

// Alpha of draft d at temperature t over every gamma: accepted / drafted summed.
static double pooled_alpha(const SpecRun *lab, const Sweep *s, int t, int d, long *drafted, long *accepted) {
    *drafted = *accepted = 0;
    for (int g = 0; g < lab->sz->n_gammas; g++) {
        const SpecStats *st = &result_at(lab, s, t, d, g)->m.stats;
        *drafted += st->drafted;
        *accepted += st->accepted;
    }
    return *drafted > 0 ? (double)*accepted / *drafted : NAN;
}

static void write_alpha(LabRun *r, const SpecRun *lab, const Sweep *s) {
    CsvWriter w = lab_csv(r, TABLE_ALPHA);
    for (int t = 0; t < lab->sz->n_temperatures; t++)
        for (int d = 0; d < lab->n_drafts; d++) {
            long drafted, accepted;
            double alpha = pooled_alpha(lab, s, t, d, &drafted, &accepted);
            csv_row(&w, "cpu,%.6g,%s,%.6g,%ld,%ld,%.6g", lab->sz->temperatures[t], lab->drafts[d].name,
                    lab->drafts[d].params, drafted, accepted, alpha);
        }
    csv_close(&w);
}

static void write_costs(LabRun *r, const SpecRun *lab) {
    CsvWriter w = lab_csv(r, TABLE_COST);
    const BenchStats *b = &lab->target_step;
    csv_row(&w, "cpu,target,%.6g,%.6g,%.6g,%.6g,%d,1", (double)lab->model.n_params, b->median_ms, b->p10_ms,
            b->p90_ms, b->reps);
    for (int i = 0; i < lab->n_drafts; i++) {
        const Draft *d = &lab->drafts[i];
        csv_row(&w, "cpu,%s,%.6g,%.6g,%.6g,%.6g,%d,%.6g", d->name, d->params, d->step.median_ms, d->step.p10_ms,
                d->step.p90_ms, d->step.reps, cost_c(lab, d));
    }
    csv_close(&w);
    w = lab_csv(r, TABLE_VERIFY);
    for (int k = 1; k <= lab->max_gamma + 1; k++) {
        b = &lab->verify[k - 1];
        csv_row(&w, "cpu,%d,%.6g,%.6g,%.6g,%d,%.6g", k, b->median_ms, b->p10_ms, b->p90_ms, b->reps, verify_v(lab, k));
    }
    csv_close(&w);
}

// The best gamma of draft d at temperature t (highest measured speed-up); its speed-up in *best.
static int best_gamma(const SpecRun *lab, const Sweep *s, int t, int d, double *best) {
    int arg = 0;
    *best = -INFINITY;
    for (int g = 0; g < lab->sz->n_gammas; g++) {
        const Result *r = result_at(lab, s, t, d, g);
        double x = r->plain.ms.median_ms / r->m.ms.median_ms;
        if (x > *best) *best = x, arg = g;
    }
    return arg;
}

static void finding_row(CsvWriter *w, const SpecRun *lab, const char *finding, int t, int d, int g, double value,
                        const char *verdict) {
    char gamma[16] = "nan";
    if (g >= 0) snprintf(gamma, sizeof gamma, "%d", lab->sz->gammas[g]);
    csv_row(w, "%s,%.6g,%s,%s,%.6g,%s", finding, lab->sz->temperatures[t], lab->drafts[d].name, gamma, value, verdict);
}

// Per temperature: the best setting, each draft's best, and the two questions over the model
// drafts (by parameter count); then the best setting of all.
static void write_findings(LabRun *r, const SpecRun *lab, const Sweep *s) {
    int n_models = lab->n_drafts - 1; // the lookup draft is last
    double sizes[MAX_DRAFTS], best[MAX_DRAFTS], alpha[MAX_DRAFTS], overall = -INFINITY;
    int arg[MAX_DRAFTS], overall_t = 0, overall_d = 0;
    CsvWriter w = lab_csv(r, TABLE_FINDINGS);
    for (int t = 0; t < lab->sz->n_temperatures; t++) {
        int top = 0, fastest_model = 0, smallest = 0;
        for (int d = 0; d < lab->n_drafts; d++) {
            long drafted, accepted;
            sizes[d] = lab->drafts[d].params;
            arg[d] = best_gamma(lab, s, t, d, &best[d]);
            alpha[d] = pooled_alpha(lab, s, t, d, &drafted, &accepted);
            if (best[d] > best[top]) top = d;
            if (d < n_models && best[d] > best[fastest_model]) fastest_model = d;
            if (d < n_models && sizes[d] < sizes[smallest]) smallest = d;
        }
        finding_row(&w, lab, "best_at_temperature", t, top, arg[top], best[top], "");
        for (int d = 0; d < lab->n_drafts; d++) finding_row(&w, lab, "draft_best", t, d, arg[d], best[d], "");
        if (n_models >= 2) {
            finding_row(&w, lab, "smaller_is_faster", t, fastest_model, arg[fastest_model], best[fastest_model],
                        spec_smaller_is_higher(sizes, best, n_models) ? "Yes" : "No");
            finding_row(&w, lab, "weakest_lowers_alpha", t, smallest, -1, alpha[smallest],
                        spec_smallest_is_lowest(sizes, alpha, n_models) ? "Yes" : "No");
        }
        if (best[top] > overall) overall = best[top], overall_t = t, overall_d = top;
    }
    double again;
    finding_row(&w, lab, "best_overall", overall_t, overall_d, best_gamma(lab, s, overall_t, overall_d, &again),
                overall, "");
    csv_close(&w);
}

// --- main -----------------------------------------------------------------------------------

static const LabOption OPTIONS[] = {
    LAB_CHECKPOINT_OPTIONS(model_path, tokenizer_path),
    {.name = "drafts", .kind = LAB_TEXT, .value = &drafts_arg, .arg = "A,B,...",
     .help = "draft checkpoints sharing the target's vocabulary, small to large, each named by its\n"
             "file stem (default: none; the model-free lookup draft always runs)"},
    {.name = "corpus", .kind = LAB_TEXT, .value = &corpus_path, .arg = "FILE",
     .help = "the text the models were trained on (default: $CORPUS, else the KJV)"},
    {.name = "seed", .kind = LAB_U64, .value = &seed, .arg = "S",
     .help = "sampler seed of prompt 0 (prompt b uses S + b)", .def = "42"},
    {0},
};

static int run(LabRun *r) {
    SpecRun lab = {.sz = r->quick ? &QUICK : &FULL, .seed = seed};
    for (int g = 0; g < lab.sz->n_gammas; g++)
        lab.max_gamma = lab.sz->gammas[g] > lab.max_gamma ? lab.sz->gammas[g] : lab.max_gamma;
    char *drafts = drafts_arg ? strdup(drafts_arg) : NULL;
    parse_drafts(&lab, drafts);
    load_inputs(&lab);
    measure_costs(&lab);
    Sweep sweep = run_sweep(&lab);

    // every measurement done: the tables appear together, speculative_runs.csv (the
    // pipeline's target) last
    write_positions(r, &lab, &sweep);
    write_alpha(r, &lab, &sweep);
    write_costs(r, &lab);
    write_findings(r, &lab, &sweep);
    write_runs(r, &lab, &sweep);

    char sum_hex[17], key[96];
    Error err;
    if (meta_file_checksum(model_path, sum_hex, &err)) die("%s", err.msg);
    lab_meta(r, "speculative_model", "%s", model_path);
    lab_meta(r, "speculative_model_fnv1a64", "%s", sum_hex);
    for (int i = 0; i < lab.n_drafts; i++) {
        const Draft *d = &lab.drafts[i];
        if (is_lookup(d)) continue;
        if (meta_file_checksum(d->path, sum_hex, &err)) die("%s", err.msg);
        snprintf(key, sizeof key, "speculative_%s_fnv1a64", d->name);
        for (char *k = key; *k; k++)
            if (!((*k >= 'a' && *k <= 'z') || (*k >= '0' && *k <= '9'))) *k = '_';
        lab_meta(r, key, "%s", sum_hex);
    }
    lab_meta(r, "speculative_corpus", "%s", lab.corpus.source);
    lab_meta(r, "speculative_seed", "%llu", (unsigned long long)seed);
    lab_meta(r, "speculative_prompts", "%d", lab.sz->n_prompts);
    lab_meta(r, "speculative_prompt_len", "%d", lab.sz->prompt_len);
    lab_meta(r, "speculative_gen_len", "%d", lab.sz->gen_len);

    sweep_free(&lab, &sweep);
    free_inputs(&lab);
    free(drafts);
    return 0;
}

static const Experiment SPECULATIVE = {
    "speculative", "--model FILE [--drafts A,B,...] [options]",
    "Speculative decoding: each draft (and the model-free prompt lookup) at every gamma and temperature\n"
    "of the sweep against plain decoding of the same prompts by the target: acceptance, mean accepted\n"
    "length, speed-up, and the cost model's prediction from measured step and verification times.",
    OPTIONS, TABLES, LAB_COMMON, NULL, run};

int main(int argc, char **argv) { return lab_main(&SPECULATIVE, argc, argv); }
