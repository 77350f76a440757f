// attention_kv.c: causal attention of query rows against their KV caches (see kernels.h).
// This is the engine's attention for prefill and decode on the CPU. One row and a block of
// the query heads that share a KV head at a time: scores over the visible keys only (the
// sinks, then the window: O(window) per row, whether the cache is contiguous or a ring) into
// the calling thread's part of the scratch, softmax, weighted sum of values, each head's sums
// in the order of a head attended alone. Threads split the (row, head block) pairs, so a
// decode step (one row) still uses every core through its heads. An int8 cache (KVRows.dtype)
// is read row by row: a key's score is its int8 codes dotted with q times the row's scale for
// the head, a value is added as its codes times its scale times the weight.
#include "kernels.h"

#include <limits.h>
#include <math.h>
#include <omp.h>
#include <stdint.h>
#include <string.h>

#include "common.h"
#include "parallel.h"
#include "vec.h"

// Where visible key i (attention_visible_keys) sits: the sinks at rows 0 .. n_sinks - 1, the
// window from row0 = kv_layout_row(layout, lo) on, wrapping back by `ring` at row `wrap` (a
// compare per key instead of a modulo; a contiguous cache never wraps). A paged cache maps
// every key through its block table (kv_layout_row), sinks included.
typedef struct {
    int n_sinks, lo, row0, wrap, ring;
    KVLayout layout;
} VisibleRows;

static VisibleRows visible_rows(VisibleKeys vis, KVLayout layout) {
    VisibleRows r = {vis.n_sinks, vis.lo, kv_layout_row(layout, vis.lo),
                     layout.ring ? layout.sinks + layout.ring : INT_MAX, layout.ring, layout};
    return r;
}

static inline int visible_row(const VisibleRows *r, int i) {
    if (r->layout.blocks) return kv_layout_row(r->layout, i < r->n_sinks ? i : r->lo + i - r->n_sinks);
    if (i < r->n_sinks) return i;
    int row = r->row0 + i - r->n_sinks;
    return row >= r->wrap ? row - r->ring : row;
}

// One KV head's rows: fp32 (k, v), or int8 codes with a scale per row (ks, vs, n_scales apart).
typedef struct {
    const void *k, *v;
    const float *ks, *vs;
    int n_scales;
    DType dtype;
} HeadRows;

static inline float key_dot(const HeadRows *h, const float *q, size_t row, size_t stride, int hd) {
    if (h->dtype == DTYPE_F32) return dot_f32(q, (const float *)h->k + row * stride, hd);
    return dot_f32_i8(q, (const signed char *)h->k + row * stride, hd) * h->ks[row * h->n_scales];
}

// acc += a * (value row) with one rounding per element (fused), a vector of dims at a time.
static inline void add_value(float *acc, const HeadRows *h, float a, size_t row, size_t stride, int vd) {
    const float *vf32 = h->dtype == DTYPE_F32 ? (const float *)h->v + row * stride : NULL;
    const int8_t *vi8 = h->dtype == DTYPE_F32 ? NULL : (const int8_t *)h->v + row * stride;
    if (vi8) a *= h->vs[row * h->n_scales];
    vf va = vf_splat(a);
    for (int d = 0; d < vd; d += VEC_WIDTH) {
        int lanes = vf_lanes(d, vd);
        vf v;
        if (vf32) v = vf_load_lanes(vf32 + d, lanes);
        else {
            float codes[VEC_WIDTH] = {0};
            for (int k = 0; k < lanes; k++) codes[k] = vi8[d + k];
            v = vf_load(codes);
        }
        vf_store_lanes(acc + d, vf_madd(va, v, vf_load_lanes(acc + d, lanes)), lanes);
    }
}

