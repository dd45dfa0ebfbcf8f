/*
 * tb_sse: incremental SSE parsing.  See tb_sse.h.
 *
 * Lines are found with memchr over the fed bytes; a line entirely inside one
 * feed is processed in place, without copying, which is the common case (one
 * chunk per read).  Only a line cut by a read boundary is copied into p->line.
 */
#include "net/tb_sse.h"

#include <stdlib.h>
#include <string.h>

void
tb_sse_init(struct tb_sse *p, tb_sse_event_fn on_event, tb_sse_comment_fn on_comment, void *cls)
{
  memset(p, 0, sizeof *p);
  p->on_event = on_event;
  p->on_comment = on_comment;
  p->cls = cls;
}

void
tb_sse_set_budget(struct tb_sse *p, struct tb_sse_budget *budget)
{
  p->budget = budget;
}

void
tb_sse_free(struct tb_sse *p)
{
  if (p->budget != NULL) {
    size_t held = p->line_cap + p->data_cap;
    p->budget->used -= held < p->budget->used ? held : p->budget->used;
  }
  free(p->line);
  free(p->data);
  p->line = p->data = NULL;
  p->line_len = p->line_cap = p->data_len = p->data_cap = 0;
}

bool
tb_sse_idle(const struct tb_sse *p)
{
  return !p->failed && p->line_len == 0 && !p->has_data;
}

/* Appends to a capped buffer of p; TB_SSE_TOO_LONG over the cap,
 * TB_SSE_OVER_BUDGET when growing it would overdraw p's budget. */
static enum tb_sse_status
buf_append(struct tb_sse *p, char **buf, size_t *len, size_t *cap, const char *s, size_t n,
           size_t max)
{
  if (n > max || *len > max - n)
    return TB_SSE_TOO_LONG;
  if (*len + n + 1 > *cap) {
    size_t ncap = *cap ? *cap : 256;
    while (ncap < *len + n + 1)
      ncap *= 2;
    if (ncap > max + 1)
      ncap = max + 1;
    struct tb_sse_budget *b = p->budget;
    if (b != NULL) {
      size_t more = ncap - *cap;
      if (b->used > b->max || more > b->max - b->used)
        return TB_SSE_OVER_BUDGET;
      b->used += more;
    }
    *buf = tb_xrealloc(*buf, ncap);
    *cap = ncap;
  }
  memcpy(*buf + *len, s, n);
  *len += n;
  (*buf)[*len] = '\0';
  return TB_SSE_OK;
}

/* Dispatches the pending event, if any. */
static enum tb_sse_status
dispatch(struct tb_sse *p)
{
  if (!p->has_data)
    return TB_SSE_OK;
  p->has_data = false;
  size_t len = p->data_len;
  p->data_len = 0;
  const char *d = p->data ? p->data : "";
  if (!p->on_event(p->cls, d, len))
    return TB_SSE_STOPPED;
  return TB_SSE_OK;
}

/* One complete line, without its terminator. */
static enum tb_sse_status
process_line(struct tb_sse *p, const char *line, size_t n)
{
  if (n == 0)
    return dispatch(p);
  if (line[0] == ':') {
    if (p->on_comment != NULL)
      p->on_comment(p->cls, line + 1, n - 1);
    return TB_SSE_OK;
  }
  const char *colon = memchr(line, ':', n);
  size_t flen = colon ? (size_t)(colon - line) : n;
  if (flen != 4 || memcmp(line, "data", 4) != 0)
    return TB_SSE_OK; /* event, id, retry, unknown: ignored */
  const char *val = colon ? colon + 1 : line + n;
  size_t vlen = (size_t)(line + n - val);
  if (vlen > 0 && val[0] == ' ') {
    val++;
    vlen--;
  }
  if (p->has_data) {
    enum tb_sse_status st =
      buf_append(p, &p->data, &p->data_len, &p->data_cap, "\n", 1, TB_SSE_EVENT_MAX);
    if (st != TB_SSE_OK)
      return st;
  }
  p->has_data = true;
  return buf_append(p, &p->data, &p->data_len, &p->data_cap, val, vlen, TB_SSE_EVENT_MAX);
}

/* st, made sticky when it is a failure. */
static enum tb_sse_status
failing(struct tb_sse *p, enum tb_sse_status st)
{
  if (st == TB_SSE_TOO_LONG || st == TB_SSE_OVER_BUDGET) {
    p->failed = true;
    p->fail_status = st;
  }
  return st;
}

enum tb_sse_status
tb_sse_feed(struct tb_sse *p, const char *buf, size_t n)
{
  if (p->failed)
    return p->fail_status;
  size_t i = 0;
  if (p->skip_lf && n > 0) {
    if (buf[0] == '\n')
      i = 1;
    p->skip_lf = false;
  }
  while (i < n) {
    const char *start = buf + i;
    size_t rem = n - i;
    /* The next CR or LF, whichever comes first. */
    const char *lf = memchr(start, '\n', rem);
    size_t scan = lf ? (size_t)(lf - start) : rem;
    const char *cr = memchr(start, '\r', scan);
    const char *eol = cr ? cr : lf;
    if (eol == NULL)
      return failing(
        p, buf_append(p, &p->line, &p->line_len, &p->line_cap, start, rem, TB_SSE_LINE_MAX));
    size_t llen = (size_t)(eol - start);
    size_t adv = llen + 1;
    if (*eol == '\r') {
      if (llen + 1 < rem) {
        if (start[llen + 1] == '\n')
          adv++;
      } else {
        p->skip_lf = true;
      }
    }
    enum tb_sse_status st;
    if (p->line_len > 0) {
      st = buf_append(p, &p->line, &p->line_len, &p->line_cap, start, llen, TB_SSE_LINE_MAX);
      if (st != TB_SSE_OK)
        return failing(p, st);
      size_t ll = p->line_len;
      p->line_len = 0;
      st = process_line(p, p->line, ll);
    } else {
      if (llen > TB_SSE_LINE_MAX)
        return failing(p, TB_SSE_TOO_LONG);
      st = process_line(p, start, llen);
    }
    if (st == TB_SSE_TOO_LONG || st == TB_SSE_OVER_BUDGET)
      return failing(p, st);
    if (st != TB_SSE_OK) {
      /* Keep the rest for a later feed is not supported after STOP: the
       * caller is ending the stream. */
      return st;
    }
    i += adv;
  }
  return TB_SSE_OK;
}
