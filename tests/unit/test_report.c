/*
 * Unit tests for tb_report: each format's content against a stored result
 * (tests/fixtures/result_sglang.json, built from the sglang seed report): the
 * numbers the HTML, Markdown and CSV show are the JSON's, formatted as the
 * seeds do; hostile strings are escaped; malformed documents never crash;
 * the partial banner; the size cap; the compare renderers.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fixture.h"
#include "result/tb_compare.h"
#include "render/tb_cmpreport.h"
#include "render/tb_render.h"
#include "result/tb_import.h"
#include "render/tb_report.h"
#include "render/tb_table.h"

#define FIXTURE "tests/fixtures/result_sglang.json"

static char *
render(const json_t *doc, enum tb_report_format f)
{
  char *err = NULL;
  size_t len = 0;
  char *s = tb_report_render(doc, f, &len, &err);
  if (s == NULL)
    fail_msg("render: %s", err ? err : "?");
  assert_int_equal(strlen(s), len);
  return s;
}

static void
test_formats(void **state)
{
  char b[64];
  tb_render_fmt_tps_short(14976, b, sizeof b);
  assert_string_equal(b, "15K");
  tb_render_fmt_tps_short(15530, b, sizeof b);
  assert_string_equal(b, "15.5K");
  tb_render_fmt_tps_short(812.4, b, sizeof b);
  assert_string_equal(b, "812");
  tb_render_fmt_tps_short(2.5e6, b, sizeof b);
  assert_string_equal(b, "2.5M");
  tb_render_fmt_tps(118.44, b, sizeof b);
  assert_string_equal(b, "118.4");
  tb_render_fmt_tps(1310.02, b, sizeof b);
  assert_string_equal(b, "1,310.0");
  tb_render_fmt_tps(1234567.89, b, sizeof b);
  assert_string_equal(b, "1,234,567.9");
  tb_render_fmt_ms(1047.3, b, sizeof b);
  assert_string_equal(b, "1,047 ms");
  tb_render_fmt_ms(48, b, sizeof b);
  assert_string_equal(b, "48 ms");
  tb_render_fmt_ms1(8.43, b, sizeof b);
  assert_string_equal(b, "8.4 ms");
  tb_render_fmt_int(4096, b, sizeof b);
  assert_string_equal(b, "4,096");
  tb_render_fmt_int(-1234567, b, sizeof b);
  assert_string_equal(b, "-1,234,567");
  tb_render_fmt_int(999, b, sizeof b);
  assert_string_equal(b, "999");
  tb_render_fmt_tps(NAN, b, sizeof b);
  assert_string_equal(b, "\xe2\x80\x94");
  tb_render_fmt_ms(INFINITY, b, sizeof b);
  assert_string_equal(b, "\xe2\x80\x94");
  /* A small buffer truncates, never overflows. */
  char tiny[4];
  tb_render_fmt_tps(1234567.0, tiny, sizeof tiny);
  assert_true(strlen(tiny) < sizeof tiny);

  enum tb_report_format f;
  assert_true(tb_report_format_parse("html", &f) && f == TB_REPORT_HTML);
  assert_true(tb_report_format_parse("MD", &f) && f == TB_REPORT_MD);
  assert_true(tb_report_format_parse("text/markdown", &f) && f == TB_REPORT_MD);
  assert_true(tb_report_format_parse("text/csv", &f) && f == TB_REPORT_CSV);
  assert_true(tb_report_format_parse("application/json", &f) && f == TB_REPORT_JSON);
  assert_false(tb_report_format_parse("pdf", &f));
  assert_false(tb_report_format_parse(NULL, &f));
  assert_string_equal(tb_report_content_type(TB_REPORT_CSV), "text/csv; charset=utf-8");
}

/* The decode figures of a cell as the matrix shows them. */
static void
cell_text(const json_t *c, char *tps, char *ms)
{
  tb_render_fmt_tps(json_number_value(json_object_get(c, "total_tps")), tps, 48);
  tb_render_fmt_ms(json_number_value(json_object_get(json_object_get(c, "ttft_ms"), "p50")), ms,
                   48);
}

