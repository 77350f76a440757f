// tokenizer_vocab.c: a Tokenizer from a vocabulary as GGUF files store it (tokenizer_from_vocab,
// tokenizer.h): the lab's own layouts go to tokenizer_from_gpt2 / tokenizer_from_pieces; a
// foreign "gpt2" or "llama" vocabulary is set up as llama.cpp's llama_vocab::impl::load sets it
// up (src/llama-vocab.cpp): token attributes, special ids and their defaults, the
// end-of-generation set, the pieces its llama_token_to_piece gives, and for BPE the symbols
// and ranked merges of its string-keyed merge table, mapped to integers.
//
// Test: build/tests/test_tokenizer (hand-made vocabularies), build/tests/test_tokenizer_real.
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tokenizer.h"
#include "tokenizer_internal.h"
#include "unicode.h"

#define N_SPECIAL 2 // the lab's BPE: BOS and EOS after the merges
static const char SP_SPACE[] = "\xe2\x96\x81"; // U+2581, SentencePiece's space

TokenizerVocab tokenizer_vocab_empty(void) {
    return (TokenizerVocab){.bos_id = -1,
                            .eos_id = -1,
                            .eot_id = -1,
                            .eom_id = -1,
                            .fim_pre_id = -1,
                            .fim_suf_id = -1,
                            .fim_mid_id = -1,
                            .fim_pad_id = -1,
                            .fim_rep_id = -1,
                            .fim_sep_id = -1,
                            .add_bos = -1,
                            .add_eos = -1,
                            .add_space_prefix = -1};
}

static bool str_is(const char *s, size_t len, const char *c) {
    return s && strlen(c) == len && memcmp(s, c, len) == 0;
}

// ----------------------------------------------------------------------------
// llama.cpp's lists of token texts (llama_vocab::impl::load)

#define FW_BAR "\xef\xbd\x9c" // U+FF5C, DeepSeek's fullwidth bar
#define SP "\xe2\x96\x81"     // U+2581

static const char *const EOT_TEXTS[] = {"<|eot_id|>", "<|im_end|>", "<|end|>", "<end_of_turn>", "<|endoftext|>",
                                        "<|end_of_text|>", "<EOT>", "_<EOT>", "[EOT]",
                                        "<" FW_BAR "end" SP "of" SP "sentence" FW_BAR ">", "<end_of_utterance>", NULL};
static const char *const EOM_TEXTS[] = {"<|eom_id|>", NULL};
static const char *const FIM_PRE_TEXTS[] = {"<|fim_prefix|>", "<fim-prefix>", "<fim_prefix>",
                                            "<" FW_BAR "fim" SP "begin" FW_BAR ">", "<PRE>", SP "<PRE>",
                                            "<|code_prefix|>", "<|prefix|>", NULL};
static const char *const FIM_SUF_TEXTS[] = {"<|fim_suffix|>", "<fim-suffix>", "<fim_suffix>",
                                            "<" FW_BAR "fim" SP "hole" FW_BAR ">", "<SUF>", SP "<SUF>",
                                            "<|code_suffix|>", "<|suffix|>", NULL};
static const char *const FIM_MID_TEXTS[] = {"<|fim_middle|>", "<fim-middle>", "<fim_middle>",
                                            "<" FW_BAR "fim" SP "end" FW_BAR ">", "<MID>", SP "<MID>",
                                            "<|code_middle|>", "<|middle|>", NULL};
static const char *const FIM_PAD_TEXTS[] = {"<|fim_pad|>", "<fim-pad>", "<fim_pad>", "<PAD>", "[PAD]", NULL};
static const char *const FIM_REP_TEXTS[] = {"<|fim_repo|>", "<|repo_name|>", "<fim-repo>", "<REPO>", "<reponame>", NULL};
static const char *const FIM_SEP_TEXTS[] = {"<|file_sep|>", NULL};
static const char *const EOG_TEXTS[] = {"<|eot_id|>", "<|im_end|>", "<|end|>", "<|return|>", "<|call|>", "<|flush|>",
                                        "<|calls|>", "<end_of_turn>", "<|endoftext|>", "</s>", "<|eom_id|>", "<EOT>",
                                        "_<EOT>", "[EOT]", "[EOS]", "<|end_of_text|>", "<end_of_utterance>", "<eos>",
                                        "<turn|>", "<|tool_response>",
                                        "<" FW_BAR "end" SP "of" SP "sentence" FW_BAR ">", "[e~[", NULL};
