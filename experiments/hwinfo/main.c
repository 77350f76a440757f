// hwinfo/main.c: bin/hwinfo, what the lab sees of this machine: the probe that goes into
// every run's meta.csv, and the slug that names the run directory out/<hw>/.
//
//   bin/hwinfo          key,value lines (the meta.csv hardware keys)
//   bin/hwinfo --slug   the slug alone (the Makefile uses it for OUT)
#include <stdio.h>

#include "lab.h"

static int slug_only;

static const LabOption OPTIONS[] = {
    {.name = "slug", .kind = LAB_FLAG, .value = &slug_only,
     .help = "print the slug alone (the Makefile uses it for OUT)"},
    {0},
};

static int run(LabRun *r) {
    const HwInfo *hw = &r->hw;
    char slug[96];
    hw_slug(slug, sizeof slug, hw);
    if (slug_only) {
        puts(slug);
        return 0;
    }
    printf("hw,%s\ncpu_model,%s\ncpu_uarch,%s\ncpu_isa,%s\nllc_bytes,%lld\nn_cpus,%d\nmem_bytes,%lld\ngpu,%s\n"
           "blas_core,%s\ncompiler,%s\ngit_commit,%s\n",
           slug, hw->cpu_model, hw->cpu_uarch, hw->cpu_isa, hw->llc_bytes, hw->n_cpus, hw->mem_bytes, hw->gpu,
           hw->blas_core, hw->compiler, hw->git_commit);
    return 0;
}

static const Experiment HWINFO = {"hwinfo", "[--slug]", "Print the hardware probe as key,value lines.", OPTIONS,
                                  NULL, 0, NULL, run};

int main(int argc, char **argv) { return lab_main(&HWINFO, argc, argv); }
