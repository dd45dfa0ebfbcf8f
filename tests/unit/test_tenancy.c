/* Unit tests: tb_tenancy (issue 13): a job's size from its spec (the bound
 * of its plan, tb_plan_job_seconds, which the api passes in), the limits of
 * a job, the settings (shared groups normalised, bad ones refused). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdlib.h>
#include <string.h>

#include "spec/tb_plan.h"
#include "spec/tb_spec.h"
#include "db/tb_tenancy.h"

static const struct tb_cfg_key keys[] = { TB_TENANCY_CFG_KEYS };

static json_t *
spec_of(const char *text)
{
  json_t *spec = NULL, *errors = NULL;
  assert_int_equal(tb_spec_job(text, strlen(text), &spec, &errors), TB_SPEC_OK);
  return spec;
}

static void
test_job_seconds(void **state)
{
  (void)state;
  /* README's quick start: 2 x 3 decode + 3 prefill (2 + full length) cells,
   * each 2 s + the default 3 s settle */
  json_t *s = spec_of("{\"endpoint_id\":\"00000000-0000-4000-8000-000000000001\","
                      "\"contexts\":[\"1k\",\"4k\"],\"concurrency\":[1,2,4],\"duration_s\":2}");
  assert_float_equal(tb_plan_job_seconds(s, 0), 9 * 5.0, 1e-9);
  json_decref(s);
  /* all defaults: 6 contexts x 8 concurrencies + 7 prefill, 30 + 3 s */
  s = spec_of("{\"endpoint_id\":\"00000000-0000-4000-8000-000000000001\"}");
  assert_float_equal(tb_plan_job_seconds(s, 0), 55 * 33.0, 1e-9);
  json_decref(s);
  /* no prefill rows */
  s = spec_of("{\"endpoint_id\":\"00000000-0000-4000-8000-000000000001\",\"contexts\":[1024],"
              "\"concurrency\":[1,2],\"prefill_contexts\":[],\"duration_s\":10,\"settle_s\":0}");
  assert_float_equal(tb_plan_job_seconds(s, 0), 20.0, 1e-9);
  json_decref(s);
  /* repeats: every pass is the whole matrix again */
  s = spec_of("{\"endpoint_id\":\"00000000-0000-4000-8000-000000000001\",\"contexts\":[1024],"
              "\"concurrency\":[1,2],\"prefill_contexts\":[],\"duration_s\":10,\"settle_s\":0,"
              "\"repeats\":3}");
  assert_float_equal(tb_plan_job_seconds(s, 0), 60.0, 1e-9);
  json_decref(s);
  /* rate cells alone: each rate's arrivals (rate_requests / rate when
   * given), a sweep at max_probes probes of its lowest rate */
  s = spec_of("{\"endpoint_id\":\"00000000-0000-4000-8000-000000000001\",\"rates\":[1,4],"
              "\"rate_duration_s\":30}");
  assert_float_equal(tb_plan_job_seconds(s, 0), 60.0, 1e-9);
  json_decref(s);
  s = spec_of("{\"endpoint_id\":\"00000000-0000-4000-8000-000000000001\",\"rates\":[4],"
              "\"rate_requests\":100,\"sweep\":{\"attainment_pct\":90,\"min_rps\":2,"
              "\"max_probes\":5}}");
  assert_float_equal(tb_plan_job_seconds(s, 0), 25 + 5 * 50.0, 1e-9);
  json_decref(s);
  /* with the matrix asked for too, both count */
  s = spec_of("{\"endpoint_id\":\"00000000-0000-4000-8000-000000000001\",\"contexts\":[1024],"
              "\"concurrency\":[1],\"prefill_contexts\":[],\"duration_s\":10,\"settle_s\":0,"
              "\"rates\":[2],\"rate_duration_s\":5}");
  assert_float_equal(tb_plan_job_seconds(s, 0), 15.0, 1e-9);
  json_decref(s);
  json_t *bad = json_pack("{s:s}", "duration_s", "long");
  assert_true(tb_plan_job_seconds(bad, 0) < 0);
  json_decref(bad);
}