static void
test_html_matrix_matches_json(void **state)
{
  json_t *doc = fixture_json(FIXTURE);
  char *html = render(doc, TB_REPORT_HTML);
  /* Header like the seeds. */
  assert_non_null(strstr(html, "Speed test matrix"));
  assert_non_null(strstr(html,
                         "Step-3.7-Flash-FP8 on RTX PRO 6000 Blackwell Server Edition \xc3\x97"
                         "4"));
  assert_non_null(strstr(html, "<dt>VRAM</dt><dd>384 GB (4 \xc3\x97 96 GB)</dd>"));
  assert_non_null(strstr(html, "<dt>Commit</dt><dd>f92199b569d2</dd>"));
  assert_non_null(strstr(html, "<dt>Max output</dt><dd>4,096 tokens</dd>"));
  assert_non_null(strstr(html, "--api-key &lt;redacted&gt;"));
  assert_non_null(strstr(html, "<svg"));
  assert_null(strstr(html, "id=\"partial\""));
  /* Every decode cell of the JSON, in the matrix. */
  const json_t *cells = json_object_get(doc, "cells");
  size_t i, valid = 0, over = 0;
  const json_t *c;
  json_array_foreach (cells, i, c) {
    const char *ph = json_string_value(json_object_get(c, "phase"));
    const char *st = json_string_value(json_object_get(c, "status"));
    char key[128], want[256], tps[48], ms[48];
    json_int_t ctx = json_integer_value(json_object_get(c, "context"));
    if (strcmp(ph, "prefill") == 0) {
      tb_render_fmt_tps_short(json_number_value(json_object_get(c, "prompt_tps")), tps, 48);
      tb_render_fmt_ms(json_number_value(json_object_get(c, "ttft_ms")), ms, 48);
      snprintf(key, sizeof key, "<tr data-context=\"%" JSON_INTEGER_FORMAT "\">", ctx);
      const char *row = strstr(html, key);
      assert_non_null(row);
      snprintf(want, sizeof want, "<td><b>%s</b></td><td>%s TTFT</td>", tps, ms);
      assert_non_null(strstr(row, want));
      assert_true(strstr(row, want) < strstr(row, "</tr>"));
      continue;
    }
    snprintf(key, sizeof key,
             "data-context=\"%" JSON_INTEGER_FORMAT "\" data-concurrency=\"%" JSON_INTEGER_FORMAT
             "\"",
             ctx, json_integer_value(json_object_get(c, "concurrency")));
    const char *td = strstr(html, key);
    assert_non_null(td);
    const char *end = strstr(td, "</td>");
    if (strcmp(st, "valid") == 0) {
      cell_text(c, tps, ms);
      snprintf(want, sizeof want, "<b>%s</b><span>%s TTFT</span>", tps, ms);
      const char *w = strstr(td, want);
      assert_non_null(w);
      assert_true(w < end);
      valid++;
    } else {
      assert_string_equal(st, "over_capacity");
      const char *w = strstr(td, ">Over capacity<");
      assert_true(w != NULL && w < end);
      over++;
    }
  }
  assert_int_equal(valid, 25);
  assert_int_equal(over, 23);
  /* Figures the seed report shows, exactly. */
  assert_non_null(strstr(html, "<b>15.5K</b></td><td>1,047 ms TTFT"));
  assert_non_null(strstr(html, "<b>118.4</b><span>498 ms TTFT</span>"));
  assert_non_null(
    strstr(html, "<td>8.4 ms</td><td>1.0</td><td>0</td><td>3,553</td><td>30.0 s</td>"));
  free(html);
  json_decref(doc);
}

/* Splits a Markdown table row into cells (trimmed), up to max. */
static size_t
md_cells(const char *line, char out[][96], size_t max)
{
  size_t n = 0;
  const char *p = strchr(line, '|');
  while (p && n < max) {
    const char *q = strchr(p + 1, '|');
    const char *nl = strchr(p + 1, '\n');
    if (q == NULL || (nl && nl < q))
      break;
    const char *a = p + 1, *z = q;
    while (a < z && *a == ' ')
      a++;
    while (z > a && z[-1] == ' ')
      z--;
    size_t len = (size_t)(z - a) < 95 ? (size_t)(z - a) : 95;
    memcpy(out[n], a, len);
    out[n][len] = '\0';
    n++;
    p = q;
  }
  return n;
}

static void
test_md_matches_json(void **state)
{
  json_t *doc = fixture_json(FIXTURE);
  char *md = render(doc, TB_REPORT_MD);
  const char *sec = strstr(md, "### Sustained decode");
  assert_non_null(sec);
  const json_t *st = json_object_get(doc, "settings");
  const json_t *ctxs = json_object_get(st, "contexts");
  const json_t *concs = json_object_get(st, "concurrency");
  const json_t *cells = json_object_get(doc, "cells");
  size_t r, k, i;
  const json_t *x, *y, *c = NULL;
  json_array_foreach (ctxs, r, x) {
    char lab[32], key[48], cols[16][96];
    tb_format_tokens(json_integer_value(x), lab, sizeof lab);
    snprintf(key, sizeof key, "\n| %s |", lab);
    const char *row = strstr(sec, key);
    assert_non_null(row);
    size_t n = md_cells(row + 1, cols, 16);
    assert_int_equal(n, 1 + json_array_size(concs));
    assert_string_equal(cols[0], lab);
    json_array_foreach (concs, k, y) {
      json_array_foreach (cells, i, c) {
        if (strcmp(json_string_value(json_object_get(c, "phase")), "decode") == 0 &&
            json_integer_value(json_object_get(c, "context")) == json_integer_value(x) &&
            json_integer_value(json_object_get(c, "concurrency")) == json_integer_value(y))
          break;
      }
      assert_true(i < json_array_size(cells));
      char want[128], tps[48], ms[48];
      if (strcmp(json_string_value(json_object_get(c, "status")), "valid") == 0) {
        cell_text(c, tps, ms);
        snprintf(want, sizeof want, "**%s**<br>%s TTFT", tps, ms);
      } else {
        snprintf(want, sizeof want, "Over capacity");
      }
      assert_string_equal(cols[1 + k], want);
    }
  }
  assert_non_null(strstr(md, "| 16K | 16,228 | 15.5K | 1,047 ms |"));
  assert_non_null(strstr(md, "| Sustained decode | 8K | 1 | Valid | 118.4 | 118.4 | 498 ms | "
                             "8.4 ms | 1.0 | 0 | 3,553 | 30.0 s |"));
  free(md);
  json_decref(doc);
}

/* A minimal RFC 4180 reader: splits one record into fields. */
static size_t
csv_record(const char **pp, char out[][128], size_t max)
{
  const char *p = *pp;
  size_t n = 0;
  for (;;) {
    size_t len = 0;
    char *f = n < max ? out[n] : NULL;
    if (*p == '"') {
      p++;
      for (;;) {
        if (*p == '\0')
          break;
        if (*p == '"' && p[1] == '"') {
          if (f && len < 127)
            f[len++] = '"';
          p += 2;
        } else if (*p == '"') {
          p++;
          break;
        } else {
          if (f && len < 127)
            f[len++] = *p;
          p++;
        }
      }
    } else {
      while (*p && *p != ',' && *p != '\r' && *p != '\n') {
        if (f && len < 127)
          f[len++] = *p;
        p++;
      }
    }
    if (f)
      f[len] = '\0';
    n++;
    if (*p == ',') {
      p++;
      continue;
    }
    break;
  }
  if (*p == '\r')
    p++;
  if (*p == '\n')
    p++;
  *pp = p;
  return n;
}

