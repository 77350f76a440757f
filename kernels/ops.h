// ops.h: the backend interface of inferlab's kernels, in the manner of ggml's backends: one
// table of operations per backend (CPU: kernels/cpu/ops_cpu.c; CUDA: kernels/cuda/ops_cuda.cu),
// through which the engine's single forward pass runs on either. The table knows no model
// types: it takes plain pointers, shapes, typed weight tensors and a view of KV-cache rows.
//
// Every pointer an op takes lives in the backend's memory (host memory on the CPU, device
// memory on CUDA) and comes from its alloc; upload / download move bytes between the host
// and that memory (on the CPU they are memcpy). Ops allocate nothing: scratch is passed in.
// Work is issued in order; download waits for everything issued before it.
//
//   const Ops *ops = ops_cpu();            // or ops_cuda(), NULL when the build has no CUDA
//   float *x = ops->alloc(n * sizeof(float));
//   ops->upload(x, host, n * sizeof(float));
//   ops->rmsnorm(x, x, gain, T, C, 1e-5f);
//   ops->download(host, x, n * sizeof(float));
//   ops->free(x);
#pragma once

#include <stddef.h>

#include "dtype.h" // DType: the element types of weight tensors, as a traits table


// Which dims RoPE turns together, as ggml names the two conventions: NORM pairs (x[2i], x[2i+1])
// (GPT-J, llama2.c, llama.cpp's "llama"); NEOX pairs (x[i], x[i + d/2]) of a d-dim rotated part
// (GPT-NeoX, Gemma). Pair i turns by the angle of frequency i either way.
typedef enum { ROPE_STYLE_NORM = 0, ROPE_STYLE_NEOX = 1 } RopeStyle;

// The gate's activation of a gated MLP, out = act(gate) * up: SiLU (SwiGLU, Llama) or GELU in
// its tanh form (GeGLU, Gemma), the latter as ggml's CPU backend computes it (kernels.h).
typedef enum { GLU_SILU = 0, GLU_GELU_TANH = 1 } GluAct;

// LLM.int8()'s decomposition of a quantised matrix: n of its input columns kept in fp32 (their
// codes in the quantised rows are zero), cols (n) increasing, w (rows, n) their weights. Host
// memory: the CPU backend runs it (kernels/quant.h), CUDA refuses it.
typedef struct {
    int n;
    const int *cols;
    const float *w;
} TensorOutliers;

// A weight matrix of shape (rows, cols), row-major, in backend memory: it maps an input
// row of cols to an output row of rows. outliers: NULL, or fp32 columns beside a quantised one.
typedef struct {
    DType dtype;
    const void *data;
    int rows, cols;
    const TensorOutliers *outliers;
} Tensor;

// The attention of one layer: n_heads query heads over n_kv_heads key/value heads (query
// head h reads KV head h / (n_heads / n_kv_heads)), scores q.k * scale. Queries and keys have
// head_dim dims, values and outputs value_dim. The fields after scale default when 0 (so an
// MHA/GQA/MQA shape can leave them out): value_dim = head_dim, and a position's key (value) row
// is n_kv_heads * head_dim (value_dim) floats after the previous one. MLA's absorbed attention
// sets them: one KV head whose key is the latent row [c_kv; k_R] and whose value is its c_kv
// prefix, read from the same rows (value_dim = d_c, value_stride = d_c + d_r).
typedef struct {
    int n_heads, n_kv_heads, head_dim;
    int window;   // 0 = full causal attention
    int n_sink;   // first n_sink positions stay visible outside the window
    float scale;  // usually 1/sqrt(head_dim)
    int value_dim;                // 0 = head_dim
    int key_stride, value_stride; // floats between positions' rows; 0 = n_kv_heads * head_dim (value_dim)
    // StreamingLLM's position rule (1) instead of the text's positions (0): RoPE places the
    // visible keys at their positions within the cache (the sinks, then the window), so the
    // sinks sit just before the window. Keys are cached rotated at their text positions and
    // RoPE depends only on q and k's distance, so window keys need nothing; a sink's score
    // is taken against the query rotated back by the number of evicted positions (which
    // brings every sink that far closer). inv_freq (head_dim / 2, backend memory) gives the
    // angles; unused when 0.
    int cache_positions;
    const float *inv_freq;
} AttentionShape;

