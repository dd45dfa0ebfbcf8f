/* Unit tests for tb_spec: the one job-spec contract (the table, the walker
 * tb_specwalk, the parsed struct the engine gets, the command line's values
 * of tb_speccli). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "spec/tb_spec.h"
#include "spec/tb_speccli.h"

#define EP "0e7e4b2a-4524-4bd4-9cd9-a930e616e5be"

static json_t *
job_ok(const char *text)
{
  json_t *out = NULL, *errors = NULL;
  assert_int_equal(tb_spec_job(text, strlen(text), &out, &errors), TB_SPEC_OK);
  assert_null(errors);
  return out;
}

/* The fields named by the errors of text, comma-joined, into buf. */
static const char *
job_fields(const char *text, char *buf, size_t len)
{
  json_t *out = NULL, *errors = NULL;
  enum tb_spec_rc rc = tb_spec_job(text, strlen(text), &out, &errors);
  assert_null(out);
  assert_int_not_equal(rc, TB_SPEC_OK);
  buf[0] = '\0';
  size_t i;
  json_t *e;
  json_array_foreach (errors, i, e) {
    if (i > 0)
      snprintf(buf + strlen(buf), len - strlen(buf), ",");
    snprintf(buf + strlen(buf), len - strlen(buf), "%s",
             json_string_value(json_object_get(e, "field")));
  }
  json_decref(errors);
  return buf;
}

static void
test_job_normalized(void **state)
{
  (void)state;
  json_t *o = job_ok("{\"endpoint_id\":\"0E7E4B2A-4524-4BD4-9CD9-A930E616E5BE\","
                     "\"contexts\":[\"8k\",16384,\"251K\"],\"concurrency\":[1,128],"
                     "\"duration_s\":30,\"labels\":{\"gpu\":\"h200\"},\"priority\":-3}");
  assert_string_equal(json_string_value(json_object_get(o, "endpoint_id")), EP);
  json_t *c = json_object_get(o, "contexts");
  assert_int_equal(json_array_size(c), 3);
  assert_int_equal(json_integer_value(json_array_get(c, 0)), 8192);
  assert_int_equal(json_integer_value(json_array_get(c, 2)), 257024);
  assert_int_equal(json_integer_value(json_object_get(o, "priority")), -3);
  json_decref(o);
  /* context 0 (decode with no prompt context) is a decode row, not a
   * prefill one */
  o = job_ok("{\"endpoint_id\":\"" EP "\",\"contexts\":[\"0\",\"1k\"]}");
  c = json_object_get(o, "contexts");
  assert_int_equal(json_integer_value(json_array_get(c, 0)), 0);
  json_decref(o);
}

static void
test_job_errors_name_fields(void **state)
{
  (void)state;
  char buf[512];
  assert_string_equal(job_fields("{}", buf, sizeof buf), "endpoint_id");
  assert_string_equal(
    job_fields("{\"endpoint_id\":\"" EP "\",\"contexts\":[1,\"x\",1]}", buf, sizeof buf),
    "contexts[1],contexts[2]");
  assert_string_equal(job_fields("{\"endpoint_id\":\"" EP "\",\"nope\":1}", buf, sizeof buf),
                      "nope");
  assert_string_equal(
    job_fields("{\"endpoint_id\":\"" EP "\",\"concurrency\":[1.5]}", buf, sizeof buf),
    "concurrency[0]");
  assert_string_equal(job_fields("{\"endpoint_id\":\"" EP "\",\"duration_s\":0}", buf, sizeof buf),
                      "duration_s");
  assert_string_equal(job_fields("{\"endpoint_id\":\"" EP "\",\"contexts\":[-1,0],"
                                 "\"prefill_contexts\":[0]}",
                                 buf, sizeof buf),
                      "contexts[0],prefill_contexts[0]");
  assert_string_equal(
    job_fields("{\"endpoint_id\":\"" EP "\",\"contexts\":[0,\"0k\"]}", buf, sizeof buf),
    "contexts[1]"); /* the same context twice */
  assert_string_equal(
    job_fields("{\"endpoint_id\":\"" EP "\",\"labels\":{\"a b\":\"x\"}}", buf, sizeof buf),
    "labels.a b");
  assert_string_equal(
    job_fields("{\"endpoint_id\":\"" EP "\",\"callbacks\":[\"ftp://x\"]}", buf, sizeof buf),
    "callbacks[0]");
  assert_string_equal(job_fields("{\"endpoint_id\":\"x\",\"max_attempts\":0}", buf, sizeof buf),
                      "endpoint_id,max_attempts");
  /* not JSON, not an object, duplicate keys: bad JSON (400) */
  json_t *out = NULL, *errors = NULL;
  assert_int_equal(tb_spec_job("{", 1, &out, &errors), TB_SPEC_BAD_JSON);
  json_decref(errors);
  assert_int_equal(tb_spec_job("[]", 2, &out, &errors), TB_SPEC_BAD_JSON);
  json_decref(errors);
  const char *dup = "{\"endpoint_id\":\"" EP "\",\"endpoint_id\":\"" EP "\"}";
  assert_int_equal(tb_spec_job(dup, strlen(dup), &out, &errors), TB_SPEC_BAD_JSON);
  json_decref(errors);
}

