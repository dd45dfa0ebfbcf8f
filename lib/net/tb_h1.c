/*
 * tb_h1: one HTTP/1.1 response at a time.  See tb_h1.h.
 */
#include "net/tb_h1.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

enum {
  S_STATUS,     /* the status line */
  S_HEADER,     /* header lines, up to the empty line */
  S_BODY_LEN,   /* a Content-Length body: `remaining` bytes */
  S_BODY_CLOSE, /* a body that the end of the connection ends */
  S_CHUNK_SIZE, /* a chunk-size line */
  S_CHUNK_DATA, /* `remaining` bytes of a chunk */
  S_CHUNK_END,  /* the CRLF after a chunk's data */
  S_TRAILER,    /* trailer lines after the last chunk, up to the empty line */
  S_DONE,
  S_ERROR,
};

static enum tb_h1_status fail(struct tb_h1 *p, const char *fmt, ...) TB_PRINTF(2, 3);

static enum tb_h1_status
fail(struct tb_h1 *p, const char *fmt, ...)
{
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(p->reason, sizeof p->reason, fmt, ap);
  va_end(ap);
  p->state = S_ERROR;
  return TB_H1_ERROR;
}

void
tb_h1_init(struct tb_h1 *p)
{
  p->state = S_STATUS;
  p->status = 0;
  p->head_done = false;
  p->chunked = p->has_length = p->conn_close = p->http10 = false;
  p->remaining = 0;
  p->head_bytes = 0;
  p->line_len = 0;
  p->reason[0] = '\0';
}

static bool
is_ows(char c)
{
  return c == ' ' || c == '\t';
}

/* Does the comma-separated list `v` contain token `t` (any case)?  With
 * `last`, only as its last element. */
static bool
has_token(const char *v, const char *t, bool last)
{
  size_t tl = strlen(t);
  bool found = false;
  while (*v != '\0') {
    while (is_ows(*v) || *v == ',')
      v++;
    const char *s = v;
    while (*v != '\0' && *v != ',')
      v++;
    const char *e = v;
    while (e > s && is_ows(e[-1]))
      e--;
    if (e == s)
      continue;
    bool eq = (size_t)(e - s) == tl && strncasecmp(s, t, tl) == 0;
    if (last)
      found = eq; /* the last element decides */
    else if (eq)
      return true;
  }
  return found;
}

static enum tb_h1_status
status_line(struct tb_h1 *p, const char *l, size_t n)
{
  /* HTTP/1.x SP 3DIGIT [SP reason-phrase] */
  if (n < 12 || memcmp(l, "HTTP/1.", 7) != 0 || (l[7] != '0' && l[7] != '1') || l[8] != ' ')
    return fail(p, "not an HTTP/1.x response: %.40s", l);
  for (int i = 9; i < 12; i++)
    if (l[i] < '0' || l[i] > '9')
      return fail(p, "bad status code: %.40s", l);
  if (n > 12 && l[12] != ' ')
    return fail(p, "bad status line: %.40s", l);
  p->status = (l[9] - '0') * 100 + (l[10] - '0') * 10 + (l[11] - '0');
  if (p->status < 100)
    return fail(p, "bad status code %d", p->status);
  if (p->status == 101)
    return fail(p, "unexpected protocol switch (101)");
  p->http10 = l[7] == '0';
  p->chunked = p->has_length = false;
  p->conn_close = p->http10; /* HTTP/1.0: close unless keep-alive */
  p->state = S_HEADER;
  return TB_H1_MORE;
}

static enum tb_h1_status
header_line(struct tb_h1 *p, char *l, size_t n)
{
  char *colon = memchr(l, ':', n);
  if (colon == NULL || colon == l)
    return fail(p, "bad header line: %.40s", l);
  for (char *q = l; q < colon; q++)
    if (is_ows(*q))
      return fail(p, "bad header name: %.40s", l);
  *colon = '\0';
  char *v = colon + 1;
  while (is_ows(*v))
    v++;
  char *e = l + n;
  while (e > v && is_ows(e[-1]))
    *--e = '\0';
  if (strcasecmp(l, "content-length") == 0) {
    int64_t len;
    if (!tb_parse_i64(v, 0, TB_H1_BODY_MAX, &len))
      return fail(p, "bad Content-Length: %.40s", v);
    if (p->has_length && len != p->remaining)
      return fail(p, "conflicting Content-Length headers");
    p->has_length = true;
    p->remaining = len;
  } else if (strcasecmp(l, "transfer-encoding") == 0) {
    /* chunked must come last; any other coding: the body runs to close */
    p->chunked = has_token(v, "chunked", true);
    if (!p->chunked)
      p->conn_close = true;
  } else if (strcasecmp(l, "connection") == 0) {
    if (has_token(v, "close", false))
      p->conn_close = true;
    else if (p->http10 && has_token(v, "keep-alive", false))
      p->conn_close = false;
  }
  return TB_H1_MORE;
}

/* The header block ended: interim response, or the body's framing. */
static enum tb_h1_status
head_end(struct tb_h1 *p)
{
  if (p->status < 200) { /* 1xx: the final response follows */
    p->state = S_STATUS;
    return TB_H1_MORE;
  }
  p->head_done = true;
  if (p->status == 204 || p->status == 304) {
    p->state = S_DONE;
    return TB_H1_DONE;
  }
  if (p->chunked) {
    p->has_length = false;
    p->state = S_CHUNK_SIZE;
  } else if (p->has_length) {
    p->state = p->remaining > 0 ? S_BODY_LEN : S_DONE;
  } else {
    p->state = S_BODY_CLOSE;
    p->conn_close = true;
  }
  return p->state == S_DONE ? TB_H1_DONE : TB_H1_MORE;
}

