// test_cli.c: the shared command-line options, value parsers and progress lines
// (experiments/lab/cli.c) and the experiment harness's option tables and CSV paths
// (experiments/lab/lab.c): good values parse, bad ones are rejected with a message naming
// the option and the text; --shard splits a sweep so that every item has one shard and the
// merged shards are the whole run's file byte for byte.
// Run: make build/tests/test_cli && ./build/tests/test_cli
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "hw.h"
#include "lab.h"

static void test_parse_long(void **state) {
    (void)state;
    long v = 0;
    Error err;
    assert_int_equal(cli_parse_long("--n", "42", 0, 100, &v, &err), 0);
    assert_int_equal(v, 42);
    assert_int_equal(cli_parse_long("--n", "-3", -5, 5, &v, &err), 0);
    assert_int_equal(v, -3);
    const char *bad[] = {"", "12x", "x", "4.5", " ", "99999999999999999999999"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        v = 7;
        assert_int_equal(cli_parse_long("--n", bad[i], LONG_MIN, LONG_MAX, &v, &err), -1);
        assert_int_equal(v, 7); // untouched on error
        assert_non_null(strstr(err.msg, "--n"));
    }
    assert_int_equal(cli_parse_long("--threads", "0", 1, 64, &v, &err), -1);
    assert_non_null(strstr(err.msg, "out of range"));
}

static void test_parse_double(void **state) {
    (void)state;
    double v = 0;
    Error err;
    assert_int_equal(cli_parse_double("--temp", "0.7", 0.0, 2.0, &v, &err), 0);
    assert_true(v == 0.7);
    assert_int_equal(cli_parse_double("--temp", "1e-3", 0.0, 2.0, &v, &err), 0);
    assert_true(v == 1e-3);
    const char *bad[] = {"", "abc", "0.5x", "nan", "2.5", "-1"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        assert_int_equal(cli_parse_double("--temp", bad[i], 0.0, 2.0, &v, &err), -1);
        assert_non_null(strstr(err.msg, "--temp"));
    }
}

static void test_common_defaults(void **state) {
    (void)state;
    CliCommon c;
    cli_common_defaults(&c);
    HwInfo hw;
    hw_probe(&hw);
    char want[128];
    hw_slug(want + 4, sizeof want - 4, &hw);
    memcpy(want, "out/", 4);
    assert_string_equal(c.out_dir, want);
    assert_string_equal(c.profile, "full");
    assert_int_equal(c.threads, 0);
    assert_int_equal(c.help, 0);
}

// The common options, through getopt_long as a program uses them.
static void test_common_options_with_getopt(void **state) {
    (void)state;
    enum { OPT_SEED = 1 };
    static const struct option options[] = {CLI_COMMON_OPTIONS, {"seed", required_argument, 0, OPT_SEED}, {0, 0, 0, 0}};
    char *argv[] = {"prog", "--quick", "--threads", "3", "--out", "/tmp/x", "--seed", "9", "--help", NULL};
    int argc = 9;
    CliCommon c;
    cli_common_defaults(&c);
    Error err;
    int seeds = 0;
    optind = 1;
    for (int code; (code = getopt_long(argc, argv, "", options, NULL)) != -1;) {
        if (code == OPT_SEED) {
            seeds++;
            continue;
        }
        assert_int_equal(cli_common_option(&c, code, optarg, &err), 1);
    }
    assert_int_equal(seeds, 1);
    assert_string_equal(c.profile, "quick");
    assert_int_equal(c.threads, 3);
    assert_string_equal(c.out_dir, "/tmp/x");
    assert_int_equal(c.help, 1);

    assert_int_equal(cli_common_option(&c, CLI_OPT_PROFILE, "medium", &err), -1);
    assert_non_null(strstr(err.msg, "medium"));
    assert_int_equal(cli_common_option(&c, CLI_OPT_THREADS, "0", &err), -1);
    assert_int_equal(cli_common_option(&c, CLI_OPT_OUT, "", &err), -1);
    assert_int_equal(cli_common_option(&c, 's', "x", &err), 0); // not a common option
    assert_string_equal(c.profile, "quick");                   // failed options change nothing
    assert_int_equal(c.threads, 3);
}

