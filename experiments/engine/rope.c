// rope.c: RoPE frequencies with linear, NTK-aware and YaRN context extension (see rope.h).
#include "rope.h"

#include <math.h>
#include <string.h>

static const char *SCALING_NAMES[] = {"none", "linear", "ntk", "yarn"};

int rope_scaling_from_name(const char *name) {
    for (int i = 0; i < 4; i++)
        if (strcmp(name, SCALING_NAMES[i]) == 0) return i;
    return -1;
}

const char *rope_scaling_name(RopeScaling s) {
    return (s >= ROPE_NONE && s <= ROPE_YARN) ? SCALING_NAMES[s] : "?";
}

static double factor_of(const RopeConfig *rc) { return rc->factor > 0.0f ? rc->factor : 1.0; }

double rope_base(const RopeConfig *rc, int head_dim) {
    double theta = rc->theta;
    return rc->scaling == ROPE_NTK ? theta * pow(factor_of(rc), (double)head_dim / (head_dim - 2)) : theta;
}

// YaRN's ramp: 0 for pairs that rotate fewer than beta_slow times over the original
// context (fully interpolated), 1 for more than beta_fast times (left alone), linear between.
static double yarn_ramp(double inv_freq, const RopeConfig *rc) {
    double rotations = rc->orig_ctx * inv_freq / (2.0 * M_PI);
    double r = (rotations - rc->beta_slow) / (rc->beta_fast - rc->beta_slow);
    return r < 0.0 ? 0.0 : (r > 1.0 ? 1.0 : r);
}

// The plain frequencies are ggml's chain (ggml-cpu ops.cpp, rope_cache_init): r =
// powf(base, -2 / d) in float and f_i = f_(i-1) * r from f_0 = 1, each product rounded to
// float, not theta^(-2i/d) rounded once (they part by up to ~i/2 ulps). rope_rotate grows its
// angles by the same chain, which is what makes a plain table's angles ggml's bit for bit.
float rope_frequencies(float *inv_freq, int head_dim, const RopeConfig *rc) {
    double s = factor_of(rc);
    float r = powf((float)rope_base(rc, head_dim), -2.0f / (float)head_dim), f = 1.0f;
    for (int i = 0; i < head_dim / 2; i++, f *= r) {
        inv_freq[i] = f;
        if (rc->scaling == ROPE_LINEAR) inv_freq[i] = f * (float)(1.0 / s); // ggml: freq_scale * theta
        if (rc->scaling == ROPE_YARN) {
            double keep = yarn_ramp(f, rc);
            inv_freq[i] = (float)((1.0 - keep) * f / s + keep * f);
        }
    }
    return (rc->scaling == ROPE_YARN && s > 1.0) ? (float)(0.1 * log(s) + 1.0) : 1.0f;
}

int rope_override(RopeConfig *rc, const char *scaling, double factor, int orig_ctx, Error *err) {
    int type = rope_scaling_from_name(scaling);
    if (type < 0) return error_set(err, "unknown RoPE scaling '%s' (none, linear, ntk, yarn)", scaling);
    if (!(factor >= 1.0 && factor <= 1024.0)) return error_set(err, "RoPE factor %g is not in [1, 1024]", factor);
    rc->scaling = (RopeScaling)type;
    rc->factor = (float)factor;
    rc->orig_ctx = orig_ctx;
    return 0;
}
