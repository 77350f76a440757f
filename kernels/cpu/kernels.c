// kernels.c: CPU kernels for the transformer's pointwise and matrix ops (see kernels.h).
// Matmuls of many rows go through OpenBLAS's sgemm; one or a few rows (a decode step, a
// speculative verification) through our own row-streaming matrix-vector product; the rest are plain loops that gcc vectorises,
// split across threads with OpenMP where a call carries enough rows to pay for it.
#include "kernels.h"

#include <cblas.h>
#include <math.h>
#include <omp.h>
#include <pthread.h>
#include <stdint.h>

#include "parallel.h"
#include "quant.h" // fp16 <-> fp32
#include "vec.h"

void kernels_set_threads(int n) {
    if (n <= 0) return;
    omp_set_num_threads(n);
    openblas_set_num_threads(n);
}

// A decode step (T == 1) multiplies each weight matrix by one vector: it is bound by
// reading the weights, and a whole model's worth does not stay in cache between steps. One
// row at a time (a single sequential stream the prefetcher follows) read a stories15M-shaped
// model's matrices at 12.7-13.1 GB/s on one core of the 2-core EPYC this lab grew on, against
// 9.0 GB/s for OpenBLAS's sgemv and 9.6 for four rows at a time; bin/generate's decode
// tokens/s shows the difference.
//
// A few rows at once (T <= MATVEC_MAX_ROWS: a speculative verification of gamma + 1 tokens, a
// small decode batch) take the same path: each weight row is read once, while it sits in L1,
// and dotted with every input row in dot_f32's order (dot_f32_rows: from 4 rows on, their lane
// reductions run together), so row t of the result is bit for bit what a single-row call on
// x_t returns. Verifying tokens in one pass then rounds exactly as decoding them one by one
// (greedy speculative decoding reproduces greedy decoding), and a batched decode step exactly as
// each sequence's own. The price: the weights are not held in registers across rows, so from
// about 8 rows on it is slower than sgemm when the weights sit in cache (measured on a 768 x 2048
// matrix, 1 thread, EPYC Zen 4: 0.80 ms against 0.54 ms at 8 rows, 0.18 against 0.39 ms at 2
// rows, before dot_f32_rows; on an Intel Xeon (family 6 model 207) dot_f32_rows took 8 rows from
// 1.37 to 1.14 ms and 16 from 2.92 to 2.54, bit for bit the same).
// (MATVEC_MAX_ROWS and the work a fork must carry: parallel.h.)

static void matvec_rows(float *out, const float *x, const float *w, int T, int n, int d) {
    // An OpenMP region even on one thread, not PARALLEL_FOR: without it the stories15M-shaped
    // decode on one thread ran slower, 381.5 against 440.3 tok/s (medians of 31 interleaved runs,
    // EPYC Zen 4; 361.6 against 398.0 in another 25), though the loop's code is the same and
    // so is its rate alone on a 37 MB matrix. Why is not understood.
    const float *rows[MATVEC_MAX_ROWS];
    for (int t = 0; t < T; t++) rows[t] = x + (size_t)t * n;
    #pragma omp parallel for schedule(static) if ((size_t)T * n * d >= PARALLEL_MIN_MACS)
    for (int i = 0; i < d; i++) {
        float dots[MATVEC_MAX_ROWS];
        dot_f32_rows(dots, w + (size_t)i * n, rows, T, n);
        for (int t = 0; t < T; t++) out[(size_t)t * d + i] = dots[t];
    }
}

void matmul(float *out, const float *x, const float *w, int T, int n, int d) {
    if (T <= MATVEC_MAX_ROWS) {
        matvec_rows(out, x, w, T, n, d);
    } else {
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, T, d, n, 1.0f, x, n, w, n, 0.0f, out, d);
    }
}

void rmsnorm(float *out, const float *x, const float *weight, int T, int C, float eps) {
    PARALLEL_FOR((double)T * C, schedule(static), for (int t = 0; t < T; t++) {
        const float *xt = x + (size_t)t * C;
        float *ot = out + (size_t)t * C;
        double ss = 0.0; // squares in fp32, summed in double: ggml's rounding, so logits match llama.cpp's
        for (int i = 0; i < C; i++) ss += (double)(xt[i] * xt[i]);
        float inv = 1.0f / sqrtf((float)(ss / C) + eps);
        for (int i = 0; i < C; i++) ot[i] = xt[i] * inv * weight[i];
    });
}

// Row r of x (rows, n) in place, and its log-sum-exp into lse[r] when lse is not NULL. The
// normaliser is ggml's: 1 / sum in double, rounded to float once.
static void softmax_row(float *x, int n, float *lse, int r) {
    float *row = x + (size_t)r * n;
    float max;
    double sum = vf_exp_shifted_sum(row, n, &max);
    float inv = (float)(1.0 / sum);
    for (int j = 0; j < n; j += VEC_WIDTH) {
        int lanes = vf_lanes(j, n);
        vf_store_lanes(row + j, vf_load_lanes(row + j, lanes) * inv, lanes);
    }
    if (lse) lse[r] = max + (float)log(sum);
}

