// long_context/main.c: bin/long_context, projects 13-14: the long-context stress test.
//
//   bin/long_context --model out/models/full/target.gguf [--corpus FILE] [--out DIR] [--profile quick|full]
//                    [--real-model out/models/real/gemma-3-270m-q4_k_m.gguf]
//
// The target was trained at context T0 (its seq_len: 256 full, 128 quick); every method runs
// it further, at inference only (no fine-tune):
//   full               full attention, plain RoPE: extrapolation
//   window_half, window_quarter   sliding window of T0/2 or T0/4 positions
//   window_quarter_sink4          that window plus the first 4 positions (attention sinks),
//                      with StreamingLLM's position rule (RoPE at positions within the cache)
//   pi_S, ntk_S, yarn_S  RoPE scaled by S = 2, 4, 8 (rope.h: position interpolation,
//                      NTK-aware base, YaRN with alpha 1, beta 32, mscale 0.1 ln S + 1)
// Windowed methods run a contiguous cache with the window mask where only the function of
// the model matters (perplexity, needles: test_kvcache shows both caches give the same bits),
// and the ring cache (kvcache.h) where memory and time are measured and in the stream.
//
// Writes under --out:
//   long_context_ppl.csv     method, context_len -> nats/token, perplexity and bits/byte of
//                            held-out text: the mean over positions 1 .. T - 1 of validation
//                            sequences (a static method's prediction at position p does not
//                            depend on what follows it, so the positions < T of a longer
//                            sequence are a sequence of length T); tail_ppl over T/2 .. T - 1
//   long_context_stream.csv  method, position (a window of stream_bin positions) -> perplexity
//                            of one validation stream decoded token by token through a ring
//                            cache: window alone, + 1 sink, + 4 sinks (both position rules),
//                            and the dense sliding-window recompute as the reference
//                            (every recompute_every-th position: n_tokens says how many)
//   long_context_needle.csv  method, context_len, depth -> passkey exact match and token
//                            accuracy over held-out keys (passkey_evaluate, corpus.h); the same
//                            keys and haystacks for every method; full, the windows and the
//                            scalings at S = 4 (--all-needles: every method)
//   long_context_retrieval.csv  method, context_len -> the needle accuracy over all depths
//   long_context_summary.csv    method -> perplexity at 1, 2, 4, 8, 16 x T0, where it leaves
//                            its short-context level (LEAVE_RATIO), retrieval at 1 and 4 x T0
//                            and the longest context where half the needles are found
//   long_context_cost.csv    method, context_len -> prefill time, decode ms/token, KV rows and
//                            bytes (kv_cache_bytes, and measured from the allocator), for full
//                            attention (the scaled RoPEs cost the same) and the ring caches
//                            (sinks + window + RING_CHUNK - 1 rows: prefills go in chunks)
// and with --real-model (a published local/global hybrid, Gemma 3; CPU, whole runs only), the
// model as built, all local and all global (see "a published hybrid" below):
//   long_context_real_ppl.csv     config, context_len (64 .. real_context) -> perplexity, bits/byte
//   long_context_real_cost.csv    config -> KV bytes (formula, allocator) and decode ms/token at
//                                 real_context (8K; quick 256)
//   long_context_real_needle.csv  config, context_len (2K, 8K; quick 128, 256), depth -> passkey
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"
#include "checkpoint.h"
#include "corpus.h"
#include "lab.h"
#include "session.h"
#include "tokenizer.h"

// ---- the methods -------------------------------------------------------------------------------

typedef struct {
    const char *name;
    int window_div; // window = T0 / window_div; 0: full attention
    int n_sink;
    int cache_positions;
    const char *rope; // scaling name
    double factor;
    int needles;      // in the needle sweep without --all-needles
} Method;

// A needle costs a prefill of its whole context, and at 4 T0 full attention's quadratic term
// dominates: the default sweep scores the scalings at S = 4 only (made for 4 T0).
static const Method METHODS[] = {
    {.name = "full",                 .window_div = 0, .n_sink = 0, .cache_positions = 0, .rope = "none",   .factor = 1, .needles = 1},
    {.name = "window_half",          .window_div = 2, .n_sink = 0, .cache_positions = 0, .rope = "none",   .factor = 1, .needles = 1},
    {.name = "window_quarter",       .window_div = 4, .n_sink = 0, .cache_positions = 0, .rope = "none",   .factor = 1, .needles = 1},
    {.name = "window_quarter_sink4", .window_div = 4, .n_sink = 4, .cache_positions = 1, .rope = "none",   .factor = 1, .needles = 1},
    {.name = "pi_2",                 .window_div = 0, .n_sink = 0, .cache_positions = 0, .rope = "linear", .factor = 2, .needles = 0},
    {.name = "pi_4",                 .window_div = 0, .n_sink = 0, .cache_positions = 0, .rope = "linear", .factor = 4, .needles = 1},
    {.name = "pi_8",                 .window_div = 0, .n_sink = 0, .cache_positions = 0, .rope = "linear", .factor = 8, .needles = 0},
    {.name = "ntk_2",                .window_div = 0, .n_sink = 0, .cache_positions = 0, .rope = "ntk",    .factor = 2, .needles = 0},
    {.name = "ntk_4",                .window_div = 0, .n_sink = 0, .cache_positions = 0, .rope = "ntk",    .factor = 4, .needles = 1},
    {.name = "ntk_8",                .window_div = 0, .n_sink = 0, .cache_positions = 0, .rope = "ntk",    .factor = 8, .needles = 0},
    {.name = "yarn_2",               .window_div = 0, .n_sink = 0, .cache_positions = 0, .rope = "yarn",   .factor = 2, .needles = 0},
    {.name = "yarn_4",               .window_div = 0, .n_sink = 0, .cache_positions = 0, .rope = "yarn",   .factor = 4, .needles = 1},
    {.name = "yarn_8",               .window_div = 0, .n_sink = 0, .cache_positions = 0, .rope = "yarn",   .factor = 8, .needles = 0},
};
enum { N_METHODS = sizeof METHODS / sizeof METHODS[0], N_COST_METHODS = 4 }; // cost: the first four

