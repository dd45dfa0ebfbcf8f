/*
 * tb_steady: see tb_steady.h.
 *
 * The in-flight count is a step function of the requests' starts and ends:
 * the events sorted by time, a departure before an arrival at one instant,
 * the count after every event of an instant holding until the next.  The
 * threshold is compared in whole numbers (100 x in flight >= 95 x the
 * reference) so that no rounding of 0.95 moves a boundary.
 */
#include "result/tb_steady.h"

#include <math.h>
#include <stdlib.h>

#include "base/tb_util.h"

#define STEADY_PCT 95

struct ev {
  int64_t t;
  int d; /* -1 an end, +1 a start */
};

static int
ev_cmp(const void *a, const void *b)
{
  const struct ev *x = a, *y = b;
  if (x->t != y->t)
    return x->t < y->t ? -1 : 1;
  return x->d - y->d; /* -1 before +1 */
}

static int
dbl_cmp(const void *a, const void *b)
{
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y ? 1 : 0;
}

/* The q-quantile (type 7: linear between order statistics, as tb_stats and
 * numpy's default) of the n values x, sorted here; NAN when n is 0. */
static double
quantile7(double *x, size_t n, double q)
{
  if (n == 0)
    return NAN;
  qsort(x, n, sizeof *x, dbl_cmp);
  double h = (double)(n - 1) * q;
  size_t lo = (size_t)floor(h);
  if (lo + 1 >= n)
    return x[n - 1];
  return x[lo] + (h - (double)lo) * (x[lo + 1] - x[lo]);
}

static int64_t
end_of(const struct tb_steady_req *q)
{
  return q->end_us < q->start_us ? q->start_us : q->end_us;
}

/* The events of the n spans sorted into a new array of 2n; the peak into
 * *peak. */
static struct ev *
events(const struct tb_steady_span *sp, size_t n, int64_t *peak)
{
  struct ev *e = tb_xcalloc(n > 0 ? 2 * n : 1, sizeof *e);
  for (size_t i = 0; i < n; i++) {
    e[2 * i] = (struct ev){ sp[i].start_us, +1 };
    e[2 * i + 1] = (struct ev){ sp[i].end_us < sp[i].start_us ? sp[i].start_us : sp[i].end_us, -1 };
  }
  qsort(e, 2 * n, sizeof *e, ev_cmp);
  int64_t level = 0;
  *peak = 0;
  for (size_t i = 0; i < 2 * n; i++) {
    level += e[i].d;
    if (level > *peak)
      *peak = level;
  }
  return e;
}

/* The longest span of e (2n events) at or above ref's share: false when
 * none has length. */
static bool
longest(const struct ev *e, size_t ne, int64_t ref, int64_t *a, int64_t *b)
{
  int64_t level = 0, best = 0, open_at = 0;
  bool open = false;
  for (size_t i = 0; i < ne;) {
    int64_t t = e[i].t;
    for (; i < ne && e[i].t == t; i++)
      level += e[i].d;
    bool up = 100 * level >= STEADY_PCT * ref;
    if (up && !open) {
      open = true;
      open_at = t;
    } else if (!up && open) {
      open = false;
      if (t - open_at > best) {
        best = t - open_at;
        *a = open_at;
        *b = t;
      }
    }
  }
  return best > 0; /* every request ends, so the count ends at 0 and closes */
}

/* The figures of the requests inside [w->start_us, w->end_us). */
static void
figures(const struct tb_steady_req *r, size_t n, struct tb_steady *w)
{
  int64_t a = w->start_us, b = w->end_us;
  double *ttft = tb_xcalloc(n ? n : 1, sizeof *ttft), *tpot = tb_xcalloc(n ? n : 1, sizeof *tpot);
  size_t nt = 0, np = 0;
  double tokens = 0;
  for (size_t i = 0; i < n; i++) {
    const struct tb_steady_req *q = &r[i];
    int64_t e = end_of(q);
    bool in = q->start_us >= a && q->start_us < b;
    w->requests += in;
    if (!q->ok)
      continue;
    w->completed += e > a && e <= b;
    if (in && isfinite(q->ttft_ms))
      ttft[nt++] = q->ttft_ms;
    if (in && isfinite(q->tpot_ms))
      tpot[np++] = q->tpot_ms;
    /* the decode span [first token, end], its share inside [a, b] */
    double f = (double)q->start_us + (isfinite(q->ttft_ms) ? q->ttft_ms * 1000.0 : 0);
    if (f > (double)e)
      f = (double)e;
    if ((double)e > f) {
      double lo = f > (double)a ? f : (double)a, hi = (double)e < (double)b ? (double)e : (double)b;
      if (hi > lo)
        tokens += (double)q->tokens * (hi - lo) / ((double)e - f);
    } else if (f >= (double)a && f < (double)b) {
      tokens += (double)q->tokens;
    }
  }
  double len = (double)(b - a) / 1e6;
  w->rps = (double)w->completed / len;
  w->output_tps = tokens / len;
  w->ttft_p50 = quantile7(ttft, nt, 0.5);
  w->ttft_p99 = quantile7(ttft, nt, 0.99);
  w->tpot_p50 = quantile7(tpot, np, 0.5);
  w->tpot_p99 = quantile7(tpot, np, 0.99);
  free(ttft);
  free(tpot);
}

