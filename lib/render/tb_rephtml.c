/*
 * tb_rephtml: a result document as one self-contained HTML page.  See
 * tb_rephtml.h.
 *
 * The page, top to bottom: the heading (tb_repview), the Hardware, Engine
 * and Run cards, the launch command, the prefill table with its bars, the
 * decode matrix as a heat map, the charts (inline SVG through tb_svg: one
 * line per series on a log2 x axis, error bars for the 95% intervals), all
 * measurements, the server view (tb_cellview) and the rate cells
 * (tb_ratereport).  Every string from the document is escaped.
 */
#include "render/tb_rephtml.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/tb_json.h"
#include "render/tb_cellview.h"
#include "render/tb_ratereport.h"
#include "render/tb_costview.h"
#include "render/tb_srvview.h"
#include "render/tb_svg.h"
#include "render/tb_verdictview.h"

static void
emit_html(struct tb_render_buf *b, const char *label, const char *value)
{
  tb_render_puts(b, "<dt>");
  tb_render_html(b, label);
  tb_render_puts(b, "</dt><dd>");
  tb_render_html(b, value);
  tb_render_puts(b, "</dd>");
}

/* A card of the header: the section's lines, or "Not recorded". */
static void
html_card(struct tb_render_buf *b, const struct tb_repview *v, const struct tb_repview_section *sec)
{
  const json_t *obj = json_object_get(v->doc, sec->member);
  tb_render_puts(b, "<div class=\"card\"><h3>");
  tb_render_html(b, sec->title);
  tb_render_puts(b, "</h3><dl>");
  if (json_is_object(obj) && json_object_size(obj) > 0)
    tb_repview_section(b, sec, v->doc, emit_html);
  else
    emit_html(b, "Not recorded", TB_RENDER_DASH);
  tb_render_puts(b, "</dl></div>\n");
}

/* Heat map colour for t in [0, 1]: light to deep green. */
static void
heat(double t, char *style, size_t len)
{
  if (!isfinite(t) || t < 0)
    t = 0;
  if (t > 1)
    t = 1;
  static const int lo[3] = { 0xf1, 0xf8, 0xe9 }, hi[3] = { 0x1b, 0x5e, 0x20 };
  int c[3];
  for (int i = 0; i < 3; i++)
    c[i] = (int)lround(lo[i] + (hi[i] - lo[i]) * t);
  snprintf(style, len, "background:rgb(%d,%d,%d);color:%s", c[0], c[1], c[2],
           t > 0.55 ? "#fff" : "#1b1f24");
}

/* --- charts */

#define CHART_W 560
#define CHART_H 300
#define CHART_ML 62
#define CHART_MR 110
#define CHART_MT 14
#define CHART_MB 40
#define CHART_MAX_SERIES 16u

struct series {
  char name[32];
  double x[TB_RENDER_MAX_AXIS], y[TB_RENDER_MAX_AXIS];
  double lo[TB_RENDER_MAX_AXIS], hi[TB_RENDER_MAX_AXIS]; /* 95% interval; NAN: none */
  size_t n;
};

/* Appends a point with the interval cell[ci] (an error bar) to se. */
static void
series_add(struct series *se, double x, double y, const json_t *cell, const char *ci)
{
  double lo, hi;
  if (!tb_render_ci(cell, ci, &lo, &hi) || lo < 0)
    lo = hi = NAN;
  se->x[se->n] = x;
  se->y[se->n] = y;
  se->lo[se->n] = lo;
  se->hi[se->n] = hi;
  se->n++;
}

static const char *const palette[] = { "#1f77b4", "#d62728", "#2ca02c", "#ff7f0e",
                                       "#9467bd", "#8c564b", "#e377c2", "#17becf" };

/* A chart's plot area: x on xs's ticks (log2), y from 0 to ymax. */
struct plot {
  struct tb_svg_scale x, y;
  double pw, ph, ymax;
};

/* The frame of a chart: the value grid and its labels, a tick per x value
 * (a label every 30 px at least; xtok: as token counts, 8K), the axis
 * titles and the border of the plot. */
