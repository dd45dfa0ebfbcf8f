/*
 * tb_rate: rate cells and sweeps.  See tb_rate.h.
 *
 * Design.  A cell is one loop on an epoll set of its own: a timerfd armed
 * at the next scheduled arrival (absolute CLOCK_MONOTONIC, so a late wake-up
 * never shifts the schedule that follows) and the connections of a
 * tb_direct_set of TB_RATE_MAX_INFLIGHT slots.  Free slots are a stack, so
 * the connection that just finished a request (kept alive) takes the next
 * one.  Each turn launches every arrival that is due, in order, stamping
 * its actual start; the schedule itself comes from tb_arrival alone, never
 * from what the server answered (no coordinated omission).
 *
 * Prompts.  Each request's prompt is the pool's prompt of its length
 * (sized once on the server's tokenizer, tb_prompt) whose tag carries a
 * marker, "RQ" and eight hex digits, replaced in a copy of the request body
 * by the request's own number: every prompt differs from the first bytes
 * on, so no request finds another's prefix in the server's cache (with a
 * shared prefix, the system prompt before it is the same for all, and the
 * marker carries k mod prefix.suffixes).  The
 * body's max_tokens is rendered space-padded to a fixed width so that each
 * request's own output length is patched in place, and one request head
 * (Content-Length) serves every body of a pool entry.
 *
 * Timing.  A request's figures are taken from the kernel's receive stamps
 * of its reads: TTFT = first output token - actual start; TPOT = (last
 * token - first token) / (tokens - 1); TBT = each gap between two token
 * chunks (per token when a chunk carries several); e2e = last byte -
 * actual start.  Lag = actual start - scheduled start.
 */
#include "tb_rate.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/timerfd.h>
#include <time.h>
#include <unistd.h>

#include "tb_arrival.h"
#include "tb_direct.h"
#include "tb_http.h"
#include "tb_oai.h"
#include "tb_prompt.h"
#include "tb_ratewatch.h"
#include "tb_result.h"
#include "tb_rxts.h"
#include "tb_sse.h"
#include "tb_stats.h"

#define NS_PER_S 1000000000LL
#define TIMER_TAG 1ULL
#define SCAN_NS 10000000LL    /* per-request timeout checks */
#define CANCEL_NS 100000000LL /* cancelled() polls */
#define LEAD_NS 20000000LL    /* the first arrival: this long after set-up */
#define MARKER "RQ00000000"
#define MARKER_DIGITS 8
#define MAXTOK_WIDTH 8        /* max_tokens rendered in 8 columns */
#define MAXTOK_PLACEHOLDER 99999999
#define ERRBODY_MAX 200

/* ------------------------------------------------------------- settings */

bool
tb_rate_wanted(const struct tb_spec *s)
{
  return s->rates.n > 0 || s->sweep.attainment_pct > 0;
}

bool
tb_rate_only(const struct tb_spec *s)
{
  return tb_rate_wanted(s) && !s->contexts.given && !s->concurrency.given &&
         !s->prefill_contexts.given;
}

/* How long one cell's arrivals last at rate. */
static double
cell_seconds(const struct tb_spec *s, double rate)
{
  return s->rate_requests > 0 ? (double)s->rate_requests / rate : s->rate_duration_s;
}

double
tb_rate_seconds(const struct tb_spec *s)
{
  double secs = 0;
  for (size_t i = 0; i < s->rates.n; i++)
    secs += cell_seconds(s, s->rates.v[i]);
  if (s->sweep.attainment_pct > 0)
    secs += (double)s->sweep.max_probes * cell_seconds(s, s->sweep.min_rps);
  return secs;
}

unsigned
tb_rate_planned(const struct tb_spec *s)
{
  return (unsigned)s->rates.n + (s->sweep.attainment_pct > 0 ? (unsigned)s->sweep.max_probes : 0);
}

static json_t *
slo_json(const struct tb_spec_slo *slo)
{
  json_t *o = json_object();
  if (slo->ttft_ms > 0)
    json_object_set_new(o, "ttft_ms", json_real(slo->ttft_ms));
  if (slo->tpot_ms > 0)
    json_object_set_new(o, "tpot_ms", json_real(slo->tpot_ms));
  if (slo->tbt_ms > 0)
    json_object_set_new(o, "tbt_ms", json_real(slo->tbt_ms));
  if (slo->e2e_ms > 0)
    json_object_set_new(o, "e2e_ms", json_real(slo->e2e_ms));
  return o;
}

json_t *
tb_rate_settings_json(const struct tb_spec *s)
{
  json_t *rates = json_array();
  for (size_t i = 0; i < s->rates.n; i++)
    json_array_append_new(rates, json_real(s->rates.v[i]));
  json_t *o = json_pack("{s:o, s:f, s:o, s:s, s:I, s:s, s:s, s:o}", "rates", rates,
                        "duration_s", s->rate_duration_s, "requests",
                        s->rate_requests > 0 ? json_integer(s->rate_requests) : json_null(),
                        "arrival", s->arrival, "seed",
                        (json_int_t)s->seed, "input_tokens", s->input_tokens,
                        "output_tokens", s->output_tokens, "slo", slo_json(&s->slo));
  /* the workload: cold prompts, or a shared system prompt (seeded like the
   * rest, so a run can be repeated exactly) */
  json_object_set_new(o, "workload",
                      s->prefix.tokens > 0
                          ? json_pack("{s:s, s:I, s:I}", "kind", "shared_prefix",
                                      "prefix_tokens", (json_int_t)s->prefix.tokens, "suffixes",
                                      (json_int_t)s->prefix.suffixes)
                          : json_pack("{s:s}", "kind", "cold"));
  return o;
}

/* ------------------------------------------------------------- the sweep */

