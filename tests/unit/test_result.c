/*
 * Unit tests for tb_result: the over-capacity rule, a cell's key and
 * figures, the header, the document's status and the checks of a document
 * of ours (what import refuses).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "tb_result.h"

static void
test_over_capacity(void **state)
{
  /* vLLM/H200 seed: budget in [786432, 1044480). */
  int64_t b = 900000;
  assert_false(tb_result_over_capacity(64, 8192, 4096, b));
  assert_true(tb_result_over_capacity(128, 8192, 4096, b));
  assert_false(tb_result_over_capacity(2, 257024, 4096, b));
  assert_true(tb_result_over_capacity(4, 257024, 4096, b));
  assert_false(tb_result_over_capacity(1000, 257024, 4096, 0));
}

static void
test_cell_key_and_find(void **state)
{
  json_t *c = tb_result_cell_new("decode", 257024, 4);
  assert_string_equal(json_string_value(json_object_get(c, "phase")), "decode");
  assert_int_equal(json_integer_value(json_object_get(c, "context")), 257024);
  assert_string_equal(json_string_value(json_object_get(c, "context_label")), "251K");
  assert_int_equal(json_integer_value(json_object_get(c, "concurrency")), 4);
  tb_result_cell_set_status(c, "skipped", "why");
  assert_string_equal(json_string_value(json_object_get(c, "reason")), "why");
  json_t *cells = json_array();
  json_array_append_new(cells, tb_result_cell_new("prefill", 257024, 1));
  json_array_append_new(cells, c);
  assert_ptr_equal(tb_result_find_cell(cells, "decode", 257024, 4), c);
  assert_null(tb_result_find_cell(cells, "decode", 257024, 1));
  assert_null(tb_result_find_cell(cells, "decode", 8192, 4));
  assert_null(tb_result_find_cell(NULL, "decode", 257024, 4));
  assert_string_equal(tb_result_status_of_cells(cells), "complete");
  json_array_append_new(cells, tb_result_cell_new("decode", 8192, 1));
  tb_result_cell_set_status(json_array_get(cells, 2), "error", "boom");
  assert_string_equal(tb_result_status_of_cells(cells), "partial");
  json_decref(cells);
}

static void
test_decode_figures(void **state)
{
  struct tb_stats ttft = {0}, tbt = {0};
  for (int i = 1; i <= 100; i++) {
    tb_stats_add(&ttft, (int64_t)i * 1000000); /* 1..100 ms */
    tb_stats_add(&tbt, 20000000);              /* 20 ms */
  }
  struct tb_result_decode d = {
    .conc = 4, .measured_s = 10, .output_tokens = 2000, .ttft = &ttft,
    .tbt = &tbt, .avg_active = 3.5, .avg_active_server = true,
    .completed = 7, .started = 11, .chunk_source = true, .kernel_stamped = 0.75,
  };
  json_t *c = tb_result_cell_new("decode", 8192, 4);
  tb_result_cell_set_decode(c, &d);
  assert_string_equal(json_string_value(json_object_get(c, "status")), "valid");
  assert_true(json_real_value(json_object_get(c, "total_tps")) == 200.0);
  assert_true(json_real_value(json_object_get(c, "per_request_tps")) == 50.0);
  const json_t *p = json_object_get(c, "ttft_ms");
  assert_true(fabs(json_real_value(json_object_get(p, "p50")) - 50.5) < 1e-9);
  assert_true(fabs(json_real_value(json_object_get(json_object_get(c, "tbt_ms"), "p99")) -
                   20.0) < 1e-9);
  assert_string_equal(json_string_value(json_object_get(c, "avg_active_source")), "server");
  assert_string_equal(json_string_value(json_object_get(c, "token_source")), "chunks");
  assert_int_equal(json_integer_value(json_object_get(c, "requests_started")), 11);
  char *err = NULL;
  json_t *doc = tb_result_finish(NULL, "r1", 0, "complete", NULL, json_pack("[O]", c));
  assert_true(tb_result_check(doc, 10, &err));
  json_decref(doc);
  json_decref(c);
  /* an empty sample: null percentiles, not NaN in JSON */
  struct tb_stats none = {0};
  d.ttft = d.tbt = &none;
  c = tb_result_cell_new("decode", 8192, 4);
  tb_result_cell_set_decode(c, &d);
  assert_true(json_is_null(json_object_get(json_object_get(c, "ttft_ms"), "p50")));
  json_decref(c);
  tb_stats_free(&ttft);
  tb_stats_free(&tbt);
}

static void
test_prefill_figures(void **state)
{
  json_t *c = tb_result_cell_new("prefill", 8192, 1);
  tb_result_cell_set_prefill(c, 8000, false, 0.5);
  assert_int_equal(json_integer_value(json_object_get(c, "prompt_tokens")), 8000);
  assert_string_equal(json_string_value(json_object_get(c, "prompt_tokens_source")),
                      "tokenizer");
  assert_true(json_real_value(json_object_get(c, "prompt_tps")) == 16000.0);
  assert_true(json_real_value(json_object_get(c, "ttft_ms")) == 500.0);
  json_decref(c);
}

