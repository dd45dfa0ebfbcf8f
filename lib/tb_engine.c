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
 * environment) the streams' sockets are the engine's own: libcurl resolves
 * the endpoint and picks its address once (a CONNECT_ONLY probe), then each
 * slot of a cell keeps one kept-alive connection, writes its request with
 * one sendmsg and reads the response with one recvmsg per readiness, which
 * returns the kernel's receive stamp with the bytes (tb_rxts), parsed by
 * tb_h1 (HTTP/1.1 framing) and tb_sse.  Per read that is one system call
 * where libcurl's read path makes three (the stamp peek, recv and a poll()
 * that asks whether more is pending) and about half the CPU time per token
 * on a bench (bench/bench_engine.sh prints both).  Over TLS, through a
 * proxy, or with TB_ENGINE_CURL_STREAMS=1, streams are libcurl easy handles
 * on the multi, stamped by a peek before libcurl reads.  Everything else
 * (discovery, /metrics, aborts) is libcurl.
 *
 * A cell: C streams start at once; readiness = every stream has produced a
 * token and (where metrics exist) running = C, waiting = 0, held for settle_s;
 * then the window [w0, w0 + duration); at its end every stream is cut (its
 * connection closed, which aborts the request on vLLM; SGLang also gets
 * /abort_request) and the loop waits for the server to drain.
 *
 * Counting.  Output tokens are the deltas of cumulative usage.completion_tokens
 * (continuous usage stats).  A chunk with output but no usage switches that
 * stream to counting chunks (one per choice with text), and the cell's
 * token_source becomes "chunks": a flagged fallback, never silent.
 *
 * Faults: any stream error (transport, HTTP status, malformed SSE or JSON, a
 * stream cut before [DONE], a stall, a missing usage chunk where the server
 * gives usage) makes the cell an error with the first reason; the run goes on.
 */
#include "tb_engine.h"

#include <curl/curl.h>
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include "tb_discover.h"
#include "tb_h1.h"
#include "tb_http.h"
#include "tb_oai.h"
#include "tb_prompt.h"
#include "tb_redact.h"
#include "tb_rxts.h"
#include "tb_sse.h"
#include "tb_stats.h"

#define ERRBODY_MAX 512
#define METRICS_BODY_MAX (4u * 1024u * 1024u)
#define MAX_CONCURRENCY 65536
#define MAX_LIST 64
#define NS_PER_S 1000000000LL
#define SCAN_NS 10000000LL /* per-stream checks: every 10 ms */
#define CONNECT_TIMEOUT_MS 10000L /* a stream's connection, either transport */
/* How long a server may run more requests than ours before a cell that is
 * getting ready says it is loaded by someone else (at most half the ready
 * timeout). */
#define FOREIGN_LOAD_S 20.0
#define SCHEMA "tokbench.result/v1"
#define DIRECT_TAG (1ULL << 62) /* epoll data of a stream connection we read */
#define GEN_MASK 0x3fffffffu
#define RBUF_SIZE (64u * 1024u)

/* ---------------------------------------------------------------- helpers */

int64_t
tb_engine_top_context(int64_t max_model_len, int64_t max_output)
{
  int64_t room = max_model_len - max_output - TB_ENGINE_CTX_MARGIN;
  if (room < 1024)
    return room > 0 ? room : 0;
  return room / 1024 * 1024;
}

bool
tb_engine_over_capacity(int64_t conc, int64_t context, int64_t max_output,
                        int64_t budget)
{
  if (budget <= 0)
    return false;
  return conc * (context + max_output) > budget;
}

static double
ms(double ns)
{
  return ns / 1e6;
}

static json_t *
json_num_or_null(double v)
{
  return isfinite(v) ? json_real(v) : json_null();
}

/* ------------------------------------------------------------- structures */

struct run;
struct cell;

/* A slot's connection on the direct transport (see Stream transport). */
struct dconn {
  int fd;          /* -1: none */
  uint32_t gen;    /* tells a closed fd's stale events from the next one's */
  bool connecting; /* non-blocking connect in progress */
  bool idle;       /* kept alive after a complete response, free to reuse */
};

struct stream {
  struct cell *cell;
  CURL *easy;
  struct tb_sse sse;
  unsigned slot;
  int64_t now;          /* arrival stamp of the read being parsed */
  int64_t t_start, t_first, t_last_byte;
  int64_t cum;          /* last cumulative completion_tokens */
  int64_t counted;
  int64_t prompt_tokens;
  int64_t w_first_t, w_last_t, w_tokens, w_first_tokens;
  long http_status;
  bool http_checked, saw_usage, saw_final_usage, chunk_mode, got_done;
  bool failed;
  char reason[200];
  char errbody[ERRBODY_MAX];
  size_t errlen;
  char curl_err[CURL_ERROR_SIZE];
  /* direct transport */
  bool direct;
  bool reused;          /* sent on a kept-alive connection */
  bool got_bytes;       /* the response has begun */
  bool keep;            /* ended cleanly: the connection may be reused */
  size_t wr_off;        /* request bytes written */
  int send_errno;       /* the server stopped taking the request (EPIPE...) */
  struct tb_h1 h1;
};

enum phase { PH_READY, PH_WINDOW, PH_DONE };

struct cell {
  struct run *run;
  int64_t ctx;
  unsigned conc;
  bool scout;
  const char *body;
  size_t body_len;
  struct stream **slots;
  bool *warmed;         /* slot's first stream produced a token */
  unsigned n_warmed;    /* slots warmed */
  int64_t next_scan;    /* next per-stream first-token / stall scan */
  enum phase phase;
  int64_t t_begin, w0, w1, ready_since, next_cancel_poll;
  bool failed, cancelled;
  char reason[300];
  struct tb_stats ttft, tbt;
  int64_t win_tokens;
  unsigned completed, started, active;
  bool chunk_source;
  /* metrics sampling */
  CURL *m_easy;
  char *m_buf;
  size_t m_len;
  bool m_over;
  int64_t m_next;
  bool m_cond;
  double m_running, m_waiting; /* last sample; -1 before the first */
  int64_t foreign_since;       /* all ours producing, yet running > C: since */
  double run_sum;
  unsigned run_n;
  /* client active integral over the window */
  int64_t act_ns, act_last;
  /* scout */
  int64_t scout_ttft_ns, scout_prompt_tokens;
  /* reads stamped by the kernel, by our clock */
  uint64_t rx_kernel, rx_user;
  /* direct transport: a connection per slot, the request head */
  struct dconn *dc;
  char *head;
  size_t head_len;
};

