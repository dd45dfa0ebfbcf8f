/*
 * api_probe: the probe pool.  POST /v1/endpoints/{id}/probe calls an
 * endpoint a tenant chose, which may accept and never answer; that must
 * never hold one of the api's request threads.  So a probe is a task for a
 * small fixed pool of threads (TOKBENCH_PROBE_THREADS): the handler queues
 * it and suspends the connection; the pool thread runs discovery under a
 * total deadline (TOKBENCH_PROBE_DEADLINE_MS, every call of the series cut
 * to what is left: tb_http_set_deadline) and resumes the connection, and
 * the handler, called again, replies.
 *
 * Limits, so no tenant holds the pool: at most TOKBENCH_PROBE_PER_PROJECT
 * probes of one project queued or running, at most TOKBENCH_PROBE_QUEUE in
 * all; above either the request gets 429 probes-busy naming the limit, with
 * Retry-After.
 *
 * Threads and ownership: one mutex guards the task list; it is taken before
 * libmicrohttpd's (suspend and resume happen under it, as in api_notify).
 * A task belongs to its request (r->state, freed by r->state_free when the
 * request completes); the pool unlinks it and never touches it again once
 * it has resumed the connection.  tb_api_probes_stop, before
 * MHD_stop_daemon, answers queued tasks "stopping" and joins the threads
 * (a running probe ends within its deadline); a probe asked for after that
 * gets 503 shutting-down.  tb_api_probes_free, after MHD_stop_daemon, frees
 * the pool.
 */
#ifndef TB_API_PROBE_H
#define TB_API_PROBE_H

#include "api.h"

struct tb_api_probes;

struct tb_api_probe_opts {
  unsigned threads;     /* pool threads */
  unsigned per_project; /* probes of one project queued or running */
  unsigned queue_max;   /* probes queued or running in all */
  long deadline_ms;     /* one probe's total time */
};

/* Starts the pool.  NULL with *err (caller frees). */
struct tb_api_probes *tb_api_probes_start(const struct tb_api_probe_opts *o,
                                          char **err) TB_MUST_CHECK;
/* Answers the queued probes and joins the threads; the pool refuses new
 * probes from then on (NULL: no-op).  Idempotent. */
void tb_api_probes_stop(struct tb_api_probes *p);
/* Stops (if not yet) and frees the pool (NULL: no-op). */
void tb_api_probes_free(struct tb_api_probes *p);

/* Queues a probe of base_url with key (both taken; key may be NULL and is
 * wiped when done) and suspends the connection; or queues a 429/503 reply.
 * Returns what the handler returns. */
enum MHD_Result tb_api_probe_start(struct tb_api_req *r, char *base_url, char *key);
/* On the call after the resume: queues the reply (200 with the probe
 * document, or 502 probe-failed with the reason). */
enum MHD_Result tb_api_probe_reply(struct tb_api_req *r);

#endif
