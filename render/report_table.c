// report_table.c: @table blocks -> PDF tables; in compare mode, ratio tables against the first
// machine (B/A, C/A...) for rows whose key columns match, the closing summary of ratios over
// every shared CSV, and the page "which machine wins what" over timing and throughput columns.
// A CSV's key columns are its leading columns (DESIGN.md: keys first, then metrics): the
// shortest prefix that tells every row apart, unless the table names them with `keys:`.
// Tested by tests/test_render_report.c.
#include <dirent.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "numfmt.h"
#include "report_parts.h"

#define DEFAULT_CELL_FORMAT ((NumberFormat){FMT_SIG, 4})

static char *dup_string(const char *s) {
    char *d = mallocCheck(strlen(s) + 1);
    strcpy(d, s);
    return d;
}

// --- cells ----------------------------------------------------------------------------------

typedef struct {
    int n;
    int *cols;         // (n) column indices in the CSV
    char **headers;    // (n)
    NumberFormat *fmt; // (n)
    int *raw;          // (n) 1: print the cell's text as it is
    int *p10, *p90;    // (n) the spread columns of an X_median column (X_p10, X_p90), or -1
    int any_spread;    // 1 when some column prints its spread
} Columns;

static void free_columns(Columns *c) {
    free(c->cols);
    free_list(c->headers, c->n);
    free(c->fmt);
    free(c->raw);
    free(c->p10);
    free(c->p90);
    memset(c, 0, sizeof *c);
}

// A median's spread: for a column X_median (or median), the columns X_p10 and X_p90 (p10, p90)
// of the same table; -1, -1 when it is not a median or the table lacks the pair.
static void spread_columns(const Table *t, const char *name, int *p10, int *p90) {
    static const char median[] = "median";
    size_t n = strlen(name), k = sizeof median - 1;
    *p10 = *p90 = -1;
    if (n < k || n - k > 180 || strcmp(name + n - k, median) != 0) return;
    char pair[200];
    snprintf(pair, sizeof pair, "%.*sp10", (int)(n - k), name);
    int lo = table_column(t, pair);
    snprintf(pair, sizeof pair, "%.*sp90", (int)(n - k), name);
    int hi = table_column(t, pair);
    if (lo >= 0 && hi >= 0) *p10 = lo, *p90 = hi;
}

// The `columns`, `headers` and `formats` options against table t.
static int table_columns(const Report *r, const Block *b, const Table *t, Columns *c, Error *err) {
    memset(c, 0, sizeof *c);
    int n_names, n_headers, n_formats, status = 0;
    char **names = split_list(block_option(b, "columns"), &n_names);
    char **headers = split_list(block_option(b, "headers"), &n_headers);
    char **formats = split_list(block_option(b, "formats"), &n_formats);
    char where[PATH_MAX + 16];
    c->cols = mallocCheck((size_t)(n_names + 1) * sizeof *c->cols);
    c->headers = callocCheck((size_t)(n_names + 1), sizeof *c->headers);
    c->fmt = mallocCheck((size_t)(n_names + 1) * sizeof *c->fmt);
    c->raw = callocCheck((size_t)(n_names + 1), sizeof *c->raw);
    c->p10 = mallocCheck((size_t)(n_names + 1) * sizeof *c->p10);
    c->p90 = mallocCheck((size_t)(n_names + 1) * sizeof *c->p90);
    c->n = n_names;
    if (n_headers && n_headers != n_names) {
        block_where(b, "headers", where, sizeof where);
        status = error_set(err, "%s: %d headers for %d columns", where, n_headers, n_names);
    }
    if (status == 0 && n_formats > 1 && n_formats != n_names) {
        block_where(b, "formats", where, sizeof where);
        status = error_set(err, "%s: %d formats for %d columns (give one, or one per column)", where, n_formats, n_names);
    }
    for (int i = 0; i < n_names && status == 0; i++) {
        c->cols[i] = table_column(t, names[i]);
        if (c->cols[i] < 0) {
            char cols[300];
            table_column_list(t, cols, sizeof cols);
            block_where(b, "columns", where, sizeof where);
            status = error_set(err, "%s: unknown column '%s' in %s (columns: %s)", where, names[i], t->path, cols);
            break;
        }
        spread_columns(t, names[i], &c->p10[i], &c->p90[i]);
        char name[200];
        c->headers[i] = dup_string(n_headers ? headers[i] : display_name(r, names[i], name, sizeof name));
        const char *spec = n_formats ? formats[n_formats == 1 ? 0 : i] : "-";
        c->fmt[i] = DEFAULT_CELL_FORMAT;
        c->raw[i] = strcmp(spec, "raw") == 0;
        if (!c->raw[i] && strcmp(spec, "-") != 0 && numfmt_parse(spec, &c->fmt[i])) {
            block_where(b, "formats", where, sizeof where);
            status = error_set(err, "%s: unknown format '%s' (-, raw, 3, .2f, int, si, bytes, percent)", where, spec);
        }
    }
    for (int i = 0; i < n_names && status == 0; i++) { // a spread the table shows in columns of its own stays there
        for (int j = 0; j < n_names; j++)
            if (c->p10[i] >= 0 && (c->cols[j] == c->p10[i] || c->cols[j] == c->p90[i])) c->p10[i] = c->p90[i] = -1;
        c->any_spread |= c->p10[i] >= 0;
    }
    free_list(names, n_names);
    free_list(headers, n_headers);
    free_list(formats, n_formats);
    if (status) free_columns(c);
    return status;
}

