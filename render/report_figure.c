// report_figure.c: a @figure block + the active runs' CSVs -> a Chart -> PNG and PDF figure.
// In compare mode each series appears once per run in the same colour, in the machine's line
// style (A solid, B dashed, C dash-dot..., hollow markers after A); heatmaps are drawn once per run. Tested by tests/test_render_report.c.
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "chart.h"
#include "report_parts.h"

#define MAX_Y 8
#define MAX_SERIES_COLS 4
#define DEFAULT_HEIGHT 0.55 // figure height as a fraction of its width

// One run's view of the figure's CSV: the table, the row filter, the columns the options name.
typedef struct {
    RunData *run;
    int machine; // the run's place in the comparison (its letter and line style)
    const Table *t;
    Filter where;
    int x, z, label, lo, hi;
    int y[MAX_Y], n_y;
    int ref[MAX_Y], n_ref;
    int series[MAX_SERIES_COLS], n_series;
} Source;

static int resolve_column(const Block *b, const char *key, const char *name, const Table *t, int *col, Error *err) {
    *col = table_column(t, name);
    if (*col >= 0) return 0;
    char where[PATH_MAX + 16], cols[300];
    block_where(b, key, where, sizeof where);
    table_column_list(t, cols, sizeof cols);
    return error_set(err, "%s: unknown column '%s' in %s (columns: %s)", where, name, t->path, cols);
}

// Resolve the comma-separated columns of option `key` (at most `max`); 0 columns when absent.
static int resolve_columns(const Block *b, const char *key, const Table *t, int *cols, int *n, int max, Error *err) {
    int n_names;
    char **names = split_list(block_option(b, key), &n_names);
    int status = 0;
    *n = 0;
    if (n_names > max) {
        char where[PATH_MAX + 16];
        block_where(b, key, where, sizeof where);
        status = error_set(err, "%s: '%s' names %d columns; at most %d", where, key, n_names, max);
    }
    for (int i = 0; i < n_names && status == 0; i++) status = resolve_column(b, key, names[i], t, &cols[(*n)++], err);
    free_list(names, n_names);
    return status;
}

// The y and ref columns drawn may not be a named quantity's second source (quantities.csv):
// draw that quantity as `peak: q(NAME)` instead.
static int check_one_source(const Block *b, const Source *s, Error *err) {
    const char *keys[] = {"y", "ref"};
    const int *cols[] = {s->y, s->ref}, n[] = {s->n_y, s->n_ref};
    for (int k = 0; k < 2; k++)
        for (int i = 0; i < n[k]; i++) {
            Error e;
            if (query_check_shown(s->run, block_option(b, "csv"), &s->where, cols[k][i], &e) == QUERY_OK) continue;
            char where[PATH_MAX + 16];
            block_where(b, keys[k], where, sizeof where);
            return error_set(err, "%s: %s", where, e.msg);
        }
    return 0;
}

static int open_source(const Block *b, RunData *run, Source *s, Error *err) {
    memset(s, 0, sizeof *s);
    s->run = run;
    s->x = s->z = s->label = s->lo = s->hi = -1;
    char where[PATH_MAX + 16];
    Error e;
    block_where(b, "csv", where, sizeof where);
    if (!(s->t = rundata_table(run, block_option(b, "csv"), &e))) return error_set(err, "%s: %s", where, e.msg);
    const char *w = block_option(b, "where");
    if (w && filter_parse(&s->where, w, s->t, &e)) {
        block_where(b, "where", where, sizeof where);
        return error_set(err, "%s: %s", where, e.msg);
    }
    int n_band = 0, band[2], one;
    if (resolve_columns(b, "y", s->t, s->y, &s->n_y, MAX_Y, err) ||
        resolve_columns(b, "series", s->t, s->series, &s->n_series, MAX_SERIES_COLS, err) ||
        resolve_columns(b, "ref", s->t, s->ref, &s->n_ref, MAX_Y, err) || resolve_columns(b, "band", s->t, band, &n_band, 2, err))
        return -1;
    if (resolve_columns(b, "x", s->t, &s->x, &one, 1, err)) return -1;
    if (block_option(b, "z") && resolve_columns(b, "z", s->t, &s->z, &one, 1, err)) return -1;
    if (block_option(b, "label") && resolve_columns(b, "label", s->t, &s->label, &one, 1, err)) return -1;
    block_where(b, "band", where, sizeof where);
    if (n_band == 1) return error_set(err, "%s: band needs two columns, low and high", where);
    if (n_band == 2) s->lo = band[0], s->hi = band[1];
    block_where(b, "ref", where, sizeof where);
    if (s->n_ref > 0 && s->n_ref != s->n_y)
        return error_set(err, "%s: give one ref column per y column (%d y, %d ref)", where, s->n_y, s->n_ref);
    return check_one_source(b, s, err);
}