/* tb_tenancy_check_job on spec as the api calls it: its bound, its own
 * max_attempts. */
static bool
check_spec(const struct tb_tenancy *t, const json_t *spec, struct tb_tenancy_refusal *why)
{
  struct tb_spec_job_row jr;
  tb_spec_job_row(spec, &jr);
  double secs = t->job_seconds > 0 ? tb_plan_job_seconds(spec, 0) : -1;
  return tb_tenancy_check_job(t, secs, jr.max_attempts_given ? jr.max_attempts : 0, why);
}

static void
test_check_spec(void **state)
{
  (void)state;
  struct tb_tenancy t = { .job_seconds = 100, .max_attempts = 3 };
  struct tb_tenancy_refusal why;
  json_t *s = spec_of("{\"endpoint_id\":\"00000000-0000-4000-8000-000000000001\","
                      "\"contexts\":[1024],\"concurrency\":[1],\"prefill_contexts\":[],"
                      "\"duration_s\":100,\"settle_s\":0}");
  assert_true(check_spec(&t, s, &why));
  json_object_set_new(s, "settle_s", json_real(0.5));
  assert_false(check_spec(&t, s, &why));
  assert_string_equal(why.limit, "job_seconds");
  assert_true(why.too_large);
  assert_int_equal(why.max, 100);
  t.job_seconds = 0; /* no limit */
  assert_true(check_spec(&t, s, &why));
  json_object_set_new(s, "max_attempts", json_integer(4));
  assert_false(check_spec(&t, s, &why));
  assert_string_equal(why.limit, "max_attempts");
  assert_string_equal(why.setting, "TOKBENCH_LIMIT_MAX_ATTEMPTS");
  json_object_set_new(s, "max_attempts", json_integer(3)); /* at the limit: fits */
  assert_true(check_spec(&t, s, &why));
  json_decref(s);
  /* the project's count, refused by the job insert */
  t.queued = 5;
  tb_tenancy_refuse_queued(&t, 5, &why);
  assert_string_equal(why.limit, "queued_jobs");
  assert_string_equal(why.setting, "TOKBENCH_LIMIT_QUEUED");
  assert_false(why.too_large);
  assert_int_equal(why.max, 5);
  assert_true(why.value == 5);
  assert_non_null(strstr(why.detail, "queued jobs: 5"));
}

static void
test_cfg(void **state)
{
  (void)state;
  struct tb_cfg *cfg = tb_cfg_new(keys, TB_ARRAY_LEN(keys));
  struct tb_tenancy t;
  char *err = NULL;
  assert_true(tb_tenancy_from_cfg(&t, cfg, &err));
  assert_int_equal(t.queued, 100);
  assert_int_equal(t.running, 8);
  assert_int_equal(t.job_seconds, 21600);
  assert_int_equal(t.max_attempts, 5);
  assert_int_equal(t.retention_s, 604800);
  assert_string_equal(t.shared_groups, "");
  tb_tenancy_clear(&t);
  tb_cfg_set(cfg, "TOKBENCH_SHARED_GROUPS", " rack-7 , lab.a100,,h100_1 ");
  assert_true(tb_tenancy_from_cfg(&t, cfg, &err));
  assert_string_equal(t.shared_groups, "rack-7,lab.a100,h100_1");
  tb_tenancy_clear(&t);
  tb_cfg_set(cfg, "TOKBENCH_SHARED_GROUPS", "ok,not ok");
  assert_false(tb_tenancy_from_cfg(&t, cfg, &err));
  assert_non_null(strstr(err, "TOKBENCH_SHARED_GROUPS"));
  free(err);
  err = NULL;
  tb_cfg_set(cfg, "TOKBENCH_SHARED_GROUPS", "");
  tb_cfg_set(cfg, "TOKBENCH_LIMIT_MAX_ATTEMPTS", "21");
  assert_false(tb_tenancy_from_cfg(&t, cfg, &err));
  free(err);
  tb_cfg_free(cfg);
}

int
main(void)
{
  const struct CMUnitTest tests[] = {
    cmocka_unit_test(test_job_seconds),
    cmocka_unit_test(test_check_spec),
    cmocka_unit_test(test_cfg),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
