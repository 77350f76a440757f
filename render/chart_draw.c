// chart_draw.c: drawing a Chart with cairo (see chart.h). Everything is laid out in points
// (1/72 inch) and scaled to the requested dpi. Tested by tests/test_render_chart.c.
//
// Layout of an x-y chart: the title on top; y tick labels and the rotated y label on the
// left; x tick labels and the x label below; the legend inside the plot where it covers
// the least ink (tried in the corners after the data is drawn), else outside on the right.
#include "chart.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define FONT "DejaVu Sans"
#define TICK_SIZE 8.0   // tick labels, legend, annotations
#define LABEL_SIZE 9.0  // axis labels
#define TITLE_SIZE 10.0
#define TICK_LEN 3.5
#define MAX_MARKED_POINTS 40 // longer series are drawn without markers

// Okabe & Ito's colour-blind-safe palette, in the order the series take it.
static const double palette[PALETTE_SIZE][3] = {
    {0x00 / 255.0, 0x72 / 255.0, 0xB2 / 255.0}, // blue
    {0xD5 / 255.0, 0x5E / 255.0, 0x00 / 255.0}, // vermilion
    {0x00 / 255.0, 0x9E / 255.0, 0x73 / 255.0}, // bluish green
    {0xE6 / 255.0, 0x9F / 255.0, 0x00 / 255.0}, // orange
    {0xCC / 255.0, 0x79 / 255.0, 0xA7 / 255.0}, // reddish purple
    {0x56 / 255.0, 0xB4 / 255.0, 0xE9 / 255.0}, // sky blue
    {0x00 / 255.0, 0x00 / 255.0, 0x00 / 255.0}, // black
    {0xF0 / 255.0, 0xE4 / 255.0, 0x42 / 255.0}, // yellow
};

typedef struct {
    double x0, y0, x1, y1; // y0 is the top edge
} Rect;

typedef struct {
    cairo_t *cr;
    cairo_surface_t *img; // what cr draws on, read back to find free space for labels
    double scale;         // pixels per point
    const Chart *c;
    double W, H;
    Rect plot;
    Axis xa, ya;
    char xlabel[300], ylabel[300]; // with the axis exponent, when there is one
    double xlabel_top;
    int rotate_categories;         // bar charts whose category labels would collide
} Plot;

// --- drawing primitives -------------------------------------------------------------------

static void set_colour(cairo_t *cr, int i, double lighten) {
    double r = 0.27, g = 0.27, b = 0.27; // -1: dark grey
    if (i >= 0) r = palette[i % PALETTE_SIZE][0], g = palette[i % PALETTE_SIZE][1], b = palette[i % PALETTE_SIZE][2];
    cairo_set_source_rgb(cr, r + (1 - r) * lighten, g + (1 - g) * lighten, b + (1 - b) * lighten);
}

static void set_line(cairo_t *cr, LineStyle style, double width) {
    static const struct {
        double dash[6];
        int n;
    } patterns[] = {
        [STYLE_SOLID] = {{0}, 0},
        [STYLE_DASHED] = {{5.0, 3.0}, 2},
        [STYLE_DOTTED] = {{0.8, 2.2}, 2},
        [STYLE_DASHDOT] = {{5.0, 2.0, 1.0, 2.0}, 4},
        [STYLE_LONGDASH] = {{9.0, 3.0}, 2},
        [STYLE_DASHDOTDOT] = {{5.0, 1.8, 1.0, 1.8, 1.0, 1.8}, 6},
        [STYLE_SHORTDASH] = {{2.2, 1.6}, 2},
    };
    cairo_set_line_width(cr, width);
    cairo_set_line_cap(cr, style == STYLE_DOTTED ? CAIRO_LINE_CAP_ROUND : CAIRO_LINE_CAP_BUTT);
    cairo_set_line_join(cr, CAIRO_LINE_JOIN_ROUND);
    cairo_set_dash(cr, patterns[style].n ? patterns[style].dash : NULL, patterns[style].n, 0);
}

static void set_font(cairo_t *cr, double size, int bold) {
    cairo_select_font_face(cr, FONT, CAIRO_FONT_SLANT_NORMAL, bold ? CAIRO_FONT_WEIGHT_BOLD : CAIRO_FONT_WEIGHT_NORMAL);
    cairo_set_font_size(cr, size);
}

static double text_width(cairo_t *cr, const char *s, double size, int bold) {
    set_font(cr, size, bold);
    cairo_text_extents_t e;
    cairo_text_extents(cr, s, &e);
    return e.x_advance;
}

static double text_height(double size) { return 1.17 * size; } // DejaVu ascent + descent

// Draw s with its anchor point (ax, ay) — 0 = left / top, 0.5 = centre, 1 = right / bottom —
// at (x, y), rotated by `angle` radians about that point.
static void draw_text(cairo_t *cr, double x, double y, const char *s, double size, int bold, double ax, double ay,
                      double angle) {
    set_font(cr, size, bold);
    cairo_font_extents_t fe;
    cairo_font_extents(cr, &fe);
    cairo_text_extents_t te;
    cairo_text_extents(cr, s, &te);
    cairo_save(cr);
    cairo_translate(cr, x, y);
    cairo_rotate(cr, angle);
    cairo_move_to(cr, -ax * te.x_advance, fe.ascent - ay * (fe.ascent + fe.descent));
    cairo_show_text(cr, s);
    cairo_restore(cr);
}

