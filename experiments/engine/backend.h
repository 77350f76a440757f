// backend.h: `--backend cpu|cuda`, for the experiments that measure on either (kv_cache,
// attention_kernels, hardware_budget). The CPU is the default; `cuda` runs the same
// measurements on the GPU (engine/model_cuda.h, kernels_cuda.h) and writes them to CSVs of
// their own, named with a _cuda suffix (kv_cache_runs.csv -> kv_cache_runs_cuda.csv; only
// attention_kernels keeps the names `make gpu-check` gave its files, cuda_attention.csv and
// cuda_gemm.csv), so the two backends are separate make targets and each re-runs only when
// it is stale. Every row carries the backend as its first (key) column.
//
// Without CUDA in the build, or without a usable device, `--backend cuda` ends the program
// with exit status 2 and "<program>: not run: ..." on stderr before anything is written.
//
//   Backend b = BACKEND_CPU;
//   case OPT_BACKEND: bad = backend_parse(optarg, &b, &err); break;
//   ...
//   backend_require(b, "kv_cache");      // exits 2 when b is cuda and there is no device
//   backend_csv_path(path, sizeof path, dir, "kv_cache_runs", b);
#pragma once

#include <stddef.h>

#include "common.h"
#include "ops.h"

typedef enum { BACKEND_CPU = 0, BACKEND_CUDA } Backend;

#define BACKEND_HELP \
    "  --backend B      cpu (default) or cuda: the same measurements on the GPU, into *_cuda.csv\n"

const char *backend_name(Backend b); // "cpu", "cuda": the value of the backend column
// "cpu" or "cuda" into *out; -1 and err naming --backend otherwise.
int backend_parse(const char *text, Backend *out, Error *err);
// For BACKEND_CUDA: unless this build has CUDA and a device can be used, print
// "<program>: not run: <why>" on stderr and exit(2). Does not initialise the device.
void backend_require(Backend b, const char *program);
// The ops table of b (ops.h), the device initialised for CUDA; backend_close undoes it.
// Call backend_require first.
const Ops *backend_open(Backend b);
void backend_close(Backend b);
// dir/<stem>.csv for the CPU, dir/<stem>_cuda.csv for CUDA; dies if it does not fit.
void backend_csv_path(char *buf, size_t size, const char *dir, const char *stem, Backend b);