// A cell that must be a number (or empty, which is NAN); text is an error naming the CSV line.
static int number_cell(const Block *b, const char *key, const Source *s, int row, int col, double *v, Error *err) {
    const char *cell = table_cell(s->t, row, col);
    *v = table_value(s->t, row, col);
    if (!isnan(*v) || cell[0] == '\0' || strcmp(cell, "nan") == 0) return 0;
    char where[PATH_MAX + 16];
    block_where(b, key, where, sizeof where);
    return error_set(err, "%s: column '%s' of %s line %d holds '%s', not a number", where, s->t->names[col], s->t->path,
                     s->t->lines[row], cell);
}

// --- series ---------------------------------------------------------------------------------

// The series a row belongs to: its series-column values, each with its variable where the
// value alone would not say what it is ("T = 0.7", "prefix sharing off"), and the y column's
// label when there are several y columns, or when the one series stands beside a reference
// curve (whose legend entry would otherwise be the only one, naming the wrong line).
static void series_label(const Report *r, const Block *b, const Source *s, int row, int yi, char *buf, size_t size) {
    buf[0] = '\0';
    for (int i = 0; i < s->n_series; i++) {
        size_t used = strlen(buf);
        snprintf(buf + used, size - used, "%s", i ? ", " : "");
        append_series_value(r, s->t->names[s->series[i]], table_cell(s->t, row, s->series[i]), buf, size);
    }
    if (s->n_y < 2 && !(s->n_series == 0 && s->n_ref > 0)) return;
    int n_labels;
    char **labels = split_list(block_option(b, "labels"), &n_labels), name[200];
    const char *label = yi < n_labels ? labels[yi] : display_name(r, s->t->names[s->y[yi]], name, sizeof name);
    size_t used = strlen(buf);
    snprintf(buf + used, size - used, "%s%s", used ? " · " : "", label);
    free_list(labels, n_labels);
}

// A category's label: display_names.csv's name for COLUMN=VALUE, else the cell as it is.
static const char *category_name(const Report *r, const Source *s, int row, int col) {
    return value_name(r, s->t->names[col], table_cell(s->t, row, col));
}

// Series are created together for every source the first time a label is seen, so that
// the machines' versions sit side by side (bar groups) and share a colour.
typedef struct {
    char **labels;
    int n;
    int *first; // index of source 0's series for each label
} SeriesIndex;

static Series *series_for(Chart *c, SeriesIndex *ix, const char *label, int source, const Source *src, int n_sources,
                          int reference) {
    int i = 0;
    while (i < ix->n && strcmp(ix->labels[i], label) != 0) i++;
    if (i == ix->n) {
        category_index(&ix->labels, &ix->n, label);
        ix->first = reallocCheck(ix->first, (size_t)ix->n * sizeof *ix->first);
        ix->first[i] = c->n_series;
        for (int k = 0; k < n_sources; k++) {
            Series *s = chart_add_series(c, label);
            s->colour = i % PALETTE_SIZE;
            s->marker = reference ? -1 : i % MARKER_COUNT;
            s->style = reference ? (n_sources > 1 || src[0].machine ? STYLE_DOTTED : STYLE_DASHED) : machine_style(src[k].machine);
            s->in_legend = !reference && k == 0 && *label;
        }
    }
    return &c->series[ix->first[i] + source];
}

static void free_index(SeriesIndex *ix) {
    free_list(ix->labels, ix->n);
    free(ix->first);
}

