/*
 * tb_oai: one streamed chunk.  See tb_oai.h.
 *
 * Parsed with jansson: the chunks are small and a real parser is worth more
 * than a few microseconds here.  Member types are checked; a member of the
 * wrong type makes the chunk malformed rather than silently ignored, because
 * a figure must never come from data we did not understand.
 */
#include "tb_oai.h"

#include <jansson.h>
#include <stdio.h>
#include <string.h>

static bool
is_done(const char *d, size_t len)
{
  while (len > 0 && (d[len - 1] == ' ' || d[len - 1] == '\t'))
    len--;
  return len == 6 && memcmp(d, "[DONE]", 6) == 0;
}

/* Adds a text member's length; false when present and not a string/null. */
static bool
text_member(const json_t *obj, const char *key, size_t *bytes)
{
  const json_t *v = json_object_get(obj, key);
  if (v == NULL || json_is_null(v))
    return true;
  if (!json_is_string(v))
    return false;
  *bytes += json_string_length(v);
  return true;
}

static bool
usage_int(const json_t *usage, const char *key, int64_t *out)
{
  const json_t *v = json_object_get(usage, key);
  if (v == NULL || json_is_null(v))
    return true;
  if (!json_is_integer(v) || json_integer_value(v) < 0)
    return false;
  *out = json_integer_value(v);
  return true;
}

enum tb_oai_status
tb_oai_parse_chunk(const char *data, size_t len, struct tb_oai_chunk *out)
{
  memset(out, 0, sizeof *out);
  out->prompt_tokens = -1;
  out->completion_tokens = -1;
  if (is_done(data, len))
    return TB_OAI_DONE;
  if (len > TB_OAI_CHUNK_MAX)
    return TB_OAI_MALFORMED;
  json_error_t jerr;
  json_t *root = json_loadb(data, len, JSON_REJECT_DUPLICATES, &jerr);
  enum tb_oai_status st = TB_OAI_MALFORMED;
  if (root == NULL || !json_is_object(root))
    goto out;

  const json_t *err = json_object_get(root, "error");
  if (err != NULL && !json_is_null(err)) {
    out->is_error = true;
    const json_t *msg = json_is_object(err) ? json_object_get(err, "message")
                                            : err;
    snprintf(out->error, sizeof out->error, "%s",
             json_is_string(msg) ? json_string_value(msg) : "error object");
    st = TB_OAI_OK;
    goto out;
  }

  const json_t *choices = json_object_get(root, "choices");
  if (choices != NULL && !json_is_null(choices)) {
    if (!json_is_array(choices))
      goto out;
    size_t i;
    const json_t *ch;
    json_array_foreach(choices, i, ch) {
      if (!json_is_object(ch))
        goto out;
      out->n_choices++;
      size_t text = 0, reasoning = 0;
      const json_t *delta = json_object_get(ch, "delta");
      bool role = false;
      if (delta != NULL && !json_is_null(delta)) {
        if (!json_is_object(delta))
          goto out;
        if (!text_member(delta, "content", &text) ||
            !text_member(delta, "reasoning", &reasoning) ||
            !text_member(delta, "reasoning_content", &reasoning))
          goto out;
        role = json_object_get(delta, "role") != NULL;
      }
      if (!text_member(ch, "text", &text))
        goto out;
      text += reasoning;
      if (text > 0)
        out->text_choices++;
      else if (role)
        out->role_only = true;
      out->text_bytes += text;
      out->reasoning_bytes += reasoning;
      const json_t *fr = json_object_get(ch, "finish_reason");
      if (fr != NULL && !json_is_null(fr))
        out->finished = true;
    }
  }
  if (out->text_choices > 0)
    out->role_only = false;

  const json_t *usage = json_object_get(root, "usage");
  if (usage != NULL && !json_is_null(usage)) {
    if (!json_is_object(usage))
      goto out;
    if (!usage_int(usage, "prompt_tokens", &out->prompt_tokens) ||
        !usage_int(usage, "completion_tokens", &out->completion_tokens))
      goto out;
    out->has_usage = out->completion_tokens >= 0;
  }
  st = TB_OAI_OK;
out:
  json_decref(root);
  return st;
}
