/*
 * tb_render: the pieces every report format is built from, shared by the
 * result renderers (tb_report), the comparison renderers (tb_cmpreport) and
 * the terminal tables (tb_table):
 *
 *   - a growable output buffer capped at TB_RENDER_MAX bytes: once past the
 *     cap it stops growing and tb_render_finish fails;
 *   - escapers for HTML text, a Markdown table cell and an RFC 4180 field;
 *   - the seed reports' number formats (15.5K, 1,047 ms, 118.4, 30.0 s);
 *   - a sorted, capped axis of positive integers (contexts, concurrencies);
 *   - texts read from a document's header (title, engine line, the word for
 *     a cell status) and the HTML page scaffolding (head and style sheet).
 *
 * Nothing read from a document is trusted: strings are escaped where they are
 * written, numbers are checked finite, axes are capped.  Thread-safe: no
 * global state.
 */
#ifndef TB_RENDER_H
#define TB_RENDER_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/tb_util.h"

/* Largest rendered output; past it tb_render_finish fails. */
#define TB_RENDER_MAX (32u * 1024u * 1024u)
/* Cells of a document considered; the rest are ignored (and said so). */
#define TB_RENDER_MAX_CELLS 20000u
/* Distinct values an axis holds; further values set .truncated. */
#define TB_RENDER_MAX_AXIS 64u

#define TB_RENDER_DASH "\xe2\x80\x94" /* — */
#define TB_RENDER_TIMES "\xc3\x97"    /* × */
#define TB_RENDER_ENDASH "\xe2\x80\x93"
#define TB_RENDER_ARROW "\xe2\x86\x92"
#define TB_RENDER_MINUS "\xe2\x88\x92"

/* A growable output buffer; zero-initialise ({ 0 }) to start. */
struct tb_render_buf {
  char *p; /* NUL-terminated once anything was put; owned */
  size_t len, cap;
  bool over; /* the cap was passed (or a part could not be made) */
};

/* Appends n bytes / a string / a formatted string.  Past TB_RENDER_MAX the
 * buffer stops growing and is marked over; later calls do nothing. */
void tb_render_put(struct tb_render_buf *b, const char *s, size_t n);
void tb_render_puts(struct tb_render_buf *b, const char *s);
void tb_render_printf(struct tb_render_buf *b, const char *fmt, ...) TB_PRINTF(2, 3);
/* Hands the text over: returns b->p (caller frees) and its length in *len
 * (may be NULL), or frees it and returns NULL with *err set (new string)
 * when the buffer is over its cap. */
char *tb_render_finish(struct tb_render_buf *b, size_t *len, char **err) TB_MUST_CHECK;

/* Escaped appends (s may be NULL: nothing is written):
 *   html     HTML text or attribute value; control characters other than
 *            tab and newline dropped
 *   md       Markdown inline text (a table cell): markup punctuation
 *            backslash-escaped, HTML metacharacters as entities, newlines as
 *            spaces
 *   csv_str  RFC 4180 field; a leading = + - @ gets an apostrophe (CSV
 *            injection)
 *   csv_num  a number that reads back as the same double; nothing if not
 *            finite */
void tb_render_html(struct tb_render_buf *b, const char *s);
void tb_render_md(struct tb_render_buf *b, const char *s);
void tb_render_csv_str(struct tb_render_buf *b, const char *s);
void tb_render_csv_num(struct tb_render_buf *b, double v);

/* Inserts thousands separators into the integer part of a formatted number
 * ("-1234567.5" -> "-1,234,567.5"); out is always NUL-terminated. */
void tb_render_group(const char *in, char *out, size_t len);

/* Number formats of the seed reports, into buf (at least 32 bytes):
 *   tps_short  prompt tok/s:  14976 -> "15K", 15530 -> "15.5K", 812 -> "812"
 *   tps        decode tok/s:  118.44 -> "118.4", 1310.02 -> "1,310.0"
 *   ms         whole ms:      1047.3 -> "1,047 ms"
 *   ms1        one decimal:   8.43 -> "8.4 ms"
 *   int        4096 -> "4,096"
 *   1          one decimal, grouped: 2.35 -> "2.4"
 *   secs       30 -> "30.0 s"
 *   pct        a ratio as a change: 1.032 -> "+3.2%", 0.9 -> "−10.0%"
 *   num        places decimals, then suffix: (2.5, 1, " s") -> "2.5 s"
 * Non-finite values render as "—". */
void tb_render_fmt_tps_short(double v, char *buf, size_t len);
void tb_render_fmt_tps(double v, char *buf, size_t len);
void tb_render_fmt_ms(double v, char *buf, size_t len);
void tb_render_fmt_ms1(double v, char *buf, size_t len);
void tb_render_fmt_int(int64_t v, char *buf, size_t len);
void tb_render_fmt_1(double v, char *buf, size_t len);
void tb_render_fmt_secs(double v, char *buf, size_t len);
void tb_render_fmt_pct(double ratio, char *buf, size_t len);
void tb_render_fmt_num(double v, int places, const char *suffix, char *buf, size_t len);

/* Uncertainty (docs/reports.md, "Uncertainty"): a cell's 95% interval
 * cell[ci] = [lo, hi] of a figure.
 *   ci         lo, hi when the member is two finite numbers with lo <= hi
 *   ci_half    hi - figure: the half-width of the interval before a rate's
 *              lower bound was clamped at 0; NAN without an interval
 *   fmt_pm     "<figure> ± <half>" with fmt for both ("1,852.4 ± 11.9",
 *              "15.5K ± 1.2K"); the figure alone without an interval
 *   fmt_range  "(lo–hi)" with fmt for both, then unit; a unit both ends
 *              share is written once ("(1,020–1,080 ms)"); "" without an
 *              interval */
