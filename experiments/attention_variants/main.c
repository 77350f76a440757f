// attention_variants/main.c: bin/attention_variants, project 12: what each attention
// variant (MHA, GQA, MQA, and whatever else the zoo trains as role "attention") costs in KV
// cache, buys in speed and loses in quality.
//
//   bin/attention_variants [--models out/models/<profile>] [--presets templates/model_presets.csv]
//                          [--real-model out/models/real/gemma-3-270m-q4_k_m.gguf[,FILE]]
//                          [--out out/<hw>] [--profile quick|full] [--threads N]
//
// The variants are the zoo's models of role "attention" (zoo.h), in the zoo's order, trained
// alike by bin/train into the models directory. Quality is read from bin/train's records there
// (<name>.summary.csv: validation bits per byte, and passkey exact-match accuracy at the
// training context over held-out keys, the mean over needle depths), not re-evaluated. Per
// variant the program
//   - computes the KV elements and bytes a token costs by the formula (variants.h) and
//     measures what the allocator hands out for caches of 256 .. 4096 positions;
//   - times prefill and decode on the CPU at contexts 256, 1K and 4K: one untimed warm-up
//     repetition, then `reps` repetitions of (prefill `context` random tokens into the emptied
//     cache, timed as one; then decode_steps single-token steps at positions context,
//     context + 1, ..., each timed). Median, p10 and p90 over the prefills and over all decode
//     steps. The models are trained at a shorter context (128 quick, 256 full): the engine runs
//     any position its cache holds (it is opened with room for 4K + decode_steps keys), and
//     the time of a step depends on how many positions it attends to, not on what it predicts;
//   - computes how many sequences of 256 .. 32K tokens fit a 1 GiB KV budget (the formula).
// For the real models of the presets table it computes the KV elements and fp16 bytes per
// token, the reduction against the same model with full MHA, and the context whose cache
// alone fits in 80 GB (and what is left beside fp16 weights). For the published models of
// --real-model (GGUF files the engine runs: SmolLM2's GQA, Gemma 3's MQA with windowed layers) it
// computes the engine's fp32 cache at contexts 256 .. 8K by the formula and measures the
// allocator's, per layer kind, against the same shape with MHA in every layer: no timing.
//
// Writes under --out:
//   attention_variants_memory.csv  backend, variant, context_len -> formula and allocated bytes
//   attention_variants_speed.csv   backend, variant, context_len -> prefill and decode ms (median,
//                                  p10, p90), tokens/s, the sample counts
//   attention_variants_budget.csv  variant, context_len -> sequences that fit the 1 GiB budget
//   attention_variants_presets.csv model -> KV per token (fp16), reduction vs MHA, 80 GB context
//   attention_variants_real.csv    model, context_len -> KV bytes (formula, allocated, per layer
//                                  kind), the same shape with MHA, the reduction (with --real-model)
//   attention_variants.csv         variant -> params, KV per token (formula and measured), bits
//                                  per byte, passkey accuracy, their cost against MHA, decode
//                                  tokens/s at each context (written last)
// Columns: *_per_token_layer is per token and per layer of the model, averaged over its layers;
// kv_reduction_vs_mha = MHA's bytes / the variant's; bpb_cost_vs_mha = bits per byte - MHA's;
// passkey_cost_vs_mha = MHA's accuracy - the variant's.
#include <stdlib.h>
#include <string.h>

#include "bench.h"
#include "checkpoint.h"
#include "lab.h"
#include "rng.h"
#include "session.h"
#include "variants.h"
#include "zoo.h"

#define N_CONTEXTS 3
static const int CONTEXTS[N_CONTEXTS] = {256, 1024, 4096};          // timed
static const int MEMORY_CONTEXTS[] = {256, 512, 1024, 2048, 4096};   // allocated
static const int BUDGET_CONTEXTS[] = {256, 1024, 4096, 32768};       // fitted to the budget
#define KV_BUDGET_BYTES (1L << 30)                                   // 1 GiB
#define PRESET_MEMORY_BYTES 80e9                                     // an 80 GB accelerator
#define MAX_ROWS 512                                                 // a prefill chunk

typedef struct {
    int reps;         // timed repetitions after one warm-up
    int decode_steps; // timed decode steps per repetition
} Sweep;

static const Sweep FULL_SWEEP = {.reps = 3, .decode_steps = 32}, QUICK_SWEEP = {.reps = 1, .decode_steps = 8};

