// checkpoint.c: checkpoint_load (checkpoint.h), which picks the GGUF or llama2.c loader by
// the file's magic. Tests: `make build/tests/test_gguf && ./build/tests/test_gguf`.
#include "checkpoint.h"

#include <errno.h>
#include <stdio.h>
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
