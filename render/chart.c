// chart.c: building Chart data, and saving drawn charts as PNG or raw RGB (see chart.h).
// The drawing itself is in chart_draw.c.
#include "chart.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static char *dup_or_null(const char *s) {
    if (!s) return NULL;
    char *d = mallocCheck(strlen(s) + 1);
    strcpy(d, s);
    return d;
}

void chart_init(Chart *c, ChartKind kind) {
    memset(c, 0, sizeof *c);
    c->kind = kind;
    c->xscale = c->yscale = kind == CHART_ROOFLINE ? SCALE_LOG10 : SCALE_LINEAR;
    c->xmin = c->xmax = c->ymin = c->ymax = c->zmin = c->zmax = NAN;
    c->legend = 1;
    c->zformat = (NumberFormat){FMT_SIG, 3};
}

static void free_strings(char **list, int n) {
    for (int i = 0; i < n; i++) free(list[i]);
    free(list);
}

static void free_ceilings(Ceiling *list, int n) {
    for (int i = 0; i < n; i++) free(list[i].label);
    free(list);
}

void chart_free(Chart *c) {
    free(c->title);
    free(c->xlabel);
    free(c->ylabel);
    free(c->zlabel);
    for (int i = 0; i < c->n_series; i++) {
        Series *s = &c->series[i];
        free(s->label);
        free(s->x);
        free(s->y);
        free(s->lo);
        free(s->hi);
        if (s->point_labels) free_strings(s->point_labels, s->n);
    }
    free(c->series);
    free_strings(c->categories, c->n_categories);
    free_strings(c->rows, c->n_rows);
    free(c->z);
    free_ceilings(c->peaks, c->n_peaks);
    free_ceilings(c->bandwidths, c->n_bandwidths);
    for (int i = 0; i < c->n_keys; i++) free(c->keys[i].label);
    free(c->keys);
    memset(c, 0, sizeof *c);
}

Series *chart_add_series(Chart *c, const char *label) {
    c->series = reallocCheck(c->series, (size_t)(c->n_series + 1) * sizeof *c->series);
    Series *s = &c->series[c->n_series];
    memset(s, 0, sizeof *s);
    s->label = dup_or_null(label ? label : "");
    s->colour = c->n_series % PALETTE_SIZE;
    s->marker = c->n_series % MARKER_COUNT;
    s->lines = c->kind != CHART_ROOFLINE;
    s->in_legend = label && *label;
    c->n_series++;
    return s;
}

void series_add_full(Series *s, double x, double y, double lo, double hi, const char *point_label) {
    if (s->n == s->cap) {
        s->cap = s->cap ? 2 * s->cap : 16;
        s->x = reallocCheck(s->x, (size_t)s->cap * sizeof *s->x);
        s->y = reallocCheck(s->y, (size_t)s->cap * sizeof *s->y);
        s->lo = reallocCheck(s->lo, (size_t)s->cap * sizeof *s->lo);
        s->hi = reallocCheck(s->hi, (size_t)s->cap * sizeof *s->hi);
        s->point_labels = reallocCheck(s->point_labels, (size_t)s->cap * sizeof *s->point_labels);
    }
    s->x[s->n] = x;
    s->y[s->n] = y;
    s->lo[s->n] = lo;
    s->hi[s->n] = hi;
    s->point_labels[s->n] = dup_or_null(point_label);
    s->n++;
}

void series_add(Series *s, double x, double y) { series_add_full(s, x, y, NAN, NAN, NULL); }

// 1 when two line series have the same x and their y agree to within half a percent at every
// point: drawn, one hides the other.
static int coincide(const Series *a, const Series *b) {
    if (a->n != b->n || a->n == 0) return 0;
    for (int k = 0; k < a->n; k++)
        if (a->x[k] != b->x[k] || !(fabs(a->y[k] - b->y[k]) <= 0.005 * fmax(fabs(a->y[k]), fabs(b->y[k])))) return 0;
    return 1;
}

