/*
 * tb_steadyview: the steady-state windows of a result's rate, conversation
 * and trace cells (each cell's `steady`, lib/result/tb_steady) as a
 * Markdown or HTML table and a terminal line: the window's start, end and
 * length beside the in-flight reference it was held to, and the figures
 * inside it (output tokens/s, requests/s, TTFT and TPOT p50 and p99).  A
 * cell that never reached its steady state shows why.  Nothing is written
 * for a document with no such cell.  tb_ratereport calls it.
 */
#ifndef TB_STEADYVIEW_H
#define TB_STEADYVIEW_H

#include <jansson.h>
#include <stdbool.h>
#include <stdio.h>

#include "render/tb_render.h"

/* Whether any cell of doc has a steady-state window object. */
bool tb_steadyview_any(const json_t *doc);
/* The section "Steady-state window": one row a cell. */
void tb_steadyview_md(struct tb_render_buf *b, const json_t *doc);
void tb_steadyview_html(struct tb_render_buf *b, const json_t *doc);
/* ", steady 12.3 s: 456.7 tok/s" for one cell (terminal), or ", no steady
 * state"; nothing without `steady`. */
void tb_steadyview_cell_line(FILE *f, const json_t *c);

#endif
