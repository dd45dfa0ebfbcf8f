/* Unit tests: tb_discover's parsers (models, SGLang server info, vLLM version
 * and metrics), with real shapes and hostile values. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdlib.h>
#include <string.h>

#include "engine/tb_discover.h"

#define PARSE(fn, d, text) fn(d, text, strlen(text))

static void
test_models(void **state)
{
  (void)state;
  struct tb_discover d;
  tb_discover_init(&d, "http://h:8000//");
  assert_string_equal(d.base_url, "http://h:8000");
  char *err = NULL;
  const char *body = "{\"object\":\"list\",\"data\":[{\"id\":\"a\",\"max_model_len\":4096},"
                     "{\"id\":\"step\",\"max_model_len\":262144}]}";
  assert_true(tb_discover_parse_models(&d, body, strlen(body), "step", &err));
  assert_string_equal(d.model, "step");
  assert_int_equal(d.max_model_len, 262144);
  assert_true(tb_discover_parse_models(&d, body, strlen(body), NULL, &err));
  assert_string_equal(d.model, "a");
  assert_false(tb_discover_parse_models(&d, body, strlen(body), "nope", &err));
  assert_non_null(strstr(err, "nope"));
  free(err);
  err = NULL;
  assert_false(tb_discover_parse_models(&d, "<html>", 6, NULL, &err));
  assert_non_null(strstr(err, "not JSON"));
  free(err);
  err = NULL;
  const char *bad = "{\"data\":[{\"id\":\"x\",\"max_model_len\":1e300}]}";
  assert_true(tb_discover_parse_models(&d, bad, strlen(bad), NULL, &err));
  assert_int_equal(d.max_model_len, -1); /* not a count: unknown */
  tb_discover_free(&d);
}

static void
test_sglang_server_info(void **state)
{
  (void)state;
  struct tb_discover d;
  tb_discover_init(&d, "http://h");
  d.max_model_len = -1;
  const char *si = "{\"version\":\"0.0.0.dev1+gf92199b56\",\"max_total_num_tokens\":622592,"
                   "\"max_running_requests\":128,\"context_length\":262144,\"tp_size\":4}";
  assert_true(PARSE(tb_discover_parse_server_info, &d, si));
  assert_int_equal(d.kind, TB_KIND_SGLANG);
  assert_string_equal(d.version, "0.0.0.dev1+gf92199b56");
  assert_int_equal(d.kv_budget, 622592);
  assert_string_equal(d.kv_source, "sglang /get_server_info max_total_num_tokens");
  assert_string_equal(d.max_running_source, "sglang /get_server_info max_running_requests");
  assert_string_equal(d.version_source, "sglang /get_server_info version");
  assert_int_equal(d.max_running, 128);
  assert_int_equal(d.max_model_len, 262144);
  assert_true(d.tokenize_text_only);
  tb_discover_free(&d);

  tb_discover_init(&d, "http://h");
  assert_false(PARSE(tb_discover_parse_server_info, &d, "{\"model\":\"x\"}"));
  assert_false(PARSE(tb_discover_parse_server_info, &d, "[1,2]"));
  assert_false(PARSE(tb_discover_parse_server_info, &d, "{\"max_total_num_tokens\""));
  assert_int_equal(d.kind, TB_KIND_OPENAI);
  /* hostile values: no count, no crash */
  assert_true(PARSE(tb_discover_parse_server_info, &d,
                    "{\"max_total_num_tokens\":-5,\"max_running_requests\":1.5e308,"
                    "\"version\":7}"));
  assert_int_equal(d.kv_budget, -1);
  assert_int_equal(d.max_running, -1);
  assert_null(d.version);
  tb_discover_free(&d);
}