// Order a series' points by x, so that lines run left to right.
static void sort_by_x(Series *s) {
    for (int i = 1; i < s->n; i++)
        for (int j = i; j > 0 && s->x[j - 1] > s->x[j]; j--) {
            double t;
            t = s->x[j], s->x[j] = s->x[j - 1], s->x[j - 1] = t;
            t = s->y[j], s->y[j] = s->y[j - 1], s->y[j - 1] = t;
            t = s->lo[j], s->lo[j] = s->lo[j - 1], s->lo[j - 1] = t;
            t = s->hi[j], s->hi[j] = s->hi[j - 1], s->hi[j - 1] = t;
            char *l = s->point_labels[j];
            s->point_labels[j] = s->point_labels[j - 1], s->point_labels[j - 1] = l;
        }
}

// The colour of the measured series called `label` (reference curves take their series' colour).
static int colour_of(const SeriesIndex *measured, const char *label) {
    for (int i = 0; i < measured->n; i++)
        if (strcmp(measured->labels[i], label) == 0) return i % PALETTE_SIZE;
    return 0;
}

// Add the rows of every source as points: measured y columns, or (reference) the ref columns.
static int add_rows(const Report *r, Chart *c, const Block *b, Source *src, int n_src, SeriesIndex *ix,
                    const SeriesIndex *measured, int *n_points, Error *err) {
    int reference = measured != NULL;
    for (int si = 0; si < n_src; si++) {
        const Source *s = &src[si];
        for (int row = 0; row < s->t->n_rows; row++) {
            if (!filter_match(&s->where, s->t, row)) continue;
            double x, y, lo = NAN, hi = NAN;
            if (c->kind == CHART_BAR) x = category_index(&c->categories, &c->n_categories, category_name(r, s, row, s->x));
            else if (number_cell(b, "x", s, row, s->x, &x, err)) return -1;
            if (s->lo >= 0 && (number_cell(b, "band", s, row, s->lo, &lo, err) || number_cell(b, "band", s, row, s->hi, &hi, err)))
                return -1;
            for (int yi = 0; yi < (reference ? s->n_ref : s->n_y); yi++) {
                if (number_cell(b, reference ? "ref" : "y", s, row, reference ? s->ref[yi] : s->y[yi], &y, err)) return -1;
                char label[400];
                series_label(r, b, s, row, yi, label, sizeof label);
                Series *series = series_for(c, ix, label, si, src, n_src, reference);
                if (reference) series->colour = colour_of(measured, label);
                // in a comparison only A's points are labelled: B's sit beside them
                const char *point = s->label >= 0 && si == 0 ? table_cell(s->t, row, s->label) : NULL;
                series_add_full(series, x, y, reference ? NAN : lo, reference ? NAN : hi, point);
                (*n_points)++;
            }
        }
    }
    return 0;
}

// Legend entries that explain line styles: the reference curves, and the machines in a comparison.
static int add_style_keys(Report *r, const Block *b, Chart *c, const Source *src, int n_src, int has_ref, Error *err) {
    if (has_ref) {
        char *label;
        if (option_text(r, b, "ref_label", &label, err)) return -1;
        char text[400];
        snprintf(text, sizeof text, "%s", label ? label : "theory");
        chart_add_key(c, text, -1, n_src > 1 || src[0].machine ? STYLE_DOTTED : STYLE_DASHED);
        free(label);
    }
    if (n_src < 2) return 0;
    int labelled = 0;
    for (int i = 0; i < c->n_series; i++) labelled |= c->series[i].in_legend;
    if (!labelled) { // one series per run: name them after the machines, a colour each
        // the measured series come first, n_src of them (one per machine) per label
        for (int i = 0; i < c->n_series; i++) {
            Series *s = &c->series[i];
            if (s->marker < 0) continue;
            int machine = i % n_src;
            free(s->label);
            s->label = mallocCheck(strlen(src[machine].run->label) + 8);
            sprintf(s->label, "%c: %s", machine_letter(src[machine].machine), src[machine].run->label);
            s->colour = machine;
            s->in_legend = 1;
        }
        return 0;
    }
    for (int k = 0; k < n_src; k++) {
        char text[400];
        snprintf(text, sizeof text, "%c: %s", machine_letter(src[k].machine), src[k].run->label);
        chart_add_key(c, text, -1, machine_style(src[k].machine));
    }
    return 0;
}

// --- roofline ceilings ------------------------------------------------------------------------