static int
col(char hdr[][128], size_t n, const char *name)
{
  for (size_t i = 0; i < n; i++)
    if (strcmp(hdr[i], name) == 0)
      return (int)i;
  fail_msg("no column %s", name);
  return -1;
}

/* A decode cell with a server series and failed self-checks: every format
 * shows the flag with its reasons, the HTML draws the timeline, the CSV's
 * columns are the JSON's figures. */
static void
test_server_view_and_checks(void **state)
{
  (void)state;
  json_t *doc = fixture_json(FIXTURE);
  json_t *cells = json_object_get(doc, "cells");
  size_t i;
  json_t *c = NULL, *flagged = NULL;
  json_array_foreach (cells, i, c) {
    if (strcmp(json_string_value(json_object_get(c, "phase")), "decode") == 0 &&
        strcmp(json_string_value(json_object_get(c, "status")), "valid") == 0) {
      flagged = c;
      break;
    }
  }
  assert_non_null(flagged);
  json_error_t e;
  json_t *ss = json_loads("{\"interval_s\":1,\"t_s\":[0,1.02,2.01,3.0],"
                          "\"running\":[4,4,5,5],\"waiting\":[0,0,1,0],"
                          "\"kv_pct\":[10,20,37.5,30],\"summary\":{\"samples\":4,"
                          "\"peak_kv_pct\":37.5,\"preemptions\":2,\"server_tps\":401.5,"
                          "\"client_tps\":400,\"server_client_ratio\":1.004}}",
                          0, &e);
  assert_non_null(ss);
  json_object_set_new(flagged, "server_series", ss);
  json_t *ch = json_loads("{\"ok\":false,\"failed\":[\"achieved concurrency 5.00 "
                          "(server's running gauge) vs 4 requested\"],"
                          "\"requested_concurrency\":4,\"achieved_concurrency\":5.0,"
                          "\"achieved_source\":\"server\",\"client_cpu_share\":0.12,"
                          "\"kernel_stamped\":1,\"drained_before\":true,"
                          "\"drained_after\":false}",
                          0, &e);
  assert_non_null(ch);
  json_object_set_new(flagged, "checks", ch);
  const char *why = "checks failed: achieved concurrency 5.00";
  char *md = render(doc, TB_REPORT_MD);
  assert_non_null(strstr(md, "### Server view and self-checks"));
  assert_non_null(strstr(md, why));
  assert_non_null(strstr(md, "| 37.5% | 2.0 | "));
  assert_non_null(strstr(md, "| yes / no |"));
  /* and the matrix marks the cell */
  assert_non_null(strstr(md, "TTFT<br>\xe2\x9a\xa0 checks failed |"));
  char *html = render(doc, TB_REPORT_HTML);
  assert_non_null(strstr(html, "id=\"server-view\""));
  assert_non_null(strstr(html, "<svg class=\"spark\""));
  assert_non_null(strstr(html, "<polyline"));
  assert_non_null(strstr(html, "class=\"flagged\""));
  assert_non_null(strstr(html, "<span class=\"flag\" title=\"achieved concurrency 5.00"));
  assert_non_null(strstr(html, why));
  assert_null(strstr(html, "<script"));
  char *csv = render(doc, TB_REPORT_CSV);
  const char *p = csv;
  char hdr[80][128], f[80][128];
  size_t nh = csv_record(&p, hdr, 80);
  int c_ok = col(hdr, nh, "checks_ok"), c_failed = col(hdr, nh, "checks_failed"),
      c_kv = col(hdr, nh, "peak_kv_pct"), c_ach = col(hdr, nh, "achieved_concurrency"),
      c_after = col(hdr, nh, "drained_after"), c_st = col(hdr, nh, "server_tps");
  bool seen = false;
  while (*p) {
    assert_int_equal(csv_record(&p, f, 80), nh);
    if (f[c_ok][0] == '\0')
      continue;
    seen = true;
    assert_string_equal(f[c_ok], "false");
    assert_non_null(strstr(f[c_failed], "achieved concurrency 5.00"));
    assert_true(strtod(f[c_kv], NULL) == 37.5);
    assert_true(strtod(f[c_ach], NULL) == 5.0);
    assert_string_equal(f[c_after], "false");
    assert_true(strtod(f[c_st], NULL) == 401.5);
  }
  assert_true(seen);
  /* JSON: the document as it is */
  char *js = render(doc, TB_REPORT_JSON);
  assert_non_null(strstr(js, "\"server_series\""));
  assert_non_null(strstr(js, "\"checks\""));
  free(md);
  free(html);
  free(csv);
  free(js);
  json_decref(doc);
}

