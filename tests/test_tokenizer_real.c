// test_tokenizer_real.c: the tokenizers of the two real models (SmolLM2-135M-Instruct's "gpt2"
// BPE with the "smollm" pre-split, Gemma 3 270M's SentencePiece), read from their GGUF files
// by tokenizer_load_gguf, against llama.cpp:
//  - ids: llama-tokenize's on the KJV validation text and on tests/fixtures/real/stress.txt
//    (recorded by scripts/record_llama_fixtures.sh; llama-tokenize adds BOS when the model does,
//    and parses special tokens by default: common/arg.cpp sets parse_special for the tokenize
//    tool, so "<|im_start|>" in stress.txt is SmolLM2's token 1);
//  - the vocabulary facts llama.cpp derives (BOS, EOS, add_bos, end-of-generation ids, the
//    control attribute it gives Gemma's user-defined "</s>");
//  - decoding as llama_token_to_piece(special = false): valid UTF-8 comes back byte for byte;
//    invalid UTF-8 comes back as llama.cpp's decoder reads it (SmolLM2: U+FFFD per bad byte,
//    overlong forms shortened; Gemma: every byte kept, through its <0xXX> tokens);
//  - chat templates: the text llama_chat_apply_template makes, and llama.cpp's ids for it.
// The hand-written expected ids below were printed by llama.cpp (the vendored copy of
// llama-cpp-python 0.3.36, see tests/fixtures/real/README.md) through its C API:
// llama_tokenize(vocab, text, len, ..., add_special = true, parse_special) and
// llama_token_to_piece(..., special = false); llama_chat_apply_template for the chat strings.
//
// Needs the models (`make real-models`), the KJV validation text (`make out/corpus/kjv-valid.txt`)
// and the fixtures. Run from the repository root (or with INFERLAB_ROOT set):
//   make build/tests/test_tokenizer_real && ./build/tests/test_tokenizer_real
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "chat.h"
#include "tokenizer_gguf.h"

enum { SMOLLM2, GEMMA };
static const char *const MODEL_FILE[] = {"out/models/real/smollm2-135m-instruct-q4_1.gguf",
                                         "out/models/real/gemma-3-270m-q4_k_m.gguf"};
static const char *const FIXTURE_DIR[] = {"tests/fixtures/real/smollm2-135m-instruct-q4_1",
                                          "tests/fixtures/real/gemma-3-270m-q4_k_m"};
static const char KJV_VALID[] = "out/corpus/kjv-valid.txt";
static const char STRESS[] = "tests/fixtures/real/stress.txt";

static char *path_of(const char *rel) {
    const char *root = getenv("INFERLAB_ROOT");
    static char buf[4][1024];
    static int k;
    k = (k + 1) % 4;
    snprintf(buf[k], sizeof buf[k], "%s/%s", root ? root : ".", rel);
    return buf[k];
}

// The model's tokenizer, loaded once.
static const Tokenizer *model(int which) {
    static Tokenizer t[2];
    static int loaded[2];
    if (!loaded[which]) {
        const char *p = path_of(MODEL_FILE[which]);
        FILE *f = fopen(p, "rb");
        if (!f) fail_msg("%s is missing: run `make real-models` (it places the GGUFs that `make deps` installs)", p);
        fclose(f);
        Error err;
        if (tokenizer_load_gguf(&t[which], p, &err)) fail_msg("%s", err.msg);
        loaded[which] = 1;
    }
    return &t[which];
}

static unsigned char *read_text(const char *rel, size_t *len, const char *how) {
    char *buf;
    Error err;
    if (file_read_all(path_of(rel), &buf, len, &err)) fail_msg("%s (%s)", err.msg, how);
    return (unsigned char *)buf;
}

