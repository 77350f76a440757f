// test_render_util.h: small helpers shared by the renderer's tests (tests/test_render_*.c):
// scratch directories, writing files, reading a command's output, and the fixture paths.
#pragma once

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common.h"

// The repository root: $INFERLAB_ROOT (set by make test), else the current directory.
static inline const char *repo_root(void) {
    const char *root = getenv("INFERLAB_ROOT");
    return root && *root ? root : ".";
}

// A fresh scratch directory under /tmp (removed by remove_tree).
static inline char *make_scratch_dir(void) {
    char *dir = strdup("/tmp/inferlab-render-test-XXXXXX");
    if (!mkdtemp(dir)) die("cannot create a scratch directory");
    return dir;
}

static inline void remove_tree(char *dir) {
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0) fprintf(stderr, "warning: could not remove %s\n", dir);
    free(dir);
}

static inline void write_text(const char *path, const char *text) {
    FILE *f = fopenCheck(path, "wb");
    fwriteCheck(text, 1, strlen(text), f);
    fcloseCheck(f);
}

// Everything a shell command prints on stdout (malloc'd), and its exit status.
static inline char *command_output(const char *cmd, int *status) {
    FILE *p = popen(cmd, "r");
    if (!p) die("cannot run %s", cmd);
    size_t cap = 1 << 16, n = 0;
    char *out = mallocCheck(cap);
    for (size_t got; (got = fread(out + n, 1, cap - n - 1, p)) > 0;) {
        n += got;
        if (n + 1 == cap) out = reallocCheck(out, cap *= 2);
    }
    out[n] = '\0';
    int st = pclose(p);
    if (status) *status = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
    return out;
}

// 1 when a program is on the PATH.
static inline int have_program(const char *name) {
    char cmd[256];
    snprintf(cmd, sizeof cmd, "command -v %s >/dev/null 2>&1", name);
    return system(cmd) == 0;
}
