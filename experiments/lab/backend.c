// backend.c: `--backend cpu|cuda` (see backend.h): parsing, the device check, CSV names.
#include "backend.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifdef INFERLAB_CUDA
#include "kernels_cuda.h"
#endif

static const char *NAMES[] = {"cpu", "cuda"};

const char *backend_name(Backend b) { return b == BACKEND_CUDA ? NAMES[1] : NAMES[0]; }

int backend_parse(const char *text, Backend *out, Error *err) {
    for (int i = 0; i < 2; i++)
        if (strcmp(text, NAMES[i]) == 0) {
            *out = (Backend)i;
            return 0;
        }
    return error_set(err, "--backend: '%s' is neither cpu nor cuda", text);
}

void backend_require(Backend b, const char *program) {
    if (b != BACKEND_CUDA) return;
#ifdef INFERLAB_CUDA
    char why[256];
    if (cuda_available(why, sizeof why)) return;
    fprintf(stderr, "%s: not run: no usable CUDA device (%s)\n", program, why);
#else
    fprintf(stderr, "%s: not run: no CUDA device (built without CUDA: CUDA=0 or no nvcc)\n", program);
#endif
    exit(2);
}

const Ops *backend_open(Backend b) {
    if (b != BACKEND_CUDA) return ops_cpu();
#ifdef INFERLAB_CUDA
    cuda_init();
#endif
    return ops_cuda();
}

void backend_close(Backend b) {
#ifdef INFERLAB_CUDA
    if (b == BACKEND_CUDA) cuda_shutdown();
#else
    (void)b;
#endif
}
