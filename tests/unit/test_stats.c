/* Unit tests: tb_stats percentiles against values computed by hand from
 * the definition tb_stats.h names, Hyndman & Fan (1996) definition 7 (the
 * default of R's quantile() and NumPy's percentile(), "linear"):
 * h = (n - 1) q, Q = x[floor h] + (h - floor h) (x[floor h + 1] - x[floor h])
 * on the sorted sample, 0-based.  References used below:
 *  - R: quantile(1:10, c(.5, .9)) is 5.5, 9.1;
 *  - Wikipedia, "Percentile", the C = 1 variant's worked example: of
 *    {15, 20, 35, 40, 50} the 40th percentile is 29 (h = 1.6: 20 + .6*15)
 *    and the 5th is 16 (h = 0.2: 15 + .2*5).
 *
 * The uncertainty (issue 14): batch-means standard errors,
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

#include "base/tb_stats.h"

#define NEAR(a, b) assert_true(fabs((a) - (double)(b)) < 1e-9 * (fabs((double)(b)) + 1))

static void
add_all(struct tb_stats *s, const int64_t *v, size_t n)
{
  for (size_t i = 0; i < n; i++)
    tb_stats_add(s, v[i]);
}

static void
test_empty_and_single(void **state)
{
  (void)state;
  struct tb_stats s = { 0 };
  assert_true(isnan(tb_stats_quantile(&s, 0.5)));
  assert_true(isnan(tb_stats_quantile(&s, 0)));
  assert_true(isnan(tb_stats_quantile(&s, 1)));
  tb_stats_add(&s, 42);
  assert_true(tb_stats_quantile(&s, 0) == 42);
  assert_true(tb_stats_quantile(&s, 0.5) == 42);
  assert_true(tb_stats_quantile(&s, 0.99) == 42);
  assert_true(tb_stats_quantile(&s, 1) == 42);
  tb_stats_free(&s);
  assert_null(s.v);
  assert_int_equal(s.n, 0);
  tb_stats_free(&s); /* twice is harmless */
}

static void
test_r_reference(void **state)
{
  (void)state;
  struct tb_stats s = { 0 };
  for (int i = 10; i >= 1; i--) /* unsorted on purpose */
    tb_stats_add(&s, i);
  NEAR(tb_stats_quantile(&s, 0.5), 5.5); /* the median of an even sample */
  NEAR(tb_stats_quantile(&s, 0.9), 9.1);
  NEAR(tb_stats_quantile(&s, 0.99), 9.91);
  NEAR(tb_stats_quantile(&s, 0.25), 3.25);
  assert_true(tb_stats_quantile(&s, 0) == 1);
  assert_true(tb_stats_quantile(&s, 1.0) == 10);
  tb_stats_free(&s);
}

static void
test_wikipedia_reference(void **state)
{
  (void)state;
  struct tb_stats s = { 0 };
  const int64_t v[] = { 50, 15, 40, 20, 35 };
  add_all(&s, v, 5);
  NEAR(tb_stats_quantile(&s, 0.40), 29);
  NEAR(tb_stats_quantile(&s, 0.05), 16);
  NEAR(tb_stats_quantile(&s, 0.50), 35); /* odd sample: the middle value */
  NEAR(tb_stats_quantile(&s, 0.75), 40); /* h = 3 exactly */
  NEAR(tb_stats_quantile(&s, 0.90), 46); /* h = 3.6: 40 + .6*10 */
  tb_stats_free(&s);
}

static void
test_out_of_range_q(void **state)
{
  (void)state;
  struct tb_stats s = { 0 };
  const int64_t v[] = { 7, 3, 9 };
  add_all(&s, v, 3);
  assert_true(tb_stats_quantile(&s, -1) == 3);
  assert_true(tb_stats_quantile(&s, 2) == 9);
  assert_true(tb_stats_quantile(&s, -INFINITY) == 3);
  assert_true(tb_stats_quantile(&s, INFINITY) == 9);
  tb_stats_free(&s);
}

static void
test_ties_negatives_and_large(void **state)
{
  (void)state;
  struct tb_stats s = { 0 };
  const int64_t ties[] = { 5, 5, 5, 5 };
  add_all(&s, ties, 4);
  assert_true(tb_stats_quantile(&s, 0.37) == 5);
  tb_stats_reset(&s);
  assert_int_equal(s.n, 0);
  assert_true(isnan(tb_stats_quantile(&s, 0.5)));
  const int64_t neg[] = { -10, 0, 10 };
  add_all(&s, neg, 3);
  NEAR(tb_stats_quantile(&s, 0.25), -5);
  NEAR(tb_stats_quantile(&s, 0.5), 0);
  tb_stats_reset(&s);
  /* nanosecond durations of an hour and more keep their precision */
  const int64_t big[] = { 3600000000000LL, 3600000000002LL };
  add_all(&s, big, 2);
  assert_true(tb_stats_quantile(&s, 0.5) == 3600000000001.0);
  tb_stats_free(&s);
}

