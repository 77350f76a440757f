// workload.c: requests from held-out KJV passages and their arrival times (see workload.h).
#include "workload.h"

#include <math.h>
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

int workload_make(Workload *w, const WorkloadSpec *spec, const Tokenizer *tok, const char *val, size_t val_len,
                  Error *err) {
    memset(w, 0, sizeof *w);
    size_t *lines;
    int n_lines = line_starts(val, val_len, &lines);
    if (n_lines < 8 || spec->max_prompt <= spec->prefix_len + 1 || spec->min_output < 1 ||
        spec->max_output < spec->min_output) {
        free(lines);
        return error_set(err, "workload: %d lines of validation text, prompts of %d after a prefix of %d, outputs "
                              "%d..%d: nothing to draw from",
                         n_lines, spec->max_prompt, spec->prefix_len, spec->min_output, spec->max_output);
    }
    int *buf = mallocCheck(tokenizer_max_tokens(val_len) * sizeof(int));
    int sys_len = 0, *sys = mallocCheck((spec->prefix_len + 1) * sizeof(int));
    if (spec->prefix_len) {
        size_t bytes = val_len < (size_t)spec->prefix_len * 8 ? val_len : (size_t)spec->prefix_len * 8;
        int got = (int)tokenizer_encode(tok, (const unsigned char *)val, bytes, true, false, buf);
        sys_len = got < spec->prefix_len ? got : spec->prefix_len;
        memcpy(sys, buf, sys_len * sizeof(int));
    }
    w->n = spec->n_requests;
    w->reqs = calloc(w->n > 0 ? w->n : 1, sizeof(Request));
    w->tokens = mallocCheck((size_t)(w->n > 0 ? w->n : 1) * spec->max_prompt * sizeof(int));
    if (!w->reqs) die("workload: out of memory for %d requests", w->n);
    uint64_t rng = rng_seed(spec->seed);
    for (int i = 0; i < w->n; i++) {
        int first = (int)(rng_u64(&rng) % (uint64_t)(n_lines - 4)), k = 1 + (int)(rng_u64(&rng) % 3);
        int shared = sys_len > 0 && rng_uniform(&rng) < spec->shared_fraction;
        size_t from = lines[first], to = line_end(val, val_len, lines[first + k - 1]);
        int *prompt = w->tokens + (size_t)i * spec->max_prompt, n = 0;
        if (shared) {
            memcpy(prompt, sys, sys_len * sizeof(int));
            n = sys_len;
        }
        int got = (int)tokenizer_encode(tok, (const unsigned char *)val + from, to - from, !shared, false, buf);
        for (int j = 0; j < got && n < spec->max_prompt; j++) prompt[n++] = buf[j];
        size_t next = lines[first + k];
        int out = (int)tokenizer_encode(tok, (const unsigned char *)val + next, line_end(val, val_len, next) - next,
                                        false, false, buf);
        w->reqs[i] = (Request){0.0, n, out < spec->min_output ? spec->min_output : out > spec->max_output
                                                                                     ? spec->max_output
                                                                                     : out,
                               shared ? sys_len : 0, prompt};
        if (n <= w->reqs[i].prefix_len) w->reqs[i].prefix_len = 0; // a passage cut to nothing is not shared
    }
    free(buf);
    free(sys);
    free(lines);
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
    for (int i = 0; i < n; i++) {
        if (i > 0) t += gamma_draw(&rng, burstiness) / (rate * burstiness);
        reqs[i].arrival_s = t;
    }
}
