// speculative.c: speculative decoding over a target session and a draft (see speculative.h).
#include "speculative.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"
#include "rng.h"

SpecParams spec_params_default(void) { return (SpecParams){.gamma = 4, .ngram_min = 1, .ngram_max = 3}; }

int speculative_init(Speculative *sd, Session *target, Session *draft, Sampler *sampler, const SpecParams *params,
                     Error *err) {
    memset(sd, 0, sizeof *sd);
    const SpecParams *p = params;
    if (p->gamma < 1 || p->gamma > SPEC_MAX_GAMMA)
        return error_set(err, "speculative: gamma must be in [1, %d] (gamma + 1 verification rows), got %d",
                         SPEC_MAX_GAMMA, p->gamma);
    if (p->ngram_min < 1 || p->ngram_max < p->ngram_min)
        return error_set(err, "speculative: lookup n-grams need 1 <= ngram_min <= ngram_max, got %d..%d", p->ngram_min,
                         p->ngram_max);
    int V = target->engine->config.vocab_size;
    if (sampler->vocab_size != V)
        return error_set(err, "speculative: the sampler's vocabulary (%d) is not the target's (%d)",
                         sampler->vocab_size, V);
    if (!sampler_is_stateless(sampler))
        return error_set(err, "speculative: exact verification needs the target's distribution to follow from the "
                              "tokens alone; mirostat (its mu moves with each draw) and XTC (a coin per step) do not");
    if (draft && draft->engine->config.vocab_size != V)
        return error_set(err, "speculative: the draft's vocabulary (%d) is not the target's (%d)",
                         draft->engine->config.vocab_size, V);
    if (target->engine->s.max_rows < p->gamma + 1)
        return error_set(err, "speculative: gamma %d needs %d verification rows in one pass; the target engine has %d",
                         p->gamma, p->gamma + 1, target->engine->s.max_rows);
    sd->target = target;
    sd->draft = draft;
    sd->sampler = sampler;
    sd->params = *p;
    sd->accept = speculative_accept;
    sd->vocab_size = V;
    sd->logits = mallocCheck((size_t)(p->gamma + 1) * V * sizeof(float));
    sd->p = mallocCheck((size_t)(p->gamma + 1) * V * sizeof(float));
    sd->q = mallocCheck((size_t)p->gamma * V * sizeof(float));
    sd->residual = mallocCheck((size_t)V * sizeof(float));
    return 0;
}

void speculative_free(Speculative *sd) {
    free(sd->logits);
    free(sd->p);
    free(sd->q);
    free(sd->residual);
    memset(sd, 0, sizeof *sd);
}

double speculative_acceptance_rate(const SpecStats *st) {
    return st->drafted > 0 ? (double)st->accepted / (double)st->drafted : NAN;
}

double speculative_judged_acceptance(const SpecStats *st) {
    return st->judged > 0 ? (double)st->accepted / (double)st->judged : NAN;
}

double speculative_mean_accepted_len(const SpecStats *st) {
    return st->steps > 0 ? (double)st->generated / (double)st->steps : NAN;
}

void speculative_stats_add(SpecStats *a, const SpecStats *b) {
    a->steps += b->steps;
    a->generated += b->generated;
    a->drafted += b->drafted;
    a->accepted += b->accepted;
    a->judged += b->judged;
    for (int i = 0; i < SPEC_MAX_GAMMA; i++) {
        a->drafted_at[i] += b->drafted_at[i];
        a->accepted_at[i] += b->accepted_at[i];
    }
    a->target_calls += b->target_calls;
    a->draft_calls += b->draft_calls;
    a->draft_s += b->draft_s;
    a->target_s += b->target_s;
}

double speculative_top2_margin(const float *logits, int V) {
    float first = -INFINITY, second = -INFINITY;
    for (int i = 0; i < V; i++) {
        if (logits[i] > first) second = first, first = logits[i];
        else if (logits[i] > second) second = logits[i];
    }
    return (double)first - (double)second;
}

// --- the acceptance rule ----------------------------------------------------------------------

// A draw from norm(max(0, p - q)), the part of p that q under-proposed.
static int draw_residual(Sampler *s, const float *p, const float *q, float *residual, Error *err) {
    int V = s->vocab_size, any = 0;
    for (int i = 0; i < V; i++) {
        residual[i] = p[i] > q[i] ? p[i] - q[i] : 0.0f;
        any |= residual[i] > 0.0f;
    }
    // An empty residual means p = q up to rounding: a rejection then has probability zero
    // and only rounding produced it, so any choice keeps the output exact; p is the natural one.
    return sampler_draw(s, any ? residual : p, V, err);
}