// One decimal id per line.
static int *read_ids(const char *rel, size_t *n) {
    size_t len;
    char *text = (char *)read_text(rel, &len, "tests/fixtures/real/ is written by scripts/record_llama_fixtures.sh");
    int *ids = mallocCheck((len / 2 + 1) * sizeof *ids);
    *n = 0;
    for (char *p = text, *end; *p; p = end) {
        long v = strtol(p, &end, 10);
        if (end == p) {
            if (*p != '\n' && *p != ' ') fail_msg("%s: not an id list near \"%.20s\"", rel, p);
            end = p + 1;
            continue;
        }
        ids[(*n)++] = (int)v;
    }
    free(text);
    return ids;
}

static int *encode(const Tokenizer *t, const unsigned char *s, size_t len, unsigned flags, size_t *n) {
    int *ids = mallocCheck(tokenizer_max_tokens(len) * sizeof *ids);
    *n = tokenizer_tokenize(t, s, len, flags, ids);
    assert_true(*n <= tokenizer_max_tokens(len));
    for (size_t i = 0; i < *n; i++) assert_true(ids[i] >= 0 && ids[i] < t->vocab_size);
    return ids;
}

static void assert_ids(const int *got, size_t n_got, const int *want, size_t n_want, const char *what) {
    for (size_t i = 0; i < n_got && i < n_want; i++)
        if (got[i] != want[i]) fail_msg("%s: token %zu is %d, llama.cpp's %d", what, i, got[i], want[i]);
    if (n_got != n_want) fail_msg("%s: %zu tokens, llama.cpp's %zu", what, n_got, n_want);
}

// What llama-tokenize does with a file: BOS when the model adds one, special tokens parsed.
static unsigned llama_tokenize_flags(const Tokenizer *t) {
    return (t->add_bos ? TOKENIZER_ADD_BOS : 0) | TOKENIZER_PARSE_SPECIAL;
}

static void check_fixture(int which, const char *text_rel, const char *ids_name, const char *how) {
    const Tokenizer *t = model(which);
    size_t len, n, n_want;
    unsigned char *text = read_text(text_rel, &len, how);
    char rel[256];
    snprintf(rel, sizeof rel, "%s/%s", FIXTURE_DIR[which], ids_name);
    int *want = read_ids(rel, &n_want);
    int *got = encode(t, text, len, llama_tokenize_flags(t), &n);
    assert_ids(got, n, want, n_want, rel);
    free(got);
    free(want);
    free(text);
}

static void test_smollm2_kjv_ids(void **state) {
    (void)state;
    check_fixture(SMOLLM2, KJV_VALID, "kjv-valid.ids", "run `make out/corpus/kjv-valid.txt`");
}

static void test_smollm2_stress_ids(void **state) {
    (void)state;
    check_fixture(SMOLLM2, STRESS, "stress.ids", "part of the repository");
}

static void test_gemma_kjv_ids(void **state) {
    (void)state;
    check_fixture(GEMMA, KJV_VALID, "kjv-valid.ids", "run `make out/corpus/kjv-valid.txt`");
}

static void test_gemma_stress_ids(void **state) {
    (void)state;
    check_fixture(GEMMA, STRESS, "stress.ids", "part of the repository");
}

static void assert_eog(const Tokenizer *t, const int *want, int n_want) {
    assert_int_equal(t->n_eog, n_want);
    for (int i = 0; i < n_want; i++) {
        assert_int_equal(t->eog[i], want[i]);
        assert_true(tokenizer_is_eog(t, want[i]));
    }
}

