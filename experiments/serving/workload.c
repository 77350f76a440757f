// workload.c: requests from held-out KJV passages and their arrival times (see workload.h).
#include "workload.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "rng.h"

// The byte offsets of the validation text's non-empty lines.
static int line_starts(const char *val, size_t len, size_t **out) {
    int n = 0, cap = 1024;
    size_t *at = mallocCheck(cap * sizeof(size_t));
    for (size_t i = 0; i < len; i++) {
        if ((i > 0 && val[i - 1] != '\n') || val[i] == '\n') continue;
        if (n == cap) at = reallocCheck(at, (cap *= 2) * sizeof(size_t));
        at[n++] = i;
    }
    *out = at;
    return n;
}

static size_t line_end(const char *val, size_t len, size_t from) {
    const char *nl = memchr(val + from, '\n', len - from);
    return nl ? (size_t)(nl - val) + 1 : len;
}

const char *const WORKLOAD_NAMES[WORKLOAD_COUNT] = {"passages", "few-shot", "chat"};

typedef struct {
    const WorkloadSpec *spec;
    const Tokenizer *tok;
    const char *val;
    size_t val_len;
    size_t *lines;
    int n_lines;
    int *buf; // tokenizer output, (tokenizer_max_tokens(val_len))
    uint64_t rng;
} Source;

// Tokens of the text from line `first` for `k` lines (BOS first with `bos`), at most max of
// them, appended at dst. Returns how many.
static int lines_tokens(Source *src, int first, int k, int bos, int *dst, int max) {
    size_t from = src->lines[first], to = line_end(src->val, src->val_len, src->lines[first + k - 1]);
    int got = (int)tokenizer_encode(src->tok, (const unsigned char *)src->val + from, to - from, bos, false, src->buf);
    if (got > max) got = max;
    memcpy(dst, src->buf, (got > 0 ? got : 0) * sizeof(int));
    return got > 0 ? got : 0;
}

// A random passage of `k` lines (1 to 3 when k is 0): its tokens appended at dst (at most
// max), and the output length that the line after it gives.
static int passage(Source *src, int k, int bos, int *dst, int max, int *output_len) {
    const WorkloadSpec *sp = src->spec;
    int first = (int)(rng_u64(&src->rng) % (uint64_t)(src->n_lines - 4));
    if (k == 0) k = 1 + (int)(rng_u64(&src->rng) % 3);
    int n = lines_tokens(src, first, k, bos, dst, max);
    int out = lines_tokens(src, first + k, 1, 0, src->buf, INT32_MAX / 2);
    *output_len = out < sp->min_output ? sp->min_output : out > sp->max_output ? sp->max_output : out;
    return n;
}

// A prefix of exactly len tokens (BOS, then the text from line `first` on), or fewer when the
// text ends first.
static int prefix_tokens(Source *src, int first, int len, int *dst) {
    size_t from = src->lines[first], bytes = src->val_len - from;
    if (bytes > (size_t)len * 8) bytes = (size_t)len * 8;
    int got = (int)tokenizer_encode(src->tok, (const unsigned char *)src->val + from, bytes, true, false, src->buf);
    if (got > len) got = len;
    memcpy(dst, src->buf, got * sizeof(int));
    return got;
}

