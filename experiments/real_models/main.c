// real_models/main.c: bin/real_models, the two real published models (make real-models:
// SmolLM2-135M-Instruct Q4_1 and Gemma 3 270M Q4_K_M under out/models/real/) through the engine,
// held to llama.cpp's outputs and speed on them.
//
//   bin/real_models [--models DIR] [--fixtures DIR] [--text FILE] [--chunks N] [--thread-counts 1,2]
//                   [--out out/<hw>] [--profile quick|full] [--threads N]
//   (the report's step: make report, or make experiments OUT=dir; mk/report.mk)
//
// Per model, loaded as every program loads it (model_load_gguf) and run on the file's own types:
//   - what it is: architecture, shape, local-layer window, parameters (model_param_count), the
//     bytes of its weights as the engine reads them (engine_weight_bytes: the stored tensors and
//     the fp32 norm gains), the bits per weight they make, and the stored matrices' types;
//   - conformance with llama.cpp, against its outputs recorded in tests/fixtures/real (README.md
//     there has the exact commands): the fixture's 5 greedy prompts, their ids prefilled, then 64
//     steps, each step's argmax compared with llama.cpp's token and llama.cpp's token fed (teacher
//     forcing): the count of agreeing tokens over the 5 x 64, per prompt the first generated token
//     that differs (64: none; free-running greedy decoding leaves llama.cpp's path there), and at
//     those first differences the largest gap between our top logit and that of llama.cpp's
//     token (a near tie, or not); and the perplexity of the KJV validation text at context 512 as
//     llama-perplexity computes it (session_perplexity, as bin/generate --perplexity) after the
//     first --chunks chunks, beside llama-perplexity's running estimate after as many. Both
//     against llama.cpp with its reference kernels (the *_default columns: its default ones);
//   - speed as llama-bench measures it (its pp512 and tg128 tests) at 1 and 2 threads
//     (--thread-counts, llama-bench's -t 1,2; kernels_set_threads, no thread governor): one
//     prefill of 512 random token ids (BOS first where the model adds one) from an empty cache,
//     in one pass; 128 single-token decode steps at positions 0..127 from an empty cache (random
//     ids). Each is timed whole, one warm-up then `reps` repetitions (full 5, as llama-bench -r 5;
//     quick 1), tokens/s of the median, p10 and p90 (llama-bench reports the mean and standard
//     deviation). Beside them llama-bench's avg_ts and stddev_ts from
//     tests/fixtures/real/llama_bench_<hw>.csv, <hw> this machine's slug (bin/hwinfo --slug),
//     when it was recorded on such a machine; else empty cells and "not recorded on this machine";
//   - the theory of decode: the bytes a tg128 step reads (every layer matrix and the output head
//     as stored, the norm gains, the fp32 keys and values of its mean context) over the STREAM
//     triad bandwidth measured here at the same thread count (lab/peak.h): the decode tok/s that
//     reading the weights from DRAM allows;
//   - v(k), what a speculative verification of k tokens costs in decode steps: the median time of
//     one forward of k rows (k = 1, 2, 4, 8, 16, every row's logits) after a 64-token context,
//     over that of k = 1 (verify_reps repetitions after a warm-up).
//
// The greedy and perplexity checks run on --threads (default every core; greedy decoding's
// steps on one thread where the thread governor times that faster, session.h): their numbers,
// never their speed, are reported. A missing model file is an error naming `make real-models`;
// the KJV validation text comes from `make out/corpus/kjv-valid.txt`.
//
// Writes under --out:
//   real_models.csv   model, threads -> facts, greedy and perplexity against llama.cpp, pp512 and
//                     tg128 tok/s beside llama-bench's, decode tok/s predicted from STREAM
#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "arch.h"
#include "bench.h"
#include "gguf.h"
#include "kernels.h"
#include "lab.h"
#include "peak.h"
#include "quant_weights.h"
#include "rng.h"
#include "session.h"
#include "tokenizer.h"

#define N_MODELS 2
static const char *const MODELS[N_MODELS] = {"smollm2-135m-instruct-q4_1", "gemma-3-270m-q4_k_m"};
#define MAX_THREAD_COUNTS 8
static int thread_counts[MAX_THREAD_COUNTS], n_thread_counts; // --thread-counts (llama-bench's -t 1,2)

