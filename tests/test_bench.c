// test_bench.c: the measurement toolkit every experiment shares: bench (timing statistics),
// csv (writer, quoting, splitting, atomic output), hw (probe and slug) and meta (meta.csv).
// Run: make build/tests/test_bench && ./build/tests/test_bench
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <dirent.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bench.h"
#include "common.h"
#include "csv.h"
#include "hw.h"
#include "meta.h"

// --- helpers --------------------------------------------------------------------------------

#define assert_near(got, want, tol)                                                             \
    do {                                                                                        \
        double g_ = (got), w_ = (want);                                                         \
        if (!(fabs(g_ - w_) <= (tol))) fail_msg("%s = %.17g, want %.17g", #got, g_, w_);       \
    } while (0)

static void make_temp_dir(char *dir, size_t size) {
    snprintf(dir, size, "/tmp/inferlab_test_bench_XXXXXX");
    if (!mkdtemp(dir)) fail_msg("mkdtemp failed");
}

// Entries of dir other than . and ..
static int count_entries(const char *dir) {
    DIR *d = opendir(dir);
    assert_non_null(d);
    int n = 0;
    for (struct dirent *e; (e = readdir(d)) != NULL;) n += strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0;
    closedir(d);
    return n;
}

static void remove_tree(const char *dir) {
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    assert_int_equal(system(cmd), 0);
}

// The whole file as a string (caller frees), or NULL when it does not exist.
static char *read_text(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *s = mallocCheck((size_t)n + 1);
    assert_int_equal(fread(s, 1, (size_t)n, f), (size_t)n);
    s[n] = '\0';
    fclose(f);
    return s;
}

static void write_text(const char *path, const char *text) {
    FILE *f = fopenCheck(path, "wb");
    fputs(text, f);
    fcloseCheck(f);
}

// Run fn(arg) in a child process and return its exit status (-1 if it did not exit).
static int exit_status_of(void (*fn)(const char *), const char *arg) {
    fflush(NULL);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        if (!freopen("/dev/null", "w", stderr)) _exit(99); // the child's die() message is expected
        fn(arg);
        _exit(0);
    }
    int status;
    waitpid(pid, &status, 0);
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

// --- bench ----------------------------------------------------------------------------------

static void test_bench_stats_known_samples(void **state) {
    (void)state;
    const double ten[] = {5, 1, 4, 2, 3, 10, 9, 8, 7, 6}; // unsorted on purpose
    BenchStats s = bench_stats(ten, 10);
    assert_int_equal(s.reps, 10);
    // numpy.percentile([1..10], [50, 10, 90]) = 5.5, 1.9, 9.1
    assert_near(s.median_ms, 5.5, 1e-12);
    assert_near(s.p10_ms, 1.9, 1e-12);
    assert_near(s.p90_ms, 9.1, 1e-12);
    assert_near(s.min_ms, 1.0, 0.0);
    assert_near(s.max_ms, 10.0, 0.0);
    assert_near(ten[0], 5.0, 0.0); // the caller's samples are not reordered

    const double odd[] = {3.0, 1.0, 2.0};
    s = bench_stats(odd, 3);
    assert_near(s.median_ms, 2.0, 0.0);
    assert_near(s.p10_ms, 1.2, 1e-12);
    assert_near(s.p90_ms, 2.8, 1e-12);

    const double one[] = {4.25};
    s = bench_stats(one, 1);
    assert_near(s.median_ms, 4.25, 0.0);
    assert_near(s.p10_ms, 4.25, 0.0);
    assert_near(s.p90_ms, 4.25, 0.0);
}

static void count_call(void *ctx) { (*(int *)ctx)++; }

static void test_bench_run_counts_calls(void **state) {
    (void)state;
    int calls = 0;
    BenchStats s = bench_run(count_call, &calls, 2, 5);
    assert_int_equal(calls, 7); // warm-up calls are made but not timed
    assert_int_equal(s.reps, 5);
    assert_true(0.0 <= s.min_ms && s.min_ms <= s.p10_ms && s.p10_ms <= s.median_ms && s.median_ms <= s.p90_ms &&
                s.p90_ms <= s.max_ms);

    calls = 0;
    s = bench_run_budget(count_call, &calls, 0, 3, 1000, 0.0); // budget spent at once: min_reps
    assert_int_equal(s.reps, 3);
    assert_int_equal(calls, 3);
    calls = 0;
    s = bench_run_budget(count_call, &calls, 1, 2, 7, 3600.0); // budget never runs out: max_reps
    assert_int_equal(s.reps, 7);
    assert_int_equal(calls, 8);
}

static void spin_two_ms(void *ctx) {
    (void)ctx;
    double t0 = now_seconds();
    while (now_seconds() - t0 < 0.002) {
    }
}

// Samples are in milliseconds: a call that spins for 2 ms by the same clock cannot time
// below 2 (a lower bound only, so no flakiness on a busy machine).
static void test_bench_run_milliseconds(void **state) {
    (void)state;
    BenchStats s = bench_run(spin_two_ms, NULL, 0, 3);
    assert_true(s.min_ms >= 2.0);
}

static void test_now_seconds_monotonic(void **state) {
    (void)state;
    double prev = now_seconds();
    for (int i = 0; i < 1000; i++) {
        double t = now_seconds();
        assert_true(t >= prev);
        prev = t;
    }
}

// --- csv ------------------------------------------------------------------------------------

static void test_csv_quote(void **state) {
    (void)state;
    char buf[64];
    assert_string_equal(csv_quote(buf, sizeof buf, "plain text"), "plain text");
    assert_string_equal(csv_quote(buf, sizeof buf, ""), "");
    assert_string_equal(csv_quote(buf, sizeof buf, "a,b"), "\"a,b\"");
    assert_string_equal(csv_quote(buf, sizeof buf, "say \"hi\""), "\"say \"\"hi\"\"\"");
    assert_string_equal(csv_quote(buf, sizeof buf, "two\nlines"), "\"two\nlines\"");
}

static void test_csv_split(void **state) {
    (void)state;
    char line[] = "plain,\"a,b\",\"say \"\"hi\"\"\",,last";
    char *f[8];
    assert_int_equal(csv_split(line, f, 8), 5);
    assert_string_equal(f[0], "plain");
    assert_string_equal(f[1], "a,b");
    assert_string_equal(f[2], "say \"hi\"");
    assert_string_equal(f[3], "");
    assert_string_equal(f[4], "last");

    char empty[] = "";
    assert_int_equal(csv_split(empty, f, 8), 1);
    assert_string_equal(f[0], "");
    char many[] = "a,b,c,d";
    assert_int_equal(csv_split(many, f, 2), 4); // counts all, stores the first two
    assert_string_equal(f[1], "b");

    const char *malformed[] = {"\"open", "a\"b", "\"a\"b,c", "a,\"b\"\"", "bare\nbreak"};
    for (size_t i = 0; i < sizeof malformed / sizeof malformed[0]; i++) {
        char copy[32];
        snprintf(copy, sizeof copy, "%s", malformed[i]);
        assert_int_equal(csv_split(copy, NULL, 0), -1);
    }
}

// csv_quote and csv_split are inverses, whatever the text holds.
static void test_csv_quote_split_round_trip(void **state) {
    (void)state;
    const char *texts[] = {"x", "", ",", "\"", "\"\"", "a, \"b\", c", "gcc 12.2.0 -O2,-march=native"};
    for (size_t i = 0; i < sizeof texts / sizeof texts[0]; i++) {
        char quoted[128], *f[2];
        csv_quote(quoted, sizeof quoted, texts[i]);
        assert_int_equal(csv_split(quoted, f, 2), 1);
        assert_string_equal(f[0], texts[i]);
    }
}

static void test_csv_writer_format(void **state) {
    (void)state;
    char dir[64], path[128], q[64];
    make_temp_dir(dir, sizeof dir);
    snprintf(path, sizeof path, "%s/table.csv", dir);
    CsvWriter w = csv_open(path, "seq_len,impl,time_ms_median");
    assert_null(read_text(path)); // nothing at the path until the table is complete
    csv_row(&w, "%d,%s,%.6g", 128, "naive", 1.0 / 3.0);
    csv_row(&w, "%d,%s,%.6g", 8192, csv_quote(q, sizeof q, "flash, tiled"), 12345678.9);
    csv_close(&w);
    char *text = read_text(path);
    assert_non_null(text);
    assert_string_equal(text, "seq_len,impl,time_ms_median\n"
                              "128,naive,0.333333\n"
                              "8192,\"flash, tiled\",1.23457e+07\n");
    free(text);
    assert_int_equal(count_entries(dir), 1); // the temp file was renamed, not copied
    remove_tree(dir);
}

static void test_csv_abort_leaves_nothing(void **state) {
    (void)state;
    char dir[64], path[128];
    make_temp_dir(dir, sizeof dir);
    snprintf(path, sizeof path, "%s/table.csv", dir);
    CsvWriter w = csv_open(path, "a,b");
    csv_row(&w, "%d,%d", 1, 2);
    csv_abort(&w);
    assert_int_equal(count_entries(dir), 0);
    remove_tree(dir);
}

static void write_bad_row(const char *path) {
    CsvWriter w = csv_open(path, "a,b,c");
    csv_row(&w, "%d,%d,%d", 1, 2, 3);
    csv_row(&w, "%d,%d", 4, 5); // one field short: dies
}

static void write_unbalanced_row(const char *path) {
    CsvWriter w = csv_open(path, "a,b");
    csv_row(&w, "%s,%d", "\"unclosed", 1); // dies
}

static void crash_mid_table(const char *path) {
    CsvWriter w = csv_open(path, "a,b");
    csv_row(&w, "%d,%d", 1, 2);
    _exit(3); // killed before csv_close
}

// A row that does not match the header ends the program without leaving a file behind;
// a program killed mid-table leaves only its temp file, never a half table at the path.
static void test_csv_failures_leave_no_table(void **state) {
    (void)state;
    char dir[64], path[128];
    make_temp_dir(dir, sizeof dir);
    snprintf(path, sizeof path, "%s/table.csv", dir);
    assert_int_equal(exit_status_of(write_bad_row, path), 1);
    assert_int_equal(count_entries(dir), 0);
    assert_int_equal(exit_status_of(write_unbalanced_row, path), 1);
    assert_int_equal(count_entries(dir), 0);
    assert_int_equal(exit_status_of(crash_mid_table, path), 3);
    assert_null(read_text(path));
    remove_tree(dir);
}

// --- hw -------------------------------------------------------------------------------------

// A probe result with the fields the slug reads.
static HwInfo machine(const char *model, const char *uarch, const char *isa, int n_cpus, long long llc_mib,
                      const char *gpu) {
    HwInfo hw;
    memset(&hw, 0, sizeof hw);
    snprintf(hw.cpu_model, sizeof hw.cpu_model, "%s", model);
    snprintf(hw.cpu_uarch, sizeof hw.cpu_uarch, "%s", uarch);
    snprintf(hw.cpu_isa, sizeof hw.cpu_isa, "%s", isa);
    snprintf(hw.gpu, sizeof hw.gpu, "%s", gpu);
    hw.n_cpus = n_cpus;
    hw.llc_bytes = llc_mib << 20;
    return hw;
}

static void test_hw_slug_examples(void **state) {
    (void)state;
    char s[96];
    const struct {
        HwInfo hw;
        const char *slug;
    } cases[] = {
        {machine("AMD EPYC 7B13", "zen3", "avx2", 2, 32, ""), "amd-epyc-7b13-zen3-avx2-2c-llc32m"},
        {machine("Intel(R) Core(TM) i7-8650U CPU @ 1.90GHz", "kaby-lake", "avx2", 8, 8, ""),
         "intel-core-i7-8650u-kaby-lake-avx2-8c-llc8m"},
        {machine("AMD Ryzen 7 PRO 4750U with Radeon Graphics", "zen2", "avx2", 16, 8, ""),
         "amd-ryzen-7-pro-4750u-zen2-avx2-16c-llc8m"},
        {machine("AMD Ryzen 9 7950X 16-Core Processor", "zen4", "avx512", 32, 32, ""),
         "amd-ryzen-9-7950x-zen4-avx512-32c-llc32m"},
        {machine("  Intel(R) Xeon(R) CPU @ 2.20GHz ", "family-6-model-85", "avx512", 4, 0, "NVIDIA H200"),
         "intel-xeon-family-6-model-85-avx512-4c-nvidia-h200"},
        {machine("", "", "", 4, 0, ""), "cpu-unknown-4c"},
        // The two EPYCs a VM names alike ("AMD EPYC"): told apart by what they are.
        {machine("AMD EPYC", "zen4", "avx512", 2, 32, ""), "amd-epyc-zen4-avx512-2c-llc32m"},
        {machine("AMD EPYC", "zen5", "avx512", 2, 32, ""), "amd-epyc-zen5-avx512-2c-llc32m"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        hw_slug(s, sizeof s, &cases[i].hw);
        assert_string_equal(s, cases[i].slug);
    }
    // Too long: the model's words are cut at a word boundary, what the machine is kept.
    HwInfo big = machine("AMD EPYC 7B13 64-Core Processor", "zen3", "avx2", 128, 256, "");
    hw_slug(s, 48, &big);
    assert_string_equal(s, "amd-epyc-7b13-zen3-avx2-128c-llc256m");
    hw_slug(s, 48, &(HwInfo){0});
    assert_string_equal(s, "cpu-unknown-1c");
}

static void assert_slug_charset(const char *s) {
    assert_true(strlen(s) > 0);
    assert_true(s[0] != '-' && s[strlen(s) - 1] != '-');
    assert_null(strstr(s, "--"));
    for (const char *c = s; *c; c++) assert_true((*c >= 'a' && *c <= 'z') || (*c >= '0' && *c <= '9') || *c == '-');
}

static void test_hw_probe_and_slug_stable(void **state) {
    (void)state;
    HwInfo a, b;
    hw_probe(&a);
    hw_probe(&b);
    assert_true(a.cpu_model[0] != '\0');
    assert_true(a.n_cpus >= 1);
    assert_true(a.mem_bytes > 0);
    assert_non_null(strstr(a.blas, "OpenBLAS"));
    assert_true(a.compiler[0] != '\0' && a.git_commit[0] != '\0');
    assert_int_equal(strlen(a.date), 20); // 2025-01-31T12:34:56Z
    assert_true(a.date[4] == '-' && a.date[10] == 'T' && a.date[19] == 'Z');
    char sa[96], sb[96];
    hw_slug(sa, sizeof sa, &a);
    hw_slug(sb, sizeof sb, &b);
    assert_string_equal(sa, sb);
    assert_slug_charset(sa);
#if defined(__x86_64__)
    assert_true(a.cpu_uarch[0] != '\0' && a.cpu_isa[0] != '\0'); // every x86 CPU has CPUID and SSE4 or more
    assert_non_null(strstr(sa, a.cpu_isa));
#endif
    char cores[16];
    snprintf(cores, sizeof cores, "-%dc", a.n_cpus);
    assert_non_null(strstr(sa, cores));
}

// --- meta -----------------------------------------------------------------------------------

// meta.csv as parallel arrays of keys and values; returns the row count.
static int read_meta(const char *path, char keys[][64], char values[][256], int max) {
    char *text = read_text(path);
    assert_non_null(text);
    int n = -1;
    for (char *save = NULL, *line = strtok_r(text, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
        char *f[2];
        assert_int_equal(csv_split(line, f, 2), 2);
        if (n < 0) {
            assert_string_equal(f[0], "key");
            assert_string_equal(f[1], "value");
        } else {
            assert_true(n < max);
            snprintf(keys[n], 64, "%s", f[0]);
            snprintf(values[n], 256, "%s", f[1]);
        }
        n++;
    }
    free(text);
    return n;
}

static const char *meta_value(char keys[][64], char values[][256], int n, const char *key) {
    for (int i = 0; i < n; i++)
        if (strcmp(keys[i], key) == 0) return values[i];
    return NULL;
}

static void test_meta_contents_and_merge(void **state) {
    (void)state;
    char dir[64], run[128], path[160];
    make_temp_dir(dir, sizeof dir);
    snprintf(run, sizeof run, "%s/out/some-hw", dir);
    Error err;
    assert_int_equal(meta_make_dir(run, &err), 0);
    assert_int_equal(meta_make_dir(run, &err), 0); // existing is fine
    snprintf(path, sizeof path, "%s/meta.csv", run);

    HwInfo hw;
    hw_probe(&hw);
    snprintf(hw.cflags, sizeof hw.cflags, "-O2, -march=native \"quoted\""); // exercises quoting
    MetaEntry first[] = {{"model_target_fnv1a64", "0123456789abcdef"}, {"threads", "2"}};
    assert_int_equal(meta_write(run, &hw, "quick", first, 2, &err), 0);

    char keys[64][64], values[64][256];
    int n = read_meta(path, keys, values, 64);
    const char *order[] = {"hw", "cpu_model", "cpu_uarch", "cpu_isa", "llc_bytes", "n_cpus", "mem_bytes", "gpu", "blas", "blas_core", "blas_choice", "blas_threads",
                           "compiler", "cflags", "git_commit", "date", "profile", "model_target_fnv1a64", "threads"};
    assert_int_equal(n, (int)(sizeof order / sizeof order[0]));
    for (int i = 0; i < n; i++) assert_string_equal(keys[i], order[i]);
    char slug[96];
    hw_slug(slug, sizeof slug, &hw);
    assert_string_equal(meta_value(keys, values, n, "hw"), slug);
    assert_string_equal(meta_value(keys, values, n, "cflags"), hw.cflags);
    assert_string_equal(meta_value(keys, values, n, "profile"), "quick");
    assert_string_equal(meta_value(keys, values, n, "git_commit"), hw.git_commit);

    // A second experiment: its keys join, a shared key is updated in place, others are kept.
    MetaEntry second[] = {{"threads", "1"}, {"model_draft_fnv1a64", "fedcba9876543210"}};
    assert_int_equal(meta_write(run, &hw, "full", second, 2, &err), 0);
    n = read_meta(path, keys, values, 64);
    assert_int_equal(n, (int)(sizeof order / sizeof order[0]) + 1);
    int first_own = (int)(sizeof order / sizeof order[0]) - 2; // the experiment's keys follow the common ones
    assert_string_equal(keys[first_own], "model_target_fnv1a64");
    assert_string_equal(values[first_own], "0123456789abcdef");
    assert_string_equal(keys[first_own + 1], "threads");
    assert_string_equal(values[first_own + 1], "1");
    assert_string_equal(keys[first_own + 2], "model_draft_fnv1a64");
    assert_string_equal(meta_value(keys, values, n, "profile"), "full");
    assert_int_equal(count_entries(run), 1); // no temp file left
    remove_tree(dir);
}

static void test_meta_rejects_malformed_file(void **state) {
    (void)state;
    char dir[64], path[128];
    make_temp_dir(dir, sizeof dir);
    snprintf(path, sizeof path, "%s/meta.csv", dir);
    HwInfo hw;
    hw_probe(&hw);
    const char *bad[] = {"key,value\nhw,a,b\n", "name,value\nhw,a\n", "key,value\n\"unclosed,x\n", "",
                         "key,value\nBad Key,x\n"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        write_text(path, bad[i]);
        Error err = {{0}};
        assert_int_equal(meta_write(dir, &hw, "quick", NULL, 0, &err), -1);
        assert_non_null(strstr(err.msg, path)); // names the file at fault
        char *text = read_text(path);
        assert_string_equal(text, bad[i]); // and leaves it as it was
        free(text);
    }
    remove_tree(dir);
}

static void test_meta_make_dir_errors(void **state) {
    (void)state;
    char dir[64], file[128], below[160];
    make_temp_dir(dir, sizeof dir);
    snprintf(file, sizeof file, "%s/plain_file", dir);
    write_text(file, "x");
    snprintf(below, sizeof below, "%s/sub", file);
    Error err;
    assert_int_equal(meta_make_dir(file, &err), -1);
    assert_int_equal(meta_make_dir(below, &err), -1);
    assert_non_null(strstr(err.msg, "plain_file"));
    assert_int_equal(meta_make_dir("", &err), -1);
    remove_tree(dir);
}

static void test_meta_file_checksum(void **state) {
    (void)state;
    char dir[64], path[128], sum[17];
    make_temp_dir(dir, sizeof dir);
    snprintf(path, sizeof path, "%s/f", dir);
    Error err;
    // Published FNV-1a 64 test vectors.
    write_text(path, "");
    assert_int_equal(meta_file_checksum(path, sum, &err), 0);
    assert_string_equal(sum, "cbf29ce484222325");
    write_text(path, "a");
    assert_int_equal(meta_file_checksum(path, sum, &err), 0);
    assert_string_equal(sum, "af63dc4c8601ec8c");
    write_text(path, "foobar");
    assert_int_equal(meta_file_checksum(path, sum, &err), 0);
    assert_string_equal(sum, "85944171f73967e8");
    snprintf(path, sizeof path, "%s/missing", dir);
    assert_int_equal(meta_file_checksum(path, sum, &err), -1);
    assert_non_null(strstr(err.msg, "missing"));
    remove_tree(dir);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_bench_stats_known_samples),
        cmocka_unit_test(test_bench_run_counts_calls),
        cmocka_unit_test(test_bench_run_milliseconds),
        cmocka_unit_test(test_now_seconds_monotonic),
        cmocka_unit_test(test_csv_quote),
        cmocka_unit_test(test_csv_split),
        cmocka_unit_test(test_csv_quote_split_round_trip),
        cmocka_unit_test(test_csv_writer_format),
        cmocka_unit_test(test_csv_abort_leaves_nothing),
        cmocka_unit_test(test_csv_failures_leave_no_table),
        cmocka_unit_test(test_hw_slug_examples),
        cmocka_unit_test(test_hw_probe_and_slug_stable),
        cmocka_unit_test(test_meta_contents_and_merge),
        cmocka_unit_test(test_meta_rejects_malformed_file),
        cmocka_unit_test(test_meta_make_dir_errors),
        cmocka_unit_test(test_meta_file_checksum),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
