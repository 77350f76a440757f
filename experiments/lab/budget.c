// budget.c: the hardware budget formulas and the reader of their reference tables (see
// budget.h). Every formula is a few lines of arithmetic on the shape, so that a test can
// check it against a hand computation.
#include "budget.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "csv.h"

double num_format_bytes(NumFormat d) {
    static const double bytes[] = {[NUM_FP32] = 4.0, [NUM_BF16] = 2.0, [NUM_INT8] = 1.0, [NUM_INT4] = 0.5};
    return bytes[d];
}

const char *num_format_name(NumFormat d) {
    static const char *names[] = {[NUM_FP32] = "fp32", [NUM_BF16] = "bf16", [NUM_INT8] = "int8",
                                  [NUM_INT4] = "int4"};
    return names[d];
}

ModelShape budget_shape_from_config(const Config *c, const char *name, const char *source) {
    ModelShape m;
    memset(&m, 0, sizeof m);
    snprintf(m.name, sizeof m.name, "%s", name);
    snprintf(m.source, sizeof m.source, "%s", source);
    m.n_params = m.n_params_active = (double)model_param_count(c);
    m.n_layers = c->n_layers;
    m.dim = c->dim;
    m.hidden_dim = c->hidden_dim;
    m.n_heads = c->n_heads;
    m.n_kv_heads = c->n_kv_heads;
    m.head_dim = c->head_dim;
    m.vocab_size = c->vocab_size;
    m.max_context = c->seq_len;
    m.window = c->window;
    m.global_every = config_has_local_layers(c) ? c->global_every : 0;
    m.tied_embeddings = c->tied_embeddings;
    return m;
}

// --- memory -------------------------------------------------------------------------------

double budget_weight_bytes(const ModelShape *m, NumFormat weights) { return m->n_params * num_format_bytes(weights); }

double budget_kv_bytes_per_token(const ModelShape *m, NumFormat kv) {
    double per_layer = m->kv_lora_rank > 0 ? (double)m->kv_lora_rank + m->rope_head_dim
                                           : 2.0 * m->n_kv_heads * m->head_dim;
    return m->n_layers * per_layer * num_format_bytes(kv);
}

double budget_kv_tokens_per_sequence(const ModelShape *m, int context) {
    int windowed = m->window > 0 && m->window < context ? m->window : context;
    if (m->global_every <= 1) return windowed;
    int global = m->n_layers / m->global_every; // layers k - 1, 2k - 1, ...
    return ((double)global * context + (double)(m->n_layers - global) * windowed) / m->n_layers;
}

double budget_kv_tokens_fit(const ModelShape *m, const HardwareSpec *hw, Precision p) {
    double free_bytes = hw->memory_bytes - budget_weight_bytes(m, p.weights);
    return free_bytes > 0 ? floor(free_bytes / budget_kv_bytes_per_token(m, p.act)) : 0.0;
}

// --- work -----------------------------------------------------------------------------------

// The input embedding table: read one row per token, never multiplied with (unless tied).
static double lookup_params(const ModelShape *m) {
    return m->tied_embeddings ? 0.0 : (double)m->vocab_size * m->dim;
}

double budget_matmul_params(const ModelShape *m) {
    double norm_gains = (2.0 * m->n_layers + 1.0) * m->dim;
    return m->n_params_active - lookup_params(m) - norm_gains;
}

double budget_attention_flops_per_pair(const ModelShape *m, int decode) {
    double H = m->n_heads, hd = m->head_dim, r = m->kv_lora_rank, rope = m->rope_head_dim;
    double per_layer;
    if (m->kv_lora_rank > 0 && decode) per_layer = 2.0 * H * (2.0 * r + rope);
    else if (m->kv_lora_rank > 0) per_layer = 2.0 * H * (hd + rope) + 2.0 * H * hd;
    else per_layer = 4.0 * H * hd;
    return m->n_layers * per_layer;
}

