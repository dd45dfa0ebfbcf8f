/*
 * Unit tests for tb_verdict: the incomplete beta function, Student's t
 * (CDF, quantile), Welch's test, change points and verdicts on known data.
 *
 * Reference values: computed with mpmath 1.3.0 at 30 significant digits
 * (mp.dps = 30), independently of this code:
 *   I_x(a, b)       mpmath.betainc(a, b, 0, x, regularized=True)
 *   t CDF           1 - I_{df/(df+t^2)}(df/2, 1/2) / 2 for t > 0 (the
 *                   textbook identity; mirrored for t < 0); df = 1 is also
 *                   the Cauchy distribution: CDF(1) = 1/2 + atan(1)/pi = 0.75
 *   t quantile      mpmath.findroot on that CDF
 *   Welch           t = (m2 - m1) / sqrt(v1/n1 + v2/n2), Welch-Satterthwaite
 *                   df, p = I_{df/(df+t^2)}(df/2, 1/2)
 *   the verdict     the pooled t-test of tb_verdict.h step 4 written out in
 *                   mpmath for the history below
 * Textbook cross-checks: t_{0.975, 10} = 2.228, t_{0.975, 1} = 12.706,
 * t_{0.995, 20} = 2.845 (any t table).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "result/tb_verdict.h"

#define CLOSE(x, ref, tol) assert_true(fabs((x) - (ref)) <= (tol))

static void
test_betainc(void **state)
{
  (void)state;
  CLOSE(tb_stats_betainc(2, 3, 0.4), 0.5248, 1e-13);
  CLOSE(tb_stats_betainc(0.5, 0.5, 0.3), 0.36901011956554538, 1e-13);
  CLOSE(tb_stats_betainc(10, 0.5, 0.9), 0.15164090963470997, 1e-13);
  CLOSE(tb_stats_betainc(50, 0.5, 0.95), 0.02387270549699075, 1e-13);
  CLOSE(tb_stats_betainc(1.5, 7.25, 0.05), 0.14303295721639327, 1e-13);
  assert_true(tb_stats_betainc(2, 3, 0) == 0 && tb_stats_betainc(2, 3, 1) == 1);
  assert_true(isnan(tb_stats_betainc(-1, 3, 0.5)));
  assert_true(isnan(tb_stats_betainc(1, 3, 1.5)));
}

static void
test_t_cdf(void **state)
{
  (void)state;
  CLOSE(tb_stats_t_cdf(2.0, 10), 0.96330598261462982, 1e-13);
  CLOSE(tb_stats_t_cdf(-1.5, 3.5), 0.10890909350767262, 1e-13);
  CLOSE(tb_stats_t_cdf(1, 1), 0.75, 1e-13);
  CLOSE(tb_stats_t_cdf(4.0, 30), 0.99980907718195812, 1e-13);
  CLOSE(tb_stats_t_cdf(0.3, 2), 0.60375716957991119, 1e-13);
  CLOSE(tb_stats_t_cdf(0, 7), 0.5, 1e-15);
  assert_true(isnan(tb_stats_t_cdf(1, 0)));
}

static void
test_t_quantile(void **state)
{
  (void)state;
  CLOSE(tb_stats_t_quantile(0.975, 10), 2.2281388519862742, 1e-9);
  CLOSE(tb_stats_t_quantile(0.975, 1), 12.706204736174693, 1e-8);
  CLOSE(tb_stats_t_quantile(0.995, 20), 2.8453397097861081, 1e-9);
  CLOSE(tb_stats_t_quantile(0.9995, 21), 3.8192771642745085, 1e-9);
  CLOSE(tb_stats_t_quantile(0.025, 10), -2.2281388519862742, 1e-9);
  assert_true(isnan(tb_stats_t_quantile(1.0, 10)));
}

static void
test_welch(void **state)
{
  (void)state;
  double t, df, p;
  assert_true(tb_verdict_welch(10, 4, 8, 12, 9, 6, &t, &df, &p));
  CLOSE(t, 1.414213562373095, 1e-12);
  CLOSE(df, 8.2352941176470588, 1e-12);
  CLOSE(p, 0.19397236311275663, 1e-12);
  assert_false(tb_verdict_welch(10, 0, 8, 12, 0, 6, &t, &df, &p));
  assert_false(tb_verdict_welch(10, 4, 1, 12, 9, 6, &t, &df, &p));
}

/* A deterministic wobble of +-1% around level. */
static double
wobble(size_t i, double level)
{
  static const double w[] = { 0.004, -0.007, 0.01, -0.002, 0.006, -0.009, 0.001, -0.004 };
  return level * (1.0 + w[i % (sizeof w / sizeof w[0])]);
}