// The target run by method m: a copy of its config over the same weights (never freed).
static Model method_model(const Model *target, const Method *m, int T0, int max_context) {
    Model x = *target;
    Config *c = &x.config;
    Error err;
    c->window = m->window_div ? T0 / m->window_div : 0;
    c->n_sink = m->n_sink;
    c->cache_positions = m->cache_positions;
    if (rope_override(&c->rope, m->rope, m->factor, T0, &err)) die("long_context: %s: %s", m->name, err.msg);
    c->seq_len = max_context;
    return x;
}

// ---- sizes -----------------------------------------------------------------------------------

typedef struct {
    int ppl_long, ppl_short;  // validation sequences of 16 T0 and of 2 T0 tokens per method
    int needle_keys;          // held-out keys per (method, context, depth)
    int needle_max_mult;      // needle contexts T0/2 .. needle_max_mult * T0
    int stream_tokens, stream_bin, recompute_every;
    int cost_reps, cost_decode; // repetitions; decode steps timed after each prefill
    int real_context;           // --real-model: perplexity up to this context, decode timed there
    int real_needles[2];        // --real-model: the needle contexts
    int real_decode;            // --real-model: decode steps timed at real_context
} Sizes;

static const Sizes FULL = {
    .ppl_long = 1, .ppl_short = 8,
    .needle_keys = 20, .needle_max_mult = 4,
    .stream_tokens = 16384, .stream_bin = 512, .recompute_every = 64,
    .cost_reps = 3, .cost_decode = 8,
    .real_context = 8192, .real_needles = {2048, 8192}, .real_decode = 16,
};
static const Sizes QUICK = {
    .ppl_long = 1, .ppl_short = 2,
    .needle_keys = 4, .needle_max_mult = 4,
    .stream_tokens = 2048, .stream_bin = 256, .recompute_every = 32,
    .cost_reps = 1, .cost_decode = 4,
    .real_context = 256, .real_needles = {128, 256}, .real_decode = 4,
};

enum { N_DEPTHS = 5, MAX_CONTEXTS = 16 };
#define PASSKEY_SEED 0x10c0
#define RING_CHUNK 64 // positions per prefill forward into a ring cache (its rows: sinks + window + 63)

typedef struct {
    const Sizes *sz;
    Model target;
    Tokenizer tok;
    Corpus corpus;
    int *val;      // the validation text as tokens, without BOS
    size_t n_val;
    int T0;        // training context
    int contexts[MAX_CONTEXTS], n_contexts; // 64, 128, ... 16 T0
    int needle_contexts[MAX_CONTEXTS], n_needle_contexts; // T0 / 2 .. needle_max_mult T0 (a passkey fits)
    int all_needles; // --all-needles: every method in the needle sweep
    double ppl[N_METHODS][MAX_CONTEXTS], needle[N_METHODS][MAX_CONTEXTS]; // for the summary
} LongContextRun;

static int in_needle_sweep(const LongContextRun *lab, int method) {
    return lab->all_needles || METHODS[method].needles;
}

static double token_bytes(const LongContextRun *lab, int token) { return lab->tok.piece_len[token]; }

// -log softmax(logits)[target]
static double nats_of(const float *logits, int V, int target) {
    double max = logits[0], sum = 0.0;
    for (int i = 1; i < V; i++) max = logits[i] > max ? logits[i] : max;
    for (int i = 0; i < V; i++) sum += exp((double)logits[i] - max);
    return log(sum) + max - logits[target];
}

// ---- perplexity against context -------------------------------------------------------------

// Loss per position summed over sequences of one length: nats[p], bytes[p] for the token at p.
typedef struct {
    int len, n_seq;
    double *nats, *bytes;
} PositionLoss;

// n_seq validation sequences of len tokens (BOS + text), starting at text token *next and
// following one another; every position's loss summed into pl.
static PositionLoss score_sequences(LongContextRun *lab, const Model *m, int n_seq, int len, size_t *next) {
    PositionLoss pl = {len, n_seq, calloc(len, sizeof(double)), calloc(len, sizeof(double))};
    if (!pl.nats || !pl.bytes) die("long_context: out of memory");
    int V = m->config.vocab_size, *seq = mallocCheck((size_t)len * sizeof(int));
    float *logits = mallocCheck((size_t)len * V * sizeof(float)); // (len, V)
    Engine e;
    Session s;
    Error err;
    engine_open(&e, m, ops_cpu(), DTYPE_F32, 512, len);
    session_open(&s, &e, len);
    for (int i = 0; i < n_seq; i++) {
        if (*next + len - 1 > lab->n_val)
            die("long_context: the validation text (%zu tokens) is too short for the perplexity sequences", lab->n_val);
        seq[0] = lab->tok.bos_id;
        memcpy(seq + 1, lab->val + *next, (size_t)(len - 1) * sizeof(int));
        *next += len - 1;
        session_truncate(&s, 0);
        if (session_prefill(&s, seq, len, logits, &err)) die("long_context: %s", err.msg);
        for (int p = 1; p < len; p++) {
            pl.nats[p] += nats_of(logits + (size_t)(p - 1) * V, V, seq[p]);
            pl.bytes[p] += token_bytes(lab, seq[p]);
        }
    }
    session_close(&s);
    engine_close(&e);
    free(logits);
    free(seq);
    return pl;
}

// Positions lo .. hi - 1 of every group at least hi long: nats and bytes.
static void pool(const PositionLoss *groups, int n_groups, int lo, int hi, double *nats, double *bytes,
                 double *tokens) {
    *nats = *bytes = *tokens = 0.0;
    for (int g = 0; g < n_groups; g++) {
        if (groups[g].len < hi) continue;
        for (int p = lo; p < hi; p++) {
            *nats += groups[g].nats[p];
            *bytes += groups[g].bytes[p];
        }
        *tokens += (double)groups[g].n_seq * (hi - lo);
    }
}

