// table.c: RFC 4180 CSV reader (see table.h). Tested by tests/test_render_table.c.
// The text is validated as UTF-8 first, then parsed in one pass into an arena that holds
// every unescaped field followed by a NUL; unescaping only shrinks a field, so the arena
// never needs more than the input plus one NUL per field.
#include "table.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

// --- positions for messages -------------------------------------------------------------

typedef struct {
    const char *name;
    const char *text;
    size_t len, pos;
    int line;          // 1-based line of text[pos]
    size_t line_start; // offset of the first byte of that line
} Cursor;

// 1-based column of byte offset `at` on the current line, counted in characters.
static int column_of(const Cursor *c, size_t at) {
    int col = 1;
    for (size_t i = c->line_start; i < at && i < c->len; i++)
        if (((unsigned char)c->text[i] & 0xC0) != 0x80) col++;
    return col;
}

static int fail_at(const Cursor *c, size_t at, int line, const char *what, Error *err) {
    return error_set(err, "%s:%d:%d: %s", c->name, line, column_of(c, at), what);
}

// --- UTF-8 ------------------------------------------------------------------------------

// Length of the valid UTF-8 sequence at s (at most n bytes), or 0 when it is invalid
// (overlong forms, surrogates and code points above U+10FFFF are invalid).
static int utf8_sequence_length(const unsigned char *s, size_t n) {
    if (s[0] < 0x80) return 1;
    int len;
    unsigned cp;
    if ((s[0] & 0xE0) == 0xC0) len = 2, cp = s[0] & 0x1F;
    else if ((s[0] & 0xF0) == 0xE0) len = 3, cp = s[0] & 0x0F;
    else if ((s[0] & 0xF8) == 0xF0) len = 4, cp = s[0] & 0x07;
    else return 0;
    if ((size_t)len > n) return 0;
    for (int i = 1; i < len; i++) {
        if ((s[i] & 0xC0) != 0x80) return 0;
        cp = (cp << 6) | (s[i] & 0x3F);
    }
    static const unsigned min_cp[5] = {0, 0, 0x80, 0x800, 0x10000};
    if (cp < min_cp[len] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return 0;
    return len;
}

long utf8_invalid_at(const char *s, size_t n) {
    for (size_t i = 0; i < n;) {
        int len = s[i] ? utf8_sequence_length((const unsigned char *)s + i, n - i) : 0;
        if (len == 0) return (long)i;
        i += len;
    }
    return -1;
}

void utf8_sanitize(char *s) {
    for (size_t n = strlen(s); *s; n = strlen(s)) {
        long bad = utf8_invalid_at(s, n);
        if (bad < 0) return;
        s[bad] = '?';
        s += bad + 1;
    }
}

// Reject invalid UTF-8 and NUL bytes, naming the line and column.
static int validate_text(Cursor *c, Error *err) {
    const unsigned char *s = (const unsigned char *)c->text;
    for (size_t i = c->pos; i < c->len;) {
        if (s[i] == 0) return fail_at(c, i, c->line, "NUL byte in text", err);
        int n = utf8_sequence_length(s + i, c->len - i);
        if (n == 0) return fail_at(c, i, c->line, "invalid UTF-8 byte sequence", err);
        if (s[i] == '\n' || (s[i] == '\r' && (i + 1 == c->len || s[i + 1] != '\n'))) {
            c->line++;
            c->line_start = i + 1;
        }
        i += n;
    }
    return 0;
}

// --- the parser -------------------------------------------------------------------------

typedef struct {
    size_t *offsets; // arena offset of each field, record after record
    int *lines;      // start line of each record
    size_t n_fields, cap_fields;
    int n_records, cap_records;
} Fields;

static void fields_push(Fields *f, size_t offset) {
    if (f->n_fields == f->cap_fields) {
        f->cap_fields = f->cap_fields ? 2 * f->cap_fields : 256;
        f->offsets = reallocCheck(f->offsets, f->cap_fields * sizeof *f->offsets);
    }
    f->offsets[f->n_fields++] = offset;
}

static void records_push(Fields *f, int line) {
    if (f->n_records == f->cap_records) {
        f->cap_records = f->cap_records ? 2 * f->cap_records : 64;
        f->lines = reallocCheck(f->lines, (size_t)f->cap_records * sizeof *f->lines);
    }
    f->lines[f->n_records++] = line;
}

static int at_line_end(const Cursor *c) {
    return c->pos < c->len && (c->text[c->pos] == '\n' || c->text[c->pos] == '\r');
}

// Step over one line break (CRLF, LF or a lone CR) and start the next line.
static void skip_line_end(Cursor *c) {
    if (c->text[c->pos] == '\r' && c->pos + 1 < c->len && c->text[c->pos + 1] == '\n') c->pos++;
    c->pos++;
    c->line++;
    c->line_start = c->pos;
}

// Copy one quoted field (c->pos at the opening quote) into out; returns bytes written or -1.
static long read_quoted(Cursor *c, char *out, Error *err) {
    Cursor open = *c; // the opening quote's position, for the message
    long n = 0;
    c->pos++;
    for (;;) {
        if (c->pos >= c->len) return fail_at(&open, open.pos, open.line, "unterminated quoted field", err);
        char ch = c->text[c->pos];
        if (ch == '"') {
            if (c->pos + 1 < c->len && c->text[c->pos + 1] == '"') {
                out[n++] = '"';
                c->pos += 2;
                continue;
            }
            c->pos++;
            break;
        }
        if (ch == '\n' || ch == '\r') {
            if (ch == '\r' && c->pos + 1 < c->len && c->text[c->pos + 1] == '\n') out[n++] = c->text[c->pos++];
            out[n++] = c->text[c->pos];
            c->pos++;
            c->line++;
            c->line_start = c->pos;
            continue;
        }
        out[n++] = ch;
        c->pos++;
    }
    if (c->pos < c->len && c->text[c->pos] != ',' && !at_line_end(c))
        return fail_at(c, c->pos, c->line, "unexpected character after a closing quote "
                       "(a quote inside a quoted field must be doubled)", err);
    return n;
}

// Copy one unquoted field into out; returns bytes written or -1.
static long read_unquoted(Cursor *c, char *out, Error *err) {
    long n = 0;
    while (c->pos < c->len && c->text[c->pos] != ',' && !at_line_end(c)) {
        if (c->text[c->pos] == '"')
            return fail_at(c, c->pos, c->line, "quote inside an unquoted field "
                           "(quote the whole field and double the quote)", err);
        out[n++] = c->text[c->pos++];
    }
    return n;
}

// Read one record (c->pos at its first byte); fields go into the arena at *used.
static int read_record(Cursor *c, char *arena, size_t *used, Fields *f, int expected, Error *err) {
    int line = c->line, n_fields = 0;
    records_push(f, line);
    for (;;) {
        size_t field_at = c->pos;
        if (expected > 0 && n_fields == expected) {
            char msg[96];
            snprintf(msg, sizeof msg, "record has more than the header's %d fields", expected);
            return fail_at(c, field_at > 0 ? field_at - 1 : 0, c->line, msg, err);
        }
        fields_push(f, *used);
        long n = c->pos < c->len && c->text[c->pos] == '"' ? read_quoted(c, arena + *used, err)
                                                           : read_unquoted(c, arena + *used, err);
        if (n < 0) return -1;
        *used += (size_t)n;
        arena[(*used)++] = '\0';
        n_fields++;
        if (c->pos < c->len && c->text[c->pos] == ',') {
            c->pos++;
            continue;
        }
        break;
    }
    if (expected > 0 && n_fields < expected) {
        char msg[96];
        snprintf(msg, sizeof msg, "record has %d field%s, the header has %d", n_fields,
                 n_fields == 1 ? "" : "s", expected);
        return fail_at(c, c->pos, c->line, msg, err);
    }
    if (c->pos < c->len) skip_line_end(c);
    return n_fields;
}

static int check_header(const Table *t, Error *err) {
    for (int i = 0; i < t->n_cols; i++) {
        if (t->names[i][0] == '\0')
            return error_set(err, "%s:1: column %d of the header has an empty name", t->path, i + 1);
        for (int j = 0; j < i; j++)
            if (strcmp(t->names[i], t->names[j]) == 0)
                return error_set(err, "%s:1: duplicate column name '%s' (columns %d and %d)",
                                 t->path, t->names[i], j + 1, i + 1);
    }
    return 0;
}

// Turn arena offsets into the Table's pointer arrays and parse every cell as a number.
static void build_table(Table *t, const Fields *f) {
    t->names = mallocCheck((size_t)t->n_cols * sizeof *t->names);
    for (int i = 0; i < t->n_cols; i++) t->names[i] = t->arena + f->offsets[i];
    size_t n_cells = (size_t)t->n_rows * t->n_cols;
    t->cells = mallocCheck(n_cells * sizeof *t->cells);
    t->values = mallocCheck(n_cells * sizeof *t->values);
    t->lines = mallocCheck((size_t)t->n_rows * sizeof *t->lines);
    for (size_t i = 0; i < n_cells; i++) {
        t->cells[i] = t->arena + f->offsets[t->n_cols + i];
        if (!parse_number(t->cells[i], &t->values[i])) t->values[i] = NAN;
    }
    for (int r = 0; r < t->n_rows; r++) t->lines[r] = f->lines[r + 1];
}

int table_parse(Table *t, const char *name, const char *text, size_t len, Error *err) {
    memset(t, 0, sizeof *t);
    Cursor c = {.name = name, .text = text, .len = len, .line = 1};
    if (len >= 3 && memcmp(text, "\xEF\xBB\xBF", 3) == 0) c.pos = c.line_start = 3;
    Cursor scan = c;
    if (validate_text(&scan, err)) return -1;

    t->path = mallocCheck(strlen(name) + 1);
    strcpy(t->path, name);
    t->arena = mallocCheck(2 * len + 2);
    size_t used = 0;
    Fields f = {0};
    int status = 0;
    while (c.pos < c.len) {
        if (at_line_end(&c)) { // blank line
            skip_line_end(&c);
            continue;
        }
        int n = read_record(&c, t->arena, &used, &f, t->n_cols, err);
        if (n < 0) {
            status = -1;
            break;
        }
        if (t->n_cols == 0) t->n_cols = n;
    }
    if (status == 0 && t->n_cols == 0) status = error_set(err, "%s: empty file (no header)", name);
    if (status == 0) {
        t->n_rows = f.n_records - 1;
        build_table(t, &f);
        status = check_header(t, err);
    }
    free(f.offsets);
    free(f.lines);
    if (status) table_free(t);
    return status;
}

int table_load(Table *t, const char *path, Error *err) {
    memset(t, 0, sizeof *t);
    char *text;
    size_t len;
    if (file_read_all(path, &text, &len, err)) return -1;
    int status = table_parse(t, path, text, len, err);
    free(text);
    return status;
}

void table_free(Table *t) {
    free(t->path);
    free(t->names);
    free(t->cells);
    free(t->values);
    free(t->lines);
    free(t->arena);
    memset(t, 0, sizeof *t);
}

int table_column(const Table *t, const char *name) {
    for (int i = 0; i < t->n_cols; i++)
        if (strcmp(t->names[i], name) == 0) return i;
    return -1;
}

void table_column_list(const Table *t, char *buf, size_t size) {
    size_t used = 0;
    buf[0] = '\0';
    for (int i = 0; i < t->n_cols && used + 1 < size; i++)
        used += (size_t)snprintf(buf + used, size - used, "%s%s", i ? ", " : "", t->names[i]);
}

int parse_number(const char *s, double *out) {
    while (*s == ' ' || *s == '\t') s++;
    const char *digits = s + (*s == '+' || *s == '-');
    if (digits[0] == '0' && (digits[1] == 'x' || digits[1] == 'X')) return 0; // no hex
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (end == s) return 0;
    while (*end == ' ' || *end == '\t') end++;
    if (*end != '\0') return 0;
    *out = v;
    return 1;
}
