// lab.c: the experiment harness (see lab.h): the option table -> getopt_long and --help,
// the shared options, the backend check, CSV paths, shards, and the ending: meta.csv, then
// the run's manifest.
#include "lab.h"

#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "kernels.h"

enum { MAX_OPTIONS = 64, OPT_OWN = 0x2000, OPT_BACKEND = 0x1fff, OPT_SHARD = 0x1ffe, OPT_MERGE = 0x1ffd }; // OPT_OWN + i: option i of the table
enum { MAX_SHARDS = 4096 };

// The shared options, for --help; `flag` is the LAB_* bit that brings each in.
static const struct {
    unsigned flag;
    const char *name, *arg, *help;
} COMMON_HELP[] = {
    {LAB_BACKEND, "backend", "B", "cpu (default) or cuda: the same measurements on the GPU"},
    {LAB_OUT, "out", "DIR", "write CSVs and meta.csv under DIR (default out/<hw>)"},
    {LAB_PROFILE, "profile", "P", "quick (tiny sweep, for tests and CI) or full (default)"},
    {LAB_PROFILE, "quick", NULL, "same as --profile quick"},
    {LAB_THREADS, "threads", "N", "OpenMP and OpenBLAS threads (default: every core)"},
    {LAB_SHARD, "shard", "K/N", "run only part K (0..N-1) of N of the sweep, writing <table>.shard-K-of-N.csv"},
    {LAB_SHARD, "merge-shards", "N", "join the N shards of each split table into <table>.csv, and run nothing"},
};

static int n_options(const Experiment *e) {
    int n = 0;
    while (e->options && e->options[n].name) n++;
    if (n > MAX_OPTIONS) die("%s: more than %d options", e->name, MAX_OPTIONS);
    return n;
}

static int n_tables(const Experiment *e) {
    int n = 0;
    while (e->tables && e->tables[n].stem) n++;
    if (n > LAB_MAX_TABLES) die("%s: more than %d tables", e->name, LAB_MAX_TABLES);
    return n;
}

// Text of option o into its variable; err names the option.
static int parse_value(const LabOption *o, const char *text, Error *err) {
    char name[80];
    snprintf(name, sizeof name, "--%s", o->name);
    long lo = o->min <= (double)LONG_MIN ? LONG_MIN : (long)o->min;
    long hi = o->max >= (double)LONG_MAX ? LONG_MAX : (long)o->max;
    switch (o->kind) {
    case LAB_FLAG: *(int *)o->value = 1; return 0;
    case LAB_INT: return cli_parse_long(name, text, lo, hi, (long *)o->value, err);
    case LAB_U64: return cli_parse_u64(name, text, (uint64_t *)o->value, err);
    case LAB_DOUBLE: return cli_parse_double(name, text, o->min, o->max, (double *)o->value, err);
    case LAB_TEXT: *(const char **)o->value = text; return 0;
    }
    return error_set(err, "%s: unknown kind of option", name);
}

// getopt_long's table: the shared options this experiment takes, then its own.
static int build_getopt(const Experiment *e, struct option *out, char *shorts, size_t shorts_size) {
    static const struct option common[] = {CLI_COMMON_OPTIONS};
    int n = 0;
    out[n++] = common[0]; // --help
    for (size_t i = 1; i < sizeof common / sizeof common[0]; i++) {
        unsigned flag = common[i].val == CLI_OPT_OUT ? LAB_OUT : common[i].val == CLI_OPT_THREADS ? LAB_THREADS
                                                                                                   : LAB_PROFILE;
        if (e->common & flag) out[n++] = common[i];
    }
    if (e->common & LAB_BACKEND) out[n++] = (struct option){"backend", required_argument, 0, OPT_BACKEND};
    if (e->common & LAB_SHARD) {
        out[n++] = (struct option){"shard", required_argument, 0, OPT_SHARD};
        out[n++] = (struct option){"merge-shards", required_argument, 0, OPT_MERGE};
    }
    size_t len = (size_t)snprintf(shorts, shorts_size, ":h"); // ':' reports a missing value as ':'
    for (int i = 0; i < n_options(e); i++) {
        const LabOption *o = &e->options[i];
        int has_arg = o->kind == LAB_FLAG ? no_argument : required_argument;
        out[n++] = (struct option){o->name, has_arg, 0, o->short_name ? o->short_name : OPT_OWN + i};
        if (o->short_name && len + 3 < shorts_size) {
            shorts[len++] = o->short_name;
            if (has_arg) shorts[len++] = ':';
            shorts[len] = '\0';
        }
    }
    out[n] = (struct option){0, 0, 0, 0};
    return n;
}