static void test_parse_u64(void **state) {
    (void)state;
    uint64_t v = 0;
    Error err;
    assert_int_equal(cli_parse_u64("--seed", "18446744073709551615", &v, &err), 0);
    assert_true(v == UINT64_MAX); // beyond a double's 53 bits: parsed exactly
    assert_int_equal(cli_parse_u64("--seed", "9007199254740993", &v, &err), 0);
    assert_true(v == 9007199254740993ull);
    const char *bad[] = {"", "-1", "+1", " 1", "1.5", "1e3", "18446744073709551616", "x"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        v = 7;
        assert_int_equal(cli_parse_u64("--seed", bad[i], &v, &err), -1);
        assert_true(v == 7);
        assert_non_null(strstr(err.msg, "--seed"));
    }
}

// An experiment of every option kind, as a program declares one.
static long t_max;
static double ratio;
static uint64_t seed;
static const char *model;
static int verbose;
static const LabOption OPTIONS[] = {
    {.name = "t-max", .short_name = 'T', .kind = LAB_INT, .value = &t_max, .arg = "N", .help = "longest",
     .def = "256", .min = 128, .max = 4096},
    {.name = "ratio", .kind = LAB_DOUBLE, .value = &ratio, .arg = "R", .help = "ratio", .def = "0.5", .min = 0,
     .max = 1},
    {.name = "seed", .kind = LAB_U64, .value = &seed, .arg = "S", .help = "seed", .def = "42"},
    {.name = "model", .kind = LAB_TEXT, .value = &model, .arg = "FILE", .help = "model", .required = 1},
    {.name = "verbose", .kind = LAB_FLAG, .value = &verbose, .help = "more"},
    {0},
};
static const LabTable TABLES[] = {{"both", "backend,x", "on both", LAB_BOTH}, {"cpu_only", "backend,x", "cpu", LAB_CPU},
                                  {"gpu_only", "backend,x", "gpu", LAB_CUDA}, {0}};
static int no_run(LabRun *r) {
    (void)r;
    return 0;
}
static const Experiment EXPERIMENT = {"exp", "[options]", "A test.", OPTIONS, TABLES, LAB_COMMON | LAB_BACKEND, NULL,
                                      no_run};

// lab_parse on a NULL-terminated argument list; 0 or -1 (err says why).
static int parse(LabRun *r, int *help, Error *err, ...) {
    char *argv[32] = {"exp"};
    int argc = 1;
    va_list ap;
    va_start(ap, err);
    for (char *a; (a = va_arg(ap, char *)) != NULL;) argv[argc++] = a;
    va_end(ap);
    model = NULL;
    verbose = 0;
    return lab_parse(&EXPERIMENT, argc, argv, r, help, err);
}

// A run of EXPERIMENT with --out dir and nothing else.
static LabRun run_into(const char *dir) {
    LabRun r;
    int help;
    Error err;
    assert_int_equal(parse(&r, &help, &err, "--out", dir, NULL), 0);
    return r;
}

static void test_lab_defaults_and_values(void **state) {
    (void)state;
    LabRun r;
    int help;
    Error err;
    assert_int_equal(parse(&r, &help, &err, NULL), 0);
    assert_int_equal(t_max, 256); // the table's defaults
    assert_true(ratio == 0.5);
    assert_true(seed == 42);
    assert_null(model);
    assert_int_equal(r.backend, BACKEND_CPU);
    assert_string_equal(r.profile, "full");
    assert_int_equal(r.quick, 0);
    assert_int_equal(help, 0);

    assert_int_equal(parse(&r, &help, &err, "-T", "1024", "--ratio", "0.25", "--seed", "18446744073709551615",
                           "--model", "m.gguf", "--verbose", "--quick", "--threads", "2", "--out", "/tmp/o",
                           "--backend", "cuda", "-h", NULL),
                     0);
    assert_int_equal(t_max, 1024);
    assert_true(ratio == 0.25);
    assert_true(seed == UINT64_MAX);
    assert_string_equal(model, "m.gguf");
    assert_int_equal(verbose, 1);
    assert_int_equal(r.quick, 1);
    assert_int_equal(r.threads, 2);
    assert_string_equal(r.out_dir, "/tmp/o");
    assert_int_equal(r.backend, BACKEND_CUDA);
    assert_int_equal(help, 1);
    assert_int_equal(parse(&r, &help, &err, "--t-max=512", NULL), 0);
    assert_int_equal(t_max, 512);
}

