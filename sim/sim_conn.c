/*
 * sim_conn: see sim_conn.h for what it does and sim_state.h for the
 * lifetimes and the hot path it keeps to.
 */
#include "sim_conn.h"

#include <arpa/inet.h>
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/timerfd.h>
#include <time.h>
#include <unistd.h>

#include "sim_http.h"
#include "sim_out.h"

static void
ep_mod(struct server *s, struct conn *c)
{
  struct epoll_event ev = { .events = EPOLLIN | EPOLLRDHUP | (c->epollout ? EPOLLOUT : 0u),
                            .data.ptr = c };
  (void)epoll_ctl(s->ep, EPOLL_CTL_MOD, c->fd, &ev);
}

void
sim_conn_todo_push(struct server *s, struct conn *c)
{
  if (c->todo_next != NULL || s->todo == c)
    return;
  c->todo_next = s->todo ? s->todo : c; /* self-link marks the tail */
  s->todo = c;
}

void
sim_conn_kill(struct server *s, struct conn *c)
{
  if (c->o.dead)
    return;
  c->o.dead = true;
  (void)epoll_ctl(s->ep, EPOLL_CTL_DEL, c->fd, NULL);
  sim_conn_todo_push(s, c);
}

/* Sends n bytes of buf to fd, *sent of them (also on a short write).
 * 1: all sent; 0: the socket is full; -1: the connection failed. */
