// test_quantized.c: quantised models (experiments/engine/quant_weights.h) through the engine and GGUF.
//   - an engine on quantised weights (every format) gives the logits of the plain reference
//     forward on the dequantised weights (relative error <= 1e-4, as the fp32 engine test);
//   - engine_open(..., q4_0) quantises the host matrices as quant_weights_build does; a CLA
//     model quantises the matrices its layers have and runs as the reference (1e-4);
//   - a quantised GGUF reloads to identical tensors (types, shapes, bytes), the host weights
//     to their dequantised values, and the engine to bit-identical logits;
//   - matrices whose rows a type cannot hold stay fp32 and are written as F32;
//   - AWQ (awq.h) with alpha = 0 is plain round to nearest (same bytes, same weights); with
//     the grid, every group's output error is at most round-to-nearest's, and the folded fp32
//     model computes the original's logits (relative error <= 1e-4);
//   - outlier-aware int8 (outliers.h) with outlier columns injected: those columns are kept
//     exactly in fp32 (their int8 codes zero), the rest is int8 of the remaining columns (a
//     smaller round-trip error than plain int8), the bytes count the fp32 columns, the engine
//     gives the reference's logits on the dequantised weights (1e-4), and a GGUF file reloads
//     to the same columns and bit-identical logits; calibration finds every matrix's channels;
//   - the engine tests above run the float decode dot (quant_int_dot_enable(0)): the integer
//     dot rounds the activations (bounded per kernel in test_quant), which is not what the
//     reference forward on the dequantised weights computes;
//   - bin/quantize (when make test gives $INFERLAB_BIN and the quick target exists) writes a
//     q4_0 file that loads with its tokenizer, and a bad type or input ends in an error
//     (exit 2 / 1) that writes nothing;
//   - the `gguf` reference reader (PyPI, from llama.cpp's gguf-py) reads our Q8_0 and Q4_0
//     files and reports the same tensor types and shapes (skipped, saying so, when python3
//     has no gguf module: `make deps` installs it).
// Run: make build/tests/test_quantized && build/tests/test_quantized
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "awq.h"
#include "gguf.h"
#include "model_reference.h"
#include "outliers.h"
#include "quant.h"
#include "quant_weights.h"

static const DType TYPES[] = {DTYPE_Q8_0, DTYPE_Q4_0, DTYPE_I8, DTYPE_I4_G32, DTYPE_I4_G64, DTYPE_I4_G128};
#define N_TYPES (int)(sizeof TYPES / sizeof TYPES[0])

// C 64, H 176 (not a multiple of 32: w2 falls back to fp32 in q8_0 / q4_0, and ends in a
// short group in int4-g64 / g128), GQA 4 / 2 heads of 16, V 70, untied unless tied is set.
static Config quant_config(int tied) {
    Config c = small_config(4, 2, 0, 0);
    c.dim = 64;
    c.hidden_dim = 176;
    c.head_dim = 16;
    c.vocab_size = 70;
    c.tied_embeddings = tied;
    return c;
}

// A random model quantised to t as if loaded from a quantised file: m->quant set, host weights
// dequantised.
static void quantized_model(Model *m, int tied, DType t) {
    Config c = quant_config(tied);
    random_model(m, &c, 31, 0.15f);
    m->quant = mallocCheck(sizeof *m->quant);
    quant_weights_build(m->quant, m, t);
    quant_weights_dequantize_into(m->quant, m);
}

static void sequence_tokens(int tokens[N_SEQ][MAX_LEN], int V) {
    uint64_t rng = rng_seed(32);
    for (int b = 0; b < N_SEQ; b++)
        for (int i = 0; i < MAX_LEN; i++) tokens[b][i] = (int)(rng_u64(&rng) % V);
}

