// serving/main.c: bin/serving (lecture 10): serving requests that arrive over time,
// measured the way serving engines are measured.
//
//   bin/serving --model out/models/target.gguf [--out out/<hw>] [--profile quick|full]
//               [--real-model out/models/real/smollm2-135m-instruct-q4_1.gguf]
//
// Requests (workload.h: prompts and output lengths from held-out KJV passages, half of them
// after a shared system prompt, gamma / Poisson arrivals) are served by the scheduler
// (scheduler.h) on the model, under static batching, continuous batching and continuous
// batching with chunked prefill, each over a contiguous cache reserving the model's whole
// context per request (vLLM's pre-paging policy) and over a paged cache, with and without
// automatic prefix caching (hash-keyed as vLLM's; the radix tree of SGLang beside it on
// few-shot and chat workloads). Time is virtual: arrivals are replayed against the measured duration of
// every step (a discrete-event clock, no idle waiting), so a run's latencies are those of
// this machine's forwards. Every request's tokens are checked against running it alone
// (greedy); the run stops with an error if one differs.
//
// Metrics, as vLLM's benchmark (benchmarks/serve.py) computes them (metrics.h): TTFT, TPOT,
// ITL and E2EL, each as mean, median, std, p10, p50, p90 and p99 (p10-p90 is the spread a
// report table's ± shows); request, output and total token throughput over the run (first
// arrival to last token); goodput at MLPerf's server and interactive SLOs scaled to this
// server's batch-1 decode step (set_slos); KV utilisation (positions stored / positions
// reserved, time-weighted); the prefix cache's hit rate; the fraction of requests that waited
// in the queue through a step, and that were preempted.
//
// Request rates are fractions (load_frac) of the capacity measured first: continuous
// batching over the paged cache with every request arriving at once. Past this machine the
// same scheduler runs on a step-cost model (no tokens computed): Llama-2-13B in bf16 on an
// H100 SXM and an H200 (templates/hardware.csv, model_presets.csv), each forward the
// roofline time of the hardware-budget formulas (experiments/lab/budget.h) of
// its rows and the keys they read, scaled by a bandwidth efficiency and a fixed overhead
// per step fitted to the lecture's H100 figures (batch 1: 13 ms a step, batch 64: 20 ms) at
// --calibration-context positions per sequence.
//
// Writes under --out:
//   serving_batch.csv        max_batch -> throughput and latency, every request at once
//   serving_prefix.csv       prefix_len, prefix_cache -> KV memory held, the saving and its estimate
//   serving_prefix_cache.csv workload (few-shot, chat), prefix_cache (off, hash, radix) -> hit rate, latency, memory
//   serving_calibration.csv  hardware, batch -> simulated step time and tokens/s beside the lecture's
//   serving_sim_steps.csv    hardware, batch -> simulated decode step time and tokens/s
//   serving_sim.csv          hardware, policy, cache, prefix_cache, load_frac -> the metrics (simulated)
//   serving_burstiness.csv   burstiness, load_frac -> the metrics (measured)
//   serving_concurrency.csv  max_concurrency -> the metrics (measured, closed loop)
//   serving_real_batch.csv   model, max_batch -> the metrics on the --real-model, every request at once
//   serving_real_sweep.csv   model, policy, cache, prefix_cache, load_frac (1) -> its metrics at its capacity
//   serving_sweep.csv        policy, cache, prefix_cache, load_frac -> the metrics (measured; written last)
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "budget.h"
#include "checkpoint.h"
#include "corpus.h"
#include "bench.h"
#include "lab.h"
#include "metrics.h"
#include "scheduler.h"
#include "session.h"
#include "workload.h"

#define MAX_LOADS 8
#define MAX_BATCHES 8
#define MAX_PREFIXES 8

typedef struct {
    int n_requests, passage_len, max_output, prefix_len;
    int n_loads;
    double loads[MAX_LOADS];
    int n_batches, batches[MAX_BATCHES];
    int n_prefixes, prefixes[MAX_PREFIXES];
    int shot_len, turn_len, turn_output; // prefix caching's workloads: an example set, a question or chat turn, its output
    int n_bursts;
    double bursts[MAX_LOADS];            // burstiness sweep: gamma shapes (1: Poisson)
    int n_concurrency, concurrency[MAX_BATCHES * 2]; // closed-loop sweep: requests in flight at most
    int real_requests, real_passage, real_output;   // --real-model's workload: passages, no system prompt, every
                                                    // request generating exactly real_output tokens
    int sim_requests;
} Sizes;

// The full sweep: about 60 runs of 64 requests on the full target (see the section's note).
static const Sizes FULL = {
    .n_requests = 64, .passage_len = 80, .max_output = 48, .prefix_len = 48,
    .n_loads = 5, .loads = {0.25, 0.5, 0.75, 1.0, 1.25},
    .n_batches = 5, .batches = {1, 2, 4, 8, 16},
    .n_prefixes = 4, .prefixes = {16, 32, 64, 96},
    .shot_len = 96, .turn_len = 48, .turn_output = 24,
    .n_bursts = 3, .bursts = {0.5, 1.0, 2.0},
    .n_concurrency = 7, .concurrency = {1, 2, 4, 8, 16, 32, 64},
    .real_requests = 32, .real_passage = 32, .real_output = 64,
    .sim_requests = 1000,
};
static const Sizes QUICK = {
    .n_requests = 12, .passage_len = 40, .max_output = 16, .prefix_len = 16,
    .n_loads = 3, .loads = {0.5, 1.0, 1.5},
    .n_batches = 3, .batches = {1, 4, 16},
    .n_prefixes = 2, .prefixes = {8, 16},
    .shot_len = 32, .turn_len = 24, .turn_output = 12,
    .n_bursts = 2, .bursts = {0.5, 2.0},
    .n_concurrency = 3, .concurrency = {1, 4, 16},
    .real_requests = 2, .real_passage = 8, .real_output = 2, // the path tested in seconds, not measured
    .sim_requests = 200,
};

