// tokenizer_gguf.h: a Tokenizer from a GGUF file's tokenizer.* metadata, for any file: the lab's
// own checkpoints and other programs' (llama.cpp's converters: SmolLM2's "gpt2", Gemma's
// "llama"). What each kind of vocabulary becomes is tokenizer_from_vocab's (tokenizer.h).
//
// Keys read: tokenizer.ggml.model (required), .pre, .tokens (required), .scores, .token_type,
// .merges ("gpt2": required), .bos_token_id, .eos_token_id, .eot_token_id, .eom_token_id,
// .fim_{pre,suf,mid,pad,rep,sep}_token_id (and the older .prefix / .suffix / .middle_token_id),
// .add_bos_token, .add_eos_token, .add_space_prefix, and tokenizer.chat_template.
//
// Test: build/tests/test_tokenizer_real (the two real models), build/tests/test_gguf.
#pragma once

#include "gguf.h"
#include "tokenizer.h"

// The tokenizer of an open file. 0, or -1 with err naming the file and the key or token at fault.
int tokenizer_read_gguf(Tokenizer *t, const GGUFFile *g, Error *err);

// The same from a path (the whole file is read).
int tokenizer_load_gguf(Tokenizer *t, const char *path, Error *err);
