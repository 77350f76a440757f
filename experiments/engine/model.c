// model.c: config checks, weight layout, and the forward pass of the Llama-style decoder
// (see model.h). One routine, forward_rows, runs every mode: prefill is R rows of one
// sequence, decode is one row for each of B sequences, full recompute is a prefill into
// a throw-away cache.
#include "model.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "common.h"
#include "kernels.h"
#include "rng.h"

// Largest dimension we accept: keeps every size computation far from overflow.
#define MAX_DIM (1 << 20)

Config config_default(void) {
    Config c;
    memset(&c, 0, sizeof c);
    c.norm_eps = 1e-5f;
    c.rope.theta = 10000.0f;
    c.rope.scaling = ROPE_NONE;
    c.rope.factor = 1.0f;
    c.rope.beta_fast = 32.0f;
    c.rope.beta_slow = 1.0f;
    return c;
}

int config_validate(const Config *c, char *why, size_t why_len) {
    const char *bad = NULL;
    int dims[] = {c->dim, c->hidden_dim, c->n_layers, c->n_heads, c->n_kv_heads, c->head_dim,
                  c->vocab_size, c->seq_len};
    for (size_t i = 0; i < sizeof dims / sizeof dims[0]; i++)
        if (dims[i] <= 0 || dims[i] > MAX_DIM) bad = "a dimension is not in 1 .. 2^20";
    if (!bad && c->n_heads % c->n_kv_heads != 0) bad = "n_heads is not a multiple of n_kv_heads";
    else if (!bad && c->head_dim % 2 != 0) bad = "head_dim is odd (RoPE rotates pairs)";
    else if (!bad && (c->window < 0 || c->n_sink < 0)) bad = "window or n_sink is negative";
    else if (!bad && !(c->norm_eps > 0.0f)) bad = "norm_eps is not positive";
    else if (!bad && !(c->rope.theta > 1.0f)) bad = "rope theta is not > 1";
    else if (!bad && (c->rope.scaling < ROPE_NONE || c->rope.scaling > ROPE_YARN)) bad = "unknown rope scaling";
    else if (!bad && !(c->rope.factor >= 1.0f && c->rope.factor <= 1024.0f)) bad = "rope factor not in [1, 1024]";
    else if (!bad && c->rope.scaling == ROPE_YARN &&
             (c->rope.orig_ctx <= 0 || !(c->rope.beta_fast > c->rope.beta_slow)))
        bad = "yarn needs orig_ctx > 0 and beta_fast > beta_slow";
    else if (!bad && model_param_count(c) > ((size_t)1 << 34)) bad = "more than 2^34 parameters";
    if (bad && why) snprintf(why, why_len, "%s", bad);
    return bad == NULL;
}

size_t model_param_count(const Config *c) {
    size_t C = c->dim, H = c->hidden_dim, L = c->n_layers, V = c->vocab_size;
    size_t q = (size_t)c->n_heads * c->head_dim, kv = (size_t)c->n_kv_heads * c->head_dim;
    size_t per_layer = C + q * C + 2 * kv * C + C * q + C + 3 * H * C;
    return V * C + L * per_layer + C + (c->tied_embeddings ? 0 : V * C);
}

void weights_map(Weights *w, const Config *c, float *p) {
    size_t C = c->dim, H = c->hidden_dim, L = c->n_layers, V = c->vocab_size;
    size_t q = (size_t)c->n_heads * c->head_dim, kv = (size_t)c->n_kv_heads * c->head_dim;
    w->token_embedding = p; p += V * C;
    w->rms_att = p;         p += L * C;
    w->wq = p;              p += L * q * C;
    w->wk = p;              p += L * kv * C;
    w->wv = p;              p += L * kv * C;
    w->wo = p;              p += L * C * q;
    w->rms_ffn = p;         p += L * C;
    w->w1 = p;              p += L * H * C;
    w->w2 = p;              p += L * C * H;
    w->w3 = p;              p += L * H * C;
    w->rms_final = p;       p += C;
    w->wcls = c->tied_embeddings ? w->token_embedding : p;
}

// Weights are read as long sequential streams every decode step. On 2 MiB-aligned memory
// the kernel can back them with transparent huge pages (where THP is "madvise"), so the
// streams cross no 4 KiB page boundaries, at which hardware prefetchers stop.
#define WEIGHTS_ALIGN ((size_t)2 << 20)
static float *weights_alloc(size_t bytes) {
    size_t rounded = (bytes + WEIGHTS_ALIGN - 1) / WEIGHTS_ALIGN * WEIGHTS_ALIGN;
    void *p = NULL;
    if (posix_memalign(&p, WEIGHTS_ALIGN, rounded) != 0) die("out of memory allocating %zu bytes of weights", bytes);
    madvise(p, rounded, MADV_HUGEPAGE); // a hint: ignored where THP is off
    return p;
}

