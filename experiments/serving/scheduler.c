// scheduler.c: static / continuous / chunked-prefill serving over a reserved or paged KV cache
// (see scheduler.h).
#include "scheduler.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"
#include "sampler.h"

const char *const POLICY_NAMES[POLICY_COUNT] = {"static", "continuous", "chunked"};
const char *const CACHE_NAMES[CACHE_COUNT] = {"reserve", "paged"};

typedef enum { ST_FUTURE, ST_WAITING, ST_RUNNING, ST_DONE } State;

// A request being served: the tokens it has (prompt, then generated), how many its cache holds.
typedef struct {
    State state;
    double due_s;      // when it is due to be sent (a follow-up: INFINITY until its turn comes)
    int admitted;      // admitted at least once
    int *seq;          // (whole prompt + output_len) the prompt, then generated tokens (0 in a simulated run)
    int n_tokens;      // prompt + generated
    int n_cached;      // positions in its cache
    int slot;          // reserve: its cache, -1 when it holds none
    int fresh;         // admitted this step (a prefill-first step serves only those)
    PagedSeq pseq;     // paged: its block table
} Live;

// One sequence's rows of a step: n positions from its n_cached.
typedef struct {
    int req, n;
} Chunk;

typedef struct {
    const ServeConfig *cfg;
    Engine *e;
    const StepCost *cost;
    const Request *reqs;
    Outcome *out;
    ServeStats *st;
    int n;
    Live *live;
    int *running, n_running;     // request indices in admission order
    int *waiting, n_waiting;     // FIFO; preempted requests go back to the front
    int **outputs;               // (n) each request's output tokens: what a follow-up's prompt repeats
    int n_inflight, n_done;      // sent and not finished; finished
    double *slot_free_s;         // max_concurrency > 0: when each free slot freed, a FIFO of n_free_slots_c
    int slot_head, n_free_slots_c;
    double t;
    // reserve
    KVCache *slots;              // (n_slots) real runs only
    int *free_slots, n_free_slots, n_slots;
    // paged
    KVPool pool;
    PrefixCache pc;              // when cfg->prefix_cache is not off
    int *fill;                   // (n_blocks) scratch of the utilisation count
    Chunk *plan;                 // (n) this step's chunks
    int n_plan;
    double busy_s;               // time with KV memory held (the utilisation's weight)
} Server;

static int pending(const Server *s, int i) { return s->live[i].n_tokens - s->live[i].n_cached; }

static KVCache *cache_of(Server *s, int i) {
    return s->cfg->cache == CACHE_PAGED ? &s->live[i].pseq.cache : &s->slots[s->live[i].slot];
}

// ---- KV memory -------------------------------------------------------------------------------

// Give request i a cache for its pending tokens, or 0 when memory lacks. Paged: its prompt's
// blocks are taken now (after the longest cached prefix of its tokens, with prefix caching).
static int kv_admit(Server *s, int i) {
    Live *l = &s->live[i];
    if (s->cfg->cache == CACHE_RESERVE) {
        if (s->n_free_slots == 0) return 0;
        l->slot = s->free_slots[--s->n_free_slots];
        if (s->slots) kv_cache_truncate(&s->slots[l->slot], 0);
        l->n_cached = 0;
        return 1;
    }
    l->n_cached = s->cfg->prefix_cache ? prefix_cache_match(&s->pc, &l->pseq, l->seq, l->n_tokens) : 0;
    if (paged_seq_prepare(&l->pseq, l->n_cached, pending(s, i))) {
        paged_seq_release(&l->pseq);
        l->n_cached = 0;
        return 0;
    }
    if (s->cfg->prefix_cache) {
        s->st->cache_queries += l->n_tokens;
        s->st->cache_hits += l->n_cached;
        if (!l->admitted) s->out[i].cached = l->n_cached;
    }
    l->admitted = 1;
    return 1;
}

// Its cache goes back; with prefix caching, what it computed stays cached (all of it: a
// preempted request finds its own tokens when it returns).
static void kv_release(Server *s, int i) {
    Live *l = &s->live[i];
    if (s->cfg->cache == CACHE_RESERVE) {
        if (l->slot >= 0) s->free_slots[s->n_free_slots++] = l->slot;
        l->slot = -1;
    } else {
        if (s->cfg->prefix_cache) prefix_cache_insert(&s->pc, &l->pseq, l->seq, l->n_cached, 1);
        paged_seq_release(&l->pseq);
    }
    l->n_cached = 0;
}

