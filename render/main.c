// main.c: bin/render, the lab report renderer. CSVs + templates -> cairo charts -> PDF.
//
//   bin/render out/xeon-2c                       # out/xeon-2c/report.pdf + out/xeon-2c/figures/*.png
//   bin/render --compare out/A out/B out/C       # out/compare-A-vs-B-vs-C.pdf
//   bin/render --help
//
// The renderer knows nothing about models: it reads the run directory's CSVs and meta.csv,
// and the template (templates/README.md) decides what the report shows.
#include <getopt.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "report.h"
#include "rundata.h"
#include "table.h"

static void usage(FILE *f) {
    fputs("usage: bin/render [options] RUN_DIR\n"
          "       bin/render --compare [options] DIR_A DIR_B [DIR_C...]\n"
          "\n"
          "Renders the lab report of a run directory (out/<hw>/): RUN_DIR/report.pdf, and every\n"
          "figure as RUN_DIR/figures/<id>.png. With --compare, overlays 2 to 6 runs, machines A, B, C...\n"
          "(A solid, B dashed, C dash-dot...), tabulates ratios against A and ends with \"which machine\n"
          "wins what\", writing compare-<A>-vs-<B>...pdf next to DIR_A. A directory without results (none,\n"
          "or no meta.csv) is named as missing and the others are compared.\n"
          "\n"
          "options:\n"
          "  -t, --template FILE  report template (default templates/report.tmpl, looked up in the\n"
          "                       current directory, then beside the program: ../templates/)\n"
          "  -o, --out FILE       PDF to write (default RUN_DIR/report.pdf)\n"
          "  -f, --figures DIR    directory for the figure PNGs (default RUN_DIR/figures)\n"
          "  -c, --compare        compare run directories\n"
          "      --dpi N          figure resolution in dots per inch (default 200, at least 200)\n"
          "      --strict         a placeholder, figure or table that finds no rows is an error\n"
          "                       (by default: a warning, and \"n/a\" in the text)\n"
          "  -h, --help           this help\n",
          f);
}

// templates/report.tmpl from the current directory, else from beside the executable.
static const char *default_template(char *buf, size_t size) {
    const char *local = "templates/report.tmpl";
    if (access(local, R_OK) == 0) return local;
    char exe[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n <= 0) return local;
    exe[n] = '\0';
    char *slash = strrchr(exe, '/');
    if (!slash) return local;
    *slash = '\0';
    snprintf(buf, size, "%s/../templates/report.tmpl", exe);
    return access(buf, R_OK) == 0 ? buf : local;
}

int main(int argc, char **argv) {
    static const struct option options[] = {
        {"template", required_argument, NULL, 't'}, {"out", required_argument, NULL, 'o'},
        {"figures", required_argument, NULL, 'f'},  {"compare", no_argument, NULL, 'c'},
        {"dpi", required_argument, NULL, 'd'},      {"strict", no_argument, NULL, 's'},
        {"help", no_argument, NULL, 'h'},           {NULL, 0, NULL, 0},
    };
    ReportOptions o = report_defaults();
    char template_buf[PATH_MAX + 32];
    o.template_path = NULL;
    int compare = 0;
    for (int c; (c = getopt_long(argc, argv, "t:o:f:ch", options, NULL)) != -1;) {
        switch (c) {
        case 't': o.template_path = optarg; break;
        case 'o': o.out_path = optarg; break;
        case 'f': o.figures_dir = optarg; break;
        case 'c': compare = 1; break;
        case 's': o.strict = 1; break;
        case 'd':
            if (!parse_number(optarg, &o.dpi) || o.dpi < 200 || o.dpi > 1200) {
                fprintf(stderr, "render: --dpi '%s': give a number from 200 to 1200\n", optarg);
                return 2;
            }
            break;
        case 'h': usage(stdout); return 0;
        default: fputs("render: try 'bin/render --help'\n", stderr); return 2;
        }
    }
    int given = argc - optind;
    if (compare ? given < 2 || given > MAX_RUNS : given != 1) {
        if (compare) fprintf(stderr, "render: --compare needs 2 to %d run directories, got %d\n", MAX_RUNS, given);
        else fprintf(stderr, "render: give one run directory, got %d\n", given);
        fputs("render: try 'bin/render --help'\n", stderr);
        return 2;
    }
    if (compare && o.figures_dir) {
        fputs("render: --figures applies to a single run, not to --compare\n", stderr);
        return 2;
    }
    if (!o.template_path) o.template_path = default_template(template_buf, sizeof template_buf);
    Error err;
    const char **dirs = (const char **)argv + optind;
    int status = compare ? report_compare(&o, dirs, given, &err) : report_render(&o, dirs[0], &err);
    if (status) {
        fprintf(stderr, "render: error: %s\n", err.msg);
        return 1;
    }
    char *out = NULL;
    if (!o.out_path && compare) out = compare_default_path(dirs, given);
    if (o.out_path) fprintf(stderr, "render: wrote %s\n", o.out_path);
    else if (compare) fprintf(stderr, "render: wrote %s\n", out);
    else fprintf(stderr, "render: wrote %s/report.pdf\n", argv[optind]);
    free(out);
    return 0;
}
