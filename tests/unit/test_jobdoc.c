/* Unit tests for tb_jobdoc: the job states, and the one document that
 * /result, /report and /v1/compare show. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdlib.h>
#include <string.h>

#include "result/tb_jobdoc.h"

static void
test_states(void **state)
{
  (void)state;
  assert_true(tb_jobdoc_terminal("succeeded"));
  assert_true(tb_jobdoc_terminal("failed"));
  assert_true(tb_jobdoc_terminal("cancelled"));
  assert_false(tb_jobdoc_terminal("running"));
  assert_false(tb_jobdoc_terminal("queued"));
  assert_false(tb_jobdoc_terminal(NULL));
  assert_false(tb_jobdoc_terminal("complete")); /* a status, not a state */
  assert_true(tb_jobdoc_state_ok("queued"));
  assert_false(tb_jobdoc_state_ok("partial"));
  assert_string_equal(tb_jobdoc_status_of("succeeded"), "complete");
  assert_string_equal(tb_jobdoc_status_of("queued"), "running");
  assert_string_equal(tb_jobdoc_status_of("running"), "running");
  assert_string_equal(tb_jobdoc_status_of("failed"), "failed");
  assert_string_equal(tb_jobdoc_status_of("cancelled"), "cancelled");
}

static const char *
str(const json_t *d, const char *k)
{
  return json_string_value(json_object_get(d, k));
}

static void
test_running(void **state)
{
  (void)state;
  struct tb_jobdoc_row row = {
    .job_id = "j1",
    .state = "running",
    .result = NULL,
    .header = "{\"schema\":\"tokbench.result/v1\",\"launch_command\":\"HF_TOKEN=x serve\"}",
    .cells = "[{\"phase\":\"prefill\"}]",
    .error = NULL,
    .cells_total = 55,
  };
  json_t *d = tb_jobdoc_build(&row);
  assert_string_equal(str(d, "status"), "running");
  assert_string_equal(str(d, "state"), "running");
  assert_string_equal(str(d, "job_id"), "j1");
  assert_string_equal(str(d, "schema"), "tokbench.result/v1");
  assert_string_equal(str(d, "launch_command"), "HF_TOKEN=<redacted> serve");
  assert_int_equal(json_array_size(json_object_get(d, "cells")), 1);
  assert_true(json_is_null(json_object_get(d, "error")));
  assert_int_equal(
    json_integer_value(json_object_get(json_object_get(d, "progress"), "cells_total")), 55);
  json_decref(d);
  /* a stored result of an unfinished job (a retried attempt) is not shown */
  row.result = "{\"status\":\"complete\",\"cells\":[]}";
  row.cells_total = -1;
  d = tb_jobdoc_build(&row);
  assert_string_equal(str(d, "status"), "running");
  assert_null(json_object_get(d, "progress"));
  json_decref(d);
}

static void
test_finished(void **state)
{
  (void)state;
  struct tb_jobdoc_row row = {
    .job_id = "j2",
    .state = "succeeded",
    .result = "{\"status\":\"partial\",\"cells\":[],\"launch_command\":\"s --api-key k\"}",
    .header = "{\"x\":1}",
    .cells = "[]",
    .error = NULL,
    .cells_total = 3,
  };
  json_t *d = tb_jobdoc_build(&row);
  assert_string_equal(str(d, "status"), "partial"); /* the engine's verdict */
  assert_string_equal(str(d, "state"), "succeeded");
  assert_string_equal(str(d, "launch_command"), "s --api-key <redacted>");
  assert_null(json_object_get(d, "x"));
  json_decref(d);
  /* cancelled before it started: no document, no header, junk cells */
  struct tb_jobdoc_row c = { .job_id = "j3",
                             .state = "cancelled",
                             .cells = "{",
                             .error = "cancelled before it started",
                             .cells_total = -1 };
  d = tb_jobdoc_build(&c);
  assert_string_equal(str(d, "status"), "cancelled");
  assert_string_equal(str(d, "error"), "cancelled before it started");
  assert_int_equal(json_array_size(json_object_get(d, "cells")), 0);
  json_decref(d);
  /* a stored result that is not an object falls back to the header */
  row.result = "[1]";
  d = tb_jobdoc_build(&row);
  assert_string_equal(str(d, "status"), "complete");
  assert_int_equal(json_integer_value(json_object_get(d, "x")), 1);
  json_decref(d);
}

int
main(void)
{
  const struct CMUnitTest tests[] = {
    cmocka_unit_test(test_states),
    cmocka_unit_test(test_running),
    cmocka_unit_test(test_finished),
  };
  return cmocka_run_group_tests_name("jobdoc", tests, NULL, NULL);
}
