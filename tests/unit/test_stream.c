/* Unit tests: tb_stream, the one consumer of a streamed completion, fed
 * plain byte buffers and made-up stamps (no socket, no clock): a stream
 * with continuous usage cut at every byte boundary (LF and CRLF) and byte
 * by byte, each event stamped by the read that completed it; counting by
 * chunks, reasoning content, comments and keep-alives; HTTP error bodies,
 * errors in the stream, malformed chunks, usage going backwards; the caps
 * and the cell's shared memory budget; first-token and stall deadlines;
 * every end rule, with the matrix's and the rate cells' texts; the window,
 * the gaps and a request's figures; and the drain wait against a loopback
 * /metrics. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "loopback.h"
#include "engine/tb_stream.h"

#define ROLE                                                                         \
  "data: {\"id\":\"c\",\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\"," \
  "\"content\":\"\"},\"finish_reason\":null}],\"usage\":{\"prompt_tokens\":10,"      \
  "\"completion_tokens\":0,\"total_tokens\":10}}\n\n"
#define TOK(n, fin)                                                              \
  "data: {\"id\":\"c\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"w\"}," \
  "\"finish_reason\":" fin "}],\"usage\":{\"prompt_tokens\":10,"                 \
  "\"completion_tokens\":" #n ",\"total_tokens\":1" #n "}}\n\n"
#define USAGE                                                           \
  "data: {\"id\":\"c\",\"choices\":[],\"usage\":{\"prompt_tokens\":10," \
  "\"completion_tokens\":3,\"total_tokens\":13}}\n\n"
#define DONE "data: [DONE]\n\n"
/* vLLM with continuous usage stats: role, three tokens, usage, [DONE] */
#define STREAM ROLE TOK(1, "null") TOK(2, "null") TOK(3, "\"length\"") USAGE DONE
/* no usage: chunks are counted */
#define CHUNK(t) "data: {\"choices\":[{\"delta\":{\"content\":\"" t "\"}}]}\n\n"

/* What the callbacks saw. */
struct seen {
  int events, comments;
  int64_t tokens, first_at;
  unsigned in_window;
  char comment[64];
  bool refuse; /* event() fails the stream */
};

static bool
on_event(void *cls, struct tb_stream *s, const char *data, size_t len, int64_t delta)
{
  struct seen *v = cls;
  (void)data;
  (void)len;
  (void)delta;
  v->events++;
  if (v->refuse) {
    tb_stream_fail(s, "answer over %d bytes", 4);
    return false;
  }
  return true;
}

static void
on_tokens(void *cls, struct tb_stream *s, int64_t delta, unsigned flags)
{
  struct seen *v = cls;
  v->tokens += delta;
  if (flags & TB_STREAM_FIRST)
    v->first_at = s->now;
  if (flags & TB_STREAM_IN_WINDOW)
    v->in_window += (unsigned)delta;
}

static void
on_comment(void *cls, struct tb_stream *s, const char *text, size_t len)
{
  struct seen *v = cls;
  (void)s;
  v->comments++;
  snprintf(v->comment, sizeof v->comment, "%.*s", (int)len, text);
}

static const struct tb_stream_ops ops = { on_event, on_tokens, on_comment };
static const struct tb_stream_ops no_comments = { on_event, on_tokens, NULL };

/* A cell and one stream of it, and what its callbacks saw. */
struct fx {
  struct tb_stream_cell c;
  struct seen v;
  struct tb_stream s;
};

/* f's stream, started at t_start (the cell's settings may change after). */
static struct tb_stream *
fx_open(struct fx *f, enum tb_stream_kind kind, int64_t t_start)
{
  memset(f, 0, sizeof *f);
  f->c.kind = kind;
  f->c.mem.max = 1u << 20;
  f->c.ops = &ops;
  tb_stream_init(&f->s, &f->c, &f->v, t_start);
  return &f->s;
}

/* f's stream again, anew, in the same cell. */
static struct tb_stream *
fx_again(struct fx *f, int64_t t_start)
{
  tb_stream_free(&f->s);
  memset(&f->v, 0, sizeof f->v);
  tb_stream_init(&f->s, &f->c, &f->v, t_start);
  return &f->s;
}

