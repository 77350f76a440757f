// test_tokenizer.c: byte-level BPE training/encoding and the llama2.c tokenizer, against plain
// references: a trainer that recounts every pair after each merge, an encoder that rescans
// all merges for the lowest-ranked pair after each merge (llama.cpp's gpt2 rule: lowest rank,
// leftmost first), and a literal port of run.c's encode; plus the pre-split rule on cases
// hand-checked against llama.cpp's "starcoder" pre-tokenizer, GPT-2's byte alphabet, the
// piece-length cap, round trips and bad tokenizer.bin files.
//
// Run: make build/tests/test_tokenizer && ./build/tests/test_tokenizer
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "chat.h"
#include "tokenizer.h"
#include "unicode.h"

// ----------------------------------------------------------------------------
// inputs

static uint64_t rng_state;
static uint32_t rng_next(void) { // xorshift64*
    rng_state ^= rng_state >> 12;
    rng_state ^= rng_state << 25;
    rng_state ^= rng_state >> 27;
    return (uint32_t)((rng_state * 0x2545F4914F6CDD1DULL) >> 32);
}
static int rng_below(int n) { return (int)(rng_next() % (uint32_t)n); }

// English-like text: common words (one in UTF-8), made-up words, capitals, punctuation,
// numbers, runs of spaces and newlines.
static unsigned char *sample_text(size_t len, uint64_t seed) {
    static const char *words[] = {"the", "and", "of", "LORD", "unto", "said", "he", "them",
                                  "thou", "shall", "is", "that", "in", "his", "God", "house",
                                  "children", "Israel", "king", "land", "\xc3\xa9lan", "therefore",
                                  "came", "a"};
    static const char *gaps[] = {" ", " ", " ", " ", ", ", ". ", ": ", "  ", "\n", "\n\n", " (", ") "};
    rng_state = seed;
    unsigned char *text = mallocCheck(len + 1);
    size_t n = 0;
    while (n < len) {
        char piece[32];
        int kind = rng_below(20);
        if (kind == 0) {
            snprintf(piece, sizeof piece, "%d ", rng_below(1000));
        } else if (kind < 5) {
            int k = 2 + rng_below(7);
            for (int i = 0; i < k; i++) piece[i] = "etaoinshrdlu"[rng_below(12)];
            snprintf(piece + k, sizeof piece - (size_t)k, "%s", gaps[rng_below(12)]);
        } else {
            snprintf(piece, sizeof piece, "%s%s", words[rng_below(24)], gaps[rng_below(12)]);
        }
        for (const char *c = piece; *c && n < len; c++) text[n++] = (unsigned char)*c;
    }
    text[len] = '\0';
    return text;
}

static unsigned char *random_bytes(size_t len, uint64_t seed) {
    rng_state = seed;
    unsigned char *s = mallocCheck(len + 1);
    for (size_t i = 0; i < len; i++) s[i] = (unsigned char)rng_below(256);
    return s;
}

static Tokenizer train_or_fail(const unsigned char *text, size_t len, int vocab_size) {
    Tokenizer t;
    Error err;
    if (tokenizer_train_bpe(&t, text, len, vocab_size, &err) != 0) fail_msg("train: %s", err.msg);
    return t;
}

static int *encode_all(const Tokenizer *t, const unsigned char *s, size_t len, bool bos, bool eos, size_t *n) {
    int *tokens = mallocCheck(tokenizer_max_tokens(len) * sizeof *tokens);
    *n = tokenizer_encode(t, s, len, bos, eos, tokens);
    assert_true(*n <= tokenizer_max_tokens(len));
    for (size_t i = 0; i < *n; i++) assert_true(tokens[i] >= 0 && tokens[i] < t->vocab_size);
    return tokens;
}

static void assert_tokens(const Tokenizer *t, const char *s, bool bos, const int *want, size_t n_want) {
    size_t n;
    int *got = encode_all(t, (const unsigned char *)s, strlen(s), bos, false, &n);
    assert_int_equal(n, n_want);
    for (size_t i = 0; i < n; i++) assert_int_equal(got[i], want[i]);
    free(got);
}

// decode(encode(s)) == s; expect_prefix is what decoding adds before s (llama2.c without BOS).
static void assert_roundtrip(const Tokenizer *t, const unsigned char *s, size_t len, bool bos, bool eos,
                             const char *expect_prefix) {
    size_t n, out_len, plen = strlen(expect_prefix);
    int *tokens = encode_all(t, s, len, bos, eos, &n);
    unsigned char *out = tokenizer_decode(t, tokens, n, &out_len);
    assert_int_equal(out_len, plen + len);
    assert_memory_equal(out, expect_prefix, plen);
    if (len > 0) assert_memory_equal(out + plen, s, len);
    assert_int_equal(out[out_len], '\0');
    free(out);
    free(tokens);
}

// ----------------------------------------------------------------------------
// plain BPE references

typedef struct {
    int *ids;
    int len;
    long count;
} RefWord;

static bool ref_word_is(const RefWord *w, const unsigned char *s, int len) {
    if (w->len != len) return false;
    for (int i = 0; i < len; i++)
        if (w->ids[i] != s[i]) return false;
    return true;
}

// Replace every (a, b) in ids by id, left to right; returns the new length.
static int ref_merge(int *ids, int len, int a, int b, int id) {
    int k = 0;
    for (int i = 0; i < len;) {
        if (i + 1 < len && ids[i] == a && ids[i + 1] == b) {
            ids[k++] = id;
            i += 2;
        } else {
            ids[k++] = ids[i++];
        }
    }
    return k;
}

// Does merging (a, b) make a new piece of at most TOKENIZER_MAX_PIECE bytes (not an existing
// piece, nor BOS's or EOS's text)? pieces holds n_pieces NUL-free byte strings with lengths.
static bool ref_new_piece(unsigned char **pieces, const int *lens, int n_pieces, int a, int b) {
    int len = lens[a] + lens[b];
    if (len > TOKENIZER_MAX_PIECE) return false;
    unsigned char joined[TOKENIZER_MAX_PIECE];
    memcpy(joined, pieces[a], (size_t)lens[a]);
    memcpy(joined + lens[a], pieces[b], (size_t)lens[b]);
    for (int i = 0; i < n_pieces; i++)
        if (lens[i] == len && memcmp(pieces[i], joined, (size_t)len) == 0) return false;
    return !(len == 7 && (memcmp(joined, "<|bos|>", 7) == 0 || memcmp(joined, "<|eos|>", 7) == 0));
}

// Unique chunks by linear search; then per merge: recount every pair, take the most frequent
// that makes a new piece (lowest ids on ties), rewrite every word. Returns the number of
// merges written.
static int reference_train(const unsigned char *text, size_t len, int vocab_size, int *merges) {
    RefWord *words = mallocCheck((len + 1) * sizeof *words);
    int n_words = 0;
    for (size_t pos = 0, end; pos < len; pos = end) {
        end = tokenizer_chunk_end(text, len, pos);
        int w = 0, clen = (int)(end - pos);
        while (w < n_words && !ref_word_is(&words[w], text + pos, clen)) w++;
        if (w == n_words) {
            words[w].ids = mallocCheck((size_t)clen * sizeof(int));
            for (int i = 0; i < clen; i++) words[w].ids[i] = text[pos + (size_t)i];
            words[w].len = clen;
            words[w].count = 0;
            n_words++;
        }
        words[w].count++;
    }
    int V = vocab_size, m = 0;
    long *counts = mallocCheck((size_t)V * V * sizeof *counts);
    unsigned char **pieces = mallocCheck((size_t)V * sizeof *pieces);
    int *lens = mallocCheck((size_t)V * sizeof *lens);
    for (int b = 0; b < 256; b++) {
        pieces[b] = mallocCheck(1);
        pieces[b][0] = (unsigned char)b;
        lens[b] = 1;
    }
    for (; m < vocab_size - 258; m++) {
        memset(counts, 0, (size_t)V * V * sizeof *counts);
        for (int w = 0; w < n_words; w++)
            for (int i = 0; i + 1 < words[w].len; i++)
                counts[words[w].ids[i] * V + words[w].ids[i + 1]] += words[w].count;
        long best = 0;
        int best_a = -1, best_b = -1;
        for (int a = 0; a < V; a++) // ascending scan with '>' keeps the lowest ids on ties
            for (int b = 0; b < V; b++)
                if (counts[a * V + b] > best && ref_new_piece(pieces, lens, 256 + m, a, b)) {
                    best = counts[a * V + b];
                    best_a = a;
                    best_b = b;
                }
        if (best == 0) break;
        merges[2 * m] = best_a;
        merges[2 * m + 1] = best_b;
        lens[256 + m] = lens[best_a] + lens[best_b];
        pieces[256 + m] = mallocCheck((size_t)lens[256 + m]);
        memcpy(pieces[256 + m], pieces[best_a], (size_t)lens[best_a]);
        memcpy(pieces[256 + m] + lens[best_a], pieces[best_b], (size_t)lens[best_b]);
        for (int w = 0; w < n_words; w++) words[w].len = ref_merge(words[w].ids, words[w].len, best_a, best_b, 256 + m);
    }
    for (int i = 0; i < 256 + m; i++) free(pieces[i]);
    free(pieces);
    free(lens);
    for (int w = 0; w < n_words; w++) free(words[w].ids);
    free(words);
    free(counts);
    return m;
}

