// bench/main.c: bin/bench, llama.cpp's llama-bench on this lab's engine: its command line, its
// tests, its timing and its output (a markdown table, CSV or JSON with llama-bench's column
// names), so that a run of each on the same GGUF file compares line for line.
//
//   bin/bench -m out/models/real/smollm2-135m-instruct-q4_1.gguf        pp512 and tg128, 5 reps, md
//   bin/bench -m a.gguf,b.gguf -p 512 -n 128 -d 0,512 -t 1,2 -r 5 -o csv
//   bin/bench -h
//
// Options, spelled as llama-bench spells them (a "--" option may use '_' for '-'): -m/--model,
// -p/--n-prompt, -n/--n-gen, -d/--n-depth, -t/--threads each take a comma list, a range
// first-last, first-last+step or first-last*mult, or several occurrences; -r/--repetitions N;
// -o/--output md|csv|json; -h/--help. Defaults as llama-bench's: -p 512, -n 128, -d 0, -r 5, -o md,
// -t one thread per physical core; -m is the lab's SmolLM2 file (make real-models).
//
// What it runs, as llama-bench does (tools/llama-bench/llama-bench.cpp, llama.cpp 0c1e570):
//   - tests: per model, per thread count, per depth, a pp test for each -p (n_gen 0), then a tg
//     test for each -n (n_prompt 0); a 0 in either list makes no test;
//   - a test: one warm-up from an empty cache (pp: the whole prompt; tg: one decode step), then
//     -r repetitions, each from a cache holding the depth's n_depth tokens (untimed: drawn and
//     computed once per model and depth, then rolled back to, as llama-bench restores its saved
//     state), timing pp: one prefill of n_prompt tokens, fed to the engine in rows of 512
//     (llama-bench's ubatch); tg: n_gen single-token decode steps;
//   - tokens: random ids, rand() % vocabulary, BOS first where the model adds one; rand() is never
//     seeded and is called in llama-bench's order, so glibc draws the ids its std::rand() draws;
//   - numbers: the nanoseconds of each repetition (samples_ns); avg_ns and stddev_ns their mean and
//     sample standard deviation in integers, truncated as llama-bench's uint64 arithmetic
//     truncates; samples_ts = 1e9 * tokens / ns; avg_ts and stddev_ts their mean and sample
//     standard deviation, sqrt(sum x^2 / (n - 1) - mean^2 n / (n - 1)) as llama-bench writes it.
// Output goes to stdout, each test's row when the test is done; the header only with the first
// row, so a model that fails to load first leaves stdout empty. Errors go to stderr: a bad option
// exits 2, a model that cannot be read or run exits 1.
//
// Where it differs from llama-bench, and why: the engine has no GPU offload, thread pool, batch
// sizes or KV types to choose, so llama-bench's options for those (-ngl, -b, -ub, -ctk, -fa, -C,
// --poll, ...) and -pg, -oe, jsonl and sql are not taken; the columns they fill carry what this
// engine does (FIELDS). -r and -t take no 0 (llama-bench runs -r 0 and prints zeros). Every
// model file is checked to be readable before the first test. Timing uses the monotonic clock.
// stddev_ns sums its squares in 128 bits, where llama-bench's 64-bit sum wraps past ~1.9 s per
// repetition at 5 repetitions. On a hybrid CPU llama-bench's default threads leave out its
// efficiency cores; here they count as physical cores.
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "arch.h"
#include "cli.h"
#include "common.h"
#include "gguf.h"
#include "hw.h"
#include "kernels.h"
#include "session.h"
#include "tokenizer.h"

#define PROGRAM "bench"
#define DEFAULT_MODEL "out/models/real/smollm2-135m-instruct-q4_1.gguf"
#define DEFAULT_REPS 5
#define UBATCH 512  // llama-bench's n_ubatch: the rows a prefill runs at a time
#define MAX_THREADS 512 // ggml's GGML_MAX_N_THREADS

// ---- lists of option values ---------------------------------------------------------------------

typedef struct {
    int *v;
    int n, cap;
} IntList;

typedef struct {
    char **v;
    int n, cap;
} NameList;

static void int_list_push(IntList *l, int x) {
    if (l->n == l->cap) l->v = reallocCheck(l->v, (size_t)(l->cap = l->cap ? 2 * l->cap : 8) * sizeof(int));
    l->v[l->n++] = x;
}

static int int_list_max(const IntList *l) {
    int max = 0;
    for (int i = 0; i < l->n; i++) max = l->v[i] > max ? l->v[i] : max;
    return max;
}

static void name_list_push(NameList *l, const char *s, size_t len) {
    if (l->n == l->cap) l->v = reallocCheck(l->v, (size_t)(l->cap = l->cap ? 2 * l->cap : 8) * sizeof(char *));
    char *copy = mallocCheck(len + 1);
    memcpy(copy, s, len);
    copy[len] = '\0';
    l->v[l->n++] = copy;
}

static int name_list_has(const NameList *l, const char *s) {
    for (int i = 0; i < l->n; i++)
        if (strcmp(l->v[i], s) == 0) return 1;
    return 0;
}

