// test_cli.c: the shared command-line options and value parsers (experiments/engine/cli.c):
// good values parse, bad ones are rejected with a message naming the option and the text.
// Run: make build/tests/test_cli && ./build/tests/test_cli
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <limits.h>
#include <string.h>

#include "cli.h"
#include "hw.h"

static void test_parse_long(void **state) {
    (void)state;
    long v = 0;
    Error err;
    assert_int_equal(cli_parse_long("--n", "42", 0, 100, &v, &err), 0);
    assert_int_equal(v, 42);
    assert_int_equal(cli_parse_long("--n", "-3", -5, 5, &v, &err), 0);
    assert_int_equal(v, -3);
    const char *bad[] = {"", "12x", "x", "4.5", " ", "99999999999999999999999"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        v = 7;
        assert_int_equal(cli_parse_long("--n", bad[i], LONG_MIN, LONG_MAX, &v, &err), -1);
        assert_int_equal(v, 7); // untouched on error
        assert_non_null(strstr(err.msg, "--n"));
    }
    assert_int_equal(cli_parse_long("--threads", "0", 1, 64, &v, &err), -1);
    assert_non_null(strstr(err.msg, "out of range"));
}

static void test_parse_double(void **state) {
    (void)state;
    double v = 0;
    Error err;
    assert_int_equal(cli_parse_double("--temp", "0.7", 0.0, 2.0, &v, &err), 0);
    assert_true(v == 0.7);
    assert_int_equal(cli_parse_double("--temp", "1e-3", 0.0, 2.0, &v, &err), 0);
    assert_true(v == 1e-3);
    const char *bad[] = {"", "abc", "0.5x", "nan", "2.5", "-1"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        assert_int_equal(cli_parse_double("--temp", bad[i], 0.0, 2.0, &v, &err), -1);
        assert_non_null(strstr(err.msg, "--temp"));
    }
}

static void test_common_defaults(void **state) {
    (void)state;
    CliCommon c;
    cli_common_defaults(&c);
    HwInfo hw;
    hw_probe(&hw);
    char want[128];
    hw_slug(want + 4, sizeof want - 4, hw.cpu_model, hw.n_cpus, hw.gpu);
    memcpy(want, "out/", 4);
    assert_string_equal(c.out_dir, want);
    assert_string_equal(c.profile, "full");
    assert_int_equal(c.threads, 0);
    assert_int_equal(c.help, 0);
}

// The common options, through getopt_long as a program uses them.
static void test_common_options_with_getopt(void **state) {
    (void)state;
    enum { OPT_SEED = 1 };
    static const struct option options[] = {CLI_COMMON_OPTIONS, {"seed", required_argument, 0, OPT_SEED}, {0, 0, 0, 0}};
    char *argv[] = {"prog", "--quick", "--threads", "3", "--out", "/tmp/x", "--seed", "9", "--help", NULL};
    int argc = 9;
    CliCommon c;
    cli_common_defaults(&c);
    Error err;
    int seeds = 0;
    optind = 1;
    for (int code; (code = getopt_long(argc, argv, "", options, NULL)) != -1;) {
        if (code == OPT_SEED) {
            seeds++;
            continue;
        }
        assert_int_equal(cli_common_option(&c, code, optarg, &err), 1);
    }
    assert_int_equal(seeds, 1);
    assert_string_equal(c.profile, "quick");
    assert_int_equal(c.threads, 3);
    assert_string_equal(c.out_dir, "/tmp/x");
    assert_int_equal(c.help, 1);

    assert_int_equal(cli_common_option(&c, CLI_OPT_PROFILE, "medium", &err), -1);
    assert_non_null(strstr(err.msg, "medium"));
    assert_int_equal(cli_common_option(&c, CLI_OPT_THREADS, "0", &err), -1);
    assert_int_equal(cli_common_option(&c, CLI_OPT_OUT, "", &err), -1);
    assert_int_equal(cli_common_option(&c, 's', "x", &err), 0); // not a common option
    assert_string_equal(c.profile, "quick");                   // failed options change nothing
    assert_int_equal(c.threads, 3);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_parse_long),
        cmocka_unit_test(test_parse_double),
        cmocka_unit_test(test_common_defaults),
        cmocka_unit_test(test_common_options_with_getopt),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
