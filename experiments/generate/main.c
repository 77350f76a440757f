// generate/main.c: bin/generate, text generation from a checkpoint, streamed to stdout.
//
//   bin/generate --model out/models/target.gguf --prompt "In the beginning" -n 128 --temperature 0.8
//   bin/generate --model stories15M.bin --tokenizer tokenizer.bin --prompt "Once upon a time" -n 256
//
//   bin/generate --model out/models/full/target.gguf --draft out/models/full/draft-s.gguf --gamma 4 --temperature 0
//   bin/generate --model out/models/full/target.gguf --lookup --prompt "And God said"
//   bin/generate --model out/models/real/smollm2-135m-instruct-q4_1.gguf --chat --prompt "What is RoPE?" --temperature 0
//
// GGUF checkpoints carry their tokenizer; llama2.c checkpoints (.bin) need --tokenizer. --chat
// wraps the prompt in the model's chat template as llama.cpp's built-in formatter does
// (experiments/formats/chat.h: ChatML for SmolLM2, Gemma's turns), and generation stops at any
// end-of-generation token (Gemma's <end_of_turn> among them).
// The prompt is prefilled in one pass, then each new token is one decode step against
// the KV cache. Prompt and decode tokens/s go to stderr at the end. Each engine's decode
// steps run on --threads threads or on one, whichever its thread governor (session.h) timed
// faster: one thread wins on a tiny model, or beside another busy process. --rope-scaling NAME
// --rope-factor S runs the model with that RoPE scaling (rope.h) over S x its trained context.
//
// --draft FILE (a checkpoint sharing the target's vocabulary) or --lookup (the model-free
// prompt-lookup draft) generates by speculative decoding (speculative.h), gamma drafts per
// target call, as llama.cpp's `speculative` and `lookup` examples do. At the end, stderr gets
// the drafted and accepted counts, the acceptance rate, the mean accepted length per target
// call and the draft / target times; then the same number of tokens is generated again by
// plain decoding (untimed prompt, same seed), for the speed-up. At T = 0 the two must be the
// same tokens: if they are not, the first difference and the target's top-2 logit margin
// there are reported and the exit status is 1.
//
//   bin/generate --model out/models/full/target.gguf --perplexity out/models/full/validation.txt
//
// --perplexity FILE scores FILE instead of generating, as llama.cpp's llama-perplexity does
// (same number, so the two can be compared; tests/fixtures/real/README.md): FILE less one
// trailing newline, tokenized whole (BOS first where the model adds one), cut into chunks of
// --ctx tokens (default the model's context; the tail that fills no chunk is dropped; --chunks N
// scores the first N), the first token of each chunk replaced by BOS where the model adds one,
// and the mean negative log-likelihood of the tokens of each chunk's second half (after ctx / 2
// positions); prints the running PPL = exp(that mean) after each chunk, then the last.
#include <float.h>
#include <limits.h>
#include <math.h>
#include <omp.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"
#include "chat.h"
#include "checkpoint.h"
#include "dry_breakers.h"
#include "lab.h"
#include "session.h"
#include "speculative.h"
#include "tokenizer.h"

static const char *model_path, *tokenizer_path, *prompt = "", *draft_path, *rope_scaling;
static long n_tokens, top_k, gamma_arg;
static int lookup;
static double temperature, top_p, min_p, repeat_penalty, presence_penalty, frequency_penalty, rope_factor;
static double typical_p, top_n_sigma, xtc_probability, xtc_threshold, dry_multiplier, dry_base, dynatemp_range,
    dynatemp_exponent, mirostat_tau, mirostat_eta;
static long repeat_last_n, dry_allowed_length, dry_penalty_last_n, mirostat, n_probs;
static const char *samplers = "llama.cpp", *logit_bias_arg, *dry_breaker, *stop;
static uint64_t seed;
static int ignore_eos, chat;
static const char *perplexity_path;
static long ppl_ctx, ppl_chunks;

