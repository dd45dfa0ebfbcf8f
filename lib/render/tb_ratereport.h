/*
 * tb_ratereport: the rate cells (phase "rate", lib/engine/tb_rate.h) and the sweep
 * of a result document in the report formats: a table of rate cells, the
 * turns of conversation cells, and the sweep's curve (rate or concurrency
 * against goodput and attainment) in Markdown and HTML
 * (an inline SVG chart, tb_svg), and the terminal's lines (the CSV's rate
 * columns are tb_repcsv's).  tb_report and tb_table call it; a document
 * without rate cells renders nothing here.
 *
 * Every member is read with its type checked; strings are escaped for their
 * format.  Thread-safe: no global state.
 */
#ifndef TB_RATEREPORT_H
#define TB_RATEREPORT_H

#include <jansson.h>
#include <stdbool.h>
#include <stdio.h>

#include "render/tb_render.h"

/* True when c is a rate cell. */
bool tb_ratereport_is_rate(const json_t *c);
/* Whether doc has rate cells or a sweep. */
bool tb_ratereport_any(const json_t *doc);

/* "## Rate cells" and "## Sweep" sections (nothing without them). */
void tb_ratereport_md(struct tb_render_buf *b, const json_t *doc);
/* The same as HTML sections, the sweep with its curve as inline SVG. */
void tb_ratereport_html(struct tb_render_buf *b, const json_t *doc);
/* The Markdown sections to a terminal. */
void tb_ratereport_print(FILE *f, const json_t *doc);
/* One finished rate cell's figures for `tokbench run`'s progress line (no
 * line end). */
void tb_ratereport_cell_line(FILE *f, const json_t *cell);

#endif