struct run {
  /* settings */
  char *base_url;
  char *model_req;
  char *run_id;
  int64_t contexts[MAX_LIST];
  size_t n_contexts;
  int64_t prefill[MAX_LIST];
  size_t n_prefill;
  int64_t conc[MAX_LIST];
  size_t n_conc;
  bool contexts_given, prefill_given;
  double duration_s, settle_s, stall_s, first_token_s, ready_s, drain_s,
      metrics_s;
  int64_t max_output;
  int64_t kv_override;
  /* endpoint */
  struct tb_discover d;
  const char *api_key;
  int64_t kv_budget;
  const char *kv_source;
  /* loop */
  CURLM *multi;
  int epfd;
  int64_t curl_deadline;
  int64_t io_now;       /* stamp of the socket being read; 0 outside */
  int64_t rt_off;       /* CLOCK_REALTIME - CLOCK_MONOTONIC (tb_rxts) */
  bool kernel_stamps;   /* tb_rxts; off with TB_ENGINE_CLIENT_STAMPS=1 */
  int stamp_hold;       /* tb_rxts_hold: stamping stays on for the run */
  /* direct transport (see Stream transport) */
  bool direct;
  struct sockaddr_storage addr;
  socklen_t addrlen;
  char *req_host, *req_path;
  char *rbuf;
  struct curl_slist *hdrs;
  char *auth;
  char *chat_url, *metrics_url;
  const struct tb_engine_hooks *hooks;
  bool usage_known, usage_supported;
  bool cancelled;
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
  struct epoll_event ev = {0};
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
  r->curl_deadline = timeout_ms < 0
                         ? -1
                         : tb_time_mono_ns() + (int64_t)timeout_ms * 1000000;
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

static void stream_fail(struct stream *s, const char *fmt, ...)
    TB_PRINTF(2, 3);

static void
stream_fail(struct stream *s, const char *fmt, ...)
{
  if (s->failed)
    return;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(s->reason, sizeof s->reason, fmt, ap);
  va_end(ap);
  s->failed = true;
}

static void
count_tokens(struct stream *s, int64_t delta)
{
  struct cell *c = s->cell;
  int64_t now = s->now;
  s->counted += delta;
  if (s->t_first == 0) {
    s->t_first = now;
    tb_stats_add(&c->ttft, now - s->t_start);
    if (!c->warmed[s->slot]) {
      c->warmed[s->slot] = true;
      c->n_warmed++;
    }
    if (c->scout) {
      c->scout_ttft_ns = now - s->t_start;
    }
  }
  if (now >= c->w0 && now < c->w1) {
    if (s->w_first_t == 0) {
      s->w_first_t = now;
      s->w_first_tokens = delta;
    }
    s->w_last_t = now;
    s->w_tokens += delta;
    c->win_tokens += delta;
  }
}

static bool
on_sse_event(void *cls, const char *data, size_t len)
{
  struct stream *s = cls;
  struct tb_oai_chunk ch;
  enum tb_oai_status st = tb_oai_parse_chunk(data, len, &ch);
  if (st == TB_OAI_DONE) {
    s->got_done = true;
    return true;
  }
  if (st != TB_OAI_OK) {
    stream_fail(s, "malformed chunk: %.80s", data);
    return false;
  }
  if (ch.is_error) {
    stream_fail(s, "error in stream: %s", ch.error);
    return false;
  }
  int64_t delta = 0;
  if (ch.has_usage) {
    if (ch.completion_tokens < s->cum) {
      stream_fail(s, "usage.completion_tokens went backwards (%" PRId64
                     " after %" PRId64 ")",
                  ch.completion_tokens, s->cum);
      return false;
    }
    if (!s->chunk_mode)
      delta = ch.completion_tokens - s->cum;
    s->cum = ch.completion_tokens;
    s->saw_usage = true;
    if (ch.n_choices == 0)
      s->saw_final_usage = true;
    if (ch.prompt_tokens >= 0)
      s->prompt_tokens = ch.prompt_tokens;
  } else if (ch.text_choices > 0) {
    if (!s->chunk_mode) {
      s->chunk_mode = true;
      s->cell->chunk_source = true;
    }
    delta = ch.text_choices;
  } else if (s->chunk_mode) {
    delta = 0;
  }
  if (delta > 0)
    count_tokens(s, delta);
  const struct tb_engine_hooks *h = s->cell->run->hooks;
  if (h != NULL && h->on_event != NULL && !s->cell->scout)
    h->on_event(h->cls, s->slot, s->now, NULL, 0, delta);
  return true;
}

static void
on_sse_comment(void *cls, const char *text, size_t len)
{
  struct stream *s = cls;
  const struct tb_engine_hooks *h = s->cell->run->hooks;
  if (h != NULL && h->on_event != NULL && !s->cell->scout)
    h->on_event(h->cls, s->slot, s->now, text, len, 0);
}

/* Body bytes of a stream's response as they come, on either transport
 * (http_status known); false stops the response (the reason is recorded). */
static bool
stream_body(struct stream *s, const char *ptr, size_t n)
{
  int64_t io = s->cell->run->io_now;
  int64_t now = io != 0 ? io : tb_time_mono_ns();
  s->now = now;
  s->t_last_byte = now;
  if (s->http_status != 200) {
    size_t room = sizeof s->errbody - 1 - s->errlen;
    size_t k = n < room ? n : room;
    memcpy(s->errbody + s->errlen, ptr, k);
    s->errlen += k;
    s->errbody[s->errlen] = '\0';
    return true;
  }
  enum tb_sse_status st = tb_sse_feed(&s->sse, ptr, n);
  if (st == TB_SSE_TOO_LONG) {
    stream_fail(s, "SSE line or event over its cap");
    return false;
  }
  return st == TB_SSE_OK;
}

static size_t
stream_write(char *ptr, size_t size, size_t nmemb, void *ud)
{
  struct stream *s = ud;
  size_t n = size * nmemb;
  if (!s->http_checked) {
    s->http_checked = true;
    curl_easy_getinfo(s->easy, CURLINFO_RESPONSE_CODE, &s->http_status);
  }
  return stream_body(s, ptr, n) ? n : 0; /* 0 aborts the transfer */
}

static bool
direct_body(void *cls, const char *data, size_t n)
{
  struct stream *s = cls;
  if (!s->http_checked) {
    s->http_checked = true;
    s->http_status = s->h1.status;
  }
  return stream_body(s, data, n);
}

/* ------------------------------------------------- direct transport */

static void
dconn_close(struct dconn *d)
{
  if (d->fd >= 0)
    close(d->fd); /* which also takes it out of the epoll set */
  d->fd = -1;
  d->connecting = d->idle = false;
  d->gen++;
}

static void
dconn_watch(struct cell *c, unsigned slot, uint32_t events, int op)
{
  struct dconn *d = &c->dc[slot];
  struct epoll_event ev = {0};
  ev.events = events;
  ev.data.u64 = DIRECT_TAG | ((uint64_t)(d->gen & GEN_MASK) << 32) | slot;
  (void)epoll_ctl(c->run->epfd, op, d->fd, &ev);
}

/* Writes what is left of the stream's request (head, then body); false
 * after a transport error (the stream is failed). */
static bool
direct_send(struct cell *c, struct stream *s)
{
  struct dconn *d = &c->dc[s->slot];
  size_t total = c->head_len + c->body_len;
  while (s->wr_off < total) {
    struct iovec iov[2];
    int k = 0;
    if (s->wr_off < c->head_len) {
      iov[k++] = (struct iovec){ c->head + s->wr_off, c->head_len - s->wr_off };
      iov[k++] = (struct iovec){ (char *)c->body, c->body_len };
    } else {
      size_t off = s->wr_off - c->head_len;
      iov[k++] = (struct iovec){ (char *)c->body + off, c->body_len - off };
    }
    struct msghdr m = { .msg_iov = iov, .msg_iovlen = (size_t)k };
    ssize_t n = sendmsg(d->fd, &m, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n < 0 && errno == EINTR)
      continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      dconn_watch(c, s->slot, EPOLLIN | EPOLLOUT, EPOLL_CTL_MOD);
      return true;
    }
    if (n < 0 && (errno == EPIPE || errno == ECONNRESET)) {
      /* The server stopped reading: it may have answered first (a front
       * end refusing a large body with 413, say); read that, if anything. */
      s->send_errno = errno;
      s->wr_off = total;
      break;
    }
    if (n < 0) {
      stream_fail(s, "send: %s", strerror(errno));
      return false;
    }
    s->wr_off += (size_t)n;
  }
  dconn_watch(c, s->slot, EPOLLIN, EPOLL_CTL_MOD);
  return true;
}

/* Opens the slot's connection for the stream and sends once connected;
 * false after an error (the stream is failed). */
