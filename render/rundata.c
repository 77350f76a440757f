// rundata.c: a run directory's CSVs, meta.csv and skip reasons (see rundata.h).
#include "rundata.h"

#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

static char *dup_str(const char *s) {
    char *d = mallocCheck(strlen(s) + 1);
    strcpy(d, s);
    return d;
}

static int is_file(const char *path) {
    struct stat st;
    return stat(path, &st) == 0 && S_ISREG(st.st_mode);
}

// The path under which `name` exists (run dir first, then ref dir); 0 when neither has it.
static int find_csv(const RunData *r, const char *name, char *path, size_t size) {
    snprintf(path, size, "%s/%s", r->dir, name);
    if (is_file(path)) return 1;
    if (r->ref_dir) {
        snprintf(path, size, "%s/%s", r->ref_dir, name);
        if (is_file(path)) return 1;
    }
    return 0;
}

int rundata_open(RunData *r, const char *dir, const char *ref_dir, Error *err) {
    memset(r, 0, sizeof *r);
    struct stat st;
    if (stat(dir, &st) != 0) return error_set(err, "%s: cannot open run directory: %s", dir, strerror(errno));
    if (!S_ISDIR(st.st_mode)) return error_set(err, "%s: not a directory", dir);
    r->dir = dup_str(dir);
    r->ref_dir = ref_dir ? dup_str(ref_dir) : NULL;
    char path[PATH_MAX];
    snprintf(path, sizeof path, "%s/meta.csv", dir);
    if (is_file(path) && table_load(&r->meta, path, err)) {
        rundata_close(r);
        return -1;
    }
    if (r->meta.n_cols > 0 && r->meta.n_cols < 2) {
        error_set(err, "%s: meta.csv needs two columns, key and value", path);
        rundata_close(r);
        return -1;
    }
    const char *slug = rundata_meta(r, "hw");
    if (!slug || !*slug) slug = rundata_meta(r, "hw_slug");
    if (slug && *slug) r->label = dup_str(slug);
    else {
        size_t n = strlen(dir);
        while (n > 1 && dir[n - 1] == '/') n--;
        const char *start = dir + n;
        while (start > dir && start[-1] != '/') start--;
        r->label = mallocCheck((size_t)(dir + n - start) + 1);
        memcpy(r->label, start, (size_t)(dir + n - start));
        r->label[dir + n - start] = '\0';
        utf8_sanitize(r->label); // a directory name may be any bytes; the label goes into the PDF
    }
    return 0;
}

void rundata_close(RunData *r) {
    for (int i = 0; i < r->n_tables; i++) {
        table_free(r->tables[i]);
        free(r->tables[i]);
        free(r->names[i]);
    }
    free(r->tables);
    free(r->names);
    table_free(&r->meta);
    free(r->dir);
    free(r->ref_dir);
    free(r->label);
    memset(r, 0, sizeof *r);
}

// "F.csv[column=value]" into its file name and filter; 0 when name has no filter.
static int row_filter(const char *name, char *file, size_t file_size, char *column, char *value, size_t size) {
    const char *open = strchr(name, '['), *eq = open ? strchr(open, '=') : NULL;
    size_t len = strlen(name);
    if (!open || !eq || name[len - 1] != ']') return 0;
    snprintf(file, file_size, "%.*s", (int)(open - name), name);
    snprintf(column, size, "%.*s", (int)(eq - open - 1), open + 1);
    snprintf(value, size, "%.*s", (int)(name + len - 1 - eq - 1), eq + 1);
    return 1;
}

int rundata_has(const RunData *r, const char *name) {
    char path[PATH_MAX], file[PATH_MAX], column[128], value[128];
    if (!row_filter(name, file, sizeof file, column, value, sizeof value)) return find_csv(r, name, path, sizeof path);
    Table t;
    if (!find_csv(r, file, path, sizeof path) || table_load(&t, path, NULL)) return 0;
    int col = table_column(&t, column), found = 0;
    for (int i = 0; col >= 0 && i < t.n_rows && !found; i++) found = strcmp(table_cell(&t, i, col), value) == 0;
    table_free(&t);
    return found;
}

const Table *rundata_table(RunData *r, const char *name, Error *err) {
    for (int i = 0; i < r->n_tables; i++)
        if (strcmp(r->names[i], name) == 0) return r->tables[i];
    char path[PATH_MAX];
    if (!find_csv(r, name, path, sizeof path)) {
        error_set(err, "unknown file '%s': not in %s%s%s", name, r->dir, r->ref_dir ? " nor in " : "",
                  r->ref_dir ? r->ref_dir : "");
        return NULL;
    }
    Table *t = mallocCheck(sizeof *t);
    if (table_load(t, path, err)) {
        free(t);
        return NULL;
    }
    r->tables = reallocCheck(r->tables, (size_t)(r->n_tables + 1) * sizeof *r->tables);
    r->names = reallocCheck(r->names, (size_t)(r->n_tables + 1) * sizeof *r->names);
    r->tables[r->n_tables] = t;
    r->names[r->n_tables++] = dup_str(name);
    return t;
}

// meta.csv is "key,value" rows under a "key,value" header; a file without that header is
// read as rows only, so its first line counts as a pair too.
const char *rundata_meta(const RunData *r, const char *key) {
    const Table *m = &r->meta;
    if (m->n_cols < 2) return NULL;
    for (int i = 0; i < m->n_rows; i++)
        if (strcmp(table_cell(m, i, 0), key) == 0) return table_cell(m, i, 1);
    int has_header = strcmp(m->names[0], "key") == 0 && strcmp(m->names[1], "value") == 0;
    if (!has_header && strcmp(m->names[0], key) == 0) return m->names[1];
    return NULL;
}

void rundata_missing_reason(const RunData *r, const char *name, const char *fallback, char *buf, size_t size) {
    char path[PATH_MAX], file[PATH_MAX], column[128], value[128] = "";
    int filtered = row_filter(name, file, sizeof file, column, value, sizeof value);
    const char *csv = filtered ? file : name, *dot = strrchr(csv, '.');
    int stem = dot ? (int)(dot - csv) : (int)strlen(csv);
    snprintf(path, sizeof path, "%s/%.*s%s%s.skip", r->dir, stem, csv, filtered ? "." : "", value);
    FILE *f = fopen(path, "rb");
    if (f) {
        char line[512] = "";
        if (!fgets(line, sizeof line, f)) line[0] = '\0';
        fclose(f);
        line[strcspn(line, "\r\n")] = '\0';
        if (line[0] && utf8_invalid_at(line, strlen(line)) < 0) {
            snprintf(buf, size, "%s", line);
            return;
        }
    }
    if (fallback) snprintf(buf, size, "%s", fallback);
    else snprintf(buf, size, "%s was not found in %s", name, r->dir);
    utf8_sanitize(buf); // the directory's name may be any bytes
}
