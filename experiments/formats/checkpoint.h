// checkpoint.h: open any model checkpoint the lab understands, with its tokenizer:
//   *.gguf  our GGUF checkpoints (tokenizer inside; tokenizer_path must be NULL)
//   *.bin   llama2.c checkpoints (legacy or version-1 header); tokenizer_path names
//           llama2.c's tokenizer.bin (NULL: no tokenizer; tok must then be NULL)
// On error nothing stays allocated and err names the file and the fault.
#pragma once

#include "model.h"
#include "tokenizer.h"

int checkpoint_load(const char *model_path, const char *tokenizer_path, Model *m, Tokenizer *tok, Error *err);

// A GGUF model's config without its weights, named after its file (path_stem): what a program
// that needs only the shapes of published models reads.
typedef struct {
    char name[128], path[512];
    Config config;
} NamedConfig;
// The configs of an option's comma-separated GGUF files (FILE[,FILE]), at most max: how many,
// or -1 with err naming the file and the fault.
int checkpoint_configs(const char *list, NamedConfig *out, int max, Error *err);
