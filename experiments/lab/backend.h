// backend.h: `--backend cpu|cuda`, for the experiments that measure on either (kv_cache,
// attention_kernels, hardware_budget; the harness, lab.h, parses it). The CPU is the default;
// `cuda` runs the same measurements on the GPU through its ops table (ops.h, kernels_cuda.h). Every
// row of a measured table carries the backend as its first (key) column.
//
// Without CUDA in the build, or without a usable device, `--backend cuda` ends the program
// with exit status 2 and "<program>: not run: ..." on stderr before anything is written.
//
//   Backend b = BACKEND_CPU;
//   if (backend_parse(text, &b, &err)) ...   // --backend's value
//   backend_require(b, "kv_cache");          // exits 2 when b is cuda and there is no device
#pragma once

#include "common.h"
#include "ops.h"

typedef enum { BACKEND_CPU = 0, BACKEND_CUDA } Backend;

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
