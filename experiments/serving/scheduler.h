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
// Prefix sharing (paged only): the shared system prompt's blocks are kept once the first
// request has computed them, and every later request with that prefix forks them (copy on
// write) and starts its prefill after it.
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

#define SERVE_MAX_ROWS 16 // kernels.c's MATVEC_MAX_ROWS

typedef enum { POLICY_STATIC, POLICY_CONTINUOUS, POLICY_CHUNKED, POLICY_COUNT } Policy;
typedef enum { CACHE_RESERVE, CACHE_PAGED, CACHE_COUNT } CacheKind;
extern const char *const POLICY_NAMES[POLICY_COUNT]; // static, continuous, chunked
extern const char *const CACHE_NAMES[CACHE_COUNT];   // reserve, paged

typedef struct {
    double arrival_s;
    int prompt_len, output_len; // output_len >= 1 tokens are generated, no stop token
    int prefix_len;             // its first prefix_len prompt tokens are the shared system prompt; 0: none
    const int *prompt;          // (prompt_len); unused by a simulated run
} Request;

typedef struct {
    Policy policy;
    CacheKind cache;
    int prefix_sharing; // paged only
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
    int waited;      // stayed queued through a step that did not admit it
    int preempted;   // times it was preempted
} Outcome;

typedef struct {
    double duration_s;     // first arrival to last token
    int n_steps, n_forwards, n_preemptions;
    double kv_util;        // time-weighted mean of positions stored / positions reserved
    double kv_rows_mean;   // time-weighted mean of positions reserved (KV memory held)
    int kv_rows_peak;
} ServeStats;

// Serve the n requests (in arrival order) under cfg: on the engine (its config's caches, CPU
// forwards timed) or, with engine NULL, simulated with the step-cost model. out (n): what each
// request got. 0, or -1 with err (a configuration or a request that cannot be served).
int serve_run(const ServeConfig *cfg, Engine *engine, const StepCost *cost, const Request *reqs, int n, Outcome *out,
              ServeStats *st, Error *err);
