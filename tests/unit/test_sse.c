/* Unit tests for tb_sse: events across reads, CRLF/CR, comments, caps. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "net/tb_sse.h"

struct rec {
  char ev[16][128];
  int n;
  int comments;
  int stop_after;
};

static bool
on_ev(void *cls, const char *d, size_t len)
{
  struct rec *r = cls;
  if (r->n < 16)
    snprintf(r->ev[r->n], sizeof r->ev[0], "%.*s", (int)len, d);
  r->n++;
  return r->stop_after == 0 || r->n < r->stop_after;
}

static void
on_comment(void *cls, const char *t, size_t len)
{
  struct rec *r = cls;
  r->comments++;
}

static void
feed_all(struct tb_sse *p, const char *s, size_t step)
{
  size_t n = strlen(s);
  for (size_t i = 0; i < n; i += step) {
    size_t k = n - i < step ? n - i : step;
    assert_int_equal(tb_sse_feed(p, s + i, k), TB_SSE_OK);
  }
}

static void
test_basic(void **state)
{
  const char *s = ": stamp 123\ndata: {\"a\":1}\n\ndata: [DONE]\n\n";
  for (size_t step = 1; step <= strlen(s); step++) {
    struct rec r = { 0 };
    struct tb_sse p;
    tb_sse_init(&p, on_ev, on_comment, &r);
    feed_all(&p, s, step);
    assert_int_equal(r.n, 2);
    assert_string_equal(r.ev[0], "{\"a\":1}");
    assert_string_equal(r.ev[1], "[DONE]");
    assert_int_equal(r.comments, 1);
    assert_true(tb_sse_idle(&p));
    tb_sse_free(&p);
  }
}

static void
test_line_endings(void **state)
{
  const char *s = "data: a\r\n\r\ndata: b\r\rdata:c\n\nevent: x\nid: 3\ndata: d\ndata: e\n\n";
  for (size_t step = 1; step <= 4; step++) {
    struct rec r = { 0 };
    struct tb_sse p;
    tb_sse_init(&p, on_ev, NULL, &r);
    feed_all(&p, s, step);
    assert_int_equal(r.n, 4);
    assert_string_equal(r.ev[0], "a");
    assert_string_equal(r.ev[1], "b");
    assert_string_equal(r.ev[2], "c");
    assert_string_equal(r.ev[3], "d\ne");
    tb_sse_free(&p);
  }
}

static void
test_partial_not_idle(void **state)
{
  struct rec r = { 0 };
  struct tb_sse p;
  tb_sse_init(&p, on_ev, NULL, &r);
  assert_int_equal(tb_sse_feed(&p, "data: {\"x\"", 10), TB_SSE_OK);
  assert_false(tb_sse_idle(&p));
  assert_int_equal(r.n, 0);
  assert_int_equal(tb_sse_feed(&p, "}\n", 2), TB_SSE_OK);
  assert_false(tb_sse_idle(&p)); /* event not ended by a blank line yet */
  assert_int_equal(tb_sse_feed(&p, "\n", 1), TB_SSE_OK);
  assert_int_equal(r.n, 1);
  assert_true(tb_sse_idle(&p));
  tb_sse_free(&p);
}

static void
test_caps(void **state)
{
  struct rec r = { 0 };
  struct tb_sse p;
  tb_sse_init(&p, on_ev, NULL, &r);
  size_t big = TB_SSE_LINE_MAX + 10;
  char *b = malloc(big);
  memset(b, 'x', big);
  memcpy(b, "data: ", 6);
  assert_int_equal(tb_sse_feed(&p, b, big), TB_SSE_TOO_LONG);
  assert_int_equal(tb_sse_feed(&p, "\n\n", 2), TB_SSE_TOO_LONG); /* sticky */
  tb_sse_free(&p);
  /* many lines of one event over the event cap */
  tb_sse_init(&p, on_ev, NULL, &r);
  size_t line = 200000;
  char *l = malloc(line + 1);
  memset(l, 'y', line);
  memcpy(l, "data: ", 6);
  l[line - 1] = '\n';
  enum tb_sse_status st = TB_SSE_OK;
  for (int i = 0; i < 8 && st == TB_SSE_OK; i++)
    st = tb_sse_feed(&p, l, line);
  assert_int_equal(st, TB_SSE_TOO_LONG);
  tb_sse_free(&p);
  free(l);
  free(b);
}

static void
test_stop(void **state)
{
  struct rec r = { .stop_after = 1 };
  struct tb_sse p;
  tb_sse_init(&p, on_ev, NULL, &r);
  assert_int_equal(tb_sse_feed(&p, "data: 1\n\ndata: 2\n\n", 18), TB_SSE_STOPPED);
  assert_int_equal(r.n, 1);
  tb_sse_free(&p);
}

/* Parsers sharing a budget: the buffers of all count; over it the feed is
 * TB_SSE_OVER_BUDGET (sticky), below the caps; freeing gives room back. */
static void
test_budget(void **state)
{
  struct rec r = { 0 };
  struct tb_sse_budget b = { .max = 64 * 1024 };
  struct tb_sse p[4];
  char *chunk = malloc(20000);
  memset(chunk, 'x', 20000);
  memcpy(chunk, "data: ", 6);
  enum tb_sse_status st[4];
  for (int i = 0; i < 4; i++) {
    tb_sse_init(&p[i], on_ev, NULL, &r);
    tb_sse_set_budget(&p[i], &b);
    /* a line cut by the read: copied, 32 KiB of buffer each */
    st[i] = tb_sse_feed(&p[i], chunk, 20000);
  }
  assert_int_equal(st[0], TB_SSE_OK);
  assert_int_equal(st[1], TB_SSE_OK);
  assert_int_equal(st[2], TB_SSE_OVER_BUDGET); /* 3 x 32 KiB > 64 KiB */
  assert_true(b.used <= b.max);
  assert_int_equal(tb_sse_feed(&p[2], "\n\n", 2), TB_SSE_OVER_BUDGET); /* sticky */
  /* one parser alone stays under its own caps, not the budget's */
  tb_sse_free(&p[0]);
  tb_sse_free(&p[1]);
  size_t held = b.used;
  tb_sse_init(&p[0], on_ev, NULL, &r);
  tb_sse_set_budget(&p[0], &b);
  assert_int_equal(tb_sse_feed(&p[0], chunk, 20000), TB_SSE_OK);
  assert_int_equal(tb_sse_feed(&p[0], "\n\n", 2), TB_SSE_OK);
  assert_int_equal(r.n, 1);
  for (int i = 0; i < 4; i++)
    tb_sse_free(&p[i]);
  assert_true(held <= b.max);
  assert_int_equal(b.used, 0);
  /* without a budget, the same feeds pass */
  for (int i = 0; i < 4; i++) {
    tb_sse_init(&p[i], on_ev, NULL, &r);
    assert_int_equal(tb_sse_feed(&p[i], chunk, 20000), TB_SSE_OK);
  }
  for (int i = 0; i < 4; i++)
    tb_sse_free(&p[i]);
  free(chunk);
}

int
main(void)
{
  const struct CMUnitTest tests[] = {
    cmocka_unit_test(test_basic),
    cmocka_unit_test(test_line_endings),
    cmocka_unit_test(test_partial_not_idle),
    cmocka_unit_test(test_caps),
    cmocka_unit_test(test_stop),
    cmocka_unit_test(test_budget),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