// The defaults are sampler_params_default's; the sampler checks the open ends of the ranges.
static const LabOption OPTIONS[] = {
    LAB_CHECKPOINT_OPTIONS(model_path, tokenizer_path),
    {.name = "prompt", .kind = LAB_TEXT, .value = &prompt, .arg = "TEXT",
     .help = "prompt (default empty: start from BOS alone)"},
    {.name = "n-tokens", .short_name = 'n', .kind = LAB_INT, .value = &n_tokens, .arg = "N",
     .help = "tokens to generate", .def = "128", .min = 0, .max = INT_MAX},
    {.name = "temperature", .kind = LAB_DOUBLE, .value = &temperature, .arg = "T", .help = "0 = greedy", .def = "1",
     .min = 0, .max = FLT_MAX},
    {.name = "top-k", .kind = LAB_INT, .value = &top_k, .arg = "K",
     .help = "keep the K most likely tokens (0 = off)", .def = "0", .min = 0, .max = INT_MAX},
    {.name = "top-p", .kind = LAB_DOUBLE, .value = &top_p, .arg = "P",
     .help = "nucleus sampling, P in (0, 1] (1 = off)", .def = "1", .min = 0, .max = 1},
    {.name = "min-p", .kind = LAB_DOUBLE, .value = &min_p, .arg = "M",
     .help = "drop tokens below M x the top probability (0 = off)", .def = "0", .min = 0, .max = 1},
    {.name = "repeat-penalty", .kind = LAB_DOUBLE, .value = &repeat_penalty, .arg = "R",
     .help = "CTRL repetition penalty (1 = off)", .def = "1", .min = 0, .max = FLT_MAX},
    {.name = "presence-penalty", .kind = LAB_DOUBLE, .value = &presence_penalty, .arg = "X",
     .help = "OpenAI-style presence penalty (0 = off)", .def = "0", .min = -FLT_MAX, .max = FLT_MAX},
    {.name = "frequency-penalty", .kind = LAB_DOUBLE, .value = &frequency_penalty, .arg = "X",
     .help = "OpenAI-style frequency penalty (0 = off)", .def = "0", .min = -FLT_MAX, .max = FLT_MAX},
    {.name = "repeat-last-n", .kind = LAB_INT, .value = &repeat_last_n, .arg = "N",
     .help = "the penalties see the last N tokens (0 = penalties off, -1 = all)", .def = "64", .min = -1,
     .max = INT_MAX},
    {.name = "samplers", .kind = LAB_TEXT, .value = &samplers, .arg = "LIST",
     .help = "the sampler chain, ';'-separated as llama.cpp's --samplers (penalties, dry, top_n_sigma, top_k,\n"
             "typ_p, top_p, min_p, xtc, temperature), or a named chain: llama.cpp (its default order) or vllm\n"
             "(penalties;temperature;min_p;top_k;top_p)"},
    {.name = "typical", .kind = LAB_DOUBLE, .value = &typical_p, .arg = "P",
     .help = "locally typical sampling, P in (0, 1] (1 = off)", .def = "1", .min = 0, .max = 1},
    {.name = "top-nsigma", .kind = LAB_DOUBLE, .value = &top_n_sigma, .arg = "N",
     .help = "keep logits within N standard deviations of the top one (0 = off)", .def = "0", .min = 0,
     .max = FLT_MAX},
    {.name = "xtc-probability", .kind = LAB_DOUBLE, .value = &xtc_probability, .arg = "P",
     .help = "XTC: the chance per step of excluding the top choices (0 = off)", .def = "0", .min = 0, .max = 1},
    {.name = "xtc-threshold", .kind = LAB_DOUBLE, .value = &xtc_threshold, .arg = "P",
     .help = "XTC: tokens at or above this probability are excluded, all but the least likely (> 0.5 = off)",
     .def = "0.1", .min = 0, .max = 1},
    {.name = "dry-multiplier", .kind = LAB_DOUBLE, .value = &dry_multiplier, .arg = "M",
     .help = "DRY repetition penalty's multiplier (0 = off)", .def = "0", .min = 0, .max = FLT_MAX},
    {.name = "dry-base", .kind = LAB_DOUBLE, .value = &dry_base, .arg = "B",
     .help = "DRY: the penalty grows as B^(repeat length - allowed length)", .def = "1.75", .min = 1,
     .max = FLT_MAX},
    {.name = "dry-allowed-length", .kind = LAB_INT, .value = &dry_allowed_length, .arg = "N",
     .help = "DRY: repeats up to N tokens long are free", .def = "2", .min = 0, .max = INT_MAX},
    {.name = "dry-penalty-last-n", .kind = LAB_INT, .value = &dry_penalty_last_n, .arg = "N",
     .help = "DRY looks for repeats in the last N tokens (0 = off, -1 = all)", .def = "-1", .min = -1,
     .max = INT_MAX},
    {.name = "dry-sequence-breaker", .kind = LAB_TEXT, .value = &dry_breaker, .arg = "TEXT",
     .help = "DRY's sequence breaker instead of llama.cpp's defaults \"\\n\", \":\", \"\\\"\", \"*\" ('none': no breakers)"},
    {.name = "dynatemp-range", .kind = LAB_DOUBLE, .value = &dynatemp_range, .arg = "D",
     .help = "dynamic temperature: T +- D by the candidates' entropy (0 = off)", .def = "0", .min = 0,
     .max = FLT_MAX},
    {.name = "dynatemp-exp", .kind = LAB_DOUBLE, .value = &dynatemp_exponent, .arg = "E",
     .help = "dynamic temperature's exponent on the normalised entropy", .def = "1", .min = 0, .max = FLT_MAX},
    {.name = "mirostat", .kind = LAB_INT, .value = &mirostat, .arg = "N",
     .help = "mirostat 1 or 2 instead of the chain (0 = off)", .def = "0", .min = 0, .max = 2},
    {.name = "mirostat-lr", .kind = LAB_DOUBLE, .value = &mirostat_eta, .arg = "ETA",
     .help = "mirostat's learning rate eta", .def = "0.1", .min = 0, .max = 1},
    {.name = "mirostat-ent", .kind = LAB_DOUBLE, .value = &mirostat_tau, .arg = "TAU",
     .help = "mirostat's target surprise tau (bits)", .def = "5", .min = 0, .max = FLT_MAX},
    {.name = "logit-bias", .kind = LAB_TEXT, .value = &logit_bias_arg, .arg = "LIST",
     .help = "add to token logits, as llama.cpp: ID+BIAS or ID-BIAS, ','-separated ('15043-inf' forbids 15043)"},
    {.name = "stop", .kind = LAB_TEXT, .value = &stop, .arg = "TEXT",
     .help = "stop when the generated text contains TEXT (not printed)"},
    {.name = "n-probs", .kind = LAB_INT, .value = &n_probs, .arg = "N",
     .help = "after each generated token, print to stderr the model's N most likely tokens with their\n"
             "log-probabilities (before any sampler): n-probs: ID 'TEXT' | ID LN_P 'TEXT' | ...",
     .def = "0", .min = 0, .max = 100},
    {.name = "seed", .kind = LAB_U64, .value = &seed, .arg = "S", .help = "sampler seed", .def = "42"},
    {.name = "chat", .kind = LAB_FLAG, .value = &chat,
     .help = "send the prompt as a user message in the model's chat template (llama.cpp's built-in kinds)"},
    {.name = "ignore-eos", .kind = LAB_FLAG, .value = &ignore_eos,
     .help = "keep generating past the end-of-sequence token"},
    {.name = "draft", .kind = LAB_TEXT, .value = &draft_path, .arg = "FILE",
     .help = "speculative decoding with this draft checkpoint (the target's vocabulary)"},
    {.name = "lookup", .kind = LAB_FLAG, .value = &lookup,
     .help = "speculative decoding with the model-free prompt-lookup draft"},
    {.name = "gamma", .kind = LAB_INT, .value = &gamma_arg, .arg = "N",
     .help = "tokens drafted per target call with --draft or --lookup", .def = "4", .min = 1, .max = SPEC_MAX_GAMMA},
    {.name = "rope-scaling", .kind = LAB_TEXT, .value = &rope_scaling, .arg = "NAME",
     .help = "run with this RoPE scaling instead of the checkpoint's: none, linear, ntk, yarn"},
    {.name = "perplexity", .kind = LAB_TEXT, .value = &perplexity_path, .arg = "FILE",
     .help = "score FILE as llama-perplexity does instead of generating"},
    {.name = "ctx", .kind = LAB_INT, .value = &ppl_ctx, .arg = "N",
     .help = "--perplexity's chunk length (0 = the model's context)", .def = "0", .min = 0, .max = INT_MAX},
    {.name = "chunks", .kind = LAB_INT, .value = &ppl_chunks, .arg = "N",
     .help = "--perplexity scores the first N chunks only (0 = all), as llama-perplexity's --chunks", .def = "0",
     .min = 0, .max = INT_MAX},
    {.name = "rope-factor", .kind = LAB_DOUBLE, .value = &rope_factor, .arg = "S",
     .help = "--rope-scaling's factor: the context becomes S x the one trained", .def = "1", .min = 1, .max = 1024},
    {0},
};

