// fuzz_template.c: libFuzzer target for the report template parser (render/template.c:
// directives, options, @requires, @include of a missing file).
// An error return is fine; a crash, leak, hang or UB report is a bug. Run: make fuzz.
#include <stdint.h>

#include "fuzz_input.h"
#include "template.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    Template t;
    Error err;
    if (template_load(&t, fuzz_input_file(data, size, ".tmpl"), &err) == 0) template_free(&t);
    return 0;
}
