// sampling/main.c: bin/sampling, project 9: how temperature, top-k, top-p, min-p, repetition
// penalty and llama.cpp's samplers (typical, top-n-sigma, XTC, DRY, dynamic temperature,
// mirostat, frequency penalty) shape the next-token distribution, what they do to generated
// text, and what the order of the chain (llama.cpp's or vLLM's) changes.
//
//   bin/sampling --model out/models/target.gguf [--corpus FILE] [--seed S] [--out DIR] [--quick]
//                [--real-model out/models/real/smollm2-135m-instruct-q4_1.gguf]
//
// The corpus must be the model's training text (default $CORPUS, else the KJV, as bin/train):
// its validation split gives the held-out text and prompts, its training split the vocabulary
// that drift is measured against.
//
// Two kinds of measurement:
//   held-out positions  windows of the validation text, each one prefill that returns every
//                       position's logits; at each position and setting, sampler_distribution
//                       (with the window so far as history, which DRY reads) gives the filtered
//                       distribution: its entropy, its candidate count, the T = 1 probability
//                       mass it keeps, and the NLL of the true next token
//   continuations       fixed prompts (the first words of validation lines) continued under
//                       each setting, all prompts in one decode batch, prompt b with seed
//                       seed + b; their words give distinct-1/2, the repeated 4-gram rate and
//                       drift (words never seen in the training text), and the model scores
//                       what it generated (NLL at T = 1). BOS and EOS are masked, so every
//                       continuation is gen_len tokens of text.
// The classic settings run in the vLLM chain (temperature first, the lab's default), llama.cpp's
// samplers in llama.cpp's (temperature last). Metric definitions: sampling_metrics.h (beside
// this file). Writes under --out:
//   sampling_temperature.csv    temperature -> entropy (mean, p10, p90; ln V for reference),
//                               held-out NLL; text metrics
//   sampling_filters.csv        filter (top_k | top_p | min_p), value -> candidate-set size
//                               (mean, p10, median, p90), T = 1 mass kept, entropy
//   sampling_penalty.csv        decoding (greedy | T = t), temperature, repetition_penalty -> text metrics
//   sampling_samplers.csv       sampler (typ_p | top_n_sigma | xtc threshold with the coin always
//                               falling | dynatemp range | dry multiplier), value -> held-out
//                               columns as sampling_filters.csv, at T = 1
//   sampling_samplers_text.csv  sampler (the same, mirostat 2's tau, the frequency penalty),
//                               value, temperature (0.3 | 1.5) -> text metrics (XTC on half the steps)
//   sampling_chains.csv         chain (llama.cpp | vllm) at top-k 40, top-p 0.95, min-p 0.05,
//                               temperature -> held-out columns and text metrics
//   sampling_samples.csv        model (target | the --real-model file), setting -> its chain,
//                               seed, tokens, prompt and continuation
//   sampling_real_temperature.csv, sampling_real_filters.csv  with --real-model: the temperature
//                               and filter tables' columns on the published model (the dashboard;
//                               fewer windows and prompts, see write_real_dashboard)
// Nothing is timed: every column is reproducible from the seed (at a fixed thread count, since
// the forward pass's float sums depend on how the work is split).
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"
#include "chat.h"
#include "checkpoint.h"
#include "corpus.h"
#include "dry_breakers.h"
#include "lab.h"
#include "session.h"
#include "sampler.h"
#include "sampling_metrics.h"

typedef struct {
    int n_windows, window;  // held-out positions: n_windows windows of up to `window` tokens
    int n_prompts, gen_len; // continuations per setting, tokens each
    int sample_len;         // tokens per continuation in the samples table
    int real_sample_len;    // the same for --real-model (quick: a few tokens test the path)
    int real_windows, real_window, real_prompts, real_gen_len; // --real-model's dashboard
} Sizes;

static const Sizes QUICK = {
    .n_windows = 2, .window = 64, .n_prompts = 2, .gen_len = 24, .sample_len = 24, .real_sample_len = 4,
    .real_windows = 1, .real_window = 16, .real_prompts = 2, .real_gen_len = 4};
static const Sizes FULL = {
    .n_windows = 8, .window = 256, .n_prompts = 8, .gen_len = 96, .sample_len = 48, .real_sample_len = 48,
    .real_windows = 4, .real_window = 128, .real_prompts = 8, .real_gen_len = 64};

// The sweeps, in the order their rows are written.
static const double TEMPERATURES[] = {0,   0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0,
                                      1.1, 1.2, 1.3, 1.4, 1.5, 1.6, 1.7, 1.8, 1.9, 2.0};
static const int TOP_K_STEPS[] = {1, 2, 5}; // top-k: 1, 2, 5, 10, 20, 50, ... below V, then V
static const double TOP_P[] = {0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 0.95, 0.99, 1.0};
static const double MIN_P[] = {0, 0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5};
static const double PENALTY_TEMPERATURES[] = {0, 0.3}; // greedy, and a low temperature
static const double PENALTIES[] = {1.0, 1.1, 1.2, 1.3, 1.4, 1.5, 1.6, 1.7, 1.8, 1.9, 2.0};

// llama.cpp's samplers, each over its main parameter (sampler_setting says what the value
// sets). Held-out distributions at T = 1; continuations at a low and a high temperature,
// where the two failures of the temperature sweep show (loops, and drift).
typedef struct {
    const char *sampler;
    double values[8];
    int n;
    int heldout; // its held-out distribution is measured too (mirostat's moves with each draw; the
                 // penalties' only with the generated text)
} SamplerSweep;
static const SamplerSweep SAMPLER_SWEEPS[] = {
    {"typ_p", {0.1, 0.2, 0.3, 0.5, 0.7, 0.9, 0.95, 1.0}, 8, 1},
    {"top_n_sigma", {0.25, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0}, 7, 1},
    {"xtc", {0.02, 0.05, 0.1, 0.2, 0.3, 0.5}, 6, 1},
    {"dynatemp", {0.0, 0.25, 0.5, 0.75, 1.0}, 5, 1},
    {"dry", {0.0, 0.25, 0.5, 0.8, 1.5, 3.0}, 6, 1},
    {"mirostat", {1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 8.0}, 7, 0},
    {"frequency", {0.0, 0.1, 0.2, 0.4, 0.8}, 5, 0},
};
static const double SAMPLER_TEXT_TEMPERATURES[] = {0.3, 1.5};
#define XTC_TEXT_PROBABILITY 0.5f // held out, the coin always falls; in text, half the steps

