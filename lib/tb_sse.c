/*
 * tb_sse: incremental SSE parsing.  See tb_sse.h.
 *
 * Lines are found with memchr over the fed bytes; a line entirely inside one
 * feed is processed in place, without copying, which is the common case (one
 * chunk per read).  Only a line cut by a read boundary is copied into p->line.
 */
#include "tb_sse.h"

#include <stdlib.h>
#include <string.h>

void
tb_sse_init(struct tb_sse *p, tb_sse_event_fn on_event,
            tb_sse_comment_fn on_comment, void *cls)
{
  memset(p, 0, sizeof *p);
  p->on_event = on_event;
  p->on_comment = on_comment;
  p->cls = cls;
}

void
tb_sse_free(struct tb_sse *p)
{
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

/* Appends to a capped buffer; false over the cap. */
static bool
buf_append(char **buf, size_t *len, size_t *cap, const char *s, size_t n,
           size_t max)
{
  if (n > max || *len > max - n)
    return false;
  if (*len + n + 1 > *cap) {
    size_t ncap = *cap ? *cap : 256;
    while (ncap < *len + n + 1)
      ncap *= 2;
    if (ncap > max + 1)
      ncap = max + 1;
    *buf = tb_xrealloc(*buf, ncap);
    *cap = ncap;
  }
  memcpy(*buf + *len, s, n);
  *len += n;
  (*buf)[*len] = '\0';
  return true;
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
    if (!buf_append(&p->data, &p->data_len, &p->data_cap, "\n", 1,
                    TB_SSE_EVENT_MAX))
      return TB_SSE_TOO_LONG;
  }
  p->has_data = true;
  if (!buf_append(&p->data, &p->data_len, &p->data_cap, val, vlen,
                  TB_SSE_EVENT_MAX))
    return TB_SSE_TOO_LONG;
  return TB_SSE_OK;
}

enum tb_sse_status
tb_sse_feed(struct tb_sse *p, const char *buf, size_t n)
{
  if (p->failed)
    return TB_SSE_TOO_LONG;
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
    if (eol == NULL) {
      if (!buf_append(&p->line, &p->line_len, &p->line_cap, start, rem,
                      TB_SSE_LINE_MAX)) {
        p->failed = true;
        return TB_SSE_TOO_LONG;
      }
      return TB_SSE_OK;
    }
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
      if (!buf_append(&p->line, &p->line_len, &p->line_cap, start, llen,
                      TB_SSE_LINE_MAX)) {
        p->failed = true;
        return TB_SSE_TOO_LONG;
      }
      size_t ll = p->line_len;
      p->line_len = 0;
      st = process_line(p, p->line, ll);
    } else {
      if (llen > TB_SSE_LINE_MAX) {
        p->failed = true;
        return TB_SSE_TOO_LONG;
      }
      st = process_line(p, start, llen);
    }
    if (st == TB_SSE_TOO_LONG) {
      p->failed = true;
      return st;
    }
    if (st != TB_SSE_OK) {
      /* Keep the rest for a later feed is not supported after STOP: the
       * caller is ending the stream. */
      return st;
    }
    i += adv;
  }
  return TB_SSE_OK;
}