// ---- queues -----------------------------------------------------------------------------------

static void remove_running(Server *s, int i) {
    int k = 0;
    for (int j = 0; j < s->n_running; j++)
        if (s->running[j] != i) s->running[k++] = s->running[j];
    s->n_running = k;
}

static void drop_from_plan(Server *s, int i) {
    int k = 0;
    for (int j = 0; j < s->n_plan; j++)
        if (s->plan[j].req != i) s->plan[k++] = s->plan[j];
    s->n_plan = k;
}

// Preemption by recompute: the cache is dropped, the tokens kept; it waits at the front.
static void preempt(Server *s, int i) {
    kv_release(s, i);
    remove_running(s, i);
    drop_from_plan(s, i);
    memmove(s->waiting + 1, s->waiting, s->n_waiting * sizeof(int));
    s->waiting[0] = i;
    s->n_waiting++;
    s->live[i].state = ST_WAITING;
    s->out[i].preempted++;
    s->st->n_preemptions++;
}

// The request due earliest (lowest index among equals) by `by`, or -1.
static int earliest_due(const Server *s, double by) {
    int best = -1;
    for (int i = 0; i < s->n; i++)
        if (s->live[i].state == ST_FUTURE && s->live[i].due_s <= by && (best < 0 || s->live[i].due_s < s->live[best].due_s))
            best = i;
    return best;
}

// Send the requests due by now, earliest first, while the concurrency limit allows: each is
// sent when it is due or, when every slot was taken, when one freed (slots are given out in
// the order they freed, as a semaphore queues its waiters).
static void send_due(Server *s) {
    int limit = s->cfg->max_concurrency;
    for (int i; (limit == 0 || s->n_inflight < limit) && (i = earliest_due(s, s->t)) >= 0;) {
        Live *l = &s->live[i];
        double sent = l->due_s;
        if (limit) {
            double freed = s->slot_free_s[s->slot_head];
            s->slot_head = (s->slot_head + 1) % limit;
            s->n_free_slots_c--;
            if (freed > sent) sent = freed;
        }
        l->n_tokens = request_full_prompt(s->reqs, i, s->outputs, l->seq);
        s->out[i].prompt_len = l->n_tokens;
        s->out[i].sent_s = sent;
        l->state = ST_WAITING;
        s->waiting[s->n_waiting++] = i;
        s->n_inflight++;
    }
}

// Request i has its last token at time t: its slot frees, its follow-ups become due.
static void request_done(Server *s, int i) {
    int limit = s->cfg->max_concurrency;
    s->n_inflight--;
    s->n_done++;
    if (limit) s->slot_free_s[(s->slot_head + s->n_free_slots_c++) % limit] = s->t;
    for (int j = i + 1; j < s->n; j++)
        if (s->reqs[j].follows == i) s->live[j].due_s = s->t + s->reqs[j].think_s;
}

// ---- one step ---------------------------------------------------------------------------------

// Admit waiting requests while the batch, the budget (chunked) and KV memory allow.
static void admit(Server *s) {
    const ServeConfig *c = s->cfg;
    if (c->policy == POLICY_STATIC && s->n_running > 0) return;
    int budget_left = c->token_budget;
    if (c->policy == POLICY_CHUNKED)
        for (int j = 0; j < s->n_running; j++) budget_left -= pending(s, s->running[j]) == 1;
    while (s->n_waiting > 0 && s->n_running < c->max_batch && (c->policy != POLICY_CHUNKED || budget_left > 0)) {
        int i = s->waiting[0];
        if (!kv_admit(s, i)) break;
        memmove(s->waiting, s->waiting + 1, (s->n_waiting - 1) * sizeof(int));
        s->n_waiting--;
        s->live[i].state = ST_RUNNING;
        s->live[i].fresh = 1;
        s->running[s->n_running++] = i;
        budget_left -= pending(s, i);
    }
    for (int j = 0; j < s->n_waiting; j++) s->out[s->waiting[j]].waited = 1;
}

