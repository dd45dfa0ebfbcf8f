/*
 * Unit tests for tb_compare: the ratios, the geometric mean, the marks of
 * cells valid on one side only, and regression detection at a tolerance.
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
#include "render/tb_cmpreport.h"

static json_t *
decode(int ctx, int conc, const char *status, double tps, double ttft, double tbt)
{
  json_t *c = json_pack("{s:s, s:i, s:i, s:s}", "phase", "decode", "context", ctx, "concurrency",
                        conc, "status", status);
  if (strcmp(status, "valid") == 0) {
    json_object_set_new(c, "total_tps", json_real(tps));
    json_object_set_new(
      c, "ttft_ms", json_pack("{s:f, s:f, s:f}", "p50", ttft, "p90", ttft * 2, "p99", ttft * 3));
    json_object_set_new(c, "tbt_ms", json_pack("{s:f}", "p50", tbt));
  }
  return c;
}

static json_t *
prefill(int ctx, double tps, double ttft)
{
  return json_pack("{s:s, s:i, s:i, s:s, s:f, s:f}", "phase", "prefill", "context", ctx,
                   "concurrency", 1, "status", "valid", "prompt_tps", tps, "ttft_ms", ttft);
}

static json_t *
doc(json_t *cells)
{
  return json_pack("{s:s, s:s, s:s, s:o}", "schema", "tokbench.result/v1", "run_id", "r", "status",
                   "complete", "cells", cells);
}

static json_t *
base_doc(void)
{
  return doc(json_pack("[o, o, o, o, o]", decode(8192, 1, "valid", 100, 50, 10),
                       decode(8192, 2, "valid", 200, 60, 12), decode(16384, 1, "valid", 90, 70, 11),
                       decode(16384, 2, "over_capacity", 0, 0, 0), prefill(8192, 10000, 800)));
}

static json_t *
head_doc(void)
{
  /* (8K,1): -10% tok/s, -10% TTFT (better), +4% TBT; (8K,2): +5%;
   * (16K,1): error (lost); (16K,2): valid now; (32K,1): new; prefill +5%. */
  return doc(json_pack("[o, o, o, o, o, o]", decode(8192, 1, "valid", 90, 45, 10.4),
                       decode(8192, 2, "valid", 210, 60, 12), decode(16384, 1, "error", 0, 0, 0),
                       decode(16384, 2, "valid", 150, 90, 13),
                       decode(32768, 1, "valid", 80, 100, 14), prefill(8192, 10500, 760)));
}

static const json_t *
find(const json_t *cmp, const char *phase, int ctx, int conc)
{
  size_t i;
  const json_t *c;
  json_array_foreach (json_object_get(cmp, "cells"), i, c) {
    if (strcmp(json_string_value(json_object_get(c, "phase")), phase) == 0 &&
        json_integer_value(json_object_get(c, "context")) == ctx &&
        json_integer_value(json_object_get(c, "concurrency")) == conc)
      return c;
  }
  fail_msg("no cell %s %d %d", phase, ctx, conc);
  return NULL;
}

static double
metric(const json_t *c, const char *m, const char *which)
{
  const json_t *v = json_object_get(json_object_get(json_object_get(c, "metrics"), m), which);
  return json_is_number(v) ? json_number_value(v) : NAN;
}

static void
test_geomean(void **state)
{
  double a[] = { 2, 8 };
  assert_true(fabs(tb_compare_geomean(a, 2) - 4) < 1e-12);
  double b[] = { -1, NAN, 4, 0, INFINITY };
  assert_true(fabs(tb_compare_geomean(b, 5) - 4) < 1e-12);
  assert_true(isnan(tb_compare_geomean(a, 0)));
  double c[] = { 0.9, 1.05 };
  assert_true(fabs(tb_compare_geomean(c, 2) - sqrt(0.9 * 1.05)) < 1e-12);
}

