// fuzz_csv.c: libFuzzer target for the CSV readers: the base layer's csv_read_table (header
// lookup by column name, quoting, field counts; kernels/base/csv.c) and the renderer's
// table_parse (render/table.c), on the same bytes.
// An error return is fine; a crash, leak, hang or UB report is a bug. Run: make fuzz.
#include <stdint.h>
#include <stdlib.h>

#include "csv.h"
#include "fuzz_input.h"
#include "table.h"

static const char *const COLUMNS[] = {"backend", "seq_len"};

// Each row's values parsed as a caller would: a name and a number.
static int parse_row(void *table, char **values, const char *path, int line, Error *err) {
    (void)table;
    char *end;
    strtod(values[1], &end);
    if (end == values[1]) return error_set(err, "%s:%d: seq_len '%s' is not a number", path, line, values[1]);
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    Error err;
    csv_read_table(fuzz_input_file(data, size, ".csv"), COLUMNS, 2, parse_row, NULL, &err);
    Table t;
    if (table_parse(&t, "fuzz.csv", (const char *)data, size, &err) == 0) table_free(&t);
    return 0;
}
