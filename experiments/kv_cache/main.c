// kv_cache/main.c: bin/kv_cache, project 11: what a KV cache buys.
//
//   bin/kv_cache --model out/models/target.gguf [--out out/<hw>] [--profile quick|full] [--backend cpu|cuda]
//
// Greedy generation of the same tokens two ways: with a KV cache (prefill the prompt once,
// then one decode step per token) and without (every new token recomputes the whole
// sequence). The run stops with an error if the two ever pick different tokens. Uncached
// steps cost a forward pass over the whole sequence so far; in long generations every
// stride-th of them is timed (column timed_steps) and the total interpolates between them.
//
// --backend cuda runs the same measurements on the GPU (engine/model_cuda.h): fp32 weights
// (so it computes what the CPU computes, to rounding), the KV cache in device memory, logits
// copied back to the host after every step (the copy waits for the device, so wall-clock
// time around a step covers its GPU work, as the CPU's covers its own). Without the cache,
// each step re-runs the prefill on a device cache allocated once and reset, where the CPU
// allocates its scratch cache inside the step; the memory table counts the device bytes
// the tracking allocator hands out. Exits 2 ("not run") when no CUDA device can be used.
//
// Writes under --out, every row starting with the backend: one table per file for both
// backends, where a run replaces its own backend's rows and keeps the other's:
//   kv_cache_runs.csv    backend, prompt_len, gen_len, mode -> prefill, per-token decode, total times
//   kv_cache_speedup.csv backend, prompt_len, gen_len (setting "P+G") -> measured speed-up and the theoretical FLOP ratio
//   kv_cache_steps.csv   backend, mode, position -> latency of each decode step (the longest setting)
//   kv_cache_memory.csv  backend, n_layers, n_kv_heads, context_len -> measured vs formula bytes
#include <malloc.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"
#include "checkpoint.h"
#include "lab.h"
#include "model.h"
#include "model_cuda.h"
#include "rng.h"

typedef enum { MODE_CACHE = 0, MODE_NO_CACHE = 1 } Mode;
static const char *MODE_NAMES[] = {"cache", "no_cache"};

typedef struct {
    int prompt_len, gen_len;
} Setting;

// ---- the two backends ------------------------------------------------------------------------

// What the measurements need of a backend: cached generation of one sequence (begin, prefill
// the prompt once, decode one token at a time, end), a forward pass over a whole sequence
// without a cache, and a KV cache of a given shape for the memory table. Logits always come
// back to the host.
typedef struct Engine Engine;
struct Engine {
    Backend backend;
    const Config *config;
    // A cache for `capacity` tokens and scratch for a prompt of prompt_len.
    void (*begin)(Engine *e, int prompt_len, int capacity);
    void (*prefill)(Engine *e, const int *tokens, int n, float *logits); // logits (V): the last token's
    void (*decode)(Engine *e, int token, float *logits);                 // logits (V)
    void (*end)(Engine *e);
    // logits (n, V) if all_logits, else (V) of the last token.
    void (*forward_full)(Engine *e, const int *tokens, int n, float *logits, int all_logits);
    // Allocate and free a cache of this shape: returns the bytes the allocator handed out,
    // and the cache's own count in *cache_bytes.
    size_t (*measure_cache)(int n_layers, int n_kv_heads, int head_dim, int context, size_t *cache_bytes);
    void (*close)(Engine *e);
    void *state;
};

// CPU: model.h, as the experiment has always run.
typedef struct {
    Model *m;
    KVCache cache;
    RunState s;
} CpuEngine;

static void cpu_begin(Engine *e, int prompt_len, int capacity) {
    CpuEngine *c = e->state;
    kv_cache_alloc(&c->cache, e->config->n_layers, e->config->n_kv_heads, e->config->head_dim, capacity);
    runstate_alloc(&c->s, e->config, prompt_len < 512 ? prompt_len : 512);
}

static void cpu_prefill(Engine *e, const int *tokens, int n, float *logits) {
    CpuEngine *c = e->state;
    model_prefill(c->m, &c->s, &c->cache, tokens, n, logits, 0);
}

