/* Unit tests: tb_ratereport through tb_report_render.  A document with rate
 * cells and a sweep shows them in every format with the document's figures
 * (CSV: one row per rate cell, the header's columns, values reading back as
 * the JSON's); a rate cell's server view and failed self-checks show in
 * each; names from the peer are escaped; a document without them shows no
 * rate section. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "render/tb_report.h"
#include "render/tb_ratereport.h"

static const char doc_text[] =
  "{\"schema\":\"tokbench.result/v1\",\"status\":\"complete\",\"settings\":{},"
  "\"cells\":[{\"phase\":\"rate\",\"context\":1024,\"context_label\":\"1K\","
  "\"concurrency\":1,\"rate_rps\":4,\"arrival\":\"poisson\",\"role\":\"rate\","
  "\"status\":\"valid\",\"requests\":40,\"completed\":40,\"good\":30,"
  "\"achieved_rps\":3.9,\"goodput_rps\":2.925,\"offered_rps\":4.1,\"attainment\":0.75,"
  "\"error_share\":0,\"first_error\":\"<b>x</b>\","
  "\"ttft_ms\":{\"p50\":52.5,\"p90\":60,\"p99\":70},\"tpot_ms\":{\"p50\":8.25,\"p90\":9,"
  "\"p99\":10},\"tbt_ms\":{\"p50\":8.3},\"e2e_ms\":{\"p50\":180,\"p90\":190,\"p99\":200},"
  "\"schedule_lag_ms\":{\"p50\":0.125,\"p99\":0.75,\"max\":2},\"total_tps\":62.4},"
  "{\"phase\":\"rate\",\"context\":1024,\"context_label\":\"1K\",\"concurrency\":2,"
  "\"rate_rps\":8,\"role\":\"sweep\",\"status\":\"valid\",\"attainment\":1,"
  "\"goodput_rps\":7.5}],"
  "\"sweep\":{\"attainment_pct\":90,\"slo\":{\"ttft_ms\":60},\"step_rps\":1,"
  "\"min_rps\":8,\"found_rps\":8,\"fails_at_rps\":null,\"outcome\":\"at_max_rps\","
  "\"probes\":[{\"cell\":2,\"rate_rps\":8,\"attainment\":1,\"pass\":true}]}}";

static char *
render(const json_t *doc, enum tb_report_format f)
{
  char *err = NULL;
  char *out = tb_report_render(doc, f, NULL, &err);
  assert_non_null(out);
  return out;
}

/* Splits one CSV record (no quoted commas in this fixture). */
static size_t
fields(const char *line, char f[][64], size_t max)
{
  size_t n = 0, o = 0;
  for (const char *p = line; *p && *p != '\r' && n < max; p++) {
    if (*p == ',') {
      f[n++][o] = '\0';
      o = 0;
    } else if (o < 63) {
      f[n][o++] = *p;
    }
  }
  f[n++][o] = '\0';
  return n;
}

static void
test_formats(void **state)
{
  (void)state;
  json_t *doc = json_loads(doc_text, 0, NULL);
  assert_non_null(doc);
  assert_true(tb_ratereport_any(doc));
  char *md = render(doc, TB_REPORT_MD);
  assert_non_null(strstr(md, "## Rate cells"));
  assert_non_null(strstr(md, "| 1 | rate | 4.00 | poisson | Valid | 3.90 | 2.92 | 75.0% | 40 |"));
  assert_non_null(strstr(md, "## Sweep"));
  assert_non_null(strstr(md, "ttft\\_ms ≤ 60: 8 req/s"));
  assert_null(strstr(md, "<b>x</b>")); /* escaped */
  char *html = render(doc, TB_REPORT_HTML);
  assert_non_null(strstr(html, "<section id=\"rate\">"));
  assert_non_null(strstr(html, "<polyline"));
  assert_non_null(strstr(html, "&lt;b&gt;x&lt;/b&gt;"));
  assert_null(strstr(html, "<b>x</b>"));
  char *csv = render(doc, TB_REPORT_CSV);
  char hdr[80][64], row[80][64];
  size_t nh = fields(csv, hdr, 80);
  const char *l = strstr(csv, "\r\nrate,");
  assert_non_null(l);
  size_t nr = fields(l + 2, row, 80);
  assert_int_equal(nr, nh);
  for (size_t i = 0; i < nh; i++) {
    if (strcmp(hdr[i], "goodput_rps") == 0)
      assert_true(strtod(row[i], NULL) == 2.925);
    if (strcmp(hdr[i], "schedule_lag_p99_ms") == 0)
      assert_true(strtod(row[i], NULL) == 0.75);
    if (strcmp(hdr[i], "concurrency") == 0)
      assert_string_equal(row[i], "1");
  }
  free(md);
  free(html);
  free(csv);
  json_decref(doc);
}