// The two named chains at llama.cpp's CLI defaults (top-k 40, top-p 0.95, min-p 0.05) over T.
static const double CHAIN_TEMPERATURES[] = {0.5, 0.8, 1.0, 1.5, 2.0, 3.0};
#define COUNT(a) ((int)(sizeof(a) / sizeof((a)[0])))

// Prompts and held-out windows start at validation lines of at least this many bytes; a
// prompt is such a line cut at its last space within the first PROMPT_BYTES bytes.
#define PROMPT_MIN_LINE 80
#define PROMPT_BYTES 40
#define BYTES_PER_TOKEN_BOUND 16 // text encoded per held-out window: window * this many bytes

typedef struct {
    Model model;
    Tokenizer tok;
    Corpus corpus;
    WordIndex words;   // training words first: ids >= n_train_words were never seen in training
    int n_train_words;
    uint64_t seed;
} SamplingInputs;

// The start of the first line of at least PROMPT_MIN_LINE bytes at or after offset `from`
// of the validation text, wrapping around to its start; dies when there is none.
static size_t long_line_at(const Corpus *c, size_t from) {
    const char *v = c->val;
    for (int pass = 0; pass < 2; pass++) {
        size_t at = pass == 0 ? from : 0;
        while (at > 0 && at < c->val_len && v[at - 1] != '\n') at++; // to a line start
        while (at < c->val_len) {
            const char *eol = memchr(v + at, '\n', c->val_len - at);
            size_t end = eol ? (size_t)(eol - v) : c->val_len;
            if (end - at >= PROMPT_MIN_LINE) return at;
            at = end + 1;
        }
    }
    die("sampling: the validation text of %s has no line of %d bytes or more to take prompts and "
        "windows from", c->source, PROMPT_MIN_LINE);
}

// --- held-out positions ----------------------------------------------------------------

// One setting of the held-out sweeps, measured at every held-out position.
typedef struct {
    const char *filter; // "temperature", "top_k", "top_p", "min_p", a SAMPLER_SWEEPS sampler, or a chain
    double value;
    Sampler sampler;
    double *entropy;    // (N) per position
    double *candidates; // (N) per position
    double mass_kept;   // sum over positions of the T = 1 mass of the candidates
    double nll;         // sum over positions of -ln p(true next token); temperature > 0 only
} Setting;

static int is_temperature(const Setting *s) { return strcmp(s->filter, "temperature") == 0; }
static int is_filter(const Setting *s) {
    return !strcmp(s->filter, "top_k") || !strcmp(s->filter, "top_p") || !strcmp(s->filter, "min_p");
}
static int is_chain(const Setting *s) { return !strcmp(s->filter, "llama.cpp") || !strcmp(s->filter, "vllm"); }

// The sampler of one setting: `filter` at `value` (T = 1 and the vLLM chain unless the filter
// sets them; llama.cpp's samplers in llama.cpp's chain; a chain name: that chain at llama.cpp's
// CLI defaults, T = value); `held_out` chooses XTC's coin (always, or half the steps). DRY's
// breakers are llama.cpp's default texts made tokens by tok (the caller frees them with
// setting_params_free).
static SamplerParams sampler_setting(const Tokenizer *tok, const char *filter, double value, int held_out) {
    SamplerParams p = sampler_params_default();
    float v = (float)value;
    if (strcmp(filter, "temperature") && strcmp(filter, "top_k") && strcmp(filter, "top_p") && strcmp(filter, "min_p"))
        p.chain = SAMPLER_CHAIN_LLAMA;
    if (!strcmp(filter, "temperature")) p.temperature = v;
    else if (!strcmp(filter, "top_k")) p.top_k = (int)value;
    else if (!strcmp(filter, "top_p")) p.top_p = v;
    else if (!strcmp(filter, "min_p")) p.min_p = v;
    else if (!strcmp(filter, "typ_p")) p.typical_p = v;
    else if (!strcmp(filter, "top_n_sigma")) p.top_n_sigma = v;
    else if (!strcmp(filter, "xtc")) p.xtc_threshold = v, p.xtc_probability = held_out ? 1.0f : XTC_TEXT_PROBABILITY;
    else if (!strcmp(filter, "dynatemp")) p.dynatemp_range = v;
    else if (!strcmp(filter, "mirostat")) p.mirostat = 2, p.mirostat_tau = v;
    else if (!strcmp(filter, "frequency")) p.frequency_penalty = v;
    else if (!strcmp(filter, "repetition")) p.repetition_penalty = v;
    else if (!strcmp(filter, "dry")) {
        p.dry_multiplier = v, p.dry_penalty_last_n = -1;
        Error err;
        SamplerBreaker *b;
        if (dry_breakers_from_strings(tok, DRY_DEFAULT_BREAKERS, 4, &b, &p.n_dry_breakers, &err))
            die("sampling: %s", err.msg);
        p.dry_breakers = b; // freed by setting_params_free
    } else if (!strcmp(filter, "llama.cpp") || !strcmp(filter, "vllm")) {
        p.chain = strcmp(filter, "vllm") ? SAMPLER_CHAIN_LLAMA : SAMPLER_CHAIN_VLLM;
        p.top_k = 40, p.top_p = 0.95f, p.min_p = 0.05f, p.temperature = v;
    } else {
        die("sampling: no setting named %s", filter);
    }
    return p;
}

static void setting_params_free(SamplerParams *p) { free((void *)p->dry_breakers); }