int speculative_accept(Sampler *s, const float *p, const float *q, int *drafts, int g, float *residual, Error *err) {
    size_t V = (size_t)s->vocab_size;
    for (int i = 0; i < g; i++) {
        int d = drafts[i];
        // u * q < p accepts with probability min(1, p/q). The product of two floats is exact
        // in double, so u < 1 makes a ratio >= 1 always accept (greedy: p(d) = q(d) = 1).
        if ((double)rng_uniform(&s->rng) * q[i * V + d] < (double)p[i * V + d]) continue;
        int t = draw_residual(s, p + i * V, q + i * V, residual, err);
        if (t < 0) return -1;
        drafts[i] = t;
        return i;
    }
    int bonus = sampler_draw(s, p + g * V, (int)V, err);
    if (bonus < 0) return -1;
    drafts[g] = bonus;
    return g;
}

// --- drafts ---------------------------------------------------------------------------------

int lookup_draft(int *tokens, int n, int g, int ngram_min, int ngram_max) {
    for (int m = ngram_max < n - 1 ? ngram_max : n - 1; m >= ngram_min; m--) {
        const int *suffix = tokens + n - m;
        for (int j = n - m - 1; j >= 0; j--) {
            if (memcmp(tokens + j, suffix, (size_t)m * sizeof(int)) != 0) continue;
            // j + m + i < n + i: each copied token is already there, the first ones from the
            // context, later ones possibly from this proposal
            for (int i = 0; i < g; i++) tokens[n + i] = tokens[j + m + i];
            return g;
        }
    }
    return 0;
}

// The two drafts: up to g tokens into tokens[n..n+g), the distributions they were drawn from
// into sd->q; each returns how many it drafted, or -1.
static int draft_by_lookup(Speculative *sd, int *tokens, int n, int g) {
    int V = sd->vocab_size;
    g = lookup_draft(tokens, n, g, sd->params.ngram_min, sd->params.ngram_max);
    // the proposal is deterministic: q is one-hot at it, so a draft is accepted with p(d)
    for (int i = 0; i < g; i++) {
        float *q = sd->q + (size_t)i * V;
        memset(q, 0, (size_t)V * sizeof(float));
        q[tokens[n + i]] = 1.0f;
    }
    return g;
}

static int draft_by_model(Speculative *sd, int *tokens, int n, int g, Error *err) {
    if (g == 0) return 0;
    Session *d = sd->draft;
    int V = sd->vocab_size, fed = session_len(d);
    if (fed < n) { // catch up on the tokens the last step committed after the draft's proposals
        if (session_prefill(d, tokens + fed, n - fed, NULL, err)) return -1;
        sd->stats.draft_calls++;
    }
    for (int i = 0; i < g; i++) {
        float *q = sd->q + (size_t)i * V;
        // the history of position n + i, as the target's p will see it
        if (sampler_distribution(sd->sampler, d->logits, tokens, n + i, q, err) < 0) return -1;
        int t = sampler_draw(sd->sampler, q, V, err);
        if (t < 0) return -1;
        tokens[n + i] = t;
        if (i + 1 < g) { // the last draft is not fed: its q is not needed
            if (session_decode(d, t, err)) return -1;
            sd->stats.draft_calls++;
        }
    }
    return g;
}

// --- verification ---------------------------------------------------------------------------

// The target's p_1..p_{g+1} after tokens[0..n) and the g drafts after them, from one prefill
// over what it has not fed: row i of sd->logits is the prediction after n + i tokens.
static int target_distributions(Speculative *sd, const int *tokens, int n, int g, Error *err) {
    Session *t = sd->target;
    size_t V = (size_t)sd->vocab_size;
    // fed is n (the caller's prefill, whose logits are p_1's) or n - 1 (after a step). The
    // caller's logits are used as they are rather than t_n fed again: a long prompt went through
    // sgemm, which rounds unlike single rows, and plain decoding samples from those logits.
    int fed = session_len(t);
    if (fed == n) memcpy(sd->logits, t->logits, V * sizeof(float));
    int rows = n + g - fed;
    if (rows > 0) {
        if (session_prefill(t, tokens + fed, rows, sd->logits + (size_t)(fed - n + 1) * V, err)) return -1;
        sd->stats.target_calls++;
    }
    for (int i = 0; i <= g; i++)
        if (sampler_distribution(sd->sampler, sd->logits + i * V, tokens, n + i, sd->p + i * V, err) < 0) return -1;
    return 0;
}

