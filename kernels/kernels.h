// kernels.h: the compute primitives of inferlab, CPU backend (kernels/cpu/); ops_cpu()
// (kernels/cpu/ops_cpu.c) puts them behind the backend table of ops.h.
// Kernels take plain pointers and shapes, never model types. Row-major throughout;
// a weight matrix w of shape (d, n) maps an input row of n to an output row of d.
// Every kernel here has a plain double-precision twin in kernels/reference.h that the
// tests compare it against.
#pragma once

#include <stddef.h>

#include "ops.h"

// Set the threads used by OpenMP loops and by OpenBLAS (n <= 0: leave the default).
void kernels_set_threads(int n);

// ---- OpenBLAS's kernel set (kernels/cpu/blas_core.c) ----
// The widest vector instructions a CPU runs, and those an OpenBLAS kernel set ("Haswell",
// "SkylakeX", "Prescott", ...) uses.
typedef enum { ISA_BASE = 0, ISA_AVX, ISA_AVX2, ISA_AVX512 } IsaLevel;
IsaLevel isa_level_of_cpu(void);
IsaLevel isa_level_of_blas_core(const char *core);
const char *isa_level_name(IsaLevel l); // "sse", "avx", "avx2+fma", "avx512"
// The kernel set to ask OpenBLAS for on a CPU of level cpu when it picked `picked`, or NULL
// when the pick already uses the CPU's widest vectors.
const char *blas_core_for(IsaLevel cpu, const char *picked);
// First thing in main: when OpenBLAS picked a weaker kernel set than this CPU runs and
// OPENBLAS_CORETYPE is not set, re-execute the program (same argv) with it set to the better
// one; OpenBLAS reads it only when it loads. kernels_blas_choice() then says what happened,
// for meta.csv.
void kernels_use_best_blas(char **argv);
const char *kernels_blas_choice(void);

// out (T, d) = x (T, n) @ w (d, n)^T. sgemm for T > 16; for T <= 16 a row-streaming
// matrix-vector product, faster than sgemv when the weights come from DRAM, whose row t is
// bit-identical to the T == 1 result on x_t (see kernels.c).
void matmul(float *out, const float *x, const float *w, int T, int n, int d);

// out (T, C) = x / rms(x) * weight, per row; rms over C with eps inside the root.
void rmsnorm(float *out, const float *x, const float *weight, int T, int C, float eps);

// In-place softmax of each row of x (rows, n); numerically stable (max subtracted). lse
// (rows), when not NULL, gets each row's log-sum-exp log sum_j e^x_j: a cross-entropy's
// -log p_t = lse - x_t stays exact where p_t underflows.
void softmax_rows(float *x, int rows, int n, float *lse);

// Rotate adjacent pairs (x[2i], x[2i+1]) of every head of one token's vector
// x (n_heads, head_dim) by angle pos * inv_freq[i], scaled by mscale (YaRN's
// attention temperature; 1 otherwise). This is the GPT-J / llama2.c pairing.
void rope_rotate(float *x, int n_heads, int head_dim, int pos, const float *inv_freq, float mscale);

// out (T, H) = silu(gate) * up, elementwise; gate and up are (T, H).
void swiglu(float *out, const float *gate, const float *up, int T, int H);
// Its backward (the trainer's): given d out (n), d_gate = d out * up * silu'(gate) and
// d_up = d out * silu(gate), both overwritten; d_out may be d_up.
void swiglu_backward(float *d_gate, float *d_up, const float *d_out, const float *gate, const float *up,
                     size_t n);

// Causal attention of query rows against their KV caches, GQA-aware: the CPU's ops->attention
// (contract in ops.h). Each thread scores one (row, head) pair at a time into its own row of
// scratch, which must hold attention_kv_scratch_bytes(max_keys) bytes.
size_t attention_kv_scratch_bytes(int max_keys);
void attention_kv(float *out, const float *q, const KVRows *kv, const AttentionShape *s, float *scratch,
                  size_t scratch_bytes);

// ---- Full-sequence attention: naive vs flash (project 15; kernels/cpu/attention_full.c) ----
// Every query of a sequence against every key, all heads at once, forward only.
// q, k, v, out (B, H, T, D) contiguous fp32; score(t, j) = q_t . k_j / sqrt(D); causal:
// query t sees keys j <= t. Each returns the bytes of working memory it allocated beyond
// q, k, v and out (OpenBLAS's own fixed-size packing buffers are not counted).
typedef struct {
    int B, H, T, D;
    int causal;
} AttentionFullShape;

// Materialises the (T, T) score matrix of one (b, h) at a time in a single reused buffer:
// sgemm for the scores, mask and row softmax (OpenMP over rows), sgemm with V.
// Working memory T * T * 4 bytes.
size_t attention_naive(float *out, const float *q, const float *k, const float *v, const AttentionFullShape *s);

// Fused, flash-style: tiles of queries x keys with an online softmax (running max and sum,
// rescaling the partial output), so no more than one tile of scores ever exists; OpenMP
// threads over (b, h, query tile); causal runs skip the tiles above the diagonal.
// Working memory: a few tiles per thread, independent of T.
size_t attention_flash(float *out, const float *q, const float *k, const float *v, const AttentionFullShape *s);
