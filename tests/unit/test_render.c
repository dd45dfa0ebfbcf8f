/*
 * Unit tests for tb_render's matrix writers, the one decode matrix of the
 * reports, the comparisons and the terminal: the Markdown and HTML markup
 * of the head and the rows, an empty matrix, and a result cell's words
 * (absent, valid, over capacity, capacity-limited, error).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdlib.h>
#include <string.h>

#include "render/tb_render.h"

/* Writes "<r>.<c>" as a Markdown cell, or as an HTML one with ctx set. */
static void
cell(struct tb_render_buf *b, void *ctx, size_t r, size_t c)
{
  tb_render_printf(b, ctx ? "<td>%zu.%zu</td>" : " %zu.%zu |", r, c);
}

static const int64_t rows[] = { 0, 8192, 262144 }, cols[] = { 1, 32 };

static void
test_md_matrix(void **state)
{
  struct tb_render_buf b = { 0 };
  const struct tb_render_matrix m = { rows, cols, 3, 2, cell, NULL };
  tb_render_md_matrix(&b, &m, "---:");
  assert_string_equal(b.p, "| Context | 1 | 32 |\n|---|---:|---:|\n"
                           "| 0 | 0.0 | 0.1 |\n| 8K | 1.0 | 1.1 |\n| 256K | 2.0 | 2.1 |\n");
  free(b.p);
  b = (struct tb_render_buf){ 0 };
  const struct tb_render_matrix none = { rows, cols, 0, 0, cell, NULL };
  tb_render_md_matrix(&b, &none, "---");
  assert_string_equal(b.p, "| Context |\n|---|\n");
  free(b.p);
}

static void
test_html_matrix(void **state)
{
  struct tb_render_buf b = { 0 };
  int html = 1;
  const struct tb_render_matrix m = { rows + 1, cols, 1, 2, cell, &html };
  tb_render_html_matrix(&b, "decode\"<", &m);
  assert_string_equal(b.p, "<table class=\"matrix\" id=\"decode&quot;&lt;\"><tr>"
                           "<th class=\"l\">Context</th><th>1</th><th>32</th></tr>\n"
                           "<tr><th class=\"l\">8K</th><td>0.0</td><td>0.1</td></tr>\n"
                           "</table>");
  free(b.p);
}

static void
valid(struct tb_render_buf *b, const json_t *c)
{
  tb_render_printf(b, " %g |", json_number_value(json_object_get(c, "total_tps")));
}

static void
test_md_result_cell(void **state)
{
  json_t *ok = json_pack("{s:s, s:f}", "status", "valid", "total_tps", 12.5);
  json_t *oc = json_pack("{s:s}", "status", "over_capacity");
  json_t *cl =
    json_pack("{s:s, s:f}", "status", "over_capacity", "total_tps_capacity_limited", 99.0);
  json_t *err = json_pack("{s:s}", "status", "error");
  struct tb_render_buf b = { 0 };
  bool any_cl = false;
  tb_render_md_result_cell(&b, NULL, valid, &any_cl);
  tb_render_md_result_cell(&b, ok, valid, &any_cl);
  tb_render_md_result_cell(&b, oc, valid, &any_cl);
  tb_render_md_result_cell(&b, err, valid, &any_cl);
  assert_false(any_cl);
  tb_render_md_result_cell(&b, cl, valid, &any_cl);
  assert_true(any_cl);
  tb_render_md_result_cell(&b, oc, valid, &any_cl);
  assert_true(any_cl); /* stays set */
  assert_string_equal(b.p, " \xe2\x80\x94 | 12.5 | Over capacity | Error | Over capacity* |"
                           " Over capacity |");
  free(b.p);
  json_decref(ok);
  json_decref(oc);
  json_decref(cl);
  json_decref(err);
}

int
main(void)
{
  const struct CMUnitTest tests[] = {
    cmocka_unit_test(test_md_matrix),
    cmocka_unit_test(test_html_matrix),
    cmocka_unit_test(test_md_result_cell),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
