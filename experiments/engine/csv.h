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
// One row, printf-style; dies if the number of fields differs from the header's.
void csv_row(CsvWriter *w, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void csv_close(CsvWriter *w);
