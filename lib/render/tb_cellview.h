/*
 * tb_cellview: a decode or rate cell's server view (`server_series`, tb_sampler) and
 * self-checks (`checks`) in the report formats: an HTML section with a small
 * inline-SVG timeline per cell (running, waiting, KV %; no script), a
 * Markdown table, and the note a flagged cell carries in the
 * "All measurements" tables (the CSV's columns are tb_repcsv's).  The
 * report formats call it; everything read from a
 * cell is checked and escaped, arrays are capped (TB_RESULT_SERIES_MAX_POINTS).
 */
#ifndef TB_CELLVIEW_H
#define TB_CELLVIEW_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include "render/tb_render.h"

/* The cell's self-checks ("checks") and its server series' summary
 * ("server_series"."summary"): the objects, or NULL. */
const json_t *tb_cellview_checks(const json_t *cell);
const json_t *tb_cellview_summary(const json_t *cell);

/* True when the cell has a server series or checks to show. */
bool tb_cellview_has(const json_t *cell);

/* The note of a cell: base (may be NULL) and, for failed checks,
 * "checks failed: <reasons>", into buf; NULL when there is neither. */
const char *tb_cellview_note(const json_t *cell, const char *base, char *buf, size_t len);

/* HTML: the section's head and end, and one cell (ctx_label "8K", C). */
void tb_cellview_html_head(struct tb_render_buf *b);
/* The same section's head for rate cells (tb_ratereport): ctx_label is the
 * load (rate or users), conc the cell's number, and the concurrency column
 * says how the arrivals went (start lag, inter-arrival CV, dropped, the
 * server's peak) or, in closed loop, the users achieved. */
void tb_cellview_rate_html_head(struct tb_render_buf *b);
void tb_cellview_html_cell(struct tb_render_buf *b, const char *ctx_label, int64_t conc,
                           const json_t *cell);
void tb_cellview_html_end(struct tb_render_buf *b);

/* Markdown: the table's head and one row. */
void tb_cellview_md_head(struct tb_render_buf *b);
void tb_cellview_rate_md_head(struct tb_render_buf *b);
void tb_cellview_md_row(struct tb_render_buf *b, const char *ctx_label, int64_t conc,
                        const json_t *cell);

#endif
