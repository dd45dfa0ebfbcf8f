/* Unit tests: tb_convo, one conversation of a multi-turn workload.  Each
 * turn's body carries the history in order (system, user, assistant, ...,
 * the new user message) with the answer exactly as streamed: content
 * deltas joined, escapes decoded, reasoning and usage-only chunks left out;
 * an answer over its cap fails; the bytes held are counted.  (Against the
 * simulator, turn by turn: tests/integration/test_rate.py.) */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdlib.h>
#include <string.h>

#include "engine/tb_convo.h"

/* The messages of a body, checked against want (role, content pairs). */
static void
check_body(const char *body, const char *const *want, size_t n, int64_t max_tokens)
{
  json_error_t e;
  json_t *b = json_loads(body, 0, &e);
  assert_non_null(b);
  assert_int_equal(json_integer_value(json_object_get(b, "max_tokens")), max_tokens);
  assert_true(json_is_true(json_object_get(b, "stream")));
  assert_string_equal(json_string_value(json_object_get(b, "model")), "m");
  const json_t *ms = json_object_get(b, "messages");
  assert_int_equal(json_array_size(ms), n / 2);
  for (size_t i = 0; i < n / 2; i++) {
    const json_t *m = json_array_get(ms, i);
    assert_string_equal(json_string_value(json_object_get(m, "role")), want[2 * i]);
    assert_string_equal(json_string_value(json_object_get(m, "content")), want[2 * i + 1]);
  }
  json_decref(b);
}

static void
take(struct tb_convo *cv, const char *chunk)
{
  assert_true(tb_convo_take(cv, chunk, strlen(chunk)));
}

static void
test_turns(void **state)
{
  (void)state;
  struct tb_convo cv;
  size_t total = 7; /* another conversation's bytes, in a cell's sum */
  tb_convo_init(&cv, "be brief", &total);
  char *b1 = tb_convo_next(&cv, "m", "hello RQ1", 32);
  const char *w1[] = { "system", "be brief", "user", "hello RQ1" };
  check_body(b1, w1, TB_ARRAY_LEN(w1), 32);
  free(b1);
  /* a stream: role chunk, reasoning, content with escapes, usage, [DONE] */
  take(&cv, "{\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":\"\"}}]}");
  take(&cv, "{\"choices\":[{\"index\":0,\"delta\":{\"reasoning_content\":\"hmm\"}}]}");
  take(&cv, "{\"choices\":[{\"index\":0,\"delta\":{\"content\":\" fast\"}}]}");
  take(&cv, "{\"choices\":[{\"index\":0,\"delta\":{\"content\":\" \\\"q\\\"\\u00e9\\n\"}}]}");
  take(&cv, "{\"choices\":[],\"usage\":{\"prompt_tokens\":9,\"completion_tokens\":3}}");
  take(&cv, "[DONE]");
  take(&cv, "not json, \"content\" inside"); /* the stream's reader judges it */
  tb_convo_answered(&cv);
  char *b2 = tb_convo_next(&cv, "m", "again", 7);
  const char *w2[] = { "system",    "be brief",  "user",
                       "hello RQ1", "assistant", " fast \"q\"\xc3\xa9\n",
                       "user",      "again" };
  check_body(b2, w2, TB_ARRAY_LEN(w2), 7);
  free(b2);
  /* an empty answer is still a turn of the history */
  tb_convo_answered(&cv);
  char *b3 = tb_convo_next(&cv, "m", "third", 7);
  const char *w3[] = { "system",    "be brief",  "user",
                       "hello RQ1", "assistant", " fast \"q\"\xc3\xa9\n",
                       "user",      "again",     "assistant",
                       "",          "user",      "third" };
  check_body(b3, w3, TB_ARRAY_LEN(w3), 7);
  free(b3);
  /* bytes: every content held */
  assert_int_equal(tb_convo_bytes(&cv), strlen("be brief") + strlen("hello RQ1") +
                                          strlen(" fast \"q\"\xc3\xa9\n") + strlen("again") +
                                          strlen("third"));
  assert_int_equal(total, 7 + tb_convo_bytes(&cv)); /* the sum kept with it */
  tb_convo_free(&cv);
  assert_int_equal(total, 7);
}

static void
test_no_system_and_cap(void **state)
{
  (void)state;
  struct tb_convo cv;
  tb_convo_init(&cv, NULL, NULL);
  char *b = tb_convo_next(&cv, "m", "x", 1);
  const char *w[] = { "user", "x" };
  check_body(b, w, TB_ARRAY_LEN(w), 1);
  free(b);
  assert_int_equal(cv.amax, TB_CONVO_ANSWER_MIN); /* 1 token: the floor */
  /* an answer over its cap fails the turn; nothing past the cap is kept */
  size_t piece = 1000;
  char *chunk = malloc(piece + 64);
  int n = snprintf(chunk, 64, "{\"choices\":[{\"delta\":{\"content\":\"");
  memset(chunk + n, 'a', piece);
  memcpy(chunk + n + piece, "\"}}]}", sizeof "\"}}]}");
  size_t took = 0;
  bool ok = true;
  while (ok && took < 2 * TB_CONVO_ANSWER_MIN) {
    ok = tb_convo_take(&cv, chunk, strlen(chunk));
    if (ok)
      took += piece;
  }
  assert_false(ok);
  assert_true(took <= TB_CONVO_ANSWER_MIN && took + piece > TB_CONVO_ANSWER_MIN);
  assert_int_equal(cv.alen, took);
  free(chunk);
  /* a larger turn gets a larger cap: 64 bytes a token */
  b = tb_convo_next(&cv, "m", "y", 4096);
  free(b);
  assert_int_equal(cv.amax, 4096u * TB_CONVO_BYTES_PER_TOKEN);
  assert_int_equal(cv.alen, 0);
  tb_convo_free(&cv);
}

int
main(void)
{
  const struct CMUnitTest tests[] = {
    cmocka_unit_test(test_turns),
    cmocka_unit_test(test_no_system_and_cap),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
