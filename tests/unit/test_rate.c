/* Unit tests: tb_rate's pure parts.  The sweep's search (tb_plan_sweep_next)
 * on known outcomes: doubling from min_rps until a rate fails, then bisection
 * to step_rps, within max_probes; the rates it stops at.  (Rate cells against
 * the simulator: tests/integration/test_rate.py.) */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <math.h>

#include "spec/tb_plan.h"
#include "base/tb_util.h"

/* Runs the search against a server that passes every rate <= knee; the
 * probes into rates[], their count returned, *found / *hi as the search
 * ends. */
static size_t
search(const struct tb_spec_sweep *sw, double knee, double *rates, double *found, double *hi)
{
  bool pass[64];
  size_t n = 0;
  for (;;) {
    double next = tb_plan_sweep_next(sw, rates, pass, n, found, hi);
    if (next <= 0)
      break;
    assert_true(n < 64);
    rates[n] = next;
    pass[n] = next <= knee;
    n++;
  }
  return n;
}

static void
test_sweep_path(void **state)
{
  (void)state;
  struct tb_spec_sweep sw = {
    .attainment_pct = 100, .min_rps = 8, .max_rps = 40, .step_rps = 1, .max_probes = 12
  };
  double rates[64], found, hi;
  size_t n = search(&sw, 19.49, rates, &found, &hi);
  const double want[] = { 8, 16, 32, 24, 20, 18, 19 };
  assert_int_equal(n, 7);
  for (size_t i = 0; i < n; i++)
    assert_true(rates[i] == want[i]);
  assert_true(found == 19 && hi == 20);
}

static void
test_sweep_ends(void **state)
{
  (void)state;
  struct tb_spec_sweep sw = {
    .attainment_pct = 90, .min_rps = 1, .max_rps = 50, .step_rps = 0.5, .max_probes = 16
  };
  double rates[64], found, hi;
  /* even the lowest rate fails: one probe, nothing found */
  assert_int_equal(search(&sw, 0.5, rates, &found, &hi), 1);
  assert_true(found == 0 && hi == 1);
  /* every rate passes: doubling stops at max_rps */
  size_t n = search(&sw, 1000, rates, &found, &hi);
  assert_true(rates[n - 1] == 50 && found == 50 && hi == 0);
  assert_int_equal(n, 7); /* 1 2 4 8 16 32 50 */
  /* out of probes: the best so far */
  sw.max_probes = 4;
  n = search(&sw, 5, rates, &found, &hi);
  assert_int_equal(n, 4); /* 1 2 4 8 */
  assert_true(found == 4 && hi == 8);
  /* the answer is within one step of the knee wherever it lies */
  sw.max_probes = 64;
  for (double knee = 1.2; knee < 49; knee += 1.7) {
    n = search(&sw, knee, rates, &found, &hi);
    assert_true(found <= knee && knee - found <= sw.step_rps + 1e-9);
    assert_true(hi > knee && hi - found <= sw.step_rps + 1e-9);
  }
}

/* Over concurrency the search runs on users: whole numbers from
 * min_concurrency, doubling to max_concurrency, bisection to
 * step_concurrency; the rps bounds play no part. */
static void
test_sweep_concurrency(void **state)
{
  (void)state;
  struct tb_spec_sweep sw = { .attainment_pct = 90,
                              .over = "concurrency",
                              .min_rps = 1000,
                              .max_rps = 2000,
                              .step_rps = 0.01,
                              .min_concurrency = 1,
                              .max_concurrency = 256,
                              .step_concurrency = 1,
                              .max_probes = 20 };
  double v[64], found, hi;
  size_t n = search(&sw, 12, v, &found, &hi);
  const double want[] = { 1, 2, 4, 8, 16, 12, 14, 13 };
  assert_int_equal(n, TB_ARRAY_LEN(want));
  for (size_t i = 0; i < n; i++)
    assert_true(v[i] == want[i]);
  assert_true(found == 12 && hi == 13);
  for (double knee = 1; knee < 200; knee += 7) { /* every probe a whole number */
    n = search(&sw, knee, v, &found, &hi);
    for (size_t i = 0; i < n; i++)
      assert_true(v[i] == floor(v[i]) && v[i] >= 1 && v[i] <= 256);
    assert_true(found == knee && hi == knee + 1);
  }
  sw.step_concurrency = 4; /* a coarser answer: within one step */
  n = search(&sw, 37, v, &found, &hi);
  assert_true(found <= 37 && 37 - found < 4 && hi > 37 && hi - found <= 4);
}

int
main(void)
{
  const struct CMUnitTest tests[] = {
    cmocka_unit_test(test_sweep_path),
    cmocka_unit_test(test_sweep_ends),
    cmocka_unit_test(test_sweep_concurrency),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