// The real runs' scheduler: 8 sequences decode together and a forward takes 16 rows, so a
// chunked step always has room for a prompt chunk; KV memory for 4 whole contexts.
enum { MAX_BATCH = 8, TOKEN_BUDGET = SERVE_MAX_ROWS, BLOCK_SIZE = 16, KV_CONTEXTS = 4 };
// The simulated server (vLLM-like): 256 sequences, 512 rows a forward.
enum { SIM_MAX_BATCH = 256, SIM_BUDGET = 512 };
#define SHARED_FRACTION 0.5
enum { N_SHOT_SETS = 4, CHAT_TURNS = 3 };
#define CACHE_LOAD 0.75 // prefix caching's runs: requests (chat: conversations x turns) at this fraction of capacity
#define BURSTINESS 1.0 // Poisson arrivals, but in the burstiness sweep
// The lecture's Llama-2-13B on an H100: one decode step at batch 1 and at batch 64.
#define LECTURE_B1_MS 13.0
#define LECTURE_B64_MS 20.0

// The tables, in TABLES' order.
enum {
    TABLE_BATCH, TABLE_PREFIX, TABLE_PREFIX_CACHE, TABLE_CALIBRATION, TABLE_SIM_STEPS, TABLE_SIM, TABLE_BURSTINESS,
    TABLE_CONCURRENCY, TABLE_REAL_BATCH, TABLE_REAL_SWEEP, TABLE_SWEEP
};

static const char *model_path, *tokenizer_path, *corpus_path, *real_model_path;
static uint64_t seed;
static long calibration_context;

// ---- metrics ----------------------------------------------------------------------------------

// The latency percentiles every table reports: vLLM's default p50 / p90 / p99 and p10, the
// lower end of the spread a report table's ± shows.
static const double PERCENTILES[] = {10, 50, 90, 99};
enum { N_PERCENTILES = sizeof PERCENTILES / sizeof PERCENTILES[0] };
#define SUMMARY_COLUMNS(x) x "_mean," x "_median," x "_std," x "_p10," x "_p50," x "_p90," x "_p99,"
#define METRIC_COLUMNS                                                                                          \
    "rate_req_s,request_throughput_req_s,output_throughput_tok_s,total_throughput_tok_s," SUMMARY_COLUMNS("ttft_ms") \
    SUMMARY_COLUMNS("tpot_ms") SUMMARY_COLUMNS("itl_ms") SUMMARY_COLUMNS("e2el_ms")                              \
    "goodput_server_req_s,good_frac_server,goodput_interactive_req_s,good_frac_interactive,"                     \
    "kv_util,waited_frac,preempted_frac,cache_hit_rate,n_requests,n_steps"

// The SLO sets goodput is counted against: MLPerf's, scaled to the server (set_slos).
static SloSet slos[2];

// MLPerf's SLOs were set for Llama-2-70B on data-centre GPUs; a server of another speed keeps
// their ratio to its batch-1 decode step: each threshold is multiplied by step_ms / ref_ms,
// the reference being the lecture's Llama-2-13B step on an H100 (13 ms), so TPOT <= 200 ms is
// 15.4 batch-1 steps (server) and 40 ms 3.1 (interactive) on every server.
static void set_slos(double step_ms) {
    slos[0] = slo_scaled(SLO_MLPERF_SERVER, step_ms / LECTURE_B1_MS);
    slos[1] = slo_scaled(SLO_MLPERF_INTERACTIVE, step_ms / LECTURE_B1_MS);
}

typedef struct {
    double rate_req_s;
    ServingMetrics m;
    Goodput good[2];
    double kv_util, waited, preempted, hit_rate;
    int n_steps;
} Metrics;

static Metrics metrics_of(const Outcome *out, int n, const ServeStats *st, double rate) {
    Metrics m = {.rate_req_s = rate, .kv_util = st->kv_util, .n_steps = st->n_steps,
                 .hit_rate = st->cache_queries > 0 ? (double)st->cache_hits / st->cache_queries : 0};
    RequestTiming *t = mallocCheck((n > 0 ? n : 1) * sizeof(RequestTiming));
    for (int i = 0; i < n; i++) {
        t[i] = (RequestTiming){out[i].sent_s, out[i].prompt_len, out[i].n_out, out[i].token_s};
        m.waited += out[i].waited;
        m.preempted += out[i].preempted > 0;
    }
    Error err;
    if (serving_metrics(t, n, st->duration_s, PERCENTILES, N_PERCENTILES, &m.m, &err) ||
        serving_goodput(t, n, st->duration_s, &slos[0], &m.good[0], &err) ||
        serving_goodput(t, n, st->duration_s, &slos[1], &m.good[1], &err))
        die("serving: %s", err.msg);
    m.waited /= n;
    m.preempted /= n;
    free(t);
    return m;
}

// The metric columns after the key columns already in `keys`.
static void metrics_row(CsvWriter *w, const char *keys, const Metrics *m) {
    char cells[4][256];
    const LatencySummary *sums[4] = {&m->m.ttft_ms, &m->m.tpot_ms, &m->m.itl_ms, &m->m.e2el_ms};
    Error err;
    for (int k = 0; k < 4; k++)
        if (latency_cells(cells[k], sizeof cells[k], sums[k], &err)) die("serving: %s", err.msg);
    csv_row(w, "%s,%.6g,%.6g,%.6g,%.6g,%s,%s,%s,%s,%.6g,%.6g,%.6g,%.6g,%.6g,%.6g,%.6g,%.6g,%d,%d", keys, m->rate_req_s,
            m->m.request_throughput, m->m.output_throughput, m->m.total_token_throughput, cells[0], cells[1], cells[2],
            cells[3], m->good[0].goodput, m->good[0].good_frac, m->good[1].goodput, m->good[1].good_frac, m->kv_util,
            m->waited, m->preempted, m->hit_rate, m->m.completed, m->n_steps);
}

