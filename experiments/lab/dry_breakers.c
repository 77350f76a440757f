// dry_breakers.c: DRY's sequence breakers from text; dry_breakers.h says how.
#include "dry_breakers.h"

#include <stdlib.h>
#include <string.h>

const char *const DRY_DEFAULT_BREAKERS[4] = {"\n", ":", "\"", "*"};

// Append breaker b to the list unless the same one is there.
static void add_breaker(SamplerBreaker **list, int *n, int *capacity, const SamplerBreaker *b) {
    for (int i = 0; i < *n; i++)
        if ((*list)[i].head == b->head && (*list)[i].n_tail == b->n_tail &&
            !memcmp((*list)[i].tail, b->tail, (size_t)b->n_tail * sizeof b->tail[0]))
            return;
    if (*n == *capacity) {
        *capacity = *capacity ? 2 * *capacity : 16;
        *list = reallocCheck(*list, (size_t)*capacity * sizeof **list);
    }
    (*list)[(*n)++] = *b;
}

// Does the token's text (word, len bytes) contain s, or end with a beginning of s? Adds the
// breakers it makes.
static void breakers_of_token(const Tokenizer *tok, int id, const unsigned char *word, size_t len, const char *s,
                              SamplerBreaker **list, int *n, int *cap) {
    size_t slen = strlen(s);
    if (memmem(word, len, s, slen)) {
        add_breaker(list, n, cap, &(SamplerBreaker){.head = id});
        return;
    }
    for (size_t pos = 0; pos < len; pos++) {
        size_t m = 0; // s[0..m) matches the word from pos to its end
        while (m < slen && pos + m < len && word[pos + m] == (unsigned char)s[m]) m++;
        if (pos + m < len || m == 0) continue; // a mismatch inside the word, or none
        int tail[3 * 40 + 3]; // tokenizer_max_tokens of the longest breaker
        SamplerBreaker b = {.head = id};
        size_t nt = tokenizer_encode(tok, (const unsigned char *)s + m, slen - m, false, false, tail);
        b.n_tail = nt < SAMPLER_BREAKER_MAX_TAIL ? (int)nt : SAMPLER_BREAKER_MAX_TAIL;
        memcpy(b.tail, tail, (size_t)b.n_tail * sizeof b.tail[0]);
        add_breaker(list, n, cap, &b);
    }
}

int dry_breakers_from_strings(const Tokenizer *tok, const char *const *strings, int n, SamplerBreaker **out,
                              int *n_out, Error *err) {
    char (*s)[41] = mallocCheck((size_t)(n > 0 ? n : 1) * sizeof *s); // llama.cpp keeps 40 bytes of each
    for (int i = 0; i < n; i++) {
        if (!strings[i][0]) {
            free(s);
            return error_set(err, "dry sequence breaker %d is empty", i + 1);
        }
        snprintf(s[i], sizeof s[i], "%s", strings[i]);
    }
    SamplerBreaker *list = NULL;
    int count = 0, capacity = 0;
    for (int id = 0; id < tok->vocab_size; id++) { // each token's text decoded once, for every breaker
        size_t len;
        unsigned char *word = tokenizer_decode(tok, &id, 1, &len);
        for (int i = 0; i < n; i++) breakers_of_token(tok, id, word, len, s[i], &list, &count, &capacity);
        free(word);
    }
    free(s);
    *out = list;
    *n_out = count;
    return 0;
}
