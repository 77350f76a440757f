// test_gguf.c: checkpoints. GGUF and llama2.c files written from small random models, read back.
//  - half <-> float conversion: exhaustive over every half, and round-to-nearest-even against
//    a reference search over the halves;
//  - GGUF metadata of every value type reads back (integers of every width, floats, bools,
//    strings, arrays), and tensors F32 bit-exact, F16 equal to the half rounding;
//  - model + tokenizer (our BPE, and a llama2.c vocabulary) write -> read is bit-exact in F32,
//    within half precision in F16, for tied and untied heads and every config field, and for
//    MLA (attn_kv_a_mqa, attn_kv_b, kv_lora_rank), CLA (no KV tensors in a set's later layers,
//    inferlab.attention.kv_share) and both;
//  - llama2.c import: the legacy file gives the same logits as run.c's forward (written here,
//    reading the file's floats with run.c's pointer layout); version 1 (written here from
//    export.py's order) imports the same weights; shared and separate classifiers;
//  - the reference reader and writer (PyPI's gguf, llama.cpp's gguf-py, via tests/gguf_peer.py;
//    skipped, saying so, without it): for every kind of file the lab writes (our gpt2 BPE and a
//    llama2.c vocabulary, F32 / F16 / Q8_0 / Q4_0, MLA, CLA, tied or not) it lists the same
//    keys, values bit for bit, tensor types and shapes as our reader; and the file it writes
//    from ours loads to the same config, weights and tokenizer;
//  - bad input: truncation at many offsets, wrong magic / version, absurd counts, lengths,
//    dims and offsets, unsupported types, duplicates, config keys that contradict the tensors,
//    bad tokenizers, bad llama2.c headers: each returns an Error naming the file.
// Run: make build/tests/test_gguf && ./build/tests/test_gguf
//      (and under ASan + UBSan: make SANITIZE=1 build-san/tests/test_gguf && ./build-san/tests/test_gguf)
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "checkpoint.h"
#include "common.h"
#include "gguf.h"
#include "llama2c.h"
#include "model.h"
#include "quant_weights.h"
#include "session.h"
#include "test_util.h"
#include "tokenizer.h"

static char tmp_dir[64];

// A path inside this run's scratch directory.
static const char *tmp_path(const char *name) {
    static char paths[8][160];
    static int next;
    char *p = paths[next++ % 8];
    snprintf(p, sizeof paths[0], "%s/%s", tmp_dir, name);
    return p;
}

// --- byte buffers for crafting and corrupting files -------------------------------------

typedef struct {
    uint8_t *p;
    size_t len, cap;
} Buf;

static void put(Buf *b, const void *x, size_t n) {
    if (b->len + n > b->cap) {
        b->cap = 2 * (b->len + n);
        b->p = reallocCheck(b->p, b->cap);
    }
    if (n) memcpy(b->p + b->len, x, n);
    b->len += n;
}
static void put_u8(Buf *b, uint8_t v) { put(b, &v, 1); }
static void put_u32(Buf *b, uint32_t v) { put(b, &v, 4); }
static void put_u64(Buf *b, uint64_t v) { put(b, &v, 8); }
static void put_str(Buf *b, const char *s) {
    put_u64(b, strlen(s));
    put(b, s, strlen(s));
}
static void put_zeros(Buf *b, size_t n) {
    for (size_t i = 0; i < n; i++) put_u8(b, 0);
}

static void write_bytes(const char *path, const void *p, size_t n) {
    FILE *f = fopenCheck(path, "wb");
    if (n) fwriteCheck(p, 1, n, f);
    fcloseCheck(f);
}

static uint8_t *read_bytes(const char *path, size_t *n) {
    FILE *f = fopenCheck(path, "rb");
    fseek(f, 0, SEEK_END);
    *n = (size_t)ftell(f);
    rewind(f);
    uint8_t *p = mallocCheck(*n);
    assert_int_equal(fread(p, 1, *n, f), *n);
    fclose(f);
    return p;
}

// The error must exist, name the file, and say what is wrong (contain `what`).
static void assert_error(int rc, const Error *err, const char *path, const char *what) {
    if (rc == 0) fail_msg("expected an error containing '%s' for %s", what, path);
    if (!strstr(err->msg, path) || !strstr(err->msg, what))
        fail_msg("error '%s' should name '%s' and contain '%s'", err->msg, path, what);
}

static void assert_gguf_error(const Buf *b, const char *what) {
    const char *path = tmp_path("bad.gguf");
    write_bytes(path, b->p, b->len);
    GGUFFile g;
    Error err = {""};
    assert_error(gguf_open(&g, path, &err), &err, path, what);
}

// --- half precision ---------------------------------------------------------------------

// The value of half h from its fields, in double: the definition, not bit tricks.
static double half_value(uint16_t h) {
    int sign = h >> 15, exp = (h >> 10) & 0x1f, mant = h & 0x3ff;
    double v = exp == 0    ? ldexp(mant, -24)
               : exp == 31 ? (mant ? NAN : INFINITY)
                           : ldexp(1024 + mant, exp - 25);
    return sign ? -v : v;
}

// Round x to the nearest half by searching the ordered positive halves (ties to even;
// values at or past 65520 round to infinity, as IEEE overflow does).
static uint16_t reference_to_half(float x) {
    uint16_t sign = signbit(x) ? 0x8000 : 0;
    double a = fabs((double)x);
    if (a >= 65520.0) return sign | 0x7c00;
    uint16_t lo = 0, hi = 0x7bff; // largest finite half <= a, by bisection
    while (lo < hi) {
        uint16_t mid = (uint16_t)((lo + hi + 1) / 2);
        if (half_value(mid) <= a)
            lo = mid;
        else
            hi = (uint16_t)(mid - 1);
    }
    double below = half_value(lo), above = lo == 0x7bff ? 65536.0 : half_value((uint16_t)(lo + 1));
    if (a - below < above - a || (a - below == above - a && (lo & 1) == 0)) return sign | lo;
    return sign | (uint16_t)(lo + 1);
}

static void test_half_conversion(void **state) {
    (void)state;
    for (uint32_t h = 0; h < 65536; h++) {
        float f = gguf_half_to_float((uint16_t)h);
        double want = half_value((uint16_t)h);
        if (isnan(want)) {
            assert_true(isnan(f));
            assert_true(isnan(gguf_half_to_float(gguf_float_to_half(f))));
            continue;
        }
        if ((double)f != want) fail_msg("half %04x -> %g, want %g", h, f, want);
        if (gguf_float_to_half(f) != h) fail_msg("half %04x does not round-trip", h);
    }
    uint64_t rng = rng_seed(7);
    for (int i = 0; i < 200000; i++) {
        // random bit patterns over the half range and below it, so every rounding path is hit
        uint32_t bits = (uint32_t)(rng_u64(&rng) >> 32);
        bits = (bits & 0x80ffffffu) | ((uint32_t)(96 + rng_u64(&rng) % 48) << 23);
        float x;
        memcpy(&x, &bits, 4);
        uint16_t got = gguf_float_to_half(x), want = reference_to_half(x);
        if (got != want) fail_msg("%a -> half %04x, want %04x", (double)x, got, want);
    }
    float ties[] = {
        65504.0f, 65519.99f, 65520.0f, 1e9f, 2049.0f, 2051.0f, 5.9604645e-8f * 0.5f, 5.9604645e-8f * 1.5f};
    for (size_t i = 0; i < sizeof ties / sizeof ties[0]; i++) {
        assert_int_equal(gguf_float_to_half(ties[i]), reference_to_half(ties[i]));
        assert_int_equal(gguf_float_to_half(-ties[i]), reference_to_half(-ties[i]));
    }
}

// --- GGUF values and tensors ------------------------------------------------------------

// One key/value of every type, written by hand (the writer only emits the types we use).
static void craft_all_types(Buf *b) {
    put(b, "GGUF", 4);
    put_u32(b, 3);
    put_u64(b, 0);  // tensors
    put_u64(b, 16); // key/values
    // clang-format off
    put_str(b, "u8");  put_u32(b, GGUF_TYPE_UINT8);  put_u8(b, 200);
    put_str(b, "i8");  put_u32(b, GGUF_TYPE_INT8);   put_u8(b, 0x80);
    put_str(b, "u16"); put_u32(b, GGUF_TYPE_UINT16); uint16_t u16 = 60000; put(b, &u16, 2);
    put_str(b, "i16"); put_u32(b, GGUF_TYPE_INT16);  int16_t i16 = -30000; put(b, &i16, 2);
    put_str(b, "u32"); put_u32(b, GGUF_TYPE_UINT32); put_u32(b, 4000000000u);
    put_str(b, "i32"); put_u32(b, GGUF_TYPE_INT32);  int32_t i32 = -2000000000; put(b, &i32, 4);
    put_str(b, "u64"); put_u32(b, GGUF_TYPE_UINT64); put_u64(b, 1ull << 62);
    put_str(b, "u64big"); put_u32(b, GGUF_TYPE_UINT64); put_u64(b, UINT64_MAX);
    put_str(b, "i64"); put_u32(b, GGUF_TYPE_INT64);  int64_t i64 = -(1ll << 60); put(b, &i64, 8);
    put_str(b, "f32"); put_u32(b, GGUF_TYPE_FLOAT32); float f32 = 0.1f; put(b, &f32, 4);
    put_str(b, "f64"); put_u32(b, GGUF_TYPE_FLOAT64); double f64 = 0.1; put(b, &f64, 8);
    put_str(b, "bool"); put_u32(b, GGUF_TYPE_BOOL); put_u8(b, 1);
    put_str(b, "bad_bool"); put_u32(b, GGUF_TYPE_BOOL); put_u8(b, 2);
    put_str(b, "str"); put_u32(b, GGUF_TYPE_STRING); put_str(b, "h\xc3\xa9llo");
    put_str(b, "arr_u16"); put_u32(b, GGUF_TYPE_ARRAY); put_u32(b, GGUF_TYPE_UINT16); put_u64(b, 3);
    uint16_t a16[3] = {1, 65535, 7};
    put(b, a16, sizeof a16);
    put_str(b, "arr_f64"); put_u32(b, GGUF_TYPE_ARRAY); put_u32(b, GGUF_TYPE_FLOAT64); put_u64(b, 2);
    double a64[2] = {1.5, -2.25};
    put(b, a64, sizeof a64);
    // clang-format on
}