// The inline helpers below serve the CUDA kernels too.
#ifdef __CUDACC__
#define OPS_INLINE static inline __host__ __device__
#else
#define OPS_INLINE static inline
#endif

OPS_INLINE int attention_value_dim(const AttentionShape *s) { return s->value_dim ? s->value_dim : s->head_dim; }
OPS_INLINE int attention_key_stride(const AttentionShape *s) {
    return s->key_stride ? s->key_stride : s->n_kv_heads * s->head_dim;
}
OPS_INLINE int attention_value_stride(const AttentionShape *s) {
    return s->value_stride ? s->value_stride : s->n_kv_heads * attention_value_dim(s);
}

// Does a query at position p see the key at position j? Shared by every attention kernel.
OPS_INLINE int attention_visible(int p, int j, int window, int n_sink) {
    return j <= p && (window == 0 || p - j < window || j < n_sink);
}

// The keys a query at position p sees, in increasing order: the sinks 0 .. n_sinks - 1 that
// lie before the window, then lo .. p. evicted = lo - n_sinks positions are out of sight
// (StreamingLLM's rule shifts the sinks by that much).
typedef struct {
    int n_sinks, lo, count, evicted;
} VisibleKeys;

OPS_INLINE VisibleKeys attention_visible_keys(int p, int window, int n_sink) {
    int lo = window > 0 && p - window + 1 > 0 ? p - window + 1 : 0;
    int n_sinks = n_sink < lo ? n_sink : lo;
    VisibleKeys v = {n_sinks, lo, n_sinks + p - lo + 1, lo - n_sinks};
    return v;
}

// How a sequence's cache lays its positions out in rows. Contiguous (ring == 0): position j
// at row j. Ring: the first `sinks` positions at rows 0 .. sinks - 1 for good, every later
// one at sinks + (j - sinks) % ring, overwriting the position `ring` before it (a window of
// up to ring positions stays readable). Paged (blocks != NULL, vLLM's PagedAttention): the
// rows are a pool of blocks of block_size rows shared by many sequences, and position j is at
// row j % block_size of block blocks[j / block_size] of this sequence's block table, which
// maps n_blocks * block_size positions (blocks: backend memory, read by the kernels).
typedef struct {
    int sinks, ring;
    int block_size, n_blocks;
    const int *blocks; // (n_blocks) or NULL: not paged
} KVLayout;

OPS_INLINE int kv_layout_row(KVLayout l, int j) {
    if (l.blocks) return l.blocks[j / l.block_size] * l.block_size + j % l.block_size;
    return l.ring == 0 || j < l.sinks ? j : l.sinks + (j - l.sinks) % l.ring;
}

// Where R query rows find one layer's keys and values: row r is at position pos[r] of its
// sequence, whose cached keys and values for this layer start at keys[r] and values[r],
// position p at row kv_layout_row(layouts[r], p) (row p when layouts is NULL), in rows of the
// shape's key / value stride; values[r] may equal keys[r] when the values are part of the key
// rows, as in MLA's latent cache. Rows of one sequence share the pointers; a prefill chunk is
// consecutive rows of one sequence, a batched decode step one row of each. All the arrays
// live in backend memory.
//
// The rows' element type: DTYPE_F32 (0), or DTYPE_I8, the int8 KV cache: keys[r] and
// values[r] point at rows of that type (the same strides, counted in elements); an int8 row holds
// one float scale per KV head, key_scales[r][row * n_scales + g] (values alike), written by
// kv_write (amax / 127 of that head's slice of the row) and applied by attention.
typedef struct {
    int R;
    const int *pos;           // (R)
    void *const *keys;        // (R) rows of dtype
    void *const *values;      // (R)
    const KVLayout *layouts;  // (R), or NULL: every cache contiguous
    DType dtype;              // DTYPE_F32 or DTYPE_I8
    int n_scales;             // DTYPE_I8: scales per row (the KV heads)
    float *const *key_scales;   // DTYPE_I8: (R)
    float *const *value_scales; // DTYPE_I8: (R)
} KVRows;

