// tokenizer.c: byte-level BPE training/encoding, llama2.c's tokenizer.bin, SentencePiece encoding,
// the special-token cut and decoding (see tokenizer.h). Foreign GGUF vocabularies are built in
// tokenizer_vocab.c; both share tokenizer_internal.h.
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

#include "tokenizer_internal.h"
#include "unicode.h"

#define N_SPECIAL 2               // BPE: BOS and EOS after the merges
static const char BOS_PIECE[] = "<|bos|>";
static const char EOS_PIECE[] = "<|eos|>";

// ----------------------------------------------------------------------------
// the pre-split rule (documented in tokenizer.h): llama.cpp's unicode_regex_split_custom_gpt2
// over the stretches its "\p{N}" split leaves, on codepoints decoded as unicode_decode does

enum { BOUNDARY = -1 }; // past the stretch: the end of the text, or a number when numbers split

// The class of the codepoint at text[i] as GPT-2's regex sees it, and in *n its bytes.
static int class_at(const unsigned char *text, size_t len, size_t i, bool split_digits, size_t *n) {
    if (i >= len) {
        *n = 0;
        return BOUNDARY;
    }
    int cls = unicode_class(unicode_decode(text + i, len - i, n));
    return split_digits && cls == UNICODE_NUMBER ? BOUNDARY : cls;
}

// The codepoint at text[i] (i < len) and its bytes in *n.
static uint32_t cp_at(const unsigned char *text, size_t len, size_t i, size_t *n) {
    return unicode_decode(text + i, len - i, n);
}

// GPT-2's contractions 's 't 'm 'd 're 've 'll: the bytes of the one at pos, or 0. Codepoints,
// not bytes, are compared (an overlong "\xc0\xa7" is an apostrophe to llama.cpp); no number
// is one of these letters, so the number split cannot cut one.
static size_t contraction_len(const unsigned char *text, size_t len, size_t pos) {
    size_t n0, n1, n2;
    if (cp_at(text, len, pos, &n0) != '\'' || pos + n0 >= len) return 0;
    uint32_t c1 = cp_at(text, len, pos + n0, &n1);
    if (c1 == 's' || c1 == 't' || c1 == 'm' || c1 == 'd') return n0 + n1;
    if (pos + n0 + n1 >= len) return 0;
    uint32_t c2 = cp_at(text, len, pos + n0 + n1, &n2);
    bool three = (c1 == 'r' && c2 == 'e') || (c1 == 'v' && c2 == 'e') || (c1 == 'l' && c2 == 'l');
    return three ? n0 + n1 + n2 : 0;
}

static size_t chunk_end(const unsigned char *text, size_t len, size_t pos, bool split_digits) {
    size_t n;
    uint32_t cp = cp_at(text, len, pos, &n);
    if (split_digits && unicode_class(cp) == UNICODE_NUMBER) return pos + n; // "\p{N}": one codepoint alone
    size_t c = contraction_len(text, len, pos);
    if (c > 0) return pos + c;
    // " ?\p{L}+", " ?\p{N}+" (numbers unsplit), " ?[^\s\p{L}\p{N}]+": an optional space, then a
    // run of one class.
    size_t i = cp == ' ' ? pos + n : pos;
    int cls = class_at(text, len, i, split_digits, &n);
    if (cls == UNICODE_LETTER || cls == UNICODE_NUMBER || cls == UNICODE_OTHER) {
        while (class_at(text, len, i, split_digits, &n) == cls) i += n;
        return i;
    }
    // "\s+(?!\S)|\s+": a whitespace run of more than one leaves its last codepoint to what follows
    // it, unless the stretch ends there.
    size_t end = pos, last = pos, count = 0;
    while (class_at(text, len, end, split_digits, &n) == UNICODE_SPACE) {
        last = end;
        end += n;
        count++;
    }
    if (count > 1 && class_at(text, len, end, split_digits, &n) != BOUNDARY) return last;
    if (count > 0) return end;
    cp_at(text, len, pos, &n); // no rule matches (never, as llama.cpp's own)
    return pos + n;
}

