// gguf.h: checkpoints in GGUF v3, the llama.cpp ecosystem's format: a bounds-checked reader
// and a writer of metadata and F32 / F16 / quantised (Q8_0, Q4_0, our int8 / int4) tensors, and
// on top of them the model checkpoint (Config + Weights + Tokenizer, quantised matrices kept). Tests: `make build/tests/test_gguf && ./build/tests/test_gguf`.
//
// File layout (little-endian; strings are u64 length + bytes, no NUL):
//   "GGUF" u32 version (3) u64 n_tensors u64 n_kv
//   n_kv      x { string key, u32 value type, value }   array value = u32 elem type, u64 n, n elems
//   n_tensors x { string name, u32 n_dims, u64 dims[n_dims], u32 ggml type, u64 offset }
//   zero padding to general.alignment (default 32), then the tensor data: each tensor at
//   data start + offset, offsets multiples of the alignment.
// dims[0] varies fastest: a row-major (rows, cols) matrix has dims {cols, rows}.
//
// The reader loads the whole file and checks every length, count, type and offset against
// it before anything is used, so a truncated or hostile file ends in an Error naming the
// file and what is wrong, never in an out-of-bounds read.
//
// Model checkpoints (model_save_gguf / model_load_gguf):
//   general.architecture = "llama", general.file_type (0 all F32, 1 matrices F16)
//   llama.context_length            seq_len          llama.vocab_size       vocab_size
//   llama.embedding_length          dim              llama.feed_forward_length  hidden_dim
//   llama.block_count               n_layers         llama.attention.head_count(_kv)  n_(kv_)heads
//   llama.attention.key_length / value_length, llama.rope.dimension_count  head_dim
//   llama.attention.layer_norm_rms_epsilon     norm_eps
//   llama.rope.freq_base            rope.theta       llama.rope.scaling.type  none|linear|yarn
//   llama.rope.scaling.factor       rope.factor      llama.rope.scaling.original_context_length
//   llama.rope.scaling.yarn_beta_fast / yarn_beta_slow  rope.beta_fast / beta_slow
//   llama.attention.sliding_window  window (llama.cpp's key; it does not apply it to "llama")
//   inferlab.attention.n_sink  n_sink
//   inferlab.tied_embeddings (bool)
// (NTK-aware scaling is written as llama.cpp runs it: type none, freq_base the NTK base; a
// file of type "ntk" is still read.)
// Keys a foreign llama file may lack take Llama defaults (head_count_kv = head_count,
// key_length = dim / heads, eps 1e-5, freq_base 10000, no scaling, no window, tied iff
// output.weight is absent). Tensors, named as llama.cpp names them:
//   token_embd.weight (V, C)   blk.N.attn_norm.weight (C)   blk.N.attn_q.weight (nh*hd, C)
//   blk.N.attn_k.weight / attn_v.weight (nkv*hd, C)   blk.N.attn_output.weight (C, nh*hd)
//   blk.N.ffn_norm.weight (C)   blk.N.ffn_gate.weight (H, C) = w1   blk.N.ffn_down.weight (C, H)
//   = w2   blk.N.ffn_up.weight (H, C) = w3   output_norm.weight (C)   output.weight (V, C) untied
// Tensors of layers past block_count are an error (the config contradicts the file); other
// tensors the model does not use are ignored. Our RoPE rotates adjacent pairs, which is
// llama.cpp's convention for "llama" (its converter permutes Hugging Face's Q/K into it), so
// Q and K are stored as they are.
// 1-D tensors (norm gains) are always F32, as llama.cpp keeps them.
//
// The tokenizer, when saved, in llama.cpp's keys so that llama.cpp loads and runs the file:
//   tokenizer.ggml.model   "gpt2" (our byte-level BPE) or "llama" (llama2.c vocabulary)
//   tokenizer.ggml.pre     "starcoder" (gpt2 only): llama.cpp's name for our pre-split rule
//                          (tokenizer.h)
//   tokenizer.ggml.tokens  string array. gpt2: each piece spelled in GPT-2's byte-level
//                          alphabet (tokenizer_gpt2_spell), BOS and EOS as their raw text;
//                          llama: the raw piece bytes with spaces as U+2581 "▁", as
//                          SentencePiece and llama.cpp spell them
//   tokenizer.ggml.token_type  i32 array (gpt2): 1 normal, 3 control (BOS, EOS)
//   tokenizer.ggml.merges  string array (gpt2): merge i as "left right", both spelled,
//                          making token 256 + i (the first 256 tokens are the bytes in order)
//   tokenizer.ggml.scores  f32 array ("llama" only)
//   tokenizer.ggml.bos_token_id / eos_token_id   u32
//   tokenizer.ggml.add_bos_token = true, add_eos_token = false (gpt2): our sequences begin
//                          with BOS, so llama.cpp must add it as we do
// The loader reads any file's tokenizer, ours or another converter's (tokenizer_gguf.h).
#pragma once

