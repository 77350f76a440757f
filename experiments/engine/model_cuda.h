// model_cuda.h: the model's forward pass on the GPU (experiments/engine/model_cuda.c), the
// CUDA twin of model.h: weights and KV caches live in device memory, and prefill and
// decode run forward_rows' sequence of operations with the kernels of kernels_cuda.h, so
// with fp32 weights they compute what the CPU computes (to rounding; tests/test_cuda.c
// holds them to 1e-4).
//
// Weight matrices (and the embedding table) are stored in the precision of a GemmMode:
// fp32 (exact), tf32 (fp32 storage, tensor-core math), fp16 or bf16 (half the bytes; the
// activations are rounded to that type just before each matmul). Norm gains, activations,
// the residual stream, the KV cache and the logits stay fp32.
//
// Logits requested on the host are copied with a blocking cudaMemcpy, which waits for the
// forward's kernels: wall-clock time around a call that returns host logits covers its GPU
// work (experiments/kv_cache.c and hardware_budget.c time it that way).
//
// Available only when built with CUDA (INFERLAB_CUDA); callers guard their use.
//
//   CudaModel gm; cuda_model_upload(&gm, &model, GEMM_BF16);
//   CudaRunState s; cuda_runstate_alloc(&s, &gm.config, 64);
//   CudaKVCache kv; cuda_kv_cache_alloc(&kv, L, n_kv, hd, seq_len);
//   cuda_model_prefill(&gm, &s, &kv, prompt, n, logits, 0);   // logits: host (V)
//   cuda_model_decode(&gm, &s, caches, next_tokens, B, logits); // host (B, V)
#pragma once

#include "kernels_cuda.h"
#include "model.h"

// The contiguous KV cache of model.h/cache.h, in device memory, fp32, the same layout:
// key, value (L, capacity, n_kv_heads * head_dim).
typedef struct {
    int n_layers, n_kv_heads, head_dim;
    int capacity; // positions allocated
    int len;      // positions filled
    float *key;   // device
    float *value; // device
} CudaKVCache;

void cuda_kv_cache_alloc(CudaKVCache *c, int n_layers, int n_kv_heads, int head_dim, int capacity);
void cuda_kv_cache_free(CudaKVCache *c);
void cuda_kv_cache_reset(CudaKVCache *c);
size_t cuda_kv_cache_bytes(const CudaKVCache *c);

// Device pointers to the weights: matrices in gemm_input_dtype(gemm), norm gains in fp32.
typedef struct {
    Config config;
    GemmMode gemm;
    CudaDtype dtype;
    void *matrices;        // device block: the CPU weight block converted to dtype, same layout
    float *norms;          // device: rms_att (L, C) | rms_ffn (L, C) | rms_final (C)
    const void *token_embedding, *wq, *wk, *wv, *wo, *w1, *w2, *w3, *wcls; // into matrices
    const float *rms_att, *rms_ffn, *rms_final;                             // into norms
} CudaModel;

// Copy a CPU model's weights to the device in the precision of `gemm`.
void cuda_model_upload(CudaModel *g, const Model *m, GemmMode gemm);
void cuda_model_free(CudaModel *g);
// Device bytes the weights occupy.
size_t cuda_model_bytes(const CudaModel *g);

// Device scratch for a forward over up to max_rows tokens at once (RunState's twin), plus
// the per-row positions and cache pointers the kernels read.
typedef struct {
    int max_rows;
    float *x, *xb, *q, *k, *v, *att, *proj, *hb, *hb2; // device, as in RunState
    void *act;         // device (R, max(C, H, n_heads * hd)) matmul input in the weight dtype
    float *logits;     // device (R, V): the last forward's logits, for cuda_argmax_rows
    float *inv_freq;   // device (hd / 2)
    float mscale;
    int *tokens, *pos; // device (R)
    float **keys, **values; // device (L, R): each row's cache rows for each layer
    int *pos_host;            // host staging for pos
    float **keys_host, **values_host; // host staging for keys, values
} CudaRunState;

void cuda_runstate_alloc(CudaRunState *s, const Config *c, int max_rows);
void cuda_runstate_free(CudaRunState *s);

// As model_prefill: n_tokens of one sequence from position cache->len, appending their keys
// and values. logits (host): (n_tokens, V) if all_logits, else (V) for the last token;
// NULL keeps them on the device only (s->logits).
void cuda_model_prefill(CudaModel *g, CudaRunState *s, CudaKVCache *cache, const int *tokens, int n_tokens,
                        float *logits, int all_logits);

// As model_decode: one token for each of B sequences. logits (host) (B, V), or NULL.
void cuda_model_decode(CudaModel *g, CudaRunState *s, CudaKVCache **caches, const int *tokens, int B,
                       float *logits);
