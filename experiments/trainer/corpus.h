// corpus.h: the text every model of the lab learns from: the King James Bible (or any UTF-8
// file), normalised, split into training and validation text, and passkey (needle) sequences
// for in-context retrieval, with the evaluator that measures it.
//
// KJV normalisation (corpus_normalise_kjv), from what `bible "Gen1:1-Rev22:21"` prints
// (Debian bible-kjv: a blank line, a "Book N" heading, a blank line, then verses "  N text"
// wrapped at 80 columns):
//   - every chapter becomes its heading line ("Genesis 1"), then one line per verse, then a
//     blank line: the text block that ends at "\n\n";
//   - verse numbers are dropped; wrapped lines are joined with one space; runs of spaces and
//     tabs become one space; no line has leading or trailing space.
// Any other file (CORPUS=path) is used as it is, after checking that it is UTF-8.
//
// Split: the text is cut into blocks, each ending at a blank line (KJV: one
// chapter per block), or at a line break once it reaches CORPUS_BLOCK_SOFT bytes, or at a
// UTF-8 character boundary at CORPUS_BLOCK_HARD bytes (text without line breaks). Block i goes
// to validation when i % CORPUS_VAL_EVERY == CORPUS_VAL_EVERY / 2 (KJV: Genesis 11, 31, ...,
// 5% of the text), everything else to training; with fewer blocks than that, the last block
// is validation. No byte is in both.
//
// Passkey sequence (passkey_sequence), n tokens, ending in its answer:
//   BOS | filler ... | needle | filler ... | question | answer
// The needle is the line "The number of the key is 48213. Keep it in thine heart, and
// forget not the number." placed at the start of the line that holds a random depth of the
// filler (the next line's start when that is the first line; the depth itself when the
// filler has no line break; passkey_sequence_placed also puts it at a chosen depth, or near the
// question for a training curriculum). The question is "\nWhat is the number of the key? The number of
// the key is", the answer " 48213": a uniform random PASSKEY_DIGITS-digit number, one of the
// held-out keys (passkey_held_out) in evaluation and never one in training. The filler
// is consecutive tokens of a token stream from a random offset, one without digits when
// one of FILLER_ATTEMPTS random offsets gives it (KJV: no chapter heading), so the key is the
// only number in the haystack. The tokenizer splits digits apart, so the number is copied
// digit by digit. The evaluator (passkey_evaluate) counts a sample right when greedy
// decoding after the prompt reproduces the answer's tokens exactly, at a chosen needle depth.
//
// Tests: make build/tests/test_corpus && ./build/tests/test_corpus
#pragma once

#include <stddef.h>
#include <stdint.h>

#include "common.h"
#include "model.h"
#include "tokenizer.h"

#define CORPUS_VAL_EVERY 20
#define CORPUS_BLOCK_SOFT 32768
#define CORPUS_BLOCK_HARD 131072
#define CORPUS_MAX_BYTES ((size_t)1 << 30)
#define PASSKEY_DIGITS 5 // digits of a passkey (the first is never 0)
#define FILLER_ATTEMPTS 32

typedef struct {
    char *text;       // the normalised corpus, NUL-terminated
    size_t len;
    char *train;      // training blocks, concatenated in order, NUL-terminated
    size_t train_len;
    char *val;        // validation blocks, concatenated in order, NUL-terminated
    size_t val_len;
    int n_blocks, n_val_blocks;
    char source[256]; // "bible-kjv" or the file's path
} Corpus;

// The KJV from the `bible` program (path NULL), or the UTF-8 file at path. Normalises (KJV
// only) and splits. On error nothing stays allocated.
int corpus_load(Corpus *c, const char *path, Error *err);
// Use text (len bytes, which must be UTF-8) as the corpus; kjv_raw: it is `bible` output
// to normalise first. Copies the text.
int corpus_from_text(Corpus *c, const char *text, size_t len, int kjv_raw, Error *err);
void corpus_free(Corpus *c);

// Normalise raw `bible` output as described above; *out is malloc'd and NUL-terminated.
// Fails when the text has no chapter heading followed by a verse.
int corpus_normalise_kjv(const char *raw, size_t len, char **out, size_t *out_len, Error *err);

// Is text valid UTF-8 (shortest forms, no surrogates, <= U+10FFFF)? If not, *bad_at is the
// offset of the first bad byte.
int utf8_valid(const char *text, size_t len, size_t *bad_at);

