// generate.c: bin/generate, text generation from a checkpoint, streamed to stdout.
//
//   bin/generate --model out/models/target.gguf --prompt "In the beginning" -n 128 --temperature 0.8
//   bin/generate --model stories15M.bin --tokenizer tokenizer.bin --prompt "Once upon a time" -n 256
//
// GGUF checkpoints carry their tokenizer; llama2.c checkpoints (.bin) need --tokenizer.
// The prompt is prefilled in one pass, then each new token is one decode step against
// the KV cache. Prompt and decode tokens/s go to stderr at the end.
#include <getopt.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"
#include "common.h"
#include "checkpoint.h"
#include "kernels.h"
#include "session.h"
#include "tokenizer.h"

typedef struct {
    const char *model_path, *tokenizer_path, *prompt;
    int n_tokens, threads;
    bool ignore_eos;
    SamplerParams sampling;
} Options;

static void usage(FILE *f) {
    fputs("usage: bin/generate --model FILE [options]\n"
          "  --model FILE          GGUF checkpoint, or llama2.c .bin (then --tokenizer is needed)\n"
          "  --tokenizer FILE      llama2.c tokenizer.bin\n"
          "  --prompt TEXT         prompt (default empty: start from BOS alone)\n"
          "  -n, --n-tokens N      tokens to generate (default 128)\n"
          "  --temperature T       0 = greedy (default 1)\n"
          "  --top-k K             keep the K most likely tokens (0 = off)\n"
          "  --top-p P             nucleus sampling, P in (0, 1] (1 = off)\n"
          "  --min-p M             drop tokens below M x the top probability (0 = off)\n"
          "  --repeat-penalty R    CTRL repetition penalty (1 = off)\n"
          "  --presence-penalty X, --frequency-penalty X   OpenAI-style penalties (0 = off)\n"
          "  --seed S              sampler seed (default 42)\n"
          "  --threads N           threads for kernels (default: all cores)\n"
          "  --ignore-eos          keep generating past the end-of-sequence token\n"
          "  -h, --help            this text\n",
          f);
}

static double parse_number(const char *opt, const char *s) {
    char *end;
    double v = strtod(s, &end);
    if (end == s || *end != '\0') die("option --%s: '%s' is not a number", opt, s);
    return v;
}

static int parse_int(const char *opt, const char *s) {
    double v = parse_number(opt, s);
    if (v != (int)v) die("option --%s: '%s' is not an integer", opt, s);
    return (int)v;
}

static Options parse_options(int argc, char **argv) {
    Options o = {.prompt = "", .n_tokens = 128};
    o.sampling = sampler_params_default();
    static const struct option longs[] = {
        {"model", required_argument, 0, 'm'},       {"tokenizer", required_argument, 0, 'z'},
        {"prompt", required_argument, 0, 'p'},      {"n-tokens", required_argument, 0, 'n'},
        {"temperature", required_argument, 0, 't'}, {"top-k", required_argument, 0, 'k'},
        {"top-p", required_argument, 0, 'P'},       {"min-p", required_argument, 0, 'M'},
        {"repeat-penalty", required_argument, 0, 'r'}, {"presence-penalty", required_argument, 0, 'e'},
        {"frequency-penalty", required_argument, 0, 'f'}, {"seed", required_argument, 0, 's'},
        {"threads", required_argument, 0, 'j'},     {"ignore-eos", no_argument, 0, 'E'},
        {"help", no_argument, 0, 'h'},              {0, 0, 0, 0}};
    int c, idx;
    while ((c = getopt_long(argc, argv, "n:h", longs, &idx)) != -1) {
        const char *name = c == 'n' ? "n-tokens" : (c == '?' ? "" : longs[idx].name);
        switch (c) {
        case 'm': o.model_path = optarg; break;
        case 'z': o.tokenizer_path = optarg; break;
        case 'p': o.prompt = optarg; break;
        case 'n': o.n_tokens = parse_int(name, optarg); break;
        case 't': o.sampling.temperature = (float)parse_number(name, optarg); break;
        case 'k': o.sampling.top_k = parse_int(name, optarg); break;
        case 'P': o.sampling.top_p = (float)parse_number(name, optarg); break;
        case 'M': o.sampling.min_p = (float)parse_number(name, optarg); break;
        case 'r': o.sampling.repetition_penalty = (float)parse_number(name, optarg); break;
        case 'e': o.sampling.presence_penalty = (float)parse_number(name, optarg); break;
        case 'f': o.sampling.frequency_penalty = (float)parse_number(name, optarg); break;
        case 's': o.sampling.seed = (uint64_t)parse_number(name, optarg); break;
        case 'j': o.threads = parse_int(name, optarg); break;
        case 'E': o.ignore_eos = true; break;
        case 'h': usage(stdout); exit(0);
        default: usage(stderr); exit(2);
        }
    }
    if (optind < argc) die("unexpected argument '%s' (see --help)", argv[optind]);
    if (!o.model_path) die("--model is required (see --help)");
    if (o.n_tokens < 0) die("option -n: %d is negative", o.n_tokens);
    if (o.threads < 0) die("option --threads: %d is negative", o.threads);
    Error err;
    if (sampler_params_validate(&o.sampling, &err) != 0) die("%s", err.msg);
    return o;
}

