/*
 * tb_cell: one decode cell, or a context's scout.  See tb_cell.h; the
 * design (readiness, the window, counting, faults) is tb_engine.c's.
 */
#include "engine/tb_cell.h"

#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/tb_json.h"
#include "engine/tb_prompt.h"
#include "engine/tb_telemetry.h"
#include "net/tb_rxts.h"
#include "result/tb_checks.h"
#include "result/tb_result.h"
#include "result/tb_samples.h"

#define METRICS_BODY_MAX (4u * 1024u * 1024u)
#define NS_PER_S 1000000000LL
#define SCAN_NS 10000000LL                              /* per-stream checks: every 10 ms */
#define CONNECT_TIMEOUT_MS TB_DIRECT_CONNECT_TIMEOUT_MS /* either transport */
/* How long a server may run more requests than ours before a cell that is
 * getting ready says it is loaded by someone else (at most half the ready
 * timeout). */
#define FOREIGN_LOAD_S 20.0
/* How long the server must hold fewer than C of our requests running and
 * the rest waiting (its gauges) before a cell getting ready is over
 * capacity with the cap it measured (at most half the ready timeout): a
 * scheduler cap the server does not publish (vLLM's --max-num-seqs), or a
 * KV cache that admits only so many. */
#define SCHED_CAP_S 3.0

struct tb_cell_stream {
  struct tb_stream st; /* the consumer: bytes, counts, samples, reasons */
  struct tb_cell *cell;
  CURL *easy;
  unsigned slot;
  char curl_err[CURL_ERROR_SIZE];
  bool direct;      /* on the cell's tb_direct_set, slot `slot` */
  int64_t prev_tok; /* its last token chunk (a shard's gaps) */
};

/* ------------------------------------------------------------- streams */

static void cell_fail(struct tb_cell *c, const char *fmt, ...) TB_PRINTF(2, 3);

static void
cell_fail(struct tb_cell *c, const char *fmt, ...)
{
  if (c->failed || c->phase == TB_CELL_DONE)
    return;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(c->reason, sizeof c->reason, fmt, ap);
  va_end(ap);
  c->failed = true;
  c->phase = TB_CELL_DONE;
}

/* When a stream's request went out: its start, plus what the transport
 * spent before it could send (a new connection's TCP and TLS handshakes,
 * which are the network's time, not the server's: METHOD.md's TTFT is the
 * prefill).  Over TLS a cold scout's new connection would otherwise add a
 * handshake to the prefill TTFT, and a remote endpoint's new connection a
 * round trip. */
static int64_t
stream_sent_at(const struct tb_cell_stream *s)
{
  int64_t t_start = s->st.t_start;
  if (s->direct)
    return tb_direct_sent_at(&s->cell->ds, s->slot, t_start);
  curl_off_t pre = 0;
  if (!s->direct && s->easy != NULL &&
      curl_easy_getinfo(s->easy, CURLINFO_PRETRANSFER_TIME_T, &pre) == CURLE_OK && pre > 0 &&
      t_start + (int64_t)pre * 1000 < s->st.now)
    return t_start + (int64_t)pre * 1000;
  return t_start;
}

/* tb_stream_ops of the matrix's streams (cls: the struct tb_cell_stream). */

/* An event: the cell's token source, the debug hook. */
static bool
on_stream_event(void *cls, struct tb_stream *st, const char *data, size_t len, int64_t delta)
{
  struct tb_cell_stream *s = cls;
  struct tb_cell *c = s->cell;
  (void)data;
  (void)len;
  if (st->count.chunk_mode)
    c->chunk_source = true;
  const struct tb_engine_hooks *h = c->run->hooks;
  if (h != NULL && h->on_event != NULL && !c->scout)
    h->on_event(h->cls, s->slot, st->now, NULL, 0, delta);
  return true;
}

/* Tokens: the first one's TTFT and the slot warmed; the window's. */
static void
on_stream_tokens(void *cls, struct tb_stream *st, int64_t delta, unsigned flags)
{
  struct tb_cell_stream *s = cls;
  struct tb_cell *c = s->cell;
  int64_t now = st->now;
  if (flags & TB_STREAM_FIRST) {
    int64_t ttft = now - stream_sent_at(s);
    tb_stats_add(&c->ttft, ttft);
    if (!c->warmed[s->slot]) {
      c->warmed[s->slot] = true;
      c->n_warmed++;
      if (c->n_warmed == c->conc)
        c->all_warmed = now;
    }
    if (c->scout)
      c->scout_ttft_ns = ttft;
  }
  /* a shard keeps every gap inside the window, per token */
  if ((flags & TB_STREAM_IN_WINDOW) && !(flags & TB_STREAM_FIRST) && s->prev_tok != 0 &&
      c->run->tgt->shard != NULL && now > s->prev_tok)
    tb_stats_add(&c->gaps, (now - s->prev_tok) / delta);
  s->prev_tok = now;
  if (flags & TB_STREAM_IN_WINDOW) {
    c->win_tokens += delta;
    if (delta > c->max_chunk)
      c->max_chunk = delta;
    if (c->n_slices > 0) {
      size_t k = (size_t)((now - c->sc.w0) / c->slice_ns);
      c->slice_tok[k < c->n_slices ? k : c->n_slices - 1] += delta;
    }
  }
}

