/*
 * tb_engine: the speed test matrix of METHOD.md.  See tb_engine.h.
 *
 * Design.  One thread, one libcurl multi handle driven by one epoll loop
 * (curl's socket interface: CURLMOPT_SOCKETFUNCTION registers fds with epoll,
 * CURLMOPT_TIMERFUNCTION sets a deadline the loop honours).  Every stream of
 * a cell is an easy handle on that multi; connections stay in the multi's
 * pool, so a stream that finishes is replaced on a kept-alive connection.
 * /metrics samples during a cell are easy handles on the same loop, so no
 * blocking call ever delays a read.
 *
 * Timing.  Each read is stamped once, with the kernel's receive stamp of
 * its oldest byte (tb_rxts: SO_TIMESTAMPNS) converted to CLOCK_MONOTONIC,
 * else with the monotonic clock when the loop reads it: on the engine's own
 * reads the stamp comes with the bytes (recvmsg), on libcurl streams from a
 * one-byte MSG_PEEK just before the loop hands the socket to libcurl.  Every
 * event in that read carries the same stamp, so parsing one event never
 * delays the next one's arrival time, and neither does the loop's own
 * wake-up or its work on other sockets.  Tokens are attributed to the
 * window by arrival stamp, so the window is exactly duration_s long however
 * late the loop notices its end.
 *
 * Stream transport.  On a plain-HTTP endpoint (no proxy in the
 * environment) the streams' sockets are the engine's own (tb_direct): libcurl resolves
 * the endpoint and picks its address once (a CONNECT_ONLY probe), then each
 * slot of a cell keeps one kept-alive connection, writes its request with
 * one sendmsg and reads the response with one recvmsg per readiness, which
 * returns the kernel's receive stamp with the bytes (tb_rxts), parsed by
 * tb_h1 (HTTP/1.1 framing) and tb_stream.  Per read that is one system call
 * where libcurl's read path makes three (the stamp peek, recv and a poll()
 * that asks whether more is pending) and about half the CPU time per token
 * on a bench (bench/bench_engine.sh prints both).  Over TLS, through a
 * proxy, or with TB_ENGINE_CURL_STREAMS=1, streams are libcurl easy handles
 * on the multi, stamped by a peek before libcurl reads.  Everything else
 * (discovery, /metrics, aborts) is libcurl.
 *
 * A cell: C streams start at once; readiness = every stream has produced a
 * token and (where the engine's running/waiting gauges answer) running = C,
 * waiting = 0, held for settle_s; without usable gauges readiness is the
 * client's at once, and the cell says why (readiness_reason).  Gauges that
 * hold R < C running and the rest of ours waiting for SCHED_CAP_S make the
 * cell over capacity with that measured cap, and every cell above it at this
 * context or a larger one is over capacity without running;
 * then the window [w0, w0 + duration); at its end every stream is cut (its
 * connection closed, which aborts the request on vLLM; SGLang also gets
 * /abort_request) and the loop waits for the server to drain.
 *
 * Counting.  A stream's bytes, on either transport, go to tb_stream (the
 * consumer the rate cells use too: SSE, counting, token stamps, why a
 * stream failed); the cell adds up what its streams report.  Output tokens
 * are the deltas of cumulative usage.completion_tokens (continuous usage
 * stats).  A chunk with output but no usage switches that stream to
 * counting chunks (one per choice with text), and the cell's token_source
 * becomes "chunks": a flagged fallback, never silent.
 *
 * Result.  The document (header, cells, status) is tb_result's model; the
 * engine fills it from what it measured.
 *
 * Faults: any stream error (transport, HTTP status, malformed SSE or JSON, a
 * stream cut before [DONE], a stall, a missing usage chunk where the server
 * gives usage, a stream ended before max_tokens) makes the cell an error
 * with the first reason; the run goes on, unless the failure would be the
 * same in every cell (HTTP 401/403/404 on the chat route, streams ended
 * early before any cell was measured): then the run stops there, failed,
 * with one line naming the cause and the setting that would help.
 */
#include "engine/tb_engine.h"

#include <curl/curl.h>
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <unistd.h>

#include "net/tb_direct.h"
#include "engine/tb_cachereset.h"
#include "engine/tb_discover.h"
#include "net/tb_egress.h"
#include "net/tb_http.h"
#include "base/tb_json.h"
#include "spec/tb_plan.h"
#include "engine/tb_prompt.h"
#include "engine/tb_rate.h"
#include "base/tb_redact.h"
#include "result/tb_checks.h"
#include "result/tb_result.h"
#include "result/tb_samples.h"
#include "result/tb_srvtime.h"
#include "net/tb_rxts.h"
#include "engine/tb_sampler.h"
#include "engine/tb_telemetry.h"
#include "base/tb_stats.h"
#include "engine/tb_stream.h"

#define METRICS_BODY_MAX (4u * 1024u * 1024u)
#define MAX_CONCURRENCY 65536
#define NS_PER_S 1000000000LL
#define SCAN_NS 10000000LL                              /* per-stream checks: every 10 ms */
#define CONNECT_TIMEOUT_MS TB_DIRECT_CONNECT_TIMEOUT_MS /* either transport */
#define NOFILE_SPARE 256 /* descriptors beside the streams' (tb_engine_nofile) */
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

/* ------------------------------------------------------------- structures */

struct run;
struct cell;

struct stream {
  struct tb_stream st; /* the consumer: bytes, counts, samples, reasons */
  struct cell *cell;
  CURL *easy;
  unsigned slot;
  char curl_err[CURL_ERROR_SIZE];
  bool direct;      /* on the cell's tb_direct_set, slot `slot` */
  int64_t prev_tok; /* its last token chunk (a shard's gaps) */
};

enum phase {
  PH_READY,
  PH_WINDOW,
  PH_DONE
};

struct cell {
  struct run *run;
  int64_t ctx;
  unsigned conc;
  bool scout;
  const char *body;
  size_t body_len;
  struct stream **slots;
  bool *warmed;       /* slot's first stream produced a token */
  unsigned n_warmed;  /* slots warmed */
  int64_t all_warmed; /* when the last slot warmed; 0 before */
  int64_t next_scan;  /* next per-stream first-token / stall scan */
  enum phase phase;
  /* what its streams share (tb_stream): the window [sc.w0, sc.w1), the
   * budget of their SSE buffers (run->cell_memory_max; issue 13, finding
   * 8) */
  struct tb_stream_cell sc;
  int64_t t_begin, ready_since, next_cancel_poll;
  bool failed, cancelled;
  char reason[300];
  /* the failure would be the same in every cell (auth refused, model not
   * found, every stream ended early): the run's one line, or "" */
  char global[300];
  /* readiness by the client alone (no usable running/waiting gauges):
   * why, or "" */
  char client_ready[200];
  /* the server holds R < C of ours running, the rest waiting: since when,
   * and R; sched_cap > 0 once held SCHED_CAP_S (the cell is over capacity) */
  int64_t cap_since;
  double cap_running;
  int64_t sched_cap;
  struct tb_stats ttft, tbt;
  /* a shard's (tb_engine_shard): every gap between two token chunks of a
   * stream in the window, per token, and each completed request's e2e (ns);
   * shard_wait: start() was called, the window waits for t0 */
  struct tb_stats gaps, e2e;
  bool shard_wait;
  int64_t win_tokens;
  int64_t max_chunk; /* the most tokens one chunk brought in the window */
  /* tokens by slice of the window (count_tokens), for the SE of total
   * tok/s: window_slices() of slice_ns each */
  int64_t *slice_tok;
  size_t n_slices;
  int64_t slice_ns;
  unsigned completed, started, active;
  bool chunk_source;
  /* metrics sampling */
  CURL *m_easy;
  char *m_buf;
  size_t m_len;
  bool m_over;
  int64_t m_next;
  int64_t m_t0; /* when the sample in flight was asked for */
  bool m_cond;
  double m_running, m_waiting; /* last sample; -1 before the first */
  int64_t foreign_since;       /* all ours producing, yet running > C: since */
  double run_sum;
  unsigned run_n;
  /* client active integral over the window */
  int64_t act_ns, act_last;
  /* the server's view (tb_sampler): its series over the window, the
   * thread's CPU time at the window's ends, the drained checks */
  struct tb_sampler smp;
  int64_t cpu_w0, cpu_w1, cpu_wall1; /* thread CPU ns; cpu_wall1: when read */
  int drained_before;                /* 1 / 0 / -1 unknown */
  double before_running, before_waiting;
  /* scout */
  int64_t scout_ttft_ns, scout_prompt_tokens, scout_cached_tokens;
  /* the server's own timing of each finished request, where it gives one
   * (llama.cpp's `timings`): the cell's server_timings */
  struct tb_srvtime srv;
  /* reads stamped by the kernel, by our clock */
  uint64_t rx_kernel, rx_user;
  /* direct transport: a connection per slot (ds.c NULL: libcurl streams) */
  struct tb_direct_set ds;
};

