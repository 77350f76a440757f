// test_blas_core.c: the choice of OpenBLAS kernel set (kernels/cpu/blas_core.c): when the
// library's pick is weaker than the CPU, the lab asks for the set that uses the CPU's widest
// vectors, and leaves a pick alone that already does; and whatever was picked, sgemm still
// equals the double-precision reference.
//   make build/tests/test_blas_core && build/tests/test_blas_core
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <cmocka.h>
#include <cblas.h>

#include "common.h"
#include "kernels.h"
#include "reference.h"
#include "rng.h"

static void test_generic_picks_are_replaced(void **state) {
    (void)state;
    // An AVX-512 Xeon that OpenBLAS identifies as Prescott.
    assert_string_equal(blas_core_for(ISA_AVX512, "Prescott"), "SkylakeX");
    assert_string_equal(blas_core_for(ISA_AVX2, "Prescott"), "Haswell");
    assert_string_equal(blas_core_for(ISA_AVX2, "Nehalem"), "Haswell");
    assert_string_equal(blas_core_for(ISA_AVX512, "Haswell"), "SkylakeX");
    assert_string_equal(blas_core_for(ISA_AVX, "Core2"), "Sandybridge");
}

static void test_good_picks_are_kept(void **state) {
    (void)state;
    assert_null(blas_core_for(ISA_AVX512, "SkylakeX"));
    assert_null(blas_core_for(ISA_AVX512, "Cooperlake")); // Zen 4 here: bf16 kernels beside SkylakeX's
    assert_null(blas_core_for(ISA_AVX2, "Zen"));
    assert_null(blas_core_for(ISA_AVX2, "haswell")); // names compare without case
    assert_null(blas_core_for(ISA_BASE, "Prescott")); // nothing better to ask for
    assert_null(blas_core_for(ISA_AVX2, "SkylakeX"));  // never ask for less
}

static void test_core_levels(void **state) {
    (void)state;
    assert_int_equal(isa_level_of_blas_core("SkylakeX"), ISA_AVX512);
    assert_int_equal(isa_level_of_blas_core("Zen"), ISA_AVX2);
    assert_int_equal(isa_level_of_blas_core("Sandybridge"), ISA_AVX);
    assert_int_equal(isa_level_of_blas_core("Prescott"), ISA_BASE);
    assert_int_equal(isa_level_of_blas_core("no such core"), ISA_BASE);
    assert_string_equal(isa_level_name(ISA_AVX512), "avx512");
}

// This process's own pick (whatever OpenBLAS or the environment chose) computes sgemm right:
// (M, K) x (K, N) against the double reference. Entries are sums of K = 129 products of unit
// normals (about 11 in size), whose fp32 rounding is about 1e-5: tolerance 1e-3.
static void test_sgemm_of_this_pick_matches_reference(void **state) {
    (void)state;
    enum { M = 67, K = 129, N = 45 };
    uint64_t rng = rng_seed(18);
    float *a = mallocCheck(sizeof(float) * M * K), *b = mallocCheck(sizeof(float) * N * K);
    float *c = mallocCheck(sizeof(float) * M * N), *want = mallocCheck(sizeof(float) * M * N);
    for (int i = 0; i < M * K; i++) a[i] = rng_normal(&rng);
    for (int i = 0; i < N * K; i++) b[i] = rng_normal(&rng);
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, M, N, K, 1.0f, a, K, b, K, 0.0f, c, N);
    ref_matmul(want, a, b, M, K, N);
    for (int i = 0; i < M * N; i++) assert_float_equal(c[i], want[i], 1e-3);
    free(a);
    free(b);
    free(c);
    free(want);
}

int main(int argc, char **argv) {
    (void)argc;
    kernels_use_best_blas(argv);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_generic_picks_are_replaced),
        cmocka_unit_test(test_good_picks_are_kept),
        cmocka_unit_test(test_core_levels),
        cmocka_unit_test(test_sgemm_of_this_pick_matches_reference),
    };
    return cmocka_run_group_tests_name("blas_core", tests, NULL, NULL);
}
