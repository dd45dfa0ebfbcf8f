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

#include "result/tb_result.h"

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
  /* the order of keys: phase, then context, then concurrency */
  assert_true(tb_result_key_cmp(0, 262144, 128, 1, 1024, 1) < 0);
  assert_true(tb_result_key_cmp(1, 2048, 1, 1, 1024, 128) > 0);
  assert_true(tb_result_key_cmp(1, 1024, 2, 1, 1024, 4) < 0);
  assert_int_equal(tb_result_key_cmp(1, 1024, 4, 1, 1024, 4), 0);
}

static void
test_decode_figures(void **state)
{
  struct tb_stats ttft = { 0 }, tbt = { 0 };
  for (int i = 1; i <= 100; i++) {
    tb_stats_add(&ttft, (int64_t)i * 1000000); /* 1..100 ms */
    tb_stats_add(&tbt, 20000000);              /* 20 ms */
  }
  struct tb_result_decode d = {
    .conc = 4,
    .measured_s = 10,
    .output_tokens = 2000,
    .ttft = &ttft,
    .tbt = &tbt,
    .avg_active = 3.5,
    .avg_active_server = true,
    .completed = 7,
    .started = 11,
    .chunk_source = true,
    .kernel_stamped = 0.75,
  };
  json_t *c = tb_result_cell_new("decode", 8192, 4);
  tb_result_cell_set_decode(c, &d);
  assert_string_equal(json_string_value(json_object_get(c, "status")), "valid");
  assert_true(json_real_value(json_object_get(c, "total_tps")) == 200.0);
  assert_true(json_real_value(json_object_get(c, "per_request_tps")) == 50.0);
  const json_t *p = json_object_get(c, "ttft_ms");
  assert_true(fabs(json_real_value(json_object_get(p, "p50")) - 50.5) < 1e-9);
  assert_true(fabs(json_real_value(json_object_get(json_object_get(c, "tbt_ms"), "p99")) - 20.0) <
              1e-9);
  assert_string_equal(json_string_value(json_object_get(c, "avg_active_source")), "server");
  assert_string_equal(json_string_value(json_object_get(c, "token_source")), "chunks");
  assert_int_equal(json_integer_value(json_object_get(c, "requests_started")), 11);
  char *err = NULL;
  json_t *doc = tb_result_finish(NULL, "r1", 0, "complete", NULL, json_pack("[O]", c));
  assert_true(tb_result_check(doc, 10, &err));
  json_decref(doc);
  json_decref(c);
  /* an empty sample: null percentiles, not NaN in JSON */
  struct tb_stats none = { 0 };
  d.ttft = d.tbt = &none;
  c = tb_result_cell_new("decode", 8192, 4);
  tb_result_cell_set_decode(c, &d);
  assert_true(json_is_null(json_object_get(json_object_get(c, "ttft_ms"), "p50")));
  json_decref(c);
  tb_stats_free(&ttft);
  tb_stats_free(&tbt);
}

/* The uncertainty of a decode cell, from data whose answers are known
 * (tests/unit/test_stats.c documents the reference values). */