static void
chart_frame(struct tb_render_buf *b, const struct plot *p, const struct tb_render_axis *xs,
            bool xtok, const char *xlabel, const char *ylabel)
{
  char lab[48];
  for (int i = 0; i <= 4; i++) {
    double y = p->ymax * i / 4, py = tb_svg_at(&p->y, y);
    tb_render_fmt_tps_short(y, lab, sizeof lab);
    tb_render_printf(b,
                     "<line x1=\"%d\" x2=\"%.1f\" y1=\"%.1f\" y2=\"%.1f\" stroke=\"#e3e6ea\"/>"
                     "<text x=\"%d\" y=\"%.1f\" text-anchor=\"end\" fill=\"#555\">%s</text>",
                     CHART_ML, CHART_ML + p->pw, py, py, CHART_ML - 6, py + 4, lab);
  }
  double last_px = -1e9;
  for (size_t i = 0; i < xs->n; i++) {
    double px = tb_svg_at(&p->x, (double)xs->v[i]);
    if (px - last_px < 30) /* labels would overlap: keep the first */
      continue;
    last_px = px;
    if (xtok)
      tb_format_tokens(xs->v[i], lab, sizeof lab);
    else
      snprintf(lab, sizeof lab, "%" PRId64, xs->v[i]);
    tb_render_printf(b,
                     "<line x1=\"%.1f\" x2=\"%.1f\" y1=\"%d\" y2=\"%.1f\" stroke=\"#f0f2f4\"/>"
                     "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\" fill=\"#555\">"
                     "%s</text>",
                     px, px, CHART_MT, CHART_MT + p->ph, px, CHART_MT + p->ph + 15, lab);
  }
  tb_render_printf(b, "<text x=\"%.1f\" y=\"%d\" text-anchor=\"middle\" fill=\"#333\">",
                   CHART_ML + p->pw / 2, CHART_H - 6);
  tb_render_html(b, xlabel);
  tb_render_printf(b,
                   "</text><text transform=\"translate(14,%.1f) rotate(-90)\" "
                   "text-anchor=\"middle\" fill=\"#333\">",
                   CHART_MT + p->ph / 2);
  tb_render_html(b, ylabel);
  tb_render_puts(b, "</text>");
  tb_render_printf(b,
                   "<rect x=\"%d\" y=\"%d\" width=\"%.1f\" height=\"%.1f\" fill=\"none\" "
                   "stroke=\"#c9ced4\"/>",
                   CHART_ML, CHART_MT, p->pw, p->ph);
}

/* Series i of a chart: its line, each point's error bar and marker (the
 * figure and its interval as the tooltip), and its legend entry when the
 * chart has several (legend). */
static void
chart_series(struct tb_render_buf *b, const struct plot *p, const struct series *s, size_t i,
             bool legend)
{
  const char *col = palette[i % TB_ARRAY_LEN(palette)];
  struct tb_svg_poly line;
  tb_svg_poly_begin(&line, b, col, 2, false);
  for (size_t j = 0; j < s->n; j++)
    tb_svg_poly_pt(&line, tb_svg_at(&p->x, s->x[j]), tb_svg_at(&p->y, s->y[j]));
  tb_svg_poly_end(&line);
  for (size_t j = 0; j < s->n; j++) {
    double px = tb_svg_at(&p->x, s->x[j]);
    char lab[48], pm[128] = "", title[256];
    if (isfinite(s->lo[j]) && isfinite(s->hi[j])) { /* the 95% interval, with caps */
      char l[48], h[48];
      tb_svg_errbar(b, px, tb_svg_at(&p->y, s->lo[j]), tb_svg_at(&p->y, s->hi[j]), 4, col);
      tb_render_fmt_tps(s->lo[j], l, sizeof l);
      tb_render_fmt_tps(s->hi[j], h, sizeof h);
      snprintf(pm, sizeof pm, " (95%%: %s%s%s)", l, TB_RENDER_ENDASH, h);
    }
    tb_render_fmt_tps(s->y[j], lab, sizeof lab);
    snprintf(title, sizeof title, "%s: %s tok/s%s", s->name, lab, pm);
    tb_svg_dot(b, px, tb_svg_at(&p->y, s->y[j]), col, title);
  }
  if (!legend)
    return;
  double ly = CHART_MT + 8 + 16.0 * (double)i;
  tb_render_printf(b,
                   "<line x1=\"%.1f\" x2=\"%.1f\" y1=\"%.1f\" y2=\"%.1f\" stroke=\"%s\" "
                   "stroke-width=\"3\"/><text x=\"%.1f\" y=\"%.1f\" fill=\"#333\">",
                   CHART_ML + p->pw + 10, CHART_ML + p->pw + 28, ly, ly, col, CHART_ML + p->pw + 32,
                   ly + 4);
  tb_render_html(b, s->name);
  tb_render_puts(b, "</text>");
}

/* A chart of ns series over the x values xs (log2 scale); the y axis from
 * 0 to a round number above every point and interval. */
