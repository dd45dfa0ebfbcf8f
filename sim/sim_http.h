/*
 * sim_http: an incremental HTTP/1.1 request parser for tokbench-sim.
 *
 * The parser works on the bytes a connection has buffered so far and either
 * needs more, or returns one complete request (head and Content-Length body),
 * or a 4xx/5xx status to answer before closing.  It never allocates and never
 * reads past len.  What the server needs later is copied into the request
 * struct (bounded), except the body, which points into the caller's buffer
 * and is valid until the caller consumes total_len bytes.
 *
 * Caps: head SIM_HTTP_HEAD_CAP bytes, SIM_HTTP_MAX_HEADERS header lines,
 * body SIM_HTTP_BODY_CAP bytes.  Chunked request bodies are refused (411):
 * every client we serve sends Content-Length.
 */
#ifndef SIM_HTTP_H
#define SIM_HTTP_H

#include <stdbool.h>
#include <stddef.h>

#define SIM_HTTP_HEAD_CAP (32 * 1024)
#define SIM_HTTP_BODY_CAP (8 * 1024 * 1024)
#define SIM_HTTP_MAX_HEADERS 100
#define SIM_HTTP_PATH_CAP 2048
#define SIM_HTTP_VALUE_CAP 512

enum sim_http_method {
  SIM_HTTP_OTHER = 0,
  SIM_HTTP_GET,
  SIM_HTTP_POST,
  SIM_HTTP_HEAD
};

struct sim_http_req {
  enum sim_http_method method;
  char path[SIM_HTTP_PATH_CAP];  /* without the query, NUL-terminated */
  char query[SIM_HTTP_PATH_CAP]; /* after '?', or "" */
  int minor;                     /* HTTP/1.<minor> */
  bool keep_alive;
  bool has_auth;
  char auth[SIM_HTTP_VALUE_CAP];  /* Authorization value, if has_auth */
  char fault[SIM_HTTP_VALUE_CAP]; /* X-Sim-Fault value, or "" */
  bool stamps;                    /* X-Tokbench-Stamps: 1 (or true, yes) */
  bool expect_continue;           /* "Expect: 100-continue" was sent */
  size_t head_len;                /* also set on NEED_MORE once the head is in */
  const char *body;               /* into the caller's buffer */
  size_t body_len;
  size_t total_len; /* head + body */
};

enum sim_http_result {
  SIM_HTTP_NEED_MORE = 0,
  SIM_HTTP_DONE = 1,
  SIM_HTTP_ERROR = -1
};

/* Parses buf[0..len).  DONE: *req is filled.  ERROR: *status holds the HTTP
 * status to answer (400, 411, 413, 431, 501, 505) and the connection must be
 * closed after the answer.  NEED_MORE: call again with more bytes; if the
 * head is complete (req->head_len > 0) and req->expect_continue, the caller
 * sends "100 Continue" once. */
enum sim_http_result sim_http_parse(const char *buf, size_t len, struct sim_http_req *req,
                                    int *status);

/* Value of key in a query string ("a=1&b=2") copied into out (cap bytes,
 * NUL-terminated, no percent-decoding); false when absent. */
bool sim_http_query(const char *query, const char *key, char *out, size_t cap);

#endif