static void
test_ratios_and_marks(void **state)
{
  json_t *b = base_doc(), *h = head_doc();
  char *err = NULL;
  json_t *cmp = tb_compare(b, h, 0.05, &err);
  assert_non_null(cmp);
  assert_null(err);
  assert_string_equal(json_string_value(json_object_get(cmp, "schema")), TB_COMPARE_SCHEMA);
  assert_int_equal(json_array_size(json_object_get(cmp, "cells")), 6);

  const json_t *c = find(cmp, "decode", 8192, 1);
  assert_string_equal(json_string_value(json_object_get(c, "mark")), "both");
  assert_true(metric(c, "total_tps", "base") == 100);
  assert_true(metric(c, "total_tps", "head") == 90);
  assert_true(fabs(metric(c, "total_tps", "ratio") - 0.9) < 1e-12);
  assert_true(fabs(metric(c, "ttft_p50_ms", "ratio") - 0.9) < 1e-12);
  assert_true(fabs(metric(c, "tbt_p50_ms", "ratio") - 1.04) < 1e-12);
  assert_null(json_object_get(json_object_get(c, "metrics"), "prompt_tps"));

  c = find(cmp, "decode", 16384, 1);
  assert_string_equal(json_string_value(json_object_get(c, "mark")), "base_only");
  assert_string_equal(json_string_value(json_object_get(c, "head_status")), "error");
  assert_true(isnan(metric(c, "total_tps", "ratio")));
  assert_true(metric(c, "total_tps", "base") == 90);

  c = find(cmp, "decode", 16384, 2);
  assert_string_equal(json_string_value(json_object_get(c, "mark")), "head_only");
  c = find(cmp, "decode", 32768, 1);
  assert_string_equal(json_string_value(json_object_get(c, "mark")), "head_only");
  assert_true(json_is_null(json_object_get(c, "base_status")));

  c = find(cmp, "prefill", 8192, 1);
  assert_true(fabs(metric(c, "prompt_tps", "ratio") - 1.05) < 1e-12);
  assert_true(fabs(metric(c, "ttft_ms", "ratio") - 0.95) < 1e-12);

  const json_t *sum = json_object_get(cmp, "summary");
  const json_t *s = json_object_get(sum, "total_tps");
  assert_int_equal(json_integer_value(json_object_get(s, "cells")), 2);
  assert_true(fabs(json_real_value(json_object_get(s, "geomean")) - sqrt(0.9 * 1.05)) < 1e-12);
  assert_string_equal(json_string_value(json_object_get(s, "better")), "higher");
  s = json_object_get(sum, "tbt_p50_ms");
  assert_true(fabs(json_real_value(json_object_get(s, "geomean")) - sqrt(1.04)) < 1e-12);
  assert_string_equal(json_string_value(json_object_get(s, "better")), "lower");

  /* Order: prefill first, then decode by context and concurrency. */
  const json_t *cells = json_object_get(cmp, "cells");
  assert_string_equal(json_string_value(json_object_get(json_array_get(cells, 0), "phase")),
                      "prefill");
  assert_int_equal(json_integer_value(json_object_get(json_array_get(cells, 5), "context")), 32768);
  json_decref(cmp);
  json_decref(b);
  json_decref(h);
}

static size_t
count_regs(const json_t *cmp, const char *metric_name)
{
  size_t i, n = 0;
  const json_t *g;
  json_array_foreach (json_object_get(cmp, "regressions"), i, g) {
    if (metric_name == NULL ||
        strcmp(json_string_value(json_object_get(g, "metric")), metric_name) == 0)
      n++;
  }
  return n;
}

