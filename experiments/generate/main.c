// generate/main.c: bin/generate, text generation from a checkpoint, streamed to stdout.
//
//   bin/generate --model out/models/target.gguf --prompt "In the beginning" -n 128 --temperature 0.8
//   bin/generate --model stories15M.bin --tokenizer tokenizer.bin --prompt "Once upon a time" -n 256
//
// GGUF checkpoints carry their tokenizer; llama2.c checkpoints (.bin) need --tokenizer.
// The prompt is prefilled in one pass, then each new token is one decode step against
// the KV cache. Prompt and decode tokens/s go to stderr at the end.
#include <float.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"
#include "checkpoint.h"
#include "lab.h"
#include "session.h"
#include "tokenizer.h"

static const char *model_path, *tokenizer_path, *prompt = "";
static long n_tokens, top_k;
static double temperature, top_p, min_p, repeat_penalty, presence_penalty, frequency_penalty;
static uint64_t seed;
static int ignore_eos;

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
    {.name = "seed", .kind = LAB_U64, .value = &seed, .arg = "S", .help = "sampler seed", .def = "42"},
    {.name = "ignore-eos", .kind = LAB_FLAG, .value = &ignore_eos,
     .help = "keep generating past the end-of-sequence token"},
    {0},
};

static SamplerParams sampler_params(void) {
    SamplerParams p = sampler_params_default();
    p.temperature = (float)temperature;
    p.top_k = (int)top_k;
    p.top_p = (float)top_p;
    p.min_p = (float)min_p;
    p.repetition_penalty = (float)repeat_penalty;
    p.presence_penalty = (float)presence_penalty;
    p.frequency_penalty = (float)frequency_penalty;
    p.seed = seed;
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
typedef struct {
    const Tokenizer *tok;
    const int *tokens; // the sequence so far, as session_generate appends to it
    int n;             // its length before the token being printed
} Printer;

static int print_token(void *ctx, int next) {
    Printer *p = ctx;
    const Tokenizer *tok = p->tok;
    bool end = next == tok->eos_id || (tok->kind == TOKENIZER_LLAMA2C && next == tok->bos_id);
    if (!ignore_eos && end) return 1;
    print_piece(tok, p->tokens[p->n - 1], next);
    fflush(stdout);
    p->n++;
    return 0;
}

// Prefill tokens (n_prompt), then sample and decode up to n_tokens more, streaming each to
// stdout; returns how many were generated. t_prefill: when the prefill ended (now_seconds).
static int generate(Model *model, const Tokenizer *tok, Sampler *sampler, int *tokens, int n_prompt,
                    int capacity, double *t_prefill) {
    Engine engine;
    Session session;
    Error err;
    engine_open(&engine, model, ops_cpu(), DTYPE_F32, n_prompt < 512 ? n_prompt : 512, capacity);
    session_open(&session, &engine, capacity);
    if (session_prefill(&session, tokens, n_prompt, NULL, &err)) die("%s", err.msg);
    *t_prefill = now_seconds();
    Printer printer = {tok, tokens, n_prompt};
    int generated = session_generate(&session, sampler, tokens, n_prompt, (int)n_tokens, print_token, &printer, &err);
    if (generated < 0) die("sampling at position %d: %s", printer.n, err.msg);
    session_close(&session);
    engine_close(&engine);
    return generated;
}

static int run(LabRun *r) {
    (void)r;
    SamplerParams params = sampler_params();
    Error err;
    if (sampler_params_validate(&params, &err) != 0) cli_usage_error("generate", err.msg);
    Model model;
    Tokenizer tok;
    if (checkpoint_load(model_path, tokenizer_path, &model, &tok, &err) != 0) die("%s", err.msg);
    const Config *c = &model.config;

    size_t prompt_len = strlen(prompt);
    int *tokens = mallocCheck((tokenizer_max_tokens(prompt_len) + n_tokens) * sizeof(int));
    int n_prompt = (int)tokenizer_encode(&tok, (const unsigned char *)prompt, prompt_len, true, false, tokens);
    // The last token sampled is never fed back, so the cache needs one position less.
    long capacity = n_prompt + (n_tokens > 0 ? n_tokens - 1 : 0);
    if (capacity > c->seq_len)
        die("prompt (%d tokens) + -n %ld exceeds the model's context of %d tokens", n_prompt, n_tokens, c->seq_len);
    Sampler sampler;
    if (sampler_init(&sampler, c->vocab_size, &params, &err) != 0) die("%s", err.msg);

    // Echo the prompt as the tokenizer reads it back, then stream the continuation.
    for (int i = 1; i < n_prompt; i++) print_piece(&tok, tokens[i - 1], tokens[i]);
    double t0 = now_seconds(), t1;
    int generated = generate(&model, &tok, &sampler, tokens, n_prompt, (int)capacity, &t1);
    double t2 = now_seconds();
    putchar('\n');
    fprintf(stderr, "prompt: %d tokens, %.1f tok/s | decode: %d tokens, %.1f tok/s\n", n_prompt,
            n_prompt / (t1 - t0), generated, generated > 1 ? (generated - 1) / (t2 - t1) : 0.0);

    free(tokens);
    sampler_free(&sampler);
    tokenizer_free(&tok);
    model_free(&model);
    return 0;
}

static const Experiment GENERATE = {
    "generate", "--model FILE [options]", "Generate text from a checkpoint, streamed to stdout.", OPTIONS, NULL,
    LAB_THREADS, NULL, run};

int main(int argc, char **argv) { return lab_main(&GENERATE, argc, argv); }