static void marker_path(cairo_t *cr, int shape, double x, double y, double r) {
    switch (shape % MARKER_COUNT) {
    case 0: cairo_new_sub_path(cr); cairo_arc(cr, x, y, r, 0, 2 * M_PI); break;
    case 1: cairo_rectangle(cr, x - 0.85 * r, y - 0.85 * r, 1.7 * r, 1.7 * r); break;
    case 2:
        cairo_move_to(cr, x, y - 1.15 * r);
        cairo_line_to(cr, x + r, y + 0.75 * r);
        cairo_line_to(cr, x - r, y + 0.75 * r);
        cairo_close_path(cr);
        break;
    case 3:
        cairo_move_to(cr, x, y - 1.2 * r);
        cairo_line_to(cr, x + r, y);
        cairo_line_to(cr, x, y + 1.2 * r);
        cairo_line_to(cr, x - r, y);
        cairo_close_path(cr);
        break;
    case 4:
        cairo_move_to(cr, x, y + 1.15 * r);
        cairo_line_to(cr, x + r, y - 0.75 * r);
        cairo_line_to(cr, x - r, y - 0.75 * r);
        cairo_close_path(cr);
        break;
    case 5: // pentagon
        for (int k = 0; k < 5; k++) {
            double a = -M_PI / 2 + k * 2 * M_PI / 5;
            if (k == 0) cairo_move_to(cr, x + 1.1 * r * cos(a), y + 1.1 * r * sin(a));
            else cairo_line_to(cr, x + 1.1 * r * cos(a), y + 1.1 * r * sin(a));
        }
        cairo_close_path(cr);
        break;
    default: // hexagon
        for (int k = 0; k < 6; k++) {
            double a = k * M_PI / 3;
            if (k == 0) cairo_move_to(cr, x + r * cos(a), y + r * sin(a));
            else cairo_line_to(cr, x + r * cos(a), y + r * sin(a));
        }
        cairo_close_path(cr);
        break;
    }
}

// A filled marker with a thin white rim, so that overlapping markers stay readable; hollow
// markers (white inside, coloured rim) mark the second machine in a comparison.
static void draw_marker(cairo_t *cr, int shape, int colour, double x, double y, double r, int hollow) {
    marker_path(cr, shape, x, y, r);
    if (hollow) cairo_set_source_rgb(cr, 1, 1, 1);
    else set_colour(cr, colour, 0);
    cairo_fill_preserve(cr);
    if (hollow) set_colour(cr, colour, 0);
    else cairo_set_source_rgb(cr, 1, 1, 1);
    set_line(cr, STYLE_SOLID, hollow ? 1.0 : 0.5);
    cairo_stroke(cr);
}

// Fill the current path: solid bars in full colour, others (the second machine in a
// comparison) lighter, with a dashed outline.
static void draw_swatch(cairo_t *cr, int colour, LineStyle style) {
    set_colour(cr, colour, style == STYLE_SOLID ? 0 : 0.55);
    if (style == STYLE_SOLID) {
        cairo_fill(cr);
        return;
    }
    cairo_fill_preserve(cr);
    set_colour(cr, colour, 0);
    set_line(cr, style, 0.9);
    cairo_stroke(cr);
}

// --- data ranges --------------------------------------------------------------------------

typedef struct {
    double lo, hi;
    int any;
} Range;

static void range_add(Range *r, double v, Scale s) {
    if (!isfinite(v) || (s != SCALE_LINEAR && v <= 0)) return;
    if (!r->any) r->lo = r->hi = v, r->any = 1;
    r->lo = fmin(r->lo, v);
    r->hi = fmax(r->hi, v);
}

static void range_override(Range *r, double lo, double hi) {
    if (isfinite(lo)) r->lo = lo, r->any |= isfinite(hi);
    if (isfinite(hi)) r->hi = hi;
    if (isfinite(lo) && !isfinite(hi) && r->any && r->hi < lo) r->hi = lo;
}

static Range x_range(const Chart *c) {
    Range r = {0};
    for (int i = 0; i < c->n_series; i++)
        for (int k = 0; k < c->series[i].n; k++) range_add(&r, c->series[i].x[k], c->xscale);
    if (c->kind == CHART_ROOFLINE) // every ridge point in view, with some of the flat roof after it
        for (int i = 0; i < c->n_peaks; i++)
            for (int j = 0; j < c->n_bandwidths; j++) {
                range_add(&r, c->peaks[i].value / c->bandwidths[j].value, c->xscale);
                range_add(&r, 3 * c->peaks[i].value / c->bandwidths[j].value, c->xscale);
            }
    range_override(&r, c->xmin, c->xmax);
    return r;
}

static Range y_range(const Chart *c) {
    Range r = {0};
    for (int i = 0; i < c->n_series; i++) {
        const Series *s = &c->series[i];
        for (int k = 0; k < s->n; k++) {
            range_add(&r, s->y[k], c->yscale);
            range_add(&r, s->lo[k], c->yscale);
            range_add(&r, s->hi[k], c->yscale);
        }
    }
    if (c->kind == CHART_BAR && c->yscale == SCALE_LINEAR) range_add(&r, 0, c->yscale);
    for (int i = 0; i < c->n_peaks; i++) // room for the label above the ceiling
        range_add(&r, c->peaks[i].value * (c->yscale == SCALE_LINEAR ? 1.1 : 1.6), c->yscale);
    range_override(&r, c->ymin, c->ymax);
    return r;
}

// --- axes ---------------------------------------------------------------------------------

static double map_x(const Plot *p, double x) { return p->plot.x0 + axis_fraction(&p->xa, x) * (p->plot.x1 - p->plot.x0); }
static double map_y(const Plot *p, double y) { return p->plot.y1 - axis_fraction(&p->ya, y) * (p->plot.y1 - p->plot.y0); }

static double category_centre(const Plot *p, int i) {
    double slot = (p->plot.x1 - p->plot.x0) / p->c->n_categories;
    return p->plot.x0 + (i + 0.5) * slot;
}

// "label (×10⁹)" when the axis shares an exponent.
static void axis_title(char *buf, size_t size, const char *label, const Axis *a) {
    snprintf(buf, size, "%s", label ? label : "");
    if (a->scale != SCALE_LINEAR || a->exponent == 0) return;
    strncat(buf, *buf ? " (×10" : "×10", size - strlen(buf) - 1);
    append_superscript(buf, size, a->exponent);
    if (label && *label) strncat(buf, ")", size - strlen(buf) - 1);
}

// 1 when the major x tick labels do not collide.
static int x_labels_fit(Plot *p) {
    double prev_right = -1e9;
    for (int i = 0; i < p->xa.n; i++) {
        const Tick *t = &p->xa.ticks[i];
        if (!t->major) continue;
        double w = text_width(p->cr, t->label, TICK_SIZE, 0), x = map_x(p, t->value);
        if (x - w / 2 < prev_right + 6) return 0;
        prev_right = x + w / 2;
    }
    return 1;
}

static void choose_x_ticks(Plot *p, Range r) {
    int max_major = (int)fmax(2, (p->plot.x1 - p->plot.x0) / 38);
    for (;; max_major--) {
        axis_ticks(&p->xa, p->c->xscale, r.lo, r.hi, max_major);
        if (max_major <= 2 || x_labels_fit(p)) break;
    }
}

