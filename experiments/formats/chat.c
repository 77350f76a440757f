// chat.c: llama.cpp's built-in chat formatting for ChatML and Gemma (see chat.h).
#include "chat.h"

#include <stdlib.h>
#include <string.h>

static bool has(const char *s, const char *what) { return strstr(s, what) != NULL; }

ChatTemplate chat_template_detect(const char *tmpl) {
    if (!tmpl) return CHAT_CHATML; // llama_chat_apply_template(NULL, ...) formats as "chatml"
    if (strcmp(tmpl, "chatml") == 0) return CHAT_CHATML;
    if (strcmp(tmpl, "gemma") == 0) return CHAT_GEMMA;
    // llm_chat_detect_template's checks, in its order, up to Gemma's
    if (has(tmpl, "<|im_start|>"))
        return has(tmpl, "<|im_sep|>") || has(tmpl, "<end_of_utterance>") ? CHAT_UNKNOWN : CHAT_CHATML;
    if (strncmp(tmpl, "mistral", 7) == 0 || has(tmpl, "[INST]")) return CHAT_UNKNOWN;
    if (has(tmpl, "<|assistant|>") && has(tmpl, "<|end|>")) return CHAT_UNKNOWN;
    if (has(tmpl, "[gMASK]<sop>")) return CHAT_UNKNOWN;
    if (has(tmpl, "<|assistant|>") && has(tmpl, "<|user|>")) return CHAT_UNKNOWN;
    if (has(tmpl, "<|{{ item['role'] }}|>") && has(tmpl, "<|begin_of_image|>")) return CHAT_UNKNOWN;
    if (has(tmpl, "<|user|>") && has(tmpl, "<|endoftext|>")) return CHAT_UNKNOWN;
    if (has(tmpl, "bos_token + message['role']")) return CHAT_UNKNOWN;
    if (has(tmpl, "<start_of_turn>")) return CHAT_GEMMA;
    return CHAT_UNKNOWN;
}

ChatTemplate chat_template_for(const Tokenizer *t) {
    if (t->chat_template) return chat_template_detect(t->chat_template);
    bool gemma = tokenizer_find_token(t, "<start_of_turn>") >= 0 && tokenizer_find_token(t, "<end_of_turn>") >= 0;
    return gemma ? CHAT_GEMMA : CHAT_CHATML;
}

const char *chat_template_name(ChatTemplate kind) {
    return kind == CHAT_CHATML ? "chatml" : kind == CHAT_GEMMA ? "gemma" : "unknown";
}

typedef struct {
    char *p;
    size_t len, cap;
} Str;

static void put_n(Str *s, const char *x, size_t n) {
    if (s->len + n + 1 > s->cap) {
        s->cap = 2 * (s->len + n + 1);
        s->p = reallocCheck(s->p, s->cap);
    }
    memcpy(s->p + s->len, x, n);
    s->len += n;
    s->p[s->len] = '\0';
}

static void put(Str *s, const char *x) { put_n(s, x, strlen(x)); }

// llama-chat.cpp's trim: isspace() in the C locale, at both ends
static bool c_space(char c) { return c == ' ' || (c >= '\t' && c <= '\r'); }

static void put_trimmed(Str *s, const char *x) {
    size_t a = 0, b = strlen(x);
    while (a < b && c_space(x[a])) a++;
    while (b > a && c_space(x[b - 1])) b--;
    put_n(s, x + a, b - a);
}

char *chat_apply(ChatTemplate kind, const ChatMessage *msgs, int n, bool add_assistant) {
    if (kind != CHAT_CHATML && kind != CHAT_GEMMA) return NULL;
    Str s = {0};
    put(&s, "");
    if (kind == CHAT_CHATML) {
        for (int i = 0; i < n; i++) {
            put(&s, "<|im_start|>");
            put(&s, msgs[i].role);
            put(&s, "\n");
            put(&s, msgs[i].content);
            put(&s, "<|im_end|>\n");
        }
        if (add_assistant) put(&s, "<|im_start|>assistant\n");
        return s.p;
    }
    Str system = {0}; // Gemma has no system turn: it opens the next user turn
    put(&system, "");
    for (int i = 0; i < n; i++) {
        if (strcmp(msgs[i].role, "system") == 0) {
            put_trimmed(&system, msgs[i].content);
            continue;
        }
        const char *role = strcmp(msgs[i].role, "assistant") == 0 ? "model" : msgs[i].role;
        put(&s, "<start_of_turn>");
        put(&s, role);
        put(&s, "\n");
        if (system.len > 0 && strcmp(role, "model") != 0) {
            put(&s, system.p);
            put(&s, "\n\n");
            system.len = 0;
            system.p[0] = '\0';
        }
        put_trimmed(&s, msgs[i].content);
        put(&s, "<end_of_turn>\n");
    }
    if (add_assistant) put(&s, "<start_of_turn>model\n");
    free(system.p);
    return s.p;
}

char *chat_format_user(ChatTemplate kind, const char *user) {
    ChatMessage m = {"user", user};
    return chat_apply(kind, &m, 1, true);
}
