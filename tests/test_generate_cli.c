// test_generate_cli.c: bin/generate's sampler options on the real SmolLM2 file (make real-models),
// a few greedy tokens on one thread:
//   - --stop: the text stops before the stop string, which is never printed, and the prefix
//     that only began it is printed when generation ends;
//   - --n-probs N: one stderr line per generated token, naming it, with N candidates whose
//     log-probabilities fall and the first of which, at T = 0, is the token itself;
//   - --logit-bias ID-inf: the greedy token forbidden, another comes first;
//   - --samplers and the new samplers' options: a clear error naming the option or the sampler,
//     exit 2 and nothing generated, for an unknown sampler, mirostat's tau 0, a malformed bias,
//     --n-probs with a draft.
// ProgramRun from the repository root: make bin/generate build/tests/test_generate_cli &&
// ./build/tests/test_generate_cli (INFERLAB_BIN names the programs' directory, default bin).
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common.h"
#include "run_program.h"

#define MODEL "out/models/real/smollm2-135m-instruct-q4_1.gguf"
#define PROMPT "The capital of France is"

static char tmp_dir[64];

// bin/generate on the model and prompt with one thread, greedy unless args say otherwise.
static ProgramRun run_generate(const char *args) {
    if (access(MODEL, R_OK) != 0) fail_msg("%s is missing: run `make real-models`", MODEL);
    const char *bin = getenv("INFERLAB_BIN") ? getenv("INFERLAB_BIN") : "bin";
    char cmd[2048];
    snprintf(cmd, sizeof cmd, "OMP_NUM_THREADS=1 %s/generate --model %s --prompt '%s' --temperature 0 %s", bin, MODEL,
             PROMPT, args);
    return run_program(tmp_dir, cmd);
}

static ProgramRun run_ok(const char *args) {
    ProgramRun r = run_generate(args);
    if (r.status != 0) fail_msg("bin/generate %s: exit status %d, stderr: %s", args, r.status, r.err);
    return r;
}

static int setup(void **state) {
    (void)state;
    return program_dir_make(tmp_dir, sizeof tmp_dir, "generate_cli");
}

static int teardown(void **state) {
    (void)state;
    return program_dir_remove(tmp_dir);
}

// The greedy continuation of PROMPT (12 tokens) is " Paris. ..." on this model: stop at "." and
// the text ends with " Paris"; a stop string generation never completes changes nothing.
static void test_stop_string(void **state) {
    (void)state;
    ProgramRun plain = run_ok("-n 12");
    const char *dot = strstr(plain.out, PROMPT " Paris.");
    if (!dot) fail_msg("the greedy text is not ' Paris.': %s", plain.out);
    ProgramRun stopped = run_ok("-n 12 --stop .");
    assert_string_equal(stopped.out, PROMPT " Paris\n");
    ProgramRun never = run_ok("-n 12 --stop 'no such text here'");
    assert_string_equal(never.out, plain.out);
    // a stop string that generation begins but never finishes: the held prefix is printed
    ProgramRun started = run_ok("-n 2 --stop ' Paris, France'"); // two tokens: " Paris" "."
    assert_string_equal(started.out, PROMPT " Paris.\n");
    program_run_free(&plain), program_run_free(&stopped), program_run_free(&never), program_run_free(&started);
}

// "n-probs: ID 'TEXT' | ID LN_P 'TEXT' | ..." lines: the ids and log-probabilities of one.
static int parse_n_probs(const char *line, int *token, int *ids, float *lp, int max) {
    if (sscanf(line, "n-probs: %d", token) != 1) fail_msg("bad n-probs line: %.80s", line);
    int n = 0;
    const char *end = line + strcspn(line, "\n");
    for (const char *at = strstr(line, " | "); at && at < end && n < max; at = strstr(at + 3, " | ")) {
        if (sscanf(at + 3, "%d %f", &ids[n], &lp[n]) != 2) fail_msg("bad candidate in %.80s", line);
        n++;
    }
    return n;
}

static void test_n_probs(void **state) {
    (void)state;
    ProgramRun r = run_ok("-n 4 --n-probs 3");
    int lines = 0;
    for (const char *line = strstr(r.err, "n-probs: "); line; line = strstr(line + 1, "n-probs: ")) {
        int token, ids[3];
        float lp[3];
        assert_int_equal(parse_n_probs(line, &token, ids, lp, 3), 3);
        assert_int_equal(ids[0], token); // greedy: the most likely
        assert_true(lp[0] <= 0.0f && lp[0] >= lp[1] && lp[1] >= lp[2]);
        lines++;
    }
    assert_int_equal(lines, 4);
    program_run_free(&r);
}

static void test_logit_bias_forbids_the_greedy_token(void **state) {
    (void)state;
    ProgramRun probs = run_ok("-n 1 --n-probs 2");
    int token, ids[2];
    float lp[2];
    assert_int_equal(parse_n_probs(strstr(probs.err, "n-probs: "), &token, ids, lp, 2), 2);
    char args[128];
    snprintf(args, sizeof args, "-n 1 --n-probs 2 --logit-bias %d-inf", ids[0]);
    ProgramRun biased = run_ok(args);
    int chosen, again[2];
    assert_int_equal(parse_n_probs(strstr(biased.err, "n-probs: "), &chosen, again, lp, 2), 2);
    assert_int_equal(again[0], ids[0]); // n-probs shows the model's own order ...
    assert_int_equal(chosen, ids[1]);   // ... and the sampler took the runner-up
    program_run_free(&probs), program_run_free(&biased);
}

static void expect_usage_error(const char *args, const char *needle) {
    ProgramRun r = run_generate(args);
    if (r.status != 2) fail_msg("bin/generate %s: exit status %d, want 2; stderr: %s", args, r.status, r.err);
    if (!strstr(r.err, needle)) fail_msg("bin/generate %s: stderr lacks '%s': %s", args, needle, r.err);
    if (r.out[0]) fail_msg("bin/generate %s printed text: %s", args, r.out);
    program_run_free(&r);
}

static void test_bad_sampler_options(void **state) {
    (void)state;
    expect_usage_error("--samplers 'top_k;topp'", "unknown sampler 'topp'");
    expect_usage_error("--mirostat 2 --mirostat-ent 0", "--mirostat-ent");
    expect_usage_error("--logit-bias 999999+1", "--logit-bias");
    expect_usage_error("--mirostat 3", "--mirostat");
    expect_usage_error("--logit-bias 15x", "--logit-bias");
    expect_usage_error("--typical 1.5", "--typical");
    expect_usage_error("--lookup --n-probs 2", "--n-probs");
    expect_usage_error("--stop ''", "--stop");
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_stop_string),
        cmocka_unit_test(test_n_probs),
        cmocka_unit_test(test_logit_bias_forbids_the_greedy_token),
        cmocka_unit_test(test_bad_sampler_options),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
