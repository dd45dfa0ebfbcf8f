/*
 * sim_conn: the simulator's connections: output buffers and their sending
 * (immediate, or deferred and stamped by a decode step), plain replies
 * (status, JSON, OpenAI-style errors), reading and parsing requests into
 * sim_routes_dispatch, keep-alive and idle limits, deferred close (reap).
 *
 * Private to sim/; every function runs on the loop's thread (sim_state.h).
 */
#ifndef SIM_CONN_H
#define SIM_CONN_H

#include "sim_state.h"

/* Appends n bytes to c's output buffer (grown as needed; not sent). */
void sim_conn_out_append(struct conn *c, const void *data, size_t n);

/* Appends formatted text to c's output buffer (not sent). */
void sim_conn_out_printf(struct conn *c, const char *fmt, ...) TB_PRINTF(2, 3);

/* Queues c for sim_conn_reap (to free it if dead, resume it if its request
 * finished); once per iteration. */
void sim_conn_todo_push(struct server *s, struct conn *c);

/* Marks c dead and takes it out of epoll; it is freed (its request aborted)
 * by the next sim_conn_reap, never at once. */
void sim_conn_kill(struct server *s, struct conn *c);

/* Sends what is buffered; arms EPOLLOUT on a short write. */
void sim_conn_flush(struct server *s, struct conn *c);

/* Writes the connection's deferred stamps (the clock now) and sends. */
void sim_conn_flush_stamped(struct server *s, struct conn *c);

/* Replies status with a body of type ctype and sends it; closes after it
 * unless keep_alive. */
void sim_conn_reply_raw(struct server *s, struct conn *c, int status, const char *ctype,
                        const char *body, size_t len, bool keep_alive);

/* Replies with a JSON document and steals it. */
void sim_conn_reply_json(struct server *s, struct conn *c, int status, json_t *doc,
                         bool keep_alive);

/* OpenAI-style error body: {"error": {message, type, param, code}}. */
void sim_conn_reply_error(struct server *s, struct conn *c, int status, const char *msg,
                          bool keep_alive);

/* Reads what the socket has (up to SIM_IN_CAP buffered) and serves the
 * complete requests; kills the connection on EOF, error or abuse. */
void sim_conn_read(struct server *s, struct conn *c);

/* Takes an accepted socket (closed if over max_conns or on error). */
void sim_conn_new(struct server *s, int fd);

/* Frees dead connections, resumes finished ones; then admits. */
void sim_conn_reap(struct server *s);

#endif