// gpt-oss's markers, which llama.cpp always renders (user-defined)
static const char *const RENDERED_TEXTS[] = {"<|channel|>", "<|message|>", "<|start|>", "<|constrain|>", NULL};

// The pre-tokenizers llama.cpp splits with the starcoder regexes ("\p{N}", then GPT-2's) or
// GPT-2's alone.
static const char *const STARCODER_PRES[] = {"starcoder", "refact", "command-r", "smollm", "codeshell",
                                             "exaone", "minerva-7b", "mellum2", NULL};
static const char *const GPT2_PRES[] = {"gpt-2", "phi-2", "mpt", "olmo", "jais", "trillion", "granite-docling", NULL};

static bool in_list(const char *s, size_t len, const char *const *list) {
    for (; *list; list++)
        if (str_is(s, len, *list)) return true;
    return false;
}

// ----------------------------------------------------------------------------
// the lab's own vocabularies

static int check_own_id(const char *key, long long file_id, int ours, Error *err) {
    if (file_id >= 0 && file_id != ours)
        return error_set(err, "%s = %lld, but this tokenizer's is %d", key, file_id, ours);
    return 0;
}

static int own_bpe(Tokenizer *t, const TokenizerVocab *v, Error *err) {
    if (tokenizer_from_gpt2(t, v->tokens, v->token_lens, v->n_tokens, v->merges, v->merge_lens, v->n_merges, err))
        return -1;
    if (check_own_id("tokenizer.ggml.bos_token_id", v->bos_id, t->bos_id, err) ||
        check_own_id("tokenizer.ggml.eos_token_id", v->eos_id, t->eos_id, err)) {
        tokenizer_free(t);
        return -1;
    }
    return 0;
}

// A copy of s with every occurrence of `from` replaced by `to` (malloc'd, *out_len bytes).
static unsigned char *replace_all(const unsigned char *s, size_t len, const char *from, const char *to,
                                  size_t *out_len) {
    size_t nf = strlen(from), nt = strlen(to), count = 0;
    for (size_t i = 0; i + nf <= len; i++)
        if (memcmp(s + i, from, nf) == 0) count++, i += nf - 1;
    unsigned char *out = mallocCheck(len + count * nt + 1), *o = out;
    for (size_t i = 0; i < len;) {
        if (i + nf <= len && memcmp(s + i, from, nf) == 0) {
            memcpy(o, to, nt);
            o += nt;
            i += nf;
        } else {
            *o++ = s[i++];
        }
    }
    *out_len = (size_t)(o - out);
    return out;
}

static int own_llama2c(Tokenizer *t, const TokenizerVocab *v, Error *err) {
    if (!v->scores) return error_set(err, "the llama vocabulary has no tokenizer.ggml.scores");
    if (v->n_scores != (size_t)v->n_tokens)
        return error_set(err, "%zu tokenizer scores for %d tokens", v->n_scores, v->n_tokens);
    int n = v->n_tokens;
    unsigned char **pieces = mallocCheck((size_t)n * sizeof *pieces);
    int *lens = mallocCheck((size_t)n * sizeof *lens);
    for (int i = 0; i < n; i++) {
        size_t len;
        pieces[i] = replace_all(v->tokens[i], v->token_lens[i], SP_SPACE, " ", &len);
        lens[i] = len <= INT_MAX ? (int)len : INT_MAX;
    }
    int rc = tokenizer_from_pieces(t, (const unsigned char *const *)pieces, lens, v->scores, n, err);
    if (rc == 0 && (check_own_id("tokenizer.ggml.bos_token_id", v->bos_id, t->bos_id, err) ||
                    check_own_id("tokenizer.ggml.eos_token_id", v->eos_id, t->eos_id, err))) {
        tokenizer_free(t);
        rc = -1;
    }
    for (int i = 0; i < n; i++) free(pieces[i]);
    free(pieces);
    free(lens);
    return rc;
}

