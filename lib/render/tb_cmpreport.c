/*
 * tb_cmpreport: renderers from a comparison document to HTML, Markdown and
 * CSV (and JSON as is).  See tb_cmpreport.h for the contract.
 *
 * Shape of the code: a "view" of the comparison (the decode matrix's sorted
 * axes and a grid of borrowed cell pointers, built once with every member
 * type-checked), then one function per format.  The buffer, escapers,
 * number formats and page scaffolding are tb_render's, the same the result
 * renderers (tb_report) use.
 */
#include "render/tb_cmpreport.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "result/tb_compare.h"
#include "base/tb_json.h"
#include "render/tb_render.h"
#include "render/tb_verdictview.h"
#include "render/tb_costview.h"

/* A comparison document's cell, type-checked. */
struct ccell {
  const json_t *c;
  int phase;
  int64_t ctx, conc;
};

static bool
ccell_get(const json_t *c, struct ccell *o)
{
  o->c = c;
  o->phase = tb_render_cell_phase(c);
  o->conc = 1;
  if (o->phase < 0 || !tb_json_int(c, "context", &o->ctx))
    return false;
  if (!tb_json_int(c, "concurrency", &o->conc))
    o->conc = 1;
  return true;
}

static const json_t *
cmetric(const json_t *c, const char *m)
{
  return json_object_get(json_object_get(c, "metrics"), m);
}

/* Direction-aware class for a ratio: "up" = better, "down" = worse. */
static const char *
ratio_class(double r, bool higher_better, double tol)
{
  if (!isfinite(r))
    return "";
  if (higher_better ? r < 1 - tol : r > 1 + tol)
    return "down";
  if (higher_better ? r > 1 + tol : r < 1 - tol)
    return "up";
  return "";
}

static void
fmt_metric(const char *metric, double v, char *buf, size_t len)
{
  if (strcmp(metric, "prompt_tps") == 0)
    tb_render_fmt_tps_short(v, buf, len);
  else if (strcmp(metric, "total_tps") == 0)
    tb_render_fmt_tps(v, buf, len);
  else if (strcmp(metric, "tbt_p50_ms") == 0)
    tb_render_fmt_ms1(v, buf, len);
  else
    tb_render_fmt_ms(v, buf, len);
}

static char *
side_title(const json_t *side)
{
  char *t = tb_render_title_line(side);
  char *e = tb_render_engine_line(side);
  const char *rid = tb_json_str(side, "run_id");
  char *s = tb_xasprintf("%s%s%s%s%s", t ? t : "", t && *e ? " \xc2\xb7 " : "", e,
                         rid ? " \xc2\xb7 run " : "", rid ? rid : "");
  free(t);
  free(e);
  return s;
}

struct cview {
  const json_t *doc;
  double tol;
  struct tb_render_axis dctx, conc;
  const json_t **grid;
  const json_t *regs;
  size_t nreg; /* regressions listed */
  size_t ncells;
  char *base_title, *head_title; /* side_title of each side; owned */
};

static void
cview_build(struct cview *v, const json_t *cmp)
{
  memset(v, 0, sizeof *v);
  v->doc = cmp;
  v->tol = tb_json_num(cmp, "tolerance");
  if (!isfinite(v->tol))
    v->tol = TB_COMPARE_DEFAULT_TOLERANCE;
  v->regs = json_object_get(cmp, "regressions");
  v->nreg = json_is_array(v->regs) ? json_array_size(v->regs) : 0;
  v->base_title = side_title(json_object_get(cmp, "base"));
  v->head_title = side_title(json_object_get(cmp, "head"));
  const json_t *cells = json_object_get(cmp, "cells");
  size_t n = json_is_array(cells) ? json_array_size(cells) : 0;
  if (n > 2 * TB_REPORT_MAX_CELLS)
    n = 2 * TB_REPORT_MAX_CELLS;
  v->ncells = n;
  struct ccell cc;
  for (size_t i = 0; i < n; i++)
    if (ccell_get(json_array_get(cells, i), &cc) && cc.phase == 1) {
      tb_render_axis_add_ctx(&v->dctx, cc.ctx);
      tb_render_axis_add(&v->conc, cc.conc);
    }
  v->grid = tb_xcalloc(v->dctx.n * v->conc.n + 1, sizeof *v->grid);
  for (size_t i = 0; i < n; i++)
    if (ccell_get(json_array_get(cells, i), &cc) && cc.phase == 1) {
      int a = tb_render_axis_find(&v->dctx, cc.ctx), k = tb_render_axis_find(&v->conc, cc.conc);
      if (a >= 0 && k >= 0 && v->grid[(size_t)a * v->conc.n + (size_t)k] == NULL)
        v->grid[(size_t)a * v->conc.n + (size_t)k] = cc.c;
    }
}