void model_alloc(Model *m, const Config *c) {
    m->config = *c;
    m->n_params = model_param_count(c);
    m->params = weights_alloc(m->n_params * sizeof(float));
    weights_map(&m->weights, c, m->params);
}

void model_init_random(Model *m, uint64_t seed, float std) {
    const Config *c = &m->config;
    uint64_t rng = rng_seed(seed);
    for (size_t i = 0; i < m->n_params; i++) m->params[i] = std * rng_normal(&rng);
    Weights *w = &m->weights;
    for (size_t i = 0; i < (size_t)c->n_layers * c->dim; i++) w->rms_att[i] = w->rms_ffn[i] = 1.0f;
    for (int i = 0; i < c->dim; i++) w->rms_final[i] = 1.0f;
}

void model_free(Model *m) {
    free(m->params);
    m->params = NULL;
}

// Keys visible to a query at position p (see attention_visible).
static double visible_keys(const Config *c, int p) {
    if (c->window == 0 || p < c->window) return p + 1;
    int sinks_outside = c->n_sink < p + 1 - c->window ? c->n_sink : p + 1 - c->window;
    return c->window + sinks_outside;
}

double model_forward_flops(const Config *c, int n_new, int n_past, int head_rows) {
    double C = c->dim, H = c->hidden_dim, q = (double)c->n_heads * c->head_dim;
    double kv = (double)c->n_kv_heads * c->head_dim;
    double per_token = 2.0 * c->n_layers * (C * q + 2 * C * kv + q * C + 3 * C * H);
    double keys = 0.0;
    for (int p = n_past; p < n_past + n_new; p++) keys += visible_keys(c, p);
    double attention = 2.0 * 2.0 * c->n_layers * q * keys; // Q.K^T and P.V
    return per_token * n_new + attention + 2.0 * C * c->vocab_size * head_rows;
}

void runstate_alloc(RunState *s, const Config *c, int max_rows) {
    size_t R = max_rows, C = c->dim, H = c->hidden_dim;
    size_t q = (size_t)c->n_heads * c->head_dim, kv = (size_t)c->n_kv_heads * c->head_dim;
    s->max_rows = max_rows;
    s->x = mallocCheck(R * C * sizeof(float));
    s->xb = mallocCheck(R * C * sizeof(float));
    s->q = mallocCheck(R * q * sizeof(float));
    s->k = mallocCheck(R * kv * sizeof(float));
    s->v = mallocCheck(R * kv * sizeof(float));
    s->att = mallocCheck(R * q * sizeof(float));
    s->proj = mallocCheck(R * C * sizeof(float));
    s->hb = mallocCheck(R * H * sizeof(float));
    s->hb2 = mallocCheck(R * H * sizeof(float));
    s->inv_freq = mallocCheck((size_t)c->head_dim / 2 * sizeof(float));
    s->mscale = rope_frequencies(s->inv_freq, c->head_dim, &c->rope);
}

void runstate_free(RunState *s) {
    float *bufs[] = {s->x, s->xb, s->q, s->k, s->v, s->att, s->proj, s->hb, s->hb2, s->inv_freq};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++) free(bufs[i]);
    memset(s, 0, sizeof *s);
}

static void add_inplace(float *x, const float *y, size_t n) {
    for (size_t i = 0; i < n; i++) x[i] += y[i];
}

// Attention for rows whose caches already hold this layer's keys and values. Consecutive
// rows of the same sequence (a prefill chunk) form one call, so their queries share keys.
static void attention_rows(RunState *s, KVCache **caches, const int *pos, int R, int layer,
                           const AttentionShape *shape) {
    int q_stride = shape->n_heads * shape->head_dim;
    for (int r0 = 0, r1; r0 < R; r0 = r1) {
        for (r1 = r0 + 1; r1 < R && caches[r1] == caches[r0]; r1++) {}
        KVCache *c = caches[r0];
        attention_kv(s->att + (size_t)r0 * q_stride, s->q + (size_t)r0 * q_stride,
                     kv_cache_layer_key(c, layer), kv_cache_layer_value(c, layer), r1 - r0, pos[r0], shape);
    }
}

