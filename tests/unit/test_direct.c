/* Unit tests: tb_direct, the engine's own stream transport, over real
 * loopback sockets (a server thread, loopback.h) driven by an epoll loop as
 * the engine drives it: set-up rules, the request it writes, chunked and
 * sized responses, kept-alive reuse, a server that closed a kept-alive
 * connection (the request goes once more anew), and broken answers (junk,
 * a body cut short, a refused connection, a body callback that stops),
 * each an end with an error, never a crash; and all of it over IPv6. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>

#include "loopback.h"
#include "net/tb_direct.h"
#include "net/tb_egress.h"
#include "net/tb_rxts.h"

#define SLOTS 3
#define SSE_BODY "data: {\"a\":1}\n\ndata: [DONE]\n\n"

enum mode {
  CHUNKED = 0,
  SIZED_THEN_CLOSE,
  JUNK,
  CUT,
  BIG
};

struct fake {
  enum mode mode;
};

static bool
handler(void *cls, int fd, const struct lb_req *req)
{
  struct fake *f = cls;
  (void)req;
  char buf[512];
  switch (f->mode) {
  case CHUNKED: {
    const char *h = "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
                    "Transfer-Encoding: chunked\r\n\r\n";
    lb_write_all(fd, h, strlen(h));
    const char *parts[] = { "data: {\"a\":1}\n\n", "data: [DONE]\n\n" };
    for (int i = 0; i < 2; i++) {
      int n = snprintf(buf, sizeof buf, "%zx\r\n%s\r\n", strlen(parts[i]), parts[i]);
      lb_write_all(fd, buf, (size_t)n);
    }
    lb_write_all(fd, "0\r\n\r\n", 5);
    return true;
  }
  case SIZED_THEN_CLOSE:
    /* keep-alive by HTTP/1.1's default, but the server drops it right after */
    lb_respond(fd, 200, "text/event-stream", SSE_BODY, false);
    return false;
  case JUNK: {
    const char *j = "SSH-2.0-OpenSSH\r\n\r\n\x01\x02";
    lb_write_all(fd, j, strlen(j));
    return false;
  }
  case CUT: {
    const char *h = "HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\ndata: {";
    lb_write_all(fd, h, strlen(h));
    return false;
  }
  case BIG: {
    /* a body several reads long */
    size_t n = 3 * TB_DIRECT_RBUF_SIZE + 17;
    char *b = malloc(n + 1);
    memset(b, 'z', n);
    b[n] = '\0';
    lb_respond(fd, 200, "text/plain", b, false);
    free(b);
    return true;
  }
  }
  return false;
}

/* What each slot received, as the engine would keep it. */
struct slot_seen {
  char body[4 * TB_DIRECT_RBUF_SIZE];
  size_t len;
  int status;
  bool ended;
  bool has_err;
  char err[160];
  int64_t last_stamp;
};

struct fixture {
  struct lb_server s;
  struct fake f;
  struct tb_direct d;
  struct tb_direct_set set;
  int epfd;
  char *url;
  struct slot_seen seen[SLOTS];
  bool stop_body; /* the body callback says stop */
};

static bool
on_body(void *cls, unsigned slot, int status, int64_t stamp, const char *data, size_t n)
{
  struct fixture *x = cls;
  struct slot_seen *s = &x->seen[slot];
  if (s->len + n < sizeof s->body) {
    memcpy(s->body + s->len, data, n);
    s->len += n;
    s->body[s->len] = '\0';
  }
  s->status = status;
  s->last_stamp = stamp;
  return !x->stop_body;
}

static void
on_end(void *cls, unsigned slot, const char *err)
{
  struct fixture *x = cls;
  struct slot_seen *s = &x->seen[slot];
  assert_false(s->ended); /* one end per request */
  s->ended = true;
  s->has_err = err != NULL;
  snprintf(s->err, sizeof s->err, "%s", err ? err : "");
  tb_direct_release(&x->set, slot); /* as the engine does, from inside end */
}

static int
setup(void **state)
{
  struct fixture *x = calloc(1, sizeof *x);
  if (!lb_start(&x->s, handler, &x->f))
    return -1;
  x->epfd = epoll_create1(EPOLL_CLOEXEC);
  x->url = tb_xasprintf("%s/v1/chat/completions?x=1", x->s.url);
  *state = x;
  return 0;
}

static int
teardown(void **state)
{
  struct fixture *x = *state;
  lb_stop(&x->s);
  close(x->epfd);
  free(x->url);
  free(x);
  return 0;
}

static const char req_body[] = "{\"model\":\"m\",\"stream\":true}";

