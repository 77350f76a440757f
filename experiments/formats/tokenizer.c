// tokenizer.c: byte-level BPE training/encoding and llama2.c's tokenizer.bin (see tokenizer.h).
//
// BPE training works on unique chunks (words) weighted by their counts. It keeps, for every
// adjacent pair, its total count and the words it occurs in, plus a heap of pairs by
// count; each merge rewrites only the words holding the chosen pair and adjusts the counts
// of the pairs around each occurrence, so a vocabulary of 4096 trains in seconds.
//
// Test: make build/tests/test_tokenizer && ./build/tests/test_tokenizer
#include "tokenizer.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define MAX_VOCAB (1 << 22)       // bounds vocab sizes read from options and files
#define MAX_PIECE_BYTES (1 << 16) // bounds llama2.c piece lengths read from files
#define N_SPECIAL 2               // BPE: BOS and EOS after the merges
static const char BOS_PIECE[] = "<|bos|>";
static const char EOS_PIECE[] = "<|eos|>";

// ----------------------------------------------------------------------------
// hash maps: (int, int) pair -> int, and byte string -> int (keys not owned)

static uint64_t mix64(uint64_t x) { // splitmix64's finaliser
    x ^= x >> 30;
    x *= 0xbf58476d1ce4e5b9ULL;
    x ^= x >> 27;
    x *= 0x94d049bb133111ebULL;
    return x ^ (x >> 31);
}

static uint64_t hash_bytes(const unsigned char *s, int len) { // FNV-1a
    uint64_t h = 0xcbf29ce484222325ULL;
    for (int i = 0; i < len; i++) h = (h ^ s[i]) * 0x100000001b3ULL;
    return h;
}

