/*
 * tb_report: pure renderers from a result document (api/result.schema.json,
 * "tokbench.result/v1") or a comparison document (tb_compare,
 * "tokbench.compare/v1") to the formats people read:
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

#include "tb_util.h"

/* Largest rendered report; past it rendering fails with an error. */
#define TB_REPORT_MAX (32u * 1024u * 1024u)
/* Cells considered per document; the rest are ignored (and said so). */
#define TB_REPORT_MAX_CELLS 20000u
/* Distinct contexts / concurrencies drawn in the matrix and charts. */
#define TB_REPORT_MAX_AXIS 64u

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

/* As tb_report_render, for a comparison document made by tb_compare(). */
char *tb_report_render_compare(const json_t *cmp, enum tb_report_format f,
                               size_t *len, char **err) TB_MUST_CHECK;

/* Number formats of the seed reports, into buf (at least 32 bytes):
 *   tps_short  prompt tok/s:  14976 -> "15K", 15530 -> "15.5K", 812 -> "812"
 *   tps        decode tok/s:  118.44 -> "118.4", 1310.02 -> "1,310.0"
 *   ms         whole ms:      1047.3 -> "1,047 ms"
 *   ms1        one decimal:   8.43 -> "8.4 ms"
 *   int        4096 -> "4,096"
 * Non-finite values render as "—". */
void tb_report_fmt_tps_short(double v, char *buf, size_t len);
void tb_report_fmt_tps(double v, char *buf, size_t len);
void tb_report_fmt_ms(double v, char *buf, size_t len);
void tb_report_fmt_ms1(double v, char *buf, size_t len);
void tb_report_fmt_int(int64_t v, char *buf, size_t len);

#endif
