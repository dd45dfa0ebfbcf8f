/*
 * tb_verdictview: the verdict block of a result or a comparison.  See
 * tb_verdictview.h.
 *
 * A history chart is a polyline of a series' recent values spread evenly
 * over 320 x 90 (6 px margins), on a scale padded by a tenth of their range
 * above and below, the last point (this job's) marked in red.
 */
#include "render/tb_verdictview.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "render/tb_svg.h"
#include "result/tb_regdoc.h"

#define HIST_W 320.0
#define HIST_H 90.0
#define HIST_M 6.0

void
tb_verdictview_history_chart(struct tb_render_buf *b, const char *title, const json_t *hist)
{
  size_t n = json_array_size(hist);
  double lo, hi;
  tb_svg_extent(hist, SIZE_MAX, &lo, &hi);
  if (n < 2 || !(hi >= lo))
    return;
  double pad = (hi - lo) * 0.1;
  if (!(pad > 0))
    pad = fabs(hi) * 0.05 + 1e-9;
  const struct tb_svg_scale y = { .d0 = lo - pad, .d1 = hi + pad };
  tb_render_puts(b, "<figure class=\"history\"><figcaption>");
  tb_render_html(b, title);
  tb_render_puts(b, "</figcaption><svg viewBox=\"0 0 320 90\" width=\"320\" height=\"90\" "
                    "role=\"img\">");
  struct tb_svg_poly p;
  tb_svg_poly_begin(&p, b, "#1565c0", 1.5, true);
  double lx = 0, ly = 0;
  for (size_t i = 0; i < n; i++) {
    double v = tb_svg_num(hist, i);
    if (!isfinite(v))
      continue;
    lx = tb_svg_spread(i, n, HIST_M, HIST_W - HIST_M);
    ly = HIST_M + (HIST_H - 2 * HIST_M) * (1 - tb_svg_frac(&y, v)); /* upward from the foot */
    tb_svg_poly_pt(&p, lx, ly);
  }
  tb_svg_poly_end(&p);
  tb_svg_dot(b, lx, ly, "#d32f2f", NULL);
  tb_render_puts(b, "</svg></figure>");
}

/* The charts of a history verdict: the matrix's total tok/s and the first
 * regressions. */
static void
verdict_charts(struct tb_render_buf *b, const json_t *r, const json_t *cells)
{
  const char *method = json_string_value(json_object_get(r, "method"));
  if (method == NULL || strcmp(method, "history") != 0)
    return;
  tb_render_puts(b, "<div class=\"charts\">");
  const json_t *mh =
    json_object_get(json_object_get(json_object_get(r, "matrix"), "total_tps"), "history");
  tb_verdictview_history_chart(
    b, "The matrix: total tok/s, geometric mean over each cell's median, run by run", mh);
  for (size_t i = 0, shown = 0; i < json_array_size(cells) && shown < 4; i++) {
    const json_t *g = json_array_get(cells, i);
    const json_t *hist = json_object_get(g, "history");
    if (json_array_size(hist) < 2)
      continue;
    char *why = tb_regdoc_why(g);
    tb_verdictview_history_chart(b, why, hist);
    free(why);
    shown++;
  }
  tb_render_puts(b, "</div>");
}

/* The markup of a verdict block in one format. */
struct verdict_markup {
  const char *open_reg, *open_ok;   /* up to the headline */
  const char *close_reg, *close_ok; /* after it */
  const char *list_open, *item_open, *item_close, *list_close;
  const char *para_open, *para_close;
  void (*esc)(struct tb_render_buf *b, const char *s);
  bool charts;
  const char *end;
};

static const struct verdict_markup verdict_md = {
  .open_reg = "### Verdict\n\n> **",
  .open_ok = "### Verdict\n\n",
  .close_reg = "**\n\n",
  .close_ok = "\n\n",
  .list_open = "",
  .item_open = "- ",
  .item_close = "\n",
  .list_close = "\n",
  .para_open = "",
  .para_close = "\n\n",
  .esc = tb_render_md,
  .charts = false,
  .end = "",
};

static const struct verdict_markup verdict_html = {
  .open_reg = "<section class=\"banner\" id=\"verdict\"><h2>Verdict</h2><p><b>",
  .open_ok = "<section id=\"verdict\"><h2>Verdict</h2><p>",
  .close_reg = "</b></p>",
  .close_ok = "</p>",
  .list_open = "<ul>",
  .item_open = "<li>",
  .item_close = "</li>",
  .list_close = "</ul>",
  .para_open = "<p>",
  .para_close = "</p>",
  .esc = tb_render_html,
  .charts = true,
  .end = "</section>\n",
};

static void
verdict_block(struct tb_render_buf *b, const json_t *r, const struct verdict_markup *mk)
{
  char *hl = tb_regdoc_headline(r);
  if (hl == NULL)
    return;
  const json_t *cells = NULL;
  bool reg = tb_regdoc_regressed(r, &cells);
  tb_render_puts(b, reg ? mk->open_reg : mk->open_ok);
  mk->esc(b, hl);
  tb_render_puts(b, reg ? mk->close_reg : mk->close_ok);
  size_t n = json_array_size(cells);
  if (n > 0)
    tb_render_puts(b, mk->list_open);
  for (size_t i = 0; i < n && i < TB_VERDICTVIEW_WHY_MAX; i++) {
    char *why = tb_regdoc_why(json_array_get(cells, i));
    tb_render_puts(b, mk->item_open);
    mk->esc(b, why);
    tb_render_puts(b, mk->item_close);
    free(why);
  }
  if (n > TB_VERDICTVIEW_WHY_MAX)
    tb_render_printf(b, "%sand %zu more%s", mk->item_open, n - TB_VERDICTVIEW_WHY_MAX,
                     mk->item_close);
  if (n > 0)
    tb_render_puts(b, mk->list_close);
  char *eff = tb_regdoc_efficiency(r);
  if (eff != NULL) {
    tb_render_puts(b, mk->para_open);
    mk->esc(b, eff);
    tb_render_puts(b, mk->para_close);
    free(eff);
  }
  if (mk->charts)
    verdict_charts(b, r, cells);
  tb_render_puts(b, mk->end);
  free(hl);
}

void
tb_verdictview_md(struct tb_render_buf *b, const json_t *r)
{
  verdict_block(b, r, &verdict_md);
}

void
tb_verdictview_html(struct tb_render_buf *b, const json_t *r)
{
  verdict_block(b, r, &verdict_html);
}
