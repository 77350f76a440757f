// test_rope.c: RoPE frequencies and their context-extension scalings (experiments/engine/
// rope.c) against double-precision references written from each formula, on random
// configurations (head_dim, theta, factor, original context):
//   none    theta^(-2i/d)                 linear  that / s
//   ntk     (theta s^(d/(d-2)))^(-2i/d): the highest frequency kept, the lowest exactly / s
//   yarn    (1 - g) f / s + g f, g the ramp of r = L / wavelength between alpha = 1 and
//           beta = 32, and mscale 0.1 ln s + 1
// frequencies to (4 + 3i) x 6e-8 relative for pair i (they are ggml's float chain f_i =
// f_(i-1) r: i roundings of 2^-24 each, r^i carrying i times r's own error of up to 2^-23, a few
// for the scaling's factor and the float store), rotated random vectors to 1e-3 at positions
// up to 4 x the original context; factor 1 gives plain RoPE bit for bit; the override parser.
// Run: make build/tests/test_rope && ./build/tests/test_rope
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <math.h>
#include <string.h>

#include "common.h"
#include "kernels.h"
#include "rng.h"
#include "rope.h"
#include "test_util.h"

enum { MAX_HD = 128, N_CONFIGS = 200 };

// The formula of each scaling, in double, for pair i of head dimension d.
static double ref_frequency(int i, int d, double theta, RopeScaling scaling, double s, int orig_ctx) {
    double plain = exp(-2.0 * i / d * log(theta));
    switch (scaling) {
    case ROPE_NONE: return plain;
    case ROPE_LINEAR: return plain / s;
    case ROPE_NTK: return exp(-2.0 * i / d * log(theta * pow(s, d / (d - 2.0))));
    case ROPE_YARN: {
        double alpha = 1.0, beta = 32.0, wavelength = 2.0 * M_PI / plain, r = orig_ctx / wavelength;
        double g = r < alpha ? 0.0 : r > beta ? 1.0 : (r - alpha) / (beta - alpha);
        return (1.0 - g) * plain / s + g * plain;
    }
    }
    return NAN;
}

static double ref_mscale(RopeScaling scaling, double s) { return scaling == ROPE_YARN ? 0.1 * log(s) + 1.0 : 1.0; }

typedef struct {
    RopeConfig rc;
    int hd;
} RandomRope;

static RandomRope random_rope(uint64_t *rng, RopeScaling scaling) {
    RandomRope r;
    r.hd = 4 + 2 * (int)(rng_u64(rng) % (MAX_HD / 2 - 1)); // 4 .. MAX_HD, even
    r.rc.theta = (float)exp(log(100.0) + rng_uniform(rng) * (log(1e6) - log(100.0)));
    r.rc.scaling = scaling;
    r.rc.factor = 1.0f + 15.0f * (float)rng_uniform(rng);
    r.rc.orig_ctx = 16 + (int)(rng_u64(rng) % 4081);
    r.rc.beta_fast = 32.0f;
    r.rc.beta_slow = 1.0f;
    return r;
}

static void test_frequencies_match_formulas(void **state) {
    (void)state;
    uint64_t rng = rng_seed(1);
    for (int scaling = ROPE_NONE; scaling <= ROPE_YARN; scaling++)
        for (int n = 0; n < N_CONFIGS; n++) {
            RandomRope r = random_rope(&rng, (RopeScaling)scaling);
            float got[MAX_HD / 2];
            float mscale = rope_frequencies(got, r.hd, &r.rc);
            for (int i = 0; i < r.hd / 2; i++) {
                double want = ref_frequency(i, r.hd, r.rc.theta, r.rc.scaling, r.rc.factor, r.rc.orig_ctx);
                if (!(fabs(got[i] - want) <= (4.0 + 3.0 * i) * 6e-8 * want))
                    fail_msg("%s hd %d theta %g s %g L %d pair %d: %.9g, formula %.9g", rope_scaling_name(scaling),
                             r.hd, r.rc.theta, r.rc.factor, r.rc.orig_ctx, i, got[i], want);
            }
            assert_true(fabs(mscale - ref_mscale(r.rc.scaling, r.rc.factor)) <= 1e-6);
        }
}

