/*
 * sim_server: event loop, HTTP connections, routes, scheduler (design in
 * sim_server.h, model and protocol in sim/README.md).
 *
 * Lifetimes: a connection (struct conn) owns at most one generation request
 * (struct gen) at a time.  Closing is deferred: conn_kill() only marks the
 * connection and queues it; reap() at the end of each loop iteration aborts
 * its request (removing it from the queue, the batch and the timer heap,
 * releasing its KV reservation) and frees it.  So nothing reachable from the
 * loop's current iteration is ever freed under its feet.
 *
 * Hot path: a decode step runs in two phases.  Prepare formats one chunk per
 * stream into that stream's output buffer, with a fixed-width placeholder
 * for the send stamp, and queues the connection instead of sending; it runs
 * ahead of the step's deadline (the timer fires early by the spin margin plus
 * the expected prepare time, a robust average per stream times the batch,
 * capped) whenever the step is the next deadline.  Send,
 * at the deadline, walks the queue in batch order (stable from step to step),
 * writes each stream's stamp (the clock read just before its send) into the
 * placeholder and issues one send() per connection.  So between the deadline
 * and each send there is nothing but the previous streams' sends.
 */
#include "sim_server.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <arpa/inet.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sched.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/timerfd.h>
#include <time.h>
#include <unistd.h>

#include "sim_http.h"
#include "sim_tok.h"

#define SIM_OUT_CAP (16 * 1024 * 1024)   /* unsent bytes per connection */
#define SIM_IN_CAP (SIM_HTTP_HEAD_CAP + SIM_HTTP_BODY_CAP)
#define SIM_IN_INIT 4096
#define SIM_CACHE_ENTRIES 4096           /* prefix cache entries */
#define SIM_IDLE_NS (300 * 1000000000LL) /* idle keep-alive connection */
#define SIM_PARTIAL_NS (60 * 1000000000LL) /* incomplete request */
#define SIM_DRAIN_NS (2 * 1000000000LL)  /* lingering close */
#define SIM_EVENT_CAP 4096               /* one SSE event payload */
#define SIM_MAX_EVENTS 256
/* The timerfd fires this early; the rest is spun on the clock, because a
 * sleeping thread wakes up tens to hundreds of microseconds late (more in
 * a VM), which would show as gap jitter. */
#define SIM_SPIN_NS 300000
/* Stamps of one connection deferred within one step (token, usage, [DONE],
 * a malformed event): more are stamped at once. */
#define SIM_DEFER_STAMPS 6
#define SIM_PREP_PER_MAX_NS 20000 /* prepare time per stream: at most */
#define SIM_PREP_MAX_NS 5000000   /* how early a step is prepared: at most */
#define SIM_STAMP_DIGITS 19 /* ": t=%019lld\n": fixed width, patched in place */

enum { KIND_CONN = 1, KIND_LISTEN, KIND_TIMER, KIND_SIGNAL };

enum gstate { G_FIRSTBYTE, G_QUEUED, G_PREFILL, G_DECODE, G_STALL };

struct conn;

struct gen {
  struct conn *c;
  enum gstate st;
  bool chat, stream, usage, cont_usage, chunked;
  bool role_sent, stall_done, malformed_done, cache_hit, aborted_by_api;
  int64_t prompt, max_tokens, limit, out, pending, cached_tokens, need_kv;
  const char *finish;          /* "length" or "stop" */
  uint64_t hash;
  struct sim_fault f;
  char id[64];
  int64_t created;
  int64_t due;                 /* timer deadline (ns) when in the heap */
  int heap_i;                  /* -1: not in the heap */
  int batch_i;                 /* -1: not in the batch */
  int grp_i;                   /* -1: not in the cache-hit prefill group */
  struct gen *qnext, *qprev;   /* FIFO queue links (G_QUEUED) */
};

struct conn {
  int kind;
  int fd;
  char *in;
  size_t in_len, in_cap;
  char *out;
  size_t out_len, out_off, out_cap;
  bool dead, close_after, draining, epollout, sent_continue, resume;
  int64_t last_active;
  int64_t req_start;           /* arrival of the first byte of the request */
  struct gen *gen;
  bool fq;                     /* in the step's send queue */
  int nst;                     /* deferred stamps in out */
  size_t st_rel[SIM_DEFER_STAMPS]; /* their offsets from out_off */
  struct conn *next, *prev;    /* all connections */
  struct conn *todo_next;      /* reap / resume list */
};

struct cache_entry {
  uint64_t hash;
  int64_t tokens;
  int64_t used;                /* LRU clock */
};

struct stats {
  uint64_t requests, completed, aborted, tokens_sent, prompt_tokens, cache_hits,
    cache_misses, steps, late_steps, conns_total, errors, tokens_generated;
  int64_t max_late_ns;
};

struct server {
  const struct sim_config *cfg;
  const struct sim_profile *p;
  int ep, lfd, tfd, sfd;
  struct sockaddr_in addr;
  int listen_kind, timer_kind, signal_kind;
  bool stop;
  struct conn *conns;
  int nconns;
  struct conn *todo;
  int64_t armed;               /* timerfd deadline, 0: disarmed */
  int64_t relisten_at;         /* 0: listening */
  int64_t next_house;
  /* model */
  struct gen **heap;
  int heap_n, heap_cap;
  struct gen **batch;
  int batch_n, batch_cap;
  int64_t batch_prompt_sum;
  int64_t next_step;           /* valid when batch_n > 0 */
  struct gen *q_head, *q_tail;
  int q_n;
  int running;                 /* admitted: prefill + decode + stall */
  int64_t kv_used;
  int64_t lane_free;           /* cold prefill lane busy until */
  /* Prefix-cache hits admitted while a previous hit's prefill is still
   * pending join its group and get their first token together, as an engine
   * batches the prefills it schedules in one step: the group's TTFT is
   * cached_ttft(running after the last join), counted from the first join. */
  struct gen **grp;
  int grp_n, grp_cap;
  int64_t grp_start, grp_due;
  struct cache_entry cache[SIM_CACHE_ENTRIES];
  int cache_n;
  int64_t cache_tokens, cache_clock;
  uint64_t id_counter;
  char model_json[600];        /* the served model name as a JSON string */
  struct stats st;
  /* the decode step's send queue (see the design note at the top) */
  bool defer;                  /* prepare phase: conn_flush queues */
  struct conn **fq;
  int fq_n, fq_cap;
  bool prepared;               /* a step is prepared, to send at prep_sched */
  int64_t prep_sched;
  int64_t prep_per_ns;         /* prepare time per stream (robust average) */
  char ev[SIM_EVENT_CAP];
};

/* ------------------------------------------------------------------ */
/* small helpers */

static int64_t
now_ns(void)
{
  return tb_time_mono_ns();
}

static int64_t
ms_to_ns(const struct server *s, double ms)
{
  double ns = ms * 1e6 / s->cfg->time_scale;
  return ns > 3.6e15 ? (int64_t)3.6e15 : (int64_t)ns;
}

static void
out_reserve(struct conn *c, size_t n)
{
  if (c->out_len + n <= c->out_cap)
    return;
  if (c->out_off > 0) {
    memmove(c->out, c->out + c->out_off, c->out_len - c->out_off);
    c->out_len -= c->out_off;
    c->out_off = 0;
    if (c->out_len + n <= c->out_cap)
      return;
  }
  size_t cap = c->out_cap ? c->out_cap : 4096;
  while (cap < c->out_len + n)
    cap *= 2;
  c->out = tb_xrealloc(c->out, cap);
  c->out_cap = cap;
}

static void
out_append(struct conn *c, const void *data, size_t n)
{
  out_reserve(c, n);
  memcpy(c->out + c->out_len, data, n);
  c->out_len += n;
}

static void TB_PRINTF(2, 3)
out_printf(struct conn *c, const char *fmt, ...)
{
  va_list ap;
  out_reserve(c, 256);
  for (;;) {
    va_start(ap, fmt);
    int n = vsnprintf(c->out + c->out_len, c->out_cap - c->out_len, fmt, ap);
    va_end(ap);
    if (n < 0)
      return;
    if ((size_t)n < c->out_cap - c->out_len) {
      c->out_len += (size_t)n;
      return;
    }
    out_reserve(c, (size_t)n + 1);
  }
}

static void
ep_mod(struct server *s, struct conn *c)
{
  struct epoll_event ev = { .events = EPOLLIN | EPOLLRDHUP | (c->epollout ? EPOLLOUT : 0u),
                            .data.ptr = c };
  (void)epoll_ctl(s->ep, EPOLL_CTL_MOD, c->fd, &ev);
}

static void
todo_push(struct server *s, struct conn *c)
{
  if (c->todo_next != NULL || s->todo == c)
    return;
  c->todo_next = s->todo ? s->todo : c; /* self-link marks the tail */
  s->todo = c;
}

static void
conn_kill(struct server *s, struct conn *c)
{
  if (c->dead)
    return;
  c->dead = true;
  (void)epoll_ctl(s->ep, EPOLL_CTL_DEL, c->fd, NULL);
  todo_push(s, c);
}

