// template.c: the report template parser (see template.h; the format is specified in
// templates/README.md). Tested by tests/test_render_template.c.
#include "template.h"

#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "table.h"

#define MAX_INCLUDE_DEPTH 16

// --- option keys --------------------------------------------------------------------------

enum { K_LINE = 1, K_BAR = 2, K_HEATMAP = 4, K_ROOFLINE = 8, K_TABLE = 16 };
#define K_FIGURE (K_LINE | K_BAR | K_HEATMAP | K_ROOFLINE)

// Which options each kind of block takes; `required` lists the kinds that must give it.
static const struct {
    const char *key;
    int kinds, required, repeatable;
} option_keys[] = {
    {"kind", K_FIGURE, 0, 0},          {"csv", K_FIGURE | K_TABLE, K_FIGURE, 0},
    {"where", K_FIGURE | K_TABLE, 0, 0}, {"x", K_FIGURE, K_FIGURE, 0},
    {"y", K_FIGURE, K_FIGURE, 0},       {"series", K_LINE | K_BAR | K_ROOFLINE, 0, 0},
    {"labels", K_LINE | K_BAR, 0, 0},   {"xscale", K_LINE | K_ROOFLINE, 0, 0},
    {"yscale", K_LINE | K_BAR | K_ROOFLINE, 0, 0},
    {"xlabel", K_FIGURE, 0, 0},         {"ylabel", K_FIGURE, 0, 0},
    {"title", K_FIGURE, 0, 0},          {"caption", K_FIGURE | K_TABLE, 0, 0},
    {"xmin", K_LINE | K_ROOFLINE, 0, 0}, {"xmax", K_LINE | K_ROOFLINE, 0, 0},
    {"ymin", K_LINE | K_BAR | K_ROOFLINE, 0, 0}, {"ymax", K_LINE | K_BAR | K_ROOFLINE, 0, 0},
    {"legend", K_LINE | K_BAR | K_ROOFLINE, 0, 0}, {"height", K_FIGURE, 0, 0},
    {"ref", K_LINE, 0, 0},              {"ref_label", K_LINE, 0, 0},
    {"band", K_LINE | K_BAR, 0, 0},     {"z", K_HEATMAP, K_HEATMAP, 0},
    {"zlabel", K_HEATMAP, 0, 0},        {"zmin", K_HEATMAP, 0, 0},
    {"zmax", K_HEATMAP, 0, 0},          {"format", K_HEATMAP, 0, 0},
    {"zscale", K_HEATMAP, 0, 0},
    {"label", K_ROOFLINE, 0, 0},        {"peak", K_LINE | K_BAR | K_ROOFLINE, K_ROOFLINE, 1},
    {"bandwidth", K_ROOFLINE, K_ROOFLINE, 1},
    {"columns", K_TABLE, 0, 0},         {"headers", K_TABLE, 0, 0},
    {"formats", K_TABLE, 0, 0},         {"keys", K_TABLE, 0, 0},
    {"row", K_TABLE, 0, 1},
};
// A table shows rows of a CSV (csv, columns and the options about them) or rows written in
// the template (row: lines, one cell per header); these belong to the first kind only.
static const char *csv_table_keys[] = {"csv", "columns", "where", "formats", "keys"};
#define N_OPTION_KEYS (int)(sizeof option_keys / sizeof option_keys[0])

static const struct { const char *name; int bit; } figure_kinds[] = {
    {"line", K_LINE}, {"bar", K_BAR}, {"heatmap", K_HEATMAP}, {"roofline", K_ROOFLINE},
};

// --- small helpers ----------------------------------------------------------------------

static char *dup_range(const char *s, size_t n) {
    char *d = mallocCheck(n + 1);
    memcpy(d, s, n);
    d[n] = '\0';
    return d;
}
static char *dup_str(const char *s) { return dup_range(s, strlen(s)); }

static const char *skip_space(const char *s) {
    while (*s == ' ' || *s == '\t') s++;
    return s;
}

