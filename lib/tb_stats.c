/*
 * tb_stats: percentiles.  See tb_stats.h.
 */
#include "tb_stats.h"

#include <math.h>
#include <stdlib.h>

#include "tb_util.h"

void
tb_stats_add(struct tb_stats *s, int64_t x)
{
  if (s->n == s->cap) {
    s->cap = s->cap ? s->cap * 2 : 64;
    s->v = tb_xrealloc(s->v, s->cap * sizeof *s->v);
  }
  s->v[s->n++] = x;
}

static int
cmp_i64(const void *a, const void *b)
{
  int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
  return (x > y) - (x < y);
}

double
tb_stats_quantile(struct tb_stats *s, double q)
{
  if (s->n == 0)
    return NAN;
  qsort(s->v, s->n, sizeof *s->v, cmp_i64);
  if (q <= 0)
    return (double)s->v[0];
  if (q >= 1)
    return (double)s->v[s->n - 1];
  double pos = q * (double)(s->n - 1);
  size_t lo = (size_t)pos;
  double frac = pos - (double)lo;
  if (lo + 1 >= s->n)
    return (double)s->v[lo];
  return (double)s->v[lo] + frac * (double)(s->v[lo + 1] - s->v[lo]);
}

void
tb_stats_reset(struct tb_stats *s)
{
  s->n = 0;
}

void
tb_stats_free(struct tb_stats *s)
{
  free(s->v);
  s->v = NULL;
  s->n = s->cap = 0;
}