// Per chunk: find the adjacent pair of lowest merge rank by scanning the whole merge list,
// merge its leftmost occurrence, repeat.
static size_t reference_encode(const Tokenizer *t, const unsigned char *text, size_t len, int *out) {
    size_t n = 0;
    for (size_t pos = 0, end; pos < len; pos = end) {
        end = tokenizer_chunk_end(text, len, pos);
        int *ids = out + n, k = (int)(end - pos);
        for (int i = 0; i < k; i++) ids[i] = text[pos + (size_t)i];
        for (;;) {
            int best_rank = -1, at = -1;
            for (int i = 0; i + 1 < k; i++)
                for (int r = 0; r < t->n_merges; r++)
                    if (t->merges[2 * r] == ids[i] && t->merges[2 * r + 1] == ids[i + 1] &&
                        (best_rank < 0 || r < best_rank)) {
                        best_rank = r;
                        at = i;
                    }
            if (best_rank < 0) break;
            ids[at] = 256 + best_rank;
            memmove(ids + at + 1, ids + at + 2, (size_t)(k - at - 2) * sizeof *ids);
            k--;
        }
        n += (size_t)k;
    }
    return n;
}

// ----------------------------------------------------------------------------
// BPE tests

// Cut text with tokenizer_chunk_end and compare with want, the chunks joined by '|'.
static void assert_chunks(const char *text, const char *want) {
    size_t len = strlen(text), pos = 0;
    char got[512] = "";
    while (pos < len) {
        size_t end = tokenizer_chunk_end((const unsigned char *)text, len, pos);
        assert_true(end > pos && end <= len);
        snprintf(got + strlen(got), sizeof got - strlen(got), "%s%.*s", pos > 0 ? "|" : "", (int)(end - pos), text + pos);
        pos = end;
    }
    assert_string_equal(got, want);
}

// Hand-checked against llama.cpp's "starcoder" rule: digits alone, then GPT-2's regex with
// a digit ending its stretch of text.
static void test_chunk_rule(void **state) {
    (void)state;
    assert_chunks("Hello,  world 42\n\nAnd  (the) \xc3\xa9t\xc3\xa9 x\n",
                  "Hello|,| | world| |4|2|\n|\n|And| | (|the|)| \xc3\xa9t\xc3\xa9| x|\n");
    // Contractions are chunks of their own, lower case only, and only at a chunk's start.
    assert_chunks("don't I'll you're it's 'S we've he'd x'm o'", "don|'t| I|'ll| you|'re| it|'s| '|S| we|'ve| he|'d| x|'m| o|'");
    assert_chunks("!'s", "!'|s");
    // A whitespace run leaves its last character to a word, but not to a digit or the end.
    assert_chunks("a  1 b\t c   ", "a|  |1| b|\t| c|   ");
    assert_chunks("12345. 7a", "1|2|3|4|5|.| |7|a");
    assert_chunks("'1 '", "'|1| '");
    assert_chunks(" ", " ");
    // No length limit: a long run is one chunk.
    unsigned char run[300];
    memset(run, 'a', sizeof run);
    assert_int_equal(tokenizer_chunk_end(run, sizeof run, 0), sizeof run);
}

// GPT-2's alphabet: printable bytes stand for themselves, ' ' is U+0120, '\n' U+010A, 0xAD
// U+0143; every byte round-trips, and characters outside the alphabet are refused.
static void test_gpt2_spelling(void **state) {
    (void)state;
    unsigned char all[256], spelled[512], back[512];
    for (int b = 0; b < 256; b++) all[b] = (unsigned char)b;
    size_t n = tokenizer_gpt2_spell(all, 256, spelled);
    assert_int_equal(n, 94 + 2 * 162); // '!'..'~' take 1 byte, the rest 2
    assert_int_equal(tokenizer_gpt2_unspell(spelled, n, back), 256);
    assert_memory_equal(back, all, 256);
    const unsigned char text[] = " a\n\xad\xff";
    n = tokenizer_gpt2_spell(text, 5, spelled);
    assert_int_equal(n, 9);
    assert_memory_equal(spelled, "\xc4\xa0" "a" "\xc4\x8a" "\xc5\x83" "\xc3\xbf", 9);
    assert_int_equal(tokenizer_gpt2_unspell((const unsigned char *)" ", 1, back), -1);       // a raw space
    assert_int_equal(tokenizer_gpt2_unspell((const unsigned char *)"\xc5\x84", 2, back), -1); // U+0144
    assert_int_equal(tokenizer_gpt2_unspell((const unsigned char *)"\xc4", 1, back), -1);     // cut short
    assert_int_equal(tokenizer_gpt2_unspell((const unsigned char *)"\xe2\x96\x81", 3, back), -1);
}

// "aaabdaaabac" is one chunk. Pair counts: aa 4, ab 2, the rest 1 -> merge (a,a) = 256,
// giving [256 a b d 256 a b a c]. Now (256,a) and (a,b) both occur twice: the tie goes to
// the lower first id, a = 97 -> (a,b) = 257, giving [256 257 d 256 257 a c]; then
// (256,257) occurs twice -> 258 = "aaab".
static void test_train_hand_case(void **state) {
    (void)state;
    const char *text = "aaabdaaabac";
    Tokenizer t = train_or_fail((const unsigned char *)text, strlen(text), 256 + 3 + 2);
    int want[] = {'a', 'a', 'a', 'b', 256, 257};
    assert_int_equal(t.n_merges, 3);
    assert_memory_equal(t.merges, want, sizeof want);
    assert_int_equal(t.vocab_size, 261);
    assert_int_equal(t.bos_id, 259);
    assert_int_equal(t.eos_id, 260);
    assert_int_equal(t.piece_len[258], 4);
    assert_memory_equal(t.pieces[258], "aaab", 4);
    int tokens[] = {258, 'd', 258, 'a', 'c'};
    assert_tokens(&t, text, false, tokens, 5);
    int with_bos[] = {259, 258, 'a'};
    assert_tokens(&t, "aaaba", true, with_bos, 3);
    tokenizer_free(&t);
}

// Merges never cross chunks: in "xy.xy.xy." the pair (y, .) is never counted, so after (x, y)
// nothing is left to merge and training stops early.
static void test_train_respects_chunks(void **state) {
    (void)state;
    const char *text = "xy.xy.xy.";
    Tokenizer t = train_or_fail((const unsigned char *)text, strlen(text), 300);
    assert_int_equal(t.n_merges, 1);
    assert_int_equal(t.merges[0], 'x');
    assert_int_equal(t.merges[1], 'y');
    assert_int_equal(t.vocab_size, 259);
    tokenizer_free(&t);
}

static void assert_train_matches_reference(const unsigned char *text, size_t len, int vocab_size);

// A chunk has no length limit but a piece does: 300 a's merge into pieces of 2, 4, ..., 64
// bytes, and then (64 a's, 64 a's) is never merged; every piece is distinct.
static void test_train_caps_piece_length(void **state) {
    (void)state;
    unsigned char text[300];
    memset(text, 'a', sizeof text);
    Tokenizer t = train_or_fail(text, sizeof text, 400);
    int longest = 0;
    for (int i = 0; i < t.vocab_size; i++) {
        longest = t.piece_len[i] > longest ? t.piece_len[i] : longest;
        for (int j = 0; j < i; j++)
            assert_false(t.piece_len[i] == t.piece_len[j] && memcmp(t.pieces[i], t.pieces[j], (size_t)t.piece_len[i]) == 0);
    }
    assert_int_equal(longest, TOKENIZER_MAX_PIECE);
    size_t n;
    int *tokens = encode_all(&t, text, sizeof text, false, false, &n);
    assert_true(n >= 300 / TOKENIZER_MAX_PIECE + 1);
    free(tokens);
    assert_roundtrip(&t, text, sizeof text, false, false, "");
    assert_train_matches_reference(text, sizeof text, 400);
    tokenizer_free(&t);
}

static void assert_train_matches_reference(const unsigned char *text, size_t len, int vocab_size) {
    int *want = mallocCheck(2 * (size_t)vocab_size * sizeof *want);
    int n_want = reference_train(text, len, vocab_size, want);
    Tokenizer t = train_or_fail(text, len, vocab_size);
    assert_int_equal(t.n_merges, n_want);
    assert_memory_equal(t.merges, want, 2 * (size_t)n_want * sizeof *want);
    assert_int_equal(t.vocab_size, 256 + n_want + 2);
    tokenizer_free(&t);
    free(want);
}

