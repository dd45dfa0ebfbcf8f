/*
 * Unit tests for tb_svg: the scales (linear, log2, an empty domain, a y axis
 * drawn upward), points spread by index, the extent of a JSON array, the
 * top of an axis, and the markup of polylines, markers and error bars.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "render/tb_svg.h"

static void
test_scales(void **state)
{
  const struct tb_svg_scale lin = { 0, 100, 10, 110, false };
  assert_true(tb_svg_at(&lin, 50) == 60);
  assert_true(tb_svg_at(&lin, 0) == 10);
  assert_true(tb_svg_at(&lin, 200) == 210); /* not clamped */
  /* a y axis: 0 at the foot (100 px), the top value at 0 px */
  const struct tb_svg_scale up = { 0, 10, 100, 0, false };
  assert_true(tb_svg_at(&up, 2.5) == 75);
  assert_true(tb_svg_frac(&up, 2.5) == 0.25);
  /* log2: 4 lies halfway between 1 and 16 */
  const struct tb_svg_scale lg = { 1, 16, 0, 400, true };
  assert_true(tb_svg_at(&lg, 4) == 200);
  assert_true(tb_svg_at(&lg, 16) == 400);
  /* an empty domain puts everything in the middle */
  const struct tb_svg_scale one = { 8, 8, 0, 100, true };
  assert_true(tb_svg_at(&one, 8) == 50);
  const struct tb_svg_scale nan = { NAN, 1, 0, 100, false };
  assert_true(tb_svg_frac(&nan, 0.5) == 0.5);
}

static void
test_spread(void **state)
{
  assert_true(tb_svg_spread(0, 5, 6, 314) == 6);
  assert_true(tb_svg_spread(2, 5, 6, 314) == 160);
  assert_true(tb_svg_spread(4, 5, 6, 314) == 314);
}

static void
test_extent_and_nice_ceil(void **state)
{
  json_t *a = json_loads("[3, \"x\", -1, null, 7.5]", 0, NULL);
  double lo, hi;
  tb_svg_extent(a, SIZE_MAX, &lo, &hi);
  assert_true(lo == -1 && hi == 7.5);
  tb_svg_extent(a, 2, &lo, &hi); /* the first two: 3 and "x" */
  assert_true(lo == 3 && hi == 3);
  assert_true(isnan(tb_svg_num(a, 1)) && tb_svg_num(a, 4) == 7.5 && isnan(tb_svg_num(a, 9)));
  json_t *o = json_object();
  tb_svg_extent(o, SIZE_MAX, &lo, &hi);
  assert_true(lo == INFINITY && hi == -INFINITY);
  json_decref(o);
  json_decref(a);
  assert_true(tb_svg_nice_ceil(0) == 1);
  assert_true(tb_svg_nice_ceil(NAN) == 1);
  assert_true(tb_svg_nice_ceil(1.05) == 2);
  assert_true(tb_svg_nice_ceil(2.3) == 2.5);
  assert_true(tb_svg_nice_ceil(4) == 5);
  assert_true(tb_svg_nice_ceil(7) == 10);
  assert_true(tb_svg_nice_ceil(1234) == 2000);
}

static void
test_markup(void **state)
{
  struct tb_render_buf b = { 0 };
  struct tb_svg_poly p;
  tb_svg_poly_begin(&p, &b, "#123", 2, false);
  tb_svg_poly_pt(&p, 1, 2);
  tb_svg_poly_pt(&p, 3.25, 4);
  tb_svg_poly_end(&p);
  tb_svg_poly_begin(&p, &b, "red", 1.5, true);
  tb_svg_poly_pt(&p, 1, 2);
  tb_svg_poly_pt(&p, 3, 4);
  tb_svg_poly_end(&p);
  assert_string_equal(b.p, "<polyline fill=\"none\" stroke=\"#123\" stroke-width=\"2\" "
                           "points=\"1.0,2.0 3.2,4.0\"/>"
                           "<polyline fill=\"none\" stroke=\"red\" stroke-width=\"1.5\" "
                           "points=\"1.0,2.0 3.0,4.0 \"/>");
  free(b.p);
  b = (struct tb_render_buf){ 0 };
  tb_svg_dot(&b, 1, 2, "#d32f2f", NULL);
  tb_svg_dot(&b, 1, 2, "#1f77b4", "8K <b>: 1 & \"2\"");
  tb_svg_errbar(&b, 10, 50, 20, 4, "#000");
  assert_string_equal(b.p, "<circle cx=\"1.0\" cy=\"2.0\" r=\"3\" fill=\"#d32f2f\"/>"
                           "<circle cx=\"1.0\" cy=\"2.0\" r=\"3\" fill=\"#1f77b4\"><title>"
                           "8K &lt;b&gt;: 1 &amp; &quot;2&quot;</title></circle>"
                           "<path class=\"errbar\" d=\"M10.0,50.0V20.0M6.0,50.0H14.0M6.0,20.0"
                           "H14.0\" stroke=\"#000\" stroke-width=\"1.2\" fill=\"none\"/>");
  free(b.p);
}

int
main(void)
{
  const struct CMUnitTest tests[] = {
    cmocka_unit_test(test_scales),
    cmocka_unit_test(test_spread),
    cmocka_unit_test(test_extent_and_nice_ceil),
    cmocka_unit_test(test_markup),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
