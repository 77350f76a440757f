// test_serving.c: the serving experiment's scheduler (experiments/serving/scheduler.h) and
// workload (workload.h), on a small random model.
//  - every request of a run gets exactly the greedy tokens that running it alone gives, under
//    every policy (static, continuous, chunked prefill), both caches (reserve, paged) and
//    prefix caching off, hash and radix, on requests of which some are chat turns that resend
//    earlier requests' prompts and outputs, including runs with a KV pool small enough that
//    requests are preempted and recomputed (the test checks that preemptions happened, and
//    that the radix cache found more than the hash cache);
//  - the mechanism behind it: a forward of up to SERVE_MAX_ROWS rows that mixes a prefill
//    chunk of one sequence with decode rows of others gives each row bit for bit the logits
//    of that sequence's rows run alone;
//  - a simulated run (constant step cost) serves every request, frees every block, and gives
//    the times a hand count predicts for a lone request; with at most one request in flight
//    each is sent when the one before ends; a chat turn is sent its think time after the turn
//    it follows, and the radix cache hands it all the computed tokens of that turn;
//  - the workload kinds: few-shot requests start with one of their example sets, a chat's
//    turns follow each other and resend the conversation, arrivals go to first turns only;
//  - the gamma arrival process has the requested mean rate (5% over 20000 gaps) and its gaps
//    the squared coefficient of variation 1 / burstiness (10%).
// Run: make build/tests/test_serving && ./build/tests/test_serving
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <stdlib.h>
#include <string.h>

#include "model_reference.h"
#include "rng.h"
#include "scheduler.h"
#include "workload.h"

enum { N_REQ = 14, N_FIRST = 10, PREFIX = 11, MAX_OWN = 23, MAX_OUT = 8, MAX_POS = 64 };

typedef struct {
    Request reqs[N_REQ];
    int prompts[N_REQ][MAX_OWN];
    int solo[N_REQ][MAX_OUT];
} Requests;

// Ten random prompts (some after a shared prefix) arriving about two steps apart, then four
// follow-ups (chat turns: a few new tokens after an earlier request's prompt and output; the
// last one follows a follow-up), sent 1 ms after the turn they follow ends.
static void make_requests(Requests *q, int vocab, uint64_t seed) {
    uint64_t rng = rng_seed(seed);
    int prefix[PREFIX];
    random_tokens(prefix, PREFIX, vocab, seed + 1);
    double t = 0;
    for (int i = 0; i < N_REQ; i++) {
        int first = i < N_FIRST, shared = first && rng_u64(&rng) % 2;
        int n = first ? (shared ? PREFIX : 0) + 1 + (int)(rng_u64(&rng) % 12) : 1 + (int)(rng_u64(&rng) % 6);
        random_tokens(q->prompts[i], n, vocab, seed + 10 + i);
        if (shared) memcpy(q->prompts[i], prefix, sizeof prefix);
        t += 0.002 * rng_uniform(&rng);
        q->reqs[i] = (Request){.arrival_s = first ? t : 0, .prompt_len = n,
                               .output_len = 1 + (int)(rng_u64(&rng) % MAX_OUT), .prefix_len = shared ? PREFIX : 0,
                               .prompt = q->prompts[i], .follows = first ? -1 : i == N_REQ - 1 ? N_FIRST : 2 * (i - N_FIRST),
                               .think_s = first ? 0 : 0.001};
    }
}

// Each request alone, in order (a follow-up's prompt repeats the earlier turns' solo outputs):
// prefill its whole prompt, then greedy decoding.
static void solo_tokens(Engine *e, Requests *q) {
    int *outputs[N_REQ], prompt[MAX_POS];
    for (int i = 0; i < N_REQ; i++) outputs[i] = q->solo[i];
    for (int i = 0; i < N_REQ; i++) {
        Session s;
        Error err;
        int n = request_full_prompt(q->reqs, i, outputs, prompt);
        assert_int_equal(n, request_full_prompt_len(q->reqs, i));
        session_open(&s, e, n + q->reqs[i].output_len);
        if (session_prefill(&s, prompt, n, NULL, &err)) fail_msg("%s", err.msg);
        for (int k = 0; k < q->reqs[i].output_len; k++) {
            q->solo[i][k] = sampler_argmax(s.logits, e->config.vocab_size);
            if (k + 1 < q->reqs[i].output_len && session_decode(&s, q->solo[i][k], &err)) fail_msg("%s", err.msg);
        }
        session_close(&s);
    }
}

