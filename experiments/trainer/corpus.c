// corpus.c: corpus loading, KJV normalisation, the train/validation split, passkey sequences
// and the passkey evaluator (see corpus.h).
#include "corpus.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "rng.h"
#include "session.h"

#define KJV_COMMAND "bible \"Gen1:1-Rev22:21\" 2>/dev/null"

uint64_t fnv1a(uint64_t h, const void *data, size_t len) {
    const unsigned char *p = data;
    for (size_t i = 0; i < len; i++) {
        h ^= p[i];
        h *= 0x100000001b3ull;
    }
    return h;
}

int utf8_valid(const char *text, size_t len, size_t *bad_at) {
    const unsigned char *s = (const unsigned char *)text;
    size_t i = 0;
    while (i < len) {
        unsigned c = s[i];
        int n = c < 0x80 ? 0 : (c >> 5) == 0x6 ? 1 : (c >> 4) == 0xE ? 2 : (c >> 3) == 0x1E ? 3 : -1;
        if (n < 0 || (n > 0 && len - i <= (size_t)n)) goto bad;
        unsigned cp = n == 0 ? c : n == 1 ? c & 0x1F : n == 2 ? c & 0x0F : c & 0x07;
        for (int k = 1; k <= n; k++) {
            if ((s[i + k] & 0xC0) != 0x80) goto bad;
            cp = (cp << 6) | (s[i + k] & 0x3F);
        }
        static const unsigned min_cp[4] = {0, 0x80, 0x800, 0x10000};
        if (cp < min_cp[n] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) goto bad;
        i += n + 1;
    }
    return 1;
bad:
    if (bad_at) *bad_at = i;
    return 0;
}

// --- KJV normalisation -------------------------------------------------------------------

typedef struct {
    char *buf;
    size_t len, cap;
} Text;

static void text_put(Text *t, const char *s, size_t n) {
    if (t->len + n + 1 > t->cap) {
        t->cap = (t->len + n + 1) * 2;
        t->buf = reallocCheck(t->buf, t->cap);
    }
    memcpy(t->buf + t->len, s, n);
    t->len += n;
    t->buf[t->len] = '\0';
}

// Append s[0..n) with runs of spaces and tabs collapsed to one space, and with a space
// before it when the output line already has text (joining wrapped lines).
static void text_put_words(Text *t, const char *s, size_t n) {
    for (size_t i = 0; i < n;) {
        while (i < n && (s[i] == ' ' || s[i] == '\t')) i++;
        size_t j = i;
        while (j < n && s[j] != ' ' && s[j] != '\t') j++;
        if (j == i) break;
        if (t->len > 0 && t->buf[t->len - 1] != '\n') text_put(t, " ", 1);
        text_put(t, s + i, j - i);
        i = j;
    }
}

static int is_blank(const char *s, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (s[i] != ' ' && s[i] != '\t' && s[i] != '\r') return 0;
    return 1;
}

// "  12 text": indented verse number; *text_at is where its text starts.
static int is_verse_line(const char *s, size_t n, size_t *text_at) {
    size_t i = 0;
    while (i < n && s[i] == ' ') i++;
    if (i == 0 || i == n || s[i] < '0' || s[i] > '9') return 0;
    while (i < n && s[i] >= '0' && s[i] <= '9') i++;
    if (i < n && s[i] != ' ') return 0;
    *text_at = i;
    return 1;
}

int corpus_normalise_kjv(const char *raw, size_t len, char **out, size_t *out_len, Error *err) {
    Text t = {0};
    int after_blank = 1, in_chapter = 0, in_verse = 0, n_verses = 0;
    for (size_t pos = 0; pos < len;) {
        const char *eol = memchr(raw + pos, '\n', len - pos);
        size_t end = eol ? (size_t)(eol - raw) : len, n = end - pos;
        const char *line = raw + pos;
        if (n > 0 && line[n - 1] == '\r') n--;
        size_t text_at;
        if (is_blank(line, n)) {
            after_blank = 1;
        } else if (is_verse_line(line, n, &text_at)) {
            if (!in_chapter) {
                free(t.buf);
                return error_set(err, "bible output: line %zu bytes in is a verse before any chapter heading",
                                 pos);
            }
            if (in_verse) text_put(&t, "\n", 1);
            text_put_words(&t, line + text_at, n - text_at);
            in_verse = 1;
            n_verses++;
            after_blank = 0;
        } else if (after_blank || !in_verse) { // a heading: the start of a chapter
            if (in_verse) text_put(&t, "\n\n", 2);
            else if (in_chapter) text_put(&t, "\n", 1); // a heading without verses
            text_put_words(&t, line, n);
            text_put(&t, "\n", 1);
            in_chapter = 1;
            in_verse = 0;
            after_blank = 0;
        } else { // a wrapped continuation of the current verse
            text_put_words(&t, line, n);
        }
        pos = end + 1;
    }
    if (n_verses == 0) {
        free(t.buf);
        return error_set(err, "bible output holds no verses (is bible-kjv installed? try `make deps`)");
    }
    text_put(&t, "\n\n", 2);
    *out = t.buf;
    *out_len = t.len;
    return 0;
}