static void setting_add(Setting *settings, int *n, const Tokenizer *tok, const char *filter, double value,
                        int n_positions) {
    int vocab = tok->vocab_size;
    SamplerParams p = sampler_setting(tok, filter, value, 1);
    Setting *s = &settings[(*n)++];
    *s = (Setting){.filter = filter, .value = value};
    Error err;
    if (sampler_init(&s->sampler, vocab, &p, &err)) die("sampling: %s", err.msg);
    setting_params_free(&p);
    s->entropy = mallocCheck((size_t)n_positions * sizeof(double));
    s->candidates = mallocCheck((size_t)n_positions * sizeof(double));
}

static void setting_free(Setting *s) {
    sampler_free(&s->sampler);
    free(s->entropy);
    free(s->candidates);
}

// Room make_settings needs: the fixed sweeps, top-k's steps per decade below vocab, and vocab.
static int max_settings(int vocab) {
    int decades = 0, samplers = 0;
    for (long d = 1; d < vocab; d *= 10) decades++;
    for (int i = 0; i < COUNT(SAMPLER_SWEEPS); i++) samplers += SAMPLER_SWEEPS[i].n;
    return COUNT(TEMPERATURES) + COUNT(TOP_K_STEPS) * decades + 1 + COUNT(TOP_P) + COUNT(MIN_P) + samplers +
           2 * COUNT(CHAIN_TEMPERATURES);
}

// Every setting of the held-out sweeps, in row order (dashboard: the temperatures and the
// filters only); returns how many.
static int make_settings(Setting *settings, const Tokenizer *tok, int n_positions, int dashboard) {
    int n = 0, vocab = tok->vocab_size;
    for (int i = 0; i < COUNT(TEMPERATURES); i++)
        setting_add(settings, &n, tok, "temperature", TEMPERATURES[i], n_positions);
    for (long decade = 1; decade < vocab; decade *= 10)
        for (int i = 0; i < COUNT(TOP_K_STEPS) && TOP_K_STEPS[i] * decade < vocab; i++)
            setting_add(settings, &n, tok, "top_k", (double)(TOP_K_STEPS[i] * decade), n_positions);
    setting_add(settings, &n, tok, "top_k", vocab, n_positions);
    for (int i = 0; i < COUNT(TOP_P); i++) setting_add(settings, &n, tok, "top_p", TOP_P[i], n_positions);
    for (int i = 0; i < COUNT(MIN_P); i++) setting_add(settings, &n, tok, "min_p", MIN_P[i], n_positions);
    if (dashboard) return n;
    for (int i = 0; i < COUNT(SAMPLER_SWEEPS); i++)
        for (int j = 0; SAMPLER_SWEEPS[i].heldout && j < SAMPLER_SWEEPS[i].n; j++)
            setting_add(settings, &n, tok, SAMPLER_SWEEPS[i].sampler, SAMPLER_SWEEPS[i].values[j], n_positions);
    for (int c = 0; c < 2; c++)
        for (int i = 0; i < COUNT(CHAIN_TEMPERATURES); i++)
            setting_add(settings, &n, tok, c ? "vllm" : "llama.cpp", CHAIN_TEMPERATURES[i], n_positions);
    return n;
}

typedef struct {
    Sampler plain; // T = 1, no filters: the model's own distribution
    float *p1;     // (V) that distribution at the current position
    float *probs;  // (V) a setting's distribution
    float *scaled; // (V) logits / T
} Scratch;

// Measure every setting at held-out position `pos`, whose logits (V) predict `target` after
// the window's tokens history (n_history; what DRY and the penalties look back at).
static void measure_position(Setting *settings, int n_settings, const float *logits, int V, int target,
                             const int *history, int n_history, int pos, Scratch *w) {
    Error err;
    if (sampler_distribution(&w->plain, logits, NULL, 0, w->p1, &err) < 0)
        die("sampling: held-out position %d: %s", pos, err.msg);
    for (int i = 0; i < n_settings; i++) {
        Setting *s = &settings[i];
        int n = sampler_distribution(&s->sampler, logits, history, n_history, w->probs, &err);
        if (n < 0) die("sampling: held-out position %d: %s", pos, err.msg);
        s->candidates[pos] = n;
        s->entropy[pos] = entropy_nats(w->probs, V);
        double mass = 0.0;
        for (int t = 0; t < V; t++)
            if (w->probs[t] > 0.0f) mass += w->p1[t];
        s->mass_kept += mass;
        if (is_temperature(s) && s->value > 0) {
            for (int t = 0; t < V; t++) w->scaled[t] = logits[t] / (float)s->value;
            s->nll += nll_nats(w->scaled, V, target);
        }
    }
}

// Windows of the validation text: BOS then up to window - 1 tokens from a long line at
// n_windows evenly spaced points. Writes the tokens of window i to tokens + i * window, its
// length to lens[i]; returns the total number of positions (each predicts the next token).
static int heldout_windows(const SamplingInputs *lab, int n_windows, int window, int *tokens, int *lens) {
    const Corpus *c = &lab->corpus;
    size_t max_bytes = (size_t)window * BYTES_PER_TOKEN_BOUND;
    int *buf = mallocCheck(tokenizer_max_tokens(max_bytes) * sizeof(int));
    int n_positions = 0;
    for (int i = 0; i < n_windows; i++) {
        size_t at = long_line_at(c, (size_t)i * c->val_len / n_windows);
        size_t bytes = c->val_len - at < max_bytes ? c->val_len - at : max_bytes;
        int n = (int)tokenizer_encode(&lab->tok, (const unsigned char *)c->val + at, bytes, false, false, buf);
        if (n > window - 1) n = window - 1;
        int *w = tokens + (size_t)i * window;
        w[0] = lab->tok.bos_id;
        memcpy(w + 1, buf, (size_t)n * sizeof(int));
        lens[i] = n + 1;
        n_positions += n; // position j of the window predicts token j + 1
    }
    free(buf);
    return n_positions;
}

