/*
 * tb_traceview: see tb_traceview.h.
 */
#include "render/tb_traceview.h"

#include <inttypes.h>
#include <math.h>
#include <string.h>

#include "base/tb_json.h"
#include "base/tb_util.h"

#define NCOLS 12

static const char *const heads[NCOLS] = {
  "Cell",
  "Format",
  "Requests",
  "Sessions",
  "Span",
  "Trace rate (req/s)",
  "Offered (req/s)",
  "Achieved (req/s)",
  "Hit rate implied / server",
  "Start lag p50 / p99 / max",
  "Abandoned",
  "Cache reset",
};

static const json_t *
trace(const json_t *c)
{
  const json_t *t = json_object_get(c, "trace");
  return json_is_object(t) ? t : NULL;
}

bool
tb_traceview_any(const json_t *doc)
{
  size_t i;
  const json_t *c;
  json_array_foreach (json_object_get(doc, "cells"), i, c) {
    if (trace(c) != NULL)
      return true;
  }
  return false;
}

/* v with places decimals and then suffix, or a dash. */
static void
num(double v, int places, const char *suffix, char *buf, size_t len)
{
  if (isfinite(v))
    snprintf(buf, len, "%.*f%s", places, v, suffix);
  else
    snprintf(buf, len, "%s", TB_RENDER_DASH);
}

static void
integer(const json_t *o, const char *k, char *buf, size_t len)
{
  int64_t v;
  if (tb_json_int(o, k, &v))
    tb_render_fmt_int(v, buf, len);
  else
    snprintf(buf, len, "%s", TB_RENDER_DASH);
}

/* The texts of one row into col[NCOLS][128]. */
static void
row_texts(const json_t *c, char col[NCOLS][128])
{
  const json_t *t = trace(c);
  int64_t n = 0;
  (void)tb_json_int(c, "concurrency", &n);
  snprintf(col[0], sizeof col[0], "%" PRId64, n);
  const char *fmt = tb_json_str(t, "format");
  snprintf(col[1], sizeof col[1], "%s", fmt ? fmt : TB_RENDER_DASH);
  integer(t, "requests", col[2], sizeof col[2]);
  integer(t, "sessions", col[3], sizeof col[3]);
  num(tb_json_num(t, "span_s"), 1, " s", col[4], sizeof col[4]);
  num(tb_json_num(t, "trace_rps"), 2, "", col[5], sizeof col[5]);
  num(tb_json_num(c, "offered_rps"), 2, "", col[6], sizeof col[6]);
  num(tb_json_num(c, "achieved_rps"), 2, "", col[7], sizeof col[7]);
  char a[32], s[32];
  num(tb_json_num(t, "implied_hit_pct"), 1, "%", a, sizeof a);
  num(tb_json_num(t, "hit_pct"), 1, "%", s, sizeof s);
  snprintf(col[8], sizeof col[8], "%s / %s", a, s);
  char l50[24], l99[24], lmax[24];
  num(tb_json_pct(c, "schedule_lag_ms", "p50"), 2, " ms", l50, sizeof l50);
  num(tb_json_pct(c, "schedule_lag_ms", "p99"), 2, " ms", l99, sizeof l99);
  num(tb_json_pct(c, "schedule_lag_ms", "max"), 2, " ms", lmax, sizeof lmax);
  snprintf(col[9], sizeof col[9], "%s / %s / %s", l50, l99, lmax);
  integer(t, "abandoned", col[10], sizeof col[10]);
  const char *cr = tb_json_str(c, "cache_reset");
  snprintf(col[11], sizeof col[11], "%s", cr ? cr : "kept");
}

static const char intro[] =
  "A production trace replayed: roots at their trace times, a session's turns after their "
  "parent ended plus the recorded delay; the trace's own rate is after its window and "
  "speed-up; start lag is actual minus trace time.";

void
tb_traceview_md(struct tb_render_buf *b, const json_t *doc)
{
  if (!tb_traceview_any(doc))
    return;
  tb_render_printf(b, "\n### Trace replay\n\n%s\n\n|", intro);
  for (int k = 0; k < NCOLS; k++)
    tb_render_printf(b, " %s |", heads[k]);
  tb_render_puts(b, "\n|");
  for (int k = 0; k < NCOLS; k++)
    tb_render_puts(b, "---|");
  tb_render_puts(b, "\n");
  size_t i;
  const json_t *c;
  json_array_foreach (json_object_get(doc, "cells"), i, c) {
    if (trace(c) == NULL)
      continue;
    char col[NCOLS][128];
    row_texts(c, col);
    tb_render_puts(b, "|");
    for (int k = 0; k < NCOLS; k++) {
      tb_render_puts(b, " ");
      tb_render_md(b, col[k]);
      tb_render_puts(b, " |");
    }
    tb_render_puts(b, "\n");
  }
}

void
tb_traceview_html(struct tb_render_buf *b, const json_t *doc)
{
  if (!tb_traceview_any(doc))
    return;
  tb_render_printf(b, "<h3 id=\"trace\">Trace replay</h3>\n<p>%s</p>\n", intro);
  tb_render_puts(b, "<table class=\"all trace\"><tr>");
  for (int k = 0; k < NCOLS; k++) {
    tb_render_puts(b, "<th>");
    tb_render_html(b, heads[k]);
    tb_render_puts(b, "</th>");
  }
  tb_render_puts(b, "</tr>\n");
  size_t i;
  const json_t *c;
  json_array_foreach (json_object_get(doc, "cells"), i, c) {
    if (trace(c) == NULL)
      continue;
    char col[NCOLS][128];
    row_texts(c, col);
    tb_render_puts(b, "<tr>");
    for (int k = 0; k < NCOLS; k++) {
      tb_render_puts(b, "<td>");
      tb_render_html(b, col[k]);
      tb_render_puts(b, "</td>");
    }
    tb_render_puts(b, "</tr>\n");
  }
  tb_render_puts(b, "</table>\n");
}
