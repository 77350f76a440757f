// train.c: bin/train, trains the model zoo of a profile (or one of its models) into a
// models directory, skipping every model that is up to date.
//
//   bin/train --profile full --out out/models            # what `make models` runs
//   bin/train --profile quick --model target --force     # retrain one model
//   bin/train --corpus my.txt                             # any UTF-8 text instead of the KJV
//
// Per model <name> it writes (atomically):
//   <name>.gguf          the weights and the shared BPE tokenizer
//   <name>.csv           the training log, a row per evaluation: losses (the objective, text and
//                        answer), validation loss and bits per byte, lr, tokens/s, passkey
//                        exact-match and token accuracy, prefix-matching score of each layer
//                        (its best head) and the best over layers
//   <name>.passkey.csv   passkey retrieval by context and needle depth (held-out keys)
//   <name>.summary.csv   one row: size, training time, tokens/s, GFLOP/s, validation loss and
//                        bits per byte, passkey accuracy at the training context
//   <name>.key           the up-to-date key (zoo.h); written last, so a model is skipped
//                        only when all of the above exist for the same key
//   <name>.ckpt          while training only: resumed from after an interruption
// and for the run: zoo.csv (the summaries of every model of the profile found), passkey.csv
// (their passkey rows),
// validation.txt (the validation text) and compressors.csv (gzip -9 / bzip2 -9 / xz -9
// bits per byte of validation.txt, the baselines a model must beat).
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bench.h"
#include "cli.h"
#include "common.h"
#include "corpus.h"
#include "csv.h"
#include "gguf.h"
#include "kernels.h"
#include "meta.h"
#include "tokenizer.h"
#include "trainer.h"
#include "zoo.h"

#define SUMMARY_HEADER                                                                             \
    "name,role,attention,params,dim,n_layers,n_heads,n_kv_heads,vocab_size,seq_len,steps,tokens,"  \
    "train_s,tokens_per_s,gflop_per_s,val_loss_nats,val_bits_per_byte,passkey_accuracy,"             \
    "passkey_token_accuracy,passkey_worst_depth_accuracy"
#define PASSKEY_HEADER "name,context,needle_depth,samples,exact_match,token_accuracy"
#define PASSKEY_DEPTHS 5     // needle depths 0, 25, 50, 75, 100%
#define PASSKEY_SEED 12345   // the held-out keys and their haystacks (the same at every depth)

typedef struct {
    CliCommon common;
    const char *model;   // only this one; NULL = the whole zoo
    const char *corpus;  // NULL = the KJV
    int force;           // retrain even when up to date
} Options;

static void usage(void) {
    printf("usage: bin/train [options]\n"
           "Train the model zoo of a profile into a models directory; up-to-date models are skipped.\n"
           "  --model NAME     train only this model of the zoo\n"
           "  --corpus PATH    train on this UTF-8 text file instead of the KJV (default: $CORPUS)\n"
           "  --force          retrain even models that are up to date\n"
           "  --list           print the zoo of the profile and exit\n"
           "  --out DIR        models directory (default out/models)\n"
           "  --profile P      quick (tiny models, under a minute) or full (default)\n"
           "  --quick          same as --profile quick\n"
           "  --threads N      OpenMP and OpenBLAS threads (default: every core)\n"
           "  --help           show this help\n");
}

// "copy 300 x 64 | passkey 0.50 gap 16-> (60%) + text"
static void describe_schedule(char *out, size_t size, const TrainConfig *tc) {
    size_t n = 0;
    out[0] = '\0';
    for (int i = 0; i < tc->n_phases && n < size; i++) {
        const TrainPhase *p = &tc->phases[i];
        int B, T;
        train_phase_shape(tc, p, &B, &T);
        n += snprintf(out + n, size - n, "%s", i ? " | " : "");
        if (p->steps) n += snprintf(out + n, size - n, "%d steps: ", p->steps);
        if (p->copy_frac > 0) n += snprintf(out + n, size - n, "copy %.2f ", p->copy_frac);
        if (p->passkey_frac > 0) n += snprintf(out + n, size - n, "passkey %.2f ", p->passkey_frac);
        if (p->gap_from > 0) n += snprintf(out + n, size - n, "gap %d->%d over %.0f%% ", p->gap_from, T, 100.0 * p->gap_widen);
        if (p->filler_text) n += snprintf(out + n, size - n, "(+ filler text) ");
        if (n < size) n += snprintf(out + n, size - n, "text %.2f, %d x %d", 1.0 - p->copy_frac - p->passkey_frac, B, T);
    }
}