/* Sends what is buffered; arms EPOLLOUT on a short write. */
static void
conn_flush(struct server *s, struct conn *c)
{
  if (c->dead)
    return;
  if (s->defer) {
    if (!c->fq) {
      if (s->fq_n == s->fq_cap) {
        s->fq_cap = s->fq_cap ? s->fq_cap * 2 : 256;
        s->fq = tb_xrealloc(s->fq, (size_t)s->fq_cap * sizeof(*s->fq));
      }
      s->fq[s->fq_n++] = c;
      c->fq = true;
    }
    return;
  }
  while (c->out_off < c->out_len) {
    ssize_t n = send(c->fd, c->out + c->out_off, c->out_len - c->out_off, MSG_NOSIGNAL);
    if (n > 0) {
      c->out_off += (size_t)n;
      continue;
    }
    if (n < 0 && errno == EINTR)
      continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      if (c->out_len - c->out_off > SIM_OUT_CAP) {
        conn_kill(s, c); /* a reader this slow is gone for our purposes */
        return;
      }
      if (!c->epollout) {
        c->epollout = true;
        ep_mod(s, c);
      }
      return;
    }
    conn_kill(s, c);
    return;
  }
  c->out_off = c->out_len = 0;
  if (c->epollout) {
    c->epollout = false;
    ep_mod(s, c);
  }
  if (c->close_after && c->gen == NULL && !c->draining) {
    /* Lingering close: stop sending, drain input until EOF, so that a
     * client still sending never sees our answer destroyed by a reset. */
    c->draining = true;
    c->last_active = now_ns();
    shutdown(c->fd, SHUT_WR);
  }
}

/* Writes the connection's deferred stamps (the clock now) and sends. */
static void
flush_stamped(struct server *s, struct conn *c)
{
  c->fq = false;
  if (c->nst > 0) {
    char d[SIM_STAMP_DIGITS + 8];
    snprintf(d, sizeof(d), "%0*" PRId64, SIM_STAMP_DIGITS, now_ns());
    for (int i = 0; i < c->nst; i++)
      memcpy(c->out + c->out_off + c->st_rel[i], d, SIM_STAMP_DIGITS);
    c->nst = 0;
  }
  bool defer = s->defer;
  s->defer = false;
  conn_flush(s, c);
  s->defer = defer;
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

static void
reply_raw(struct server *s, struct conn *c, int status, const char *ctype, const char *body,
          size_t len, bool keep_alive)
{
  if (!keep_alive)
    c->close_after = true;
  out_printf(c,
             "HTTP/1.1 %d %s\r\ncontent-type: %s\r\ncontent-length: %zu\r\n%s%s\r\n",
             status, reason_phrase(status), ctype, len,
             (status == 429 || status == 503) ? "retry-after: 1\r\n" : "",
             c->close_after ? "connection: close\r\n" : "");
  out_append(c, body, len);
  conn_flush(s, c);
}

/* Replies with a JSON document and steals it. */
static void
reply_json(struct server *s, struct conn *c, int status, json_t *doc, bool keep_alive)
{
  char *text = json_dumps(doc, JSON_COMPACT);
  json_decref(doc);
  if (text == NULL) {
    reply_raw(s, c, 500, "application/json", "{}", 2, false);
    return;
  }
  reply_raw(s, c, status, "application/json", text, strlen(text), keep_alive);
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

/* OpenAI-style error body: {"error": {message, type, param, code}}. */
static void
reply_error(struct server *s, struct conn *c, int status, const char *msg, bool keep_alive)
{
  s->st.errors++;
  json_t *doc = json_pack("{s:{s:s, s:s, s:n, s:i}}", "error", "message", msg, "type",
                          error_type(status), "param", "code", status);
  reply_json(s, c, status, doc, keep_alive);
}

/* ------------------------------------------------------------------ */
/* timer heap (gens with a deadline: first byte, prefill, stall) */

static void
heap_swap(struct server *s, int a, int b)
{
  struct gen *t = s->heap[a];
  s->heap[a] = s->heap[b];
  s->heap[b] = t;
  s->heap[a]->heap_i = a;
  s->heap[b]->heap_i = b;
}

static void
heap_up(struct server *s, int i)
{
  while (i > 0 && s->heap[(i - 1) / 2]->due > s->heap[i]->due) {
    heap_swap(s, i, (i - 1) / 2);
    i = (i - 1) / 2;
  }
}

static void
heap_down(struct server *s, int i)
{
  for (;;) {
    int l = 2 * i + 1, r = l + 1, m = i;
    if (l < s->heap_n && s->heap[l]->due < s->heap[m]->due)
      m = l;
    if (r < s->heap_n && s->heap[r]->due < s->heap[m]->due)
      m = r;
    if (m == i)
      return;
    heap_swap(s, i, m);
    i = m;
  }
}

static void
heap_push(struct server *s, struct gen *g, int64_t due)
{
  if (s->heap_n == s->heap_cap) {
    s->heap_cap = s->heap_cap ? s->heap_cap * 2 : 256;
    s->heap = tb_xrealloc(s->heap, (size_t)s->heap_cap * sizeof(*s->heap));
  }
  g->due = due;
  g->heap_i = s->heap_n;
  s->heap[s->heap_n++] = g;
  heap_up(s, g->heap_i);
}

static void
heap_remove(struct server *s, struct gen *g)
{
  int i = g->heap_i;
  if (i < 0)
    return;
  s->heap_n--;
  if (i != s->heap_n) {
    s->heap[i] = s->heap[s->heap_n];
    s->heap[i]->heap_i = i;
    heap_down(s, i);
    heap_up(s, i);
  }
  g->heap_i = -1;
}

/* ------------------------------------------------------------------ */
/* batch and queue */

static void
batch_add(struct server *s, struct gen *g, int64_t now)
{
  if (s->batch_n == s->batch_cap) {
    s->batch_cap = s->batch_cap ? s->batch_cap * 2 : 256;
    s->batch = tb_xrealloc(s->batch, (size_t)s->batch_cap * sizeof(*s->batch));
  }
  g->batch_i = s->batch_n;
  s->batch[s->batch_n++] = g;
  s->batch_prompt_sum += g->prompt;
  g->st = G_DECODE;
  if (s->batch_n == 1) {
    /* The step clock starts with the first stream (its first token was
     * emitted now). */
    double ms = sim_profile_step_ms(s->p, 1, (double)g->prompt);
    s->next_step = now + ms_to_ns(s, ms);
  }
}

static void
batch_remove(struct server *s, struct gen *g)
{
  int i = g->batch_i;
  if (i < 0)
    return;
  s->batch_n--;
  if (i != s->batch_n) {
    s->batch[i] = s->batch[s->batch_n];
    s->batch[i]->batch_i = i;
  }
  s->batch_prompt_sum -= g->prompt;
  g->batch_i = -1;
}

static void
queue_push(struct server *s, struct gen *g)
{
  g->st = G_QUEUED;
  g->qnext = NULL;
  g->qprev = s->q_tail;
  if (s->q_tail)
    s->q_tail->qnext = g;
  else
    s->q_head = g;
  s->q_tail = g;
  s->q_n++;
}

static void
queue_remove(struct server *s, struct gen *g)
{
  if (g->qprev)
    g->qprev->qnext = g->qnext;
  else
    s->q_head = g->qnext;
  if (g->qnext)
    g->qnext->qprev = g->qprev;
  else
    s->q_tail = g->qprev;
  g->qnext = g->qprev = NULL;
  s->q_n--;
}

/* ------------------------------------------------------------------ */
/* prefix cache: whole templated prompts, LRU within the KV budget */

static struct cache_entry *
cache_find(struct server *s, uint64_t hash)
{
  for (int i = 0; i < s->cache_n; i++)
    if (s->cache[i].hash == hash)
      return &s->cache[i];
  return NULL;
}

static void
cache_evict_one(struct server *s)
{
  int lru = 0;
  for (int i = 1; i < s->cache_n; i++)
    if (s->cache[i].used < s->cache[lru].used)
      lru = i;
  s->cache_tokens -= s->cache[lru].tokens;
  s->cache[lru] = s->cache[--s->cache_n];
}

static void
cache_insert(struct server *s, uint64_t hash, int64_t tokens)
{
  struct cache_entry *e = cache_find(s, hash);
  if (e) {
    e->used = ++s->cache_clock;
    return;
  }
  if (tokens > s->p->kv_budget)
    return;
  while (s->cache_n > 0 &&
         (s->cache_n == SIM_CACHE_ENTRIES || s->cache_tokens + tokens > s->p->kv_budget))
    cache_evict_one(s);
  s->cache[s->cache_n++] = (struct cache_entry){ hash, tokens, ++s->cache_clock };
  s->cache_tokens += tokens;
}

/* ------------------------------------------------------------------ */
/* SSE output */

/* Appends one SSE event (payload = "data: ...\n\n" text) with its stamp,
 * framed as an HTTP chunk when chunked. */
static void
sse_event(struct server *s, struct gen *g, const char *payload, size_t n)
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
    out_printf(c, "%zx\r\n", sl + n);
  if (deferred)
    c->st_rel[c->nst++] = c->out_len - c->out_off + 4; /* after ": t=" */
  out_append(c, stamp, sl);
  out_append(c, payload, n);
  if (g->chunked)
    out_append(c, "\r\n", 2);
}

static void
sse_data(struct server *s, struct gen *g, int len)
{
  if (len < 0 || (size_t)len >= sizeof(s->ev) - 2)
    return; /* cannot happen: every event is bounded well below the cap */
  s->ev[len++] = '\n';
  s->ev[len++] = '\n';
  sse_event(s, g, s->ev, (size_t)len);
}

static int
usage_json(char *buf, size_t cap, const struct gen *g, bool details)
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
static int
chunk_head(struct server *s, const struct gen *g, char *buf, size_t cap)
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
    usage_json(u, sizeof(u), g, false);
    return snprintf(buf, cap, ",\"usage\":%s}", u);
  }
  if (s->cfg->flavour == SIM_FLAVOUR_SGLANG)
    return snprintf(buf, cap, ",\"usage\":null}");
  return snprintf(buf, cap, "}");
}