static void test_gguf_reads_every_value_type(void **state) {
    (void)state;
    Buf b = {0};
    craft_all_types(&b);
    const char *path = tmp_path("types.gguf");
    write_bytes(path, b.p, b.len);
    GGUFFile g;
    Error err;
    assert_int_equal(gguf_open(&g, path, &err), 0);
    assert_int_equal(g.n_kv, 16);
    assert_int_equal(g.version, 3);
    assert_int_equal(g.alignment, GGUF_DEFAULT_ALIGNMENT);
    struct {
        const char *key;
        int64_t want;
    } ints[] = {{"u8", 200},           {"i8", -128},         {"u16", 60000},     {"i16", -30000},
                {"u32", 4000000000ll}, {"i32", -2000000000}, {"u64", 1ll << 62}, {"i64", -(1ll << 60)}};
    for (size_t i = 0; i < sizeof ints / sizeof ints[0]; i++) {
        int64_t v = 0;
        assert_int_equal(gguf_get_int(&g, ints[i].key, &v, &err), 0);
        assert_true(v == ints[i].want);
    }
    int64_t v;
    double d;
    int flag;
    GGUFString s;
    assert_error(gguf_get_int(&g, "u64big", &v, &err), &err, path, "does not fit");
    assert_error(gguf_get_int(&g, "f32", &v, &err), &err, path, "expected an integer");
    assert_error(gguf_get_int(&g, "absent", &v, &err), &err, path, "missing key 'absent'");
    assert_int_equal(gguf_get_float(&g, "f32", &d, &err), 0);
    assert_true(d == (double)0.1f);
    assert_int_equal(gguf_get_float(&g, "f64", &d, &err), 0);
    assert_true(d == 0.1);
    assert_error(gguf_get_float(&g, "str", &d, &err), &err, path, "expected a float");
    assert_int_equal(gguf_get_bool(&g, "bool", &flag, &err), 0);
    assert_int_equal(flag, 1);
    assert_error(gguf_get_bool(&g, "bad_bool", &flag, &err), &err, path, "not 0 or 1");
    assert_int_equal(gguf_get_string(&g, "str", &s, &err), 0);
    assert_int_equal(s.len, 6);
    assert_memory_equal(s.bytes, "h\xc3\xa9llo", 6);
    int32_t *ai;
    float *af;
    size_t n;
    assert_int_equal(gguf_get_array_i32(&g, "arr_u16", &ai, &n, &err), 0);
    assert_int_equal(n, 3);
    assert_int_equal(ai[1], 65535);
    free(ai);
    assert_int_equal(gguf_get_array_f32(&g, "arr_f64", &af, &n, &err), 0);
    assert_int_equal(n, 2);
    assert_true(af[0] == 1.5f && af[1] == -2.25f);
    free(af);
    assert_error(gguf_get_array_f32(&g, "arr_u16", &af, &n, &err), &err, path, "expected an array of floats");
    assert_error(gguf_get_array_i32(&g, "u8", &ai, &n, &err), &err, path, "expected an array");
    gguf_close(&g);
    free(b.p);
}

static void test_gguf_writer_round_trip(void **state) {
    (void)state;
    uint64_t rng = rng_seed(11);
    float t1[5], t2[3 * 7], t3[2 * 3 * 4], t4[9 * 4];
    fill_normal(t1, 5, 1.0f, &rng);
    fill_normal(t2, 21, 1.0f, &rng);
    fill_normal(t3, 24, 1.0f, &rng);
    fill_normal(t4, 36, 3.0f, &rng);
    t4[0] = 1e-6f;    // a half subnormal
    t4[1] = 70000.0f; // past the half range
    int32_t ints[4] = {-1, 0, 7, INT32_MAX};
    float floats[3] = {0.5f, -1e30f, 3.0f};
    GGUFString strs[3] = {
        {(const uint8_t *)"", 0}, {(const uint8_t *)"a\0b", 3}, {(const uint8_t *)"\xff\xfe", 2}};
    for (uint32_t alignment = 1; alignment <= 64; alignment *= 8) {
        GGUFWriter w;
        gguf_writer_init(&w);
        if (alignment != GGUF_DEFAULT_ALIGNMENT) gguf_set_alignment(&w, alignment);
        gguf_set_u32(&w, "a.u32", 123456789u);
        gguf_set_i32(&w, "a.i32", -42);
        gguf_set_f32(&w, "a.f32", 1.25f);
        gguf_set_bool(&w, "a.bool", 1);
        gguf_set_string(&w, "a.str", "text");
        gguf_set_array_i32(&w, "a.ints", ints, 4);
        gguf_set_array_f32(&w, "a.floats", floats, 3);
        gguf_set_array_string(&w, "a.strs", strs, 3);
        gguf_add_tensor(&w, "t1", GGML_TYPE_F32, 1, (uint64_t[]){5}, t1);
        gguf_add_tensor(&w, "t2", GGML_TYPE_F32, 2, (uint64_t[]){7, 3}, t2);
        gguf_add_tensor(&w, "t3", GGML_TYPE_F32, 3, (uint64_t[]){4, 3, 2}, t3);
        gguf_add_tensor(&w, "t4", GGML_TYPE_F16, 2, (uint64_t[]){4, 9}, t4);
        const char *path = tmp_path("writer.gguf");
        gguf_write(&w, path);
        gguf_writer_free(&w);

        GGUFFile g;
        Error err;
        assert_int_equal(gguf_open(&g, path, &err), 0);
        assert_int_equal(g.alignment, alignment);
        int64_t v;
        double d;
        int flag;
        GGUFString s;
        assert_int_equal(gguf_get_int(&g, "a.u32", &v, &err), 0);
        assert_true(v == 123456789);
        assert_int_equal(gguf_get_int(&g, "a.i32", &v, &err), 0);
        assert_true(v == -42);
        assert_int_equal(gguf_get_float(&g, "a.f32", &d, &err), 0);
        assert_true(d == 1.25);
        assert_int_equal(gguf_get_bool(&g, "a.bool", &flag, &err), 0);
        assert_int_equal(flag, 1);
        assert_int_equal(gguf_get_string(&g, "a.str", &s, &err), 0);
        assert_true(s.len == 4 && memcmp(s.bytes, "text", 4) == 0);
        int32_t *ai;
        float *af;
        GGUFString *as;
        size_t n;
        assert_int_equal(gguf_get_array_i32(&g, "a.ints", &ai, &n, &err), 0);
        assert_int_equal(n, 4);
        assert_memory_equal(ai, ints, sizeof ints);
        assert_int_equal(gguf_get_array_f32(&g, "a.floats", &af, &n, &err), 0);
        assert_int_equal(n, 3);
        assert_memory_equal(af, floats, sizeof floats);
        assert_int_equal(gguf_get_array_string(&g, "a.strs", &as, &n, &err), 0);
        assert_int_equal(n, 3);
        for (int i = 0; i < 3; i++) {
            assert_int_equal(as[i].len, strs[i].len);
            if (strs[i].len) assert_memory_equal(as[i].bytes, strs[i].bytes, strs[i].len);
        }
        free(ai);
        free(af);
        free(as);

        const float *src[4] = {t1, t2, t3, t4};
        const char *names[4] = {"t1", "t2", "t3", "t4"};
        size_t sizes[4] = {5, 21, 24, 36};
        for (int i = 0; i < 4; i++) {
            const GGUFTensor *t = gguf_find_tensor(&g, names[i]);
            assert_non_null(t);
            assert_int_equal(t->n_elems, sizes[i]);
            assert_int_equal(t->offset % alignment, 0);
            float out[64];
            gguf_tensor_to_f32(t, out);
            for (size_t j = 0; j < sizes[i]; j++) {
                float want =
                    t->type == GGML_TYPE_F16 ? gguf_half_to_float(gguf_float_to_half(src[i][j])) : src[i][j];
                assert_memory_equal(&out[j], &want, 4);
            }
        }
        const GGUFTensor *t3i = gguf_find_tensor(&g, "t3");
        assert_int_equal(t3i->n_dims, 3);
        assert_true(t3i->dims[0] == 4 && t3i->dims[1] == 3 && t3i->dims[2] == 2 && t3i->dims[3] == 1);
        assert_null(gguf_find_tensor(&g, "t5"));
        gguf_close(&g);
    }
}

// --- model checkpoints ------------------------------------------------------------------

static Config small_config(int tied) {
    Config c = config_default();
    c.dim = 24;
    c.hidden_dim = 40;
    c.n_layers = 2;
    c.n_heads = 4;
    c.n_kv_heads = 2;
    c.head_dim = 8;
    c.vocab_size = 258; // set to the tokenizer's vocabulary by the callers that have one
    c.seq_len = 32;
    c.tied_embeddings = tied;
    return c;
}

// Every parameter random (norm gains included), so a tensor read into the wrong place shows.
static void random_model(Model *m, const Config *c, uint64_t seed) {
    char why[128];
    if (!config_validate(c, why, sizeof why)) fail_msg("config: %s", why);
    model_alloc(m, c);
    uint64_t rng = rng_seed(seed);
    fill_normal(m->params, m->n_params, 0.5f, &rng);
}