// FNV-1a 64-bit hash of bytes, continuing from h (start with FNV_OFFSET); models are keyed
// by it so that a changed corpus retrains them.
#define FNV_OFFSET 0xcbf29ce484222325ull
uint64_t fnv1a(uint64_t h, const void *data, size_t len);

// Where the parts of a passkey sequence lie (token indices).
typedef struct {
    int needle_at;      // first token of the needle
    int needle_len;
    int prompt_len;     // tokens before the answer (BOS .. question)
    int answer_len;     // tokens of the answer; prompt_len + answer_len = n
    unsigned number;    // the passkey
    char answer[16];    // its text: " 48213"
} PasskeyLayout;

// Smallest n passkey_sequence accepts (BOS, needle, question, answer, one filler token).
int passkey_min_len(const Tokenizer *tok);

// Is this number one of the keys kept for evaluation (1 in 16, by hash)? Training sequences
// never hold them.
int passkey_held_out(unsigned number);

// Where passkey_sequence_placed puts the needle among the filler tokens.
typedef struct {
    float depth;  // >= 0: at the start of the line that holds this fraction of the filler (0: the
                  // first whole line, 1: the last line before the question); < 0: at a random token
    int max_gap;  // with depth < 0 and max_gap > 0: at most this many filler tokens between the
                  // needle and the question (a training curriculum widens it)
    int held_out; // 1: the number is a held-out key (evaluation), 0: it is not (training)
} PasskeyPlace;

// Fill seq (n tokens) with a passkey sequence drawn from *rng: number, placement and filler
// offset; filler comes from filler (n_filler tokens, at least n). Returns 0, or -1 with err
// when n < passkey_min_len or the filler is too short.
int passkey_sequence_placed(const Tokenizer *tok, int *seq, int n, const int *filler, size_t n_filler,
                            uint64_t *rng, const PasskeyPlace *place, PasskeyLayout *layout, Error *err);
// The same at a random depth (line start), with a training (not held-out) key.
int passkey_sequence(const Tokenizer *tok, int *seq, int n, const int *filler, size_t n_filler,
                     uint64_t *rng, PasskeyLayout *layout, Error *err);

// Copy sequence (copy_sequence), n tokens: BOS, then digit-free filler in which a digit
// string " 48213..." of COPY_MIN_DIGITS .. min(COPY_MAX_DIGITS, n / 3) digits (tokenized like
// a passkey answer) overwrites the filler at two random places, the second after the first.
// Only matching content can predict the second copy (its offset from the first is random), so
// it drives the induction (copy) circuit a passkey needs. The loss goes on the second copy's
// tokens after its first (the first cannot be known).
#define COPY_MIN_DIGITS 5
#define COPY_MAX_DIGITS 16

typedef struct {
    int first_at, second_at; // token index of each copy
    int len;                 // tokens of a copy
} CopyLayout;

// Returns 0, or -1 with err when n < 3 * COPY_MIN_DIGITS + 1 or the filler is too short.
int copy_sequence(const Tokenizer *tok, int *seq, int n, const int *filler, size_t n_filler, uint64_t *rng,
                  CopyLayout *layout, Error *err);

// What the evaluator measures over its samples.
typedef struct {
    double exact;  // fraction of answers reproduced exactly by greedy decoding
    double tokens; // fraction of answer tokens (the leading " d" and the digits) predicted right
                   // with the answer fed back
} PasskeyScore;

// The next evaluation sequence (ctx tokens) from *rng: a held-out key, the needle at depth
// (< 0: a depth drawn from *rng). Every evaluator draws its samples this way, so the same
// seed scores the same keys in the same haystacks.
int passkey_eval_sequence(const Tokenizer *tok, int *seq, int ctx, const int *filler, size_t n_filler, float depth,
                          uint64_t *rng, PasskeyLayout *layout, Error *err);

// Score n_samples passkey sequences of ctx tokens with held-out keys (drawn from seed, filler
// from the given stream), the needle at depth (< 0: a random depth per sample). The model
// must hold ctx positions (m->config.seq_len >= ctx unless RoPE scaling lets it go further:
// the caller decides). Returns 0, or -1 with err when a sequence cannot be built.
int passkey_evaluate(Model *m, const Tokenizer *tok, const int *filler, size_t n_filler, int ctx, float depth,
                     int n_samples, uint64_t seed, PasskeyScore *score, Error *err);
// The same on an open engine (its weights and its KV cache type; max_keys >= ctx).
int passkey_evaluate_engine(Engine *e, const Tokenizer *tok, const int *filler, size_t n_filler, int ctx, float depth,
                            int n_samples, uint64_t seed, PasskeyScore *score, Error *err);