static void
emit_role(struct server *s, struct gen *g)
{
  char *b = s->ev;
  size_t cap = sizeof(s->ev) - 2;
  int n = chunk_head(s, g, b, cap);
  n += snprintf(b + n, cap - (size_t)n,
                "[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":\"\"},"
                "\"logprobs\":null,\"finish_reason\":null}]");
  n += chunk_tail(s, g, b + n, cap - (size_t)n);
  sse_data(s, g, n);
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
static void
emit_tokens(struct server *s, struct gen *g, int64_t k, bool last)
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
  int n = chunk_head(s, g, b, cap);
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
  sse_data(s, g, n);
  s->st.tokens_sent += (uint64_t)k;
}

static void
emit_malformed(struct server *s, struct gen *g)
{
  static const char bad[] = "data: {\"malformed\": [1, 2, \n\n";
  sse_event(s, g, bad, sizeof(bad) - 1);
}

/* ------------------------------------------------------------------ */
/* request lifecycle */

static void try_admit(struct server *s, int64_t now);

static void
grp_remove(struct server *s, struct gen *g)
{
  int i = g->grp_i;
  if (i < 0)
    return;
  s->grp[i] = s->grp[--s->grp_n];
  s->grp[i]->grp_i = i;
  g->grp_i = -1;
}

/* Schedules the first token of a prefix-cache hit (see struct server). */
static int64_t
grp_join(struct server *s, struct gen *g, int64_t now)
{
  if (s->grp_n == 0 || s->grp_due <= now) {
    for (int i = 0; i < s->grp_n; i++)
      s->grp[i]->grp_i = -1;
    s->grp_n = 0;
    s->grp_start = now;
    s->grp_due = 0;
  }
  if (s->grp_n == s->grp_cap) {
    s->grp_cap = s->grp_cap ? s->grp_cap * 2 : 64;
    s->grp = tb_xrealloc(s->grp, (size_t)s->grp_cap * sizeof(*s->grp));
  }
  g->grp_i = s->grp_n;
  s->grp[s->grp_n++] = g;
  int64_t due = s->grp_start + ms_to_ns(s, sim_profile_cached_ms(s->p, s->running, (double)g->prompt));
  if (due > s->grp_due) {
    s->grp_due = due;
    for (int i = 0; i < s->grp_n; i++) {
      struct gen *m = s->grp[i];
      if (m->heap_i >= 0 && m->due < due) {
        m->due = due;
        heap_down(s, m->heap_i);
      }
    }
  }
  return s->grp_due;
}

/* Detaches g from every structure and releases its reservation. */
static void
gen_detach(struct server *s, struct gen *g)
{
  heap_remove(s, g);
  batch_remove(s, g);
  grp_remove(s, g);
  if (g->st == G_QUEUED)
    queue_remove(s, g);
  if (g->st == G_PREFILL || g->st == G_DECODE || g->st == G_STALL) {
    s->running--;
    s->kv_used -= g->need_kv;
  }
  g->c->gen = NULL;
}

static void
gen_free(struct server *s, struct gen *g)
{
  gen_detach(s, g);
  free(g);
}

static void
stream_headers(struct server *s, struct gen *g)
{
  struct conn *c = g->c;
  out_printf(c,
             "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream; charset=utf-8\r\n"
             "cache-control: no-cache\r\n%s\r\n",
             g->chunked ? "transfer-encoding: chunked\r\n" : "connection: close\r\n");
  conn_flush(s, c);
}

/* Non-streaming answer, once every token is generated. */
static void
reply_complete(struct server *s, struct gen *g)
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
  free(reason);
  free(content);
  struct conn *c = g->c;
  bool ka = !c->close_after;
  reply_json(s, c, 200, doc, ka);
}

/* The request is over (all tokens or aborted through the API): finish the
 * protocol, free the request, let the connection take its next request. */
static void
gen_finish(struct server *s, struct gen *g)
{
  struct conn *c = g->c;
  if (g->stream) {
    if (g->usage && !g->f.no_usage) {
      char *b = s->ev;
      size_t cap = sizeof(s->ev) - 2;
      int n = chunk_head(s, g, b, cap);
      char u[512];
      usage_json(u, sizeof(u), g, true);
      n += snprintf(b + n, cap - (size_t)n, "[],\"usage\":%s}", u);
      sse_data(s, g, n);
    }
    static const char done[] = "data: [DONE]\n\n";
    sse_event(s, g, done, sizeof(done) - 1);
    if (g->chunked)
      out_append(c, "0\r\n\r\n", 5);
    else
      c->close_after = true;
  } else {
    reply_complete(s, g);
  }
  s->st.completed++;
  gen_free(s, g);
  c->resume = true;
  todo_push(s, c);
  conn_flush(s, c);
}

/* Sends an API abort (SGLang /abort_request) to the client. */
static void
gen_abort_api(struct server *s, struct gen *g)
{
  g->finish = "abort";
  s->st.aborted++;
  if (g->stream && g->st != G_FIRSTBYTE) {
    if (g->chat && !g->role_sent)
      emit_role(s, g);
    g->role_sent = true;
    emit_tokens(s, g, 0, true);
  }
  if (g->st == G_FIRSTBYTE && g->stream)
    stream_headers(s, g);
  gen_finish(s, g);
}

/* Token bookkeeping after tokens were written: faults that trigger at a
 * token count.  Returns false when the stream left the batch or the
 * connection. */
static bool
after_tokens(struct server *s, struct gen *g, int64_t now)
{
  if (g->f.malformed_after >= 0 && !g->malformed_done && g->out >= g->f.malformed_after) {
    g->malformed_done = true;
    emit_malformed(s, g);
  }
  if (g->f.cut_after >= 0 && g->out >= g->f.cut_after) {
    flush_stamped(s, g->c); /* what came before the cut goes out first */
    conn_kill(s, g->c);
    return false;
  }
  if (g->f.stall_after >= 0 && !g->stall_done && g->out >= g->f.stall_after &&
      g->out < g->limit) {
    g->stall_done = true;
    batch_remove(s, g);
    g->st = G_STALL;
    heap_push(s, g, now + ms_to_ns(s, g->f.stall_ms));
    return false;
  }
  return true;
}

/* Prefill done: the first token. */
static void
first_token(struct server *s, struct gen *g, int64_t now)
{
  s->st.tokens_generated++;
  cache_insert(s, g->hash, g->prompt);
  s->st.prompt_tokens += (uint64_t)g->prompt;
  if (g->stream) {
    if (g->f.cut_after == 0) {
      conn_kill(s, g->c);
      return;
    }
    if (g->chat)
      emit_role(s, g);
    g->role_sent = true;
    emit_tokens(s, g, 1, g->limit == 1);
  } else {
    g->out = 1;
  }
  if (g->out >= g->limit) {
    gen_finish(s, g);
    return;
  }
  if (g->stream && !after_tokens(s, g, now)) {
    conn_flush(s, g->c);
    return;
  }
  batch_add(s, g, now);
  if (g->stream)
    conn_flush(s, g->c);
}

static void
start_prefill(struct server *s, struct gen *g, int64_t now)
{
  g->st = G_PREFILL;
  s->running++;
  s->kv_used += g->need_kv;
  struct cache_entry *e = cache_find(s, g->hash);
  int64_t due;
  if (e) {
    e->used = ++s->cache_clock;
    g->cache_hit = true;
    int64_t bs = s->p->block_size > 0 ? s->p->block_size : 1;
    g->cached_tokens = ((g->prompt - 1) / bs) * bs;
    s->st.cache_hits++;
    due = grp_join(s, g, now);
  } else {
    s->st.cache_misses++;
    int64_t start = s->lane_free > now ? s->lane_free : now;
    due = start + ms_to_ns(s, sim_profile_prefill_ms(s->p, (double)g->prompt));
    s->lane_free = due;
  }
  heap_push(s, g, due);
}