// One variant: its zoo entry, its weights and record, and what was measured.
typedef struct {
    const ZooModel *zoo;
    Model model;
    AvRecord record;
    AvKv kv;
    double allocated_per_token_layer; // at the largest memory context
    double decode_tok_s[N_CONTEXTS];
} Variant;

// ---- timing -----------------------------------------------------------------------------------

static void feed(Session *s, const int *tokens, int n, const char *what) {
    Error err;
    if (session_prefill(s, tokens, n, NULL, &err)) die("attention_variants %s: %s", what, err.msg);
}

// One repetition: prefill `context` tokens into the emptied cache, then decode `steps` more
// one at a time. prefill_ms (1), decode_ms (steps).
static void run_once(Session *s, const int *tokens, int context, int steps, double *prefill_ms, double *decode_ms) {
    session_truncate(s, 0);
    double t0 = now_seconds();
    feed(s, tokens, context, "prefill");
    *prefill_ms = 1e3 * (now_seconds() - t0);
    for (int i = 0; i < steps; i++) {
        t0 = now_seconds();
        feed(s, tokens + context + i, 1, "decode");
        decode_ms[i] = 1e3 * (now_seconds() - t0);
    }
}

typedef struct {
    BenchStats prefill, decode;
} ContextTimes;

static ContextTimes time_context(Engine *e, int context, Sweep sw) {
    int n = context + sw.decode_steps, V = e->config.vocab_size;
    int *tokens = mallocCheck((size_t)n * sizeof(int));
    uint64_t rng = rng_seed(1000003u * (uint64_t)context);
    for (int i = 0; i < n; i++) tokens[i] = (int)(rng_u64(&rng) % (uint64_t)V);
    double *prefill = mallocCheck((size_t)sw.reps * sizeof(double));
    double *decode = mallocCheck((size_t)sw.reps * sw.decode_steps * sizeof(double));
    Session s;
    session_open(&s, e, n);
    run_once(&s, tokens, context, sw.decode_steps, prefill, decode); // warm-up, overwritten
    for (int rep = 0; rep < sw.reps; rep++)
        run_once(&s, tokens, context, sw.decode_steps, prefill + rep, decode + (size_t)rep * sw.decode_steps);
    ContextTimes t = {bench_stats(prefill, sw.reps), bench_stats(decode, sw.reps * sw.decode_steps)};
    session_close(&s);
    free(tokens);
    free(prefill);
    free(decode);
    return t;
}

// ---- per variant --------------------------------------------------------------------------

typedef struct {
    CsvWriter memory, speed, budget;
} Outputs;

static void load_variant(Variant *v, const ZooModel *zm, const char *dir) {
    char path[1024];
    Error err;
    v->zoo = zm;
    zoo_path(path, sizeof path, dir, zm->name, ".gguf");
    if (checkpoint_load(path, NULL, &v->model, NULL, &err)) die("%s", err.msg);
    if (av_read_record(dir, zm->name, &v->record, &err)) die("%s", err.msg);
    if (v->record.params != (double)v->model.n_params)
        die("%s: %zu parameters, but its record says %.0f (a stale record? rerun bin/train)", path,
            v->model.n_params, v->record.params);
    v->kv = av_kv(&v->model.config);
}

static void measure_memory(Variant *v, const Ops *ops, CsvWriter *w) {
    const Config *c = &v->model.config;
    int n = (int)(sizeof MEMORY_CONTEXTS / sizeof MEMORY_CONTEXTS[0]);
    for (int i = 0; i < n; i++) {
        int S = MEMORY_CONTEXTS[i];
        size_t allocated = av_kv_allocated_bytes(ops, c, S);
        csv_row(w, "%s,%s,%s,%d,%d,%zu,%zu", backend_name(BACKEND_CPU), v->zoo->name, v->zoo->attention, S, AV_ELEMENT_BYTES,
                av_kv_formula_bytes(c, S), allocated);
        if (i == n - 1) v->allocated_per_token_layer = (double)allocated / ((double)S * c->n_layers);
    }
}

