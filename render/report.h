// report.h: a run directory (or several) + a template -> the PDF lab report.
// Single mode writes RUN_DIR/report.pdf and every figure as RUN_DIR/figures/<id>.png.
// Compare mode reads up to MAX_RUNS run directories, machines A, B, C... in the order given:
// it overlays them in every figure (A solid, B dashed, C dash-dot...), shows placeholders as
// "A → B → C", turns tables into ratios against A for rows whose key columns match, and ends
// with a summary of ratios over every CSV the runs share and a page "which machine wins what".
// A directory without results (missing, or no meta.csv) is named as missing and the others
// are compared; machines that share a label get their directory's name added to it.
//
//   ReportOptions o = report_defaults();
//   o.template_path = "templates/report.tmpl";
//   if (report_render(&o, "out/xeon-2c", &err)) die("%s", err.msg);
//   const char *dirs[] = {"out/cpu", "out/a100", "out/h100"};
//   if (report_compare(&o, dirs, 3, &err)) die("%s", err.msg);
#pragma once

#include "common.h"

typedef struct {
    const char *template_path;
    const char *out_path;   // NULL: RUN_DIR/report.pdf, or compare_default_path
    const char *figures_dir; // NULL: RUN_DIR/figures (single mode only; compare writes none)
    double dpi;             // figure resolution, at least 200
    int strict;             // a placeholder or figure without data is an error, not a warning
} ReportOptions;

ReportOptions report_defaults(void);
int report_render(const ReportOptions *o, const char *run_dir, Error *err);
int report_compare(const ReportOptions *o, const char **dirs, int n_dirs, Error *err);
// The default compare output path, DIR_OF_FIRST/compare-<A>-vs-<B>[-vs-<C>...].pdf (malloc'd).
char *compare_default_path(const char **dirs, int n_dirs);
