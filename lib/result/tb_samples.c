/*
 * tb_samples: a shard's samples, their encoding and the exact merge (see
 * tb_samples.h for the format and why).
 */
#include "result/tb_samples.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/tb_clock.h"
#include "base/tb_util.h"
#include "result/tb_result.h"

static const unsigned char magic[4] = { 'T', 'B', 'S', '1' };

/* the counters, in their order on the wire */
#define NCOUNTERS 10

static int64_t *
counter(struct tb_samples *m, int i)
{
  int64_t *c[NCOUNTERS] = {
    &m->tokens,  &m->completed,    &m->started, &m->good,  &m->resolution,
    &m->streams, &m->active_milli, &m->chunked, &m->reads, &m->stamped_reads
  };
  return c[i];
}

void
tb_samples_init(struct tb_samples *m)
{
  memset(m, 0, sizeof *m);
}

void
tb_samples_free(struct tb_samples *m)
{
  for (int k = 0; k < TB_SAMPLES_NSERIES; k++)
    tb_stats_free(&m->s[k]);
  free(m->slices);
  memset(m, 0, sizeof *m);
}

void
tb_samples_add(struct tb_samples *m, enum tb_samples_series k, int64_t us)
{
  if ((unsigned)k >= TB_SAMPLES_NSERIES)
    return;
  tb_stats_add(&m->s[k], us < 0 ? 0 : us);
}

bool
tb_samples_set_slices(struct tb_samples *m, int64_t width_us, const int64_t *tokens, size_t n)
{
  if (width_us <= 0 || n == 0 || n > TB_SAMPLES_MAX_SLICES)
    return false;
  free(m->slices);
  m->slices = tb_xmalloc(n * sizeof *m->slices);
  memcpy(m->slices, tokens, n * sizeof *m->slices);
  m->nslices = n;
  m->slice_us = width_us;
  return true;
}

/* ----------------------------------------------------------------- encode */

struct wbuf {
  unsigned char *p;
  size_t n, cap;
};

static void
put_u(struct wbuf *w, uint64_t v)
{
  if (w->cap - w->n < 10) {
    w->cap = w->cap * 2 + 64;
    w->p = tb_xrealloc(w->p, w->cap);
  }
  do {
    unsigned char b = v & 0x7f;
    v >>= 7;
    w->p[w->n++] = (unsigned char)(b | (v ? 0x80 : 0));
  } while (v);
}

static uint64_t
zigzag(int64_t d)
{
  return ((uint64_t)d << 1) ^ (uint64_t)(d >> 63);
}

static int64_t
unzigzag(uint64_t z)
{
  return (int64_t)(z >> 1) ^ -(int64_t)(z & 1);
}

void
tb_samples_encode(const struct tb_samples *m, unsigned char **out, size_t *len)
{
  struct wbuf w = { .cap = 64 };
  w.p = tb_xmalloc(w.cap);
  memcpy(w.p, magic, sizeof magic);
  w.n = sizeof magic;
  put_u(&w, (uint64_t)(m->slice_us < 0 ? 0 : m->slice_us));
  put_u(&w, m->nslices);
  for (size_t i = 0; i < m->nslices; i++)
    put_u(&w, (uint64_t)(m->slices[i] < 0 ? 0 : m->slices[i]));
  for (int i = 0; i < NCOUNTERS; i++) {
    int64_t c = *counter((struct tb_samples *)m, i);
    put_u(&w, (uint64_t)(c < 0 ? 0 : c));
  }
  for (int k = 0; k < TB_SAMPLES_NSERIES; k++) {
    const struct tb_stats *s = &m->s[k];
    put_u(&w, s->n);
    int64_t prev = 0;
    for (size_t i = 0; i < s->n; i++) {
      /* values are >= 0 (tb_samples_add), so the delta cannot overflow */
      put_u(&w, zigzag(s->v[i] - prev));
      prev = s->v[i];
    }
  }
  *out = w.p;
  *len = w.n;
}

/* ----------------------------------------------------------------- decode */

struct rbuf {
  const unsigned char *p;
  size_t n, at;
  char *err;
  size_t errlen;
};

static bool
fail(struct rbuf *r, const char *what)
{
  snprintf(r->err, r->errlen, "shard samples: %s at byte %zu", what, r->at);
  return false;
}