// The table index of the option getopt_long returned as code, or -1.
static int own_option(const Experiment *e, int code) {
    if (code >= OPT_OWN && code < OPT_OWN + MAX_OPTIONS) return code - OPT_OWN;
    for (int i = 0; i < n_options(e); i++)
        if (e->options[i].short_name && e->options[i].short_name == code) return i;
    return -1;
}

// "K/N" with 0 <= K < N <= MAX_SHARDS.
static int parse_shard(const char *text, LabRun *r, Error *err) {
    const char *slash = strchr(text, '/');
    char k_text[32];
    long k, n;
    if (!slash || slash - text >= (long)sizeof k_text) return error_set(err, "--shard '%s': give K/N, as in 0/4", text);
    snprintf(k_text, sizeof k_text, "%.*s", (int)(slash - text), text);
    if (cli_parse_long("--shard N", slash + 1, 1, MAX_SHARDS, &n, err) || cli_parse_long("--shard K", k_text, 0, n - 1, &k, err))
        return -1;
    r->shard = (int)k, r->n_shards = (int)n;
    return 0;
}

int lab_parse(const Experiment *e, int argc, char **argv, LabRun *r, int *help, Error *err) {
    memset(r, 0, sizeof *r);
    r->exp = e;
    *help = 0;
    CliCommon common;
    cli_common_defaults(&common);
    for (int i = 0; i < n_options(e); i++)
        if (e->options[i].def && parse_value(&e->options[i], e->options[i].def, err))
            die("%s: the default of --%s: %s", e->name, e->options[i].name, err->msg);
    struct option opts[MAX_OPTIONS + 8];
    char shorts[2 * MAX_OPTIONS + 4];
    build_getopt(e, opts, shorts, sizeof shorts);
    opterr = 0; // the messages below name the option
    optind = 0; // a fresh scan, also when called again (tests)
    for (int code; (code = getopt_long(argc, argv, shorts, opts, NULL)) != -1;) {
        const char *at = argv[optind - 1];
        if (code == '?') return error_set(err, "unknown option '%s'", at);
        if (code == ':') return error_set(err, "option '%s' needs a value", at);
        if (code == 'h' || code == CLI_OPT_HELP) *help = 1;
        else if (code == OPT_BACKEND) {
            if (backend_parse(optarg, &r->backend, err)) return -1;
        } else if (code == OPT_SHARD) {
            if (parse_shard(optarg, r, err)) return -1;
        } else if (code == OPT_MERGE) {
            long n;
            if (cli_parse_long("--merge-shards", optarg, 1, MAX_SHARDS, &n, err)) return -1;
            r->merge_shards = (int)n;
        } else if (own_option(e, code) >= 0) {
            if (parse_value(&e->options[own_option(e, code)], optarg, err)) return -1;
        } else if (cli_common_option(&common, code, optarg, err) != 1) return -1;
    }
    if (optind < argc) return error_set(err, "unexpected argument '%s'", argv[optind]);
    if (r->n_shards && r->merge_shards) return error_set(err, "give --shard or --merge-shards, not both");
    snprintf(r->out_dir, sizeof r->out_dir, "%s", common.out_dir);
    snprintf(r->profile, sizeof r->profile, "%s", common.profile);
    r->quick = strcmp(r->profile, "quick") == 0;
    r->threads = common.threads;
    return 0;
}

// Was a required option left out? Text options and numbers start unset (NULL, 0) and
// have no default, so "given" is "set".
static int check_required(const Experiment *e, Error *err) {
    for (int i = 0; i < n_options(e); i++) {
        const LabOption *o = &e->options[i];
        if (o->required && o->kind == LAB_TEXT && *(const char **)o->value == NULL)
            return error_set(err, "--%s is required", o->name);
    }
    return 0;
}

// "  --name ARG" padded to the help column, then the help, continuation lines indented.
static void print_option(char short_name, const char *name, const char *arg, const char *help, const char *def) {
    enum { COLUMN = 24 };
    char flag[96];
    int n = short_name ? snprintf(flag, sizeof flag, "  -%c, --%s%s%s", short_name, name, arg ? " " : "", arg ? arg : "")
                       : snprintf(flag, sizeof flag, "  --%s%s%s", name, arg ? " " : "", arg ? arg : "");
    printf("%s%*s", flag, n < COLUMN ? COLUMN - n : 1, "");
    for (const char *p = help; *p; p++) {
        putchar(*p);
        if (*p == '\n') printf("%*s", COLUMN, "");
    }
    if (def) printf(" (default %s)", def);
    putchar('\n');
}