// --logit-bias: "ID+BIAS" or "ID-BIAS" items, ','-separated (BIAS a number or inf).
static int parse_logit_bias(const char *arg, SamplerLogitBias **out, Error *err) {
    int n = 0;
    *out = NULL;
    for (const char *at = arg; *at;) {
        size_t len = strcspn(at, ",");
        char item[64], *end;
        if (len == 0 || len >= sizeof item) return error_set(err, "--logit-bias: bad item '%.*s'", (int)len, at);
        memcpy(item, at, len);
        item[len] = 0;
        long id = strtol(item, &end, 10);
        if (end == item || (*end != '+' && *end != '-'))
            return error_set(err, "--logit-bias: '%s' is not ID+BIAS or ID-BIAS", item);
        char *sign = end;
        double bias = strtod(sign, &end);
        if (*end || (!isfinite(bias) && bias != -INFINITY))
            return error_set(err, "--logit-bias: '%s' has no finite bias (or -inf)", item);
        *out = reallocCheck(*out, (size_t)(n + 1) * sizeof **out);
        (*out)[n++] = (SamplerLogitBias){.token = id > INT_MAX || id < 0 ? -1 : (int)id, .bias = (float)bias};
        at += len + (at[len] == ',');
    }
    return n;
}

// A sampler error names the parameter (sampler.h's field); the user gave an option: name it.
static void sampler_usage_error(const char *msg) {
    static const char *const FIELD_OPTION[][2] = {
        {"xtc_probability", "--xtc-probability"}, {"xtc_threshold", "--xtc-threshold"},
        {"dynatemp_range", "--dynatemp-range"},   {"dynatemp_exponent", "--dynatemp-exp"},
        {"dry_multiplier", "--dry-multiplier"},   {"dry_base", "--dry-base"},
        {"dry_allowed_length", "--dry-allowed-length"}, {"dry_penalty_last_n", "--dry-penalty-last-n"},
        {"mirostat_tau", "--mirostat-ent"},       {"mirostat_eta", "--mirostat-lr"},
        {"mirostat", "--mirostat"},               {"typical_p", "--typical"},
        {"top_n_sigma", "--top-nsigma"},          {"top_k", "--top-k"},
        {"top_p", "--top-p"},                     {"min_p", "--min-p"},
        {"repetition_penalty", "--repeat-penalty"}, {"presence_penalty", "--presence-penalty"},
        {"frequency_penalty", "--frequency-penalty"}, {"penalty_window", "--repeat-last-n"},
        {"logit_bias", "--logit-bias"},           {"temperature", "--temperature"},
    };
    for (size_t i = 0; i < sizeof FIELD_OPTION / sizeof FIELD_OPTION[0]; i++)
        if (strstr(msg, FIELD_OPTION[i][0])) {
            char buf[sizeof ((Error *)0)->msg + 64];
            snprintf(buf, sizeof buf, "%s: %s", FIELD_OPTION[i][1], msg);
            cli_usage_error("generate", buf);
        }
    cli_usage_error("generate", msg);
}

