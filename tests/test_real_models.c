// test_real_models.c: the engine on the two published models (make real-models: SmolLM2-135M
// Instruct Q4_1 and Gemma 3 270M Q4_K_M under out/models/real/) against llama.cpp's outputs
// recorded in tests/fixtures/real (README.md there: the exact commands, llama.cpp's version,
// the CPU):
//   - greedy: the fixture's prompt ids prefilled, then 64 greedy steps, the ids compared with
//     llama.cpp's;
//   - perplexity: bin/generate --perplexity on the KJV validation text at context 512, the
//     running estimate after the first chunk against llama-perplexity's;
// each against two recordings (LLAMA_CONFIGS below): llama.cpp with its reference kernels,
// which the engine must equal exactly, and llama.cpp as built and run by default, printed.
// Exactness holds between the same kernels: the recordings come from an AVX-512 machine
// (recorded-reference.txt), whose ggml kernels the engine's 512-bit build follows operation
// for operation. A build of other width (AVX2: 256-bit vectors, other reduction orders, as
// ggml's own AVX2 build has) rounds otherwise, and through the int8 activations a last-bit
// difference grows (measured on an AVX2 Zen 3: up to 0.72 in a logit of SmolLM2's first
// step, against llama.cpp's AVX2 build as much as against the recording); there the reference
// recording is held to a bound on gross error (CROSS_ISA_PPL_REL_TOL), and the test says so.
//   - bad input: a truncated file, bytes flipped in its header, an unknown architecture and an
//     unknown tensor type each end in an error naming the cause, never a crash.
// Run from the repository root after make real-models out/corpus/kjv-valid.txt (make test does
// both); INFERLAB_BIN names the programs' directory (default bin).
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common.h"
#include "cpu/vec.h" // VEC_BITS: the width the engine's kernels were built at
#include "gguf.h"
#include "session.h"

// The engine rounds as the recordings' llama.cpp did only at the width they were made with.
static int kernels_as_recorded(void) { return VEC_BITS == 512; }

#define N_MODELS 2
static const char *const MODELS[N_MODELS] = {"smollm2-135m-instruct-q4_1", "gemma-3-270m-q4_k_m"};
#define MAX_IDS 512
#define N_PROMPTS 5
#define N_NEW 64

// The two recordings of llama.cpp (tests/fixtures/real/README.md). With its reference kernels
// (a build without llamafile, run with --no-repack and GGML_CPU_TILED_MM=0) llama.cpp computes a
// prompt row with the kernels of a decode row, as the engine does with every row, and the
// engine must give its greedy ids and its perplexity to the 4 decimals it prints. By default
// llama.cpp computes prompts of >= 2 rows with other kernels (tinyBLAS, the tiled k-quant
// matmul, repacked Q4_K), whose sums round otherwise; through the int8 activations a last-bit
// difference grows to ~1 logit within a 512-token chunk (measured: SmolLM2 -1.1e-3 relative in
// perplexity after chunk 1, Gemma -2.6e-3; Gemma's greedy ids differ after a few tokens in 3 of
// 5 prompts): printed, and the perplexity held to DEFAULT_PPL_REL_TOL as a bound on gross error.
typedef struct {
    const char *suffix; // of the fixture files: greedy<suffix>.txt, perplexity<suffix>.txt
    const char *what;
    int exact;
} LlamaConfig;
static const LlamaConfig LLAMA_CONFIGS[] = {
    {"-reference", "llama.cpp (reference kernels)", 1},
    {"", "llama.cpp (default kernels)", 0},
};
#define N_CONFIGS (int)(sizeof LLAMA_CONFIGS / sizeof LLAMA_CONFIGS[0])
#define DEFAULT_PPL_REL_TOL 5e-3
// On a build of another width than the recordings', against either: llama.cpp's own chunk-1
// perplexity moves by up to 6.6e-3 between its AVX2 and AVX-512 builds (measured on the AVX2
// Zen 3 with its reference kernels: SmolLM2 3.8013, Gemma 4.0245, against the recordings'
// 3.8264 and 4.0222), so a bound on gross error there is 1e-2.
#define CROSS_ISA_PPL_REL_TOL 1e-2

