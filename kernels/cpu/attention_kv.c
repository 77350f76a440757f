// attention_kv.c: causal attention of new queries against a KV cache (see kernels.h).
// This is the engine's attention for prefill and decode. One (query, head) pair at a time:
// scores over the visible keys into a private row buffer, softmax, weighted sum of values.
// Threads split the (query, head) pairs, so a decode step (one query) still uses every
// core through its heads.
#include "kernels.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"
#include "vec.h"

static void attend_one(float *out, const float *q, const float *k, const float *v, int p,
                       int kv_stride, const AttentionShape *s, float *scores) {
    int hd = s->head_dim;
    // (p + 1) scores; keys hidden by the window get -inf so they weigh exactly 0.
    float max = -INFINITY;
    for (int j = 0; j <= p; j++) {
        float dot = -INFINITY;
        if (attention_visible(p, j, s->window, s->n_sink)) {
            dot = dot_f32(q, k + (size_t)j * kv_stride, hd) * s->scale;
        }
        scores[j] = dot;
        max = dot > max ? dot : max;
    }
    float sum = 0.0f;
    for (int j = 0; j <= p; j++) {
        scores[j] = expf(scores[j] - max);
        sum += scores[j];
    }
    float inv = 1.0f / sum;
    memset(out, 0, hd * sizeof(float));
    for (int j = 0; j <= p; j++) {
        if (scores[j] == 0.0f) continue;
        const float *vj = v + (size_t)j * kv_stride;
        float a = scores[j] * inv;
        for (int i = 0; i < hd; i++) out[i] += a * vj[i];
    }
}

void attention_kv(float *out, const float *q, const float *k, const float *v, int n_q, int pos0,
                  const AttentionShape *s) {
    int hd = s->head_dim;
    int group = s->n_heads / s->n_kv_heads;
    int q_stride = s->n_heads * hd, kv_stride = s->n_kv_heads * hd;
    int n_keys = pos0 + n_q;
    #pragma omp parallel
    {
        float *scores = mallocCheck((size_t)n_keys * sizeof(float));
        #pragma omp for collapse(2) schedule(dynamic, 4)
        for (int t = 0; t < n_q; t++) {
            for (int h = 0; h < s->n_heads; h++) {
                size_t kv_off = (size_t)(h / group) * hd;
                attend_one(out + (size_t)t * q_stride + h * hd, q + (size_t)t * q_stride + h * hd,
                           k + kv_off, v + kv_off, pos0 + t, kv_stride, s, scores);
            }
        }
        free(scores);
    }
}
