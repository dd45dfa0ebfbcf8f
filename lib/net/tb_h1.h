/*
 * tb_h1: an incremental parser of one HTTP/1.1 response at a time, for the
 * engine's streams (tb_engine reads their sockets itself: see there why).
 *
 * It reads the status line and the header block (skipping 1xx interim
 * responses), takes the body's framing from the headers (RFC 9112 §6.3:
 * chunked if Transfer-Encoding ends in chunked, else Content-Length, else up
 * to the end of the connection; no body for 204 and 304), decodes chunked
 * bodies (extensions and trailers are skipped) and hands the body's bytes to
 * a callback as they come.  Only what a client of an OpenAI-compatible
 * server needs: no pipelining of requests, no upgrades.
 *
 * Every length a peer controls has a cap: a status, header or chunk-size line
 * (TB_H1_LINE_MAX), the header block (TB_H1_HEAD_MAX), a chunk size or a
 * Content-Length (TB_H1_BODY_MAX).  Over a cap, or on bytes that are not
 * HTTP/1.x, the parser enters a sticky error state with a reason.
 */
#ifndef TB_H1_H
#define TB_H1_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/tb_util.h"

#define TB_H1_LINE_MAX 8192u
#define TB_H1_HEAD_MAX (64u * 1024u)
#define TB_H1_BODY_MAX (1LL << 40)

/* Body bytes, in order; false stops the parser (tb_h1_feed returns
 * TB_H1_STOPPED). */
typedef bool (*tb_h1_body_fn)(void *cls, const char *data, size_t len);

enum tb_h1_status {
  TB_H1_MORE = 0,    /* all bytes taken; the response goes on */
  TB_H1_DONE = 1,    /* the response ended (*used tells where) */
  TB_H1_STOPPED = 2, /* the body callback returned false */
  TB_H1_ERROR = -1,  /* not HTTP/1.x, or over a cap: see reason (sticky) */
};

struct tb_h1 {
  int state;
  int status;     /* of the final response, once its head is read */
  bool head_done; /* status and headers of the final response read */
  bool chunked, has_length, conn_close, http10;
  int64_t remaining; /* of the Content-Length body, or of the chunk */
  size_t head_bytes;
  char line[TB_H1_LINE_MAX];
  size_t line_len;
  char reason[120];
};

/* Ready for a response.  Never fails. */
void tb_h1_init(struct tb_h1 *p);
/* Feeds n bytes; body bytes go to body(cls, ...) before it returns.  On
 * TB_H1_DONE, *used is the count of bytes that belonged to the response
 * (the rest would be the next response's); else n. */
enum tb_h1_status tb_h1_feed(struct tb_h1 *p, const char *buf, size_t n, size_t *used,
                             tb_h1_body_fn body, void *cls) TB_MUST_CHECK;
/* The connection ended: TB_H1_DONE if that ends the response (a body
 * delimited by the close), else TB_H1_ERROR with a reason. */
enum tb_h1_status tb_h1_eof(struct tb_h1 *p) TB_MUST_CHECK;
/* True when the connection may carry the next request after TB_H1_DONE. */
bool tb_h1_keep_alive(const struct tb_h1 *p);

#endif
