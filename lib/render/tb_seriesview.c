/*
 * tb_seriesview: see tb_seriesview.h.  Each format is written from the same
 * reads of the document (what(), the point's texts); the chart is
 * tb_verdictview's, as a verdict over history draws it.
 */
#include "render/tb_seriesview.h"

#include <math.h>
#include <string.h>

#include "base/tb_json.h"
#include "render/tb_svg.h"
#include "render/tb_verdictview.h"

/* "decode total_tps (the matrix: each run against each cell's median)". */
static char *
what(const json_t *doc)
{
  const char *phase = tb_json_str(doc, "phase"), *metric = tb_json_str(doc, "metric");
  const char *scope = tb_json_str(doc, "scope"), *better = tb_json_str(doc, "better");
  int64_t ctx = 0, conc = 0;
  char where[96];
  if (scope != NULL && strcmp(scope, "cell") == 0 && tb_json_int(doc, "context", &ctx) &&
      tb_json_int(doc, "concurrency", &conc)) {
    char c[32];
    tb_format_tokens(ctx, c, sizeof c);
    snprintf(where, sizeof where, "the cell %s " TB_RENDER_TIMES " %lld", c, (long long)conc);
  } else {
    snprintf(where, sizeof where, "the matrix: each run's geometric mean over each cell's median");
  }
  return tb_xasprintf("%s %s (%s; %s is better)", phase ? phase : "?", metric ? metric : "?", where,
                      better ? better : "?");
}

/* The labels as "k=v, k=v" (new string; "none" when there is none). */
static char *
labels_text(const json_t *doc)
{
  const json_t *l = json_object_get(doc, "labels");
  struct tb_render_buf b = { 0 };
  const char *k;
  const json_t *v;
  json_object_foreach ((json_t *)l, k, v) {
    if (!json_is_string(v))
      continue;
    tb_render_printf(&b, "%s%s=%s", b.len > 0 ? ", " : "", k, json_string_value(v));
  }
  char *err = NULL;
  char *s = tb_render_finish(&b, NULL, &err);
  free(err);
  if (s == NULL || *s == '\0') {
    free(s);
    s = tb_xstrdup("none");
  }
  return s;
}

/* A point's texts: value, se, the interval ("" when absent). */
struct ptext {
  const char *at;
  char value[32], se[32], ci[72];
  double lo, hi;
};

static void
point_text(const json_t *p, struct ptext *t)
{
  t->at = tb_json_str(p, "at");
  tb_render_fmt_num(tb_json_num(p, "value"), 3, "", t->value, sizeof t->value);
  double se = tb_json_num(p, "se");
  if (isfinite(se))
    tb_render_fmt_num(se, 3, "", t->se, sizeof t->se);
  else
    snprintf(t->se, sizeof t->se, "%s", TB_RENDER_DASH);
  const json_t *ci = json_object_get(p, "ci95");
  t->lo = tb_svg_num(ci, 0);
  t->hi = tb_svg_num(ci, 1);
  if (isfinite(t->lo) && isfinite(t->hi))
    snprintf(t->ci, sizeof t->ci, "%.3f" TB_RENDER_ENDASH "%.3f", t->lo, t->hi);
  else
    snprintf(t->ci, sizeof t->ci, "%s", TB_RENDER_DASH);
}

static size_t
npoints(const json_t *doc)
{
  size_t n = json_array_size(json_object_get(doc, "points"));
  return n > TB_SERIESVIEW_POINTS_MAX ? TB_SERIESVIEW_POINTS_MAX : n;
}

/* How a table row is written: Markdown or HTML. */
struct rowstyle {
  const char *open, *sep, *close;
  void (*text)(struct tb_render_buf *b, const char *s); /* escapes s */
};
static const struct rowstyle MD_ROW = { "| ", " | ", " |\n", tb_render_md };
static const struct rowstyle HTML_ROW = { "<tr><td>", "</td><td>", "</td></tr>\n", tb_render_html };

/* A row: the escaped text first, then three cells already formatted. */
static void
row(struct tb_render_buf *b, const struct rowstyle *st, const char *first, const char *c1,
    const char *c2, const char *c3)
{
  tb_render_puts(b, st->open);
  st->text(b, first != NULL ? first : TB_RENDER_DASH);
  tb_render_printf(b, "%s%s%s%s%s%s%s", st->sep, c1, st->sep, c2, st->sep, c3, st->close);
}

/* The rows of the points: run at, value, se, interval. */
static void
point_rows(struct tb_render_buf *b, const json_t *doc, const struct rowstyle *st)
{
  const json_t *pts = json_object_get(doc, "points");
  for (size_t i = 0, n = npoints(doc); i < n; i++) {
    struct ptext t;
    point_text(json_array_get(pts, i), &t);
    row(b, st, t.at, t.value, t.se, t.ci);
  }
}