// What llama.cpp's loader reports for the file ("print_info", "printing all EOG tokens").
static void test_smollm2_vocabulary(void **state) {
    (void)state;
    const Tokenizer *t = model(SMOLLM2);
    assert_int_equal(t->kind, TOKENIZER_BPE);
    assert_true(t->llama_cpp);
    assert_int_equal(t->vocab_size, 49152);
    assert_int_equal(t->n_merges, 48900);
    assert_int_equal(t->bos_id, 1);
    assert_int_equal(t->eos_id, 2);
    assert_false(t->add_bos);
    assert_false(t->add_eos);
    // <|endoftext|>, <|im_end|> (EOS) and <reponame> (llama.cpp's FIM-repo token) end generation
    assert_eog(t, (const int[]){0, 2, 4}, 3);
    assert_false(tokenizer_is_eog(t, 1));
    assert_int_equal(tokenizer_find_token(t, "<|im_start|>"), 1);
    assert_int_equal(tokenizer_find_token(t, "<|im_end|>"), 2);
    assert_int_equal(tokenizer_find_token(t, "\xc4\xa0the"), 260); // " the", GPT-2-spelled
    assert_int_equal(tokenizer_find_token(t, "<end_of_turn>"), -1);
    for (int id = 0; id < 17; id++) assert_true(t->attr[id] & TOKEN_CONTROL);
    size_t len;
    const unsigned char *p = tokenizer_piece(t, -1, 260, &len);
    assert_int_equal(len, 4);
    assert_memory_equal(p, " the", 4);
    tokenizer_piece(t, -1, 2, &len); // control: nothing
    assert_int_equal(len, 0);
    assert_non_null(t->chat_template);
    assert_non_null(strstr(t->chat_template, "You are a helpful AI assistant named SmolLM"));
    assert_int_equal(chat_template_for(t), CHAT_CHATML);
}

static void test_gemma_vocabulary(void **state) {
    (void)state;
    const Tokenizer *t = model(GEMMA);
    assert_int_equal(t->kind, TOKENIZER_SPM);
    assert_true(t->llama_cpp);
    assert_int_equal(t->vocab_size, 262144);
    assert_int_equal(t->bos_id, 2);
    assert_int_equal(t->eos_id, 1);
    assert_true(t->add_bos);
    assert_false(t->add_eos);
    // <eos>, <end_of_turn>, and "</s>", which llama.cpp's list of end-of-generation texts names
    // (its warning: "control-looking token: 212 '</s>' was not control-type")
    assert_eog(t, (const int[]){1, 106, 212}, 3);
    assert_int_equal(tokenizer_find_token(t, "<start_of_turn>"), 105);
    assert_int_equal(tokenizer_find_token(t, "<end_of_turn>"), 106);
    assert_int_equal(tokenizer_find_token(t, "<0x0A>"), 248);
    assert_int_equal(t->attr[212], TOKEN_USER_DEFINED | TOKEN_CONTROL);
    assert_int_equal(t->attr[138], TOKEN_USER_DEFINED); // "  "
    size_t len;
    const unsigned char *p = tokenizer_piece(t, -1, 248, &len);
    assert_int_equal(len, 1);
    assert_int_equal(p[0], '\n');
    p = tokenizer_piece(t, -1, 138, &len); // user-defined: its text
    assert_int_equal(len, 2);
    assert_memory_equal(p, "  ", 2);
    tokenizer_piece(t, -1, 212, &len); // control now: nothing
    assert_int_equal(len, 0);
    tokenizer_piece(t, -1, 2, &len);
    assert_int_equal(len, 0);
    p = tokenizer_piece(t, -1, tokenizer_find_token(t, "\xe2\x96\x81the"), &len); // "▁the"
    assert_int_equal(len, 4);
    assert_memory_equal(p, " the", 4);
    // no tokenizer.chat_template in the file: llama.cpp would format as ChatML; the lab uses
    // Gemma's turns (chat.h)
    assert_null(t->chat_template);
    assert_int_equal(chat_template_detect(t->chat_template), CHAT_CHATML);
    assert_int_equal(chat_template_for(t), CHAT_GEMMA);
}

// Special tokens are cut longest first; among equally long ones llama.cpp's order is whatever
// std::sort leaves, so the lab's (by id) gives the same cut only if no two equally long special
// texts can overlap (a suffix of one the prefix of the other). Neither vocabulary has such a pair.
typedef struct {
    const unsigned char *s;
    int len;
} Text;