// ----------------------------------------------------------------------------
// foreign vocabularies: what both kinds share

typedef struct {
    int n;                 // tokens
    unsigned char **texts; // (cap_syms) token texts, then (BPE) the other symbols'
    int *text_len;
    unsigned char *text_blob;
    BytesMap text_id;
    unsigned char *attr;   // (n)
    int bos, eos, eot, eom, fim_pre, fim_suf, fim_mid, fim_pad, fim_rep, fim_sep;
    bool add_bos, add_eos, add_space_prefix;
    bool *eog;             // (n)
} Foreign;

static void foreign_free(Foreign *f) {
    free(f->texts);
    free(f->text_len);
    free(f->text_blob);
    bytesmap_free(&f->text_id);
    free(f->attr);
    free(f->eog);
}

static int text_token(const Foreign *f, const char *text) {
    int id = bytesmap_get(&f->text_id, (const unsigned char *)text, (int)strlen(text));
    return id < f->n ? id : -1;
}

// llama.cpp's token types -> attributes (an unknown type is "undefined": no flag)
static unsigned char type_attr(int type) {
    switch (type) {
    case 1: return TOKEN_NORMAL;
    case 2: return TOKEN_UNKNOWN;
    case 3: return TOKEN_CONTROL;
    case 4: return TOKEN_USER_DEFINED;
    case 5: return TOKEN_UNUSED;
    case 6: return TOKEN_BYTE;
    default: return 0;
    }
}

// Texts (an empty one read as "[EMPTY_<id>]", as llama.cpp does), the text -> id map and the
// attributes. extra_syms: room for that many more symbols after the tokens (BPE).
static int foreign_texts(Foreign *f, const TokenizerVocab *v, size_t extra_syms, Error *err) {
    int n = f->n = v->n_tokens;
    if (v->token_types && v->n_token_types < (size_t)n)
        return error_set(err, "%zu token types for %d tokens", v->n_token_types, n);
    size_t total = 0;
    for (int i = 0; i < n; i++) {
        if (v->token_lens[i] > MAX_PIECE_BYTES)
            return error_set(err, "token %d is %zu bytes long, more than %d", i, v->token_lens[i], MAX_PIECE_BYTES);
        total += v->token_lens[i] ? v->token_lens[i] : 24;
    }
    f->texts = mallocCheck(((size_t)n + extra_syms) * sizeof *f->texts);
    f->text_len = mallocCheck(((size_t)n + extra_syms) * sizeof *f->text_len);
    f->text_blob = mallocCheck(total + 1);
    bytesmap_init(&f->text_id, (size_t)n + extra_syms);
    f->attr = mallocCheck((size_t)n);
    unsigned char *p = f->text_blob;
    for (int i = 0; i < n; i++) {
        f->texts[i] = p;
        if (v->token_lens[i] > 0) {
            memcpy(p, v->tokens[i], v->token_lens[i]);
            f->text_len[i] = (int)v->token_lens[i];
        } else {
            f->text_len[i] = snprintf((char *)p, 24, "[EMPTY_%d]", i);
        }
        p += f->text_len[i];
        int first = bytesmap_add(&f->text_id, f->texts[i], f->text_len[i], i);
        if (first != i)
            return error_set(err, "tokens %d and %d have the same text \"%.*s\" (llama.cpp refuses such a vocabulary)",
                             first, i, f->text_len[i] < 40 ? f->text_len[i] : 40, (const char *)f->texts[i]);
        f->attr[i] = v->token_types ? type_attr(v->token_types[i]) : TOKEN_NORMAL;
    }
    return 0;
}

// A special id: the default unless the key names a token of the vocabulary.
static int special_id(long long dflt, long long key, int n) {
    int id = dflt >= 0 && dflt < n ? (int)dflt : -1;
    return key >= 0 && key < n ? (int)key : id;
}