int workload_make(Workload *w, const WorkloadSpec *spec, const Tokenizer *tok, const char *val, size_t val_len,
                  Error *err) {
    memset(w, 0, sizeof *w);
    Source src = {.spec = spec, .tok = tok, .val = val, .val_len = val_len, .rng = rng_seed(spec->seed)};
    src.n_lines = line_starts(val, val_len, &src.lines);
    int n_sets = spec->kind == WORKLOAD_FEW_SHOT ? spec->n_prefixes : 1;
    if (src.n_lines < 8 || spec->kind < 0 || spec->kind >= WORKLOAD_COUNT || spec->n_requests < 0 ||
        spec->max_prompt <= spec->prefix_len + 1 || spec->min_output < 1 || spec->max_output < spec->min_output ||
        n_sets < 1 || (spec->kind == WORKLOAD_CHAT && (spec->turns < 1 || spec->think_s < 0))) {
        free(src.lines);
        return error_set(err, "workload: %d lines of validation text, prompts of %d after a prefix of %d, outputs "
                              "%d..%d, %d example sets, %d turns: nothing to draw from",
                         src.n_lines, spec->max_prompt, spec->prefix_len, spec->min_output, spec->max_output,
                         spec->n_prefixes, spec->turns);
    }
    src.buf = mallocCheck(tokenizer_max_tokens(val_len) * sizeof(int));
    // the shared prefixes: the system prompt (line 0 on), or the example sets (random lines)
    int *sets = mallocCheck((size_t)n_sets * (spec->prefix_len + 1) * sizeof(int)), set_len = 0;
    for (int k = 0; k < n_sets && spec->prefix_len > 0; k++) {
        int first = spec->kind == WORKLOAD_FEW_SHOT ? (int)(rng_u64(&src.rng) % (uint64_t)(src.n_lines - 4)) : 0;
        set_len = prefix_tokens(&src, first, spec->prefix_len, sets + (size_t)k * (spec->prefix_len + 1));
    }
    w->n = spec->n_requests;
    w->reqs = calloc(w->n > 0 ? w->n : 1, sizeof(Request));
    w->tokens = mallocCheck((size_t)(w->n > 0 ? w->n : 1) * spec->max_prompt * sizeof(int));
    if (!w->reqs) die("workload: out of memory for %d requests", w->n);
    for (int i = 0; i < w->n; i++) {
        int *prompt = w->tokens + (size_t)i * spec->max_prompt, n = 0, out;
        Request *r = &w->reqs[i];
        int turn = spec->kind == WORKLOAD_CHAT ? i % spec->turns : 0;
        int shared = set_len > 0 && turn == 0 &&
                     (spec->kind == WORKLOAD_FEW_SHOT || rng_uniform(&src.rng) < spec->shared_fraction);
        if (shared) {
            int k = spec->kind == WORKLOAD_FEW_SHOT ? (int)(rng_u64(&src.rng) % (uint64_t)n_sets) : 0;
            memcpy(prompt, sets + (size_t)k * (spec->prefix_len + 1), set_len * sizeof(int));
            n = set_len;
        }
        n += passage(&src, turn > 0, !shared && turn == 0, prompt + n, spec->max_prompt - n, &out);
        *r = (Request){.prompt_len = n, .output_len = out, .prefix_len = shared && n > set_len ? set_len : 0,
                       .prompt = prompt, .follows = turn > 0 ? i - 1 : -1, .think_s = turn > 0 ? spec->think_s : 0};
    }
    free(sets);
    free(src.buf);
    free(src.lines);
    return 0;
}

void workload_free(Workload *w) {
    free(w->reqs);
    free(w->tokens);
    memset(w, 0, sizeof *w);
}

double gamma_draw(uint64_t *rng, double shape) {
    if (shape < 1.0) { // Gamma(a) = Gamma(a + 1) * U^(1/a)
        double u = rng_uniform(rng);
        return gamma_draw(rng, shape + 1.0) * pow(u > 1e-12 ? u : 1e-12, 1.0 / shape);
    }
    double d = shape - 1.0 / 3.0, c = 1.0 / sqrt(9.0 * d);
    for (;;) {
        double x = rng_normal(rng), v = 1.0 + c * x;
        if (v <= 0) continue;
        v = v * v * v;
        double u = rng_uniform(rng);
        if (u < 1e-12) u = 1e-12;
        if (log(u) < 0.5 * x * x + d - d * v + d * log(v)) return d * v;
    }
}

void workload_arrivals(Request *reqs, int n, double rate, double burstiness, uint64_t seed) {
    uint64_t rng = rng_seed(seed);
    double t = 0.0;
    for (int i = 0, first = 1; i < n; i++) {
        if (reqs[i].follows >= 0) continue;
        if (!first && rate > 0) t += gamma_draw(&rng, burstiness) / (rate * burstiness);
        reqs[i].arrival_s = t;
        first = 0;
    }
}
