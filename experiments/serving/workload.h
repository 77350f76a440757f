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
// A passage is 1 to 3 consecutive lines (verses) of the validation text from a random line:
// its tokens are a prompt; the length in tokens of the line after it, clamped to
// [min_output, max_output], is the output length (the text the passage would go on with).
// The kinds of workload:
//   passages  each request a passage after BOS, cut to max_prompt tokens; with probability
//             shared_fraction after a system prompt instead (the first prefix_len tokens of the
//             validation text, which begin with BOS);
//   few-shot  each request one of n_prefixes example sets (prefix_len tokens of consecutive
//             verses from a random line, after BOS), then its own passage as the question: the
//             shared examples, different questions of a few-shot prompt;
//   chat      conversations of `turns` requests: the first turn a passage (after the system
//             prompt with probability shared_fraction), every later turn one verse that follows
//             the previous turn (Request.follows), sent think_s after it ends, so each turn
//             resends the whole conversation (its prompts and the model's outputs).
// Everything is drawn from the seed: the same spec gives the same requests.
#pragma once

#include <stddef.h>
#include <stdint.h>

#include "scheduler.h"
#include "tokenizer.h"

typedef enum { WORKLOAD_PASSAGES, WORKLOAD_FEW_SHOT, WORKLOAD_CHAT, WORKLOAD_COUNT } WorkloadKind;
extern const char *const WORKLOAD_NAMES[WORKLOAD_COUNT]; // passages, few-shot, chat

typedef struct {
    WorkloadKind kind;
    int n_requests;
    int max_prompt, min_output, max_output; // max_prompt: a request's own tokens (a chat turn's, its first's
                                            // with the system prompt)
    int prefix_len;          // passages, chat: the system prompt's tokens (0: none); few-shot: an example set's
    double shared_fraction;  // passages, chat: requests (first turns) that carry the system prompt
    int n_prefixes;          // few-shot: example sets
    int turns;               // chat: requests per conversation
    double think_s;          // chat: from a turn's last token to the next turn
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
// Arrival times of the first turns among n requests (follow-ups are sent by the scheduler) at
// `rate` per second on average, gaps Gamma(burstiness): the first at 0. Rate 0: all at 0.
void workload_arrivals(Request *reqs, int n, double rate, double burstiness, uint64_t seed);
// A draw from Gamma(shape, 1) (Marsaglia and Tsang), from *rng.
double gamma_draw(uint64_t *rng, double shape);
