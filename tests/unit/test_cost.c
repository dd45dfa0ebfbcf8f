/*
 * Unit tests for tb_cost: the price of an endpoint, a header and labels;
 * a window's energy from the counter (interpolated at the edges) and from
 * the power gauge (trapezoids), the summaries and the reasons; a cell's
 * efficiency figures and intervals, and the gpu_throttled check.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/tb_json.h"
#include "result/tb_cost.h"

#define S_NS 1000000000LL

static void
test_price(void **state)
{
  struct tb_cost_price p;
  json_t *ep = json_pack("{s:{s:s, s:i}, s:f, s:s}", "gpu", "name", "H200", "count", 2,
                         "price_per_hour", 7.0, "currency", "EUR");
  assert_true(tb_cost_price_of(ep, &p));
  assert_string_equal(p.gpu, "H200");
  assert_int_equal(p.gpus, 2);
  assert_true(p.per_hour == 7.0);
  assert_string_equal(p.currency, "EUR");
  json_t *h = tb_cost_header(&p, true);
  assert_string_equal(json_string_value(json_object_get(h, "telemetry")), "dcgm");
  assert_int_equal(json_integer_value(json_object_get(json_object_get(h, "gpu"), "count")), 2);
  /* a header's cost reads back as the same price */
  struct tb_cost_price q;
  assert_true(tb_cost_price_of(h, &q));
  assert_true(q.per_hour == 7.0 && q.gpus == 2);
  json_decref(h);
  json_decref(ep);
  /* hardware's count without gpu; no price; a bad currency stays USD */
  ep = json_pack("{s:{s:s, s:i}, s:s}", "hardware", "gpu", "RTX", "count", 4, "currency", "eur");
  assert_true(tb_cost_price_of(ep, &p));
  assert_int_equal(p.gpus, 4);
  assert_true(isnan(p.per_hour));
  assert_string_equal(p.currency, "USD");
  json_decref(ep);
  ep = json_pack("{s:s}", "name", "x");
  assert_false(tb_cost_price_of(ep, &p));
  json_decref(ep);
  /* labels of an import; junk ignored */
  json_t *l = json_pack("{s:s, s:s, s:s, s:s}", "gpu", "B200", "gpu_count", "8", "price_per_hour",
                        "42.5", "currency", "USD");
  assert_true(tb_cost_price_of_labels(l, &p));
  assert_true(p.per_hour == 42.5 && p.gpus == 8);
  json_decref(l);
  l = json_pack("{s:s, s:s}", "gpu_count", "x", "price_per_hour", "-1");
  assert_false(tb_cost_price_of_labels(l, &p));
  json_decref(l);
}

static struct tb_cost_sample
smp(double t_s, double w, double mj)
{
  struct tb_cost_sample s = { .t_ns = (int64_t)(t_s * S_NS),
                              .power_w = w,
                              .energy_mj = mj,
                              .util_pct = 90,
                              .sm_mhz = 1900,
                              .temp_c = 60,
                              .gpus = 2 };
  return s;
}

static void
test_window_counter(void **state)
{
  /* 500 W steady: the counter gains 500,000 mJ a second */
  struct tb_cost_sample s[5];
  for (int i = 0; i < 5; i++)
    s[i] = smp(i, 500, 1e9 + 5e5 * i);
  s[2].util_pct = 50;
  s[2].sm_mhz = 1000;
  s[2].temp_c = 80;
  struct tb_cost_energy e;
  tb_cost_window(s, 5, (int64_t)(0.5 * S_NS), (int64_t)(3.5 * S_NS), &e);
  assert_true(e.ok);
  assert_string_equal(e.source, "energy_counter");
  assert_true(fabs(e.joules - 1500) < 1e-6);
  assert_true(fabs(e.avg_w - 500) < 1e-6);
  assert_int_equal(e.samples, 3);
  assert_int_equal(e.gpus, 2);
  assert_true(fabs(e.util_mean - (90 + 50 + 90) / 3.0) < 1e-9);
  assert_true(e.sm_min == 1000 && e.sm_max == 1900);
  assert_true(e.temp_max == 80);
  assert_false(e.reasons_known);
  /* an edge beyond the last sample: the counter is not read there */
  tb_cost_window(s, 5, (int64_t)(0.5 * S_NS), 5 * S_NS, &e);
  assert_string_equal(e.source, "power_gauge");
  /* 0.5 .. 4 at 500 W, then held 1 s */
  assert_true(fabs(e.joules - 2250) < 1e-6);
}