double
tb_rate_sweep_next(const struct tb_spec_sweep *sw, const double *rates, const bool *pass,
                   size_t n, double *found, double *hi)
{
  double lo = 0;
  *found = 0;
  *hi = 0;
  for (size_t i = 0; i < n; i++)
    if (pass[i] && rates[i] > lo)
      lo = rates[i];
  for (size_t i = 0; i < n; i++)
    if (!pass[i] && rates[i] > lo && (*hi == 0 || rates[i] < *hi))
      *hi = rates[i];
  *found = lo;
  if (n == 0)
    return sw->min_rps;
  if (lo == 0 || n >= (size_t)sw->max_probes)
    return 0; /* the lowest rate fails already, or out of probes */
  if (*hi == 0) {
    if (lo >= sw->max_rps)
      return 0;
    return fmin(2 * lo, sw->max_rps);
  }
  if (*hi - lo <= sw->step_rps * (1 + 1e-9))
    return 0;
  double k = floor((*hi - lo) / (2 * sw->step_rps) + 0.5);
  if (k < 1)
    k = 1;
  double next = lo + k * sw->step_rps;
  if (next >= *hi)
    next = lo + sw->step_rps;
  return next;
}

/* ------------------------------------------------------------- structures */

struct rcell;

struct rq {
  struct rcell *c;
  unsigned slot;
  unsigned pool;
  uint64_t k;           /* its number in the cell's schedule */
  int64_t t_sched, t_start, t_first, t_prev, t_last, t_byte, now;
  struct tb_oai_count count;
  int64_t tokens, want;
  int64_t max_gap;
  int http_status;
  bool http_checked, failed;
  char reason[160];
  char errbody[ERRBODY_MAX];
  size_t errlen;
  struct tb_sse sse;
  char *body;
};

struct pool_entry {
  char *tmpl;          /* the request body, marker and max_tokens to patch */
  size_t len;
  size_t marker_at, maxtok_at;
  char *head;          /* holds the key */
  size_t head_len;
  int64_t tokens;      /* as the server counts the prompt (-1 unknown) */
};

struct rrun {
  const struct tb_spec *s;
  const struct tb_rate_env *env;
  struct tb_direct dt;
  bool direct;
  int epfd, tfd;
  char *auth;
  struct tb_length in, out;
  struct pool_entry pool[TB_RATE_INPUT_POOL];
  unsigned n_pool;
  double in_mean;
  char *sys;           /* the shared system prompt (spec prefix), or NULL */
  int64_t sys_tokens;  /* as the server counts it alone (-1 unknown) */
  char *setup_err;     /* every cell is an error with this */
  bool cancelled;
  unsigned index;      /* cells so far */
  int slack;           /* the thread's timer slack before (ns; 0: unchanged) */
};

struct rcell {
  struct rrun *r;
  double rate;
  unsigned index;
  struct tb_direct_set ds;
  struct rq **slots;
  unsigned *free_slots;
  unsigned n_free;
  unsigned inflight, max_inflight;
  struct tb_sse_budget mem;
  /* counts */
  uint64_t scheduled, started, ok, errors, dropped, good;
  int64_t out_tokens, prompt_tokens_sum;
  uint64_t prompt_n;
  /* the server's prefix cache, from usage.prompt_tokens_details */
  int64_t cached_sum, cached_prompt_sum;
  uint64_t cached_n;
  char first_error[200];
  /* times */
  int64_t t0, t_end_arrivals, t_last_end;
  struct tb_stats ttft, tpot, tbt, e2e, lag;
  /* actual inter-start gaps */
  int64_t prev_start;
  double gap_sum, gap_sum2;
  uint64_t gap_n;
  /* per-request samples, in order of start */
  json_t *s_lag, *s_ttft, *s_tpot, *s_e2e, *s_maxtbt, *s_tokens, *s_good;
  struct tb_ratewatch *watch; /* the server's view and the checks */
};

/* ---------------------------------------------------------- a request */

static void rq_fail(struct rq *q, const char *fmt, ...) TB_PRINTF(2, 3);

static void
rq_fail(struct rq *q, const char *fmt, ...)
{
  if (q->failed)
    return;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(q->reason, sizeof q->reason, fmt, ap);
  va_end(ap);
  q->failed = true;
}

static void
rq_tokens(struct rq *q, int64_t delta)
{
  struct rcell *c = q->c;
  if (q->t_first == 0) {
    q->t_first = q->now;
  } else {
    int64_t gap = (q->now - q->t_prev) / (delta > 0 ? delta : 1);
    tb_stats_add(&c->tbt, gap);
    if (q->now - q->t_prev > q->max_gap)
      q->max_gap = q->now - q->t_prev;
  }
  q->t_prev = q->t_last = q->now;
  q->tokens += delta;
}

static bool
rq_event(void *cls, const char *data, size_t len)
{
  struct rq *q = cls;
  int64_t delta;
  char why[200];
  if (!tb_oai_count_event(&q->count, data, len, &delta, why, sizeof why)) {
    rq_fail(q, "%s", why);
    return false;
  }
  if (q->count.done)
    return true; /* [DONE] */
  if (delta > 0)
    rq_tokens(q, delta);
  return true;
}

