// test_bench_cli.c: bin/bench, llama-bench's command line and output on the engine, run on the
// real SmolLM2 file (make real-models) with a few tokens on one thread:
//   - CSV: the header is llama-bench's column list; one row per test in llama-bench's order, each
//     value under its column (model size and parameters those of the file's tensors);
//   - JSON: valid, one object per test with llama-bench's fields and typed values; avg_ns,
//     stddev_ns, avg_ts and stddev_ts are the samples' statistics as llama-bench computes them;
//   - markdown (the default): llama-bench's header, its test names ("pp8", "tg4", "pp8 @ d8") for
//     ranges, lists and repeated options, and the build line;
//   - bad input: exit 2 (usage) or 1 (a model that cannot be loaded), the program's own message on
//     stderr and nothing on stdout.
// Run from the repository root: make bin/bench build/tests/test_bench_cli && ./build/tests/test_bench_cli
// (INFERLAB_BIN names the programs' directory, default bin; SANITIZE=1 builds use build-san/bin).
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <inttypes.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common.h"
#include "csv.h"
#include "gguf.h"
#include "run_program.h"

#define MODEL "out/models/real/smollm2-135m-instruct-q4_1.gguf"

// llama-bench's CSV header (test::get_fields in tools/llama-bench/llama-bench.cpp).
static const char *const LLAMA_BENCH_COLUMNS =
    "build_commit,build_number,cpu_info,gpu_info,backends,model_filename,model_type,model_size,model_n_params,"
    "n_batch,n_ubatch,n_threads,cpu_mask,cpu_strict,poll,type_k,type_v,n_gpu_layers,n_cpu_moe,split_mode,"
    "main_gpu,no_kv_offload,flash_attn,devices,tensor_split,tensor_buft_overrides,load_mode,lazy_mode,"
    "embeddings,no_op_offload,no_host,repack,fit_target,fit_min_ctx,n_prompt,n_gen,n_depth,test_time,avg_ns,"
    "stddev_ns,avg_ts,stddev_ts";
#define N_COLUMNS 42

static char tmp_dir[64];

// ---- running bin/bench ---------------------------------------------------------------------------

static void write_text(const char *path, const char *text) {
    FILE *f = fopenCheck(path, "w");
    fputs(text, f);
    fcloseCheck(f);
}

static ProgramRun run_bench(const char *args) {
    const char *bin = getenv("INFERLAB_BIN") ? getenv("INFERLAB_BIN") : "bin";
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "%s/bench %s", bin, args);
    return run_program(tmp_dir, cmd);
}

// A run that must succeed (exit status 0).
static ProgramRun run_ok(const char *args) {
    ProgramRun r = run_bench(args);
    if (r.status != 0) fail_msg("bin/bench %s: exit status %d, stderr: %s", args, r.status, r.err);
    return r;
}

// The lines of text, split in place (at most max).
static int split_lines(char *text, char **lines, int max) {
    int n = 0;
    for (char *save = NULL, *l = strtok_r(text, "\n", &save); l && n < max; l = strtok_r(NULL, "\n", &save))
        lines[n++] = l;
    return n;
}

static void require_model(void) {
    if (access(MODEL, R_OK) != 0) fail_msg("%s is missing: run `make real-models`", MODEL);
}

static int setup(void **state) {
    (void)state;
    return program_dir_make(tmp_dir, sizeof tmp_dir, "bench_cli");
}

static int teardown(void **state) {
    (void)state;
    return program_dir_remove(tmp_dir);
}

// ---- CSV ------------------------------------------------------------------------------------------

static int column(const char *name) {
    char header[1024], *names[N_COLUMNS];
    snprintf(header, sizeof header, "%s", LLAMA_BENCH_COLUMNS);
    assert_int_equal(csv_split(header, names, N_COLUMNS), N_COLUMNS);
    for (int i = 0; i < N_COLUMNS; i++)
        if (strcmp(names[i], name) == 0) return i;
    fail_msg("no column %s", name);
    return -1;
}

#define assert_cell(fields, name, want) assert_string_equal((fields)[column(name)], want)

// The file's tensors: bytes and elements, as llama_model_size and llama_model_n_params count them.
static void file_tensor_totals(uint64_t *bytes, uint64_t *elems) {
    GGUFFile g;
    Error err;
    if (gguf_open(&g, MODEL, &err)) fail_msg("%s", err.msg);
    *bytes = *elems = 0;
    for (size_t i = 0; i < g.n_tensors; i++) *bytes += g.tensors[i].n_bytes, *elems += g.tensors[i].n_elems;
    gguf_close(&g);
}