// Serve the requests under cfg; check every token against the solo run. Returns the preemptions.
static int serve_and_compare(Engine *e, const Requests *q, ServeConfig cfg, long *cache_hits) {
    Outcome out[N_REQ];
    int tokens[N_REQ][MAX_OUT];
    double times[N_REQ][MAX_OUT];
    for (int i = 0; i < N_REQ; i++) out[i] = (Outcome){.tokens = tokens[i], .token_s = times[i]};
    ServeStats st;
    Error err;
    if (serve_run(&cfg, e, NULL, q->reqs, N_REQ, out, &st, &err)) fail_msg("%s", err.msg);
    for (int i = 0; i < N_REQ; i++) {
        assert_int_equal(out[i].n_out, q->reqs[i].output_len);
        for (int k = 0; k < q->reqs[i].output_len; k++)
            if (tokens[i][k] != q->solo[i][k])
                fail_msg("%s / %s / prefix cache %s, KV %d: request %d token %d is %d, alone %d",
                         POLICY_NAMES[cfg.policy], CACHE_NAMES[cfg.cache], PREFIX_CACHE_NAMES[cfg.prefix_cache],
                         cfg.kv_tokens, i, k, tokens[i][k], q->solo[i][k]);
        for (int k = 1; k < out[i].n_out; k++) assert_true(times[i][k] > times[i][k - 1]);
        assert_true(times[i][0] > out[i].sent_s);
        const Request *r = &q->reqs[i];
        if (r->follows < 0) assert_true(out[i].sent_s == r->arrival_s);
        else assert_true(out[i].sent_s == times[r->follows][q->reqs[r->follows].output_len - 1] + r->think_s);
        assert_int_equal(out[i].prompt_len, request_full_prompt_len(q->reqs, i));
    }
    assert_true(st.kv_util > 0 && st.kv_util <= 1);
    *cache_hits += st.cache_hits;
    return st.n_preemptions;
}

static void test_every_policy_gives_solo_tokens(void **state) {
    (void)state;
    Config c = small_config(4, 2, 0, 0);
    Model m;
    random_model(&m, &c, 3, 0.5f);
    Engine e;
    engine_open(&e, &m, ops_cpu(), DTYPE_F32, SERVE_MAX_ROWS, c.seq_len);
    Requests q;
    make_requests(&q, c.vocab_size, 4);
    solo_tokens(&e, &q);
    int seen[67] = {0}, distinct = 0; // a model that always says the same token would prove nothing
    for (int i = 0; i < N_REQ; i++)
        for (int k = 0; k < q.reqs[i].output_len; k++) distinct += !seen[q.solo[i][k]]++;
    assert_true(distinct >= 10);
    int preemptions = 0, longest = 0;
    long hits[PREFIX_CACHE_COUNT] = {0};
    for (int i = 0; i < N_REQ; i++) {
        int len = request_full_prompt_len(q.reqs, i) + q.reqs[i].output_len;
        if (len > longest) longest = len;
    }
    for (int p = 0; p < POLICY_COUNT; p++)
        for (int k = 0; k < CACHE_COUNT; k++)
            for (int pc = 0; pc < (k == CACHE_PAGED ? PREFIX_CACHE_COUNT : 1); pc++) {
                // roomy KV and forwards of 16 rows, then (paged) a pool just large enough for the
                // longest request (preemptions, evictions) and forwards of 5 rows
                for (int tight = 0; tight <= 1; tight++) {
                    ServeConfig cfg = {.policy = p, .cache = k, .prefix_cache = pc, .max_batch = 6,
                                       .token_budget = tight ? 5 : SERVE_MAX_ROWS, .block_size = 4,
                                       .kv_tokens = tight ? (longest + 3) / 4 * 4 : 4 * MAX_POS, .reserve_len = MAX_POS};
                    if (tight && k == CACHE_RESERVE) cfg.kv_tokens = MAX_POS; // one request at a time
                    preemptions += serve_and_compare(&e, &q, cfg, &hits[pc]);
                }
            }
    assert_true(preemptions > 0);
    assert_int_equal(hits[PREFIX_CACHE_OFF], 0);
    assert_true(hits[PREFIX_CACHE_HASH] > 0 && hits[PREFIX_CACHE_RADIX] > hits[PREFIX_CACHE_HASH]);
    engine_close(&e);
    model_free(&m);
}

