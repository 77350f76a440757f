// variants.c: KV-cache arithmetic, budgets and the zoo's records for bin/attention_variants
// (see variants.h).
#include "variants.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "csv.h"
#include "kvcache.h"
#include "zoo.h"

AvKv av_kv(const Config *c) {
    AvKv kv;
    kv.cached_layers = (c->n_layers + c->kv_share - 1) / c->kv_share; // CLA: one cache per set of layers
    kv.elements_per_cached_layer = c->kv_lora_rank > 0 ? (double)c->kv_lora_rank + c->rope_dim // MLA: [c_kv; k_R]
                                                       : 2.0 * c->n_kv_heads * c->head_dim;
    kv.elements_per_token_layer = kv.cached_layers * kv.elements_per_cached_layer / c->n_layers;
    kv.bytes_per_token = kv.cached_layers * kv.elements_per_cached_layer * AV_ELEMENT_BYTES;
    return kv;
}

// Per cached layer: capacity positions, or a hybrid model's local layer its window and sinks
// (the ring of one-token forwards, model_kv_cache_rows).
size_t av_kv_formula_bytes(const Config *c, int capacity) {
    AvKv kv = av_kv(c);
    size_t bytes = 0;
    for (int g = 0; g < kv.cached_layers; g++)
        bytes += model_kv_cache_rows(c, g, capacity, 1) * (size_t)(kv.elements_per_cached_layer * AV_ELEMENT_BYTES);
    return bytes;
}

AvLayerKinds av_kv_layer_kinds(const Config *c, int capacity) {
    AvLayerKinds k = {0};
    double row_bytes = (double)config_kv_row(c) * AV_ELEMENT_BYTES; // one position of one KV layer
    k.full_layers = config_full_attention_layers(c);
    k.full_layer_bytes = capacity * row_bytes;
    for (int g = 0; g < config_kv_layers(c) && k.windowed_layer_bytes == 0.0; g++)
        if (config_has_local_layers(c) && !config_layer_attention(c, g).global)
            k.windowed_layer_bytes = (double)model_kv_cache_rows(c, g, capacity, 1) * row_bytes;
    k.mha_bytes = 2.0 * c->n_heads * c->head_dim * c->n_layers * (double)capacity * AV_ELEMENT_BYTES;
    return k;
}

size_t av_kv_allocated_bytes(const Ops *ops, const Config *c, int capacity) {
    size_t before = ops->allocated_bytes();
    KVCache cache;
    model_kv_cache_alloc(&cache, ops, c, capacity, 1);
    size_t bytes = ops->allocated_bytes() - before;
    kv_cache_free(&cache);
    return bytes;
}

// The largest n with n * unit <= budget. The quotient rounded can land on the next integer
// when the exact one is just below it, so the product decides.
static long fit_count(double budget_bytes, double unit_bytes) {
    long n = (long)floor(budget_bytes / unit_bytes);
    while (n > 0 && n * unit_bytes > budget_bytes) n--;
    while ((n + 1) * unit_bytes <= budget_bytes) n++;
    return n;
}

long av_budget_tokens(double budget_bytes, double bytes_per_token) { return fit_count(budget_bytes, bytes_per_token); }

long av_budget_batch(double budget_bytes, double bytes_per_token, int context) {
    return fit_count(budget_bytes, bytes_per_token * context);
}

void av_attention_name(char *out, size_t size, int n_heads, int n_kv_heads, int kv_lora_rank) {
    if (kv_lora_rank > 0) snprintf(out, size, "mla");
    else if (n_kv_heads == n_heads) snprintf(out, size, "mha");
    else if (n_kv_heads == 1) snprintf(out, size, "mqa");
    else snprintf(out, size, "gqa-%d", n_kv_heads);
}

AvPresetKv av_preset_kv(const ModelShape *m, double memory_bytes) {
    AvPresetKv p;
    av_attention_name(p.attention, sizeof p.attention, m->n_heads, m->n_kv_heads, m->kv_lora_rank);
    Precision half = {NUM_BF16, NUM_BF16}; // 2-byte weights and cache: bf16 or fp16 alike
    p.bytes_per_token = budget_kv_bytes_per_token(m, half.act);
    p.elements_per_token_layer = p.bytes_per_token / (num_format_bytes(half.act) * m->n_layers);
    p.mha_elements_per_token_layer = 2.0 * m->n_heads * m->head_dim;
    p.reduction_vs_mha = p.mha_elements_per_token_layer / p.elements_per_token_layer;
    p.context_fit = av_budget_tokens(memory_bytes, p.bytes_per_token);
    HardwareSpec memory = {.memory_bytes = memory_bytes};
    p.context_fit_beside_weights = budget_kv_tokens_fit(m, &memory, half);
    return p;
}

// ---- the zoo's records ----------------------------------------------------------------------

static const char *const RECORD_COLUMNS[] = {"name", "params", "val_bits_per_byte", "passkey_accuracy"};

typedef struct {
    const char *name;
    AvRecord record;
    int rows;
} RecordRead;

static int parse_number(const char *text, const char *path, int line, const char *column, double *out, Error *err) {
    char *end;
    errno = 0;
    double v = strtod(text, &end);
    if (end == text || *end != '\0' || errno == ERANGE || !isfinite(v) || v < 0)
        return error_set(err, "%s:%d: column '%s': '%s' is not a non-negative number", path, line, column, text);
    *out = v;
    return 0;
}

static int parse_record(void *table, char **v, const char *path, int line, Error *err) {
    RecordRead *r = table;
    if (strcmp(v[0], r->name) != 0)
        return error_set(err, "%s:%d: the record of '%s', not of '%s'", path, line, v[0], r->name);
    if (++r->rows > 1) return error_set(err, "%s:%d: more than one record", path, line);
    AvRecord *rec = &r->record;
    if (parse_number(v[1], path, line, RECORD_COLUMNS[1], &rec->params, err) ||
        parse_number(v[2], path, line, RECORD_COLUMNS[2], &rec->val_bits_per_byte, err) ||
        parse_number(v[3], path, line, RECORD_COLUMNS[3], &rec->passkey_accuracy, err))
        return -1;
    if (rec->passkey_accuracy > 1)
        return error_set(err, "%s:%d: passkey_accuracy %g is not in [0, 1]", path, line, rec->passkey_accuracy);
    return 0;
}

int av_read_record(const char *dir, const char *name, AvRecord *out, Error *err) {
    char path[1024];
    zoo_path(path, sizeof path, dir, name, ".summary.csv");
    RecordRead r = {name, {0, 0, 0}, 0};
    if (csv_read_table(path, RECORD_COLUMNS, 4, parse_record, &r, err)) return -1;
    if (r.rows == 0) return error_set(err, "%s: no record (bin/train writes one per trained model)", path);
    *out = r.record;
    return 0;
}
