// test_render_report.c: whole reports from the fixture runs (tests/fixtures/render/run_a,
// run_b) and template (templates/fixture.tmpl). The PDF is read back with poppler-utils:
// its page count, metadata, outline (pdftohtml -xml) and text (pdftotext) must hold the
// sections, numbered captions, "not run" notices and numbers computed here from the CSVs;
// every figure is saved as a PNG of the expected size. Compare mode overlays the runs and
// tabulates B/A (C/A...), ends with "which machine wins what", and names a missing run. A requirement of one backend's rows (F.csv[backend=cuda]) holds only when
// such a row exists, and reads its reason from F.cuda.skip. Template mistakes name the
// template line, and a failed render leaves no PDF behind. bin/render's command line is checked when $INFERLAB_BIN has it.
// Other tools read the PDFs cleanly (no pdftotext / pdftoppm warnings, qpdf --check passes,
// and ×, ≈, μ, → extract), and tables too wide for the page keep their words whole (smaller
// type, then breaks after _ / -), checked word by word with pdftotext -bbox.
// Run: make build/tests/test_render_report && ./build/tests/test_render_report
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <dirent.h>
#include <math.h>
#include <stdint.h>
#include <string.h>
#include <sys/stat.h>

#include "pdf.h"
#include "report.h"
#include "report_parts.h"
#include "rundata.h"
#include "table.h"
#include "test_render_util.h"

static char *scratch;
static char fixture_dir[512], template_path[600], run_a[600], run_b[600];

static int setup(void **state) {
    (void)state;
    scratch = make_scratch_dir();
    snprintf(fixture_dir, sizeof fixture_dir, "%s/tests/fixtures/render", repo_root());
    snprintf(template_path, sizeof template_path, "%s/templates/fixture.tmpl", fixture_dir);
    snprintf(run_a, sizeof run_a, "%s/run_a", fixture_dir);
    snprintf(run_b, sizeof run_b, "%s/run_b", fixture_dir);
    return 0;
}

static int teardown(void **state) {
    (void)state;
    remove_tree(scratch);
    return 0;
}

static int file_exists(const char *path) {
    struct stat st;
    return stat(path, &st) == 0;
}

static void require_poppler(void) {
    if (!have_program("pdftotext") || !have_program("pdfinfo") || !have_program("pdftohtml")) {
        print_message("poppler-utils missing (make deps): PDF checks skipped\n");
        skip();
    }
}

static char *pdf_text(const char *pdf) {
    char cmd[1200];
    snprintf(cmd, sizeof cmd, "pdftotext -enc UTF-8 '%s' - 2>/dev/null", pdf);
    return command_output(cmd, NULL);
}

static void expect_text(const char *text, const char *want) {
    if (!strstr(text, want)) fail_msg("the PDF's text lacks '%s'", want);
}

// Other tools read the PDF cleanly: poppler's pdftotext and pdftoppm print nothing on
// stderr (libharu's own ToUnicode CMap made them warn on every page), and qpdf --check
// finds no error.
static void expect_clean_for_tools(const char *pdf) {
    char cmd[1600];
    int status;
    snprintf(cmd, sizeof cmd, "pdftotext '%s' /dev/null 2>&1", pdf);
    char *out = command_output(cmd, &status);
    if (status != 0 || *out) fail_msg("pdftotext: status %d, '%s'", status, out);
    free(out);
    snprintf(cmd, sizeof cmd, "pdftoppm -r 12 -png '%s' '%s/page' 2>&1 && rm -f '%s'/page*.png", pdf, scratch, scratch);
    out = command_output(cmd, &status);
    if (status != 0 || *out) fail_msg("pdftoppm: status %d, '%s'", status, out);
    free(out);
    if (!have_program("qpdf")) {
        print_message("qpdf missing (make deps): qpdf --check skipped\n");
        return;
    }
    snprintf(cmd, sizeof cmd, "qpdf --check '%s' 2>&1", pdf);
    out = command_output(cmd, &status);
    if (status != 0 || !strstr(out, "No syntax or stream encoding errors found")) fail_msg("qpdf --check: status %d, '%s'", status, out);
    free(out);
}

// No temp files ("NAME.tmp.PID") may be left in dir.
static void expect_no_temp_files(const char *dir) {
    DIR *d = opendir(dir);
    assert_non_null(d);
    for (struct dirent *e; (e = readdir(d));)
        if (strstr(e->d_name, ".tmp.")) fail_msg("temp file left behind: %s/%s", dir, e->d_name);
    closedir(d);
}

// A cell of a fixture CSV chosen by two key columns.
static double fixture_value(const char *run, const char *csv, const char *col, const char *k1, const char *v1,
                            const char *k2, const char *v2, const char *k3, const char *v3) {
    char path[800];
    snprintf(path, sizeof path, "%s/%s", run, csv);
    Table t;
    Error err;
    if (table_load(&t, path, &err)) fail_msg("%s", err.msg);
    int c = table_column(&t, col), c1 = table_column(&t, k1), c2 = table_column(&t, k2), c3 = table_column(&t, k3);
    double v = NAN;
    for (int r = 0; r < t.n_rows; r++)
        if (!strcmp(table_cell(&t, r, c1), v1) && !strcmp(table_cell(&t, r, c2), v2) && !strcmp(table_cell(&t, r, c3), v3))
            v = table_value(&t, r, c);
    table_free(&t);
    assert_false(isnan(v));
    return v;
}

static void png_size(const char *path, int *w, int *h) {
    FILE *f = fopenCheck(path, "rb");
    unsigned char head[24];
    assert_int_equal(fread(head, 1, sizeof head, f), sizeof head);
    fclose(f);
    *w = head[16] << 24 | head[17] << 16 | head[18] << 8 | head[19];
    *h = head[20] << 24 | head[21] << 16 | head[22] << 8 | head[23];
}

static ReportOptions options(const char *out, const char *figures) {
    ReportOptions o = report_defaults();
    o.template_path = template_path;
    o.out_path = out;
    o.figures_dir = figures;
    return o;
}

