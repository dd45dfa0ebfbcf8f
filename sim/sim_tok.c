/*
 * sim_tok: tokenizer and chat template.  The rules are in sim_tok.h and in
 * sim/README.md; change neither without the other.
 */
#include "sim_tok.h"

#include <string.h>

#include "base/tb_util.h"

enum {
  TOK_BOS = 1,
  TOK_MSG_START = 3,
  TOK_ROLE = 4,
  TOK_MSG_SEP = 5,
  TOK_MSG_END = 6,
  TOK_ROLE_ASSISTANT = 7,
  TOK_ROLE_SYSTEM = 8,
  TOK_ROLE_USER = 9
};

/* The id of a message's role: its own for system, user and assistant
 * (so "system: X" and "user: X" are different prompts, and a chat's
 * assistant message starts as the generation prompt did: a follow-up
 * turn finds the earlier turn's answer in the prefix cache), one for the
 * rest (tool, developer, ...). */
static int32_t
role_id(const char *role, size_t n)
{
  if (n == 9 && memcmp(role, "assistant", 9) == 0)
    return TOK_ROLE_ASSISTANT;
  if (n == 6 && memcmp(role, "system", 6) == 0)
    return TOK_ROLE_SYSTEM;
  if (n == 4 && memcmp(role, "user", 4) == 0)
    return TOK_ROLE_USER;
  return TOK_ROLE;
}

static bool
is_space(unsigned char c)
{
  return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f';
}

int64_t
sim_tok_count(const char *text, size_t n)
{
  int64_t count = 0;
  size_t i = 0;
  while (i < n) {
    while (i < n && is_space((unsigned char)text[i]))
      i++;
    size_t start = i;
    while (i < n && !is_space((unsigned char)text[i]))
      i++;
    size_t wl = i - start;
    count += (int64_t)((wl + SIM_TOK_BYTES_PER_TOKEN - 1) / SIM_TOK_BYTES_PER_TOKEN);
  }
  return count;
}

static void
push(int32_t **ids, size_t *len, size_t *cap, int32_t id)
{
  if (*len == *cap) {
    *cap = *cap ? *cap * 2 : 256;
    *ids = tb_xrealloc(*ids, *cap * sizeof(**ids));
  }
  (*ids)[(*len)++] = id;
}

static uint32_t
fnv32(const char *p, size_t n)
{
  uint32_t h = 2166136261u;
  for (size_t i = 0; i < n; i++) {
    h ^= (unsigned char)p[i];
    h *= 16777619u;
  }
  return h;
}

void
sim_tok_ids(const char *text, size_t n, int32_t **ids, size_t *len, size_t *cap)
{
  size_t i = 0;
  while (i < n) {
    while (i < n && is_space((unsigned char)text[i]))
      i++;
    size_t start = i;
    while (i < n && !is_space((unsigned char)text[i]))
      i++;
    for (size_t p = start; p < i; p += SIM_TOK_BYTES_PER_TOKEN) {
      size_t pl = i - p < SIM_TOK_BYTES_PER_TOKEN ? i - p : SIM_TOK_BYTES_PER_TOKEN;
      push(ids, len, cap, (int32_t)(1000 + fnv32(text + p, pl) % 100000));
    }
  }
}

/* 64-bit FNV-1a, chained over the pieces of the templated prompt. */
uint64_t
sim_tok_fnv64(uint64_t h, const void *data, size_t n)
{
  const unsigned char *p = data;
  for (size_t i = 0; i < n; i++) {
    h ^= p[i];
    h *= 1099511628211ull;
  }
  return h;
}

int64_t
sim_tok_prompt(const char *text, size_t n, uint64_t *hash, int32_t **ids, size_t *len, size_t *cap)
{
  if (hash)
    *hash = sim_tok_fnv64(sim_tok_fnv64(SIM_TOK_FNV64_INIT, "P", 1), text, n);
  if (ids) {
    push(ids, len, cap, TOK_BOS);
    sim_tok_ids(text, n, ids, len, cap);
  }
  return SIM_TOK_COMPLETION_PREFIX + sim_tok_count(text, n);
}

/* Counts (and hashes, and tokenizes) one content value: string or parts. */
static int64_t
content_tokens(const json_t *content, uint64_t *h, int32_t **ids, size_t *len, size_t *cap)
{
  if (json_is_string(content)) {
    const char *s = json_string_value(content);
    size_t n = json_string_length(content);
    *h = sim_tok_fnv64(*h, s, n);
    if (ids)
      sim_tok_ids(s, n, ids, len, cap);
    return sim_tok_count(s, n);
  }
  int64_t total = 0;
  if (json_is_array(content)) {
    size_t i;
    const json_t *part;
    json_array_foreach (content, i, part) {
      const json_t *t = json_object_get(part, "text");
      if (json_is_string(t))
        total += content_tokens(t, h, ids, len, cap);
    }
  }
  return total;
}