static void assert_config_equal(const Config *a, const Config *b) {
    assert_int_equal(a->dim, b->dim);
    assert_int_equal(a->hidden_dim, b->hidden_dim);
    assert_int_equal(a->n_layers, b->n_layers);
    assert_int_equal(a->n_heads, b->n_heads);
    assert_int_equal(a->n_kv_heads, b->n_kv_heads);
    assert_int_equal(a->head_dim, b->head_dim);
    assert_int_equal(a->vocab_size, b->vocab_size);
    assert_int_equal(a->seq_len, b->seq_len);
    assert_int_equal(a->window, b->window);
    assert_int_equal(a->n_sink, b->n_sink);
    assert_int_equal(a->tied_embeddings, b->tied_embeddings);
    assert_true(a->norm_eps == b->norm_eps);
    assert_true(a->rope.theta == b->rope.theta);
    assert_int_equal(a->rope.scaling, b->rope.scaling);
    assert_true(a->rope.factor == b->rope.factor);
    assert_int_equal(a->rope.orig_ctx, b->rope.orig_ctx);
    assert_true(a->rope.beta_fast == b->rope.beta_fast);
    assert_true(a->rope.beta_slow == b->rope.beta_slow);
    assert_int_equal(a->kv_lora_rank, b->kv_lora_rank);
    assert_int_equal(a->rope_dim, b->rope_dim);
    assert_int_equal(a->kv_share, b->kv_share);
    assert_int_equal(a->global_every, b->global_every);
    assert_true(a->rope_theta_global == b->rope_theta_global);
    assert_int_equal(a->global_windowed, b->global_windowed);
}

static void assert_tokenizer_equal(const Tokenizer *a, const Tokenizer *b) {
    assert_int_equal(a->kind, b->kind);
    assert_int_equal(a->vocab_size, b->vocab_size);
    assert_int_equal(a->bos_id, b->bos_id);
    assert_int_equal(a->eos_id, b->eos_id);
    for (int i = 0; i < a->vocab_size; i++) {
        assert_int_equal(a->piece_len[i], b->piece_len[i]);
        if (a->piece_len[i]) assert_memory_equal(a->pieces[i], b->pieces[i], a->piece_len[i]);
    }
    assert_int_equal(a->scores == NULL, b->scores == NULL);
    if (a->scores) assert_memory_equal(a->scores, b->scores, (size_t)a->vocab_size * sizeof(float));
    assert_int_equal(a->n_merges, b->n_merges);
    if (a->n_merges) assert_memory_equal(a->merges, b->merges, 2 * (size_t)a->n_merges * sizeof(int));
}

static const char TEXT[] =
    "In the beginning God created the heaven and the earth. And the earth was without form, "
    "and void; and darkness was upon the face of the deep. And the Spirit of God moved upon "
    "the face of the waters. And God said, Let there be light: and there was light.";

static void bpe_tokenizer(Tokenizer *t, int vocab_size) {
    Error err;
    if (tokenizer_train_bpe(t, (const unsigned char *)TEXT, sizeof TEXT - 1, vocab_size, &err))
        fail_msg("%s", err.msg);
}

// A llama2.c-style vocabulary: <unk>, BOS, EOS, the 256 byte-fallback pieces, then a few
// words (spaces inside, as tokenizer.bin spells them).
static void llama2c_tokenizer(Tokenizer *t) {
    const char *words[] = {" ", "a", "b", " a", "ab", " the", "the earth", "  ", "x y z"};
    int n_words = sizeof words / sizeof words[0], V = 259 + n_words;
    unsigned char **pieces = mallocCheck(V * sizeof *pieces);
    int *lens = mallocCheck(V * sizeof *lens);
    float *scores = mallocCheck(V * sizeof *scores);
    char piece[16];
    for (int i = 0; i < V; i++) {
        if (i == 0)
            snprintf(piece, sizeof piece, "<unk>");
        else if (i == 1)
            snprintf(piece, sizeof piece, "\n<s>\n");
        else if (i == 2)
            snprintf(piece, sizeof piece, "\n</s>\n");
        else if (i < 259)
            snprintf(piece, sizeof piece, "<0x%02X>", i - 3);
        else
            snprintf(piece, sizeof piece, "%s", words[i - 259]);
        lens[i] = (int)strlen(piece);
        pieces[i] = mallocCheck(lens[i] + 1);
        memcpy(pieces[i], piece, lens[i]);
        scores[i] = i < 259 ? 0.0f : -(float)i / 7.0f;
    }
    Error err;
    if (tokenizer_from_pieces(t, (const unsigned char *const *)pieces, lens, scores, V, &err))
        fail_msg("%s", err.msg);
    for (int i = 0; i < V; i++) free(pieces[i]);
    free(pieces);
    free(lens);
    free(scores);
}

static void test_model_gguf_round_trip_f32(void **state) {
    (void)state;
    for (int variant = 0; variant < 5; variant++) { // plain x 2, MLA, CLA, MLA + CLA
        Tokenizer tok;
        Config c = small_config(variant == 0);
        if (variant == 0) {
            bpe_tokenizer(&tok, 300);
        } else {
            llama2c_tokenizer(&tok);
            // every config field away from its default
            c.window = 12;
            c.n_sink = 3;
            c.norm_eps = 1e-6f;
            c.rope.theta = 500000.0f;
            c.rope.scaling = ROPE_YARN;
            c.rope.factor = 4.0f;
            c.rope.orig_ctx = 8;
            c.rope.beta_fast = 16.0f;
            c.rope.beta_slow = 2.0f;
            c.n_kv_heads = 1;
            c.head_dim = 6;
        }
        if (variant == 2 || variant == 4) { // MLA: attn_kv_a_mqa, attn_kv_b, kv_lora_rank, rope dims
            c.n_kv_heads = c.n_heads;
            c.kv_lora_rank = 12;
            c.rope_dim = 4;
        }
        if (variant >= 3) { // CLA: three layers, the second without KV tensors
            c.n_layers = 3;
            c.kv_share = 2;
        }
        if (variant == 3) { // local / global layers: the third global, at its own RoPE base
            c.global_every = 3;
            c.rope_theta_global = 1e6f;
            c.global_windowed = 1; // the "all local" ablation's flag survives the file too
        }
        c.vocab_size = tok.vocab_size;
        Model m, back;
        random_model(&m, &c, 100 + variant);
        const char *path = tmp_path("model.gguf");
        model_save_gguf(path, &m, &tok, GGML_TYPE_F32);
        Tokenizer tok_back;
        Error err;
        if (model_load_gguf(path, &back, &tok_back, &err)) fail_msg("%s", err.msg);
        if (variant >= 2) { // llama.cpp's names; CLA's second layer has no KV tensors
            GGUFFile g;
            assert_int_equal(gguf_open(&g, path, &err), 0);
            int mla = c.kv_lora_rank > 0;
            assert_true((gguf_find_tensor(&g, "blk.0.attn_kv_a_mqa.weight") != NULL) == mla);
            assert_true((gguf_find_tensor(&g, "blk.0.attn_kv_b.weight") != NULL) == mla);
            assert_true((gguf_find_tensor(&g, "blk.0.attn_k.weight") != NULL) == !mla);
            int own1 = c.kv_share == 1; // does layer 1 have keys and values of its own?
            assert_true((gguf_find_tensor(&g, "blk.1.attn_k.weight") != NULL) == (own1 && !mla));
            assert_true((gguf_find_tensor(&g, "blk.1.attn_kv_a_mqa.weight") != NULL) == (own1 && mla));
            assert_true((gguf_find_tensor(&g, "blk.2.attn_k.weight") != NULL) == (c.n_layers > 2 && !mla));
            gguf_close(&g);
        }
        assert_config_equal(&back.config, &c);
        assert_int_equal(back.n_params, m.n_params);
        assert_memory_equal(back.params, m.params, m.n_params * sizeof(float));
        if (c.tied_embeddings) assert_ptr_equal(back.weights.wcls, back.weights.token_embedding);
        assert_tokenizer_equal(&tok_back, &tok);
        // the same file loads without its tokenizer, and through checkpoint_load
        model_free(&back);
        assert_int_equal(model_load_gguf(path, &back, NULL, &err), 0);
        model_free(&back);
        tokenizer_free(&tok_back);
        assert_int_equal(checkpoint_load(path, NULL, &back, &tok_back, &err), 0);
        assert_memory_equal(back.params, m.params, m.n_params * sizeof(float));
        assert_tokenizer_equal(&tok_back, &tok);
        model_free(&back);
        tokenizer_free(&tok_back);
        model_free(&m);
        tokenizer_free(&tok);
    }
}

