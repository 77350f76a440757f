// gguf.c: GGUF v3 reader and writer, and model checkpoints stored in it (gguf.h describes the
// format, the keys and the tensor names). Tests: `make build/tests/test_gguf && ./build/tests/test_gguf`.
#include "gguf.h"

#include <errno.h>
#include <float.h>
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "arch.h"
#include "quant.h"
#include "quant_weights.h"
#include "tokenizer_gguf.h"

#if __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "gguf.c moves little-endian values with memcpy: port it before using a big-endian host"
#endif

static const char MAGIC[4] = {'G', 'G', 'U', 'F'};

// Bytes of one value of each type (string and array have none: their size is in the data).
// clang-format off
static const size_t VALUE_SIZE[GGUF_TYPE_COUNT] = {1, 1, 2, 2, 4, 4, 4, 1, 0, 0, 8, 8, 8};
static const char *VALUE_NAME[GGUF_TYPE_COUNT] = {
    "uint8", "int8", "uint16", "int16", "uint32", "int32", "float32",
    "bool",  "string", "array", "uint64", "int64", "float64"};
// clang-format on

// ggml's tensor type numbering, to name the (quantised) types we do not read.
static const char *ggml_type_name(uint32_t type) {
    // clang-format off
    static const char *names[] = {
        "F32",    "F16",    "Q4_0",   "Q4_1",  "Q4_2",   "Q4_3",   "Q5_0",   "Q5_1",
        "Q8_0",   "Q8_1",   "Q2_K",   "Q3_K",  "Q4_K",   "Q5_K",   "Q6_K",   "Q8_K",
        "IQ2_XXS", "IQ2_XS", "IQ3_XXS", "IQ1_S", "IQ4_NL", "IQ3_S",  "IQ2_S",  "IQ4_XS",
        "I8",     "I16",    "I32",    "I64",   "F64",    "IQ1_M",  "BF16"};
    // clang-format on
    return type < sizeof names / sizeof names[0] ? names[type] : "unknown";
}

// The tensor types we read and write are the weight types' GGUF ids (kernels/dtype.h).
int ggml_type_dtype(GGMLType t) { return dtype_from_gguf_type((int)t); }

int dtype_ggml_type(DType t) { return dtype_traits(t)->gguf_type; }

// Bytes of a tensor of n elements in rows of cols (F32 / F16: per element; quantised: whole
// rows, of at most INT_MAX weights, as the reader checks).
static size_t tensor_bytes(GGMLType type, size_t n, uint64_t cols) {
    DType t = (DType)ggml_type_dtype(type);
    if (t == DTYPE_F32 || t == DTYPE_F16) return n * dtype_size(t);
    return cols ? n / cols * dtype_row_bytes(t, (int)cols) : 0;
}

static char *str_dup_n(const void *s, size_t n) {
    char *d = mallocCheck(n + 1);
    if (n) memcpy(d, s, n);
    d[n] = '\0';
    return d;
}

static size_t align_up(size_t x, size_t alignment) { return (x + alignment - 1) / alignment * alignment; }

static int is_power_of_two(uint64_t x) { return x && (x & (x - 1)) == 0; }

// --- half precision --------------------------------------------------------------------

// The kernels' conversions (kernels/quant.h), which the quantised formats' scales use too.
float gguf_half_to_float(uint16_t h) { return fp16_to_fp32(h); }
uint16_t gguf_float_to_half(float f) { return fp32_to_fp16(f); }

// --- reading: a cursor that checks every byte it hands out -----------------------------

typedef struct {
    const uint8_t *buf;
    size_t size, pos;
    const char *path;
    Error *err;
} Cursor;

// 0 if n more bytes are in the file; otherwise an error saying what they were for.
static int cursor_need(Cursor *c, uint64_t n, const char *what) {
    if (n <= c->size - c->pos) return 0;
    return error_set(c->err, "%s: %s: %llu bytes at offset %zu run past the end of the file (%zu bytes)",
                     c->path, what, (unsigned long long)n, c->pos, c->size);
}

static int cursor_read(Cursor *c, void *dst, size_t n, const char *what) {
    if (cursor_need(c, n, what)) return -1;
    memcpy(dst, c->buf + c->pos, n);
    c->pos += n;
    return 0;
}

static int cursor_string(Cursor *c, GGUFString *s, const char *what) {
    uint64_t len;
    if (cursor_read(c, &len, 8, what) || cursor_need(c, len, what)) return -1;
    s->bytes = c->buf + c->pos;
    s->len = len;
    c->pos += len;
    return 0;
}

// A key or tensor name as a C string (NUL bytes inside would make lookups lie).
static char *cursor_name(Cursor *c, const char *what) {
    GGUFString s;
    if (cursor_string(c, &s, what)) return NULL;
    if (memchr(s.bytes, 0, s.len)) {
        error_set(c->err, "%s: %s: the name contains a NUL byte", c->path, what);
        return NULL;
    }
    return str_dup_n(s.bytes, s.len);
}

// Step over n values of elem_type, checking that they are all inside the file.
static int skip_values(Cursor *c, GGUFType elem_type, uint64_t n, const char *what) {
    if (elem_type == GGUF_TYPE_STRING) {
        // Each string takes at least its 8-byte length: refuse impossible counts before looping.
        if (n > (c->size - c->pos) / 8)
            return error_set(c->err, "%s: %s: %llu strings cannot fit in the rest of the file", c->path, what,
                             (unsigned long long)n);
        GGUFString s;
        for (uint64_t i = 0; i < n; i++)
            if (cursor_string(c, &s, what)) return -1;
        return 0;
    }
    size_t size = VALUE_SIZE[elem_type];
    if (n > (c->size - c->pos) / size)
        return error_set(c->err, "%s: %s: %llu values of %zu bytes run past the end of the file", c->path,
                         what, (unsigned long long)n, size);
    c->pos += n * size;
    return 0;
}

static int parse_kv(Cursor *c, GGUFKV *kv, size_t index) {
    char what[128];
    snprintf(what, sizeof what, "key/value %zu", index);
    if (!(kv->key = cursor_name(c, what))) return -1;
    snprintf(what, sizeof what, "the value of '%.80s'", kv->key);
    uint32_t type;
    if (cursor_read(c, &type, 4, what)) return -1;
    if (type >= GGUF_TYPE_COUNT)
        return error_set(c->err, "%s: key '%s' has unknown value type %u", c->path, kv->key, type);
    kv->type = kv->elem_type = (GGUFType)type;
    kv->n = 1;
    if (type == GGUF_TYPE_ARRAY) {
        uint32_t elem_type;
        if (cursor_read(c, &elem_type, 4, what) || cursor_read(c, &kv->n, 8, what)) return -1;
        if (elem_type >= GGUF_TYPE_COUNT)
            return error_set(c->err, "%s: key '%s' is an array of unknown type %u", c->path, kv->key,
                             elem_type);
        if (elem_type == GGUF_TYPE_ARRAY)
            return error_set(c->err, "%s: key '%s' is an array of arrays (not supported)", c->path, kv->key);
        kv->elem_type = (GGUFType)elem_type;
    }
    kv->data = c->buf + c->pos;
    return skip_values(c, kv->elem_type, kv->n, what);
}

