// fuzz_tokenizer_vocab.c: libFuzzer target for the foreign-vocabulary tokenizer paths
// (experiments/formats/tokenizer_vocab.c, tokenizer.c, unicode.c, chat.c): llama.cpp's BPE with
// the Unicode pre-split and invalid UTF-8, its SentencePiece, the special-token cut, decoding,
// and the vocabulary builder itself.
// Input: byte 0 picks the mode.
//  - even: text. The rest is tokenized (byte 0's bits: special tokens parsed, BOS, EOS) with
//    fixed vocabularies: a hand-made "gpt2" and "llama" one (built at start-up), and the real
//    SmolLM2 and Gemma files when `make real-models` has placed them (FUZZ_REAL_MODELS=0 skips
//    them). Every id must be in range, the count within tokenizer_max_tokens (len + 3 on valid
//    UTF-8), a second run identical; then decode, the chat formatter and template detection.
//  - odd: a vocabulary. The input is read as {model, pre, flags} then tokens {u8 type, u8 len,
//    bytes, i8 score} and merges {u8 len, bytes}; what tokenizer_from_vocab accepts is used on
//    a fixed text and on the input itself.
// An error return is fine; a crash, leak, hang, UB report or broken invariant (abort) is a bug.
// Run: make fuzz (or build-fuzz/fuzz_tokenizer_vocab -runs=N after `make build-fuzz/fuzz_tokenizer_vocab`).
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "chat.h"
#include "tokenizer_gguf.h"

#define MAX_TOKENS 512
#define MAX_MERGES 256

static Tokenizer fixed[4];
static int n_fixed;

static const char *const GPT2_TOKENS[] = {"<|endoftext|>", "<|im_start|>", "<|im_end|>", "a", "b", "c", "\xc4\xa0", "1", "2",
                                          "\xc3\xa9", "\xc4\x8a", "ab", "\xc4\xa0" "a", "abc", "12", "\xc3\xaf\xc2\xbf\xc2\xbd",
                                          "x\xe2\x98\x85", "<", ">", "'s"};
static const char *const GPT2_MERGES[] = {"a b", "\xc4\xa0 a", "ab c", "\xc4\xa0 c", "a b", "xy", "1 2", "' s",
                                          "\xc3\xaf \xc2\xbf", "\xc3\xaf\xc2\xbf \xc2\xbd", "\xc4\x8a \xc4\x8a", "c c"};

static void add_hand_vocabularies(void) {
    TokenizerVocab v = tokenizer_vocab_empty();
    size_t lens[64];
    int types[64];
    int n = (int)(sizeof GPT2_TOKENS / sizeof GPT2_TOKENS[0]), m = (int)(sizeof GPT2_MERGES / sizeof GPT2_MERGES[0]);
    size_t mlens[64];
    for (int i = 0; i < n; i++) lens[i] = strlen(GPT2_TOKENS[i]), types[i] = i < 3 ? 3 : 1;
    for (int i = 0; i < m; i++) mlens[i] = strlen(GPT2_MERGES[i]);
    v.model = "gpt2", v.model_len = 4, v.pre = "smollm", v.pre_len = 6;
    v.n_tokens = n, v.tokens = (const unsigned char *const *)GPT2_TOKENS, v.token_lens = lens;
    v.token_types = types, v.n_token_types = (size_t)n;
    v.n_merges = m, v.merges = (const unsigned char *const *)GPT2_MERGES, v.merge_lens = mlens;
    v.eos_id = 2;
    Error err;
    if (tokenizer_from_vocab(&fixed[n_fixed++], &v, &err)) abort();

    static char texts[300][16];
    static const char *ptrs[300];
    static size_t slens[300];
    static int stypes[300];
    static float scores[300];
    int k = 0;
    const char *head[] = {"<unk>", "<s>", "</s>"};
    for (; k < 3; k++) snprintf(texts[k], sizeof texts[k], "%s", head[k]), stypes[k] = k == 0 ? 2 : 3;
    for (int b = 0; b < 256; b++, k++) snprintf(texts[k], sizeof texts[k], "<0x%02X>", b), stypes[k] = 6;
    const char *pieces[] = {"\xe2\x96\x81", "a", "b", "\xe2\x96\x81" "a", "ab", "aa", "\xe2\x96\x81\xe2\x96\x81",
                            "\xc3\xa9", "<u>", "\n\n", "<ctl>", "<unused3>", "<end_of_turn>"};
    for (int i = 0; i < 13; i++, k++) {
        snprintf(texts[k], sizeof texts[k], "%s", pieces[i]);
        stypes[k] = i == 8 || i == 9 ? 4 : i >= 10 ? 3 : 1;
        scores[k] = -(float)(i % 5);
    }
    for (int i = 0; i < k; i++) ptrs[i] = texts[i], slens[i] = strlen(texts[i]);
    v = tokenizer_vocab_empty();
    v.model = "llama", v.model_len = 5;
    v.n_tokens = k, v.tokens = (const unsigned char *const *)ptrs, v.token_lens = slens;
    v.token_types = stypes, v.n_token_types = (size_t)k, v.scores = scores, v.n_scores = (size_t)k;
    v.add_space_prefix = 1;
    if (tokenizer_from_vocab(&fixed[n_fixed++], &v, &err)) abort();
}

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc, (void)argv;
    add_hand_vocabularies();
    const char *real = getenv("FUZZ_REAL_MODELS");
    if (real && strcmp(real, "0") == 0) return 0;
    const char *files[] = {"out/models/real/smollm2-135m-instruct-q4_1.gguf", "out/models/real/gemma-3-270m-q4_k_m.gguf"};
    for (int i = 0; i < 2; i++) {
        Error err;
        if (tokenizer_load_gguf(&fixed[n_fixed], files[i], &err) == 0) n_fixed++;
    }
    return 0;
}