#define N_PROMPTS 5    // the fixture's greedy prompts
#define N_GREEDY 64    // llama.cpp's greedy tokens per prompt
#define MAX_PROMPT 448 // prompt ids + N_GREEDY fit the engine's PPL_CTX positions
#define PPL_CTX 512    // llama-perplexity -c 512
#define PP_TOKENS 512  // llama-bench's pp512
#define TG_TOKENS 128  // llama-bench's tg128

typedef struct {
    int reps;        // timed repetitions of pp512 and tg128 (after one warm-up)
    int stream_reps; // STREAM triad passes per thread count
    int verify_reps; // timed repetitions of each v(k) forward
} Sizes;

static const Sizes QUICK = {.reps = 1, .stream_reps = 3, .verify_reps = 3}; // the report step in a minute or two on 2 cores
static const Sizes FULL = {.reps = 5, .stream_reps = 5, .verify_reps = 11}; // llama-bench -r 5

static const char *models_dir = "out/models/real", *fixtures_dir = "tests/fixtures/real",
                  *text_path = "out/corpus/kjv-valid.txt";
static const char *thread_list = "1,2";
static long ppl_chunks;

static const LabOption OPTIONS[] = {
    {.name = "models", .kind = LAB_TEXT, .value = &models_dir, .arg = "DIR",
     .help = "the real models' directory (make real-models; default out/models/real)"},
    {.name = "fixtures", .kind = LAB_TEXT, .value = &fixtures_dir, .arg = "DIR",
     .help = "llama.cpp's recorded outputs (default tests/fixtures/real)"},
    {.name = "text", .kind = LAB_TEXT, .value = &text_path, .arg = "FILE",
     .help = "the perplexity text, llama-perplexity's -f (default out/corpus/kjv-valid.txt)"},
    {.name = "chunks", .kind = LAB_INT, .value = &ppl_chunks, .arg = "N",
     .help = "perplexity over the first N chunks of 512 tokens, compared with llama-perplexity's estimate "
             "after as many", .def = "1", .min = 1, .max = 1000},
    {.name = "thread-counts", .kind = LAB_TEXT, .value = &thread_list, .arg = "LIST",
     .help = "the thread counts pp512 and tg128 run at, comma-separated, as llama-bench's -t (default 1,2)"},
    {0},
};

static const LabTable TABLES[] = {
    {"real_models",
     "model,threads,arch,n_layers,dim,hidden_dim,n_heads,n_kv_heads,head_dim,vocab_size,context_len,window,"
     "global_every,params,file_bytes,weight_bytes,bits_per_weight,weight_types,"
     "greedy_prompts,greedy_tokens,greedy_tokens_agree,greedy_prompts_identical,greedy_first_diff_min,"
     "greedy_first_diff_p1,greedy_first_diff_p2,greedy_first_diff_p3,greedy_first_diff_p4,greedy_first_diff_p5,"
     "greedy_diff_logit_gap_max,"
     "ppl_ctx,ppl_chunks,ppl_ours,ppl_llama_cpp,ppl_rel_diff,"
     "greedy_tokens_agree_default,greedy_prompts_identical_default,ppl_llama_cpp_default,ppl_rel_diff_default,"
     "prefill_tokens,prefill_tok_s_median,prefill_tok_s_p10,prefill_tok_s_p90,prefill_reps,"
     "decode_tokens,decode_tok_s_median,decode_tok_s_p10,decode_tok_s_p90,decode_reps,"
     "decode_step_bytes,stream_gb_s,decode_tok_s_predicted,decode_gb_s,"
     "llama_bench,llama_prefill_tok_s,llama_prefill_tok_s_stddev,llama_decode_tok_s,llama_decode_tok_s_stddev,"
     "prefill_vs_llama,decode_vs_llama,llama_cpu,llama_source,"
     "verify_at,verify_ms_k1,v_k2,v_k4,v_k8,v_k16",
     "per model and thread count: its facts, greedy and perplexity against llama.cpp, pp512 / tg128 tok/s beside "
     "llama-bench's, decode tok/s predicted from the STREAM bandwidth, v(k) of a k-row verification",
     LAB_CPU},
    {0},
};

// ---- llama.cpp's recorded outputs ---------------------------------------------------------------

typedef struct {
    int n_prompt, prompt[MAX_PROMPT];
    int gen[N_GREEDY];
} Greedy;