static void name_list_free(NameList *l) {
    for (int i = 0; i < l->n; i++) free(l->v[i]);
    free(l->v);
}

// ---- the command line ---------------------------------------------------------------------------

typedef enum { OUTPUT_MD, OUTPUT_CSV, OUTPUT_JSON } OutputFormat;

typedef struct {
    NameList models;
    IntList n_prompt, n_gen, n_depth, n_threads;
    int reps;
    OutputFormat output;
} Params;

static void usage_error(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));
static void usage_error(const char *fmt, ...) {
    char msg[600];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    cli_usage_error(PROGRAM, msg);
}

// llama-bench's default thread count (common_cpu_get_num_math): one per physical core, counted
// as the distinct sets of hyper-thread siblings; without sysfs, the online CPUs, halved above 4.
static int default_threads(void) {
    NameList cores = {0};
    for (int cpu = 0;; cpu++) {
        char path[96], siblings[256];
        snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu%d/topology/thread_siblings", cpu);
        FILE *f = fopen(path, "r");
        if (!f) break;
        if (fgets(siblings, sizeof siblings, f) && !name_list_has(&cores, siblings))
            name_list_push(&cores, siblings, strlen(siblings));
        fclose(f);
    }
    int n = cores.n;
    name_list_free(&cores);
    if (n > 0) return n;
    long online = sysconf(_SC_NPROCESSORS_ONLN);
    return online <= 0 ? 4 : online <= 4 ? (int)online : (int)(online / 2);
}

static void print_usage(void) {
    printf("usage: bin/%s [options]\n\n"
           "llama.cpp's llama-bench on this lab's engine: the same tests, timing and output.\n\n"
           "options:\n"
           "  -h, --help\n"
           "  -r, --repetitions <n>        times each test is repeated (default: %d)\n"
           "  -o, --output <csv|json|md>   output format printed to stdout (default: md)\n\n"
           "test parameters:\n"
           "  -m, --model <filename>       (default: %s)\n"
           "  -p, --n-prompt <n>           (default: 512)\n"
           "  -n, --n-gen <n>              (default: 128)\n"
           "  -d, --n-depth <n>            (default: 0)\n"
           "  -t, --threads <n>            (default: %d)\n\n"
           "Each test parameter takes several values as a comma-separated list, by repeating the\n"
           "option, or as a range: first-last, first-last+step or first-last*mult.\n",
           PROGRAM, DEFAULT_REPS, DEFAULT_MODEL, default_threads());
}

// A run of decimal digits at *p (advanced past it), at most INT_MAX.
static int parse_digits(const char **p, const char *option, const char *text) {
    if (**p < '0' || **p > '9') usage_error("%s: '%s' is not a number, list or range", option, text);
    long long v = 0;
    for (; **p >= '0' && **p <= '9'; (*p)++)
        if ((v = v * 10 + (**p - '0')) > INT_MAX) usage_error("%s: a number in '%s' is too large", option, text);
    return (int)v;
}

// llama-bench's value lists: comma-separated items, each N, first-last, first-last+step or
// first-last*mult (a range whose last is below its first adds nothing).
static void parse_int_list(const char *option, const char *text, IntList *out) {
    const char *p = text;
    if (!*p) usage_error("%s: an empty value", option);
    while (*p) {
        long long first = parse_digits(&p, option, text), last = first, step = 1;
        char op = '+';
        if (*p == '-') {
            p++;
            last = parse_digits(&p, option, text);
            if (*p == '+' || *p == '*') {
                op = *p++;
                step = parse_digits(&p, option, text);
            }
        }
        if (*p == ',') p++;
        else if (*p) usage_error("%s: '%s' is not a number, list or range", option, text);
        for (long long i = first; i <= last;) {
            int_list_push(out, (int)i);
            long long next = op == '+' ? i + step : i * step;
            if (next <= i) usage_error("%s: the range in '%s' does not advance", option, text);
            i = next;
        }
    }
}

static void parse_model_list(const char *text, NameList *out) {
    for (const char *p = text;; p++) {
        const char *end = strchr(p, ',');
        size_t len = end ? (size_t)(end - p) : strlen(p);
        if (len == 0) usage_error("-m: an empty file name in '%s'", text);
        name_list_push(out, p, len);
        if (!end) return;
        p = end;
    }
}

static OutputFormat parse_output(const char *text) {
    if (strcmp(text, "md") == 0) return OUTPUT_MD;
    if (strcmp(text, "csv") == 0) return OUTPUT_CSV;
    if (strcmp(text, "json") == 0) return OUTPUT_JSON;
    usage_error("-o: '%s' is not an output format here: md, csv or json", text);
}

static const char *option_value(int argc, char **argv, int *i) {
    if (*i + 1 >= argc) usage_error("%s needs a value", argv[*i]);
    return argv[++*i];
}

// The option's name as llama-bench compares it: a "--" option with '_' read as '-'.
static void option_name(const char *arg, char *name, size_t size) {
    snprintf(name, size, "%s", arg);
    if (strncmp(name, "--", 2) == 0)
        for (char *c = name; *c; c++)
            if (*c == '_') *c = '-';
}