// Streams each generated token to stdout as it arrives; stops at an end token unless
// --ignore-eos. llama2.c's stories delimit sequences with BOS, and run.c stops on it too.
typedef struct {
    const Tokenizer *tok;
    const int *tokens; // the sequence so far, as session_generate appends to it
    int n;             // tokens printed so far
    bool ignore_eos;
} Printer;

static int print_token(void *ctx, int next) {
    Printer *p = ctx;
    const Tokenizer *tok = p->tok;
    bool end = next == tok->eos_id || (tok->kind == TOKENIZER_LLAMA2C && next == tok->bos_id);
    if (!p->ignore_eos && end) return 1;
    size_t len;
    const unsigned char *piece = tokenizer_piece(tok, p->tokens[p->n - 1], next, &len);
    fwrite(piece, 1, len, stdout);
    fflush(stdout);
    p->n++;
    return 0;
}

int main(int argc, char **argv) {
    Options o = parse_options(argc, argv);
    kernels_set_threads(o.threads);

    Model model;
    Tokenizer tok;
    Error err;
    if (checkpoint_load(o.model_path, o.tokenizer_path, &model, &tok, &err) != 0) die("%s", err.msg);
    const Config *c = &model.config;

    size_t prompt_len = strlen(o.prompt);
    int *tokens = mallocCheck((tokenizer_max_tokens(prompt_len) + o.n_tokens) * sizeof(int));
    int n_prompt = (int)tokenizer_encode(&tok, (const unsigned char *)o.prompt, prompt_len, true, false, tokens);
    // The last token sampled is never fed back, so the cache needs one position less.
    int capacity = n_prompt + (o.n_tokens > 0 ? o.n_tokens - 1 : 0);
    if (capacity > c->seq_len)
        die("prompt (%d tokens) + -n %d exceeds the model's context of %d tokens", n_prompt, o.n_tokens,
            c->seq_len);

    Sampler sampler;
    if (sampler_init(&sampler, c->vocab_size, &o.sampling, &err) != 0) die("%s", err.msg);
    Engine engine;
    Session session;
    engine_open(&engine, &model, ops_cpu(), DTYPE_F32, n_prompt < 512 ? n_prompt : 512, capacity);
    session_open(&session, &engine, capacity);

    // Echo the prompt as the tokenizer reads it back, then stream the continuation.
    for (int i = 1; i < n_prompt; i++) {
        size_t len;
        const unsigned char *piece = tokenizer_piece(&tok, tokens[i - 1], tokens[i], &len);
        fwrite(piece, 1, len, stdout);
    }
    double t0 = now_seconds();
    if (session_prefill(&session, tokens, n_prompt, NULL, &err)) die("%s", err.msg);
    double t1 = now_seconds();
    Printer printer = {&tok, tokens, n_prompt, o.ignore_eos};
    int generated = session_generate(&session, &sampler, tokens, n_prompt, o.n_tokens, print_token, &printer, &err);
    if (generated < 0) die("sampling at position %d: %s", printer.n, err.msg);
    double t2 = now_seconds();
    putchar('\n');
    fprintf(stderr, "prompt: %d tokens, %.1f tok/s | decode: %d tokens, %.1f tok/s\n", n_prompt,
            n_prompt / (t1 - t0), generated, generated > 1 ? (generated - 1) / (t2 - t1) : 0.0);

    free(tokens);
    session_close(&session);
    engine_close(&engine);
    sampler_free(&sampler);
    tokenizer_free(&tok);
    model_free(&model);
    return 0;
}
