// kv_cache/main.c: bin/kv_cache, project 11: what a KV cache buys.
//
//   bin/kv_cache --model out/models/target.gguf [--out out/<hw>] [--profile quick|full] [--backend cpu|cuda]
//       [--real-model out/models/real/smollm2-135m-instruct-q4_1.gguf]
//
// Greedy generation of the same tokens two ways: with a KV cache (prefill the prompt once,
// then one decode step per token) and without (every new token recomputes the whole
// sequence). The run stops with an error if the two ever pick different tokens. Uncached
// steps cost a forward pass over the whole sequence so far; in long generations every
// stride-th of them is timed (column timed_steps) and the total interpolates between them.
//
// --backend cuda runs the same measurements through the same engine on the GPU's ops table:
// fp32 weights (so it computes what the CPU computes, to rounding), the KV cache in device
// memory, logits copied back to the host after every step (the copy waits for the device,
// so wall-clock time around a step covers its GPU work, as the CPU's covers its own).
// Without the cache, each step re-runs the prefill on a scratch session emptied first, on
// both backends; the memory table counts the bytes the backend's allocator hands out (the
// C heap's, or the device's tracking allocator's). Exits 2 ("not run") when no CUDA device
// can be used.
//
// Writes under --out, every row starting with the backend: one table per file for both
// backends, where a run replaces its own backend's rows and keeps the other's:
//   kv_cache_runs.csv    backend, prompt_len, gen_len, mode -> prefill, per-token decode, total times
//   kv_cache_speedup.csv backend, prompt_len, gen_len (setting "P+G") -> measured speed-up and the theoretical FLOP ratio
//   kv_cache_steps.csv   backend, mode, position -> latency of each decode step (the longest setting)
//   kv_cache_memory.csv  backend, n_layers, n_kv_heads, context_len -> measured vs formula bytes
// and, with --real-model (CPU runs only), the published models at the seeds' two settings
// (256 + 128, 1K + 1K; quick: 16 + 8), one repetition each, their own quantised weights:
//   kv_cache_real.csv    backend, model, prompt_len, gen_len -> prefill, cached step, both totals,
//                        speed-up, FLOP ratio and both FLOP counts, parameters and the fp32 KV
//                        bytes a position adds (uncached: at most REAL_TIMED_STEPS steps timed)
#include <stdlib.h>
#include <string.h>

#include "bench.h"
#include "checkpoint.h"
#include "lab.h"
#include "rng.h"
#include "session.h"

#ifdef INFERLAB_CUDA
#include "kernels_cuda.h"
#endif

typedef enum { MODE_CACHE = 0, MODE_NO_CACHE = 1 } Mode;
static const char *MODE_NAMES[] = {"cache", "no_cache"};

typedef struct {
    int prompt_len, gen_len;
} Setting;

// ---- the model on a backend -----------------------------------------------------------------

// Both modes run the same engine (fp32 weights on either backend, so the GPU computes what
// the CPU computes, to rounding): the cached one in a session per generation, the uncached
// one in a scratch session emptied before every forward. Logits always come back to the
// host (on CUDA the copy waits for the device, so wall-clock time covers its work).
typedef struct {
    Backend backend;
    const Ops *ops;
    const Config *config;
    Engine engine;
    Session scratch; // the no-cache baseline's, for the longest sequence
} Runner;

static void runner_open(Runner *r, Backend b, const Model *m, int max_tokens) {
    r->backend = b;
    r->ops = backend_open(b);
    r->config = &m->config;
    engine_open(&r->engine, m, r->ops, DTYPE_F32, 512, max_tokens);
    session_open(&r->scratch, &r->engine, max_tokens);
}

static void runner_close(Runner *r) {
    session_close(&r->scratch);
    engine_close(&r->engine);
    backend_close(r->backend);
}

static void feed(Session *s, const int *tokens, int n, float *all_logits, const char *what) {
    Error err;
    if (session_prefill(s, tokens, n, all_logits, &err)) die("kv_cache %s: %s", what, err.msg);
}

// The no-cache forward: the whole sequence from nothing. logits (n, V) if all_logits, else
// the last position's in r->scratch.logits.
static void forward_full(Runner *r, const int *tokens, int n, float *all_logits) {
    session_truncate(&r->scratch, 0);
    feed(&r->scratch, tokens, n, all_logits, "uncached forward");
}

// ---- the measurements ------------------------------------------------------------------------

