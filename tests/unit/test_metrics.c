/* Unit tests: tb_metrics (Prometheus text, label escaping, histograms, caps,
 * threads). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tb_metrics.h"

static void
test_counter_gauge_text(void **state)
{
  (void)state;
  struct tb_metrics *m = tb_metrics_new();
  static const char *const ln[] = { "route", "status", NULL };
  struct tb_metric *c =
    tb_metrics_family(m, TB_METRIC_COUNTER, "t_requests_total", "Requests.", ln, NULL, 0);
  const char *v1[] = { "/v1/jobs", "200" };
  const char *v2[] = { "a\"b\\c\nd", "500" };
  tb_metric_add(c, v1, 1);
  tb_metric_add(c, v1, 2);
  tb_metric_add(c, v1, -5); /* ignored */
  tb_metric_add(c, v2, 1);
  assert_true(tb_metric_value(c, v1) == 3);
  struct tb_metric *g =
    tb_metrics_family(m, TB_METRIC_GAUGE, "t_depth", "Queue\ndepth.", NULL, NULL, 0);
  tb_metric_set(g, NULL, 7.5);
  /* redeclaring returns the same family */
  assert_ptr_equal(tb_metrics_family(m, TB_METRIC_COUNTER, "t_requests_total", "x", ln, NULL, 0),
                   c);
  char *t = tb_metrics_render(m);
  assert_non_null(
    strstr(t, "# HELP t_requests_total Requests.\n# TYPE t_requests_total counter\n"));
  assert_non_null(strstr(t, "t_requests_total{route=\"/v1/jobs\",status=\"200\"} 3\n"));
  assert_non_null(strstr(t, "t_requests_total{route=\"a\\\"b\\\\c\\nd\",status=\"500\"} 1\n"));
  assert_non_null(strstr(t, "# HELP t_depth Queue\\ndepth.\n# TYPE t_depth gauge\nt_depth 7.5\n"));
  free(t);
  tb_metric_reset(g);
  t = tb_metrics_render(m);
  assert_null(strstr(t, "t_depth 7.5"));
  free(t);
  tb_metrics_free(m);
}

static void
test_histogram(void **state)
{
  (void)state;
  struct tb_metrics *m = tb_metrics_new();
  static const char *const ln[] = { "route", NULL };
  static const double b[] = { 0.1, 1, 10 };
  struct tb_metric *h =
    tb_metrics_family(m, TB_METRIC_HISTOGRAM, "t_seconds", "Latency.", ln, b, 3);
  const char *v[] = { "/x" };
  tb_metric_observe(h, v, 0.05);
  tb_metric_observe(h, v, 0.5);
  tb_metric_observe(h, v, 1);
  tb_metric_observe(h, v, 100);
  char *t = tb_metrics_render(m);
  assert_non_null(strstr(t, "t_seconds_bucket{route=\"/x\",le=\"0.10000000000000001\"} 1\n"));
  assert_non_null(strstr(t, "t_seconds_bucket{route=\"/x\",le=\"1\"} 3\n"));
  assert_non_null(strstr(t, "t_seconds_bucket{route=\"/x\",le=\"10\"} 3\n"));
  assert_non_null(strstr(t, "t_seconds_bucket{route=\"/x\",le=\"+Inf\"} 4\n"));
  assert_non_null(strstr(t, "t_seconds_sum{route=\"/x\"} 101.55\n"));
  assert_non_null(strstr(t, "t_seconds_count{route=\"/x\"} 4\n"));
  free(t);
  tb_metrics_free(m);
}

static void
test_series_cap(void **state)
{
  (void)state;
  struct tb_metrics *m = tb_metrics_new();
  static const char *const ln[] = { "k", NULL };
  struct tb_metric *c = tb_metrics_family(m, TB_METRIC_COUNTER, "t_many", "", ln, NULL, 0);
  char buf[32];
  for (int i = 0; i < TB_METRICS_SERIES_MAX + 10; i++) {
    snprintf(buf, sizeof buf, "%d", i);
    const char *v[] = { buf };
    tb_metric_add(c, v, 1);
  }
  char *t = tb_metrics_render(m);
  assert_non_null(strstr(t, "tokbench_metrics_series_dropped_total 10\n"));
  free(t);
  tb_metrics_free(m);
}

static void *
hammer(void *arg)
{
  (void)arg;
  for (int i = 0; i < 20000; i++)
    tb_metrics_request("/v1/jobs/{id}", "GET", (unsigned)(i % 2 ? 200 : 404), 0.001);
  return NULL;
}

static void
test_threads_and_request(void **state)
{
  (void)state;
  pthread_t th[4];
  for (int i = 0; i < 4; i++)
    assert_int_equal(pthread_create(&th[i], NULL, hammer, NULL), 0);
  for (int i = 0; i < 4; i++)
    pthread_join(th[i], NULL);
  char *t = tb_metrics_render(tb_metrics_global());
  assert_non_null(strstr(t, "tokbench_http_requests_total{route=\"/v1/jobs/{id}\",method=\"GET\","
                            "status=\"200\"} 40000\n"));
  assert_non_null(
    strstr(t, "tokbench_http_request_duration_seconds_count{route=\"/v1/jobs/{id}\"} 80000\n"));
  free(t);
}

int
main(void)
{
  const struct CMUnitTest tests[] = {
    cmocka_unit_test(test_counter_gauge_text),
    cmocka_unit_test(test_histogram),
    cmocka_unit_test(test_series_cap),
    cmocka_unit_test(test_threads_and_request),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
