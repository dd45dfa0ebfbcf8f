/*
 * Unit tests for tb_seriesview: an endpoint's history (GET /v1/series's
 * document) in html, md, csv and json: every point a row with its value,
 * se and interval, change points marked, the chart drawn, labels escaped,
 * odd documents rendered without a crash.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdlib.h>
#include <string.h>

#include "render/tb_seriesview.h"

static json_t *
history(void)
{
  return json_pack("{s:s, s:s, s:s, s:s, s:I, s:I, s:{s:s}, s:[{s:s, s:f, s:f, s:[f, f]}, "
                   "{s:s, s:f, s:n, s:n}, {s:s, s:f, s:f, s:[f, f]}], "
                   "s:[{s:I, s:s, s:f, s:f, s:f}]}",
                   "phase", "decode", "metric", "total_tps", "better", "higher", "scope", "cell",
                   "context", (json_int_t)8192, "concurrency", (json_int_t)4, "labels", "gpu",
                   "<h200>", "points", "at", "2026-05-01T10:00:00Z", "value", 100.0, "se", 1.5,
                   "ci95", 97.0, 103.0, "at", "2026-05-02T10:00:00Z", "value", 101.0, "se", "ci95",
                   "at", "2026-05-03T10:00:00Z", "value", 80.0, "se", 1.0, "ci95", 78.0, 82.0,
                   "change_points", "index", (json_int_t)2, "at", "2026-05-03T10:00:00Z", "before",
                   100.5, "after", 80.0, "change_pct", -20.4);
}

static char *
render(const json_t *doc, enum tb_report_format f)
{
  char *err = NULL;
  size_t len = 0;
  char *s = tb_seriesview_render(doc, f, &len, &err);
  if (s == NULL)
    fail_msg("render: %s", err ? err : "?");
  assert_int_equal(strlen(s), len);
  return s;
}

static size_t
count(const char *s, const char *needle)
{
  size_t n = 0;
  for (const char *p = strstr(s, needle); p != NULL; p = strstr(p + 1, needle))
    n++;
  return n;
}

static void
test_formats(void **state)
{
  (void)state;
  json_t *h = history();
  char *html = render(h, TB_REPORT_HTML);
  assert_non_null(strstr(html, "decode total_tps (the cell 8K \xc3\x97 4; higher is better)"));
  assert_non_null(strstr(html, "Labels: gpu=&lt;h200&gt;"));
  assert_null(strstr(html, "<h200>"));
  assert_non_null(strstr(html, "<polyline"));
  assert_int_equal(count(html, "<tr><td>"), 4); /* three runs, one change point */
  assert_non_null(strstr(html, "<td>100.000</td><td>1.500</td><td>97.000\xe2\x80\x93"
                               "103.000</td>"));
  assert_non_null(strstr(html, "<td>101.000</td><td>\xe2\x80\x94</td><td>\xe2\x80\x94</td>"));
  assert_non_null(strstr(html, "<td>-20.4%</td>"));
  assert_null(strstr(html, "<script"));
  char *md = render(h, TB_REPORT_MD);
  assert_non_null(strstr(md, "| 2026-05-03T10:00:00Z | 80.000 | 1.000 | 78.000"));
  assert_non_null(strstr(md, "| Change point at | Before | After | Change |"));
  char *csv = render(h, TB_REPORT_CSV);
  assert_string_equal(csv, "at,value,se,ci95_lo,ci95_hi,change_pct\r\n"
                           "2026-05-01T10:00:00Z,100,1.5,97,103,\r\n"
                           "2026-05-02T10:00:00Z,101,,,,\r\n"
                           "2026-05-03T10:00:00Z,80,1,78,82,-20.4\r\n");
  char *js = render(h, TB_REPORT_JSON);
  json_t *back = json_loads(js, 0, NULL);
  assert_true(json_equal(back, h));
  json_decref(back);
  free(js);
  free(csv);
  free(md);
  free(html);
  json_decref(h);
}

static void
test_odd_documents(void **state)
{
  (void)state;
  char *err = NULL;
  assert_null(tb_seriesview_render(NULL, TB_REPORT_HTML, NULL, &err));
  assert_non_null(err);
  free(err);
  json_t *odd = json_pack("{s:i, s:[s, {s:s}], s:s, s:{s:i}}", "phase", 3, "points", "x", "value",
                          "y", "change_points", "z", "labels", "k", 1);
  for (int f = TB_REPORT_HTML; f <= TB_REPORT_JSON; f++)
    free(render(odd, (enum tb_report_format)f));
  json_decref(odd);
}

int
main(void)
{
  const struct CMUnitTest tests[] = {
    cmocka_unit_test(test_formats),
    cmocka_unit_test(test_odd_documents),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