static double widest_label(Plot *p, const Axis *a) {
    double w = 0;
    for (int i = 0; i < a->n; i++)
        if (a->ticks[i].major) w = fmax(w, text_width(p->cr, a->ticks[i].label, TICK_SIZE, 0));
    return w;
}

static double widest_category(Plot *p, char **names, int n) {
    double w = 0;
    for (int i = 0; i < n; i++) w = fmax(w, text_width(p->cr, names[i], TICK_SIZE, 0));
    return w;
}

#define CATEGORY_ANGLE (-35 * M_PI / 180)

// Place the plot rectangle and choose ticks; `right_extra` and `bottom_extra` reserve room
// for a legend outside the plot.
static void layout_xy(Plot *p, Range xr, Range yr, double right_extra, double bottom_extra) {
    const Chart *c = p->c;
    double top = 6 + (c->title ? text_height(TITLE_SIZE) + 4 : 0);
    double labels = TICK_LEN + 3 + text_height(TICK_SIZE) + 4; // from the x axis to the x label
    p->rotate_categories = 0;
    if (c->kind == CHART_BAR) {
        double slot = (p->W - 60 - right_extra) / fmax(1, c->n_categories);
        double w = widest_category(p, c->categories, c->n_categories);
        if (w > slot - 4) {
            p->rotate_categories = 1;
            labels += w * sin(-CATEGORY_ANGLE);
        }
    }
    double bottom = labels + (c->xlabel ? text_height(LABEL_SIZE) + 2 : 0) + bottom_extra;
    p->plot.y0 = top;
    p->plot.y1 = p->H - bottom;
    p->xlabel_top = p->plot.y1 + labels;
    axis_ticks(&p->ya, c->yscale, yr.lo, yr.hi, (int)fmax(2, (p->plot.y1 - p->plot.y0) / 22));
    axis_title(p->ylabel, sizeof p->ylabel, c->ylabel, &p->ya);
    double left = 4 + (p->ylabel[0] ? text_height(LABEL_SIZE) + 4 : 0) + widest_label(p, &p->ya) + 3 + TICK_LEN;
    p->plot.x0 = left;
    p->plot.x1 = p->W - 10 - right_extra;
    if (c->kind != CHART_BAR) {
        choose_x_ticks(p, xr);
        // the last tick label is centred on the right edge: keep it inside the image
        double overhang = 0;
        for (int i = p->xa.n - 1; i >= 0; i--)
            if (p->xa.ticks[i].major) {
                overhang = map_x(p, p->xa.ticks[i].value) + text_width(p->cr, p->xa.ticks[i].label, TICK_SIZE, 0) / 2 -
                           (p->W - 2 - right_extra);
                break;
            }
        if (overhang > 0) {
            p->plot.x1 -= overhang;
            choose_x_ticks(p, xr);
        }
        axis_title(p->xlabel, sizeof p->xlabel, c->xlabel, &p->xa);
    } else {
        snprintf(p->xlabel, sizeof p->xlabel, "%s", c->xlabel ? c->xlabel : "");
    }
}

static void draw_grid(Plot *p) {
    cairo_t *cr = p->cr;
    set_line(cr, STYLE_SOLID, 0.45);
    for (int pass = 0; pass < 2; pass++) { // minor lines first, majors over them
        for (int i = 0; i < p->ya.n; i++) {
            if (p->ya.ticks[i].major != pass) continue;
            double y = map_y(p, p->ya.ticks[i].value);
            cairo_set_source_rgb(cr, pass ? 0.86 : 0.94, pass ? 0.86 : 0.94, pass ? 0.86 : 0.94);
            cairo_move_to(cr, p->plot.x0, y);
            cairo_line_to(cr, p->plot.x1, y);
            cairo_stroke(cr);
        }
        for (int i = 0; p->c->kind != CHART_BAR && i < p->xa.n; i++) {
            if (p->xa.ticks[i].major != pass) continue;
            double x = map_x(p, p->xa.ticks[i].value);
            cairo_set_source_rgb(cr, pass ? 0.86 : 0.94, pass ? 0.86 : 0.94, pass ? 0.86 : 0.94);
            cairo_move_to(cr, x, p->plot.y0);
            cairo_line_to(cr, x, p->plot.y1);
            cairo_stroke(cr);
        }
    }
}

static void draw_axes(Plot *p) {
    cairo_t *cr = p->cr;
    const Chart *c = p->c;
    cairo_set_source_rgb(cr, 0.15, 0.15, 0.15);
    set_line(cr, STYLE_SOLID, 0.8);
    cairo_move_to(cr, p->plot.x0, p->plot.y0);
    cairo_line_to(cr, p->plot.x0, p->plot.y1);
    cairo_line_to(cr, p->plot.x1, p->plot.y1);
    cairo_stroke(cr);
    set_line(cr, STYLE_SOLID, 0.6);
    for (int i = 0; i < p->ya.n; i++) { // y ticks and labels
        const Tick *t = &p->ya.ticks[i];
        double y = map_y(p, t->value), len = t->major ? TICK_LEN : TICK_LEN / 2;
        cairo_move_to(cr, p->plot.x0, y);
        cairo_line_to(cr, p->plot.x0 - len, y);
        cairo_stroke(cr);
        if (t->major) draw_text(cr, p->plot.x0 - TICK_LEN - 3, y, t->label, TICK_SIZE, 0, 1, 0.5, 0);
    }
    double label_top = p->plot.y1 + TICK_LEN + 3;
    if (c->kind == CHART_BAR) { // category labels under the bar groups
        for (int i = 0; i < c->n_categories; i++) {
            double x = category_centre(p, i);
            cairo_move_to(cr, x, p->plot.y1);
            cairo_line_to(cr, x, p->plot.y1 + TICK_LEN);
            cairo_stroke(cr);
            if (p->rotate_categories) draw_text(cr, x + 2, label_top, c->categories[i], TICK_SIZE, 0, 1, 0.5, CATEGORY_ANGLE);
            else draw_text(cr, x, label_top, c->categories[i], TICK_SIZE, 0, 0.5, 0, 0);
        }
    } else {
        for (int i = 0; i < p->xa.n; i++) {
            const Tick *t = &p->xa.ticks[i];
            double x = map_x(p, t->value), len = t->major ? TICK_LEN : TICK_LEN / 2;
            cairo_move_to(cr, x, p->plot.y1);
            cairo_line_to(cr, x, p->plot.y1 + len);
            cairo_stroke(cr);
            if (t->major) draw_text(cr, x, label_top, t->label, TICK_SIZE, 0, 0.5, 0, 0);
        }
    }
    cairo_set_source_rgb(cr, 0, 0, 0);
    if (p->xlabel[0]) draw_text(cr, (p->plot.x0 + p->plot.x1) / 2, p->xlabel_top, p->xlabel, LABEL_SIZE, 0, 0.5, 0, 0);
    if (p->ylabel[0]) draw_text(cr, 4, (p->plot.y0 + p->plot.y1) / 2, p->ylabel, LABEL_SIZE, 0, 0.5, 0, -M_PI / 2);
    if (c->title) draw_text(cr, p->W / 2, 5, c->title, TITLE_SIZE, 1, 0.5, 0, 0);
}

