/*
 * tb_repmd: a result document (through its view, tb_repview) as Markdown
 * tables for a pull-request comment: the heading, the header, the prefill
 * table, the decode matrix (tb_render_md_matrix, the one the comparisons
 * and the terminal write theirs with), all measurements, the server view
 * and the rate cells.  tb_report calls it for the format "md".
 *
 * Thread-safe: no global state.
 */
#ifndef TB_REPMD_H
#define TB_REPMD_H

#include "render/tb_render.h"
#include "render/tb_repview.h"

/* Writes the Markdown report of v's document to b. */
void tb_repmd_render(struct tb_render_buf *b, const struct tb_repview *v);

#endif