static void
test_growth_and_add_after_sort(void **state)
{
  (void)state;
  struct tb_stats s = { 0 };
  /* 1000 values, past several doublings of the array, in a scrambled order */
  for (int64_t i = 0; i < 1000; i++)
    tb_stats_add(&s, (i * 7919) % 1000);
  assert_int_equal(s.n, 1000);
  assert_true(s.cap >= 1000);
  NEAR(tb_stats_quantile(&s, 0.5), 499.5);
  NEAR(tb_stats_quantile(&s, 0.99), 989.01); /* h = 989.01 */
  /* adding after a quantile (which sorted in place) still counts it */
  tb_stats_add(&s, 5000);
  assert_true(tb_stats_quantile(&s, 1) == 5000);
  NEAR(tb_stats_quantile(&s, 0.5), 500); /* 1001 values: the middle one */
  tb_stats_free(&s);
}

#define NEAR_EPS(a, b, eps) assert_true(fabs((a) - (b)) < (eps))

static void
test_t975(void **state)
{
  (void)state;
  assert_true(isnan(tb_stats_t975(0)));
  NEAR_EPS(tb_stats_t975(1), 12.706205, 1e-5);
  NEAR_EPS(tb_stats_t975(2), 4.302653, 1e-5);
  NEAR_EPS(tb_stats_t975(10), 2.228139, 1e-5);
  NEAR_EPS(tb_stats_t975(30), 2.042272, 1e-5);
  /* larger df, toward the normal 1.959964 */
  NEAR_EPS(tb_stats_t975(40), 2.021075, 2e-5);
  NEAR_EPS(tb_stats_t975(60), 2.000298, 2e-5);
  NEAR_EPS(tb_stats_t975(120), 1.979930, 2e-5);
  assert_true(tb_stats_t975(100000) > 1.95996 && tb_stats_t975(100000) < 1.9600);
}

static void
test_mean_sd(void **state)
{
  (void)state;
  double x[] = { 2, 4, 4, 4, 5, 5, 7, 9 };
  NEAR_EPS(tb_stats_mean(x, 8), 5.0, 1e-12);
  NEAR_EPS(tb_stats_sd(x, 8), sqrt(32.0 / 7.0), 1e-12);
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
  NEAR_EPS(tb_stats_batch_se(x, 9, &df), 1.7320508, 1e-6);
  assert_int_equal(df, 2);
  /* slice 10 does not fit a batch of 3: the same three batches */
  NEAR_EPS(tb_stats_batch_se(x, 10, &df), 1.7320508, 1e-6);
  double lo, hi;
  assert_true(tb_stats_ci95(5.0, 1.7320508, 2, &lo, &hi));
  NEAR_EPS(lo, 5.0 - 4.302653 * 1.7320508, 1e-4);
  NEAR_EPS(hi, 5.0 + 4.302653 * 1.7320508, 1e-4);
  /* correlated blocks: batch means see the error the naive SE hides */
  for (int i = 0; i < 16; i++)
    x[i] = (i / 4) % 2 ? 3 : 1;
  NEAR_EPS(tb_stats_batch_se(x, 16, &df), 0.5773503, 1e-6);
  assert_int_equal(df, 3);
  double naive = tb_stats_sd(x, 16) / 4;
  NEAR_EPS(naive, 0.2581989, 1e-6);
  /* a steady series: no error */
  for (int i = 0; i < 16; i++)
    x[i] = 100;
  NEAR_EPS(tb_stats_batch_se(x, 16, &df), 0.0, 1e-12);
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
  struct tb_stats s = { 0 };
  /* the values n..1 (reversed, so the function must sort): rank r holds r */
  for (size_t i = n; i >= 1; i--)
    tb_stats_add(&s, (int64_t)i);
  double lo, hi;
  assert_true(tb_stats_median_ci95(&s, &lo, &hi));
  NEAR_EPS(lo, want_lo, 1e-12);
  NEAR_EPS(hi, want_hi, 1e-12);
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
  struct tb_stats s = { 0 };
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
    cmocka_unit_test(test_empty_and_single),
    cmocka_unit_test(test_r_reference),
    cmocka_unit_test(test_wikipedia_reference),
    cmocka_unit_test(test_out_of_range_q),
    cmocka_unit_test(test_ties_negatives_and_large),
    cmocka_unit_test(test_growth_and_add_after_sort),
    cmocka_unit_test(test_t975),
    cmocka_unit_test(test_mean_sd),
    cmocka_unit_test(test_batch_se),
    cmocka_unit_test(test_median_ci),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