static void
test_kv_budget_is_what_the_engine_runs(void **state)
{
  (void)state;
  char buf[512];
  /* 1e13 was accepted by the api and refused by the engine at run time */
  assert_string_equal(
    job_fields("{\"endpoint_id\":\"" EP "\",\"kv_budget\":10000000000000}", buf, sizeof buf),
    "kv_budget");
  assert_string_equal(
    job_fields("{\"endpoint_id\":\"" EP "\",\"kv_budget\":1000000000001}", buf, sizeof buf),
    "kv_budget");
  json_t *o = job_ok("{\"endpoint_id\":\"" EP "\",\"kv_budget\":1000000000000}");
  struct tb_spec s;
  char *err = NULL;
  assert_true(tb_spec_parse(&s, o, &err));
  assert_true(s.kv_budget == TB_SPEC_MAX_KV_BUDGET);
  tb_spec_free(&s);
  json_decref(o);
}

static void
test_parse_defaults_and_lists(void **state)
{
  (void)state;
  struct tb_spec s;
  char *err = NULL;
  json_t *o = json_object();
  assert_true(tb_spec_parse(&s, o, &err));
  assert_null(s.model);
  assert_false(s.contexts.given);
  assert_false(s.prefill_contexts.given);
  assert_int_equal(s.concurrency.n, 8);
  assert_int_equal(s.concurrency.v[7], 128);
  assert_true(s.duration_s == 30 && s.settle_s == 3 && s.stall_timeout_s == 20);
  assert_true(s.first_token_timeout_s == 600 && s.ready_timeout_s == 300);
  assert_true(s.drain_timeout_s == 120 && s.metrics_interval_s == 0.25);
  assert_int_equal(s.max_output, 4096);
  assert_int_equal(s.kv_budget, 0);
  assert_int_equal(s.repeats, 1);
  tb_spec_free(&s);
  json_decref(o);
  o = json_loads("{\"model\":\"m\",\"contexts\":[\"16k\",8192],\"concurrency\":[4,1],"
                 "\"prefill_contexts\":[],\"duration_s\":2,\"labels\":{\"a\":\"b\"},"
                 "\"repeats\":3,\"endpoint_id\":\"" EP "\"}",
                 0, NULL);
  assert_true(tb_spec_parse(&s, o, &err));
  assert_string_equal(s.model, "m");
  assert_true(s.contexts.given);
  assert_int_equal(s.contexts.n, 2);
  assert_int_equal(s.contexts.v[0], 8192);  /* sorted */
  assert_int_equal(s.contexts.v[1], 16384); /* normalised */
  assert_int_equal(s.concurrency.v[0], 1);
  assert_true(s.prefill_contexts.given);
  assert_int_equal(s.prefill_contexts.n, 0); /* no prefill rows */
  assert_true(s.duration_s == 2);
  assert_int_equal(s.repeats, 3);
  tb_spec_free(&s);
  json_decref(o);
  /* bad settings name the fields; the old alternate spellings are unknown */
  o =
    json_loads("{\"duration_s\":0,\"concurrencies\":[1],\"contexts\":[],\"repeats\":11}", 0, NULL);
  assert_false(tb_spec_parse(&s, o, &err));
  assert_non_null(strstr(err, "duration_s"));
  assert_non_null(strstr(err, "repeats")); /* 1..10 */
  assert_non_null(strstr(err, "concurrencies unknown field"));
  assert_non_null(strstr(err, "contexts must be an array of 1 to 64 items"));
  free(err);
  tb_spec_free(&s);
  json_decref(o);
  assert_false(tb_spec_parse(&s, NULL, &err));
  free(err);
}