static void
test_csv_matches_json(void **state)
{
  json_t *doc = fixture_json(FIXTURE);
  char *csv = render(doc, TB_REPORT_CSV);
  const char *p = csv;
  char hdr[80][128], f[80][128];
  size_t nh = csv_record(&p, hdr, 80);
  assert_int_equal(nh, 51 + 17); /* 33, 4 flags, 14 of the server view and checks, 17 of
                                  * rate cells (tb_ratereport) */
  /* the flags of a cell: readiness, how its prompt was sized, a measured cap */
  (void)col(hdr, nh, "readiness");
  (void)col(hdr, nh, "readiness_reason");
  (void)col(hdr, nh, "prompt_tokens_source");
  (void)col(hdr, nh, "scheduler_cap");
  int c_phase = col(hdr, nh, "phase"), c_ctx = col(hdr, nh, "context"),
      c_conc = col(hdr, nh, "concurrency"), c_st = col(hdr, nh, "status"),
      c_tps = col(hdr, nh, "total_tps"), c_ptps = col(hdr, nh, "prompt_tps"),
      c_ttft = col(hdr, nh, "ttft_p50_ms"), c_tbt = col(hdr, nh, "tbt_p99_ms"),
      c_out = col(hdr, nh, "output_tokens");
  const json_t *cells = json_object_get(doc, "cells");
  size_t rows = 0;
  while (*p) {
    size_t n = csv_record(&p, f, 80);
    assert_int_equal(n, nh);
    /* Find the JSON cell of this row. */
    size_t i;
    const json_t *c = NULL;
    json_array_foreach (cells, i, c) {
      if (strcmp(json_string_value(json_object_get(c, "phase")), f[c_phase]) == 0 &&
          json_integer_value(json_object_get(c, "context")) == strtoll(f[c_ctx], NULL, 10) &&
          json_integer_value(json_object_get(c, "concurrency")) == strtoll(f[c_conc], NULL, 10))
        break;
    }
    assert_true(i < json_array_size(cells));
    assert_string_equal(f[c_st], json_string_value(json_object_get(c, "status")));
    if (strcmp(f[c_st], "valid") != 0) {
      assert_string_equal(f[c_tps], "");
    } else if (strcmp(f[c_phase], "decode") == 0) {
      /* Exactly the JSON's numbers (they read back as the same doubles). */
      assert_true(strtod(f[c_tps], NULL) == json_number_value(json_object_get(c, "total_tps")));
      const json_t *t = json_object_get(c, "ttft_ms");
      assert_true(strtod(f[c_ttft], NULL) == json_number_value(json_object_get(t, "p50")));
      t = json_object_get(c, "tbt_ms");
      assert_true(strtod(f[c_tbt], NULL) == json_number_value(json_object_get(t, "p99")));
      assert_int_equal(strtoll(f[c_out], NULL, 10),
                       json_integer_value(json_object_get(c, "output_tokens")));
    } else {
      assert_true(strtod(f[c_ptps], NULL) == json_number_value(json_object_get(c, "prompt_tps")));
      assert_true(strtod(f[c_ttft], NULL) == json_number_value(json_object_get(c, "ttft_ms")));
    }
    rows++;
  }
  assert_int_equal(rows, json_array_size(cells));
  free(csv);
  json_decref(doc);
}

static void
test_json_is_the_document(void **state)
{
  json_t *doc = fixture_json(FIXTURE);
  char *s = render(doc, TB_REPORT_JSON);
  json_t *back = json_loads(s, 0, NULL);
  assert_non_null(back);
  assert_true(json_equal(doc, back));
  json_decref(back);
  free(s);
  json_decref(doc);
}

static json_t *
hostile_doc(void)
{
  json_t *doc = fixture_json(FIXTURE);
  json_object_set_new(json_object_get(doc, "endpoint"), "name",
                      json_string("<script>alert('x')</script>"));
  json_object_set_new(json_object_get(doc, "engine"), "version",
                      json_string("1.0|**bold** [x](javascript:alert(1)) @everyone"));
  json_object_set_new(json_object_get(doc, "hardware"), "<img src=x onerror=alert(1)>",
                      json_string("\"><svg onload=alert(1)>"));
  json_object_set_new(doc, "launch_command",
                      json_string("vllm serve x ``` </pre><script>bad()</script>\n| row"));
  json_t *c = json_array_get(json_object_get(doc, "cells"), 10);
  json_object_set_new(c, "status", json_string("error"));
  json_object_set_new(c, "reason", json_string("=HYPERLINK(\"http://evil\",\"x\"),\r\n<b>"));
  return doc;
}

static void
test_escaping(void **state)
{
  json_t *doc = hostile_doc();
  char *html = render(doc, TB_REPORT_HTML);
  assert_null(strstr(html, "<script"));
  assert_null(strstr(html, "<img"));
  assert_null(strstr(html, "<svg onload"));
  assert_null(strstr(html, "\"><svg"));
  assert_non_null(strstr(html, "&lt;script&gt;alert(&#39;x&#39;)&lt;/script&gt;"));
  assert_non_null(strstr(html, "&lt;/pre&gt;&lt;script&gt;bad()&lt;/script&gt;"));
  assert_non_null(strstr(html, "title=\"=HYPERLINK(&quot;http://evil&quot;,&quot;x&quot;),"));
  free(html);

  char *md = render(doc, TB_REPORT_MD);
  /* Outside the launch command's code block, no raw HTML. */
  assert_null(strstr(md, "<script>alert"));
  assert_non_null(strstr(md, "&lt;script&gt;alert('x')&lt;/script&gt;"));
  assert_null(strstr(md, "1.0|"));
  assert_non_null(strstr(md, "1.0\\|\\*\\*bold\\*\\* \\[x\\]"));
  assert_non_null(strstr(md, "\\@everyone"));
  /* The launch command's fence is longer than the ``` inside it. */
  assert_non_null(strstr(md, "````sh\n"));
  /* The error reason: one table row, no raw newline or pipe. */
  const char *r = strstr(md, "=HYPERLINK");
  assert_non_null(r);
  const char *eol = strchr(r, '\n');
  assert_non_null(strstr(r, "&lt;b&gt; |"));
  assert_true(strstr(r, "&lt;b&gt; |") < eol);
  free(md);

  char *csv = render(doc, TB_REPORT_CSV);
  /* Quoted, formula neutralised, quotes doubled, CRLF kept inside quotes. */
  assert_non_null(strstr(csv, ",error,\"'=HYPERLINK(\"\"http://evil\"\",\"\"x\"\"),\r\n<b>\","));
  free(csv);
  json_decref(doc);
}

/* Issue 14: every format shows the uncertainty of the cells that carry it:
 * ± in the tables, intervals of the medians, error bars on the charts, the
 * bounds in CSV.  Cells without it render as before. */
