/* Unit tests for tb_oai: content, reasoning, role-only, usage, errors. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <math.h>
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
  assert_int_equal(
    parse("{\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":\"\"}}]}", &c),
    TB_OAI_OK);
  assert_true(c.role_only);
  assert_int_equal(c.text_choices, 0);
  assert_int_equal(
    parse("{\"choices\":[{\"delta\":{\"content\":\"hi\"},\"finish_reason\":null}],\"usage\":{"
          "\"prompt_tokens\":10,\"completion_tokens\":3,\"total_tokens\":13}}",
          &c),
    TB_OAI_OK);
  assert_int_equal(c.text_choices, 1);
  assert_true(c.has_usage);
  assert_int_equal(c.completion_tokens, 3);
  assert_int_equal(c.prompt_tokens, 10);
  assert_false(c.finished);
  assert_int_equal(parse("{\"choices\":[{\"delta\":{\"reasoning_content\":\"hmm\"}}]}", &c),
                   TB_OAI_OK);
  assert_int_equal(c.text_choices, 1);
  assert_int_equal(c.reasoning_bytes, 3);
  assert_false(c.has_usage);
  assert_int_equal(parse("{\"choices\":[{\"delta\":{\"reasoning\":\"x\",\"content\":null}}]}", &c),
                   TB_OAI_OK);
  assert_int_equal(c.text_choices, 1);
  assert_int_equal(
    parse("{\"choices\":[],\"usage\":{\"prompt_tokens\":5,\"completion_tokens\":9}}", &c),
    TB_OAI_OK);
  assert_int_equal(c.n_choices, 0);
  assert_int_equal(c.completion_tokens, 9);
  assert_int_equal(parse("{\"choices\":[{\"text\":\"abc\",\"finish_reason\":\"length\"}]}", &c),
                   TB_OAI_OK);
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

/* llama.cpp's final chunk (captured from llama-server b11669-Debian:
 * tests/fixtures/servers/llamacpp-b11669/stream.txt): usage, and the
 * server's own timings, read by the reference reader; a stream keeps the
 * last ones.  Members of another shape are left NAN, not a fault. */
static void
test_timings(void **state)
{
  (void)state;
  static const char *final =
    "{\"choices\":[],\"object\":\"chat.completion.chunk\",\"usage\":{\"completion_tokens\":3,"
    "\"prompt_tokens\":28,\"total_tokens\":31,\"prompt_tokens_details\":{\"cached_tokens\":3}},"
    "\"timings\":{\"cache_n\":3,\"prompt_n\":25,\"prompt_ms\":25.98,"
    "\"prompt_per_token_ms\":1.0392000000000001,\"prompt_per_second\":962.278675904542,"
    "\"predicted_n\":3,\"predicted_ms\":8.806,\"predicted_per_token_ms\":4.403,"
    "\"predicted_per_second\":227.11787417669774}}";
  struct tb_oai_chunk c;
  assert_false(tb_oai_scan_chunk(final, strlen(final), &c)); /* the reference reads it */
  assert_int_equal(parse(final, &c), TB_OAI_OK);
  assert_true(c.has_timings && c.has_usage);
  assert_true(c.timings.cache_n == 3 && c.timings.prompt_n == 25 && c.timings.predicted_n == 3);
  assert_true(fabs(c.timings.prompt_ms - 25.98) < 1e-9);
  assert_true(fabs(c.timings.predicted_ms - 8.806) < 1e-9);
  assert_true(fabs(c.timings.predicted_per_token_ms - 4.403) < 1e-9);
  assert_int_equal(c.cached_tokens, 3);
  /* a chunk without timings has none; odd members are absent, not faults */
  assert_int_equal(parse("{\"choices\":[{\"delta\":{\"content\":\"x\"}}]}", &c), TB_OAI_OK);
  assert_false(c.has_timings);
  assert_true(isnan(c.timings.prompt_ms));
  assert_int_equal(parse("{\"choices\":[],\"timings\":{\"prompt_ms\":\"fast\",\"predicted_n\":-2,"
                         "\"prompt_n\":7}}",
                         &c),
                   TB_OAI_OK);
  assert_true(c.has_timings && isnan(c.timings.prompt_ms) && isnan(c.timings.predicted_n));
  assert_true(c.timings.prompt_n == 7);
  assert_int_equal(parse("{\"choices\":[],\"timings\":[1,2]}", &c), TB_OAI_OK);
  assert_false(c.has_timings);
  /* the stream's count keeps them */
  struct tb_oai_count n = { .prompt_tokens = -1 };
  int64_t d;
  char why[128];
  assert_true(tb_oai_count_event(&n, final, strlen(final), &d, why, sizeof why));
  assert_true(n.saw_timings && n.timings.predicted_n == 3 && n.saw_cached);
  assert_int_equal(n.cached_tokens, 3);
}

int
main(void)
{
  const struct CMUnitTest tests[] = {
    cmocka_unit_test(test_kinds),
    cmocka_unit_test(test_malformed),
    cmocka_unit_test(test_count_events),
    cmocka_unit_test(test_timings),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