static void read_ids(const char *path, char *line, const char *tag, int *ids, int cap, int *n_out) {
    size_t tl = strlen(tag);
    if (strncmp(line, tag, tl) != 0 || line[tl] != ' ') die("%s: expected a '%s' line, got '%.40s'", path, tag, line);
    char *p = line + tl, *end;
    long n = strtol(p, &end, 10);
    if (end == p || n < 1 || n > cap) die("%s: a '%s' line of %ld ids (1 to %d expected)", path, tag, n, cap);
    for (long i = 0; i < n; i++) {
        p = end;
        ids[i] = (int)strtol(p, &end, 10);
        if (end == p) die("%s: a '%s' line ends after %ld of its %ld ids", path, tag, i, n);
    }
    *n_out = (int)n;
}

// The two recordings of llama.cpp (tests/fixtures/real/README.md): with its reference kernels
// (a prompt row computed by the kernels of a decode row, as the engine computes every row), the
// one the engine must equal, and with its default kernels. The fixture files of a recording end
// in its suffix.
enum { LLAMA_REFERENCE, LLAMA_DEFAULT, N_RECORDINGS };
static const char *const RECORDING_SUFFIX[N_RECORDINGS] = {"-reference", ""};

// greedy<suffix>.txt: per prompt its ids and llama.cpp's 64 greedy ids.
static void read_greedy(const char *model, int rec, Greedy *g) {
    char path[1024], line[65536];
    snprintf(path, sizeof path, "%s/%s/greedy%s.txt", fixtures_dir, model, RECORDING_SUFFIX[rec]);
    FILE *f = fopen(path, "r");
    if (!f) die("%s: cannot open (llama.cpp's greedy tokens: scripts/record_llama_fixtures.sh)", path);
    int n = 0;
    while (n < N_PROMPTS && fgets(line, sizeof line, f)) {
        if (strncmp(line, "prompt ", 7) != 0) continue; // prompt_file and # text lines
        read_ids(path, line, "prompt", g[n].prompt, MAX_PROMPT, &g[n].n_prompt);
        if (!fgets(line, sizeof line, f)) die("%s: prompt %d has no 'generated' line", path, n + 1);
        int n_gen;
        read_ids(path, line, "generated", g[n].gen, N_GREEDY, &n_gen);
        if (n_gen != N_GREEDY) die("%s: prompt %d has %d generated ids, %d expected", path, n + 1, n_gen, N_GREEDY);
        n++;
    }
    fclose(f);
    if (n != N_PROMPTS) die("%s: %d prompts, %d expected", path, n, N_PROMPTS);
}

// llama-perplexity's running estimate after `chunk` chunks (perplexity<suffix>.txt).
static double fixture_ppl(const char *model, int rec, int chunk) {
    char path[1024], line[256];
    snprintf(path, sizeof path, "%s/%s/perplexity%s.txt", fixtures_dir, model, RECORDING_SUFFIX[rec]);
    FILE *f = fopen(path, "r");
    if (!f) die("%s: cannot open (llama-perplexity's estimates: scripts/record_llama_fixtures.sh)", path);
    double ppl = -1.0, v;
    int i;
    while (fgets(line, sizeof line, f))
        if (sscanf(line, "chunk %d %lf", &i, &v) == 2 && i == chunk) ppl = v;
    fclose(f);
    if (!(ppl > 0)) die("%s has no estimate after chunk %d (--chunks is larger than the text's chunks?)", path, chunk);
    return ppl;
}

// llama-bench's rows (llama_bench_<hw>.csv: its -o csv, every value quoted).
typedef struct {
    int found;
    double prefill_ts, prefill_sd, decode_ts, decode_sd; // avg_ts, stddev_ts of pp512 and tg128
    char cpu[256];
} LlamaBench;

typedef struct {
    LlamaBench rows[N_MODELS][MAX_THREAD_COUNTS]; // [model][thread count]
    char build[64];
} BenchTable;

static const char *base_name(const char *path) {
    const char *slash = strrchr(path, '/');
    return slash ? slash + 1 : path;
}

static int parse_double_cell(const char *s, double *out, const char *path, int line, const char *col, Error *err) {
    char *end;
    *out = strtod(s, &end);
    if (end == s || *end || !isfinite(*out))
        return error_set(err, "%s:%d: %s '%s' is not a number", path, line, col, s);
    return 0;
}