// The sampler's parameters from the options; breakers and biases are allocated into *owned
// (freed by the caller after sampler_init, which copies them). DRY's breakers are text, made
// tokens by the model's tokenizer: with tok NULL (checking the options before the model
// loads) there are none.
static SamplerParams sampler_params(const Tokenizer *tok, void **owned_breakers, void **owned_biases) {
    SamplerParams p = sampler_params_default();
    Error err;
    if (sampler_chain_parse(samplers, &p.chain, &err)) cli_usage_error("generate", err.msg);
    p.temperature = (float)temperature;
    p.top_k = (int)top_k;
    p.top_p = (float)top_p;
    p.min_p = (float)min_p;
    p.typical_p = (float)typical_p;
    p.top_n_sigma = (float)top_n_sigma;
    p.xtc_probability = (float)xtc_probability;
    p.xtc_threshold = (float)xtc_threshold;
    p.dynatemp_range = (float)dynatemp_range;
    p.dynatemp_exponent = (float)dynatemp_exponent;
    if (repeat_last_n != 0) {
        p.repetition_penalty = (float)repeat_penalty;
        p.presence_penalty = (float)presence_penalty;
        p.frequency_penalty = (float)frequency_penalty;
        p.penalty_window = repeat_last_n < 0 ? 0 : (int)repeat_last_n;
    }
    p.dry_multiplier = (float)dry_multiplier;
    p.dry_base = (float)dry_base;
    p.dry_allowed_length = (int)dry_allowed_length;
    p.dry_penalty_last_n = (int)dry_penalty_last_n;
    p.mirostat = (int)mirostat;
    p.mirostat_tau = (float)mirostat_tau;
    p.mirostat_eta = (float)mirostat_eta;
    p.seed = seed;
    *owned_breakers = *owned_biases = NULL;
    if (tok && p.dry_multiplier > 0.0f && !(dry_breaker && !strcmp(dry_breaker, "none"))) {
        SamplerBreaker *b;
        const char *const *strings = dry_breaker ? &dry_breaker : DRY_DEFAULT_BREAKERS;
        int n = dry_breaker ? 1 : (int)(sizeof DRY_DEFAULT_BREAKERS / sizeof DRY_DEFAULT_BREAKERS[0]);
        if (dry_breakers_from_strings(tok, strings, n, &b, &p.n_dry_breakers, &err))
            cli_usage_error("generate", err.msg);
        p.dry_breakers = b;
        *owned_breakers = b;
    }
    if (logit_bias_arg) {
        SamplerLogitBias *b;
        int n = parse_logit_bias(logit_bias_arg, &b, &err);
        if (n < 0) cli_usage_error("generate", err.msg);
        p.logit_bias = b, p.n_logit_bias = n;
        *owned_biases = b;
    }
    return p;
}

