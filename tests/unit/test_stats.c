/*
 * Unit tests for tb_stats' uncertainty: batch-means standard errors,
 * Student's t, intervals and the order-statistic interval of a median, on
 * data whose answers are known.
 *
 * Reference computation (Python 3 standard library, no SciPy):
 *  - t_{0.975, df}: bisection on the t CDF, the density integrated by
 *    Simpson's rule (20,000 panels): df 1 -> 12.706205, 2 -> 4.302653,
 *    10 -> 2.228139, 30 -> 2.042272, 40 -> 2.021075, 60 -> 2.000298,
 *    120 -> 1.979930 (the same as the printed tables).
 *  - median intervals: the largest j with sum_{i<j} C(n,i)/2^n <= 0.025 by
 *    exact integer binomials: n = 6 -> ranks 1..6, 10 -> 2..9,
 *    20 -> 6..15, 100 -> 40..61, 2000 -> 956..1045.
 *  - batch means by hand: 1..9 -> batches of 3 with means 2, 5, 8, sd 3,
 *    SE 3/sqrt(3) = 1.7320508, df 2; the blocky series
 *    1,1,1,1,3,3,3,3,1,1,1,1,3,3,3,3 -> batch means 1,3,1,3, SE
 *    statistics.stdev([1,3,1,3]) / 2 = 0.5773503, where the naive
 *    stdev(x) / sqrt(16) = 0.2581989 would claim half the error.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <math.h>
#include <stdlib.h>

#include "tb_stats.h"

#define NEAR(a, b, eps) assert_true(fabs((a) - (b)) < (eps))

static void
test_t975(void **state)
{
  (void)state;
  assert_true(isnan(tb_stats_t975(0)));
  NEAR(tb_stats_t975(1), 12.706205, 1e-5);
  NEAR(tb_stats_t975(2), 4.302653, 1e-5);
  NEAR(tb_stats_t975(10), 2.228139, 1e-5);
  NEAR(tb_stats_t975(30), 2.042272, 1e-5);
  /* larger df, toward the normal 1.959964 */
  NEAR(tb_stats_t975(40), 2.021075, 2e-5);
  NEAR(tb_stats_t975(60), 2.000298, 2e-5);
  NEAR(tb_stats_t975(120), 1.979930, 2e-5);
  assert_true(tb_stats_t975(100000) > 1.95996 && tb_stats_t975(100000) < 1.9600);
}

static void
test_mean_sd(void **state)
{
  (void)state;
  double x[] = { 2, 4, 4, 4, 5, 5, 7, 9 };
  NEAR(tb_stats_mean(x, 8), 5.0, 1e-12);
  NEAR(tb_stats_sd(x, 8), sqrt(32.0 / 7.0), 1e-12);
  assert_true(isnan(tb_stats_mean(x, 0)));
  assert_true(isnan(tb_stats_sd(x, 1)));
}

static void
test_batch_se(void **state)
{
  (void)state;
  double x[16];
  unsigned df = 99;
  for (int i = 0; i < 10; i++)
    x[i] = i + 1;
  NEAR(tb_stats_batch_se(x, 9, &df), 1.7320508, 1e-6);
  assert_int_equal(df, 2);
  /* slice 10 does not fit a batch of 3: the same three batches */
  NEAR(tb_stats_batch_se(x, 10, &df), 1.7320508, 1e-6);
  double lo, hi;
  assert_true(tb_stats_ci95(5.0, 1.7320508, 2, &lo, &hi));
  NEAR(lo, 5.0 - 4.302653 * 1.7320508, 1e-4);
  NEAR(hi, 5.0 + 4.302653 * 1.7320508, 1e-4);
  /* correlated blocks: batch means see the error the naive SE hides */
  for (int i = 0; i < 16; i++)
    x[i] = (i / 4) % 2 ? 3 : 1;
  NEAR(tb_stats_batch_se(x, 16, &df), 0.5773503, 1e-6);
  assert_int_equal(df, 3);
  double naive = tb_stats_sd(x, 16) / 4;
  NEAR(naive, 0.2581989, 1e-6);
  /* a steady series: no error */
  for (int i = 0; i < 16; i++)
    x[i] = 100;
  NEAR(tb_stats_batch_se(x, 16, &df), 0.0, 1e-12);
  /* too short for two batches */
  assert_true(isnan(tb_stats_batch_se(x, 1, &df)));
  assert_int_equal(df, 0);
  assert_false(tb_stats_ci95(5.0, NAN, 2, &lo, &hi));
  assert_true(isnan(lo) && isnan(hi));
  assert_false(tb_stats_ci95(5.0, 1.0, 0, &lo, &hi));
}

static void
median_ranks(size_t n, double want_lo, double want_hi)
{
  struct tb_stats s = {0};
  /* the values n..1 (reversed, so the function must sort): rank r holds r */
  for (size_t i = n; i >= 1; i--)
    tb_stats_add(&s, (int64_t)i);
  double lo, hi;
  assert_true(tb_stats_median_ci95(&s, &lo, &hi));
  NEAR(lo, want_lo, 1e-12);
  NEAR(hi, want_hi, 1e-12);
  tb_stats_free(&s);
}

static void
test_median_ci(void **state)
{
  (void)state;
  median_ranks(6, 1, 6);
  median_ranks(10, 2, 9);
  median_ranks(20, 6, 15);
  median_ranks(100, 40, 61);
  median_ranks(2000, 956, 1045); /* 2^-2000 underflows: log space */
  struct tb_stats s = {0};
  for (int i = 0; i < 5; i++)
    tb_stats_add(&s, i);
  double lo, hi;
  assert_false(tb_stats_median_ci95(&s, &lo, &hi));
  assert_true(isnan(lo) && isnan(hi));
  tb_stats_free(&s);
}

int
main(void)
{
  const struct CMUnitTest tests[] = {
    cmocka_unit_test(test_t975),
    cmocka_unit_test(test_mean_sd),
    cmocka_unit_test(test_batch_se),
    cmocka_unit_test(test_median_ci),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
