/*
 * api_streams: per-key caps on the requests that hold a connection open
 * while they wait (issue 13, finding 7): Server-Sent Event streams
 * (GET /v1/jobs/{id}/events, TOKBENCH_SSE_PER_KEY) and long-polls
 * (GET /v1/jobs/{id}?wait=, TOKBENCH_WAIT_PER_KEY).  Without them one key
 * could park every connection slot of the api on its own jobs.
 *
 * Each kind is also capped per project, across all its keys
 * (TOKBENCH_SSE_PER_PROJECT, TOKBENCH_WAIT_PER_PROJECT; issue 27).
 *
 * Trace uploads (POST /v1/traces, issue 25) are a kind of their own, capped
 * per project only (TOKBENCH_TRACE_UPLOADS_PER_PROJECT): each holds up to
 * TOKBENCH_TRACE_MAX_BYTES of body and the trace it inflates to while it is
 * read, so one project cannot take the api's memory with many at once.  The
 * slot is taken on the request's head, before its body is read, and given
 * back as soon as the reply is queued (api_traces.c), so a client that read
 * its reply finds the slot free for its next upload.
 *
 * A request takes one slot before it starts waiting and gives it back when
 * it completes (main.c's completed(), tb_api_streams_release); over the cap
 * it gets 429 problem+json naming the setting, with Retry-After.
 */
#ifndef TB_API_STREAMS_H
#define TB_API_STREAMS_H

#include "api.h"

enum tb_api_stream_kind {
  TB_API_STREAM_SSE = 1, /* r->stream_held values; 0 is none */
  TB_API_STREAM_WAIT = 2,
  TB_API_STREAM_UPLOAD = 3,
};

/* A new table; a cap of 0 means no cap for that kind.  Never fails. */
struct tb_api_streams *tb_api_streams_new(unsigned sse_per_key, unsigned wait_per_key,
                                          unsigned sse_per_project, unsigned wait_per_project);
/* The per-project cap of TB_API_STREAM_UPLOAD (0: no cap; no per-key cap). */
void tb_api_streams_cap_uploads(struct tb_api_streams *s, unsigned per_project);
/* Frees the table (every slot given back first). */
void tb_api_streams_free(struct tb_api_streams *s);

/*
 * Takes a slot of kind for r's key and project (r authenticated).  True
 * when r holds one (also when it already held one).  False: the key or the
 * project is at its cap, a 429 naming the setting was queued and *ret
 * holds its result.
 */
bool tb_api_streams_take(struct tb_api_req *r, enum tb_api_stream_kind kind,
                         enum MHD_Result *ret) TB_MUST_CHECK;
/* Gives back r's slot, if it holds one.  Safe to call on every request. */
void tb_api_streams_release(struct tb_api_req *r);
/* The slots of kind key_id holds now (tests, metrics). */
unsigned tb_api_streams_held(struct tb_api_streams *s, const char *key_id,
                             enum tb_api_stream_kind kind);

#endif