static void
on_stream_comment(void *cls, struct tb_stream *st, const char *text, size_t len)
{
  struct tb_cell_stream *s = cls;
  const struct tb_engine_hooks *h = s->cell->run->hooks;
  if (h != NULL && h->on_event != NULL && !s->cell->scout)
    h->on_event(h->cls, s->slot, st->now, text, len, 0);
}

static const struct tb_stream_ops stream_ops = {
  .event = on_stream_event,
  .tokens = on_stream_tokens,
  .comment = on_stream_comment,
};

static size_t
stream_write(char *ptr, size_t size, size_t nmemb, void *ud)
{
  struct tb_cell_stream *s = ud;
  size_t n = size * nmemb;
  long status = s->st.http_status;
  if (!s->st.http_checked)
    curl_easy_getinfo(s->easy, CURLINFO_RESPONSE_CODE, &status);
  int64_t io = s->cell->run->tp.io_now;
  int64_t now = io != 0 ? io : tb_time_mono_ns();
  return tb_stream_body(&s->st, status, now, ptr, n) ? n : 0; /* 0 aborts the transfer */
}

/* ------------------------------------------------- direct transport */

static void stream_end(struct tb_cell_stream *s, const char *transport_err);

/* tb_direct_ops of a cell (cls): a slot's body bytes, its end. */
static bool
direct_body(void *cls, unsigned slot, int status, int64_t stamp, const char *data, size_t n)
{
  struct tb_cell *c = cls;
  struct tb_cell_stream *s = c->slots[slot];
  return tb_stream_body(&s->st, status, stamp != 0 ? stamp : tb_time_mono_ns(), data, n);
}

static void
direct_end(void *cls, unsigned slot, const char *err)
{
  struct tb_cell *c = cls;
  stream_end(c->slots[slot], err);
}

static void
stream_free(struct tb_cell_stream *s)
{
  if (s == NULL)
    return;
  if (s->easy != NULL)
    tb_transport_drop(&s->cell->run->tp, s->easy);
  if (s->direct)
    tb_direct_release(&s->cell->ds, s->slot);
  tb_stream_free(&s->st);
  free(s);
}

static void
active_change(struct tb_cell *c, int64_t now, int d)
{
  if (c->phase == TB_CELL_WINDOW) {
    int64_t from = c->act_last > c->sc.w0 ? c->act_last : c->sc.w0;
    int64_t to = now < c->sc.w1 ? now : c->sc.w1;
    if (to > from)
      c->act_ns += (to - from) * (int64_t)c->active;
  }
  c->act_last = now;
  c->active = (unsigned)((int)c->active + d);
}

/* The stream as a libcurl easy handle on the multi; false (the cell failed,
 * the stream freed) when libcurl cannot take it. */
static bool
curl_start(struct tb_cell *c, struct tb_cell_stream *s)
{
  const char *why = NULL;
  s->easy =
    tb_transport_post(&c->run->tp, c->body, c->body_len, stream_write, s, s->curl_err, &why);
  if (s->easy == NULL) {
    cell_fail(c, "%s", why);
    stream_free(s);
    return false;
  }
  return true;
}

static bool
stream_start(struct tb_cell *c, unsigned slot)
{
  struct tb_run *r = c->run;
  struct tb_cell_stream *s = tb_xcalloc(1, sizeof *s);
  s->cell = c;
  s->slot = slot;
  tb_stream_init(&s->st, &c->sc, s, tb_time_mono_ns());
  if (r->tp.direct) {
    s->direct = true;
    if (!tb_direct_start(&c->ds, slot)) {
      cell_fail(c, "stream failed: %s", c->ds.c[slot].err);
      stream_free(s);
      return false;
    }
  } else if (!curl_start(c, s)) {
    return false;
  }
  c->slots[slot] = s;
  c->started++;
  active_change(c, s->st.t_start, +1);
  return true;
}

/* Per-stream time between tokens over its window tokens. */
static void
stream_collect_tbt(struct tb_cell_stream *s)
{
  int64_t tbt;
  if (tb_stream_window_tbt(&s->st, &tbt))
    tb_stats_add(&s->cell->tbt, tbt);
}

