// calibration.h: the activations every matrix of a model multiplies, recorded from the engine's
// fp32 forward over calibration text: what AWQ (awq.h) and LLM.int8() (outliers.h) calibrate on,
// as llama.cpp's imatrix records them through its graph callback. One forward per sequence with
// an EngineTap on (model.h); any architecture the engine runs (the zoo's Llama-style models,
// SmolLM2, Gemma 3), MLA excepted (its attention output is a latent, not the heads).
// Tests: make build/tests/test_quantized && build/tests/test_quantized
#pragma once

#include <stddef.h>

#include "model.h"
#include "tokenizer.h"

typedef struct {
    int B, T, N;       // N = B * T rows: sequence b's position p at row b * T + p
    int L, C, O, H;    // layers, dim, attention output width (n_heads * hd), hidden_dim
    float *attn_norm;  // (L, N, C)  the attention's normed input: wq wk wv read it
    float *attn_out;   // (L, N, O)  the attention's output: wo
    float *ffn_norm;   // (L, N, C)  the MLP's normed input: w1 w3
    float *ffn_act;    // (L, N, H)  act(w1 x) * w3 x: w2
    float *final_norm; // (N, C)     the final normed residual: the head
} Calibration;

// The forward of m's fp32 weights (m->quant must be NULL) over tokens (B, T), each sequence from
// position 0, on the CPU, with every matmul input kept.
void calibration_run(Calibration *cal, const Model *m, const int *tokens, int B, int T);
void calibration_free(Calibration *cal);

// The rows (N, width) that a matrix reading `input` multiplies in layer l (l ignored for the
// head's); NULL for INPUT_NONE and for an untied embedding (a table only looked up).
const float *calibration_input(const Calibration *cal, const Config *c, TensorInput input, int l);

// Calibration sequences (B, T), malloc'd: each a BOS and T - 1 tokens of text from B evenly
// spaced points (the training text: the evaluation's held-out text is never calibrated on).
int *calibration_tokens(const Tokenizer *tok, const char *text, size_t len, int B, int T);