int64_t
sim_tok_chat(const json_t *messages, bool add_generation_prompt, uint64_t *hash, int32_t **ids,
             size_t *len, size_t *cap, const char **err)
{
  if (!json_is_array(messages) || json_array_size(messages) == 0) {
    *err = "messages must be a non-empty array";
    return -1;
  }
  if (json_array_size(messages) > SIM_TOK_MAX_MESSAGES) {
    *err = "too many messages";
    return -1;
  }
  uint64_t h = sim_tok_fnv64(SIM_TOK_FNV64_INIT, "C", 1);
  int64_t total = SIM_TOK_CHAT_PREFIX;
  if (ids)
    push(ids, len, cap, TOK_BOS);
  size_t i;
  const json_t *m;
  json_array_foreach (messages, i, m) {
    const json_t *role = json_object_get(m, "role");
    if (!json_is_object(m) || !json_is_string(role)) {
      *err = "each message must be an object with a string role";
      return -1;
    }
    h = sim_tok_fnv64(h, json_string_value(role), json_string_length(role));
    h = sim_tok_fnv64(h, "\x1e", 1);
    if (ids) {
      push(ids, len, cap, TOK_MSG_START);
      push(ids, len, cap, role_id(json_string_value(role), json_string_length(role)));
      push(ids, len, cap, TOK_MSG_SEP);
    }
    total += SIM_TOK_PER_MESSAGE + content_tokens(json_object_get(m, "content"), &h, ids, len, cap);
    if (ids)
      push(ids, len, cap, TOK_MSG_END);
    h = sim_tok_fnv64(h, "\x1f", 1);
  }
  if (add_generation_prompt) {
    total += SIM_TOK_GEN_PROMPT;
    if (ids) {
      push(ids, len, cap, TOK_MSG_START);
      push(ids, len, cap, TOK_ROLE_ASSISTANT);
      push(ids, len, cap, TOK_MSG_SEP);
    }
  }
  if (hash)
    *hash = h;
  return total;
}

/* Appends n bytes to a growing string. */
static void
cat(char **b, size_t *len, size_t *cap, const char *p, size_t n)
{
  if (*len + n + 1 > *cap) {
    *cap = (*len + n + 1) * 2;
    *b = tb_xrealloc(*b, *cap);
  }
  memcpy(*b + *len, p, n);
  *len += n;
  (*b)[*len] = '\0';
}

static void
cat_content(char **b, size_t *len, size_t *cap, const json_t *content)
{
  if (json_is_string(content)) {
    cat(b, len, cap, json_string_value(content), json_string_length(content));
    return;
  }
  size_t i;
  const json_t *part;
  bool first = true;
  json_array_foreach (content, i, part) { /* (not an array: nothing) */
    const json_t *t = json_object_get(part, "text");
    if (!json_is_string(t))
      continue;
    if (!first)
      cat(b, len, cap, "\n", 1);
    cat(b, len, cap, json_string_value(t), json_string_length(t));
    first = false;
  }
}

char *
sim_tok_render_chat(const json_t *messages, bool add_generation_prompt)
{
  char *b = NULL;
  size_t len = 0, cap = 0;
  cat(&b, &len, &cap, "", 0);
  size_t i;
  const json_t *m;
  json_array_foreach (messages, i, m) {
    const json_t *role = json_object_get(m, "role");
    cat(&b, &len, &cap, "<|im_start|>", 12);
    cat(&b, &len, &cap, json_string_value(role), json_string_length(role));
    cat(&b, &len, &cap, "\n", 1);
    cat_content(&b, &len, &cap, json_object_get(m, "content"));
    cat(&b, &len, &cap, "<|im_end|>\n", 11);
  }
  if (add_generation_prompt)
    cat(&b, &len, &cap, "<|im_start|>assistant\n", 22);
  return b;
}

/* Where the next marker of the template starts in [p, end), or end. */
static const char *
next_marker(const char *p, const char *end)
{
  for (; p < end; p++)
    if (*p == '<' && ((end - p >= 12 && memcmp(p, "<|im_start|>", 12) == 0) ||
                      (end - p >= 10 && memcmp(p, "<|im_end|>", 10) == 0) ||
                      (end - p >= 3 && memcmp(p, SIM_TOK_BOS_TEXT, 3) == 0)))
      return p;
  return end;
}

void
sim_tok_special_ids(const char *text, size_t n, int32_t **ids, size_t *len, size_t *cap)
{
  const char *p = text, *end = text + n;
  while (p < end) {
    const char *m = next_marker(p, end);
    sim_tok_ids(p, (size_t)(m - p), ids, len, cap);
    if (m == end)
      break;
    if (memcmp(m, SIM_TOK_BOS_TEXT, 3) == 0) {
      push(ids, len, cap, TOK_BOS);
      p = m + 3;
    } else if (memcmp(m, "<|im_end|>", 10) == 0) {
      push(ids, len, cap, TOK_MSG_END);
      p = m + 10;
      if (p < end && *p == '\n')
        p++;
    } else { /* <|im_start|>ROLE\n */
      const char *r = m + 12, *nl = memchr(r, '\n', (size_t)(end - r));
      const char *re = nl ? nl : end;
      push(ids, len, cap, TOK_MSG_START);
      push(ids, len, cap, role_id(r, (size_t)(re - r)));
      if (nl)
        push(ids, len, cap, TOK_MSG_SEP);
      p = nl ? nl + 1 : end;
    }
  }
}

static const char *const words[] = {
  " the", " fast", " sim",  " tok",  " gpu",  " kv",   " a",   " run",
  " of",  " ben",  " data", " step", " cell", " load", " and", " test",
};

const char *
sim_tok_output_word(int64_t i)
{
  return words[(uint64_t)i % TB_ARRAY_LEN(words)];
}

int32_t
sim_tok_output_id(int64_t i)
{
  const char *w = sim_tok_output_word(i) + 1; /* the word after its space */
  return (int32_t)(1000 + fnv32(w, strlen(w)) % 100000);
}