// The step's chunks. static / continuous: the fresh requests' whole prompts if there are
// any, else one decode row each; chunked: the decodes, then prompt chunks within the budget.
static void plan_step(Server *s) {
    s->n_plan = 0;
    int any_fresh = 0;
    for (int j = 0; j < s->n_running; j++) any_fresh |= s->live[s->running[j]].fresh;
    if (s->cfg->policy != POLICY_CHUNKED) {
        for (int j = 0; j < s->n_running; j++) {
            int i = s->running[j];
            if (!any_fresh || s->live[i].fresh) s->plan[s->n_plan++] = (Chunk){i, any_fresh ? pending(s, i) : 1};
        }
        return;
    }
    int rows = 0;
    for (int j = 0; j < s->n_running; j++)
        if (pending(s, s->running[j]) == 1) {
            s->plan[s->n_plan++] = (Chunk){s->running[j], 1};
            rows++;
        }
    for (int j = 0; j < s->n_running && rows < s->cfg->token_budget; j++) {
        int i = s->running[j], p = pending(s, i);
        if (p == 1) continue;
        int n = p < s->cfg->token_budget - rows ? p : s->cfg->token_budget - rows;
        s->plan[s->n_plan++] = (Chunk){i, n};
        rows += n;
    }
}

// Map every chunk's positions (a decode may need a new block, or a copy of a shared one);
// when the pool is out of blocks, preempt the latest admitted request and try again.
static void make_room(Server *s) {
    if (s->cfg->cache != CACHE_PAGED) return;
    for (int j = 0; j < s->n_plan;) {
        int i = s->plan[j].req;
        if (paged_seq_prepare(&s->live[i].pseq, s->live[i].n_cached, s->plan[j].n) == 0) {
            j++;
            continue;
        }
        int victim = s->running[s->n_running - 1];
        int at = 0; // victim's chunk comes before chunk j?
        for (int k = 0; k < j; k++) at += s->plan[k].req == victim;
        preempt(s, victim);
        j -= at;
    }
}

// The forward rows of chunks from..: what engine_forward takes. Returns the rows (<= cap).
static int pack_rows(Server *s, int *chunk, int *done, int cap, KVCache **caches, int *tokens, int *pos) {
    int R = 0;
    while (*chunk < s->n_plan && R < cap) {
        Chunk ch = s->plan[*chunk];
        Live *l = &s->live[ch.req];
        int take = ch.n - *done < cap - R ? ch.n - *done : cap - R;
        for (int k = 0; k < take; k++, R++) {
            int p = l->n_cached + *done + k;
            caches[R] = s->e ? cache_of(s, ch.req) : NULL;
            tokens[R] = l->seq[p];
            pos[R] = p;
        }
        *done += take;
        if (*done == ch.n) {
            (*chunk)++;
            *done = 0;
        }
    }
    return R;
}

// Run the plan as forwards of at most the budget (and SERVE_MAX_ROWS when real) rows; the
// greedy token after each chunk that completes its sequence goes to next[j]. Returns seconds.
static double execute(Server *s, int *next) {
    int cap = s->cfg->token_budget;
    if (s->e && cap > SERVE_MAX_ROWS) cap = SERVE_MAX_ROWS;
    KVCache *caches[SERVE_MAX_ROWS > cap ? SERVE_MAX_ROWS : cap];
    int tokens[SERVE_MAX_ROWS > cap ? SERVE_MAX_ROWS : cap], pos[SERVE_MAX_ROWS > cap ? SERVE_MAX_ROWS : cap];
    double seconds = 0.0;
    int V = s->e ? s->e->config.vocab_size : 0;
    for (int chunk = 0, done = 0; chunk < s->n_plan;) {
        int first = chunk, first_done = done;
        int R = pack_rows(s, &chunk, &done, cap, caches, tokens, pos);
        s->st->n_forwards++;
        if (!s->e) {
            double keys = 0;
            for (int r = 0; r < R; r++) keys += pos[r] + 1;
            seconds += s->cost->forward_s(s->cost->ctx, R, keys);
            continue;
        }
        float *logits = engine_logits_host(s->e, R); // (R, V)
        double t0 = now_seconds();
        engine_forward(s->e, caches, tokens, pos, R, logits, 1);
        seconds += now_seconds() - t0;
        // rows that end a chunk completing its sequence's pending tokens predict its next token
        for (int r = 0, j = first, d = first_done; r < R; r++) {
            if (++d < s->plan[j].n) continue;
            if (s->live[s->plan[j].req].n_cached + s->plan[j].n == s->live[s->plan[j].req].n_tokens)
                next[j] = sampler_argmax(logits + (size_t)r * V, V);
            j++;
            d = 0;
        }
    }
    return seconds;
}

