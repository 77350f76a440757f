// csv.h: tidy CSV output for experiments (see DESIGN.md, "CSV contract").
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
} CsvWriter;

CsvWriter csv_open(const char *path, const char *header);
// One row, printf-style; dies if the number of fields differs from the header's (quoted
// fields count as one) or its quotes are unbalanced, removing the temp file first.
void csv_row(CsvWriter *w, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
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
