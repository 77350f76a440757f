// scheduler.h: the serving experiment's scheduler (lecture 10): requests that
// arrive over time are admitted into a running batch and served step by step on one engine,
// with a token budget per step, admission limited by free KV memory, and preemption by
// recompute when it runs out.
//
// Policies (what a step runs):
//   static      a batch is admitted only when the previous one has finished, and runs to
//               completion: a prefill step for all of it, then decode steps (pre-Orca serving);
//   continuous  requests join and leave every step (Orca's iteration-level scheduling); a
//               step that admits requests prefills them whole, a step that admits none decodes
//               every running sequence (vLLM v0's prefill-first order);
//   chunked     continuous, and every step is one forward of at most token_budget rows: the
//               running decodes first, then chunks of the prompts being prefilled, so decodes
//               keep flowing while a long prompt is read (Sarathi / vLLM's chunked prefill).
// KV memory (cfg.kv_tokens positions in all):
//   reserve     contiguous caches (kvcache.h) of reserve_len positions, one per admitted
//               request: vLLM's pre-paging policy of reserving the maximum length;
//   paged       a block pool (paged.h): a request holds the blocks its positions fill, taken
//               for its prompt at admission and one at a time as it decodes; when a decode
//               finds no free block the latest admitted request is preempted (its blocks freed,
//               recomputed from its prompt and generated tokens when readmitted).
// Prefix caching (paged only, prefix_cache.h): the blocks a request has computed stay cached
// by their tokens, hash-keyed (vLLM) or in a radix tree (SGLang), and a request admitted later
// takes the longest cached prefix of its prompt instead of computing it (a system prompt,
// few-shot examples, a chat's earlier turns, its own tokens after a preemption); cached blocks
// that no request holds are evicted, least recently used first, only when no block is free.
// Requests can be turns of a chat: a follow-up's prompt is the conversation so far (the turn
// it follows: that turn's whole prompt and output) and then its own tokens, and it is sent
// think_s after that turn's last token. With max_concurrency, at most that many requests are
// in flight (sent and not finished): a due request waits to be sent until one finishes
// (vLLM's benchmark's --max-concurrency; its latencies start when it is sent).
//
// Time is virtual: the clock starts at the first arrival, each step advances it by the
// step's duration, and an idle server jumps to the next arrival. A real run (engine given)
// measures each step's duration with the wall clock around its forwards, so arrivals are
// replayed against measured step times (reproducible decisions up to timing noise, and no
// idle waiting); a simulated run (engine NULL) takes the durations from a step-cost model
// and computes no tokens. A real run's forwards have at most SERVE_MAX_ROWS rows, the rows
// up to which the CPU's matmuls round every row as it rounds alone, so every request gets
// exactly the greedy tokens of running it alone, whatever the policy (test_serving).
// Tests: make build/tests/test_serving && ./build/tests/test_serving
#pragma once

#include "common.h"
#include "model.h"
#include "paged.h"
#include "prefix_cache.h"

#define SERVE_MAX_ROWS 16 // kernels.c's MATVEC_MAX_ROWS

typedef enum { POLICY_STATIC, POLICY_CONTINUOUS, POLICY_CHUNKED, POLICY_COUNT } Policy;
typedef enum { CACHE_RESERVE, CACHE_PAGED, CACHE_COUNT } CacheKind;
extern const char *const POLICY_NAMES[POLICY_COUNT]; // static, continuous, chunked
extern const char *const CACHE_NAMES[CACHE_COUNT];   // reserve, paged

typedef struct {
    double arrival_s;           // when it is due (a follow-up: unused)
    int prompt_len, output_len; // its own prompt tokens; output_len >= 1 tokens are generated, no stop token
    int prefix_len;             // its first prefix_len prompt tokens are shared with other requests (what the
                                // workload put there, for the estimates; the scheduler finds shared prefixes itself)
    const int *prompt;          // (prompt_len)
    int follows;                // -1, or the earlier request (a chat's previous turn) whose prompt and output
                                // come before this prompt
    double think_s;             // a follow-up: sent this long after the turn it follows ends
} Request;

typedef struct {
    Policy policy;
    CacheKind cache;
    PrefixCacheKind prefix_cache; // paged only
    int max_concurrency;          // requests in flight at most (0: no limit)
    int max_batch;      // sequences running at once
    int token_budget;   // rows of one forward (a real run: <= SERVE_MAX_ROWS)
    int block_size;     // paged
    int kv_tokens;      // KV memory in positions: kv_tokens / block_size blocks, or / reserve_len caches
    int reserve_len;    // positions a reserved cache holds (>= every request's prompt + output)
} ServeConfig;

// A simulated step's duration: one forward of `rows` rows whose queries see `keys` cached
// positions in all.
typedef struct {
    double (*forward_s)(const void *ctx, int rows, double keys);
    const void *ctx;
} StepCost;

typedef struct {
    int *tokens;     // (output_len) the greedy tokens (0 in a simulated run); caller's memory
    double *token_s; // (output_len) when each was produced, virtual seconds; caller's memory
    int n_out;
    double sent_s;   // when it was sent (its latencies start here)
    int prompt_len;  // its whole prompt (a follow-up: with the conversation before it)
    int cached;      // prompt tokens found in the prefix cache when first admitted
    int waited;      // stayed queued through a step that did not admit it
    int preempted;   // times it was preempted
} Outcome;

typedef struct {
    double duration_s;     // first arrival to last token
    int n_steps, n_forwards, n_preemptions;
    double kv_util;        // time-weighted mean of positions stored / positions reserved
    double kv_rows_mean;   // time-weighted mean of positions reserved (KV memory held)
    int kv_rows_peak;
    long cache_queries, cache_hits; // prompt tokens looked up in the prefix cache, found (all admissions)
    long cache_evictions;
} ServeStats;

// The whole prompt of request i into dst (the conversation before it, then its own tokens),
// given the output tokens of the requests it follows (outputs[j]: request j's output_len
// tokens). Returns its length.
int request_full_prompt(const Request *reqs, int i, int *const *outputs, int *dst);
// Its length, without the outputs.
int request_full_prompt_len(const Request *reqs, int i);

// Serve the n requests (a follow-up after the turn it follows) under cfg: on the engine (its
// config's caches, CPU forwards timed) or, with engine NULL, simulated with the step-cost model. out (n): what each
// request got. 0, or -1 with err (a configuration or a request that cannot be served).
int serve_run(const ServeConfig *cfg, Engine *engine, const StepCost *cost, const Request *reqs, int n, Outcome *out,
              ServeStats *st, Error *err);
