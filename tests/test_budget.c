// test_budget.c: the hardware budget formulas (experiments/lab/budget.c) against
// hand-computed cases, the lecture's worked example (Llama-2 13B on an H100), agreement with
// the engine's own parameter and FLOP counts, the reference tables in templates/, and
// malformed tables rejected with the file and line named.
//
//   make build/tests/test_budget && ./build/tests/test_budget
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "budget.h"
#include "presets_fixture.h"
#include "rng.h"

static const Precision BF16 = {NUM_BF16, NUM_BF16};

// Llama-2 13B from its config.json (a hand copy, independent of templates/).
static ModelShape llama2_13b(void) {
    ModelShape m = {.name = "Llama-2-13B", .n_params = 13015864320.0, .n_params_active = 13015864320.0,
                    .n_layers = 40, .dim = 5120, .hidden_dim = 13824, .n_heads = 40, .n_kv_heads = 40,
                    .head_dim = 128, .vocab_size = 32000, .max_context = 4096};
    return m;
}

static HardwareSpec h100(void) {
    HardwareSpec h = {.name = "H100 SXM", .kind = "gpu", .memory_bytes = 80e9, .bandwidth_bytes_s = 3.35e12,
                      .bf16_flop_s = 989.4e12, .fp32_flop_s = 67e12};
    return h;
}