double budget_decode_flops(const ModelShape *m, int batch, int context) {
    double per_sequence = 2.0 * budget_matmul_params(m) +
                          budget_attention_flops_per_pair(m, 1) * budget_kv_tokens_per_sequence(m, context);
    return batch * per_sequence;
}

// Parameters read from memory when `rows` tokens go through the model at once.
static double params_read(const ModelShape *m, int rows) {
    double touched = fmin(m->n_params, rows * m->n_params_active);
    return touched - lookup_params(m);
}

double budget_decode_bytes(const ModelShape *m, Precision p, int batch, int context) {
    double kv = (double)batch * budget_kv_tokens_per_sequence(m, context) * budget_kv_bytes_per_token(m, p.act);
    return params_read(m, batch) * num_format_bytes(p.weights) + kv;
}

double budget_prefill_flops(const ModelShape *m, int tokens) {
    // Query-key pairs of a causal prefill: position t sees min(t + 1, window) keys.
    double pairs = 0.0;
    for (int t = 0; t < tokens; t++) pairs += budget_kv_tokens_per_sequence(m, t + 1);
    return 2.0 * budget_matmul_params(m) * tokens + budget_attention_flops_per_pair(m, 0) * pairs;
}

double budget_prefill_bytes(const ModelShape *m, Precision p, int tokens) {
    return params_read(m, tokens) * num_format_bytes(p.weights) + tokens * budget_kv_bytes_per_token(m, p.act);
}

double budget_mlp_flops(const ModelShape *m, int batch) {
    return 6.0 * batch * (double)m->dim * m->hidden_dim;
}

double budget_mlp_bytes(const ModelShape *m, Precision p, int batch) {
    return 3.0 * (double)m->dim * m->hidden_dim * num_format_bytes(p.weights) +
           2.0 * batch * (double)m->dim * num_format_bytes(p.act);
}

// --- the roofline ---------------------------------------------------------------------------

double budget_peak_flop_s(const HardwareSpec *hw, Precision p) {
    return p.act == NUM_FP32 ? hw->fp32_flop_s : hw->bf16_flop_s;
}

double budget_ridge(const HardwareSpec *hw, Precision p) { return budget_peak_flop_s(hw, p) / hw->bandwidth_bytes_s; }

Roofline budget_roofline(const HardwareSpec *hw, Precision p, double flops, double bytes) {
    double peak = budget_peak_flop_s(hw, p), bw = hw->bandwidth_bytes_s;
    Roofline r;
    r.flops = flops;
    r.bytes = bytes;
    r.intensity = flops / bytes;
    r.attainable_flop_s = fmin(peak, r.intensity * bw);
    double compute_s = flops / peak, memory_s = bytes / bw;
    r.compute_bound = compute_s > memory_s;
    r.time_s = r.compute_bound ? compute_s : memory_s;
    return r;
}

Budget budget_compute(const ModelShape *m, const HardwareSpec *hw, Precision p, int context, int large_batch,
                      int prefill_tokens) {
    Budget b;
    b.weight_bytes = budget_weight_bytes(m, p.weights);
    b.kv_bytes_per_token = budget_kv_bytes_per_token(m, p.act);
    b.kv_tokens_fit = budget_kv_tokens_fit(m, hw, p);
    b.kv_bytes_large = (double)large_batch * budget_kv_tokens_per_sequence(m, context) * b.kv_bytes_per_token;
    b.fits_large = b.weight_bytes + b.kv_bytes_large <= hw->memory_bytes;
    b.decode_1 = budget_roofline(hw, p, budget_decode_flops(m, 1, context), budget_decode_bytes(m, p, 1, context));
    b.decode_large = budget_roofline(hw, p, budget_decode_flops(m, large_batch, context),
                                     budget_decode_bytes(m, p, large_batch, context));
    b.throughput_tok_s = large_batch / b.decode_large.time_s;
    b.prefill = budget_roofline(hw, p, budget_prefill_flops(m, prefill_tokens),
                                budget_prefill_bytes(m, p, prefill_tokens));
    return b;
}

