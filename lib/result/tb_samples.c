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
static const unsigned char magic2[4] = { 'T', 'B', 'S', '2' }; /* with server timings */
/* |v| of a server timing's value: exact in a double */
#define SRV_MAX (1LL << 53)

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

/* a rate cell's counters, in their order on the wire; the last two merge
 * as their maximum */
#define NRCOUNTERS 14
#define NRMAX 2

static int64_t *
rcounter(struct tb_samples *m, int i)
{
  struct tb_samples_rate *r = &m->rate;
  int64_t *c[NRCOUNTERS] = {
    &r->scheduled,    &r->errors,         &r->dropped,           &r->pr_sum,
    &r->pr_n,         &r->cached_sum,     &r->cached_prompt_sum, &r->cached_n,
    &r->conv_started, &r->conv_completed, &r->conv_abandoned,    &r->conv_dropped,
    &r->arrivals_us,  &r->last_end_us
  };
  return c[i];
}

/* a turn's counters, in their order on the wire */
#define NTCOUNTERS 6

static int64_t *
tcounter(struct tb_samples_turn *t, int i)
{
  int64_t *c[NTCOUNTERS] = { &t->sent, &t->ok,         &t->pr_sum,
                             &t->pr_n, &t->cached_sum, &t->cached_prompt_sum };
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
  for (int k = 0; k < TB_SAMPLES_NRSERIES; k++)
    tb_stats_free(&m->rate.s[k]);
  for (size_t t = 0; t < m->rate.nturns; t++)
    tb_stats_free(&m->rate.turns[t].ttft);
  free(m->rate.turns);
  free(m->slices);
  tb_srvtime_free(&m->srv);
  memset(m, 0, sizeof *m);
}

void
tb_samples_add(struct tb_samples *m, enum tb_samples_series k, int64_t us)
{
  if ((unsigned)k >= TB_SAMPLES_NSERIES)
    return;
  tb_stats_add(&m->s[k], us < 0 ? 0 : us);
}

void
tb_samples_radd(struct tb_samples *m, enum tb_samples_rseries k, int64_t us)
{
  if ((unsigned)k >= TB_SAMPLES_NRSERIES)
    return;
  m->rate.on = true;
  tb_stats_add(&m->rate.s[k], us < 0 ? 0 : us);
}