// Positions stored and reserved now (paged: shared blocks counted once, a block's stored
// positions being the most any holder has written in it; blocks only the prefix cache keeps
// count as free).
static void kv_usage(Server *s, double *stored, double *reserved) {
    *stored = *reserved = 0;
    if (s->cfg->cache == CACHE_RESERVE) {
        for (int j = 0; j < s->n_running; j++) *stored += s->live[s->running[j]].n_cached;
        *reserved = (double)(s->n_slots - s->n_free_slots) * s->cfg->reserve_len;
        return;
    }
    int bs = s->pool.block_size;
    memset(s->fill, 0, s->pool.n_blocks * sizeof(int));
    for (int j = 0; j < s->n_running; j++) {
        const PagedSeq *q = &s->live[s->running[j]].pseq;
        int len = s->live[s->running[j]].n_cached;
        for (int b = 0; b < paged_seq_n_blocks(q); b++) {
            int f = len - b * bs < 0 ? 0 : len - b * bs > bs ? bs : len - b * bs;
            if (f > s->fill[q->table[b]]) s->fill[q->table[b]] = f;
        }
    }
    for (int b = 0; b < s->pool.n_blocks; b++) *stored += s->fill[b];
    *reserved = (double)(s->pool.n_blocks - kv_pool_available(&s->pool)) * bs; // held: cached unheld blocks are free memory
}

// Advance the clock past the step; chunks that complete their pending tokens produce one.
static void finish_step(Server *s, double seconds, const int *next) {
    double stored, reserved;
    s->t += seconds;
    for (int j = 0; j < s->n_plan; j++) {
        int i = s->plan[j].req;
        Live *l = &s->live[i];
        l->n_cached += s->plan[j].n;
        l->fresh = 0;
        if (s->cfg->cache == CACHE_PAGED) {
            l->pseq.cache.len = l->n_cached;
            if (s->cfg->prefix_cache) prefix_cache_insert(&s->pc, &l->pseq, l->seq, l->n_cached, 0);
        }
        if (l->n_cached < l->n_tokens) continue;
        Outcome *o = &s->out[i];
        o->tokens[o->n_out] = next[j];
        o->token_s[o->n_out++] = s->t;
        l->seq[l->n_tokens++] = next[j];
    }
    kv_usage(s, &stored, &reserved);
    if (reserved > 0) {
        s->st->kv_util += seconds * stored / reserved;
        s->busy_s += seconds;
    }
    s->st->kv_rows_mean += seconds * reserved;
    if (reserved > s->st->kv_rows_peak) s->st->kv_rows_peak = (int)reserved;
    for (int j = 0; j < s->n_plan; j++) {
        int i = s->plan[j].req;
        if (s->live[i].state == ST_RUNNING && s->out[i].n_out == s->reqs[i].output_len) {
            kv_release(s, i);
            remove_running(s, i);
            s->live[i].state = ST_DONE;
            request_done(s, i);
        }
    }
}

// ---- the run ----------------------------------------------------------------------------------

int request_full_prompt_len(const Request *reqs, int i) {
    const Request *r = &reqs[i];
    return r->prompt_len + (r->follows >= 0 ? request_full_prompt_len(reqs, r->follows) + reqs[r->follows].output_len : 0);
}