static int bench_row(void *table, char **v, const char *path, int line, Error *err) {
    BenchTable *t = table;
    // model_filename, n_threads, n_prompt, n_gen, avg_ts, stddev_ts, cpu_info, build_commit
    int model = -1, ti = -1;
    char stem[256];
    snprintf(stem, sizeof stem, "%s", base_name(v[0]));
    size_t len = strlen(stem);
    if (len > 5 && strcmp(stem + len - 5, ".gguf") == 0) stem[len - 5] = '\0';
    for (int m = 0; m < N_MODELS; m++)
        if (strcmp(stem, MODELS[m]) == 0) model = m;
    double threads, n_prompt, n_gen, avg, sd;
    if (parse_double_cell(v[1], &threads, path, line, "n_threads", err) ||
        parse_double_cell(v[2], &n_prompt, path, line, "n_prompt", err) ||
        parse_double_cell(v[3], &n_gen, path, line, "n_gen", err) ||
        parse_double_cell(v[4], &avg, path, line, "avg_ts", err) ||
        parse_double_cell(v[5], &sd, path, line, "stddev_ts", err))
        return -1;
    for (int i = 0; i < n_thread_counts; i++)
        if (threads == thread_counts[i]) ti = i;
    if (model < 0 || ti < 0) return 0; // another model or thread count
    LlamaBench *b = &t->rows[model][ti];
    if (n_prompt == PP_TOKENS && n_gen == 0) b->prefill_ts = avg, b->prefill_sd = sd, b->found |= 1;
    else if (n_prompt == 0 && n_gen == TG_TOKENS) b->decode_ts = avg, b->decode_sd = sd, b->found |= 2;
    else return 0;
    snprintf(b->cpu, sizeof b->cpu, "%s", v[6]);
    snprintf(t->build, sizeof t->build, "%s", v[7]);
    return 0;
}

// The table for this machine's slug: 0 and *path set when it exists (a malformed one dies),
// -1 when it was not recorded here.
static int read_llama_bench(const LabRun *r, BenchTable *t, char *path, size_t size) {
    char slug[96];
    hw_slug(slug, sizeof slug, &r->hw); // what bin/hwinfo --slug prints
    snprintf(path, size, "%s/llama_bench_%s.csv", fixtures_dir, slug);
    memset(t, 0, sizeof *t);
    if (access(path, R_OK) != 0) return -1;
    static const char *const COLUMNS[] = {"model_filename", "n_threads", "n_prompt", "n_gen", "avg_ts", "stddev_ts",
                                          "cpu_info", "build_commit"};
    Error err;
    if (csv_read_table(path, COLUMNS, 8, bench_row, t, &err)) die("%s", err.msg);
    return 0;
}

// ---- the model ----------------------------------------------------------------------------------

static int argmax(const float *x, int n) {
    int best = 0;
    for (int i = 1; i < n; i++)
        if (x[i] > x[best]) best = i; // strictly greater: ties to the lowest id, as llama_greedy.c
    return best;
}

typedef struct {
    int agree, identical, first_min;
    int first_diff[N_PROMPTS]; // N_GREEDY: none differs
    double gap_max; // over the prompts' first differences: our top logit less that of llama.cpp's token (0: none)
} GreedyResult;

// Teacher-forced greedy decoding against llama.cpp's: each step's argmax compared with its token,
// then its token fed.
static GreedyResult greedy_check(Session *s, const char *model, int rec, int V) {
    Greedy g[N_PROMPTS];
    read_greedy(model, rec, g);
    GreedyResult res = {.first_min = N_GREEDY};
    Error err;
    for (int p = 0; p < N_PROMPTS; p++) {
        progress("real_models: %s greedy prompt %d of %d", model, p + 1, N_PROMPTS);
        session_truncate(s, 0);
        if (session_prefill(s, g[p].prompt, g[p].n_prompt, NULL, &err)) die("real_models: %s: %s", model, err.msg);
        res.first_diff[p] = N_GREEDY;
        for (int t = 0; t < N_GREEDY; t++) {
            int top = argmax(s->logits, V);
            if (top == g[p].gen[t]) {
                res.agree++;
            } else if (res.first_diff[p] == N_GREEDY) {
                res.first_diff[p] = t;
                double gap = (double)s->logits[top] - s->logits[g[p].gen[t]];
                if (gap > res.gap_max) res.gap_max = gap;
            }
            if (t + 1 < N_GREEDY && session_decode(s, g[p].gen[t], &err)) die("real_models: %s: %s", model, err.msg);
        }
        res.identical += res.first_diff[p] == N_GREEDY;
        if (res.first_diff[p] < res.first_min) res.first_min = res.first_diff[p];
    }
    return res;
}

