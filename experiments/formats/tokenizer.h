// tokenizer.h: byte-level BPE (trained here) and llama2.c's tokenizer.bin, behind one type.
//
// BPE vocabulary layout: ids 0..255 are the bytes, id 256 + i is merges[i] (the i-th
// merge learned, lower = applied first), then BOS and EOS. Any byte string encodes, and
// decode(encode(s)) == s. llama2.c vocabularies: pieces with merge scores, BOS = 1,
// EOS = 2, byte fallback tokens "<0xXX>" at id byte + 3, encoded with run.c's greedy
// best-score merging.
//
// BPE pre-split rule (tokenizer_chunk_end): text is cut into chunks (pre-tokens) and merges
// never cross a chunk boundary. It is llama.cpp's "starcoder" pre-tokenizer, so that a GGUF
// file with tokenizer.ggml.pre = "starcoder" tokenizes in llama.cpp exactly as here: every
// digit is a chunk of its own (passkeys tokenize digit by digit), and the text between digits
// is split by GPT-2's regex
//   's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
// where a digit ends the text the regex sees (so " 42" is " ", "4", "2"). Bytes are letters
// (A-Z, a-z and every byte >= 0x80, so UTF-8 words stay whole), digits, whitespace
// (space \t \n \v \f \r) or symbols (everything else). On ASCII text this is exactly
// llama.cpp's split; on other text llama.cpp uses Unicode categories (a non-ASCII space or
// digit, or a symbol such as "—", splits differently) and replaces invalid UTF-8 by U+FFFD.
// Chunks have no length limit; pieces are at most TOKENIZER_MAX_PIECE bytes.
//
// GGUF files spell pieces in GPT-2's byte-level alphabet (tokenizer_gpt2_spell): each byte
// is one printable codepoint, e.g. ' ' -> U+0120 "Ġ", '\n' -> U+010A "Ċ".
//
// Run the tests with `make build/tests/test_tokenizer && ./build/tests/test_tokenizer`.
#pragma once

#include <stdbool.h>
#include <stddef.h>

#include "common.h"

#define TOKENIZER_MAX_PIECE 64 // bytes; training never makes a longer piece
#define TOKENIZER_BPE_PRE "starcoder" // llama.cpp's name for our pre-split rule (tokenizer.ggml.pre)

typedef enum { TOKENIZER_BPE = 0, TOKENIZER_LLAMA2C = 1 } TokenizerKind;

typedef struct TokenizerIndex TokenizerIndex; // private lookup structures

typedef struct {
    TokenizerKind kind;
    int vocab_size;
    unsigned char **pieces; // (vocab_size) bytes of each token; piece_len[i] of them
    int *piece_len;         // (vocab_size)
    float *scores;          // (vocab_size) llama2.c merge scores; NULL for BPE
    int n_merges;           // BPE only
    int *merges;            // (n_merges, 2) BPE only: token ids merged into 256 + i
    int bos_id, eos_id;
    TokenizerIndex *index;
} Tokenizer;

// --- building (each returns 0, or -1 with err filled and *t left empty) ---

// Learn a byte-level BPE from text: count the unique chunks, then merge the most frequent
// adjacent pair (ties: lowest first id, then lowest second id) until vocab_size is reached
// (256 bytes + merges + BOS + EOS). A pair whose joined piece already exists (another merge
// made it, or it is BOS's or EOS's text) or is longer than TOKENIZER_MAX_PIECE is never
// merged: every piece is distinct, as llama.cpp's piece -> id lookup needs. Deterministic.
// Stops early, with a smaller t->vocab_size, when no adjacent pair is left to merge.
int tokenizer_train_bpe(Tokenizer *t, const unsigned char *text, size_t len, int vocab_size,
                        Error *err);

// A BPE tokenizer from its merges (n_merges, 2); pieces are rebuilt. Every merge must join
// two earlier tokens (< 256 + its index), and no pair twice.
int tokenizer_from_merges(Tokenizer *t, const int *merges, int n_merges, Error *err);

// A BPE tokenizer from a "gpt2" vocabulary as GGUF stores it: n_tokens pieces and n_merges
// "left right" strings, both spelled in GPT-2's alphabet (BOS and EOS as their raw text).
// Only our layout is accepted (ids 0..255 the bytes in order, merge i making id 256 + i,
// then BOS and EOS); anything else is an error naming the first token or merge that differs.
int tokenizer_from_gpt2(Tokenizer *t, const unsigned char *const *tokens, const size_t *token_lens,
                        int n_tokens, const unsigned char *const *merges, const size_t *merge_lens,
                        int n_merges, Error *err);

// A llama2.c-style tokenizer from vocab_size pieces (bytes + lengths) and scores, all copied.
// It needs the byte-fallback ids (vocab_size >= 259) and a " " piece for run.c's dummy
// prefix; scores must not be NaN. A piece listed twice encodes as its lowest id.
int tokenizer_from_pieces(Tokenizer *t, const unsigned char *const *pieces, const int *lens,
                          const float *scores, int vocab_size, Error *err);

// Read llama2.c's tokenizer.bin: int32 max_token_length, then per token float32 score,
// int32 len, len bytes. vocab_size comes from the model (extra tokens in the file are
// ignored, as run.c does); vocab_size <= 0 reads every token up to the end of the file.
int tokenizer_load_llama2c(Tokenizer *t, const char *path, int vocab_size, Error *err);

void tokenizer_free(Tokenizer *t);

// --- using ---

// Most tokens tokenizer_encode writes for len bytes of text.
static inline size_t tokenizer_max_tokens(size_t len) { return len + 3; }

// Encode len bytes (any bytes: NUL and invalid UTF-8 included) into tokens, which must hold
// tokenizer_max_tokens(len) ids; returns the count. Optional BOS first and EOS last.
// BPE: within each chunk, the adjacent pair of lowest merge rank is merged, leftmost
// first, until no pair has a merge (llama.cpp's gpt2 BPE); O(n log n) in a chunk's length. llama2.c: exactly run.c's encode (dummy
// " " prefix when len > 0, codepoint lookup with byte fallback, then repeatedly the
// adjacent pair whose joined piece has the highest score, leftmost on ties).
size_t tokenizer_encode(const Tokenizer *t, const unsigned char *text, size_t len, bool bos,
                        bool eos, int *tokens);

// The bytes token `token` stands for when it follows prev_token (-1 at the start), for
// streaming output; the pointer is valid while t lives. BOS and EOS give no bytes;
// "<0xXX>" pieces give the raw byte; llama2.c drops a piece's leading space after BOS.
// A token outside [0, vocab_size) is a caller bug and dies.
const unsigned char *tokenizer_piece(const Tokenizer *t, int prev_token, int token, size_t *len);

// Concatenate the pieces of n tokens (tokenizer_piece rules); returns a malloc'd buffer
// with a NUL after its *len bytes.
unsigned char *tokenizer_decode(const Tokenizer *t, const int *tokens, size_t n, size_t *len);

// The BPE pre-split rule above: the end of the chunk that starts at pos < len.
size_t tokenizer_chunk_end(const unsigned char *text, size_t len, size_t pos);

// Spell len bytes in GPT-2's byte-level alphabet into out, which holds 2 * len bytes;
// returns the bytes written.
size_t tokenizer_gpt2_spell(const unsigned char *bytes, size_t len, unsigned char *out);

// The inverse: the bytes a GPT-2-spelled string stands for, into out (len bytes); returns
// their count, or -1 when s holds a character outside the alphabet.
long tokenizer_gpt2_unspell(const unsigned char *s, size_t len, unsigned char *out);