static void test_train_matches_reference(void **state) {
    (void)state;
    unsigned char *text = sample_text(6000, 1);
    assert_train_matches_reference(text, 6000, 600); // many ties between rare pairs
    free(text);
    // Skewed random bytes: long runs of "letters" >= 0x80, symbols, NULs, and chunk cuts.
    rng_state = 2;
    unsigned char skewed[3000];
    for (size_t i = 0; i < sizeof skewed; i++) {
        static const unsigned char alphabet[] = {'a', 'b', ' ', ' ', 0x80, 0xff, '.', 0, '\n', '7'};
        skewed[i] = alphabet[rng_below((int)sizeof alphabet)];
    }
    assert_train_matches_reference(skewed, sizeof skewed, 500);
}

static void test_train_deterministic(void **state) {
    (void)state;
    unsigned char *text = sample_text(50000, 3);
    Tokenizer a = train_or_fail(text, 50000, 1000), b = train_or_fail(text, 50000, 1000);
    assert_int_equal(a.n_merges, 1000 - 258);
    assert_int_equal(a.n_merges, b.n_merges);
    assert_memory_equal(a.merges, b.merges, 2 * (size_t)a.n_merges * sizeof *a.merges);
    tokenizer_free(&a);
    tokenizer_free(&b);
    free(text);
}

static void test_train_rejects_bad_vocab_size(void **state) {
    (void)state;
    Tokenizer t;
    Error err;
    const unsigned char text[] = "abc";
    assert_int_equal(tokenizer_train_bpe(&t, text, 3, 257, &err), -1);
    assert_non_null(strstr(err.msg, "vocab_size 257"));
    assert_int_equal(tokenizer_train_bpe(&t, text, 3, -5, &err), -1);
    assert_int_equal(tokenizer_train_bpe(&t, text, 3, 1 << 30, &err), -1);
}

// Encoding applies merges by rank, not by position: with (b,c) ranked before (a,b), "abc"
// is [a, bc]; the other way round it is [ab, c].
static void test_encode_rank_order(void **state) {
    (void)state;
    Tokenizer t;
    Error err;
    int bc_first[] = {'b', 'c', 'a', 'b'}, ab_first[] = {'a', 'b', 'b', 'c'};
    assert_int_equal(tokenizer_from_merges(&t, bc_first, 2, &err), 0);
    int want1[] = {'a', 256};
    assert_tokens(&t, "abc", false, want1, 2);
    tokenizer_free(&t);
    assert_int_equal(tokenizer_from_merges(&t, ab_first, 2, &err), 0);
    int want2[] = {256, 'c'};
    assert_tokens(&t, "abc", false, want2, 2);
    tokenizer_free(&t);
}

static void test_encode_matches_reference(void **state) {
    (void)state;
    unsigned char *train = sample_text(20000, 4);
    Tokenizer t = train_or_fail(train, 20000, 700);
    for (int trial = 0; trial < 20; trial++) {
        size_t len = 1 + (size_t)trial * 97;
        unsigned char *s = trial % 4 == 3 ? random_bytes(len, 100 + (uint64_t)trial)
                                          : sample_text(len, 100 + (uint64_t)trial);
        size_t n;
        int *got = encode_all(&t, s, len, false, false, &n);
        int *want = mallocCheck(len * sizeof *want);
        size_t n_want = reference_encode(&t, s, len, want);
        assert_int_equal(n, n_want);
        assert_memory_equal(got, want, n * sizeof *got);
        free(want);
        free(got);
        free(s);
    }
    tokenizer_free(&t);
    free(train);
}

// A tokenizer rebuilt from its merges (as GGUF loading does) has the same pieces.
static void test_from_merges_rebuilds_pieces(void **state) {
    (void)state;
    unsigned char *text = sample_text(20000, 5);
    Tokenizer a = train_or_fail(text, 20000, 500), b;
    Error err;
    assert_int_equal(tokenizer_from_merges(&b, a.merges, a.n_merges, &err), 0);
    assert_int_equal(b.vocab_size, a.vocab_size);
    for (int i = 0; i < a.vocab_size; i++) {
        assert_int_equal(b.piece_len[i], a.piece_len[i]);
        assert_memory_equal(b.pieces[i], a.pieces[i], (size_t)a.piece_len[i]);
    }
    tokenizer_free(&a);
    tokenizer_free(&b);
    free(text);
}

static void test_from_merges_rejects_bad_merges(void **state) {
    (void)state;
    Tokenizer t;
    Error err;
    int forward[] = {'a', 256}; // refers to itself
    assert_int_equal(tokenizer_from_merges(&t, forward, 1, &err), -1);
    assert_non_null(strstr(err.msg, "merge 0"));
    int negative[] = {'a', 'b', -1, 'c'};
    assert_int_equal(tokenizer_from_merges(&t, negative, 2, &err), -1);
    assert_non_null(strstr(err.msg, "merge 1"));
    int repeated[] = {'a', 'b', 'c', 'd', 'a', 'b'};
    assert_int_equal(tokenizer_from_merges(&t, repeated, 3, &err), -1);
    assert_non_null(strstr(err.msg, "repeats merge 0"));
    int doubling[14]; // pieces of 2, 4, ..., 128 bytes: the last is longer than a chunk
    for (int i = 0; i < 7; i++) doubling[2 * i] = doubling[2 * i + 1] = i == 0 ? 'a' : 255 + i;
    assert_int_equal(tokenizer_from_merges(&t, doubling, 7, &err), -1);
    assert_non_null(strstr(err.msg, "merge 6"));
    assert_int_equal(tokenizer_from_merges(&t, doubling, -1, &err), -1);
    assert_int_equal(tokenizer_from_merges(&t, NULL, 0, &err), 0); // bytes only is valid
    assert_int_equal(t.vocab_size, 258);
    tokenizer_free(&t);
}

static void test_bpe_roundtrip(void **state) {
    (void)state;
    unsigned char *train = sample_text(20000, 6);
    Tokenizer t = train_or_fail(train, 20000, 800);
    for (int trial = 0; trial < 50; trial++) {
        size_t len = (size_t)rng_below(3000);
        unsigned char *s = random_bytes(len, 200 + (uint64_t)trial); // NULs, invalid UTF-8
        assert_roundtrip(&t, s, len, trial % 2 == 0, trial % 3 == 0, "");
        free(s);
        s = sample_text(len, 300 + (uint64_t)trial);
        assert_roundtrip(&t, s, len, trial % 2 == 1, false, "");
        free(s);
    }
    assert_roundtrip(&t, (const unsigned char *)"", 0, true, true, "");
    // Text compresses: well under one token per byte.
    size_t n;
    int *tokens = encode_all(&t, train, 20000, false, false, &n);
    assert_true(n < 20000 / 2);
    free(tokens);
    tokenizer_free(&t);
    free(train);
}

static void test_bpe_pieces(void **state) {
    (void)state;
    const char *text = "aaabdaaabac";
    Tokenizer t = train_or_fail((const unsigned char *)text, strlen(text), 261);
    size_t len;
    const unsigned char *p = tokenizer_piece(&t, t.bos_id, 258, &len); // no prefix rule in BPE
    assert_int_equal(len, 4);
    assert_memory_equal(p, "aaab", 4);
    tokenizer_piece(&t, -1, t.bos_id, &len);
    assert_int_equal(len, 0);
    tokenizer_piece(&t, 5, t.eos_id, &len);
    assert_int_equal(len, 0);
    assert_memory_equal(t.pieces[t.bos_id], "<|bos|>", 7); // named for GGUF and display
    tokenizer_free(&t);
}

// ----------------------------------------------------------------------------
// llama2.c tokenizer

enum { SPACE = 259, A, B, C, AB, SPACE_A, SPACE_AB, E_ACUTE, BA, SPACE_ABC, N_HAND };

// A hand-made llama2.c vocabulary: <unk>, BOS, EOS, the 256 byte pieces, then a few pieces
// with the scores the hand-checked cases below rely on.
typedef struct {
    int n;
    char *pieces[400];
    int lens[400];
    float scores[400];
} Vocab;

static void vocab_add(Vocab *v, const char *piece, float score) {
    v->lens[v->n] = (int)strlen(piece);
    v->pieces[v->n] = mallocCheck((size_t)v->lens[v->n] + 1);
    memcpy(v->pieces[v->n], piece, (size_t)v->lens[v->n] + 1);
    v->scores[v->n++] = score;
}