static void
svg_chart(struct tb_render_buf *b, const char *caption, const char *xlabel, const char *ylabel,
          const struct tb_render_axis *xs, bool xtok, const struct series *s, size_t ns)
{
  if (xs->n == 0 || ns == 0)
    return;
  double ymax = 0;
  for (size_t i = 0; i < ns; i++)
    for (size_t j = 0; j < s[i].n; j++)
      for (int k = 0; k < 2; k++) {
        double y = k ? s[i].hi[j] : s[i].y[j]; /* error bars fit too */
        if (isfinite(y) && y > ymax)
          ymax = y;
      }
  if (ymax <= 0)
    return;
  struct plot p = { .ymax = tb_svg_nice_ceil(ymax * 1.05) };
  p.pw = CHART_W - CHART_ML - CHART_MR;
  p.ph = CHART_H - CHART_MT - CHART_MB;
  p.x = (struct tb_svg_scale){ (double)xs->v[0], (double)xs->v[xs->n - 1], CHART_ML,
                               CHART_ML + p.pw, true };
  p.y = (struct tb_svg_scale){ 0, p.ymax, CHART_MT + p.ph, CHART_MT, false };
  tb_render_puts(b, "<figure><figcaption>");
  tb_render_html(b, caption);
  tb_render_printf(b,
                   "</figcaption><svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" "
                   "height=\"%d\" viewBox=\"0 0 %d %d\" role=\"img\" aria-label=\"",
                   CHART_W, CHART_H, CHART_W, CHART_H);
  tb_render_html(b, caption);
  tb_render_puts(b, "\" font-family=\"system-ui,sans-serif\" font-size=\"11\">");
  chart_frame(b, &p, xs, xtok, xlabel, ylabel);
  for (size_t i = 0; i < ns; i++)
    chart_series(b, &p, &s[i], i, ns > 1);
  tb_render_puts(b, "</svg></figure>\n");
}

static void
html_charts(struct tb_render_buf *b, const struct tb_repview *v)
{
  struct series *s = tb_xcalloc(CHART_MAX_SERIES, sizeof *s);
  struct tb_render_axis px = { 0 };
  s[0].n = 0;
  snprintf(s[0].name, sizeof s[0].name, "prefill");
  for (size_t i = 0; i < v->pctx.n; i++) {
    const json_t *c = v->pcell[i];
    double y = tb_json_num(c, "prompt_tps");
    if (tb_repview_is(c, "valid") && isfinite(y) && y >= 0) {
      series_add(&s[0], (double)v->pctx.v[i], y, c, "prompt_tps_ci95");
      tb_render_axis_add(&px, v->pctx.v[i]);
    }
  }
  bool any = s[0].n > 0 || v->max_tps > 0;
  if (any)
    tb_render_puts(b, "<h2>Charts</h2><div class=\"charts\">\n");
  if (s[0].n > 0)
    svg_chart(b, "Prefill: prompt tok/s by context length", "context (tokens)", "prompt tok/s", &px,
              true, s, 1);
  size_t ns = 0;
  struct tb_render_axis cx = { 0 };
  for (size_t r = 0; r < v->dctx.n && ns < CHART_MAX_SERIES; r++) {
    struct series *se = &s[ns];
    se->n = 0;
    tb_format_tokens(v->dctx.v[r], se->name, sizeof se->name);
    for (size_t c = 0; c < v->conc.n; c++) {
      const json_t *cell = tb_repview_at(v, r, c);
      double y = tb_json_num(cell, "total_tps");
      if (tb_repview_is(cell, "valid") && isfinite(y) && y >= 0) {
        series_add(se, (double)v->conc.v[c], y, cell, "total_tps_ci95");
        tb_render_axis_add(&cx, v->conc.v[c]);
      }
    }
    if (se->n > 0)
      ns++;
  }
  if (ns > 0)
    svg_chart(b, "Sustained decode: total tok/s by simultaneous requests, per context",
              "simultaneous requests", "total tok/s", &cx, false, s, ns);
  if (any)
    tb_render_puts(b, "</div>\n");
  free(s);
}

/* The decode matrix's cells, and whether one was capacity-limited. */
struct heat_grid {
  const struct tb_repview *v;
  bool running, any_cl;
};

/* A cell of the heat map: a valid cell's tok/s on its shade of green with
 * its interval, TTFT and failed self-checks; else its status. */