/* The stream's HTTP status where no body byte told it. */
static long
stream_status(const struct tb_cell_stream *s)
{
  long status = 0;
  if (s->easy != NULL)
    curl_easy_getinfo(s->easy, CURLINFO_RESPONSE_CODE, &status);
  else if (s->direct)
    status = tb_direct_status(&s->cell->ds, s->slot);
  return status;
}

static void stream_global(struct tb_cell_stream *s);

/* A clean stream's timings by the server's own clock, beside tokbench's
 * TTFT and token count of the same request (tb_srvtime). */
static void
srvtime_add(struct tb_cell *c, const struct tb_cell_stream *s)
{
  const struct tb_oai_count *n = &s->st.count;
  if (!n->saw_timings)
    return;
  const struct tb_oai_timings *t = &n->timings;
  struct tb_stream_figures f;
  tb_stream_figures(&s->st, stream_sent_at(s), tb_time_mono_ns(), &f);
  struct tb_srvtime_req q = {
    .cache_n = t->cache_n,
    .prompt_n = t->prompt_n,
    .prompt_ms = t->prompt_ms,
    .predicted_n = t->predicted_n,
    .predicted_ms = t->predicted_ms,
    .predicted_per_token_ms = t->predicted_per_token_ms,
    .ttft_ms = s->st.t_first > 0 ? (double)(s->st.t_first - stream_sent_at(s)) / 1e6 : NAN,
    .tpot_ms = f.have_tpot ? (double)f.tpot / 1e6 : NAN,
    .tokens = tb_stream_got(&s->st),
  };
  c->srv.source = TB_SRVTIME_LLAMACPP;
  tb_srvtime_add(&c->srv, &q);
}

/* The stream's response ended: cleanly (transport_err NULL) or not. */
static void
stream_end(struct tb_cell_stream *s, const char *transport_err)
{
  struct tb_cell *c = s->cell;
  struct tb_run *r = c->run;
  int64_t now = tb_time_mono_ns();
  if (c->scout && !r->usage_known && !s->st.failed && transport_err == NULL) {
    /* The first scout tells whether this server sends usage at all; from
     * then on a stream without its usage chunk is a fault. */
    r->usage_known = true;
    r->usage_supported = s->st.count.saw_usage;
  }
  /* a decode stream ended before max_tokens: the server ignores max_tokens
   * or ignore_eos, and the cell would measure restarts, not sustained
   * decode */
  const struct tb_stream_expect x = {
    .usage = r->usage_known && r->usage_supported,
    .max_tokens = c->scout ? 0 : r->spec->max_output,
  };
  long status = s->st.http_checked ? s->st.http_status : stream_status(s);
  if (!tb_stream_end(&s->st, status, transport_err, &x))
    stream_global(s);
  unsigned slot = s->slot;
  c->slots[slot] = NULL;
  active_change(c, now, -1);
  c->ends++;
  if (s->st.failed) {
    cell_fail(c, "stream failed: %s", s->st.reason);
    stream_free(s);
    return;
  }
  srvtime_add(c, s);
  if (c->scout) {
    c->scout_prompt_tokens = s->st.count.prompt_tokens;
    if (s->st.count.saw_cached)
      c->scout_cached_tokens = s->st.count.cached_tokens;
    if (s->st.t_first == 0)
      cell_fail(c, "warm-up request produced no token");
    else
      c->phase = TB_CELL_DONE;
    stream_free(s);
    return;
  }
  if (c->phase == TB_CELL_WINDOW && now >= c->sc.w0 && now < c->sc.w1) {
    c->completed++;
    if (r->tgt->shard != NULL)
      tb_stats_add(&c->e2e, s->st.t_byte - stream_sent_at(s));
  }
  stream_collect_tbt(s);
  stream_free(s);
  if (c->phase != TB_CELL_DONE)
    (void)stream_start(c, slot);
}

/* A stream that failed at its end with a failure that every cell would
 * meet, whatever its context and concurrency (auth refused, model not
 * found, streams ended early before any cell was measured): the run stops
 * at it (tb_engine_run) with one line naming the cause and the setting
 * that would help.  The cell's first failure decides. */
