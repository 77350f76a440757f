// reference.h: plain, single-threaded, double-accumulating versions of every kernel in
// kernels.h. They are the ground truth the tests compare the fast kernels against; nothing
// else should call them. Same signatures and shapes as their fast twins.
#pragma once

#include "kernels.h"
#include "quant.h" // the weight and activation formats

void ref_matmul(float *out, const float *x, const float *w, int T, int n, int d);
void ref_rmsnorm(float *out, const float *x, const float *weight, int T, int C, float eps);
void ref_softmax_rows(float *x, int rows, int n, float *lse);
void ref_rope_rotate(float *x, int n_heads, int head_dim, int pos, const float *inv_freq, float mscale, RopeStyle style);
void ref_swiglu(float *out, const float *gate, const float *up, int T, int H);
void ref_geglu_tanh(float *out, const float *gate, const float *up, int T, int H); // exact GELU (tanh form), in double
void ref_swiglu_backward(float *d_gate, float *d_up, const float *d_out, const float *gate, const float *up,
                         size_t n);
// The trainer's kernels (kernels/cpu/backward.c). Gradients are summed in double and added to
// dx, dw once; ref_attention_backward ignores probs and recomputes them in double from q and k.
void ref_matmul_backward(float *dx, float *dw, const float *dy, const float *x, const float *w, int N, int n,
                         int d);
void ref_rmsnorm_backward(float *dx, float *dw, const float *dy, const float *x, const float *w, int N, int C,
                          float eps);
void ref_rope_forward(float *x, int N, int T, int n_heads, int head_dim, int rot_dim, const float *inv_freq,
                      float mscale);
void ref_rope_backward(float *dx, int N, int T, int n_heads, int head_dim, int rot_dim, const float *inv_freq,
                       float mscale);
void ref_attention_forward(float *out, float *probs, const float *q, const float *k, const float *v, int B, int T,
                           const AttentionShape *s);
void ref_attention_backward(float *dq, float *dk, float *dv, const float *d_out, const float *probs,
                            const float *q, const float *k, const float *v, int B, int T, const AttentionShape *s);
double ref_crossentropy_forward(float *logits, float *row_loss, const int *targets, int N, int V);
void ref_crossentropy_backward(float *probs, const int *targets, const float *weights, int N, int V, float scale);
void ref_add_inplace(float *x, const float *y, size_t n);
double ref_sum_squares(const float *x, size_t n);
void ref_adamw(float *p, const float *g, float *m, float *v, size_t n, const AdamW *h);
// The quantised formats of quant.h, one weight at a time: weight i of a stored row of n, found
// from its block and its place in it (the twin of dequantize_row), and the dot of a stored row
// with x accumulated in double (the twin of dot_row).
float ref_dequantize_weight(DType t, const void *row, int n, int i);
double ref_dot_row(DType t, const void *row, const float *x, int n);
// Value i of an activation row in format a (quant.h: d * q), and the dot of a stored row with such
// a row in double: what the integer dot computes but for its fp32 rounding and q4_1's s term.
double ref_act_value(ActType a, const void *xq, int i);
double ref_dot_row_act(DType t, ActType a, const void *row, const void *xq, int n);
// The twin of dot_row_int (xq in quant_act_type(t)'s format): ggml's formula with its integer sums
// computed the plain way (exact, int64) and the blocks' fp32 scales formed as ggml forms them,
// combined in double. *abs_terms (may be NULL): the sum of the terms' magnitudes, which bounds the
// rounding of any fp32 summation of them.
double ref_dot_row_int(DType t, const void *row, const void *xq, int n, double *abs_terms);
// Queries q (n_q, n_heads * hd) at positions pos0 .. pos0 + n_q - 1 of one sequence whose
// keys and values k, v hold rows of the shape's strides (>= pos0 + n_q of them): attention_kv
// for a single sequence; out (n_q, n_heads * value_dim).
void ref_attention_kv(float *out, const float *q, const float *k, const float *v, int n_q, int pos0,
                      const AttentionShape *shape);

// ---- Full-sequence attention (project 15; kernels/cpu/reference_attention.c) ----
// The reference for attention_naive and attention_flash.
void ref_attention_full(float *out, const float *q, const float *k, const float *v, const AttentionFullShape *s);
// One output row, query t of head (b, h), in double: out (D). Lets benchmarks check a
// sample of rows of a long sequence without the O(T^2) cost of the whole reference.
void ref_attention_full_row(double *out, const float *q, const float *k, const float *v,
                            const AttentionFullShape *s, int b, int h, int t);