// --- a single run ---------------------------------------------------------------------------

static void test_single_report(void **state) {
    (void)state;
    char out[700], figures[700];
    snprintf(out, sizeof out, "%s/a.pdf", scratch);
    snprintf(figures, sizeof figures, "%s/figures", scratch);
    ReportOptions o = options(out, figures);
    Error err;
    if (report_render(&o, run_a, &err)) fail_msg("%s", err.msg);
    assert_true(file_exists(out));
    expect_no_temp_files(scratch);
    expect_no_temp_files(figures);

    // every rendered figure is a PNG of the text width at 200 dpi, 0.55 (heatmap 0.5) as tall
    static const char *ids[] = {"kv-latency", "kv-decode", "kv-memory",     "entropy",    "diversity",
                                "topk",       "kv-bytes",  "tok-s",         "attn-time",  "attn-memory",
                                "needle",     "roofline-here", "roofline-h100"};
    int want_w = (int)lround(pdf_text_width() * 200 / 72);
    for (size_t i = 0; i < sizeof ids / sizeof ids[0]; i++) {
        char path[800];
        snprintf(path, sizeof path, "%s/%s.png", figures, ids[i]);
        if (!file_exists(path)) fail_msg("no figure %s", path);
        int w, h;
        png_size(path, &w, &h);
        double ratio = strcmp(ids[i], "needle") == 0 ? 0.5 : 0.55;
        assert_int_equal(w, want_w);
        assert_int_equal(h, (int)lround(pdf_text_width() * ratio * 200 / 72));
    }
    char path[800];
    snprintf(path, sizeof path, "%s/attn-cuda.png", figures); // its section did not run
    assert_false(file_exists(path));

    require_poppler();
    char cmd[1200];
    snprintf(cmd, sizeof cmd, "pdfinfo '%s' 2>/dev/null", out);
    char *info = command_output(cmd, NULL);
    expect_text(info, "Pages:           12");
    expect_text(info, "Title:           inferlab fixture report");
    free(info);

    snprintf(cmd, sizeof cmd, "pdftohtml -xml -i -stdout '%s' 2>/dev/null", out);
    char *xml = command_output(cmd, NULL);
    static const char *outline[] = {"<outline>", ">1 KV cache</item>", ">2 Sampling</item>", ">2.1 Samples</item>",
                                    ">3 Attention variants</item>", ">4.1 On the GPU</item>", ">5 Long context</item>",
                                    ">6 Hardware budget</item>", ">7 Speculative decoding</item>"};
    for (size_t i = 0; i < sizeof outline / sizeof outline[0]; i++)
        if (!strstr(xml, outline[i])) fail_msg("the outline lacks %s", outline[i]);
    // subsections nest under their section, and bookmarks point at the right pages
    expect_text(xml, "<item page=\"5\">2 Sampling</item>\n<outline>\n<item page=\"6\">2.1 Samples</item>\n</outline>");
    free(xml);

    char *text = pdf_text(out);
    static const char *want[] = {
        "inferlab fixture report", "xeon-8375c-2c, quick profile", "Intel(R) Xeon(R) Platinum 8375C", "24 GiB",
        "Contents", "1 KV cache", "2.1 Samples", "Figure 1: Per-step decode latency", "Figure 13:", "Table 1:",
        "Table 3 (continued)", "Not run: no CUDA device (the CUDA runtime reports",
        "Not run: the speculative experiment has not been written yet",
        "said unto them, \"Go ye forth.\"", // a quoted CSV cell, doubled quotes undone
        "512 MiB", "2.58", "T×T", "32 MiB at 4K tokens", "20 GB/s and 150 GFLOP/s",
        "reads ≈ 2 μs of keys per token → the cache"}; // non-Latin-1 characters extract

    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) expect_text(text, want[i]);
    // the speed-up paragraph, computed here from the fixture CSV
    double slow = fixture_value(run_a, "kv_cache.csv", "total_ms", "mode", "nocache", "prompt_len", "256", "gen_len", "128");
    double fast = fixture_value(run_a, "kv_cache.csv", "total_ms", "mode", "cache", "prompt_len", "256", "gen_len", "128");
    char speedup[64];
    snprintf(speedup, sizeof speedup, "256 + 128 tokens is %.3g×", slow / fast);
    expect_text(text, speedup);
    free(text);
    expect_clean_for_tools(out);
}

// --- two runs -------------------------------------------------------------------------------

static void test_compare_report(void **state) {
    (void)state;
    char out[700];
    snprintf(out, sizeof out, "%s/compare.pdf", scratch);
    ReportOptions o = options(out, NULL);
    Error err;
    const char *dirs[] = {run_a, run_b};
    if (report_compare(&o, dirs, 2, &err)) fail_msg("%s", err.msg);
    assert_true(file_exists(out));
    require_poppler();
    char *text = pdf_text(out);
    static const char *want[] = {
        "A: xeon-8375c-2c", "B: epyc-9654-16c-h200", "NVIDIA H200", "Not run on A (xeon-8375c-2c): no CUDA device",
        "Figure 11: Attention on the GPU", "Not run on either machine: the speculative experiment",
        "Figure 12a:", "Figure 12b:", "Table 2a:", "Table 2b:", "prefill (ms) B/A", "14 of 14 rows matched on 3 key columns",
        "Summary of ratios against A", "geo. mean", "attention_cuda.csv (only in B)", "Which machine wins what"};
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) expect_text(text, want[i]);
    // placeholders read A → B
    double a = fixture_value(run_a, "kv_cache.csv", "total_ms", "mode", "cache", "prompt_len", "1024", "gen_len", "1024");
    double b = fixture_value(run_b, "kv_cache.csv", "total_ms", "mode", "cache", "prompt_len", "1024", "gen_len", "1024");
    double na = fixture_value(run_a, "kv_cache.csv", "total_ms", "mode", "nocache", "prompt_len", "1024", "gen_len", "1024");
    double nb = fixture_value(run_b, "kv_cache.csv", "total_ms", "mode", "nocache", "prompt_len", "1024", "gen_len", "1024");
    char line[128];
    snprintf(line, sizeof line, "%.3g× → %.3g×", na / a, nb / b);
    expect_text(text, line);
    // a ratio cell: decode time B/A for prompt 32, cache
    double da = fixture_value(run_a, "kv_cache.csv", "decode_ms_median", "mode", "cache", "prompt_len", "32", "gen_len", "128");
    double db = fixture_value(run_b, "kv_cache.csv", "decode_ms_median", "mode", "cache", "prompt_len", "32", "gen_len", "128");
    snprintf(line, sizeof line, "%.3g×", db / da);
    expect_text(text, line);
    free(text);
    expect_clean_for_tools(out);
}