static const char *
metric_label(const char *m)
{
  size_t nm;
  const struct tb_compare_metric *ms = tb_compare_metrics(&nm);
  for (size_t i = 0; m != NULL && i < nm; i++)
    if (strcmp(ms[i].name, m) == 0)
      return ms[i].label;
  return m;
}

/* A row of the summary: one metric's geometric mean of head / base. */
struct sumrow {
  double geomean;
  int64_t cells;
  char ratio[48];  /* "1.032×" or "—" */
  char change[48]; /* "+3.2%" */
};

static void
sumrow_get(const json_t *sum, const struct tb_compare_metric *m, struct sumrow *o)
{
  const json_t *s = json_object_get(sum, m->name);
  o->geomean = tb_json_num(s, "geomean");
  if (!tb_json_int(s, "cells", &o->cells))
    o->cells = 0;
  tb_render_fmt_pct(o->geomean, o->change, sizeof o->change);
  if (isfinite(o->geomean))
    snprintf(o->ratio, sizeof o->ratio, "%.3f" TB_RENDER_TIMES, o->geomean);
  else
    snprintf(o->ratio, sizeof o->ratio, TB_RENDER_DASH);
}

/* A row of the regressions table, read and formatted once for every format. */
struct regrow {
  const char *phase; /* "Prefill" / "Sustained decode" */
  char lab[32];      /* context label */
  int64_t conc;
  const char *metric; /* label; "Status" for a lost valid status */
  bool lost;          /* the cell was valid in base, head says head_status */
  const char *head_status;
  char base[48], head[48], change[48];
};

/* Row i of v's regressions; false when it has no context or concurrency. */
static bool
regrow_get(const struct cview *v, size_t i, struct regrow *o)
{
  const json_t *g = json_array_get(v->regs, i);
  int64_t ctx = 0;
  o->conc = 0;
  if (!tb_json_int(g, "context", &ctx) || !tb_json_int(g, "concurrency", &o->conc))
    return false;
  const char *m = tb_json_str(g, "metric");
  tb_format_tokens(ctx, o->lab, sizeof o->lab);
  o->phase = tb_render_cell_phase(g) == 0 ? "Prefill" : "Sustained decode";
  o->lost = m && strcmp(m, "status") == 0;
  o->metric = o->lost ? "Status" : metric_label(m);
  o->head_status = tb_json_str(g, "head");
  if (!o->lost) {
    fmt_metric(m ? m : "", tb_json_num(g, "base"), o->base, sizeof o->base);
    fmt_metric(m ? m : "", tb_json_num(g, "head"), o->head, sizeof o->head);
    tb_render_fmt_pct(tb_json_num(g, "ratio"), o->change, sizeof o->change);
  }
  return true;
}

/* What the decode matrix shows in a cell of the comparison. */
enum mshow {
  M_ABSENT,      /* in neither document */
  M_RATIO,       /* valid in both: head, base and the change */
  M_HEAD_ONLY,   /* valid in head only: head and base's status */
  M_BASE_ONLY,   /* valid in base only: base and head's status */
  M_SAME_STATUS, /* valid in neither, both the same status */
  M_STATUSES,    /* valid in neither: both statuses */
};

struct mcell {
  enum mshow show;
  double ratio;
  char head[48], base[48], change[48];
  const char *bs, *hs; /* the words for base's and head's status */
  const char *hs_raw;  /* head_status as recorded (M_SAME_STATUS) */
};

