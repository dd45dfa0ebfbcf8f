/*
 * tb_costview: a result's cost and energy.  See tb_costview.h.
 */
#include "render/tb_costview.h"

#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/tb_json.h"
#include "render/tb_celltable.h"
#include "render/tb_svg.h"

#define NCOL 12
#define COLW TB_CELLTABLE_COLW

static const char *const heads[NCOL] = {
  "Phase",
  "Context",
  "Requests at once",
  "tok/s per GPU",
  "Cost per M output tokens",
  "Cost per M tokens",
  "J per output token",
  "Average W",
  "Energy from",
  "GPU util",
  "SM clock",
  "Throttled",
};

/* v with 3 significant digits, or a dash. */
static void
fmt3(double v, char *buf, size_t len)
{
  if (!isfinite(v))
    snprintf(buf, len, TB_RENDER_DASH);
  else if (fabs(v) >= 100)
    snprintf(buf, len, "%.0f", v);
  else if (fabs(v) >= 10)
    snprintf(buf, len, "%.1f", v);
  else if (fabs(v) >= 1)
    snprintf(buf, len, "%.2f", v);
  else
    snprintf(buf, len, "%.3g", v);
}

/* "v [lo, hi]" of a figure and its interval. */
static void
fmt_ci(const json_t *ef, const char *fig, const char *unit, char *buf, size_t len)
{
  char v[24], lo[24], hi[24];
  fmt3(tb_json_num(ef, fig), v, sizeof v);
  char key[96];
  snprintf(key, sizeof key, "%s_ci95", fig);
  const json_t *ci = json_object_get(ef, key);
  if (!isfinite(tb_json_num(ef, fig)) || !json_is_array(ci)) {
    snprintf(buf, len, "%s%s%s", v, isfinite(tb_json_num(ef, fig)) ? " " : "",
             isfinite(tb_json_num(ef, fig)) ? unit : "");
    return;
  }
  const json_t *l = json_array_get(ci, 0), *h = json_array_get(ci, 1);
  fmt3(json_is_number(l) ? json_number_value(l) : NAN, lo, sizeof lo);
  fmt3(json_is_number(h) ? json_number_value(h) : NAN, hi, sizeof hi);
  snprintf(buf, len, "%s %s [%s, %s]", v, unit, lo, hi);
}

/* The row of one cell; false when it has no figures. */
static bool
row_texts(const json_t *c, char (*t)[COLW])
{
  const json_t *ef = json_object_get(c, "efficiency");
  if (!json_is_object(ef))
    return false;
  const char *cur = tb_json_str(ef, "currency");
  snprintf(t[0], COLW, "%s", tb_json_str(c, "phase") ? tb_json_str(c, "phase") : "");
  int64_t x = 0;
  if (tb_json_int(c, "context", &x))
    tb_format_tokens(x, t[1], COLW);
  else
    snprintf(t[1], COLW, TB_RENDER_DASH);
  snprintf(t[2], COLW, "%" PRId64, tb_json_int(c, "concurrency", &x) ? x : 0);
  fmt3(tb_json_num(ef, "tps_per_gpu"), t[3], COLW);
  fmt_ci(ef, "cost_per_m_output_tokens", cur ? cur : "", t[4], COLW);
  char v[24];
  fmt3(tb_json_num(ef, "cost_per_m_tokens"), v, sizeof v);
  snprintf(t[5], COLW, "%s%s%s", v,
           cur && isfinite(tb_json_num(ef, "cost_per_m_tokens")) ? " " : "",
           cur && isfinite(tb_json_num(ef, "cost_per_m_tokens")) ? cur : "");
  fmt_ci(ef, "j_per_output_token", "J", t[6], COLW);
  fmt3(tb_json_num(ef, "avg_power_w"), t[7], COLW);
  const char *src = tb_json_str(ef, "energy_source");
  snprintf(t[8], COLW, "%s",
           src == NULL                          ? TB_RENDER_DASH
           : strcmp(src, "energy_counter") == 0 ? "energy counter"
                                                : "power gauge");
  double u = tb_json_num(json_object_get(ef, "gpu_util_pct"), "mean");
  if (isfinite(u))
    snprintf(t[9], COLW, "%.0f%%", u);
  else
    snprintf(t[9], COLW, TB_RENDER_DASH);
  const json_t *sm = json_object_get(ef, "sm_clock_mhz");
  if (json_is_object(sm))
    snprintf(t[10], COLW, "%.0f MHz (min %.0f)", tb_json_num(sm, "mean"), tb_json_num(sm, "min"));
  else
    snprintf(t[10], COLW, TB_RENDER_DASH);
  const json_t *thr = json_object_get(json_object_get(c, "checks"), "gpu_throttled");
  const json_t *rs = json_object_get(ef, "clock_event_reasons");
  if (json_is_true(thr))
    snprintf(t[11], COLW, "yes: %s",
             json_is_array(rs) && json_array_size(rs) > 0 ? json_string_value(json_array_get(rs, 0))
                                                          : "?");
  else
    snprintf(t[11], COLW, "%s", json_is_false(thr) ? "no" : TB_RENDER_DASH);
  return true;
}