static void list_zoo(const Zoo *z) {
    printf("profile %s: vocab %d, context %d\n", z->profile, z->vocab_size, z->seq_len);
    for (int i = 0; i < z->n_models; i++) {
        const ZooModel *m = &z->models[i];
        const Config *c = &m->config;
        char schedule[512], kv[64] = "";
        describe_schedule(schedule, sizeof schedule, &m->train);
        if (c->kv_lora_rank) snprintf(kv, sizeof kv, " d_c %d d_r %d", c->kv_lora_rank, c->rope_dim);
        if (c->kv_share > 1) snprintf(kv + strlen(kv), sizeof kv - strlen(kv), " kv_share %d", c->kv_share);
        printf("  %-10s %-9s %-3s dim %4d layers %d heads %d/%d%s hidden %4d  %6.2fM params  %d steps x %d x %d tokens, "
               "lr %g\n             %s\n",
               m->name, m->role, m->attention, c->dim, c->n_layers, c->n_heads, c->n_kv_heads, kv, c->hidden_dim,
               model_param_count(c) / 1e6, m->train.steps, m->train.batch_size, m->train.seq_len, m->train.lr, schedule);
    }
}

// --- up-to-date keys -------------------------------------------------------------------------

static int key_matches(const char *dir, const char *name, uint64_t key) {
    char path[1024], text[32] = {0};
    zoo_path(path, sizeof path, dir, name, ".gguf");
    if (access(path, R_OK) != 0) return 0;
    zoo_path(path, sizeof path, dir, name, ".summary.csv");
    if (access(path, R_OK) != 0) return 0;
    zoo_path(path, sizeof path, dir, name, ".key");
    FILE *f = fopen(path, "r");
    if (!f) return 0;
    size_t n = fread(text, 1, sizeof text - 1, f);
    fclose(f);
    char want[32];
    snprintf(want, sizeof want, "%016llx\n", (unsigned long long)key);
    return n == strlen(want) && memcmp(text, want, n) == 0;
}

static void write_key(const char *dir, const char *name, uint64_t key) {
    char path[1024];
    zoo_path(path, sizeof path, dir, name, ".key");
    AtomicFile af = atomic_open(path);
    fprintf(af.f, "%016llx\n", (unsigned long long)key);
    atomic_commit(&af);
}

// --- data ------------------------------------------------------------------------------------

typedef struct {
    Tokenizer tok;
    int *train, *val;
    size_t n_train, n_val;
} Tokens;

static int *encode_all(const Tokenizer *tok, const char *text, size_t len, size_t *n) {
    int *ids = mallocCheck(tokenizer_max_tokens(len) * sizeof(int));
    *n = tokenizer_encode(tok, (const unsigned char *)text, len, false, false, ids);
    return ids;
}

static void tokens_build(Tokens *t, const Corpus *c, int vocab_size) {
    Error err;
    if (tokenizer_train_bpe(&t->tok, (const unsigned char *)c->train, c->train_len, vocab_size, &err))
        die("tokenizer: %s", err.msg);
    if (t->tok.vocab_size != vocab_size)
        die("%s: the training text only supports a vocabulary of %d tokens, the profile needs %d", c->source,
            t->tok.vocab_size, vocab_size);
    t->train = encode_all(&t->tok, c->train, c->train_len, &t->n_train);
    t->val = encode_all(&t->tok, c->val, c->val_len, &t->n_val);
}

static void tokens_free(Tokens *t) {
    tokenizer_free(&t->tok);
    free(t->train);
    free(t->val);
}

// --- one model -------------------------------------------------------------------------------