static void
mcell_get(const struct cview *v, size_t r, size_t c, struct mcell *o)
{
  const json_t *cell = v->grid[r * v->conc.n + c];
  const json_t *m = cmetric(cell, "total_tps");
  const char *bs = tb_json_str(cell, "base_status"), *hs = tb_json_str(cell, "head_status");
  double hv = tb_json_num(m, "head"), bv = tb_json_num(m, "base");
  o->ratio = tb_json_num(m, "ratio");
  o->bs = tb_render_status_text(bs);
  o->hs = tb_render_status_text(hs);
  o->hs_raw = hs;
  tb_render_fmt_tps(hv, o->head, sizeof o->head);
  tb_render_fmt_tps(bv, o->base, sizeof o->base);
  tb_render_fmt_pct(o->ratio, o->change, sizeof o->change);
  if (cell == NULL)
    o->show = M_ABSENT;
  else if (isfinite(o->ratio))
    o->show = M_RATIO;
  else if (isfinite(hv))
    o->show = M_HEAD_ONLY;
  else if (isfinite(bv))
    o->show = M_BASE_ONLY;
  else if (bs != NULL && hs != NULL && strcmp(bs, hs) == 0)
    o->show = M_SAME_STATUS;
  else
    o->show = M_STATUSES;
}

/* A cell of the HTML matrix: head's figure, base's and the change, or
 * what each side was. */
static void
html_cell(struct tb_render_buf *b, void *ctx, size_t r, size_t c)
{
  const struct cview *v = ctx;
  struct mcell mc;
  mcell_get(v, r, c, &mc);
  switch (mc.show) {
  case M_ABSENT: tb_render_puts(b, "<td class=\"na\">" TB_RENDER_DASH "</td>"); break;
  case M_RATIO:
    tb_render_printf(b, "<td><b>%s</b><span>was %s</span><span class=\"%s\">%s</span></td>",
                     mc.head, mc.base, ratio_class(mc.ratio, true, v->tol), mc.change);
    break;
  /* Valid on one side only, or on neither: say what each side was. */
  case M_HEAD_ONLY:
    tb_render_printf(b, "<td><b>%s</b><span>base: %s</span></td>", mc.head, mc.bs);
    break;
  case M_BASE_ONLY:
    tb_render_printf(b, "<td class=\"err\"><span>was %s</span><span>head: %s</span></td>", mc.base,
                     mc.hs);
    break;
  case M_SAME_STATUS:
    tb_render_printf(b, "<td class=\"%s\">%s</td>",
                     strcmp(mc.hs_raw, "over_capacity") == 0 ? "oc" : "sk", mc.hs);
    break;
  case M_STATUSES: tb_render_printf(b, "<td class=\"sk\">%s / %s</td>", mc.bs, mc.hs); break;
  }
}

/* The summary: the geometric mean of head / base for each metric. */
static void
html_summary(struct tb_render_buf *b, const json_t *d)
{
  size_t nm;
  const struct tb_compare_metric *ms = tb_compare_metrics(&nm);
  tb_render_puts(b,
                 "<h2>Summary</h2><p class=\"muted\">Geometric mean of head / base over the "
                 "cells valid in both.</p><table id=\"summary\"><tr><th class=\"l\">Metric</th>"
                 "<th>Ratio</th><th>Change</th><th>Cells</th><th class=\"l\">Better</th></tr>\n");
  const json_t *sum = json_object_get(d, "summary");
  struct sumrow sr;
  for (size_t i = 0; i < nm; i++) {
    sumrow_get(sum, &ms[i], &sr);
    tb_render_printf(b, "<tr><td class=\"l\">%s %s</td><td>%s</td>", ms[i].phase, ms[i].label,
                     sr.ratio);
    tb_render_printf(b,
                     "<td class=\"%s\">%s</td><td>%" PRId64 "</td><td class=\"l\">%s</td></tr>\n",
                     ratio_class(sr.geomean, ms[i].higher_better, 0), sr.change, sr.cells,
                     ms[i].higher_better ? "higher" : "lower");
  }
  tb_render_puts(b, "</table>\n");
}