/* The transport the probe chose: io_uring on this kernel, epoll when
 * TOKBENCH_IO_URING=0 (main runs every test both ways). */
static void
assert_transport(struct fixture *x)
{
  const char *env = getenv("TOKBENCH_IO_URING");
  bool off = env != NULL && strcmp(env, "0") == 0;
  if (off) {
    assert_string_equal(tb_direct_transport(&x->d), "epoll");
    assert_string_equal(tb_direct_uring_why(&x->d), "off by TOKBENCH_IO_URING=0");
  } else if (strcmp(tb_direct_transport(&x->d), "io_uring") != 0) {
    /* a kernel or sandbox that refuses it: say so, the epoll run holds */
    print_message("io_uring refused here: %s\n", tb_direct_uring_why(&x->d));
    assert_true(tb_direct_uring_why(&x->d)[0] != '\0');
  }
}

static void
open_set(struct fixture *x, bool stamps)
{
  assert_true(tb_direct_setup(&x->d, x->url, stamps, false, x->epfd));
  const struct tb_direct_ops ops = { x, on_body, on_end };
  tb_direct_set_init(&x->set, &x->d, SLOTS, "Authorization: Bearer sk-k", req_body,
                     strlen(req_body), &ops);
  assert_transport(x);
}

static void
close_set(struct fixture *x)
{
  tb_direct_set_free(&x->set);
  assert_null(x->set.head);
  tb_direct_free(&x->d);
}

/* Starts every slot and runs the loop until each has ended (5 s at most). */
static void
round_trip(struct fixture *x)
{
  memset(x->seen, 0, sizeof x->seen);
  for (unsigned i = 0; i < SLOTS; i++) {
    if (!tb_direct_start(&x->set, i)) {
      x->seen[i].ended = x->seen[i].has_err = true;
      snprintf(x->seen[i].err, sizeof x->seen[i].err, "%s", x->set.c[i].err);
    }
  }
  int64_t until = tb_time_mono_ns() + 5000000000LL;
  for (;;) {
    bool all = true;
    for (unsigned i = 0; i < SLOTS; i++)
      all = all && x->seen[i].ended;
    if (all)
      return;
    assert_true(tb_time_mono_ns() < until);
    tb_direct_flush(&x->set); /* as the engine's loop does before it waits */
    struct epoll_event ev[8];
    int n = epoll_wait(x->epfd, ev, 8, 100);
    for (int i = 0; i < n; i++) {
      assert_true(ev[i].data.u64 & TB_DIRECT_TAG);
      tb_direct_event(&x->set, ev[i].data.u64, ev[i].events, tb_rxts_offset());
    }
  }
}

static void
test_setup_rules(void **state)
{
  struct fixture *x = *state;
  struct tb_direct d;
  assert_true(tb_direct_setup(&d, x->url, false, false, x->epfd));
  char host[64];
  snprintf(host, sizeof host, "127.0.0.1:%d", x->s.port);
  assert_string_equal(d.host, host);
  assert_string_equal(d.path, "/v1/chat/completions?x=1");
  assert_non_null(d.rbuf);
  tb_direct_free(&d);
  tb_direct_free(&d); /* twice is harmless */

  char *u = tb_xasprintf("https://127.0.0.1:%d/v1/chat/completions", x->s.port);
  assert_false(tb_direct_setup(&d, u, false, false, x->epfd));
  tb_direct_free(&d);
  free(u);
  u = tb_xasprintf("http://user:pw@127.0.0.1:%d/v1/chat/completions", x->s.port);
  assert_false(tb_direct_setup(&d, u, false, false, x->epfd));
  tb_direct_free(&d);
  free(u);
  assert_false(tb_direct_setup(&d, "not a url", false, false, x->epfd));
  tb_direct_free(&d);
  u = tb_xasprintf("http://127.0.0.1:%d/v1", lb_closed_port());
  assert_false(tb_direct_setup(&d, u, false, false, x->epfd));
  assert_null(d.host);
  assert_null(d.path);
  free(u);
  assert_false(tb_direct_setup(&d, x->url, false, true, x->epfd)); /* curl_streams */
  setenv("http_proxy", "http://127.0.0.1:9", 1);
  assert_false(tb_direct_setup(&d, x->url, false, false, x->epfd));
  unsetenv("http_proxy");
  /* the egress policy judges the address libcurl picked */
  char *err = NULL;
  tb_egress_install(tb_egress_new(NULL, NULL, &err));
  assert_false(tb_direct_setup(&d, x->url, false, false, x->epfd));
  /* false: nothing to free (the URL's parts are not kept) */
  assert_null(d.host);
  assert_null(d.path);
  assert_null(d.rbuf);
  tb_egress_install(NULL);
  assert_true(tb_direct_setup(&d, x->url, false, false, x->epfd));
  tb_direct_free(&d);
}

