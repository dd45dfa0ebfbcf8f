/*
 * tb_sse: an incremental parser for text/event-stream (the WHATWG SSE format)
 * as inference servers send it: `data: {json}` lines, events ended by a blank
 * line, `:` comment lines, LF, CRLF or CR line ends, events that span reads.
 *
 * The parser owns two buffers a peer fills, each with a named cap: the line
 * being assembled (TB_SSE_LINE_MAX) and the event's data (TB_SSE_EVENT_MAX).
 * Over a cap the parser enters a sticky error state; it never grows past it.
 * The buffers may also be charged to a budget shared by many parsers
 * (struct tb_sse_budget: the engine gives one to all the streams of a cell,
 * so the endpoint cannot make one cell hold more than that in all):
 * growing a buffer past what the budget has left is TB_SSE_OVER_BUDGET,
 * sticky like the caps.
 * Only the `data` field matters here; `event`, `id`, `retry` and unknown
 * fields are ignored, as the format says.  Comments are handed to on_comment
 * (tokbench-sim stamps its send time in one).
 */
#ifndef TB_SSE_H
#define TB_SSE_H

#include <stdbool.h>
#include <stddef.h>

#include "base/tb_util.h"

#define TB_SSE_LINE_MAX (256u * 1024u)
#define TB_SSE_EVENT_MAX (1024u * 1024u)

/* Called with each event's data (lines joined by '\n', NUL-terminated,
 * borrowed until the callback returns).  Return false to stop parsing;
 * tb_sse_feed then returns TB_SSE_STOPPED. */
typedef bool (*tb_sse_event_fn)(void *cls, const char *data, size_t len);
/* Called with each comment line's text after the ':' (not NUL-terminated). */
typedef void (*tb_sse_comment_fn)(void *cls, const char *text, size_t len);

enum tb_sse_status {
  TB_SSE_OK = 0,
  TB_SSE_STOPPED = 1,      /* a callback returned false */
  TB_SSE_TOO_LONG = -1,    /* a line or an event went over its cap (sticky) */
  TB_SSE_OVER_BUDGET = -2, /* the shared budget had no room left (sticky) */
};

/* Bytes of buffer that parsers sharing it may hold in all (capacity, not
 * length: what is allocated).  Not thread-safe: the parsers sharing one
 * run on one thread (the engine's loop). */
struct tb_sse_budget {
  size_t max;
  size_t used;
};

struct tb_sse {
  char *line; /* partial line carried over between feeds */
  size_t line_len, line_cap;
  char *data; /* data of the event being assembled */
  size_t data_len, data_cap;
  bool has_data; /* a data field was seen in this event */
  bool skip_lf;  /* the previous feed ended in CR: drop a leading LF */
  bool failed;
  enum tb_sse_status fail_status; /* TOO_LONG or OVER_BUDGET, once failed */
  struct tb_sse_budget *budget;   /* may be NULL: the caps alone */
  tb_sse_event_fn on_event;
  tb_sse_comment_fn on_comment; /* may be NULL */
  void *cls;
};

/* Sets up an empty parser.  Never fails. */
void tb_sse_init(struct tb_sse *p, tb_sse_event_fn on_event, tb_sse_comment_fn on_comment,
                 void *cls);
/* Charges the parser's buffers to budget (borrowed; it must outlive the
 * parser's buffers, or NULL).  Call before the first feed. */
void tb_sse_set_budget(struct tb_sse *p, struct tb_sse_budget *budget);
/* Frees the parser's buffers (given back to its budget); the struct may be
 * re-initialised. */
void tb_sse_free(struct tb_sse *p);
/* Feeds n bytes.  Events complete in them are delivered before it returns. */
enum tb_sse_status tb_sse_feed(struct tb_sse *p, const char *buf, size_t n) TB_MUST_CHECK;
/* True when no partial line or event is pending (a clean end of stream). */
bool tb_sse_idle(const struct tb_sse *p);

#endif
