/*
 * tb_repcsv: a result document (through its view, tb_repview) as CSV: all
 * measurements, one row per cell (prefill, then decode by context and
 * concurrency, then rate cells), RFC 4180 with a header row and CRLF line
 * ends.  The columns are the matrix's figures, the self-checks and server
 * view (tb_cellview) and the rate cells' (tb_ratereport), in that order,
 * from one column table.  tb_report calls it for the format "csv".
 *
 * Thread-safe: no global state.
 */
#ifndef TB_REPCSV_H
#define TB_REPCSV_H

#include "render/tb_render.h"
#include "render/tb_repview.h"

/* Writes the CSV of v's document to b. */
void tb_repcsv_render(struct tb_render_buf *b, const struct tb_repview *v);

#endif
