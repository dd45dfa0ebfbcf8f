/*
 * sim_stream: see sim_stream.h for what it does and sim_state.h for the
 * lifetimes and the hot path it keeps to.
 */
#include "sim_stream.h"

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

#include "sim_conn.h"
#include "sim_tok.h"

/* ------------------------------------------------------------------ */
/* SSE output */

/* Appends one SSE event (payload = "data: ...\n\n" text) with its stamp,
 * framed as an HTTP chunk when chunked. */
void
sim_stream_sse_event(struct server *s, struct gen *g, const char *payload, size_t n)
{
  struct conn *c = g->c;
  char stamp[48];
  size_t sl = 0;
  bool deferred = false;
  if (s->cfg->stamps) {
    deferred = s->defer && c->nst < SIM_DEFER_STAMPS;
    int k = snprintf(stamp, sizeof(stamp), ": t=%0*" PRId64 "\n", SIM_STAMP_DIGITS,
                     deferred ? (int64_t)0 : now_ns());
    sl = k > 0 ? (size_t)k : 0;
  }
  if (g->chunked)
    sim_conn_out_printf(c, "%zx\r\n", sl + n);
  if (deferred)
    c->st_rel[c->nst++] = c->out_len - c->out_off + 4; /* after ": t=" */
  sim_conn_out_append(c, stamp, sl);
  sim_conn_out_append(c, payload, n);
  if (g->chunked)
    sim_conn_out_append(c, "\r\n", 2);
}

void
sim_stream_sse_data(struct server *s, struct gen *g, int len)
{
  if (len < 0 || (size_t)len >= sizeof(s->ev) - 2)
    return; /* cannot happen: every event is bounded well below the cap */
  s->ev[len++] = '\n';
  s->ev[len++] = '\n';
  sim_stream_sse_event(s, g, s->ev, (size_t)len);
}

int
sim_stream_usage_json(char *buf, size_t cap, const struct gen *g, bool details)
{
  if (details)
    return snprintf(buf, cap,
                    "{\"prompt_tokens\":%" PRId64 ",\"total_tokens\":%" PRId64
                    ",\"completion_tokens\":%" PRId64
                    ",\"prompt_tokens_details\":{\"cached_tokens\":%" PRId64 "}}",
                    g->prompt, g->prompt + g->out, g->out, g->cached_tokens);
  return snprintf(buf, cap,
                  "{\"prompt_tokens\":%" PRId64 ",\"total_tokens\":%" PRId64
                  ",\"completion_tokens\":%" PRId64 "}",
                  g->prompt, g->prompt + g->out, g->out);
}

/* Head of a chunk, up to and including "\"choices\":". */
int
sim_stream_chunk_head(struct server *s, const struct gen *g, char *buf, size_t cap)
{
  return snprintf(buf, cap,
                  "data: {\"id\":\"%s\",\"object\":\"%s\",\"created\":%" PRId64
                  ",\"model\":%s,\"choices\":",
                  g->id, g->chat ? "chat.completion.chunk" : "text_completion", g->created,
                  s->model_json);
}

/* Tail after the choices array: usage for continuous stats, then "}". */
static int
chunk_tail(struct server *s, const struct gen *g, char *buf, size_t cap)
{
  if (g->cont_usage) {
    char u[256];
    sim_stream_usage_json(u, sizeof(u), g, false);
    return snprintf(buf, cap, ",\"usage\":%s}", u);
  }
  if (s->cfg->flavour == SIM_FLAVOUR_SGLANG)
    return snprintf(buf, cap, ",\"usage\":null}");
  return snprintf(buf, cap, "}");
}

void
sim_stream_emit_role(struct server *s, struct gen *g)
{
  char *b = s->ev;
  size_t cap = sizeof(s->ev) - 2;
  int n = sim_stream_chunk_head(s, g, b, cap);
  n += snprintf(b + n, cap - (size_t)n,
                "[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":\"\"},"
                "\"logprobs\":null,\"finish_reason\":null}]");
  n += chunk_tail(s, g, b + n, cap - (size_t)n);
  sim_stream_sse_data(s, g, n);
}

/* Appends the text of output tokens [from, to) to buf. */
static int
words(char *buf, size_t cap, int64_t from, int64_t to)
{
  int n = 0;
  for (int64_t i = from; i < to; i++) {
    const char *w = sim_tok_output_word(i);
    size_t wl = strlen(w);
    if ((size_t)n + wl + 1 > cap)
      break;
    memcpy(buf + n, w, wl);
    n += (int)wl;
  }
  buf[n] = '\0';
  return n;
}