// Cached greedy generation, every step timed. Step 0 prefills the prompt and picks token
// P; step i > 0 decodes token P + i - 1 and picks token P + i.
// tokens (P + G): prompt in, generated tokens out; step_ms (G).
static void generate_cached(Runner *r, Setting st, int *tokens, double *step_ms) {
    int V = r->config->vocab_size;
    Session s;
    session_open(&s, &r->engine, st.prompt_len + st.gen_len);
    for (int i = 0; i < st.gen_len; i++) {
        int n = st.prompt_len + i; // tokens known so far
        double t0 = now_seconds();
        feed(&s, i == 0 ? tokens : tokens + n - 1, i == 0 ? n : 1, NULL, "cached generation");
        tokens[n] = sampler_argmax(s.logits, V);
        step_ms[i] = 1e3 * (now_seconds() - t0);
    }
    session_close(&s);
}

// Uncached generation: step i recomputes the whole sequence of P + i tokens. Its cost
// depends only on that length (smoothly: matmuls linear in it, attention quadratic), so long
// generations time every stride-th step (at most max_timed >= 2, always the first and the
// last) and integrate the total from them.
#define MAX_TIMED_STEPS 64  // the zoo's target
#define REAL_TIMED_STEPS 16 // a published model's: a 2K-token recomputation of SmolLM2-135M takes seconds

static int timed_steps(int gen_len, int max_timed, int *steps) {
    int stride = (gen_len - 1 + max_timed - 2) / (max_timed - 1);
    if (stride < 1) stride = 1;
    int n = 0;
    for (int i = 0; i < gen_len; i += stride) steps[n++] = i;
    if (steps[n - 1] != gen_len - 1) steps[n++] = gen_len - 1;
    return n;
}

// Time the uncached steps listed in `steps` on the cached run's tokens; each must pick
// the same token the cached run picked. step_ms (n_steps).
static void time_uncached(Runner *r, Setting st, const int *tokens, const int *steps, int n_steps, double *step_ms) {
    int V = r->config->vocab_size;
    for (int k = 0; k < n_steps; k++) {
        int n = st.prompt_len + steps[k];
        double t0 = now_seconds();
        forward_full(r, tokens, n, NULL);
        int picked = sampler_argmax(r->scratch.logits, V);
        step_ms[k] = 1e3 * (now_seconds() - t0);
        if (picked != tokens[n])
            die("kv_cache %d+%d: without the cache position %d picks token %d, with it %d", st.prompt_len, st.gen_len,
                n, picked, tokens[n]);
    }
}

