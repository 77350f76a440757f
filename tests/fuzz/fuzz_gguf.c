// fuzz_gguf.c: libFuzzer target for the GGUF reader (experiments/formats/gguf.c): gguf_open on
// any bytes, then every typed getter on every key and every tensor converted to f32. An error
// return is fine; a crash, leak, hang or UB report is a bug. Run: make fuzz FUZZ_SECONDS=N.
#include <stdint.h>
#include <stdlib.h>

#include "fuzz_input.h"
#include "gguf.h"

#define MAX_TENSOR_ELEMS ((size_t)1 << 22) // larger tensors are skipped to keep executions fast

static void read_every_key(const GGUFFile *g) {
    Error err;
    for (size_t i = 0; i < g->n_kv; i++) {
        const char *key = g->kv[i].key;
        int64_t n;
        double x;
        int b;
        GGUFString s;
        gguf_get_int(g, key, &n, &err);
        gguf_get_float(g, key, &x, &err);
        gguf_get_bool(g, key, &b, &err);
        gguf_get_string(g, key, &s, &err);
        int32_t *ints;
        float *floats;
        GGUFString *strings;
        size_t count;
        if (gguf_get_array_i32(g, key, &ints, &count, &err) == 0) free(ints);
        if (gguf_get_array_f32(g, key, &floats, &count, &err) == 0) free(floats);
        if (gguf_get_array_string(g, key, &strings, &count, &err) == 0) free(strings);
    }
}

static void read_every_tensor(const GGUFFile *g) {
    for (size_t i = 0; i < g->n_tensors; i++) {
        const GGUFTensor *t = &g->tensors[i];
        if (t->n_elems > MAX_TENSOR_ELEMS) continue;
        float *dst = malloc((t->n_elems ? t->n_elems : 1) * sizeof *dst);
        gguf_tensor_to_f32(t, dst);
        free(dst);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    GGUFFile g;
    Error err;
    if (gguf_open(&g, fuzz_input_file(data, size, ".gguf"), &err) != 0) return 0;
    read_every_key(&g);
    read_every_tensor(&g);
    gguf_close(&g);
    return 0;
}
