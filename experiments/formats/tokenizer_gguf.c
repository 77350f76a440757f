// tokenizer_gguf.c: the tokenizer.* metadata of a GGUF file as a TokenizerVocab, built with
// tokenizer_from_vocab (see tokenizer_gguf.h).
#include "tokenizer_gguf.h"

#include <limits.h>
#include <stdlib.h>
#include <string.h>

// An id key: its value (an out-of-range one is passed on for tokenizer_from_vocab to ignore),
// or `absent` when the file lacks it. -2 on a key of the wrong type.
static long long id_key(const GGUFFile *g, const char *key, long long absent, Error *err) {
    if (!gguf_find_kv(g, key)) return absent;
    int64_t v;
    if (gguf_get_int(g, key, &v, err)) return -2;
    return v < 0 ? LLONG_MAX : (long long)v; // negative: out of range, like a u32 past the vocabulary
}

static int flag_key(const GGUFFile *g, const char *key, int *out, Error *err) {
    *out = -1;
    return gguf_find_kv(g, key) ? gguf_get_bool(g, key, out, err) : 0;
}

typedef struct {
    GGUFString *tokens, *merges;
    const unsigned char **tok_s, **merge_s;
    size_t *tok_len, *merge_len;
    float *scores;
    int32_t *types;
} Arrays;

static void arrays_free(Arrays *a) {
    free(a->tokens), free(a->merges), free(a->tok_s), free(a->merge_s), free(a->tok_len), free(a->merge_len);
    free(a->scores), free(a->types);
}