// --- series -------------------------------------------------------------------------------

static int point_ok(const Plot *p, double x, double y) {
    return isfinite(x) && isfinite(y) && (p->c->xscale == SCALE_LINEAR || x > 0) && (p->c->yscale == SCALE_LINEAR || y > 0);
}

static int draws_markers(const Series *s) { return s->marker >= 0 && (s->n <= MAX_MARKED_POINTS || !s->lines); }

// A translucent band between lo and hi, over each run of points that have both (drawn for
// every series before any line, so that no band hides a line).
static void draw_band(Plot *p, const Series *s) {
    cairo_t *cr = p->cr;
    for (int k = 0; k < s->n;) {
        int start = k;
        while (k < s->n && point_ok(p, s->x[k], s->lo[k]) && point_ok(p, s->x[k], s->hi[k])) k++;
        if (k - start >= 2) {
            for (int i = start; i < k; i++) cairo_line_to(cr, map_x(p, s->x[i]), map_y(p, s->hi[i]));
            for (int i = k - 1; i >= start; i--) cairo_line_to(cr, map_x(p, s->x[i]), map_y(p, s->lo[i]));
            cairo_close_path(cr);
            const double *rgb = palette[s->colour % PALETTE_SIZE];
            cairo_set_source_rgba(cr, rgb[0], rgb[1], rgb[2], 0.22); // overlapping bands stay visible
            cairo_fill(cr);
        }
        if (k == start) k++;
    }
}

static void draw_line_series(Plot *p, const Series *s) {
    cairo_t *cr = p->cr;
    if (s->lines) {
        int pen_down = 0;
        for (int k = 0; k < s->n; k++) {
            if (!point_ok(p, s->x[k], s->y[k])) {
                pen_down = 0;
                continue;
            }
            double x = map_x(p, s->x[k]), y = map_y(p, s->y[k]);
            if (pen_down) cairo_line_to(cr, x, y);
            else cairo_move_to(cr, x, y);
            pen_down = 1;
        }
        if (s->marker < 0 && s->style != STYLE_SOLID) {
            // a reference curve: white under its dashes, so that where it coincides with
            // the data it draws over, its pattern still shows
            cairo_set_source_rgb(cr, 1, 1, 1);
            set_line(cr, STYLE_SOLID, 1.6);
            cairo_stroke_preserve(cr);
        }
        set_colour(cr, s->colour, 0);
        set_line(cr, s->style, s->style == STYLE_SOLID ? 1.5 : 1.3);
        cairo_stroke(cr);
    }
    if (!draws_markers(s)) return;
    for (int k = 0; k < s->n; k++)
        if (point_ok(p, s->x[k], s->y[k])) {
            draw_marker(cr, s->marker, s->colour, map_x(p, s->x[k]), map_y(p, s->y[k]), 2.6, s->style != STYLE_SOLID);
        }
}

static void draw_bars(Plot *p) {
    cairo_t *cr = p->cr;
    const Chart *c = p->c;
    double slot = (p->plot.x1 - p->plot.x0) / fmax(1, c->n_categories);
    double group = 0.8 * slot, bar = group / fmax(1, c->n_series);
    double base = c->yscale == SCALE_LINEAR && p->ya.lo <= 0 && p->ya.hi >= 0 ? 0 : p->ya.lo;
    for (int j = 0; j < c->n_series; j++) {
        const Series *s = &c->series[j];
        for (int k = 0; k < s->n; k++) {
            if (!isfinite(s->y[k]) || (c->yscale != SCALE_LINEAR && s->y[k] <= 0)) continue;
            double x = category_centre(p, (int)s->x[k]) - group / 2 + j * bar;
            double y0 = map_y(p, base), y1 = map_y(p, s->y[k]);
            cairo_rectangle(cr, x + 0.4, fmin(y0, y1), bar - 0.8, fabs(y0 - y1));
            draw_swatch(cr, s->colour, s->style);
            if (point_ok(p, 1, s->lo[k]) && point_ok(p, 1, s->hi[k])) { // whisker with caps
                double xc = x + bar / 2, cap = fmin(3, bar / 4);
                cairo_set_source_rgb(cr, 0.1, 0.1, 0.1);
                set_line(cr, STYLE_SOLID, 0.7);
                cairo_move_to(cr, xc, map_y(p, s->lo[k]));
                cairo_line_to(cr, xc, map_y(p, s->hi[k]));
                cairo_move_to(cr, xc - cap, map_y(p, s->lo[k]));
                cairo_line_to(cr, xc + cap, map_y(p, s->lo[k]));
                cairo_move_to(cr, xc - cap, map_y(p, s->hi[k]));
                cairo_line_to(cr, xc + cap, map_y(p, s->hi[k]));
                cairo_stroke(cr);
            }
        }
    }
}

// Fraction of pixels in r (points) that hold ink: anything darker than the grid lines.
static double ink_in(cairo_surface_t *img, double scale, Rect r) {
    cairo_surface_flush(img);
    int w = cairo_image_surface_get_width(img), h = cairo_image_surface_get_height(img);
    int stride = cairo_image_surface_get_stride(img);
    const unsigned char *data = cairo_image_surface_get_data(img);
    int x0 = (int)fmax(0, r.x0 * scale), x1 = (int)fmin(w, r.x1 * scale);
    int y0 = (int)fmax(0, r.y0 * scale), y1 = (int)fmin(h, r.y1 * scale);
    long ink = 0, total = 0;
    for (int y = y0; y < y1; y += 2)
        for (int x = x0; x < x1; x += 2) {
            unsigned v = ((const unsigned *)(data + (size_t)y * stride))[x];
            int r8 = (v >> 16) & 255, g8 = (v >> 8) & 255, b8 = v & 255;
            ink += r8 < 200 || g8 < 200 || b8 < 200;
            total++;
        }
    return total ? (double)ink / total : 1;
}

