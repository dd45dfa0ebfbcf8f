/*
 * tb_celltable: see tb_celltable.h.
 */
#include "render/tb_celltable.h"

static bool
left(const struct tb_celltable *t, int k)
{
  return t->align == NULL || t->align[k] != 'r';
}

bool
tb_celltable_any(const struct tb_celltable *t, const json_t *doc)
{
  size_t i;
  const json_t *c;
  json_array_foreach (json_object_get(doc, "cells"), i, c) {
    if (json_is_object(json_object_get(c, t->member)))
      return true;
  }
  return false;
}

void
tb_celltable_md_head(struct tb_render_buf *b, const struct tb_celltable *t)
{
  tb_render_puts(b, "|");
  for (int k = 0; k < t->ncols; k++)
    tb_render_printf(b, " %s |", t->heads[k]);
  tb_render_puts(b, "\n|");
  for (int k = 0; k < t->ncols; k++)
    tb_render_puts(b, left(t, k) ? "---|" : "---:|");
  tb_render_puts(b, "\n");
}

/* The opening tag of a head or data cell of column k. */
static void
open_tag(struct tb_render_buf *b, const struct tb_celltable *t, int k, const char *tag)
{
  tb_render_printf(b, "<%s%s>", tag, t->html_class_l && left(t, k) ? " class=\"l\"" : "");
}

void
tb_celltable_html_heads(struct tb_render_buf *b, const struct tb_celltable *t)
{
  for (int k = 0; k < t->ncols; k++) {
    open_tag(b, t, k, "th");
    tb_render_html(b, t->heads[k]);
    tb_render_puts(b, "</th>");
  }
}

/* How one format writes a row: its delimiters and its escaping. */
struct fmt {
  const char *row_open, *cell_open, *cell_close, *row_close;
  void (*text)(struct tb_render_buf *b, const char *s);
};

static const struct fmt md_fmt = { "|", " ", " |", "\n", tb_render_md };
static const struct fmt plain_fmt = { "|", " ", " |", "\n", tb_render_puts };
static const struct fmt html_fmt = { "<tr>", NULL, "</td>", "</tr>\n", tb_render_html };

static void
rows(struct tb_render_buf *b, const struct tb_celltable *t, const json_t *doc, const struct fmt *f)
{
  size_t i;
  const json_t *c;
  char col[TB_CELLTABLE_MAXCOLS][TB_CELLTABLE_COLW];
  if (t->ncols > TB_CELLTABLE_MAXCOLS)
    return;
  json_array_foreach (json_object_get(doc, "cells"), i, c) {
    if (!json_is_object(json_object_get(c, t->member)) || !t->row(c, col))
      continue;
    tb_render_puts(b, f->row_open);
    for (int k = 0; k < t->ncols; k++) {
      if (f->cell_open != NULL)
        tb_render_puts(b, f->cell_open);
      else
        open_tag(b, t, k, "td");
      f->text(b, col[k]);
      tb_render_puts(b, f->cell_close);
    }
    tb_render_puts(b, f->row_close);
  }
}

void
tb_celltable_rows(struct tb_render_buf *b, const struct tb_celltable *t, const json_t *doc,
                  bool html)
{
  rows(b, t, doc, html ? &html_fmt : &md_fmt);
}

void
tb_celltable_rows_plain(struct tb_render_buf *b, const struct tb_celltable *t, const json_t *doc)
{
  rows(b, t, doc, &plain_fmt);
}

/* The Markdown section with the rows written in f. */
static void
md_section(struct tb_render_buf *b, const struct tb_celltable *t, const json_t *doc,
           const struct fmt *f)
{
  if (!tb_celltable_any(t, doc))
    return;
  tb_render_printf(b, "\n%s\n\n%s", t->md_title, t->intro);
  if (t->md_note != NULL)
    t->md_note(b, doc);
  tb_render_puts(b, "\n\n");
  tb_celltable_md_head(b, t);
  rows(b, t, doc, f);
}

void
tb_celltable_md(struct tb_render_buf *b, const struct tb_celltable *t, const json_t *doc)
{
  md_section(b, t, doc, &md_fmt);
}

void
tb_celltable_plain(struct tb_render_buf *b, const struct tb_celltable *t, const json_t *doc)
{
  md_section(b, t, doc, &plain_fmt);
}

void
tb_celltable_html(struct tb_render_buf *b, const struct tb_celltable *t, const json_t *doc)
{
  if (!tb_celltable_any(t, doc))
    return;
  tb_render_puts(b, t->html_open);
  if (t->html_escape_intro)
    tb_render_html(b, t->intro);
  else
    tb_render_puts(b, t->intro);
  tb_render_puts(b, t->html_table);
  tb_celltable_html_heads(b, t);
  tb_render_puts(b, t->html_body);
  rows(b, t, doc, &html_fmt);
  tb_render_puts(b, t->html_close);
}
