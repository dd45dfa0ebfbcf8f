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
#include "sim_routes.h"
#include "sim_sched.h"

static void
out_reserve(struct conn *c, size_t n)
{
  if (c->out_len + n <= c->out_cap)
    return;
  if (c->out_off > 0) {
    memmove(c->out, c->out + c->out_off, c->out_len - c->out_off);
    c->out_len -= c->out_off;
    c->out_off = 0;
    if (c->out_len + n <= c->out_cap)
      return;
  }
  size_t cap = c->out_cap ? c->out_cap : 4096;
  while (cap < c->out_len + n)
    cap *= 2;
  c->out = tb_xrealloc(c->out, cap);
  c->out_cap = cap;
}

void
sim_conn_out_append(struct conn *c, const void *data, size_t n)
{
  out_reserve(c, n);
  memcpy(c->out + c->out_len, data, n);
  c->out_len += n;
}

void TB_PRINTF(2, 3) sim_conn_out_printf(struct conn *c, const char *fmt, ...)
{
  va_list ap;
  out_reserve(c, 256);
  for (;;) {
    va_start(ap, fmt);
    int n = vsnprintf(c->out + c->out_len, c->out_cap - c->out_len, fmt, ap);
    va_end(ap);
    if (n < 0)
      return;
    if ((size_t)n < c->out_cap - c->out_len) {
      c->out_len += (size_t)n;
      return;
    }
    out_reserve(c, (size_t)n + 1);
  }
}

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
  if (c->dead)
    return;
  c->dead = true;
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
  int r = send_some(c->fd, c->out + c->out_off, c->out_len - c->out_off, &sent);
  c->out_off += sent;
  if (r == 1)
    c->out_off = c->out_len = 0;
  return r;
}

/* The same over TLS: the plaintext is encrypted at once, all of it (so the
 * output buffer is empty afterwards, and the next step's stamps are written
 * into plaintext not yet encrypted), then the ciphertext is sent; a last
 * answer before a close gets its close_notify (sim_tls.h). */
static int
flush_tls(struct conn *c)
{
  if (c->out_off < c->out_len &&
      !sim_tls_write(c->tls, c->out + c->out_off, c->out_len - c->out_off))
    return -1;
  c->out_off = c->out_len = 0;
  if (c->close_after && c->gen == NULL)
    sim_tls_close_notify(c->tls);
  const char *p;
  size_t sent, n = sim_tls_pending(c->tls, &p);
  int r = send_some(c->fd, p, n, &sent);
  sim_tls_sent(c->tls, sent);
  return r;
}