int request_full_prompt(const Request *reqs, int i, int *const *outputs, int *dst) {
    const Request *r = &reqs[i];
    int n = 0;
    if (r->follows >= 0) {
        n = request_full_prompt(reqs, r->follows, outputs, dst);
        memcpy(dst + n, outputs[r->follows], reqs[r->follows].output_len * sizeof(int));
        n += reqs[r->follows].output_len;
    }
    if (r->prompt) memcpy(dst + n, r->prompt, r->prompt_len * sizeof(int));
    else memset(dst + n, 0, r->prompt_len * sizeof(int)); // a simulated request: positions, no tokens
    return n + r->prompt_len;
}

static int check_config(const ServeConfig *c, const Engine *e, const StepCost *cost, const Request *reqs, int n,
                        Error *err) {
    if (c->max_batch < 1 || c->token_budget < 1 || c->block_size < 1 || c->reserve_len < 1 || c->kv_tokens < 1 ||
        c->max_concurrency < 0)
        return error_set(err, "serve: batch %d, budget %d, block %d, reserve %d, KV %d must all be positive, "
                              "concurrency %d not negative",
                         c->max_batch, c->token_budget, c->block_size, c->reserve_len, c->kv_tokens, c->max_concurrency);
    if (e && c->token_budget > SERVE_MAX_ROWS)
        return error_set(err, "serve: a token budget of %d rows exceeds the %d rows a forward rounds row by row",
                         c->token_budget, SERVE_MAX_ROWS);
    if (e && c->reserve_len > e->s.max_keys)
        return error_set(err, "serve: %d positions per request on an engine of %d", c->reserve_len, e->s.max_keys);
    if (!e && (!cost || !cost->forward_s)) return error_set(err, "serve: a simulated run needs a step-cost model");
    if (c->prefix_cache < 0 || c->prefix_cache >= PREFIX_CACHE_COUNT || (c->prefix_cache && c->cache != CACHE_PAGED))
        return error_set(err, "serve: prefix caching (%d) needs the paged cache", (int)c->prefix_cache);
    int slots = c->kv_tokens / c->reserve_len, blocks = c->kv_tokens / c->block_size;
    if (c->cache == CACHE_RESERVE && slots < 1)
        return error_set(err, "serve: %d KV positions hold no cache of %d", c->kv_tokens, c->reserve_len);
    for (int i = 0; i < n; i++) {
        const Request *r = &reqs[i];
        if (r->prompt_len < 1 || r->output_len < 1 || r->prefix_len < 0 || r->prefix_len >= r->prompt_len ||
            ((e || c->prefix_cache) && !r->prompt) || r->follows < -1 || r->follows >= i || r->think_s < 0 ||
            !(r->arrival_s >= 0))
            return error_set(err, "serve: request %d is malformed (prompt %d, output %d, prefix %d, follows %d)", i,
                             r->prompt_len, r->output_len, r->prefix_len, r->follows);
        int len = request_full_prompt_len(reqs, i) + r->output_len;
        if (len > c->reserve_len || (c->cache == CACHE_PAGED && (len + c->block_size - 1) / c->block_size > blocks))
            return error_set(err, "serve: request %d of %d positions does not fit (%d per request, %d blocks)", i,
                             len, c->reserve_len, blocks);
    }
    return 0;
}