static int is_option(const char *name, const char *short_name, const char *long_name) {
    return strcmp(name, short_name) == 0 || strcmp(name, long_name) == 0;
}

// Every list empty after the command line gets llama-bench's default.
static void apply_defaults(Params *p) {
    if (p->models.n == 0) name_list_push(&p->models, DEFAULT_MODEL, strlen(DEFAULT_MODEL));
    if (p->n_prompt.n == 0) int_list_push(&p->n_prompt, 512);
    if (p->n_gen.n == 0) int_list_push(&p->n_gen, 128);
    if (p->n_depth.n == 0) int_list_push(&p->n_depth, 0);
    if (p->n_threads.n == 0) int_list_push(&p->n_threads, default_threads());
}

static Params parse_params(int argc, char **argv) {
    Params p = {.reps = DEFAULT_REPS, .output = OUTPUT_MD};
    for (int i = 1; i < argc; i++) {
        char name[64];
        option_name(argv[i], name, sizeof name);
        if (is_option(name, "-h", "--help")) {
            print_usage();
            exit(0);
        } else if (is_option(name, "-m", "--model")) {
            parse_model_list(option_value(argc, argv, &i), &p.models);
        } else if (is_option(name, "-p", "--n-prompt")) {
            parse_int_list("-p", option_value(argc, argv, &i), &p.n_prompt);
        } else if (is_option(name, "-n", "--n-gen")) {
            parse_int_list("-n", option_value(argc, argv, &i), &p.n_gen);
        } else if (is_option(name, "-d", "--n-depth")) {
            parse_int_list("-d", option_value(argc, argv, &i), &p.n_depth);
        } else if (is_option(name, "-t", "--threads")) {
            parse_int_list("-t", option_value(argc, argv, &i), &p.n_threads);
        } else if (is_option(name, "-r", "--repetitions")) {
            long reps;
            Error err;
            if (cli_parse_long("-r", option_value(argc, argv, &i), 1, INT_MAX, &reps, &err)) usage_error("%s", err.msg);
            p.reps = (int)reps;
        } else if (is_option(name, "-o", "--output")) {
            p.output = parse_output(option_value(argc, argv, &i));
        } else {
            usage_error("unknown option '%s' (this engine takes -m, -p, -n, -d, -r, -t, -o, -h)", argv[i]);
        }
    }
    for (int i = 0; i < p.n_threads.n; i++)
        if (p.n_threads.v[i] < 1 || p.n_threads.v[i] > MAX_THREADS)
            usage_error("-t: %d threads (1 to %d)", p.n_threads.v[i], MAX_THREADS);
    apply_defaults(&p);
    return p;
}

static void params_free(Params *p) {
    name_list_free(&p->models);
    free(p->n_prompt.v);
    free(p->n_gen.v);
    free(p->n_depth.v);
    free(p->n_threads.v);
}

// Before any test runs: a missing file is a clear error, not a table cut short.
static void check_models_readable(const Params *p) {
    for (int i = 0; i < p->models.n; i++)
        if (access(p->models.v[i], R_OK) != 0)
            die("failed to load model '%s': %s%s", p->models.v[i], strerror(errno),
                strcmp(p->models.v[i], DEFAULT_MODEL) == 0 ? " (run `make real-models`)" : "");
}

// ---- what llama-bench says about a model and a build ------------------------------------------

typedef struct {
    char type[192];          // llama_model_desc: "<architecture> <size> <file type>"
    char file_type[64];      // its file-type part, from the GGUF file
    uint64_t size, n_params; // the file's tensors: bytes and elements (llama_model_size, _n_params)
} ModelFacts;

// llama_ftype_name, indexed by general.file_type (llama.cpp's llama_ftype).
static const char *const FILE_TYPE_NAMES[] = {
    [0] = "all F32", [1] = "F16", [2] = "Q4_0", [3] = "Q4_1", [7] = "Q8_0", [8] = "Q5_0", [9] = "Q5_1",
    [10] = "Q2_K - Medium", [11] = "Q3_K - Small", [12] = "Q3_K - Medium", [13] = "Q3_K - Large",
    [14] = "Q4_K - Small", [15] = "Q4_K - Medium", [16] = "Q5_K - Small", [17] = "Q5_K - Medium", [18] = "Q6_K",
    [19] = "IQ2_XXS - 2.0625 bpw", [20] = "IQ2_XS - 2.3125 bpw", [21] = "Q2_K - Small", [22] = "IQ3_XS - 3.3 bpw",
    [23] = "IQ3_XXS - 3.0625 bpw", [24] = "IQ1_S - 1.5625 bpw", [25] = "IQ4_NL - 4.5 bpw",
    [26] = "IQ3_S - 3.4375 bpw", [27] = "IQ3_S mix - 3.66 bpw", [28] = "IQ2_S - 2.5 bpw", [29] = "IQ2_M - 2.7 bpw",
    [30] = "IQ4_XS - 4.25 bpw", [31] = "IQ1_M - 1.75 bpw", [32] = "BF16", [36] = "TQ1_0 - 1.69 bpw ternary",
    [37] = "TQ2_0 - 2.06 bpw ternary", [38] = "MXFP4 MoE", [39] = "NVFP4", [40] = "Q1_0", [41] = "Q2_0",
};
#define N_FILE_TYPES (int64_t)(sizeof FILE_TYPE_NAMES / sizeof FILE_TYPE_NAMES[0])

