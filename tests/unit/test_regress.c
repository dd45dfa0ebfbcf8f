/*
 * Unit tests for tb_regress's pure half: the verdict over documents (the
 * statistical path with enough history, the flagged two-run fallback
 * without), the reasons told to people, both shapes of "regressions", and
 * the callback payload reading the verdict (tb_deliver).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "result/tb_compare.h"
#include "tb_deliver.h"
#include "db/tb_regress.h"
#include "result/tb_regdoc.h"
#include "render/tb_render.h"
#include "render/tb_verdictview.h"

/* A result of two decode cells (8K x 1, 8K x 32) at throughput scale f. */
static json_t *
doc(double f)
{
  json_t *cells = json_array();
  json_array_append_new(cells,
                        json_pack("{s:s, s:i, s:i, s:s, s:f, s:{s:f}, s:{s:f}}", "phase", "decode",
                                  "context", 8192, "concurrency", 1, "status", "valid", "total_tps",
                                  100.0 * f, "ttft_ms", "p50", 50.0, "tbt_ms", "p50", 10.0));
  json_array_append_new(cells, json_pack("{s:s, s:i, s:i, s:s, s:f, s:{s:f}, s:{s:f}}", "phase",
                                         "decode", "context", 8192, "concurrency", 32, "status",
                                         "valid", "total_tps", 2000.0 * f, "ttft_ms", "p50", 80.0,
                                         "tbt_ms", "p50", 15.0));
  return json_pack("{s:s, s:s, s:o}", "schema", "tokbench.result/v1", "status", "complete", "cells",
                   cells);
}

static const double wob[] = { 1.004, 0.996, 1.002, 0.998, 1.001, 0.999, 1.003, 0.997 };

static json_t *
judge(size_t nhist, double head_f, double tol, double min_effect)
{
  json_t *h[8];
  for (size_t i = 0; i < nhist; i++)
    h[i] = doc(wob[i]);
  json_t *head = doc(head_f);
  char *err = NULL;
  json_t *cmp = tb_compare(h[nhist - 1], head, tol, &err);
  assert_non_null(cmp);
  json_t *v = tb_regress_judge_docs((const json_t *const *)h, nhist, head, cmp, tol, min_effect);
  json_decref(cmp);
  json_decref(head);
  for (size_t i = 0; i < nhist; i++)
    json_decref(h[i]);
  return v;
}

static void
test_history_verdict(void **state)
{
  (void)state;
  json_t *v = judge(8, 0.94, 0.05, 0.02);
  assert_string_equal(json_string_value(json_object_get(v, "method")), "history");
  assert_true(json_is_true(json_object_get(v, "regressed")));
  assert_int_equal(json_integer_value(json_object_get(v, "history_runs")), 8);
  const json_t *cells = NULL;
  assert_true(tb_regdoc_regressed(v, &cells));
  assert_int_equal(json_array_size(cells), 2);
  const json_t *g = json_array_get(cells, 0);
  assert_string_equal(json_string_value(json_object_get(g, "metric")), "total_tps");
  assert_true(fabs(json_real_value(json_object_get(g, "change_pct")) + 6.0) < 0.2);
  assert_true(json_real_value(json_object_get(g, "p")) < 0.001);
  assert_null(json_object_get(g, "fallback"));
  char *why = tb_regdoc_why(g);
  /* "8K × 1 total_tps: −6.0% (CI −6.x…−5.x%, p < 0.001, 8 earlier runs)" */
  assert_non_null(strstr(why, "8K \xc3\x97 1 total_tps: \xe2\x88\x92"
                              "6.0% (CI \xe2\x88\x92"));
  assert_non_null(strstr(why, "%, p < 0.001, 8 earlier runs)"));
  free(why);
  char *hl = tb_regdoc_headline(v);
  assert_string_equal(hl, "Regressed: 2 significant regressions beyond 2.0% against up to 8 "
                          "earlier runs.");
  free(hl);
  /* the reports: the block in Markdown, and in HTML with the charts */
  struct tb_render_buf b = { 0 };
  tb_verdictview_md(&b, v);
  assert_non_null(strstr(b.p, "### Verdict\n\n> **Regressed: 2 significant"));
  assert_non_null(strstr(b.p, "- 8K \xc3\x97 1 total\\_tps: \xe2\x88\x92"
                              "6.0% (CI"));
  free(b.p);
  b = (struct tb_render_buf){ 0 };
  tb_verdictview_html(&b, v);
  assert_non_null(strstr(b.p, "<section class=\"banner\" id=\"verdict\">"));
  /* the matrix chart and one per regression: 9 points each (8 + this job) */
  const char *poly = b.p;
  int charts = 0;
  while ((poly = strstr(poly, "points=\"")) != NULL) {
    poly += 8;
    int pts = 0;
    for (const char *q = poly; *q != '"'; q++)
      pts += *q == ' ';
    assert_int_equal(pts, 9);
    charts++;
  }
  assert_int_equal(charts, 3);
  free(b.p);
  const json_t *mx = json_object_get(json_object_get(v, "matrix"), "total_tps");
  assert_string_equal(json_string_value(json_object_get(mx, "outcome")), "worse");
  json_decref(v);

  /* within the spread: no regression, the cells are "same" at 2% */
  v = judge(8, 1.0, 0.05, 0.02);
  assert_false(tb_regdoc_regressed(v, NULL));
  const json_t *vs = json_object_get(v, "verdicts");
  assert_int_equal(json_array_size(vs), 6); /* 2 cells x 3 metrics */
  for (size_t i = 0; i < json_array_size(vs); i++)
    assert_string_equal(json_string_value(json_object_get(json_array_get(vs, i), "outcome")),
                        "same");
  json_decref(v);
}

