/*
 * Unit tests for tb_pareto: points from a job's document (x per user, y per
 * GPU with their intervals, the configuration from the header and the
 * launch command's flags, cells without the y figure left out), the
 * frontier by intervals (a point beaten on both axes beyond the intervals
 * is off it; overlapping intervals keep both), and the SLO question.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "result/tb_pareto.h"

/* A decode cell at C with total tok/s tps ± half, TTFT ttft ms and a cost. */
static json_t *
cell(int conc, double tps, double half, double ttft, double cost)
{
  json_t *c =
    json_pack("{s:s, s:s, s:i, s:i, s:f, s:[f,f], s:{s:f}, s:{s:f}}", "phase", "decode", "status",
              "valid", "context", 1024, "concurrency", conc, "total_tps", tps, "total_tps_ci95",
              tps - half, tps + half, "ttft_ms", "p50", ttft, "tbt_ms", "p50", 1000.0 * conc / tps);
  if (cost > 0)
    json_object_set_new(c, "efficiency",
                        json_pack("{s:f, s:[f,f], s:s}", "cost_per_m_output_tokens", cost,
                                  "cost_per_m_output_tokens_ci95", cost * 0.98, cost * 1.02,
                                  "currency", "USD"));
  return c;
}

static json_t *
doc_of(int gpus, json_t *cells)
{
  return json_pack("{s:{s:s, s:s}, s:{s:{s:s, s:i}, s:f, s:s}, s:s, s:o}", "engine", "name", "vllm",
                   "version", "0.11", "cost", "gpu", "name", "H200", "count", gpus,
                   "price_per_hour", 7.0, "currency", "USD", "launch_command",
                   "vllm serve m --tensor-parallel-size 2 --api-key <redacted>", "cells", cells);
}

static void
test_points(void **state)
{
  json_t *pts = json_array();
  json_t *d =
    doc_of(2, json_pack("[o,o,{s:s,s:s}]", cell(1, 100, 2, 50, 20), cell(8, 640, 10, 80, 3.1),
                        "phase", "prefill", "status", "valid"));
  tb_pareto_add_job(pts, "job-1", "ep-1", "h200", NULL, d, TB_PARETO_TPS_PER_GPU);
  assert_int_equal(json_array_size(pts), 2);
  const json_t *p = json_array_get(pts, 1);
  assert_true(json_number_value(json_object_get(p, "x")) == 80);
  assert_true(json_number_value(json_object_get(p, "y")) == 320);
  assert_true(json_number_value(json_array_get(json_object_get(p, "x_ci95"), 0)) == 630.0 / 8);
  assert_true(json_number_value(json_array_get(json_object_get(p, "y_ci95"), 1)) == 325);
  const json_t *cfg = json_object_get(p, "config");
  assert_string_equal(json_string_value(json_object_get(cfg, "engine")), "vllm 0.11");
  assert_string_equal(json_string_value(json_array_get(json_object_get(cfg, "flags"), 0)),
                      "--tensor-parallel-size");
  assert_int_equal(json_array_size(json_object_get(cfg, "flags")), 2);
  assert_string_equal(json_string_value(json_object_get(p, "job_id")), "job-1");
  assert_true(json_is_false(json_object_get(p, "gpus_assumed")));
  /* y = cost: a cell without a cost is left out */
  json_decref(pts);
  pts = json_array();
  json_decref(d);
  d = doc_of(2, json_pack("[o,o]", cell(1, 100, 2, 50, 0), cell(8, 640, 10, 80, 3.1)));
  tb_pareto_add_job(pts, "job-1", "ep-1", "h200", NULL, d, TB_PARETO_COST);
  assert_int_equal(json_array_size(pts), 1);
  assert_true(json_number_value(json_object_get(json_array_get(pts, 0), "y")) == 3.1);
  json_decref(pts);
  json_decref(d);
}

/* A point at x ± xh, y ± yh. */
static json_t *
pt(double x, double xh, double y, double yh, double ttft)
{
  return json_pack("{s:f, s:[f,f], s:f, s:[f,f], s:f, s:f, s:i, s:i}", "x", x, "x_ci95", x - xh,
                   x + xh, "y", y, "y_ci95", y - yh, y + yh, "ttft_p50_ms", ttft, "tbt_p50_ms",
                   1000 / x, "context", 1024, "concurrency", 8);
}

static bool
on(const json_t *pts, size_t i)
{
  return json_is_true(json_object_get(json_array_get(pts, i), "frontier"));
}

static void
test_frontier(void **state)
{
  /* 0 and 1 trade off; 2 is beaten by 1 on both axes beyond the intervals;
   * 3 is beaten by 1 on values but its x interval overlaps 1's */
  json_t *pts = json_pack("[o,o,o,o]", pt(100, 2, 50, 1, 20), pt(50, 1, 200, 4, 40),
                          pt(40, 1, 150, 3, 60), pt(49, 2, 190, 4, 30));
  assert_int_equal(tb_pareto_mark(pts, TB_PARETO_TPS_PER_GPU), 3);
  assert_true(on(pts, 0) && on(pts, 1) && !on(pts, 2) && on(pts, 3));
  /* y as a cost, lower is better: 0 (x 100, cost 50) is faster per user and
   * cheaper than every other beyond both intervals, the one point left */
  assert_int_equal(tb_pareto_mark(pts, TB_PARETO_COST), 1);
  assert_true(on(pts, 0) && !on(pts, 1) && !on(pts, 2) && !on(pts, 3));
  json_decref(pts);
}

