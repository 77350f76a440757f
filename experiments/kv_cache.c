// kv_cache.c: bin/kv_cache, project 11: what a KV cache buys.
//
//   bin/kv_cache --model out/models/target.gguf [--out out/<hw>] [--profile quick|full]
//
// Greedy generation of the same tokens two ways: with a KV cache (prefill the prompt once,
// then one decode step per token) and without (every new token recomputes the whole
// sequence). The run stops with an error if the two ever pick different tokens.
// Writes under --out:
//   kv_cache_runs.csv    prompt_len, gen_len, mode -> prefill, per-token decode, total times
//   kv_cache_speedup.csv prompt_len, gen_len -> measured speed-up and the theoretical FLOP ratio
//   kv_cache_steps.csv   mode, position -> latency of each decode step (the longest setting)
//   kv_cache_memory.csv  n_layers, n_kv_heads, context_len -> measured vs formula bytes
#include <malloc.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"
#include "checkpoint.h"
#include "cli.h"
#include "csv.h"
#include "kernels.h"
#include "meta.h"
#include "model.h"
#include "rng.h"

typedef enum { MODE_CACHE = 0, MODE_NO_CACHE = 1 } Mode;
static const char *MODE_NAMES[] = {"cache", "no_cache"};

typedef struct {
    int prompt_len, gen_len;
} Setting;

// One greedy generation: the tokens picked and the time of every step. Step 0 is the
// prompt pass (prefill, or the first full forward); step i > 0 produced token i.
typedef struct {
    int *tokens;      // (prompt_len + gen_len)
    double *step_ms;  // (gen_len)
} Run;

static int argmax(const float *x, int n) {
    int best = 0;
    for (int i = 1; i < n; i++)
        if (x[i] > x[best]) best = i;
    return best;
}

static void generate(Model *m, Mode mode, const int *prompt, Setting st, Run *run) {
    const Config *c = &m->config;
    int total = st.prompt_len + st.gen_len;
    float *logits = mallocCheck((size_t)c->vocab_size * sizeof(float));
    memcpy(run->tokens, prompt, st.prompt_len * sizeof(int));
    KVCache cache;
    RunState s;
    if (mode == MODE_CACHE) {
        kv_cache_alloc(&cache, c->n_layers, c->n_kv_heads, c->head_dim, total);
        runstate_alloc(&s, c, st.prompt_len < 512 ? st.prompt_len : 512);
    }
    KVCache *caches[1] = {&cache};
    for (int i = 0; i < st.gen_len; i++) {
        int n = st.prompt_len + i; // tokens known so far
        double t0 = now_seconds();
        if (mode == MODE_NO_CACHE) model_forward_full(m, run->tokens, n, logits, 0);
        else if (i == 0) model_prefill(m, &s, &cache, run->tokens, n, logits, 0);
        else model_decode(m, &s, caches, &run->tokens[n - 1], 1, logits);
        run->tokens[n] = argmax(logits, c->vocab_size);
        run->step_ms[i] = 1e3 * (now_seconds() - t0);
    }
    if (mode == MODE_CACHE) {
        runstate_free(&s);
        kv_cache_free(&cache);
    }
    free(logits);
}

static double sum(const double *x, int n) {
    double s = 0.0;
    for (int i = 0; i < n; i++) s += x[i];
    return s;
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
    CsvWriter runs, speedup, steps;
} Outputs;