// METRIC_COLUMNS spells the percentile columns out; they must be the ones PERCENTILES gives.
static void check_metric_columns(void) {
    char cols[256];
    Error err;
    if (latency_columns(cols, sizeof cols, "ttft_ms", PERCENTILES, N_PERCENTILES, &err)) die("serving: %s", err.msg);
    if (!strstr(METRIC_COLUMNS, cols)) die("serving: METRIC_COLUMNS lacks %s", cols);
}

// ---- runs -------------------------------------------------------------------------------------

// A workload and what serving it needs: outcome arrays, and each request's solo tokens.
typedef struct {
    Workload w;
    Outcome *out;
    int *tokens;   // (n, max_output)
    double *times; // (n, max_output)
    int *solo;     // (n, max_output) greedy tokens alone; NULL for a simulated workload
    int max_output;
} Bench;

static void bench_open(Bench *b, const WorkloadSpec *spec, const Tokenizer *tok, const Corpus *c) {
    Error err;
    if (workload_make(&b->w, spec, tok, c->val, c->val_len, &err)) die("serving: %s", err.msg);
    int n = b->w.n;
    b->max_output = spec->max_output;
    b->out = mallocCheck(n * sizeof(Outcome));
    b->tokens = mallocCheck((size_t)n * spec->max_output * sizeof(int));
    b->times = mallocCheck((size_t)n * spec->max_output * sizeof(double));
    for (int i = 0; i < n; i++)
        b->out[i] = (Outcome){.tokens = b->tokens + (size_t)i * spec->max_output,
                              .token_s = b->times + (size_t)i * spec->max_output};
    b->solo = NULL;
}

static void bench_close(Bench *b) {
    workload_free(&b->w);
    free(b->out), free(b->tokens), free(b->times), free(b->solo);
}

// Each request alone on the engine, in order (a chat turn's prompt repeats the solo outputs of
// the turns before it): prefill, then greedy decoding. Returns the mean decode step, ms.
static double solo_tokens(Bench *b, Engine *e) {
    int V = e->config.vocab_size, n = b->w.n, **outputs = mallocCheck((n > 0 ? n : 1) * sizeof(int *)), steps = 0;
    b->solo = mallocCheck((size_t)n * b->max_output * sizeof(int));
    for (int i = 0; i < n; i++) outputs[i] = b->solo + (size_t)i * b->max_output;
    double decode_s = 0;
    for (int i = 0; i < n; i++) {
        const Request *r = &b->w.reqs[i];
        int len = request_full_prompt_len(b->w.reqs, i), *prompt = mallocCheck(len * sizeof(int)), *want = outputs[i];
        request_full_prompt(b->w.reqs, i, outputs, prompt);
        Session s;
        Error err;
        session_open(&s, e, len + r->output_len);
        if (session_prefill(&s, prompt, len, NULL, &err)) die("serving: request %d alone: %s", i, err.msg);
        for (int k = 0; k < r->output_len; k++) {
            want[k] = sampler_argmax(s.logits, V);
            double t0 = now_seconds();
            if (k + 1 < r->output_len && session_decode(&s, want[k], &err)) die("serving: request %d: %s", i, err.msg);
            decode_s += now_seconds() - t0;
            steps += k + 1 < r->output_len;
        }
        session_close(&s);
        free(prompt);
    }
    free(outputs);
    return steps ? 1e3 * decode_s / steps : 0;
}

static const char *config_name(const ServeConfig *c) {
    static char buf[64];
    snprintf(buf, sizeof buf, "%s/%s%s%s", POLICY_NAMES[c->policy], CACHE_NAMES[c->cache],
             c->prefix_cache ? "/" : "", c->prefix_cache ? PREFIX_CACHE_NAMES[c->prefix_cache] : "");
    return buf;
}

// Serve the bench at `rate` (0: every request at once); a real run checks every request's
// tokens against its solo run.
static Metrics serve_bursty(Bench *b, const ServeConfig *cfg, Engine *e, const StepCost *cost, double rate,
                            double burstiness, ServeStats *st) {
    Error err;
    workload_arrivals(b->w.reqs, b->w.n, rate, burstiness, seed + 1);
    if (serve_run(cfg, e, cost, b->w.reqs, b->w.n, b->out, st, &err)) die("serving: %s", err.msg);
    for (int i = 0; e && i < b->w.n; i++)
        for (int k = 0; k < b->w.reqs[i].output_len; k++)
            if (b->out[i].tokens[k] != b->solo[(size_t)i * b->max_output + k])
                die("serving: %s: request %d's token %d differs from running it alone", config_name(cfg), i, k);
    return metrics_of(b->out, b->w.n, st, rate);
}

static Metrics serve(Bench *b, const ServeConfig *cfg, Engine *e, const StepCost *cost, double rate, ServeStats *st) {
    return serve_bursty(b, cfg, e, cost, rate, BURSTINESS, st);
}