static void cpu_decode(Engine *e, int token, float *logits) {
    CpuEngine *c = e->state;
    KVCache *caches[1] = {&c->cache};
    model_decode(c->m, &c->s, caches, &token, 1, logits);
}

static void cpu_end(Engine *e) {
    CpuEngine *c = e->state;
    runstate_free(&c->s);
    kv_cache_free(&c->cache);
}

static void cpu_forward_full(Engine *e, const int *tokens, int n, float *logits, int all_logits) {
    model_forward_full(((CpuEngine *)e->state)->m, tokens, n, logits, all_logits);
}

// Bytes the allocator hands out for the cache (mallinfo2 before / after).
static size_t cpu_measure_cache(int n_layers, int n_kv, int hd, int context, size_t *cache_bytes) {
    struct mallinfo2 before = mallinfo2();
    KVCache cache;
    kv_cache_alloc(&cache, n_layers, n_kv, hd, context);
    struct mallinfo2 after = mallinfo2();
    *cache_bytes = kv_cache_bytes(&cache);
    kv_cache_free(&cache);
    return (after.uordblks + after.hblkhd) - (before.uordblks + before.hblkhd);
}

static void cpu_close(Engine *e) { free(e->state); }

static Engine cpu_engine(Model *m) {
    CpuEngine *c = callocCheck(1, sizeof *c);
    c->m = m;
    return (Engine){BACKEND_CPU, &m->config, cpu_begin, cpu_prefill, cpu_decode, cpu_end, cpu_forward_full,
                    cpu_measure_cache, cpu_close, c};
}

#ifdef INFERLAB_CUDA
// CUDA: model_cuda.h, fp32 weights. The uncached forward reuses one device cache, reset.
typedef struct {
    CudaModel g;
    CudaRunState s;
    CudaKVCache cache, scratch;
} GpuEngine;

static void gpu_begin(Engine *e, int prompt_len, int capacity) {
    (void)prompt_len; // the run state is the engine's, sized for 512-token chunks as on the CPU
    GpuEngine *c = e->state;
    cuda_kv_cache_alloc(&c->cache, e->config->n_layers, e->config->n_kv_heads, e->config->head_dim, capacity);
}

static void gpu_prefill(Engine *e, const int *tokens, int n, float *logits) {
    GpuEngine *c = e->state;
    cuda_model_prefill(&c->g, &c->s, &c->cache, tokens, n, logits, 0);
}

static void gpu_decode(Engine *e, int token, float *logits) {
    GpuEngine *c = e->state;
    CudaKVCache *caches[1] = {&c->cache};
    cuda_model_decode(&c->g, &c->s, caches, &token, 1, logits);
}

static void gpu_end(Engine *e) { cuda_kv_cache_free(&((GpuEngine *)e->state)->cache); }

static void gpu_forward_full(Engine *e, const int *tokens, int n, float *logits, int all_logits) {
    GpuEngine *c = e->state;
    cuda_kv_cache_reset(&c->scratch);
    cuda_model_prefill(&c->g, &c->s, &c->scratch, tokens, n, logits, all_logits);
}

// Device bytes the tracking allocator hands out for the cache.
static size_t gpu_measure_cache(int n_layers, int n_kv, int hd, int context, size_t *cache_bytes) {
    size_t before = cuda_allocated_bytes();
    CudaKVCache cache;
    cuda_kv_cache_alloc(&cache, n_layers, n_kv, hd, context);
    size_t measured = cuda_allocated_bytes() - before;
    *cache_bytes = cuda_kv_cache_bytes(&cache);
    cuda_kv_cache_free(&cache);
    return measured;
}

static void gpu_close(Engine *e) {
    GpuEngine *c = e->state;
    cuda_kv_cache_free(&c->scratch);
    cuda_runstate_free(&c->s);
    cuda_model_free(&c->g);
    free(c);
    cuda_shutdown();
}

