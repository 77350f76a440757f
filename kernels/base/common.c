// common.c: checked-call helpers and atomic file output (see common.h).
#include "common.h"

#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

void die(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fputs("error: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    exit(1);
}

int error_set(Error *err, const char *fmt, ...) {
    if (err) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err->msg, sizeof err->msg, fmt, ap);
        va_end(ap);
    }
    return -1;
}

void *malloc_check(size_t size, const char *file, int line) {
    void *p = malloc(size ? size : 1);
    if (!p) die("%s:%d: out of memory allocating %zu bytes", file, line, size);
    return p;
}

#define HUGE_ALIGN ((size_t)2 << 20)

void *malloc_huge_check(size_t size, const char *file, int line) {
    size_t rounded = (size + HUGE_ALIGN - 1) / HUGE_ALIGN * HUGE_ALIGN;
    void *p = NULL;
    if (posix_memalign(&p, HUGE_ALIGN, rounded ? rounded : HUGE_ALIGN) != 0)
        die("%s:%d: out of memory allocating %zu bytes", file, line, size);
    madvise(p, rounded, MADV_HUGEPAGE);
    return p;
}

void *calloc_check(size_t n, size_t size, const char *file, int line) {
    void *p = calloc(n ? n : 1, size ? size : 1);
    if (!p) die("%s:%d: out of memory allocating %zu x %zu bytes", file, line, n, size);
    return p;
}

void *realloc_check(void *p, size_t size, const char *file, int line) {
    void *q = realloc(p, size ? size : 1);
    if (!q) die("%s:%d: out of memory reallocating %zu bytes", file, line, size);
    return q;
}

FILE *fopen_check(const char *path, const char *mode, const char *file, int line) {
    FILE *f = fopen(path, mode);
    if (!f) die("%s:%d: cannot open '%s' (mode %s): %s", file, line, path, mode, strerror(errno));
    return f;
}

void fwrite_check(const void *p, size_t size, size_t n, FILE *f, const char *file, int line) {
    if (fwrite(p, size, n, f) != n) die("%s:%d: write failed: %s", file, line, strerror(errno));
}

void fclose_check(FILE *f, const char *file, int line) {
    if (fclose(f) != 0) die("%s:%d: close failed: %s", file, line, strerror(errno));
}

int path_stem(char *out, size_t size, const char *path, Error *err) {
    const char *slash = strrchr(path, '/'), *base = slash ? slash + 1 : path, *dot = strrchr(base, '.');
    size_t len = dot && dot != base ? (size_t)(dot - base) : strlen(base);
    if (len == 0 || len >= size) return error_set(err, "cannot name a file stem after '%s'", path);
    memcpy(out, base, len);
    out[len] = '\0';
    return 0;
}

int split_comma_list(char *list, char **items, int max, Error *err) {
    int n = 0;
    for (char *p = list, *next; p; p = next) {
        next = strchr(p, ',');
        if (next) *next++ = '\0';
        if (!*p) return error_set(err, "an empty item in a comma-separated list");
        if (n == max) return error_set(err, "more than %d items in a comma-separated list", max);
        items[n++] = p;
    }
    return n;
}

int file_read_all(const char *path, char **buf, size_t *len, Error *err) {
    *buf = NULL;
    *len = 0;
    FILE *f = fopen(path, "rb");
    if (!f) return error_set(err, "%s: cannot open: %s", path, strerror(errno));
    struct stat st;
    int rc = 0;
    if (fstat(fileno(f), &st) != 0 || !S_ISREG(st.st_mode)) {
        rc = error_set(err, "%s: not a regular file", path);
    } else {
        *buf = mallocCheck((size_t)st.st_size + 1);
        *len = fread(*buf, 1, (size_t)st.st_size, f);
        if (ferror(f) || *len != (size_t)st.st_size) {
            free(*buf);
            *buf = NULL, *len = 0;
            rc = error_set(err, "%s: read failed", path);
        } else {
            (*buf)[*len] = '\0';
        }
    }
    fclose(f);
    return rc;
}

static char *string_dup(const char *s) {
    size_t n = strlen(s) + 1;
    char *d = mallocCheck(n);
    memcpy(d, s, n);
    return d;
}

AtomicFile atomic_open(const char *path) {
    AtomicFile af;
    af.path = string_dup(path);
    size_t n = strlen(path) + 32;
    af.tmp_path = mallocCheck(n);
    snprintf(af.tmp_path, n, "%s.tmp.%ld", path, (long)getpid());
    af.f = fopenCheck(af.tmp_path, "wb");
    return af;
}

void atomic_commit(AtomicFile *af) {
    if (fflush(af->f) != 0 || ferror(af->f)) {
        atomic_abort(af);
        die("write to '%s' failed", af->path);
    }
    fcloseCheck(af->f);
    if (rename(af->tmp_path, af->path) != 0)
        die("cannot rename '%s' to '%s': %s", af->tmp_path, af->path, strerror(errno));
    free(af->path);
    free(af->tmp_path);
    af->f = NULL;
}

void atomic_abort(AtomicFile *af) {
    if (af->f) fclose(af->f);
    remove(af->tmp_path);
    free(af->path);
    free(af->tmp_path);
    af->f = NULL;
}

// The pid of a temp file's name "<path>.tmp.<pid>", or 0 when it is not one.
static long temp_file_pid(const char *name) {
    const char *tmp = strstr(name, ".tmp.");
    if (!tmp) return 0;
    char *end;
    long pid = strtol(tmp + 5, &end, 10);
    return *end == '\0' && end != tmp + 5 && pid > 0 ? pid : 0;
}

int atomic_remove_stale(const char *dir) {
    DIR *d = opendir(dir);
    if (!d) return 0;
    int removed = 0;
    char path[4096];
    for (struct dirent *e; (e = readdir(d)) != NULL;) {
        long pid = temp_file_pid(e->d_name);
        // kill(pid, 0) succeeds, or fails with EPERM, while the process exists
        if (pid == 0 || kill((pid_t)pid, 0) == 0 || errno != ESRCH) continue;
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        removed += remove(path) == 0;
    }
    closedir(d);
    return removed;
}