// RoPE scaling under llama.cpp's keys (llama-arch.cpp: %s.rope.scaling.type, .factor,
// .original_context_length, .yarn_beta_fast, .yarn_beta_slow) and only its type names:
// NTK-aware scaling is written as plain RoPE with the NTK base, which rotates the same.
static void test_model_gguf_rope_scaling_keys(void **state) {
    (void)state;
    RopeScaling scalings[] = {ROPE_YARN, ROPE_NTK};
    const char *types[] = {"yarn", "none"};
    for (int i = 0; i < 2; i++) {
        Tokenizer tok;
        bpe_tokenizer(&tok, 280);
        Config c = small_config(1);
        c.vocab_size = tok.vocab_size;
        c.rope.scaling = scalings[i];
        c.rope.factor = 4.0f;
        c.rope.orig_ctx = 32;
        c.rope.beta_fast = 24.0f;
        c.rope.beta_slow = 2.0f;
        Model m, back;
        random_model(&m, &c, 6);
        const char *path = tmp_path("rope.gguf");
        model_save_gguf(path, &m, &tok, GGML_TYPE_F32);
        GGUFFile g;
        Error err;
        if (gguf_open(&g, path, &err)) fail_msg("%s", err.msg);
        GGUFString type;
        double factor, beta_fast, beta_slow;
        int64_t orig;
        assert_int_equal(gguf_get_string(&g, "llama.rope.scaling.type", &type, &err), 0);
        assert_int_equal(type.len, strlen(types[i]));
        assert_memory_equal(type.bytes, types[i], type.len);
        assert_int_equal(gguf_get_float(&g, "llama.rope.scaling.factor", &factor, &err), 0);
        assert_true(factor == (i == 0 ? 4.0 : 1.0));
        assert_int_equal(gguf_get_int(&g, "llama.rope.scaling.original_context_length", &orig, &err), 0);
        assert_int_equal(orig, 32);
        assert_int_equal(gguf_get_float(&g, "llama.rope.scaling.yarn_beta_fast", &beta_fast, &err), 0);
        assert_int_equal(gguf_get_float(&g, "llama.rope.scaling.yarn_beta_slow", &beta_slow, &err), 0);
        assert_true(beta_fast == 24.0 && beta_slow == 2.0);
        gguf_close(&g);
        if (model_load_gguf(path, &back, NULL, &err)) fail_msg("%s", err.msg);
        float want[8], got[8];
        float mscale_want = rope_frequencies(want, c.head_dim, &c.rope);
        float mscale_got = rope_frequencies(got, back.config.head_dim, &back.config.rope);
        assert_true(mscale_got == mscale_want);
        for (int k = 0; k < c.head_dim / 2; k++) assert_true(fabsf(got[k] - want[k]) <= 1e-6f * want[k]);
        model_free(&back);
        model_free(&m);
        tokenizer_free(&tok);
    }
}

static void test_model_gguf_round_trip_f16(void **state) {
    (void)state;
    Tokenizer tok;
    bpe_tokenizer(&tok, 280);
    Config c = small_config(0);
    c.vocab_size = tok.vocab_size;
    Model m, back;
    random_model(&m, &c, 5);
    m.params[0] = 1e-7f; // half subnormal
    const char *path = tmp_path("model16.gguf");
    model_save_gguf(path, &m, &tok, GGML_TYPE_F16);
    Error err;
    if (model_load_gguf(path, &back, NULL, &err)) fail_msg("%s", err.msg);
    assert_config_equal(&back.config, &c);
    const Weights *w = &m.weights;
    for (size_t i = 0; i < m.n_params; i++) {
        float x = m.params[i], y = back.params[i];
        const float *p = &m.params[i];
        int is_norm = (p >= w->rms_att && p < w->rms_att + c.n_layers * c.dim) ||
                      (p >= w->rms_ffn && p < w->rms_ffn + c.n_layers * c.dim) ||
                      (p >= w->rms_final && p < w->rms_final + c.dim);
        if (is_norm) assert_memory_equal(&x, &y, 4); // 1-D tensors stay F32
        // half: 11 significant bits, and subnormal steps of 2^-24
        else if (!(fabsf(x - y) <= ldexpf(fabsf(x), -11) + ldexpf(1.0f, -25)))
            fail_msg("param %zu: %g -> %g", i, x, y);
    }
    // F16 matrices make the file about half as large as F32
    size_t n16, n32;
    free(read_bytes(path, &n16));
    model_save_gguf(tmp_path("model32.gguf"), &m, &tok, GGML_TYPE_F32);
    free(read_bytes(tmp_path("model32.gguf"), &n32));
    assert_true(n16 < 0.6 * n32);
    model_free(&back);
    model_free(&m);
    tokenizer_free(&tok);
}

// --- llama2.c ---------------------------------------------------------------------------

// run.c's forward (karpathy/llama2.c), on the float block of a legacy file, pointers laid
// out as its checkpoint_init_weights does; written from its description, in double.
// logits: (T, V) for tokens at positions 0 .. T-1.
static void run_c_forward(const float *f, const int32_t h[7], const int *tokens, int T, double *logits) {
    int dim = h[0], hidden = h[1], L = h[2], nh = h[3], nkv = h[4], V = abs(h[5]), S = h[6];
    int hs = dim / nh, kv_dim = hs * nkv, kv_mul = nh / nkv;
    const float *emb = f, *rms_att = emb + (size_t)V * dim, *wq = rms_att + L * dim;
    const float *wk = wq + (size_t)L * dim * dim, *wv = wk + (size_t)L * dim * kv_dim;
    const float *wo = wv + (size_t)L * dim * kv_dim, *rms_ffn = wo + (size_t)L * dim * dim;
    const float *w1 = rms_ffn + L * dim, *w2 = w1 + (size_t)L * dim * hidden,
                *w3 = w2 + (size_t)L * dim * hidden;
    const float *rms_final = w3 + (size_t)L * dim * hidden, *freq = rms_final + dim;
    const float *wcls = h[5] > 0 ? emb : freq + (size_t)S * hs;
    double *x = calloc(dim, sizeof *x), *xb = calloc(dim, sizeof *xb), *q = calloc(dim, sizeof *q);
    double *hb = calloc(hidden, sizeof *hb), *hb2 = calloc(hidden, sizeof *hb2),
           *att = calloc(T, sizeof *att);
    double *kc = calloc((size_t)L * T * kv_dim, sizeof *kc), *vc = calloc((size_t)L * T * kv_dim, sizeof *vc);
#define MATVEC(out, w, in, n, d)                                                                             \
    for (int i_ = 0; i_ < (d); i_++) {                                                                       \
        double s_ = 0;                                                                                       \
        for (int j_ = 0; j_ < (n); j_++) s_ += (double)(w)[(size_t)i_ * (n) + j_] * (in)[j_];                \
        (out)[i_] = s_;                                                                                      \
    }
#define RMSNORM(out, in, g)                                                                                  \
    {                                                                                                        \
        double ss_ = 0;                                                                                      \
        for (int j_ = 0; j_ < dim; j_++) ss_ += (in)[j_] * (in)[j_];                                         \
        ss_ = 1.0 / sqrt(ss_ / dim + 1e-5);                                                                  \
        for (int j_ = 0; j_ < dim; j_++) (out)[j_] = (g)[j_] * (ss_ * (in)[j_]);                             \
    }
    for (int pos = 0; pos < T; pos++) {
        for (int i = 0; i < dim; i++) x[i] = emb[(size_t)tokens[pos] * dim + i];
        for (int l = 0; l < L; l++) {
            double *k = kc + ((size_t)l * T + pos) * kv_dim, *v = vc + ((size_t)l * T + pos) * kv_dim;
            RMSNORM(xb, x, rms_att + l * dim);
            MATVEC(q, wq + (size_t)l * dim * dim, xb, dim, dim);
            MATVEC(k, wk + (size_t)l * dim * kv_dim, xb, dim, kv_dim);
            MATVEC(v, wv + (size_t)l * dim * kv_dim, xb, dim, kv_dim);
            for (int i = 0; i < dim; i += 2) { // rotate adjacent pairs of each head
                double fr = 1.0 / pow(10000.0, (double)(i % hs) / hs), c = cos(pos * fr), s = sin(pos * fr);
                for (int r = 0; r < (i < kv_dim ? 2 : 1); r++) {
                    double *vec = r == 0 ? q : k, v0 = vec[i], v1 = vec[i + 1];
                    vec[i] = v0 * c - v1 * s;
                    vec[i + 1] = v0 * s + v1 * c;
                }
            }
            for (int hh = 0; hh < nh; hh++) {
                double mx = -INFINITY, sum = 0;
                for (int t = 0; t <= pos; t++) {
                    double sc = 0;
                    for (int i = 0; i < hs; i++)
                        sc += q[hh * hs + i] * kc[((size_t)l * T + t) * kv_dim + (hh / kv_mul) * hs + i];
                    att[t] = sc / sqrt(hs);
                    if (att[t] > mx) mx = att[t];
                }
                for (int t = 0; t <= pos; t++) sum += (att[t] = exp(att[t] - mx));
                for (int i = 0; i < hs; i++) {
                    double o = 0;
                    for (int t = 0; t <= pos; t++)
                        o += att[t] / sum * vc[((size_t)l * T + t) * kv_dim + (hh / kv_mul) * hs + i];
                    xb[hh * hs + i] = o;
                }
            }
            MATVEC(hb, wo + (size_t)l * dim * dim, xb, dim, dim);
            for (int i = 0; i < dim; i++) x[i] += hb[i];
            RMSNORM(xb, x, rms_ffn + l * dim);
            MATVEC(hb, w1 + (size_t)l * dim * hidden, xb, dim, hidden);
            MATVEC(hb2, w3 + (size_t)l * dim * hidden, xb, dim, hidden);
            for (int i = 0; i < hidden; i++) hb[i] = hb[i] / (1.0 + exp(-hb[i])) * hb2[i];
            MATVEC(xb, w2 + (size_t)l * dim * hidden, hb, hidden, dim);
            for (int i = 0; i < dim; i++) x[i] += xb[i];
        }
        RMSNORM(xb, x, rms_final);
        MATVEC(logits + (size_t)pos * V, wcls, xb, dim, V);
    }
#undef MATVEC
#undef RMSNORM
    free(x), free(xb), free(q), free(hb), free(hb2), free(att), free(kc), free(vc);
}

static Config llama2c_config(int shared) {
    Config c = config_default();
    c.dim = 32;
    c.hidden_dim = 56;
    c.n_layers = 2;
    c.n_heads = 4;
    c.n_kv_heads = 2;
    c.head_dim = 8;
    c.vocab_size = 45;
    c.seq_len = 24;
    c.tied_embeddings = shared;
    c.rope.orig_ctx = c.seq_len; // what the importer sets
    return c;
}

