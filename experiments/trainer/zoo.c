// zoo.c: the model zoo of each profile (see zoo.h) and the up-to-date key.
#include "zoo.h"

#include <string.h>

#include "corpus.h"

// A model's data schedule (trainer.h's TrainPhase, in order).
typedef struct {
    const TrainPhase *phases;
    int n;
} Schedule;
#define SCHEDULE(table) {.phases = table, .n = sizeof table / sizeof table[0]}

// Plain language modelling.
static const TrainPhase TEXT[] = {{0}};

// Retrieval, the recipe of shared/probes/passkey_torch.py: first copy sequences at a short
// context (digit strings twice at random places in KJV filler, loss on the second copy only),
// where the copy circuit forms fast; then half passkeys, the needle-to-question gap widening
// from 16 tokens to the whole context over 60% of the phase (formation time grows with the
// distance to copy over), half text. The answer loss has its own mean (trainer.h).
// The copy phase trains copying only: a text loss on its filler slows the copy circuit (on the
// full target, copy loss 0.82 nats after 300 steps against 0.12 without). The passkey phase's
// filler teaches text instead, so its sequences are not lost to language modelling (answer-only
// passkeys left the target at 1.67 bits/byte).
// The copy phase runs at context 32, half the distance to copy over of context 64: under the
// "starcoder" pre-split (a lone " " token before each run of single digits) the full target's
// copy loss at context 64 was still 0.95 nats at step 400, against 0.036 at step 200 at context
// 32, and while its passkeys stayed unlearnt their gradient held the text back.
// The attention variants, with a fraction of the target's budget, copy for fewer steps.
#define RETRIEVAL(copy_steps, copy_len)                                                              \
    {{.steps = copy_steps, .seq_len = copy_len, .copy_frac = 1.0f},                                  \
     {.passkey_frac = 0.5f, .gap_from = 16, .gap_widen = 0.6f, .filler_text = 1}}
static const TrainPhase RETRIEVAL_QUICK[] = RETRIEVAL(20, 32);
static const TrainPhase RETRIEVAL_FULL_SHORT[] = RETRIEVAL(150, 32);
// The full target's: retrieval saturates by about step 850 (100% passkeys at step 837 of a
// 1500-step run that ended at 1.51 bits/byte), so after 900 passkey steps a third phase gives
// most sequences back to text, keeping a few passkeys at the whole context.
static const TrainPhase RETRIEVAL_THEN_TEXT[] = {
    {.steps = 200, .seq_len = 32, .copy_frac = 1.0f},
    {.steps = 900, .passkey_frac = 0.5f, .gap_from = 16, .gap_widen = 0.6f, .filler_text = 1},
    {.passkey_frac = 0.15f, .filler_text = 1},
};

// One row of a profile's table. head_dim = dim / heads; hidden = 8/3 dim rounded up to 16.
// MLA rows set kv_lora_rank and rope_dim (0 = not MLA), CLA rows kv_share (1 = no sharing).
typedef struct {
    const char *name, *role, *attention;
    int dim, layers, heads, kv_heads;
    int batch, steps, warmup;
    float lr;
    Schedule schedule;
    int kv_lora_rank, rope_dim, kv_share;
    int evals; // log rows (evaluations) over the run
} ZooEntry;

typedef struct {
    const char *name;
    int vocab_size, seq_len, passkey_samples, eval_tokens, eval_passkeys;
    const ZooEntry *entries;
    int n_entries;
} Profile;

