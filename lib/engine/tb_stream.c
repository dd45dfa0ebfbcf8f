/*
 * tb_stream: one consumer of a streamed completion.  See tb_stream.h.
 *
 * The hot path is tb_stream_body -> tb_sse_feed -> on_event ->
 * tb_oai_count_event -> count: per event, one chunk scan and a few stores;
 * the owner's callbacks are the only calls out.  Every event of one read
 * carries that read's stamp, so parsing one event never delays the next
 * one's arrival time.
 */
#include "engine/tb_stream.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#define NS_PER_S 1000000000LL
/* The rate cells' reasons were always cut here. */
#define RATE_REASON_MAX 160

/* ---------------------------------------------------------------- events */

/* delta > 0 tokens at s->now: the first token, the gaps, the window. */
static void
count(struct tb_stream *s, int64_t delta)
{
  const struct tb_stream_cell *c = s->cell;
  int64_t now = s->now;
  unsigned flags = 0;
  if (s->t_first == 0) {
    s->t_first = now;
    flags |= TB_STREAM_FIRST;
  } else {
    int64_t gap = now - s->t_last;
    if (c->gaps != NULL)
      tb_stats_add(c->gaps, gap / delta);
    if (gap > s->max_gap)
      s->max_gap = gap;
  }
  s->t_last = now;
  s->tokens += delta;
  if (now >= c->w0 && now < c->w1) {
    if (s->w_first_t == 0) {
      s->w_first_t = now;
      s->w_first_tokens = delta;
    }
    s->w_last_t = now;
    s->w_tokens += delta;
    flags |= TB_STREAM_IN_WINDOW;
  }
  if (c->ops->tokens != NULL)
    c->ops->tokens(s->cls, s, delta, flags);
}

static bool
on_event(void *cls, const char *data, size_t len)
{
  struct tb_stream *s = cls;
  int64_t delta;
  char why[200];
  if (!tb_oai_count_event(&s->count, data, len, &delta, why, sizeof why)) {
    tb_stream_fail(s, "%s", why);
    return false;
  }
  if (s->count.done)
    return true; /* [DONE] */
  const struct tb_stream_ops *o = s->cell->ops;
  if (o->event != NULL && !o->event(s->cls, s, data, len, delta))
    return false;
  if (delta > 0)
    count(s, delta);
  return true;
}

static void
on_comment(void *cls, const char *text, size_t len)
{
  struct tb_stream *s = cls;
  s->cell->ops->comment(s->cls, s, text, len);
}

/* ---------------------------------------------------------------- a stream */

void
tb_stream_init(struct tb_stream *s, struct tb_stream_cell *cell, void *cls, int64_t t_start)
{
  memset(s, 0, sizeof *s);
  s->cell = cell;
  s->cls = cls;
  s->t_start = t_start;
  s->count.prompt_tokens = -1;
  tb_sse_init(&s->sse, on_event, cell->ops->comment != NULL ? on_comment : NULL, s);
  tb_sse_set_budget(&s->sse, &cell->mem);
}

void
tb_stream_free(struct tb_stream *s)
{
  tb_sse_free(&s->sse);
}

void
tb_stream_fail(struct tb_stream *s, const char *fmt, ...)
{
  if (s->failed)
    return;
  size_t cap = s->cell->kind == TB_STREAM_RATE ? RATE_REASON_MAX : sizeof s->reason;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(s->reason, cap, fmt, ap);
  va_end(ap);
  s->failed = true;
}

bool
tb_stream_body(struct tb_stream *s, long status, int64_t stamp, const char *data, size_t n)
{
  if (!s->http_checked) {
    s->http_checked = true;
    s->http_status = status;
  }
  s->now = stamp;
  s->t_byte = stamp;
  if (s->http_status != 200) {
    size_t room = sizeof s->errbody - 1 - s->errlen;
    size_t k = n < room ? n : room;
    memcpy(s->errbody + s->errlen, data, k);
    s->errlen += k;
    s->errbody[s->errlen] = '\0';
    return true;
  }
  enum tb_sse_status st = tb_sse_feed(&s->sse, data, n);
  if (st == TB_SSE_TOO_LONG) {
    tb_stream_fail(s, "SSE line or event over its cap");
  } else if (st == TB_SSE_OVER_BUDGET) {
    size_t kib = s->cell->mem.max / 1024;
    if (s->cell->kind == TB_STREAM_RATE)
      tb_stream_fail(s, "the cell's SSE buffers went over its memory budget of %zu KiB", kib);
    else
      tb_stream_fail(s,
                     "the endpoint's SSE lines and events (all streams of the cell) went "
                     "over the cell's memory budget of %zu KiB",
                     kib);
  }
  return st == TB_SSE_OK;
}

bool
tb_stream_overdue(const struct tb_stream *s, int64_t now, double first_token_s, double stall_s,
                  char *why, size_t why_len)
{
  if (s->t_first == 0) {
    if (now - s->t_start <= (int64_t)(first_token_s * NS_PER_S))
      return false;
    snprintf(why, why_len, "no first token after %.1f s", first_token_s);
    return true;
  }
  if (now - s->t_byte <= (int64_t)(stall_s * NS_PER_S))
    return false;
  snprintf(why, why_len, "stream stalled: no %s for %.1f s",
           s->cell->kind == TB_STREAM_RATE ? "token" : "data", stall_s);
  return true;
}

