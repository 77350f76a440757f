// tokenizer.c: byte-level BPE training/encoding and llama2.c's tokenizer.bin (see tokenizer.h).
//
// BPE training works on unique chunks (words) weighted by their counts. It keeps, for every
// adjacent pair, its total count and the words it occurs in, plus a max-heap of pairs by
// count; each merge rewrites only the words holding the chosen pair and adjusts the counts
// of the pairs around each occurrence, so a vocabulary of 4096 trains in seconds.
//
// Test: make build/tests/test_tokenizer && ./build/tests/test_tokenizer
#include "tokenizer.h"

#include <errno.h>
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

// ----------------------------------------------------------------------------
// the pre-split rule (documented in tokenizer.h)

enum { LETTER, DIGIT, SPACE, SYMBOL };

static int byte_class(unsigned char c) {
    if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c >= 0x80) return LETTER;
    if (c >= '0' && c <= '9') return DIGIT;
    if (c == ' ' || (c >= '\t' && c <= '\r')) return SPACE;
    return SYMBOL;
}

size_t tokenizer_chunk_end(const unsigned char *text, size_t len, size_t pos) {
    size_t limit = len - pos > TOKENIZER_MAX_CHUNK ? pos + TOKENIZER_MAX_CHUNK : len;
    size_t i = pos;
    if (text[i] == ' ' && i + 1 < limit && byte_class(text[i + 1]) != SPACE) i++; // leads the run
    int cls = byte_class(text[i]);
    if (cls == DIGIT) return i + 1;
    size_t end = i + 1;
    while (end < limit && byte_class(text[end]) == cls) end++;
    // A whitespace run hands its final space to the word after it (" x" stays one chunk).
    if (cls == SPACE && end < len && end - pos > 1 && text[end - 1] == ' ' &&
        byte_class(text[end]) != SPACE)
        end--;
    return end;
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
        else if (lens[a] + lens[b] > TOKENIZER_MAX_CHUNK)
            rc = error_set(err, "BPE merge %d makes a %d-byte piece, longer than a chunk (%d bytes)", i,
                           lens[a] + lens[b], TOKENIZER_MAX_CHUNK);
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
} Pair;

typedef struct {
    int64_t count; // the pair's count when pushed; stale once it differs
    int pair;
} HeapItem;

typedef struct {
    Word *words;
    int n_words;
    Pair *pairs;
    int n_pairs, cap_pairs;
    PairMap pair_index; // (a, b) -> index in pairs
    HeapItem *heap;     // max-heap, best pair first
    size_t heap_n, heap_cap;
    int *dirty;         // pairs whose count changed during the current merge
    int n_dirty, cap_dirty;
} BpeTrainer;

// Heap order: higher count first, then lower first id, then lower second id.
static bool heap_above(const BpeTrainer *tr, HeapItem x, HeapItem y) {
    if (x.count != y.count) return x.count > y.count;
    const Pair *px = &tr->pairs[x.pair], *py = &tr->pairs[y.pair];
    return px->a != py->a ? px->a < py->a : px->b < py->b;
}

static void heap_push(BpeTrainer *tr, HeapItem item) {
    if (tr->heap_n == tr->heap_cap) {
        tr->heap_cap = tr->heap_cap ? 2 * tr->heap_cap : 1024;
        tr->heap = reallocCheck(tr->heap, tr->heap_cap * sizeof *tr->heap);
    }
    size_t i = tr->heap_n++;
    while (i > 0 && heap_above(tr, item, tr->heap[(i - 1) / 2])) {
        tr->heap[i] = tr->heap[(i - 1) / 2];
        i = (i - 1) / 2;
    }
    tr->heap[i] = item;
}

static HeapItem heap_pop(BpeTrainer *tr) {
    HeapItem top = tr->heap[0], last = tr->heap[--tr->heap_n];
    size_t i = 0;
    for (;;) {
        size_t child = 2 * i + 1;
        if (child >= tr->heap_n) break;
        if (child + 1 < tr->heap_n && heap_above(tr, tr->heap[child + 1], tr->heap[child])) child++;
        if (!heap_above(tr, tr->heap[child], last)) break;
        tr->heap[i] = tr->heap[child];
        i = child;
    }
    tr->heap[i] = last;
    return top;
}

// The most frequent pair (ties to the lowest ids), or -1 when no pair is left.
static int best_pair(BpeTrainer *tr) {
    while (tr->heap_n > 0) {
        HeapItem top = heap_pop(tr);
        if (top.count > 0 && top.count == tr->pairs[top.pair].count) return top.pair;
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
        if (pair->count > 0) heap_push(tr, (HeapItem){.count = pair->count, .pair = tr->dirty[i]});
    }
    tr->n_dirty = 0;
}

// Unique chunks of text with their counts, in order of first appearance, as byte ids.
static void count_words(BpeTrainer *tr, const unsigned char *text, size_t len) {
    BytesMap seen;
    bytesmap_init(&seen, 1 << 16);
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
    pairmap_init(&tr->pair_index, 1 << 16);
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
    free(tr->heap);
    free(tr->dirty);
    pairmap_free(&tr->pair_index);
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

// Encode one chunk: merge the lowest-ranked adjacent pair everywhere, until none is left.
// Merging all of its occurrences at once equals merging them one by one, since a merge's
// new token only forms pairs of a later rank. Returns the count written to out (>= len).
static int bpe_encode_chunk(const Tokenizer *t, const unsigned char *s, int len, int *out) {
    const PairMap *rank = &t->index->merge_rank;
    for (int i = 0; i < len; i++) out[i] = s[i];
    int n = len;
    for (;;) {
        int best = -1, at = -1;
        for (int i = 0; i + 1 < n; i++) {
            int r = pairmap_get(rank, out[i], out[i + 1]);
            if (r >= 0 && (best < 0 || r < best)) best = r, at = i;
        }
        if (best < 0) return n;
        int a = out[at], b = out[at + 1], k = at;
        for (int i = at; i < n;) {
            if (i + 1 < n && out[i] == a && out[i + 1] == b) out[k++] = 256 + best, i += 2;
            else out[k++] = out[i++];
        }
        n = k;
    }
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
    int n_cached = 0, cap = 0;
    size_t n = 0;
    for (size_t pos = 0, end; pos < len; pos = end) {
        end = tokenizer_chunk_end(text, len, pos);
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
        cached[n_cached].n = bpe_encode_chunk(t, text + pos, (int)(end - pos), tokens + n);
        n += (size_t)cached[n_cached++].n;
    }
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
