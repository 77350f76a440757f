// llama2c.c: llama2.c checkpoints in and out (llama2c.h describes the formats).
// Tests: `make build/tests/test_gguf && ./build/tests/test_gguf`.
#include "llama2c.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "arch.h"

#define LLAMA2C_MAGIC 0x616b3432u
#define LEGACY_HEADER_BYTES 28
#define V1_HEADER_BYTES 256

// A run of floats in the file: weights, or the RoPE tables only the legacy format holds.
typedef enum { SECTION_WEIGHTS, SECTION_FREQ_COS, SECTION_FREQ_SIN } SectionKind;

typedef struct {
    SectionKind kind;
    float *data;
    size_t n;
} Section;

#define MAX_SECTIONS 16

// The weights of a llama2.c file, in its order: each tensor kind across all layers (arch.h's
// names), and the RoPE tables (freq_cos, freq_sin) only the legacy format holds.
static const char *const V0_ORDER[] = {"token_embd", "attn_norm", "attn_q", "attn_k", "attn_v", "attn_output",
                                       "ffn_norm", "ffn_gate", "ffn_down", "ffn_up", "output_norm", "freq_cos",
                                       "freq_sin", "output", NULL};
static const char *const V1_ORDER[] = {"attn_norm", "ffn_norm", "output_norm", "token_embd", "attn_q", "attn_k",
                                       "attn_v", "attn_output", "ffn_gate", "ffn_down", "ffn_up", "output", NULL};

// The sections of a version-0 or version-1 file, in file order; returns how many.
static int llama2c_sections(const Config *c, const Weights *w, int version, Section *s) {
    const char *const *order = version == 0 ? V0_ORDER : V1_ORDER;
    int n = 0;
    for (int i = 0; order[i]; i++) {
        int cos = strcmp(order[i], "freq_cos") == 0, sin = strcmp(order[i], "freq_sin") == 0;
        if (cos || sin) {
            s[n++] = (Section){cos ? SECTION_FREQ_COS : SECTION_FREQ_SIN, NULL, (size_t)c->seq_len * c->head_dim / 2};
            continue;
        }
        const TensorSpec *spec = arch_find(model_arch(c), order[i]);
        if (tensor_instances(c, spec)) s[n++] = (Section){SECTION_WEIGHTS, tensor_host(w, spec), tensor_floats(c, spec)};
    }
    return n;
}

// Bytes a file of this config and version must have.
static size_t llama2c_file_size(const Config *c, int version) {
    size_t floats = model_param_count(c);
    if (version == 0) floats += (size_t)c->seq_len * c->head_dim; // freq_cis real + imag
    return (version == 0 ? LEGACY_HEADER_BYTES : V1_HEADER_BYTES) + floats * sizeof(float);
}

// h: {dim, hidden_dim, n_layers, n_heads, n_kv_heads, vocab_size (> 0), seq_len}.
static int config_from_header(const char *path, const int32_t h[7], int shared, Config *c, Error *err) {
    *c = config_default();
    c->dim = h[0];
    c->hidden_dim = h[1];
    c->n_layers = h[2];
    c->n_heads = h[3];
    c->n_kv_heads = h[4];
    c->vocab_size = h[5];
    c->seq_len = h[6];
    c->head_dim = c->n_heads > 0 ? c->dim / c->n_heads : 0;
    c->tied_embeddings = shared;
    c->rope.orig_ctx = c->seq_len;
    char why[128] = "";
    if (c->n_heads > 0 && c->dim % c->n_heads != 0)
        snprintf(why, sizeof why, "dim is not a multiple of n_heads");
    else
        config_validate(c, why, sizeof why);
    if (why[0])
        return error_set(err,
                         "%s: bad llama2.c header (dim %d, hidden_dim %d, n_layers %d, n_heads %d, "
                         "n_kv_heads %d, vocab_size %d, seq_len %d): %s",
                         path, h[0], h[1], h[2], h[3], h[4], h[5], h[6], why);
    return 0;
}

// Parse either header from the first bytes of the file (got of them).
static int parse_header(const char *path, const uint8_t *head, size_t got, Config *c, int *version,
                        Error *err) {
    int32_t h[7];
    uint32_t magic = 0;
    int shared;
    if (got >= 4) memcpy(&magic, head, 4);
    if (magic == LLAMA2C_MAGIC) {
        int32_t v;
        if (got < V1_HEADER_BYTES)
            return error_set(err, "%s: truncated: %zu bytes, a version-1 llama2.c header has %d", path, got,
                             V1_HEADER_BYTES);
        memcpy(&v, head + 4, 4);
        if (v != 1)
            return error_set(
                err, "%s: llama2.c checkpoint version %d is not supported (only fp32 versions 0 and 1)", path,
                v);
        memcpy(h, head + 8, sizeof h);
        shared = head[8 + sizeof h];
        if (shared > 1) return error_set(err, "%s: shared_classifier flag is %d (not 0 or 1)", path, shared);
        if (h[5] <= 0) return error_set(err, "%s: vocab_size %d is not positive", path, h[5]);
        *version = 1;
    } else {
        if (got < LEGACY_HEADER_BYTES)
            return error_set(err, "%s: truncated: %zu bytes, a llama2.c header has %d", path, got,
                             LEGACY_HEADER_BYTES);
        memcpy(h, head, sizeof h);
        if (h[5] == INT32_MIN || h[5] == 0) return error_set(err, "%s: vocab_size %d is invalid", path, h[5]);
        shared = h[5] > 0; // the legacy format's sign flag: negative = separate classifier
        h[5] = abs(h[5]);
        *version = 0;
    }
    return config_from_header(path, h, shared, c, err);
}

