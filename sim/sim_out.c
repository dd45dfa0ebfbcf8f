/*
 * sim_out: see sim_out.h for what it does and sim_state.h for the
 * lifetimes and the hot path it keeps to.
 */
#include "sim_out.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sim_state.h"

static void
out_reserve(struct sim_out *o, size_t n)
{
  if (o->len + n <= o->cap)
    return;
  if (o->off > 0) {
    memmove(o->buf, o->buf + o->off, o->len - o->off);
    o->len -= o->off;
    o->off = 0;
    if (o->len + n <= o->cap)
      return;
  }
  size_t cap = o->cap ? o->cap : 4096;
  while (cap < o->len + n)
    cap *= 2;
  o->buf = tb_xrealloc(o->buf, cap);
  o->cap = cap;
}

void
sim_out_append(struct sim_out *o, const void *data, size_t n)
{
  out_reserve(o, n);
  memcpy(o->buf + o->len, data, n);
  o->len += n;
}

void TB_PRINTF(2, 3) sim_out_printf(struct sim_out *o, const char *fmt, ...)
{
  va_list ap;
  out_reserve(o, 256);
  for (;;) {
    va_start(ap, fmt);
    int n = vsnprintf(o->buf + o->len, o->cap - o->len, fmt, ap);
    va_end(ap);
    if (n < 0)
      return;
    if ((size_t)n < o->cap - o->len) {
      o->len += (size_t)n;
      return;
    }
    out_reserve(o, (size_t)n + 1);
  }
}

void
sim_out_flush(struct server *s, struct sim_out *o)
{
  if (o->dead)
    return;
  if (s->defer) {
    if (!o->queued) {
      if (s->fq_n == s->fq_cap) {
        s->fq_cap = s->fq_cap ? s->fq_cap * 2 : 256;
        s->fq = tb_xrealloc(s->fq, (size_t)s->fq_cap * sizeof(*s->fq));
      }
      s->fq[s->fq_n++] = o;
      o->queued = true;
    }
    return;
  }
  o->ops->send(s, o);
}

void
sim_out_flush_stamped(struct server *s, struct sim_out *o)
{
  o->queued = false;
  if (o->nst > 0) {
    char d[SIM_STAMP_DIGITS + 8];
    snprintf(d, sizeof(d), "%0*" PRId64, SIM_STAMP_DIGITS, now_ns());
    for (int i = 0; i < o->nst; i++)
      memcpy(o->buf + o->off + o->st_rel[i], d, SIM_STAMP_DIGITS);
    o->nst = 0;
  }
  bool defer = s->defer;
  s->defer = false;
  sim_out_flush(s, o);
  s->defer = defer;
}

void
sim_out_flush_queued(struct server *s)
{
  for (int i = 0; i < s->fq_n; i++)
    if (s->fq[i]->queued)
      sim_out_flush_stamped(s, s->fq[i]);
  s->fq_n = 0;
}

void
sim_out_kill(struct server *s, struct sim_out *o)
{
  o->ops->kill(s, o);
}

void
sim_out_resume(struct server *s, struct sim_out *o)
{
  o->ops->resume(s, o);
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
sim_out_reply_raw(struct server *s, struct sim_out *o, int status, const char *ctype,
                  const char *body, size_t len, bool keep_alive)
{
  if (!keep_alive)
    o->close_after = true;
  sim_out_printf(o, "HTTP/1.1 %d %s\r\ncontent-type: %s\r\ncontent-length: %zu\r\n%s%s\r\n", status,
                 reason_phrase(status), ctype, len,
                 (status == 429 || status == 503) ? "retry-after: 1\r\n" : "",
                 o->close_after ? "connection: close\r\n" : "");
  sim_out_append(o, body, len);
  sim_out_flush(s, o);
}

void
sim_out_reply_json(struct server *s, struct sim_out *o, int status, json_t *doc, bool keep_alive)
{
  char *text = json_dumps(doc, JSON_COMPACT);
  json_decref(doc);
  if (text == NULL) {
    sim_out_reply_raw(s, o, 500, "application/json", "{}", 2, false);
    return;
  }
  sim_out_reply_raw(s, o, status, "application/json", text, strlen(text), keep_alive);
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

void
sim_out_reply_error(struct server *s, struct sim_out *o, int status, const char *msg,
                    bool keep_alive)
{
  s->st.errors++;
  json_t *doc = llama_new(s) ? json_pack("{s:{s:i, s:s, s:s}}", "error", "code", status, "message",
                                         msg, "type", llama_error_type(status))
                             : json_pack("{s:{s:s, s:s, s:n, s:i}}", "error", "message", msg,
                                         "type", error_type(status), "param", "code", status);
  sim_out_reply_json(s, o, status, doc, keep_alive);
}
