// awq.h: activation-aware weight quantisation (AWQ, Lin et al. 2023) of a model to a group-wise
// int4 type, in the form this lab can fold exactly. Tests: make build/tests/test_quantized &&
// build/tests/test_quantized
//
// Calibration: the fp32 model's forward over calibration text (calibration.h, every matmul's
// input kept) gives each input channel j of each group of matrices sharing an
// input its mean magnitude s_x[j]. Per layer and group, s = s_x^alpha / sqrt(max * min) (AWQ's
// normalisation), alpha from a grid over [0, 1] minimising that group's output error
//   sum over its matrices of || X W^T - (X / s) Q(W diag(s))^T ||^2     (Q: the int4 round trip)
// on the calibration inputs X. The weights' input columns are multiplied by s and the inverse
// folded into the operation before, so the fp32 model computes the same function:
//   wq wk wv  (input rmsnorm(x))        1 / s into the attention norm's gains
//   w1 w3     (input rmsnorm(x))        1 / s into the MLP norm's gains
//   w2        (input silu(w1 x) * w3 x) 1 / s into w3's rows (the up projection is linear)
//   wo        (input the attention out) 1 / s into wv's rows: attention mixes value rows, so
//             output channel (h, d) of query head h is value channel (kv(h), d) scaled alike;
//             with GQA the query heads sharing a KV head share one scale (s_x averaged over them).
// A Gemma 3 folds the same way: its QK-norms and post-norms act on the outputs of the scaled
// matrices, which the folding leaves as they were, and its GeGLU's up projection is linear too.
// Scaling a weight row by a constant (wv's, w3's) leaves its group-wise int4 codes as they are,
// so each group's search is independent of the others'. The token embedding and the head (tied
// to it) have no operation before them to fold into: they are quantised round-to-nearest.
// Then every matrix is quantised to t (m->quant), as quant_weights_build does.
#pragma once

#include <stddef.h>

#include "calibration.h"
#include "model.h"

#define AWQ_GRID 21 // alpha = 0, 0.05, ..., 1
#define AWQ_MAX_LAYERS 64

enum { AWQ_ATTN_IN, AWQ_ATTN_OUT, AWQ_MLP_IN, AWQ_MLP_DOWN, AWQ_GROUPS };

typedef struct {
    double alpha[AWQ_MAX_LAYERS][AWQ_GROUPS];     // chosen per layer and group
    double error[AWQ_MAX_LAYERS][AWQ_GROUPS];     // its output error (sum of squares)
    double error_rtn[AWQ_MAX_LAYERS][AWQ_GROUPS]; // alpha = 0: plain round to nearest
} AwqResult;

// Scale m's weights as above and set m->quant to its matrices in t (an int4-gG type).
// cal: the calibration of m's fp32 weights. max_alpha: the grid's end (1 for AWQ; 0 searches
// alpha = 0 alone, which is plain round to nearest).
void awq_quantize(Model *m, DType t, const Calibration *cal, double max_alpha, AwqResult *res);
