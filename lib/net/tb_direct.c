/*
 * tb_direct: the engine's own stream transport.  See tb_direct.h.
 *
 * Why.  Per read this is one system call (recvmsg, with the kernel's
 * receive stamp of the bytes) where libcurl's read path makes three (the
 * stamp peek, recv and a poll() that asks whether more is pending), and
 * about half the CPU time per token on a bench (bench/bench_engine.sh
 * prints both).
 *
 * A slot's life: tb_direct_start sends on the kept-alive connection if the
 * slot has one (a server that closed it meanwhile gets the request once
 * more on a new connection), else connects (non-blocking) and sends once
 * connected; each readiness is one recvmsg, fed to tb_h1, whose body goes
 * to ops.body; the end of the response (or an error) goes to ops.end, and
 * the engine's tb_direct_release keeps a cleanly ended connection for the
 * slot's next request.  A server that stops reading the request (EPIPE,
 * reset) may have answered first (a front end refusing a large body with
 * 413): that answer is read and wins over the send error, as with libcurl.
 *
 * Epoll data of a connection: TB_DIRECT_TAG | gen << 32 | slot, so that an
 * event of a connection closed earlier in the same batch is told apart; a
 * completion of its io_uring receive carries the same tag, of its sendmsg
 * the tag | SEND_BIT.
 *
 * Sends by io_uring: conn_send queues the request's sendmsg and the set's
 * flush submits every queued one at once (one system call for all the
 * requests a batch of completions started); the stamp taken at the submit
 * is when the request went out.
 */
#include "net/tb_direct.h"

#include <curl/curl.h>
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/uio.h>
#include <unistd.h>

#include "net/tb_egress.h"
#include "net/tb_http.h"
#include "net/tb_rxts.h"

#define GEN_MASK 0x0fffffffu  /* bits 32..59 of a tag; 61 is TB_DIRECT_RING */
#define SEND_BIT (1ULL << 60) /* a completion of the connection's sendmsg */
/* Queued sendmsgs go out at the latest when this many wait (well inside
 * the ring's submission queue, so no submit happens unstamped). */
#define SENDQ_MAX 256u

/* ---------------------------------------------------------------- set-up */

/* A proxy variable libcurl would follow (it reads them itself, in every
 * handle): the direct transport cannot go through a proxy. */
static bool
env_set(const char *name)
{
  const char *v = getenv(name);
  return v != NULL && v[0] != '\0';
}

/* The address libcurl connects to for the endpoint (its resolver, its
 * choice among the addresses), from one CONNECT_ONLY connection.  That
 * connection goes through the egress guard (tb_egress), so the address
 * kept, which every slot connects to without resolving again, is one the
 * policy allowed.  A refusal: false (the engine's libcurl streams are
 * refused by their own guard, with the rule in the cell's error). */
static bool
direct_resolve(struct tb_direct *d, const char *url)
{
  struct tb_egress_guard guard;
  CURL *e = curl_easy_init();
  if (e == NULL)
    return false;
  if (!tb_egress_guard_easy(&guard, tb_egress_current(), e, url)) {
    curl_easy_cleanup(e);
    return false;
  }
  curl_easy_setopt(e, CURLOPT_URL, url);
  curl_easy_setopt(e, CURLOPT_CONNECT_ONLY, 1L);
  curl_easy_setopt(e, CURLOPT_CONNECTTIMEOUT_MS, TB_DIRECT_CONNECT_TIMEOUT_MS);
  curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
  bool ok = false;
  char *ip = NULL;
  long port = 0;
  if (curl_easy_perform(e) == CURLE_OK &&
      curl_easy_getinfo(e, CURLINFO_PRIMARY_IP, &ip) == CURLE_OK && ip != NULL &&
      curl_easy_getinfo(e, CURLINFO_PRIMARY_PORT, &port) == CURLE_OK && port > 0 && port < 65536) {
    struct addrinfo hints = { .ai_flags = AI_NUMERICHOST | AI_NUMERICSERV,
                              .ai_socktype = SOCK_STREAM };
    struct addrinfo *res = NULL;
    char ps[16];
    snprintf(ps, sizeof ps, "%ld", port);
    if (getaddrinfo(ip, ps, &hints, &res) == 0 && res != NULL &&
        res->ai_addrlen <= sizeof d->addr) {
      memcpy(&d->addr, res->ai_addr, res->ai_addrlen);
      d->addrlen = res->ai_addrlen;
      ok = true;
    }
    if (res != NULL)
      freeaddrinfo(res);
  }
  curl_easy_cleanup(e);
  return ok;
}