static enum tb_h1_status
chunk_size_line(struct tb_h1 *p, const char *l, size_t n)
{
  int64_t v = 0;
  size_t i = 0;
  for (; i < n; i++) {
    int d = tb_hex_digit((unsigned char)l[i]);
    if (d < 0)
      break;
    v = v * 16 + d;
    if (v > TB_H1_BODY_MAX)
      return fail(p, "chunk size over %lld", (long long)TB_H1_BODY_MAX);
  }
  if (i == 0)
    return fail(p, "bad chunk size line: %.40s", l);
  while (i < n && is_ows(l[i]))
    i++;
  if (i < n && l[i] != ';')
    return fail(p, "bad chunk size line: %.40s", l);
  p->remaining = v;
  p->state = v == 0 ? S_TRAILER : S_CHUNK_DATA;
  return TB_H1_MORE;
}

/* One complete line (CRLF or LF removed, NUL-terminated) in a line state. */
static enum tb_h1_status
on_line(struct tb_h1 *p, char *l, size_t n)
{
  switch (p->state) {
  case S_STATUS:
    if (n == 0)
      return TB_H1_MORE; /* RFC 9112 §2.2: ignore a leading empty line */
    return status_line(p, l, n);
  case S_HEADER:
    if (n == 0)
      return head_end(p);
    if (is_ows(l[0]))
      return fail(p, "obsolete header line folding");
    return header_line(p, l, n);
  case S_CHUNK_SIZE: return chunk_size_line(p, l, n);
  case S_CHUNK_END:
    if (n != 0)
      return fail(p, "chunk data longer than its size");
    p->state = S_CHUNK_SIZE;
    return TB_H1_MORE;
  case S_TRAILER:
    if (n == 0) {
      p->state = S_DONE;
      return TB_H1_DONE;
    }
    return TB_H1_MORE;
  default: return fail(p, "parser state %d", p->state);
  }
}

static bool
in_head(const struct tb_h1 *p)
{
  return p->state == S_STATUS || p->state == S_HEADER;
}

enum tb_h1_status
tb_h1_feed(struct tb_h1 *p, const char *buf, size_t n, size_t *used, tb_h1_body_fn body, void *cls)
{
  size_t i = 0;
  *used = n;
  while (i < n) {
    switch (p->state) {
    case S_ERROR: return TB_H1_ERROR;
    case S_DONE: *used = i; return TB_H1_DONE;
    case S_BODY_CLOSE: {
      if (!body(cls, buf + i, n - i))
        return TB_H1_STOPPED;
      return TB_H1_MORE;
    }
    case S_BODY_LEN:
    case S_CHUNK_DATA: {
      size_t k = n - i;
      if ((int64_t)k > p->remaining)
        k = (size_t)p->remaining;
      p->remaining -= (int64_t)k;
      bool len_done = p->state == S_BODY_LEN && p->remaining == 0;
      if (p->remaining == 0)
        p->state = p->state == S_BODY_LEN ? S_DONE : S_CHUNK_END;
      if (!body(cls, buf + i, k))
        return TB_H1_STOPPED;
      i += k;
      if (len_done) {
        *used = i;
        return TB_H1_DONE;
      }
      break;
    }
    default: { /* a line state */
      const char *nl = memchr(buf + i, '\n', n - i);
      size_t k = nl != NULL ? (size_t)(nl - (buf + i)) : n - i;
      if (p->line_len + k >= TB_H1_LINE_MAX)
        return fail(p, "line over %u bytes", TB_H1_LINE_MAX);
      if (in_head(p)) {
        p->head_bytes += k + (nl != NULL);
        if (p->head_bytes > TB_H1_HEAD_MAX)
          return fail(p, "response head over %u bytes", TB_H1_HEAD_MAX);
      }
      memcpy(p->line + p->line_len, buf + i, k);
      p->line_len += k;
      i += k;
      if (nl == NULL)
        return TB_H1_MORE;
      i++; /* the LF */
      size_t ll = p->line_len;
      if (ll > 0 && p->line[ll - 1] == '\r')
        ll--;
      p->line[ll] = '\0';
      p->line_len = 0;
      if (memchr(p->line, '\0', ll) != NULL)
        return fail(p, "NUL byte in a line");
      enum tb_h1_status st = on_line(p, p->line, ll);
      if (st == TB_H1_ERROR)
        return st;
      if (st == TB_H1_DONE) {
        *used = i;
        return TB_H1_DONE;
      }
      break;
    }
    }
  }
  if (p->state == S_DONE) {
    *used = i;
    return TB_H1_DONE;
  }
  return p->state == S_ERROR ? TB_H1_ERROR : TB_H1_MORE;
}

enum tb_h1_status
tb_h1_eof(struct tb_h1 *p)
{
  switch (p->state) {
  case S_DONE:
  case S_BODY_CLOSE: p->state = S_DONE; return TB_H1_DONE;
  case S_ERROR: return TB_H1_ERROR;
  case S_STATUS:
    if (p->line_len == 0 && p->head_bytes == 0)
      return fail(p, "connection closed before a response");
    /* fall through */
  case S_HEADER: return fail(p, "connection closed inside the response head");
  default: return fail(p, "connection closed before the response ended");
  }
}

bool
tb_h1_keep_alive(const struct tb_h1 *p)
{
  return p->state == S_DONE && p->head_done && !p->conn_close;
}