// Mean and quantiles of per-position values (bench_stats's quantiles; its _ms names aside).
typedef struct {
    double mean, p10, median, p90;
} Spread;

static Spread spread_of(const double *x, int n) {
    BenchStats b = bench_stats(x, n);
    double sum = 0.0;
    for (int i = 0; i < n; i++) sum += x[i];
    return (Spread){sum / n, b.p10_ms, b.median_ms, b.p90_ms};
}

typedef struct {
    Setting *settings;
    int n_settings, n_positions;
} HeldOut;

// Prefill n_windows windows of up to `window` tokens, with all their positions' logits, and
// measure every setting (make_settings's; dashboard: temperatures and filters) at each.
static HeldOut measure_heldout(SamplingInputs *lab, int n_windows, int window, int dashboard) {
    const Config *c = &lab->model.config;
    int V = c->vocab_size;
    window = window < c->seq_len ? window : c->seq_len;
    int *tokens = mallocCheck((size_t)n_windows * window * sizeof(int));
    int *lens = mallocCheck(n_windows * sizeof(int));
    int n_positions = heldout_windows(lab, n_windows, window, tokens, lens);
    if (n_positions < 1) die("sampling: the validation text of %s encodes to no tokens", lab->corpus.source);
    Setting *settings = mallocCheck((size_t)max_settings(V) * sizeof(Setting));
    int n_settings = make_settings(settings, &lab->tok, n_positions, dashboard);

    Scratch w = {.p1 = mallocCheck(V * sizeof(float)), .probs = mallocCheck(V * sizeof(float)),
                 .scaled = mallocCheck(V * sizeof(float))};
    SamplerParams plain = sampler_params_default();
    Error err;
    if (sampler_init(&w.plain, V, &plain, &err)) die("sampling: %s", err.msg);
    float *logits = mallocCheck((size_t)window * V * sizeof(float)); // (window, V)
    Engine engine;
    Session s;
    engine_open(&engine, &lab->model, ops_cpu(), DTYPE_F32, window, window);
    session_open(&s, &engine, window);
    int pos = 0;
    for (int i = 0; i < n_windows; i++) {
        progress_step(i, n_windows, "sampling: held-out window %d/%d", i + 1, n_windows);
        const int *win = tokens + (size_t)i * window;
        session_truncate(&s, 0);
        if (session_prefill(&s, win, lens[i], logits, &err)) die("sampling: %s", err.msg);
        for (int j = 0; j + 1 < lens[i]; j++)
            measure_position(settings, n_settings, logits + (size_t)j * V, V, win[j + 1], win, j + 1, pos++, &w);
    }
    session_close(&s);
    engine_close(&engine);
    sampler_free(&w.plain);
    free(w.p1), free(w.probs), free(w.scaled), free(logits), free(tokens), free(lens);
    return (HeldOut){settings, n_settings, n_positions};
}

// --- continuations -------------------------------------------------------------------------

typedef struct {
    int n;
    int **tokens; // (n) BOS then the prompt's tokens
    int *lens;    // (n)
    char **text;  // (n)
} Prompts;

// n prompts: validation lines at n evenly spaced points, cut at their last space within
// PROMPT_BYTES bytes.
static void choose_prompts(const SamplingInputs *lab, int n, Prompts *pr) {
    const Corpus *c = &lab->corpus;
    *pr = (Prompts){n, mallocCheck(n * sizeof(int *)), mallocCheck(n * sizeof(int)), mallocCheck(n * sizeof(char *))};
    for (int i = 0; i < n; i++) {
        const char *line = c->val + long_line_at(c, (size_t)i * c->val_len / n);
        size_t len = PROMPT_BYTES;
        while (len > 1 && line[len] != ' ') len--;
        pr->text[i] = strndup(line, len);
        if (!pr->text[i]) die("sampling: out of memory");
        pr->tokens[i] = mallocCheck(tokenizer_max_tokens(len) * sizeof(int));
        pr->lens[i] = (int)tokenizer_encode(&lab->tok, (const unsigned char *)line, len, true, false, pr->tokens[i]);
    }
}

static void prompts_free(Prompts *pr) {
    for (int i = 0; i < pr->n; i++) free(pr->tokens[i]), free(pr->text[i]);
    free(pr->tokens), free(pr->lens), free(pr->text);
}

// Continue B prompts, prompt b with samplers[b], in one decode batch for gen_len tokens each:
// out (B, gen_len). BOS and EOS are masked for the sampler; the returned NLL (summed over
// every generated token) is the model's, at T = 1, from its unmasked logits.
static double generate_batch(SamplingInputs *lab, int *const *prompts, const int *prompt_lens, Sampler *samplers, int B,
                             int gen_len, int *out) {
    int V = lab->model.config.vocab_size, longest = 0;
    for (int b = 0; b < B; b++) longest = prompt_lens[b] > longest ? prompt_lens[b] : longest;
    int cap = longest + gen_len;
    int *seq = mallocCheck((size_t)B * cap * sizeof(int)), *next = mallocCheck(B * sizeof(int));
    float *masked = mallocCheck(V * sizeof(float));
    Engine engine;
    Session *sessions = mallocCheck(B * sizeof(Session));
    Session **batch = mallocCheck(B * sizeof(Session *));
    Error err;
    engine_open(&engine, &lab->model, ops_cpu(), DTYPE_F32, longest > B ? longest : B, cap);
    for (int b = 0; b < B; b++) {
        session_open(&sessions[b], &engine, cap);
        batch[b] = &sessions[b];
        memcpy(seq + (size_t)b * cap, prompts[b], prompt_lens[b] * sizeof(int));
        if (session_prefill(&sessions[b], prompts[b], prompt_lens[b], NULL, &err)) die("sampling: %s", err.msg);
    }
    double nll = 0.0;
    for (int t = 0; t < gen_len; t++) {
        for (int b = 0; b < B; b++) {
            const float *row = sessions[b].logits;
            int *history = seq + (size_t)b * cap, n_history = prompt_lens[b] + t;
            memcpy(masked, row, V * sizeof(float));
            masked[lab->tok.bos_id] = masked[lab->tok.eos_id] = -INFINITY;
            int token = sampler_sample(&samplers[b], masked, history, n_history, &err);
            if (token < 0) die("sampling: generating token %d of prompt %d: %s", t, b, err.msg);
            nll += nll_nats(row, V, token);
            history[n_history] = next[b] = out[(size_t)b * gen_len + t] = token;
        }
        if (t + 1 < gen_len && session_decode_batch(batch, next, B, &err)) die("sampling: %s", err.msg);
    }
    for (int b = 0; b < B; b++) session_close(&sessions[b]);
    engine_close(&engine);
    free(seq), free(next), free(masked), free(sessions), free(batch);
    return nll;
}

