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
 * Timing.  A request's response goes to tb_stream (the consumer the matrix
 * uses too).  Its figures are taken from the kernel's receive stamps of its
 * reads: TTFT = first output token - actual start; TPOT = (last
 * token - first token) / (tokens - 1); TBT = each gap between two token
 * chunks (per token when a chunk carries several); e2e = last byte -
 * actual start.  Lag = actual start - scheduled start.
 */
#include "engine/tb_rate.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/prctl.h>
#include <sys/timerfd.h>
#include <time.h>
#include <unistd.h>

#include "base/tb_arrival.h"
#include "engine/tb_cachereset.h"
#include "engine/tb_convo.h"
#include "spec/tb_trace.h"
#include "net/tb_direct.h"
#include "net/tb_http.h"
#include "net/tb_oai.h"
#include "engine/tb_prompt.h"
#include "engine/tb_ratewatch.h"
#include "engine/tb_telemetry.h"
#include "result/tb_checks.h"
#include "result/tb_result.h"
#include "result/tb_srvtime.h"
#include "result/tb_steady.h"
#include "net/tb_rxts.h"
#include "base/tb_stats.h"
#include "engine/tb_stream.h"
#include "engine/tb_engine.h"
#include "result/tb_samples.h"

#define NS_PER_S 1000000000LL
#define TIMER_TAG 1ULL
#define SCAN_NS 10000000LL    /* per-request timeout checks */
#define CANCEL_NS 100000000LL /* cancelled() polls */
#define LEAD_NS 20000000LL    /* the first arrival: this long after set-up */
#define MARKER "RQ00000000"
#define MARKER_DIGITS 8
#define MAXTOK_WIDTH 8 /* max_tokens rendered in 8 columns */
#define MAXTOK_PLACEHOLDER 99999999
#define FAIL_PAUSE_NS 100000000LL /* a closed-loop user after a failed request */

/* ------------------------------------------------------------- settings */

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

/* The workload, as settings.rate.workload: cold prompts, a shared system
 * prompt, conversations (with the prefix when both); everything a run
 * needs to be repeated exactly, with the seed and lengths beside it. */
static json_t *
workload_json(const struct tb_spec *s)
{
  const struct tb_spec_convo *cv = &s->conversation;
  json_t *o = json_pack("{s:s}", "kind",
                        cv->turns > 0          ? "multi_turn"
                        : s->prefix.tokens > 0 ? "shared_prefix"
                                               : "cold");
  if (s->prefix.tokens > 0) {
    json_object_set_new(o, "prefix_tokens", json_integer(s->prefix.tokens));
    json_object_set_new(o, "suffixes", json_integer(s->prefix.suffixes));
  }
  if (cv->turns > 0) {
    json_object_set_new(o, "turns", json_integer(cv->turns));
    json_object_set_new(o, "think_time_s", json_real(cv->think_time_s));
    json_object_set_new(o, "think", json_string(cv->think));
  }
  return o;
}

json_t *
tb_rate_settings_json(const struct tb_spec *s)
{
  json_t *rates = json_array();
  for (size_t i = 0; i < s->rates.n; i++)
    json_array_append_new(rates, json_real(s->rates.v[i]));
  json_t *o = json_pack(
    "{s:o, s:f, s:o, s:s, s:I, s:s, s:s, s:o}", "rates", rates, "duration_s", s->rate_duration_s,
    "requests", s->rate_requests > 0 ? json_integer(s->rate_requests) : json_null(), "arrival",
    s->arrival, "seed", (json_int_t)s->seed, "input_tokens", s->input_tokens, "output_tokens",
    s->output_tokens, "slo", slo_json(&s->slo));
  json_object_set_new(o, "workload", workload_json(s));
  return o;
}

/* ------------------------------------------------------------- structures */

struct rcell;
struct sess;

struct rq {
  struct tb_stream st; /* the consumer: bytes, counts, samples, reasons */
  struct rcell *c;
  struct sess *ss; /* its conversation or user (NULL: a lone arrival) */
  unsigned turn;   /* its turn in the conversation (0-based) */
  unsigned slot;
  unsigned pool;
  uint64_t k; /* its number in the cell's requests */
  int64_t t_sched;
  int64_t want;
  char *body;
  char *head; /* its own request head (a conversation's turn), or NULL */
};

struct pool_entry {
  char *tmpl; /* the request body, marker and max_tokens to patch */
  size_t len;
  size_t marker_at, maxtok_at;
  char *head; /* holds the key */
  size_t head_len;
  int64_t tokens; /* as the server counts the prompt (-1 unknown) */
  char *text;     /* the prompt's text (conversations' user messages) */
  size_t text_marker_at;
};

/* A conversation (conversation.turns > 0) or a closed-loop user: what
 * sends its next request when the last one ended. */
struct sess {
  uint64_t conv; /* its conversation's number in the cell */
  unsigned turn; /* turns sent in this conversation */
  bool user;     /* a closed-loop user: starts another when done */
  bool has_cv;
  int64_t due; /* when its next request is due (in the heap) */
  int64_t tri; /* a trace cell's request (its index in rrun.tr); -1 */
  /* a closed-loop user: its first request's start, its last one's end (the
   * steady-state window counts users busy, tb_steady) */
  int64_t busy_from, busy_to;
  struct tb_rng rng; /* its own draws: prompt, output length, think */
  struct tb_convo cv;
};

/* The prompts of finished requests, as the server counted them: their
 * tokens, and the share its prefix cache held (usage.prompt_tokens_details)
 * where it said. */
struct prompts {
  int64_t sum, cached_sum, cached_prompt_sum;
  uint64_t n, cached_n;
};

/* What a cell counts per turn of its conversations. */
struct turnstat {
  struct tb_stats ttft;
  uint64_t sent, ok;
  struct prompts pr;
};

struct rrun {
  const struct tb_plan *p;
  const struct tb_spec *s; /* p->spec */
  const struct tb_rate_env *env;
  struct tb_direct dt;
  bool direct;
  int epfd, tfd;
  char *auth;
  struct tb_length in, out;
  struct pool_entry pool[TB_RATE_INPUT_POOL];
  unsigned n_pool;
  double in_mean;
  char *sys;          /* the shared system prompt (spec prefix), or NULL */
  int64_t sys_tokens; /* as the server counts it alone (-1 unknown) */
  char *setup_err;    /* every cell is an error with this */
  bool cancelled;
  unsigned index; /* cells so far */
  int slack;      /* the thread's timer slack before (ns; 0: unchanged) */
  /* the trace cell (the spec's trace, env->trace): its replay, the roots in
   * order of arrival, each request's first turn after it and next sibling
   * (-1: none), its summary, the prompts' seed */
  struct tb_trace tr;
  struct tb_trace_summary tr_sum;
  size_t *tr_roots, tr_nroots;
  int64_t *tr_child, *tr_sib;
  uint64_t tr_seed;
  char *tr_err;    /* the trace cell is an error with this */
  bool trace_cell; /* the cell running is the trace's */
};

struct rcell {
  struct rrun *r;
  double rate;    /* open loop: arrivals per second; 0 closed */
  unsigned users; /* closed loop: users; 0 open */
  unsigned index;
  struct tb_direct_set ds;
  struct rq **slots;
  unsigned *free_slots;
  unsigned n_free;
  unsigned inflight, max_inflight;
  /* what its requests share (tb_stream): the SSE budget, the TBT sample */
  struct tb_stream_cell sc;
  /* the server's own timing of each request, where it gives one */
  struct tb_srvtime srv;
  /* counts */
  uint64_t scheduled, started, ok, errors, dropped, good;
  int64_t out_tokens;
  struct prompts pr;
  char first_error[200];
  /* times */
  int64_t t0, t_end_arrivals, t_last_end;
  struct tb_stats ttft, tpot, tbt, e2e, lag;
  /* actual inter-start gaps */
  int64_t prev_start; /* the last request's start */
  double gap_sum, gap_sum2;
  uint64_t gap_n;
  /* per-request samples, in order of start */
  json_t *s_lag, *s_ttft, *s_tpot, *s_e2e, *s_maxtbt, *s_tokens, *s_good;
  json_t *s_sched;         /* when each was due, after t0 (issue 24: the schedule) */
  json_t *s_start, *s_end; /* ms from t0 (issue 25: the steady window) */
  /* every request that started, for the steady-state window (tb_steady) */
  struct tb_steady_req *sreq;
  size_t nsreq, capsreq;
  struct tb_steady_span *busy; /* closed loop: each user's span */
  size_t nbusy;
  struct tb_ratewatch *watch; /* the server's view and the checks */
  /* sessions (conversations, closed-loop users): those due, by due time */
  struct sess **heap;
  size_t nheap, nsess;
  uint64_t arrivals; /* conversations (or closed-loop requests) begun */
  uint64_t sess_made;
  int64_t flight_t;
  double flight_area; /* in flight x ns, for the time-weighted mean */
  uint64_t conv_started, conv_completed, conv_abandoned, conv_dropped;
  size_t text_bytes; /* the live conversations' text */
  struct turnstat *turns;
  int64_t t_window_end;  /* closed loop: no arrival begins after it */
  uint64_t tr_abandoned; /* trace turns not sent: their parent failed */
  uint64_t gk;           /* the arrival being launched: its number in the
                          * whole schedule (a shard's markers) */
  bool shard_ran;        /* a shard's cell got its t0 and ran */
};

/* ---------------------------------------------------------- a request */

/* tb_stream_ops.event of a request (cls): a conversation keeps the answer
 * for its next turn. */
static bool
rq_answer(void *cls, struct tb_stream *st, const char *data, size_t len, int64_t delta)
{
  struct rq *q = cls;
  (void)delta;
  if (q->ss == NULL || !q->ss->has_cv || tb_convo_take(&q->ss->cv, data, len))
    return true;
  tb_stream_fail(st, "answer over %zu bytes (the conversation's cap for %" PRId64 " tokens)",
                 q->ss->cv.amax, q->want);
  return false;
}

static const struct tb_stream_ops rq_ops = { .event = rq_answer };

