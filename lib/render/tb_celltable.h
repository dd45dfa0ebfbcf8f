/*
 * tb_celltable: a report table of one row per cell, written once for
 * Markdown and HTML.
 *
 * A view (tb_steadyview, tb_traceview, tb_srvview, tb_costview) describes
 * its table: the member a cell must have for a row, the column heads, how
 * each column is aligned, and a function that fills one row's texts; and
 * the section around it: its Markdown title, its introduction and the HTML
 * that opens and closes it.  This module writes the whole section in either
 * format (tb_celltable_md, tb_celltable_html), escaping every cell's text
 * for it, or its parts for a caller that places them itself.
 */
#ifndef TB_CELLTABLE_H
#define TB_CELLTABLE_H

#include <jansson.h>
#include <stdbool.h>

#include "render/tb_render.h"

/* Bytes of one column's text, its NUL included; columns of a table. */
#define TB_CELLTABLE_COLW 128
#define TB_CELLTABLE_MAXCOLS 16

/* The texts of one row; false: the cell has no row after all. */
typedef bool (*tb_celltable_row_fn)(const json_t *cell, char (*col)[TB_CELLTABLE_COLW]);

struct tb_celltable {
  /* the object member a cell has when it has a row ("steady", "trace", ...) */
  const char *member;
  int ncols; /* at most TB_CELLTABLE_MAXCOLS */
  const char *const *heads;
  /* per column 'l' (text) or 'r' (a figure): Markdown's rule "---|" or
   * "---:|"; NULL: every column "---|" */
  const char *align;
  /* HTML: the 'l' columns' <th> and <td> get class="l" */
  bool html_class_l;
  tb_celltable_row_fn row;
  /* The section (tb_celltable_md, _plain, _html). */
  const char *md_title; /* "### Steady-state window" */
  const char *intro;    /* the paragraph under the title, as Markdown has it */
  /* Markdown: written after the introduction, before its blank line (the
   * cost view's price); NULL: nothing */
  void (*md_note)(struct tb_render_buf *b, const json_t *doc);
  /* HTML: the title and what opens the introduction; what closes it and
   * opens the table up to its heads; what follows the heads; what closes
   * the table */
  const char *html_open, *html_table, *html_body, *html_close;
  bool html_escape_intro; /* the introduction escaped (else as it is) */
};

/* The Markdown section: "\n<md_title>\n\n<intro>", md_note, "\n\n", the
 * head and the rows (escaped for Markdown); nothing when no cell of doc has
 * the member. */
void tb_celltable_md(struct tb_render_buf *b, const struct tb_celltable *t, const json_t *doc);

/* The same with the rows' texts as they are (terminal output). */
void tb_celltable_plain(struct tb_render_buf *b, const struct tb_celltable *t, const json_t *doc);

/* The HTML section: html_open, the introduction, html_table, the heads,
 * html_body, the rows, html_close; nothing when no cell of doc has the
 * member. */
void tb_celltable_html(struct tb_render_buf *b, const struct tb_celltable *t, const json_t *doc);

/* Whether any cell of doc has the table's member. */
bool tb_celltable_any(const struct tb_celltable *t, const json_t *doc);

/* The Markdown head, from the first "|" to the rule's newline. */
void tb_celltable_md_head(struct tb_render_buf *b, const struct tb_celltable *t);

/* The HTML heads, "<th>...</th>" each, without the <tr> around them. */
void tb_celltable_html_heads(struct tb_render_buf *b, const struct tb_celltable *t);

/* One line a cell that has a row: Markdown (escape NULL: tb_render_md),
 * or HTML when html. */
void tb_celltable_rows(struct tb_render_buf *b, const struct tb_celltable *t, const json_t *doc,
                       bool html);

/* The same Markdown rows with the texts as they are (terminal output). */
void tb_celltable_rows_plain(struct tb_render_buf *b, const struct tb_celltable *t,
                             const json_t *doc);

#endif
