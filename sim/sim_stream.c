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

#include "sim_out.h"
#include "sim_tok.h"

/* ------------------------------------------------------------------ */
/* SSE output */

/* A flavour's framing of an event: "data:" without its space (TGI), CRLF
 * line ends (a gateway).  Returns the new length in out (cap bytes). */
static size_t
reframe(const struct sim_dialect *d, const char *in, size_t n, char *out, size_t cap)
{
  size_t o = 0;
  bool bol = true;
  for (size_t i = 0; i < n && o + 2 < cap; i++) {
    if (bol && d->data_nospace && n - i >= 6 && memcmp(in + i, "data: ", 6) == 0) {
      memcpy(out + o, "data:", 5);
      o += 5;
      i += 5; /* the loop steps over the space */
      bol = false;
      continue;
    }
    if (in[i] == '\n' && d->crlf)
      out[o++] = '\r';
    out[o++] = in[i];
    bol = in[i] == '\n';
  }
  return o;
}

/* A gateway's keep-alives: ": ping" before the first event, then a bare
 * ":" before every 4th and a dated ping before every 16th.  Returns the
 * length written into out. */
static size_t
pings(const struct gen *g, char *out, size_t cap)
{
  if (g->nev == 0)
    return (size_t)snprintf(out, cap, ": ping\r\n\r\n");
  if (g->nev % 16 == 0) {
    time_t t = (time_t)(tb_time_real_us() / 1000000);
    struct tm tm;
    char when[32] = "";
    if (gmtime_r(&t, &tm))
      strftime(when, sizeof(when), "%Y-%m-%d %H:%M:%S", &tm);
    return (size_t)snprintf(out, cap, ": ping - %s\r\n\r\n", when);
  }
  if (g->nev % 4 == 0)
    return (size_t)snprintf(out, cap, ":\r\n\r\n");
  return 0;
}

/* Appends one SSE event (payload = "data: ...\n\n" text) with its stamp,
 * framed as an HTTP chunk when chunked. */
void
sim_stream_sse_event(struct server *s, struct gen *g, const char *payload, size_t n)
{
  struct sim_out *o = g->o;
  const struct sim_dialect *d = s->cfg->dialect;
  char stamp[48], pre[64], tx[2 * SIM_EVENT_CAP + 16];
  size_t sl = 0, pl = 0;
  bool deferred = false;
  if (g->stamps) {
    deferred = s->defer && o->nst < SIM_DEFER_STAMPS;
    int k = snprintf(stamp, sizeof(stamp), ": t=%0*" PRId64 "\n", SIM_STAMP_DIGITS,
                     deferred ? (int64_t)0 : now_ns());
    sl = k > 0 ? (size_t)k : 0;
  }
  if (d->data_nospace || d->crlf) {
    n = reframe(d, payload, n, tx, sizeof(tx));
    payload = tx;
  }
  if (d->pings)
    pl = pings(g, pre, sizeof(pre));
  g->nev++;
  if (g->chunked)
    sim_out_printf(o, "%zx\r\n", pl + sl + n);
  sim_out_append(o, pre, pl);
  if (deferred)
    o->st_rel[o->nst++] = o->len - o->off + 4; /* after ": t=" */
  sim_out_append(o, stamp, sl);
  sim_out_append(o, payload, n);
  if (g->chunked)
    sim_out_append(o, "\r\n", 2);
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
  if (flav(s, SIM_FLAVOUR_TGI))
    return snprintf(buf, cap,
                    "data: {\"object\":\"%s\",\"id\":\"\",\"created\":%" PRId64
                    ",\"model\":%s,\"system_fingerprint\":\"%s-sim\",\"choices\":",
                    g->chat ? "chat.completion.chunk" : "text_completion", g->created,
                    s->model_json, s->version ? s->version : "");
  return snprintf(
    buf, cap,
    "data: {\"id\":\"%s\",\"object\":\"%s\",\"created\":%" PRId64 ",\"model\":%s,\"choices\":",
    g->id, g->chat ? "chat.completion.chunk" : "text_completion", g->created, s->model_json);
}

double
sim_stream_prompt_ms(const struct gen *g)
{
  return g->t_first > g->t_pstart ? (double)(g->t_first - g->t_pstart) / 1e6 : 0.0;
}

double
sim_stream_predicted_ms(const struct gen *g)
{
  double ms = g->t_last > g->t_first ? (double)(g->t_last - g->t_first) / 1e6 : 0.0;
  return ms > 0.001 ? ms : 0.001;
}