// Generate with both modes `reps` times; keep the run whose total time is the median.
static void measure_setting(Model *m, Setting st, int reps, int write_steps, Outputs *out) {
    const Config *c = &m->config;
    int total = st.prompt_len + st.gen_len;
    int *prompt = mallocCheck(st.prompt_len * sizeof(int));
    uint64_t rng = rng_seed(1000003u * st.prompt_len + st.gen_len);
    for (int i = 0; i < st.prompt_len; i++) prompt[i] = (int)(rng_u64(&rng) % c->vocab_size);

    double median_total[2];
    int *reference_tokens = mallocCheck(total * sizeof(int));
    for (int mode = 0; mode < 2; mode++) {
        Run run = {mallocCheck(total * sizeof(int)), mallocCheck(st.gen_len * sizeof(double))};
        double *totals = mallocCheck(reps * sizeof(double));
        double *steps = mallocCheck((size_t)reps * st.gen_len * sizeof(double)); // (reps, gen_len)
        for (int r = 0; r < reps; r++) {
            cli_progress("kv_cache %d+%d %s rep %d/%d", st.prompt_len, st.gen_len, MODE_NAMES[mode], r + 1, reps);
            generate(m, mode, prompt, st, &run);
            if (mode == MODE_CACHE && r == 0) memcpy(reference_tokens, run.tokens, total * sizeof(int));
            else if (memcmp(reference_tokens, run.tokens, total * sizeof(int)) != 0)
                die("kv_cache %d+%d: %s generation picked different tokens than cached generation", st.prompt_len,
                    st.gen_len, MODE_NAMES[mode]);
            totals[r] = sum(run.step_ms, st.gen_len);
            memcpy(steps + (size_t)r * st.gen_len, run.step_ms, st.gen_len * sizeof(double));
        }
        const double *kept_steps = steps + (size_t)median_index(totals, reps) * st.gen_len;
        BenchStats tot = bench_stats(totals, reps);
        median_total[mode] = tot.median_ms;
        BenchStats dec = st.gen_len > 1 ? bench_stats(kept_steps + 1, st.gen_len - 1) : (BenchStats){0};
        csv_row(&out->runs, "%d,%d,%s,%.6g,%.6g,%.6g,%.6g,%.6g,%.6g,%.6g,%d,%.6g", st.prompt_len, st.gen_len,
                MODE_NAMES[mode], kept_steps[0], dec.median_ms, dec.p10_ms, dec.p90_ms, tot.median_ms, tot.p10_ms,
                tot.p90_ms, reps, generation_flops(c, st, mode));
        if (write_steps)
            for (int i = 1; i < st.gen_len; i++)
                csv_row(&out->steps, "%s,%d,%.6g", MODE_NAMES[mode], st.prompt_len + i - 1, kept_steps[i]);
        free(run.tokens); free(run.step_ms); free(totals); free(steps);
    }
    double flop_ratio = generation_flops(c, st, MODE_NO_CACHE) / generation_flops(c, st, MODE_CACHE);
    csv_row(&out->speedup, "%d,%d,%.6g,%.6g", st.prompt_len, st.gen_len, median_total[1] / median_total[0], flop_ratio);
    free(prompt);
    free(reference_tokens);
}

// Bytes the allocator hands out for a cache of this shape (mallinfo2 before / after),
// against the formula 2 * L * S * n_kv * hd * sizeof(float).
static void measure_memory(CsvWriter *w, int n_layers, int n_kv, int hd, int context) {
    struct mallinfo2 before = mallinfo2();
    KVCache cache;
    kv_cache_alloc(&cache, n_layers, n_kv, hd, context);
    struct mallinfo2 after = mallinfo2();
    size_t measured = (after.uordblks + after.hblkhd) - (before.uordblks + before.hblkhd);
    size_t formula = 2ull * n_layers * context * n_kv * hd * sizeof(float);
    csv_row(w, "%d,%d,%d,%d,%d,%zu,%zu,%zu", n_layers, n_kv, hd, context, (int)sizeof(float), kv_cache_bytes(&cache),
            measured, formula);
    kv_cache_free(&cache);
}