static int read_sections(FILE *f, const char *path, const Section *s, int n, Error *err) {
    for (int i = 0; i < n; i++) {
        int ok = s[i].kind == SECTION_WEIGHTS ? fread(s[i].data, sizeof(float), s[i].n, f) == s[i].n
                                              : fseek(f, (long)(s[i].n * sizeof(float)), SEEK_CUR) == 0;
        if (!ok)
            return error_set(err, "%s: read failed: %s", path,
                             feof(f) ? "unexpected end of file" : strerror(errno));
    }
    return 0;
}

int llama2c_load_model(const char *path, Model *m, Error *err) {
    FILE *f = fopen(path, "rb");
    if (!f) return error_set(err, "%s: cannot open: %s", path, strerror(errno));
    struct stat st;
    uint8_t head[V1_HEADER_BYTES];
    Config c;
    int version = 0, rc = 0;
    if (fstat(fileno(f), &st) != 0 || !S_ISREG(st.st_mode))
        rc = error_set(err, "%s: not a regular file", path);
    if (rc == 0) rc = parse_header(path, head, fread(head, 1, sizeof head, f), &c, &version, err);
    if (rc == 0 && (size_t)st.st_size != llama2c_file_size(&c, version))
        rc = error_set(err,
                       "%s: the file has %lld bytes but its version-%d llama2.c header implies %zu "
                       "(a truncated file, or not an fp32 llama2.c checkpoint)",
                       path, (long long)st.st_size, version, llama2c_file_size(&c, version));
    if (rc == 0) {
        model_alloc(m, &c);
        Section s[MAX_SECTIONS];
        int n = llama2c_sections(&c, &m->weights, version, s);
        rc = fseek(f, version == 0 ? LEGACY_HEADER_BYTES : V1_HEADER_BYTES, SEEK_SET) != 0
                 ? error_set(err, "%s: seek failed: %s", path, strerror(errno))
                 : read_sections(f, path, s, n, err);
        if (rc) model_free(m);
    }
    fclose(f);
    return rc;
}

// One of llama2.c's RoPE tables, (seq_len, head_dim / 2): cos or sin of pos * theta^(-2i/hd).
static void write_freq_table(FILE *f, const Config *c, int sine) {
    int half = c->head_dim / 2;
    float *row = mallocCheck((size_t)half * sizeof *row);
    for (int pos = 0; pos < c->seq_len; pos++) {
        for (int i = 0; i < half; i++) {
            double angle = pos * pow(c->rope.theta, -2.0 * i / c->head_dim);
            row[i] = (float)(sine ? sin(angle) : cos(angle));
        }
        fwriteCheck(row, sizeof *row, (size_t)half, f);
    }
    free(row);
}

void llama2c_save_model(const char *path, const Model *m, int version) {
    const Config *c = &m->config;
    if (version != 0 && version != 1) die("llama2c_save_model %s: version %d (0 or 1)", path, version);
    if (c->head_dim * c->n_heads != c->dim || c->window != 0 || c->n_sink != 0 ||
        c->rope.scaling != ROPE_NONE || c->rope.theta != 10000.0f || c->norm_eps != 1e-5f ||
        c->kv_lora_rank != 0 || c->kv_share != 1)
        die("llama2c_save_model %s: llama2.c cannot express this config "
            "(needs head_dim = dim / n_heads, no window, sinks, RoPE scaling, MLA or CLA, theta 1e4, eps 1e-5)",
            path);
    int32_t h[7] = {c->dim,        c->hidden_dim,
                    c->n_layers,   c->n_heads,
                    c->n_kv_heads, c->tied_embeddings || version == 1 ? c->vocab_size : -c->vocab_size,
                    c->seq_len};
    AtomicFile af = atomic_open(path);
    if (version == 0) {
        fwriteCheck(h, sizeof h, 1, af.f);
    } else {
        uint8_t head[V1_HEADER_BYTES] = {0};
        uint32_t magic = LLAMA2C_MAGIC;
        int32_t v = 1;
        memcpy(head, &magic, 4);
        memcpy(head + 4, &v, 4);
        memcpy(head + 8, h, sizeof h);
        head[8 + sizeof h] = (uint8_t)(c->tied_embeddings != 0);
        fwriteCheck(head, sizeof head, 1, af.f);
    }
    Section s[MAX_SECTIONS];
    int n = llama2c_sections(c, &m->weights, version, s);
    for (int i = 0; i < n; i++) {
        if (s[i].kind == SECTION_WEIGHTS)
            fwriteCheck(s[i].data, sizeof(float), s[i].n, af.f);
        else
            write_freq_table(af.f, c, s[i].kind == SECTION_FREQ_SIN);
    }
    atomic_commit(&af);
}

void llama2c_save_tokenizer(const char *path, const Tokenizer *t) {
    if (t->kind != TOKENIZER_LLAMA2C) die("llama2c_save_tokenizer %s: not a llama2.c tokenizer", path);
    int32_t max_len = 0;
    for (int i = 0; i < t->vocab_size; i++)
        if (t->piece_len[i] > max_len) max_len = t->piece_len[i];
    AtomicFile af = atomic_open(path);
    fwriteCheck(&max_len, sizeof max_len, 1, af.f);
    for (int i = 0; i < t->vocab_size; i++) {
        int32_t len = t->piece_len[i];
        fwriteCheck(&t->scores[i], sizeof(float), 1, af.f);
        fwriteCheck(&len, sizeof len, 1, af.f);
        if (len) fwriteCheck(t->pieces[i], 1, (size_t)len, af.f);
    }
    atomic_commit(&af);
}