static void
test_vllm_version_and_metrics(void **state)
{
  (void)state;
  struct tb_discover d;
  tb_discover_init(&d, "http://h");
  assert_true(PARSE(tb_discover_parse_version, &d, "{\"version\":\"0.26.1rc1.dev638\"}"));
  assert_int_equal(d.kind, TB_KIND_VLLM);
  assert_string_equal(d.version, "0.26.1rc1.dev638");
  const char *m = "# HELP vllm:cache_config_info Information of the LLMEngine CacheConfig\n"
                  "# TYPE vllm:cache_config_info gauge\n"
                  "vllm:cache_config_info{block_size=\"16\",num_gpu_blocks=\"61440\","
                  "kv_cache_size_tokens=\"983040\",max_num_seqs=\"128\"} 1.0\n"
                  "vllm:num_requests_running{model_name=\"step\"} 0.0\n";
  tb_discover_parse_metrics(&d, m, strlen(m));
  assert_true(d.has_metrics);
  assert_int_equal(d.kv_budget, 983040);
  assert_string_equal(d.kv_source, "vllm:cache_config_info kv_cache_size_tokens");
  assert_int_equal(d.max_running, 128);
  tb_discover_free(&d);

  /* no kv_cache_size_tokens: blocks x block size, floats as vLLM writes them */
  tb_discover_init(&d, "http://h");
  const char *m2 = "vllm:cache_config_info{block_size=\"16.0\",num_gpu_blocks=\"61440\"} 1\n";
  tb_discover_parse_metrics(&d, m2, strlen(m2));
  assert_int_equal(d.kv_budget, 983040);
  tb_discover_free(&d);

  /* a product that would overflow, and junk: unknown, not a crash */
  tb_discover_init(&d, "http://h");
  const char *m3 = "vllm:cache_config_info{block_size=\"9000000000000000000\","
                   "num_gpu_blocks=\"9000000000000000000\",max_num_seqs=\"x\"} 1\n";
  tb_discover_parse_metrics(&d, m3, strlen(m3));
  assert_int_equal(d.kv_budget, -1);
  assert_int_equal(d.max_running, -1);
  assert_false(d.has_metrics); /* no running gauge: readiness is the client's */
  assert_string_equal(d.kv_unknown,
                      "vllm:cache_config_info has no kv_cache_size_tokens nor num_gpu_blocks");
  tb_discover_free(&d);

  /* "vllm:" in a comment only is not a vLLM server */
  tb_discover_init(&d, "http://h");
  const char *m4 = "# compatible with vllm: metrics\nother_metric 1\n";
  tb_discover_parse_metrics(&d, m4, strlen(m4));
  assert_false(d.has_metrics);
  assert_int_equal(d.kind, TB_KIND_OPENAI);
  tb_discover_free(&d);
}

/* Whether the endpoint is tokbench-sim (GET /sim/stats), each answer with
 * its source, and the identity block the provenance reads. */
static void
test_simulator(void **state)
{
  (void)state;
  struct tb_discover d;
  tb_discover_init(&d, "http://h");
  json_t *id = tb_discover_identity(&d);
  assert_string_equal(json_string_value(json_object_get(id, "simulator")), "unknown");
  assert_non_null(strstr(json_string_value(json_object_get(id, "engine_source")), "generic"));
  assert_string_equal(json_string_value(json_object_get(id, "model_source")), "GET /v1/models");
  json_decref(id);
  const char *sim = "{\"requests\": 3, \"steps\": 10, \"late_steps\": 0, "
                    "\"kv_reserved_tokens\": 0, \"kv_budget_tokens\": 24576, "
                    "\"tokens_generated\": 99}";
  tb_discover_parse_sim(&d, 200, sim, strlen(sim), NULL);
  assert_int_equal(d.simulator, 1);
  id = tb_discover_identity(&d);
  assert_true(json_is_true(json_object_get(id, "simulator")));
  json_decref(id);
  const char *other = "{\"steps\": \"ten\"}";
  tb_discover_parse_sim(&d, 200, other, strlen(other), NULL);
  assert_int_equal(d.simulator, 0);
  assert_non_null(strstr(d.simulator_source, "without tokbench-sim's counters"));
  tb_discover_parse_sim(&d, 404, NULL, 0, NULL);
  assert_int_equal(d.simulator, 0);
  assert_non_null(strstr(d.simulator_source, "HTTP 404"));
  tb_discover_parse_sim(&d, 0, NULL, 0, "Connection refused");
  assert_int_equal(d.simulator, -1);
  assert_non_null(strstr(d.simulator_source, "Connection refused"));
  tb_discover_free(&d);
}

int
main(void)
{
  const struct CMUnitTest tests[] = {
    cmocka_unit_test(test_simulator),
    cmocka_unit_test(test_models),
    cmocka_unit_test(test_sglang_server_info),
    cmocka_unit_test(test_vllm_version_and_metrics),
  };
  return cmocka_run_group_tests_name("discover", tests, NULL, NULL);
}
