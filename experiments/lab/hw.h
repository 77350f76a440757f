// hw.h: which machine is this? A probe of the CPU, memory, GPU, BLAS, compiler, commit and
// date for meta.csv, and the short, stable slug that names a run directory out/<hw>/.
//
//   HwInfo hw;
//   hw_probe(&hw);
//   char slug[96];
//   hw_slug(slug, sizeof slug, &hw);   // "intel-xeon-emerald-rapids-avx512-2c-llc260m"
#pragma once

#include <stddef.h>

typedef struct {
    char cpu_model[128];   // /proc/cpuinfo "model name" (else "Hardware"/"Model", else uname -m)
    char cpu_uarch[32];    // x86 microarchitecture from CPUID family/model ("zen5", "emerald-rapids";
                           // "family-6-model-207" where the table has none), "" elsewhere
    char cpu_isa[16];      // widest vector ISA the CPU runs: "avx512", "avx2", "avx", "sse4"; "" else
    long long llc_bytes;   // the last-level cache as cpu0 sees it (sysfs), 0 when unknown
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
// "8-Core Processor", "with Radeon Graphics"), then the microarchitecture, the vector ISA,
// "<n_cpus>c" and "llc<MiB>m" (each where known), then the GPU's words when gpu is non-empty:
// "amd-epyc-zen5-avx512-2c-llc32m", "intel-core-i7-8650u-kaby-lake-avx2-8c-llc8m-nvidia-geforce-
// rtx-3060". VMs that report only "AMD EPYC" thus still name a Zen 4 and a Zen 5 apart. Only
// [a-z0-9-] appear; never empty. The model's words are cut at a word boundary to fit size (>= 48)
// before anything after them is.
void hw_slug(char *out, size_t size, const HwInfo *hw);
