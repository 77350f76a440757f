// test_render_chart.c: chart drawing (render/chart.c, render/chart_draw.c). Images have the
// size the dpi asks for and are saved as 8-bit RGB PNGs (no alpha: libharu 2.3 would store
// an alpha mask uncompressed); series are drawn in their palette colours; the legend hides
// no data; heatmap cells follow the colour map, linear or log; a line chart shows its ceiling; and awkward
// data (empty, NaN, infinities, values <= 0 on log axes, one point, a huge range, many
// categories) draws without crashing.
// Run: make build/tests/test_render_chart && ./build/tests/test_render_chart
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "chart.h"
#include "test_render_util.h"

// Pixels within `tol` of an RGB colour.
static long count_colour(cairo_surface_t *img, int r, int g, int b, int tol) {
    cairo_surface_flush(img);
    int w = cairo_image_surface_get_width(img), h = cairo_image_surface_get_height(img);
    int stride = cairo_image_surface_get_stride(img);
    const unsigned char *data = cairo_image_surface_get_data(img);
    long n = 0;
    for (int y = 0; y < h; y++)
        for (int x = 0; x < w; x++) {
            uint32_t v = ((const uint32_t *)(data + (size_t)y * stride))[x];
            n += abs((int)((v >> 16) & 255) - r) <= tol && abs((int)((v >> 8) & 255) - g) <= tol && abs((int)(v & 255) - b) <= tol;
        }
    return n;
}

static void pixel(cairo_surface_t *img, int x, int y, int rgb[3]) {
    cairo_surface_flush(img);
    const unsigned char *data = cairo_image_surface_get_data(img);
    uint32_t v = ((const uint32_t *)(data + (size_t)y * cairo_image_surface_get_stride(img)))[x];
    rgb[0] = (v >> 16) & 255, rgb[1] = (v >> 8) & 255, rgb[2] = v & 255;
}

// Two series crossing the plot from bottom left to top right, in blue and vermilion.
static void diagonal_chart(Chart *c, int legend) {
    chart_init(c, CHART_LINE);
    c->legend = legend;
    c->xlabel = strdup("x (units)");
    c->ylabel = strdup("y (units)");
    for (int j = 0; j < 2; j++) {
        Series *s = chart_add_series(c, j ? "second series" : "first series");
        for (int i = 0; i <= 60; i++) series_add(s, i, i + 8 * j);
    }
}

static void test_png_size_and_format(void **state) {
    (void)state;
    Chart c;
    diagonal_chart(&c, 1);
    cairo_surface_t *img = chart_draw(&c, 470, 260, 200);
    assert_int_equal(cairo_image_surface_get_format(img), CAIRO_FORMAT_RGB24);
    assert_int_equal(cairo_image_surface_get_width(img), 1306); // 470 pt at 200 dpi
    assert_int_equal(cairo_image_surface_get_height(img), 722);
    char *dir = make_scratch_dir(), path[512];
    snprintf(path, sizeof path, "%s/c.png", dir);
    Error err;
    assert_int_equal(chart_write_png(img, path, &err), 0);
    FILE *f = fopenCheck(path, "rb");
    unsigned char head[33];
    assert_int_equal(fread(head, 1, sizeof head, f), sizeof head);
    fclose(f);
    assert_memory_equal(head, "\x89PNG\r\n\x1a\n", 8);
    assert_memory_equal(head + 12, "IHDR", 4);
    uint32_t w = (uint32_t)head[16] << 24 | head[17] << 16 | head[18] << 8 | head[19];
    uint32_t h = (uint32_t)head[20] << 24 | head[21] << 16 | head[22] << 8 | head[23];
    assert_int_equal(w, 1306);
    assert_int_equal(h, 722);
    assert_int_equal(head[24], 8); // bit depth
    assert_int_equal(head[25], 2); // colour type 2: RGB, no alpha
    cairo_surface_t *back = cairo_image_surface_create_from_png(path);
    assert_int_equal(cairo_surface_status(back), CAIRO_STATUS_SUCCESS);
    assert_int_equal(cairo_image_surface_get_width(back), 1306);
    cairo_surface_destroy(back);
    // the raw RGB for libharu holds the same pixels
    unsigned char *rgb = image_rgb(img);
    int p[3];
    for (int k = 0; k < 50; k++) {
        int x = (k * 997) % 1306, y = (k * 613) % 722;
        pixel(img, x, y, p);
        const unsigned char *q = rgb + ((size_t)y * 1306 + x) * 3;
        assert_true(q[0] == p[0] && q[1] == p[1] && q[2] == p[2]);
    }
    free(rgb);
    cairo_surface_destroy(img);
    img = chart_draw(&c, 470, 260, 300); // another dpi scales the pixels, not the layout
    assert_int_equal(cairo_image_surface_get_width(img), 1958);
    cairo_surface_destroy(img);
    chart_free(&c);
    remove_tree(dir);
}