// Rewrite a legacy file as version 1, following export.py's version1_export order
// (rms_att, rms_ffn, rms_final, embedding, wq, wk, wv, wo, w1, w2, w3, [wcls]); the float
// block is cut up with run.c's legacy layout, independently of llama2c.c.
static void legacy_to_v1(const char *legacy, const char *v1) {
    size_t n;
    uint8_t *file = read_bytes(legacy, &n);
    int32_t h[7];
    memcpy(h, file, sizeof h);
    const float *f = (const float *)(file + 28);
    size_t dim = h[0], hidden = h[1], L = h[2], nh = h[3], nkv = h[4], V = abs(h[5]), S = h[6];
    size_t hs = dim / nh, kvd = hs * nkv;
    size_t sz[] = {V * dim,          L * dim,          L * dim * dim, L * dim * kvd,
                   L * dim * kvd,    L * dim * dim,    L * dim,       L * dim * hidden,
                   L * dim * hidden, L * dim * hidden, dim,           S * hs};
    const float *at[12];
    const float *p = f;
    for (int i = 0; i < 12; i++) at[i] = p, p += sz[i];
    Buf b = {0};
    put_u32(&b, 0x616b3432u);
    put_u32(&b, 1);
    int32_t h1[7] = {h[0], h[1], h[2], h[3], h[4], abs(h[5]), h[6]};
    put(&b, h1, sizeof h1);
    put_u8(&b, h[5] > 0);
    put_zeros(&b, 256 - b.len);
    int order[] = {1, 6, 10, 0, 2, 3, 4, 5, 7, 8, 9}; // indices into the legacy sections
    for (int i = 0; i < 11; i++) put(&b, at[order[i]], sz[order[i]] * sizeof(float));
    if (h[5] < 0) put(&b, p, V * dim * sizeof(float)); // p: after freq_cis
    write_bytes(v1, b.p, b.len);
    free(b.p);
    free(file);
}

static void test_llama2c_import(void **state) {
    (void)state;
    for (int shared = 0; shared < 2; shared++) {
        Config c = llama2c_config(shared);
        Model m, legacy, v1, v1_ours;
        random_model(&m, &c, 40 + shared);
        const char *path0 = tmp_path("legacy.bin"), *path1 = tmp_path("v1.bin"),
                   *path1_ours = tmp_path("v1_ours.bin");
        llama2c_save_model(path0, &m, 0);
        legacy_to_v1(path0, path1);
        llama2c_save_model(path1_ours, &m, 1);
        Error err;
        if (llama2c_load_model(path0, &legacy, &err)) fail_msg("%s", err.msg);
        if (llama2c_load_model(path1, &v1, &err)) fail_msg("%s", err.msg);
        if (llama2c_load_model(path1_ours, &v1_ours, &err)) fail_msg("%s", err.msg);
        Model *all[3] = {&legacy, &v1, &v1_ours};
        for (int i = 0; i < 3; i++) {
            assert_config_equal(&all[i]->config, &c);
            assert_memory_equal(all[i]->params, m.params, m.n_params * sizeof(float));
        }
        // our export of version 1 is byte-identical to the one built from export.py's order
        size_t n1, n2;
        uint8_t *a = read_bytes(path1, &n1), *b = read_bytes(path1_ours, &n2);
        assert_int_equal(n1, n2);
        assert_memory_equal(a, b, n1);
        free(a);
        free(b);

        // the imported model's logits equal run.c's on the legacy file, at every position
        enum { T = 20 };
        int tokens[T];
        uint64_t rng = rng_seed(3);
        for (int i = 0; i < T; i++) tokens[i] = (int)(rng_u64(&rng) % c.vocab_size);
        size_t n;
        uint8_t *file = read_bytes(path0, &n);
        int32_t h[7];
        memcpy(h, file, sizeof h);
        assert_int_equal(h[5], shared ? c.vocab_size : -c.vocab_size);
        double *want = mallocCheck((size_t)T * c.vocab_size * sizeof *want);
        run_c_forward((const float *)(file + 28), h, tokens, T, want);
        float *got = mallocCheck((size_t)T * c.vocab_size * sizeof *got);
        float *wantf = mallocCheck((size_t)T * c.vocab_size * sizeof *wantf);
        for (size_t i = 0; i < (size_t)T * c.vocab_size; i++) wantf[i] = (float)want[i];
        model_forward_full(&legacy, tokens, T, got, 1);
        for (int t = 0; t < T; t++) {
            double e =
                max_rel_error(got + (size_t)t * c.vocab_size, wantf + (size_t)t * c.vocab_size, c.vocab_size);
            if (!(e <= 1e-4)) fail_msg("position %d: logits differ from run.c's by %.3g", t, e);
        }
        free(want);
        free(wantf);
        free(got);
        free(file);
        for (int i = 0; i < 3; i++) model_free(all[i]);
        model_free(&m);
    }
}

static void test_checkpoint_load_llama2c_with_tokenizer(void **state) {
    (void)state;
    Tokenizer tok, back;
    llama2c_tokenizer(&tok);
    Config c = llama2c_config(1);
    c.vocab_size = tok.vocab_size;
    Model m, loaded;
    random_model(&m, &c, 9);
    const char *model_path = tmp_path("tok_model.bin"), *tok_path = tmp_path("tokenizer.bin");
    llama2c_save_model(model_path, &m, 1);
    llama2c_save_tokenizer(tok_path, &tok);
    Error err;
    if (checkpoint_load(model_path, tok_path, &loaded, &back, &err)) fail_msg("%s", err.msg);
    assert_memory_equal(loaded.params, m.params, m.n_params * sizeof(float));
    assert_tokenizer_equal(&back, &tok);
    model_free(&loaded);
    tokenizer_free(&back);
    // a llama2.c model and no tokenizer: fine without one, an error when one is wanted
    assert_int_equal(checkpoint_load(model_path, NULL, &loaded, NULL, &err), 0);
    model_free(&loaded);
    assert_error(checkpoint_load(model_path, NULL, &loaded, &back, &err), &err, model_path, "tokenizer");
    assert_error(checkpoint_load(tmp_path("absent.bin"), NULL, &loaded, NULL, &err), &err,
                 tmp_path("absent.bin"), "cannot open");
    model_free(&m);
    tokenizer_free(&tok);
}

// --- bad input: GGUF --------------------------------------------------------------------

// A small valid GGUF, with knobs to break one thing at a time.
typedef struct {
    char magic[4];
    uint32_t version;
    uint64_t n_tensors, n_kv; // as claimed in the header
    uint64_t key_len;         // claimed length of the first key; 0 = its real length
    uint32_t value_type;      // of key "x" (a u32 unless changed)
    uint32_t elem_type;       // when value_type is an array
    uint64_t array_n;         // claimed element count (4 are written)
    uint32_t n_dims;
    uint64_t dims[4];
    uint32_t tensor_type;
    uint64_t offset;
    uint32_t alignment; // 0: no general.alignment key
    int duplicate_key, duplicate_tensor;
} Craft;

static Craft craft_default(void) {
    Craft c = {{'G', 'G', 'U', 'F'}, 3, 1, 2, 0, GGUF_TYPE_UINT32, GGUF_TYPE_UINT32, 4, 2, {4, 2, 1, 1},
               GGML_TYPE_F32,        0, 0, 0, 0};
    return c;
}

static void craft(Buf *b, const Craft *c) {
    b->len = 0;
    put(b, c->magic, 4);
    put_u32(b, c->version);
    put_u64(b, c->n_tensors);
    put_u64(b, c->n_kv + (c->alignment != 0));
    const char *key = c->duplicate_key ? "x" : "general.architecture";
    put_u64(b, c->key_len ? c->key_len : strlen(key));
    put(b, key, strlen(key));
    put_u32(b, GGUF_TYPE_STRING);
    put_str(b, "llama");
    put_str(b, "x");
    put_u32(b, c->value_type);
    if (c->value_type == GGUF_TYPE_ARRAY) {
        put_u32(b, c->elem_type);
        put_u64(b, c->array_n);
        for (int i = 0; i < 4; i++) put_u32(b, 7);
    } else {
        put_u32(b, 7);
    }
    if (c->alignment) {
        put_str(b, "general.alignment");
        put_u32(b, GGUF_TYPE_UINT32);
        put_u32(b, c->alignment);
    }
    for (int t = 0; t < 1 + c->duplicate_tensor; t++) {
        put_str(b, "t");
        put_u32(b, c->n_dims);
        for (uint32_t d = 0; d < c->n_dims && d < 8; d++) put_u64(b, c->dims[d < 4 ? d : 3]);
        put_u32(b, c->tensor_type);
        put_u64(b, c->offset);
    }
    uint32_t alignment = c->alignment == 64 ? 64 : 32; // the alignments the cases read back
    put_zeros(b, (alignment - b->len % alignment) % alignment);
    for (int i = 0; i < 8; i++) put_u32(b, 0x3f800000u); // 8 floats of data
}

static void expect_craft_error(Craft c, const char *what) {
    Buf b = {0};
    craft(&b, &c);
    assert_gguf_error(&b, what);
    free(b.p);
}