/* Feeds text as one read at stamp. */
static bool
feed(struct tb_stream *s, int64_t stamp, const char *text)
{
  return tb_stream_body(s, 200, stamp, text, strlen(text));
}

static const struct tb_stream_expect want_usage = { .usage = true, .max_tokens = 3 };

/* The whole stream in one read: counts, usage, samples, a clean end. */
static void
test_one_read(void **state)
{
  (void)state;
  struct fx f;
  struct tb_stream *s = fx_open(&f, TB_STREAM_MATRIX, 100);
  assert_true(feed(s, 500, STREAM));
  assert_int_equal(f.v.events, 5); /* role, 3 tokens, usage; not [DONE] */
  assert_int_equal(f.v.tokens, 3);
  assert_int_equal(s->tokens, 3);
  assert_int_equal(s->t_first, 500);
  assert_int_equal(s->t_last, 500);
  assert_int_equal(s->t_byte, 500);
  assert_int_equal(s->count.prompt_tokens, 10);
  assert_true(s->count.saw_final_usage && s->count.done);
  assert_true(tb_stream_end(s, 0, NULL, &want_usage));
  assert_int_equal(s->end_rule, TB_STREAM_END_NONE);
  assert_int_equal(tb_stream_got(s), 3);
  assert_true(f.c.mem.used > 0);
  tb_stream_free(s);
  assert_int_equal(f.c.mem.used, 0); /* given back */
}

/* Where the event that brings the first (last) token ends in text. */
static size_t
event_end(const char *text, const char *event)
{
  return (size_t)(strstr(text, event) - text) + strlen(event);
}

/* text cut in two at every byte: the same count and usage, and each
 * token stamped by the read that completed its event (with CRLF, the CR
 * that ends its blank line completes it: tail 1). */
static void
split_everywhere(const char *text, const char *first, const char *last, size_t tail)
{
  size_t len = strlen(text), e1 = event_end(text, first) - tail;
  size_t e3 = event_end(text, last) - tail;
  for (size_t k = 0; k <= len; k++) {
    struct fx f;
    struct tb_stream *s = fx_open(&f, TB_STREAM_RATE, 1);
    if (k > 0)
      assert_true(tb_stream_body(s, 200, 1000, text, k));
    if (k < len)
      assert_true(tb_stream_body(s, 200, 2000, text + k, len - k));
    assert_int_equal(s->tokens, 3);
    assert_int_equal(s->t_first, k >= e1 ? 1000 : 2000);
    assert_int_equal(s->t_last, k >= e3 ? 1000 : 2000);
    assert_true(tb_stream_end(s, 0, NULL, &want_usage));
    tb_stream_free(s);
  }
}

static void
test_split_every_boundary(void **state)
{
  (void)state;
  split_everywhere(STREAM, TOK(1, "null"), TOK(3, "\"length\""), 0);
  /* CRLF line ends: a cut between CR and LF too */
  char crlf[4096] = "", first[1024] = "", last[1024] = "";
  const char *src[] = { STREAM, TOK(1, "null"), TOK(3, "\"length\"") };
  char *dst[] = { crlf, first, last };
  const size_t cap[] = { sizeof crlf, sizeof first, sizeof last };
  for (int i = 0; i < 3; i++) {
    size_t o = 0;
    for (const char *p = src[i]; *p && o + 3 < cap[i]; p++) {
      if (*p == '\n')
        dst[i][o++] = '\r';
      dst[i][o++] = *p;
    }
    dst[i][o] = '\0';
  }
  split_everywhere(crlf, first, last, 1);
}