bool
tb_direct_setup(struct tb_direct *d, const char *chat_url, bool kernel_stamps, bool curl_streams,
                int epfd)
{
  memset(d, 0, sizeof *d);
  d->kernel_stamps = kernel_stamps;
  d->epfd = epfd;
  if (curl_streams)
    return false;
  if (env_set("http_proxy") || env_set("all_proxy") || env_set("ALL_PROXY"))
    return false;
  CURLU *u = curl_url();
  if (u == NULL)
    return false;
  char *scheme = NULL, *host = NULL, *port = NULL, *path = NULL, *query = NULL, *user = NULL;
  bool ok = curl_url_set(u, CURLUPART_URL, chat_url, 0) == CURLUE_OK &&
            curl_url_get(u, CURLUPART_SCHEME, &scheme, 0) == CURLUE_OK &&
            strcmp(scheme, "http") == 0 && curl_url_get(u, CURLUPART_HOST, &host, 0) == CURLUE_OK &&
            curl_url_get(u, CURLUPART_PATH, &path, 0) == CURLUE_OK &&
            curl_url_get(u, CURLUPART_USER, &user, 0) != CURLUE_OK;
  if (ok) {
    if (curl_url_get(u, CURLUPART_PORT, &port, 0) != CURLUE_OK)
      port = NULL; /* none in the URL: no port in Host either */
    if (curl_url_get(u, CURLUPART_QUERY, &query, 0) != CURLUE_OK)
      query = NULL;
    d->host = port != NULL ? tb_xasprintf("%s:%s", host, port) : tb_xstrdup(host);
    d->path = query != NULL ? tb_xasprintf("%s?%s", path, query) : tb_xstrdup(path);
    ok = direct_resolve(d, chat_url);
  }
  curl_free(scheme);
  curl_free(host);
  curl_free(port);
  curl_free(path);
  curl_free(query);
  curl_free(user);
  curl_url_cleanup(u);
  if (ok) {
    d->rbuf = tb_xmalloc(TB_DIRECT_RBUF_SIZE);
    (void)tb_uring_init(&d->uring, epfd, TB_DIRECT_TAG | TB_DIRECT_RING | (uintptr_t)d,
                        TB_RXTS_CMSG_SPACE);
  } else
    tb_direct_free(d); /* the contract: nothing to free after false */
  return ok;
}

void
tb_direct_free(struct tb_direct *d)
{
  free(d->host);
  free(d->path);
  free(d->rbuf);
  d->host = d->path = d->rbuf = NULL;
  tb_uring_free(&d->uring);
}

const char *
tb_direct_transport(const struct tb_direct *d)
{
  return tb_uring_on(&d->uring) ? "io_uring" : "epoll";
}

const char *
tb_direct_uring_why(const struct tb_direct *d)
{
  return d->uring.why;
}

void
tb_direct_set_init(struct tb_direct_set *set, struct tb_direct *d, unsigned n, const char *auth,
                   const char *body, size_t body_len, const struct tb_direct_ops *ops)
{
  memset(set, 0, sizeof *set);
  set->d = d;
  set->n = n;
  set->c = tb_xcalloc(n, sizeof *set->c);
  set->sendq = tb_xcalloc(n, sizeof *set->sendq);
  for (unsigned i = 0; i < n; i++)
    set->c[i].fd = -1;
  set->body = body;
  set->body_len = body_len;
  set->ops = *ops;
  set->head = tb_direct_head_new(d, auth, body_len);
  set->head_len = strlen(set->head);
}

