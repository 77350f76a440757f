// outliers.h: LLM.int8()-style outlier-aware int8 weights (Dettmers et al. 2022): the input
// channels whose activations grow large are kept in fp32, the rest of each matrix quantised to
// int8 per output channel, so that a few large channels no longer set every row's scale.
// Tests: make build/tests/test_quantized && build/tests/test_quantized
//
// Calibration: the fp32 model's forward over calibration text (calibration.h, every matmul's
// input kept) gives, for every matrix of the model (arch.h: each names its input), the largest
// |x| of each of its input channels: wq wk wv read rmsnorm(x) of the attention, wo the
// attention output, w1 w3 rmsnorm(x) of the MLP, w2 silu(w1 x) * w3 x, the head (and the tied
// embedding table, which is the head) the final norm's output. An untied embedding is a lookup
// with no input channels: it is quantised without outliers.
//
// A matrix's input column j is an outlier when its channel's largest |x| exceeds the threshold
// (6.0 in LLM.int8(); the distribution of our small models' activations decides how many pass
// it, so the experiments also pick the threshold that keeps a given fraction). The outlier
// columns go to Tensor.outliers in fp32 (ops.h), their int8 codes are zero, and the row scales
// come from the other columns.
#pragma once

#include "calibration.h"
#include "model.h"

typedef struct {
    int n;           // matrices (model_matrix_list's order)
    int *cols;       // (n) input channels of each
    int *rows;       // (n) output channels of each
    float **col_max; // (n) each matrix's largest |x| per input channel (cols[i]); NULL: no input (lookup)
} OutlierCalibration;

// cal: the calibration of m's fp32 weights.
void outlier_calibrate(OutlierCalibration *oc, const Model *m, const Calibration *cal);
void outlier_calibration_free(OutlierCalibration *oc);

// Over every calibrated input column of every matrix (columns, not distinct activations: a
// channel read by three matrices counts three times): the fraction whose largest |x| exceeds
// threshold, the fraction of the weights those columns hold, and the q-quantile of the largest
// |x| (q in [0, 1]; so threshold = quantile(1 - f) keeps about a fraction f of the columns).
double outlier_column_fraction(const OutlierCalibration *oc, float threshold);
double outlier_weight_fraction(const OutlierCalibration *oc, float threshold);
float outlier_channel_quantile(const OutlierCalibration *oc, double q);

// Set m->quant to m's matrices in int8 per output channel with the outlier columns (largest
// |x| > threshold) in fp32.
void outlier_quantize(Model *m, const OutlierCalibration *oc, float threshold);