static void test_csv_is_llama_bench_columns_and_tests(void **state) {
    (void)state;
    require_model();
    ProgramRun r = run_ok("-m " MODEL " -p 8 -n 4 -r 2 -t 1 -o csv");
    char *lines[8];
    assert_int_equal(split_lines(r.out, lines, 8), 3); // the header, pp8, tg4
    assert_string_equal(lines[0], LLAMA_BENCH_COLUMNS);
    uint64_t bytes, elems;
    file_tensor_totals(&bytes, &elems);
    char size[32], params[32];
    snprintf(size, sizeof size, "%" PRIu64, bytes);
    snprintf(params, sizeof params, "%" PRIu64, elems);
    const char *want_prompt[2] = {"8", "0"}, *want_gen[2] = {"0", "4"};
    for (int row = 0; row < 2; row++) {
        int quotes = 0;
        for (const char *c = lines[1 + row]; *c; c++) quotes += *c == '"';
        assert_int_equal(quotes, 2 * N_COLUMNS); // every value quoted, as llama-bench writes them
        char *f[N_COLUMNS + 1];
        assert_int_equal(csv_split(lines[1 + row], f, N_COLUMNS + 1), N_COLUMNS);
        assert_cell(f, "model_filename", MODEL);
        assert_cell(f, "model_type", "llama 256M Q4_1"); // llama.cpp's: 30 llama layers, file type 3
        assert_cell(f, "model_size", size);
        assert_cell(f, "model_n_params", params);
        assert_cell(f, "backends", "CPU");
        assert_cell(f, "type_k", "f32");
        assert_cell(f, "n_threads", "1");
        assert_cell(f, "n_prompt", want_prompt[row]);
        assert_cell(f, "n_gen", want_gen[row]);
        assert_cell(f, "n_depth", "0");
        int y, mo, d, h, mi, s;
        char z;
        if (sscanf(f[column("test_time")], "%4d-%2d-%2dT%2d:%2d:%2d%c", &y, &mo, &d, &h, &mi, &s, &z) != 7 || z != 'Z')
            fail_msg("test_time '%s' is not RFC 3339 in UTC", f[column("test_time")]);
        assert_true(strtoull(f[column("avg_ns")], NULL, 10) > 0);
        assert_true(strtod(f[column("avg_ts")], NULL) > 0);
        assert_true(strtod(f[column("stddev_ts")], NULL) >= 0);
    }
    program_run_free(&r);
}

// ---- JSON -----------------------------------------------------------------------------------------

// Python's json module reads the output (so it is valid JSON) and prints per test two lines: each
// key with its value's type, in order; then the numbers.
static const char *const JSON_DUMP =
    "import json, sys\n"
    "tests = json.load(open(sys.argv[1]))\n"
    "print(len(tests))\n"
    "for t in tests:\n"
    "    print(' '.join(k + ':' + type(v).__name__ for k, v in t.items()))\n"
    "    print(t['n_prompt'], t['n_gen'], t['n_threads'], t['avg_ns'], t['stddev_ns'], repr(t['avg_ts']),\n"
    "          repr(t['stddev_ts']), len(t['samples_ns']), *t['samples_ns'], *map(repr, t['samples_ts']))\n";

// llama-bench's JSON: its columns typed as its test::get_field_type says, then the samples.
static const char *const JSON_TYPES =
    "build_commit:str build_number:int cpu_info:str gpu_info:str backends:str model_filename:str model_type:str "
    "model_size:int model_n_params:int n_batch:int n_ubatch:int n_threads:int cpu_mask:str cpu_strict:bool "
    "poll:int type_k:str type_v:str n_gpu_layers:int n_cpu_moe:int split_mode:str main_gpu:int "
    "no_kv_offload:bool flash_attn:int devices:str tensor_split:str tensor_buft_overrides:str load_mode:str "
    "lazy_mode:str embeddings:bool no_op_offload:int no_host:bool repack:bool fit_target:int fit_min_ctx:int "
    "n_prompt:int n_gen:int n_depth:int test_time:str avg_ns:int stddev_ns:int avg_ts:float stddev_ts:float "
    "samples_ns:list samples_ts:list";

#define REPS 2

typedef struct {
    int n_prompt, n_gen, n_threads, n_samples;
    uint64_t avg_ns, stddev_ns, samples_ns[REPS];
    double avg_ts, stddev_ts, samples_ts[REPS];
} JsonTest;