static void
stream_global(struct tb_cell_stream *s)
{
  struct tb_cell *c = s->cell;
  const struct tb_run *r = c->run;
  long status = s->st.http_status;
  if (s->st.end_rule == TB_STREAM_END_NONE || c->failed)
    return;
  if (status == 401 || status == 403)
    snprintf(c->global, sizeof c->global,
             "the endpoint refused the API key (HTTP %ld on /v1/chat/completions): "
             "give its key (%s)",
             status, r->tgt->key_hint ? r->tgt->key_hint : "the endpoint's API key");
  else if (status == 404)
    snprintf(c->global, sizeof c->global,
             "HTTP 404 on /v1/chat/completions: model '%.100s' not found or no chat "
             "route (name the model: %s)",
             r->d.model ? r->d.model : "", r->tgt->model_hint ? r->tgt->model_hint : "the model");
  if (s->st.end_rule != TB_STREAM_END_EARLY || r->valid_decodes > 0)
    return; /* early after a cell was measured: it depends on the cell */
  int64_t got = tb_stream_got(&s->st);
  if (got > 0)
    snprintf(c->global, sizeof c->global,
             "the server ends streams early (asked %" PRId64 " tokens, got %" PRId64
             "): it ignores max_tokens and ignore_eos, so no sustained decode can be "
             "measured; try --max-output %" PRId64 " or less (a job's max_output)",
             r->spec->max_output, got, got);
  else
    snprintf(c->global, sizeof c->global,
             "the server ends streams before their first token (asked %" PRId64
             " tokens): nothing can be measured; check --max-output and the server's "
             "limits",
             r->spec->max_output);
}

static void
stream_done(struct tb_cell_stream *s, CURLcode rc)
{
  const struct tb_run *r = s->cell->run;
  stream_end(s, rc == CURLE_OK         ? NULL
                : r->tp.egress.refused ? r->tp.egress.why
                : s->curl_err[0]       ? s->curl_err
                                       : curl_easy_strerror(rc));
}

/* ------------------------------------------------------------- metrics */

static size_t
metrics_write(char *ptr, size_t size, size_t nmemb, void *ud)
{
  struct tb_cell *c = ud;
  size_t n = size * nmemb;
  if (n > METRICS_BODY_MAX || c->m_len > METRICS_BODY_MAX - n) {
    c->m_over = true;
    return 0;
  }
  c->m_buf = tb_xrealloc(c->m_buf, c->m_len + n + 1);
  memcpy(c->m_buf + c->m_len, ptr, n);
  c->m_len += n;
  c->m_buf[c->m_len] = '\0';
  return n;
}

static void
metrics_start(struct tb_cell *c)
{
  CURL *e = tb_transport_metrics(&c->run->tp, metrics_write, c);
  if (e == NULL)
    return;
  c->m_len = 0;
  c->m_over = false;
  c->m_t0 = tb_time_mono_ns();
  c->m_easy = e;
}

static void
metrics_done(struct tb_cell *c, CURLcode rc)
{
  struct tb_run *r = c->run;
  int64_t now = tb_time_mono_ns();
  long status = 0;
  curl_easy_getinfo(c->m_easy, CURLINFO_RESPONSE_CODE, &status);
  tb_transport_drop(&r->tp, c->m_easy);
  c->m_easy = NULL;
  c->m_next = now + (int64_t)(r->spec->metrics_interval_s * NS_PER_S);
  double restarted = (double)(c->ends - c->m_ends);
  c->m_ends = c->ends;
  double running, waiting;
  if (rc != CURLE_OK || status != 200 || c->m_over || c->m_buf == NULL ||
      !tb_discover_parse_load(r->d.kind, c->m_buf, c->m_len, &running, &waiting)) {
    c->m_cond = false;
    if (c->phase == TB_CELL_READY && c->client_ready[0] == '\0') {
      /* The gauges discovery saw are gone (a restart behind a gateway, a
       * renamed metric): never wait for them, readiness is the client's. */
      char what[96];
      if (rc != CURLE_OK)
        snprintf(what, sizeof what, "%s", curl_easy_strerror(rc));
      else if (status != 200)
        snprintf(what, sizeof what, "HTTP %ld", status);
      else
        snprintf(what, sizeof what, "%s",
                 c->m_over ? "over its size cap" : "no running/waiting gauges");
      snprintf(c->client_ready, sizeof c->client_ready, "a /metrics sample failed (%s)", what);
    }
    return;
  }
  c->m_running = running;
  c->m_waiting = waiting;
  c->m_samples++;
  if (r->server_series && c->phase == TB_CELL_WINDOW && now < c->sc.w1)
    tb_sampler_feed(&c->smp, r->d.kind, now, c->m_buf, c->m_len);
  /* Only a sample asked for once every stream of ours produced tells that
   * the C running are ours: an earlier one may count one of ours still
   * starting plus another client's.  Nothing of ours waits, and all C run
   * but those that restarted since the last sample: a server's gauges are
   * its queues as its last step left them (vLLM counts them after
   * removing the requests that stopped in the step, before their clients'
   * next ones arrive; docs/engine.md), so with outputs of a few tokens
   * running is short of C at almost every sample, and demanding C exactly
   * kept such a cell from ever being ready.  With long outputs few
   * restart between samples and the rule is running = C as before. */
  double conc = (double)c->conc;
  c->m_cond = waiting < 0.5 && running < conc + 0.5 && running > conc - restarted - 0.5 &&
              c->all_warmed != 0 && c->m_t0 >= c->all_warmed;
  if (c->phase == TB_CELL_WINDOW && now < c->sc.w1) {
    c->run_sum += running;
    c->run_n++;
  }
}

