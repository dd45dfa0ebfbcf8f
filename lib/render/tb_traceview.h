/*
 * tb_traceview: the trace cell of a result (a production trace replayed,
 * its cell's `trace` object, lib/engine/tb_rate; docs/traces.md) as a
 * Markdown or HTML table: the trace's format, requests, sessions and span,
 * its own rate against the rate offered and achieved, the prefix-cache hit
 * rate it implies against the server's, the start lag against the trace's
 * times, the turns abandoned after a failed one, and the cache reset before
 * the cell.  Nothing is written for a document with no trace cell.
 * tb_ratereport calls it (the terminal prints its Markdown).
 */
#ifndef TB_TRACEVIEW_H
#define TB_TRACEVIEW_H

#include <jansson.h>
#include <stdbool.h>

#include "render/tb_render.h"

/* Whether any cell of doc is a trace cell (has a `trace` object). */
bool tb_traceview_any(const json_t *doc);
/* The section "Trace replay": one row a trace cell. */
void tb_traceview_md(struct tb_render_buf *b, const json_t *doc);
void tb_traceview_html(struct tb_render_buf *b, const json_t *doc);

#endif