// Without general.file_type llama.cpp guesses from the commonest tensor type (ties: here the first
// to reach the count in file order, there in its order of layer and name): its file type per ggml
// type (ggml id -> llama_ftype), the k-quants as their "Medium" mixes; any other: all F32.
static int64_t guess_file_type(const GGUFFile *g) {
    static const int FROM_GGML[][2] = {{0, 0},   {1, 1},   {2, 2},   {3, 3},   {6, 8},   {7, 9},  {8, 7},
                                       {10, 10}, {11, 12}, {12, 15}, {13, 17}, {14, 18}, {30, 32}};
    int best = 0, best_count = 0;
    for (size_t i = 0; i < g->n_tensors; i++) {
        int count = 0;
        for (size_t j = 0; j <= i; j++) count += g->tensors[j].type == g->tensors[i].type;
        if (count > best_count) best_count = count, best = (int)g->tensors[i].type;
    }
    for (size_t i = 0; i < sizeof FROM_GGML / sizeof FROM_GGML[0]; i++)
        if (FROM_GGML[i][0] == best) return FROM_GGML[i][1];
    return 0;
}

static void file_type_name(const GGUFFile *g, char *out, size_t size) {
    int64_t t;
    Error err;
    int stated = gguf_find_kv(g, "general.file_type") && gguf_get_int(g, "general.file_type", &t, &err) == 0;
    if (!stated) t = guess_file_type(g);
    const char *name = t >= 0 && t < N_FILE_TYPES && FILE_TYPE_NAMES[t] ? FILE_TYPE_NAMES[t] : "unknown, may not work";
    snprintf(out, size, "%s%s", stated ? "" : "(guessed) ", name);
}

static void read_file_facts(const char *path, ModelFacts *f) {
    GGUFFile g;
    Error err;
    if (gguf_open(&g, path, &err)) die("failed to load model: %s", err.msg); // err names the file
    memset(f, 0, sizeof *f);
    for (size_t i = 0; i < g.n_tensors; i++) {
        f->size += g.tensors[i].n_bytes;
        f->n_params += g.tensors[i].n_elems;
    }
    file_type_name(&g, f->file_type, sizeof f->file_type);
    gguf_close(&g);
}

// llama.cpp's size label of a model (its llm_type), from the layer count per architecture, for
// the two this engine runs; "?B" where llama.cpp has none.
static const char *gemma3_size_label(int n_layers) {
    switch (n_layers) {
    case 18: return "270M";
    case 26: return "1B";
    case 32: return "8B";
    case 34: return "4B";
    case 48: return "12B";
    case 62: return "27B";
    default: return "?B";
    }
}

static const char *llama_size_label(const Config *c) {
    switch (c->n_layers) {
    case 16: case 22: return "1B";
    case 26: case 28: return "3B";
    case 30: return "256M";
    case 32: return c->vocab_size == 49152 ? "3B" : c->vocab_size < 40000 ? "7B" : "8B";
    case 36: return "8B";
    case 40: return "13B";
    case 48: return "34B";
    case 60: return "30B";
    case 80: return c->n_heads == c->n_kv_heads ? "65B" : "70B";
    default: return "?B";
    }
}

static const char *size_label(const Config *c) {
    return c->arch == ARCH_GEMMA3 ? gemma3_size_label(c->n_layers) : llama_size_label(c);
}

typedef struct {
    char commit[48]; // git rev-parse --short HEAD (hw.h), as llama.cpp's build_commit
    int number;      // git rev-list --count HEAD, as llama.cpp's build_number; 0 when unknown
    char cpu[128];   // the CPU's model name, as ggml's CPU device describes it
} BuildInfo;

static int git_commit_count(void) {
    FILE *p = popen("git rev-list --count HEAD 2>/dev/null", "r");
    if (!p) return 0;
    int n = 0;
    if (fscanf(p, "%d", &n) != 1) n = 0;
    return pclose(p) == 0 ? n : 0;
}

static BuildInfo build_info(void) {
    HwInfo hw;
    hw_probe(&hw);
    BuildInfo b = {.number = git_commit_count()};
    snprintf(b.commit, sizeof b.commit, "%s", hw.git_commit);
    snprintf(b.cpu, sizeof b.cpu, "%s", hw.cpu_model);
    return b;
}

// ---- a test's numbers ----------------------------------------------------------------------------

typedef struct {
    const char *model_path;
    const ModelFacts *model;
    int n_threads, n_prompt, n_gen, n_depth;
    char time[32];         // when it started, RFC 3339 in UTC
    uint64_t *samples_ns;  // (reps)
    double *samples_ts;    // (reps) 1e9 * (n_prompt + n_gen) / samples_ns
    int reps;
} TestResult;