static bool
direct_connect(struct cell *c, struct stream *s)
{
  struct run *r = c->run;
  struct dconn *d = &c->dc[s->slot];
  dconn_close(d);
  s->reused = false;
  s->wr_off = 0;
  s->send_errno = 0;
  tb_h1_init(&s->h1);
  int fd = socket(r->addr.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) {
    stream_fail(s, "socket: %s", strerror(errno));
    return false;
  }
  int one = 1;
  (void)setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  if (r->kernel_stamps)
    (void)tb_rxts_enable(fd);
  d->fd = fd;
  int rc = connect(fd, (struct sockaddr *)&r->addr, r->addrlen);
  if (rc != 0 && errno != EINPROGRESS) {
    stream_fail(s, "connect: %s", strerror(errno));
    dconn_close(d);
    return false;
  }
  d->connecting = rc != 0;
  dconn_watch(c, s->slot, d->connecting ? EPOLLOUT : EPOLLIN, EPOLL_CTL_ADD);
  return d->connecting ? true : direct_send(c, s);
}

/* Starts the stream's request: on the slot's kept-alive connection if it
 * has one, else on a new one; false after an error (the stream is failed). */
static bool
direct_start(struct cell *c, struct stream *s)
{
  struct dconn *d = &c->dc[s->slot];
  s->direct = true;
  if (d->fd >= 0 && d->idle) {
    d->idle = false;
    s->reused = true;
    tb_h1_init(&s->h1);
    if (direct_send(c, s))
      return true;
    /* the server closed it meanwhile: once more on a new connection */
    s->failed = false;
  }
  return direct_connect(c, s);
}

static void stream_end(struct stream *s, const char *transport_err);

/* One read of a slot's connection. */
static void
direct_read(struct cell *c, unsigned slot)
{
  struct run *r = c->run;
  struct dconn *d = &c->dc[slot];
  struct stream *s = c->slots[slot];
  union {
    char buf[TB_RXTS_CMSG_SPACE];
    struct cmsghdr align;
  } ctl;
  struct iovec iov = { r->rbuf, RBUF_SIZE };
  struct msghdr m = { .msg_iov = &iov, .msg_iovlen = 1,
                      .msg_control = ctl.buf, .msg_controllen = sizeof ctl.buf };
  ssize_t n;
  do
    n = recvmsg(d->fd, &m, MSG_DONTWAIT);
  while (n < 0 && errno == EINTR);
  if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
    return;
  if (s == NULL) { /* an idle connection: closed by the server, or junk */
    dconn_close(d);
    return;
  }
  if (n <= 0) {
    if (s->reused && !s->got_bytes) {
      /* a kept-alive connection the server had closed: once more anew */
      if (!direct_connect(c, s))
        stream_end(s, NULL);
      return;
    }
    if (s->send_errno != 0 && !s->got_bytes) {
      char why[160];
      snprintf(why, sizeof why, "send: %s", strerror(s->send_errno));
      stream_end(s, why);
    } else if (n < 0) {
      char why[160];
      snprintf(why, sizeof why, "recv: %s", strerror(errno));
      stream_end(s, why);
    } else if (tb_h1_eof(&s->h1) == TB_H1_DONE) {
      stream_end(s, NULL);
    } else {
      stream_end(s, s->h1.reason);
    }
    return;
  }
  s->got_bytes = true;
  int64_t now = tb_time_mono_ns();
  if (r->kernel_stamps) {
    enum tb_rxts_src src;
    now = tb_rxts_from_msg(&m, now, r->rt_off, &src);
    if (src == TB_RXTS_KERNEL)
      c->rx_kernel++;
    else
      c->rx_user++;
  }
  r->io_now = now;
  size_t used;
  enum tb_h1_status st = tb_h1_feed(&s->h1, r->rbuf, (size_t)n, &used,
                                    direct_body, s);
  r->io_now = 0;
  switch (st) {
  case TB_H1_MORE:
    return;
  case TB_H1_DONE:
    /* bytes after the response would be a response nobody asked for */
    s->keep = !s->failed && s->send_errno == 0 && used == (size_t)n &&
              tb_h1_keep_alive(&s->h1);
    stream_end(s, NULL);
    return;
  case TB_H1_STOPPED:
    stream_end(s, "response aborted");
    return;
  case TB_H1_ERROR:
    stream_end(s, s->h1.reason);
    return;
  }
}

static void
direct_event(struct cell *c, uint64_t tag, uint32_t events)
{
  unsigned slot = (unsigned)(tag & 0xffffffffu);
  uint32_t gen = (uint32_t)(tag >> 32) & GEN_MASK;
  if (c->dc == NULL || slot >= c->conc)
    return;
  struct dconn *d = &c->dc[slot];
  if (d->fd < 0 || (d->gen & GEN_MASK) != gen)
    return; /* an event of a connection closed earlier in this batch */
  struct stream *s = c->slots[slot];
  if (d->connecting) {
    if (!(events & (EPOLLOUT | EPOLLERR | EPOLLHUP)))
      return;
    int err = 0;
    socklen_t el = sizeof err;
    if (getsockopt(d->fd, SOL_SOCKET, SO_ERROR, &err, &el) != 0)
      err = errno;
    if (err == 0 && (events & (EPOLLERR | EPOLLHUP)))
      err = ECONNRESET;
    if (err != 0) {
      if (s == NULL) {
        dconn_close(d);
        return;
      }
      char why[160];
      snprintf(why, sizeof why, "connect: %s", strerror(err));
      stream_end(s, why);
      return;
    }
    d->connecting = false;
    if (s != NULL && !direct_send(c, s))
      stream_end(s, NULL);
    return;
  }
  if (s != NULL && (events & EPOLLOUT) &&
      s->wr_off < c->head_len + c->body_len && !direct_send(c, s)) {
    stream_end(s, NULL);
    return;
  }
  if (events & (EPOLLIN | EPOLLHUP | EPOLLERR))
    direct_read(c, slot);
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
  if (s->direct) {
    struct dconn *d = &s->cell->dc[s->slot];
    if (s->keep)
      d->idle = true;
    else
      dconn_close(d); /* mid-response: closing aborts the request */
  }
  tb_sse_free(&s->sse);
  free(s);
}

