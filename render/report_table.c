// report_table.c: @table blocks -> PDF tables; in compare mode, B/A ratio tables for rows
// whose key columns match, and the closing summary of ratios over every shared CSV.
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
} Columns;

static void free_columns(Columns *c) {
    free(c->cols);
    free_list(c->headers, c->n);
    free(c->fmt);
    free(c->raw);
    memset(c, 0, sizeof *c);
}

// The `columns`, `headers` and `formats` options against table t.
static int table_columns(const Block *b, const Table *t, Columns *c, Error *err) {
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
        c->headers[i] = dup_string(n_headers ? headers[i] : names[i]);
        const char *spec = n_formats ? formats[n_formats == 1 ? 0 : i] : "-";
        c->fmt[i] = DEFAULT_CELL_FORMAT;
        c->raw[i] = strcmp(spec, "raw") == 0;
        if (!c->raw[i] && strcmp(spec, "-") != 0 && numfmt_parse(spec, &c->fmt[i])) {
            block_where(b, "formats", where, sizeof where);
            status = error_set(err, "%s: unknown format '%s' (-, raw, 3, .2f, int, si, bytes, percent)", where, spec);
        }
    }
    free_list(names, n_names);
    free_list(headers, n_headers);
    free_list(formats, n_formats);
    if (status) free_columns(c);
    return status;
}