static void
test_decode_uncertainty(void **state)
{
  struct tb_stats ttft = { 0 }, tbt = { 0 };
  for (int i = 10; i >= 1; i--) {
    tb_stats_add(&ttft, (int64_t)i * 1000000); /* 1..10 ms */
    tb_stats_add(&tbt, (int64_t)i * 100000);   /* 0.1..1 ms */
  }
  /* 9 slices 1..9 tok/s: batches of 3, means 2, 5, 8: SE sqrt(3), df 2 */
  const double slices[] = { 1, 2, 3, 4, 5, 6, 7, 8, 9 };
  struct tb_result_decode d = {
    .conc = 1,
    .measured_s = 9,
    .output_tokens = 45,
    .ttft = &ttft,
    .tbt = &tbt,
    .slices = slices,
    .n_slices = 9,
    .slice_s = 1,
  };
  json_t *c = tb_result_cell_new("decode", 8192, 1);
  tb_result_cell_set_decode(c, &d);
  assert_true(json_real_value(json_object_get(c, "total_tps")) == 5.0);
  assert_true(fabs(json_real_value(json_object_get(c, "total_tps_se")) - 1.7320508) < 1e-6);
  const json_t *ci = json_object_get(c, "total_tps_ci95");
  /* 5 - 7.452 < 0: a rate's interval starts at 0 */
  assert_true(json_real_value(json_array_get(ci, 0)) == 0.0);
  assert_true(fabs(json_real_value(json_array_get(ci, 1)) - (5 + 4.302653 * 1.7320508)) < 1e-4);
  /* median of 1..10 ms: ranks 2 and 9 */
  ci = json_object_get(c, "ttft_p50_ci95");
  assert_true(json_real_value(json_array_get(ci, 0)) == 2.0);
  assert_true(json_real_value(json_array_get(ci, 1)) == 9.0);
  ci = json_object_get(c, "tbt_p50_ci95");
  assert_true(fabs(json_real_value(json_array_get(ci, 1)) - 0.9) < 1e-12);
  /* the samples in the order measured */
  const json_t *sm = json_object_get(c, "samples");
  assert_int_equal(json_array_size(json_object_get(sm, "total_tps")), 9);
  assert_true(json_real_value(json_array_get(json_object_get(sm, "ttft_ms"), 0)) == 10.0);
  char *err = NULL;
  json_t *doc = tb_result_finish(NULL, "r1", 0, "complete", NULL, json_pack("[O]", c));
  assert_true(tb_result_check(doc, 10, &err));
  json_decref(doc);
  /* the count's resolution: 9 tokens -> (9 / 2 / 9 s)^2 = 0.25 more variance */
  d.resolution_tokens = 9;
  json_t *c2 = tb_result_cell_new("decode", 8192, 1);
  tb_result_cell_set_decode(c2, &d);
  assert_true(fabs(json_real_value(json_object_get(c2, "total_tps_se")) - sqrt(3.25)) < 1e-9);
  json_decref(c2);
  d.resolution_tokens = 0;

  /* three repeats of it at 100, 110 and 120 tok/s: mean 110, SE 10 /
   * sqrt(3) = 5.7735, t on 2 df: 110 +- 24.841 */
  json_t *reps[3];
  for (int r = 0; r < 3; r++) {
    reps[r] = json_deep_copy(c);
    json_object_set_new(reps[r], "total_tps", json_real(100 + 10 * r));
    json_object_set_new(reps[r], "repeat", json_integer(r + 1));
    json_object_set_new(reps[r], "seq", json_integer(5 * r + 2));
  }
  json_t *m = tb_result_combine(reps, 3);
  assert_true(fabs(json_real_value(json_object_get(m, "total_tps")) - 110) < 1e-9);
  assert_true(fabs(json_real_value(json_object_get(m, "total_tps_se")) - 5.7735027) < 1e-6);
  ci = json_object_get(m, "total_tps_ci95");
  assert_true(fabs(json_real_value(json_array_get(ci, 0)) - (110 - 4.302653 * 5.7735027)) < 1e-4);
  assert_string_equal(json_string_value(json_object_get(m, "total_tps_se_method")), "repeats");
  assert_int_equal(json_integer_value(json_object_get(m, "repeats")), 3);
  assert_int_equal(json_integer_value(json_object_get(m, "output_tokens")), 135);
  const json_t *runs = json_object_get(m, "repeat_runs");
  assert_int_equal(json_array_size(runs), 3);
  assert_int_equal(json_integer_value(json_object_get(json_array_get(runs, 2), "seq")), 12);
  /* latencies pooled: 30 TTFTs, three of each 1..10 ms; median 5.5 */
  assert_int_equal(json_array_size(json_object_get(json_object_get(m, "samples"), "ttft_ms")), 30);
  assert_true(fabs(json_real_value(json_object_get(json_object_get(m, "ttft_ms"), "p50")) - 5.5) <
              1e-9);
  assert_non_null(json_object_get(m, "ttft_p50_ci95"));
  doc = tb_result_finish(NULL, "r1", 0, "complete", NULL, json_pack("[O]", m));
  assert_true(tb_result_check(doc, 10, &err));
  json_decref(doc);
  json_decref(m);
  /* repeats that agree exactly: the windows' own error, sqrt(3 x 3) / 3
   * = 1 (each SE sqrt(3)), on their 3 x 2 degrees of freedom (t 2.446912) */
  for (int r = 0; r < 3; r++)
    json_object_set_new(reps[r], "total_tps", json_real(100));
  m = tb_result_combine(reps, 3);
  assert_true(fabs(json_real_value(json_object_get(m, "total_tps_se")) - 1.0) < 1e-6);
  assert_string_equal(json_string_value(json_object_get(m, "total_tps_se_method")), "batch_means");
  ci = json_object_get(m, "total_tps_ci95");
  assert_true(fabs(json_real_value(json_array_get(ci, 1)) - (100 + 2.446912)) < 1e-4);
  json_decref(m);
  /* one repeat in error: the cell is that error, saying which */
  tb_result_cell_set_status(reps[1], "error", "stream failed: boom");
  m = tb_result_combine(reps, 3);
  assert_string_equal(json_string_value(json_object_get(m, "status")), "error");
  assert_string_equal(json_string_value(json_object_get(m, "reason")),
                      "repeat 2: stream failed: boom");
  assert_null(json_object_get(m, "seq"));
  json_decref(m);
  for (int r = 0; r < 3; r++)
    json_decref(reps[r]);
  json_decref(c);

  /* too few slices and requests: null intervals, never NaN */
  struct tb_stats one = { 0 };
  tb_stats_add(&one, 5000000);
  d.ttft = d.tbt = &one;
  d.n_slices = 1;
  c = tb_result_cell_new("decode", 8192, 1);
  tb_result_cell_set_decode(c, &d);
  assert_true(json_is_null(json_object_get(c, "total_tps_se")));
  assert_true(json_is_null(json_object_get(c, "total_tps_ci95")));
  assert_true(json_is_null(json_object_get(c, "ttft_p50_ci95")));
  json_decref(c);
  tb_stats_free(&one);
  tb_stats_free(&ttft);
  tb_stats_free(&tbt);
}

