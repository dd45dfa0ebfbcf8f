/*
 * tb_cellview: the server view and self-checks of a cell in the report
 * formats.  See tb_cellview.h.
 *
 * The timeline is an inline SVG of 240 × 48 with three polylines over the
 * window: running and waiting requests on one scale (0 to the largest of
 * them), KV-cache usage on 0–100 %.  Points that are not finite numbers are
 * skipped; at most TB_RESULT_SERIES_MAX_POINTS points are read.
 */
#include "render/tb_cellview.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "base/tb_json.h"
#include "render/tb_svg.h"
#include "result/tb_checks.h"
#include "result/tb_result.h"

#define SVG_W 240.0
#define SVG_H 48.0

static const json_t *
series(const json_t *cell)
{
  const json_t *s = json_object_get(cell, "server_series");
  return json_is_object(s) ? s : NULL;
}

const json_t *
tb_cellview_summary(const json_t *cell)
{
  const json_t *s = json_object_get(series(cell), "summary");
  return json_is_object(s) ? s : NULL;
}

const json_t *
tb_cellview_checks(const json_t *cell)
{
  const json_t *c = json_object_get(cell, "checks");
  return json_is_object(c) ? c : NULL;
}

bool
tb_cellview_has(const json_t *cell)
{
  return series(cell) != NULL || tb_cellview_checks(cell) != NULL;
}

const char *
tb_cellview_note(const json_t *cell, const char *base, char *buf, size_t len)
{
  char failed[512];
  tb_checks_failed_text(cell, failed, sizeof failed);
  if (failed[0] == '\0')
    return base;
  snprintf(buf, len, "%s%schecks failed: %s", base ? base : "", base ? "; " : "", failed);
  return buf;
}

/* "yes" / "no" / "—" of a tri-state member. */
static const char *
yes_no(const json_t *o, const char *k)
{
  const json_t *v = json_object_get(o, k);
  return json_is_true(v) ? "yes" : json_is_false(v) ? "no" : TB_RENDER_DASH;
}

static void
fmt_pct(double v, char *buf, size_t len)
{
  if (isfinite(v))
    snprintf(buf, len, "%.1f%%", v);
  else
    snprintf(buf, len, TB_RENDER_DASH);
}

/* The figures of a cell's row, formatted. */
struct row {
  char kv[32], pre[32], hit[32], stps[48], ctps[48], ratio[32], conc[160], cpu[32], kern[32],
    drained[32], verdict[16];
};

/* A rate cell's "Arrivals": start lag against its limit, the inter-arrival
 * CV against the process's, dropped arrivals, and the server's peak against
 * the cell's requests in flight (when there is a series). */
static void
rate_asked(const json_t *c, double lag, char *buf, size_t len)
{
  int n = snprintf(buf, len, "start lag p99 %.3f ms (limit %.3f)", lag,
                   tb_json_num(c, "schedule_lag_limit_ms"));
  double cv = tb_json_num(c, "interarrival_cv"), peak = tb_json_num(c, "server_peak_requests");
  if (n > 0 && (size_t)n < len && isfinite(cv))
    n += snprintf(buf + n, len - (size_t)n, "; CV %.3f (%.3f \xc2\xb1 %.3f)", cv,
                  tb_json_num(c, "interarrival_cv_expected"),
                  tb_json_num(c, "interarrival_cv_tolerance"));
  if (n > 0 && (size_t)n < len)
    n += snprintf(buf + n, len - (size_t)n, "; %.0f dropped", tb_json_num(c, "dropped"));
  if (n > 0 && (size_t)n < len && isfinite(peak))
    snprintf(buf + n, len - (size_t)n, "; server peak %.0f of %.0f in flight", peak,
             tb_json_num(c, "max_in_flight"));
}