void chart_join_coinciding(Chart *c) {
    for (int j = 0; j < c->n_series; j++) {
        Series *b = &c->series[j];
        if (!b->in_legend || b->marker < 0) continue;
        for (int i = 0; i < j; i++) {
            Series *a = &c->series[i];
            if (!a->in_legend || a->marker < 0 || !coincide(a, b)) continue;
            size_t n = strlen(a->label) + strlen(b->label) + 4;
            char *joined = mallocCheck(n);
            snprintf(joined, n, "%s = %s", a->label, b->label);
            free(a->label);
            a->label = joined;
            b->in_legend = 0;
            b->colour = a->colour, b->marker = a->marker, b->style = a->style; // drawn on top, as its entry shows
            break;
        }
    }
}

int category_index(char ***list, int *n, const char *name) {
    for (int i = 0; i < *n; i++)
        if (strcmp((*list)[i], name) == 0) return i;
    *list = reallocCheck(*list, (size_t)(*n + 1) * sizeof **list);
    (*list)[*n] = dup_or_null(name);
    return (*n)++;
}

void chart_alloc_grid(Chart *c) {
    size_t n = (size_t)c->n_rows * c->n_categories;
    free(c->z);
    c->z = mallocCheck(n * sizeof *c->z);
    for (size_t i = 0; i < n; i++) c->z[i] = NAN;
}

void chart_add_ceiling(Chart *c, int is_peak, double value, const char *label, LineStyle style) {
    Ceiling **list = is_peak ? &c->peaks : &c->bandwidths;
    int *n = is_peak ? &c->n_peaks : &c->n_bandwidths;
    *list = reallocCheck(*list, (size_t)(*n + 1) * sizeof **list);
    (*list)[(*n)++] = (Ceiling){value, dup_or_null(label ? label : ""), style};
}

void chart_add_key(Chart *c, const char *label, int colour, LineStyle style) {
    c->keys = reallocCheck(c->keys, (size_t)(c->n_keys + 1) * sizeof *c->keys);
    c->keys[c->n_keys++] = (LegendKey){dup_or_null(label), colour, style};
}

// fontconfig, which cairo's text API uses, keeps patterns that LeakSanitizer reports at exit
// though they are fontconfig's own caches; every program that draws charts links this file,
// so this is where sanitizer builds are told to overlook them.
const char *__lsan_default_suppressions(void);
const char *__lsan_default_suppressions(void) { return "leak:libfontconfig.so\n"; }

// --- output -------------------------------------------------------------------------------

static cairo_status_t write_to_file(void *closure, const unsigned char *data, unsigned int length) {
    FILE *f = closure;
    return fwrite(data, 1, length, f) == length ? CAIRO_STATUS_SUCCESS : CAIRO_STATUS_WRITE_ERROR;
}

int chart_write_png(cairo_surface_t *img, const char *path, Error *err) {
    AtomicFile af = atomic_open(path);
    if (cairo_surface_write_to_png_stream(img, write_to_file, af.f) != CAIRO_STATUS_SUCCESS) {
        atomic_abort(&af);
        return error_set(err, "%s: cannot write PNG", path);
    }
    atomic_commit(&af);
    return 0;
}

unsigned char *image_rgb(cairo_surface_t *img) {
    cairo_surface_flush(img);
    int w = cairo_image_surface_get_width(img), h = cairo_image_surface_get_height(img);
    int stride = cairo_image_surface_get_stride(img);
    const unsigned char *data = cairo_image_surface_get_data(img);
    unsigned char *rgb = mallocCheck((size_t)w * h * 3);
    for (int y = 0; y < h; y++) {
        const uint32_t *row = (const uint32_t *)(data + (size_t)y * stride); // xRGB, native endian
        unsigned char *out = rgb + (size_t)y * w * 3;
        for (int x = 0; x < w; x++) {
            out[3 * x + 0] = (unsigned char)(row[x] >> 16);
            out[3 * x + 1] = (unsigned char)(row[x] >> 8);
            out[3 * x + 2] = (unsigned char)row[x];
        }
    }
    return rgb;
}