static void run_perplexity(LongContextRun *lab, CsvWriter *w) {
    for (int mi = 0; mi < N_METHODS; mi++) {
        const Method *me = &METHODS[mi];
        int longest = lab->contexts[lab->n_contexts - 1];
        progress_step(mi, N_METHODS, "long_context perplexity: %s", me->name);
        Model m = method_model(&lab->target, me, lab->T0, longest);
        size_t next = 0; // every method reads the same sequences
        PositionLoss groups[2] = {score_sequences(lab, &m, lab->sz->ppl_long, longest, &next),
                                  score_sequences(lab, &m, lab->sz->ppl_short, 2 * lab->T0, &next)};
        for (int i = 0; i < lab->n_contexts; i++) {
            int T = lab->contexts[i];
            double nats, bytes, tokens, tail_nats, tail_bytes, tail_tokens;
            pool(groups, 2, 1, T, &nats, &bytes, &tokens);
            pool(groups, 2, T / 2, T, &tail_nats, &tail_bytes, &tail_tokens);
            lab->ppl[mi][i] = exp(nats / tokens);
            csv_row(w, "%s,%d,%d,%d,%s,%.6g,%.6g,%.6g,%.6g,%.6g,%.6g,%.6g", me->name, T, m.config.window,
                    m.config.n_sink, me->rope, me->factor, T / (double)lab->T0, tokens, nats / tokens,
                    lab->ppl[mi][i], nats / M_LN2 / bytes, exp(tail_nats / tail_tokens));
        }
        for (int g = 0; g < 2; g++) {
            free(groups[g].nats);
            free(groups[g].bytes);
        }
    }
}

// ---- the StreamingLLM stream -------------------------------------------------------------------

typedef struct {
    const char *name;
    int n_sink, cache_positions, recompute;
} StreamMethod;

static const StreamMethod STREAM_METHODS[] = {
    {"window", 0, 0, 0},          {"window_sink1", 1, 1, 0}, {"window_sink4", 4, 1, 0},
    {"window_sink4_text_positions", 4, 0, 0}, {"recompute", 0, 0, 1},
};
enum { N_STREAM = sizeof STREAM_METHODS / sizeof STREAM_METHODS[0] };

// Per-bin sums of a stream's losses.
typedef struct {
    double *nats, *tokens;
} Bins;

// Token by token through a ring cache: position p's logits predict token p + 1.
static void stream_ring(LongContextRun *lab, const Model *m, const int *stream, int n, Bins *b) {
    int V = m->config.vocab_size, bin = lab->sz->stream_bin;
    Engine e;
    Session s;
    Error err;
    engine_open(&e, m, ops_cpu(), DTYPE_F32, 1, m->config.n_sink + m->config.window);
    session_open_ring(&s, &e, 1);
    for (int p = 0; p + 1 < n; p++) {
        if (session_decode(&s, stream[p], &err)) die("long_context: stream: %s", err.msg);
        b->nats[(p + 1) / bin] += nats_of(s.logits, V, stream[p + 1]);
        b->tokens[(p + 1) / bin] += 1;
        if (p % 1024 == 0) progress("long_context stream: %d / %d", p, n);
    }
    session_close(&s);
    engine_close(&e);
}

// The dense reference: the last `window` tokens recomputed from nothing (they sit at
// positions 0 .. window - 1) for every recompute_every-th prediction.
static void stream_recompute(LongContextRun *lab, const Model *m, const int *stream, int n, Bins *b) {
    int V = m->config.vocab_size, bin = lab->sz->stream_bin, w = m->config.window;
    Model dense = *m;
    dense.config.window = 0; // the recomputed context is the window itself
    Engine e;
    Session s;
    Error err;
    engine_open(&e, &dense, ops_cpu(), DTYPE_F32, w, w);
    session_open(&s, &e, w);
    for (int p = 0; p + 1 < n; p += lab->sz->recompute_every) {
        int from = p + 1 > w ? p + 1 - w : 0;
        session_truncate(&s, 0);
        if (session_prefill(&s, stream + from, p + 1 - from, NULL, &err)) die("long_context: recompute: %s", err.msg);
        b->nats[(p + 1) / bin] += nats_of(s.logits, V, stream[p + 1]);
        b->tokens[(p + 1) / bin] += 1;
    }
    session_close(&s);
    engine_close(&e);
}

static void run_stream(LongContextRun *lab, CsvWriter *w) {
    int n = lab->sz->stream_tokens, bin = lab->sz->stream_bin, n_bins = (n + bin - 1) / bin;
    if ((size_t)n > lab->n_val + 1) die("long_context: the validation text has %zu tokens, the stream needs %d", lab->n_val, n);
    int *stream = mallocCheck((size_t)n * sizeof(int));
    stream[0] = lab->tok.bos_id;
    memcpy(stream + 1, lab->val, (size_t)(n - 1) * sizeof(int));
    for (int k = 0; k < N_STREAM; k++) {
        const StreamMethod *sm = &STREAM_METHODS[k];
        progress_step(k, N_STREAM, "long_context stream: %s", sm->name);
        Model m = lab->target;
        m.config.window = lab->T0 / 2;
        m.config.n_sink = sm->n_sink;
        m.config.cache_positions = sm->cache_positions;
        Bins b = {calloc(n_bins, sizeof(double)), calloc(n_bins, sizeof(double))};
        if (!b.nats || !b.tokens) die("long_context: out of memory");
        if (sm->recompute) stream_recompute(lab, &m, stream, n, &b);
        else stream_ring(lab, &m, stream, n, &b);
        for (int i = 0; i < n_bins; i++)
            if (b.tokens[i] > 0)
                csv_row(w, "%s,%d,%d,%d,%d,%.6g,%.6g,%.6g", sm->name, i * bin, m.config.window, sm->n_sink,
                        sm->cache_positions, b.tokens[i], b.nats[i] / b.tokens[i], exp(b.nats[i] / b.tokens[i]));
        free(b.nats);
        free(b.tokens);
    }
    free(stream);
}

