// test_attention_variants.c: the arithmetic of bin/attention_variants
// (experiments/attention_variants/variants.c): the KV formula against hand counts (MHA, GQA,
// MQA, MLA, CLA) and against the bytes the allocator hands out for every attention variant
// of both zoos, the 1 GiB
// budget fit, a hybrid's cache by layer kind (Gemma 3 270M's shape), the real models' KV per token and 80 GB contexts (Llama-2-7B MHA, Llama-2-70B
// GQA-8, DeepSeek-V2 MLA 512 + 64: the lecture's 8x and 28x), and bin/train's records read or
// rejected with the file and line named.
//
//   make build/tests/test_attention_variants && ./build/tests/test_attention_variants
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "rng.h"
#include "variants.h"
#include "presets_fixture.h"
#include "zoo.h"

#define assert_near(got, want, tol)                                                                  \
    do {                                                                                             \
        double g_ = (got), w_ = (want);                                                              \
        if (!(fabs(g_ - w_) <= (tol))) fail_msg("%s = %.10g, want %.10g (tol %g)", #got, g_, w_, (double)(tol)); \
    } while (0)

static Config shape(int layers, int heads, int kv_heads, int head_dim) {
    Config c = config_default();
    c.dim = heads * head_dim, c.hidden_dim = 4 * c.dim, c.n_layers = layers;
    c.n_heads = heads, c.n_kv_heads = kv_heads, c.head_dim = head_dim;
    c.vocab_size = 256, c.seq_len = 256;
    return c;
}

// 3 layers, 8 query heads of 16: MHA caches 2 x 8 x 16 = 256 floats per token-layer, GQA-2
// 2 x 2 x 16 = 64, MQA 2 x 16 = 32; 4 bytes each, over 3 layers.
static void test_formula_by_hand(void **state) {
    (void)state;
    static const struct {
        int kv_heads;
        double elements, bytes_per_token;
    } cases[] = {{8, 256, 3 * 256 * 4}, {2, 64, 3 * 64 * 4}, {1, 32, 3 * 32 * 4}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        Config c = shape(3, 8, cases[i].kv_heads, 16);
        AvKv kv = av_kv(&c);
        assert_int_equal(kv.cached_layers, 3);
        assert_near(kv.elements_per_cached_layer, cases[i].elements, 0.0);
        assert_near(kv.elements_per_token_layer, cases[i].elements, 0.0);
        assert_near(kv.bytes_per_token, cases[i].bytes_per_token, 0.0);
        assert_int_equal(av_kv_formula_bytes(&c, 1000), (size_t)(1000 * cases[i].bytes_per_token));
    }
    // MLA with d_c = 64, d_r = 8 caches 64 + 8 = 72 floats per token-layer, 3 x 72 x 4 = 864
    // bytes per token; GQA-2 sharing each pair of its 3 layers caches 2 of them ({0, 1}, {2}):
    // 2 x 64 floats / 3 layers = 42.67 per token-layer, 2 x 64 x 4 = 512 bytes per token.
    Config mla = shape(3, 8, 8, 16);
    mla.kv_lora_rank = 64, mla.rope_dim = 8;
    AvKv kv = av_kv(&mla);
    assert_int_equal(kv.cached_layers, 3);
    assert_near(kv.elements_per_token_layer, 72, 0.0);
    assert_near(kv.bytes_per_token, 864, 0.0);
    Config cla = shape(3, 8, 2, 16);
    cla.kv_share = 2;
    kv = av_kv(&cla);
    assert_int_equal(kv.cached_layers, 2);
    assert_near(kv.elements_per_cached_layer, 64, 0.0);
    assert_near(kv.elements_per_token_layer, 128.0 / 3, 1e-12);
    assert_near(kv.bytes_per_token, 512, 0.0);
}

// Gemma 3 270M's shape: 18 layers, 4 query heads, one KV head of 256, every sixth layer global,
// the others a window of 512. At 8192 positions a global layer holds 8192 x 2 x 256 x 4 =
// 16 MiB, a local one its ring of 512 (1 MiB) whatever the context; 3 x 16 + 15 x 1 MiB in all;
// MHA in every layer: 2 x 4 x 256 x 18 layers x 8192 x 4 bytes. SmolLM2's GQA-3 has no windowed
// layer. The names: mha, gqa-<n>, mqa, mla.
static void test_layer_kinds_by_hand(void **state) {
    (void)state;
    Config g = shape(18, 4, 1, 256);
    g.window = 512, g.global_every = 6, g.seq_len = 32768;
    AvLayerKinds k = av_kv_layer_kinds(&g, 8192);
    assert_int_equal(k.full_layers, 3);
    assert_near(k.full_layer_bytes, 16 << 20, 0);
    assert_near(k.windowed_layer_bytes, 1 << 20, 0);
    assert_near(k.mha_bytes, 2.0 * 4 * 256 * 18 * 8192 * 4, 0);
    assert_int_equal(av_kv_formula_bytes(&g, 8192), (size_t)(3 * 16 + 15) << 20);
    k = av_kv_layer_kinds(&g, 256); // below the window a local layer holds the context, not a ring
    assert_near(k.full_layer_bytes, 256 * 2 * 256 * 4, 0);
    assert_near(k.windowed_layer_bytes, 256 * 2 * 256 * 4, 0);
    g.global_windowed = 1; // the all-local ablation: no layer attends to the whole context
    assert_int_equal(av_kv_layer_kinds(&g, 8192).full_layers, 0);
    Config s = shape(30, 9, 3, 64);
    k = av_kv_layer_kinds(&s, 1024);
    assert_int_equal(k.full_layers, 30);
    assert_near(k.full_layer_bytes, 1024 * 2 * 3 * 64 * 4, 0);
    assert_near(k.windowed_layer_bytes, 0, 0);
    assert_near(k.mha_bytes / av_kv_formula_bytes(&s, 1024), 3, 0);
    char name[16];
    static const struct {
        int heads, kv_heads, lora;
        const char *want;
    } names[] = {{9, 9, 0, "mha"}, {9, 3, 0, "gqa-3"}, {4, 1, 0, "mqa"}, {16, 16, 512, "mla"}};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        av_attention_name(name, sizeof name, names[i].heads, names[i].kv_heads, names[i].lora);
        assert_string_equal(name, names[i].want);
    }
}