// The sentence a table's caption gains when its medians print their spread.
#define SPREAD_NOTE "A median's ± is half the range from its p10 to its p90."

// Half of row's p10-p90 range (NaN when the median has no spread columns or a cell is empty).
static double half_spread(const Table *t, int row, int p10, int p90) {
    if (p10 < 0) return NAN;
    return fabs(table_value(t, row, p90) - table_value(t, row, p10)) / 2;
}

// Cell (row, col) of t as the table prints it: "n/a" for a value not measured, the text itself
// when raw or not a number, else the number in fmt, followed by " ± h" for a median whose
// spread columns p10 / p90 (>= 0) hold numbers: h in two significant digits, or in the
// median's own decimals when it has fixed ones.
static char *format_cell(const Table *t, int row, int col, NumberFormat fmt, int raw, int p10, int p90) {
    const char *cell = table_cell(t, row, col);
    double v = table_value(t, row, col);
    if (strcmp(cell, "nan") == 0 || strcmp(cell, "NaN") == 0) return dup_string("n/a"); // not measured
    if (raw || cell[0] == '\0' || isnan(v)) return dup_string(cell);
    char buf[64];
    numfmt_format(v, fmt, buf, sizeof buf);
    double h = half_spread(t, row, p10, p90);
    if (!isnan(h)) {
        NumberFormat hf = fmt.kind == FMT_FIXED ? fmt : (NumberFormat){fmt.kind == FMT_INT ? FMT_SIG : fmt.kind, 2};
        size_t len = strlen(buf);
        snprintf(buf + len, sizeof buf - len, " ± ");
        len = strlen(buf);
        numfmt_format(h, hf, buf + len, sizeof buf - len);
    }
    return dup_string(buf);
}

// 1 when every non-empty cell of the column (over rows) is a number, and there is one.
static int numeric_column(const Table *t, const int *rows, int n_rows, int col) {
    int numbers = 0;
    for (int i = 0; i < n_rows; i++) {
        const char *cell = table_cell(t, rows[i], col);
        if (cell[0] == '\0') continue;
        if (isnan(table_value(t, rows[i], col)) && strcmp(cell, "nan") != 0) return 0;
        numbers++;
    }
    return numbers > 0;
}

static int *matching_rows(const Table *t, const Filter *f, int *n) {
    int *rows = mallocCheck((size_t)(t->n_rows + 1) * sizeof *rows);
    *n = 0;
    for (int i = 0; i < t->n_rows; i++)
        if (filter_match(f, t, i)) rows[(*n)++] = i;
    return rows;
}

static void free_pdf_table(PdfTable *pt) {
    for (int i = 0; i < pt->n_cols; i++) free(pt->headers[i]);
    for (int i = 0; i < pt->n_rows * pt->n_cols; i++) free(pt->cells[i]);
    free(pt->headers);
    free(pt->cells);
    free(pt->align);
}

static PdfTable new_pdf_table(int n_cols, int n_rows) {
    PdfTable pt = {.n_cols = n_cols, .n_rows = n_rows};
    pt.headers = callocCheck((size_t)n_cols, sizeof *pt.headers);
    pt.cells = callocCheck((size_t)n_cols * n_rows + 1, sizeof *pt.cells);
    pt.align = callocCheck((size_t)n_cols, sizeof *pt.align);
    return pt;
}

// --- the table's CSV in one run -----------------------------------------------------------------

typedef struct {
    const Table *t;
    Filter where;
    int *rows, n_rows;
} Selection;

static int select_rows(const Block *b, RunData *run, Selection *s, Error *err) {
    memset(s, 0, sizeof *s);
    char where[PATH_MAX + 16];
    Error e;
    block_where(b, "csv", where, sizeof where);
    if (!(s->t = rundata_table(run, block_option(b, "csv"), &e))) return error_set(err, "%s: %s", where, e.msg);
    const char *w = block_option(b, "where");
    if (w && filter_parse(&s->where, w, s->t, &e)) {
        block_where(b, "where", where, sizeof where);
        return error_set(err, "%s: %s", where, e.msg);
    }
    s->rows = matching_rows(s->t, &s->where, &s->n_rows);
    return 0;
}

static void free_selection(Selection *s) {
    filter_free(&s->where);
    free(s->rows);
}

static int empty_table_warning(Report *r, const Block *b, const RunData *run, Error *err) {
    char where[PATH_MAX + 16];
    block_where(b, "where", where, sizeof where);
    if (r->o->strict) return error_set(err, "%s: the table selects no rows of %s", where, block_option(b, "csv"));
    fprintf(stderr, "warning: %s: the table selects no rows of %s (in %s)\n", where, block_option(b, "csv"), run->dir);
    return 0;
}

// Draw the table; one too wide for the page even in the smallest type has words cut, which
// is a warning (--strict: an error) naming the template's table.
static int draw_table(Report *r, const Block *b, const PdfTable *pt, const char *label, const char *caption, Error *err) {
    if (!pdf_table(r->pdf, pt, label, caption)) return 0;
    char where[PATH_MAX + 16];
    block_where(b, "columns", where, sizeof where);
    const char *what = "is too wide for the page even in 6.5 pt type, so words are cut: show fewer columns or "
                       "shorter headers";
    if (r->o->strict) return error_set(err, "%s: %s %s", where, label, what);
    fprintf(stderr, "warning: %s: %s %s\n", where, label, what);
    return 0;
}