// A recording the engine must equal here: the reference one, on the recording's kernels.
static int held_exact(const LlamaConfig *c) { return c->exact && kernels_as_recorded(); }

static void model_path(char *out, size_t n, int m) { snprintf(out, n, "out/models/real/%s.gguf", MODELS[m]); }

static void require_file(const char *path) {
    if (access(path, R_OK) != 0) fail_msg("%s is missing: run `make real-models out/corpus/kjv-valid.txt`", path);
}

// The fixture's greedy.txt: per prompt its ids and llama.cpp's 64 generated ids.
typedef struct {
    int n_prompt, prompt[MAX_IDS];
    int n_gen, gen[N_NEW];
} Greedy;

static int read_ids(char *line, const char *tag, int *ids, int cap) {
    size_t tl = strlen(tag);
    if (strncmp(line, tag, tl) != 0 || line[tl] != ' ') fail_msg("greedy fixture: expected '%s ...', got '%.40s'", tag, line);
    char *p = line + tl, *end;
    long n = strtol(p, &end, 10);
    if (n < 0 || n > cap) fail_msg("greedy fixture: %ld ids", n);
    for (long i = 0; i < n; i++) {
        p = end;
        ids[i] = (int)strtol(p, &end, 10);
        if (end == p) fail_msg("greedy fixture: %s line ends after %ld of %ld ids", tag, i, n);
    }
    return (int)n;
}

static int read_greedy(int m, const LlamaConfig *c, Greedy *g) {
    char path[256], line[65536];
    snprintf(path, sizeof path, "tests/fixtures/real/%s/greedy%s.txt", MODELS[m], c->suffix);
    FILE *f = fopen(path, "r");
    if (!f) fail_msg("%s is missing", path);
    int n = 0;
    while (n < N_PROMPTS && fgets(line, sizeof line, f)) {
        if (strncmp(line, "prompt ", 7) != 0) continue; // prompt_file and # text lines
        g[n].n_prompt = read_ids(line, "prompt", g[n].prompt, MAX_IDS);
        if (!fgets(line, sizeof line, f)) fail_msg("%s: a prompt without its generated line", path);
        g[n].n_gen = read_ids(line, "generated", g[n].gen, N_NEW);
        n++;
    }
    fclose(f);
    if (n != N_PROMPTS) fail_msg("%s: %d prompts, expected %d", path, n, N_PROMPTS);
    return n;
}

static int argmax(const float *x, int n) {
    int best = 0;
    for (int i = 1; i < n; i++)
        if (x[i] > x[best]) best = i; // strictly greater: ties to the lowest id, as llama_greedy.c
    return best;
}

// Our 64 greedy ids after each prompt (the prompts of the first recording; every recording
// must have the same ones), compared with each recording's.
static void test_greedy_follows_llama_cpp(void **state) {
    (void)state;
    for (int m = 0; m < N_MODELS; m++) {
        char path[256];
        model_path(path, sizeof path, m);
        require_file(path);
        Greedy g[N_CONFIGS][N_PROMPTS];
        for (int c = 0; c < N_CONFIGS; c++) read_greedy(m, &LLAMA_CONFIGS[c], g[c]);
        Model model;
        Error err;
        if (model_load_gguf(path, &model, NULL, &err)) fail_msg("%s", err.msg);
        Engine e;
        Session s;
        engine_open(&e, &model, ops_cpu(), DTYPE_F32, 64, MAX_IDS + N_NEW);
        session_open(&s, &e, MAX_IDS + N_NEW);
        for (int p = 0; p < N_PROMPTS; p++) {
            const Greedy *want = &g[0][p];
            session_truncate(&s, 0);
            if (session_prefill(&s, want->prompt, want->n_prompt, NULL, &err)) fail_msg("%s", err.msg);
            int ours[N_NEW];
            for (int t = 0; t < want->n_gen; t++) {
                ours[t] = argmax(s.logits, model.config.vocab_size);
                if (t + 1 < want->n_gen && session_decode(&s, ours[t], &err)) fail_msg("%s", err.msg);
            }
            for (int c = 0; c < N_CONFIGS; c++) {
                const Greedy *r = &g[c][p];
                if (r->n_prompt != want->n_prompt || memcmp(r->prompt, want->prompt, sizeof(int) * r->n_prompt) != 0 ||
                    r->n_gen != want->n_gen)
                    fail_msg("%s prompt %d: the recordings' prompts differ", MODELS[m], p + 1);
                int same = 0;
                while (same < r->n_gen && ours[same] == r->gen[same]) same++;
                printf("%s prompt %d vs %s: %s", MODELS[m], p + 1, LLAMA_CONFIGS[c].what,
                       same == r->n_gen ? "all 64 tokens equal\n" : "");
                if (same < r->n_gen) printf("first differs at generated token %d\n", same);
                if (same < r->n_gen && held_exact(&LLAMA_CONFIGS[c]))
                    fail_msg("%s prompt %d: greedy token %d differs from %s", MODELS[m], p + 1, same,
                             LLAMA_CONFIGS[c].what);
            }
        }
        session_close(&s);
        engine_close(&e);
        model_free(&model);
    }
}