// max_tokens: the longest sequence forward_full will see.
static Engine gpu_engine(Model *m, int max_tokens) {
    GpuEngine *c = callocCheck(1, sizeof *c);
    cuda_init();
    cuda_model_upload(&c->g, m, GEMM_FP32); // fp32: the CPU's numbers, so the same tokens
    cuda_runstate_alloc(&c->s, &m->config, 512);
    cuda_kv_cache_alloc(&c->scratch, m->config.n_layers, m->config.n_kv_heads, m->config.head_dim, max_tokens);
    return (Engine){BACKEND_CUDA, &c->g.config, gpu_begin, gpu_prefill, gpu_decode, gpu_end, gpu_forward_full,
                    gpu_measure_cache, gpu_close, c};
}
#endif

// ---- the measurements ------------------------------------------------------------------------

static int argmax(const float *x, int n) {
    int best = 0;
    for (int i = 1; i < n; i++)
        if (x[i] > x[best]) best = i;
    return best;
}

// Cached greedy generation, every step timed. Step 0 prefills the prompt and picks token
// P; step i > 0 decodes token P + i - 1 and picks token P + i.
// tokens (P + G): prompt in, generated tokens out; step_ms (G).
static void generate_cached(Engine *e, Setting st, int *tokens, double *step_ms) {
    int V = e->config->vocab_size;
    float *logits = mallocCheck((size_t)V * sizeof(float));
    e->begin(e, st.prompt_len, st.prompt_len + st.gen_len);
    for (int i = 0; i < st.gen_len; i++) {
        int n = st.prompt_len + i; // tokens known so far
        double t0 = now_seconds();
        if (i == 0) e->prefill(e, tokens, n, logits);
        else e->decode(e, tokens[n - 1], logits);
        tokens[n] = argmax(logits, V);
        step_ms[i] = 1e3 * (now_seconds() - t0);
    }
    e->end(e);
    free(logits);
}

// Uncached generation: step i recomputes the whole sequence of P + i tokens. Its cost
// depends only on that length, so long generations time every stride-th step (at most
// MAX_TIMED_STEPS, always the first and the last) and integrate the total from them.
#define MAX_TIMED_STEPS 64

static int timed_steps(int gen_len, int *steps) {
    int stride = (gen_len - 1 + MAX_TIMED_STEPS - 2) / (MAX_TIMED_STEPS - 1);
    if (stride < 1) stride = 1;
    int n = 0;
    for (int i = 0; i < gen_len; i += stride) steps[n++] = i;
    if (steps[n - 1] != gen_len - 1) steps[n++] = gen_len - 1;
    return n;
}

// Time the uncached steps listed in `steps` on the cached run's tokens; each must pick
// the same token the cached run picked. step_ms (n_steps).
static void time_uncached(Engine *e, Setting st, const int *tokens, const int *steps, int n_steps, double *step_ms) {
    int V = e->config->vocab_size;
    float *logits = mallocCheck((size_t)V * sizeof(float));
    for (int k = 0; k < n_steps; k++) {
        int n = st.prompt_len + steps[k];
        double t0 = now_seconds();
        e->forward_full(e, tokens, n, logits, 0);
        int picked = argmax(logits, V);
        step_ms[k] = 1e3 * (now_seconds() - t0);
        if (picked != tokens[n])
            die("kv_cache %d+%d: without the cache position %d picks token %d, with it %d", st.prompt_len, st.gen_len,
                n, picked, tokens[n]);
    }
    free(logits);
}

// Uncached generation picks exactly the cached run's tokens iff, in one forward pass over
// the whole sequence, the argmax at every position P-1 .. P+G-2 is the next token (by
// induction over the steps). Covers the steps time_uncached skipped.
static void check_uncached_agrees(Engine *e, Setting st, const int *tokens) {
    int n = st.prompt_len + st.gen_len - 1, V = e->config->vocab_size;
    float *logits = mallocCheck((size_t)n * V * sizeof(float)); // (n, V)
    e->forward_full(e, tokens, n, logits, 1);
    for (int p = st.prompt_len - 1; p < n; p++)
        if (argmax(logits + (size_t)p * V, V) != tokens[p + 1])
            die("kv_cache %d+%d: without the cache position %d picks another token than with it", st.prompt_len,
                st.gen_len, p + 1);
    free(logits);
}