static void test_series_colours(void **state) {
    (void)state;
    Chart c;
    diagonal_chart(&c, 0);
    cairo_surface_t *img = chart_draw(&c, 470, 260, 200);
    assert_true(count_colour(img, 0x00, 0x72, 0xB2, 6) > 2000); // Okabe-Ito blue
    assert_true(count_colour(img, 0xD5, 0x5E, 0x00, 6) > 2000); // vermilion
    assert_true(count_colour(img, 0x00, 0x9E, 0x73, 6) == 0);   // no third series
    cairo_surface_destroy(img);
    chart_free(&c);
}

// A series drawn exactly under another joins its legend entry and takes its look; one that
// differs by more than half a percent anywhere keeps its own.
static void test_coinciding_series_share_an_entry(void **state) {
    (void)state;
    Chart c;
    chart_init(&c, CHART_LINE);
    const char *names[] = {"full", "window", "window + sinks", "apart"};
    const double scale[] = {1.0, 0.5, 0.501, 0.6};
    for (int i = 0; i < 4; i++) {
        Series *s = chart_add_series(&c, names[i]);
        for (int x = 1; x <= 4; x++) series_add(s, x, scale[i] * 100 * x);
    }
    chart_join_coinciding(&c);
    assert_string_equal(c.series[0].label, "full");
    assert_string_equal(c.series[1].label, "window = window + sinks");
    assert_true(c.series[1].in_legend);
    assert_false(c.series[2].in_legend);
    assert_int_equal(c.series[2].colour, c.series[1].colour);
    assert_int_equal(c.series[2].marker, c.series[1].marker);
    assert_true(c.series[3].in_legend); // 20% apart: its own entry
    assert_string_equal(c.series[3].label, "apart");
    chart_free(&c);
}

static void test_legend_hides_no_data(void **state) {
    (void)state;
    Chart plain, with;
    diagonal_chart(&plain, 0);
    diagonal_chart(&with, 1);
    cairo_surface_t *a = chart_draw(&plain, 470, 260, 200), *b = chart_draw(&with, 470, 260, 200);
    // the legend adds a short sample line per series; if it covered a series there would be fewer
    for (int k = 0; k < 2; k++) {
        int r = k ? 0xD5 : 0x00, g = k ? 0x5E : 0x72, bl = k ? 0x00 : 0xB2;
        long without = count_colour(a, r, g, bl, 6), with_legend = count_colour(b, r, g, bl, 6);
        assert_true(with_legend >= without);
        assert_true(with_legend < without * 1.1);
    }
    cairo_surface_destroy(a);
    cairo_surface_destroy(b);
    chart_free(&plain);
    chart_free(&with);
}

static void test_heatmap_colours(void **state) {
    (void)state;
    Chart c;
    chart_init(&c, CHART_HEATMAP);
    category_index(&c.categories, &c.n_categories, "low");
    category_index(&c.categories, &c.n_categories, "high");
    category_index(&c.rows, &c.n_rows, "r");
    chart_alloc_grid(&c);
    c.z[0] = 0, c.z[1] = 1;
    c.zmin = 0, c.zmax = 1;
    cairo_surface_t *img = chart_draw(&c, 400, 200, 200);
    int w = cairo_image_surface_get_width(img), h = cairo_image_surface_get_height(img), p[3];
    // well inside each cell, above its number: the low cell is dark purple, the high one yellow
    pixel(img, w / 4, h / 4, p);
    assert_true(p[0] < 110 && p[1] < 40 && p[2] > 60);
    pixel(img, w * 3 / 5, h / 4, p);
    assert_true(p[0] > 220 && p[1] > 200 && p[2] < 80);
    cairo_surface_destroy(img);
    chart_free(&c);
}

// zscale: log colours by the logarithm: 100 between 1 and 10⁴ is viridis' middle
// (0.128, 0.567, 0.551); linearly it would be near the dark end. A value <= 0 has no place on
// a log scale and stays grey (0.93), and column labels wider than their cells still draw.
static void test_heatmap_log_colours(void **state) {
    (void)state;
    for (int log_scale = 0; log_scale < 2; log_scale++) {
        Chart c;
        chart_init(&c, CHART_HEATMAP);
        c.zscale = log_scale ? SCALE_LOG10 : SCALE_LINEAR;
        static const char *names[] = {"a long machine name, measured", "another long machine name", "a third one here",
                                      "and a fourth"};
        for (int k = 0; k < 4; k++) category_index(&c.categories, &c.n_categories, names[k]);
        category_index(&c.rows, &c.n_rows, "r");
        chart_alloc_grid(&c);
        c.z[0] = 1, c.z[1] = 100, c.z[2] = 1e4, c.z[3] = log_scale ? -1 : 0;
        cairo_surface_t *img = chart_draw(&c, 400, 200, 200);
        long middle = count_colour(img, 33, 145, 141, 6), grey = count_colour(img, 237, 237, 237, 2);
        if (log_scale) { // a cell is about 200 × 400 pixels; the colour bar's band of each colour a few hundred
            assert_true(middle > 20000);
            assert_true(grey > 20000);
        } else {
            assert_true(middle < 2000);
            assert_true(grey < 2000);
        }
        cairo_surface_destroy(img);
        chart_free(&c);
    }
}