static int parse_tensor_info(Cursor *c, GGUFTensor *t, size_t index) {
    char what[128];
    snprintf(what, sizeof what, "tensor info %zu", index);
    if (!(t->name = cursor_name(c, what))) return -1;
    snprintf(what, sizeof what, "tensor '%.80s'", t->name);
    uint32_t n_dims, type;
    if (cursor_read(c, &n_dims, 4, what)) return -1;
    if (n_dims < 1 || n_dims > GGUF_MAX_DIMS)
        return error_set(c->err, "%s: %s has %u dimensions (1 to %d supported)", c->path, what, n_dims,
                         GGUF_MAX_DIMS);
    t->n_dims = (int)n_dims;
    uint64_t n = 1; // elements so far; kept <= SIZE_MAX / 4 so that the byte count cannot overflow
    for (int d = 0; d < GGUF_MAX_DIMS; d++) {
        t->dims[d] = 1;
        if (d < t->n_dims && cursor_read(c, &t->dims[d], 8, what)) return -1;
        if (t->dims[d] != 0 && n > SIZE_MAX / 4 / t->dims[d])
            return error_set(c->err, "%s: %s: its dimensions overflow the address space", c->path, what);
        n *= t->dims[d];
    }
    if (cursor_read(c, &type, 4, what) || cursor_read(c, &t->offset, 8, what)) return -1;
    int dtype = ggml_type_dtype((GGMLType)type);
    if (dtype < 0)
        return error_set(c->err, "%s: %s has type %s (%u); only F32, F16, Q4_0, Q8_0 and inferlab's int8 / int4 are supported",
                         c->path, what, ggml_type_name(type), type);
    if (dtype != DTYPE_F32 && dtype != DTYPE_F16 &&
        (t->dims[0] > INT_MAX || !dtype_holds_row(dtype, (int)t->dims[0]) || n / t->dims[0] > INT_MAX))
        return error_set(c->err, "%s: %s: rows of %llu weights cannot be %s (or too many rows)", c->path, what,
                         (unsigned long long)t->dims[0], dtype_name(dtype));
    t->type = (GGMLType)type;
    t->n_elems = (size_t)n;
    t->n_bytes = tensor_bytes(t->type, t->n_elems, t->dims[0]);
    return 0;
}