// Write the text of token `next` (after `prev`) to stdout.
static void print_piece(const Tokenizer *tok, int prev, int next) {
    size_t len;
    const unsigned char *piece = tokenizer_piece(tok, prev, next, &len);
    fwrite(piece, 1, len, stdout);
}

// Streams each sampled token to stdout as it arrives; an end token stops the generation
// unless --ignore-eos (llama2.c's stories delimit sequences with BOS, and run.c stops on it too).
// --stop: text not yet printed because it may begin the stop string is held back; the stop
// string itself and what follows it are never printed. --n-probs reads the logits the token
// was sampled from (plain decoding's session).
typedef struct {
    const Tokenizer *tok;
    const Session *session; // for --n-probs; NULL under speculative decoding
    const int *tokens;      // the sequence so far, as session_generate appends to it
    int n;                  // its length before the token being printed
    char *held;             // text held back by --stop, n_held bytes
    size_t n_held;
    int stopped;            // the stop string was generated
} Printer;

// A token's text in quotes, with quote, backslash, '|' and control bytes escaped.
static void print_token_text(const Tokenizer *tok, int id) {
    size_t len;
    unsigned char *text = tokenizer_decode(tok, &id, 1, &len);
    fputc('\'', stderr);
    for (size_t i = 0; i < len; i++) {
        unsigned char c = text[i];
        if (c == '\'' || c == '\\' || c == '|') fprintf(stderr, "\\%c", c);
        else if (c == '\n') fputs("\\n", stderr);
        else if (c < 0x20 || c == 0x7f) fprintf(stderr, "\\x%02x", c);
        else fputc(c, stderr);
    }
    fputc('\'', stderr);
    free(text);
}

// The model's n_probs most likely next tokens, to stderr: "n-probs: <id> '<text>'" for the token
// sampled, then " | <id> <ln p> '<text>'" for each, most likely first.
static void print_logprobs(const Printer *p, int next) {
    int V = p->session->engine->config.vocab_size, ids[100];
    float lp[100];
    sampler_top_logprobs(p->session->logits, V, (int)n_probs, ids, lp);
    fprintf(stderr, "n-probs: %d ", next);
    print_token_text(p->tok, next);
    for (int i = 0; i < n_probs; i++) {
        fprintf(stderr, " | %d %.4f ", ids[i], lp[i]);
        print_token_text(p->tok, ids[i]);
    }
    fputc('\n', stderr);
}

// Print the held text up to where the stop string might begin; returns 1 if it is all there.
static int print_until_stop(Printer *p) {
    if (!stop) {
        fwrite(p->held, 1, p->n_held, stdout);
        p->n_held = 0;
        return 0;
    }
    size_t slen = strlen(stop);
    char *found = memmem(p->held, p->n_held, stop, slen);
    size_t keep = 0; // the longest tail of the held text that begins the stop string
    for (size_t k = slen - 1 < p->n_held ? slen - 1 : p->n_held; !found && k > 0 && !keep; k--)
        if (!memcmp(p->held + p->n_held - k, stop, k)) keep = k;
    size_t printable = found ? (size_t)(found - p->held) : p->n_held - keep;
    fwrite(p->held, 1, printable, stdout);
    memmove(p->held, p->held + printable, p->n_held - printable);
    p->n_held -= printable;
    return found != NULL;
}

static int print_token(void *ctx, int next) {
    Printer *p = ctx;
    const Tokenizer *tok = p->tok;
    bool end = tokenizer_is_eog(tok, next) || (tok->kind == TOKENIZER_LLAMA2C && next == tok->bos_id);
    if (!ignore_eos && end) return 1;
    if (n_probs > 0 && p->session) print_logprobs(p, next);
    size_t len;
    const unsigned char *piece = tokenizer_piece(tok, p->tokens[p->n - 1], next, &len);
    p->held = reallocCheck(p->held, p->n_held + len + 1);
    memcpy(p->held + p->n_held, piece, len);
    p->n_held += len;
    p->stopped = print_until_stop(p);
    fflush(stdout);
    p->n++;
    return p->stopped;
}