static uint64_t mean_ns(const uint64_t *v, int n) {
    uint64_t sum = 0;
    for (int i = 0; i < n; i++) sum += v[i];
    return sum / (uint64_t)n;
}

// llama-bench's sample standard deviation in unsigned integers: each division truncates.
static uint64_t stddev_ns(const uint64_t *v, int n) {
    if (n <= 1) return 0;
    unsigned __int128 mean = mean_ns(v, n), sq_sum = 0, m = (unsigned)n - 1;
    for (int i = 0; i < n; i++) sq_sum += (unsigned __int128)v[i] * v[i];
    return (uint64_t)sqrt((double)(sq_sum / m - mean * mean * (unsigned)n / m));
}

static double mean_ts(const double *v, int n) {
    double sum = 0.0;
    for (int i = 0; i < n; i++) sum += v[i];
    return sum / n;
}

static double stddev_ts(const double *v, int n) {
    if (n <= 1) return 0.0;
    double mean = mean_ts(v, n), sq_sum = 0.0;
    for (int i = 0; i < n; i++) sq_sum += v[i] * v[i];
    return sqrt(sq_sum / (n - 1) - mean * mean * n / (n - 1));
}

// ---- output in llama-bench's formats -------------------------------------------------------------

typedef enum { FIELD_STRING, FIELD_BOOL, FIELD_INT, FIELD_FLOAT } FieldType;

// llama-bench's columns in its order, with its JSON types. Those with a fixed value say what
// this engine does where llama-bench reports a setting of llama.cpp's.
typedef struct {
    const char *name;
    FieldType type;
    const char *fixed; // NULL: the test's own value
} Field;

static const Field FIELDS[] = {
    {"build_commit", FIELD_STRING, NULL},
    {"build_number", FIELD_INT, NULL},
    {"cpu_info", FIELD_STRING, NULL},
    {"gpu_info", FIELD_STRING, ""}, // the engine runs on the CPU
    {"backends", FIELD_STRING, "CPU"},
    {"model_filename", FIELD_STRING, NULL},
    {"model_type", FIELD_STRING, NULL},
    {"model_size", FIELD_INT, NULL},
    {"model_n_params", FIELD_INT, NULL},
    {"n_batch", FIELD_INT, "2048"}, // a prompt is one call, run in UBATCH rows, as llama.cpp runs
    {"n_ubatch", FIELD_INT, "512"}, // llama-bench's 2048-token batches in 512-token ubatches
    {"n_threads", FIELD_INT, NULL},
    {"cpu_mask", FIELD_STRING, "0x0"}, // threads are not pinned
    {"cpu_strict", FIELD_BOOL, "0"},
    {"poll", FIELD_INT, "0"}, // no thread pool polling level: OpenMP's threads
    {"type_k", FIELD_STRING, "f32"}, // the KV cache is fp32
    {"type_v", FIELD_STRING, "f32"},
    {"n_gpu_layers", FIELD_INT, "0"},
    {"n_cpu_moe", FIELD_INT, "0"},
    {"split_mode", FIELD_STRING, "none"}, // one device
    {"main_gpu", FIELD_INT, "0"},
    {"no_kv_offload", FIELD_BOOL, "0"},
    {"flash_attn", FIELD_INT, "0"}, // scores, softmax, then values: llama.cpp's path without it
    {"devices", FIELD_STRING, "none"}, // no accelerator
    {"tensor_split", FIELD_STRING, "0.00"},
    {"tensor_buft_overrides", FIELD_STRING, "none"},
    {"load_mode", FIELD_STRING, "none"}, // the file is read into memory, not mapped
    {"lazy_mode", FIELD_STRING, "off"},
    {"embeddings", FIELD_BOOL, "0"},
    {"no_op_offload", FIELD_INT, "0"},
    {"no_host", FIELD_BOOL, "0"},
    {"repack", FIELD_BOOL, "0"}, // the stored tensors run as stored
    {"fit_target", FIELD_INT, "0"},
    {"fit_min_ctx", FIELD_INT, "0"},
    {"n_prompt", FIELD_INT, NULL},
    {"n_gen", FIELD_INT, NULL},
    {"n_depth", FIELD_INT, NULL},
    {"test_time", FIELD_STRING, NULL},
    {"avg_ns", FIELD_INT, NULL},
    {"stddev_ns", FIELD_INT, NULL},
    {"avg_ts", FIELD_FLOAT, NULL},
    {"stddev_ts", FIELD_FLOAT, NULL},
};
#define N_FIELDS (int)(sizeof FIELDS / sizeof FIELDS[0])