/* Prefill over three scouts: 1000, 1200 and 1400 prompt tok/s. */
static void
test_prefill_repeats(void **state)
{
  json_t *reps[3];
  for (int r = 0; r < 3; r++) {
    reps[r] = tb_result_cell_new("prefill", 8192, 1);
    tb_result_cell_set_prefill(reps[r], 8000, true, 8000.0 / (1000 + 200 * r));
    json_object_set_new(reps[r], "repeat", json_integer(r + 1));
  }
  json_t *m = tb_result_combine(reps, 3);
  assert_true(fabs(json_real_value(json_object_get(m, "prompt_tps")) - 1200) < 1e-9);
  /* sd 200, SE 115.47: 1200 +- 4.302653 * 115.47 */
  assert_true(fabs(json_real_value(json_object_get(m, "prompt_tps_se")) - 115.470054) < 1e-5);
  const json_t *ci = json_object_get(m, "prompt_tps_ci95");
  assert_true(fabs(json_real_value(json_array_get(ci, 1)) - (1200 + 4.302653 * 115.470054)) < 1e-3);
  assert_true(json_real_value(json_object_get(m, "prompt_tps_min")) == 1000);
  assert_true(json_real_value(json_object_get(m, "prompt_tps_max")) == 1400);
  assert_int_equal(json_integer_value(json_object_get(m, "prompt_tokens")), 8000);
  assert_int_equal(json_integer_value(json_object_get(m, "repeats")), 3);
  json_decref(m);
  for (int r = 0; r < 3; r++)
    json_decref(reps[r]);
}

static void
test_prefill_figures(void **state)
{
  json_t *c = tb_result_cell_new("prefill", 8192, 1);
  tb_result_cell_set_prefill(c, 8000, false, 0.5);
  assert_int_equal(json_integer_value(json_object_get(c, "prompt_tokens")), 8000);
  assert_string_equal(json_string_value(json_object_get(c, "prompt_tokens_source")), "tokenizer");
  assert_true(json_real_value(json_object_get(c, "prompt_tps")) == 16000.0);
  assert_true(json_real_value(json_object_get(c, "ttft_ms")) == 500.0);
  json_decref(c);
}