// llama.cpp picks the first candidate text its hash map yields; the lowest id here. The one
// picked becomes control.
static void detect(Foreign *f, int *id, const char *const *texts) {
    if (*id >= 0) return;
    for (; *texts; texts++) {
        int k = text_token(f, *texts);
        if (k >= 0 && (*id < 0 || k < *id)) *id = k;
    }
    if (*id >= 0) f->attr[*id] |= TOKEN_CONTROL;
}

static bool eog_text_is(const Foreign *f, int id, const char *text) {
    return str_is((const char *)f->texts[id], (size_t)f->text_len[id], text);
}

// Special ids, flags, attributes and the end-of-generation set, in llama.cpp's order.
static int foreign_specials(Foreign *f, const TokenizerVocab *v, bool spm, Error *err) {
    int n = f->n;
    f->bos = special_id(spm ? 1 : 11, v->bos_id, n);
    f->eos = special_id(spm ? 2 : 11, v->eos_id, n);
    f->eot = special_id(-1, v->eot_id, n);
    f->eom = special_id(-1, v->eom_id, n);
    f->fim_pre = special_id(-1, v->fim_pre_id, n);
    f->fim_suf = special_id(-1, v->fim_suf_id, n);
    f->fim_mid = special_id(-1, v->fim_mid_id, n);
    f->fim_pad = special_id(-1, v->fim_pad_id, n);
    f->fim_rep = special_id(-1, v->fim_rep_id, n);
    f->fim_sep = special_id(-1, v->fim_sep_id, n);
    f->add_bos = v->add_bos >= 0 ? v->add_bos : spm;
    f->add_eos = v->add_eos >= 0 ? v->add_eos : false;
    f->add_space_prefix = v->add_space_prefix >= 0 ? v->add_space_prefix : spm;
    if (f->add_bos && f->bos < 0) return error_set(err, "add_bos_token is set but the vocabulary has no BOS token");
    if (f->add_eos && f->eos < 0) return error_set(err, "add_eos_token is set but the vocabulary has no EOS token");

    detect(f, &f->eot, EOT_TEXTS);
    detect(f, &f->eom, EOM_TEXTS);
    detect(f, &f->fim_pre, FIM_PRE_TEXTS);
    detect(f, &f->fim_suf, FIM_SUF_TEXTS);
    detect(f, &f->fim_mid, FIM_MID_TEXTS);
    detect(f, &f->fim_pad, FIM_PAD_TEXTS);
    detect(f, &f->fim_rep, FIM_REP_TEXTS);
    detect(f, &f->fim_sep, FIM_SEP_TEXTS);
    for (int i = 0; i < n; i++) // control tokens named "unused..." are unused
        if ((f->attr[i] & TOKEN_CONTROL) && memmem(f->texts[i], (size_t)f->text_len[i], "unused", 6))
            f->attr[i] |= TOKEN_UNUSED;

    f->eog = callocCheck((size_t)n, sizeof *f->eog);
    int fims[3] = {f->fim_pad, f->fim_rep, f->fim_sep};
    for (int k = 0; k < 3; k++)
        if (fims[k] >= 0) f->eog[fims[k]] = true;
    for (const char *const *s = EOG_TEXTS; *s; s++) {
        int id = text_token(f, *s);
        if (id < 0) continue;
        f->eog[id] = true;
        f->attr[id] |= TOKEN_CONTROL;
    }
    for (const char *const *s = RENDERED_TEXTS; *s; s++) {
        int id = text_token(f, *s);
        if (id >= 0) f->attr[id] = TOKEN_USER_DEFINED;
    }
    int ends[3] = {f->eos, f->eot, f->eom};
    for (int k = 0; k < 3; k++)
        if (ends[k] >= 0) f->eog[ends[k]] = true;
    // "<|end|>" does not end generation beside "<|return|>" and "<|call|>" (o200k_harmony) or
    // "<|calls|>" and "<|flush|>" (solar-open); "</s>" does not beside "<|tool_response>" or
    // "<|plamo:eos|>" (gemma4, plamo), where it is a normal token
    bool has_return = false, has_call = false, has_flush = false, has_tool = false;
    int end_id = -1, s_id = -1;
    for (int i = 0; i < n; i++) {
        if (!f->eog[i]) continue;
        if (eog_text_is(f, i, "<|return|>")) has_return = true;
        else if (eog_text_is(f, i, "<|call|>") || eog_text_is(f, i, "<|calls|>")) has_call = true;
        else if (eog_text_is(f, i, "<|flush|>")) has_flush = true;
        else if (eog_text_is(f, i, "<|end|>")) end_id = i;
        if (eog_text_is(f, i, "<|tool_response>") || eog_text_is(f, i, "<|plamo:eos|>")) has_tool = true;
        else if (eog_text_is(f, i, "</s>")) s_id = i;
    }
    if (end_id >= 0 && has_call && (has_return || has_flush)) {
        f->eog[end_id] = false;
        f->attr[end_id] = TOKEN_USER_DEFINED;
    }
    if (s_id >= 0 && has_tool) {
        f->eog[s_id] = false;
        f->attr[s_id] = TOKEN_NORMAL;
    }
    return 0;
}

