// test_sampling_metrics.c: the sampling experiment's metrics (experiments/sampling/sampling_metrics.h).
//   - entropy and NLL against hand-computed values (uniform, dyadic, one-hot, k/10
//     distributions), NLL stable under a +1000 logit shift and +inf for a masked target;
//   - word splitting and interning: case folding, digits and punctuation as separators,
//     UTF-8 words whole, ids stable while the hash table grows past 5000 words;
//   - distinct n-gram counts on a hand-worked sequence and against a brute-force O(n^2)
//     reference on random ids over small alphabets; distinct-1/2, repeated 4-gram rate and
//     drift on hand-worked continuations, pooled over two, and 0 for empty text.
// Run: make build/tests/test_sampling_metrics && ./build/tests/test_sampling_metrics
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "rng.h"
#include "sampling_metrics.h"

// --- entropy and NLL ---------------------------------------------------------------------

static void test_entropy_hand_computed(void **state) {
    (void)state;
    float uniform[4] = {0.25f, 0.25f, 0.25f, 0.25f};
    assert_true(fabs(entropy_nats(uniform, 4) - log(4.0)) < 1e-7);
    float dyadic[4] = {0.5f, 0.25f, 0.25f, 0.0f}; // 0.5 ln 2 + 2 * 0.25 ln 4 = 1.5 ln 2
    assert_true(fabs(entropy_nats(dyadic, 4) - 1.5 * log(2.0)) < 1e-7);
    float one_hot[3] = {0.0f, 1.0f, 0.0f};
    assert_true(entropy_nats(one_hot, 3) == 0.0);
}

static void test_nll_hand_computed(void **state) {
    (void)state;
    float flat[4] = {0.3f, 0.3f, 0.3f, 0.3f};
    for (int t = 0; t < 4; t++) assert_true(fabs(nll_nats(flat, 4, t) - log(4.0)) < 1e-7);
    // logits ln k give softmax k / 10 for k = 1..4
    float lk[4] = {logf(1.0f), logf(2.0f), logf(3.0f), logf(4.0f)};
    for (int t = 0; t < 4; t++) assert_true(fabs(nll_nats(lk, 4, t) + log((t + 1) / 10.0)) < 1e-6);
    // exp(1000) overflows: the log-sum-exp must subtract the max first
    float shifted[4];
    for (int i = 0; i < 4; i++) shifted[i] = lk[i] + 1000.0f;
    for (int t = 0; t < 4; t++) assert_true(fabs(nll_nats(shifted, 4, t) + log((t + 1) / 10.0)) < 1e-3);
    float masked[3] = {0.0f, -INFINITY, 0.0f};
    assert_true(fabs(nll_nats(masked, 3, 0) - log(2.0)) < 1e-7);
    assert_true(nll_nats(masked, 3, 1) == INFINITY);
}

// --- words -------------------------------------------------------------------------------

static size_t words_of(WordIndex *w, const char *text, int *ids) {
    return word_index_add_text(w, text, strlen(text), ids);
}

static void test_words_split_and_fold(void **state) {
    (void)state;
    WordIndex w;
    word_index_init(&w);
    int ids[32];
    // "And" and "and" fold together; the comma, digits, apostrophe and newline separate
    size_t n = words_of(&w, "And the LORD said, and THE Lord's 12 ark2ark\n", ids);
    int want[] = {0, 1, 2, 3, 0, 1, 2, 4, 5, 5};
    assert_int_equal(n, 10);
    assert_memory_equal(ids, want, sizeof want);
    assert_int_equal(w.n_words, 6);
    // UTF-8 letters are letters: "café" is one word, "naïve" another; "…" (3 bytes) is a word too
    n = words_of(&w, "caf\xc3\xa9 na\xc3\xafve \xe2\x80\xa6 CAF\xc3\xa9", ids);
    assert_int_equal(n, 4);
    assert_int_equal(ids[0], 6);
    assert_int_equal(ids[1], 7);
    assert_int_equal(ids[2], 8);
    assert_int_equal(ids[3], 6);
    // nothing to count
    assert_int_equal(words_of(&w, "", ids), 0);
    assert_int_equal(words_of(&w, " 123, ... ;\n", ids), 0);
    assert_int_equal(word_index_add_text(&w, "a b", 3, NULL), 2);
    word_index_free(&w);
}

// Ids assigned before the table grows are the ids found after it has grown many times.
static void test_word_index_growth(void **state) {
    (void)state;
    enum { N = 5000 };
    WordIndex w;
    word_index_init(&w);
    char word[16];
    for (int i = 0; i < N; i++) {
        snprintf(word, sizeof word, "w%c%c%c", 'a' + i % 26, 'a' + i / 26 % 26, 'a' + i / 676);
        int id;
        assert_int_equal(word_index_add_text(&w, word, strlen(word), &id), 1);
        assert_int_equal(id, i);
    }
    assert_int_equal(w.n_words, N);
    for (int i = 0; i < N; i += 7) {
        snprintf(word, sizeof word, "W%c%c%c", 'A' + i % 26, 'a' + i / 26 % 26, 'a' + i / 676);
        int id;
        word_index_add_text(&w, word, strlen(word), &id);
        assert_int_equal(id, i);
    }
    assert_int_equal(w.n_words, N);
    word_index_free(&w);
}

