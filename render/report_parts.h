// report_parts.h: what the pieces of report assembly share (report.c walks the template;
// report_figure.c turns @figure blocks into charts; report_table.c turns @table blocks into
// tables and builds the comparison's ratio tables). Internal to render/.
#pragma once

#include <limits.h>

#include "chart.h"
#include "pdf.h"
#include "query.h"
#include "report.h"
#include "template.h"

typedef struct { // a figure whose chart is drawn after the walk, in parallel with the others
    Chart chart;
    char id[300];  // the PNG's name
    double w, h;   // size in points
    int slot;      // where it goes in the PDF
} FigureJob;

typedef struct {
    const ReportOptions *o;
    Template *t;
    RunData runs[MAX_RUNS];
    int n_runs;             // the run directories read (in compare mode, those that exist)
    int compare;            // compare mode: machines lettered A, B, C... in the order given
    char **missing;         // compare mode: "LABEL (DIR: why)" for each machine without results
    int n_missing;
    RunData *active[MAX_RUNS]; // the runs that have the current section's CSVs
    int n_active;
    Pdf *pdf;
    int section;            // the last section's number
    int figure_no, table_no;
    char figures_dir[PATH_MAX]; // "" when figures are not saved
    char **figure_ids;          // ids used so far, to refuse duplicates
    int *figure_lines;
    int n_figure_ids;
    FigureJob *jobs;
    int n_jobs;
    const Table *display_names; // display_names.csv (column, name) from the template's directory, or NULL
} Report;

// Machine k of a comparison (k < MAX_RUNS): its letter, and the style of its lines (A solid,
// B dashed, C dash-dot...; never dotted, which marks reference curves). Markers of every
// machine but A are hollow.
static inline char machine_letter(int k) { return (char)('A' + k); }
static inline LineStyle machine_style(int k) {
    static const LineStyle styles[MAX_RUNS] = {STYLE_SOLID,    STYLE_DASHED,     STYLE_DASHDOT,
                                               STYLE_LONGDASH, STYLE_DASHDOTDOT, STYLE_SHORTDASH};
    return styles[k];
}

// A run's place in the comparison (runs[k] is machine k).
static inline int machine_of(const Report *r, const RunData *run) { return (int)(run - r->runs); }

// "file:line" of a block or one of its options, for messages.
void block_where(const Block *b, const char *key, char *buf, size_t size);
// An option's text with its placeholders filled (NULL when the option is absent).
int option_text(Report *r, const Block *b, const char *key, char **out, Error *err);
// The reader's name for a CSV column (display_names.csv: "temperature" -> "T"); a column
// it does not list keeps its name with '_' as spaces. Written into buf.
const char *display_name(const Report *r, const char *column, char *buf, size_t size);
// display_names.csv's name for one value of a column ("point=decode_mlp" -> "decode MLP"),
// else the value itself (the same pointer).
const char *value_name(const Report *r, const char *column, const char *value);
// A series' label for one value of its column: the name display_names.csv gives the value
// ("point=decode_mlp" -> "decode MLP"), else "T = 0.7" for a number, "prefix sharing off"
// for on/off and yes/no, the value alone for other text. Appended to buf.
void append_series_value(const Report *r, const char *column, const char *value, char *buf, size_t size);
// Split "a, b, c" into trimmed items (malloc'd array of malloc'd strings).
char **split_list(const char *s, int *n);
void free_list(char **items, int n);

// A @figure: its chart is built now and its place in the PDF reserved; draw_figures draws it.
int render_figure(Report *r, const Block *b, Error *err);
// Draw every queued chart (in parallel), save the PNGs, and put the images in the PDF.
int draw_figures(Report *r, Error *err);
void free_figure_jobs(Report *r);
int render_table(Report *r, const Block *b, Error *err);
// Compare mode's closing sections: the ratios against A over every CSV the runs share, and
// "which machine wins what" over their timing and throughput columns.
int render_ratio_summary(Report *r, Error *err);
int render_winners(Report *r, Error *err);