static void
row_of(const json_t *cell, struct row *r)
{
  const json_t *s = tb_cellview_summary(cell), *c = tb_cellview_checks(cell);
  fmt_pct(tb_json_num(s, "peak_kv_pct"), r->kv, sizeof r->kv);
  tb_render_fmt_1(tb_json_num(s, "preemptions"), r->pre, sizeof r->pre);
  fmt_pct(tb_json_num(s, "prefix_hit_pct"), r->hit, sizeof r->hit);
  tb_render_fmt_tps(tb_json_num(s, "server_tps"), r->stps, sizeof r->stps);
  tb_render_fmt_tps(tb_json_num(s, "client_tps"), r->ctps, sizeof r->ctps);
  double ratio = tb_json_num(s, "server_client_ratio");
  if (isfinite(ratio))
    snprintf(r->ratio, sizeof r->ratio, "%.3f", ratio);
  else
    snprintf(r->ratio, sizeof r->ratio, TB_RENDER_DASH);
  int64_t req = 0;
  double ach = tb_json_num(c, "achieved_concurrency");
  const char *src = tb_json_str(c, "achieved_source");
  double lag = tb_json_num(c, "schedule_lag_p99_ms");
  if (tb_json_int(c, "requested_concurrency", &req) && isfinite(ach))
    snprintf(r->conc, sizeof r->conc, "%.2f of %" PRId64 " (%s)", ach, req,
             src != NULL && strcmp(src, "server") == 0 ? "server" : "client");
  else if (isfinite(lag)) /* a rate cell: its arrivals' checks */
    rate_asked(c, lag, r->conc, sizeof r->conc);
  else
    snprintf(r->conc, sizeof r->conc, TB_RENDER_DASH);
  fmt_pct(100.0 * tb_json_num(c, "client_cpu_share"), r->cpu, sizeof r->cpu);
  fmt_pct(100.0 * tb_json_num(c, "kernel_stamped"), r->kern, sizeof r->kern);
  snprintf(r->drained, sizeof r->drained, "%s / %s", yes_no(c, "drained_before"),
           yes_no(c, "drained_after"));
  const json_t *ok = json_object_get(c, "ok");
  snprintf(r->verdict, sizeof r->verdict, "%s",
           json_is_true(ok)    ? "ok"
           : json_is_false(ok) ? "FAILED"
                               : TB_RENDER_DASH);
}

/* ----------------------------------------------------------------- HTML */

static size_t
arr_len(const json_t *a)
{
  size_t n = json_is_array(a) ? json_array_size(a) : 0;
  return n > TB_RESULT_SERIES_MAX_POINTS ? TB_RESULT_SERIES_MAX_POINTS : n;
}

/* The largest of a's numbers, and 0. */
static double
arr_max(const json_t *a)
{
  double lo, hi;
  tb_svg_extent(a, TB_RESULT_SERIES_MAX_POINTS, &lo, &hi);
  return hi > 0 ? hi : 0;
}

/* Series v over the times t, on the time scale ts and 0 to ymax upward. */
static void
polyline(struct tb_render_buf *b, const json_t *t, const json_t *v, const struct tb_svg_scale *ts,
         double ymax, const char *colour)
{
  size_t n = arr_len(t), m = arr_len(v);
  if (m < n)
    n = m;
  if (n == 0 || !(ymax > 0) || !(ts->d1 > ts->d0))
    return;
  const struct tb_svg_scale ys = { 0, ymax, SVG_H - 1, 1, false };
  struct tb_svg_poly p;
  tb_svg_poly_begin(&p, b, colour, 1.5, true);
  for (size_t i = 0; i < n; i++) {
    double x = tb_svg_num(t, i), y = tb_svg_num(v, i);
    if (!isfinite(x) || !isfinite(y))
      continue;
    tb_svg_poly_pt(&p, tb_svg_at(ts, x), tb_svg_at(&ys, y < 0 ? 0 : y > ymax ? ymax : y));
  }
  tb_svg_poly_end(&p);
}

/* The timeline of a cell's series: running (blue), waiting (red), KV %
 * (green), over the window. */
static void
sparkline(struct tb_render_buf *b, const json_t *s)
{
  const json_t *t = json_object_get(s, "t_s");
  size_t n = arr_len(t);
  if (n < 2) {
    tb_render_puts(b, TB_RENDER_DASH);
    return;
  }
  const struct tb_svg_scale ts = { tb_svg_num(t, 0), tb_svg_num(t, n - 1), 1, SVG_W - 1, false };
  const json_t *run = json_object_get(s, "running"), *wait = json_object_get(s, "waiting");
  double ymax = arr_max(run) > arr_max(wait) ? arr_max(run) : arr_max(wait);
  tb_render_printf(b,
                   "<svg class=\"spark\" width=\"%.0f\" height=\"%.0f\" viewBox=\"0 0 %.0f "
                   "%.0f\" role=\"img\" aria-label=\"running, waiting and KV-cache usage "
                   "over the window\">",
                   SVG_W, SVG_H, SVG_W, SVG_H);
  tb_render_printf(b,
                   "<rect x=\"0.5\" y=\"0.5\" width=\"%.0f\" height=\"%.0f\" fill=\"none\" "
                   "stroke=\"#ddd\"/>",
                   SVG_W - 1, SVG_H - 1);
  polyline(b, t, json_object_get(s, "kv_pct"), &ts, 100.0, "#2ca02c");
  polyline(b, t, wait, &ts, ymax, "#d62728");
  polyline(b, t, run, &ts, ymax, "#1f77b4");
  tb_render_printf(b,
                   "<title>0\xe2\x80\x93%.0f s; running/waiting 0\xe2\x80\x93%.0f, KV "
                   "0\xe2\x80\x93"
                   "100%%</title></svg>",
                   ts.d1, ymax);
}

/* The words that differ between the decode cells' table and the rate
 * cells': which cells, the table's id, the two key columns, and the column
 * of what the cells were asked for (concurrency, or arrivals). */
struct heads {
  const char *cells, *id, *col1, *col2, *asked;
};