// The perplexity of the text's first `chunks` chunks of PPL_CTX tokens as llama-perplexity
// computes it (session_perplexity; bin/generate --perplexity).
static double perplexity(Session *s, const Tokenizer *tok, const char *model, int chunks) {
    size_t n;
    Error err;
    progress("real_models: %s tokenizing %s", model, text_path);
    int *tokens = tokenizer_encode_file(tok, text_path, &n, &err);
    if (!tokens) die("real_models: %s", err.msg);
    if (n / PPL_CTX < (size_t)chunks || n < 2 * PPL_CTX)
        die("real_models: %s: %zu tokens, not the %d chunks of %d that --chunks asks for", text_path, n, chunks,
            PPL_CTX);
    progress("real_models: %s perplexity, %d chunks of %d", model, chunks, PPL_CTX);
    double ppl = session_perplexity(s, tokens, PPL_CTX, chunks, tok->add_bos ? tok->bos_id : -1, NULL, NULL, &err);
    if (ppl < 0) die("real_models: %s: %s", model, err.msg);
    free(tokens);
    return ppl;
}

// ---- speed, as llama-bench measures it ----------------------------------------------------------

typedef struct {
    Session *s;
    const int *tokens; // PP_TOKENS random ids (BOS first where the model adds one)
    const int *steps;  // TG_TOKENS random ids (BOS first where the model adds one)
} Bench;

// pp512: one prefill of PP_TOKENS tokens from an empty cache (engine max_rows >= PP_TOKENS: one pass).
static void run_prefill(void *ctx) {
    Bench *b = ctx;
    Error err;
    session_truncate(b->s, 0);
    if (session_prefill(b->s, b->tokens, PP_TOKENS, NULL, &err)) die("real_models: %s", err.msg);
}

// tg128: TG_TOKENS single-token decode steps at positions 0 .. TG_TOKENS - 1 from an empty cache.
static void run_decode(void *ctx) {
    Bench *b = ctx;
    Error err;
    session_truncate(b->s, 0);
    for (int i = 0; i < TG_TOKENS; i++)
        if (session_decode(b->s, b->steps[i], &err)) die("real_models: %s", err.msg);
}

// v(k), the cost of verifying k drafted tokens in one forward against one decode step: k rows fed
// at positions VERIFY_AT.. after a VERIFY_AT-token context, with every row's logits (a
// verification needs them all), over the time of k = 1.
#define VERIFY_AT 64
#define N_VERIFY 5
static const int VERIFY_ROWS[N_VERIFY] = {1, 2, 4, 8, 16};

typedef struct {
    Session *s;
    const int *tokens; // >= VERIFY_AT + 16 ids, the context first
    int k;
    float *logits; // (16, V)
} Verify;

static void run_verify(void *ctx) {
    Verify *v = ctx;
    Error err;
    session_truncate(v->s, VERIFY_AT);
    if (session_prefill(v->s, v->tokens + VERIFY_AT, v->k, v->logits, &err)) die("real_models: %s", err.msg);
}

// verify_ms[i]: the median time of VERIFY_ROWS[i] rows
static void measure_verify(Session *s, const int *tokens, int reps, double verify_ms[N_VERIFY]) {
    Error err;
    session_truncate(s, 0);
    if (session_prefill(s, tokens, VERIFY_AT, NULL, &err)) die("real_models: %s", err.msg);
    Verify v = {s, tokens, 0, mallocCheck((size_t)16 * s->engine->config.vocab_size * sizeof(float))};
    for (int i = 0; i < N_VERIFY; i++) {
        v.k = VERIFY_ROWS[i];
        verify_ms[i] = bench_run(run_verify, &v, 1, reps).median_ms;
    }
    free(v.logits);
}

// A matrix's bytes as stored.
static double tensor_bytes(const Tensor *t) { return (double)t->rows * dtype_row_bytes(t->dtype, t->cols); }