static void
test_change_points(void **state)
{
  (void)state;
  double y[40];
  size_t cp[8];
  for (size_t i = 0; i < 40; i++)
    y[i] = wobble(i, i < 25 ? 1000 : 900);
  size_t n = tb_verdict_change_points(y, 40, TB_VERDICT_CP_ALPHA, cp, 8);
  assert_int_equal(n, 1);
  assert_int_equal(cp[0], 25);
  /* two steps: down at 15, back up at 30 */
  for (size_t i = 0; i < 40; i++)
    y[i] = wobble(i, i >= 15 && i < 30 ? 900 : 1000);
  n = tb_verdict_change_points(y, 40, TB_VERDICT_CP_ALPHA, cp, 8);
  assert_int_equal(n, 2);
  assert_int_equal(cp[0], 15);
  assert_int_equal(cp[1], 30);
  /* no step: the wobble alone */
  for (size_t i = 0; i < 40; i++)
    y[i] = wobble(i, 1000);
  assert_int_equal(tb_verdict_change_points(y, 40, TB_VERDICT_CP_ALPHA, cp, 8), 0);
}

static void
fill(struct tb_verdict_point *p, const double *v, size_t n)
{
  for (size_t i = 0; i < n; i++) {
    p[i].job = (long)i;
    p[i].value = v[i];
    p[i].se = NAN;
  }
}

static void
test_judge(void **state)
{
  (void)state;
  double h[] = { 100, 101, 99, 100, 102, 98, 100, 101, 99, 100, 90 };
  struct tb_verdict_point p[11];
  struct tb_verdict v;
  fill(p, h, 11);
  tb_verdict_judge(p, 11, 0.02, true, TB_VERDICT_ALPHA, &v);
  assert_int_equal(v.outcome, TB_VERDICT_WORSE);
  assert_int_equal(v.n_base, 10);
  assert_int_equal(v.n_new, 1);
  CLOSE(v.effect, -0.1, 1e-12);
  CLOSE(v.p, 1.7174630825608119e-5, 1e-12);
  CLOSE(v.ci_lo, -0.12739608373988066, 1e-9);
  CLOSE(v.ci_hi, -0.072603916260119344, 1e-9);
  /* the same drop in a latency is better */
  tb_verdict_judge(p, 11, 0.02, false, TB_VERDICT_ALPHA, &v);
  assert_int_equal(v.outcome, TB_VERDICT_BETTER);
  /* an ordinary value: inside +-5% for sure, not inside +-2% for sure */
  p[10].value = 100.2;
  tb_verdict_judge(p, 11, 0.05, true, TB_VERDICT_ALPHA, &v);
  assert_int_equal(v.outcome, TB_VERDICT_SAME);
  tb_verdict_judge(p, 11, 0.02, true, TB_VERDICT_ALPHA, &v);
  assert_int_equal(v.outcome, TB_VERDICT_INCONCLUSIVE);
  /* a noisy run (its own SE far above the history's spread) is not worse */
  p[10].value = 93;
  tb_verdict_judge(p, 11, 0.02, true, TB_VERDICT_ALPHA, &v);
  assert_int_equal(v.outcome, TB_VERDICT_WORSE);
  p[10].se = 5;
  tb_verdict_judge(p, 11, 0.02, true, TB_VERDICT_ALPHA, &v);
  assert_int_equal(v.outcome, TB_VERDICT_INCONCLUSIVE);
  /* three earlier points are enough, two are not */
  tb_verdict_judge(p + 8, 3, 0.02, true, TB_VERDICT_ALPHA, &v);
  assert_int_equal(v.outcome, TB_VERDICT_TOO_LITTLE);
  tb_verdict_judge(p + 7, 4, 0.02, true, TB_VERDICT_ALPHA, &v);
  assert_true(v.outcome != TB_VERDICT_TOO_LITTLE);
  /* unusable points are skipped */
  p[3].value = NAN;
  p[4].value = -1;
  p[10].se = NAN;
  tb_verdict_judge(p, 11, 0.02, true, TB_VERDICT_ALPHA, &v);
  assert_int_equal(v.n_base, 8);
}