// What the continuations under one setting look like, over all prompts.
typedef struct {
    TextStats text;
    double nll_sum; // nats, summed over tokens
    long tokens;
} GenStats;

// Every prompt continued under params, prompt b with seed lab->seed + b.
static GenStats generate_under(SamplingInputs *lab, const Prompts *pr, SamplerParams params, int gen_len) {
    Sampler *samplers = mallocCheck(pr->n * sizeof(Sampler));
    Error err;
    for (int b = 0; b < pr->n; b++) {
        params.seed = lab->seed + (uint64_t)b;
        if (sampler_init(&samplers[b], lab->model.config.vocab_size, &params, &err)) die("sampling: %s", err.msg);
    }
    int *out = mallocCheck((size_t)pr->n * gen_len * sizeof(int));
    GenStats g = {.tokens = (long)pr->n * gen_len};
    g.nll_sum = generate_batch(lab, pr->tokens, pr->lens, samplers, pr->n, gen_len, out);
    for (int b = 0; b < pr->n; b++) {
        size_t len;
        unsigned char *text = tokenizer_decode(&lab->tok, out + (size_t)b * gen_len, gen_len, &len);
        int *ids = mallocCheck((text_max_words(len) + 1) * sizeof(int));
        size_t n = word_index_add_text(&lab->words, (const char *)text, len, ids);
        text_stats_add(&g.text, ids, (long)n, lab->n_train_words);
        free(ids), free(text);
        sampler_free(&samplers[b]);
    }
    free(samplers), free(out);
    return g;
}

#define GEN_COLUMNS "prompts,gen_tokens,gen_words,distinct_1,distinct_2,repeat_4gram_rate,drift_word_frac,gen_nll_nats"

// The GEN_COLUMNS fields of one row.
static const char *gen_fields(char *buf, size_t size, const GenStats *g, int n_prompts) {
    snprintf(buf, size, "%d,%ld,%ld,%.6g,%.6g,%.6g,%.6g,%.6g", n_prompts, g->tokens, g->text.words,
             text_distinct_1(&g->text), text_distinct_2(&g->text), text_repeat_4gram_rate(&g->text),
             text_drift(&g->text), g->nll_sum / g->tokens);
    return buf;
}

// --- the tables ----------------------------------------------------------------------------

enum { TABLE_TEMPERATURE, TABLE_FILTERS, TABLE_PENALTY, TABLE_SAMPLERS, TABLE_SAMPLERS_TEXT, TABLE_CHAINS,
       TABLE_SAMPLES, TABLE_REAL_TEMPERATURE, TABLE_REAL_FILTERS };
#define HELDOUT_COLUMNS \
    "positions,candidates_mean,candidates_p10,candidates_median,candidates_p90,mass_kept,entropy_nats_mean"
static const LabTable TABLES[] = {
    {"sampling_temperature", "temperature,positions,entropy_nats_mean,entropy_nats_p10,entropy_nats_p90,"
                             "uniform_entropy_nats,heldout_nll_nats," GEN_COLUMNS,
     "temperature -> held-out entropy and NLL; text metrics", LAB_CPU},
    {"sampling_filters", "filter,value," HELDOUT_COLUMNS,
     "top_k | top_p | min_p, value -> candidate-set size, mass kept, entropy", LAB_CPU},
    {"sampling_penalty", "decoding,temperature,repetition_penalty," GEN_COLUMNS,
     "greedy | T = t, repetition penalty -> text metrics", LAB_CPU},
    {"sampling_samplers", "sampler,value," HELDOUT_COLUMNS,
     "typ_p | top_n_sigma | xtc (threshold, coin always) | dynatemp (range) | dry (multiplier), value at T = 1\n"
     "in llama.cpp's chain -> candidate-set size, mass kept, entropy over held-out positions",
     LAB_CPU},
    {"sampling_samplers_text", "sampler,value,temperature," GEN_COLUMNS,
     "llama.cpp's samplers (and mirostat 2's tau, the frequency penalty) at T = 0.3 and 1.5 -> text metrics",
     LAB_CPU},
    {"sampling_chains", "chain,temperature," HELDOUT_COLUMNS "," GEN_COLUMNS,
     "llama.cpp | vllm order at top-k 40, top-p 0.95, min-p 0.05, temperature -> held-out and text metrics",
     LAB_CPU},
    {"sampling_samples", "model,setting,chain,seed,tokens,prompt,text",
     "one prompt per model (the target; SmolLM2-135M with --real-model) continued under each setting", LAB_CPU},
    {"sampling_real_temperature", "temperature,positions,entropy_nats_mean,entropy_nats_p10,entropy_nats_p90,"
                                  "uniform_entropy_nats,heldout_nll_nats," GEN_COLUMNS,
     "--real-model: sampling_temperature's columns on the published model", LAB_CPU},
    {"sampling_real_filters", "filter,value," HELDOUT_COLUMNS,
     "--real-model: sampling_filters's columns on the published model", LAB_CPU},
    {0},
};

