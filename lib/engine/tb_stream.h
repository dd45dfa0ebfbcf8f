/*
 * tb_stream: one consumer of a streamed OpenAI completion, for the
 * matrix's streams (tb_engine) and the rate cells' requests (tb_rate)
 * alike (issue 22, item 2).
 *
 * Its owner hands it the response as it comes, on whichever transport:
 * the HTTP status and the body's bytes, each read with its arrival stamp
 * (the kernel's receive stamp, tb_rxts), and tells it when the response
 * ended.  The stream frames the body as SSE (tb_sse), counts output tokens
 * and usage (tb_oai), stamps its tokens and keeps its samples: first token,
 * last token, last byte, the gaps between token chunks (the longest, and
 * each one into the cell's sample when it keeps one), and its tokens
 * inside the cell's window (the matrix's per-stream time between tokens).
 * It decides how the stream fails and says why in one line: an SSE line or
 * event over its cap, the cell's SSE memory budget spent, a malformed chunk
 * or an error in the stream (tb_oai), a first token or a byte overdue (a
 * stall), and at its end a transport error, an HTTP status (with the start
 * of the error body where the owner allows it), a stream cut inside an
 * event or before [DONE], a missing usage chunk, a stream ended early (the
 * server ignored max_tokens) or without any token.
 *
 * It owns no socket and reads no clock: every time is given, so that it can
 * be driven with plain byte buffers and made-up stamps (tests/unit/
 * test_stream.c).  The texts of its reasons are the matrix's and the rate
 * cells' as each always wrote them (struct tb_stream_cell.kind).
 *
 * A cell's streams share a struct tb_stream_cell (the memory budget, the
 * window, the callbacks); everything runs on the cell's one thread.
 *
 * Beside it, what both cell kinds ask of the server once their streams are
 * gone: is it drained (running = waiting = 0), and the wait for it.
 */
#ifndef TB_STREAM_H
#define TB_STREAM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "engine/tb_discover.h"
#include "net/tb_oai.h"
#include "net/tb_sse.h"
#include "base/tb_stats.h"
#include "base/tb_util.h"

/* Bytes of an HTTP error's body a stream keeps (the reason shows at most
 * 200 of them). */
#define TB_STREAM_ERRBODY_MAX 256
/* Without usage a stream's chunks are counted, and one chunk may carry
 * several tokens (speculative decoding): such a stream ended early only
 * when its chunks are fewer than max_tokens / this. */
#define TB_STREAM_EARLY_CHUNK_DIV 8
/* The drain wait polls /metrics this often. */
#define TB_STREAM_DRAIN_POLL_NS 20000000L

/* Whose texts the reasons are in: the matrix's ("stream stalled: no data
 * for 2.0 s") or the rate cells' ("stream stalled: no token for 2.0 s", a
 * shorter error body, reasons cut at 159 bytes). */
enum tb_stream_kind {
  TB_STREAM_MATRIX,
  TB_STREAM_RATE
};

/* Which rule of tb_stream_end failed a stream; NONE: it ended cleanly, or
 * it had failed before its end. */
enum tb_stream_end_rule {
  TB_STREAM_END_NONE = 0,
  TB_STREAM_END_TRANSPORT, /* the transport's error */
  TB_STREAM_END_HTTP,      /* a status other than 200 */
  TB_STREAM_END_SSE,       /* inside an SSE event */
  TB_STREAM_END_CUT,       /* before [DONE] */
  TB_STREAM_END_USAGE,     /* without its usage chunk */
  TB_STREAM_END_EARLY,     /* before max_tokens */
  TB_STREAM_END_NO_TOKEN,  /* without an output token */
};

struct tb_stream;

/* Flags of tokens(): the stream's first tokens; they arrived inside the
 * cell's window. */
#define TB_STREAM_FIRST 1u
#define TB_STREAM_IN_WINDOW 2u

/* What a stream tells its owner, on the cell's thread, from inside
 * tb_stream_body; cls is the stream's (tb_stream_init).  Each may be NULL. */
struct tb_stream_ops {
  /* An event's data (NUL-terminated, borrowed for the call), counted
   * (delta: the output tokens it adds) but not yet stamped; never [DONE].
   * false fails the stream (call tb_stream_fail first): its tokens are
   * then not counted. */
  bool (*event)(void *cls, struct tb_stream *s, const char *data, size_t len, int64_t delta);
  /* delta > 0 output tokens arrived at s->now and were counted (flags:
   * TB_STREAM_FIRST, TB_STREAM_IN_WINDOW). */
  void (*tokens)(void *cls, struct tb_stream *s, int64_t delta, unsigned flags);
  /* An SSE comment line, after the ':' (not NUL-terminated).  NULL: the
   * parser skips comments. */
  void (*comment)(void *cls, struct tb_stream *s, const char *text, size_t len);
};

/* What the streams of one cell share: the cell owns it, each stream
 * borrows it until tb_stream_free. */
