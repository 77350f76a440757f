// speculative.h: speculative decoding (Leviathan et al. 2023; Chen et al. 2023): a cheap
// draft proposes gamma tokens, the target checks them all in one forward pass of gamma + 1
// rows, and a rejection rule keeps the output distributed exactly as the target's own
// sampling (greedy: exactly the target's greedy sequence). Tests: make
// build/tests/test_speculative && ./build/tests/test_speculative
//
//   Session target, draft;                      // sessions of a target and a draft engine
//   session_prefill(&target, prompt, n, NULL, &err); session_prefill(&draft, prompt, n, NULL, &err);
//   Speculative sd;
//   SpecParams sp = spec_params_default(); sp.gamma = 4;
//   if (speculative_init(&sd, &target, &draft, &sampler, &sp, &err)) die("%s", err.msg);
//   int got = speculative_generate(&sd, tokens, n, 64, on_token, ctx, &err); // as session_generate
//   printf("acceptance %.2f\n", (double)sd.stats.accepted / sd.stats.drafted);
//   speculative_free(&sd);
//
// Pass draft = NULL for the model-free draft, prompt lookup (llama.cpp's `lookup`, vLLM's
// `ngram`): it proposes the continuation of the latest earlier occurrence of the context's
// last m tokens, m from ngram_max down to ngram_min.
//
// One step, at a sequence of n committed tokens t_1..t_n:
//   1. draft:   d_i ~ q_i for i = 1..g (g = gamma, fewer at the end of a generation or when
//               the lookup finds no match), q_i the draft model's distribution after t, d_<i
//               processed by the same sampler as the target's (penalties, temperature,
//               top-k/top-p/min-p); for the lookup draft q_i is one-hot at its proposal.
//   2. verify:  one session_prefill of the target over [t_n, d_1..d_g] (t_n is the one
//               committed token the target has not yet fed): row i is the target's logits
//               after t, d_1..d_i, processed into p_{i+1} with the penalty history t, d_1..d_i,
//               exactly as plain sampling would condition the token at that position.
//   3. accept:  speculative_accept below; k drafts accepted, then one more token.
//   4. rollback: both sessions truncated to what agrees with the k + 1 new tokens; the
//               target keeps t, d_1..d_k fed (the new last token is fed by the next step),
//               the draft catches up on what it lacks at the next step's start.
// Verification rows round bit for bit as single-row decode steps (kernels.c, for up to 16
// rows: hence gamma <= 15), so greedy speculative output equals greedy decoding exactly.
//
// Errors (gamma out of range, a draft of another vocabulary, a context that does not fit,
// sessions that do not hold the sequence) return -1 with err set, before anything is fed. A
// failure inside a step (a sampler error: NaN logits) also returns -1, the sessions then in
// no promised state.
#pragma once

#include "sampler.h"
#include "session.h"

enum { SPEC_MAX_GAMMA = 15 }; // gamma + 1 verification rows <= kernels.c's exact-rows bound

typedef struct {
    int gamma;     // tokens drafted per step, 1..SPEC_MAX_GAMMA
    int ngram_min; // lookup draft: shortest context suffix matched, >= 1
    int ngram_max; // lookup draft: longest context suffix matched, >= ngram_min
} SpecParams;

// gamma 4, n-grams 1..3.
SpecParams spec_params_default(void);

// One step's numbers.
typedef struct {
    int drafted;     // tokens proposed (g)
    int accepted;    // of them accepted (k); the step added k + 1 tokens
    double draft_s;  // wall time drafting: draft catch-up and decode steps, q, draws, lookup
    double target_s; // wall time verifying: the target's prefill, p, the acceptance rule
} SpecStep;

// Totals since speculative_init (or since the caller zeroed them).
typedef struct {
    long steps, generated;        // steps taken, tokens they added
    long drafted, accepted;       // acceptance rate = accepted / drafted
    long judged;                  // drafts the target judged: the accepted ones and each step's
                                  // first rejected one (the drafts after it are never looked at)
    long drafted_at[SPEC_MAX_GAMMA];  // [i]: steps that drafted a token at position i + 1
    long accepted_at[SPEC_MAX_GAMMA]; // [i]: steps that accepted it (per-position acceptance)
    long target_calls, draft_calls;   // forward passes of each model
    double draft_s, target_s;         // wall time, as in SpecStep
} SpecStats;

