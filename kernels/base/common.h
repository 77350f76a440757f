// common.h: the base layer's checked-call helpers, shared by every layer (kernels, engine,
// experiments, renderer); it includes nothing of theirs.
// In the manner of llm.c: a failed allocation or file operation reports the file and line
// of the call site and exits non-zero, so callers never carry NULL checks for these.
#pragma once

#include <stddef.h>
#include <stdio.h>

// Print "error: <message>" to stderr and exit(1).
void die(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));

void *malloc_check(size_t size, const char *file, int line);
void *calloc_check(size_t n, size_t size, const char *file, int line);
void *realloc_check(void *p, size_t size, const char *file, int line);
FILE *fopen_check(const char *path, const char *mode, const char *file, int line);
void fwrite_check(const void *p, size_t size, size_t n, FILE *f, const char *file, int line);
void fclose_check(FILE *f, const char *file, int line);

// Memory on a 2 MiB boundary, advised for transparent huge pages (a hint, ignored where THP
// is off), for large buffers read as long streams; free() releases it.
void *malloc_huge_check(size_t size, const char *file, int line);

#define mallocCheck(size) malloc_check(size, __FILE__, __LINE__)
#define mallocHugeCheck(size) malloc_huge_check(size, __FILE__, __LINE__)
#define callocCheck(n, size) calloc_check(n, size, __FILE__, __LINE__)
#define reallocCheck(p, size) realloc_check(p, size, __FILE__, __LINE__)
#define fopenCheck(path, mode) fopen_check(path, mode, __FILE__, __LINE__)
#define fwriteCheck(p, size, n, f) fwrite_check(p, size, n, f, __FILE__, __LINE__)
#define fcloseCheck(f) fclose_check(f, __FILE__, __LINE__)

// Errors from untrusted input (checkpoints, CSVs, options) are returned, not fatal, so that
// tests can check them and programs can name the file at fault: a function that can fail
// returns int (0 = ok, -1 = error) and fills an Error.
typedef struct {
    char msg[512];
} Error;

// Format the message into err (if non-NULL) and return -1.
int error_set(Error *err, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

// Read a whole regular file into a malloc'd buffer with a NUL after its *len bytes. Anything
// else (a directory, /dev/zero, a FIFO) is an error, not an endless read. 0, or -1 with err
// naming the path ("cannot open: ...", "not a regular file", "read failed") and *buf NULL.
int file_read_all(const char *path, char **buf, size_t *len, Error *err);

// A file's stem, its name less directories and extension: "out/models/full/draft-s.gguf" ->
// "draft-s" (a leading dot stays: ".hidden" -> ".hidden"). 0, or -1 with err when it is empty or
// does not fit in size bytes.
int path_stem(char *out, size_t size, const char *path, Error *err);

// Split a comma-separated list in place (an option's FILE[,FILE]: the commas become NULs), items
// 0 .. n - 1 pointing into it, in order. n, or -1 with err when an item is empty or there are
// more than max.
int split_comma_list(char *list, char **items, int max, Error *err);

// Atomic output: write to "<path>.tmp.<pid>", then rename over <path> on commit, so an
// interrupted run never leaves a half-written file. atomic_abort removes the temp file.
typedef struct {
    FILE *f;
    char *path;
    char *tmp_path;
} AtomicFile;

AtomicFile atomic_open(const char *path);
void atomic_commit(AtomicFile *af);
void atomic_abort(AtomicFile *af);
// Remove the temp files ("*.tmp.<pid>") in dir whose process no longer runs: what a writer
// killed before its commit left. A live writer's temp file is kept. Returns how many went.
int atomic_remove_stale(const char *dir);
