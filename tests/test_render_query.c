// test_render_query.c: placeholders and row filters (render/query.c) over a run directory
// (render/rundata.c) written by the test: cells chosen by key values, aggregates, ratios,
// arithmetic, meta values and formats; the errors for unknown files, columns and functions;
// "no row" as a soft failure (n/a, or an error under strict); and compare mode's "A → B".
// Run: make build/tests/test_render_query && ./build/tests/test_render_query
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <math.h>
#include <string.h>

#include "query.h"
#include "test_render_util.h"

static char *dir_a, *dir_b, *dir_ref;
static RunData run_a, run_b;

static void write_in(const char *dir, const char *name, const char *text) {
    char path[512];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    write_text(path, text);
}

static int setup(void **state) {
    (void)state;
    dir_a = make_scratch_dir();
    dir_b = make_scratch_dir();
    dir_ref = make_scratch_dir();
    write_in(dir_a, "kv.csv",
             "prompt_len,mode,total_ms,note\n"
             "256,cache,12.5,fast\n"
             "256,nocache,132.5,slow\n"
             "1024,cache,40,fast\n"
             "1024,nocache,1800,\"slow, very\"\n");
    write_in(dir_a, "temp.csv", "temperature,entropy\n0,0\n0.5,1.25\n1.0,2.5\n2,3.5\n");
    write_in(dir_a, "meta.csv", "key,value\nhw,box-a\ncpu_model,\"Xeon, 2 cores\"\nmem_bytes,1610612736\n");
    write_in(dir_a, "gpu.skip", "no CUDA device\n");
    write_in(dir_b, "kv.csv",
             "prompt_len,mode,total_ms,note\n256,cache,6.25,fast\n256,nocache,66.25,slow\n1024,cache,20,fast\n"
             "1024,nocache,900,slow\n");
    write_in(dir_b, "temp.csv", "temperature,entropy\n0,0\n0.5,1.25\n1,2.5\n2,3.5\n");
    write_in(dir_ref, "hardware.csv", "name,bandwidth\nH100,3.35e12\n");
    // one quantity, the CPU's sgemm rate, measured twice: the budget's cell is its one source
    write_in(dir_a, "peaks.csv", "device,source,gflop_s\ncpu,budget,196\ncpu,attention,189.5\ngpu,attention,5000\n");
    write_in(dir_ref, "quantities.csv",
             "name,source,also,what\nsgemm,\"peaks.csv:gflop_s[device=cpu,source=budget]\","
             "\"peaks.csv:gflop_s[device=cpu,source=attention]\",the CPU's sgemm rate\n");
    Error err;
    if (rundata_open(&run_a, dir_a, dir_ref, &err) || rundata_open(&run_b, dir_b, dir_ref, &err)) fail_msg("%s", err.msg);
    return 0;
}

static int teardown(void **state) {
    (void)state;
    rundata_close(&run_a);
    rundata_close(&run_b);
    remove_tree(dir_a);
    remove_tree(dir_b);
    remove_tree(dir_ref);
    return 0;
}

static double eval_number(const char *expr) {
    Value v;
    Error err;
    int status = query_eval(expr, &run_a, &v, &err);
    if (status != QUERY_OK) fail_msg("%s: %s", expr, err.msg);
    assert_false(v.is_text);
    return v.number;
}

static void expect_format(const char *placeholder, const char *want) {
    char buf[256];
    Error err;
    if (query_format(placeholder, &run_a, buf, sizeof buf, &err) != QUERY_OK) fail_msg("%s: %s", placeholder, err.msg);
    if (strcmp(buf, want) != 0) fail_msg("{%s} gave '%s', want '%s'", placeholder, buf, want);
}

static void expect_failure(const char *expr, int status, const char *what) {
    Value v;
    Error err = {{0}};
    int got = query_eval(expr, &run_a, &v, &err);
    if (got != status || !strstr(err.msg, what)) fail_msg("{%s}: status %d '%s', want %d and '%s'", expr, got, err.msg, status, what);
}