static void test_gguf_rejects_malformed_headers(void **state) {
    (void)state;
    Buf b = {0};
    Craft c = craft_default();
    craft(&b, &c);
    const char *path = tmp_path("good.gguf");
    write_bytes(path, b.p, b.len);
    GGUFFile g;
    Error err;
    assert_int_equal(gguf_open(&g, path, &err), 0); // the base file is valid
    assert_int_equal(gguf_find_tensor(&g, "t")->n_elems, 8);
    gguf_close(&g);
    c.alignment = 64;
    craft(&b, &c);
    write_bytes(path, b.p, b.len);
    assert_int_equal(gguf_open(&g, path, &err), 0); // and so is it with another alignment
    assert_int_equal(g.alignment, 64);
    gguf_close(&g);
    free(b.p);

    // clang-format off
    c = craft_default(); memcpy(c.magic, "GGML", 4);    expect_craft_error(c, "not a GGUF file");
    c = craft_default(); c.version = 1;                 expect_craft_error(c, "unsupported GGUF version 1");
    c = craft_default(); c.version = 4;                 expect_craft_error(c, "unsupported GGUF version 4");
    c = craft_default(); c.version = 0x03000000u;       expect_craft_error(c, "big-endian");
    c = craft_default(); c.n_tensors = UINT64_MAX;      expect_craft_error(c, "tensors cannot fit");
    c = craft_default(); c.n_kv = 1ull << 40;           expect_craft_error(c, "key/values cannot fit");
    c = craft_default(); c.n_tensors = 2;               expect_craft_error(c, "tensor");
    c = craft_default(); c.n_kv = 3;                    expect_craft_error(c, "");
    c = craft_default(); c.key_len = UINT64_MAX;        expect_craft_error(c, "run past the end");
    c = craft_default(); c.key_len = 1ull << 40;        expect_craft_error(c, "run past the end");
    c = craft_default(); c.value_type = 99;             expect_craft_error(c, "unknown value type 99");
    c = craft_default(); c.value_type = GGUF_TYPE_ARRAY; c.elem_type = 13;  expect_craft_error(c, "array of unknown type");
    c = craft_default(); c.value_type = GGUF_TYPE_ARRAY; c.elem_type = GGUF_TYPE_ARRAY; expect_craft_error(c, "array of arrays");
    c = craft_default(); c.value_type = GGUF_TYPE_ARRAY; c.array_n = 1ull << 62; expect_craft_error(c, "run past the end");
    c = craft_default(); c.value_type = GGUF_TYPE_ARRAY; c.array_n = UINT64_MAX; expect_craft_error(c, "run past the end");
    c = craft_default(); c.value_type = GGUF_TYPE_ARRAY; c.elem_type = GGUF_TYPE_STRING; c.array_n = UINT64_MAX;
    expect_craft_error(c, "strings cannot fit");
    c = craft_default(); c.value_type = GGUF_TYPE_ARRAY; c.elem_type = GGUF_TYPE_STRING; // lengths 7 + 7 << 32
    expect_craft_error(c, "run past the end");
    c = craft_default(); c.value_type = GGUF_TYPE_STRING; expect_craft_error(c, "run past the end");
    c = craft_default(); c.n_dims = 5;                  expect_craft_error(c, "5 dimensions");
    c = craft_default(); c.n_dims = 0;                  expect_craft_error(c, "0 dimensions");
    c = craft_default(); c.dims[0] = c.dims[1] = 1ull << 40; expect_craft_error(c, "overflow");
    c = craft_default(); c.n_dims = 4; c.dims[2] = c.dims[3] = UINT64_MAX; expect_craft_error(c, "overflow");
    c = craft_default(); c.tensor_type = 2;             expect_craft_error(c, "rows of 4 weights cannot be q4_0");
    c = craft_default(); c.tensor_type = 7;             expect_craft_error(c, "type Q5_1");
    c = craft_default(); c.tensor_type = 30;            expect_craft_error(c, "type BF16");
    c = craft_default(); c.tensor_type = 1000;          expect_craft_error(c, "type unknown (1000)");
    c = craft_default(); c.offset = 32;                 expect_craft_error(c, "run past the end");
    c = craft_default(); c.offset = UINT64_MAX - 31;    expect_craft_error(c, "run past the end");
    c = craft_default(); c.offset = 4;                  expect_craft_error(c, "not a multiple of the alignment");
    c = craft_default(); c.dims[1] = 3;                 expect_craft_error(c, "run past the end");
    c = craft_default(); c.alignment = 48;              expect_craft_error(c, "not a power of two");
    c = craft_default(); c.alignment = 1u << 31;        expect_craft_error(c, "not a power of two");
    c = craft_default(); c.duplicate_key = 1;           expect_craft_error(c, "key 'x' occurs twice");
    c = craft_default(); c.duplicate_tensor = 1; c.n_tensors = 2; expect_craft_error(c, "tensor 't' occurs twice");
    // clang-format on

    // files that are not files, or are empty
    Error e;
    assert_error(gguf_open(&g, tmp_dir, &e), &e, tmp_dir, "not a regular file");
    assert_error(gguf_open(&g, tmp_path("absent.gguf"), &e), &e, tmp_path("absent.gguf"), "cannot open");
    write_bytes(tmp_path("empty.gguf"), "", 0);
    assert_error(gguf_open(&g, tmp_path("empty.gguf"), &e), &e, tmp_path("empty.gguf"), "the magic");
}

// A saved model + BPE tokenizer, as bytes.
static uint8_t *saved_model(int tied, int with_tokenizer, size_t *n) {
    Tokenizer tok;
    bpe_tokenizer(&tok, 262);
    Config c = small_config(tied);
    c.vocab_size = tok.vocab_size;
    Model m;
    random_model(&m, &c, 77);
    const char *path = tmp_path("saved.gguf");
    model_save_gguf(path, &m, with_tokenizer ? &tok : NULL, GGML_TYPE_F32);
    model_free(&m);
    tokenizer_free(&tok);
    return read_bytes(path, n);
}

// Offset of the value of key (its type tag skipped), found by its length-prefixed name.
static size_t value_offset(const uint8_t *buf, size_t n, const char *key) {
    Buf pattern = {0};
    put_str(&pattern, key);
    for (size_t i = 0; i + pattern.len + 4 <= n; i++)
        if (memcmp(buf + i, pattern.p, pattern.len) == 0) {
            free(pattern.p);
            return i + pattern.len + 4;
        }
    fail_msg("key '%s' not in the file", key);
    return 0;
}

// model_load_gguf of buf with `len` bytes at `offset` replaced must fail naming `what`.
static void expect_patch_error(const uint8_t *buf, size_t n, size_t offset, const void *bytes, size_t len,
                               int with_tokenizer, const char *what) {
    uint8_t *copy = mallocCheck(n);
    memcpy(copy, buf, n);
    memcpy(copy + offset, bytes, len);
    const char *path = tmp_path("patched.gguf");
    write_bytes(path, copy, n);
    Model m;
    Tokenizer tok;
    Error err = {""};
    int rc = model_load_gguf(path, &m, with_tokenizer ? &tok : NULL, &err);
    if (rc == 0) {
        model_free(&m);
        if (with_tokenizer) tokenizer_free(&tok);
    }
    assert_error(rc, &err, path, what);
    free(copy);
}

static void expect_u32_error(const uint8_t *buf, size_t n, const char *key, uint32_t v, const char *what) {
    expect_patch_error(buf, n, value_offset(buf, n, key), &v, 4, 1, what);
}

static void test_model_gguf_contradictions(void **state) {
    (void)state;
    size_t n;
    uint8_t *buf = saved_model(0, 1, &n);
    // config keys that contradict the tensors
    expect_u32_error(buf, n, "llama.feed_forward_length", 48,
                     "tensor 'blk.0.ffn_gate.weight' has shape [24, 40], the config needs [24, 48]");
    expect_u32_error(buf, n, "llama.embedding_length", 32, "has shape");
    expect_u32_error(buf, n, "llama.vocab_size", 300, "tensor 'token_embd.weight' has shape");
    expect_u32_error(buf, n, "llama.attention.head_count_kv", 4, "tensor 'blk.0.attn_k.weight' has shape");
    expect_u32_error(buf, n, "llama.attention.key_length", 6, "value_length 8 differs from key_length 6");
    expect_u32_error(buf, n, "llama.attention.value_length", 4, "value_length 4 differs");
    expect_u32_error(buf, n, "llama.rope.dimension_count", 4, "partial RoPE");
    expect_u32_error(buf, n, "llama.block_count", 3, "missing tensor 'blk.2.attn_norm.weight'");
    expect_u32_error(buf, n, "llama.block_count", 1, "tensor 'blk.1.attn_norm.weight' belongs to layer 1");
    expect_u32_error(buf, n, "llama.attention.head_count_kv", 3, "inconsistent config");
    expect_u32_error(buf, n, "llama.context_length", 0, "llama.context_length = 0 is out of range");
    expect_u32_error(buf, n, "llama.embedding_length", 0xffffffffu, "out of range");
    expect_u32_error(buf, n, "llama.embedding_length", 1u << 30, "inconsistent config");
    expect_u32_error(buf, n, "tokenizer.ggml.bos_token_id", 5, "tokenizer.ggml.bos_token_id = 5");
    expect_u32_error(buf, n, "tokenizer.ggml.eos_token_id", 0, "tokenizer.ggml.eos_token_id = 0");
    // the tied flag against output.weight
    uint8_t one = 1, five = 5;
    expect_patch_error(buf, n, value_offset(buf, n, "inferlab.tied_embeddings"), &one, 1, 1,
                       "ties the embeddings but the file has output.weight");
    expect_patch_error(buf, n, value_offset(buf, n, "inferlab.tied_embeddings"), &five, 1, 1, "not 0 or 1");
    // strings: the architecture, the RoPE scaling, the tokenizer model
    size_t arch = value_offset(buf, n, "general.architecture") + 8;
    expect_patch_error(buf, n, arch, "gpt-2", 5, 1, "architecture 'gpt-2' is not supported");
    size_t scaling = value_offset(buf, n, "llama.rope.scaling.type") + 8;
    expect_patch_error(buf, n, scaling, "nope", 4, 1, "unknown llama.rope.scaling.type 'nope'");
    expect_patch_error(buf, n, scaling, "no\0e", 4, 1, "unknown llama.rope.scaling.type");
    size_t model = value_offset(buf, n, "tokenizer.ggml.model") + 8;
    expect_patch_error(buf, n, model, "gpt3", 4, 1, "tokenizer model 'gpt3' is not supported");
    size_t pre = value_offset(buf, n, "tokenizer.ggml.pre") + 8;
    expect_patch_error(buf, n, pre, "starcodex", 9, 1, "pre-tokenizer 'starcodex' is not supported");
    // the type of a key
    size_t eps = value_offset(buf, n, "llama.attention.layer_norm_rms_epsilon");
    uint32_t type_u32 = GGUF_TYPE_UINT32;
    expect_patch_error(buf, n, eps - 4, &type_u32, 4, 1, "is uint32, expected a float");
    float nan = NAN;
    expect_patch_error(buf, n, eps, &nan, 4, 1, "not a finite float");
    // the tokenizer: a merge outside GPT-2's alphabet, a stored piece that differs
    expect_patch_error(buf, n, value_offset(buf, n, "tokenizer.ggml.merges") + 20, "\x01", 1, 1,
                       "gpt2 merge 0");
    expect_patch_error(buf, n, value_offset(buf, n, "tokenizer.ggml.tokens") + 20, "Z", 1, 1,
                       "gpt2 token 0 is not spelled in GPT-2's alphabet");
    // a tensor's own shape changed in its info
    Buf name = {0};
    put_str(&name, "blk.1.ffn_up.weight");
    uint8_t *at = memmem(buf, n, name.p, name.len);
    assert_non_null(at);
    uint64_t cols = 12;
    expect_patch_error(buf, n, (size_t)(at - buf) + name.len + 4, &cols, 8, 1,
                       "tensor 'blk.1.ffn_up.weight' has shape [12, 40], the config needs [24, 40]");
    free(name.p);
    free(buf);

    // a tied model whose flag says untied misses output.weight; no tokenizer when one is wanted
    buf = saved_model(1, 0, &n);
    uint8_t zero = 0;
    expect_patch_error(buf, n, value_offset(buf, n, "inferlab.tied_embeddings"), &zero, 1, 0,
                       "missing tensor 'output.weight'");
    expect_patch_error(buf, n, 0, "GGUF", 4, 1, "holds no tokenizer");
    free(buf);
}

