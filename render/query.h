// query.h: row filters and placeholder expressions over a run's CSVs.
//
// A filter selects rows: conditions separated by commas, each COLUMN OP VALUE with OP one
// of = != < <= > >=; = and != take alternatives separated by '|'. Values compare as numbers
// when both sides are numbers (so temperature=1 matches "1.0"), else as text.
//     prompt_len=256, mode=cache|nocache, T>=1024
//
// A placeholder in template text is {EXPR} or {EXPR | FORMAT [UNIT]} (FORMAT: numfmt.h; the
// unit follows the number: "| si B/s" -> "1.2 GB/s", "| 3 ms" -> "12.5 ms", "| 3 ×" -> "10.6×"):
//     EXPR   := TERM (('+' | '-') TERM)*
//     TERM   := FACTOR (('*' | '/') FACTOR)*
//     FACTOR := NUMBER | '-' FACTOR | '(' EXPR ')' | REF | AGG '(' REF ')' | meta '(' KEY ')'
//     REF    := FILE ':' COLUMN [ '[' FILTER ']' ]
//     AGG    := min | max | mean | median | sum | count
// A bare REF is one cell: exactly one row must match. A ratio of two cells is REF / REF:
//     {kv_cache.csv:total_ms[mode=nocache,prompt_len=1024] / kv_cache.csv:total_ms[mode=cache,prompt_len=1024] | 3 ×}
// Structural mistakes (unknown file, column or function, bad syntax) are QUERY_ERROR;
// a filter that matches no row is QUERY_NO_DATA, which the report shows as "n/a" with a
// warning (an error under --strict), because a quick profile sweeps fewer settings.
#pragma once

#include <stddef.h>

#include "common.h"
#include "rundata.h"
#include "table.h"

#define MAX_CONDITIONS 16
#define MAX_ALTERNATIVES 16

typedef enum { OP_EQ, OP_NE, OP_LT, OP_LE, OP_GT, OP_GE } CompareOp;

typedef struct {
    int col;
    CompareOp op;
    int n_values;
    char *values[MAX_ALTERNATIVES];
    double numbers[MAX_ALTERNATIVES]; // NAN where the value is not a number
} Condition;

typedef struct {
    int n;
    Condition conds[MAX_CONDITIONS];
} Filter;

// Parse `src` against the columns of t; an unknown column is an error that lists the known ones.
int filter_parse(Filter *f, const char *src, const Table *t, Error *err);
int filter_match(const Filter *f, const Table *t, int row);
// Two cells are equal when both are numbers that agree to 1e-9 (relative), or the same text.
int cells_equal(const char *a, double a_num, const char *b, double b_num);
void filter_free(Filter *f);

enum { QUERY_OK = 0, QUERY_ERROR = -1, QUERY_NO_DATA = -2 };

typedef struct {
    int is_text;   // a cell or meta value that is not a number
    double number;
    char text[512];
} Value;

// Evaluate an expression (without braces and format) against one run.
int query_eval(const char *expr, RunData *run, Value *out, Error *err);
// Evaluate "EXPR | FORMAT UNIT" and write the formatted result.
int query_format(const char *placeholder, RunData *run, char *buf, size_t size, Error *err);

// A table or figure that shows column `col` of `file` for the rows `where` selects is held to
// the placeholders' rule of one number per quantity (quantities.csv): QUERY_ERROR, with the
// quantity to quote instead, when those cells are listed under a quantity's `also`.
int query_check_shown(RunData *run, const char *file, const Filter *where, int col, Error *err);

// Fill every {placeholder} in text ("{{" and "}}" are literal braces). With several runs
// (at most MAX_RUNS) each placeholder shows "A → B → C" (once when all agree). `where` ("file:line") prefixes
// messages. QUERY_NO_DATA prints "n/a" and a warning, or fails when strict. Returns a
// malloc'd string, or NULL with err set.
char *expand_text(const char *text, const char *where, RunData **runs, int n_runs, int strict, Error *err);
