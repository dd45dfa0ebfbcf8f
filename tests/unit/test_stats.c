/* Unit tests: tb_stats percentiles against values computed by hand from
 * the definition tb_stats.h names, Hyndman & Fan (1996) definition 7 (the
 * default of R's quantile() and NumPy's percentile(), "linear"):
 * h = (n - 1) q, Q = x[floor h] + (h - floor h) (x[floor h + 1] - x[floor h])
 * on the sorted sample, 0-based.  References used below:
 *  - R: quantile(1:10, c(.5, .9)) is 5.5, 9.1;
 *  - Wikipedia, "Percentile", the C = 1 variant's worked example: of
 *    {15, 20, 35, 40, 50} the 40th percentile is 29 (h = 1.6: 20 + .6*15)
 *    and the 5th is 16 (h = 0.2: 15 + .2*5). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <math.h>
#include <stdlib.h>

#include "tb_stats.h"

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
  struct tb_stats s = {0};
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
  struct tb_stats s = {0};
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
  struct tb_stats s = {0};
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
  struct tb_stats s = {0};
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
  struct tb_stats s = {0};
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
  struct tb_stats s = {0};
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
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
