/* Unit tests for tb_celltable: the head, the alignment rule, the rows of
 * the cells that have the member, escaping per format, and a row function
 * that declines. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdlib.h>
#include <string.h>

#include "render/tb_celltable.h"

static const char *const heads[2] = { "Name", "Value" };

/* A row: the cell's "x.name" and "x.value"; no row when "skip" is true. */
static bool
row(const json_t *c, char (*col)[TB_CELLTABLE_COLW])
{
  const json_t *x = json_object_get(c, "x");
  if (json_is_true(json_object_get(x, "skip")))
    return false;
  snprintf(col[0], TB_CELLTABLE_COLW, "%s", json_string_value(json_object_get(x, "name")));
  snprintf(col[1], TB_CELLTABLE_COLW, "%lld",
           (long long)json_integer_value(json_object_get(x, "value")));
  return true;
}

static const struct tb_celltable plain = { .member = "x", .ncols = 2, .heads = heads, .row = row };
static const struct tb_celltable aligned = {
  .member = "x", .ncols = 2, .heads = heads, .align = "lr", .html_class_l = true, .row = row
};

static json_t *
doc(void)
{
  json_error_t e;
  json_t *d = json_loads("{\"cells\": [{\"x\": {\"name\": \"a|<b>\", \"value\": 1}},"
                         " {\"y\": {}},"
                         " {\"x\": {\"name\": \"c\", \"value\": 2, \"skip\": true}},"
                         " {\"x\": {\"name\": \"d\", \"value\": 3}}]}",
                         0, &e);
  assert_non_null(d);
  return d;
}

static char *
render(void (*fn)(struct tb_render_buf *, const struct tb_celltable *, const json_t *),
       const struct tb_celltable *t, const json_t *d)
{
  struct tb_render_buf b = { 0 };
  fn(&b, t, d);
  size_t len;
  char *err = NULL;
  char *s = tb_render_finish(&b, &len, &err);
  assert_non_null(s);
  free(err);
  return s;
}

static void
md_rows(struct tb_render_buf *b, const struct tb_celltable *t, const json_t *d)
{
  tb_celltable_md_head(b, t);
  tb_celltable_rows(b, t, d, false);
}

static void
html_rows(struct tb_render_buf *b, const struct tb_celltable *t, const json_t *d)
{
  tb_celltable_html_heads(b, t);
  tb_celltable_rows(b, t, d, true);
}

static void
test_any(void **state)
{
  (void)state;
  json_t *d = doc();
  assert_true(tb_celltable_any(&plain, d));
  json_t *none = json_pack("{s:[{s:{}}]}", "cells", "y");
  assert_false(tb_celltable_any(&plain, none));
  json_decref(none);
  json_decref(d);
}

static void
test_markdown(void **state)
{
  (void)state;
  json_t *d = doc();
  char *s = render(md_rows, &plain, d);
  assert_string_equal(s, "| Name | Value |\n|---|---|\n| a\\|&lt;b&gt; | 1 |\n| d | 3 |\n");
  free(s);
  s = render(md_rows, &aligned, d);
  assert_non_null(strstr(s, "\n|---|---:|\n"));
  free(s);
  json_decref(d);
}

static void
test_html(void **state)
{
  (void)state;
  json_t *d = doc();
  char *s = render(html_rows, &plain, d);
  assert_string_equal(s, "<th>Name</th><th>Value</th>"
                         "<tr><td>a|&lt;b&gt;</td><td>1</td></tr>\n"
                         "<tr><td>d</td><td>3</td></tr>\n");
  free(s);
  s = render(html_rows, &aligned, d);
  assert_non_null(strstr(s, "<th class=\"l\">Name</th><th>Value</th>"));
  assert_non_null(strstr(s, "<tr><td class=\"l\">d</td><td>3</td></tr>\n"));
  free(s);
  json_decref(d);
}

static void
test_plain_keeps_text(void **state)
{
  (void)state;
  json_t *d = doc();
  struct tb_render_buf b = { 0 };
  tb_celltable_rows_plain(&b, &plain, d);
  size_t len;
  char *err = NULL;
  char *s = tb_render_finish(&b, &len, &err);
  assert_string_equal(s, "| a|<b> | 1 |\n| d | 3 |\n");
  free(s);
  free(err);
  json_decref(d);
}

int
main(void)
{
  const struct CMUnitTest tests[] = {
    cmocka_unit_test(test_any),
    cmocka_unit_test(test_markdown),
    cmocka_unit_test(test_html),
    cmocka_unit_test(test_plain_keeps_text),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
