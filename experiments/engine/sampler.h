// sampler.h: logits processors and sampling with a seeded RNG (rng.h) owned by the sampler,
// so a run is reproducible from its seed. Tests: `make build/tests/test_sampler && ./build/tests/test_sampler`.
//
// The pipeline, always in this order:
//   1. penalties    over the distinct tokens of the last `penalty_window` history tokens:
//                   repetition (CTRL: a positive logit is divided by the penalty, a negative
//                   one multiplied), then presence and frequency (OpenAI:
//                   logit -= presence * [count > 0] + frequency * count)
//   2. temperature  logits / T; T = 0 is greedy: the argmax (lowest id on ties) with
//                   probability 1, and steps 3-5 are moot
//   3. top-k        keep the k most likely tokens
//   4. top-p        keep the smallest most-likely-first prefix whose mass (renormalised over
//                   what top-k kept) reaches p
//   5. min-p        keep tokens with p >= min_p * p_max
//   6. renormalise  over the kept tokens (the "candidates")
//   7. draw         one token from that distribution
// Ties in ordering are broken by the lower token id, so every step is deterministic.
// Tokens whose logit is -inf (masked) are never candidates.
//
// sampler_distribution stops after step 6 and returns the distribution itself (what the
// sampling experiment measures); sampler_sample runs all seven steps.
#pragma once

#include <stdint.h>

#include "common.h"

typedef struct {
    float temperature;        // >= 0; 0 = greedy
    int top_k;                // >= 0; 0 = off
    float top_p;              // (0, 1]; 1 = off
    float min_p;              // [0, 1]; 0 = off
    float repetition_penalty; // > 0; 1 = off; > 1 discourages repeats
    float presence_penalty;   // finite; 0 = off
    float frequency_penalty;  // finite; 0 = off
    int penalty_window;       // >= 0; penalties see the last this-many history tokens; 0 = all
    uint64_t seed;
} SamplerParams;

// temperature 1, every filter and penalty off, penalty_window 64, seed 42.
SamplerParams sampler_params_default(void);

// 0 if every field is in range, else -1 with a message naming the field and its value.
int sampler_params_validate(const SamplerParams *p, Error *err);

typedef struct {
    float logit; // after penalties, before temperature (same order as after it)
    float e;     // exp((logit - max_logit) / T): unnormalised probability, max = 1
    int id;
} SamplerCandidate;

// One per sequence: it holds the RNG stream and scratch buffers and is not thread-safe.
typedef struct {
    SamplerParams params;
    int vocab_size;
    uint64_t rng;                  // rng.h state, seeded from params.seed
    float *logits;                 // (V) scratch: penalised copy of the input logits
    SamplerCandidate *candidates;  // (V) scratch: the kept candidates first, in no promised order
    float *weights;                // (V) scratch: kept e values, for the draw
    int *counts;                   // (V) scratch: history counts, all zero between calls
} Sampler;

// Validates params (and vocab_size > 0), allocates the scratch and seeds the RNG.
int sampler_init(Sampler *s, int vocab_size, const SamplerParams *p, Error *err);
void sampler_free(Sampler *s);

// Step 1 alone, in place on logits (V), as the pipeline applies it. history holds the tokens
// generated (and/or prompted) so far, oldest first; it may be NULL when n_history is 0 and is
// not read when every penalty is off. Errors: a history token outside [0, V), or a
// penalised logit that overflows (logits may then be partly penalised). -inf logits stay;
// NaN and +inf are the caller's to refuse, as sampler_distribution and sampler_sample do.
int sampler_apply_penalties(Sampler *s, float *logits, const int *history, int n_history, Error *err);

// Steps 1-6: write the filtered, renormalised distribution to probs_out (V) (zeros outside
// the candidates) and return the number of candidates (>= 1). logits (V) is not modified.
// Returns -1 with a message for a NaN or +inf logit, all logits -inf, or a penalty error.
int sampler_distribution(Sampler *s, const float *logits, const int *history, int n_history,
                         float *probs_out, Error *err);

// Steps 1-7: the sampled token id, or -1 with a message (same errors as above).
// Advances the RNG once, except when a single candidate is left (always so under greedy),
// which needs no draw.
int sampler_sample(Sampler *s, const float *logits, const int *history, int n_history, Error *err);

// The first index of the largest of x[0..n): the greedy token (lowest id on ties, as the
// pipeline breaks them). Every greedy check of the lab uses it.
int sampler_argmax(const float *x, int n);

// Draw an index in [0, n) with probability weights[i] / sum(weights) from the sampler's RNG
// (e.g. speculative decoding's residual distribution). Advances the RNG once. Returns -1
// with a message if a weight is negative or not finite, or all are zero.
int sampler_draw(Sampler *s, const float *weights, int n, Error *err);