// Passkey retrieval at the training context (mean and worst over the needle depths).
typedef struct {
    double exact, tokens, worst_depth;
} PasskeySummary;

// <name>.passkey.csv: held-out passkeys at each needle depth and at the model's contexts of the
// grid (zoo.h: a half, three quarters and all of the training context, or all of it only;
// those a passkey fits in), scored through the batched training forward (train_passkey_score:
// the engine evaluator's score, faster). A model with no passkey contexts gets the header only
// and NaN (n/a) scores. Dies on an evaluation error.
static PasskeySummary evaluate_passkeys(const char *dir, const ZooModel *m, Trainer *t, const Tokens *tk,
                                        const Zoo *z) {
    char path[1024];
    zoo_path(path, sizeof path, dir, m->name, ".passkey.csv");
    CsvWriter w = csv_open(path, PASSKEY_HEADER);
    if (m->passkey_contexts == 0) {
        csv_close(&w);
        return (PasskeySummary){NAN, NAN, NAN};
    }
    PasskeySummary sum = {0, 0, 1};
    int T = m->train.seq_len, grid[] = {T / 2, 3 * T / 4, T};
    const int *contexts = grid + 3 - m->passkey_contexts;
    for (int i = 0; i < m->passkey_contexts; i++) {
        if (contexts[i] < passkey_min_len(&tk->tok)) continue;
        for (int d = 0; d < PASSKEY_DEPTHS; d++) {
            float depth = (float)d / (PASSKEY_DEPTHS - 1);
            PasskeyScore score;
            Error err;
            if (train_passkey_score(t, &tk->tok, tk->val, tk->n_val, contexts[i], depth, z->passkey_samples,
                                    PASSKEY_SEED, &score, &err))
                die("%s: passkey evaluation: %s", m->name, err.msg);
            csv_row(&w, "%s,%d,%.6g,%d,%.6g,%.6g", m->name, contexts[i], (double)depth, z->passkey_samples, score.exact,
                    score.tokens);
            if (contexts[i] != T) continue;
            sum.exact += score.exact / PASSKEY_DEPTHS;
            sum.tokens += score.tokens / PASSKEY_DEPTHS;
            sum.worst_depth = score.exact < sum.worst_depth ? score.exact : sum.worst_depth;
        }
    }
    csv_close(&w);
    return sum;
}

static void write_summary(const char *dir, const ZooModel *m, const TrainResult *r, size_t n_params,
                          const PasskeySummary *passkey) {
    char path[1024];
    zoo_path(path, sizeof path, dir, m->name, ".summary.csv");
    const Config *c = &m->config;
    const TrainConfig *t = &m->train;
    double tokens = (double)t->steps * t->batch_size * t->grad_accum * t->seq_len;
    CsvWriter w = csv_open(path, SUMMARY_HEADER);
    csv_row(&w, "%s,%s,%s,%zu,%d,%d,%d,%d,%d,%d,%d,%.6g,%.6g,%.6g,%.6g,%.6g,%.6g,%.6g,%.6g,%.6g", m->name, m->role,
            m->attention, n_params, c->dim, c->n_layers, c->n_heads, c->n_kv_heads, c->vocab_size, t->seq_len,
            t->steps, tokens, r->seconds, r->tokens / r->seconds, r->flops / r->seconds / 1e9, r->val_loss,
            r->val_bpb, passkey->exact, passkey->tokens, passkey->worst_depth);
    csv_close(&w);
}