char *
tb_direct_head_new(const struct tb_direct *d, const char *auth, size_t body_len)
{
  return tb_xasprintf("POST %s HTTP/1.1\r\nHost: %s\r\n"
                      "User-Agent: tokbench/" TB_VERSION "\r\n%s%s"
                      "Content-Type: application/json\r\n"
                      "Accept: text/event-stream\r\n"
                      "Content-Length: %zu\r\n\r\n",
                      d->path, d->host, auth ? auth : "", auth ? "\r\n" : "", body_len);
}

/* ------------------------------------------------------------ connections */

static uint64_t
conn_tag(const struct tb_direct_conn *k, unsigned slot)
{
  return TB_DIRECT_TAG | ((uint64_t)(k->gen & GEN_MASK) << 32) | slot;
}

/* Submits the queued sendmsgs, each stamped sent now. */
static void
sends_submit(struct tb_direct_set *set)
{
  if (set->n_sendq == 0)
    return;
  int64_t now = tb_time_mono_ns();
  for (unsigned i = 0; i < set->n_sendq; i++) {
    struct tb_direct_conn *k = &set->c[set->sendq[i]];
    if (k->t_sent == 0)
      k->t_sent = now;
  }
  set->n_sendq = 0;
  tb_uring_submit(&set->d->uring);
}

static void
conn_close(struct tb_direct_set *set, unsigned slot)
{
  struct tb_direct_conn *k = &set->c[slot];
  /* the queue goes first (it may hold this slot), then the cancels: the
   * requests in flight read their bytes, which their owner frees next */
  sends_submit(set);
  if (k->sending)
    tb_uring_cancel(&set->d->uring, conn_tag(k, slot) | SEND_BIT);
  if (k->armed) /* before the close: a receive holds the socket open */
    tb_uring_cancel(&set->d->uring, conn_tag(k, slot));
  if (k->fd >= 0)
    close(k->fd); /* which also takes it out of the epoll set */
  k->fd = -1;
  k->connecting = k->idle = k->armed = k->in_epoll = k->sending = false;
  k->gen++;
}

void
tb_direct_close_all(struct tb_direct_set *set)
{
  for (unsigned i = 0; set->c != NULL && i < set->n; i++)
    conn_close(set, i);
}

void
tb_direct_set_free(struct tb_direct_set *set)
{
  tb_direct_close_all(set);
  free(set->c);
  free(set->sendq);
  set->c = NULL;
  set->sendq = NULL;
  set->n_sendq = 0;
  tb_http_secret_free(set->head); /* it holds the endpoint's key */
  set->head = NULL;
}

/* What slot's connection waits for: EPOLLOUT (connecting, or a send the
 * socket could not take yet) and the reads.  With io_uring the reads are
 * the armed receive's, and the connection is in the epoll set only while
 * it waits to write. */
static void
conn_watch(struct tb_direct_set *set, unsigned slot, bool out)
{
  struct tb_direct_conn *k = &set->c[slot];
  bool uring = tb_uring_on(&set->d->uring);
  struct epoll_event ev = { 0 };
  ev.events = (out ? EPOLLOUT : 0) | (uring ? 0 : EPOLLIN);
  ev.data.u64 = conn_tag(k, slot);
  if (ev.events == 0) {
    if (k->in_epoll)
      (void)epoll_ctl(set->d->epfd, EPOLL_CTL_DEL, k->fd, NULL);
    k->in_epoll = false;
    return;
  }
  (void)epoll_ctl(set->d->epfd, k->in_epoll ? EPOLL_CTL_MOD : EPOLL_CTL_ADD, k->fd, &ev);
  k->in_epoll = true;
}

/* io_uring: arms the connection's receive once it is up; false (err set)
 * when the ring cannot take it. */
static bool
conn_arm(struct tb_direct_set *set, unsigned slot)
{
  struct tb_direct_conn *k = &set->c[slot];
  if (!tb_uring_on(&set->d->uring) || k->armed)
    return true;
  sends_submit(set); /* the arm submits: the queued sends' stamps first */
  if (!tb_uring_recv(&set->d->uring, k->fd, conn_tag(k, slot))) {
    snprintf(k->err, sizeof k->err, "io_uring: no submission slot");
    return false;
  }
  k->armed = true;
  return true;
}

