// sampling_metrics.h: what the sampling experiment measures, as pure functions: the entropy
// of a distribution, the NLL of a token under softmax(logits), and the diversity, repetition
// and drift of generated text, counted over words.
//
// Words: maximal runs of letters, where a letter is an ASCII letter or any byte >= 0x80
// (the tokenizer's letter class, so UTF-8 words, and stray non-ASCII bytes, stay whole),
// compared with ASCII case folded ("And" = "and"). A WordIndex interns words as dense ids
// 0, 1, 2, ... in order of first appearance; indexing the training text first makes
// "id >= number of training words" mean "never seen in training" (drift).
//
// Text statistics over one continuation's word ids, summed over continuations by
// text_stats_add and read as ratios of the sums:
//   distinct-n           distinct n-grams / n-grams (n = 1, 2)
//   repeated 4-gram rate 4-grams equal to an earlier 4-gram of the same continuation / 4-grams
//                        (= 1 - distinct-4: each distinct 4-gram has one first occurrence)
//   drift                words never seen in training / words
// A ratio with nothing to count (no words) is 0.
//
// Tests: make build/tests/test_sampling_metrics && ./build/tests/test_sampling_metrics
#pragma once

#include <stddef.h>

// -sum p ln p over p > 0, accumulated in double: the entropy in nats of p (n).
double entropy_nats(const float *p, int n);

// -ln softmax(logits)[target], with a double-precision log-sum-exp: the NLL in nats of target
// under the distribution the logits (n) define at temperature 1. -inf logits have
// probability 0 (the NLL of a masked target is +inf).
double nll_nats(const float *logits, int n, int target);

typedef struct {
    int n_words;      // distinct words interned: ids are 0 .. n_words - 1
    size_t n_slots;   // hash table size, a power of two, kept at most half full
    int *slots;       // (n_slots) word id, or -1 for an empty slot
    size_t *offsets;  // (n_words) where each word's folded bytes start in text
    int *lengths;     // (n_words)
    char *text;       // folded bytes of every word, back to back
    size_t text_len, text_cap;
    int cap_words;
} WordIndex;

void word_index_init(WordIndex *w);
void word_index_free(WordIndex *w);

// Most words len bytes of text can hold (a word needs a letter, and words are separated).
static inline size_t text_max_words(size_t len) { return (len + 1) / 2; }

// Intern the words of text (len bytes, any bytes) in order; writes their ids to ids
// (text_max_words(len) of room, or NULL to only intern) and returns how many there were.
size_t word_index_add_text(WordIndex *w, const char *text, size_t len, int *ids);

// Number of distinct n-grams among the n_ids - order + 1 n-grams of ids (0 when there are
// none); order >= 1.
long ngram_distinct(const int *ids, long n_ids, int order);

typedef struct {
    long words, unseen_words;  // unseen: id >= the training vocabulary's size
    long unigrams, distinct_unigrams;
    long bigrams, distinct_bigrams;
    long fourgrams, distinct_fourgrams;
} TextStats;

// Add one continuation's word ids (n) to s; ids >= n_known count as unseen in training.
void text_stats_add(TextStats *s, const int *ids, long n, int n_known);

double text_distinct_1(const TextStats *s);
double text_distinct_2(const TextStats *s);
double text_repeat_4gram_rate(const TextStats *s);
double text_drift(const TextStats *s);