// ---- needles in a haystack ----------------------------------------------------------------------

// The sweep's items are its (method, context) cells, in this order; under --shard the run
// measures only its own (lab_shard_owns), which is what a job array splits.
static void run_needles(LongContextRun *lab, const LabRun *r, CsvWriter *cells, CsvWriter *summary) {
    const int *contexts = lab->needle_contexts, n = lab->n_needle_contexts;
    int n_items = 0, item = 0;
    for (int mi = 0; mi < N_METHODS; mi++) n_items += in_needle_sweep(lab, mi) ? n : 0;
    for (int mi = 0; mi < N_METHODS; mi++) {
        if (!in_needle_sweep(lab, mi)) continue;
        const Method *me = &METHODS[mi];
        Model m = method_model(&lab->target, me, lab->T0, contexts[n - 1]);
        for (int i = 0; i < n; i++) {
            if (!lab_shard_owns(r, item++, n_items)) continue;
            progress_step(mi * n + i, N_METHODS * n, "long_context needles: %s at %d", me->name, contexts[i]);
            double sum = 0.0, worst = 1.0;
            for (int d = 0; d < N_DEPTHS; d++) {
                float depth = (float)d / (N_DEPTHS - 1);
                PasskeyScore score;
                Error err;
                // the same keys and haystacks for every method
                if (passkey_evaluate(&m, &lab->tok, lab->val, lab->n_val, contexts[i], depth, lab->sz->needle_keys,
                                     PASSKEY_SEED + 100 * (uint64_t)contexts[i] + d, &score, &err))
                    die("long_context: needles: %s", err.msg);
                csv_row(cells, "%s,%d,%d,%.6g,%d,%.6g,%.6g", me->name, contexts[i], 25 * d,
                        contexts[i] / (double)lab->T0, lab->sz->needle_keys, score.exact, score.tokens);
                sum += score.exact;
                worst = score.exact < worst ? score.exact : worst;
            }
            lab->needle[mi][i] = sum / N_DEPTHS;
            csv_row(summary, "%s,%d,%.6g,%d,%.6g,%.6g", me->name, contexts[i], contexts[i] / (double)lab->T0,
                    N_DEPTHS * lab->sz->needle_keys, lab->needle[mi][i], worst);
        }
    }
}

// ---- latency and memory -----------------------------------------------------------------------

// Bytes the allocator hands out for the cache a session of this method opens.
static size_t allocated_cache_bytes(const Config *c, int capacity) {
    const Ops *ops = ops_cpu();
    KVCache cache;
    size_t before = ops->allocated_bytes();
    if (c->window) kv_cache_alloc_ring(&cache, ops, c->n_layers, c->n_kv_heads, c->head_dim, c->n_sink, c->window,
                                       RING_CHUNK);
    else kv_cache_alloc(&cache, ops, c->n_layers, c->n_kv_heads, c->head_dim, capacity);
    size_t bytes = ops->allocated_bytes() - before;
    kv_cache_free(&cache);
    return bytes;
}

// Prefill T tokens (timed), then decode cost_decode more (each timed), reps times; a row
// of w (NULL: a warm-up).
static void measure_cost(LongContextRun *lab, const Method *me, int T, const int *tokens, CsvWriter *w) {
    const Sizes *sz = lab->sz;
    Model m = method_model(&lab->target, me, lab->T0, T + sz->cost_decode);
    const Config *c = &m.config;
    int capacity = T + sz->cost_decode;
    Engine e;
    Session s;
    Error err;
    engine_open(&e, &m, ops_cpu(), DTYPE_F32, c->window ? RING_CHUNK : 512,
                c->window ? c->n_sink + c->window + RING_CHUNK - 1 : capacity);
    double *prefill = mallocCheck(sz->cost_reps * sizeof(double));
    double *decode = mallocCheck((size_t)sz->cost_reps * sz->cost_decode * sizeof(double));
    size_t cache_bytes = 0;
    int cache_rows = 0;
    for (int rep = 0; rep < sz->cost_reps; rep++) {
        if (c->window) session_open_ring(&s, &e, RING_CHUNK);
        else session_open(&s, &e, capacity);
        cache_bytes = kv_cache_bytes(&s.cache);
        cache_rows = s.cache.capacity;
        double t0 = now_seconds();
        if (session_prefill(&s, tokens, T, NULL, &err)) die("long_context: cost: %s", err.msg);
        prefill[rep] = 1e3 * (now_seconds() - t0);
        for (int i = 0; i < sz->cost_decode; i++) {
            t0 = now_seconds();
            if (session_decode(&s, tokens[T + i], &err)) die("long_context: cost: %s", err.msg);
            decode[(size_t)rep * sz->cost_decode + i] = 1e3 * (now_seconds() - t0);
        }
        session_close(&s);
    }
    BenchStats pre = bench_stats(prefill, sz->cost_reps), dec = bench_stats(decode, sz->cost_reps * sz->cost_decode);
    if (w)
        csv_row(w, "%s,%d,%.6g,%d,%d,%s,%.6g,%.6g,%.6g,%.6g,%.6g,%.6g,%d,%d,%d,%zu,%zu", me->name, T,
                T / (double)lab->T0, c->window, c->n_sink, c->window ? "ring" : "contiguous", pre.median_ms, pre.p10_ms,
                pre.p90_ms, dec.median_ms, dec.p10_ms, dec.p90_ms, sz->cost_reps, sz->cost_decode, cache_rows,
                cache_bytes, allocated_cache_bytes(c, capacity));
    free(prefill);
    free(decode);
    engine_close(&e);
}