static void test_engine_matches_reference_on_dequantized_weights(void **state) {
    (void)state;
    int was = quant_int_dot_enable(0);
    for (int k = 0; k < N_TYPES; k++)
        for (int tied = 0; tied <= 1; tied++) {
            Model m;
            quantized_model(&m, tied, TYPES[k]);
            int tokens[N_SEQ][MAX_LEN], V = m.config.vocab_size;
            float *got[N_SEQ], *ref = mallocCheck((size_t)MAX_LEN * V * sizeof(float));
            sequence_tokens(tokens, V);
            for (int b = 0; b < N_SEQ; b++) got[b] = mallocCheck((size_t)MAX_LEN * V * sizeof(float));
            run_sequences(&m, ops_cpu(), DTYPE_F32, tokens, got); // runs m.quant's tensors
            for (int b = 0; b < N_SEQ; b++) {
                int n = PROMPT_LENS[b] + STEPS;
                ref_forward(&m, tokens[b], n, ref, NULL, DTYPE_F32);
                double e = max_rel_error(got[b], ref, (size_t)n * V);
                if (!(e <= 1e-4)) fail_msg("%s tied=%d: relative logit error %g", dtype_name(TYPES[k]), tied, e);
                free(got[b]);
            }
            free(ref);
            model_free(&m);
        }
    quant_int_dot_enable(was);
}

// A CLA model (3 layers, pairs sharing keys and values: only layers 0 and 2 have wk / wv)
// quantises every matrix the architecture's table lists for it, and runs as the reference.
static void test_cla_model_quantizes(void **state) {
    (void)state;
    int was = quant_int_dot_enable(0);
    const DType types[] = {DTYPE_Q8_0, DTYPE_I4_G64};
    for (int k = 0; k < 2; k++) {
        Config c = quant_config(1);
        c.n_layers = 3;
        c.kv_share = 2;
        Model m;
        random_model(&m, &c, 33, 0.15f);
        m.quant = mallocCheck(sizeof *m.quant);
        quant_weights_build(m.quant, &m, types[k]);
        quant_weights_dequantize_into(m.quant, &m);
        assert_int_equal(m.quant->n, 1 + 3 * 5 + 2 * 2); // embedding, per layer wq wo w1 w2 w3, wk wv twice
        int tokens[N_SEQ][MAX_LEN], V = c.vocab_size;
        float *got[N_SEQ], *ref = mallocCheck((size_t)MAX_LEN * V * sizeof(float));
        sequence_tokens(tokens, V);
        for (int b = 0; b < N_SEQ; b++) got[b] = mallocCheck((size_t)MAX_LEN * V * sizeof(float));
        run_sequences(&m, ops_cpu(), DTYPE_F32, tokens, got);
        for (int b = 0; b < N_SEQ; b++) {
            int n = PROMPT_LENS[b] + STEPS;
            ref_forward(&m, tokens[b], n, ref, NULL, DTYPE_F32);
            double e = max_rel_error(got[b], ref, (size_t)n * V);
            if (!(e <= 1e-4)) fail_msg("CLA %s: relative logit error %g", dtype_name(types[k]), e);
            free(got[b]);
        }
        free(ref);
        model_free(&m);
    }
    quant_int_dot_enable(was);
}

static void test_engine_open_quantizes(void **state) {
    (void)state;
    Config c = quant_config(1);
    Model m;
    random_model(&m, &c, 33, 0.15f);
    QuantWeights q;
    quant_weights_build(&q, &m, DTYPE_Q4_0);
    Engine e;
    engine_open(&e, &m, ops_cpu(), DTYPE_Q4_0, 4, 16);
    assert_int_equal(e.dtype, DTYPE_Q4_0);
    assert_int_equal(e.layers[1].wq.dtype, DTYPE_Q4_0);
    assert_int_equal(e.layers[1].w2.dtype, DTYPE_F32); // rows of 176: not whole q4_0 blocks
    assert_int_equal(e.wcls.dtype, DTYPE_Q4_0);       // tied: the quantised embedding table
    assert_ptr_equal(e.wcls.data, e.token_embedding.data);
    size_t rb = dtype_row_bytes(DTYPE_Q4_0, c.dim);
    assert_memory_equal(e.layers[1].wq.data, quant_weights_find(&q, m.weights.wq + (size_t)c.n_heads * c.head_dim * c.dim)->data,
                        (size_t)c.n_heads * c.head_dim * rb);
    assert_int_equal(engine_weight_bytes(&e), q.bytes + (2 * c.n_layers + 1) * c.dim * sizeof(float));
    engine_close(&e);
    quant_weights_free(&q);
    model_free(&m);
}

static void temp_path(char *path, size_t n, const char *tag) {
    snprintf(path, n, "/tmp/inferlab_test_quantized_%d_%s.gguf", (int)getpid(), tag);
}