// Uncached generation picks exactly the cached run's tokens iff, in one forward pass over
// the whole sequence, the argmax at every position P-1 .. P+G-2 is the next token (by
// induction over the steps). Covers the steps time_uncached skipped.
static void check_uncached_agrees(Runner *r, Setting st, const int *tokens) {
    int n = st.prompt_len + st.gen_len - 1, V = r->config->vocab_size;
    float *logits = mallocCheck((size_t)n * V * sizeof(float)); // (n, V)
    forward_full(r, tokens, n, logits);
    for (int p = st.prompt_len - 1; p < n; p++)
        if (sampler_argmax(logits + (size_t)p * V, V) != tokens[p + 1])
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

// Both modes of one setting.
typedef struct {
    Setting st;
    int reps;
    ModeTimes mode[2];
} SettingTimes;

// The repetition whose total is the median: its step times (n_steps).
static const double *median_steps(const ModeTimes *t, int reps) {
    return t->steps + (size_t)median_index(t->totals, reps) * t->n_steps;
}

// decode = every timed step after the first (the prompt pass), of the median repetition
static BenchStats decode_stats(const ModeTimes *t, int reps) {
    return t->n_steps > 1 ? bench_stats(median_steps(t, reps) + 1, t->n_steps - 1) : (BenchStats){0};
}

// Uncached over cached total time (medians), and the same ratio of theoretical FLOPs.
static double setting_speedup(const SettingTimes *s) {
    return bench_stats(s->mode[MODE_NO_CACHE].totals, s->reps).median_ms / bench_stats(s->mode[MODE_CACHE].totals, s->reps).median_ms;
}
static double setting_flop_ratio(const Config *c, Setting st) {
    return generation_flops(c, st, MODE_NO_CACHE) / generation_flops(c, st, MODE_CACHE);
}

static void write_mode(Outputs *out, const Config *c, const SettingTimes *s, Mode mode, int write_steps) {
    const ModeTimes *t = &s->mode[mode];
    Setting st = s->st;
    const double *kept = median_steps(t, s->reps);
    BenchStats tot = bench_stats(t->totals, s->reps), dec = decode_stats(t, s->reps);
    csv_row(&out->runs, "%s,%d,%d,%s,%.6g,%.6g,%.6g,%.6g,%.6g,%.6g,%.6g,%d,%d,%.6g", out->backend, st.prompt_len, st.gen_len,
            MODE_NAMES[mode], kept[0], dec.median_ms, dec.p10_ms, dec.p90_ms, tot.median_ms, tot.p10_ms, tot.p90_ms,
            s->reps, t->n_steps, generation_flops(c, st, mode));
    if (write_steps)
        for (int k = 1; k < t->n_steps; k++)
            csv_row(&out->steps, "%s,%s,%d,%.6g", out->backend, MODE_NAMES[mode], st.prompt_len + t->step_index[k] - 1,
                    kept[k]);
}

static void write_setting(Outputs *out, const Config *c, const SettingTimes *s, int write_steps) {
    for (int mode = 0; mode < 2; mode++) write_mode(out, c, s, mode, write_steps);
    csv_row(&out->speedup, "%s,%d,%d,%d+%d,%.6g,%.6g", out->backend, s->st.prompt_len, s->st.gen_len, s->st.prompt_len,
            s->st.gen_len, setting_speedup(s), setting_flop_ratio(c, s->st));
}

static void setting_times_free(SettingTimes *s) {
    for (int mode = 0; mode < 2; mode++) {
        free(s->mode[mode].steps);
        free(s->mode[mode].totals);
        free(s->mode[mode].step_index);
    }
}

// Generate with the cache `reps` times, then time at most max_timed uncached steps `reps` times
// on the same tokens; the repetition whose total is the median is the one reported.
// `index` of `count` settings and `what` (the backend, or the model) for the progress line.
static void measure_setting(Runner *run, Setting st, int reps, int max_timed, int index, int count, const char *what,
                            SettingTimes *out) {
    const Config *c = run->config;
    int total = st.prompt_len + st.gen_len, G = st.gen_len;
    int *tokens = mallocCheck(total * sizeof(int)), *again = mallocCheck(total * sizeof(int));
    uint64_t rng = rng_seed(1000003u * st.prompt_len + st.gen_len);
    for (int i = 0; i < st.prompt_len; i++) tokens[i] = (int)(rng_u64(&rng) % c->vocab_size);
    memcpy(again, tokens, st.prompt_len * sizeof(int));

    int *all_steps = mallocCheck(G * sizeof(int)), *some_steps = mallocCheck(G * sizeof(int));
    for (int i = 0; i < G; i++) all_steps[i] = i;
    *out = (SettingTimes){st, reps,
                          {{G, all_steps, mallocCheck((size_t)reps * G * sizeof(double)), mallocCheck(reps * sizeof(double))},
                           {timed_steps(G, max_timed, some_steps), some_steps, mallocCheck((size_t)reps * G * sizeof(double)),
                            mallocCheck(reps * sizeof(double))}}};
    for (int rep = 0; rep < reps; rep++) {
        progress_step(index, count, "kv_cache %s %d+%d cache rep %d/%d", what, st.prompt_len, G, rep + 1, reps);
        double *ms = out->mode[MODE_CACHE].steps + (size_t)rep * G;
        generate_cached(run, st, rep == 0 ? tokens : again, ms);
        if (rep > 0 && memcmp(tokens, again, total * sizeof(int)) != 0)
            die("kv_cache %d+%d: cached generation is not reproducible", st.prompt_len, G);
        out->mode[MODE_CACHE].totals[rep] = integrate_steps(all_steps, ms, G);
    }
    for (int rep = 0; rep < reps; rep++) {
        progress_step(index, count, "kv_cache %s %d+%d no_cache rep %d/%d", what, st.prompt_len, G, rep + 1, reps);
        ModeTimes *t = &out->mode[MODE_NO_CACHE];
        double *ms = t->steps + (size_t)rep * t->n_steps;
        time_uncached(run, st, tokens, t->step_index, t->n_steps, ms);
        t->totals[rep] = integrate_steps(t->step_index, ms, t->n_steps);
    }
    if (out->mode[MODE_NO_CACHE].n_steps < G) check_uncached_agrees(run, st, tokens);
    free(tokens), free(again);
}

// Bytes the allocator hands out for a cache of this shape, against the formula
// 2 * L * S * n_kv * hd * sizeof(float).
static void measure_memory(Runner *r, CsvWriter *w, int n_layers, int n_kv, int hd, int context) {
    size_t before = r->ops->allocated_bytes();
    KVCache cache;
    kv_cache_alloc(&cache, r->ops, n_layers, n_kv, hd, context);
    size_t measured = r->ops->allocated_bytes() - before, cache_bytes = kv_cache_bytes(&cache);
    kv_cache_free(&cache);
    size_t formula = 2ull * n_layers * context * n_kv * hd * sizeof(float);
    csv_row(w, "%s,%d,%d,%d,%d,%d,%zu,%zu,%zu", backend_name(r->backend), n_layers, n_kv, hd, context,
            (int)sizeof(float), cache_bytes, measured, formula);
}

static const Setting FULL_SETTINGS[] = {{256, 128}, {1024, 1024}, {32, 64}, {64, 64}, {128, 64}, {512, 64},
                                        {1024, 64}, {32, 32}, {32, 128}, {32, 256}, {32, 512}};
static const Setting QUICK_SETTINGS[] = {{256, 128}, {1024, 1024}, {128, 64}, {16, 64}, {64, 64}, {32, 32}, {32, 128}};

// The published models (--real-model) at the seeds' two settings only: without the cache a
// 1K + 1K generation recomputes up to 2K positions of a 135M-parameter model per token. One
// repetition each (the cached decode median is over every one of its steps); quick: a few
// tokens test the path.
static const Setting REAL_SETTINGS[] = {{256, 128}, {1024, 1024}};
static const Setting QUICK_REAL_SETTINGS[] = {{16, 8}};

static const char *model_path, *real_models;

static const LabOption OPTIONS[] = {
    {.name = "model", .kind = LAB_TEXT, .value = &model_path, .arg = "FILE",
     .help = "GGUF checkpoint to generate with", .required = 1},
    {.name = "real-model", .kind = LAB_TEXT, .value = &real_models, .arg = "FILE[,FILE]",
     .help = "published models (GGUF, comma-separated) measured at the seeds' two settings beside the target (CPU)"},
    {0},
};

enum { TABLE_RUNS, TABLE_SPEEDUP, TABLE_STEPS, TABLE_MEMORY, TABLE_REAL };
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
    {"kv_cache_real", "backend,model,prompt_len,gen_len,setting,prefill_ms,decode_ms_median,cache_total_ms,"
                      "no_cache_total_ms,speedup,flop_ratio,cache_flops,no_cache_flops,reps,timed_steps,n_params,"
                      "kv_bytes_per_token",
     "the --real-model files: cached vs uncached at the seeds' settings", LAB_CPU},
    {0},
};

