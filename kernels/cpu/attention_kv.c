// attention_kv.c: causal attention of query rows against their KV caches (see kernels.h).
// This is the engine's attention for prefill and decode on the CPU. One (row, head) pair at
// a time: scores over the visible keys only (the sinks, then the window) into the calling
// thread's row of the scratch, softmax, weighted sum of values. Threads split the (row,
// head) pairs, so a decode step (one row) still uses every core through its heads.
#include "kernels.h"

#include <math.h>
#include <omp.h>
#include <string.h>

#include "common.h"
#include "vec.h"

// Visible keys of a query at position p: [0, n_lo) then [hi0, p] (the sinks, then the window).
static void visible_ranges(int p, const AttentionShape *s, int *n_lo, int *hi0) {
    if (s->window == 0 || p < s->window) {
        *n_lo = 0;
        *hi0 = 0;
        return;
    }
    *hi0 = p - s->window + 1;
    *n_lo = s->n_sink < *hi0 ? s->n_sink : *hi0;
}

// One query head against its KV head's rows: k (key_stride apart), v (value_stride apart).
static void attend_one(float *out, const float *q, const float *k, const float *v, int p, const AttentionShape *s,
                       float *scores) {
    int hd = s->head_dim, vd = attention_value_dim(s), n_lo, hi0;
    size_t ks = attention_key_stride(s), vs = attention_value_stride(s);
    visible_ranges(p, s, &n_lo, &hi0);
    int n = n_lo + (p + 1 - hi0); // scores[i] belongs to key i (i < n_lo) or hi0 + i - n_lo
    float max = -INFINITY;
    for (int i = 0; i < n; i++) {
        int j = i < n_lo ? i : hi0 + i - n_lo;
        scores[i] = dot_f32(q, k + (size_t)j * ks, hd) * s->scale;
        max = scores[i] > max ? scores[i] : max;
    }
    float sum = 0.0f;
    for (int i = 0; i < n; i++) {
        scores[i] = expf(scores[i] - max);
        sum += scores[i];
    }
    float inv = 1.0f / sum;
    memset(out, 0, vd * sizeof(float));
    for (int i = 0; i < n; i++) {
        if (scores[i] == 0.0f) continue;
        int j = i < n_lo ? i : hi0 + i - n_lo;
        const float *vj = v + (size_t)j * vs;
        float a = scores[i] * inv;
        for (int d = 0; d < vd; d++) out[d] += a * vj[d];
    }
}

size_t attention_kv_scratch_bytes(int max_keys) {
    return (size_t)omp_get_max_threads() * max_keys * sizeof(float);
}

void attention_kv(float *out, const float *q, const KVRows *kv, const AttentionShape *s, float *scratch,
                  size_t scratch_bytes) {
    int hd = s->head_dim, vd = attention_value_dim(s), group = s->n_heads / s->n_kv_heads;
    int q_stride = s->n_heads * hd, out_stride = s->n_heads * vd;
    int max_keys = 0;
    for (int r = 0; r < kv->R; r++) max_keys = kv->pos[r] + 1 > max_keys ? kv->pos[r] + 1 : max_keys;
    int threads = omp_get_max_threads();
    if ((size_t)threads * max_keys * sizeof(float) > scratch_bytes)
        die("attention_kv: %zu bytes of scratch for %d threads x %d keys", scratch_bytes, threads, max_keys);
    #pragma omp parallel num_threads(threads)
    {
        float *scores = scratch + (size_t)omp_get_thread_num() * max_keys;
        #pragma omp for collapse(2) schedule(dynamic, 4)
        for (int r = 0; r < kv->R; r++) {
            for (int h = 0; h < s->n_heads; h++) {
                size_t g = (size_t)(h / group);
                attend_one(out + (size_t)r * out_stride + h * vd, q + (size_t)r * q_stride + h * hd,
                           kv->keys[r] + g * hd, kv->values[r] + g * vd, kv->pos[r], s, scores);
            }
        }
    }
}