// --- evaluation ---------------------------------------------------------------------------

static void test_cells_and_ratios(void **state) {
    (void)state;
    assert_true(eval_number("kv.csv:total_ms[prompt_len=256,mode=cache]") == 12.5);
    assert_true(eval_number("kv.csv:total_ms[mode=nocache, prompt_len=1024]") == 1800);
    assert_true(eval_number("kv.csv:total_ms[mode=nocache,prompt_len=256] / kv.csv:total_ms[mode=cache,prompt_len=256]") == 10.6);
    assert_true(eval_number("temp.csv:entropy[temperature=1]") == 2.5); // 1 matches 1.0
    assert_true(eval_number("hardware.csv:bandwidth[name=H100]") == 3.35e12); // from the reference directory
    Value v;
    Error err;
    assert_int_equal(query_eval("kv.csv:note[prompt_len=1024,mode=nocache]", &run_a, &v, &err), QUERY_OK);
    assert_true(v.is_text);
    assert_string_equal(v.text, "slow, very");
}

static void test_aggregates(void **state) {
    (void)state;
    assert_true(eval_number("min(kv.csv:total_ms)") == 12.5);
    assert_true(eval_number("max(kv.csv:total_ms[mode=cache])") == 40);
    assert_true(eval_number("mean(temp.csv:entropy)") == 7.25 / 4);
    assert_true(eval_number("median(kv.csv:total_ms)") == (40 + 132.5) / 2);
    assert_true(eval_number("sum(kv.csv:total_ms[prompt_len=256])") == 145);
    assert_true(eval_number("count(kv.csv:mode[mode=cache|nocache, prompt_len>=1000])") == 2);
    assert_true(eval_number("count(temp.csv:temperature[temperature<1])") == 2);
    assert_true(eval_number("count(kv.csv:mode[mode!=cache])") == 2);
}

static void test_arithmetic_and_meta(void **state) {
    (void)state;
    assert_true(eval_number("1 + 2 * 3") == 7);
    assert_true(eval_number("(1 + 2) * 3") == 9);
    assert_true(eval_number("-2 * -3") == 6);
    assert_true(eval_number("10 / 4 - 0.5") == 2);
    assert_true(eval_number("max(temp.csv:entropy) - min(temp.csv:entropy)") == 3.5);
    assert_true(eval_number("meta(mem_bytes) / 2") == 805306368);
    Value v;
    Error err;
    assert_int_equal(query_eval("meta(cpu_model)", &run_a, &v, &err), QUERY_OK);
    assert_true(v.is_text);
    assert_string_equal(v.text, "Xeon, 2 cores");
    assert_string_equal(run_a.label, "box-a"); // meta.csv's hw names the run
    assert_non_null(strstr(dir_b, run_b.label)); // no meta.csv: the directory's name
}

static void test_formats(void **state) {
    (void)state;
    expect_format("kv.csv:total_ms[mode=nocache,prompt_len=1024] / kv.csv:total_ms[mode=cache,prompt_len=1024] | 3", "45");
    expect_format("mean(temp.csv:entropy) | .2f", "1.81");
    expect_format("meta(mem_bytes) | bytes", "1.5 GiB");
    expect_format("hardware.csv:bandwidth[name=H100] | si", "3.35 T");
    expect_format("count(kv.csv:mode[mode=cache|nocache])", "4");
    expect_format("meta(hw)", "box-a");
    expect_format("hardware.csv:bandwidth[name=H100] | si B/s", "3.35 TB/s"); // units follow the format
    expect_format("kv.csv:total_ms[mode=cache,prompt_len=256] | 3 ms", "12.5 ms");
    expect_format("kv.csv:total_ms[mode=nocache,prompt_len=256] / kv.csv:total_ms[mode=cache,prompt_len=256] | 3 ×", "10.6×");
    expect_format("0.125 | percent", "12.5%");
    char buf[64];
    Error err;
    assert_int_equal(query_format("1 | %g", &run_a, buf, sizeof buf, &err), QUERY_ERROR);
    assert_non_null(strstr(err.msg, "unknown number format"));
}