// The (policy, cache, prefix cache) grid: every policy over both caches, the paged one with
// and without vLLM's hash-keyed prefix cache (the radix tree is compared with it on the
// workloads made for it, serving_prefix_cache.csv).
typedef struct {
    Policy policy;
    CacheKind cache;
    PrefixCacheKind prefix_cache;
} Grid;
static const Grid GRID[] = {
    {POLICY_STATIC, CACHE_RESERVE, PREFIX_CACHE_OFF},     {POLICY_STATIC, CACHE_PAGED, PREFIX_CACHE_OFF},
    {POLICY_STATIC, CACHE_PAGED, PREFIX_CACHE_HASH},      {POLICY_CONTINUOUS, CACHE_RESERVE, PREFIX_CACHE_OFF},
    {POLICY_CONTINUOUS, CACHE_PAGED, PREFIX_CACHE_OFF},   {POLICY_CONTINUOUS, CACHE_PAGED, PREFIX_CACHE_HASH},
    {POLICY_CHUNKED, CACHE_RESERVE, PREFIX_CACHE_OFF},    {POLICY_CHUNKED, CACHE_PAGED, PREFIX_CACHE_OFF},
    {POLICY_CHUNKED, CACHE_PAGED, PREFIX_CACHE_HASH}};
enum { N_GRID = sizeof GRID / sizeof GRID[0] };

static ServeConfig grid_config(ServeConfig base, Grid g) {
    base.policy = g.policy;
    base.cache = g.cache;
    base.prefix_cache = g.prefix_cache;
    return base;
}

// The capacity of a server: requests per second of continuous batching over the paged
// cache when every request arrives at once.
static double capacity_req_s(Bench *b, ServeConfig base, Engine *e, const StepCost *cost) {
    ServeStats st;
    ServeConfig cfg = grid_config(base, (Grid){POLICY_CONTINUOUS, CACHE_PAGED, PREFIX_CACHE_OFF});
    return serve(b, &cfg, e, cost, 0, &st).m.request_throughput;
}

// Batch size against latency and throughput: every request at once, memory to spare (a
// reserve_len cache per sequence and one more), rows prefixed by `lead` ("" or "model,").
static void batch_sweep(CsvWriter *w, const char *lead, Bench *b, ServeConfig base, Engine *e, const Sizes *sz) {
    ServeStats st;
    for (int k = 0; k < sz->n_batches; k++) {
        ServeConfig cfg = base;
        cfg.max_batch = sz->batches[k];
        cfg.kv_tokens = (sz->batches[k] + 1) * base.reserve_len;
        progress("serving: %sbatch %d", lead, sz->batches[k]);
        Metrics m = serve(b, &cfg, e, NULL, 0, &st);
        char keys[192];
        snprintf(keys, sizeof keys, "%s%d", lead, sz->batches[k]);
        metrics_row(w, keys, &m);
    }
}

// The rate sweep of one server (real or simulated) into rows prefixed by `lead` ("" or "H100 SXM,").
static void rate_sweep(CsvWriter *w, const char *lead, Bench *b, ServeConfig base, Engine *e, const StepCost *cost,
                       const Sizes *sz, double capacity, const char *what) {
    ServeStats st;
    for (int g = 0; g < N_GRID; g++)
        for (int l = 0; l < sz->n_loads; l++) {
            ServeConfig cfg = grid_config(base, GRID[g]);
            progress("serving: %s %s at %.2f of capacity", what, config_name(&cfg), sz->loads[l]);
            Metrics m = serve(b, &cfg, e, cost, sz->loads[l] * capacity, &st);
            char keys[160];
            snprintf(keys, sizeof keys, "%s%s,%s,%s,%.6g", lead, POLICY_NAMES[GRID[g].policy],
                     CACHE_NAMES[GRID[g].cache], PREFIX_CACHE_NAMES[GRID[g].prefix_cache], sz->loads[l]);
            metrics_row(w, keys, &m);
        }
}

// The load shapes of vLLM's benchmark on one server, chunked prefill over the paged cache with
// hash prefix caching (vLLM v1's defaults): the rate sweep at each burstiness (gamma
// arrivals of shape b: b < 1 burstier than Poisson, b > 1 more regular), and the closed-loop
// sweep over the requests in flight (every request due at once, at most C sent and
// unfinished: --request-rate inf --max-concurrency C).
static void load_shapes(LabRun *r, Bench *b, ServeConfig base, Engine *e, const Sizes *sz, double capacity) {
    ServeStats st;
    base.policy = POLICY_CHUNKED;
    base.cache = CACHE_PAGED;
    base.prefix_cache = PREFIX_CACHE_HASH;
    CsvWriter w = lab_csv(r, TABLE_BURSTINESS);
    for (int k = 0; k < sz->n_bursts; k++)
        for (int l = 0; l < sz->n_loads; l++) {
            progress("serving: burstiness %.2g at %.2f of capacity", sz->bursts[k], sz->loads[l]);
            Metrics m = serve_bursty(b, &base, e, NULL, sz->loads[l] * capacity, sz->bursts[k], &st);
            char keys[64];
            snprintf(keys, sizeof keys, "%.6g,%.6g", sz->bursts[k], sz->loads[l]);
            metrics_row(&w, keys, &m);
        }
    csv_close(&w);
    w = lab_csv(r, TABLE_CONCURRENCY);
    for (int k = 0; k < sz->n_concurrency; k++) {
        ServeConfig cfg = base;
        cfg.max_concurrency = sz->concurrency[k];
        progress("serving: at most %d requests in flight", sz->concurrency[k]);
        Metrics m = serve(b, &cfg, e, NULL, 0, &st);
        char keys[32];
        snprintf(keys, sizeof keys, "%d", sz->concurrency[k]);
        metrics_row(&w, keys, &m);
    }
    csv_close(&w);
}

// ---- a published model (--real-model) ------------------------------------------------------------