// --- roofline -------------------------------------------------------------------------------

static double max_ceiling(const Ceiling *list, int n) {
    double m = 0;
    for (int i = 0; i < n; i++) m = fmax(m, list[i].value);
    return m;
}

static void draw_ceilings(Plot *p) {
    cairo_t *cr = p->cr;
    const Chart *c = p->c;
    double top_peak = max_ceiling(c->peaks, c->n_peaks), top_bw = max_ceiling(c->bandwidths, c->n_bandwidths);
    for (int i = 0; i < c->n_bandwidths; i++) { // slopes up to the highest ceiling
        const Ceiling *b = &c->bandwidths[i];
        if (!(b->value > 0)) continue;
        double xa = p->xa.lo, xb = top_peak > 0 ? fmin(p->xa.hi, top_peak / b->value) : p->xa.hi;
        set_colour(cr, -1, 0);
        set_line(cr, b->style, 1.3);
        cairo_move_to(cr, map_x(p, xa), map_y(p, b->value * xa));
        cairo_line_to(cr, map_x(p, xb), map_y(p, b->value * xb));
        cairo_stroke(cr);
        // the label runs along the slope, a little above it, where the line enters the plot
        double x0 = fmax(xa, p->ya.lo / b->value), xl = x0 * pow(xb / x0, 0.06);
        double angle = atan2(map_y(p, b->value * xb) - map_y(p, b->value * x0), map_x(p, xb) - map_x(p, x0));
        draw_text(cr, map_x(p, xl) + 3 * sin(angle), map_y(p, b->value * xl) - 3 * cos(angle), b->label, TICK_SIZE, 0,
                  0, 1, angle);
    }
    for (int i = 0; i < c->n_peaks; i++) { // flat ceilings from the steepest slope on
        const Ceiling *pk = &c->peaks[i];
        if (!(pk->value > 0)) continue;
        // from the plot's left edge (a bar chart's x axis holds categories, not numbers)
        double left = top_bw > 0 ? map_x(p, fmax(p->xa.lo, pk->value / top_bw)) : p->plot.x0;
        set_colour(cr, -1, 0);
        set_line(cr, pk->style, 1.3);
        cairo_move_to(cr, left, map_y(p, pk->value));
        cairo_line_to(cr, p->plot.x1, map_y(p, pk->value));
        cairo_stroke(cr);
        // above the line, or below it when the line runs along the top of the plot
        int above = map_y(p, pk->value) - p->plot.y0 > text_height(TICK_SIZE) + 2;
        draw_text(cr, p->plot.x1 - 3, map_y(p, pk->value) + (above ? -2 : 2), pk->label, TICK_SIZE, 0, 1, above, 0);
    }
    if (c->n_peaks > 0 && c->n_bandwidths > 0 && c->peaks[0].value > 0 && c->bandwidths[0].value > 0) {
        double ridge = c->peaks[0].value / c->bandwidths[0].value;
        set_colour(cr, -1, 0.3);
        set_line(cr, STYLE_DOTTED, 1.0);
        cairo_move_to(cr, map_x(p, ridge), p->plot.y1);
        cairo_line_to(cr, map_x(p, ridge), map_y(p, c->peaks[0].value));
        cairo_stroke(cr);
        char text[64] = "ridge ";
        NumberFormat f = {FMT_SIG, 3};
        numfmt_format(ridge, f, text + strlen(text), sizeof text - strlen(text));
        set_colour(cr, -1, 0);
        int left = map_x(p, ridge) + 3 + text_width(cr, text, TICK_SIZE, 0) > p->plot.x1; // keep it inside
        draw_text(cr, map_x(p, ridge) + (left ? -3 : 3), p->plot.y1 - 3, text, TICK_SIZE, 0, left, 1, 0);
    }
}

static int rects_overlap(Rect a, Rect b) { return a.x0 < b.x1 && b.x0 < a.x1 && a.y0 < b.y1 && b.y0 < a.y1; }
static int rect_inside(Rect a, Rect outer) { return a.x0 >= outer.x0 && a.x1 <= outer.x1 && a.y0 >= outer.y0 && a.y1 <= outer.y1; }

// Label each roofline point beside its marker, on the first side that collides with
// nothing placed so far (other labels and every marker).
static void draw_point_labels(Plot *p) {
    const Chart *c = p->c;
    int cap = 0;
    for (int j = 0; j < c->n_series; j++) cap += c->series[j].n;
    Rect *taken = mallocCheck((size_t)(2 * cap + 1) * sizeof *taken);
    int n_taken = 0;
    for (int j = 0; j < c->n_series; j++)
        for (int k = 0; k < c->series[j].n; k++) {
            double x = map_x(p, c->series[j].x[k]), y = map_y(p, c->series[j].y[k]);
            if (point_ok(p, c->series[j].x[k], c->series[j].y[k])) taken[n_taken++] = (Rect){x - 3, y - 3, x + 3, y + 3};
        }
    static const double side[][4] = { // offset x, offset y, anchor x, anchor y
        {5, 0, 0, 0.5}, {-5, 0, 1, 0.5}, {0, -5, 0.5, 1}, {0, 5, 0.5, 0}, {4, -4, 0, 1}, {4, 4, 0, 0}, {-4, -4, 1, 1}, {-4, 4, 1, 0},
    };
    for (int j = 0; j < c->n_series; j++) {
        const Series *s = &c->series[j];
        for (int k = 0; k < s->n; k++) {
            const char *label = s->point_labels ? s->point_labels[k] : NULL;
            if (!label || !*label || !point_ok(p, s->x[k], s->y[k])) continue;
            double x = map_x(p, s->x[k]), y = map_y(p, s->y[k]);
            double w = text_width(p->cr, label, TICK_SIZE - 0.5, 0), h = text_height(TICK_SIZE - 0.5);
            int best = 0; // the first clear side, else the one over the least ink
            double least = 2;
            for (int i = 0; i < (int)(sizeof side / sizeof side[0]); i++) {
                double lx = x + side[i][0] - side[i][2] * w, ly = y + side[i][1] - side[i][3] * h;
                Rect r = {lx, ly, lx + w, ly + h};
                if (!rect_inside(r, p->plot)) continue;
                double ink = ink_in(p->img, p->scale, r);
                int clear = ink < 0.01;
                for (int t = 0; t < n_taken && clear; t++) clear = !rects_overlap(r, taken[t]);
                if (clear) {
                    best = i;
                    break;
                }
                if (ink < least) least = ink, best = i;
            }
            double lx = x + side[best][0] - side[best][2] * w, ly = y + side[best][1] - side[best][3] * h;
            taken[n_taken++] = (Rect){lx, ly, lx + w, ly + h};
            cairo_set_source_rgb(p->cr, 0.1, 0.1, 0.1);
            draw_text(p->cr, lx, ly, label, TICK_SIZE - 0.5, 0, 0, 0, 0);
        }
    }
    free(taken);
}

