/*
 * tb_srvview: the server's own timings of a result's cells (server_timings,
 * tb_srvtime) beside tokbench's figures of the same requests, as a
 * Markdown or HTML table and a terminal line: the server's prompt time and
 * tokens/s, its time per output token against tokbench's, TTFT minus the
 * server's prompt time, and how many requests' tokens both counted alike.
 * Nothing is written for a document with no such cell.
 */
#ifndef TB_SRVVIEW_H
#define TB_SRVVIEW_H

#include <jansson.h>
#include <stdbool.h>
#include <stdio.h>

#include "render/tb_render.h"

/* Whether any cell of doc has server_timings. */
bool tb_srvview_any(const json_t *doc);
/* The section "The server's own timings": a table, one row a cell. */
void tb_srvview_md(struct tb_render_buf *b, const json_t *doc);
void tb_srvview_html(struct tb_render_buf *b, const json_t *doc);
/* ", server: TPOT p50 X ms, prompt Y ms" for one cell (terminal); nothing
 * without server_timings. */
void tb_srvview_cell_line(FILE *f, const json_t *c);

#endif