struct tb_stream_cell {
  enum tb_stream_kind kind;
  /* the SSE buffers of all its streams (set mem.max; tb_sse.h) */
  struct tb_sse_budget mem;
  /* the window: tokens arriving in [w0, w1) count in the streams' w_*
   * (w0 = w1: no window) */
  int64_t w0, w1;
  /* each gap between two token chunks of a stream, per token (ns), or
   * NULL */
  struct tb_stats *gaps;
  /* an HTTP error's reason carries the start of its body
   * (tb_engine_hooks.error_bodies) */
  bool error_bodies;
  const struct tb_stream_ops *ops;
};

/* What a clean end owes beyond [DONE]. */
struct tb_stream_expect {
  bool usage;         /* the final usage chunk (the server sends usage) */
  int64_t max_tokens; /* > 0: at least this many tokens (chunks: see
                       * TB_STREAM_EARLY_CHUNK_DIV) */
  bool token;         /* at least one output token */
};

struct tb_stream {
  struct tb_stream_cell *cell;
  void *cls;
  struct tb_sse sse;
  struct tb_oai_count count; /* usage or chunks */
  long http_status;
  bool http_checked;       /* the status is known (the first body bytes) */
  int64_t now;             /* arrival stamp of the read being parsed */
  int64_t t_start;         /* when the owner started it */
  int64_t t_first, t_last; /* first and last output token; 0: none */
  int64_t t_byte;          /* last body byte; 0: none */
  int64_t tokens;          /* output tokens counted */
  int64_t max_gap;         /* the longest gap between token chunks */
  /* inside the window: its first and last token chunk, tokens, and the
   * tokens of the first chunk */
  int64_t w_first_t, w_last_t, w_tokens, w_first_tokens;
  bool failed;
  enum tb_stream_end_rule end_rule;
  char reason[200];
  char errbody[TB_STREAM_ERRBODY_MAX]; /* an HTTP error's body, cut */
  size_t errlen;
};

/* Sets up s for a response of cell's (borrowed), started at t_start; cls
 * goes to the callbacks. */
void tb_stream_init(struct tb_stream *s, struct tb_stream_cell *cell, void *cls, int64_t t_start);
/* Frees the parser's buffers (given back to the cell's budget). */
void tb_stream_free(struct tb_stream *s);

/* Body bytes of the response, read at stamp; status: its HTTP status
 * (taken once, with the first bytes).  The body of a status other than
 * 200 is kept (cut at TB_STREAM_ERRBODY_MAX), not parsed.  false: stop
 * reading (the stream failed, or a callback stopped it). */
bool tb_stream_body(struct tb_stream *s, long status, int64_t stamp, const char *data,
                    size_t n) TB_MUST_CHECK;

/* Fails s with the reason, unless it failed already (the first reason
 * stays). */
void tb_stream_fail(struct tb_stream *s, const char *fmt, ...) TB_PRINTF(2, 3);

/* Whether s is overdue at now: no first token first_token_s after its
 * start, or no byte for stall_s after its first token.  true with why. */
bool tb_stream_overdue(const struct tb_stream *s, int64_t now, double first_token_s, double stall_s,
                       char *why, size_t why_len);

/* The response ended: cleanly (transport_err NULL) or not (transport_err
 * borrowed for the call).  status: the response's, where no body byte told
 * it.  true: the stream is sound (every rule of x held); false: it failed,
 * now (s->end_rule says by which rule) or before (TB_STREAM_END_NONE), with
 * s->reason. */
bool tb_stream_end(struct tb_stream *s, long status, const char *transport_err,
                   const struct tb_stream_expect *x);

/* The output tokens a stream got: its count, or the server's cumulative
 * usage when higher. */
int64_t tb_stream_got(const struct tb_stream *s);

/* The stream's time between tokens inside the window: (last - first token
 * chunk) / the tokens after the first chunk.  false when it had no two
 * chunks there. */
bool tb_stream_window_tbt(const struct tb_stream *s, int64_t *tbt);

/* A finished request's figures (ns). */
struct tb_stream_figures {
  int64_t ttft; /* first token - sent_at */
  int64_t end;  /* the last byte (now when none came) */
  int64_t e2e;  /* end - start */
  int64_t tpot; /* (last - first token) / (tokens - 1), when have_tpot */
  bool have_tpot;
};
/* s's figures; sent_at: when its request could go out (tb_direct_sent_at),
 * now: the time when no byte came. */
void tb_stream_figures(const struct tb_stream *s, int64_t sent_at, int64_t now,
                       struct tb_stream_figures *f);

/* One read of d's /metrics (a blocking call, between cells): 1 drained
 * (running = waiting = 0), 0 not, -1 unknown (no gauges, or the read
 * failed); the gauges into *running and *waiting when known (untouched
 * otherwise). */
int tb_stream_drained(const struct tb_discover *d, const char *api_key, double *running,
                      double *waiting);

/* Waits up to drain_s seconds, polling every TB_STREAM_DRAIN_POLL_NS, for
 * the server to be drained: 1 drained, 0 not within drain_s, -1 unknown (no
 * gauges, a read that failed, or cancelled; cancelled may be NULL and is
 * asked after each poll). */
int tb_stream_drain_wait(const struct tb_discover *d, const char *api_key, double drain_s,
                         bool (*cancelled)(void *cls), void *cls);

#endif