/* The rows of the change points: at, before, after, change. */
static void
change_rows(struct tb_render_buf *b, const json_t *cps, const struct rowstyle *st)
{
  for (size_t i = 0; i < json_array_size(cps) && i < TB_SERIESVIEW_POINTS_MAX; i++) {
    const json_t *c = json_array_get(cps, i);
    char be[32], af[32], ch[32];
    tb_render_fmt_num(tb_json_num(c, "before"), 3, "", be, sizeof be);
    tb_render_fmt_num(tb_json_num(c, "after"), 3, "", af, sizeof af);
    tb_render_fmt_num(tb_json_num(c, "change_pct"), 1, "%", ch, sizeof ch);
    row(b, st, tb_json_str(c, "at"), be, af, ch);
  }
}

static void
render_md(struct tb_render_buf *b, const json_t *doc)
{
  char *w = what(doc), *l = labels_text(doc);
  tb_render_puts(b, "## tokbench: an endpoint's history\n\n");
  tb_render_puts(b, "- **Series:** ");
  tb_render_md(b, w);
  tb_render_puts(b, "\n- **Labels:** ");
  tb_render_md(b, l);
  tb_render_puts(b, "\n\n| Run at | Value | SE | 95% CI |\n|---|---:|---:|---:|\n");
  point_rows(b, doc, &MD_ROW);
  const json_t *cps = json_object_get(doc, "change_points");
  if (json_array_size(cps) > 0)
    tb_render_puts(b, "\n| Change point at | Before | After | Change |\n|---|---:|---:|---:|\n");
  change_rows(b, cps, &MD_ROW);
  free(w);
  free(l);
}

static void
render_html(struct tb_render_buf *b, const json_t *doc)
{
  char *w = what(doc), *l = labels_text(doc);
  tb_render_html_head(b, "tokbench: an endpoint's history");
  tb_render_puts(b, "<h1>An endpoint's history</h1>\n<p id=\"series\">");
  tb_render_html(b, w);
  tb_render_puts(b, "<br>Labels: ");
  tb_render_html(b, l);
  tb_render_puts(b, "</p>\n<div class=\"charts\">");
  const json_t *pts = json_object_get(doc, "points");
  json_t *values = json_array();
  for (size_t i = 0, n = npoints(doc); i < n; i++)
    json_array_append_new(values, json_real(tb_json_num(json_array_get(pts, i), "value")));
  tb_verdictview_history_chart(b, w, values);
  json_decref(values);
  tb_render_puts(b, "</div>\n<h2>Runs</h2>\n<table id=\"points\"><tr><th>Run at</th><th>Value</th>"
                    "<th>SE</th><th>95% CI</th></tr>\n");
  point_rows(b, doc, &HTML_ROW);
  tb_render_puts(b, "</table>\n");
  const json_t *cps = json_object_get(doc, "change_points");
  if (json_array_size(cps) > 0)
    tb_render_puts(b, "<h2>Change points</h2>\n<table id=\"change-points\"><tr><th>At</th>"
                      "<th>Before</th><th>After</th><th>Change</th></tr>\n");
  change_rows(b, cps, &HTML_ROW);
  if (json_array_size(cps) > 0)
    tb_render_puts(b, "</table>\n");
  tb_render_puts(b, "</main></body></html>\n");
  free(w);
  free(l);
}

static void
render_csv(struct tb_render_buf *b, const json_t *doc)
{
  tb_render_puts(b, "at,value,se,ci95_lo,ci95_hi,change_pct\r\n");
  const json_t *pts = json_object_get(doc, "points"), *cps = json_object_get(doc, "change_points");
  for (size_t i = 0, n = npoints(doc); i < n; i++) {
    const json_t *p = json_array_get(pts, i);
    struct ptext t;
    point_text(p, &t);
    double change = NAN;
    for (size_t k = 0; k < json_array_size(cps); k++) {
      int64_t idx = -1;
      if (tb_json_int(json_array_get(cps, k), "index", &idx) && idx == (int64_t)i)
        change = tb_json_num(json_array_get(cps, k), "change_pct");
    }
    tb_render_csv_str(b, t.at);
    tb_render_puts(b, ",");
    tb_render_csv_num(b, tb_json_num(p, "value"));
    tb_render_puts(b, ",");
    tb_render_csv_num(b, tb_json_num(p, "se"));
    tb_render_puts(b, ",");
    tb_render_csv_num(b, t.lo);
    tb_render_puts(b, ",");
    tb_render_csv_num(b, t.hi);
    tb_render_puts(b, ",");
    tb_render_csv_num(b, change);
    tb_render_puts(b, "\r\n");
  }
}

char *
tb_seriesview_render(const json_t *doc, enum tb_report_format f, size_t *len, char **err)
{
  if (!json_is_object(doc)) {
    *err = tb_xstrdup("the history is not a JSON object");
    return NULL;
  }
  struct tb_render_buf b = { 0 };
  switch (f) {
  case TB_REPORT_HTML: render_html(&b, doc); break;
  case TB_REPORT_MD: render_md(&b, doc); break;
  case TB_REPORT_CSV: render_csv(&b, doc); break;
  case TB_REPORT_JSON:
  default: tb_render_json(&b, doc); break;
  }
  return tb_render_finish(&b, len, err);
}