static void
heat_cell(struct tb_render_buf *b, void *ctx, size_t r, size_t c)
{
  struct heat_grid *g = ctx;
  const struct tb_repview *v = g->v;
  const json_t *cell = tb_repview_at(v, r, c);
  char t[48], ms[48], style[96], pm[64], why[TB_REPVIEW_NOTE_MAX];
  tb_render_printf(b, "<td data-context=\"%" PRId64 "\" data-concurrency=\"%" PRId64 "\"",
                   v->dctx.v[r], v->conc.v[c]);
  if (cell == NULL) {
    tb_render_printf(b, " class=\"na\">%s</td>", g->running ? "pending" : TB_RENDER_DASH);
  } else if (tb_repview_is(cell, "valid")) {
    double tps = tb_json_num(cell, "total_tps");
    heat(v->max_tps > 0 ? tps / v->max_tps : 0, style, sizeof style);
    tb_render_fmt_tps(tps, t, sizeof t);
    tb_render_fmt_ms(tb_json_pct(cell, "ttft_ms", "p50"), ms, sizeof ms);
    tb_repview_pm(cell, pm, sizeof pm);
    tb_render_printf(b, " class=\"v\" style=\"%s\"><b>%s</b>%s%s%s<span>%s TTFT</span>", style, t,
                     pm[0] ? "<small class=\"ci\">" : "", pm, pm[0] ? "</small>" : "", ms);
    if (tb_repview_flagged(cell, why, sizeof why)) {
      tb_render_puts(b, "<span class=\"flag\" title=\"");
      tb_render_html(b, why);
      tb_render_puts(b, "\">\xe2\x9a\xa0 checks failed</span>");
    }
    tb_render_puts(b, "</td>");
  } else if (tb_render_cell_caplimited(cell)) {
    g->any_cl = true;
    tb_render_puts(b, " class=\"oc\" title=\"");
    tb_render_html(b, tb_json_str(cell, "reason"));
    tb_render_puts(b, "\">Over capacity*</td>");
  } else if (tb_repview_is(cell, "over_capacity")) {
    tb_render_puts(b, " class=\"oc\">Over capacity</td>");
  } else {
    bool err = tb_repview_is(cell, "error");
    tb_render_printf(b, " class=\"%s\" title=\"", err ? "err" : "sk");
    tb_render_html(b, tb_json_str(cell, "reason"));
    tb_render_printf(b, "\">%s</td>", err ? "Error" : "Skipped");
  }
}

static void
html_matrix(struct tb_render_buf *b, const struct tb_repview *v)
{
  struct heat_grid g = { v, v->status && strcmp(v->status, "running") == 0, false };
  const struct tb_render_matrix m = { v->dctx.v, v->conc.v, v->dctx.n, v->conc.n, heat_cell, &g };
  tb_render_puts(b, "<h2>Sustained decode</h2><p class=\"muted\">total tok/s (\xc2\xb1 its 95% "
                    "interval) \xc2\xb7 rows are context length, columns are simultaneous "
                    "requests</p><div class=\"scroll\">");
  tb_render_html_matrix(b, "decode-matrix", &m);
  tb_render_puts(b, "</div>\n<p class=\"muted\">");
  tb_render_html(b, tb_render_oc_footnote(g.any_cl));
  tb_render_puts(b, "<br>TTFT is measured after the benchmark warms the server's prompt cache, "
                    "so it mostly excludes prefill.</p>\n");
}

static void
html_prefill(struct tb_render_buf *b, const struct tb_repview *v)
{
  tb_render_puts(b, "<h2>Prefill</h2><p class=\"muted\">prompt tok/s by context length "
                    "(one cold request per context: prompt tokens / TTFT)</p>"
                    "<table id=\"prefill\"><tr><th class=\"l\">Context</th><th>Prompt tokens</th>"
                    "<th>Prompt tok/s</th><th>TTFT</th><th class=\"l\"></th></tr>\n");
  char lab[32], n1[48], t[96], ms[48];
  int64_t pt;
  for (size_t i = 0; i < v->pctx.n; i++) {
    const json_t *c = v->pcell[i];
    tb_format_tokens(v->pctx.v[i], lab, sizeof lab);
    tb_render_printf(b, "<tr data-context=\"%" PRId64 "\"><th class=\"l\">%s context</th>",
                     v->pctx.v[i], lab);
    if (!tb_repview_is(c, "valid")) {
      tb_render_printf(b, "<td>%s</td><td colspan=\"3\" class=\"l\">", TB_RENDER_DASH);
      tb_render_html(b, c ? tb_repview_status_word(c) : "pending");
      if (c && tb_json_str(c, "reason")) {
        tb_render_puts(b, ": ");
        tb_render_html(b, tb_json_str(c, "reason"));
      }
      tb_render_puts(b, "</td></tr>\n");
      continue;
    }
    if (tb_json_int(c, "prompt_tokens", &pt))
      tb_render_fmt_int(pt, n1, sizeof n1);
    else
      snprintf(n1, sizeof n1, TB_RENDER_DASH);
    double tps = tb_json_num(c, "prompt_tps");
    tb_render_fmt_pm(tps, tb_render_ci_half(c, "prompt_tps", "prompt_tps_ci95"),
                     tb_render_fmt_tps_short, t, sizeof t);
    tb_render_fmt_ms(tb_json_pct(c, "ttft_ms", "p50"), ms, sizeof ms);
    double w = v->max_prompt_tps > 0 && isfinite(tps) ? 160.0 * tps / v->max_prompt_tps : 0;
    tb_render_printf(
      b,
      "<td>%s</td><td><b>%s</b></td><td>%s TTFT</td>"
      "<td class=\"l\"><span class=\"bar\" style=\"width:%.0fpx\"></span></td></tr>\n",
      n1, t, ms, w);
  }
  tb_render_puts(b, "</table>\n");
}

