// arch.c: the architectures' tensor tables and the walks over them (arch.h).
// Tests: test_model (block layout), test_gguf (file order and names), test_quantized.
#include "arch.h"

#include <stdio.h>
#include <string.h>

#include "common.h"

#define HOST(f) offsetof(Weights, f)
#define LAYER(f) offsetof(LayerWeights, f)
#define MODEL(f) offsetof(Engine, f)

// Each tensor kind once; the architectures' tables list the kinds they have.
// clang-format off
#define TOKEN_EMBD  {.name = "token_embd",    .field = HOST(token_embedding), .scope = TENSOR_MODEL,       .rows = DIM_V,      .cols = DIM_C, \
                     .input = INPUT_TIED_HEAD,  .engine = MODEL(token_embedding)}
#define ATTN_NORM   {.name = "attn_norm",     .field = HOST(rms_att),         .scope = TENSOR_LAYER,       .rows = DIM_NONE,   .cols = DIM_C, \
                     .engine = LAYER(rms_att)}
#define ATTN_Q      {.name = "attn_q",        .field = HOST(wq),              .scope = TENSOR_LAYER,       .rows = DIM_Q,      .cols = DIM_C, \
                     .input = INPUT_ATTN_NORM,  .engine = LAYER(wq)}
#define ATTN_K      {.name = "attn_k",        .field = HOST(wk),              .scope = TENSOR_KV_LAYER,    .rows = DIM_KV,     .cols = DIM_C, \
                     .input = INPUT_ATTN_NORM,  .engine = LAYER(wk)}
#define ATTN_V      {.name = "attn_v",        .field = HOST(wv),              .scope = TENSOR_KV_LAYER,    .rows = DIM_KV,     .cols = DIM_C, \
                     .input = INPUT_ATTN_NORM,  .engine = LAYER(wv)}
#define ATTN_KV_A   {.name = "attn_kv_a_mqa", .field = HOST(wkv_a),           .scope = TENSOR_KV_LAYER,    .rows = DIM_LATENT, .cols = DIM_C, \
                     .input = INPUT_ATTN_NORM,  .engine = LAYER(wkv_a)}
#define ATTN_KV_B   {.name = "attn_kv_b",     .field = HOST(wkv_b),           .scope = TENSOR_KV_LAYER,    .rows = DIM_KV_B,   .cols = DIM_DC, \
                     .input = INPUT_LATENT,     .engine = NOT_PLACED}
#define ATTN_Q_NORM {.name = "attn_q_norm",   .field = HOST(rms_q),           .scope = TENSOR_LAYER,       .rows = DIM_NONE,   .cols = DIM_HD, \
                     .engine = LAYER(rms_q)}
#define ATTN_K_NORM {.name = "attn_k_norm",   .field = HOST(rms_k),           .scope = TENSOR_LAYER,       .rows = DIM_NONE,   .cols = DIM_HD, \
                     .engine = LAYER(rms_k)}
#define ATTN_OUTPUT {.name = "attn_output",   .field = HOST(wo),              .scope = TENSOR_LAYER,       .rows = DIM_C,      .cols = DIM_O, \
                     .input = INPUT_ATTN_OUT,   .engine = LAYER(wo)}
#define ATTN_POST_NORM {.name = "post_attention_norm", .field = HOST(rms_post_att), .scope = TENSOR_LAYER, .rows = DIM_NONE, .cols = DIM_C, \
                     .engine = LAYER(rms_post_att)}
#define FFN_NORM    {.name = "ffn_norm",      .field = HOST(rms_ffn),         .scope = TENSOR_LAYER,       .rows = DIM_NONE,   .cols = DIM_C, \
                     .engine = LAYER(rms_ffn)}
#define FFN_GATE    {.name = "ffn_gate",      .field = HOST(w1),              .scope = TENSOR_LAYER,       .rows = DIM_H,      .cols = DIM_C, \
                     .input = INPUT_FFN_NORM,   .engine = LAYER(w1)}
#define FFN_DOWN    {.name = "ffn_down",      .field = HOST(w2),              .scope = TENSOR_LAYER,       .rows = DIM_C,      .cols = DIM_H, \
                     .input = INPUT_FFN_ACT,    .engine = LAYER(w2)}
