/*
 * tb_queue: the job queue in PostgreSQL, every statement of a job's life.
 *
 *   queued --claim--> running --finish--> succeeded | failed | cancelled
 *                        |  \--release (SIGTERM), refuse (egress)--> queued
 *                        \--lease expired--> claimed again (attempts + 1),
 *                                            or failed past max_attempts
 *
 * One function per statement, the SQL beside it (static tb_db_stmt).  Each
 * statement is one round trip and commits on its own, so a statement that
 * met a broken connection can be retried as a whole after the reconnect
 * (tb_db does it once; callers retry TB_DB_SOFT with backoff).
 *
 * Fencing: a running job's lease is (lease_owner, attempts).  Every write of
 * a worker names both and changes nothing when another worker (or the same
 * one in a later attempt) holds the job now: a late write from a worker
 * whose lease expired is refused, and the function reports "lease lost".
 *
 * One job per busy_key (endpoint or exclusive group) is a database fact: the
 * unique index jobs_one_running_per_busy_key.  The claim skips busy keys; two
 * claims racing for two jobs of one free key make one of them meet the index,
 * and tb_queue_claim retries that.  The same goes for a project's run slots
 * (at most TOKBENCH_LIMIT_RUNNING running jobs per project: the unique index
 * jobs_project_run_slot; lib/db/tb_tenancy.h).
 *
 * Events (job_events, streamed by the API) and notifications:
 *   kind 'state'    {"state": "running"|"queued"|"succeeded"|"failed"|"cancelled",
 *                    "attempt": n, "worker": id, "error": text|null}
 *   kind 'cell'     {"cell": {...engine cell...}, "cells_done": n, "cells_total": n|null}
 *   kind 'progress' {"current_cell": {phase, context, context_label, concurrency},
 *                    "cells_done": n, "cells_total": n, "eta_s": x}
 *   NOTIFY tb_job_changed '<job id>' after each of them (and on header);
 *   NOTIFY tb_jobs_queued '<job id>' when a job goes back to the queue.
 */
#ifndef TB_QUEUE_H
#define TB_QUEUE_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include "db/tb_db.h"
#include "base/tb_util.h"

#define TB_QUEUE_ID_LEN 36     /* a uuid as text */
#define TB_QUEUE_OWNER_MAX 128 /* worker id length cap */

/* The lease a worker holds on a running job: every write names it. */
struct tb_queue_lease {
  char job_id[TB_QUEUE_ID_LEN + 1];
  char owner[TB_QUEUE_OWNER_MAX + 1];
  int attempt; /* jobs.attempts when claimed */
};

/* A claimed job.  spec is a new reference; free with tb_queue_job_clear. */
struct tb_queue_job {
  struct tb_queue_lease lease;
  char endpoint_id[TB_QUEUE_ID_LEN + 1];
  int max_attempts;
  char request_id[65]; /* of the API request that made the job; "" if none */
  json_t *spec;
};
void tb_queue_job_clear(struct tb_queue_job *job);

enum tb_queue_claim_result {
  TB_QUEUE_CLAIMED = 1, /* *job holds a running job, leased to us */
  TB_QUEUE_EMPTY = 0,   /* nothing to run now */
  TB_QUEUE_CLOSED = 2,  /* a job was closed instead of claimed (expired lease
                            past max_attempts: failed; cancel requested while
                            queued or orphaned: cancelled); claim again */
};

/*
 * Claims the best job: queued or running with an expired lease, whose
 * busy_key has no other running job and whose project runs fewer than
 * max_running jobs (<= 0: no limit; TOKBENCH_LIMIT_RUNNING), with one UPDATE
 * ... FOR UPDATE SKIP LOCKED.  Fair share: the project with the fewest
 * running jobs first, then the one served least recently; priority desc and
 * created_at order the jobs of a project.  Sets state running, a run slot of
 * the project, lease to owner for lease_s seconds, attempts + 1, started_at
 * (first claim), a 'state' event and NOTIFY.  Returns a
 * tb_queue_claim_result, or TB_DB_SOFT / TB_DB_HARD.  On TB_QUEUE_CLOSED,
 * closed_id (when not NULL, TB_QUEUE_ID_LEN + 1 bytes) names the job closed.
 */
int tb_queue_claim(struct tb_db *db, const char *owner, int lease_s, int max_running,
                   struct tb_queue_job *job, char *closed_id) TB_MUST_CHECK;
/* As tb_queue_claim, passing over the queued jobs of skip (a PostgreSQL
 * array of job ids, "{id,id}"; NULL: none): those this worker handed back
 * because its egress policy refuses their endpoint (tb_queue_refuse). */
int tb_queue_claim_skip(struct tb_db *db, const char *owner, int lease_s, int max_running,
                        const char *skip, struct tb_queue_job *job, char *closed_id) TB_MUST_CHECK;

/*
 * Renews the lease for lease_s seconds.  Returns 1 (held; *cancel set from
 * cancel_requested), 0 (lease lost: stop, write nothing more), or
 * TB_DB_SOFT / TB_DB_HARD (unknown: try again).
 */
