/*
 * api_conns: the api's open connections, oldest first, and the one way a
 * new client still gets in when many addresses hold the connection budget
 * (issue 27, finding 2).
 *
 * libmicrohttpd refuses a connection at MHD_OPTION_CONNECTION_LIMIT
 * before the application hears of it, and has no call to close another
 * connection.  So the api keeps a reserve below the limit: when a new
 * connection takes the open count to TOKBENCH_MAX_CONNECTIONS minus
 * TOKBENCH_CONNECTIONS_RESERVE, the oldest connection that has not sent a
 * whole request head (a new one, or a kept-alive one between requests) is
 * shut down (shutdown(2): libmicrohttpd's own loop then reads its end and
 * closes it).  A connection whose request is in progress is never chosen.
 *
 * Thread safety: the registry's mutex covers every entry.  libmicrohttpd
 * tells a connection's close (MHD_CONNECTION_NOTIFY_CLOSED) before it
 * closes the socket, and the entry leaves the registry under the mutex
 * then, so a descriptor shut down here is always still that connection's.
 */
#ifndef TB_API_CONNS_H
#define TB_API_CONNS_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

struct tb_api_conn;

struct tb_api_conns {
  pthread_mutex_t lock;
  struct tb_api_conn *head, *tail; /* oldest first */
  unsigned open;
  unsigned evict_at; /* open count that closes the oldest without a head; 0: never */
  uint64_t evicted;  /* connections shut down so far */
  bool ready;        /* initialised (tb_api_conns_free may be called either way) */
};

/* An empty registry that evicts at evict_at open connections (0: never). */
void tb_api_conns_init(struct tb_api_conns *cs, unsigned evict_at);
void tb_api_conns_free(struct tb_api_conns *cs);

/* A new connection on socket fd: its entry (to keep as libmicrohttpd's
 * socket context).  At the mark, the oldest connection without a head is
 * shut down first. */
struct tb_api_conn *tb_api_conns_open(struct tb_api_conns *cs, int fd);
/* The connection closes: its entry leaves and is freed. */
void tb_api_conns_close(struct tb_api_conns *cs, struct tb_api_conn *c);
/* Its request's head is in (true) or its request ended (false). */
void tb_api_conns_headed(struct tb_api_conns *cs, struct tb_api_conn *c, bool headed);
/* Connections shut down to let others in, so far. */
uint64_t tb_api_conns_evicted(struct tb_api_conns *cs);

#endif