/* ---------------------------------------------------------------- loop */

static void
cut_all(struct tb_cell *c)
{
  for (unsigned i = 0; i < c->conc; i++) {
    struct tb_cell_stream *s = c->slots[i];
    if (s == NULL)
      continue;
    if (!c->failed && !c->scout)
      stream_collect_tbt(s);
    c->slots[i] = NULL;
    stream_free(s);
  }
  tb_direct_close_all(&c->ds);
  if (c->m_easy != NULL) {
    tb_transport_drop(&c->run->tp, c->m_easy);
    c->m_easy = NULL;
  }
}

/* The window cut into slices for the SE of its tok/s (tb_stats.h): one a
 * second, at least 10 (a 2 s window: 0.2 s slices), so that batch means have
 * batches to compare. */
static size_t
window_slices(double duration_s)
{
  return duration_s >= 10 ? (size_t)floor(duration_s) : 10;
}

/* The cap a server shows and does not publish: its gauges hold R < C
 * requests running and the rest of ours waiting (R + waiting <= C: nobody
 * else's), steadily, R not growing, and at least R of our streams having
 * produced tokens in this cell (a server still admitting, or still
 * prefilling one request after another, is slow, not capped).  Streams
 * that have produced, not those whose current request has: with short
 * outputs every stream restarts many times a second, and at any poll some
 * request the server has just admitted has no token yet.  And the queue
 * in most samples, not in every one: gauges are the queues as the
 * server's last step left them (vLLM's, docs/engine.md), and with outputs
 * of a few tokens a step can end with the queue just emptied into the
 * batch and the next requests not yet sent, or with running short of R by
 * the requests that stopped in it.  True once held SCHED_CAP_S: the cell
 * is over capacity at R. */
static bool
sched_cap(struct tb_cell *c, int64_t now)
{
  const struct tb_run *r = c->run;
  if (c->m_samples == c->cap_seen)
    return false; /* judged on samples, not on loop turns */
  c->cap_seen = c->m_samples;
  double run = c->m_running, wait = c->m_waiting, conc = (double)c->conc;
  bool against = run >= conc - 0.5 || run + wait >= conc + 0.5 || (double)c->n_warmed <= run - 0.5;
  if (against) {
    c->cap_since = 0;
    return false;
  }
  if (c->cap_since == 0 || run > c->cap_running + 0.5) {
    c->cap_since = now;
    c->cap_running = run;
    c->cap_samples = c->cap_queued = 0;
  }
  c->cap_samples++;
  c->cap_queued += wait >= 0.5;
  double half = r->spec->ready_timeout_s / 2;
  double hold = half < SCHED_CAP_S ? half : SCHED_CAP_S;
  if (now - c->cap_since < (int64_t)(hold * NS_PER_S))
    return false;
  if (2 * c->cap_queued <= c->cap_samples || c->cap_running < 0.5) {
    c->cap_since = 0; /* ours seldom wait: slow, not capped; look again */
    return false;
  }
  c->sched_cap = llround(c->cap_running);
  snprintf(c->reason, sizeof c->reason,
           "the server runs at most %" PRId64 " of these requests at once (%" PRId64
           " running, %.0f waiting for %.0f s): its scheduler cap",
           c->sched_cap, c->sched_cap, conc - c->cap_running, hold);
  c->phase = TB_CELL_DONE;
  return true;
}

/* Per-stream limits: a connection, a first token, a stall (tb_stream);
 * false when one failed the cell. */
static bool
scan_streams(struct tb_cell *c, int64_t now)
{
  const struct tb_run *r = c->run;
  for (unsigned i = 0; i < c->conc; i++) {
    struct tb_cell_stream *s = c->slots[i];
    if (s == NULL)
      continue;
    if (s->direct && tb_direct_connecting(&c->ds, i) &&
        now - s->st.t_start > CONNECT_TIMEOUT_MS * 1000000LL) {
      cell_fail(c, "stream failed: connect: no answer after %.0f s", CONNECT_TIMEOUT_MS / 1000.0);
      return false;
    }
    char why[80];
    if (tb_stream_overdue(&s->st, now, r->spec->first_token_timeout_s, r->spec->stall_timeout_s,
                          why, sizeof why)) {
      cell_fail(c, "%s", why);
      return false;
    }
  }
  return true;
}

/* The window [at, at + duration) begins: tokens count by their arrival
 * stamps (a shard's at may lie ahead: its common start t0). */
