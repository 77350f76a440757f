// tokenizer.h: the lab's byte-level BPE (trained here), llama2.c's tokenizer.bin, and any GGUF's
// "gpt2" (byte-level BPE) or "llama" (SentencePiece) vocabulary, behind one type. A vocabulary
// read from another program's GGUF file tokenizes and decodes exactly as llama.cpp
// (src/llama-vocab.cpp) does; the lab's own files keep their own rules, below.
//
// Kinds:
//   TOKENIZER_BPE      byte-level BPE. The lab's layout (ids 0..255 the bytes, id 256 + i made by
//                      merges[i], lower = applied first, then BOS and EOS): any byte string
//                      encodes, and decode(encode(s)) == s. A foreign "gpt2" vocabulary
//                      (t->llama_cpp): any layout, its ranked merges as "left right" strings in
//                      GPT-2's byte alphabet, special tokens anywhere.
//   TOKENIZER_LLAMA2C  llama2.c's pieces with merge scores, BOS = 1, EOS = 2, byte fallback
//                      "<0xXX>" at id byte + 3, encoded with run.c's greedy best-score merging.
//                      Also the lab's own "llama" GGUF files (those without a token_type array).
//   TOKENIZER_SPM      SentencePiece as llama.cpp's llm_tokenizer_spm: a foreign "llama" GGUF.
//
// BPE pre-split (tokenizer_chunk_end): text is cut into chunks (pre-tokens) and merges never
// cross a chunk boundary. It is llama.cpp's "starcoder" pre-tokenizer (also its "smollm"):
// every \p{N} codepoint is a chunk of its own (passkeys tokenize digit by digit), and the text
// between them is split by GPT-2's regex
//   's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
// where a number ends the text the regex sees (so " 42" is " ", "4", "2"). Letters, numbers
// and whitespace are Unicode's, as llama.cpp's unicode.cpp classes them (unicode.h; \s is
// White_Space). Text is read as UTF-8 the way llama.cpp reads it (unicode_decode): a byte that
// does not start a well-formed character is U+FFFD, a symbol. What differs is what a chunk is
// made of: the lab's BPE keeps the text's own bytes (so invalid UTF-8 round-trips), a foreign
// BPE re-encodes each codepoint as llama.cpp does (an invalid byte becomes EF BF BD, an overlong
// form its shortest one). The gpt2-family pre-tokenizers ("gpt-2", "mpt", "olmo", ...) are the
// same without the number split. Chunks have no length limit; the lab's pieces are at most
// TOKENIZER_MAX_PIECE bytes.
//
// GGUF files spell BPE pieces in GPT-2's byte-level alphabet (tokenizer_gpt2_spell): each byte
// is one printable codepoint, e.g. ' ' -> U+0120 "\xc4\xa0", '\n' -> U+010A "\xc4\x8a".
//
// Special tokens (foreign vocabularies and the lab's BPE): tokens whose attribute is control,
// user-defined or unknown. Before the text is tokenized it is cut at their occurrences as
// llama.cpp's tokenizer_st_partition does: the longest text first, every occurrence in every
// remaining stretch of text, left to right. User-defined tokens are always cut out (Gemma's
// runs of newlines, spaces and tabs, HTML tags); control and unknown ones only with
// TOKENIZER_PARSE_SPECIAL (chat templates). Each stretch between them is tokenized alone.
//
// Run the tests with `make build/tests/test_tokenizer && ./build/tests/test_tokenizer`, and
// against llama.cpp on the real models with build/tests/test_tokenizer_real.
#pragma once

#include <stdbool.h>
#include <stddef.h>

#include "common.h"

#define TOKENIZER_MAX_PIECE 64 // bytes; training never makes a longer piece
#define TOKENIZER_BPE_PRE "starcoder" // llama.cpp's name for our pre-split rule (tokenizer.ggml.pre)

typedef enum { TOKENIZER_BPE = 0, TOKENIZER_LLAMA2C = 1, TOKENIZER_SPM = 2 } TokenizerKind;

// Token attributes (llama.cpp's, from tokenizer.ggml.token_type: 1 normal, 2 unknown, 3 control,
// 4 user-defined, 5 unused, 6 byte; plus the rules llama.cpp applies when it loads a vocabulary,
// e.g. every end-of-generation token is control, a control token named "unused..." is unused).
// The lab's own vocabularies: BOS and EOS are control, every other token normal.
enum {
    TOKEN_NORMAL = 1,
    TOKEN_UNKNOWN = 2,
    TOKEN_CONTROL = 4,
    TOKEN_USER_DEFINED = 8,
    TOKEN_UNUSED = 16,
    TOKEN_BYTE = 32,
};

// tokenizer_tokenize's options.
enum {
    TOKENIZER_ADD_BOS = 1,       // BOS first (the caller decides; t->add_bos is the model's wish)
    TOKENIZER_ADD_EOS = 2,       // EOS last
    TOKENIZER_PARSE_SPECIAL = 4, // control and unknown tokens' texts are those tokens (llama.cpp's
                                 // parse_special; a chat template's "<|im_start|>")
};

