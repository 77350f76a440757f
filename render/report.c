// report.c: walks the template and assembles the report (see report.h): title page,
// numbered sections with their "not run" notices, paragraphs with placeholders filled,
// figures and tables (report_figure.c, report_table.c). Tested by tests/test_render_report.c.
#include "report.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "chart.h"
#include "numfmt.h"
#include "report_parts.h"

ReportOptions report_defaults(void) {
    return (ReportOptions){.template_path = "templates/report.tmpl", .dpi = 200};
}

// --- shared helpers (report_parts.h) --------------------------------------------------------

void block_where(const Block *b, const char *key, char *buf, size_t size) {
    const Option *o = key ? block_find_option(b, key) : NULL;
    snprintf(buf, size, "%s:%d", b->file, o ? o->line : b->line);
}

int option_text(Report *r, const Block *b, const char *key, char **out, Error *err) {
    *out = NULL;
    const char *v = block_option(b, key);
    if (!v) return 0;
    char where[PATH_MAX + 16];
    block_where(b, key, where, sizeof where);
    *out = expand_text(v, where, r->active, r->n_active, r->o->strict, err);
    return *out ? 0 : -1;
}

char **split_list(const char *s, int *n) {
    char **items = NULL;
    *n = 0;
    while (s && *s) {
        size_t len = strcspn(s, ",");
        const char *a = s, *z = s + len;
        while (a < z && (*a == ' ' || *a == '\t')) a++;
        while (z > a && (z[-1] == ' ' || z[-1] == '\t')) z--;
        if (z > a) {
            items = reallocCheck(items, (size_t)(*n + 1) * sizeof *items);
            items[*n] = mallocCheck((size_t)(z - a) + 1);
            memcpy(items[*n], a, (size_t)(z - a));
            items[(*n)++][z - a] = '\0';
        }
        s += len + (s[len] == ',');
    }
    return items;
}

void free_list(char **items, int n) {
    for (int i = 0; i < n; i++) free(items[i]);
    free(items);
}

// --- title page -----------------------------------------------------------------------------

// Names for the meta.csv keys the title page knows (both spellings in use: meta.h's probe
// keys and the shorter ones), in the order they are listed; other keys follow as they are.
static const struct {
    const char *key, *name;
} meta_names[] = {
    {"hw", "Machine id"}, {"hw_slug", "Machine id"}, {"cpu_model", "CPU"}, {"cpu", "CPU"},
    {"n_cpus", "Cores"}, {"cores", "Cores"}, {"mem_bytes", "Memory"}, {"memory_bytes", "Memory"},
    {"gpu", "GPU"}, {"blas", "BLAS"}, {"blas_core", "BLAS core"}, {"blas_choice", "BLAS choice"}, {"blas_threads", "BLAS threads"},
    {"compiler", "Compiler"}, {"cflags", "Compiler flags"}, {"git_commit", "Git commit"},
    {"profile", "Profile"}, {"date", "Date"},
};
#define N_META_NAMES (int)(sizeof meta_names / sizeof meta_names[0])

static const char *meta_display_name(const char *key) {
    for (int i = 0; i < N_META_NAMES; i++)
        if (strcmp(meta_names[i].key, key) == 0) return meta_names[i].name;
    return key;
}

static char *dup_string(const char *s) {
    char *d = mallocCheck(strlen(s) + 1);
    strcpy(d, s);
    return d;
}

static char *meta_display_value(const char *key, const char *value) {
    char buf[128];
    double v;
    if (value && (strcmp(key, "memory_bytes") == 0 || strcmp(key, "mem_bytes") == 0) && parse_number(value, &v)) {
        numfmt_format(v, (NumberFormat){FMT_BYTES, 3}, buf, sizeof buf);
        value = buf;
    }
    return dup_string(value ? value : "—");
}

