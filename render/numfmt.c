// numfmt.c: number formats for the report (see numfmt.h). Tested by tests/test_render_ticks.c.
#include "numfmt.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int numfmt_parse(const char *spec, NumberFormat *f) {
    while (*spec == ' ') spec++;
    size_t n = strlen(spec);
    while (n > 0 && spec[n - 1] == ' ') n--;
    char word[16];
    if (n >= sizeof word) return -1;
    memcpy(word, spec, n);
    word[n] = '\0';

    static const struct { const char *name; FormatKind kind; int digits; } named[] = {
        {"", FMT_SIG, 3}, {"int", FMT_INT, 0}, {"si", FMT_SI, 3},
        {"bytes", FMT_BYTES, 3}, {"percent", FMT_PERCENT, 3},
    };
    for (size_t i = 0; i < sizeof named / sizeof named[0]; i++)
        if (strcmp(word, named[i].name) == 0) {
            f->kind = named[i].kind;
            f->digits = named[i].digits;
            return 0;
        }
    char *end;
    if (word[0] == '.') { // .Nf
        long d = strtol(word + 1, &end, 10);
        if (end == word + 1 || strcmp(end, "f") != 0 || d < 0 || d > 12) return -1;
        f->kind = FMT_FIXED;
        f->digits = (int)d;
        return 0;
    }
    long d = strtol(word, &end, 10);
    if (end == word || *end != '\0' || d < 1 || d > 15) return -1;
    f->kind = FMT_SIG;
    f->digits = (int)d;
    return 0;
}

void append_superscript(char *buf, size_t size, int n) {
    static const char *digit[10] = {"⁰", "¹", "²", "³", "⁴", "⁵", "⁶", "⁷", "⁸", "⁹"};
    char plain[16];
    snprintf(plain, sizeof plain, "%d", n);
    size_t used = strlen(buf);
    for (const char *p = plain; *p && used + 4 < size; p++) {
        const char *s = *p == '-' ? "⁻" : digit[*p - '0'];
        used += (size_t)snprintf(buf + used, size - used, "%s", s);
    }
}

// Drop trailing zeros after a decimal point ("2.500" -> "2.5", "3.000" -> "3").
static void trim_zeros(char *s) {
    if (!strchr(s, '.')) return;
    size_t n = strlen(s);
    while (n > 0 && s[n - 1] == '0') s[--n] = '\0';
    if (n > 0 && s[n - 1] == '.') s[--n] = '\0';
}

// "-0", "-0.00": a value that rounded to zero prints without a sign.
static void drop_negative_zero(char *s) {
    if (s[0] == '-' && strspn(s + 1, "0.") == strlen(s + 1)) memmove(s, s + 1, strlen(s));
}

// v with `digits` significant digits and no exponent, trailing zeros dropped.
static void format_plain_sig(double v, int digits, char *buf, size_t size) {
    int mag = v == 0 ? 0 : (int)floor(log10(fabs(v)));
    int decimals = digits - 1 - mag;
    if (decimals < 0) decimals = 0;
    snprintf(buf, size, "%.*f", decimals, v);
    // rounding may carry into a new digit (9.995 -> 10.00): reprint with one decimal fewer
    double rounded = atof(buf);
    if (rounded != 0 && (int)floor(log10(fabs(rounded))) > mag && decimals > 0)
        snprintf(buf, size, "%.*f", decimals - 1, v);
    trim_zeros(buf);
    drop_negative_zero(buf);
}

static void format_sig(double v, int digits, char *buf, size_t size) {
    double a = fabs(v);
    if (a != 0 && (a >= 1e9 || a < 1e-3)) { // mantissa × 10ⁿ
        int e = (int)floor(log10(a));
        double m = v / pow(10, e);
        if (fabs(m) >= 10 - 0.5 * pow(10, 1 - digits)) m /= 10, e++; // 9.9996 rounds to 10
        format_plain_sig(m, digits, buf, size);
        strncat(buf, "×10", size - strlen(buf) - 1);
        append_superscript(buf, size, e);
        return;
    }
    format_plain_sig(v, digits, buf, size);
}

// v scaled by the power of `base` (from base⁻⁴ to base⁶) that leaves it in [1, base).
static void format_prefixed(double v, int digits, double base, const char *const *up,
                            const char *const *down, char *buf, size_t size) {
    double a = fabs(v), one = 1 - 0.5 * pow(10, -digits); // anything from `one` on prints as 1
    int step = 0;
    while (a >= base * one && step < 6) a /= base, step++;
    while (step <= 0 && down && a != 0 && a < one && step > -4) a *= base, step--;
    char num[64];
    format_plain_sig(v < 0 ? -a : a, digits, num, sizeof num);
    snprintf(buf, size, "%s %s", num, step >= 0 ? up[step] : down[-step - 1]);
}

void numfmt_format(double v, NumberFormat f, char *buf, size_t size) {
    if (isnan(v)) {
        snprintf(buf, size, "n/a");
        return;
    }
    if (isinf(v)) {
        snprintf(buf, size, v > 0 ? "∞" : "−∞");
        return;
    }
    static const char *const si_up[] = {"", "k", "M", "G", "T", "P", "E"};
    static const char *const si_down[] = {"m", "μ", "n", "p"};
    static const char *const iec[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
    char tmp[64];
    switch (f.kind) {
    case FMT_SIG: format_sig(v, f.digits, buf, size); break;
    case FMT_FIXED:
        snprintf(buf, size, "%.*f", f.digits, v);
        drop_negative_zero(buf);
        break;
    case FMT_INT:
        snprintf(buf, size, "%.0f", v);
        drop_negative_zero(buf);
        break;
    case FMT_SI: format_prefixed(v, f.digits, 1000, si_up, si_down, buf, size); break;
    case FMT_BYTES:
        if (fabs(v) < 1024) snprintf(buf, size, "%.0f B", v);
        else format_prefixed(v, f.digits, 1024, iec, NULL, buf, size);
        break;
    case FMT_PERCENT:
        format_sig(100 * v, f.digits, tmp, sizeof tmp);
        snprintf(buf, size, "%s%%", tmp);
        break;
    }
}