static void
test_chunked_keepalive(void **state)
{
  struct fixture *x = *state;
  x->f.mode = CHUNKED;
  unsigned reqs0 = x->s.requests, reused0 = x->s.requests_reused;
  open_set(x, true);
  round_trip(x);
  for (unsigned i = 0; i < SLOTS; i++) {
    assert_false(x->seen[i].has_err);
    assert_string_equal(x->seen[i].body, SSE_BODY);
    assert_int_equal(x->seen[i].status, 200);
    assert_int_equal(tb_direct_status(&x->set, i), 200);
    assert_true(x->seen[i].last_stamp > 0);
    assert_false(x->set.c[i].reused);
    assert_true(x->set.c[i].idle); /* kept for the next request */
  }
  assert_true(x->set.rx_kernel + x->set.rx_user > 0);
  assert_int_equal(x->s.requests - reqs0, SLOTS);
  assert_int_equal(x->s.requests_reused - reused0, 0);
  /* the request as written */
  char want[128];
  snprintf(want, sizeof want, "POST /v1/chat/completions?x=1 HTTP/1.1\r\nHost: 127.0.0.1:%d\r\n",
           x->s.port);
  assert_true(strncmp(x->s.last_head, want, strlen(want)) == 0);
  char v[64];
  assert_true(lb_header(x->s.last_head, "Authorization", v, sizeof v));
  assert_string_equal(v, "Bearer sk-k");
  assert_true(lb_header(x->s.last_head, "Accept", v, sizeof v));
  assert_string_equal(v, "text/event-stream");
  assert_string_equal(x->s.last_body, req_body);

  /* a second round goes out on the same connections; by io_uring, every
   * slot's request in one submit, each stamped sent then */
  uint64_t submits0 = x->d.uring.submits, sends0 = x->d.uring.sends;
  int64_t t0 = tb_time_mono_ns();
  round_trip(x);
  bool ring = tb_uring_on(&x->d.uring);
  assert_int_equal(x->d.uring.sends - sends0, ring ? SLOTS : 0);
  assert_int_equal(x->d.uring.submits - submits0, ring ? 1 : 0);
  for (unsigned i = 0; i < SLOTS; i++) {
    assert_false(x->seen[i].has_err);
    assert_string_equal(x->seen[i].body, SSE_BODY);
    assert_true(x->set.c[i].reused);
    int64_t sent = tb_direct_sent_at(&x->set, i, t0);
    assert_true(ring ? sent > t0 : sent == t0);
  }
  assert_int_equal(x->s.requests - reqs0, 2 * SLOTS);
  assert_int_equal(x->s.requests_reused - reused0, SLOTS); /* the server agrees */
  close_set(x);
}

static void
test_server_closed_kept_alive(void **state)
{
  struct fixture *x = *state;
  x->f.mode = SIZED_THEN_CLOSE;
  open_set(x, false);
  unsigned reqs0 = x->s.requests, reused0 = x->s.requests_reused;
  round_trip(x);
  for (unsigned i = 0; i < SLOTS; i++) {
    assert_false(x->seen[i].has_err);
    assert_string_equal(x->seen[i].body, SSE_BODY);
  }
  /* let the server's closes arrive, then ask again: each request goes out
   * once more on a new connection and succeeds */
  struct timespec ts = { 0, 100000000 };
  nanosleep(&ts, NULL);
  round_trip(x);
  for (unsigned i = 0; i < SLOTS; i++) {
    assert_false(x->seen[i].has_err);
    assert_string_equal(x->seen[i].body, SSE_BODY);
    assert_false(x->set.c[i].reused); /* went out on a new connection */
  }
  assert_int_equal(x->s.requests - reqs0, 2 * SLOTS);
  assert_int_equal(x->s.requests_reused - reused0, 0);
  close_set(x);
}

static void
test_big_body(void **state)
{
  struct fixture *x = *state;
  x->f.mode = BIG;
  open_set(x, false);
  round_trip(x);
  for (unsigned i = 0; i < SLOTS; i++) {
    assert_false(x->seen[i].has_err);
    assert_int_equal(x->seen[i].len, 3 * TB_DIRECT_RBUF_SIZE + 17);
  }
  close_set(x);
}