static void test_gguf_reload_is_identical(void **state) {
    (void)state;
    int was = quant_int_dot_enable(0);
    for (int k = 0; k < N_TYPES; k++) {
        Model m, back;
        quantized_model(&m, 0, TYPES[k]);
        char path[128];
        temp_path(path, sizeof path, dtype_name(TYPES[k]));
        model_save_gguf(path, &m, NULL, GGML_TYPE_F32);
        Error err;
        if (model_load_gguf(path, &back, NULL, &err)) fail_msg("%s", err.msg);
        assert_non_null(back.quant);
        assert_int_equal(back.quant->dtype, TYPES[k]);
        assert_int_equal(back.quant->n, m.quant->n);
        assert_int_equal(back.quant->bytes, m.quant->bytes);
        for (int i = 0; i < m.quant->n; i++) {
            const Tensor *a = &m.quant->tensors[i], *b = &back.quant->tensors[i];
            assert_int_equal(a->dtype, b->dtype);
            assert_int_equal(a->rows, b->rows);
            assert_int_equal(a->cols, b->cols);
            assert_memory_equal(a->data, b->data, (size_t)a->rows * dtype_row_bytes(a->dtype, a->cols));
        }
        assert_memory_equal(m.params, back.params, m.n_params * sizeof(float)); // dequantised host weights
        // and the engine computes the same logits, bit for bit
        int tokens[N_SEQ][MAX_LEN], V = m.config.vocab_size;
        float *a[N_SEQ], *b[N_SEQ];
        sequence_tokens(tokens, V);
        for (int s = 0; s < N_SEQ; s++) {
            a[s] = mallocCheck((size_t)MAX_LEN * V * sizeof(float));
            b[s] = mallocCheck((size_t)MAX_LEN * V * sizeof(float));
        }
        run_sequences(&m, ops_cpu(), DTYPE_F32, tokens, a);
        run_sequences(&back, ops_cpu(), DTYPE_F32, tokens, b);
        for (int s = 0; s < N_SEQ; s++) {
            assert_memory_equal(a[s], b[s], (size_t)(PROMPT_LENS[s] + STEPS) * V * sizeof(float));
            free(a[s]), free(b[s]);
        }
        GGUFFile g;
        if (gguf_open(&g, path, &err)) fail_msg("%s", err.msg);
        const GGUFTensor *w2 = gguf_find_tensor(&g, "blk.0.ffn_down.weight");
        int holds = dtype_holds_row(TYPES[k], m.config.hidden_dim);
        assert_int_equal(w2->type, holds ? dtype_ggml_type(TYPES[k]) : (int)GGML_TYPE_F32);
        gguf_close(&g);
        unlink(path);
        model_free(&m);
        model_free(&back);
    }
    quant_int_dot_enable(was);
}

// Largest |x| per input channel for every matrix of m: 1, except channels 3 and 40 of every
// matrix (and 100 of the wider ones), 10; their weight columns are made 30x larger, as
// LLM.int8()'s outlier features are.
static float **injected_outliers(Model *m, float threshold, int *n_out) {
    int n;
    ModelTensor *t = model_matrix_list(m, &n);
    float **col_max = mallocCheck(n * sizeof(float *));
    const int picks[] = {3, 40, 100};
    for (int i = 0; i < n; i++) {
        int rows = (int)t[i].rows, cols = (int)t[i].cols;
        col_max[i] = mallocCheck((size_t)cols * sizeof(float));
        for (int j = 0; j < cols; j++) col_max[i][j] = 1.0f;
        for (int p = 0; p < 3; p++)
            if (picks[p] < cols) {
                col_max[i][picks[p]] = 2.0f * threshold;
                for (int r = 0; r < rows; r++) t[i].data[(size_t)r * cols + picks[p]] *= 30.0f;
            }
    }
    free(t);
    *n_out = n;
    return col_max;
}