// llama-perplexity's running estimate after chunk `chunk` from the fixture.
static double fixture_ppl(int m, const LlamaConfig *c, int chunk) {
    char path[256], line[256];
    snprintf(path, sizeof path, "tests/fixtures/real/%s/perplexity%s.txt", MODELS[m], c->suffix);
    FILE *f = fopen(path, "r");
    if (!f) fail_msg("%s is missing", path);
    double ppl = -1.0;
    int i;
    while (fgets(line, sizeof line, f))
        if (sscanf(line, "chunk %d %lf", &i, &ppl) == 2 && i == chunk) break;
    fclose(f);
    if (!(ppl > 0)) fail_msg("%s has no chunk %d", path, chunk);
    return ppl;
}

static void test_perplexity_matches_llama_cpp(void **state) {
    (void)state;
    const char *bin = getenv("INFERLAB_BIN") ? getenv("INFERLAB_BIN") : "bin";
    require_file("out/corpus/kjv-valid.txt");
    for (int m = 0; m < N_MODELS; m++) {
        char path[256], cmd[1024], out[4096] = "";
        model_path(path, sizeof path, m);
        require_file(path);
        snprintf(cmd, sizeof cmd, "%s/generate --model %s --perplexity out/corpus/kjv-valid.txt --ctx 512 --chunks 1",
                 bin, path);
        FILE *p = popen(cmd, "r");
        if (!p) fail_msg("cannot run %s", cmd);
        size_t n = fread(out, 1, sizeof out - 1, p);
        out[n] = '\0';
        if (pclose(p) != 0) fail_msg("%s failed: %s", cmd, out);
        double ours;
        if (sscanf(out, "[1]%lf,", &ours) != 1) fail_msg("%s printed no running estimate: %s", cmd, out);
        for (int c = 0; c < N_CONFIGS; c++) {
            const LlamaConfig *lc = &LLAMA_CONFIGS[c];
            double want = fixture_ppl(m, lc, 1), rel = ours / want - 1.0;
            char ours_s[32], want_s[32]; // as both programs print it
            snprintf(ours_s, sizeof ours_s, "%.4f", ours);
            snprintf(want_s, sizeof want_s, "%.4f", want);
            printf("%s: PPL after chunk 1: ours %s, %s %s (%+.2e)\n", MODELS[m], ours_s, lc->what, want_s, rel);
            if (held_exact(lc) && strcmp(ours_s, want_s) != 0)
                fail_msg("%s: perplexity %s, %s %s", MODELS[m], ours_s, lc->what, want_s);
            double tol = kernels_as_recorded() ? DEFAULT_PPL_REL_TOL : CROSS_ISA_PPL_REL_TOL;
            if (!held_exact(lc) && !(rel < tol && rel > -tol))
                fail_msg("%s: perplexity %s, %s %s: beyond %g relative", MODELS[m], ours_s, lc->what, want_s, tol);
        }
    }
}