#define assert_near(got, want, tol)                                                                  \
    do {                                                                                             \
        double g_ = (got), w_ = (want);                                                              \
        if (!(fabs(g_ - w_) <= (tol))) fail_msg("%s = %.10g, want %.10g (tol %g)", #got, g_, w_, (double)(tol)); \
    } while (0)

// --- the lecture's worked example ------------------------------------------------------------
// Llama-2 13B, bf16, H100 SXM: 26 GB of weights; batch 64 at 610 tokens of context each holds
// about 32 GB of KV (decimal GB, 1e9 bytes); decode at batch 1 is memory-bound.
static void test_worked_example(void **state) {
    (void)state;
    ModelShape m = llama2_13b();
    HardwareSpec h = h100();
    Budget b = budget_compute(&m, &h, BF16, 610, 64, 1024);
    assert_near(b.weight_bytes, 26031728640.0, 0.5);            // 13,015,864,320 x 2
    assert_near(b.weight_bytes / 1e9, 26.0, 0.05);               // "26 GB"
    assert_near(b.kv_bytes_per_token, 819200.0, 0.0);            // 2 x 40 layers x 40 heads x 128 x 2 B
    assert_near(b.kv_bytes_large, 31981568000.0, 0.5);           // 64 x 610 x 819,200
    assert_near(b.kv_bytes_large / 1e9, 32.0, 0.05);             // "about 32 GB" (29.8 GiB)
    assert_true(b.fits_large);                                   // 26 + 32 <= 80
    // Batch 1 reads every weight but the 32000 x 5120 input embedding, plus 610 tokens of KV.
    assert_near(b.decode_1.bytes, 25704048640.0 + 499712000.0, 0.5);
    assert_false(b.decode_1.compute_bound);
    assert_near(b.decode_1.time_s * 1e3, 7.822018, 1e-5);      // 26.2 GB / 3.35 TB/s
    // 2 x (13,015,864,320 - 163,840,000 embedding - 414,720 norm gains) + 40 x 4 x 40 x 128 x 610
    assert_near(b.decode_1.flops, 26202931200.0, 0.5);
    assert_near(b.decode_1.intensity, 26202931200.0 / 26203760640.0, 1e-12);
    assert_near(budget_ridge(&h, BF16), 295.3432836, 1e-6);     // 989.4 T / 3.35 T
    // Batch 64: still memory-bound; 57.7 GB per step, 3717 tokens/s.
    assert_false(b.decode_large.compute_bound);
    assert_near(b.decode_large.bytes, 25704048640.0 + 31981568000.0, 0.5);
    assert_near(b.decode_large.time_s * 1e3, 17.219587, 1e-5);
    assert_near(b.throughput_tok_s, 3716.6977, 1e-3);
    // Prefill of 1K tokens: compute-bound, 26.75 TFLOP / 989.4 TFLOP/s.
    assert_true(b.prefill.compute_bound);
    assert_near(b.prefill.flops, 2.0 * 12851609600.0 * 1024 + 40 * 4.0 * 40 * 128 * (1024.0 * 1025 / 2), 1.0);
    assert_near(b.prefill.time_s * 1e3, 27.036601, 1e-5);
    // (80e9 - 26,031,728,640) / 819,200 = 65,879.2
    assert_near(b.kv_tokens_fit, 65879.0, 0.0);
}

// --- attention variants ---------------------------------------------------------------------

static void test_kv_bytes_per_token(void **state) {
    (void)state;
    ModelShape m = llama2_13b();
    m.n_kv_heads = 8; // GQA: Llama-2 70B-style grouping
    assert_near(budget_kv_bytes_per_token(&m, NUM_BF16), 2.0 * 40 * 8 * 128 * 2, 0.0);
    m.n_kv_heads = 1; // MQA
    assert_near(budget_kv_bytes_per_token(&m, NUM_BF16), 2.0 * 40 * 1 * 128 * 2, 0.0);
    assert_near(budget_kv_bytes_per_token(&m, NUM_FP32), 2.0 * 40 * 1 * 128 * 4, 0.0);
    // MLA (DeepSeek-V2-Lite): 27 layers x (512 latent + 64 RoPE key) x 2 B, whatever the heads.
    ModelShape d = {.name = "mla", .n_params = 15.7e9, .n_params_active = 2.4e9, .n_layers = 27, .dim = 2048,
                    .hidden_dim = 1408, .n_heads = 16, .n_kv_heads = 16, .head_dim = 128, .vocab_size = 102400,
                    .max_context = 32768, .kv_lora_rank = 512, .rope_head_dim = 64};
    assert_near(budget_kv_bytes_per_token(&d, NUM_BF16), 31104.0, 0.0);
    // Absorbed decode: 2 x 16 x (2 x 512 + 64) per layer; prefill: 2 x 16 x 192 + 2 x 16 x 128.
    assert_near(budget_attention_flops_per_pair(&d, 1), 27 * 2.0 * 16 * 1088, 0.0);
    assert_near(budget_attention_flops_per_pair(&d, 0), 27 * (2.0 * 16 * 192 + 2.0 * 16 * 128), 0.0);
    // Decode attention intensity of MLA: 940,032 FLOPs per 31,104 bytes, about 30 FLOP/byte.
    assert_near(budget_attention_flops_per_pair(&d, 1) / budget_kv_bytes_per_token(&d, NUM_BF16), 30.222222, 1e-5);
}

static void test_sliding_window(void **state) {
    (void)state;
    ModelShape m = llama2_13b();
    m.window = 4096;
    assert_int_equal(budget_kv_tokens_per_sequence(&m, 100), 100);
    assert_int_equal(budget_kv_tokens_per_sequence(&m, 4096), 4096);
    assert_int_equal(budget_kv_tokens_per_sequence(&m, 10000), 4096);
    // Decode at 10000 tokens reads the same KV as at 4096.
    assert_near(budget_decode_bytes(&m, BF16, 3, 10000), budget_decode_bytes(&m, BF16, 3, 4096), 0.0);
    assert_near(budget_decode_flops(&m, 3, 10000), budget_decode_flops(&m, 3, 4096), 0.0);
    // Prefill pairs with window 2 over 5 tokens: 1 + 2 + 2 + 2 + 2 = 9.
    m.window = 2;
    double per_pair = budget_attention_flops_per_pair(&m, 0);
    assert_near(budget_prefill_flops(&m, 5), 2.0 * budget_matmul_params(&m) * 5 + 9 * per_pair, 0.0);
}

// Gemma 3 270M's hybrid: 18 layers, every sixth global (3), the others a window of 512. At
// 8192 positions a layer keeps (3 x 8192 + 15 x 512) / 18 = 1792 on average; within the window
// every layer keeps the context; decode reads that many KV positions per layer, and a prefill
// of 1000 tokens pairs 3 layers x 1000 x 1001 / 2 with 15 x (512 x 513 / 2 + 488 x 512).
static void test_hybrid_layers(void **state) {
    (void)state;
    ModelShape m = llama2_13b();
    m.n_layers = 18, m.n_heads = 4, m.n_kv_heads = 1, m.head_dim = 256, m.window = 512, m.global_every = 6;
    assert_near(budget_kv_tokens_per_sequence(&m, 8192), 1792, 0.0);
    assert_near(budget_kv_tokens_per_sequence(&m, 300), 300, 0.0);
    double kv_token = budget_kv_bytes_per_token(&m, NUM_BF16); // 18 x 2 x 256 x 2 bytes
    assert_near(kv_token, 18 * 2 * 256 * 2, 0.0);
    assert_near(budget_decode_bytes(&m, BF16, 1, 8192) - budget_decode_bytes(&m, BF16, 1, 1), (1792 - 1) * kv_token,
                1e-6);
    double per_layer_pair = budget_attention_flops_per_pair(&m, 0) / 18;
    double pairs = 3 * 1000.0 * 1001 / 2 + 15 * (512.0 * 513 / 2 + 488.0 * 512);
    assert_near(budget_prefill_flops(&m, 1000), 2.0 * budget_matmul_params(&m) * 1000 + pairs * per_layer_pair,
                1e-9 * pairs * per_layer_pair);
    // From the engine's config: global_every only where there are local layers beside global ones.
    Config c = config_default();
    c.n_layers = 18, c.global_every = 6, c.window = 512;
    assert_int_equal(budget_shape_from_config(&c, "hybrid", "test").global_every, 6);
    c.window = 0;
    assert_int_equal(budget_shape_from_config(&c, "all global", "test").global_every, 0);
}

static void test_quantised_weights(void **state) {
    (void)state;
    ModelShape m = llama2_13b();
    assert_near(budget_weight_bytes(&m, NUM_INT8), 13015864320.0, 0.0);
    assert_near(budget_weight_bytes(&m, NUM_INT4), 6507932160.0, 0.0);
    // int4 weights, bf16 KV: the KV per token does not change, the decode bytes shrink.
    Precision w4 = {NUM_INT4, NUM_BF16};
    assert_near(budget_kv_bytes_per_token(&m, w4.act), 819200.0, 0.0);
    assert_near(budget_decode_bytes(&m, w4, 1, 610), 12852024320.0 * 0.5 + 499712000.0, 0.5);
    HardwareSpec h = h100();
    assert_near(budget_peak_flop_s(&h, w4), 989.4e12, 0.0); // bf16 math
    assert_near(budget_peak_flop_s(&h, (Precision){NUM_FP32, NUM_FP32}), 67e12, 0.0);
}

static void test_weights_that_do_not_fit(void **state) {
    (void)state;
    ModelShape m = llama2_13b();
    HardwareSpec h = {.name = "small", .kind = "gpu", .memory_bytes = 24e9, .bandwidth_bytes_s = 1e12,
                      .bf16_flop_s = 1e14, .fp32_flop_s = 1e13};
    assert_near(budget_kv_tokens_fit(&m, &h, BF16), 0.0, 0.0); // 26 GB of weights in 24 GB
    Budget b = budget_compute(&m, &h, BF16, 610, 64, 1024);
    assert_false(b.fits_large);
    // In int4 (6.5 GB) they fit: (24e9 - 6,507,932,160) / 819,200 = 21,352.6.
    assert_near(budget_kv_tokens_fit(&m, &h, (Precision){NUM_INT4, NUM_BF16}), 21352.0, 0.0);
}

static void test_mixture_of_experts(void **state) {
    (void)state;
    ModelShape m = {.name = "moe", .n_params = 1000e6, .n_params_active = 100e6, .n_layers = 2, .dim = 100,
                    .hidden_dim = 10, .n_heads = 2, .n_kv_heads = 2, .head_dim = 50, .vocab_size = 1000};
    double emb = 1000.0 * 100;
    // Batch 1 reads the active parameters; batch 4 four times as many; batch 64 all of them.
    assert_near(budget_decode_bytes(&m, BF16, 1, 1) - 1 * 400.0 * 2, (100e6 - emb) * 2, 0.0);
    assert_near(budget_decode_bytes(&m, BF16, 4, 1) - 4 * 400.0 * 2, (400e6 - emb) * 2, 0.0);
    assert_near(budget_decode_bytes(&m, BF16, 64, 1) - 64 * 400.0 * 2, (1000e6 - emb) * 2, 0.0);
    // FLOPs follow the active parameters only.
    assert_near(budget_decode_flops(&m, 1, 1), 2.0 * (100e6 - emb - 5 * 100) + 2 * 4.0 * 2 * 50, 0.0);
    // Memory holds all of them.
    assert_near(budget_weight_bytes(&m, NUM_BF16), 2000e6, 0.0);
}

static void test_mlp_and_roofline(void **state) {
    (void)state;
    ModelShape m = llama2_13b();
    HardwareSpec h = h100();
    // One layer's MLP at batch 8: 6 x 8 x 5120 x 13824 FLOPs over 3 x 5120 x 13824 x 2 weight
    // bytes and 2 x 8 x 5120 x 2 activation bytes.
    double flops = 6.0 * 8 * 5120 * 13824, bytes = 3.0 * 5120 * 13824 * 2 + 2.0 * 8 * 5120 * 2;
    assert_near(budget_mlp_flops(&m, 8), flops, 0.0);
    assert_near(budget_mlp_bytes(&m, BF16, 8), bytes, 0.0);
    Roofline r = budget_roofline(&h, BF16, flops, bytes);
    assert_near(r.intensity, flops / bytes, 1e-12);
    assert_near(r.attainable_flop_s, flops / bytes * 3.35e12, 1.0); // below the ridge: bandwidth-bound
    assert_false(r.compute_bound);
    Roofline hi = budget_roofline(&h, BF16, 1e15, 1e9); // intensity 1e6: compute-bound at peak
    assert_true(hi.compute_bound);
    assert_near(hi.attainable_flop_s, 989.4e12, 0.0);
    assert_near(hi.time_s, 1e15 / 989.4e12, 1e-15);
}

// --- agreement with the engine's counts ------------------------------------------------------

static void test_matches_engine_counts(void **state) {
    (void)state;
    uint64_t rng = rng_seed(7);
    for (int trial = 0; trial < 20; trial++) {
        Config c = config_default();
        c.n_kv_heads = 1 + (int)(rng_u64(&rng) % 3);
        c.n_heads = c.n_kv_heads * (1 + (int)(rng_u64(&rng) % 3));
        c.head_dim = 2 * (1 + (int)(rng_u64(&rng) % 8));
        c.dim = 8 + (int)(rng_u64(&rng) % 40);
        c.hidden_dim = 8 + (int)(rng_u64(&rng) % 60);
        c.n_layers = 1 + (int)(rng_u64(&rng) % 4);
        c.vocab_size = 10 + (int)(rng_u64(&rng) % 100);
        c.seq_len = 64;
        c.window = trial % 3 == 0 ? 1 + (int)(rng_u64(&rng) % 16) : 0;
        c.tied_embeddings = trial % 2;
        ModelShape m = budget_shape_from_config(&c, "engine", "test");
        assert_near(m.n_params, (double)model_param_count(&c), 0.0);
        for (int S = 1; S <= 40; S += 13) // a decode step attending to S tokens sits at position S - 1
            assert_near(budget_decode_flops(&m, 1, S), model_forward_flops(&c, 1, S - 1, 1), 0.0);
        for (int T = 1; T <= 40; T += 13)
            assert_near(budget_prefill_flops(&m, T), model_forward_flops(&c, T, 0, T), 0.0);
        // The engine's fp32 cache holds 2 L n_kv hd floats per token.
        assert_near(budget_kv_bytes_per_token(&m, NUM_FP32), 2.0 * c.n_layers * c.n_kv_heads * c.head_dim * 4, 0.0);
    }
}

// --- reference tables -------------------------------------------------------------------------

static void test_template_presets(void **state) {
    (void)state;
    char path[1024];
    Error err;
    ModelShape *models;
    int n;
    template_path(path, sizeof path, "model_presets.csv");
    if (budget_load_models(path, &models, &n, &err)) fail_msg("%s", err.msg);
    static const char *required[] = {"Llama-2-7B", "Llama-2-13B", "Llama-2-70B", "Llama-3-8B",
                                     "Llama-3-70B", "Mistral-7B", "DeepSeek-V2-Lite"};
    for (size_t i = 0; i < sizeof required / sizeof required[0]; i++) find_model(models, n, required[i]);
    // Every dense preset's n_params is exactly the parameter count of its shape.
    for (int i = 0; i < n; i++) {
        const ModelShape *m = &models[i];
        if (m->n_params_active != m->n_params || m->kv_lora_rank > 0) continue;
        Config c = config_default();
        c.dim = m->dim, c.hidden_dim = m->hidden_dim, c.n_layers = m->n_layers, c.n_heads = m->n_heads;
        c.n_kv_heads = m->n_kv_heads, c.head_dim = m->head_dim, c.vocab_size = m->vocab_size;
        c.tied_embeddings = m->tied_embeddings;
        if (model_param_count(&c) != (size_t)m->n_params)
            fail_msg("%s: n_params %.0f but its shape has %zu", m->name, m->n_params, model_param_count(&c));
    }
    const ModelShape *mistral = find_model(models, n, "Mistral-7B");
    assert_int_equal(mistral->window, 4096);
    assert_true(mistral->n_kv_heads < mistral->n_heads);
    const ModelShape *lite = find_model(models, n, "DeepSeek-V2-Lite");
    assert_int_equal(lite->kv_lora_rank, 512);
    assert_int_equal(lite->rope_head_dim, 64);
    assert_true(lite->n_params_active < lite->n_params);

    // The worked example from the tables themselves.
    HardwareSpec *hw;
    int n_hw;
    template_path(path, sizeof path, "hardware.csv");
    if (budget_load_hardware(path, &hw, &n_hw, &err)) fail_msg("%s", err.msg);
    static const char *gpus[] = {"H100 SXM", "H200", "A100 80GB", "RTX 4090", "L4"};
    const HardwareSpec *h = NULL;
    for (size_t g = 0; g < sizeof gpus / sizeof gpus[0]; g++) {
        int found = 0;
        for (int i = 0; i < n_hw; i++)
            if (strcmp(hw[i].name, gpus[g]) == 0) {
                found = 1;
                assert_true(hw[i].bf16_flop_s > hw[i].fp32_flop_s); // dense tensor bf16 beats fp32 on all five
                assert_true(strlen(hw[i].source) > 20);
                if (g == 0) h = &hw[i];
            }
        if (!found) fail_msg("templates/hardware.csv has no '%s'", gpus[g]);
    }
    Budget b = budget_compute(find_model(models, n, "Llama-2-13B"), h, BF16, 610, 64, 1024);
    assert_near(b.weight_bytes / 1e9, 26.0, 0.05);
    assert_near(b.kv_bytes_large / 1e9, 32.0, 0.05);
    assert_false(b.decode_1.compute_bound);
    free(models);
    free(hw);
}

// --- malformed tables --------------------------------------------------------------------------

static const char *MODEL_HEADER = "name,n_params,n_params_active,n_layers,dim,hidden_dim,n_heads,n_kv_heads,"
                                  "head_dim,vocab_size,max_context,window,kv_lora_rank,rope_head_dim,"
                                  "tied_embeddings,source\n";
static const char *GOOD_MODEL = "tiny,13000,13000,2,16,32,4,2,4,100,64,0,0,0,0,hand\n";
static const char *HW_HEADER = "name,kind,memory_bytes,bandwidth_bytes_s,bf16_flop_s,fp32_flop_s,source\n";

static void write_file(const char *path, const char *text) {
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
}

// Loading text must fail, and the message must name path:line and contain `what`.
static void expect_models_error(const char *text, int line, const char *what) {
    char path[64], where[96];
    snprintf(path, sizeof path, "/tmp/test_budget_%d.csv", (int)getpid());
    write_file(path, text);
    ModelShape *m = NULL;
    int n = 0;
    Error err = {{0}};
    int rc = budget_load_models(path, &m, &n, &err);
    unlink(path);
    if (rc == 0) fail_msg("accepted a bad table (want '%s'):\n%s", what, text);
    snprintf(where, sizeof where, "%s:%d:", path, line);
    if (!strstr(err.msg, where) || !strstr(err.msg, what))
        fail_msg("message '%s' lacks '%s' or '%s'", err.msg, where, what);
}

static void test_bad_model_rows(void **state) {
    (void)state;
    char text[2048];
    snprintf(text, sizeof text, "%s%stiny2,13000,13000,2,16,32,4,2,4,100,64,0,0,0\n", MODEL_HEADER, GOOD_MODEL);
    expect_models_error(text, 3, "14 fields, the header has 16");
    snprintf(text, sizeof text, "%s%stiny2,13k,13000,2,16,32,4,2,4,100,64,0,0,0,0,x\n", MODEL_HEADER, GOOD_MODEL);
    expect_models_error(text, 3, "'n_params': '13k' is not a number");
    snprintf(text, sizeof text, "%s\n%stiny2,13000,13000,2,16,32,4,2,4,100,64,-1,0,0,0,x\n", MODEL_HEADER, GOOD_MODEL);
    expect_models_error(text, 4, "'window': -1 is out of range"); // the blank line still counts
    snprintf(text, sizeof text, "%s%stiny2,13000,13000,2,16,32,4,3,4,100,64,0,0,0,0,x\n", MODEL_HEADER, GOOD_MODEL);
    expect_models_error(text, 3, "not a multiple of n_kv_heads");
    snprintf(text, sizeof text, "%s%stiny2,13000,14000,2,16,32,4,2,4,100,64,0,0,0,0,x\n", MODEL_HEADER, GOOD_MODEL);
    expect_models_error(text, 3, "n_params_active exceeds n_params");
    snprintf(text, sizeof text, "%s%s%s", MODEL_HEADER, GOOD_MODEL, GOOD_MODEL);
    expect_models_error(text, 3, "appears twice");
    snprintf(text, sizeof text, "%s%s\"tiny2,13000,13000,2,16,32,4,2,4,100,64,0,0,0,0,x\n", MODEL_HEADER, GOOD_MODEL);
    expect_models_error(text, 3, "malformed quoting");
    snprintf(text, sizeof text, "%s%stiny2,13000,13000,2,16,32,4,2,4,100,64,0,0,64,0,x\n", MODEL_HEADER, GOOD_MODEL);
    expect_models_error(text, 3, "kv_lora_rank is 0");
    snprintf(text, sizeof text, "%s%stiny2,13000,13000,2,16,32,4,2,4,100,64,0,0,0,2,x\n", MODEL_HEADER, GOOD_MODEL);
    expect_models_error(text, 3, "'tied_embeddings': 2 is out of range");
    snprintf(text, sizeof text, "%s%stiny2,100,100,2,16,32,4,2,4,100,64,0,0,0,0,x\n", MODEL_HEADER, GOOD_MODEL);
    expect_models_error(text, 3, "does not exceed the embedding table");
    expect_models_error("name,n_params\ntiny,13000\n", 1, "no column 'n_params_active'");
}

static void test_bad_hardware_rows(void **state) {
    (void)state;
    char path[64], text[1024];
    snprintf(path, sizeof path, "/tmp/test_budget_hw_%d.csv", (int)getpid());
    static const struct {
        const char *row, *what;
    } cases[] = {
        {"X,gpu,80e9,3e12,1e15,6e13\n", "6 fields"},
        {"X,tpu,80e9,3e12,1e15,6e13,s\n", "neither gpu nor cpu"},
        {"X,gpu,80e9,fast,1e15,6e13,s\n", "'bandwidth_bytes_s': 'fast' is not a number"},
        {"X,gpu,0,3e12,1e15,6e13,s\n", "'memory_bytes': 0 is out of range"},
        {"X,gpu,80e9,3e12,nan,6e13,s\n", "'bf16_flop_s': 'nan' is not a number"},
        {"X,gpu,80e9,3e12,1e15,6e13,\n", "'source' is empty"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        snprintf(text, sizeof text, "%sA,cpu,8e9,1e10,1e11,1e11,\"measured, by hand\"\n%s", HW_HEADER, cases[i].row);
        write_file(path, text);
        HardwareSpec *h = NULL;
        int n = 0;
        Error err = {{0}};
        int rc = budget_load_hardware(path, &h, &n, &err);
        char where[96];
        snprintf(where, sizeof where, "%s:3:", path);
        if (rc == 0) fail_msg("accepted bad row %s", cases[i].row);
        if (!strstr(err.msg, where) || !strstr(err.msg, cases[i].what))
            fail_msg("message '%s' lacks '%s' or '%s'", err.msg, where, cases[i].what);
    }
    // The good row alone parses, quoted comma and all.
    snprintf(text, sizeof text, "%sA,cpu,8e9,1e10,1e11,1e11,\"measured, by hand\"\n", HW_HEADER);
    write_file(path, text);
    HardwareSpec *h;
    int n;
    Error err;
    if (budget_load_hardware(path, &h, &n, &err)) fail_msg("%s", err.msg);
    assert_int_equal(n, 1);
    assert_string_equal(h[0].source, "measured, by hand");
    assert_near(h[0].bandwidth_bytes_s, 1e10, 0.0);
    free(h);
    write_file(path, "");
    assert_int_equal(budget_load_hardware(path, &h, &n, &err), -1);
    assert_non_null(strstr(err.msg, "empty file"));
    unlink(path);
    assert_int_equal(budget_load_hardware(path, &h, &n, &err), -1);
    assert_non_null(strstr(err.msg, "cannot open"));
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_worked_example),
        cmocka_unit_test(test_kv_bytes_per_token),
        cmocka_unit_test(test_sliding_window),
        cmocka_unit_test(test_hybrid_layers),
        cmocka_unit_test(test_quantised_weights),
        cmocka_unit_test(test_weights_that_do_not_fit),
        cmocka_unit_test(test_mixture_of_experts),
        cmocka_unit_test(test_mlp_and_roofline),
        cmocka_unit_test(test_matches_engine_counts),
        cmocka_unit_test(test_template_presets),
        cmocka_unit_test(test_bad_model_rows),
        cmocka_unit_test(test_bad_hardware_rows),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
