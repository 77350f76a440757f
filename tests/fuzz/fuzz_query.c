// fuzz_query.c: libFuzzer target for the template's {...} expressions (render/query.c):
// expand_text over any text, against the render tests' fixture run (tests/fixtures/render/run_a,
// its CSVs and meta.csv; the templates fixture as the reference directory), as one run and as
// a comparison of two. An error return is fine; a crash, leak, hang or UB report is a bug.
// Run: make fuzz (from the repository root, which holds the fixtures).
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "fuzz_input.h"
#include "query.h"
#include "rundata.h"

static RunData run; // opened once: its tables load on first use and stay loaded

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc, (void)argv;
    Error err;
    if (rundata_open(&run, "tests/fixtures/render/run_a", "tests/fixtures/render/templates", &err) != 0) {
        fprintf(stderr, "fuzz_query: %s (run it from the repository root)\n", err.msg);
        exit(1);
    }
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    char *text = fuzz_input_string(data, size);
    RunData *runs[2] = {&run, &run};
    Error err;
    for (int n_runs = 1; n_runs <= 2; n_runs++) free(expand_text(text, "fuzz:1", runs, n_runs, 0, &err));
    free(text);
    return 0;
}