static int text_cmp(const void *a, const void *b) {
    const Text *x = a, *y = b;
    int n = x->len < y->len ? x->len : y->len, c = memcmp(x->s, y->s, (size_t)n);
    return c ? c : x->len - y->len;
}

// Is there a text in sorted[0..n) other than self that starts with s[0..k)?
static int prefix_found(const Text *sorted, int n, const unsigned char *s, int k, const unsigned char *self) {
    int lo = 0, hi = n;
    while (lo < hi) { // the first text >= s[0..k)
        int mid = (lo + hi) / 2;
        int c = memcmp(sorted[mid].s, s, (size_t)k);
        if (c < 0) lo = mid + 1;
        else hi = mid;
    }
    for (int i = lo; i < n && memcmp(sorted[i].s, s, (size_t)k) == 0; i++)
        if (sorted[i].s != self) return 1;
    return 0;
}

static void assert_no_equal_length_overlap(const Tokenizer *t) {
    int n = 0;
    Text *texts = mallocCheck((size_t)t->vocab_size * sizeof *texts);
    for (int i = 0; i < t->vocab_size; i++)
        if (t->attr[i] & (TOKEN_CONTROL | TOKEN_USER_DEFINED | TOKEN_UNKNOWN))
            texts[n++] = (Text){t->pieces[i], t->piece_len[i]}; // a special's piece is its text
    qsort(texts, (size_t)n, sizeof *texts, text_cmp);
    int overlaps = 0;
    for (int len = 1; len <= 64; len++) {
        Text *group = mallocCheck(((size_t)n + 1) * sizeof *group);
        int g = 0;
        for (int i = 0; i < n; i++)
            if (texts[i].len == len) group[g++] = texts[i];
        for (int i = 0; i < g; i++)
            for (int d = 1; d < len; d++)
                overlaps += prefix_found(group, g, group[i].s + d, len - d, group[i].s);
        free(group);
    }
    assert_int_equal(overlaps, 0);
    free(texts);
}

static void test_special_texts_do_not_overlap(void **state) {
    (void)state;
    assert_no_equal_length_overlap(model(SMOLLM2));
    assert_no_equal_length_overlap(model(GEMMA));
}

// decode(encode(s)): want_len bytes of want (s itself when want is NULL)
static void assert_decodes(const Tokenizer *t, const unsigned char *s, size_t len, unsigned flags,
                           const unsigned char *want, size_t want_len) {
    size_t n, out_len;
    int *ids = encode(t, s, len, flags, &n);
    unsigned char *out = tokenizer_decode(t, ids, n, &out_len);
    if (!want) want = s, want_len = len;
    if (out_len != want_len || memcmp(out, want, want_len) != 0) {
        size_t i = 0;
        while (i < out_len && i < want_len && out[i] == want[i]) i++;
        fail_msg("decode(encode(%zu bytes)) differs at byte %zu (got %zu bytes, want %zu)", len, i, out_len, want_len);
    }
    free(out);
    free(ids);
}

// Valid UTF-8 comes back unchanged: the whole KJV text, and stress.txt up to its invalid bytes,
// without special-token parsing (a parsed control token decodes to nothing, as in llama.cpp).
static void test_valid_utf8_roundtrip(void **state) {
    (void)state;
    size_t kjv_len, stress_len;
    unsigned char *kjv = read_text(KJV_VALID, &kjv_len, "run `make out/corpus/kjv-valid.txt`");
    unsigned char *stress = read_text(STRESS, &stress_len, "part of the repository");
    unsigned char *bad = (unsigned char *)strstr((char *)stress, "\ninvalid:");
    assert_non_null(bad);
    size_t valid_len = (size_t)(bad - stress) + 1;
    for (int which = SMOLLM2; which <= GEMMA; which++) {
        const Tokenizer *t = model(which);
        assert_decodes(t, kjv, kjv_len, TOKENIZER_ADD_BOS, NULL, 0);
        assert_decodes(t, stress, valid_len, TOKENIZER_ADD_BOS, NULL, 0);
        assert_decodes(t, (const unsigned char *)"", 0, TOKENIZER_ADD_BOS, NULL, 0);
    }
    free(kjv);
    free(stress);
}

