// meta.c: <dir>/meta.csv, merged and written atomically (see meta.h).
#include "meta.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "csv.h"

int meta_make_dir(const char *dir, Error *err) {
    char path[1024];
    if (snprintf(path, sizeof path, "%s", dir) >= (int)sizeof path || path[0] == '\0')
        return error_set(err, "output directory '%s': empty or too long", dir);
    // Create each prefix ending before a '/', then the whole path.
    for (char *p = path + 1;; p++) {
        if (*p != '/' && *p != '\0') continue;
        char c = *p;
        *p = '\0';
        if (mkdir(path, 0777) != 0 && errno != EEXIST)
            return error_set(err, "cannot create directory '%s': %s", path, strerror(errno));
        *p = c;
        if (c == '\0') break;
    }
    struct stat st;
    if (stat(dir, &st) != 0 || !S_ISDIR(st.st_mode))
        return error_set(err, "output directory '%s' exists but is not a directory", dir);
    return 0;
}

// --- the table being merged ---------------------------------------------------------------

typedef struct {
    char *key, *value;
} Row;

typedef struct {
    Row *rows;
    int n, cap;
} Table;

static char *text_dup(const char *s) {
    size_t n = strlen(s) + 1;
    char *d = mallocCheck(n);
    memcpy(d, s, n);
    return d;
}

static int table_find(const Table *t, const char *key) {
    for (int i = 0; i < t->n; i++)
        if (strcmp(t->rows[i].key, key) == 0) return i;
    return -1;
}

// Set key to value: replace in place when present, else append.
static void table_set(Table *t, const char *key, const char *value) {
    int i = table_find(t, key);
    if (i >= 0) {
        free(t->rows[i].value);
        t->rows[i].value = text_dup(value);
        return;
    }
    if (t->n == t->cap) {
        t->cap = t->cap ? 2 * t->cap : 32;
        t->rows = reallocCheck(t->rows, (size_t)t->cap * sizeof(Row));
    }
    t->rows[t->n].key = text_dup(key);
    t->rows[t->n].value = text_dup(value);
    t->n++;
}

static void table_free(Table *t) {
    for (int i = 0; i < t->n; i++) {
        free(t->rows[i].key);
        free(t->rows[i].value);
    }
    free(t->rows);
}

static int valid_key(const char *key) {
    if (!key || !*key) return 0;
    for (const char *c = key; *c; c++)
        if (!((*c >= 'a' && *c <= 'z') || (*c >= '0' && *c <= '9') || *c == '_')) return 0;
    return 1;
}

// Read an existing meta.csv into t; a missing file is an empty table.
static int table_read(Table *t, const char *path, Error *err) {
    FILE *f = fopen(path, "r");
    if (!f) return errno == ENOENT ? 0 : error_set(err, "%s: cannot read: %s", path, strerror(errno));
    char line[4096];
    int lineno = 0, rc = 0;
    while (rc == 0 && fgets(line, sizeof line, f)) {
        lineno++;
        size_t n = strlen(line);
        if (n > 0 && line[n - 1] != '\n' && !feof(f)) {
            rc = error_set(err, "%s:%d: line longer than %zu bytes", path, lineno, sizeof line - 2);
            break;
        }
        while (n > 0 && (line[n - 1] == '\n' || line[n - 1] == '\r')) line[--n] = '\0';
        char *fields[2];
        int nf = csv_split(line, fields, 2);
        if (nf != 2) {
            rc = error_set(err, "%s:%d: expected two fields key,value", path, lineno);
        } else if (lineno == 1) {
            if (strcmp(fields[0], "key") != 0 || strcmp(fields[1], "value") != 0)
                rc = error_set(err, "%s:1: header is not key,value", path);
        } else if (!valid_key(fields[0])) {
            rc = error_set(err, "%s:%d: bad key '%s' (want [a-z0-9_]+)", path, lineno, fields[0]);
        } else {
            table_set(t, fields[0], fields[1]);
        }
    }
    if (rc == 0 && lineno == 0) rc = error_set(err, "%s: empty file (no key,value header)", path);
    fclose(f);
    return rc;
}

