// test_common.c: the base layer's atomic files (kernels/base/common.c): a commit replaces the
// file in one rename, an abort leaves nothing, and atomic_remove_stale removes exactly the temp
// files of writers that no longer run (a killed writer's), never a live writer's or other files.
// Run: make build/tests/test_common && ./build/tests/test_common
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common.h"

static char dir[64];

static int setup(void **state) {
    (void)state;
    snprintf(dir, sizeof dir, "/tmp/inferlab-common-XXXXXX");
    return mkdtemp(dir) ? 0 : -1;
}

static int teardown(void **state) {
    (void)state;
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    return system(cmd);
}

static int file_exists(const char *name) {
    char path[256];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    struct stat st;
    return stat(path, &st) == 0;
}

static void touch(const char *name) {
    char path[256];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    fclose(fopenCheck(path, "w"));
}

// The pid of a process that has exited (and been reaped), so no process has it for now.
static long dead_pid(void) {
    pid_t pid = fork();
    if (pid == 0) _exit(0);
    waitpid(pid, NULL, 0);
    return (long)pid;
}

// A stem drops directories and the last extension only; an empty or oversized stem is an error.
static void test_path_stem(void **state) {
    (void)state;
    char out[16];
    Error err;
    assert_int_equal(path_stem(out, sizeof out, "out/models/full/draft-s.gguf", &err), 0);
    assert_string_equal(out, "draft-s");
    assert_int_equal(path_stem(out, sizeof out, "gemma-3.q4.gguf", &err), 0);
    assert_string_equal(out, "gemma-3.q4");
    assert_int_equal(path_stem(out, sizeof out, "dir.d/.hidden", &err), 0);
    assert_string_equal(out, ".hidden");
    assert_int_equal(path_stem(out, sizeof out, "plain", &err), 0);
    assert_string_equal(out, "plain");
    assert_int_equal(path_stem(out, sizeof out, "models/", &err), -1);
    assert_int_equal(path_stem(out, sizeof out, "a-name-of-sixteen.gguf", &err), -1);
    assert_non_null(strstr(err.msg, "a-name-of-sixteen.gguf"));
}

static void test_split_comma_list(void **state) {
    (void)state;
    char list[] = "a.gguf,dir/b.gguf,c", one[] = "only", empty[] = "a,,b", trailing[] = "a,", many[] = "a,b,c";
    char *items[3];
    Error err;
    assert_int_equal(split_comma_list(list, items, 3, &err), 3);
    assert_string_equal(items[0], "a.gguf");
    assert_string_equal(items[1], "dir/b.gguf");
    assert_string_equal(items[2], "c");
    assert_int_equal(split_comma_list(one, items, 3, &err), 1);
    assert_string_equal(items[0], "only");
    assert_int_equal(split_comma_list(empty, items, 3, &err), -1);
    assert_non_null(strstr(err.msg, "empty"));
    assert_int_equal(split_comma_list(trailing, items, 3, &err), -1);
    assert_int_equal(split_comma_list(many, items, 2, &err), -1);
    assert_non_null(strstr(err.msg, "more than 2"));
}

static void test_commit_and_abort(void **state) {
    (void)state;
    char path[256];
    snprintf(path, sizeof path, "%s/out.csv", dir);
    AtomicFile af = atomic_open(path);
    fputs("a,b\n", af.f);
    assert_false(file_exists("out.csv")); // nothing under the name until the commit
    atomic_commit(&af);
    assert_true(file_exists("out.csv"));
    af = atomic_open(path);
    fputs("half", af.f);
    atomic_abort(&af);
    FILE *f = fopenCheck(path, "r");
    char line[16];
    assert_non_null(fgets(line, sizeof line, f));
    assert_string_equal(line, "a,b\n"); // the abort kept the committed file
    fclose(f);
}

static void test_remove_stale_temps(void **state) {
    (void)state;
    char live[64], dead[64], dead2[64];
    snprintf(live, sizeof live, "model.gguf.tmp.%ld", (long)getpid());
    snprintf(dead, sizeof dead, "model.gguf.tmp.%ld", dead_pid());
    snprintf(dead2, sizeof dead2, "zoo.csv.tmp.%ld", dead_pid());
    const char *kept[] = {live, "model.gguf", "notes.tmp.txt", "x.tmp.", "y.tmp.12a"};
    for (size_t i = 0; i < sizeof kept / sizeof kept[0]; i++) touch(kept[i]);
    touch(dead);
    touch(dead2);
    assert_int_equal(atomic_remove_stale(dir), 2);
    assert_false(file_exists(dead));
    assert_false(file_exists(dead2));
    for (size_t i = 0; i < sizeof kept / sizeof kept[0]; i++) assert_true(file_exists(kept[i]));
    assert_int_equal(atomic_remove_stale(dir), 0);
    assert_int_equal(atomic_remove_stale("/nonexistent/inferlab"), 0);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_path_stem),
        cmocka_unit_test(test_split_comma_list),
        cmocka_unit_test(test_commit_and_abort),
        cmocka_unit_test(test_remove_stale_temps),
    };
    return cmocka_run_group_tests_name("common", tests, setup, teardown);
}
