// csv.c: tidy CSV output and the table reader (see csv.h). Rows go to a temp file that
// csv_close renames into place, so readers only ever see complete tables.
#include "csv.h"

#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <unistd.h>

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
    CsvWriter w = {.key = ""};
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

CsvWriter csv_open_keyed(const char *path, const char *header, const char *key) {
    if (strlen(key) >= sizeof ((CsvWriter *)0)->key || strpbrk(key, ",\"\r\n"))
        die("csv '%s': key '%s' is not a plain field of under 32 bytes", path, key);
    CsvWriter w = csv_open(path, header);
    snprintf(w.key, sizeof w.key, "%s", key);
    return w;
}

// The records of a CSV file, line breaks inside quoted fields kept (an odd count of quotes so
// far means the field is still open). NULL-terminated; *n is their number.
static char **read_records(FILE *f, int *n) {
    char **records = NULL, *line = NULL;
    size_t cap = 0;
    *n = 0;
    for (ssize_t len; (len = getline(&line, &cap, f)) > 0;) {
        size_t size = (size_t)len + 1, quotes = 0;
        char *rec = mallocCheck(size);
        memcpy(rec, line, size);
        for (char *p = rec; *p; p++) quotes += *p == '"';
        while (quotes % 2 == 1 && (len = getline(&line, &cap, f)) > 0) {
            rec = reallocCheck(rec, size + (size_t)len);
            memcpy(rec + size - 1, line, (size_t)len + 1);
            size += (size_t)len;
            for (char *p = line; *p; p++) quotes += *p == '"';
        }
        size_t end = strlen(rec);
        while (end > 0 && (rec[end - 1] == '\n' || rec[end - 1] == '\r')) rec[--end] = '\0';
        records = reallocCheck(records, (size_t)(*n + 2) * sizeof *records);
        records[(*n)++] = rec;
        records[*n] = NULL;
    }
    free(line);
    return records;
}

static void free_records(char **records, int n) {
    for (int i = 0; i < n; i++) free(records[i]);
    free(records);
}

// How a record's first field sorts against key: <0, 0 (the same key), >0.
static int compare_key(const char *record, const char *key) {
    size_t len = strlen(record) + 1;
    char *copy = mallocCheck(len), *first = NULL;
    memcpy(copy, record, len);
    int order = csv_split(copy, &first, 1) < 1 ? -1 : strcmp(first, key);
    free(copy);
    return order;
}

// The existing file's records of other keys around this run's (in the temp file), written
// back into the temp file; the caller holds the directory's lock and renames.
static void merge_into_temp(CsvWriter *w) {
    if (fflush(w->file.f) != 0) die("write to '%s' failed", w->file.path);
    FILE *ours = fopenCheck(w->file.tmp_path, "rb");
    int n_ours, n_old = 0;
    char **mine = read_records(ours, &n_ours), **old = NULL;
    fclose(ours);
    FILE *existing = fopen(w->file.path, "rb");
    if (existing) {
        old = read_records(existing, &n_old);
        fclose(existing);
        if (n_old > 0 && strcmp(old[0], mine[0]) != 0) {
            fprintf(stderr, "csv '%s': its columns have changed; the rows of other runs are dropped\n", w->file.path);
            free_records(old, n_old);
            old = NULL, n_old = 0;
        }
    }
    if (ftruncate(fileno(w->file.f), 0) != 0 || fseek(w->file.f, 0, SEEK_SET) != 0)
        die("cannot rewrite '%s': %s", w->file.tmp_path, strerror(errno));
    fprintf(w->file.f, "%s\n", mine[0]);
    for (int i = 1; i < n_old; i++)
        if (compare_key(old[i], w->key) < 0) fprintf(w->file.f, "%s\n", old[i]);
    for (int i = 1; i < n_ours; i++) fprintf(w->file.f, "%s\n", mine[i]);
    for (int i = 1; i < n_old; i++)
        if (compare_key(old[i], w->key) > 0) fprintf(w->file.f, "%s\n", old[i]);
    free_records(mine, n_ours);
    if (old) free_records(old, n_old);
}

void csv_close(CsvWriter *w) {
    if (!w->key[0]) {
        atomic_commit(&w->file);
        return;
    }
    // Two runs that close the same table at once must not lose each other's rows.
    char dir[512];
    snprintf(dir, sizeof dir, "%s", w->file.path);
    int lock = open(dirname(dir), O_RDONLY | O_DIRECTORY);
    if (lock < 0 || flock(lock, LOCK_EX) != 0) die("csv '%s': cannot lock its directory", w->file.path);
    merge_into_temp(w);
    atomic_commit(&w->file);
    flock(lock, LOCK_UN);
    close(lock);
}

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

int csv_read_table(const char *path, const char *const *columns, int n_columns, CsvRowFn parse, void *table,
                   Error *err) {
    FILE *f = fopen(path, "r");
    if (!f) return error_set(err, "%s: cannot open: %s", path, strerror(errno));
    char *line = NULL, **fields = NULL;
    size_t cap = 0;
    int *index = mallocCheck((size_t)n_columns * sizeof(int));
    char **values = mallocCheck((size_t)n_columns * sizeof(char *));
    int n_header = 0, lineno = 0, rc = 0;
    for (ssize_t len; rc == 0 && (len = getline(&line, &cap, f)) != -1;) {
        lineno++;
        while (len > 0 && (line[len - 1] == '\n' || line[len - 1] == '\r')) line[--len] = '\0';
        if ((size_t)len != strlen(line)) {
            rc = error_set(err, "%s:%d: NUL byte in line", path, lineno);
            break;
        }
        if (len == 0) continue;
        int max_fields = 1; // a record has at most one field more than it has commas
        for (char *c = line; *c; c++) max_fields += *c == ',';
        fields = reallocCheck(fields, (size_t)max_fields * sizeof(char *));
        int n = csv_split(line, fields, max_fields);
        if (n < 0) {
            rc = error_set(err, "%s:%d: malformed quoting", path, lineno);
            break;
        }
        if (n_header == 0) {
            n_header = n;
            for (int c = 0; c < n_columns && rc == 0; c++) {
                index[c] = -1;
                for (int i = 0; i < n; i++)
                    if (strcmp(fields[i], columns[c]) == 0) index[c] = i;
                if (index[c] < 0) rc = error_set(err, "%s:%d: header has no column '%s'", path, lineno, columns[c]);
            }
            continue;
        }
        if (n != n_header) {
            rc = error_set(err, "%s:%d: %d fields, the header has %d", path, lineno, n, n_header);
            break;
        }
        for (int c = 0; c < n_columns; c++) values[c] = fields[index[c]];
        rc = parse(table, values, path, lineno, err);
    }
    if (rc == 0 && ferror(f)) rc = error_set(err, "%s: read error", path);
    if (rc == 0 && n_header == 0) rc = error_set(err, "%s: empty file (no header)", path);
    free(line);
    free(fields);
    free(index);
    free(values);
    fclose(f);
    return rc;
}