// The memory table: the model's shape, MQA, twice the layers, at growing contexts.
static void write_memory(Runner *e, CsvWriter *w) {
    const Config *c = e->config;
    int contexts[] = {256, 512, 1024, 2048, 4096};
    int shapes[][2] = {{c->n_layers, c->n_kv_heads}, {c->n_layers, 1}, {2 * c->n_layers, c->n_kv_heads}};
    for (int s = 0; s < 3; s++)
        for (int i = 0; i < 5; i++) measure_memory(e, w, shapes[s][0], shapes[s][1], c->head_dim, contexts[i]);
}

// The index of the setting of most positions (the first of them).
static int longest_setting(const Setting *settings, int n) {
    int longest = 0;
    for (int i = 1; i < n; i++)
        if (settings[i].prompt_len + settings[i].gen_len > settings[longest].prompt_len + settings[longest].gen_len)
            longest = i;
    return longest;
}

#define MAX_REAL_MODELS 4

typedef struct {
    char name[128]; // the file name less its extension, as real_models.csv names models
    Model model;
} RealModel;

// The --real-model files, loaded and checked against the settings before anything is measured
// (bad input stops the run before it writes a table). Returns how many.
static int load_real_models(RealModel *out, const Setting *settings, int n_settings) {
    char *list = strdup(real_models), *paths[MAX_REAL_MODELS];
    Error err;
    int n = split_comma_list(list, paths, MAX_REAL_MODELS, &err);
    if (n < 0) die("kv_cache: --real-model: %s", err.msg);
    for (int k = 0; k < n; k++) {
        const char *path = paths[k];
        RealModel *rm = &out[k];
        if (checkpoint_load(path, NULL, &rm->model, NULL, &err) != 0) die("kv_cache: --real-model: %s", err.msg);
        if (path_stem(rm->name, sizeof rm->name, path, &err)) die("kv_cache: --real-model: %s", err.msg);
        for (int i = 0; i < n_settings; i++)
            if (settings[i].prompt_len + settings[i].gen_len > rm->model.config.seq_len)
                die("kv_cache: --real-model %s: %d + %d positions exceed its context of %d", path, settings[i].prompt_len,
                    settings[i].gen_len, rm->model.config.seq_len);
    }
    free(list);
    return n;
}