static void parse_json_test(const char *line, JsonTest *t) {
    int used;
    if (sscanf(line, "%d %d %d %" SCNu64 " %" SCNu64 " %lf %lf %d%n", &t->n_prompt, &t->n_gen, &t->n_threads,
               &t->avg_ns, &t->stddev_ns, &t->avg_ts, &t->stddev_ts, &t->n_samples, &used) != 8)
        fail_msg("unexpected test line '%s'", line);
    assert_int_equal(t->n_samples, REPS);
    const char *p = line + used;
    for (int i = 0; i < REPS; i++, p += used)
        if (sscanf(p, " %" SCNu64 "%n", &t->samples_ns[i], &used) != 1) fail_msg("no samples_ns in '%s'", line);
    for (int i = 0; i < REPS; i++, p += used)
        if (sscanf(p, " %lf%n", &t->samples_ts[i], &used) != 1) fail_msg("no samples_ts in '%s'", line);
}

// llama-bench's statistics of the samples, recomputed: the integer mean and sample standard
// deviation of the nanoseconds (truncating), then of 1e9 * tokens / ns in doubles.
static void check_statistics(const JsonTest *t) {
    uint64_t a = t->samples_ns[0], b = t->samples_ns[1], mean = (a + b) / 2;
    assert_int_equal(t->avg_ns, mean);
    assert_int_equal(t->stddev_ns, (uint64_t)sqrt((double)(a * a + b * b - mean * mean * 2)));
    double ts[REPS], sum = 0.0, sq_sum = 0.0;
    for (int i = 0; i < REPS; i++) {
        ts[i] = 1e9 * (t->n_prompt + t->n_gen) / (double)t->samples_ns[i];
        // printed with C++'s default 6 significant digits
        if (!(fabs(t->samples_ts[i] / ts[i] - 1.0) <= 5e-6))
            fail_msg("samples_ts %.9g, want %.9g", t->samples_ts[i], ts[i]);
        sum += ts[i];
        sq_sum += ts[i] * ts[i];
    }
    double avg = sum / REPS, sd = sqrt(sq_sum / (REPS - 1) - avg * avg * REPS / (REPS - 1));
    // printed as %f: within half a unit of the sixth decimal
    if (!(fabs(t->avg_ts - avg) <= 5.0001e-7)) fail_msg("avg_ts %.9f, the samples' mean %.9f", t->avg_ts, avg);
    if (!(fabs(t->stddev_ts - sd) <= 5.0001e-7)) fail_msg("stddev_ts %.9f, the samples' %.9f", t->stddev_ts, sd);
}

static void test_json_samples_give_the_averages(void **state) {
    (void)state;
    require_model();
    ProgramRun r = run_ok("-m " MODEL " -p 8 -n 4 -r 2 -t 1 -o json");
    char json[128], script[128], cmd[512];
    snprintf(json, sizeof json, "%s/bench.json", tmp_dir);
    snprintf(script, sizeof script, "%s/dump.py", tmp_dir);
    write_text(json, r.out);
    write_text(script, JSON_DUMP);
    snprintf(cmd, sizeof cmd, "python3 %s %s > %s/dump.txt", script, json, tmp_dir);
    if (system(cmd) != 0) fail_msg("python3 cannot read bin/bench's JSON:\n%s", r.out);
    snprintf(cmd, sizeof cmd, "%s/dump.txt", tmp_dir);
    char *dump = read_text_file(cmd), *lines[6];
    assert_int_equal(split_lines(dump, lines, 6), 5);
    assert_string_equal(lines[0], "2");
    for (int i = 0; i < 2; i++) {
        assert_string_equal(lines[1 + 2 * i], JSON_TYPES);
        JsonTest t;
        parse_json_test(lines[2 + 2 * i], &t);
        assert_int_equal(t.n_prompt, i == 0 ? 8 : 0);
        assert_int_equal(t.n_gen, i == 0 ? 0 : 4);
        assert_int_equal(t.n_threads, 1);
        check_statistics(&t);
    }
    free(dump);
    program_run_free(&r);
}

// ---- markdown -------------------------------------------------------------------------------------

// llama-bench's table header on the CPU backend, character for character.
static const char *const MD_HEADER =
    "| model                          |       size |     params | backend    | threads |            test |"
    "                  t/s |";
static const char *const MD_RULE =
    "| ------------------------------ | ---------: | ---------: | ---------- | ------: | --------------: |"
    " -------------------: |";

// The trimmed text of cell i of a table row.
static void md_cell(const char *row, int i, char *out, size_t size) {
    const char *p = row;
    for (int k = 0; k <= i; k++, p++)
        if (!(p = strchr(p, '|'))) fail_msg("row '%s' has no cell %d", row, i);
    while (*p == ' ') p++;
    const char *end = strchr(p, '|');
    if (!end) fail_msg("row '%s': cell %d is not closed", row, i);
    while (end > p && end[-1] == ' ') end--;
    snprintf(out, size, "%.*s", (int)(end - p), p);
}