// The target, and for speculative decoding the draft (NULL: the lookup draft, or none), each
// on an engine that takes the prompt in one pass and gamma + 1 verification rows.
typedef struct {
    Model *model, *draft;
    int speculative;
    int n_prompt, capacity;
    Engine engine, draft_engine;
    Session session, draft_session;
    ThreadGovernor governor, draft_governor;
} Run;

static void run_open(Run *g) {
    int rows = g->n_prompt < 512 ? g->n_prompt : 512;
    if (g->speculative && rows < gamma_arg + 1) rows = (int)gamma_arg + 1;
    engine_open(&g->engine, g->model, ops_cpu(), DTYPE_F32, rows, g->capacity);
    thread_governor_init(&g->governor, omp_get_max_threads());
    g->engine.governor = &g->governor;
    session_open(&g->session, &g->engine, g->capacity);
    if (!g->draft) return;
    engine_open(&g->draft_engine, g->draft, ops_cpu(), DTYPE_F32, rows, g->capacity);
    thread_governor_init(&g->draft_governor, omp_get_max_threads());
    g->draft_engine.governor = &g->draft_governor;
    session_open(&g->draft_session, &g->draft_engine, g->capacity);
}

static void run_close(Run *g) {
    session_close(&g->session);
    engine_close(&g->engine);
    if (!g->draft) return;
    session_close(&g->draft_session);
    engine_close(&g->draft_engine);
}

// Prefill tokens (n_prompt) into the target (and the draft), then sample up to n_tokens more,
// streaming each to stdout; returns how many were generated. t_prefill: when the prefill
// ended (now_seconds); stats: speculative decoding's numbers.
static int generate(Run *g, const Tokenizer *tok, Sampler *sampler, int *tokens, double *t_prefill, SpecStats *stats) {
    Error err;
    if (session_prefill(&g->session, tokens, g->n_prompt, NULL, &err)) die("%s", err.msg);
    if (g->draft && session_prefill(&g->draft_session, tokens, g->n_prompt, NULL, &err)) die("%s", err.msg);
    *t_prefill = now_seconds();
    Printer printer = {.tok = tok, .session = g->speculative ? NULL : &g->session, .tokens = tokens,
                       .n = g->n_prompt};
    int generated;
    if (g->speculative) {
        Speculative sd;
        SpecParams sp = spec_params_default();
        sp.gamma = (int)gamma_arg;
        if (speculative_init(&sd, &g->session, g->draft ? &g->draft_session : NULL, sampler, &sp, &err))
            die("%s", err.msg);
        generated = speculative_generate(&sd, tokens, g->n_prompt, (int)n_tokens, print_token, &printer, &err);
        *stats = sd.stats;
        speculative_free(&sd);
    } else {
        generated = session_generate(&g->session, sampler, tokens, g->n_prompt, (int)n_tokens, print_token, &printer,
                                     &err);
    }
    if (generated < 0) die("sampling at position %d: %s", printer.n, err.msg);
    if (!printer.stopped) fwrite(printer.held, 1, printer.n_held, stdout); // a stop string's start, never finished
    free(printer.held);
    return generated;
}

// The same number of tokens by plain decoding, from a fresh prefill of the prompt and a fresh
// sampler of the same seed, into plain (n_prompt + n): returns the seconds its decoding took.
static double plain_baseline(Run *g, const SamplerParams *params, int *plain, int n) {
    Sampler sampler;
    Error err;
    if (sampler_init(&sampler, g->model->config.vocab_size, params, &err)) die("%s", err.msg);
    session_truncate(&g->session, 0);
    if (session_prefill(&g->session, plain, g->n_prompt, NULL, &err)) die("%s", err.msg);
    double t0 = now_seconds();
    if (session_generate(&g->session, &sampler, plain, g->n_prompt, n, NULL, NULL, &err) != n) die("%s", err.msg);
    double seconds = now_seconds() - t0;
    sampler_free(&sampler);
    return seconds;
}

