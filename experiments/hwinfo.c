// hwinfo.c: bin/hwinfo, what the lab sees of this machine: the probe that goes into every
// run's meta.csv, and the slug that names the run directory out/<hw>/.
//
//   bin/hwinfo          key,value lines (the meta.csv hardware keys)
//   bin/hwinfo --slug   the slug alone (the Makefile uses it for OUT)
#include <stdio.h>
#include <string.h>

#include "hw.h"

int main(int argc, char **argv) {
    int slug_only = argc == 2 && strcmp(argv[1], "--slug") == 0;
    if (argc > 2 || (argc == 2 && !slug_only)) {
        fprintf(stderr, "usage: bin/hwinfo [--slug]\n");
        return argc == 2 && strcmp(argv[1], "--help") == 0 ? 0 : 2;
    }
    HwInfo hw;
    hw_probe(&hw);
    char slug[96];
    hw_slug(slug, sizeof slug, hw.cpu_model, hw.n_cpus, hw.gpu);
    if (slug_only) {
        puts(slug);
        return 0;
    }
    printf("hw,%s\ncpu_model,%s\nn_cpus,%d\nmem_bytes,%lld\ngpu,%s\nblas_core,%s\ncompiler,%s\ngit_commit,%s\n", slug,
           hw.cpu_model, hw.n_cpus, hw.mem_bytes, hw.gpu, hw.blas_core, hw.compiler, hw.git_commit);
    return 0;
}