static void
test_uncertainty(void **state)
{
  json_t *doc = fixture_json(FIXTURE);
  json_t *cells = json_object_get(doc, "cells");
  size_t i;
  json_t *c;
  json_t *dec = NULL, *pre = NULL;
  json_array_foreach (cells, i, c) {
    const char *ph = json_string_value(json_object_get(c, "phase"));
    const char *st = json_string_value(json_object_get(c, "status"));
    if (strcmp(st, "valid") != 0)
      continue;
    if (dec == NULL && strcmp(ph, "decode") == 0)
      dec = c;
    if (pre == NULL && strcmp(ph, "prefill") == 0)
      pre = c;
  }
  assert_non_null(dec);
  assert_non_null(pre);
  double tps = json_number_value(json_object_get(dec, "total_tps"));
  double ttft = json_number_value(json_object_get(json_object_get(dec, "ttft_ms"), "p50"));
  json_object_set_new(dec, "total_tps_se", json_real(4.63));
  json_object_set_new(dec, "total_tps_ci95", json_pack("[f, f]", tps - 11.9, tps + 11.9));
  json_object_set_new(dec, "ttft_p50_ci95", json_pack("[f, f]", ttft - 20.4, ttft + 33.4));
  json_object_set_new(dec, "repeats", json_integer(3));
  double ptps = json_number_value(json_object_get(pre, "prompt_tps"));
  json_object_set_new(pre, "prompt_tps_ci95", json_pack("[f, f]", ptps - 1200, ptps + 1200));

  char *md = render(doc, TB_REPORT_MD);
  assert_non_null(strstr(md, " \xc2\xb1 11.9")); /* "± 11.9" in the matrix and the table */
  assert_non_null(strstr(md, " \xc2\xb1 1.2K")); /* prefill */
  char want[128], lo[48], hi[48];
  tb_render_fmt_ms(ttft - 20.4, lo, sizeof lo);
  tb_render_fmt_ms(ttft + 33.4, hi, sizeof hi);
  *strrchr(lo, ' ') = '\0';
  snprintf(want, sizeof want, "(%s\xe2\x80\x93%s)", lo, hi);
  assert_non_null(strstr(md, want)); /* the median's interval */
  free(md);

  char *html = render(doc, TB_REPORT_HTML);
  assert_non_null(strstr(html, "<small class=\"ci\"> \xc2\xb1 11.9</small>"));
  assert_non_null(strstr(html, "class=\"errbar\""));
  assert_non_null(strstr(html, "(95%: "));
  free(html);

  char *csv = render(doc, TB_REPORT_CSV);
  const char *p = csv;
  char hdr[80][128], f[80][128];
  size_t nh = csv_record(&p, hdr, 80);
  int c_lo = col(hdr, nh, "total_tps_ci95_lo"), c_hi = col(hdr, nh, "total_tps_ci95_hi"),
      c_se = col(hdr, nh, "total_tps_se"), c_rep = col(hdr, nh, "repeats"),
      c_phase = col(hdr, nh, "phase"), c_tps = col(hdr, nh, "total_tps");
  size_t seen = 0;
  while (*p) {
    csv_record(&p, f, 80);
    if (strcmp(f[c_phase], "decode") != 0 || strtod(f[c_tps], NULL) != tps || f[c_lo][0] == 0)
      continue;
    assert_true(strtod(f[c_lo], NULL) == tps - 11.9);
    assert_true(strtod(f[c_hi], NULL) == tps + 11.9);
    assert_true(strtod(f[c_se], NULL) == 4.63);
    assert_string_equal(f[c_rep], "3");
    seen++;
  }
  assert_int_equal(seen, 1);
  free(csv);
  json_decref(doc);
}

static void
test_partial_banner(void **state)
{
  json_t *doc = fixture_json(FIXTURE);
  json_object_set_new(doc, "status", json_string("running"));
  json_t *cells = json_object_get(doc, "cells");
  while (json_array_size(cells) > 20)
    json_array_remove(cells, json_array_size(cells) - 1);
  json_object_set_new(doc, "progress", json_pack("{s:i}", "cells_total", 55));
  char *html = render(doc, TB_REPORT_HTML);
  assert_non_null(strstr(html, "id=\"partial\""));
  assert_non_null(strstr(html, "still going; 20 of 55 cells done so far"));
  assert_non_null(strstr(html, ">pending<"));
  free(html);
  char *md = render(doc, TB_REPORT_MD);
  assert_non_null(strstr(md, "> **Warning:** Partial result"));
  free(md);
  /* GET /v1/jobs/{id}/result of a running job: status partial, state running. */
  json_object_set_new(doc, "status", json_string("partial"));
  json_object_set_new(doc, "state", json_string("running"));
  html = render(doc, TB_REPORT_HTML);
  assert_non_null(strstr(html, "still going; 20 of 55 cells done so far"));
  free(html);
  json_object_del(doc, "state");
  html = render(doc, TB_REPORT_HTML);
  assert_non_null(strstr(html, "Partial result: 0 cells could not be measured"));
  free(html);
  json_object_set_new(doc, "status", json_string("failed"));
  json_object_set_new(doc, "error", json_string("endpoint <down>"));
  html = render(doc, TB_REPORT_HTML);
  assert_non_null(strstr(html, "the run failed: endpoint &lt;down&gt;"));
  free(html);
  json_decref(doc);
}

