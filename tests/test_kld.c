// test_kld.c: bin/quantization's comparison of a quantised model with its baseline
// (experiments/quantization/kld.c): KL divergence, the next token's probability shift, top-token
// agreement and the perplexity ratio on distributions counted by hand, and on random logits
// against a direct double-precision sum.
//
//   make build/tests/test_kld && ./build/tests/test_kld
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdlib.h>

#include "kld.h"
#include "rng.h"
#include "test_util.h"

// Position 1: P = (1/2, 1/4, 1/4), Q = (1/4, 1/2, 1/4) (its logits shifted by 3, which changes
// nothing), the next token 1: KL = 1/2 ln 2 - 1/4 ln 2 = ln 2 / 4, dp = 1/2 - 1/4, the argmaxes
// differ. Position 2: P = Q = (0.2, 0.7, 0.1) (Q shifted by -5), next token 2: KL 0, dp 0, same
// top. Perplexities: base sqrt(1 / (1/4 x 0.1)) = sqrt(40), quantised sqrt(1 / (1/2 x 0.1)) =
// sqrt(20). Tolerance 1e-6: float log-probabilities.
static void test_by_hand(void **state) {
    (void)state;
    float base1[3] = {logf(0.5f), logf(0.25f), logf(0.25f)}, q1[3] = {logf(0.25f) + 3, logf(0.5f) + 3, logf(0.25f) + 3};
    float base2[3] = {logf(0.2f), logf(0.7f), logf(0.1f)}, q2[3] = {logf(0.2f) - 5, logf(0.7f) - 5, logf(0.1f) - 5};
    float lp[3];
    KldStats s = {0};
    kld_log_softmax(lp, base1, 3);
    kld_add(&s, kld_position(lp, q1, 3, 1));
    kld_log_softmax(lp, base2, 3);
    kld_add(&s, kld_position(lp, q2, 3, 2));
    KldSummary k = kld_summary(&s);
    double ln2 = log(2.0);
    assert_int_equal(s.n, 2);
    assert_near(k.kld_mean, ln2 / 8, 1e-6);
    assert_near(k.kld_median, 0.0, 1e-6); // nearest rank: the first of two
    assert_near(k.kld_p99, ln2 / 4, 1e-6);
    assert_near(k.kld_max, ln2 / 4, 1e-6);
    assert_near(k.delta_p_mean, 0.125, 1e-6);
    assert_near(k.delta_p_rms, sqrt(0.0625 / 2), 1e-6);
    assert_near(k.same_top, 0.5, 0.0);
    assert_near(k.ppl_base, sqrt(40.0), 1e-5);
    assert_near(k.ppl_q, sqrt(20.0), 1e-5);
    assert_near(k.ppl_ratio, sqrt(0.5), 1e-6);
    kld_free(&s);
}

// Random logits over a 4096-token vocabulary: each KL against a direct sum in double
// (tolerance 1e-5 relative: the baseline's log-probabilities are float), never negative, and 0
// for a model against itself; over 300 positions the percentiles are ordered.
static void test_random_against_direct_sum(void **state) {
    (void)state;
    enum { V = 4096, N = 300 };
    uint64_t rng = rng_seed(31);
    float *base = malloc(V * sizeof(float)), *q = malloc(V * sizeof(float)), *lp = malloc(V * sizeof(float));
    KldStats s = {0}, self = {0};
    for (int n = 0; n < N; n++) {
        for (int i = 0; i < V; i++) {
            base[i] = 3.0f * rng_normal(&rng);
            q[i] = base[i] + 0.3f * rng_normal(&rng);
        }
        double zb = 0.0, zq = 0.0, kl = 0.0;
        for (int i = 0; i < V; i++) zb += exp((double)base[i]), zq += exp((double)q[i]);
        for (int i = 0; i < V; i++) {
            double p = exp((double)base[i]) / zb;
            kl += p * (log(p) - (q[i] - log(zq)));
        }
        kld_log_softmax(lp, base, V);
        kld_add(&s, kld_position(lp, q, V, n % V));
        assert_near(s.klds[s.n - 1], kl, 1e-5 * kl + 1e-9);
        assert_true(kl > 0.0);
        kld_add(&self, kld_position(lp, base, V, n % V));
        assert_near(self.klds[self.n - 1], 0.0, 1e-6);
    }
    KldSummary k = kld_summary(&s), ks = kld_summary(&self);
    assert_true(k.kld_median <= k.kld_p99 && k.kld_p99 <= k.kld_max);
    assert_true(k.kld_mean > 0.0);
    assert_near(ks.same_top, 1.0, 0.0);
    assert_near(ks.ppl_ratio, 1.0, 1e-6);
    kld_free(&s);
    kld_free(&self);
    free(base), free(q), free(lp);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_by_hand),
        cmocka_unit_test(test_random_against_direct_sum),
    };
    return cmocka_run_group_tests_name("kld", tests, NULL, NULL);
}