// The forward pass over R rows: row r is token tokens[r] at position pos[r] of the
// sequence cached in caches[r]. Rows of one sequence must be consecutive and in order.
// logits: (R, V) if all_logits, else (V) for the last row only; NULL skips the head.
static void forward_rows(Model *m, RunState *s, KVCache **caches, const int *tokens, const int *pos,
                         int R, float *logits, int all_logits) {
    const Config *c = &m->config;
    const Weights *w = &m->weights;
    int C = c->dim, H = c->hidden_dim, hd = c->head_dim;
    int q_dim = c->n_heads * hd, kv_dim = c->n_kv_heads * hd;
    AttentionShape shape = {c->n_heads, c->n_kv_heads, hd, c->window, c->n_sink, 1.0f / sqrtf((float)hd)};

    for (int r = 0; r < R; r++) // (R, C)
        memcpy(s->x + (size_t)r * C, w->token_embedding + (size_t)tokens[r] * C, C * sizeof(float));

    for (int l = 0; l < c->n_layers; l++) {
        // attention block
        rmsnorm(s->xb, s->x, w->rms_att + (size_t)l * C, R, C, c->norm_eps);
        matmul(s->q, s->xb, w->wq + (size_t)l * q_dim * C, R, C, q_dim);  // (R, n_heads * hd)
        matmul(s->k, s->xb, w->wk + (size_t)l * kv_dim * C, R, C, kv_dim); // (R, n_kv * hd)
        matmul(s->v, s->xb, w->wv + (size_t)l * kv_dim * C, R, C, kv_dim);
        for (int r = 0; r < R; r++) {
            rope_rotate(s->q + (size_t)r * q_dim, c->n_heads, hd, pos[r], s->inv_freq, s->mscale);
            rope_rotate(s->k + (size_t)r * kv_dim, c->n_kv_heads, hd, pos[r], s->inv_freq, s->mscale);
            size_t at = (size_t)pos[r] * kv_dim;
            memcpy(kv_cache_layer_key(caches[r], l) + at, s->k + (size_t)r * kv_dim, kv_dim * sizeof(float));
            memcpy(kv_cache_layer_value(caches[r], l) + at, s->v + (size_t)r * kv_dim, kv_dim * sizeof(float));
        }
        attention_rows(s, caches, pos, R, l, &shape);
        matmul(s->proj, s->att, w->wo + (size_t)l * C * q_dim, R, q_dim, C);
        add_inplace(s->x, s->proj, (size_t)R * C);

        // MLP block: w2(silu(w1 x) * w3 x)
        rmsnorm(s->xb, s->x, w->rms_ffn + (size_t)l * C, R, C, c->norm_eps);
        matmul(s->hb, s->xb, w->w1 + (size_t)l * H * C, R, C, H);  // (R, H)
        matmul(s->hb2, s->xb, w->w3 + (size_t)l * H * C, R, C, H);
        swiglu(s->hb, s->hb, s->hb2, R, H);
        matmul(s->proj, s->hb, w->w2 + (size_t)l * C * H, R, H, C);
        add_inplace(s->x, s->proj, (size_t)R * C);
    }

    for (int r = 0; r < R; r++)
        if (pos[r] + 1 > caches[r]->len) caches[r]->len = pos[r] + 1;

    if (!logits) return;
    int first = all_logits ? 0 : R - 1, n = R - first;
    rmsnorm(s->xb, s->x + (size_t)first * C, w->rms_final, n, C, c->norm_eps);
    matmul(logits, s->xb, w->wcls, n, C, c->vocab_size); // (n, V)
}

static void check_fits(const KVCache *cache, int n_tokens) {
    if (cache->len + n_tokens > cache->capacity)
        die("context of %d tokens does not fit in a KV cache of %d positions", cache->len + n_tokens,
            cache->capacity);
}

void model_prefill(Model *m, RunState *s, KVCache *cache, const int *tokens, int n_tokens,
                   float *logits, int all_logits) {
    check_fits(cache, n_tokens);
    KVCache **caches = mallocCheck((size_t)s->max_rows * sizeof(KVCache *));
    int *pos = mallocCheck((size_t)s->max_rows * sizeof(int));
    for (int done = 0; done < n_tokens;) {
        int R = n_tokens - done < s->max_rows ? n_tokens - done : s->max_rows;
        for (int r = 0; r < R; r++) {
            caches[r] = cache;
            pos[r] = cache->len + r;
        }
        // Chunks before the last only fill the cache, unless every position's logits are wanted.
        float *out = all_logits ? logits + (size_t)done * m->config.vocab_size
                                : (done + R == n_tokens ? logits : NULL);
        forward_rows(m, s, caches, tokens + done, pos, R, out, all_logits);
        done += R;
    }
    free(caches);
    free(pos);
}

void model_decode(Model *m, RunState *s, KVCache **caches, const int *tokens, int B, float *logits) {
    if (B > s->max_rows) die("decode batch %d exceeds the run state's %d rows", B, s->max_rows);
    int *pos = mallocCheck((size_t)B * sizeof(int));
    for (int b = 0; b < B; b++) {
        check_fits(caches[b], 1);
        pos[b] = caches[b]->len;
    }
    forward_rows(m, s, caches, tokens, pos, B, logits, 1);
    free(pos);
}

void model_forward_full(Model *m, const int *tokens, int n_tokens, float *logits, int all_logits) {
    const Config *c = &m->config;
    KVCache scratch;
    RunState s;
    kv_cache_alloc(&scratch, c->n_layers, c->n_kv_heads, c->head_dim, n_tokens);
    runstate_alloc(&s, c, n_tokens < 512 ? n_tokens : 512);
    model_prefill(m, &s, &scratch, tokens, n_tokens, logits, all_logits);
    runstate_free(&s);
    kv_cache_free(&scratch);
}