/* A rate cell with a server series and failed self-checks: the rate table's
 * note and the rate cells' server view say so in Markdown and HTML (with
 * the timeline), the CSV's checks columns carry the JSON's. */
static void
test_server_view_and_checks(void **state)
{
  (void)state;
  json_t *doc = json_loads(doc_text, 0, NULL);
  assert_non_null(doc);
  json_t *c = json_array_get(json_object_get(doc, "cells"), 0);
  json_error_t e;
  json_t *ss = json_loads("{\"interval_s\":1,\"t_s\":[0.01,1.0,2.0,3.0],"
                          "\"running\":[0,3,4,1],\"waiting\":[0,0,1,0],"
                          "\"kv_pct\":[0,12.5,20,5],\"summary\":{\"samples\":4,"
                          "\"peak_kv_pct\":20,\"preemptions\":0,\"server_tps\":63,"
                          "\"client_tps\":62.4,\"server_client_ratio\":1.0096}}",
                          0, &e);
  assert_non_null(ss);
  json_object_set_new(c, "server_series", ss);
  json_t *ch = json_loads("{\"ok\":false,\"failed\":[\"3 arrivals dropped (no connection "
                          "slot free)\"],\"client_cpu_share\":0.02,\"kernel_stamped\":1,"
                          "\"schedule_lag_p99_ms\":0.75,\"schedule_lag_limit_ms\":25,"
                          "\"dropped\":3,\"interarrival_cv\":0.97,"
                          "\"interarrival_cv_expected\":1,\"interarrival_cv_tolerance\":0.64,"
                          "\"server_peak_requests\":5,\"max_in_flight\":6,"
                          "\"drained_before\":true,\"drained_after\":true}",
                          0, &e);
  assert_non_null(ch);
  json_object_set_new(c, "checks", ch);
  const char *why = "checks failed: 3 arrivals dropped";
  char *md = render(doc, TB_REPORT_MD);
  assert_non_null(strstr(md, "### Server view and self-checks: rate cells"));
  assert_non_null(strstr(md, "| 4.00 | 1 | 20.0% | 0.0 |"));
  assert_non_null(strstr(md, "start lag p99 0.750 ms (limit 25.000); CV 0.970 (1.000 \xc2\xb1 "
                             "0.640); 3 dropped; server peak 5 of 6 in flight"));
  assert_non_null(strstr(md, "| yes / yes | 3 arrivals dropped"));
  assert_non_null(strstr(md, why)); /* the rate table's note */
  char *html = render(doc, TB_REPORT_HTML);
  assert_non_null(strstr(html, "id=\"rate-server-view\""));
  assert_non_null(strstr(html, "<svg class=\"spark\""));
  assert_non_null(strstr(html, "<tr class=\"flagged\">"));
  assert_non_null(strstr(html, why));
  char *csv = render(doc, TB_REPORT_CSV);
  char hdr[80][64], row[80][64];
  size_t nh = fields(csv, hdr, 80);
  const char *l = strstr(csv, "\r\nrate,");
  assert_non_null(l);
  assert_int_equal(fields(l + 2, row, 80), nh);
  bool ok_seen = false, failed_seen = false;
  for (size_t i = 0; i < nh; i++) {
    if (strcmp(hdr[i], "checks_ok") == 0) {
      assert_string_equal(row[i], "false");
      ok_seen = true;
    }
    if (strcmp(hdr[i], "checks_failed") == 0) {
      assert_non_null(strstr(row[i], "3 arrivals dropped"));
      failed_seen = true;
    }
    if (strcmp(hdr[i], "peak_kv_pct") == 0)
      assert_true(strtod(row[i], NULL) == 20);
  }
  assert_true(ok_seen && failed_seen);
  free(md);
  free(html);
  free(csv);
  json_decref(doc);
}

/* Closed-loop cells and a sweep over concurrency read in users; a
 * conversation cell shows its conversations and one row per turn. */