// Comparative words follow the data: the kinds of mistake the report once printed — "falls
// short of the FLOP ratio" beside a point above it, and "the best batch" quoting the
// largest batch's latency — cannot be written with within() / pick and at_max().
static void test_words_from_data(void **state) {
    (void)state;
    assert_true(eval_number("within(0.5, 1, 2)") == -1);
    assert_true(eval_number("within(1, 1, 2)") == 0);
    assert_true(eval_number("within(2.5, 1, 2)") == 1);
    const char *word = "within(kv.csv:total_ms[prompt_len=%d,mode=nocache] / kv.csv:total_ms[prompt_len=%d,mode=cache], "
                       "%g, %g) | pick falls short of / matches / exceeds";
    char ph[400];
    snprintf(ph, sizeof ph, word, 256, 256, 0.95 * 20, 1.05 * 20); // 10.6× against a ratio of 20
    expect_format(ph, "falls short of");
    snprintf(ph, sizeof ph, word, 1024, 1024, 0.95 * 20, 1.05 * 20); // 45× against 20
    expect_format(ph, "exceeds");
    snprintf(ph, sizeof ph, word, 1024, 1024, 0.95 * 45, 1.05 * 45);
    expect_format(ph, "matches");
    // the value at the row where another column is largest / smallest: the best row's cells
    assert_true(eval_number("at_max(kv.csv:prompt_len, total_ms)") == 1024);
    assert_true(eval_number("at_min(kv.csv:total_ms[mode=nocache], prompt_len)") == 132.5);
    assert_true(eval_number("at_max(temp.csv:temperature[temperature<2], entropy)") == 1);
    expect_format("at_max(kv.csv:note, total_ms)", "slow, very");
    expect_failure("at_max(kv.csv:total_ms, speed)", QUERY_ERROR, "unknown column 'speed'");
    expect_failure("at_max(kv.csv:total_ms)", QUERY_ERROR, "expected ','");
    expect_failure("at_max(kv.csv:total_ms[prompt_len=7], total_ms)", QUERY_NO_DATA, "no numbers");
    expect_failure("within(1, 2)", QUERY_ERROR, "expected ','");
    expect_failure("within(1, 3, 2)", QUERY_ERROR, "LOW > HIGH");
    expect_failure("within(meta(hw), 1, 2)", QUERY_ERROR, "needs numbers");
    char buf[64];
    Error err;
    assert_int_equal(query_format("2 | pick low / mid / high", &run_a, buf, sizeof buf, &err), QUERY_ERROR);
    assert_non_null(strstr(err.msg, "needs a within() result"));
    assert_int_equal(query_format("within(1, 0, 2) | pick low / high", &run_a, buf, sizeof buf, &err), QUERY_ERROR);
    assert_non_null(strstr(err.msg, "three words"));
}

// One number per quantity: q(NAME) reads quantities.csv's one source, and a placeholder that
// formats the same quantity from another CSV cell is refused (the report once printed sgemm
// as 189.5 and 196 GFLOP/s on two pages).
static void test_one_source_per_quantity(void **state) {
    (void)state;
    assert_true(eval_number("q(sgemm)") == 196);
    assert_true(eval_number("q(sgemm) / 2") == 98);
    assert_true(eval_number("peaks.csv:gflop_s[device=gpu]") == 5000); // another quantity in the same column
    expect_failure("peaks.csv:gflop_s[device=cpu,source=attention]", QUERY_ERROR,
                   "repeats the quantity 'sgemm' (the CPU's sgemm rate), which the report quotes from one source: write q(sgemm)");
    expect_failure("max(peaks.csv:gflop_s[device=cpu])", QUERY_ERROR, "repeats the quantity 'sgemm'");
    expect_failure("q(nope)", QUERY_ERROR, "no quantity 'nope' in quantities.csv");
}

