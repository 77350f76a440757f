// rundata.h: one run directory (out/<hw>/) as the renderer sees it: its CSVs, loaded on
// first use, its meta.csv (key,value rows: cpu, cores, memory_bytes, gpu, git_commit, ...),
// and the reasons why expected CSVs are missing. A CSV name is looked up in the run
// directory first, then in the template directory, which holds reference tables such as
// hardware datasheets. A missing CSV may be explained by a file next to where it would
// be, NAME.skip (kv_cache.csv -> kv_cache.skip), whose first line is the reason
// ("no CUDA device"); the report prints it in the section's "not run" notice.
//
//   RunData r;
//   if (rundata_open(&r, "out/xeon-2c", "templates", &err)) die("%s", err.msg);
//   const Table *t = rundata_table(&r, "kv_cache.csv", &err);
//   rundata_close(&r);
#pragma once

#include <stddef.h>

#include "common.h"
#include "table.h"

#define MAX_RUNS 6 // the most run directories one comparison reads (one line style each)

typedef struct {
    char *dir;     // the run directory
    char *ref_dir; // where reference CSVs live (the template's directory)
    char *label;   // meta.csv's hw (or hw_slug), else the run directory's name
    Table meta;    // meta.csv; n_cols == 0 when there is none
    int n_tables;
    char **names;  // (n_tables) the names CSVs were asked for by
    Table **tables;
} RunData;

// Open a run directory; it must exist. A malformed meta.csv is an error; a missing one is not.
int rundata_open(RunData *r, const char *dir, const char *ref_dir, Error *err);
void rundata_close(RunData *r);

// 1 when the CSV exists in the run directory or the reference directory. "F.csv[column=value]"
// asks for a row of F.csv whose column holds value (a backend's rows in a table of both).
int rundata_has(const RunData *r, const char *name);
// The CSV, read on first use; NULL (err set) when it is missing or malformed.
const Table *rundata_table(RunData *r, const char *name, Error *err);
// A meta.csv value, or NULL.
const char *rundata_meta(const RunData *r, const char *key);
// Why `name` is missing: the first line of its .skip file (F.skip for F.csv, F.value.skip for
// F.csv[column=value]), else `fallback` (when non-NULL), else "NAME was not found in DIR".
void rundata_missing_reason(const RunData *r, const char *name, const char *fallback, char *buf, size_t size);