static void
try_admit(struct server *s, int64_t now)
{
  while (s->q_head) {
    struct gen *g = s->q_head;
    if (s->running >= s->p->max_running || s->kv_used + g->need_kv > s->p->kv_budget)
      return;
    queue_remove(s, g);
    start_prefill(s, g, now);
  }
}

static void
on_timer_gen(struct server *s, struct gen *g, int64_t now)
{
  switch (g->st) {
  case G_FIRSTBYTE:
    if (g->stream)
      stream_headers(s, g);
    queue_push(s, g);
    try_admit(s, now);
    break;
  case G_PREFILL:
    first_token(s, g, now);
    break;
  case G_STALL:
    batch_add(s, g, now);
    break;
  default:
    break;
  }
}

/* How far behind its schedule the decode loop may fall and still catch up. */
#define SIM_CATCHUP_NS (50 * 1000000LL)

/* A decode step, first phase: every stream in the batch advances one token;
 * the chunks are formatted and their connections queued, not sent (see the
 * design note at the top).  `now` is the step's time for the model. */
static void
decode_prepare(struct server *s, int64_t sched, int64_t now)
{
  int64_t t0 = now_ns();
  int n0 = s->batch_n;
  s->defer = true;
  s->prepared = true;
  s->prep_sched = sched;
  int k = s->cfg->spec_k;
  /* Iterate backwards: removals swap the last element into place i. */
  for (int i = s->batch_n - 1; i >= 0; i--) {
    if (i >= s->batch_n)
      continue;
    struct gen *g = s->batch[i];
    if (g->c->dead)
      continue;
    g->pending++;
    s->st.tokens_generated++;
    bool last = g->out + g->pending >= g->limit;
    if (!g->stream) {
      if (last) {
        g->out += g->pending;
        g->pending = 0;
        gen_finish(s, g);
      }
      continue;
    }
    if (g->pending < k && !last)
      continue;
    int64_t n = g->pending;
    g->pending = 0;
    emit_tokens(s, g, n, last);
    if (last) {
      gen_finish(s, g);
      continue;
    }
    after_tokens(s, g, now);
    conn_flush(s, g->c);
  }
  if (s->batch_n > 0) {
    double mean = (double)s->batch_prompt_sum / s->batch_n;
    int64_t d = ms_to_ns(s, sim_profile_step_ms(s->p, s->batch_n, mean));
    s->next_step = sched + d;
    /* A step that ran late (the process was preempted) is made up by the
     * next ones, so that throughput keeps to the model; only when far behind
     * (a stopped process) is the schedule reset rather than burst. */
    if (s->next_step < now - SIM_CATCHUP_NS)
      s->next_step = now;
  }
  s->defer = false;
  /* A prepare that was preempted must not make the next steps wake early
   * (the loop reads no input while it waits for the deadline): samples over
   * 4x the average are ignored, and the average is capped. */
  int64_t per = n0 > 0 ? (now_ns() - t0) / n0 : 0;
  if (s->prep_per_ns == 0)
    s->prep_per_ns = per < SIM_PREP_PER_MAX_NS ? per : SIM_PREP_PER_MAX_NS;
  else if (per < 4 * s->prep_per_ns)
    s->prep_per_ns = (7 * s->prep_per_ns + per) / 8;
}

/* Second phase, at the deadline: stamp and send, in batch order. */
static void
decode_send(struct server *s)
{
  s->prepared = false;
  int64_t late = now_ns() - s->prep_sched;
  s->st.steps++;
  if (late > 200000)
    s->st.late_steps++;
  if (late > s->st.max_late_ns)
    s->st.max_late_ns = late;
  for (int i = 0; i < s->fq_n; i++)
    if (s->fq[i]->fq)
      flush_stamped(s, s->fq[i]);
  s->fq_n = 0;
}

/* One decode step, both phases at once (the deadline has passed). */
static void
decode_step(struct server *s, int64_t sched, int64_t now)
{
  decode_prepare(s, sched, now);
  decode_send(s);
}

/* ------------------------------------------------------------------ */
/* routes */

static bool
flav(const struct server *s, enum sim_flavour f)
{
  return s->cfg->flavour == f;
}

static bool
auth_needed(const struct server *s, const char *path)
{
  if (s->cfg->api_key == NULL || strncmp(path, "/sim/", 5) == 0)
    return false;
  switch (s->cfg->flavour) {
  case SIM_FLAVOUR_VLLM:
    return strncmp(path, "/v1/", 4) == 0;
  case SIM_FLAVOUR_SGLANG:
    return strcmp(path, "/health") != 0 && strcmp(path, "/health_generate") != 0;
  default:
    return true;
  }
}

static bool
auth_ok(const struct server *s, const struct sim_http_req *r)
{
  if (!r->has_auth || strncasecmp(r->auth, "Bearer ", 7) != 0)
    return false;
  const char *k = r->auth + 7;
  while (*k == ' ')
    k++;
  size_t kl = strlen(k), want = strlen(s->cfg->api_key);
  return kl == want && tb_ct_equal(k, s->cfg->api_key, kl);
}

static json_t *
parse_body(struct server *s, struct conn *c, const struct sim_http_req *r)
{
  json_error_t je;
  json_t *doc = json_loadb(r->body, r->body_len, 0, &je);
  if (doc == NULL) {
    char msg[300];
    snprintf(msg, sizeof(msg), "JSON decode error: %s", je.text);
    reply_error(s, c, 400, msg, r->keep_alive);
    return NULL;
  }
  if (!json_is_object(doc)) {
    json_decref(doc);
    reply_error(s, c, 400, "request body must be a JSON object", r->keep_alive);
    return NULL;
  }
  return doc;
}

static bool
model_ok(struct server *s, struct conn *c, const struct sim_http_req *r, const json_t *body)
{
  const json_t *m = json_object_get(body, "model");
  if (m == NULL || json_is_null(m)) {
    if (flav(s, SIM_FLAVOUR_SGLANG))
      return true; /* SGLang serves its one model whatever is asked */
    reply_error(s, c, 400, "The 'model' field is required.", r->keep_alive);
    return false;
  }
  if (!json_is_string(m)) {
    reply_error(s, c, 400, "'model' must be a string", r->keep_alive);
    return false;
  }
  if (flav(s, SIM_FLAVOUR_SGLANG) || strcmp(json_string_value(m), s->p->model) == 0 ||
      strcmp(json_string_value(m), s->p->model_root) == 0)
    return true;
  char msg[700];
  snprintf(msg, sizeof(msg), "The model `%.500s` does not exist.", json_string_value(m));
  reply_error(s, c, 404, msg, r->keep_alive);
  return false;
}

/* Counts the prompt of a completions request: a string, an array of one
 * string, or an array of token ids. */
static int64_t
completion_prompt(const json_t *prompt, uint64_t *hash, const char **err)
{
  if (json_is_string(prompt))
    return sim_tok_prompt(json_string_value(prompt), json_string_length(prompt), hash, NULL,
                          NULL, NULL);
  if (json_is_array(prompt) && json_array_size(prompt) == 1 &&
      json_is_string(json_array_get(prompt, 0)))
    return completion_prompt(json_array_get(prompt, 0), hash, err);
  if (json_is_array(prompt) && json_array_size(prompt) > 0) {
    uint64_t h = 1469598103934665603ull;
    size_t i;
    const json_t *v;
    json_array_foreach(prompt, i, v) {
      if (!json_is_integer(v)) {
        *err = "prompt must be a string, a list of one string or a list of token ids";
        return -1;
      }
      h = (h ^ (uint64_t)json_integer_value(v)) * 1099511628211ull;
    }
    *hash = h;
    return (int64_t)json_array_size(prompt);
  }
  *err = "prompt must be a string, a list of one string or a list of token ids";
  return -1;
}