static void
test_thresholds(void **state)
{
  json_t *b = base_doc(), *h = head_doc();
  char *err = NULL;
  /* 5%: (8K,1) tok/s -10% and (16K,1) lost. */
  json_t *cmp = tb_compare(b, h, 0.05, &err);
  assert_int_equal(count_regs(cmp, NULL), 2);
  assert_int_equal(count_regs(cmp, "total_tps"), 1);
  assert_int_equal(count_regs(cmp, "status"), 1);
  assert_true(json_is_true(json_object_get(cmp, "regressed")));
  const json_t *g = json_array_get(json_object_get(cmp, "regressions"), 0);
  assert_int_equal(json_integer_value(json_object_get(g, "context")), 8192);
  assert_true(fabs(json_real_value(json_object_get(g, "change_pct")) + 10.0) < 1e-9);
  assert_string_equal(json_string_value(json_object_get(g, "kind")), "worse");
  g = json_array_get(json_object_get(cmp, "regressions"), 1);
  assert_string_equal(json_string_value(json_object_get(g, "kind")), "lost");
  assert_string_equal(json_string_value(json_object_get(g, "head")), "error");
  json_decref(cmp);

  /* 12%: only the lost cell. */
  cmp = tb_compare(b, h, 0.12, &err);
  assert_int_equal(count_regs(cmp, NULL), 1);
  assert_int_equal(count_regs(cmp, "status"), 1);
  json_decref(cmp);

  /* 3%: TBT +4% becomes a regression; TTFT -10% (better) never is. */
  cmp = tb_compare(b, h, 0.03, &err);
  assert_int_equal(count_regs(cmp, "tbt_p50_ms"), 1);
  assert_int_equal(count_regs(cmp, "ttft_p50_ms"), 0);
  assert_int_equal(count_regs(cmp, "prompt_tps"), 0);
  json_decref(cmp);

  /* Exactly at the tolerance is not a regression: 0.9 at 10%. */
  cmp = tb_compare(b, h, 0.10, &err);
  assert_int_equal(count_regs(cmp, "total_tps"), 0);
  json_decref(cmp);

  /* Same document: no regression, every ratio 1. */
  cmp = tb_compare(b, b, 0, &err);
  assert_false(json_is_true(json_object_get(cmp, "regressed")));
  const json_t *s = json_object_get(json_object_get(cmp, "summary"), "total_tps");
  assert_true(json_real_value(json_object_get(s, "geomean")) == 1.0);
  json_decref(cmp);
  json_decref(b);
  json_decref(h);
}

static void
test_bad_input(void **state)
{
  json_t *b = base_doc();
  char *err = NULL;
  json_t *arr = json_array();
  assert_null(tb_compare(arr, b, 0.05, &err));
  assert_non_null(err);
  free(err);
  assert_null(tb_compare(b, b, 1.5, &err));
  free(err);
  assert_null(tb_compare(b, b, NAN, &err));
  free(err);
  /* Malformed cells are skipped, duplicates: the first wins. */
  json_t *h =
    doc(json_pack("[i, s, {s:s}, {s:s, s:s, s:i}, o, o]", 3, "x", "phase", "decode", "phase",
                  "decode", "context", "8K", "concurrency", 1,
                  decode(8192, 1, "valid", 110, 50, 10), decode(8192, 1, "valid", 10, 50, 10)));
  json_t *cmp = tb_compare(b, h, 0.05, &err);
  assert_non_null(cmp);
  const json_t *c = find(cmp, "decode", 8192, 1);
  assert_true(fabs(metric(c, "total_tps", "ratio") - 1.1) < 1e-12);
  json_decref(cmp);
  json_decref(h);
  json_decref(arr);
  json_decref(b);
}

/* Cost and energy (issue 26): compared where a side has them, lower
 * cost is better, disjoint intervals decide; no regression of their own;
 * a document without them gets neither member. */