// Every "peak:" / "bandwidth:" option, "EXPR [; LABEL]", evaluated in each active run.
static int add_ceilings(Report *r, const Block *b, Chart *c, Error *err) {
    for (int i = 0; i < b->n_options; i++) {
        const Option *o = &b->options[i];
        int is_peak = strcmp(o->key, "peak") == 0;
        if (!is_peak && strcmp(o->key, "bandwidth") != 0) continue;
        char where[PATH_MAX + 16];
        snprintf(where, sizeof where, "%s:%d", b->file, o->line);
        const char *semi = strchr(o->value, ';');
        char *expr = mallocCheck(strlen(o->value) + 1);
        snprintf(expr, strlen(o->value) + 1, "%.*s", semi ? (int)(semi - o->value) : (int)strlen(o->value), o->value);
        double first = NAN;
        int status = 0;
        for (int k = 0; k < r->n_active && status == 0; k++) {
            Value v;
            Error e;
            int q = query_eval(expr, r->active[k], &v, &e);
            if (q == QUERY_NO_DATA && !r->o->strict) {
                fprintf(stderr, "warning: %s: %s (in %s); ceiling left out\n", where, e.msg, r->active[k]->dir);
                continue;
            }
            if (q != QUERY_OK) status = error_set(err, "%s: %s", where, e.msg);
            else if (v.is_text) status = error_set(err, "%s: '%s' is not a number", where, v.text);
            if (status || (k == 1 && fabs(v.number - first) <= 1e-9 * fabs(first))) continue; // B's is A's
            if (k == 0) first = v.number;
            char *label = NULL, text[600];
            if (semi) label = expand_text(semi + 1, where, &r->active[k], 1, r->o->strict, err);
            if (semi && !label) {
                status = -1;
                break;
            }
            NumberFormat f = {FMT_SI, 3};
            char value[64];
            numfmt_format(v.number, f, value, sizeof value);
            snprintf(text, sizeof text, "%s%s", label ? label : is_peak ? "peak " : "bandwidth ", label ? "" : value);
            if (k == 1) strncat(text, " (B)", sizeof text - strlen(text) - 1);
            chart_add_ceiling(c, is_peak, v.number, text, k == 0 ? STYLE_SOLID : STYLE_DASHED);
            free(label);
        }
        free(expr);
        if (status) return -1;
    }
    return 0;
}

// --- heatmap ----------------------------------------------------------------------------------

static int compare_as_numbers(const void *a, const void *b) {
    double x, y;
    parse_number(*(char *const *)a, &x);
    parse_number(*(char *const *)b, &y);
    return (x > y) - (x < y);
}

// Numeric categories are sorted by value; others keep the CSV's order.
static void sort_categories(char **list, int n) {
    for (int i = 0; i < n; i++) {
        double v;
        if (!parse_number(list[i], &v)) return;
    }
    qsort(list, (size_t)n, sizeof *list, compare_as_numbers);
}

static int find_category(char **list, int n, const char *name) {
    for (int i = 0; i < n; i++)
        if (strcmp(list[i], name) == 0) return i;
    return -1;
}

static int fill_heatmap(const Report *r, const Block *b, Chart *c, const Source *s, int *n_points, Error *err) {
    for (int row = 0; row < s->t->n_rows; row++)
        if (filter_match(&s->where, s->t, row)) {
            category_index(&c->categories, &c->n_categories, category_name(r, s, row, s->x));
            category_index(&c->rows, &c->n_rows, category_name(r, s, row, s->y[0]));
        }
    sort_categories(c->categories, c->n_categories);
    sort_categories(c->rows, c->n_rows);
    chart_alloc_grid(c);
    for (int row = 0; row < s->t->n_rows; row++) {
        if (!filter_match(&s->where, s->t, row)) continue;
        int k = find_category(c->categories, c->n_categories, category_name(r, s, row, s->x));
        int j = find_category(c->rows, c->n_rows, category_name(r, s, row, s->y[0]));
        double *cell = &c->z[(size_t)j * c->n_categories + k];
        if (!isnan(*cell)) {
            char where[PATH_MAX + 16];
            block_where(b, "where", where, sizeof where);
            return error_set(err, "%s: %s has two rows for x=%s, y=%s (line %d); narrow the figure's 'where'", where,
                             s->t->path, c->categories[k], c->rows[j], s->t->lines[row]);
        }
        if (number_cell(b, "z", s, row, s->z, cell, err)) return -1;
        (*n_points)++;
    }
    return 0;
}

// --- options --------------------------------------------------------------------------------

