// session.c: sequences run by an engine (see session.h).
#include "session.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"
#include "kernels.h"

void session_open(Session *s, Engine *e, int capacity) {
    const Config *c = &e->config;
    if (capacity > e->s.max_keys)
        die("session of %d positions on an engine sized for %d", capacity, e->s.max_keys);
    s->engine = e;
    if (e->kv_dtype == DTYPE_F32) {
        model_kv_cache_alloc(&s->cache, e->ops, c, capacity, e->s.max_rows);
    } else {
        if (c->kv_lora_rank) die("session_open: MLA's latent cache has no %s form", dtype_name(e->kv_dtype));
        kv_cache_alloc_typed(&s->cache, e->ops, e->kv_dtype, config_kv_layers(c), c->n_kv_heads, c->head_dim, capacity);
    }
    s->logits = mallocCheck((size_t)c->vocab_size * sizeof(float));
}

void session_open_ring(Session *s, Engine *e, int chunk) {
    const Config *c = &e->config;
    if (c->window == 0) die("session_open_ring: the model attends to everything (no window)");
    if (c->n_sink + c->window + chunk - 1 > e->s.max_keys)
        die("ring session of %d rows on an engine sized for %d", c->n_sink + c->window + chunk - 1, e->s.max_keys);
    // A ring holds K/V rows of n_kv * hd; MLA's latent rows (values inside the keys) have no ring layout.
    if (c->kv_lora_rank) die("session_open_ring: MLA's latent cache has no ring layout");
    if (e->kv_dtype != DTYPE_F32) die("session_open_ring: a ring cache holds fp32 rows, not %s", dtype_name(e->kv_dtype));
    s->engine = e;
    kv_cache_alloc_ring(&s->cache, e->ops, config_kv_layers(c), c->n_kv_heads, c->head_dim, c->n_sink, c->window,
                        chunk);
    s->logits = mallocCheck((size_t)c->vocab_size * sizeof(float));
}

void session_close(Session *s) {
    kv_cache_free(&s->cache);
    free(s->logits);
    s->logits = NULL;
}

// The most positions one forward of this session writes.
static int chunk_rows(const Session *s) {
    int chunk = kv_cache_max_chunk(&s->cache);
    return chunk < s->engine->s.max_rows ? chunk : s->engine->s.max_rows;
}

// Can n more tokens be fed (every layer: a ring in forwards of chunk_rows; a contiguous layer must
// hold them all)?
static int check_fits(const Session *s, int n, Error *err) {
    const Config *c = &s->engine->config;
    for (int l = 0; l < c->n_layers; l++) {
        LayerAttention la = config_layer_attention(c, l);
        int g = l / c->kv_share;
        int per_forward = kv_cache_layer_layout(&s->cache, g).ring && n > chunk_rows(s) ? chunk_rows(s) : n;
        if (kv_cache_fits(&s->cache, g, s->cache.len, per_forward, la.window, la.n_sink, err)) return -1;
    }
    return 0;
}

int session_prefill(Session *s, const int *tokens, int n, float *all_logits, Error *err) {
    if (check_fits(s, n, err)) return -1;
    Engine *e = s->engine;
    int max_rows = chunk_rows(s), V = e->config.vocab_size;
    KVCache *caches[max_rows];
    int pos[max_rows];
    for (int done = 0; done < n;) {
        int R = n - done < max_rows ? n - done : max_rows;
        for (int r = 0; r < R; r++) {
            caches[r] = &s->cache;
            pos[r] = s->cache.len + r;
        }
        // Chunks before the last only fill the cache, unless every position's logits are wanted.
        int last = done + R == n;
        float *out = all_logits ? all_logits + (size_t)done * V : (last ? s->logits : NULL);
        engine_forward(e, caches, tokens + done, pos, R, out, all_logits != NULL);
        done += R;
    }
    if (all_logits && n > 0) memcpy(s->logits, all_logits + (size_t)(n - 1) * V, (size_t)V * sizeof(float));
    return 0;
}

#define GOVERNOR_PROBE_MIN 16
#define GOVERNOR_PROBE_MAX 1024
#define GOVERNOR_MARGIN 0.9 // a probe must beat the steps before it by 10% to switch

void thread_governor_init(ThreadGovernor *g, int max_threads) {
    *g = (ThreadGovernor){.max_threads = max_threads, .threads = max_threads, .next_probe = GOVERNOR_PROBE_MIN,
                          .interval = GOVERNOR_PROBE_MIN};
}

int thread_governor_next(ThreadGovernor *g) {
    if (g->probe_left == 0 && g->max_threads > 1 && g->current_n >= GOVERNOR_WINDOW && g->steps >= g->next_probe) {
        g->probe_left = GOVERNOR_WINDOW;
        g->probe_s = 0.0;
    }
    int other = g->threads == 1 ? g->max_threads : 1;
    return g->probe_left > 0 ? other : g->threads;
}