// --- legend -------------------------------------------------------------------------------

typedef struct {
    const char *label;
    int colour, marker, swatch; // swatch: a filled box (bars) instead of a line sample
    int line;
    LineStyle style;
} Entry;

typedef struct {
    Entry entries[64];
    double dx[64], dy[64]; // each entry's sample position from the legend's top left corner
    int n;
    double w, h;
    int boxed; // inside the plot: on a white box with a border
} Legend;

#define LEGEND_ROW 11.0
#define LEGEND_PAD 5.0
#define LEGEND_SAMPLE 20.0
#define LEGEND_GAP 14.0

static void legend_collect(Plot *p, Legend *lg) {
    const Chart *c = p->c;
    lg->n = 0;
    if (!c->legend || c->kind == CHART_HEATMAP) return;
    for (int i = 0; i < c->n_series && lg->n < 64; i++) {
        const Series *s = &c->series[i];
        if (!s->in_legend) continue;
        lg->entries[lg->n++] = (Entry){s->label, s->colour, draws_markers(s) ? s->marker : -1, c->kind == CHART_BAR,
                                       s->lines, s->style};
    }
    for (int i = 0; i < c->n_keys && lg->n < 64; i++)
        lg->entries[lg->n++] = (Entry){c->keys[i].label, c->keys[i].colour, -1, c->kind == CHART_BAR, 1, c->keys[i].style};
}

static double entry_width(Plot *p, const Entry *e) { return LEGEND_SAMPLE + 4 + text_width(p->cr, e->label, TICK_SIZE, 0); }

// One entry per row, in a box.
static void legend_stack(Plot *p, Legend *lg) {
    lg->w = 0;
    for (int i = 0; i < lg->n; i++) {
        lg->dx[i] = LEGEND_PAD;
        lg->dy[i] = LEGEND_PAD + i * LEGEND_ROW + 4.5;
        lg->w = fmax(lg->w, 2 * LEGEND_PAD + entry_width(p, &lg->entries[i]));
    }
    lg->h = 2 * LEGEND_PAD + lg->n * LEGEND_ROW - 2;
    lg->boxed = 1;
}

// Entries side by side in rows at most max_w wide, centred, without a box (below the plot).
static void legend_flow(Plot *p, Legend *lg, double max_w) {
    double x = 0, row_w[64] = {0};
    int row = 0, row_of[64];
    for (int i = 0; i < lg->n; i++) {
        double w = entry_width(p, &lg->entries[i]);
        if (x > 0 && x + w > max_w) row++, x = 0;
        lg->dx[i] = x;
        lg->dy[i] = row * LEGEND_ROW + 4.5;
        row_of[i] = row;
        x += w + LEGEND_GAP;
        row_w[row] = x - LEGEND_GAP;
    }
    for (int i = 0; i < lg->n; i++) lg->dx[i] += (max_w - row_w[row_of[i]]) / 2;
    lg->w = max_w;
    lg->h = (row + 1) * LEGEND_ROW;
    lg->boxed = 0;
}

static void draw_legend(Plot *p, const Legend *lg, double x, double y) {
    cairo_t *cr = p->cr;
    if (lg->boxed) {
        cairo_rectangle(cr, x, y, lg->w, lg->h);
        cairo_set_source_rgb(cr, 1, 1, 1);
        cairo_fill_preserve(cr);
        cairo_set_source_rgb(cr, 0.75, 0.75, 0.75);
        set_line(cr, STYLE_SOLID, 0.5);
        cairo_stroke(cr);
    }
    for (int i = 0; i < lg->n; i++) {
        const Entry *e = &lg->entries[i];
        double cy = y + lg->dy[i], sx = x + lg->dx[i];
        if (e->swatch) {
            cairo_rectangle(cr, sx + 4, cy - 4, LEGEND_SAMPLE - 8, 8);
            draw_swatch(cr, e->colour, e->style);
        } else {
            if (e->line) {
                set_colour(cr, e->colour, 0);
                set_line(cr, e->style, 1.5);
                cairo_move_to(cr, sx, cy);
                cairo_line_to(cr, sx + LEGEND_SAMPLE, cy);
                cairo_stroke(cr);
            }
            if (e->marker >= 0) draw_marker(cr, e->marker, e->colour, sx + LEGEND_SAMPLE / 2, cy, 2.6, e->style != STYLE_SOLID);
        }
        cairo_set_source_rgb(cr, 0.1, 0.1, 0.1);
        draw_text(cr, sx + LEGEND_SAMPLE + 4, cy, e->label, TICK_SIZE, 0, 0, 0.5, 0);
    }
}

// The least-covered of eight places inside the plot (corners first, then the middles of
// the edges); 0 when even that one covers data.
static int place_legend_inside(Plot *p, const Legend *lg, double *lx, double *ly) {
    double inset = 5, left = p->plot.x0 + inset, right = p->plot.x1 - inset - lg->w;
    double top = p->plot.y0 + inset, bottom = p->plot.y1 - inset - lg->h;
    double centre = (left + right) / 2, middle = (top + bottom) / 2;
    double places[8][2] = {{right, top},    {left, top},    {right, bottom}, {left, bottom},
                           {centre, top}, {centre, bottom}, {right, middle}, {left, middle}};
    double best = 2;
    for (int i = 0; i < 8; i++) {
        Rect r = {places[i][0], places[i][1], places[i][0] + lg->w, places[i][1] + lg->h};
        if (r.x0 < p->plot.x0 || r.y1 > p->plot.y1) continue;
        double ink = ink_in(p->img, p->scale, r);
        if (ink < best - 1e-9) best = ink, *lx = r.x0, *ly = r.y0;
    }
    return best < 0.002;
}