static int compare_names(const void *a, const void *b) {
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

// A name that occurs twice among n (sorting a copy of the list: hostile files can be large), or NULL.
static const char *find_duplicate(const char **names, size_t n) {
    qsort(names, n, sizeof *names, compare_names);
    for (size_t i = 1; i < n; i++)
        if (strcmp(names[i - 1], names[i]) == 0) return names[i];
    return NULL;
}

static int check_unique_names(const GGUFFile *g, Error *err) {
    size_t n = g->n_kv > g->n_tensors ? g->n_kv : g->n_tensors;
    const char **names = mallocCheck(n * sizeof *names);
    for (size_t i = 0; i < g->n_kv; i++) names[i] = g->kv[i].key;
    const char *dup_key = find_duplicate(names, g->n_kv);
    for (size_t i = 0; i < g->n_tensors; i++) names[i] = g->tensors[i].name;
    const char *dup_tensor = find_duplicate(names, g->n_tensors);
    int rc = 0;
    if (dup_key)
        rc = error_set(err, "%s: key '%s' occurs twice", g->path, dup_key);
    else if (dup_tensor)
        rc = error_set(err, "%s: tensor '%s' occurs twice", g->path, dup_tensor);
    free(names);
    return rc;
}

static int read_alignment(GGUFFile *g, Error *err) {
    g->alignment = GGUF_DEFAULT_ALIGNMENT;
    if (!gguf_find_kv(g, "general.alignment")) return 0;
    int64_t a;
    if (gguf_get_int(g, "general.alignment", &a, err)) return -1;
    if (a > (1 << 30) || !is_power_of_two((uint64_t)a))
        return error_set(err, "%s: general.alignment = %lld is not a power of two up to 2^30", g->path,
                         (long long)a);
    g->alignment = (size_t)a;
    return 0;
}

// The data section starts at the first aligned offset after the tensor infos (end).
static int place_tensor_data(GGUFFile *g, size_t end, Error *err) {
    if (g->n_tensors == 0) return 0;
    size_t start = align_up(end, g->alignment);
    if (start > g->size)
        return error_set(err, "%s: truncated: tensor data should start at offset %zu, the file has %zu bytes",
                         g->path, start, g->size);
    size_t data_size = g->size - start;
    for (size_t i = 0; i < g->n_tensors; i++) {
        GGUFTensor *t = &g->tensors[i];
        if (t->offset % g->alignment != 0)
            return error_set(err, "%s: tensor '%s': offset %llu is not a multiple of the alignment %zu",
                             g->path, t->name, (unsigned long long)t->offset, g->alignment);
        if (t->offset > data_size || t->n_bytes > data_size - t->offset)
            return error_set(err,
                             "%s: tensor '%s': %zu bytes at data offset %llu run past the end of the file "
                             "(the data section has %zu bytes)",
                             g->path, t->name, t->n_bytes, (unsigned long long)t->offset, data_size);
        t->data = g->buf + start + t->offset;
    }
    return 0;
}

static int parse_header(Cursor *c, GGUFFile *g, uint64_t *n_tensors, uint64_t *n_kv) {
    char magic[4];
    if (cursor_read(c, magic, 4, "the magic")) return -1;
    if (memcmp(magic, MAGIC, 4) != 0)
        return error_set(c->err, "%s: not a GGUF file (magic %02x %02x %02x %02x, expected \"GGUF\")",
                         g->path, (uint8_t)magic[0], (uint8_t)magic[1], (uint8_t)magic[2], (uint8_t)magic[3]);
    if (cursor_read(c, &g->version, 4, "the version")) return -1;
    if (g->version == 0x02000000u || g->version == 0x03000000u)
        return error_set(c->err, "%s: a big-endian GGUF file (not supported)", g->path);
    if (g->version != 2 && g->version != 3)
        return error_set(c->err, "%s: unsupported GGUF version %u (this reader handles 2 and 3)", g->path,
                         g->version);
    if (cursor_read(c, n_tensors, 8, "the tensor count") || cursor_read(c, n_kv, 8, "the key/value count"))
        return -1;
    // The smallest key/value takes 13 bytes and the smallest tensor info 32: refuse counts the
    // file cannot hold before allocating anything for them.
    size_t left = c->size - c->pos;
    if (*n_kv > left / 13)
        return error_set(c->err, "%s: %llu key/values cannot fit in a file of %zu bytes", g->path,
                         (unsigned long long)*n_kv, c->size);
    if (*n_tensors > left / 32)
        return error_set(c->err, "%s: %llu tensors cannot fit in a file of %zu bytes", g->path,
                         (unsigned long long)*n_tensors, c->size);
    return 0;
}

static int gguf_parse(GGUFFile *g, Error *err) {
    Cursor c = {g->buf, g->size, 0, g->path, err};
    uint64_t n_tensors, n_kv;
    if (parse_header(&c, g, &n_tensors, &n_kv)) return -1;
    g->n_kv = (size_t)n_kv;
    g->kv = callocCheck(g->n_kv, sizeof *g->kv);
    for (size_t i = 0; i < g->n_kv; i++)
        if (parse_kv(&c, &g->kv[i], i)) return -1;
    g->n_tensors = (size_t)n_tensors;
    g->tensors = callocCheck(g->n_tensors, sizeof *g->tensors);
    for (size_t i = 0; i < g->n_tensors; i++)
        if (parse_tensor_info(&c, &g->tensors[i], i)) return -1;
    if (check_unique_names(g, err) || read_alignment(g, err)) return -1;
    return place_tensor_data(g, c.pos, err);
}

int gguf_open(GGUFFile *g, const char *path, Error *err) {
    memset(g, 0, sizeof *g);
    g->path = str_dup_n(path, strlen(path));
    char *data = NULL;
    if (file_read_all(path, &data, &g->size, err) == 0) {
        g->buf = (uint8_t *)data;
        if (gguf_parse(g, err) == 0) return 0;
    }
    gguf_close(g);
    return -1;
}

void gguf_close(GGUFFile *g) {
    for (size_t i = 0; i < g->n_kv && g->kv; i++) free(g->kv[i].key);
    for (size_t i = 0; i < g->n_tensors && g->tensors; i++) free(g->tensors[i].name);
    free(g->kv);
    free(g->tensors);
    free(g->buf);
    free(g->path);
    memset(g, 0, sizeof *g);
}

const GGUFKV *gguf_find_kv(const GGUFFile *g, const char *key) {
    for (size_t i = 0; i < g->n_kv; i++)
        if (strcmp(g->kv[i].key, key) == 0) return &g->kv[i];
    return NULL;
}

const GGUFTensor *gguf_find_tensor(const GGUFFile *g, const char *name) {
    for (size_t i = 0; i < g->n_tensors; i++)
        if (strcmp(g->tensors[i].name, name) == 0) return &g->tensors[i];
    return NULL;
}

// --- typed access ------------------------------------------------------------------------

static int is_int_type(GGUFType t) {
    return t <= GGUF_TYPE_INT32 || t == GGUF_TYPE_UINT64 || t == GGUF_TYPE_INT64;
}

// clang-format off
#define LOAD_AS(T, p, out) do { T v_; memcpy(&v_, p, sizeof v_); *(out) = v_; } while (0)

// One integer of type t at p into *out; 0 when it does not fit in int64.
static int int_value(GGUFType t, const uint8_t *p, int64_t *out) {
    switch (t) {
    case GGUF_TYPE_UINT8:  LOAD_AS(uint8_t, p, out); return 1;
    case GGUF_TYPE_INT8:   LOAD_AS(int8_t, p, out); return 1;
    case GGUF_TYPE_UINT16: LOAD_AS(uint16_t, p, out); return 1;
    case GGUF_TYPE_INT16:  LOAD_AS(int16_t, p, out); return 1;
    case GGUF_TYPE_UINT32: LOAD_AS(uint32_t, p, out); return 1;
    case GGUF_TYPE_INT32:  LOAD_AS(int32_t, p, out); return 1;
    case GGUF_TYPE_INT64:  LOAD_AS(int64_t, p, out); return 1;
    case GGUF_TYPE_UINT64: {
        uint64_t v;
        memcpy(&v, p, 8);
        *out = (int64_t)v;
        return v <= INT64_MAX;
    }
    default: return 0;
    }
}
// clang-format on

static double float_value(GGUFType t, const uint8_t *p) {
    if (t == GGUF_TYPE_FLOAT64) {
        double v;
        memcpy(&v, p, 8);
        return v;
    }
    float v;
    memcpy(&v, p, 4);
    return v;
}

static int is_float_type(GGUFType t) { return t == GGUF_TYPE_FLOAT32 || t == GGUF_TYPE_FLOAT64; }

static int wrong_type(const GGUFFile *g, const GGUFKV *kv, const char *expected, Error *err) {
    return error_set(err, "%s: key '%s' is %s%s, expected %s", g->path, kv->key,
                     kv->type == GGUF_TYPE_ARRAY ? "an array of " : "", VALUE_NAME[kv->elem_type], expected);
}

// The key as a scalar (array = 0) or array (array = 1), or NULL with an error.
static const GGUFKV *find_kv_shaped(const GGUFFile *g, const char *key, int array, Error *err) {
    const GGUFKV *kv = gguf_find_kv(g, key);
    if (!kv)
        error_set(err, "%s: missing key '%s'", g->path, key);
    else if ((kv->type == GGUF_TYPE_ARRAY) != array) {
        wrong_type(g, kv, array ? "an array" : "a single value", err);
        return NULL;
    }
    return kv;
}

int gguf_get_int(const GGUFFile *g, const char *key, int64_t *out, Error *err) {
    const GGUFKV *kv = find_kv_shaped(g, key, 0, err);
    if (!kv) return -1;
    if (!is_int_type(kv->type)) return wrong_type(g, kv, "an integer", err);
    if (!int_value(kv->type, kv->data, out))
        return error_set(err, "%s: key '%s' does not fit in 64 bits", g->path, key);
    return 0;
}

int gguf_get_float(const GGUFFile *g, const char *key, double *out, Error *err) {
    const GGUFKV *kv = find_kv_shaped(g, key, 0, err);
    if (!kv) return -1;
    if (!is_float_type(kv->type)) return wrong_type(g, kv, "a float", err);
    *out = float_value(kv->type, kv->data);
    return 0;
}

int gguf_get_bool(const GGUFFile *g, const char *key, int *out, Error *err) {
    const GGUFKV *kv = find_kv_shaped(g, key, 0, err);
    if (!kv) return -1;
    if (kv->type != GGUF_TYPE_BOOL) return wrong_type(g, kv, "a bool", err);
    if (kv->data[0] > 1)
        return error_set(err, "%s: key '%s' is a bool of value %u (not 0 or 1)", g->path, key, kv->data[0]);
    *out = kv->data[0];
    return 0;
}

// The string at p, already checked to be inside the file by the parser.
static GGUFString string_at(const uint8_t *p) {
    uint64_t len;
    memcpy(&len, p, 8);
    return (GGUFString){p + 8, (size_t)len};
}

int gguf_get_string(const GGUFFile *g, const char *key, GGUFString *out, Error *err) {
    const GGUFKV *kv = find_kv_shaped(g, key, 0, err);
    if (!kv) return -1;
    if (kv->type != GGUF_TYPE_STRING) return wrong_type(g, kv, "a string", err);
    *out = string_at(kv->data);
    return 0;
}

int gguf_get_array_i32(const GGUFFile *g, const char *key, int32_t **out, size_t *n, Error *err) {
    const GGUFKV *kv = find_kv_shaped(g, key, 1, err);
    if (!kv) return -1;
    if (!is_int_type(kv->elem_type)) return wrong_type(g, kv, "an array of integers", err);
    int32_t *v = mallocCheck(kv->n * sizeof *v);
    for (size_t i = 0; i < kv->n; i++) {
        int64_t x;
        if (!int_value(kv->elem_type, kv->data + i * VALUE_SIZE[kv->elem_type], &x) || x < INT32_MIN ||
            x > INT32_MAX) {
            free(v);
            return error_set(err, "%s: key '%s': element %zu does not fit in int32", g->path, key, i);
        }
        v[i] = (int32_t)x;
    }
    *out = v;
    *n = kv->n;
    return 0;
}

int gguf_get_array_f32(const GGUFFile *g, const char *key, float **out, size_t *n, Error *err) {
    const GGUFKV *kv = find_kv_shaped(g, key, 1, err);
    if (!kv) return -1;
    if (!is_float_type(kv->elem_type)) return wrong_type(g, kv, "an array of floats", err);
    float *v = mallocCheck(kv->n * sizeof *v);
    for (size_t i = 0; i < kv->n; i++)
        v[i] = (float)float_value(kv->elem_type, kv->data + i * VALUE_SIZE[kv->elem_type]);
    *out = v;
    *n = kv->n;
    return 0;
}

int gguf_get_array_string(const GGUFFile *g, const char *key, GGUFString **out, size_t *n, Error *err) {
    const GGUFKV *kv = find_kv_shaped(g, key, 1, err);
    if (!kv) return -1;
    if (kv->elem_type != GGUF_TYPE_STRING) return wrong_type(g, kv, "an array of strings", err);
    GGUFString *v = mallocCheck(kv->n * sizeof *v);
    const uint8_t *p = kv->data;
    for (size_t i = 0; i < kv->n; i++) {
        v[i] = string_at(p);
        p += 8 + v[i].len;
    }
    *out = v;
    *n = kv->n;
    return 0;
}

void gguf_tensor_to_f32(const GGUFTensor *t, float *dst) {
    DType dtype = (DType)ggml_type_dtype(t->type);
    if (dtype_is_quantized(dtype)) {
        dequantize_matrix(dtype, dst, t->data, (int)(t->n_elems / t->dims[0]), (int)t->dims[0]);
        return;
    }
    if (t->type == GGML_TYPE_F32) {
        if (t->n_bytes) memcpy(dst, t->data, t->n_bytes);
        return;
    }
    for (size_t i = 0; i < t->n_elems; i++) {
        uint16_t h;
        memcpy(&h, t->data + 2 * i, 2);
        dst[i] = gguf_half_to_float(h);
    }
}

// --- writing -------------------------------------------------------------------------------

struct GGUFWriterTensor {
    char *name;
    GGMLType type;
    int n_dims;
    uint64_t dims[GGUF_MAX_DIMS];
    size_t n_elems, n_bytes;
    const float *data;  // F32 / F16: the f32 values to store
    const void *bytes;  // others: the bytes as stored
};

static void bytes_put(GGUFBytes *b, const void *p, size_t n) {
    if (n == 0) return;
    if (b->len + n > b->cap) {
        b->cap = b->len + n > 2 * b->cap ? b->len + n : 2 * b->cap;
        b->p = reallocCheck(b->p, b->cap);
    }
    memcpy(b->p + b->len, p, n);
    b->len += n;
}

static void bytes_u32(GGUFBytes *b, uint32_t v) { bytes_put(b, &v, 4); }
static void bytes_u64(GGUFBytes *b, uint64_t v) { bytes_put(b, &v, 8); }

static void bytes_string(GGUFBytes *b, const void *s, size_t len) {
    bytes_u64(b, len);
    bytes_put(b, s, len);
}

static void bytes_zeros(GGUFBytes *b, size_t n) {
    static const uint8_t zeros[64];
    for (size_t k; n > 0; n -= k) {
        k = n < sizeof zeros ? n : sizeof zeros;
        bytes_put(b, zeros, k);
    }
}

void gguf_writer_init(GGUFWriter *w) {
    memset(w, 0, sizeof *w);
    w->alignment = GGUF_DEFAULT_ALIGNMENT;
}

void gguf_writer_free(GGUFWriter *w) {
    for (size_t i = 0; i < w->n_kv; i++) free(w->keys[i]);
    for (size_t i = 0; i < w->n_tensors; i++) free(w->tensors[i].name);
    free(w->keys);
    free(w->tensors);
    free(w->kv.p);
    memset(w, 0, sizeof *w);
}

// Start a key/value: the duplicate check, the key, the type tag.
static void kv_begin(GGUFWriter *w, const char *key, GGUFType type) {
    for (size_t i = 0; i < w->n_kv; i++)
        if (strcmp(w->keys[i], key) == 0) die("gguf: key '%s' set twice", key);
    w->keys = reallocCheck(w->keys, (w->n_kv + 1) * sizeof *w->keys);
    w->keys[w->n_kv++] = str_dup_n(key, strlen(key));
    bytes_string(&w->kv, key, strlen(key));
    bytes_u32(&w->kv, type);
}

static void kv_begin_array(GGUFWriter *w, const char *key, GGUFType elem_type, size_t n) {
    kv_begin(w, key, GGUF_TYPE_ARRAY);
    bytes_u32(&w->kv, elem_type);
    bytes_u64(&w->kv, n);
}

void gguf_set_u32(GGUFWriter *w, const char *key, uint32_t v) {
    kv_begin(w, key, GGUF_TYPE_UINT32);
    bytes_u32(&w->kv, v);
}

void gguf_set_i32(GGUFWriter *w, const char *key, int32_t v) {
    kv_begin(w, key, GGUF_TYPE_INT32);
    bytes_put(&w->kv, &v, 4);
}

void gguf_set_f32(GGUFWriter *w, const char *key, float v) {
    kv_begin(w, key, GGUF_TYPE_FLOAT32);
    bytes_put(&w->kv, &v, 4);
}

void gguf_set_bool(GGUFWriter *w, const char *key, int v) {
    uint8_t b = v != 0;
    kv_begin(w, key, GGUF_TYPE_BOOL);
    bytes_put(&w->kv, &b, 1);
}

void gguf_set_string(GGUFWriter *w, const char *key, const char *s) {
    kv_begin(w, key, GGUF_TYPE_STRING);
    bytes_string(&w->kv, s, strlen(s));
}

void gguf_set_array_i32(GGUFWriter *w, const char *key, const int32_t *v, size_t n) {
    kv_begin_array(w, key, GGUF_TYPE_INT32, n);
    bytes_put(&w->kv, v, n * sizeof *v);
}

void gguf_set_array_f32(GGUFWriter *w, const char *key, const float *v, size_t n) {
    kv_begin_array(w, key, GGUF_TYPE_FLOAT32, n);
    bytes_put(&w->kv, v, n * sizeof *v);
}

void gguf_set_array_string(GGUFWriter *w, const char *key, const GGUFString *v, size_t n) {
    kv_begin_array(w, key, GGUF_TYPE_STRING, n);
    for (size_t i = 0; i < n; i++) bytes_string(&w->kv, v[i].bytes, v[i].len);
}

void gguf_set_alignment(GGUFWriter *w, uint32_t alignment) {
    if (!is_power_of_two(alignment) || alignment > (1u << 30))
        die("gguf: alignment %u is not a power of two", alignment);
    gguf_set_u32(w, "general.alignment", alignment);
    w->alignment = alignment;
}

static GGUFWriterTensor *add_tensor(GGUFWriter *w, const char *name, GGMLType type, int n_dims, const uint64_t *dims) {
    if (n_dims < 1 || n_dims > GGUF_MAX_DIMS) die("gguf: tensor '%s' has %d dimensions", name, n_dims);
    if (ggml_type_dtype(type) < 0) die("gguf: tensor '%s' has type %d", name, (int)type);
    for (size_t i = 0; i < w->n_tensors; i++)
        if (strcmp(w->tensors[i].name, name) == 0) die("gguf: tensor '%s' added twice", name);
    if (w->n_tensors == w->cap_tensors) {
        w->cap_tensors = w->cap_tensors ? 2 * w->cap_tensors : 16;
        w->tensors = reallocCheck(w->tensors, w->cap_tensors * sizeof *w->tensors);
    }
    GGUFWriterTensor *t = &w->tensors[w->n_tensors++];
    t->name = str_dup_n(name, strlen(name));
    t->type = type;
    t->n_dims = n_dims;
    t->n_elems = 1;
    for (int d = 0; d < GGUF_MAX_DIMS; d++) {
        t->dims[d] = d < n_dims ? dims[d] : 1;
        t->n_elems *= t->dims[d];
    }
    t->n_bytes = tensor_bytes(type, t->n_elems, t->dims[0]);
    t->data = NULL;
    t->bytes = NULL;
    return t;
}

void gguf_add_tensor(GGUFWriter *w, const char *name, GGMLType type, int n_dims, const uint64_t *dims,
                     const float *data) {
    if (type != GGML_TYPE_F32 && type != GGML_TYPE_F16) die("gguf: tensor '%s': type %d is stored from bytes", name, (int)type);
    add_tensor(w, name, type, n_dims, dims)->data = data;
}

void gguf_add_tensor_bytes(GGUFWriter *w, const char *name, GGMLType type, int n_dims, const uint64_t *dims,
                           const void *bytes) {
    int dtype = ggml_type_dtype(type);
    if (dtype >= 0 && dtype != DTYPE_F32 && dtype != DTYPE_F16 && !dtype_holds_row(dtype, (int)dims[0]))
        die("gguf: tensor '%s': rows of %llu cannot be %s", name, (unsigned long long)dims[0], dtype_name(dtype));
    add_tensor(w, name, type, n_dims, dims)->bytes = bytes;
}

static void write_tensor_data(FILE *f, const GGUFWriterTensor *t) {
    if (t->bytes) {
        fwriteCheck(t->bytes, 1, t->n_bytes, f);
        return;
    }
    if (t->type == GGML_TYPE_F32) {
        fwriteCheck(t->data, sizeof(float), t->n_elems, f);
        return;
    }
    uint16_t half[1024];
    for (size_t i = 0; i < t->n_elems; i += 1024) {
        size_t n = t->n_elems - i < 1024 ? t->n_elems - i : 1024;
        for (size_t j = 0; j < n; j++) half[j] = gguf_float_to_half(t->data[i + j]);
        fwriteCheck(half, sizeof *half, n, f);
    }
}

void gguf_write(const GGUFWriter *w, const char *path) {
    GGUFBytes head = {0};
    bytes_put(&head, MAGIC, 4);
    bytes_u32(&head, GGUF_VERSION);
    bytes_u64(&head, w->n_tensors);
    bytes_u64(&head, w->n_kv);
    bytes_put(&head, w->kv.p, w->kv.len);
    uint64_t offset = 0;
    for (size_t i = 0; i < w->n_tensors; i++) {
        const GGUFWriterTensor *t = &w->tensors[i];
        bytes_string(&head, t->name, strlen(t->name));
        bytes_u32(&head, (uint32_t)t->n_dims);
        for (int d = 0; d < t->n_dims; d++) bytes_u64(&head, t->dims[d]);
        bytes_u32(&head, t->type);
        bytes_u64(&head, offset);
        offset += align_up(t->n_bytes, w->alignment);
    }
    bytes_zeros(&head, align_up(head.len, w->alignment) - head.len);

    AtomicFile af = atomic_open(path);
    fwriteCheck(head.p, 1, head.len, af.f);
    GGUFBytes pad = {0};
    bytes_zeros(&pad, w->alignment);
    for (size_t i = 0; i < w->n_tensors; i++) {
        const GGUFWriterTensor *t = &w->tensors[i];
        write_tensor_data(af.f, t);
        fwriteCheck(pad.p, 1, align_up(t->n_bytes, w->alignment) - t->n_bytes, af.f);
    }
    atomic_commit(&af);
    free(pad.p);
    free(head.p);
}

// --- model checkpoints ---------------------------------------------------------------------

// The model's tensors in file order (arch.h), malloc'd; *n: how many.
static ModelTensor *model_tensor_list(const Model *m, size_t *n) {
    *n = model_tensors(&m->config, &m->weights, NULL);
    ModelTensor *t = mallocCheck(*n * sizeof *t);
    model_tensors(&m->config, &m->weights, t);
    return t;
}

static void config_to_gguf(GGUFWriter *w, const Config *c) {
    if (c->arch != ARCH_LLAMA) die("gguf: writing %s checkpoints is not implemented (the lab reads them)", model_arch(c)->name);
    gguf_set_u32(w, "llama.context_length", (uint32_t)c->seq_len);
    gguf_set_u32(w, "llama.embedding_length", (uint32_t)c->dim);
    gguf_set_u32(w, "llama.feed_forward_length", (uint32_t)c->hidden_dim);
    gguf_set_u32(w, "llama.block_count", (uint32_t)c->n_layers);
    gguf_set_u32(w, "llama.vocab_size", (uint32_t)c->vocab_size);
    gguf_set_u32(w, "llama.attention.head_count", (uint32_t)c->n_heads);
    gguf_set_u32(w, "llama.attention.head_count_kv", (uint32_t)c->n_kv_heads);
    // MLA as llama.cpp's deepseek2 spells it: keys of hd + d_r, values of hd, RoPE on d_r
    gguf_set_u32(w, "llama.attention.key_length", (uint32_t)(c->head_dim + c->rope_dim));
    gguf_set_u32(w, "llama.attention.value_length", (uint32_t)c->head_dim);
    if (c->kv_lora_rank) gguf_set_u32(w, "llama.attention.kv_lora_rank", (uint32_t)c->kv_lora_rank);
    gguf_set_f32(w, "llama.attention.layer_norm_rms_epsilon", c->norm_eps);
    int rope_dims = c->kv_lora_rank ? c->rope_dim : c->head_dim;
    gguf_set_u32(w, "llama.rope.dimension_count", (uint32_t)rope_dims);
    // llama.cpp has no "ntk" type: NTK-aware scaling is plain RoPE with the NTK base
    int ntk = c->rope.scaling == ROPE_NTK;
    gguf_set_f32(w, "llama.rope.freq_base", (float)rope_base(&c->rope, rope_dims));
    gguf_set_string(w, "llama.rope.scaling.type", rope_scaling_name(ntk ? ROPE_NONE : c->rope.scaling));
    gguf_set_f32(w, "llama.rope.scaling.factor", ntk ? 1.0f : c->rope.factor);
    gguf_set_u32(w, "llama.rope.scaling.original_context_length", (uint32_t)c->rope.orig_ctx);
    gguf_set_f32(w, "llama.rope.scaling.yarn_beta_fast", c->rope.beta_fast);
    gguf_set_f32(w, "llama.rope.scaling.yarn_beta_slow", c->rope.beta_slow);
    gguf_set_u32(w, "llama.attention.sliding_window", (uint32_t)c->window);
    gguf_set_u32(w, "inferlab.attention.n_sink", (uint32_t)c->n_sink);
    if (c->kv_share > 1) gguf_set_u32(w, "inferlab.attention.kv_share", (uint32_t)c->kv_share); // CLA: llama.cpp has no key
    if (c->global_every) { // local / global layers in a llama file (llama.cpp knows them as gemma3's)
        gguf_set_u32(w, "inferlab.attention.global_every", (uint32_t)c->global_every);
        if (c->rope_theta_global) gguf_set_f32(w, "inferlab.rope.freq_base_global", c->rope_theta_global);
        if (c->global_windowed) gguf_set_u32(w, "inferlab.attention.global_windowed", 1);
    }
    gguf_set_bool(w, "inferlab.tied_embeddings", c->tied_embeddings);
}

// A copy of s with every occurrence of `from` replaced by `to` (malloc'd bytes).
static GGUFString replace_bytes(GGUFString s, const char *from, const char *to) {
    size_t nf = strlen(from), nt = strlen(to), count = 0;
    for (size_t i = 0; i + nf <= s.len; i++)
        if (memcmp(s.bytes + i, from, nf) == 0) count++, i += nf - 1;
    uint8_t *out = mallocCheck(s.len + count * nt + 1), *o = out;
    for (size_t i = 0; i < s.len;) {
        if (i + nf <= s.len && memcmp(s.bytes + i, from, nf) == 0) {
            memcpy(o, to, nt);
            o += nt;
            i += nf;
        } else {
            *o++ = s.bytes[i++];
        }
    }
    return (GGUFString){out, (size_t)(o - out)};
}

// SentencePiece (and llama.cpp) spell a space inside a piece as U+2581; llama2.c's
// tokenizer.bin spells it ' '.
static const char SP_SPACE[] = "\xe2\x96\x81";

// llama.cpp's token types: 1 normal, 3 control (BOS and EOS).
enum { TOKEN_TYPE_NORMAL = 1, TOKEN_TYPE_CONTROL = 3 };

// A BPE piece spelled in GPT-2's alphabet (malloc'd); BOS and EOS stay raw text, as GPT-2's
// own vocabulary stores "<|endoftext|>".
static GGUFString gpt2_token(const Tokenizer *t, int id) {
    size_t len = (size_t)t->piece_len[id];
    uint8_t *out = mallocCheck(2 * len + 1);
    if (id == t->bos_id || id == t->eos_id) memcpy(out, t->pieces[id], len);
    else len = tokenizer_gpt2_spell(t->pieces[id], len, out);
    return (GGUFString){out, len};
}

// "left right": merge i's two tokens, spelled, joined by a space (malloc'd).
static GGUFString gpt2_merge(const Tokenizer *t, int i) {
    GGUFString left = gpt2_token(t, t->merges[2 * i]), right = gpt2_token(t, t->merges[2 * i + 1]);
    uint8_t *out = mallocCheck(left.len + right.len + 1);
    memcpy(out, left.bytes, left.len);
    out[left.len] = ' ';
    memcpy(out + left.len + 1, right.bytes, right.len);
    GGUFString m = {out, left.len + right.len + 1};
    free((void *)left.bytes);
    free((void *)right.bytes);
    return m;
}

static void free_strings(GGUFString *s, size_t n) {
    for (size_t i = 0; i < n; i++) free((void *)s[i].bytes);
    free(s);
}

static void tokenizer_to_gguf(GGUFWriter *w, const Tokenizer *t) {
    if (t->llama_cpp) die("model_save_gguf: writing a tokenizer read from another program's GGUF is not supported");
    int llama = t->kind == TOKENIZER_LLAMA2C;
    GGUFString *tokens = mallocCheck((size_t)t->vocab_size * sizeof *tokens);
    for (int i = 0; i < t->vocab_size; i++) {
        GGUFString piece = {t->pieces[i], (size_t)t->piece_len[i]};
        tokens[i] = llama ? replace_bytes(piece, " ", SP_SPACE) : gpt2_token(t, i);
    }
    gguf_set_string(w, "tokenizer.ggml.model", llama ? "llama" : "gpt2");
    if (!llama) gguf_set_string(w, "tokenizer.ggml.pre", TOKENIZER_BPE_PRE);
    gguf_set_array_string(w, "tokenizer.ggml.tokens", tokens, (size_t)t->vocab_size);
    if (llama) {
        gguf_set_array_f32(w, "tokenizer.ggml.scores", t->scores, (size_t)t->vocab_size);
    } else {
        int32_t *types = mallocCheck((size_t)t->vocab_size * sizeof *types);
        for (int i = 0; i < t->vocab_size; i++)
            types[i] = i == t->bos_id || i == t->eos_id ? TOKEN_TYPE_CONTROL : TOKEN_TYPE_NORMAL;
        gguf_set_array_i32(w, "tokenizer.ggml.token_type", types, (size_t)t->vocab_size);
        free(types);
        GGUFString *merges = mallocCheck((size_t)t->n_merges * sizeof *merges + 1);
        for (int i = 0; i < t->n_merges; i++) merges[i] = gpt2_merge(t, i);
        gguf_set_array_string(w, "tokenizer.ggml.merges", merges, (size_t)t->n_merges);
        free_strings(merges, (size_t)t->n_merges);
    }
    gguf_set_u32(w, "tokenizer.ggml.bos_token_id", (uint32_t)t->bos_id);
    gguf_set_u32(w, "tokenizer.ggml.eos_token_id", (uint32_t)t->eos_id);
    if (!llama) { // our sequences start with BOS (training, validation, passkeys); llama.cpp must add it too
        gguf_set_bool(w, "tokenizer.ggml.add_bos_token", 1);
        gguf_set_bool(w, "tokenizer.ggml.add_eos_token", 0);
    }
    free_strings(tokens, (size_t)t->vocab_size);
}

// LLM.int8()'s fp32 columns of a matrix (outliers.h) as two F32 tensors beside it:
// <name>.outlier_cols (n) the column indices (exact in fp32), <name>.outlier_weight (rows, n).
// Returns the index array, which must live until the write.
static float *outliers_to_gguf(GGUFWriter *w, const char *name, const Tensor *qt) {
    const TensorOutliers *o = qt->outliers;
    float *cols = mallocCheck((size_t)o->n * sizeof(float));
    for (int k = 0; k < o->n; k++) cols[k] = (float)o->cols[k];
    char key[320];
    uint64_t dims_cols[1] = {(uint64_t)o->n}, dims_w[2] = {(uint64_t)o->n, (uint64_t)qt->rows};
    snprintf(key, sizeof key, "%s.outlier_cols", name);
    gguf_add_tensor(w, key, GGML_TYPE_F32, 1, dims_cols, cols);
    snprintf(key, sizeof key, "%s.outlier_weight", name);
    gguf_add_tensor(w, key, GGML_TYPE_F32, 2, dims_w, o->w);
    return cols;
}

// The fp32 columns of matrix k read back (none when the file has none for it), the host weights
// given their values; a malformed pair is an error naming the file.
static int outliers_from_gguf(const GGUFFile *g, Model *m, const char *name, int k, float *host, Error *err) {
    char key[320];
    snprintf(key, sizeof key, "%s.outlier_cols", name);
    const GGUFTensor *gc = gguf_find_tensor(g, key);
    snprintf(key, sizeof key, "%s.outlier_weight", name);
    const GGUFTensor *gw = gguf_find_tensor(g, key);
    if (!gc && !gw) return 0;
    const Tensor *x = &m->quant->tensors[k];
    if (!gc || !gw || gc->type != GGML_TYPE_F32 || gw->type != GGML_TYPE_F32 || gc->n_dims != 1 || gw->n_dims != 2 ||
        gw->dims[0] != gc->dims[0] || gw->dims[1] != (uint64_t)x->rows || gc->dims[0] > (uint64_t)x->cols)
        return error_set(err, "%s: tensor '%s' has malformed outlier columns", g->path, name);
    int n = (int)gc->dims[0], *cols = mallocCheck((size_t)(n ? n : 1) * sizeof(int));
    float *w = mallocCheck((size_t)x->rows * (n ? n : 1) * sizeof(float));
    memcpy(w, gw->data, (size_t)x->rows * n * sizeof(float));
    for (int j = 0; j < n; j++) {
        float c;
        memcpy(&c, (const uint8_t *)gc->data + (size_t)j * sizeof(float), sizeof c);
        if (!(c >= 0 && c < x->cols && c == floorf(c)) || (j && (int)c <= cols[j - 1])) {
            free(cols), free(w);
            return error_set(err, "%s: tensor '%s': outlier column %g is not an increasing index below %d", g->path,
                             name, c, x->cols);
        }
        cols[j] = (int)c;
    }
    quant_weights_set_outliers(m->quant, k, n, cols, w);
    for (int r = 0; r < x->rows; r++)
        for (int j = 0; j < n; j++) host[(size_t)r * x->cols + cols[j]] = w[(size_t)r * n + j];
    free(cols), free(w);
    return 0;
}

void model_save_gguf(const char *path, const Model *m, const Tokenizer *tok, GGMLType wtype) {
    const Config *c = &m->config;
    char why[128];
    if (!config_validate(c, why, sizeof why)) die("model_save_gguf %s: invalid config: %s", path, why);
    if (tok && tok->vocab_size != c->vocab_size)
        die("model_save_gguf %s: tokenizer has %d tokens, the model %d", path, tok->vocab_size,
            c->vocab_size);
    GGUFWriter w;
    gguf_writer_init(&w);
    gguf_set_string(&w, "general.architecture", model_arch(c)->name);
    const QuantWeights *q = m->quant;
    // llama.cpp's file types: 0 all F32, 1 mostly F16, 2 mostly Q4_0, 7 mostly Q8_0
    uint32_t file_type = q ? (q->dtype == DTYPE_Q4_0 ? 2 : q->dtype == DTYPE_Q8_0 ? 7 : 0) : wtype == GGML_TYPE_F16;
    gguf_set_u32(&w, "general.file_type", file_type);
    if (q) {
        gguf_set_u32(&w, "general.quantization_version", 2);
        gguf_set_string(&w, "inferlab.quantization.type", dtype_name(q->dtype));
    }
    config_to_gguf(&w, c);
    if (tok) tokenizer_to_gguf(&w, tok);
    size_t n;
    ModelTensor *t = model_tensor_list(m, &n);
    float **outlier_cols = mallocCheck(n * sizeof(float *)); // kept until the write
    for (size_t i = 0; i < n; i++) {
        uint64_t dims[2] = {t[i].cols, t[i].rows};
        const Tensor *qt = q && t[i].rows ? quant_weights_find(q, t[i].data) : NULL;
        outlier_cols[i] = NULL;
        if (qt && qt->dtype != DTYPE_F32)
            gguf_add_tensor_bytes(&w, t[i].name, (GGMLType)dtype_ggml_type(qt->dtype), 2, dims, qt->data);
        else
            gguf_add_tensor(&w, t[i].name, t[i].rows && !q ? wtype : GGML_TYPE_F32, t[i].rows ? 2 : 1, dims, t[i].data);
        if (qt && qt->outliers && qt->outliers->n) outlier_cols[i] = outliers_to_gguf(&w, t[i].name, qt);
    }
    gguf_write(&w, path);
    for (size_t i = 0; i < n; i++) free(outlier_cols[i]);
    free(outlier_cols);
    free(t);
    gguf_writer_free(&w);
}

// A required integer config key, within [lo, INT_MAX].
static int key_int(const GGUFFile *g, const char *key, int lo, int *out, Error *err) {
    int64_t v;
    if (gguf_get_int(g, key, &v, err)) return -1;
    if (v < lo || v > INT_MAX)
        return error_set(err, "%s: %s = %lld is out of range [%d, %d]", g->path, key, (long long)v, lo,
                         INT_MAX);
    *out = (int)v;
    return 0;
}

// Optional keys leave the default in *out when absent.
static int opt_int(const GGUFFile *g, const char *key, int lo, int *out, Error *err) {
    return gguf_find_kv(g, key) ? key_int(g, key, lo, out, err) : 0;
}

static int opt_float(const GGUFFile *g, const char *key, float *out, Error *err) {
    double v;
    if (!gguf_find_kv(g, key)) return 0;
    if (gguf_get_float(g, key, &v, err)) return -1;
    if (!(fabs(v) <= FLT_MAX)) return error_set(err, "%s: %s = %g is not a finite float", g->path, key, v);
    *out = (float)v;
    return 0;
}

// "<arch>.<suffix>" into buf: the architecture's own key (llama.cpp prefixes every
// hyperparameter with general.architecture).
static const char *arch_key(char *buf, size_t n, const char *arch, const char *suffix) {
    snprintf(buf, n, "%s.%s", arch, suffix);
    return buf;
}

static int opt_rope_scaling(const GGUFFile *g, const char *arch, RopeScaling *out, Error *err) {
    char key[96];
    arch_key(key, sizeof key, arch, "rope.scaling.type");
    GGUFString s;
    if (!gguf_find_kv(g, key)) return 0;
    if (gguf_get_string(g, key, &s, err)) return -1;
    char name[16] = "";
    if (s.len < sizeof name) memcpy(name, s.bytes, s.len);
    int scaling = memchr(s.bytes, 0, s.len) ? -1 : rope_scaling_from_name(name);
    if (scaling < 0)
        return error_set(err, "%s: unknown %s '%.*s'", g->path, key, (int)(s.len < 40 ? s.len : 40),
                         (const char *)s.bytes);
    *out = (RopeScaling)scaling;
    return 0;
}

// Gemma 3's options (src/models/gemma3.cpp in llama.cpp): local layers (window sliding_window)
// five to one global (llama.cpp's fixed pattern of 6), local RoPE base rope.freq_base_swa
// (default 10000), global rope.freq_base; the embedding times sqrt(C), NEOX pairs, GeGLU.
static int gemma3_options(const GGUFFile *g, Config *c, Error *err) {
    char key[96];
    float base_swa = 10000.0f;
    if (opt_float(g, arch_key(key, sizeof key, "gemma3", "rope.freq_base_swa"), &base_swa, err)) return -1;
    if (c->window > 0) {
        c->global_every = 6;
        c->rope_theta_global = c->rope.theta;
        c->rope.theta = base_swa;
    }
    c->embed_scale = sqrtf((float)c->dim);
    c->rope_style = ROPE_STYLE_NEOX;
    c->ffn_act = GLU_GELU_TANH;
    return 0;
}

static int config_from_gguf(const GGUFFile *g, Config *c, Error *err) {
    GGUFString arch_name;
    if (gguf_get_string(g, "general.architecture", &arch_name, err)) return -1;
    *c = config_default();
    const Arch *arch = arch_by_name((const char *)arch_name.bytes, arch_name.len, &c->arch);
    if (!arch)
        return error_set(err, "%s: architecture '%.*s' is not supported (the lab runs 'llama' and 'gemma3')", g->path,
                         (int)(arch_name.len < 40 ? arch_name.len : 40), (const char *)arch_name.bytes);
    const char *a = arch->name;
    char key[96];
#define KEY(suffix) arch_key(key, sizeof key, a, suffix)
    if (key_int(g, KEY("context_length"), 1, &c->seq_len, err) ||
        key_int(g, KEY("embedding_length"), 1, &c->dim, err) ||
        key_int(g, KEY("feed_forward_length"), 1, &c->hidden_dim, err) ||
        key_int(g, KEY("block_count"), 1, &c->n_layers, err) ||
        key_int(g, KEY("attention.head_count"), 1, &c->n_heads, err))
        return -1;
    c->n_kv_heads = c->n_heads;
    c->head_dim = c->dim / c->n_heads;
    c->rope.orig_ctx = c->seq_len;
    const GGUFTensor *embd = gguf_find_tensor(g, "token_embd.weight");
    c->vocab_size = embd && embd->dims[1] <= INT_MAX ? (int)embd->dims[1] : 0;
    int key_length = -1, value_length = -1, rope_dims = -1, tied = -1;
    if (opt_int(g, KEY("attention.head_count_kv"), 1, &c->n_kv_heads, err) ||
        opt_int(g, KEY("attention.key_length"), 1, &key_length, err) ||
        opt_int(g, KEY("attention.value_length"), 1, &value_length, err) ||
        opt_int(g, KEY("rope.dimension_count"), 1, &rope_dims, err) ||
        opt_int(g, KEY("attention.kv_lora_rank"), 0, &c->kv_lora_rank, err) ||
        opt_int(g, "inferlab.attention.kv_share", 1, &c->kv_share, err) ||
        opt_int(g, "inferlab.attention.global_every", 0, &c->global_every, err) ||
        opt_float(g, "inferlab.rope.freq_base_global", &c->rope_theta_global, err) ||
        opt_int(g, "inferlab.attention.global_windowed", 0, &c->global_windowed, err) ||
        opt_int(g, KEY("vocab_size"), 1, &c->vocab_size, err) ||
        opt_int(g, KEY("rope.scaling.original_context_length"), 0, &c->rope.orig_ctx, err) ||
        opt_int(g, KEY("attention.sliding_window"), 0, &c->window, err) ||
        opt_int(g, "inferlab.attention.n_sink", 0, &c->n_sink, err) ||
        opt_float(g, KEY("attention.layer_norm_rms_epsilon"), &c->norm_eps, err) ||
        opt_float(g, KEY("rope.freq_base"), &c->rope.theta, err) ||
        opt_float(g, KEY("rope.scaling.factor"), &c->rope.factor, err) ||
        opt_float(g, KEY("rope.scaling.yarn_beta_fast"), &c->rope.beta_fast, err) ||
        opt_float(g, KEY("rope.scaling.yarn_beta_slow"), &c->rope.beta_slow, err) ||
        opt_rope_scaling(g, a, &c->rope.scaling, err))
        return -1;
#undef KEY
    if (c->arch == ARCH_GEMMA3 && gemma3_options(g, c, err)) return -1;
    if (c->kv_lora_rank) { // MLA: keys [k_C (value_length); k_R (rope dims)]
        if (value_length < 0 || rope_dims < 0 || key_length != value_length + rope_dims)
            return error_set(err, "%s: MLA needs value_length + rope.dimension_count = key_length", g->path);
        c->head_dim = value_length;
        c->rope_dim = rope_dims;
    } else {
        if (key_length >= 0) c->head_dim = key_length;
        if (value_length >= 0 && value_length != c->head_dim)
            return error_set(err, "%s: value_length %d differs from key_length %d (not supported)", g->path,
                             value_length, c->head_dim);
        if (rope_dims >= 0 && rope_dims != c->head_dim)
            return error_set(err, "%s: RoPE rotates %d of %d head dimensions (partial RoPE is not supported)",
                             g->path, rope_dims, c->head_dim);
    }
    if (gguf_find_kv(g, "inferlab.tied_embeddings")) {
        if (gguf_get_bool(g, "inferlab.tied_embeddings", &tied, err)) return -1;
    } else {
        tied = gguf_find_tensor(g, "output.weight") == NULL;
    }
    c->tied_embeddings = tied;
    char why[128];
    if (!config_validate(c, why, sizeof why))
        return error_set(err, "%s: inconsistent config: %s", g->path, why);
    return 0;
}

static void format_dims(char *s, size_t n, const uint64_t *dims, int n_dims) {
    int k = snprintf(s, n, "[");
    for (int d = 0; d < n_dims && k > 0 && (size_t)k < n; d++)
        k += snprintf(s + k, n - k, "%s%llu", d ? ", " : "", (unsigned long long)dims[d]);
    if (k > 0 && (size_t)k < n) snprintf(s + k, n - k, "]");
}

static int load_model_tensor(const GGUFFile *g, const ModelTensor *want, Error *err) {
    const GGUFTensor *t = gguf_find_tensor(g, want->name);
    if (!t) return error_set(err, "%s: missing tensor '%s'", g->path, want->name);
    uint64_t dims[GGUF_MAX_DIMS] = {want->cols, want->rows ? want->rows : 1, 1, 1};
    if (memcmp(dims, t->dims, sizeof dims) != 0) {
        char have[128], need[64];
        format_dims(have, sizeof have, t->dims, t->n_dims);
        format_dims(need, sizeof need, dims, want->rows ? 2 : 1);
        return error_set(err, "%s: tensor '%s' has shape %s, the config needs %s", g->path, want->name, have,
                         need);
    }
    gguf_tensor_to_f32(t, want->data);
    return 0;
}

// Layers past the config's n_layers mean the config contradicts the file.
static int check_no_extra_layers(const GGUFFile *g, int n_layers, Error *err) {
    for (size_t i = 0; i < g->n_tensors; i++) {
        const char *name = g->tensors[i].name;
        char *end;
        if (strncmp(name, "blk.", 4) != 0) continue;
        long layer = strtol(name + 4, &end, 10);
        if (end != name + 4 && layer >= n_layers)
            return error_set(err, "%s: tensor '%s' belongs to layer %ld, but the config has %d layers",
                             g->path, name, layer, n_layers);
    }
    return 0;
}

// A file with quantised matrices: keep their bytes as m->quant (the tensors the engine runs),
// beside the dequantised host weights that load_model_tensor wrote.
static int quantized_from_gguf(const GGUFFile *g, Model *m, Error *err) {
    int rc = 0, quantized = 0, n;
    ModelTensor *t = model_matrix_list(m, &n);
    DType *types = mallocCheck((n ? n : 1) * sizeof *types), dtype = DTYPE_F32;
    for (int k = 0; k < n; k++) {
        types[k] = (DType)ggml_type_dtype(gguf_find_tensor(g, t[k].name)->type);
        if (types[k] == DTYPE_F16) types[k] = DTYPE_F32; // F16 runs as its fp32 host copy
        if (dtype_is_quantized(types[k])) quantized = 1, dtype = types[k];
    }
    if (quantized) {
        m->quant = mallocCheck(sizeof *m->quant);
        quant_weights_layout(m->quant, m, dtype, types);
        for (int k = 0; k < m->quant->n && rc == 0; k++) {
            const Tensor *x = &m->quant->tensors[k];
            if (x->dtype == DTYPE_F32) continue;
            memcpy((void *)x->data, gguf_find_tensor(g, t[k].name)->data, (size_t)x->rows * dtype_row_bytes(x->dtype, x->cols));
            rc = outliers_from_gguf(g, m, t[k].name, k, t[k].data, err);
        }
    }
    free(t), free(types);
    return rc;
}

static int weights_from_gguf(const GGUFFile *g, Model *m, Error *err) {
    const Config *c = &m->config;
    if (c->tied_embeddings && gguf_find_tensor(g, "output.weight"))
        return error_set(err, "%s: the config ties the embeddings but the file has output.weight", g->path);
    if (check_no_extra_layers(g, c->n_layers, err)) return -1;
    size_t n;
    ModelTensor *t = model_tensor_list(m, &n);
    int rc = 0;
    for (size_t i = 0; i < n && rc == 0; i++) rc = load_model_tensor(g, &t[i], err);
    if (rc == 0) rc = quantized_from_gguf(g, m, err);
    free(t);
    return rc;
}

// The file's tokenizer, any kind (tokenizer_read_gguf), which must have the model's vocab_size tokens.
static int tokenizer_from_gguf(const GGUFFile *g, int vocab_size, Tokenizer *tok, Error *err) {
    if (tokenizer_read_gguf(tok, g, err)) return -1;
    if (tok->vocab_size != vocab_size) {
        int n = tok->vocab_size;
        tokenizer_free(tok);
        return error_set(err, "%s: the tokenizer has %d tokens, the model's vocab_size is %d", g->path, n, vocab_size);
    }
    return 0;
}

// The loaded model holds every weight as fp32 (and the quantised tensors beside them) while the
// file is in memory: refuse, naming the sizes, a model that cannot fit in this machine's RAM.
static int check_host_memory(const GGUFFile *g, const Config *c, Error *err) {
    long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
    double need = (double)model_param_count(c) * sizeof(float) + 2.0 * (double)g->size, have = (double)pages * page;
    if (pages > 0 && page > 0 && need > have)
        return error_set(err, "%s: the model needs %.1f GiB of memory (its weights as fp32 beside the file's), "
                         "more than this machine's %.1f GiB", g->path, need / (1 << 30), have / (1 << 30));
    return 0;
}

int model_config_gguf(const char *path, Config *c, Error *err) {
    GGUFFile g;
    if (gguf_open(&g, path, err)) return -1;
    int rc = config_from_gguf(&g, c, err);
    gguf_close(&g);
    return rc;
}

int model_load_gguf(const char *path, Model *m, Tokenizer *tok, Error *err) {
    GGUFFile g;
    if (gguf_open(&g, path, err)) return -1;
    Config c;
    int rc = config_from_gguf(&g, &c, err);
    // Every parameter takes at least 4 bits of the file (2 bytes unless quantised): this bounds
    // the allocation below by the file's size whatever the config claims.
    if (rc == 0 && model_param_count(&c) > g.size * 2)
        rc = error_set(err, "%s: the config needs %zu parameters, more than the file (%zu bytes) holds", path,
                       model_param_count(&c), g.size);
    if (rc == 0) rc = check_host_memory(&g, &c, err);
    if (rc == 0) {
        model_alloc(m, &c);
        rc = weights_from_gguf(&g, m, err);
        if (rc == 0 && tok) rc = tokenizer_from_gguf(&g, c.vocab_size, tok, err);
        if (rc) model_free(m);
    }
    gguf_close(&g);
    return rc;
}