static void
window_open(struct tb_cell *c, int64_t at)
{
  const struct tb_run *r = c->run;
  active_change(c, at, 0);
  c->sc.w0 = at;
  c->sc.w1 = at + (int64_t)(r->spec->duration_s * NS_PER_S);
  c->n_slices = window_slices(r->spec->duration_s);
  c->slice_ns = (c->sc.w1 - c->sc.w0) / (int64_t)c->n_slices;
  if (c->slice_ns < 1)
    c->slice_ns = 1;
  c->slice_tok = tb_xcalloc(c->n_slices, sizeof *c->slice_tok);
  c->act_last = at;
  c->phase = TB_CELL_WINDOW;
  c->cpu_w0 = tb_time_thread_cpu_ns();
  tb_sampler_begin(&c->smp, at);
  c->m_next = at;            /* a first sample right at the window's start */
  tb_telemetry_poke(r->tel); /* and a telemetry read (issue 26) */
}

/* A shard, ready: asks its caller for the common start t0 (tb_engine_shard)
 * and opens the window there, on the arrival stamps; a t0 already past
 * opens it late, by the skew the cell records. */
static void
shard_start(struct tb_cell *c, int64_t now)
{
  struct tb_engine_shard *sh = c->run->tgt->shard;
  c->shard_wait = true;
  int64_t t0 = 0;
  char why[200] = "";
  int rc = sh->start(sh->cls, now, &t0, why, sizeof why);
  if (rc < 0) {
    cell_fail(c, "shard start: %s", why);
    return;
  }
  if (rc == 0)
    return;
  sh->skew_ns = now > t0 ? now - t0 : 0;
  window_open(c, now > t0 ? now : t0);
}

/* A cell getting ready: ready held settle_s opens the window; a scheduler
 * cap, another client's load or the ready timeout end the cell. */
static void
tick_ready(struct tb_cell *c, int64_t now, bool gauges)
{
  const struct tb_run *r = c->run;
  bool ok = c->n_warmed == c->conc;
  if (ok && gauges)
    ok = c->m_cond;
  if (gauges && sched_cap(c, now))
    return;
  if (!ok) {
    c->ready_since = 0;
  } else if (c->ready_since == 0) {
    c->ready_since = now;
  }
  /* Every stream of ours produces and the server still runs more than C:
   * someone else loads it, and no figure of this cell would be ours.  Say
   * so after a while rather than at the ready timeout. */
  bool foreign = gauges && c->n_warmed == c->conc && c->m_running > (double)c->conc + 0.5;
  if (!foreign)
    c->foreign_since = 0;
  else if (c->foreign_since == 0)
    c->foreign_since = now;
  double half = r->spec->ready_timeout_s / 2;
  double busy_s = half < FOREIGN_LOAD_S ? half : FOREIGN_LOAD_S;
  if (c->foreign_since != 0 && now - c->foreign_since > (int64_t)(busy_s * NS_PER_S)) {
    cell_fail(c,
              "server busy with other work: %.0f requests running (%.0f waiting) "
              "for %u of ours, for %.0f s",
              c->m_running, c->m_waiting > 0 ? c->m_waiting : 0, c->conc, busy_s);
    return;
  }
  if (c->shard_wait ||
      (c->ready_since != 0 && now - c->ready_since >= (int64_t)(r->spec->settle_s * NS_PER_S))) {
    if (r->tgt->shard != NULL)
      shard_start(c, now);
    else
      window_open(c, now);
  } else if (now - c->t_begin > (int64_t)(r->spec->ready_timeout_s * NS_PER_S)) {
    unsigned warmed = c->n_warmed;
    cell_fail(c, "not ready after %.0f s (%u of %u streams producing%s)", r->spec->ready_timeout_s,
              warmed, c->conc,
              gauges && !c->m_cond ? "; server not at running = C, waiting = 0" : "");
  }
}

static void
tick(struct tb_cell *c, int64_t now)
{
  struct tb_run *r = c->run;
  if (c->phase == TB_CELL_DONE)
    return;
  if (now >= c->next_cancel_poll) {
    c->next_cancel_poll = now + 100000000LL;
    if (tb_run_cancelled(r)) {
      c->cancelled = true;
      cell_fail(c, "cancelled");
      return;
    }
  }
  /* The per-stream scan is O(C): every SCAN_NS, not on every loop turn
   * (its limits are seconds). */
  if (now >= c->next_scan) {
    if (!scan_streams(c, now))
      return;
    c->next_scan = now + SCAN_NS;
  }
  if (c->scout)
    return;
  bool gauges = r->d.has_metrics && c->client_ready[0] == '\0';
  if (gauges && c->m_easy == NULL && now >= c->m_next)
    metrics_start(c);
  if (c->phase == TB_CELL_READY) {
    tick_ready(c, now, gauges);
  } else if (c->phase == TB_CELL_WINDOW && now >= c->sc.w1) {
    tb_telemetry_poke(c->run->tel); /* a telemetry read at the window's end (issue 26) */
    active_change(c, c->sc.w1, 0);
    c->cpu_w1 = tb_time_thread_cpu_ns();
    c->cpu_wall1 = now;
    c->phase = TB_CELL_DONE;
  }
}

