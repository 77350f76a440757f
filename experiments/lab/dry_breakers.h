// dry_breakers.h: DRY's sequence breakers ("\n", ":", "\"", "*" by default) turned from text
// into the token sequences the sampler matches (sampler.h's SamplerBreaker), as llama.cpp's
// llama_sampler_init_dry does: every token whose text contains a breaker breaks on its own;
// a token whose text ends with the breaker's beginning is the head of a breaker whose tail
// is the rest of the breaker, tokenized (at most SAMPLER_BREAKER_MAX_TAIL tokens).
// Tests: test_sampler_cli (make test).
#pragma once

#include "common.h"
#include "sampler.h"
#include "tokenizer.h"

// llama.cpp's default breakers.
extern const char *const DRY_DEFAULT_BREAKERS[4];

// The breakers of the n strings over tok's vocabulary: a malloc'd array in *out, its length
// in *n_out. Returns -1 with a message for an empty string.
int dry_breakers_from_strings(const Tokenizer *tok, const char *const *strings, int n, SamplerBreaker **out,
                              int *n_out, Error *err);