// Trapezoid integral of step times sampled at step indices `steps` over all gen_len
// steps; the plain sum when every step was timed.
static double integrate_steps(const int *steps, const double *ms, int n_steps) {
    double total = ms[0];
    for (int k = 1; k < n_steps; k++) {
        int gap = steps[k] - steps[k - 1];
        total += gap * (ms[k] + ms[k - 1]) / 2 + (ms[k] - ms[k - 1]) / 2; // steps[k-1]+1 .. steps[k]
    }
    return total;
}

// Index of the run whose total is the median (the lower middle one for an even count).
static int median_index(const double *totals, int n) {
    for (int i = 0; i < n; i++) {
        int below = 0, equal_before = 0;
        for (int j = 0; j < n; j++) {
            below += totals[j] < totals[i];
            equal_before += j < i && totals[j] == totals[i];
        }
        if (below + equal_before == (n - 1) / 2) return i;
    }
    return 0;
}

// Theoretical FLOPs of generating gen_len tokens after prompt_len, with and without cache.
static double generation_flops(const Config *c, Setting st, Mode mode) {
    double flops = model_forward_flops(c, st.prompt_len, 0, 1);
    for (int i = 1; i < st.gen_len; i++) {
        int n = st.prompt_len + i;
        flops += mode == MODE_CACHE ? model_forward_flops(c, 1, n - 1, 1) : model_forward_flops(c, n, 0, 1);
    }
    return flops;
}

typedef struct {
    const char *backend; // the first column of every row
    CsvWriter runs, speedup, steps;
} Outputs;

// The timings of one mode over `reps` repetitions: steps (reps, n_steps) at step indices
// step_index, and each repetition's total.
typedef struct {
    int n_steps, *step_index;
    double *steps, *totals;
} ModeTimes;

static void write_mode(Outputs *out, const Config *c, Setting st, Mode mode, const ModeTimes *t, int reps,
                       int write_steps) {
    const double *kept = t->steps + (size_t)median_index(t->totals, reps) * t->n_steps;
    BenchStats tot = bench_stats(t->totals, reps);
    // decode = every timed step after the first (the prompt pass)
    BenchStats dec = t->n_steps > 1 ? bench_stats(kept + 1, t->n_steps - 1) : (BenchStats){0};
    csv_row(&out->runs, "%s,%d,%d,%s,%.6g,%.6g,%.6g,%.6g,%.6g,%.6g,%.6g,%d,%d,%.6g", out->backend, st.prompt_len, st.gen_len,
            MODE_NAMES[mode], kept[0], dec.median_ms, dec.p10_ms, dec.p90_ms, tot.median_ms, tot.p10_ms, tot.p90_ms,
            reps, t->n_steps, generation_flops(c, st, mode));
    if (write_steps)
        for (int k = 1; k < t->n_steps; k++)
            csv_row(&out->steps, "%s,%s,%d,%.6g", out->backend, MODE_NAMES[mode], st.prompt_len + t->step_index[k] - 1,
                    kept[k]);
}