/* The time-averaged count of e (ne events) over [t0, t1): its integral in
 * whole request-microseconds (exact) over t1 - t0. */
static double
mean_level(const struct ev *e, size_t ne, int64_t t0, int64_t t1)
{
  int64_t level = 0, area = 0;
  for (size_t i = 0; i < ne;) {
    int64_t t = e[i].t;
    for (; i < ne && e[i].t == t; i++)
      level += e[i].d;
    int64_t next = i < ne ? e[i].t : t;
    int64_t lo = t > t0 ? t : t0, hi = next < t1 ? next : t1;
    if (hi > lo)
      area += level * (hi - lo);
  }
  return (double)area / (double)(t1 - t0);
}

/* The first instant of e (ne events) at which the count reaches k, or -1. */
static int64_t
first_at(const struct ev *e, size_t ne, int64_t k)
{
  int64_t level = 0;
  for (size_t i = 0; i < ne;) {
    int64_t t = e[i].t;
    for (; i < ne && e[i].t == t; i++)
      level += e[i].d;
    if (level >= k)
      return t;
  }
  return -1;
}

/* An open-loop cell's window (no target): its level the mean in flight over
 * the offered span [first arrival, last arrival], the window from the first
 * instant at ceil(share x level) (at least 1) to the last arrival.  The
 * reason when none, else NULL. */
static const char *
open_loop(const struct tb_steady_req *r, size_t n, const struct ev *e, size_t ne,
          struct tb_steady *out)
{
  int64_t t0 = r[0].start_us, t1 = r[0].start_us;
  for (size_t i = 1; i < n; i++) {
    t0 = r[i].start_us < t0 ? r[i].start_us : t0;
    t1 = r[i].start_us > t1 ? r[i].start_us : t1;
  }
  if (n < 2)
    return "fewer than 2 requests arrived";
  if (t1 == t0)
    return "every request arrived at one instant";
  out->level = mean_level(e, ne, t0, t1);
  out->threshold = TB_STEADY_SHARE * out->level;
  double k = ceil(out->threshold);
  int64_t a = first_at(e, ne, k < 1 ? 1 : (int64_t)k);
  if (a < 0)
    return "no request was in flight for any time";
  if (a >= t1) /* the count rises only at an arrival: this one is the last */
    return "requests in flight reached 95% of their level only at the last arrival";
  out->start_us = a;
  out->end_us = t1;
  return NULL;
}

void
tb_steady_compute(const struct tb_steady_req *r, size_t n, const struct tb_steady_span *busy,
                  size_t nbusy, int64_t target, struct tb_steady *out)
{
  *out = (struct tb_steady){ .target = target > 0 ? target : 0,
                             .level = NAN,
                             .threshold = target > 0 ? TB_STEADY_SHARE * (double)target : NAN,
                             .ttft_p50 = NAN,
                             .ttft_p99 = NAN,
                             .tpot_p50 = NAN,
                             .tpot_p99 = NAN };
  if (n == 0) {
    out->reason = "no request started";
    return;
  }
  struct tb_steady_span *own = NULL;
  if (busy == NULL) {
    own = tb_xcalloc(n, sizeof *own);
    for (size_t i = 0; i < n; i++)
      own[i] = (struct tb_steady_span){ r[i].start_us, end_of(&r[i]) };
    busy = own;
    nbusy = n;
  }
  struct ev *e = events(busy, nbusy, &out->peak);
  free(own);
  if (out->target == 0) {
    out->reason = open_loop(r, n, e, 2 * nbusy, out);
    out->found = out->reason == NULL;
    if (out->found)
      figures(r, n, out);
    free(e);
    return;
  }
  int64_t ref = out->target;
  if (out->peak == 0) {
    out->reason = "no request was in flight for any time";
  } else if (100 * out->peak < STEADY_PCT * ref) {
    out->reason = "requests in flight never reached 95% of the target";
  } else if (!longest(e, 2 * nbusy, ref, &out->start_us, &out->end_us)) {
    out->reason = "requests in flight held 95% of the reference for no time";
  } else {
    out->found = true;
    figures(r, n, out);
  }
  free(e);
}