static void
test_header(void **state)
{
  const int64_t ctxs[] = { 8192, 16384 }, conc[] = { 1, 2, 4 }, pf[] = { 8192 };
  json_t *ep = json_pack("{s:s, s:{s:s}, s:{s:s}}", "name", "gpu1", "engine", "hint", "x",
                         "hardware", "gpu", "H200");
  struct tb_result_header h = {
    .run_id = "abc",
    .started_us = 1700000000000000,
    .url = "http://h:1",
    .endpoint = ep,
    .engine = "vllm",
    .engine_version = NULL,
    .model = "m",
    .max_model_len = 0,
    .launch_command = "vllm serve m",
    .kv_budget = 0,
    .kv_source = "metrics",
    .max_running = 256,
    .metrics = true,
    .contexts = ctxs,
    .n_contexts = 2,
    .concurrency = conc,
    .n_concurrency = 3,
    .prefill = pf,
    .n_prefill = 1,
    .duration_s = 30,
    .settle_s = 3,
    .max_output = 4096,
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
  assert_int_equal(json_integer_value(json_array_get(json_object_get(st, "contexts"), 1)), 16384);
  assert_string_equal(json_string_value(json_object_get(json_object_get(doc, "hardware"), "gpu")),
                      "H200");
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
      "\"status\":\"valid\"}]}",
      "cells[0].concurrency" },
    { "{\"schema\":\"tokbench.result/v1\",\"cells\":[{\"phase\":\"decode\",\"context\":1,"
      "\"concurrency\":1,\"status\":\"fine\"}]}",
      "cells[0].status" },
    { "{\"schema\":\"tokbench.result/v1\",\"cells\":[{\"phase\":\"decode\",\"context\":1,"
      "\"concurrency\":1,\"status\":\"valid\",\"total_tps\":\"1\"}]}",
      "total_tps must be a number" },
    { "{\"schema\":\"tokbench.result/v1\",\"cells\":[{\"phase\":\"decode\",\"context\":1,"
      "\"concurrency\":1,\"status\":\"valid\",\"ttft_ms\":{\"p50\":\"x\"}}]}",
      "ttft_ms.p50" },
    { "{\"schema\":\"tokbench.result/v1\",\"cells\":[{\"phase\":\"decode\",\"context\":1,"
      "\"concurrency\":1,\"status\":\"valid\",\"total_tps_ci95\":[1]}]}",
      "total_tps_ci95 must" },
    { "{\"schema\":\"tokbench.result/v1\",\"cells\":[{\"phase\":\"decode\",\"context\":1,"
      "\"concurrency\":1,\"status\":\"valid\",\"samples\":{\"ttft_ms\":[\"a\"]}}]}",
      "samples.ttft_ms must" },
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

/* The flags of servers that give less: readiness by the client, a prompt
 * size estimated, a measured scheduler cap; and repeats keep them. */
static void
test_flags(void **state)
{
  (void)state;
  struct tb_stats ttft = { 0 }, tbt = { 0 };
  tb_stats_add(&ttft, 1000000);
  tb_stats_add(&tbt, 1000000);
  const double slices[] = { 10, 10, 10 };
  struct tb_result_decode d = {
    .conc = 1,
    .measured_s = 3,
    .output_tokens = 30,
    .ttft = &ttft,
    .tbt = &tbt,
    .slices = slices,
    .n_slices = 3,
    .slice_s = 1,
  };
  json_t *server = tb_result_cell_new("decode", 1024, 1);
  tb_result_cell_set_decode(server, &d);
  assert_string_equal(json_string_value(json_object_get(server, "readiness")), "server");
  assert_null(json_object_get(server, "readiness_reason"));
  d.client_ready = "no /metrics";
  json_t *client = tb_result_cell_new("decode", 1024, 1);
  tb_result_cell_set_decode(client, &d);
  tb_result_cell_set_prompt_estimate(client, "estimated: so");
  assert_string_equal(json_string_value(json_object_get(client, "readiness")), "client");
  assert_string_equal(json_string_value(json_object_get(client, "readiness_reason")),
                      "no /metrics");
  assert_string_equal(json_string_value(json_object_get(client, "prompt_tokens_source")),
                      "estimate");
  /* repeats: a repeat ready by the client alone makes the cell's readiness
   * the client's; the estimate of the first is kept */
  json_object_set_new(server, "repeat", json_integer(2));
  json_object_set_new(client, "repeat", json_integer(1));
  json_t *reps[2] = { client, server };
  json_t *comb = tb_result_combine(reps, 2);
  assert_string_equal(json_string_value(json_object_get(comb, "readiness")), "client");
  assert_string_equal(json_string_value(json_object_get(comb, "readiness_reason")), "no /metrics");
  assert_string_equal(json_string_value(json_object_get(comb, "prompt_tokens_estimate")),
                      "estimated: so");
  json_t *capped = tb_result_cell_new("decode", 1024, 16);
  tb_result_cell_set_sched_cap(capped, 12, "at most 12");
  assert_string_equal(json_string_value(json_object_get(capped, "status")), "over_capacity");
  assert_int_equal(json_integer_value(json_object_get(capped, "scheduler_cap")), 12);
  char *err = NULL;
  json_t *doc =
    tb_result_finish(NULL, "r1", 0, "complete", NULL, json_pack("[O, O, O]", comb, client, capped));
  assert_true(tb_result_check(doc, 10, &err));
  json_decref(doc);
  json_decref(comb);
  json_decref(capped);
  json_decref(client);
  json_decref(server);
  tb_stats_free(&ttft);
  tb_stats_free(&tbt);
}

int
main(void)
{
  const struct CMUnitTest tests[] = {
    cmocka_unit_test(test_flags),
    cmocka_unit_test(test_over_capacity),
    cmocka_unit_test(test_cell_key_and_find),
    cmocka_unit_test(test_decode_figures),
    cmocka_unit_test(test_prefill_figures),
    cmocka_unit_test(test_header),
    cmocka_unit_test(test_check_refuses),
    cmocka_unit_test(test_decode_uncertainty),
    cmocka_unit_test(test_prefill_repeats),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
