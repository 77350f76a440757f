// hw.h: which machine is this? A probe of the CPU, memory, GPU, BLAS, compiler, commit and
// date for meta.csv, and the short, stable slug that names a run directory out/<hw>/.
//
//   HwInfo hw;
//   hw_probe(&hw);
//   char slug[96];
//   hw_slug(slug, sizeof slug, hw.cpu_model, hw.n_cpus, hw.gpu);   // "amd-epyc-7b13-2c"
#pragma once

#include <stddef.h>

typedef struct {
    char cpu_model[128];   // /proc/cpuinfo "model name" (else "Hardware"/"Model", else uname -m)
    int n_cpus;            // online logical CPUs
    long long mem_bytes;   // physical memory
    char gpu[128];         // first NVIDIA GPU's model (/proc/driver/nvidia), "" when none
    char blas[256];        // OpenBLAS build configuration string
    char blas_core[64];    // OpenBLAS kernel set picked for this CPU (Haswell, Zen, ...)
    char blas_choice[256]; // who picked it: OpenBLAS, the user, or the lab (kernels_use_best_blas)
    int blas_threads;      // OpenBLAS threads at probe time
    char compiler[128];    // the compiler that built the engine, with its version
    char cflags[512];      // INFERLAB_CFLAGS when the build passes it, else "unknown"
    char git_commit[48];   // `git rev-parse --short HEAD` in the working directory, else "unknown"
    char date[32];         // now, UTC, ISO 8601
} HwInfo;

void hw_probe(HwInfo *hw);

// Lower-case words of the CPU model without vendor noise ("(R)", "CPU", "@ 2.45GHz",
// "8-Core Processor", "with Radeon Graphics"), then "<n_cpus>c", then the GPU's words when
// gpu is non-empty: "amd-epyc-7b13-2c", "intel-core-i7-8650u-8c-nvidia-geforce-rtx-3060".
// Only [a-z0-9-] appear; never empty. Truncated at a word boundary to fit size (>= 16).
void hw_slug(char *out, size_t size, const char *cpu_model, int n_cpus, const char *gpu);