// The byte a byte-typed token stands for: llama.cpp's strtol(text.substr(3, 2), 16).
static int token_byte(const unsigned char *text, int len) {
    char buf[3] = {0};
    for (int i = 0; i < 2 && 3 + i < len; i++) buf[i] = (char)text[3 + i];
    return (unsigned char)strtol(buf, NULL, 16);
}

// Hand the texts, attributes and ids of f to t (whose pieces are allocated).
static void foreign_finish(Tokenizer *t, Foreign *f, const TokenizerVocab *v) {
    TokenizerIndex *idx = t->index;
    t->llama_cpp = true;
    idx->texts = f->texts;
    idx->text_len = f->text_len;
    idx->text_blob = f->text_blob;
    idx->text_id = f->text_id;
    f->texts = NULL, f->text_len = NULL, f->text_blob = NULL;
    memset(&f->text_id, 0, sizeof f->text_id);
    t->attr = f->attr;
    f->attr = NULL;
    t->bos_id = f->bos;
    t->eos_id = f->eos;
    t->add_bos = f->add_bos;
    t->add_eos = f->add_eos;
    for (int i = 0; i < f->n; i++) t->n_eog += f->eog[i];
    t->eog = mallocCheck(((size_t)t->n_eog + 1) * sizeof *t->eog);
    for (int i = 0, k = 0; i < f->n; i++)
        if (f->eog[i]) t->eog[k++] = i;
    for (int i = 0; i < f->n; i++)
        if (idx->text_len[i] > idx->max_text_len) idx->max_text_len = idx->text_len[i];
    if (v->chat_template) {
        t->chat_template = mallocCheck(v->chat_template_len + 1);
        memcpy(t->chat_template, v->chat_template, v->chat_template_len);
        t->chat_template[v->chat_template_len] = '\0';
    }
    tokenizer_index_specials(t);
}

// Pieces from per-token byte strings built into one growing buffer.
typedef struct {
    unsigned char *p;
    size_t len, cap;
} Buf;

static void buf_put(Buf *b, const void *s, size_t n) {
    if (b->len + n > b->cap) {
        b->cap = 2 * (b->len + n) + 64;
        b->p = reallocCheck(b->p, b->cap);
    }
    if (n) memcpy(b->p + b->len, s, n);
    b->len += n;
}

static void set_pieces(Tokenizer *t, TokenizerKind kind, int n, const Buf *b, const size_t *off) {
    int *lens = mallocCheck((size_t)n * sizeof *lens);
    for (int i = 0; i < n; i++) lens[i] = (int)(off[i + 1] - off[i]);
    tokenizer_alloc_pieces(t, kind, n, lens);
    if (b->len) memcpy(t->index->blob, b->p, b->len);
}

// ----------------------------------------------------------------------------
// a foreign "gpt2" vocabulary