// llama.cpp's reading of invalid UTF-8, written independently of unicode.c: a lead byte with
// its continuation bytes decodes (overlong forms, surrogates and values up to 0x1FFFFF too);
// any other byte is U+FFFD. Re-encoded in the shortest form (values above 0x10FFFF kept as
// read: llama.cpp aborts on them).
static size_t llama_cpp_reading(const unsigned char *s, size_t len, unsigned char *out) {
    size_t o = 0;
    for (size_t i = 0; i < len;) {
        unsigned b = s[i], need = b < 0x80 ? 1 : b < 0xC0 ? 0 : b < 0xE0 ? 2 : b < 0xF0 ? 3 : b < 0xF8 ? 4 : 0;
        int ok = need > 0 && i + need <= len;
        for (unsigned k = 1; ok && k < need; k++) ok = (s[i + k] & 0xC0) == 0x80;
        if (!ok) {
            memcpy(out + o, "\xef\xbf\xbd", 3), o += 3, i++;
            continue;
        }
        uint32_t cp = need == 1 ? b : b & (0xFF >> (need + 1));
        for (unsigned k = 1; k < need; k++) cp = cp << 6 | (s[i + k] & 0x3F);
        if (cp < 0x80) out[o++] = (unsigned char)cp;
        else if (cp < 0x800) out[o++] = (unsigned char)(0xC0 | cp >> 6), out[o++] = (unsigned char)(0x80 | (cp & 0x3F));
        else if (cp < 0x10000)
            out[o++] = (unsigned char)(0xE0 | cp >> 12), out[o++] = (unsigned char)(0x80 | (cp >> 6 & 0x3F)),
            out[o++] = (unsigned char)(0x80 | (cp & 0x3F));
        else memcpy(out + o, s + i, 4), o += 4;
        i += need;
    }
    return o;
}

// Gemma's reading of a text without special tokens, written from llama.cpp's SentencePiece path
// for texts like stress.txt: newlines, tabs and runs of two or more spaces are user-defined
// tokens, cut out first and given back as they are; in what is left a space is U+2581
// ("\xe2\x96\x81"), and the text is cut into symbols by the lengths their first bytes claim.
// A symbol that is a token is given back as its piece (U+2581 as a space), any other as its bytes.
// So a space that an invalid lead byte's symbol swallows comes back as the bytes of U+2581.
static size_t gemma_reading(const unsigned char *s, size_t len, unsigned char *out) {
    size_t o = 0;
    for (size_t i = 0; i < len;) {
        size_t end = i;
        while (end < len && s[end] != '\n' && s[end] != '\t' && !(s[end] == ' ' && end + 1 < len && s[end + 1] == ' ') &&
               !(s[end] == ' ' && end > i && s[end - 1] == ' '))
            end++;
        if (end == i) { // a cut-out token: newline, tab, or a space of a run
            out[o++] = s[i++];
            continue;
        }
        unsigned char esc[4096];
        size_t m = 0;
        for (size_t k = i; k < end; k++) {
            if (s[k] == ' ') memcpy(esc + m, "\xe2\x96\x81", 3), m += 3;
            else esc[m++] = s[k];
        }
        for (size_t k = 0; k < m;) {
            size_t n = esc[k] < 0xC0 ? 1 : esc[k] < 0xE0 ? 2 : esc[k] < 0xF0 ? 3 : 4;
            if (n > m - k) n = m - k;
            if (n == 3 && memcmp(esc + k, "\xe2\x96\x81", 3) == 0) out[o++] = ' ';
            else memcpy(out + o, esc + k, n), o += n;
            k += n;
        }
        i = end;
    }
    return o;
}

