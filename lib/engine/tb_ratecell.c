/*
 * tb_ratecell: one rate cell's loop.  See tb_ratecell.h.
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
 * Requests.  A request's body is its pool entry's (tb_rate.c, "Prompts")
 * with its own number patched into the marker and its own output length
 * into max_tokens, sent with the entry's head; a conversation's turn
 * (tb_convo) and a trace's request (tb_tracecell_body) have a body and a
 * head of their own.
 *
 * Timing.  A request's response goes to tb_stream (the consumer the matrix
 * uses too).  Its figures are taken from the kernel's receive stamps of its
 * reads: TTFT = first output token - actual start; TPOT = (last
 * token - first token) / (tokens - 1); TBT = each gap between two token
 * chunks (per token when a chunk carries several); e2e = last byte -
 * actual start.  Lag = actual start - scheduled start.
 *
 * The cell's figures, from what it counted: tb_ratefig.
 */
#include "engine/tb_ratecell.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/timerfd.h>
#include <time.h>
#include <unistd.h>

#include "base/tb_arrival.h"
#include "base/tb_stats.h"
#include "engine/tb_convo.h"
#include "engine/tb_engine.h"
#include "engine/tb_ratefig.h"
#include "engine/tb_ratewatch.h"
#include "engine/tb_stream.h"
#include "engine/tb_telemetry.h"
#include "engine/tb_tracecell.h"
#include "net/tb_direct.h"
#include "net/tb_http.h"
#include "net/tb_oai.h"
#include "net/tb_rxts.h"
#include "result/tb_result.h"
#include "result/tb_samples.h"
#include "result/tb_srvtime.h"
#include "result/tb_steady.h"

#define NS_PER_S 1000000000LL
#define SCAN_NS 10000000LL        /* per-request timeout checks */
#define CANCEL_NS 100000000LL     /* cancelled() polls */
#define LEAD_NS 20000000LL        /* the first arrival: this long after set-up */
#define FAIL_PAUSE_NS 100000000LL /* a closed-loop user after a failed request */

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
void
tb_ratecell_heap_push(struct rcell *c, struct sess *ss)
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
struct sess *
tb_ratecell_sess_new(struct rcell *c, bool user)
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
static void
sess_after(struct rcell *c, struct sess *ss, bool failed)
{
  int64_t now = tb_time_mono_ns();
  if (ss->tri >= 0) {
    tb_tracecell_after(c, ss, failed, now);
    sess_free(c, ss);
    return;
  }
  if (ss->has_cv) {
    if (!failed) {
      tb_convo_answered(&ss->cv);
      if (ss->turn < (unsigned)c->r->s->conversation.turns) {
        ss->due = now + think_ns(c, ss);
        tb_ratecell_heap_push(c, ss);
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
    tb_ratecell_heap_push(c, ss);
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
      .predicted_ms = t->predicted_ms,
      .predicted_per_token_ms = t->predicted_per_token_ms,
      .ttft_ms = (double)f->ttft / 1e6,
      .tpot_ms = f->have_tpot ? (double)f->tpot / 1e6 : NAN,
      .tokens = tb_stream_got(st),
    };
    c->srv.source = TB_SRVTIME_LLAMACPP;
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

/* Patches the request number into a body copy (hex, TB_RATECELL_MARKER_DIGITS wide). */
static void
patch_hex(char *at, uint32_t v)
{
  static const char hex[] = "0123456789abcdef";
  for (int i = TB_RATECELL_MARKER_DIGITS - 1; i >= 0; i--) {
    at[i] = hex[v & 15];
    v >>= 4;
  }
}

static void
patch_maxtok(char *at, int64_t v)
{
  char buf[TB_RATECELL_MAXTOK_WIDTH + 1];
  if (v < 0 || v > TB_RATECELL_MAXTOK_PLACEHOLDER) /* never: TB_SPEC_MAX_OUTPUT is below */
    v = TB_RATECELL_MAXTOK_PLACEHOLDER;
  snprintf(buf, sizeof buf, "%*" PRId64, TB_RATECELL_MAXTOK_WIDTH, v);
  memcpy(at, buf, TB_RATECELL_MAXTOK_WIDTH);
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
    q->body = tb_tracecell_body(r, ss->tri, want);
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

/* The prompt a request draws from its generator g (the pool's entry). */
static unsigned
draw_pool(const struct rrun *r, struct tb_rng *g)
{
  return r->n_pool > 1 ? (unsigned)(tb_rng_next(g) % r->n_pool) : 0;
}

/* Launches the next request (scheduled at t_sched): a lone arrival (ss
 * NULL, drawing from lens), a closed-loop user's next request or a
 * conversation's next turn (drawing from the session's own generator). */
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

/* ------------------------------------------------------------- the cell */

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
    struct sess *ss = tb_ratecell_sess_new(c, false);
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
  struct sess *ss = tb_ratecell_sess_new(c, false);
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

/* The schedule past arrival sc->k (just made): the next one's time, or
 * its end. */
static void
advance(struct rcell *c, struct sched *sc)
{
  sc->k++;
  if (c->r->trace_cell) { /* the next root at its time in the replay */
    if (sc->k < c->r->tr_nroots) {
      sc->next_t = c->t0 + tb_tracecell_root_ns(c->r, sc->k);
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
  sc->next_t = c->t0 + (r->trace_cell && r->tr_nroots > 0 ? tb_tracecell_root_ns(r, 0) : 0);
  /* closed loop: every user is due at t0 */
  for (unsigned u = 0; u < c->users; u++) {
    struct sess *ss = tb_ratecell_sess_new(c, true);
    if (ss == NULL)
      break;
    c->arrivals++;
    ss->due = c->t0;
    tb_ratecell_heap_push(c, ss);
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
    int wait_ms = 10;        /* the scan's pace; arrivals come by the timerfd */
    tb_direct_flush(&c->ds); /* the arrivals launched: out in one submit */
    int nev = epoll_wait(r->epfd, evs, (int)TB_ARRAY_LEN(evs), wait_ms);
    int64_t rt_off = nev > 0 ? tb_rxts_offset() : 0;
    for (int i = 0; i < nev; i++) {
      if (evs[i].data.u64 == TB_RATECELL_TIMER_TAG) {
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
      if ((!sc->done && t >= sc->next_t) || (c->nheap > 0 && t >= c->heap[0]->due)) {
        launch_due(c, sc);
        tb_direct_flush(&c->ds);
      }
    }
  }
  return true;
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
    tb_ratefig_shard(c);
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
    tb_ratefig_cell(c, cell);
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
bool
tb_ratecell_run(struct rrun *r, double rate, unsigned users, unsigned index, json_t *cell)
{
  struct rcell c;
  struct sched sc;
  cell_open(&c, r, rate, users, index);
  bool ok = cell_start(&c, &sc);
  bool cancelled = !cell_loop(&c, &sc);
  cell_close(&c, cell, ok, cancelled);
  return !cancelled;
}
