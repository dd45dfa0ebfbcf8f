/*
 * loopback.h: a tiny HTTP/1.1 server on 127.0.0.1 (or [::1]) for unit tests of the
 * modules that talk to a peer (tb_http, tb_prompt, tb_direct), so that they
 * run against real sockets and real libcurl, with no mocks.
 *
 * One accepting thread, one thread per connection (kept-alive connections
 * serve request after request).  Each request (head up to "\r\n\r\n", then
 * Content-Length bytes of body) goes to the test's handler, which writes
 * whatever bytes it likes to the connection (well-formed or not) and says
 * whether the connection stays open.  The server copies the last request's
 * head and body and counts requests (and those that came on a kept-alive
 * connection) and connections, for the test to check.
 *
 * Header-only (static inline functions) because only the tests include it.
 */
#ifndef TB_TEST_LOOPBACK_H
#define TB_TEST_LOOPBACK_H

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <unistd.h>

#define LB_CONNS_MAX 64
#define LB_REQ_MAX (8u * 1024u * 1024u) /* a request's head + body */
#define LB_HEAD_COPY 4096

struct lb_req {
  const char *head; /* NUL-terminated, up to and including "\r\n\r\n" */
  size_t head_len;
  const char *body; /* NUL-terminated */
  size_t body_len;
};

/* Writes the answer to fd; returns true to keep the connection open. */
typedef bool (*lb_handler)(void *cls, int fd, const struct lb_req *req);

struct lb_server;

struct lb_conn {
  struct lb_server *s;
  int fd;
  pthread_t th;
  bool used;
};

struct lb_server {
  int lfd;
  int port;
  char url[64]; /* http://127.0.0.1:port or http://[::1]:port */
  lb_handler h;
  void *cls;
  pthread_t th;
  pthread_mutex_t mu;
  bool stop;
  unsigned requests, connections;
  unsigned requests_reused; /* requests on a connection that served one before */
  char last_head[LB_HEAD_COPY];
  char *last_body; /* copy of the last request's body */
  struct lb_conn conns[LB_CONNS_MAX];
};

static inline void
lb_write_all(int fd, const char *p, size_t n)
{
  while (n > 0) {
    ssize_t w = send(fd, p, n, MSG_NOSIGNAL);
    if (w < 0 && errno == EINTR)
      continue;
    if (w <= 0)
      return;
    p += w;
    n -= (size_t)w;
  }
}

/* A complete answer with Content-Length; keep-alive unless close. */
static inline void
lb_respond(int fd, int status, const char *ctype, const char *body, bool close_conn)
{
  char head[512];
  size_t n = strlen(body);
  int hl = snprintf(head, sizeof head,
                    "HTTP/1.1 %d X\r\nContent-Type: %s\r\nContent-Length: %zu\r\n%s\r\n", status,
                    ctype, n, close_conn ? "Connection: close\r\n" : "");
  lb_write_all(fd, head, (size_t)hl);
  lb_write_all(fd, body, n);
}

/* The value of header name in head (case-insensitive), copied into out. */
static inline bool
lb_header(const char *head, const char *name, char *out, size_t len)
{
  size_t nl = strlen(name);
  for (const char *p = strstr(head, "\r\n"); p != NULL; p = strstr(p + 2, "\r\n")) {
    const char *l = p + 2;
    if (strncasecmp(l, name, nl) == 0 && l[nl] == ':') {
      const char *v = l + nl + 1;
      while (*v == ' ')
        v++;
      const char *e = strstr(v, "\r\n");
      size_t vl = e ? (size_t)(e - v) : strlen(v);
      snprintf(out, len, "%.*s", (int)vl, v);
      return true;
    }
  }
  return false;
}

static inline void *
lb_conn_main(void *arg)
{
  struct lb_conn *c = arg;
  struct lb_server *s = c->s;
  char *buf = malloc(LB_REQ_MAX + 1);
  size_t have = 0;
  unsigned served = 0;
  for (;;) {
    char *end = NULL;
    size_t head_len = 0, body_len = 0;
    /* a request: head, then its body */
    for (;;) {
      buf[have] = '\0';
      end = have ? strstr(buf, "\r\n\r\n") : NULL;
      if (end != NULL) {
        head_len = (size_t)(end - buf) + 4;
        char cl[32];
        char save = buf[head_len];
        buf[head_len] = '\0';
        body_len = lb_header(buf, "Content-Length", cl, sizeof cl) ? strtoul(cl, NULL, 10) : 0;
        buf[head_len] = save;
        if (body_len > LB_REQ_MAX - head_len)
          goto out;
        if (have >= head_len + body_len)
          break;
      }
      if (have >= LB_REQ_MAX)
        goto out;
      ssize_t r = recv(c->fd, buf + have, LB_REQ_MAX - have, 0);
      if (r < 0 && errno == EINTR)
        continue;
      if (r <= 0)
        goto out;
      have += (size_t)r;
    }
    char *head = malloc(head_len + 1), *body = malloc(body_len + 1);
    memcpy(head, buf, head_len);
    head[head_len] = '\0';
    memcpy(body, buf + head_len, body_len);
    body[body_len] = '\0';
    memmove(buf, buf + head_len + body_len, have - head_len - body_len);
    have -= head_len + body_len;
    pthread_mutex_lock(&s->mu);
    s->requests++;
    if (served++ > 0)
      s->requests_reused++;
    snprintf(s->last_head, sizeof s->last_head, "%s", head);
    free(s->last_body);
    s->last_body = strdup(body);
    pthread_mutex_unlock(&s->mu);
    struct lb_req req = { head, head_len, body, body_len };
    bool keep = s->h(s->cls, c->fd, &req);
    free(head);
    free(body);
    if (!keep)
      break;
  }
out:
  free(buf);
  shutdown(c->fd, SHUT_RDWR);
  return NULL;
}