static void test_outlier_int8(void **state) {
    (void)state;
    int was = quant_int_dot_enable(0);
    for (int tied = 0; tied <= 1; tied++) {
        Config c = quant_config(tied);
        Model m, back;
        random_model(&m, &c, 35, 0.15f);
        int n;
        float **col_max = injected_outliers(&m, 6.0f, &n);
        m.quant = mallocCheck(sizeof *m.quant);
        quant_weights_build_outliers(m.quant, &m, (const float *const *)col_max, 6.0f);
        QuantWeights plain;
        quant_weights_build(&plain, &m, DTYPE_I8);
        size_t fp32_bytes = 0;
        for (int i = 0; i < n; i++) {
            const Tensor *x = &m.quant->tensors[i];
            const TensorOutliers *o = x->outliers;
            assert_int_equal(x->dtype, DTYPE_I8);
            assert_non_null(o);
            assert_int_equal(o->n, x->cols > 100 ? 3 : 2);
            size_t rb = dtype_row_bytes(DTYPE_I8, x->cols);
            double err_split = 0.0, err_plain = 0.0;
            float *row = mallocCheck((size_t)x->cols * sizeof(float)), *prow = mallocCheck((size_t)x->cols * sizeof(float));
            for (int r = 0; r < x->rows; r++) {
                const float *w = m.quant->host[i] + (size_t)r * x->cols;
                for (int k = 0; k < o->n; k++) {
                    assert_true(o->w[(size_t)r * o->n + k] == w[o->cols[k]]);                   // exact fp32
                    assert_int_equal(((const int8_t *)x->data)[r * rb + 4 + o->cols[k]], 0); // no int8 code
                }
                dequantize_row(DTYPE_I8, row, (const uint8_t *)x->data + r * rb, x->cols);
                for (int k = 0; k < o->n; k++) row[o->cols[k]] = o->w[(size_t)r * o->n + k];
                dequantize_row(DTYPE_I8, prow, (const uint8_t *)plain.tensors[i].data + r * rb, x->cols);
                for (int j = 0; j < x->cols; j++) {
                    err_split += ((double)row[j] - w[j]) * (row[j] - w[j]);
                    err_plain += ((double)prow[j] - w[j]) * (prow[j] - w[j]);
                }
            }
            assert_true(err_split < err_plain);
            fp32_bytes += (size_t)o->n * sizeof(int) + (size_t)x->rows * o->n * sizeof(float);
            free(row), free(prow);
        }
        assert_int_equal(m.quant->bytes, plain.bytes + fp32_bytes);
        quant_weights_free(&plain);
        quant_weights_dequantize_into(m.quant, &m);

        int tokens[N_SEQ][MAX_LEN], V = c.vocab_size;
        float *a[N_SEQ], *b[N_SEQ], *ref = mallocCheck((size_t)MAX_LEN * V * sizeof(float));
        sequence_tokens(tokens, V);
        for (int s = 0; s < N_SEQ; s++) {
            a[s] = mallocCheck((size_t)MAX_LEN * V * sizeof(float));
            b[s] = mallocCheck((size_t)MAX_LEN * V * sizeof(float));
        }
        run_sequences(&m, ops_cpu(), DTYPE_F32, tokens, a);
        for (int s = 0; s < N_SEQ; s++) {
            int len = PROMPT_LENS[s] + STEPS;
            ref_forward(&m, tokens[s], len, ref, NULL, DTYPE_F32);
            double e = max_rel_error(a[s], ref, (size_t)len * V);
            if (!(e <= 1e-4)) fail_msg("outlier int8 tied=%d: relative logit error %g", tied, e);
        }
        char path[128];
        temp_path(path, sizeof path, tied ? "outliers-tied" : "outliers");
        model_save_gguf(path, &m, NULL, GGML_TYPE_F32);
        Error err;
        if (model_load_gguf(path, &back, NULL, &err)) fail_msg("%s", err.msg);
        assert_int_equal(back.quant->bytes, m.quant->bytes);
        for (int i = 0; i < n; i++) {
            const TensorOutliers *o = m.quant->tensors[i].outliers, *ob = back.quant->tensors[i].outliers;
            assert_non_null(ob);
            assert_int_equal(ob->n, o->n);
            assert_memory_equal(ob->cols, o->cols, o->n * sizeof(int));
            assert_memory_equal(ob->w, o->w, (size_t)m.quant->tensors[i].rows * o->n * sizeof(float));
        }
        assert_memory_equal(m.params, back.params, m.n_params * sizeof(float));
        run_sequences(&back, ops_cpu(), DTYPE_F32, tokens, b);
        for (int s = 0; s < N_SEQ; s++) {
            assert_memory_equal(a[s], b[s], (size_t)(PROMPT_LENS[s] + STEPS) * V * sizeof(float));
            free(a[s]), free(b[s]);
        }
        unlink(path);
        free(ref);
        for (int i = 0; i < n; i++) free(col_max[i]);
        free(col_max);
        model_free(&m);
        model_free(&back);
    }
    quant_int_dot_enable(was);
}

