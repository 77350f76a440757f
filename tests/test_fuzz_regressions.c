// test_fuzz_regressions.c: every input that `make fuzz` found to crash, leak, hang or
// exhaust memory, kept under tests/fixtures/fuzz/<target>/ once the parser was fixed, is fed
// to that parser in the normal build: each must end in an error with a message, not a crash.
// Kept so far: template, an @include of a file that is not a regular file (fuzz_template ran
// out of memory reading /dev/zero; a directory read as an empty template). That input was
// written by hand for the fuzz target (libFuzzer cannot guess a path), not found by it.
// Run from the repository root: make build/tests/test_fuzz_regressions && ./build/tests/test_fuzz_regressions
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"
#include "table.h"
#include "template.h"

static int parse_template(const char *path, Error *err) {
    Template t;
    if (template_load(&t, path, err) != 0) return -1;
    template_free(&t);
    return 0;
}

// Each fuzz target's directory of kept inputs and the parser they go to.
static const struct {
    const char *target;
    int (*parse)(const char *path, Error *err);
} TARGETS[] = {
    {"template", parse_template},
};

static const char *root(void) {
    const char *r = getenv("INFERLAB_ROOT");
    return r ? r : ".";
}

static void test_kept_inputs_give_errors(void **state) {
    (void)state;
    for (size_t i = 0; i < sizeof TARGETS / sizeof TARGETS[0]; i++) {
        char dir[1024], path[2048];
        snprintf(dir, sizeof dir, "%s/tests/fixtures/fuzz/%s", root(), TARGETS[i].target);
        DIR *d = opendir(dir);
        if (!d) fail_msg("%s: no kept inputs", dir);
        int n = 0;
        for (struct dirent *e; (e = readdir(d)) != NULL;) {
            if (e->d_name[0] == '.') continue;
            snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
            Error err = {""};
            if (TARGETS[i].parse(path, &err) != -1) fail_msg("%s: parsed without an error", path);
            if (!err.msg[0]) fail_msg("%s: an error without a message", path);
            n++;
        }
        closedir(d);
        assert_true(n > 0);
    }
}

// The reader under the CSV tables the renderer loads refuses what is not a regular file too.
static void test_tables_are_regular_files(void **state) {
    (void)state;
    const char *paths[] = {"/dev/zero", "/tmp"};
    for (size_t i = 0; i < 2; i++) {
        Table t;
        Error err;
        assert_int_equal(table_load(&t, paths[i], &err), -1);
        assert_non_null(strstr(err.msg, "not a regular file"));
    }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_kept_inputs_give_errors),
        cmocka_unit_test(test_tables_are_regular_files),
    };
    return cmocka_run_group_tests_name("fuzz_regressions", tests, NULL, NULL);
}