size_t tokenizer_chunk_end(const unsigned char *text, size_t len, size_t pos) {
    return chunk_end(text, len, pos, true);
}

// ----------------------------------------------------------------------------
// building a Tokenizer

void tokenizer_alloc_pieces(Tokenizer *t, TokenizerKind kind, int vocab_size, int *lens) {
    memset(t, 0, sizeof *t);
    t->kind = kind;
    t->vocab_size = vocab_size;
    t->bos_id = t->eos_id = -1;
    t->piece_len = lens;
    t->pieces = mallocCheck((size_t)vocab_size * sizeof *t->pieces);
    t->index = callocCheck(1, sizeof *t->index);
    size_t total = 0;
    for (int i = 0; i < vocab_size; i++) total += (size_t)lens[i];
    t->index->blob = mallocCheck(total + 1);
    size_t off = 0;
    for (int i = 0; i < vocab_size; off += (size_t)lens[i], i++) t->pieces[i] = t->index->blob + off;
    for (int b = 0; b < 256; b++) t->index->bytes[b] = (unsigned char)b;
}

// The lab's vocabularies: texts are the pieces, BOS and EOS control, the rest normal; EOS ends
// generation; BOS is added.
static void own_attributes(Tokenizer *t) {
    TokenizerIndex *idx = t->index;
    idx->texts = t->pieces;
    idx->text_len = t->piece_len;
    t->attr = mallocCheck((size_t)t->vocab_size);
    memset(t->attr, TOKEN_NORMAL, (size_t)t->vocab_size);
    t->attr[t->bos_id] = TOKEN_CONTROL;
    t->attr[t->eos_id] = TOKEN_CONTROL;
    t->n_eog = 1;
    t->eog = mallocCheck(sizeof *t->eog);
    t->eog[0] = t->eos_id;
    t->add_bos = true;
}

// Specials sort by text length, longest first, then by id (llama.cpp sorts by length alone with
// std::sort, whose order among equal lengths is unspecified; it matters only when two equally
// long special texts can overlap, which neither real vocabulary's do: test_tokenizer_real checks).
typedef struct {
    int len, id;
} SpecialKey;

static int compare_specials(const void *a, const void *b) {
    const SpecialKey *x = a, *y = b;
    if (x->len != y->len) return x->len > y->len ? -1 : 1;
    return (x->id > y->id) - (x->id < y->id);
}

void tokenizer_index_specials(Tokenizer *t) {
    TokenizerIndex *idx = t->index;
    int n = 0;
    for (int i = 0; i < t->vocab_size; i++)
        if (t->attr[i] & (TOKEN_CONTROL | TOKEN_USER_DEFINED | TOKEN_UNKNOWN)) n++;
    SpecialKey *keys = mallocCheck(((size_t)n + 1) * sizeof *keys);
    size_t total = 1;
    for (int i = 0, k = 0; i < t->vocab_size; i++)
        if (t->attr[i] & (TOKEN_CONTROL | TOKEN_USER_DEFINED | TOKEN_UNKNOWN)) {
            keys[k++] = (SpecialKey){idx->text_len[i], i};
            total += (size_t)idx->text_len[i];
        }
    qsort(keys, (size_t)n, sizeof *keys, compare_specials);
    idx->n_specials = n;
    idx->specials = mallocCheck(((size_t)n + 1) * sizeof *idx->specials);
    for (int k = 0; k < n; k++) {
        idx->specials[k] = keys[k].id;
        if (!(t->attr[keys[k].id] & (TOKEN_CONTROL | TOKEN_UNKNOWN))) idx->cut_always = true;
    }
    free(keys);
    // the trie of their texts: node 0 the root; a node that ends a text holds its place in specials
    idx->trie_token = mallocCheck(total * sizeof *idx->trie_token);
    idx->trie_token[0] = -1;
    idx->n_trie = 1;
    pairmap_init(&idx->trie, total);
    for (int k = 0; k < n; k++) {
        int id = idx->specials[k], node = 0;
        for (int j = 0; j < idx->text_len[id]; j++) {
            int child = pairmap_get(&idx->trie, node, idx->texts[id][j]);
            if (child < 0) {
                child = idx->n_trie++;
                idx->trie_token[child] = -1;
                pairmap_put(&idx->trie, node, idx->texts[id][j], child);
            }
            node = child;
        }
        if (node > 0) idx->trie_token[node] = k; // texts are distinct: one special per node
    }
}

