// run_program.h: run one of the lab's programs from a test through the shell and keep what it
// printed, for the tests of a program's command line (test_bench_cli.c, test_generate_cli.c).
#pragma once

#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common.h"

typedef struct {
    int status; // exit status, -1 when it did not exit
    char *out, *err;
} ProgramRun;

// A whole text file, NUL-terminated (the test fails if it cannot be read).
static inline char *read_text_file(const char *path) {
    char *buf;
    size_t len;
    Error err;
    if (file_read_all(path, &buf, &len, &err)) fail_msg("%s", err.msg);
    return buf;
}

// `command` run by the shell, its stdout and stderr kept in dir/stdout and dir/stderr.
static inline ProgramRun run_program(const char *dir, const char *command) {
    char cmd[4096], out[256], err[256];
    snprintf(out, sizeof out, "%s/stdout", dir);
    snprintf(err, sizeof err, "%s/stderr", dir);
    snprintf(cmd, sizeof cmd, "%s > %s 2> %s", command, out, err);
    int status = system(cmd);
    return (ProgramRun){WIFEXITED(status) ? WEXITSTATUS(status) : -1, read_text_file(out), read_text_file(err)};
}

// A fresh directory /tmp/inferlab_<name>_XXXXXX in dir (size n) for a test group's runs; 0 or -1.
static inline int program_dir_make(char *dir, size_t n, const char *name) {
    snprintf(dir, n, "/tmp/inferlab_%s_XXXXXX", name);
    return mkdtemp(dir) ? 0 : -1;
}

static inline int program_dir_remove(const char *dir) {
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    return system(cmd);
}

static inline void program_run_free(ProgramRun *r) {
    free(r->out);
    free(r->err);
}