// The probe's rows and the profile, in their fixed order, ahead of everything else.
static void table_set_probe(Table *t, const HwInfo *hw, const char *profile) {
    char slug[96], n_cpus[16], mem[32], llc[32], blas_threads[16];
    hw_slug(slug, sizeof slug, hw);
    snprintf(n_cpus, sizeof n_cpus, "%d", hw->n_cpus);
    snprintf(mem, sizeof mem, "%lld", hw->mem_bytes);
    snprintf(llc, sizeof llc, "%lld", hw->llc_bytes);
    snprintf(blas_threads, sizeof blas_threads, "%d", hw->blas_threads);
    const MetaEntry probe[] = {
        {"hw", slug},           {"cpu_model", hw->cpu_model}, {"cpu_uarch", hw->cpu_uarch[0] ? hw->cpu_uarch : "unknown"},
        {"cpu_isa", hw->cpu_isa[0] ? hw->cpu_isa : "unknown"}, {"llc_bytes", llc}, {"n_cpus", n_cpus},
        {"mem_bytes", mem},     {"gpu", hw->gpu[0] ? hw->gpu : "none"},
        {"blas", hw->blas},     {"blas_core", hw->blas_core}, {"blas_choice", hw->blas_choice},
        {"blas_threads", blas_threads},
        {"compiler", hw->compiler}, {"cflags", hw->cflags},   {"git_commit", hw->git_commit},
        {"date", hw->date},     {"profile", profile},
    };
    for (size_t i = 0; i < sizeof probe / sizeof probe[0]; i++) table_set(t, probe[i].key, probe[i].value);
}

static void write_value(FILE *f, const char *value) {
    size_t n = strlen(value);
    char *clean = mallocCheck(n + 1), *quoted = mallocCheck(2 * n + 3);
    for (size_t i = 0; i <= n; i++) clean[i] = value[i] == '\n' || value[i] == '\r' ? ' ' : value[i];
    fprintf(f, "%s\n", csv_quote(quoted, 2 * n + 3, clean));
    free(clean);
    free(quoted);
}

int meta_write(const char *dir, const HwInfo *hw, const char *profile, const MetaEntry *extra, int n_extra,
               Error *err) {
    for (int i = 0; i < n_extra; i++)
        if (!valid_key(extra[i].key) || !extra[i].value)
            die("meta_write: bad entry %d (key '%s'): keys are [a-z0-9_]+, values non-NULL", i,
                extra[i].key ? extra[i].key : "(null)");
    int lock = open(dir, O_RDONLY | O_DIRECTORY);
    if (lock < 0) return error_set(err, "cannot open output directory '%s': %s", dir, strerror(errno));
    if (flock(lock, LOCK_EX) != 0) {
        close(lock);
        return error_set(err, "cannot lock output directory '%s': %s", dir, strerror(errno));
    }
    char path[1024];
    snprintf(path, sizeof path, "%s/meta.csv", dir);
    Table old = {0}, t = {0};
    int rc = table_read(&old, path, err);
    if (rc == 0) {
        table_set_probe(&t, hw, profile);
        for (int i = 0; i < old.n; i++)
            if (table_find(&t, old.rows[i].key) < 0) table_set(&t, old.rows[i].key, old.rows[i].value);
        for (int i = 0; i < n_extra; i++) table_set(&t, extra[i].key, extra[i].value);
        AtomicFile af = atomic_open(path);
        fputs("key,value\n", af.f);
        for (int i = 0; i < t.n; i++) {
            fprintf(af.f, "%s,", t.rows[i].key);
            write_value(af.f, t.rows[i].value);
        }
        atomic_commit(&af);
    }
    table_free(&old);
    table_free(&t);
    flock(lock, LOCK_UN);
    close(lock);
    return rc;
}

int meta_file_checksum(const char *path, char out[17], Error *err) {
    FILE *f = fopen(path, "rb");
    if (!f) return error_set(err, "%s: cannot open: %s", path, strerror(errno));
    uint64_t h = 0xcbf29ce484222325ull; // FNV-1a 64 offset basis
    unsigned char buf[1 << 16];
    size_t n;
    while ((n = fread(buf, 1, sizeof buf, f)) > 0)
        for (size_t i = 0; i < n; i++) h = (h ^ buf[i]) * 0x100000001b3ull; // FNV prime
    int bad = ferror(f);
    fclose(f);
    if (bad) return error_set(err, "%s: read error", path);
    snprintf(out, 17, "%016" PRIx64, h);
    return 0;
}