static bool
get_u(struct rbuf *r, uint64_t *v)
{
  uint64_t x = 0;
  for (unsigned shift = 0; shift < 64; shift += 7) {
    if (r->at >= r->n)
      return fail(r, "truncated");
    unsigned char b = r->p[r->at++];
    if (shift == 63 && (b & 0x7e) != 0)
      return fail(r, "varint over 64 bits");
    x |= (uint64_t)(b & 0x7f) << shift;
    if (!(b & 0x80)) {
      *v = x;
      return true;
    }
  }
  return fail(r, "varint over 64 bits");
}

/* A count of items of at least one byte each: within cap and the bytes left. */
static bool
get_count(struct rbuf *r, size_t cap, size_t *n)
{
  uint64_t v;
  if (!get_u(r, &v))
    return false;
  if (v > cap)
    return fail(r, "count over its cap");
  if (v > r->n - r->at)
    return fail(r, "count beyond the bytes left");
  *n = (size_t)v;
  return true;
}

static bool
get_i64(struct rbuf *r, int64_t *v)
{
  uint64_t u;
  if (!get_u(r, &u))
    return false;
  if (u > (uint64_t)INT64_MAX)
    return fail(r, "value out of range");
  *v = (int64_t)u;
  return true;
}

static bool
get_series(struct rbuf *r, struct tb_stats *s)
{
  size_t n;
  if (!get_count(r, TB_SAMPLES_MAX_VALUES, &n))
    return false;
  s->v = n ? tb_xmalloc(n * sizeof *s->v) : NULL;
  s->cap = n;
  int64_t prev = 0;
  for (size_t i = 0; i < n; i++) {
    uint64_t z;
    if (!get_u(r, &z))
      return false;
    int64_t d = unzigzag(z);
    if ((d > 0 && prev > INT64_MAX - d) || prev + d < 0)
      return fail(r, "value out of range");
    prev += d;
    s->v[s->n++] = prev;
  }
  return true;
}

bool
tb_samples_decode(const unsigned char *buf, size_t len, struct tb_samples *m, char *err,
                  size_t errlen)
{
  tb_samples_init(m);
  struct rbuf r = { .p = buf, .n = len, .err = err, .errlen = errlen };
  if (len < sizeof magic || memcmp(buf, magic, sizeof magic) != 0)
    return fail(&r, "not a TBS1 document");
  r.at = sizeof magic;
  if (!get_i64(&r, &m->slice_us) || !get_count(&r, TB_SAMPLES_MAX_SLICES, &m->nslices))
    return false;
  if (m->nslices > 0) {
    if (m->slice_us <= 0)
      return fail(&r, "slices of no width");
    m->slices = tb_xmalloc(m->nslices * sizeof *m->slices);
  }
  for (size_t i = 0; i < m->nslices; i++)
    if (!get_i64(&r, &m->slices[i]))
      return false;
  for (int i = 0; i < NCOUNTERS; i++)
    if (!get_i64(&r, counter(m, i)))
      return false;
  for (int k = 0; k < TB_SAMPLES_NSERIES; k++)
    if (!get_series(&r, &m->s[k]))
      return false;
  if (r.at != r.n)
    return fail(&r, "trailing bytes");
  return true;
}

/* ------------------------------------------------------------------ merge */

bool
tb_samples_merge(struct tb_samples *into, const struct tb_samples *from, char *err, size_t errlen)
{
  if (into->nslices == 0 && from->nslices > 0) {
    into->slices = tb_xcalloc(from->nslices, sizeof *into->slices);
    into->nslices = from->nslices;
    into->slice_us = from->slice_us;
  } else if (from->nslices != into->nslices || from->slice_us != into->slice_us) {
    snprintf(err, errlen,
             "shards on different timelines: %zu slices of %lld us beside %zu of %lld us",
             from->nslices, (long long)from->slice_us, into->nslices, (long long)into->slice_us);
    return false;
  }
  for (size_t i = 0; i < from->nslices; i++)
    into->slices[i] += from->slices[i];
  for (int i = 0; i < NCOUNTERS; i++)
    *counter(into, i) += *counter((struct tb_samples *)from, i);
  for (int k = 0; k < TB_SAMPLES_NSERIES; k++)
    for (size_t i = 0; i < from->s[k].n; i++)
      tb_stats_add(&into->s[k], from->s[k].v[i]);
  return true;
}

double
tb_samples_quantile(struct tb_samples *m, enum tb_samples_series k, double q)
{
  if ((unsigned)k >= TB_SAMPLES_NSERIES)
    return NAN;
  return tb_stats_quantile(&m->s[k], q);
}

/* ------------------------------------------------------------------- cell */

/* a series of us as ns, for tb_result's writers */
static void
to_ns(const struct tb_stats *us, struct tb_stats *ns)
{
  memset(ns, 0, sizeof *ns);
  for (size_t i = 0; i < us->n; i++)
    tb_stats_add(ns, us->v[i] > INT64_MAX / 1000 ? INT64_MAX : us->v[i] * 1000);
}

