/* Unit tests for tb_srvtime: a cell's figures by the server's own clock,
 * and the comparisons that hold tokbench to them. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <math.h>
#include <string.h>

#include "base/tb_json.h"
#include "result/tb_srvtime.h"

static double
pct(const json_t *o, const char *k, const char *p)
{
  return tb_json_num(json_object_get(o, k), p);
}

static void
test_figures(void **state)
{
  (void)state;
  struct tb_srvtime t = { .source = "llama.cpp timings" };
  assert_null(tb_srvtime_json(&t));
  /* ten requests: prompt 100 tokens in 10 + i ms, 50 output tokens at
   * 5 + i/10 ms, tokbench's TTFT 2 ms after the server's prompt time;
   * tokbench counted one request's tokens differently */
  for (int i = 0; i < 10; i++) {
    struct tb_srvtime_req r = { .cache_n = 3,
                                .prompt_n = 100,
                                .prompt_ms = 10 + i,
                                .predicted_n = 50,
                                .predicted_per_token_ms = 5 + i / 10.0,
                                .ttft_ms = 12 + i,
                                .tokens = i == 4 ? 49 : 50 };
    tb_srvtime_add(&t, &r);
  }
  /* a request with no timings does not count; one output token has no TPOT */
  struct tb_srvtime_req none = { .cache_n = NAN,
                                 .prompt_n = NAN,
                                 .prompt_ms = NAN,
                                 .predicted_n = NAN,
                                 .predicted_per_token_ms = NAN,
                                 .ttft_ms = 5,
                                 .tokens = 7 };
  tb_srvtime_add(&t, &none);
  struct tb_srvtime_req one = { .cache_n = NAN,
                                .prompt_n = 100,
                                .prompt_ms = 14.5,
                                .predicted_n = 1,
                                .predicted_per_token_ms = 0,
                                .ttft_ms = NAN,
                                .tokens = 1 };
  tb_srvtime_add(&t, &one);
  json_t *j = tb_srvtime_json(&t);
  assert_non_null(j);
  assert_string_equal(tb_json_str(j, "source"), "llama.cpp timings");
  assert_int_equal(json_integer_value(json_object_get(j, "requests")), 11);
  assert_int_equal(json_integer_value(json_object_get(j, "tokens_equal")), 10);
  assert_int_equal(json_integer_value(json_object_get(j, "cache_n")), 30);
  assert_int_equal(json_integer_value(json_object_get(j, "prompt_n")), 1100);
  /* prompt ms 10..19 and 14.5: the median of 11 is 14.5 */
  assert_true(fabs(pct(j, "prompt_ms", "p50") - 14.5) < 1e-9);
  /* prompt tokens/s: 100 / (prompt_ms / 1000) */
  assert_true(fabs(pct(j, "prompt_tps", "p50") - round(100 / 0.0145 * 1e4) / 1e4) < 1e-3);
  /* TPOT of the ten (5.0 .. 5.9): p50 5.45 */
  assert_true(fabs(pct(j, "tpot_ms", "p50") - 5.45) < 1e-9);
  assert_true(fabs(pct(j, "predicted_n", "p50") - 50) < 1e-9);
  /* TTFT minus the server's prompt time: 2 ms for each of the ten */
  assert_true(fabs(pct(j, "ttft_minus_prompt_ms", "p50") - 2) < 1e-9);
  assert_true(fabs(pct(j, "ttft_minus_prompt_ms", "p90") - 2) < 1e-9);
  assert_true(fabs(pct(j, "ttft_minus_prompt_ms", "min") - 2) < 1e-9);
  json_decref(j);
  tb_srvtime_free(&t);
  assert_int_equal(t.requests, 0);
}

/* Issue 34, item 7: an older llama.cpp's predicted_per_token_ms is its
 * n - 1 token intervals over n tokens.  A server whose tokens come exactly
 * every 0.7 ms, 20 a request: predicted_ms 13.3, and it says 19 x 0.7 / 20
 * = 0.665 ms; tokbench's TPOT, its first to last token over 19, is 0.7 ms:
 * +5.26% against that figure, 0 against its span per interval,
 * predicted_ms / 19. */
static void
test_tpot_like_for_like(void **state)
{
  (void)state;
  struct tb_srvtime t = { .source = TB_SRVTIME_LLAMACPP };
  for (int i = 0; i < 9; i++) {
    double ours = 0.7 * (1 + 0.001 * (i - 4)); /* -0.4% .. +0.4% */
    struct tb_srvtime_req r = { .cache_n = 0,
                                .prompt_n = 10,
                                .prompt_ms = 2,
                                .predicted_n = 20,
                                .predicted_ms = 19 * 0.7,
                                .predicted_per_token_ms = 19 * 0.7 / 20,
                                .ttft_ms = 3,
                                .tpot_ms = ours,
                                .tokens = 20 };
    tb_srvtime_add(&t, &r);
  }
  /* one without tokbench's TPOT (a single chunk): in the span, not the diff */
  struct tb_srvtime_req lone = { .prompt_n = 10,
                                 .prompt_ms = 2,
                                 .predicted_n = 20,
                                 .predicted_ms = 19 * 0.7,
                                 .predicted_per_token_ms = 19 * 0.7 / 20,
                                 .ttft_ms = 3,
                                 .tpot_ms = NAN,
                                 .tokens = 20 };
  tb_srvtime_add(&t, &lone);
  json_t *j = tb_srvtime_json(&t);
  assert_true(fabs(pct(j, "tpot_ms", "p50") - 0.665) < 1e-4);
  assert_true(fabs(pct(j, "tpot_span_ms", "p50") - 0.7) < 1e-4);
  assert_true(fabs(pct(j, "tpot_vs_server_pct", "p50") - 0.0) < 1e-3);
  assert_true(fabs(pct(j, "tpot_vs_server_pct", "p90") - 0.32) < 1e-3);
  /* against the server's own figure it would read +5.26% */
  assert_true(fabs(0.7 / pct(j, "tpot_ms", "p50") - 1.0526) < 1e-3);
  json_decref(j);
  /* merged with another cell's: the union (tb_srvtime_merge) */
  struct tb_srvtime u = { 0 };
  tb_srvtime_merge(&u, &t);
  tb_srvtime_merge(&u, &t);
  assert_int_equal(u.requests, 20);
  assert_int_equal(u.diff_ppm.n, 18);
  assert_int_equal(u.span_us.n, 20);
  /* a server that gives no predicted_ms: no span, no comparison */
  struct tb_srvtime v = { 0 };
  struct tb_srvtime_req nospan = { .prompt_n = 10,
                                   .prompt_ms = 2,
                                   .predicted_n = 20,
                                   .predicted_ms = NAN,
                                   .predicted_per_token_ms = 0.7,
                                   .ttft_ms = 3,
                                   .tpot_ms = 0.7,
                                   .tokens = 20 };
  tb_srvtime_add(&v, &nospan);
  assert_int_equal(v.span_us.n, 0);
  assert_int_equal(v.diff_ppm.n, 0);
  tb_srvtime_free(&v);
  tb_srvtime_free(&u);
  tb_srvtime_free(&t);
}

int
main(void)
{
  const struct CMUnitTest tests[] = {
    cmocka_unit_test(test_figures),
    cmocka_unit_test(test_tpot_like_for_like),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
