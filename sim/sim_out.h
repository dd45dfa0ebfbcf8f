/*
 * sim_out: where a request's bytes go, below the routes, the scheduler and
 * the stream writer: an output buffer (append, printf, the deferred stamps
 * of a decode step), the step's send queue, the plain replies (status,
 * JSON, OpenAI-style errors) and three operations its owner implements
 * (struct sim_out_ops): send what is buffered, kill, resume.  sim_conn
 * embeds one in each connection and implements them over TCP or TLS; a
 * unit test implements them over memory (tests/unit/test_sim_sched.c).
 * So the code that writes a request's output never calls up into the
 * connection that carries it.
 *
 * Private to sim/; every function runs on the loop's thread (sim_state.h).
 */
#ifndef SIM_OUT_H
#define SIM_OUT_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#include "base/tb_util.h"

/* Stamps of one output deferred within one step (token, usage, [DONE],
 * a malformed event): more are stamped at once. */
#define SIM_DEFER_STAMPS 6
#define SIM_STAMP_DIGITS 19 /* ": t=%019lld\n": fixed width, patched in place */

struct server;
struct gen;
struct sim_out;

/* What the owner of an output does (sim_conn: its connection). */
struct sim_out_ops {
  /* Sends what o buffers (o->buf[off, len)), now; may kill o. */
  void (*send)(struct server *s, struct sim_out *o);
  /* Marks o dead at once (nothing more is sent); its owner frees it and
   * aborts its request later, never during the call. */
  void (*kill)(struct server *s, struct sim_out *o);
  /* o's request is over: its owner takes its next request after this
   * iteration of the loop. */
  void (*resume)(struct server *s, struct sim_out *o);
};

struct sim_out {
  const struct sim_out_ops *ops; /* borrowed */
  char *buf;                     /* owned; [off, len) unsent */
  size_t len, off, cap;
  bool dead;                       /* killed: nothing more is sent */
  bool close_after;                /* closed once its answer is sent */
  bool queued;                     /* in the step's send queue */
  int nst;                         /* deferred stamps in buf */
  size_t st_rel[SIM_DEFER_STAMPS]; /* their offsets from off */
  struct gen *gen;                 /* the request writing here; NULL: none */
};

/* Appends n bytes to o's buffer (grown as needed; not sent). */
void sim_out_append(struct sim_out *o, const void *data, size_t n);

/* Appends formatted text to o's buffer (not sent). */
void sim_out_printf(struct sim_out *o, const char *fmt, ...) TB_PRINTF(2, 3);

/* Sends what o buffers (ops->send); nothing once dead.  During a step's
 * prepare phase (s->defer) o is put in the step's send queue instead. */
void sim_out_flush(struct server *s, struct sim_out *o);

/* Writes o's deferred stamps (the clock now) and sends, at once. */
void sim_out_flush_stamped(struct server *s, struct sim_out *o);

/* The step's send queue, in the order it was filled: each output stamped
 * and sent (sim_out_flush_stamped); the queue is empty afterwards. */
void sim_out_flush_queued(struct server *s);

/* ops->kill. */
void sim_out_kill(struct server *s, struct sim_out *o);

/* ops->resume. */
void sim_out_resume(struct server *s, struct sim_out *o);

/* Replies status with a body of type ctype and sends it; closes after it
 * unless keep_alive. */
void sim_out_reply_raw(struct server *s, struct sim_out *o, int status, const char *ctype,
                       const char *body, size_t len, bool keep_alive);

/* Replies with a JSON document and steals it. */
void sim_out_reply_json(struct server *s, struct sim_out *o, int status, json_t *doc,
                        bool keep_alive);

/* OpenAI-style error body: {"error": {message, type, param, code}}
 * (llama.cpp b11669's {"error": {code, message, type}}); counted in the
 * server's errors. */
void sim_out_reply_error(struct server *s, struct sim_out *o, int status, const char *msg,
                         bool keep_alive);

#endif