/* Byte by byte, each its own read: the stamp is the completing byte's. */
static void
test_byte_by_byte(void **state)
{
  (void)state;
  struct fx f;
  struct tb_stream *s = fx_open(&f, TB_STREAM_MATRIX, 1);
  const char *text = STREAM;
  for (size_t i = 0; text[i]; i++)
    assert_true(tb_stream_body(s, 200, (int64_t)i + 1, text + i, 1));
  assert_int_equal(s->t_first, (int64_t)event_end(text, TOK(1, "null")));
  assert_int_equal(s->t_last, (int64_t)event_end(text, TOK(3, "\"length\"")));
  assert_int_equal(s->max_gap, s->t_last - (int64_t)event_end(text, TOK(2, "null")));
  assert_int_equal(f.v.first_at, s->t_first);
  assert_true(tb_stream_end(s, 0, NULL, &want_usage));
  tb_stream_free(s);
}

/* No usage: chunks counted (content and reasoning alike), flagged; a
 * chunk stream is early only below max_tokens / 8. */
static void
test_chunks_and_reasoning(void **state)
{
  (void)state;
  struct fx f;
  struct tb_stream *s = fx_open(&f, TB_STREAM_MATRIX, 1);
  assert_true(feed(s, 10,
                   "data: {\"choices\":[{\"delta\":{\"reasoning_content\":\"hm\"}}]}\n\n"
                   "data: {\"choices\":[{\"delta\":{\"reasoning\":\"m\",\"content\":null}}]}\n\n"));
  assert_true(feed(s, 20, CHUNK("a") CHUNK("b") DONE));
  assert_true(s->count.chunk_mode);
  assert_int_equal(s->tokens, 4);
  assert_int_equal(s->t_first, 10);
  struct tb_stream_expect x = { .max_tokens = 32 }; /* 4 chunks x 8 = 32: not early */
  assert_true(tb_stream_end(s, 0, NULL, &x));
  tb_stream_free(s);

  s = fx_again(&f, 1);
  assert_true(feed(s, 10, CHUNK("a") CHUNK("b") CHUNK("c") DONE));
  assert_false(tb_stream_end(s, 0, NULL, &x));
  assert_int_equal(s->end_rule, TB_STREAM_END_EARLY);
  assert_string_equal(s->reason, "the server ended a stream early: asked 32 tokens, got 3 chunks "
                                 "(it ignores max_tokens or ignore_eos)");
  tb_stream_free(s);
}

/* Comments and keep-alives go to comment() (or nowhere), counting aside. */
static void
test_comments(void **state)
{
  (void)state;
  struct fx f;
  struct tb_stream *s = fx_open(&f, TB_STREAM_MATRIX, 1);
  assert_true(feed(s, 5, ": keep-alive\n\n: t=123\n" TOK(1, "null") ":\n"));
  assert_int_equal(f.v.comments, 3);
  assert_string_equal(f.v.comment, "");
  assert_int_equal(s->tokens, 1);
  tb_stream_free(s);
  f.c.ops = &no_comments;
  s = fx_again(&f, 1);
  assert_true(feed(s, 5, ": t=123\n" TOK(1, "null")));
  assert_int_equal(f.v.comments, 0);
  assert_int_equal(s->tokens, 1);
  tb_stream_free(s);
}

/* A status other than 200: the body is kept, not parsed; the reason
 * carries its start where the owner allows it, 200 bytes (matrix) or 120
 * (rate). */
static void
test_error_body(void **state)
{
  (void)state;
  char body[600];
  memset(body, 'x', sizeof body - 1);
  body[sizeof body - 1] = '\0';
  memcpy(body, "data: {\"error\":", 15);
  const enum tb_stream_kind kinds[] = { TB_STREAM_MATRIX, TB_STREAM_RATE };
  for (int i = 0; i < 2; i++) {
    for (int bodies = 0; bodies < 2; bodies++) {
      struct fx f;
      struct tb_stream *s = fx_open(&f, kinds[i], 1);
      f.c.error_bodies = bodies;
      assert_true(tb_stream_body(s, 503, 7, body, 20));
      assert_true(tb_stream_body(s, 200, 8, body + 20, strlen(body) - 20)); /* first status stays */
      assert_int_equal(s->http_status, 503);
      assert_int_equal(f.v.events, 0);
      assert_false(tb_stream_end(s, 0, NULL, &want_usage));
      assert_int_equal(s->end_rule, TB_STREAM_END_HTTP);
      if (!bodies) {
        assert_string_equal(s->reason, "HTTP 503");
      } else {
        /* the matrix's 200 bytes and the head, cut with the reason at 199 */
        size_t shown = kinds[i] == TB_STREAM_RATE ? 120 : 199 - 10;
        assert_int_equal(strlen(s->reason), strlen("HTTP 503: ") + shown);
        assert_memory_equal(s->reason, "HTTP 503: ", 10);
        assert_memory_equal(s->reason + 10, body, shown);
      }
      tb_stream_free(s);
    }
  }
}