// --- reference tables ---------------------------------------------------------------------

static int parse_double(const char *text, const char *path, int line, const char *column, double lo, double hi,
                        double *out, Error *err) {
    char *end;
    errno = 0;
    double v = strtod(text, &end);
    if (end == text || *end != '\0' || errno == ERANGE || !isfinite(v))
        return error_set(err, "%s:%d: column '%s': '%s' is not a number", path, line, column, text);
    if (v < lo || v > hi)
        return error_set(err, "%s:%d: column '%s': %g is out of range [%g, %g]", path, line, column, v, lo, hi);
    *out = v;
    return 0;
}

static int parse_int(const char *text, const char *path, int line, const char *column, int lo, int hi, int *out,
                     Error *err) {
    char *end;
    errno = 0;
    long v = strtol(text, &end, 10);
    if (end == text || *end != '\0' || errno == ERANGE)
        return error_set(err, "%s:%d: column '%s': '%s' is not an integer", path, line, column, text);
    if (v < lo || v > hi)
        return error_set(err, "%s:%d: column '%s': %ld is out of range [%d, %d]", path, line, column, v, lo, hi);
    *out = (int)v;
    return 0;
}

static int parse_text(const char *text, const char *path, int line, const char *column, char *out, size_t size,
                      Error *err) {
    if (text[0] == '\0') return error_set(err, "%s:%d: column '%s' is empty", path, line, column);
    if (strlen(text) >= size)
        return error_set(err, "%s:%d: column '%s' is longer than %zu bytes", path, line, column, size - 1);
    memcpy(out, text, strlen(text) + 1);
    return 0;
}

// A growing array of fixed-size items.
typedef struct {
    void *items;
    int n, cap;
    size_t size;
} Vec;

static void *vec_push(Vec *v) {
    if (v->n == v->cap) {
        v->cap = v->cap ? 2 * v->cap : 16;
        v->items = reallocCheck(v->items, (size_t)v->cap * v->size);
    }
    void *slot = (char *)v->items + (size_t)v->n++ * v->size;
    memset(slot, 0, v->size);
    return slot;
}

// Names must be unique: the budget's rows are keyed by them. Both row types (HardwareSpec,
// ModelShape) begin with their name, so the name of item i sits at its start.
static int check_unique(const Vec *v, const char *name, const char *path, int line, Error *err) {
    for (int i = 0; i + 1 < v->n; i++)
        if (strcmp((const char *)v->items + (size_t)i * v->size, name) == 0)
            return error_set(err, "%s:%d: name '%s' appears twice", path, line, name);
    return 0;
}

static const char *const HARDWARE_COLUMNS[] = {"name",        "kind",        "memory_bytes", "bandwidth_bytes_s",
                                               "bf16_flop_s", "fp32_flop_s", "source"};

static int parse_hardware(void *table, char **v, const char *path, int line, Error *err) {
    Vec *vec = table;
    HardwareSpec *h = vec_push(vec);
    const char *const *col = HARDWARE_COLUMNS;
    if (parse_text(v[0], path, line, col[0], h->name, sizeof h->name, err) ||
        parse_text(v[1], path, line, col[1], h->kind, sizeof h->kind, err) ||
        parse_double(v[2], path, line, col[2], 1.0, 1e16, &h->memory_bytes, err) ||
        parse_double(v[3], path, line, col[3], 1.0, 1e16, &h->bandwidth_bytes_s, err) ||
        parse_double(v[4], path, line, col[4], 1.0, 1e19, &h->bf16_flop_s, err) ||
        parse_double(v[5], path, line, col[5], 1.0, 1e19, &h->fp32_flop_s, err) ||
        parse_text(v[6], path, line, col[6], h->source, sizeof h->source, err))
        return -1;
    if (strcmp(h->kind, "gpu") != 0 && strcmp(h->kind, "cpu") != 0)
        return error_set(err, "%s:%d: column 'kind': '%s' is neither gpu nor cpu", path, line, h->kind);
    return check_unique(vec, h->name, path, line, err);
}