// llama.cpp's `speculative` summary, the plain baseline's speed-up, and at T = 0 the check
// that speculative output is plain greedy output. Returns the exit status.
static int report_speculative(Run *g, const SamplerParams *params, const int *tokens, int generated,
                              const SpecStats *st, double spec_s) {
    int V = g->model->config.vocab_size;
    fprintf(stderr, "speculative: %s, gamma %ld: n_drafted = %ld, n_accept = %ld, accept = %.3f%%, "
            "mean accepted length = %.3f tokens per target call (%ld steps)\n",
            g->draft ? draft_path : "prompt lookup", gamma_arg, st->drafted, st->accepted,
            100.0 * speculative_acceptance_rate(st), speculative_mean_accepted_len(st), st->steps);
    fprintf(stderr, "speculative: draft %.3f s (%ld forwards), target %.3f s (%ld forwards)\n", st->draft_s,
            st->draft_calls, st->target_s, st->target_calls);
    int *plain = mallocCheck((size_t)(g->n_prompt + (generated > 0 ? generated : 1)) * sizeof(int));
    memcpy(plain, tokens, (size_t)g->n_prompt * sizeof(int));
    double plain_s = generated > 0 ? plain_baseline(g, params, plain, generated) : 0.0;
    fprintf(stderr, "speculative: %d tokens in %.3f s, %.1f tok/s; plain decoding of as many: %.3f s, %.1f tok/s; "
            "speed-up %.2fx\n", generated, spec_s, generated / spec_s, plain_s, generated / plain_s, plain_s / spec_s);
    int status = 0;
    for (int i = 0; params->temperature == 0 && i < generated; i++) {
        int at = g->n_prompt + i;
        if (plain[at] == tokens[at]) continue;
        Error err;
        session_truncate(&g->session, 0); // plain decoding's logits before token i
        if (session_prefill(&g->session, plain, g->n_prompt, NULL, &err)) die("%s", err.msg);
        for (int j = g->n_prompt; j < at; j++)
            if (session_decode(&g->session, plain[j], &err)) die("%s", err.msg);
        fprintf(stderr, "speculative: ERROR: at T = 0, generated token %d is %d, plain greedy decoding's %d (the "
                "target's top-2 logit margin there: %.3g)\n", i, tokens[at], plain[at],
                speculative_top2_margin(g->session.logits, V));
        status = 1;
        break;
    }
    if (params->temperature == 0 && status == 0)
        fprintf(stderr, "speculative: the same %d tokens as plain greedy decoding\n", generated);
    free(plain);
    return status;
}

static void print_running_ppl(void *ctx, int chunk, double ppl) {
    (void)ctx;
    printf("[%d]%.4f,", chunk, ppl);
    fflush(stdout);
}

// --perplexity (see the header): prints the running estimate after each chunk, as
// llama-perplexity does ("[1]x,[2]y,..."), then the chunk count and PPL.
static void perplexity(Model *m, const Tokenizer *tok) {
    size_t n;
    Error err;
    int *tokens = tokenizer_encode_file(tok, perplexity_path, &n, &err);
    if (!tokens) die("%s", err.msg);
    int ctx = ppl_ctx > 0 ? (int)ppl_ctx : m->config.seq_len;
    if (ctx > m->config.seq_len) die("--ctx %d exceeds the model's context of %d tokens", ctx, m->config.seq_len);
    if (ctx < 2 || n < 2 * (size_t)ctx)
        die("%s: %zu tokens; --perplexity needs at least 2 chunks of --ctx %d (>= 2) tokens", perplexity_path, n, ctx);
    size_t n_chunks = n / (size_t)ctx;
    if (ppl_chunks > 0 && (size_t)ppl_chunks < n_chunks) n_chunks = (size_t)ppl_chunks;
    Engine e;
    Session s;
    engine_open(&e, m, ops_cpu(), DTYPE_F32, ctx < 512 ? ctx : 512, ctx);
    session_open(&s, &e, ctx);
    double ppl = session_perplexity(&s, tokens, ctx, (int)n_chunks, tok->add_bos ? tok->bos_id : -1,
                                    print_running_ppl, NULL, &err);
    if (ppl < 0) die("%s", err.msg);
    printf("\nperplexity: %s, %zu tokens, %zu chunks of %d, %zu tokens scored: PPL = %.4f (%.9g)\n", perplexity_path,
           n, n_chunks, ctx, n_chunks * (size_t)(ctx - 1 - ctx / 2), ppl, ppl);
    session_close(&s);
    engine_close(&e);
    free(tokens);
}