static bool
rq_body(void *cls, unsigned slot, int status, int64_t stamp, const char *data, size_t n)
{
  struct rcell *c = cls;
  struct rq *q = c->slots[slot];
  if (q == NULL)
    return false;
  if (!q->http_checked) {
    q->http_checked = true;
    q->http_status = status;
  }
  q->now = stamp;
  q->t_byte = stamp;
  if (status != 200) {
    size_t room = sizeof q->errbody - 1 - q->errlen;
    size_t k = n < room ? n : room;
    memcpy(q->errbody + q->errlen, data, k);
    q->errlen += k;
    q->errbody[q->errlen] = '\0';
    return true;
  }
  enum tb_sse_status st = tb_sse_feed(&q->sse, data, n);
  if (st == TB_SSE_TOO_LONG)
    rq_fail(q, "SSE line or event over its cap");
  else if (st == TB_SSE_OVER_BUDGET)
    rq_fail(q, "the cell's SSE buffers went over its memory budget of %zu KiB",
            c->mem.max / 1024);
  return st == TB_SSE_OK;
}

static json_t *
ms_or_null(int64_t ns, bool have)
{
  return have ? json_real((double)ns / 1e6) : json_null();
}

/* Request k's sample in a (its place made at launch; past
 * TB_RESULT_SAMPLES_MAX requests there is none). */
static void
put(json_t *a, uint64_t k, json_t *v)
{
  if (k < json_array_size(a))
    json_array_set_new(a, (size_t)k, v);
  else
    json_decref(v);
}

/* Whether a finished request met every objective of the spec. */
static bool
meets_slo(const struct tb_spec_slo *slo, int64_t ttft, int64_t tpot, bool have_tpot,
          int64_t max_gap, int64_t e2e)
{
  if (slo->ttft_ms > 0 && (double)ttft / 1e6 > slo->ttft_ms)
    return false;
  if (slo->tpot_ms > 0 && have_tpot && (double)tpot / 1e6 > slo->tpot_ms)
    return false;
  if (slo->tbt_ms > 0 && (double)max_gap / 1e6 > slo->tbt_ms)
    return false;
  if (slo->e2e_ms > 0 && (double)e2e / 1e6 > slo->e2e_ms)
    return false;
  return true;
}

static void
note_error(struct rcell *c, const char *why)
{
  c->errors++;
  if (c->first_error[0] == '\0')
    snprintf(c->first_error, sizeof c->first_error, "%s", why);
}

/* The request in slot ended (err: a transport error, or NULL). */
static void
rq_end(struct rcell *c, unsigned slot, const char *err)
{
  struct rq *q = c->slots[slot];
  if (q == NULL)
    return;
  struct rrun *r = c->r;
  int64_t end = q->t_byte != 0 ? q->t_byte : tb_time_mono_ns();
  if (!q->failed) {
    if (!q->http_checked)
      q->http_status = tb_direct_status(&c->ds, slot);
    if (err != NULL)
      rq_fail(q, "%s", err);
    else if (q->http_status != 200 && r->env->error_bodies)
      rq_fail(q, "HTTP %d: %.120s", q->http_status, q->errbody);
    else if (q->http_status != 200)
      rq_fail(q, "HTTP %d", q->http_status);
    else if (!tb_sse_idle(&q->sse))
      rq_fail(q, "stream ended inside an SSE event");
    else if (!q->count.done)
      rq_fail(q, "stream ended before [DONE] (cut)");
    else if (q->t_first == 0)
      rq_fail(q, "no output token");
  }
  bool good = false;
  int64_t ttft = q->t_first - q->t_start, e2e = end - q->t_start, tpot = 0;
  bool have_tpot = q->tokens > 1 && q->t_last > q->t_first;
  if (have_tpot)
    tpot = (q->t_last - q->t_first) / (q->tokens - 1);
  if (q->failed) {
    note_error(c, q->reason);
  } else {
    c->ok++;
    tb_stats_add(&c->ttft, ttft);
    tb_stats_add(&c->e2e, e2e);
    if (have_tpot)
      tb_stats_add(&c->tpot, tpot);
    c->out_tokens += q->tokens;
    if (q->count.prompt_tokens >= 0) {
      c->prompt_tokens_sum += q->count.prompt_tokens;
      c->prompt_n++;
      if (q->count.saw_cached) {
        c->cached_sum += q->count.cached_tokens;
        c->cached_prompt_sum += q->count.prompt_tokens;
        c->cached_n++;
      }
    }
    good = meets_slo(&r->s->slo, ttft, tpot, have_tpot, q->max_gap, e2e);
    c->good += good;
    if (end > c->t_last_end)
      c->t_last_end = end;
  }
  put(c->s_ttft, q->k, ms_or_null(ttft, !q->failed));
  put(c->s_tpot, q->k, ms_or_null(tpot, !q->failed && have_tpot));
  put(c->s_e2e, q->k, ms_or_null(e2e, !q->failed));
  put(c->s_maxtbt, q->k, ms_or_null(q->max_gap, !q->failed && q->tokens > 1));
  put(c->s_tokens, q->k, json_integer(q->tokens));
  put(c->s_good, q->k, json_integer(good));
  c->slots[slot] = NULL;
  tb_direct_release(&c->ds, slot);
  c->free_slots[c->n_free++] = slot;
  c->inflight--;
  tb_sse_free(&q->sse);
  free(q->body);
  free(q);
}

static void
direct_end(void *cls, unsigned slot, const char *err)
{
  rq_end(cls, slot, err);
}

/* Patches the request number into a body copy (hex, MARKER_DIGITS wide). */
static void
patch_hex(char *at, uint32_t v)
{
  static const char hex[] = "0123456789abcdef";
  for (int i = MARKER_DIGITS - 1; i >= 0; i--) {
    at[i] = hex[v & 15];
    v >>= 4;
  }
}

static void
patch_maxtok(char *at, int64_t v)
{
  char buf[MAXTOK_WIDTH + 1];
  snprintf(buf, sizeof buf, "%*" PRId64, MAXTOK_WIDTH, v);
  memcpy(at, buf, MAXTOK_WIDTH);
}