int64_t
tb_stream_got(const struct tb_stream *s)
{
  return s->count.cum > s->tokens ? s->count.cum : s->tokens;
}

/* A stream the server ended ([DONE]) before max_tokens: it ignores
 * max_tokens or ignore_eos.  With no usage, its chunks are counted: fewer
 * than max_tokens / TB_STREAM_EARLY_CHUNK_DIV only. */
static bool
ended_early(struct tb_stream *s, int64_t max_tokens)
{
  int64_t got = tb_stream_got(s);
  bool chunks = s->count.chunk_mode && !s->count.saw_usage;
  bool early = chunks ? got * TB_STREAM_EARLY_CHUNK_DIV < max_tokens : got < max_tokens;
  if (early)
    tb_stream_fail(s,
                   "the server ended a stream early: asked %" PRId64 " tokens, got %" PRId64
                   "%s (it ignores max_tokens or ignore_eos)",
                   max_tokens, got, chunks ? " chunks" : "");
  return early;
}

/* The first rule of a clean end that s breaks (failing it), or NONE. */
static enum tb_stream_end_rule
end_rule(struct tb_stream *s, const char *transport_err, const struct tb_stream_expect *x)
{
  if (transport_err != NULL) {
    tb_stream_fail(s, "%s", transport_err);
    return TB_STREAM_END_TRANSPORT;
  }
  if (s->http_status != 200) {
    bool rate = s->cell->kind == TB_STREAM_RATE;
    if (s->cell->error_bodies)
      tb_stream_fail(s, "HTTP %ld: %.*s", s->http_status, rate ? 120 : 200, s->errbody);
    else
      tb_stream_fail(s, "HTTP %ld", s->http_status);
    return TB_STREAM_END_HTTP;
  }
  if (!tb_sse_idle(&s->sse)) {
    tb_stream_fail(s, "stream ended inside an SSE event");
    return TB_STREAM_END_SSE;
  }
  if (!s->count.done) {
    tb_stream_fail(s, "stream ended before [DONE] (cut)");
    return TB_STREAM_END_CUT;
  }
  if (x->usage && !s->count.saw_final_usage) {
    tb_stream_fail(s, "stream ended without its usage chunk");
    return TB_STREAM_END_USAGE;
  }
  if (x->max_tokens > 0 && ended_early(s, x->max_tokens))
    return TB_STREAM_END_EARLY;
  if (x->token && s->t_first == 0) {
    tb_stream_fail(s, "no output token");
    return TB_STREAM_END_NO_TOKEN;
  }
  return TB_STREAM_END_NONE;
}

bool
tb_stream_end(struct tb_stream *s, long status, const char *transport_err,
              const struct tb_stream_expect *x)
{
  s->end_rule = TB_STREAM_END_NONE;
  if (s->failed)
    return false;
  if (!s->http_checked)
    s->http_status = status;
  s->end_rule = end_rule(s, transport_err, x);
  return !s->failed;
}

/* ---------------------------------------------------------------- samples */

bool
tb_stream_window_tbt(const struct tb_stream *s, int64_t *tbt)
{
  int64_t after_first = s->w_tokens - s->w_first_tokens;
  if (after_first < 1 || s->w_last_t <= s->w_first_t)
    return false;
  *tbt = (s->w_last_t - s->w_first_t) / after_first;
  return true;
}

void
tb_stream_figures(const struct tb_stream *s, int64_t sent_at, int64_t now,
                  struct tb_stream_figures *f)
{
  f->ttft = s->t_first - sent_at;
  f->end = s->t_byte != 0 ? s->t_byte : now;
  f->e2e = f->end - s->t_start;
  f->have_tpot = s->tokens > 1 && s->t_last > s->t_first;
  f->tpot = f->have_tpot ? (s->t_last - s->t_first) / (s->tokens - 1) : 0;
}

/* ---------------------------------------------------------------- drained */

int
tb_stream_drained(const struct tb_discover *d, const char *api_key, double *running,
                  double *waiting)
{
  double r, w;
  if (!d->has_metrics || tb_discover_load(d, api_key, &r, &w) != 0)
    return -1;
  *running = r;
  *waiting = w;
  return r < 0.5 && w < 0.5;
}

int
tb_stream_drain_wait(const struct tb_discover *d, const char *api_key, double drain_s,
                     bool (*cancelled)(void *cls), void *cls)
{
  if (!d->has_metrics)
    return -1;
  int64_t end = tb_time_mono_ns() + (int64_t)(drain_s * NS_PER_S);
  while (tb_time_mono_ns() < end) {
    double running, waiting;
    int drained = tb_stream_drained(d, api_key, &running, &waiting);
    if (drained != 0)
      return drained; /* drained, or metrics gone (server down?) */
    if (cancelled != NULL && cancelled(cls))
      return -1;
    struct timespec ts = { 0, TB_STREAM_DRAIN_POLL_NS };
    nanosleep(&ts, NULL);
  }
  return 0;
}