static void test_compare_default_path(void **state) {
    (void)state;
    static const char *cases[][3] = {
        {"out/A", "out/B", "out/compare-A-vs-B.pdf"},
        {"x/y/run-1/", "other/run-2", "x/y/compare-run-1-vs-run-2.pdf"},
        {"A", "B", "compare-A-vs-B.pdf"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char *p = compare_default_path(cases[i], 2);
        assert_string_equal(p, cases[i][2]);
        free(p);
    }
    const char *three[] = {"fleet/cpu", "fleet/a100", "fleet/h100"};
    char *p = compare_default_path(three, 3);
    assert_string_equal(p, "fleet/compare-cpu-vs-a100-vs-h100.pdf");
    free(p);
}

// A copy of run A as a third machine whose every time in kv_cache.csv is 100x shorter.
static void make_fast_copy(const char *dir) {
    char cmd[8192];
    snprintf(cmd, sizeof cmd,
             "rm -rf '%s' && cp -r '%s' '%s' && awk -F, -v OFS=, "
             "'NR == 1 { for (i = 1; i <= NF; i++) if ($i ~ /_ms(_median)?$/) ms[i] = 1; print; next }"
             " { for (i in ms) $i = $i / 100; print }' '%s/kv_cache.csv' > '%s/kv.tmp' && mv '%s/kv.tmp' '%s/kv_cache.csv'",
             dir, run_a, dir, run_a, dir, dir, dir);
    int status;
    free(command_output(cmd, &status));
    assert_int_equal(status, 0);
}

// Three machines and a fourth without results: every machine has a letter and a line style,
// tables give B/A and C/A, the machine that is 100x faster wins kv_cache.csv's times, two
// machines of one hardware are told apart by their directories, and the missing one is named.
static void test_compare_many(void **state) {
    (void)state;
    char out[700], run_c[700], gone[700];
    snprintf(out, sizeof out, "%s/compare3.pdf", scratch);
    snprintf(run_c, sizeof run_c, "%s/run_c", scratch);
    snprintf(gone, sizeof gone, "%s/run_gone", scratch);
    make_fast_copy(run_c);
    ReportOptions o = options(out, NULL);
    Error err;
    const char *dirs[] = {run_a, run_b, run_c, gone};
    if (report_compare(&o, dirs, 4, &err)) fail_msg("%s", err.msg);
    require_poppler();
    char *text = pdf_text(out);
    static const char *want[] = {
        "A: xeon-8375c-2c (run_a)", "B: epyc-9654-16c-h200", "C: xeon-8375c-2c (run_c)", "(ms) C/A",
        "14 of 14 (B), 14 of 14 (C) rows matched", "Not run on C (xeon-8375c-2c (run_c)): no CUDA device",
        "Which machine wins what", "No results from 1 machine: run_gone (no directory", "Figure 12c:",
        "decode_ms_median", "0.01×"};
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) expect_text(text, want[i]);
    // the tally (its lines joined): C wins at least every time column of kv_cache.csv
    for (char *c = text; *c; c++)
        if (*c == '\n') *c = ' ';
    const char *tally = strstr(text, "C (xeon-8375c-2c (run_c)) wins ");
    if (!tally) fail_msg("no tally line for C");
    int wins = atoi(tally + strlen("C (xeon-8375c-2c (run_c)) wins "));
    assert_true(wins >= 3); // prefill_ms, decode_ms_median and total_ms
    free(text);
    expect_clean_for_tools(out);
    // every run missing is an error, naming one
    const char *none[] = {gone, gone};
    assert_int_not_equal(report_compare(&o, none, 2, &err), 0);
    assert_non_null(strstr(err.msg, "no directory"));
}

// --- tables keep their words whole ------------------------------------------------------------

typedef struct {
    double x, y; // top left corner
    char text[128];
} PdfWord;

// Every word pdftotext finds in the PDF, with its position (pdftotext -bbox).
static PdfWord *pdf_words(const char *pdf, int *n) {
    char cmd[1200];
    snprintf(cmd, sizeof cmd, "pdftotext -bbox '%s' - 2>/dev/null", pdf);
    char *xml = command_output(cmd, NULL);
    PdfWord *words = NULL;
    *n = 0;
    for (char *s = xml; (s = strstr(s, "<word "));) {
        PdfWord w;
        int end = 0;
        if (sscanf(s, "<word xMin=\"%lf\" yMin=\"%lf\" %*[^>]>%n", &w.x, &w.y, &end) != 2 || end == 0) fail_msg("pdftotext -bbox: %.60s", s);
        s += end;
        size_t len = strcspn(s, "<");
        snprintf(w.text, sizeof w.text, "%.*s", (int)len, s);
        words = reallocCheck(words, (size_t)(*n + 1) * sizeof *words);
        words[(*n)++] = w;
    }
    free(xml);
    return words;
}

// The word whose line continues words[i] in a left-aligned cell: the same left edge, on the
// nearest line below. -1 when there is none.
static int next_line_in_cell(const PdfWord *words, int n, int i) {
    int best = -1;
    for (int k = 0; k < n; k++)
        if (fabs(words[k].x - words[i].x) < 0.5 && words[k].y > words[i].y + 1 && (best < 0 || words[k].y < words[best].y)) best = k;
    return best;
}