/* Launches request k (scheduled at t_sched). */
static void
launch(struct rcell *c, uint64_t k, int64_t t_sched, struct tb_rng *lens)
{
  struct rrun *r = c->r;
  unsigned pi = r->n_pool > 1 ? (unsigned)(tb_rng_next(lens) % r->n_pool) : 0;
  int64_t want = tb_length_draw(&r->out, lens);
  c->scheduled++;
  if (k < TB_RESULT_SAMPLES_MAX) { /* request k's place in the samples */
    json_t *const lat[] = { c->s_lag, c->s_ttft, c->s_tpot, c->s_e2e, c->s_maxtbt };
    for (size_t i = 0; i < TB_ARRAY_LEN(lat); i++)
      json_array_append_new(lat[i], json_null());
    json_array_append_new(c->s_tokens, json_integer(0));
    json_array_append_new(c->s_good, json_integer(0));
  }
  if (c->n_free == 0) {
    c->dropped++;
    note_error(c, "dropped: every connection slot busy (2048 requests in flight)");
    return;
  }
  const struct pool_entry *pe = &r->pool[pi];
  struct rq *q = tb_xcalloc(1, sizeof *q);
  q->c = c;
  q->k = k;
  q->pool = pi;
  q->want = want;
  q->count.prompt_tokens = -1;
  q->body = tb_xmalloc(pe->len + 1);
  memcpy(q->body, pe->tmpl, pe->len + 1);
  /* a shared prefix's suffixes repeat every prefix.suffixes requests */
  uint64_t sk = r->s->prefix.tokens > 0 && r->s->prefix.suffixes > 0
                    ? k % (uint64_t)r->s->prefix.suffixes
                    : k;
  patch_hex(q->body + pe->marker_at,
            ((uint32_t)(c->index & 0xff) << 24) | (uint32_t)(sk & 0xffffff));
  patch_maxtok(q->body + pe->maxtok_at, want);
  tb_sse_init(&q->sse, rq_event, NULL, q);
  tb_sse_set_budget(&q->sse, &c->mem);
  unsigned slot = c->free_slots[--c->n_free];
  q->slot = slot;
  c->slots[slot] = q;
  c->inflight++;
  if (c->inflight > c->max_inflight)
    c->max_inflight = c->inflight;
  q->t_sched = t_sched;
  q->t_start = tb_time_mono_ns();
  c->started++;
  int64_t lag = q->t_start - t_sched;
  tb_stats_add(&c->lag, lag);
  put(c->s_lag, k, json_real((double)lag / 1e6));
  if (c->prev_start != 0) {
    double g = (double)(q->t_start - c->prev_start);
    c->gap_sum += g;
    c->gap_sum2 += g * g;
    c->gap_n++;
  }
  c->prev_start = q->t_start;
  if (!tb_direct_start_req(&c->ds, slot, pe->head, pe->head_len, q->body, pe->len))
    rq_end(c, slot, c->ds.c[slot].err[0] ? c->ds.c[slot].err : "could not start");
}

/* Per-request timeouts (every SCAN_NS). */
static void
scan(struct rcell *c, int64_t now)
{
  const struct tb_spec *s = c->r->s;
  for (unsigned i = 0; i < c->ds.n; i++) {
    struct rq *q = c->slots[i];
    if (q == NULL)
      continue;
    const char *why = NULL;
    char buf[120];
    if (q->t_first == 0 && now - q->t_start > (int64_t)(s->first_token_timeout_s * NS_PER_S)) {
      snprintf(buf, sizeof buf, "no first token after %.1f s", s->first_token_timeout_s);
      why = buf;
    } else if (q->t_first != 0 && now - q->t_byte > (int64_t)(s->stall_timeout_s * NS_PER_S)) {
      snprintf(buf, sizeof buf, "stream stalled: no token for %.1f s", s->stall_timeout_s);
      why = buf;
    }
    if (why != NULL) {
      rq_fail(q, "%s", why);
      rq_end(c, i, NULL);
    }
  }
}

static void
arm(int tfd, int64_t at)
{
  struct itimerspec its = { { 0, 0 }, { (time_t)(at / NS_PER_S), (long)(at % NS_PER_S) } };
  if (its.it_value.tv_sec == 0 && its.it_value.tv_nsec == 0)
    its.it_value.tv_nsec = 1;
  (void)timerfd_settime(tfd, TFD_TIMER_ABSTIME, &its, NULL);
}

/* The percentiles of a sample of ns as ms, with the max. */
static json_t *
pct(struct tb_stats *st)
{
  json_t *o = json_object();
  bool any = st->n > 0;
  json_object_set_new(o, "p50", any ? json_real(tb_stats_quantile(st, 0.5) / 1e6) : json_null());
  json_object_set_new(o, "p90", any ? json_real(tb_stats_quantile(st, 0.9) / 1e6) : json_null());
  json_object_set_new(o, "p99", any ? json_real(tb_stats_quantile(st, 0.99) / 1e6) : json_null());
  return o;
}

