// sampler.h: logits processors and sampling with a seeded RNG (rng.h) owned by the sampler,
// so a run is reproducible from its seed. Tests: `make build/tests/test_sampler && ./build/tests/test_sampler`.
//
// The samplers of llama.cpp (src/llama-sampler.cpp) and vLLM, run as a configurable chain over
// the candidate set, which starts as every token whose logit is not -inf:
//   logit bias      always first (llama.cpp and vLLM both): logit += bias for listed tokens
//   then the chain, each stage on the candidates the previous one kept:
//   penalties       over the distinct tokens of the last `penalty_window` history tokens:
//                   repetition (CTRL: a positive logit is divided by the penalty, a negative
//                   one multiplied), then presence and frequency (OpenAI:
//                   logit -= presence * [count > 0] + frequency * count)
//   dry             DRY: a token that would extend a sequence repeated from the last
//                   dry_penalty_last_n history tokens by more than dry_allowed_length gets
//                   logit -= multiplier * base^(length - allowed); sequence breakers cut a
//                   repeat (a single-token breaker is never penalised)
//   top_n_sigma     keep logit >= max - n * sigma (sigma: the candidates' logits' std)
//   top_k           keep the k most likely
//   typ_p           locally typical: keep the fewest tokens, closest first in |-log p - H|,
//                   whose mass reaches p (H: the candidates' entropy)
//   top_p           keep the smallest most-likely-first prefix whose mass reaches p
//   min_p           keep p >= min_p * p_max (logit >= max + log min_p)
//   xtc             with probability xtc_probability (its own RNG stream): of the tokens with
//                   p >= xtc_threshold, remove all but the least likely, if there are two or more
//   temperature     logit /= T; T = 0 keeps only the most likely (greedy); with a dynamic
//                   range d > 0: T' = lo + (T + d - lo) (H / log n)^exponent, lo = max(0, T - d)
//                   (llama.cpp's dynatemp; H the entropy of the n candidates)
// Probabilities are the softmax of the current logits over the current candidates; each stage
// that needs them renormalises over what the stages before it kept. Two chains are named:
//   SAMPLER_CHAIN_LLAMA  penalties;dry;top_n_sigma;top_k;typ_p;top_p;min_p;xtc;temperature
//                        (llama.cpp's default order: the filters see the untempered model)
//   SAMPLER_CHAIN_VLLM   penalties;temperature;min_p;top_k;top_p (vLLM v1's sampler: the
//                        filters see the tempered distribution), the lab's default
// Mirostat (1 or 2) replaces the chain, as in llama.cpp: logit bias, temperature, then
// mirostat's own truncation (v1: top-k with k from the estimated Zipf exponent; v2: drop
// tokens whose surprise -log2 p exceeds mu), and after each draw mu -= eta * (surprise - tau).
// A stage whose parameter is off leaves the candidates as they are.
// Ties in ordering are broken by the lower token id, so every step is deterministic.
//
// sampler_distribution returns the distribution the draw would use (what the sampling
// experiment measures); sampler_sample also draws, and updates mirostat's mu.
#pragma once

#include <stdint.h>

#include "common.h"

typedef enum {
    SAMPLER_PENALTIES,
    SAMPLER_DRY,
    SAMPLER_TOP_N_SIGMA,
    SAMPLER_TOP_K,
    SAMPLER_TYPICAL,
    SAMPLER_TOP_P,
    SAMPLER_MIN_P,
    SAMPLER_XTC,
    SAMPLER_TEMPERATURE,
    SAMPLER_STAGE_KINDS
} SamplerStage;

enum { SAMPLER_MAX_CHAIN = 16, SAMPLER_BREAKER_MAX_TAIL = 20 };

typedef struct {
    SamplerStage stage[SAMPLER_MAX_CHAIN];
    int length;
} SamplerChain;

extern const SamplerChain SAMPLER_CHAIN_LLAMA, SAMPLER_CHAIN_VLLM;

typedef struct {
    int token;
    float bias; // finite, or -inf to forbid the token
} SamplerLogitBias;

// A DRY sequence breaker as tokens: its head token, then the tokens that must follow it
// (none for a token whose text contains the breaker string: lab_dry_breakers builds them from
// strings as llama.cpp does).
typedef struct {
    int head;
    int n_tail;
    int tail[SAMPLER_BREAKER_MAX_TAIL];
} SamplerBreaker;

typedef struct {
    float temperature;        // >= 0; 0 = greedy
    float dynatemp_range;     // >= 0; 0 = off
    float dynatemp_exponent;  // > 0
    int top_k;                // >= 0; 0 = off
    float top_p;              // (0, 1]; 1 = off
    float min_p;              // [0, 1]; 0 = off
    float typical_p;          // (0, 1]; 1 = off
    float top_n_sigma;        // >= 0; 0 = off
    float xtc_probability;    // [0, 1]; 0 = off
    float xtc_threshold;      // [0, 1]; > 0.5 = off (two tokens cannot both exceed it)
    float repetition_penalty; // > 0; 1 = off; > 1 discourages repeats
    float presence_penalty;   // finite; 0 = off
    float frequency_penalty;  // finite; 0 = off
    int penalty_window;       // >= 0; penalties see the last this-many history tokens; 0 = all
    float dry_multiplier;     // >= 0; 0 = off
    float dry_base;           // >= 1
    int dry_allowed_length;   // >= 0
    int dry_penalty_last_n;   // >= -1; 0 = off, -1 = the whole history
    const SamplerBreaker *dry_breakers; // copied by sampler_init
    int n_dry_breakers;
    int mirostat;             // 0 = off, 1 or 2
    float mirostat_tau;       // > 0: the target surprise in bits
    float mirostat_eta;       // (0, 1]: mu's learning rate
    const SamplerLogitBias *logit_bias; // copied by sampler_init
    int n_logit_bias;
    SamplerChain chain;
    uint64_t seed;
} SamplerParams;