static void measure_speed(Variant *v, const Ops *ops, Sweep sw, int index, int count, CsvWriter *w) {
    Engine e;
    engine_open(&e, &v->model, ops, DTYPE_F32, MAX_ROWS, CONTEXTS[N_CONTEXTS - 1] + sw.decode_steps);
    for (int i = 0; i < N_CONTEXTS; i++) {
        int T = CONTEXTS[i];
        progress_step(index * N_CONTEXTS + i, count * N_CONTEXTS, "attention_variants %s: context %d",
                      v->zoo->name, T);
        ContextTimes t = time_context(&e, T, sw);
        v->decode_tok_s[i] = 1e3 / t.decode.median_ms;
        csv_row(w, "%s,%s,%s,%d,%.6g,%.6g,%.6g,%.6g,%d,%.6g,%.6g,%.6g,%.6g,%.6g,%.6g,%d", backend_name(BACKEND_CPU),
                v->zoo->name,
                v->zoo->attention, T, t.prefill.median_ms, t.prefill.p10_ms, t.prefill.p90_ms,
                1e3 * T / t.prefill.median_ms, t.prefill.reps, t.decode.median_ms, t.decode.p10_ms, t.decode.p90_ms,
                v->decode_tok_s[i], 1e3 / t.decode.p90_ms, 1e3 / t.decode.p10_ms, t.decode.reps);
    }
    engine_close(&e);
}

static void write_budget(const Variant *v, CsvWriter *w) {
    for (size_t i = 0; i < sizeof BUDGET_CONTEXTS / sizeof BUDGET_CONTEXTS[0]; i++) {
        int S = BUDGET_CONTEXTS[i];
        long batch = av_budget_batch(KV_BUDGET_BYTES, v->kv.bytes_per_token, S);
        csv_row(w, "%s,%s,%d,%ld,%.0f,%ld,%ld", v->zoo->name, v->zoo->attention, S, KV_BUDGET_BYTES,
                v->kv.bytes_per_token * S, batch, batch * S);
    }
}

// ---- the tables of all variants ---------------------------------------------------------------

static void write_variants(const Variant *vs, int n, const Variant *mha, CsvWriter *w) {
    for (int i = 0; i < n; i++) {
        const Variant *v = &vs[i];
        const Config *c = &v->model.config;
        csv_row(w, "%s,%s,%zu,%d,%d,%d,%d,%d,%.6g,%.6g,%.0f,%.6g,%.6g,%.6g,%.6g,%.6g,%.6g,%ld,%ld,%.6g,%.6g,%.6g",
                v->zoo->name, v->zoo->attention, v->model.n_params, c->n_layers, c->n_heads, c->n_kv_heads,
                c->head_dim, v->kv.cached_layers, v->kv.elements_per_token_layer,
                v->kv.elements_per_token_layer * AV_ELEMENT_BYTES, v->kv.bytes_per_token, v->allocated_per_token_layer,
                mha->kv.bytes_per_token / v->kv.bytes_per_token, v->record.val_bits_per_byte,
                v->record.val_bits_per_byte - mha->record.val_bits_per_byte, v->record.passkey_accuracy,
                mha->record.passkey_accuracy - v->record.passkey_accuracy, KV_BUDGET_BYTES,
                av_budget_tokens(KV_BUDGET_BYTES, v->kv.bytes_per_token), v->decode_tok_s[0], v->decode_tok_s[1],
                v->decode_tok_s[2]);
    }
}

static void write_presets(const ModelShape *ms, int n, CsvWriter *w) {
    for (int i = 0; i < n; i++) {
        const ModelShape *m = &ms[i];
        AvPresetKv p = av_preset_kv(m, PRESET_MEMORY_BYTES);
        char name[128];
        csv_row(w, "%s,%s,%d,%d,%d,%d,%d,%d,%.6g,%.6g,%.6g,%.0f,%ld,%.0f", csv_quote(name, sizeof name, m->name),
                p.attention, m->n_layers, m->n_heads, m->n_kv_heads, m->head_dim, m->kv_lora_rank, m->rope_head_dim,
                p.elements_per_token_layer, p.mha_elements_per_token_layer, p.reduction_vs_mha, p.bytes_per_token,
                p.context_fit, p.context_fit_beside_weights);
    }
}

// ---- the published models (--real-model) ---------------------------------------------------

#define MAX_REAL_MODELS 4
// Their caches at these contexts (those within a model's own context): inside Gemma 3's window
// of 512, past it, and SmolLM2's whole 8K.
static const int REAL_CONTEXTS[] = {256, 1024, 4096, 8192};

