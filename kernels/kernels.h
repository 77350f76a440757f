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
// Its backward (the trainer's, as every kernel below marked backward.c: kernels/cpu/backward.c):
// for y (N, d) = x (N, n) w^T, dx (N, n) += dy w and dw (d, n) += dy^T x, both through sgemm.
// dx may be NULL.
void matmul_backward(float *dx, float *dw, const float *dy, const float *x, const float *w, int N, int n,
                     int d);

// out (T, C) = x / rms(x) * weight, per row; rms over C with eps inside the root.
void rmsnorm(float *out, const float *x, const float *weight, int T, int C, float eps);
// Its backward (backward.c): dx (N, C) += d x, dw (C) += d weight of y = rmsnorm(x) * w given dy.
// dw sums over rows in a fixed number of chunks added in order: the same bits on any number of
// threads.
void rmsnorm_backward(float *dx, float *dw, const float *dy, const float *x, const float *w, int N, int C,
                      float eps);

// In-place softmax of each row of x (rows, n); numerically stable (max subtracted). lse
// (rows), when not NULL, gets each row's log-sum-exp log sum_j e^x_j: a cross-entropy's
// -log p_t = lse - x_t stays exact where p_t underflows.
void softmax_rows(float *x, int rows, int n, float *lse);
// The cross-entropy over logits (N, V) (backward.c): the logits become their softmax in place,
// row_loss[r] = -log p(targets[r]) (0 where the target is -1); returns the sum of row_loss.
double crossentropy_forward(float *logits, float *row_loss, const int *targets, int N, int V);
// Its backward: probabilities -> d logits of scale * sum_r weights[r] * row_loss[r] (weights
// NULL: all 1), in place; rows without a target or of weight 0 get 0.
void crossentropy_backward(float *probs, const int *targets, const float *weights, int N, int V, float scale);

// Rotate the pairs of every head of one token's vector x (n_heads, head_dim), pair i by the
// angle pos * inv_freq[i], scaled by mscale (YaRN's attention temperature; 1 otherwise): the
// adjacent pairs (x[2i], x[2i+1]) of ROPE_STYLE_NORM or the halves' (x[i], x[i + head_dim/2])
// of ROPE_STYLE_NEOX (ops.h).
void rope_rotate(float *x, int n_heads, int head_dim, int pos, const float *inv_freq, float mscale, RopeStyle style);
// RoPE of B sequences of T positions, rows (N = B * T, n_heads * head_dim) in place, row r at
// position r % T (backward.c): the last rot_dim dims of every head turn (rot_dim = head_dim: the
// whole head; MLA: its decoupled RoPE part). Its backward, y = mscale R(p) x => dx = mscale R(-p) dy,
// turns dy back in place.
void rope_forward(float *x, int N, int T, int n_heads, int head_dim, int rot_dim, const float *inv_freq,
                  float mscale);
void rope_backward(float *dx, int N, int T, int n_heads, int head_dim, int rot_dim, const float *inv_freq,
                   float mscale);

// out (T, H) = silu(gate) * up, elementwise; gate and up are (T, H).
void swiglu(float *out, const float *gate, const float *up, int T, int H);
// out (T, H) = gelu(gate) * up with GELU's tanh form 0.5 g (1 + tanh(sqrt(2/pi) (g + 0.044715 g^3)))
// as ggml's CPU backend evaluates it, through an fp16 table: g <= -10 gives 0, g >= 10 gives g * up,
// else gelu = fp16(gelu_f32(fp16(g))) (g and the result rounded to half, to nearest even), so
// that Gemma's MLP rounds as llama.cpp's does. Relative error against the exact GELU: ~2^-10.
void geglu_tanh(float *out, const float *gate, const float *up, int T, int H);
// Its backward (the trainer's): given d out (n), d_gate = d out * up * silu'(gate) and
// d_up = d out * silu(gate), both overwritten; d_out may be d_up.
void swiglu_backward(float *d_gate, float *d_up, const float *d_out, const float *gate, const float *up,
                     size_t n);

// Causal attention of query rows against their KV caches, GQA-aware: the CPU's ops->attention
// (contract in ops.h). Each thread scores one row and a block of the query heads that share a
// KV head at a time into its own part of scratch, which must hold
// attention_kv_scratch_bytes(s, max_keys) bytes.
size_t attention_kv_scratch_bytes(const AttentionShape *s, int max_keys);
void attention_kv(float *out, const float *q, const KVRows *kv, const AttentionShape *s, float *scratch,
                  size_t scratch_bytes);

// ---- The trainer's attention (kernels/cpu/backward.c) ----
// Causal attention of B sequences of T positions, masked by attention_visible, keeping its
// probabilities for the backward: q (B*T, nh*hd), k (B*T, nkv*hd), v (B*T, nkv*vd), out
// (B*T, nh*vd), probs (B, nh, T, T), 0 where a key is not visible; vd = attention_value_dim
// (the shape's strides are not used: rows are contiguous).
void attention_forward(float *out, float *probs, const float *q, const float *k, const float *v, int B,
                       int T, const AttentionShape *s);
// Its backward from d_out and the forward's probs; dq, dk, dv are overwritten.
void attention_backward(float *dq, float *dk, float *dv, const float *d_out, const float *probs,
                        const float *q, const float *k, const float *v, int B, int T,
                        const AttentionShape *s);

// ---- The trainer's vector ops and optimiser (kernels/cpu/backward.c) ----
// x (n) += y (n).
void add_inplace(float *x, const float *y, size_t n);
// sum_i x_i^2 in double, summed in a fixed number of chunks added in order: the same bits on any
// number of threads.
double sum_squares(const float *x, size_t n);
// One AdamW step of parameters p (n) with gradients g (n) and moments m, v (n).
typedef struct {
    float lr, beta1, beta2, eps;
    float decay;      // decoupled weight decay (0: none)
    float grad_scale; // the gradients are multiplied by this first (clipping)
    int step;         // steps taken, this one included (>= 1): the moments' bias correction
} AdamW;
void adamw(float *p, const float *g, float *m, float *v, size_t n, const AdamW *h);

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
