/*
 * Unit tests for tb_import: a result file in llm-inference-bench's format
 * (tests/fixtures/llm_inference_bench_vllm.json, the vllm seed as the tool
 * writes it) becomes our result document with the same figures; our own
 * documents are checked and copied; malformed input is refused, not crashed on.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "fixture.h"
#include "result/tb_import.h"
#include "render/tb_report.h"

#define LIB_FIXTURE "tests/fixtures/llm_inference_bench_vllm.json"

static const json_t *
find(const json_t *doc, const char *phase, json_int_t ctx, json_int_t conc)
{
  size_t i;
  const json_t *c;
  json_array_foreach (json_object_get(doc, "cells"), i, c) {
    if (strcmp(json_string_value(json_object_get(c, "phase")), phase) == 0 &&
        json_integer_value(json_object_get(c, "context")) == ctx &&
        json_integer_value(json_object_get(c, "concurrency")) == conc)
      return c;
  }
  return NULL;
}

static void
test_llm_inference_bench(void **state)
{
  json_t *in = fixture_json(LIB_FIXTURE);
  char *err = NULL;
  enum tb_import_source src;
  json_t *doc = tb_import(in, &src, &err);
  assert_non_null(doc);
  assert_int_equal(src, TB_IMPORT_LLM_INFERENCE_BENCH);
  assert_string_equal(json_string_value(json_object_get(doc, "schema")), "tokbench.result/v1");
  assert_string_equal(json_string_value(json_object_get(doc, "status")), "complete");
  assert_string_equal(json_string_value(json_object_get(json_object_get(doc, "engine"), "name")),
                      "vllm");
  assert_string_equal(json_string_value(json_object_get(json_object_get(doc, "model"), "served")),
                      "step");
  const json_t *imp = json_object_get(doc, "imported_from");
  assert_string_equal(json_string_value(json_object_get(imp, "tool")), "llm-inference-bench");
  assert_string_equal(json_string_value(json_object_get(imp, "version")), "0.4.29");
  assert_int_equal(
    json_integer_value(json_object_get(json_object_get(doc, "capacity"), "kv_budget_tokens")),
    917504);
  /* 7 prefill contexts + 6 x 8 decode cells. */
  assert_int_equal(json_array_size(json_object_get(doc, "cells")), 7 + 48);

  /* Every result of the tool, with its figures converted. */
  size_t i;
  const json_t *r;
  json_array_foreach (json_object_get(in, "results"), i, r) {
    json_int_t ctx = json_integer_value(json_object_get(r, "context_tokens"));
    json_int_t conc = json_integer_value(json_object_get(r, "concurrency"));
    const json_t *c = find(doc, "decode", ctx, conc);
    assert_non_null(c);
    assert_string_equal(json_string_value(json_object_get(c, "status")), "valid");
    assert_true(json_number_value(json_object_get(c, "total_tps")) ==
                json_number_value(json_object_get(r, "aggregate_tps")));
    assert_true(fabs(json_number_value(json_object_get(json_object_get(c, "ttft_ms"), "p50")) -
                     1e3 * json_number_value(json_object_get(r, "ttft_p50"))) < 1e-9);
    assert_true(fabs(json_number_value(json_object_get(json_object_get(c, "tbt_ms"), "p99")) -
                     1e3 * json_number_value(json_object_get(r, "inter_token_latency_p99"))) <
                1e-9);
    assert_int_equal(json_integer_value(json_object_get(c, "output_tokens")),
                     json_integer_value(json_object_get(r, "total_tokens")));
    assert_true(json_number_value(json_object_get(c, "measured_s")) == 30.0);
  }
  /* The cells the tool left out are Over capacity by the KV budget. */
  const json_t *c = find(doc, "decode", 8192, 128);
  assert_string_equal(json_string_value(json_object_get(c, "status")), "over_capacity");
  c = find(doc, "decode", 257024, 4);
  assert_string_equal(json_string_value(json_object_get(c, "status")), "over_capacity");
  c = find(doc, "decode", 8192, 64);
  assert_string_equal(json_string_value(json_object_get(c, "status")), "valid");
  /* Prefill: prompt tok/s = prompt tokens / TTFT. */
  c = find(doc, "prefill", 16384, 1);
  assert_non_null(c);
  const json_t *p = json_object_get(json_object_get(in, "prefill"), "16384");
  double ttft = json_number_value(json_object_get(p, "ttft_seconds"));
  json_int_t pt = json_integer_value(json_object_get(p, "prompt_tokens"));
  assert_int_equal(json_integer_value(json_object_get(c, "prompt_tokens")), pt);
  assert_true(fabs(json_number_value(json_object_get(c, "ttft_ms")) - ttft * 1e3) < 1e-9);
  assert_true(fabs(json_number_value(json_object_get(c, "prompt_tps")) - (double)pt / ttft) < 1e-9);

  /* It renders like our own results, with the tool named. */
  char *md = tb_report_render(doc, TB_REPORT_MD, NULL, &err);
  assert_non_null(md);
  assert_non_null(strstr(md, "| Benchmark tool | llm-inference-bench v0.4.29 (imported) |"));
  assert_non_null(strstr(md, "| 8K | **111.9**<br>48 ms TTFT |"));
  free(md);
  json_decref(doc);

  /* Without a KV budget the missing cells are Skipped, and the run partial. */
  json_object_del(json_object_get(in, "metadata"), "kv_cache_budget");
  doc = tb_import(in, &src, &err);
  assert_non_null(doc);
  c = find(doc, "decode", 8192, 128);
  assert_string_equal(json_string_value(json_object_get(c, "status")), "skipped");
  assert_string_equal(json_string_value(json_object_get(doc, "status")), "partial");
  json_decref(doc);
  json_decref(in);
}