int
sim_stream_timings_json(const struct server *s, const struct gen *g, char *buf, size_t cap)
{
  int64_t pn = g->prompt - g->cached_tokens;
  double pms = sim_stream_prompt_ms(g), dms = sim_stream_predicted_ms(g);
  /* per token over the n - 1 steps between the first token and the last */
  double dtok = g->out > 1 ? dms / (double)(g->out - 1) : 0.0;
  char cache[40] = "";
  if (llama_new(s))
    snprintf(cache, sizeof(cache), "\"cache_n\":%" PRId64 ",", g->cached_tokens);
  return snprintf(buf, cap,
                  "{%s\"prompt_n\":%" PRId64 ",\"prompt_ms\":%.3f,"
                  "\"prompt_per_token_ms\":%.6g,\"prompt_per_second\":%.6g,"
                  "\"predicted_n\":%" PRId64 ",\"predicted_ms\":%.3f,"
                  "\"predicted_per_token_ms\":%.6g,\"predicted_per_second\":%.6g}",
                  cache, pn, pms, pn > 0 ? pms / (double)pn : 0.0,
                  pms > 0 ? 1e3 * (double)pn / pms : 0.0, g->out, dms, dtok,
                  dtok > 0 ? 1e3 / dtok : 0.0);
}

/* llama.cpp's finish: what its last chunk carries after the choices.
 * b6915: usage and timings.  b11669: a chat stream's usage and timings go
 * on a chunk of their own when include_usage asked for it (gen_finish),
 * else the timings alone end the finish chunk; a completion's last chunk
 * carries both. */
static int
llama_finish_tail(struct server *s, const struct gen *g, char *buf, size_t cap)
{
  int n = 0;
  bool usage = !s->cfg->no_usage && (!llama_new(s) || (!g->chat && g->incl_usage));
  if (llama_new(s) && g->usage)
    return 0; /* all of it on the usage chunk */
  if (usage) {
    char u[256];
    sim_stream_usage_json(u, sizeof(u), g, llama_new(s));
    n += snprintf(buf + n, cap - (size_t)n, ",\"usage\":%s", u);
  }
  n += snprintf(buf + n, cap - (size_t)n, ",\"timings\":");
  n += sim_stream_timings_json(s, g, buf + n, cap - (size_t)n);
  return n;
}

/* Tail after the choices array: usage for continuous stats (or where the
 * flavour puts it on this chunk: TGI 2.2's last, llama.cpp's finish chunk
 * with its timings), then "}". */
static int
chunk_tail(struct server *s, const struct gen *g, char *buf, size_t cap, bool last)
{
  int n = 0;
  if (flav(s, SIM_FLAVOUR_LLAMACPP)) {
    n += snprintf(buf + n, cap - (size_t)n, ",\"system_fingerprint\":\"%s\"",
                  s->version ? s->version : "");
    if (last)
      n += llama_finish_tail(s, g, buf + n, cap - (size_t)n);
    return n + snprintf(buf + n, cap - (size_t)n, "}");
  }
  bool usage_here = g->cont_usage || (last && !s->cfg->no_usage && flav(s, SIM_FLAVOUR_TGI) &&
                                      s->cfg->dialect->rev < 23);
  if (usage_here) {
    char u[256];
    sim_stream_usage_json(u, sizeof(u), g, false);
    n += snprintf(buf + n, cap - (size_t)n, ",\"usage\":%s", u);
  } else if (flav(s, SIM_FLAVOUR_SGLANG) ||
             (flav(s, SIM_FLAVOUR_TGI) && s->cfg->dialect->rev >= 23)) {
    n += snprintf(buf + n, cap - (size_t)n, ",\"usage\":null");
  }
  n += snprintf(buf + n, cap - (size_t)n, "}");
  return n;
}