int budget_load_hardware(const char *path, HardwareSpec **out, int *n, Error *err) {
    Vec v = {NULL, 0, 0, sizeof(HardwareSpec)};
    int rc = csv_read_table(path, HARDWARE_COLUMNS, 7, parse_hardware, &v, err);
    if (rc == 0 && v.n == 0) rc = error_set(err, "%s: no hardware rows", path);
    if (rc) {
        free(v.items);
        return -1;
    }
    *out = v.items;
    *n = v.n;
    return 0;
}

static const char *const MODEL_COLUMNS[] = {
    "name",       "n_params",    "n_params_active", "n_layers",     "dim",           "hidden_dim",
    "n_heads",    "n_kv_heads",  "head_dim",        "vocab_size",   "max_context",   "window",
    "kv_lora_rank", "rope_head_dim", "tied_embeddings", "source"};

// The shape must describe a model the formulas make sense for.
static int check_model(const ModelShape *m, const char *path, int line, Error *err) {
    const char *bad = NULL;
    if (m->n_params_active > m->n_params) bad = "n_params_active exceeds n_params";
    else if (m->n_heads % m->n_kv_heads != 0) bad = "n_heads is not a multiple of n_kv_heads";
    else if (m->kv_lora_rank == 0 && m->rope_head_dim != 0) bad = "rope_head_dim is set but kv_lora_rank is 0";
    else if (budget_matmul_params(m) <= 0) bad = "n_params_active does not exceed the embedding table and norms";
    return bad ? error_set(err, "%s:%d: model '%s': %s", path, line, m->name, bad) : 0;
}

static int parse_model(void *table, char **v, const char *path, int line, Error *err) {
    Vec *vec = table;
    ModelShape *m = vec_push(vec);
    const char *const *col = MODEL_COLUMNS;
    enum { BIG = 1 << 24 };
    int *ints[] = {&m->n_layers, &m->dim,        &m->hidden_dim,   &m->n_heads,        &m->n_kv_heads,
                   &m->head_dim, &m->vocab_size, &m->max_context,  &m->window,         &m->kv_lora_rank,
                   &m->rope_head_dim, &m->tied_embeddings};
    static const int lo[] = {1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0};
    static const int hi[] = {BIG, BIG, BIG, BIG, BIG, BIG, BIG, 1 << 30, 1 << 30, BIG, BIG, 1};
    if (parse_text(v[0], path, line, col[0], m->name, sizeof m->name, err) ||
        parse_double(v[1], path, line, col[1], 1.0, 1e15, &m->n_params, err) ||
        parse_double(v[2], path, line, col[2], 1.0, 1e15, &m->n_params_active, err))
        return -1;
    for (int i = 0; i < 12; i++)
        if (parse_int(v[3 + i], path, line, col[3 + i], lo[i], hi[i], ints[i], err)) return -1;
    if (parse_text(v[15], path, line, col[15], m->source, sizeof m->source, err)) return -1;
    return check_model(m, path, line, err) || check_unique(vec, m->name, path, line, err) ? -1 : 0;
}

int budget_load_models(const char *path, ModelShape **out, int *n, Error *err) {
    Vec v = {NULL, 0, 0, sizeof(ModelShape)};
    int rc = csv_read_table(path, MODEL_COLUMNS, 16, parse_model, &v, err);
    if (rc == 0 && v.n == 0) rc = error_set(err, "%s: no model rows", path);
    if (rc) {
        free(v.items);
        return -1;
    }
    *out = v.items;
    *n = v.n;
    return 0;
}