static void
test_lib_cell_kinds(void **state)
{
  const char *s =
    "{\"metadata\": {\"version\": \"0.7.9\", \"engine\": \"sglang\", \"max_tokens\": 1000,"
    " \"concurrency_levels\": [1, 2, 2], \"context_lengths\": [0, 1024],"
    " \"launch_command\": \"sglang serve --api-key sk-secret\"},"
    " \"prefill\": {\"1024\": {\"ttft_seconds\": 0.5, \"tok_per_sec\": 2000, \"prompt_tokens\": "
    "1000},"
    "   \"junk\": {}, \"2048\": {\"skipped\": true}},"
    " \"results\": [{\"concurrency\": 1, \"context_tokens\": 0, \"aggregate_tps\": 50,"
    "   \"ttft_p50\": 0.01, \"avg_running_reqs\": 0, \"effective_concurrency\": 1.0},"
    "  {\"concurrency\": 2, \"context_tokens\": 0, \"aggregate_tps\": -1, \"capacity_limited\": "
    "true},"
    "  {\"concurrency\": 1, \"context_tokens\": 1024, \"aggregate_tps\": 0, \"num_errors\": 3},"
    "  {\"concurrency\": 2, \"context_tokens\": 1024, \"aggregate_tps\": 80, \"capacity_limited\": "
    "true,"
    "   \"avg_running_reqs\": 1.4},"
    "  {\"concurrency\": 1, \"context_tokens\": 0, \"aggregate_tps\": 999},"
    "  \"nonsense\", {\"concurrency\": \"x\"}]}";
  char *err = NULL;
  json_t *doc = tb_import_load_buffer(s, strlen(s), NULL, &err);
  assert_non_null(doc);
  const json_t *c = find(doc, "decode", 0, 1);
  assert_true(json_number_value(json_object_get(c, "total_tps")) == 50); /* first wins */
  assert_string_equal(json_string_value(json_object_get(c, "avg_active_source")), "client");
  c = find(doc, "decode", 0, 2);
  assert_string_equal(json_string_value(json_object_get(c, "status")), "over_capacity");
  c = find(doc, "decode", 1024, 1);
  assert_string_equal(json_string_value(json_object_get(c, "status")), "error");
  c = find(doc, "decode", 1024, 2);
  assert_string_equal(json_string_value(json_object_get(c, "status")), "over_capacity");
  assert_non_null(strstr(json_string_value(json_object_get(c, "reason")), "1.4 of 2"));
  /* measured anyway: the figures stay in the document, as the tool keeps them */
  assert_true(json_number_value(json_object_get(c, "total_tps_capacity_limited")) == 80);
  assert_true(json_number_value(json_object_get(c, "avg_active")) == 1.4);
  assert_null(json_object_get(c, "total_tps"));
  c = find(doc, "prefill", 1024, 1);
  assert_true(json_number_value(json_object_get(c, "prompt_tps")) == 2000);
  assert_null(find(doc, "prefill", 2048, 1));
  /* junk prefill key, the skipped prefill, the duplicate, "nonsense" and the
   * bad entry. */
  assert_int_equal(
    json_integer_value(json_object_get(json_object_get(doc, "imported_from"), "skipped_entries")),
    5);
  const char *lc = json_string_value(json_object_get(doc, "launch_command"));
  assert_null(strstr(lc, "sk-secret"));
  json_decref(doc);
}