static void
test_users_and_turns(void **state)
{
  (void)state;
  json_t *doc = json_loads(
    "{\"schema\":\"tokbench.result/v1\",\"status\":\"complete\",\"settings\":{},"
    "\"cells\":[{\"phase\":\"rate\",\"context\":200,\"concurrency\":1,\"users\":8,"
    "\"load\":\"closed\",\"role\":\"sweep\",\"status\":\"valid\",\"attainment\":0.5,"
    "\"goodput_rps\":3.25,\"avg_in_flight\":7.75,"
    "\"conversations\":{\"started\":9,\"completed\":7,\"abandoned\":1,\"dropped\":0},"
    "\"turns\":[{\"turn\":1,\"requests\":9,\"completed\":9,\"ttft_ms\":{\"p50\":12.5,"
    "\"p99\":20},\"prompt_tokens_mean\":200,\"cached_pct\":0},{\"turn\":2,\"requests\":8,"
    "\"completed\":7,\"ttft_ms\":{\"p50\":15,\"p99\":30},\"prompt_tokens_mean\":432,"
    "\"cached_pct\":51.85}]}],"
    "\"sweep\":{\"over\":\"concurrency\",\"attainment_pct\":90,\"slo\":{\"ttft_ms\":200},"
    "\"min_concurrency\":1,\"step_concurrency\":1,\"found_concurrency\":4,"
    "\"fails_at_concurrency\":5,\"outcome\":\"converged\",\"probes\":[{\"cell\":1,"
    "\"users\":8,\"attainment\":0.5,\"pass\":false}]}}",
    0, NULL);
  assert_non_null(doc);
  char *md = render(doc, TB_REPORT_MD);
  assert_non_null(strstr(md, "| 1 | sweep | 8 users | — | Valid |"));
  assert_non_null(strstr(md, "Highest concurrency with at least 90% of requests meeting "
                             "ttft\\_ms ≤ 200: 4 users; 5 users misses (step 1 users, "
                             "converged)."));
  assert_non_null(strstr(md, "| Probe | Users | Meeting SLOs |"));
  assert_non_null(strstr(md, "| 1 | 8 | 50.0% | 3.25 | no |"));
  assert_non_null(strstr(md, "9 started, 7 completed every turn, 1 abandoned"));
  assert_non_null(strstr(md, "| 2 | 8 | 7 | 15.0 ms | 30.0 ms | 432 | 51.9% |"));
  char *html = render(doc, TB_REPORT_HTML);
  assert_non_null(strstr(html, "by concurrency (users)"));
  assert_non_null(strstr(html, "<td>2</td><td>8</td><td>7</td>"));
  char *csv = render(doc, TB_REPORT_CSV);
  char hdr[80][64], row[80][64];
  size_t nh = fields(csv, hdr, 80);
  const char *l = strstr(csv, "\r\nrate,");
  assert_non_null(l);
  assert_int_equal(fields(l + 2, row, 80), nh);
  int seen = 0;
  for (size_t i = 0; i < nh; i++) {
    if (strcmp(hdr[i], "users") == 0 && ++seen)
      assert_string_equal(row[i], "8");
    if (strcmp(hdr[i], "avg_in_flight") == 0 && ++seen)
      assert_true(strtod(row[i], NULL) == 7.75);
  }
  assert_int_equal(seen, 2);
  free(md);
  free(html);
  free(csv);
  json_decref(doc);
}

/* A trace cell with a steady-state window, and a closed-loop cell that
 * never reached its steady state: the trace's summary and each window show
 * in Markdown and HTML (and so the terminal), the CSV's steady columns carry
 * the JSON's and are there only when some cell has a window. */
