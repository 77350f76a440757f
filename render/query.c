// query.c: row filters, placeholder expressions and text expansion (see query.h).
// Tested by tests/test_render_query.c.
#include "query.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "numfmt.h"

// --- filters ----------------------------------------------------------------------------

static char *dup_trimmed(const char *s, size_t n) {
    while (n > 0 && (*s == ' ' || *s == '\t')) s++, n--;
    while (n > 0 && (s[n - 1] == ' ' || s[n - 1] == '\t')) n--;
    char *d = mallocCheck(n + 1);
    memcpy(d, s, n);
    d[n] = '\0';
    return d;
}

// Split "col OP value" at its operator.
static int split_condition(const char *s, size_t n, size_t *op_at, CompareOp *op, size_t *op_len) {
    for (size_t i = 0; i < n; i++) {
        char c = s[i], d = i + 1 < n ? s[i + 1] : '\0';
        if (c == '!' && d == '=') *op = OP_NE, *op_len = 2;
        else if (c == '<') *op = d == '=' ? OP_LE : OP_LT, *op_len = d == '=' ? 2 : 1;
        else if (c == '>') *op = d == '=' ? OP_GE : OP_GT, *op_len = d == '=' ? 2 : 1;
        else if (c == '=') *op = OP_EQ, *op_len = 1;
        else continue;
        *op_at = i;
        return 0;
    }
    return -1;
}

static int parse_condition(Condition *c, const char *s, size_t n, const Table *t, Error *err) {
    size_t op_at, op_len;
    char *text = dup_trimmed(s, n);
    if (split_condition(text, strlen(text), &op_at, &c->op, &op_len)) {
        error_set(err, "condition '%s' has no operator (=, !=, <, <=, >, >=)", text);
        free(text);
        return -1;
    }
    char *col = dup_trimmed(text, op_at);
    c->col = table_column(t, col);
    if (c->col < 0) {
        char cols[300];
        table_column_list(t, cols, sizeof cols);
        error_set(err, "unknown column '%s' in %s (columns: %s)", col, t->path, cols);
        free(col);
        free(text);
        return -1;
    }
    free(col);
    const char *v = text + op_at + op_len;
    int alternatives = c->op == OP_EQ || c->op == OP_NE;
    c->n_values = 0;
    for (;;) {
        const char *bar = alternatives ? strchr(v, '|') : NULL;
        size_t len = bar ? (size_t)(bar - v) : strlen(v);
        if (c->n_values == MAX_ALTERNATIVES) {
            error_set(err, "condition '%s' has more than %d alternatives", text, MAX_ALTERNATIVES);
            free(text);
            return -1;
        }
        char *value = dup_trimmed(v, len);
        if (!parse_number(value, &c->numbers[c->n_values])) c->numbers[c->n_values] = NAN;
        c->values[c->n_values++] = value;
        if (!bar) break;
        v = bar + 1;
    }
    if (!alternatives && isnan(c->numbers[0])) {
        error_set(err, "condition '%s' compares with '%s', which is not a number", text, c->values[0]);
        free(text);
        return -1;
    }
    free(text);
    return 0;
}

int filter_parse(Filter *f, const char *src, const Table *t, Error *err) {
    memset(f, 0, sizeof *f);
    for (const char *s = src; *s;) {
        const char *comma = strchr(s, ',');
        size_t len = comma ? (size_t)(comma - s) : strlen(s);
        size_t blank = strspn(s, " \t");
        if (blank < len) {
            if (f->n == MAX_CONDITIONS) {
                filter_free(f);
                return error_set(err, "more than %d conditions in '%s'", MAX_CONDITIONS, src);
            }
            if (parse_condition(&f->conds[f->n], s, len, t, err)) {
                f->n++; // free the values the failed condition kept
                filter_free(f);
                return -1;
            }
            f->n++;
        }
        s += len + (comma != NULL);
    }
    return 0;
}

int cells_equal(const char *cell, double cell_num, const char *value, double value_num) {
    if (!isnan(cell_num) && !isnan(value_num))
        return fabs(cell_num - value_num) <= 1e-9 * fmax(fabs(cell_num), fabs(value_num));
    return strcmp(cell, value) == 0;
}

