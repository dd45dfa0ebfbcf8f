/*
 * tb_tracesum: a trace's figures and their JSON.
 */
#include "spec/tb_tracesum.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static int
cmp_i64(const void *a, const void *b)
{
  int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
  return (x > y) - (x < y);
}

static void
dist(int64_t *v, size_t n, struct tb_tracesum_dist *d)
{
  memset(d, 0, sizeof *d);
  if (n == 0)
    return;
  qsort(v, n, sizeof *v, cmp_i64);
  double sum = 0;
  for (size_t i = 0; i < n; i++)
    sum += (double)v[i];
  d->mean = sum / (double)n;
  /* nearest rank */
  d->p50 = (double)v[(size_t)ceil(0.50 * (double)n) - 1];
  d->p90 = (double)v[(size_t)ceil(0.90 * (double)n) - 1];
  d->p99 = (double)v[(size_t)ceil(0.99 * (double)n) - 1];
  d->max = (double)v[n - 1];
}

void
tb_tracesum_of(const struct tb_trace *t, struct tb_tracesum *s)
{
  memset(s, 0, sizeof *s);
  s->requests = t->n;
  s->sessions = t->nsessions;
  s->blocks = t->nblocks;
  s->unique_blocks = t->nuniq;
  s->block_tokens = t->block_tokens;
  if (t->n == 0)
    return;
  double lo = t->req[0].t_s, hi = lo;
  int64_t *v = tb_xmalloc(t->n * sizeof *v);
  for (size_t i = 0; i < t->n; i++) {
    lo = fmin(lo, t->req[i].t_s);
    hi = fmax(hi, t->req[i].t_s);
    v[i] = t->req[i].in_tokens;
  }
  s->span_s = hi - lo;
  s->rate = s->span_s > 0 ? (double)t->n / s->span_s : 0;
  dist(v, t->n, &s->in);
  for (size_t i = 0; i < t->n; i++)
    v[i] = t->req[i].out_tokens;
  dist(v, t->n, &s->out);
  free(v);
  uint8_t *seen = tb_xcalloc(t->nuniq + 1, 1);
  double hit = 0, all = 0;
  for (size_t i = 0; i < t->n; i++) {
    const struct tb_trace_req *r = &t->req[i];
    const uint32_t *ids = t->blocks + r->blk_off;
    int64_t h = 0;
    uint32_t k = 0;
    while (k < r->nblk && seen[ids[k]])
      k++;
    h = (int64_t)k * t->block_tokens;
    hit += (double)(h < r->in_tokens ? h : r->in_tokens);
    all += (double)r->in_tokens;
    for (k = 0; k < r->nblk; k++)
      seen[ids[k]] = 1;
  }
  free(seen);
  s->implied_hit_rate = all > 0 ? hit / all : 0;
}

static json_t *
dist_json(const struct tb_tracesum_dist *d)
{
  return json_pack("{s:f, s:f, s:f, s:f, s:f}", "mean", d->mean, "p50", d->p50, "p90", d->p90,
                   "p99", d->p99, "max", d->max);
}

json_t *
tb_tracesum_json(const struct tb_tracesum *s)
{
  json_t *o = json_pack(
    "{s:I, s:I, s:f, s:f, s:I, s:I, s:I, s:f}", "requests", (json_int_t)s->requests, "sessions",
    (json_int_t)s->sessions, "span_s", s->span_s, "rate_rps", s->rate, "block_tokens",
    (json_int_t)s->block_tokens, "blocks", (json_int_t)s->blocks, "unique_blocks",
    (json_int_t)s->unique_blocks, "implied_hit_pct", 100.0 * s->implied_hit_rate);
  json_object_set_new(o, "input_tokens", dist_json(&s->in));
  json_object_set_new(o, "output_tokens", dist_json(&s->out));
  return o;
}