/* No body byte: the status the transport gives decides; 200 with nothing
 * is a stream cut before [DONE]. */
static void
test_status_without_body(void **state)
{
  (void)state;
  struct fx f;
  struct tb_stream *s = fx_open(&f, TB_STREAM_MATRIX, 1);
  assert_false(tb_stream_end(s, 401, NULL, &want_usage));
  assert_string_equal(s->reason, "HTTP 401");
  tb_stream_free(s);
  s = fx_again(&f, 1);
  assert_false(tb_stream_end(s, 200, NULL, &want_usage));
  assert_string_equal(s->reason, "stream ended before [DONE] (cut)");
  assert_int_equal(s->end_rule, TB_STREAM_END_CUT);
  tb_stream_free(s);
}

/* Faults inside the stream: the first reason stays, reading stops, the
 * end says so (rule NONE: it failed before its end). */
static void
test_faults_in_stream(void **state)
{
  (void)state;
  static const struct {
    const char *text, *reason;
  } cases[] = {
    { "data: {\"error\":{\"message\":\"boom\",\"code\":500}}\n\n", "error in stream: boom" },
    { "data: not json\n\n", "malformed chunk: not json" },
    { TOK(2, "null") TOK(1, "null"), "usage.completion_tokens went backwards (1 after 2)" },
  };
  for (size_t i = 0; i < TB_ARRAY_LEN(cases); i++) {
    struct fx f;
    struct tb_stream *s = fx_open(&f, TB_STREAM_MATRIX, 1);
    assert_false(feed(s, 3, cases[i].text));
    assert_true(s->failed);
    assert_string_equal(s->reason, cases[i].reason);
    assert_false(tb_stream_end(s, 0, "connection reset", &want_usage));
    assert_int_equal(s->end_rule, TB_STREAM_END_NONE);
    assert_string_equal(s->reason, cases[i].reason);
    tb_stream_free(s);
  }
}

/* The owner's event() refuses (a conversation's answer over its cap): the
 * event's tokens are not counted. */
static void
test_event_refused(void **state)
{
  (void)state;
  struct fx f;
  struct tb_stream *s = fx_open(&f, TB_STREAM_RATE, 1);
  f.v.refuse = true;
  assert_false(feed(s, 3, TOK(1, "null") TOK(2, "null")));
  assert_int_equal(f.v.events, 1);
  assert_int_equal(s->tokens, 0);
  assert_string_equal(s->reason, "answer over 4 bytes");
  tb_stream_free(s);
}

/* A line over TB_SSE_LINE_MAX; the cell's budget shared by two streams,
 * with each kind's text. */
static void
test_caps_and_budget(void **state)
{
  (void)state;
  struct fx f;
  struct tb_stream *s = fx_open(&f, TB_STREAM_MATRIX, 1), t;
  char *big = malloc(TB_SSE_LINE_MAX + 2);
  memset(big, 'a', TB_SSE_LINE_MAX + 1);
  big[TB_SSE_LINE_MAX + 1] = '\0';
  assert_false(feed(s, 1, big));
  assert_string_equal(s->reason, "SSE line or event over its cap");
  tb_stream_free(s);
  free(big);

  const enum tb_stream_kind kinds[] = { TB_STREAM_MATRIX, TB_STREAM_RATE };
  const char *texts[] = {
    "the endpoint's SSE lines and events (all streams of the cell) went over the cell's "
    "memory budget of 2 KiB",
    "the cell's SSE buffers went over its memory budget of 2 KiB",
  };
  for (int i = 0; i < 2; i++) {
    s = fx_open(&f, kinds[i], 1);
    f.c.mem.max = 2048;
    tb_stream_init(&t, &f.c, &f.v, 1);
    char part[1100];
    memset(part, 'b', sizeof part - 1);
    part[sizeof part - 1] = '\0';
    assert_true(feed(s, 1, "data: ") && feed(s, 2, part)); /* a line cut by reads */
    assert_true(f.c.mem.used > 1024 && f.c.mem.used <= 2048);
    assert_false(feed(&t, 3, part)); /* the other stream: no room left */
    assert_string_equal(t.reason, texts[i]);
    assert_false(s->failed);
    tb_stream_free(&t);
    tb_stream_free(s);
    assert_int_equal(f.c.mem.used, 0);
  }
}