int main(int argc, char **argv) {
    static const struct option opts[] = {CLI_COMMON_OPTIONS, {"model", required_argument, 0, 'm'}, {0, 0, 0, 0}};
    CliCommon common;
    cli_common_defaults(&common);
    const char *model_path = NULL;
    Error err;
    for (int c; (c = getopt_long(argc, argv, "", opts, NULL)) != -1;) {
        if (c == 'm') model_path = optarg;
        else if (cli_common_option(&common, c, optarg, &err) != 1)
            cli_usage_error("kv_cache", c == '?' ? "unknown option" : err.msg);
    }
    if (common.help) {
        printf("usage: bin/kv_cache --model FILE [options]\n"
               "  --model FILE     GGUF checkpoint to generate with\n" CLI_COMMON_HELP);
        return 0;
    }
    if (!model_path) cli_usage_error("kv_cache", "--model is required");
    if (optind < argc) cli_usage_error("kv_cache", "unexpected argument");
    kernels_set_threads(common.threads);

    Model m;
    if (checkpoint_load(model_path, NULL, &m, NULL, &err) != 0) die("%s", err.msg);
    if (meta_make_dir(common.out_dir, &err) != 0) die("%s", err.msg);

    int quick = strcmp(common.profile, "quick") == 0;
    // The pair settings the seeds quote (256 + 128, 1K + 1K), then prompt and generation sweeps.
    static const Setting full_settings[] = {{256, 128}, {1024, 1024}, {32, 64}, {64, 64}, {128, 64}, {512, 64},
                                            {1024, 64}, {32, 32}, {32, 128}, {32, 256}, {32, 512}};
    static const Setting quick_settings[] = {{64, 32}, {128, 64}, {16, 16}, {32, 16}, {16, 32}};
    const Setting *settings = quick ? quick_settings : full_settings;
    int n_settings = quick ? 5 : (int)(sizeof full_settings / sizeof full_settings[0]);
    int reps = quick ? 1 : 3;

    char path[1024];
    Outputs out;
    snprintf(path, sizeof path, "%s/kv_cache_runs.csv", common.out_dir);
    out.runs = csv_open(path, "prompt_len,gen_len,mode,prefill_ms,decode_ms_median,decode_ms_p10,decode_ms_p90,"
                              "total_ms_median,total_ms_p10,total_ms_p90,reps,flops");
    snprintf(path, sizeof path, "%s/kv_cache_speedup.csv", common.out_dir);
    out.speedup = csv_open(path, "prompt_len,gen_len,speedup,flop_ratio");
    snprintf(path, sizeof path, "%s/kv_cache_steps.csv", common.out_dir);
    out.steps = csv_open(path, "mode,position,step_ms");
    for (int i = 0; i < n_settings; i++) measure_setting(&m, settings[i], reps, i == 1, &out);
    cli_progress_done();

    snprintf(path, sizeof path, "%s/kv_cache_memory.csv", common.out_dir);
    CsvWriter mem = csv_open(path, "n_layers,n_kv_heads,head_dim,context_len,element_bytes,cache_bytes,"
                                   "allocated_bytes,formula_bytes");
    const Config *c = &m.config;
    int contexts[] = {256, 512, 1024, 2048, 4096};
    int shapes[][2] = {{c->n_layers, c->n_kv_heads}, {c->n_layers, 1}, {2 * c->n_layers, c->n_kv_heads}};
    for (int s = 0; s < 3; s++)
        for (int i = 0; i < 5; i++) measure_memory(&mem, shapes[s][0], shapes[s][1], c->head_dim, contexts[i]);
    csv_close(&out.runs);
    csv_close(&out.speedup);
    csv_close(&out.steps);
    csv_close(&mem);

    HwInfo hw;
    hw_probe(&hw);
    char sum_hex[17];
    if (meta_file_checksum(model_path, sum_hex, &err) != 0) die("%s", err.msg);
    MetaEntry extra[] = {{"kv_cache_model_fnv1a64", sum_hex}};
    if (meta_write(common.out_dir, &hw, common.profile, extra, 1, &err) != 0) die("%s", err.msg);
    model_free(&m);
    return 0;
}
