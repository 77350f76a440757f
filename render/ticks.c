// ticks.c: axis ranges, tick positions and tick labels (see ticks.h).
// Tested by tests/test_render_ticks.c.
#include "ticks.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "numfmt.h"

static void add_tick(Axis *a, double v, int major, const char *label) {
    if (a->n == MAX_TICKS) return;
    Tick *t = &a->ticks[a->n++];
    t->value = v;
    t->major = major;
    snprintf(t->label, sizeof t->label, "%s", label ? label : "");
}

// --- linear -----------------------------------------------------------------------------

static int floor_div(int a, int b) { return a >= 0 ? a / b : -((-a + b - 1) / b); }

static void linear_labels(Axis *a, double mantissa, int step_exp) {
    double maxabs = fmax(fabs(a->lo), fabs(a->hi));
    a->exponent = 0;
    if (maxabs >= 1e5 || (maxabs > 0 && maxabs < 1e-3))
        a->exponent = 3 * floor_div((int)floor(log10(maxabs)), 3);
    int decimals = a->exponent - step_exp + (mantissa == 2.5);
    if (decimals < 0) decimals = 0;
    double scale = pow(10, a->exponent);
    for (int i = 0; i < a->n; i++) {
        NumberFormat f = {FMT_FIXED, decimals};
        numfmt_format(a->ticks[i].value / scale, f, a->ticks[i].label, sizeof a->ticks[i].label);
    }
}

static int linear_ticks(Axis *a, double dmin, double dmax, int max_major) {
    if (dmin == dmax) {
        double d = dmin == 0 ? 1 : 0.1 * fabs(dmin);
        dmin -= d, dmax += d;
    }
    static const double staircase[] = {1, 2, 2.5, 5};
    int e0 = (int)floor(log10((dmax - dmin) / (max_major - 1))) - 1;
    // a range across zero needs three ticks at least: allow one more tick when none fits
    for (int e = e0;; e++) {
        if (e > e0 + 3) e = e0, max_major++;
        for (int i = 0; i < 4; i++) {
            double step = staircase[i] * pow(10, e);
            double k0 = floor(dmin / step + 1e-9), k1 = ceil(dmax / step - 1e-9);
            int n = (int)(k1 - k0) + 1;
            if (n < 2 || n > max_major || n > MAX_TICKS) continue;
            a->lo = k0 * step;
            a->hi = k1 * step;
            a->step = step;
            for (int k = 0; k < n; k++) {
                double v = (k0 + k) * step;
                add_tick(a, fabs(v) < 1e-9 * step ? 0 : v, 1, NULL);
            }
            linear_labels(a, staircase[i], e);
            return 0;
        }
    }
}

// --- logarithmic ------------------------------------------------------------------------

static void log_label(Scale scale, int d, double mult, char *buf, size_t size) {
    int plain = scale == SCALE_LOG10 ? (d >= -3 && d <= 4) : (d >= -4 && d <= 19);
    double v = mult * pow(scale == SCALE_LOG10 ? 10 : 2, d);
    if (plain) {
        NumberFormat f = {FMT_SIG, 6};
        numfmt_format(v, f, buf, size);
        return;
    }
    buf[0] = '\0';
    if (mult != 1) snprintf(buf, size, "%g×", mult);
    strncat(buf, scale == SCALE_LOG10 ? "10" : "2", size - strlen(buf) - 1);
    append_superscript(buf, size, d);
}

// Majors at the powers of the base whose exponent is a multiple of `stride`, minors at the
// other powers and (base 10, stride 1) at 2..9 × 10ᵏ, over exponents lo..hi; ticks outside
// [a->lo, a->hi] are left out.
static void log_decade_ticks(Axis *a, int lo, int hi, int stride, int label_minors) {
    double base = a->scale == SCALE_LOG10 ? 10 : 2;
    char label[32];
    for (int d = lo; d <= hi; d++) {
        double v = pow(base, d);
        int major = ((d % stride) + stride) % stride == 0;
        log_label(a->scale, d, 1, label, sizeof label);
        if (v >= a->lo * (1 - 1e-12) && v <= a->hi * (1 + 1e-12)) add_tick(a, v, major, major ? label : NULL);
        if (a->scale != SCALE_LOG10 || stride != 1) continue;
        for (int m = 2; m <= 9; m++) {
            double u = m * v;
            if (u < a->lo * (1 - 1e-12) || u > a->hi * (1 + 1e-12)) continue;
            int labelled = label_minors && (m == 2 || m == 5);
            log_label(a->scale, d, m, label, sizeof label);
            add_tick(a, u, labelled, labelled ? label : NULL);
        }
    }
}

// The data range with a 5% margin (in logarithms) when at least two powers of the base fall
// inside it; otherwise whole decades around the data. When only two powers of ten are
// labelled, 2 and 5 × 10ᵏ are labelled as well.
static int log_ticks(Axis *a, double dmin, double dmax, int max_major) {
    if (!(dmin > 0)) return -1;
    double base = a->scale == SCALE_LOG10 ? 10 : 2, lb = log(base);
    if (dmin == dmax) dmin /= base, dmax *= base;
    double margin = pow(dmax / dmin, 0.05);
    double plo = dmin / margin, phi = dmax * margin;
    double flo = floor(log(plo) / lb + 1e-9), fhi = ceil(log(phi) / lb - 1e-9);
    if (fhi - flo + 1 > MAX_TICKS) return -1;
    int inner_lo = (int)ceil(log(plo) / lb - 1e-9), inner_hi = (int)floor(log(phi) / lb + 1e-9);
    int padded = inner_hi - inner_lo >= 1;
    int lo = padded ? inner_lo : (int)flo, hi = padded ? inner_hi : (int)fhi;
    if (!padded && hi == lo) hi++;
    int stride = 1;
    while ((hi - lo) / stride + 1 > max_major) stride++;
    if (padded) {
        a->lo = plo;
        a->hi = phi;
    } else {
        lo = floor_div(lo, stride) * stride;
        hi = -floor_div(-hi, stride) * stride;
        a->lo = pow(base, lo);
        a->hi = pow(base, hi);
    }
    a->step = stride;
    // with one decade, or two labelled powers, 2 and 5 × 10ᵏ are labelled too
    int few = padded ? stride == 1 && hi - lo <= 1 : hi - lo == 1;
    log_decade_ticks(a, padded ? lo - 1 : lo, hi + (padded ? 1 : 0), stride, few);
    return 0;
}

// --- API ----------------------------------------------------------------------------------

int axis_ticks(Axis *a, Scale scale, double dmin, double dmax, int max_major) {
    memset(a, 0, sizeof *a);
    a->scale = scale;
    if (!isfinite(dmin) || !isfinite(dmax)) return -1;
    if (dmin > dmax) {
        double t = dmin;
        dmin = dmax, dmax = t;
    }
    if (max_major < 2) max_major = 2;
    return scale == SCALE_LINEAR ? linear_ticks(a, dmin, dmax, max_major) : log_ticks(a, dmin, dmax, max_major);
}

double axis_fraction(const Axis *a, double v) {
    if (a->scale == SCALE_LINEAR) return (v - a->lo) / (a->hi - a->lo);
    if (!(v > 0)) return NAN;
    return log(v / a->lo) / log(a->hi / a->lo);
}

int scale_parse(const char *s, Scale *out) {
    if (strcmp(s, "linear") == 0) *out = SCALE_LINEAR;
    else if (strcmp(s, "log") == 0 || strcmp(s, "log10") == 0) *out = SCALE_LOG10;
    else if (strcmp(s, "log2") == 0) *out = SCALE_LOG2;
    else return -1;
    return 0;
}
