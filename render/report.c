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

// display_names.csv's name for `key`, or NULL.
static const char *listed_name(const Report *r, const char *key) {
    const Table *t = r->display_names;
    for (int row = 0; t && row < t->n_rows; row++)
        if (strcmp(table_cell(t, row, 0), key) == 0) return table_cell(t, row, 1);
    return NULL;
}

const char *display_name(const Report *r, const char *column, char *buf, size_t size) {
    const char *listed = listed_name(r, column);
    snprintf(buf, size, "%s", listed ? listed : column);
    if (listed) return buf;
    for (char *c = buf; *c; c++)
        if (*c == '_') *c = ' ';
    return buf;
}

const char *value_name(const Report *r, const char *column, const char *value) {
    char key[400];
    snprintf(key, sizeof key, "%s=%s", column, value);
    const char *listed = listed_name(r, key);
    return listed ? listed : value;
}

void append_series_value(const Report *r, const char *column, const char *value, char *buf, size_t size) {
    static const char *const switches[] = {"on", "off", "yes", "no", "true", "false"};
    char name[200];
    double v;
    int is_switch = 0;
    for (size_t i = 0; i < sizeof switches / sizeof switches[0]; i++) is_switch |= strcmp(value, switches[i]) == 0;
    size_t used = strlen(buf);
    const char *named = value_name(r, column, value); // a name for the value itself ("point=decode_mlp")
    if (named != value) snprintf(buf + used, size - used, "%s", named);
    else if (parse_number(value, &v)) snprintf(buf + used, size - used, "%s = %s", display_name(r, column, name, sizeof name), value);
    else if (is_switch) snprintf(buf + used, size - used, "%s %s", display_name(r, column, name, sizeof name), value);
    else snprintf(buf + used, size - used, "%s", value);
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
    {"cpu_uarch", "Microarchitecture"}, {"cpu_isa", "Widest vector ISA"}, {"llc_bytes", "Last-level cache"},
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
    if (value && (strcmp(key, "memory_bytes") == 0 || strcmp(key, "mem_bytes") == 0 || strcmp(key, "llc_bytes") == 0) &&
        parse_number(value, &v)) {
        numfmt_format(v, (NumberFormat){FMT_BYTES, 3}, buf, sizeof buf);
        value = buf;
    }
    return dup_string(value ? value : "—");
}

// The machine's meta keys that some run has, in meta_names' order. The experiments' own keys
// (models, hashes, seeds) are not the title page's: the template's appendix lists meta.csv
// whole. *n_other counts those keys, over all runs.
static char **meta_keys(const Report *r, int *n, int *n_other) {
    char **keys = NULL, **other = NULL;
    *n = *n_other = 0;
    for (int i = 0; i < r->n_runs; i++) {
        const Table *m = &r->runs[i].meta;
        for (int k = 0; k < N_META_NAMES; k++)
            if (rundata_meta(&r->runs[i], meta_names[k].key)) category_index(&keys, n, meta_names[k].key);
        for (int row = 0; row < m->n_rows; row++)
            if (meta_display_name(table_cell(m, row, 0)) == table_cell(m, row, 0))
                category_index(&other, n_other, table_cell(m, row, 0));
    }
    free_list(other, *n_other);
    return keys;
}