// The HELDOUT_COLUMNS fields of one setting.
static const char *heldout_fields(char *buf, size_t size, const Setting *s, int n) {
    Spread k = spread_of(s->candidates, n), e = spread_of(s->entropy, n);
    snprintf(buf, size, "%d,%.6g,%.6g,%.6g,%.6g,%.6g,%.6g", n, k.mean, k.p10, k.median, k.p90, s->mass_kept / n,
             e.mean);
    return buf;
}

// The held-out rows of the settings `keep` selects, each as "<filter>,<value>,<held-out fields>".
static void write_heldout(LabRun *r, int table, const HeldOut *h, int (*keep)(const Setting *)) {
    char fields[256];
    CsvWriter w = lab_csv(r, table);
    for (int i = 0; i < h->n_settings; i++)
        if (keep(&h->settings[i]))
            csv_row(&w, "%s,%.6g,%s", h->settings[i].filter, h->settings[i].value,
                    heldout_fields(fields, sizeof fields, &h->settings[i], h->n_positions));
    csv_close(&w);
}

static int is_llama_sampler(const Setting *s) { return !is_temperature(s) && !is_filter(s) && !is_chain(s); }

// llama.cpp's samplers in text: each value at each SAMPLER_TEXT_TEMPERATURES.
static void write_samplers_text(LabRun *r, SamplingInputs *lab, const Prompts *pr, int gen_len) {
    char fields[256];
    CsvWriter w = lab_csv(r, TABLE_SAMPLERS_TEXT);
    for (int i = 0; i < COUNT(SAMPLER_SWEEPS); i++) {
        const SamplerSweep *sw = &SAMPLER_SWEEPS[i];
        progress_step(i, COUNT(SAMPLER_SWEEPS), "sampling: continuations under %s", sw->sampler);
        for (int t = 0; t < COUNT(SAMPLER_TEXT_TEMPERATURES); t++)
            for (int j = 0; j < sw->n; j++) {
                SamplerParams p = sampler_setting(&lab->tok, sw->sampler, sw->values[j], 0);
                p.temperature = (float)SAMPLER_TEXT_TEMPERATURES[t];
                GenStats g = generate_under(lab, pr, p, gen_len);
                setting_params_free(&p);
                csv_row(&w, "%s,%.6g,%.6g,%s", sw->sampler, sw->values[j], SAMPLER_TEXT_TEMPERATURES[t],
                        gen_fields(fields, sizeof fields, &g, pr->n));
            }
    }
    csv_close(&w);
}

// The two chains at llama.cpp's defaults: held-out rows, then continuations under each.
static void write_chains(LabRun *r, SamplingInputs *lab, const Prompts *pr, const HeldOut *ho, int gen_len) {
    char held[256], gen[256];
    CsvWriter w = lab_csv(r, TABLE_CHAINS);
    for (int i = 0; i < ho->n_settings; i++) {
        const Setting *s = &ho->settings[i];
        if (!is_chain(s)) continue;
        GenStats g = generate_under(lab, pr, s->sampler.params, gen_len);
        csv_row(&w, "%s,%.6g,%s,%s", s->filter, s->value, heldout_fields(held, sizeof held, s, ho->n_positions),
                gen_fields(gen, sizeof gen, &g, pr->n));
    }
    csv_close(&w);
}

// Temperature rows: the held-out distribution, then continuations generated at that temperature.
static void write_temperature(LabRun *r, int table, SamplingInputs *lab, const Prompts *pr, const HeldOut *ho,
                              int gen_len) {
    char fields[256];
    CsvWriter w = lab_csv(r, table);
    for (int i = 0; i < ho->n_settings; i++) {
        const Setting *s = &ho->settings[i];
        if (!is_temperature(s)) continue;
        progress_step(i, COUNT(TEMPERATURES), "sampling: continuations at T = %g", s->value);
        int n = ho->n_positions;
        Spread h = spread_of(s->entropy, n);
        double nll = s->value > 0 ? s->nll / n : NAN; // greedy gives every miss probability 0
        GenStats g = generate_under(lab, pr, s->sampler.params, gen_len);
        csv_row(&w, "%.6g,%d,%.6g,%.6g,%.6g,%.6g,%.6g,%s", s->value, n, h.mean, h.p10, h.p90,
                log((double)lab->model.config.vocab_size), nll,
                gen_fields(fields, sizeof fields, &g, pr->n));
    }
    csv_close(&w);
}

static void write_penalty(LabRun *r, SamplingInputs *lab, const Prompts *pr, int gen_len) {
    char fields[256];
    CsvWriter w = lab_csv(r, TABLE_PENALTY);
    for (int i = 0; i < COUNT(PENALTY_TEMPERATURES); i++) {
        char decoding[32] = "greedy"; // a legend for the report
        if (PENALTY_TEMPERATURES[i] > 0) snprintf(decoding, sizeof decoding, "T = %g", PENALTY_TEMPERATURES[i]);
        for (int j = 0; j < COUNT(PENALTIES); j++) {
            progress_step(i * COUNT(PENALTIES) + j, COUNT(PENALTY_TEMPERATURES) * COUNT(PENALTIES),
                              "sampling: repetition penalty %g at T = %g", PENALTIES[j], PENALTY_TEMPERATURES[i]);
            SamplerParams p = sampler_params_default();
            p.temperature = (float)PENALTY_TEMPERATURES[i];
            p.repetition_penalty = (float)PENALTIES[j];
            GenStats g = generate_under(lab, pr, p, gen_len);
            csv_row(&w, "%s,%.6g,%.6g,%s", decoding, PENALTY_TEMPERATURES[i], PENALTIES[j],
                    gen_fields(fields, sizeof fields, &g, pr->n));
        }
    }
    csv_close(&w);
}