// Allocated bytes are the formula's plus the allocator's overhead: at most a chunk header and
// a page of rounding per allocation. The caches checked are >= 256 KiB, so a cache of half or
// twice the formula's size (a lost factor 2 or a layer count off) would fail.
#define OVERHEAD_BYTES (16 * 1024)
#define MIN_CHECKED_BYTES (256 * 1024)

static void expect_allocated_matches(const Config *c, int capacity, const char *what) {
    size_t formula = av_kv_formula_bytes(c, capacity);
    if (formula < MIN_CHECKED_BYTES) fail_msg("%s: a cache of %zu bytes is too small to check", what, formula);
    size_t got = av_kv_allocated_bytes(ops_cpu(), c, capacity);
    if (got < formula || got - formula > OVERHEAD_BYTES)
        fail_msg("%s at %d positions: allocated %zu bytes, formula %zu", what, capacity, got, formula);
}

// Every attention variant of both zoos (MHA, GQA, MQA and any the zoo adds), at the contexts
// the experiment measures, and random shapes.
static void test_formula_matches_allocator(void **state) {
    (void)state;
    const char *profiles[] = {"quick", "full"};
    for (int p = 0; p < 2; p++) {
        Zoo z;
        Error err;
        if (zoo_for_profile(&z, profiles[p], &err)) fail_msg("%s", err.msg);
        int n = 0;
        for (const ZooModel *m; (m = zoo_with_role(&z, "attention", n)); n++) {
            char what[64];
            snprintf(what, sizeof what, "%s %s", profiles[p], m->name);
            expect_allocated_matches(&m->config, 4096, what);
            expect_allocated_matches(&m->config, 2048, what);
        }
        assert_true(n >= 3); // MHA, GQA, MQA at least
    }
    uint64_t rng = rng_seed(14);
    for (int i = 0; i < 20; i++) {
        int heads = 1 << (rng_u64(&rng) % 4), kv = heads >> (rng_u64(&rng) % 3);
        Config c = shape(1 + (int)(rng_u64(&rng) % 4), heads, kv > 0 ? kv : 1, 16 + 16 * (int)(rng_u64(&rng) % 4));
        expect_allocated_matches(&c, 4096 + (int)(rng_u64(&rng) % 4096), "random shape");
        c.window = 64 + (int)(rng_u64(&rng) % 512); // local layers hold only a ring of their window
        c.n_sink = (int)(rng_u64(&rng) % 8);
        c.global_every = c.n_layers > 1 ? 2 : 0;
        expect_allocated_matches(&c, 4096 + (int)(rng_u64(&rng) % 4096), "random hybrid shape");
    }
}