static void
test_two_run_fallback(void **state)
{
  (void)state;
  /* two earlier runs: too little history; 10% down is beyond 5% */
  json_t *v = judge(2, 0.90, 0.05, 0.02);
  assert_string_equal(json_string_value(json_object_get(v, "method")), "two_run");
  const json_t *cells = NULL;
  assert_true(tb_regdoc_regressed(v, &cells));
  assert_int_equal(json_array_size(cells), 2);
  const json_t *g = json_array_get(cells, 0);
  assert_true(json_is_true(json_object_get(g, "fallback")));
  char *hl = tb_regdoc_headline(v);
  assert_non_null(strstr(hl, "too little history, fewer than 3 earlier runs"));
  assert_non_null(strstr(hl, "2 regressions beyond 5.0%"));
  free(hl);
  char *why = tb_regdoc_why(g);
  assert_non_null(strstr(why, "too little history"));
  free(why);
  json_decref(v);
  /* 4% down is within the 5% tolerance */
  v = judge(2, 0.96, 0.05, 0.02);
  assert_false(tb_regdoc_regressed(v, NULL));
  json_decref(v);
}

static void
test_shapes_and_payload(void **state)
{
  (void)state;
  /* a bare array (hand-written or older documents) */
  json_t *arr = json_pack("[{s:s, s:i, s:i, s:s, s:s}]", "phase", "decode", "context", 8192,
                          "concurrency", 1, "metric", "status", "kind", "lost");
  json_object_set_new(json_array_get(arr, 0), "head", json_string("error"));
  const json_t *cells = NULL;
  assert_true(tb_regdoc_regressed(arr, &cells));
  assert_ptr_equal(cells, arr);
  char *why = tb_regdoc_why(json_array_get(arr, 0));
  assert_string_equal(why, "8K \xc3\x97 1: lost (valid before, error now)");
  free(why);
  json_t *empty = json_array();
  assert_false(tb_regdoc_regressed(empty, NULL));
  assert_false(tb_regdoc_regressed(NULL, &cells));
  assert_null(cells);
  /* the object: "regressed" decides, even with no cell (the matrix) */
  json_t *obj = json_pack("{s:b, s:[]}", "regressed", 1, "cells");
  assert_true(tb_regdoc_regressed(obj, &cells));
  assert_int_equal(json_array_size(cells), 0);
  /* the callback reads the object */
  json_t *job =
    json_pack("{s:s, s:s}", "id", "00000000-0000-0000-0000-000000000001", "state", "succeeded");
  json_t *v = judge(8, 0.94, 0.05, 0.02);
  json_t *result = json_pack("{s:[], s:O}", "cells", "regressions", v);
  char *text = tb_deliver_payload("job.ended", job, result, "https://x.example", 0);
  assert_non_null(text);
  json_t *pl = json_loads(text, 0, NULL);
  const json_t *data = json_object_get(pl, "data");
  assert_true(json_is_true(json_object_get(data, "regressed")));
  assert_int_equal(json_integer_value(json_object_get(data, "regressions_total")), 2);
  const char *w = json_string_value(
    json_object_get(json_array_get(json_object_get(data, "regressions"), 0), "why"));
  assert_non_null(w);
  assert_non_null(strstr(w, "8 earlier runs"));
  json_decref(pl);
  free(text);
  json_decref(result);
  json_decref(v);
  json_decref(job);
  json_decref(obj);
  json_decref(empty);
  json_decref(arr);
}

/* doc(f) whose decode cells carry tb_cost's efficiency: joules per output
 * token and cost per million output tokens at scales jf and cf. */
