/*
 * tb_svg: scales, polylines and markers of the reports' inline SVG charts.
 * See tb_svg.h.
 *
 * The arithmetic is written once so that every chart places its points the
 * same way: frac = (v - d0) / (d1 - d0), pixel = r0 + frac * (r1 - r0).
 */
#include "render/tb_svg.h"

#include <math.h>

double
tb_svg_frac(const struct tb_svg_scale *s, double v)
{
  double x = s->log2 ? log2(v) : v;
  double x0 = s->log2 ? log2(s->d0) : s->d0, x1 = s->log2 ? log2(s->d1) : s->d1;
  return x1 > x0 ? (x - x0) / (x1 - x0) : 0.5;
}

double
tb_svg_at(const struct tb_svg_scale *s, double v)
{
  return s->r0 + tb_svg_frac(s, v) * (s->r1 - s->r0);
}

double
tb_svg_spread(size_t i, size_t n, double r0, double r1)
{
  return r0 + (r1 - r0) * (double)i / (double)(n - 1);
}

double
tb_svg_num(const json_t *a, size_t i)
{
  const json_t *v = json_array_get(a, i);
  return json_is_number(v) ? json_number_value(v) : NAN;
}

void
tb_svg_extent(const json_t *a, size_t cap, double *lo, double *hi)
{
  size_t n = json_is_array(a) ? json_array_size(a) : 0;
  *lo = INFINITY;
  *hi = -INFINITY;
  for (size_t i = 0; i < n && i < cap; i++) {
    double v = tb_svg_num(a, i);
    if (isfinite(v)) {
      *lo = v < *lo ? v : *lo;
      *hi = v > *hi ? v : *hi;
    }
  }
}

double
tb_svg_nice_ceil(double v)
{
  if (!(v > 0))
    return 1;
  double e = pow(10, floor(log10(v)));
  double m = v / e;
  double n = m <= 1 ? 1 : m <= 2 ? 2 : m <= 2.5 ? 2.5 : m <= 5 ? 5 : 10;
  return n * e;
}

void
tb_svg_poly_begin(struct tb_svg_poly *p, struct tb_render_buf *b, const char *stroke, double width,
                  bool trailing)
{
  p->b = b;
  p->n = 0;
  p->trailing = trailing;
  tb_render_printf(b, "<polyline fill=\"none\" stroke=\"%s\" stroke-width=\"%g\" points=\"", stroke,
                   width);
}

void
tb_svg_poly_pt(struct tb_svg_poly *p, double x, double y)
{
  if (p->trailing)
    tb_render_printf(p->b, "%.1f,%.1f ", x, y);
  else
    tb_render_printf(p->b, "%s%.1f,%.1f", p->n ? " " : "", x, y);
  p->n++;
}

void
tb_svg_poly_end(struct tb_svg_poly *p)
{
  tb_render_puts(p->b, "\"/>");
}

void
tb_svg_dot(struct tb_render_buf *b, double cx, double cy, const char *fill, const char *title)
{
  tb_render_printf(b, "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"3\" fill=\"%s\"", cx, cy, fill);
  if (title == NULL) {
    tb_render_puts(b, "/>");
    return;
  }
  tb_render_puts(b, "><title>");
  tb_render_html(b, title);
  tb_render_puts(b, "</title></circle>");
}

void
tb_svg_errbar(struct tb_render_buf *b, double x, double ylo, double yhi, double cap,
              const char *stroke)
{
  tb_render_printf(b,
                   "<path class=\"errbar\" d=\"M%.1f,%.1fV%.1fM%.1f,%.1fH%.1fM%.1f,%.1fH%.1f\" "
                   "stroke=\"%s\" stroke-width=\"1.2\" fill=\"none\"/>",
                   x, ylo, yhi, x - cap, ylo, x + cap, x - cap, yhi, x + cap, stroke);
}