// 1 GiB at 3072 bytes per token (the MHA case above): 349,525 tokens (349,525.33); 85 sequences
// of 4096 (85.3); an exact fit stays whole: 1024 sequences of 1024 at 1 KiB per token.
static void test_budget_fit(void **state) {
    (void)state;
    double gib = 1024.0 * 1024 * 1024;
    assert_int_equal(av_budget_tokens(gib, 3072), 349525);
    assert_int_equal(av_budget_batch(gib, 3072, 4096), 85);
    assert_int_equal(av_budget_batch(gib, 3072, 256), 1365);
    assert_int_equal(av_budget_batch(gib, 1024, 1024), 1024);
    assert_int_equal(av_budget_batch(gib, 3072, 1 << 20), 0); // one sequence needs 3 GiB
    uint64_t rng = rng_seed(7);
    for (int i = 0; i < 1000; i++) { // the largest batch that fits, and no larger
        double per_token = 1 + (double)(rng_u64(&rng) % 100000);
        int context = 1 + (int)(rng_u64(&rng) % 100000);
        long b = av_budget_batch(gib, per_token, context);
        assert_true(b * context * per_token <= gib);
        assert_true((b + 1) * context * per_token > gib);
    }
}

// fp16 caches, 80 GB (8e10 bytes):
//   Llama-2-7B   MHA    2 x 32 x 128 = 8192 per token-layer, x 32 layers x 2 B = 524,288 B/token;
//                       152,587 tokens (152,587.9); beside 13.48 GB of weights 126,882 (126,882.9)
//   Llama-2-70B  GQA-8  2 x 8 x 128 = 2048 against MHA's 2 x 64 x 128 = 16,384: 8x;
//                       x 80 layers x 2 B = 327,680 B/token, 244,140 tokens; weights alone exceed 80 GB
//   DeepSeek-V2  MLA    512 + 64 = 576 against its MHA's 2 x 128 x 128 = 32,768 (56.9x), and
//                       against the lecture's 16,384 (64 heads of 128): 28.4x, "28x";
//                       x 60 layers x 2 B = 69,120 B/token, 1,157,407 tokens
static void test_presets(void **state) {
    (void)state;
    char path[1024];
    Error err;
    ModelShape *models;
    int n;
    template_path(path, sizeof path, "model_presets.csv");
    if (budget_load_models(path, &models, &n, &err)) fail_msg("%s", err.msg);
    AvPresetKv l7 = av_preset_kv(find_model(models, n, "Llama-2-7B"), 80e9);
    assert_string_equal(l7.attention, "mha");
    assert_near(l7.elements_per_token_layer, 8192, 0);
    assert_near(l7.reduction_vs_mha, 1, 0);
    assert_near(l7.bytes_per_token, 524288, 0);
    assert_int_equal(l7.context_fit, 152587);
    assert_near(l7.context_fit_beside_weights, 126882, 0);
    AvPresetKv l70 = av_preset_kv(find_model(models, n, "Llama-2-70B"), 80e9);
    assert_string_equal(l70.attention, "gqa-8");
    assert_near(l70.elements_per_token_layer, 2048, 0);
    assert_near(l70.mha_elements_per_token_layer, 16384, 0);
    assert_near(l70.reduction_vs_mha, 8, 0);
    assert_near(l70.bytes_per_token, 327680, 0);
    assert_int_equal(l70.context_fit, 244140);
    assert_near(l70.context_fit_beside_weights, 0, 0);
    AvPresetKv ds = av_preset_kv(find_model(models, n, "DeepSeek-V2"), 80e9);
    assert_string_equal(ds.attention, "mla");
    assert_near(ds.elements_per_token_layer, 576, 0);
    assert_near(ds.mha_elements_per_token_layer, 32768, 0);
    assert_near(ds.reduction_vs_mha, 32768.0 / 576, 1e-12);
    assert_near(l70.mha_elements_per_token_layer / ds.elements_per_token_layer, 28.44, 0.005);
    assert_near(ds.bytes_per_token, 69120, 0);
    assert_int_equal(ds.context_fit, 1157407);
    free(models);
}

