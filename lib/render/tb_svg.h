/*
 * tb_svg: what every inline SVG chart of the reports is drawn with (the
 * result report's prefill and decode charts, tb_rephtml; the verdict's
 * history lines, tb_verdictview; a cell's server timeline, tb_cellview; the
 * sweep's curve, tb_ratereport):
 *
 *   - scales from values to pixels (linear or log2), and points spread
 *     evenly by their index;
 *   - the extent of a JSON array of numbers, and a "nice" top for an axis;
 *   - polylines written point by point, markers with a tooltip, error bars.
 *
 * The charts keep their own frames (sizes, margins, colours, axis labels);
 * the points, lines and markers inside them are all written here, with one
 * arithmetic and one number format ("%.1f" pixels).  Tooltips are escaped
 * (tb_render_html).  Thread-safe: no global state.
 */
#ifndef TB_SVG_H
#define TB_SVG_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#include "render/tb_render.h"

/* A scale: the domain [d0, d1] onto the pixels [r0, r1] (r1 < r0 for a y
 * axis drawn upward).  With log2, a value v is placed by log2(v) (d0 and d1
 * too: they are values, not their logarithms). */
struct tb_svg_scale {
  double d0, d1;
  double r0, r1;
  bool log2;
};

/* Where v lies in s's domain: 0 at d0, 1 at d1, not clamped; 0.5 when the
 * domain is empty (d1 not above d0). */
double tb_svg_frac(const struct tb_svg_scale *s, double v);
/* v's pixel: r0 + frac * (r1 - r0). */
double tb_svg_at(const struct tb_svg_scale *s, double v);
/* The pixel of point i of n (n >= 2) spread evenly from r0 to r1. */
double tb_svg_spread(size_t i, size_t n, double r0, double r1);

/* The value of element i of a JSON array: NAN when it is not a number. */
double tb_svg_num(const json_t *a, size_t i);
/* The smallest and largest finite numbers among a's first cap elements
 * (INFINITY and -INFINITY when there is none); a may be anything. */
void tb_svg_extent(const json_t *a, size_t cap, double *lo, double *hi);
/* The top of an axis: v rounded up to 1, 2, 2.5 or 5 times a power of
 * ten (1 when v is not above 0). */
double tb_svg_nice_ceil(double v);

/* A polyline written point by point: begin, a point at a time, end. */
struct tb_svg_poly {
  struct tb_render_buf *b;
  size_t n;      /* points written */
  bool trailing; /* each point is followed by a space (else they are
                  * separated by one) */
};

/* '<polyline fill="none" stroke="STROKE" stroke-width="WIDTH" points="'. */
void tb_svg_poly_begin(struct tb_svg_poly *p, struct tb_render_buf *b, const char *stroke,
                       double width, bool trailing);
void tb_svg_poly_pt(struct tb_svg_poly *p, double x, double y);
/* '"/>' */
void tb_svg_poly_end(struct tb_svg_poly *p);

/* A marker of radius 3 at (cx, cy) filled with fill; with a title (may be
 * NULL: none), its tooltip. */
void tb_svg_dot(struct tb_render_buf *b, double cx, double cy, const char *fill, const char *title);
/* An error bar from ylo to yhi at x, with caps of half-width cap. */
void tb_svg_errbar(struct tb_render_buf *b, double x, double ylo, double yhi, double cap,
                   const char *stroke);

#endif
