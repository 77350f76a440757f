// rope.h: rotary position embedding frequencies and their context-extension scalings.
//   none    theta^(-2i/d)
//   linear  positions divided by factor (position interpolation)
//   ntk     "NTK-aware": theta raised to theta * factor^(d / (d - 2))
//   yarn    per-frequency ramp between interpolated and original frequencies
//           (beta_fast / beta_slow in rotations over the original context) and
//           attention temperature mscale = 0.1 ln(factor) + 1 applied to q and k.
// With factor 1 every scaling equals plain RoPE.
#pragma once

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

// Fill inv_freq (head_dim / 2) with the angular frequency of each rotated pair,
// and return the factor q and k are each scaled by (1 except for YaRN).
float rope_frequencies(float *inv_freq, int head_dim, const RopeConfig *rc);