// --- x-y charts: line, bar, roofline ------------------------------------------------------

static void draw_xy_body(Plot *p) {
    cairo_t *cr = p->cr;
    const Chart *c = p->c;
    cairo_set_source_rgb(cr, 1, 1, 1);
    cairo_paint(cr);
    draw_grid(p);
    cairo_save(cr);
    cairo_rectangle(cr, p->plot.x0 - 4, p->plot.y0 - 4, p->plot.x1 - p->plot.x0 + 8, p->plot.y1 - p->plot.y0 + 8);
    cairo_clip(cr);
    if (c->kind == CHART_BAR) {
        draw_bars(p);
        draw_ceilings(p); // over the bars, which it is read against
    } else {
        draw_ceilings(p);
        for (int i = 0; i < c->n_series; i++) draw_band(p, &c->series[i]);
        for (int i = 0; i < c->n_series; i++) draw_line_series(p, &c->series[i]);
        if (c->kind == CHART_ROOFLINE) draw_point_labels(p);
    }
    cairo_restore(cr);
    draw_axes(p);
}

static void draw_no_data(Plot *p) {
    cairo_set_source_rgb(p->cr, 1, 1, 1);
    cairo_paint(p->cr);
    cairo_set_source_rgb(p->cr, 0.4, 0.4, 0.4);
    if (p->c->title) draw_text(p->cr, p->W / 2, 5, p->c->title, TITLE_SIZE, 1, 0.5, 0, 0);
    draw_text(p->cr, p->W / 2, p->H / 2, "no data", LABEL_SIZE, 0, 0.5, 0.5, 0);
}

static void draw_xy(Plot *p) {
    const Chart *c = p->c;
    Range xr = x_range(c), yr = y_range(c);
    if (c->kind == CHART_BAR) xr = (Range){0, 1, c->n_categories > 0};
    if (!xr.any || !yr.any) {
        draw_no_data(p);
        return;
    }
    Legend lg;
    legend_collect(p, &lg);
    legend_stack(p, &lg);
    layout_xy(p, xr, yr, 0, 0);
    draw_xy_body(p);
    if (lg.n == 0) return;
    double lx = 0, ly = 0;
    if (place_legend_inside(p, &lg, &lx, &ly)) {
        draw_legend(p, &lg, lx, ly);
        return;
    }
    // no free place inside: redraw with the legend on the right, or below when it is wide
    if (lg.w <= 0.3 * p->W) {
        layout_xy(p, xr, yr, lg.w + 6, 0);
        draw_xy_body(p);
        draw_legend(p, &lg, p->W - 4 - lg.w, p->plot.y0);
        return;
    }
    legend_flow(p, &lg, p->W - 20);
    layout_xy(p, xr, yr, 0, lg.h + 4);
    draw_xy_body(p);
    draw_legend(p, &lg, 10, p->H - lg.h - 2);
}

// --- heatmap ------------------------------------------------------------------------------

// viridis (perceptually uniform, colour-blind safe), sampled at t = 0, 0.1, ..., 1 and interpolated
static void viridis(double t, double rgb[3]) {
    static const double stops[11][3] = {
        {0.267, 0.005, 0.329}, {0.283, 0.141, 0.458}, {0.254, 0.265, 0.530}, {0.207, 0.372, 0.553},
        {0.164, 0.471, 0.558}, {0.128, 0.567, 0.551}, {0.135, 0.659, 0.518}, {0.267, 0.749, 0.441},
        {0.478, 0.821, 0.318}, {0.741, 0.873, 0.150}, {0.993, 0.906, 0.144},
    };
    double u = fmin(1, fmax(0, t)) * 10;
    int k = (int)fmin(9, floor(u));
    double f = u - k;
    for (int i = 0; i < 3; i++) rgb[i] = stops[k][i] + (stops[k + 1][i] - stops[k][i]) * f;
}

static void z_range(const Chart *c, double *lo, double *hi) {
    Range r = {0};
    for (int i = 0; i < c->n_rows * c->n_categories; i++) range_add(&r, c->z[i], c->zscale);
    if (!r.any) r = (Range){0, 1, 1};
    range_override(&r, c->zmin, c->zmax);
    *lo = r.lo;
    *hi = r.hi;
}

static void draw_colour_bar(Plot *p, const Axis *za, double x, double bar_w) {
    cairo_t *cr = p->cr;
    int steps = 64;
    double h = p->plot.y1 - p->plot.y0;
    for (int i = 0; i < steps; i++) {
        double rgb[3];
        viridis((i + 0.5) / steps, rgb);
        cairo_set_source_rgb(cr, rgb[0], rgb[1], rgb[2]);
        cairo_rectangle(cr, x, p->plot.y1 - (i + 1) * h / steps, bar_w, h / steps + 0.3);
        cairo_fill(cr);
    }
    cairo_set_source_rgb(cr, 0.15, 0.15, 0.15);
    set_line(cr, STYLE_SOLID, 0.6);
    cairo_rectangle(cr, x, p->plot.y0, bar_w, h);
    cairo_stroke(cr);
    double label_w = 0;
    for (int i = 0; i < za->n; i++) {
        double y = p->plot.y1 - axis_fraction(za, za->ticks[i].value) * h;
        cairo_move_to(cr, x + bar_w, y);
        cairo_line_to(cr, x + bar_w + TICK_LEN, y);
        cairo_stroke(cr);
        draw_text(cr, x + bar_w + TICK_LEN + 2, y, za->ticks[i].label, TICK_SIZE, 0, 0, 0.5, 0);
        label_w = fmax(label_w, text_width(cr, za->ticks[i].label, TICK_SIZE, 0));
    }
    char title[300];
    axis_title(title, sizeof title, p->c->zlabel, za);
    if (title[0])
        draw_text(cr, x + bar_w + TICK_LEN + 4 + label_w + 2, (p->plot.y0 + p->plot.y1) / 2, title, LABEL_SIZE, 0, 0.5,
                  0, -M_PI / 2);
}