static void
active_change(struct cell *c, int64_t now, int d)
{
  if (c->phase == PH_WINDOW) {
    int64_t from = c->act_last > c->w0 ? c->act_last : c->w0;
    int64_t to = now < c->w1 ? now : c->w1;
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
  s->prompt_tokens = -1;
  tb_sse_init(&s->sse, on_sse_event, on_sse_comment, s);
  s->t_start = tb_time_mono_ns();
  s->t_last_byte = s->t_start;
  if (r->direct) {
    if (!direct_start(c, s)) {
      cell_fail(c, "stream failed: %s", s->reason);
      stream_free(s);
      return false;
    }
  } else if (!curl_start(c, s)) {
    return false;
  }
  c->slots[slot] = s;
  c->started++;
  active_change(c, s->t_start, +1);
  return true;
}

/* Per-stream time between tokens over its window tokens. */
static void
stream_collect_tbt(struct stream *s)
{
  struct cell *c = s->cell;
  int64_t after_first = s->w_tokens - s->w_first_tokens;
  if (after_first >= 1 && s->w_last_t > s->w_first_t)
    tb_stats_add(&c->tbt, (s->w_last_t - s->w_first_t) / after_first);
}

/* The stream's response ended: cleanly (transport_err NULL) or not. */
static void
stream_end(struct stream *s, const char *transport_err)
{
  struct cell *c = s->cell;
  struct run *r = c->run;
  int64_t now = tb_time_mono_ns();
  if (c->scout && !r->usage_known && !s->failed && transport_err == NULL) {
    /* The first scout tells whether this server sends usage at all; from
     * then on a stream without its usage chunk is a fault. */
    r->usage_known = true;
    r->usage_supported = s->saw_usage;
  }
  if (!s->failed) {
    if (!s->http_checked && s->easy != NULL)
      curl_easy_getinfo(s->easy, CURLINFO_RESPONSE_CODE, &s->http_status);
    else if (!s->http_checked)
      s->http_status = s->h1.head_done ? s->h1.status : 0;
    if (transport_err != NULL)
      stream_fail(s, "%s", transport_err);
    else if (s->http_status != 200)
      stream_fail(s, "HTTP %ld: %.200s", s->http_status, s->errbody);
    else if (!tb_sse_idle(&s->sse))
      stream_fail(s, "stream ended inside an SSE event");
    else if (!s->got_done)
      stream_fail(s, "stream ended before [DONE] (cut)");
    else if (r->usage_known && r->usage_supported && !s->saw_final_usage)
      stream_fail(s, "stream ended without its usage chunk");
  }
  unsigned slot = s->slot;
  c->slots[slot] = NULL;
  active_change(c, now, -1);
  if (s->failed) {
    cell_fail(c, "stream failed: %s", s->reason);
    stream_free(s);
    return;
  }
  if (c->scout) {
    c->scout_prompt_tokens = s->prompt_tokens;
    if (s->t_first == 0)
      cell_fail(c, "warm-up request produced no token");
    else
      c->phase = PH_DONE;
    stream_free(s);
    return;
  }
  if (c->phase == PH_WINDOW && now < c->w1)
    c->completed++;
  stream_collect_tbt(s);
  stream_free(s);
  if (c->phase != PH_DONE)
    (void)stream_start(c, slot);
}

static void
stream_done(struct stream *s, CURLcode rc)
{
  stream_end(s, rc == CURLE_OK ? NULL
                : s->curl_err[0] ? s->curl_err : curl_easy_strerror(rc));
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
  c->m_len = 0;
  c->m_over = false;
  curl_easy_setopt(e, CURLOPT_URL, r->metrics_url);
  curl_easy_setopt(e, CURLOPT_HTTPHEADER, r->hdrs);
  curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, metrics_write);
  curl_easy_setopt(e, CURLOPT_WRITEDATA, c);
  curl_easy_setopt(e, CURLOPT_PRIVATE, NULL);
  curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(e, CURLOPT_TIMEOUT_MS, 5000L);
  curl_easy_setopt(e, CURLOPT_HTTP_VERSION, (long)CURL_HTTP_VERSION_1_1);
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
  c->m_next = now + (int64_t)(r->metrics_s * NS_PER_S);
  double running, waiting;
  if (rc != CURLE_OK || status != 200 || c->m_over || c->m_buf == NULL ||
      !tb_discover_parse_load(r->d.kind, c->m_buf, c->m_len, &running,
                              &waiting)) {
    c->m_cond = false;
    return;
  }
  c->m_running = running;
  c->m_waiting = waiting;
  c->m_cond = waiting < 0.5 && fabs(running - (double)c->conc) < 0.5;
  if (c->phase == PH_WINDOW && now < c->w1) {
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
  for (unsigned i = 0; c->dc != NULL && i < c->conc; i++)
    dconn_close(&c->dc[i]);
  if (c->m_easy != NULL) {
    curl_multi_remove_handle(c->run->multi, c->m_easy);
    curl_easy_cleanup(c->m_easy);
    c->m_easy = NULL;
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
    if (r->hooks != NULL && r->hooks->cancelled != NULL &&
        r->hooks->cancelled(r->hooks->cls)) {
      c->cancelled = true;
      cell_fail(c, "cancelled");
      return;
    }
  }
  /* The per-stream scan is O(C): every SCAN_NS, not on every loop turn
   * (its limits are seconds). */
  for (unsigned i = 0; now >= c->next_scan && i < c->conc; i++) {
    struct stream *s = c->slots[i];
    if (s == NULL)
      continue;
    if (s->direct && c->dc[i].connecting &&
        now - s->t_start > CONNECT_TIMEOUT_MS * 1000000LL) {
      cell_fail(c, "stream failed: connect: no answer after %.0f s",
                CONNECT_TIMEOUT_MS / 1000.0);
      return;
    }
    if (s->t_first == 0) {
      if (now - s->t_start > (int64_t)(r->first_token_s * NS_PER_S)) {
        cell_fail(c, "no first token after %.1f s", r->first_token_s);
        return;
      }
    } else if (now - s->t_last_byte > (int64_t)(r->stall_s * NS_PER_S)) {
      cell_fail(c, "stream stalled: no data for %.1f s", r->stall_s);
      return;
    }
  }
  if (now >= c->next_scan)
    c->next_scan = now + SCAN_NS;
  if (c->scout)
    return;
  if (r->d.has_metrics && c->m_easy == NULL && now >= c->m_next)
    metrics_start(c);
  if (c->phase == PH_READY) {
    bool ok = c->n_warmed == c->conc;
    if (ok && r->d.has_metrics)
      ok = c->m_cond;
    if (!ok) {
      c->ready_since = 0;
    } else if (c->ready_since == 0) {
      c->ready_since = now;
    }
    /* Every stream of ours produces and the server still runs more than C:
     * someone else loads it, and no figure of this cell would be ours.  Say
     * so after a while rather than at the ready timeout. */
    bool foreign = r->d.has_metrics && c->n_warmed == c->conc &&
                   c->m_running > (double)c->conc + 0.5;
    if (!foreign)
      c->foreign_since = 0;
    else if (c->foreign_since == 0)
      c->foreign_since = now;
    double busy_s = r->ready_s / 2 < FOREIGN_LOAD_S ? r->ready_s / 2 : FOREIGN_LOAD_S;
    if (c->foreign_since != 0 && now - c->foreign_since > (int64_t)(busy_s * NS_PER_S)) {
      cell_fail(c, "server busy with other work: %.0f requests running (%.0f waiting) "
                   "for %u of ours, for %.0f s",
                c->m_running, c->m_waiting > 0 ? c->m_waiting : 0, c->conc, busy_s);
      return;
    }
    if (c->ready_since != 0 &&
        now - c->ready_since >= (int64_t)(r->settle_s * NS_PER_S)) {
      active_change(c, now, 0);
      c->w0 = now;
      c->w1 = now + (int64_t)(r->duration_s * NS_PER_S);
      c->act_last = now;
      c->phase = PH_WINDOW;
      c->m_next = now; /* a first sample right at the window's start */
    } else if (now - c->t_begin > (int64_t)(r->ready_s * NS_PER_S)) {
      unsigned warmed = c->n_warmed;
      cell_fail(c, "not ready after %.0f s (%u of %u streams producing%s)",
                r->ready_s, warmed, c->conc,
                r->d.has_metrics && !c->m_cond
                    ? "; server not at running = C, waiting = 0"
                    : "");
    }
  } else if (c->phase == PH_WINDOW && now >= c->w1) {
    active_change(c, c->w1, 0);
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
  c->w0 = c->w1 = INT64_MAX;
  c->next_cancel_poll = 0;
  c->next_scan = 0;
  if (c->scout) {
    c->w0 = 0; /* tokens of a scout are not windowed */
  }
  for (unsigned i = 0; i < c->conc && c->phase != PH_DONE; i++)
    (void)stream_start(c, i);
  curl_multi_socket_action(r->multi, CURL_SOCKET_TIMEOUT, 0, &running);
  while (c->phase != PH_DONE) {
    int64_t now = tb_time_mono_ns();
    int64_t next = now + 50000000LL; /* our own ticks: 50 ms at most */
    if (r->curl_deadline >= 0 && r->curl_deadline < next)
      next = r->curl_deadline;
    if (c->phase == PH_WINDOW && c->w1 < next)
      next = c->w1;
    if (c->m_easy == NULL && r->d.has_metrics && !c->scout && c->m_next < next)
      next = c->m_next;
    int64_t wait_ns = next - now;
    int wait_ms = wait_ns <= 0 ? 0 : (int)((wait_ns + 999999) / 1000000);
    int n = epoll_wait(r->epfd, evs, (int)TB_ARRAY_LEN(evs), wait_ms);
    if (n > 0)
      r->rt_off = tb_rxts_offset();
    for (int i = 0; i < n; i++) {
      if (evs[i].data.u64 & DIRECT_TAG) {
        direct_event(c, evs[i].data.u64, evs[i].events);
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

static int
cmp_i64(const void *a, const void *b)
{
  int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
  return (x > y) - (x < y);
}

static void
sort_unique(int64_t *v, size_t *n)
{
  qsort(v, *n, sizeof *v, cmp_i64);
  size_t o = 0;
  for (size_t i = 0; i < *n; i++)
    if (o == 0 || v[o - 1] != v[i])
      v[o++] = v[i];
  *n = o;
}

static void
copy_list(int64_t *dst, size_t *n, const struct tb_spec_list *l)
{
  *n = l->n < MAX_LIST ? l->n : MAX_LIST;
  memcpy(dst, l->v, *n * sizeof *dst);
}

/* The run's settings from the parsed spec (tb_spec: validated, lists sorted)
 * and the target; nothing here reads JSON. */
static int
apply_spec(struct run *r, const struct tb_spec *s, const struct tb_engine_target *t,
           char **err)
{
  if (t == NULL || t->base_url == NULL || t->base_url[0] == '\0') {
    *err = tb_xstrdup("spec: base_url missing");
    return -1;
  }
  r->base_url = tb_xstrdup(t->base_url);
  r->model_req = s->model ? tb_xstrdup(s->model) : NULL;
  if (t->run_id != NULL && t->run_id[0] != '\0')
    r->run_id = tb_xstrdup(t->run_id);
  else
    r->run_id = tb_xasprintf("%" PRIx64, (uint64_t)tb_time_real_us());
  r->contexts_given = s->contexts.given;
  copy_list(r->contexts, &r->n_contexts, &s->contexts);
  r->prefill_given = s->prefill_contexts.given;
  copy_list(r->prefill, &r->n_prefill, &s->prefill_contexts);
  copy_list(r->conc, &r->n_conc, &s->concurrency);
  if (r->n_conc == 0) {
    *err = tb_xstrdup("spec: concurrency is empty");
    return -1;
  }
  r->duration_s = s->duration_s;
  r->max_output = s->max_output;
  r->kv_override = s->kv_budget;
  r->settle_s = s->settle_s;
  r->stall_s = s->stall_timeout_s;
  r->first_token_s = s->first_token_timeout_s;
  r->ready_s = s->ready_timeout_s;
  r->drain_s = s->drain_timeout_s;
  r->metrics_s = s->metrics_interval_s;
  return 0;
}

/* Default contexts once max_model_len is known: 8K, 16K, ... below the top
 * context, then the top context ("251K"). */
static void
default_contexts(struct run *r)
{
  int64_t mml = r->d.max_model_len > 0 ? r->d.max_model_len : 262144;
  int64_t top = tb_engine_top_context(mml, r->max_output);
  if (!r->contexts_given) {
    r->n_contexts = 0;
    for (int64_t c = 8192; c < top && c <= 131072; c *= 2)
      r->contexts[r->n_contexts++] = c;
    if (top >= 1)
      r->contexts[r->n_contexts++] = top;
  }
  if (!r->prefill_given) {
    r->n_prefill = 0;
    for (size_t i = 0; i < r->n_contexts; i++)
      r->prefill[r->n_prefill++] = r->contexts[i];
    int64_t full = mml / 1024 * 1024;
    if (full > 0 && r->n_prefill < MAX_LIST)
      r->prefill[r->n_prefill++] = full;
    sort_unique(r->prefill, &r->n_prefill);
  }
}

/* --------------------------------------------------------------- result */

static json_t *
build_header(struct run *r, const json_t *ep, int64_t started_us)
{
  char ts[40];
  tb_time_rfc3339(started_us, ts, sizeof ts);
  json_t *h = json_object();
  json_object_set_new(h, "schema", json_string(SCHEMA));
  json_object_set_new(h, "tokbench_version", json_string(TB_VERSION));
  json_object_set_new(h, "run_id", json_string(r->run_id));
  json_object_set_new(h, "started_at", json_string(ts));
  json_t *epo = json_object();
  json_object_set_new(epo, "url", json_string(r->d.base_url));
  const char *name = json_string_value(json_object_get(ep, "name"));
  json_object_set_new(epo, "name", name ? json_string(name) : json_null());
  json_object_set_new(h, "endpoint", epo);
  json_t *eng = json_object();
  const json_t *hint = json_object_get(ep, "engine");
  if (json_is_object(hint))
    json_object_update(eng, (json_t *)hint);
  json_object_set_new(eng, "name",
                      json_string(tb_discover_kind_name(r->d.kind)));
  json_object_set_new(eng, "version", r->d.version ? json_string(r->d.version)
                                                   : json_null());
  json_object_set_new(h, "engine", eng);
  const json_t *hw = json_object_get(ep, "hardware");
  json_object_set_new(h, "hardware",
                      json_is_object(hw) ? json_deep_copy(hw) : json_null());
  json_t *model = json_object();
  json_object_set_new(model, "served", json_string(r->d.model));
  json_object_set_new(model, "max_model_len",
                      r->d.max_model_len > 0 ? json_integer(r->d.max_model_len)
                                             : json_null());
  json_object_set_new(h, "model", model);
  const char *lc = json_string_value(json_object_get(ep, "launch_command"));
  char *red = tb_redact_command(lc);
  json_object_set_new(h, "launch_command", red ? json_string(red) : json_null());
  free(red);
  json_t *cap = json_object();
  json_object_set_new(cap, "kv_budget_tokens", r->kv_budget > 0
                                                   ? json_integer(r->kv_budget)
                                                   : json_null());
  json_object_set_new(cap, "source", json_string(r->kv_source));
  json_object_set_new(cap, "max_running_requests",
                      r->d.max_running > 0 ? json_integer(r->d.max_running)
                                           : json_null());
  json_object_set_new(cap, "metrics", json_boolean(r->d.has_metrics));
  json_object_set_new(h, "capacity", cap);
  json_t *st = json_object();
  json_t *a = json_array();
  for (size_t i = 0; i < r->n_contexts; i++)
    json_array_append_new(a, json_integer(r->contexts[i]));
  json_object_set_new(st, "contexts", a);
  a = json_array();
  for (size_t i = 0; i < r->n_conc; i++)
    json_array_append_new(a, json_integer(r->conc[i]));
  json_object_set_new(st, "concurrency", a);
  a = json_array();
  for (size_t i = 0; i < r->n_prefill; i++)
    json_array_append_new(a, json_integer(r->prefill[i]));
  json_object_set_new(st, "prefill_contexts", a);
  json_object_set_new(st, "duration_s", json_real(r->duration_s));
  json_object_set_new(st, "max_output", json_integer(r->max_output));
  json_object_set_new(st, "settle_s", json_real(r->settle_s));
  json_object_set_new(st, "decode_test", json_string("fixed_duration"));
  json_object_set_new(st, "prefill_mode", json_string("decode_warmup"));
  json_object_set_new(h, "settings", st);
  return h;
}

static json_t *
cell_key(const char *phase, int64_t ctx, int64_t conc)
{
  char label[32];
  tb_format_tokens(ctx, label, sizeof label);
  return json_pack("{s:s, s:I, s:s, s:I}", "phase", phase, "context",
                   (json_int_t)ctx, "context_label", label, "concurrency",
                   (json_int_t)conc);
}

static const json_t *
find_done(const json_t *done, const char *phase, int64_t ctx, int64_t conc)
{
  size_t i;
  const json_t *c;
  json_array_foreach(done, i, c) {
    const char *p = json_string_value(json_object_get(c, "phase"));
    if (p != NULL && strcmp(p, phase) == 0 &&
        json_integer_value(json_object_get(c, "context")) == ctx &&
        json_integer_value(json_object_get(c, "concurrency")) == conc)
      return c;
  }
  return NULL;
}

static bool
in_list(const int64_t *v, size_t n, int64_t x)
{
  for (size_t i = 0; i < n; i++)
    if (v[i] == x)
      return true;
  return false;
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
progress(struct run *r, const json_t *key, unsigned remaining_cells,
         unsigned remaining_scouts)
{
  if (r->hooks == NULL || r->hooks->on_progress == NULL)
    return;
  double per = r->n_cell_timed ? r->avg_cell_s
                               : r->duration_s + r->settle_s + 1.0;
  double eta = per * remaining_cells + 2.0 * remaining_scouts;
  r->hooks->on_progress(r->hooks->cls, key, r->done_count, r->total_cells,
                        eta);
}

static void
abort_and_drain(struct run *r)
{
  if (r->d.kind == TB_KIND_SGLANG) {
    char *url = tb_xasprintf("%s/abort_request", r->d.base_url);
    const char *body = "{\"rid\":\"\",\"abort_all\":true}";
    struct tb_http_resp resp;
    if (tb_http_call("POST", url, r->api_key, body, strlen(body), 5000L,
                     65536, &resp) == 0) {
      /* any answer will do: older servers know only per-request aborts */
    }
    tb_http_resp_free(&resp);
    free(url);
  }
  if (!r->d.has_metrics)
    return;
  int64_t end = tb_time_mono_ns() + (int64_t)(r->drain_s * NS_PER_S);
  while (tb_time_mono_ns() < end) {
    double running, waiting;
    if (tb_discover_load(&r->d, r->api_key, &running, &waiting) != 0)
      return; /* metrics gone (server down?): the next cell will tell */
    if (running < 0.5 && waiting < 0.5)
      return;
    if (r->hooks != NULL && r->hooks->cancelled != NULL &&
        r->hooks->cancelled(r->hooks->cls))
      return;
    struct timespec ts = {0, 20000000};
    nanosleep(&ts, NULL);
  }
}

static char *
request_body(struct run *r, const char *prompt, int64_t max_tokens,
             size_t *len)
{
  json_t *b = json_pack(
      "{s:s, s:[{s:s, s:s}], s:I, s:b, s:b, s:{s:b, s:b}}", "model",
      r->d.model, "messages", "role", "user", "content", prompt, "max_tokens",
      (json_int_t)max_tokens, "stream", 1, "ignore_eos", 1, "stream_options",
      "include_usage", 1, "continuous_usage_stats", 1);
  char *s = json_dumps(b, JSON_COMPACT);
  json_decref(b);
  *len = strlen(s);
  return s;
}

static void
cell_init(struct cell *c, struct run *r, int64_t ctx, unsigned conc,
          bool scout, const char *body, size_t body_len)
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
  c->m_running = c->m_waiting = -1;
  if (r->direct) {
    c->dc = tb_xcalloc(conc, sizeof *c->dc);
    for (unsigned i = 0; i < conc; i++)
      c->dc[i].fd = -1;
    c->head = tb_xasprintf("POST %s HTTP/1.1\r\nHost: %s\r\n"
                           "User-Agent: tokbench/" TB_VERSION "\r\n%s%s"
                           "Content-Type: application/json\r\n"
                           "Accept: text/event-stream\r\n"
                           "Content-Length: %zu\r\n\r\n",
                           r->req_path, r->req_host, r->auth ? r->auth : "",
                           r->auth ? "\r\n" : "", body_len);
    c->head_len = strlen(c->head);
  }
}

static void
cell_free(struct cell *c)
{
  for (unsigned i = 0; c->dc != NULL && i < c->conc; i++)
    dconn_close(&c->dc[i]);
  free(c->dc);
  tb_http_secret_free(c->head); /* it holds the endpoint's key */
  free(c->slots);
  free(c->warmed);
  free(c->m_buf);
  tb_stats_free(&c->ttft);
  tb_stats_free(&c->tbt);
}

static json_t *
pct_obj(struct tb_stats *s)
{
  return json_pack("{s:o, s:o, s:o}", "p50",
                   json_num_or_null(ms(tb_stats_quantile(s, 0.5))), "p90",
                   json_num_or_null(ms(tb_stats_quantile(s, 0.9))), "p99",
                   json_num_or_null(ms(tb_stats_quantile(s, 0.99))));
}

static json_t *
decode_result(struct cell *c, json_t *cell)
{
  struct run *r = c->run;
  if (c->failed) {
    json_object_set_new(cell, "status", json_string("error"));
    json_object_set_new(cell, "reason", json_string(c->reason));
    return cell;
  }
  double win = (double)(c->w1 - c->w0) / 1e9;
  double total = (double)c->win_tokens / win;
  json_object_set_new(cell, "status", json_string("valid"));
  json_object_set_new(cell, "total_tps", json_real(total));
  json_object_set_new(cell, "per_request_tps", json_real(total / c->conc));
  json_object_set_new(cell, "ttft_ms", pct_obj(&c->ttft));
  json_object_set_new(cell, "tbt_ms", pct_obj(&c->tbt));
  if (c->run_n > 0) {
    json_object_set_new(cell, "avg_active", json_real(c->run_sum / c->run_n));
    json_object_set_new(cell, "avg_active_source", json_string("server"));
  } else {
    json_object_set_new(cell, "avg_active",
                        json_real((double)c->act_ns / (win * 1e9)));
    json_object_set_new(cell, "avg_active_source", json_string("client"));
  }
  json_object_set_new(cell, "completed", json_integer(c->completed));
  json_object_set_new(cell, "requests_started", json_integer(c->started));
  json_object_set_new(cell, "output_tokens", json_integer(c->win_tokens));
  json_object_set_new(cell, "measured_s", json_real(win));
  json_object_set_new(cell, "token_source",
                      json_string(c->chunk_source ? "chunks" : "usage"));
  uint64_t reads = c->rx_kernel + c->rx_user;
  json_object_set_new(cell, "kernel_stamped",
                      json_real(reads > 0 ? (double)c->rx_kernel / (double)reads
                                          : 0.0));
  (void)r;
  return cell;
}

static void
raise_nofile(unsigned need)
{
  struct rlimit rl;
  if (getrlimit(RLIMIT_NOFILE, &rl) != 0)
    return;
  rlim_t want = (rlim_t)need * 2 + 256;
  if (rl.rlim_cur >= want)
    return;
  rl.rlim_cur = want < rl.rlim_max ? want : rl.rlim_max;
  (void)setrlimit(RLIMIT_NOFILE, &rl);
}

/* --------------------------------------------------------------- run */

static void
run_free(struct run *r)
{
  if (r->multi != NULL)
    curl_multi_cleanup(r->multi);
  if (r->epfd >= 0)
    close(r->epfd);
  if (r->stamp_hold >= 0)
    close(r->stamp_hold);
  curl_slist_free_all(r->hdrs);
  tb_http_secret_free(r->auth);
  free(r->chat_url);
  free(r->metrics_url);
  free(r->req_host);
  free(r->req_path);
  free(r->rbuf);
  free(r->base_url);
  free(r->model_req);
  free(r->run_id);
  tb_discover_free(&r->d);
}

static bool
env_set(const char *name)
{
  const char *v = getenv(name);
  return v != NULL && v[0] != '\0';
}

/* The address libcurl connects to for the endpoint (its resolver, its
 * choice among the addresses), from one CONNECT_ONLY connection. */
static bool
direct_resolve(struct run *r)
{
  CURL *e = curl_easy_init();
  if (e == NULL)
    return false;
  curl_easy_setopt(e, CURLOPT_URL, r->chat_url);
  curl_easy_setopt(e, CURLOPT_CONNECT_ONLY, 1L);
  curl_easy_setopt(e, CURLOPT_CONNECTTIMEOUT_MS, CONNECT_TIMEOUT_MS);
  curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
  bool ok = false;
  char *ip = NULL;
  long port = 0;
  if (curl_easy_perform(e) == CURLE_OK &&
      curl_easy_getinfo(e, CURLINFO_PRIMARY_IP, &ip) == CURLE_OK && ip != NULL &&
      curl_easy_getinfo(e, CURLINFO_PRIMARY_PORT, &port) == CURLE_OK &&
      port > 0 && port < 65536) {
    struct addrinfo hints = { .ai_flags = AI_NUMERICHOST | AI_NUMERICSERV,
                              .ai_socktype = SOCK_STREAM };
    struct addrinfo *res = NULL;
    char ps[16];
    snprintf(ps, sizeof ps, "%ld", port);
    if (getaddrinfo(ip, ps, &hints, &res) == 0 && res != NULL &&
        res->ai_addrlen <= sizeof r->addr) {
      memcpy(&r->addr, res->ai_addr, res->ai_addrlen);
      r->addrlen = res->ai_addrlen;
      ok = true;
    }
    if (res != NULL)
      freeaddrinfo(res);
  }
  curl_easy_cleanup(e);
  return ok;
}

/* Chooses the stream transport (see Stream transport): direct for a
 * plain-HTTP endpoint without a proxy, unless TB_ENGINE_CURL_STREAMS=1. */
static bool
direct_setup(struct run *r)
{
  const char *force = getenv("TB_ENGINE_CURL_STREAMS");
  if (force != NULL && strcmp(force, "1") == 0)
    return false;
  if (env_set("http_proxy") || env_set("all_proxy") || env_set("ALL_PROXY"))
    return false;
  CURLU *u = curl_url();
  if (u == NULL)
    return false;
  char *scheme = NULL, *host = NULL, *port = NULL, *path = NULL,
       *query = NULL, *user = NULL;
  bool ok = curl_url_set(u, CURLUPART_URL, r->chat_url, 0) == CURLUE_OK &&
            curl_url_get(u, CURLUPART_SCHEME, &scheme, 0) == CURLUE_OK &&
            strcmp(scheme, "http") == 0 &&
            curl_url_get(u, CURLUPART_HOST, &host, 0) == CURLUE_OK &&
            curl_url_get(u, CURLUPART_PATH, &path, 0) == CURLUE_OK &&
            curl_url_get(u, CURLUPART_USER, &user, 0) != CURLUE_OK;
  if (ok) {
    if (curl_url_get(u, CURLUPART_PORT, &port, 0) != CURLUE_OK)
      port = NULL; /* none in the URL: no port in Host either */
    if (curl_url_get(u, CURLUPART_QUERY, &query, 0) != CURLUE_OK)
      query = NULL;
    r->req_host = port != NULL ? tb_xasprintf("%s:%s", host, port) : tb_xstrdup(host);
    r->req_path = query != NULL ? tb_xasprintf("%s?%s", path, query) : tb_xstrdup(path);
    ok = direct_resolve(r);
  }
  curl_free(scheme);
  curl_free(host);
  curl_free(port);
  curl_free(path);
  curl_free(query);
  curl_free(user);
  curl_url_cleanup(u);
  if (ok)
    r->rbuf = tb_xmalloc(RBUF_SIZE);
  return ok;
}

static json_t *
static_status(struct run *r, int64_t ctx, int64_t conc)
{
  json_t *cell = cell_key("decode", ctx, conc);
  const char *st = NULL;
  char *why = NULL;
  if (r->d.max_model_len > 0 && ctx + r->max_output > r->d.max_model_len) {
    st = "skipped";
    why = tb_xasprintf("context + max output (%" PRId64
                       ") exceeds max_model_len (%" PRId64 ")",
                       ctx + r->max_output, r->d.max_model_len);
  } else if (r->d.max_running > 0 && conc > r->d.max_running) {
    st = "skipped";
    why = tb_xasprintf("more requests than the server runs at once (%" PRId64
                       ")",
                       r->d.max_running);
  } else if (tb_engine_over_capacity(conc, ctx, r->max_output, r->kv_budget)) {
    st = "over_capacity";
    why = tb_xasprintf("%" PRId64 " x (%" PRId64 " + %" PRId64 ") = %" PRId64
                       " tokens > KV budget %" PRId64,
                       conc, ctx, r->max_output, conc * (ctx + r->max_output),
                       r->kv_budget);
  }
  if (st == NULL) {
    json_decref(cell);
    return NULL;
  }
  json_object_set_new(cell, "status", json_string(st));
  json_object_set_new(cell, "reason", json_string(why));
  free(why);
  return cell;
}

enum tb_engine_status
tb_engine_run(const struct tb_spec *spec, const struct tb_engine_target *tgt,
              const char *api_key, const json_t *done_cells,
              const struct tb_engine_hooks *hooks, json_t **result, char **err)
{
  struct run run;
  struct run *r = &run;
  memset(r, 0, sizeof *r);
  r->epfd = -1;
  r->stamp_hold = -1;
  r->curl_deadline = -1;
  r->hooks = hooks;
  /* For side-by-side measurements (bench/bench_engine.sh) only. */
  const char *stamps = getenv("TB_ENGINE_CLIENT_STAMPS");
  r->kernel_stamps = stamps == NULL || strcmp(stamps, "1") != 0;
  /* first thing: the kernel switches stamping on during discovery, not in
   * the middle of a measurement */
  r->stamp_hold = r->kernel_stamps ? tb_rxts_hold() : -1;
  r->api_key = api_key;
  *err = NULL;
  *result = NULL;
  enum tb_engine_status status = TB_ENGINE_FAILED;
  json_t *header = NULL;
  json_t *cells = json_array();
  struct tb_prompt_ctx *pc = NULL;
  int64_t started_us = tb_time_real_us();
  tb_http_global_init();

  if (apply_spec(r, spec, tgt, err) != 0)
    goto out;
  if (tb_discover_run(r->base_url, api_key, r->model_req, &r->d, err) != 0)
    goto out;
  default_contexts(r);
  if (r->n_contexts == 0 && r->n_prefill == 0) {
    *err = tb_xasprintf("no context fits max_model_len %" PRId64
                        " with max output %" PRId64,
                        r->d.max_model_len, r->max_output);
    goto out;
  }
  r->kv_budget = r->d.kv_budget;
  r->kv_source = r->d.kv_source;
  if (r->kv_override > 0) {
    r->kv_budget = r->kv_override;
    r->kv_source = "override";
  }
  header = build_header(r, tgt->endpoint, started_us);
  if (hooks != NULL && hooks->on_header != NULL)
    hooks->on_header(hooks->cls, header);

  /* loop set-up */
  r->epfd = epoll_create1(EPOLL_CLOEXEC);
  r->multi = curl_multi_init();
  if (r->epfd < 0 || r->multi == NULL) {
    *err = tb_xstrdup("cannot set up the event loop");
    goto out;
  }
  curl_multi_setopt(r->multi, CURLMOPT_SOCKETFUNCTION, sock_cb);
  curl_multi_setopt(r->multi, CURLMOPT_SOCKETDATA, r);
  curl_multi_setopt(r->multi, CURLMOPT_TIMERFUNCTION, timer_cb);
  curl_multi_setopt(r->multi, CURLMOPT_TIMERDATA, r);
  curl_multi_setopt(r->multi, CURLMOPT_MAXCONNECTS, (long)MAX_CONCURRENCY);
  r->auth = tb_http_auth_header(api_key);
  if (r->auth != NULL)
    r->hdrs = curl_slist_append(r->hdrs, r->auth);
  r->hdrs = curl_slist_append(r->hdrs, "Content-Type: application/json");
  r->hdrs = curl_slist_append(r->hdrs, "Accept: text/event-stream");
  r->hdrs = curl_slist_append(r->hdrs, "Expect:");
  r->chat_url = tb_xasprintf("%s/v1/chat/completions", r->d.base_url);
  r->metrics_url = tb_xasprintf("%s/metrics", r->d.base_url);
  r->direct = direct_setup(r);
  unsigned maxc = 1;
  for (size_t i = 0; i < r->n_conc; i++)
    if (r->conc[i] > maxc)
      maxc = (unsigned)r->conc[i];
  raise_nofile(maxc);
  pc = tb_prompt_ctx_new(&r->d, api_key, r->run_id);

  /* The contexts in order: the union of decode and prefill contexts. */
  int64_t all[2 * MAX_LIST];
  size_t n_all = 0;
  for (size_t i = 0; i < r->n_contexts; i++)
    all[n_all++] = r->contexts[i];
  for (size_t i = 0; i < r->n_prefill; i++)
    all[n_all++] = r->prefill[i];
  sort_unique(all, &n_all);
  r->total_cells = (unsigned)(r->n_prefill + r->n_contexts * r->n_conc);
  unsigned runnable_left = 0, scouts_left = 0;
  for (size_t k = 0; k < n_all; k++) {
    bool any = false;
    if (in_list(r->prefill, r->n_prefill, all[k]) &&
        !find_done(done_cells, "prefill", all[k], 1))
      any = true;
    if (in_list(r->contexts, r->n_contexts, all[k]))
      for (size_t j = 0; j < r->n_conc; j++) {
        json_t *sc = static_status(r, all[k], r->conc[j]);
        if (sc == NULL && !find_done(done_cells, "decode", all[k], r->conc[j])) {
          runnable_left++;
          any = true;
        }
        json_decref(sc);
      }
    scouts_left += any;
  }

  for (size_t k = 0; k < n_all && !r->cancelled; k++) {
    int64_t ctx = all[k];
    bool want_prefill = in_list(r->prefill, r->n_prefill, ctx);
    bool want_decode = in_list(r->contexts, r->n_contexts, ctx);
    const json_t *done_pf = find_done(done_cells, "prefill", ctx, 1);
    bool need_scout = want_prefill && done_pf == NULL;
    if (want_decode)
      for (size_t j = 0; j < r->n_conc; j++) {
        json_t *sc = static_status(r, ctx, r->conc[j]);
        if (sc == NULL && !find_done(done_cells, "decode", ctx, r->conc[j]))
          need_scout = true;
        json_decref(sc);
      }
    if (done_pf != NULL)
      json_array_append(cells, (json_t *)done_pf);

    struct tb_prompt prompt = {0};
    char *dbody = NULL, *sbody = NULL;
    size_t dlen = 0, slen = 0;
    char *ctx_err = NULL; /* when set, every runnable cell here is an error */
    if (need_scout) {
      json_t *key = cell_key("prefill", ctx, 1);
      progress(r, key, runnable_left, scouts_left);
      json_decref(key);
      int64_t target = ctx;
      if (r->d.max_model_len > 0 && target + 1 > r->d.max_model_len)
        target = r->d.max_model_len - 1 - 16;
      char *perr = NULL;
      if (tb_prompt_build(pc, ctx, target, &prompt, &perr) != 0) {
        ctx_err = tb_xasprintf("prompt: %s", perr ? perr : "failed");
        free(perr);
      } else {
        sbody = request_body(r, prompt.text, 1, &slen);
        dbody = request_body(r, prompt.text, r->max_output, &dlen);
        struct cell sc;
        cell_init(&sc, r, ctx, 1, true, sbody, slen);
        cell_loop(&sc);
        if (sc.cancelled)
          r->cancelled = true;
        if (sc.failed && !sc.cancelled)
          ctx_err = tb_xasprintf("warm-up request: %s", sc.reason);
        if (want_prefill && done_pf == NULL && !r->cancelled) {
          json_t *cell = cell_key("prefill", ctx, 1);
          if (sc.failed) {
            json_object_set_new(cell, "status", json_string("error"));
            json_object_set_new(cell, "reason", json_string(sc.reason));
          } else {
            int64_t pt = sc.scout_prompt_tokens > 0 ? sc.scout_prompt_tokens
                                                    : prompt.tokens;
            double ttft_s = (double)sc.scout_ttft_ns / 1e9;
            json_object_set_new(cell, "status", json_string("valid"));
            json_object_set_new(cell, "prompt_tokens", json_integer(pt));
            json_object_set_new(cell, "prompt_tokens_source",
                                json_string(sc.scout_prompt_tokens > 0
                                                ? "usage"
                                                : "tokenizer"));
            json_object_set_new(cell, "ttft_ms", json_real(ttft_s * 1e3));
            json_object_set_new(cell, "prompt_tps",
                                json_real(ttft_s > 0 ? pt / ttft_s : 0));
            json_object_set_new(cell, "completed", json_integer(1));
          }
          emit(r, cells, cell);
        }
        cell_free(&sc);
        if (scouts_left > 0)
          scouts_left--;
        if (!r->cancelled)
          abort_and_drain(r);
      }
    }

    for (size_t j = 0; want_decode && j < r->n_conc && !r->cancelled; j++) {
      int64_t conc = r->conc[j];
      const json_t *done = find_done(done_cells, "decode", ctx, conc);
      if (done != NULL) {
        json_array_append(cells, (json_t *)done);
        continue;
      }
      json_t *cell = static_status(r, ctx, conc);
      if (cell != NULL) {
        emit(r, cells, cell);
        continue;
      }
      cell = cell_key("decode", ctx, conc);
      if (ctx_err != NULL) {
        json_object_set_new(cell, "status", json_string("error"));
        json_object_set_new(cell, "reason", json_string(ctx_err));
        emit(r, cells, cell);
        runnable_left--;
        continue;
      }
      progress(r, cell, runnable_left, scouts_left);
      int64_t t0 = tb_time_mono_ns();
      struct cell dc;
      cell_init(&dc, r, ctx, (unsigned)conc, false, dbody, dlen);
      cell_loop(&dc);
      if (dc.cancelled) {
        r->cancelled = true;
        cell_free(&dc);
        json_decref(cell);
        break;
      }
      emit(r, cells, decode_result(&dc, cell));
      cell_free(&dc);
      runnable_left--;
      if (!r->cancelled)
        abort_and_drain(r);
      double took = (double)(tb_time_mono_ns() - t0) / 1e9;
      r->avg_cell_s = (r->avg_cell_s * r->n_cell_timed + took) /
                      (r->n_cell_timed + 1);
      r->n_cell_timed++;
    }
    free(ctx_err);
    free(dbody);
    free(sbody);
    tb_prompt_free(&prompt);
  }
  status = r->cancelled ? TB_ENGINE_CANCELLED : TB_ENGINE_OK;

out:
  tb_prompt_ctx_free(pc);
  {
    json_t *doc = header ? header : json_object();
    if (header == NULL) {
      char ts[40];
      tb_time_rfc3339(started_us, ts, sizeof ts);
      json_object_set_new(doc, "schema", json_string(SCHEMA));
      json_object_set_new(doc, "tokbench_version", json_string(TB_VERSION));
      json_object_set_new(doc, "run_id",
                          r->run_id ? json_string(r->run_id) : json_null());
      json_object_set_new(doc, "started_at", json_string(ts));
    }
    char ts[40];
    tb_time_rfc3339(tb_time_real_us(), ts, sizeof ts);
    json_object_set_new(doc, "finished_at", json_string(ts));
    const char *st = "complete";
    if (status == TB_ENGINE_FAILED)
      st = "failed";
    else if (status == TB_ENGINE_CANCELLED)
      st = "cancelled";
    else {
      size_t i;
      const json_t *c;
      json_array_foreach(cells, i, c) {
        const char *cs = json_string_value(json_object_get(c, "status"));
        if (cs != NULL && strcmp(cs, "error") == 0)
          st = "partial";
      }
    }
    json_object_set_new(doc, "status", json_string(st));
    json_object_set_new(doc, "error", *err ? json_string(*err) : json_null());
    json_object_set_new(doc, "cells", cells);
    *result = doc;
  }
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