// Every meta key of the runs: the well-known ones first, in a fixed order, then the others.
static char **meta_keys(const Report *r, int *n) {
    char **keys = NULL;
    *n = 0;
    for (int pass = 0; pass < 2; pass++)
        for (int i = 0; i < r->n_runs; i++) {
            const Table *m = &r->runs[i].meta;
            for (int row = 0; pass == 1 && row < m->n_rows; row++) {
                const char *key = table_cell(m, row, 0);
                if (meta_display_name(key) == key) category_index(&keys, n, key);
            }
            for (int k = 0; pass == 0 && k < N_META_NAMES; k++)
                if (rundata_meta(&r->runs[i], meta_names[k].key)) category_index(&keys, n, meta_names[k].key);
        }
    return keys;
}

static void title_page(Report *r, const char *title, const char *subtitle) {
    int n_keys;
    char **keys = meta_keys(r, &n_keys);
    PdfTable facts = {.n_cols = 1 + r->n_runs, .n_rows = n_keys};
    facts.headers = callocCheck((size_t)facts.n_cols, sizeof *facts.headers);
    facts.align = callocCheck((size_t)facts.n_cols, sizeof *facts.align);
    facts.cells = callocCheck((size_t)(n_keys * facts.n_cols + 1), sizeof *facts.cells);
    facts.headers[0] = dup_string("Run");
    for (int i = 0; i < r->n_runs; i++) {
        char head[300];
        snprintf(head, sizeof head, "%s%s", r->n_runs == 2 ? (i ? "B: " : "A: ") : "", r->runs[i].label);
        facts.headers[1 + i] = dup_string(head);
    }
    for (int k = 0; k < n_keys; k++) {
        facts.cells[k * facts.n_cols] = dup_string(meta_display_name(keys[k]));
        for (int i = 0; i < r->n_runs; i++)
            facts.cells[k * facts.n_cols + 1 + i] = meta_display_value(keys[k], rundata_meta(&r->runs[i], keys[k]));
    }
    char footnote[2 * PATH_MAX + 400], when[64];
    time_t now = time(NULL);
    strftime(when, sizeof when, "%Y-%m-%d %H:%M UTC", gmtime(&now));
    if (r->n_runs == 1)
        snprintf(footnote, sizeof footnote, "Rendered %s by bin/render from %s with the template %s.%s", when,
                 r->runs[0].dir, r->o->template_path, n_keys ? "" : " The run directory has no meta.csv.");
    else
        snprintf(footnote, sizeof footnote,
                 "Rendered %s by bin/render --compare from %s (A) and %s (B) with the template %s. Numbers in the "
                 "text read A → B; figures draw A solid and B dashed (hollow markers); tables give B/A ratios for "
                 "rows whose key columns match.",
                 when, r->runs[0].dir, r->runs[1].dir, r->o->template_path);
    utf8_sanitize(footnote); // it names directories, whose names may be any bytes
    pdf_title_page(r->pdf, title, subtitle, &facts, footnote);
    for (int i = 0; i < facts.n_cols; i++) free(facts.headers[i]);
    for (int i = 0; i < n_keys * facts.n_cols; i++) free(facts.cells[i]);
    free(facts.headers);
    free(facts.align);
    free(facts.cells);
    free_list(keys, n_keys);
}

// --- sections -------------------------------------------------------------------------------

// Why `run` cannot render section b (0 when it can): the first missing CSV's reason.
static int section_missing(const RunData *run, const Block *b, char *reason, size_t size) {
    int missing = 0;
    for (int i = 0; i < b->n_requires; i++) {
        if (rundata_has(run, b->requires[i])) continue;
        if (missing++ == 0) rundata_missing_reason(run, b->requires[i], b->reason, reason, size);
    }
    return missing;
}

// Keep the runs in `from` that have every CSV the section needs, write the heading, and
// notices for the runs that lack some. A section that did not run at all does not start a
// page of its own.
static void enter_section(Report *r, const Block *b, const char *number, RunData **from, int n_from) {
    char reasons[2][600];
    int missing[2] = {0, 0};
    r->n_active = 0;
    for (int i = 0; i < n_from; i++) {
        missing[i] = section_missing(from[i], b, reasons[i], sizeof reasons[i]);
        if (!missing[i]) r->active[r->n_active++] = from[i];
    }
    pdf_heading(r->pdf, b->kind == BLOCK_SECTION ? 1 : 2, number, b->text, r->n_active == 0);
    if (r->n_runs == 1 || n_from == 1) {
        if (missing[0]) pdf_notice(r->pdf, "Not run:", reasons[0]);
        return;
    }
    if (missing[0] && missing[1] && strcmp(reasons[0], reasons[1]) == 0) {
        pdf_notice(r->pdf, "Not run on either machine:", reasons[0]);
        return;
    }
    for (int i = 0; i < n_from; i++)
        if (missing[i]) {
            char label[300];
            snprintf(label, sizeof label, "Not run on %s:", from[i]->label);
            pdf_notice(r->pdf, label, reasons[i]);
        }
}