// Every bad command line fails with a message that names what is wrong.
static void test_lab_rejects_bad_input(void **state) {
    (void)state;
    static const struct {
        const char *args[3], *message;
    } bad[] = {
        {{"--t-max", "100"}, "--t-max: 100 is out of range [128, 4096]"},
        {{"-T", "12x"}, "--t-max: '12x' is not an integer"},
        {{"--ratio", "1.5"}, "--ratio: 1.5 is out of range"},
        {{"--ratio", "nan"}, "--ratio: 'nan' is not a number"},
        {{"--seed", "-1"}, "--seed: '-1' is not an unsigned 64-bit integer"},
        {{"--backend", "tpu"}, "--backend: 'tpu' is neither cpu nor cuda"},
        {{"--profile", "medium"}, "--profile: 'medium'"},
        {{"--threads", "0"}, "--threads: 0 is out of range"},
        {{"--nope"}, "unknown option '--nope'"},
        {{"--t-max"}, "option '--t-max' needs a value"},
        {{"stray"}, "unexpected argument 'stray'"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        LabRun r;
        int help;
        Error err = {""};
        assert_int_equal(parse(&r, &help, &err, bad[i].args[0], bad[i].args[1], NULL), -1);
        if (!strstr(err.msg, bad[i].message)) fail_msg("case %zu: '%s' lacks '%s'", i, err.msg, bad[i].message);
    }
}

// Every backend's run writes the same file for a table of both.
static void test_lab_csv_paths(void **state) {
    (void)state;
    LabRun r = run_into("/tmp/o");
    char path[256];
    lab_csv_path(&r, 0, path, sizeof path);
    assert_string_equal(path, "/tmp/o/both.csv");
    lab_csv_path(&r, 1, path, sizeof path);
    assert_string_equal(path, "/tmp/o/cpu_only.csv");
    r.backend = BACKEND_CUDA;
    lab_csv_path(&r, 0, path, sizeof path);
    assert_string_equal(path, "/tmp/o/both.csv");
    lab_csv_path(&r, 2, path, sizeof path);
    assert_string_equal(path, "/tmp/o/gpu_only.csv");
}

static char *read_text(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) fail_msg("%s is missing", path);
    static char text[4096];
    size_t n = fread(text, 1, sizeof text - 1, f);
    text[n] = '\0';
    fclose(f);
    return text;
}

// One run of the table of both backends on `backend`, with the given rows' x values.
static void write_both(const char *dir, Backend backend, const char *x1, const char *x2) {
    LabRun r = run_into(dir);
    r.backend = backend;
    CsvWriter w = lab_csv(&r, 0);
    csv_row(&w, "%s,%s", backend_name(backend), x1);
    csv_row(&w, "%s,%s", backend_name(backend), x2);
    csv_close(&w);
}

// A run replaces its own backend's rows and keeps the other's, CPU rows first whichever ran
// last; a quoted field with a line break survives; a file with other columns is replaced.
static void test_lab_csv_merges_backends(void **state) {
    (void)state;
    char dir[] = "/tmp/inferlab-merge-XXXXXX", path[64];
    assert_non_null(mkdtemp(dir));
    snprintf(path, sizeof path, "%s/both.csv", dir);
    write_both(dir, BACKEND_CUDA, "g1", "\"two\nlines\"");
    assert_string_equal(read_text(path), "backend,x\ncuda,g1\ncuda,\"two\nlines\"\n");
    write_both(dir, BACKEND_CPU, "c1", "c2");
    assert_string_equal(read_text(path), "backend,x\ncpu,c1\ncpu,c2\ncuda,g1\ncuda,\"two\nlines\"\n");
    write_both(dir, BACKEND_CUDA, "g3", "g4");
    assert_string_equal(read_text(path), "backend,x\ncpu,c1\ncpu,c2\ncuda,g3\ncuda,g4\n");
    write_both(dir, BACKEND_CPU, "c5", "c6");
    assert_string_equal(read_text(path), "backend,x\ncpu,c5\ncpu,c6\ncuda,g3\ncuda,g4\n");

    FILE *f = fopen(path, "w");
    fputs("backend,old_column\ncuda,1\n", f);
    fclose(f);
    write_both(dir, BACKEND_CPU, "c7", "c8");
    assert_string_equal(read_text(path), "backend,x\ncpu,c7\ncpu,c8\n");
    char cmd[96];
    snprintf(cmd, sizeof cmd, "rm -r %s", dir);
    assert_int_equal(system(cmd), 0);
}