// --- loading and splitting -----------------------------------------------------------------

// End of the block that starts at pos (see corpus.h): just past a blank line, else the
// first line break at or past the soft limit, else a character boundary at the hard limit.
static size_t block_end(const char *s, size_t len, size_t pos) {
    for (size_t i = pos; i < len; i++) {
        if (s[i] != '\n') {
            if (i - pos >= CORPUS_BLOCK_HARD && ((unsigned char)s[i] & 0xC0) != 0x80) return i;
            continue;
        }
        if (i + 1 < len && s[i + 1] == '\n') {
            size_t j = i + 1;
            while (j < len && s[j] == '\n') j++;
            return j;
        }
        if (i + 1 - pos >= CORPUS_BLOCK_SOFT) return i + 1;
    }
    return len;
}

static char *copy_text(const char *s, size_t n) {
    char *d = mallocCheck(n + 1);
    memcpy(d, s, n);
    d[n] = '\0';
    return d;
}

static int split_text(Corpus *c, Error *err) {
    int n_blocks = 0;
    for (size_t pos = 0; pos < c->len; pos = block_end(c->text, c->len, pos)) n_blocks++;
    if (n_blocks < 2)
        return error_set(err, "%s: the text is a single block; a train/validation split needs at least "
                         "two (paragraphs separated by a blank line)", c->source);
    int last_is_val = n_blocks <= CORPUS_VAL_EVERY / 2;
    Text train = {0}, val = {0};
    int i = 0;
    for (size_t pos = 0, end; pos < c->len; pos = end, i++) {
        end = block_end(c->text, c->len, pos);
        int is_val = last_is_val ? i == n_blocks - 1 : i % CORPUS_VAL_EVERY == CORPUS_VAL_EVERY / 2;
        text_put(is_val ? &val : &train, c->text + pos, end - pos);
        c->n_val_blocks += is_val;
    }
    c->n_blocks = n_blocks;
    c->train = train.buf;
    c->train_len = train.len;
    c->val = val.buf;
    c->val_len = val.len;
    return 0;
}

// The corpus from text that came from source (named in errors).
static int corpus_build(Corpus *c, const char *text, size_t len, int kjv_raw, const char *source, Error *err) {
    memset(c, 0, sizeof *c);
    snprintf(c->source, sizeof c->source, "%s", source);
    size_t bad_at;
    if (!utf8_valid(text, len, &bad_at))
        return error_set(err, "%s: not UTF-8 (bad byte at offset %zu)", c->source, bad_at);
    if (kjv_raw) {
        if (corpus_normalise_kjv(text, len, &c->text, &c->len, err)) return -1;
    } else {
        c->text = copy_text(text, len);
        c->len = len;
    }
    if (split_text(c, err)) {
        corpus_free(c);
        return -1;
    }
    return 0;
}

int corpus_from_text(Corpus *c, const char *text, size_t len, int kjv_raw, Error *err) {
    return corpus_build(c, text, len, kjv_raw, "text", err);
}

// Read all of f into a malloc'd buffer; -1 when it exceeds CORPUS_MAX_BYTES or fails.
static int read_all(FILE *f, char **out, size_t *out_len) {
    size_t cap = 1 << 20, len = 0;
    char *buf = mallocCheck(cap);
    size_t got;
    while ((got = fread(buf + len, 1, cap - len, f)) > 0) {
        len += got;
        if (len > CORPUS_MAX_BYTES) {
            free(buf);
            return -1;
        }
        if (len == cap) buf = reallocCheck(buf, cap *= 2);
    }
    if (ferror(f)) {
        free(buf);
        return -1;
    }
    *out = buf;
    *out_len = len;
    return 0;
}