// Only the target's training curve is a figure, so the others evaluate 4 times: 16 evaluations
// took 30% of an attention variant's training time (validation, passkeys, prefix matching) and
// put the full zoo over its 30 minutes of training. The attention variants: MLA has d_c = 4 hd
// and d_r = hd / 2 (DeepSeek-V2's ratios); GQA + CLA is attn-gqa with each pair of layers
// sharing keys and values (3 layers: sets {0, 1}, {2}). Parameters (tied embeddings): quick MHA
// 80112, GQA 75504, MQA 73200, MLA 87600 (d_c = 48 = dim here, so its projections outgrow
// MHA's), GQA + CLA 73200; full MHA 865152, GQA 791424, MQA 779136, MLA 868224, GQA + CLA 783232.
static const ZooEntry QUICK[] = {
    {.name = "target",       .role = "target",    .attention = "gqa",
     .dim = 64, .layers = 2, .heads = 4, .kv_heads = 2, .kv_lora_rank = 0,  .rope_dim = 0, .kv_share = 1,
     .batch = 8, .steps = 120, .warmup = 6, .lr = 3e-3f, .evals = 16, .schedule = SCHEDULE(RETRIEVAL_QUICK)},
    {.name = "draft-xs",     .role = "draft",     .attention = "mha",
     .dim = 16, .layers = 1, .heads = 2, .kv_heads = 2, .kv_lora_rank = 0,  .rope_dim = 0, .kv_share = 1,
     .batch = 8, .steps = 40,  .warmup = 2, .lr = 3e-3f, .evals = 4,  .schedule = SCHEDULE(TEXT)},
    {.name = "draft-s",      .role = "draft",     .attention = "mha",
     .dim = 32, .layers = 1, .heads = 2, .kv_heads = 2, .kv_lora_rank = 0,  .rope_dim = 0, .kv_share = 1,
     .batch = 8, .steps = 80,  .warmup = 4, .lr = 3e-3f, .evals = 4,  .schedule = SCHEDULE(TEXT)},
    {.name = "draft-m",      .role = "draft",     .attention = "gqa",
     .dim = 48, .layers = 2, .heads = 4, .kv_heads = 2, .kv_lora_rank = 0,  .rope_dim = 0, .kv_share = 1,
     .batch = 8, .steps = 100, .warmup = 5, .lr = 3e-3f, .evals = 4,  .schedule = SCHEDULE(TEXT)},
    {.name = "attn-mha",     .role = "attention", .attention = "mha",
     .dim = 48, .layers = 2, .heads = 4, .kv_heads = 4, .kv_lora_rank = 0,  .rope_dim = 0, .kv_share = 1,
     .batch = 8, .steps = 80,  .warmup = 4, .lr = 3e-3f, .evals = 4,  .schedule = SCHEDULE(RETRIEVAL_QUICK)},
    {.name = "attn-gqa",     .role = "attention", .attention = "gqa",
     .dim = 48, .layers = 2, .heads = 4, .kv_heads = 2, .kv_lora_rank = 0,  .rope_dim = 0, .kv_share = 1,
     .batch = 8, .steps = 80,  .warmup = 4, .lr = 3e-3f, .evals = 4,  .schedule = SCHEDULE(RETRIEVAL_QUICK)},
    {.name = "attn-mqa",     .role = "attention", .attention = "mqa",
     .dim = 48, .layers = 2, .heads = 4, .kv_heads = 1, .kv_lora_rank = 0,  .rope_dim = 0, .kv_share = 1,
     .batch = 8, .steps = 80,  .warmup = 4, .lr = 3e-3f, .evals = 4,  .schedule = SCHEDULE(RETRIEVAL_QUICK)},
    {.name = "attn-mla",     .role = "attention", .attention = "mla",
     .dim = 48, .layers = 2, .heads = 4, .kv_heads = 4, .kv_lora_rank = 48, .rope_dim = 6, .kv_share = 1,
     .batch = 8, .steps = 80,  .warmup = 4, .lr = 3e-3f, .evals = 4,  .schedule = SCHEDULE(RETRIEVAL_QUICK)},
    {.name = "attn-gqa-cla", .role = "attention", .attention = "gqa+cla",
     .dim = 48, .layers = 2, .heads = 4, .kv_heads = 2, .kv_lora_rank = 0,  .rope_dim = 0, .kv_share = 2,
     .batch = 8, .steps = 80,  .warmup = 4, .lr = 3e-3f, .evals = 4,  .schedule = SCHEDULE(RETRIEVAL_QUICK)},
};

