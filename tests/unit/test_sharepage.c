/*
 * Unit tests for tb_sharepage: a share link's page is the report
 * renderer's bytes with the robots and Open Graph tags in its head and,
 * for a signed document, the signature line after the body's start (HTML)
 * or under the first heading (Markdown); CSV and JSON are untouched; the
 * headline of a result (tests/fixtures/result_vllm.json), a comparison and
 * a history names their figures; hostile strings are escaped.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdlib.h>
#include <string.h>

#include "fixture.h"
#include "render/tb_cmpreport.h"
#include "render/tb_report.h"
#include "render/tb_sharepage.h"
#include "result/tb_compare.h"

#define FIXTURE "tests/fixtures/result_vllm.json"

static char *
render(const json_t *doc, enum tb_report_format f, size_t *len)
{
  char *err = NULL;
  char *s = tb_report_render(doc, f, len, &err);
  if (s == NULL)
    fail_msg("render: %s", err ? err : "?");
  return s;
}

static void
test_html_gets_meta_and_signature(void **state)
{
  (void)state;
  json_t *d = fixture_json(FIXTURE);
  size_t len = 0, out = 0;
  char *html = render(d, TB_REPORT_HTML, &len);
  char *title = NULL, *desc = NULL;
  tb_sharepage_describe(d, TB_SHAREPAGE_JOB, &title, &desc);
  const struct tb_sharepage p = { .title = title,
                                  .description = desc,
                                  .url = "https://b.example/s/T?a=1&b=\"2\"",
                                  .kid = "k<1>",
                                  .signed_at = "2026-05-01T11:02:01Z" };
  char *page = tb_sharepage_wrap(TB_REPORT_HTML, html, len, &p, &out);
  assert_non_null(page);
  assert_int_equal(strlen(page), out);
  const char *head = strstr(page, TB_RENDER_HEAD_MARK), *robots = strstr(page, "name=\"robots\"");
  const char *endhead = strstr(page, "</head>"), *main = strstr(page, TB_RENDER_BODY_MARK);
  assert_non_null(head);
  assert_non_null(robots);
  assert_true(head < robots && robots < endhead);
  assert_non_null(strstr(page, "<meta name=\"robots\" content=\"noindex\">"));
  assert_non_null(strstr(page, "<meta property=\"og:type\" content=\"article\">"));
  assert_non_null(strstr(
    page, "<meta property=\"og:url\" content=\"https://b.example/s/T?a=1&amp;b=&quot;2&quot;\">"));
  assert_non_null(
    strstr(page, "<meta property=\"og:title\" content=\"Step-3.7-Flash-FP8 on H200 NVL"));
  const char *sig = strstr(page, "signed by this service, key k&lt;1&gt;, at 2026-05-01T11:02:01Z");
  assert_non_null(sig);
  assert_true(main < sig);
  /* the rest is the renderer's, byte for byte */
  size_t added = out - len;
  char *meta_end = strstr(page, TB_RENDER_HEAD_MARK) + strlen(TB_RENDER_HEAD_MARK);
  assert_memory_equal(page, html, (size_t)(meta_end - page));
  assert_string_equal(
    page + out -
      (len - (size_t)(strstr(html, TB_RENDER_BODY_MARK) - html) - strlen(TB_RENDER_BODY_MARK)),
    strstr(html, TB_RENDER_BODY_MARK) + strlen(TB_RENDER_BODY_MARK));
  assert_true(added > 200);
  /* unsigned, no public URL: no signature line, no og:url */
  const struct tb_sharepage q = { .title = title, .description = desc };
  char *plain = tb_sharepage_wrap(TB_REPORT_HTML, html, len, &q, &out);
  assert_null(strstr(plain, "signed by"));
  assert_null(strstr(plain, "og:url"));
  assert_non_null(strstr(plain, "og:description"));
  free(plain);
  free(page);
  free(title);
  free(desc);
  free(html);
  json_decref(d);
}

static void
test_md_csv_json(void **state)
{
  (void)state;
  json_t *d = fixture_json(FIXTURE);
  const struct tb_sharepage p = { .kid = "k_1", .signed_at = "now" };
  size_t len = 0, out = 0;
  char *md = render(d, TB_REPORT_MD, &len);
  char *page = tb_sharepage_wrap(TB_REPORT_MD, md, len, &p, &out);
  const char *nl = strchr(md, '\n');
  assert_memory_equal(page, md, (size_t)(nl - md) + 1); /* the heading first */
  assert_non_null(strstr(page, "\n> Result signed by this service, key k\\_1, at now.\n\n"));
  assert_string_equal(page + out - (len - (size_t)(nl - md) - 1), nl + 1);
  free(page);
  const struct tb_sharepage q = { 0 };
  page = tb_sharepage_wrap(TB_REPORT_MD, md, len, &q, &out);
  assert_int_equal(out, len);
  assert_string_equal(page, md);
  free(page);
  free(md);
  for (int f = TB_REPORT_CSV; f <= TB_REPORT_JSON; f++) {
    char *b = render(d, (enum tb_report_format)f, &len);
    page = tb_sharepage_wrap((enum tb_report_format)f, b, len, &p, &out);
    assert_int_equal(out, len);
    assert_memory_equal(page, b, len);
    free(page);
    free(b);
  }
  json_decref(d);
}