// Sequence 0 has 5 cached positions and feeds a chunk of `chunk` rows; sequences 1 .. n_dec
// feed one decode row each after 3 + i cached positions: first all in one forward, then each
// sequence's rows alone.
static void test_mixed_forward_is_rowwise_exact(void **state) {
    (void)state;
    Config c = small_config(4, 2, 0, 0);
    Model m;
    random_model(&m, &c, 8, 0.5f);
    Engine e;
    engine_open(&e, &m, ops_cpu(), DTYPE_F32, SERVE_MAX_ROWS, c.seq_len);
    int V = c.vocab_size, shapes[][2] = {{9, 2}, {1, 15}, {12, 4}};
    for (int k = 0; k < 3; k++) {
        int chunk = shapes[k][0], n_dec = shapes[k][1], R = chunk + n_dec, S = n_dec + 1;
        assert_true(R <= SERVE_MAX_ROWS);
        Session ss[2][16];
        int hist[16][40];
        for (int q = 0; q < S; q++) random_tokens(hist[q], 40, V, 100 * k + q);
        float *together = mallocCheck((size_t)R * V * sizeof(float)), *alone = mallocCheck((size_t)R * V * sizeof(float));
        for (int run = 0; run < 2; run++) {
            Error err;
            KVCache *caches[SERVE_MAX_ROWS];
            int tokens[SERVE_MAX_ROWS], pos[SERVE_MAX_ROWS];
            for (int q = 0; q < S; q++) {
                int cached = q == 0 ? 5 : 3 + q;
                session_open(&ss[run][q], &e, c.seq_len);
                if (session_prefill(&ss[run][q], hist[q], cached, NULL, &err)) fail_msg("%s", err.msg);
            }
            for (int r = 0; r < R; r++) {
                int q = r < chunk ? 0 : r - chunk + 1;
                caches[r] = &ss[run][q].cache;
                pos[r] = q == 0 ? 5 + r : 3 + q;
                tokens[r] = hist[q][pos[r]];
            }
            if (run == 0) {
                engine_forward(&e, caches, tokens, pos, R, together, 1);
            } else {
                engine_forward(&e, caches, tokens, pos, chunk, alone, 1);
                for (int r = chunk; r < R; r++) engine_forward(&e, caches + r, tokens + r, pos + r, 1, alone + (size_t)r * V, 1);
            }
            for (int q = 0; q < S; q++) session_close(&ss[run][q]);
        }
        assert_memory_equal(together, alone, (size_t)R * V * sizeof(float));
        free(together);
        free(alone);
    }
    engine_close(&e);
    model_free(&m);
}

// One forward costs 1 s whatever its rows: a lone request of prompt P and output G under
// chunked prefill with budget B takes ceil(P / B) forwards to its first token, then one per token.
static double one_second(const void *ctx, int rows, double keys) {
    (void)ctx, (void)rows, (void)keys;
    return 1.0;
}

#define REQ(t, p, o) {.arrival_s = t, .prompt_len = p, .output_len = o, .follows = -1}