static void train_one(const char *dir, const ZooModel *m, uint64_t key, const Tokens *tk, const Zoo *z) {
    char why[256], gguf[1024], log[1024], ckpt[1024];
    if (!config_validate(&m->config, why, sizeof why)) die("zoo model %s: %s", m->name, why);
    if (!train_config_validate(&m->train, &m->config, why, sizeof why)) die("zoo model %s: %s", m->name, why);
    zoo_path(gguf, sizeof gguf, dir, m->name, ".gguf");
    zoo_path(log, sizeof log, dir, m->name, ".csv");
    zoo_path(ckpt, sizeof ckpt, dir, m->name, ".ckpt");

    Trainer t;
    trainer_init(&t, &m->config, &m->train);
    TrainData data = {tk->train, tk->n_train, tk->val, tk->n_val, &tk->tok};
    TrainRun run = {m->name, log, ckpt, m->train.steps / 4 > 0 ? m->train.steps / 4 : 1, key, 0};
    TrainResult res;
    Error err;
    if (train_run(&t, &data, &run, &res, &err)) die("%s: %s", m->name, err.msg);
    double eval_start = now_seconds();
    PasskeySummary passkey = evaluate_passkeys(dir, m, &t, tk, z);
    double eval_s = now_seconds() - eval_start;
    model_save_gguf(gguf, &t.model, &tk->tok, GGML_TYPE_F32);
    write_summary(dir, m, &res, t.model.n_params, &passkey);
    write_key(dir, m->name, key);
    remove(ckpt);
    char retrieval[96] = "passkey n/a";
    if (m->passkey_contexts > 0)
        snprintf(retrieval, sizeof retrieval, "passkey %.1f%% (worst depth %.1f%%)", 100.0 * passkey.exact,
                 100.0 * passkey.worst_depth);
    // The evaluations during training (wall minus training time) and after it are printed
    // apart, so that what the zoo's budget is spent on shows.
    fprintf(stderr, "%-10s %6.2fM params  %5d steps in %6.1f s%s  %7.0f tok/s  %5.1f GFLOP/s  val %.4f bits/byte  "
            "%s  evaluations %.1f + %.1f s\n", m->name, t.model.n_params / 1e6, m->train.steps, res.seconds,
            res.resumed_from ? " (resumed)" : "", res.tokens / res.seconds, res.flops / res.seconds / 1e9,
            res.val_bpb, retrieval, res.wall_seconds - res.seconds, eval_s);
    trainer_free(&t);
}

// --- run-wide outputs --------------------------------------------------------------------------

// <file>.csv of the run: the rows (after the header) of <name><suffix> of every model of the
// zoo that has one.
static void gather_rows(const char *dir, const Zoo *z, const char *file, const char *header, const char *suffix) {
    char path[1024], line[2048];
    zoo_path(path, sizeof path, dir, file, ".csv");
    CsvWriter w = csv_open(path, header);
    for (int i = 0; i < z->n_models; i++) {
        char part[1024];
        zoo_path(part, sizeof part, dir, z->models[i].name, suffix);
        FILE *f = fopen(part, "r");
        if (!f) continue;
        if (fgets(line, sizeof line, f))
            while (fgets(line, sizeof line, f)) {
                line[strcspn(line, "\r\n")] = '\0';
                csv_row(&w, "%s", line);
            }
        fclose(f);
    }
    csv_close(&w);
}

// compressors.csv: how well general-purpose compressors do on the validation text.
static void write_compressor_baselines(const char *dir, const Corpus *c) {
    char text_path[1024], path[1024], cmd[2200];
    zoo_path(text_path, sizeof text_path, dir, "validation", ".txt");
    AtomicFile af = atomic_open(text_path);
    fwriteCheck(c->val, 1, c->val_len, af.f);
    atomic_commit(&af);
    zoo_path(path, sizeof path, dir, "compressors", ".csv");
    CsvWriter w = csv_open(path, "compressor,text_bytes,compressed_bytes,bits_per_byte");
    const char *tools[] = {"gzip -9", "bzip2 -9", "xz -9"};
    for (size_t i = 0; i < sizeof tools / sizeof tools[0]; i++) {
        snprintf(cmd, sizeof cmd, "%s -c < '%s' 2>/dev/null | wc -c", tools[i], text_path);
        FILE *p = popen(cmd, "r");
        long long bytes = 0;
        int ok = p && fscanf(p, "%lld", &bytes) == 1;
        if (p) ok = pclose(p) == 0 && ok;
        if (ok && bytes > 0)
            csv_row(&w, "%s,%zu,%lld,%.6g", tools[i], c->val_len, bytes, 8.0 * bytes / (double)c->val_len);
    }
    csv_close(&w);
}