static char *format_cell(const Table *t, int row, int col, NumberFormat fmt, int raw) {
    const char *cell = table_cell(t, row, col);
    double v = table_value(t, row, col);
    if (raw || cell[0] == '\0' || isnan(v)) return dup_string(cell);
    char buf[64];
    numfmt_format(v, fmt, buf, sizeof buf);
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
    if (table_columns(b, s.t, &cols, err)) {
        free_selection(&s);
        return -1;
    }
    PdfTable pt = new_pdf_table(cols.n, s.n_rows);
    for (int c = 0; c < cols.n; c++) {
        pt.headers[c] = dup_string(cols.headers[c]);
        pt.align[c] = numeric_column(s.t, s.rows, s.n_rows, cols.cols[c]) ? ALIGN_RIGHT : ALIGN_LEFT;
        for (int i = 0; i < s.n_rows; i++)
            pt.cells[(size_t)i * cols.n + c] = format_cell(s.t, s.rows[i], cols.cols[c], cols.fmt[c], cols.raw[c]);
    }
    int status = draw_table(r, b, &pt, label, caption, err);
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

// The B/A table: key columns, then one ratio column per numeric non-key column. Returns 1
// (nothing drawn) when the table has no such column.
static int ratio_table(Report *r, const Block *b, const char *label, const char *caption, Error *err) {
    Selection sa, sb;
    Columns cols;
    if (select_rows(b, r->active[0], &sa, err)) return -1;
    if (select_rows(b, r->active[1], &sb, err)) {
        free_selection(&sa);
        return -1;
    }
    int status = table_columns(b, sa.t, &cols, err);
    int *ka = mallocCheck((size_t)sa.t->n_cols * sizeof *ka), *kb = mallocCheck((size_t)sa.t->n_cols * sizeof *kb), n_keys = 0;
    int *metrics = mallocCheck((size_t)(cols.n + 1) * sizeof *metrics), *metrics_b = mallocCheck((size_t)(cols.n + 1) * sizeof *metrics_b);
    int n_metrics = 0;
    if (status == 0) status = key_columns(b, &sa, &sb, ka, kb, &n_keys, err);
    for (int c = 0; status == 0 && c < cols.n; c++) {
        int is_key = 0;
        for (int k = 0; k < n_keys; k++) is_key |= ka[k] == cols.cols[c];
        int col_b = table_column(sb.t, sa.t->names[cols.cols[c]]);
        if (!is_key && col_b >= 0 && numeric_column(sa.t, sa.rows, sa.n_rows, cols.cols[c]))
            metrics[n_metrics] = c, metrics_b[n_metrics++] = col_b;
    }
    if (status == 0 && n_metrics == 0) status = 1;
    if (status == 0) {
        Keys keys_a = {sa.t, ka, n_keys}, keys_b = {sb.t, kb, n_keys};
        int *match = mallocCheck((size_t)(sa.n_rows + 1) * sizeof *match);
        int matched = match_rows(&keys_a, sa.rows, sa.n_rows, &keys_b, sb.rows, sb.n_rows, match);
        PdfTable pt = new_pdf_table(n_keys + n_metrics, matched);
        for (int k = 0; k < n_keys; k++) {
            pt.headers[k] = dup_string(sa.t->names[ka[k]]);
            for (int c = 0; c < cols.n; c++)
                if (cols.cols[c] == ka[k]) free(pt.headers[k]), pt.headers[k] = dup_string(cols.headers[c]);
            pt.align[k] = numeric_column(sa.t, sa.rows, sa.n_rows, ka[k]) ? ALIGN_RIGHT : ALIGN_LEFT;
        }
        for (int m = 0; m < n_metrics; m++) {
            const char *h = cols.headers[metrics[m]];
            pt.headers[n_keys + m] = mallocCheck(strlen(h) + 8);
            sprintf(pt.headers[n_keys + m], "%s B/A", h);
            pt.align[n_keys + m] = ALIGN_RIGHT;
        }
        for (int i = 0, row = 0; i < sa.n_rows; i++) {
            if (match[i] < 0) continue;
            char **cells = &pt.cells[(size_t)row++ * pt.n_cols];
            for (int k = 0; k < n_keys; k++) cells[k] = dup_string(table_cell(sa.t, sa.rows[i], ka[k]));
            for (int m = 0; m < n_metrics; m++) {
                char buf[64];
                format_ratio(table_value(sa.t, sa.rows[i], cols.cols[metrics[m]]), table_value(sb.t, match[i], metrics_b[m]), buf,
                             sizeof buf);
                cells[n_keys + m] = dup_string(buf);
            }
        }
        char full[1600];
        snprintf(full, sizeof full, "%s%sB/A ratios, A = %s, B = %s; %d of %d rows matched on %d key column%s.",
                 caption ? caption : "", caption ? " " : "", r->active[0]->label, r->active[1]->label, matched, sa.n_rows,
                 n_keys, n_keys == 1 ? "" : "s");
        status = draw_table(r, b, &pt, label, full, err);
        free_pdf_table(&pt);
        free(match);
    }
    free(ka);
    free(kb);
    free(metrics);
    free(metrics_b);
    if (cols.cols) free_columns(&cols);
    free_selection(&sa);
    free_selection(&sb);
    return status;
}

// One plain table per active run (labelled "Table Na", "Table Nb" in a comparison).
static int plain_tables(Report *r, const Block *b, const char *label, const char *caption, Error *err) {
    for (int k = 0; k < r->n_active; k++) {
        char sub_label[56], sub_caption[1200];
        snprintf(sub_label, sizeof sub_label, "%s%s", label, r->n_active == 2 ? (k ? "b" : "a") : "");
        snprintf(sub_caption, sizeof sub_caption, "%s", caption ? caption : "");
        if (r->n_active == 2)
            snprintf(sub_caption + strlen(sub_caption), sizeof sub_caption - strlen(sub_caption), " (%s: %s)",
                     k ? "B" : "A", r->active[k]->label);
        if (plain_table(r, b, r->active[k], sub_label, sub_caption, err)) return -1;
    }
    return 0;
}

int render_table(Report *r, const Block *b, Error *err) {
    char *caption, label[48];
    if (option_text(r, b, "caption", &caption, err)) return -1;
    snprintf(label, sizeof label, "Table %d", ++r->table_no);
    int status = r->n_active == 2 ? ratio_table(r, b, label, caption, err) : 1;
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

// Summary rows (file, column, matched, geometric mean, min, max of B/A) for one shared CSV;
// 1 when B lacks one of A's key columns, so that the rows cannot be matched.
static int summarise_csv(Report *r, const char *name, PdfTable *pt, int *cap, Error *err) {
    const Table *ta = rundata_table(&r->runs[0], name, err), *tb = ta ? rundata_table(&r->runs[1], name, err) : NULL;
    if (!ta || !tb) return -1;
    Filter everything = {0};
    int n_a, n_b;
    int *rows_a = matching_rows(ta, &everything, &n_a), *rows_b = matching_rows(tb, &everything, &n_b);
    int n_keys = infer_key_count(ta, rows_a, ta->n_rows);
    int *ka = mallocCheck((size_t)ta->n_cols * sizeof *ka), *kb = mallocCheck((size_t)ta->n_cols * sizeof *kb), ok = 1;
    for (int i = 0; i < n_keys; i++) {
        ka[i] = i;
        kb[i] = table_column(tb, ta->names[i]);
        ok &= kb[i] >= 0;
    }
    int *match = mallocCheck((size_t)(ta->n_rows + 1) * sizeof *match);
    Keys keys_a = {ta, ka, n_keys}, keys_b = {tb, kb, n_keys};
    int matched = ok ? match_rows(&keys_a, rows_a, n_a, &keys_b, rows_b, n_b, match) : 0;
    for (int c = n_keys; ok && c < ta->n_cols; c++) {
        int cb = table_column(tb, ta->names[c]);
        if (cb < 0 || !numeric_column(ta, rows_a, ta->n_rows, c)) continue;
        double log_sum = 0, lo = INFINITY, hi = -INFINITY;
        int n = 0;
        for (int i = 0; i < ta->n_rows; i++) {
            if (match[i] < 0) continue;
            double ratio = table_value(tb, match[i], cb) / table_value(ta, i, c);
            if (!(ratio > 0) || !isfinite(ratio)) continue;
            log_sum += log(ratio), n++;
            lo = fmin(lo, ratio), hi = fmax(hi, ratio);
        }
        if (pt->n_rows == *cap) {
            *cap = 2 * *cap + 8;
            pt->cells = reallocCheck(pt->cells, (size_t)*cap * pt->n_cols * sizeof *pt->cells);
        }
        char **cells = &pt->cells[(size_t)pt->n_rows++ * pt->n_cols], buf[64];
        cells[0] = dup_string(name);
        utf8_sanitize(cells[0]); // a file name may be any bytes
        cells[1] = dup_string(ta->names[c]);
        snprintf(buf, sizeof buf, "%d / %d", matched, ta->n_rows);
        cells[2] = dup_string(buf);
        double stats[3] = {n ? exp(log_sum / n) : NAN, n ? lo : NAN, n ? hi : NAN};
        for (int k = 0; k < 3; k++) {
            format_ratio(1, stats[k], buf, sizeof buf);
            cells[3 + k] = dup_string(buf);
        }
    }
    free(rows_a);
    free(rows_b);
    free(ka);
    free(kb);
    free(match);
    return ok ? 0 : 1;
}

int render_ratio_summary(Report *r, Error *err) {
    int n_a, n_b;
    char **a = list_csv(r->runs[0].dir, &n_a), **b = list_csv(r->runs[1].dir, &n_b);
    char number[16];
    snprintf(number, sizeof number, "%d", ++r->section);
    pdf_heading(r->pdf, 1, number, "Summary of B/A ratios", 0);
    char intro[1200];
    snprintf(intro, sizeof intro,
             "Every CSV that both runs wrote, A = %s and B = %s. Rows are matched on each file's key columns (the "
             "shortest run of leading columns that tells its rows apart); for each numeric column after them the table "
             "gives the geometric mean, the minimum and the maximum of B/A over the matched rows. Below 1× B is smaller "
             "(for a time: faster); exactly 1× means identical values, as a deterministic column should be.",
             r->runs[0].label, r->runs[1].label);
    pdf_paragraph(r->pdf, intro, 0);
    PdfTable pt = new_pdf_table(6, 0);
    static const char *headers[6] = {"CSV", "column", "rows matched", "geo. mean B/A", "min B/A", "max B/A"};
    for (int i = 0; i < 6; i++) {
        pt.headers[i] = dup_string(headers[i]);
        pt.align[i] = i < 2 ? ALIGN_LEFT : ALIGN_RIGHT;
    }
    int cap = 0, status = 0;
    char only[1200] = "";
    for (int i = 0; i < n_a && status == 0; i++) {
        const char *why = in_dir(r->runs[1].dir, a[i]) ? NULL : "only in A";
        if (!why && (status = summarise_csv(r, a[i], &pt, &cap, err)) == 1) why = "key columns differ", status = 0;
        if (why) snprintf(only + strlen(only), sizeof only - strlen(only), "%s%s (%s)", *only ? ", " : "", a[i], why);
    }
    for (int i = 0; i < n_b; i++)
        if (!in_dir(r->runs[0].dir, b[i]))
            snprintf(only + strlen(only), sizeof only - strlen(only), "%s%s (only in B)", *only ? ", " : "", b[i]);
    if (status == 0) {
        r->table_no++;
        char label[32];
        snprintf(label, sizeof label, "Table %d", r->table_no);
        pdf_table(r->pdf, &pt, label, "B/A ratios over every shared CSV.");
        if (*only) {
            char text[1300];
            snprintf(text, sizeof text, "Not compared: %s.", only);
            utf8_sanitize(text);
            pdf_paragraph(r->pdf, text, 0);
        }
    }
    free_pdf_table(&pt);
    free_list(a, n_a);
    free_list(b, n_b);
    return status;
}