// Its batch sweep and the policy grid at its own capacity, on KJV passages in its tokenizer,
// each request generating a fixed number of tokens (as vLLM's random dataset fixes the output
// length), twice its prompt, so that the runs measure decode, where batching acts:
// a model whose decode reads its weights from DRAM, where a step of many rows costs little
// more than a step of one (the multi-row kernels read each weight block once for up to 16
// rows). Every request is checked against its solo run, as on the target. Each request gets
// REAL_CONTEXT positions (not the model's whole context) and 16 run at once.
enum { REAL_CONTEXT = 512, REAL_MAX_BATCH = 16 };

static void serve_real(LabRun *r, const Sizes *sz, const Corpus *corpus) {
    Error err;
    Model model;
    Tokenizer tok;
    if (checkpoint_load(real_model_path, NULL, &model, &tok, &err)) die("%s", err.msg);
    int context = model.config.seq_len < REAL_CONTEXT ? model.config.seq_len : REAL_CONTEXT;
    if (sz->real_passage + sz->real_output > context)
        die("serving: %s: requests of %d positions exceed %d", real_model_path, sz->real_passage + sz->real_output,
            context);
    const char *slash = strrchr(real_model_path, '/'), *name = slash ? slash + 1 : real_model_path;
    Engine e;
    engine_open(&e, &model, ops_cpu(), DTYPE_F32, SERVE_MAX_ROWS, context);
    ServeConfig base = {.policy = POLICY_CONTINUOUS, .cache = CACHE_PAGED, .max_batch = REAL_MAX_BATCH,
                        .token_budget = TOKEN_BUDGET, .block_size = BLOCK_SIZE, .kv_tokens = KV_CONTEXTS * context,
                        .reserve_len = context};
    WorkloadSpec spec = {.kind = WORKLOAD_PASSAGES, .n_requests = sz->real_requests, .max_prompt = sz->real_passage,
                         .min_output = sz->real_output, .max_output = sz->real_output, .seed = seed + 4};
    Bench b;
    bench_open(&b, &spec, &tok, corpus);
    progress("serving: %s alone", name);
    double step_ms = solo_tokens(&b, &e);
    set_slos(step_ms);
    ServeStats st;
    char lead[160];
    snprintf(lead, sizeof lead, "%s,", name);
    CsvWriter w = lab_csv(r, TABLE_REAL_BATCH);
    batch_sweep(&w, lead, &b, base, &e, sz);
    csv_close(&w);
    double capacity = capacity_req_s(&b, base, &e, NULL);
    w = lab_csv(r, TABLE_REAL_SWEEP);
    for (int g = 0; g < N_GRID; g++) {
        ServeConfig cfg = grid_config(base, GRID[g]);
        progress("serving: %s, %s at its capacity", name, config_name(&cfg));
        Metrics m = serve(&b, &cfg, &e, NULL, capacity, &st);
        char keys[200];
        snprintf(keys, sizeof keys, "%s,%s,%s,%s,1", name, POLICY_NAMES[GRID[g].policy], CACHE_NAMES[GRID[g].cache],
                 PREFIX_CACHE_NAMES[GRID[g].prefix_cache]);
        metrics_row(&w, keys, &m);
    }
    csv_close(&w);
    lab_meta(r, "serving_real_model", "%s", name);
    lab_meta(r, "serving_real_capacity_req_s", "%.6g", capacity);
    lab_meta(r, "serving_real_decode_step_ms", "%.6g", step_ms);
    lab_meta(r, "serving_real_weight_bytes", "%zu", engine_weight_bytes(&e));
    lab_meta(r, "serving_real_context", "%d", context);
    bench_close(&b);
    engine_close(&e);
    tokenizer_free(&tok);
    model_free(&model);
}

// The passages workload of n requests: half of them after the system prompt.
static WorkloadSpec passages_spec(const Sizes *sz, int n) {
    return (WorkloadSpec){.kind = WORKLOAD_PASSAGES, .n_requests = n, .max_prompt = sz->prefix_len + sz->passage_len,
                          .min_output = 1, .max_output = sz->max_output, .prefix_len = sz->prefix_len,
                          .shared_fraction = SHARED_FRACTION, .seed = seed};
}

// The workloads prefix caching is for: few-shot prompts (a few example sets, each request one
// of them and its own question) and chats (every turn resends the conversation).
static WorkloadSpec cache_workload_spec(const Sizes *sz, WorkloadKind kind) {
    if (kind == WORKLOAD_FEW_SHOT)
        return (WorkloadSpec){.kind = kind, .n_requests = sz->n_requests, .max_prompt = sz->shot_len + sz->turn_len,
                              .min_output = 1, .max_output = sz->turn_output, .prefix_len = sz->shot_len,
                              .n_prefixes = N_SHOT_SETS, .seed = seed + 2};
    return (WorkloadSpec){.kind = kind, .n_requests = sz->n_requests, .max_prompt = sz->turn_len, .min_output = 1,
                          .max_output = sz->turn_output, .turns = CHAT_TURNS, .think_s = 0, .seed = seed + 3};
}

// ---- the simulated H100 / H200 ----------------------------------------------------------------

typedef struct {
    const ModelShape *m;
    const HardwareSpec *hw;
    Precision p;
    double efficiency, overhead_s; // fitted
} Sim;

// The roofline time of a forward of `rows` rows that read `keys` cached positions in all.
static double roofline_s(const Sim *s, int rows, double keys) {
    double flops = budget_decode_flops(s->m, rows, 0) + budget_attention_flops_per_pair(s->m, 1) * keys;
    double bytes = budget_decode_bytes(s->m, s->p, rows, 0) + budget_kv_bytes_per_token(s->m, s->p.act) * keys;
    return budget_roofline(s->hw, s->p, flops, bytes).time_s;
}

static double sim_forward_s(const void *ctx, int rows, double keys) {
    const Sim *s = ctx;
    return s->overhead_s + roofline_s(s, rows, keys) / s->efficiency;
}

