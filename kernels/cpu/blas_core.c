// blas_core.c: make OpenBLAS run the kernel set this CPU can run.
//
// Debian's OpenBLAS is built with DYNAMIC_ARCH: when the library loads it reads CPUID and
// picks a kernel set ("Haswell", "SkylakeX", "Zen", ...). On a CPU it does not recognise it
// falls back to a generic one: an Intel Xeon with AVX-512 was identified as "Prescott" (SSE3)
// and ran sgemm 4.8x below its SkylakeX kernels. The choice can be overridden only through
// OPENBLAS_CORETYPE, read at load time, before main; so when the pick is weaker than the CPU
// and the user set nothing, the program re-executes itself once with the better set named.
//
//   int main(int argc, char **argv) { kernels_use_best_blas(argv); ... }
#include <cblas.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "kernels.h"

// Set in the re-executed program: the kernel set OpenBLAS had picked on its own.
#define REPICKED_ENV "INFERLAB_BLAS_PICKED"

IsaLevel isa_level_of_cpu(void) {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_cpu_init();
    // libgcc also checks that the OS saves the wider registers (XGETBV) before saying yes.
    if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
        __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vl"))
        return ISA_AVX512;
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return ISA_AVX2;
    if (__builtin_cpu_supports("avx")) return ISA_AVX;
#endif
    return ISA_BASE;
}

const char *isa_level_name(IsaLevel l) {
    static const char *NAMES[] = {"sse", "avx", "avx2+fma", "avx512"};
    return NAMES[l];
}

// OpenBLAS's x86 kernel sets by the widest vectors their sgemm uses (driver/others/dynamic.c).
static const struct {
    const char *core;
    IsaLevel level;
} CORE_LEVELS[] = {
    {"SkylakeX", ISA_AVX512},    {"Cooperlake", ISA_AVX512},  {"SapphireRapids", ISA_AVX512},
    {"Haswell", ISA_AVX2},       {"Zen", ISA_AVX2},           {"Sandybridge", ISA_AVX},
    {"Bulldozer", ISA_AVX},      {"Piledriver", ISA_AVX},     {"Steamroller", ISA_AVX},
    {"Excavator", ISA_AVX},
};

IsaLevel isa_level_of_blas_core(const char *core) {
    for (size_t i = 0; i < sizeof CORE_LEVELS / sizeof CORE_LEVELS[0]; i++)
        if (strcasecmp(core, CORE_LEVELS[i].core) == 0) return CORE_LEVELS[i].level;
    return ISA_BASE; // Prescott, Core2, Nehalem, Atom, ...: SSE kernels
}

const char *blas_core_for(IsaLevel cpu, const char *picked) {
    if (isa_level_of_blas_core(picked) >= cpu) return NULL;
    static const char *BEST[] = {NULL, "Sandybridge", "Haswell", "SkylakeX"};
    return BEST[cpu];
}

static char blas_choice[256];

void kernels_use_best_blas(char **argv) {
    const char *picked = openblas_get_corename(), *repicked = getenv(REPICKED_ENV);
    if (repicked) {
        snprintf(blas_choice, sizeof blas_choice, "OpenBLAS picked %s for this %s CPU; the lab set OPENBLAS_CORETYPE=%s",
                 repicked, isa_level_name(isa_level_of_cpu()), picked);
        return;
    }
    if (getenv("OPENBLAS_CORETYPE")) {
        snprintf(blas_choice, sizeof blas_choice, "OPENBLAS_CORETYPE=%s, set by the user", getenv("OPENBLAS_CORETYPE"));
        return;
    }
    const char *better = blas_core_for(isa_level_of_cpu(), picked);
    snprintf(blas_choice, sizeof blas_choice, "picked by OpenBLAS");
    if (!better) return;
    setenv("OPENBLAS_CORETYPE", better, 1);
    setenv(REPICKED_ENV, picked, 1);
    execv("/proc/self/exe", argv);
    // Still here: run on the weaker kernels, and say so where the figures will be read.
    fprintf(stderr, "warning: OpenBLAS picked %s on a CPU that runs %s kernels, and re-running with "
                    "OPENBLAS_CORETYPE=%s failed; matmuls will be slow\n", picked, better, better);
    snprintf(blas_choice, sizeof blas_choice, "picked by OpenBLAS (%s; re-running with %s failed)", picked, better);
}

const char *kernels_blas_choice(void) { return blas_choice[0] ? blas_choice : "picked by OpenBLAS"; }