// Calibration: every matrix's channels, each the largest |x| its input reached (> 0 for a
// random model); the quantiles bracket the column fractions.
static void test_outlier_calibration(void **state) {
    (void)state;
    Config c = quant_config(1);
    Model m;
    random_model(&m, &c, 36, 0.15f);
    int B = 2, T = 12, tokens[24];
    for (int i = 0; i < B * T; i++) tokens[i] = (i * 7 + 3) % c.vocab_size;
    Calibration cal;
    calibration_run(&cal, &m, tokens, B, T);
    OutlierCalibration oc;
    outlier_calibrate(&oc, &m, &cal);
    calibration_free(&cal);
    assert_int_equal(oc.n, 1 + 7 * c.n_layers);
    for (int i = 0; i < oc.n; i++) {
        assert_non_null(oc.col_max[i]);
        for (int j = 0; j < oc.cols[i]; j++) assert_true(oc.col_max[i][j] > 0.0f);
    }
    float top = outlier_channel_quantile(&oc, 1.0), p90 = outlier_channel_quantile(&oc, 0.9);
    assert_true(outlier_column_fraction(&oc, top) == 0.0);
    double f = outlier_column_fraction(&oc, p90);
    assert_true(f > 0.0 && f <= 0.1 + 1e-9);
    assert_true(outlier_weight_fraction(&oc, 0.0f) == 1.0);
    outlier_calibration_free(&oc);
    model_free(&m);
}

// The reference reader's view of a file: one line per tensor, "name TYPE dim0,dim1".
static int python_gguf_listing(const char *path, char *out, size_t n) {
    char cmd[512];
    snprintf(cmd, sizeof cmd,
             "python3 -c 'import sys, gguf\n"
             "r = gguf.GGUFReader(sys.argv[1])\n"
             "for t in r.tensors: print(t.name, t.tensor_type.name, \",\".join(str(int(d)) for d in t.shape))' %s",
             path);
    FILE *p = popen(cmd, "r");
    if (!p) return -1;
    size_t len = fread(out, 1, n - 1, p);
    out[len] = '\0';
    return pclose(p) == 0 ? 0 : -1;
}

static void test_reference_reader_reads_q8_0_and_q4_0(void **state) {
    (void)state;
    if (system("python3 -c 'import gguf' 2>/dev/null") != 0) {
        print_message("SKIPPED: python3 has no gguf module (`make deps` installs it: pip install gguf)\n");
        skip();
    }
    DType types[2] = {DTYPE_Q8_0, DTYPE_Q4_0};
    for (int k = 0; k < 2; k++) {
        Model m;
        quantized_model(&m, 0, types[k]);
        char path[128];
        temp_path(path, sizeof path, dtype_name(types[k]));
        model_save_gguf(path, &m, NULL, GGML_TYPE_F32);
        // what we wrote, as the reader names it
        GGUFFile g;
        Error err;
        if (gguf_open(&g, path, &err)) fail_msg("%s", err.msg);
        char want[8192] = "", got[8192];
        size_t len = 0;
        for (size_t i = 0; i < g.n_tensors; i++) {
            const GGUFTensor *t = &g.tensors[i];
            const char *type = t->type == GGML_TYPE_F32 ? "F32" : (int)t->type == dtype_ggml_type(DTYPE_Q8_0) ? "Q8_0" : "Q4_0";
            len += snprintf(want + len, sizeof want - len, "%s %s %llu", t->name, type, (unsigned long long)t->dims[0]);
            for (int d = 1; d < t->n_dims; d++) len += snprintf(want + len, sizeof want - len, ",%llu", (unsigned long long)t->dims[d]);
            len += snprintf(want + len, sizeof want - len, "\n");
            assert_true(t->type == GGML_TYPE_F32 || (int)t->type == dtype_ggml_type(types[k]));
        }
        gguf_close(&g);
        if (python_gguf_listing(path, got, sizeof got)) fail_msg("python3 gguf could not read %s", path);
        assert_string_equal(got, want);
        assert_non_null(strstr(got, types[k] == DTYPE_Q8_0 ? "blk.1.attn_q.weight Q8_0 64,64" : "blk.1.attn_q.weight Q4_0 64,64"));
        unlink(path);
        model_free(&m);
    }
}

// Calibration sequences: random tokens (the fold's exactness does not depend on the text).
static int *calibration(const Config *c, int B, int T) {
    int *tokens = mallocCheck((size_t)B * T * sizeof(int));
    random_tokens(tokens, B * T, c->vocab_size, 41);
    return tokens;
}

