/*
 * tb_repmd: a result document as Markdown.  See tb_repmd.h.
 *
 * The report, top to bottom: the heading (tb_repview), the header as a
 * two-column table, the launch command in a fenced block, the prefill
 * table, the decode matrix (tb_render_md_matrix), all measurements in a
 * <details> block, the server view (tb_cellview) and the rate cells
 * (tb_ratereport), cost and energy (tb_costview).  Every string from the document is escaped
 * (tb_render_md); the launch command is fenced instead.
 */
#include "render/tb_repmd.h"

#include <inttypes.h>
#include <stdio.h>

#include "base/tb_json.h"
#include "render/tb_cellview.h"
#include "render/tb_costview.h"
#include "render/tb_ratereport.h"
#include "render/tb_srvview.h"
#include "render/tb_verdictview.h"

static void
emit_md(struct tb_render_buf *b, const char *label, const char *value)
{
  tb_render_puts(b, "| ");
  tb_render_md(b, label);
  tb_render_puts(b, " | ");
  tb_render_md(b, value);
  tb_render_puts(b, " |\n");
}

/* A fenced code block whose fence is longer than any backtick run inside,
 * so no content can close it (CommonMark 4.5). */
static void
md_code(struct tb_render_buf *b, const char *s)
{
  size_t run = 0, best = 0;
  for (const char *c = s; *c; c++) {
    run = *c == '`' ? run + 1 : 0;
    if (run > best)
      best = run;
  }
  size_t n = best < 3 ? 3 : best + 1;
  if (n > 64)
    n = 64;
  for (size_t i = 0; i < n; i++)
    tb_render_put(b, "`", 1);
  tb_render_puts(b, "sh\n");
  for (const char *c = s; *c; c++)
    if ((unsigned char)*c >= 0x20 || *c == '\n' || *c == '\t')
      tb_render_put(b, c, 1);
  tb_render_puts(b, "\n");
  for (size_t i = 0; i < n; i++)
    tb_render_put(b, "`", 1);
  tb_render_puts(b, "\n");
}

/* The header: hardware, engine and run as one two-column table, then the
 * launch command. */
static void
md_header(struct tb_render_buf *b, const struct tb_repview *v)
{
  static const struct tb_repview_section *const secs[] = { &tb_repview_hardware,
                                                           &tb_repview_engine };
  tb_render_puts(b, "| | |\n|---|---|\n");
  for (size_t i = 0; i < TB_ARRAY_LEN(secs); i++) {
    tb_render_printf(b, "| **%s** | |\n", secs[i]->title);
    tb_repview_section(b, secs[i], v->doc, emit_md);
  }
  tb_render_puts(b, "| **Run** | |\n");
  tb_repview_run(b, v, emit_md);
  const char *lc = tb_json_str(v->doc, "launch_command");
  if (lc) {
    tb_render_puts(b, "\n<details><summary>Launch command</summary>\n\n");
    md_code(b, lc);
    tb_render_puts(b, "\n</details>\n");
  }
}

static void
md_prefill(struct tb_render_buf *b, const struct tb_repview *v)
{
  char lab[32], n1[48], t[96], ms[48];
  int64_t pt;
  tb_render_puts(b, "\n### Prefill\n\n| Context | Prompt tokens | Prompt tok/s | TTFT |\n"
                    "|---|---:|---:|---:|\n");
  for (size_t i = 0; i < v->pctx.n; i++) {
    const json_t *c = v->pcell[i];
    tb_format_tokens(v->pctx.v[i], lab, sizeof lab);
    if (!tb_repview_is(c, "valid")) {
      tb_render_printf(b, "| %s | %s | %s | %s |\n", lab, TB_RENDER_DASH,
                       c ? tb_repview_status_word(c) : "pending", TB_RENDER_DASH);
      continue;
    }
    if (tb_json_int(c, "prompt_tokens", &pt))
      tb_render_fmt_int(pt, n1, sizeof n1);
    else
      snprintf(n1, sizeof n1, TB_RENDER_DASH);
    tb_render_fmt_pm(tb_json_num(c, "prompt_tps"),
                     tb_render_ci_half(c, "prompt_tps", "prompt_tps_ci95"), tb_render_fmt_tps_short,
                     t, sizeof t);
    tb_render_fmt_ms(tb_json_pct(c, "ttft_ms", "p50"), ms, sizeof ms);
    tb_render_printf(b, "| %s | %s | %s | %s |\n", lab, n1, t, ms);
  }
}