static void
test_trace_and_steady(void **state)
{
  (void)state;
  json_t *doc = json_loads(
    "{\"schema\":\"tokbench.result/v1\",\"status\":\"complete\",\"settings\":{},"
    "\"cells\":[{\"phase\":\"rate\",\"context\":700,\"concurrency\":1,\"rate_rps\":0,"
    "\"role\":\"trace\",\"status\":\"valid\",\"offered_rps\":3.95,\"achieved_rps\":3.9,"
    "\"schedule_lag_ms\":{\"p50\":0.25,\"p99\":1.5,\"max\":4},\"cache_reset\":\"done\","
    "\"trace\":{\"format\":\"mooncake\",\"requests\":120,\"sessions\":7,\"span_s\":30.5,"
    "\"trace_rps\":3.93,\"implied_hit_pct\":43.6,\"hit_pct\":43.25,\"abandoned\":2},"
    "\"steady\":{\"found\":true,\"reference\":\"peak\",\"peak_in_flight\":9,"
    "\"threshold\":8.55,\"start_s\":3.5,\"end_s\":5.25,\"length_s\":1.75,\"requests\":6,"
    "\"completed\":5,\"rps\":2.857143,\"output_tps\":512.25,"
    "\"ttft_ms\":{\"p50\":40.5,\"p99\":90},\"tpot_ms\":{\"p50\":8.5,\"p99\":12}}},"
    "{\"phase\":\"rate\",\"context\":200,\"concurrency\":2,\"users\":4,\"role\":\"sweep\","
    "\"status\":\"valid\",\"steady\":{\"found\":false,\"reference\":\"target\","
    "\"peak_in_flight\":3,\"target\":4,\"threshold\":3.8,"
    "\"reason\":\"requests in flight never reached 95% of the target\"}}]}",
    0, NULL);
  assert_non_null(doc);
  char *md = render(doc, TB_REPORT_MD);
  assert_non_null(strstr(md, "### Trace replay"));
  assert_non_null(strstr(md, "| 1 | mooncake | 120 | 7 | 30.5 s | 3.93 | 3.95 | 3.90 | "
                             "43.6% / 43.2% | 0.25 ms / 1.50 ms / 4.00 ms | 2 | done |"));
  assert_non_null(strstr(md, "### Steady-state window"));
  assert_non_null(strstr(md, "| 1 trace | 9 / peak (at least 8.55) | 3.500 – 5.250 s | 1.750 s | "
                             "6 | 512.2 | 2.86 | 40.5 ms | 90.0 ms | 8.5 ms | 12.0 ms |"));
  assert_non_null(strstr(md, "| 2 sweep | 3 / target 4 (at least 3.80) | none: requests in "
                             "flight never reached 95% of the target |"));
  char *html = render(doc, TB_REPORT_HTML);
  assert_non_null(strstr(html, "<h3 id=\"trace\">Trace replay</h3>"));
  assert_non_null(strstr(html, "<td>43.6% / 43.2%</td>"));
  assert_non_null(strstr(html, "<h3 id=\"steady\">Steady-state window</h3>"));
  assert_non_null(strstr(html, "<td>3.500 – 5.250 s</td><td>1.750 s</td>"));
  char *csv = render(doc, TB_REPORT_CSV);
  char hdr[120][64], row[120][64];
  size_t nh = fields(csv, hdr, 120);
  const char *l = strstr(csv, "\r\nrate,");
  assert_non_null(l);
  size_t nr = fields(l + 2, row, 120);
  assert_int_equal(nr, nh);
  int seen = 0;
  for (size_t i = 0; i < nh; i++) {
    if (strcmp(hdr[i], "steady_found") == 0)
      seen += strcmp(row[i], "true") == 0;
    if (strcmp(hdr[i], "steady_length_s") == 0)
      seen += strtod(row[i], NULL) == 1.75;
    if (strcmp(hdr[i], "steady_output_tps") == 0)
      seen += strtod(row[i], NULL) == 512.25;
    if (strcmp(hdr[i], "steady_ttft_p99_ms") == 0)
      seen += strtod(row[i], NULL) == 90;
  }
  assert_int_equal(seen, 4);
  free(md);
  free(html);
  free(csv);
  /* an open-loop window by its level (tb_steady), and an open-loop cell of
   * one arrival: no level */
  json_t *s0 = json_object_get(json_array_get(json_object_get(doc, "cells"), 0), "steady");
  json_object_set_new(s0, "reference", json_string("level"));
  json_object_set_new(s0, "level", json_real(4.123456));
  json_object_set_new(s0, "threshold", json_real(3.9173));
  json_t *s1 = json_object_get(json_array_get(json_object_get(doc, "cells"), 1), "steady");
  json_object_set_new(s1, "reference", json_string("level"));
  json_object_del(s1, "target");
  json_object_set_new(s1, "level", json_null());
  json_object_set_new(s1, "threshold", json_null());
  json_object_set_new(s1, "reason", json_string("fewer than 2 requests arrived"));
  md = render(doc, TB_REPORT_MD);
  assert_non_null(
    strstr(md, "| 1 trace | 9 / level 4.12 (from 3.92 in flight) | 3.500 – 5.250 s |"));
  assert_non_null(strstr(md, "| 2 sweep | 3 / level — | none: fewer than 2 requests arrived |"));
  free(md);
  /* without a window, no steady column */
  json_object_del(json_array_get(json_object_get(doc, "cells"), 0), "steady");
  json_object_del(json_array_get(json_object_get(doc, "cells"), 1), "steady");
  csv = render(doc, TB_REPORT_CSV);
  assert_null(strstr(csv, "steady_"));
  md = render(doc, TB_REPORT_MD);
  assert_null(strstr(md, "Steady-state window"));
  free(csv);
  free(md);
  json_decref(doc);
}