// Copy s without its trailing spaces.
static char *dup_trimmed(const char *s) {
    s = skip_space(s);
    size_t n = strlen(s);
    while (n > 0 && (s[n - 1] == ' ' || s[n - 1] == '\t')) n--;
    return dup_range(s, n);
}

static Block *push_block(Template *t, BlockKind kind, const char *file, int line) {
    t->blocks = reallocCheck(t->blocks, (size_t)(t->n_blocks + 1) * sizeof *t->blocks);
    Block *b = &t->blocks[t->n_blocks++];
    memset(b, 0, sizeof *b);
    b->kind = kind;
    b->file = file;
    b->line = line;
    return b;
}

static void push_option(Block *b, char *key, char *value, int line) {
    b->options = reallocCheck(b->options, (size_t)(b->n_options + 1) * sizeof *b->options);
    b->options[b->n_options++] = (Option){key, value, line};
}

const Option *block_find_option(const Block *b, const char *key) {
    for (int i = b->n_options - 1; i >= 0; i--)
        if (strcmp(b->options[i].key, key) == 0) return &b->options[i];
    return NULL;
}

const char *block_option(const Block *b, const char *key) {
    const Option *o = block_find_option(b, key);
    return o ? o->value : NULL;
}

char **table_row_cells(const char *row, int *n) {
    char **cells = NULL;
    *n = 0;
    for (const char *s = row;;) {
        const char *end = s;
        for (int depth = 0; *end && (*end != '|' || depth > 0); end++)
            depth += (*end == '{') - (*end == '}');
        cells = reallocCheck(cells, (size_t)(*n + 1) * sizeof *cells);
        char *cell = dup_range(s, (size_t)(end - s));
        cells[(*n)++] = dup_trimmed(cell);
        free(cell);
        if (!*end) return cells;
        s = end + 1;
    }
}

const char *figure_kind(const Block *b) {
    const char *k = block_option(b, "kind");
    return k ? k : "line";
}

// --- the parser ---------------------------------------------------------------------------

typedef struct {
    Template *t;
    const char *file; // owned by t->files
    int line;
    char *para;       // the paragraph being collected, or NULL
    int para_line, para_bullet;
    Block *open;      // the @figure / @table block being filled, or NULL
    Option *last;     // the option a continuation line extends
    const char *stack[MAX_INCLUDE_DEPTH]; // real paths of the files being read
    int depth;
} Parser;

static int parse_file(Parser *p, const char *path, Error *err);