static void print_help(const Experiment *e) {
    printf("usage: bin/%s %s\n%s\n\noptions:\n", e->name, e->synopsis, e->about);
    for (int i = 0; i < n_options(e); i++) {
        const LabOption *o = &e->options[i];
        print_option(o->short_name, o->name, o->kind == LAB_FLAG ? NULL : o->arg, o->help, o->def);
    }
    for (size_t i = 0; i < sizeof COMMON_HELP / sizeof COMMON_HELP[0]; i++)
        if (e->common & COMMON_HELP[i].flag)
            print_option(0, COMMON_HELP[i].name, COMMON_HELP[i].arg, COMMON_HELP[i].help, NULL);
    print_option('h', "help", NULL, "show this help", NULL);
    if (n_tables(e) > 0) {
        printf("\nwrites under --out, and merges its keys into meta.csv there:\n");
        for (int i = 0; i < n_tables(e); i++) {
            const LabTable *t = &e->tables[i];
            char name[96];
            snprintf(name, sizeof name, "%s.csv%s", t->stem,
                     (t->backends & LAB_BOTH) == LAB_CUDA ? " (GPU)" : (t->backends & LAB_BOTH) == LAB_BOTH ? " (both)" : "");
            printf("  %-32s %s\n", name, t->about);
        }
    }
    if (e->common & LAB_BACKEND)
        printf("\nA table of both backends keeps the other backend's rows. --backend cuda exits 2 (\"not run\")\n"
               "when no CUDA device can be used, before writing anything.\n");
    if (e->notes) printf("\n%s\n", e->notes);
}

int lab_main(const Experiment *e, int argc, char **argv) {
    kernels_use_best_blas(argv); // may re-execute the program: before anything is read or written
    LabRun r;
    int help;
    Error err;
    if (lab_parse(e, argc, argv, &r, &help, &err)) cli_usage_error(e->name, err.msg);
    if (help) {
        print_help(e);
        return 0;
    }
    if (r.merge_shards) {
        if (lab_merge_shards(&r, r.merge_shards, &err)) die("%s: %s", e->name, err.msg);
        return 0;
    }
    backend_require(r.backend, e->name); // before anything is read or written
    if (check_required(e, &err)) cli_usage_error(e->name, err.msg);
    if (e->common & LAB_THREADS) kernels_set_threads(r.threads);
    // The step is not done until this run says so: a run that fails or is killed leaves no
    // manifest behind (the stage of scripts/report_run.sh shares the old one's inode: unlink
    // it, never write it in place).
    int manifest = (e->common & LAB_OUT) && !r.n_shards;
    char path[1024];
    if (manifest) {
        lab_manifest_path(&r, path, sizeof path);
        if (unlink(path) != 0 && errno != ENOENT) die("%s: cannot remove %s: %s", e->name, path, strerror(errno));
    }
    hw_probe(&r.hw);
    int status = e->run(&r);
    progress_done();
    if (status != 0 || !(e->common & LAB_OUT)) return status;
    if (meta_make_dir(r.out_dir, &err) || meta_write(r.out_dir, &r.hw, r.profile, r.meta, r.n_meta, &err))
        die("%s", err.msg);
    if (manifest && lab_manifest_write(&r, &err)) die("%s: %s", e->name, err.msg);
    return 0;
}

void lab_manifest_path(const LabRun *r, char *buf, size_t size) {
    int n = snprintf(buf, size, "%s/%s%s.done", r->out_dir, r->exp->name, r->backend == BACKEND_CUDA ? ".cuda" : "");
    if (n >= (int)size) die("output path too long: %s/%s", r->out_dir, r->exp->name);
}

int lab_manifest_write(const LabRun *r, Error *err) {
    char path[1024];
    lab_manifest_path(r, path, sizeof path);
    if (meta_make_dir(r->out_dir, err)) return -1;
    AtomicFile out = atomic_open(path);
    for (int t = 0; t < n_tables(r->exp); t++)
        if ((r->written >> t) & 1) fprintf(out.f, "%s.csv\n", r->exp->tables[t].stem);
    fprintf(out.f, "meta.csv\n");
    atomic_commit(&out);
    return 0;
}

void lab_csv_path(const LabRun *r, int table, char *buf, size_t size) {
    if (table < 0 || table >= n_tables(r->exp)) die("%s: no table %d", r->exp->name, table);
    const LabTable *t = &r->exp->tables[table];
    unsigned backends = t->backends & LAB_BOTH ? t->backends & LAB_BOTH : LAB_CPU;
    if (!(backends & (r->backend == BACKEND_CUDA ? LAB_CUDA : LAB_CPU)))
        die("%s: table %s is not written on the %s", r->exp->name, t->stem, backend_name(r->backend));
    if (r->n_shards && !(t->backends & LAB_SHARDED)) die("%s: table %s is not split by --shard", r->exp->name, t->stem);
    int n = r->n_shards ? snprintf(buf, size, "%s/%s.shard-%d-of-%d.csv", r->out_dir, t->stem, r->shard, r->n_shards)
                        : snprintf(buf, size, "%s/%s.csv", r->out_dir, t->stem);
    if (n >= (int)size) die("output path too long: %s/%s", r->out_dir, t->stem);
}