// A field's text as llama-bench's std::to_string writes it (doubles as %f).
static void field_value(const Field *f, const TestResult *t, const BuildInfo *b, char *out, size_t size) {
    const char *n = f->name;
    if (f->fixed) snprintf(out, size, "%s", f->fixed);
    else if (strcmp(n, "build_commit") == 0) snprintf(out, size, "%s", b->commit);
    else if (strcmp(n, "build_number") == 0) snprintf(out, size, "%d", b->number);
    else if (strcmp(n, "cpu_info") == 0) snprintf(out, size, "%s", b->cpu);
    else if (strcmp(n, "model_filename") == 0) snprintf(out, size, "%s", t->model_path);
    else if (strcmp(n, "model_type") == 0) snprintf(out, size, "%s", t->model->type);
    else if (strcmp(n, "model_size") == 0) snprintf(out, size, "%" PRIu64, t->model->size);
    else if (strcmp(n, "model_n_params") == 0) snprintf(out, size, "%" PRIu64, t->model->n_params);
    else if (strcmp(n, "n_threads") == 0) snprintf(out, size, "%d", t->n_threads);
    else if (strcmp(n, "n_prompt") == 0) snprintf(out, size, "%d", t->n_prompt);
    else if (strcmp(n, "n_gen") == 0) snprintf(out, size, "%d", t->n_gen);
    else if (strcmp(n, "n_depth") == 0) snprintf(out, size, "%d", t->n_depth);
    else if (strcmp(n, "test_time") == 0) snprintf(out, size, "%s", t->time);
    else if (strcmp(n, "avg_ns") == 0) snprintf(out, size, "%" PRIu64, mean_ns(t->samples_ns, t->reps));
    else if (strcmp(n, "stddev_ns") == 0) snprintf(out, size, "%" PRIu64, stddev_ns(t->samples_ns, t->reps));
    else if (strcmp(n, "avg_ts") == 0) snprintf(out, size, "%f", mean_ts(t->samples_ts, t->reps));
    else if (strcmp(n, "stddev_ts") == 0) snprintf(out, size, "%f", stddev_ts(t->samples_ts, t->reps));
    else die("bench: no value for column %s", n);
}

typedef struct {
    OutputFormat format;
    int header_printed, rows;
} Printer;

// The markdown table's columns on a CPU backend (llama-bench's markdown_printer when no option
// that has a column of its own is given): name, width (negative: left-aligned).
static const struct {
    const char *title;
    int width;
} MD_COLUMNS[] = {{"model", -30}, {"size", 10}, {"params", 10}, {"backend", -10},
                  {"threads", 7}, {"test", 15}, {"t/s", 20}};
#define N_MD_COLUMNS (int)(sizeof MD_COLUMNS / sizeof MD_COLUMNS[0])

static void print_md_header(void) {
    printf("|");
    for (int i = 0; i < N_MD_COLUMNS; i++) printf(" %*s |", MD_COLUMNS[i].width, MD_COLUMNS[i].title);
    printf("\n|");
    for (int i = 0; i < N_MD_COLUMNS; i++) {
        int w = MD_COLUMNS[i].width;
        printf(" ");
        for (int k = 1; k < abs(w); k++) printf("-");
        printf("%s |", w > 0 ? ":" : "-"); // ':' right-aligns the column
    }
    printf("\n");
}

static void print_header(Printer *p) {
    if (p->header_printed) return;
    p->header_printed = 1;
    if (p->format == OUTPUT_MD) {
        print_md_header();
    } else if (p->format == OUTPUT_CSV) {
        for (int i = 0; i < N_FIELDS; i++) printf("%s%s", i ? "," : "", FIELDS[i].name);
        printf("\n");
    } else {
        printf("[\n");
    }
}

// "pp512", "tg128", "pp512 @ d4096".
static void test_name(const TestResult *t, char *out, size_t size) {
    int n = t->n_prompt > 0 ? snprintf(out, size, "pp%d", t->n_prompt) : snprintf(out, size, "tg%d", t->n_gen);
    if (t->n_depth > 0) snprintf(out + n, size - (size_t)n, " @ d%d", t->n_depth);
}

static void print_md_row(const TestResult *t) {
    char cells[N_MD_COLUMNS][256];
    const ModelFacts *m = t->model;
    snprintf(cells[0], sizeof cells[0], "%s", m->type);
    if (m->size < 1024ull * 1024 * 1024) snprintf(cells[1], sizeof cells[1], "%.2f MiB", m->size / 1024.0 / 1024.0);
    else snprintf(cells[1], sizeof cells[1], "%.2f GiB", m->size / 1024.0 / 1024.0 / 1024.0);
    if (m->n_params < 1000ull * 1000 * 1000) snprintf(cells[2], sizeof cells[2], "%.2f M", m->n_params / 1e6);
    else snprintf(cells[2], sizeof cells[2], "%.2f B", m->n_params / 1e9);
    snprintf(cells[3], sizeof cells[3], "CPU");
    snprintf(cells[4], sizeof cells[4], "%d", t->n_threads);
    test_name(t, cells[5], sizeof cells[5]);
    snprintf(cells[6], sizeof cells[6], "%.2f ± %.2f", mean_ts(t->samples_ts, t->reps),
             stddev_ts(t->samples_ts, t->reps));
    printf("|");
    for (int i = 0; i < N_MD_COLUMNS; i++) {
        int w = MD_COLUMNS[i].width + (i == N_MD_COLUMNS - 1); // "±" is two bytes of one column
        printf(" %*s |", w, cells[i]);
    }
    printf("\n");
}

static void print_csv_quoted(const char *s) {
    putchar('"');
    for (; *s; s++) {
        if (*s == '"') putchar('"');
        putchar(*s);
    }
    putchar('"');
}