static void hand_vocab(Vocab *v) {
    v->n = 0;
    vocab_add(v, "<unk>", 0);
    vocab_add(v, "\n<s>\n", 0);
    vocab_add(v, "\n</s>\n", 0);
    for (int b = 0; b < 256; b++) {
        char piece[8];
        snprintf(piece, sizeof piece, "<0x%02X>", b);
        vocab_add(v, piece, 0);
    }
    vocab_add(v, " ", -100);
    vocab_add(v, "a", -100);
    vocab_add(v, "b", -100);
    vocab_add(v, "c", -100);
    vocab_add(v, "ab", -1);
    vocab_add(v, " a", -5);
    vocab_add(v, " ab", -2);
    vocab_add(v, "\xc3\xa9", -100);
    vocab_add(v, "ba", -1);     // ties with "ab": the leftmost pair wins
    vocab_add(v, " abc", -2e10f); // below run.c's -1e10 floor: never merged
    assert_int_equal(v->n, N_HAND);
}

static void vocab_free(Vocab *v) {
    for (int i = 0; i < v->n; i++) free(v->pieces[i]);
}

static Tokenizer vocab_tokenizer(const Vocab *v) {
    Tokenizer t;
    Error err;
    if (tokenizer_from_pieces(&t, (const unsigned char *const *)v->pieces, v->lens, v->scores, v->n, &err))
        fail_msg("from_pieces: %s", err.msg);
    return t;
}

// run.c's encode, ported literally: C strings, linear lookup (lowest id on duplicates),
// rescan every adjacent pair after each merge.
static int ref_lookup(const Vocab *v, const char *s) {
    for (int i = 0; i < v->n; i++)
        if (strcmp(v->pieces[i], s) == 0) return i;
    return -1;
}

static int reference_llama2c_encode(const Vocab *v, const char *text, bool bos, int *tokens) {
    char buf[64];
    int n = 0;
    size_t str_len = 0;
    if (bos) tokens[n++] = 1;
    if (text[0] != '\0') tokens[n++] = ref_lookup(v, " ");
    for (const char *c = text; *c != '\0'; c++) {
        if ((*c & 0xC0) != 0x80) str_len = 0;
        buf[str_len++] = *c;
        buf[str_len] = '\0';
        if ((*(c + 1) & 0xC0) == 0x80 && str_len < 4) continue;
        int id = ref_lookup(v, buf);
        if (id != -1) tokens[n++] = id;
        else
            for (size_t i = 0; i < str_len; i++) tokens[n++] = (unsigned char)buf[i] + 3;
        str_len = 0;
    }
    for (;;) {
        float best_score = -1e10f;
        int best_id = -1, best_idx = -1;
        for (int i = 0; i < n - 1; i++) {
            snprintf(buf, sizeof buf, "%s%s", v->pieces[tokens[i]], v->pieces[tokens[i + 1]]);
            int id = ref_lookup(v, buf);
            if (id != -1 && v->scores[id] > best_score) {
                best_score = v->scores[id];
                best_id = id;
                best_idx = i;
            }
        }
        if (best_idx == -1) break;
        tokens[best_idx] = best_id;
        for (int i = best_idx + 1; i < n - 1; i++) tokens[i] = tokens[i + 1];
        n--;
    }
    return n;
}

// Hand-checked, with the scores of hand_vocab:
//   "abc": [" ", a, b, c]; candidates " a" -5, "ab" -1 -> [" ", ab, c]; " ab" -2 -> [" ab", c];
//          " abc" scores below the floor, so it stops.
//   "aba": "ab" and "ba" tie at -1, the leftmost wins -> [" ", ab, a] -> [" ab", a].
//   "éxü": " ", é is a piece, x and ü (c3 bc) fall back to bytes + 3.
static void test_llama2c_hand_cases(void **state) {
    (void)state;
    Vocab v;
    hand_vocab(&v);
    Tokenizer t = vocab_tokenizer(&v);
    assert_int_equal(t.kind, TOKENIZER_LLAMA2C);
    assert_int_equal(t.bos_id, 1);
    assert_int_equal(t.eos_id, 2);
    int abc[] = {1, SPACE_AB, C};
    assert_tokens(&t, "abc", true, abc, 3);
    int aba[] = {SPACE_AB, A};
    assert_tokens(&t, "aba", false, aba, 2);
    int utf8[] = {SPACE, E_ACUTE, 'x' + 3, 0xc3 + 3, 0xbc + 3};
    assert_tokens(&t, "\xc3\xa9x\xc3\xbc", false, utf8, 5);
    int empty[] = {1};
    assert_tokens(&t, "", true, empty, 1); // no dummy prefix for empty text
    tokenizer_free(&t);
    vocab_free(&v);
}

// Random pieces over a small alphabet with random scores, random texts (with invalid UTF-8):
// the encoder equals the literal port of run.c.
static void test_llama2c_matches_reference(void **state) {
    (void)state;
    static const char *units[] = {" ", "a", "b", "c", "\xc3\xa9", "x", "\xff", "\x80", "\xf0\x9f\x98\x80"};
    Vocab v;
    hand_vocab(&v);
    vocab_add(&v, "\xf0\x9f\x98\x80", -100); // a 4-byte codepoint
    rng_state = 7;
    while (v.n < 380) {
        char piece[16] = "";
        int k = 2 + rng_below(3);
        for (int i = 0; i < k; i++) strcat(piece, units[rng_below(4)]);
        vocab_add(&v, piece, (float)rng_below(1000) / -10.0f); // duplicates resolve to the lowest id
    }
    Tokenizer t = vocab_tokenizer(&v);
    for (int trial = 0; trial < 200; trial++) {
        char text[160] = "";
        int k = rng_below(30);
        for (int i = 0; i < k; i++) strcat(text, units[rng_below(9)]);
        int want[200];
        int n_want = reference_llama2c_encode(&v, text, trial % 2 == 0, want);
        size_t n;
        int *got = encode_all(&t, (const unsigned char *)text, strlen(text), trial % 2 == 0, false, &n);
        assert_int_equal(n, n_want);
        assert_memory_equal(got, want, n * sizeof *got);
        free(got);
    }
    tokenizer_free(&t);
    vocab_free(&v);
}

// With BOS the dummy prefix is dropped on decode, so text comes back exactly; without BOS the
// prefix " " stays. Bytes outside the vocabulary come back through "<0xXX>" pieces.
static void test_llama2c_decode(void **state) {
    (void)state;
    Vocab v;
    hand_vocab(&v);
    Tokenizer t = vocab_tokenizer(&v);
    const char *texts[] = {"abc", "aba bab", " a\xc3\xa9\xff\x80xyz\n", "c"};
    for (int i = 0; i < 4; i++) {
        const unsigned char *s = (const unsigned char *)texts[i];
        assert_roundtrip(&t, s, strlen(texts[i]), true, true, "");
        assert_roundtrip(&t, s, strlen(texts[i]), false, false, " ");
    }
    unsigned char *bytes = random_bytes(500, 8); // NULs included: they fall back to <0x00>
    assert_roundtrip(&t, bytes, 500, true, false, "");
    free(bytes);

    size_t len;
    const unsigned char *p = tokenizer_piece(&t, 1, SPACE_AB, &len);
    assert_int_equal(len, 2);
    assert_memory_equal(p, "ab", 2);
    p = tokenizer_piece(&t, A, SPACE_AB, &len);
    assert_int_equal(len, 3);
    assert_memory_equal(p, " ab", 3);
    p = tokenizer_piece(&t, A, 0x41 + 3, &len);
    assert_int_equal(len, 1);
    assert_int_equal(p[0], 'A');
    tokenizer_piece(&t, -1, 1, &len);
    assert_int_equal(len, 0);
    tokenizer_free(&t);
    vocab_free(&v);
}

static void test_from_pieces_rejects(void **state) {
    (void)state;
    Vocab v;
    hand_vocab(&v);
    Tokenizer t;
    Error err;
    const unsigned char *const *pieces = (const unsigned char *const *)v.pieces;
    assert_int_equal(tokenizer_from_pieces(&t, pieces, v.lens, v.scores, 258, &err), -1); // no byte ids
    v.scores[A] = NAN;
    assert_int_equal(tokenizer_from_pieces(&t, pieces, v.lens, v.scores, v.n, &err), -1);
    assert_non_null(strstr(err.msg, "NaN"));
    v.scores[A] = 0;
    v.pieces[SPACE][0] = '_';
    assert_int_equal(tokenizer_from_pieces(&t, pieces, v.lens, v.scores, v.n, &err), -1);
    assert_non_null(strstr(err.msg, "\" \""));
    vocab_free(&v);
}

// --- tokenizer.bin files ---

typedef struct {
    unsigned char *data;
    size_t len, cap;
} Buf;

static void buf_put(Buf *b, const void *p, size_t n) {
    if (b->len + n > b->cap) {
        b->cap = 2 * (b->len + n);
        b->data = reallocCheck(b->data, b->cap);
    }
    memcpy(b->data + b->len, p, n);
    b->len += n;
}

