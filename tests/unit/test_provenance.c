/* Unit tests: tb_provenance, the result's provenance block: facts read from
 * a header as tb_result writes it (each with its source; "unknown" with
 * why), with no header at all, the spec's hash over its RFC 8785 form, and
 * a cell's entry with its shards. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdlib.h>
#include <string.h>

#include "base/tb_crypto.h"
#include "result/tb_provenance.h"

static const char header[] =
  "{\"engine\": {\"name\": \"vllm\", \"version\": \"0.8.5\"},"
  " \"model\": {\"served\": \"llama\", \"max_model_len\": null},"
  " \"launch_command\": \"vllm serve llama --api-key <redacted>\","
  " \"capacity\": {\"kv_budget_tokens\": 983040,"
  "   \"source\": \"vllm:cache_config_info kv_cache_size_tokens\","
  "   \"max_running_requests\": null, \"version_source\": \"vllm /version\","
  "   \"max_running_source\": \"none\", \"max_model_len_source\": \"none\","
  "   \"unknown\": {\"max_running_requests\": \"vLLM does not publish --max-num-seqs\","
  "               \"max_model_len\": \"/v1/models has no max_model_len\"}}}";

static const char identity[] =
  "{\"engine_source\": \"GET /version\", \"model_source\": \"GET /v1/models\","
  " \"simulator\": false, \"simulator_source\": \"GET /sim/stats answered HTTP 404\"}";

static const json_t *
path(const json_t *o, const char *a, const char *b)
{
  const json_t *v = json_object_get(o, a);
  return b != NULL ? json_object_get(v, b) : v;
}

static const char *
str(const json_t *o, const char *a, const char *b)
{
  return json_string_value(path(o, a, b));
}

static void
test_from_header(void **state)
{
  (void)state;
  json_t *h = json_loads(header, 0, NULL), *id = json_loads(identity, 0, NULL);
  json_t *gpus = json_pack("{s:s, s:i, s:s, s:s}", "name", "NVIDIA H200", "count", 8, "driver",
                           "550.54.15", "source", "telemetry");
  struct tb_provenance_run in = { .header = h, .identity = id, .gpus = gpus };
  json_t *p = tb_provenance_new(&in);
  const json_t *d = json_object_get(p, "discovery");
  assert_string_equal(str(d, "engine", "value"), "vllm");
  assert_string_equal(str(d, "engine", "source"), "GET /version");
  assert_string_equal(str(d, "engine_version", "value"), "0.8.5");
  assert_string_equal(str(d, "engine_version", "source"), "vllm /version");
  assert_string_equal(str(d, "model", "value"), "llama");
  assert_string_equal(str(d, "model", "source"), "GET /v1/models");
  assert_int_equal(json_integer_value(path(d, "kv_budget_tokens", "value")), 983040);
  assert_string_equal(str(d, "kv_budget_tokens", "source"),
                      "vllm:cache_config_info kv_cache_size_tokens");
  /* unknown: the word, and why (the header's own reason) */
  assert_string_equal(str(d, "max_running_requests", "value"), "unknown");
  assert_string_equal(str(d, "max_running_requests", "source"),
                      "vLLM does not publish --max-num-seqs");
  assert_string_equal(str(d, "max_model_len", "value"), "unknown");
  assert_string_equal(str(d, "max_model_len", "source"), "/v1/models has no max_model_len");
  assert_true(json_is_false(path(p, "simulator", "value")));
  assert_string_equal(str(p, "simulator", "source"), "GET /sim/stats answered HTTP 404");
  assert_string_equal(str(p, "launch_command", "value"), "vllm serve llama --api-key <redacted>");
  assert_string_equal(str(p, "gpu", "name"), "NVIDIA H200");
  assert_int_equal(json_integer_value(path(p, "gpu", "count")), 8);
  /* the build, and what the caller has yet to say */
  assert_string_equal(str(p, "tokbench", "version"), TB_VERSION);
  assert_non_null(str(p, "tokbench", "git_commit"));
  assert_non_null(str(p, "tokbench", "compiler"));
  assert_non_null(str(path(p, "tokbench", "libraries"), "openssl", NULL));
  assert_string_equal(str(p, "job_spec_sha256", NULL), "unknown");
  assert_string_equal(str(p, "cells", NULL), "unknown");
  json_decref(p);
  json_decref(gpus);
  json_decref(id);
  json_decref(h);
}

