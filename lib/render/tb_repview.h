/*
 * tb_repview: the view of a result document that every format of a report
 * is written from (tb_rephtml, tb_repmd, tb_repcsv; tb_report picks one):
 *
 *   - the sorted axes of the matrix (prefill contexts, decode contexts,
 *     concurrencies) and a grid of borrowed cell pointers, built once with
 *     every member type-checked; rate cells are left to tb_ratereport;
 *   - the figures of a cell as the "All measurements" table shows them, its
 *     note and its failed self-checks;
 *   - the header's texts (hardware, engine, run) through a format's emit
 *     function, and the top of a report (title, engine and matrix line, the
 *     partial banner, the verdict) through a format's markup;
 *   - the rows of "All measurements" and of the server view, in order.
 *
 * Nothing read from a document is trusted: strings are escaped by the
 * formats where they are written, numbers are checked finite, arrays and
 * axes are capped.  Thread-safe: no global state (the note of a cell is
 * kept in a thread-local buffer).
 */
#ifndef TB_REPVIEW_H
#define TB_REPVIEW_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "render/tb_render.h"

/* The capped buffer of a note with a flagged cell's failed self-checks. */
#define TB_REPVIEW_NOTE_MAX 800

struct tb_repview {
  const json_t *doc;
  const char *status; /* "running" for an unfinished job's document */
  struct tb_render_axis pctx, dctx, conc;
  const json_t *pcell[TB_RENDER_MAX_AXIS];
  const json_t **grid; /* dctx.n x conc.n, row-major */
  size_t ncells;       /* cells considered */
  size_t ndropped;     /* cells not shown (malformed, over caps) */
  size_t nvalid, nerror, nover, nskipped;
  double max_tps, max_prompt_tps;
};

/* Builds v from doc (borrowed for v's life); free with tb_repview_free. */
void tb_repview_build(struct tb_repview *v, const json_t *doc);
void tb_repview_free(struct tb_repview *v);
/* The decode cell at row r (context) and column c (concurrency), or NULL. */
const json_t *tb_repview_at(const struct tb_repview *v, size_t r, size_t c);

/* Whether c (may be NULL: false) has the status s. */
bool tb_repview_is(const json_t *c, const char *s);
/* The word for c's status (tb_render_status_text). */
const char *tb_repview_status_word(const json_t *c);

/* Figures of a cell as the "All measurements" table shows them ("—" where
 * there is none, and for a cell not valid). */
struct tb_repview_figs {
  char total[96], per[48], ttft[112], tbt[112], active[48], completed[48], out[48], measured[48];
};
/* phase: 0 prefill, 1 decode. */
void tb_repview_cell_figs(const json_t *c, int phase, struct tb_repview_figs *f);
/* " ± <half>" of a cell's total tok/s, "" without an interval. */
void tb_repview_pm(const json_t *cell, char *buf, size_t len);
/* True when the cell's self-checks failed; why: their reasons. */
bool tb_repview_flagged(const json_t *c, char *why, size_t len);
/* True when some decode cell has a server view or checks to show. */
bool tb_repview_any_cellview(const struct tb_repview *v);

/* One (label, value) line of a header section, written in a format. */
typedef void (*tb_repview_emit_fn)(struct tb_render_buf *b, const char *label, const char *value);

/* A section of the header read from one member of the document ("hardware",
 * "engine"): its title and its known fields, in the order shown. */
struct tb_repview_field {
  const char *key, *label;
};
struct tb_repview_section {
  const char *member, *title;
  const struct tb_repview_field *fields;
  size_t nfields;
};
extern const struct tb_repview_section tb_repview_hardware, tb_repview_engine;

/* The section's lines: the known fields in order ("VRAM": "384 GB (4 × 96
 * GB)"), then other scalar members under their own names (at most 32);
 * nothing when the member is not an object. */
void tb_repview_section(struct tb_render_buf *b, const struct tb_repview_section *s,
                        const json_t *doc, tb_repview_emit_fn emit);
/* The "Run" section: model, tool, settings, capacity, endpoint, run, times
 * and status. */
void tb_repview_run(struct tb_render_buf *b, const struct tb_repview *v, tb_repview_emit_fn emit);

/* How a format marks up the top of a report: the page's opening (HTML:
 * its head, from the title), then the title, the engine and matrix line,
 * the partial banner and the verdict, each between its strings. */
struct tb_repview_heading {
  void (*open)(struct tb_render_buf *b, const char *title); /* may be NULL */
  void (*esc)(struct tb_render_buf *b, const char *s);
  const char *title_pre, *title_post, *sub_post, *ban_pre, *ban_post;
  void (*verdict)(struct tb_render_buf *b, const json_t *regressions);
};
/* The top of a report: title, "<engine> · <matrix>", the partial banner
 * (when not complete) and the verdict, in markup m. */
void tb_repview_heading(struct tb_render_buf *b, const struct tb_repview *v,
                        const struct tb_repview_heading *m);

/* One row of the "All measurements" table, in a format. */
typedef void (*tb_repview_row_fn)(struct tb_render_buf *b, const char *phase, const char *lab,
                                  int64_t conc, const json_t *c, const struct tb_repview_figs *f,
                                  const char *note);
/* The rows of the "All measurements" table: prefill, then decode by
 * context and concurrency; cells not measured yet are left out. */
void tb_repview_all_rows(struct tb_render_buf *b, const struct tb_repview *v,
                         tb_repview_row_fn row);
/* The decode cells with a server view or checks, through row (tb_cellview's
 * row writers). */
void tb_repview_cellview_rows(struct tb_render_buf *b, const struct tb_repview *v,
                              void (*row)(struct tb_render_buf *, const char *, int64_t,
                                          const json_t *));

#endif