static void parse_options(Options *o, int argc, char **argv, int *list) {
    static const struct option opts[] = {CLI_COMMON_OPTIONS,
                                         {"model", required_argument, 0, 'm'},
                                         {"corpus", required_argument, 0, 'c'},
                                         {"force", no_argument, 0, 'f'},
                                         {"list", no_argument, 0, 'l'},
                                         {0, 0, 0, 0}};
    memset(o, 0, sizeof *o);
    cli_common_defaults(&o->common);
    snprintf(o->common.out_dir, sizeof o->common.out_dir, "out/models");
    const char *env_corpus = getenv("CORPUS");
    o->corpus = env_corpus && env_corpus[0] ? env_corpus : NULL;
    Error err;
    for (int code; (code = getopt_long(argc, argv, "", opts, NULL)) != -1;) {
        if (code == 'm') o->model = optarg;
        else if (code == 'c') o->corpus = optarg;
        else if (code == 'f') o->force = 1;
        else if (code == 'l') *list = 1;
        else {
            int r = cli_common_option(&o->common, code, optarg, &err);
            if (r < 0) cli_usage_error("train", err.msg);
            if (r == 0) cli_usage_error("train", "unknown option");
        }
    }
    if (optind < argc) cli_usage_error("train", "unexpected argument");
}

int main(int argc, char **argv) {
    Options o;
    int list = 0;
    parse_options(&o, argc, argv, &list);
    if (o.common.help) {
        usage();
        return 0;
    }
    Error err;
    Zoo zoo;
    if (zoo_for_profile(&zoo, o.common.profile, &err)) die("%s", err.msg);
    if (list) {
        list_zoo(&zoo);
        return 0;
    }
    if (o.model && !zoo_find(&zoo, o.model)) die("--model: the %s zoo has no model '%s'", zoo.profile, o.model);
    kernels_set_threads(o.common.threads);
    const char *dir = o.common.out_dir;
    if (meta_make_dir(dir, &err)) die("%s", err.msg);
    int stale_temps = atomic_remove_stale(dir); // a killed train's half-written models and logs
    if (stale_temps > 0) fprintf(stderr, "train: removed %d temp file(s) left by a killed run in %s\n", stale_temps, dir);

    double start = now_seconds();
    Corpus corpus;
    if (corpus_load(&corpus, o.corpus, &err)) die("corpus: %s", err.msg);
    uint64_t corpus_hash = fnv1a(fnv1a(FNV_OFFSET, corpus.train, corpus.train_len), corpus.val, corpus.val_len);

    uint64_t keys[ZOO_MAX_MODELS];
    int stale[ZOO_MAX_MODELS], n_stale = 0;
    for (int i = 0; i < zoo.n_models; i++) {
        const ZooModel *m = &zoo.models[i];
        keys[i] = zoo_model_key(m, corpus_hash);
        stale[i] = (!o.model || strcmp(o.model, m->name) == 0) &&
                   (o.force || !key_matches(dir, m->name, keys[i]));
        n_stale += stale[i];
    }
    if (n_stale > 0) {
        Tokens tk;
        tokens_build(&tk, &corpus, zoo.vocab_size);
        fprintf(stderr, "train: %s, %zu bytes (%zu training tokens, %zu validation); profile %s, %d model(s) to train\n",
                corpus.source, corpus.len, tk.n_train, tk.n_val, zoo.profile, n_stale);
        for (int i = 0; i < zoo.n_models; i++)
            if (stale[i]) train_one(dir, &zoo.models[i], keys[i], &tk, &zoo);
        tokens_free(&tk);
    }
    write_compressor_baselines(dir, &corpus);
    gather_rows(dir, &zoo, "zoo", SUMMARY_HEADER, ".summary.csv");
    gather_rows(dir, &zoo, "passkey", PASSKEY_HEADER, ".passkey.csv");
    fprintf(stderr, "train: %d model(s) trained, %d up to date, in %.1f s\n", n_stale,
            (o.model ? 1 : zoo.n_models) - n_stale, now_seconds() - start);
    corpus_free(&corpus);
    return 0;
}
