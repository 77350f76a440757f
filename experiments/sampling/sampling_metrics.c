// sampling_metrics.c: entropy, NLL, and word-level diversity / repetition / drift statistics
// (definitions in sampling_metrics.h).
// Tests: make build/tests/test_sampling_metrics && ./build/tests/test_sampling_metrics
#include "sampling_metrics.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"
#include "corpus.h"

double entropy_nats(const float *p, int n) {
    double h = 0.0;
    for (int i = 0; i < n; i++)
        if (p[i] > 0.0f) h -= (double)p[i] * log((double)p[i]);
    return h;
}

double nll_nats(const float *logits, int n, int target) {
    double max = -INFINITY;
    for (int i = 0; i < n; i++)
        if (logits[i] > max) max = logits[i];
    double sum = 0.0;
    for (int i = 0; i < n; i++) sum += exp((double)logits[i] - max);
    return max + log(sum) - (double)logits[target];
}

// --- words -------------------------------------------------------------------------------

static int is_letter(unsigned char c) { return (unsigned)((c | 0x20) - 'a') < 26u || c >= 0x80; }
static char fold(unsigned char c) { return (char)((unsigned)(c - 'A') < 26u ? c | 0x20 : c); }

void word_index_init(WordIndex *w) {
    memset(w, 0, sizeof *w);
    w->n_slots = 1024;
    w->slots = mallocCheck(w->n_slots * sizeof *w->slots);
    memset(w->slots, -1, w->n_slots * sizeof *w->slots);
}

void word_index_free(WordIndex *w) {
    free(w->slots);
    free(w->offsets);
    free(w->lengths);
    free(w->text);
    memset(w, 0, sizeof *w);
}

// The slot holding the word bytes s (n), or the empty slot where it belongs (linear probing).
static size_t find_slot(const WordIndex *w, const char *s, int n) {
    size_t mask = w->n_slots - 1, i = fnv1a(FNV_OFFSET, s, (size_t)n) & mask;
    for (;; i = (i + 1) & mask) {
        int id = w->slots[i];
        if (id < 0 || (w->lengths[id] == n && memcmp(w->text + w->offsets[id], s, (size_t)n) == 0)) return i;
    }
}

static void grow_table(WordIndex *w) {
    free(w->slots);
    w->n_slots *= 2;
    w->slots = mallocCheck(w->n_slots * sizeof *w->slots);
    memset(w->slots, -1, w->n_slots * sizeof *w->slots);
    for (int id = 0; id < w->n_words; id++) w->slots[find_slot(w, w->text + w->offsets[id], w->lengths[id])] = id;
}

// The id of the word just appended, folded, at text[start..text_len): an existing word's id
// (taking the bytes back off), or a new one.
static int intern_tail(WordIndex *w, size_t start) {
    int n = (int)(w->text_len - start);
    size_t slot = find_slot(w, w->text + start, n);
    if (w->slots[slot] >= 0) {
        w->text_len = start;
        return w->slots[slot];
    }
    if (w->n_words == w->cap_words) {
        w->cap_words = w->cap_words ? 2 * w->cap_words : 1024;
        w->offsets = reallocCheck(w->offsets, (size_t)w->cap_words * sizeof *w->offsets);
        w->lengths = reallocCheck(w->lengths, (size_t)w->cap_words * sizeof *w->lengths);
    }
    int id = w->n_words++;
    w->offsets[id] = start;
    w->lengths[id] = n;
    w->slots[slot] = id;
    if (2 * (size_t)w->n_words > w->n_slots) grow_table(w);
    return id;
}

size_t word_index_add_text(WordIndex *w, const char *text, size_t len, int *ids) {
    const unsigned char *s = (const unsigned char *)text;
    size_t n = 0;
    for (size_t i = 0; i < len;) {
        if (!is_letter(s[i])) {
            i++;
            continue;
        }
        size_t end = i;
        while (end < len && is_letter(s[end])) end++;
        if (w->text_len + (end - i) > w->text_cap) {
            w->text_cap = 2 * (w->text_len + (end - i)) + 4096;
            w->text = reallocCheck(w->text, w->text_cap);
        }
        size_t start = w->text_len;
        for (; i < end; i++) w->text[w->text_len++] = fold(s[i]);
        int id = intern_tail(w, start);
        if (ids) ids[n] = id;
        n++;
    }
    return n;
}

// --- n-grams -----------------------------------------------------------------------------

typedef struct {
    const int *ids;
    int order;
} NgramKey;

// Lexicographic order of the n-grams starting at two positions.
static int compare_ngrams(const void *a, const void *b, void *arg) {
    const NgramKey *k = arg;
    const int *x = k->ids + *(const long *)a, *y = k->ids + *(const long *)b;
    for (int i = 0; i < k->order; i++)
        if (x[i] != y[i]) return x[i] < y[i] ? -1 : 1;
    return 0;
}

long ngram_distinct(const int *ids, long n_ids, int order) {
    long n = n_ids - order + 1;
    if (n <= 0) return 0;
    long *starts = mallocCheck((size_t)n * sizeof *starts);
    for (long i = 0; i < n; i++) starts[i] = i;
    NgramKey key = {ids, order};
    qsort_r(starts, (size_t)n, sizeof *starts, compare_ngrams, &key);
    long distinct = 1;
    for (long i = 1; i < n; i++) distinct += compare_ngrams(&starts[i - 1], &starts[i], &key) != 0;
    free(starts);
    return distinct;
}

static long ngram_count(long n_ids, int order) { return n_ids >= order ? n_ids - order + 1 : 0; }

void text_stats_add(TextStats *s, const int *ids, long n, int n_known) {
    s->words += n;
    for (long i = 0; i < n; i++) s->unseen_words += ids[i] >= n_known;
    s->unigrams += ngram_count(n, 1);
    s->distinct_unigrams += ngram_distinct(ids, n, 1);
    s->bigrams += ngram_count(n, 2);
    s->distinct_bigrams += ngram_distinct(ids, n, 2);
    s->fourgrams += ngram_count(n, 4);
    s->distinct_fourgrams += ngram_distinct(ids, n, 4);
}

static double ratio(long num, long den) { return den > 0 ? (double)num / (double)den : 0.0; }

double text_distinct_1(const TextStats *s) { return ratio(s->distinct_unigrams, s->unigrams); }
double text_distinct_2(const TextStats *s) { return ratio(s->distinct_bigrams, s->bigrams); }
double text_repeat_4gram_rate(const TextStats *s) { return ratio(s->fourgrams - s->distinct_fourgrams, s->fourgrams); }
double text_drift(const TextStats *s) { return ratio(s->unseen_words, s->words); }