// One row per context (those within the model's own): the cache by the formula and as
// allocated, one layer of each kind, and the same shape with MHA in every layer.
static void write_real(const NamedConfig *rs, const Ops *ops, CsvWriter *w) {
    const Config *c = &rs->config;
    char attention[16];
    av_attention_name(attention, sizeof attention, c->n_heads, c->n_kv_heads, c->kv_lora_rank);
    for (size_t i = 0; i < sizeof REAL_CONTEXTS / sizeof REAL_CONTEXTS[0]; i++) {
        int S = REAL_CONTEXTS[i];
        if (S > c->seq_len) continue;
        size_t formula = av_kv_formula_bytes(c, S);
        AvLayerKinds k = av_kv_layer_kinds(c, S);
        csv_row(w, "%s,%s,%d,%d,%d,%d,%d,%d,%d,%d,%zu,%zu,%.0f,%.0f,%.6g,%.0f,%.6g", rs->name, attention, c->n_layers,
                c->n_heads, c->n_kv_heads, c->head_dim, c->window, k.full_layers, S, AV_ELEMENT_BYTES, formula,
                av_kv_allocated_bytes(ops, c, S), k.full_layer_bytes, k.windowed_layer_bytes, (double)formula / S,
                k.mha_bytes, k.mha_bytes / (double)formula);
    }
}

// ---- the program --------------------------------------------------------------------------------

static const char *models_dir, *presets_path, *real_models;

static const LabOption OPTIONS[] = {
    {.name = "models", .kind = LAB_TEXT, .value = &models_dir, .arg = "DIR",
     .help = "models directory of the profile's zoo, trained by bin/train\n(default out/models/<profile>)"},
    {.name = "presets", .kind = LAB_TEXT, .value = &presets_path, .arg = "CSV",
     .help = "real models' shapes", .def = "templates/model_presets.csv"},
    {.name = "real-model", .kind = LAB_TEXT, .value = &real_models, .arg = "FILE[,FILE]",
     .help = "published models (GGUF, comma-separated) whose KV cache is measured beside the zoo's"},
    {0},
};

enum { TABLE_MEMORY, TABLE_SPEED, TABLE_BUDGET, TABLE_PRESETS, TABLE_VARIANTS, TABLE_REAL };
static const LabTable TABLES[] = {
    {"attention_variants_memory", "backend,variant,attention,context_len,element_bytes,formula_bytes,allocated_bytes",
     "KV cache bytes by the formula and as allocated, per variant and context", LAB_CPU},
    {"attention_variants_speed",
     "backend,variant,attention,context_len,prefill_ms_median,prefill_ms_p10,prefill_ms_p90,prefill_tok_s,"
     "prefill_reps,decode_ms_median,decode_ms_p10,decode_ms_p90,decode_tok_s,decode_tok_s_p10,decode_tok_s_p90,"
     "decode_steps",
     "prefill and decode time per variant and context", LAB_CPU},
    {"attention_variants_budget",
     "variant,attention,context_len,kv_budget_bytes,kv_bytes_per_sequence,max_batch,max_batch_tokens",
     "sequences of each context that fit a 1 GiB KV budget", LAB_CPU},
    {"attention_variants_presets",
     "model,attention,n_layers,n_heads,n_kv_heads,head_dim,kv_lora_rank,rope_head_dim,kv_elements_per_token_layer,"
     "mha_elements_per_token_layer,kv_reduction_vs_mha,kv_bytes_per_token_fp16,context_fit_80gb,"
     "context_fit_80gb_beside_weights",
     "real models: KV per token in fp16, reduction vs MHA, context in 80 GB", LAB_CPU},
    {"attention_variants",
     "variant,attention,params,n_layers,n_heads,n_kv_heads,head_dim,cached_layers,kv_elements_per_token_layer,"
     "kv_bytes_per_token_layer,kv_bytes_per_token,allocated_bytes_per_token_layer,kv_reduction_vs_mha,"
     "val_bits_per_byte,bpb_cost_vs_mha,passkey_accuracy,passkey_cost_vs_mha,kv_budget_bytes,kv_budget_tokens,"
     "decode_tok_s_ctx256,decode_tok_s_ctx1024,decode_tok_s_ctx4096",
     "variant -> params, KV per token, quality and its cost against MHA, decode tokens/s", LAB_CPU},
    {"attention_variants_real",
     "model,attention,n_layers,n_heads,n_kv_heads,head_dim,window,full_attention_layers,context_len,element_bytes,"
     "formula_bytes,allocated_bytes,full_layer_bytes,windowed_layer_bytes,kv_bytes_per_token,mha_bytes,"
     "kv_reduction_vs_mha",
     "the --real-model files: KV cache bytes per context, per layer kind and against MHA", LAB_CPU},
    {0},
};

