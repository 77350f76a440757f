// zoo.h: the models the lab trains, declared once per profile (zoo.c holds the table).
//
// Every profile has
//   - one target model (role "target"), the model most experiments run;
//   - drafts of three sizes for speculative decoding (role "draft"), ordered small to large,
//     the smallest deliberately weak (so acceptance visibly depends on draft quality);
//   - attention variants of one size, trained alike (role "attention"): MHA, GQA, MQA, MLA
//     (d_c = 4 hd, d_r = hd / 2, DeepSeek-V2's ratios) and GQA with cross-layer KV sharing
//     (kv_share 2), attention "mha" / "gqa" / "mqa" / "mla" / "gqa+cla".
// All share one byte-level BPE vocabulary (vocab_size) trained on the corpus's training
// split, and one training context (seq_len).
//
// bin/train writes out/models/<name>.gguf and skips a model whose key still matches: the
// key hashes its Config, its TrainConfig, the corpus bytes, the vocabulary size and
// TRAIN_CODE_VERSION (bump it when a change to the trainer changes what it produces).
#pragma once

#include <stddef.h>
#include <stdint.h>

#include "common.h"
#include "model.h"
#include "trainer.h"

#define TRAIN_CODE_VERSION 3 // 3: the tokenizer splits text as llama.cpp's "starcoder" pre-tokenizer
#define ZOO_MAX_MODELS 12

typedef struct {
    char name[32];       // file stem under the models directory
    char role[16];       // "target" | "draft" | "attention"
    char attention[8];   // "mha" | "gqa" | "mqa" | "mla" | "gqa+cla"
    Config config;       // vocab_size is the profile's
    TrainConfig train;
    // Contexts of the passkey grid bin/train scores after training (each at every needle
    // depth): 3 (T/2, 3T/4, T), 1 (T only) or 0 (none: a model trained on text alone).
    int passkey_contexts;
} ZooModel;

typedef struct {
    char profile[16];
    int vocab_size;      // shared BPE vocabulary
    int seq_len;         // training context of every model
    int passkey_samples; // held-out passkeys evaluated per model, context and needle depth
    int n_models;
    ZooModel models[ZOO_MAX_MODELS];
} Zoo;

// The zoo of "quick" or "full"; -1 with err for another name.
int zoo_for_profile(Zoo *z, const char *profile, Error *err);

// NULL when absent.
const ZooModel *zoo_find(const Zoo *z, const char *name);
// The i-th model (0-based, in table order) with this role; NULL when there are fewer.
const ZooModel *zoo_with_role(const Zoo *z, const char *role, int i);

// The key that decides whether a trained model is up to date (see above).
uint64_t zoo_model_key(const ZooModel *m, uint64_t corpus_hash);

// "<dir>/<name><suffix>", e.g. zoo_path(buf, n, "out/models", "target", ".gguf"); dies if it
// does not fit.
void zoo_path(char *out, size_t size, const char *dir, const char *name, const char *suffix);
