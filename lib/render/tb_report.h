/*
 * tb_report: pure renderers from a result document (api/result.schema.json,
 * "tokbench.result/v1") to the formats people read, one module each
 * (tb_rephtml, tb_repmd, tb_repcsv, all written from tb_repview's view of
 * the document; a comparison document is rendered by tb_cmpreport, the
 * terminal tables by tb_table; the pieces they share are in tb_render):
 *
 *   html  one self-contained page laid out like the seed reports (header:
 *         Hardware / Engine / Run / Launch command; prefill table; decode
 *         matrix as a heat map; inline SVG charts; all measurements), with a
 *         banner when the result is partial, running, failed or cancelled
 *   md    Markdown tables, for a pull-request comment
 *   csv   all measurements, one row per cell, RFC 4180, header row
 *   json  the document itself
 *
 * Documents come from users (import) and endpoints (names, versions, reasons),
 * so every string is escaped for its format, every member is read with its
 * type checked (a wrong type renders as "—", never a crash), and the output
 * is built in a growable buffer capped at TB_REPORT_MAX bytes.  Numbers are
 * formatted as the seed reports do (15.5K, 1,047 ms, 118.4, 30.0 s).
 *
 * Header members read (api/result.schema.json): hardware {type, gpu,
 * gpu_count (or count), vram_gb (per GPU: "384 GB (4 × 96 GB)"), os, ...},
 * engine {name, version, quantization, backend, repository, build, commit,
 * ...}; other scalar members of both are shown under their own names.
 * imported_from {tool, version} names the benchmark tool of imported results;
 * progress {cells_total} (set by the service on a running job) sizes the
 * partial banner.
 *
 * Thread-safe: no global state.
 */
#ifndef TB_REPORT_H
#define TB_REPORT_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "render/tb_render.h"
#include "base/tb_util.h"

/* Largest rendered report; past it rendering fails with an error. */
#define TB_REPORT_MAX TB_RENDER_MAX
/* Cells considered per document; the rest are ignored (and said so). */
#define TB_REPORT_MAX_CELLS TB_RENDER_MAX_CELLS
/* Distinct contexts / concurrencies drawn in the matrix and charts. */
#define TB_REPORT_MAX_AXIS TB_RENDER_MAX_AXIS

enum tb_report_format {
  TB_REPORT_HTML = 0,
  TB_REPORT_MD,
  TB_REPORT_CSV,
  TB_REPORT_JSON,
};

/* "html", "md" (also "markdown"), "csv", "json"; also the MIME types
 * text/html, text/markdown, text/csv, application/json.  False on anything
 * else. */
bool tb_report_format_parse(const char *s, enum tb_report_format *out) TB_MUST_CHECK;
/* Short name ("html", ...) and Content-Type ("text/html; charset=utf-8", ...)
 * of a format (static strings). */
const char *tb_report_format_name(enum tb_report_format f);
const char *tb_report_content_type(enum tb_report_format f);

/*
 * Renders a result document.  Returns a new NUL-terminated string (caller
 * frees) and its length in *len (may be NULL), or NULL with *err set (new
 * string, caller frees) when the document is not an object or the output
 * would pass TB_REPORT_MAX.  doc is borrowed and not modified.
 */
char *tb_report_render(const json_t *doc, enum tb_report_format f, size_t *len,
                       char **err) TB_MUST_CHECK;

#endif
