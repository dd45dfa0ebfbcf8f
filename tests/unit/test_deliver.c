/* Unit tests: tb_deliver's payload and key figures (the pure half: what a
 * receiver gets; formerly test_webhook_payload.c).  The dispatcher itself (claims, leases, retries, the
 * signed POST) needs PostgreSQL and runs in the integration tests
 * (test_deliveries.py, test_hooks.py). */
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
  json_t *j = json_loads(text, JSON_DECODE_ANY, &e);
  if (j == NULL)
    fail_msg("bad fixture: %s", e.text);
  return j;
}

static const char *result_text =
  "{\"cells\":["
  "{\"phase\":\"decode\",\"status\":\"valid\",\"context\":8192,\"concurrency\":1,"
  " \"total_tps\":50.5,\"output_tps\":48},"
  "{\"phase\":\"decode\",\"status\":\"valid\",\"context\":4096,\"concurrency\":1,"
  " \"total_tps\":55},"
  "{\"phase\":\"decode\",\"status\":\"valid\",\"context\":8192,\"concurrency\":32,"
  " \"total_tps\":900.25},"
  "{\"phase\":\"decode\",\"status\":\"valid\",\"context\":8192,\"concurrency\":64,"
  " \"total_tps\":\"fast\"},"
  "{\"phase\":\"decode\",\"status\":\"over_capacity\",\"context\":131072,\"concurrency\":64},"
  "{\"phase\":\"prefill\",\"status\":\"valid\",\"context\":8192,\"prompt_tps\":12000},"
  "{\"phase\":\"prefill\",\"status\":\"valid\",\"context\":65536,\"prompt_tps\":15000.5},"
  "{\"phase\":\"prefill\",\"status\":\"error\",\"context\":131072},"
  "{\"phase\":\"decode\",\"status\":\"timeout\"},"
  "{\"status\":\"valid\"}, 7, null, {\"phase\":3,\"status\":\"valid\"}"
  "]}";

static void
test_figures(void **state)
{
  (void)state;
  json_t *r = load(result_text);
  json_t *f = tb_deliver_figures(r);
  json_t *want = load("{\"cells_valid\":6,\"cells_over_capacity\":1,\"cells_error\":2,"
                      "\"best_decode\":{\"context\":8192,\"concurrency\":32,\"total_tps\":900.25},"
                      "\"best_prefill\":{\"context\":65536,\"prompt_tps\":15000.5},"
                      "\"single_stream\":{\"context\":4096,\"tps\":55}}");
  if (!json_equal(f, want)) {
    char *got = json_dumps(f, JSON_SORT_KEYS);
    fail_msg("figures: %s", got);
  }
  json_decref(want);
  json_decref(f);
  json_decref(r);

  /* output_tps wins over total_tps for the single stream when present */
  r = load("{\"cells\":[{\"phase\":\"decode\",\"status\":\"valid\",\"context\":8192,"
           "\"concurrency\":1,\"total_tps\":50.5,\"output_tps\":48}]}");
  f = tb_deliver_figures(r);
  assert_int_equal(json_integer_value(json_object_get(json_object_get(f, "single_stream"), "tps")),
                   48);
  json_decref(f);
  json_decref(r);

  /* no cells, not an object, nothing valid: counts only or nothing */
  const char *empties[] = { "{}", "[]", "{\"cells\":{}}", "{\"cells\":\"x\"}", "7" };
  for (size_t i = 0; i < sizeof empties / sizeof empties[0]; i++) {
    r = load(empties[i]);
    f = tb_deliver_figures(r);
    assert_true(json_is_object(f));
    assert_null(json_object_get(f, "best_decode"));
    json_decref(f);
    json_decref(r);
  }
  f = tb_deliver_figures(NULL);
  assert_int_equal(json_object_size(f), 0);
  json_decref(f);
  r = load("{\"cells\":[{\"phase\":\"decode\",\"status\":\"error\"}]}");
  f = tb_deliver_figures(r);
  assert_int_equal(json_integer_value(json_object_get(f, "cells_error")), 1);
  assert_int_equal(json_integer_value(json_object_get(f, "cells_valid")), 0);
  assert_null(json_object_get(f, "single_stream"));
  json_decref(f);
  json_decref(r);
}

static json_t *
job(void)
{
  return load("{\"id\":\"0b6f8f5e-1111-4222-8333-444455556666\",\"project_id\":\"p1\","
              "\"endpoint_id\":null,\"state\":\"succeeded\",\"error\":null,"
              "\"labels\":{\"team\":\"x\"},\"cells_done\":9,\"cells_total\":9,"
              "\"created_at\":\"2026-01-01T00:00:00Z\",\"secret\":\"must not travel\"}");
}