/* A valid cell of the decode matrix: bold tok/s, its interval, TTFT and the
 * flag of failed self-checks. */
static void
md_valid(struct tb_render_buf *b, const json_t *cell)
{
  char t[96], ms[48], pm[64], why[TB_REPVIEW_NOTE_MAX];
  tb_render_fmt_tps(tb_json_num(cell, "total_tps"), t, sizeof t);
  tb_render_fmt_ms(tb_json_pct(cell, "ttft_ms", "p50"), ms, sizeof ms);
  tb_repview_pm(cell, pm, sizeof pm);
  tb_render_printf(b, " **%s**%s<br>%s TTFT%s |", t, pm, ms,
                   tb_repview_flagged(cell, why, sizeof why) ? "<br>\xe2\x9a\xa0 checks failed"
                                                             : "");
}

/* The decode matrix's cells and whether one was capacity-limited. */
struct md_grid {
  const struct tb_repview *v;
  bool any_cl;
};

static void
md_cell(struct tb_render_buf *b, void *ctx, size_t r, size_t c)
{
  struct md_grid *g = ctx;
  tb_render_md_result_cell(b, tb_repview_at(g->v, r, c), md_valid, &g->any_cl);
}

static void
md_decode(struct tb_render_buf *b, const struct tb_repview *v)
{
  struct md_grid g = { v, false };
  const struct tb_render_matrix m = { v->dctx.v, v->conc.v, v->dctx.n, v->conc.n, md_cell, &g };
  tb_render_puts(b, "\n### Sustained decode\n\ntotal tok/s (\xc2\xb1 its 95% interval) "
                    "\xc2\xb7 median TTFT; rows are context length, columns are simultaneous "
                    "requests\n\n");
  tb_render_md_matrix(b, &m, "---:");
  tb_render_printf(b, "\n%s\n", tb_render_oc_footnote(g.any_cl));
}

static void
md_all_row(struct tb_render_buf *b, const char *phase, const char *lab, int64_t conc,
           const json_t *c, const struct tb_repview_figs *f, const char *note)
{
  tb_render_printf(b, "| %s | %s | %" PRId64 " | %s | %s | %s | %s | %s | %s | %s | %s | %s | ",
                   phase, lab, conc, tb_repview_status_word(c), f->total, f->per, f->ttft, f->tbt,
                   f->active, f->completed, f->out, f->measured);
  tb_render_md(b, note);
  tb_render_puts(b, " |\n");
}

static const struct tb_repview_heading heading_md = {
  NULL,   tb_render_md,      "## Speed test matrix\n\n**", "**  \n", "\n\n", "> **Warning:** ",
  "\n\n", tb_verdictview_md,
};

void
tb_repmd_render(struct tb_render_buf *b, const struct tb_repview *v)
{
  tb_repview_heading(b, v, &heading_md);
  md_header(b, v);
  if (v->pctx.n > 0)
    md_prefill(b, v);
  if (v->dctx.n > 0 && v->conc.n > 0)
    md_decode(b, v);
  tb_render_puts(b, "\n<details><summary>All measurements</summary>\n\n"
                    "| Phase | Context | Requests at once | Status | Total tok/s | Per request "
                    "tok/s | TTFT | Time between tokens | Average active requests | Completed "
                    "requests | Output tokens | Measured for | Note |\n"
                    "|---|---|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---|\n");
  tb_repview_all_rows(b, v, md_all_row);
  tb_render_puts(b, "\n</details>\n");
  if (tb_repview_any_cellview(v)) {
    tb_cellview_md_head(b);
    tb_repview_cellview_rows(b, v, tb_cellview_md_row);
  }
  tb_ratereport_md(b, v->doc);
  tb_srvview_md(b, v->doc);
  tb_costview_md(b, v->doc);
}
