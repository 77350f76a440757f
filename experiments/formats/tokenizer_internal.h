// tokenizer_internal.h: what tokenizer.c (the lab's vocabularies, encoding, decoding) and
// tokenizer_vocab.c (foreign GGUF vocabularies) share: hash maps, a binary heap, and the
// private index of a Tokenizer. Not for use outside those two files.
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "tokenizer.h"

#define MAX_VOCAB (1 << 22)       // bounds vocab sizes read from options and files
#define MAX_PIECE_BYTES (1 << 16) // bounds piece lengths read from files

// ----------------------------------------------------------------------------
// hash maps: (int, int) pair -> int, and byte string -> int (keys not owned)

static inline uint64_t tk_mix64(uint64_t x) { // splitmix64's finaliser
    x ^= x >> 30;
    x *= 0xbf58476d1ce4e5b9ULL;
    x ^= x >> 27;
    x *= 0x94d049bb133111ebULL;
    return x ^ (x >> 31);
}

static inline uint64_t tk_hash_bytes(const unsigned char *s, int len) { // FNV-1a
    uint64_t h = 0xcbf29ce484222325ULL;
    for (int i = 0; i < len; i++) h = (h ^ s[i]) * 0x100000001b3ULL;
    return h;
}

static inline size_t tk_table_capacity(size_t expected) { // a power of two at most half full
    size_t cap = 16;
    while (cap < 2 * expected) cap *= 2;
    return cap;
}

#define PAIR_EMPTY UINT64_MAX // no pair of ids in [0, 2^31) has this key

typedef struct {
    uint64_t *keys; // (cap) PAIR_EMPTY marks a free slot
    int *vals;      // (cap)
    size_t cap, n;
} PairMap;

static inline uint64_t pair_key(int a, int b) { return (uint64_t)(uint32_t)a << 32 | (uint32_t)b; }

static inline void pairmap_init(PairMap *m, size_t expected) {
    m->cap = tk_table_capacity(expected);
    m->n = 0;
    m->keys = mallocCheck(m->cap * sizeof *m->keys);
    m->vals = mallocCheck(m->cap * sizeof *m->vals);
    for (size_t i = 0; i < m->cap; i++) m->keys[i] = PAIR_EMPTY;
}

static inline void pairmap_free(PairMap *m) {
    free(m->keys);
    free(m->vals);
    memset(m, 0, sizeof *m);
}

static inline size_t pairmap_slot(const PairMap *m, uint64_t key) { // key's slot, or the free one for it
    size_t i = tk_mix64(key) & (m->cap - 1);
    while (m->keys[i] != PAIR_EMPTY && m->keys[i] != key) i = (i + 1) & (m->cap - 1);
    return i;
}

static inline int pairmap_get(const PairMap *m, int a, int b) { // the value, or -1 when absent
    if (!m->keys) return -1;
    size_t i = pairmap_slot(m, pair_key(a, b));
    return m->keys[i] == PAIR_EMPTY ? -1 : m->vals[i];
}

static inline void pairmap_grow(PairMap *m) {
    PairMap bigger;
    pairmap_init(&bigger, m->cap);
    for (size_t i = 0; i < m->cap; i++) {
        if (m->keys[i] == PAIR_EMPTY) continue;
        size_t j = pairmap_slot(&bigger, m->keys[i]);
        bigger.keys[j] = m->keys[i];
        bigger.vals[j] = m->vals[i];
    }
    bigger.n = m->n;
    pairmap_free(m);
    *m = bigger;
}

static inline void pairmap_put(PairMap *m, int a, int b, int val) {
    uint64_t key = pair_key(a, b);
    size_t i = pairmap_slot(m, key);
    m->vals[i] = val;
    if (m->keys[i] != PAIR_EMPTY) return;
    m->keys[i] = key;
    if (2 * ++m->n > m->cap) pairmap_grow(m);
}

typedef struct {
    const unsigned char *key; // NULL marks a free slot
    uint64_t hash;
    int len, val;
} BytesSlot;

typedef struct {
    BytesSlot *slots; // (cap)
    size_t cap, n;
} BytesMap;

static inline void bytesmap_init(BytesMap *m, size_t expected) {
    m->cap = tk_table_capacity(expected);
    m->n = 0;
    m->slots = callocCheck(m->cap, sizeof *m->slots);
}

static inline BytesSlot *bytesmap_slot(const BytesMap *m, const unsigned char *s, int len, uint64_t h) {
    size_t i = h & (m->cap - 1);
    for (;; i = (i + 1) & (m->cap - 1)) {
        BytesSlot *e = &m->slots[i];
        if (!e->key || (e->hash == h && e->len == len && memcmp(e->key, s, (size_t)len) == 0)) return e;
    }
}

static inline int bytesmap_get(const BytesMap *m, const unsigned char *s, int len) { // value or -1
    if (!m->slots) return -1;
    BytesSlot *e = bytesmap_slot(m, s, len, tk_hash_bytes(s, len));
    return e->key ? e->val : -1;
}