// The acceptance rate alpha = accepted / drafted, over the drafted tokens (a lookup step that
// found no match drafts none); NAN when nothing was drafted.
double speculative_acceptance_rate(const SpecStats *st);
// The mean accepted length per target call (vLLM's "mean acceptance length"): tokens added
// per step = generated / steps = 1 + accepted / steps, each step being one verification by
// the target and adding its accepted drafts and one token of the target's; NAN before a step.
double speculative_mean_accepted_len(const SpecStats *st);
// accepted / judged: the probability that a draft the target looks at is accepted, the alpha
// of the cost model's independent-acceptance formula (speculative_acceptance_rate counts the
// drafts discarded after a rejection as not accepted, and so understates it); NAN before any.
double speculative_judged_acceptance(const SpecStats *st);
// Add b's counts and times to a (totals over several generations).
void speculative_stats_add(SpecStats *a, const SpecStats *b);
// The gap between the largest and the second largest of V logits: how near a greedy choice
// was to a tie, reported where speculative and plain greedy output part.
double speculative_top2_margin(const float *logits, int V);

// The acceptance rule of one step, on distributions already processed by the sampler.
// p: (g + 1, V), row i = p_{i+1}, the target's distribution after i drafts; q: (g, V),
// row i = the distribution drafts[i] was drawn from. Accepts drafts[i] with probability
// min(1, p(d)/q(d)) (u * q < p, u uniform from the sampler's RNG); at the first rejection
// draws from norm(max(0, p - q)) of that row and stops; if all g are accepted, draws a
// bonus token from p_{g+1}. drafts has room for g + 1: on return drafts[0..k) are the
// accepted drafts and drafts[k] the new token. residual: (V) scratch. Returns k, or -1.
int speculative_accept(Sampler *s, const float *p, const float *q, int *drafts, int g, float *residual, Error *err);
typedef int (*SpecAcceptFn)(Sampler *s, const float *p, const float *q, int *drafts, int g, float *residual,
                            Error *err);

// The lookup draft's proposal: after a match of the last m tokens of tokens[0..n) at the
// latest earlier position, tokens[n..n+g) become what followed it, the copy running on into
// the proposal itself where the match is close to the end (so "a b a b" proposes "a b ...").
// tokens has room for n + g. Returns g, or 0 if no suffix of ngram_min..ngram_max matched.
int lookup_draft(int *tokens, int n, int g, int ngram_min, int ngram_max);

typedef struct {
    Session *target;
    Session *draft;      // the draft model's session, or NULL: the lookup draft
    Sampler *sampler;    // the target's settings, used for p and q alike; its RNG draws everything
    SpecParams params;
    SpecAcceptFn accept; // speculative_accept; tests swap in wrong rules to show they are caught
    SpecStats stats;
    int vocab_size;      // V
    float *logits;       // (gamma + 1, V) the verification's target logits
    float *p;            // (gamma + 1, V) the target's processed distributions
    float *q;            // (gamma, V) the draft's processed distributions
    float *residual;     // (V)
} Speculative;

// Checks the parameters (gamma, n-grams), that the draft shares the target's vocabulary and
// that the target engine verifies gamma + 1 rows in one pass; allocates the scratch.
int speculative_init(Speculative *sd, Session *target, Session *draft, Sampler *sampler, const SpecParams *params,
                     Error *err);
void speculative_free(Speculative *sd);

// One step after tokens[0..n_tokens), adding 1..min(gamma + 1, max_new) tokens to tokens
// (room for n_tokens + max_new; what lies past the added tokens is scratch). The target
// session must hold tokens[0..n_tokens) with its logits (as after session_prefill) or all
// but the last (as after a step); the draft session a prefix of them, or all with their
// logits. step (may be NULL) gets the step's numbers; stats adds them. Returns the number
// added, or -1.
int speculative_step(Speculative *sd, int *tokens, int n_tokens, int max_new, SpecStep *step, Error *err);

// Generate n_new tokens after tokens[0..n_tokens) by steps, as session_generate does: both
// sessions must hold tokens[0..n_tokens) with their logits; each token is appended to tokens
// (room for n_tokens + n_new) and passed to on_token, whose non-zero return stops there,
// that token not counted. Returns the number generated, or -1. On return the sessions hold
// prefixes of the generated sequence (the target all of it but at most the last token).
int speculative_generate(Speculative *sd, int *tokens, int n_tokens, int n_new, SessionTokenFn on_token, void *ctx,
                         Error *err);