/* The easy handles libcurl finished this turn: a stream's, the metrics
 * sample's, or one of neither (freed). */
static void
collect_done(struct tb_cell *c)
{
  struct tb_run *r = c->run;
  CURLcode rc;
  CURL *e;
  while ((e = tb_transport_done(&r->tp, &rc)) != NULL) {
    void *priv = NULL;
    curl_easy_getinfo(e, CURLINFO_PRIVATE, (char **)&priv);
    if (e == c->m_easy)
      metrics_done(c, rc);
    else if (priv != NULL)
      stream_done(priv, rc);
    else
      tb_transport_drop(&r->tp, e);
  }
}

void
tb_cell_loop(struct tb_cell *c)
{
  struct tb_run *r = c->run;
  c->t_begin = tb_time_mono_ns();
  c->sc.w0 = c->sc.w1 = INT64_MAX;
  c->next_cancel_poll = 0;
  c->next_scan = 0;
  if (c->scout) {
    c->sc.w0 = 0; /* tokens of a scout are not windowed */
  }
  for (unsigned i = 0; i < c->conc && c->phase != TB_CELL_DONE; i++)
    (void)stream_start(c, i);
  tb_transport_kick(&r->tp);
  while (c->phase != TB_CELL_DONE) {
    int64_t now = tb_time_mono_ns();
    int64_t next = now + 50000000LL; /* our own ticks: 50 ms at most */
    if (c->phase == TB_CELL_WINDOW && c->sc.w1 < next)
      next = c->sc.w1;
    if (c->m_easy == NULL && r->d.has_metrics && c->client_ready[0] == '\0' && !c->scout &&
        c->m_next < next)
      next = c->m_next;
    tb_transport_turn(&r->tp, &c->ds, now, next, &c->rx_kernel, &c->rx_user);
    collect_done(c);
    tick(c, tb_time_mono_ns());
  }
  cut_all(c);
}

void
tb_cell_init(struct tb_cell *c, struct tb_run *r, int64_t ctx, unsigned conc, bool scout,
             const char *body, size_t body_len)
{
  memset(c, 0, sizeof *c);
  c->run = r;
  c->ctx = ctx;
  c->conc = conc;
  c->scout = scout;
  c->body = body;
  c->body_len = body_len;
  c->slots = tb_xcalloc(conc, sizeof *c->slots);
  c->warmed = tb_xcalloc(conc, sizeof *c->warmed);
  c->scout_prompt_tokens = -1;
  c->scout_cached_tokens = -1;
  c->m_running = c->m_waiting = -1;
  c->cap_running = -1;
  if (!r->d.has_metrics)
    snprintf(c->client_ready, sizeof c->client_ready, "%s", r->d.metrics_unknown);
  else if (r->tgt->shard != NULL)
    snprintf(c->client_ready, sizeof c->client_ready, "%s", TB_ENGINE_SHARD_READY);
  c->drained_before = -1;
  c->before_running = c->before_waiting = NAN;
  c->sc.kind = TB_STREAM_MATRIX;
  c->sc.mem.max = r->cell_memory_max;
  c->sc.error_bodies = r->hooks != NULL && r->hooks->error_bodies;
  c->sc.ops = &stream_ops;
  if (r->tp.direct) {
    const struct tb_direct_ops ops = { c, direct_body, direct_end };
    tb_direct_set_init(&c->ds, &r->tp.dt, conc, r->tp.auth, body, body_len, &ops);
  }
}

void
tb_cell_free(struct tb_cell *c)
{
  if (c->ds.c != NULL)
    tb_direct_set_free(&c->ds); /* closes; wipes the head (the key) */
  free(c->slots);
  free(c->warmed);
  free(c->m_buf);
  free(c->slice_tok);
  tb_stats_free(&c->ttft);
  tb_stats_free(&c->tbt);
  tb_stats_free(&c->gaps);
  tb_stats_free(&c->e2e);
  tb_sampler_free(&c->smp);
  tb_srvtime_free(&c->srv);
}

/* A shard's samples (tb_engine_shard), before the writer sorts them: the
 * series in microseconds, the window's slices on the common timeline, the
 * figures that add. */
