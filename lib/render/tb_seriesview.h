/*
 * tb_seriesview: an endpoint's history (the document GET /v1/series
 * answers, service/api_series.c: phase, metric, scope, labels, points
 * [{at, value, se, ci95}], change_points [{index, at, before, after,
 * change_pct}]) in the formats of tb_report, for a share link of an
 * endpoint's history (issue 35, item 2):
 *
 *   html  one page: what the series is, its line chart (tb_verdictview's
 *         history chart), the points and the change points as tables
 *   md    the same as Markdown tables
 *   csv   one row per point: at, value, se, ci95_lo, ci95_hi, change_pct
 *         (the change point's, on the point where one starts)
 *   json  the document itself
 *
 * The document may come from anywhere: every member is read with its type
 * checked and every string escaped for its format.  At most
 * TB_SERIESVIEW_POINTS_MAX points are shown.  Thread-safe: no global state.
 */
#ifndef TB_SERIESVIEW_H
#define TB_SERIESVIEW_H

#include <jansson.h>
#include <stddef.h>

#include "render/tb_report.h"
#include "base/tb_util.h"

#define TB_SERIESVIEW_POINTS_MAX 1000u

/* Renders a history document.  Returns a new NUL-terminated string (caller
 * frees) and its length in *len (may be NULL), or NULL with *err set (new
 * string, caller frees) when doc is not an object or the output would pass
 * TB_REPORT_MAX.  doc is borrowed and not modified. */
char *tb_seriesview_render(const json_t *doc, enum tb_report_format f, size_t *len,
                           char **err) TB_MUST_CHECK;

#endif