static void
test_malformed_never_crashes(void **state)
{
  static const char *const docs[] = {
    "{}",
    "{\"cells\": 3}",
    "{\"cells\": [1, \"x\", null, [], {}]}",
    "{\"status\": 5, \"cells\": [{\"phase\": \"decode\", \"context\": \"8K\"}]}",
    "{\"cells\": [{\"phase\": \"decode\", \"context\": -5, \"concurrency\": 0, \"status\": "
    "\"valid\"}]}",
    "{\"cells\": [{\"phase\": \"decode\", \"context\": 8192, \"concurrency\": 1, \"status\": "
    "\"valid\","
    " \"total_tps\": \"fast\", \"ttft_ms\": [1], \"tbt_ms\": {\"p50\": \"x\"}, \"measured_s\": "
    "1e308,"
    " \"output_tokens\": 1.5, \"avg_active\": -1e300}]}",
    "{\"cells\": [{\"phase\": \"decode\", \"context\": 8192, \"concurrency\": 1, \"status\": "
    "\"valid\", \"total_tps\": 0},"
    " {\"phase\": \"decode\", \"context\": 8192, \"concurrency\": 1, \"status\": \"error\"},"
    " {\"phase\": \"prefill\", \"context\": 1099511627776, \"status\": \"valid\", \"prompt_tps\": "
    "-3}]}",
    "{\"hardware\": [], \"engine\": \"x\", \"model\": {\"served\": 3}, \"settings\": "
    "{\"contexts\": [0, -1, 9e18, \"a\"],"
    " \"concurrency\": {}, \"duration_s\": \"30\"}, \"capacity\": {\"kv_budget_tokens\": -1}, "
    "\"cells\": []}",
    "{\"hardware\": {\"count\": 9223372036854775807, \"vram_gb\": 1e308}, \"cells\": []}",
  };
  static const enum tb_report_format fmts[] = { TB_REPORT_HTML, TB_REPORT_MD, TB_REPORT_CSV,
                                                TB_REPORT_JSON };
  for (size_t i = 0; i < sizeof docs / sizeof docs[0]; i++) {
    json_t *d = json_loads(docs[i], 0, NULL);
    assert_non_null(d);
    for (size_t k = 0; k < 4; k++) {
      char *s = render(d, fmts[k]);
      free(s);
    }
    json_decref(d);
  }
  /* Many distinct contexts: the axes are capped. */
  json_t *d = json_pack("{s:[]}", "cells");
  for (int i = 1; i <= 200; i++)
    json_array_append_new(json_object_get(d, "cells"),
                          json_pack("{s:s, s:i, s:i, s:s, s:f}", "phase", "decode", "context",
                                    i * 1024, "concurrency", i, "status", "valid", "total_tps",
                                    (double)i));
  char *s = render(d, TB_REPORT_HTML);
  assert_non_null(strstr(s, "left out"));
  free(s);
  json_decref(d);
  /* Not an object. */
  char *err = NULL;
  json_t *arr = json_array();
  assert_null(tb_report_render(arr, TB_REPORT_HTML, NULL, &err));
  assert_non_null(err);
  free(err);
  json_decref(arr);
}

static void
test_size_cap(void **state)
{
  json_t *doc = fixture_json(FIXTURE);
  size_t n = TB_REPORT_MAX / 4 + 1;
  char *big = malloc(n + 1);
  memset(big, '<', n); /* each becomes "&lt;" (4 bytes) in HTML */
  big[n] = '\0';
  json_object_set_new(doc, "launch_command", json_string(big));
  free(big);
  char *err = NULL;
  assert_null(tb_report_render(doc, TB_REPORT_HTML, NULL, &err));
  assert_non_null(err);
  assert_non_null(strstr(err, "larger than"));
  free(err);
  json_decref(doc);
}

static void
test_compare_formats(void **state)
{
  json_t *base = fixture_json("tests/fixtures/result_sglang.json");
  json_t *head = fixture_json("tests/fixtures/result_vllm.json");
  char *err = NULL;
  json_t *cmp = tb_compare(base, head, 0.05, &err);
  assert_non_null(cmp);
  size_t len;
  char *html = tb_cmpreport_render(cmp, TB_REPORT_HTML, &len, &err);
  assert_non_null(html);
  assert_non_null(strstr(html, "id=\"compare-matrix\""));
  /* 8K x 1: sglang 118.4, vLLM 111.9 (3358/30) -> -5.5%: a regression. */
  assert_non_null(strstr(html, "<b>111.9</b><span>was 118.4</span><span class=\"down\">"
                               "\xe2\x88\x92"
                               "5.5%</span>"));
  assert_non_null(strstr(html, "id=\"regressions\""));
  free(html);
  char *md = tb_cmpreport_render(cmp, TB_REPORT_MD, &len, &err);
  assert_non_null(md);
  assert_non_null(strstr(md, "| 8K | 111.9 (\xe2\x88\x92"
                             "5.5%) |"));
  free(md);
  char *csv = tb_cmpreport_render(cmp, TB_REPORT_CSV, &len, &err);
  assert_non_null(csv);
  assert_non_null(strstr(csv, "decode,8192,8K,1,valid,valid,both,"));
  assert_non_null(strstr(csv, "total_tps:-5.5%"));
  free(csv);
  char *js = tb_cmpreport_render(cmp, TB_REPORT_JSON, &len, &err);
  json_t *back = json_loads(js, 0, NULL);
  assert_true(json_equal(back, cmp));
  json_decref(back);
  free(js);
  json_decref(cmp);
  json_decref(base);
  json_decref(head);
}

/* Cells of a Markdown-style table row: the pipes that are not escaped,
 * minus one. */
static int
row_cells(const char *line, size_t len)
{
  int pipes = 0;
  for (size_t i = 0; i < len; i++)
    if (line[i] == '|' && (i == 0 || line[i - 1] != '\\'))
      pipes++;
  return pipes - 1;
}

/* Checks that every row of the table whose header line starts with
 * `head` (inside text) has as many cells as the header; returns the number
 * of body rows. */
static int
table_rows_match_header(const char *text, const char *head)
{
  const char *h = strstr(text, head);
  assert_non_null(h);
  const char *eol = strchr(h, '\n');
  assert_non_null(eol);
  int want = row_cells(h, (size_t)(eol - h));
  int rows = 0;
  const char *p = eol + 1;
  while (*p == '|') {
    const char *e = strchr(p, '\n');
    size_t n = e ? (size_t)(e - p) : strlen(p);
    if (row_cells(p, n) != want)
      fail_msg("%d cells, the header has %d: %.*s", row_cells(p, n), want, (int)n, p);
    rows++;
    if (e == NULL)
      break;
    p = e + 1;
  }
  return rows - 1; /* the alignment row */
}