static size_t table_capacity(size_t expected) { // a power of two at most half full
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

static uint64_t pair_key(int a, int b) { return (uint64_t)(uint32_t)a << 32 | (uint32_t)b; }

static void pairmap_init(PairMap *m, size_t expected) {
    m->cap = table_capacity(expected);
    m->n = 0;
    m->keys = mallocCheck(m->cap * sizeof *m->keys);
    m->vals = mallocCheck(m->cap * sizeof *m->vals);
    for (size_t i = 0; i < m->cap; i++) m->keys[i] = PAIR_EMPTY;
}

static void pairmap_free(PairMap *m) {
    free(m->keys);
    free(m->vals);
}

static size_t pairmap_slot(const PairMap *m, uint64_t key) { // key's slot, or the free one for it
    size_t i = mix64(key) & (m->cap - 1);
    while (m->keys[i] != PAIR_EMPTY && m->keys[i] != key) i = (i + 1) & (m->cap - 1);
    return i;
}

static int pairmap_get(const PairMap *m, int a, int b) { // the value, or -1 when absent
    size_t i = pairmap_slot(m, pair_key(a, b));
    return m->keys[i] == PAIR_EMPTY ? -1 : m->vals[i];
}

static void pairmap_grow(PairMap *m) {
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

static void pairmap_put(PairMap *m, int a, int b, int val) {
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

static void bytesmap_init(BytesMap *m, size_t expected) {
    m->cap = table_capacity(expected);
    m->n = 0;
    m->slots = callocCheck(m->cap, sizeof *m->slots);
}

static BytesSlot *bytesmap_slot(const BytesMap *m, const unsigned char *s, int len, uint64_t h) {
    size_t i = h & (m->cap - 1);
    for (;; i = (i + 1) & (m->cap - 1)) {
        BytesSlot *e = &m->slots[i];
        if (!e->key || (e->hash == h && e->len == len && memcmp(e->key, s, len) == 0)) return e;
    }
}

static int bytesmap_get(const BytesMap *m, const unsigned char *s, int len) { // value or -1
    BytesSlot *e = bytesmap_slot(m, s, len, hash_bytes(s, len));
    return e->key ? e->val : -1;
}

static void bytesmap_grow(BytesMap *m) {
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
static int bytesmap_add(BytesMap *m, const unsigned char *s, int len, int val) {
    uint64_t h = hash_bytes(s, len);
    BytesSlot *e = bytesmap_slot(m, s, len, h);
    if (e->key) return e->val;
    *e = (BytesSlot){.key = s, .hash = h, .len = len, .val = val};
    if (2 * ++m->n > m->cap) bytesmap_grow(m);
    return val;
}

// One binary min-heap serves training (pairs by count) and encoding (merges by rank): entries
// come out by key, then by tie; value rides along.
typedef struct {
    int64_t key, tie;
    int value;
} HeapEntry;

typedef struct {
    HeapEntry *e;
    size_t n, cap;
} MinHeap;

static bool entry_before(HeapEntry x, HeapEntry y) { return x.key != y.key ? x.key < y.key : x.tie < y.tie; }

static void minheap_push(MinHeap *h, HeapEntry x) {
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

static HeapEntry minheap_pop(MinHeap *h) {
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
// the pre-split rule (documented in tokenizer.h)

enum { LETTER, DIGIT, SPACE, SYMBOL, BOUNDARY };

static int byte_class(unsigned char c) {
    if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c >= 0x80) return LETTER;
    if (c >= '0' && c <= '9') return DIGIT;
    if (c == ' ' || (c >= '\t' && c <= '\r')) return SPACE;
    return SYMBOL;
}

// The class of text[i] as GPT-2's regex sees it: digits were split off first, so a digit,
// like the end of the text, bounds the stretch it works on.
static int class_at(const unsigned char *text, size_t len, size_t i) {
    int cls = i < len ? byte_class(text[i]) : BOUNDARY;
    return cls == DIGIT ? BOUNDARY : cls;
}

// GPT-2's contractions 's 't 'm 'd 're 've 'll: the length of the one at pos, or 0.
static size_t contraction_len(const unsigned char *text, size_t len, size_t pos) {
    if (text[pos] != '\'' || class_at(text, len, pos + 1) == BOUNDARY) return 0;
    unsigned char c1 = text[pos + 1];
    if (c1 == 's' || c1 == 't' || c1 == 'm' || c1 == 'd') return 2;
    if (class_at(text, len, pos + 2) == BOUNDARY) return 0;
    unsigned char c2 = text[pos + 2];
    return (c1 == 'r' && c2 == 'e') || (c1 == 'v' && c2 == 'e') || (c1 == 'l' && c2 == 'l') ? 3 : 0;
}

size_t tokenizer_chunk_end(const unsigned char *text, size_t len, size_t pos) {
    if (byte_class(text[pos]) == DIGIT) return pos + 1;
    size_t n = contraction_len(text, len, pos);
    if (n > 0) return pos + n;
    // " ?\p{L}+" and " ?[^\s\p{L}\p{N}]+": an optional space, then a run of one class.
    size_t i = text[pos] == ' ' ? pos + 1 : pos;
    int cls = class_at(text, len, i);
    if (cls == LETTER || cls == SYMBOL) {
        while (class_at(text, len, i) == cls) i++;
        return i;
    }
    // "\s+(?!\S)|\s+": a whitespace run leaves its last character to a word after it.
    size_t end = pos;
    while (class_at(text, len, end) == SPACE) end++;
    return end - pos > 1 && class_at(text, len, end) != BOUNDARY ? end - 1 : end;
}

// ----------------------------------------------------------------------------
// building a Tokenizer

struct TokenizerIndex {
    unsigned char *blob;      // every piece back to back; t->pieces point into it
    unsigned char bytes[256]; // bytes[b] == b: what a byte-fallback piece decodes to
    PairMap merge_rank;       // BPE: (left id, right id) -> merge index
    BytesMap piece_id;        // llama2.c: piece bytes -> lowest id with those bytes
    int max_piece_len;        // llama2.c: longest piece, bounds the joined pieces looked up
    int dummy_prefix_id;      // llama2.c: the " " piece run.c puts before the text
};

// Give t vocab_size pieces of the lengths lens (taken over), all pointing into one blob.
static void alloc_pieces(Tokenizer *t, TokenizerKind kind, int vocab_size, int *lens) {
    memset(t, 0, sizeof *t);
    t->kind = kind;
    t->vocab_size = vocab_size;
    t->piece_len = lens;
    t->pieces = mallocCheck((size_t)vocab_size * sizeof *t->pieces);
    t->index = callocCheck(1, sizeof *t->index);
    size_t total = 0;
    for (int i = 0; i < vocab_size; i++) total += (size_t)lens[i];
    t->index->blob = mallocCheck(total);
    size_t off = 0;
    for (int i = 0; i < vocab_size; off += (size_t)lens[i], i++) t->pieces[i] = t->index->blob + off;
    for (int b = 0; b < 256; b++) t->index->bytes[b] = (unsigned char)b;
}

void tokenizer_free(Tokenizer *t) {
    if (t->index) {
        free(t->index->blob);
        if (t->kind == TOKENIZER_BPE) pairmap_free(&t->index->merge_rank);
        else free(t->index->piece_id.slots);
        free(t->index);
    }
    free(t->pieces);
    free(t->piece_len);
    free(t->scores);
    free(t->merges);
    memset(t, 0, sizeof *t);
}

int tokenizer_from_merges(Tokenizer *t, const int *merges, int n_merges, Error *err) {
    memset(t, 0, sizeof *t);
    if (n_merges < 0 || n_merges > MAX_VOCAB - 256 - N_SPECIAL)
        return error_set(err, "BPE merge count %d is out of range [0, %d]", n_merges,
                         MAX_VOCAB - 256 - N_SPECIAL);
    int vocab_size = 256 + n_merges + N_SPECIAL;
    int *lens = mallocCheck((size_t)vocab_size * sizeof *lens);
    PairMap rank;
    pairmap_init(&rank, (size_t)n_merges);
    for (int b = 0; b < 256; b++) lens[b] = 1;
    for (int i = 0; i < n_merges; i++) {
        int a = merges[2 * i], b = merges[2 * i + 1], id = 256 + i, rc = 0;
        if (a < 0 || a >= id || b < 0 || b >= id)
            rc = error_set(err, "BPE merge %d joins ids %d and %d; both must be earlier tokens, in [0, %d)",
                           i, a, b, id);
        else if (lens[a] + lens[b] > TOKENIZER_MAX_PIECE)
            rc = error_set(err, "BPE merge %d makes a %d-byte piece, longer than the %d bytes allowed", i,
                           lens[a] + lens[b], TOKENIZER_MAX_PIECE);
        else if (pairmap_get(&rank, a, b) >= 0)
            rc = error_set(err, "BPE merge %d repeats merge %d (%d, %d)", i, pairmap_get(&rank, a, b), a, b);
        if (rc) {
            free(lens);
            pairmap_free(&rank);
            return rc;
        }
        pairmap_put(&rank, a, b, i);
        lens[id] = lens[a] + lens[b];
    }
    int bos = 256 + n_merges, eos = bos + 1;
    lens[bos] = (int)strlen(BOS_PIECE);
    lens[eos] = (int)strlen(EOS_PIECE);

    alloc_pieces(t, TOKENIZER_BPE, vocab_size, lens);
    t->index->merge_rank = rank;
    t->n_merges = n_merges;
    t->merges = mallocCheck(2 * (size_t)n_merges * sizeof *t->merges);
    if (n_merges > 0) memcpy(t->merges, merges, 2 * (size_t)n_merges * sizeof *merges);
    for (int b = 0; b < 256; b++) t->pieces[b][0] = (unsigned char)b;
    for (int i = 0; i < n_merges; i++) {
        int a = merges[2 * i], b = merges[2 * i + 1];
        memcpy(t->pieces[256 + i], t->pieces[a], (size_t)lens[a]);
        memcpy(t->pieces[256 + i] + lens[a], t->pieces[b], (size_t)lens[b]);
    }
    memcpy(t->pieces[bos], BOS_PIECE, (size_t)lens[bos]);
    memcpy(t->pieces[eos], EOS_PIECE, (size_t)lens[eos]);
    t->bos_id = bos;
    t->eos_id = eos;
    return 0;
}

// ----------------------------------------------------------------------------
// GPT-2's byte-level alphabet: the printable bytes '!'..'~', 0xA1..0xAC and 0xAE..0xFF stand
// for themselves (as Latin-1 codepoints); the other 68 bytes, in order, are U+0100..U+0143.

static bool gpt2_printable(int b) { return (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE; }

static int gpt2_codepoint(unsigned char b) {
    if (gpt2_printable(b)) return b;
    if (b < '!') return 0x100 + b;                    // 0x00..0x20
    if (b <= 0xA0) return 0x100 + ('!' + b - 0x7F);   // 0x7F..0xA0
    return 0x143;                                     // 0xAD
}

size_t tokenizer_gpt2_spell(const unsigned char *bytes, size_t len, unsigned char *out) {
    size_t n = 0;
    for (size_t i = 0; i < len; i++) {
        int cp = gpt2_codepoint(bytes[i]);
        if (cp < 0x80) {
            out[n++] = (unsigned char)cp;
        } else {
            out[n++] = (unsigned char)(0xC0 | cp >> 6);
            out[n++] = (unsigned char)(0x80 | (cp & 0x3F));
        }
    }
    return n;
}

long tokenizer_gpt2_unspell(const unsigned char *s, size_t len, unsigned char *out) {
    static int byte_of[0x144]; // codepoint -> byte + 1; 0 outside the alphabet
    if (!byte_of['!'])
        for (int b = 0; b < 256; b++) byte_of[gpt2_codepoint((unsigned char)b)] = b + 1;
    long n = 0;
    for (size_t i = 0; i < len;) {
        int cp = -1;
        if (s[i] < 0x80) {
            cp = s[i++];
        } else if ((s[i] & 0xE0) == 0xC0 && i + 1 < len && (s[i + 1] & 0xC0) == 0x80) {
            cp = (s[i] & 0x1F) << 6 | (s[i + 1] & 0x3F);
            i += 2;
        }
        if (cp < 0 || cp >= 0x144 || byte_of[cp] == 0) return -1;
        out[n++] = (unsigned char)(byte_of[cp] - 1);
    }
    return n;
}

// The id of a spelled piece among the first n tokens, or -1; buf holds len bytes.
static int gpt2_lookup(const BytesMap *ids, const unsigned char *s, size_t len, unsigned char *buf, int n) {
    long k = tokenizer_gpt2_unspell(s, len, buf);
    int id = k < 0 ? -1 : bytesmap_get(ids, buf, (int)k);
    return id < n ? id : -1;
}

// The merges' (left, right) ids, into pairs; piece_bytes[i] (owned by the caller) gets the
// unspelled bytes of merge token i (< 256 + n_merges), piece_lens[i] their count, and ids
// maps them back to i.
static int gpt2_merge_ids(const unsigned char *const *tokens, const size_t *token_lens,
                          const unsigned char *const *merges, const size_t *merge_lens, int n_merges,
                          unsigned char **piece_bytes, int *piece_lens, BytesMap *ids, int *pairs, Error *err) {
    for (int i = 0; i < 256 + n_merges; i++) {
        piece_bytes[i] = mallocCheck(token_lens[i] + 1);
        long k = tokenizer_gpt2_unspell(tokens[i], token_lens[i], piece_bytes[i]);
        piece_lens[i] = (int)(k < INT_MAX ? k : INT_MAX);
        if (k < 0) return error_set(err, "gpt2 token %d is not spelled in GPT-2's alphabet", i);
        if (i < 256 && (k != 1 || piece_bytes[i][0] != i))
            return error_set(err, "gpt2 token %d is not the byte 0x%02x (bytes come first, in order)", i, i);
        if (k > TOKENIZER_MAX_PIECE || bytesmap_add(ids, piece_bytes[i], (int)k, i) != i)
            return error_set(err, "gpt2 token %d is longer than %d bytes or repeats an earlier token", i,
                             TOKENIZER_MAX_PIECE);
    }
    size_t longest = 0;
    for (int i = 0; i < n_merges; i++) longest = merge_lens[i] > longest ? merge_lens[i] : longest;
    unsigned char *buf = mallocCheck(longest + 1);
    int rc = 0;
    for (int i = 0; i < n_merges && rc == 0; i++) {
        const unsigned char *m = merges[i];
        size_t at = 1; // llama.cpp splits at the first space after the first byte
        while (at < merge_lens[i] && m[at] != ' ') at++;
        int a = -1, b = -1;
        if (at < merge_lens[i]) {
            a = gpt2_lookup(ids, m, at, buf, 256 + i);
            b = gpt2_lookup(ids, m + at + 1, merge_lens[i] - at - 1, buf, 256 + i);
        }
        if (a < 0 || b < 0)
            rc = error_set(err, "gpt2 merge %d \"%.*s\" is not two earlier tokens joined by a space", i,
                           (int)(merge_lens[i] < 60 ? merge_lens[i] : 60), (const char *)m);
        pairs[2 * i] = a;
        pairs[2 * i + 1] = b;
    }
    free(buf);
    return rc;
}

int tokenizer_from_gpt2(Tokenizer *t, const unsigned char *const *tokens, const size_t *token_lens,
                        int n_tokens, const unsigned char *const *merges, const size_t *merge_lens,
                        int n_merges, Error *err) {
    memset(t, 0, sizeof *t);
    if (n_merges < 0 || n_merges > MAX_VOCAB || n_tokens != 256 + n_merges + N_SPECIAL)
        return error_set(err, "a gpt2 vocabulary of %d tokens and %d merges is not in our layout (256 bytes, "
                              "one token per merge, BOS, EOS)", n_tokens, n_merges);
    unsigned char **piece_bytes = callocCheck((size_t)n_tokens, sizeof *piece_bytes);
    int *piece_lens = mallocCheck((size_t)n_tokens * sizeof *piece_lens);
    int *pairs = mallocCheck(2 * (size_t)n_merges * sizeof *pairs);
    BytesMap ids;
    bytesmap_init(&ids, (size_t)n_tokens);
    int rc = gpt2_merge_ids(tokens, token_lens, merges, merge_lens, n_merges, piece_bytes, piece_lens, &ids,
                            pairs, err);
    if (rc == 0) rc = tokenizer_from_merges(t, pairs, n_merges, err);
    for (int i = 256; i < t->bos_id && rc == 0; i++)
        if (piece_lens[i] != t->piece_len[i] || memcmp(piece_bytes[i], t->pieces[i], (size_t)piece_lens[i]) != 0)
            rc = error_set(err, "gpt2 token %d is not the piece its merge %d makes", i, i - 256);
    for (int i = t->bos_id; i < n_tokens && rc == 0; i++) // special tokens are raw text, not spelled
        if (token_lens[i] != (size_t)t->piece_len[i] || memcmp(tokens[i], t->pieces[i], token_lens[i]) != 0)
            rc = error_set(err, "gpt2 token %d is not our %s text \"%s\"", i, i == t->bos_id ? "BOS" : "EOS",
                           i == t->bos_id ? BOS_PIECE : EOS_PIECE);
    free(ids.slots);
    for (int i = 0; i < n_tokens; i++) free(piece_bytes[i]);
    free(piece_bytes);
    free(piece_lens);
    free(pairs);
    if (rc && t->vocab_size) tokenizer_free(t);
    return rc;
}

int tokenizer_from_pieces(Tokenizer *t, const unsigned char *const *pieces, const int *lens,
                          const float *scores, int vocab_size, Error *err) {
    memset(t, 0, sizeof *t);
    if (vocab_size < 259 || vocab_size > MAX_VOCAB)
        return error_set(err, "llama2.c vocab_size %d is out of range [259, %d] (ids 3..258 are the bytes)",
                         vocab_size, MAX_VOCAB);
    for (int i = 0; i < vocab_size; i++) {
        if (lens[i] < 0 || lens[i] > MAX_PIECE_BYTES)
            return error_set(err, "token %d has length %d, outside [0, %d]", i, lens[i], MAX_PIECE_BYTES);
        if (isnan(scores[i])) return error_set(err, "token %d has a NaN score", i);
    }
    int *own_lens = mallocCheck((size_t)vocab_size * sizeof *own_lens);
    memcpy(own_lens, lens, (size_t)vocab_size * sizeof *lens);
    alloc_pieces(t, TOKENIZER_LLAMA2C, vocab_size, own_lens);
    t->scores = mallocCheck((size_t)vocab_size * sizeof *t->scores);
    memcpy(t->scores, scores, (size_t)vocab_size * sizeof *scores);
    TokenizerIndex *idx = t->index;
    bytesmap_init(&idx->piece_id, (size_t)vocab_size);
    for (int i = 0; i < vocab_size; i++) {
        if (lens[i] > 0) memcpy(t->pieces[i], pieces[i], (size_t)lens[i]);
        bytesmap_add(&idx->piece_id, t->pieces[i], lens[i], i);
        if (lens[i] > idx->max_piece_len) idx->max_piece_len = lens[i];
    }
    idx->dummy_prefix_id = bytesmap_get(&idx->piece_id, (const unsigned char *)" ", 1);
    if (idx->dummy_prefix_id < 0) {
        tokenizer_free(t);
        return error_set(err, "no \" \" piece, which run.c's encoder puts before every text");
    }
    t->bos_id = 1;
    t->eos_id = 2;
    return 0;
}

// ----------------------------------------------------------------------------
// BPE training

typedef struct {
    int *ids;      // (len) the chunk as current token ids
    int len;
    int64_t count; // occurrences of the chunk in the text
} Word;

typedef struct {
    int a, b;
    int64_t count; // occurrences across all words, weighted by word count
    int *words;    // indices of words holding the pair (some may no longer hold it)
    int n_words, cap_words;
    bool dirty;    // count changed during the current merge
    bool banned;   // its joined piece exists already or is too long: never merged
} Pair;


typedef struct {
    Word *words;
    int n_words;
    Pair *pairs;
    int n_pairs, cap_pairs;
    PairMap pair_index; // (a, b) -> index in pairs
    MinHeap heap;       // pairs as pushed: key -count (most frequent first), tie (a, b) (lowest
                        // ids first), value the pair; stale once its count differs
    int *dirty;         // pairs whose count changed during the current merge
    int n_dirty, cap_dirty;
    unsigned char **pieces; // (256 + merges made) the bytes of each token so far
    int *piece_len;
    int n_pieces, cap_pieces;
    BytesMap piece_set;     // every piece so far, and BOS's and EOS's text
} BpeTrainer;

// Append a piece (copied) as the next token.
static void trainer_add_piece(BpeTrainer *tr, const unsigned char *bytes, int len) {
    if (tr->n_pieces == tr->cap_pieces) {
        tr->cap_pieces = tr->cap_pieces ? 2 * tr->cap_pieces : 1024;
        tr->pieces = reallocCheck(tr->pieces, (size_t)tr->cap_pieces * sizeof *tr->pieces);
        tr->piece_len = reallocCheck(tr->piece_len, (size_t)tr->cap_pieces * sizeof *tr->piece_len);
    }
    unsigned char *p = mallocCheck((size_t)len);
    memcpy(p, bytes, (size_t)len);
    tr->pieces[tr->n_pieces] = p;
    tr->piece_len[tr->n_pieces] = len;
    bytesmap_add(&tr->piece_set, p, len, tr->n_pieces++);
}

// Would merging (a, b) make a new piece of at most TOKENIZER_MAX_PIECE bytes? buf holds that many.
static bool makes_new_piece(const BpeTrainer *tr, int a, int b, unsigned char *buf) {
    int la = tr->piece_len[a], lb = tr->piece_len[b];
    if (la + lb > TOKENIZER_MAX_PIECE) return false;
    memcpy(buf, tr->pieces[a], (size_t)la);
    memcpy(buf + la, tr->pieces[b], (size_t)lb);
    return bytesmap_get(&tr->piece_set, buf, la + lb) < 0;
}

// The most frequent pair that makes a new piece (ties to the lowest ids), or -1 when no
// pair is left.
static int best_pair(BpeTrainer *tr) {
    unsigned char buf[TOKENIZER_MAX_PIECE];
    while (tr->heap.n > 0) {
        HeapEntry top = minheap_pop(&tr->heap);
        Pair *pair = &tr->pairs[top.value];
        if (-top.key != pair->count || pair->banned) continue;
        if (makes_new_piece(tr, pair->a, pair->b, buf)) return top.value;
        pair->banned = true;
    }
    return -1;
}

static int pair_find_or_add(BpeTrainer *tr, int a, int b) {
    int p = pairmap_get(&tr->pair_index, a, b);
    if (p >= 0) return p;
    if (tr->n_pairs == tr->cap_pairs) {
        tr->cap_pairs = tr->cap_pairs ? 2 * tr->cap_pairs : 4096;
        tr->pairs = reallocCheck(tr->pairs, (size_t)tr->cap_pairs * sizeof *tr->pairs);
    }
    p = tr->n_pairs++;
    tr->pairs[p] = (Pair){.a = a, .b = b};
    pairmap_put(&tr->pair_index, a, b, p);
    return p;
}

// Add delta occurrences of (a, b) found in word w; remember the word when the pair gains it.
static void pair_change(BpeTrainer *tr, int a, int b, int64_t delta, int w) {
    int p = pair_find_or_add(tr, a, b); // may move tr->pairs
    Pair *pair = &tr->pairs[p];
    pair->count += delta;
    // A word joins a pair's list only while that pair's newest token is being created, one
    // word at a time, so checking the last entry keeps the list free of repeats.
    if (delta > 0 && (pair->n_words == 0 || pair->words[pair->n_words - 1] != w)) {
        if (pair->n_words == pair->cap_words) {
            pair->cap_words = pair->cap_words ? 2 * pair->cap_words : 4;
            pair->words = reallocCheck(pair->words, (size_t)pair->cap_words * sizeof *pair->words);
        }
        pair->words[pair->n_words++] = w;
    }
    if (!pair->dirty) {
        pair->dirty = true;
        if (tr->n_dirty == tr->cap_dirty) {
            tr->cap_dirty = tr->cap_dirty ? 2 * tr->cap_dirty : 1024;
            tr->dirty = reallocCheck(tr->dirty, (size_t)tr->cap_dirty * sizeof *tr->dirty);
        }
        tr->dirty[tr->n_dirty++] = p;
    }
}

// Push the new counts of the pairs that changed, so the heap holds every live count.
static void push_dirty_pairs(BpeTrainer *tr) {
    for (int i = 0; i < tr->n_dirty; i++) {
        Pair *pair = &tr->pairs[tr->dirty[i]];
        pair->dirty = false;
        if (pair->count > 0)
            minheap_push(&tr->heap, (HeapEntry){-pair->count, (int64_t)pair->a << 32 | pair->b, tr->dirty[i]});
    }
    tr->n_dirty = 0;
}

// Unique chunks of text with their counts, in order of first appearance, as byte ids.
static void count_words(BpeTrainer *tr, const unsigned char *text, size_t len) {
    BytesMap seen; // a text of len bytes has at most len distinct chunks; the map grows
    bytesmap_init(&seen, len < (1 << 16) ? len : 1 << 16);
    int cap = 0;
    for (size_t pos = 0, end; pos < len; pos = end) {
        end = tokenizer_chunk_end(text, len, pos);
        int w = bytesmap_add(&seen, text + pos, (int)(end - pos), tr->n_words);
        if (w == tr->n_words) {
            if (tr->n_words == cap) {
                cap = cap ? 2 * cap : 4096;
                tr->words = reallocCheck(tr->words, (size_t)cap * sizeof *tr->words);
            }
            Word *word = &tr->words[tr->n_words++];
            word->len = (int)(end - pos);
            word->ids = mallocCheck((size_t)word->len * sizeof *word->ids);
            for (int i = 0; i < word->len; i++) word->ids[i] = text[pos + (size_t)i];
            word->count = 0;
        }
        tr->words[w].count++;
    }
    free(seen.slots);
}

static void trainer_init(BpeTrainer *tr, const unsigned char *text, size_t len) {
    memset(tr, 0, sizeof *tr);
    // Sized for the text (at most len distinct pairs; the map grows): a short text, as the
    // fuzzer trains on, then does not clear a 1 MiB table per call.
    pairmap_init(&tr->pair_index, len < (1 << 16) ? len : 1 << 16);
    bytesmap_init(&tr->piece_set, 1 << 12);
    for (int b = 0; b < 256; b++) trainer_add_piece(tr, &(unsigned char){(unsigned char)b}, 1);
    bytesmap_add(&tr->piece_set, (const unsigned char *)BOS_PIECE, (int)strlen(BOS_PIECE), -1);
    bytesmap_add(&tr->piece_set, (const unsigned char *)EOS_PIECE, (int)strlen(EOS_PIECE), -1);
    count_words(tr, text, len);
    for (int w = 0; w < tr->n_words; w++) {
        const Word *word = &tr->words[w];
        for (int i = 0; i + 1 < word->len; i++) pair_change(tr, word->ids[i], word->ids[i + 1], word->count, w);
    }
    push_dirty_pairs(tr);
}

static void trainer_free(BpeTrainer *tr) {
    for (int w = 0; w < tr->n_words; w++) free(tr->words[w].ids);
    for (int p = 0; p < tr->n_pairs; p++) free(tr->pairs[p].words);
    free(tr->words);
    free(tr->pairs);
    free(tr->heap.e);
    free(tr->dirty);
    pairmap_free(&tr->pair_index);
    for (int i = 0; i < tr->n_pieces; i++) free(tr->pieces[i]);
    free(tr->pieces);
    free(tr->piece_len);
    free(tr->piece_set.slots);
}

// Replace every (a, b) in word w by new_id, left to right, updating the counts of the pairs
// each occurrence touches: (x, a) -> (x, new), (a, b) gone, (b, y) -> (new, y).
static void merge_in_word(BpeTrainer *tr, int w, int a, int b, int new_id) {
    int *ids = tr->words[w].ids, len = tr->words[w].len, out = 0;
    int64_t c = tr->words[w].count;
    for (int i = 0; i < len;) {
        if (i + 1 < len && ids[i] == a && ids[i + 1] == b) {
            if (out > 0) { // the left neighbour is already rewritten, so a run "abab" chains
                pair_change(tr, ids[out - 1], a, -c, w);
                pair_change(tr, ids[out - 1], new_id, c, w);
            }
            pair_change(tr, a, b, -c, w);
            if (i + 2 < len) {
                pair_change(tr, b, ids[i + 2], -c, w);
                pair_change(tr, new_id, ids[i + 2], c, w);
            }
            ids[out++] = new_id;
            i += 2;
        } else {
            ids[out++] = ids[i++];
        }
    }
    tr->words[w].len = out;
}

static void merge_pair(BpeTrainer *tr, int p, int new_id) {
    // Detach the word list: pair_change may grow tr->pairs and move the Pair.
    int a = tr->pairs[p].a, b = tr->pairs[p].b, *words = tr->pairs[p].words, n = tr->pairs[p].n_words;
    unsigned char joined[TOKENIZER_MAX_PIECE];
    memcpy(joined, tr->pieces[a], (size_t)tr->piece_len[a]);
    memcpy(joined + tr->piece_len[a], tr->pieces[b], (size_t)tr->piece_len[b]);
    trainer_add_piece(tr, joined, tr->piece_len[a] + tr->piece_len[b]);
    tr->pairs[p].words = NULL;
    tr->pairs[p].n_words = tr->pairs[p].cap_words = 0;
    for (int i = 0; i < n; i++) merge_in_word(tr, words[i], a, b, new_id);
    free(words);
    push_dirty_pairs(tr);
}

int tokenizer_train_bpe(Tokenizer *t, const unsigned char *text, size_t len, int vocab_size,
                        Error *err) {
    memset(t, 0, sizeof *t);
    if (vocab_size < 256 + N_SPECIAL || vocab_size > MAX_VOCAB)
        return error_set(err, "BPE vocab_size %d is out of range [%d, %d]", vocab_size, 256 + N_SPECIAL,
                         MAX_VOCAB);
    int want = vocab_size - 256 - N_SPECIAL, n = 0;
    int *merges = mallocCheck(2 * (size_t)want * sizeof *merges);
    BpeTrainer tr;
    trainer_init(&tr, text, len);
    for (int p; n < want && (p = best_pair(&tr)) >= 0; n++) {
        merges[2 * n] = tr.pairs[p].a;
        merges[2 * n + 1] = tr.pairs[p].b;
        merge_pair(&tr, p, 256 + n);
    }
    trainer_free(&tr);
    int rc = tokenizer_from_merges(t, merges, n, err);
    free(merges);
    return rc;
}

// ----------------------------------------------------------------------------
// encoding

typedef struct {
    int *next, *prev; // (cap) the live symbols of the chunk as a linked list; -1 ends it
    int cap;
    MinHeap heap;     // merges waiting: key the merge rank, tie the pair's left symbol
} ChunkScratch;

// Queue the pair starting at symbol i, if its right neighbour exists and the pair has a merge.
static void queue_pair(const PairMap *rank, const int *ids, ChunkScratch *sc, int i) {
    if (i < 0 || sc->next[i] < 0) return;
    int r = pairmap_get(rank, ids[i], ids[sc->next[i]]);
    if (r >= 0) minheap_push(&sc->heap, (HeapEntry){r, i, 0});
}

// Encode one chunk as llama.cpp's gpt2 BPE does: take the queued pair of lowest rank (leftmost
// on ties), skip it if a merge has changed it since, else merge it and queue the two pairs it
// now forms with its neighbours. Returns the count written to out (<= len).
static int bpe_encode_chunk(const Tokenizer *t, const unsigned char *s, int len, int *out, ChunkScratch *sc) {
    const PairMap *rank = &t->index->merge_rank;
    if (len > sc->cap) {
        sc->cap = len;
        sc->next = reallocCheck(sc->next, (size_t)sc->cap * sizeof *sc->next);
        sc->prev = reallocCheck(sc->prev, (size_t)sc->cap * sizeof *sc->prev);
    }
    int *ids = out; // (len) symbol i's token; -1 once merged into its left neighbour
    for (int i = 0; i < len; i++) {
        ids[i] = s[i];
        sc->prev[i] = i - 1;
        sc->next[i] = i + 1 < len ? i + 1 : -1;
    }
    sc->heap.n = 0;
    for (int i = 0; i + 1 < len; i++) queue_pair(rank, ids, sc, i);
    while (sc->heap.n > 0) {
        HeapEntry c = minheap_pop(&sc->heap);
        int l = (int)c.tie, r = sc->next[l], merge = (int)c.key;
        if (ids[l] < 0 || r < 0 || pairmap_get(rank, ids[l], ids[r]) != merge) continue; // stale
        ids[l] = 256 + merge;
        ids[r] = -1;
        sc->next[l] = sc->next[r];
        if (sc->next[r] >= 0) sc->prev[sc->next[r]] = l;
        queue_pair(rank, ids, sc, sc->prev[l]);
        queue_pair(rank, ids, sc, l);
    }
    int n = 0;
    for (int i = 0; i < len; i++)
        if (ids[i] >= 0) out[n++] = ids[i];
    return n;
}

static void chunk_scratch_free(ChunkScratch *sc) {
    free(sc->next);
    free(sc->prev);
    free(sc->heap.e);
}

typedef struct {
    size_t start; // where the chunk's ids were first written in the output
    int n;
} CachedChunk;

// Chunk the text and encode each unique chunk once, copying the ids of repeats.
static size_t bpe_encode(const Tokenizer *t, const unsigned char *text, size_t len, int *tokens) {
    BytesMap seen; // chunk -> index in cached
    bytesmap_init(&seen, 64);
    CachedChunk *cached = NULL;
    ChunkScratch scratch = {0};
    int n_cached = 0, cap = 0;
    size_t n = 0;
    for (size_t pos = 0, end; pos < len; pos = end) {
        end = tokenizer_chunk_end(text, len, pos);
        if (end - pos > INT_MAX / 3) die("tokenizer: a %zu-byte chunk is too long to encode", end - pos);
        int c = bytesmap_add(&seen, text + pos, (int)(end - pos), n_cached);
        if (c < n_cached) {
            memcpy(tokens + n, tokens + cached[c].start, (size_t)cached[c].n * sizeof *tokens);
            n += (size_t)cached[c].n;
            continue;
        }
        if (n_cached == cap) {
            cap = cap ? 2 * cap : 64;
            cached = reallocCheck(cached, (size_t)cap * sizeof *cached);
        }
        cached[n_cached].start = n;
        cached[n_cached].n = bpe_encode_chunk(t, text + pos, (int)(end - pos), tokens + n, &scratch);
        n += (size_t)cached[n_cached++].n;
    }
    chunk_scratch_free(&scratch);
    free(cached);
    free(seen.slots);
    return n;
}

// The id of the piece pieces[a] ++ pieces[b], or -1; buf holds two pieces.
static int joined_id(const Tokenizer *t, int a, int b, unsigned char *buf) {
    int la = t->piece_len[a], lb = t->piece_len[b];
    if (la + lb > t->index->max_piece_len) return -1;
    memcpy(buf, t->pieces[a], (size_t)la);
    memcpy(buf + la, t->pieces[b], (size_t)lb);
    return bytesmap_get(&t->index->piece_id, buf, la + lb);
}

// run.c's encode after the optional BOS (already in tokens[0..n)): the dummy prefix, one
// token per UTF-8 codepoint (or its bytes + 3), then greedy highest-score merging over the
// whole sequence, BOS included, as run.c does. Returns the new count.
static size_t llama2c_encode(const Tokenizer *t, const unsigned char *text, size_t len, int *tokens,
                             size_t n) {
    const TokenizerIndex *idx = t->index;
    if (len > 0) tokens[n++] = idx->dummy_prefix_id;
    for (size_t i = 0, cp; i < len; i += cp) {
        // A codepoint: a byte and the continuation bytes (10xxxxxx) after it, 4 bytes at most.
        for (cp = 1; cp < 4 && i + cp < len && (text[i + cp] & 0xC0) == 0x80; cp++) {}
        int id = bytesmap_get(&idx->piece_id, text + i, (int)cp);
        if (id >= 0) {
            tokens[n++] = id;
        } else {
            for (size_t k = 0; k < cp; k++) tokens[n++] = text[i + k] + 3;
        }
    }
    if (n < 2) return n;
    unsigned char *buf = mallocCheck(2 * (size_t)idx->max_piece_len);
    int *joined = mallocCheck((n - 1) * sizeof *joined); // (n - 1) id of tokens[i] ++ tokens[i + 1]
    for (size_t i = 0; i + 1 < n; i++) joined[i] = joined_id(t, tokens[i], tokens[i + 1], buf);
    for (;;) {
        float best_score = -1e10f; // run.c's floor: pairs scoring no higher never merge
        size_t best = SIZE_MAX;
        for (size_t i = 0; i + 1 < n; i++)
            if (joined[i] >= 0 && t->scores[joined[i]] > best_score) best_score = t->scores[joined[i]], best = i;
        if (best == SIZE_MAX) break;
        size_t tail = n - best - 2; // tokens after the merged pair
        tokens[best] = joined[best];
        memmove(tokens + best + 1, tokens + best + 2, tail * sizeof *tokens);
        if (tail > 0) memmove(joined + best + 1, joined + best + 2, (tail - 1) * sizeof *joined);
        n--;
        if (best > 0) joined[best - 1] = joined_id(t, tokens[best - 1], tokens[best], buf);
        if (best + 1 < n) joined[best] = joined_id(t, tokens[best], tokens[best + 1], buf);
    }
    free(joined);
    free(buf);
    return n;
}

size_t tokenizer_encode(const Tokenizer *t, const unsigned char *text, size_t len, bool bos,
                        bool eos, int *tokens) {
    size_t n = 0;
    if (bos) tokens[n++] = t->bos_id;
    if (t->kind == TOKENIZER_BPE) n += bpe_encode(t, text, len, tokens + n);
    else n = llama2c_encode(t, text, len, tokens, n);
    if (eos) tokens[n++] = t->eos_id;
    return n;
}

// ----------------------------------------------------------------------------
// decoding

static int hex_digit(unsigned char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    return -1;
}

// The byte a "<0xXX>" piece stands for, or -1 for any other piece.
static int byte_piece_value(const unsigned char *p, size_t len) {
    if (len != 6 || memcmp(p, "<0x", 3) != 0 || p[5] != '>') return -1;
    int hi = hex_digit(p[3]), lo = hex_digit(p[4]);
    return hi < 0 || lo < 0 ? -1 : hi * 16 + lo;
}

const unsigned char *tokenizer_piece(const Tokenizer *t, int prev_token, int token, size_t *len) {
    if (token < 0 || token >= t->vocab_size)
        die("tokenizer: token id %d is outside the vocabulary [0, %d)", token, t->vocab_size);
    const unsigned char *p = t->pieces[token];
    *len = (size_t)t->piece_len[token];
    if (token == t->bos_id || token == t->eos_id) {
        *len = 0;
        return p;
    }
    if (t->kind == TOKENIZER_LLAMA2C) {
        if (prev_token == t->bos_id && *len > 0 && p[0] == ' ') { // run.c drops the dummy prefix
            p++;
            (*len)--;
        }
        int byte = byte_piece_value(p, *len);
        if (byte >= 0) {
            p = &t->index->bytes[byte];
            *len = 1;
        }
    }
    return p;
}

unsigned char *tokenizer_decode(const Tokenizer *t, const int *tokens, size_t n, size_t *len) {
    size_t total = 0, piece_len;
    for (size_t i = 0; i < n; i++) {
        tokenizer_piece(t, i > 0 ? tokens[i - 1] : -1, tokens[i], &piece_len);
        total += piece_len;
    }
    unsigned char *out = mallocCheck(total + 1);
    for (size_t i = 0, off = 0; i < n; i++, off += piece_len) {
        const unsigned char *piece = tokenizer_piece(t, i > 0 ? tokens[i - 1] : -1, tokens[i], &piece_len);
        memcpy(out + off, piece, piece_len);
    }
    out[total] = '\0';
    *len = total;
    return out;
}

// ----------------------------------------------------------------------------
// llama2.c tokenizer.bin

int tokenizer_load_llama2c(Tokenizer *t, const char *path, int vocab_size, Error *err) {
    memset(t, 0, sizeof *t);
    if (vocab_size > MAX_VOCAB)
        return error_set(err, "%s: vocab_size %d is more than %d", path, vocab_size, MAX_VOCAB);
    FILE *f = fopen(path, "rb");
    if (!f) return error_set(err, "%s: cannot open: %s", path, strerror(errno));
    int32_t max_len;
    int rc = 0, n = 0, cap = 0;
    unsigned char **pieces = NULL;
    int *lens = NULL;
    float *scores = NULL;
    if (fread(&max_len, 1, 4, f) != 4) {
        rc = error_set(err, "%s: truncated: no max_token_length header", path);
    } else if (max_len < 1 || max_len > MAX_PIECE_BYTES) {
        rc = error_set(err, "%s: max_token_length %d is outside [1, %d]", path, max_len, MAX_PIECE_BYTES);
    }
    while (rc == 0 && (vocab_size <= 0 || n < vocab_size)) {
        float score;
        int32_t len;
        size_t got = fread(&score, 1, 4, f);
        if (got == 0 && vocab_size <= 0) break; // reading to the end: it falls between tokens
        if (got != 4 || fread(&len, 1, 4, f) != 4) {
            rc = error_set(err, "%s: truncated in the header of token %d", path, n);
            break;
        }
        if (len < 0 || len > max_len) {
            rc = error_set(err, "%s: token %d has length %d, outside [0, max_token_length %d]", path, n, len,
                           max_len);
            break;
        }
        if (n == cap) {
            cap = cap ? 2 * cap : 1024;
            pieces = reallocCheck(pieces, (size_t)cap * sizeof *pieces);
            lens = reallocCheck(lens, (size_t)cap * sizeof *lens);
            scores = reallocCheck(scores, (size_t)cap * sizeof *scores);
        }
        pieces[n] = mallocCheck((size_t)len);
        lens[n] = len;
        scores[n] = score;
        n++;
        if (fread(pieces[n - 1], 1, (size_t)len, f) != (size_t)len)
            rc = error_set(err, "%s: truncated in the bytes of token %d", path, n - 1);
    }
    fclose(f);
    if (rc == 0) {
        Error inner;
        rc = tokenizer_from_pieces(t, (const unsigned char *const *)pieces, lens, scores, n, &inner);
        if (rc) error_set(err, "%s: %s", path, inner.msg);
    }
    for (int i = 0; i < n; i++) free(pieces[i]);
    free(pieces);
    free(lens);
    free(scores);
    return rc;
}
