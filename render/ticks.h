// ticks.h: axis ranges and tick marks for the charts.
// Linear axes take the smallest step from the staircase 1, 2, 2.5, 5 × 10ᵏ (as matplotlib's
// MaxNLocator does) that needs at most `max_major` ticks, and widen the data range to whole
// steps. Log axes run over whole decades (base 10, minor ticks at 2..9) or whole powers of
// two (base 2), skipping decades when there are more than `max_major`. Labels are written
// with as many decimals as the step needs; very large or small linear values share an
// engineering exponent that the axis label carries ("×10⁹").
//
//   Axis ax;
//   if (axis_ticks(&ax, SCALE_LINEAR, 0.0, 9.3, 6) == 0)   // 0, 2, 4, 6, 8, 10
//       double f = axis_fraction(&ax, 5.0);                // 0.5
#pragma once

#define MAX_TICKS 96

typedef enum { SCALE_LINEAR, SCALE_LOG10, SCALE_LOG2 } Scale;

typedef struct {
    double value;
    int major;      // majors are labelled and longer
    char label[32]; // empty for minor ticks
} Tick;

typedef struct {
    Scale scale;
    double lo, hi;  // the axis range: the data range widened to whole steps
    double step;    // linear: the tick step; log: decades (or octaves) per major tick
    int exponent;   // linear: labels show value / 10^exponent (0: plain)
    int n;
    Tick ticks[MAX_TICKS];
} Axis;

// Choose ticks for data in [dmin, dmax]. -1 when the range is not finite, or not positive
// on a log axis; an empty range (dmin == dmax) is widened around the value.
int axis_ticks(Axis *a, Scale scale, double dmin, double dmax, int max_major);
// Position of v along the axis: 0 at lo, 1 at hi (log scales measure in logarithms).
double axis_fraction(const Axis *a, double v);
// Parse "linear", "log" (base 10) or "log2"; -1 when it is none of them.
int scale_parse(const char *s, Scale *out);