static void test_lab_meta(void **state) {
    (void)state;
    LabRun r = run_into("/tmp/o");
    lab_meta(&r, "exp_threads", "%d", 3);
    lab_meta(&r, "exp_model", "%s", "m.gguf");
    assert_int_equal(r.n_meta, 2);
    assert_string_equal(r.meta[0].key, "exp_threads");
    assert_string_equal(r.meta[0].value, "3");
    assert_string_equal(r.meta[1].value, "m.gguf");
}

// An experiment with a sweep that --shard splits: 13 items, each a row of "cells" (sharded).
static const LabTable SHARD_TABLES[] = {{"cells", "item,value", "per item", LAB_CPU | LAB_SHARDED},
                                        {"summary", "n", "whole sweep", LAB_CPU}, {0}};
static const Experiment SHARDED = {"sharded", "[options]", "A test.", NULL, SHARD_TABLES, LAB_COMMON | LAB_SHARD, NULL,
                                   no_run};

static int parse_sharded(LabRun *r, Error *err, const char *a1, const char *a2, const char *a3, const char *a4) {
    char *argv[8] = {"sharded", (char *)a1, (char *)a2, (char *)a3, (char *)a4};
    int argc = 1, help;
    while (argc < 5 && argv[argc]) argc++;
    return lab_parse(&SHARDED, argc, argv, r, &help, err);
}

// The sweep's rows as the run writes them: its own items only.
static void write_sweep(LabRun *r, int n_items) {
    CsvWriter w = lab_csv(r, 0);
    for (int i = 0; i < n_items; i++)
        if (lab_shard_owns(r, i, n_items)) csv_row(&w, "%d,%.6g", i, 1.0 / (i + 1));
    csv_close(&w);
}