void thread_governor_record(ThreadGovernor *g, double seconds) {
    g->steps++;
    if (g->probe_left == 0) {
        g->current_s += seconds;
        g->current_n++;
        return;
    }
    g->probe_s += seconds;
    if (--g->probe_left > 0) return;
    if (g->probe_s / GOVERNOR_WINDOW < GOVERNOR_MARGIN * g->current_s / g->current_n) {
        g->threads = g->threads == 1 ? g->max_threads : 1; // the other count won: use it, look again soon
        g->interval = GOVERNOR_PROBE_MIN;
        g->switches++;
    } else if (g->interval < GOVERNOR_PROBE_MAX) {
        g->interval *= 2;
    }
    g->current_s = 0.0;
    g->current_n = 0;
    g->next_probe = g->steps + g->interval;
}

int session_decode(Session *s, int token, Error *err) {
    Session *one[1] = {s};
    ThreadGovernor *g = s->engine->governor;
    if (!g) return session_decode_batch(one, &token, 1, err);
    kernels_set_threads(thread_governor_next(g));
    double start = now_seconds();
    int rc = session_decode_batch(one, &token, 1, err);
    thread_governor_record(g, now_seconds() - start);
    return rc;
}

int session_decode_batch(Session *const *ss, const int *tokens, int B, Error *err) {
    if (B <= 0) return 0;
    Engine *e = ss[0]->engine;
    if (B > e->s.max_rows) return error_set(err, "decode batch %d exceeds the engine's %d rows", B, e->s.max_rows);
    int V = e->config.vocab_size;
    KVCache *caches[B];
    int pos[B];
    for (int b = 0; b < B; b++) {
        if (ss[b]->engine != e) return error_set(err, "a decode batch mixes sessions of different engines");
        if (check_fits(ss[b], 1, err)) return -1;
        caches[b] = &ss[b]->cache;
        pos[b] = ss[b]->cache.len;
    }
    float *logits = B == 1 ? ss[0]->logits : engine_logits_host(e, B);
    engine_forward(e, caches, tokens, pos, B, logits, 1);
    if (B > 1)
        for (int b = 0; b < B; b++) memcpy(ss[b]->logits, logits + (size_t)b * V, (size_t)V * sizeof(float));
    return 0;
}

void session_truncate(Session *s, int n) { kv_cache_truncate(&s->cache, n); }

int session_generate(Session *s, Sampler *sampler, int *tokens, int n_tokens, int n_new, SessionTokenFn on_token,
                     void *ctx, Error *err) {
    for (int i = 0; i < n_new; i++) {
        int next = sampler_sample(sampler, s->logits, tokens, n_tokens + i, err);
        if (next < 0) return -1;
        tokens[n_tokens + i] = next;
        if (on_token && on_token(ctx, next)) return i;
        if (i + 1 < n_new && session_decode(s, next, err)) return -1;
    }
    return n_new;
}

// -log softmax(logits)[target] as llama-perplexity computes it.
static double token_nll(const float *logits, int V, int target) {
    float max = logits[0];
    for (int i = 1; i < V; i++) max = logits[i] > max ? logits[i] : max;
    double sum = 0.0;
    for (int i = 0; i < V; i++) sum += expf(logits[i] - max);
    return -((double)(logits[target] - max) - log(sum));
}

#define PPL_SLICE 16 // rows of logits held at a time: (16, V), not (ctx, V)

double session_perplexity(Session *s, int *tokens, int ctx, int n_chunks, int bos_id, PerplexityChunkFn on_chunk,
                          void *arg, Error *err) {
    int V = s->engine->config.vocab_size, first = ctx / 2;
    float *logits = mallocCheck((size_t)PPL_SLICE * V * sizeof(float)); // (PPL_SLICE, V)
    double nll = 0.0;
    long count = 0;
    int status = 0;
    for (int c = 0; c < n_chunks && status == 0; c++) {
        int *chunk = tokens + (size_t)c * ctx, saved = chunk[0];
        if (bos_id >= 0) chunk[0] = bos_id; // every chunk starts as a sequence does
        session_truncate(s, 0);
        // the first half only conditions; rows first .. ctx - 2 predict the tokens scored
        status = session_prefill(s, chunk, first, NULL, err);
        for (int k0 = first; k0 < ctx && status == 0; k0 += PPL_SLICE) {
            int rows = ctx - k0 < PPL_SLICE ? ctx - k0 : PPL_SLICE;
            status = session_prefill(s, chunk + k0, rows, logits, err);
            for (int k = k0; k < k0 + rows && k + 1 < ctx && status == 0; k++, count++)
                nll += token_nll(logits + (size_t)(k - k0) * V, V, chunk[k + 1]);
        }
        chunk[0] = saved;
        if (status == 0 && on_chunk) on_chunk(arg, c + 1, exp(nll / count));
    }
    free(logits);
    return status == 0 ? exp(nll / count) : -1.0;
}

void model_forward_full(const Model *m, const int *tokens, int n, float *logits, int all_logits) {
    Engine e;
    Session s;
    Error err;
    engine_open(&e, m, ops_cpu(), DTYPE_F32, n < 512 ? n : 512, n);
    session_open(&s, &e, n);
    if (session_prefill(&s, tokens, n, all_logits ? logits : NULL, &err)) die("model_forward_full: %s", err.msg);
    if (!all_logits) memcpy(logits, s.logits, (size_t)e.config.vocab_size * sizeof(float));
    session_close(&s);
    engine_close(&e);
}