void tokenizer_free(Tokenizer *t) {
    TokenizerIndex *idx = t->index;
    if (idx) {
        free(idx->blob);
        if (idx->text_blob) free(idx->text_blob), free(idx->texts), free(idx->text_len);
        bytesmap_free(&idx->text_id);
        free(idx->specials);
        pairmap_free(&idx->trie);
        free(idx->trie_token);
        pairmap_free(&idx->merge_rank);
        free(idx->merge_result);
        free(idx->sym_blob);
        bytesmap_free(&idx->piece_id);
        free(idx);
    }
    free(t->pieces);
    free(t->piece_len);
    free(t->scores);
    free(t->merges);
    free(t->attr);
    free(t->eog);
    free(t->chat_template);
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

    tokenizer_alloc_pieces(t, TOKENIZER_BPE, vocab_size, lens);
    TokenizerIndex *idx = t->index;
    idx->merge_rank = rank;
    idx->merge_result = mallocCheck(((size_t)n_merges + 1) * sizeof *idx->merge_result);
    for (int i = 0; i < n_merges; i++) idx->merge_result[i] = 256 + i;
    for (int b = 0; b < 256; b++) idx->byte_sym[b] = b;
    idx->n_syms = vocab_size;
    idx->split_digits = true;
    t->n_merges = n_merges;
    t->merges = mallocCheck((2 * (size_t)n_merges + 1) * sizeof *t->merges);
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
    own_attributes(t);
    tokenizer_index_specials(t);
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

size_t tokenizer_gpt2_spell_byte(unsigned char b, unsigned char out[2]) { return tokenizer_gpt2_spell(&b, 1, out); }

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
    tokenizer_alloc_pieces(t, TOKENIZER_LLAMA2C, vocab_size, own_lens);
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
    own_attributes(t); // no special-token cut: run.c has none
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
// the special-token cut (llama.cpp's tokenizer_st_partition)

typedef struct {
    size_t off, len; // a stretch of text, when token < 0
    int token;
} Fragment;

typedef struct {
    Fragment *f;
    size_t n, cap;
} Fragments;

static void fragments_push(Fragments *fr, Fragment x) {
    if (fr->n == fr->cap) {
        fr->cap = fr->cap ? 2 * fr->cap : 16;
        fr->f = reallocCheck(fr->f, fr->cap * sizeof *fr->f);
    }
    fr->f[fr->n++] = x;
}

static bool cut_applies(const Tokenizer *t, int id, bool parse_special) {
    return parse_special || !(t->attr[id] & (TOKEN_CONTROL | TOKEN_UNKNOWN));
}

// Cut text into stretches and special tokens: for each special token that occurs in the text,
// longest first, every occurrence in each stretch left so far, left to right. The trie tells
// which specials occur at all, so that the cut walks only those.
static void cut_specials(const Tokenizer *t, const unsigned char *text, size_t len, bool parse_special,
                         Fragments *out) {
    const TokenizerIndex *idx = t->index;
    out->n = 0;
    if (len == 0) return;
    fragments_push(out, (Fragment){0, len, -1});
    if (t->kind == TOKENIZER_LLAMA2C || !(parse_special || idx->cut_always)) return;
    unsigned char *found = NULL; // found[k]: specials[k] occurs in the text
    size_t n_found = 0;
    for (size_t pos = 0; pos < len; pos++) {
        for (int node = 0, j = 0; pos + (size_t)j < len; j++) {
            node = pairmap_get(&idx->trie, node, text[pos + (size_t)j]);
            if (node < 0) break;
            int k = idx->trie_token[node];
            if (k < 0 || !cut_applies(t, idx->specials[k], parse_special)) continue;
            if (!found) found = callocCheck((size_t)idx->n_specials, 1);
            if (!found[k]) found[k] = 1, n_found++;
        }
    }
    Fragments next = {0};
    for (int k = 0; k < idx->n_specials && n_found > 0; k++) {
        if (!found[k]) continue;
        n_found--;
        int id = idx->specials[k];
        const unsigned char *s = idx->texts[id];
        size_t slen = (size_t)idx->text_len[id];
        next.n = 0;
        for (size_t i = 0; i < out->n; i++) {
            Fragment fr = out->f[i];
            if (fr.token >= 0) {
                fragments_push(&next, fr);
                continue;
            }
            size_t at = fr.off, end = fr.off + fr.len;
            for (;;) {
                const unsigned char *m = end - at >= slen ? memmem(text + at, end - at, s, slen) : NULL;
                if (!m) break;
                size_t mpos = (size_t)(m - text);
                if (mpos > at) fragments_push(&next, (Fragment){at, mpos - at, -1});
                fragments_push(&next, (Fragment){mpos, slen, id});
                at = mpos + slen;
            }
            if (at < end) fragments_push(&next, (Fragment){at, end - at, -1});
        }
        Fragments swap = *out;
        *out = next;
        next = swap;
    }
    free(next.f);
    free(found);
}

// ----------------------------------------------------------------------------
// BPE encoding

typedef struct {
    int *next, *prev; // (cap) the live symbols of the chunk as a linked list; -1 ends it
    int *syms;        // (cap) a foreign chunk's symbols
    unsigned char *bytes; // (cap) a foreign chunk re-encoded
    int cap;
    MinHeap heap;     // merges waiting: key the merge rank, tie the pair's left symbol
} ChunkScratch;

static void chunk_scratch_reserve(ChunkScratch *sc, int n) {
    if (n <= sc->cap) return;
    sc->cap = n;
    sc->next = reallocCheck(sc->next, (size_t)n * sizeof *sc->next);
    sc->prev = reallocCheck(sc->prev, (size_t)n * sizeof *sc->prev);
    sc->syms = reallocCheck(sc->syms, (size_t)n * sizeof *sc->syms);
    sc->bytes = reallocCheck(sc->bytes, (size_t)n);
}

static void chunk_scratch_free(ChunkScratch *sc) {
    free(sc->next);
    free(sc->prev);
    free(sc->syms);
    free(sc->bytes);
    free(sc->heap.e);
}

// Queue the pair starting at symbol i, if its right neighbour exists and the pair has a merge.
static void queue_pair(const PairMap *rank, const int *ids, ChunkScratch *sc, int i) {
    if (i < 0 || sc->next[i] < 0) return;
    int r = pairmap_get(rank, ids[i], ids[sc->next[i]]);
    if (r >= 0) minheap_push(&sc->heap, (HeapEntry){r, i, 0});
}

// The merge loop of llama.cpp's gpt2 BPE over the n symbols ids[] of one chunk: take the queued
// pair of lowest rank (leftmost on ties), skip it if a merge has changed it since, else merge it
// into the symbol its merge makes and queue the two pairs it now forms with its neighbours.
// The symbols left are compacted to the front of ids; returns their count.
static int bpe_merge(const TokenizerIndex *idx, int *ids, int n, ChunkScratch *sc) {
    const PairMap *rank = &idx->merge_rank;
    for (int i = 0; i < n; i++) {
        sc->prev[i] = i - 1;
        sc->next[i] = i + 1 < n ? i + 1 : -1;
    }
    sc->heap.n = 0;
    for (int i = 0; i + 1 < n; i++) queue_pair(rank, ids, sc, i);
    while (sc->heap.n > 0) {
        HeapEntry c = minheap_pop(&sc->heap);
        int l = (int)c.tie, r = sc->next[l], merge = (int)c.key;
        if (ids[l] < 0 || r < 0 || pairmap_get(rank, ids[l], ids[r]) != merge) continue; // stale
        ids[l] = idx->merge_result[merge];
        ids[r] = -1;
        sc->next[l] = sc->next[r];
        if (sc->next[r] >= 0) sc->prev[sc->next[r]] = l;
        queue_pair(rank, ids, sc, sc->prev[l]);
        queue_pair(rank, ids, sc, l);
    }
    int k = 0;
    for (int i = 0; i < n; i++)
        if (ids[i] >= 0) ids[k++] = ids[i];
    return k;
}

// Encode one chunk; returns the count written to out. The lab's BPE: the chunk's own bytes are
// its symbols and its tokens (at most len). A foreign BPE: each codepoint re-encoded as llama.cpp
// does, each byte the symbol of its GPT-2 spelling, and at the end a symbol that is not a token
// as the one-byte tokens of its spelling (at most 3 * len).
static int bpe_encode_chunk(const Tokenizer *t, const unsigned char *s, int len, int *out, ChunkScratch *sc) {
    const TokenizerIndex *idx = t->index;
    if (!t->llama_cpp) {
        chunk_scratch_reserve(sc, len);
        for (int i = 0; i < len; i++) out[i] = s[i];
        return bpe_merge(idx, out, len, sc);
    }
    chunk_scratch_reserve(sc, 3 * len + 1);
    int n = 0;
    for (int i = 0; i < len;) {
        size_t k;
        uint32_t cp = unicode_decode(s + i, (size_t)(len - i), &k);
        n += (int)unicode_encode(cp, sc->bytes + n);
        i += (int)k;
    }
    for (int i = 0; i < n; i++) sc->syms[i] = idx->byte_sym[sc->bytes[i]];
    n = bpe_merge(idx, sc->syms, n, sc);
    int k = 0;
    for (int i = 0; i < n; i++) {
        int sym = sc->syms[i];
        if (sym < t->vocab_size) {
            out[k++] = sym;
            continue;
        }
        for (const unsigned char *p = idx->texts[sym]; p < idx->texts[sym] + idx->text_len[sym]; p++)
            if (idx->one_byte_token[*p] >= 0) out[k++] = idx->one_byte_token[*p];
    }
    return k;
}

typedef struct {
    BytesMap seen;      // chunk -> index in cached
    struct {
        size_t start;   // where the chunk's ids were first written in the output
        int n;
    } *cached;
    int n_cached, cap;
    ChunkScratch scratch;
} BpeCache;

static void bpe_cache_free(BpeCache *c) {
    chunk_scratch_free(&c->scratch);
    free(c->cached);
    bytesmap_free(&c->seen);
}

// Chunk a stretch of text and encode each unique chunk once, copying the ids of repeats;
// tokens[0..n0) are the ones written before (the cache points into them).
static size_t bpe_encode(const Tokenizer *t, const unsigned char *text, size_t len, int *tokens, size_t n0,
                         BpeCache *c) {
    size_t n = n0;
    if (!c->seen.slots) bytesmap_init(&c->seen, 64);
    for (size_t pos = 0, end; pos < len; pos = end) {
        end = chunk_end(text, len, pos, t->index->split_digits);
        if (end - pos > INT_MAX / 4) die("tokenizer: a %zu-byte chunk is too long to encode", end - pos);
        int k = bytesmap_add(&c->seen, text + pos, (int)(end - pos), c->n_cached);
        if (k < c->n_cached) {
            memmove(tokens + n, tokens + c->cached[k].start, (size_t)c->cached[k].n * sizeof *tokens);
            n += (size_t)c->cached[k].n;
            continue;
        }
        if (c->n_cached == c->cap) {
            c->cap = c->cap ? 2 * c->cap : 64;
            c->cached = reallocCheck(c->cached, (size_t)c->cap * sizeof *c->cached);
        }
        c->cached[k].start = n;
        c->cached[k].n = bpe_encode_chunk(t, text + pos, (int)(end - pos), tokens + n, &c->scratch);
        n += (size_t)c->cached[c->n_cached++].n;
    }
    return n - n0;
}

// ----------------------------------------------------------------------------
// SentencePiece encoding (llama.cpp's llm_tokenizer_spm_session)

typedef struct {
    unsigned char *text; // the stretch with ' ' as U+2581
    int *start, *n, *prev, *next, *token; // per symbol; n == 0 once merged into its left
    size_t cap_text;
    int cap;
    MinHeap heap; // bigrams: key the score (highest first), tie the left symbol, value the token
} SpmScratch;

static void spm_scratch_free(SpmScratch *sc) {
    free(sc->text);
    free(sc->start);
    free(sc->n);
    free(sc->prev);
    free(sc->next);
    free(sc->token);
    free(sc->heap.e);
}

// A heap key that orders scores highest first (-0 as 0; NaN is refused when loading).
static int64_t score_key(float f) {
    if (f == 0.0f) f = 0.0f;
    uint32_t bits;
    memcpy(&bits, &f, 4);
    uint32_t ordered = bits & 0x80000000u ? ~bits : bits | 0x80000000u; // ascending with f
    return -(int64_t)ordered;
}

static void spm_try_bigram(const Tokenizer *t, SpmScratch *sc, int l, int r) {
    if (l < 0 || r < 0) return;
    int id = bytesmap_get(&t->index->text_id, sc->text + sc->start[l], sc->n[l] + sc->n[r]);
    if (id < 0) return;
    minheap_push(&sc->heap, (HeapEntry){score_key(t->scores[id]), l, id});
}

static size_t spm_encode(const Tokenizer *t, const unsigned char *s, size_t len, bool prefix, int *out,
                         SpmScratch *sc) {
    const TokenizerIndex *idx = t->index;
    size_t need = 3 * (len + 1);
    if (need > sc->cap_text) {
        sc->cap_text = need;
        sc->text = reallocCheck(sc->text, need);
    }
    size_t m = 0;
    if (prefix) memcpy(sc->text, "\xe2\x96\x81", 3), m = 3;
    for (size_t i = 0; i < len; i++) {
        if (s[i] == ' ') memcpy(sc->text + m, "\xe2\x96\x81", 3), m += 3;
        else sc->text[m++] = s[i];
    }
    if (m > INT_MAX / 2) die("tokenizer: a %zu-byte stretch of text is too long to encode", len);
    if ((int)m > sc->cap) {
        sc->cap = (int)m;
        sc->start = reallocCheck(sc->start, m * sizeof *sc->start);
        sc->n = reallocCheck(sc->n, m * sizeof *sc->n);
        sc->prev = reallocCheck(sc->prev, m * sizeof *sc->prev);
        sc->next = reallocCheck(sc->next, m * sizeof *sc->next);
        sc->token = reallocCheck(sc->token, m * sizeof *sc->token);
    }
    int n_sym = 0;
    for (size_t off = 0; off < m; n_sym++) { // one symbol per character, as its first byte says
        size_t k = unicode_len_utf8(sc->text[off]);
        if (k > m - off) k = m - off;
        sc->start[n_sym] = (int)off;
        sc->n[n_sym] = (int)k;
        sc->prev[n_sym] = n_sym - 1;
        off += k;
        sc->next[n_sym] = off == m ? -1 : n_sym + 1;
        sc->token[n_sym] = bytesmap_get(&idx->text_id, sc->text + sc->start[n_sym], (int)k);
    }
    sc->heap.n = 0;
    for (int i = 1; i < n_sym; i++) spm_try_bigram(t, sc, i - 1, i);
    while (sc->heap.n > 0) {
        HeapEntry b = minheap_pop(&sc->heap);
        int l = (int)b.tie, r = sc->next[l];
        // stale once either side has merged since (llama.cpp compares the joined size)
        if (sc->n[l] == 0 || r < 0 || sc->n[l] + sc->n[r] != idx->text_len[b.value]) continue;
        sc->n[l] += sc->n[r];
        sc->n[r] = 0;
        sc->token[l] = b.value;
        sc->next[l] = sc->next[r];
        if (sc->next[r] >= 0) sc->prev[sc->next[r]] = l;
        spm_try_bigram(t, sc, sc->prev[l], l);
        spm_try_bigram(t, sc, l, sc->next[l]);
    }
    size_t k = 0;
    for (int i = n_sym > 0 ? 0 : -1; i >= 0; i = sc->next[i]) {
        if (sc->token[i] >= 0) {
            out[k++] = sc->token[i];
            continue;
        }
        for (int j = 0; j < sc->n[i]; j++) out[k++] = idx->byte_token[sc->text[sc->start[i] + j]];
    }
    return k;
}

// ----------------------------------------------------------------------------
// llama2.c encoding

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

size_t tokenizer_tokenize(const Tokenizer *t, const unsigned char *text, size_t len, unsigned flags,
                          int *tokens) {
    size_t n = 0;
    if ((flags & TOKENIZER_ADD_BOS) && t->bos_id >= 0) tokens[n++] = t->bos_id;
    if (t->kind == TOKENIZER_LLAMA2C) {
        n = llama2c_encode(t, text, len, tokens, n);
    } else {
        Fragments fr = {0};
        cut_specials(t, text, len, flags & TOKENIZER_PARSE_SPECIAL, &fr);
        BpeCache cache = {0};
        SpmScratch spm = {0};
        bool prev_special = true; // SentencePiece's space prefix: at the start and after a special
        for (size_t i = 0; i < fr.n; i++) {
            Fragment f = fr.f[i];
            if (f.token >= 0) {
                tokens[n++] = f.token;
                prev_special = true;
            } else if (t->kind == TOKENIZER_SPM) {
                n += spm_encode(t, text + f.off, f.len, t->index->add_space_prefix && prev_special, tokens + n, &spm);
                prev_special = false;
            } else {
                n += bpe_encode(t, text + f.off, f.len, tokens, n, &cache);
                prev_special = false;
            }
        }
        bpe_cache_free(&cache);
        spm_scratch_free(&spm);
        free(fr.f);
    }
    if ((flags & TOKENIZER_ADD_EOS) && t->eos_id >= 0) tokens[n++] = t->eos_id;
    return n;
}

size_t tokenizer_encode(const Tokenizer *t, const unsigned char *text, size_t len, bool bos,
                        bool eos, int *tokens) {
    return tokenizer_tokenize(t, text, len, (bos ? TOKENIZER_ADD_BOS : 0) | (eos ? TOKENIZER_ADD_EOS : 0), tokens);
}

int *tokenizer_encode_file(const Tokenizer *t, const char *path, size_t *n, Error *err) {
    char *text;
    size_t len;
    if (file_read_all(path, &text, &len, err) != 0) return NULL;
    if (len > 0 && text[len - 1] == '\n') len--; // llama.cpp's -f drops one trailing newline
    int *tokens = mallocCheck(tokenizer_max_tokens(len) * sizeof(int));
    *n = tokenizer_encode(t, (const unsigned char *)text, len, t->add_bos, false, tokens);
    free(text);
    return tokens;
}

// ----------------------------------------------------------------------------
// decoding and lookups

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
    if (t->attr[token] & (TOKEN_CONTROL | TOKEN_UNKNOWN)) { // BOS, EOS, a chat template's markers
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

bool tokenizer_is_eog(const Tokenizer *t, int token) {
    for (int i = 0; i < t->n_eog; i++)
        if (t->eog[i] == token) return true;
    return false;
}

int tokenizer_find_token(const Tokenizer *t, const char *text) {
    size_t len = strlen(text);
    if (len > INT_MAX) return -1;
    const TokenizerIndex *idx = t->index;
    if (idx->text_id.slots) {
        int id = bytesmap_get(&idx->text_id, (const unsigned char *)text, (int)len);
        return id < t->vocab_size ? id : -1;
    }
    for (int i = 0; i < t->vocab_size; i++)
        if ((size_t)idx->text_len[i] == len && memcmp(idx->texts[i], text, len) == 0) return i;
    return -1;
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