static int plain_table(Report *r, const Block *b, RunData *run, const char *label, const char *caption, Error *err) {
    Selection s;
    Columns cols;
    if (select_rows(b, run, &s, err)) return -1;
    if (table_columns(r, b, s.t, &cols, err)) {
        free_selection(&s);
        return -1;
    }
    for (int c = 0; c < cols.n; c++) { // no named quantity's second source (quantities.csv)
        Error e;
        if (query_check_shown(run, block_option(b, "csv"), &s.where, cols.cols[c], &e) == QUERY_OK) continue;
        char where[PATH_MAX + 16];
        block_where(b, "columns", where, sizeof where);
        free_columns(&cols);
        free_selection(&s);
        return error_set(err, "%s: %s", where, e.msg);
    }
    PdfTable pt = new_pdf_table(cols.n, s.n_rows);
    for (int c = 0; c < cols.n; c++) {
        pt.headers[c] = dup_string(cols.headers[c]);
        pt.align[c] = numeric_column(s.t, s.rows, s.n_rows, cols.cols[c]) ? ALIGN_RIGHT : ALIGN_LEFT;
        for (int i = 0; i < s.n_rows; i++)
            pt.cells[(size_t)i * cols.n + c] =
                format_cell(s.t, s.rows[i], cols.cols[c], cols.fmt[c], cols.raw[c], cols.p10[c], cols.p90[c]);
    }
    char full[1400];
    snprintf(full, sizeof full, "%s%s%s", caption ? caption : "", caption && caption[0] ? " " : "", SPREAD_NOTE);
    int status = draw_table(r, b, &pt, label, cols.any_spread ? full : caption, err);
    if (status == 0 && s.n_rows == 0) status = empty_table_warning(r, b, run, err);
    free_pdf_table(&pt);
    free_columns(&cols);
    free_selection(&s);
    return status;
}

// --- keys and matching rows -----------------------------------------------------------------------

typedef struct {
    const Table *t;
    const int *cols; // key columns
    int n;
} Keys;

// Order of two rows by their key cells: numbers by value (and before text), text by bytes.
static int compare_rows(const Keys *ka, int ra, const Keys *kb, int rb) {
    for (int i = 0; i < ka->n; i++) {
        const char *a = table_cell(ka->t, ra, ka->cols[i]), *b = table_cell(kb->t, rb, kb->cols[i]);
        double x = table_value(ka->t, ra, ka->cols[i]), y = table_value(kb->t, rb, kb->cols[i]);
        if (cells_equal(a, x, b, y)) continue;
        if (!isnan(x) && !isnan(y)) return x < y ? -1 : 1;
        if (isnan(x) != isnan(y)) return isnan(x) ? 1 : -1;
        return strcmp(a, b) < 0 ? -1 : 1;
    }
    return 0;
}

static int compare_sorted(const void *a, const void *b, void *keys) {
    return compare_rows(keys, *(const int *)a, keys, *(const int *)b);
}

// The number of leading columns that tell the rows apart (all columns when none do).
static int infer_key_count(const Table *t, const int *rows, int n_rows) {
    int *sorted = mallocCheck((size_t)(n_rows + 1) * sizeof *sorted);
    int *cols = mallocCheck((size_t)t->n_cols * sizeof *cols);
    for (int c = 0; c < t->n_cols; c++) cols[c] = c;
    int k = 1;
    for (; k < t->n_cols; k++) {
        Keys keys = {t, cols, k};
        memcpy(sorted, rows, (size_t)n_rows * sizeof *rows);
        qsort_r(sorted, (size_t)n_rows, sizeof *sorted, compare_sorted, &keys);
        int unique = 1;
        for (int i = 1; i < n_rows && unique; i++) unique = compare_rows(&keys, sorted[i - 1], &keys, sorted[i]) != 0;
        if (unique) break;
    }
    free(sorted);
    free(cols);
    return k;
}

// For each row of A, the row of B with the same keys, or -1. Returns the number matched.
static int match_rows(const Keys *ka, const int *rows_a, int n_a, const Keys *kb, const int *rows_b, int n_b, int *match) {
    int *sorted = mallocCheck((size_t)(n_b + 1) * sizeof *sorted);
    memcpy(sorted, rows_b, (size_t)n_b * sizeof *rows_b);
    qsort_r(sorted, (size_t)n_b, sizeof *sorted, compare_sorted, (void *)kb);
    int matched = 0;
    for (int i = 0; i < n_a; i++) {
        int lo = 0, hi = n_b - 1;
        match[i] = -1;
        while (lo <= hi) {
            int mid = (lo + hi) / 2, c = compare_rows(ka, rows_a[i], kb, sorted[mid]);
            if (c == 0) {
                match[i] = sorted[mid];
                matched++;
                break;
            }
            if (c < 0) hi = mid - 1;
            else lo = mid + 1;
        }
    }
    free(sorted);
    return matched;
}