/* The figures of a measured cell. */
static void
cell_figures(struct rcell *c, json_t *cell)
{
  const struct tb_spec *s = c->r->s;
  double dur = c->t_last_end > c->t0 ? (double)(c->t_last_end - c->t0) / 1e9 : 0;
  double arr = (double)(c->t_end_arrivals - c->t0) / 1e9;
  json_object_set_new(cell, "status", json_string(c->ok > 0 ? "valid" : "error"));
  if (c->ok == 0)
    json_object_set_new(cell, "reason",
                        json_string(c->first_error[0] ? c->first_error : "no request finished"));
  json_object_set_new(cell, "requests", json_integer((json_int_t)c->scheduled));
  json_object_set_new(cell, "completed", json_integer((json_int_t)c->ok));
  json_object_set_new(cell, "requests_started", json_integer((json_int_t)c->started));
  json_object_set_new(cell, "errors", json_integer((json_int_t)c->errors));
  json_object_set_new(cell, "dropped", json_integer((json_int_t)c->dropped));
  json_object_set_new(cell, "good", json_integer((json_int_t)c->good));
  json_object_set_new(cell, "error_share",
                      json_real(c->scheduled ? (double)c->errors / (double)c->scheduled : 0));
  if (c->first_error[0] && c->ok > 0)
    json_object_set_new(cell, "first_error", json_string(c->first_error));
  json_object_set_new(cell, "offered_rps", json_real(arr > 0 ? (double)c->started / arr : 0));
  json_object_set_new(cell, "achieved_rps", json_real(dur > 0 ? (double)c->ok / dur : 0));
  json_object_set_new(cell, "goodput_rps", json_real(dur > 0 ? (double)c->good / dur : 0));
  json_object_set_new(cell, "attainment",
                      json_real(c->scheduled ? (double)c->good / (double)c->scheduled : 0));
  json_object_set_new(cell, "slo", slo_json(&s->slo));
  json_object_set_new(cell, "total_tps", json_real(dur > 0 ? (double)c->out_tokens / dur : 0));
  json_object_set_new(cell, "output_tokens", json_integer(c->out_tokens));
  json_object_set_new(cell, "prompt_tokens_mean",
                      c->prompt_n ? json_real((double)c->prompt_tokens_sum / (double)c->prompt_n)
                                  : json_null());
  if (c->cached_n > 0) { /* the server said how much of the prompts its cache held */
    json_t *pc = json_pack("{s:I, s:I, s:I, s:f}", "requests", (json_int_t)c->cached_n,
                           "prompt_tokens", (json_int_t)c->cached_prompt_sum, "cached_tokens",
                           (json_int_t)c->cached_sum, "hit_pct",
                           c->cached_prompt_sum > 0
                               ? 100.0 * (double)c->cached_sum / (double)c->cached_prompt_sum
                               : 0.0);
    json_object_set_new(cell, "prefix_cache", pc);
  }
  json_object_set_new(cell, "measured_s", json_real(dur));
  json_object_set_new(cell, "arrivals_s", json_real(arr));
  json_object_set_new(cell, "ttft_ms", pct(&c->ttft));
  json_object_set_new(cell, "tpot_ms", pct(&c->tpot));
  json_object_set_new(cell, "tbt_ms", pct(&c->tbt));
  json_object_set_new(cell, "e2e_ms", pct(&c->e2e));
  json_t *lag = pct(&c->lag);
  json_object_del(lag, "p90");
  json_object_set_new(lag, "max", c->lag.n ? json_real(tb_stats_quantile(&c->lag, 1) / 1e6)
                                           : json_null());
  json_object_set_new(cell, "schedule_lag_ms", lag);
  double cv = NAN;
  if (c->gap_n > 1) {
    double m = c->gap_sum / (double)c->gap_n;
    double var = (c->gap_sum2 - c->gap_sum * m) / (double)(c->gap_n - 1);
    cv = var > 0 && m > 0 ? sqrt(var) / m : 0;
  }
  json_object_set_new(cell, "interarrival_cv", isfinite(cv) ? json_real(cv) : json_null());
  json_object_set_new(cell, "max_in_flight", json_integer(c->max_inflight));
  uint64_t reads = c->ds.rx_kernel + c->ds.rx_user;
  json_object_set_new(cell, "kernel_stamped",
                      json_real(reads ? (double)c->ds.rx_kernel / (double)reads : 0));
  json_t *smp = json_object();
  json_object_set_new(smp, "lag_ms", c->s_lag);
  json_object_set_new(smp, "ttft_ms", c->s_ttft);
  json_object_set_new(smp, "tpot_ms", c->s_tpot);
  json_object_set_new(smp, "e2e_ms", c->s_e2e);
  json_object_set_new(smp, "max_tbt_ms", c->s_maxtbt);
  json_object_set_new(smp, "output_tokens", c->s_tokens);
  json_object_set_new(smp, "good", c->s_good);
  c->s_lag = c->s_ttft = c->s_tpot = c->s_e2e = c->s_maxtbt = c->s_tokens = c->s_good = NULL;
  json_object_set_new(cell, "samples", smp);
  tb_ratewatch_cell(c->watch, cell, c->r->env->kernel_stamps);
}

/* A cell's schedule: a function of the seed, the cell's rate and nothing
 * else (never of what the server answered). */
struct sched {
  struct tb_arrival arr;
  struct tb_rng lens;
  uint64_t k, total;
  int64_t next_t, window;
  bool by_count, done;
};

/* Launches every arrival due by now, in order; re-arms the timer. */
static void
launch_due(struct rcell *c, struct sched *sc)
{
  int64_t now = tb_time_mono_ns();
  bool launched = false;
  while (!sc->done && sc->next_t <= now) {
    launch(c, sc->k, sc->next_t, &sc->lens);
    launched = true;
    sc->k++;
    int64_t gap = (int64_t)llround(tb_arrival_gap_s(&sc->arr) * NS_PER_S);
    sc->next_t += gap > 0 ? gap : 1;
    if (sc->k >= sc->total || (!sc->by_count && sc->next_t - c->t0 >= sc->window) ||
        sc->k >= (uint64_t)TB_SPEC_MAX_RATE_REQUESTS) {
      sc->done = true;
      c->t_end_arrivals = sc->by_count ? sc->next_t : c->t0 + sc->window;
    }
    now = tb_time_mono_ns();
  }
  if (launched && !sc->done)
    arm(c->r->tfd, sc->next_t);
}