// --- errors ---------------------------------------------------------------------------------

static void test_errors(void **state) {
    (void)state;
    expect_failure("nope.csv:x", QUERY_ERROR, "unknown file 'nope.csv'");
    expect_failure("kv.csv:speed", QUERY_ERROR, "unknown column 'speed' in kv.csv (columns: prompt_len, mode, total_ms, note)");
    expect_failure("kv.csv:total_ms[modes=cache]", QUERY_ERROR, "unknown column 'modes'");
    expect_failure("kv.csv:total_ms[mode]", QUERY_ERROR, "has no operator");
    expect_failure("kv.csv:total_ms[prompt_len>big]", QUERY_ERROR, "not a number");
    expect_failure("kv.csv:total_ms[mode=cache", QUERY_ERROR, "'[' without ']'");
    expect_failure("kv.csv:total_ms[mode=cache]", QUERY_ERROR, "2 rows match");
    expect_failure("avg(kv.csv:total_ms)", QUERY_ERROR, "unknown function 'avg'");
    expect_failure("max(kv.csv:note)", QUERY_ERROR, "is not a number");
    expect_failure("kv.csv:note[prompt_len=256,mode=cache] * 2", QUERY_ERROR, "needs numbers");
    expect_failure("1 +", QUERY_ERROR, "unexpected");
    expect_failure("1 2", QUERY_ERROR, "unexpected '2'");
    expect_failure("(1 + 2", QUERY_ERROR, "expected ')'");
    expect_failure("speed", QUERY_ERROR, "expected FILE:COLUMN");
    // no matching row is not a template mistake: the quick profile may sweep less
    expect_failure("kv.csv:total_ms[prompt_len=4096,mode=cache]", QUERY_NO_DATA, "no row of kv.csv:total_ms[prompt_len=4096,mode=cache]");
    expect_failure("max(kv.csv:total_ms[prompt_len=7])", QUERY_NO_DATA, "no numbers");
    expect_failure("meta(gpu)", QUERY_NO_DATA, "meta.csv has no key 'gpu'");
}

// --- text expansion -------------------------------------------------------------------------

static void test_expand_single(void **state) {
    (void)state;
    RunData *runs[1] = {&run_a};
    Error err;
    char *s = expand_text("Speed-up {kv.csv:total_ms[mode=nocache,prompt_len=256] / kv.csv:total_ms[mode=cache,prompt_len=256] | 3}×, "
                          "{{literal}} and {meta(hw)}.",
                          "t.tmpl:4", runs, 1, 0, &err);
    assert_non_null(s);
    assert_string_equal(s, "Speed-up 10.6×, {literal} and box-a.");
    free(s);
    s = expand_text("missing {kv.csv:total_ms[prompt_len=9,mode=cache]} here", "t.tmpl:5", runs, 1, 0, &err);
    assert_string_equal(s, "missing n/a here"); // with a warning on stderr
    free(s);
    assert_null(expand_text("missing {kv.csv:total_ms[prompt_len=9,mode=cache]}", "t.tmpl:6", runs, 1, 1, &err));
    assert_non_null(strstr(err.msg, "t.tmpl:6: in {kv.csv:total_ms[prompt_len=9,mode=cache]}: no row"));
    assert_null(expand_text("bad {kv.csv:speed}", "t.tmpl:7", runs, 1, 0, &err));
    assert_non_null(strstr(err.msg, "t.tmpl:7: in {kv.csv:speed}: unknown column 'speed'"));
    assert_null(expand_text("open { brace", "t.tmpl:8", runs, 1, 0, &err));
    assert_non_null(strstr(err.msg, "t.tmpl:8: '{' without '}'"));
    assert_null(expand_text("close } brace", "t.tmpl:9", runs, 1, 0, &err));
    assert_non_null(strstr(err.msg, "t.tmpl:9: '}' without '{'"));
}