static bool
rq_body(void *cls, unsigned slot, int status, int64_t stamp, const char *data, size_t n)
{
  struct rcell *c = cls;
  struct rq *q = c->slots[slot];
  return q != NULL && tb_stream_body(&q->st, status, stamp, data, n);
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

static void
rq_free(struct rq *q)
{
  tb_stream_free(&q->st);
  free(q->body);
  if (q->head != NULL)
    tb_http_secret_free(q->head);
  free(q);
}

/* Requests in flight change by d: the time-weighted mean follows. */
static void
flight(struct rcell *c, int d)
{
  int64_t now = tb_time_mono_ns();
  if (c->flight_t != 0)
    c->flight_area += (double)c->inflight * (double)(now - c->flight_t);
  c->flight_t = now;
  c->inflight = (unsigned)((int)c->inflight + d);
  if (c->inflight > c->max_inflight)
    c->max_inflight = c->inflight;
}

/* ------------------------------------------------------ sessions: a heap */

static void
heap_swap(struct rcell *c, size_t a, size_t b)
{
  struct sess *t = c->heap[a];
  c->heap[a] = c->heap[b];
  c->heap[b] = t;
}

/* ss is due at ss->due. */
static void
heap_push(struct rcell *c, struct sess *ss)
{
  size_t i = c->nheap++;
  c->heap[i] = ss;
  while (i > 0 && c->heap[(i - 1) / 2]->due > c->heap[i]->due) {
    heap_swap(c, i, (i - 1) / 2);
    i = (i - 1) / 2;
  }
}

static struct sess *
heap_pop(struct rcell *c)
{
  struct sess *top = c->heap[0];
  c->heap[0] = c->heap[--c->nheap];
  size_t i = 0;
  for (;;) {
    size_t l = 2 * i + 1, m = i;
    if (l < c->nheap && c->heap[l]->due < c->heap[m]->due)
      m = l;
    if (l + 1 < c->nheap && c->heap[l + 1]->due < c->heap[m]->due)
      m = l + 1;
    if (m == i)
      break;
    heap_swap(c, i, m);
    i = m;
  }
  return top;
}

/* A think time of the session's user, ns. */
static int64_t
think_ns(const struct rcell *c, struct sess *ss)
{
  const struct tb_spec_convo *cs = &c->r->s->conversation;
  double t = cs->think_time_s;
  if (strcmp(cs->think, "exponential") == 0)
    t = -t * log1p(-tb_rng_uniform(&ss->rng));
  return (int64_t)llround(t * NS_PER_S);
}

/* Whether another arrival (conversation, or a closed-loop request) may
 * begin now. */
static bool
arrivals_open(const struct rcell *c, int64_t now)
{
  const struct tb_spec *s = c->r->s;
  return now < c->t_window_end &&
         (s->rate_requests <= 0 || c->arrivals < (uint64_t)s->rate_requests);
}

/* A new conversation in ss (its first turn not sent). */
static void
sess_conversation(struct rcell *c, struct sess *ss)
{
  if (c->r->s->conversation.turns <= 0)
    return;
  if (ss->has_cv)
    tb_convo_free(&ss->cv);
  tb_convo_init(&ss->cv, c->r->sys, &c->text_bytes);
  ss->has_cv = true;
  ss->turn = 0;
  ss->conv = c->conv_started++;
}

/* A new session (a conversation, or a closed-loop user), or NULL when the
 * cell holds as many as it may. */
static struct sess *
sess_new(struct rcell *c, bool user)
{
  if (c->nsess >= TB_RATE_MAX_SESSIONS || c->text_bytes > c->r->env->cell_memory_max)
    return NULL;
  struct sess *ss = tb_xcalloc(1, sizeof *ss);
  ss->user = user;
  ss->tri = -1;
  /* its draws: a function of the seed, the cell and its own number */
  tb_rng_seed(&ss->rng, (uint64_t)c->r->s->seed ^ ((uint64_t)c->index << 40) ^
                          (c->sess_made++ * 0x9e3779b97f4a7c15ULL) ^ 0x73657373ULL);
  sess_conversation(c, ss);
  c->nsess++;
  return ss;
}

static void
sess_free(struct rcell *c, struct sess *ss)
{
  if (ss->user && ss->busy_from != 0 && c->nbusy < c->users) { /* one per user */
    c->busy[c->nbusy++] =
      (struct tb_steady_span){ (ss->busy_from - c->t0) / 1000, (ss->busy_to - c->t0) / 1000 };
  }
  if (ss->has_cv)
    tb_convo_free(&ss->cv);
  c->nsess--;
  free(ss);
}

/* ss's request ended (failed or not): its next turn is due after a think
 * time; a conversation over (done, or abandoned after a failed turn) ends,
 * or, for a closed-loop user, the user begins the next one. */
/* A trace request ended: each turn that follows it in its session is due
 * its recorded delay after now, or (no delay in the trace) at its recorded
 * time and never before now; after a failure they are not sent. */
static void
trace_after(struct rcell *c, const struct sess *ss, bool failed, int64_t now)
{
  struct rrun *r = c->r;
  for (int64_t j = r->tr_child[ss->tri]; j >= 0; j = r->tr_sib[j]) {
    struct sess *k = failed ? NULL : sess_new(c, false);
    if (k == NULL) {
      c->tr_abandoned++;
      continue;
    }
    const struct tb_trace_req *q = &r->tr.req[j];
    int64_t at = c->t0 + (int64_t)llround(q->t_s * NS_PER_S);
    k->tri = j;
    k->due = q->delay_s >= 0 ? now + (int64_t)llround(q->delay_s * NS_PER_S) : at > now ? at : now;
    heap_push(c, k);
  }
}

static void
sess_after(struct rcell *c, struct sess *ss, bool failed)
{
  int64_t now = tb_time_mono_ns();
  if (ss->tri >= 0) {
    trace_after(c, ss, failed, now);
    sess_free(c, ss);
    return;
  }
  if (ss->has_cv) {
    if (!failed) {
      tb_convo_answered(&ss->cv);
      if (ss->turn < (unsigned)c->r->s->conversation.turns) {
        ss->due = now + think_ns(c, ss);
        heap_push(c, ss);
        return;
      }
      c->conv_completed++;
    } else {
      c->conv_abandoned++;
    }
  }
  if (ss->user && arrivals_open(c, now)) {
    c->arrivals++;
    sess_conversation(c, ss);
    /* after a failure the user waits a moment: a server failing at once
     * is not sent thousands of requests a second */
    ss->due = now + (failed ? FAIL_PAUSE_NS : ss->has_cv ? think_ns(c, ss) : 0);
    heap_push(c, ss);
    return;
  }
  sess_free(c, ss);
}

/* The prompt of a finished request, as the server counted it, into pr. */
static void
prompts_add(struct prompts *pr, const struct tb_oai_count *n)
{
  if (n->prompt_tokens < 0)
    return;
  pr->sum += n->prompt_tokens;
  pr->n++;
  if (n->saw_cached) {
    pr->cached_sum += n->cached_tokens;
    pr->cached_prompt_sum += n->prompt_tokens;
    pr->cached_n++;
  }
}

/* A request that ended soundly, counted into its cell and its turn:
 * whether it met every objective of the spec. */
static bool
rq_counted(struct rcell *c, const struct rq *q, const struct tb_stream_figures *f)
{
  const struct tb_stream *st = &q->st;
  c->ok++;
  tb_stats_add(&c->ttft, f->ttft);
  tb_stats_add(&c->e2e, f->e2e);
  if (f->have_tpot)
    tb_stats_add(&c->tpot, f->tpot);
  c->out_tokens += st->tokens;
  prompts_add(&c->pr, &st->count);
  if (st->count.saw_timings) {
    const struct tb_oai_timings *t = &st->count.timings;
    const struct tb_srvtime_req sq = {
      .cache_n = t->cache_n,
      .prompt_n = t->prompt_n,
      .prompt_ms = t->prompt_ms,
      .predicted_n = t->predicted_n,
      .predicted_per_token_ms = t->predicted_per_token_ms,
      .ttft_ms = (double)f->ttft / 1e6,
      .tokens = tb_stream_got(st),
    };
    c->srv.source = "llama.cpp timings";
    tb_srvtime_add(&c->srv, &sq);
  }
  bool good = meets_slo(&c->r->s->slo, f->ttft, f->tpot, f->have_tpot, st->max_gap, f->e2e);
  c->good += good;
  if (f->end > c->t_last_end)
    c->t_last_end = f->end;
  if (q->ss != NULL && q->ss->has_cv) {
    struct turnstat *ts = &c->turns[q->turn];
    ts->ok++;
    tb_stats_add(&ts->ttft, f->ttft);
    prompts_add(&ts->pr, &st->count);
  }
  return good;
}

/* A shard's request that ended, into its samples: every figure of it,
 * each series aligned with the others (tb_samples_rseries). */
static void
shard_request(struct tb_samples *m, const struct rcell *c, const struct rq *q,
              const struct tb_stream_figures *f, bool failed, int64_t now)
{
  tb_samples_radd(m, TB_SAMPLES_LAG, (q->st.t_start - q->t_sched) / 1000);
  tb_samples_radd(m, TB_SAMPLES_START, (q->st.t_start - c->t0) / 1000);
  tb_samples_radd(m, TB_SAMPLES_END, (now - c->t0) / 1000);
  tb_samples_radd(m, TB_SAMPLES_ROK, !failed);
  tb_samples_radd(m, TB_SAMPLES_RTTFT, failed ? 0 : f->ttft / 1000 + 1);
  tb_samples_radd(m, TB_SAMPLES_RTPOT, !failed && f->have_tpot ? f->tpot / 1000 + 1 : 0);
  tb_samples_radd(m, TB_SAMPLES_RTOKENS, q->st.tokens);
}

/* A request that started and ended, for the steady-state window: its
 * times from t0 (us; ms in the samples) and its figures. */
static void
steady_add(struct rcell *c, const struct rq *q, const struct tb_stream_figures *f, bool failed,
           int64_t now)
{
  if (c->nsreq == c->capsreq) {
    c->capsreq = c->capsreq ? 2 * c->capsreq : 256;
    c->sreq = tb_xrealloc(c->sreq, c->capsreq * sizeof *c->sreq);
  }
  struct tb_steady_req *s = &c->sreq[c->nsreq++];
  *s = (struct tb_steady_req){ .start_us = (q->st.t_start - c->t0) / 1000,
                               .end_us = (now - c->t0) / 1000,
                               .ok = !failed,
                               .ttft_ms = failed ? NAN : (double)f->ttft / 1e6,
                               .tpot_ms = !failed && f->have_tpot ? (double)f->tpot / 1e6 : NAN,
                               .tokens = failed ? 0 : q->st.tokens };
  if (q->ss != NULL && q->ss->user)
    q->ss->busy_to = now;
  put(c->s_start, q->k, json_real((double)s->start_us / 1e3));
  put(c->s_end, q->k, json_real((double)s->end_us / 1e3));
}

/* The request in slot ended (err: a transport error, or NULL). */
static void
rq_end(struct rcell *c, unsigned slot, const char *err)
{
  static const struct tb_stream_expect expect = { .token = true };
  struct rq *q = c->slots[slot];
  if (q == NULL)
    return;
  int64_t now = tb_time_mono_ns();
  bool failed = !tb_stream_end(&q->st, tb_direct_status(&c->ds, slot), err, &expect);
  /* TTFT from when the request could go out (a new connection's handshake
   * is the network's, not the server's); e2e from its start */
  struct tb_stream_figures f;
  tb_stream_figures(&q->st, tb_direct_sent_at(&c->ds, slot, q->st.t_start), now, &f);
  bool good = false;
  if (failed)
    note_error(c, q->st.reason);
  else
    good = rq_counted(c, q, &f);
  put(c->s_ttft, q->k, ms_or_null(f.ttft, !failed));
  put(c->s_tpot, q->k, ms_or_null(f.tpot, !failed && f.have_tpot));
  put(c->s_e2e, q->k, ms_or_null(f.e2e, !failed));
  put(c->s_maxtbt, q->k, ms_or_null(q->st.max_gap, !failed && q->st.tokens > 1));
  put(c->s_tokens, q->k, json_integer(q->st.tokens));
  put(c->s_good, q->k, json_integer(good));
  struct tb_engine_shard *sh = c->r->env->shard;
  if (sh != NULL) /* the whole request, on the common timeline (after t0) */
    shard_request(sh->samples, c, q, &f, failed, now);
  steady_add(c, q, &f, failed, now);
  c->slots[slot] = NULL;
  tb_direct_release(&c->ds, slot);
  c->free_slots[c->n_free++] = slot;
  flight(c, -1);
  struct sess *ss = q->ss;
  rq_free(q);
  if (ss != NULL)
    sess_after(c, ss, failed);
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
  if (v < 0 || v > MAXTOK_PLACEHOLDER) /* never: TB_SPEC_MAX_OUTPUT is below */
    v = MAXTOK_PLACEHOLDER;
  snprintf(buf, sizeof buf, "%*" PRId64, MAXTOK_WIDTH, v);
  memcpy(at, buf, MAXTOK_WIDTH);
}

/* The request number k of the cell: its places in the samples (made at
 * launch; past TB_RESULT_SAMPLES_MAX requests there are none). */
static void
sample_places(struct rcell *c, uint64_t k)
{
  if (k >= TB_RESULT_SAMPLES_MAX)
    return;
  json_t *const lat[] = { c->s_lag,    c->s_ttft,  c->s_tpot, c->s_e2e,
                          c->s_maxtbt, c->s_start, c->s_end,  c->s_sched };
  for (size_t i = 0; i < TB_ARRAY_LEN(lat); i++)
    json_array_append_new(lat[i], json_null());
  json_array_append_new(c->s_tokens, json_integer(0));
  json_array_append_new(c->s_good, json_integer(0));
}

/* When request k was due (t_sched), in its sample: ms after t0, to the us. */
static void
put_sched(struct rcell *c, uint64_t k, int64_t t_sched)
{
  put(c->s_sched, k, json_real((double)((t_sched - c->t0) / 1000) / 1e3));
}

/* A request due at t_sched that could not be sent: counted, with why. */
static void
drop(struct rcell *c, int64_t t_sched, const char *why)
{
  sample_places(c, c->scheduled);
  put_sched(c, c->scheduled, t_sched);
  c->scheduled++;
  c->dropped++;
  note_error(c, why);
}

/* The marker's value of a request: the cell and the request's number (or,
 * in a conversation, its conversation's, mixed with the turn after the
 * first), so no request finds another's prefix in the server's cache; a
 * shared prefix's suffixes repeat every prefix.suffixes requests (or
 * conversations). */
static uint32_t
marker_value(const struct rcell *c, uint64_t n, unsigned turn)
{
  const struct tb_spec_prefix *px = &c->r->s->prefix;
  uint64_t sk = px->tokens > 0 && px->suffixes > 0 ? n % (uint64_t)px->suffixes : n;
  uint32_t v = ((uint32_t)(c->index & 0xff) << 24) | (uint32_t)(sk & 0xffffff);
  return turn > 0 ? v ^ (turn * 0x9e3779b1u) : v;
}

/* The body of trace request i: its prompt (tb_trace_text: the trace's
 * block sharing, seeded by the run) as the user's message, want output
 * tokens; NULL when it cannot be made. */
static char *
trace_body(struct rrun *r, int64_t i, int64_t want)
{
  int64_t words;
  char *text = tb_trace_text(&r->tr, (size_t)i, r->tr_seed, TB_SPEC_MAX_CONTEXT, &words);
  json_t *b = json_pack("{s:s, s:[{s:s, s:s}], s:I, s:b, s:b, s:{s:b, s:b}}", "model",
                        r->env->d->model, "messages", "role", "user", "content", text, "max_tokens",
                        (json_int_t)want, "stream", 1, "ignore_eos", 1, "stream_options",
                        "include_usage", 1, "continuous_usage_stats", 1);
  free(text);
  char *body = b != NULL ? json_dumps(b, JSON_COMPACT) : NULL;
  json_decref(b);
  return body;
}

/* Request k of the cell (pool entry pi, want output tokens): a lone
 * arrival's body (the entry's, its marker and max_tokens patched) or a
 * conversation's turn (the history and a new message), with the head it
 * goes out with (*head, borrowed) and their lengths. */
static struct rq *
rq_new(struct rcell *c, struct sess *ss, uint64_t k, unsigned pi, int64_t want, const char **head,
       size_t *head_len, size_t *len)
{
  struct rrun *r = c->r;
  const struct pool_entry *pe = &r->pool[pi];
  struct rq *q = tb_xcalloc(1, sizeof *q);
  tb_stream_init(&q->st, &c->sc, q, 0);
  q->c = c;
  q->ss = ss;
  q->k = k;
  q->pool = pi;
  q->want = want;
  *head = pe->head;
  *head_len = pe->head_len;
  *len = pe->len;
  if (ss != NULL && ss->tri >= 0) { /* a trace request: its own prompt */
    q->body = trace_body(r, ss->tri, want);
    if (q->body == NULL) {
      q->body = tb_xstrdup("");
      tb_stream_fail(&q->st, "the trace request's body could not be made");
    }
    *len = strlen(q->body);
    q->head = tb_direct_head_new(&r->dt, r->auth, *len);
    *head = q->head;
    *head_len = strlen(q->head);
  } else if (ss != NULL && ss->has_cv) { /* the turn: the history and a new message */
    q->turn = ss->turn++;
    c->turns[q->turn].sent++;
    char *text = tb_xstrdup(pe->text);
    patch_hex(text + pe->text_marker_at, marker_value(c, ss->conv, q->turn));
    q->body = tb_convo_next(&ss->cv, r->env->d->model, text, want);
    free(text);
    if (q->body == NULL) {
      q->body = tb_xstrdup("");
      tb_stream_fail(&q->st, "the conversation's request body could not be made");
    }
    *len = strlen(q->body);
    q->head = tb_direct_head_new(&r->dt, r->auth, *len);
    *head = q->head;
    *head_len = strlen(q->head);
  } else {
    q->body = tb_xmalloc(pe->len + 1);
    memcpy(q->body, pe->tmpl, pe->len + 1);
    patch_hex(q->body + pe->marker_at, marker_value(c, c->r->env->shard ? c->gk : k, 0));
    patch_maxtok(q->body + pe->maxtok_at, want);
  }
  return q;
}

/* Launches the next request (scheduled at t_sched): a lone arrival (ss
 * NULL, drawing from lens), a closed-loop user's next request or a
 * conversation's next turn (drawing from the session's own generator). */
/* The prompt a request draws from its generator g (the pool's entry). */
static unsigned
draw_pool(const struct rrun *r, struct tb_rng *g)
{
  return r->n_pool > 1 ? (unsigned)(tb_rng_next(g) % r->n_pool) : 0;
}

static void
launch(struct rcell *c, struct sess *ss, int64_t t_sched, struct tb_rng *lens)
{
  struct rrun *r = c->r;
  struct tb_rng *g = ss != NULL ? &ss->rng : lens;
  unsigned pi = draw_pool(r, g);
  int64_t want =
    ss != NULL && ss->tri >= 0 ? r->tr.req[ss->tri].out_tokens : tb_length_draw(&r->out, g);
  if (want < 1) /* a trace's failed request (BurstGPT's 0 response tokens) */
    want = 1;
  if (c->n_free == 0) {
    drop(c, t_sched, "dropped: every connection slot busy (2048 requests in flight)");
    if (ss != NULL) { /* its conversation ends here (a user would retry at once) */
      c->conv_abandoned += ss->has_cv;
      sess_free(c, ss);
    }
    return;
  }
  uint64_t k = c->scheduled++;
  sample_places(c, k);
  put_sched(c, k, t_sched);
  const char *head;
  size_t head_len, len;
  struct rq *q = rq_new(c, ss, k, pi, want, &head, &head_len, &len);
  unsigned slot = c->free_slots[--c->n_free];
  q->slot = slot;
  c->slots[slot] = q;
  flight(c, +1);
  q->t_sched = t_sched;
  int64_t t_start = q->st.t_start = tb_time_mono_ns();
  c->started++;
  if (ss != NULL && ss->user && ss->busy_from == 0)
    ss->busy_from = t_start;
  int64_t lag = t_start - t_sched;
  tb_stats_add(&c->lag, lag);
  put(c->s_lag, k, json_real((double)lag / 1e6));
  if (c->prev_start != 0) {
    double gp = (double)(t_start - c->prev_start);
    c->gap_sum += gp;
    c->gap_sum2 += gp * gp;
    c->gap_n++;
  }
  c->prev_start = t_start;
  if (q->st.failed)
    rq_end(c, slot, NULL);
  else if (!tb_direct_start_req(&c->ds, slot, head, head_len, q->body, len))
    rq_end(c, slot, c->ds.c[slot].err[0] ? c->ds.c[slot].err : "could not start");
}

/* Per-request timeouts (every SCAN_NS). */
static void
scan(struct rcell *c, int64_t now)
{
  const struct tb_spec *s = c->r->s;
  for (unsigned i = 0; i < c->ds.n; i++) {
    struct rq *q = c->slots[i];
    char why[120];
    if (q != NULL && tb_stream_overdue(&q->st, now, s->first_token_timeout_s, s->stall_timeout_s,
                                       why, sizeof why)) {
      tb_stream_fail(&q->st, "%s", why);
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

/* A conversation cell's own figures: its conversations, and per turn the
 * requests, TTFT and the share of the prompt the server's cache held (the
 * later turns carry the earlier ones: what a cache can serve grows). */
static void
conversation_figures(struct rcell *c, json_t *cell)
{
  json_object_set_new(cell, "conversations",
                      json_pack("{s:I, s:I, s:I, s:I}", "started", (json_int_t)c->conv_started,
                                "completed", (json_int_t)c->conv_completed, "abandoned",
                                (json_int_t)c->conv_abandoned, "dropped",
                                (json_int_t)c->conv_dropped));
  json_t *turns = json_array();
  for (int64_t t = 0; t < c->r->s->conversation.turns; t++) {
    struct turnstat *ts = &c->turns[t];
    json_t *o =
      json_pack("{s:I, s:I, s:I, s:o}", "turn", (json_int_t)(t + 1), "requests",
                (json_int_t)ts->sent, "completed", (json_int_t)ts->ok, "ttft_ms", pct(&ts->ttft));
    json_object_set_new(o, "prompt_tokens_mean",
                        ts->pr.n ? json_real((double)ts->pr.sum / (double)ts->pr.n) : json_null());
    json_object_set_new(o, "cached_pct",
                        ts->pr.cached_prompt_sum > 0 ? json_real(100.0 * (double)ts->pr.cached_sum /
                                                                 (double)ts->pr.cached_prompt_sum)
                                                     : json_null());
    json_array_append_new(turns, o);
  }
  json_object_set_new(cell, "turns", turns);
}

/* The cold-cell check (tb_checks_prefix_cell): what the cell's own prompts
 * share, from the spec's workload and what the server counted. */
static void
prefix_check(const struct rcell *c, json_t *cell)
{
  const struct rrun *r = c->r;
  const struct tb_spec *s = r->s;
  size_t nt = c->turns != NULL ? (size_t)s->conversation.turns : 0;
  double *tn = tb_xcalloc(nt ? nt : 1, sizeof *tn), *tp = tb_xcalloc(nt ? nt : 1, sizeof *tp);
  for (size_t t = 0; t < nt; t++) {
    const struct prompts *pt = &c->turns[t].pr;
    tn[t] = (double)pt->n;
    tp[t] = pt->n ? (double)pt->sum / (double)pt->n : NAN;
  }
  const struct tb_checks_prefix in = {
    .requests = (double)c->pr.n,
    .prompt_mean = c->pr.n ? (double)c->pr.sum / (double)c->pr.n : NAN,
    .prefix_tokens = (double)s->prefix.tokens,
    .suffixes = (double)s->prefix.suffixes,
    .first_turns = nt > 0 ? (double)c->conv_started : (double)c->pr.n,
    .turn_requests = tn,
    .turn_prompt = tp,
    .turns = nt,
    .implied_pct = r->trace_cell ? 100.0 * r->tr_sum.implied_hit_rate : NAN,
  };
  tb_checks_prefix_cell(cell, &in);
  free(tn);
  free(tp);
}

static void trace_figures(struct rcell *c, json_t *cell);

/* A rate cell's counts and rates: status, requests, errors, the offered,
 * achieved and goodput rates over arrivals_s and the span, the SLOs, the
 * tokens, the prompts and what the server's cache held, and its own
 * timings where it gives them. */
static void
count_figures(struct rcell *c, json_t *cell, double dur, double arr)
{
  const struct tb_spec *s = c->r->s;
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
                      c->pr.n ? json_real((double)c->pr.sum / (double)c->pr.n) : json_null());
  const struct prompts *pr = &c->pr;
  if (pr->cached_n > 0) { /* the server said how much of the prompts its cache held */
    json_t *pc = json_pack(
      "{s:I, s:I, s:I, s:f}", "requests", (json_int_t)pr->cached_n, "prompt_tokens",
      (json_int_t)pr->cached_prompt_sum, "cached_tokens", (json_int_t)pr->cached_sum, "hit_pct",
      pr->cached_prompt_sum > 0 ? 100.0 * (double)pr->cached_sum / (double)pr->cached_prompt_sum
                                : 0.0);
    json_object_set_new(cell, "prefix_cache", pc);
  }
  json_t *srv = tb_srvtime_json(&c->srv);
  if (srv != NULL)
    json_object_set_new(cell, "server_timings", srv);
}

/* A rate cell's span, its latencies' percentiles, the schedule lag, the
 * arrivals' CV and the requests in flight. */
static void
latency_figures(struct rcell *c, json_t *cell, double dur, double arr)
{
  json_object_set_new(cell, "measured_s", json_real(dur));
  json_object_set_new(cell, "arrivals_s", json_real(arr));
  json_object_set_new(cell, "ttft_ms", pct(&c->ttft));
  json_object_set_new(cell, "tpot_ms", pct(&c->tpot));
  json_object_set_new(cell, "tbt_ms", pct(&c->tbt));
  json_object_set_new(cell, "e2e_ms", pct(&c->e2e));
  json_t *lag = pct(&c->lag);
  json_object_del(lag, "p90");
  json_object_set_new(lag, "max",
                      c->lag.n ? json_real(tb_stats_quantile(&c->lag, 1) / 1e6) : json_null());
  json_object_set_new(cell, "schedule_lag_ms", lag);
  double cv = NAN;
  if (c->gap_n > 1) {
    double m = c->gap_sum / (double)c->gap_n;
    double var = (c->gap_sum2 - c->gap_sum * m) / (double)(c->gap_n - 1);
    cv = var > 0 && m > 0 ? sqrt(var) / m : 0;
  }
  json_object_set_new(cell, "interarrival_cv", isfinite(cv) ? json_real(cv) : json_null());
  json_object_set_new(cell, "max_in_flight", json_integer(c->max_inflight));
  /* the time-weighted mean from the first start to the last end */
  double span = c->flight_t > c->t0 ? (double)(c->flight_t - c->t0) : 0;
  json_object_set_new(cell, "avg_in_flight",
                      span > 0 ? json_real(c->flight_area / span) : json_null());
}

/* A measured (not merged) cell's per-request samples, handed over to the
 * cell, then the server's view, the prefix check and the energy. */
static void
sample_figures(struct rcell *c, json_t *cell)
{
  json_t *smp = json_object();
  json_object_set_new(smp, "lag_ms", c->s_lag);
  json_object_set_new(smp, "ttft_ms", c->s_ttft);
  json_object_set_new(smp, "tpot_ms", c->s_tpot);
  json_object_set_new(smp, "e2e_ms", c->s_e2e);
  json_object_set_new(smp, "max_tbt_ms", c->s_maxtbt);
  json_object_set_new(smp, "output_tokens", c->s_tokens);
  json_object_set_new(smp, "good", c->s_good);
  json_object_set_new(smp, "sched_ms", c->s_sched);
  json_object_set_new(smp, "start_ms", c->s_start);
  json_object_set_new(smp, "end_ms", c->s_end);
  c->s_lag = c->s_ttft = c->s_tpot = c->s_e2e = c->s_maxtbt = c->s_tokens = c->s_good = NULL;
  c->s_start = c->s_end = c->s_sched = NULL;
  json_object_set_new(cell, "samples", smp);
  tb_ratewatch_cell(c->watch, cell, c->r->env->kernel_stamps);
  prefix_check(c, cell);
  tb_telemetry_cell(c->r->env->telemetry, c->r->env->endpoint, cell, c->t0,
                    c->t_last_end > c->t0 ? c->t_last_end : tb_time_mono_ns());
}

/* The figures of a measured cell (or of a merged one: no samples). */
static void
cell_figures(struct rcell *c, json_t *cell)
{
  double dur = c->t_last_end > c->t0 ? (double)(c->t_last_end - c->t0) / 1e9 : 0;
  double arr = (double)(c->t_end_arrivals - c->t0) / 1e9;
  count_figures(c, cell, dur, arr);
  latency_figures(c, cell, dur, arr);
  /* the steady-state window (tb_steady): a closed-loop cell's target is its
   * users, counted busy; an open-loop cell's reference is its level, the
   * mean in flight over its offered span */
  struct tb_steady w;
  tb_steady_compute(c->sreq, c->nsreq, c->users > 0 ? c->busy : NULL, c->nbusy, c->users, &w);
  json_object_set_new(cell, "steady", tb_steady_json(&w));
  json_object_set_new(cell, "load", json_string(c->users > 0 ? "closed" : "open"));
  if (c->users > 0)
    json_object_set_new(cell, "users", json_integer(c->users));
  if (c->turns != NULL)
    conversation_figures(c, cell);
  if (c->r->trace_cell)
    trace_figures(c, cell);
  uint64_t reads = c->ds.rx_kernel + c->ds.rx_user;
  json_object_set_new(cell, "kernel_stamped",
                      json_real(reads ? (double)c->ds.rx_kernel / (double)reads : 0));
  if (c->watch == NULL) { /* a merged cell (tb_rate_cell_merged): no samples
                          * arrays, no server series; the checks of its figures */
    tb_ratewatch_cell(NULL, cell, false);
    prefix_check(c, cell);
    return;
  }
  sample_figures(c, cell);
}

/* The trace cell's own figures beside the rate cell's: the replay (its
 * requests, sessions, span and rate: the trace's own rate after the
 * window, speed-up and scale) against what was offered and achieved
 * (offered_rps, achieved_rps), and the prefix-cache hit rate the trace
 * implies beside the server's (prefix_cache.hit_pct, where it says). */
static void
trace_figures(struct rcell *c, json_t *cell)
{
  const struct rrun *r = c->r;
  const struct tb_spec_trace *t = &r->s->trace;
  const struct tb_trace_summary *sm = &r->tr_sum;
  json_t *o = json_pack("{s:s, s:I, s:I, s:f, s:f, s:f, s:f, s:I, s:I}", "format", t->format,
                        "requests", (json_int_t)sm->requests, "sessions", (json_int_t)sm->sessions,
                        "span_s", sm->span_s, "trace_rps", sm->rate, "speedup", t->speedup,
                        "rate_scale", t->rate_scale, "block_tokens", (json_int_t)sm->block_tokens,
                        "abandoned", (json_int_t)c->tr_abandoned);
  json_object_set_new(o, "implied_hit_pct", json_real(100.0 * sm->implied_hit_rate));
  /* which trace: its bytes' SHA-256, and the uploaded trace's id (a job) */
  if (r->tr.sha256[0] != '\0')
    json_object_set_new(o, "sha256", json_string(r->tr.sha256));
  if (r->tr.id[0] != '\0')
    json_object_set_new(o, "id", json_string(r->tr.id));
  const struct prompts *pr = &c->pr;
  json_object_set_new(o, "hit_pct",
                      pr->cached_prompt_sum > 0
                        ? json_real(100.0 * (double)pr->cached_sum / (double)pr->cached_prompt_sum)
                        : json_null());
  json_object_set_new(cell, "trace", o);
}

/* A cell's schedule: a function of the seed, the cell's rate and nothing
 * else (never of what the server answered). */
struct sched {
  struct tb_arrival arr;
  struct tb_rng lens;
  uint64_t k, total;
  int64_t next_t, window;
  int64_t armed; /* the timer's deadline (0: none) */
  bool by_count, done;
};

/* An open-loop arrival at sc->next_t: a lone request, or a conversation's
 * first turn. */
static void
arrive(struct rcell *c, struct sched *sc)
{
  struct tb_engine_shard *sh = c->r->env->shard;
  if (sh != NULL) { /* its own arrival (skip_others passed the rest) */
    c->gk = sc->k;
    c->sess_made = sc->k; /* a conversation's draws: its number in the schedule */
    tb_samples_radd(sh->samples, TB_SAMPLES_SCHED, (sc->next_t - c->t0) / 1000);
  }
  if (c->r->trace_cell) { /* a trace's root: a session of its own */
    struct sess *ss = sess_new(c, false);
    if (ss == NULL) {
      drop(c, sc->next_t, "dropped: a trace session arrived with 8192 alive");
      return;
    }
    ss->tri = (int64_t)c->r->tr_roots[sc->k];
    launch(c, ss, sc->next_t, NULL);
    return;
  }
  if (c->r->s->conversation.turns <= 0) {
    launch(c, NULL, sc->next_t, &sc->lens);
    return;
  }
  c->arrivals++;
  struct sess *ss = sess_new(c, false);
  if (ss == NULL) {
    c->conv_dropped++;
    drop(c, sc->next_t,
         c->nsess >= TB_RATE_MAX_SESSIONS
           ? "dropped: a conversation arrived with 8192 alive"
           : "dropped: the live conversations' text is over the cell's memory budget");
    return;
  }
  if (sh != NULL)
    ss->conv = sc->k;
  launch(c, ss, sc->next_t, NULL);
}

/* Root k's arrival in the replay, ns after the cell's t0. */
static int64_t
root_ns(const struct rrun *r, size_t k)
{
  return (int64_t)llround(r->tr.req[r->tr_roots[k]].t_s * NS_PER_S);
}

/* The schedule past arrival sc->k (just made): the next one's time, or
 * its end. */
static void
advance(struct rcell *c, struct sched *sc)
{
  sc->k++;
  if (c->r->trace_cell) { /* the next root at its time in the replay */
    if (sc->k < c->r->tr_nroots) {
      sc->next_t = c->t0 + root_ns(c->r, sc->k);
    } else {
      sc->done = true;
      c->t_end_arrivals = sc->next_t;
    }
    return;
  }
  int64_t gap = (int64_t)llround(tb_arrival_gap_s(&sc->arr) * NS_PER_S);
  sc->next_t += gap > 0 ? gap : 1;
  if (sc->k >= sc->total || (!sc->by_count && sc->next_t - c->t0 >= sc->window) ||
      sc->k >= (uint64_t)TB_SPEC_MAX_RATE_REQUESTS) {
    sc->done = true;
    c->t_end_arrivals = sc->by_count ? sc->next_t : c->t0 + sc->window;
  }
}

/* A shard's schedule past the other shards' arrivals, at once (nothing is
 * sent for them, so nothing waits for their time): their draws made, so
 * that this shard's own are those one process would have made (a
 * conversation draws from its own generator, seeded by its number). */
static void
skip_others(struct rcell *c, struct sched *sc)
{
  const struct tb_engine_shard *sh = c->r->env->shard;
  if (sh == NULL || sh->n <= 1)
    return;
  while (!sc->done && sc->k % (uint64_t)sh->n != (uint64_t)sh->k) {
    if (c->r->s->conversation.turns <= 0) {
      (void)draw_pool(c->r, &sc->lens);
      (void)tb_length_draw(&c->r->out, &sc->lens);
    }
    advance(c, sc);
  }
}

/* Launches every arrival and every session's request due by now, in order
 * of their due times (a shard: its own arrivals); re-arms the timer at the
 * next one. */
static void
launch_due(struct rcell *c, struct sched *sc)
{
  int64_t now = tb_time_mono_ns();
  skip_others(c, sc);
  for (;;) {
    bool open = !sc->done && sc->next_t <= now;
    bool sess = c->nheap > 0 && c->heap[0]->due <= now;
    if (!open && !sess)
      break;
    if (sess && (!open || c->heap[0]->due < sc->next_t)) {
      struct sess *ss = heap_pop(c);
      launch(c, ss, ss->due, NULL);
    } else {
      arrive(c, sc);
      advance(c, sc);
      skip_others(c, sc);
    }
    now = tb_time_mono_ns();
  }
  int64_t next = sc->done ? 0 : sc->next_t;
  if (c->nheap > 0 && (next == 0 || c->heap[0]->due < next))
    next = c->heap[0]->due;
  if (next != 0 && next != sc->armed) {
    arm(c->r->tfd, next);
    sc->armed = next;
  }
}

/* A cell before its first arrival: open loop at rate (users 0), or closed
 * loop with users. */
static void
cell_open(struct rcell *c, struct rrun *r, double rate, unsigned users, unsigned index)
{
  memset(c, 0, sizeof *c);
  c->r = r;
  c->rate = rate;
  c->users = users;
  c->index = index;
  c->sc.kind = TB_STREAM_RATE;
  c->sc.mem.max = r->env->cell_memory_max;
  c->sc.gaps = &c->tbt;
  c->sc.error_bodies = r->env->error_bodies;
  c->sc.ops = &rq_ops;
  unsigned n = TB_RATE_MAX_INFLIGHT;
  c->slots = tb_xcalloc(n, sizeof *c->slots);
  c->free_slots = tb_xcalloc(n, sizeof *c->free_slots);
  for (unsigned i = 0; i < n; i++)
    c->free_slots[c->n_free++] = n - 1 - i; /* slot 0 on top */
  c->heap = tb_xcalloc(TB_RATE_MAX_SESSIONS, sizeof *c->heap);
  c->busy = tb_xcalloc(users ? users : 1, sizeof *c->busy);
  if (r->s->conversation.turns > 0)
    c->turns = tb_xcalloc((size_t)r->s->conversation.turns, sizeof *c->turns);
  const struct tb_direct_ops ops = { c, rq_body, direct_end };
  tb_direct_set_init(&c->ds, &r->dt, n, r->auth, "", 0, &ops);
  c->s_lag = json_array();
  c->s_ttft = json_array();
  c->s_tpot = json_array();
  c->s_e2e = json_array();
  c->s_maxtbt = json_array();
  c->s_tokens = json_array();
  c->s_good = json_array();
  c->s_start = json_array();
  c->s_end = json_array();
  c->s_sched = json_array();
}

/* A shard's t0 (tb_engine_shard.start, polled every SHARD_POLL_NS): true
 * with *t0 set; false on the barrier's failure (c->first_error says why)
 * or when the run is cancelled. */
#define SHARD_POLL_NS 20000000LL
static bool
shard_t0(struct rcell *c, int64_t *t0)
{
  struct tb_engine_shard *sh = c->r->env->shard;
  const struct tb_rate_env *env = c->r->env;
  for (;;) {
    char why[160] = "";
    int64_t now = tb_time_mono_ns();
    int rc = sh->start(sh->cls, now, t0, why, sizeof why);
    if (rc > 0) {
      now = tb_time_mono_ns();
      sh->skew_ns = now > *t0 ? now - *t0 : 0;
      return true;
    }
    if (rc < 0) {
      snprintf(c->first_error, sizeof c->first_error, "shard start: %s", why);
      return false;
    }
    if (env->cancelled != NULL && env->cancelled(env->cls))
      return false;
    struct timespec ts = { 0, SHARD_POLL_NS };
    nanosleep(&ts, NULL);
  }
}

/* The cell's schedule (into sc), its watch, its users (closed loop), the
 * timer at the first arrival.  false: the spec's arrival process is not one
 * tb_arrival knows (no open arrivals then). */
static bool
cell_start(struct rcell *c, struct sched *sc)
{
  struct rrun *r = c->r;
  const struct tb_spec *s = r->s;
  memset(sc, 0, sizeof *sc);
  bool ok = c->users > 0 || r->trace_cell ||
            tb_arrival_init(&sc->arr, s->arrival, c->rate, (uint64_t)s->seed);
  tb_rng_seed(&sc->lens, (uint64_t)s->seed ^ 0x6c656e67746873ULL); /* "lengths" */
  sc->by_count = s->rate_requests > 0;
  sc->total = sc->by_count ? (uint64_t)s->rate_requests : UINT64_MAX;
  sc->window = (int64_t)(s->rate_duration_s * NS_PER_S);
  sc->done = !ok || c->users > 0 || (r->trace_cell && r->tr_nroots == 0);
  c->watch = tb_ratewatch_begin(r->env->d, r->env->api_key, r->env->server_series);
  /* a telemetry read that precedes the first arrival, whatever the reader
   * thread's priority lets it do (issue 26: the energy counter's edge) */
  tb_telemetry_read_now(r->env->telemetry);
  c->t0 = tb_time_mono_ns() + LEAD_NS;
  if (r->env->shard != NULL) { /* the shards' common start */
    c->shard_ran = shard_t0(c, &c->t0);
    if (!c->shard_ran) {
      sc->done = true;
      c->t0 = tb_time_mono_ns();
    }
  }
  c->t_window_end = r->trace_cell ? INT64_MAX : c->t0 + sc->window;
  sc->next_t = c->t0 + (r->trace_cell && r->tr_nroots > 0 ? root_ns(r, 0) : 0);
  /* closed loop: every user is due at t0 */
  for (unsigned u = 0; u < c->users; u++) {
    struct sess *ss = sess_new(c, true);
    if (ss == NULL)
      break;
    c->arrivals++;
    ss->due = c->t0;
    heap_push(c, ss);
  }
  arm(r->tfd, c->t0);
  sc->armed = c->t0;
  return ok;
}

/* The cell's loop, until its arrivals are over and its last request
 * ended.  false: cancelled. */
static bool
cell_loop(struct rcell *c, struct sched *sc)
{
  struct rrun *r = c->r;
  int64_t next_scan = 0, next_cancel = 0;
  struct epoll_event evs[256];
  while (!sc->done || c->inflight > 0 || c->nheap > 0) {
    launch_due(c, sc);
    int64_t now = tb_time_mono_ns();
    if (now >= next_scan) {
      scan(c, now);
      next_scan = now + SCAN_NS;
    }
    if (now >= next_cancel) {
      next_cancel = now + CANCEL_NS;
      if (r->env->cancelled != NULL && r->env->cancelled(r->env->cls))
        return false;
    }
    if (sc->done && c->inflight == 0 && c->nheap == 0)
      break;
    int wait_ms = 10; /* the scan's pace; arrivals come by the timerfd */
    int nev = epoll_wait(r->epfd, evs, (int)TB_ARRAY_LEN(evs), wait_ms);
    int64_t rt_off = nev > 0 ? tb_rxts_offset() : 0;
    for (int i = 0; i < nev; i++) {
      if (evs[i].data.u64 == TIMER_TAG) {
        uint64_t ticks;
        (void)!read(r->tfd, &ticks, sizeof ticks);
        sc->armed = 0;
        continue;
      }
      if (evs[i].data.u64 & TB_DIRECT_TAG)
        tb_direct_event(&c->ds, evs[i].data.u64, evs[i].events, rt_off);
      /* an arrival falling due while reads are handled goes out now, not
       * after the rest of the batch */
      int64_t t = tb_time_mono_ns();
      if ((!sc->done && t >= sc->next_t) || (c->nheap > 0 && t >= c->heap[0]->due))
        launch_due(c, sc);
    }
  }
  return true;
}

/* A shard's cell, over: what it adds into its samples (tb_samples' rate
 * section; START and END were added as requests ended), in microseconds. */
static void
shard_fill(struct rcell *c)
{
  struct tb_samples *m = c->r->env->shard->samples;
  struct tb_samples_rate *x = &m->rate;
  x->on = true;
  struct tb_stats *const from[] = { &c->ttft, &c->tpot, &c->e2e, &c->tbt };
  const enum tb_samples_series to[] = { TB_SAMPLES_TTFT, TB_SAMPLES_TPOT, TB_SAMPLES_E2E,
                                        TB_SAMPLES_GAP };
  for (size_t k = 0; k < TB_ARRAY_LEN(from); k++)
    for (size_t i = 0; i < from[k]->n; i++)
      tb_samples_add(m, to[k], from[k]->v[i] / 1000);
  m->tokens = c->out_tokens;
  m->completed = (int64_t)c->ok;
  m->started = (int64_t)c->started;
  m->good = (int64_t)c->good;
  m->reads = (int64_t)(c->ds.rx_kernel + c->ds.rx_user);
  m->stamped_reads = (int64_t)c->ds.rx_kernel;
  x->scheduled = (int64_t)c->scheduled;
  x->errors = (int64_t)c->errors;
  x->dropped = (int64_t)c->dropped;
  x->pr_sum = c->pr.sum;
  x->pr_n = (int64_t)c->pr.n;
  x->cached_sum = c->pr.cached_sum;
  x->cached_prompt_sum = c->pr.cached_prompt_sum;
  x->cached_n = (int64_t)c->pr.cached_n;
  x->conv_started = (int64_t)c->conv_started;
  x->conv_completed = (int64_t)c->conv_completed;
  x->conv_abandoned = (int64_t)c->conv_abandoned;
  x->conv_dropped = (int64_t)c->conv_dropped;
  x->arrivals_us = (c->t_end_arrivals - c->t0) / 1000;
  x->last_end_us = c->t_last_end > c->t0 ? (c->t_last_end - c->t0) / 1000 : 0;
  snprintf(x->first_error, sizeof x->first_error, "%s", c->first_error);
  for (int64_t t = 0; c->turns != NULL && t < c->r->s->conversation.turns; t++) {
    struct turnstat *ts = &c->turns[t];
    struct tb_samples_turn *o = tb_samples_turn(m, (size_t)t);
    if (o == NULL)
      break;
    *o = (struct tb_samples_turn){ .sent = (int64_t)ts->sent,
                                   .ok = (int64_t)ts->ok,
                                   .pr_sum = ts->pr.sum,
                                   .pr_n = (int64_t)ts->pr.n,
                                   .cached_sum = ts->pr.cached_sum,
                                   .cached_prompt_sum = ts->pr.cached_prompt_sum };
    for (size_t i = 0; i < ts->ttft.n; i++)
      tb_stats_add(&o->ttft, ts->ttft.v[i] / 1000);
  }
}

/* After the loop: the watch ends (the drain wait), what is left is closed
 * and not counted (cancelled), the figures go into cell unless cancelled,
 * and the cell's memory is freed.  ok: cell_start's. */
static void
cell_close(struct rcell *c, json_t *cell, bool ok, bool cancelled)
{
  struct rrun *r = c->r;
  const struct tb_spec *s = r->s;
  /* a shard leaves the drain to its cell's coordinator */
  tb_ratewatch_end(c->watch, cancelled || r->env->shard ? 0 : s->drain_timeout_s, r->env->cancelled,
                   r->env->cls);
  if (!ok)
    snprintf(c->first_error, sizeof c->first_error, "arrival: %s", s->arrival);
  if (r->env->shard != NULL && c->shard_ran && ok && !cancelled)
    shard_fill(c);
  if (c->users > 0)
    c->t_end_arrivals = c->prev_start > c->t0 ? c->prev_start : c->t0; /* the last start */
  flight(c, 0);
  for (unsigned i = 0; i < TB_RATE_MAX_INFLIGHT; i++) {
    struct rq *q = c->slots[i];
    if (q == NULL)
      continue;
    c->slots[i] = NULL;
    if (q->ss != NULL)
      sess_free(c, q->ss);
    rq_free(q);
  }
  while (c->nheap > 0)
    sess_free(c, heap_pop(c));
  tb_direct_set_free(&c->ds);
  struct itimerspec off = { { 0, 0 }, { 0, 0 } };
  (void)timerfd_settime(r->tfd, 0, &off, NULL);
  if (!cancelled)
    cell_figures(c, cell);
  json_t *const samples[] = { c->s_lag,    c->s_ttft, c->s_tpot,  c->s_e2e, c->s_maxtbt,
                              c->s_tokens, c->s_good, c->s_start, c->s_end, c->s_sched };
  for (size_t i = 0; i < TB_ARRAY_LEN(samples); i++)
    json_decref(samples[i]);
  struct tb_stats *const stats[] = { &c->ttft, &c->tpot, &c->tbt, &c->e2e, &c->lag };
  for (size_t i = 0; i < TB_ARRAY_LEN(stats); i++)
    tb_stats_free(stats[i]);
  tb_ratewatch_free(c->watch);
  tb_srvtime_free(&c->srv);
  for (int64_t t = 0; t < s->conversation.turns; t++)
    tb_stats_free(&c->turns[t].ttft);
  free(c->turns);
  free(c->sreq);
  free(c->busy);
  free(c->heap);
  free(c->slots);
  free(c->free_slots);
}

/* Runs one cell into cell (its key set): open loop at rate (users 0), or
 * closed loop with users; false: cancelled. */
static bool
cell_run(struct rrun *r, double rate, unsigned users, unsigned index, json_t *cell)
{
  struct rcell c;
  struct sched sc;
  cell_open(&c, r, rate, users, index);
  bool ok = cell_start(&c, &sc);
  bool cancelled = !cell_loop(&c, &sc);
  cell_close(&c, cell, ok, cancelled);
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
                        "max_tokens", (json_int_t)MAXTOK_PLACEHOLDER, "stream", 1, "ignore_eos", 1,
                        "stream_options", "include_usage", 1, "continuous_usage_stats", 1);
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
  pe->text = tb_xstrdup(p->text);
  pe->text_marker_at = (size_t)(strstr(pe->text, MARKER) - pe->text) + 2;
  pe->head = tb_direct_head_new(&r->dt, r->auth, pe->len);
  pe->head_len = strlen(pe->head);
  return true;
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
  /* a conversation's last turn carries every earlier one: each turn's
   * message and answer, and a template's few tokens a message (counted
   * as 8, more than the engines' templates take) */
  int64_t turns = s->conversation.turns > 0 ? s->conversation.turns : 1;
  int64_t last = turns * (r->in.hi + r->out.hi + 16) + s->prefix.tokens;
  if (s->conversation.turns > 0 && env->d->max_model_len > 0 && last > env->d->max_model_len) {
    r->setup_err =
      tb_xasprintf("a conversation's last turn (%" PRId64 " turns of up to %" PRId64 " + %" PRId64
                   " tokens, with the prefix: %" PRId64 ") exceeds max_model_len (%" PRId64 ")",
                   turns, r->in.hi, r->out.hi, last, env->d->max_model_len);
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
  r->direct = tb_direct_setup(&r->dt, chat_url, env->kernel_stamps, env->curl_streams, r->epfd);
  free(chat_url);
  if (!r->direct) {
    r->setup_err = tb_xstrdup("rate cells need the engine's own transport: a plain-HTTP "
                              "endpoint without a proxy (and TB_ENGINE_CURL_STREAMS unset)");
    return;
  }
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
    int64_t len = r->n_pool == 1
                    ? r->in.lo
                    : r->in.lo + (r->in.hi - r->in.lo) * (int64_t)i / (int64_t)(r->n_pool - 1);
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

static int
cmp_root(const void *a, const void *b, void *cls)
{
  const struct tb_trace *t = cls;
  double x = t->req[*(const size_t *)a].t_s, y = t->req[*(const size_t *)b].t_s;
  size_t i = *(const size_t *)a, j = *(const size_t *)b;
  return x < y ? -1 : x > y ? 1 : (i > j) - (i < j);
}

/* The trace cell's replay of env->trace as the spec's trace object asks
 * (inputs capped to fit the server's length with their output), its roots
 * in order of arrival, the turns after each request, the summary, the
 * prompts' seed (the spec's seed and the run: no two runs share a block). */
static void
trace_setup(struct rrun *r)
{
  const struct tb_spec *s = r->s;
  const struct tb_spec_trace *t = &s->trace;
  if (r->env->trace == NULL) {
    r->tr_err = tb_xstrdup("the spec's trace names no trace (tokbench run --trace FILE, or an "
                           "uploaded trace's id)");
    return;
  }
  int64_t mml = r->env->d->max_model_len;
  int64_t cap_out = t->max_output > 0 ? t->max_output : 0;
  struct tb_trace_opts o = {
    .start_s = t->start_s,
    .duration_s = t->duration_s,
    .speedup = t->speedup,
    .rate_scale = t->rate_scale,
    .max_output = cap_out,
    .max_requests = (size_t)t->max_requests,
  };
  if (mml > 0) { /* input + output + the template's few tokens within the length */
    if (o.max_output == 0 || o.max_output > mml / 2)
      o.max_output = mml / 2;
    o.max_input = mml - o.max_output - 64;
  }
  tb_trace_replay(r->env->trace, &o, &r->tr);
  tb_trace_summarize(&r->tr, &r->tr_sum);
  size_t n = r->tr.n ? r->tr.n : 1;
  r->tr_roots = tb_xmalloc(n * sizeof *r->tr_roots);
  r->tr_child = tb_xmalloc(n * sizeof *r->tr_child);
  r->tr_sib = tb_xmalloc(n * sizeof *r->tr_sib);
  for (size_t i = 0; i < r->tr.n; i++)
    r->tr_child[i] = r->tr_sib[i] = -1;
  for (size_t i = r->tr.n; i-- > 0;) { /* children in file order */
    int64_t p = r->tr.req[i].parent;
    if (p < 0) {
      r->tr_roots[r->tr_nroots++] = i;
    } else {
      r->tr_sib[i] = r->tr_child[p];
      r->tr_child[p] = (int64_t)i;
    }
  }
  qsort_r(r->tr_roots, r->tr_nroots, sizeof *r->tr_roots, cmp_root, &r->tr);
  uint64_t h = 1469598103934665603ULL;
  for (const char *p = r->env->run_id ? r->env->run_id : ""; *p; p++)
    h = (h ^ (unsigned char)*p) * 1099511628211ULL;
  r->tr_seed = h ^ (uint64_t)s->seed;
  if (r->tr.n == 0)
    r->tr_err = tb_xstrdup("the trace's window holds no request");
}

static void
teardown(struct rrun *r)
{
  tb_trace_free(&r->tr);
  free(r->tr_roots);
  free(r->tr_child);
  free(r->tr_sib);
  free(r->tr_err);
  for (unsigned i = 0; i < TB_RATE_INPUT_POOL; i++) {
    free(r->pool[i].tmpl);
    free(r->pool[i].text);
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
cell_key(const struct rrun *r, unsigned index, double rate, unsigned users)
{
  int64_t ctx = (r->in.lo + r->in.hi) / 2;
  json_t *cell = tb_result_cell_new("rate", ctx, index);
  if (users > 0) {
    json_object_set_new(cell, "users", json_integer(users));
  } else {
    json_object_set_new(cell, "rate_rps", json_real(rate));
    json_object_set_new(cell, "arrival", json_string(r->s->arrival));
  }
  return cell;
}

/* Whether done (a cell of an earlier attempt) is the cell at rate (or of
 * users). */
static bool
same_load(const json_t *done, double rate, unsigned users)
{
  if (users > 0)
    return json_integer_value(json_object_get(done, "users")) == (json_int_t)users;
  return fabs(json_number_value(json_object_get(done, "rate_rps")) - rate) < 1e-9 * rate;
}

/* The server's prefix cache emptied before a rate or trace cell when the
 * spec says so (cache: reset; tb_cachereset), the outcome in the cell:
 * cache_reset "done", "unsupported" or "refused", and why. */
static void
cache_reset(const struct rrun *r, json_t *cell)
{
  if (strcmp(r->s->cache, "reset") != 0)
    return;
  char why[TB_CACHERESET_WHY_MAX];
  enum tb_cache_reset cr =
    tb_cache_reset_once(r->env->reset_memo, r->env->d, r->env->api_key, why, sizeof why);
  json_object_set_new(cell, "cache_reset", json_string(tb_cache_reset_name(cr)));
  json_object_set_new(cell, "cache_reset_detail", json_string(why));
}

/* One cell, open loop at rate (users 0) or closed loop with users: kept
 * from done_cells, or measured and emitted.  The cell's attainment into
 * *att (NAN when not valid).  false: stop. */
static bool
one_cell(struct rrun *r, double rate, unsigned users, const char *role, double *att)
{
  const struct tb_rate_env *env = r->env;
  /* a shard's one cell carries its number in the whole run (markers, seeds) */
  unsigned index = ++r->index;
  if (env->shard != NULL && env->shard->index > 0)
    index = r->index = env->shard->index;
  *att = NAN;
  json_t *cell = cell_key(r, index, rate, users);
  const json_t *done = tb_result_find_cell(
    env->done_cells, "rate", json_integer_value(json_object_get(cell, "context")), index);
  if (done != NULL && same_load(done, rate, users)) {
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
  if (r->setup_err == NULL && env->shard == NULL)
    cache_reset(r, cell);
  if (r->setup_err != NULL) {
    tb_result_cell_set_status(cell, "error", r->setup_err);
  } else if (users == 0 && strcmp(role, "rate") == 0 && env->shard_cell != NULL &&
             env->shard_cell(env->cls, rate, index, cell)) {
    /* measured by the caller's shards (issue 24); stopped meanwhile: not
     * measured, never emitted */
    if (env->cancelled != NULL && env->cancelled(env->cls)) {
      r->cancelled = true;
      json_decref(cell);
      return false;
    }
    /* priced from its merged tokens and span; its energy is not read (as
     * a sharded decode cell's, tb_engine.c) */
    tb_telemetry_cell(NULL, env->endpoint, cell, 0, 0);
  } else if (!cell_run(r, rate, users, index, cell)) {
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

/* The trace cell: the spec's trace replayed (kept from done_cells when
 * an earlier attempt measured it).  false: stop. */
static bool
trace_cell(struct rrun *r)
{
  const struct tb_rate_env *env = r->env;
  unsigned index = ++r->index;
  int64_t ctx = (int64_t)llround(r->tr_sum.in.mean);
  json_t *cell = tb_result_cell_new("rate", ctx, index);
  json_object_set_new(cell, "trace_format", json_string(r->s->trace.format));
  const json_t *done = tb_result_find_cell(env->done_cells, "rate", ctx, index);
  if (done != NULL && json_object_get(done, "trace") != NULL) {
    json_decref(cell);
    if (env->keep != NULL)
      env->keep(env->cls, done);
    return true;
  }
  json_object_set_new(cell, "role", json_string("trace"));
  if (env->progress != NULL)
    env->progress(env->cls, cell);
  if (r->setup_err != NULL || r->tr_err != NULL) {
    tb_result_cell_set_status(cell, "error", r->setup_err ? r->setup_err : r->tr_err);
  } else {
    cache_reset(r, cell);
    r->trace_cell = true;
    bool ok = cell_run(r, 0, 0, index, cell);
    r->trace_cell = false;
    if (!ok) {
      r->cancelled = true;
      json_decref(cell);
      return false;
    }
  }
  if (!env->emit(env->cls, cell)) {
    r->cancelled = true;
    return false;
  }
  return true;
}

/* A key of the sweep's object: "<what>_rps" over rate, or
 * "<what>_concurrency" over concurrency (static buffer). */
static const char *
sweep_key(bool closed, const char *what)
{
  static char k[48];
  snprintf(k, sizeof k, "%s_%s", what, closed ? "concurrency" : "rps");
  return k;
}

/* The sweep: its probes (cells), then its object (docs/engine.md,
 * "Sweeps"). */
static json_t *
run_sweep(struct rrun *r)
{
  const struct tb_spec_sweep *sw = &r->s->sweep;
  bool closed = r->p->sweep_closed;
  double target = sw->attainment_pct / 100.0;
  double vals[64];
  bool pass[64];
  size_t n = 0;
  double found = 0, hi = 0, att;
  json_t *probes = json_array();
  for (;;) {
    double next = tb_plan_sweep_next(sw, vals, pass, n, &found, &hi);
    if (next <= 0 || n >= TB_ARRAY_LEN(vals))
      break;
    unsigned index = r->index + 1;
    unsigned users = closed ? (unsigned)llround(next) : 0;
    if (!one_cell(r, closed ? 0 : next, users, "sweep", &att))
      break;
    vals[n] = next;
    pass[n] = isfinite(att) && att >= target - 1e-12;
    json_t *pr = json_pack("{s:I, s:o, s:b}", "cell", (json_int_t)index, "attainment",
                           isfinite(att) ? json_real(att) : json_null(), "pass", pass[n]);
    json_object_set_new(pr, closed ? "users" : "rate_rps",
                        closed ? json_integer(users) : json_real(next));
    json_array_append_new(probes, pr);
    n++;
  }
  (void)tb_plan_sweep_next(sw, vals, pass, n, &found, &hi);
  double vmax = closed ? (double)sw->max_concurrency : sw->max_rps;
  double step = closed ? (double)sw->step_concurrency : sw->step_rps;
  json_t *o = json_object();
  json_object_set_new(o, "over", json_string(closed ? "concurrency" : "rate"));
  json_object_set_new(o, "attainment_pct", json_real(sw->attainment_pct));
  json_object_set_new(o, "slo", slo_json(&r->s->slo));
  json_object_set_new(o, sweep_key(closed, "min"),
                      closed ? json_integer(sw->min_concurrency) : json_real(sw->min_rps));
  json_object_set_new(o, sweep_key(closed, "max"),
                      closed ? json_integer(sw->max_concurrency) : json_real(sw->max_rps));
  json_object_set_new(o, sweep_key(closed, "step"),
                      closed ? json_integer(sw->step_concurrency) : json_real(sw->step_rps));
  json_object_set_new(o, "max_probes", json_integer(sw->max_probes));
  json_object_set_new(o, "probes", probes);
  json_object_set_new(o, sweep_key(closed, "found"), found > 0 ? json_real(found) : json_null());
  json_object_set_new(o, sweep_key(closed, "fails_at"), hi > 0 ? json_real(hi) : json_null());
  char why[48];
  snprintf(why, sizeof why, "%s",
           r->cancelled                                ? "cancelled"
           : found == 0                                ? sweep_key(closed, "below_min")
           : hi == 0 && found >= vmax                  ? sweep_key(closed, "at_max")
           : hi > 0 && hi - found <= step * (1 + 1e-9) ? "converged"
                                                       : "out_of_probes");
  json_object_set_new(o, "outcome", json_string(why));
  return o;
}

enum tb_rate_status
tb_rate_run(const struct tb_plan *p, const struct tb_rate_env *env, json_t **sweep)
{
  struct rrun run;
  struct rrun *r = &run;
  memset(r, 0, sizeof *r);
  r->p = p;
  r->s = p->spec;
  r->env = env;
  r->epfd = r->tfd = -1;
  *sweep = NULL;
  setup(r);
  if (p->trace)
    trace_setup(r);
  double att;
  const struct tb_plan_cell *rate = p->cells + p->n_matrix;
  for (size_t i = 0; i < p->n_rate && !r->cancelled; i++)
    if (!one_cell(r, rate[i].rate_rps, 0, "rate", &att))
      break;
  if (p->trace && !r->cancelled)
    (void)trace_cell(r);
  if (p->sweep && !r->cancelled)
    *sweep = run_sweep(r);
  enum tb_rate_status st = r->cancelled ? TB_RATE_CANCELLED : TB_RATE_OK;
  teardown(r);
  return st;
}

/* ------------------------------------------------------ a merged cell */

/* A series of us as ns. */
static void
us_to_ns(const struct tb_stats *us, struct tb_stats *ns)
{
  for (size_t i = 0; i < us->n; i++)
    tb_stats_add(ns, us->v[i] > INT64_MAX / 1000 ? INT64_MAX : us->v[i] * 1000);
}

/* The union's requests, each whole, for the steady-state window
 * (tb_steady, issue 25) on the common timeline: the shards' aligned series
 * (tb_samples_rseries), every request (no cap of the samples arrays); none
 * when they do not align. */
static void
merged_requests(const struct tb_samples *m, struct rcell *c)
{
  const struct tb_stats *x = m->rate.s;
  size_t n = x[TB_SAMPLES_START].n;
  const enum tb_samples_rseries al[] = { TB_SAMPLES_END, TB_SAMPLES_ROK, TB_SAMPLES_RTTFT,
                                         TB_SAMPLES_RTPOT, TB_SAMPLES_RTOKENS };
  for (size_t k = 0; k < TB_ARRAY_LEN(al); k++)
    if (x[al[k]].n != n)
      return;
  c->sreq = n ? tb_xcalloc(n, sizeof *c->sreq) : NULL;
  c->nsreq = c->capsreq = n;
  for (size_t i = 0; i < n; i++) {
    bool ok = x[TB_SAMPLES_ROK].v[i] != 0;
    int64_t ttft = x[TB_SAMPLES_RTTFT].v[i], tpot = x[TB_SAMPLES_RTPOT].v[i];
    c->sreq[i] = (struct tb_steady_req){ .start_us = x[TB_SAMPLES_START].v[i],
                                         .end_us = x[TB_SAMPLES_END].v[i],
                                         .ok = ok,
                                         .ttft_ms = ttft > 0 ? (double)(ttft - 1) / 1e3 : NAN,
                                         .tpot_ms = tpot > 0 ? (double)(tpot - 1) / 1e3 : NAN,
                                         .tokens = ok ? x[TB_SAMPLES_RTOKENS].v[i] : 0 };
  }
}

bool
tb_rate_cell_merged(const struct tb_spec *s, struct tb_samples *m, json_t *cell, char *err,
                    size_t errlen)
{
  if (!m->rate.on) {
    snprintf(err, errlen, "merged rate cell: no shard gave a rate cell's samples");
    return false;
  }
  const struct tb_samples_rate *x = &m->rate;
  const struct tb_rate_env env = { .kernel_stamps = false };
  struct rrun r = { .s = s, .env = &env };
  struct rcell c = { .r = &r, .rate = json_number_value(json_object_get(cell, "rate_rps")) };
  c.scheduled = (uint64_t)x->scheduled;
  c.started = (uint64_t)m->started;
  c.ok = (uint64_t)m->completed;
  c.errors = (uint64_t)x->errors;
  c.dropped = (uint64_t)x->dropped;
  c.good = (uint64_t)m->good;
  c.out_tokens = m->tokens;
  c.pr = (struct prompts){ .sum = x->pr_sum,
                           .n = (uint64_t)x->pr_n,
                           .cached_sum = x->cached_sum,
                           .cached_prompt_sum = x->cached_prompt_sum,
                           .cached_n = (uint64_t)x->cached_n };
  /* the common timeline: t0 is 0 */
  c.t_end_arrivals = x->arrivals_us * 1000;
  c.t_last_end = x->last_end_us * 1000;
  c.flight_t = c.t_last_end;
  tb_samples_in_flight(m, &c.max_inflight, &c.flight_area);
  merged_requests(m, &c); /* before the starts are sorted */
  tb_samples_start_gaps(m, &c.gap_sum, &c.gap_sum2, &c.gap_n);
  us_to_ns(&m->s[TB_SAMPLES_TTFT], &c.ttft);
  us_to_ns(&m->s[TB_SAMPLES_TPOT], &c.tpot);
  us_to_ns(&m->s[TB_SAMPLES_E2E], &c.e2e);
  us_to_ns(&m->s[TB_SAMPLES_GAP], &c.tbt);
  us_to_ns(&x->s[TB_SAMPLES_LAG], &c.lag);
  c.conv_started = (uint64_t)x->conv_started;
  c.conv_completed = (uint64_t)x->conv_completed;
  c.conv_abandoned = (uint64_t)x->conv_abandoned;
  c.conv_dropped = (uint64_t)x->conv_dropped;
  size_t nt = s->conversation.turns > 0 ? (size_t)s->conversation.turns : 0;
  if (nt > 0)
    c.turns = tb_xcalloc(nt, sizeof *c.turns);
  for (size_t t = 0; t < nt && t < x->nturns; t++) {
    const struct tb_samples_turn *o = &x->turns[t];
    struct turnstat *ts = &c.turns[t];
    ts->sent = (uint64_t)o->sent;
    ts->ok = (uint64_t)o->ok;
    ts->pr = (struct prompts){ .sum = o->pr_sum,
                               .n = (uint64_t)o->pr_n,
                               .cached_sum = o->cached_sum,
                               .cached_prompt_sum = o->cached_prompt_sum };
    us_to_ns(&o->ttft, &ts->ttft);
  }
  snprintf(c.first_error, sizeof c.first_error, "%s", x->first_error);
  c.ds.rx_kernel = (uint64_t)m->stamped_reads;
  c.ds.rx_user = (uint64_t)(m->reads - m->stamped_reads);
  cell_figures(&c, cell);
  struct tb_stats *const stats[] = { &c.ttft, &c.tpot, &c.tbt, &c.e2e, &c.lag };
  for (size_t i = 0; i < TB_ARRAY_LEN(stats); i++)
    tb_stats_free(stats[i]);
  for (size_t t = 0; t < nt; t++)
    tb_stats_free(&c.turns[t].ttft);
  free(c.turns);
  free(c.sreq);
  return true;
}
