// cli.h: the options every experiment shares and value parsers that reject bad input with a
// clear message (the progress line is the base's progress.h). Built on getopt_long. Experiments get
// all of this through the harness (lab.h); a program with a parser of its own (bin/train)
// lists CLI_COMMON_OPTIONS in its option table and hands unknown codes to cli_common_option.
//
//   enum { OPT_SEED = 1 };
//   static const struct option opts[] = {CLI_COMMON_OPTIONS, {"seed", required_argument, 0, OPT_SEED}, {0}};
//   CliCommon common;
//   cli_common_defaults(&common);
//   for (int c; (c = getopt_long(argc, argv, "", opts, NULL)) != -1;) {
//       int bad = c == OPT_SEED ? cli_parse_long("--seed", optarg, 0, LONG_MAX, &seed, &err)
//                               : cli_common_option(&common, c, optarg, &err) != 1;
//       if (bad) cli_usage_error(argv[0], c == '?' ? "unknown option or missing value" : err.msg);
//   }
#pragma once

#include <getopt.h>
#include <stdint.h>

#include "common.h"

typedef struct {
    char out_dir[512];  // --out DIR; default out/<hw slug>
    char profile[16];   // --profile quick|full (--quick is --profile quick); default full
    int threads;        // --threads N; 0 = every core
    int help;           // --help given
} CliCommon;

// Option codes above any character, so they never clash with a program's short options.
enum { CLI_OPT_HELP = 0x1000, CLI_OPT_OUT, CLI_OPT_PROFILE, CLI_OPT_QUICK, CLI_OPT_THREADS };

#define CLI_COMMON_OPTIONS                                                                       \
    {"help", no_argument, 0, CLI_OPT_HELP}, {"out", required_argument, 0, CLI_OPT_OUT},          \
        {"profile", required_argument, 0, CLI_OPT_PROFILE}, {"quick", no_argument, 0, CLI_OPT_QUICK}, \
        {"threads", required_argument, 0, CLI_OPT_THREADS}

#define CLI_COMMON_HELP                                                                     \
    "  --out DIR        write CSVs and meta.csv under DIR (default out/<hw>)\n"             \
    "  --profile P      quick (tiny sweep, for tests and CI) or full (default)\n"           \
    "  --quick          same as --profile quick\n"                                          \
    "  --threads N      OpenMP and OpenBLAS threads (default: every core)\n"                \
    "  --help           show this help\n"

// Defaults; out_dir is out/<slug of this machine>.
void cli_common_defaults(CliCommon *c);

// Handle one code returned by getopt_long: 1 when it was a common option, 0 when it is
// not one (the program's own or getopt's '?'), -1 when its value is bad (err says why).
int cli_common_option(CliCommon *c, int code, const char *arg, Error *err);

// Whole-string integer / number in [lo, hi]; err names the option and the bad text.
int cli_parse_long(const char *option, const char *text, long lo, long hi, long *out, Error *err);
// Whole-string unsigned 64-bit integer in decimal (a seed): no sign, no overflow.
int cli_parse_u64(const char *option, const char *text, uint64_t *out, Error *err);
int cli_parse_double(const char *option, const char *text, double lo, double hi, double *out, Error *err);

// Print "<program>: <message>" and a pointer to --help on stderr, and exit(2).
void cli_usage_error(const char *program, const char *message) __attribute__((noreturn));

