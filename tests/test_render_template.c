// test_render_template.c: the report template parser (render/template.c). A template using
// every directive parses into the expected blocks; each structural mistake is an error
// that names the template file and the line at fault.
// Run: make build/tests/test_render_template && ./build/tests/test_render_template
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <string.h>

#include "template.h"
#include "test_render_util.h"

static char *dir;

static int setup(void **state) {
    (void)state;
    dir = make_scratch_dir();
    return 0;
}

static int teardown(void **state) {
    (void)state;
    remove_tree(dir);
    return 0;
}

static void write_in_dir(const char *name, const char *text, char *path, size_t size) {
    snprintf(path, size, "%s/%s", dir, name);
    write_text(path, text);
}

// Parse text as <dir>/t.tmpl and expect an error containing "<file>:<line>:" and `what`.
static void expect_error_in(const char *text, const char *file, int line, const char *what) {
    char path[512], where[64];
    write_in_dir("t.tmpl", text, path, sizeof path);
    Template t;
    Error err = {{0}};
    if (template_load(&t, path, &err) == 0) {
        template_free(&t);
        fail_msg("no error for: %s", text);
    }
    snprintf(where, sizeof where, "%s:%d:", file, line);
    if (!strstr(err.msg, where) || !strstr(err.msg, what)) fail_msg("got '%s', want '%s' and '%s'", err.msg, where, what);
}

static void expect_error(const char *text, int line, const char *what) { expect_error_in(text, "t.tmpl", line, what); }

static void test_full_template(void **state) {
    (void)state;
    char path[512], inc[512];
    write_in_dir("part.tmpl", "@subsection Included\nFrom the included file.\n", inc, sizeof inc);
    write_in_dir("t.tmpl",
                 "# a comment\n"
                 "@title Lab report\n"
                 "@subtitle {meta(hw)}\n"
                 "@section KV cache\n"
                 "@requires a.csv b.csv else no CUDA device\n"
                 "First line\n"
                 "  second line.\n"
                 "\n"
                 "- one bullet\n"
                 "  continued\n"
                 "- two\n"
                 "@figure kv\n"
                 "kind: roofline\n"
                 "csv: a.csv\n"
                 "x: i\n"
                 "y: p\n"
                 "peak: a.csv:v[k=1] ; first\n"
                 "peak: a.csv:v[k=2]\n"
                 "bandwidth: 3e9\n"
                 "caption: A long caption\n"
                 "   that continues here.\n"
                 "@end\n"
                 "@pagebreak\n"
                 "@table\n"
                 "csv: b.csv\n"
                 "columns: x, y\n"
                 "@end\n"
                 "@include part.tmpl\n",
                 path, sizeof path);
    Template t;
    Error err;
    if (template_load(&t, path, &err)) fail_msg("%s", err.msg);
    assert_string_equal(t.title, "Lab report");
    assert_string_equal(t.subtitle, "{meta(hw)}");
    assert_string_equal(t.dir, dir);
    static const BlockKind kinds[] = {BLOCK_SECTION,   BLOCK_PARAGRAPH, BLOCK_PARAGRAPH,  BLOCK_PARAGRAPH, BLOCK_FIGURE,
                                      BLOCK_PAGEBREAK, BLOCK_TABLE,     BLOCK_SUBSECTION, BLOCK_PARAGRAPH};
    assert_int_equal(t.n_blocks, 9);
    for (int i = 0; i < 9; i++) assert_int_equal(t.blocks[i].kind, kinds[i]);
    const Block *s = &t.blocks[0];
    assert_int_equal(s->n_requires, 2);
    assert_string_equal(s->requires[1], "b.csv");
    assert_string_equal(s->reason, "no CUDA device");
    assert_string_equal(t.blocks[1].text, "First line second line.");
    assert_int_equal(t.blocks[1].line, 6);
    assert_true(t.blocks[2].bullet && t.blocks[3].bullet);
    assert_string_equal(t.blocks[2].text, "one bullet continued");
    const Block *f = &t.blocks[4];
    assert_string_equal(f->text, "kv");
    assert_string_equal(figure_kind(f), "roofline");
    assert_string_equal(block_option(f, "caption"), "A long caption that continues here.");
    assert_int_equal(block_find_option(f, "csv")->line, 14);
    int peaks = 0;
    for (int i = 0; i < f->n_options; i++) peaks += strcmp(f->options[i].key, "peak") == 0;
    assert_int_equal(peaks, 2);
    assert_null(block_option(f, "where"));
    assert_string_equal(t.blocks[7].text, "Included");
    assert_non_null(strstr(t.blocks[8].file, "part.tmpl"));
    assert_int_equal(t.blocks[8].line, 2);
    template_free(&t);
}