static int load_kjv(Corpus *c, Error *err) {
    FILE *p = popen(KJV_COMMAND, "r");
    if (!p) return error_set(err, "cannot run `bible`: %s", strerror(errno));
    char *raw = NULL;
    size_t len = 0;
    int read_failed = read_all(p, &raw, &len);
    int status = pclose(p);
    if (read_failed || status == -1 || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        free(raw);
        return error_set(err, "`%s` failed (is bible-kjv installed? `make deps` installs it)", KJV_COMMAND);
    }
    int rc = corpus_build(c, raw, len, 1, "bible-kjv", err);
    free(raw);
    return rc;
}

int corpus_load(Corpus *c, const char *path, Error *err) {
    memset(c, 0, sizeof *c);
    if (!path) return load_kjv(c, err);
    FILE *f = fopen(path, "rb");
    if (!f) return error_set(err, "%s: %s", path, strerror(errno));
    char *text = NULL;
    size_t len = 0;
    int failed = read_all(f, &text, &len);
    fclose(f);
    if (failed) return error_set(err, "%s: cannot read it (a read error, or over %zu bytes)", path, CORPUS_MAX_BYTES);
    int rc = len == 0 ? error_set(err, "%s: the file is empty", path) : corpus_build(c, text, len, 0, path, err);
    free(text);
    return rc;
}

void corpus_free(Corpus *c) {
    free(c->text);
    free(c->train);
    free(c->val);
    c->text = c->train = c->val = NULL;
    c->len = c->train_len = c->val_len = 0;
}

// --- passkey ------------------------------------------------------------------------------

static const char NEEDLE_FMT[] = "The number of the key is %u. Keep it in thine heart, and forget not the number.\n";
static const char QUESTION[] = "\nWhat is the number of the key? The number of the key is";

// Encode a short text; returns the token count (tokens holds tokenizer_max_tokens(len)).
static int encode_text(const Tokenizer *tok, const char *s, int *tokens) {
    return (int)tokenizer_encode(tok, (const unsigned char *)s, strlen(s), false, false, tokens);
}

int passkey_min_len(const Tokenizer *tok) {
    int tokens[256];
    char needle[160];
    snprintf(needle, sizeof needle, NEEDLE_FMT, 0u);
    // Each digit is at most one token, plus one for a space that fails to merge with it.
    int digits = 2 * (PASSKEY_DIGITS + 1);
    return 1 + encode_text(tok, needle, tokens) + digits + encode_text(tok, QUESTION, tokens) + digits + 1;
}

// Does any of the n tokens hold a digit?
static int has_digit(const Tokenizer *tok, const int *tokens, int n) {
    for (int i = 0; i < n; i++) {
        size_t len;
        const unsigned char *piece = tokenizer_piece(tok, -1, tokens[i], &len);
        for (size_t j = 0; j < len; j++)
            if (piece[j] >= '0' && piece[j] <= '9') return 1;
    }
    return 0;
}

// Does token end a line?
static int ends_line(const Tokenizer *tok, int token) {
    size_t len;
    const unsigned char *piece = tokenizer_piece(tok, -1, token, &len);
    return len > 0 && piece[len - 1] == '\n';
}

// The start of the line holding token `at` of fill (n tokens), else of the next line, else `at`.
static int line_start_near(const Tokenizer *tok, const int *fill, int n, int at) {
    for (int i = at; i > 0; i--)
        if (ends_line(tok, fill[i - 1])) return i;
    for (int i = at; i < n; i++)
        if (ends_line(tok, fill[i])) return i + 1;
    return at;
}

static int append_tokens(int *seq, int at, const int *tokens, int n) {
    memcpy(seq + at, tokens, (size_t)n * sizeof(int));
    return at + n;
}

// Keys whose hash falls in one sixteenth of the space are kept for evaluation: training
// never draws them, so the evaluator measures retrieval of numbers never seen.
int passkey_held_out(unsigned number) { return fnv1a(FNV_OFFSET, &number, sizeof number) % 16 == 0; }

// A PASSKEY_DIGITS-digit number from *rng, held out for evaluation or not, as asked.
static unsigned passkey_number(uint64_t *rng, int held_out) {
    unsigned lo = 1, hi = 9;
    for (int d = 1; d < PASSKEY_DIGITS; d++) lo *= 10, hi = hi * 10 + 9;
    for (;;) {
        unsigned number = lo + (unsigned)(rng_u64(rng) % (hi - lo + 1));
        if (passkey_held_out(number) == held_out) return number;
    }
}