// Generate with the cache `reps` times, then time the uncached steps `reps` times on the
// same tokens; report the repetition whose total is the median.
// `index` of `count` settings, for the progress line.
static void measure_setting(Engine *e, Setting st, int reps, int write_steps, int index, int count, Outputs *out) {
    const Config *c = e->config;
    int total = st.prompt_len + st.gen_len, G = st.gen_len;
    int *tokens = mallocCheck(total * sizeof(int)), *again = mallocCheck(total * sizeof(int));
    uint64_t rng = rng_seed(1000003u * st.prompt_len + st.gen_len);
    for (int i = 0; i < st.prompt_len; i++) tokens[i] = (int)(rng_u64(&rng) % c->vocab_size);
    memcpy(again, tokens, st.prompt_len * sizeof(int));

    int *all_steps = mallocCheck(G * sizeof(int)), *some_steps = mallocCheck(G * sizeof(int));
    for (int i = 0; i < G; i++) all_steps[i] = i;
    ModeTimes times[2] = {
        {G, all_steps, mallocCheck((size_t)reps * G * sizeof(double)), mallocCheck(reps * sizeof(double))},
        {timed_steps(G, some_steps), some_steps, mallocCheck((size_t)reps * G * sizeof(double)),
         mallocCheck(reps * sizeof(double))}};
    for (int r = 0; r < reps; r++) {
        cli_progress_step(index, count, "kv_cache %s %d+%d cache rep %d/%d", out->backend, st.prompt_len, G, r + 1,
                          reps);
        double *ms = times[MODE_CACHE].steps + (size_t)r * G;
        generate_cached(e, st, r == 0 ? tokens : again, ms);
        if (r > 0 && memcmp(tokens, again, total * sizeof(int)) != 0)
            die("kv_cache %d+%d: cached generation is not reproducible", st.prompt_len, G);
        times[MODE_CACHE].totals[r] = integrate_steps(all_steps, ms, G);
    }
    for (int r = 0; r < reps; r++) {
        cli_progress_step(index, count, "kv_cache %s %d+%d no_cache rep %d/%d", out->backend, st.prompt_len, G,
                          r + 1, reps);
        ModeTimes *t = &times[MODE_NO_CACHE];
        double *ms = t->steps + (size_t)r * t->n_steps;
        time_uncached(e, st, tokens, t->step_index, t->n_steps, ms);
        t->totals[r] = integrate_steps(t->step_index, ms, t->n_steps);
    }
    if (times[MODE_NO_CACHE].n_steps < G) check_uncached_agrees(e, st, tokens);

    for (int mode = 0; mode < 2; mode++) write_mode(out, c, st, mode, &times[mode], reps, write_steps);
    double speedup = bench_stats(times[1].totals, reps).median_ms / bench_stats(times[0].totals, reps).median_ms;
    double flop_ratio = generation_flops(c, st, MODE_NO_CACHE) / generation_flops(c, st, MODE_CACHE);
    csv_row(&out->speedup, "%s,%d,%d,%d+%d,%.6g,%.6g", out->backend, st.prompt_len, G, st.prompt_len, G, speedup,
            flop_ratio);
    for (int mode = 0; mode < 2; mode++) {
        free(times[mode].steps);
        free(times[mode].totals);
    }
    free(all_steps); free(some_steps); free(tokens); free(again);
}

// Bytes the allocator hands out for a cache of this shape, against the formula
// 2 * L * S * n_kv * hd * sizeof(float).
static void measure_memory(Engine *e, CsvWriter *w, int n_layers, int n_kv, int hd, int context) {
    size_t cache_bytes, measured = e->measure_cache(n_layers, n_kv, hd, context, &cache_bytes);
    size_t formula = 2ull * n_layers * context * n_kv * hd * sizeof(float);
    csv_row(w, "%s,%d,%d,%d,%d,%d,%zu,%zu,%zu", backend_name(e->backend), n_layers, n_kv, hd, context,
            (int)sizeof(float), cache_bytes, measured, formula);
}

// The engine of a backend; the model stays the caller's. max_tokens: the longest sequence.
static Engine open_engine(Backend b, Model *m, int max_tokens) {
#ifdef INFERLAB_CUDA
    if (b == BACKEND_CUDA) return gpu_engine(m, max_tokens);
#endif
    (void)b, (void)max_tokens; // backend_require has ruled out cuda without CUDA
    return cpu_engine(m);
}

static const Setting FULL_SETTINGS[] = {{256, 128}, {1024, 1024}, {32, 64}, {64, 64}, {128, 64}, {512, 64},
                                        {1024, 64}, {32, 32}, {32, 128}, {32, 256}, {32, 512}};
static const Setting QUICK_SETTINGS[] = {{256, 128}, {1024, 1024}, {128, 64}, {16, 64}, {64, 64}, {32, 32}, {32, 128}};

static const char *model_path;

static const LabOption OPTIONS[] = {
    {.name = "model", .kind = LAB_TEXT, .value = &model_path, .arg = "FILE",
     .help = "GGUF checkpoint to generate with", .required = 1},
    {0},
};