static void
handle_generate(struct server *s, struct conn *c, const struct sim_http_req *r, bool chat)
{
  json_t *body = parse_body(s, c, r);
  if (body == NULL)
    return;
  char err[400];
  const char *msg = NULL;
  struct gen *g = NULL;
  struct sim_fault f = s->cfg->fault;
  const json_t *sf = json_object_get(body, "sim_fault");
  if (json_is_string(sf) && !sim_fault_parse(&f, json_string_value(sf), err, sizeof(err))) {
    msg = err;
    goto bad;
  }
  if (r->fault[0] && !sim_fault_parse(&f, r->fault, err, sizeof(err))) {
    msg = err;
    goto bad;
  }
  if (!model_ok(s, c, r, body))
    goto out;
  uint64_t hash = 0;
  int64_t prompt;
  if (chat) {
    const json_t *agp = json_object_get(body, "add_generation_prompt");
    prompt = sim_tok_chat(json_object_get(body, "messages"), agp == NULL || json_is_true(agp),
                          &hash, NULL, NULL, NULL, &msg);
  } else {
    const json_t *pj = json_object_get(body, "prompt");
    prompt = pj ? completion_prompt(pj, &hash, &msg) : -1;
    if (pj == NULL)
      msg = "prompt is required";
  }
  if (prompt < 0)
    goto bad;
  const json_t *mt = json_object_get(body, "max_completion_tokens");
  if (mt == NULL || json_is_null(mt))
    mt = json_object_get(body, "max_tokens");
  int64_t max_tokens;
  if (mt == NULL || json_is_null(mt)) {
    max_tokens = s->p->max_model_len - prompt;
  } else if (!json_is_integer(mt) || json_integer_value(mt) < 1) {
    msg = "max_tokens must be an integer >= 1";
    goto bad;
  } else {
    max_tokens = json_integer_value(mt);
  }
  /* (compared without adding: max_tokens comes from the client, and
   * prompt + INT64_MAX would overflow) */
  if (prompt > s->p->max_model_len ||
      (mt != NULL && !json_is_null(mt) && max_tokens > s->p->max_model_len - prompt) ||
      max_tokens < 1) {
    int64_t mtok = max_tokens > 0 ? max_tokens : 0;
    snprintf(err, sizeof(err),
             "This model's maximum context length is %" PRId64 " tokens. However, you "
             "requested %" PRId64 " tokens (%" PRId64 " in the messages, %" PRId64
             " in the completion). Please reduce the length of the messages or completion.",
             s->p->max_model_len, mtok > INT64_MAX - prompt ? INT64_MAX : prompt + mtok,
             prompt, mtok);
    msg = err;
    goto bad;
  }
  const json_t *nj = json_object_get(body, "n");
  if (nj && !json_is_null(nj) && !(json_is_integer(nj) && json_integer_value(nj) == 1)) {
    msg = "tokbench-sim supports n = 1 only";
    goto bad;
  }
  const json_t *stream = json_object_get(body, "stream");
  const json_t *so = json_object_get(body, "stream_options");
  bool streaming = json_is_true(stream);
  if (so && !json_is_null(so) && !streaming) {
    msg = "Stream options can only be defined when `stream=True`.";
    goto bad;
  }
  if (so && !json_is_null(so) && !json_is_object(so)) {
    msg = "stream_options must be an object";
    goto bad;
  }
  s->st.requests++;
  if (f.status) {
    snprintf(err, sizeof(err), "simulated fault: status %d", f.status);
    reply_error(s, c, f.status, err, r->keep_alive);
    goto out;
  }
  if (f.refuse_ms > 0) {
    if (s->lfd >= 0) {
      (void)epoll_ctl(s->ep, EPOLL_CTL_DEL, s->lfd, NULL);
      close(s->lfd);
      s->lfd = -1;
    }
    s->relisten_at = now_ns() + ms_to_ns(s, f.refuse_ms);
    struct linger lg = { 1, 0 };
    (void)setsockopt(c->fd, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg));
    conn_kill(s, c);
    goto out;
  }

  g = tb_xcalloc(1, sizeof(*g));
  g->c = c;
  c->gen = g;
  g->chat = chat;
  g->stream = streaming;
  g->chunked = r->minor >= 1;
  g->usage = streaming && json_is_true(json_object_get(so, "include_usage"));
  g->cont_usage = streaming && json_is_true(json_object_get(so, "continuous_usage_stats"));
  g->prompt = prompt;
  g->max_tokens = max_tokens;
  g->limit = max_tokens;
  g->finish = "length";
  bool ignore_eos = json_is_true(json_object_get(body, "ignore_eos"));
  if (!ignore_eos && s->cfg->eos_after > 0 && s->cfg->eos_after < g->limit) {
    g->limit = s->cfg->eos_after;
    g->finish = "stop";
  }
  g->need_kv = prompt + max_tokens;
  if (g->need_kv > s->p->kv_budget)
    g->need_kv = s->p->kv_budget; /* never wait forever: the largest request fits alone */
  g->hash = hash;
  g->f = f;
  g->heap_i = g->batch_i = g->grp_i = -1;
  g->created = tb_time_real_us() / 1000000;
  s->id_counter++;
  if (flav(s, SIM_FLAVOUR_SGLANG))
    snprintf(g->id, sizeof(g->id), "%016" PRIx64 "%016" PRIx64, (uint64_t)getpid(),
             s->id_counter);
  else
    snprintf(g->id, sizeof(g->id), "%s-%016" PRIx64 "%08" PRIx64, chat ? "chatcmpl" : "cmpl",
             s->id_counter, (uint64_t)getpid());
  if (!r->keep_alive)
    c->close_after = true;
  int64_t now = now_ns();
  if (f.first_byte_ms > 0) {
    g->st = G_FIRSTBYTE;
    heap_push(s, g, now + ms_to_ns(s, f.first_byte_ms));
  } else {
    if (streaming)
      stream_headers(s, g);
    queue_push(s, g);
    /* The model's clock for this request starts when its bytes arrived, so
     * that our parsing time (a 1 MB prompt) does not add to its TTFT. */
    int64_t arrival = c->req_start > 0 && c->req_start < now ? c->req_start : now;
    try_admit(s, arrival);
  }
  goto out;
bad:
  reply_error(s, c, 400, msg ? msg : "bad request", r->keep_alive);
out:
  json_decref(body);
}

static void
handle_tokenize(struct server *s, struct conn *c, const struct sim_http_req *r)
{
  json_t *body = parse_body(s, c, r);
  if (body == NULL)
    return;
  int32_t *ids = NULL;
  size_t len = 0, cap = 0;
  const char *msg = NULL;
  int64_t count = -1;
  const json_t *messages = json_object_get(body, "messages");
  const json_t *prompt = json_object_get(body, "prompt");
  if (prompt == NULL && flav(s, SIM_FLAVOUR_SGLANG))
    prompt = json_object_get(body, "text");
  if (messages && !flav(s, SIM_FLAVOUR_SGLANG)) {
    const json_t *agp = json_object_get(body, "add_generation_prompt");
    count = sim_tok_chat(messages, agp == NULL || json_is_true(agp), NULL, &ids, &len, &cap,
                         &msg);
  } else if (json_is_string(prompt)) {
    const json_t *ast = json_object_get(body, "add_special_tokens");
    bool special = ast == NULL || json_is_true(ast);
    const char *t = json_string_value(prompt);
    size_t tn = json_string_length(prompt);
    if (special) {
      count = sim_tok_prompt(t, tn, NULL, &ids, &len, &cap);
    } else {
      sim_tok_ids(t, tn, &ids, &len, &cap);
      count = (int64_t)len;
    }
  } else {
    msg = flav(s, SIM_FLAVOUR_SGLANG) ? "prompt (text) is required"
                                      : "either prompt or messages is required";
  }
  if (count < 0) {
    reply_error(s, c, 400, msg ? msg : "bad request", r->keep_alive);
    goto out;
  }
  json_t *toks = json_array();
  for (size_t i = 0; i < len; i++)
    json_array_append_new(toks, json_integer(ids[i]));
  json_t *doc = json_pack("{s:I, s:I, s:o, s:n}", "count", (json_int_t)count, "max_model_len",
                          (json_int_t)s->p->max_model_len, "tokens", toks, "token_strs");
  reply_json(s, c, 200, doc, r->keep_alive);
out:
  free(ids);
  json_decref(body);
}

static void
handle_models(struct server *s, struct conn *c, const struct sim_http_req *r)
{
  json_t *m = json_pack("{s:s, s:s, s:I, s:s}", "id", s->p->model, "object", "model",
                        "created", (json_int_t)(tb_time_real_us() / 1000000), "owned_by",
                        flav(s, SIM_FLAVOUR_SGLANG) ? "sglang"
                        : flav(s, SIM_FLAVOUR_VLLM) ? "vllm" : "system");
  if (!flav(s, SIM_FLAVOUR_OPENAI)) {
    json_object_set_new(m, "root", json_string(s->p->model_root));
    json_object_set_new(m, "parent", json_null());
    json_object_set_new(m, "max_model_len", json_integer(s->p->max_model_len));
  }
  reply_json(s, c, 200, json_pack("{s:s, s:[o]}", "object", "list", "data", m),
             r->keep_alive);
}

static double
gen_throughput(const struct server *s)
{
  if (s->batch_n == 0)
    return 0;
  double mean = (double)s->batch_prompt_sum / s->batch_n;
  return s->batch_n * 1000.0 * s->cfg->time_scale / sim_profile_step_ms(s->p, s->batch_n, mean);
}

static int64_t
kv_in_use(const struct server *s)
{
  int64_t t = 0;
  for (int i = 0; i < s->batch_n; i++)
    t += s->batch[i]->prompt + s->batch[i]->out;
  return t;
}