static void
shard_samples(const struct tb_cell *c, const struct tb_result_decode *d, struct tb_samples *m)
{
  const struct tb_stats *from[TB_SAMPLES_NSERIES] = {
    [TB_SAMPLES_TTFT] = &c->ttft,
    [TB_SAMPLES_TPOT] = &c->tbt,
    [TB_SAMPLES_E2E] = &c->e2e,
    [TB_SAMPLES_GAP] = &c->gaps,
  };
  for (int k = 0; k < TB_SAMPLES_NSERIES; k++)
    for (size_t i = 0; i < from[k]->n; i++)
      tb_samples_add(m, (enum tb_samples_series)k, from[k]->v[i] / 1000);
  (void)tb_samples_set_slices(m, c->slice_ns / 1000, c->slice_tok, c->n_slices);
  m->tokens = c->win_tokens;
  m->completed = c->completed;
  m->started = c->started;
  m->resolution = d->resolution_tokens;
  m->streams = c->conc;
  m->active_milli = (int64_t)(d->avg_active * 1000.0 + 0.5);
  m->chunked = c->chunk_source ? 1 : 0;
  m->reads = (int64_t)(c->rx_kernel + c->ds.rx_kernel + c->rx_user + c->ds.rx_user);
  m->stamped_reads = (int64_t)(c->rx_kernel + c->ds.rx_kernel);
  tb_srvtime_merge(&m->srv, &c->srv);
}

json_t *
tb_cell_result(struct tb_cell *c, json_t *cell)
{
  if (c->run->prompt_estimate)
    tb_result_cell_set_prompt_estimate(cell, TB_PROMPT_ESTIMATE);
  if (c->failed) {
    tb_result_cell_set_status(cell, "error", c->reason);
    return cell;
  }
  if (c->sched_cap > 0) {
    tb_result_cell_set_sched_cap(cell, c->sched_cap, c->reason);
    return cell;
  }
  double win = (double)(c->sc.w1 - c->sc.w0) / 1e9;
  double slice_s = (double)c->slice_ns / 1e9;
  double *slices = tb_xcalloc(c->n_slices ? c->n_slices : 1, sizeof *slices);
  for (size_t i = 0; i < c->n_slices; i++)
    slices[i] = (double)c->slice_tok[i] / slice_s;
  uint64_t kernel = c->rx_kernel + c->ds.rx_kernel;
  uint64_t reads = kernel + c->rx_user + c->ds.rx_user;
  struct tb_result_decode d = {
    .conc = c->conc,
    .measured_s = win,
    .output_tokens = c->win_tokens,
    .ttft = &c->ttft,
    .tbt = &c->tbt,
    .avg_active = c->run_n > 0 ? c->run_sum / c->run_n : (double)c->act_ns / (win * 1e9),
    .avg_active_server = c->run_n > 0,
    .completed = c->completed,
    .started = c->started,
    .chunk_source = c->chunk_source,
    .kernel_stamped = reads > 0 ? (double)kernel / (double)reads : 0.0,
    .slices = slices,
    .n_slices = c->n_slices,
    .slice_s = slice_s,
    .resolution_tokens = (int64_t)c->conc * (c->max_chunk > 0 ? c->max_chunk : 1),
    .client_ready = c->client_ready[0] != '\0' ? c->client_ready : NULL,
  };
  if (c->run->tgt->shard != NULL)
    shard_samples(c, &d, c->run->tgt->shard->samples);
  tb_result_cell_set_decode(cell, &d);
  free(slices);
  json_t *st = tb_srvtime_json(&c->srv);
  if (st != NULL)
    json_object_set_new(cell, "server_timings", st);
  return cell;
}

/* What a valid decode cell shows of its own soundness (tb_sampler): the
 * server's series over the window and the self-checks. */
void
tb_cell_proofs(struct tb_run *r, struct tb_cell *c, json_t *cell, int drained_after)
{
  if (c->failed)
    return;
  if (r->server_series) {
    json_t *ss = tb_sampler_json(&c->smp, tb_json_num(cell, "total_tps"));
    if (ss != NULL)
      json_object_set_new(cell, "server_series", ss);
  }
  double wall = (double)(c->cpu_wall1 - c->sc.w0) / 1e9;
  struct tb_checks_in in = {
    .requested = c->conc,
    .achieved = tb_json_num(cell, "avg_active"),
    .achieved_server = c->run_n > 0,
    .cpu_share = c->cpu_w0 >= 0 && c->cpu_w1 >= c->cpu_w0 && wall > 0
                   ? (double)(c->cpu_w1 - c->cpu_w0) / 1e9 / wall
                   : NAN,
    .kernel_stamped = tb_json_num(cell, "kernel_stamped"),
    .kernel_wanted = r->tp.kernel_stamps,
    .drained_before = c->drained_before,
    .drained_after = drained_after,
    .before_running = c->before_running,
    .before_waiting = c->before_waiting,
  };
  json_object_set_new(cell, "checks", tb_checks_json(&in));
  /* its cost and energy over the window (issue 26) */
  tb_telemetry_cell(r->tel, r->tgt->endpoint, cell, c->sc.w0, c->sc.w1);
}
