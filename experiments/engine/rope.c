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

float rope_frequencies(float *inv_freq, int head_dim, const RopeConfig *rc) {
    double theta = rope_base(rc, head_dim), s = factor_of(rc);
    for (int i = 0; i < head_dim / 2; i++) {
        double f = pow(theta, -2.0 * i / head_dim);
        if (rc->scaling == ROPE_LINEAR) f /= s;
        if (rc->scaling == ROPE_YARN) {
            double keep = yarn_ramp(f, rc);
            f = (1.0 - keep) * f / s + keep * f;
        }
        inv_freq[i] = (float)f;
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