struct run {
  /* the egress guard of every libcurl handle of the run (one host: the
   * endpoint's), tb_egress.h */
  struct tb_egress_guard egress;
  const struct tb_engine_target *tgt; /* borrowed for the run */
  /* the endpoint's GPU telemetry (issue 26: its telemetry_url), read for
   * the whole run; NULL: none */
  struct tb_telemetry *tel;
  /* settings: the spec as parsed (borrowed) and its plan on this server
   * (tb_plan: the cells, their order, the effective KV budget) */
  const struct tb_spec *spec;
  struct tb_plan plan;
  char *base_url;
  char *run_id;
  size_t cell_memory_max; /* the budget of each cell's SSE buffers */
  /* endpoint */
  struct tb_discover d;
  const char *api_key;
  struct tb_prompt_ctx *pc; /* the prompts of the pass being run */
  /* loop */
  CURLM *multi;
  int epfd;
  int64_t curl_deadline;
  int64_t io_now;     /* stamp of the socket being read; 0 outside */
  int64_t rt_off;     /* CLOCK_REALTIME - CLOCK_MONOTONIC (tb_rxts) */
  bool kernel_stamps; /* tb_rxts; off with TB_ENGINE_CLIENT_STAMPS=1 */
  bool server_series; /* tb_sampler; off with TB_ENGINE_SERVER_SERIES=0 */
  bool curl_streams;  /* no tb_direct: TB_ENGINE_CURL_STREAMS=1 */
  int stamp_hold;     /* tb_rxts_hold: stamping stays on for the run */
  /* direct transport (see Stream transport) */
  bool direct;
  struct tb_direct dt;
  struct curl_slist *hdrs;
  char *auth;
  char *chat_url, *metrics_url;
  const struct tb_engine_hooks *hooks;
  bool usage_known, usage_supported;
  bool cancelled;
  struct tb_cache_reset_memo reset_memo; /* cache: reset, asked once if unsupported */
  /* the prompts are sized by an estimate (tb_prompt source "estimate") */
  bool prompt_estimate;
  /* the smallest scheduler cap measured (sched_cap of a cell), the context
   * and concurrency it was measured at; 0: none */
  int64_t cap_requests, cap_ctx, cap_conc;
  unsigned valid_decodes; /* decode cells measured valid so far */
  char *stop;             /* a global failure: the run stops with this line */
  /* progress */
  unsigned total_cells, done_count;
  double avg_cell_s;
  unsigned n_cell_timed;
};

/* ----------------------------------------------------------- epoll glue */

static int
sock_cb(CURL *easy, curl_socket_t s, int what, void *userp, void *socketp)
{
  struct run *r = userp;
  if (what == CURL_POLL_REMOVE) {
    epoll_ctl(r->epfd, EPOLL_CTL_DEL, s, NULL);
    return 0;
  }
  struct epoll_event ev = { 0 };
  ev.data.fd = s;
  if (what & CURL_POLL_IN)
    ev.events |= EPOLLIN;
  if (what & CURL_POLL_OUT)
    ev.events |= EPOLLOUT;
  if (epoll_ctl(r->epfd, EPOLL_CTL_MOD, s, &ev) != 0 && errno == ENOENT)
    epoll_ctl(r->epfd, EPOLL_CTL_ADD, s, &ev);
  return 0;
}

static int
timer_cb(CURLM *m, long timeout_ms, void *userp)
{
  struct run *r = userp;
  r->curl_deadline = timeout_ms < 0 ? -1 : tb_time_mono_ns() + (int64_t)timeout_ms * 1000000;
  return 0;
}

/* ------------------------------------------------------------- streams */

static void cell_fail(struct cell *c, const char *fmt, ...) TB_PRINTF(2, 3);

static void
cell_fail(struct cell *c, const char *fmt, ...)
{
  if (c->failed || c->phase == PH_DONE)
    return;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(c->reason, sizeof c->reason, fmt, ap);
  va_end(ap);
  c->failed = true;
  c->phase = PH_DONE;
}

/* When a stream's request went out: its start, plus what the transport
 * spent before it could send (a new connection's TCP and TLS handshakes,
 * which are the network's time, not the server's: METHOD.md's TTFT is the
 * prefill).  Over TLS a cold scout's new connection would otherwise add a
 * handshake to the prefill TTFT, and a remote endpoint's new connection a
 * round trip. */
static int64_t
stream_sent_at(const struct stream *s)
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

/* tb_stream_ops of the matrix's streams (cls: the struct stream). */

/* An event: the cell's token source, the debug hook. */
static bool
on_stream_event(void *cls, struct tb_stream *st, const char *data, size_t len, int64_t delta)
{
  struct stream *s = cls;
  struct cell *c = s->cell;
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
  struct stream *s = cls;
  struct cell *c = s->cell;
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
  struct stream *s = cls;
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
  struct stream *s = ud;
  size_t n = size * nmemb;
  long status = s->st.http_status;
  if (!s->st.http_checked)
    curl_easy_getinfo(s->easy, CURLINFO_RESPONSE_CODE, &status);
  int64_t io = s->cell->run->io_now;
  int64_t now = io != 0 ? io : tb_time_mono_ns();
  return tb_stream_body(&s->st, status, now, ptr, n) ? n : 0; /* 0 aborts the transfer */
}

/* ------------------------------------------------- direct transport */

static void stream_end(struct stream *s, const char *transport_err);

/* tb_direct_ops of a cell (cls): a slot's body bytes, its end. */
static bool
direct_body(void *cls, unsigned slot, int status, int64_t stamp, const char *data, size_t n)
{
  struct cell *c = cls;
  struct stream *s = c->slots[slot];
  return tb_stream_body(&s->st, status, stamp != 0 ? stamp : tb_time_mono_ns(), data, n);
}

static void
direct_end(void *cls, unsigned slot, const char *err)
{
  struct cell *c = cls;
  stream_end(c->slots[slot], err);
}

static void
stream_free(struct stream *s)
{
  if (s == NULL)
    return;
  if (s->easy != NULL) {
    curl_multi_remove_handle(s->cell->run->multi, s->easy);
    curl_easy_cleanup(s->easy);
  }
  if (s->direct)
    tb_direct_release(&s->cell->ds, s->slot);
  tb_stream_free(&s->st);
  free(s);
}

static void
active_change(struct cell *c, int64_t now, int d)
{
  if (c->phase == PH_WINDOW) {
    int64_t from = c->act_last > c->sc.w0 ? c->act_last : c->sc.w0;
    int64_t to = now < c->sc.w1 ? now : c->sc.w1;
    if (to > from)
      c->act_ns += (to - from) * (int64_t)c->active;
  }
  c->act_last = now;
  c->active = (unsigned)((int)c->active + d);
}

/* A new connection to the endpoint: the kernel stamps what it receives
 * (tb_rxts). */
static int
rxts_sockopt(void *cls, curl_socket_t fd, curlsocktype purpose)
{
  const struct run *r = cls;
  if (purpose == CURLSOCKTYPE_IPCXN && r->kernel_stamps)
    (void)tb_rxts_enable(fd); /* without: stamps fall back to the clock */
  return CURL_SOCKOPT_OK;
}

/* The stream as a libcurl easy handle on the multi; false (the cell failed,
 * the stream freed) when libcurl cannot take it. */