// llama_decode_text: a normal token's text read in GPT-2's alphabet; a codepoint outside it
// becomes "[UNK_BYTE_0x<its UTF-8 in hex><the whole text>]". -1 on a codepoint above U+10FFFF
// (llama.cpp throws while loading).
static int decode_gpt2_text(const unsigned char *s, int len, Buf *out) {
    for (int i = 0; i < len;) {
        size_t k;
        uint32_t cp = unicode_decode(s + i, (size_t)(len - i), &k);
        if (cp > 0x10FFFF) return -1;
        unsigned char u[4], byte[4];
        size_t m = unicode_encode(cp, u);
        if (tokenizer_gpt2_unspell(u, m, byte) == 1) {
            buf_put(out, byte, 1);
        } else {
            char hex[3];
            buf_put(out, "[UNK_BYTE_0x", 12);
            for (size_t j = 0; j < m; j++) snprintf(hex, sizeof hex, "%02x", u[j]), buf_put(out, hex, 2);
            buf_put(out, s, (size_t)len);
            buf_put(out, "]", 1);
        }
        i += (int)k;
    }
    return 0;
}

// A symbol for the GPT-2-spelled string s: the token or symbol with that text, else a new one
// (s must stay where it is).
static int symbol_for(Foreign *f, int *n_syms, const unsigned char *s, int len) {
    int id = bytesmap_add(&f->text_id, s, len, *n_syms);
    if (id == *n_syms) {
        f->texts[id] = (unsigned char *)s;
        f->text_len[id] = len;
        (*n_syms)++;
    }
    return id;
}

static int foreign_bpe(Tokenizer *t, const TokenizerVocab *v, bool split_digits, Error *err) {
    Foreign f = {0};
    int n = v->n_tokens, rc = 0;
    size_t blob_cap = 2 * 256 + 1;
    for (int i = 0; i < v->n_merges; i++) {
        if (v->merge_lens[i] > MAX_PIECE_BYTES)
            return error_set(err, "merge %d is %zu bytes long, more than %d", i, v->merge_lens[i], MAX_PIECE_BYTES);
        blob_cap += v->merge_lens[i];
    }
    if ((rc = foreign_texts(&f, v, 256 + (size_t)v->n_merges, err)) || (rc = foreign_specials(&f, v, false, err))) {
        foreign_free(&f);
        return rc;
    }
    int one_byte[256];
    for (int c = 0; c < 256; c++) {
        unsigned char b = (unsigned char)c;
        int id = bytesmap_get(&f.text_id, &b, 1);
        one_byte[c] = id;
        if (id >= 0 && c >= 0x80 && !rc)
            rc = error_set(err, "token %d's text is the single byte 0x%02x, which is not UTF-8 (not supported)", id, c);
    }
    // pieces: what llama_token_to_piece(special = true) gives
    Buf b = {0};
    size_t *off = mallocCheck(((size_t)n + 1) * sizeof *off);
    for (int i = 0; i < n && !rc; i++) {
        off[i] = b.len;
        unsigned char a = f.attr[i];
        const unsigned char *s = f.texts[i];
        int len = f.text_len[i];
        if (a & (TOKEN_CONTROL | TOKEN_UNKNOWN | TOKEN_USER_DEFINED)) {
            buf_put(&b, s, (size_t)len);
        } else if (a & TOKEN_NORMAL) {
            if (decode_gpt2_text(s, len, &b))
                rc = error_set(err, "token %d's text spells a codepoint above U+10FFFF", i);
        } else if (a & TOKEN_BYTE) {
            if (len < 3) rc = error_set(err, "byte token %d's text \"%.*s\" is not <0xXX>", i, len, (const char *)s);
            unsigned char byte = (unsigned char)token_byte(s, len);
            buf_put(&b, &byte, 1);
        }
    }
    off[n] = b.len;
    if (rc) {
        free(b.p), free(off);
        foreign_free(&f);
        return rc;
    }
    set_pieces(t, TOKENIZER_BPE, n, &b, off);
    free(b.p), free(off);
    TokenizerIndex *idx = t->index;
    memcpy(idx->one_byte_token, one_byte, sizeof one_byte);
    idx->split_digits = split_digits;

    // Symbols: the tokens, then each other GPT-2-spelled string a byte or a merge makes. A merge
    // "left right" (split at the first space after the first byte, as llama.cpp does) joins the
    // symbols of left and right when both are symbols; the first merge of a pair keeps its rank.
    unsigned char *sym_blob = mallocCheck(blob_cap), *sp = sym_blob;
    int n_syms = n;
    for (int c = 0; c < 256; c++) {
        size_t k = tokenizer_gpt2_spell_byte((unsigned char)c, sp);
        int before = n_syms;
        idx->byte_sym[c] = symbol_for(&f, &n_syms, sp, (int)k);
        if (n_syms > before) sp += k;
    }
    idx->merge_result = mallocCheck(((size_t)v->n_merges + 1) * sizeof *idx->merge_result);
    int *split = mallocCheck(((size_t)v->n_merges + 1) * sizeof *split);
    for (int i = 0; i < v->n_merges; i++) {
        const unsigned char *m = v->merges[i];
        int len = (int)v->merge_lens[i], at = 1;
        while (at < len && m[at] != ' ') at++;
        split[i] = at;
        idx->merge_result[i] = -1;
        if (at >= len - 1) continue; // no space, or nothing after it: never applies
        memcpy(sp, m, (size_t)at);
        memcpy(sp + at, m + at + 1, (size_t)(len - at - 1));
        int before = n_syms, sym = symbol_for(&f, &n_syms, sp, len - 1);
        if (n_syms > before) sp += len - 1;
        idx->merge_result[i] = sym;
    }
    pairmap_init(&idx->merge_rank, (size_t)v->n_merges);
    for (int i = 0; i < v->n_merges; i++) {
        if (idx->merge_result[i] < 0) continue;
        const unsigned char *m = v->merges[i];
        int at = split[i];
        int l = bytesmap_get(&f.text_id, m, at), r = bytesmap_get(&f.text_id, m + at + 1, (int)v->merge_lens[i] - at - 1);
        if (l < 0 || r < 0) {
            idx->merge_result[i] = -1;
            continue;
        }
        if (pairmap_get(&idx->merge_rank, l, r) < 0) pairmap_put(&idx->merge_rank, l, r, i);
    }
    free(split);
    idx->n_syms = n_syms;
    idx->sym_blob = sym_blob;
    t->n_merges = v->n_merges;
    foreign_finish(t, &f, v);
    foreign_free(&f);
    return 0;
}