/* What is left of k's request (head, then body) in iov: how many. */
static size_t
rest_iov(const struct tb_direct_conn *k, struct iovec iov[2])
{
  if (k->wr_off < k->rq_head_len) {
    iov[0] = (struct iovec){ (char *)k->rq_head + k->wr_off, k->rq_head_len - k->wr_off };
    iov[1] = (struct iovec){ (char *)k->rq_body, k->rq_body_len };
    return 2;
  }
  size_t off = k->wr_off - k->rq_head_len;
  iov[0] = (struct iovec){ (char *)k->rq_body + off, k->rq_body_len - off };
  return 1;
}

/* io_uring: queues the sendmsg of what is left of slot's request (one at a
 * time per connection); false (err set) when the ring cannot take it. */
static bool
ring_send(struct tb_direct_set *set, unsigned slot)
{
  struct tb_direct_conn *k = &set->c[slot];
  conn_watch(set, slot, false); /* the ring waits for the socket, not epoll */
  if (k->sending || k->wr_off >= k->rq_head_len + k->rq_body_len)
    return true;
  k->sm = (struct msghdr){ .msg_iov = k->siov, .msg_iovlen = rest_iov(k, k->siov) };
  if (!tb_uring_sendmsg(&set->d->uring, k->fd, &k->sm, conn_tag(k, slot) | SEND_BIT)) {
    snprintf(k->err, sizeof k->err, "io_uring: no submission slot");
    return false;
  }
  k->sending = true;
  set->sendq[set->n_sendq++] = slot;
  if (set->n_sendq >= SENDQ_MAX)
    sends_submit(set);
  return true;
}

/* Writes what is left of slot's request (head, then body); false after a
 * transport error (its reason in err). */
static bool
conn_send(struct tb_direct_set *set, unsigned slot)
{
  struct tb_direct_conn *k = &set->c[slot];
  if (tb_uring_on(&set->d->uring))
    return ring_send(set, slot);
  size_t total = k->rq_head_len + k->rq_body_len;
  while (k->wr_off < total) {
    struct iovec iov[2];
    struct msghdr m = { .msg_iov = iov, .msg_iovlen = rest_iov(k, iov) };
    ssize_t n = sendmsg(k->fd, &m, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n < 0 && errno == EINTR)
      continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      conn_watch(set, slot, true);
      return true;
    }
    if (n < 0 && (errno == EPIPE || errno == ECONNRESET)) {
      /* The server stopped reading: it may have answered first (a front
       * end refusing a large body with 413, say); read that, if anything. */
      k->send_errno = errno;
      k->wr_off = total;
      break;
    }
    if (n < 0) {
      snprintf(k->err, sizeof k->err, "send: %s", strerror(errno));
      return false;
    }
    k->wr_off += (size_t)n;
  }
  conn_watch(set, slot, false);
  return true;
}

/* Opens slot's connection and sends once connected; false after an error
 * (its reason in err). */
static bool
conn_open(struct tb_direct_set *set, unsigned slot)
{
  struct tb_direct *d = set->d;
  struct tb_direct_conn *k = &set->c[slot];
  conn_close(set, slot);
  k->gen = d->gen_seq++; /* a tag no other connection of the run had */
  k->reused = false;
  k->wr_off = 0;
  k->send_errno = 0;
  k->t_sent = 0;
  tb_h1_init(&k->h1);
  int fd = socket(d->addr.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) {
    snprintf(k->err, sizeof k->err, "socket: %s", strerror(errno));
    return false;
  }
  int one = 1;
  (void)setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  if (d->kernel_stamps)
    (void)tb_rxts_enable(fd);
  k->fd = fd;
  int rc = connect(fd, (struct sockaddr *)&d->addr, d->addrlen);
  if (rc != 0 && errno != EINPROGRESS) {
    snprintf(k->err, sizeof k->err, "connect: %s", strerror(errno));
    conn_close(set, slot);
    return false;
  }
  k->connecting = rc != 0;
  k->t_ready = k->connecting ? 0 : tb_time_mono_ns();
  conn_watch(set, slot, k->connecting);
  if (k->connecting)
    return true;
  return conn_arm(set, slot) && conn_send(set, slot);
}