/* Runs one rate cell at rate into cell (its key set); false: cancelled. */
static bool
cell_run(struct rrun *r, double rate, unsigned index, json_t *cell)
{
  const struct tb_spec *s = r->s;
  struct rcell cc;
  struct rcell *c = &cc;
  memset(c, 0, sizeof *c);
  c->r = r;
  c->rate = rate;
  c->index = index;
  c->mem.max = r->env->cell_memory_max;
  unsigned n = TB_RATE_MAX_INFLIGHT;
  c->slots = tb_xcalloc(n, sizeof *c->slots);
  c->free_slots = tb_xcalloc(n, sizeof *c->free_slots);
  for (unsigned i = 0; i < n; i++)
    c->free_slots[c->n_free++] = n - 1 - i; /* slot 0 on top */
  const struct tb_direct_ops ops = { c, rq_body, direct_end };
  tb_direct_set_init(&c->ds, &r->dt, n, r->auth, "", 0, &ops);
  c->s_lag = json_array();
  c->s_ttft = json_array();
  c->s_tpot = json_array();
  c->s_e2e = json_array();
  c->s_maxtbt = json_array();
  c->s_tokens = json_array();
  c->s_good = json_array();

  struct sched sc;
  memset(&sc, 0, sizeof sc);
  bool ok = tb_arrival_init(&sc.arr, s->arrival, rate, (uint64_t)s->seed);
  tb_rng_seed(&sc.lens, (uint64_t)s->seed ^ 0x6c656e67746873ULL); /* "lengths" */
  sc.by_count = s->rate_requests > 0;
  sc.total = sc.by_count ? (uint64_t)s->rate_requests : UINT64_MAX;
  sc.window = (int64_t)(s->rate_duration_s * NS_PER_S);
  sc.done = !ok;
  bool cancelled = false;
  c->watch = tb_ratewatch_begin(r->env->d, r->env->api_key, r->env->server_series);
  c->t0 = tb_time_mono_ns() + LEAD_NS;
  sc.next_t = c->t0;
  int64_t next_scan = 0, next_cancel = 0;
  arm(r->tfd, sc.next_t);
  struct epoll_event evs[256];
  while (!sc.done || c->inflight > 0) {
    launch_due(c, &sc);
    int64_t now = tb_time_mono_ns();
    if (now >= next_scan) {
      scan(c, now);
      next_scan = now + SCAN_NS;
    }
    if (now >= next_cancel) {
      next_cancel = now + CANCEL_NS;
      if (r->env->cancelled != NULL && r->env->cancelled(r->env->cls)) {
        cancelled = true;
        break;
      }
    }
    if (sc.done && c->inflight == 0)
      break;
    int wait_ms = 10; /* the scan's pace; arrivals come by the timerfd */
    int nev = epoll_wait(r->epfd, evs, (int)TB_ARRAY_LEN(evs), wait_ms);
    int64_t rt_off = nev > 0 ? tb_rxts_offset() : 0;
    for (int i = 0; i < nev; i++) {
      if (evs[i].data.u64 == TIMER_TAG) {
        uint64_t ticks;
        (void)!read(r->tfd, &ticks, sizeof ticks);
        continue;
      }
      if (evs[i].data.u64 & TB_DIRECT_TAG)
        tb_direct_event(&c->ds, evs[i].data.u64, evs[i].events, rt_off);
      /* an arrival falling due while reads are handled goes out now, not
       * after the rest of the batch */
      if (!sc.done && tb_time_mono_ns() >= sc.next_t)
        launch_due(c, &sc);
    }
  }
  tb_ratewatch_end(c->watch, cancelled ? 0 : s->drain_timeout_s);
  if (!ok)
    snprintf(c->first_error, sizeof c->first_error, "arrival: %s", s->arrival);
  /* what is left (cancelled): closed, not counted */
  for (unsigned i = 0; i < n; i++) {
    struct rq *q = c->slots[i];
    if (q == NULL)
      continue;
    c->slots[i] = NULL;
    tb_sse_free(&q->sse);
    free(q->body);
    free(q);
  }
  tb_direct_set_free(&c->ds);
  struct itimerspec off = { { 0, 0 }, { 0, 0 } };
  (void)timerfd_settime(r->tfd, 0, &off, NULL);
  if (!cancelled)
    cell_figures(c, cell);
  json_decref(c->s_lag);
  json_decref(c->s_ttft);
  json_decref(c->s_tpot);
  json_decref(c->s_e2e);
  json_decref(c->s_maxtbt);
  json_decref(c->s_tokens);
  json_decref(c->s_good);
  tb_stats_free(&c->ttft);
  tb_stats_free(&c->tpot);
  tb_stats_free(&c->tbt);
  tb_stats_free(&c->e2e);
  tb_stats_free(&c->lag);
  tb_ratewatch_free(c->watch);
  free(c->slots);
  free(c->free_slots);
  return !cancelled;
}

/* ------------------------------------------------------------- set-up */

/* The request body of a prompt: model, the prompt, max_tokens padded to
 * MAXTOK_WIDTH columns; offsets of the marker and of max_tokens' digits. */