// 1 when `want` is in the PDF: as one word, or (broken) as pieces that each end in '_', '/'
// or '-' and continue at the start of the cell's next line.
static int has_word(const PdfWord *words, int n, const char *want, int *broken) {
    for (int i = 0; i < n; i++) {
        char joined[512] = "";
        for (int k = i; k >= 0 && strlen(joined) < strlen(want); k = next_line_in_cell(words, n, k)) {
            size_t len = strlen(words[k].text);
            strncat(joined, words[k].text, sizeof joined - strlen(joined) - 1);
            if (strcmp(joined, want) == 0) {
                if (k != i) *broken = 1;
                return 1;
            }
            if (len == 0 || !strchr("_/-", words[k].text[len - 1]) || strncmp(joined, want, strlen(joined)) != 0) break;
        }
    }
    return 0;
}

// A run directory with one CSV, wide.csv: a header and n_rows copies of one row.
static void write_wide_run(const char *run, const char *const *header, const char *const *row, int n_cols, int n_rows) {
    mkdir(run, 0777);
    char path[800], text[8192] = "";
    for (int c = 0; c < n_cols; c++) snprintf(text + strlen(text), sizeof text - strlen(text), "%s%s", c ? "," : "", header[c]);
    for (int r = 0; r < n_rows; r++) {
        strcat(text, "\n");
        for (int c = 0; c < n_cols; c++) snprintf(text + strlen(text), sizeof text - strlen(text), "%s%s", c ? "," : "", row[c]);
    }
    strcat(text, "\n");
    snprintf(path, sizeof path, "%s/wide.csv", run);
    write_text(path, text);
}

// Write `text` to run/NAME.
static void write_run_file(const char *run, const char *name, const char *text) {
    char path[800];
    snprintf(path, sizeof path, "%s/%s", run, name);
    write_text(path, text);
}

// Render run with template `text` written to run/NAME.tmpl, into run/NAME.pdf (its path in
// out); the status.
static int render_in(const char *run, const char *name, const char *text, int strict, char *out, size_t size,
                     Error *err) {
    char tmpl[800];
    snprintf(tmpl, sizeof tmpl, "%s/%s.tmpl", run, name);
    snprintf(out, size, "%s/%s.pdf", run, name);
    write_text(tmpl, text);
    ReportOptions o = report_defaults();
    o.template_path = tmpl;
    o.out_path = out;
    o.figures_dir = run;
    o.strict = strict;
    return report_render(&o, run, err);
}

// Render `run` with one table of all of wide.csv's columns; the status and the PDF's words.
static int render_wide(const char *run, const char *const *header, int n_cols, int strict, PdfWord **words, int *n_words, Error *err) {
    char out[800], body[4096] = "@section Wide\n@table\ncsv: wide.csv\ncolumns: ";
    for (int c = 0; c < n_cols; c++) snprintf(body + strlen(body), sizeof body - strlen(body), "%s%s", c ? ", " : "", header[c]);
    strcat(body, "\nheaders: "); // as written, '_' and all (a header without it would be the display name)
    for (int c = 0; c < n_cols; c++) snprintf(body + strlen(body), sizeof body - strlen(body), "%s%s", c ? ", " : "", header[c]);
    strcat(body, "\nformats: raw\ncaption: A wide table.\n@end\n");
    int status = render_in(run, "wide", body, strict, out, sizeof out, err);
    if (status == 0) *words = pdf_words(out, n_words);
    return status;
}