// Key columns of a in a, and the same names in b; -1 (err set) when b lacks one.
static int key_columns(const Block *b, const Selection *sa, const Selection *sb, int *ca, int *cb, int *n, Error *err) {
    char where[PATH_MAX + 16];
    block_where(b, "keys", where, sizeof where);
    const char *named = block_option(b, "keys");
    if (named) {
        int n_names;
        char **names = split_list(named, &n_names);
        *n = 0;
        for (int i = 0; i < n_names && i < sa->t->n_cols; i++) {
            ca[*n] = table_column(sa->t, names[i]);
            if (ca[*n] < 0) {
                error_set(err, "%s: unknown key column '%s' in %s", where, names[i], sa->t->path);
                free_list(names, n_names);
                return -1;
            }
            (*n)++;
        }
        free_list(names, n_names);
    } else {
        *n = infer_key_count(sa->t, sa->rows, sa->n_rows);
        for (int i = 0; i < *n; i++) ca[i] = i;
    }
    for (int i = 0; i < *n; i++) {
        cb[i] = table_column(sb->t, sa->t->names[ca[i]]);
        if (cb[i] < 0) return error_set(err, "%s: %s has no key column '%s'", where, sb->t->path, sa->t->names[ca[i]]);
    }
    return 0;
}

static void format_ratio(double a, double b, char *buf, size_t size) {
    if (!(fabs(a) > 0) || !isfinite(a) || !isfinite(b)) {
        snprintf(buf, size, "n/a");
        return;
    }
    numfmt_format(b / a, (NumberFormat){FMT_SIG, 3}, buf, size);
    strncat(buf, "×", size - strlen(buf) - 1);
}

// The ratio table: key columns, then per numeric non-key column one ratio column for each
// machine after A (B/A, C/A...). A row of A shows when some machine has a row with its keys;
// "—" where a machine has none. Returns 1 (nothing drawn) when the table has no such column.
static int ratio_table(Report *r, const Block *b, const char *label, const char *caption, Error *err) {
    int n_runs = r->n_active, status = 0, n_sel = 0;
    Selection sel[MAX_RUNS];
    for (; n_sel < n_runs && status == 0; n_sel++) status = select_rows(b, r->active[n_sel], &sel[n_sel], err);
    if (status) n_sel--;
    const Selection *sa = &sel[0];
    Columns cols = {0};
    if (status == 0) status = table_columns(r, b, sa->t, &cols, err);
    int *keys[MAX_RUNS] = {0}, *match[MAX_RUNS] = {0}, *metrics[MAX_RUNS] = {0}, matched[MAX_RUNS] = {0}, n_keys = 0, n_metrics = 0;
    for (int k = 0; k < n_runs; k++) {
        keys[k] = mallocCheck((size_t)sa->t->n_cols * sizeof *keys[k]);
        metrics[k] = mallocCheck((size_t)(cols.n + 1) * sizeof *metrics[k]);
        match[k] = mallocCheck((size_t)(sa->n_rows + 1) * sizeof *match[k]);
    }
    for (int k = 1; k < n_runs && status == 0; k++) status = key_columns(b, sa, &sel[k], keys[0], keys[k], &n_keys, err);
    for (int c = 0; status == 0 && c < cols.n; c++) { // metrics[0]: index into cols; metrics[k]: run k's column
        int is_key = 0, everywhere = 1;
        for (int k = 0; k < n_keys; k++) is_key |= keys[0][k] == cols.cols[c];
        for (int k = 1; k < n_runs; k++) everywhere &= (metrics[k][n_metrics] = table_column(sel[k].t, sa->t->names[cols.cols[c]])) >= 0;
        if (!is_key && everywhere && numeric_column(sa->t, sa->rows, sa->n_rows, cols.cols[c])) metrics[0][n_metrics++] = c;
    }
    if (status == 0 && n_metrics == 0) status = 1;
    int shown = 0;
    if (status == 0) {
        Keys keys_a = {sa->t, keys[0], n_keys};
        for (int i = 0; i < sa->n_rows; i++) match[0][i] = sa->rows[i];
        for (int k = 1; k < n_runs; k++) {
            Keys keys_k = {sel[k].t, keys[k], n_keys};
            matched[k] = match_rows(&keys_a, sa->rows, sa->n_rows, &keys_k, sel[k].rows, sel[k].n_rows, match[k]);
        }
        for (int i = 0; i < sa->n_rows; i++) {
            int any = 0;
            for (int k = 1; k < n_runs; k++) any |= match[k][i] >= 0;
            shown += any;
        }
        int n_ratio = n_runs - 1;
        PdfTable pt = new_pdf_table(n_keys + n_metrics * n_ratio, shown);
        for (int k = 0; k < n_keys; k++) {
            pt.headers[k] = dup_string(sa->t->names[keys[0][k]]);
            for (int c = 0; c < cols.n; c++)
                if (cols.cols[c] == keys[0][k]) free(pt.headers[k]), pt.headers[k] = dup_string(cols.headers[c]);
            pt.align[k] = numeric_column(sa->t, sa->rows, sa->n_rows, keys[0][k]) ? ALIGN_RIGHT : ALIGN_LEFT;
        }
        for (int m = 0; m < n_metrics; m++)
            for (int k = 1; k < n_runs; k++) {
                const char *h = cols.headers[metrics[0][m]];
                int at = n_keys + m * n_ratio + k - 1;
                pt.headers[at] = mallocCheck(strlen(h) + 8);
                sprintf(pt.headers[at], "%s %c/A", h, machine_letter(machine_of(r, r->active[k])));
                pt.align[at] = ALIGN_RIGHT;
            }
        for (int i = 0, row = 0; i < sa->n_rows; i++) {
            int any = 0;
            for (int k = 1; k < n_runs; k++) any |= match[k][i] >= 0;
            if (!any) continue;
            char **cells = &pt.cells[(size_t)row++ * pt.n_cols];
            for (int k = 0; k < n_keys; k++) cells[k] = dup_string(table_cell(sa->t, sa->rows[i], keys[0][k]));
            for (int m = 0; m < n_metrics; m++)
                for (int k = 1; k < n_runs; k++) {
                    char buf[64] = "—";
                    if (match[k][i] >= 0)
                        format_ratio(table_value(sa->t, sa->rows[i], cols.cols[metrics[0][m]]),
                                     table_value(sel[k].t, match[k][i], metrics[k][m]), buf, sizeof buf);
                    cells[n_keys + m * n_ratio + k - 1] = dup_string(buf);
                }
        }
        char full[2400], counts[600] = "";
        snprintf(full, sizeof full, "%s%sRatios against A = %s", caption ? caption : "", caption ? " " : "", r->active[0]->label);
        for (int k = 1; k < n_runs; k++) {
            char letter = machine_letter(machine_of(r, r->active[k]));
            snprintf(full + strlen(full), sizeof full - strlen(full), ", %c = %s", letter, r->active[k]->label);
            snprintf(counts + strlen(counts), sizeof counts - strlen(counts), "%s%d of %d", k > 1 ? ", " : "", matched[k],
                     sa->n_rows);
            if (n_runs > 2) snprintf(counts + strlen(counts), sizeof counts - strlen(counts), " (%c)", letter);
        }
        snprintf(full + strlen(full), sizeof full - strlen(full), "; %s rows matched on %d key column%s.", counts, n_keys,
                 n_keys == 1 ? "" : "s");
        status = draw_table(r, b, &pt, label, full, err);
        free_pdf_table(&pt);
    }
    for (int k = 0; k < n_runs; k++) free(keys[k]), free(metrics[k]), free(match[k]);
    if (cols.cols) free_columns(&cols);
    for (int k = 0; k < n_sel; k++) free_selection(&sel[k]);
    return status;
}