// dst's nv <= 4 vectors += the probabilities (scores times inv) of keys j, j + VEC_STEP, ... times
// dims d0.. of their fp32 value rows, in key order, the vectors kept in registers across the keys
// (inlined with nv a constant where it is one).
static inline __attribute__((always_inline)) void add_value_vectors(float *dst, const float *scores, float inv,
                                                                    const HeadRows *h, const VisibleRows *rows,
                                                                    int j, int count, size_t stride, int d0, int nv) {
    vf acc[4] = {{0}, {0}, {0}, {0}};
    for (int i = j; i < count; i += VEC_STEP) {
        if (scores[i] == 0.0f) continue; // fma(0, v, acc) is acc
        const float *v = (const float *)h->v + (size_t)visible_row(rows, i) * stride + d0;
        vf a = vf_splat(scores[i] * inv);
#pragma GCC unroll 4
        for (int t = 0; t < nv; t++) acc[t] = vf_madd(a, vf_load(v + t * VEC_WIDTH), acc[t]);
    }
#pragma GCC unroll 4
    for (int t = 0; t < nv; t++) vf_store(dst + t * VEC_WIDTH, acc[t]);
}

// For each of n heads (scores score_stride apart, partials partial_stride apart): partial row
// j (of VEC_STEP) += the probabilities of keys j, j + VEC_STEP, ... times their fp32 value rows,
// add_value's sums in its order, without reading and writing the row back per key
// (vd % VEC_WIDTH == 0). The heads take turns on each block of value rows while it is in L2.
static void add_values_f32(float *partial, size_t partial_stride, const float *scores, size_t score_stride,
                           const float *inv, int n, const HeadRows *h, const VisibleRows *rows, int count,
                           size_t stride, int vd, int used) {
    for (int j = 0; j < used; j++)
        for (int d0 = 0; d0 < vd; d0 += VEC_STEP) {
            int nv = vd - d0 >= VEC_STEP ? 4 : (vd - d0) / VEC_WIDTH;
            for (int k = 0; k < n; k++) {
                float *dst = partial + k * partial_stride + (size_t)j * vd + d0;
                const float *sk = scores + k * score_stride;
                if (nv == 4) add_value_vectors(dst, sk, inv[k], h, rows, j, count, stride, d0, 4);
                else add_value_vectors(dst, sk, inv[k], h, rows, j, count, stride, d0, nv);
            }
        }
}

// Query heads that share one KV head (GQA, MQA) are attended together, up to this many at a
// time: a batch of keys, and a block of value rows, is read from memory once for all of them
// and then from L1 / L2 (at 8K positions one KV head's keys and values are 16 MB, so a row that
// read them once per query head was bound by the last-level cache's bandwidth).
#define HEAD_BLOCK 4

// Query heads q[0 .. n - 1] (hd apart) against their shared KV head's rows (key_stride,
// value_stride apart) into out[0 .. n - 1] (vd apart). Each head's arithmetic is that of a
// head attended alone, only the order of the heads' loads changes, so grouping changes no bit.
// A ring or a paged cache changes only where a key is read from, not the order, so they give
// the same bits as a contiguous cache. scratch: attend_heads_scratch_floats(n, keys, vd).
//
// The arithmetic is llama.cpp's CPU attention without flash attention (ggml's mul_mat, soft_max,
// mul_mat over an f32 cache): scores by dot_f32 (ggml_vec_dot_f32) times the scale; the
// softmax of vf_exp_shifted_sum with 1 / sum in double; and each output dim the dot of the
// probabilities with that dim of the values in ggml_vec_dot_f32's order over the keys padded
// with zeros (llama.cpp pads its key count to a multiple of 256 and masks the rest to
// probability 0): key i is fused into lane i % VEC_WIDTH of accumulator (i / VEC_WIDTH) % 4,
// here a row of `partial` (VEC_STEP, vd) per lane, then the accumulators fold (0 + 2) + (1 + 3)
// and the lanes as vf_reduce does. That is ggml's order for one query row (a decode step);
// llama.cpp's batched rows (a prompt) go through llamafile's sgemm, one accumulator over the
// keys, which differs from this once a row sees more than VEC_WIDTH keys: rows here stay
// independent of the batch (a row rounds the same alone or among others).
static size_t attend_heads_scratch_floats(int n, int max_keys, int vd) {
    return (size_t)n * (max_keys + (size_t)VEC_STEP * vd);
}