static void test_expand_compare(void **state) {
    (void)state;
    RunData *runs[2] = {&run_a, &run_b};
    Error err;
    char *s = expand_text("{kv.csv:total_ms[mode=cache,prompt_len=1024]} ms; entropy {temp.csv:entropy[temperature=0.5]}",
                          "t.tmpl:1", runs, 2, 1, &err);
    assert_non_null(s);
    assert_string_equal(s, "40 → 20 ms; entropy 1.25"); // equal values print once
    free(s);
}

static void test_filters(void **state) {
    (void)state;
    Error err;
    const Table *t = rundata_table(&run_a, "kv.csv", &err);
    assert_non_null(t);
    Filter f;
    assert_int_equal(filter_parse(&f, "mode=cache|nocache, prompt_len>256", t, &err), 0);
    int matched = 0;
    for (int r = 0; r < t->n_rows; r++) matched += filter_match(&f, t, r);
    assert_int_equal(matched, 2);
    filter_free(&f);
    assert_int_equal(filter_parse(&f, "", t, &err), 0); // no conditions: every row
    assert_true(filter_match(&f, t, 3));
    filter_free(&f);
    assert_int_equal(filter_parse(&f, "speed=1", t, &err), -1);
    assert_non_null(strstr(err.msg, "unknown column 'speed' in"));
    assert_true(cells_equal("1.0", 1.0, "1", 1.0));
    assert_false(cells_equal("a", NAN, "b", NAN));
}

static void test_missing_reasons(void **state) {
    (void)state;
    char reason[256];
    assert_false(rundata_has(&run_a, "gpu.csv"));
    rundata_missing_reason(&run_a, "gpu.csv", "template reason", reason, sizeof reason);
    assert_string_equal(reason, "no CUDA device"); // the .skip file wins
    rundata_missing_reason(&run_a, "spec.csv", "template reason", reason, sizeof reason);
    assert_string_equal(reason, "template reason");
    rundata_missing_reason(&run_a, "spec.csv", NULL, reason, sizeof reason);
    assert_non_null(strstr(reason, "spec.csv was not found in"));
    assert_true(rundata_has(&run_a, "hardware.csv"));
}

static void test_bad_run_dirs(void **state) {
    (void)state;
    RunData r;
    Error err;
    assert_int_equal(rundata_open(&r, "/nonexistent/run", NULL, &err), -1);
    assert_non_null(strstr(err.msg, "/nonexistent/run"));
    char *d = make_scratch_dir();
    write_in(d, "meta.csv", "key,value\nhw,\"broken\n");
    assert_int_equal(rundata_open(&r, d, NULL, &err), -1);
    assert_non_null(strstr(err.msg, "meta.csv:2:4: unterminated quoted field"));
    write_in(d, "meta.csv", "key,value\nhw,x\n");
    write_in(d, "bad.csv", "a,b\n1,2,3\n");
    assert_int_equal(rundata_open(&r, d, NULL, &err), 0);
    Value v;
    assert_int_equal(query_eval("bad.csv:a[b=2]", &r, &v, &err), QUERY_ERROR);
    assert_non_null(strstr(err.msg, "bad.csv:2:4: record has more than"));
    rundata_close(&r);
    remove_tree(d);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_cells_and_ratios), cmocka_unit_test(test_aggregates),
        cmocka_unit_test(test_arithmetic_and_meta), cmocka_unit_test(test_formats),
        cmocka_unit_test(test_words_from_data),  cmocka_unit_test(test_one_source_per_quantity),
        cmocka_unit_test(test_errors),
        cmocka_unit_test(test_expand_single),
        cmocka_unit_test(test_expand_compare),   cmocka_unit_test(test_filters),
        cmocka_unit_test(test_missing_reasons),  cmocka_unit_test(test_bad_run_dirs),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