// Invalid UTF-8: hand cases with llama.cpp's ids, then the whole stress text.
static void test_invalid_utf8(void **state) {
    (void)state;
    const Tokenizer *s = model(SMOLLM2), *g = model(GEMMA);
    static const struct {
        const char *text;
        int smollm2[8], n_smollm2, gemma[8], n_gemma;
        const char *smollm2_decoded;
    } cases[] = {
        // a lone 0xFF: SmolLM2 reads U+FFFD ("\xef\xbf\xbd", token 24211); Gemma's symbol is
        // "\xff" plus what follows (its lead-byte length, 4, clipped), no token: bytes
        {"a\xff" "b", {81, 24211, 82}, 3, {2, 236746, 493, 336}, 4, "a\xef\xbf\xbd" "b"},
        // overlong NUL: U+0000, written as the byte 0 (GPT-2's U+0100, token 190)
        {"a\xc0\x80" "b", {81, 190, 82}, 3, {2, 236746, 430, 366, 236763}, 5, "a\x00" "b"},
        // a surrogate decodes and re-encodes as it was
        {"a\xed\xa0\x80" "b", {81, 184, 250, 218, 82}, 5, {2, 236746, 475, 398, 366, 236763}, 6, "a\xed\xa0\x80" "b"},
        // a 3-byte lead cut short: two U+FFFD
        {"a\xe2\x82" "b", {81, 24211, 24211, 82}, 4, {2, 236746, 464, 368, 336}, 5, "a\xef\xbf\xbd\xef\xbf\xbd" "b"},
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        const unsigned char *text = (const unsigned char *)cases[c].text;
        size_t len = strlen(cases[c].text), n;
        int *ids = encode(s, text, len, TOKENIZER_PARSE_SPECIAL, &n);
        assert_ids(ids, n, cases[c].smollm2, (size_t)cases[c].n_smollm2, cases[c].text);
        free(ids);
        ids = encode(g, text, len, TOKENIZER_ADD_BOS | TOKENIZER_PARSE_SPECIAL, &n);
        assert_ids(ids, n, cases[c].gemma, (size_t)cases[c].n_gemma, cases[c].text);
        free(ids);
        size_t want_len = c == 1 ? 3 : strlen(cases[c].smollm2_decoded);
        assert_decodes(s, text, len, 0, (const unsigned char *)cases[c].smollm2_decoded, want_len);
        assert_decodes(g, text, len, TOKENIZER_ADD_BOS, NULL, 0); // Gemma keeps these bytes
    }
    // A value above U+10FFFF: llama.cpp's gpt2 path aborts ("invalid codepoint"); the lab keeps
    // its four bytes (llama.cpp's SentencePiece path keeps them too).
    const unsigned char big[] = "a\xf4\x90\x80\x80" "b";
    assert_decodes(s, big, 6, 0, NULL, 0);
    assert_decodes(g, big, 6, TOKENIZER_ADD_BOS, NULL, 0);
    // The whole stress text, as each model reads it (llama.cpp's own decode of its ids: SmolLM2
    // has 10 U+FFFD, an overlong '/' shortened; Gemma has the 5 spaces after its invalid lead
    // bytes as U+2581's bytes).
    size_t len;
    unsigned char *stress = read_text(STRESS, &len, "part of the repository");
    unsigned char *read = mallocCheck(3 * len + 1);
    size_t read_len = llama_cpp_reading(stress, len, read);
    assert_true(read_len != len || memcmp(read, stress, len) != 0); // it does hold invalid UTF-8
    assert_decodes(s, stress, len, 0, read, read_len);
    read_len = gemma_reading(stress, len, read);
    assert_int_equal(read_len, len + 5 * 2);
    assert_decodes(g, stress, len, TOKENIZER_ADD_BOS, read, read_len);
    free(read);
    free(stress);
}