static void
handle_metrics(struct server *s, struct conn *c, const struct sim_http_req *r)
{
  struct conn tmp = { 0 };
  char lab[700];
  double usage = (double)kv_in_use(s) / (double)s->p->kv_budget;
  if (flav(s, SIM_FLAVOUR_VLLM)) {
    snprintf(lab, sizeof(lab), "model_name=%s,engine=\"0\"", s->model_json);
    int64_t bs = s->p->block_size;
    out_printf(&tmp,
               "# HELP vllm:cache_config_info Information of the LLMEngine CacheConfig\n"
               "# TYPE vllm:cache_config_info gauge\n"
               "vllm:cache_config_info{block_size=\"%" PRId64 "\",cache_dtype=\"auto\","
               "enable_prefix_caching=\"True\",engine=\"0\",gpu_memory_utilization=\"0.9\","
               "kv_cache_size_tokens=\"%" PRId64 "\",num_cpu_blocks=\"0\","
               "num_gpu_blocks=\"%" PRId64 "\"} 1.0\n",
               bs, s->p->kv_budget, s->p->kv_budget / bs);
    out_printf(&tmp,
               "# HELP vllm:num_requests_running Number of requests in model execution batches.\n"
               "# TYPE vllm:num_requests_running gauge\nvllm:num_requests_running{%s} %d.0\n"
               "# HELP vllm:num_requests_waiting Number of requests waiting to be processed.\n"
               "# TYPE vllm:num_requests_waiting gauge\nvllm:num_requests_waiting{%s} %d.0\n"
               "# HELP vllm:kv_cache_usage_perc KV-cache usage. 1 means 100 percent usage.\n"
               "# TYPE vllm:kv_cache_usage_perc gauge\nvllm:kv_cache_usage_perc{%s} %.6f\n"
               "# HELP vllm:prompt_tokens_total Number of prefill tokens processed.\n"
               "# TYPE vllm:prompt_tokens_total counter\nvllm:prompt_tokens_total{%s} %" PRIu64
               ".0\n"
               "# HELP vllm:generation_tokens_total Number of generation tokens processed.\n"
               "# TYPE vllm:generation_tokens_total counter\n"
               "vllm:generation_tokens_total{%s} %" PRIu64 ".0\n"
               "# HELP vllm:prefix_cache_hits_total Prefix cache hits, in terms of number of "
               "cached tokens.\n# TYPE vllm:prefix_cache_hits_total counter\n"
               "vllm:prefix_cache_hits_total{%s} %" PRIu64 ".0\n",
               lab, s->running, lab, s->q_n, lab, usage, lab, s->st.prompt_tokens, lab,
               s->st.tokens_generated, lab, s->st.cache_hits);
  } else {
    snprintf(lab, sizeof(lab), "model_name=%s", s->model_json);
    out_printf(&tmp,
               "# HELP sglang:num_running_reqs The number of running requests.\n"
               "# TYPE sglang:num_running_reqs gauge\nsglang:num_running_reqs{%s} %d.0\n"
               "# HELP sglang:num_queue_reqs The number of requests in the waiting queue.\n"
               "# TYPE sglang:num_queue_reqs gauge\nsglang:num_queue_reqs{%s} %d.0\n"
               "# HELP sglang:gen_throughput The generation throughput (token/s).\n"
               "# TYPE sglang:gen_throughput gauge\nsglang:gen_throughput{%s} %.3f\n"
               "# HELP sglang:token_usage The token usage.\n"
               "# TYPE sglang:token_usage gauge\nsglang:token_usage{%s} %.6f\n"
               "# HELP sglang:num_used_tokens The number of used tokens.\n"
               "# TYPE sglang:num_used_tokens gauge\nsglang:num_used_tokens{%s} %" PRId64
               ".0\n"
               "# HELP sglang:prompt_tokens_total Number of prefill tokens processed.\n"
               "# TYPE sglang:prompt_tokens_total counter\nsglang:prompt_tokens_total{%s} "
               "%" PRIu64 ".0\n"
               "# HELP sglang:generation_tokens_total Number of generation tokens processed.\n"
               "# TYPE sglang:generation_tokens_total counter\n"
               "sglang:generation_tokens_total{%s} %" PRIu64 ".0\n",
               lab, s->running, lab, s->q_n, lab, gen_throughput(s), lab, usage, lab,
               kv_in_use(s), lab, s->st.prompt_tokens, lab, s->st.tokens_generated);
  }
  reply_raw(s, c, 200, "text/plain; version=0.0.4; charset=utf-8", tmp.out, tmp.out_len,
            r->keep_alive);
  free(tmp.out);
}

static void
handle_server_info(struct server *s, struct conn *c, const struct sim_http_req *r)
{
  json_t *doc = json_pack(
    "{s:s, s:s, s:I, s:I, s:I, s:I, s:s, s:I, s:b, s:s}", "model_path", s->p->model_root,
    "served_model_name", s->p->model, "context_length", (json_int_t)s->p->max_model_len,
    "max_total_num_tokens", (json_int_t)s->p->kv_budget, "max_running_requests",
    (json_int_t)s->p->max_running, "page_size", (json_int_t)s->p->block_size, "version",
    s->p->engine_version, "tp_size", (json_int_t)json_integer_value(
      json_object_get(s->p->engine, "gpu_count")),
    "enable_metrics", 1, "hardware", s->p->hardware);
  json_object_set_new(doc, "internal_states",
                      json_pack("[{s:I, s:I}]", "max_total_num_tokens",
                                (json_int_t)s->p->kv_budget, "max_running_requests",
                                (json_int_t)s->p->max_running));
  reply_json(s, c, 200, doc, r->keep_alive);
}

static void
handle_abort(struct server *s, struct conn *c, const struct sim_http_req *r)
{
  json_t *body = parse_body(s, c, r);
  if (body == NULL)
    return;
  bool all = json_is_true(json_object_get(body, "abort_all"));
  const char *rid = json_string_value(json_object_get(body, "rid"));
  int n = 0;
  /* Collect first: finishing a request edits the lists we walk. */
  struct gen **victims = NULL;
  int nv = 0, cv = 0;
  for (struct conn *k = s->conns; k; k = k->next) {
    struct gen *g = k->gen;
    if (g == NULL || k->dead || k == c)
      continue;
    if (all || (rid && strcmp(rid, g->id) == 0)) {
      if (nv == cv) {
        cv = cv ? cv * 2 : 16;
        victims = tb_xrealloc(victims, (size_t)cv * sizeof(*victims));
      }
      victims[nv++] = g;
    }
  }
  for (int i = 0; i < nv; i++, n++)
    gen_abort_api(s, victims[i]);
  free(victims);
  json_decref(body);
  try_admit(s, now_ns());
  reply_json(s, c, 200, json_pack("{s:i}", "aborted", n), r->keep_alive);
}

static void
handle_expected(struct server *s, struct conn *c, const struct sim_http_req *r)
{
  char v[64];
  int64_t ctx = 0, conc = 1, mt = 4096;
  if (!sim_http_query(r->query, "context", v, sizeof(v)) || !tb_parse_tokens(v, &ctx) ||
      ctx < 1 || ctx > (1LL << 40)) {
    reply_error(s, c, 400, "context=<tokens> is required (e.g. 8192 or 8K)", r->keep_alive);
    return;
  }
  if (sim_http_query(r->query, "concurrency", v, sizeof(v)) &&
      !tb_parse_i64(v, 1, 1000000, &conc)) {
    reply_error(s, c, 400, "concurrency must be an integer >= 1", r->keep_alive);
    return;
  }
  if (sim_http_query(r->query, "max_tokens", v, sizeof(v)) &&
      !tb_parse_tokens(v, &mt)) {
    reply_error(s, c, 400, "max_tokens must be a token count", r->keep_alive);
    return;
  }
  json_t *doc = sim_profile_expected(s->p, ctx, conc, mt, s->cfg->time_scale);
  json_object_set_new(doc, "spec_k", json_integer(s->cfg->spec_k));
  json_object_set_new(doc, "chunk_interval_ms",
                      json_real(json_number_value(json_object_get(doc, "tbt_ms")) *
                                s->cfg->spec_k));
  reply_json(s, c, 200, doc, r->keep_alive);
}

static void
handle_stats(struct server *s, struct conn *c, const struct sim_http_req *r)
{
  json_t *doc = json_pack(
    "{s:I, s:I, s:I, s:I, s:I, s:i, s:i, s:i, s:i, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, "
    "s:I, s:f}",
    "requests", (json_int_t)s->st.requests, "tokens_generated",
    (json_int_t)s->st.tokens_generated, "completed", (json_int_t)s->st.completed, "aborted",
    (json_int_t)s->st.aborted, "tokens_sent", (json_int_t)s->st.tokens_sent, "active",
    s->running, "running", s->running, "waiting", s->q_n, "batch", s->batch_n,
    "prompt_tokens", (json_int_t)s->st.prompt_tokens, "cache_hits",
    (json_int_t)s->st.cache_hits, "cache_misses", (json_int_t)s->st.cache_misses,
    "kv_reserved_tokens", (json_int_t)s->kv_used, "kv_budget_tokens",
    (json_int_t)s->p->kv_budget, "steps", (json_int_t)s->st.steps, "late_steps",
    (json_int_t)s->st.late_steps, "errors", (json_int_t)s->st.errors, "connections",
    (json_int_t)s->nconns, "connections_total", (json_int_t)s->st.conns_total,
    "max_late_ms", (double)s->st.max_late_ns / 1e6);
  reply_json(s, c, 200, doc, r->keep_alive);
}