static void
test_header(void **state)
{
  const int64_t ctxs[] = { 8192, 16384 }, conc[] = { 1, 2, 4 }, pf[] = { 8192 };
  json_t *ep = json_pack("{s:s, s:{s:s}, s:{s:s}}", "name", "gpu1", "engine", "hint",
                         "x", "hardware", "gpu", "H200");
  struct tb_result_header h = {
    .run_id = "abc", .started_us = 1700000000000000, .url = "http://h:1",
    .endpoint = ep, .engine = "vllm", .engine_version = NULL, .model = "m",
    .max_model_len = 0, .launch_command = "vllm serve m", .kv_budget = 0,
    .kv_source = "metrics", .max_running = 256, .metrics = true,
    .contexts = ctxs, .n_contexts = 2, .concurrency = conc, .n_concurrency = 3,
    .prefill = pf, .n_prefill = 1, .duration_s = 30, .settle_s = 3, .max_output = 4096,
  };
  json_t *doc = tb_result_header_new(&h);
  assert_string_equal(json_string_value(json_object_get(doc, "schema")), TB_RESULT_SCHEMA);
  assert_string_equal(json_string_value(json_object_get(doc, "started_at")),
                      "2023-11-14T22:13:20.000Z");
  const json_t *eng = json_object_get(doc, "engine");
  assert_string_equal(json_string_value(json_object_get(eng, "name")), "vllm");
  assert_string_equal(json_string_value(json_object_get(eng, "hint")), "x");
  assert_true(json_is_null(json_object_get(eng, "version")));
  assert_true(json_is_null(json_object_get(json_object_get(doc, "model"), "max_model_len")));
  const json_t *cap = json_object_get(doc, "capacity");
  assert_true(json_is_null(json_object_get(cap, "kv_budget_tokens")));
  assert_int_equal(json_integer_value(json_object_get(cap, "max_running_requests")), 256);
  const json_t *st = json_object_get(doc, "settings");
  assert_int_equal(json_array_size(json_object_get(st, "concurrency")), 3);
  assert_int_equal(json_integer_value(json_array_get(json_object_get(st, "contexts"), 1)),
                   16384);
  assert_string_equal(json_string_value(json_object_get(json_object_get(doc, "hardware"),
                                                        "gpu")), "H200");
  doc = tb_result_finish(doc, NULL, 0, "failed", "it broke", json_array());
  assert_string_equal(json_string_value(json_object_get(doc, "error")), "it broke");
  assert_string_equal(json_string_value(json_object_get(doc, "status")), "failed");
  assert_non_null(json_object_get(doc, "finished_at"));
  char *err = NULL;
  assert_true(tb_result_check(doc, 10, &err));
  json_decref(doc);
  json_decref(ep);
}

/* What tb_result_check refuses, each with its reason. */
static void
test_check_refuses(void **state)
{
  static const struct {
    const char *doc, *why;
  } bad[] = {
    { "{\"schema\":\"tokbench.result/v2\",\"cells\":[]}", "unsupported schema" },
    { "{\"schema\":\"tokbench.result/v1\"}", "cells must be an array" },
    { "{\"schema\":\"tokbench.result/v1\",\"cells\":[],\"status\":\"done\"}", "status must" },
    { "{\"schema\":\"tokbench.result/v1\",\"cells\":[],\"model\":3}", "model must be an object" },
    { "{\"schema\":\"tokbench.result/v1\",\"cells\":[{\"phase\":\"x\"}]}", "cells[0].phase" },
    { "{\"schema\":\"tokbench.result/v1\",\"cells\":[{\"phase\":\"decode\",\"context\":1,"
      "\"status\":\"valid\"}]}", "cells[0].concurrency" },
    { "{\"schema\":\"tokbench.result/v1\",\"cells\":[{\"phase\":\"decode\",\"context\":1,"
      "\"concurrency\":1,\"status\":\"fine\"}]}", "cells[0].status" },
    { "{\"schema\":\"tokbench.result/v1\",\"cells\":[{\"phase\":\"decode\",\"context\":1,"
      "\"concurrency\":1,\"status\":\"valid\",\"total_tps\":\"1\"}]}", "total_tps must be a number" },
    { "{\"schema\":\"tokbench.result/v1\",\"cells\":[{\"phase\":\"decode\",\"context\":1,"
      "\"concurrency\":1,\"status\":\"valid\",\"ttft_ms\":{\"p50\":\"x\"}}]}", "ttft_ms.p50" },
    { "{\"schema\":\"tokbench.result/v1\",\"cells\":[1,2,3]}", "too many cells" },
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    json_t *d = json_loads(bad[i].doc, 0, NULL);
    assert_non_null(d);
    char *err = NULL;
    assert_false(tb_result_check(d, 2, &err));
    assert_non_null(err);
    if (strstr(err, bad[i].why) == NULL)
      fail_msg("doc %zu: %s (want %s)", i, err, bad[i].why);
    free(err);
    json_decref(d);
  }
  assert_true(tb_result_doc_status_known("queued"));
  assert_false(tb_result_doc_status_known(NULL));
  assert_true(tb_result_cell_status_known("over_capacity"));
  assert_false(tb_result_cell_status_known("partial"));
}

int
main(void)
{
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_over_capacity),   cmocka_unit_test(test_cell_key_and_find),
      cmocka_unit_test(test_decode_figures),  cmocka_unit_test(test_prefill_figures),
      cmocka_unit_test(test_header),          cmocka_unit_test(test_check_refuses),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
