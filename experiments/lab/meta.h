// meta.h: the run directory's record of where and how its CSVs were made:
// <dir>/meta.csv, a two-column key,value table (DESIGN.md, "CSV contract"): the hardware
// probe, compiler and flags, BLAS, git commit, profile, date, plus whatever a caller adds
// (model checksums, thread counts). Each experiment merges its keys into the same file.
//
//   HwInfo hw; hw_probe(&hw);
//   MetaEntry extra[] = {{"model_target_fnv1a64", sum}};
//   if (meta_write("out/amd-epyc-2c", &hw, "full", extra, 1, &err)) die("%s", err.msg);
#pragma once

#include <stddef.h>

#include "common.h"
#include "hw.h"

typedef struct {
    const char *key;   // [a-z0-9_]+
    const char *value; // any text without line breaks
} MetaEntry;

// Create dir and any missing parents, like mkdir -p.
int meta_make_dir(const char *dir, Error *err);

// Write <dir>/meta.csv atomically (temp file + rename) under a lock on dir, so concurrent
// experiments do not lose each other's keys. Rows: the probe's keys in a fixed order
// (hw, cpu_model, n_cpus, mem_bytes, gpu, blas, blas_core, blas_threads, compiler, cflags,
// git_commit, date), then profile, then the keys of an existing meta.csv that this call
// does not set, in their order, then the extra entries; an extra entry replaces an
// existing key's value in place. Fails with err naming the file and line when an existing
// meta.csv is malformed, or when dir cannot be locked or written.
int meta_write(const char *dir, const HwInfo *hw, const char *profile, const MetaEntry *extra, int n_extra,
               Error *err);

// FNV-1a 64-bit hash of a file's bytes as 16 lower-case hex digits (a cheap identity for
// model checksums, not a cryptographic hash). out must hold 17 bytes.
int meta_file_checksum(const char *path, char out[17], Error *err);
