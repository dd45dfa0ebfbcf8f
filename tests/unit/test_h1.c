/* Unit tests: tb_h1 (HTTP/1.1 responses: framing, chunked bodies, splits,
 * keep-alive, caps and malformed input). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "net/tb_h1.h"

struct sink {
  char buf[4096];
  size_t len;
  int calls;
  int stop_after; /* 0: never */
};

static bool
on_body(void *cls, const char *d, size_t n)
{
  struct sink *s = cls;
  assert_true(s->len + n < sizeof s->buf);
  memcpy(s->buf + s->len, d, n);
  s->len += n;
  s->buf[s->len] = '\0';
  s->calls++;
  return s->stop_after == 0 || s->calls < s->stop_after;
}

/* Feeds `in` in pieces of `step` bytes; returns the final status and the
 * bytes that belonged to the response. */
static enum tb_h1_status
feed_split(struct tb_h1 *p, const char *in, size_t step, struct sink *s, size_t *consumed)
{
  size_t n = strlen(in), off = 0;
  enum tb_h1_status st = TB_H1_MORE;
  while (off < n) {
    size_t k = n - off < step ? n - off : step;
    size_t used;
    st = tb_h1_feed(p, in + off, k, &used, on_body, s);
    off += used;
    if (st != TB_H1_MORE)
      break;
  }
  *consumed = off;
  return st;
}

static const char CHUNKED[] = "HTTP/1.1 200 OK\r\n"
                              "Content-Type: text/event-stream\r\n"
                              "Transfer-Encoding: chunked\r\n"
                              "\r\n"
                              "d\r\ndata: hello\n\n\r\n"
                              "C;ext=1\r\ndata: 2345\n\n\r\n"
                              "0\r\n"
                              "X-Trailer: yes\r\n"
                              "\r\n";

static void
test_chunked_any_split(void **state)
{
  (void)state;
  for (size_t step = 1; step <= sizeof CHUNKED; step++) {
    struct tb_h1 p;
    struct sink s = { 0 };
    tb_h1_init(&p);
    size_t used;
    assert_int_equal(feed_split(&p, CHUNKED, step, &s, &used), TB_H1_DONE);
    assert_int_equal(used, strlen(CHUNKED));
    assert_string_equal(s.buf, "data: hello\n\ndata: 2345\n\n");
    assert_int_equal(p.status, 200);
    assert_true(tb_h1_keep_alive(&p));
  }
}

/* The next response's bytes are not taken; the parser restarts for it. */
static void
test_two_responses_in_one_read(void **state)
{
  (void)state;
  char two[512];
  snprintf(two, sizeof two, "%s%s", CHUNKED,
           "HTTP/1.1 500 Internal Server Error\r\nContent-Length: 5\r\n"
           "Connection: close\r\n\r\noops!");
  struct tb_h1 p;
  struct sink s = { 0 };
  tb_h1_init(&p);
  size_t used;
  assert_int_equal(tb_h1_feed(&p, two, strlen(two), &used, on_body, &s), TB_H1_DONE);
  assert_int_equal(used, strlen(CHUNKED));
  tb_h1_init(&p);
  s.len = 0;
  size_t rest = strlen(two) - used;
  assert_int_equal(tb_h1_feed(&p, two + used, rest, &used, on_body, &s), TB_H1_DONE);
  assert_int_equal(used, rest);
  assert_int_equal(p.status, 500);
  assert_string_equal(s.buf, "oops!");
  assert_false(tb_h1_keep_alive(&p));
}

static void
test_interim_and_lengths(void **state)
{
  (void)state;
  struct tb_h1 p;
  struct sink s = { 0 };
  size_t used;
  const char *r = "HTTP/1.1 100 Continue\r\n\r\n"
                  "HTTP/1.1 401 Unauthorized\r\ncontent-length: 3\r\n\r\nno!";
  tb_h1_init(&p);
  assert_int_equal(feed_split(&p, r, 7, &s, &used), TB_H1_DONE);
  assert_int_equal(p.status, 401);
  assert_string_equal(s.buf, "no!");
  assert_true(tb_h1_keep_alive(&p));
  /* no body */
  tb_h1_init(&p);
  r = "HTTP/1.1 204 No Content\r\n\r\n";
  assert_int_equal(feed_split(&p, r, 100, &s, &used), TB_H1_DONE);
  tb_h1_init(&p);
  r = "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n";
  assert_int_equal(feed_split(&p, r, 100, &s, &used), TB_H1_DONE);
  /* LF-only line ends */
  tb_h1_init(&p);
  s.len = 0;
  r = "HTTP/1.1 200 OK\nTransfer-Encoding: chunked\n\n3\nabc\n0\n\n";
  assert_int_equal(feed_split(&p, r, 3, &s, &used), TB_H1_DONE);
  assert_string_equal(s.buf, "abc");
}

