// make_seeds.c: writes the small, valid files that seed the fuzzers beside the real ones (the
// quick models, templates, CSVs that `make fuzz` also copies in): tiny GGUF checkpoints (BPE
// and llama vocabularies, F32 and F16, tied and untied), llama2.c checkpoints (legacy and
// version 1) and a tokenizer.bin, vocabularies in fuzz_tokenizer_import's record format, and
// quantised rows for fuzz_quant_blocks.
// Small seeds keep each execution fast, so the fuzzers reach their 10^6 executions.
// Usage: make_seeds DIR (writes DIR/<target>/<seed>); run by `make fuzz`.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "gguf.h"
#include "llama2c.h"
#include "rng.h"

static const char TEXT[] = "In the beginning God created the heaven and the earth. And the earth was without "
                           "form, and void; 12 34. \xe2\x86\x92 caf\xc3\xa9";

static const char *dir;

static const char *seed_path(const char *target, const char *name) {
    static char path[1024];
    snprintf(path, sizeof path, "%s/%s", dir, target);
    mkdir(path, 0755);
    snprintf(path, sizeof path, "%s/%s/%s", dir, target, name);
    return path;
}

static void tiny_model(Model *m, int vocab_size, int tied, int llama2c) {
    Config c = config_default();
    c.dim = 8, c.hidden_dim = 16, c.n_layers = 2, c.n_heads = 2, c.n_kv_heads = llama2c ? 2 : 1;
    c.head_dim = 4, c.vocab_size = vocab_size, c.seq_len = 16, c.tied_embeddings = tied;
    char why[128];
    if (!config_validate(&c, why, sizeof why)) die("make_seeds: config: %s", why);
    model_alloc(m, &c);
    uint64_t rng = rng_seed(7);
    for (size_t i = 0; i < m->n_params; i++) m->params[i] = 2.0f * (float)rng_uniform(&rng) - 1.0f;
}

// A llama2.c / SentencePiece-style vocabulary: <unk>, BOS, EOS, 256 byte pieces, a few words.
static void llama_vocab(Tokenizer *t) {
    const char *words[] = {" ", "e", "t", "th", " the", "he", "the earth"};
    int n_words = sizeof words / sizeof words[0], V = 259 + n_words;
    unsigned char *pieces[259 + 7];
    int lens[259 + 7];
    float scores[259 + 7];
    for (int i = 0; i < V; i++) {
        char piece[16];
        if (i < 3) snprintf(piece, sizeof piece, "%s", (const char *[]){"<unk>", "<s>", "</s>"}[i]);
        else if (i < 259) snprintf(piece, sizeof piece, "<0x%02X>", i - 3);
        else snprintf(piece, sizeof piece, "%s", words[i - 259]);
        lens[i] = (int)strlen(piece);
        pieces[i] = (unsigned char *)strdup(piece);
        scores[i] = i < 259 ? 0.0f : -(float)i / 7.0f;
    }
    Error err;
    if (tokenizer_from_pieces(t, (const unsigned char *const *)pieces, lens, scores, V, &err)) die("%s", err.msg);
    for (int i = 0; i < V; i++) free(pieces[i]);
}

static void write_bytes(const char *path, const void *p, size_t n) {
    FILE *f = fopenCheck(path, "wb");
    fwriteCheck(p, 1, n, f);
    fcloseCheck(f);
}

// fuzz_tokenizer_import's records: kind 0 {u8 len, bytes, f32 score}..., kind 1 {u16, u16}...
static void import_seeds(const Tokenizer *llama, const Tokenizer *bpe) {
    size_t cap = 1 + (size_t)llama->vocab_size * (1 + 255 + 4), n = 0;
    unsigned char *buf = mallocCheck(cap);
    buf[n++] = 0;
    for (int i = 0; i < llama->vocab_size; i++) {
        buf[n++] = (unsigned char)llama->piece_len[i];
        memcpy(buf + n, llama->pieces[i], llama->piece_len[i]);
        n += llama->piece_len[i];
        memcpy(buf + n, &llama->scores[i], 4);
        n += 4;
    }
    write_bytes(seed_path("tokenizer_import", "llama_vocab"), buf, n);
    n = 0;
    buf = reallocCheck(buf, 1 + 4 * (size_t)bpe->n_merges);
    buf[n++] = 1;
    for (int i = 0; i < 2 * bpe->n_merges; i++) {
        buf[n++] = (unsigned char)(bpe->merges[i] & 0xff);
        buf[n++] = (unsigned char)(bpe->merges[i] >> 8);
    }
    write_bytes(seed_path("tokenizer_import", "bpe_merges"), buf, n);
    free(buf);
}

// fuzz_quant_blocks' inputs: per weight type (byte 0: its index in the target's list), one block
// (byte 1 = 0), then two rows and the activations from bytes below 0x3C, so that every fp16 scale
// and float read from them is finite and at most about 1.
static void quant_block_seeds(void) {
    uint8_t buf[2 + 2 * 1024 + 1024];
    uint64_t rng = rng_seed(28);
    for (int k = 0; k < 10; k++) {
        char name[32];
        buf[0] = (uint8_t)k, buf[1] = 0;
        for (size_t i = 2; i < sizeof buf; i++) buf[i] = (uint8_t)(rng_u64(&rng) % 0x3C);
        snprintf(name, sizeof name, "type%d", k);
        write_bytes(seed_path("quant_blocks", name), buf, sizeof buf);
    }
}

int main(int argc, char **argv) {
    if (argc != 2) die("usage: make_seeds DIR");
    dir = argv[1];
    mkdir(dir, 0755);
    Tokenizer bpe, llama;
    Error err;
    if (tokenizer_train_bpe(&bpe, (const unsigned char *)TEXT, sizeof TEXT - 1, 280, &err)) die("%s", err.msg);
    llama_vocab(&llama);
    Model m;
    const char *targets[] = {"gguf", "gguf_model"};
    for (int t = 0; t < 2; t++) {
        tiny_model(&m, bpe.vocab_size, 1, 0);
        model_save_gguf(seed_path(targets[t], "bpe_f32_tied.gguf"), &m, &bpe, GGML_TYPE_F32);
        model_free(&m);
        tiny_model(&m, llama.vocab_size, 0, 0);
        model_save_gguf(seed_path(targets[t], "llama_f16.gguf"), &m, &llama, GGML_TYPE_F16);
        model_free(&m);
    }
    for (int shared = 0; shared < 2; shared++) {
        tiny_model(&m, llama.vocab_size, shared, 1);
        m.config.rope.orig_ctx = m.config.seq_len;
        llama2c_save_model(seed_path("llama2c", shared ? "legacy_shared.bin" : "legacy.bin"), &m, 0);
        llama2c_save_model(seed_path("llama2c", shared ? "v1_shared.bin" : "v1.bin"), &m, 1);
        model_free(&m);
    }
    llama2c_save_tokenizer(seed_path("llama2c_tokenizer", "tokenizer.bin"), &llama);
    import_seeds(&llama, &bpe);
    write_bytes(seed_path("bpe", "text"), TEXT, sizeof TEXT - 1);
    quant_block_seeds();
    tokenizer_free(&bpe);
    tokenizer_free(&llama);
    return 0;
}