int tb_queue_heartbeat(struct tb_db *db, const struct tb_queue_lease *l, int lease_s,
                       bool *cancel) TB_MUST_CHECK;

/*
 * Reads cancel_requested without writing (on a tb_job_changed notification).
 * Returns 1 (lease held; *cancel set), 0 (lease lost) or TB_DB_SOFT /
 * TB_DB_HARD.
 */
int tb_queue_check(struct tb_db *db, const struct tb_queue_lease *l, bool *cancel) TB_MUST_CHECK;

/*
 * Stores a measured cell (engine cell object, borrowed) if the lease is held:
 * INSERT ... ON CONFLICT DO NOTHING (a cell is never stored twice), cells_done
 * + 1 when it was new, a 'cell' event, NOTIFY.  Returns 1 (stored, or was
 * already there), 0 (lease lost: nothing written), TB_DB_SOFT / TB_DB_HARD.
 * A cell without phase/context/concurrency is TB_DB_HARD.
 */
int tb_queue_store_cell(struct tb_db *db, const struct tb_queue_lease *l,
                        const json_t *cell) TB_MUST_CHECK;

/* Progress: current_cell (borrowed), cells_total, eta_s, a 'progress'
 * event, NOTIFY.  Returns 1, 0 (lease lost) or TB_DB_SOFT / TB_DB_HARD. */
int tb_queue_progress(struct tb_db *db, const struct tb_queue_lease *l, const json_t *current_cell,
                      unsigned cells_total, double eta_s) TB_MUST_CHECK;

/* Stores the result header (borrowed) in jobs.header; NOTIFY.  Returns 1, 0
 * (lease lost) or TB_DB_SOFT / TB_DB_HARD. */
int tb_queue_header(struct tb_db *db, const struct tb_queue_lease *l,
                    const json_t *header) TB_MUST_CHECK;

/*
 * Ends the job: state "succeeded", "failed" or "cancelled", result document
 * (borrowed, may be NULL) and error (may be NULL); clears the lease; a
 * 'state' event; NOTIFY.  Returns 1, 0 (lease lost: nothing written) or
 * TB_DB_SOFT / TB_DB_HARD.
 */
int tb_queue_finish(struct tb_db *db, const struct tb_queue_lease *l, const char *state,
                    const json_t *result, const char *error) TB_MUST_CHECK;

/*
 * Hands the job back (the worker is stopping): state queued, lease cleared,
 * this attempt not counted (attempts - 1), a 'state' event with reason,
 * NOTIFY tb_job_changed and tb_jobs_queued.  Returns 1, 0 (lease lost) or
 * TB_DB_SOFT / TB_DB_HARD.
 */
int tb_queue_release(struct tb_db *db, const struct tb_queue_lease *l,
                     const char *reason) TB_MUST_CHECK;

/*
 * The worker's own egress policy refuses the job's endpoint (issue 27):
 * another worker of the pool may be allowed, so the job is handed back as
 * by tb_queue_release (this attempt not counted), with a 'state' event
 * naming the worker and the reason ("reason", "egress_refused": true).
 * When the job's first such hand-back is give_up_s seconds old or more, no
 * worker took it meanwhile: the job fails instead, its error the reason
 * (*failed set).  Returns 1, 0 (lease lost) or TB_DB_SOFT / TB_DB_HARD.
 */
int tb_queue_refuse(struct tb_db *db, const struct tb_queue_lease *l, const char *reason,
                    int give_up_s, bool *failed) TB_MUST_CHECK;

/*
 * The cells already stored for a job, as a new JSON array in storage order
 * (*cells; empty when none).  Returns the count (>= 0) or TB_DB_SOFT /
 * TB_DB_HARD.  Rows that do not parse are skipped (they will be measured
 * again, and ON CONFLICT keeps the stored one).
 */
int tb_queue_load_cells(struct tb_db *db, const char *job_id, json_t **cells) TB_MUST_CHECK;

/* A registered endpoint as the worker needs it (strings new or NULL). */
struct tb_queue_endpoint {
  char *name, *base_url, *api_key_sealed, *launch_command, *engine_hint;
  char *api_key_origin;      /* the origin the key is bound to; NULL: a legacy seal */
  json_t *hardware, *engine; /* new references (objects) */
  json_t *gpu;               /* {name, count} or NULL (issue 26) */
  double price_per_hour;     /* NAN: none */
  char *currency, *telemetry_url;
  bool deleted;
};
/* Loads endpoint id.  Returns 1, 0 (no such endpoint) or TB_DB_SOFT /
 * TB_DB_HARD.  Free with tb_queue_endpoint_clear (wipes the sealed key). */
int tb_queue_load_endpoint(struct tb_db *db, const char *endpoint_id,
                           struct tb_queue_endpoint *ep) TB_MUST_CHECK;
void tb_queue_endpoint_clear(struct tb_queue_endpoint *ep);

#endif
