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

// YaRN's ramp: 0 for pairs that rotate fewer than beta_slow times over the original
// context (fully interpolated), 1 for more than beta_fast times (left alone), linear between.
static double yarn_ramp(double inv_freq, const RopeConfig *rc) {
    double rotations = rc->orig_ctx * inv_freq / (2.0 * M_PI);
    double r = (rotations - rc->beta_slow) / (rc->beta_fast - rc->beta_slow);
    return r < 0.0 ? 0.0 : (r > 1.0 ? 1.0 : r);
}

float rope_frequencies(float *inv_freq, int head_dim, const RopeConfig *rc) {
    double theta = rc->theta, s = rc->factor > 0.0f ? rc->factor : 1.0;
    if (rc->scaling == ROPE_NTK) theta *= pow(s, (double)head_dim / (head_dim - 2));
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