static void
test_headlines(void **state)
{
  (void)state;
  json_t *d = fixture_json(FIXTURE);
  char *title = NULL, *desc = NULL;
  tb_sharepage_describe(d, TB_SHAREPAGE_JOB, &title, &desc);
  assert_string_equal(title, "Step-3.7-Flash-FP8 on H200 NVL \xc3\x97"
                             "2: tokbench report");
  /* the best valid decode and prefill cells of the fixture */
  double best = 0, pbest = 0;
  const json_t *c;
  size_t i;
  json_array_foreach (json_object_get(d, "cells"), i, c) {
    const char *st = json_string_value(json_object_get(c, "status"));
    const char *ph = json_string_value(json_object_get(c, "phase"));
    if (st == NULL || strcmp(st, "valid") != 0)
      continue;
    if (strcmp(ph, "decode") == 0 && json_number_value(json_object_get(c, "total_tps")) > best)
      best = json_number_value(json_object_get(c, "total_tps"));
    if (strcmp(ph, "prefill") == 0 && json_number_value(json_object_get(c, "prompt_tps")) > pbest)
      pbest = json_number_value(json_object_get(c, "prompt_tps"));
  }
  char num[32], want[64];
  tb_render_fmt_tps(best, num, sizeof num);
  snprintf(want, sizeof want, "Peak decode %s tok/s (", num);
  assert_non_null(strstr(desc, want));
  tb_render_fmt_tps_short(pbest, num, sizeof num);
  snprintf(want, sizeof want, "peak prefill %s tok/s (", num);
  assert_non_null(strstr(desc, want));
  assert_non_null(strstr(desc, "vllm"));
  assert_non_null(strstr(desc, "complete"));
  free(title);
  free(desc);
  /* a comparison of the document with itself */
  char *err = NULL;
  json_t *cmp = tb_compare(d, d, 0.05, &err);
  assert_non_null(cmp);
  tb_sharepage_describe(cmp, TB_SHAREPAGE_COMPARE, &title, &desc);
  assert_non_null(strstr(title, " vs "));
  assert_non_null(strstr(desc, "Head vs base: total tok/s 0.0% (geometric mean of 27 cells)"));
  assert_non_null(strstr(desc, "no regression beyond 5.0%"));
  free(title);
  free(desc);
  json_decref(cmp);
  /* a history */
  json_t *h = json_pack("{s:s, s:s, s:[{s:f}, {s:f}], s:[]}", "metric", "total_tps", "scope",
                        "matrix", "points", "value", 1.0, "value", 0.9, "change_points");
  tb_sharepage_describe(h, TB_SHAREPAGE_SERIES, &title, &desc);
  assert_non_null(strstr(desc, "2 runs of total_tps"));
  assert_non_null(strstr(desc, "latest \xe2\x88\x92"
                               "10.0%"));
  free(title);
  free(desc);
  json_decref(h);
  /* nothing readable: still a title and a headline */
  json_t *odd = json_pack("{s:i, s:s}", "cells", 3, "status", "failed");
  tb_sharepage_describe(odd, TB_SHAREPAGE_JOB, &title, &desc);
  assert_string_equal(title, "tokbench report");
  assert_string_equal(desc, "No valid cell \xc2\xb7 failed");
  free(title);
  free(desc);
  json_decref(odd);
  json_decref(d);
}

static void
test_page_without_marks(void **state)
{
  (void)state;
  const char body[] = "<p>no head</p>";
  const struct tb_sharepage p = { .kid = "k" };
  size_t out = 0;
  char *page = tb_sharepage_wrap(TB_REPORT_HTML, body, strlen(body), &p, &out);
  /* the meta tags still come first */
  assert_int_equal(strncmp(page, "<meta name=\"robots\" content=\"noindex\">", 38), 0);
  assert_non_null(strstr(page, "signed by this service, key k"));
  assert_non_null(strstr(page, body));
  free(page);
  page = tb_sharepage_wrap(TB_REPORT_MD, "", 0, &p, &out);
  assert_int_equal(out, 0);
  free(page);
}

int
main(void)
{
  const struct CMUnitTest tests[] = {
    cmocka_unit_test(test_html_gets_meta_and_signature),
    cmocka_unit_test(test_md_csv_json),
    cmocka_unit_test(test_headlines),
    cmocka_unit_test(test_page_without_marks),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
