/*
 * Unit tests of the worker's pure parts (worker_spec.c): the endpoint
 * block it adds to a job's settings, and the run id.
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
test_endpoint_header(void **state)
{
  (void)state;
  struct tb_queue_endpoint ep = { .name = "gpu-1",
                                  .base_url = "http://h:8000",
                                  .launch_command = "vllm serve --api-key s3cret",
                                  .engine_hint = "vllm" };
  ep.hardware = json_pack("{s:s, s:i}", "gpu", "H200", "count", 2);
  ep.engine = json_pack("{s:s}", "quantization", "fp8");
  json_t *e = worker_endpoint_header(&ep);
  assert_string_equal(json_string_value(json_object_get(e, "name")), "gpu-1");
  assert_string_equal(json_string_value(json_object_get(json_object_get(e, "hardware"), "gpu")),
                      "H200");
  json_t *eng = json_object_get(e, "engine");
  assert_string_equal(json_string_value(json_object_get(eng, "quantization")), "fp8");
  assert_string_equal(json_string_value(json_object_get(eng, "hint")), "vllm");
  /* the engine redacts it into the result header (tb_redact) */
  assert_string_equal(json_string_value(json_object_get(e, "launch_command")),
                      "vllm serve --api-key s3cret");
  /* nothing of a job's settings is here */
  assert_null(json_object_get(e, "contexts"));
  json_decref(e);
  json_decref(ep.hardware);
  json_decref(ep.engine);
}

static void
test_endpoint_header_of_a_bare_endpoint(void **state)
{
  (void)state;
  struct tb_queue_endpoint ep = { 0 };
  json_t *e = worker_endpoint_header(&ep);
  assert_null(json_object_get(e, "name"));
  assert_int_equal(json_object_size(json_object_get(e, "engine")), 0);
  json_decref(e);
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
    cmocka_unit_test(test_endpoint_header),
    cmocka_unit_test(test_endpoint_header_of_a_bare_endpoint),
    cmocka_unit_test(test_run_ids_are_unique),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