static int
send_some(int fd, const char *buf, size_t n, size_t *sent)
{
  *sent = 0;
  while (*sent < n) {
    ssize_t k = send(fd, buf + *sent, n - *sent, MSG_NOSIGNAL);
    if (k > 0) {
      *sent += (size_t)k;
      continue;
    }
    if (k < 0 && errno == EINTR)
      continue;
    if (k < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
      return 0;
    return -1;
  }
  return 1;
}

/* Sends c's output over plain TCP (send_some's results). */
static int
flush_plain(struct conn *c)
{
  size_t sent;
  int r = send_some(c->fd, c->o.buf + c->o.off, c->o.len - c->o.off, &sent);
  c->o.off += sent;
  if (r == 1)
    c->o.off = c->o.len = 0;
  return r;
}

/* The same over TLS: the plaintext is encrypted at once, all of it (so the
 * output buffer is empty afterwards, and the next step's stamps are written
 * into plaintext not yet encrypted), then the ciphertext is sent; a last
 * answer before a close gets its close_notify (sim_tls.h). */
static int
flush_tls(struct conn *c)
{
  if (c->o.off < c->o.len && !sim_tls_write(c->tls, c->o.buf + c->o.off, c->o.len - c->o.off))
    return -1;
  c->o.off = c->o.len = 0;
  if (c->o.close_after && c->o.gen == NULL)
    sim_tls_close_notify(c->tls);
  const char *p;
  size_t sent, n = sim_tls_pending(c->tls, &p);
  int r = send_some(c->fd, p, n, &sent);
  sim_tls_sent(c->tls, sent);
  return r;
}

/* The connection that owns o (its member o). */
static struct conn *
conn_of(struct sim_out *o)
{
  return (struct conn *)(void *)((char *)o - offsetof(struct conn, o));
}

/* struct sim_out_ops's send: what o buffers over TCP or TLS; arms EPOLLOUT
 * on a short write. */
static void
conn_send(struct server *s, struct sim_out *o)
{
  struct conn *c = conn_of(o);
  int sent = c->tls ? flush_tls(c) : flush_plain(c);
  if (sent < 0) {
    sim_conn_kill(s, c);
    return;
  }
  if (sent == 0) {
    size_t unsent = c->tls ? sim_tls_unsent(c->tls) : c->o.len - c->o.off;
    if (unsent > SIM_OUT_CAP) {
      sim_conn_kill(s, c); /* a reader this slow is gone for our purposes */
      return;
    }
    if (!c->epollout) {
      c->epollout = true;
      ep_mod(s, c);
    }
    return;
  }
  if (c->epollout) {
    c->epollout = false;
    ep_mod(s, c);
  }
  if (c->o.close_after && c->o.gen == NULL && !c->draining) {
    /* Lingering close: stop sending, drain input until EOF, so that a
     * client still sending never sees our answer destroyed by a reset. */
    c->draining = true;
    c->last_active = now_ns();
    shutdown(c->fd, SHUT_WR);
  }
}

static void
conn_kill(struct server *s, struct sim_out *o)
{
  sim_conn_kill(s, conn_of(o));
}

static void
conn_resume(struct server *s, struct sim_out *o)
{
  struct conn *c = conn_of(o);
  c->resume = true;
  sim_conn_todo_push(s, c);
}

static const struct sim_out_ops conn_ops = {
  .send = conn_send,
  .kill = conn_kill,
  .resume = conn_resume,
};

void
sim_conn_flush(struct server *s, struct conn *c)
{
  sim_out_flush(s, &c->o);
}

/* ------------------------------------------------------------------ */
/* connections */

/* Parses and serves buffered requests until one is in progress or more
 * bytes are needed. */
static void
conn_process(struct server *s, struct conn *c)
{
  size_t used = 0;
  while (!c->o.dead && !c->draining && c->o.gen == NULL && c->prep == NULL && !c->held &&
         !c->o.close_after) {
    struct sim_http_req req;
    int status = 0;
    enum sim_http_result res = sim_http_parse(c->in + used, c->in_len - used, &req, &status);
    if (res == SIM_HTTP_NEED_MORE) {
      if (req.head_len > 0 && req.expect_continue && !c->sent_continue) {
        c->sent_continue = true;
        sim_out_printf(&c->o, "HTTP/1.1 100 Continue\r\n\r\n");
        sim_conn_flush(s, c);
      }
      break;
    }
    if (res == SIM_HTTP_ERROR) {
      char msg[64];
      snprintf(msg, sizeof(msg), "malformed or oversized request (%d)", status);
      used = c->in_len;
      sim_out_reply_error(s, &c->o, status, msg, false);
      break;
    }
    c->sent_continue = false;
    s->conn_h->dispatch(s, c, &req);
    used += req.total_len;
  }
  if (used > 0) {
    memmove(c->in, c->in + used, c->in_len - used);
    c->in_len -= used;
    c->req_start = now_ns(); /* a pipelined request starts now */
  }
}

void
sim_conn_read(struct server *s, struct conn *c)
{
  for (;;) {
    if (c->in_cap - c->in_len < 4096) {
      if (c->in_cap >= SIM_IN_CAP) {
        if (c->o.gen || c->prep || c->held || c->draining) {
          if (c->draining) {
            c->in_len = 0;
            continue;
          }
          sim_conn_kill(s, c); /* pipelining this much while streaming: abusive */
          return;
        }
        break; /* parser will reject it */
      }
      size_t cap = c->in_cap * 2;
      if (cap > SIM_IN_CAP)
        cap = SIM_IN_CAP;
      c->in = tb_xrealloc(c->in, cap);
      c->in_cap = cap;
    }
    /* a draining TLS connection has sent its close_notify: what comes is
     * read raw and dropped */
    ssize_t n = c->tls && !c->draining
                  ? sim_tls_recv(c->tls, c->fd, c->in + c->in_len, c->in_cap - c->in_len)
                  : recv(c->fd, c->in + c->in_len, c->in_cap - c->in_len, 0);
    if (n > 0) {
      c->last_active = now_ns();
      if (c->in_len == 0)
        c->req_start = c->last_active;
      c->in_len += (size_t)n;
      if (c->draining)
        c->in_len = 0;
      continue;
    }
    if (n < 0 && errno == EINTR)
      continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
      break;
    /* EOF or error (a failed TLS handshake too): the client went away;
     * its request is aborted. */
    sim_conn_kill(s, c);
    return;
  }
  if (c->tls && sim_tls_unsent(c->tls) > 0)
    sim_conn_flush(s, c); /* the handshake's answers, a ticket, an alert */
  conn_process(s, c);
}

void
sim_conn_new(struct server *s, int fd)
{
  if (s->nconns >= s->cfg->max_conns) {
    close(fd);
    return;
  }
  int one = 1;
  (void)setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  struct conn *c = tb_xcalloc(1, sizeof(*c));
  c->kind = KIND_CONN;
  c->fd = fd;
  c->o.ops = &conn_ops;
  c->in_cap = SIM_IN_INIT;
  c->in = tb_xmalloc(c->in_cap);
  c->last_active = c->accepted = now_ns();
  if (s->tls != NULL && (c->tls = sim_tls_new(s->tls)) == NULL) {
    free(c->in);
    free(c);
    close(fd);
    return;
  }
  struct epoll_event ev = { .events = EPOLLIN | EPOLLRDHUP, .data.ptr = c };
  if (epoll_ctl(s->ep, EPOLL_CTL_ADD, fd, &ev) < 0) {
    sim_tls_free(c->tls);
    free(c->in);
    free(c);
    close(fd);
    return;
  }
  c->next = s->conns;
  if (s->conns)
    s->conns->prev = c;
  s->conns = c;
  s->nconns++;
  s->st.conns_total++;
}

static void
conn_free(struct server *s, struct conn *c)
{
  s->conn_h->closed(s, c); /* its request, its prompt's job, its held erase */
  if (c->prev)
    c->prev->next = c->next;
  else
    s->conns = c->next;
  if (c->next)
    c->next->prev = c->prev;
  s->nconns--;
  close(c->fd);
  sim_tls_free(c->tls);
  free(c->in);
  free(c->o.buf);
  free(c);
}

/* Frees dead connections, resumes finished ones; then admits: a request
 * that ended (its connection dead, or finished and kept alive) gave back
 * its running slot and its KV, and the queue's head must not wait for the
 * next arrival to take them.  Then, the server idle, the held slot erases
 * are answered (the handlers' release) and their connections resume. */
void
sim_conn_reap(struct server *s)
{
  do {
    bool freed = false;
    while (s->todo) {
      struct conn *c = s->todo;
      s->todo = c->todo_next == c ? NULL : c->todo_next;
      c->todo_next = NULL;
      if (c->o.dead) {
        conn_free(s, c);
        freed = true;
      } else if (c->resume) {
        c->resume = false;
        freed = true;
        /* pipelined plaintext that TLS holds (sim_tls.h): epoll will not
         * tell of it, so read it now */
        if (c->tls && sim_tls_buffered(c->tls))
          sim_conn_read(s, c);
        else
          conn_process(s, c);
      }
    }
    if (freed)
      s->conn_h->admit(s, now_ns());
  } while (s->conn_h->release(s));
}