// Text fit for a CSV cell and a PDF: invalid UTF-8 bytes and control characters other than
// line breaks and tabs (which sampling at high temperature produces) become U+FFFD.
static char *printable(const unsigned char *s, size_t n) {
    char *out = mallocCheck(3 * n + 1), *o = out;
    for (size_t i = 0; i < n;) {
        size_t bad = n - i;
        if (utf8_valid((const char *)s + i, n - i, &bad)) bad = n - i;
        for (size_t end = i + bad; i < end; i++) {
            int control = (s[i] < 0x20 && s[i] != '\n' && s[i] != '\t') || s[i] == 0x7f;
            if (control) memcpy(o, "\xEF\xBF\xBD", 3), o += 3;
            else *o++ = (char)s[i];
        }
        if (i < n) memcpy(o, "\xEF\xBF\xBD", 3), o += 3, i++; // the invalid byte
    }
    *o = '\0';
    return out;
}

// "One prompt, different settings": each setting is sampler_setting's filter and value, at
// its own temperature (NAN: the one the filter sets).
typedef struct {
    const char *name, *filter;
    double value, temperature;
} Sample;
static const Sample SAMPLES[] = {
    {"greedy", "temperature", 0, NAN},
    {"T 0.7 + top-p 0.9", "top_p", 0.9, 0.7},
    {"T 1.0", "temperature", 1.0, NAN},
    {"T 1.5", "temperature", 1.5, NAN},
    {"llama.cpp defaults (T 0.8, top-k 40, top-p 0.95, min-p 0.05)", "llama.cpp", 0.8, NAN},
    {"typical 0.5", "typ_p", 0.5, 1.0},
    {"T 1.5 + top-n-sigma 1", "top_n_sigma", 1.0, 1.5},
    {"XTC 0.1 (half the steps)", "xtc", 0.1, 1.0},
    {"dynamic T 1 +- 0.5", "dynatemp", 0.5, 1.0},
    {"mirostat 2, tau 5", "mirostat", 5.0, 1.0},
    {"T 0.3 + DRY 0.8", "dry", 0.8, 0.3},
    {"greedy + repetition penalty 1.3", "repetition", 1.3, 0.0},
};
enum { N_SAMPLES = sizeof SAMPLES / sizeof SAMPLES[0] };

// One prompt (tokens, n) of the model in lab continued under every SAMPLES setting with the
// run's seed, one row each; `model` and `prompt_text` name them in the table.
static void write_samples(CsvWriter *w, SamplingInputs *lab, const char *model, const char *prompt_text,
                          int *prompt, int n, int sample_len) {
    Sampler samplers[N_SAMPLES];
    int *prompts[N_SAMPLES], lens[N_SAMPLES];
    char chains[N_SAMPLES][160];
    Error err;
    for (int i = 0; i < N_SAMPLES; i++) {
        SamplerParams p = sampler_setting(&lab->tok, SAMPLES[i].filter, SAMPLES[i].value, 0);
        if (!isnan(SAMPLES[i].temperature)) p.temperature = (float)SAMPLES[i].temperature;
        p.seed = lab->seed;
        if (p.mirostat) snprintf(chains[i], sizeof chains[i], "temperature;mirostat_v2");
        else sampler_chain_format(&p.chain, chains[i], sizeof chains[i]);
        if (sampler_init(&samplers[i], lab->model.config.vocab_size, &p, &err)) die("sampling: %s", err.msg);
        setting_params_free(&p);
        prompts[i] = prompt;
        lens[i] = n;
    }
    int *out = mallocCheck((size_t)N_SAMPLES * sample_len * sizeof(int));
    generate_batch(lab, prompts, lens, samplers, N_SAMPLES, sample_len, out);

    char *clean = printable((const unsigned char *)prompt_text, strlen(prompt_text));
    size_t prompt_size = 2 * strlen(clean) + 3;
    char *quoted_prompt = mallocCheck(prompt_size), quoted_model[128];
    csv_quote(quoted_prompt, prompt_size, clean);
    csv_quote(quoted_model, sizeof quoted_model, model);
    for (int i = 0; i < N_SAMPLES; i++) {
        size_t len;
        unsigned char *raw = tokenizer_decode(&lab->tok, out + (size_t)i * sample_len, sample_len, &len);
        char *text = printable(raw, len);
        size_t size = 2 * strlen(text) + 3;
        char *quoted = mallocCheck(size), name[160];
        csv_row(w, "%s,%s,%s,%llu,%d,%s,%s", quoted_model, csv_quote(name, sizeof name, SAMPLES[i].name), chains[i],
                (unsigned long long)lab->seed, sample_len, quoted_prompt, csv_quote(quoted, size, text));
        free(raw), free(text), free(quoted);
        sampler_free(&samplers[i]);
    }
    free(clean), free(quoted_prompt), free(out);
}

// The real model's samples: REAL_PROMPT as one user turn in its chat template.
#define REAL_PROMPT "Write a short story about a lighthouse keeper."
static void write_real_samples(CsvWriter *w, const char *path, uint64_t seed, int sample_len) {
    SamplingInputs real = {.seed = seed};
    Error err;
    if (checkpoint_load(path, NULL, &real.model, &real.tok, &err)) die("%s", err.msg);
    char *text = chat_format_user(chat_template_for(&real.tok), REAL_PROMPT);
    if (!text) die("sampling: %s: the lab knows no chat template for this model", path);
    size_t len = strlen(text);
    int *tokens = mallocCheck(tokenizer_max_tokens(len) * sizeof(int));
    unsigned flags = TOKENIZER_PARSE_SPECIAL | (real.tok.add_bos ? TOKENIZER_ADD_BOS : 0);
    int n = (int)tokenizer_tokenize(&real.tok, (const unsigned char *)text, len, flags, tokens);
    if (n + sample_len > real.model.config.seq_len) die("sampling: %s: the prompt leaves no room", path);
    const char *slash = strrchr(path, '/');
    write_samples(w, &real, slash ? slash + 1 : path, REAL_PROMPT, tokens, n, sample_len);
    free(tokens), free(text);
    tokenizer_free(&real.tok);
    model_free(&real.model);
}

// --- main ----------------------------------------------------------------------------------

static const char *model_path, *tokenizer_path, *corpus_path, *real_model_path;
static uint64_t seed;