// NTK's defining property: the highest frequency untouched, the lowest interpolated by s.
static void test_ntk_interpolates_only_the_lowest_frequency(void **state) {
    (void)state;
    uint64_t rng = rng_seed(2);
    for (int n = 0; n < N_CONFIGS; n++) {
        RandomRope r = random_rope(&rng, ROPE_NTK);
        RopeConfig plain = r.rc;
        plain.scaling = ROPE_NONE;
        float ntk[MAX_HD / 2], base[MAX_HD / 2];
        rope_frequencies(ntk, r.hd, &r.rc);
        rope_frequencies(base, r.hd, &plain);
        int last = r.hd / 2 - 1;
        assert_true(ntk[0] == 1.0f && base[0] == 1.0f);
        assert_true(fabs(ntk[last] * r.rc.factor / base[last] - 1.0) <= 1e-5);
    }
}

// Rotating random q / k vectors with the engine's kernel and the scaled frequencies equals
// rotating them in double by the formula, at positions up to 4 x the original context.
static void test_rotation_matches_formulas(void **state) {
    (void)state;
    uint64_t rng = rng_seed(3);
    for (int scaling = ROPE_NONE; scaling <= ROPE_YARN; scaling++)
        for (int n = 0; n < 50; n++) {
            RandomRope r = random_rope(&rng, (RopeScaling)scaling);
            r.rc.orig_ctx = 16 + (int)(rng_u64(&rng) % 240); // angles up to ~1000 rad: float rounding 1e-4
            float inv_freq[MAX_HD / 2], x[2 * MAX_HD], want[2 * MAX_HD];
            float mscale = rope_frequencies(inv_freq, r.hd, &r.rc);
            int heads = 2, pos = (int)(rng_u64(&rng) % (4 * r.rc.orig_ctx));
            fill_normal(x, (size_t)heads * r.hd, 1.0f, &rng);
            for (int h = 0; h < heads; h++)
                for (int i = 0; i < r.hd / 2; i++) {
                    double f = ref_frequency(i, r.hd, r.rc.theta, r.rc.scaling, r.rc.factor, r.rc.orig_ctx);
                    double m = ref_mscale(r.rc.scaling, r.rc.factor), a = x[h * r.hd + 2 * i], b = x[h * r.hd + 2 * i + 1];
                    want[h * r.hd + 2 * i] = (float)(m * (a * cos(pos * f) - b * sin(pos * f)));
                    want[h * r.hd + 2 * i + 1] = (float)(m * (a * sin(pos * f) + b * cos(pos * f)));
                }
            rope_rotate(x, heads, r.hd, pos, inv_freq, mscale, ROPE_STYLE_NORM);
            assert_close(x, want, (size_t)heads * r.hd, 1e-3, 1e-3);
        }
}

static void test_factor_one_is_plain_rope(void **state) {
    (void)state;
    uint64_t rng = rng_seed(4);
    for (int n = 0; n < N_CONFIGS; n++) {
        RandomRope r = random_rope(&rng, ROPE_NONE);
        r.rc.factor = 1.0f;
        float plain[MAX_HD / 2], got[MAX_HD / 2];
        assert_true(rope_frequencies(plain, r.hd, &r.rc) == 1.0f);
        for (int scaling = ROPE_LINEAR; scaling <= ROPE_YARN; scaling++) {
            RopeConfig rc = r.rc;
            rc.scaling = (RopeScaling)scaling;
            assert_true(rope_frequencies(got, r.hd, &rc) == 1.0f);
            assert_memory_equal(got, plain, sizeof(float) * (r.hd / 2));
        }
    }
}

static void test_override(void **state) {
    (void)state;
    RopeConfig rc = {10000.0f, ROPE_NONE, 1.0f, 0, 32.0f, 1.0f};
    Error err;
    assert_int_equal(rope_override(&rc, "yarn", 4.0, 256, &err), 0);
    assert_int_equal(rc.scaling, ROPE_YARN);
    assert_true(rc.factor == 4.0f);
    assert_int_equal(rc.orig_ctx, 256);
    assert_int_equal(rope_override(&rc, "longrope", 2.0, 256, &err), -1);
    assert_non_null(strstr(err.msg, "longrope"));
    assert_int_equal(rope_override(&rc, "linear", 0.5, 256, &err), -1);
    assert_non_null(strstr(err.msg, "0.5"));
    assert_int_equal(rc.scaling, ROPE_YARN); // untouched on error
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_frequencies_match_formulas),
        cmocka_unit_test(test_ntk_interpolates_only_the_lowest_frequency),
        cmocka_unit_test(test_rotation_matches_formulas),
        cmocka_unit_test(test_factor_one_is_plain_rope),
        cmocka_unit_test(test_override),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