/* The frontier against the pairwise definition, over random points of
 * both orientations, ties and turned intervals included. */
static bool
beyond_ref(const json_t *a, const json_t *b, const char *key, bool higher)
{
  const json_t *ai = json_object_get(a, key), *bi = json_object_get(b, key);
  double alo = json_number_value(json_array_get(ai, 0)),
         ahi = json_number_value(json_array_get(ai, 1));
  double blo = json_number_value(json_array_get(bi, 0)),
         bhi = json_number_value(json_array_get(bi, 1));
  return higher ? alo > bhi : ahi < blo;
}

/* xorshift32: the test's own reproducible numbers */
static uint32_t
next_u32(uint32_t *s)
{
  *s ^= *s << 13;
  *s ^= *s >> 17;
  *s ^= *s << 5;
  return *s;
}

static void
test_frontier_matches_pairwise(void **state)
{
  (void)state;
  uint32_t seed = 7;
  for (int round = 0; round < 200; round++) {
    size_t n = 1 + (size_t)(next_u32(&seed) % 60);
    bool y_higher = round % 2 == 0;
    json_t *pts = json_array();
    for (size_t i = 0; i < n; i++) {
      double x = next_u32(&seed) % 20, y = next_u32(&seed) % 20;
      double wx = next_u32(&seed) % 4, wy = next_u32(&seed) % 4;
      if (next_u32(&seed) % 10 == 0) /* turned: lo above hi */
        wx = -wx;
      json_array_append_new(
        pts, json_pack("{s:[f,f], s:[f,f]}", "x_ci95", x - wx, x + wx, "y_ci95", y - wy, y + wy));
    }
    size_t on = tb_pareto_mark(pts, y_higher ? TB_PARETO_TPS_PER_GPU : TB_PARETO_COST);
    size_t want_on = 0;
    for (size_t i = 0; i < n; i++) {
      const json_t *p = json_array_get(pts, i);
      bool dominated = false;
      for (size_t j = 0; j < n && !dominated; j++)
        dominated = j != i && beyond_ref(json_array_get(pts, j), p, "x_ci95", true) &&
                    beyond_ref(json_array_get(pts, j), p, "y_ci95", y_higher);
      if (json_is_true(json_object_get(p, "frontier")) == dominated)
        fail_msg("round %d point %zu: frontier %d, pairwise says dominated %d", round, i,
                 json_is_true(json_object_get(p, "frontier")), dominated);
      want_on += !dominated;
    }
    assert_int_equal(on, want_on);
    json_decref(pts);
  }
}

static void
test_best(void **state)
{
  json_t *pts = json_pack("[o,o,o,o]", pt(100, 2, 50, 1, 20), pt(50, 1, 200, 4, 40),
                          pt(40, 1, 150, 3, 60), pt(49, 2, 198, 4, 30));
  struct tb_pareto_slo s = { .ttft_p50_ms = 45, .tbt_p50_ms = NAN, .min_tps_per_user = NAN };
  json_t *b = tb_pareto_best(pts, &s, TB_PARETO_TPS_PER_GPU);
  assert_string_equal(json_string_value(json_object_get(b, "answer")), "found");
  assert_int_equal(json_integer_value(json_object_get(b, "meeting")), 3);
  assert_true(json_number_value(json_object_get(json_object_get(b, "best"), "y")) == 200);
  assert_int_equal(json_integer_value(json_object_get(b, "ties")), 1); /* 198 ± 4 */
  assert_int_equal(json_array_size(json_object_get(b, "evidence")), 3);
  json_decref(b);
  /* the cheapest (lower y) meeting TTFT <= 45 */
  b = tb_pareto_best(pts, &s, TB_PARETO_COST);
  assert_true(json_number_value(json_object_get(json_object_get(b, "best"), "y")) == 50);
  json_decref(b);
  /* none meets: "no configuration yet" */
  s.ttft_p50_ms = 10;
  b = tb_pareto_best(pts, &s, TB_PARETO_COST);
  assert_string_equal(json_string_value(json_object_get(b, "answer")), "no configuration yet");
  assert_true(json_is_null(json_object_get(b, "best")));
  json_decref(b);
  /* the load: concurrency at least 16 */
  s = (struct tb_pareto_slo){
    .ttft_p50_ms = NAN, .tbt_p50_ms = NAN, .min_tps_per_user = NAN, .concurrency = 16
  };
  b = tb_pareto_best(pts, &s, TB_PARETO_COST);
  assert_int_equal(json_integer_value(json_object_get(b, "meeting")), 0);
  json_decref(b);
  json_decref(pts);
  enum tb_pareto_y y;
  assert_true(tb_pareto_y_parse("j_per_output_token", &y) && y == TB_PARETO_ENERGY);
  assert_false(tb_pareto_y_parse("x", &y));
}

int
main(void)
{
  const struct CMUnitTest tests[] = {
    cmocka_unit_test(test_points),
    cmocka_unit_test(test_frontier),
    cmocka_unit_test(test_frontier_matches_pairwise),
    cmocka_unit_test(test_best),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