static int run(LabRun *r) {
    (void)r;
    void *breakers, *biases;
    SamplerParams params = sampler_params(NULL, &breakers, &biases); // options checked before the model loads
    Error err;
    if (sampler_params_validate(&params, &err) != 0) sampler_usage_error(err.msg);
    free(biases);
    if (draft_path && lookup) cli_usage_error("generate", "--draft and --lookup are two drafts: give one");
    if ((draft_path || lookup) && n_probs > 0)
        cli_usage_error("generate", "--n-probs reads plain decoding's logits: not with --draft or --lookup");
    if (stop && !stop[0]) cli_usage_error("generate", "--stop needs a non-empty text");
    Model model, draft;
    Tokenizer tok;
    if (checkpoint_load(model_path, tokenizer_path, &model, &tok, &err) != 0) die("%s", err.msg);
    const Config *c = &model.config;
    if (perplexity_path) {
        perplexity(&model, &tok);
        tokenizer_free(&tok);
        model_free(&model);
        return 0;
    }
    if (rope_scaling) { // YaRN's ramp counts rotations over the context the model was trained at
        int trained = c->rope.orig_ctx > 0 ? c->rope.orig_ctx : c->seq_len;
        if (rope_override(&model.config.rope, rope_scaling, rope_factor, trained, &err))
            cli_usage_error("generate", err.msg);
        model.config.seq_len = (int)(trained * rope_factor);
    }
    if (draft_path) {
        if (checkpoint_load(draft_path, NULL, &draft, NULL, &err) != 0) die("%s", err.msg);
        if (draft.config.vocab_size != c->vocab_size)
            die("draft %s has a vocabulary of %d tokens, the model %s one of %d", draft_path,
                draft.config.vocab_size, model_path, c->vocab_size);
    }

    // --chat: the prompt as one user turn, the assistant's opened; the template's special tokens
    // are tokens (llama.cpp's parse_special)
    char *text = chat ? chat_format_user(chat_template_for(&tok), prompt) : NULL;
    if (chat && !text) die("%s: the lab knows no chat template for this model", model_path);
    const char *input = chat ? text : prompt;
    size_t prompt_len = strlen(input);
    unsigned flags = (tok.add_bos ? TOKENIZER_ADD_BOS : 0) | (chat ? TOKENIZER_PARSE_SPECIAL : 0);
    int *tokens = mallocCheck((tokenizer_max_tokens(prompt_len) + n_tokens + SPEC_MAX_GAMMA) * sizeof(int));
    int n_prompt = (int)tokenizer_tokenize(&tok, (const unsigned char *)input, prompt_len, flags, tokens);
    free(text);
    if (n_prompt == 0) cli_usage_error("generate", "this model adds no BOS: give a --prompt to start from");
    // The last token sampled is never fed back, so the cache needs one position less.
    long capacity = n_prompt + (n_tokens > 0 ? n_tokens - 1 : 0);
    if (capacity > c->seq_len)
        die("prompt (%d tokens) + -n %ld exceeds the model's context of %d tokens", n_prompt, n_tokens, c->seq_len);
    params = sampler_params(&tok, &breakers, &biases);
    Sampler sampler;
    if (sampler_init(&sampler, c->vocab_size, &params, &err) != 0) sampler_usage_error(err.msg);
    free(breakers);
    free(biases);

    Run g = {.model = &model, .draft = draft_path ? &draft : NULL, .speculative = draft_path || lookup,
             .n_prompt = n_prompt, .capacity = (int)capacity};
    run_open(&g);
    // Echo the prompt as the tokenizer reads it back (a BOS prints nothing; a model without
    // one starts with a word), then stream the continuation.
    for (int i = 0; i < n_prompt; i++) print_piece(&tok, i ? tokens[i - 1] : -1, tokens[i]);
    double t0 = now_seconds(), t1;
    SpecStats stats;
    int generated = generate(&g, &tok, &sampler, tokens, &t1, &stats);
    double t2 = now_seconds();
    putchar('\n');
    fflush(stdout);
    fprintf(stderr, "prompt: %d tokens, %.1f tok/s | decode: %d tokens, %.1f tok/s | decode threads: %d of %d "
                    "(%ld switches)\n", n_prompt, n_prompt / (t1 - t0), generated,
            generated > 1 ? (generated - 1) / (t2 - t1) : 0.0, g.governor.threads, g.governor.max_threads,
            g.governor.switches);
    int status = g.speculative ? report_speculative(&g, &params, tokens, generated, &stats, t2 - t1) : 0;

    run_close(&g);
    free(tokens);
    sampler_free(&sampler);
    tokenizer_free(&tok);
    if (draft_path) model_free(&draft);
    model_free(&model);
    return status;
}

static const Experiment GENERATE = {
    "generate", "--model FILE [options]", "Generate text from a checkpoint, streamed to stdout.", OPTIONS, NULL,
    LAB_THREADS, NULL, run};

int main(int argc, char **argv) { return lab_main(&GENERATE, argc, argv); }