static void
test_command_line_values(void **state)
{
  (void)state;
  json_t *o = json_object();
  assert_true(tb_speccli_arg(tb_spec_field("contexts"), "1k,4K,8192", o));
  assert_true(tb_speccli_arg(tb_spec_field("prefill_contexts"), "none", o));
  assert_true(tb_speccli_arg(tb_spec_field("concurrency"), "1,2", o));
  assert_true(tb_speccli_arg(tb_spec_field("duration_s"), "0.5", o));
  assert_true(tb_speccli_arg(tb_spec_field("kv_budget"), "8k", o));
  assert_true(tb_speccli_arg(tb_spec_field("max_output"), "16", o));
  assert_true(tb_speccli_arg(tb_spec_field("model"), "m", o));
  assert_false(tb_speccli_arg(tb_spec_field("contexts"), "none", o));
  assert_false(tb_speccli_arg(tb_spec_field("contexts"), "1k,x", o));
  assert_false(tb_speccli_arg(tb_spec_field("concurrency"), "1k", o));
  assert_false(tb_speccli_arg(tb_spec_field("duration_s"), "2s", o));
  assert_false(tb_speccli_arg(tb_spec_field("max_output"), "", o));
  struct tb_spec s;
  char *err = NULL;
  assert_true(tb_spec_parse(&s, o, &err));
  assert_int_equal(s.contexts.v[1], 4096);
  assert_int_equal(s.kv_budget, 8192);
  assert_true(s.prefill_contexts.given && s.prefill_contexts.n == 0);
  tb_spec_free(&s);
  /* the range is the table's, the same as the api's */
  assert_true(tb_speccli_arg(tb_spec_field("concurrency"), "5000", o));
  assert_false(tb_spec_parse(&s, o, &err));
  assert_non_null(strstr(err, "concurrency[0] must be an integer from 1 to 4096"));
  free(err);
  tb_spec_free(&s);
  json_decref(o);
}

static void
test_override(void **state)
{
  (void)state;
  json_t *preset = json_loads("{\"endpoint_id\":\"" EP "\",\"duration_s\":5,"
                              "\"labels\":{\"a\":\"1\",\"b\":\"2\"}}",
                              0, NULL);
  json_t *extra = json_loads("{\"labels\":{\"b\":\"3\"},\"duration_s\":99}", 0, NULL);
  json_t *m = tb_spec_override(preset, extra);
  /* labels merge; duration_s is not a field a hook may override */
  assert_string_equal(json_string_value(json_object_get(json_object_get(m, "labels"), "a")), "1");
  assert_string_equal(json_string_value(json_object_get(json_object_get(m, "labels"), "b")), "3");
  assert_true(json_number_value(json_object_get(m, "duration_s")) == 5);
  assert_string_equal(json_string_value(json_object_get(json_object_get(preset, "labels"), "b")),
                      "2"); /* borrowed, untouched */
  json_decref(m);
  m = tb_spec_override(NULL, NULL);
  assert_int_equal(json_object_size(m), 0);
  json_decref(m);
  json_decref(extra);
  json_decref(preset);
}