// One plain table per active run (labelled "Table Na", "Table Nb"... in a comparison).
static int plain_tables(Report *r, const Block *b, const char *label, const char *caption, Error *err) {
    for (int k = 0; k < r->n_active; k++) {
        char sub_label[56], sub_caption[1200];
        char letter = machine_letter(machine_of(r, r->active[k]));
        snprintf(sub_label, sizeof sub_label, "%s", label);
        if (r->compare) snprintf(sub_label + strlen(sub_label), sizeof sub_label - strlen(sub_label), "%c", letter - 'A' + 'a');
        snprintf(sub_caption, sizeof sub_caption, "%s", caption ? caption : "");
        if (r->compare)
            snprintf(sub_caption + strlen(sub_caption), sizeof sub_caption - strlen(sub_caption), " (%c: %s)", letter,
                     r->active[k]->label);
        if (plain_table(r, b, r->active[k], sub_label, sub_caption, err)) return -1;
    }
    return 0;
}

// A table of row: lines: each cell's placeholders filled from the active runs ("A → B" in
// a comparison), as in a paragraph; columns whose every cell is a number align right.
static int template_rows_table(Report *r, const Block *b, const char *label, const char *caption, Error *err) {
    int n_headers, n_rows = 0, status = 0;
    char **headers = split_list(block_option(b, "headers"), &n_headers);
    for (int i = 0; i < b->n_options; i++) n_rows += strcmp(b->options[i].key, "row") == 0;
    PdfTable pt = new_pdf_table(n_headers, n_rows);
    for (int c = 0; c < n_headers; c++) pt.headers[c] = dup_string(headers[c]), pt.align[c] = ALIGN_RIGHT;
    for (int i = 0, row = 0; i < b->n_options && status == 0; i++) {
        if (strcmp(b->options[i].key, "row") != 0) continue;
        char where[PATH_MAX + 16];
        snprintf(where, sizeof where, "%s:%d", b->file, b->options[i].line);
        int n;
        char **cells = table_row_cells(b->options[i].value, &n); // n == n_headers: checked at parse
        for (int c = 0; c < n && status == 0; c++) {
            char *text = expand_text(cells[c], where, r->active, r->n_active, r->o->strict, err);
            double v;
            if (!text) status = -1;
            if (text && !parse_number(text, &v)) pt.align[c] = ALIGN_LEFT;
            pt.cells[(size_t)row * n_headers + c] = text;
        }
        free_list(cells, n);
        row++;
    }
    if (status == 0) status = draw_table(r, b, &pt, label, caption, err);
    free_pdf_table(&pt);
    free_list(headers, n_headers);
    return status;
}

int render_table(Report *r, const Block *b, Error *err) {
    char *caption, label[48];
    if (option_text(r, b, "caption", &caption, err)) return -1;
    snprintf(label, sizeof label, "Table %d", ++r->table_no);
    if (block_option(b, "row")) {
        int status = template_rows_table(r, b, label, caption, err);
        free(caption);
        return status;
    }
    int status = r->n_active > 1 ? ratio_table(r, b, label, caption, err) : 1;
    if (status == 1) status = plain_tables(r, b, label, caption, err);
    free(caption);
    return status;
}

// --- the comparison's summary ---------------------------------------------------------------------

