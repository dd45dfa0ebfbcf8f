/*
 * Unit tests for sim_noise: the spec syntax, the seeded draws (the same
 * seed, the same numbers), their distribution against the model's own
 * moments, run tags, and the slowdown's switch by request count and time.
 *
 * Reference values: jitter is lognormal with sigma s and mean 1, so its sd
 * is sqrt(exp(s^2) - 1) (s = 0.05: 0.0500313); drift factors are exp(d z),
 * so their logs have sd d.  Over 200,000 (40,000) draws the sample moments
 * lie within a few standard errors of these: the bounds below are 5 SE.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "sim_noise.h"

static void
test_parse(void **state)
{
  (void)state;
  struct sim_noise n;
  char err[200];
  sim_noise_init(&n);
  assert_false(sim_noise_active(&n));
  assert_true(sim_noise_parse(&n, "drift=2%,jitter=0.05;seed=7", err, sizeof err));
  assert_true(fabs(n.drift - 0.02) < 1e-12 && fabs(n.jitter - 0.05) < 1e-12);
  assert_true(n.seed == 7);
  assert_true(sim_noise_active(&n));
  assert_false(sim_noise_parse(&n, "drift=200%", err, sizeof err));
  assert_non_null(strstr(err, "drift"));
  assert_false(sim_noise_parse(&n, "wobble=1%", err, sizeof err));
  assert_non_null(strstr(err, "unknown"));
  assert_false(sim_noise_parse(&n, "jitter", err, sizeof err));
  assert_false(sim_noise_parse(&n, "seed=-1", err, sizeof err));

  assert_true(sim_noise_parse_slowdown(&n, "5%", err, sizeof err));
  assert_true(fabs(n.slowdown - 0.05) < 1e-12 && n.slow_requests == 0 && n.slow_after_s < 0);
  assert_true(sim_noise_parse_slowdown(&n, "0.1@requests=40", err, sizeof err));
  assert_true(n.slow_requests == 40);
  assert_true(sim_noise_parse_slowdown(&n, "5%@t=2.5", err, sizeof err));
  assert_true(n.slow_after_s == 2.5 && n.slow_requests == 0);
  assert_false(sim_noise_parse_slowdown(&n, "100%", err, sizeof err));
  assert_false(sim_noise_parse_slowdown(&n, "5%@when=3", err, sizeof err));
  assert_false(sim_noise_parse_slowdown(&n, "5%@requests=0", err, sizeof err));
}

static void
test_jitter_draws(void **state)
{
  (void)state;
  struct sim_noise a, b;
  char err[200];
  sim_noise_init(&a);
  assert_true(sim_noise_parse(&a, "jitter=5%,seed=7", err, sizeof err));
  b = a;
  sim_noise_start(&a, 0);
  sim_noise_start(&b, 0);
  double sum = 0, ss = 0;
  const int N = 200000;
  for (int i = 0; i < N; i++) {
    double f = sim_noise_step_factor(&a, 0, 1);
    assert_true(f == sim_noise_step_factor(&b, 0, 1)); /* same seed, same draws */
    sum += f;
    ss += f * f;
  }
  double mean = sum / N, sd = sqrt(ss / N - mean * mean);
  double want_sd = sqrt(exp(0.05 * 0.05) - 1);
  assert_true(fabs(mean - 1) < 5 * want_sd / sqrt(N));
  assert_true(fabs(sd - want_sd) < 5 * want_sd / sqrt(2.0 * N));
  /* another seed, other draws */
  b.seed = 8;
  sim_noise_start(&b, 0);
  sim_noise_start(&a, 0);
  assert_true(sim_noise_step_factor(&a, 0, 1) != sim_noise_step_factor(&b, 0, 1));
  /* nothing set: exactly 1 */
  struct sim_noise none;
  sim_noise_init(&none);
  sim_noise_start(&none, 0);
  assert_true(sim_noise_step_factor(&none, 0, 1) == 1.0);
}

