/*
 * sim_conn: the simulator's connections: their sockets (plain or TLS), the
 * sending of their output (struct sim_out: immediate, or deferred and
 * stamped by a decode step), reading and parsing requests, keep-alive and
 * idle limits, deferred close (reap).  What a request means is not theirs:
 * a connection hands each parsed request, and its own end, to the handler
 * table the server gives it (struct sim_conn_handlers: the routes' and the
 * scheduler's functions), so nothing here calls up into them.
 *
 * Private to sim/; every function runs on the loop's thread (sim_state.h).
 */
#ifndef SIM_CONN_H
#define SIM_CONN_H

#include "sim_state.h"

/* What connections call, filled in by the server (s->conn_h). */
struct sim_conn_handlers {
  /* Serves one parsed request of c (r and its body valid during the call). */
  void (*dispatch)(struct server *s, struct conn *c, const struct sim_http_req *r);
  /* c is being freed: its request is aborted, its prompt's job orphaned,
   * its held erase dropped. */
  void (*closed)(struct server *s, struct conn *c);
  /* Requests ended and gave back their slots and KV: the queue's head may
   * be admitted now. */
  void (*admit)(struct server *s, int64_t now);
  /* After each round of the reap: what waits for an idle server (held
   * erases) is done; true when it resumed any connection. */
  bool (*release)(struct server *s);
};

/* Queues c for sim_conn_reap (to free it if dead, resume it if its request
 * finished); once per iteration. */
void sim_conn_todo_push(struct server *s, struct conn *c);

/* Marks c dead and takes it out of epoll; it is freed (its request aborted)
 * by the next sim_conn_reap, never at once. */
void sim_conn_kill(struct server *s, struct conn *c);

/* Sends what is buffered (sim_out_flush); arms EPOLLOUT on a short write. */
void sim_conn_flush(struct server *s, struct conn *c);

/* Reads what the socket has (up to SIM_IN_CAP buffered) and serves the
 * complete requests; kills the connection on EOF, error or abuse. */
void sim_conn_read(struct server *s, struct conn *c);

/* Takes an accepted socket (closed if over max_conns or on error). */
void sim_conn_new(struct server *s, int fd);

/* Frees dead connections, resumes finished ones; then admits. */
void sim_conn_reap(struct server *s);

#endif