/* The Markdown introduction's price and GPUs, when the document has them. */
static void
md_price(struct tb_render_buf *b, const json_t *doc)
{
  const json_t *cost = json_object_get(doc, "cost");
  if (json_is_object(cost)) {
    const json_t *g = json_object_get(cost, "gpu");
    char price[32];
    fmt3(tb_json_num(cost, "price_per_hour"), price, sizeof price);
    tb_render_printf(b, " Price: %s %s per hour; GPUs: %" PRId64 " %s.", price,
                     tb_json_str(cost, "currency") ? tb_json_str(cost, "currency") : "",
                     (int64_t)json_integer_value(json_object_get(g, "count")),
                     tb_json_str(g, "name") ? tb_json_str(g, "name") : "");
  }
}

static const struct tb_celltable table = {
  .member = "efficiency",
  .ncols = NCOL,
  .heads = heads,
  .align = "lrrrrrrrlrrl",
  .html_class_l = true,
  .row = row_texts,
  .md_title = "### Cost and energy",
  .intro = "Money over the window's wall time at the endpoint's price; energy from the GPUs' "
           "telemetry over the same window. Intervals follow total tok/s's.",
  .md_note = md_price,
  .html_open = "<h2>Cost and energy</h2><p class=\"muted\">",
  .html_table = "</p><div class=\"scroll\"><table id=\"cost\"><tr>",
  .html_body = "</tr>\n",
  .html_close = "</table></div>\n",
};

bool
tb_costview_any(const json_t *doc)
{
  return tb_celltable_any(&table, doc);
}

void
tb_costview_md(struct tb_render_buf *b, const json_t *doc)
{
  tb_celltable_md(b, &table, doc);
}

void
tb_costview_html(struct tb_render_buf *b, const json_t *doc)
{
  tb_celltable_html(b, &table, doc);
}

