/*
 * tb_rephtml: a result document (through its view, tb_repview) as one
 * self-contained HTML page laid out like the seed reports: the heading with
 * the partial banner and the verdict, the Hardware / Engine / Run cards, the
 * launch command, the prefill table, the decode matrix as a heat map, inline
 * SVG charts (tb_svg), all measurements, the server view and the rate
 * cells.  tb_report calls it for the format "html".
 *
 * Thread-safe: no global state.
 */
#ifndef TB_REPHTML_H
#define TB_REPHTML_H

#include "render/tb_render.h"
#include "render/tb_repview.h"

/* Writes the page of v's document to b. */
void tb_rephtml_render(struct tb_render_buf *b, const struct tb_repview *v);

#endif