// time = overhead + roofline / efficiency through the lecture's two H100 points.
static void calibrate(Sim *h100, int context) {
    double r1 = roofline_s(h100, 1, context), r64 = roofline_s(h100, 64, 64.0 * context);
    h100->efficiency = (r64 - r1) / (1e-3 * (LECTURE_B64_MS - LECTURE_B1_MS));
    h100->overhead_s = 1e-3 * LECTURE_B1_MS - r1 / h100->efficiency;
    if (!(h100->efficiency > 0 && h100->efficiency <= 1 && h100->overhead_s >= 0))
        die("serving: at --calibration-context %d the lecture's H100 figures need a bandwidth efficiency of %.3g and "
            "an overhead of %.3g ms per step: choose a context where both are physical",
            context, h100->efficiency, 1e3 * h100->overhead_s);
}

static const ModelShape *find_shape(const ModelShape *m, int n, const char *name) {
    for (int i = 0; i < n; i++)
        if (strcmp(m[i].name, name) == 0) return &m[i];
    die("serving: templates/model_presets.csv has no %s", name);
}

static const HardwareSpec *find_hw(const HardwareSpec *h, int n, const char *name) {
    for (int i = 0; i < n; i++)
        if (strcmp(h[i].name, name) == 0) return &h[i];
    die("serving: templates/hardware.csv has no %s", name);
}


static void simulate(LabRun *r, const Sizes *sz, const Tokenizer *tok, const Corpus *corpus) {
    Error err;
    ModelShape *models;
    HardwareSpec *hws;
    int n_models, n_hws;
    if (budget_load_models("templates/model_presets.csv", &models, &n_models, &err)) die("%s", err.msg);
    if (budget_load_hardware("templates/hardware.csv", &hws, &n_hws, &err)) die("%s", err.msg);
    const ModelShape *m = find_shape(models, n_models, "Llama-2-13B");
    Precision bf16 = {NUM_BF16, NUM_BF16};
    Sim sims[2] = {{m, find_hw(hws, n_hws, "H100 SXM"), bf16, 0, 0}, {m, find_hw(hws, n_hws, "H200"), bf16, 0, 0}};
    calibrate(&sims[0], (int)calibration_context);
    sims[1].efficiency = sims[0].efficiency; // the same software on the next memory system
    sims[1].overhead_s = sims[0].overhead_s;
    int C = (int)calibration_context;

    CsvWriter w = lab_csv(r, TABLE_CALIBRATION);
    int cal_batch[2] = {1, 64};
    double cal_ms[2] = {LECTURE_B1_MS, LECTURE_B64_MS};
    for (int k = 0; k < 2; k++) {
        double t = sim_forward_s(&sims[0], cal_batch[k], (double)cal_batch[k] * C);
        csv_row(&w, "%s,%d,%d,%.6g,%.6g,%.6g,%.6g,%.6g,%.6g,%.6g", sims[0].hw->name, cal_batch[k], C, 1e3 * t,
                cal_batch[k] / t, cal_ms[k], cal_batch[k] / (1e-3 * cal_ms[k]),
                1e3 * roofline_s(&sims[0], cal_batch[k], (double)cal_batch[k] * C), sims[0].efficiency,
                1e3 * sims[0].overhead_s);
    }
    csv_close(&w);

    w = lab_csv(r, TABLE_SIM_STEPS);
    static const int batches[] = {1, 2, 4, 8, 16, 32, 64, 128, 256};
    for (int h = 0; h < 2; h++)
        for (size_t k = 0; k < sizeof batches / sizeof batches[0]; k++) {
            double t = sim_forward_s(&sims[h], batches[k], (double)batches[k] * C);
            csv_row(&w, "%s,%d,%d,%.6g,%.6g", sims[h].hw->name, batches[k], C, 1e3 * t, batches[k] / t);
        }
    csv_close(&w);

    WorkloadSpec spec = passages_spec(sz, sz->sim_requests);
    Bench b;
    bench_open(&b, &spec, tok, corpus);
    set_slos(LECTURE_B1_MS); // MLPerf's own thresholds, on real-size models
    w = lab_csv(r, TABLE_SIM);
    for (int h = 0; h < 2; h++) {
        StepCost cost = {sim_forward_s, &sims[h]};
        int kv_tokens = (int)budget_kv_tokens_fit(m, sims[h].hw, bf16);
        ServeConfig base = {.policy = POLICY_CONTINUOUS, .cache = CACHE_PAGED, .max_batch = SIM_MAX_BATCH,
                            .token_budget = SIM_BUDGET, .block_size = BLOCK_SIZE, .kv_tokens = kv_tokens,
                            .reserve_len = m->max_context};
        char lead[80];
        snprintf(lead, sizeof lead, "%s,", sims[h].hw->name);
        rate_sweep(&w, lead, &b, base, NULL, &cost, sz, capacity_req_s(&b, base, NULL, &cost), sims[h].hw->name);
    }
    csv_close(&w);
    bench_close(&b);
    lab_meta(r, "serving_sim_efficiency", "%.6g", sims[0].efficiency);
    lab_meta(r, "serving_sim_overhead_ms", "%.6g", 1e3 * sims[0].overhead_s);
    free(models);
    free(hws);
}

// ---- the measured runs ------------------------------------------------------------------------