static void attend_heads(float *out, const float *q, int n, const HeadRows *kv, int p, KVLayout layout,
                         const AttentionShape *s, float *scratch, int max_keys) {
    int hd = s->head_dim, vd = attention_value_dim(s);
    size_t ks = attention_key_stride(s), vs = attention_value_stride(s);
    VisibleKeys vis = attention_visible_keys(p, s->window, s->n_sink);
    VisibleRows rows = visible_rows(vis, layout);
    float *scores = scratch;                             // (n, max_keys)
    float *partial = scratch + (size_t)n * max_keys;     // (n, VEC_STEP, vd)
    // StreamingLLM's rule: the sinks are scored against q rotated back by the evicted count
    float q_sink[n * hd];
    const float *qs = q;
    if (s->cache_positions && vis.evicted > 0 && vis.n_sinks > 0) {
        memcpy(q_sink, q, (size_t)n * hd * sizeof(float));
        rope_rotate(q_sink, n, hd, -vis.evicted, s->inv_freq, 1.0f, ROPE_STYLE_NORM);
        qs = q_sink;
    }
    for (int i = 0; i < vis.count;) {
        int batch = vis.count - i < 16 ? vis.count - i : 16;
        if (kv->dtype == DTYPE_F32 && i >= vis.n_sinks && batch >= 4) { // up to 16 keys, one reduction
            const float *keys[16];
            for (int k = 0; k < batch; k++) keys[k] = (const float *)kv->k + (size_t)visible_row(&rows, i + k) * ks;
            for (int h = 0; h < n; h++) {
                float *sh = scores + (size_t)h * max_keys + i;
                dot_f32_rows(sh, q + (size_t)h * hd, keys, batch, hd);
                for (int k = 0; k < batch; k++) sh[k] *= s->scale;
            }
            i += batch;
        } else {
            const float *qi = i < vis.n_sinks ? qs : q;
            for (int h = 0; h < n; h++)
                scores[(size_t)h * max_keys + i] =
                    key_dot(kv, qi + (size_t)h * hd, (size_t)visible_row(&rows, i), ks, hd) * s->scale;
            i++;
        }
    }
    float inv[n];
    for (int h = 0; h < n; h++) {
        float max;
        inv[h] = (float)(1.0 / vf_exp_shifted_sum(scores + (size_t)h * max_keys, vis.count, &max));
    }
    // rows past the keys stay +0 (never -0: they start at +0 and an fma rounding to zero gives
    // +0), so they are neither cleared nor read, but added as 0, which changes no sum
    int used = vis.count < VEC_STEP ? vis.count : VEC_STEP;
    size_t head_partial = (size_t)VEC_STEP * vd;
    if (kv->dtype == DTYPE_F32 && vd % VEC_WIDTH == 0) {
        add_values_f32(partial, head_partial, scores, max_keys, inv, n, kv, &rows, vis.count, vs, vd, used);
    } else {
        for (int h = 0; h < n; h++) {
            float *ph = partial + h * head_partial;
            const float *sh = scores + (size_t)h * max_keys;
            memset(ph, 0, (size_t)used * vd * sizeof(float));
            for (int i = 0; i < vis.count; i++) {
                if (sh[i] == 0.0f) continue; // fma(0, v, acc) is acc
                add_value(ph + (size_t)(i % VEC_STEP) * vd, kv, sh[i] * inv[h], (size_t)visible_row(&rows, i), vs, vd);
            }
        }
    }
    for (int h = 0; h < n; h++) {
        const float *ph = partial + h * head_partial;
        for (int d = 0; d < vd; d += VEC_WIDTH) {
            int lanes = vf_lanes(d, vd);
            vf acc[VEC_WIDTH];
#define PARTIAL(k) ((k) < used ? vf_load_lanes(ph + (size_t)(k) * vd + d, lanes) : (vf){0})
            for (int l = 0; l < VEC_WIDTH; l++)
                acc[l] = (PARTIAL(l) + PARTIAL(l + 2 * VEC_WIDTH)) + (PARTIAL(l + VEC_WIDTH) + PARTIAL(l + 3 * VEC_WIDTH));
#undef PARTIAL
            VEC_REDUCE_LANES(acc);
            vf_store_lanes(out + (size_t)h * vd + d, acc[0], lanes);
        }
    }
}

