// table.h: a CSV file read into memory, for the renderer.
// The parser follows RFC 4180: fields separated by commas, records by CRLF or LF; a field
// may be quoted, and a quoted field may hold commas, doubled quotes ("") and line breaks.
// A UTF-8 byte-order mark is skipped and blank lines are ignored. The first record is the
// header. Anything malformed (a stray quote, an unterminated quoted field, a record with
// the wrong number of fields, invalid UTF-8, a NUL byte, a duplicate or empty column name)
// is an Error naming the file, line and column.
//
//   Table t;
//   Error err;
//   if (table_load(&t, "out/x/kv_cache.csv", &err)) die("%s", err.msg);
//   int c = table_column(&t, "decode_ms_median");
//   double v = table_value(&t, 0, c); // NAN when the cell is not a number
//   table_free(&t);
#pragma once

#include <stddef.h>

#include "common.h"

typedef struct {
    char *path;     // the name used in messages
    int n_cols;
    int n_rows;     // data records, header excluded
    char **names;   // (n_cols) column names
    char **cells;   // (n_rows, n_cols) row-major, NUL-terminated UTF-8
    double *values; // (n_rows, n_cols) each cell as a number, NAN when it is not one
    int *lines;     // (n_rows) the line each record starts on, for messages
    char *arena;    // storage behind names and cells
} Table;

// Parse `len` bytes of CSV text; `name` is used in messages. 0 on success.
int table_parse(Table *t, const char *name, const char *text, size_t len, Error *err);
// Read and parse a file. 0 on success; a missing file is an error like any other.
int table_load(Table *t, const char *path, Error *err);
void table_free(Table *t);

// Index of the column called `name`, or -1.
int table_column(const Table *t, const char *name);
// "a, b, c": the column names, for error messages that list what exists.
void table_column_list(const Table *t, char *buf, size_t size);

static inline const char *table_cell(const Table *t, int row, int col) {
    return t->cells[(size_t)row * t->n_cols + col];
}
static inline double table_value(const Table *t, int row, int col) {
    return t->values[(size_t)row * t->n_cols + col];
}

// Offset of the first byte of s[0..n) that is not valid UTF-8 (or is a NUL), or -1 when
// all of it is valid.
long utf8_invalid_at(const char *s, size_t n);
// Replace every byte of s that is not part of valid UTF-8 with '?' (for file names in text).
void utf8_sanitize(char *s);

// A cell's text as a number: the whole text (surrounding spaces allowed) must be one.
// 1 with *out set when it is, else 0.
int parse_number(const char *s, double *out);
