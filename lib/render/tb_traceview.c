/*
 * tb_traceview: see tb_traceview.h.
 */
#include "render/tb_traceview.h"

#include <inttypes.h>
#include <math.h>
#include <string.h>

#include "base/tb_json.h"
#include "base/tb_util.h"
#include "render/tb_celltable.h"

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

static void
integer(const json_t *o, const char *k, char *buf, size_t len)
{
  int64_t v;
  if (tb_json_int(o, k, &v))
    tb_render_fmt_int(v, buf, len);
  else
    snprintf(buf, len, "%s", TB_RENDER_DASH);
}

/* The texts of one row. */
static bool
row_texts(const json_t *c, char (*col)[TB_CELLTABLE_COLW])
{
  const json_t *t = trace(c);
  int64_t n = 0;
  (void)tb_json_int(c, "concurrency", &n);
  snprintf(col[0], sizeof col[0], "%" PRId64, n);
  const char *fmt = tb_json_str(t, "format");
  snprintf(col[1], sizeof col[1], "%s", fmt ? fmt : TB_RENDER_DASH);
  integer(t, "requests", col[2], sizeof col[2]);
  integer(t, "sessions", col[3], sizeof col[3]);
  tb_render_fmt_num(tb_json_num(t, "span_s"), 1, " s", col[4], sizeof col[4]);
  tb_render_fmt_num(tb_json_num(t, "trace_rps"), 2, "", col[5], sizeof col[5]);
  tb_render_fmt_num(tb_json_num(c, "offered_rps"), 2, "", col[6], sizeof col[6]);
  tb_render_fmt_num(tb_json_num(c, "achieved_rps"), 2, "", col[7], sizeof col[7]);
  char a[32], s[32];
  tb_render_fmt_num(tb_json_num(t, "implied_hit_pct"), 1, "%", a, sizeof a);
  tb_render_fmt_num(tb_json_num(t, "hit_pct"), 1, "%", s, sizeof s);
  snprintf(col[8], sizeof col[8], "%s / %s", a, s);
  char l50[24], l99[24], lmax[24];
  tb_render_fmt_num(tb_json_pct(c, "schedule_lag_ms", "p50"), 2, " ms", l50, sizeof l50);
  tb_render_fmt_num(tb_json_pct(c, "schedule_lag_ms", "p99"), 2, " ms", l99, sizeof l99);
  tb_render_fmt_num(tb_json_pct(c, "schedule_lag_ms", "max"), 2, " ms", lmax, sizeof lmax);
  snprintf(col[9], sizeof col[9], "%s / %s / %s", l50, l99, lmax);
  integer(t, "abandoned", col[10], sizeof col[10]);
  const char *cr = tb_json_str(c, "cache_reset");
  snprintf(col[11], sizeof col[11], "%s", cr ? cr : "kept");
  return true;
}

static const struct tb_celltable table = {
  .member = "trace",
  .ncols = NCOLS,
  .heads = heads,
  .row = row_texts,
  .md_title = "### Trace replay",
  .intro = "A production trace replayed: roots at their trace times, a session's turns after "
           "their parent ended plus the recorded delay; the trace's own rate is after its window "
           "and speed-up; start lag is actual minus trace time.",
  .html_open = "<h3 id=\"trace\">Trace replay</h3>\n<p>",
  .html_table = "</p>\n<table class=\"all trace\"><tr>",
  .html_body = "</tr>\n",
  .html_close = "</table>\n",
};

bool
tb_traceview_any(const json_t *doc)
{
  return tb_celltable_any(&table, doc);
}

void
tb_traceview_md(struct tb_render_buf *b, const json_t *doc)
{
  tb_celltable_md(b, &table, doc);
}

void
tb_traceview_html(struct tb_render_buf *b, const json_t *doc)
{
  tb_celltable_html(b, &table, doc);
}