/* Sends what is buffered; arms EPOLLOUT on a short write. */
void
sim_conn_flush(struct server *s, struct conn *c)
{
  if (c->dead)
    return;
  if (s->defer) {
    if (!c->fq) {
      if (s->fq_n == s->fq_cap) {
        s->fq_cap = s->fq_cap ? s->fq_cap * 2 : 256;
        s->fq = tb_xrealloc(s->fq, (size_t)s->fq_cap * sizeof(*s->fq));
      }
      s->fq[s->fq_n++] = c;
      c->fq = true;
    }
    return;
  }
  int sent = c->tls ? flush_tls(c) : flush_plain(c);
  if (sent < 0) {
    sim_conn_kill(s, c);
    return;
  }
  if (sent == 0) {
    size_t unsent = c->tls ? sim_tls_unsent(c->tls) : c->out_len - c->out_off;
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
  if (c->close_after && c->gen == NULL && !c->draining) {
    /* Lingering close: stop sending, drain input until EOF, so that a
     * client still sending never sees our answer destroyed by a reset. */
    c->draining = true;
    c->last_active = now_ns();
    shutdown(c->fd, SHUT_WR);
  }
}

/* Writes the connection's deferred stamps (the clock now) and sends. */
void
sim_conn_flush_stamped(struct server *s, struct conn *c)
{
  c->fq = false;
  if (c->nst > 0) {
    char d[SIM_STAMP_DIGITS + 8];
    snprintf(d, sizeof(d), "%0*" PRId64, SIM_STAMP_DIGITS, now_ns());
    for (int i = 0; i < c->nst; i++)
      memcpy(c->out + c->out_off + c->st_rel[i], d, SIM_STAMP_DIGITS);
    c->nst = 0;
  }
  bool defer = s->defer;
  s->defer = false;
  sim_conn_flush(s, c);
  s->defer = defer;
}

/* ------------------------------------------------------------------ */
/* plain responses */

static const char *
reason_phrase(int status)
{
  switch (status) {
  case 100: return "Continue";
  case 200: return "OK";
  case 400: return "Bad Request";
  case 401: return "Unauthorized";
  case 404: return "Not Found";
  case 405: return "Method Not Allowed";
  case 411: return "Length Required";
  case 413: return "Payload Too Large";
  case 414: return "URI Too Long";
  case 417: return "Expectation Failed";
  case 429: return "Too Many Requests";
  case 431: return "Request Header Fields Too Large";
  case 500: return "Internal Server Error";
  case 501: return "Not Implemented";
  case 503: return "Service Unavailable";
  case 505: return "HTTP Version Not Supported";
  default: return "Status";
  }
}

void
sim_conn_reply_raw(struct server *s, struct conn *c, int status, const char *ctype,
                   const char *body, size_t len, bool keep_alive)
{
  if (!keep_alive)
    c->close_after = true;
  sim_conn_out_printf(c, "HTTP/1.1 %d %s\r\ncontent-type: %s\r\ncontent-length: %zu\r\n%s%s\r\n",
                      status, reason_phrase(status), ctype, len,
                      (status == 429 || status == 503) ? "retry-after: 1\r\n" : "",
                      c->close_after ? "connection: close\r\n" : "");
  sim_conn_out_append(c, body, len);
  sim_conn_flush(s, c);
}

/* Replies with a JSON document and steals it. */
void
sim_conn_reply_json(struct server *s, struct conn *c, int status, json_t *doc, bool keep_alive)
{
  char *text = json_dumps(doc, JSON_COMPACT);
  json_decref(doc);
  if (text == NULL) {
    sim_conn_reply_raw(s, c, 500, "application/json", "{}", 2, false);
    return;
  }
  sim_conn_reply_raw(s, c, status, "application/json", text, strlen(text), keep_alive);
  free(text);
}

static const char *
error_type(int status)
{
  switch (status) {
  case 400: return "BadRequestError";
  case 401: return "AuthenticationError";
  case 404: return "NotFoundError";
  case 429: return "RateLimitError";
  case 503: return "ServiceUnavailableError";
  default: return status >= 500 ? "InternalServerError" : "BadRequestError";
  }
}

/* llama.cpp b11669's error types (format_error_response). */
static const char *
llama_error_type(int status)
{
  switch (status) {
  case 401: return "authentication_error";
  case 403: return "permission_error";
  case 404: return "not_found_error";
  case 501: return "not_supported_error";
  case 503: return "unavailable_error";
  default: return status >= 500 ? "server_error" : "invalid_request_error";
  }
}

/* OpenAI-style error body: {"error": {message, type, param, code}};
 * llama.cpp b11669's {"error": {code, message, type}}. */
void
sim_conn_reply_error(struct server *s, struct conn *c, int status, const char *msg, bool keep_alive)
{
  s->st.errors++;
  json_t *doc = llama_new(s) ? json_pack("{s:{s:i, s:s, s:s}}", "error", "code", status, "message",
                                         msg, "type", llama_error_type(status))
                             : json_pack("{s:{s:s, s:s, s:n, s:i}}", "error", "message", msg,
                                         "type", error_type(status), "param", "code", status);
  sim_conn_reply_json(s, c, status, doc, keep_alive);
}

/* ------------------------------------------------------------------ */
/* connections */

/* Parses and serves buffered requests until one is in progress or more
 * bytes are needed. */
static void
conn_process(struct server *s, struct conn *c)
{
  size_t used = 0;
  while (!c->dead && !c->draining && c->gen == NULL && c->prep == NULL && !c->held &&
         !c->close_after) {
    struct sim_http_req req;
    int status = 0;
    enum sim_http_result res = sim_http_parse(c->in + used, c->in_len - used, &req, &status);
    if (res == SIM_HTTP_NEED_MORE) {
      if (req.head_len > 0 && req.expect_continue && !c->sent_continue) {
        c->sent_continue = true;
        sim_conn_out_printf(c, "HTTP/1.1 100 Continue\r\n\r\n");
        sim_conn_flush(s, c);
      }
      break;
    }
    if (res == SIM_HTTP_ERROR) {
      char msg[64];
      snprintf(msg, sizeof(msg), "malformed or oversized request (%d)", status);
      used = c->in_len;
      sim_conn_reply_error(s, c, status, msg, false);
      break;
    }
    c->sent_continue = false;
    sim_routes_dispatch(s, c, &req);
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
        if (c->gen || c->prep || c->held || c->draining) {
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
  if (c->gen) {
    s->st.aborted++;
    sim_sched_gen_free(s, c->gen);
  }
  if (c->prep)
    c->prep->c = NULL;        /* the job comes back to nobody (sim_routes_prepared) */
  sim_routes_held_drop(s, c); /* a held erase's client went away */
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
  free(c->out);
  free(c);
}

/* Frees dead connections, resumes finished ones; then admits: a request
 * that ended (its connection dead, or finished and kept alive) gave back
 * its running slot and its KV, and the queue's head must not wait for the
 * next arrival to take them.  Then, the server idle, the held slot erases
 * are answered (sim_routes_held_release) and their connections resume. */
void
sim_conn_reap(struct server *s)
{
  do {
    bool freed = false;
    while (s->todo) {
      struct conn *c = s->todo;
      s->todo = c->todo_next == c ? NULL : c->todo_next;
      c->todo_next = NULL;
      if (c->dead) {
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
      sim_sched_try_admit(s, now_ns());
  } while (sim_routes_held_release(s));
}