static int fail(const Parser *p, Error *err, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int fail(const Parser *p, Error *err, const char *fmt, ...) {
    char msg[sizeof err->msg];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return error_set(err, "%s:%d: %s", p->file, p->line, msg);
}

static void flush_paragraph(Parser *p) {
    if (!p->para) return;
    Block *b = push_block(p->t, BLOCK_PARAGRAPH, p->file, p->para_line);
    b->text = p->para;
    b->bullet = p->para_bullet;
    p->para = NULL;
}

static void add_text_line(Parser *p, const char *line) {
    int bullet = line[0] == '-' && line[1] == ' ';
    if (bullet) flush_paragraph(p);
    if (bullet) line = skip_space(line + 1);
    char *text = dup_trimmed(line);
    if (!p->para) {
        p->para = text;
        p->para_line = p->line;
        p->para_bullet = bullet;
        return;
    }
    size_t n = strlen(p->para);
    p->para = reallocCheck(p->para, n + strlen(text) + 2);
    p->para[n] = ' ';
    strcpy(p->para + n + 1, text);
    free(text);
}

static int option_key_index(const char *key) {
    for (int i = 0; i < N_OPTION_KEYS; i++)
        if (strcmp(option_keys[i].key, key) == 0) return i;
    return -1;
}

static int block_kind_bit(const Parser *p, const Block *b, Error *err) {
    if (b->kind == BLOCK_TABLE) return K_TABLE;
    const char *kind = figure_kind(b);
    for (size_t i = 0; i < sizeof figure_kinds / sizeof figure_kinds[0]; i++)
        if (strcmp(kind, figure_kinds[i].name) == 0) return figure_kinds[i].bit;
    Parser at = *p;
    at.line = block_find_option(b, "kind")->line;
    return fail(&at, err, "unknown figure kind '%s' (line, bar, heatmap or roofline)", kind);
}

// A table of a CSV needs csv and columns; a table of row: lines needs headers, as many as
// each row has cells, and none of the CSV's options.
static int check_table(Parser *p, const Block *b, Error *err) {
    int n_csv_keys = (int)(sizeof csv_table_keys / sizeof csv_table_keys[0]), n_headers = 0;
    if (!block_option(b, "row")) {
        for (int i = 0; i < 2; i++)
            if (!block_option(b, csv_table_keys[i]))
                return fail(p, err, "@table at line %d needs the option '%s' (or row: lines)", b->line, csv_table_keys[i]);
        return 0;
    }
    for (int i = 0; i < n_csv_keys; i++)
        if (block_option(b, csv_table_keys[i]))
            return fail(p, err, "@table at line %d has row: lines, so it takes no '%s'", b->line, csv_table_keys[i]);
    const char *headers = block_option(b, "headers");
    if (!headers) return fail(p, err, "@table at line %d has row: lines, so it needs 'headers'", b->line);
    for (const char *s = headers; *s; s++) n_headers += *s == ',';
    n_headers++;
    for (int i = 0; i < b->n_options; i++) {
        if (strcmp(b->options[i].key, "row") != 0) continue;
        int n;
        char **cells = table_row_cells(b->options[i].value, &n);
        for (int c = 0; c < n; c++) free(cells[c]);
        free(cells);
        if (n != n_headers) {
            Parser at = *p;
            at.line = b->options[i].line;
            return fail(&at, err, "the row has %d cells for %d headers (cells are separated by '|')", n, n_headers);
        }
    }
    return 0;
}

// At @end: every option must suit the block's kind, and the required ones must be there.
static int check_block(Parser *p, const Block *b, Error *err) {
    int bit = block_kind_bit(p, b, err);
    if (bit < 0) return -1;
    const char *what = b->kind == BLOCK_TABLE ? "@table" : figure_kind(b);
    for (int i = 0; i < b->n_options; i++) {
        int k = option_key_index(b->options[i].key);
        Parser at = *p;
        at.line = b->options[i].line;
        if (k < 0 || !(option_keys[k].kinds & bit))
            return fail(&at, err, "option '%s' is not known for %s%s", b->options[i].key, what,
                        b->kind == BLOCK_FIGURE ? " figures" : "");
        if (!option_keys[k].repeatable)
            for (int j = 0; j < i; j++)
                if (strcmp(b->options[j].key, b->options[i].key) == 0)
                    return fail(&at, err, "option '%s' is given twice", b->options[i].key);
    }
    for (int k = 0; k < N_OPTION_KEYS; k++)
        if ((option_keys[k].required & bit) && !block_option(b, option_keys[k].key))
            return fail(p, err, "%s at line %d needs the option '%s'", b->kind == BLOCK_TABLE ? "@table" : "@figure",
                        b->line, option_keys[k].key);
    return b->kind == BLOCK_TABLE ? check_table(p, b, err) : 0;
}

// "key: value" inside @figure / @table; an indented line continues the previous value.
static int parse_option_line(Parser *p, const char *raw, Error *err) {
    const char *line = skip_space(raw);
    if (raw != line && p->last) {
        size_t n = strlen(p->last->value);
        char *more = dup_trimmed(line);
        p->last->value = reallocCheck(p->last->value, n + strlen(more) + 2);
        p->last->value[n] = ' ';
        strcpy(p->last->value + n + 1, more);
        free(more);
        return 0;
    }
    const char *colon = strchr(line, ':');
    if (!colon) return fail(p, err, "expected 'key: value' inside a block, got '%s'", line);
    char *key = dup_range(line, (size_t)(colon - line));
    char *trimmed = dup_trimmed(key);
    free(key);
    push_option(p->open, trimmed, dup_trimmed(colon + 1), p->line);
    p->last = &p->open->options[p->open->n_options - 1];
    return 0;
}

static Block *current_section(Template *t) {
    for (int i = t->n_blocks - 1; i >= 0; i--)
        if (t->blocks[i].kind == BLOCK_SECTION || t->blocks[i].kind == BLOCK_SUBSECTION) return &t->blocks[i];
    return NULL;
}

// "@requires a.csv b.csv [else REASON]"
static int parse_requires(Parser *p, const char *args, Error *err) {
    Block *s = current_section(p->t);
    if (!s) return fail(p, err, "@requires must follow a @section or @subsection");
    const char *reason = strstr(args, " else ");
    size_t files_len = reason ? (size_t)(reason - args) : strlen(args);
    char *files = dup_range(args, files_len);
    for (char *tok = strtok(files, " \t"); tok; tok = strtok(NULL, " \t")) {
        s->requires = reallocCheck(s->requires, (size_t)(s->n_requires + 1) * sizeof *s->requires);
        s->requires[s->n_requires++] = dup_str(tok);
    }
    free(files);
    if (reason) {
        free(s->reason);
        s->reason = dup_trimmed(reason + 6);
    }
    if (s->n_requires == 0) return fail(p, err, "@requires names no CSV file");
    return 0;
}

static int parse_include(Parser *p, const char *arg, Error *err) {
    if (!*arg) return fail(p, err, "@include needs a file name");
    char path[PATH_MAX];
    if (arg[0] == '/') snprintf(path, sizeof path, "%s", arg);
    else {
        const char *slash = strrchr(p->file, '/');
        int dir_len = slash ? (int)(slash - p->file) + 1 : 0;
        snprintf(path, sizeof path, "%.*s%s", dir_len, p->file, arg);
    }
    return parse_file(p, path, err);
}

static int parse_directive(Parser *p, const char *line, Error *err) {
    const char *end = line + 1;
    while (*end && *end != ' ' && *end != '\t') end++;
    char name[32];
    snprintf(name, sizeof name, "%.*s", (int)(end - line - 1), line + 1);
    char *arg = dup_trimmed(end);
    int status = 0;
    flush_paragraph(p);
    Template *t = p->t;
    if (strcmp(name, "title") == 0 || strcmp(name, "subtitle") == 0) {
        char **slot = strcmp(name, "title") == 0 ? &t->title : &t->subtitle;
        free(*slot);
        *slot = arg;
        arg = NULL;
    } else if (strcmp(name, "section") == 0 || strcmp(name, "subsection") == 0) {
        if (!*arg) status = fail(p, err, "@%s needs a title", name);
        else {
            BlockKind kind = strcmp(name, "section") == 0 ? BLOCK_SECTION : BLOCK_SUBSECTION;
            push_block(t, kind, p->file, p->line)->text = arg;
            arg = NULL;
        }
    } else if (strcmp(name, "requires") == 0) {
        status = parse_requires(p, arg, err);
    } else if (strcmp(name, "figure") == 0 || strcmp(name, "table") == 0) {
        p->open = push_block(t, strcmp(name, "figure") == 0 ? BLOCK_FIGURE : BLOCK_TABLE, p->file, p->line);
        p->open->text = arg;
        arg = NULL;
        p->last = NULL;
    } else if (strcmp(name, "pagebreak") == 0) {
        push_block(t, BLOCK_PAGEBREAK, p->file, p->line);
    } else if (strcmp(name, "include") == 0) {
        status = parse_include(p, arg, err);
    } else if (strcmp(name, "end") == 0) {
        status = fail(p, err, "@end without an open @figure or @table");
    } else {
        status = fail(p, err, "unknown directive '@%s' (see templates/README.md)", name);
    }
    free(arg);
    return status;
}

static int parse_line(Parser *p, char *line, Error *err) {
    const char *s = skip_space(line);
    if (*s == '#') return 0;
    if (p->open) {
        if (*s == '\0') return 0;
        if (strncmp(s, "@end", 4) == 0 && (s[4] == '\0' || s[4] == ' ' || s[4] == '\t')) {
            Block *b = p->open;
            p->open = NULL;
            return check_block(p, b, err);
        }
        if (*s == '@')
            return fail(p, err, "directive inside a block: missing @end for the block opened at line %d", p->open->line);
        return parse_option_line(p, line, err);
    }
    if (*s == '\0') {
        flush_paragraph(p);
        return 0;
    }
    if (*s == '@') return parse_directive(p, s, err);
    add_text_line(p, s);
    return 0;
}

static const char *remember_file(Template *t, const char *path) {
    t->files = reallocCheck(t->files, (size_t)(t->n_files + 1) * sizeof *t->files);
    t->files[t->n_files] = dup_str(path);
    return t->files[t->n_files++];
}

static int parse_file(Parser *p, const char *path, Error *err) {
    char real[PATH_MAX];
    if (!realpath(path, real)) {
        if (p->depth == 0) return error_set(err, "%s: cannot open template: %s", path, strerror(errno));
        return error_set(err, "%s:%d: cannot include '%s': %s", p->file, p->line, path, strerror(errno));
    }
    for (int i = 0; i < p->depth; i++)
        if (strcmp(p->stack[i], real) == 0)
            return error_set(err, "%s:%d: '%s' includes itself (include cycle)", p->file, p->line, path);
    if (p->depth == MAX_INCLUDE_DEPTH)
        return error_set(err, "%s:%d: includes nested more than %d deep", p->file, p->line, MAX_INCLUDE_DEPTH);
    size_t len;
    char *text;
    Error inner;
    if (file_read_all(path, &text, &len, &inner))
        return p->depth == 0 ? error_set(err, "%s", inner.msg)
                             : error_set(err, "%s:%d: cannot include: %s", p->file, p->line, inner.msg);
    long bad = utf8_invalid_at(text, len);
    if (bad >= 0) {
        int line = 1;
        for (long i = 0; i < bad; i++) line += text[i] == '\n';
        free(text);
        return error_set(err, "%s:%d: invalid UTF-8 (or NUL) in template", path, line);
    }
    Parser child = *p;
    child.file = remember_file(p->t, path);
    child.line = 0;
    child.stack[child.depth++] = real;
    child.open = NULL;
    child.para = NULL;
    int status = 0;
    for (char *line = text, *next; line && status == 0; line = next) {
        next = strchr(line, '\n');
        if (next) *next++ = '\0';
        size_t n = strlen(line);
        if (n > 0 && line[n - 1] == '\r') line[n - 1] = '\0';
        child.line++;
        status = parse_line(&child, line, err);
    }
    if (status == 0 && child.open) {
        child.line = child.open->line;
        status = fail(&child, err, "block has no @end");
    }
    if (status == 0) flush_paragraph(&child);
    free(child.para);
    free(text);
    return status;
}

int template_load(Template *t, const char *path, Error *err) {
    memset(t, 0, sizeof *t);
    const char *slash = strrchr(path, '/');
    t->dir = slash ? dup_range(path, (size_t)(slash - path)) : dup_str(".");
    Parser p = {.t = t, .file = path};
    if (parse_file(&p, path, err)) {
        template_free(t);
        return -1;
    }
    return 0;
}

void template_free(Template *t) {
    for (int i = 0; i < t->n_blocks; i++) {
        Block *b = &t->blocks[i];
        free(b->text);
        for (int j = 0; j < b->n_options; j++) free(b->options[j].key), free(b->options[j].value);
        free(b->options);
        for (int j = 0; j < b->n_requires; j++) free(b->requires[j]);
        free(b->requires);
        free(b->reason);
    }
    free(t->blocks);
    for (int i = 0; i < t->n_files; i++) free(t->files[i]);
    free(t->files);
    free(t->title);
    free(t->subtitle);
    free(t->dir);
    memset(t, 0, sizeof *t);
}
