// numfmt.h: how the report writes numbers — in paragraphs, table cells and tick labels.
// A format spec is a short word (templates/README.md, "Number formats"):
//   ""  or "3"     3 significant digits, trailing zeros dropped: 23.4; below 10⁻³ and from
//                  10⁹ on, a power of ten: 0.000123 -> 1.23×10⁻⁴
//   "N"            N significant digits (1..15)
//   ".Nf"          N digits after the point, zeros kept: 2.50
//   "int"          rounded to an integer: 1024
//   "si"           3 significant digits and a decimal prefix, then a space: "1.23 G", "512 "
//   "bytes"        binary prefixes with the unit: "1.5 GiB", "512 B"
//   "percent"      the value times 100, 3 significant digits, and '%': "12.5%"
// Values that are not finite print as "n/a" (NaN) or "∞" / "−∞".
#pragma once

#include <stddef.h>

typedef enum { FMT_SIG, FMT_FIXED, FMT_INT, FMT_SI, FMT_BYTES, FMT_PERCENT } FormatKind;

typedef struct {
    FormatKind kind;
    int digits; // significant digits (SIG, SI, BYTES, PERCENT) or decimals (FIXED)
} NumberFormat;

// Parse a spec (surrounding spaces allowed); 0 on success, -1 when it is not one of the above.
int numfmt_parse(const char *spec, NumberFormat *f);
// Write v in format f into buf (always NUL-terminated).
void numfmt_format(double v, NumberFormat f, char *buf, size_t size);

// Append the Unicode superscript form of an integer ("⁻¹²") to buf.
void append_superscript(char *buf, size_t size, int n);