// The trainer calls this once per query row inside its parallel attention, where the
// OpenMP region it used to enter (an if clause kept it to one thread) cost 8 of a layer's
// 14.5 ms at the full target's shapes.
void softmax_rows(float *x, int rows, int n, float *lse) {
    PARALLEL_FOR((double)rows * n, schedule(static), for (int r = 0; r < rows; r++) softmax_row(x, n, lse, r););
}

// ggml's RoPE arithmetic (ggml-cpu ops.cpp, rope_cache_init and rotate_pairs): pair i's
// angle is not rounded from pos * inv_freq[i] but grown by repeated multiplication, theta_0 =
// pos, theta_i = theta_(i-1) * r in float, with r = inv_freq[1] / inv_freq[0] (rope.c builds
// plain tables as exactly that chain from 1, so r is exact there and every factor below is 1);
// a pair whose frequency departs from the chain (YaRN's ramp, a linear factor) has its angle
// scaled by inv_freq[i] / chain_i. cosf and sinf of it, times mscale, and the rotation with
// the fused multiply-adds gcc makes of a c - b s and a s + b c in ggml's build.
void rope_rotate(float *x, int n_heads, int head_dim, int pos, const float *inv_freq, float mscale, RopeStyle style) {
    int half = head_dim / 2;
    float r = half > 1 ? inv_freq[1] / inv_freq[0] : 1.0f;
    float theta = (float)pos * inv_freq[0], chain = inv_freq[0];
    for (int i = 0; i < half; i++) {
        float angle = theta * (inv_freq[i] / chain); // theta * 1 exactly on a plain table
        float c = cosf(angle) * mscale, s = sinf(angle) * mscale;
        int ia = style == ROPE_STYLE_NEOX ? i : 2 * i, ib = style == ROPE_STYLE_NEOX ? i + half : 2 * i + 1;
        for (int h = 0; h < n_heads; h++) {
            float *head = x + h * head_dim;
            float a = head[ia], b = head[ib];
            head[ia] = fmaf(a, c, -(b * s));
            head[ib] = fmaf(a, s, b * c);
        }
        theta *= r;
        chain *= r;
    }
}

// silu(g) * up as ggml_vec_swiglu_f32: per row, whole vectors as g / (1 + e^-g) with vf_exp,
// the row's last H % VEC_WIDTH elements with libm's expf.
void swiglu(float *out, const float *gate, const float *up, int T, int H) {
    PARALLEL_FOR((double)T * H, schedule(static), for (int t = 0; t < T; t++) {
        size_t at = (size_t)t * H;
        int j = 0;
        for (; j + VEC_WIDTH <= H; j += VEC_WIDTH) {
            vf g = vf_load(gate + at + j);
            vf_store(out + at + j, g / (1.0f + vf_exp(-g)) * vf_load(up + at + j));
        }
        for (; j < H; j++) {
            float g = gate[at + j];
            out[at + j] = g / (1.0f + expf(-g)) * up[at + j];
        }
    });
}

// GELU's tanh form for every half-precision input, rounded to half: ggml's table.
static uint16_t gelu_table[1 << 16];
static pthread_once_t gelu_table_once = PTHREAD_ONCE_INIT;

static void gelu_table_fill(void) {
    for (uint32_t h = 0; h < (1u << 16); h++) {
        float g = fp16_to_fp32((uint16_t)h);
        // fused as gcc fuses ggml's 1 + 0.044715 g g: the table then equals ggml's in every non-NaN entry
        float inner = fmaf(0.044715f * g, g, 1.0f);
        gelu_table[h] = fp32_to_fp16(0.5f * g * (1.0f + tanhf(0.79788456080286535587989211986876f * g * inner)));
    }
}

// ggml_vec_geglu_f32: gelu(g) * up, the product skipped (+0) where gelu saturates to 0.
static inline float geglu_one(float g, float up) {
    if (g <= -10.0f) return 0.0f;
    if (g >= 10.0f) return g * up;
    return fp16_to_fp32(gelu_table[fp32_to_fp16(g)]) * up;
}

void geglu_tanh(float *out, const float *gate, const float *up, int T, int H) {
    pthread_once(&gelu_table_once, gelu_table_fill);
    size_t n = (size_t)T * H;
    PARALLEL_FOR((double)n, schedule(static), for (size_t i = 0; i < n; i++) out[i] = geglu_one(gate[i], up[i]););
}

void swiglu_backward(float *d_gate, float *d_up, const float *d_out, const float *gate, const float *up,
                     size_t n) {
    size_t vectors = (n + VEC_WIDTH - 1) / VEC_WIDTH;
    PARALLEL_FOR((double)n, schedule(static), for (size_t v = 0; v < vectors; v++) {
        size_t j = v * VEC_WIDTH;
        int lanes = vf_lanes(j, n);
        vf g = vf_load_lanes(gate + j, lanes), dout = vf_load_lanes(d_out + j, lanes); // d_out may alias d_up
        vf sig = vf_sigmoid(g);
        // silu(g) = g s, silu'(g) = s (1 + g (1 - s))
        vf d_silu = sig * (1.0f + g * (1.0f - sig));
        vf_store_lanes(d_gate + j, dout * vf_load_lanes(up + j, lanes) * d_silu, lanes);
        vf_store_lanes(d_up + j, dout * g * sig, lanes);
    });
}