static void
test_payload(void **state)
{
  (void)state;
  json_t *j = job();
  json_t *r = load(result_text);
  /* 2026-01-02T03:04:05.678Z */
  char *text =
    tb_deliver_payload("job.succeeded", j, r, "https://tb.example.com//", 1767323045678000LL);
  assert_non_null(text);
  json_t *p = load(text);
  assert_string_equal(json_string_value(json_object_get(p, "type")), "job.succeeded");
  assert_string_equal(json_string_value(json_object_get(p, "timestamp")),
                      "2026-01-02T03:04:05.678Z");
  json_t *d = json_object_get(p, "data");
  assert_string_equal(json_string_value(json_object_get(d, "job_id")),
                      "0b6f8f5e-1111-4222-8333-444455556666");
  assert_string_equal(json_string_value(json_object_get(d, "state")), "succeeded");
  assert_true(json_is_null(json_object_get(d, "endpoint_id")));
  assert_true(json_is_null(json_object_get(d, "error")));
  assert_true(json_is_null(json_object_get(d, "started_at"))); /* absent: null */
  assert_null(json_object_get(d, "secret"));                   /* only the listed columns */
  assert_int_equal(json_integer_value(json_object_get(d, "cells_done")), 9);
  assert_int_equal(
    json_integer_value(json_object_get(json_object_get(d, "figures"), "cells_valid")), 6);
  assert_false(json_is_true(json_object_get(d, "regressed")));
  assert_int_equal(json_array_size(json_object_get(d, "regressions")), 0);
  json_t *links = json_object_get(d, "links");
  const char *base = "https://tb.example.com/v1/jobs/0b6f8f5e-1111-4222-8333-444455556666";
  assert_string_equal(json_string_value(json_object_get(links, "job")), base);
  char want[200];
  snprintf(want, sizeof want, "%s/report?format=md", base);
  assert_string_equal(json_string_value(json_object_get(links, "report_md")), want);
  snprintf(want, sizeof want, "%s/result", base);
  assert_string_equal(json_string_value(json_object_get(links, "result")), want);
  json_decref(p);
  free(text);

  /* no result, no event, no public URL: defaults, relative links */
  text = tb_deliver_payload(NULL, j, NULL, NULL, 0);
  p = load(text);
  assert_string_equal(json_string_value(json_object_get(p, "type")), "job.ended");
  assert_string_equal(json_string_value(json_object_get(p, "timestamp")),
                      "1970-01-01T00:00:00.000Z");
  d = json_object_get(p, "data");
  assert_string_equal(json_string_value(json_object_get(json_object_get(d, "links"), "job")),
                      "/v1/jobs/0b6f8f5e-1111-4222-8333-444455556666");
  assert_int_equal(json_object_size(json_object_get(d, "figures")), 0);
  assert_true(json_is_false(json_object_get(d, "regressed")));
  json_decref(p);
  free(text);

  /* a job without an id: no links, job_id null */
  json_t *noid = load("{\"state\":\"failed\"}");
  text = tb_deliver_payload("job.failed", noid, NULL, "https://x", 0);
  p = load(text);
  d = json_object_get(p, "data");
  assert_true(json_is_null(json_object_get(d, "job_id")));
  assert_null(json_object_get(d, "links"));
  json_decref(p);
  free(text);
  json_decref(noid);
  json_decref(r);
  json_decref(j);
}

static void
test_regressions_capped(void **state)
{
  (void)state;
  json_t *j = job();
  json_t *r = json_object();
  json_t *regs = json_array();
  for (int i = 0; i < TB_DELIVER_REGRESSIONS_MAX + 10; i++)
    json_array_append_new(regs, json_pack("{s:i}", "n", i));
  json_object_set_new(r, "regressions", regs);
  char *text = tb_deliver_payload("job.succeeded", j, r, "https://x", 0);
  json_t *p = load(text);
  json_t *d = json_object_get(p, "data");
  assert_true(json_is_true(json_object_get(d, "regressed")));
  assert_int_equal(json_array_size(json_object_get(d, "regressions")), TB_DELIVER_REGRESSIONS_MAX);
  assert_int_equal(json_integer_value(json_object_get(d, "regressions_total")),
                   TB_DELIVER_REGRESSIONS_MAX + 10);
  /* the first ones, in order */
  assert_int_equal(
    json_integer_value(json_object_get(json_array_get(json_object_get(d, "regressions"), 0), "n")),
    0);
  json_decref(p);
  free(text);
  /* regressions of the wrong type count as none */
  json_object_set_new(r, "regressions", json_string("many"));
  text = tb_deliver_payload("job.succeeded", j, r, "https://x", 0);
  p = load(text);
  assert_false(json_is_true(json_object_get(json_object_get(p, "data"), "regressed")));
  json_decref(p);
  free(text);
  json_decref(r);
  json_decref(j);
}

static void
test_payload_cap(void **state)
{
  (void)state;
  json_t *j = job();
  /* labels and an error text far past the cap */
  size_t big = TB_DELIVER_PAYLOAD_MAX + 1000;
  char *s = malloc(big + 1);
  memset(s, 'e', big);
  s[big] = '\0';
  json_object_set_new(j, "error", json_string(s));
  free(s);
  json_t *r = load("{\"regressions\":[{\"metric\":\"ttft\"}]}");
  char *text = tb_deliver_payload("job.failed", j, r, "https://x", 0);
  assert_non_null(text);
  assert_true(strlen(text) < 1000); /* the bulky members dropped */
  json_t *p = load(text);
  assert_string_equal(json_string_value(json_object_get(p, "type")), "job.failed");
  json_t *d = json_object_get(p, "data");
  /* the verdict survives */
  assert_string_equal(json_string_value(json_object_get(d, "job_id")),
                      "0b6f8f5e-1111-4222-8333-444455556666");
  assert_string_equal(json_string_value(json_object_get(d, "state")), "succeeded");
  assert_true(json_is_true(json_object_get(d, "regressed")));
  assert_int_equal(json_integer_value(json_object_get(d, "regressions_total")), 1);
  assert_null(json_object_get(d, "error"));
  json_decref(p);
  free(text);
  json_decref(r);
  json_decref(j);
}

int
main(void)
{
  const struct CMUnitTest tests[] = {
    cmocka_unit_test(test_figures),
    cmocka_unit_test(test_payload),
    cmocka_unit_test(test_regressions_capped),
    cmocka_unit_test(test_payload_cap),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
