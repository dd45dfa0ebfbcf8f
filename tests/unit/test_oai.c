/* Unit tests for tb_oai: content, reasoning, role-only, usage, errors. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <string.h>

#include "net/tb_oai.h"

static enum tb_oai_status
parse(const char *s, struct tb_oai_chunk *c)
{
  return tb_oai_parse_chunk(s, strlen(s), c);
}

static void
test_kinds(void **state)
{
  struct tb_oai_chunk c;
  assert_int_equal(parse("[DONE]", &c), TB_OAI_DONE);
  assert_int_equal(parse("{\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":\"\"}}]}", &c), TB_OAI_OK);
  assert_true(c.role_only);
  assert_int_equal(c.text_choices, 0);
  assert_int_equal(parse("{\"choices\":[{\"delta\":{\"content\":\"hi\"},\"finish_reason\":null}],\"usage\":{\"prompt_tokens\":10,\"completion_tokens\":3,\"total_tokens\":13}}", &c), TB_OAI_OK);
  assert_int_equal(c.text_choices, 1);
  assert_true(c.has_usage);
  assert_int_equal(c.completion_tokens, 3);
  assert_int_equal(c.prompt_tokens, 10);
  assert_false(c.finished);
  assert_int_equal(parse("{\"choices\":[{\"delta\":{\"reasoning_content\":\"hmm\"}}]}", &c), TB_OAI_OK);
  assert_int_equal(c.text_choices, 1);
  assert_int_equal(c.reasoning_bytes, 3);
  assert_false(c.has_usage);
  assert_int_equal(parse("{\"choices\":[{\"delta\":{\"reasoning\":\"x\",\"content\":null}}]}", &c), TB_OAI_OK);
  assert_int_equal(c.text_choices, 1);
  assert_int_equal(parse("{\"choices\":[],\"usage\":{\"prompt_tokens\":5,\"completion_tokens\":9}}", &c), TB_OAI_OK);
  assert_int_equal(c.n_choices, 0);
  assert_int_equal(c.completion_tokens, 9);
  assert_int_equal(parse("{\"choices\":[{\"text\":\"abc\",\"finish_reason\":\"length\"}]}", &c), TB_OAI_OK);
  assert_int_equal(c.text_choices, 1);
  assert_true(c.finished);
  assert_int_equal(parse("{\"error\":{\"message\":\"boom\"}}", &c), TB_OAI_OK);
  assert_true(c.is_error);
  assert_string_equal(c.error, "boom");
}

static void
test_malformed(void **state)
{
  struct tb_oai_chunk c;
  assert_int_equal(parse("{\"choices\":[{\"delta\":{\"content\":\"hi\"}}", &c), TB_OAI_MALFORMED);
  assert_int_equal(parse("[1,2]", &c), TB_OAI_MALFORMED);
  assert_int_equal(parse("{\"choices\":3}", &c), TB_OAI_MALFORMED);
  assert_int_equal(parse("{\"choices\":[{\"delta\":{\"content\":5}}]}", &c), TB_OAI_MALFORMED);
  assert_int_equal(parse("{\"usage\":{\"completion_tokens\":-1}}", &c), TB_OAI_MALFORMED);
  assert_int_equal(parse("{\"usage\":{\"completion_tokens\":\"3\"}}", &c), TB_OAI_MALFORMED);
  assert_int_equal(parse("", &c), TB_OAI_MALFORMED);
}

/* A stream's count (tb_oai_count_event, the matrix's and rate cells'):
 * usage deltas, the chunk fallback, [DONE], and the faults. */
static void
test_count_events(void **state)
{
  (void)state;
  struct tb_oai_count st = { .prompt_tokens = -1 };
  int64_t d;
  char why[200];
#define EV(t) tb_oai_count_event(&st, t, strlen(t), &d, why, sizeof why)
  assert_true(EV("{\"choices\":[{\"delta\":{\"role\":\"assistant\",\"content\":\"\"}}],"
                 "\"usage\":{\"prompt_tokens\":12,\"completion_tokens\":0}}"));
  assert_int_equal(d, 0);
  assert_true(EV("{\"choices\":[{\"delta\":{\"content\":\" a b\"}}],"
                 "\"usage\":{\"prompt_tokens\":12,\"completion_tokens\":3}}"));
  assert_int_equal(d, 3); /* a chunk of three (speculative decoding) */
  assert_true(st.saw_usage && !st.chunk_mode && st.prompt_tokens == 12);
  assert_true(EV("{\"choices\":[],\"usage\":{\"prompt_tokens\":12,\"completion_tokens\":4}}"));
  assert_int_equal(d, 1);
  assert_true(st.saw_final_usage);
  assert_false(EV("{\"choices\":[],\"usage\":{\"prompt_tokens\":12,\"completion_tokens\":2}}"));
  assert_non_null(strstr(why, "went backwards (2 after 4)"));
  assert_true(EV("[DONE]"));
  assert_true(st.done && d == 0);
  /* no usage: one token per chunk with text, flagged */
  struct tb_oai_count c2 = { .prompt_tokens = -1 };
  const char *text = "{\"choices\":[{\"delta\":{\"content\":\"x\"}}]}";
  assert_true(tb_oai_count_event(&c2, text, strlen(text), &d, why, sizeof why));
  assert_true(c2.chunk_mode && d == 1);
  assert_false(EV("{\"malformed\": [1, 2, "));
  assert_non_null(strstr(why, "malformed chunk"));
  assert_false(EV("{\"error\":{\"message\":\"boom\"}}"));
  assert_non_null(strstr(why, "error in stream: boom"));
#undef EV
}

int
main(void)
{
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_kinds),
      cmocka_unit_test(test_malformed),
      cmocka_unit_test(test_count_events),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
