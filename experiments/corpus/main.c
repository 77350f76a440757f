// corpus/main.c: bin/corpus, the corpus's validation text as a file: the exact bytes every
// model of the lab is evaluated on (corpus.h: the KJV normalised and split, validation blocks
// concatenated), for tools outside the lab that read text files, such as llama.cpp's
// llama-perplexity and llama-tokenize when the real-model fixtures are recorded
// (scripts/record_llama_fixtures.sh, tests/fixtures/real/README.md).
//
//   bin/corpus out/corpus/kjv-valid.txt                 the KJV's validation text
//   bin/corpus OUT.txt --corpus FILE                    that of a UTF-8 file (default: $CORPUS)
//   make out/corpus/kjv-valid.txt                       the first, as a make target (mk/real.mk)
//
// The file is written atomically (a temp file renamed over OUT), so an interrupted run never
// leaves a partial one.
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>

#include "common.h"
#include "corpus.h"

static void usage(FILE *f) {
    fprintf(f, "usage: bin/corpus OUT [--corpus FILE]\n"
               "Write the validation text of the corpus (the KJV, or FILE, default $CORPUS) to OUT.\n");
}

int main(int argc, char **argv) {
    static const struct option opts[] = {{"corpus", required_argument, 0, 'c'}, {"help", no_argument, 0, 'h'}, {0}};
    const char *corpus_path = getenv("CORPUS");
    for (int c; (c = getopt_long(argc, argv, "", opts, NULL)) != -1;) {
        if (c == 'h') {
            usage(stdout);
            return 0;
        } else if (c == 'c') {
            corpus_path = optarg;
        } else {
            usage(stderr);
            return 2;
        }
    }
    if (optind != argc - 1) {
        fprintf(stderr, "corpus: %s\n", optind == argc ? "missing OUT" : "unexpected argument");
        usage(stderr);
        return 2;
    }
    const char *out = argv[optind];
    Error err;
    Corpus corpus;
    if (corpus_load(&corpus, corpus_path && *corpus_path ? corpus_path : NULL, &err)) die("corpus: %s", err.msg);
    AtomicFile af = atomic_open(out);
    fwriteCheck(corpus.val, 1, corpus.val_len, af.f);
    atomic_commit(&af);
    fprintf(stderr, "corpus: %s: %zu bytes of validation text (%d of %d blocks) from %s\n", out, corpus.val_len,
            corpus.n_val_blocks, corpus.n_blocks, corpus.source);
    corpus_free(&corpus);
    return 0;
}