// ----------------------------------------------------------------------------
// a foreign "llama" (SentencePiece) vocabulary

static int foreign_spm(Tokenizer *t, const TokenizerVocab *v, Error *err) {
    Foreign f = {0};
    int n = v->n_tokens, rc = 0;
    if (v->scores && v->n_scores < (size_t)n) return error_set(err, "%zu tokenizer scores for %d tokens", v->n_scores, n);
    for (int i = 0; v->scores && i < n; i++)
        if (isnan(v->scores[i])) return error_set(err, "token %d has a NaN score", i);
    if ((rc = foreign_texts(&f, v, 0, err)) || (rc = foreign_specials(&f, v, true, err))) {
        foreign_free(&f);
        return rc;
    }
    int byte_token[256];
    for (int c = 0; c < 256 && !rc; c++) { // llama.cpp's byte_to_token: "<0xXX>", else the byte itself
        char hex[8];
        snprintf(hex, sizeof hex, "<0x%02X>", c);
        unsigned char raw = (unsigned char)c;
        byte_token[c] = text_token(&f, hex);
        if (byte_token[c] < 0 && c > 0) byte_token[c] = bytesmap_get(&f.text_id, &raw, 1);
        if (byte_token[c] < 0) rc = error_set(err, "no token for the byte 0x%02x (neither %s nor the byte itself)", c, hex);
    }
    if (!rc && text_token(&f, SP_SPACE) < 0) rc = error_set(err, "no token for U+2581, SentencePiece's space");
    for (int i = 0; i < n && !rc; i++)
        if (f.add_space_prefix && f.text_len[i] == 1 && (f.attr[i] & (TOKEN_CONTROL | TOKEN_USER_DEFINED | TOKEN_UNKNOWN)))
            rc = error_set(err, "add_space_prefix with the one-byte special token %d (not supported)", i);
    Buf b = {0};
    size_t *off = mallocCheck(((size_t)n + 1) * sizeof *off);
    for (int i = 0; i < n && !rc; i++) {
        off[i] = b.len;
        unsigned char a = f.attr[i];
        const unsigned char *s = f.texts[i];
        int len = f.text_len[i];
        if (a & (TOKEN_CONTROL | TOKEN_UNKNOWN | TOKEN_USER_DEFINED)) {
            buf_put(&b, s, (size_t)len);
        } else if (a & TOKEN_NORMAL) {
            size_t k;
            unsigned char *u = replace_all(s, (size_t)len, SP_SPACE, " ", &k);
            buf_put(&b, u, k);
            free(u);
        } else if (a & TOKEN_BYTE) {
            if (len < 3) rc = error_set(err, "byte token %d's text \"%.*s\" is not <0xXX>", i, len, (const char *)s);
            unsigned char byte = (unsigned char)token_byte(s, len);
            buf_put(&b, &byte, 1);
        }
    }
    off[n] = b.len;
    if (rc) {
        free(b.p), free(off);
        foreign_free(&f);
        return rc;
    }
    set_pieces(t, TOKENIZER_SPM, n, &b, off);
    free(b.p), free(off);
    TokenizerIndex *idx = t->index;
    memcpy(idx->byte_token, byte_token, sizeof byte_token);
    idx->add_space_prefix = f.add_space_prefix;
    t->scores = mallocCheck((size_t)n * sizeof *t->scores);
    for (int i = 0; i < n; i++) t->scores[i] = v->scores ? v->scores[i] : 0.0f;
    foreign_finish(t, &f, v);
    foreign_free(&f);
    return 0;
}