typedef struct Ops {
    const char *name; // "cpu", "cuda"
    int host_memory;  // 1 when backend memory is host memory: host fp32 data can be used in place

    void *(*alloc)(size_t bytes); // dies naming the caller's need when memory runs out
    void (*free)(void *p);        // NULL is allowed
    void (*upload)(void *dst, const void *src_host, size_t bytes);
    void (*download)(void *dst_host, const void *src, size_t bytes);
    // Bytes of backend memory allocated now, as the backend counts its own allocations (on the
    // CPU each block at the size malloc reserved for it, on CUDA the bytes requested): memory
    // experiments measure an allocation as the difference across it.
    size_t (*allocated_bytes)(void);
    // dst[i] = (dst_t) src[i] for n elements of backend memory, rounding to nearest even.
    void (*convert)(void *dst, DType dst_t, const void *src, DType src_t, size_t n);

    // out (R, w.rows) = x (R, w.cols) @ w^T. scratch: matmul_scratch_bytes(w.dtype, R, w.cols)
    // bytes (the input rounded to the weights' type where the backend needs that).
    void (*matmul)(float *out, const float *x, const Tensor *w, int R, void *scratch);
    size_t (*matmul_scratch_bytes)(DType t, int R, int cols);
    // out (R, C) = x / rms(x) * weight, per row (in place allowed).
    void (*rmsnorm)(float *out, const float *x, const float *weight, int R, int C, float eps);
    // out (R, H) = act(gate) * up (out may alias gate): SwiGLU or GeGLU (GluAct).
    void (*glu)(float *out, const float *gate, const float *up, int R, int H, GluAct act);
    // x += y, n elements (the residual adds).
    void (*add)(float *x, const float *y, size_t n);
    // x *= a, n elements (Gemma's embedding scale).
    void (*scale)(float *x, float a, size_t n);
    // out (R, table.cols) = rows tokens[r] of table, as fp32; tokens (R).
    void (*embedding)(float *out, const Tensor *table, const int *tokens, int R);
    // Rotate the pairs (RopeStyle) of the last rot_dim dims of every head of row r of x
    // (R, n_heads * head_dim), pair i by the angle pos[r] * inv_freq[i], scaled by mscale (YaRN's
    // attention temperature; 1 otherwise). rot_dim = head_dim rotates whole heads; MLA rotates
    // only the decoupled RoPE part at the end of each head.
    void (*rope)(float *x, int R, int n_heads, int head_dim, int rot_dim, const int *pos, const float *inv_freq,
                 float mscale, RopeStyle style);
    // Store row r of k and v (R, kv_dim) at position pos[r] of its sequence's keys / values
    // (rows of kv_dim floats, at that position's row in its layout); v = NULL stores keys only
    // (values read from the key rows).
    void (*kv_write)(const KVRows *kv, const float *k, const float *v, int kv_dim);
    // Causal attention of q (R, n_heads * head_dim) against the rows' caches (window and sinks
    // as in attention_visible, only visible keys visited: O(window) per row) into out
    // (R, n_heads * value_dim). scratch: attention_scratch_bytes(s, max_keys) bytes with max_keys
    // >= every row's count of visible keys (the CPU's per-thread score rows, sized for the
    // thread count at the time of that call); the op dies if scratch_bytes is too small for
    // this call.
    void (*attention)(float *out, const float *q, const KVRows *kv, const AttentionShape *s, void *scratch,
                      size_t scratch_bytes);
    size_t (*attention_scratch_bytes)(const AttentionShape *s, int max_keys);
} Ops;

const Ops *ops_cpu(void);
// The CUDA table, or NULL when this build has no CUDA. It needs cuda_init() first
// (kernels_cuda.h); callers check cuda_available() before that.
const Ops *ops_cuda(void);