/* The regressions' table, when there are any. */
static void
html_regressions(struct tb_render_buf *b, const struct cview *v)
{
  size_t nreg = v->nreg;
  if (nreg == 0)
    return;
  tb_render_puts(b, "<h2>Regressions</h2><table id=\"regressions\"><tr><th class=\"l\">Phase</th>"
                    "<th>Context</th><th>Requests at once</th><th class=\"l\">Metric</th>"
                    "<th>Base</th><th>Head</th><th>Change</th></tr>\n");
  struct regrow g;
  for (size_t i = 0; i < nreg && i < TB_REPORT_MAX_CELLS; i++) {
    if (!regrow_get(v, i, &g))
      continue;
    tb_render_printf(
      b, "<tr class=\"reg\"><td class=\"l\">%s</td><td>%s</td><td>%" PRId64 "</td><td class=\"l\">",
      g.phase, g.lab, g.conc);
    tb_render_html(b, g.metric);
    tb_render_puts(b, "</td>");
    if (g.lost) {
      tb_render_puts(b, "<td>valid</td><td>");
      tb_render_html(b, g.head_status);
      tb_render_puts(b, "</td><td class=\"down\">lost</td></tr>\n");
    } else {
      tb_render_printf(b, "<td>%s</td><td>%s</td><td class=\"down\">%s</td></tr>\n", g.base, g.head,
                       g.change);
    }
  }
  tb_render_puts(b, "</table>\n");
}

/* Every cell's every metric of its phase, base, head and the change. */
static void
html_all_cells(struct tb_render_buf *b, const struct cview *v)
{
  size_t nm;
  const struct tb_compare_metric *ms = tb_compare_metrics(&nm);
  char t1[48], t2[48], t3[48], lab[32];
  tb_render_puts(b, "<h2>All cells</h2><div class=\"scroll\"><table id=\"cells\"><tr>"
                    "<th class=\"l\">Phase</th><th>Context</th><th>Requests at once</th>"
                    "<th class=\"l\">Base</th><th class=\"l\">Head</th><th class=\"l\">Metric</th>"
                    "<th>Base</th><th>Head</th><th>Change</th></tr>\n");
  const json_t *cells = json_object_get(v->doc, "cells");
  for (size_t i = 0; i < v->ncells; i++) {
    struct ccell cc;
    if (!ccell_get(json_array_get(cells, i), &cc))
      continue;
    tb_format_tokens(cc.ctx, lab, sizeof lab);
    for (size_t k = 0; k < nm; k++) {
      if (strcmp(ms[k].phase, cc.phase ? "decode" : "prefill") != 0)
        continue;
      const json_t *m = cmetric(cc.c, ms[k].name);
      fmt_metric(ms[k].name, tb_json_num(m, "base"), t1, sizeof t1);
      fmt_metric(ms[k].name, tb_json_num(m, "head"), t2, sizeof t2);
      tb_render_fmt_pct(tb_json_num(m, "ratio"), t3, sizeof t3);
      tb_render_printf(b,
                       "<tr><td class=\"l\">%s</td><td>%s</td><td>%" PRId64 "</td><td class=\"l\">",
                       cc.phase ? "Sustained decode" : "Prefill", lab, cc.conc);
      tb_render_html(b, tb_json_str(cc.c, "base_status") ? tb_json_str(cc.c, "base_status")
                                                         : "absent");
      tb_render_puts(b, "</td><td class=\"l\">");
      tb_render_html(b, tb_json_str(cc.c, "head_status") ? tb_json_str(cc.c, "head_status")
                                                         : "absent");
      tb_render_printf(
        b, "</td><td class=\"l\">%s</td><td>%s</td><td>%s</td><td class=\"%s\">%s</td></tr>\n",
        ms[k].label, t1, t2, ratio_class(tb_json_num(m, "ratio"), ms[k].higher_better, v->tol), t3);
    }
  }
  tb_render_puts(b, "</table></div>\n");
}

static void
render_compare_html(struct tb_render_buf *b, const struct cview *v)
{
  const json_t *d = v->doc;
  tb_render_html_head(b, "tokbench comparison");
  tb_render_puts(b, "<h1>Comparison</h1><div class=\"cards\"><div class=\"card\"><h3>Base</h3><p>");
  tb_render_html(b, v->base_title);
  tb_render_puts(b, "</p></div><div class=\"card\"><h3>Head</h3><p>");
  tb_render_html(b, v->head_title);
  tb_render_puts(b, "</p></div></div>\n");
  size_t nreg = v->nreg;
  if (nreg > 0)
    tb_render_printf(b,
                     "<div class=\"banner\" id=\"regressed\">%zu regression%s beyond the "
                     "tolerated %.1f%%.</div>\n",
                     nreg, nreg == 1 ? "" : "s", v->tol * 100);
  else
    tb_render_printf(b, "<p id=\"regressed\">No regression beyond the tolerated %.1f%%.</p>\n",
                     v->tol * 100);
  /* tokbench compare with history: the verdict over all the files */
  tb_verdictview_html(b, json_object_get(d, "verdict"));
  html_summary(b, d);
  tb_costview_compare(b, d, true);
  html_regressions(b, v);
  if (v->dctx.n > 0 && v->conc.n > 0) {
    tb_render_puts(b, "<h2>Sustained decode: total tok/s, head vs base</h2><div class=\"scroll\">");
    const struct tb_render_matrix m = { v->dctx.v, v->conc.v, v->dctx.n,
                                        v->conc.n, html_cell, (void *)v };
    tb_render_html_matrix(b, "compare-matrix", &m);
    tb_render_puts(b, "</div>\n");
  }
  html_all_cells(b, v);
  tb_render_puts(b, "<p class=\"muted\">Generated by tokbench.</p></main></body></html>\n");
}