static int read_vocab(const GGUFFile *g, TokenizerVocab *v, Arrays *a, Error *err) {
    GGUFString s;
    if (!gguf_find_kv(g, "tokenizer.ggml.model"))
        return error_set(err, "%s: the file holds no tokenizer (no tokenizer.ggml.model)", g->path);
    if (gguf_get_string(g, "tokenizer.ggml.model", &s, err)) return -1;
    v->model = (const char *)s.bytes, v->model_len = s.len;
    if (gguf_find_kv(g, "tokenizer.ggml.pre")) {
        if (gguf_get_string(g, "tokenizer.ggml.pre", &s, err)) return -1;
        v->pre = (const char *)s.bytes, v->pre_len = s.len;
    }
    size_t n;
    if (gguf_get_array_string(g, "tokenizer.ggml.tokens", &a->tokens, &n, err)) return -1;
    if (n > INT_MAX) return error_set(err, "%s: %zu tokens is too many", g->path, n);
    v->n_tokens = (int)n;
    a->tok_s = mallocCheck((n + 1) * sizeof *a->tok_s);
    a->tok_len = mallocCheck((n + 1) * sizeof *a->tok_len);
    for (size_t i = 0; i < n; i++) a->tok_s[i] = a->tokens[i].bytes, a->tok_len[i] = a->tokens[i].len;
    v->tokens = a->tok_s, v->token_lens = a->tok_len;

    const GGUFKV *kv = gguf_find_kv(g, "tokenizer.ggml.scores");
    if (kv) { // llama.cpp takes f32 or i32 scores
        if (kv->type == GGUF_TYPE_ARRAY && kv->elem_type != GGUF_TYPE_FLOAT32 && kv->elem_type != GGUF_TYPE_FLOAT64) {
            int32_t *iv;
            if (gguf_get_array_i32(g, "tokenizer.ggml.scores", &iv, &v->n_scores, err)) return -1;
            a->scores = mallocCheck((v->n_scores + 1) * sizeof *a->scores);
            for (size_t i = 0; i < v->n_scores; i++) a->scores[i] = (float)iv[i];
            free(iv);
        } else if (gguf_get_array_f32(g, "tokenizer.ggml.scores", &a->scores, &v->n_scores, err)) {
            return -1;
        }
        v->scores = a->scores;
    }
    if (gguf_find_kv(g, "tokenizer.ggml.token_type")) {
        if (gguf_get_array_i32(g, "tokenizer.ggml.token_type", &a->types, &v->n_token_types, err)) return -1;
        v->token_types = a->types;
    }
    if (gguf_find_kv(g, "tokenizer.ggml.merges")) {
        if (gguf_get_array_string(g, "tokenizer.ggml.merges", &a->merges, &n, err)) return -1;
        if (n > INT_MAX) return error_set(err, "%s: %zu merges is too many", g->path, n);
        v->n_merges = (int)n;
        a->merge_s = mallocCheck((n + 1) * sizeof *a->merge_s);
        a->merge_len = mallocCheck((n + 1) * sizeof *a->merge_len);
        for (size_t i = 0; i < n; i++) a->merge_s[i] = a->merges[i].bytes, a->merge_len[i] = a->merges[i].len;
        v->merges = a->merge_s, v->merge_lens = a->merge_len;
    }
    struct {
        const char *key;
        long long *id;
    } ids[] = {
        {"tokenizer.ggml.bos_token_id", &v->bos_id},         {"tokenizer.ggml.eos_token_id", &v->eos_id},
        {"tokenizer.ggml.eot_token_id", &v->eot_id},         {"tokenizer.ggml.eom_token_id", &v->eom_id},
        {"tokenizer.ggml.fim_pre_token_id", &v->fim_pre_id}, {"tokenizer.ggml.fim_suf_token_id", &v->fim_suf_id},
        {"tokenizer.ggml.fim_mid_token_id", &v->fim_mid_id}, {"tokenizer.ggml.fim_pad_token_id", &v->fim_pad_id},
        {"tokenizer.ggml.fim_rep_token_id", &v->fim_rep_id}, {"tokenizer.ggml.fim_sep_token_id", &v->fim_sep_id},
        // the older names, read after the fim_* ones as llama.cpp does: an id in range overrides
        {"tokenizer.ggml.prefix_token_id", &v->fim_pre_id},  {"tokenizer.ggml.suffix_token_id", &v->fim_suf_id},
        {"tokenizer.ggml.middle_token_id", &v->fim_mid_id},
    };
    for (size_t i = 0; i < sizeof ids / sizeof ids[0]; i++) {
        long long id = id_key(g, ids[i].key, -1, err);
        if (id == -2) return -1;
        if (id >= 0 && (i < 10 || id < v->n_tokens)) *ids[i].id = id;
    }
    if (flag_key(g, "tokenizer.ggml.add_bos_token", &v->add_bos, err) ||
        flag_key(g, "tokenizer.ggml.add_eos_token", &v->add_eos, err) ||
        flag_key(g, "tokenizer.ggml.add_space_prefix", &v->add_space_prefix, err))
        return -1;
    if (gguf_find_kv(g, "tokenizer.chat_template")) {
        if (gguf_get_string(g, "tokenizer.chat_template", &s, err)) return -1;
        v->chat_template = (const char *)s.bytes, v->chat_template_len = s.len;
    }
    return 0;
}

int tokenizer_read_gguf(Tokenizer *t, const GGUFFile *g, Error *err) {
    memset(t, 0, sizeof *t);
    TokenizerVocab v = tokenizer_vocab_empty();
    Arrays a = {0};
    int rc = read_vocab(g, &v, &a, err);
    if (rc == 0) {
        Error inner;
        rc = tokenizer_from_vocab(t, &v, &inner);
        if (rc) error_set(err, "%s: tokenizer: %s", g->path, inner.msg);
    }
    arrays_free(&a);
    return rc;
}

int tokenizer_load_gguf(Tokenizer *t, const char *path, Error *err) {
    memset(t, 0, sizeof *t);
    GGUFFile g;
    if (gguf_open(&g, path, err)) return -1;
    int rc = tokenizer_read_gguf(t, &g, err);
    gguf_close(&g);
    return rc;
}
