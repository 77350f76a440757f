// report.h: a run directory (or two) + a template -> the PDF lab report.
// Single mode writes RUN_DIR/report.pdf and every figure as RUN_DIR/figures/<id>.png.
// Compare mode overlays two runs in every figure (A solid, B dashed), shows placeholders as
// "A → B", turns tables into B/A ratios for rows whose key columns match, and ends with a
// summary of B/A ratios over every CSV the two runs share.
//
//   ReportOptions o = report_defaults();
//   o.template_path = "templates/report.tmpl";
//   if (report_render(&o, "out/xeon-2c", &err)) die("%s", err.msg);
#pragma once

#include "common.h"

typedef struct {
    const char *template_path;
    const char *out_path;   // NULL: RUN_DIR/report.pdf, or DIR_OF_A/compare-<A>-vs-<B>.pdf
    const char *figures_dir; // NULL: RUN_DIR/figures (single mode only; compare writes none)
    double dpi;             // figure resolution, at least 200
    int strict;             // a placeholder or figure without data is an error, not a warning
} ReportOptions;

ReportOptions report_defaults(void);
int report_render(const ReportOptions *o, const char *run_dir, Error *err);
int report_compare(const ReportOptions *o, const char *dir_a, const char *dir_b, Error *err);
// The default compare output path for two run directories (malloc'd).
char *compare_default_path(const char *dir_a, const char *dir_b);