size_t
tb_steady_reqs_from_samples(const json_t *samples, struct tb_steady_req **out)
{
  *out = NULL;
  const json_t *st = json_object_get(samples, "start_ms"), *en = json_object_get(samples, "end_ms"),
               *tt = json_object_get(samples, "ttft_ms"), *tp = json_object_get(samples, "tpot_ms"),
               *tk = json_object_get(samples, "output_tokens");
  size_t n = json_array_size(st);
  if (n == 0 || json_array_size(en) != n || json_array_size(tt) != n || json_array_size(tp) != n ||
      json_array_size(tk) != n)
    return 0;
  struct tb_steady_req *r = tb_xcalloc(n, sizeof *r);
  size_t k = 0;
  for (size_t i = 0; i < n; i++) {
    const json_t *a = json_array_get(st, i), *b = json_array_get(en, i);
    if (!json_is_number(a) || !json_is_number(b))
      continue;
    const json_t *t = json_array_get(tt, i), *p = json_array_get(tp, i);
    r[k++] = (struct tb_steady_req){
      .start_us = (int64_t)llround(json_number_value(a) * 1e3),
      .end_us = (int64_t)llround(json_number_value(b) * 1e3),
      .ok = json_is_number(t),
      .ttft_ms = json_is_number(t) ? json_number_value(t) : NAN,
      .tpot_ms = json_is_number(p) ? json_number_value(p) : NAN,
      .tokens = json_is_integer(json_array_get(tk, i))
                  ? (int64_t)json_integer_value(json_array_get(tk, i))
                  : 0,
    };
  }
  if (k == 0) {
    free(r);
    return 0;
  }
  *out = r;
  return k;
}

static json_t *
num_or_null(double v, double scale)
{
  return isfinite(v) ? json_real(round(v * scale) / scale) : json_null();
}

json_t *
tb_steady_json(const struct tb_steady *w)
{
  json_t *o = json_object();
  json_object_set_new(o, "found", json_boolean(w->found));
  json_object_set_new(o, "reference", json_string(w->target > 0 ? "target" : "level"));
  json_object_set_new(o, "peak_in_flight", json_integer(w->peak));
  if (w->target > 0)
    json_object_set_new(o, "target", json_integer(w->target));
  else
    json_object_set_new(o, "level", num_or_null(w->level, 1e6));
  json_object_set_new(o, "threshold", num_or_null(w->threshold, 1e4));
  if (!w->found) {
    json_object_set_new(o, "reason", json_string(w->reason ? w->reason : "none"));
    return o;
  }
  json_object_set_new(o, "start_s", json_real((double)w->start_us / 1e6));
  json_object_set_new(o, "end_s", json_real((double)w->end_us / 1e6));
  json_object_set_new(o, "length_s", json_real((double)(w->end_us - w->start_us) / 1e6));
  json_object_set_new(o, "requests", json_integer(w->requests));
  json_object_set_new(o, "completed", json_integer(w->completed));
  json_object_set_new(o, "rps", num_or_null(w->rps, 1e6));
  json_object_set_new(o, "output_tps", num_or_null(w->output_tps, 1e6));
  json_object_set_new(o, "ttft_ms",
                      json_pack("{s:o, s:o}", "p50", num_or_null(w->ttft_p50, 1e6), "p99",
                                num_or_null(w->ttft_p99, 1e6)));
  json_object_set_new(o, "tpot_ms",
                      json_pack("{s:o, s:o}", "p50", num_or_null(w->tpot_p50, 1e6), "p99",
                                num_or_null(w->tpot_p99, 1e6)));
  return o;
}