// ----------------------------------------------------------------------------

int tokenizer_from_vocab(Tokenizer *t, const TokenizerVocab *v, Error *err) {
    memset(t, 0, sizeof *t);
    bool gpt2 = str_is(v->model, v->model_len, "gpt2"), llama = str_is(v->model, v->model_len, "llama");
    if (!gpt2 && !llama)
        return error_set(err, "tokenizer model '%.*s' is not supported (expected 'gpt2' or 'llama')",
                         (int)(v->model_len < 40 ? v->model_len : 40), v->model ? v->model : "");
    if (v->n_tokens < 1 || v->n_tokens > MAX_VOCAB)
        return error_set(err, "a vocabulary of %d tokens is out of range [1, %d]", v->n_tokens, MAX_VOCAB);
    int rc;
    if (gpt2) {
        if (!v->pre)
            return error_set(err, "the gpt2 tokenizer has no tokenizer.ggml.pre (llama.cpp's \"default\" "
                                  "pre-tokenizer is not supported; ours is \"%s\")", TOKENIZER_BPE_PRE);
        bool starcoder = in_list(v->pre, v->pre_len, STARCODER_PRES);
        if (!starcoder && !in_list(v->pre, v->pre_len, GPT2_PRES))
            return error_set(err, "pre-tokenizer '%.*s' is not supported (llama.cpp's starcoder and gpt2 families are)",
                             (int)(v->pre_len < 40 ? v->pre_len : 40), v->pre);
        if (!v->merges) return error_set(err, "the gpt2 tokenizer has no tokenizer.ggml.merges");
        if (v->n_merges < 0 || v->n_merges > MAX_VOCAB)
            return error_set(err, "%d merges is out of range [0, %d]", v->n_merges, MAX_VOCAB);
        if (str_is(v->pre, v->pre_len, TOKENIZER_BPE_PRE) && v->n_tokens == 256 + v->n_merges + N_SPECIAL)
            rc = own_bpe(t, v, err);
        else
            rc = foreign_bpe(t, v, starcoder, err);
    } else {
        rc = v->token_types ? foreign_spm(t, v, err) : own_llama2c(t, v, err);
    }
    if (rc == 0 && !t->llama_cpp && v->chat_template) {
        t->chat_template = mallocCheck(v->chat_template_len + 1);
        memcpy(t->chat_template, v->chat_template, v->chat_template_len);
        t->chat_template[v->chat_template_len] = '\0';
    }
    return rc;
}