#define FFN_UP      {.name = "ffn_up",        .field = HOST(w3),              .scope = TENSOR_LAYER,       .rows = DIM_H,      .cols = DIM_C, \
                     .input = INPUT_FFN_NORM,   .engine = LAYER(w3)}
#define FFN_POST_NORM {.name = "post_ffw_norm", .field = HOST(rms_post_ffn),  .scope = TENSOR_LAYER,       .rows = DIM_NONE,   .cols = DIM_C, \
                     .engine = LAYER(rms_post_ffn)}
#define OUTPUT_NORM {.name = "output_norm",   .field = HOST(rms_final),       .scope = TENSOR_MODEL,       .rows = DIM_NONE,   .cols = DIM_C, \
                     .engine = MODEL(rms_final)}
#define OUTPUT      {.name = "output",        .field = HOST(wcls),            .scope = TENSOR_UNTIED_HEAD, .rows = DIM_V,      .cols = DIM_C, \
                     .input = INPUT_FINAL_NORM, .engine = MODEL(wcls)}

// Llama (llama.cpp's "llama"; MLA's tensors as its "deepseek2" names them). A plain model's
// block is llama2.c's: the MLA kinds are empty, and without CLA every layer has keys and values.
static const TensorSpec LLAMA[] = {
    TOKEN_EMBD, ATTN_NORM, ATTN_Q, ATTN_K, ATTN_V, ATTN_KV_A, ATTN_KV_B, ATTN_OUTPUT,
    FFN_NORM, FFN_GATE, FFN_DOWN, FFN_UP, OUTPUT_NORM, OUTPUT,
};

// Gemma 3 (llama.cpp's "gemma3", src/models/gemma3.cpp): QK-norm and the blocks' post-norms.
static const TensorSpec GEMMA3[] = {
    TOKEN_EMBD, ATTN_NORM, ATTN_Q, ATTN_K, ATTN_V, ATTN_Q_NORM, ATTN_K_NORM, ATTN_OUTPUT, ATTN_POST_NORM,
    FFN_NORM, FFN_GATE, FFN_DOWN, FFN_UP, FFN_POST_NORM, OUTPUT_NORM, OUTPUT,
};
// clang-format on

#define TABLE(name, t) {name, t, (int)(sizeof t / sizeof t[0])}
static const Arch ARCHES[ARCH_COUNT] = {
    [ARCH_LLAMA] = TABLE("llama", LLAMA),
    [ARCH_GEMMA3] = TABLE("gemma3", GEMMA3),
};

const Arch *model_arch(const Config *c) {
    if ((int)c->arch < 0 || c->arch >= ARCH_COUNT) die("model_arch: %d is not an architecture", (int)c->arch);
    return &ARCHES[c->arch];
}

const Arch *arch_by_name(const char *name, size_t len, ArchId *id) {
    for (int i = 0; i < ARCH_COUNT; i++)
        if (strlen(ARCHES[i].name) == len && memcmp(ARCHES[i].name, name, len) == 0) {
            *id = (ArchId)i;
            return &ARCHES[i];
        }
    return NULL;
}

const TensorSpec *arch_find(const Arch *a, const char *name) {
    for (int i = 0; i < a->n_tensors; i++)
        if (strcmp(a->tensors[i].name, name) == 0) return &a->tensors[i];
    return NULL;
}

size_t tensor_dim(const Config *c, TensorDim d) {
    ModelDims m = model_dims(c);
    switch (d) {
    case DIM_NONE: return 1;
    case DIM_C: return (size_t)c->dim;
    case DIM_H: return (size_t)c->hidden_dim;
    case DIM_V: return (size_t)c->vocab_size;
    case DIM_Q: return m.q;
    case DIM_O: return m.o;
    case DIM_KV: return m.kv;
    case DIM_LATENT: return m.latent;
    case DIM_KV_B: return m.kv_b;
    case DIM_DC: return (size_t)c->kv_lora_rank;
    case DIM_HD: return (size_t)c->head_dim;
    }
    die("tensor_dim: %d is not a dimension", (int)d);
}