// --shard K/N and --merge-shards N parse, and bad values name the option.
static void test_lab_shard_options(void **state) {
    (void)state;
    LabRun r;
    Error err = {""};
    assert_int_equal(parse_sharded(&r, &err, "--shard", "2/5", NULL, NULL), 0);
    assert_int_equal(r.shard, 2);
    assert_int_equal(r.n_shards, 5);
    assert_int_equal(parse_sharded(&r, &err, "--merge-shards", "5", NULL, NULL), 0);
    assert_int_equal(r.merge_shards, 5);
    assert_int_equal(r.n_shards, 0);
    static const struct {
        const char *args[4], *message;
    } bad[] = {
        {{"--shard", "5/5"}, "--shard K: 5 is out of range [0, 4]"},
        {{"--shard", "1/0"}, "--shard N: 0 is out of range"},
        {{"--shard", "3"}, "--shard '3': give K/N"},
        {{"--shard", "a/2"}, "--shard K: 'a' is not an integer"},
        {{"--merge-shards", "0"}, "--merge-shards: 0 is out of range"},
        {{"--shard", "0/2", "--merge-shards", "2"}, "not both"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        assert_int_equal(parse_sharded(&r, &err, bad[i].args[0], bad[i].args[1], bad[i].args[2], bad[i].args[3]), -1);
        if (!strstr(err.msg, bad[i].message)) fail_msg("case %zu: '%s' lacks '%s'", i, err.msg, bad[i].message);
    }
    // without LAB_SHARD the options do not exist
    LabRun plain;
    int help;
    char *argv[] = {"exp", "--shard", "0/2"};
    assert_int_equal(lab_parse(&EXPERIMENT, 3, argv, &plain, &help, &err), -1);
}

// Every item of a sweep belongs to exactly one shard, and shard order is item order.
static void test_lab_shard_owns(void **state) {
    (void)state;
    LabRun r = {0};
    assert_true(lab_shard_owns(&r, 5, 7)); // no --shard: every item
    static const int sizes[] = {0, 1, 2, 7, 13, 100}, shards[] = {1, 2, 3, 7, 16};
    for (size_t a = 0; a < sizeof sizes / sizeof sizes[0]; a++)
        for (size_t b = 0; b < sizeof shards / sizeof shards[0]; b++) {
            int n = sizes[a], last_owner = 0;
            r.n_shards = shards[b];
            for (int i = 0; i < n; i++) {
                int owners = 0, owner = -1;
                for (r.shard = 0; r.shard < r.n_shards; r.shard++)
                    if (lab_shard_owns(&r, i, n)) owners++, owner = r.shard;
                assert_int_equal(owners, 1);
                assert_true(owner >= last_owner);
                last_owner = owner;
            }
        }
}

// Shards merge into the bytes one whole run writes, and are removed; a missing shard or one
// of another table is an error that writes nothing.
static void test_lab_merge_shards(void **state) {
    (void)state;
    char whole[] = "/tmp/inferlab-whole-XXXXXX", split[] = "/tmp/inferlab-split-XXXXXX", path[96], cmd[160];
    assert_non_null(mkdtemp(whole));
    assert_non_null(mkdtemp(split));
    LabRun r;
    Error err = {""};
    assert_int_equal(parse_sharded(&r, &err, "--out", whole, NULL, NULL), 0);
    write_sweep(&r, 13);
    for (int k = 0; k < 4; k++) {
        char shard[16];
        snprintf(shard, sizeof shard, "%d/4", k);
        assert_int_equal(parse_sharded(&r, &err, "--out", split, "--shard", shard), 0);
        write_sweep(&r, 13);
    }
    assert_int_equal(parse_sharded(&r, &err, "--out", split, "--merge-shards", "4"), 0);
    assert_int_equal(lab_merge_shards(&r, 4, &err), 0);
    snprintf(cmd, sizeof cmd, "cmp -s %s/cells.csv %s/cells.csv", whole, split);
    assert_int_equal(system(cmd), 0);
    snprintf(path, sizeof path, "%s/cells.shard-0-of-4.csv", split);
    assert_int_not_equal(access(path, F_OK), 0);

    // shard 1 of 2 missing: an error naming it, and no cells.csv
    snprintf(path, sizeof path, "%s/cells.csv", split);
    unlink(path);
    assert_int_equal(parse_sharded(&r, &err, "--out", split, "--shard", "0/2"), 0);
    write_sweep(&r, 13);
    assert_int_equal(lab_merge_shards(&r, 2, &err), -1);
    assert_non_null(strstr(err.msg, "cells.shard-1-of-2.csv"));
    assert_int_not_equal(access(path, F_OK), 0);
    // a shard with another header
    snprintf(path, sizeof path, "%s/cells.shard-1-of-2.csv", split);
    FILE *f = fopen(path, "w");
    fputs("item,other\n1,2\n", f);
    fclose(f);
    assert_int_equal(lab_merge_shards(&r, 2, &err), -1);
    assert_non_null(strstr(err.msg, "is not the table's header"));
    snprintf(path, sizeof path, "%s/cells.csv", split);
    assert_int_not_equal(access(path, F_OK), 0);
    snprintf(cmd, sizeof cmd, "rm -r %s %s", whole, split);
    assert_int_equal(system(cmd), 0);
}

// Into a log (not a terminal) progress is one plain line per call once the interval has
// passed; with interval 0, every call.
static void test_progress_lines_in_a_log(void **state) {
    (void)state;
    char path[] = "/tmp/inferlab-progress-XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    fflush(stderr);
    int saved = dup(STDERR_FILENO);
    dup2(fd, STDERR_FILENO);
    progress_every(0);
    progress("step %d", 1);
    progress_step(2, 4, "half");
    progress_every(3600);
    progress("never"); // within the hour since the last line
    progress_done();
    fflush(stderr);
    dup2(saved, STDERR_FILENO);
    close(saved);
    FILE *f = fopen(path, "r");
    char text[256] = "";
    size_t n = fread(text, 1, sizeof text - 1, f);
    text[n] = '\0';
    fclose(f);
    close(fd);
    unlink(path);
    assert_string_equal(text, "step 1\n[2/4] half\n");
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_parse_long),
        cmocka_unit_test(test_parse_double),
        cmocka_unit_test(test_common_defaults),
        cmocka_unit_test(test_common_options_with_getopt),
        cmocka_unit_test(test_parse_u64),
        cmocka_unit_test(test_lab_defaults_and_values),
        cmocka_unit_test(test_lab_rejects_bad_input),
        cmocka_unit_test(test_lab_csv_paths),
        cmocka_unit_test(test_lab_csv_merges_backends),
        cmocka_unit_test(test_lab_meta),
        cmocka_unit_test(test_lab_shard_options),
        cmocka_unit_test(test_lab_shard_owns),
        cmocka_unit_test(test_lab_merge_shards),
        cmocka_unit_test(test_progress_lines_in_a_log),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