static void
test_table(void **state)
{
  (void)state;
  size_t n;
  const struct tb_spec_field *f = tb_spec_fields(&n);
  json_t *t = tb_speccli_table_json();
  assert_int_equal(json_array_size(t), n);
  for (size_t i = 0; i < n; i++) {
    json_t *row = json_array_get(t, i);
    assert_string_equal(json_string_value(json_object_get(row, "name")), f[i].name);
    assert_ptr_equal(tb_spec_field(f[i].name), &f[i]);
    /* every default is valid for its own field */
    if (f[i].def != NULL) {
      char *text = tb_xasprintf("{\"endpoint_id\":\"" EP "\",\"%s\":%s}", f[i].name, f[i].def);
      json_decref(job_ok(text));
      free(text);
    }
  }
  json_t *kv = json_array_get(t, (size_t)(tb_spec_field("kv_budget") - f));
  assert_string_equal(json_string_value(json_object_get(kv, "name")), "kv_budget");
  assert_true(json_number_value(json_object_get(kv, "max")) == 1e12);
  assert_null(tb_spec_field("nope"));
  json_decref(t);
}

/* Rate cells' fields (issue 15): defaults from the table (objects' rows
 * included), number lists sorted, checked strings, objects from the command
 * line's "k=v,k=v". */
static void
test_rate_fields(void **state)
{
  (void)state;
  char buf[512];
  struct tb_spec s;
  char *err = NULL;
  json_t *o = json_object();
  assert_true(tb_spec_parse(&s, o, &err));
  assert_string_equal(s.arrival, "poisson");
  assert_string_equal(s.input_tokens, "1024");
  assert_string_equal(s.output_tokens, "128");
  assert_true(s.rate_duration_s == 60 && s.rate_requests == 0 && s.seed == 1);
  assert_true(s.sweep.attainment_pct == 0 && s.sweep.min_rps == 1 && s.sweep.max_rps == 100);
  assert_true(s.sweep.step_rps == 1 && s.sweep.max_probes == 16);
  assert_true(s.slo.ttft_ms == 0 && s.slo.tpot_ms == 0 && s.rates.n == 0);
  tb_spec_free(&s);
  json_decref(o);
  /* the command line builds what a job body says */
  const struct tb_spec_field *rates = tb_spec_field("rates"), *slo = tb_spec_field("slo");
  o = json_object();
  assert_true(tb_speccli_arg(rates, "10,1,2.5", o));
  assert_true(tb_speccli_arg(slo, "ttft_ms=500,tpot_ms=50", o));
  assert_true(tb_speccli_arg(tb_spec_field("arrival"), "gamma:2", o));
  assert_false(tb_speccli_arg(slo, "ttft=5", o));    /* no such member */
  assert_false(tb_speccli_arg(slo, "ttft_ms=x", o)); /* not a number */
  assert_false(tb_speccli_arg(rates, "1,x", o));
  assert_true(tb_spec_parse(&s, o, &err));
  assert_int_equal(s.rates.n, 3);
  assert_true(s.rates.v[0] == 1 && s.rates.v[1] == 2.5 && s.rates.v[2] == 10); /* sorted */
  assert_true(s.slo.ttft_ms == 500 && s.slo.tpot_ms == 50 && s.slo.e2e_ms == 0);
  assert_string_equal(s.arrival, "gamma:2");
  tb_spec_free(&s);
  json_decref(o);
  /* the api refuses what the engine could not run */
  assert_string_equal(
    job_fields("{\"endpoint_id\":\"" EP "\",\"arrival\":\"gamma:0\"}", buf, sizeof buf), "arrival");
  assert_string_equal(job_fields("{\"endpoint_id\":\"" EP "\",\"rates\":[1,1]}", buf, sizeof buf),
                      "rates[1]");
  assert_string_equal(
    job_fields("{\"endpoint_id\":\"" EP "\",\"input_tokens\":\"uniform:9-3\"}", buf, sizeof buf),
    "input_tokens");
  assert_string_equal(
    job_fields("{\"endpoint_id\":\"" EP "\",\"slo\":{\"ttft\":1}}", buf, sizeof buf), "slo.ttft");
  assert_string_equal(
    job_fields("{\"endpoint_id\":\"" EP "\",\"sweep\":{\"max_probes\":1}}", buf, sizeof buf),
    "sweep.max_probes");
  json_decref(job_ok("{\"endpoint_id\":\"" EP "\",\"rates\":[0.5,3],\"arrival\":\"constant\","
                     "\"input_tokens\":\"uniform:1k-2k\",\"slo\":{\"e2e_ms\":900},"
                     "\"sweep\":{\"attainment_pct\":90}}"));
}