static int run(LabRun *r) {
    const Sizes *sz = r->quick ? &QUICK : &FULL;
    Error err;
    Model model;
    Tokenizer tok;
    Corpus corpus;
    if (checkpoint_load(model_path, tokenizer_path, &model, &tok, &err)) die("%s", err.msg);
    if (tok.vocab_size != model.config.vocab_size)
        die("serving: %s: the tokenizer has %d tokens but the model %d", model_path, tok.vocab_size,
            model.config.vocab_size);
    const char *corpus_file = corpus_path ? corpus_path : getenv("CORPUS");
    if (corpus_load(&corpus, corpus_file && *corpus_file ? corpus_file : NULL, &err)) die("%s", err.msg);
    const Config *c = &model.config;
    int max_prefix = sz->prefixes[sz->n_prefixes - 1] > sz->prefix_len ? sz->prefixes[sz->n_prefixes - 1] : sz->prefix_len;
    int longest = max_prefix + sz->passage_len + sz->max_output;
    if (sz->shot_len + sz->turn_len + sz->turn_output > longest) longest = sz->shot_len + sz->turn_len + sz->turn_output;
    if (CHAT_TURNS * (sz->turn_len + sz->turn_output) > longest) longest = CHAT_TURNS * (sz->turn_len + sz->turn_output);
    if (longest > c->seq_len)
        die("serving: %s: requests of up to %d positions exceed its context of %d", model_path, longest, c->seq_len);
    if (c->kv_lora_rank) die("serving: %s is an MLA model, whose latent cache is not paged", model_path);
    Engine e;
    engine_open(&e, &model, ops_cpu(), DTYPE_F32, SERVE_MAX_ROWS, c->seq_len);
    // reserve: the model's whole context per request; the same memory makes the paged pool
    ServeConfig base = {.policy = POLICY_CONTINUOUS, .cache = CACHE_PAGED, .max_batch = MAX_BATCH,
                        .token_budget = TOKEN_BUDGET, .block_size = BLOCK_SIZE, .kv_tokens = KV_CONTEXTS * c->seq_len,
                        .reserve_len = c->seq_len};
    WorkloadSpec spec = passages_spec(sz, sz->n_requests);
    Bench b;
    bench_open(&b, &spec, &tok, &corpus);
    double step_ms = solo_tokens(&b, &e);
    set_slos(step_ms);
    ServeStats st;
    double capacity = capacity_req_s(&b, base, &e, NULL);

    CsvWriter w = lab_csv(r, TABLE_BATCH);
    batch_sweep(&w, "", &b, base, &e, sz);
    csv_close(&w);

    // prefix caching against the prefix length: every request shares the system prompt, memory
    // to spare (so both runs admit alike), arriving at the capacity's rate
    w = lab_csv(r, TABLE_PREFIX);
    for (int k = 0; k < sz->n_prefixes; k++) {
        WorkloadSpec ps = spec;
        ps.prefix_len = sz->prefixes[k];
        ps.max_prompt = sz->prefixes[k] + sz->passage_len;
        ps.shared_fraction = 1.0;
        Bench pb;
        bench_open(&pb, &ps, &tok, &corpus);
        solo_tokens(&pb, &e);
        double held[2], peak[2], positions = 0, shared = 0;
        for (int i = 0; i < pb.w.n; i++) {
            const Request *q = &pb.w.reqs[i];
            positions += ((q->prompt_len + q->output_len + BLOCK_SIZE - 1) / BLOCK_SIZE) * BLOCK_SIZE;
            shared += (q->prefix_len / BLOCK_SIZE) * BLOCK_SIZE;
        }
        for (int on = 0; on <= 1; on++) {
            ServeConfig cfg = base;
            cfg.prefix_cache = on ? PREFIX_CACHE_HASH : PREFIX_CACHE_OFF;
            cfg.kv_tokens = (MAX_BATCH + 1) * c->seq_len;
            progress("serving: prefix %d, prefix cache %s", sz->prefixes[k], PREFIX_CACHE_NAMES[cfg.prefix_cache]);
            serve(&pb, &cfg, &e, NULL, capacity, &st);
            held[on] = st.kv_rows_mean;
            peak[on] = st.kv_rows_peak;
        }
        for (int on = 0; on <= 1; on++)
            csv_row(&w, "%d,%s,%.6g,%.6g,%.6g,%.6g", sz->prefixes[k], on ? "hash" : "off", held[on], peak[on],
                    on ? 1.0 - held[1] / held[0] : 0.0, on ? shared / positions : 0.0);
        bench_close(&pb);
    }
    csv_close(&w);

    // prefix caching off / hash / radix on the few-shot and chat workloads, chunked prefill over
    // the paged cache of KV_CONTEXTS contexts (so cached blocks are evicted)
    w = lab_csv(r, TABLE_PREFIX_CACHE);
    for (WorkloadKind kind = WORKLOAD_FEW_SHOT; kind <= WORKLOAD_CHAT; kind++) {
        WorkloadSpec cs = cache_workload_spec(sz, kind);
        Bench cb;
        bench_open(&cb, &cs, &tok, &corpus);
        solo_tokens(&cb, &e);
        double rate = CACHE_LOAD * capacity / (kind == WORKLOAD_CHAT ? CHAT_TURNS : 1);
        for (PrefixCacheKind pc = PREFIX_CACHE_OFF; pc < PREFIX_CACHE_COUNT; pc++) {
            ServeConfig cfg = base;
            cfg.policy = POLICY_CHUNKED;
            cfg.prefix_cache = pc;
            progress("serving: %s, prefix cache %s", WORKLOAD_NAMES[kind], PREFIX_CACHE_NAMES[pc]);
            Metrics m = serve(&cb, &cfg, &e, NULL, rate, &st);
            csv_row(&w, "%s,%s,%.6g,%.6g,%.6g,%.6g,%.6g,%.6g,%.6g,%.6g,%.6g,%ld,%.6g,%d", WORKLOAD_NAMES[kind],
                    PREFIX_CACHE_NAMES[pc], m.hit_rate, m.m.ttft_ms.mean, m.m.ttft_ms.pct[1], m.m.ttft_ms.pct[3],
                    m.m.tpot_ms.pct[1], st.kv_rows_mean, (double)st.kv_rows_peak, m.m.output_throughput,
                    m.good[0].good_frac, st.cache_evictions, m.m.total_input / (double)m.m.completed, m.m.completed);
        }
        bench_close(&cb);
    }
    csv_close(&w);

    simulate(r, sz, &tok, &corpus);
    set_slos(step_ms); // simulate() set MLPerf's own
    load_shapes(r, &b, base, &e, sz, capacity);

    if (real_model_path) serve_real(r, sz, &corpus);
    set_slos(step_ms);
    w = lab_csv(r, TABLE_SWEEP);
    rate_sweep(&w, "", &b, base, &e, NULL, sz, capacity, "measured");
    csv_close(&w);

    lab_meta(r, "serving_model", "%s", model_path);
    lab_meta(r, "serving_capacity_req_s", "%.6g", capacity);
    lab_meta(r, "serving_weight_bytes", "%zu", engine_weight_bytes(&e));
    lab_meta(r, "serving_kv_positions", "%d", base.kv_tokens);
    lab_meta(r, "serving_reserve_len", "%d", base.reserve_len);
    lab_meta(r, "serving_max_batch", "%d", base.max_batch);
    lab_meta(r, "serving_decode_step_ms", "%.6g", step_ms);
    lab_meta(r, "serving_slo_server_ttft_ms", "%.6g", slos[0].ttft_ms);
    lab_meta(r, "serving_slo_server_tpot_ms", "%.6g", slos[0].tpot_ms);
    lab_meta(r, "serving_slo_interactive_ttft_ms", "%.6g", slos[1].ttft_ms);
    lab_meta(r, "serving_slo_interactive_tpot_ms", "%.6g", slos[1].tpot_ms);
    bench_close(&b);
    engine_close(&e);
    corpus_free(&corpus);
    tokenizer_free(&tok);
    model_free(&model);
    return 0;
}