struct tb_samples_turn *
tb_samples_turn(struct tb_samples *m, size_t t)
{
  if (t >= TB_SAMPLES_MAX_TURNS)
    return NULL;
  m->rate.on = true;
  if (t >= m->rate.nturns) {
    m->rate.turns = tb_xrealloc(m->rate.turns, (t + 1) * sizeof *m->rate.turns);
    memset(m->rate.turns + m->rate.nturns, 0, (t + 1 - m->rate.nturns) * sizeof *m->rate.turns);
    m->rate.nturns = t + 1;
  }
  return &m->rate.turns[t];
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

static void
put_series(struct wbuf *w, const struct tb_stats *s)
{
  put_u(w, s->n);
  int64_t prev = 0;
  for (size_t i = 0; i < s->n; i++) {
    /* values are >= 0 (tb_samples_add), so the delta cannot overflow */
    put_u(w, zigzag(s->v[i] - prev));
    prev = s->v[i];
  }
}

static void
put_rate(struct wbuf *w, const struct tb_samples *m)
{
  put_u(w, NRCOUNTERS);
  for (int i = 0; i < NRCOUNTERS; i++) {
    int64_t c = *rcounter((struct tb_samples *)m, i);
    put_u(w, (uint64_t)(c < 0 ? 0 : c));
  }
  for (int k = 0; k < TB_SAMPLES_NRSERIES; k++)
    put_series(w, &m->rate.s[k]);
  put_u(w, m->rate.nturns);
  for (size_t t = 0; t < m->rate.nturns; t++) {
    struct tb_samples_turn *tn = &m->rate.turns[t];
    for (int i = 0; i < NTCOUNTERS; i++) {
      int64_t c = *tcounter(tn, i);
      put_u(w, (uint64_t)(c < 0 ? 0 : c));
    }
    put_series(w, &tn->ttft);
  }
  size_t el = strnlen(m->rate.first_error, TB_SAMPLES_MAX_ERROR);
  put_u(w, el);
  for (size_t i = 0; i < el; i++)
    put_u(w, (unsigned char)m->rate.first_error[i]);
}

/* A server timings series: count, then each value zig-zagged. */
static void
put_sseries(struct wbuf *w, const struct tb_stats *s)
{
  put_u(w, s->n);
  for (size_t i = 0; i < s->n; i++)
    put_u(w, zigzag(s->v[i] < -SRV_MAX ? -SRV_MAX : s->v[i] > SRV_MAX ? SRV_MAX : s->v[i]));
}

/* TBS2's section: the shard's server timings. */
static void
put_srv(struct wbuf *w, const struct tb_srvtime *t)
{
  put_u(w, 1); /* TB_SRVTIME_LLAMACPP, the one source */
  put_u(w, t->requests);
  put_u(w, t->tokens_equal);
  put_u(w, t->cache_n > 0 ? (uint64_t)llround(t->cache_n) : 0);
  put_u(w, t->prompt_n > 0 ? (uint64_t)llround(t->prompt_n) : 0);
  const struct tb_stats *ser[] = { &t->prompt_us, &t->prompt_mtps, &t->tpot_us, &t->predicted,
                                   &t->gap_us,    &t->span_us,     &t->diff_ppm };
  for (size_t i = 0; i < TB_ARRAY_LEN(ser); i++)
    put_sseries(w, ser[i]);
}

void
tb_samples_encode(const struct tb_samples *m, unsigned char **out, size_t *len)
{
  struct wbuf w = { .cap = 64 };
  w.p = tb_xmalloc(w.cap);
  bool srv = m->srv.requests > 0;
  memcpy(w.p, srv ? magic2 : magic, sizeof magic);
  w.n = sizeof magic;
  if (srv)
    put_srv(&w, &m->srv);
  put_u(&w, (uint64_t)(m->slice_us < 0 ? 0 : m->slice_us));
  put_u(&w, m->nslices);
  for (size_t i = 0; i < m->nslices; i++)
    put_u(&w, (uint64_t)(m->slices[i] < 0 ? 0 : m->slices[i]));
  for (int i = 0; i < NCOUNTERS; i++) {
    int64_t c = *counter((struct tb_samples *)m, i);
    put_u(&w, (uint64_t)(c < 0 ? 0 : c));
  }
  for (int k = 0; k < TB_SAMPLES_NSERIES; k++)
    put_series(&w, &m->s[k]);
  if (m->rate.on)
    put_rate(&w, m);
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

/* A rate cell's section, after the decode document. */
static bool
get_rate(struct rbuf *r, struct tb_samples *m)
{
  uint64_t nc;
  if (!get_u(r, &nc))
    return false;
  if (nc != NRCOUNTERS)
    return fail(r, "trailing bytes (not a rate cell's section)");
  m->rate.on = true;
  for (int i = 0; i < NRCOUNTERS; i++)
    if (!get_i64(r, rcounter(m, i)))
      return false;
  for (int k = 0; k < TB_SAMPLES_NRSERIES; k++)
    if (!get_series(r, &m->rate.s[k]))
      return false;
  size_t nt;
  if (!get_count(r, TB_SAMPLES_MAX_TURNS, &nt))
    return false;
  if (nt > 0)
    (void)tb_samples_turn(m, nt - 1);
  for (size_t t = 0; t < nt; t++) {
    for (int i = 0; i < NTCOUNTERS; i++)
      if (!get_i64(r, tcounter(&m->rate.turns[t], i)))
        return false;
    if (!get_series(r, &m->rate.turns[t].ttft))
      return false;
  }
  size_t el;
  if (!get_count(r, TB_SAMPLES_MAX_ERROR, &el))
    return false;
  for (size_t i = 0; i < el; i++) {
    uint64_t c;
    if (!get_u(r, &c))
      return false;
    if (c == 0 || c > 255)
      return fail(r, "a byte of the first error out of range");
    m->rate.first_error[i] = (char)c;
  }
  m->rate.first_error[el] = '\0';
  return true;
}

/* A server timings series (put_sseries). */
static bool
get_sseries(struct rbuf *r, struct tb_stats *s)
{
  size_t n;
  if (!get_count(r, TB_SAMPLES_MAX_VALUES, &n))
    return false;
  s->v = n ? tb_xmalloc(n * sizeof *s->v) : NULL;
  s->cap = n;
  for (size_t i = 0; i < n; i++) {
    uint64_t z;
    if (!get_u(r, &z))
      return false;
    int64_t v = unzigzag(z);
    if (v > SRV_MAX || v < -SRV_MAX)
      return fail(r, "server timing out of range");
    s->v[s->n++] = v;
  }
  return true;
}

/* TBS2's section (put_srv). */
static bool
get_srv(struct rbuf *r, struct tb_srvtime *t)
{
  uint64_t src, req, eq, cache, prompt;
  if (!get_u(r, &src) || !get_u(r, &req) || !get_u(r, &eq) || !get_u(r, &cache) ||
      !get_u(r, &prompt))
    return false;
  if (src != 1)
    return fail(r, "unknown server timings source");
  if (req == 0 || req > TB_SAMPLES_MAX_VALUES || eq > req || cache > (uint64_t)SRV_MAX ||
      prompt > (uint64_t)SRV_MAX)
    return fail(r, "server timings' counts out of range");
  t->source = TB_SRVTIME_LLAMACPP;
  t->requests = (unsigned)req;
  t->tokens_equal = (unsigned)eq;
  t->cache_n = (double)cache;
  t->prompt_n = (double)prompt;
  struct tb_stats *ser[] = { &t->prompt_us, &t->prompt_mtps, &t->tpot_us, &t->predicted,
                             &t->gap_us,    &t->span_us,     &t->diff_ppm };
  for (size_t i = 0; i < TB_ARRAY_LEN(ser); i++)
    if (!get_sseries(r, ser[i]))
      return false;
  return true;
}

bool
tb_samples_decode(const unsigned char *buf, size_t len, struct tb_samples *m, char *err,
                  size_t errlen)
{
  tb_samples_init(m);
  struct rbuf r = { .p = buf, .n = len, .err = err, .errlen = errlen };
  bool v2 = len >= sizeof magic2 && memcmp(buf, magic2, sizeof magic2) == 0;
  if (!v2 && (len < sizeof magic || memcmp(buf, magic, sizeof magic) != 0))
    return fail(&r, "not a TBS1 or TBS2 document");
  r.at = sizeof magic;
  if (v2 && !get_srv(&r, &m->srv))
    return false;
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
  if (r.at < r.n && !get_rate(&r, m))
    return false;
  if (r.at != r.n)
    return fail(&r, "trailing bytes");
  return true;
}

/* ------------------------------------------------------------------ merge */

static void
append(struct tb_stats *into, const struct tb_stats *from)
{
  for (size_t i = 0; i < from->n; i++)
    tb_stats_add(into, from->v[i]);
}

/* A rate cell's part of tb_samples_merge. */
static void
merge_rate(struct tb_samples *into, const struct tb_samples *from)
{
  into->rate.on = true;
  for (int i = 0; i < NRCOUNTERS; i++) {
    int64_t *a = rcounter(into, i), b = *rcounter((struct tb_samples *)from, i);
    if (i >= NRCOUNTERS - NRMAX)
      *a = b > *a ? b : *a;
    else
      *a += b;
  }
  for (int k = 0; k < TB_SAMPLES_NRSERIES; k++)
    append(&into->rate.s[k], &from->rate.s[k]);
  if (into->rate.first_error[0] == '\0')
    memcpy(into->rate.first_error, from->rate.first_error, sizeof into->rate.first_error);
  for (size_t t = 0; t < from->rate.nturns; t++) {
    struct tb_samples_turn *a = tb_samples_turn(into, t), *b = &from->rate.turns[t];
    for (int i = 0; i < NTCOUNTERS; i++)
      *tcounter(a, i) += *tcounter(b, i);
    append(&a->ttft, &b->ttft);
  }
}

bool
tb_samples_merge(struct tb_samples *into, const struct tb_samples *from, char *err, size_t errlen)
{
  if ((into->rate.on || into->nslices > 0) && into->rate.on != from->rate.on) {
    snprintf(err, errlen, "a %s cell's shard beside a %s cell's", from->rate.on ? "rate" : "decode",
             into->rate.on ? "rate" : "decode");
    return false;
  }
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
    append(&into->s[k], &from->s[k]);
  if (from->rate.on)
    merge_rate(into, from);
  tb_srvtime_merge(&into->srv, &from->srv);
  return true;
}

void
tb_samples_start_gaps(struct tb_samples *m, double *sum, double *sum2, uint64_t *n)
{
  struct tb_stats *st = &m->rate.s[TB_SAMPLES_START];
  (void)tb_stats_quantile(st, 0.5); /* sorts */
  *sum = *sum2 = 0;
  *n = 0;
  for (size_t i = 1; i < st->n; i++) {
    double g = (double)(st->v[i] - st->v[i - 1]) * 1e3;
    *sum += g;
    *sum2 += g * g;
    (*n)++;
  }
}

static int
cmp_ev(const void *a, const void *b)
{
  const int64_t *x = a, *y = b;
  return *x < *y ? -1 : *x > *y ? 1 : 0;
}

void
tb_samples_in_flight(const struct tb_samples *m, unsigned *max, double *area_ns)
{
  const struct tb_stats *st = &m->rate.s[TB_SAMPLES_START], *en = &m->rate.s[TB_SAMPLES_END];
  size_t n = st->n < en->n ? st->n : en->n;
  *max = 0;
  *area_ns = 0;
  if (n == 0)
    return;
  /* events: a start is 2t + 1, an end 2t, so an end and a start at one
   * instant count the end first (as one process ends, then starts) */
  int64_t *ev = tb_xmalloc(2 * n * sizeof *ev);
  for (size_t i = 0; i < n; i++) {
    ev[2 * i] = st->v[i] * 2 + 1;
    ev[2 * i + 1] = (en->v[i] > st->v[i] ? en->v[i] : st->v[i]) * 2;
  }
  qsort(ev, 2 * n, sizeof *ev, cmp_ev);
  long cur = 0;
  for (size_t i = 0; i < 2 * n; i++) {
    if (i > 0)
      *area_ns += (double)cur * (double)(ev[i] / 2 - ev[i - 1] / 2) * 1e3;
    cur += (ev[i] & 1) ? 1 : -1;
    if (cur > (long)*max)
      *max = (unsigned)cur;
  }
  free(ev);
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
  json_t *st = tb_srvtime_json(&m->srv); /* the shards' requests together */
  if (st != NULL)
    json_object_set_new(cell, "server_timings", st);
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
    json_t *w =
      json_pack("{s:s?, s:s?, s:f, s:f}", "worker", sh[i].worker, "host", sh[i].host, "skew_ms",
                (double)sh[i].skew_us / 1e3, "clock_uncertainty_ms", (double)sh[i].uncert_us / 1e3);
    if (sh[i].has_clock_offset)
      json_object_set_new(w, "clock_offset_ms", json_real((double)sh[i].clock_offset_us / 1e3));
    json_array_append_new(where, w);
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