// ---- bad input --------------------------------------------------------------------------

static unsigned char *read_file(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f) fail_msg("cannot open %s", path);
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    unsigned char *buf = mallocCheck((size_t)n);
    if (fread(buf, 1, (size_t)n, f) != (size_t)n) fail_msg("cannot read %s", path);
    fclose(f);
    *len = (size_t)n;
    return buf;
}

static void write_file(const char *path, const unsigned char *buf, size_t len) {
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(buf, 1, len, f) != len || fclose(f) != 0) fail_msg("cannot write %s", path);
}

// Load path (with its tokenizer); returns 0 on success, else -1 with the error in err.
static int try_load(const char *path, Error *err) {
    Model m;
    Tokenizer tok;
    if (model_load_gguf(path, &m, &tok, err)) return -1;
    tokenizer_free(&tok);
    model_free(&m);
    return 0;
}

static void expect_error(const char *path, const char *needle) {
    Error err;
    if (try_load(path, &err) == 0) fail_msg("%s loaded; expected an error about %s", path, needle);
    if (!strstr(err.msg, needle)) fail_msg("%s: error '%s' does not name %s", path, err.msg, needle);
}

// The first occurrence of the bytes s in buf (the header and tensor infos come before the data).
static unsigned char *find_bytes(unsigned char *buf, size_t len, const char *s) {
    size_t n = strlen(s);
    for (size_t i = 0; i + n <= len; i++)
        if (memcmp(buf + i, s, n) == 0) return buf + i;
    fail_msg("'%s' is not in the file", s);
    return NULL;
}

static void test_bad_real_files_are_clear_errors(void **state) {
    (void)state;
    char path[256], bad[64];
    model_path(path, sizeof path, 0);
    require_file(path);
    snprintf(bad, sizeof bad, "/tmp/inferlab_bad_%d.gguf", (int)getpid());
    size_t len;
    unsigned char *buf = read_file(path, &len), *copy = mallocCheck(len);

    write_file(bad, buf, len / 2); // truncated: the data section ends early
    expect_error(bad, "run past the end of the file");

    memcpy(copy, buf, len); // an unknown architecture
    memcpy(find_bytes(copy, 1 << 20, "llama") + 0, "lla_a", 5);
    write_file(bad, copy, len);
    expect_error(bad, "architecture 'lla_a' is not supported");

    memcpy(copy, buf, len); // an unknown tensor type: blk.0.attn_q's info is name, n_dims, dims, type
    unsigned char *info = find_bytes(copy, 1 << 22, "blk.0.attn_q.weight");
    uint32_t n_dims, type = 77;
    memcpy(&n_dims, info + strlen("blk.0.attn_q.weight"), 4);
    memcpy(info + strlen("blk.0.attn_q.weight") + 4 + 8 * n_dims, &type, 4);
    write_file(bad, copy, len);
    expect_error(bad, "type");

    // bytes flipped in the header, metadata and tensor infos: an error or a model, never a crash
    uint64_t rng = 12345;
    for (int k = 0; k < 6; k++) {
        memcpy(copy, buf, len);
        for (int j = 0; j < 4; j++) {
            rng = rng * 6364136223846793005ULL + 1442695040888963407ULL;
            copy[(rng >> 33) % (1 << 16)] ^= (unsigned char)(1u << ((rng >> 20) % 8));
        }
        write_file(bad, copy, len);
        Error err;
        if (try_load(bad, &err) != 0) printf("flipped bytes %d: %s\n", k, err.msg);
    }
    unlink(bad);
    free(copy);
    free(buf);
}

int main(void) {
    if (!kernels_as_recorded())
        printf("NOTE: this build's kernels are %d-bit; the recordings are AVX-512's, so they are held to a bound\n"
               "on gross error here, not to equality (see the top of this file)\n", VEC_BITS);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_bad_real_files_are_clear_errors),
        cmocka_unit_test(test_greedy_follows_llama_cpp),
        cmocka_unit_test(test_perplexity_matches_llama_cpp),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
