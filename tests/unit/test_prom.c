/* Unit tests for tb_prom and the running/waiting gauges of tb_discover. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <string.h>

#include "engine/tb_discover.h"
#include "net/tb_prom.h"

static const char *vllm =
  "# HELP vllm:num_requests_running Number of requests running.\n"
  "# TYPE vllm:num_requests_running gauge\n"
  "vllm:num_requests_running{engine=\"0\",model_name=\"step\"} 3.0\n"
  "vllm:num_requests_running{engine=\"1\",model_name=\"step\"} 2.0\r\n"
  "vllm:num_requests_waiting{engine=\"0\",model_name=\"step\"} 1\n"
  "vllm:cache_config_info{block_size=\"16\",cache_dtype=\"fp8\",kv_cache_size_tokens=\"917504\","
  "num_gpu_blocks=\"57344\",weird=\"a}\\\"b\"} 1.0\n"
  "vllm:generation_tokens_total{model_name=\"step\"} 1.2e+06 1700000000000\n"
  "broken{ 3\n"
  "novalue\n";

static void
test_sum_and_labels(void **state)
{
  double v;
  size_t n = strlen(vllm);
  assert_true(tb_prom_sum(vllm, n, "vllm:num_requests_running", &v));
  assert_true(v == 5.0);
  assert_true(tb_prom_sum(vllm, n, "vllm:generation_tokens_total", &v));
  assert_true(v == 1.2e6);
  assert_false(tb_prom_sum(vllm, n, "vllm:nothing", &v));
  char buf[32];
  assert_true(
    tb_prom_label(vllm, n, "vllm:cache_config_info", "kv_cache_size_tokens", buf, sizeof buf));
  assert_string_equal(buf, "917504");
  assert_true(tb_prom_label(vllm, n, "vllm:cache_config_info", "weird", buf, sizeof buf));
  assert_string_equal(buf, "a}\"b");
  assert_false(tb_prom_label(vllm, n, "vllm:cache_config_info", "nope", buf, sizeof buf));
  double run, wait;
  assert_true(tb_discover_parse_load(TB_KIND_VLLM, vllm, n, &run, &wait));
  assert_true(run == 5.0 && wait == 1.0);
  const char *sg = "sglang:num_running_reqs{model_name=\"m\"} 7\n";
  assert_true(tb_discover_parse_load(TB_KIND_SGLANG, sg, strlen(sg), &run, &wait));
  assert_true(run == 7.0 && wait == 0.0);
}

static bool
count_cb(void *cls, const char *name, size_t nl, const char *l, size_t ll, double v)
{
  (*(int *)cls)++;
  return true;
}

static void
test_count(void **state)
{
  int n = 0;
  assert_int_equal(tb_prom_parse(vllm, strlen(vllm), count_cb, &n), 5);
  assert_int_equal(n, 5);
}

int
main(void)
{
  const struct CMUnitTest tests[] = {
    cmocka_unit_test(test_sum_and_labels),
    cmocka_unit_test(test_count),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