static const struct heads decode_heads = { "decode", "server-view", "Context", "Requests at once",
                                           "Achieved concurrency" };
static const struct heads rate_heads = { "rate", "rate-server-view", "Load (req/s or users)",
                                         "Cell", "Arrivals or users" };

static void
html_head(struct tb_render_buf *b, const struct heads *h)
{
  tb_render_printf(b,
                   "<h2>Server view and self-checks%s</h2><p class=\"muted\">What the server "
                   "said during each %s cell (/metrics once a second): "
                   "<span style=\"color:#1f77b4\">running</span>, "
                   "<span style=\"color:#d62728\">waiting</span>, "
                   "<span style=\"color:#2ca02c\">KV-cache %%</span>; and the checks that "
                   "the measurement is sound (docs/engine.md).</p><div class=\"scroll\">"
                   "<table id=\"%s\"><tr><th>%s</th><th>%s</th>"
                   "<th class=\"l\">Timeline</th><th>Peak KV</th><th>Preemptions</th>"
                   "<th>Prefix hits</th><th>Server tok/s</th><th>Client tok/s</th>"
                   "<th>Ratio</th><th>%s</th><th>Client CPU</th>"
                   "<th>Kernel-stamped</th><th>Drained before / after</th>"
                   "<th class=\"l\">Checks</th></tr>\n",
                   h == &rate_heads ? ": rate cells" : "", h->cells, h->id, h->col1, h->col2,
                   h->asked);
}

void
tb_cellview_html_head(struct tb_render_buf *b)
{
  html_head(b, &decode_heads);
}

void
tb_cellview_rate_html_head(struct tb_render_buf *b)
{
  html_head(b, &rate_heads);
}

void
tb_cellview_html_cell(struct tb_render_buf *b, const char *ctx_label, int64_t conc,
                      const json_t *cell)
{
  struct row r;
  row_of(cell, &r);
  const json_t *c = tb_cellview_checks(cell);
  bool failed = json_is_false(json_object_get(c, "ok"));
  tb_render_printf(b, "<tr%s><td>", failed ? " class=\"flagged\"" : "");
  tb_render_html(b, ctx_label);
  tb_render_printf(b, "</td><td>%" PRId64 "</td><td class=\"l\">", conc);
  if (series(cell) != NULL)
    sparkline(b, series(cell));
  else
    tb_render_puts(b, TB_RENDER_DASH);
  tb_render_printf(b,
                   "</td><td>%s</td><td>%s</td><td>%s</td><td>%s</td><td>%s</td><td>%s</td>"
                   "<td>%s</td><td>%s</td><td>%s</td><td>%s</td><td class=\"l\">",
                   r.kv, r.pre, r.hit, r.stps, r.ctps, r.ratio, r.conc, r.cpu, r.kern, r.drained);
  char why[600];
  tb_checks_failed_text(cell, why, sizeof why);
  tb_render_html(b, why[0] ? why : r.verdict);
  tb_render_puts(b, "</td></tr>\n");
}

void
tb_cellview_html_end(struct tb_render_buf *b)
{
  tb_render_puts(b, "</table></div>\n");
}

/* ------------------------------------------------------------- Markdown */

static void
md_head(struct tb_render_buf *b, const struct heads *h)
{
  tb_render_printf(b,
                   "\n### Server view and self-checks%s\n\n"
                   "What the server said during each %s cell (/metrics once a second) "
                   "and the checks that the measurement is sound.\n\n"
                   "| %s | %s | Peak KV | Preemptions | Prefix hits | "
                   "Server tok/s | Client tok/s | Ratio | %s | Client CPU | "
                   "Kernel-stamped | Drained before / after | Checks |\n"
                   "|---|---:|---:|---:|---:|---:|---:|---:|---|---:|---:|---|---|\n",
                   h == &rate_heads ? ": rate cells" : "", h->cells, h->col1, h->col2, h->asked);
}

void
tb_cellview_md_head(struct tb_render_buf *b)
{
  md_head(b, &decode_heads);
}

void
tb_cellview_rate_md_head(struct tb_render_buf *b)
{
  md_head(b, &rate_heads);
}

void
tb_cellview_md_row(struct tb_render_buf *b, const char *ctx_label, int64_t conc, const json_t *cell)
{
  struct row r;
  row_of(cell, &r);
  tb_render_puts(b, "| ");
  tb_render_md(b, ctx_label);
  tb_render_printf(b, " | %" PRId64 " | %s | %s | %s | %s | %s | %s | ", conc, r.kv, r.pre, r.hit,
                   r.stps, r.ctps, r.ratio);
  tb_render_md(b, r.conc);
  tb_render_printf(b, " | %s | %s | %s | ", r.cpu, r.kern, r.drained);
  char why[600];
  tb_checks_failed_text(cell, why, sizeof why);
  tb_render_md(b, why[0] ? why : r.verdict);
  tb_render_puts(b, " |\n");
}
