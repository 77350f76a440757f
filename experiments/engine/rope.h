// rope.h: rotary position embedding frequencies and their context-extension scalings, for a
// model trained at context L = orig_ctx and run at s = factor times it:
//   none    theta^(-2i/d)                                       (extrapolation)
//   linear  theta^(-2i/d) / s                                   (position interpolation, PI)
//   ntk     (theta * s^(d / (d - 2)))^(-2i/d)                   ("NTK-aware": the lowest
//           frequency is interpolated by s, the highest kept)
//   yarn    (1 - g) * f / s + g * f with f = theta^(-2i/d) and g = ramp(L f / 2 pi): 0 below
//           beta_slow = alpha = 1 rotation over L (interpolated), 1 above beta_fast = beta
//           = 32 (kept), linear between; and attention temperature mscale = 0.1 ln s + 1
//           applied to q and k (so to their dot product squared).
// With factor 1 every scaling equals plain RoPE.
// GGUF keys (llama.cpp's, gguf.h): <arch>.rope.scaling.type, .factor,
// .original_context_length, .yarn_beta_fast, .yarn_beta_slow; NTK is written as type none
// with the NTK base in <arch>.rope.freq_base, since llama.cpp has no "ntk" type.
// Tests: make build/tests/test_rope && ./build/tests/test_rope
#pragma once

#include "common.h"

typedef enum { ROPE_NONE = 0, ROPE_LINEAR, ROPE_NTK, ROPE_YARN } RopeScaling;

typedef struct {
    float theta;          // base, 10000 in Llama 1/2
    RopeScaling scaling;
    float factor;         // context extension factor s (1 = none)
    int orig_ctx;         // context the model was trained at (YaRN's ramp uses it)
    float beta_fast;      // YaRN: 32
    float beta_slow;      // YaRN: 1
} RopeConfig;

// Parse "none" | "linear" | "ntk" | "yarn"; returns -1 on an unknown name.
int rope_scaling_from_name(const char *name);
const char *rope_scaling_name(RopeScaling s);

// Fill inv_freq (head_dim / 2) with the angular frequency of each rotated pair (the plain
// ones as ggml's float chain f_i = f_(i-1) * powf(base, -2 / d), see rope.c),
// and return the factor q and k are each scaled by (1 except for YaRN).
float rope_frequencies(float *inv_freq, int head_dim, const RopeConfig *rc);
// The base the frequencies use: theta * factor^(d / (d - 2)) for NTK, theta otherwise.
double rope_base(const RopeConfig *rc, int head_dim);

// An inference-time override of a model's RoPE (the command line's --rope-scaling NAME and
// --rope-factor S): scaling and factor replace the config's, and YaRN's ramp counts
// rotations over orig_ctx, the context the model was trained at. 0, or -1 with err on an
// unknown name or a factor outside [1, 1024].
int rope_override(RopeConfig *rc, const char *scaling, double factor, int orig_ctx, Error *err);