static void print_json_string(const char *s) {
    putchar('"');
    for (const unsigned char *c = (const unsigned char *)s; *c; c++) {
        if (*c == '"' || *c == '\\') printf("\\%c", *c);
        else if (*c < 0x20) printf("\\u%04x", *c);
        else putchar(*c);
    }
    putchar('"');
}

static void print_csv_row(const TestResult *t, const BuildInfo *b) {
    for (int i = 0; i < N_FIELDS; i++) {
        char v[PATH_MAX + 64]; // model_filename is a path
        field_value(&FIELDS[i], t, b, v, sizeof v);
        if (i) putchar(',');
        print_csv_quoted(v);
    }
    putchar('\n');
}

// One object per test, as llama-bench's json_printer lays it out: its fields, then the samples
// (samples_ts with C++'s default stream precision, %g's 6 digits).
static void print_json_row(const TestResult *t, const BuildInfo *b, int first) {
    printf("%s  {\n", first ? "" : ",\n");
    for (int i = 0; i < N_FIELDS; i++) {
        char v[PATH_MAX + 64]; // model_filename is a path
        field_value(&FIELDS[i], t, b, v, sizeof v);
        printf("    \"%s\": ", FIELDS[i].name);
        if (FIELDS[i].type == FIELD_STRING) print_json_string(v);
        else if (FIELDS[i].type == FIELD_BOOL) printf("%s", strcmp(v, "0") == 0 ? "false" : "true");
        else printf("%s", v);
        printf(",\n");
    }
    printf("    \"samples_ns\": [ ");
    for (int i = 0; i < t->reps; i++) printf("%s%" PRIu64, i ? ", " : "", t->samples_ns[i]);
    printf(" ],\n    \"samples_ts\": [ ");
    for (int i = 0; i < t->reps; i++) printf("%s%g", i ? ", " : "", t->samples_ts[i]);
    printf(" ]\n  }");
}

static void print_test(Printer *p, const TestResult *t, const BuildInfo *b) {
    print_header(p);
    if (p->format == OUTPUT_MD) print_md_row(t);
    else if (p->format == OUTPUT_CSV) print_csv_row(t, b);
    else print_json_row(t, b, p->rows == 0);
    p->rows++;
    fflush(stdout);
}

static void print_footer(Printer *p, const BuildInfo *b) {
    print_header(p); // a run of no tests still prints an empty table, as llama-bench
    if (p->format == OUTPUT_MD) printf("\nbuild: %s (%d)\n", b->commit, b->number);
    else if (p->format == OUTPUT_JSON) printf("\n]\n");
}

// ---- running the tests ---------------------------------------------------------------------------

typedef struct {
    Session s;
    int vocab;          // llama.cpp's n_vocab for a GGUF file: the embedding's rows
    int bos;            // BOS where the model adds one, else -1
    int *tokens;        // (the longest prompt)
    int holds_prefix;   // the cache's first positions are the depth prefix's tokens
} Runner;

// The depth's tokens, drawn once per model and depth, as llama-bench computes the depth once and
// restores its saved state while the depth stays the same (across thread counts too).
typedef struct {
    char *model;
    int depth;
    int *tokens;
} DepthPrefix;

static uint64_t now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

// llama-bench's prompt: BOS first where the model adds one, then random ids.
static void draw_prompt(const Runner *r, int *tokens, int n) {
    for (int i = 0; i < n; i++) tokens[i] = i == 0 && r->bos >= 0 ? r->bos : rand() % r->vocab;
}

static void prefill(Runner *r, const int *tokens, int n) {
    Error err;
    if (session_prefill(&r->s, tokens, n, NULL, &err)) die("bench: %s", err.msg);
}

static void feed_prompt(Runner *r, int n) {
    draw_prompt(r, r->tokens, n);
    prefill(r, r->tokens, n);
}

// n single-token steps: BOS (or a random id) first, each next id drawn after its step, as
// llama-bench draws them.
static void feed_generation(Runner *r, int n) {
    Error err;
    int token = r->bos >= 0 ? r->bos : rand() % r->vocab;
    for (int i = 0; i < n; i++) {
        if (session_decode(&r->s, token, &err)) die("bench: %s", err.msg);
        token = rand() % r->vocab;
    }
}

// The cache holding the depth's tokens and nothing after them: rolled back to them where the
// cache allows (a ring layer keeps only its window), else computed again.
static void restore_depth(Runner *r, DepthPrefix *d, const char *model, int depth) {
    if (depth == 0) {
        session_truncate(&r->s, 0);
        r->holds_prefix = 0;
        return;
    }
    if (d->depth != depth || !d->model || strcmp(d->model, model) != 0) {
        free(d->model);
        d->model = mallocCheck(strlen(model) + 1);
        strcpy(d->model, model);
        d->depth = depth;
        d->tokens = reallocCheck(d->tokens, (size_t)depth * sizeof(int));
        draw_prompt(r, d->tokens, depth);
        r->holds_prefix = 0;
    }
    if (r->holds_prefix && session_len(&r->s) - depth <= kv_cache_max_chunk(&r->s.cache)) {
        session_truncate(&r->s, depth);
        return;
    }
    session_truncate(&r->s, 0);
    prefill(r, d->tokens, depth);
    r->holds_prefix = 1;
}