// temperature 1, every filter and penalty off, penalty_window 64, llama.cpp's defaults for the
// parameters of samplers that are off (dry base 1.75, allowed length 2, last 64; xtc threshold
// 0.1; mirostat tau 5, eta 0.1; dynatemp exponent 1), the vLLM chain, seed 42.
SamplerParams sampler_params_default(void);

// 0 if every field is in range, else -1 with a message naming the field and its value.
int sampler_params_validate(const SamplerParams *p, Error *err);

// Parse a chain as llama.cpp's --samplers spells it: names separated by ';' (or ',' or
// spaces): penalties, dry, top_n_sigma, top_k, typ_p (typical, typ), top_p (nucleus), min_p,
// xtc, temperature (temp), '-' for '_' allowed; or a named chain, "llama.cpp" or "vllm".
// Returns -1 with a message naming the unknown sampler.
int sampler_chain_parse(const char *spec, SamplerChain *chain, Error *err);
// The chain as "top_k;top_p;temperature" into buf (size n).
void sampler_chain_format(const SamplerChain *chain, char *buf, size_t n);
const char *sampler_stage_name(SamplerStage stage);

typedef struct {
    float logit; // the candidate's logit as the stages so far have changed it
    float p;     // exp(logit - max) over the candidates, where a stage needed it
    float key;   // selection order of the current stage (higher first; ties: lower id)
    int id;
} SamplerCandidate;

// One per sequence: it holds the RNG streams, mirostat's mu and scratch buffers; not thread-safe.
typedef struct {
    SamplerParams params;
    int vocab_size;
    uint64_t rng;                  // the draw's rng.h stream, seeded from params.seed
    uint64_t xtc_rng;              // XTC's coin, its own stream so XTC does not shift the draws
    float mu;                      // mirostat's surprise bound, 2 tau at the start
    float *logits;                 // (V) scratch: the checked copy of the input logits
    SamplerCandidate *candidates;  // (V) scratch: the kept candidates first, in no promised order
    float *weights;                // (V) scratch: kept probabilities, for the draw
    int *counts;                   // (V) scratch: history counts, all zero between calls
    int *repeat;                   // (V) scratch: DRY's repeat length + 1 per token, zero between calls
    int *z;                        // (z_capacity) scratch: DRY's Z-function over the reversed window
    int z_capacity;
    unsigned char *breaker_kind;   // (V) 0: none; 1: single-token breaker; 2: head of longer ones
    SamplerBreaker *breakers;      // copy of params.dry_breakers
    SamplerLogitBias *biases;      // copy of params.logit_bias
} Sampler;

// Validates params (and vocab_size > 0, every listed token inside it), allocates the scratch
// and seeds the RNG streams.
int sampler_init(Sampler *s, int vocab_size, const SamplerParams *p, Error *err);
void sampler_free(Sampler *s);

// The penalties stage alone, in place on logits (V). history holds the tokens generated
// (and/or prompted) so far, oldest first; it may be NULL when n_history is 0 and is not read
// when every penalty is off. Errors: a history token outside [0, V), or a penalised logit
// that overflows (logits may then be partly penalised). -inf logits stay.
int sampler_apply_penalties(Sampler *s, float *logits, const int *history, int n_history, Error *err);

// Logit bias and the chain: write the renormalised distribution to probs_out (V) (zeros
// outside the candidates) and return the number of candidates (>= 1). logits (V) is not
// modified. With XTC in the chain, its coin is drawn (the distribution is one of two).
// Returns -1 with a message for a NaN or +inf logit, all logits -inf, or a penalty error.
int sampler_distribution(Sampler *s, const float *logits, const int *history, int n_history,
                         float *probs_out, Error *err);

// The same, then the draw: the sampled token id, or -1 with a message (same errors). Advances
// the draw's RNG once, except when a single candidate is left (always so under greedy).
int sampler_sample(Sampler *s, const float *logits, const int *history, int n_history, Error *err);

// 1 if the sampler's distribution depends only on the logits and the history (what exact
// speculative decoding needs): not with mirostat (mu changes with each draw) or XTC (a coin).
int sampler_is_stateless(const Sampler *s);

// The first index of the largest of x[0..n): the greedy token (lowest id on ties, as the
// chain breaks them). Every greedy check of the lab uses it.
int sampler_argmax(const float *x, int n);

// The n most likely tokens of the model's own distribution (softmax of logits (V), before any
// sampler), most likely first: ids and natural-log probabilities. n <= V.
void sampler_top_logprobs(const float *logits, int V, int n, int *ids, float *logprobs);

// Draw an index in [0, n) with probability weights[i] / sum(weights) from the sampler's RNG
// (e.g. speculative decoding's residual distribution). Advances the RNG once. Returns -1
// with a message if a weight is negative or not finite, or all are zero.
int sampler_draw(Sampler *s, const float *weights, int n, Error *err);