// Bytes a decode step at context p reads: every layer matrix and the output head as stored (the
// embedding is a lookup of one row), the norm gains, and the fp32 keys and values of p positions
// of every KV layer (a local layer's window is longer than tg128's contexts).
static double decode_step_bytes(const Engine *e, double p) {
    const Config *c = &e->config;
    const Arch *a = model_arch(c);
    double bytes = tensor_bytes(&e->wcls);
    for (int l = 0; l < c->n_layers; l++)
        for (int i = 0; i < a->n_tensors; i++) {
            const TensorSpec *s = &a->tensors[i];
            int per_layer = s->scope == TENSOR_LAYER || s->scope == TENSOR_KV_LAYER;
            if (per_layer && s->rows != DIM_NONE && s->engine != NOT_PLACED)
                bytes += tensor_bytes(engine_layer_matrix(e, l, s));
        }
    bytes += (double)arch_vector_floats(c) * sizeof(float);
    return bytes + (double)config_kv_bytes_per_token(c) * p;
}

// The stored matrices' types, each once, in file order ("q4_1 q8_0"; "f32" for an fp32 file).
static void weight_types(const Model *m, char *out, size_t size) {
    snprintf(out, size, "%s", m->quant ? "" : "f32");
    for (int i = 0; m->quant && i < m->quant->n; i++) {
        const char *name = dtype_name(m->quant->tensors[i].dtype);
        int seen = 0;
        for (int j = 0; j < i && !seen; j++) seen = m->quant->tensors[j].dtype == m->quant->tensors[i].dtype;
        size_t len = strlen(out);
        if (!seen) snprintf(out + len, size - len, "%s%s", len ? " " : "", name);
    }
}

// ---- main ---------------------------------------------------------------------------------------

// --thread-counts: distinct counts in [1, 1024], in the order given.
static void parse_thread_counts(void) {
    char buf[256], msg[600];
    if (strlen(thread_list) >= sizeof buf) cli_usage_error("real_models", "--thread-counts: the list is too long");
    snprintf(buf, sizeof buf, "%s", thread_list);
    n_thread_counts = 0;
    for (char *save = NULL, *item = strtok_r(buf, ",", &save); item; item = strtok_r(NULL, ",", &save)) {
        long v;
        Error err;
        if (cli_parse_long("--thread-counts", item, 1, 1024, &v, &err)) cli_usage_error("real_models", err.msg);
        for (int i = 0; i < n_thread_counts; i++)
            if (thread_counts[i] == v) {
                snprintf(msg, sizeof msg, "--thread-counts: %ld is given twice", v);
                cli_usage_error("real_models", msg);
            }
        if (n_thread_counts == MAX_THREAD_COUNTS) {
            snprintf(msg, sizeof msg, "--thread-counts: at most %d counts", MAX_THREAD_COUNTS);
            cli_usage_error("real_models", msg);
        }
        thread_counts[n_thread_counts++] = (int)v;
    }
    if (n_thread_counts == 0) cli_usage_error("real_models", "--thread-counts: give at least one count (1,2)");
}

static void model_path(char *out, size_t n, int m) { snprintf(out, n, "%s/%s.gguf", models_dir, MODELS[m]); }