static inline void bytesmap_grow(BytesMap *m) {
    BytesMap bigger;
    bytesmap_init(&bigger, m->cap);
    for (size_t i = 0; i < m->cap; i++) {
        BytesSlot *e = &m->slots[i];
        if (e->key) *bytesmap_slot(&bigger, e->key, e->len, e->hash) = *e;
    }
    bigger.n = m->n;
    free(m->slots);
    *m = bigger;
}

// Store val for s (which must outlive the map) unless s is present; return the stored value.
static inline int bytesmap_add(BytesMap *m, const unsigned char *s, int len, int val) {
    uint64_t h = tk_hash_bytes(s, len);
    BytesSlot *e = bytesmap_slot(m, s, len, h);
    if (e->key) return e->val;
    *e = (BytesSlot){.key = s, .hash = h, .len = len, .val = val};
    if (2 * ++m->n > m->cap) bytesmap_grow(m);
    return val;
}

static inline void bytesmap_free(BytesMap *m) {
    free(m->slots);
    memset(m, 0, sizeof *m);
}

// One binary min-heap serves training (pairs by count) and encoding (merges by rank, bigrams by
// score): entries come out by key, then by tie; value rides along.
typedef struct {
    int64_t key, tie;
    int value;
} HeapEntry;

typedef struct {
    HeapEntry *e;
    size_t n, cap;
} MinHeap;

static inline bool entry_before(HeapEntry x, HeapEntry y) { return x.key != y.key ? x.key < y.key : x.tie < y.tie; }

static inline void minheap_push(MinHeap *h, HeapEntry x) {
    if (h->n == h->cap) {
        h->cap = h->cap ? 2 * h->cap : 1024;
        h->e = reallocCheck(h->e, h->cap * sizeof *h->e);
    }
    size_t i = h->n++;
    while (i > 0 && entry_before(x, h->e[(i - 1) / 2])) {
        h->e[i] = h->e[(i - 1) / 2];
        i = (i - 1) / 2;
    }
    h->e[i] = x;
}

static inline HeapEntry minheap_pop(MinHeap *h) {
    HeapEntry top = h->e[0], last = h->e[--h->n];
    size_t i = 0;
    for (;;) {
        size_t child = 2 * i + 1;
        if (child >= h->n) break;
        if (child + 1 < h->n && entry_before(h->e[child + 1], h->e[child])) child++;
        if (!entry_before(h->e[child], last)) break;
        h->e[i] = h->e[child];
        i = child;
    }
    h->e[i] = last;
    return top;
}

// ----------------------------------------------------------------------------
// the index

struct TokenizerIndex {
    unsigned char *blob;      // every piece back to back; t->pieces point into it
    unsigned char bytes[256]; // bytes[b] == b: what a byte-fallback piece decodes to

    // Texts: what the file spells each token as (a foreign vocabulary's own; the pieces for the
    // lab's), looked up by tokenizer_find_token and the special-token cut.
    unsigned char **texts;   // (vocab_size)
    int *text_len;           // (vocab_size)
    unsigned char *text_blob; // a foreign vocabulary's texts (else NULL: texts are the pieces)
    BytesMap text_id;        // foreign: text -> id (BPE: every symbol's text -> symbol, see below)
    int max_text_len;

    // Special tokens (control, user-defined, unknown), longest text first (ids ascending among
    // equals), and a trie of their texts: node -> (byte -> child), node -> token or -1.
    int *specials;
    int n_specials;
    PairMap trie;
    int *trie_token;
    int n_trie;
    bool cut_always;         // some special is cut out even without TOKENIZER_PARSE_SPECIAL

    // BPE. Symbols are what the merge loop works on: ids below vocab_size are the tokens;
    // a foreign vocabulary adds one past them for each GPT-2-spelled string a merge makes (or a
    // single byte spells) that is not a token.
    PairMap merge_rank;      // (left symbol, right symbol) -> merge rank (the first such merge)
    int *merge_result;       // (n_merges) the symbol merge r makes; -1 for a merge that never applies
    int byte_sym[256];       // the symbol of each byte
    int n_syms;
    unsigned char *sym_blob; // foreign: the texts of the symbols past the tokens
    bool split_digits;       // the starcoder family's \p{N} split (else the gpt2 family's)
    int one_byte_token[256]; // foreign: the token whose text is that one byte, or -1

    // llama2.c and SentencePiece
    BytesMap piece_id;   // llama2.c: piece bytes -> lowest id with those bytes
    int max_piece_len;   // llama2.c: longest piece, bounds the joined pieces looked up
    int dummy_prefix_id; // llama2.c: the " " piece run.c puts before the text
    int byte_token[256]; // SentencePiece: llama.cpp's byte_to_token
    bool add_space_prefix;
};

// Give t vocab_size pieces of the lengths lens (taken over), all pointing into one blob, and
// a zeroed index.
void tokenizer_alloc_pieces(Tokenizer *t, TokenizerKind kind, int vocab_size, int *lens);

// After t->attr and the index's texts are set: the special-token list and its trie.
void tokenizer_index_specials(Tokenizer *t);

// The GPT-2 spelling of byte b (1 or 2 bytes) into out; returns its length.
size_t tokenizer_gpt2_spell_byte(unsigned char b, unsigned char out[2]);