/* A body without length ends with the connection; a cut one is an error. */
static void
test_eof(void **state)
{
  (void)state;
  struct tb_h1 p;
  struct sink s = { 0 };
  size_t used;
  tb_h1_init(&p);
  const char *r = "HTTP/1.0 200 OK\r\n\r\ndata: x\n\n";
  assert_int_equal(feed_split(&p, r, 5, &s, &used), TB_H1_MORE);
  assert_int_equal(tb_h1_eof(&p), TB_H1_DONE);
  assert_false(tb_h1_keep_alive(&p));
  assert_string_equal(s.buf, "data: x\n\n");

  tb_h1_init(&p);
  r = "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nab";
  assert_int_equal(feed_split(&p, r, 64, &s, &used), TB_H1_MORE);
  assert_int_equal(tb_h1_eof(&p), TB_H1_ERROR);
  assert_non_null(strstr(p.reason, "before the response ended"));

  tb_h1_init(&p);
  assert_int_equal(tb_h1_eof(&p), TB_H1_ERROR);
  assert_non_null(strstr(p.reason, "before a response"));

  tb_h1_init(&p);
  r = "HTTP/1.1 200 OK\r\nContent-Le";
  assert_int_equal(feed_split(&p, r, 64, &s, &used), TB_H1_MORE);
  assert_int_equal(tb_h1_eof(&p), TB_H1_ERROR);
  assert_non_null(strstr(p.reason, "head"));
}

static void
test_stop(void **state)
{
  (void)state;
  struct tb_h1 p;
  struct sink s = { .stop_after = 1 };
  size_t used;
  tb_h1_init(&p);
  assert_int_equal(feed_split(&p, CHUNKED, 1000, &s, &used), TB_H1_STOPPED);
  assert_string_equal(s.buf, "data: hello\n\n");
}

static void
expect_error(const char *in, const char *why)
{
  struct tb_h1 p;
  struct sink s = { 0 };
  size_t used;
  tb_h1_init(&p);
  enum tb_h1_status st = feed_split(&p, in, 4096, &s, &used);
  assert_int_equal(st, TB_H1_ERROR);
  if (strstr(p.reason, why) == NULL)
    fail_msg("reason '%s' lacks '%s'", p.reason, why);
  /* sticky */
  assert_int_equal(tb_h1_feed(&p, "x", 1, &used, on_body, &s), TB_H1_ERROR);
}

static void
test_malformed(void **state)
{
  (void)state;
  expect_error("SSH-2.0-OpenSSH\r\n", "not an HTTP");
  expect_error("HTTP/2 200\r\n\r\n", "not an HTTP");
  expect_error("HTTP/1.1 2x0 OK\r\n", "status code");
  expect_error("HTTP/1.1 099 Low\r\n", "status code");
  expect_error("HTTP/1.1 101 Switching\r\n\r\n", "protocol switch");
  expect_error("HTTP/1.1 200 OK\r\nNoColon\r\n", "header line");
  expect_error("HTTP/1.1 200 OK\r\nBad Name: x\r\n", "header name");
  expect_error("HTTP/1.1 200 OK\r\nContent-Length: -1\r\n", "Content-Length");
  expect_error("HTTP/1.1 200 OK\r\nContent-Length: 1\r\nContent-Length: 2\r\n", "conflicting");
  expect_error("HTTP/1.1 200 OK\r\nContent-Length: 99999999999999999999\r\n", "Content-Length");
  expect_error("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n", "chunk size");
  expect_error("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
               "fffffffffffffffff\r\n",
               "chunk size over");
  expect_error("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nabc\r\n",
               "longer than its size");
  expect_error("HTTP/1.1 200 OK\r\nX: a\r\n b\r\n", "folding");
}

static void
test_caps(void **state)
{
  (void)state;
  /* one header line over the line cap */
  size_t n = TB_H1_LINE_MAX + 64;
  char *big = malloc(n + 64);
  assert_non_null(big);
  int k = snprintf(big, n, "HTTP/1.1 200 OK\r\nX-Big: ");
  memset(big + k, 'a', n - (size_t)k - 1);
  big[n - 1] = '\0';
  expect_error(big, "line over");
  /* many short header lines over the head cap */
  size_t hn = TB_H1_HEAD_MAX + 1024;
  char *head = malloc(hn + 64);
  assert_non_null(head);
  size_t off = (size_t)snprintf(head, hn, "HTTP/1.1 200 OK\r\n");
  while (off + 12 < hn)
    off += (size_t)snprintf(head + off, hn - off, "X-A: 12345\r\n");
  expect_error(head, "head over");
  free(big);
  free(head);
}

int
main(void)
{
  const struct CMUnitTest tests[] = {
    cmocka_unit_test(test_chunked_any_split),
    cmocka_unit_test(test_two_responses_in_one_read),
    cmocka_unit_test(test_interim_and_lengths),
    cmocka_unit_test(test_eof),
    cmocka_unit_test(test_stop),
    cmocka_unit_test(test_malformed),
    cmocka_unit_test(test_caps),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