static int render_paragraph(Report *r, const Block *b, Error *err) {
    char where[PATH_MAX + 16];
    block_where(b, NULL, where, sizeof where);
    char *text = expand_text(b->text, where, r->active, r->n_active, r->o->strict, err);
    if (!text) return -1;
    pdf_paragraph(r->pdf, text, b->bullet);
    free(text);
    return 0;
}

static int walk_template(Report *r, Error *err) {
    RunData *all[2] = {&r->runs[0], &r->runs[1]}, *section_runs[2] = {all[0], all[1]};
    int n_section = r->n_runs, skip_level = 0, subsection = 0;
    r->n_active = r->n_runs;
    r->active[0] = all[0];
    r->active[1] = all[1];
    for (int i = 0; i < r->t->n_blocks; i++) {
        const Block *b = &r->t->blocks[i];
        if (b->kind == BLOCK_SECTION || b->kind == BLOCK_SUBSECTION) {
            int level = b->kind == BLOCK_SECTION ? 1 : 2;
            if (skip_level == 1 && level == 2) continue; // inside a section that did not run
            skip_level = 0;
            char number[32];
            if (level == 1) snprintf(number, sizeof number, "%d", ++r->section), subsection = 0;
            else snprintf(number, sizeof number, "%d.%d", r->section, ++subsection);
            enter_section(r, b, number, level == 1 ? all : section_runs, level == 1 ? r->n_runs : n_section);
            if (level == 1) {
                n_section = r->n_active;
                memcpy(section_runs, r->active, sizeof section_runs);
            }
            if (r->n_active == 0) skip_level = level;
            continue;
        }
        if (skip_level) continue;
        int status = 0;
        switch (b->kind) {
        case BLOCK_PARAGRAPH: status = render_paragraph(r, b, err); break;
        case BLOCK_FIGURE: status = render_figure(r, b, err); break;
        case BLOCK_TABLE: status = render_table(r, b, err); break;
        case BLOCK_PAGEBREAK: pdf_page_break(r->pdf); break;
        default: break;
        }
        if (status) return -1;
    }
    return 0;
}

// --- entry points ---------------------------------------------------------------------------

// The figures directory: created when missing, and it must be writable (the PNGs are
// written from worker threads, where a failure could only end the program).
static int make_dir(const char *path, Error *err) {
    if (mkdir(path, 0777) != 0 && errno != EEXIST) return error_set(err, "%s: cannot create directory: %s", path, strerror(errno));
    if (access(path, W_OK) != 0) return error_set(err, "%s: cannot write there: %s", path, strerror(errno));
    return 0;
}

// The directory part of path ("." when none), as a check that output can go there.
static int check_parent_dir(const char *path, Error *err) {
    char dir[PATH_MAX];
    const char *slash = strrchr(path, '/');
    snprintf(dir, sizeof dir, "%.*s", slash ? (int)(slash - path) : 1, slash ? path : ".");
    if (slash == path) snprintf(dir, sizeof dir, "/");
    struct stat st;
    if (stat(dir, &st) != 0 || !S_ISDIR(st.st_mode)) return error_set(err, "%s: output directory %s does not exist", path, dir);
    if (access(dir, W_OK) != 0) return error_set(err, "%s: cannot write to %s: %s", path, dir, strerror(errno));
    return 0;
}

