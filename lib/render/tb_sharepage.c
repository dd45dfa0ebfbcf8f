/*
 * tb_sharepage: see tb_sharepage.h.  The headline is one pass over the
 * document's cells (or a comparison's summary, or a history's points); the
 * additions go in at the marks tb_render_html_head writes, so the page is
 * the report renderer's, byte for byte, around them.
 */
#include "render/tb_sharepage.h"

#include <inttypes.h>
#include <math.h>
#include <string.h>

#include "base/tb_json.h"

#define DESC_MAX 400 /* bytes of a headline, at most */

/* The best valid cell of a phase (0 prefill, 1 decode) by figure k. */
static const json_t *
best_cell(const json_t *doc, int phase, const char *k, double *best)
{
  const json_t *cells = json_object_get(doc, "cells"), *found = NULL;
  *best = NAN;
  size_t n = json_array_size(cells);
  if (n > TB_RENDER_MAX_CELLS)
    n = TB_RENDER_MAX_CELLS;
  for (size_t i = 0; i < n; i++) {
    const json_t *c = json_array_get(cells, i);
    const char *st = tb_json_str(c, "status");
    double v = tb_json_num(c, k);
    if (tb_render_cell_phase(c) != phase || st == NULL || strcmp(st, "valid") != 0 || !isfinite(v))
      continue;
    if (found == NULL || v > *best) {
      found = c;
      *best = v;
    }
  }
  return found;
}

/* " · " between parts of a headline. */
static void
part(struct tb_render_buf *b, const char *s)
{
  if (s == NULL || *s == '\0')
    return;
  if (b->len > 0)
    tb_render_puts(b, " \xc2\xb7 ");
  tb_render_puts(b, s);
}

static void
describe_job(const json_t *doc, struct tb_render_buf *b)
{
  double v;
  char num[32], ctx[32], t[160];
  int64_t c = 0, k = 0;
  const json_t *d = best_cell(doc, 1, "total_tps", &v);
  if (d != NULL) {
    tb_render_fmt_tps(v, num, sizeof num);
    if (!tb_json_int(d, "context", &c))
      c = 0;
    tb_format_tokens(c, ctx, sizeof ctx);
    if (!tb_json_int(d, "concurrency", &k))
      k = 0;
    snprintf(t, sizeof t, "Peak decode %s tok/s (%s " TB_RENDER_TIMES " %" PRId64 ")", num, ctx, k);
    part(b, t);
  }
  const json_t *p = best_cell(doc, 0, "prompt_tps", &v);
  if (p != NULL) {
    tb_render_fmt_tps_short(v, num, sizeof num);
    if (!tb_json_int(p, "context", &c))
      c = 0;
    tb_format_tokens(c, ctx, sizeof ctx);
    snprintf(t, sizeof t, "%s prefill %s tok/s (%s)", d != NULL ? "peak" : "Peak", num, ctx);
    part(b, t);
  }
  if (d == NULL && p == NULL)
    part(b, "No valid cell");
  char *eng = tb_render_engine_line(doc);
  part(b, eng);
  free(eng);
  part(b, tb_json_str(doc, "status"));
}

static void
describe_compare(const json_t *doc, struct tb_render_buf *b)
{
  const json_t *tps = json_object_get(json_object_get(doc, "summary"), "total_tps");
  double g = tb_json_num(tps, "geomean");
  int64_t cells = 0;
  char t[200], pct[32];
  if (isfinite(g) && g > 0) {
    tb_render_fmt_pct(g, pct, sizeof pct);
    if (!tb_json_int(tps, "cells", &cells))
      cells = 0;
    snprintf(t, sizeof t, "Head vs base: total tok/s %s (geometric mean of %" PRId64 " cell%s)",
             pct, cells, cells == 1 ? "" : "s");
    part(b, t);
  } else {
    part(b, "Head vs base: no decode cell valid in both");
  }
  size_t n = json_array_size(json_object_get(doc, "regressions"));
  double tol = tb_json_num(doc, "tolerance");
  if (n > 0)
    snprintf(t, sizeof t, "%zu regression%s", n, n == 1 ? "" : "s");
  else if (isfinite(tol))
    snprintf(t, sizeof t, "no regression beyond %.1f%%", tol * 100);
  else
    snprintf(t, sizeof t, "no regression");
  part(b, t);
}

static void
describe_series(const json_t *doc, struct tb_render_buf *b)
{
  const json_t *pts = json_object_get(doc, "points");
  size_t n = json_array_size(pts);
  const char *metric = tb_json_str(doc, "metric"), *scope = tb_json_str(doc, "scope");
  char t[200], num[32];
  bool matrix = scope != NULL && strcmp(scope, "matrix") == 0;
  snprintf(t, sizeof t, "%zu run%s of %s (%s)", n, n == 1 ? "" : "s", metric ? metric : "?",
           matrix ? "the matrix against each cell's median" : "one cell");
  part(b, t);
  double last = n > 0 ? tb_json_num(json_array_get(pts, n - 1), "value") : NAN;
  if (isfinite(last)) {
    if (matrix)
      tb_render_fmt_pct(last, num, sizeof num);
    else
      tb_render_fmt_num(last, 1, "", num, sizeof num);
    snprintf(t, sizeof t, "latest %s", num);
    part(b, t);
  }
  size_t ncp = json_array_size(json_object_get(doc, "change_points"));
  snprintf(t, sizeof t, "%zu change point%s", ncp, ncp == 1 ? "" : "s");
  part(b, t);
}