// n consecutive tokens of filler from a random offset, one without digits when one of
// FILLER_ATTEMPTS offsets gives it.
static const int *digit_free_window(const Tokenizer *tok, const int *filler, size_t n_filler, int n,
                                    uint64_t *rng) {
    const int *fill = filler;
    for (int attempt = 0; attempt < FILLER_ATTEMPTS; attempt++) {
        fill = filler + rng_u64(rng) % (n_filler - (size_t)n + 1);
        if (!has_digit(tok, fill, n)) break;
    }
    return fill;
}

// Where the needle goes among n_fill filler tokens: the line start near depth (evaluation),
// or a random token among the last max_gap (training with a gap limit), or anywhere.
static int needle_split(const Tokenizer *tok, const int *fill, int n_fill, const PasskeyPlace *place,
                        uint64_t *rng) {
    if (place->depth >= 0.0f) return line_start_near(tok, fill, n_fill, (int)(place->depth * n_fill));
    int lo = place->max_gap > 0 && place->max_gap < n_fill ? n_fill - place->max_gap : 0;
    return lo + (int)(rng_u64(rng) % (uint64_t)(n_fill - lo + 1));
}

int passkey_sequence_placed(const Tokenizer *tok, int *seq, int n, const int *filler, size_t n_filler,
                            uint64_t *rng, const PasskeyPlace *place, PasskeyLayout *layout, Error *err) {
    int min_len = passkey_min_len(tok);
    if (n < min_len) return error_set(err, "a passkey sequence needs at least %d tokens, not %d", min_len, n);
    if (n_filler < (size_t)n) return error_set(err, "passkey filler has %zu tokens, fewer than the %d asked", n_filler, n);
    PasskeyLayout L;
    memset(&L, 0, sizeof L);
    L.number = passkey_number(rng, place->held_out);
    char needle_text[160];
    snprintf(needle_text, sizeof needle_text, NEEDLE_FMT, L.number);
    snprintf(L.answer, sizeof L.answer, " %u", L.number);
    int needle[256], question[128], answer[32];
    L.needle_len = encode_text(tok, needle_text, needle);
    int question_len = encode_text(tok, QUESTION, question);
    L.answer_len = encode_text(tok, L.answer, answer);

    int n_fill = n - 1 - L.needle_len - question_len - L.answer_len;
    const int *fill = digit_free_window(tok, filler, n_filler, n_fill, rng);
    int split = needle_split(tok, fill, n_fill, place, rng);

    int at = 0;
    seq[at++] = tok->bos_id;
    at = append_tokens(seq, at, fill, split);
    L.needle_at = at;
    at = append_tokens(seq, at, needle, L.needle_len);
    at = append_tokens(seq, at, fill + split, n_fill - split);
    at = append_tokens(seq, at, question, question_len);
    L.prompt_len = at;
    append_tokens(seq, at, answer, L.answer_len);
    if (layout) *layout = L;
    return 0;
}

int passkey_sequence(const Tokenizer *tok, int *seq, int n, const int *filler, size_t n_filler,
                     uint64_t *rng, PasskeyLayout *layout, Error *err) {
    PasskeyPlace place = {rng_uniform(rng), 0, 0};
    return passkey_sequence_placed(tok, seq, n, filler, n_filler, rng, &place, layout, err);
}

// --- copy sequences ---------------------------------------------------------------------------