void
tb_costview_frontier_html(struct tb_render_buf *b, const json_t *doc)
{
  const json_t *pf = json_object_get(doc, "project_frontier");
  const json_t *pts = json_object_get(pf, "points");
  if (!json_is_array(pts) || json_array_size(pts) == 0)
    return;
  double xmax = 0, ymax = 0;
  size_t i, own = 0, own_on = 0;
  const json_t *p;
  json_array_foreach (pts, i, p) {
    double x = tb_json_num(p, "x"), y = tb_json_num(p, "y");
    xmax = isfinite(x) && x > xmax ? x : xmax;
    ymax = isfinite(y) && y > ymax ? y : ymax;
    if (json_is_true(json_object_get(p, "own"))) {
      own++;
      own_on += json_is_true(json_object_get(p, "frontier"));
    }
  }
  const struct tb_svg_scale sx = { 0, tb_svg_nice_ceil(xmax), 50, 630, false };
  const struct tb_svg_scale sy = { 0, tb_svg_nice_ceil(ymax), 290, 10, false };
  tb_render_printf(b,
                   "<h2>Against the project's frontier</h2><p class=\"muted\" "
                   "id=\"frontier-place-text\">%zu of this job's %zu decode cells are on "
                   "the frontier of the project's %" PRId64 " other finished jobs (tokens/s "
                   "per user against tokens/s per GPU; better on both axes beyond the 95%% "
                   "intervals rules a point out). This job's cells are red.</p>\n",
                   own_on, own, (int64_t)json_integer_value(json_object_get(pf, "jobs")));
  tb_render_puts(b, "<svg id=\"frontier-place\" width=\"660\" height=\"320\" "
                    "xmlns=\"http://www.w3.org/2000/svg\"><path d=\"M50,10V290H630\" "
                    "stroke=\"#333\" fill=\"none\"/>");
  tb_render_printf(b,
                   "<text x=\"340\" y=\"315\" text-anchor=\"middle\" font-size=\"12\">"
                   "tok/s per user (0 to %g)</text><text x=\"12\" y=\"150\" font-size=\"12\" "
                   "transform=\"rotate(-90 12 150)\" text-anchor=\"middle\">tok/s per GPU "
                   "(0 to %g)</text>",
                   sx.d1, sy.d1);
  for (int pass = 0; pass < 2; pass++) { /* the others first, this job's on top */
    json_array_foreach (pts, i, p) {
      bool mine = json_is_true(json_object_get(p, "own"));
      if (mine != (pass == 1))
        continue;
      bool on = json_is_true(json_object_get(p, "frontier"));
      char title[160];
      int64_t ctx = 0, conc = 0;
      (void)tb_json_int(p, "context", &ctx);
      (void)tb_json_int(p, "concurrency", &conc);
      snprintf(title, sizeof title,
               "%s%" PRId64 " x %" PRId64 ": %.1f tok/s per user, %.1f "
               "per GPU%s",
               mine ? "this job, " : "", ctx, conc, tb_json_num(p, "x"), tb_json_num(p, "y"),
               on ? ", on the frontier" : "");
      tb_svg_dot(b, tb_svg_at(&sx, tb_json_num(p, "x")), tb_svg_at(&sy, tb_json_num(p, "y")),
                 mine ? "#d32f2f"
                 : on ? "#1f77b4"
                      : "#bbbbbb",
                 title);
    }
  }
  tb_render_puts(b, "</svg>\n");
}

/* One row of a comparison's table, as HTML or Markdown cells. */
static void
cmp_row(struct tb_render_buf *b, bool html, const char *const *cols, size_t n)
{
  tb_render_puts(b, html ? "<tr>" : "|");
  for (size_t k = 0; k < n; k++) {
    if (html) {
      tb_render_puts(b, k == 0 ? "<td class=\"l\">" : "<td>");
      tb_render_html(b, cols[k]);
      tb_render_puts(b, "</td>");
    } else {
      tb_render_puts(b, " ");
      tb_render_md(b, cols[k]);
      tb_render_puts(b, " |");
    }
  }
  tb_render_puts(b, html ? "</tr>\n" : "\n");
}