static void title_page(Report *r, const char *title, const char *subtitle) {
    int n_keys, n_other;
    char **keys = meta_keys(r, &n_keys, &n_other);
    PdfTable facts = {.n_cols = 1 + r->n_runs, .n_rows = n_keys};
    facts.headers = callocCheck((size_t)facts.n_cols, sizeof *facts.headers);
    facts.align = callocCheck((size_t)facts.n_cols, sizeof *facts.align);
    facts.cells = callocCheck((size_t)(n_keys * facts.n_cols + 1), sizeof *facts.cells);
    facts.headers[0] = dup_string("Run");
    for (int i = 0; i < r->n_runs; i++) {
        char head[300];
        if (r->compare) snprintf(head, sizeof head, "%c: %s", machine_letter(i), r->runs[i].label);
        else snprintf(head, sizeof head, "%s", r->runs[i].label);
        facts.headers[1 + i] = dup_string(head);
    }
    for (int k = 0; k < n_keys; k++) {
        facts.cells[k * facts.n_cols] = dup_string(meta_display_name(keys[k]));
        for (int i = 0; i < r->n_runs; i++)
            facts.cells[k * facts.n_cols + 1 + i] = meta_display_value(keys[k], rundata_meta(&r->runs[i], keys[k]));
    }
    char footnote[(MAX_RUNS + 1) * (PATH_MAX + 300)], when[64];
    time_t now = time(NULL);
    strftime(when, sizeof when, "%Y-%m-%d %H:%M UTC", gmtime(&now));
    if (!r->compare)
        snprintf(footnote, sizeof footnote, "Rendered %s by bin/render from %s with the template %s.%s", when,
                 r->runs[0].dir, r->o->template_path, n_keys ? "" : " The run directory has no meta.csv.");
    else {
        snprintf(footnote, sizeof footnote, "Rendered %s by bin/render --compare from", when);
        for (int i = 0; i < r->n_runs; i++)
            snprintf(footnote + strlen(footnote), sizeof footnote - strlen(footnote), "%s %s (%c)", i ? "," : "",
                     r->runs[i].dir, machine_letter(i));
        snprintf(footnote + strlen(footnote), sizeof footnote - strlen(footnote),
                 " with the template %s. Numbers in the text read A → B → …; figures draw A solid, B dashed, C "
                 "dash-dot, D long dashes (markers hollow after A); tables give ratios against A for rows whose key "
                 "columns match.",
                 r->o->template_path);
        for (int i = 0; i < r->n_missing; i++)
            snprintf(footnote + strlen(footnote), sizeof footnote - strlen(footnote), "%s%s", i ? "; " : " Missing: ",
                     r->missing[i]);
        if (r->n_missing) snprintf(footnote + strlen(footnote), sizeof footnote - strlen(footnote), ".");
    }
    if (n_other)
        snprintf(footnote + strlen(footnote), sizeof footnote - strlen(footnote),
                 " The experiments' %d other meta.csv keys (models, hashes, settings) are not on this page.", n_other);
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
    char reasons[MAX_RUNS][600];
    int missing[MAX_RUNS] = {0}, n_missing = 0, same = 1;
    r->n_active = 0;
    for (int i = 0; i < n_from; i++) {
        missing[i] = section_missing(from[i], b, reasons[i], sizeof reasons[i]);
        if (!missing[i]) r->active[r->n_active++] = from[i];
        else same &= ++n_missing == 1 || strcmp(reasons[i], reasons[0]) == 0;
    }
    pdf_heading(r->pdf, b->kind == BLOCK_SECTION ? 1 : 2, number, b->text, r->n_active == 0);
    if (!r->compare || n_from == 1) {
        if (missing[0]) pdf_notice(r->pdf, "Not run:", reasons[0]);
        return;
    }
    if (n_missing == n_from && same) {
        pdf_notice(r->pdf, n_from == 2 ? "Not run on either machine:" : "Not run on any machine:", reasons[0]);
        return;
    }
    for (int i = 0; i < n_from; i++)
        if (missing[i]) {
            char label[300];
            snprintf(label, sizeof label, "Not run on %c (%s):", machine_letter(machine_of(r, from[i])), from[i]->label);
            pdf_notice(r->pdf, label, reasons[i]);
        }
}

// Comparative phrases a finding may only print from the data ({within(...) | pick ...}):
// written out in a paragraph they state a verdict that no number checks, which is how the
// report once said "falls short of" beside a point above the line.
static const char *const verdict_phrases[] = {"falls short", "fall short", "exceeds", "outperform",
                                              "better than", "worse than", "faster than", "slower than"};

// The first verdict phrase in the paragraph's own words (placeholders left out), or NULL.
static const char *verdict_phrase(const char *text) {
    char *own = mallocCheck(strlen(text) + 1), *o = own;
    for (int depth = 0; *text; text++) {
        depth += (*text == '{') - (*text == '}');
        if (depth == 0 && *text != '}') *o++ = (char)(*text >= 'A' && *text <= 'Z' ? *text - 'A' + 'a' : *text);
    }
    *o = '\0';
    const char *found = NULL;
    for (size_t i = 0; i < sizeof verdict_phrases / sizeof verdict_phrases[0] && !found; i++)
        if (strstr(own, verdict_phrases[i])) found = verdict_phrases[i];
    free(own);
    return found;
}