// tokenizer.bin as llama2.c's exporter writes it; token_offsets[i] is where token i starts.
static Buf llama2c_file(const Vocab *v, size_t *token_offsets) {
    Buf b = {0};
    int32_t max_len = 0;
    for (int i = 0; i < v->n; i++)
        if (v->lens[i] > max_len) max_len = v->lens[i];
    buf_put(&b, &max_len, 4);
    for (int i = 0; i < v->n; i++) {
        token_offsets[i] = b.len;
        int32_t len = v->lens[i];
        buf_put(&b, &v->scores[i], 4);
        buf_put(&b, &len, 4);
        buf_put(&b, v->pieces[i], (size_t)len);
    }
    return b;
}

static char test_path[64];

static void write_file(const void *p, size_t n) {
    FILE *f = fopenCheck(test_path, "wb");
    fwriteCheck(p, 1, n, f);
    fcloseCheck(f);
}

// Loading must fail with a message naming the file.
static void assert_load_fails(int vocab_size, const char *why) {
    Tokenizer t;
    Error err;
    assert_int_equal(tokenizer_load_llama2c(&t, test_path, vocab_size, &err), -1);
    assert_non_null(strstr(err.msg, test_path));
    assert_non_null(strstr(err.msg, why));
}

static void test_llama2c_load(void **state) {
    (void)state;
    Vocab v;
    hand_vocab(&v);
    size_t offsets[N_HAND];
    Buf file = llama2c_file(&v, offsets);
    write_file(file.data, file.len);
    Tokenizer t, direct = vocab_tokenizer(&v);
    Error err;
    for (int pass = 0; pass < 2; pass++) { // the model's vocab_size, then "to the end"
        if (tokenizer_load_llama2c(&t, test_path, pass == 0 ? v.n : 0, &err)) fail_msg("%s", err.msg);
        assert_int_equal(t.vocab_size, v.n);
        for (int i = 0; i < v.n; i++) {
            assert_int_equal(t.piece_len[i], v.lens[i]);
            assert_memory_equal(t.pieces[i], v.pieces[i], (size_t)v.lens[i]);
            assert_true(t.scores[i] == v.scores[i]);
        }
        size_t n1, n2;
        const unsigned char *s = (const unsigned char *)"abab c\xc3\xa9";
        int *a = encode_all(&t, s, 9, true, true, &n1), *b = encode_all(&direct, s, 9, true, true, &n2);
        assert_int_equal(n1, n2);
        assert_memory_equal(a, b, n1 * sizeof *a);
        free(a);
        free(b);
        tokenizer_free(&t);
    }
    // run.c reads only the model's vocab_size tokens; the rest of the file is ignored.
    assert_int_equal(tokenizer_load_llama2c(&t, test_path, v.n - 1, &err), 0);
    assert_int_equal(t.vocab_size, v.n - 1);
    tokenizer_free(&t);
    tokenizer_free(&direct);
    free(file.data);
    vocab_free(&v);
}

static void test_llama2c_load_rejects_bad_files(void **state) {
    (void)state;
    Vocab v;
    hand_vocab(&v);
    size_t offsets[N_HAND];
    Buf file = llama2c_file(&v, offsets);
    size_t last = offsets[v.n - 1];

    unlink(test_path);
    assert_load_fails(v.n, "cannot open");
    // Truncated anywhere: in the header, in a token's score/length, in its bytes, or short
    // of the model's vocab_size at a token boundary.
    size_t cuts[] = {0, 2, 4, 6, offsets[10] + 5, offsets[SPACE_AB] + 9, last, file.len - 1};
    for (size_t i = 0; i < sizeof cuts / sizeof *cuts; i++) {
        write_file(file.data, cuts[i]);
        assert_load_fails(v.n, "truncated");
        if (cuts[i] != last) assert_load_fails(0, cuts[i] < 4 ? "truncated" : "");
    }
    write_file(file.data, file.len);
    assert_load_fails(v.n + 1, "truncated");

    Buf bad = {0};
    int32_t header[] = {0, -1, 1 << 30};
    for (int i = 0; i < 3; i++) { // absurd max_token_length
        memcpy(file.data, &header[i], 4);
        write_file(file.data, file.len);
        assert_load_fails(v.n, "max_token_length");
    }
    int32_t max_len = 6;
    memcpy(file.data, &max_len, 4);
    int32_t lens[] = {-1, 7, 1 << 30}; // negative, over max_token_length, absurd
    for (int i = 0; i < 3; i++) {
        bad.len = 0;
        buf_put(&bad, file.data, file.len);
        memcpy(bad.data + offsets[5] + 4, &lens[i], 4);
        write_file(bad.data, bad.len);
        assert_load_fails(v.n, "token 5 has length");
    }
    float nan = NAN;
    bad.len = 0;
    buf_put(&bad, file.data, file.len);
    memcpy(bad.data + offsets[A], &nan, 4);
    write_file(bad.data, bad.len);
    assert_load_fails(v.n, "NaN");
    unlink(test_path);
    free(bad.data);
    free(file.data);
    vocab_free(&v);
}

// ----------------------------------------------------------------------------
// Unicode (unicode.h) and the pre-split on non-ASCII text

static void assert_decode(const char *s, size_t len, uint32_t cp, size_t n) {
    size_t got_n;
    uint32_t got = unicode_decode((const unsigned char *)s, len, &got_n);
    if (got != cp || got_n != n) fail_msg("unicode_decode of %zu bytes: U+%04X in %zu bytes, want U+%04X in %zu", len, got, got_n, cp, n);
}

// llama.cpp's lenient reading (unicode_cpt_from_utf8) and its inverse.
static void test_unicode_decode(void **state) {
    (void)state;
    assert_decode("A", 1, 'A', 1);
    assert_decode("\xc3\xa9", 2, 0xE9, 2);
    assert_decode("\xe2\x82\xac", 3, 0x20AC, 3);
    assert_decode("\xf0\x9f\x98\x80", 4, 0x1F600, 4);
    assert_decode("\xc0\xaf", 2, '/', 2);               // overlong: decoded, not refused
    assert_decode("\xe0\x80\x80", 3, 0, 3);
    assert_decode("\xed\xa0\x80", 3, 0xD800, 3);         // a surrogate
    assert_decode("\xf4\x90\x80\x80", 4, 0x110000, 4);   // past Unicode
    assert_decode("\xf7\xbf\xbf\xbf", 4, 0x1FFFFF, 4);
    assert_decode("\x80", 1, UNICODE_REPLACEMENT, 1);    // a stray continuation
    assert_decode("\xff", 1, UNICODE_REPLACEMENT, 1);
    assert_decode("\xf8\x88\x80\x80\x80", 5, UNICODE_REPLACEMENT, 1);
    assert_decode("\xc3", 1, UNICODE_REPLACEMENT, 1);    // cut short by the end
    assert_decode("\xe2\x82" "A", 3, UNICODE_REPLACEMENT, 1);
    assert_decode("\xc3" "A", 2, UNICODE_REPLACEMENT, 1);
    const uint32_t cps[] = {0, 'A', 0x7F, 0x80, 0x7FF, 0x800, 0xD800, 0xFFFD, 0xFFFF, 0x10000, 0x10FFFF, 0x1FFFFF};
    for (size_t i = 0; i < sizeof cps / sizeof cps[0]; i++) {
        unsigned char buf[4];
        size_t n = unicode_encode(cps[i], buf), back_n;
        assert_int_equal(n, cps[i] < 0x80 ? 1 : cps[i] < 0x800 ? 2 : cps[i] < 0x10000 ? 3 : 4);
        assert_int_equal(unicode_decode(buf, n, &back_n), cps[i]);
        assert_int_equal(back_n, n);
    }
    assert_int_equal(unicode_len_utf8(0x41), 1);
    assert_int_equal(unicode_len_utf8(0xBF), 1);
    assert_int_equal(unicode_len_utf8(0xC0), 2);
    assert_int_equal(unicode_len_utf8(0xEF), 3);
    assert_int_equal(unicode_len_utf8(0xFF), 4);
}

