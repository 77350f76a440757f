// fuzz_input.h: what the libFuzzer targets share: the input written to a per-process file in
// /dev/shm (a RAM disk, so a write per execution stays cheap) for the parsers that read only
// from a path. Built by `make fuzz` (see the Makefile); each target is tests/fuzz/fuzz_<name>.c.
#pragma once

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

// The input as a file; the same path every call (the parser under test must not keep it open).
static const char *fuzz_input_file(const uint8_t *data, size_t size, const char *suffix) {
    static char path[128];
    if (!path[0]) {
        const char *dir = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp";
        snprintf(path, sizeof path, "%s/inferlab-fuzz-%ld%s", dir, (long)getpid(), suffix);
    }
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(data, 1, size, f) != size || fclose(f) != 0) abort();
    return path;
}

// The input as a NUL-terminated string (malloc'd; the caller frees it).
static char *fuzz_input_string(const uint8_t *data, size_t size) {
    char *s = malloc(size + 1);
    if (!s) abort();
    for (size_t i = 0; i < size; i++) s[i] = data[i] ? (char)data[i] : ' ';
    s[size] = '\0';
    return s;
}