void
tb_sharepage_describe(const json_t *doc, enum tb_sharepage_kind kind, char **title,
                      char **description)
{
  struct tb_render_buf b = { 0 };
  char *line = NULL;
  switch (kind) {
  case TB_SHAREPAGE_COMPARE: {
    char *h = tb_render_title_line(json_object_get(doc, "head"));
    char *l = tb_render_title_line(json_object_get(doc, "base"));
    line = h != NULL && l != NULL ? tb_xasprintf("%s vs %s", h, l) : NULL;
    *title = line != NULL ? tb_xasprintf("%s: tokbench comparison", line)
                          : tb_xstrdup("tokbench comparison");
    free(h);
    free(l);
    describe_compare(doc, &b);
    break;
  }
  case TB_SHAREPAGE_SERIES:
    *title = tb_xstrdup("tokbench: an endpoint's history");
    describe_series(doc, &b);
    break;
  case TB_SHAREPAGE_JOB:
  default:
    line = tb_render_title_line(doc);
    *title =
      line != NULL ? tb_xasprintf("%s: tokbench report", line) : tb_xstrdup("tokbench report");
    describe_job(doc, &b);
    break;
  }
  free(line);
  char *err = NULL;
  char *d = tb_render_finish(&b, NULL, &err);
  free(err);
  if (d == NULL)
    d = tb_xstrdup("");
  if (strlen(d) > DESC_MAX) { /* cut on a UTF-8 boundary */
    size_t n = DESC_MAX;
    while (n > 0 && ((unsigned char)d[n] & 0xc0) == 0x80)
      n--;
    d[n] = '\0';
  }
  *description = d;
}

static void
meta(struct tb_render_buf *b, const char *attr, const char *name, const char *content)
{
  if (content == NULL)
    return;
  tb_render_printf(b, "<meta %s=\"%s\" content=\"", attr, name);
  tb_render_html(b, content);
  tb_render_puts(b, "\">");
}

/* The head's additions. */
static void
html_meta(struct tb_render_buf *b, const struct tb_sharepage *p)
{
  tb_render_puts(b, "<meta name=\"robots\" content=\"noindex\">"
                    "<meta name=\"referrer\" content=\"no-referrer\">");
  meta(b, "name", "description", p->description);
  meta(b, "property", "og:type", "article");
  meta(b, "property", "og:site_name", "tokbench");
  meta(b, "property", "og:title", p->title);
  meta(b, "property", "og:description", p->description);
  meta(b, "property", "og:url", p->url);
}

static void
html_signed(struct tb_render_buf *b, const struct tb_sharepage *p)
{
  if (p->kid == NULL)
    return;
  tb_render_puts(b, "<p class=\"note\" id=\"signature\">Result signed by this service, key ");
  tb_render_html(b, p->kid);
  if (p->signed_at != NULL) {
    tb_render_puts(b, ", at ");
    tb_render_html(b, p->signed_at);
  }
  tb_render_puts(b, ".</p>\n");
}

static void
wrap_html(struct tb_render_buf *b, const char *body, size_t len, const struct tb_sharepage *p)
{
  const char *head = strstr(body, TB_RENDER_HEAD_MARK);
  size_t at = head != NULL ? (size_t)(head - body) + strlen(TB_RENDER_HEAD_MARK) : 0;
  const char *main = strstr(body + at, TB_RENDER_BODY_MARK);
  size_t bat = main != NULL ? (size_t)(main - body) + strlen(TB_RENDER_BODY_MARK) : at;
  tb_render_put(b, body, at);
  html_meta(b, p);
  tb_render_put(b, body + at, bat - at);
  html_signed(b, p);
  tb_render_put(b, body + bat, len - bat);
}

static void
wrap_md(struct tb_render_buf *b, const char *body, size_t len, const struct tb_sharepage *p)
{
  size_t at = 0;
  if (body[0] == '#') { /* under the first heading */
    const char *nl = memchr(body, '\n', len);
    at = nl != NULL ? (size_t)(nl - body) + 1 : len;
  }
  tb_render_put(b, body, at);
  if (p->kid != NULL) {
    tb_render_puts(b, at > 0 ? "\n" : "");
    tb_render_puts(b, "> Result signed by this service, key ");
    tb_render_md(b, p->kid);
    if (p->signed_at != NULL) {
      tb_render_puts(b, ", at ");
      tb_render_md(b, p->signed_at);
    }
    tb_render_puts(b, ".\n\n");
  }
  tb_render_put(b, body + at, len - at);
}

char *
tb_sharepage_wrap(enum tb_report_format f, const char *body, size_t len,
                  const struct tb_sharepage *p, size_t *out_len)
{
  struct tb_render_buf b = { 0 };
  if (f == TB_REPORT_HTML)
    wrap_html(&b, body, len, p);
  else if (f == TB_REPORT_MD && len > 0)
    wrap_md(&b, body, len, p);
  else
    tb_render_put(&b, body, len);
  char *err = NULL;
  char *out = tb_render_finish(&b, out_len, &err);
  free(err);
  return out;
}