static bool
curl_start(struct cell *c, struct stream *s)
{
  struct run *r = c->run;
  s->easy = curl_easy_init();
  if (s->easy == NULL) {
    cell_fail(c, "curl_easy_init failed");
    stream_free(s);
    return false;
  }
  CURL *e = s->easy;
  if (!tb_egress_guard_easy(&r->egress, tb_egress_current(), e, r->chat_url)) {
    cell_fail(c, "%s", r->egress.why);
    stream_free(s);
    return false;
  }
  curl_easy_setopt(e, CURLOPT_URL, r->chat_url);
  curl_easy_setopt(e, CURLOPT_POST, 1L);
  curl_easy_setopt(e, CURLOPT_POSTFIELDS, c->body);
  curl_easy_setopt(e, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)c->body_len);
  curl_easy_setopt(e, CURLOPT_HTTPHEADER, r->hdrs);
  curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, stream_write);
  curl_easy_setopt(e, CURLOPT_WRITEDATA, s);
  curl_easy_setopt(e, CURLOPT_PRIVATE, s);
  curl_easy_setopt(e, CURLOPT_ERRORBUFFER, s->curl_err);
  curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(e, CURLOPT_TCP_NODELAY, 1L);
  curl_easy_setopt(e, CURLOPT_CONNECTTIMEOUT_MS, CONNECT_TIMEOUT_MS);
  curl_easy_setopt(e, CURLOPT_HTTP_VERSION, (long)CURL_HTTP_VERSION_1_1);
  curl_easy_setopt(e, CURLOPT_PROTOCOLS_STR, "http,https");
  tb_http_tls_setopt(e);
  curl_easy_setopt(e, CURLOPT_SOCKOPTFUNCTION, rxts_sockopt);
  curl_easy_setopt(e, CURLOPT_SOCKOPTDATA, r);
  if (curl_multi_add_handle(r->multi, e) != CURLM_OK) {
    cell_fail(c, "curl_multi_add_handle failed");
    stream_free(s);
    return false;
  }
  return true;
}