static const ZooEntry FULL[] = {
    {.name = "target",       .role = "target",    .attention = "gqa",
     .dim = 192, .layers = 4, .heads = 6, .kv_heads = 2, .kv_lora_rank = 0,  .rope_dim = 0, .kv_share = 1,
     .batch = 16, .steps = 1800, .warmup = 20, .lr = 1e-3f, .evals = 16, .schedule = SCHEDULE(RETRIEVAL_THEN_TEXT)},
    {.name = "draft-xs",     .role = "draft",     .attention = "mha",
     .dim = 32,  .layers = 1, .heads = 2, .kv_heads = 2, .kv_lora_rank = 0,  .rope_dim = 0, .kv_share = 1,
     .batch = 16, .steps = 100,  .warmup = 5,  .lr = 5e-3f, .evals = 4,  .schedule = SCHEDULE(TEXT)},
    {.name = "draft-s",      .role = "draft",     .attention = "mha",
     .dim = 64,  .layers = 2, .heads = 4, .kv_heads = 4, .kv_lora_rank = 0,  .rope_dim = 0, .kv_share = 1,
     .batch = 16, .steps = 200,  .warmup = 10, .lr = 5e-3f, .evals = 4,  .schedule = SCHEDULE(TEXT)},
    {.name = "draft-m",      .role = "draft",     .attention = "gqa",
     .dim = 128, .layers = 3, .heads = 4, .kv_heads = 2, .kv_lora_rank = 0,  .rope_dim = 0, .kv_share = 1,
     .batch = 16, .steps = 300,  .warmup = 15, .lr = 3e-3f, .evals = 4,  .schedule = SCHEDULE(TEXT)},
    {.name = "attn-mha",     .role = "attention", .attention = "mha",
     .dim = 128, .layers = 3, .heads = 8, .kv_heads = 8, .kv_lora_rank = 0,  .rope_dim = 0, .kv_share = 1,
     .batch = 16, .steps = 300,  .warmup = 15, .lr = 1e-3f, .evals = 4,  .schedule = SCHEDULE(RETRIEVAL_FULL_SHORT)},
    {.name = "attn-gqa",     .role = "attention", .attention = "gqa",
     .dim = 128, .layers = 3, .heads = 8, .kv_heads = 2, .kv_lora_rank = 0,  .rope_dim = 0, .kv_share = 1,
     .batch = 16, .steps = 300,  .warmup = 15, .lr = 1e-3f, .evals = 4,  .schedule = SCHEDULE(RETRIEVAL_FULL_SHORT)},
    {.name = "attn-mqa",     .role = "attention", .attention = "mqa",
     .dim = 128, .layers = 3, .heads = 8, .kv_heads = 1, .kv_lora_rank = 0,  .rope_dim = 0, .kv_share = 1,
     .batch = 16, .steps = 300,  .warmup = 15, .lr = 1e-3f, .evals = 4,  .schedule = SCHEDULE(RETRIEVAL_FULL_SHORT)},
    {.name = "attn-mla",     .role = "attention", .attention = "mla",
     .dim = 128, .layers = 3, .heads = 8, .kv_heads = 8, .kv_lora_rank = 64, .rope_dim = 8, .kv_share = 1,
     .batch = 16, .steps = 300,  .warmup = 15, .lr = 1e-3f, .evals = 4,  .schedule = SCHEDULE(RETRIEVAL_FULL_SHORT)},
    {.name = "attn-gqa-cla", .role = "attention", .attention = "gqa+cla",
     .dim = 128, .layers = 3, .heads = 8, .kv_heads = 2, .kv_lora_rank = 0,  .rope_dim = 0, .kv_share = 2,
     .batch = 16, .steps = 300,  .warmup = 15, .lr = 1e-3f, .evals = 4,  .schedule = SCHEDULE(RETRIEVAL_FULL_SHORT)},
};

static const Profile PROFILES[] = {
    {.name = "quick", .vocab_size = 512, .seq_len = 128, .passkey_samples = 20, .eval_tokens = 4096,
     .eval_passkeys = 10, .entries = QUICK, .n_entries = sizeof QUICK / sizeof QUICK[0]},
    {.name = "full", .vocab_size = 2048, .seq_len = 256, .passkey_samples = 200, .eval_tokens = 16384,
     .eval_passkeys = 100, .entries = FULL, .n_entries = sizeof FULL / sizeof FULL[0]},
};

static int schedule_teaches_retrieval(const Schedule *s) {
    for (int i = 0; i < s->n; i++)
        if (s->phases[i].copy_frac > 0 || s->phases[i].passkey_frac > 0) return 1;
    return 0;
}

static ZooModel zoo_model(const Profile *p, const ZooEntry *e) {
    ZooModel m;
    memset(&m, 0, sizeof m);
    snprintf(m.name, sizeof m.name, "%s", e->name);
    snprintf(m.role, sizeof m.role, "%s", e->role);
    snprintf(m.attention, sizeof m.attention, "%s", e->attention);
    Config c = config_default();
    c.dim = e->dim;
    c.hidden_dim = (e->dim * 8 / 3 + 15) / 16 * 16;
    c.n_layers = e->layers;
    c.n_heads = e->heads;
    c.n_kv_heads = e->kv_heads;
    c.head_dim = e->dim / e->heads;
    c.vocab_size = p->vocab_size;
    c.seq_len = p->seq_len;
    c.tied_embeddings = 1;
    c.kv_lora_rank = e->kv_lora_rank;
    c.rope_dim = e->rope_dim;
    c.kv_share = e->kv_share;
    m.config = c;
    TrainConfig tc = train_config_default();
    tc.batch_size = e->batch;
    tc.seq_len = p->seq_len;
    tc.steps = e->steps;
    tc.warmup_steps = e->warmup;
    tc.lr = e->lr;
    tc.n_phases = e->schedule.n;
    memcpy(tc.phases, e->schedule.phases, (size_t)e->schedule.n * sizeof(TrainPhase));
    tc.eval_every = e->steps / e->evals > 1 ? e->steps / e->evals : 1;
    tc.eval_tokens = p->eval_tokens;
    // A model never taught to retrieve (a text-only schedule) scores no passkeys; the target
    // is scored over the whole grid of contexts, the attention variants at their training
    // context, where the report compares them.
    int retrieves = schedule_teaches_retrieval(&e->schedule);
    tc.eval_passkeys = retrieves ? p->eval_passkeys : 0;
    m.passkey_contexts = !retrieves ? 0 : strcmp(e->role, "target") == 0 ? 3 : 1;
    tc.seed = 1;
    m.train = tc;
    return m;
}