// Whether layer l has an instance of s (model-wide kinds: l = -1).
static int layer_has(const Config *c, const TensorSpec *s, int l) {
    switch (s->scope) {
    case TENSOR_MODEL: return l < 0;
    case TENSOR_UNTIED_HEAD: return l < 0 && !c->tied_embeddings;
    case TENSOR_LAYER: return l >= 0;
    case TENSOR_KV_LAYER: return l >= 0 && l % c->kv_share == 0;
    }
    return 0;
}

static size_t instance_floats(const Config *c, const TensorSpec *s) {
    return tensor_dim(c, s->rows) * tensor_dim(c, s->cols);
}

size_t tensor_instances(const Config *c, const TensorSpec *s) {
    if (instance_floats(c, s) == 0) return 0;
    switch (s->scope) {
    case TENSOR_MODEL: return 1;
    case TENSOR_UNTIED_HEAD: return !c->tied_embeddings;
    case TENSOR_LAYER: return (size_t)c->n_layers;
    case TENSOR_KV_LAYER: return (size_t)config_kv_layers(c);
    }
    return 0;
}

size_t tensor_floats(const Config *c, const TensorSpec *s) { return tensor_instances(c, s) * instance_floats(c, s); }

float *tensor_host(const Weights *w, const TensorSpec *s) { return *(float *const *)((const char *)w + s->field); }

size_t arch_vector_floats(const Config *c) {
    const Arch *a = model_arch(c);
    size_t n = 0;
    for (int i = 0; i < a->n_tensors; i++)
        if (a->tensors[i].rows == DIM_NONE) n += tensor_floats(c, &a->tensors[i]);
    return n;
}

// Instance of s on layer l (-1: model-wide) into t, if the layer has one; returns 1 if so.
static int layer_tensor(const Config *c, const Weights *w, const TensorSpec *s, int l, ModelTensor *t) {
    if (!layer_has(c, s, l) || instance_floats(c, s) == 0) return 0;
    if (!t) return 1;
    size_t index = l < 0 ? 0 : s->scope == TENSOR_KV_LAYER ? (size_t)(l / c->kv_share) : (size_t)l;
    t->spec = s;
    t->layer = l;
    if (l < 0) snprintf(t->name, sizeof t->name, "%s.weight", s->name);
    else snprintf(t->name, sizeof t->name, "blk.%d.%s.weight", l, s->name);
    t->rows = s->rows == DIM_NONE ? 0 : tensor_dim(c, s->rows);
    t->cols = tensor_dim(c, s->cols);
    t->data = tensor_host(w, s) + index * instance_floats(c, s);
    return 1;
}

static int is_model_wide(const TensorSpec *s) { return s->scope == TENSOR_MODEL || s->scope == TENSOR_UNTIED_HEAD; }

// The instance of table entry i on layer l, unless a matrices-only walk skips it.
static size_t take(const Config *c, const Weights *w, int i, int l, int matrices_only, ModelTensor *t) {
    const TensorSpec *s = &model_arch(c)->tensors[i];
    if (matrices_only && s->rows == DIM_NONE) return 0;
    return (size_t)layer_tensor(c, w, s, l, t);
}

// File order: the model-wide kinds ahead of the first per-layer kind, then each layer's kinds,
// then the remaining model-wide kinds.
static size_t walk(const Config *c, const Weights *w, ModelTensor *out, int matrices_only) {
    const Arch *a = model_arch(c);
    int first = 0;
    while (first < a->n_tensors && is_model_wide(&a->tensors[first])) first++;
    size_t n = 0;
    for (int i = 0; i < first; i++) n += take(c, w, i, -1, matrices_only, out ? &out[n] : NULL);
    for (int l = 0; l < c->n_layers; l++)
        for (int i = first; i < a->n_tensors; i++)
            if (!is_model_wide(&a->tensors[i])) n += take(c, w, i, l, matrices_only, out ? &out[n] : NULL);
    for (int i = first; i < a->n_tensors; i++)
        if (is_model_wide(&a->tensors[i])) n += take(c, w, i, -1, matrices_only, out ? &out[n] : NULL);
    return n;
}

size_t model_tensors(const Config *c, const Weights *w, ModelTensor *out) { return walk(c, w, out, 0); }

size_t model_matrices(const Config *c, const Weights *w, ModelTensor *out) { return walk(c, w, out, 1); }