static bool
make_entry(struct rrun *r, const struct tb_prompt *p, struct pool_entry *pe)
{
  json_t *b = json_pack("{s:s, s:[{s:s, s:s}], s:I, s:b, s:b, s:{s:b, s:b}}", "model",
                        r->env->d->model, "messages", "role", "user", "content", p->text,
                        "max_tokens", (json_int_t)MAXTOK_PLACEHOLDER, "stream", 1, "ignore_eos",
                        1, "stream_options", "include_usage", 1, "continuous_usage_stats", 1);
  if (r->sys != NULL) /* the shared system prompt goes first */
    json_array_insert_new(json_object_get(b, "messages"), 0,
                          json_pack("{s:s, s:s}", "role", "system", "content", r->sys));
  char *text = json_dumps(b, JSON_COMPACT);
  json_decref(b);
  if (text == NULL)
    return false;
  char ph[48];
  snprintf(ph, sizeof ph, "\"max_tokens\":%d", MAXTOK_PLACEHOLDER);
  char *m = strstr(text, MARKER), *t = strstr(text, ph);
  if (m == NULL || t == NULL) {
    free(text);
    return false;
  }
  pe->tmpl = text;
  pe->len = strlen(text);
  pe->marker_at = (size_t)(m - text) + 2;
  pe->maxtok_at = (size_t)(t - text) + strlen("\"max_tokens\":");
  pe->tokens = p->tokens;
  pe->head = tb_direct_head_new(&r->dt, r->auth, pe->len);
  pe->head_len = strlen(pe->head);
  return true;
}

static void
raise_nofile(unsigned need)
{
  struct rlimit rl;
  if (getrlimit(RLIMIT_NOFILE, &rl) != 0)
    return;
  rlim_t want = (rlim_t)need + 256;
  if (rl.rlim_cur >= want)
    return;
  rl.rlim_cur = want < rl.rlim_max ? want : rl.rlim_max;
  (void)setrlimit(RLIMIT_NOFILE, &rl);
}

static void
setup(struct rrun *r)
{
  const struct tb_spec *s = r->s;
  const struct tb_rate_env *env = r->env;
  if (tb_length_parse(s->input_tokens, 1, TB_SPEC_MAX_CONTEXT, &r->in) != NULL ||
      tb_length_parse(s->output_tokens, 1, TB_SPEC_MAX_OUTPUT, &r->out) != NULL) {
    r->setup_err = tb_xstrdup("input_tokens or output_tokens: bad length");
    return;
  }
  if (env->d->max_model_len > 0 && r->in.hi + r->out.hi > env->d->max_model_len) {
    r->setup_err = tb_xasprintf("input + output tokens (%" PRId64 " + %" PRId64
                                ") exceed max_model_len (%" PRId64 ")",
                                r->in.hi, r->out.hi, env->d->max_model_len);
    return;
  }
  r->epfd = epoll_create1(EPOLL_CLOEXEC);
  r->tfd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
  if (r->epfd < 0 || r->tfd < 0) {
    r->setup_err = tb_xstrdup("cannot set up the event loop");
    return;
  }
  struct epoll_event ev = { .events = EPOLLIN, .data.u64 = TIMER_TAG };
  (void)epoll_ctl(r->epfd, EPOLL_CTL_ADD, r->tfd, &ev);
  char *chat_url = tb_xasprintf("%s/v1/chat/completions", env->d->base_url);
  r->direct = tb_direct_setup(&r->dt, chat_url, env->kernel_stamps, r->epfd);
  free(chat_url);
  if (!r->direct) {
    r->setup_err = tb_xstrdup("rate cells need the engine's own transport: a plain-HTTP "
                              "endpoint without a proxy (and TB_ENGINE_CURL_STREAMS unset)");
    return;
  }
  raise_nofile(TB_RATE_MAX_INFLIGHT);
  /* the timerfd's wake-ups: 1 us of slack instead of the default 50 us
   * (the thread's own setting comes back in teardown) */
  r->slack = prctl(PR_GET_TIMERSLACK, 0UL, 0UL, 0UL, 0UL);
  (void)prctl(PR_SET_TIMERSLACK, 1UL, 0UL, 0UL, 0UL);
  r->auth = tb_http_auth_header(env->api_key);
  /* a shared prefix: one system prompt for every request, tagged with the
   * run only (the same in every cell; never the marker) */
  r->sys_tokens = -1;
  if (s->prefix.tokens > 0) {
    char *stag = tb_xasprintf("%s-SYSTEM", env->run_id);
    struct tb_prompt_ctx *sc = tb_prompt_ctx_new(env->d, env->api_key, stag);
    free(stag);
    struct tb_prompt p = { 0 };
    char *perr = NULL;
    if (tb_prompt_build(sc, s->prefix.tokens, s->prefix.tokens, &p, &perr) != 0) {
      r->setup_err = tb_xasprintf("shared prefix of %" PRId64 " tokens: %s", s->prefix.tokens,
                                  perr ? perr : "failed");
      free(perr);
    } else {
      r->sys = p.text;
      r->sys_tokens = p.tokens;
      p.text = NULL;
    }
    tb_prompt_free(&p);
    tb_prompt_ctx_free(sc);
    if (r->setup_err != NULL)
      return;
  }
  /* the prompts: one per length of the pool, tagged with the marker */
  char *tag = tb_xasprintf("%s-" MARKER, env->run_id);
  struct tb_prompt_ctx *pc = tb_prompt_ctx_new(env->d, env->api_key, tag);
  free(tag);
  r->n_pool = r->in.hi > r->in.lo ? TB_RATE_INPUT_POOL : 1;
  double sum = 0;
  for (unsigned i = 0; i < r->n_pool && r->setup_err == NULL; i++) {
    int64_t len = r->n_pool == 1 ? r->in.lo
                                 : r->in.lo + (r->in.hi - r->in.lo) * (int64_t)i /
                                                  (int64_t)(r->n_pool - 1);
    struct tb_prompt p = { 0 };
    char *perr = NULL;
    if (tb_prompt_build(pc, len, len, &p, &perr) != 0) {
      r->setup_err = tb_xasprintf("prompt of %" PRId64 " tokens: %s", len, perr ? perr : "failed");
      free(perr);
    } else if (!make_entry(r, &p, &r->pool[i])) {
      r->setup_err = tb_xstrdup("prompt: its tag is not in the request body");
    }
    sum += (double)len;
    tb_prompt_free(&p);
  }
  r->in_mean = sum / r->n_pool;
  tb_prompt_ctx_free(pc);
}