static void run_cost(LongContextRun *lab, CsvWriter *w) {
    int longest = lab->contexts[lab->n_contexts - 1], n = longest + lab->sz->cost_decode;
    int *tokens = mallocCheck((size_t)n * sizeof(int));
    tokens[0] = lab->tok.bos_id;
    memcpy(tokens + 1, lab->val, (size_t)(n - 1) * sizeof(int));
    measure_cost(lab, &METHODS[0], lab->contexts[0], tokens, NULL); // warm-up: caches, thread pool, pages
    for (int mi = 0; mi < N_COST_METHODS; mi++)
        for (int i = 0; i < lab->n_contexts; i++) {
            progress_step(mi * lab->n_contexts + i, N_COST_METHODS * lab->n_contexts, "long_context cost: %s at %d",
                          METHODS[mi].name, lab->contexts[i]);
            measure_cost(lab, &METHODS[mi], lab->contexts[i], tokens, w);
        }
    free(tokens);
}

// ---- the findings ------------------------------------------------------------------------------

// The value at context mult * T0 of a method's row over contexts, or NAN when not swept.
static double at_mult(const double *values, const int *contexts, int n, int T0, int mult) {
    for (int i = 0; i < n; i++)
        if (contexts[i] == mult * T0) return values[i];
    return NAN;
}

// Per method: perplexity at 1, 2, 4, 8 and 16 x T0; the first context beyond T0 where it
// exceeds LEAVE_RATIO x its best at contexts up to T0 (0: never in the sweep); retrieval at 1
// and 4 x T0, and the longest context where at least half the needles are found (0: none).
#define LEAVE_RATIO 1.1
#define RETRIEVED 0.5

static void write_summary(const LongContextRun *lab, CsvWriter *w) {
    for (int mi = 0; mi < N_METHODS; mi++) {
        const double *ppl = lab->ppl[mi];
        double best = INFINITY;
        int leaves = 0, retrieved = 0;
        for (int i = 0; i < lab->n_contexts && lab->contexts[i] <= lab->T0; i++) best = ppl[i] < best ? ppl[i] : best;
        for (int i = 0; i < lab->n_contexts && !leaves; i++)
            if (lab->contexts[i] > lab->T0 && ppl[i] > LEAVE_RATIO * best) leaves = lab->contexts[i];
        for (int i = 0; i < lab->n_needle_contexts; i++)
            if (lab->needle[mi][i] >= RETRIEVED) retrieved = lab->needle_contexts[i];
        char needles[96] = ",,"; // empty cells: not in the needle sweep
        if (in_needle_sweep(lab, mi))
            snprintf(needles, sizeof needles, "%.6g,%.6g,%d",
                     at_mult(lab->needle[mi], lab->needle_contexts, lab->n_needle_contexts, lab->T0, 1),
                     at_mult(lab->needle[mi], lab->needle_contexts, lab->n_needle_contexts, lab->T0, 4), retrieved);
        csv_row(w, "%s,%.6g,%.6g,%.6g,%.6g,%.6g,%.6g,%d,%s", METHODS[mi].name, best,
                at_mult(ppl, lab->contexts, lab->n_contexts, lab->T0, 1),
                at_mult(ppl, lab->contexts, lab->n_contexts, lab->T0, 2),
                at_mult(ppl, lab->contexts, lab->n_contexts, lab->T0, 4),
                at_mult(ppl, lab->contexts, lab->n_contexts, lab->T0, 8),
                at_mult(ppl, lab->contexts, lab->n_contexts, lab->T0, 16), leaves, needles);
    }
}

// ---- a published hybrid (--real-model) ---------------------------------------------------------
//
// Gemma 3 270M's layers are five local (a window of 512 positions, RoPE base 10 000) to one
// global (the whole context, base 1e6): character.ai's hybrid in a published model. The same
// weights run three ways, at inference only:
//   hybrid      as built: the local layers' caches stop at their window, the global ones grow
//   all_local   every layer windowed (Config.global_windowed; the global layers keep their base)
//   all_global  every layer full causal attention (window 0; the local layers keep their base)
// Each scores one held-out sequence of real_context tokens (perplexity at 512 .. real_context:
// position p's prediction depends on nothing after p, so the first T positions are a sequence of
// length T), in chunks so that the logits of a 262k vocabulary fit; then decodes real_decode
// tokens at that depth, each timed, through the cache the configuration deploys with (hybrid:
// rings for the local layers; all_local: a ring for every layer; all_global: contiguous); and
// retrieves passkeys at two contexts and three depths (the same keys and haystacks for all three).

enum { N_HYBRID = 3, REAL_DEPTHS = 3, MAX_REAL_CONTEXTS = 5 };
static const char *const HYBRID_CONFIGS[N_HYBRID] = {"hybrid", "all_local", "all_global"};
#define REAL_CHUNK 256   // positions per forward while scoring: (256, V) logits
#define REAL_MIN_CONTEXT 64

typedef struct {
    Model model;
    Tokenizer tok;
    int *val; // the validation text in the model's tokens, without BOS
    size_t n_val;
    char name[128]; // the file name less its extension, as real_models.csv names models
} RealHybrid;

static Model hybrid_variant(const Model *real, int variant) {
    Model x = *real;
    if (variant == 1) x.config.global_windowed = 1;
    if (variant == 2) x.config.window = 0;
    return x;
}

static const char *variant_cache(int variant) { return variant == 0 ? "hybrid" : variant == 1 ? "ring" : "contiguous"; }

static void open_variant_session(Session *s, Engine *e, int variant, int capacity) {
    if (variant == 1) session_open_ring(s, e, REAL_CHUNK);
    else session_open(s, e, capacity); // hybrid: rings for the local layers; all_global: contiguous
}