#include <stddef.h>
#include <stdint.h>

#include "common.h"
#include "model.h"
#include "tokenizer.h"

#define GGUF_VERSION 3
#define GGUF_MAX_DIMS 4
#define GGUF_DEFAULT_ALIGNMENT 32

typedef enum {
    GGUF_TYPE_UINT8 = 0,
    GGUF_TYPE_INT8 = 1,
    GGUF_TYPE_UINT16 = 2,
    GGUF_TYPE_INT16 = 3,
    GGUF_TYPE_UINT32 = 4,
    GGUF_TYPE_INT32 = 5,
    GGUF_TYPE_FLOAT32 = 6,
    GGUF_TYPE_BOOL = 7,
    GGUF_TYPE_STRING = 8,
    GGUF_TYPE_ARRAY = 9,
    GGUF_TYPE_UINT64 = 10,
    GGUF_TYPE_INT64 = 11,
    GGUF_TYPE_FLOAT64 = 12,
    GGUF_TYPE_COUNT
} GGUFType;

// Tensor element types: ggml's numbering. The container writes F32 and F16 tensors from floats;
// every weight type's id (ggml's for its own block formats, ours far above ggml's for int8 /
// int4-gG, which llama.cpp rejects) is in the weight types' traits table (kernels/dtype.h),
// and the functions below map between the two. Other types are rejected by name.
typedef enum {
    GGML_TYPE_F32 = 0,
    GGML_TYPE_F16 = 1,
} GGMLType;

// The weight type of a tensor type (DTYPE_F32 for F32 ...), and back; -1 when it has none.
int ggml_type_dtype(GGMLType t);
int dtype_ggml_type(DType t);

// ---------------------------------------------------------------------------------------
// Reading

typedef struct {
    char *key;
    GGUFType type;       // GGUF_TYPE_ARRAY for arrays
    GGUFType elem_type;  // arrays: element type; scalars: = type
    uint64_t n;          // arrays: element count; scalars: 1
    const uint8_t *data; // the value (array: its first element) inside the file buffer
} GGUFKV;

typedef struct {
    char *name;
    int n_dims;
    uint64_t dims[GGUF_MAX_DIMS]; // dims past n_dims are 1
    GGMLType type;
    uint64_t offset; // from the start of the data section
    size_t n_elems, n_bytes;
    const uint8_t *data; // inside the file buffer (not necessarily 4-byte aligned)
} GGUFTensor;

typedef struct {
    char *path;
    uint8_t *buf; // the whole file
    size_t size;
    uint32_t version;
    size_t alignment;
    size_t n_kv, n_tensors;
    GGUFKV *kv;
    GGUFTensor *tensors;
} GGUFFile;

typedef struct {
    const uint8_t *bytes; // not NUL-terminated; inside the file buffer
    size_t len;
} GGUFString;

// Read and check the whole file. On error nothing stays allocated.
int gguf_open(GGUFFile *g, const char *path, Error *err);
void gguf_close(GGUFFile *g);

// NULL when absent.
const GGUFKV *gguf_find_kv(const GGUFFile *g, const char *key);
const GGUFTensor *gguf_find_tensor(const GGUFFile *g, const char *name);