typedef struct TokenizerIndex TokenizerIndex; // private lookup structures

typedef struct {
    TokenizerKind kind;
    bool llama_cpp;         // read from a foreign vocabulary: llama.cpp's rules throughout
    int vocab_size;
    unsigned char **pieces; // (vocab_size) the bytes each token stands for, piece_len[i] of them:
    int *piece_len;         // (vocab_size) for a foreign vocabulary what llama.cpp's
                            // llama_token_to_piece(special = true) gives (a control token's text,
                            // "<0x0A>" as the byte 0x0A, U+2581 or GPT-2's alphabet decoded)
    float *scores;          // (vocab_size) llama2.c's and SentencePiece's merge scores; NULL for BPE
    int n_merges;           // BPE: the merges in the file (a foreign file's unusable ones included)
    int *merges;            // (n_merges, 2) the lab's BPE only: token ids merged into 256 + i
    int bos_id, eos_id;     // -1 when a foreign vocabulary has none
    bool add_bos, add_eos;  // whether the model's sequences start with BOS / end with EOS (llama.cpp's
                            // add_bos / add_eos: the lab's BPE and llama2.c add BOS)
    unsigned char *attr;    // (vocab_size) TOKEN_* flags
    int n_eog;              // the end-of-generation tokens, ascending: llama.cpp's special_eog_ids
    int *eog;               // (n_eog) (EOS, EOT, EOM, FIM pad/repo/sep and the tokens it names so)
    char *chat_template;    // tokenizer.chat_template (NUL-terminated), or NULL
    TokenizerIndex *index;
} Tokenizer;

// A vocabulary as a GGUF file stores it (tokenizer.ggml.*): what tokenizer_from_vocab builds from.
// Pointers are borrowed; strings carry their lengths (GGUF strings are not NUL-terminated).
// Ids and flags: -1 when the key is absent.
typedef struct {
    const char *model;                   // "gpt2" or "llama" (required)
    size_t model_len;
    const char *pre;                     // tokenizer.ggml.pre, or NULL
    size_t pre_len;
    int n_tokens;
    const unsigned char *const *tokens;  // (n_tokens) texts: GPT-2-spelled (gpt2) or with U+2581 for
    const size_t *token_lens;            // spaces (llama)
    const float *scores;                 // (n_scores) or NULL
    size_t n_scores;
    const int *token_types;              // (n_token_types) or NULL
    size_t n_token_types;
    int n_merges;                        // gpt2: merges, or NULL when the key is absent
    const unsigned char *const *merges;  // (n_merges) "left right"
    const size_t *merge_lens;
    long long bos_id, eos_id, eot_id, eom_id;
    long long fim_pre_id, fim_suf_id, fim_mid_id, fim_pad_id, fim_rep_id, fim_sep_id;
    int add_bos, add_eos, add_space_prefix; // 0 / 1, or -1
    const char *chat_template;           // tokenizer.chat_template, or NULL
    size_t chat_template_len;
} TokenizerVocab;

// A TokenizerVocab with every id and flag absent.
TokenizerVocab tokenizer_vocab_empty(void);

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

// Any GGUF vocabulary (tokenizer_gguf.h reads one from a file):
//  - "gpt2" with pre "starcoder" and 256 + n_merges + 2 tokens is the lab's own file: rebuilt
//    from its merges (tokenizer_from_gpt2's checks and errors), and its BOS / EOS ids must be
//    ours. "llama" without token types is the lab's own llama2.c vocabulary
//    (tokenizer_from_pieces, U+2581 read as ' ', BOS / EOS ids checked).
//  - any other "gpt2" (t->llama_cpp): llama.cpp's BPE. pre must be one of the starcoder family
//    ("starcoder", "smollm", "refact", "command-r", "codeshell", "exaone", "minerva-7b",
//    "mellum2") or the gpt2 family ("gpt-2", "phi-2", "mpt", "olmo", "jais", "trillion",
//    "granite-docling"); its other pre-tokenizers are refused by name.
//  - any other "llama" (t->llama_cpp): llama.cpp's SentencePiece; scores needed.
// Foreign vocabularies take llama.cpp's defaults and rules: a missing key's default (gpt2: BOS =
// EOS = 11, add_bos false; llama: BOS 1, EOS 2, add_bos true, space prefix true; a default
// outside the vocabulary is none), an id outside the vocabulary ignored, an empty text read as
// "[EMPTY_<id>]", missing scores 0, and the end-of-generation set and attributes that llama.cpp
// derives from the texts (where it picks one of several candidate texts in hash-map order,
// e.g. two FIM-repo tokens, the lowest id is taken here). Refused: what llama.cpp refuses or
// aborts on (a text listed twice, a byte-typed token with a text shorter than "<0x", a normal
// BPE text spelling a codepoint above U+10FFFF, no merges in a gpt2 file, fewer scores or types
// than tokens), and what would need more output than tokenizer_max_tokens: a one-byte BPE text
// 0x80..0xFF, an SPM vocabulary without a U+2581 token or without a token for some byte
// ("<0xXX>", else the byte itself), add_space_prefix with a one-byte special token,
// add_bos / add_eos without a BOS / EOS id. NaN scores are refused too.
int tokenizer_from_vocab(Tokenizer *t, const TokenizerVocab *v, Error *err);