static void
html_all_row(struct tb_render_buf *b, const char *phase, const char *lab, int64_t conc,
             const json_t *c, const struct tb_repview_figs *f, const char *note)
{
  tb_render_printf(b,
                   "<tr><td class=\"l\">%s</td><td>%s</td><td>%" PRId64
                   "</td><td class=\"l\">%s</td><td>%s</td><td>%s</td><td>%s</td><td>%s</td>"
                   "<td>%s</td><td>%s</td><td>%s</td><td>%s</td><td class=\"l\">",
                   phase, lab, conc, tb_repview_status_word(c), f->total, f->per, f->ttft, f->tbt,
                   f->active, f->completed, f->out, f->measured);
  tb_render_html(b, note);
  tb_render_puts(b, "</td></tr>\n");
}

static void
html_all(struct tb_render_buf *b, const struct tb_repview *v)
{
  tb_render_puts(b, "<h2>All measurements</h2><p class=\"muted\">Latencies are medians. Total "
                    "tok/s is output across all simultaneous requests.</p><div class=\"scroll\">"
                    "<table id=\"all\"><tr><th class=\"l\">Phase</th><th>Context</th>"
                    "<th>Requests at once</th><th class=\"l\">Status</th><th>Total tok/s</th>"
                    "<th>Per request tok/s</th><th>TTFT</th><th>Time between tokens</th>"
                    "<th>Average active requests</th><th>Completed requests</th>"
                    "<th>Output tokens</th><th>Measured for</th><th class=\"l\">Note</th></tr>\n");
  tb_repview_all_rows(b, v, html_all_row);
  tb_render_puts(b, "</table></div>\n");
  if (!tb_repview_any_cellview(v))
    return;
  tb_cellview_html_head(b);
  tb_repview_cellview_rows(b, v, tb_cellview_html_cell);
  tb_cellview_html_end(b);
}

static const struct tb_repview_heading heading_html = {
  tb_render_html_head,
  tb_render_html,
  "<h1>Speed test matrix</h1>\n<p class=\"sub\"><b>",
  "</b></p><p class=\"sub\">",
  "</p>\n",
  "<div class=\"banner\" id=\"partial\">",
  "</div>\n",
  tb_verdictview_html,
};

void
tb_rephtml_render(struct tb_render_buf *b, const struct tb_repview *v)
{
  const json_t *d = v->doc;
  tb_repview_heading(b, v, &heading_html);
  tb_render_puts(b, "<div class=\"cards\">");
  html_card(b, v, &tb_repview_hardware);
  html_card(b, v, &tb_repview_engine);
  tb_render_puts(b, "<div class=\"card\"><h3>Run</h3><dl>");
  tb_repview_run(b, v, emit_html);
  tb_render_puts(b, "</dl></div></div>\n<h2>Launch command</h2><pre id=\"launch\">");
  const char *lc = tb_json_str(d, "launch_command");
  tb_render_html(b, lc ? lc : "(not recorded)");
  tb_render_puts(b, "</pre>\n");
  if (v->pctx.n > 0)
    html_prefill(b, v);
  if (v->dctx.n > 0 && v->conc.n > 0)
    html_matrix(b, v);
  html_charts(b, v);
  html_all(b, v);
  tb_ratereport_html(b, d);
  tb_srvview_html(b, d);
  tb_costview_html(b, d);
  tb_costview_frontier_html(b, d);
  if (v->ndropped > 0)
    tb_render_printf(b, "<p class=\"muted\">%zu malformed or duplicate cells were left out.</p>\n",
                     v->ndropped);
  tb_render_puts(b, "<p class=\"muted\">K = 1,024 tokens for contexts; tok/s figures use K = "
                    "1,000. Generated by tokbench.</p>\n</main></body></html>\n");
}
