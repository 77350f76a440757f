// tokenizer.h: byte-level BPE (trained here) and llama2.c's tokenizer.bin, behind one type.
//
// BPE vocabulary layout: ids 0..255 are the bytes, id 256 + i is merges[i] (the i-th
// merge learned, lower = applied first), then BOS and EOS. Any byte string encodes, and
// decode(encode(s)) == s. llama2.c vocabularies: pieces with merge scores, BOS = 1,
// EOS = 2, byte fallback tokens "<0xXX>" at id byte + 3, encoded with run.c's greedy
// best-score merging.
//
// BPE pre-split rule (tokenizer_chunk_end): text is cut into chunks and merges never cross
// a chunk boundary. Bytes are letters (A-Z, a-z and every byte >= 0x80, so UTF-8 words stay
// whole), digits, whitespace (space \t \n \v \f \r) or symbols (everything else). A chunk is
//   - an optional single leading space, then a run of letters, a single digit (so numbers
//     such as passkeys tokenize digit by digit), or a run of symbols; or
//   - a run of whitespace, minus its last byte when that byte is a space followed by a
//     non-whitespace byte (that space leads the next chunk).
// Chunks are at most TOKENIZER_MAX_CHUNK bytes (longer runs are cut), which bounds the
// cost of encoding any input.
//
// Run the tests with `make build/tests/test_tokenizer && ./build/tests/test_tokenizer`.
#pragma once

#include <stdbool.h>
#include <stddef.h>

#include "common.h"

#define TOKENIZER_MAX_CHUNK 64

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
// (256 bytes + merges + BOS + EOS). Deterministic. Stops early, with a smaller
// t->vocab_size, when no adjacent pair is left to merge.
int tokenizer_train_bpe(Tokenizer *t, const unsigned char *text, size_t len, int vocab_size,
                        Error *err);

// A BPE tokenizer from its merges (n_merges, 2), as a GGUF file stores them; pieces are
// rebuilt. Every merge must join two earlier tokens (< 256 + its index), and no pair twice.
int tokenizer_from_merges(Tokenizer *t, const int *merges, int n_merges, Error *err);

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
// BPE: merges applied by rank within each chunk. llama2.c: exactly run.c's encode (dummy
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