static void test_directive_errors(void **state) {
    (void)state;
    expect_error("@section A\n\n@figur x\n", 3, "unknown directive '@figur'");
    expect_error("text\n@end\n", 2, "@end without an open @figure or @table");
    expect_error("@requires a.csv\n", 1, "@requires must follow a @section");
    expect_error("@section A\n@requires\n", 2, "@requires names no CSV file");
    expect_error("@section\n", 1, "@section needs a title");
    expect_error("@include\n", 1, "@include needs a file name");
}

static void test_block_errors(void **state) {
    (void)state;
    expect_error("@figure\ncsv: a.csv\nx: a\ny: b\ncolour: red\n@end\n", 5, "option 'colour' is not known for line figures");
    expect_error("@figure\nkind: line\ncsv: a.csv\nx: a\ny: b\nz: c\n@end\n", 6, "option 'z' is not known for line");
    expect_error("@figure\nkind: pie\ncsv: a.csv\nx: a\ny: b\n@end\n", 2, "unknown figure kind 'pie'");
    expect_error("@figure\nx: a\ny: b\n@end\n", 4, "@figure at line 1 needs the option 'csv'");
    expect_error("@figure\nkind: heatmap\ncsv: a.csv\nx: a\ny: b\n@end\n", 6, "needs the option 'z'");
    expect_error("@figure\nkind: roofline\ncsv: a.csv\nx: a\ny: b\nbandwidth: 1\n@end\n", 7, "needs the option 'peak'");
    expect_error("@figure\ncsv: a.csv\nx: a\ny: b\npeak: 1\nbandwidth: 1\n@end\n", 6, "option 'bandwidth' is not known for line");
    expect_error("@table\ncsv: a.csv\n@end\n", 3, "@table at line 1 needs the option 'columns' (or row: lines)");
    expect_error("@table\nheaders: a, b\nrow: 1 | 2\nrow: 3\n@end\n", 4, "the row has 1 cells for 2 headers");
    expect_error("@table\nheaders: a, b\nrow: {x.csv:y | pick lo / mid / hi} | 2 | 3\n@end\n", 3,
                 "the row has 3 cells for 2 headers"); // a '|' inside braces does not split
    expect_error("@table\ncsv: a.csv\nheaders: a\nrow: 1\n@end\n", 5, "has row: lines, so it takes no 'csv'");
    expect_error("@table\nrow: 1\n@end\n", 3, "has row: lines, so it needs 'headers'");
    expect_error("@figure\ncsv: a.csv\ncsv: b.csv\nx: a\ny: b\n@end\n", 3, "option 'csv' is given twice");
    expect_error("@figure\ncsv a.csv\n@end\n", 2, "expected 'key: value'");
    expect_error("\n@figure\ncsv: a.csv\nx: a\ny: b\n", 2, "block has no @end");
    expect_error("@figure\ncsv: a.csv\n@section B\n", 3, "missing @end for the block opened at line 1");
}

// A line figure may draw flat ceilings (peak:), as a roofline does, but needs none.
static void test_line_peak(void **state) {
    (void)state;
    char path[512];
    write_in_dir("t.tmpl", "@figure\ncsv: a.csv\nx: t\ny: rate\npeak: b.csv:gflop_s ; sgemm\n@end\n", path, sizeof path);
    Template t;
    Error err;
    if (template_load(&t, path, &err)) fail_msg("%s", err.msg);
    assert_string_equal(block_option(&t.blocks[0], "peak"), "b.csv:gflop_s ; sgemm");
    template_free(&t);
}

static void test_include_errors(void **state) {
    (void)state;
    expect_error("one\n@include nowhere.tmpl\n", 2, "cannot include");
    char path[512];
    write_in_dir("loop.tmpl", "@include t.tmpl\n", path, sizeof path);
    expect_error_in("@include loop.tmpl\n", "loop.tmpl", 1, "t.tmpl' includes itself (include cycle)");
}

static void test_bad_text(void **state) {
    (void)state;
    expect_error("fine\nbad \xFF byte\n", 2, "invalid UTF-8");
    Template t;
    Error err;
    assert_int_equal(template_load(&t, "/nonexistent/report.tmpl", &err), -1);
    assert_non_null(strstr(err.msg, "/nonexistent/report.tmpl"));
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_full_template), cmocka_unit_test(test_directive_errors),
        cmocka_unit_test(test_block_errors),  cmocka_unit_test(test_include_errors),
        cmocka_unit_test(test_bad_text),      cmocka_unit_test(test_line_peak),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