enum { TABLE_RUNS, TABLE_SPEEDUP, TABLE_STEPS, TABLE_MEMORY };
static const LabTable TABLES[] = {
    {"kv_cache_runs", "backend,prompt_len,gen_len,mode,prefill_ms,decode_ms_median,decode_ms_p10,decode_ms_p90,"
                      "total_ms_median,total_ms_p10,total_ms_p90,reps,timed_steps,flops",
     "prompt_len, gen_len, mode -> prefill, per-token decode, total times", LAB_BOTH},
    {"kv_cache_speedup", "backend,prompt_len,gen_len,setting,speedup,flop_ratio",
     "measured speed-up and the theoretical FLOP ratio per setting", LAB_BOTH},
    {"kv_cache_steps", "backend,mode,position,step_ms", "latency of each decode step of the longest setting", LAB_BOTH},
    {"kv_cache_memory", "backend,n_layers,n_kv_heads,head_dim,context_len,element_bytes,cache_bytes,"
                        "allocated_bytes,formula_bytes",
     "cache bytes measured vs the formula per shape", LAB_BOTH},
    {0},
};

// The memory table: the model's shape, MQA, twice the layers, at growing contexts.
static void write_memory(Engine *e, CsvWriter *w) {
    const Config *c = e->config;
    int contexts[] = {256, 512, 1024, 2048, 4096};
    int shapes[][2] = {{c->n_layers, c->n_kv_heads}, {c->n_layers, 1}, {2 * c->n_layers, c->n_kv_heads}};
    for (int s = 0; s < 3; s++)
        for (int i = 0; i < 5; i++) measure_memory(e, w, shapes[s][0], shapes[s][1], c->head_dim, contexts[i]);
}

static int run(LabRun *r) {
    Model m;
    Error err;
    if (checkpoint_load(model_path, NULL, &m, NULL, &err) != 0) die("%s", err.msg);
    // The pair settings the seeds quote (256 + 128, 1K + 1K), then prompt and generation sweeps.
    const Setting *settings = r->quick ? QUICK_SETTINGS : FULL_SETTINGS;
    int n_settings = r->quick ? (int)(sizeof QUICK_SETTINGS / sizeof QUICK_SETTINGS[0])
                              : (int)(sizeof FULL_SETTINGS / sizeof FULL_SETTINGS[0]);
    int reps = r->quick ? 1 : 3;
    int longest = 0; // its per-step latencies go to kv_cache_steps.csv
    for (int i = 1; i < n_settings; i++)
        if (settings[i].prompt_len + settings[i].gen_len > settings[longest].prompt_len + settings[longest].gen_len)
            longest = i;
    Engine e = open_engine(r->backend, &m, settings[longest].prompt_len + settings[longest].gen_len);

    Outputs out = {.backend = backend_name(r->backend)};
    out.runs = lab_csv(r, TABLE_RUNS);
    out.speedup = lab_csv(r, TABLE_SPEEDUP);
    out.steps = lab_csv(r, TABLE_STEPS);
    for (int i = 0; i < n_settings; i++) measure_setting(&e, settings[i], reps, i == longest, i, n_settings, &out);
    CsvWriter mem = lab_csv(r, TABLE_MEMORY);
    write_memory(&e, &mem);
    csv_close(&out.runs);
    csv_close(&out.speedup);
    csv_close(&out.steps);
    csv_close(&mem);

    char sum_hex[17];
    if (meta_file_checksum(model_path, sum_hex, &err) != 0) die("%s", err.msg);
    lab_meta(r, "kv_cache_model", "%s", model_path);
    lab_meta(r, "kv_cache_model_fnv1a64", "%s", sum_hex);
#ifdef INFERLAB_CUDA
    if (r->backend == BACKEND_CUDA) {
        char device[256];
        cuda_device_name(device, sizeof device);
        lab_meta(r, "cuda_device", "%s", device);
    }
#endif
    e.close(&e);
    model_free(&m);
    return 0;
}

static const Experiment KV_CACHE = {
    "kv_cache", "--model FILE [options]",
    "What a KV cache buys: the same greedy tokens with the cache (prefill once, one decode step per\n"
    "token) and without it (every token recomputes the whole sequence), timed step by step.",
    OPTIONS, TABLES, LAB_COMMON | LAB_BACKEND, NULL, run};

int main(int argc, char **argv) { return lab_main(&KV_CACHE, argc, argv); }