static const LabOption OPTIONS[] = {
    LAB_CHECKPOINT_OPTIONS(model_path, tokenizer_path),
    {.name = "corpus", .kind = LAB_TEXT, .value = &corpus_path, .arg = "FILE",
     .help = "the text the model was trained on (default: $CORPUS, else the KJV)"},
    {.name = "seed", .kind = LAB_U64, .value = &seed, .arg = "S",
     .help = "sampler seed of prompt 0 (prompt b uses S + b)", .def = "42"},
    {.name = "real-model", .kind = LAB_TEXT, .value = &real_model_path, .arg = "FILE",
     .help = "a published model (GGUF with its chat template) whose samples join the target's:\n"
             "\"" REAL_PROMPT "\" under the same settings"},
    {0},
};

// A model, its tokenizer, the corpus and its training words.
static void load_inputs(SamplingInputs *lab, const char *path, const char *tokenizer) {
    Error err;
    if (checkpoint_load(path, tokenizer, &lab->model, &lab->tok, &err)) die("%s", err.msg);
    if (lab->tok.vocab_size != lab->model.config.vocab_size)
        die("sampling: %s: the tokenizer has %d tokens but the model %d", path, lab->tok.vocab_size,
            lab->model.config.vocab_size);
    const char *corpus = corpus_path ? corpus_path : getenv("CORPUS");
    if (corpus_load(&lab->corpus, corpus && *corpus ? corpus : NULL, &err)) die("%s", err.msg);
    word_index_init(&lab->words);
    word_index_add_text(&lab->words, lab->corpus.train, lab->corpus.train_len, NULL);
    lab->n_train_words = lab->words.n_words;
}

static void free_inputs(SamplingInputs *lab) {
    word_index_free(&lab->words);
    corpus_free(&lab->corpus);
    tokenizer_free(&lab->tok);
    model_free(&lab->model);
}

// The dashboard on --real-model: the temperature and filter sweeps over the same held-out KJV
// windows and prompts (in its own tokens), fewer of them: a 49k-token vocabulary makes every
// setting at every position about 100x the zoo's cost. Its drift counts words absent from the
// KJV's training split, which for a model not trained on the KJV measures leaving the book's
// vocabulary, not the model's.
static void write_real_dashboard(LabRun *r, const Sizes *sz) {
    SamplingInputs real = {.seed = seed};
    load_inputs(&real, real_model_path, NULL);
    Prompts pr;
    choose_prompts(&real, sz->real_prompts, &pr);
    HeldOut ho = measure_heldout(&real, sz->real_windows, sz->real_window, 1);
    write_heldout(r, TABLE_REAL_FILTERS, &ho, is_filter);
    write_temperature(r, TABLE_REAL_TEMPERATURE, &real, &pr, &ho, sz->real_gen_len);
    for (int i = 0; i < ho.n_settings; i++) setting_free(&ho.settings[i]);
    free(ho.settings);
    prompts_free(&pr);
    free_inputs(&real);
}

static int run(LabRun *r) {
    const Sizes *sz = r->quick ? &QUICK : &FULL;
    SamplingInputs lab = {.seed = seed};
    load_inputs(&lab, model_path, tokenizer_path);

    Prompts pr;
    choose_prompts(&lab, sz->n_prompts, &pr);
    int longest = 0;
    for (int i = 0; i < pr.n; i++) longest = pr.lens[i] > longest ? pr.lens[i] : longest;
    int room = lab.model.config.seq_len - longest;
    if (room < 1) die("sampling: %s: a %d-token context leaves no room after the prompts", model_path, room + longest);
    int gen_len = sz->gen_len < room ? sz->gen_len : room, sample_len = sz->sample_len < room ? sz->sample_len : room;

    HeldOut ho = measure_heldout(&lab, sz->n_windows, sz->window, 0);
    write_heldout(r, TABLE_FILTERS, &ho, is_filter);
    write_heldout(r, TABLE_SAMPLERS, &ho, is_llama_sampler);
    write_penalty(r, &lab, &pr, gen_len);
    write_samplers_text(r, &lab, &pr, gen_len);
    write_chains(r, &lab, &pr, &ho, gen_len);
    CsvWriter samples = lab_csv(r, TABLE_SAMPLES);
    write_samples(&samples, &lab, "target", pr.text[0], pr.tokens[0], pr.lens[0], sample_len);
    if (real_model_path) write_real_samples(&samples, real_model_path, seed, sz->real_sample_len);
    csv_close(&samples);
    if (real_model_path) write_real_dashboard(r, sz);
    write_temperature(r, TABLE_TEMPERATURE, &lab, &pr, &ho, gen_len);

    char sum_hex[17];
    Error err;
    if (meta_file_checksum(model_path, sum_hex, &err)) die("%s", err.msg);
    lab_meta(r, "sampling_model", "%s", model_path);
    lab_meta(r, "sampling_model_fnv1a64", "%s", sum_hex);
    lab_meta(r, "sampling_corpus", "%s", lab.corpus.source);
    lab_meta(r, "sampling_seed", "%llu", (unsigned long long)seed);
    lab_meta(r, "sampling_real_model", "%s", real_model_path ? real_model_path : "none");
    lab_meta(r, "sampling_real_prompt", "%s", REAL_PROMPT);

    for (int i = 0; i < ho.n_settings; i++) setting_free(&ho.settings[i]);
    free(ho.settings);
    prompts_free(&pr);
    free_inputs(&lab);
    return 0;
}

static const Experiment SAMPLING = {
    "sampling", "--model FILE [options]",
    "How temperature, top-k, top-p, min-p, repetition penalty and llama.cpp's samplers shape the next-token\n"
    "distribution, what they do to generated text, and what the chain's order changes. Nothing is timed:\n"
    "every column is reproducible from the seed.",
    OPTIONS, TABLES, LAB_COMMON, NULL, run};

int main(int argc, char **argv) { return lab_main(&SAMPLING, argc, argv); }
