// test_render_table.c: the renderer's CSV reader (render/table.c). Well-formed input in all
// its RFC 4180 forms (quoted fields holding commas, doubled quotes and line breaks; CRLF, LF
// and lone CR; a UTF-8 BOM; blank lines; empty fields), the cells' numeric values, and every
// malformed case, each of which must be an error naming the file, the line and the column.
// Run: make build/tests/test_render_table && ./build/tests/test_render_table
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <math.h>
#include <string.h>

#include "table.h"
#include "test_render_util.h"

static Table parse_ok(const char *text) {
    Table t;
    Error err = {{0}};
    int rc = table_parse(&t, "t.csv", text, strlen(text), &err);
    if (rc) fail_msg("unexpected error: %s", err.msg);
    return t;
}

// The error message for malformed text (which must fail).
static Error parse_bad(const char *text, size_t len) {
    Table t;
    Error err = {{0}};
    assert_int_equal(table_parse(&t, "bad.csv", text, len, &err), -1);
    return err;
}

static void expect_error(const char *text, const char *where, const char *what) {
    Error err = parse_bad(text, strlen(text));
    if (!strstr(err.msg, where) || !strstr(err.msg, what))
        fail_msg("for %s: got '%s', want '%s' and '%s'", text, err.msg, where, what);
}

// --- well-formed input --------------------------------------------------------------------

static void test_plain(void **state) {
    (void)state;
    Table t = parse_ok("a,b,c\n1,2.5,x\n-3,1e-3,y\n");
    assert_int_equal(t.n_cols, 3);
    assert_int_equal(t.n_rows, 2);
    assert_string_equal(t.names[2], "c");
    assert_string_equal(table_cell(&t, 1, 2), "y");
    assert_true(table_value(&t, 0, 1) == 2.5);
    assert_true(table_value(&t, 1, 1) == 1e-3);
    assert_true(isnan(table_value(&t, 0, 2)));
    assert_int_equal(table_column(&t, "b"), 1);
    assert_int_equal(table_column(&t, "nope"), -1);
    assert_int_equal(t.lines[1], 3);
    table_free(&t);
}

static void test_quoted_fields(void **state) {
    (void)state;
    Table t = parse_ok("name,text\n"
                       "\"a, b\",\"say \"\"hi\"\"\"\n"
                       "multi,\"line one\nline two\r\nline three\"\n"
                       "empty,\"\"\n"
                       "last,after\n");
    assert_int_equal(t.n_rows, 4);
    assert_string_equal(table_cell(&t, 0, 0), "a, b");
    assert_string_equal(table_cell(&t, 0, 1), "say \"hi\"");
    assert_string_equal(table_cell(&t, 1, 1), "line one\nline two\r\nline three");
    assert_string_equal(table_cell(&t, 2, 1), "");
    // a record after an embedded line break starts on the right line
    assert_int_equal(t.lines[1], 3);
    assert_int_equal(t.lines[2], 6);
    assert_int_equal(t.lines[3], 7);
    table_free(&t);
}

static void test_bom_crlf_blank_lines(void **state) {
    (void)state;
    Table t = parse_ok("\xEF\xBB\xBFx,y\r\n1,2\r\n\r\n3,4\r\n\r\n");
    assert_string_equal(t.names[0], "x"); // the BOM is not part of the first name
    assert_int_equal(t.n_rows, 2);
    assert_string_equal(table_cell(&t, 1, 1), "4");
    assert_int_equal(t.lines[1], 4);
    table_free(&t);
    t = parse_ok("x,y\r1,2\r3,4"); // lone CRs, no final line break
    assert_int_equal(t.n_rows, 2);
    assert_string_equal(table_cell(&t, 1, 0), "3");
    table_free(&t);
}

static void test_empty_fields(void **state) {
    (void)state;
    Table t = parse_ok("a,b,c\n,,\n1,,3\n");
    assert_int_equal(t.n_rows, 2);
    assert_string_equal(table_cell(&t, 0, 0), "");
    assert_true(isnan(table_value(&t, 0, 0)));
    assert_string_equal(table_cell(&t, 1, 2), "3");
    table_free(&t);
    t = parse_ok("only\n");
    assert_int_equal(t.n_cols, 1);
    assert_int_equal(t.n_rows, 0);
    table_free(&t);
}