// Read llama2.c's tokenizer.bin: int32 max_token_length, then per token float32 score,
// int32 len, len bytes. vocab_size comes from the model (extra tokens in the file are
// ignored, as run.c does); vocab_size <= 0 reads every token up to the end of the file.
int tokenizer_load_llama2c(Tokenizer *t, const char *path, int vocab_size, Error *err);

void tokenizer_free(Tokenizer *t);

// --- using ---

// Most tokens tokenizer_encode / tokenizer_tokenize write for len bytes of text, for every
// tokenizer (a foreign BPE turns an invalid byte into the three bytes of U+FFFD; on valid UTF-8
// no tokenizer writes more than len + 3).
static inline size_t tokenizer_max_tokens(size_t len) { return 3 * len + 3; }

// Encode len bytes (any bytes: NUL and invalid UTF-8 included) into tokens, which must hold
// tokenizer_max_tokens(len) ids; returns the count. flags: TOKENIZER_ADD_BOS / ADD_EOS /
// PARSE_SPECIAL. After the special-token cut (see the top; none for llama2.c):
// BPE: within each chunk, the adjacent pair of lowest merge rank is merged, leftmost first,
// until no pair has a merge (llama.cpp's gpt2 BPE); O(n log n) in a chunk's length. A foreign
// chunk's symbol that is not a token is written as llama.cpp does: each byte of its GPT-2
// spelling that is a one-byte token, as that token.
// llama2.c: exactly run.c's encode (dummy " " prefix when len > 0, codepoint lookup with byte
// fallback, then repeatedly the adjacent pair whose joined piece has the highest score,
// leftmost on ties; BOS takes part, as in run.c).
// SentencePiece: per stretch of text, a ' ' first when add_space_prefix and the stretch starts
// the text or follows a special token; ' ' -> U+2581; one symbol per character as its first
// byte tells its length; repeatedly the adjacent pair whose joined text is a token of highest
// score (leftmost on ties) is merged; each symbol is its token, or its bytes' "<0xXX>" tokens.
size_t tokenizer_tokenize(const Tokenizer *t, const unsigned char *text, size_t len, unsigned flags,
                          int *tokens);

// tokenizer_tokenize with ADD_BOS = bos and ADD_EOS = eos, no special tokens parsed.
size_t tokenizer_encode(const Tokenizer *t, const unsigned char *text, size_t len, bool bos,
                        bool eos, int *tokens);

// The tokens of a text file as llama.cpp's tools read one with -f (llama-perplexity): the file
// less one trailing newline, tokenized whole, BOS first where the tokenizer adds one, no special
// tokens parsed. Returns a malloc'd array of *n ids, or NULL with err set (a file that cannot be
// read).
int *tokenizer_encode_file(const Tokenizer *t, const char *path, size_t *n, Error *err);

// The bytes token `token` stands for when it follows prev_token (-1 at the start), for
// streaming output; the pointer is valid while t lives. Control and unknown tokens (BOS and EOS
// among them) give no bytes; "<0xXX>" pieces give the raw byte; llama2.c drops a piece's
// leading space after BOS. A foreign vocabulary's is llama.cpp's
// llama_token_to_piece(special = false). A token outside [0, vocab_size) is a caller bug and
// dies.
const unsigned char *tokenizer_piece(const Tokenizer *t, int prev_token, int token, size_t *len);

// Concatenate the pieces of n tokens (tokenizer_piece rules); returns a malloc'd buffer
// with a NUL after its *len bytes.
unsigned char *tokenizer_decode(const Tokenizer *t, const int *tokens, size_t n, size_t *len);

// Is token an end-of-generation token (t->eog)?
bool tokenizer_is_eog(const Tokenizer *t, int token);

// The id of the token whose text (as the GGUF file spells it; the piece for the lab's and
// llama2.c vocabularies) is the NUL-terminated text, e.g. "<end_of_turn>"; -1 when none.
int tokenizer_find_token(const Tokenizer *t, const char *text);

// The BPE pre-split rule above (the starcoder family): the end of the chunk that starts at
// pos < len (a codepoint boundary: 0 or the end of the chunk before).
size_t tokenizer_chunk_end(const unsigned char *text, size_t len, size_t pos);

// Spell len bytes in GPT-2's byte-level alphabet into out, which holds 2 * len bytes;
// returns the bytes written.
size_t tokenizer_gpt2_spell(const unsigned char *bytes, size_t len, unsigned char *out);

// The inverse: the bytes a GPT-2-spelled string stands for, into out (len bytes); returns
// their count, or -1 when s holds a character outside the alphabet.
long tokenizer_gpt2_unspell(const unsigned char *s, size_t len, unsigned char *out);