/* A cell of the Markdown matrix: head's figure and the change, or what
 * each side was. */
static void
md_cell(struct tb_render_buf *b, void *ctx, size_t r, size_t c)
{
  struct mcell mc;
  mcell_get(ctx, r, c, &mc);
  switch (mc.show) {
  case M_ABSENT: tb_render_puts(b, " " TB_RENDER_DASH " |"); break;
  case M_RATIO: tb_render_printf(b, " %s (%s) |", mc.head, mc.change); break;
  case M_HEAD_ONLY: tb_render_printf(b, " %s (base: %s) |", mc.head, mc.bs); break;
  case M_BASE_ONLY: tb_render_printf(b, " head: %s (was %s) |", mc.hs, mc.base); break;
  case M_SAME_STATUS: tb_render_printf(b, " %s |", mc.hs); break;
  case M_STATUSES: tb_render_printf(b, " %s / %s |", mc.bs, mc.hs); break;
  }
}

static void
render_compare_md(struct tb_render_buf *b, const struct cview *v)
{
  const json_t *d = v->doc;
  size_t nm;
  const struct tb_compare_metric *ms = tb_compare_metrics(&nm);
  tb_render_puts(b, "## tokbench comparison\n\n- **Base:** ");
  tb_render_md(b, v->base_title);
  tb_render_puts(b, "\n- **Head:** ");
  tb_render_md(b, v->head_title);
  tb_render_puts(b, "\n\n");
  size_t nreg = v->nreg;
  if (nreg > 0)
    tb_render_printf(b, "> **%zu regression%s** beyond the tolerated %.1f%%.\n\n", nreg,
                     nreg == 1 ? "" : "s", v->tol * 100);
  else
    tb_render_printf(b, "No regression beyond the tolerated %.1f%%.\n\n", v->tol * 100);
  /* tokbench compare with history: the verdict over all the files */
  tb_verdictview_md(b, json_object_get(d, "verdict"));
  tb_render_puts(b, "| Metric | Ratio (geomean) | Change | Cells |\n|---|---:|---:|---:|\n");
  const json_t *sum = json_object_get(d, "summary");
  struct sumrow sr;
  for (size_t i = 0; i < nm; i++) {
    sumrow_get(sum, &ms[i], &sr);
    tb_render_printf(b, "| %s %s (%s is better) | %s | %s | %" PRId64 " |\n", ms[i].phase,
                     ms[i].label, ms[i].higher_better ? "higher" : "lower", sr.ratio, sr.change,
                     sr.cells);
  }
  tb_costview_compare(b, d, false);
  if (nreg > 0) {
    tb_render_puts(b, "\n### Regressions\n\n| Phase | Context | Requests at once | Metric | Base | "
                      "Head | Change |\n|---|---|---:|---|---:|---:|---:|\n");
    struct regrow g;
    for (size_t i = 0; i < nreg && i < TB_REPORT_MAX_CELLS; i++) {
      if (!regrow_get(v, i, &g))
        continue;
      tb_render_printf(b, "| %s | %s | %" PRId64 " | ", g.phase, g.lab, g.conc);
      tb_render_md(b, g.metric);
      if (g.lost) {
        tb_render_puts(b, " | valid | ");
        tb_render_md(b, g.head_status);
        tb_render_puts(b, " | lost |\n");
      } else {
        tb_render_printf(b, " | %s | %s | %s |\n", g.base, g.head, g.change);
      }
    }
  }
  if (v->dctx.n > 0 && v->conc.n > 0) {
    tb_render_puts(b, "\n### Sustained decode: total tok/s, head (change vs base)\n\n");
    const struct tb_render_matrix m = { v->dctx.v, v->conc.v, v->dctx.n,
                                        v->conc.n, md_cell,   (void *)v };
    tb_render_md_matrix(b, &m, "---:");
  }
}

