// session.h: one sequence being run by an engine (model.h): its KV cache and the logits of
// the last position fed. Every decode loop of the lab goes through this API.
//
//   Engine e; engine_open(&e, &model, ops_cpu(), DTYPE_F32, 512, capacity);
//   Session s; session_open(&s, &e, capacity);
//   if (session_prefill(&s, prompt, n, NULL, &err)) die("%s", err.msg);   // s.logits: next token
//   int n_out = session_generate(&s, &sampler, tokens, n, 64, on_token, ctx, &err);
//   session_truncate(&s, n);                                          // roll back to the prompt
//   session_close(&s); engine_close(&e);
//
// Errors (a context that does not fit the cache, a sampler failure) return -1 with err set;
// nothing is fed then, and the session stays as it was.
#pragma once

#include "common.h"
#include "model.h"
#include "sampler.h"

typedef struct {
    Engine *engine;
    KVCache cache;
    float *logits; // host (V): the logits after the last position fed
} Session;

// A session for sequences of up to capacity positions (<= the engine's max_keys), its cache
// of the engine's kv_dtype (fp32, or int8 with per-token, per-head scales: kvcache.h).
void session_open(Session *s, Engine *e, int capacity);
// A streaming session: a ring cache (kvcache.h) for the model's window and sinks (its config
// has window > 0), fed at most `chunk` positions per forward (prefills go in such chunks), so
// it decodes past any length in n_sink + window + chunk - 1 rows (<= the engine's max_keys).
void session_open_ring(Session *s, Engine *e, int chunk);
void session_close(Session *s);
static inline int session_len(const Session *s) { return s->cache.len; }

// Feed n tokens from position session_len, in chunks of the engine's max_rows. The last
// position's logits go to s->logits; all_logits (host, (n, V)), if not NULL, gets every one.
int session_prefill(Session *s, const int *tokens, int n, float *all_logits, Error *err);
// Feed one token.
int session_decode(Session *s, int token, Error *err);
// Feed one token to each of B sessions of one engine in a single forward (a batched decode
// step); each session's logits land in its own s->logits.
int session_decode_batch(Session *const *ss, const int *tokens, int B, Error *err);
// Keep the first n positions (0 <= n <= session_len): roll back what was fed after them. The
// logits are those of whatever is fed next.
void session_truncate(Session *s, int n);

// Called with each sampled token; a non-zero return stops the generation there, that token
// not counted as generated (an end token).
typedef int (*SessionTokenFn)(void *ctx, int token);

// Sample up to n_new tokens after the n_tokens of `tokens` (the sequence so far, already fed:
// its last logits are in s->logits; the sampler's penalties read it as history). Each sampled
// token is appended to tokens (room for n_tokens + n_new), passed to on_token, then fed,
// except the last one, which is never needed. Returns the number generated, or -1.
int session_generate(Session *s, Sampler *sampler, int *tokens, int n_tokens, int n_new, SessionTokenFn on_token,
                     void *ctx, Error *err);

// Perplexity as llama.cpp's llama-perplexity computes it (tests/fixtures/real/README.md): the
// first n_chunks chunks of ctx tokens of `tokens`, each from an empty cache with its first token
// replaced by bos_id (-1: kept; the tokens are restored after), the tokens after each chunk's
// first half scored; -log softmax with the max and each exp in float and their sum in double.
// on_chunk (may be NULL) sees the running estimate after each chunk, as llama-perplexity prints
// "[1]x,[2]y,...". Logits are held 16 rows at a time, never (ctx, V). Returns the perplexity, or
// -1 with err set (s is then truncated to an unspecified length). ctx >= 2, n_chunks >= 1.
typedef void (*PerplexityChunkFn)(void *ctx, int chunk, double ppl);
double session_perplexity(Session *s, int *tokens, int ctx, int n_chunks, int bos_id, PerplexityChunkFn on_chunk,
                          void *arg, Error *err);

// The thread count of decode steps, picked by timing them. A step forks for every
// large enough kernel (kernels/cpu/parallel.h) and waits at its barrier for every thread; with
// a core taken by another process that thread is descheduled, and the barrier waits a
// scheduler time slice: the stories15M shape decoded at 144 tok/s on 2 threads beside a busy
// process, 348 on one. So an engine with a governor runs its decode steps at max_threads and,
// now and then, GOVERNOR_WINDOW steps at the other count (1, or back to max_threads); it
// switches when those took clearly less time per step than every step at its count since its
// last probe, and probes half as often each time its choice holds (every 16 steps after a
// switch, up to every 1024). The probe is compared with every step since the last probe, not
// only the latest few, because beside a busy process the slow steps come in bursts: against the
// latest 4, a probe that followed fast ones kept losing (2 of 5 runs beside `yes` stayed on 2
// threads).
#define GOVERNOR_WINDOW 4
typedef struct ThreadGovernor {
    int max_threads, threads;         // the most allowed, the count in use
    int probe_left;                   // steps of the running probe still to take at the other count
    long steps, next_probe, interval;
    double current_s;                 // the steps at `threads` since the last probe: seconds,
    long current_n;                   // and how many
    double probe_s;                   // the running probe's seconds so far
    long switches;                    // how often it changed its mind (bin/generate prints it)
} ThreadGovernor;
void thread_governor_init(ThreadGovernor *g, int max_threads);
// The thread count for the next step, then that step's time: session_decode calls both.
int thread_governor_next(ThreadGovernor *g);
void thread_governor_record(ThreadGovernor *g, double seconds);

// The no-cache baseline on the CPU: every position of tokens computed from nothing, through
// a throw-away engine and session. logits (host): (n, V) if all_logits, else (V) of the last.
void model_forward_full(const Model *m, const int *tokens, int n, float *logits, int all_logits);