// Query heads per call of attend_heads: up to HEAD_BLOCK of a KV head's group, fewer when the
// blocks would not give every thread one (a decode step of an MQA model has one KV head).
static int heads_per_block(const AttentionShape *s, int R, int threads) {
    int group = s->n_heads / s->n_kv_heads;
    int blocks = (threads + R * s->n_kv_heads - 1) / (R * s->n_kv_heads); // per group, for every thread
    int fewest = (group + HEAD_BLOCK - 1) / HEAD_BLOCK;
    blocks = blocks < fewest ? fewest : blocks > group ? group : blocks;
    return (group + blocks - 1) / blocks;
}

size_t attention_kv_scratch_bytes(const AttentionShape *s, int max_keys) {
    int group = s->n_heads / s->n_kv_heads, most = group < HEAD_BLOCK ? group : HEAD_BLOCK;
    return (size_t)omp_get_max_threads() * attend_heads_scratch_floats(most, max_keys, attention_value_dim(s)) *
           sizeof(float);
}

void attention_kv(float *out, const float *q, const KVRows *kv, const AttentionShape *s, float *scratch,
                  size_t scratch_bytes) {
    int hd = s->head_dim, vd = attention_value_dim(s), group = s->n_heads / s->n_kv_heads;
    int q_stride = s->n_heads * hd, out_stride = s->n_heads * vd;
    int max_keys = 0;
    for (int r = 0; r < kv->R; r++) {
        int n = attention_visible_keys(kv->pos[r], s->window, s->n_sink).count;
        max_keys = n > max_keys ? n : max_keys;
    }
    if (kv->dtype != DTYPE_F32 && (kv->dtype != DTYPE_I8 || kv->n_scales != s->n_kv_heads))
        die("attention_kv: a %s cache with %d scales per row for %d KV heads", dtype_name(kv->dtype), kv->n_scales,
            s->n_kv_heads);
    size_t esize = kv->dtype == DTYPE_I8 ? 1 : sizeof(float);
    int threads = omp_get_max_threads(), per = heads_per_block(s, kv->R, threads);
    int blocks = (group + per - 1) / per; // per KV head
    size_t thread_floats = attend_heads_scratch_floats(per, max_keys, vd);
    if ((size_t)threads * thread_floats * sizeof(float) > scratch_bytes)
        die("attention_kv: %zu bytes of scratch for %d threads x %d keys x %d heads", scratch_bytes, threads, max_keys,
            per);
    // a decode step of a small model attends over few keys: its heads are not worth a fork
    size_t macs = (size_t)kv->R * s->n_heads * max_keys * (hd + vd);
    PARALLEL_FOR((double)macs, collapse(2) schedule(dynamic, 4), for (int r = 0; r < kv->R; r++) {
        for (int b = 0; b < s->n_kv_heads * blocks; b++) {
            int g = b / blocks, h0 = g * group + (b % blocks) * per;
            int n = (g + 1) * group - h0 < per ? (g + 1) * group - h0 : per;
            KVLayout layout = kv->layouts ? kv->layouts[r] : (KVLayout){0};
            HeadRows rows = {(const char *)kv->keys[r] + (size_t)g * hd * esize,
                             (const char *)kv->values[r] + (size_t)g * vd * esize,
                             kv->dtype == DTYPE_I8 ? kv->key_scales[r] + g : NULL,
                             kv->dtype == DTYPE_I8 ? kv->value_scales[r] + g : NULL, kv->n_scales, kv->dtype};
            attend_heads(out + (size_t)r * out_stride + (size_t)h0 * vd, q + (size_t)r * q_stride + (size_t)h0 * hd, n,
                         &rows, kv->pos[r], layout, s, scratch + (size_t)omp_get_thread_num() * thread_floats,
                         max_keys);
        }
    });
}
