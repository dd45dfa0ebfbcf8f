/*
 * tb_costview: a result's cost and energy (issue 26; tb_cost's cells'
 * `efficiency` and the header's `cost`) in every format: one table, a row
 * per decode or rate cell that has them (context, requests at once,
 * tok/s per GPU, cost per million output tokens with its 95% interval,
 * cost per million tokens, joules per output token with its interval,
 * average watts and where the energy came from, GPU utilisation, SM clock,
 * throttled), written from one row of texts (row_texts) so the formats
 * cannot disagree.  Nothing is written for a document without them.
 */
#ifndef TB_COSTVIEW_H
#define TB_COSTVIEW_H

#include <jansson.h>
#include <stdbool.h>
#include <stdio.h>

#include "render/tb_render.h"

/* Whether some cell of doc has cost or energy figures. */
bool tb_costview_any(const json_t *doc);
/* The table as a Markdown section. */
void tb_costview_md(struct tb_render_buf *b, const json_t *doc);
/* The same as an HTML section (table id "cost"). */
void tb_costview_html(struct tb_render_buf *b, const json_t *doc);
/* The job's cells against the project's frontier (the service's
 * "project_frontier" member of the document it renders: points {x, y,
 * frontier, own}) as an HTML section with an inline SVG (id
 * "frontier-place"); nothing without it. */
void tb_costview_frontier_html(struct tb_render_buf *b, const json_t *doc);
/* A comparison's cost and energy (tb_compare's summary.efficiency and the
 * cells' efficiency): the geometric means and, per decode cell, base, head
 * and what the intervals say (better, worse, same), as HTML (html) or
 * Markdown; nothing when the comparison has none. */
void tb_costview_compare(struct tb_render_buf *b, const json_t *cmp, bool html);
/* The Markdown section to a terminal. */
void tb_costview_print(FILE *f, const json_t *doc);
/* " · 0.76 J/tok · 1.23 USD/M out" of a finished cell for a progress line
 * (nothing without figures; no line end). */
void tb_costview_cell_line(FILE *f, const json_t *cell);

#endif