/* shards (issue 24): an integer 1..64, or "auto"; anything else names the
 * field and says both forms.  The worker's setting (no member: the engine
 * runs one shard or one whole cell, never sees it). */
static void
test_shards_field(void **state)
{
  (void)state;
  json_t *o = job_ok("{\"endpoint_id\":\"" EP "\",\"shards\":3}");
  assert_int_equal(json_integer_value(json_object_get(o, "shards")), 3);
  json_decref(o);
  o = job_ok("{\"endpoint_id\":\"" EP "\",\"shards\":\"auto\"}");
  assert_string_equal(json_string_value(json_object_get(o, "shards")), "auto");
  json_decref(o);
  char buf[256];
  const char *bad[] = { "0", "65", "\"AUTO\"", "\"3\"", "2.5", "null", "[2]" };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    char text[200];
    snprintf(text, sizeof text, "{\"endpoint_id\":\"" EP "\",\"shards\":%s}", bad[i]);
    assert_string_equal(job_fields(text, buf, sizeof buf), "shards");
  }
  json_t *out = NULL, *errors = NULL;
  const char *zero = "{\"endpoint_id\":\"" EP "\",\"shards\":0}";
  assert_int_equal(tb_spec_job(zero, strlen(zero), &out, &errors), TB_SPEC_INVALID);
  assert_non_null(
    strstr(json_string_value(json_object_get(json_array_get(errors, 0), "detail")), "or \"auto\""));
  json_decref(errors);
  /* the table says so */
  const struct tb_spec_field *f = tb_spec_field("shards");
  assert_non_null(f);
  assert_true(f->flags & TB_SPEC_AUTO);
  assert_true(f->member == TB_SPEC_NO_MEMBER);
  assert_string_equal(f->def, "1");
}

/* issue 24: shards beside a trace is refused naming shards (a trace cell
 * is not sharded); shards 1, or a trace alone, or shards alone pass. */
static void
test_shards_refused_with_a_trace(void **state)
{
  (void)state;
  char buf[200];
  const char *tr = "\"trace\":{\"format\":\"mooncake\"}";
  char text[400];
  snprintf(text, sizeof text, "{\"endpoint_id\":\"%s\",\"shards\":2,%s}", EP, tr);
  assert_string_equal(job_fields(text, buf, sizeof buf), "shards");
  snprintf(text, sizeof text, "{\"endpoint_id\":\"%s\",\"shards\":\"auto\",%s}", EP, tr);
  assert_string_equal(job_fields(text, buf, sizeof buf), "shards");
  json_t *out = NULL, *errors = NULL;
  assert_int_equal(tb_spec_job(text, strlen(text), &out, &errors), TB_SPEC_INVALID);
  assert_non_null(strstr(json_string_value(json_object_get(json_array_get(errors, 0), "detail")),
                         "a trace cell cannot be sharded"));
  json_decref(errors);
  snprintf(text, sizeof text, "{\"endpoint_id\":\"%s\",\"shards\":1,%s}", EP, tr);
  json_decref(job_ok(text));
  snprintf(text, sizeof text, "{\"endpoint_id\":\"%s\",%s}", EP, tr);
  json_decref(job_ok(text));
  snprintf(text, sizeof text, "{\"endpoint_id\":\"%s\",\"shards\":3,\"rates\":[5]}", EP);
  json_decref(job_ok(text));
  /* a sweep alone: nothing to shard; beside rates or a matrix: those are */
  const char *sw = "\"sweep\":{\"attainment_pct\":90}";
  snprintf(text, sizeof text, "{\"endpoint_id\":\"%s\",\"shards\":2,%s}", EP, sw);
  assert_string_equal(job_fields(text, buf, sizeof buf), "shards");
  snprintf(text, sizeof text, "{\"endpoint_id\":\"%s\",\"shards\":2,\"rates\":[5],%s}", EP, sw);
  json_decref(job_ok(text));
  snprintf(text, sizeof text, "{\"endpoint_id\":\"%s\",\"shards\":2,\"concurrency\":[4],%s}", EP,
           sw);
  json_decref(job_ok(text));
}

