// chart.h: the report's charts, drawn with cairo: line charts (several series, markers,
// spread bands, dashed reference curves, linear / log / log2 axes), grouped bar charts,
// heatmaps with a colour bar, and roofline charts (log-log, bandwidth slopes and compute
// ceilings, labelled points). A Chart holds plain data — it knows nothing about CSVs or
// templates (report.c builds them) — and is drawn in points onto an RGB24 image at a
// given dpi, which is then saved as PNG and embedded in the PDF.
//
//   Chart c;
//   chart_init(&c, CHART_LINE);
//   Series *s = chart_add_series(&c, "cache");
//   series_add(s, 256, 1.5);
//   cairo_surface_t *img = chart_draw(&c, 470, 260, 200);   // 1306 x 722 pixels
//   chart_write_png(img, "out/x/figures/kv.png", &err);
//   cairo_surface_destroy(img);
//   chart_free(&c);
#pragma once

#include <cairo.h>

#include "common.h"
#include "numfmt.h"
#include "ticks.h"

typedef enum { CHART_LINE, CHART_BAR, CHART_HEATMAP, CHART_ROOFLINE } ChartKind;
// Dotted marks reference curves in a comparison; the others tell machines apart (report_parts.h).
typedef enum { STYLE_SOLID, STYLE_DASHED, STYLE_DOTTED, STYLE_DASHDOT, STYLE_LONGDASH, STYLE_DASHDOTDOT, STYLE_SHORTDASH } LineStyle;

#define PALETTE_SIZE 8
#define MARKER_COUNT 7

typedef struct {
    char *label;
    int n, cap;
    double *x, *y;       // (n) bar charts: x is the category index
    double *lo, *hi;     // (n) spread drawn as a band (line) or whiskers (bar); NAN where none
    char **point_labels; // (n) roofline point labels, NULL entries where none
    int colour;          // palette index
    LineStyle style;
    int marker;          // marker shape, -1 for none
    int lines;           // 1: join the points (line charts); roofline points are not joined
    int in_legend;
} Series;

typedef struct {
    double value;
    char *label;
    LineStyle style;
} Ceiling;

typedef struct { // an extra legend entry that explains a line style ("dashed: theory")
    char *label;
    int colour; // -1: dark grey
    LineStyle style;
} LegendKey;

typedef struct {
    ChartKind kind;
    char *title, *xlabel, *ylabel, *zlabel;
    Scale xscale, yscale;
    double xmin, xmax, ymin, ymax; // NAN: from the data
    int legend;                    // 0: none
    Series *series;
    int n_series;
    char **categories; // bar: x categories; heatmap: columns
    int n_categories;
    char **rows;       // heatmap: rows, drawn top to bottom
    int n_rows;
    double *z;         // heatmap (n_rows, n_categories); NAN where no value
    double zmin, zmax; // heatmap colour range; NAN: from the data
    Scale zscale;      // heatmap colour scale: linear, or log for values over decades
    NumberFormat zformat;
    Ceiling *peaks;      // roofline compute ceilings (y = value)
    int n_peaks;
    Ceiling *bandwidths; // roofline bandwidth slopes (y = value · x)
    int n_bandwidths;
    LegendKey *keys;
    int n_keys;
} Chart;

void chart_init(Chart *c, ChartKind kind);
void chart_free(Chart *c);
// A new series with the next palette colour and marker.
Series *chart_add_series(Chart *c, const char *label);
void series_add(Series *s, double x, double y);
void series_add_full(Series *s, double x, double y, double lo, double hi, const char *point_label);
// A measured series (with markers, in the legend) that an earlier one hides — same x, y within
// 0.5% at every point — joins that one's legend entry ("A = B") and takes its colour, marker and
// style, so that no drawn series is missing from the legend because it lies under another.
void chart_join_coinciding(Chart *c);
// Index of category `name` in the list, appended when new.
int category_index(char ***list, int *n, const char *name);
// Allocate the heatmap grid (after its categories and rows are known), filled with NAN.
void chart_alloc_grid(Chart *c);
void chart_add_ceiling(Chart *c, int is_peak, double value, const char *label, LineStyle style);
void chart_add_key(Chart *c, const char *label, int colour, LineStyle style);

// Draw onto a new RGB24 image of width_pt × height_pt points at `dpi`.
cairo_surface_t *chart_draw(const Chart *c, double width_pt, double height_pt, double dpi);
// Save as PNG, atomically (temp file + rename).
int chart_write_png(cairo_surface_t *img, const char *path, Error *err);
// The image as packed 8-bit RGB rows (malloc'd), as libharu wants raw images.
unsigned char *image_rgb(cairo_surface_t *img);