static void
test_ours(void **state)
{
  json_t *in = fixture_json("tests/fixtures/result_sglang.json");
  char *err = NULL;
  enum tb_import_source src;
  json_t *doc = tb_import(in, &src, &err);
  assert_non_null(doc);
  assert_int_equal(src, TB_IMPORT_TOKBENCH);
  assert_true(json_equal(in, doc));
  json_decref(doc);
  /* a document with uncertainty (issue 14) keeps it, samples and all */
  json_t *unc = json_deep_copy(in);
  json_t *c3 = json_array_get(json_object_get(unc, "cells"), 3);
  json_object_set_new(c3, "total_tps_se", json_real(1.5));
  json_object_set_new(c3, "total_tps_ci95", json_pack("[f, f]", 97.0, 103.0));
  json_object_set_new(c3, "ttft_p50_ci95", json_null());
  json_object_set_new(c3, "repeats", json_integer(3));
  json_object_set_new(c3, "samples",
                      json_pack("{s:f, s:[f, f]}", "slice_s", 1.0, "total_tps", 99.0, 101.0));
  doc = tb_import(unc, NULL, &err);
  assert_non_null(doc);
  assert_true(json_equal(unc, doc));
  json_decref(doc);
  json_object_set_new(c3, "tbt_p50_ci95", json_pack("[f]", 1.0));
  assert_null(tb_import(unc, NULL, &err));
  assert_non_null(strstr(err, "cells[3].tbt_p50_ci95"));
  free(err);
  err = NULL;
  json_decref(unc);

  static const struct {
    const char *path, *member;
    json_t *value;
    const char *want;
  } bad[] = {
    { "cell", "context", NULL, "cells[3].context" },
    { "cell", "status", NULL, "cells[3].status" },
    { "cell", "total_tps", NULL, "cells[3].total_tps" },
    { "cell", "ttft_ms", NULL, "cells[3].ttft_ms" },
    { "doc", "status", NULL, "status must be" },
    { "doc", "hardware", NULL, "hardware must be" },
    { "doc", "schema", NULL, "unsupported schema" },
    { "doc", "cells", NULL, "cells must be" },
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    json_t *d = json_deep_copy(in);
    json_t *target =
      strcmp(bad[i].path, "cell") == 0 ? json_array_get(json_object_get(d, "cells"), 3) : d;
    json_t *v = strcmp(bad[i].member, "schema") == 0     ? json_string("tokbench.result/v9")
                : strcmp(bad[i].member, "ttft_ms") == 0  ? json_pack("[i]", 1)
                : strcmp(bad[i].member, "hardware") == 0 ? json_string("H200")
                : strcmp(bad[i].member, "cells") == 0    ? json_object()
                                                         : json_string("8K");
    json_object_set_new(target, bad[i].member, v);
    doc = tb_import(d, NULL, &err);
    assert_null(doc);
    assert_non_null(err);
    if (strstr(err, bad[i].want) == NULL)
      fail_msg("%s: %s", bad[i].want, err);
    free(err);
    err = NULL;
    json_decref(d);
  }
  json_decref(in);
}

static void
test_garbage(void **state)
{
  static const char *const inputs[] = {
    "",
    "[]",
    "3",
    "null",
    "{}",
    "{\"metadata\": 1}",
    "{\"metadata\": {}, \"results\": 1}",
    "{\"metadata\": {}, \"results\": []}",
    "{\"metadata\": {\"context_lengths\": \"x\", \"concurrency_levels\": [[]]}, \"prefill\": {}}",
    "{\"metadata\": {\"context_lengths\": [1e300, -1, 8192], \"concurrency_levels\": [0, 1],"
    " \"max_tokens\": -5, \"kv_budget\": 1}, \"results\": [{\"concurrency\": 1e300,"
    " \"context_tokens\": 8192}]}",
    "{\"schema\": \"tokbench.result/v1\"}",
    "{\"schema\": \"tokbench.result/v1\", \"cells\": [{}]}",
    "{\"a\": 1, \"a\": 2}",
  };
  for (size_t i = 0; i < sizeof inputs / sizeof inputs[0]; i++) {
    char *err = NULL;
    json_t *doc = tb_import_load_buffer(inputs[i], strlen(inputs[i]), NULL, &err);
    if (doc == NULL) {
      assert_non_null(err);
      free(err);
    } else {
      char *s = tb_report_render(doc, TB_REPORT_HTML, NULL, &err);
      assert_non_null(s);
      free(s);
      json_decref(doc);
    }
  }
  char *err = NULL;
  assert_null(tb_import_load_file("/nonexistent/x.json", NULL, &err));
  assert_non_null(strstr(err, "/nonexistent/x.json"));
  free(err);
  json_t *doc = tb_import_load_file(LIB_FIXTURE, NULL, &err);
  assert_non_null(doc);
  json_decref(doc);
}

int
main(void)
{
  const struct CMUnitTest tests[] = {
    cmocka_unit_test(test_llm_inference_bench),
    cmocka_unit_test(test_lib_cell_kinds),
    cmocka_unit_test(test_ours),
    cmocka_unit_test(test_garbage),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