// Typed access. Each returns 0, or -1 with err naming the file and key when the key is
// absent, has another type, or its value does not fit. Integers accept every integer type;
// floats accept F32 and F64; strings point into the file buffer.
int gguf_get_int(const GGUFFile *g, const char *key, int64_t *out, Error *err);
int gguf_get_float(const GGUFFile *g, const char *key, double *out, Error *err);
int gguf_get_bool(const GGUFFile *g, const char *key, int *out, Error *err);
int gguf_get_string(const GGUFFile *g, const char *key, GGUFString *out, Error *err);
// Arrays, copied into a malloc'd *out of *n elements (the caller frees it). The i32 one
// accepts any integer element type whose values fit in int32.
int gguf_get_array_i32(const GGUFFile *g, const char *key, int32_t **out, size_t *n, Error *err);
int gguf_get_array_f32(const GGUFFile *g, const char *key, float **out, size_t *n, Error *err);
int gguf_get_array_string(const GGUFFile *g, const char *key, GGUFString **out, size_t *n, Error *err);

// Copy a tensor's n_elems values into dst as f32 (F16 converted, quantised types dequantised).
void gguf_tensor_to_f32(const GGUFTensor *t, float *dst);

// ---------------------------------------------------------------------------------------
// Writing: collect metadata and tensors, then write the file atomically (temp + rename).
// Misuse (a duplicate key or tensor name, a bad type) is a programming error and dies.

typedef struct GGUFWriterTensor GGUFWriterTensor;

typedef struct {
    uint8_t *p;
    size_t len, cap;
} GGUFBytes;

typedef struct {
    GGUFBytes kv; // the serialised key/values
    char **keys;  // (n_kv) for the duplicate check
    size_t n_kv;
    GGUFWriterTensor *tensors;
    size_t n_tensors, cap_tensors;
    size_t alignment;
} GGUFWriter;

void gguf_writer_init(GGUFWriter *w);
void gguf_writer_free(GGUFWriter *w);

void gguf_set_u32(GGUFWriter *w, const char *key, uint32_t v);
void gguf_set_i32(GGUFWriter *w, const char *key, int32_t v);
void gguf_set_f32(GGUFWriter *w, const char *key, float v);
void gguf_set_bool(GGUFWriter *w, const char *key, int v);
void gguf_set_string(GGUFWriter *w, const char *key, const char *s);
void gguf_set_array_i32(GGUFWriter *w, const char *key, const int32_t *v, size_t n);
void gguf_set_array_f32(GGUFWriter *w, const char *key, const float *v, size_t n);
void gguf_set_array_string(GGUFWriter *w, const char *key, const GGUFString *v, size_t n);
// Writes general.alignment (a power of two) and pads the data section to it.
void gguf_set_alignment(GGUFWriter *w, uint32_t alignment);

// Add a tensor of dims (ggml order, dims[0] fastest) whose f32 values are stored as type.
// data is borrowed: it must stay valid until gguf_write.
void gguf_add_tensor(GGUFWriter *w, const char *name, GGMLType type, int n_dims, const uint64_t *dims,
                     const float *data);
// Add a tensor whose bytes are already in type (a quantised matrix, rows of dims[0] weights).
// bytes is borrowed: it must stay valid until gguf_write.
void gguf_add_tensor_bytes(GGUFWriter *w, const char *name, GGMLType type, int n_dims, const uint64_t *dims,
                           const void *bytes);
void gguf_write(const GGUFWriter *w, const char *path);

// IEEE half <-> single: exact widening; narrowing rounds to nearest even (overflow -> inf).
float gguf_half_to_float(uint16_t h);
uint16_t gguf_float_to_half(float f);

// ---------------------------------------------------------------------------------------
// Model checkpoints (keys and tensor names above)

// Save m, and tok unless NULL; weight matrices stored as wtype (F32 or F16), or, when m holds
// quantised matrices (m->quant), in their types (general.file_type 7 for Q8_0, 2 for Q4_0, as
// llama.cpp numbers them, and inferlab.quantization.type naming the format). A quantised file
// loads with m->quant set and the host weights dequantised.
void model_save_gguf(const char *path, const Model *m, const Tokenizer *tok, GGMLType wtype);
// Load a checkpoint into m (allocated here; model_free releases it), and its tokenizer into
// tok unless tok is NULL (an error if the file has none). On error nothing is allocated.
int model_load_gguf(const char *path, Model *m, Tokenizer *tok, Error *err);
// The config of a GGUF model file alone (its weights not read), validated as model_load_gguf
// validates it.
int model_config_gguf(const char *path, Config *c, Error *err);