static void
test_broken_answers(void **state)
{
  struct fixture *x = *state;
  enum mode modes[] = { JUNK, CUT };
  for (size_t m = 0; m < 2; m++) {
    x->f.mode = modes[m];
    open_set(x, false);
    round_trip(x);
    for (unsigned i = 0; i < SLOTS; i++) {
      assert_true(x->seen[i].has_err);
      assert_true(x->seen[i].err[0] != '\0');
      assert_int_equal(x->set.c[i].fd, -1); /* not kept */
    }
    close_set(x);
  }
  /* the body callback stops the response */
  x->f.mode = CHUNKED;
  x->stop_body = true;
  open_set(x, false);
  round_trip(x);
  for (unsigned i = 0; i < SLOTS; i++) {
    assert_true(x->seen[i].has_err);
    assert_string_equal(x->seen[i].err, "response aborted");
    assert_int_equal(x->set.c[i].fd, -1);
  }
  x->stop_body = false;
  /* stale or foreign events are ignored */
  tb_direct_event(&x->set, TB_DIRECT_TAG | 99, EPOLLIN, 0);
  tb_direct_event(&x->set, TB_DIRECT_TAG | (7ULL << 32) | 0, EPOLLIN, 0);
  close_set(x);
}

static void
test_refused(void **state)
{
  struct fixture *x = *state;
  /* the address was good at set-up; the server is gone when the slots start */
  struct lb_server gone;
  assert_true(lb_start(&gone, handler, &x->f));
  char *url = tb_xasprintf("%s/v1/chat/completions", gone.url);
  assert_true(tb_direct_setup(&x->d, url, false, false, x->epfd));
  lb_stop(&gone);
  const struct tb_direct_ops ops = { x, on_body, on_end };
  tb_direct_set_init(&x->set, &x->d, SLOTS, NULL, req_body, strlen(req_body), &ops);
  assert_transport(x);
  round_trip(x);
  for (unsigned i = 0; i < SLOTS; i++) {
    assert_true(x->seen[i].has_err);
    assert_non_null(strstr(x->seen[i].err, "connect"));
  }
  close_set(x);
  free(url);
}

/* The transport over IPv6: [::1] in the URL, the address libcurl picked
 * kept as AF_INET6, the Host header with the brackets, kernel stamps, and
 * the egress policy judging ::1 as loopback.  A machine without IPv6 on
 * loopback skips it. */
static void
test_ipv6(void **state)
{
  struct fixture *x = *state;
  struct lb_server s6;
  if (!lb_start_on(&s6, handler, &x->f, true)) {
    skip(); /* no ::1 here */
    return;
  }
  x->f.mode = CHUNKED;
  char *url = tb_xasprintf("%s/v1/chat/completions", s6.url);
  char *err = NULL;
  tb_egress_install(tb_egress_new(NULL, NULL, &err)); /* loopback refused */
  assert_false(tb_direct_setup(&x->d, url, true, false, x->epfd));
  tb_egress_install(tb_egress_new("loopback", NULL, &err));
  assert_true(tb_direct_setup(&x->d, url, true, false, x->epfd));
  tb_egress_install(NULL);
  assert_int_equal(x->d.addr.ss_family, AF_INET6);
  char host[64];
  snprintf(host, sizeof host, "[::1]:%d", s6.port);
  assert_string_equal(x->d.host, host);
  const struct tb_direct_ops ops = { x, on_body, on_end };
  tb_direct_set_init(&x->set, &x->d, SLOTS, NULL, req_body, strlen(req_body), &ops);
  assert_transport(x);
  round_trip(x);
  for (unsigned i = 0; i < SLOTS; i++) {
    assert_false(x->seen[i].has_err);
    assert_string_equal(x->seen[i].body, SSE_BODY);
    assert_true(x->seen[i].last_stamp > 0);
  }
  assert_true(x->set.rx_kernel > 0); /* stamped by the kernel */
  char want[128];
  snprintf(want, sizeof want, "POST /v1/chat/completions HTTP/1.1\r\nHost: %s\r\n", host);
  assert_true(strncmp(s6.last_head, want, strlen(want)) == 0);
  close_set(x);
  lb_stop(&s6);
  free(url);
}

int
main(void)
{
  const struct CMUnitTest tests[] = {
    cmocka_unit_test(test_setup_rules),
    cmocka_unit_test(test_chunked_keepalive),
    cmocka_unit_test(test_server_closed_kept_alive),
    cmocka_unit_test(test_big_body),
    cmocka_unit_test(test_broken_answers),
    cmocka_unit_test(test_refused),
    cmocka_unit_test(test_ipv6),
  };
  /* io_uring where the kernel allows it, then the epoll path */
  int failed = cmocka_run_group_tests_name("io_uring", tests, setup, teardown);
  setenv("TOKBENCH_IO_URING", "0", 1);
  failed += cmocka_run_group_tests_name("epoll", tests, setup, teardown);
  return failed;
}
