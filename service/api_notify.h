/*
 * api_notify: one listener thread per api process, holding a database
 * connection of its own that LISTENs on
 *   tb_job_changed  (payload: a job id; sent by workers after each change and
 *                    by the api on cancel): resumes the long-polls and SSE
 *                    streams waiting on that job;
 *   tb_keys_changed (a key was revoked): flushes the key cache.
 * It also resumes waiters whose deadline passed (long-poll timeout, SSE
 * heartbeat), and all of them when its connection was lost (a NOTIFY may
 * have been missed: each re-checks the database).
 *
 * Waiting, as GNU Taler's exchange does: arm the waiter BEFORE querying (so a
 * NOTIFY between the query and the suspension is not lost), query, and then
 * either disarm and reply, or suspend.  tb_api_notify_suspend refuses (false)
 * when the waiter already fired: the handler then queries again.
 */
#ifndef TB_API_NOTIFY_H
#define TB_API_NOTIFY_H

#include "api.h"

/* Starts the listener (its own connection to url).  NULL with *err. */
struct tb_api_notify *tb_api_notify_start(struct tb_api *api, const char *url,
                                          char **err) TB_MUST_CHECK;
/* Stops the thread and resumes every waiter; suspensions are refused after. */
void tb_api_notify_stop(struct tb_api_notify *n);
/* Frees what tb_api_notify_start made (after tb_api_notify_stop). */
void tb_api_notify_free(struct tb_api_notify *n);

/* Arms r->waiter for job_id (a UUID) until deadline_ns (monotonic). */
void tb_api_notify_arm(struct tb_api_req *r, const char *job_id, int64_t deadline_ns);
/* Suspends r's connection until the waiter fires.  True: suspended, the
 * handler returns MHD_YES and is called again on resume.  False: it fired
 * already (or the api is stopping): the handler re-checks now. */
bool tb_api_notify_suspend(struct tb_api_req *r) TB_MUST_CHECK;
/* Takes r->waiter out of the list (no-op when it is not in it). */
void tb_api_notify_disarm(struct tb_api_req *r);

#endif