/* The terminal tables of `tokbench run` (tb_table) as a string. */
static char *
table_text(const json_t *doc)
{
  char *buf = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&buf, &len);
  assert_non_null(f);
  tb_table_print(f, doc);
  fclose(f);
  return buf;
}

/* Issue 12 item 9: error rows had one cell more than the header (the
 * reason spilled into a column of its own). */
static void
test_all_measurements_rows_fit_the_header(void **state)
{
  (void)state;
  json_t *doc = fixture_json(FIXTURE);
  json_t *cells = json_object_get(doc, "cells");
  size_t i;
  json_t *c;
  int decode = 0;
  json_array_foreach (cells, i, c) {
    const char *ph = json_string_value(json_object_get(c, "phase"));
    if (ph == NULL || strcmp(ph, "decode") != 0 ||
        strcmp(json_string_value(json_object_get(c, "status")), "valid") != 0)
      continue;
    if (decode == 0) {
      json_object_set_new(c, "status", json_string("error"));
      json_object_set_new(c, "reason", json_string("stream cut after 12 tokens"));
    } else if (decode == 1) {
      json_object_set_new(c, "status", json_string("skipped"));
      json_object_set_new(c, "reason", json_string("context + max output over max_model_len"));
    } else if (decode == 2) {
      json_object_set_new(c, "token_source", json_string("chunks"));
    }
    decode++;
  }
  json_array_foreach (cells, i, c) {
    const char *ph = json_string_value(json_object_get(c, "phase"));
    if (ph != NULL && strcmp(ph, "prefill") == 0) {
      json_object_set_new(c, "status", json_string("error"));
      json_object_set_new(c, "reason", json_string("warm-up request: HTTP 500"));
      break;
    }
  }
  char *md = render(doc, TB_REPORT_MD);
  int n_md = table_rows_match_header(md, "| Phase | Context | Requests at once |");
  assert_true(n_md > 10);
  assert_non_null(strstr(md, "stream cut after 12 tokens |"));
  char *tt = table_text(doc);
  int n_tt = table_rows_match_header(tt, "| Phase | Context | Requests at once |");
  assert_int_equal(n_tt, (int)json_array_size(cells));
  assert_non_null(strstr(tt, "| stream cut after 12 tokens |\n"));
  free(tt);
  free(md);
  json_decref(doc);
}

/* llm-inference-bench 0.7.x runs decode at context 0 first: the imported
 * row shows as 0 in md, csv and html, as in the JSON. */
static void
test_context_zero_import(void **state)
{
  (void)state;
  json_t *in = fixture_json("tests/fixtures/llm_inference_bench_vllm.json");
  json_t *md = json_object_get(in, "metadata");
  json_object_set_new(md, "version", json_string("0.7.2"));
  json_array_insert_new(json_object_get(md, "context_lengths"), 0, json_integer(0));
  json_t *res = json_object_get(in, "results");
  for (int conc = 1; conc <= 2; conc++) {
    json_t *r = json_deep_copy(json_array_get(res, 0));
    json_object_set_new(r, "context_tokens", json_integer(0));
    json_object_set_new(r, "concurrency", json_integer(conc));
    json_object_set_new(r, "aggregate_tps", json_real(conc == 1 ? 123.25 : 240.5));
    json_array_append_new(res, r);
  }
  char *err = NULL;
  enum tb_import_source src;
  json_t *doc = tb_import(in, &src, &err);
  assert_non_null(doc);
  assert_int_equal(json_integer_value(json_array_get(
                     json_object_get(json_object_get(doc, "settings"), "contexts"), 0)),
                   0);
  char *m = render(doc, TB_REPORT_MD);
  assert_non_null(strstr(m, "\n| 0 | **123.2**")); /* the decode matrix's first row */
  assert_non_null(strstr(m, "| Sustained decode | 0 | 1 | Valid |"));
  assert_non_null(strstr(m, "| Sustained decode | 0 | 2 | Valid |"));
  char *csv = render(doc, TB_REPORT_CSV);
  assert_non_null(strstr(csv, "\ndecode,0,0,1,valid,"));
  assert_non_null(strstr(csv, "\ndecode,0,0,2,valid,"));
  char *html = render(doc, TB_REPORT_HTML);
  assert_non_null(strstr(html, "<th class=\"l\">0</th><td data-context=\"0\" "
                               "data-concurrency=\"1\""));
  assert_non_null(strstr(html, ">Sustained decode</td><td>0</td><td>2</td>"));
  char *tt = table_text(doc);
  assert_non_null(strstr(tt, "\n| 0 | 123.2"));
  assert_non_null(strstr(tt, "| Sustained decode | 0 | 1 | Valid |"));
  free(tt);
  free(html);
  free(csv);
  free(m);
  json_decref(doc);
  json_decref(in);
}

/* A cell llm-inference-bench measured while capacity-limited (fewer of its
 * requests ran at once than asked) is shown as the tool shows it: marked in
 * every matrix ("Over capacity*", explained under it), never as a figure for
 * C requests; its raw tok/s stays in the JSON and a CSV column of its own. */
