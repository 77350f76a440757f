// workload.h: the serving experiment's requests: prompts and output lengths from held-out KJV
// passages, an optional shared system prompt, and arrival times from a Poisson or gamma
// process (vLLM's benchmark_serving: gaps ~ Gamma(shape = burstiness, scale = 1 / (rate x
// burstiness)), so the mean rate is `rate` whatever the burstiness; burstiness 1 is Poisson,
// below 1 burstier, above 1 more regular).
//
//   Workload w; workload_make(&w, &spec, &tok, corpus.val, corpus.val_len);
//   workload_arrivals(w.reqs, w.n, rate, burstiness, seed);   // w.reqs[i].arrival_s
//   ... serve_run(&cfg, &engine, NULL, w.reqs, w.n, ...) ...; workload_free(&w);
//
// A passage is 1 to 3 consecutive lines (verses) of the validation text from a random line,
// after BOS (or after the system prompt, which begins with BOS): its tokens, cut to
// max_prompt, are the prompt; the length in tokens of the line after it, clamped to
// [min_output, max_output], is the output length (the text the passage would go on with).
// The system prompt is the first prefix_len tokens of the validation text; a request carries
// it with probability shared_fraction. Everything is drawn from the seed: the same spec gives
// the same requests.
#pragma once

#include <stddef.h>
#include <stdint.h>

#include "scheduler.h"
#include "tokenizer.h"

typedef struct {
    int n_requests;
    int max_prompt, min_output, max_output;
    int prefix_len;          // the shared system prompt's tokens (0: none)
    double shared_fraction;  // requests that carry it
    uint64_t seed;
} WorkloadSpec;

typedef struct {
    Request *reqs; // (n)
    int n;
    int *tokens;   // every prompt, back to back
} Workload;

// 0, or -1 with err (a validation text too short for the spec).
int workload_make(Workload *w, const WorkloadSpec *spec, const Tokenizer *tok, const char *val, size_t val_len,
                  Error *err);
void workload_free(Workload *w);
// Arrival times of n requests at `rate` per second on average, gaps Gamma(burstiness): the
// first at 0.
void workload_arrivals(Request *reqs, int n, double rate, double burstiness, uint64_t seed);
// A draw from Gamma(shape, 1) (Marsaglia and Tsang), from *rng.
double gamma_draw(uint64_t *rng, double shape);