static void
test_drift_runs(void **state)
{
  (void)state;
  /* the log of the drift factor over many run names: mean 0, sd = drift */
  const int N = 40000;
  double sum = 0, ss = 0;
  for (int i = 0; i < N; i++) {
    char run[32];
    int len = snprintf(run, sizeof run, "run%d", i);
    double l = log(sim_noise_drift_factor(0.02, 7, run, (size_t)len));
    sum += l;
    ss += l * l;
  }
  double mean = sum / N, sd = sqrt(ss / N - mean * mean);
  assert_true(fabs(mean) < 5 * 0.02 / sqrt(N));
  assert_true(fabs(sd - 0.02) < 5 * 0.02 / sqrt(2.0 * N));
  assert_true(sim_noise_drift_factor(0, 7, "x", 1) == 1.0);

  /* a request's tag picks its run's factor; untagged requests keep it */
  struct sim_noise n;
  char err[200];
  sim_noise_init(&n);
  assert_true(sim_noise_parse(&n, "drift=2%,seed=7", err, sizeof err));
  sim_noise_start(&n, 0);
  double base = n.run_factor;
  assert_true(base == sim_noise_drift_factor(0.02, 7, "", 0));
  const char *p1 = "[BENCH_abc_CTX_1024] lorem ipsum";
  sim_noise_request(&n, p1, strlen(p1));
  assert_string_equal(n.run, "abc");
  double f1 = sim_noise_drift_factor(0.02, 7, "abc", 3);
  assert_true(n.run_factor == f1);
  assert_true(sim_noise_step_factor(&n, 0, 1) == f1);
  const char *p2 = "[BENCH_abc-r2_CALIBRATE] x";
  sim_noise_request(&n, p2, strlen(p2));
  assert_string_equal(n.run, "abc-r2");
  assert_true(n.run_factor != f1);
  sim_noise_request(&n, "no tag here", 11);
  assert_string_equal(n.run, "abc-r2");
  sim_noise_request(&n, NULL, 0);
  assert_int_equal(n.requests, 4);
  /* from a request body: chat contents (string or parts) and prompts */
  json_t *b = json_loads("{\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":\"text\","
                         "\"text\":\"[BENCH_zz_CTX_8192] filler\"}]}]}",
                         0, NULL);
  sim_noise_request_body(&n, b);
  assert_string_equal(n.run, "zz");
  json_decref(b);
  b = json_loads("{\"prompt\":\"[BENCH_yy_CTX_0]\"}", 0, NULL);
  sim_noise_request_body(&n, b);
  assert_string_equal(n.run, "yy");
  json_decref(b);
  b = json_loads("{\"messages\":[{\"role\":\"user\",\"content\":\"[BENCH_x]\"}]}", 0, NULL);
  sim_noise_request_body(&n, b); /* not a tag of ours: the run stays */
  assert_string_equal(n.run, "yy");
  json_decref(b);
  assert_int_equal(n.requests, 7);
  json_t *j = sim_noise_json(&n);
  assert_string_equal(json_string_value(json_object_get(j, "run")), "yy");
  assert_true(json_real_value(json_object_get(j, "drift_factor")) ==
              sim_noise_drift_factor(0.02, 7, "yy", 2));
  assert_true(json_is_null(json_object_get(j, "slowdown_after_s")));
  json_decref(j);
}

static void
test_slowdown(void **state)
{
  (void)state;
  struct sim_noise n;
  char err[200];
  sim_noise_init(&n);
  assert_true(sim_noise_parse_slowdown(&n, "20%@requests=3", err, sizeof err));
  sim_noise_start(&n, 0);
  sim_noise_request(&n, NULL, 0);
  sim_noise_request(&n, NULL, 0);
  assert_true(sim_noise_step_factor(&n, 0, 1) == 1.0);
  sim_noise_request(&n, NULL, 0);
  assert_true(fabs(sim_noise_step_factor(&n, 0, 1) - 1.25) < 1e-12); /* 1 / 0.8 */
  /* by time: modelled seconds, so a time scale of 10 makes 0.5 s real
   * time 5 modelled seconds */
  assert_true(sim_noise_parse_slowdown(&n, "20%@t=5", err, sizeof err));
  sim_noise_start(&n, 1000000000LL);
  assert_true(sim_noise_step_factor(&n, 1000000000LL + 400000000LL, 10) == 1.0);
  assert_true(fabs(sim_noise_step_factor(&n, 1000000000LL + 500000000LL, 10) - 1.25) < 1e-12);
}

int
main(void)
{
  const struct CMUnitTest tests[] = {
    cmocka_unit_test(test_parse),
    cmocka_unit_test(test_jitter_draws),
    cmocka_unit_test(test_drift_runs),
    cmocka_unit_test(test_slowdown),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
