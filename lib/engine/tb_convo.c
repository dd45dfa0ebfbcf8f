/*
 * tb_convo: see tb_convo.h.
 *
 * The history is a jansson array, dumped whole into each turn's body: a
 * turn's cost is O(its prompt), once per request, never per token.  The
 * answer is a growing buffer (tb_xgrow) fed from each chunk's
 * delta.content, read with jansson: the chunk scanner of the hot path
 * (tb_oai) counts tokens and does not decode strings, and decoding escapes
 * by hand is not worth a second JSON string reader.
 */
#include "engine/tb_convo.h"

#include <stdlib.h>
#include <string.h>

/* The text held grows by add and shrinks by sub, in the total too. */
static void
account(struct tb_convo *cv, size_t add, size_t sub)
{
  cv->bytes = cv->bytes + add - sub;
  if (cv->total != NULL)
    *cv->total = *cv->total + add - sub;
}

void
tb_convo_init(struct tb_convo *cv, const char *system, size_t *total)
{
  memset(cv, 0, sizeof *cv);
  cv->total = total;
  cv->messages = json_array();
  if (system != NULL) {
    json_array_append_new(cv->messages,
                          json_pack("{s:s, s:s}", "role", "system", "content", system));
    account(cv, strlen(system), 0);
  }
}

void
tb_convo_free(struct tb_convo *cv)
{
  account(cv, 0, cv->bytes);
  json_decref(cv->messages);
  free(cv->answer);
  memset(cv, 0, sizeof *cv);
}

char *
tb_convo_next(struct tb_convo *cv, const char *model, const char *text, int64_t max_tokens)
{
  json_array_append_new(cv->messages, json_pack("{s:s, s:s}", "role", "user", "content", text));
  account(cv, strlen(text), cv->alen); /* an answer never answered goes */
  cv->alen = 0;
  uint64_t cap = (uint64_t)(max_tokens > 0 ? max_tokens : 1) * TB_CONVO_BYTES_PER_TOKEN;
  cv->amax = cap < TB_CONVO_ANSWER_MIN ? TB_CONVO_ANSWER_MIN : (size_t)cap;
  json_t *b =
    json_pack("{s:s, s:O, s:I, s:b, s:b, s:{s:b, s:b}}", "model", model, "messages", cv->messages,
              "max_tokens", (json_int_t)max_tokens, "stream", 1, "ignore_eos", 1, "stream_options",
              "include_usage", 1, "continuous_usage_stats", 1);
  if (b == NULL)
    return NULL;
  char *body = json_dumps(b, JSON_COMPACT);
  json_decref(b);
  return body;
}

bool
tb_convo_take(struct tb_convo *cv, const char *data, size_t len)
{
  /* most chunks carry content; a usage-only one or [DONE] has none */
  if (len < 2 || data[0] != '{' || memmem(data, len, "\"content\"", 9) == NULL)
    return true;
  json_t *o = json_loadb(data, len, 0, NULL);
  if (o == NULL)
    return true;
  const json_t *c = json_object_get(
    json_object_get(json_array_get(json_object_get(o, "choices"), 0), "delta"), "content");
  bool ok = true;
  if (json_is_string(c)) {
    size_t n = json_string_length(c);
    if (cv->alen + n > cv->amax) {
      ok = false;
    } else {
      tb_xgrow(&cv->answer, &cv->acap, cv->alen + n + 1, 256);
      memcpy(cv->answer + cv->alen, json_string_value(c), n);
      cv->alen += n;
      cv->answer[cv->alen] = '\0';
      account(cv, n, 0);
    }
  }
  json_decref(o);
  return ok;
}

void
tb_convo_answered(struct tb_convo *cv)
{
  json_array_append_new(cv->messages, json_pack("{s:s, s:s%}", "role", "assistant", "content",
                                                cv->answer != NULL ? cv->answer : "", cv->alen));
  cv->alen = 0; /* its bytes stay counted: they are in the history now */
}

size_t
tb_convo_bytes(const struct tb_convo *cv)
{
  return cv->bytes;
}