/* The first token and stall deadlines, in each kind's words. */
static void
test_overdue(void **state)
{
  (void)state;
  const int64_t s1 = 1000000000;
  char why[80];
  struct fx f;
  struct tb_stream *s = fx_open(&f, TB_STREAM_MATRIX, 10 * s1);
  assert_false(tb_stream_overdue(s, 12 * s1, 2.0, 0.5, why, sizeof why)); /* exactly 2 s */
  assert_true(tb_stream_overdue(s, 12 * s1 + 1, 2.0, 0.5, why, sizeof why));
  assert_string_equal(why, "no first token after 2.0 s");
  assert_true(feed(s, 11 * s1, ROLE)); /* bytes, no token: still the first-token rule */
  assert_true(tb_stream_overdue(s, 12 * s1 + 1, 2.0, 0.5, why, sizeof why));
  assert_true(feed(s, 12 * s1, TOK(1, "null")));
  assert_false(tb_stream_overdue(s, 12 * s1 + s1 / 2, 2.0, 0.5, why, sizeof why));
  assert_true(tb_stream_overdue(s, 12 * s1 + s1 / 2 + 1, 2.0, 0.5, why, sizeof why));
  assert_string_equal(why, "stream stalled: no data for 0.5 s");
  assert_true(feed(s, 13 * s1, ": keep-alive\n")); /* any byte resets the stall */
  assert_false(tb_stream_overdue(s, 13 * s1 + s1 / 4, 2.0, 0.5, why, sizeof why));
  f.c.kind = TB_STREAM_RATE;
  assert_true(tb_stream_overdue(s, 14 * s1, 2.0, 0.5, why, sizeof why));
  assert_string_equal(why, "stream stalled: no token for 0.5 s");
  tb_stream_free(s);
}

/* One end rule after another, in order, and a transport error first. */
static void
test_end_rules(void **state)
{
  (void)state;
  static const struct {
    const char *text, *err;
    struct tb_stream_expect x;
    enum tb_stream_end_rule rule;
    const char *reason;
  } cases[] = {
    { STREAM,
      "Connection reset by peer",
      { 0 },
      TB_STREAM_END_TRANSPORT,
      "Connection reset by peer" },
    { ROLE "data: {\"choi", NULL, { 0 }, TB_STREAM_END_SSE, "stream ended inside an SSE event" },
    { ROLE TOK(1, "null"), NULL, { 0 }, TB_STREAM_END_CUT, "stream ended before [DONE] (cut)" },
    { ROLE TOK(1, "null") TOK(2, "\"length\"") DONE,
      NULL,
      { .usage = true },
      TB_STREAM_END_USAGE,
      "stream ended without its usage chunk" },
    { ROLE TOK(1, "null") TOK(2, "\"length\"") DONE,
      NULL,
      { .max_tokens = 2 },
      TB_STREAM_END_NONE,
      NULL },
    { STREAM,
      NULL,
      { .usage = true, .max_tokens = 4 },
      TB_STREAM_END_EARLY,
      "the server ended a stream early: asked 4 tokens, got 3 (it ignores max_tokens or "
      "ignore_eos)" },
    { ROLE DONE,
      NULL,
      { .max_tokens = 4 },
      TB_STREAM_END_EARLY,
      "the server ended a stream early: asked 4 tokens, got 0 (it ignores max_tokens or "
      "ignore_eos)" },
    { ROLE DONE, NULL, { .token = true }, TB_STREAM_END_NO_TOKEN, "no output token" },
    { STREAM, NULL, { .usage = true, .max_tokens = 3, .token = true }, TB_STREAM_END_NONE, NULL },
  };
  for (size_t i = 0; i < TB_ARRAY_LEN(cases); i++) {
    struct fx f;
    struct tb_stream *s = fx_open(&f, TB_STREAM_RATE, 1);
    assert_true(feed(s, 2, cases[i].text));
    bool ok = tb_stream_end(s, 0, cases[i].err, &cases[i].x);
    assert_int_equal(s->end_rule, cases[i].rule);
    assert_int_equal(ok, cases[i].reason == NULL);
    if (cases[i].reason != NULL)
      assert_string_equal(s->reason, cases[i].reason);
    tb_stream_free(s);
  }
}