static int render_paragraph(Report *r, const Block *b, Error *err) {
    char where[PATH_MAX + 16];
    block_where(b, NULL, where, sizeof where);
    const char *phrase = verdict_phrase(b->text);
    if (phrase && r->o->strict)
        return error_set(err, "%s: '%s' written in the text: choose it from the data with {within(...) | pick ...}",
                         where, phrase);
    if (phrase) fprintf(stderr, "warning: %s: '%s' written in the text, not chosen from the data\n", where, phrase);
    char *text = expand_text(b->text, where, r->active, r->n_active, r->o->strict, err);
    if (!text) return -1;
    pdf_paragraph(r->pdf, text, b->bullet);
    free(text);
    return 0;
}

static int walk_template(Report *r, Error *err) {
    RunData *all[MAX_RUNS], *section_runs[MAX_RUNS];
    int n_section = r->n_runs, skip_level = 0, subsection = 0;
    r->n_active = r->n_runs;
    for (int k = 0; k < r->n_runs; k++) all[k] = section_runs[k] = r->active[k] = &r->runs[k];
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

// The last component of a directory path, without trailing slashes.
static void base_name(const char *dir, char *buf, size_t size) {
    size_t n = strlen(dir);
    while (n > 1 && dir[n - 1] == '/') n--;
    size_t start = n;
    while (start > 0 && dir[start - 1] != '/') start--;
    snprintf(buf, size, "%.*s", (int)(n - start), dir + start);
}

// Why a comparison's run directory has no results (0 when it has them): missing, or no meta.csv
// (which every experiment writes when it finishes).
static int run_missing(const char *dir, char *why, size_t size) {
    struct stat st;
    char meta[PATH_MAX + 16];
    snprintf(meta, sizeof meta, "%s/meta.csv", dir);
    if (stat(dir, &st) != 0 || !S_ISDIR(st.st_mode)) snprintf(why, size, "no directory %s", dir);
    else if (stat(meta, &st) != 0) snprintf(why, size, "%s has no meta.csv: no experiment finished there", dir);
    else return 0;
    return 1;
}

// Machines of one hardware (two partitions of one node) share a label: tell them apart by
// their directories' names.
static void unique_labels(Report *r) {
    int same[MAX_RUNS] = {0};
    for (int i = 0; i < r->n_runs; i++)
        for (int j = 0; j < r->n_runs; j++) same[i] |= i != j && strcmp(r->runs[i].label, r->runs[j].label) == 0;
    for (int i = 0; i < r->n_runs; i++) {
        if (!same[i]) continue;
        char name[256];
        base_name(r->runs[i].dir, name, sizeof name);
        utf8_sanitize(name);
        size_t size = strlen(r->runs[i].label) + strlen(name) + 4;
        char *label = mallocCheck(size);
        snprintf(label, size, "%s (%s)", r->runs[i].label, name);
        free(r->runs[i].label);
        r->runs[i].label = label;
    }
}

// Open the run directories; in compare mode those without results are listed as missing.
static int open_runs(Report *r, const char **dirs, int n_dirs, const char *ref_dir, Error *err) {
    for (int i = 0; i < n_dirs; i++) {
        char why[PATH_MAX + 80], name[256];
        if (r->compare && run_missing(dirs[i], why, sizeof why)) {
            base_name(dirs[i], name, sizeof name);
            size_t size = strlen(name) + strlen(why) + 8;
            r->missing = reallocCheck(r->missing, (size_t)(r->n_missing + 1) * sizeof *r->missing);
            r->missing[r->n_missing] = mallocCheck(size);
            snprintf(r->missing[r->n_missing], size, "%s (%s)", name, why);
            utf8_sanitize(r->missing[r->n_missing++]);
            fprintf(stderr, "render: warning: %s: no results (%s); compared without it\n", dirs[i], why);
            continue;
        }
        if (rundata_open(&r->runs[r->n_runs], dirs[i], ref_dir, err)) return -1;
        r->n_runs++;
    }
    if (r->n_runs == 0) return error_set(err, "none of the %d run directories has results (%s)", n_dirs, r->missing[0]);
    if (r->compare) unique_labels(r);
    return 0;
}

static int render(const ReportOptions *o, const char **dirs, int n_dirs, int compare, const char *out_path, Error *err) {
    Report r = {.o = o, .compare = compare};
    Template t;
    if (o->dpi < 200) return error_set(err, "--dpi %g: figures need at least 200 dpi", o->dpi);
    if (n_dirs < 1 || n_dirs > MAX_RUNS) return error_set(err, "give 1 to %d run directories, not %d", MAX_RUNS, n_dirs);
    if (check_parent_dir(out_path, err) || template_load(&t, o->template_path, err)) return -1;
    r.t = &t;
    int status = open_runs(&r, dirs, n_dirs, t.dir, err);
    Error no_names;
    if (status == 0) r.display_names = rundata_table(&r.runs[0], "display_names.csv", &no_names); // NULL: none
    if (status == 0 && !compare) {
        if (o->figures_dir) snprintf(r.figures_dir, sizeof r.figures_dir, "%s", o->figures_dir);
        else snprintf(r.figures_dir, sizeof r.figures_dir, "%s/figures", dirs[0]);
        status = make_dir(r.figures_dir, err);
    }
    if (status == 0 && !(r.pdf = pdf_open(err))) status = -1;
    char *title = NULL, *subtitle = NULL;
    if (status == 0) {
        RunData *all[MAX_RUNS];
        for (int k = 0; k < r.n_runs; k++) all[k] = &r.runs[k];
        char where[PATH_MAX + 16];
        snprintf(where, sizeof where, "%s (@title)", o->template_path);
        title = expand_text(t.title ? t.title : "inferlab lab report", where, all, r.n_runs, o->strict, err);
        snprintf(where, sizeof where, "%s (@subtitle)", o->template_path);
        if (title && t.subtitle) subtitle = expand_text(t.subtitle, where, all, r.n_runs, o->strict, err);
        if (!title || (t.subtitle && !subtitle)) status = -1;
    }
    if (status == 0) {
        char compare_line[MAX_RUNS * 320] = "";
        for (int k = 0; k < r.n_runs; k++)
            snprintf(compare_line + strlen(compare_line), sizeof compare_line - strlen(compare_line), "%s%s (%c)",
                     k ? " vs " : "", r.runs[k].label, machine_letter(k));
        const char *sub = subtitle ? subtitle : compare ? compare_line : r.runs[0].label;
        pdf_set_info(r.pdf, title, sub);
        title_page(&r, title, sub);
        status = walk_template(&r, err);
    }
    if (status == 0 && compare) status = render_ratio_summary(&r, err);
    if (status == 0 && compare) status = render_winners(&r, err);
    if (status == 0) status = draw_figures(&r, err);
    if (status == 0) status = pdf_save(r.pdf, out_path, err);
    free_figure_jobs(&r);
    free(title);
    free(subtitle);
    pdf_close(r.pdf);
    free_list(r.figure_ids, r.n_figure_ids);
    free(r.figure_lines);
    free_list(r.missing, r.n_missing);
    for (int i = 0; i < r.n_runs; i++) rundata_close(&r.runs[i]);
    template_free(&t);
    return status;
}

int report_render(const ReportOptions *o, const char *run_dir, Error *err) {
    char out[PATH_MAX];
    if (o->out_path) snprintf(out, sizeof out, "%s", o->out_path);
    else snprintf(out, sizeof out, "%s/report.pdf", run_dir);
    return render(o, &run_dir, 1, 0, out, err);
}

char *compare_default_path(const char **dirs, int n_dirs) {
    char parent[PATH_MAX];
    size_t n = strlen(dirs[0]);
    while (n > 1 && dirs[0][n - 1] == '/') n--;
    while (n > 0 && dirs[0][n - 1] != '/') n--;
    snprintf(parent, sizeof parent, "%.*s", (int)n, dirs[0]);
    size_t size = strlen(parent) + 32;
    for (int i = 0; i < n_dirs; i++) size += strlen(dirs[i]) + 4;
    char *path = mallocCheck(size);
    snprintf(path, size, "%scompare", parent);
    for (int i = 0; i < n_dirs; i++) {
        char name[256];
        base_name(dirs[i], name, sizeof name);
        snprintf(path + strlen(path), size - strlen(path), "%s%s", i ? "-vs-" : "-", name);
    }
    snprintf(path + strlen(path), size - strlen(path), ".pdf");
    return path;
}

int report_compare(const ReportOptions *o, const char **dirs, int n_dirs, Error *err) {
    if (n_dirs < 2) return error_set(err, "a comparison needs at least two run directories, got %d", n_dirs);
    char *out = o->out_path ? NULL : compare_default_path(dirs, n_dirs);
    int status = render(o, dirs, n_dirs, 1, o->out_path ? o->out_path : out, err);
    free(out);
    return status;
}