static int compare_names(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

// The CSV files in dir (meta.csv excepted), sorted.
static char **list_csv(const char *dir, int *n) {
    char **names = NULL;
    *n = 0;
    DIR *d = opendir(dir);
    if (!d) return NULL;
    for (struct dirent *e; (e = readdir(d));) {
        size_t len = strlen(e->d_name);
        if (len < 5 || strcmp(e->d_name + len - 4, ".csv") != 0 || strcmp(e->d_name, "meta.csv") == 0) continue;
        names = reallocCheck(names, (size_t)(*n + 1) * sizeof *names);
        names[(*n)++] = dup_string(e->d_name);
    }
    closedir(d);
    if (*n) qsort(names, (size_t)*n, sizeof *names, compare_names);
    return names;
}

static int in_dir(const char *dir, const char *name) {
    char path[PATH_MAX];
    struct stat st;
    snprintf(path, sizeof path, "%s/%s", dir, name);
    return stat(path, &st) == 0 && S_ISREG(st.st_mode);
}

// One CSV of every run, A's rows matched to each other run's on A's key columns (the
// shortest run of leading columns that tells A's rows apart).
typedef struct {
    const Table *t[MAX_RUNS];
    int n_runs, n_keys;
    int *match[MAX_RUNS]; // (A's rows) the row of run k with the same keys, or -1; match[0][i] = i
    int matched[MAX_RUNS];
} Matched;

static void free_matched(Matched *m) {
    for (int k = 0; k < m->n_runs; k++) free(m->match[k]);
}

// 0, 1 when some run lacks one of A's key columns (its rows cannot be matched), -1 on error.
static int match_csv(Report *r, const char *name, Matched *m, Error *err) {
    memset(m, 0, sizeof *m);
    for (int k = 0; k < r->n_runs; k++)
        if (!(m->t[k] = rundata_table(&r->runs[k], name, err))) return -1;
    const Table *ta = m->t[0];
    Filter everything = {0};
    int n_a, *rows_a = matching_rows(ta, &everything, &n_a), ok = 1;
    m->n_keys = infer_key_count(ta, rows_a, ta->n_rows);
    int *ka = mallocCheck((size_t)ta->n_cols * sizeof *ka), *kk = mallocCheck((size_t)ta->n_cols * sizeof *kk);
    for (int i = 0; i < m->n_keys; i++) ka[i] = i;
    Keys keys_a = {ta, ka, m->n_keys};
    for (int k = 0; k < r->n_runs; k++, m->n_runs++) {
        m->match[k] = mallocCheck((size_t)(ta->n_rows + 1) * sizeof *m->match[k]);
        int n_k, *rows_k = matching_rows(m->t[k], &everything, &n_k), ok_k = 1;
        for (int i = 0; i < m->n_keys; i++) ok_k &= (kk[i] = table_column(m->t[k], ta->names[i])) >= 0;
        Keys keys_k = {m->t[k], kk, m->n_keys};
        if (ok_k) m->matched[k] = match_rows(&keys_a, rows_a, n_a, &keys_k, rows_k, n_k, m->match[k]);
        else for (int i = 0; i < ta->n_rows; i++) m->match[k][i] = -1;
        ok &= ok_k;
        free(rows_k);
    }
    free(rows_a);
    free(ka);
    free(kk);
    return ok ? 0 : 1;
}

static char **add_table_row(PdfTable *pt, int *cap) {
    if (pt->n_rows == *cap) {
        *cap = 2 * *cap + 8;
        pt->cells = reallocCheck(pt->cells, (size_t)*cap * pt->n_cols * sizeof *pt->cells);
    }
    return &pt->cells[(size_t)pt->n_rows++ * pt->n_cols];
}

// Summary rows (file, column, machine, matched, geometric mean, min, max of X/A) for one CSV
// that every run has.
static void summarise_csv(const char *name, const Matched *m, PdfTable *pt, int *cap) {
    const Table *ta = m->t[0];
    for (int c = m->n_keys; c < ta->n_cols; c++) {
        if (!numeric_column(ta, m->match[0], ta->n_rows, c)) continue;
        for (int k = 1; k < m->n_runs; k++) {
            int ck = table_column(m->t[k], ta->names[c]);
            if (ck < 0) continue;
            double log_sum = 0, lo = INFINITY, hi = -INFINITY;
            int n = 0;
            for (int i = 0; i < ta->n_rows; i++) {
                if (m->match[k][i] < 0) continue;
                double ratio = table_value(m->t[k], m->match[k][i], ck) / table_value(ta, i, c);
                if (!(ratio > 0) || !isfinite(ratio)) continue;
                log_sum += log(ratio), n++;
                lo = fmin(lo, ratio), hi = fmax(hi, ratio);
            }
            char **cells = add_table_row(pt, cap), buf[64];
            cells[0] = dup_string(name);
            utf8_sanitize(cells[0]); // a file name may be any bytes
            cells[1] = dup_string(ta->names[c]);
            snprintf(buf, sizeof buf, "%c/A", machine_letter(k));
            cells[2] = dup_string(buf);
            snprintf(buf, sizeof buf, "%d / %d", m->matched[k], ta->n_rows);
            cells[3] = dup_string(buf);
            double stats[3] = {n ? exp(log_sum / n) : NAN, n ? lo : NAN, n ? hi : NAN};
            for (int s = 0; s < 3; s++) {
                format_ratio(1, stats[s], buf, sizeof buf);
                cells[4 + s] = dup_string(buf);
            }
        }
    }
}

// "A = x, B = y, C = z"
static void machine_list(const Report *r, char *buf, size_t size) {
    buf[0] = '\0';
    for (int k = 0; k < r->n_runs; k++)
        snprintf(buf + strlen(buf), size - strlen(buf), "%s%c = %s", k ? ", " : "", machine_letter(k), r->runs[k].label);
}

// The CSVs every run has (A's names, sorted), and a note of those some run lacks.
static char **shared_csvs(const Report *r, int *n, char *note, size_t size) {
    int n_a;
    char **a = list_csv(r->runs[0].dir, &n_a), **shared = NULL;
    *n = 0;
    note[0] = '\0';
    for (int i = 0; i < n_a; i++) {
        char lacking[64] = "";
        for (int k = 1; k < r->n_runs; k++)
            if (!in_dir(r->runs[k].dir, a[i])) snprintf(lacking + strlen(lacking), sizeof lacking - strlen(lacking), "%c", machine_letter(k));
        if (*lacking) {
            snprintf(note + strlen(note), size - strlen(note), "%s%s (not in %s)", *note ? ", " : "", a[i], lacking);
            continue;
        }
        shared = reallocCheck(shared, (size_t)(*n + 1) * sizeof *shared);
        shared[(*n)++] = dup_string(a[i]);
    }
    for (int k = 1; k < r->n_runs; k++) {
        int n_k;
        char **names = list_csv(r->runs[k].dir, &n_k);
        for (int i = 0; i < n_k; i++)
            if (!in_dir(r->runs[0].dir, names[i]))
                snprintf(note + strlen(note), size - strlen(note), "%s%s (only in %c)", *note ? ", " : "", names[i], machine_letter(k));
        free_list(names, n_k);
    }
    utf8_sanitize(note);
    free_list(a, n_a);
    return shared;
}

static void section_heading(Report *r, const char *title) {
    char number[16];
    snprintf(number, sizeof number, "%d", ++r->section);
    pdf_heading(r->pdf, 1, number, title, 0);
}

static void summary_table(Report *r, PdfTable *pt, const char *caption) {
    char label[32];
    snprintf(label, sizeof label, "Table %d", ++r->table_no);
    pdf_table(r->pdf, pt, label, caption);
}

int render_ratio_summary(Report *r, Error *err) {
    if (r->n_runs < 2) return 0;
    char machines[800], note[1600], intro[2400];
    int n_shared, status = 0, cap = 0;
    char **shared = shared_csvs(r, &n_shared, note, sizeof note);
    machine_list(r, machines, sizeof machines);
    section_heading(r, "Summary of ratios against A");
    snprintf(intro, sizeof intro,
             "Every CSV that all runs wrote, %s. Rows are matched on each file's key columns (the shortest run of "
             "leading columns that tells A's rows apart); for each numeric column after them and each machine after A "
             "the table gives the geometric mean, the minimum and the maximum of its ratio to A over the matched rows. "
             "Below 1× the machine's value is smaller (for a time: faster); exactly 1× means identical values, as a "
             "deterministic column should be.",
             machines);
    pdf_paragraph(r->pdf, intro, 0);
    PdfTable pt = new_pdf_table(7, 0);
    static const char *headers[7] = {"CSV", "column", "ratio", "rows matched", "geo. mean", "min", "max"};
    for (int i = 0; i < 7; i++) {
        pt.headers[i] = dup_string(headers[i]);
        pt.align[i] = i < 3 ? ALIGN_LEFT : ALIGN_RIGHT;
    }
    for (int i = 0; i < n_shared && status == 0; i++) {
        Matched m;
        status = match_csv(r, shared[i], &m, err);
        if (status == 0) summarise_csv(shared[i], &m, &pt, &cap);
        if (status == 1) {
            snprintf(note + strlen(note), sizeof note - strlen(note), "%s%s (key columns differ)", *note ? ", " : "", shared[i]);
            status = 0;
        }
        free_matched(&m);
    }
    if (status == 0) {
        summary_table(r, &pt, "Ratios against A over every shared CSV.");
        if (*note) {
            char text[1800];
            snprintf(text, sizeof text, "Not compared: %s.", note);
            pdf_paragraph(r->pdf, text, 0);
        }
    }
    free_pdf_table(&pt);
    free_list(shared, n_shared);
    return status;
}

// --- which machine wins what --------------------------------------------------------------------

static int ends_with(const char *s, const char *tail) {
    size_t n = strlen(s), m = strlen(tail);
    return n >= m && strcmp(s + n - m, tail) == 0;
}

// +1 when a larger value is better (a rate: tokens/s, GB/s, FLOP/s), -1 when a smaller one is
// (a time in ms), 0 for any other column; spreads (p10, p90, best) are left to the median.
static int speed_direction(const char *name) {
    static const char *spreads[] = {"_p10", "_p90", "_best", "_min", "_max"};
    static const char *rates[] = {"tok_s", "tokens_per_s", "flop_s", "flop_per_s", "gb_s"};
    for (size_t i = 0; i < sizeof spreads / sizeof spreads[0]; i++)
        if (strstr(name, spreads[i])) return 0;
    if (ends_with(name, "_ms") || ends_with(name, "_ms_median")) return -1;
    for (size_t i = 0; i < sizeof rates / sizeof rates[0]; i++)
        if (strstr(name, rates[i])) return 1;
    return 0;
}

// One row of the winners' table for column c of a shared CSV: each machine's geometric mean
// ratio to A over the rows every machine has; 0 when no row counts or every machine gives the
// same numbers (then nothing is won), else 1 with *winner set.
static int column_winner(const Matched *m, int c, int direction, double *geo, int *n_rows, int *winner) {
    const Table *ta = m->t[0];
    int cols[MAX_RUNS];
    for (int k = 0; k < m->n_runs; k++)
        if ((cols[k] = table_column(m->t[k], ta->names[c])) < 0) return 0;
    double log_sum[MAX_RUNS] = {0};
    int n = 0, differ = 0;
    for (int i = 0; i < ta->n_rows; i++) {
        double ratio[MAX_RUNS];
        int usable = 1;
        for (int k = 0; k < m->n_runs && usable; k++) {
            if (m->match[k][i] < 0) usable = 0;
            else ratio[k] = table_value(m->t[k], m->match[k][i], cols[k]) / table_value(ta, i, c);
            usable &= ratio[k] > 0 && isfinite(ratio[k]);
        }
        if (!usable) continue;
        for (int k = 0; k < m->n_runs; k++) log_sum[k] += log(ratio[k]), differ |= ratio[k] != 1.0;
        n++;
    }
    *n_rows = n;
    if (n == 0 || !differ) return 0;
    *winner = 0;
    for (int k = 0; k < m->n_runs; k++) {
        geo[k] = exp(log_sum[k] / n);
        if (direction * (geo[k] - geo[*winner]) > 0) *winner = k;
    }
    return 1;
}

int render_winners(Report *r, Error *err) {
    section_heading(r, "Which machine wins what");
    char missing[2400] = "";
    for (int i = 0; i < r->n_missing; i++)
        snprintf(missing + strlen(missing), sizeof missing - strlen(missing), "%s%s", i ? "; " : "", r->missing[i]);
    if (*missing) {
        char text[2600];
        snprintf(text, sizeof text, "No results from %d machine%s: %s. They are left out of every section.", r->n_missing,
                 r->n_missing == 1 ? "" : "s", missing);
        utf8_sanitize(text);
        pdf_notice(r->pdf, "Missing:", text);
    }
    if (r->n_runs < 2) {
        pdf_paragraph(r->pdf, "Only one machine has results, so there is nothing to win.", 0);
        return 0;
    }
    char machines[800], note[1600], intro[2000];
    machine_list(r, machines, sizeof machines);
    snprintf(intro, sizeof intro,
             "For every timing column (…_ms, …_ms_median: lower is better) and throughput column (tokens/s, GB/s, "
             "FLOP/s: higher is better) of the CSVs all machines wrote, %s: the rows that every machine has (matched on "
             "the key columns), each machine's geometric mean ratio to A over them, and the winner, the machine with "
             "the best mean. Columns where every machine gives the same numbers (reference tables, models trained once "
             "and copied) are left out.",
             machines);
    pdf_paragraph(r->pdf, intro, 0);
    int n_shared, status = 0, cap = 0, wins[MAX_RUNS] = {0}, contests = 0;
    char **shared = shared_csvs(r, &n_shared, note, sizeof note);
    PdfTable pt = new_pdf_table(5 + r->n_runs, 0);
    static const char *headers[4] = {"CSV", "column", "better", "rows"};
    for (int i = 0; i < 4; i++) pt.headers[i] = dup_string(headers[i]), pt.align[i] = i < 3 ? ALIGN_LEFT : ALIGN_RIGHT;
    for (int k = 0; k < r->n_runs; k++) {
        char head[16];
        snprintf(head, sizeof head, "%c ×A", machine_letter(k));
        pt.headers[4 + k] = dup_string(head);
        pt.align[4 + k] = ALIGN_RIGHT;
    }
    pt.headers[4 + r->n_runs] = dup_string("winner");
    pt.align[4 + r->n_runs] = ALIGN_LEFT;
    for (int i = 0; i < n_shared && status == 0; i++) {
        Matched m;
        status = match_csv(r, shared[i], &m, err);
        for (int c = m.n_keys; status == 0 && c < m.t[0]->n_cols; c++) {
            int direction = speed_direction(m.t[0]->names[c]), n_rows, winner;
            double geo[MAX_RUNS];
            if (!direction || !column_winner(&m, c, direction, geo, &n_rows, &winner)) continue;
            char **cells = add_table_row(&pt, &cap), buf[400];
            cells[0] = dup_string(shared[i]);
            utf8_sanitize(cells[0]);
            cells[1] = dup_string(m.t[0]->names[c]);
            cells[2] = dup_string(direction > 0 ? "higher" : "lower");
            snprintf(buf, sizeof buf, "%d", n_rows);
            cells[3] = dup_string(buf);
            for (int k = 0; k < r->n_runs; k++) {
                format_ratio(1, geo[k], buf, sizeof buf);
                cells[4 + k] = dup_string(buf);
            }
            snprintf(buf, sizeof buf, "%c: %s", machine_letter(winner), r->runs[winner].label);
            cells[4 + r->n_runs] = dup_string(buf);
            wins[winner]++, contests++;
        }
        if (status == 1) status = 0; // key columns differ: the ratio summary names it
        free_matched(&m);
    }
    if (status == 0) {
        char tally[1600] = "";
        for (int k = 0; k < r->n_runs; k++)
            snprintf(tally + strlen(tally), sizeof tally - strlen(tally), "%s%c (%s) wins %d", k ? "; " : "", machine_letter(k),
                     r->runs[k].label, wins[k]);
        snprintf(tally + strlen(tally), sizeof tally - strlen(tally), " of the %d timing and throughput columns.", contests);
        pdf_paragraph(r->pdf, tally, 0);
        summary_table(r, &pt, "Each machine's geometric mean ratio to A per timing or throughput column, and the winner.");
    }
    free_pdf_table(&pt);
    free_list(shared, n_shared);
    return status;
}