void
sim_stream_emit_role(struct server *s, struct gen *g)
{
  if (!s->cfg->dialect->role_chunk)
    return; /* TGI: every delta carries the role */
  char *b = s->ev;
  size_t cap = sizeof(s->ev) - 2;
  int n = sim_stream_chunk_head(s, g, b, cap);
  if (flav(s, SIM_FLAVOUR_LLAMACPP))
    n += snprintf(b + n, cap - (size_t)n,
                  "[{\"finish_reason\":null,\"index\":0,"
                  "\"delta\":{\"role\":\"assistant\",\"content\":null}}]");
  else if (flav(s, SIM_FLAVOUR_GATEWAY))
    n += snprintf(b + n, cap - (size_t)n,
                  "[{\"index\":0,\"delta\":{\"role\":\"assistant\"},\"finish_reason\":null}]");
  else
    n += snprintf(b + n, cap - (size_t)n,
                  "[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":\"\"},"
                  "\"logprobs\":null,\"finish_reason\":null%s}]",
                  flav(s, SIM_FLAVOUR_SGLANG) ? ",\"matched_stop\":null" : "");
  n += chunk_tail(s, g, b + n, cap - (size_t)n, false);
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

/* The delta of output tokens [from, to) of a chat stream into b. */
static int
chat_delta(struct server *s, char *b, size_t cap, int64_t from, int64_t to)
{
  char t1[1024], t2[1024];
  const char *field = s->cfg->reasoning_field;
  int64_t rn = field ? s->cfg->reasoning_tokens : 0;
  int64_t split = from < rn ? (to < rn ? to : rn) : from;
  const char *sep = "";
  int n = snprintf(b, cap, "{");
  if (flav(s, SIM_FLAVOUR_TGI)) {
    n += snprintf(b + n, cap - (size_t)n, "\"role\":\"assistant\"");
    sep = ",";
  } else if (flav(s, SIM_FLAVOUR_SGLANG)) {
    n += snprintf(b + n, cap - (size_t)n, "\"role\":null");
    sep = ",";
  }
  if (split > from) {
    words(t1, sizeof(t1), from, split);
    if (strcmp(field, "both") == 0) /* vLLM 0.10 and 0.11 send it twice */
      n += snprintf(b + n, cap - (size_t)n, "%s\"reasoning\":\"%s\",\"reasoning_content\":\"%s\"",
                    sep, t1, t1);
    else
      n += snprintf(b + n, cap - (size_t)n, "%s\"%s\":\"%s\"", sep, field, t1);
    sep = ",";
  }
  if (split < to) {
    words(t2, sizeof(t2), split, to);
    n += snprintf(b + n, cap - (size_t)n, "%s\"content\":\"%s\"", sep, t2);
    sep = ",";
  }
  if (flav(s, SIM_FLAVOUR_SGLANG) && s->cfg->dialect->rev == 4 && split == from)
    n += snprintf(b + n, cap - (size_t)n, "%s\"reasoning_content\":null", sep);
  n += snprintf(b + n, cap - (size_t)n, "}");
  return n;
}

/* One chat choice: delta d, finish fin ("null" or a quoted reason). */
static int
chat_choice(struct server *s, char *b, size_t cap, const char *d, const char *fin)
{
  if (flav(s, SIM_FLAVOUR_LLAMACPP))
    return snprintf(b, cap, "[{\"finish_reason\":%s,\"index\":0,\"delta\":%s}]", fin, d);
  if (flav(s, SIM_FLAVOUR_GATEWAY))
    return snprintf(b, cap, "[{\"index\":0,\"delta\":%s,\"finish_reason\":%s}]", d, fin);
  /* SGLang adds matched_stop; vLLM V0 stop_reason on the finish */
  bool v0_fin = flav(s, SIM_FLAVOUR_VLLM) && s->cfg->dialect->rev == 7 && fin[0] == '"';
  return snprintf(b, cap, "[{\"index\":0,\"delta\":%s,\"logprobs\":null,\"finish_reason\":%s%s}]",
                  d, fin,
                  flav(s, SIM_FLAVOUR_SGLANG) ? ",\"matched_stop\":null"
                  : v0_fin                    ? ",\"stop_reason\":null"
                                              : "");
}

/* Emits output tokens [g->out, g->out + k) as one chunk; with last, the
 * finish on it, or on a chunk of its own with an empty delta (llama.cpp, a
 * gateway). */
void
sim_stream_emit_tokens(struct server *s, struct gen *g, int64_t k, bool last)
{
  char *b = s->ev;
  size_t cap = sizeof(s->ev) - 2;
  int64_t from = g->out, to = g->out + k;
  g->out = to;
  char fin[32];
  snprintf(fin, sizeof(fin), "\"%s\"", g->finish);
  bool own = last && g->chat && s->cfg->dialect->finish_chunk;
  if (k > 0 || !own) {
    int n = sim_stream_chunk_head(s, g, b, cap);
    if (g->chat) {
      char d[2400];
      chat_delta(s, d, sizeof(d), from, to);
      n += chat_choice(s, b + n, cap - (size_t)n, d, last && !own ? fin : "null");
    } else {
      char t1[1024];
      words(t1, sizeof(t1), from, to);
      n += snprintf(b + n, cap - (size_t)n,
                    "[{\"index\":0,\"text\":\"%s\",\"logprobs\":null,\"finish_reason\":%s%s}]", t1,
                    last ? fin : "null", llama_new(s) ? "" : ",\"stop_reason\":null");
    }
    n += chunk_tail(s, g, b + n, cap - (size_t)n, last && !own);
    sim_stream_sse_data(s, g, n);
  }
  if (own) {
    int n = sim_stream_chunk_head(s, g, b, cap);
    n += chat_choice(s, b + n, cap - (size_t)n, "{}", fin);
    n += chunk_tail(s, g, b + n, cap - (size_t)n, true);
    sim_stream_sse_data(s, g, n);
  }
  s->st.tokens_sent += (uint64_t)k;
}

/* Emits the flavour's in-band error event (fault error=N): TGI's two
 * shapes, else an OpenAI error object. */
void
sim_stream_emit_error(struct server *s, struct gen *g)
{
  static const char what[] = "Request failed during generation: simulated fault";
  int n;
  if (flav(s, SIM_FLAVOUR_TGI) && s->cfg->dialect->rev < 23)
    n = snprintf(s->ev, sizeof(s->ev) - 2, "data: {\"error\":\"%s\",\"error_type\":\"generation\"}",
                 what);
  else if (flav(s, SIM_FLAVOUR_TGI))
    n = snprintf(s->ev, sizeof(s->ev) - 2,
                 "data: {\"error\":{\"message\":\"%s\",\"http_status_code\":422}}", what);
  else
    n = snprintf(s->ev, sizeof(s->ev) - 2,
                 "data: {\"error\":{\"message\":\"%s\",\"type\":\"InternalServerError\","
                 "\"param\":null,\"code\":500}}",
                 what);
  sim_stream_sse_data(s, g, n);
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
  sim_out_printf(g->o,
                 "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream; charset=utf-8\r\n"
                 "cache-control: no-cache\r\n%s\r\n",
                 g->chunked ? "transfer-encoding: chunked\r\n" : "connection: close\r\n");
  sim_out_flush(s, g->o);
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
  json_t *usage =
    json_pack("{s:I, s:I, s:I, s:{s:I}}", "prompt_tokens", (json_int_t)g->prompt, "total_tokens",
              (json_int_t)(g->prompt + g->out), "completion_tokens", (json_int_t)g->out,
              "prompt_tokens_details", "cached_tokens", (json_int_t)g->cached_tokens);
  json_t *choice;
  if (g->chat) {
    json_t *msg = json_pack("{s:s, s:s}", "role", "assistant", "content", content);
    if (rn > 0 && strcmp(s->cfg->reasoning_field, "both") == 0) {
      json_object_set_new(msg, "reasoning", json_string(reason));
      json_object_set_new(msg, "reasoning_content", json_string(reason));
    } else if (rn > 0) {
      json_object_set_new(msg, s->cfg->reasoning_field, json_string(reason));
    }
    choice = json_pack("{s:i, s:o, s:n, s:s}", "index", 0, "message", msg, "logprobs",
                       "finish_reason", g->finish);
    if (llama_new(s))
      json_object_del(choice, "logprobs");
  } else {
    choice = json_pack("{s:i, s:s, s:n, s:s, s:n}", "index", 0, "text", content, "logprobs",
                       "finish_reason", g->finish, "stop_reason");
  }
  json_t *doc =
    json_pack("{s:s, s:s, s:I, s:s, s:[o], s:o}", "id", g->id, "object",
              g->chat ? "chat.completion" : "text_completion", "created", (json_int_t)g->created,
              "model", s->p->model, "choices", choice, "usage", usage);
  if (s->cfg->no_usage)
    json_object_del(doc, "usage"); /* --no-usage: a gateway that gives none */
  if (llama_new(s)) {              /* b11669: the build and the timings beside the usage */
    char t[512];
    sim_stream_timings_json(s, g, t, sizeof(t));
    json_object_set_new(doc, "system_fingerprint", json_string(s->version ? s->version : ""));
    json_object_set_new(doc, "timings", json_loads(t, 0, NULL));
  }
  free(reason);
  free(content);
  struct sim_out *o = g->o;
  bool ka = !o->close_after;
  sim_out_reply_json(s, o, 200, doc, ka);
}