/* Emits output tokens [g->out, g->out + k) as one chunk. */
void
sim_stream_emit_tokens(struct server *s, struct gen *g, int64_t k, bool last)
{
  char *b = s->ev;
  size_t cap = sizeof(s->ev) - 2;
  int64_t from = g->out, to = g->out + k;
  g->out = to;
  char fin[32];
  if (last)
    snprintf(fin, sizeof(fin), "\"%s\"", g->finish);
  else
    snprintf(fin, sizeof(fin), "null");
  int n = sim_stream_chunk_head(s, g, b, cap);
  char t1[1024], t2[1024];
  if (g->chat) {
    int64_t rn = s->cfg->reasoning_field ? s->cfg->reasoning_tokens : 0;
    int64_t split = from < rn ? (to < rn ? to : rn) : from;
    n += snprintf(b + n, cap - (size_t)n, "[{\"index\":0,\"delta\":{");
    if (split > from) {
      words(t1, sizeof(t1), from, split);
      n += snprintf(b + n, cap - (size_t)n, "\"%s\":\"%s\"%s", s->cfg->reasoning_field, t1,
                    split < to ? "," : "");
    }
    if (split < to) {
      words(t2, sizeof(t2), split, to);
      n += snprintf(b + n, cap - (size_t)n, "\"content\":\"%s\"", t2);
    }
    n += snprintf(b + n, cap - (size_t)n, "},\"logprobs\":null,\"finish_reason\":%s}]", fin);
  } else {
    words(t1, sizeof(t1), from, to);
    n += snprintf(b + n, cap - (size_t)n,
                  "[{\"index\":0,\"text\":\"%s\",\"logprobs\":null,\"finish_reason\":%s,"
                  "\"stop_reason\":null}]",
                  t1, fin);
  }
  n += chunk_tail(s, g, b + n, cap - (size_t)n);
  sim_stream_sse_data(s, g, n);
  s->st.tokens_sent += (uint64_t)k;
}

void
sim_stream_emit_malformed(struct server *s, struct gen *g)
{
  static const char bad[] = "data: {\"malformed\": [1, 2, \n\n";
  sim_stream_sse_event(s, g, bad, sizeof(bad) - 1);
}

void
sim_stream_headers(struct server *s, struct gen *g)
{
  struct conn *c = g->c;
  sim_conn_out_printf(c,
                      "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream; charset=utf-8\r\n"
                      "cache-control: no-cache\r\n%s\r\n",
                      g->chunked ? "transfer-encoding: chunked\r\n" : "connection: close\r\n");
  sim_conn_flush(s, c);
}

/* Non-streaming answer, once every token is generated. */
void
sim_stream_reply_complete(struct server *s, struct gen *g)
{
  size_t tl = (size_t)g->out * 5 + 1;
  int64_t rn = (g->chat && s->cfg->reasoning_field) ? s->cfg->reasoning_tokens : 0;
  if (rn > g->out)
    rn = g->out;
  char *reason = tb_xmalloc(tl), *content = tb_xmalloc(tl);
  words(reason, tl, 0, rn);
  words(content, tl, rn, g->out);
  json_t *usage = json_pack("{s:I, s:I, s:I, s:{s:I}}", "prompt_tokens", (json_int_t)g->prompt,
                            "total_tokens", (json_int_t)(g->prompt + g->out),
                            "completion_tokens", (json_int_t)g->out, "prompt_tokens_details",
                            "cached_tokens", (json_int_t)g->cached_tokens);
  json_t *choice;
  if (g->chat) {
    json_t *msg = json_pack("{s:s, s:s}", "role", "assistant", "content", content);
    if (rn > 0)
      json_object_set_new(msg, s->cfg->reasoning_field, json_string(reason));
    choice = json_pack("{s:i, s:o, s:n, s:s}", "index", 0, "message", msg, "logprobs",
                       "finish_reason", g->finish);
  } else {
    choice = json_pack("{s:i, s:s, s:n, s:s, s:n}", "index", 0, "text", content, "logprobs",
                       "finish_reason", g->finish, "stop_reason");
  }
  json_t *doc = json_pack("{s:s, s:s, s:I, s:s, s:[o], s:o}", "id", g->id, "object",
                          g->chat ? "chat.completion" : "text_completion", "created",
                          (json_int_t)g->created, "model", s->p->model, "choices", choice,
                          "usage", usage);
  if (s->cfg->no_usage)
    json_object_del(doc, "usage"); /* --no-usage: a gateway that gives none */
  free(reason);
  free(content);
  struct conn *c = g->c;
  bool ka = !c->close_after;
  sim_conn_reply_json(s, c, 200, doc, ka);
}