void
tb_costview_compare(struct tb_render_buf *b, const json_t *cmp, bool html)
{
  const json_t *es = json_object_get(json_object_get(cmp, "summary"), "efficiency");
  if (!json_is_object(es))
    return;
  static const char *const names[] = { "cost_per_m_output_tokens", "cost_per_m_tokens",
                                       "j_per_output_token", "tps_per_gpu" };
  static const char *const labels[] = { "Cost per M output tokens", "Cost per M tokens",
                                        "J per output token", "tok/s per GPU" };
  tb_render_puts(b, html ? "<h2>Cost and energy</h2><p class=\"muted\">A cheaper configuration "
                           "is a better one; intervals decide (better or worse when the two "
                           "95% intervals are disjoint).</p><table id=\"cost-compare\"><tr>"
                           "<th class=\"l\">Metric</th><th>Ratio (geomean)</th><th>Cells</th>"
                           "<th>Better</th></tr>\n"
                         : "\n### Cost and energy\n\nA cheaper configuration is a better one; "
                           "intervals decide (better or worse when the two 95% intervals are "
                           "disjoint).\n\n| Metric | Ratio (geomean) | Cells | Better |\n"
                           "|---|---:|---:|---|\n");
  for (size_t m = 0; m < TB_ARRAY_LEN(names); m++) {
    const json_t *o = json_object_get(es, names[m]);
    char r[32], n[32];
    fmt3(tb_json_num(o, "geomean"), r, sizeof r);
    snprintf(n, sizeof n, "%" PRId64, (int64_t)json_integer_value(json_object_get(o, "cells")));
    const char *cols[] = { labels[m], r, n,
                           tb_json_str(o, "better") ? tb_json_str(o, "better") : "" };
    cmp_row(b, html, cols, 4);
  }
  tb_render_puts(b, html ? "</table><table id=\"cost-cells\"><tr><th class=\"l\">Cell</th>"
                           "<th>Cost per M output tokens, base</th><th>head</th><th>By the "
                           "intervals</th><th>J per output token, base</th><th>head</th>"
                           "<th>By the intervals</th></tr>\n"
                         : "\n| Cell | Cost per M output tokens, base | head | By the intervals "
                           "| J per output token, base | head | By the intervals |\n"
                           "|---|---:|---:|---|---:|---:|---|\n");
  size_t i;
  const json_t *c;
  json_array_foreach (json_object_get(cmp, "cells"), i, c) {
    const json_t *e = json_object_get(c, "efficiency");
    if (!json_is_object(e))
      continue;
    char cell[64], lab[32], v[4][24];
    int64_t ctx = 0, conc = 0;
    (void)tb_json_int(c, "context", &ctx);
    (void)tb_json_int(c, "concurrency", &conc);
    tb_format_tokens(ctx, lab, sizeof lab);
    snprintf(cell, sizeof cell, "%s \xc3\x97 %" PRId64, lab, conc);
    const json_t *cm = json_object_get(e, "cost_per_m_output_tokens");
    const json_t *jm = json_object_get(e, "j_per_output_token");
    fmt3(tb_json_num(cm, "base"), v[0], sizeof v[0]);
    fmt3(tb_json_num(cm, "head"), v[1], sizeof v[1]);
    fmt3(tb_json_num(jm, "base"), v[2], sizeof v[2]);
    fmt3(tb_json_num(jm, "head"), v[3], sizeof v[3]);
    const char *bc = tb_json_str(cm, "by_interval"), *bj = tb_json_str(jm, "by_interval");
    const char *cols[] = {
      cell, v[0], v[1], bc ? bc : TB_RENDER_DASH, v[2], v[3], bj ? bj : TB_RENDER_DASH
    };
    cmp_row(b, html, cols, 7);
  }
  if (html)
    tb_render_puts(b, "</table>\n");
}

void
tb_costview_print(FILE *f, const json_t *doc)
{
  if (!tb_costview_any(doc))
    return;
  struct tb_render_buf b = { 0 };
  tb_celltable_plain(&b, &table, doc);
  char *err = NULL;
  size_t len = 0;
  char *text = tb_render_finish(&b, &len, &err);
  if (text != NULL)
    fwrite(text, 1, len, f);
  free(text);
  free(err);
}

void
tb_costview_cell_line(FILE *f, const json_t *cell)
{
  const json_t *ef = json_object_get(cell, "efficiency");
  double j = tb_json_num(ef, "j_per_output_token");
  double m = tb_json_num(ef, "cost_per_m_output_tokens");
  if (isfinite(j))
    fprintf(f, " · %.3g J/tok", j);
  if (isfinite(m))
    fprintf(f, " · %.3g %s/M out", m,
            tb_json_str(ef, "currency") ? tb_json_str(ef, "currency") : "");
}
