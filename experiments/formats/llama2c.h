// llama2c.h: import of llama2.c checkpoints (karpathy/llama2.c run.c / export.py), and an
// export of them so tests can build one (checkpoint.h's checkpoint_load opens either a GGUF
// file or a llama2.c one). Tests: `make build/tests/test_gguf && ./build/tests/test_gguf`.
//
// Two fp32 formats (all int32 / float32 little-endian):
//   legacy (export.py version 0): 7 x int32 header {dim, hidden_dim, n_layers, n_heads,
//     n_kv_heads, vocab_size, seq_len}, vocab_size < 0 meaning a separate classifier; then
//     token_embedding, rms_att, wq, wk, wv, wo, rms_ffn, w1, w2, w3, rms_final (each kind for
//     all layers in turn), freq_cis real and imag (seq_len * head_size / 2 each, skipped on
//     import: our RoPE computes them), then wcls when not shared.
//   version 1: u32 magic 0x616b3432 ("ak42"), int32 version = 1, the 7 ints (vocab_size > 0),
//     u8 shared_classifier, zero padding to 256 bytes; then rms_att, rms_ffn, rms_final,
//     token_embedding, wq, wk, wv, wo, w1, w2, w3 (each kind for all layers), wcls when not
//     shared. No freq_cis.
// head_size = dim / n_heads. llama2.c's model: RMSNorm eps 1e-5, RoPE theta 10000 rotating
// adjacent pairs (as ours does), no scaling, no window. The file size must be exactly what
// the header implies.
#pragma once

#include "common.h"
#include "model.h"
#include "tokenizer.h"

// Import a llama2.c checkpoint (legacy or version 1) into m (allocated here).
int llama2c_load_model(const char *path, Model *m, Error *err);

// Export m as llama2.c version 0 (legacy) or 1; the config must be one llama2.c can express
// (head_dim = dim / n_heads, no window, sinks or RoPE scaling, theta 10000): else it dies.
void llama2c_save_model(const char *path, const Model *m, int version);

// Write a llama2.c tokenizer.bin (int32 max_token_length, then per token float32 score,
// int32 length, bytes) of a TOKENIZER_LLAMA2C tokenizer.
void llama2c_save_tokenizer(const char *path, const Tokenizer *t);
