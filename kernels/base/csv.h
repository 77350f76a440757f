// csv.h: tidy CSV output for experiments (see DESIGN.md, "CSV contract"), and a reader of
// tables by column name (csv_read_table, at the end).
// Key columns first, then metrics; every number printed with %.6g; the file is written
// to a temp file and renamed on csv_close, so a crash never leaves a half-written CSV.
//
//   CsvWriter w = csv_open("out/x/kv_cache.csv", "prompt_len,gen_len,mode,decode_ms_median");
//   csv_row(&w, "%d,%d,%s,%.6g", 256, 128, "cache", 1.25);
//   csv_close(&w);
#pragma once

#include "common.h"

typedef struct {
    AtomicFile file;
    int n_columns;
    char key[32]; // csv_open_keyed's key; "" for a table of its own
} CsvWriter;

CsvWriter csv_open(const char *path, const char *header);
// A table that several runs share, each writing the rows whose first column is its own key
// (the backend: cpu, cuda). csv_close merges under a lock on the directory: the rows of an
// existing file whose first field is another key stay (those of keys that sort before this
// one, then this run's rows, then those after), its own key's old rows go. So a CPU run and a
// GPU run each replace only their own rows, in either order. An existing file with another
// header is replaced whole, with a warning on stderr.
CsvWriter csv_open_keyed(const char *path, const char *header, const char *key);
// One row, printf-style; dies if the number of fields differs from the header's (quoted
// fields count as one) or its quotes are unbalanced, removing the temp file first.
void csv_row(CsvWriter *w, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
// Commit the table: the file appears complete at its path (merged, for a keyed table).
void csv_close(CsvWriter *w);
// Give up on the table: remove the temp file; nothing appears at the path.
void csv_abort(CsvWriter *w);

// Text as one CSV field: unchanged when it holds no comma, quote or line break, otherwise
// wrapped in quotes with inner quotes doubled (RFC 4180). Writes into buf and returns it;
// dies if buf is too small. Use it for any free text passed to csv_row with %s.
const char *csv_quote(char *buf, size_t size, const char *s);

// Split one record (a line without its line break) in place into fields, removing quotes:
// fields[i] points into line for the first max_fields fields (fields may be NULL when
// max_fields is 0). Returns the number of fields in the record, or -1 when its quoting is
// malformed (unterminated quote, text after a closing quote, quote or line break inside
// an unquoted field).
int csv_split(char *line, char **fields, int max_fields);

// Read a table of outside data (a reference table, another program's records): find
// `columns` by name in the header line (order free, extra columns ignored) and hand the
// fields of those columns of every non-blank record, in the order asked, to parse with the
// line number. Returns 0, or -1 with err naming the file and line (missing file or column,
// a record of the wrong field count, bad quoting, a NUL byte, or parse's own -1).
typedef int (*CsvRowFn)(void *table, char **values, const char *path, int line, Error *err);
int csv_read_table(const char *path, const char *const *columns, int n_columns, CsvRowFn parse, void *table,
                   Error *err);