static const LabOption OPTIONS[] = {
    LAB_CHECKPOINT_OPTIONS(model_path, tokenizer_path),
    {.name = "corpus", .kind = LAB_TEXT, .value = &corpus_path, .arg = "FILE",
     .help = "text whose validation part gives the prompts (default: $CORPUS, else the KJV)"},
    {.name = "seed", .kind = LAB_U64, .value = &seed, .arg = "S", .help = "workload and arrivals", .def = "17"},
    {.name = "calibration-context", .kind = LAB_INT, .value = &calibration_context, .arg = "N",
     .help = "positions per sequence at which the simulated H100 meets the lecture's batch-1 and batch-64 step "
             "times",
     .def = "384", .min = 1, .max = 4096},
    {.name = "real-model", .kind = LAB_TEXT, .value = &real_model_path, .arg = "FILE",
     .help = "a published model (GGUF) served beside the target: its batch sweep and the policies at its capacity"},
    {0}};

static const LabTable TABLES[] = {
    {"serving_batch", "max_batch," METRIC_COLUMNS, "batch size against throughput and latency", LAB_CPU},
    {"serving_prefix",
     "prefix_len,prefix_cache,kv_positions_held_mean,kv_positions_held_peak,saving_frac,saving_frac_estimate",
     "KV memory held with and without prefix caching", LAB_CPU},
    {"serving_prefix_cache",
     "workload,prefix_cache,hit_rate,ttft_ms_mean,ttft_ms_p50,ttft_ms_p99,tpot_ms_p50,kv_positions_held_mean,"
     "kv_positions_held_peak,output_throughput_tok_s,good_frac_server,evictions,prompt_tokens_mean,n_requests",
     "prefix caching off, hash-keyed and radix on few-shot and chat workloads", LAB_CPU},
    {"serving_calibration",
     "hardware,batch,context,step_ms,tok_s,lecture_step_ms,lecture_tok_s,roofline_ms,bandwidth_efficiency,"
     "overhead_ms",
     "the simulated H100 at the lecture's two points (simulated)", LAB_CPU},
    {"serving_sim_steps", "hardware,batch,context,step_ms,tok_s", "simulated decode steps by batch (simulated)", LAB_CPU},
    {"serving_sim", "hardware,policy,cache,prefix_cache,load_frac," METRIC_COLUMNS,
     "the rate sweep on Llama-2-13B, H100 and H200 (simulated)", LAB_CPU},
    {"serving_burstiness", "burstiness,load_frac," METRIC_COLUMNS,
     "the rate sweep at several burstiness values (chunked prefill, paged, hash prefix cache)", LAB_CPU},
    {"serving_concurrency", "max_concurrency," METRIC_COLUMNS,
     "the closed-loop sweep over requests in flight (every request due at once)", LAB_CPU},
    {"serving_real_batch", "model,max_batch," METRIC_COLUMNS,
     "batch size against throughput and latency on the --real-model", LAB_CPU},
    {"serving_real_sweep", "model,policy,cache,prefix_cache,load_frac," METRIC_COLUMNS,
     "the policies at the --real-model's capacity", LAB_CPU},
    {"serving_sweep", "policy,cache,prefix_cache,load_frac," METRIC_COLUMNS, "the rate sweep on this machine", LAB_CPU},
    {0}};

int main(int argc, char **argv) {
    check_metric_columns();
    static const Experiment e = {"serving", "--model FILE [options]",
                                 "Serve requests arriving over time: static, continuous and chunked-prefill "
                                 "batching over a reserved or a paged KV cache, with prefix caching; measured "
                                 "here, simulated for Llama-2-13B on an H100 and an H200.",
                                 OPTIONS, TABLES, LAB_COMMON, NULL, run};
    return lab_main(&e, argc, argv);
}