// Keys and values held at context T, by formula: a windowed layer keeps n_sink + window rows
// (once T passes them), a full-attention layer T (fp32).
static size_t kv_bytes_held(const Config *c, int T) {
    size_t bytes = 0;
    for (int l = 0; l < c->n_layers; l++) {
        LayerAttention la = config_layer_attention(c, l);
        int rows = la.window && la.n_sink + la.window < T ? la.n_sink + la.window : T;
        bytes += (size_t)rows * config_kv_row(c) * sizeof(float);
    }
    return bytes;
}

// The --real-model file, loaded and checked before anything is measured.
static void load_real(RealHybrid *rh, const char *path, const Corpus *corpus, const Sizes *sz) {
    Error err;
    if (checkpoint_load(path, NULL, &rh->model, &rh->tok, &err)) die("long_context: --real-model: %s", err.msg);
    if (path_stem(rh->name, sizeof rh->name, path, &err)) die("long_context: --real-model: %s", err.msg);
    const Config *c = &rh->model.config;
    if (!config_has_local_layers(c) || c->kv_share != 1 || c->kv_lora_rank)
        die("long_context: --real-model %s has no local and global layers (give a hybrid such as Gemma 3)", path);
    if (c->seq_len < sz->real_context + sz->real_decode)
        die("long_context: --real-model %s: its context of %d is below the %d positions measured", path, c->seq_len,
            sz->real_context + sz->real_decode);
    rh->val = mallocCheck(tokenizer_max_tokens(corpus->val_len) * sizeof(int));
    rh->n_val = tokenizer_encode(&rh->tok, (const unsigned char *)corpus->val, corpus->val_len, false, false, rh->val);
    if (rh->n_val + 1 < (size_t)(sz->real_context + sz->real_decode))
        die("long_context: --real-model: the validation text is %zu tokens, below the %d measured", rh->n_val,
            sz->real_context + sz->real_decode);
    for (int i = 0; i < 2; i++)
        if (sz->real_needles[i] < passkey_min_len(&rh->tok))
            die("long_context: --real-model: a passkey needs %d tokens, more than %d", passkey_min_len(&rh->tok),
                sz->real_needles[i]);
}

static void free_real(RealHybrid *rh) {
    free(rh->val);
    tokenizer_free(&rh->tok);
    model_free(&rh->model);
}

// One configuration's perplexity rows (every context up to real_context) and its cost row.
static void measure_variant(const RealHybrid *rh, const Sizes *sz, int variant, CsvWriter *ppl, CsvWriter *cost) {
    Model m = hybrid_variant(&rh->model, variant);
    const Config *c = &m.config;
    int T = sz->real_context, steps = sz->real_decode, V = c->vocab_size, n = T + steps;
    int *seq = mallocCheck((size_t)n * sizeof(int));
    seq[0] = rh->tok.bos_id;
    memcpy(seq + 1, rh->val, (size_t)(n - 1) * sizeof(int));
    double *nats = calloc(T, sizeof(double)), *bytes = calloc(T, sizeof(double));
    double *step_ms = mallocCheck((size_t)steps * sizeof(double));
    float *logits = mallocCheck((size_t)REAL_CHUNK * V * sizeof(float)); // (REAL_CHUNK, V)
    if (!nats || !bytes) die("long_context: out of memory");
    Engine e;
    Session s;
    Error err;
    int ring_rows = c->n_sink + c->window + REAL_CHUNK - 1;
    engine_open(&e, &m, ops_cpu(), DTYPE_F32, REAL_CHUNK, n > ring_rows ? n : ring_rows);
    open_variant_session(&s, &e, variant, n);
    for (int done = 0; done < T; done += REAL_CHUNK) {
        int R = T - done < REAL_CHUNK ? T - done : REAL_CHUNK;
        if (session_prefill(&s, seq + done, R, logits, &err)) die("long_context: %s: %s", rh->name, err.msg);
#pragma omp parallel for
        for (int r = 0; r < R; r++) { // row r predicts the token at done + r + 1
            int p = done + r + 1;
            if (p >= T) continue;
            nats[p] = nats_of(logits + (size_t)r * V, V, seq[p]);
            bytes[p] = rh->tok.piece_len[seq[p]];
        }
    }
    for (int i = 0; i < steps; i++) {
        double t0 = now_seconds();
        if (session_decode(&s, seq[T + i], &err)) die("long_context: %s: %s", rh->name, err.msg);
        step_ms[i] = 1e3 * (now_seconds() - t0);
    }
    int contexts[MAX_REAL_CONTEXTS], n_contexts = 0;
    for (int Tc = T; Tc >= REAL_MIN_CONTEXT && n_contexts < MAX_REAL_CONTEXTS; Tc /= 2) contexts[n_contexts++] = Tc;
    for (int i = n_contexts - 1; i >= 0; i--) {
        int Tc = contexts[i];
        double sum = 0.0, sum_bytes = 0.0, tail = 0.0;
        for (int p = 1; p < Tc; p++) sum += nats[p], sum_bytes += bytes[p], tail += p >= Tc / 2 ? nats[p] : 0.0;
        csv_row(ppl, "%s,%s,%d,%d,%d,%d,%.6g,%.6g,%.6g,%.6g", rh->name, HYBRID_CONFIGS[variant], Tc, c->window,
                config_full_attention_layers(c), Tc - 1, sum / (Tc - 1), exp(sum / (Tc - 1)), sum / M_LN2 / sum_bytes,
                exp(tail / (Tc - Tc / 2)));
    }
    BenchStats st = bench_stats(step_ms, steps);
    csv_row(cost, "%s,%s,%d,%s,%d,%d,%zu,%zu,%.6g,%.6g,%.6g,%d", rh->name, HYBRID_CONFIGS[variant], T,
            variant_cache(variant), c->window, config_full_attention_layers(c), kv_bytes_held(c, T), kv_cache_bytes(&s.cache),
            st.median_ms, st.p10_ms, st.p90_ms, steps);
    session_close(&s);
    engine_close(&e);
    free(seq), free(nats), free(bytes), free(step_ms), free(logits);
}