static void
teardown(struct rrun *r)
{
  for (unsigned i = 0; i < TB_RATE_INPUT_POOL; i++) {
    free(r->pool[i].tmpl);
    if (r->pool[i].head != NULL)
      tb_http_secret_free(r->pool[i].head);
  }
  tb_http_secret_free(r->auth);
  free(r->sys);
  if (r->slack > 0)
    (void)prctl(PR_SET_TIMERSLACK, (unsigned long)r->slack, 0UL, 0UL, 0UL);
  if (r->direct)
    tb_direct_free(&r->dt);
  if (r->tfd >= 0)
    close(r->tfd);
  if (r->epfd >= 0)
    close(r->epfd);
  free(r->setup_err);
}

/* ------------------------------------------------------------- the run */

static json_t *
cell_key(const struct rrun *r, unsigned index, double rate)
{
  int64_t ctx = (r->in.lo + r->in.hi) / 2;
  json_t *cell = tb_result_cell_new("rate", ctx, index);
  json_object_set_new(cell, "rate_rps", json_real(rate));
  json_object_set_new(cell, "arrival", json_string(r->s->arrival));
  return cell;
}

/* One rate cell: kept from done_cells, or measured and emitted.  The
 * cell's attainment into *att (NAN when not valid).  false: stop. */
static bool
one_cell(struct rrun *r, double rate, const char *role, double *att)
{
  const struct tb_rate_env *env = r->env;
  unsigned index = ++r->index;
  *att = NAN;
  json_t *cell = cell_key(r, index, rate);
  const json_t *done = tb_result_find_cell(env->done_cells, "rate",
                                           json_integer_value(json_object_get(cell, "context")),
                                           index);
  if (done != NULL &&
      fabs(json_number_value(json_object_get(done, "rate_rps")) - rate) < 1e-9 * rate) {
    json_decref(cell);
    const json_t *a = json_object_get(done, "attainment");
    if (json_is_number(a))
      *att = json_number_value(a);
    if (env->keep != NULL)
      env->keep(env->cls, done);
    return true;
  }
  json_object_set_new(cell, "role", json_string(role));
  if (env->progress != NULL)
    env->progress(env->cls, cell);
  if (r->setup_err != NULL) {
    tb_result_cell_set_status(cell, "error", r->setup_err);
  } else if (!cell_run(r, rate, index, cell)) {
    r->cancelled = true;
    json_decref(cell);
    return false;
  }
  const json_t *a = json_object_get(cell, "attainment");
  if (json_is_number(a))
    *att = json_number_value(a);
  if (!env->emit(env->cls, cell)) {
    r->cancelled = true;
    return false;
  }
  return true;
}

enum tb_rate_status
tb_rate_run(const struct tb_spec *s, const struct tb_rate_env *env, json_t **sweep)
{
  struct rrun run;
  struct rrun *r = &run;
  memset(r, 0, sizeof *r);
  r->s = s;
  r->env = env;
  r->epfd = r->tfd = -1;
  *sweep = NULL;
  setup(r);
  double att;
  for (size_t i = 0; i < s->rates.n && !r->cancelled; i++)
    if (!one_cell(r, s->rates.v[i], "rate", &att))
      break;
  if (s->sweep.attainment_pct > 0 && !r->cancelled) {
    const struct tb_spec_sweep *sw = &s->sweep;
    double target = sw->attainment_pct / 100.0;
    double rates[64];
    bool pass[64];
    size_t n = 0;
    double found = 0, hi = 0;
    json_t *probes = json_array();
    for (;;) {
      double next = tb_rate_sweep_next(sw, rates, pass, n, &found, &hi);
      if (next <= 0 || n >= TB_ARRAY_LEN(rates))
        break;
      unsigned index = r->index + 1;
      if (!one_cell(r, next, "sweep", &att))
        break;
      rates[n] = next;
      pass[n] = isfinite(att) && att >= target - 1e-12;
      json_array_append_new(probes, json_pack("{s:I, s:f, s:o, s:b}", "cell", (json_int_t)index,
                                              "rate_rps", next, "attainment",
                                              isfinite(att) ? json_real(att) : json_null(),
                                              "pass", pass[n]));
      n++;
    }
    (void)tb_rate_sweep_next(sw, rates, pass, n, &found, &hi);
    json_t *o = json_object();
    json_object_set_new(o, "attainment_pct", json_real(sw->attainment_pct));
    json_object_set_new(o, "slo", slo_json(&s->slo));
    json_object_set_new(o, "min_rps", json_real(sw->min_rps));
    json_object_set_new(o, "max_rps", json_real(sw->max_rps));
    json_object_set_new(o, "step_rps", json_real(sw->step_rps));
    json_object_set_new(o, "max_probes", json_integer(sw->max_probes));
    json_object_set_new(o, "probes", probes);
    json_object_set_new(o, "found_rps", found > 0 ? json_real(found) : json_null());
    json_object_set_new(o, "fails_at_rps", hi > 0 ? json_real(hi) : json_null());
    const char *why = r->cancelled                    ? "cancelled"
                      : found == 0                    ? "below_min_rps"
                      : hi == 0 && found >= sw->max_rps ? "at_max_rps"
                      : hi > 0 && hi - found <= sw->step_rps * (1 + 1e-9) ? "converged"
                                                                          : "out_of_probes";
    json_object_set_new(o, "outcome", json_string(why));
    *sweep = o;
  }
  enum tb_rate_status st = r->cancelled ? TB_RATE_CANCELLED : TB_RATE_OK;
  teardown(r);
  return st;
}
