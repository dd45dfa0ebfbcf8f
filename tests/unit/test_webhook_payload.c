/* Unit tests: tb_deliver's payload and key figures (pure parts). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdlib.h>
#include <string.h>

#include "tb_deliver.h"

static json_t *
load(const char *text)
{
  json_error_t e;
  json_t *j = json_loads(text, 0, &e);
  assert_non_null(j);
  return j;
}

static void
test_figures(void **state)
{
  (void)state;
  json_t *r = load("{\"cells\":["
                   "{\"phase\":\"prefill\",\"context\":8192,\"status\":\"valid\",\"prompt_tps\":100},"
                   "{\"phase\":\"prefill\",\"context\":16384,\"status\":\"valid\",\"prompt_tps\":300},"
                   "{\"phase\":\"decode\",\"context\":8192,\"concurrency\":1,\"status\":\"valid\","
                   "\"total_tps\":50},"
                   "{\"phase\":\"decode\",\"context\":8192,\"concurrency\":8,\"status\":\"valid\","
                   "\"total_tps\":400},"
                   "{\"phase\":\"decode\",\"context\":262144,\"concurrency\":8,"
                   "\"status\":\"over_capacity\"},"
                   "{\"phase\":\"decode\",\"context\":16384,\"concurrency\":8,\"status\":\"error\"},"
                   "{\"junk\":1}, 5]}");
  json_t *f = tb_deliver_figures(r);
  assert_int_equal(json_integer_value(json_object_get(f, "cells_valid")), 4);
  assert_int_equal(json_integer_value(json_object_get(f, "cells_over_capacity")), 1);
  assert_int_equal(json_integer_value(json_object_get(f, "cells_error")), 1);
  json_t *bd = json_object_get(f, "best_decode");
  assert_int_equal(json_integer_value(json_object_get(bd, "concurrency")), 8);
  json_t *bp = json_object_get(f, "best_prefill");
  assert_int_equal(json_integer_value(json_object_get(bp, "context")), 16384);
  json_t *ss = json_object_get(f, "single_stream");
  assert_true(json_number_value(json_object_get(ss, "tps")) == 50);
  json_decref(f);
  json_decref(r);
  /* no result, junk result */
  f = tb_deliver_figures(NULL);
  assert_int_equal(json_object_size(f), 0);
  json_decref(f);
}

static void
test_payload(void **state)
{
  (void)state;
  json_t *job = load("{\"id\":\"11111111-2222-3333-4444-555555555555\",\"state\":\"succeeded\","
                     "\"labels\":{\"sha\":\"abc\"},\"cells_done\":3}");
  json_t *res = load("{\"cells\":[],\"regressions\":[{\"metric\":\"total_tps\"}]}");
  char *p = tb_deliver_payload("job.succeeded", job, res, "https://tb.example/", 0);
  json_t *d = load(p);
  assert_string_equal(json_string_value(json_object_get(d, "type")), "job.succeeded");
  assert_string_equal(json_string_value(json_object_get(d, "timestamp")),
                      "1970-01-01T00:00:00.000Z");
  json_t *data = json_object_get(d, "data");
  assert_string_equal(json_string_value(json_object_get(data, "job_id")),
                      "11111111-2222-3333-4444-555555555555");
  assert_true(json_is_true(json_object_get(data, "regressed")));
  assert_int_equal(json_array_size(json_object_get(data, "regressions")), 1);
  assert_true(json_is_null(json_object_get(data, "error")));
  assert_string_equal(
    json_string_value(json_object_get(json_object_get(data, "links"), "report_md")),
    "https://tb.example/v1/jobs/11111111-2222-3333-4444-555555555555/report?format=md");
  json_decref(d);
  free(p);
  /* no result: not regressed */
  p = tb_deliver_payload("job.failed", job, NULL, NULL, 0);
  d = load(p);
  assert_true(json_is_false(json_object_get(json_object_get(d, "data"), "regressed")));
  json_decref(d);
  free(p);
  json_decref(res);
  json_decref(job);
}

static void
test_payload_cap(void **state)
{
  (void)state;
  json_t *job = load("{\"id\":\"x\",\"state\":\"failed\"}");
  char *big = malloc(TB_DELIVER_PAYLOAD_MAX + 10);
  memset(big, 'e', TB_DELIVER_PAYLOAD_MAX + 9);
  big[TB_DELIVER_PAYLOAD_MAX + 9] = '\0';
  json_object_set_new(job, "error", json_string(big));
  free(big);
  char *p = tb_deliver_payload("job.failed", job, NULL, "", 0);
  assert_true(strlen(p) < 1000);
  json_t *d = load(p);
  assert_string_equal(
    json_string_value(json_object_get(json_object_get(d, "data"), "state")), "failed");
  json_decref(d);
  free(p);
  json_decref(job);
}

int
main(void)
{
  const struct CMUnitTest tests[] = {
    cmocka_unit_test(test_figures),
    cmocka_unit_test(test_payload),
    cmocka_unit_test(test_payload_cap),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