static void test_utf8_cells(void **state) {
    (void)state;
    Table t = parse_ok("sym,v\n×,1\n≈ μ → ≤,2\n");
    assert_string_equal(table_cell(&t, 1, 0), "≈ μ → ≤");
    table_free(&t);
}

static void test_numbers(void **state) {
    (void)state;
    double v;
    assert_true(parse_number(" 42 ", &v) && v == 42);
    assert_true(parse_number("-1.5e3", &v) && v == -1500);
    assert_true(parse_number("nan", &v) && isnan(v));
    assert_true(parse_number("inf", &v) && isinf(v));
    assert_false(parse_number("", &v));
    assert_false(parse_number("12abc", &v));
    assert_false(parse_number("0x1f", &v)); // hex is text, not a number
    assert_false(parse_number("cache", &v));
}

static void test_load_file(void **state) {
    (void)state;
    char *dir = make_scratch_dir(), path[512];
    snprintf(path, sizeof path, "%s/x.csv", dir);
    write_text(path, "k,v\na,1\n");
    Table t;
    Error err;
    assert_int_equal(table_load(&t, path, &err), 0);
    assert_int_equal(t.n_rows, 1);
    assert_string_equal(t.path, path);
    table_free(&t);
    snprintf(path, sizeof path, "%s/missing.csv", dir);
    assert_int_equal(table_load(&t, path, &err), -1);
    assert_non_null(strstr(err.msg, "missing.csv"));
    remove_tree(dir);
}

// --- malformed input: file, line and column ---------------------------------------------------

static void test_stray_quote(void **state) {
    (void)state;
    expect_error("a,b\n1,ab\"c\n", "bad.csv:2:5:", "quote inside an unquoted field");
}

static void test_text_after_closing_quote(void **state) {
    (void)state;
    expect_error("a,b\n\"x\"y,2\n", "bad.csv:2:4:", "after a closing quote");
}

static void test_unterminated_quote(void **state) {
    (void)state;
    // the error points at the opening quote, even though the file ends two lines later
    expect_error("a,b\n1,\"never\nclosed\n", "bad.csv:2:3:", "unterminated quoted field");
}

static void test_too_many_fields(void **state) {
    (void)state;
    expect_error("a,b\n1,2\n3,4,5\n", "bad.csv:3:4:", "more than the header's 2 fields");
}

static void test_too_few_fields(void **state) {
    (void)state;
    expect_error("a,b,c\n1,2,3\n4,5\n", "bad.csv:3:4:", "record has 2 fields, the header has 3");
}

static void test_invalid_utf8(void **state) {
    (void)state;
    expect_error("a,b\n1,caf\xC3\n", "bad.csv:2:6:", "invalid UTF-8");
    expect_error("a,b\n1,\xED\xA0\x80\n", "bad.csv:2:3:", "invalid UTF-8");  // a surrogate
    expect_error("a,b\n1,\xC0\xAF\n", "bad.csv:2:3:", "invalid UTF-8");      // overlong '/'
    expect_error("a,\xE2\x82\xAC\xFF\n", "bad.csv:1:4:", "invalid UTF-8");   // column in characters
}

static void test_nul_byte(void **state) {
    (void)state;
    Error err = parse_bad("a,b\n1,\0\n", 8);
    assert_non_null(strstr(err.msg, "bad.csv:2:3:"));
    assert_non_null(strstr(err.msg, "NUL"));
}

static void test_bad_headers(void **state) {
    (void)state;
    expect_error("", "bad.csv", "empty file");
    expect_error("\n\n", "bad.csv", "empty file");
    expect_error("a,b,a\n1,2,3\n", "bad.csv:1:", "duplicate column name 'a'");
    expect_error("a,,c\n1,2,3\n", "bad.csv:1:", "column 2 of the header has an empty name");
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_plain),
        cmocka_unit_test(test_quoted_fields),
        cmocka_unit_test(test_bom_crlf_blank_lines),
        cmocka_unit_test(test_empty_fields),
        cmocka_unit_test(test_utf8_cells),
        cmocka_unit_test(test_numbers),
        cmocka_unit_test(test_load_file),
        cmocka_unit_test(test_stray_quote),
        cmocka_unit_test(test_text_after_closing_quote),
        cmocka_unit_test(test_unterminated_quote),
        cmocka_unit_test(test_too_many_fields),
        cmocka_unit_test(test_too_few_fields),
        cmocka_unit_test(test_invalid_utf8),
        cmocka_unit_test(test_nul_byte),
        cmocka_unit_test(test_bad_headers),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