static void test_table_words_stay_whole(void **state) {
    (void)state;
    require_poppler();
    char run[700];
    Error err;
    PdfWord *words;
    int n, broken = 0;
    // the hardware budget's table: its widest words do not fit side by side in 8.5 pt type
    // (the old layout cut "weight s", "decod e", "comput e"); smaller type keeps them whole
    static const char *const budget_h[] = {"model", "weights", "hardware", "KV tokens that fit", "decode b=1 (ms)",
                                           "decode b=64 (ms)", "b=64 bound", "tokens/s at b=64", "prefill 1K (ms)"};
    static const char *const budget_r[] = {"DeepSeek-V2-Lite", "bf16", "intel-xeon-2c measured", "1234567",
                                           "0.000123456", "123456.78", "compute", "1234567.8", "1400090.5"};
    snprintf(run, sizeof run, "%s/run_budget", scratch);
    write_wide_run(run, budget_h, budget_r, 9, 3);
    if (render_wide(run, budget_h, 9, 1, &words, &n, &err)) fail_msg("%s", err.msg);
    static const char *const whole[] = {"weights", "decode", "compute", "intel-xeon-2c", "measured", "DeepSeek-V2-Lite",
                                        "0.000123456", "1400090.5", "prefill"};
    for (size_t i = 0; i < sizeof whole / sizeof whole[0]; i++) {
        int found = 0;
        for (int k = 0; k < n && !found; k++) found = strcmp(words[k].text, whole[i]) == 0;
        if (!found) fail_msg("'%s' is not one word in the table", whole[i]);
    }
    free(words);

    // the serving table's headers: a label that ends in digits is no number, so "p50 ms" is
    // two words, each whole (gluing them as a number and its unit cut "m" from "s")
    static const char *const serve_h[] = {"policy", "KV cache", "prefix sharing", "tok/s", "TTFT p50 ms", "TTFT p99 ms",
                                          "TPOT p50 ms", "TPOT p99 ms", "KV util.", "waited", "preempted"};
    static const char *const serve_r[] = {"continuous", "reserve", "off", "2102", "81.5 ± 31", "182",
                                          "0.582 ± 0.22", "0.811", "42.9%", "45.3%", "0%"};
    snprintf(run, sizeof run, "%s/run_serve", scratch);
    write_wide_run(run, serve_h, serve_r, 11, 3);
    if (render_wide(run, serve_h, 11, 1, &words, &n, &err)) fail_msg("%s", err.msg);
    int n_ms = 0, n_spread = 0;
    for (int k = 0; k < n; k++) {
        if (strcmp(words[k].text, "m") == 0 || strcmp(words[k].text, "s") == 0) fail_msg("a header's 'ms' is cut");
        n_ms += strcmp(words[k].text, "ms") == 0;
        if (strcmp(words[k].text, "±") != 0) continue; // a spread's sign stays on the line of its number
        n_spread++;
        assert_true(k + 1 < n);
        if (fabs(words[k + 1].y - words[k].y) > 0.5) fail_msg("'± %s' is split across lines", words[k + 1].text);
    }
    assert_int_equal(n_ms, 4);
    assert_int_equal(n_spread, 6); // 3 rows, 2 cells each
    free(words);

    // snake_case headers too long for any type size: they break after '_', never inside a piece
    static const char *const snake_h[] = {"name", "passkey_worst_depth_accuracy", "val_bits_per_byte_mean",
                                          "decode_ms_b64_median_p90", "prefill_ms_1k_tokens_median", "kv_bytes_per_token_bf16",
                                          "intensity_b64_flop_per_byte", "throughput_b64_tok_s_bound", "ridge_flop_per_byte_fp32"};
    static const char *const snake_r[] = {"draft-xs", "high", "low", "mid", "high", "low", "mid", "high", "low"};
    snprintf(run, sizeof run, "%s/run_snake", scratch);
    write_wide_run(run, snake_h, snake_r, 9, 2);
    if (render_wide(run, snake_h, 9, 1, &words, &n, &err)) fail_msg("%s", err.msg);
    for (int c = 0; c < 9; c++)
        if (!has_word(words, n, snake_h[c], &broken)) fail_msg("header '%s' is cut inside a piece", snake_h[c]);
    assert_true(broken); // some did break, after an '_'
    broken = 0;
    assert_true(has_word(words, n, "draft-xs", &broken));
    assert_false(broken); // a short word stays whole when there is room
    free(words);

    // a table no type size fits: words are cut, a warning, and under --strict an error
    static const char *const many[24] = {"abcdefghijklmnopq", "bcdefghijklmnopqr", "cdefghijklmnopqrs", "defghijklmnopqrst",
                                         "efghijklmnopqrstu", "fghijklmnopqrstuv", "ghijklmnopqrstuvw", "hijklmnopqrstuvwx",
                                         "ijklmnopqrstuvwxy", "jklmnopqrstuvwxyz", "klmnopqrstuvwxyza", "lmnopqrstuvwxyzab",
                                         "mnopqrstuvwxyzabc", "nopqrstuvwxyzabcd", "opqrstuvwxyzabcde", "pqrstuvwxyzabcdef",
                                         "qrstuvwxyzabcdefg", "rstuvwxyzabcdefgh", "stuvwxyzabcdefghi", "tuvwxyzabcdefghij",
                                         "uvwxyzabcdefghijk", "vwxyzabcdefghijkl", "wxyzabcdefghijklm", "xyzabcdefghijklmn"};
    snprintf(run, sizeof run, "%s/run_many", scratch);
    write_wide_run(run, many, many, 24, 1);
    assert_int_equal(render_wide(run, many, 24, 1, &words, &n, &err), -1);
    if (!strstr(err.msg, "wide.tmpl:4: Table 1 is too wide for the page")) fail_msg("got '%s'", err.msg);
    if (render_wide(run, many, 24, 0, &words, &n, &err)) fail_msg("%s", err.msg);
    free(words);
}

// Render `body` under a section heading (run/case.tmpl into run/case.pdf), and check the
// outcome of case i: a failure whose message holds `error`, or success when it is NULL.
static void expect_block(const char *run, const char *body, int strict, const char *error, size_t i) {
    char out[800], text[700];
    snprintf(text, sizeof text, "@section Case\n%s", body);
    Error err = {{0}};
    int status = render_in(run, "case", text, strict, out, sizeof out, &err);
    if (error) {
        assert_int_equal(status, -1);
        if (!strstr(err.msg, error)) fail_msg("case %zu: got '%s', want '%s'", i, err.msg, error);
    } else if (status) fail_msg("case %zu (strict %d): %s", i, strict, err.msg);
}

// One number per quantity in tables and figures too: a column or a drawn series that shows a
// cell quantities.csv lists under a quantity's `also` is an error naming the quantity, while
// the same column's other rows, and the quantity drawn as a `peak: q(...)` line, are fine.
static void test_one_source_in_tables_and_figures(void **state) {
    (void)state;
    char run[700];
    snprintf(run, sizeof run, "%s/run_quantity", scratch);
    mkdir(run, 0777);
    write_run_file(run, "peaks.csv", "device,source,gflop_s\ncpu,budget,196\ncpu,attention,189.5\ngpu,attention,5000\n");
    write_run_file(run, "quantities.csv", "name,source,also,what\nsgemm,\"peaks.csv:gflop_s[device=cpu,source=budget]\","
                     "\"peaks.csv:gflop_s[device=cpu,source=attention]\",the CPU's sgemm rate\n");
    struct {
        const char *body, *error; // error: NULL when the block is fine
    } cases[] = {
        {"@table\ncsv: peaks.csv\ncolumns: device, gflop_s\n@end\n", "repeats the quantity 'sgemm'"},
        {"@table\ncsv: peaks.csv\nwhere: device=gpu\ncolumns: device, gflop_s\n@end\n", NULL},
        {"@figure\nkind: bar\ncsv: peaks.csv\nx: source\ny: gflop_s\n@end\n", "repeats the quantity 'sgemm'"},
        {"@figure\nkind: bar\ncsv: peaks.csv\nwhere: device=gpu\nx: source\ny: gflop_s\npeak: q(sgemm) ; sgemm\n@end\n",
         NULL},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) expect_block(run, cases[i].body, 0, cases[i].error, i);
}

// --- mistakes -------------------------------------------------------------------------------

