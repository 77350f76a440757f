// quant_weights.h: a model's weight matrices in quantised form (the formats of kernels/quant.h):
// what engine_open runs when asked for a quantised dtype, what a quantised GGUF checkpoint
// holds, and what bin/quantize writes. Tests: make build/tests/test_quantized &&
// build/tests/test_quantized
//
// Every matrix of the model (the architecture's table, arch.h: for Llama the token embedding,
// per layer wq wk wv wo w1 w2 w3, the output head when untied) becomes one Tensor; the norm gains stay fp32. The token embedding is quantised
// like the rest (as llama.cpp's Q4_0 / Q8_0 files do), so a tied head reads the same quantised
// table; an untied head gets the same type too (llama.cpp would keep it at Q6_K / Q8_0; one type
// everywhere keeps the comparison between formats simple). A matrix whose rows the type cannot
// hold (q8_0 / q4_0 need rows of whole 32-weight blocks) stays fp32, as llama.cpp falls back to
// a wider type for such tensors; the bits per weight count it.
#pragma once

#include <stddef.h>

#include "arch.h"
#include "model.h"

typedef struct QuantWeights {
    DType dtype;        // the type asked for
    int n;              // matrices
    const float **host; // (n) each matrix's fp32 host weights in the Model (what it was made from)
    Tensor *tensors;    // (n) the matrices as the engine reads them (fp32 ones point at the host weights)
    void *block;        // owned bytes of the quantised tensors
    size_t bytes;       // bytes of all n tensors, the fp32 ones and the outlier columns included
    TensorOutliers *outliers; // (n) or NULL: LLM.int8()'s fp32 columns of each matrix (n == 0: none), owned
} QuantWeights;

// m's matrices in file order (arch.h's model_matrices), malloc'd; *n: how many. Matrix i of
// a QuantWeights is entry i.
ModelTensor *model_matrix_list(const Model *m, int *n);

// Lay out q for m's matrices, matrix i in types[i] (NULL: every matrix in dtype where its rows
// allow, fp32 where not), bytes allocated but not filled.
void quant_weights_layout(QuantWeights *q, const Model *m, DType dtype, const DType *types);
// Round-to-nearest quantisation of every matrix of m into t.
void quant_weights_build(QuantWeights *q, const Model *m, DType t);
// LLM.int8()'s decomposition (outliers.h) of every matrix of m into int8 per output channel:
// matrix i's input columns j with col_max[i][j] > threshold in fp32 (col_max[i] NULL: none),
// the others quantised with those columns zeroed; q->bytes counts the columns' weights and
// indices (one int each).
void quant_weights_build_outliers(QuantWeights *q, const Model *m, const float *const *col_max, float threshold);
// Give matrix i the fp32 columns cols (n, increasing) with weights w (rows, n), both copied.
void quant_weights_set_outliers(QuantWeights *q, int i, int n, const int *cols, const float *w);
void quant_weights_free(QuantWeights *q);
// The tensor made from the host matrix at p (p one of model_matrix_list's), or NULL.
const Tensor *quant_weights_find(const QuantWeights *q, const float *p);
// Overwrite m's host matrices with the dequantised values of q's tensors, so that code that
// reads fp32 weights (a reference forward, the trainer's evaluation) sees what the engine runs.
void quant_weights_dequantize_into(const QuantWeights *q, Model *m);
// Bits per weight over all of q's matrices, scales included.
double quant_weights_bits_per_weight(const QuantWeights *q);