bool tb_render_ci(const json_t *cell, const char *ci, double *lo, double *hi);
double tb_render_ci_half(const json_t *cell, const char *figure, const char *ci);
void tb_render_fmt_pm(double v, double half, void (*fmt)(double, char *, size_t), char *buf,
                      size_t len);
void tb_render_fmt_range(const json_t *cell, const char *ci, void (*fmt)(double, char *, size_t),
                         const char *unit, char *buf, size_t len);

/* A sorted set of positive integers (at most 2^40; decode contexts may
 * also be 0: decode with no prompt context), capped at TB_RENDER_MAX_AXIS
 * values.  Zero-initialise to start. */
struct tb_render_axis {
  int64_t v[TB_RENDER_MAX_AXIS];
  size_t n;
  bool truncated; /* a value was refused for the cap */
};

/* Adds x (ignored if out of range or present). */
void tb_render_axis_add(struct tb_render_axis *a, int64_t x);
/* The same for a decode context, where 0 is a value (llm-inference-bench's
 * first row, decode with no prompt context). */
void tb_render_axis_add_ctx(struct tb_render_axis *a, int64_t x);
/* The index of x, or -1. */
int tb_render_axis_find(const struct tb_render_axis *a, int64_t x);

/* A matrix whose rows are contexts (labelled 8K) and whose columns are
 * concurrencies, as the decode matrices of the reports, the comparisons and
 * the terminal show it; cell writes the cell at row r and column c in the
 * format at hand (Markdown " <text> |", HTML "<td>...</td>"). */
struct tb_render_matrix {
  const int64_t *rows, *cols;
  size_t nrows, ncols;
  void (*cell)(struct tb_render_buf *b, void *ctx, size_t r, size_t c);
  void *ctx;
};

/* Markdown: "| Context | 1 | 2 |", its alignment row (align: each
 * concurrency column's, "---:" or "---"), then a row per context. */
void tb_render_md_matrix(struct tb_render_buf *b, const struct tb_render_matrix *m,
                         const char *align);
/* HTML: <table class="matrix" id="ID"> with its header row, a row per
 * context, and </table>. */
void tb_render_html_matrix(struct tb_render_buf *b, const char *id,
                           const struct tb_render_matrix *m);
/* A result cell of a Markdown matrix (may be NULL: " — |"): valid writes a
 * valid one; any other shows its matrix word (tb_render_cell_word) and sets
 * *any_cl when it was capacity-limited. */
void tb_render_md_result_cell(struct tb_render_buf *b, const json_t *cell,
                              void (*valid)(struct tb_render_buf *b, const json_t *cell),
                              bool *any_cl);

/* A cell's "phase": 0 prefill, 1 decode, -1 anything else or missing. */
int tb_render_cell_phase(const json_t *c);
/* The word for a cell status ("valid" -> "Valid", "over_capacity" ->
 * "Over capacity", ...; NULL -> "not measured"; unknown -> "Unknown").
 * Static strings. */
const char *tb_render_status_text(const char *s);
/* The note shown beside a cell in every format (buf of len bytes, or a
 * string of the cell; "" when there is none): the reason of an error, a
 * skip or a measured scheduler cap, and the flags of a valid cell (output
 * counted from chunks, readiness by the client alone, a prompt size
 * estimated), joined with "; ". */
const char *tb_render_cell_note(const json_t *c, char *buf, size_t len);
/* The capped buffer of a note: longer notes are cut. */
#define TB_RENDER_NOTE_MAX 640
/* The matrix word of a cell: tb_render_status_text of its status, and
 * "Over capacity*" for an Over capacity cell that was measured anyway
 * (capacity-limited: fewer of its requests ran at once than asked; its
 * tok/s is in total_tps_capacity_limited).  Static strings. */
const char *tb_render_cell_word(const json_t *c);
/* true when the cell is Over capacity but was measured anyway (above). */
bool tb_render_cell_caplimited(const json_t *c);
/* The footnote under a decode matrix: what Over capacity means and, when
 * any_caplimited, what the "*" means.  Static string, no trailing newline. */
const char *tb_render_oc_footnote(bool any_caplimited);
/* "Step-3.7-Flash-FP8 on H200 NVL ×2" from a document's model and hardware:
 * new string (caller frees) or NULL when neither is recorded. */
char *tb_render_title_line(const json_t *d);
/* "sglang · 0.0.0.dev1 · FP8" from a document's engine: new string (caller
 * frees), "" when nothing is recorded. */
char *tb_render_engine_line(const json_t *d);

/* The start of an HTML page (doctype, <head> with the escaped title and the
 * reports' style sheet) up to and including "<body><main>".  It holds
 * TB_RENDER_HEAD_MARK and TB_RENDER_BODY_MARK once each: a share link's
 * page (tb_sharepage) adds its meta tags after the first and its lines
 * after the second. */
#define TB_RENDER_HEAD_MARK "<head><meta charset=\"utf-8\">"
#define TB_RENDER_BODY_MARK "<body><main>\n"
void tb_render_html_head(struct tb_render_buf *b, const char *title);
/* The document as indented JSON and a newline (marks b over if it cannot be
 * serialised). */
void tb_render_json(struct tb_render_buf *b, const json_t *doc);

#endif
