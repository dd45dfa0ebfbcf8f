/*
 * sim_tok: the simulator's own deterministic tokenizer and chat template.
 *
 * Tokenizer (stable; tests and the engine rely on exact counts):
 *   - Text is split into words: maximal runs of bytes that are not ASCII
 *     whitespace (space, \t, \n, \r, \v, \f).  Whitespace costs nothing.
 *   - A word of L bytes is ceil(L / 4) tokens: its bytes cut into pieces of
 *     4 bytes, the last piece possibly shorter.  "hello world" = 2 + 2 = 4.
 *   - A token id is 1000 + (FNV-1a 32-bit of the piece) % 100000; ids below
 *     1000 are special: 1 = BOS, 2 = EOS, 3..9 = template markers.
 * Completions prompt: 1 (BOS) + tokens(prompt).
 * Chat template: SIM_TOK_CHAT_PREFIX (BOS) + for each message
 *   SIM_TOK_PER_MESSAGE (role header and end marker) + tokens(content)
 *   + SIM_TOK_GEN_PROMPT (the assistant header, when add_generation_prompt,
 *   the default).  So one message "hello world" = 1 + 4 + 4 + 3 = 12 tokens.
 *   Ids: a message is <start> <role> <sep> content <end>, with its own role
 *   id for system, user and assistant (one for the rest); the generation
 *   prompt is <start> <assistant> <sep>, the head of an assistant message.
 * Message content may be a string or an array of {"type":"text","text":...}
 * parts (non-text parts count 0).
 */
#ifndef SIM_TOK_H
#define SIM_TOK_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define SIM_TOK_BYTES_PER_TOKEN 4
#define SIM_TOK_CHAT_PREFIX 1
#define SIM_TOK_PER_MESSAGE 4
#define SIM_TOK_GEN_PROMPT 3
#define SIM_TOK_COMPLETION_PREFIX 1
#define SIM_TOK_MAX_MESSAGES 100000

/* 64-bit FNV-1a of n bytes, chained from h (SIM_TOK_FNV64_INIT to start):
 * the simulator's one 64-bit hash (prompts, the noise model's runs). */
#define SIM_TOK_FNV64_INIT 14695981039346656037ull
uint64_t sim_tok_fnv64(uint64_t h, const void *data, size_t n);

/* Number of tokens of n bytes of text. */
int64_t sim_tok_count(const char *text, size_t n);

/* Appends the token ids of text to *ids (grown with tb_xrealloc; *len and
 * *cap updated; caller frees *ids). */
void sim_tok_ids(const char *text, size_t n, int32_t **ids, size_t *len, size_t *cap);

/* Prompt of a chat request: counts tokens of messages (a JSON array,
 * borrowed) and hashes the templated text into *hash (may be NULL).  With
 * ids != NULL, also appends the token ids.  Returns -1 (and sets *err to a
 * static message) when messages is not an array of objects with a role. */
int64_t sim_tok_chat(const json_t *messages, bool add_generation_prompt, uint64_t *hash,
                     int32_t **ids, size_t *len, size_t *cap, const char **err);

/* The chat template as text, ChatML as llama.cpp's /apply-template renders
 * it: "<|im_start|>ROLE\nCONTENT<|im_end|>\n" per message (content parts
 * joined by "\n"), then "<|im_start|>assistant\n" with
 * add_generation_prompt; the BOS is not in it (llama.cpp adds it when it
 * tokenizes with add_special, as its chat completions do).  messages as
 * sim_tok_chat checked them (borrowed); returns a NUL-terminated string
 * (caller frees). */
char *sim_tok_render_chat(const json_t *messages, bool add_generation_prompt);

/* The BOS as text (llama.cpp's /props bos_token). */
#define SIM_TOK_BOS_TEXT "<s>"

/* Token ids of text that may hold the template's markers (llama.cpp's
 * /tokenize parses special tokens): SIM_TOK_BOS_TEXT is the BOS,
 * "<|im_start|>" a message's start, the word after it its role and the
 * "\n" after that the separator, "<|im_end|>" its end (with the "\n" after
 * it); the rest as sim_tok_ids.  So the BOS and the ids of
 * sim_tok_render_chat's text are sim_tok_chat's.  Appends to *ids as
 * sim_tok_ids does. */
void sim_tok_special_ids(const char *text, size_t n, int32_t **ids, size_t *len, size_t *cap);

/* Prompt of a completions request (text, n bytes): 1 + count; hash of the text. */
int64_t sim_tok_prompt(const char *text, size_t n, uint64_t *hash, int32_t **ids, size_t *len,
                       size_t *cap);

/* Text of output token number i (0-based): a space and a word of 1..4 bytes,
 * so re-tokenizing the output gives back exactly one token per output token. */
const char *sim_tok_output_word(int64_t i);
/* The token id of output token i (its word's id, as sim_tok_ids gives it). */
int32_t sim_tok_output_id(int64_t i);

#endif