static void
handle_version(struct server *s, struct conn *c, const struct sim_http_req *r)
{
  reply_json(s, c, 200, json_pack("{s:s}", "version", s->p->engine_version), r->keep_alive);
}

static void
handle_health(struct server *s, struct conn *c, const struct sim_http_req *r)
{
  reply_raw(s, c, 200, "application/json", "", 0, r->keep_alive);
}

static void
handle_model_info(struct server *s, struct conn *c, const struct sim_http_req *r)
{
  reply_json(s, c, 200,
             json_pack("{s:s, s:s, s:b}", "model_path", s->p->model_root, "tokenizer_path",
                       s->p->model_root, "is_generation", 1),
             r->keep_alive);
}

static void
handle_chat(struct server *s, struct conn *c, const struct sim_http_req *r)
{
  handle_generate(s, c, r, true);
}

static void
handle_completions(struct server *s, struct conn *c, const struct sim_http_req *r)
{
  handle_generate(s, c, r, false);
}

enum { F_V = 1, F_S = 2, F_O = 4, F_ALL = 7 };

struct route {
  enum sim_http_method method;
  const char *path;
  int flavours;
  void (*fn)(struct server *, struct conn *, const struct sim_http_req *);
};

static const struct route routes[] = {
  { SIM_HTTP_POST, "/v1/chat/completions", F_ALL, handle_chat },
  { SIM_HTTP_POST, "/v1/completions", F_ALL, handle_completions },
  { SIM_HTTP_GET, "/v1/models", F_ALL, handle_models },
  { SIM_HTTP_GET, "/health", F_ALL, handle_health },
  { SIM_HTTP_GET, "/health_generate", F_S, handle_health },
  { SIM_HTTP_POST, "/tokenize", F_V | F_S, handle_tokenize },
  { SIM_HTTP_GET, "/version", F_V, handle_version },
  { SIM_HTTP_GET, "/metrics", F_V | F_S, handle_metrics },
  { SIM_HTTP_GET, "/get_server_info", F_S, handle_server_info },
  { SIM_HTTP_GET, "/server_info", F_S, handle_server_info },
  { SIM_HTTP_GET, "/get_model_info", F_S, handle_model_info },
  { SIM_HTTP_POST, "/abort_request", F_S, handle_abort },
  { SIM_HTTP_GET, "/sim/expected", F_ALL, handle_expected },
  { SIM_HTTP_GET, "/sim/stats", F_ALL, handle_stats },
};

static void
dispatch(struct server *s, struct conn *c, const struct sim_http_req *r)
{
  int fbit = flav(s, SIM_FLAVOUR_VLLM) ? F_V : flav(s, SIM_FLAVOUR_SGLANG) ? F_S : F_O;
  bool path_known = false;
  if (auth_needed(s, r->path) && !auth_ok(s, r)) {
    reply_error(s, c, 401, "Unauthorized", r->keep_alive);
    return;
  }
  for (size_t i = 0; i < TB_ARRAY_LEN(routes); i++) {
    if (!(routes[i].flavours & fbit) || strcmp(routes[i].path, r->path) != 0)
      continue;
    path_known = true;
    if (routes[i].method == r->method) {
      routes[i].fn(s, c, r);
      return;
    }
  }
  if (path_known)
    reply_raw(s, c, 405, "application/json", "{\"detail\":\"Method Not Allowed\"}", 31,
              r->keep_alive);
  else
    reply_raw(s, c, 404, "application/json", "{\"detail\":\"Not Found\"}", 22, r->keep_alive);
}

/* ------------------------------------------------------------------ */
/* connections */

/* Parses and serves buffered requests until one is in progress or more
 * bytes are needed. */
static void
conn_process(struct server *s, struct conn *c)
{
  size_t used = 0;
  while (!c->dead && !c->draining && c->gen == NULL && !c->close_after) {
    struct sim_http_req req;
    int status = 0;
    enum sim_http_result res = sim_http_parse(c->in + used, c->in_len - used, &req, &status);
    if (res == SIM_HTTP_NEED_MORE) {
      if (req.head_len > 0 && req.expect_continue && !c->sent_continue) {
        c->sent_continue = true;
        out_printf(c, "HTTP/1.1 100 Continue\r\n\r\n");
        conn_flush(s, c);
      }
      break;
    }
    if (res == SIM_HTTP_ERROR) {
      char msg[64];
      snprintf(msg, sizeof(msg), "malformed or oversized request (%d)", status);
      used = c->in_len;
      reply_error(s, c, status, msg, false);
      break;
    }
    c->sent_continue = false;
    dispatch(s, c, &req);
    used += req.total_len;
  }
  if (used > 0) {
    memmove(c->in, c->in + used, c->in_len - used);
    c->in_len -= used;
    c->req_start = now_ns(); /* a pipelined request starts now */
  }
}

static void
conn_read(struct server *s, struct conn *c)
{
  for (;;) {
    if (c->in_cap - c->in_len < 4096) {
      if (c->in_cap >= SIM_IN_CAP) {
        if (c->gen || c->draining) {
          if (c->draining) {
            c->in_len = 0;
            continue;
          }
          conn_kill(s, c); /* pipelining this much while streaming: abusive */
          return;
        }
        break; /* parser will reject it */
      }
      size_t cap = c->in_cap * 2;
      if (cap > SIM_IN_CAP)
        cap = SIM_IN_CAP;
      c->in = tb_xrealloc(c->in, cap);
      c->in_cap = cap;
    }
    ssize_t n = recv(c->fd, c->in + c->in_len, c->in_cap - c->in_len, 0);
    if (n > 0) {
      c->last_active = now_ns();
      if (c->in_len == 0)
        c->req_start = c->last_active;
      c->in_len += (size_t)n;
      if (c->draining)
        c->in_len = 0;
      continue;
    }
    if (n < 0 && errno == EINTR)
      continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
      break;
    /* EOF or error: the client went away; its request is aborted. */
    conn_kill(s, c);
    return;
  }
  conn_process(s, c);
}

static void
conn_new(struct server *s, int fd)
{
  if (s->nconns >= s->cfg->max_conns) {
    close(fd);
    return;
  }
  int one = 1;
  (void)setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  struct conn *c = tb_xcalloc(1, sizeof(*c));
  c->kind = KIND_CONN;
  c->fd = fd;
  c->in_cap = SIM_IN_INIT;
  c->in = tb_xmalloc(c->in_cap);
  c->last_active = now_ns();
  struct epoll_event ev = { .events = EPOLLIN | EPOLLRDHUP, .data.ptr = c };
  if (epoll_ctl(s->ep, EPOLL_CTL_ADD, fd, &ev) < 0) {
    free(c->in);
    free(c);
    close(fd);
    return;
  }
  c->next = s->conns;
  if (s->conns)
    s->conns->prev = c;
  s->conns = c;
  s->nconns++;
  s->st.conns_total++;
}

static void
conn_free(struct server *s, struct conn *c)
{
  if (c->gen) {
    s->st.aborted++;
    gen_free(s, c->gen);
  }
  if (c->prev)
    c->prev->next = c->next;
  else
    s->conns = c->next;
  if (c->next)
    c->next->prev = c->prev;
  s->nconns--;
  close(c->fd);
  free(c->in);
  free(c->out);
  free(c);
}

/* Frees dead connections, resumes finished ones; then admits. */
static void
reap(struct server *s)
{
  bool freed = false;
  while (s->todo) {
    struct conn *c = s->todo;
    s->todo = c->todo_next == c ? NULL : c->todo_next;
    c->todo_next = NULL;
    if (c->dead) {
      conn_free(s, c);
      freed = true;
    } else if (c->resume) {
      c->resume = false;
      conn_process(s, c);
    }
  }
  if (freed)
    try_admit(s, now_ns());
}

/* ------------------------------------------------------------------ */
/* loop */

static int
open_listener(struct server *s)
{
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0)
    return -1;
  int one = 1;
  (void)setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  if (bind(fd, (struct sockaddr *)&s->addr, sizeof(s->addr)) < 0 || listen(fd, 4096) < 0) {
    close(fd);
    return -1;
  }
  struct epoll_event ev = { .events = EPOLLIN, .data.ptr = &s->listen_kind };
  if (epoll_ctl(s->ep, EPOLL_CTL_ADD, fd, &ev) < 0) {
    close(fd);
    return -1;
  }
  return fd;
}

static void
do_accept(struct server *s)
{
  for (int i = 0; i < 256 && s->lfd >= 0; i++) {
    int fd = accept4(s->lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0)
      return;
    conn_new(s, fd);
  }
}

static void
housekeeping(struct server *s, int64_t now)
{
  for (struct conn *c = s->conns; c; c = c->next) {
    if (c->dead || c->gen)
      continue;
    int64_t idle = now - c->last_active;
    if ((c->draining && idle > SIM_DRAIN_NS) || (c->in_len > 0 && idle > SIM_PARTIAL_NS) ||
        idle > SIM_IDLE_NS)
      conn_kill(s, c);
  }
}