/* Reasons are cut where each kind always cut them: 199 and 159 bytes. */
static void
test_reason_caps(void **state)
{
  (void)state;
  char err[400];
  memset(err, 'e', sizeof err - 1);
  err[sizeof err - 1] = '\0';
  const enum tb_stream_kind kinds[] = { TB_STREAM_MATRIX, TB_STREAM_RATE };
  const size_t caps[] = { 199, 159 };
  for (int i = 0; i < 2; i++) {
    struct fx f;
    struct tb_stream *s = fx_open(&f, kinds[i], 1);
    assert_false(tb_stream_end(s, 200, err, &want_usage));
    assert_int_equal(strlen(s->reason), caps[i]);
    tb_stream_free(s);
  }
}

/* Tokens at made-up stamps: the window's tokens and time between tokens,
 * the gaps per token into the cell's sample, the longest gap, a request's
 * figures. */
static void
test_window_gaps_figures(void **state)
{
  (void)state;
  struct tb_stats gaps = { 0 };
  struct fx f;
  struct tb_stream *s = fx_open(&f, TB_STREAM_MATRIX, 50);
  f.c.gaps = &gaps;
  f.c.w0 = 200;
  f.c.w1 = 500;
  assert_true(feed(s, 60, ROLE));
  /* cumulative usage 1, 3, 4, 6, 7 at 100, 200, 300, 450, 500 */
  const int64_t at[] = { 100, 200, 300, 450, 500 };
  const char *ev[] = { TOK(1, "null"), TOK(3, "null"), TOK(4, "null"), TOK(6, "null"),
                       TOK(7, "null") };
  for (int i = 0; i < 5; i++)
    assert_true(feed(s, at[i], ev[i]));
  assert_int_equal(s->tokens, 7);
  assert_int_equal(f.v.first_at, 100);
  /* window [200, 500): the chunks at 200 (2 tokens), 300 (1), 450 (2) */
  assert_int_equal(s->w_first_t, 200);
  assert_int_equal(s->w_last_t, 450);
  assert_int_equal(s->w_tokens, 5);
  assert_int_equal(s->w_first_tokens, 2);
  assert_int_equal(f.v.in_window, 5);
  int64_t tbt = 0;
  assert_true(tb_stream_window_tbt(s, &tbt));
  assert_int_equal(tbt, (450 - 200) / 3);
  /* gaps per token: 100/2, 100/1, 150/2, 50/1 */
  assert_int_equal(gaps.n, 4);
  const int64_t want[] = { 50, 100, 75, 50 };
  for (int i = 0; i < 4; i++)
    assert_int_equal(gaps.v[i], want[i]);
  assert_int_equal(s->max_gap, 150);
  assert_true(feed(s, 520, "data: {\"choices\":[],\"usage\":{\"completion_tokens\":7}}\n\n" DONE));
  struct tb_stream_figures fig;
  tb_stream_figures(s, 70, 9999, &fig);
  assert_int_equal(fig.ttft, 100 - 70);
  assert_int_equal(fig.end, 520);
  assert_int_equal(fig.e2e, 520 - 50);
  assert_true(fig.have_tpot);
  assert_int_equal(fig.tpot, (500 - 100) / 6);
  tb_stream_free(s);
  tb_stats_free(&gaps);

  /* no token: no time between tokens; no byte: end = now */
  s = fx_open(&f, TB_STREAM_RATE, 50);
  assert_false(tb_stream_window_tbt(s, &tbt));
  tb_stream_figures(s, 50, 9999, &fig);
  assert_int_equal(fig.end, 9999);
  assert_false(fig.have_tpot);
  tb_stream_free(s);
}