static void server_open(Server *s, const ServeConfig *c, Engine *e, const Request *reqs, int n) {
    const Ops *ops = e ? e->ops : ops_cpu();
    if (c->cache == CACHE_RESERVE) {
        s->n_slots = s->n_free_slots = c->kv_tokens / c->reserve_len;
        s->free_slots = mallocCheck(s->n_slots * sizeof(int));
        for (int k = 0; k < s->n_slots; k++) s->free_slots[k] = s->n_slots - 1 - k;
        if (e) {
            s->slots = mallocCheck(s->n_slots * sizeof(KVCache));
            for (int k = 0; k < s->n_slots; k++) model_kv_cache_alloc(&s->slots[k], ops, &e->config, c->reserve_len, e->s.max_rows);
        }
    } else {
        const Config *mc = e ? &e->config : NULL;
        kv_pool_alloc(&s->pool, ops, mc ? config_kv_layers(mc) : 0, mc ? mc->n_kv_heads * mc->head_dim : 0,
                      c->block_size, c->kv_tokens / c->block_size);
        if (c->prefix_cache) prefix_cache_open(&s->pc, &s->pool, c->prefix_cache);
        s->fill = mallocCheck(s->pool.n_blocks * sizeof(int));
    }
    s->live = calloc(n, sizeof(Live));
    s->running = mallocCheck(n * sizeof(int));
    s->waiting = mallocCheck(n * sizeof(int));
    s->plan = mallocCheck(n * sizeof(Chunk));
    s->outputs = mallocCheck(n * sizeof(int *));
    if (!s->live) die("serve: out of memory for %d requests", n);
    if (c->max_concurrency) {
        s->slot_free_s = mallocCheck(c->max_concurrency * sizeof(double));
        for (int k = 0; k < c->max_concurrency; k++) s->slot_free_s[k] = -INFINITY;
        s->n_free_slots_c = c->max_concurrency;
    }
    for (int i = 0; i < n; i++) {
        Live *l = &s->live[i];
        int len = request_full_prompt_len(reqs, i) + reqs[i].output_len;
        l->state = ST_FUTURE;
        l->due_s = reqs[i].follows < 0 ? reqs[i].arrival_s : INFINITY;
        l->slot = -1;
        l->seq = mallocCheck((size_t)len * sizeof(int));
        if (c->cache == CACHE_PAGED) paged_seq_open(&l->pseq, &s->pool, len);
        s->outputs[i] = s->out[i].tokens;
    }
}

static void server_close(Server *s) {
    for (int i = 0; i < s->n; i++) {
        if (s->cfg->cache == CACHE_PAGED) paged_seq_close(&s->live[i].pseq);
        free(s->live[i].seq);
    }
    if (s->cfg->cache == CACHE_RESERVE) {
        for (int k = 0; s->slots && k < s->n_slots; k++) kv_cache_free(&s->slots[k]);
        free(s->slots);
        free(s->free_slots);
    } else {
        if (s->cfg->prefix_cache) {
            s->st->cache_evictions = s->pc.evictions;
            prefix_cache_close(&s->pc);
        }
        if (s->pool.n_free != s->pool.n_blocks)
            die("serve: %d of %d KV blocks still held after the run", s->pool.n_blocks - s->pool.n_free,
                s->pool.n_blocks);
        kv_pool_free(&s->pool);
        free(s->fill);
    }
    free(s->live);
    free(s->running);
    free(s->waiting);
    free(s->plan);
    free(s->outputs);
    free(s->slot_free_s);
}

int serve_run(const ServeConfig *cfg, Engine *engine, const StepCost *cost, const Request *reqs, int n, Outcome *out,
              ServeStats *st, Error *err) {
    if (check_config(cfg, engine, cost, reqs, n, err)) return -1;
    Server s = {.cfg = cfg, .e = engine, .cost = cost, .reqs = reqs, .out = out, .st = st, .n = n};
    memset(st, 0, sizeof *st);
    for (int i = 0; i < n; i++) {
        out[i].n_out = out[i].waited = out[i].preempted = out[i].cached = out[i].prompt_len = 0;
        out[i].sent_s = 0;
    }
    server_open(&s, cfg, engine, reqs, n);
    int *next = mallocCheck((n > 0 ? n : 1) * sizeof(int));
    int first = earliest_due(&s, INFINITY);
    double t0 = first >= 0 ? s.live[first].due_s : 0.0;
    s.t = t0;
    while (s.n_done < n) {
        send_due(&s);
        if (s.n_running == 0 && s.n_waiting == 0) { // idle: on to the next request due
            int i = earliest_due(&s, INFINITY);
            if (i < 0) die("serve: %d requests left and none due", n - s.n_done);
            s.t = s.live[i].due_s;
            continue;
        }
        admit(&s);
        plan_step(&s);
        make_room(&s);
        if (s.n_plan == 0) die("serve: a step with nothing to run (%d running, %d waiting)", s.n_running, s.n_waiting);
        memset(next, 0, s.n_plan * sizeof(int));
        finish_step(&s, execute(&s, next), next);
        st->n_steps++;
    }
    double span = s.t - t0;
    st->duration_s = span;
    st->kv_util = s.busy_s > 0 ? st->kv_util / s.busy_s : 0;
    st->kv_rows_mean = span > 0 ? st->kv_rows_mean / span : 0;
    free(next);
    server_close(&s);
    return 0;
}
