/*
 * tb_steadyview: see tb_steadyview.h.
 */
#include "render/tb_steadyview.h"

#include <inttypes.h>
#include <math.h>
#include <string.h>

#include "base/tb_json.h"
#include "base/tb_util.h"
#include "render/tb_celltable.h"

#define NCOLS 11

static const char *const heads[NCOLS] = {
  "Cell",     "In flight (peak / reference)",
  "Window",   "Length",
  "Requests", "Output tok/s",
  "Req/s",    "TTFT p50",
  "TTFT p99", "TPOT p50",
  "TPOT p99",
};

static const json_t *
steady(const json_t *c)
{
  const json_t *s = json_object_get(c, "steady");
  return json_is_object(s) ? s : NULL;
}

/* The texts of one row; the reason when none. */
static bool
row_texts(const json_t *c, char (*col)[TB_CELLTABLE_COLW])
{
  const json_t *s = steady(c);
  int64_t n = 0, peak = 0, target = 0;
  (void)tb_json_int(c, "concurrency", &n);
  (void)tb_json_int(s, "peak_in_flight", &peak);
  const char *role = tb_json_str(c, "role");
  snprintf(col[0], sizeof col[0], "%" PRId64 "%s%s", n, role ? " " : "", role ? role : "");
  char thr[32];
  tb_render_fmt_num(tb_json_num(s, "threshold"), 2, "", thr, sizeof thr);
  if (tb_json_int(s, "target", &target))
    snprintf(col[1], sizeof col[1], "%" PRId64 " / target %" PRId64 " (at least %s)", peak, target,
             thr);
  else if (json_is_number(json_object_get(s, "level")))
    snprintf(col[1], sizeof col[1], "%" PRId64 " / level %.2f (from %s in flight)", peak,
             tb_json_num(s, "level"), thr);
  else if (tb_json_str(s, "reference") && strcmp(tb_json_str(s, "reference"), "level") == 0)
    snprintf(col[1], sizeof col[1], "%" PRId64 " / level %s", peak, TB_RENDER_DASH);
  else
    snprintf(col[1], sizeof col[1], "%" PRId64 " / peak (at least %s)", peak, thr);
  for (int k = 2; k < NCOLS; k++)
    snprintf(col[k], sizeof col[k], "%s", TB_RENDER_DASH);
  if (!json_is_true(json_object_get(s, "found"))) {
    const char *why = tb_json_str(s, "reason");
    snprintf(col[2], sizeof col[2], "none: %s", why ? why : "not reached");
    return true;
  }
  char a[32], e[32];
  tb_render_fmt_num(tb_json_num(s, "start_s"), 3, "", a, sizeof a);
  tb_render_fmt_num(tb_json_num(s, "end_s"), 3, " s", e, sizeof e);
  snprintf(col[2], sizeof col[2], "%s – %s", a, e);
  tb_render_fmt_num(tb_json_num(s, "length_s"), 3, " s", col[3], sizeof col[3]);
  int64_t req = 0;
  if (tb_json_int(s, "requests", &req))
    tb_render_fmt_int(req, col[4], sizeof col[4]);
  tb_render_fmt_num(tb_json_num(s, "output_tps"), 1, "", col[5], sizeof col[5]);
  tb_render_fmt_num(tb_json_num(s, "rps"), 2, "", col[6], sizeof col[6]);
  tb_render_fmt_ms1(tb_json_pct(s, "ttft_ms", "p50"), col[7], sizeof col[7]);
  tb_render_fmt_ms1(tb_json_pct(s, "ttft_ms", "p99"), col[8], sizeof col[8]);
  tb_render_fmt_ms1(tb_json_pct(s, "tpot_ms", "p50"), col[9], sizeof col[9]);
  tb_render_fmt_ms1(tb_json_pct(s, "tpot_ms", "p99"), col[10], sizeof col[10]);
  return true;
}

static const struct tb_celltable table = {
  .member = "steady",
  .ncols = NCOLS,
  .heads = heads,
  .row = row_texts,
  .md_title = "### Steady-state window",
  .intro = "Closed loop: the longest span in which the requests in flight stayed at or above 95% "
           "of the cell's users.  Open loop: from the first instant they reached 95% of their "
           "level (the mean in flight from the first arrival to the last) to the last arrival.  "
           "The figures are those inside it.",
  .html_open = "<h3 id=\"steady\">Steady-state window</h3>\n<p>",
  .html_table = "</p>\n<table class=\"all steady\"><tr>",
  .html_body = "</tr>\n",
  .html_close = "</table>\n",
};

bool
tb_steadyview_any(const json_t *doc)
{
  return tb_celltable_any(&table, doc);
}

void
tb_steadyview_md(struct tb_render_buf *b, const json_t *doc)
{
  tb_celltable_md(b, &table, doc);
}

void
tb_steadyview_html(struct tb_render_buf *b, const json_t *doc)
{
  tb_celltable_html(b, &table, doc);
}

void
tb_steadyview_cell_line(FILE *f, const json_t *c)
{
  const json_t *s = steady(c);
  if (s == NULL)
    return;
  if (!json_is_true(json_object_get(s, "found"))) {
    fprintf(f, ", no steady state");
    return;
  }
  char len[32], tps[32], ttft[32];
  tb_render_fmt_num(tb_json_num(s, "length_s"), 1, " s", len, sizeof len);
  tb_render_fmt_num(tb_json_num(s, "output_tps"), 1, " tok/s", tps, sizeof tps);
  tb_render_fmt_ms1(tb_json_pct(s, "ttft_ms", "p50"), ttft, sizeof ttft);
  fprintf(f, ", steady %s: %s, TTFT p50 %s", len, tps, ttft);
}