static void
test_window_gauge(void **state)
{
  /* no counter; power ramps 100 -> 500 W over 4 s: 1200 J */
  struct tb_cost_sample s[5];
  for (int i = 0; i < 5; i++)
    s[i] = smp(i, 100 + 100 * i, NAN);
  struct tb_cost_energy e;
  tb_cost_window(s, 5, 0, 4 * S_NS, &e);
  assert_true(e.ok);
  assert_string_equal(e.source, "power_gauge");
  assert_true(fabs(e.joules - 1200) < 1e-6);
  /* inside samples only: [1.5, 2.5] is 300 W on average */
  tb_cost_window(s, 5, (int64_t)(1.5 * S_NS), (int64_t)(2.5 * S_NS), &e);
  assert_true(fabs(e.joules - 300) < 1e-6);
  /* one sample: nothing */
  tb_cost_window(s, 1, 0, S_NS, &e);
  assert_false(e.ok);
  assert_true(isnan(e.avg_w));
  /* a counter on part of the samples only: the gauge still answers */
  s[0].energy_mj = 1;
  tb_cost_window(s, 5, 0, 4 * S_NS, &e);
  assert_string_equal(e.source, "power_gauge");
}

static void
test_reasons(void **state)
{
  char buf[256];
  assert_string_equal(tb_cost_reasons_text(0x1, buf, sizeof buf), "");
  assert_string_equal(tb_cost_reasons_text(0x5, buf, sizeof buf), "sw_power_cap");
  assert_string_equal(tb_cost_reasons_text(0x48, buf, sizeof buf),
                      "hw_slowdown, hw_thermal_slowdown");
  assert_string_equal(tb_cost_reasons_text(0x1000, buf, sizeof buf), "other (0x1000)");
  /* reasons are OR-ed from the sample at t0 to the one at t1 */
  struct tb_cost_sample s[4];
  for (int i = 0; i < 4; i++) {
    s[i] = smp(i, 300, 1e6 * i);
    s[i].has_reasons = true;
    s[i].reasons = 0x1;
  }
  s[3].reasons = 0x4;
  struct tb_cost_energy e;
  tb_cost_window(s, 4, S_NS / 2, 2 * S_NS, &e);
  assert_true(e.reasons_known);
  assert_true(e.reasons == 0x1);
  tb_cost_window(s, 4, S_NS / 2, (int64_t)(2.5 * S_NS), &e);
  assert_true(e.reasons == 0x5);
}

static json_t *
decode_cell(void)
{
  return json_pack("{s:s, s:i, s:i, s:s, s:f, s:[f,f], s:i, s:f, s:i}", "phase", "decode",
                   "context", 1024, "concurrency", 4, "status", "valid", "total_tps", 1000.0,
                   "total_tps_ci95", 900.0, 1100.0, "output_tokens", 10000, "measured_s", 10.0,
                   "requests_started", 2);
}