static void test_simulated_run(void **state) {
    (void)state;
    Request r[3] = {REQ(0.0, 23, 5), REQ(100.0, 40, 30), REQ(100.5, 9, 2)};
    int tokens[3][30];
    double times[3][30];
    Outcome out[3];
    for (int i = 0; i < 3; i++) out[i] = (Outcome){.tokens = tokens[i], .token_s = times[i]};
    StepCost cost = {one_second, NULL};
    ServeStats st;
    Error err;
    for (int k = 0; k < CACHE_COUNT; k++) {
        ServeConfig cfg = {.policy = POLICY_CHUNKED, .cache = k, .max_batch = 4, .token_budget = 8, .block_size = 16,
                           .kv_tokens = 1024, .reserve_len = 128};
        if (serve_run(&cfg, NULL, &cost, r, 3, out, &st, &err)) fail_msg("%s", err.msg);
        assert_true(times[0][0] == 3.0); // ceil(23 / 8) forwards
        assert_true(times[0][4] == 7.0);
        assert_true(times[1][0] == 105.0); // idle until 100, then 5 chunks of 8
        for (int i = 0; i < 3; i++) assert_int_equal(out[i].n_out, r[i].output_len);
        assert_int_equal(st.n_preemptions, 0);
    }
    // a malformed configuration is an error, not a crash
    ServeConfig bad = {.policy = POLICY_CHUNKED, .cache = CACHE_RESERVE, .prefix_cache = PREFIX_CACHE_HASH,
                       .max_batch = 4, .token_budget = 8, .block_size = 16, .kv_tokens = 1024, .reserve_len = 128};
    assert_int_equal(serve_run(&bad, NULL, &cost, r, 3, out, &st, &err), -1);
    ServeConfig small = bad;
    small.cache = CACHE_PAGED, small.prefix_cache = PREFIX_CACHE_OFF, small.kv_tokens = 32;
    assert_int_equal(serve_run(&small, NULL, &cost, r, 3, out, &st, &err), -1); // 70 positions in 2 blocks
}

// One-second forwards of up to 8 rows. Three requests of 8 prompt tokens and 3 outputs, all due
// at 0, one in flight at a time: each is sent when the one before ends and takes three
// forwards. Then a follow-up of 2 new tokens, 0.5 s after the turn it follows: its prompt of
// 8 + 3 + 2 = 13 tokens takes two forwards; with the radix cache the first 10 are found (the
// turn's prompt and all its outputs but the last, whose KV was never computed), one forward.
static void test_concurrency_and_follow_ups(void **state) {
    (void)state;
    int prompts[4][8] = {{1, 2, 3, 4, 5, 6, 7, 8}, {2, 3, 4, 5, 6, 7, 8, 9}, {3, 4, 5, 6, 7, 8, 9, 10}, {11, 12}};
    Request r[4] = {REQ(0, 8, 3), REQ(0, 8, 3), REQ(0, 8, 3), {.prompt_len = 2, .output_len = 2, .follows = 0, .think_s = 0.5}};
    for (int i = 0; i < 4; i++) r[i].prompt = prompts[i];
    int tokens[4][3];
    double times[4][3];
    Outcome out[4];
    for (int i = 0; i < 4; i++) out[i] = (Outcome){.tokens = tokens[i], .token_s = times[i]};
    StepCost cost = {one_second, NULL};
    ServeStats st;
    Error err;
    ServeConfig cfg = {.policy = POLICY_CHUNKED, .cache = CACHE_PAGED, .max_concurrency = 1, .max_batch = 4,
                       .token_budget = 8, .block_size = 4, .kv_tokens = 256, .reserve_len = 64};
    if (serve_run(&cfg, NULL, &cost, r, 3, out, &st, &err)) fail_msg("%s", err.msg);
    for (int i = 0; i < 3; i++) {
        assert_true(out[i].sent_s == 3.0 * i);
        assert_true(times[i][0] == 3.0 * i + 1 && times[i][2] == 3.0 * i + 3);
    }
    cfg.max_concurrency = 0;
    for (int pc = PREFIX_CACHE_OFF; pc <= PREFIX_CACHE_RADIX; pc += PREFIX_CACHE_RADIX) {
        cfg.prefix_cache = pc;
        Request two[2] = {r[0], r[3]};
        if (serve_run(&cfg, NULL, &cost, two, 2, out, &st, &err)) fail_msg("%s", err.msg);
        assert_true(out[1].sent_s == 3.5);
        assert_int_equal(out[1].prompt_len, 13);
        assert_int_equal(out[1].cached, pc ? 10 : 0);
        assert_true(times[1][0] == 3.5 + (pc ? 1 : 2));
    }
    Request loop[2] = {r[3], r[0]}; // a follow-up of a later request
    assert_int_equal(serve_run(&cfg, NULL, &cost, loop, 2, out, &st, &err), -1);
}