// llama_chat_apply_template's text for one user message and for a short conversation, and
// llama.cpp's ids for it (BOS when the model adds one, special tokens parsed).
static void check_chat(const Tokenizer *t, const char *text, const char *want, const int *want_ids, size_t n_want) {
    assert_string_equal(text, want);
    size_t n;
    int *ids = encode(t, (const unsigned char *)text, strlen(text),
                      (t->add_bos ? TOKENIZER_ADD_BOS : 0) | TOKENIZER_PARSE_SPECIAL, &n);
    assert_ids(ids, n, want_ids, n_want, want);
    free(ids);
}

static const ChatMessage CONVERSATION[] = {
    {"system", "  Be brief.  "},
    {"user", "  What is the capital of France?\n"},
    {"assistant", " Paris. "},
};

static void test_chat_smollm2(void **state) {
    (void)state;
    const Tokenizer *t = model(SMOLLM2);
    ChatTemplate kind = chat_template_for(t);
    char *text = chat_format_user(kind, "What is the capital of France?");
    static const int ids[] = {1, 4093, 198, 1780, 314, 260, 3575, 282, 4649, 47, 2, 198, 1, 520, 9531, 198};
    check_chat(t, text, "<|im_start|>user\nWhat is the capital of France?<|im_end|>\n<|im_start|>assistant\n", ids,
               sizeof ids / sizeof ids[0]);
    free(text);
    text = chat_apply(kind, CONVERSATION, 3, true);
    static const int ids3[] = {1, 9690, 3805, 1934, 5453, 30, 256, 2, 198, 1, 4093, 3805, 1812, 314, 260, 3575, 282, 4649,
                               47, 198, 2, 198, 1, 520, 9531, 198, 7042, 30, 216, 2, 198, 1, 520, 9531, 198};
    check_chat(t, text,
               "<|im_start|>system\n  Be brief.  <|im_end|>\n<|im_start|>user\n  What is the capital of France?\n"
               "<|im_end|>\n<|im_start|>assistant\n Paris. <|im_end|>\n<|im_start|>assistant\n",
               ids3, sizeof ids3 / sizeof ids3[0]);
    free(text);
}

static void test_chat_gemma(void **state) {
    (void)state;
    const Tokenizer *t = model(GEMMA);
    ChatTemplate kind = chat_template_for(t);
    char *text = chat_format_user(kind, "What is the capital of France?");
    static const int ids[] = {2, 105, 2364, 107, 3689, 563, 506, 5279, 529, 7001, 236881, 106, 107, 105, 4368, 107};
    check_chat(t, text, "<start_of_turn>user\nWhat is the capital of France?<end_of_turn>\n<start_of_turn>model\n", ids,
               sizeof ids / sizeof ids[0]);
    free(text);
    text = chat_apply(kind, CONVERSATION, 3, true); // llama_chat_apply_template("gemma", ...)
    static const int ids3[] = {2,   105,    2364, 107, 3912, 8652, 236761, 108, 3689, 563, 506, 5279, 529, 7001,
                               236881, 106, 107,  105, 4368, 107,  50429,  236761, 106, 107, 105, 4368, 107};
    check_chat(t, text,
               "<start_of_turn>user\nBe brief.\n\nWhat is the capital of France?<end_of_turn>\n<start_of_turn>model\n"
               "Paris.<end_of_turn>\n<start_of_turn>model\n",
               ids3, sizeof ids3 / sizeof ids3[0]);
    free(text);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_smollm2_vocabulary),
        cmocka_unit_test(test_gemma_vocabulary),
        cmocka_unit_test(test_smollm2_kjv_ids),
        cmocka_unit_test(test_smollm2_stress_ids),
        cmocka_unit_test(test_gemma_kjv_ids),
        cmocka_unit_test(test_gemma_stress_ids),
        cmocka_unit_test(test_special_texts_do_not_overlap),
        cmocka_unit_test(test_valid_utf8_roundtrip),
        cmocka_unit_test(test_invalid_utf8),
        cmocka_unit_test(test_chat_smollm2),
        cmocka_unit_test(test_chat_gemma),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