static int run(LabRun *r) {
    const Sizes *sz = r->quick ? &QUICK : &FULL;
    parse_thread_counts();
    char path[1024];
    for (int m = 0; m < N_MODELS; m++) { // every input first: nothing is measured without them all
        model_path(path, sizeof path, m);
        if (access(path, R_OK) != 0) die("real_models: %s is missing: run `make real-models`", path);
    }
    if (access(text_path, R_OK) != 0) die("real_models: %s is missing: run `make %s`", text_path, text_path);

    BenchTable llama;
    char bench_path[1200];
    int have_llama = read_llama_bench(r, &llama, bench_path, sizeof bench_path) == 0;
    int run_threads = omp_get_max_threads(); // --threads, or every core: the conformance checks'
    int most_threads = run_threads; // an engine's attention scratch is sized for the threads at engine_open
    for (int t = 0; t < n_thread_counts; t++)
        if (thread_counts[t] > most_threads) most_threads = thread_counts[t];

    // The STREAM triad at each thread count: the bandwidth a decode step's bytes are held to.
    double stream[MAX_THREAD_COUNTS];
    size_t stream_n = stream_array_len(peak_llc_bytes(), 64u << 20);
    for (int t = 0; t < n_thread_counts; t++) {
        progress("real_models: STREAM triad, %d thread(s)", thread_counts[t]);
        stream[t] = stream_measure(STREAM_TRIAD, stream_n, thread_counts[t], sz->stream_reps).gb_s_median;
    }

    CsvWriter w = lab_csv(r, 0);
    for (int m = 0; m < N_MODELS; m++) {
        const char *name = MODELS[m];
        model_path(path, sizeof path, m);
        progress("real_models: loading %s", path);
        Model model;
        Tokenizer tok;
        Error err;
        if (model_load_gguf(path, &model, &tok, &err)) die("real_models: %s", err.msg);
        const Config *c = &model.config;
        struct stat st;
        if (stat(path, &st) != 0) die("real_models: cannot stat %s", path);
        Engine e;
        Session s;
        kernels_set_threads(most_threads);
        engine_open(&e, &model, ops_cpu(), DTYPE_F32, PP_TOKENS, PPL_CTX); // runs the file's types
        session_open(&s, &e, PPL_CTX);
        size_t params = model_param_count(c), weight_bytes = engine_weight_bytes(&e);
        char types[128];
        weight_types(&model, types, sizeof types);

        // The checks' decode steps on --threads threads or one, whichever the governor times faster
        // (session.h): their results, not their speed, are reported. The timings run without it.
        ThreadGovernor governor;
        thread_governor_init(&governor, run_threads);
        e.governor = &governor;
        kernels_set_threads(run_threads);
        GreedyResult gr = greedy_check(&s, name, LLAMA_REFERENCE, c->vocab_size),
                     gr_default = greedy_check(&s, name, LLAMA_DEFAULT, c->vocab_size);
        e.governor = NULL;
        kernels_set_threads(run_threads); // (the governor's last choice otherwise)
        double ppl = perplexity(&s, &tok, name, (int)ppl_chunks),
               ppl_ref = fixture_ppl(name, LLAMA_REFERENCE, (int)ppl_chunks),
               ppl_default = fixture_ppl(name, LLAMA_DEFAULT, (int)ppl_chunks);

        // llama-bench's inputs: random ids, BOS first where the model adds one
        int pp[PP_TOKENS], tg[TG_TOKENS];
        uint64_t rng = rng_seed(512 + m);
        for (int i = 0; i < PP_TOKENS; i++) pp[i] = (int)(rng_u64(&rng) % (uint64_t)c->vocab_size);
        for (int i = 0; i < TG_TOKENS; i++) tg[i] = (int)(rng_u64(&rng) % (uint64_t)c->vocab_size);
        if (tok.add_bos) pp[0] = tg[0] = tok.bos_id;
        Bench b = {&s, pp, tg};
        double step_bytes = decode_step_bytes(&e, (TG_TOKENS + 1) / 2.0); // mean keys attended over positions 0..127

        for (int t = 0; t < n_thread_counts; t++) {
            int threads = thread_counts[t];
            kernels_set_threads(threads);
            progress("real_models: %s pp%d, %d thread(s)", name, PP_TOKENS, threads);
            BenchStats pre = bench_run(run_prefill, &b, 1, sz->reps);
            progress("real_models: %s tg%d, %d thread(s)", name, TG_TOKENS, threads);
            BenchStats dec = bench_run(run_decode, &b, 1, sz->reps);
            progress("real_models: %s v(k), %d thread(s)", name, threads);
            double verify_ms[N_VERIFY];
            measure_verify(&s, pp, sz->verify_reps, verify_ms);
            double pre_ts = PP_TOKENS / (pre.median_ms / 1e3), dec_ts = TG_TOKENS / (dec.median_ms / 1e3);
            const LlamaBench *lb = &llama.rows[m][t];
            char lpre[64] = "", lpre_sd[64] = "", ldec[64] = "", ldec_sd[64] = "", rpre[64] = "", rdec[64] = "";
            char cpu[600];
            if (lb->found & 1) {
                snprintf(lpre, sizeof lpre, "%.6g", lb->prefill_ts);
                snprintf(lpre_sd, sizeof lpre_sd, "%.6g", lb->prefill_sd);
                snprintf(rpre, sizeof rpre, "%.6g", pre_ts / lb->prefill_ts);
            }
            if (lb->found & 2) {
                snprintf(ldec, sizeof ldec, "%.6g", lb->decode_ts);
                snprintf(ldec_sd, sizeof ldec_sd, "%.6g", lb->decode_sd);
                snprintf(rdec, sizeof rdec, "%.6g", dec_ts / lb->decode_ts);
            }
            const char *status = !have_llama      ? "not recorded on this machine"
                                 : lb->found == 3 ? "recorded"
                                 : lb->found      ? "partly recorded"
                                                  : "not in this machine's llama-bench table";
            char source[1600], source_q[1700];
            if (lb->found)
                snprintf(source, sizeof source, "llama-bench (build %s) on %s, %s", llama.build, lb->cpu, bench_path);
            else
                snprintf(source, sizeof source, "%s (%s %s)", status, have_llama ? "no rows for it in" : "no",
                         bench_path);
            csv_row(&w,
                    "%s,%d,%s,%d,%d,%d,%d,%d,%d,%d,%d,%d,%d,%zu,%lld,%zu,%.6g,%s,"
                    "%d,%d,%d,%d,%d,%d,%d,%d,%d,%d,%.6g,"
                    "%d,%ld,%.6g,%.6g,%.6g,"
                    "%d,%d,%.6g,%.6g,"
                    "%d,%.6g,%.6g,%.6g,%d,"
                    "%d,%.6g,%.6g,%.6g,%d,"
                    "%.6g,%.6g,%.6g,%.6g,"
                    "%s,%s,%s,%s,%s,%s,%s,%s,%s,"
                    "%d,%.6g,%.6g,%.6g,%.6g,%.6g",
                    name, threads, model_arch(c)->name, c->n_layers, c->dim, c->hidden_dim, c->n_heads, c->n_kv_heads,
                    c->head_dim, c->vocab_size, c->seq_len, c->window, c->global_every, params, (long long)st.st_size,
                    weight_bytes, 8.0 * weight_bytes / params, types,
                    N_PROMPTS, N_PROMPTS * N_GREEDY, gr.agree, gr.identical, gr.first_min, gr.first_diff[0],
                    gr.first_diff[1], gr.first_diff[2], gr.first_diff[3], gr.first_diff[4], gr.gap_max,
                    PPL_CTX, ppl_chunks, ppl, ppl_ref, ppl / ppl_ref - 1.0,
                    gr_default.agree, gr_default.identical, ppl_default, ppl / ppl_default - 1.0,
                    PP_TOKENS, pre_ts, PP_TOKENS / (pre.p90_ms / 1e3), PP_TOKENS / (pre.p10_ms / 1e3), pre.reps,
                    TG_TOKENS, dec_ts, TG_TOKENS / (dec.p90_ms / 1e3), TG_TOKENS / (dec.p10_ms / 1e3), dec.reps,
                    step_bytes, stream[t], stream[t] * 1e9 / step_bytes, step_bytes * dec_ts / 1e9,
                    status, lpre, lpre_sd, ldec, ldec_sd, rpre, rdec, csv_quote(cpu, sizeof cpu, lb->cpu),
                    csv_quote(source_q, sizeof source_q, source), VERIFY_AT, verify_ms[0],
                    verify_ms[1] / verify_ms[0], verify_ms[2] / verify_ms[0], verify_ms[3] / verify_ms[0],
                    verify_ms[4] / verify_ms[0]);
        }
        kernels_set_threads(run_threads);
        session_close(&s);
        engine_close(&e);
        tokenizer_free(&tok);
        model_free(&model);

        char sum_hex[17], key[64];
        if (meta_file_checksum(path, sum_hex, &err)) die("%s", err.msg);
        snprintf(key, sizeof key, "real_models_fnv1a64_%d", m + 1);
        lab_meta(r, key, "%s %s", name, sum_hex);
    }
    csv_close(&w);

    lab_meta(r, "real_models_conformance_threads", "%d", run_threads);
    lab_meta(r, "real_models_llama_bench", "%s", have_llama ? bench_path : "not recorded on this machine");
    if (have_llama) lab_meta(r, "real_models_llama_bench_commit", "%s", llama.build);
    lab_meta(r, "real_models_ppl_text", "%s", text_path);
    return 0;
}

static const Experiment REAL_MODELS = {
    "real_models", "[options]",
    "The two real published models (make real-models): their facts, greedy decoding and perplexity against\n"
    "llama.cpp's recorded outputs, and prefill (pp512) / decode (tg128) tokens/s at 1 and 2 threads beside\n"
    "llama-bench's where recorded for this machine.",
    OPTIONS, TABLES, LAB_COMMON, NULL, run};

int main(int argc, char **argv) { return lab_main(&REAL_MODELS, argc, argv); }