static void test_awq_alpha_zero_is_rtn(void **state) {
    (void)state;
    DType types[3] = {DTYPE_I4_G32, DTYPE_I4_G64, DTYPE_I4_G128};
    for (int k = 0; k < 3; k++) {
        Config c = quant_config(1);
        Model m, awq;
        random_model(&m, &c, 42, 0.15f);
        random_model(&awq, &c, 42, 0.15f);
        QuantWeights rtn;
        quant_weights_build(&rtn, &m, types[k]);
        int *tokens = calibration(&c, 2, 16);
        Calibration cal;
        calibration_run(&cal, &awq, tokens, 2, 16);
        AwqResult res;
        awq_quantize(&awq, types[k], &cal, 0.0, &res);
        calibration_free(&cal);
        assert_memory_equal(awq.params, m.params, m.n_params * sizeof(float)); // nothing scaled
        assert_int_equal(awq.quant->bytes, rtn.bytes);
        for (int i = 0; i < rtn.n; i++)
            assert_memory_equal(awq.quant->tensors[i].data, rtn.tensors[i].data,
                                (size_t)rtn.tensors[i].rows * dtype_row_bytes(rtn.tensors[i].dtype, rtn.tensors[i].cols));
        free(tokens);
        quant_weights_free(&rtn);
        model_free(&m);
        model_free(&awq);
    }
}

// The two architectures AWQ folds into: the zoo's Llama and a Gemma 3 (QK-norm and post-norms
// after the scaled matrices, GeGLU, local and global layers), each calibrated on the engine.
static void test_awq_folds_exactly_and_lowers_error(void **state) {
    (void)state;
    Config configs[2] = {quant_config(1), small_gemma3_config(4, 2, 8, 3, 3, 1e6f)};
    for (int k = 0; k < 2; k++) {
        Config c = configs[k];
        Model m, awq;
        random_model(&m, &c, 43, 0.15f);
        random_model(&awq, &c, 43, 0.15f);
        int B = 4, T = 24, *tokens = calibration(&c, B, T);
        Calibration cal;
        calibration_run(&cal, &awq, tokens, B, T);
        AwqResult res;
        awq_quantize(&awq, DTYPE_I4_G32, &cal, 1.0, &res);
        calibration_free(&cal);
        int moved = 0;
        for (int l = 0; l < c.n_layers; l++)
            for (int g = 0; g < AWQ_GROUPS; g++) {
                if (!(res.error[l][g] <= res.error_rtn[l][g]))
                    fail_msg("config %d layer %d group %d: AWQ error %g > RTN %g", k, l, g, res.error[l][g],
                             res.error_rtn[l][g]);
                moved += res.alpha[l][g] > 0;
            }
        assert_true(moved > 0); // some group found a better alpha than 0
        // the scaled fp32 weights (awq.params; awq.quant aside) compute the original function
        int n = T, *seq = tokens;
        float *want = mallocCheck((size_t)n * c.vocab_size * sizeof(float));
        float *got = mallocCheck((size_t)n * c.vocab_size * sizeof(float));
        ref_forward(&m, seq, n, want, NULL, DTYPE_F32);
        ref_forward(&awq, seq, n, got, NULL, DTYPE_F32);
        double e = max_rel_error(got, want, (size_t)n * c.vocab_size);
        if (!(e <= 1e-4)) fail_msg("config %d: folded AWQ scales change the fp32 logits: relative error %g", k, e);
        free(want), free(got), free(tokens);
        model_free(&m);
        model_free(&awq);
    }
}