static void
test_judge_step(void **state)
{
  (void)state;
  /* 20 runs at 1000, then 3 at 950: the last is judged as part of the step */
  struct tb_verdict_point p[23];
  for (size_t i = 0; i < 23; i++) {
    p[i].job = (long)i;
    p[i].value = wobble(i, i < 20 ? 1000 : 950);
    p[i].se = NAN;
  }
  struct tb_verdict v;
  tb_verdict_judge(p, 23, 0.02, true, TB_VERDICT_ALPHA, &v);
  assert_int_equal(v.outcome, TB_VERDICT_WORSE);
  assert_true(v.step);
  assert_int_equal(v.new_from, 20);
  assert_int_equal(v.n_new, 3);
  assert_int_equal(v.n_base, 20);
  assert_true(v.ci_lo < -0.05 + 0.01 && v.ci_hi > -0.05 - 0.01 && v.ci_hi < -0.02);
  /* six runs later the new level is the baseline: same */
  struct tb_verdict_point q[29];
  for (size_t i = 0; i < 29; i++) {
    q[i].job = (long)i;
    q[i].value = wobble(i, i < 20 ? 1000 : 950);
    q[i].se = NAN;
  }
  tb_verdict_judge(q, 29, 0.03, true, TB_VERDICT_ALPHA, &v);
  assert_false(v.step);
  assert_int_equal(v.n_base, 8);
  assert_int_equal(v.outcome, TB_VERDICT_SAME);
}

static void
test_matrix(void **state)
{
  (void)state;
  /* two cells of very different size, both 6% slower in the last job;
   * cell b misses job 3 */
  struct tb_verdict_point a[8], b[7];
  for (size_t i = 0; i < 8; i++) {
    a[i].job = (long)i;
    a[i].value = wobble(i, 1000) * (i == 7 ? 0.94 : 1.0);
    a[i].se = NAN;
  }
  for (size_t i = 0, j = 0; i < 8; i++) {
    if (i == 3)
      continue;
    b[j].job = (long)i;
    b[j].value = wobble(i + 3, 50) * (i == 7 ? 0.94 : 1.0);
    b[j++].se = NAN;
  }
  const struct tb_verdict_point *cells[] = { a, b };
  size_t n[] = { 8, 7 };
  struct tb_verdict v;
  double mean[8];
  long jobs[8];
  size_t nout = 0;
  tb_verdict_matrix(cells, n, 2, 0.02, true, TB_VERDICT_ALPHA, &v, mean, jobs, 8, &nout);
  assert_int_equal(nout, 8);
  assert_int_equal(jobs[7], 7);
  assert_int_equal(v.outcome, TB_VERDICT_WORSE);
  CLOSE(v.effect, -0.06, 0.01);
  /* a cell with too little history drops out; none left: too little */
  size_t n2[] = { 3, 2 };
  const struct tb_verdict_point *cells2[] = { a + 5, b + 5 };
  tb_verdict_matrix(cells2, n2, 2, 0.02, true, TB_VERDICT_ALPHA, &v, NULL, NULL, 0, &nout);
  assert_int_equal(v.outcome, TB_VERDICT_TOO_LITTLE);
  assert_string_equal(tb_verdict_outcome_name(v.outcome), "too_little_history");
  CLOSE(tb_verdict_cell_alpha(4), TB_VERDICT_ALPHA / 4, 1e-18);
}

int
main(void)
{
  const struct CMUnitTest tests[] = {
    cmocka_unit_test(test_betainc),       cmocka_unit_test(test_t_cdf),
    cmocka_unit_test(test_t_quantile),    cmocka_unit_test(test_welch),
    cmocka_unit_test(test_change_points), cmocka_unit_test(test_judge),
    cmocka_unit_test(test_judge_step),    cmocka_unit_test(test_matrix),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