// Label every k-th category so that labels of size `extent` never collide in cells of `cell`.
static int label_stride(double extent, double cell) { return (int)fmax(1, ceil((extent + 4) / fmax(cell, 1e-9))); }

static void draw_heatmap(Plot *p) {
    cairo_t *cr = p->cr;
    const Chart *c = p->c;
    cairo_set_source_rgb(cr, 1, 1, 1);
    cairo_paint(cr);
    if (c->n_rows == 0 || c->n_categories == 0) {
        draw_no_data(p);
        return;
    }
    double zlo, zhi;
    z_range(c, &zlo, &zhi);
    Axis za;
    double bar_w = 11;
    axis_ticks(&za, c->zscale, zlo, zhi, 6);
    if (isfinite(c->zmin) && isfinite(c->zmax)) za.lo = c->zmin, za.hi = c->zmax; // keep a stated range exact
    double top = 6 + (c->title ? text_height(TITLE_SIZE) + 4 : 0);
    double right = 12 + bar_w + TICK_LEN + 2 + widest_label(p, &za) + (c->zlabel ? 4 + text_height(LABEL_SIZE) : 0) + 4;
    double left = 4 + (c->ylabel ? text_height(LABEL_SIZE) + 4 : 0) + widest_category(p, c->rows, c->n_rows) + 4;
    // column labels wider than their cells slant, as a bar chart's do (given at most a third
    // of the height: longer ones run off the image rather than squash the cells)
    double cw = (p->W - right - left) / c->n_categories, widest = widest_category(p, c->categories, c->n_categories);
    int slant = widest > cw - 4;
    double labels = 4 + (slant ? fmin(widest * sin(-CATEGORY_ANGLE), p->H / 3) + 4 : text_height(TICK_SIZE)) + 4;
    double bottom = labels + (c->xlabel ? text_height(LABEL_SIZE) + 2 : 0);
    p->plot = (Rect){left, top, p->W - right, p->H - bottom};
    double ch = (p->plot.y1 - p->plot.y0) / c->n_rows;
    for (int r = 0; r < c->n_rows; r++)
        for (int k = 0; k < c->n_categories; k++) {
            double v = c->z[(size_t)r * c->n_categories + k], x = p->plot.x0 + k * cw, y = p->plot.y0 + r * ch;
            double rgb[3] = {0.93, 0.93, 0.93};
            int shown = isfinite(v) && (c->zscale == SCALE_LINEAR || v > 0); // a log scale has no place for v <= 0
            if (shown) viridis(axis_fraction(&za, v), rgb);
            cairo_set_source_rgb(cr, rgb[0], rgb[1], rgb[2]);
            cairo_rectangle(cr, x, y, cw + 0.3, ch + 0.3);
            cairo_fill(cr);
            if (!shown) continue;
            char text[48];
            numfmt_format(v, c->zformat, text, sizeof text);
            if (text_width(cr, text, TICK_SIZE - 1, 0) + 4 > cw || ch < text_height(TICK_SIZE - 1) + 2) continue;
            double luminance = 0.2126 * rgb[0] + 0.7152 * rgb[1] + 0.0722 * rgb[2];
            double ink = luminance < 0.45 ? 1 : 0;
            cairo_set_source_rgb(cr, ink, ink, ink);
            draw_text(cr, x + cw / 2, y + ch / 2, text, TICK_SIZE - 1, 0, 0.5, 0.5, 0);
        }
    cairo_set_source_rgb(cr, 0.15, 0.15, 0.15);
    set_line(cr, STYLE_SOLID, 0.6);
    cairo_rectangle(cr, p->plot.x0, p->plot.y0, p->plot.x1 - p->plot.x0, p->plot.y1 - p->plot.y0);
    cairo_stroke(cr);
    int xs = slant ? label_stride(text_height(TICK_SIZE) / sin(-CATEGORY_ANGLE), cw) : label_stride(widest, cw);
    for (int k = 0; k < c->n_categories; k += xs) {
        double x = p->plot.x0 + (k + 0.5) * cw;
        if (slant) draw_text(cr, x + 2, p->plot.y1 + 6, c->categories[k], TICK_SIZE, 0, 1, 0.5, CATEGORY_ANGLE);
        else draw_text(cr, x, p->plot.y1 + 4, c->categories[k], TICK_SIZE, 0, 0.5, 0, 0);
    }
    int ys = label_stride(text_height(TICK_SIZE) - 4, ch);
    for (int r = 0; r < c->n_rows; r += ys)
        draw_text(cr, p->plot.x0 - 4, p->plot.y0 + (r + 0.5) * ch, c->rows[r], TICK_SIZE, 0, 1, 0.5, 0);
    draw_colour_bar(p, &za, p->plot.x1 + 12, bar_w);
    cairo_set_source_rgb(cr, 0, 0, 0);
    if (c->xlabel) draw_text(cr, (p->plot.x0 + p->plot.x1) / 2, p->H - 3, c->xlabel, LABEL_SIZE, 0, 0.5, 1, 0);
    if (c->ylabel) draw_text(cr, 4, (p->plot.y0 + p->plot.y1) / 2, c->ylabel, LABEL_SIZE, 0, 0.5, 0, -M_PI / 2);
    if (c->title) draw_text(cr, p->W / 2, 5, c->title, TITLE_SIZE, 1, 0.5, 0, 0);
}

// --- entry point ----------------------------------------------------------------------------

cairo_surface_t *chart_draw(const Chart *c, double width_pt, double height_pt, double dpi) {
    double scale = dpi / 72.0;
    int w = (int)lround(width_pt * scale), h = (int)lround(height_pt * scale);
    cairo_surface_t *img = cairo_image_surface_create(CAIRO_FORMAT_RGB24, w, h);
    cairo_t *cr = cairo_create(img);
    cairo_scale(cr, scale, scale);
    cairo_font_options_t *fo = cairo_font_options_create();
    cairo_font_options_set_hint_metrics(fo, CAIRO_HINT_METRICS_OFF); // widths that scale with dpi
    cairo_set_font_options(cr, fo);
    cairo_font_options_destroy(fo);
    Plot p = {.cr = cr, .img = img, .scale = scale, .c = c, .W = width_pt, .H = height_pt};
    if (c->kind == CHART_HEATMAP) draw_heatmap(&p);
    else draw_xy(&p);
    cairo_destroy(cr);
    cairo_surface_flush(img);
    return img;
}
