// chat.h: chat templates as llama.cpp's built-in ones (src/llama-chat.cpp): llama.cpp does not
// run a model's Jinja template through llama_chat_apply_template; it recognises the template's
// kind from marker strings in it (llm_chat_detect_template) and formats the messages with its
// own code for that kind (llm_chat_apply_template). Two kinds are implemented here, those of
// the lab's real models:
//   CHAT_CHATML  SmolLM2: "<|im_start|>" role "\n" content "<|im_end|>\n" per message, then
//                "<|im_start|>assistant\n". The Jinja template's default system prompt ("You
//                are a helpful AI assistant named SmolLM...") is Jinja logic, which llama.cpp's
//                built-in formatter does not run: no system message unless one is given.
//   CHAT_GEMMA   Gemma: "<start_of_turn>" role "\n" trim(content) "<end_of_turn>\n" per message
//                ("assistant" written "model"; a system message has no turn of its own: trimmed,
//                it opens the next user turn, followed by "\n\n"), then "<start_of_turn>model\n".
// The text contains the special tokens' texts: tokenize it with TOKENIZER_PARSE_SPECIAL (and BOS
// when the model adds one, t->add_bos), as llama.cpp does.
//
// Test: build/tests/test_tokenizer_real (the strings and llama.cpp's ids for them).
#pragma once

#include <stdbool.h>
#include <stddef.h>

#include "tokenizer.h"

typedef enum {
    CHAT_UNKNOWN = 0, // another kind of template (llama.cpp may know it; the lab does not)
    CHAT_CHATML,
    CHAT_GEMMA,
} ChatTemplate;

typedef struct {
    const char *role;    // "system", "user", "assistant"
    const char *content;
} ChatMessage;

// llama.cpp's detection for a template string (the GGUF's tokenizer.chat_template, or a kind's
// name): NULL means the model has none, and llama.cpp then formats as "chatml"; "chatml" and
// "gemma" name their kinds; otherwise the first of llama.cpp's marker checks that matches
// decides, in its order: "<|im_start|>" is ChatML (unless "<|im_sep|>" or "<end_of_utterance>"
// make it Phi-4 or SmolVLM), ..., "<start_of_turn>" is Gemma. A kind the lab lacks is CHAT_UNKNOWN.
ChatTemplate chat_template_detect(const char *tmpl);

// The kind for a model's tokenizer: chat_template_detect of its template when the file has one.
// When it has none, llama.cpp falls back to ChatML whatever the model; here a vocabulary with
// "<start_of_turn>" and "<end_of_turn>" tokens (Gemma 3 270M's file has no template) gets
// Gemma's format, anything else ChatML.
ChatTemplate chat_template_for(const Tokenizer *t);

// The text for n messages, with the assistant's turn opened when add_assistant (llama.cpp's
// add_ass): malloc'd, NUL-terminated; NULL for CHAT_UNKNOWN.
char *chat_apply(ChatTemplate kind, const ChatMessage *msgs, int n, bool add_assistant);

// One user message, the assistant's turn opened: what `bin/generate --chat` sends.
char *chat_format_user(ChatTemplate kind, const char *user);

// "chatml", "gemma" or "unknown".
const char *chat_template_name(ChatTemplate kind);