// --- n-grams and text statistics -----------------------------------------------------------

static void test_ngram_distinct_hand_worked(void **state) {
    (void)state;
    int ids[] = {1, 2, 1, 2, 1, 2};
    assert_int_equal(ngram_distinct(ids, 6, 1), 2);
    assert_int_equal(ngram_distinct(ids, 6, 2), 2); // 12 21 12 21 12
    assert_int_equal(ngram_distinct(ids, 6, 4), 2); // 1212 2121 1212
    assert_int_equal(ngram_distinct(ids, 6, 6), 1);
    assert_int_equal(ngram_distinct(ids, 3, 4), 0);
    assert_int_equal(ngram_distinct(ids, 0, 1), 0);
    int distinct[] = {5, 4, 3, 2, 1};
    assert_int_equal(ngram_distinct(distinct, 5, 2), 4);
}

// Brute force: an n-gram is new when no earlier start holds the same n-gram.
static long ref_distinct(const int *ids, long n_ids, int order) {
    long distinct = 0;
    for (long i = 0; i + order <= n_ids; i++) {
        int seen = 0;
        for (long j = 0; j < i && !seen; j++) seen = memcmp(ids + i, ids + j, (size_t)order * sizeof(int)) == 0;
        distinct += !seen;
    }
    return distinct;
}

static void test_ngram_distinct_random(void **state) {
    (void)state;
    uint64_t rng = rng_seed(7);
    int ids[300];
    for (int alphabet = 2; alphabet <= 40; alphabet *= 3) {
        for (int trial = 0; trial < 5; trial++) {
            long n = 1 + (long)(rng_u64(&rng) % 300);
            for (long i = 0; i < n; i++) ids[i] = (int)(rng_u64(&rng) % alphabet);
            for (int order = 1; order <= 5; order++)
                assert_int_equal(ngram_distinct(ids, n, order), ref_distinct(ids, n, order));
        }
    }
}

static void test_text_stats_pooled(void **state) {
    (void)state;
    WordIndex w;
    word_index_init(&w);
    words_of(&w, "in the beginning god created the heaven", NULL);
    int n_known = w.n_words; // 6: in the beginning god created heaven
    assert_int_equal(n_known, 6);
    int a[16], b[16];
    // a: 10 words, 6 distinct (in the garden of eden god), 5 unseen (garden, of, eden, garden,
    // of); bigrams: in-the the-garden garden-of of-eden eden-in in-the the-garden garden-of
    // of-god -> 6 distinct of 9; 4-grams: 7, one repeat ("in the garden of") -> 6 distinct
    long na = (long)words_of(&w, "In the garden of Eden, in the garden of God.", a);
    assert_int_equal(na, 10);
    // b: 5 words, 1 distinct, none unseen; 1 distinct bigram of 4, 1 distinct 4-gram of 2
    long nb = (long)words_of(&w, "God god GOD god god", b);
    assert_int_equal(nb, 5);
    TextStats s = {0};
    text_stats_add(&s, a, na, n_known);
    assert_true(fabs(text_distinct_1(&s) - 6.0 / 10.0) < 1e-12);
    assert_true(fabs(text_distinct_2(&s) - 6.0 / 9.0) < 1e-12);
    assert_true(fabs(text_repeat_4gram_rate(&s) - 1.0 / 7.0) < 1e-12);
    assert_true(fabs(text_drift(&s) - 5.0 / 10.0) < 1e-12);
    text_stats_add(&s, b, nb, n_known);
    assert_int_equal(s.words, 15);
    assert_true(fabs(text_distinct_1(&s) - 7.0 / 15.0) < 1e-12);
    assert_true(fabs(text_distinct_2(&s) - 7.0 / 13.0) < 1e-12);
    assert_true(fabs(text_repeat_4gram_rate(&s) - 2.0 / 9.0) < 1e-12);
    assert_true(fabs(text_drift(&s) - 5.0 / 15.0) < 1e-12);
    TextStats empty = {0};
    text_stats_add(&empty, a, 0, n_known);
    assert_true(text_distinct_1(&empty) == 0.0 && text_distinct_2(&empty) == 0.0);
    assert_true(text_repeat_4gram_rate(&empty) == 0.0 && text_drift(&empty) == 0.0);
    word_index_free(&w);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_entropy_hand_computed),
        cmocka_unit_test(test_nll_hand_computed),
        cmocka_unit_test(test_words_split_and_fold),
        cmocka_unit_test(test_word_index_growth),
        cmocka_unit_test(test_ngram_distinct_hand_worked),
        cmocka_unit_test(test_ngram_distinct_random),
        cmocka_unit_test(test_text_stats_pooled),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