static void
test_capacity_limited_cells(void **state)
{
  (void)state;
  json_t *doc = fixture_json(FIXTURE);
  char *md = render(doc, TB_REPORT_MD);
  assert_null(strstr(md, "Over capacity*")); /* none in the seed */
  free(md);
  json_t *cells = json_object_get(doc, "cells"), *c, *oc = NULL;
  size_t i;
  json_array_foreach (cells, i, c) {
    if (oc == NULL && strcmp(json_string_value(json_object_get(c, "status")), "over_capacity") == 0)
      oc = c;
  }
  assert_non_null(oc);
  json_object_set_new(oc, "total_tps_capacity_limited", json_real(123.25));
  json_object_set_new(oc, "reason", json_string("capacity-limited: the server ran 3.5 of 8"));

  md = render(doc, TB_REPORT_MD);
  assert_non_null(strstr(md, "| Over capacity* |"));
  assert_non_null(strstr(md, "Over capacity*: run, but capacity-limited"));
  free(md);
  char *html = render(doc, TB_REPORT_HTML);
  assert_non_null(strstr(html, "title=\"capacity-limited: the server ran 3.5 of 8\">"
                               "Over capacity*</td>"));
  assert_non_null(strstr(html, "Over capacity*: run, but capacity-limited"));
  free(html);

  char *csv = render(doc, TB_REPORT_CSV);
  const char *p = csv;
  char hdr[80][128], f[80][128];
  size_t nh = csv_record(&p, hdr, 80);
  int c_cl = col(hdr, nh, "total_tps_capacity_limited"), c_st = col(hdr, nh, "status");
  size_t seen = 0;
  while (*p) {
    size_t n = csv_record(&p, f, 80);
    assert_int_equal(n, nh); /* every row has the header's columns */
    if (f[c_cl][0] != '\0') {
      assert_string_equal(f[c_st], "over_capacity");
      assert_true(strtod(f[c_cl], NULL) == 123.25);
      seen++;
    }
  }
  assert_int_equal(seen, 1);
  free(csv);

  char *txt = table_text(doc);
  assert_non_null(strstr(txt, " Over capacity* |"));
  assert_non_null(strstr(txt, "Over capacity*: run, but capacity-limited"));
  free(txt);
  json_decref(doc);
}

/* The header says where the capacity figures came from, and why one is
 * unknown, as discovery recorded it. */
static void
test_capacity_sources_shown(void **state)
{
  (void)state;
  json_t *doc = fixture_json(FIXTURE);
  json_t *cap = json_object_get(doc, "capacity");
  json_object_set_new(cap, "kv_budget_tokens", json_null());
  json_object_set_new(cap, "source", json_string("none"));
  json_object_set_new(cap, "max_running_requests", json_integer(4));
  json_object_set_new(cap, "max_running_source", json_string("llama.cpp /props total_slots"));
  json_object_set_new(cap, "unknown",
                      json_pack("{s:s}", "kv_budget_tokens", "tgi /info has no batch budget"));
  char *md = render(doc, TB_REPORT_MD);
  assert_non_null(strstr(md, "unknown (tgi /info has no batch budget)"));
  assert_non_null(strstr(md, "4 (llama.cpp /props total\\_slots)")); /* md escapes _ */
  char *html = render(doc, TB_REPORT_HTML);
  assert_non_null(strstr(html, "unknown (tgi /info has no batch budget)"));
  char *tt = table_text(doc);
  assert_non_null(strstr(tt, "KV budget unknown (tgi /info has no batch budget: every cell run)"));
  free(tt);
  free(html);
  free(md);
  json_decref(doc);
}

/* The note beside a cell, the same in every format: flags joined, the
 * reason of a cell not measured, a measured cap's reason. */
static void
test_cell_notes(void **state)
{
  (void)state;
  char buf[TB_RENDER_NOTE_MAX];
  json_t *c =
    json_pack("{s:s, s:s, s:s, s:s, s:s, s:s}", "status", "valid", "token_source", "chunks",
              "readiness", "client", "readiness_reason", "no /metrics", "prompt_tokens_source",
              "estimate", "prompt_tokens_estimate", "estimated: 1 token a word");
  assert_string_equal(tb_render_cell_note(c, buf, sizeof buf),
                      "output tokens counted from chunks (no usage from the server); ready by "
                      "the client alone: no /metrics; prompt size estimated: 1 token a word");
  /* cut to the buffer, never past it */
  char small[24];
  assert_int_equal(strlen(tb_render_cell_note(c, small, sizeof small)), sizeof small - 1);
  json_object_set_new(c, "readiness", json_string("server"));
  json_object_set_new(c, "token_source", json_string("usage"));
  json_object_set_new(c, "prompt_tokens_source", json_string("usage"));
  assert_string_equal(tb_render_cell_note(c, buf, sizeof buf), "");
  json_decref(c);
  c = json_pack("{s:s, s:s, s:i}", "status", "over_capacity", "reason", "at most 12",
                "scheduler_cap", 12);
  assert_string_equal(tb_render_cell_note(c, buf, sizeof buf), "at most 12");
  json_object_del(c, "scheduler_cap"); /* the KV rule's: the matrix legend says it */
  assert_string_equal(tb_render_cell_note(c, buf, sizeof buf), "");
  json_decref(c);
}

int
main(void)
{
  const struct CMUnitTest tests[] = {
    cmocka_unit_test(test_cell_notes),
    cmocka_unit_test(test_all_measurements_rows_fit_the_header),
    cmocka_unit_test(test_context_zero_import),
    cmocka_unit_test(test_capacity_sources_shown),
    cmocka_unit_test(test_capacity_limited_cells),
    cmocka_unit_test(test_formats),
    cmocka_unit_test(test_html_matrix_matches_json),
    cmocka_unit_test(test_md_matches_json),
    cmocka_unit_test(test_csv_matches_json),
    cmocka_unit_test(test_server_view_and_checks),
    cmocka_unit_test(test_uncertainty),
    cmocka_unit_test(test_json_is_the_document),
    cmocka_unit_test(test_escaping),
    cmocka_unit_test(test_partial_banner),
    cmocka_unit_test(test_malformed_never_crashes),
    cmocka_unit_test(test_size_cap),
    cmocka_unit_test(test_compare_formats),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