// calibration_run keeps what each matrix multiplies, row b * T + p for sequence b's position p:
// layer 0's attention input is the normed embedding, and the head's input times the (tied)
// embedding gives the reference forward's logits, on a Gemma 3 (embedding scale, local layers).
static void test_calibration_records_matmul_inputs(void **state) {
    (void)state;
    Config c = small_gemma3_config(4, 2, 8, 3, 3, 1e6f);
    Model m;
    random_model(&m, &c, 44, 0.15f);
    int B = 3, T = 20, C = c.dim, V = c.vocab_size, *tokens = calibration(&c, B, T);
    Calibration cal;
    calibration_run(&cal, &m, tokens, B, T);
    assert_int_equal(cal.N, B * T);
    float *x = mallocCheck((size_t)T * C * sizeof(float)), *logits = mallocCheck((size_t)T * V * sizeof(float));
    const float *attn0 = calibration_input(&cal, &c, INPUT_ATTN_NORM, 0);
    const float *head = calibration_input(&cal, &c, INPUT_TIED_HEAD, -1);
    assert_ptr_equal(head, calibration_input(&cal, &c, INPUT_FINAL_NORM, -1));
    for (int b = 0; b < B; b++) {
        const int *seq = tokens + (size_t)b * T;
        for (int p = 0; p < T; p++)
            for (int j = 0; j < C; j++) x[(size_t)p * C + j] = m.weights.token_embedding[(size_t)seq[p] * C + j] * c.embed_scale;
        ref_rmsnorm(x, x, m.weights.rms_att, T, C, c.norm_eps);
        double e = max_rel_error(attn0 + (size_t)b * T * C, x, (size_t)T * C);
        if (!(e <= 1e-5)) fail_msg("sequence %d: layer 0's attention input off by %g", b, e);
        ref_forward(&m, seq, T, logits, NULL, DTYPE_F32);
        for (int p = 0; p < T; p++) {
            double worst = 0.0, scale = 0.0; // the largest error against the row's largest logit
            for (int v = 0; v < V; v++) {
                double dot = 0.0;
                for (int j = 0; j < C; j++)
                    dot += (double)head[((size_t)b * T + p) * C + j] * m.weights.token_embedding[(size_t)v * C + j];
                worst = fmax(worst, fabs(dot - logits[(size_t)p * V + v]));
                scale = fmax(scale, fabs(logits[(size_t)p * V + v]));
            }
            worst /= scale; // the engine and the reference part by fp32 rounding (~1e-4); a wrong row by O(1)
            if (!(worst <= 1e-3)) fail_msg("sequence %d position %d: the head's input gives logits off by %g", b, p, worst);
        }
    }
    free(x), free(logits), free(tokens);
    calibration_free(&cal);
    model_free(&m);
}

static int exit_status(const char *cmd) {
    int status = system(cmd);
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

static void test_quantize_tool(void **state) {
    (void)state;
    const char *bin = getenv("INFERLAB_BIN"), *root = getenv("INFERLAB_ROOT");
    char model[600], out[128], cmd[2048];
    snprintf(model, sizeof model, "%s/out/models/quick/target.gguf", root ? root : ".");
    if (!bin || access(model, R_OK) != 0) {
        print_message("SKIPPED: needs $INFERLAB_BIN and %s (make test, after the quick models)\n", model);
        skip();
    }
    temp_path(out, sizeof out, "tool");
    unlink(out);
    snprintf(cmd, sizeof cmd, "%s/quantize %s %s --type q4_0 2>/dev/null", bin, model, out);
    assert_int_equal(exit_status(cmd), 0);
    Model m;
    Tokenizer tok;
    Error err;
    if (model_load_gguf(out, &m, &tok, &err)) fail_msg("%s", err.msg);
    assert_non_null(m.quant);
    assert_int_equal(m.quant->dtype, DTYPE_Q4_0);
    assert_int_equal(tok.vocab_size, m.config.vocab_size);
    tokenizer_free(&tok);
    model_free(&m);
    unlink(out);
    snprintf(cmd, sizeof cmd, "%s/quantize %s %s --type q3_k 2>/dev/null", bin, model, out);
    assert_int_equal(exit_status(cmd), 2);
    snprintf(cmd, sizeof cmd, "%s/quantize /nonexistent.gguf %s --type q8_0 2>/dev/null", bin, out);
    assert_int_equal(exit_status(cmd), 1);
    assert_int_not_equal(access(out, F_OK), 0);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_engine_matches_reference_on_dequantized_weights),
        cmocka_unit_test(test_cla_model_quantizes),
        cmocka_unit_test(test_engine_open_quantizes),
        cmocka_unit_test(test_gguf_reload_is_identical),
        cmocka_unit_test(test_reference_reader_reads_q8_0_and_q4_0),
        cmocka_unit_test(test_outlier_int8),
        cmocka_unit_test(test_outlier_calibration),
        cmocka_unit_test(test_awq_alpha_zero_is_rtn),
        cmocka_unit_test(test_awq_folds_exactly_and_lowers_error),
        cmocka_unit_test(test_calibration_records_matmul_inputs),
        cmocka_unit_test(test_quantize_tool),
    };
    return cmocka_run_group_tests_name("quantized", tests, NULL, NULL);
}