// Cut the file at every offset where the header and metadata are, and every few bytes in the
// tensor data: each load fails cleanly. Then random byte corruption: never a crash.
static void test_gguf_truncated_and_corrupted(void **state) {
    (void)state;
    size_t n;
    uint8_t *buf = saved_model(0, 1, &n);
    const char *full = tmp_path("full.gguf"), *path = tmp_path("cut.gguf");
    write_bytes(full, buf, n);
    GGUFFile g;
    Error err;
    assert_int_equal(gguf_open(&g, full, &err), 0);
    size_t data_start = n, needed = 0; // the bytes a load needs end with the last tensor
    for (size_t i = 0; i < g.n_tensors; i++) {
        size_t start = (size_t)(g.tensors[i].data - g.buf);
        if (start < data_start) data_start = start;
        if (start + g.tensors[i].n_bytes > needed) needed = start + g.tensors[i].n_bytes;
    }
    gguf_close(&g);
    Model m;
    Tokenizer tok;
    for (size_t cut = 0; cut < needed; cut += cut < data_start + 64 ? 1 : 37) {
        write_bytes(path, buf, cut);
        int rc = model_load_gguf(path, &m, &tok, &err);
        if (rc == 0) fail_msg("a file cut at %zu of %zu bytes loaded", cut, needed);
        if (!strstr(err.msg, path)) fail_msg("cut at %zu: error '%s' does not name the file", cut, err.msg);
    }
    uint64_t rng = rng_seed(5);
    int loaded = 0;
    for (int trial = 0; trial < 400; trial++) {
        uint8_t *copy = mallocCheck(n);
        memcpy(copy, buf, n);
        for (int k = 0; k < 3; k++) { // corrupt the metadata region mostly: it steers the parser
            size_t at = (size_t)(rng_u64(&rng) % (k == 0 ? n : data_start));
            copy[at] = (uint8_t)(rng_u64(&rng) % 4 == 0 ? 0xff : rng_u64(&rng));
        }
        write_bytes(path, copy, n);
        if (model_load_gguf(path, &m, &tok, &err) == 0) {
            loaded++;
            model_free(&m);
            tokenizer_free(&tok);
        } else if (!strstr(err.msg, path)) {
            fail_msg("corruption: error '%s' does not name the file", err.msg);
        }
        free(copy);
    }
    print_message("corrupted files: %d of 400 still loaded (changed values only), the rest refused\n",
                  loaded);
    free(buf);
}

// --- bad input: llama2.c ----------------------------------------------------------------

static void expect_llama2c_error(const void *bytes, size_t n, const char *what) {
    const char *path = tmp_path("bad.bin");
    write_bytes(path, bytes, n);
    Model m;
    Error err = {""};
    int rc = llama2c_load_model(path, &m, &err);
    if (rc == 0) model_free(&m);
    assert_error(rc, &err, path, what);
}

static void test_llama2c_rejects_bad_files(void **state) {
    (void)state;
    for (int version = 0; version < 2; version++) {
        Config c = llama2c_config(version);
        Model m;
        random_model(&m, &c, 8);
        const char *path = tmp_path("good.bin");
        llama2c_save_model(path, &m, version);
        model_free(&m);
        size_t n;
        uint8_t *buf = read_bytes(path, &n);
        for (size_t cut = 0; cut < n; cut += cut < 300 ? 1 : 211) expect_llama2c_error(buf, cut, "");
        expect_llama2c_error(buf, n - 1, "implies");
        uint8_t *longer = mallocCheck(n + 4);
        memcpy(longer, buf, n);
        memset(longer + n, 0, 4);
        expect_llama2c_error(longer, n + 4, "implies");
        free(longer);

        int32_t *h = (int32_t *)(buf + (version == 0 ? 0 : 8)); // the 7 ints
        int32_t saved[7];
        memcpy(saved, h, sizeof saved);
        struct {
            int field;
            int32_t value;
            const char *what;
        } cases[] = {
            {0, 33, "dim is not a multiple of n_heads"},
            {4, 3, "n_heads is not a multiple of n_kv_heads"},
            {0, -32, "bad llama2.c header"},
            {2, 0, "bad llama2.c header"},
            {0, 1 << 30, "bad llama2.c header"},
            {6, 0, "bad llama2.c header"},
            {5, INT32_MIN, "vocab_size"},
            {5, 0, "vocab_size"},
            {0, 4096, "implies"}, // a valid but much larger model: refused before any allocation
            {2, 100000, "implies"},
        };
        for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
            memcpy(h, saved, sizeof saved);
            h[cases[i].field] = cases[i].value;
            if (cases[i].field == 0 && cases[i].value == 4096) h[3] = 32, h[4] = 32;
            expect_llama2c_error(buf, n, cases[i].what);
        }
        memcpy(h, saved, sizeof saved);
        if (version == 1) {
            int32_t v2 = 2;
            memcpy(buf + 4, &v2, 4);
            expect_llama2c_error(buf, n, "version 2 is not supported");
            v2 = 1;
            memcpy(buf + 4, &v2, 4);
            buf[36] = 7;
            expect_llama2c_error(buf, n, "shared_classifier flag is 7");
            buf[36] = 0;
            h[5] = -h[5];
            expect_llama2c_error(buf, n, "vocab_size");
        }
        free(buf);
    }
    Model m;
    Error err;
    assert_error(llama2c_load_model(tmp_dir, &m, &err), &err, tmp_dir, "not a regular file");
}

// --- the reference reader and writer (gguf-py) -------------------------------------------

// What tests/gguf_peer.py's dump prints, from our reader: one line per key/value and tensor.
static const char *value_type_name(GGUFType t) {
    static const char *names[] = {"UINT8", "INT8",  "UINT16", "INT16",  "UINT32", "INT32",  "FLOAT32",
                                  "BOOL",  "STRING", "ARRAY", "UINT64", "INT64", "FLOAT64"};
    return names[t];
}

static void put_hex(Buf *b, const uint8_t *p, size_t n) {
    char hex[3];
    for (size_t i = 0; i < n; i++) snprintf(hex, sizeof hex, "%02x", p[i]), put(b, hex, 2);
}

static void put_text(Buf *b, const char *s) { put(b, s, strlen(s)); }

// One value of type t at p, as dump shows it; returns its size in the file.
static size_t put_value(Buf *b, GGUFType t, const uint8_t *p) {
    static const size_t sizes[] = {1, 1, 2, 2, 4, 4, 4, 1, 0, 0, 8, 8, 8};
    char num[32];
    if (t == GGUF_TYPE_STRING) {
        uint64_t len;
        memcpy(&len, p, 8);
        put_hex(b, p + 8, len);
        return 8 + len;
    }
    if (t == GGUF_TYPE_FLOAT32 || t == GGUF_TYPE_FLOAT64) {
        put_hex(b, p, sizes[t]);
        return sizes[t];
    }
    uint64_t u = 0;
    memcpy(&u, p, sizes[t]);
    int is_signed = t == GGUF_TYPE_INT8 || t == GGUF_TYPE_INT16 || t == GGUF_TYPE_INT32 || t == GGUF_TYPE_INT64;
    int shift = 64 - 8 * (int)sizes[t];
    if (is_signed) snprintf(num, sizeof num, "%lld", (long long)((int64_t)(u << shift) >> shift));
    else snprintf(num, sizeof num, "%llu", (unsigned long long)u);
    put_text(b, num);
    return sizes[t];
}