static void
test_cell(void **state)
{
  struct tb_cost_price p = { .per_hour = 36.0, .currency = "USD", .gpus = 2, .gpu = "H200" };
  struct tb_cost_sample s[13];
  for (int i = 0; i < 13; i++)
    s[i] = smp(i, 800, 8e5 * i);
  struct tb_cost_energy e;
  tb_cost_window(s, 13, S_NS, 11 * S_NS, &e);
  json_t *cell = decode_cell();
  tb_cost_cell(cell, &p, &e);
  const json_t *ef = json_object_get(cell, "efficiency");
  assert_non_null(ef);
  /* $36/h for 10 s = $0.1 for 10,000 tokens: $10 per million */
  assert_true(fabs(tb_cost_figure(cell, "cost_per_m_output_tokens") - 10.0) < 1e-9);
  const json_t *ci = json_object_get(ef, "cost_per_m_output_tokens_ci95");
  assert_true(fabs(json_number_value(json_array_get(ci, 0)) - 1e7 / 1100.0 / 1e3 * 1e0) < 1e-9);
  assert_true(fabs(json_number_value(json_array_get(ci, 1)) - 1e4 / 900.0) < 1e-9);
  /* input: 2 requests x 1024 */
  assert_int_equal(json_integer_value(json_object_get(ef, "input_tokens")), 2048);
  assert_true(fabs(tb_cost_figure(cell, "cost_per_m_tokens") - 0.1 / 12048 * 1e6) < 1e-9);
  assert_true(fabs(tb_cost_figure(cell, "tps_per_gpu") - 500) < 1e-9);
  /* 800 W x 10 s = 8000 J over 10,000 tokens */
  assert_true(fabs(tb_cost_figure(cell, "j_per_output_token") - 0.8) < 1e-9);
  assert_true(fabs(tb_cost_figure(cell, "avg_power_w") - 800) < 1e-9);
  assert_string_equal(json_string_value(json_object_get(ef, "energy_source")), "energy_counter");
  assert_null(json_object_get(cell, "checks")); /* reasons unknown: no check */
  json_decref(cell);
  /* a throttle fails the check, an existing checks object kept */
  for (int i = 0; i < 13; i++) {
    s[i].has_reasons = true;
    s[i].reasons = i == 6 ? 0x4 : 0;
  }
  tb_cost_window(s, 13, S_NS, 11 * S_NS, &e);
  cell = decode_cell();
  json_object_set_new(cell, "checks",
                      json_pack("{s:b, s:[], s:f}", "ok", 1, "failed", "client_cpu_share", 0.1));
  tb_cost_cell(cell, &p, &e);
  const json_t *ch = json_object_get(cell, "checks");
  assert_true(json_is_true(json_object_get(ch, "gpu_throttled")));
  assert_true(json_is_false(json_object_get(ch, "ok")));
  assert_string_equal(json_string_value(json_array_get(json_object_get(ch, "failed"), 0)),
                      "GPU clocks throttled in the window (sw_power_cap)");
  assert_string_equal(
    json_string_value(json_array_get(
      json_object_get(json_object_get(cell, "efficiency"), "clock_event_reasons"), 0)),
    "sw_power_cap");
  json_decref(cell);
  /* no throttle: the check passes */
  s[6].reasons = 0x1;
  tb_cost_window(s, 13, S_NS, 11 * S_NS, &e);
  cell = decode_cell();
  tb_cost_cell(cell, NULL, &e);
  assert_true(json_is_false(json_object_get(json_object_get(cell, "checks"), "gpu_throttled")));
  assert_true(json_is_true(json_object_get(json_object_get(cell, "checks"), "ok")));
  assert_true(isnan(tb_cost_figure(cell, "cost_per_m_output_tokens")));
  json_decref(cell);
  /* prefill and error cells get nothing */
  cell = json_pack("{s:s, s:s}", "phase", "prefill", "status", "valid");
  tb_cost_cell(cell, &p, &e);
  assert_null(json_object_get(cell, "efficiency"));
  json_decref(cell);
  cell = json_pack("{s:s, s:s}", "phase", "decode", "status", "error");
  tb_cost_cell(cell, &p, &e);
  assert_null(json_object_get(cell, "efficiency"));
  json_decref(cell);
}