static inline void *
lb_accept_main(void *arg)
{
  struct lb_server *s = arg;
  for (;;) {
    struct pollfd p = { .fd = s->lfd, .events = POLLIN };
    int pr = poll(&p, 1, 50);
    pthread_mutex_lock(&s->mu);
    bool stop = s->stop;
    pthread_mutex_unlock(&s->mu);
    if (stop)
      return NULL;
    if (pr <= 0)
      continue;
    int fd = accept(s->lfd, NULL, NULL);
    if (fd < 0)
      continue;
    pthread_mutex_lock(&s->mu);
    struct lb_conn *c = NULL;
    if (s->connections < LB_CONNS_MAX)
      c = &s->conns[s->connections++];
    pthread_mutex_unlock(&s->mu);
    if (c == NULL) {
      close(fd);
      continue;
    }
    c->s = s;
    c->fd = fd;
    c->used = pthread_create(&c->th, NULL, lb_conn_main, c) == 0;
    if (!c->used)
      close(fd);
  }
}

/* Starts a server answering with h on 127.0.0.1, or on [::1] when ipv6;
 * false if it cannot listen (lfd is then closed). */
static inline bool
lb_start_on(struct lb_server *s, lb_handler h, void *cls, bool ipv6)
{
  memset(s, 0, sizeof *s);
  s->h = h;
  s->cls = cls;
  pthread_mutex_init(&s->mu, NULL);
  s->lfd = socket(ipv6 ? AF_INET6 : AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  struct sockaddr_storage a;
  memset(&a, 0, sizeof a);
  struct sockaddr_in *a4 = (struct sockaddr_in *)(void *)&a;
  struct sockaddr_in6 *a6 = (struct sockaddr_in6 *)(void *)&a;
  if (ipv6) {
    a6->sin6_family = AF_INET6;
    a6->sin6_addr = in6addr_loopback;
  } else {
    a4->sin_family = AF_INET;
    a4->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  }
  socklen_t al = ipv6 ? sizeof *a6 : sizeof *a4;
  if (s->lfd < 0 || bind(s->lfd, (struct sockaddr *)&a, al) != 0 || listen(s->lfd, 64) != 0 ||
      getsockname(s->lfd, (struct sockaddr *)&a, &al) != 0) {
    if (s->lfd >= 0)
      close(s->lfd);
    s->lfd = -1;
    pthread_mutex_destroy(&s->mu);
    return false;
  }
  s->port = ntohs(ipv6 ? a6->sin6_port : a4->sin_port);
  snprintf(s->url, sizeof s->url, ipv6 ? "http://[::1]:%d" : "http://127.0.0.1:%d", s->port);
  return pthread_create(&s->th, NULL, lb_accept_main, s) == 0;
}

/* Starts a server answering with h on 127.0.0.1; false if it cannot listen. */
static inline bool
lb_start(struct lb_server *s, lb_handler h, void *cls)
{
  return lb_start_on(s, h, cls, false);
}

/* Stops accepting, cuts every connection, joins every thread, frees. */
static inline void
lb_stop(struct lb_server *s)
{
  pthread_mutex_lock(&s->mu);
  s->stop = true;
  pthread_mutex_unlock(&s->mu);
  pthread_join(s->th, NULL);
  for (unsigned i = 0; i < s->connections; i++) {
    if (!s->conns[i].used)
      continue;
    shutdown(s->conns[i].fd, SHUT_RDWR);
    pthread_join(s->conns[i].th, NULL);
    close(s->conns[i].fd);
  }
  close(s->lfd);
  free(s->last_body);
  pthread_mutex_destroy(&s->mu);
}

/* A port on which nothing listens (bound, then closed). */
static inline int
lb_closed_port(void)
{
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
  socklen_t al = sizeof a;
  int port = -1;
  if (fd >= 0 && bind(fd, (struct sockaddr *)&a, sizeof a) == 0 &&
      getsockname(fd, (struct sockaddr *)&a, &al) == 0)
    port = ntohs(a.sin_port);
  if (fd >= 0)
    close(fd);
  return port;
}

#endif
