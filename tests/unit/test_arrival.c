/* Unit tests: tb_arrival's generators.  The seeded processes must have the
 * mean and coefficient of variation of their definitions (Poisson: gaps of
 * mean 1/rate and CV 1; gamma:B: CV sqrt(B); constant: CV 0), within a
 * statistical tolerance far above the sampling error of 200,000 gaps (the
 * CV's standard error is below 0.005 for all three), and be a function of
 * the seed alone.  The xoshiro256** reference: the authors' C code (as a
 * Python transliteration of xoshiro256starstar.c) seeded
 * with s = {1, 2, 3, 4} gives 11520, 0, 1509978240, 1215971899390074240
 * as its first outputs. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <math.h>
#include <stdlib.h>

#include "base/tb_arrival.h"

#define N 200000

static void
gaps_stats(const char *text, double rate, uint64_t seed, double *mean, double *cv)
{
  struct tb_arrival a;
  assert_true(tb_arrival_init(&a, text, rate, seed));
  double s = 0, s2 = 0;
  for (int i = 0; i < N; i++) {
    double g = tb_arrival_gap_s(&a);
    assert_true(g > 0 && isfinite(g));
    s += g;
    s2 += g * g;
  }
  *mean = s / N;
  double var = (s2 - s * s / N) / (N - 1);
  *cv = sqrt(var) / *mean;
}

static void
test_xoshiro_reference(void **state)
{
  (void)state;
  struct tb_rng r = { { 1, 2, 3, 4 } };
  assert_true(tb_rng_next(&r) == 11520ULL);
  assert_true(tb_rng_next(&r) == 0ULL);
  assert_true(tb_rng_next(&r) == 1509978240ULL);
  assert_true(tb_rng_next(&r) == 1215971899390074240ULL);
}

static void
test_poisson(void **state)
{
  (void)state;
  double mean, cv;
  gaps_stats("poisson", 200, 7, &mean, &cv);
  assert_true(fabs(mean - 1.0 / 200) < 0.01 / 200);
  assert_true(fabs(cv - 1.0) < 0.02);
}

static void
test_gamma(void **state)
{
  (void)state;
  double mean, cv;
  gaps_stats("gamma:4", 10, 3, &mean, &cv);
  assert_true(fabs(mean - 0.1) < 0.02 * 0.1);
  assert_true(fabs(cv - 2.0) < 0.05);
  gaps_stats("gamma:0.25", 10, 3, &mean, &cv);
  assert_true(fabs(mean - 0.1) < 0.01 * 0.1);
  assert_true(fabs(cv - 0.5) < 0.02);
  gaps_stats("gamma:1", 50, 9, &mean, &cv); /* Poisson by another road */
  assert_true(fabs(mean - 0.02) < 0.01 * 0.02);
  assert_true(fabs(cv - 1.0) < 0.02);
}

static void
test_constant(void **state)
{
  (void)state;
  double mean, cv;
  gaps_stats("constant", 4, 1, &mean, &cv);
  assert_true(fabs(mean - 0.25) < 1e-12);
  assert_true(cv < 1e-6);
}

static void
test_determinism(void **state)
{
  (void)state;
  struct tb_arrival a, b, c;
  assert_true(tb_arrival_init(&a, "gamma:2", 5, 42));
  assert_true(tb_arrival_init(&b, "gamma:2", 5, 42));
  assert_true(tb_arrival_init(&c, "gamma:2", 5, 43));
  int differ = 0;
  for (int i = 0; i < 1000; i++) {
    double x = tb_arrival_gap_s(&a), y = tb_arrival_gap_s(&b), z = tb_arrival_gap_s(&c);
    assert_true(x == y);
    differ += x != z;
  }
  assert_true(differ > 990);
}

static void
test_check(void **state)
{
  (void)state;
  assert_null(tb_arrival_check("poisson"));
  assert_null(tb_arrival_check("constant"));
  assert_null(tb_arrival_check("gamma:0.5"));
  assert_non_null(tb_arrival_check("gamma:"));
  assert_non_null(tb_arrival_check("gamma:0"));
  assert_non_null(tb_arrival_check("gamma:1e9"));
  assert_non_null(tb_arrival_check("gamma:nan"));
  assert_non_null(tb_arrival_check("Poisson"));
  struct tb_arrival a;
  assert_false(tb_arrival_init(&a, "poisson", 0, 1));
  assert_false(tb_arrival_init(&a, "uniform", 1, 1));
}

static void
test_lengths(void **state)
{
  (void)state;
  struct tb_length l;
  assert_null(tb_length_parse("256", 1, 100000, &l));
  assert_true(l.lo == 256 && l.hi == 256);
  assert_null(tb_length_parse("uniform:1k-2k", 1, 100000, &l));
  assert_true(l.lo == 1024 && l.hi == 2048);
  assert_non_null(tb_length_parse("uniform:9-3", 1, 100, NULL));
  assert_non_null(tb_length_parse("uniform:3", 1, 100, NULL));
  assert_non_null(tb_length_parse("0", 1, 100, NULL));
  assert_non_null(tb_length_parse("101", 1, 100, NULL));
  assert_non_null(tb_length_parse("uniform:1-99999999999999999999999", 1, 100, NULL));
  struct tb_rng r;
  tb_rng_seed(&r, 5);
  struct tb_length u = { 10, 13 };
  int seen[4] = { 0 };
  for (int i = 0; i < 4000; i++) {
    int64_t v = tb_length_draw(&u, &r);
    assert_true(v >= 10 && v <= 13);
    seen[v - 10]++;
  }
  for (int k = 0; k < 4; k++) /* 1000 each; 5 sigma is 137 */
    assert_true(abs(seen[k] - 1000) < 140);
}

int
main(void)
{
  const struct CMUnitTest tests[] = {
    cmocka_unit_test(test_xoshiro_reference),
    cmocka_unit_test(test_poisson),
    cmocka_unit_test(test_gamma),
    cmocka_unit_test(test_constant),
    cmocka_unit_test(test_determinism),
    cmocka_unit_test(test_check),
    cmocka_unit_test(test_lengths),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