static void warm_up(Runner *r, int n_prompt, int n_gen) {
    session_truncate(&r->s, 0);
    r->holds_prefix = 0;
    if (n_prompt > 0) feed_prompt(r, n_prompt);
    if (n_gen > 0) feed_generation(r, 1);
}

static uint64_t timed_run(Runner *r, int n_prompt, int n_gen) {
    uint64_t start = now_ns();
    if (n_prompt > 0) feed_prompt(r, n_prompt);
    if (n_gen > 0) feed_generation(r, n_gen);
    return now_ns() - start;
}

static void run_test(Runner *r, DepthPrefix *d, TestResult *t) {
    time_t now = time(NULL);
    struct tm utc;
    gmtime_r(&now, &utc);
    strftime(t->time, sizeof t->time, "%Y-%m-%dT%H:%M:%SZ", &utc);
    kernels_set_threads(t->n_threads);
    warm_up(r, t->n_prompt, t->n_gen);
    for (int i = 0; i < t->reps; i++) {
        restore_depth(r, d, t->model_path, t->n_depth);
        t->samples_ns[i] = timed_run(r, t->n_prompt, t->n_gen);
        t->samples_ts[i] = 1e9 * (t->n_prompt + t->n_gen) / (double)t->samples_ns[i];
    }
}

static void run_and_print(Runner *r, DepthPrefix *d, TestResult *t, int n_prompt, int n_gen, Printer *out,
                          const BuildInfo *b) {
    if (n_prompt + n_gen == 0) return; // -p 0 / -n 0: no such test
    t->n_prompt = n_prompt, t->n_gen = n_gen;
    run_test(r, d, t);
    print_test(out, t, b);
}

// Every test of one model, in llama-bench's order: thread counts, then depths, then the pp tests
// and the tg tests.
static void bench_model(const Params *p, const char *path, const BuildInfo *b, DepthPrefix *d, Printer *out) {
    int longest_prompt = int_list_max(&p->n_prompt), longest_gen = int_list_max(&p->n_gen);
    if (longest_prompt + longest_gen == 0) return; // no test: llama-bench never loads the model
    ModelFacts facts;
    read_file_facts(path, &facts);
    Model model;
    Tokenizer tok;
    Error err;
    if (model_load_gguf(path, &model, &tok, &err)) die("failed to load model: %s", err.msg);
    const Config *c = &model.config;
    snprintf(facts.type, sizeof facts.type, "%s %s %s", model_arch(c)->name, size_label(c), facts.file_type);

    int longest_test = longest_prompt > longest_gen ? longest_prompt : longest_gen;
    long long positions = (long long)int_list_max(&p->n_depth) + longest_test;
    if (positions > INT_MAX) die("bench: a context of %lld tokens (-d plus -p or -n) is too long", positions);
    int capacity = (int)positions;
    kernels_set_threads(int_list_max(&p->n_threads)); // the engine's attention scratch is per thread
    Engine e;
    engine_open(&e, &model, ops_cpu(), DTYPE_F32, UBATCH, capacity);
    Runner r = {.vocab = c->vocab_size, .bos = tok.add_bos ? tok.bos_id : -1,
                .tokens = mallocCheck(((size_t)longest_prompt + 1) * sizeof(int))}; // + 1: tg-only runs
    session_open(&r.s, &e, capacity);

    TestResult t = {.model_path = path, .model = &facts, .reps = p->reps,
                    .samples_ns = mallocCheck((size_t)p->reps * sizeof(uint64_t)),
                    .samples_ts = mallocCheck((size_t)p->reps * sizeof(double))};
    for (int ti = 0; ti < p->n_threads.n; ti++)
        for (int di = 0; di < p->n_depth.n; di++) {
            t.n_threads = p->n_threads.v[ti], t.n_depth = p->n_depth.v[di];
            for (int i = 0; i < p->n_prompt.n; i++) run_and_print(&r, d, &t, p->n_prompt.v[i], 0, out, b);
            for (int i = 0; i < p->n_gen.n; i++) run_and_print(&r, d, &t, 0, p->n_gen.v[i], out, b);
        }
    free(t.samples_ns);
    free(t.samples_ts);
    session_close(&r.s);
    free(r.tokens);
    engine_close(&e);
    tokenizer_free(&tok);
    model_free(&model);
}

int main(int argc, char **argv) {
    kernels_use_best_blas(argv); // may re-execute the program: before anything is read or written
    Params p = parse_params(argc, argv);
    check_models_readable(&p);
    BuildInfo b = build_info();
    Printer out = {.format = p.output};
    DepthPrefix depth = {0};
    for (int m = 0; m < p.models.n; m++) bench_model(&p, p.models.v[m], &b, &depth, &out);
    print_footer(&out, &b);
    free(depth.model);
    free(depth.tokens);
    params_free(&p);
    return 0;
}