static void run_real_needles(RealHybrid *rh, const Sizes *sz, CsvWriter *w) {
    for (int v = 0; v < N_HYBRID; v++) {
        Model m = hybrid_variant(&rh->model, v);
        for (int i = 0; i < 2; i++) {
            int ctx = sz->real_needles[i];
            for (int d = 0; d < REAL_DEPTHS; d++) {
                progress_step((v * 2 + i) * REAL_DEPTHS + d, N_HYBRID * 2 * REAL_DEPTHS,
                              "long_context %s needles: %s at %d", rh->name, HYBRID_CONFIGS[v], ctx);
                float depth = (float)d / (REAL_DEPTHS - 1);
                PasskeyScore score;
                Error err;
                if (passkey_evaluate(&m, &rh->tok, rh->val, rh->n_val, ctx, depth, 1,
                                     PASSKEY_SEED + 100 * (uint64_t)ctx + d, &score, &err))
                    die("long_context: %s needles: %s", rh->name, err.msg);
                csv_row(w, "%s,%s,%d,%d,%d,%.6g,%.6g", rh->name, HYBRID_CONFIGS[v], ctx, 50 * d, 1, score.exact,
                        score.tokens);
            }
        }
    }
}

// ---- the program -------------------------------------------------------------------------------

static const char *model_path, *tokenizer_path, *corpus_path, *real_model_path;
static int all_needles;

static const LabOption OPTIONS[] = {
    LAB_CHECKPOINT_OPTIONS(model_path, tokenizer_path),
    {.name = "corpus", .kind = LAB_TEXT, .value = &corpus_path, .arg = "FILE",
     .help = "the models' training text, for its held-out split (default $CORPUS, else the KJV)"},
    {.name = "all-needles", .kind = LAB_FLAG, .value = &all_needles,
     .help = "needles for every method, not only full, the windows and the scalings at S = 4 (about 2x longer)"},
    {.name = "real-model", .kind = LAB_TEXT, .value = &real_model_path, .arg = "FILE",
     .help = "a published local/global hybrid (Gemma 3) run as built, all local and all global (CPU)"},
    {0},
};

enum {
    TABLE_PPL, TABLE_STREAM, TABLE_NEEDLE, TABLE_RETRIEVAL, TABLE_SUMMARY, TABLE_COST,
    TABLE_REAL_PPL, TABLE_REAL_COST, TABLE_REAL_NEEDLE
};
static const LabTable TABLES[] = {
    {"long_context_ppl",
     "method,context_len,window,n_sink,rope_scaling,rope_factor,context_mult,n_tokens,nats_per_token,ppl,"
     "bits_per_byte,tail_ppl",
     "method, context -> perplexity and bits/byte of held-out text", LAB_CPU},
    {"long_context_stream", "method,position,window,n_sink,cache_positions,n_tokens,nats_per_token,ppl",
     "method, window of stream positions -> perplexity of a stream decoded through a ring cache", LAB_CPU},
    {"long_context_needle", "method,context_len,depth_percent,context_mult,n_keys,exact_match,token_accuracy",
     "method, context, needle depth -> passkey retrieval", LAB_CPU | LAB_SHARDED},
    {"long_context_retrieval", "method,context_len,context_mult,n_samples,exact_match,worst_depth_exact_match",
     "method, context -> passkey retrieval over every depth", LAB_CPU | LAB_SHARDED},
    {"long_context_summary",
     "method,ppl_best_short,ppl_1x,ppl_2x,ppl_4x,ppl_8x,ppl_16x,ppl_leaves_at_context,needle_1x,needle_4x,"
     "retrieval_up_to_context",
     "method -> perplexity at 1-16 x T0, where it leaves its short-context level, retrieval", LAB_CPU},
    {"long_context_cost",
     "method,context_len,context_mult,window,n_sink,cache,prefill_ms_median,prefill_ms_p10,prefill_ms_p90,decode_ms_median,"
     "decode_ms_p10,decode_ms_p90,reps,decode_steps,kv_rows,kv_bytes,kv_bytes_allocated",
     "method, context -> prefill time, decode time per token, KV bytes", LAB_CPU},
    {"long_context_real_ppl",
     "model,config,context_len,window,full_attention_layers,n_tokens,nats_per_token,ppl,bits_per_byte,tail_ppl",
     "--real-model: hybrid / all local / all global, context -> perplexity of held-out text", LAB_CPU},
    {"long_context_real_cost",
     "model,config,context_len,cache,window,full_attention_layers,kv_bytes,kv_bytes_allocated,decode_ms_median,"
     "decode_ms_p10,decode_ms_p90,decode_steps",
     "--real-model: configuration -> KV bytes and decode time per token at the longest context", LAB_CPU},
    {"long_context_real_needle", "model,config,context_len,depth_percent,n_keys,exact_match,token_accuracy",
     "--real-model: configuration, context, needle depth -> passkey retrieval", LAB_CPU},
    {0},
};

static void load(LongContextRun *lab) {
    Error err;
    if (checkpoint_load(model_path, tokenizer_path, &lab->target, &lab->tok, &err)) die("%s", err.msg);
    const Config *c = &lab->target.config;
    if (c->window || c->rope.scaling != ROPE_NONE)
        die("long_context: %s already has a window or RoPE scaling: give the plain target", model_path);
    lab->T0 = c->seq_len;
    for (int T = 64; T <= 16 * lab->T0 && lab->n_contexts < MAX_CONTEXTS; T *= 2) lab->contexts[lab->n_contexts++] = T;
    for (int T = lab->T0 / 2; T <= lab->sz->needle_max_mult * lab->T0; T *= 2) // those a passkey fits in
        if (T >= passkey_min_len(&lab->tok)) lab->needle_contexts[lab->n_needle_contexts++] = T;
    const char *corpus = corpus_path ? corpus_path : getenv("CORPUS");
    if (corpus_load(&lab->corpus, corpus && *corpus ? corpus : NULL, &err)) die("%s", err.msg);
    lab->val = mallocCheck(tokenizer_max_tokens(lab->corpus.val_len) * sizeof(int));
    lab->n_val = tokenizer_encode(&lab->tok, (const unsigned char *)lab->corpus.val, lab->corpus.val_len, false,
                                  false, lab->val);
}