/* ------------------------------------------------------- the drain wait */

struct metrics_srv {
  int status;
  int running_from; /* running = running_from - requests so far, >= 0 */
  unsigned calls;
};

static bool
metrics_handler(void *cls, int fd, const struct lb_req *req)
{
  struct metrics_srv *m = cls;
  (void)req;
  int running = m->running_from - (int)m->calls++;
  char body[160];
  snprintf(body, sizeof body,
           "# TYPE vllm:num_requests_running gauge\nvllm:num_requests_running %d\n"
           "vllm:num_requests_waiting 0\n",
           running > 0 ? running : 0);
  lb_respond(fd, m->status, "text/plain", body, false);
  return true;
}

static bool
cancel_now(void *cls)
{
  (void)cls;
  return true;
}

static void
test_drain(void **state)
{
  (void)state;
  struct metrics_srv m = { .status = 200, .running_from = 3 };
  struct lb_server srv;
  assert_true(lb_start(&srv, metrics_handler, &m));
  struct tb_discover d;
  tb_discover_init(&d, srv.url);
  d.kind = TB_KIND_VLLM;
  d.has_metrics = true;
  double running = -7, waiting = -7;
  assert_int_equal(tb_stream_drained(&d, NULL, &running, &waiting), 0);
  assert_true(running == 3 && waiting == 0);
  /* 2, 1, then 0 running: drained on the third poll */
  assert_int_equal(tb_stream_drain_wait(&d, NULL, 10.0, NULL, NULL), 1);
  assert_int_equal(m.calls, 4);
  /* never drained: not within the wait; cancelled: unknown */
  m.running_from = 1000;
  m.calls = 0;
  int64_t t0 = tb_time_mono_ns();
  assert_int_equal(tb_stream_drain_wait(&d, NULL, 0.1, NULL, NULL), 0);
  assert_true(tb_time_mono_ns() - t0 >= 100000000);
  assert_true(m.calls >= 2 && m.calls <= 6);
  assert_int_equal(tb_stream_drain_wait(&d, NULL, 10.0, cancel_now, NULL), -1);
  /* no gauges in the answer: unknown, the outputs untouched */
  m.status = 500;
  running = waiting = -7;
  assert_int_equal(tb_stream_drained(&d, NULL, &running, &waiting), -1);
  assert_true(running == -7 && waiting == -7);
  assert_int_equal(tb_stream_drain_wait(&d, NULL, 10.0, NULL, NULL), -1);
  /* no /metrics: unknown, no call */
  m.calls = 0;
  d.has_metrics = false;
  assert_int_equal(tb_stream_drain_wait(&d, NULL, 10.0, NULL, NULL), -1);
  assert_int_equal(tb_stream_drained(&d, NULL, &running, &waiting), -1);
  assert_int_equal(m.calls, 0);
  tb_discover_free(&d);
  lb_stop(&srv);
}

int
main(void)
{
  const struct CMUnitTest tests[] = {
    cmocka_unit_test(test_one_read),
    cmocka_unit_test(test_split_every_boundary),
    cmocka_unit_test(test_byte_by_byte),
    cmocka_unit_test(test_chunks_and_reasoning),
    cmocka_unit_test(test_comments),
    cmocka_unit_test(test_error_body),
    cmocka_unit_test(test_status_without_body),
    cmocka_unit_test(test_faults_in_stream),
    cmocka_unit_test(test_event_refused),
    cmocka_unit_test(test_caps_and_budget),
    cmocka_unit_test(test_overdue),
    cmocka_unit_test(test_end_rules),
    cmocka_unit_test(test_reason_caps),
    cmocka_unit_test(test_window_gaps_figures),
    cmocka_unit_test(test_drain),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
