// cli.c: shared command-line options and value parsers (see cli.h).
#include "cli.h"

#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bench.h"
#include "hw.h"

void cli_common_defaults(CliCommon *c) {
    memset(c, 0, sizeof *c);
    HwInfo hw;
    hw_probe(&hw);
    char slug[96];
    hw_slug(slug, sizeof slug, &hw);
    snprintf(c->out_dir, sizeof c->out_dir, "out/%s", slug);
    snprintf(c->profile, sizeof c->profile, "full");
}

int cli_parse_long(const char *option, const char *text, long lo, long hi, long *out, Error *err) {
    char *end;
    errno = 0;
    long v = strtol(text, &end, 10);
    if (end == text || *end != '\0' || errno == ERANGE)
        return error_set(err, "%s: '%s' is not an integer", option, text);
    if (v < lo || v > hi) return error_set(err, "%s: %ld is out of range [%ld, %ld]", option, v, lo, hi);
    *out = v;
    return 0;
}

int cli_parse_u64(const char *option, const char *text, uint64_t *out, Error *err) {
    char *end;
    errno = 0;
    // strtoull would take "-1" as 2^64 - 1 and skip leading spaces: only digits are a seed
    unsigned long long v = text[0] >= '0' && text[0] <= '9' ? strtoull(text, &end, 10) : 0;
    if (!(text[0] >= '0' && text[0] <= '9') || *end != '\0' || errno == ERANGE)
        return error_set(err, "%s: '%s' is not an unsigned 64-bit integer", option, text);
    *out = (uint64_t)v;
    return 0;
}

int cli_parse_double(const char *option, const char *text, double lo, double hi, double *out, Error *err) {
    char *end;
    errno = 0;
    double v = strtod(text, &end);
    if (end == text || *end != '\0' || errno == ERANGE || v != v)
        return error_set(err, "%s: '%s' is not a number", option, text);
    if (v < lo || v > hi) return error_set(err, "%s: %g is out of range [%g, %g]", option, v, lo, hi);
    *out = v;
    return 0;
}

static int set_profile(CliCommon *c, const char *p, Error *err) {
    if (strcmp(p, "quick") != 0 && strcmp(p, "full") != 0)
        return error_set(err, "--profile: '%s' is neither quick nor full", p);
    snprintf(c->profile, sizeof c->profile, "%s", p);
    return 0;
}

int cli_common_option(CliCommon *c, int code, const char *arg, Error *err) {
    long v;
    switch (code) {
    case CLI_OPT_HELP: c->help = 1; return 1;
    case CLI_OPT_QUICK: return set_profile(c, "quick", err) ? -1 : 1;
    case CLI_OPT_PROFILE: return set_profile(c, arg, err) ? -1 : 1;
    case CLI_OPT_THREADS:
        if (cli_parse_long("--threads", arg, 1, 4096, &v, err)) return -1;
        c->threads = (int)v;
        return 1;
    case CLI_OPT_OUT:
        if (arg[0] == '\0' || strlen(arg) >= sizeof c->out_dir)
            return error_set(err, "--out: directory name empty or longer than %zu bytes", sizeof c->out_dir - 1);
        snprintf(c->out_dir, sizeof c->out_dir, "%s", arg);
        return 1;
    default: return 0;
    }
}

void cli_usage_error(const char *program, const char *message) {
    fprintf(stderr, "%s: %s\nTry '%s --help'.\n", program, message, program);
    exit(2);
}