static int run(LabRun *r) {
    Zoo zoo;
    Error err;
    if (zoo_for_profile(&zoo, r->profile, &err)) die("%s", err.msg);
    char default_dir[256];
    snprintf(default_dir, sizeof default_dir, "out/models/%s", zoo.profile);
    const char *dir = models_dir ? models_dir : default_dir;
    Sweep sw = r->quick ? QUICK_SWEEP : FULL_SWEEP;

    // every input read (and checked) before anything is measured
    ModelShape *presets;
    int n_presets;
    if (budget_load_models(presets_path, &presets, &n_presets, &err)) die("%s", err.msg);
    int n = 0;
    while (zoo_with_role(&zoo, "attention", n)) n++;
    if (n == 0) die("the %s zoo has no models of role attention", zoo.profile);
    Variant *vs = mallocCheck((size_t)n * sizeof(Variant));
    const Variant *mha = NULL;
    for (int i = 0; i < n; i++) {
        load_variant(&vs[i], zoo_with_role(&zoo, "attention", i), dir);
        if (!mha && strcmp(vs[i].zoo->attention, "mha") == 0) mha = &vs[i];
    }
    if (!mha) die("the %s zoo has no MHA attention variant to compare the others with", zoo.profile);
    NamedConfig real[MAX_REAL_MODELS];
    int n_real = real_models ? checkpoint_configs(real_models, real, MAX_REAL_MODELS, &err) : 0;
    if (n_real < 0) die("attention_variants: --real-model: %s", err.msg);

    const Ops *ops = backend_open(BACKEND_CPU);
    Outputs out = {lab_csv(r, TABLE_MEMORY), lab_csv(r, TABLE_SPEED), lab_csv(r, TABLE_BUDGET)};
    for (int i = 0; i < n; i++) {
        measure_memory(&vs[i], ops, &out.memory);
        measure_speed(&vs[i], ops, sw, i, n, &out.speed);
        write_budget(&vs[i], &out.budget);
    }
    progress_done();
    CsvWriter presets_w = lab_csv(r, TABLE_PRESETS), variants_w = lab_csv(r, TABLE_VARIANTS);
    write_presets(presets, n_presets, &presets_w);
    write_variants(vs, n, mha, &variants_w);
    if (n_real) {
        CsvWriter real_w = lab_csv(r, TABLE_REAL);
        for (int i = 0; i < n_real; i++) write_real(&real[i], ops, &real_w);
        csv_close(&real_w);
    }
    csv_close(&out.memory);
    csv_close(&out.speed);
    csv_close(&out.budget);
    csv_close(&presets_w);
    csv_close(&variants_w);

    lab_meta(r, "attention_variants_models", "%s", dir);
    lab_meta(r, "attention_variants_real_models", "%s", n_real ? real_models : "none");
    lab_meta(r, "attention_variants_timing", "1 warm-up + %d reps of prefill + %d decode steps", sw.reps,
             sw.decode_steps);
    for (int i = 0; i < n; i++) {
        char path[1024], key[64], sum_hex[17];
        zoo_path(path, sizeof path, dir, vs[i].zoo->name, ".gguf");
        if (meta_file_checksum(path, sum_hex, &err) != 0) die("%s", err.msg);
        snprintf(key, sizeof key, "attention_variants_%s_fnv1a64", vs[i].zoo->name);
        for (char *k = key; *k; k++) *k = *k == '-' ? '_' : *k; // meta keys are [a-z0-9_]+
        lab_meta(r, key, "%s", sum_hex);
        model_free(&vs[i].model);
    }
    backend_close(BACKEND_CPU);
    free(vs);
    free(presets);
    return 0;
}

static const Experiment ATTENTION_VARIANTS = {
    "attention_variants", "[--models DIR] [--presets CSV] [options]",
    "The zoo's attention variants (MHA, GQA, MQA, ...): KV elements and bytes per token (formula and\n"
    "allocator), validation bits per byte and passkey accuracy (bin/train's records), prefill and\n"
    "decode tokens/s at contexts 256, 1K and 4K, the batch that fits a 1 GiB KV budget; and the KV\n"
    "per token and context in 80 GB of real models (templates/model_presets.csv).",
    OPTIONS, TABLES, LAB_COMMON, NULL, run};

int main(int argc, char **argv) { return lab_main(&ATTENTION_VARIANTS, argc, argv); }