static int condition_holds(const Condition *c, const Table *t, int row) {
    const char *cell = table_cell(t, row, c->col);
    double x = table_value(t, row, c->col);
    if (c->op == OP_EQ || c->op == OP_NE) {
        int any = 0;
        for (int i = 0; i < c->n_values && !any; i++) any = cells_equal(cell, x, c->values[i], c->numbers[i]);
        return c->op == OP_EQ ? any : !any;
    }
    double v = c->numbers[0];
    if (isnan(x)) return 0;
    switch (c->op) {
    case OP_LT: return x < v;
    case OP_LE: return x <= v;
    case OP_GT: return x > v;
    default: return x >= v;
    }
}

int filter_match(const Filter *f, const Table *t, int row) {
    for (int i = 0; i < f->n; i++)
        if (!condition_holds(&f->conds[i], t, row)) return 0;
    return 1;
}

void filter_free(Filter *f) {
    for (int i = 0; i < f->n; i++)
        for (int j = 0; j < f->conds[i].n_values; j++) free(f->conds[i].values[j]);
    f->n = 0;
}

// --- expressions ------------------------------------------------------------------------

typedef struct {
    const char *src, *p;
    RunData *run;
    Error *err;
} Parser;

static int fail(Parser *q, int status, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int fail(Parser *q, int status, const char *fmt, ...) {
    char msg[sizeof q->err->msg];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    error_set(q->err, "in {%s}: %s", q->src, msg);
    return status;
}

static void skip_space(Parser *q) {
    while (*q->p == ' ' || *q->p == '\t') q->p++;
}

static int is_name_char(char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
           c == '.' || c == '/';
}

static size_t read_name(Parser *q, char *buf, size_t size) {
    size_t n = 0;
    while (is_name_char(q->p[n])) n++;
    snprintf(buf, size, "%.*s", (int)n, q->p);
    q->p += n;
    return n;
}

static int expect(Parser *q, char c) {
    skip_space(q);
    if (*q->p != c) {
        return fail(q, QUERY_ERROR, "expected '%c'", c);
    }
    q->p++;
    return QUERY_OK;
}

// A reference FILE:COLUMN[FILTER], resolved to its table, column and matching rows.
typedef struct {
    const Table *table;
    int col;
    int *rows, n_rows;
    char desc[400]; // "kv.csv:x[mode=cache]", for messages
} Ref;

// The text up to ')' of fn(TEXT), trimmed (malloc'd), past the ')'.
static int read_argument(Parser *q, const char *fn, char **arg) {
    skip_space(q);
    const char *close = strchr(q->p, ')');
    if (!close) return fail(q, QUERY_ERROR, "%s( without ')'", fn);
    *arg = dup_trimmed(q->p, (size_t)(close - q->p));
    q->p = close + 1;
    return QUERY_OK;
}

// --- named quantities ---------------------------------------------------------------------
// quantities.csv (beside the templates: name, source, also, what) gives a number that several
// CSVs carry one source: {q(stream_triad_1t)} evaluates `source`, and a placeholder that
// reads a cell listed under `also` (FILE:COLUMN[FILTER], space-separated) is an error, so the
// report cannot print STREAM from two measurements that disagree.

#define QUANTITIES "quantities.csv"

// The quantity whose `also` list holds a ref to r's column and rows, or -1. *alias gets the entry.
static int aliased_quantity(Parser *q, const Ref *r, const Table *qs, char *alias, size_t size) {
    int c_also = table_column(qs, "also");
    for (int row = 0; c_also >= 0 && row < qs->n_rows; row++) {
        const char *list = table_cell(qs, row, c_also);
        while (*list) {
            size_t n = strcspn(list, " ");
            snprintf(alias, size, "%.*s", (int)n, list);
            list += n + (list[n] == ' ');
            if (!n) continue;
            char *colon = strchr(alias, ':'), *open = strchr(alias, '[');
            if (!colon) continue;
            Error e;
            const Table *t = rundata_table(q->run, (*colon = '\0', alias), &e);
            *colon = ':';
            if (t != r->table) continue;
            size_t col_len = open ? (size_t)(open - colon - 1) : strlen(colon + 1);
            if (strncmp(r->table->names[r->col], colon + 1, col_len) != 0 || r->table->names[r->col][col_len]) continue;
            Filter f = {0};
            char *src = open ? dup_trimmed(open + 1, strcspn(open + 1, "]")) : NULL;
            int bad = src && filter_parse(&f, src, t, &e), hit = 0;
            free(src);
            for (int i = 0; !bad && !hit && i < r->n_rows; i++) hit = filter_match(&f, t, r->rows[i]);
            filter_free(&f);
            if (hit) return row;
        }
    }
    return -1;
}

static int check_not_aliased(Parser *q, const Ref *r) {
    Error e;
    const Table *qs = rundata_table(q->run, QUANTITIES, &e);
    if (!qs && !strstr(e.msg, "unknown file")) return fail(q, QUERY_ERROR, "%s", e.msg); // malformed
    if (!qs) return QUERY_OK; // a template directory without named quantities
    char alias[400];
    int row = aliased_quantity(q, r, qs, alias, sizeof alias);
    if (row < 0) return QUERY_OK;
    const char *name = table_cell(qs, row, 0);
    int c_what = table_column(qs, "what");
    return fail(q, QUERY_ERROR, "%s repeats the quantity '%s'%s%s%s, which the report quotes from one source: "
                "write q(%s)", r->desc, name, c_what >= 0 ? " (" : "", c_what >= 0 ? table_cell(qs, row, c_what) : "",
                c_what >= 0 ? ")" : "", name);
}

int query_check_shown(RunData *run, const char *file, const Filter *where, int col, Error *err) {
    Ref r = {0};
    if (!(r.table = rundata_table(run, file, err))) return QUERY_ERROR;
    r.col = col;
    r.rows = mallocCheck((size_t)(r.table->n_rows + 1) * sizeof *r.rows);
    for (int i = 0; i < r.table->n_rows; i++)
        if (filter_match(where, r.table, i)) r.rows[r.n_rows++] = i;
    snprintf(r.desc, sizeof r.desc, "%s:%s", file, r.table->names[col]);
    Parser q = {r.desc, r.desc, run, err};
    int status = check_not_aliased(&q, &r);
    free(r.rows);
    return status;
}

// q(NAME): the quantity's one source, evaluated in this run.
static int parse_quantity(Parser *q, Value *out) {
    char *name;
    if (read_argument(q, "q", &name)) return QUERY_ERROR;
    Error e;
    const Table *qs = rundata_table(q->run, QUANTITIES, &e);
    int row = -1, c_source = qs ? table_column(qs, "source") : -1;
    for (int i = 0; qs && i < qs->n_rows && row < 0; i++)
        if (strcmp(table_cell(qs, i, 0), name) == 0) row = i;
    int status;
    if (!qs) status = fail(q, QUERY_ERROR, "q(%s): %s", name, e.msg);
    else if (row < 0 || c_source < 0) status = fail(q, QUERY_ERROR, "no quantity '%s' in %s", name, QUANTITIES);
    else {
        status = query_eval(table_cell(qs, row, c_source), q->run, out, &e);
        if (status != QUERY_OK) status = fail(q, status, "q(%s): %s", name, e.msg);
    }
    free(name);
    return status;
}

static int parse_ref(Parser *q, const char *file, Ref *r) {
    memset(r, 0, sizeof *r);
    q->p++; // ':'
    char column[128];
    if (read_name(q, column, sizeof column) == 0) return fail(q, QUERY_ERROR, "expected a column name after '%s:'", file);
    Error load_err;
    r->table = rundata_table(q->run, file, &load_err);
    if (!r->table) return fail(q, QUERY_ERROR, "%s", load_err.msg);
    r->col = table_column(r->table, column);
    if (r->col < 0) {
        char cols[300];
        table_column_list(r->table, cols, sizeof cols);
        return fail(q, QUERY_ERROR, "unknown column '%s' in %s (columns: %s)", column, file, cols);
    }
    Filter f = {0};
    snprintf(r->desc, sizeof r->desc, "%s:%s", file, column);
    if (*q->p == '[') {
        const char *close = strchr(q->p, ']');
        if (!close) return fail(q, QUERY_ERROR, "%s", "'[' without ']'");
        char *src = dup_trimmed(q->p + 1, (size_t)(close - q->p - 1));
        Error ferr;
        int bad = filter_parse(&f, src, r->table, &ferr);
        size_t used = strlen(r->desc);
        snprintf(r->desc + used, sizeof r->desc - used, "[%s]", src);
        free(src);
        if (bad) return fail(q, QUERY_ERROR, "%s", ferr.msg);
        q->p = close + 1;
    }
    r->rows = mallocCheck((size_t)(r->table->n_rows + 1) * sizeof *r->rows);
    for (int i = 0; i < r->table->n_rows; i++)
        if (filter_match(&f, r->table, i)) r->rows[r->n_rows++] = i;
    filter_free(&f);
    return check_not_aliased(q, r);
}

static int cell_value(Parser *q, Ref *r, Value *out) {
    if (r->n_rows == 0) return fail(q, QUERY_NO_DATA, "no row of %s", r->desc);
    if (r->n_rows > 1) {
        return fail(q, QUERY_ERROR, "%d rows match %s: add key values to the filter, or use min/max/mean",
                    r->n_rows, r->desc);
    }
    const char *cell = table_cell(r->table, r->rows[0], r->col);
    out->number = table_value(r->table, r->rows[0], r->col);
    out->is_text = isnan(out->number) && strcmp(cell, "nan") != 0 && strcmp(cell, "NaN") != 0;
    snprintf(out->text, sizeof out->text, "%s", cell);
    return QUERY_OK;
}

static int compare_doubles(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static int aggregate(Parser *q, const char *fn, Ref *r, Value *out) {
    out->is_text = 0;
    if (strcmp(fn, "count") == 0) {
        out->number = r->n_rows;
        return QUERY_OK;
    }
    double *v = mallocCheck((size_t)(r->n_rows + 1) * sizeof *v);
    int n = 0;
    for (int i = 0; i < r->n_rows; i++) {
        const char *cell = table_cell(r->table, r->rows[i], r->col);
        double x = table_value(r->table, r->rows[i], r->col);
        if (cell[0] == '\0') continue; // empty cells are missing values
        if (isnan(x) && strcmp(cell, "nan") != 0) {
            free(v);
            return fail(q, QUERY_ERROR, "%s() over %s: '%s' (line %d) is not a number", fn, r->desc, cell,
                        r->table->lines[r->rows[i]]);
        }
        if (!isnan(x)) v[n++] = x;
    }
    if (n == 0) {
        free(v);
        return fail(q, QUERY_NO_DATA, "no numbers in %s", r->desc);
    }
    double acc = strcmp(fn, "min") == 0 ? INFINITY : strcmp(fn, "max") == 0 ? -INFINITY : 0;
    for (int i = 0; i < n; i++) {
        if (strcmp(fn, "min") == 0) acc = fmin(acc, v[i]);
        else if (strcmp(fn, "max") == 0) acc = fmax(acc, v[i]);
        else acc += v[i];
    }
    if (strcmp(fn, "mean") == 0) acc /= n;
    if (strcmp(fn, "median") == 0) {
        qsort(v, (size_t)n, sizeof *v, compare_doubles);
        acc = n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
    }
    out->number = acc;
    free(v);
    return QUERY_OK;
}

static int parse_expr(Parser *q, Value *out);

// at_max(REF, COLUMN) / at_min(REF, COLUMN): REF's cell in the row of REF's rows where
// COLUMN is largest / smallest (the first such row), e.g. the batch size with the best throughput.
static int value_at_extreme(Parser *q, const char *fn, Ref *r, Value *out) {
    skip_space(q);
    char column[128];
    if (read_name(q, column, sizeof column) == 0) return fail(q, QUERY_ERROR, "%s() needs FILE:COLUMN, COLUMN", fn);
    int col = table_column(r->table, column);
    if (col < 0) {
        char cols[300];
        table_column_list(r->table, cols, sizeof cols);
        return fail(q, QUERY_ERROR, "%s(): unknown column '%s' in %s (columns: %s)", fn, column, r->desc, cols);
    }
    int best = -1, want_max = strcmp(fn, "at_max") == 0;
    double best_v = 0;
    for (int i = 0; i < r->n_rows; i++) {
        double v = table_value(r->table, r->rows[i], col);
        if (isnan(v)) continue;
        if (best < 0 || (want_max ? v > best_v : v < best_v)) best = r->rows[i], best_v = v;
    }
    if (best < 0) return fail(q, QUERY_NO_DATA, "no numbers in column %s of %s", column, r->desc);
    r->rows[0] = best;
    r->n_rows = 1;
    return cell_value(q, r, out);
}

// within(X, LOW, HIGH): -1 when X < LOW, 1 when X > HIGH, else 0 — the index that the `pick`
// format turns into a word, so that a finding's "falls short of" / "matches" / "exceeds"
// follows the data.
static int parse_within(Parser *q, Value *out) {
    Value v[3];
    for (int i = 0; i < 3; i++) {
        int status = parse_expr(q, &v[i]);
        if (status == QUERY_OK) status = expect(q, i < 2 ? ',' : ')');
        if (status != QUERY_OK) return status;
        if (v[i].is_text) return fail(q, QUERY_ERROR, "within() needs numbers, but '%s' is text", v[i].text);
    }
    if (v[1].number > v[2].number) return fail(q, QUERY_ERROR, "within(X, LOW, HIGH) with LOW > HIGH");
    if (isnan(v[0].number)) return fail(q, QUERY_NO_DATA, "%s", "within(): X is not a number");
    memset(out, 0, sizeof *out);
    out->number = v[0].number < v[1].number ? -1 : v[0].number > v[2].number ? 1 : 0;
    return QUERY_OK;
}

static int parse_meta(Parser *q, Value *out) {
    char *key;
    if (read_argument(q, "meta", &key)) return QUERY_ERROR;
    const char *v = rundata_meta(q->run, key);
    if (!v) {
        int status = fail(q, QUERY_NO_DATA, "meta.csv has no key '%s'", key);
        free(key);
        return status;
    }
    free(key);
    snprintf(out->text, sizeof out->text, "%s", v);
    out->is_text = !parse_number(v, &out->number);
    return QUERY_OK;
}

static int parse_name_factor(Parser *q, Value *out) {
    char name[256];
    read_name(q, name, sizeof name);
    static const char *aggs[] = {"min", "max", "mean", "median", "sum", "count", "at_max", "at_min"};
    Ref r = {0};
    int status;
    if (*q->p == ':') {
        status = parse_ref(q, name, &r);
        if (status == QUERY_OK) status = cell_value(q, &r, out);
        free(r.rows);
        return status;
    }
    skip_space(q);
    if (*q->p != '(') return fail(q, QUERY_ERROR, "expected FILE:COLUMN or a function call, got '%s'", name);
    q->p++;
    if (strcmp(name, "meta") == 0) return parse_meta(q, out);
    if (strcmp(name, "within") == 0) return parse_within(q, out);
    if (strcmp(name, "q") == 0) return parse_quantity(q, out);
    int known = 0;
    for (size_t i = 0; i < sizeof aggs / sizeof aggs[0]; i++) known |= strcmp(name, aggs[i]) == 0;
    if (!known)
        return fail(q, QUERY_ERROR,
                    "unknown function '%s' (min, max, mean, median, sum, count, at_max, at_min, within, q, meta)", name);
    skip_space(q);
    char file[256];
    read_name(q, file, sizeof file);
    if (*q->p != ':') return fail(q, QUERY_ERROR, "%s() needs FILE:COLUMN", name);
    status = parse_ref(q, file, &r);
    int extreme = strncmp(name, "at_", 3) == 0;
    if (status == QUERY_OK && extreme) status = expect(q, ',');
    if (status == QUERY_OK && extreme) status = value_at_extreme(q, name, &r, out);
    if (status == QUERY_OK) status = expect(q, ')');
    if (status == QUERY_OK && !extreme) status = aggregate(q, name, &r, out);
    free(r.rows);
    return status;
}

static int parse_factor(Parser *q, Value *out) {
    skip_space(q);
    memset(out, 0, sizeof *out);
    char c = *q->p;
    if (c == '-') {
        q->p++;
        int status = parse_factor(q, out);
        if (status == QUERY_OK && out->is_text) return fail(q, QUERY_ERROR, "%s", "'-' before text");
        out->number = -out->number;
        return status;
    }
    if (c == '(') {
        q->p++;
        int status = parse_expr(q, out);
        return status == QUERY_OK ? expect(q, ')') : status;
    }
    if ((c >= '0' && c <= '9') || c == '.') {
        char *end;
        out->number = strtod(q->p, &end);
        q->p = end;
        return QUERY_OK;
    }
    if (is_name_char(c)) return parse_name_factor(q, out);
    return fail(q, QUERY_ERROR, "unexpected '%s'", q->p);
}

static int apply(Parser *q, char op, Value *acc, const Value *rhs) {
    if (acc->is_text || rhs->is_text) {
        return fail(q, QUERY_ERROR, "'%c' needs numbers, but '%s' is text", op, acc->is_text ? acc->text : rhs->text);
    }
    switch (op) {
    case '+': acc->number += rhs->number; break;
    case '-': acc->number -= rhs->number; break;
    case '*': acc->number *= rhs->number; break;
    default: acc->number /= rhs->number; break;
    }
    return QUERY_OK;
}

// One precedence level: operands from `next`, joined by the operators in `ops`.
static int parse_level(Parser *q, Value *out, const char *ops, int (*next)(Parser *, Value *)) {
    int status = next(q, out);
    for (;;) {
        if (status != QUERY_OK) return status;
        skip_space(q);
        char op = *q->p;
        if (!op || !strchr(ops, op)) return QUERY_OK;
        q->p++;
        Value rhs;
        status = next(q, &rhs);
        if (status == QUERY_OK) status = apply(q, op, out, &rhs);
    }
}

static int parse_term(Parser *q, Value *out) { return parse_level(q, out, "*/", parse_factor); }
static int parse_expr(Parser *q, Value *out) { return parse_level(q, out, "+-", parse_term); }

int query_eval(const char *expr, RunData *run, Value *out, Error *err) {
    Parser q = {.src = expr, .p = expr, .run = run, .err = err};
    int status = parse_expr(&q, out);
    skip_space(&q);
    if (status == QUERY_OK && *q.p) status = fail(&q, QUERY_ERROR, "unexpected '%s'", q.p);
    return status;
}

// The '|' that starts the format: the last one outside [...] brackets, or NULL.
static const char *format_bar(const char *s) {
    const char *bar = NULL;
    int depth = 0;
    for (; *s; s++) {
        if (*s == '[') depth++;
        else if (*s == ']') depth--;
        else if (*s == '|' && depth == 0) bar = s;
    }
    return bar;
}

// Append a unit to a formatted number: straight after an si / bytes prefix ("1.2 G" + "B/s"),
// else after a space, except for × and % ("10.6×").
static void append_unit(char *buf, size_t size, FormatKind kind, const char *unit) {
    if (!*unit) return;
    int tight = kind == FMT_SI || strncmp(unit, "×", strlen("×")) == 0 || unit[0] == '%';
    size_t used = strlen(buf);
    snprintf(buf + used, size - used, "%s%s", tight ? "" : " ", unit);
}

// "| pick BELOW / WITHIN / ABOVE": the word for a within() result (-1, 0, 1).
static int pick_word(const char *placeholder, const Value *v, const char *words, char *buf, size_t size, Error *err) {
    const char *w[4] = {words};
    int n = 1;
    for (const char *s = words; *s && n < 4; s++)
        if (*s == '/') w[n++] = s + 1;
    int index = v->is_text ? -1 : v->number == -1 ? 0 : v->number == 0 ? 1 : v->number == 1 ? 2 : -1;
    if (n != 3) return error_set(err, "in {%s}: pick needs three words: BELOW / WITHIN / ABOVE", placeholder);
    if (index < 0)
        return error_set(err, "in {%s}: pick needs a within() result (-1, 0 or 1), got '%s'", placeholder,
                         v->is_text ? v->text : "a number");
    size_t len = index < 2 ? (size_t)(w[index + 1] - 1 - w[index]) : strlen(w[index]);
    char *word = dup_trimmed(w[index], len);
    snprintf(buf, size, "%s", word);
    free(word);
    return QUERY_OK;
}

int query_format(const char *placeholder, RunData *run, char *buf, size_t size, Error *err) {
    const char *bar = format_bar(placeholder);
    size_t len = bar ? (size_t)(bar - placeholder) : strlen(placeholder);
    char *expr = dup_trimmed(placeholder, len);
    // "| FORMAT [UNIT]": the first word is the number format, the rest a unit
    const char *spec = bar ? bar + 1 : "";
    while (*spec == ' ') spec++;
    size_t spec_len = strcspn(spec, " ");
    char *format = dup_trimmed(spec, spec_len), *unit = dup_trimmed(spec + spec_len, strlen(spec + spec_len));
    NumberFormat fmt = {FMT_SIG, 3};
    int status = QUERY_OK, pick = strcmp(format, "pick") == 0;
    if (!pick && numfmt_parse(format, &fmt)) {
        error_set(err, "in {%s}: unknown number format '%s' (3, .2f, int, si, bytes, percent, pick)", placeholder, format);
        status = QUERY_ERROR;
    }
    Value v;
    if (status == QUERY_OK) status = query_eval(expr, run, &v, err);
    if (status == QUERY_OK && pick) status = pick_word(placeholder, &v, unit, buf, size, err);
    else if (status == QUERY_OK && v.is_text) snprintf(buf, size, "%s", v.text);
    else if (status == QUERY_OK) {
        numfmt_format(v.number, fmt, buf, size);
        append_unit(buf, size, fmt.kind, unit);
    }
    free(expr);
    free(format);
    free(unit);
    return status;
}

// --- text expansion ---------------------------------------------------------------------

typedef struct {
    char *s;
    size_t n, cap;
} Buf;

static void buf_add(Buf *b, const char *s, size_t n) {
    if (b->n + n + 1 > b->cap) {
        b->cap = 2 * (b->n + n + 1);
        b->s = reallocCheck(b->s, b->cap);
    }
    memcpy(b->s + b->n, s, n);
    b->n += n;
    b->s[b->n] = '\0';
}

// One placeholder's text for one run: the value, or "n/a" (with a warning) when there is no data.
static int placeholder_text(const char *ph, const char *where, RunData *run, int strict, char *out, size_t size,
                            Error *err) {
    Error e;
    int status = query_format(ph, run, out, size, &e);
    if (status == QUERY_NO_DATA && !strict) {
        fprintf(stderr, "warning: %s: %s (in %s); shown as n/a\n", where, e.msg, run->dir);
        snprintf(out, size, "n/a");
        return QUERY_OK;
    }
    if (status != QUERY_OK) return error_set(err, "%s: %s", where, e.msg);
    return QUERY_OK;
}

char *expand_text(const char *text, const char *where, RunData **runs, int n_runs, int strict, Error *err) {
    Buf b = {0};
    buf_add(&b, "", 0);
    for (const char *s = text; *s;) {
        if ((s[0] == '{' && s[1] == '{') || (s[0] == '}' && s[1] == '}')) {
            buf_add(&b, s, 1);
            s += 2;
            continue;
        }
        if (*s == '}') {
            error_set(err, "%s: '}' without '{' (write }} for a literal brace)", where);
            free(b.s);
            return NULL;
        }
        if (*s != '{') {
            size_t n = strcspn(s, "{}");
            buf_add(&b, s, n);
            s += n;
            continue;
        }
        const char *close = strchr(s, '}');
        if (!close) {
            error_set(err, "%s: '{' without '}' (write {{ for a literal brace)", where);
            free(b.s);
            return NULL;
        }
        char *ph = dup_trimmed(s + 1, (size_t)(close - s - 1));
        char values[MAX_RUNS][512];
        int bad = n_runs > MAX_RUNS ? error_set(err, "%s: more than %d runs", where, MAX_RUNS) : 0, same = 1;
        for (int i = 0; i < n_runs && !bad; i++) {
            bad = placeholder_text(ph, where, runs[i], strict, values[i], sizeof values[i], err) != QUERY_OK;
            same &= bad || strcmp(values[i], values[0]) == 0;
        }
        free(ph);
        if (bad) {
            free(b.s);
            return NULL;
        }
        for (int i = 0; i < (same ? 1 : n_runs); i++) { // "a → b → c" in a comparison, once when all agree
            if (i) buf_add(&b, " → ", strlen(" → "));
            buf_add(&b, values[i], strlen(values[i]));
        }
        s = close + 1;
    }
    return b.s;
}