static json_t *
doc_eff(double f, double jf, double cf)
{
  json_t *d = doc(f);
  json_t *cells = json_object_get(d, "cells");
  for (size_t i = 0; i < json_array_size(cells); i++)
    json_object_set_new(json_array_get(cells, i), "efficiency",
                        json_pack("{s:s, s:f, s:f, s:f}", "currency", "USD", "price_per_hour",
                                  2.0 * cf, "j_per_output_token", (i ? 0.4 : 1.5) * jf,
                                  "cost_per_m_output_tokens", (i ? 0.28 : 5.6) * cf));
  return d;
}

static json_t *
judge_eff(double jf, double cf)
{
  json_t *h[8];
  for (size_t i = 0; i < 8; i++)
    h[i] = doc_eff(wob[i], wob[7 - i], wob[(i + 3) % 8]);
  json_t *head = doc_eff(1.0, jf, cf);
  char *err = NULL;
  json_t *cmp = tb_compare(h[7], head, 0.05, &err);
  assert_non_null(cmp);
  json_t *v = tb_regress_judge_docs((const json_t *const *)h, 8, head, cmp, 0.05, 0.02);
  json_decref(cmp);
  json_decref(head);
  for (size_t i = 0; i < 8; i++)
    json_decref(h[i]);
  return v;
}

/* The outcome of metric at 8K x 32 in v's verdicts (NULL when not judged). */
static const char *
outcome_of(const json_t *v, const char *metric)
{
  const json_t *vs = json_object_get(v, "verdicts");
  for (size_t i = 0; i < json_array_size(vs); i++) {
    const json_t *e = json_array_get(vs, i);
    if (json_integer_value(json_object_get(e, "concurrency")) == 32 &&
        strcmp(json_string_value(json_object_get(e, "metric")), metric) == 0)
      return json_string_value(json_object_get(e, "outcome"));
  }
  return NULL;
}

/* Issue 26: the verdict judges joules per output token (more is a
 * regression of the server) and cost per million tokens (cheaper is
 * better; dearer is told but never a regression: a price change is not
 * the server's). */
static void
test_cost_and_energy_verdicts(void **state)
{
  (void)state;
  /* 6% more joules per token at the same throughput and price: regressed */
  json_t *v = judge_eff(1.06, 1.0);
  assert_true(tb_regdoc_regressed(v, NULL));
  assert_string_equal(outcome_of(v, "j_per_output_token"), "worse");
  assert_string_equal(outcome_of(v, "cost_per_m_output_tokens"), "same");
  assert_string_equal(outcome_of(v, "total_tps"), "same");
  const json_t *cells = json_object_get(v, "cells");
  assert_int_equal(json_array_size(cells), 2);
  assert_string_equal(json_string_value(json_object_get(json_array_get(cells, 0), "metric")),
                      "j_per_output_token");
  char *eff = tb_regdoc_efficiency(v);
  assert_non_null(strstr(eff, "J per output token +6.0% (CI +"));
  assert_non_null(strstr(eff, "), worse."));
  free(eff);
  json_decref(v);

  /* the price up 10%: cost worse, told, and no regression */
  v = judge_eff(1.0, 1.10);
  assert_false(tb_regdoc_regressed(v, NULL));
  assert_string_equal(outcome_of(v, "cost_per_m_output_tokens"), "worse");
  assert_string_equal(
    json_string_value(json_object_get(
      json_object_get(json_object_get(v, "matrix"), "cost_per_m_output_tokens"), "outcome")),
    "worse");
  assert_int_equal(json_array_size(json_object_get(v, "cells")), 0);
  eff = tb_regdoc_efficiency(v);
  assert_non_null(strstr(eff, "Cost per M output tokens +10.0% (CI +"));
  assert_non_null(strstr(eff, "worse (told, never a regression)"));
  free(eff);
  /* the reports tell it under the verdict */
  struct tb_render_buf b = { 0 };
  tb_verdictview_md(&b, v);
  assert_non_null(strstr(b.p, "\n\nCost and energy against history (the matrix): "));
  free(b.p);
  b = (struct tb_render_buf){ 0 };
  tb_verdictview_html(&b, v);
  assert_non_null(strstr(b.p, "<p>Cost and energy against history (the matrix): "));
  free(b.p);
  json_decref(v);

  /* 10% cheaper: better */
  v = judge_eff(1.0, 0.90);
  assert_string_equal(outcome_of(v, "cost_per_m_output_tokens"), "better");
  assert_false(tb_regdoc_regressed(v, NULL));
  json_decref(v);

  /* a result without efficiency tells none */
  v = judge(8, 1.0, 0.05, 0.02);
  assert_null(tb_regdoc_efficiency(v));
  assert_null(outcome_of(v, "j_per_output_token"));
  json_decref(v);
}

int
main(void)
{
  const struct CMUnitTest tests[] = {
    cmocka_unit_test(test_history_verdict),
    cmocka_unit_test(test_two_run_fallback),
    cmocka_unit_test(test_shapes_and_payload),
    cmocka_unit_test(test_cost_and_energy_verdicts),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