static bool
stream_start(struct cell *c, unsigned slot)
{
  struct run *r = c->run;
  struct stream *s = tb_xcalloc(1, sizeof *s);
  s->cell = c;
  s->slot = slot;
  tb_stream_init(&s->st, &c->sc, s, tb_time_mono_ns());
  if (r->direct) {
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
stream_collect_tbt(struct stream *s)
{
  int64_t tbt;
  if (tb_stream_window_tbt(&s->st, &tbt))
    tb_stats_add(&s->cell->tbt, tbt);
}

/* The stream's HTTP status where no body byte told it. */
static long
stream_status(const struct stream *s)
{
  long status = 0;
  if (s->easy != NULL)
    curl_easy_getinfo(s->easy, CURLINFO_RESPONSE_CODE, &status);
  else if (s->direct)
    status = tb_direct_status(&s->cell->ds, s->slot);
  return status;
}

static void stream_global(struct stream *s);

/* A clean stream's timings by the server's own clock, beside tokbench's
 * TTFT and token count of the same request (tb_srvtime). */
static void
srvtime_add(struct cell *c, const struct stream *s)
{
  const struct tb_oai_count *n = &s->st.count;
  if (!n->saw_timings)
    return;
  const struct tb_oai_timings *t = &n->timings;
  struct tb_srvtime_req q = {
    .cache_n = t->cache_n,
    .prompt_n = t->prompt_n,
    .prompt_ms = t->prompt_ms,
    .predicted_n = t->predicted_n,
    .predicted_per_token_ms = t->predicted_per_token_ms,
    .ttft_ms = s->st.t_first > 0 ? (double)(s->st.t_first - stream_sent_at(s)) / 1e6 : NAN,
    .tokens = tb_stream_got(&s->st),
  };
  c->srv.source = "llama.cpp timings";
  tb_srvtime_add(&c->srv, &q);
}

/* The stream's response ended: cleanly (transport_err NULL) or not. */
static void
stream_end(struct stream *s, const char *transport_err)
{
  struct cell *c = s->cell;
  struct run *r = c->run;
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
      c->phase = PH_DONE;
    stream_free(s);
    return;
  }
  if (c->phase == PH_WINDOW && now >= c->sc.w0 && now < c->sc.w1) {
    c->completed++;
    if (r->tgt->shard != NULL)
      tb_stats_add(&c->e2e, s->st.t_byte - stream_sent_at(s));
  }
  stream_collect_tbt(s);
  stream_free(s);
  if (c->phase != PH_DONE)
    (void)stream_start(c, slot);
}

/* A stream that failed at its end with a failure that every cell would
 * meet, whatever its context and concurrency (auth refused, model not
 * found, streams ended early before any cell was measured): the run stops
 * at it (tb_engine_run) with one line naming the cause and the setting
 * that would help.  The cell's first failure decides. */
static void
stream_global(struct stream *s)
{
  struct cell *c = s->cell;
  const struct run *r = c->run;
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
stream_done(struct stream *s, CURLcode rc)
{
  const struct run *r = s->cell->run;
  stream_end(s, rc == CURLE_OK      ? NULL
                : r->egress.refused ? r->egress.why
                : s->curl_err[0]    ? s->curl_err
                                    : curl_easy_strerror(rc));
}

/* ------------------------------------------------------------- metrics */

static size_t
metrics_write(char *ptr, size_t size, size_t nmemb, void *ud)
{
  struct cell *c = ud;
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
metrics_start(struct cell *c)
{
  struct run *r = c->run;
  CURL *e = curl_easy_init();
  if (e == NULL)
    return;
  if (!tb_egress_guard_easy(&r->egress, tb_egress_current(), e, r->metrics_url)) {
    curl_easy_cleanup(e);
    return;
  }
  c->m_len = 0;
  c->m_over = false;
  c->m_t0 = tb_time_mono_ns();
  curl_easy_setopt(e, CURLOPT_URL, r->metrics_url);
  curl_easy_setopt(e, CURLOPT_HTTPHEADER, r->hdrs);
  curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, metrics_write);
  curl_easy_setopt(e, CURLOPT_WRITEDATA, c);
  curl_easy_setopt(e, CURLOPT_PRIVATE, NULL);
  curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(e, CURLOPT_TIMEOUT_MS, 5000L);
  curl_easy_setopt(e, CURLOPT_HTTP_VERSION, (long)CURL_HTTP_VERSION_1_1);
  tb_http_tls_setopt(e);
  curl_easy_setopt(e, CURLOPT_SOCKOPTFUNCTION, rxts_sockopt);
  curl_easy_setopt(e, CURLOPT_SOCKOPTDATA, r);
  if (curl_multi_add_handle(r->multi, e) != CURLM_OK) {
    curl_easy_cleanup(e);
    return;
  }
  c->m_easy = e;
}

static void
metrics_done(struct cell *c, CURLcode rc)
{
  struct run *r = c->run;
  int64_t now = tb_time_mono_ns();
  long status = 0;
  curl_easy_getinfo(c->m_easy, CURLINFO_RESPONSE_CODE, &status);
  curl_multi_remove_handle(r->multi, c->m_easy);
  curl_easy_cleanup(c->m_easy);
  c->m_easy = NULL;
  c->m_next = now + (int64_t)(r->spec->metrics_interval_s * NS_PER_S);
  double running, waiting;
  if (rc != CURLE_OK || status != 200 || c->m_over || c->m_buf == NULL ||
      !tb_discover_parse_load(r->d.kind, c->m_buf, c->m_len, &running, &waiting)) {
    c->m_cond = false;
    if (c->phase == PH_READY && c->client_ready[0] == '\0') {
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
  if (r->server_series && c->phase == PH_WINDOW && now < c->sc.w1)
    tb_sampler_feed(&c->smp, r->d.kind, now, c->m_buf, c->m_len);
  /* Only a sample asked for once every stream of ours produced tells that
   * the C running are ours: an earlier one may count one of ours still
   * starting plus another client's. */
  c->m_cond = waiting < 0.5 && fabs(running - (double)c->conc) < 0.5 && c->all_warmed != 0 &&
              c->m_t0 >= c->all_warmed;
  if (c->phase == PH_WINDOW && now < c->sc.w1) {
    c->run_sum += running;
    c->run_n++;
  }
}

/* ---------------------------------------------------------------- loop */

static void
cut_all(struct cell *c)
{
  for (unsigned i = 0; i < c->conc; i++) {
    struct stream *s = c->slots[i];
    if (s == NULL)
      continue;
    if (!c->failed && !c->scout)
      stream_collect_tbt(s);
    c->slots[i] = NULL;
    stream_free(s);
  }
  tb_direct_close_all(&c->ds);
  if (c->m_easy != NULL) {
    curl_multi_remove_handle(c->run->multi, c->m_easy);
    curl_easy_cleanup(c->m_easy);
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
 * request the server has just admitted has no token yet.  True once held
 * SCHED_CAP_S: the cell is over capacity at R. */
static bool
sched_cap(struct cell *c, int64_t now)
{
  const struct run *r = c->run;
  double run = c->m_running, wait = c->m_waiting;
  bool capped = run >= 0.5 && run < (double)c->conc - 0.5 && wait >= 0.5 &&
                run + wait < (double)c->conc + 0.5 && (double)c->n_warmed > run - 0.5;
  if (!capped) {
    c->cap_since = 0;
    return false;
  }
  if (c->cap_since == 0 || run > c->cap_running + 0.5) {
    c->cap_since = now;
    c->cap_running = run;
    return false;
  }
  double half = r->spec->ready_timeout_s / 2;
  double hold = half < SCHED_CAP_S ? half : SCHED_CAP_S;
  if (now - c->cap_since < (int64_t)(hold * NS_PER_S))
    return false;
  c->sched_cap = llround(c->cap_running);
  snprintf(c->reason, sizeof c->reason,
           "the server runs at most %" PRId64 " of these requests at once (%" PRId64
           " running, %.0f waiting for %.0f s): its scheduler cap",
           c->sched_cap, c->sched_cap, wait, hold);
  c->phase = PH_DONE;
  return true;
}

static bool
run_cancelled(void *cls)
{
  const struct run *r = cls;
  return r->hooks != NULL && r->hooks->cancelled != NULL && r->hooks->cancelled(r->hooks->cls);
}

/* Per-stream limits: a connection, a first token, a stall (tb_stream);
 * false when one failed the cell. */
static bool
scan_streams(struct cell *c, int64_t now)
{
  const struct run *r = c->run;
  for (unsigned i = 0; i < c->conc; i++) {
    struct stream *s = c->slots[i];
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
window_open(struct cell *c, int64_t at)
{
  const struct run *r = c->run;
  active_change(c, at, 0);
  c->sc.w0 = at;
  c->sc.w1 = at + (int64_t)(r->spec->duration_s * NS_PER_S);
  c->n_slices = window_slices(r->spec->duration_s);
  c->slice_ns = (c->sc.w1 - c->sc.w0) / (int64_t)c->n_slices;
  if (c->slice_ns < 1)
    c->slice_ns = 1;
  c->slice_tok = tb_xcalloc(c->n_slices, sizeof *c->slice_tok);
  c->act_last = at;
  c->phase = PH_WINDOW;
  c->cpu_w0 = tb_time_thread_cpu_ns();
  tb_sampler_begin(&c->smp, at);
  c->m_next = at;            /* a first sample right at the window's start */
  tb_telemetry_poke(r->tel); /* and a telemetry read (issue 26) */
}

/* A shard, ready: asks its caller for the common start t0 (tb_engine_shard)
 * and opens the window there, on the arrival stamps; a t0 already past
 * opens it late, by the skew the cell records. */
static void
shard_start(struct cell *c, int64_t now)
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
tick_ready(struct cell *c, int64_t now, bool gauges)
{
  const struct run *r = c->run;
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
tick(struct cell *c, int64_t now)
{
  struct run *r = c->run;
  if (c->phase == PH_DONE)
    return;
  if (now >= c->next_cancel_poll) {
    c->next_cancel_poll = now + 100000000LL;
    if (run_cancelled(r)) {
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
  if (c->phase == PH_READY) {
    tick_ready(c, now, gauges);
  } else if (c->phase == PH_WINDOW && now >= c->sc.w1) {
    tb_telemetry_poke(c->run->tel); /* a telemetry read at the window's end (issue 26) */
    active_change(c, c->sc.w1, 0);
    c->cpu_w1 = tb_time_thread_cpu_ns();
    c->cpu_wall1 = now;
    c->phase = PH_DONE;
  }
}

static void
cell_loop(struct cell *c)
{
  struct run *r = c->run;
  struct epoll_event evs[256];
  int running = 0;
  c->t_begin = tb_time_mono_ns();
  c->sc.w0 = c->sc.w1 = INT64_MAX;
  c->next_cancel_poll = 0;
  c->next_scan = 0;
  if (c->scout) {
    c->sc.w0 = 0; /* tokens of a scout are not windowed */
  }
  for (unsigned i = 0; i < c->conc && c->phase != PH_DONE; i++)
    (void)stream_start(c, i);
  curl_multi_socket_action(r->multi, CURL_SOCKET_TIMEOUT, 0, &running);
  while (c->phase != PH_DONE) {
    int64_t now = tb_time_mono_ns();
    int64_t next = now + 50000000LL; /* our own ticks: 50 ms at most */
    if (r->curl_deadline >= 0 && r->curl_deadline < next)
      next = r->curl_deadline;
    if (c->phase == PH_WINDOW && c->sc.w1 < next)
      next = c->sc.w1;
    if (c->m_easy == NULL && r->d.has_metrics && c->client_ready[0] == '\0' && !c->scout &&
        c->m_next < next)
      next = c->m_next;
    int64_t wait_ns = next - now;
    int wait_ms = wait_ns <= 0 ? 0 : (int)((wait_ns + 999999) / 1000000);
    int n = epoll_wait(r->epfd, evs, (int)TB_ARRAY_LEN(evs), wait_ms);
    if (n > 0)
      r->rt_off = tb_rxts_offset();
    for (int i = 0; i < n; i++) {
      if (evs[i].data.u64 & TB_DIRECT_TAG) {
        tb_direct_event(&c->ds, evs[i].data.u64, evs[i].events, r->rt_off);
        continue;
      }
      int flags = 0;
      if (evs[i].events & (EPOLLIN | EPOLLHUP))
        flags |= CURL_CSELECT_IN;
      if (evs[i].events & EPOLLOUT)
        flags |= CURL_CSELECT_OUT;
      if (evs[i].events & EPOLLERR)
        flags |= CURL_CSELECT_ERR;
      r->io_now = tb_time_mono_ns();
      if ((evs[i].events & EPOLLIN) && r->kernel_stamps) {
        enum tb_rxts_src src;
        r->io_now = tb_rxts_peek(evs[i].data.fd, r->io_now, r->rt_off, &src);
        if (src == TB_RXTS_KERNEL)
          c->rx_kernel++;
        else if (src == TB_RXTS_CLOCK)
          c->rx_user++;
      }
      curl_multi_socket_action(r->multi, evs[i].data.fd, flags, &running);
      r->io_now = 0;
    }
    if (r->curl_deadline >= 0 && tb_time_mono_ns() >= r->curl_deadline) {
      r->curl_deadline = -1;
      curl_multi_socket_action(r->multi, CURL_SOCKET_TIMEOUT, 0, &running);
    }
    CURLMsg *msg;
    int q;
    while ((msg = curl_multi_info_read(r->multi, &q)) != NULL) {
      if (msg->msg != CURLMSG_DONE)
        continue;
      CURL *e = msg->easy_handle;
      CURLcode rc = msg->data.result;
      void *priv = NULL;
      curl_easy_getinfo(e, CURLINFO_PRIVATE, (char **)&priv);
      if (e == c->m_easy)
        metrics_done(c, rc);
      else if (priv != NULL)
        stream_done(priv, rc);
      else {
        curl_multi_remove_handle(r->multi, e);
        curl_easy_cleanup(e);
      }
    }
    tick(c, tb_time_mono_ns());
  }
  cut_all(c);
}

/* ------------------------------------------------------------ settings */

/* The run's settings: the parsed spec (tb_spec: validated, lists sorted),
 * its plan before discovery, and the target; nothing here reads JSON. */
static int
apply_spec(struct run *r, const struct tb_spec *s, const struct tb_engine_target *t, char **err)
{
  if (t == NULL || t->base_url == NULL || t->base_url[0] == '\0') {
    *err = tb_xstrdup("spec: base_url missing");
    return -1;
  }
  r->tgt = t;
  r->spec = s;
  r->base_url = tb_xstrdup(t->base_url);
  r->cell_memory_max =
    t->cell_memory_max != 0 ? t->cell_memory_max : (size_t)TB_ENGINE_CELL_MEMORY_DEFAULT;
  if (t->run_id != NULL && t->run_id[0] != '\0')
    r->run_id = tb_xstrdup(t->run_id);
  else
    r->run_id = tb_xasprintf("%" PRIx64, (uint64_t)tb_time_real_us());
  tb_plan_init(&r->plan, s, NULL);
  if (r->plan.matrix && r->plan.n_concurrency == 0) {
    *err = tb_xstrdup("spec: concurrency is empty");
    return -1;
  }
  return 0;
}

/* The plan again on what discovery found: the contexts the spec leaves to
 * the engine, the cells the server cannot run, the KV budget. */
static int
plan_on_server(struct run *r, char **err)
{
  const struct tb_plan_facts f = {
    .max_model_len = r->d.max_model_len,
    .kv_budget = r->d.kv_budget,
    .max_running = r->d.max_running,
  };
  tb_plan_free(&r->plan);
  tb_plan_init(&r->plan, r->spec, &f);
  if (r->plan.matrix && r->plan.n_contexts == 0 && r->plan.n_prefill == 0) {
    *err = tb_xasprintf("no context fits max_model_len %" PRId64 " with max output %" PRId64,
                        r->d.max_model_len, r->spec->max_output);
    return -1;
  }
  return 0;
}

/* --------------------------------------------------------------- result */

/* The result's header (tb_result) from the run's settings and discovery. */
static json_t *
build_header(struct run *r, const json_t *ep, int64_t started_us)
{
  const char *lc = json_string_value(json_object_get(ep, "launch_command"));
  char *red = tb_redact_command(lc);
  json_t *prov = tb_discover_provenance(&r->d);
  const struct tb_plan *p = &r->plan;
  struct tb_result_header h = {
    .run_id = r->run_id,
    .started_us = started_us,
    .url = r->d.base_url,
    .endpoint = ep,
    .engine = tb_discover_kind_name(r->d.kind),
    .engine_version = r->d.version,
    .model = r->d.model,
    .max_model_len = r->d.max_model_len,
    .launch_command = red,
    .kv_budget = p->kv_budget,
    .kv_source = p->kv_override ? "override" : r->d.kv_source,
    .max_running = r->d.max_running,
    .provenance = prov,
    .metrics = r->d.has_metrics,
    .contexts = p->contexts,
    .n_contexts = p->n_contexts,
    .concurrency = p->concurrency,
    .n_concurrency = p->n_concurrency,
    .prefill = p->prefill,
    .n_prefill = p->n_prefill,
    .duration_s = r->spec->duration_s,
    .settle_s = r->spec->settle_s,
    .max_output = r->spec->max_output,
    .repeats = p->repeats,
    .telemetry = r->tel != NULL,
  };
  json_t *doc = tb_result_header_new(&h);
  json_decref(prov);
  free(red);
  return doc;
}

/* Emits a finished cell: into the result and through the hook.  false:
 * the hook asked to stop. */
static bool
emit(struct run *r, json_t *cells, json_t *cell)
{
  json_array_append(cells, cell);
  r->done_count++;
  bool go = true;
  if (r->hooks != NULL && r->hooks->on_cell != NULL)
    go = r->hooks->on_cell(r->hooks->cls, cell);
  json_decref(cell);
  if (!go)
    r->cancelled = true;
  return go;
}

static void
progress(struct run *r, const json_t *key, unsigned remaining_cells, unsigned remaining_scouts)
{
  if (r->hooks == NULL || r->hooks->on_progress == NULL)
    return;
  double per = r->n_cell_timed ? r->avg_cell_s : r->spec->duration_s + r->spec->settle_s + 1.0;
  double eta = per * remaining_cells + 2.0 * remaining_scouts;
  r->hooks->on_progress(r->hooks->cls, key, r->done_count, r->total_cells, eta);
}

/* A run's repeats (tb_spec repeats): each measurement of a cell is held
 * until the last pass measures it, then the cell that combines them
 * (tb_result_combine) is emitted; a measurement in error closes its cell at
 * once (it is not measured again).  With one repeat a measurement is the
 * cell, emitted as it comes. */
struct repeats {
  unsigned n, pass;
  unsigned seq;   /* measurements so far: each one's place in the run */
  json_t *held;   /* "phase/context/concurrency" -> [measurements] */
  json_t *closed; /* keys emitted before the last pass */
};

static void
repeats_key(char *buf, size_t len, const char *phase, int64_t ctx, int64_t conc)
{
  snprintf(buf, len, "%s/%" PRId64 "/%" PRId64, phase, ctx, conc);
}

static bool
repeats_closed(const struct repeats *rp, const char *phase, int64_t ctx, int64_t conc)
{
  char key[96];
  repeats_key(key, sizeof key, phase, ctx, conc);
  return json_object_get(rp->closed, key) != NULL;
}

/* One measurement of a cell (stolen). */
static void
repeats_measured(struct run *r, json_t *cells, struct repeats *rp, json_t *cell)
{
  if (rp->n <= 1) {
    emit(r, cells, cell);
    return;
  }
  char key[96];
  repeats_key(key, sizeof key, json_string_value(json_object_get(cell, "phase")),
              json_integer_value(json_object_get(cell, "context")),
              json_integer_value(json_object_get(cell, "concurrency")));
  json_object_set_new(cell, "repeat", json_integer(rp->pass));
  json_object_set_new(cell, "seq", json_integer(rp->seq++));
  bool valid = strcmp(json_string_value(json_object_get(cell, "status")), "valid") == 0;
  json_t *held = json_object_get(rp->held, key);
  if (held == NULL) {
    held = json_array();
    json_object_set_new(rp->held, key, held);
  }
  json_array_append_new(held, cell);
  if (valid && rp->pass < rp->n)
    return;
  size_t n = json_array_size(held);
  json_t **reps = tb_xcalloc(n, sizeof *reps);
  for (size_t i = 0; i < n; i++)
    reps[i] = json_array_get(held, i);
  json_t *combined = tb_result_combine(reps, n);
  free(reps);
  json_object_del(rp->held, key);
  json_object_set_new(rp->closed, key, json_true());
  emit(r, cells, combined);
}

/* Aborts what is left and waits for the server to drain: 1 drained, 0 not
 * within drain_s, -1 unknown (no metrics, or cancelled). */
static int
abort_and_drain(struct run *r)
{
  /* a shard leaves the server to its cell's coordinator: the other shards'
   * streams run on it, and an abort would end theirs too */
  if (r->tgt->shard != NULL)
    return -1;
  if (r->d.kind == TB_KIND_SGLANG) {
    char *url = tb_xasprintf("%s/abort_request", r->d.base_url);
    const char *body = "{\"rid\":\"\",\"abort_all\":true}";
    struct tb_http_resp resp;
    if (tb_http_call("POST", url, r->api_key, body, strlen(body), 5000L, 65536, &resp) == 0) {
      /* any answer will do: older servers know only per-request aborts */
    }
    tb_http_resp_free(&resp);
    free(url);
  }
  /* metrics gone (server down?): -1, the next cell will tell */
  return tb_stream_drain_wait(&r->d, r->api_key, r->spec->drain_timeout_s, run_cancelled, r);
}

/* Before a decode cell (between cells, so a blocking call is fine): is the
 * server drained?  Recorded in the cell for its checks. */
static void
drained_before(struct run *r, struct cell *c)
{
  c->drained_before = tb_stream_drained(&r->d, r->api_key, &c->before_running, &c->before_waiting);
}

static char *
request_body(struct run *r, const char *prompt, int64_t max_tokens, size_t *len)
{
  json_t *b =
    json_pack("{s:s, s:[{s:s, s:s}], s:I, s:b, s:b, s:{s:b, s:b}}", "model", r->d.model, "messages",
              "role", "user", "content", prompt, "max_tokens", (json_int_t)max_tokens, "stream", 1,
              "ignore_eos", 1, "stream_options", "include_usage", 1, "continuous_usage_stats", 1);
  char *s = json_dumps(b, JSON_COMPACT);
  json_decref(b);
  *len = strlen(s);
  return s;
}

static void
cell_init(struct cell *c, struct run *r, int64_t ctx, unsigned conc, bool scout, const char *body,
          size_t body_len)
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
  if (r->direct) {
    const struct tb_direct_ops ops = { c, direct_body, direct_end };
    tb_direct_set_init(&c->ds, &r->dt, conc, r->auth, body, body_len, &ops);
  }
}

static void
cell_free(struct cell *c)
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
shard_samples(const struct cell *c, const struct tb_result_decode *d, struct tb_samples *m)
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
}

static json_t *
decode_result(struct cell *c, json_t *cell)
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
static void
cell_proofs(struct run *r, struct cell *c, json_t *cell, int drained_after)
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
    .kernel_wanted = r->kernel_stamps,
    .drained_before = c->drained_before,
    .drained_after = drained_after,
    .before_running = c->before_running,
    .before_waiting = c->before_waiting,
  };
  json_object_set_new(cell, "checks", tb_checks_json(&in));
  /* its cost and energy over the window (issue 26) */
  tb_telemetry_cell(r->tel, r->tgt->endpoint, cell, c->sc.w0, c->sc.w1);
}

uint64_t
tb_engine_nofile(const struct tb_spec *spec)
{
  struct tb_plan p;
  tb_plan_init(&p, spec, NULL);
  uint64_t streams = (uint64_t)p.max_concurrency; /* 1 without a matrix */
  if (p.rate && streams < TB_RATE_MAX_INFLIGHT)
    streams = TB_RATE_MAX_INFLIGHT;
  tb_plan_free(&p);
  return 2 * streams + NOFILE_SPARE;
}

/* --------------------------------------------------------------- run */

static void
run_free(struct run *r)
{
  tb_telemetry_stop(r->tel);
  if (r->multi != NULL)
    curl_multi_cleanup(r->multi);
  if (r->epfd >= 0)
    close(r->epfd);
  if (r->stamp_hold >= 0)
    close(r->stamp_hold);
  tb_http_headers_free(r->hdrs);
  tb_http_secret_free(r->auth);
  free(r->chat_url);
  free(r->metrics_url);
  tb_direct_free(&r->dt);
  tb_prompt_ctx_free(r->pc);
  tb_plan_free(&r->plan);
  free(r->base_url);
  free(r->run_id);
  free(r->stop);
  tb_discover_free(&r->d);
}

/* Whether the decode cell c does not run: the plan's gate (the server's
 * length, running requests, KV budget), or a scheduler cap measured at
 * this context or a smaller one, which holds here too (a scheduler cap is
 * the same, a KV cache admits fewer of longer ones). */
static bool
gated(const struct run *r, const struct tb_plan_cell *c)
{
  return c->gate != TB_PLAN_RUN ||
         (r->cap_requests > 0 && c->context >= r->cap_ctx && c->concurrency > r->cap_requests);
}

/* The cell of a gated decode cell c (new), or NULL when c runs. */
static json_t *
gated_cell(const struct run *r, const struct tb_plan_cell *c)
{
  if (!gated(r, c))
    return NULL;
  int64_t ctx = c->context, conc = c->concurrency, out = r->spec->max_output;
  json_t *cell = tb_result_cell_new("decode", ctx, conc);
  char *why = NULL;
  switch (c->gate) {
  case TB_PLAN_TOO_LONG:
    why = tb_xasprintf("context + max output (%" PRId64 ") exceeds max_model_len (%" PRId64 ")",
                       ctx + out, r->d.max_model_len);
    tb_result_cell_set_status(cell, "skipped", why);
    break;
  case TB_PLAN_TOO_MANY:
    why =
      tb_xasprintf("more requests than the server runs at once (%" PRId64 ")", r->d.max_running);
    tb_result_cell_set_status(cell, "skipped", why);
    break;
  case TB_PLAN_OVER_KV:
    why = tb_xasprintf("%" PRId64 " x (%" PRId64 " + %" PRId64 ") = %" PRId64
                       " tokens > KV budget %" PRId64,
                       conc, ctx, out, conc * (ctx + out), r->plan.kv_budget);
    tb_result_cell_set_status(cell, "over_capacity", why);
    break;
  case TB_PLAN_RUN: {
    char lab[32];
    tb_format_tokens(r->cap_ctx, lab, sizeof lab);
    why = tb_xasprintf("more requests than the server runs at once: %" PRId64
                       " (its scheduler cap, measured at context %s with %" PRId64 ")",
                       r->cap_requests, lab, r->cap_conc);
    tb_result_cell_set_sched_cap(cell, r->cap_requests, why);
    break;
  }
  }
  free(why);
  return cell;
}

/* ------------------------------------------------------ rate cells */

/* tb_rate_env's callbacks over the run (cls). */
struct rate_ctx {
  struct run *r;
  json_t *cells;
};

static bool
rate_emit(void *cls, json_t *cell)
{
  struct rate_ctx *x = cls;
  return emit(x->r, x->cells, cell);
}

static void
rate_keep(void *cls, const json_t *cell)
{
  struct rate_ctx *x = cls;
  json_array_append(x->cells, (json_t *)cell);
}

static void
rate_progress(void *cls, const json_t *key)
{
  struct rate_ctx *x = cls;
  progress(x->r, key, 0, 0);
}

static bool
rate_cancelled(void *cls)
{
  struct rate_ctx *x = cls;
  return run_cancelled(x->r);
}

static bool
rate_shard_cell(void *cls, double rate, unsigned index, json_t *cell)
{
  struct rate_ctx *x = cls;
  return x->r->hooks->shard_rate(x->r->hooks->cls, rate, index, cell);
}

/* The plan's rate cells and sweep (tb_rate), after the matrix. */
static void
run_rate_cells(struct run *r, const json_t *done_cells, json_t *cells, json_t **sweep)
{
  struct rate_ctx x = { r, cells };
  const struct tb_rate_env env = {
    .d = &r->d,
    .api_key = r->api_key,
    .run_id = r->run_id,
    .cell_memory_max = r->cell_memory_max,
    .kernel_stamps = r->kernel_stamps,
    .server_series = r->server_series,
    .curl_streams = r->curl_streams,
    .error_bodies = r->hooks != NULL && r->hooks->error_bodies,
    .done_cells = done_cells,
    .trace = r->tgt->trace,
    .cls = &x,
    .emit = rate_emit,
    .keep = rate_keep,
    .progress = rate_progress,
    .cancelled = rate_cancelled,
    .telemetry = r->tel,
    .endpoint = r->tgt->endpoint,
    .shard_cell = r->hooks != NULL && r->hooks->shard_rate != NULL ? rate_shard_cell : NULL,
    .shard = r->tgt->shard != NULL && r->tgt->shard->index > 0 ? r->tgt->shard : NULL,
    .reset_memo = &r->reset_memo,
  };
  if (tb_rate_run(&r->plan, &env, sweep) == TB_RATE_CANCELLED)
    r->cancelled = true;
}

/* ------------------------------------------------------------ the matrix */

/* What the matrix carries across its contexts and passes. */
struct matrix {
  json_t *cells;      /* the result's */
  const json_t *done; /* cells of an earlier attempt (may be NULL) */
  struct repeats rp;
  unsigned runnable_left, scouts_left; /* for the ETA */
};

/* One context of one pass: its cells in the plan (its prefill scout
 * first, when planned), and what its scout made for its decode cells. */
struct ctxrun {
  const struct tb_plan_cell *cells;
  size_t n;
  int64_t ctx;
  unsigned pass;
  bool open_pf; /* its prefill cell is to be measured */
  struct tb_prompt prompt;
  char *dbody, *sbody;
  size_t dlen, slen;
  char *ctx_err; /* when set, every runnable cell here is an error */
};

/* The end of the plan's context starting at matrix cell i. */
static size_t
context_end(const struct tb_plan *p, size_t i)
{
  size_t j = i + 1;
  while (j < p->n_matrix && p->cells[j].context == p->cells[i].context)
    j++;
  return j;
}

/* Whether the decode cell c is still to be measured in this pass. */
static bool
decode_open(const struct run *r, const struct matrix *m, const struct tb_plan_cell *c)
{
  return c->phase == TB_PLAN_DECODE && !gated(r, c) &&
         tb_result_find_cell(m->done, "decode", c->context, c->concurrency) == NULL &&
         !repeats_closed(&m->rp, "decode", c->context, c->concurrency);
}

/* The cells left to measure and the scouts that go with them, every pass
 * measuring them all again (the ETA's counts). */
static void
matrix_count(struct run *r, struct matrix *m)
{
  const struct tb_plan *p = &r->plan;
  for (size_t i = 0; i < p->n_matrix; i = context_end(p, i)) {
    bool any = false;
    for (size_t k = i; k < context_end(p, i); k++) {
      const struct tb_plan_cell *c = &p->cells[k];
      if (c->phase == TB_PLAN_PREFILL)
        any |= tb_result_find_cell(m->done, "prefill", c->context, 1) == NULL;
      else if (decode_open(r, m, c)) {
        m->runnable_left++;
        any = true;
      }
    }
    m->scouts_left += any;
  }
  m->runnable_left *= p->repeats;
  m->scouts_left *= p->repeats;
}

/* The prefill cell of a scout that ran (new). */
static json_t *
scout_cell(struct run *r, struct cell *sc, const struct ctxrun *x)
{
  json_t *cell = tb_result_cell_new("prefill", x->ctx, 1);
  if (sc->failed) {
    tb_result_cell_set_status(cell, "error", sc->reason);
    return cell;
  }
  bool from_usage = sc->scout_prompt_tokens > 0;
  tb_result_cell_set_prefill(cell, from_usage ? sc->scout_prompt_tokens : x->prompt.tokens,
                             from_usage, (double)sc->scout_ttft_ns / 1e9);
  /* a scout is cold but for what the server's cache held of the chat
   * template before the tag: it counts only the tokens the server evaluated */
  if (from_usage && sc->scout_cached_tokens > 0)
    tb_result_cell_set_prefill_cached(cell, sc->scout_cached_tokens);
  json_t *st = tb_srvtime_json(&sc->srv);
  if (st != NULL)
    json_object_set_new(cell, "server_timings", st);
  if (!from_usage && r->prompt_estimate)
    tb_result_cell_set_prompt_estimate(cell, TB_PROMPT_ESTIMATE);
  return cell;
}

/* A cold scout (issue 25): its one prompt is its own, so the server's
 * cache can hold only the chat template's tokens of it
 * (tb_checks_prefix_cell, prefix_hits_unexplained). */
static void
scout_prefix_check(const struct cell *sc, json_t *pf)
{
  if (sc->failed || sc->scout_prompt_tokens <= 0 || sc->scout_cached_tokens < 0)
    return;
  const struct tb_checks_prefix in = {
    .requests = 1,
    .prompt_mean = (double)sc->scout_prompt_tokens,
    .implied_pct = NAN,
    .have_hit = true,
    .hit_pct = 100.0 * (double)sc->scout_cached_tokens / (double)sc->scout_prompt_tokens,
  };
  tb_checks_prefix_cell(pf, &in);
}

/* The context's scout: its prompt and request bodies, one request that
 * warms the server's cache for the decode cells and measures the prefill
 * cell; then the server drains. */
static void
run_scout(struct run *r, struct matrix *m, struct ctxrun *x)
{
  json_t *key = tb_result_cell_new("prefill", x->ctx, 1);
  if (r->plan.repeats > 1)
    json_object_set_new(key, "repeat", json_integer(x->pass));
  progress(r, key, m->runnable_left, m->scouts_left);
  json_decref(key);
  int64_t target = x->ctx;
  if (r->d.max_model_len > 0 && target + 1 > r->d.max_model_len)
    target = r->d.max_model_len - 1 - 16;
  char *perr = NULL;
  if (tb_prompt_build(r->pc, x->ctx, target, &x->prompt, &perr) != 0) {
    x->ctx_err = tb_xasprintf("prompt: %s", perr ? perr : "failed");
    free(perr);
    return;
  }
  r->prompt_estimate = x->prompt.source != NULL && strcmp(x->prompt.source, "estimate") == 0;
  x->sbody = request_body(r, x->prompt.text, 1, &x->slen);
  x->dbody = request_body(r, x->prompt.text, r->spec->max_output, &x->dlen);
  /* a cold prefill: the server's prefix cache emptied first (cache: reset) */
  char why[TB_CACHERESET_WHY_MAX] = "";
  bool reset = strcmp(r->spec->cache, "reset") == 0;
  enum tb_cache_reset cr =
    reset ? tb_cache_reset_once(&r->reset_memo, &r->d, r->api_key, why, sizeof why)
          : TB_CACHE_RESET_UNSUPPORTED;
  struct cell sc;
  cell_init(&sc, r, x->ctx, 1, true, x->sbody, x->slen);
  cell_loop(&sc);
  if (sc.cancelled)
    r->cancelled = true;
  if (sc.failed && !sc.cancelled)
    x->ctx_err = tb_xasprintf("warm-up request: %s", sc.reason);
  if (sc.failed && sc.global[0] != '\0' && r->stop == NULL)
    r->stop = tb_xstrdup(sc.global);
  if (x->open_pf && !r->cancelled) {
    json_t *pf = scout_cell(r, &sc, x);
    if (reset) {
      json_object_set_new(pf, "cache_reset", json_string(tb_cache_reset_name(cr)));
      json_object_set_new(pf, "cache_reset_detail", json_string(why));
      scout_prefix_check(&sc, pf);
    }
    repeats_measured(r, m->cells, &m->rp, pf);
  }
  cell_free(&sc);
  if (m->scouts_left > 0)
    m->scouts_left--;
  if (!r->cancelled)
    (void)abort_and_drain(r);
}

/* Measures the decode cell cell (its key; stolen) on the context's body. */
static void
measure_decode(struct run *r, struct matrix *m, struct ctxrun *x, const struct tb_plan_cell *pc,
               json_t *cell)
{
  if (r->plan.repeats > 1)
    json_object_set_new(cell, "repeat", json_integer(x->pass));
  progress(r, cell, m->runnable_left, m->scouts_left);
  json_object_del(cell, "repeat");
  /* a sharded cell: measured by the caller's shards (worker_shard.h) */
  if (r->hooks != NULL && r->hooks->shard_cell != NULL &&
      r->hooks->shard_cell(r->hooks->cls, x->ctx, pc->concurrency, cell)) {
    if (run_cancelled(r)) { /* stopped while its shards ran: not measured */
      r->cancelled = true;
      json_decref(cell);
      return;
    }
    (void)abort_and_drain(r); /* what the shards left on the server */
    /* priced from its merged tokens and window; its energy is not read (the
     * shards' common window lies on their timeline, not this telemetry's) */
    tb_telemetry_cell(NULL, r->tgt->endpoint, cell, 0, 0);
    repeats_measured(r, m->cells, &m->rp, cell);
    m->runnable_left--;
    return;
  }
  int64_t t0 = tb_time_mono_ns();
  struct cell dc;
  cell_init(&dc, r, x->ctx, (unsigned)pc->concurrency, false, x->dbody, x->dlen);
  drained_before(r, &dc);
  cell_loop(&dc);
  if (dc.cancelled) {
    r->cancelled = true;
    cell_free(&dc);
    json_decref(cell);
    return;
  }
  if (dc.sched_cap > 0 && (r->cap_requests == 0 || dc.sched_cap < r->cap_requests)) {
    r->cap_requests = dc.sched_cap;
    r->cap_ctx = x->ctx;
    r->cap_conc = pc->concurrency;
  }
  if (!dc.failed && dc.sched_cap == 0)
    r->valid_decodes++;
  if (dc.failed && dc.global[0] != '\0' && r->stop == NULL)
    r->stop = tb_xstrdup(dc.global);
  /* drained after the cell is one of its checks: drain, then emit */
  int drained = abort_and_drain(r);
  cell_proofs(r, &dc, decode_result(&dc, cell), drained);
  repeats_measured(r, m->cells, &m->rp, cell);
  cell_free(&dc);
  m->runnable_left--;
  if (r->stop != NULL)
    return;
  double took = (double)(tb_time_mono_ns() - t0) / 1e9;
  r->avg_cell_s = (r->avg_cell_s * r->n_cell_timed + took) / (r->n_cell_timed + 1);
  r->n_cell_timed++;
}

/* One decode cell of the context: kept from an earlier attempt, gated,
 * closed at an earlier pass, an error of its context, or measured.  False:
 * the context stops here (cancelled, or the run stops). */
static bool
run_decode(struct run *r, struct matrix *m, struct ctxrun *x, const struct tb_plan_cell *pc)
{
  const json_t *done = tb_result_find_cell(m->done, "decode", x->ctx, pc->concurrency);
  if (done != NULL) {
    if (x->pass == 1)
      json_array_append(m->cells, (json_t *)done);
    return true;
  }
  json_t *cell = gated_cell(r, pc);
  if (cell != NULL) {
    if (x->pass == 1)
      emit(r, m->cells, cell);
    else
      json_decref(cell);
    return true;
  }
  if (repeats_closed(&m->rp, "decode", x->ctx, pc->concurrency))
    return true; /* in error at an earlier pass */
  cell = tb_result_cell_new("decode", x->ctx, pc->concurrency);
  if (x->ctx_err != NULL) {
    tb_result_cell_set_status(cell, "error", x->ctx_err);
    repeats_measured(r, m->cells, &m->rp, cell);
    m->runnable_left--;
    return r->stop == NULL;
  }
  measure_decode(r, m, x, pc, cell);
  return !r->cancelled && r->stop == NULL;
}

/* One context of a pass: its scout when any of its cells is still to be
 * measured, then its decode cells. */
static void
run_context(struct run *r, struct matrix *m, const struct tb_plan_cell *cells, size_t n,
            unsigned pass)
{
  struct ctxrun x = { .cells = cells, .n = n, .ctx = cells[0].context, .pass = pass };
  const json_t *done_pf = tb_result_find_cell(m->done, "prefill", x.ctx, 1);
  x.open_pf = cells[0].phase == TB_PLAN_PREFILL && done_pf == NULL &&
              !repeats_closed(&m->rp, "prefill", x.ctx, 1);
  bool need_scout = x.open_pf;
  for (size_t j = 0; j < n; j++)
    need_scout |= decode_open(r, m, &cells[j]);
  if (done_pf != NULL && pass == 1)
    json_array_append(m->cells, (json_t *)done_pf);
  if (need_scout)
    run_scout(r, m, &x);
  /* A global failure at the warm-up: its prefill cell says it; else the
   * first decode cell does, and the run stops there. */
  bool stop_now = r->stop != NULL && x.open_pf;
  for (size_t j = 0; j < n && !r->cancelled && !stop_now; j++)
    if (cells[j].phase == TB_PLAN_DECODE && !run_decode(r, m, &x, &cells[j]))
      break;
  free(x.ctx_err);
  free(x.dbody);
  free(x.sbody);
  tb_prompt_free(&x.prompt);
}

/* The plan's matrix: pass 1 over the whole matrix, then pass 2, ...  A pass
 * has prompts of its own (the run id and the pass in the tag), so each
 * pass's scouts are cold and its cells warm only on their own scout. */
static void
run_matrix(struct run *r, json_t *cells, const json_t *done_cells)
{
  const struct tb_plan *p = &r->plan;
  struct matrix m = { .cells = cells, .done = done_cells };
  m.rp = (struct repeats){ .n = p->repeats, .held = json_object(), .closed = json_object() };
  matrix_count(r, &m);
  for (unsigned pass = 1; pass <= p->repeats && !r->cancelled && r->stop == NULL; pass++) {
    m.rp.pass = pass;
    if (pass > 1) {
      char *tag = tb_xasprintf("%s-r%u", r->run_id, pass);
      tb_prompt_ctx_free(r->pc);
      r->pc = tb_prompt_ctx_new(&r->d, r->api_key, tag);
      free(tag);
    }
    for (size_t i = 0; i < p->n_matrix && !r->cancelled && r->stop == NULL;) {
      size_t j = context_end(p, i);
      run_context(r, &m, &p->cells[i], j - i, pass);
      i = j;
    }
  }
  json_decref(m.rp.held);
  json_decref(m.rp.closed);
}

/* ------------------------------------------------------------- the run */

/* The event loop, the streams' headers and transport, the descriptors
 * the largest cell needs. */
static int
loop_setup(struct run *r, char **err)
{
  r->epfd = epoll_create1(EPOLL_CLOEXEC);
  r->multi = curl_multi_init();
  if (r->epfd < 0 || r->multi == NULL) {
    *err = tb_xstrdup("cannot set up the event loop");
    return -1;
  }
  curl_multi_setopt(r->multi, CURLMOPT_SOCKETFUNCTION, sock_cb);
  curl_multi_setopt(r->multi, CURLMOPT_SOCKETDATA, r);
  curl_multi_setopt(r->multi, CURLMOPT_TIMERFUNCTION, timer_cb);
  curl_multi_setopt(r->multi, CURLMOPT_TIMERDATA, r);
  curl_multi_setopt(r->multi, CURLMOPT_MAXCONNECTS, (long)MAX_CONCURRENCY);
  r->auth = tb_http_auth_header(r->api_key);
  if (r->auth != NULL)
    r->hdrs = curl_slist_append(r->hdrs, r->auth);
  r->hdrs = curl_slist_append(r->hdrs, "Content-Type: application/json");
  r->hdrs = curl_slist_append(r->hdrs, "Accept: text/event-stream");
  r->hdrs = curl_slist_append(r->hdrs, "Expect:");
  r->chat_url = tb_xasprintf("%s/v1/chat/completions", r->d.base_url);
  r->metrics_url = tb_xasprintf("%s/metrics", r->d.base_url);
  r->direct = tb_direct_setup(&r->dt, r->chat_url, r->kernel_stamps, r->curl_streams, r->epfd);
  return 0;
}

/* The run's end: its status, the measured scheduler cap in the header. */
static enum tb_engine_status
run_status(struct run *r, json_t *header, char **err)
{
  enum tb_engine_status status = r->cancelled ? TB_ENGINE_CANCELLED : TB_ENGINE_OK;
  if (r->stop != NULL && !r->cancelled) {
    /* Nothing can be measured: one line, not N identical error cells. */
    *err = r->stop;
    r->stop = NULL;
    status = TB_ENGINE_FAILED;
  }
  if (r->cap_requests > 0 && header != NULL) {
    json_t *cap = json_object_get(header, "capacity");
    if (json_is_object(cap))
      json_object_set_new(cap, "scheduler_cap",
                          json_pack("{s:I, s:I, s:I, s:s}", "requests", (json_int_t)r->cap_requests,
                                    "context", (json_int_t)r->cap_ctx, "concurrency",
                                    (json_int_t)r->cap_conc, "source",
                                    "measured: running/waiting gauges"));
  }
  return status;
}

/* The result document's status for status. */
static const char *
status_name(enum tb_engine_status status, const json_t *cells)
{
  return status == TB_ENGINE_FAILED      ? "failed"
         : status == TB_ENGINE_CANCELLED ? "cancelled"
                                         : tb_result_status_of_cells(cells);
}

enum tb_engine_status
tb_engine_run(const struct tb_spec *spec, const struct tb_engine_target *tgt, const char *api_key,
              const json_t *done_cells, const struct tb_engine_hooks *hooks, json_t **result,
              char **err)
{
  struct run run;
  struct run *r = &run;
  memset(r, 0, sizeof *r);
  r->epfd = -1;
  r->stamp_hold = -1;
  r->curl_deadline = -1;
  r->hooks = hooks;
  /* For side-by-side measurements (bench/bench_engine.sh) only. */
  r->kernel_stamps = !tgt->client_stamps;
  r->server_series = !tgt->no_server_series;
  r->curl_streams = tgt->curl_streams;
  /* first thing: the kernel switches stamping on during discovery, not in
   * the middle of a measurement */
  r->stamp_hold = r->kernel_stamps ? tb_rxts_hold() : -1;
  r->api_key = api_key;
  *err = NULL;
  *result = NULL;
  enum tb_engine_status status = TB_ENGINE_FAILED;
  json_t *header = NULL, *sweep = NULL;
  json_t *cells = json_array();
  int64_t started_us = tb_time_real_us();
  tb_http_global_init();

  if (apply_spec(r, spec, tgt, err) != 0 ||
      tb_discover_run(r->base_url, api_key, spec->model, &r->d, err) != 0 ||
      plan_on_server(r, err) != 0)
    goto out;
  const char *tel_url = json_string_value(json_object_get(tgt->endpoint, "telemetry_url"));
  if (tel_url != NULL) /* from now on: a read before the first window (issue 26) */
    r->tel = tb_telemetry_start(tel_url, 0);
  header = build_header(r, tgt->endpoint, started_us);
  if (r->plan.rate)
    json_object_set_new(json_object_get(header, "settings"), "rate", tb_rate_settings_json(spec));
  if (hooks != NULL && hooks->on_header != NULL)
    hooks->on_header(hooks->cls, header);
  if (loop_setup(r, err) != 0)
    goto out;
  r->pc = tb_prompt_ctx_new(&r->d, api_key, r->run_id);
  r->total_cells = (unsigned)r->plan.n_cells;
  run_matrix(r, cells, done_cells);
  if (r->plan.rate && !r->cancelled && r->stop == NULL)
    run_rate_cells(r, done_cells, cells, &sweep);
  status = run_status(r, header, err);

out:
  *result =
    tb_result_finish(header, r->run_id, started_us, status_name(status, cells), *err, cells);
  if (sweep != NULL)
    json_object_set_new(*result, "sweep", sweep);
  run_free(r);
  return status;
}

json_t *
tb_engine_probe(const char *base_url, const char *api_key, char **err)
{
  struct tb_discover d;
  *err = NULL;
  if (tb_discover_run(base_url, api_key, NULL, &d, err) != 0) {
    tb_discover_free(&d);
    return NULL;
  }
  json_t *j = tb_discover_to_json(&d);
  tb_discover_free(&d);
  return j;
}

bool
tb_engine_target_cfg(struct tb_engine_target *t, const struct tb_cfg *cfg, char **err)
{
  bool series = true;
  if (!tb_cfg_get_bool(cfg, "TB_ENGINE_CLIENT_STAMPS", &t->client_stamps, err) ||
      !tb_cfg_get_bool(cfg, "TB_ENGINE_SERVER_SERIES", &series, err) ||
      !tb_cfg_get_bool(cfg, "TB_ENGINE_CURL_STREAMS", &t->curl_streams, err))
    return false;
  t->no_server_series = !series;
  return true;
}