static void
test_nothing_known(void **state)
{
  (void)state;
  struct tb_provenance_run in = { .gpus_why = "the endpoint has no telemetry_url" };
  json_t *p = tb_provenance_new(&in);
  const char *keys[] = { "engine",        "engine_version",   "model",
                         "max_model_len", "kv_budget_tokens", "max_running_requests" };
  for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++) {
    assert_string_equal(str(path(p, "discovery", keys[i]), "value", NULL), "unknown");
    assert_non_null(strstr(str(path(p, "discovery", keys[i]), "source", NULL), "no discovery"));
  }
  assert_string_equal(str(p, "simulator", "value"), "unknown");
  assert_string_equal(str(p, "launch_command", "value"), "unknown");
  assert_string_equal(str(p, "gpu", "name"), "unknown");
  assert_string_equal(str(p, "gpu", "count"), "unknown");
  assert_string_equal(str(p, "gpu", "driver"), "unknown");
  assert_string_equal(str(p, "gpu", "source"), "the endpoint has no telemetry_url");
  json_decref(p);
}

static void
test_spec_hash(void **state)
{
  (void)state;
  struct tb_provenance_run in = { 0 };
  json_t *p = tb_provenance_new(&in);
  json_t *a =
    json_loads("{\"b\": 1, \"a\": [1.50, \"x\"], \"c\": {\"z\": true, \"y\": null}}", 0, NULL);
  json_t *b = json_loads("{\"c\":{\"y\":null,\"z\":true},\"a\":[1.5,\"x\"],\"b\":1}", 0, NULL);
  char want[65];
  const char canon[] = "{\"a\":[1.5,\"x\"],\"b\":1,\"c\":{\"y\":null,\"z\":true}}";
  tb_crypto_sha256_hex(canon, sizeof canon - 1, want);
  tb_provenance_set_spec(p, a, "tokbench-worker");
  assert_string_equal(str(p, "job_spec_sha256", NULL), want);
  assert_string_equal(str(p, "tokbench", "binary"), "tokbench-worker");
  tb_provenance_set_spec(p, b, NULL); /* the same spec written otherwise */
  assert_string_equal(str(p, "job_spec_sha256", NULL), want);
  json_object_set_new(b, "b", json_integer(2));
  tb_provenance_set_spec(p, b, NULL);
  assert_string_not_equal(str(p, "job_spec_sha256", NULL), want);
  tb_provenance_set_spec(p, NULL, NULL);
  assert_string_equal(str(p, "job_spec_sha256", NULL), "unknown");
  json_decref(a);
  json_decref(b);
  json_decref(p);
}

static void
test_cell(void **state)
{
  (void)state;
  json_t *cell = json_loads("{\"phase\": \"decode\", \"context\": 8192, \"concurrency\": 64,"
                            " \"total_tps\": 1000.5, \"shards\": {\"count\": 2, \"where\": ["
                            "  {\"worker\": \"w1\", \"host\": \"h1\", \"skew_ms\": 0.25,"
                            "   \"clock_uncertainty_ms\": 0.1},"
                            "  {\"worker\": \"w2\", \"host\": \"h2\", \"skew_ms\": -0.5,"
                            "   \"clock_uncertainty_ms\": 0.2}]}}",
                            0, NULL);
  json_t *e = tb_provenance_cell(cell, "w0", 2, true, -1.25, 0.5, "tb_clock");
  assert_string_equal(str(e, "phase", NULL), "decode");
  assert_int_equal(json_integer_value(path(e, "context", NULL)), 8192);
  assert_int_equal(json_integer_value(path(e, "concurrency", NULL)), 64);
  assert_string_equal(str(e, "worker", NULL), "w0");
  assert_int_equal(json_integer_value(path(e, "attempt", NULL)), 2);
  assert_true(json_real_value(path(e, "clock_offset_ms", NULL)) == -1.25);
  assert_true(json_real_value(path(e, "clock_uncertainty_ms", NULL)) == 0.5);
  assert_null(path(e, "total_tps", NULL)); /* the key only, not the figures */
  const json_t *sh = path(e, "shards", NULL);
  assert_int_equal(json_array_size(sh), 2);
  assert_string_equal(str(json_array_get(sh, 1), "worker", NULL), "w2");
  assert_int_equal(json_integer_value(path(json_array_get(sh, 1), "shard", NULL)), 1);
  assert_true(json_real_value(path(json_array_get(sh, 1), "start_skew_ms", NULL)) == -0.5);
  json_decref(e);
  e = tb_provenance_cell(cell, NULL, 0, false, 0, 0, NULL);
  assert_string_equal(str(e, "worker", NULL), "unknown");
  assert_string_equal(str(e, "attempt", NULL), "unknown");
  assert_string_equal(str(e, "clock_offset_ms", NULL), "unknown");
  json_decref(e);
  json_decref(cell);
}

int
main(void)
{
  const struct CMUnitTest tests[] = {
    cmocka_unit_test(test_from_header),
    cmocka_unit_test(test_nothing_known),
    cmocka_unit_test(test_spec_hash),
    cmocka_unit_test(test_cell),
  };
  return cmocka_run_group_tests_name("provenance", tests, NULL, NULL);
}