/* traceid: trace.format may be left out beside trace.id (the stored
 * trace's: the api writes it, the worker takes it from the store); a trace
 * object with neither is refused naming trace.id; a format given is still
 * checked; tb_spec_parse leaves format "" for the worker to fill. */
static void
test_trace_format_optional_beside_id(void **state)
{
  (void)state;
  char buf[200], text[400];
  const char *id = "7C4F1E0A-2B7D-4E0C-9A51-3F6B8D2E1A90";
  snprintf(text, sizeof text, "{\"endpoint_id\":\"%s\",\"trace\":{\"id\":\"%s\"}}", EP, id);
  json_t *o = job_ok(text);
  json_t *t = json_object_get(o, "trace");
  assert_string_equal(json_string_value(json_object_get(t, "id")),
                      "7c4f1e0a-2b7d-4e0c-9a51-3f6b8d2e1a90");
  assert_null(json_object_get(t, "format")); /* the api fills it from the store */
  struct tb_spec s;
  char *err = NULL;
  assert_true(tb_spec_parse(&s, o, &err));
  assert_null(err);
  assert_string_equal(s.trace.format, "");
  tb_spec_free(&s);
  json_decref(o);
  /* a file's trace: the format alone, as before */
  snprintf(text, sizeof text, "{\"endpoint_id\":\"%s\",\"trace\":{\"format\":\"weka\"}}", EP);
  json_decref(job_ok(text));
  /* neither: trace.id, saying format may be left out beside it */
  const char *none[] = { "{}", "{\"speedup\":2}", "{\"format\":null}" };
  for (size_t i = 0; i < 2; i++) {
    snprintf(text, sizeof text, "{\"endpoint_id\":\"%s\",\"trace\":%s}", EP, none[i]);
    assert_string_equal(job_fields(text, buf, sizeof buf), "trace.id");
    json_t *out = NULL, *errors = NULL;
    assert_int_equal(tb_spec_job(text, strlen(text), &out, &errors), TB_SPEC_INVALID);
    assert_non_null(strstr(json_string_value(json_object_get(json_array_get(errors, 0), "detail")),
                           "trace.format may be left out"));
    json_decref(errors);
  }
  snprintf(text, sizeof text, "{\"endpoint_id\":\"%s\",\"trace\":%s}", EP, none[2]);
  assert_string_equal(job_fields(text, buf, sizeof buf), "trace.format"); /* null: not a string */
  /* a format given beside an id is still one of the five */
  snprintf(text, sizeof text,
           "{\"endpoint_id\":\"%s\",\"trace\":{\"id\":\"%s\",\"format\":\"csv\"}}", EP, id);
  assert_string_equal(job_fields(text, buf, sizeof buf), "trace.format");
  snprintf(text, sizeof text, "{\"endpoint_id\":\"%s\",\"trace\":{\"id\":\"nope\"}}", EP);
  assert_string_equal(job_fields(text, buf, sizeof buf), "trace.id");
  /* the table and its help say so */
  const struct tb_spec_field *f = tb_spec_field("trace");
  assert_non_null(f);
  const struct tb_spec_field *fmt = NULL;
  for (size_t i = 0; i < f->nsub; i++)
    if (strcmp(f->sub[i].name, "format") == 0)
      fmt = &f->sub[i];
  assert_non_null(fmt);
  assert_false(fmt->flags & TB_SPEC_REQUIRED);
  assert_non_null(strstr(fmt->help, "optional beside id"));
}

int
main(void)
{
  const struct CMUnitTest tests[] = {
    cmocka_unit_test(test_trace_format_optional_beside_id),
    cmocka_unit_test(test_shards_refused_with_a_trace),
    cmocka_unit_test(test_job_normalized),
    cmocka_unit_test(test_job_errors_name_fields),
    cmocka_unit_test(test_kv_budget_is_what_the_engine_runs),
    cmocka_unit_test(test_parse_defaults_and_lists),
    cmocka_unit_test(test_command_line_values),
    cmocka_unit_test(test_override),
    cmocka_unit_test(test_table),
    cmocka_unit_test(test_rate_fields),
    cmocka_unit_test(test_shards_field),
  };
  return cmocka_run_group_tests_name("spec", tests, NULL, NULL);
}