// ---- bin/train's records --------------------------------------------------------------------

#define RECORD_HEADER "name,role,attention,params,val_bits_per_byte,passkey_accuracy\n"

static char dir[64];

static void write_record(const char *text) {
    char path[128];
    snprintf(path, sizeof path, "%s/attn-x.summary.csv", dir);
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
}

static void expect_record_error(const char *text, const char *what) {
    write_record(text);
    AvRecord r;
    Error err = {{0}};
    if (av_read_record(dir, "attn-x", &r, &err) == 0) fail_msg("accepted a bad record (want '%s'):\n%s", what, text);
    if (!strstr(err.msg, "attn-x.summary.csv") || !strstr(err.msg, what))
        fail_msg("message '%s' lacks the file or '%s'", err.msg, what);
}

static void test_read_record(void **state) {
    (void)state;
    snprintf(dir, sizeof dir, "/tmp/test_attention_variants_%d", (int)getpid());
    assert_int_equal(mkdir(dir, 0700), 0);
    write_record(RECORD_HEADER "attn-x,attention,gqa,123456,1.75,0.9\n");
    AvRecord r;
    Error err;
    if (av_read_record(dir, "attn-x", &r, &err)) fail_msg("%s", err.msg);
    assert_near(r.params, 123456, 0);
    assert_near(r.val_bits_per_byte, 1.75, 0);
    assert_near(r.passkey_accuracy, 0.9, 0);
    expect_record_error(RECORD_HEADER "attn-y,attention,gqa,123456,1.75,0.9\n", "the record of 'attn-y'");
    expect_record_error(RECORD_HEADER "attn-x,attention,gqa,123456,1.75,0.9\nattn-x,attention,gqa,1,1,1\n",
                        ":3: more than one record");
    expect_record_error(RECORD_HEADER, "no record");
    expect_record_error(RECORD_HEADER "attn-x,attention,gqa,123456,fast,0.9\n", ":2: column 'val_bits_per_byte'");
    expect_record_error(RECORD_HEADER "attn-x,attention,gqa,123456,1.75,1.5\n", "not in [0, 1]");
    expect_record_error("name,params,val_bits_per_byte\nattn-x,1,2\n", "no column 'passkey_accuracy'");
    char path[128];
    snprintf(path, sizeof path, "%s/attn-x.summary.csv", dir);
    unlink(path);
    assert_int_equal(av_read_record(dir, "attn-x", &r, &err), -1);
    assert_non_null(strstr(err.msg, "cannot open"));
    rmdir(dir);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_formula_by_hand),
        cmocka_unit_test(test_layer_kinds_by_hand),
        cmocka_unit_test(test_formula_matches_allocator),
        cmocka_unit_test(test_budget_fit),
        cmocka_unit_test(test_presets),
        cmocka_unit_test(test_read_record),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