// Render run_a with a template holding `body`; expect failure with `what`, and no new PDF.
static void expect_render_error(const char *body, const char *what, int strict) {
    char tmpl[700], out[700];
    snprintf(tmpl, sizeof tmpl, "%s/bad.tmpl", scratch);
    snprintf(out, sizeof out, "%s/bad.pdf", scratch);
    write_text(tmpl, body);
    write_text(out, "the previous report"); // must survive a failed render
    ReportOptions o = report_defaults();
    o.template_path = tmpl;
    o.out_path = out;
    o.figures_dir = scratch;
    o.strict = strict;
    Error err = {{0}};
    assert_int_equal(report_render(&o, run_a, &err), -1);
    if (!strstr(err.msg, what)) fail_msg("got '%s', want '%s'", err.msg, what);
    FILE *f = fopenCheck(out, "rb");
    char buf[64] = "";
    assert_non_null(fgets(buf, sizeof buf, f));
    fclose(f);
    assert_string_equal(buf, "the previous report");
    expect_no_temp_files(scratch);
}

static void test_template_mistakes(void **state) {
    (void)state;
    expect_render_error("@section A\n@figure\ncsv: kv_cache.csv\nx: prompt_len\ny: decode_ms\n@end\n",
                        "bad.tmpl:5: unknown column 'decode_ms' in", 0);
    expect_render_error("@section A\n\n@table\ncsv: kv_cache.csv\ncolumns: mode, speed\n@end\n",
                        "bad.tmpl:5: unknown column 'speed'", 0);
    expect_render_error("@section A\n@figure\ncsv: nowhere.csv\nx: a\ny: b\n@end\n", "bad.tmpl:3: unknown file 'nowhere.csv'", 0);
    expect_render_error("Text {nowhere.csv:x} here.\n", "bad.tmpl:1: in {nowhere.csv:x}: unknown file", 0);
    expect_render_error("@section A\nSo {kv_cache.csv:total_ms[mode=cache]}.\n", "bad.tmpl:2:", 0);
    expect_render_error("@figure\ncsv: kv_cache.csv\nwhere: size=1\nx: prompt_len\ny: total_ms\n@end\n",
                        "bad.tmpl:3: unknown column 'size'", 0);
    expect_render_error("@figure\ncsv: kv_cache.csv\nx: mode\ny: total_ms\n@end\n",
                        "bad.tmpl:3: column 'mode' of", 0); // text where a number must be
    expect_render_error("@figure\ncsv: kv_cache.csv\nx: prompt_len\ny: total_ms\nxscale: cubic\n@end\n",
                        "bad.tmpl:5: xscale: unknown scale 'cubic'", 0);
    expect_render_error("@figure a\ncsv: kv_cache.csv\nx: prompt_len\ny: total_ms\n@end\n"
                        "@figure a\ncsv: kv_cache.csv\nx: prompt_len\ny: total_ms\n@end\n",
                        "bad.tmpl:6: figure id 'a' is already used at line 1", 0);
    expect_render_error("@figure\ncsv: kv_cache.csv\nx: prompt_len\ny: total_ms\nwhere: mode=fast\n@end\n",
                        "selects no rows of kv_cache.csv", 1); // only under --strict
    expect_render_error("@section A\n@figure\ncsv: kv_cache.csv\n", "bad.tmpl:2: block has no @end", 0);
    // a verdict written beside the numbers it judges, not chosen from them (only under --strict)
    expect_render_error("@section A\nThe cache {kv_cache.csv:total_ms[prompt_len=32,mode=cache] | 3 ms}\nFalls short of the FLOP ratio.\n",
                        "bad.tmpl:2: 'falls short' written in the text: choose it from the data", 1);
}

// A table of row: lines (the "Read this first" page's kind): each cell's placeholders come
// from the run, a word chosen by pick follows the data, and numeric cells align right.
static void test_table_of_template_rows(void **state) {
    (void)state;
    require_poppler();
    char tmpl[700], out[700];
    snprintf(tmpl, sizeof tmpl, "%s/rows.tmpl", scratch);
    snprintf(out, sizeof out, "%s/rows.pdf", scratch);
    write_text(tmpl, "@section Claims\n"
                     "@table\n"
                     "headers: claim, course, this run, verdict\n"
                     "row: cache speed-up at 32 + 128 | 5–10× | {kv_cache.csv:total_ms[prompt_len=32,mode=nocache] / "
                     "kv_cache.csv:total_ms[prompt_len=32,mode=cache] | 3 ×} | {within(kv_cache.csv:total_ms[prompt_len=32,"
                     "mode=nocache] / kv_cache.csv:total_ms[prompt_len=32,mode=cache], 5, 10) | pick lower / agrees / higher}\n"
                     "row: slowest total | any | {max(kv_cache.csv:total_ms) | int ms} | {within(max(kv_cache.csv:total_ms), "
                     "0, 1e9) | pick lower / agrees / higher}\n"
                     "caption: Claims against the run.\n"
                     "@end\n");
    ReportOptions o = report_defaults();
    o.template_path = tmpl;
    o.out_path = out;
    o.figures_dir = scratch;
    o.strict = 1;
    Error err;
    if (report_render(&o, run_a, &err)) fail_msg("%s", err.msg);
    double cache = fixture_value(run_a, "kv_cache.csv", "total_ms", "prompt_len", "32", "gen_len", "128", "mode", "cache");
    double none = fixture_value(run_a, "kv_cache.csv", "total_ms", "prompt_len", "32", "gen_len", "128", "mode", "nocache");
    char want[64];
    snprintf(want, sizeof want, "%.3g×", none / cache);
    char *text = pdf_text(out);
    expect_text(text, "Table 1: Claims against the run.");
    expect_text(text, "cache speed-up at 32 + 128");
    expect_text(text, want);
    expect_text(text, none / cache < 5 ? "lower" : none / cache > 10 ? "higher" : "agrees");
    expect_text(text, "agrees"); // the second row
    free(text);
    expect_render_error("@table\nheaders: a\nrow: {kv_cache.csv:speed}\n@end\n", "bad.tmpl:3: in {kv_cache.csv:speed}", 0);
}