int zoo_for_profile(Zoo *z, const char *profile, Error *err) {
    memset(z, 0, sizeof *z);
    for (size_t i = 0; i < sizeof PROFILES / sizeof PROFILES[0]; i++) {
        const Profile *p = &PROFILES[i];
        if (strcmp(p->name, profile) != 0) continue;
        snprintf(z->profile, sizeof z->profile, "%s", p->name);
        z->vocab_size = p->vocab_size;
        z->seq_len = p->seq_len;
        z->passkey_samples = p->passkey_samples;
        z->n_models = p->n_entries;
        for (int j = 0; j < p->n_entries; j++) z->models[j] = zoo_model(p, &p->entries[j]);
        return 0;
    }
    return error_set(err, "unknown profile '%s' (quick or full)", profile);
}

const ZooModel *zoo_find(const Zoo *z, const char *name) {
    for (int i = 0; i < z->n_models; i++)
        if (strcmp(z->models[i].name, name) == 0) return &z->models[i];
    return NULL;
}

const ZooModel *zoo_with_role(const Zoo *z, const char *role, int i) {
    for (int j = 0; j < z->n_models; j++)
        if (strcmp(z->models[j].role, role) == 0 && i-- == 0) return &z->models[j];
    return NULL;
}

// Hash values field by field (never whole structs: their padding bytes are undefined).
static uint64_t hash_int(uint64_t h, int64_t v) { return fnv1a(h, &v, sizeof v); }
static uint64_t hash_float(uint64_t h, float v) { return fnv1a(h, &v, sizeof v); }

uint64_t zoo_model_key(const ZooModel *m, uint64_t corpus_hash) {
    const Config *c = &m->config;
    const TrainConfig *t = &m->train;
    uint64_t h = hash_int(FNV_OFFSET, TRAIN_CODE_VERSION);
    h = hash_int(h, (int64_t)corpus_hash);
    int64_t ints[] = {c->dim, c->hidden_dim, c->n_layers, c->n_heads, c->n_kv_heads, c->head_dim, c->vocab_size,
                      c->seq_len, c->window, c->n_sink, c->tied_embeddings, c->rope.scaling, c->rope.orig_ctx,
                      t->batch_size, t->seq_len, t->grad_accum, t->steps, t->warmup_steps, t->eval_every, t->eval_tokens,
                      t->eval_passkeys, (int64_t)t->seed, t->n_phases};
    float floats[] = {c->norm_eps, c->rope.theta, c->rope.factor, c->rope.beta_fast, c->rope.beta_slow,
                      t->lr, t->min_lr_ratio, t->weight_decay, t->beta1, t->beta2, t->adam_eps, t->grad_clip,
                      t->init_std};
    for (size_t i = 0; i < sizeof ints / sizeof ints[0]; i++) h = hash_int(h, ints[i]);
    // MLA and CLA fields join the hash only when set, so the keys of the models that came
    // before them (and so their cached files) stay valid.
    if (c->kv_lora_rank) h = hash_int(hash_int(h, c->kv_lora_rank), c->rope_dim);
    if (c->kv_share > 1) h = hash_int(h, c->kv_share);
    for (size_t i = 0; i < sizeof floats / sizeof floats[0]; i++) h = hash_float(h, floats[i]);
    for (int i = 0; i < t->n_phases; i++) {
        const TrainPhase *p = &t->phases[i];
        h = hash_int(hash_int(hash_int(h, p->steps), p->seq_len), p->gap_from);
        h = hash_float(hash_float(hash_float(h, p->copy_frac), p->passkey_frac), p->gap_widen);
        h = hash_int(h, p->filler_text);
    }
    return h;
}

void zoo_path(char *out, size_t size, const char *dir, const char *name, const char *suffix) {
    if ((size_t)snprintf(out, size, "%s/%s%s", dir, name, suffix) >= size)
        die("path '%s/%s%s' is too long", dir, name, suffix);
}
