// checkpoint.c: checkpoint_load (checkpoint.h), which picks the GGUF or llama2.c loader by
// the file's magic, and checkpoint_configs, the shapes of a list of GGUF files. Tests: `make build/tests/test_gguf && ./build/tests/test_gguf`.
#include "checkpoint.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gguf.h"
#include "llama2c.h"

int checkpoint_load(const char *path, const char *tokenizer_path, Model *m, Tokenizer *tok, Error *err) {
    FILE *f = fopen(path, "rb");
    if (!f) return error_set(err, "%s: cannot open: %s", path, strerror(errno));
    char magic[4];
    int is_gguf = fread(magic, 1, 4, f) == 4 && memcmp(magic, "GGUF", 4) == 0;
    fclose(f);
    int rc = is_gguf ? model_load_gguf(path, m, tokenizer_path ? NULL : tok, err)
                     : llama2c_load_model(path, m, err);
    if (rc != 0 || !tok || (is_gguf && !tokenizer_path)) return rc;
    if (!tokenizer_path)
        rc = error_set(err, "%s: a llama2.c checkpoint needs its tokenizer.bin (none given)", path);
    else
        rc = tokenizer_load_llama2c(tok, tokenizer_path, m->config.vocab_size, err);
    if (rc) model_free(m);
    return rc;
}

int checkpoint_configs(const char *list, NamedConfig *out, int max, Error *err) {
    char *copy = strdup(list), **paths = mallocCheck((size_t)(max > 0 ? max : 1) * sizeof(char *));
    if (!copy) die("checkpoint_configs: out of memory");
    int n = split_comma_list(copy, paths, max, err);
    for (int i = 0; i < n; i++) {
        int rc = strlen(paths[i]) >= sizeof out[i].path ? error_set(err, "%.64s...: the path is too long", paths[i])
                 : model_config_gguf(paths[i], &out[i].config, err) ? -1
                                                                      : path_stem(out[i].name, sizeof out[i].name, paths[i], err);
        if (rc) {
            n = -1;
            break;
        }
        snprintf(out[i].path, sizeof out[i].path, "%s", paths[i]);
    }
    free(paths);
    free(copy);
    return n;
}
