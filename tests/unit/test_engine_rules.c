/* Unit tests for tb_engine's pure rules and tb_stats. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "tb_engine.h"
#include "tb_prompt.h"
#include "tb_stats.h"

static void
test_top_context(void **state)
{
  assert_int_equal(tb_engine_top_context(262144, 4096), 257024);
  assert_true(tb_engine_top_context(1000, 4096) <= 0);
}

static void
test_stats(void **state)
{
  struct tb_stats s = {0};
  assert_true(isnan(tb_stats_quantile(&s, 0.5)));
  for (int i = 10; i >= 1; i--)
    tb_stats_add(&s, i);
  assert_true(tb_stats_quantile(&s, 0.5) == 5.5);
  assert_true(fabs(tb_stats_quantile(&s, 0.9) - 9.1) < 1e-9);
  assert_true(tb_stats_quantile(&s, 1.0) == 10);
  tb_stats_free(&s);
}

static void
test_prompt_text(void **state)
{
  char *t = tb_prompt_text("[BENCH_r_CTX_8192]", 3);
  assert_true(strncmp(t, "[BENCH_r_CTX_8192] ", 19) == 0);
  int words = 0;
  for (char *p = t; *p; p++)
    words += *p == ' ';
  assert_int_equal(words, 3);
  free(t);
}

int
main(void)
{
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_top_context),
      cmocka_unit_test(test_stats),
      cmocka_unit_test(test_prompt_text),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