// The default output, with a range, a list and a repeated option: per depth the pp tests in the
// order given, then the tg test.
static void test_markdown_names_the_tests(void **state) {
    (void)state;
    require_model();
    ProgramRun r = run_ok("-m " MODEL " -p 2-4*2 -p 8 -n 4 -d 0,8 -r 1 -t 1");
    static const char *const TESTS[] = {"pp2", "pp4", "pp8", "tg4", "pp2 @ d8", "pp4 @ d8", "pp8 @ d8", "tg4 @ d8"};
    enum { N_TESTS = sizeof TESTS / sizeof TESTS[0] };
    char *lines[N_TESTS + 4];
    assert_int_equal(split_lines(r.out, lines, N_TESTS + 4), 2 + N_TESTS + 1); // header, rule, rows, build
    assert_string_equal(lines[0], MD_HEADER);
    assert_string_equal(lines[1], MD_RULE);
    for (int i = 0; i < N_TESTS; i++) {
        const char *row = lines[2 + i];
        char cell[128];
        assert_int_equal(strlen(row), strlen(lines[0]) + 1); // aligned; "±" is two bytes
        md_cell(row, 0, cell, sizeof cell);
        assert_string_equal(cell, "llama 256M Q4_1");
        md_cell(row, 1, cell, sizeof cell);
        assert_string_equal(cell, "92.10 MiB");
        md_cell(row, 2, cell, sizeof cell);
        assert_string_equal(cell, "134.52 M");
        md_cell(row, 4, cell, sizeof cell);
        assert_string_equal(cell, "1");
        md_cell(row, 5, cell, sizeof cell);
        assert_string_equal(cell, TESTS[i]);
        md_cell(row, 6, cell, sizeof cell);
        double ts, sd;
        if (sscanf(cell, "%lf ± %lf", &ts, &sd) != 2 || !(ts > 0) || sd != 0.0)
            fail_msg("t/s '%s': one repetition is a mean > 0 and a deviation of 0", cell);
    }
    assert_true(strncmp(lines[2 + N_TESTS], "build: ", 7) == 0);
    program_run_free(&r);
}

// ---- bad input --------------------------------------------------------------------------------------

// Each bad command line: its exit status (2 a usage error, 1 a model that cannot be loaded) and
// the start of its message, which is the program's own, not a crash report.
static void test_bad_input_is_an_error_on_stderr_only(void **state) {
    (void)state;
    require_model();
    char not_gguf[128], missing[128];
    snprintf(not_gguf, sizeof not_gguf, "%s/text.gguf", tmp_dir);
    snprintf(missing, sizeof missing, "%s/missing.gguf", tmp_dir);
    write_text(not_gguf, "not a model\n");
    const struct {
        const char *model, *args;
        int status;
        const char *message;
    } cases[] = {
        {MODEL, "-o xml", 2, "bench: -o: 'xml'"},
        {MODEL, "-r 0", 2, "bench: -r: 0"},
        {MODEL, "-p abc", 2, "bench: -p: 'abc'"},
        {MODEL, "-t 0", 2, "bench: -t: 0"},
        {MODEL, "--no-such-option", 2, "bench: unknown option '--no-such-option'"},
        {MODEL, "-p", 2, "bench: -p needs a value"},
        {missing, "-p 8 -n 0 -r 1", 1, "error: failed to load model"},
        {not_gguf, "-p 8 -n 0 -r 1", 1, "error: failed to load model"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char args[512];
        snprintf(args, sizeof args, "-m %s %s", cases[i].model, cases[i].args);
        ProgramRun r = run_bench(args);
        printf("bin/bench %s: exit %d, %s", args, r.status, r.err);
        if (r.status != cases[i].status)
            fail_msg("bin/bench %s: exit status %d, want %d", args, r.status, cases[i].status);
        if (strncmp(r.err, cases[i].message, strlen(cases[i].message)) != 0)
            fail_msg("bin/bench %s: stderr '%s' does not begin '%s'", args, r.err, cases[i].message);
        if (r.out[0] != '\0') fail_msg("bin/bench %s printed on stdout: %s", args, r.out);
        program_run_free(&r);
    }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_bad_input_is_an_error_on_stderr_only),
        cmocka_unit_test(test_csv_is_llama_bench_columns_and_tests),
        cmocka_unit_test(test_json_samples_give_the_averages),
        cmocka_unit_test(test_markdown_names_the_tests),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