/* A window or a trace object with members missing or of the wrong type
 * (an imported document): dashes, never "nan" or a crash; the terminal's
 * line likewise. */
static void
test_steady_and_trace_malformed(void **state)
{
  (void)state;
  json_t *doc = json_loads(
    "{\"schema\":\"tokbench.result/v1\",\"cells\":[{\"phase\":\"rate\",\"context\":1,"
    "\"concurrency\":1,\"status\":\"valid\",\"steady\":{\"found\":true,\"start_s\":\"x\","
    "\"ttft_ms\":7},\"trace\":{\"format\":5,\"requests\":\"many\"}}]}",
    0, NULL);
  assert_non_null(doc);
  for (int f = 0; f < 2; f++) {
    char *out = render(doc, f ? TB_REPORT_HTML : TB_REPORT_MD);
    assert_non_null(strstr(out, "Steady-state window"));
    assert_non_null(strstr(out, "Trace replay"));
    assert_null(strstr(out, "nan"));
    free(out);
  }
  char *line = NULL;
  size_t len = 0;
  FILE *m = open_memstream(&line, &len);
  assert_non_null(m);
  tb_ratereport_cell_line(m, json_array_get(json_object_get(doc, "cells"), 0));
  fclose(m);
  const char *st = strstr(line, ", steady —: —, TTFT p50 ");
  assert_non_null(st);
  assert_null(strstr(st, "nan"));
  free(line);
  json_decref(doc);
}

static void
test_nothing_without_rate_cells(void **state)
{
  (void)state;
  json_t *doc = json_loads("{\"schema\":\"tokbench.result/v1\",\"cells\":[{\"phase\":"
                           "\"decode\",\"context\":1024,\"concurrency\":1,\"status\":\"valid\"}]}",
                           0, NULL);
  assert_false(tb_ratereport_any(doc));
  char *md = render(doc, TB_REPORT_MD);
  assert_null(strstr(md, "Rate cells"));
  free(md);
  json_decref(doc);
}

/* The terminal line of a cell without its figures: dashes, never "nan";
 * a trace cell by its format. */
static void
test_cell_line_without_figures(void **state)
{
  (void)state;
  static const char *const cells[] = {
    "{\"phase\": \"rate\", \"users\": 4}",
    "{\"phase\": \"rate\", \"trace\": {\"format\": \"mooncake\"}, \"achieved_rps\": 7.2}",
  };
  static const char *const want[] = {
    " 4 users: achieved \u2014, goodput \u2014 (\u2014 meet SLOs), TTFT p50 \u2014, start lag "
    "p99 \u2014",
    " trace mooncake: achieved 7.20,",
  };
  for (size_t i = 0; i < 2; i++) {
    json_error_t e;
    json_t *c = json_loads(cells[i], 0, &e);
    assert_non_null(c);
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    tb_ratereport_cell_line(f, c);
    fclose(f);
    assert_null(strstr(buf, "nan"));
    assert_non_null(strstr(buf, want[i]));
    free(buf);
    json_decref(c);
  }
}

int
main(void)
{
  const struct CMUnitTest tests[] = {
    cmocka_unit_test(test_formats),
    cmocka_unit_test(test_server_view_and_checks),
    cmocka_unit_test(test_users_and_turns),
    cmocka_unit_test(test_trace_and_steady),
    cmocka_unit_test(test_steady_and_trace_malformed),
    cmocka_unit_test(test_nothing_without_rate_cells),
    cmocka_unit_test(test_cell_line_without_figures),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
