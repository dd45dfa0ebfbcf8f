/* Unit tests: tb_engine's pure rules (the top decode context the seeds
 * choose, which the plan applies: tb_plan_top_context).  tb_stats,
 * tb_prompt and tb_plan have their own test files. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "spec/tb_plan.h"

static void
test_top_context(void **state)
{
  (void)state;
  /* the documented example: 262144 - 4096 - 64 = 257984 -> 251 * 1024 */
  assert_int_equal(tb_plan_top_context(262144, 4096), 257024);
  /* exactly one step of room, and one byte short of it */
  assert_int_equal(tb_plan_top_context(1024 + 4096 + TB_PLAN_CTX_MARGIN, 4096), 1024);
  assert_int_equal(tb_plan_top_context(2047 + 4096 + TB_PLAN_CTX_MARGIN, 4096), 1024);
  assert_int_equal(tb_plan_top_context(2048 + 4096 + TB_PLAN_CTX_MARGIN, 4096), 2048);
  /* less than 1024 of room: the room itself (a small model still runs) */
  assert_int_equal(tb_plan_top_context(1023 + 4096 + TB_PLAN_CTX_MARGIN, 4096), 1023);
  assert_int_equal(tb_plan_top_context(1 + 16 + TB_PLAN_CTX_MARGIN, 16), 1);
  /* no room at all */
  assert_true(tb_plan_top_context(4096 + TB_PLAN_CTX_MARGIN, 4096) <= 0);
  assert_true(tb_plan_top_context(1000, 4096) <= 0);
  assert_true(tb_plan_top_context(-1, 4096) <= 0); /* unknown length */
  assert_true(tb_plan_top_context(0, 0) <= 0);
  /* max_output 0 */
  assert_int_equal(tb_plan_top_context(8192 + TB_PLAN_CTX_MARGIN, 0), 8192);
}

int
main(void)
{
  const struct CMUnitTest tests[] = {
    cmocka_unit_test(test_top_context),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