static char *our_listing(const char *path) {
    GGUFFile g;
    Error err;
    if (gguf_open(&g, path, &err)) fail_msg("%s", err.msg);
    Buf b = {0};
    char num[64];
    for (size_t i = 0; i < g.n_kv; i++) {
        const GGUFKV *kv = &g.kv[i];
        put_text(&b, "kv ");
        put_text(&b, kv->key);
        put_text(&b, " ");
        if (kv->type == GGUF_TYPE_ARRAY) {
            snprintf(num, sizeof num, "ARRAY[%s] %llu", value_type_name(kv->elem_type), (unsigned long long)kv->n);
            put_text(&b, num);
        } else {
            put_text(&b, value_type_name(kv->type));
        }
        const uint8_t *p = kv->data;
        for (uint64_t k = 0; k < kv->n; k++) {
            put_text(&b, " ");
            p += put_value(&b, kv->elem_type, p);
        }
        put_text(&b, "\n");
    }
    for (size_t i = 0; i < g.n_tensors; i++) {
        const GGUFTensor *t = &g.tensors[i];
        const char *type = t->type == GGML_TYPE_F32 ? "F32" : t->type == GGML_TYPE_F16 ? "F16"
                         : (int)t->type == dtype_ggml_type(DTYPE_Q8_0) ? "Q8_0" : (int)t->type == dtype_ggml_type(DTYPE_Q4_0) ? "Q4_0" : "?";
        snprintf(num, sizeof num, "tensor %s %s ", t->name, type);
        put_text(&b, num);
        for (int d = 0; d < t->n_dims; d++) {
            snprintf(num, sizeof num, "%s%llu", d ? "," : "", (unsigned long long)t->dims[d]);
            put_text(&b, num);
        }
        put_text(&b, "\n");
    }
    gguf_close(&g);
    put(&b, "", 1);
    return (char *)b.p;
}

// Run tests/gguf_peer.py with args; its stdout (malloc'd), or NULL when it failed.
static char *run_peer(const char *args) {
    const char *root = getenv("INFERLAB_ROOT");
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "python3 '%s/tests/gguf_peer.py' %s", root ? root : ".", args);
    FILE *p = popen(cmd, "r");
    if (!p) return NULL;
    Buf b = {0};
    char chunk[65536];
    for (size_t n; (n = fread(chunk, 1, sizeof chunk, p)) > 0;) put(&b, chunk, n);
    put(&b, "", 1);
    if (pclose(p) != 0) {
        free(b.p);
        return NULL;
    }
    return (char *)b.p;
}

static void skip_without_gguf_py(void) {
    if (system("python3 -c 'import gguf' 2>/dev/null") != 0) {
        print_message("SKIPPED: python3 has no gguf module (`make deps` installs it: pip install gguf)\n");
        skip();
    }
}

// Every kind of file the lab writes: our BPE (gpt2) and a llama2.c vocabulary; F32, F16,
// Q8_0, Q4_0 weights; MLA and CLA; tied and untied.
typedef struct {
    const char *name;
    int tokenizer; // 0 none, 1 BPE, 2 llama2.c
    int mla, cla, tied;
    GGMLType wtype;
    DType quant; // DTYPE_F32: not quantised
} FileKind;

static const FileKind FILE_KINDS[] = {
    {"f32-bpe", 1, 0, 0, 1, GGML_TYPE_F32, DTYPE_F32},  {"f16-bpe", 1, 0, 0, 0, GGML_TYPE_F16, DTYPE_F32},
    {"q8_0-bpe", 1, 0, 0, 0, GGML_TYPE_F32, DTYPE_Q8_0}, {"q4_0-bpe", 1, 0, 0, 1, GGML_TYPE_F32, DTYPE_Q4_0},
    {"mla-llama", 2, 1, 0, 0, GGML_TYPE_F32, DTYPE_F32}, {"cla-bpe", 1, 0, 1, 1, GGML_TYPE_F32, DTYPE_F32},
    {"mla-cla-none", 0, 1, 1, 0, GGML_TYPE_F32, DTYPE_F32},
};

// Write kind k from a random model (m, tok filled; tok empty without a tokenizer).
static const char *write_kind(const FileKind *k, Model *m, Tokenizer *tok) {
    Config c = small_config(k->tied);
    memset(tok, 0, sizeof *tok);
    if (k->tokenizer == 1) bpe_tokenizer(tok, 300);
    if (k->tokenizer == 2) llama2c_tokenizer(tok);
    if (k->tokenizer) c.vocab_size = tok->vocab_size;
    if (k->quant != DTYPE_F32) c.dim = 64, c.hidden_dim = 128, c.head_dim = 16; // whole 32-blocks
    if (k->mla) c.n_kv_heads = c.n_heads, c.kv_lora_rank = 12, c.rope_dim = 4;
    if (k->cla) c.n_layers = 3, c.kv_share = 2;
    random_model(m, &c, 200);
    if (k->quant != DTYPE_F32) {
        m->quant = mallocCheck(sizeof *m->quant);
        quant_weights_build(m->quant, m, k->quant);
        quant_weights_dequantize_into(m->quant, m);
    }
    const char *path = tmp_path(k->name);
    model_save_gguf(path, m, k->tokenizer ? tok : NULL, k->wtype);
    return path;
}

// gguf-py sees every key, value (bit for bit), tensor type and shape as our reader does.
static void test_reference_reader_sees_what_we_wrote(void **state) {
    (void)state;
    skip_without_gguf_py();
    for (size_t i = 0; i < sizeof FILE_KINDS / sizeof *FILE_KINDS; i++) {
        Model m;
        Tokenizer tok;
        const char *path = write_kind(&FILE_KINDS[i], &m, &tok);
        char args[256];
        snprintf(args, sizeof args, "dump '%s'", path);
        char *want = our_listing(path), *got = run_peer(args);
        if (!got) fail_msg("%s: tests/gguf_peer.py dump failed", FILE_KINDS[i].name);
        assert_string_equal(got, want);
        if (FILE_KINDS[i].quant != DTYPE_F32)
            assert_non_null(strstr(got, FILE_KINDS[i].quant == DTYPE_Q8_0 ? " Q8_0 64,64\n" : " Q4_0 64,64\n"));
        if (FILE_KINDS[i].tokenizer == 1) // "gpt2" spelled as hex
            assert_non_null(strstr(got, "kv tokenizer.ggml.model STRING 67707432\n"));
        free(want);
        free(got);
        model_free(&m);
        tokenizer_free(&tok);
    }
}

// A file gguf-py writes (every key/value and tensor of ours, rewritten) loads as the original
// does: the same config, weights bit for bit (as read from ours: F16 and quantised tensors
// too), and tokenizer.
static void test_we_read_what_gguf_py_wrote(void **state) {
    (void)state;
    skip_without_gguf_py();
    for (size_t i = 0; i < sizeof FILE_KINDS / sizeof *FILE_KINDS; i++) {
        const FileKind *k = &FILE_KINDS[i];
        Model m, back;
        Tokenizer tok, tok_back;
        const char *path = write_kind(k, &m, &tok), *copy = tmp_path("gguf-py.gguf");
        char args[512];
        snprintf(args, sizeof args, "rewrite '%s' '%s'", path, copy);
        char *out = run_peer(args);
        if (!out) fail_msg("%s: tests/gguf_peer.py rewrite failed", k->name);
        free(out);
        Error err;
        Model orig; // our file as we read it: F16 rounded, quantised tensors dequantised
        if (model_load_gguf(path, &orig, NULL, &err)) fail_msg("%s: %s", k->name, err.msg);
        if (model_load_gguf(copy, &back, k->tokenizer ? &tok_back : NULL, &err)) fail_msg("%s: %s", k->name, err.msg);
        assert_config_equal(&back.config, &m.config);
        assert_int_equal(back.n_params, m.n_params);
        assert_memory_equal(back.params, orig.params, m.n_params * sizeof(float));
        assert_int_equal(back.quant != NULL, m.quant != NULL);
        if (m.quant) assert_int_equal(back.quant->bytes, m.quant->bytes);
        model_free(&orig);
        if (k->tokenizer) {
            assert_tokenizer_equal(&tok_back, &tok);
            tokenizer_free(&tok_back);
        }
        // and gguf-py's file, read by both, lists the same
        snprintf(args, sizeof args, "dump '%s'", copy);
        char *want = our_listing(copy), *got = run_peer(args);
        if (!got) fail_msg("%s: tests/gguf_peer.py dump failed", k->name);
        assert_string_equal(got, want);
        free(want);
        free(got);
        model_free(&back);
        model_free(&m);
        tokenizer_free(&tok);
    }
}

int main(void) {
    snprintf(tmp_dir, sizeof tmp_dir, "/tmp/test_gguf.XXXXXX");
    if (!mkdtemp(tmp_dir)) die("cannot create a scratch directory under /tmp");
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_half_conversion),
        cmocka_unit_test(test_gguf_reads_every_value_type),
        cmocka_unit_test(test_gguf_writer_round_trip),
        cmocka_unit_test(test_model_gguf_round_trip_f32),
        cmocka_unit_test(test_model_gguf_round_trip_f16),
        cmocka_unit_test(test_model_gguf_rope_scaling_keys),
        cmocka_unit_test(test_llama2c_import),
        cmocka_unit_test(test_checkpoint_load_llama2c_with_tokenizer),
        cmocka_unit_test(test_gguf_rejects_malformed_headers),
        cmocka_unit_test(test_gguf_truncated_and_corrupted),
        cmocka_unit_test(test_model_gguf_contradictions),
        cmocka_unit_test(test_llama2c_rejects_bad_files),
        cmocka_unit_test(test_reference_reader_sees_what_we_wrote),
        cmocka_unit_test(test_we_read_what_gguf_py_wrote),
    };
    int failed = cmocka_run_group_tests_name("gguf", tests, NULL, NULL);
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmp_dir);
    if (system(cmd) != 0) fprintf(stderr, "warning: could not remove %s\n", tmp_dir);
    return failed;
}