// The classes llama.cpp's unicode.cpp gives (its table is Unicode 15.1, generated from
// UnicodeData.txt; its \s is PropList's White_Space).
static void test_unicode_classes(void **state) {
    (void)state;
    const struct {
        uint32_t cp;
        int cls;
    } cases[] = {
        {'a', UNICODE_LETTER},     {'Z', UNICODE_LETTER},     {'5', UNICODE_NUMBER},    {' ', UNICODE_SPACE},
        {'\t', UNICODE_SPACE},     {'\r', UNICODE_SPACE},     {0x0B, UNICODE_SPACE},    {0x1C, UNICODE_OTHER},
        {0x85, UNICODE_SPACE},     {0xA0, UNICODE_SPACE},     {0x1680, UNICODE_SPACE},  {0x2009, UNICODE_SPACE},
        {0x2028, UNICODE_SPACE},   {0x3000, UNICODE_SPACE},   {0x200B, UNICODE_OTHER},  {0xFEFF, UNICODE_OTHER},
        {0xE9, UNICODE_LETTER},    {0x3B1, UNICODE_LETTER},   {0x4E00, UNICODE_LETTER}, {0xAC00, UNICODE_LETTER},
        {0x2C6, UNICODE_LETTER},   {0x660, UNICODE_NUMBER},   {0xBD, UNICODE_NUMBER},   {0xB2, UNICODE_NUMBER},
        {0x2160, UNICODE_NUMBER},  {0x2460, UNICODE_NUMBER},  {0xFF11, UNICODE_NUMBER}, {0x2014, UNICODE_OTHER},
        {0x1F600, UNICODE_OTHER},  {0x301, UNICODE_OTHER},    {0xFFFD, UNICODE_OTHER},  {'_', UNICODE_OTHER},
        {0xE000, UNICODE_OTHER},   {0x378, UNICODE_OTHER},    {0x10FFFF, UNICODE_OTHER}, {0x110000, UNICODE_OTHER},
        {0x11F04, UNICODE_LETTER}, // Kawi, new in Unicode 15.0
        {0x2EBF0, UNICODE_LETTER}, // CJK Extension I, new in 15.1
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        if (unicode_class(cases[i].cp) != cases[i].cls)
            fail_msg("U+%04X: class %d, want %d", cases[i].cp, unicode_class(cases[i].cp), cases[i].cls);
    // the table covers every codepoint, in order
    assert_int_equal(unicode_ranges[0].first, 0);
    for (int i = 1; i < unicode_n_ranges; i++) assert_true(unicode_ranges[i].first > unicode_ranges[i - 1].first);
    assert_true(unicode_ranges[unicode_n_ranges - 1].first < 0x110000);
}

// The starcoder split on non-ASCII text: Unicode letters, numbers and spaces; an invalid byte
// (U+FFFD to llama.cpp) is a symbol, but the lab's chunk keeps the byte itself.
static void test_chunk_rule_unicode(void **state) {
    (void)state;
    assert_chunks("a\xe2\x80\x94" "b caf\xc3\xa9\xe2\x80\x94na\xc3\xafve", "a|\xe2\x80\x94|b| caf\xc3\xa9|\xe2\x80\x94|na\xc3\xafve");
    assert_chunks(" \xc2\xbd \xd9\xa3x", " |\xc2\xbd| |\xd9\xa3|x");                    // ½ and Arabic-Indic 3 are numbers
    assert_chunks("x\xc2\xa0y", "x|\xc2\xa0|y");                                         // no-break space: whitespace, not ' '
    assert_chunks("x\xe3\x80\x80\xe3\x80\x80y", "x|\xe3\x80\x80|\xe3\x80\x80|y");       // ideographic spaces
    assert_chunks("x\xe3\x80\x80\xe3\x80\x80", "x|\xe3\x80\x80\xe3\x80\x80");
    assert_chunks("it\xe2\x80\x99s", "it|\xe2\x80\x99|s");                               // U+2019 is no apostrophe
    assert_chunks("x\xc0\xa7s", "x|\xc0\xa7s");                                          // an overlong one is
    assert_chunks("x\xc0\xa0y", "x|\xc0\xa0y");                                          // an overlong space too
    assert_chunks("a\xff" "b", "a|\xff|b");
    assert_chunks("a\xe2\x82" "b", "a|\xe2\x82|b");                                      // two U+FFFD: one symbol run
    assert_chunks("\xce\xba\xce\xb1\xe1\xbd\xb6 \xce\xb4\xe1\xbd\xb2", "\xce\xba\xce\xb1\xe1\xbd\xb6| \xce\xb4\xe1\xbd\xb2");
    assert_chunks("e\xcc\x81", "e|\xcc\x81");                                            // a combining mark is no letter
}

// ----------------------------------------------------------------------------
// foreign vocabularies (tokenizer_from_vocab), built by hand

typedef struct {
    const char *texts[400];
    size_t lens[400];
    int types[400];
    float scores[400];
    const char *merges[16];
    size_t merge_lens[16];
    int n, n_merges;
} HandVocab;

static int hv_add(HandVocab *h, const char *text, int type, float score) {
    h->texts[h->n] = text;
    h->lens[h->n] = strlen(text);
    h->types[h->n] = type;
    h->scores[h->n] = score;
    return h->n++;
}

static TokenizerVocab hv_vocab(HandVocab *h, const char *model, const char *pre) {
    TokenizerVocab v = tokenizer_vocab_empty();
    v.model = model, v.model_len = strlen(model);
    if (pre) v.pre = pre, v.pre_len = strlen(pre);
    v.n_tokens = h->n;
    for (int i = 0; i < h->n; i++) h->lens[i] = strlen(h->texts[i]);
    v.tokens = (const unsigned char *const *)h->texts;
    v.token_lens = h->lens;
    v.token_types = h->types, v.n_token_types = (size_t)h->n;
    v.scores = h->scores, v.n_scores = (size_t)h->n;
    for (int i = 0; i < h->n_merges; i++) h->merge_lens[i] = strlen(h->merges[i]);
    if (strcmp(model, "gpt2") == 0) {
        v.merges = (const unsigned char *const *)h->merges, v.merge_lens = h->merge_lens, v.n_merges = h->n_merges;
        v.scores = NULL, v.n_scores = 0;
    }
    return v;
}

static Tokenizer vocab_or_fail(const TokenizerVocab *v) {
    Tokenizer t;
    Error err;
    if (tokenizer_from_vocab(&t, v, &err)) fail_msg("tokenizer_from_vocab: %s", err.msg);
    return t;
}

static void assert_encodes(const Tokenizer *t, const char *s, unsigned flags, const int *want, size_t n_want) {
    size_t n;
    int *tokens = mallocCheck(tokenizer_max_tokens(strlen(s)) * sizeof *tokens);
    n = tokenizer_tokenize(t, (const unsigned char *)s, strlen(s), flags, tokens);
    if (n != n_want) fail_msg("\"%s\": %zu tokens, want %zu", s, n, n_want);
    for (size_t i = 0; i < n; i++)
        if (tokens[i] != want[i]) fail_msg("\"%s\": token %zu is %d, want %d", s, i, tokens[i], want[i]);
    free(tokens);
}

#define ENCODES(t, s, flags, ...) \
    assert_encodes(t, s, flags, (const int[]){__VA_ARGS__}, sizeof((const int[]){__VA_ARGS__}) / sizeof(int))

static void assert_decodes_to(const Tokenizer *t, const int *ids, size_t n, const char *want) {
    size_t len;
    unsigned char *out = tokenizer_decode(t, ids, n, &len);
    assert_int_equal(len, strlen(want));
    assert_memory_equal(out, want, len);
    free(out);
}

// A "gpt2" vocabulary in no order of ours: specials first, merges as strings, a merge whose
// result is no token, a repeated merge, a merge without a space.
static void gpt2_hand_vocab(HandVocab *h, const char *pre) {
    memset(h, 0, sizeof *h);
    hv_add(h, "<|endoftext|>", 3, 0); // 0
    hv_add(h, "<|im_end|>", 1, 0);    // 1: normal in the file, control by llama.cpp's rule
    const char *singles[] = {"a", "b", "c", "\xc4\xa0", "1", "2", "<", "|", ">"}; // 2..10 ("\xc4\xa0" is ' ')
    for (int i = 0; i < 9; i++) hv_add(h, singles[i], 1, 0);
    hv_add(h, "ab", 1, 0);          // 11
    hv_add(h, "\xc4\xa0" "a", 1, 0); // 12: " a"
    hv_add(h, "abc", 1, 0);         // 13
    hv_add(h, "12", 1, 0);          // 14
    hv_add(h, "x\xe2\x98\x85", 1, 0); // 15: a character outside GPT-2's alphabet
    const char *merges[] = {"a b", "\xc4\xa0 a", "ab c", "\xc4\xa0 c", "a b", "xy", "1 2"};
    h->n_merges = 7;
    for (int i = 0; i < 7; i++) h->merges[i] = merges[i];
    (void)pre;
}

static void test_foreign_bpe(void **state) {
    (void)state;
    HandVocab h;
    gpt2_hand_vocab(&h, "smollm");
    TokenizerVocab v = hv_vocab(&h, "gpt2", "smollm");
    Tokenizer t = vocab_or_fail(&v);
    assert_int_equal(t.kind, TOKENIZER_BPE);
    assert_true(t.llama_cpp);
    assert_int_equal(t.vocab_size, 16);
    assert_null(t.merges);
    assert_int_equal(t.n_merges, 7);
    // no BOS / EOS keys: llama.cpp's gpt2 default is id 11 for both, kept when in range
    assert_int_equal(t.bos_id, 11);
    assert_int_equal(t.eos_id, 11);
    assert_false(t.add_bos);
    // <|endoftext|> and <|im_end|> by their texts (the latter made control), EOS by its id
    assert_int_equal(t.n_eog, 3);
    assert_true(tokenizer_is_eog(&t, 0) && tokenizer_is_eog(&t, 1) && tokenizer_is_eog(&t, 11));
    assert_false(tokenizer_is_eog(&t, 2));
    assert_int_equal(t.attr[1], TOKEN_NORMAL | TOKEN_CONTROL);
    assert_int_equal(tokenizer_find_token(&t, "<|im_end|>"), 1);
    assert_int_equal(tokenizer_find_token(&t, "ab"), 11);
    assert_int_equal(tokenizer_find_token(&t, "\xc4\xa0" "c"), -1); // a symbol, no token
    ENCODES(&t, "abc", 0, 13);
    ENCODES(&t, " ab", 0, 5, 11); // (a, b) ranks before (' ', a)
    ENCODES(&t, " a", 0, 12);
    ENCODES(&t, "12", 0, 6, 7);   // the starcoder split: one chunk per digit, the merge never applies
    // " c" merges into "\xc4\xa0" "c", which is no token: llama.cpp writes the one-byte tokens of
    // its spelling; "\xc4" and "\xa0" are none, so the space is lost. A byte with no token is too.
    ENCODES(&t, " c", 0, 4);
    assert_encodes(&t, "z", 0, NULL, 0);
    ENCODES(&t, "<|endoftext|> a", TOKENIZER_PARSE_SPECIAL, 0, 12);
    ENCODES(&t, "<|endoftext|>", 0, 8, 9, 9, 10); // as text: "<|", letters without tokens, "|>"
    ENCODES(&t, "a<|im_end|>", TOKENIZER_PARSE_SPECIAL | TOKENIZER_ADD_BOS | TOKENIZER_ADD_EOS, 11, 2, 1, 11);
    // decoding: GPT-2's alphabet read back; control tokens give nothing; a character outside
    // the alphabet as llama.cpp's "[UNK_BYTE_0x...]"
    assert_decodes_to(&t, (const int[]){12, 0, 13, 1, 5}, 5, " aabc ");
    assert_decodes_to(&t, (const int[]){15}, 1, "x[UNK_BYTE_0xe29885x\xe2\x98\x85]");
    // invalid UTF-8 is U+FFFD, whose bytes have no tokens here: nothing
    assert_encodes(&t, "\xff", 0, NULL, 0);
    tokenizer_free(&t);

    // the gpt2 family: no digit split, so "12" merges
    v = hv_vocab(&h, "gpt2", "gpt-2");
    t = vocab_or_fail(&v);
    ENCODES(&t, "12", 0, 14);
    tokenizer_free(&t);
}

// A SentencePiece vocabulary: <unk>, <s>, </s>, the 256 byte tokens, pieces with scores, a
// user-defined and a control token.
static void spm_hand_vocab(HandVocab *h) {
    memset(h, 0, sizeof *h);
    hv_add(h, "<unk>", 2, 0);
    hv_add(h, "<s>", 3, 0);
    hv_add(h, "</s>", 3, 0);
    static char bytes[256][8];
    for (int b = 0; b < 256; b++) {
        snprintf(bytes[b], sizeof bytes[b], "<0x%02X>", b);
        hv_add(h, bytes[b], 6, 0); // 3 + b
    }
    hv_add(h, "\xe2\x96\x81", 1, -3.0f);         // 259 "▁"
    hv_add(h, "a", 1, -4.0f);                    // 260
    hv_add(h, "b", 1, -4.0f);                    // 261
    hv_add(h, "\xe2\x96\x81" "a", 1, -1.0f);     // 262 "▁a"
    hv_add(h, "ab", 1, -2.0f);                   // 263
    hv_add(h, "aa", 1, -1.0f);                   // 264
    hv_add(h, "<u>", 4, 0);                      // 265 user-defined
    hv_add(h, "<ctl>", 3, 0);                    // 266 control
    hv_add(h, "<unused7>", 3, 0);                // 267 control, named unused
}

static void test_foreign_spm(void **state) {
    (void)state;
    HandVocab h;
    spm_hand_vocab(&h);
    TokenizerVocab v = hv_vocab(&h, "llama", NULL);
    v.add_space_prefix = 0;
    Tokenizer t = vocab_or_fail(&v);
    assert_int_equal(t.kind, TOKENIZER_SPM);
    assert_true(t.llama_cpp);
    assert_int_equal(t.bos_id, 1); // llama.cpp's SentencePiece defaults
    assert_int_equal(t.eos_id, 2);
    assert_true(t.add_bos);
    assert_int_equal(t.n_eog, 1);
    assert_int_equal(t.eog[0], 2);
    assert_int_equal(t.attr[267], TOKEN_CONTROL | TOKEN_UNUSED);
    // highest score first: ("▁", "a") at -1 before ("a", "b") at -2
    ENCODES(&t, " ab", 0, 262, 261);
    ENCODES(&t, "ab", TOKENIZER_ADD_BOS, 1, 263);
    ENCODES(&t, "aaa", 0, 264, 260);              // equal scores: the leftmost pair
    ENCODES(&t, "\xc3\xa9", 0, 3 + 0xC3, 3 + 0xA9); // no token: its bytes
    ENCODES(&t, "\xff" "ab", 0, 3 + 0xFF, 3 + 'a', 3 + 'b'); // 0xFF claims 4 bytes: one symbol
    ENCODES(&t, "a<u>a", 0, 260, 265, 260);        // user-defined: always cut out
    ENCODES(&t, "<ctl>", TOKENIZER_PARSE_SPECIAL, 266);
    ENCODES(&t, "<ctl>", 0, 3 + '<', 3 + 'c', 3 + 't', 3 + 'l', 3 + '>');
    assert_decodes_to(&t, (const int[]){1, 262, 265, 3 + 0xC3, 3 + 0xA9, 266, 0, 263}, 8, " a<u>\xc3\xa9" "ab");
    tokenizer_free(&t);

    // add_space_prefix (llama.cpp's default for "llama"): a space before the text and after a
    // special token
    v.add_space_prefix = -1;
    t = vocab_or_fail(&v);
    ENCODES(&t, "a<u>a", 0, 262, 265, 262);
    ENCODES(&t, "ab", TOKENIZER_ADD_BOS, 1, 262, 261);
    tokenizer_free(&t);
}

// llama.cpp's end-of-generation rules on texts, and the candidates it picks.
static void test_foreign_eog_rules(void **state) {
    (void)state;
    HandVocab h;
    memset(&h, 0, sizeof h);
    const char *singles[] = {"a", "b"};
    for (int i = 0; i < 2; i++) hv_add(&h, singles[i], 1, 0);
    hv_add(&h, "<|end|>", 3, 0);        // 2
    hv_add(&h, "<|return|>", 3, 0);     // 3
    hv_add(&h, "<|call|>", 3, 0);       // 4
    hv_add(&h, "</s>", 1, 0);           // 5
    hv_add(&h, "<|tool_response>", 1, 0); // 6
    hv_add(&h, "<|repo_name|>", 1, 0);  // 7
    hv_add(&h, "<reponame>", 1, 0);     // 8
    hv_add(&h, "<|channel|>", 3, 0);    // 9
    TokenizerVocab v = hv_vocab(&h, "gpt2", "starcoder");
    v.eos_id = 3;
    Tokenizer t = vocab_or_fail(&v);
    // "<|end|>" gives way to "<|return|>" + "<|call|>"; "</s>" to "<|tool_response>"; of two
    // FIM-repo texts the lowest id; gpt-oss's "<|channel|>" is rendered (user-defined)
    assert_int_equal(t.n_eog, 4);
    int want[] = {3, 4, 6, 7};
    for (int i = 0; i < 4; i++) assert_int_equal(t.eog[i], want[i]);
    assert_int_equal(t.attr[2], TOKEN_USER_DEFINED);
    assert_int_equal(t.attr[5], TOKEN_NORMAL);
    assert_int_equal(t.attr[7], TOKEN_NORMAL | TOKEN_CONTROL);
    assert_int_equal(t.attr[8], TOKEN_NORMAL); // not picked: stays normal
    assert_int_equal(t.attr[9], TOKEN_USER_DEFINED);
    tokenizer_free(&t);
}

static void assert_vocab_error(const TokenizerVocab *v, const char *want) {
    Tokenizer t;
    Error err;
    if (tokenizer_from_vocab(&t, v, &err) == 0) fail_msg("a vocabulary that should fail with \"%s\" loaded", want);
    if (!strstr(err.msg, want)) fail_msg("error '%s' should contain '%s'", err.msg, want);
}

static void test_foreign_rejects(void **state) {
    (void)state;
    HandVocab h;
    gpt2_hand_vocab(&h, "smollm");
    TokenizerVocab v = hv_vocab(&h, "gpt2", "qwen2");
    assert_vocab_error(&v, "pre-tokenizer 'qwen2' is not supported");
    v = hv_vocab(&h, "gpt2", NULL);
    assert_vocab_error(&v, "no tokenizer.ggml.pre");
    v = hv_vocab(&h, "bert", "smollm");
    assert_vocab_error(&v, "tokenizer model 'bert' is not supported");
    v = hv_vocab(&h, "gpt2", "smollm");
    v.merges = NULL;
    assert_vocab_error(&v, "no tokenizer.ggml.merges");
    v = hv_vocab(&h, "gpt2", "smollm");
    v.add_bos = 1;
    v.bos_id = 99; // out of range: the default 11 stays, so this loads
    Tokenizer t = vocab_or_fail(&v);
    assert_int_equal(t.bos_id, 11);
    tokenizer_free(&t);
    h.texts[3] = "a"; // "b" -> "a": twice
    v = hv_vocab(&h, "gpt2", "smollm");
    assert_vocab_error(&v, "tokens 2 and 3 have the same text");
    gpt2_hand_vocab(&h, "smollm");
    h.texts[3] = "\xc4"; // a lone lead byte as a token's text
    v = hv_vocab(&h, "gpt2", "smollm");
    assert_vocab_error(&v, "single byte 0xc4");
    gpt2_hand_vocab(&h, "smollm");
    h.n = 8; // no id 11: no default EOS; add_bos needs a BOS
    v = hv_vocab(&h, "gpt2", "smollm");
    v.add_bos = 1;
    assert_vocab_error(&v, "no BOS token");

    spm_hand_vocab(&h);
    v = hv_vocab(&h, "llama", NULL);
    h.scores[262] = NAN;
    assert_vocab_error(&v, "NaN score");
    spm_hand_vocab(&h);
    h.texts[3 + 'A'] = "<0x4g>"; // no token for the byte 'A' (no "A" either)
    v = hv_vocab(&h, "llama", NULL);
    assert_vocab_error(&v, "no token for the byte 0x41");
    spm_hand_vocab(&h);
    h.texts[259] = "_";
    v = hv_vocab(&h, "llama", NULL);
    assert_vocab_error(&v, "no token for U+2581");
    spm_hand_vocab(&h);
    h.texts[265] = "u"; // a one-byte user-defined token with the space prefix
    v = hv_vocab(&h, "llama", NULL);
    assert_vocab_error(&v, "one-byte special token 265");
    spm_hand_vocab(&h);
    h.texts[3] = "<0"; // a byte token too short for llama.cpp's text.substr(3, 2)
    h.texts[3 + 0] = "<0";
    v = hv_vocab(&h, "llama", NULL);
    assert_vocab_error(&v, "no token for the byte 0x00");
    spm_hand_vocab(&h);
    v = hv_vocab(&h, "llama", NULL);
    v.n_scores = 10;
    assert_vocab_error(&v, "10 tokenizer scores for 268 tokens");
}

// The lab's own BPE recognises its BOS / EOS texts only when asked to.
static void test_own_bpe_special_texts(void **state) {
    (void)state;
    const char *text = "aaabdaaabac";
    Tokenizer t = train_or_fail((const unsigned char *)text, strlen(text), 261);
    const char *s = "ba<|eos|>c";
    size_t n;
    int *ids = encode_all(&t, (const unsigned char *)s, strlen(s), false, false, &n);
    for (size_t i = 0; i < n; i++) assert_int_not_equal(ids[i], t.eos_id);
    free(ids);
    ENCODES(&t, s, TOKENIZER_PARSE_SPECIAL, 'b', 'a', t.eos_id, 'c');
    assert_int_equal(tokenizer_find_token(&t, "<|bos|>"), t.bos_id);
    assert_true(tokenizer_is_eog(&t, t.eos_id));
    assert_int_equal(t.n_eog, 1);
    assert_true(t.add_bos);
    tokenizer_free(&t);
}

// ----------------------------------------------------------------------------
// chat templates (chat.h)

static void test_chat_detect(void **state) {
    (void)state;
    assert_int_equal(chat_template_detect(NULL), CHAT_CHATML); // llama.cpp's default
    assert_int_equal(chat_template_detect("chatml"), CHAT_CHATML);
    assert_int_equal(chat_template_detect("gemma"), CHAT_GEMMA);
    assert_int_equal(chat_template_detect("{% for m in messages %}{{'<|im_start|>' + m['role']}}"), CHAT_CHATML);
    assert_int_equal(chat_template_detect("<|im_start|><|im_sep|>"), CHAT_UNKNOWN);        // Phi-4
    assert_int_equal(chat_template_detect("<|im_start|><end_of_utterance>"), CHAT_UNKNOWN); // SmolVLM
    assert_int_equal(chat_template_detect("{{ '<start_of_turn>' + role }}"), CHAT_GEMMA);
    assert_int_equal(chat_template_detect("[INST] <start_of_turn>"), CHAT_UNKNOWN); // Mistral is checked first
    assert_int_equal(chat_template_detect("<|user|><|endoftext|><start_of_turn>"), CHAT_UNKNOWN);
    assert_int_equal(chat_template_detect("{{ bos_token }}"), CHAT_UNKNOWN);
    assert_string_equal(chat_template_name(CHAT_GEMMA), "gemma");
    assert_null(chat_format_user(CHAT_UNKNOWN, "hi"));
}

static void test_chat_apply(void **state) {
    (void)state;
    char *s = chat_format_user(CHAT_CHATML, " hi\n");
    assert_string_equal(s, "<|im_start|>user\n hi\n<|im_end|>\n<|im_start|>assistant\n");
    free(s);
    s = chat_format_user(CHAT_GEMMA, " hi\n");
    assert_string_equal(s, "<start_of_turn>user\nhi<end_of_turn>\n<start_of_turn>model\n");
    free(s);
    const ChatMessage conv[] = {{"system", " Be brief. "}, {"user", "a"}, {"assistant", "b "}, {"user", "c"}};
    s = chat_apply(CHAT_GEMMA, conv, 4, false);
    assert_string_equal(s, "<start_of_turn>user\nBe brief.\n\na<end_of_turn>\n<start_of_turn>model\nb<end_of_turn>\n"
                           "<start_of_turn>user\nc<end_of_turn>\n");
    free(s);
    s = chat_apply(CHAT_CHATML, conv, 2, true);
    assert_string_equal(s, "<|im_start|>system\n Be brief. <|im_end|>\n<|im_start|>user\na<|im_end|>\n<|im_start|>assistant\n");
    free(s);
}

int main(void) {
    snprintf(test_path, sizeof test_path, "/tmp/test_tokenizer.%ld.bin", (long)getpid());
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_chunk_rule),
        cmocka_unit_test(test_gpt2_spelling),
        cmocka_unit_test(test_train_hand_case),
        cmocka_unit_test(test_train_respects_chunks),
        cmocka_unit_test(test_train_caps_piece_length),
        cmocka_unit_test(test_train_matches_reference),
        cmocka_unit_test(test_train_deterministic),
        cmocka_unit_test(test_train_rejects_bad_vocab_size),
        cmocka_unit_test(test_encode_rank_order),
        cmocka_unit_test(test_encode_matches_reference),
        cmocka_unit_test(test_from_merges_rebuilds_pieces),
        cmocka_unit_test(test_from_merges_rejects_bad_merges),
        cmocka_unit_test(test_bpe_roundtrip),
        cmocka_unit_test(test_bpe_pieces),
        cmocka_unit_test(test_llama2c_hand_cases),
        cmocka_unit_test(test_llama2c_matches_reference),
        cmocka_unit_test(test_llama2c_decode),
        cmocka_unit_test(test_from_pieces_rejects),
        cmocka_unit_test(test_llama2c_load),
        cmocka_unit_test(test_llama2c_load_rejects_bad_files),
        cmocka_unit_test(test_unicode_decode),
        cmocka_unit_test(test_unicode_classes),
        cmocka_unit_test(test_chunk_rule_unicode),
        cmocka_unit_test(test_foreign_bpe),
        cmocka_unit_test(test_foreign_spm),
        cmocka_unit_test(test_foreign_eog_rules),
        cmocka_unit_test(test_foreign_rejects),
        cmocka_unit_test(test_own_bpe_special_texts),
        cmocka_unit_test(test_chat_detect),
        cmocka_unit_test(test_chat_apply),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
