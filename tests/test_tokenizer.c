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

#include "tokenizer.h"

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
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