static void test_gamma_arrivals(void **state) {
    (void)state;
    enum { N = 20001 };
    Request *r = calloc(N, sizeof(Request));
    for (int i = 0; i < N; i++) r[i].follows = -1;
    double bursts[] = {0.5, 1.0, 4.0};
    for (int b = 0; b < 3; b++) {
        workload_arrivals(r, N, 8.0, bursts[b], 5);
        double sum = 0, sq = 0;
        for (int i = 1; i < N; i++) {
            double g = r[i].arrival_s - r[i - 1].arrival_s;
            sum += g;
            sq += g * g;
        }
        double mean = sum / (N - 1), var = sq / (N - 1) - mean * mean;
        assert_true(fabs(mean * 8.0 - 1.0) < 0.05);
        assert_true(fabs(var / (mean * mean) * bursts[b] - 1.0) < 0.1);
    }
    free(r);
}

// The workload kinds on a small text: few-shot requests each start with one of the example
// sets; a chat's turns follow each other and resend the conversation; arrivals go to first
// turns only.
static void test_workload_kinds(void **state) {
    (void)state;
    enum { LINES = 60, N = 24 };
    char *text = mallocCheck(LINES * 80);
    text[0] = '\0';
    uint64_t rng = rng_seed(3);
    static const char *const words[] = {"and", "the", "light", "day", "night", "water", "earth", "said", "God", "was"};
    for (int l = 0; l < LINES; l++) {
        for (int w = 0; w < 6 + l % 5; w++) {
            strcat(text, words[rng_u64(&rng) % 10]);
            strcat(text, " ");
        }
        strcat(text, "\n");
    }
    Tokenizer tok;
    Error err;
    if (tokenizer_train_bpe(&tok, (const unsigned char *)text, strlen(text), 300, &err)) fail_msg("%s", err.msg);
    WorkloadSpec few = {.kind = WORKLOAD_FEW_SHOT, .n_requests = N, .max_prompt = 40, .min_output = 1, .max_output = 8,
                        .prefix_len = 12, .n_prefixes = 3, .seed = 5};
    Workload w;
    if (workload_make(&w, &few, &tok, text, strlen(text), &err)) fail_msg("%s", err.msg);
    int sets[3][12], n_sets = 0;
    for (int i = 0; i < N; i++) {
        const Request *r = &w.reqs[i];
        assert_int_equal(r->prefix_len, 12);
        assert_int_equal(r->follows, -1);
        assert_true(r->prompt_len > 12 && r->prompt_len <= 40);
        int k = 0;
        while (k < n_sets && memcmp(sets[k], r->prompt, sizeof sets[k])) k++;
        if (k == n_sets) {
            assert_true(n_sets < 3); // never a fourth example set
            memcpy(sets[n_sets++], r->prompt, sizeof sets[0]);
        }
    }
    assert_true(n_sets >= 2);
    workload_free(&w);

    WorkloadSpec chat = {.kind = WORKLOAD_CHAT, .n_requests = N, .max_prompt = 20, .min_output = 1, .max_output = 6,
                         .turns = 3, .think_s = 0.25, .seed = 6};
    if (workload_make(&w, &chat, &tok, text, strlen(text), &err)) fail_msg("%s", err.msg);
    workload_arrivals(w.reqs, w.n, 4.0, 1.0, 7);
    for (int i = 0; i < N; i++) {
        const Request *r = &w.reqs[i];
        int turn = i % 3;
        assert_int_equal(r->follows, turn ? i - 1 : -1);
        assert_true(r->think_s == (turn ? 0.25 : 0));
        assert_true(turn ? r->arrival_s == 0 : i == 0 || r->arrival_s >= w.reqs[i - 3].arrival_s);
        if (turn)
            assert_int_equal(request_full_prompt_len(w.reqs, i),
                             request_full_prompt_len(w.reqs, i - 1) + w.reqs[i - 1].output_len + r->prompt_len);
    }
    assert_true(w.reqs[N - 3].arrival_s > 0);
    workload_free(&w);
    few.n_prefixes = 0;
    assert_int_equal(workload_make(&w, &few, &tok, text, strlen(text), &err), -1); // a few-shot workload of no sets
    tokenizer_free(&tok);
    free(text);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_every_policy_gives_solo_tokens),
        cmocka_unit_test(test_mixed_forward_is_rowwise_exact),
        cmocka_unit_test(test_simulated_run),
        cmocka_unit_test(test_concurrency_and_follow_ups),
        cmocka_unit_test(test_gamma_arrivals),
        cmocka_unit_test(test_workload_kinds),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