bool
tb_direct_start(struct tb_direct_set *set, unsigned slot)
{
  return tb_direct_start_req(set, slot, set->head, set->head_len, set->body, set->body_len);
}

bool
tb_direct_start_req(struct tb_direct_set *set, unsigned slot, const char *head, size_t head_len,
                    const char *body, size_t body_len)
{
  struct tb_direct_conn *k = &set->c[slot];
  k->rq_head = head;
  k->rq_head_len = head_len;
  k->rq_body = body;
  k->rq_body_len = body_len;
  k->busy = true;
  k->got_bytes = k->keep = false;
  k->wr_off = 0;
  k->send_errno = 0;
  k->t_sent = 0;
  k->err[0] = '\0';
  if (k->fd >= 0 && k->idle) {
    k->idle = false;
    k->reused = true;
    tb_h1_init(&k->h1);
    if (conn_send(set, slot))
      return true;
    /* the server closed it meanwhile: once more on a new connection */
    k->err[0] = '\0';
  }
  return conn_open(set, slot);
}

void
tb_direct_release(struct tb_direct_set *set, unsigned slot)
{
  struct tb_direct_conn *k = &set->c[slot];
  if (!k->busy)
    return;
  k->busy = false;
  if (k->keep)
    k->idle = true;
  else
    conn_close(set, slot); /* mid-response: closing aborts the request */
}

int64_t
tb_direct_sent_at(const struct tb_direct_set *set, unsigned slot, int64_t t_start)
{
  if (set->c == NULL || slot >= set->n)
    return t_start;
  const struct tb_direct_conn *k = &set->c[slot];
  int64_t t = !k->reused && k->t_ready > t_start ? k->t_ready : t_start;
  return k->t_sent > t ? k->t_sent : t;
}

bool
tb_direct_connecting(const struct tb_direct_set *set, unsigned slot)
{
  return set->c != NULL && slot < set->n && set->c[slot].connecting;
}

int
tb_direct_status(const struct tb_direct_set *set, unsigned slot)
{
  const struct tb_direct_conn *k = &set->c[slot];
  return k->h1.head_done ? k->h1.status : 0;
}

/* ------------------------------------------------------------------ reads */

struct feed_ctx {
  struct tb_direct_set *set;
  unsigned slot;
  int64_t stamp;
};

static bool
feed_body(void *cls, const char *data, size_t n)
{
  struct feed_ctx *f = cls;
  struct tb_direct_set *set = f->set;
  return set->ops.body(set->ops.cls, f->slot, set->c[f->slot].h1.status, f->stamp, data, n);
}

static void
end(struct tb_direct_set *set, unsigned slot, const char *err)
{
  set->ops.end(set->ops.cls, slot, err);
}

/* What one read of slot's connection gave: n bytes at data (with m's
 * control data for the kernel's stamp; m may be NULL), 0 the end of the
 * stream, < 0 an error (err). */