static int render(const ReportOptions *o, const char **dirs, int n_runs, const char *out_path, Error *err) {
    Report r = {.o = o, .n_runs = n_runs};
    Template t;
    if (o->dpi < 200) return error_set(err, "--dpi %g: figures need at least 200 dpi", o->dpi);
    if (check_parent_dir(out_path, err) || template_load(&t, o->template_path, err)) return -1;
    r.t = &t;
    int status = 0, opened = 0;
    for (; opened < n_runs && status == 0; opened++) status = rundata_open(&r.runs[opened], dirs[opened], t.dir, err);
    if (status) opened--;
    if (status == 0 && n_runs == 1) {
        if (o->figures_dir) snprintf(r.figures_dir, sizeof r.figures_dir, "%s", o->figures_dir);
        else snprintf(r.figures_dir, sizeof r.figures_dir, "%s/figures", dirs[0]);
        status = make_dir(r.figures_dir, err);
    }
    if (status == 0 && !(r.pdf = pdf_open(err))) status = -1;
    char *title = NULL, *subtitle = NULL;
    if (status == 0) {
        RunData *all[2] = {&r.runs[0], &r.runs[1]};
        char where[PATH_MAX + 16];
        snprintf(where, sizeof where, "%s (@title)", o->template_path);
        title = expand_text(t.title ? t.title : "inferlab lab report", where, all, n_runs, o->strict, err);
        snprintf(where, sizeof where, "%s (@subtitle)", o->template_path);
        if (title && t.subtitle) subtitle = expand_text(t.subtitle, where, all, n_runs, o->strict, err);
        if (!title || (t.subtitle && !subtitle)) status = -1;
    }
    if (status == 0) {
        char compare_line[700];
        snprintf(compare_line, sizeof compare_line, "%s (A) vs %s (B)", r.runs[0].label, n_runs == 2 ? r.runs[1].label : "");
        const char *sub = subtitle ? subtitle : n_runs == 2 ? compare_line : r.runs[0].label;
        pdf_set_info(r.pdf, title, sub);
        title_page(&r, title, sub);
        status = walk_template(&r, err);
    }
    if (status == 0 && n_runs == 2) status = render_ratio_summary(&r, err);
    if (status == 0) status = draw_figures(&r, err);
    if (status == 0) status = pdf_save(r.pdf, out_path, err);
    free_figure_jobs(&r);
    free(title);
    free(subtitle);
    pdf_close(r.pdf);
    free_list(r.figure_ids, r.n_figure_ids);
    free(r.figure_lines);
    for (int i = 0; i < opened; i++) rundata_close(&r.runs[i]);
    template_free(&t);
    return status;
}

int report_render(const ReportOptions *o, const char *run_dir, Error *err) {
    char out[PATH_MAX];
    if (o->out_path) snprintf(out, sizeof out, "%s", o->out_path);
    else snprintf(out, sizeof out, "%s/report.pdf", run_dir);
    return render(o, &run_dir, 1, out, err);
}

// The last component of a directory path, without trailing slashes.
static void base_name(const char *dir, char *buf, size_t size) {
    size_t n = strlen(dir);
    while (n > 1 && dir[n - 1] == '/') n--;
    size_t start = n;
    while (start > 0 && dir[start - 1] != '/') start--;
    snprintf(buf, size, "%.*s", (int)(n - start), dir + start);
}

char *compare_default_path(const char *dir_a, const char *dir_b) {
    char a[256], b[256], parent[PATH_MAX];
    base_name(dir_a, a, sizeof a);
    base_name(dir_b, b, sizeof b);
    size_t n = strlen(dir_a);
    while (n > 1 && dir_a[n - 1] == '/') n--;
    while (n > 0 && dir_a[n - 1] != '/') n--;
    snprintf(parent, sizeof parent, "%.*s", (int)n, dir_a);
    size_t size = strlen(parent) + strlen(a) + strlen(b) + 32;
    char *path = mallocCheck(size);
    snprintf(path, size, "%scompare-%s-vs-%s.pdf", parent, a, b);
    return path;
}

int report_compare(const ReportOptions *o, const char *dir_a, const char *dir_b, Error *err) {
    const char *dirs[2] = {dir_a, dir_b};
    char *out = o->out_path ? NULL : compare_default_path(dir_a, dir_b);
    int status = render(o, dirs, 2, o->out_path ? o->out_path : out, err);
    free(out);
    return status;
}