static json_t *
pct_ms_us(struct tb_samples *m, enum tb_samples_series k)
{
  double p[3] = { 0.5, 0.9, 0.99 };
  json_t *o = json_object();
  const char *name[3] = { "p50", "p90", "p99" };
  for (int i = 0; i < 3; i++) {
    double v = tb_samples_quantile(m, k, p[i]) / 1e3;
    json_object_set_new(o, name[i], isfinite(v) ? json_real(v) : json_null());
  }
  return o;
}

bool
tb_samples_cell(json_t *cell, struct tb_samples *m, const char *client_ready, char *err,
                size_t errlen)
{
  if (m->nslices == 0 || m->slice_us <= 0) {
    snprintf(err, errlen, "merged cell: no window (no shard gave its slices)");
    return false;
  }
  double slice_s = (double)m->slice_us / 1e6;
  double *tps = tb_xmalloc(m->nslices * sizeof *tps);
  for (size_t i = 0; i < m->nslices; i++)
    tps[i] = (double)m->slices[i] / slice_s;
  struct tb_stats ttft, tbt;
  to_ns(&m->s[TB_SAMPLES_TTFT], &ttft);
  to_ns(&m->s[TB_SAMPLES_TPOT], &tbt);
  struct tb_result_decode d = {
    .conc = m->streams > 0 ? m->streams : 1,
    .measured_s = slice_s * (double)m->nslices,
    .output_tokens = m->tokens,
    .ttft = &ttft,
    .tbt = &tbt,
    .avg_active = (double)m->active_milli / 1000.0,
    .avg_active_server = false,
    .completed = (unsigned)m->completed,
    .started = (unsigned)m->started,
    .chunk_source = m->chunked > 0,
    .kernel_stamped = m->reads > 0 ? (double)m->stamped_reads / (double)m->reads : 1.0,
    .slices = tps,
    .n_slices = m->nslices,
    .slice_s = slice_s,
    .resolution_tokens = m->resolution,
    .client_ready = client_ready,
  };
  tb_result_cell_set_decode(cell, &d);
  json_object_set_new(cell, "e2e_ms", pct_ms_us(m, TB_SAMPLES_E2E));
  json_object_set_new(cell, "itl_ms", pct_ms_us(m, TB_SAMPLES_GAP));
  tb_stats_free(&ttft);
  tb_stats_free(&tbt);
  free(tps);
  return true;
}

/* --------------------------------------------------------------- shards */

bool
tb_samples_cell_shards(json_t *cell, const struct tb_samples_shard *sh, size_t n, double window_s)
{
  if (n == 0)
    return true;
  struct tb_stats skew = { 0 };
  int64_t umax = 0;
  json_t *where = json_array();
  for (size_t i = 0; i < n; i++) {
    int64_t a = sh[i].skew_us < 0 ? -sh[i].skew_us : sh[i].skew_us;
    tb_stats_add(&skew, a);
    if (sh[i].uncert_us > umax)
      umax = sh[i].uncert_us;
    json_array_append_new(where, json_pack("{s:s?, s:s?, s:f, s:f}", "worker", sh[i].worker, "host",
                                           sh[i].host, "skew_ms", (double)sh[i].skew_us / 1e3,
                                           "clock_uncertainty_ms", (double)sh[i].uncert_us / 1e3));
  }
  double p50 = tb_stats_quantile(&skew, 0.5), max = tb_stats_quantile(&skew, 1.0);
  int64_t limit = tb_clock_skew_limit_us(window_s);
  json_t *o = json_object();
  json_object_set_new(o, "count", json_integer((json_int_t)n));
  json_object_set_new(o, "skew_p50_ms", json_real(p50 / 1e3));
  json_object_set_new(o, "skew_max_ms", json_real(max / 1e3));
  json_object_set_new(o, "clock_uncertainty_max_ms", json_real((double)umax / 1e3));
  json_object_set_new(o, "skew_limit_ms", json_real((double)limit / 1e3));
  json_object_set_new(o, "where", where);
  json_object_set_new(cell, "shards", o);
  tb_stats_free(&skew);
  if (max <= (double)limit)
    return true;
  char why[200];
  snprintf(why, sizeof why,
           "shards' start skew %.3f ms above the limit %.3f ms (max(2 ms, 1%% of the window))",
           max / 1e3, (double)limit / 1e3);
  tb_result_cell_set_status(cell, "error", why);
  return false;
}