static void
conn_got(struct tb_direct_set *set, unsigned slot, ssize_t n, int err, const char *data,
         struct msghdr *m, int64_t rt_off)
{
  struct tb_direct *d = set->d;
  struct tb_direct_conn *k = &set->c[slot];
  if (!k->busy) { /* an idle connection: closed by the server, or junk */
    conn_close(set, slot);
    return;
  }
  if (n <= 0) {
    if (k->reused && !k->got_bytes) {
      /* a kept-alive connection the server had closed: once more anew */
      if (!conn_open(set, slot))
        end(set, slot, k->err);
      return;
    }
    char why[160];
    if (k->send_errno != 0 && !k->got_bytes) {
      snprintf(why, sizeof why, "send: %s", strerror(k->send_errno));
      end(set, slot, why);
    } else if (n < 0) {
      snprintf(why, sizeof why, "recv: %s", strerror(err));
      end(set, slot, why);
    } else if (tb_h1_eof(&k->h1) == TB_H1_DONE) {
      end(set, slot, NULL);
    } else {
      end(set, slot, k->h1.reason);
    }
    return;
  }
  k->got_bytes = true;
  int64_t now = tb_time_mono_ns();
  if (d->kernel_stamps) {
    enum tb_rxts_src src = TB_RXTS_CLOCK;
    if (m != NULL)
      now = tb_rxts_from_msg(m, now, rt_off, &src);
    if (src == TB_RXTS_KERNEL)
      set->rx_kernel++;
    else
      set->rx_user++;
  }
  struct feed_ctx f = { set, slot, now };
  size_t used;
  enum tb_h1_status st = tb_h1_feed(&k->h1, data, (size_t)n, &used, feed_body, &f);
  switch (st) {
  case TB_H1_MORE: return;
  case TB_H1_DONE:
    /* bytes after the response would be a response nobody asked for (the
     * body callback never said stop: that would be TB_H1_STOPPED) */
    k->keep = k->send_errno == 0 && !k->sending && used == (size_t)n && tb_h1_keep_alive(&k->h1);
    end(set, slot, NULL);
    return;
  case TB_H1_STOPPED: end(set, slot, "response aborted"); return;
  case TB_H1_ERROR: end(set, slot, k->h1.reason); return;
  }
}

/* One read of slot's connection (epoll). */
static void
conn_read(struct tb_direct_set *set, unsigned slot, int64_t rt_off)
{
  struct tb_direct *d = set->d;
  struct tb_direct_conn *k = &set->c[slot];
  union {
    char buf[TB_RXTS_CMSG_SPACE];
    struct cmsghdr align;
  } ctl;
  struct iovec iov = { d->rbuf, TB_DIRECT_RBUF_SIZE };
  struct msghdr m = {
    .msg_iov = &iov, .msg_iovlen = 1, .msg_control = ctl.buf, .msg_controllen = sizeof ctl.buf
  };
  ssize_t n;
  do
    n = recvmsg(k->fd, &m, MSG_DONTWAIT);
  while (n < 0 && errno == EINTR);
  if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
    return;
  conn_got(set, slot, n, errno, d->rbuf, &m, rt_off);
}

/* ---------------------------------------------------------------- io_uring */

struct ring_ctx {
  struct tb_direct_set *set;
  int64_t rt_off;
};

/* The connection a completion is for, or NULL: one closed meanwhile (its
 * receive's last completions), or another cell's. */
static struct tb_direct_conn *
conn_of(struct tb_direct_set *set, uint64_t tag, unsigned *slot)
{
  *slot = (unsigned)(tag & 0xffffffffu);
  uint32_t gen = (uint32_t)(tag >> 32) & GEN_MASK;
  if (set == NULL || set->c == NULL || *slot >= set->n || !(tag & TB_DIRECT_TAG))
    return NULL;
  struct tb_direct_conn *k = &set->c[*slot];
  return k->fd >= 0 && (k->gen & GEN_MASK) == gen ? k : NULL;
}

/* The completion of slot's sendmsg: res bytes went, or -errno. */
static void
send_done(struct tb_direct_set *set, unsigned slot, int res)
{
  struct tb_direct_conn *k = &set->c[slot];
  k->sending = false;
  if (!k->busy)
    return;
  if (res > 0) { /* short only when cut by a signal: the rest goes next */
    k->wr_off += (size_t)res;
    if (!ring_send(set, slot))
      end(set, slot, k->err);
    return;
  }
  if (res == -EAGAIN || res == -EINTR) { /* the socket's room, by epoll */
    conn_watch(set, slot, true);
    return;
  }
  if (res == -EPIPE || res == -ECONNRESET) {
    /* as on epoll: the server stopped reading, and may have answered */
    k->send_errno = -res;
    k->wr_off = k->rq_head_len + k->rq_body_len;
    return;
  }
  char why[160];
  snprintf(why, sizeof why, "send: %s", res == 0 ? "nothing written" : strerror(-res));
  end(set, slot, why);
}