static void
test_efficiency(void **state)
{
  const char *bt = "{\"schema\":\"tokbench.result/v1\",\"status\":\"complete\",\"cells\":["
                   "{\"phase\":\"decode\",\"context\":1024,\"concurrency\":4,"
                   "\"status\":\"valid\",\"total_tps\":1000,\"efficiency\":{"
                   "\"cost_per_m_output_tokens\":10,\"cost_per_m_output_tokens_ci95\":[9,11],"
                   "\"j_per_output_token\":0.8,\"j_per_output_token_ci95\":[0.7,0.9]}}]}";
  const char *ht = "{\"schema\":\"tokbench.result/v1\",\"status\":\"complete\",\"cells\":["
                   "{\"phase\":\"decode\",\"context\":1024,\"concurrency\":4,"
                   "\"status\":\"valid\",\"total_tps\":1000,\"efficiency\":{"
                   "\"cost_per_m_output_tokens\":5,\"cost_per_m_output_tokens_ci95\":[4.5,5.5],"
                   "\"j_per_output_token\":0.85,\"j_per_output_token_ci95\":[0.75,0.95]}}]}";
  json_t *b = json_loads(bt, 0, NULL), *h = json_loads(ht, 0, NULL);
  assert_non_null(b);
  assert_non_null(h);
  char *err = NULL;
  json_t *cmp = tb_compare(b, h, 0.05, &err);
  assert_non_null(cmp);
  const json_t *e = json_object_get(json_array_get(json_object_get(cmp, "cells"), 0), "efficiency");
  const json_t *c = json_object_get(e, "cost_per_m_output_tokens");
  assert_true(json_number_value(json_object_get(c, "ratio")) == 0.5);
  assert_string_equal(json_string_value(json_object_get(c, "by_interval")), "better");
  assert_string_equal(
    json_string_value(json_object_get(json_object_get(e, "j_per_output_token"), "by_interval")),
    "same");
  assert_null(json_object_get(e, "tps_per_gpu")); /* neither side has it */
  const json_t *s = json_object_get(json_object_get(json_object_get(cmp, "summary"), "efficiency"),
                                    "cost_per_m_output_tokens");
  assert_string_equal(json_string_value(json_object_get(s, "better")), "lower");
  assert_int_equal(json_integer_value(json_object_get(s, "cells")), 1);
  /* the J/token rose 6%: no regression is made of it */
  assert_true(json_is_false(json_object_get(cmp, "regressed")));
  /* the comparison's reports say so (tb_costview_compare) */
  size_t len;
  char *md = tb_cmpreport_render(cmp, TB_REPORT_MD, &len, &err);
  assert_non_null(md);
  assert_non_null(strstr(md, "### Cost and energy"));
  assert_non_null(strstr(md, "| 1K \xc3\x97 4 | 10.0 | 5.00 | better | 0.8 | 0.85 | same |"));
  free(md);
  char *html = tb_cmpreport_render(cmp, TB_REPORT_HTML, &len, &err);
  assert_non_null(strstr(html, "<table id=\"cost-cells\">"));
  free(html);
  json_decref(cmp);
  /* swapped: the head costs twice as much, "worse" */
  cmp = tb_compare(h, b, 0.05, &err);
  e = json_object_get(json_array_get(json_object_get(cmp, "cells"), 0), "efficiency");
  assert_string_equal(json_string_value(json_object_get(
                        json_object_get(e, "cost_per_m_output_tokens"), "by_interval")),
                      "worse");
  json_decref(cmp);
  /* without efficiency: no member at all */
  json_object_del(json_array_get(json_object_get(b, "cells"), 0), "efficiency");
  cmp = tb_compare(b, b, 0.05, &err);
  assert_null(json_object_get(json_array_get(json_object_get(cmp, "cells"), 0), "efficiency"));
  assert_null(json_object_get(json_object_get(cmp, "summary"), "efficiency"));
  json_decref(cmp);
  json_decref(b);
  json_decref(h);
}

int
main(void)
{
  const struct CMUnitTest tests[] = {
    cmocka_unit_test(test_geomean),    cmocka_unit_test(test_ratios_and_marks),
    cmocka_unit_test(test_thresholds), cmocka_unit_test(test_bad_input),
    cmocka_unit_test(test_efficiency),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
