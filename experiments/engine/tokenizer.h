// tokenizer.h: byte-level BPE (trained here) and llama2.c's tokenizer.bin, behind one type.
//
// BPE vocabulary layout: ids 0..255 are the bytes, id 256 + i is merges[i] (the i-th
// merge learned, lower = applied first), then BOS and EOS. Any byte string encodes, and
// decode(encode(s)) == s. llama2.c vocabularies: pieces with merge scores, BOS = 1,
// EOS = 2, byte fallback tokens "<0xXX>", encoded with run.c's greedy best-score merging.
#pragma once

#include <stddef.h>

#include "common.h"

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
