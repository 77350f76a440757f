// csv.c: tidy CSV output (see csv.h). Rows go to a temp file that csv_close renames into
// place, so readers only ever see complete tables.
#include "csv.h"

#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

int csv_split(char *line, char **fields, int max_fields) {
    int n = 0;
    char *src = line, *dst = line;
    for (;;) { // one field per iteration, unquoted into dst (never ahead of src)
        if (n < max_fields) fields[n] = dst;
        n++;
        if (*src == '"') {
            src++;
            for (;;) {
                if (*src == '\0') return -1; // unterminated quote
                if (*src == '"' && src[1] == '"') src++;
                else if (*src == '"') break;
                *dst++ = *src++;
            }
            src++;
            if (*src != ',' && *src != '\0') return -1; // text after the closing quote
        } else {
            while (*src != ',' && *src != '\0') {
                if (*src == '"' || *src == '\n' || *src == '\r') return -1;
                *dst++ = *src++;
            }
        }
        if (*src == '\0') break;
        *dst++ = '\0';
        src++;
    }
    *dst = '\0';
    return n;
}

static int count_fields(const char *record) {
    size_t len = strlen(record) + 1;
    char *copy = mallocCheck(len);
    memcpy(copy, record, len);
    int n = csv_split(copy, NULL, 0);
    free(copy);
    return n;
}

CsvWriter csv_open(const char *path, const char *header) {
    CsvWriter w;
    w.n_columns = count_fields(header);
    if (w.n_columns < 1) die("csv '%s': malformed header '%s'", path, header);
    w.file = atomic_open(path);
    fprintf(w.file.f, "%s\n", header);
    return w;
}

// Dying mid-table must not leave the temp file behind: abort the writer first.
static void csv_fail(CsvWriter *w, const char *what, const char *row) {
    char path[512];
    snprintf(path, sizeof path, "%s", w->file.path);
    atomic_abort(&w->file);
    die("csv '%s': %s: '%s'", path, what, row);
}

void csv_row(CsvWriter *w, const char *fmt, ...) {
    char stack[1024];
    va_list ap;
    va_start(ap, fmt);
    int len = vsnprintf(stack, sizeof stack, fmt, ap);
    va_end(ap);
    char *row = stack;
    if (len >= (int)sizeof stack) { // rare long row (quoted text): format again, on the heap
        row = mallocCheck((size_t)len + 1);
        va_start(ap, fmt);
        vsnprintf(row, (size_t)len + 1, fmt, ap);
        va_end(ap);
    }
    int n = count_fields(row);
    if (n < 0) csv_fail(w, "malformed row (unbalanced quotes or line break)", row);
    if (n != w->n_columns) {
        char what[96];
        snprintf(what, sizeof what, "row has %d fields, header has %d", n, w->n_columns);
        csv_fail(w, what, row);
    }
    fprintf(w->file.f, "%s\n", row);
    if (row != stack) free(row);
}

void csv_close(CsvWriter *w) { atomic_commit(&w->file); }

void csv_abort(CsvWriter *w) { atomic_abort(&w->file); }

const char *csv_quote(char *buf, size_t size, const char *s) {
    int quote = strpbrk(s, ",\"\r\n") != NULL;
    size_t need = strlen(s) + 1;
    if (quote) {
        need += 2;
        for (const char *p = s; *p; p++) need += *p == '"';
    }
    if (need > size) die("csv_quote: buffer of %zu bytes too small for '%s'", size, s);
    char *d = buf;
    if (quote) *d++ = '"';
    for (const char *p = s; *p; p++) {
        if (*p == '"') *d++ = '"';
        *d++ = *p;
    }
    if (quote) *d++ = '"';
    *d = '\0';
    return buf;
}
