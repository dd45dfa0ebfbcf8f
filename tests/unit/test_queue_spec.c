/*
 * Unit tests of the worker's pure parts: the engine spec built from a job
 * spec and its endpoint (worker_spec.c) and the run id.
 * The queue's SQL is tested against a real PostgreSQL in
 * tests/integration/test_worker.py.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "worker.h"

static void
test_engine_spec_maps_members(void **state)
{
  (void)state;
  json_error_t je;
  json_t *job = json_loads("{\"endpoint_id\": \"x\", \"model\": \"m\", \"contexts\": [8192, \"16K\"],"
                           " \"concurrencies\": [1, 4], \"prefill_contexts\": [], \"duration\": 2,"
                           " \"max_output\": 128, \"kv_override\": 1000, \"labels\": {\"a\": \"b\"},"
                           " \"priority\": 3, \"settle_s\": 0.5}", 0, &je);
  assert_non_null(job);
  struct tb_queue_endpoint ep = { .name = "gpu-1", .base_url = "http://h:8000",
                                  .launch_command = "vllm serve --api-key s3cret",
                                  .engine_hint = "vllm" };
  ep.hardware = json_pack("{s:s, s:i}", "gpu", "H200", "count", 2);
  ep.engine = json_pack("{s:s}", "quantization", "fp8");
  json_t *s = worker_engine_spec(job, &ep, "run-1");
  assert_string_equal(json_string_value(json_object_get(s, "base_url")), "http://h:8000");
  assert_string_equal(json_string_value(json_object_get(s, "run_id")), "run-1");
  assert_string_equal(json_string_value(json_object_get(s, "model")), "m");
  json_t *ctx = json_object_get(s, "contexts");
  assert_int_equal(json_array_size(ctx), 2);
  assert_int_equal(json_integer_value(json_array_get(ctx, 1)), 16384);
  assert_int_equal(json_array_size(json_object_get(s, "concurrency")), 2);
  assert_int_equal(json_array_size(json_object_get(s, "prefill_contexts")), 0);
  assert_int_equal(json_integer_value(json_object_get(s, "duration_s")), 2);
  assert_int_equal(json_integer_value(json_object_get(s, "kv_budget")), 1000);
  assert_null(json_object_get(s, "labels"));
  assert_null(json_object_get(s, "priority"));
  assert_null(json_object_get(s, "endpoint_id"));
  json_t *e = json_object_get(s, "endpoint");
  assert_string_equal(json_string_value(json_object_get(e, "name")), "gpu-1");
  assert_string_equal(json_string_value(json_object_get(json_object_get(e, "hardware"), "gpu")),
                      "H200");
  json_t *eng = json_object_get(e, "engine");
  assert_string_equal(json_string_value(json_object_get(eng, "quantization")), "fp8");
  assert_string_equal(json_string_value(json_object_get(eng, "hint")), "vllm");
  json_decref(s);
  json_decref(job);
  json_decref(ep.hardware);
  json_decref(ep.engine);
}

static void
test_engine_spec_from_empty_job(void **state)
{
  (void)state;
  json_t *job = json_object();
  struct tb_queue_endpoint ep = { 0 };
  json_t *s = worker_engine_spec(job, &ep, "r");
  assert_string_equal(json_string_value(json_object_get(s, "base_url")), "");
  assert_null(json_object_get(s, "contexts"));
  json_decref(s);
  json_decref(job);
}

static void
test_run_ids_are_unique(void **state)
{
  (void)state;
  char *a = worker_run_id("8a3d0c4e-0000-4000-8000-000000000000", 2);
  char *b = worker_run_id("8a3d0c4e-0000-4000-8000-000000000000", 2);
  assert_true(strncmp(a, "8a3d0c4e-0000-4000-8000-000000000000.2.", 39) == 0);
  assert_int_equal(strlen(a), 36 + 3 + 6);
  assert_string_not_equal(a, b);
  free(a);
  free(b);
}

int
main(void)
{
  const struct CMUnitTest tests[] = {
    cmocka_unit_test(test_engine_spec_maps_members),
    cmocka_unit_test(test_engine_spec_from_empty_job),
    cmocka_unit_test(test_run_ids_are_unique),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