static int valid_utf8(const uint8_t *s, size_t n) {
    for (size_t i = 0; i < n;) {
        unsigned b = s[i], need = b < 0x80 ? 1 : b >= 0xC2 && b < 0xE0 ? 2 : b >= 0xE0 && b < 0xF0 ? 3 : b >= 0xF0 && b < 0xF5 ? 4 : 0;
        if (!need || i + need > n) return 0;
        for (unsigned k = 1; k < need; k++)
            if ((s[i + k] & 0xC0) != 0x80) return 0;
        i += need;
    }
    return 1;
}

static void exercise(const Tokenizer *t, const uint8_t *data, size_t size, unsigned flags) {
    size_t cap = tokenizer_max_tokens(size);
    int *ids = malloc(cap * sizeof *ids), *again = malloc(cap * sizeof *again);
    size_t n = tokenizer_tokenize(t, data, size, flags, ids);
    if (n > cap || (valid_utf8(data, size) && n > size + 3)) abort();
    for (size_t i = 0; i < n; i++)
        if (ids[i] < 0 || ids[i] >= t->vocab_size) abort();
    if (tokenizer_tokenize(t, data, size, flags, again) != n || (n && memcmp(ids, again, n * sizeof *ids) != 0)) abort();
    size_t len;
    free(tokenizer_decode(t, ids, n, &len));
    free(ids);
    free(again);
}

static const unsigned char TEXT[] = "Hello world, it's 2024! caf\xc3\xa9 \xff\xc0\xaf \xe2\x96\x81 <|im_end|><u>\n\n\tx  y";

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size == 0) return 0;
    unsigned mode = data[0];
    const uint8_t *p = data + 1;
    size_t n = size - 1;
    if ((mode & 1) == 0) {
        unsigned flags = (mode & 2 ? TOKENIZER_PARSE_SPECIAL : 0) | (mode & 4 ? TOKENIZER_ADD_BOS : 0) |
                         (mode & 8 ? TOKENIZER_ADD_EOS : 0);
        for (int i = 0; i < n_fixed; i++) exercise(&fixed[i], p, n, flags);
        char *s = malloc(n + 1);
        for (size_t i = 0; i < n; i++) s[i] = p[i] ? (char)p[i] : ' ';
        s[n] = '\0';
        ChatTemplate kind = chat_template_detect(s);
        ChatMessage msgs[2] = {{"system", s}, {"user", s}};
        free(chat_apply(mode & 16 ? CHAT_GEMMA : CHAT_CHATML, msgs, 2, true));
        (void)kind;
        if (n_fixed > 0 && tokenizer_find_token(&fixed[0], s) < -1) abort();
        free(s);
        return 0;
    }
    // a vocabulary from the input
    if (n < 3) return 0;
    TokenizerVocab v = tokenizer_vocab_empty();
    v.model = p[0] & 1 ? "gpt2" : "llama";
    v.model_len = strlen(v.model);
    static const char *const pres[] = {"smollm", "starcoder", "gpt-2", "qwen2"};
    if (p[0] & 2) v.pre = pres[p[0] >> 2 & 3], v.pre_len = strlen(v.pre);
    unsigned fl = p[1];
    v.add_bos = fl & 1 ? (fl >> 1 & 1) : -1;
    v.add_space_prefix = fl & 4 ? (fl >> 3 & 1) : -1;
    v.bos_id = fl & 16 ? p[2] % 16 : -1;
    v.eos_id = fl & 32 ? p[2] / 16 : -1;
    size_t at = 3;
    const unsigned char **tokens = malloc(MAX_TOKENS * sizeof *tokens), **merges = malloc(MAX_MERGES * sizeof *merges);
    size_t *lens = malloc(MAX_TOKENS * sizeof *lens), *mlens = malloc(MAX_MERGES * sizeof *mlens);
    int *types = malloc(MAX_TOKENS * sizeof *types), nt = 0, nm = 0;
    float *scores = malloc(MAX_TOKENS * sizeof *scores);
    while (nt < MAX_TOKENS && at + 2 <= n) {
        unsigned type = p[at], len = p[at + 1] & 15;
        if (type == 0xFF) { // merges follow
            at += 1;
            break;
        }
        if (at + 2 + len + 1 > n) break;
        types[nt] = (int)(type % 8);
        tokens[nt] = p + at + 2;
        lens[nt] = len;
        scores[nt] = (float)(int8_t)p[at + 2 + len];
        nt++;
        at += 2 + len + 1;
    }
    while (nm < MAX_MERGES && at + 1 <= n) {
        unsigned len = p[at] & 15;
        if (at + 1 + len > n) break;
        merges[nm] = p + at + 1;
        mlens[nm] = len;
        nm++;
        at += 1 + len;
    }
    v.n_tokens = nt, v.tokens = tokens, v.token_lens = lens;
    if (fl & 64) v.token_types = types, v.n_token_types = (size_t)nt;
    if (!(fl & 128)) v.scores = scores, v.n_scores = (size_t)nt;
    if (p[0] & 1) v.merges = merges, v.merge_lens = mlens, v.n_merges = nm;
    Tokenizer t;
    Error err;
    if (tokenizer_from_vocab(&t, &v, &err) == 0) {
        exercise(&t, TEXT, sizeof TEXT - 1, TOKENIZER_PARSE_SPECIAL | TOKENIZER_ADD_BOS | TOKENIZER_ADD_EOS);
        exercise(&t, data, size, 0);
        tokenizer_free(&t);
    }
    free(tokens), free(merges), free(lens), free(mlens), free(types), free(scores);
    return 0;
}
