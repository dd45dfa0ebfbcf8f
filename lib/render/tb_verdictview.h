/*
 * tb_verdictview: the verdict of a job or of `tokbench compare` (the
 * "regressions" object, lib/db/tb_regress.h, read by lib/result/tb_regdoc)
 * as the block a report shows under its heading: a "Verdict" heading, the
 * headline and one line per regression, e.g.
 *   "8K × 32 total_tps: −6.1% (CI −7.8…−4.4%, p < 0.001, 12 earlier runs)"
 * in Markdown and in HTML, where a verdict over history also draws the
 * matrix's series and those of the first regressions (tb_svg).  tb_report
 * and tb_cmpreport call it.
 *
 * Thread-safe: no global state.
 */
#ifndef TB_VERDICTVIEW_H
#define TB_VERDICTVIEW_H

#include <jansson.h>

#include "render/tb_render.h"

/* Reasons a verdict block lists, at most (the rest are counted). */
#define TB_VERDICTVIEW_WHY_MAX 50u

/* The verdict block of regressions (borrowed; NULL or JSON null: nothing is
 * written).  HTML: a section id="verdict", class "banner" when regressed. */
void tb_verdictview_md(struct tb_render_buf *b, const json_t *regressions);
void tb_verdictview_html(struct tb_render_buf *b, const json_t *regressions);

/* A series' values (hist, borrowed: a JSON array of numbers) as a small
 * line chart (320 x 90) in a <figure> captioned title, the last point (the
 * newest) in red; nothing with fewer than two points.  Also an endpoint's
 * history on a share link's page (tb_seriesview). */
void tb_verdictview_history_chart(struct tb_render_buf *b, const char *title, const json_t *hist);

#endif