static int number_option(const Block *b, const char *key, double *v, Error *err) {
    const char *s = block_option(b, key);
    if (!s) return 0;
    if (parse_number(s, v)) return 0;
    char where[PATH_MAX + 16];
    block_where(b, key, where, sizeof where);
    return error_set(err, "%s: %s: '%s' is not a number", where, key, s);
}

static int scale_option(const Block *b, const char *key, Scale *scale, Error *err) {
    const char *s = block_option(b, key);
    if (!s || scale_parse(s, scale) == 0) return 0;
    char where[PATH_MAX + 16];
    block_where(b, key, where, sizeof where);
    return error_set(err, "%s: %s: unknown scale '%s' (linear, log or log2)", where, key, s);
}

// Kind, scales, ranges, legend and labels from the block's options.
static int chart_options(Report *r, const Block *b, Chart *c, double *height, Error *err) {
    static const struct { const char *name; ChartKind kind; } kinds[] = {
        {"line", CHART_LINE}, {"bar", CHART_BAR}, {"heatmap", CHART_HEATMAP}, {"roofline", CHART_ROOFLINE}};
    ChartKind kind = CHART_LINE;
    for (size_t i = 0; i < sizeof kinds / sizeof kinds[0]; i++)
        if (strcmp(figure_kind(b), kinds[i].name) == 0) kind = kinds[i].kind;
    chart_init(c, kind);
    *height = kind == CHART_HEATMAP ? 0.5 : DEFAULT_HEIGHT;
    char where[PATH_MAX + 16];
    if (scale_option(b, "xscale", &c->xscale, err) || scale_option(b, "yscale", &c->yscale, err) ||
        scale_option(b, "zscale", &c->zscale, err) ||
        number_option(b, "xmin", &c->xmin, err) || number_option(b, "xmax", &c->xmax, err) ||
        number_option(b, "ymin", &c->ymin, err) || number_option(b, "ymax", &c->ymax, err) ||
        number_option(b, "zmin", &c->zmin, err) || number_option(b, "zmax", &c->zmax, err) ||
        number_option(b, "height", height, err))
        return -1;
    block_where(b, "height", where, sizeof where);
    if (*height < 0.2 || *height > 1.5) return error_set(err, "%s: height %g is outside 0.2 .. 1.5 (of the width)", where, *height);
    const char *legend = block_option(b, "legend");
    block_where(b, "legend", where, sizeof where);
    if (legend && strcmp(legend, "none") != 0 && strcmp(legend, "auto") != 0)
        return error_set(err, "%s: legend: '%s' (none or auto)", where, legend);
    c->legend = !legend || strcmp(legend, "none") != 0;
    const char *format = block_option(b, "format");
    block_where(b, "format", where, sizeof where);
    if (format && numfmt_parse(format, &c->zformat))
        return error_set(err, "%s: unknown number format '%s' (3, .2f, int, si, bytes, percent)", where, format);
    return option_text(r, b, "title", &c->title, err) || option_text(r, b, "xlabel", &c->xlabel, err) ||
           option_text(r, b, "ylabel", &c->ylabel, err) || option_text(r, b, "zlabel", &c->zlabel, err);
}

// --- output -----------------------------------------------------------------------------------