static void
run_timers(struct server *s)
{
  int64_t now = now_ns();
  if (s->prepared && s->prep_sched <= now) {
    decode_send(s);
    now = now_ns();
  }
  while (s->heap_n > 0 && s->heap[0]->due <= now) {
    struct gen *g = s->heap[0];
    heap_remove(s, g);
    if (!g->c->dead)
      on_timer_gen(s, g, now);
  }
  if (s->batch_n > 0 && s->next_step <= now)
    decode_step(s, s->next_step, now);
  if (s->relisten_at && s->relisten_at <= now) {
    s->lfd = open_listener(s);
    s->relisten_at = s->lfd >= 0 ? 0 : now + 10000000;
  }
  if (now >= s->next_house) {
    housekeeping(s, now);
    s->next_house = now + 1000000000LL;
  }
}

static int64_t
next_deadline(const struct server *s)
{
  if (s->prepared)
    return s->prep_sched;
  int64_t next = s->next_house;
  if (s->heap_n > 0 && s->heap[0]->due < next)
    next = s->heap[0]->due;
  if (s->batch_n > 0 && s->next_step < next)
    next = s->next_step;
  if (s->relisten_at && s->relisten_at < next)
    next = s->relisten_at;
  return next;
}

/* True when the next deadline is a decode step and nothing else is due
 * before it: its chunks may be prepared ahead. */
static bool
step_is_next(const struct server *s)
{
  return !s->prepared && s->batch_n > 0 && next_deadline(s) == s->next_step &&
         (s->heap_n == 0 || s->heap[0]->due > s->next_step);
}

/* How long before a deadline the loop must be awake for it. */
static int64_t
lead_ns(const struct server *s)
{
  if (!step_is_next(s))
    return SIM_SPIN_NS;
  int64_t prep = s->prep_per_ns * s->batch_n;
  return SIM_SPIN_NS + (prep < SIM_PREP_MAX_NS ? prep : SIM_PREP_MAX_NS);
}

/* Runs the deadlines that are less than lead_ns() away, spinning until
 * each is due (a few rounds at most, so input is never starved); a decode
 * step is prepared first and sent at its deadline. */
static void
spin_timers(struct server *s)
{
  for (int round = 0; round < 8; round++) {
    int64_t d = next_deadline(s), now = now_ns();
    if (d - now > lead_ns(s))
      return;
    if (step_is_next(s)) {
      /* prepare the step's bytes now, stamp and send them at d */
      decode_prepare(s, d, now > d ? now : d);
      d = s->prep_sched;
      now = now_ns();
    }
    while (now < d)
      now = now_ns();
    run_timers(s);
  }
}

static void
arm_timer(struct server *s)
{
  int64_t next = next_deadline(s) - lead_ns(s);
  if (next == s->armed)
    return;
  if (next <= 0)
    next = 1;
  struct itimerspec its = { .it_value = { .tv_sec = next / 1000000000LL,
                                          .tv_nsec = next % 1000000000LL } };
  (void)timerfd_settime(s->tfd, TFD_TIMER_ABSTIME, &its, NULL);
  s->armed = next;
}

bool
sim_flavour_parse(const char *str, enum sim_flavour *out)
{
  if (strcmp(str, "vllm") == 0)
    *out = SIM_FLAVOUR_VLLM;
  else if (strcmp(str, "sglang") == 0)
    *out = SIM_FLAVOUR_SGLANG;
  else if (strcmp(str, "openai") == 0)
    *out = SIM_FLAVOUR_OPENAI;
  else
    return false;
  return true;
}

int
sim_server_run(const struct sim_config *cfg)
{
  int rc = 1;
  struct server *s = tb_xcalloc(1, sizeof(*s));
  s->cfg = cfg;
  s->p = cfg->profile;
  s->ep = s->lfd = s->tfd = s->sfd = -1;
  s->listen_kind = KIND_LISTEN;
  s->timer_kind = KIND_TIMER;
  s->signal_kind = KIND_SIGNAL;
  json_t *ms = json_string(s->p->model);
  char *mj = ms ? json_dumps(ms, JSON_ENCODE_ANY) : NULL;
  json_decref(ms);
  snprintf(s->model_json, sizeof(s->model_json), "%s", mj ? mj : "\"model\"");
  free(mj);

  (void)prctl(PR_SET_TIMERSLACK, 1UL, 0, 0, 0);
  if (cfg->realtime) {
    /* Best effort: other processes on the core must not delay a step. */
    struct sched_param sp = { .sched_priority = 10 };
    if (sched_setscheduler(0, SCHED_FIFO, &sp) != 0)
      fprintf(stderr, "tokbench-sim: --realtime: %s (going on without)\n", strerror(errno));
    (void)mlockall(MCL_CURRENT | MCL_FUTURE);
  }
  struct rlimit rl;
  if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
    rl.rlim_cur = rl.rlim_max;
    (void)setrlimit(RLIMIT_NOFILE, &rl);
  }
  sigset_t mask;
  sigemptyset(&mask);
  sigaddset(&mask, SIGTERM);
  sigaddset(&mask, SIGINT);
  sigprocmask(SIG_BLOCK, &mask, NULL);
  signal(SIGPIPE, SIG_IGN);

  s->ep = epoll_create1(EPOLL_CLOEXEC);
  s->tfd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
  s->sfd = signalfd(-1, &mask, SFD_NONBLOCK | SFD_CLOEXEC);
  if (s->ep < 0 || s->tfd < 0 || s->sfd < 0) {
    perror("tokbench-sim: epoll/timerfd/signalfd");
    goto out;
  }
  struct epoll_event ev = { .events = EPOLLIN, .data.ptr = &s->timer_kind };
  epoll_ctl(s->ep, EPOLL_CTL_ADD, s->tfd, &ev);
  ev.data.ptr = &s->signal_kind;
  epoll_ctl(s->ep, EPOLL_CTL_ADD, s->sfd, &ev);

  s->addr.sin_family = AF_INET;
  s->addr.sin_port = htons((uint16_t)cfg->port);
  if (inet_pton(AF_INET, cfg->host ? cfg->host : "127.0.0.1", &s->addr.sin_addr) != 1) {
    fprintf(stderr, "tokbench-sim: bad listen address %s\n", cfg->host);
    goto out;
  }
  s->lfd = open_listener(s);
  if (s->lfd < 0) {
    fprintf(stderr, "tokbench-sim: cannot listen on %s:%d: %s\n",
            cfg->host ? cfg->host : "127.0.0.1", cfg->port, strerror(errno));
    goto out;
  }
  socklen_t al = sizeof(s->addr);
  getsockname(s->lfd, (struct sockaddr *)&s->addr, &al);
  printf("tokbench-sim: listening on %s:%d (profile %s, flavour %s, time scale %g)\n",
         cfg->host ? cfg->host : "127.0.0.1", ntohs(s->addr.sin_port), s->p->name,
         flav(s, SIM_FLAVOUR_VLLM) ? "vllm" : flav(s, SIM_FLAVOUR_SGLANG) ? "sglang" : "openai",
         cfg->time_scale);
  fflush(stdout);
  s->next_house = now_ns() + 1000000000LL;

  struct epoll_event evs[SIM_MAX_EVENTS];
  while (!s->stop) {
    arm_timer(s);
    int n = epoll_wait(s->ep, evs, SIM_MAX_EVENTS, -1);
    if (n < 0) {
      if (errno == EINTR)
        continue;
      perror("tokbench-sim: epoll_wait");
      break;
    }
    for (int i = 0; i < n; i++) {
      int kind = *(int *)evs[i].data.ptr;
      if (kind == KIND_LISTEN) {
        do_accept(s);
      } else if (kind == KIND_TIMER) {
        uint64_t x;
        if (read(s->tfd, &x, sizeof(x)) < 0) {
          /* EAGAIN: nothing to do */
        }
        s->armed = 0;
      } else if (kind == KIND_SIGNAL) {
        struct signalfd_siginfo si;
        if (read(s->sfd, &si, sizeof(si)) > 0)
          s->stop = true;
      } else {
        struct conn *c = evs[i].data.ptr;
        if (c->dead)
          continue;
        if (evs[i].events & EPOLLOUT)
          conn_flush(s, c);
        if (!c->dead && (evs[i].events & (EPOLLIN | EPOLLRDHUP | EPOLLHUP | EPOLLERR)))
          conn_read(s, c);
      }
    }
    run_timers(s);
    spin_timers(s);
    reap(s);
  }
  rc = 0;
out:
  while (s->conns) {
    conn_kill(s, s->conns);
    reap(s);
  }
  if (s->lfd >= 0)
    close(s->lfd);
  if (s->tfd >= 0)
    close(s->tfd);
  if (s->sfd >= 0)
    close(s->sfd);
  if (s->ep >= 0)
    close(s->ep);
  free(s->heap);
  free(s->fq);
  free(s->batch);
  free(s->grp);
  free(s);
  return rc;
}