static void
render_compare_csv(struct tb_render_buf *b, const struct cview *v)
{
  size_t nm;
  const struct tb_compare_metric *ms = tb_compare_metrics(&nm);
  tb_render_puts(b, "phase,context,context_label,concurrency,base_status,head_status,mark");
  for (size_t i = 0; i < nm; i++)
    tb_render_printf(b, ",%s_%s_base,%s_%s_head,%s_%s_ratio", ms[i].phase, ms[i].name, ms[i].phase,
                     ms[i].name, ms[i].phase, ms[i].name);
  tb_render_puts(b, ",regressions\r\n");
  const json_t *cells = json_object_get(v->doc, "cells");
  char lab[32];
  for (size_t i = 0; i < v->ncells; i++) {
    struct ccell cc;
    if (!ccell_get(json_array_get(cells, i), &cc))
      continue;
    tb_format_tokens(cc.ctx, lab, sizeof lab);
    tb_render_printf(b, "%s,%" PRId64 ",%s,%" PRId64 ",", cc.phase ? "decode" : "prefill", cc.ctx,
                     lab, cc.conc);
    tb_render_csv_str(b, tb_json_str(cc.c, "base_status"));
    tb_render_puts(b, ",");
    tb_render_csv_str(b, tb_json_str(cc.c, "head_status"));
    tb_render_puts(b, ",");
    tb_render_csv_str(b, tb_json_str(cc.c, "mark"));
    for (size_t k = 0; k < nm; k++) {
      const json_t *m = cmetric(cc.c, ms[k].name);
      tb_render_puts(b, ",");
      tb_render_csv_num(b, tb_json_num(m, "base"));
      tb_render_puts(b, ",");
      tb_render_csv_num(b, tb_json_num(m, "head"));
      tb_render_puts(b, ",");
      tb_render_csv_num(b, tb_json_num(m, "ratio"));
    }
    /* The regressions of this cell, as "metric:change%" joined by ';'. */
    tb_render_puts(b, ",");
    struct tb_render_buf regs = { 0 };
    for (size_t g = 0; g < v->nreg && g < TB_REPORT_MAX_CELLS; g++) {
      const json_t *r = json_array_get(v->regs, g);
      int64_t ctx, conc;
      if (tb_render_cell_phase(r) != cc.phase || !tb_json_int(r, "context", &ctx) ||
          ctx != cc.ctx || !tb_json_int(r, "concurrency", &conc) || conc != cc.conc)
        continue;
      const char *m = tb_json_str(r, "metric");
      double pct = tb_json_num(r, "change_pct");
      if (regs.len)
        tb_render_puts(&regs, ";");
      tb_render_puts(&regs, m ? m : "?");
      if (isfinite(pct))
        tb_render_printf(&regs, ":%+.1f%%", pct);
      else
        tb_render_puts(&regs, ":lost");
    }
    if (regs.p) {
      tb_render_csv_str(b, regs.p);
      free(regs.p);
    }
    tb_render_puts(b, "\r\n");
  }
}

char *
tb_cmpreport_render(const json_t *cmp, enum tb_report_format f, size_t *len, char **err)
{
  *err = NULL;
  if (!json_is_object(cmp)) {
    *err = tb_xstrdup("not a comparison document (not a JSON object)");
    return NULL;
  }
  struct tb_render_buf b = { 0 };
  if (f == TB_REPORT_JSON) {
    tb_render_json(&b, cmp);
    return tb_render_finish(&b, len, err);
  }
  struct cview v;
  cview_build(&v, cmp);
  switch (f) {
  case TB_REPORT_HTML: render_compare_html(&b, &v); break;
  case TB_REPORT_MD: render_compare_md(&b, &v); break;
  case TB_REPORT_CSV: render_compare_csv(&b, &v); break;
  default: tb_render_json(&b, cmp); break;
  }
  free(v.grid);
  free(v.base_title);
  free(v.head_title);
  return tb_render_finish(&b, len, err);
}
