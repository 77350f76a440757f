// quantize/main.c: bin/quantize, a checkpoint's weight matrices rewritten in a quantised format
// (kernels/quant.h), as llama.cpp's llama-quantize does for its types.
//
//   bin/quantize out/models/full/target.gguf target-q4_0.gguf --type q4_0
//   bin/quantize IN.gguf OUT.gguf --type int4-g128
//   bin/quantize IN.gguf OUT.gguf --type awq-int4-g128 [--corpus FILE]
//
// Types: q8_0 and q4_0 (ggml's, GGUF types 8 and 2: llama.cpp reads these files), int8 (per
// output channel), int4-g32 / int4-g64 / int4-g128 (group-wise, asymmetric; GGUF types of our
// own). Round to nearest, or with awq- before an int4 type activation-aware (awq.h: scales from
// 8 calibration sequences of training text folded into the norms, wv and w3, then round to
// nearest); the token embedding is quantised too, norm gains stay fp32, and a
// matrix whose rows the type cannot hold stays fp32 (quant_weights.h). The output is written
// atomically; the summary (bits per weight, bytes) goes to stderr. A quantised input is
// requantised from its dequantised weights.
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "awq.h"
#include "checkpoint.h"
#include "corpus.h"
#include "gguf.h"
#include "kernels.h"
#include "quant.h"
#include "quant_weights.h"

static void usage(FILE *f) {
    fprintf(f, "usage: bin/quantize IN.gguf OUT.gguf --type TYPE [--corpus FILE] [--threads N]\n"
               "Rewrite a checkpoint's weight matrices in TYPE: q8_0, q4_0 (ggml's), int8 (per output\n"
               "channel), int4-g32, int4-g64, int4-g128 (group-wise), awq-int4-g32 / -g64 / -g128\n"
               "(activation-aware: calibrated on the training text of --corpus, default $CORPUS, else the KJV).\n");
}

static void usage_error(const char *why) {
    fprintf(stderr, "quantize: %s\n", why);
    usage(stderr);
    exit(2);
}

int main(int argc, char **argv) {
    static const struct option opts[] = {{"type", required_argument, 0, 't'},
                                         {"threads", required_argument, 0, 'j'},
                                         {"corpus", required_argument, 0, 'c'},
                                         {"help", no_argument, 0, 'h'},
                                         {0}};
    const char *type_name = NULL, *corpus_path = getenv("CORPUS");
    int threads = 0;
    for (int c; (c = getopt_long(argc, argv, "", opts, NULL)) != -1;) {
        if (c == 'h') {
            usage(stdout);
            return 0;
        } else if (c == 't') {
            type_name = optarg;
        } else if (c == 'c') {
            corpus_path = optarg;
        } else if (c == 'j') {
            char *end;
            long n = strtol(optarg, &end, 10);
            if (*end || n < 1 || n > 1024) usage_error("--threads: not a count in 1 .. 1024");
            threads = (int)n;
        } else {
            usage_error("unknown option or missing value");
        }
    }
    if (argc - optind != 2) usage_error("expected IN.gguf and OUT.gguf");
    if (!type_name) usage_error("--type is required");
    int awq = strncmp(type_name, "awq-", 4) == 0, t = dtype_from_name(type_name + (awq ? 4 : 0));
    if (t < 0 || !dtype_is_quantized((DType)t) || (awq && t != DTYPE_I4_G32 && t != DTYPE_I4_G64 && t != DTYPE_I4_G128)) {
        char why[128];
        snprintf(why, sizeof why, "--type: unknown quantised type '%.40s'", type_name);
        usage_error(why);
    }
    if (!dtype_can_quantize((DType)t)) {
        char why[128];
        snprintf(why, sizeof why, "--type: %s is read only (the lab has no quantiser for it; llama.cpp's tools write it)", dtype_name((DType)t));
        usage_error(why);
    }
    const char *in = argv[optind], *out = argv[optind + 1];
    kernels_set_threads(threads);

    Model m;
    Tokenizer tok;
    Error err;
    if (checkpoint_load(in, NULL, &m, &tok, &err)) {
        fprintf(stderr, "quantize: %s\n", err.msg);
        return 1;
    }
    if (awq) {
        Corpus corpus;
        if (corpus_load(&corpus, corpus_path && *corpus_path ? corpus_path : NULL, &err)) {
            fprintf(stderr, "quantize: %s\n", err.msg);
            return 1;
        }
        int B = 8, T = m.config.seq_len < 256 ? m.config.seq_len : 256;
        int *calib = calibration_tokens(&tok, corpus.train, corpus.train_len, B, T);
        if (m.quant) quant_weights_free(m.quant), free(m.quant), m.quant = NULL; // calibrate the dequantised weights
        Calibration cal;
        calibration_run(&cal, &m, calib, B, T);
        AwqResult res;
        awq_quantize(&m, (DType)t, &cal, 1.0, &res);
        calibration_free(&cal);
        free(calib);
        corpus_free(&corpus);
    } else {
        if (m.quant) quant_weights_free(m.quant); // requantise from the dequantised weights
        else m.quant = mallocCheck(sizeof *m.quant);
        quant_weights_build(m.quant, &m, (DType)t);
    }
    int kept = 0;
    for (int i = 0; i < m.quant->n; i++) kept += m.quant->tensors[i].dtype == DTYPE_F32;
    model_save_gguf(out, &m, &tok, GGML_TYPE_F32);
    fprintf(stderr, "quantize: %s -> %s: %s, %d matrices (%d kept fp32: rows not whole blocks), %.4g bits per weight, %zu bytes of matrices\n",
            in, out, type_name, m.quant->n, kept, quant_weights_bits_per_weight(m.quant), m.quant->bytes);
    tokenizer_free(&tok);
    model_free(&m);
    return 0;
}