int copy_sequence(const Tokenizer *tok, int *seq, int n, const int *filler, size_t n_filler, uint64_t *rng,
                  CopyLayout *layout, Error *err) {
    if (n < 3 * COPY_MIN_DIGITS + 1) return error_set(err, "a copy sequence needs at least %d tokens, not %d",
                                                      3 * COPY_MIN_DIGITS + 1, n);
    if (n_filler < (size_t)n) return error_set(err, "copy filler has %zu tokens, fewer than the %d asked", n_filler, n);
    int max_digits = n / 3 < COPY_MAX_DIGITS ? n / 3 : COPY_MAX_DIGITS;
    int m = COPY_MIN_DIGITS + (int)(rng_u64(rng) % (uint64_t)(max_digits - COPY_MIN_DIGITS + 1));
    char text[COPY_MAX_DIGITS + 2] = " ";
    for (int i = 0; i < m; i++) text[1 + i] = (char)('0' + rng_u64(rng) % 10);
    text[1 + m] = '\0';
    int digits[2 * COPY_MAX_DIGITS + 4];
    int len = encode_text(tok, text, digits);
    seq[0] = tok->bos_id;
    memcpy(seq + 1, digit_free_window(tok, filler, n_filler, n - 1, rng), (size_t)(n - 1) * sizeof(int));
    // the first copy anywhere after BOS, the second anywhere after it
    int first = 1 + (int)(rng_u64(rng) % (uint64_t)(n - 2 * len));
    int second = first + len + (int)(rng_u64(rng) % (uint64_t)(n - first - 2 * len + 1));
    memcpy(seq + first, digits, (size_t)len * sizeof(int));
    memcpy(seq + second, digits, (size_t)len * sizeof(int));
    if (layout) *layout = (CopyLayout){first, second, len};
    return 0;
}

// --- the evaluator ----------------------------------------------------------------------------

// How many answer tokens the model predicts right with the answer fed back (teacher
// forcing): two prefills, the prompt (its last logits predict answer[0]) and answer[0 ..
// n - 1) (their logits predict answer[1 ..]). Greedy decoding after the prompt reproduces
// the answer exactly when all are right, since it feeds back exactly these tokens while right.
// The one function that decodes: the evaluator's greedy loop. -1 with err on failure.
static int passkey_tokens_right(Session *s, const int *seq, const PasskeyLayout *L, float *logits, Error *err) {
    int V = s->engine->config.vocab_size;
    const int *answer = seq + L->prompt_len;
    session_truncate(s, 0);
    if (session_prefill(s, seq, L->prompt_len, NULL, err)) return -1;
    int right = sampler_argmax(s->logits, V) == answer[0];
    if (L->answer_len == 1) return right;
    if (session_prefill(s, answer, L->answer_len - 1, logits, err)) return -1;
    for (int i = 1; i < L->answer_len; i++) right += sampler_argmax(logits + (size_t)(i - 1) * V, V) == answer[i];
    return right;
}

int passkey_eval_sequence(const Tokenizer *tok, int *seq, int ctx, const int *filler, size_t n_filler, float depth,
                          uint64_t *rng, PasskeyLayout *layout, Error *err) {
    PasskeyPlace place = {depth >= 0.0f ? depth : rng_uniform(rng), 0, 1};
    return passkey_sequence_placed(tok, seq, ctx, filler, n_filler, rng, &place, layout, err);
}

int passkey_evaluate(Model *m, const Tokenizer *tok, const int *filler, size_t n_filler, int ctx, float depth,
                     int n_samples, uint64_t seed, PasskeyScore *score, Error *err) {
    Engine e;
    engine_open(&e, m, ops_cpu(), DTYPE_F32, ctx < 512 ? ctx : 512, ctx);
    int rc = passkey_evaluate_engine(&e, tok, filler, n_filler, ctx, depth, n_samples, seed, score, err);
    engine_close(&e);
    return rc;
}

int passkey_evaluate_engine(Engine *e, const Tokenizer *tok, const int *filler, size_t n_filler, int ctx, float depth,
                            int n_samples, uint64_t seed, PasskeyScore *score, Error *err) {
    const Config *c = &e->config;
    int *seq = mallocCheck((size_t)ctx * sizeof(int));
    float *logits = mallocCheck((size_t)c->vocab_size * 32 * sizeof(float)); // (answer tokens, V)
    Session s;
    session_open(&s, e, ctx);
    uint64_t rng = rng_seed(seed);
    int rc = 0;
    double exact = 0.0, tokens_right = 0.0, tokens = 0.0;
    for (int i = 0; i < n_samples && rc == 0; i++) {
        PasskeyLayout L;
        rc = passkey_eval_sequence(tok, seq, ctx, filler, n_filler, depth, &rng, &L, err);
        if (rc) break;
        int right = passkey_tokens_right(&s, seq, &L, logits, err);
        if (right < 0) {
            rc = -1;
            break;
        }
        exact += right == L.answer_len;
        tokens_right += right;
        tokens += L.answer_len;
    }
    session_close(&s);
    free(logits);
    free(seq);
    if (rc) return -1;
    score->exact = n_samples > 0 ? exact / n_samples : 0.0;
    score->tokens = tokens > 0 ? tokens_right / tokens : 0.0;
    return 0;
}