static void
ring_rx(void *cls, const struct tb_uring_rx *rx)
{
  struct ring_ctx *r = cls;
  unsigned slot;
  struct tb_direct_conn *k = conn_of(r->set, rx->user_data, &slot);
  if (k == NULL)
    return;
  if (rx->user_data & SEND_BIT) {
    send_done(r->set, slot, rx->res);
    return;
  }
  if (!rx->more)
    k->armed = false;
  if (rx->res == -ENOBUFS) { /* the buffers ran dry: nothing lost, arm again */
    if (!conn_arm(r->set, slot) && k->busy)
      end(r->set, slot, k->err);
    return;
  }
  conn_got(r->set, slot, rx->res > 0 ? (ssize_t)rx->len : rx->res, -rx->res, rx->data, rx->msg,
           r->rt_off);
  /* the same connection, still open, whose receive ended: arm it again */
  if (rx->res > 0 && conn_of(r->set, rx->user_data, &slot) == k && !k->armed &&
      !conn_arm(r->set, slot) && k->busy)
    end(r->set, slot, k->err);
}

/* The ring has completions: each goes to its connection in set. */
static void
ring_event(struct tb_direct_set *set, uint64_t tag, int64_t rt_off)
{
  struct tb_direct *d = (struct tb_direct *)(uintptr_t)(tag & ~(TB_DIRECT_TAG | TB_DIRECT_RING));
  struct ring_ctx r = { set, rt_off };
  (void)tb_uring_drain(&d->uring, ring_rx, &r);
}

void
tb_direct_flush(struct tb_direct_set *set)
{
  if (set == NULL)
    return;
  /* The sends that went at once have completed when the submit returns:
   * their completions are taken here, so that they do not wake the wait
   * that follows (one wake-up per batch of requests, not two).  What they
   * hand on (a send's rest, a response read meanwhile) may queue more. */
  while (set->n_sendq > 0) {
    sends_submit(set);
    if (tb_uring_ready(&set->d->uring) == 0)
      break;
    struct ring_ctx r = { set, tb_rxts_offset() };
    (void)tb_uring_drain(&set->d->uring, ring_rx, &r);
  }
}

void
tb_direct_event(struct tb_direct_set *set, uint64_t tag, uint32_t events, int64_t rt_off)
{
  if (tag & TB_DIRECT_RING) {
    ring_event(set, tag, rt_off);
    return;
  }
  unsigned slot = (unsigned)(tag & 0xffffffffu);
  uint32_t gen = (uint32_t)(tag >> 32) & GEN_MASK;
  if (set->c == NULL || slot >= set->n)
    return;
  struct tb_direct_conn *k = &set->c[slot];
  if (k->fd < 0 || (k->gen & GEN_MASK) != gen)
    return; /* an event of a connection closed earlier in this batch */
  if (k->connecting) {
    if (!(events & (EPOLLOUT | EPOLLERR | EPOLLHUP)))
      return;
    int err = 0;
    socklen_t el = sizeof err;
    if (getsockopt(k->fd, SOL_SOCKET, SO_ERROR, &err, &el) != 0)
      err = errno;
    if (err == 0 && (events & (EPOLLERR | EPOLLHUP)))
      err = ECONNRESET;
    if (err != 0) {
      if (!k->busy) {
        conn_close(set, slot);
        return;
      }
      char why[160];
      snprintf(why, sizeof why, "connect: %s", strerror(err));
      end(set, slot, why);
      return;
    }
    k->connecting = false;
    k->t_ready = tb_time_mono_ns();
    if (!conn_arm(set, slot)) {
      if (k->busy)
        end(set, slot, k->err);
      else
        conn_close(set, slot);
      return;
    }
    if (k->busy && !conn_send(set, slot))
      end(set, slot, k->err);
    else if (!k->busy)
      conn_watch(set, slot, false);
    return;
  }
  if (k->busy && (events & EPOLLOUT) && k->wr_off < k->rq_head_len + k->rq_body_len &&
      !conn_send(set, slot)) {
    end(set, slot, k->err);
    return;
  }
  /* io_uring: a hang-up or an error shows in the receive's completion */
  if ((events & (EPOLLIN | EPOLLHUP | EPOLLERR)) && !tb_uring_on(&set->d->uring))
    conn_read(set, slot, rt_off);
}