static void finish(LabRun *r, LongContextRun *lab);

// --shard K/N: only this shard's cells of the needle sweep (the tables marked sharded).
static int run_needle_shard(LabRun *r, LongContextRun *lab) {
    CsvWriter needle = lab_csv(r, TABLE_NEEDLE), retrieval = lab_csv(r, TABLE_RETRIEVAL);
    run_needles(lab, r, &needle, &retrieval);
    progress_done();
    csv_close(&needle);
    csv_close(&retrieval);
    return 0;
}

static void run_real(LabRun *r, RealHybrid *rh, const Sizes *sz) {
    CsvWriter ppl = lab_csv(r, TABLE_REAL_PPL), cost = lab_csv(r, TABLE_REAL_COST), needle = lab_csv(r, TABLE_REAL_NEEDLE);
    double t0 = now_seconds();
    for (int v = 0; v < N_HYBRID; v++) {
        progress_step(v, N_HYBRID, "long_context %s: %s at %d", rh->name, HYBRID_CONFIGS[v], sz->real_context);
        measure_variant(rh, sz, v, &ppl, &cost);
    }
    double t1 = now_seconds();
    run_real_needles(rh, sz, &needle);
    progress_done();
    fprintf(stderr, "long_context: %s: perplexity and decode %.0f s, needles %.0f s\n", rh->name, t1 - t0,
            now_seconds() - t1);
    csv_close(&ppl);
    csv_close(&cost);
    csv_close(&needle);
}

static int run(LabRun *r) {
    LongContextRun lab = {.sz = r->quick ? &QUICK : &FULL, .all_needles = all_needles};
    load(&lab);
    RealHybrid real;
    if (real_model_path) {
        if (r->n_shards) die("long_context: --real-model runs in a whole run, not in a --shard");
        if (r->backend != BACKEND_CPU) die("long_context: --real-model runs on the CPU backend");
        load_real(&real, real_model_path, &lab.corpus, lab.sz);
    }
    if (r->n_shards) {
        run_needle_shard(r, &lab);
        finish(r, &lab);
        return 0;
    }
    CsvWriter ppl = lab_csv(r, TABLE_PPL), stream = lab_csv(r, TABLE_STREAM), needle = lab_csv(r, TABLE_NEEDLE);
    CsvWriter retrieval = lab_csv(r, TABLE_RETRIEVAL), summary = lab_csv(r, TABLE_SUMMARY);
    CsvWriter cost = lab_csv(r, TABLE_COST);
    double t0 = now_seconds();
    run_perplexity(&lab, &ppl);
    double t1 = now_seconds();
    run_stream(&lab, &stream);
    double t2 = now_seconds();
    run_needles(&lab, r, &needle, &retrieval);
    write_summary(&lab, &summary);
    double t3 = now_seconds();
    run_cost(&lab, &cost);
    double t4 = now_seconds();
    progress_done();
    fprintf(stderr, "long_context: perplexity %.0f s, stream %.0f s, needles %.0f s, cost %.0f s\n", t1 - t0,
            t2 - t1, t3 - t2, t4 - t3);
    csv_close(&ppl);
    csv_close(&stream);
    csv_close(&needle);
    csv_close(&retrieval);
    csv_close(&summary);
    csv_close(&cost);
    if (real_model_path) {
        run_real(r, &real, lab.sz);
        free_real(&real);
    }
    finish(r, &lab);
    return 0;
}

// The end of a run: the keys merged into meta.csv (the model, corpus and sizes), and the lab freed.
static void finish(LabRun *r, LongContextRun *lab) {
    char sum_hex[17];
    Error err;
    if (meta_file_checksum(model_path, sum_hex, &err) != 0) die("%s", err.msg);
    lab_meta(r, "long_context_model", "%s", model_path);
    lab_meta(r, "long_context_model_fnv1a64", "%s", sum_hex);
    lab_meta(r, "long_context_train_context", "%d", lab->T0);
    lab_meta(r, "long_context_corpus", "%s", lab->corpus.source);
    lab_meta(r, "long_context_stream_tokens", "%d", lab->sz->stream_tokens);
    lab_meta(r, "long_context_stream_bin", "%d", lab->sz->stream_bin);
    lab_meta(r, "long_context_recompute_every", "%d", lab->sz->recompute_every);
    lab_meta(r, "long_context_real_model", "%s", real_model_path ? real_model_path : "none");
    free(lab->val);
    corpus_free(&lab->corpus);
    tokenizer_free(&lab->tok);
    model_free(&lab->target);
}

static const Experiment LONG_CONTEXT = {
    "long_context", "--model FILE [options]",
    "Long context at inference: full attention (extrapolation), sliding windows, attention sinks and\n"
    "RoPE scaling (PI, NTK, YaRN): perplexity against context, a StreamingLLM stream through a ring\n"
    "cache, needle-in-a-haystack retrieval, and prefill / decode time and KV bytes against context.",
    OPTIONS, TABLES, LAB_COMMON | LAB_SHARD,
    "--shard K/N splits the needle sweep's (method, context) cells into N contiguous parts, writing only\n"
    "long_context_needle and long_context_retrieval as shards; --merge-shards N joins them into the\n"
    "files one whole run writes.",
    run};

int main(int argc, char **argv) { return lab_main(&LONG_CONTEXT, argc, argv); }