// Legends and names a reader can decode: a series' label carries its variable ("T = 0.7",
// "sharing off") or the name display_names.csv gives it, a header without `headers:` takes
// the column's display name, and a figure with more series than one panel keeps apart, or
// several series and no legend, or a series the legend leaves unnamed beside a reference curve's
// entry, is an error under --strict (a warning otherwise).
static void test_names_and_legend_rules(void **state) {
    (void)state;
    char run[700], path[800], tmpl[800], out[800], csv[2048] = "x,y_value,k,temperature,sharing\n";
    snprintf(run, sizeof run, "%s/run_legend", scratch);
    mkdir(run, 0777);
    for (int k = 1; k <= 7; k++)
        for (int x = 1; x <= 2; x++)
            snprintf(csv + strlen(csv), sizeof csv - strlen(csv), "%d,%d,%d,%s,%s\n", x, k * x, k, k % 2 ? "0.7" : "0",
                     k % 2 ? "on" : "off");
    snprintf(path, sizeof path, "%s/s.csv", run);
    write_text(path, csv);
    snprintf(path, sizeof path, "%s/display_names.csv", run);
    write_text(path, "column,name\ntemperature,T\nk=1,the first\ny_value,value of y\n");

    Report r = {0};
    Table names;
    Error err;
    if (table_load(&names, path, &err)) fail_msg("%s", err.msg);
    r.display_names = &names;
    static const char *const labels[][3] = {// column, value, the series' label
                                            {"temperature", "0.7", "T = 0.7"}, {"sharing", "off", "sharing off"},
                                            {"k", "1", "the first"},           {"k", "2", "k = 2"},
                                            {"policy", "static", "static"}};
    char buf[200];
    for (size_t i = 0; i < sizeof labels / sizeof labels[0]; i++) {
        buf[0] = '\0';
        append_series_value(&r, labels[i][0], labels[i][1], buf, sizeof buf);
        assert_string_equal(buf, labels[i][2]);
    }
    assert_string_equal(display_name(&r, "top_k_mass", buf, sizeof buf), "top k mass");
    const char *value = "2"; // bar and heatmap categories: a listed value's name, else the cell itself
    assert_string_equal(value_name(&r, "k", "1"), "the first");
    assert_ptr_equal(value_name(&r, "k", value), value);
    table_free(&names);

    struct {
        const char *body, *error; // error: NULL when the figure is fine even under --strict
    } cases[] = {
        {"@figure\ncsv: s.csv\nx: x\ny: y_value\nseries: k\n@end\n", "draws 7 series, more than the 6"},
        {"@figure\ncsv: s.csv\nwhere: k<=2\nx: x\ny: y_value\nseries: k\nlegend: none\n@end\n",
         "draws 2 series with legend: none"},
        {"@figure\ncsv: s.csv\nwhere: k<=6\nx: x\ny: y_value\nseries: k, temperature\n@end\n", NULL},
        {"@figure\ncsv: s.csv\nwhere: k=1\nx: x\ny: y_value\nlegend: none\n@end\n", NULL},
        // one series beside a reference curve: both named, not the reference alone
        {"@figure\ncsv: s.csv\nwhere: k=1\nx: x\ny: y_value\nref: x\n@end\n", NULL},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        for (int strict = 0; strict < 2; strict++) expect_block(run, cases[i].body, strict, strict ? cases[i].error : NULL, i);
    snprintf(tmpl, sizeof tmpl, "%s/legend.tmpl", run);
    snprintf(out, sizeof out, "%s/legend.pdf", run);

    require_poppler();
    snprintf(path, sizeof path, "%s/gaps.csv", run);
    write_text(path, "setting,measured\nonly-here,nan\n");
    write_text(tmpl, "@section Names\n@table\ncsv: s.csv\nwhere: k=1\ncolumns: x, y_value\n@end\n"
                     "@table\ncsv: gaps.csv\ncolumns: setting, measured\n@end\n");
    ReportOptions o = report_defaults();
    o.template_path = tmpl;
    o.out_path = out;
    o.strict = 1;
    if (report_render(&o, run, &err)) fail_msg("%s", err.msg);
    char *text = pdf_text(out);
    expect_text(text, "value of y");
    expect_text(text, "n/a"); // a value that was not measured, never "nan"
    assert_null(strstr(text, "nan"));
    free(text);
}

// A median printed in a table carries its spread, " ± " half its p10-p90 range, when the CSV has
// the pair X_p10 / X_p90 beside X_median, and the caption says what the ± is; a median without
// the pair, with a missing cell of it, or beside its p10 / p90 in columns of their own prints alone.
static void test_median_spread_in_tables(void **state) {
    (void)state;
    require_poppler();
    char run[700], path[800], tmpl[800], out[800];
    snprintf(run, sizeof run, "%s/run_spread", scratch);
    mkdir(run, 0777);
    snprintf(path, sizeof path, "%s/t.csv", run);
    write_text(path, "setting,t_median,t_p10,t_p90,u_median\nfirst,10.5,9,12,7.25\nsecond,3.5,,4,8.5\n");
    snprintf(tmpl, sizeof tmpl, "%s/spread.tmpl", run);
    write_text(tmpl, "@section Spread\n@table\ncsv: t.csv\ncolumns: setting, t_median, u_median\ncaption: Times.\n@end\n"
                     "@table\ncsv: t.csv\ncolumns: setting, t_median\nformats: raw, .2f\n@end\n"
                     "@table\ncsv: t.csv\ncolumns: setting, t_p10, t_median\nformats: raw, 3, .3f\ncaption: Shown.\n@end\n");
    snprintf(out, sizeof out, "%s/spread.pdf", run);
    ReportOptions o = report_defaults();
    o.template_path = tmpl;
    o.out_path = out;
    o.strict = 1;
    Error err;
    if (report_render(&o, run, &err)) fail_msg("%s", err.msg);
    char *text = pdf_text(out);
    expect_text(text, "10.5 ± 1.5");   // two significant digits of (12 - 9) / 2
    expect_text(text, "10.50 ± 1.50"); // fixed decimals stay the median's
    expect_text(text, "7.25");
    assert_null(strstr(text, "7.25 ±")); // no p10 / p90 for u
    assert_null(strstr(text, "3.5 ±"));  // a missing p10: the median alone
    expect_text(text, "Times. A median's ± is half the range from its p10 to its p90.");
    expect_text(text, "10.500\n"); // its p10 in a column of its own: no ±
    assert_null(strstr(text, "10.500 ±"));
    assert_null(strstr(text, "Shown. A median"));
    free(text);
}

static void test_malformed_run_csv(void **state) {
    (void)state;
    char run[700], path[800], tmpl[700], out[700];
    snprintf(run, sizeof run, "%s/run_bad", scratch);
    mkdir(run, 0777);
    snprintf(path, sizeof path, "%s/x.csv", run);
    write_text(path, "a,b\n1,2\n3,\"4\n");
    snprintf(tmpl, sizeof tmpl, "%s/x.tmpl", scratch);
    write_text(tmpl, "@section X\n@requires x.csv\n@table\ncsv: x.csv\ncolumns: a, b\n@end\n");
    snprintf(out, sizeof out, "%s/x.pdf", scratch);
    ReportOptions o = report_defaults();
    o.template_path = tmpl;
    o.out_path = out;
    Error err;
    assert_int_equal(report_render(&o, run, &err), -1);
    if (!strstr(err.msg, "x.csv:3:3: unterminated quoted field")) fail_msg("got '%s'", err.msg);
    assert_false(file_exists(out));
}

// A table of both backends: @requires F.csv[backend=cuda] holds only when a cuda row exists.
static void test_requires_rows_of_a_backend(void **state) {
    (void)state;
    char run[700], path[800], reason[256];
    snprintf(run, sizeof run, "%s/run_backends", scratch);
    mkdir(run, 0777);
    snprintf(path, sizeof path, "%s/x.csv", run);
    write_text(path, "backend,v\ncpu,1\n");
    RunData r;
    Error err;
    assert_int_equal(rundata_open(&r, run, NULL, &err), 0);
    assert_true(rundata_has(&r, "x.csv"));
    assert_true(rundata_has(&r, "x.csv[backend=cpu]"));
    assert_false(rundata_has(&r, "x.csv[backend=cuda]"));
    assert_false(rundata_has(&r, "x.csv[nope=cpu]"));
    assert_false(rundata_has(&r, "y.csv[backend=cpu]"));
    rundata_missing_reason(&r, "x.csv[backend=cuda]", "no CUDA device", reason, sizeof reason);
    assert_string_equal(reason, "no CUDA device");
    snprintf(path, sizeof path, "%s/x.cuda.skip", run);
    write_text(path, "no usable CUDA device (see the make log)\n");
    rundata_missing_reason(&r, "x.csv[backend=cuda]", "no CUDA device", reason, sizeof reason);
    assert_string_equal(reason, "no usable CUDA device (see the make log)");
    snprintf(path, sizeof path, "%s/x.csv", run);
    write_text(path, "backend,v\ncpu,1\ncuda,2\n");
    assert_true(rundata_has(&r, "x.csv[backend=cuda]"));
    rundata_close(&r);
}

// --- the command line ---------------------------------------------------------------------------

static void test_command_line(void **state) {
    (void)state;
    const char *bin = getenv("INFERLAB_BIN");
    char render[600], cmd[2000];
    snprintf(render, sizeof render, "%s/render", bin ? bin : "bin");
    if (access(render, X_OK) != 0) {
        print_message("%s not built: command-line checks skipped\n", render);
        skip();
    }
    int status;
    snprintf(cmd, sizeof cmd, "'%s' --help", render);
    char *out = command_output(cmd, &status);
    assert_int_equal(status, 0);
    expect_text(out, "usage: bin/render");
    free(out);
    static const struct {
        const char *args;
        int status;
        const char *stderr_has;
    } cases[] = {
        {"", 2, "give one run directory"},
        {"--bogus x", 2, "try 'bin/render --help'"},
        {"--compare one", 2, "--compare needs 2 to 6 run directories"},
        {"--dpi 72 x", 2, "--dpi '72'"},
        {"/nonexistent/run", 1, "render: error: /nonexistent/run"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        snprintf(cmd, sizeof cmd, "'%s' --template '%s' %s 2>&1 >/dev/null", render, template_path, cases[i].args);
        out = command_output(cmd, &status);
        if (status != cases[i].status || !strstr(out, cases[i].stderr_has))
            fail_msg("render %s: status %d, '%s'", cases[i].args, status, out);
        free(out);
    }
    char small[700]; // a one-figure template keeps this quick
    snprintf(small, sizeof small, "%s/cli.tmpl", scratch);
    write_text(small, "@section KV\n@figure kv\ncsv: kv_cache.csv\nx: prompt_len\ny: total_ms\nseries: mode\n@end\n");
    snprintf(cmd, sizeof cmd, "'%s' --template '%s' --out '%s/cli.pdf' --figures '%s/cli-figures' '%s' 2>&1", render, small,
             scratch, scratch, run_a);
    out = command_output(cmd, &status);
    assert_int_equal(status, 0);
    expect_text(out, "render: wrote");
    free(out);
    snprintf(cmd, sizeof cmd, "%s/cli-figures/kv.png", scratch);
    assert_true(file_exists(cmd));
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_single_report),     cmocka_unit_test(test_compare_report),
        cmocka_unit_test(test_compare_default_path), cmocka_unit_test(test_compare_many),
        cmocka_unit_test(test_table_of_template_rows), cmocka_unit_test(test_names_and_legend_rules),
        cmocka_unit_test(test_one_source_in_tables_and_figures),
        cmocka_unit_test(test_template_mistakes),   cmocka_unit_test(test_median_spread_in_tables),
        cmocka_unit_test(test_malformed_run_csv), cmocka_unit_test(test_requires_rows_of_a_backend),
        cmocka_unit_test(test_command_line),      cmocka_unit_test(test_table_words_stay_whole),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
