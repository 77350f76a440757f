// arch.h: a model described once. An architecture is a table of its tensors: the GGUF name,
// the shape as a function of the config, which layers have it, and the activation a matrix
// multiplies. Everything that lists a model's weights walks this table: the host weight block
// (weights_map, model_param_count), GGUF read and write, the llama.2c import, quantisation's
// matrix list and LLM.int8()'s calibration, the trainer's gradients (laid out as the weights).
//
// Adding an architecture: its table in arch.c (and a Weights field for each new tensor kind),
// its GGUF key names in gguf.c, and the forward-pass options it needs in model.c.
//
// The table's order is the host block's (llama2.c's: each kind across all its layers) and,
// within a layer, the GGUF files' order; model-wide tensors before the first per-layer one are
// written before the layers, the others after them.
#pragma once

#include <stddef.h>

#include "model.h"

// A dimension of a tensor, read from the config (model_dims); DIM_NONE as rows: a vector.
typedef enum {
    DIM_NONE = 0,
    DIM_C,      // dim
    DIM_H,      // hidden_dim
    DIM_V,      // vocab_size
    DIM_Q,      // n_heads * qk: the query projection's rows (qk = hd, or hd + d_r under MLA)
    DIM_O,      // n_heads * hd: the attention output
    DIM_KV,     // n_kv_heads * hd: a key or value projection (0 under MLA)
    DIM_LATENT, // d_c + d_r: MLA's latent row [c_kv; k_R] (0 unless MLA)
    DIM_KV_B,   // n_heads * 2 * hd: MLA's per-head [W_uk; W_uv] (0 unless MLA)
    DIM_DC,     // d_c = kv_lora_rank
    DIM_HD,     // head_dim: a per-head vector (QK-norm's gains)
} TensorDim;

// Which layers have a tensor.
typedef enum {
    TENSOR_MODEL,       // one for the model
    TENSOR_LAYER,       // one per layer
    TENSOR_KV_LAYER,    // one per set of layers sharing keys and values (CLA): on layer l when
                        // l % kv_share == 0, stored at index l / kv_share
    TENSOR_UNTIED_HEAD, // the output head: absent when tied (it is then the token embedding)
} TensorScope;

// One kind of tensor. A matrix (rows, cols) may be quantised; a vector (rows DIM_NONE) never is.
typedef struct TensorSpec {
    const char *name;     // GGUF: "token_embd" is "token_embd.weight", "attn_q" "blk.<l>.attn_q.weight"
    size_t field;         // offsetof(Weights, ...): the host pointer of its first instance
    TensorScope scope;
    TensorDim rows, cols;
    TensorInput input;
    // Where the forward reads it: offsetof(LayerWeights, ...) for a per-layer kind, offsetof(Engine,
    // ...) for a model-wide one (a matrix is a Tensor there, a vector a const float *); NOT_PLACED
    // when engine_open derives what the forward reads from it (MLA's kv_b).
    size_t engine;
} TensorSpec;
#define NOT_PLACED ((size_t)-1)

typedef struct {
    const char *name; // general.architecture
    const TensorSpec *tensors;
    int n_tensors;
} Arch;

// The architecture of a config (Config.arch): "llama" (with MLA and CLA as options) or
// "gemma3" (Gemma 3: QK-norm and post-norms, no MLA or CLA tensors).
const Arch *model_arch(const Config *c);
// The architecture named name (general.architecture), or NULL; its id into *id.
const Arch *arch_by_name(const char *name, size_t len, ArchId *id);
const TensorSpec *arch_find(const Arch *a, const char *name); // NULL when it has none of that name

size_t tensor_dim(const Config *c, TensorDim d); // 1 for DIM_NONE
// Instances of a tensor kind in a model (layers that have it; 0 when a dimension is 0).
size_t tensor_instances(const Config *c, const TensorSpec *s);
// Floats of one instance, and of every instance (its run in the host block).
size_t tensor_floats(const Config *c, const TensorSpec *s);
// The host pointer of a tensor kind's first instance.
float *tensor_host(const Weights *w, const TensorSpec *s);
// Floats of every vector kind (the norm gains) of a model.
size_t arch_vector_floats(const Config *c);

// One tensor of a model: an instance of a kind, where it lives in the host weight block.
typedef struct ModelTensor {
    const TensorSpec *spec;
    int layer;          // -1 for a model-wide tensor
    char name[48];      // its GGUF name
    size_t rows, cols;  // rows 0: a vector of cols
    float *data;
} ModelTensor;

// The model's tensors in GGUF file order (model-wide ones before the layers, each layer's in
// table order, the rest), into out (NULL: count only); returns how many.
size_t model_tensors(const Config *c, const Weights *w, ModelTensor *out);
// The same, matrices only (the tensors quantisation may store in another type).
size_t model_matrices(const Config *c, const Weights *w, ModelTensor *out);