static int check_fits(const Session *s, int positions, const char *which, Error *err) {
    if (positions > s->cache.capacity)
        return error_set(err, "speculative: a context of %d tokens does not fit in the %s's KV cache of %d positions",
                         positions, which, s->cache.capacity);
    return 0;
}

static int check_step(const Speculative *sd, int n, int max_new, int g, Error *err) {
    if (n < 1) return error_set(err, "speculative: a step needs at least one token of context, got %d", n);
    if (max_new < 1) return error_set(err, "speculative: a step adds at least one token, asked for %d", max_new);
    int fed = session_len(sd->target);
    if (fed != n && fed != n - 1)
        return error_set(err, "speculative: the target session holds %d positions; after %d tokens it must hold %d or "
                         "%d", fed, n, n - 1, n);
    if (sd->draft && session_len(sd->draft) > n)
        return error_set(err, "speculative: the draft session holds %d positions, more than the %d tokens",
                         session_len(sd->draft), n);
    if (check_fits(sd->target, n + g, "target", err)) return -1;
    return sd->draft ? check_fits(sd->draft, n + g - 1, "draft", err) : 0;
}

static void add_step(SpecStats *st, const SpecStep *step) {
    st->steps++;
    st->generated += step->accepted + 1;
    st->drafted += step->drafted;
    st->accepted += step->accepted;
    st->judged += step->accepted + (step->accepted < step->drafted);
    for (int i = 0; i < step->drafted; i++) st->drafted_at[i]++;
    for (int i = 0; i < step->accepted; i++) st->accepted_at[i]++;
    st->draft_s += step->draft_s;
    st->target_s += step->target_s;
}

int speculative_step(Speculative *sd, int *tokens, int n, int max_new, SpecStep *step, Error *err) {
    // the step adds its k accepted drafts and one token more, so it drafts at most max_new - 1
    int g = max_new - 1 < sd->params.gamma ? max_new - 1 : sd->params.gamma;
    if (check_step(sd, n, max_new, g, err)) return -1;
    double t0 = now_seconds();
    g = sd->draft ? draft_by_model(sd, tokens, n, g, err) : draft_by_lookup(sd, tokens, n, g);
    if (g < 0) return -1;
    double t1 = now_seconds();
    if (target_distributions(sd, tokens, n, g, err)) return -1;
    int k = sd->accept(sd->sampler, sd->p, sd->q, tokens + n, g, sd->residual, err);
    if (k < 0) return -1;
    // keep what agrees with tokens[0..n+k]: the target all but the new token, which the next
    // step feeds with its drafts; the draft at most its proposals among the accepted
    session_truncate(sd->target, n + k);
    if (sd->draft && session_len(sd->draft) > n + k) session_truncate(sd->draft, n + k);
    SpecStep s = {.drafted = g, .accepted = k, .draft_s = t1 - t0, .target_s = now_seconds() - t1};
    add_step(&sd->stats, &s);
    if (step) *step = s;
    return k + 1;
}

// Roll both sessions back to at most n positions (a generation stopped at token n).
static void stop_at(Speculative *sd, int n) {
    if (session_len(sd->target) > n) session_truncate(sd->target, n);
    if (sd->draft && session_len(sd->draft) > n) session_truncate(sd->draft, n);
}

int speculative_generate(Speculative *sd, int *tokens, int n_tokens, int n_new, SessionTokenFn on_token, void *ctx,
                         Error *err) {
    if (n_new < 0) return error_set(err, "speculative: cannot generate %d tokens", n_new);
    if (n_new == 0) return 0;
    if (session_len(sd->target) != n_tokens)
        return error_set(err, "speculative: the target session holds %d positions, not the %d tokens of the context",
                         session_len(sd->target), n_tokens);
    if (sd->draft && session_len(sd->draft) != n_tokens)
        return error_set(err, "speculative: the draft session holds %d positions, not the %d tokens of the context",
                         session_len(sd->draft), n_tokens);
    // the last token is never fed: the target holds at most n_tokens + n_new - 1 positions
    int most = n_tokens + n_new - 1;
    if (check_fits(sd->target, most, "target", err) || (sd->draft && check_fits(sd->draft, most, "draft", err)))
        return -1;
    for (int done = 0; done < n_new;) {
        int got = speculative_step(sd, tokens, n_tokens + done, n_new - done, NULL, err);
        if (got < 0) return -1;
        for (int j = 0; j < got; j++) {
            if (on_token && on_token(ctx, tokens[n_tokens + done + j])) {
                stop_at(sd, n_tokens + done + j);
                return done + j;
            }
        }
        done += got;
    }
    return n_new;
}