// Each real model at the seeds' settings (one table row a setting): prefill and the cached
// decode step (median), both totals, the speed-up, the FLOP ratio and both FLOP counts, and the
// fp32 KV bytes a position adds over every layer. Frees the models.
static void measure_real_models(LabRun *r, RealModel *models, int n_models, const Setting *settings, int n) {
    CsvWriter w = lab_csv(r, TABLE_REAL);
    for (int k = 0; k < n_models; k++) {
        const Config *c = &models[k].model.config;
        Setting longest = settings[longest_setting(settings, n)];
        Runner runner;
        runner_open(&runner, BACKEND_CPU, &models[k].model, longest.prompt_len + longest.gen_len);
        double kv_bytes = 2.0 * config_kv_layers(c) * c->n_kv_heads * c->head_dim * sizeof(float);
        for (int i = 0; i < n; i++) {
            SettingTimes t;
            measure_setting(&runner, settings[i], 1, REAL_TIMED_STEPS, i, n, models[k].name, &t);
            const ModeTimes *cached = &t.mode[MODE_CACHE], *uncached = &t.mode[MODE_NO_CACHE];
            csv_row(&w, "cpu,%s,%d,%d,%d+%d,%.6g,%.6g,%.6g,%.6g,%.6g,%.6g,%.6g,%.6g,%d,%d,%.6g,%.6g", models[k].name,
                    settings[i].prompt_len, settings[i].gen_len, settings[i].prompt_len, settings[i].gen_len,
                    cached->steps[0], decode_stats(cached, 1).median_ms, cached->totals[0], uncached->totals[0],
                    setting_speedup(&t), setting_flop_ratio(c, settings[i]), generation_flops(c, settings[i], MODE_CACHE),
                    generation_flops(c, settings[i], MODE_NO_CACHE), 1, uncached->n_steps, (double)model_param_count(c),
                    kv_bytes);
            setting_times_free(&t);
        }
        runner_close(&runner);
        model_free(&models[k].model);
    }
    csv_close(&w);
}

static int run(LabRun *r) {
    Model m;
    Error err;
    if (checkpoint_load(model_path, NULL, &m, NULL, &err) != 0) die("%s", err.msg);
    const Setting *real_settings = r->quick ? QUICK_REAL_SETTINGS : REAL_SETTINGS;
    int n_real_settings = r->quick ? (int)(sizeof QUICK_REAL_SETTINGS / sizeof QUICK_REAL_SETTINGS[0])
                                   : (int)(sizeof REAL_SETTINGS / sizeof REAL_SETTINGS[0]);
    RealModel real[MAX_REAL_MODELS];
    int n_real = real_models && r->backend == BACKEND_CPU ? load_real_models(real, real_settings, n_real_settings) : 0;
    // The pair settings the seeds quote (256 + 128, 1K + 1K), then prompt and generation sweeps.
    const Setting *settings = r->quick ? QUICK_SETTINGS : FULL_SETTINGS;
    int n_settings = r->quick ? (int)(sizeof QUICK_SETTINGS / sizeof QUICK_SETTINGS[0])
                              : (int)(sizeof FULL_SETTINGS / sizeof FULL_SETTINGS[0]);
    int reps = r->quick ? 1 : 3;
    int longest = longest_setting(settings, n_settings); // its per-step latencies go to kv_cache_steps.csv
    Runner runner;
    runner_open(&runner, r->backend, &m, settings[longest].prompt_len + settings[longest].gen_len);

    Outputs out = {.backend = backend_name(r->backend)};
    out.runs = lab_csv(r, TABLE_RUNS);
    out.speedup = lab_csv(r, TABLE_SPEEDUP);
    out.steps = lab_csv(r, TABLE_STEPS);
    for (int i = 0; i < n_settings; i++) {
        SettingTimes t;
        measure_setting(&runner, settings[i], reps, MAX_TIMED_STEPS, i, n_settings, out.backend, &t);
        write_setting(&out, runner.config, &t, i == longest);
        setting_times_free(&t);
    }
    CsvWriter mem = lab_csv(r, TABLE_MEMORY);
    write_memory(&runner, &mem);
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
    runner_close(&runner);
    model_free(&m);
    if (n_real) measure_real_models(r, real, n_real, real_settings, n_real_settings);
    lab_meta(r, "kv_cache_real_models", "%s", n_real ? real_models : "none");
    return 0;
}

static const Experiment KV_CACHE = {
    "kv_cache", "--model FILE [options]",
    "What a KV cache buys: the same greedy tokens with the cache (prefill once, one decode step per\n"
    "token) and without it (every token recomputes the whole sequence), timed step by step.",
    OPTIONS, TABLES, LAB_COMMON | LAB_BACKEND, NULL, run};

int main(int argc, char **argv) { return lab_main(&KV_CACHE, argc, argv); }