/* Repeats combined: joules summed over the summed tokens, the price kept,
 * the clocks pooled, a throttled repeat marks the combined cell. */
static void
test_combine(void **state)
{
  json_t *r[2];
  for (int i = 0; i < 2; i++)
    r[i] = json_pack("{s:f, s:{s:f, s:s, s:i, s:f, s:s, s:i, s:{s:f, s:f, s:f}}, s:{s:b}}",
                     "measured_s", 5.0, "efficiency", "price_per_hour", 36.0, "currency", "EUR",
                     "gpus", 2, "joules", 4000.0 + 1000 * i, "energy_source", "energy_counter",
                     "telemetry_samples", 5, "sm_clock_mhz", "mean", 1900.0 - 600 * i, "min",
                     1800.0 - 600 * i, "max", 1950.0, "checks", "gpu_throttled", i == 1);
  json_t *cell = decode_cell(); /* 10 s, 10,000 tokens: the repeats' sums */
  json_object_set_new(
    cell, "checks", json_pack("{s:b, s:[s]}", "ok", 0, "failed", "repeat 2: GPU clocks throttled"));
  tb_cost_combine(cell, r, 2);
  assert_true(fabs(tb_cost_figure(cell, "j_per_output_token") - 0.9) < 1e-9);
  assert_true(fabs(tb_cost_figure(cell, "avg_power_w") - 900) < 1e-9);
  assert_true(fabs(tb_cost_figure(cell, "cost_per_m_output_tokens") - 10.0) < 1e-9);
  const json_t *ef = json_object_get(cell, "efficiency");
  assert_string_equal(json_string_value(json_object_get(ef, "currency")), "EUR");
  assert_true(tb_json_num(json_object_get(ef, "sm_clock_mhz"), "min") == 1200);
  assert_true(tb_json_num(json_object_get(ef, "sm_clock_mhz"), "mean") == 1600);
  assert_true(json_is_true(json_object_get(json_object_get(cell, "checks"), "gpu_throttled")));
  assert_int_equal(json_array_size(json_object_get(json_object_get(cell, "checks"), "failed")), 1);
  json_decref(cell);
  json_decref(r[0]);
  json_decref(r[1]);
}

/* An import priced from its job's labels. */
static void
test_labels_apply(void **state)
{
  json_t *doc = json_pack("{s:[o]}", "cells", decode_cell());
  json_t *l = json_pack("{s:s, s:s}", "price_per_hour", "3.6", "gpu_count", "4");
  assert_true(tb_cost_apply_labels(doc, l));
  const json_t *cost = json_object_get(doc, "cost");
  assert_true(json_number_value(json_object_get(cost, "price_per_hour")) == 3.6);
  assert_true(json_is_null(json_object_get(cost, "telemetry")));
  const json_t *c = json_array_get(json_object_get(doc, "cells"), 0);
  assert_true(fabs(tb_cost_figure(c, "cost_per_m_output_tokens") - 1.0) < 1e-9);
  assert_true(fabs(tb_cost_figure(c, "tps_per_gpu") - 250) < 1e-9);
  assert_true(isnan(tb_cost_figure(c, "j_per_output_token")));
  /* once priced, never again; no price in the labels: nothing */
  assert_false(tb_cost_apply_labels(doc, l));
  json_decref(l);
  json_object_del(doc, "cost");
  l = json_pack("{s:s}", "team", "x");
  assert_false(tb_cost_apply_labels(doc, l));
  assert_false(tb_cost_apply_labels(doc, NULL));
  json_decref(l);
  json_decref(doc);
}

int
main(void)
{
  const struct CMUnitTest tests[] = {
    cmocka_unit_test(test_price),        cmocka_unit_test(test_window_counter),
    cmocka_unit_test(test_window_gauge), cmocka_unit_test(test_reasons),
    cmocka_unit_test(test_cell),         cmocka_unit_test(test_labels_apply),
    cmocka_unit_test(test_combine),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
