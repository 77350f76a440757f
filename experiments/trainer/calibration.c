// calibration.c: matmul inputs recorded through the engine's tap (see calibration.h).
#include "calibration.h"

#include <stdlib.h>
#include <string.h>

#include "common.h"
#include "kernels.h"
#include "session.h"

typedef struct {
    Calibration *cal;
    int seq; // the sequence being run
} Recorder;

// Where layer l's rows of an activation live, and their width; NULL for one not recorded.
static float *activation_rows(const Calibration *cal, TensorInput input, int l, int *width) {
    float *base;
    switch (input) {
    case INPUT_ATTN_NORM: base = cal->attn_norm, *width = cal->C; break;
    case INPUT_ATTN_OUT: base = cal->attn_out, *width = cal->O; break;
    case INPUT_FFN_NORM: base = cal->ffn_norm, *width = cal->C; break;
    case INPUT_FFN_ACT: base = cal->ffn_act, *width = cal->H; break;
    case INPUT_FINAL_NORM: return *width = cal->C, cal->final_norm;
    default: return NULL;
    }
    return base + (size_t)l * cal->N * *width;
}

static void record(void *ctx, TensorInput input, int layer, const float *x, const int *pos, int R, int cols) {
    const Recorder *rec = ctx;
    const Calibration *cal = rec->cal;
    int width = 0;
    float *rows = activation_rows(cal, input, layer, &width);
    if (!rows || width != cols)
        die("calibration: activation %d of layer %d is %d wide, %d expected", (int)input, layer, cols, width);
    for (int r = 0; r < R; r++)
        memcpy(rows + ((size_t)rec->seq * cal->T + pos[r]) * cols, x + (size_t)r * cols, (size_t)cols * sizeof(float));
}

void calibration_run(Calibration *cal, const Model *m, const int *tokens, int B, int T) {
    const Config *c = &m->config;
    if (c->kv_lora_rank) die("calibration: MLA models are not supported (their attention output is a latent)");
    if (m->quant) die("calibration: the model runs quantised matrices; calibrate its fp32 weights");
    if (B < 1 || T < 1 || T > c->seq_len) die("calibration: %d x %d tokens (context %d)", B, T, c->seq_len);
    size_t N = (size_t)B * T, C = c->dim, O = (size_t)c->n_heads * c->head_dim, H = c->hidden_dim, L = c->n_layers;
    *cal = (Calibration){.B = B, .T = T, .N = (int)N, .L = (int)L, .C = (int)C, .O = (int)O, .H = (int)H};
    cal->attn_norm = mallocCheck(L * N * C * sizeof(float));
    cal->attn_out = mallocCheck(L * N * O * sizeof(float));
    cal->ffn_norm = mallocCheck(L * N * C * sizeof(float));
    cal->ffn_act = mallocCheck(L * N * H * sizeof(float));
    cal->final_norm = mallocCheck(N * C * sizeof(float));

    Engine e;
    engine_open(&e, m, ops_cpu(), DTYPE_F32, T, T);
    Recorder rec = {cal, 0};
    e.tap = record, e.tap_ctx = &rec;
    Session s;
    session_open(&s, &e, T);
    float *logits = mallocCheck((size_t)T * c->vocab_size * sizeof(float)); // every row through the head: its input
    Error err;
    for (rec.seq = 0; rec.seq < B; rec.seq++) {
        session_truncate(&s, 0);
        if (session_prefill(&s, tokens + (size_t)rec.seq * T, T, logits, &err)) die("calibration: %s", err.msg);
    }
    free(logits);
    session_close(&s);
    engine_close(&e);
}

void calibration_free(Calibration *cal) {
    free(cal->attn_norm), free(cal->attn_out), free(cal->ffn_norm), free(cal->ffn_act), free(cal->final_norm);
    memset(cal, 0, sizeof *cal);
}

const float *calibration_input(const Calibration *cal, const Config *c, TensorInput input, int l) {
    if (input == INPUT_TIED_HEAD) input = c->tied_embeddings ? INPUT_FINAL_NORM : INPUT_NONE;
    int width;
    return activation_rows(cal, input, l < 0 ? 0 : l, &width);
}

int *calibration_tokens(const Tokenizer *tok, const char *text, size_t len, int B, int T) {
    int *tokens = mallocCheck((size_t)B * T * sizeof(int));
    size_t span = (size_t)T * 16; // bytes enough for T - 1 tokens of text
    int *buf = mallocCheck(tokenizer_max_tokens(span) * sizeof(int));
    if (len < span * B) die("calibration: %zu bytes of calibration text, %zu needed", len, span * B);
    for (int b = 0; b < B; b++) {
        size_t n = tokenizer_encode(tok, (const unsigned char *)text + (size_t)b * (len / B), span, false, false, buf);
        if (n < (size_t)T - 1) die("calibration: %zu bytes of text gave %zu tokens, %d needed", span, n, T - 1);
        tokens[(size_t)b * T] = tok->bos_id;
        memcpy(tokens + (size_t)b * T + 1, buf, (size_t)(T - 1) * sizeof(int));
    }
    free(buf);
    return tokens;
}