static int check_figure_id(Report *r, const Block *b, char *id, size_t size, Error *err) {
    char where[PATH_MAX + 16];
    block_where(b, NULL, where, sizeof where);
    if (b->text && *b->text) snprintf(id, size, "%s", b->text);
    else snprintf(id, size, "figure-%d", r->figure_no);
    if (strspn(id, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_.") != strlen(id) || id[0] == '.')
        return error_set(err, "%s: figure id '%s': use letters, digits, '-', '_' and '.' only", where, id);
    for (int i = 0; i < r->n_figure_ids; i++)
        if (strcmp(r->figure_ids[i], id) == 0)
            return error_set(err, "%s: figure id '%s' is already used at line %d", where, id, r->figure_lines[i]);
    category_index(&r->figure_ids, &r->n_figure_ids, id);
    r->figure_lines = reallocCheck(r->figure_lines, (size_t)r->n_figure_ids * sizeof *r->figure_lines);
    r->figure_lines[r->n_figure_ids - 1] = b->line;
    return 0;
}

// Reserve the figure's place in the PDF and queue its chart (which the job now owns).
static void queue_figure(Report *r, Chart *c, double height, const char *id, const char *label, const char *caption) {
    r->jobs = reallocCheck(r->jobs, (size_t)(r->n_jobs + 1) * sizeof *r->jobs);
    FigureJob *job = &r->jobs[r->n_jobs++];
    job->chart = *c;
    memset(c, 0, sizeof *c);
    snprintf(job->id, sizeof job->id, "%s", id);
    job->w = pdf_text_width();
    job->h = job->w * height;
    job->slot = pdf_figure_slot(r->pdf, job->w, job->h, label, caption);
}

#define FIGURE_BATCH 8 // figures drawn at once: bounds the memory their images hold

int draw_figures(Report *r, Error *err) {
    for (int start = 0; start < r->n_jobs; start += FIGURE_BATCH) {
        int n = r->n_jobs - start < FIGURE_BATCH ? r->n_jobs - start : FIGURE_BATCH;
        unsigned char *rgb[FIGURE_BATCH];
        int width[FIGURE_BATCH], height[FIGURE_BATCH], failed[FIGURE_BATCH] = {0};
        Error errs[FIGURE_BATCH];
#pragma omp parallel for schedule(dynamic, 1)
        for (int i = 0; i < n; i++) {
            const FigureJob *job = &r->jobs[start + i];
            cairo_surface_t *img = chart_draw(&job->chart, job->w, job->h, r->o->dpi);
            if (r->figures_dir[0]) {
                char path[PATH_MAX + 320];
                snprintf(path, sizeof path, "%s/%s.png", r->figures_dir, job->id);
                failed[i] = chart_write_png(img, path, &errs[i]) != 0;
            }
            rgb[i] = image_rgb(img);
            width[i] = cairo_image_surface_get_width(img);
            height[i] = cairo_image_surface_get_height(img);
            cairo_surface_destroy(img);
        }
        int status = 0;
        for (int i = 0; i < n; i++) {
            if (status == 0 && failed[i]) status = error_set(err, "%s", errs[i].msg);
            if (status == 0) status = pdf_fill_figure(r->pdf, r->jobs[start + i].slot, rgb[i], width[i], height[i], err);
            free(rgb[i]);
        }
        if (status) return -1;
    }
    return 0;
}

void free_figure_jobs(Report *r) {
    for (int i = 0; i < r->n_jobs; i++) chart_free(&r->jobs[i].chart);
    free(r->jobs);
    r->jobs = NULL;
    r->n_jobs = 0;
}

static int no_data(Report *r, const Block *b, const char *id, Error *err) {
    char where[PATH_MAX + 16];
    block_where(b, "where", where, sizeof where);
    if (r->o->strict) return error_set(err, "%s: figure '%s' selects no rows of %s", where, id, block_option(b, "csv"));
    fprintf(stderr, "warning: %s: figure '%s' selects no rows of %s\n", where, id, block_option(b, "csv"));
    return 0;
}

// Heatmaps: one per run ("Figure 5a", "Figure 5b"... in a comparison), each with its own scale.
static int heatmap_figures(Report *r, const Block *b, Source *src, int n_src, const char *id, const char *label,
                           const char *caption, int *n_points, Error *err) {
    for (int k = 0; k < n_src; k++) {
        Chart h;
        double height;
        int status = chart_options(r, b, &h, &height, err);
        if (status == 0) status = fill_heatmap(r, b, &h, &src[k], n_points, err);
        char sub_id[300], sub_label[48], sub_caption[1200];
        char letter = machine_letter(src[k].machine);
        if (r->compare) snprintf(sub_id, sizeof sub_id, "%s-%c", id, letter);
        else snprintf(sub_id, sizeof sub_id, "%s", id);
        if (r->compare) snprintf(sub_label, sizeof sub_label, "%s%c", label, letter - 'A' + 'a');
        else snprintf(sub_label, sizeof sub_label, "%s", label);
        snprintf(sub_caption, sizeof sub_caption, "%s", caption ? caption : "");
        if (r->compare)
            snprintf(sub_caption + strlen(sub_caption), sizeof sub_caption - strlen(sub_caption), " (%c: %s)", letter,
                     src[k].run->label);
        if (status == 0) queue_figure(r, &h, height, sub_id, sub_label, sub_caption);
        chart_free(&h);
        if (status) return -1;
    }
    return 0;
}

#define MAX_PANEL_SERIES 6 // more lines or bar colours than this cannot be told apart in one panel

// A figure the reader cannot decode: a warning, or under --strict an error naming its line.
static int figure_problem(const Report *r, const Block *b, const char *key, const char *id, const char *what,
                          Error *err) {
    char where[PATH_MAX + 16];
    block_where(b, key, where, sizeof where);
    if (r->o->strict) return error_set(err, "%s: figure %s %s", where, id, what);
    fprintf(stderr, "warning: %s: figure %s %s\n", where, id, what);
    return 0;
}

// Every drawn series must be in the legend, and a panel holds at most MAX_PANEL_SERIES
// (a roofline whose points carry their own labels is read by the labels, not the colours).
static int check_legend(const Report *r, const Block *b, const Chart *c, const SeriesIndex *measured, int has_ref,
                        const char *id, Error *err) {
    int n = 0, unnamed = 0;
    char what[200];
    for (int i = 0; i < measured->n; i++) n += measured->labels[i][0] != '\0', unnamed += measured->labels[i][0] == '\0';
    const char *unnamed_what = "draws a series that its legend does not name beside the reference curve's entry";
    if (c->legend && has_ref && unnamed && figure_problem(r, b, "legend", id, unnamed_what, err)) return -1;
    snprintf(what, sizeof what, "draws %d series, more than the %d one panel keeps apart: split it into panels "
             "with where: (small multiples) or draw fewer", n, MAX_PANEL_SERIES);
    int self_labelled = c->kind == CHART_ROOFLINE && block_option(b, "label");
    if (n > MAX_PANEL_SERIES && !self_labelled && figure_problem(r, b, "series", id, what, err)) return -1;
    snprintf(what, sizeof what, "draws %d series with legend: none, so the reader cannot tell them apart", n);
    if (!c->legend && n > 1 && figure_problem(r, b, "legend", id, what, err)) return -1;
    return 0;
}

// Line, bar and roofline charts: every run's rows in one chart.
static int xy_figure(Report *r, const Block *b, Source *src, int n_src, const char *id, const char *label,
                     const char *caption, int *n_points, Error *err) {
    Chart c;
    double height;
    SeriesIndex measured = {0}, refs = {0};
    int n_refs = 0, status = chart_options(r, b, &c, &height, err);
    if (status == 0) status = add_rows(r, &c, b, src, n_src, &measured, NULL, n_points, err);
    if (status == 0) status = add_rows(r, &c, b, src, n_src, &refs, &measured, &n_refs, err);
    for (int i = 0; status == 0 && c.kind == CHART_LINE && i < c.n_series; i++) sort_by_x(&c.series[i]);
    if (status == 0) status = check_legend(r, b, &c, &measured, n_refs > 0, id, err);
    if (status == 0 && c.kind == CHART_LINE && n_src == 1) chart_join_coinciding(&c);
    if (status == 0) status = add_style_keys(r, b, &c, src, n_src, n_refs > 0, err);
    if (status == 0) status = add_ceilings(r, b, &c, err); // line and bar: peaks only
    if (status == 0) queue_figure(r, &c, height, id, label, caption);
    free_index(&measured);
    free_index(&refs);
    chart_free(&c);
    return status;
}

int render_figure(Report *r, const Block *b, Error *err) {
    char id[256], label[32], *caption = NULL;
    Source src[MAX_RUNS] = {0};
    snprintf(label, sizeof label, "Figure %d", ++r->figure_no);
    int status = check_figure_id(r, b, id, sizeof id, err), n_src = 0, n_points = 0;
    for (; status == 0 && n_src < r->n_active; n_src++) {
        status = open_source(b, r->active[n_src], &src[n_src], err);
        src[n_src].machine = (int)(r->active[n_src] - r->runs);
    }
    if (status == 0) status = option_text(r, b, "caption", &caption, err);
    if (status == 0 && strcmp(figure_kind(b), "heatmap") == 0)
        status = heatmap_figures(r, b, src, n_src, id, label, caption, &n_points, err);
    else if (status == 0) status = xy_figure(r, b, src, n_src, id, label, caption, &n_points, err);
    if (status == 0 && n_points == 0) status = no_data(r, b, id, err);
    free(caption);
    for (int k = 0; k < MAX_RUNS; k++) filter_free(&src[k].where);
    return status;
}