static void test_awkward_data(void **state) {
    (void)state;
    Chart c;
    cairo_surface_t *img;
    chart_init(&c, CHART_LINE); // nothing at all
    img = chart_draw(&c, 300, 200, 200);
    assert_int_equal(cairo_image_surface_get_width(img), 833);
    cairo_surface_destroy(img);
    chart_free(&c);

    chart_init(&c, CHART_LINE); // NaN, infinities and non-positive values on log axes
    c.xscale = SCALE_LOG2;
    c.yscale = SCALE_LOG10;
    Series *s = chart_add_series(&c, "odd");
    series_add(s, 0, 1);
    series_add(s, -4, 5);
    series_add(s, 2, NAN);
    series_add(s, INFINITY, 3);
    series_add(s, 4, -1);
    series_add(s, 8, 1e-300);
    series_add(s, 16, 1e300);
    img = chart_draw(&c, 300, 200, 200);
    cairo_surface_destroy(img);
    chart_free(&c);

    chart_init(&c, CHART_LINE); // one point; identical values
    series_add(chart_add_series(&c, "one"), 3, 3);
    img = chart_draw(&c, 300, 200, 200);
    assert_true(count_colour(img, 0x00, 0x72, 0xB2, 6) > 10); // its marker is drawn
    cairo_surface_destroy(img);
    chart_free(&c);

    chart_init(&c, CHART_BAR); // many long categories: labels turn, nothing overflows
    Series *b = chart_add_series(&c, "bars");
    for (int i = 0; i < 200; i++) {
        char name[64];
        snprintf(name, sizeof name, "a rather long category %d", i);
        series_add_full(b, category_index(&c.categories, &c.n_categories, name), i, i - 1, i + 1, NULL);
    }
    img = chart_draw(&c, 470, 260, 200);
    cairo_surface_destroy(img);
    chart_free(&c);

    chart_init(&c, CHART_HEATMAP); // no values at all
    category_index(&c.categories, &c.n_categories, "x");
    category_index(&c.rows, &c.n_rows, "y");
    chart_alloc_grid(&c);
    img = chart_draw(&c, 300, 200, 200);
    cairo_surface_destroy(img);
    chart_free(&c);

    chart_init(&c, CHART_ROOFLINE); // ceilings of zero, no points
    chart_add_ceiling(&c, 1, 0, "none", STYLE_SOLID);
    chart_add_ceiling(&c, 0, 0, "none", STYLE_SOLID);
    img = chart_draw(&c, 300, 200, 200);
    cairo_surface_destroy(img);
    chart_free(&c);
}

static void test_roofline(void **state) {
    (void)state;
    Chart c;
    chart_init(&c, CHART_ROOFLINE);
    chart_add_ceiling(&c, 1, 1e12, "peak 1 TFLOP/s", STYLE_SOLID);
    chart_add_ceiling(&c, 0, 1e11, "100 GB/s", STYLE_SOLID);
    Series *s = chart_add_series(&c, "points");
    series_add_full(s, 0.5, 4e10, NAN, NAN, "decode");
    series_add_full(s, 100, 8e11, NAN, NAN, "prefill");
    cairo_surface_t *img = chart_draw(&c, 470, 260, 200);
    assert_true(count_colour(img, 0x45, 0x45, 0x45, 8) > 1500); // the roof, in dark grey
    assert_true(count_colour(img, 0x00, 0x72, 0xB2, 6) > 40);   // both points
    cairo_surface_destroy(img);
    chart_free(&c);
}

// A line chart with a flat ceiling above its data (a measured peak): the y axis stretches
// to show it and it is drawn across the plot in the roof's dark grey.
static void test_line_ceiling(void **state) {
    (void)state;
    long grey[2];
    for (int with_peak = 0; with_peak < 2; with_peak++) {
        Chart c;
        chart_init(&c, CHART_LINE);
        Series *s = chart_add_series(&c, "rate");
        for (int i = 0; i < 5; i++) series_add(s, 128 << i, 50 + 10 * i);
        if (with_peak) chart_add_ceiling(&c, 1, 150, "sgemm 150 GFLOP/s", STYLE_SOLID);
        cairo_surface_t *img = chart_draw(&c, 470, 260, 200);
        grey[with_peak] = count_colour(img, 0x45, 0x45, 0x45, 8);
        cairo_surface_destroy(img);
        chart_free(&c);
    }
    assert_true(grey[1] - grey[0] > 1500); // a line 1.3 pt thick across the plot, and its label
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_png_size_and_format), cmocka_unit_test(test_series_colours),
        cmocka_unit_test(test_coinciding_series_share_an_entry),
        cmocka_unit_test(test_legend_hides_no_data), cmocka_unit_test(test_heatmap_colours),
        cmocka_unit_test(test_heatmap_log_colours),
        cmocka_unit_test(test_awkward_data),        cmocka_unit_test(test_roofline),
        cmocka_unit_test(test_line_ceiling),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