int lab_shard_owns(const LabRun *r, long i, long n) {
    if (!r->n_shards) return 1;
    return i >= r->shard * n / r->n_shards && i < (r->shard + 1) * n / r->n_shards;
}

// Append the file at path to out, without its first line when skip_header; the first line
// must be `header`.
static int append_shard(FILE *out, const char *path, const char *header, int skip_header, Error *err) {
    FILE *f = fopen(path, "rb");
    if (!f) return error_set(err, "%s: %s (every shard must have finished)", path, strerror(errno));
    char *line = NULL;
    size_t cap = 0;
    ssize_t len = getline(&line, &cap, f);
    int status = 0;
    if (len < 1 || line[len - 1] != '\n' || (size_t)len - 1 != strlen(header) || strncmp(line, header, strlen(header)) != 0)
        status = error_set(err, "%s: its first line is not the table's header '%s'", path, header);
    if (status == 0 && !skip_header) fputs(line, out);
    char buf[1 << 16];
    for (size_t n; status == 0 && (n = fread(buf, 1, sizeof buf, f)) > 0;) fwrite(buf, 1, n, out);
    if (status == 0 && ferror(f)) status = error_set(err, "%s: read error", path);
    free(line);
    fclose(f);
    return status;
}

int lab_merge_shards(const LabRun *r, int n_shards, Error *err) {
    int merged = 0;
    for (int t = 0; t < n_tables(r->exp); t++) {
        const LabTable *table = &r->exp->tables[t];
        if (!(table->backends & LAB_SHARDED)) continue;
        char path[1024], shard[1100];
        if (snprintf(path, sizeof path, "%s/%s.csv", r->out_dir, table->stem) >= (int)sizeof path)
            return error_set(err, "output path too long: %s/%s", r->out_dir, table->stem);
        for (int k = 0; k < n_shards; k++) { // all there before anything is written
            snprintf(shard, sizeof shard, "%s/%s.shard-%d-of-%d.csv", r->out_dir, table->stem, k, n_shards);
            if (access(shard, R_OK) != 0) return error_set(err, "%s: %s (every shard must have finished)", shard, strerror(errno));
        }
        AtomicFile out = atomic_open(path);
        for (int k = 0; k < n_shards; k++) {
            snprintf(shard, sizeof shard, "%s/%s.shard-%d-of-%d.csv", r->out_dir, table->stem, k, n_shards);
            if (append_shard(out.f, shard, table->header, k > 0, err)) {
                atomic_abort(&out);
                return -1;
            }
        }
        atomic_commit(&out);
        for (int k = 0; k < n_shards; k++) {
            snprintf(shard, sizeof shard, "%s/%s.shard-%d-of-%d.csv", r->out_dir, table->stem, k, n_shards);
            unlink(shard);
        }
        fprintf(stderr, "%s: merged %d shards into %s\n", r->exp->name, n_shards, path);
        merged++;
    }
    if (!merged) return error_set(err, "no table of %s is split into shards", r->exp->name);
    return 0;
}

CsvWriter lab_csv(LabRun *r, int table) {
    char path[1024];
    lab_csv_path(r, table, path, sizeof path);
    Error err;
    if (meta_make_dir(r->out_dir, &err)) die("%s", err.msg);
    r->written |= (uint64_t)1 << table; // (lab_csv_path has checked the index)
    const LabTable *t = &r->exp->tables[table];
    if ((t->backends & LAB_BOTH) != LAB_BOTH) return csv_open(path, t->header);
    if (strncmp(t->header, "backend,", 8) != 0) die("%s: table %s of both backends lacks the backend column", r->exp->name, t->stem);
    return csv_open_keyed(path, t->header, backend_name(r->backend));
}

void lab_meta(LabRun *r, const char *key, const char *fmt, ...) {
    if (r->n_meta == LAB_MAX_META) die("%s: more than %d meta.csv keys", r->exp->name, LAB_MAX_META);
    char (*text)[512] = r->meta_text[r->n_meta];
    snprintf(text[0], sizeof text[0], "%s", key);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(text[1], sizeof text[1], fmt, ap);
    va_end(ap);
    r->meta[r->n_meta++] = (MetaEntry){text[0], text[1]};
}
