/*
 * tb_cmpreport: renderers from a comparison document (tb_compare,
 * "tokbench.compare/v1") to the formats of tb_report:
 *
 *   html  one page: base and head, the regression banner, the summary
 *         (geometric means), the regressions, the decode matrix head vs base
 *         and every cell's metrics
 *   md    the same as Markdown tables, for a pull-request comment
 *   csv   one row per cell: statuses, base/head/ratio of each metric and the
 *         cell's regressions
 *   json  the document itself
 *
 * The document may come from anywhere: every member is read with its type
 * checked and every string escaped for its format (tb_render).  Thread-safe:
 * no global state.
 */
#ifndef TB_CMPREPORT_H
#define TB_CMPREPORT_H

#include <jansson.h>
#include <stddef.h>

#include "render/tb_report.h"
#include "base/tb_util.h"

/*
 * Renders a comparison document made by tb_compare().  Returns a new
 * NUL-terminated string (caller frees) and its length in *len (may be NULL),
 * or NULL with *err set (new string, caller frees) when the document is not
 * an object or the output would pass TB_REPORT_MAX.  cmp is borrowed and not
 * modified.
 */
char *tb_cmpreport_render(const json_t *cmp, enum tb_report_format f, size_t *len,
                          char **err) TB_MUST_CHECK;

#endif
