/*
 * q_events: the statements of GET /v1/jobs/{id}/events
 * (service/api_events.c); table job_events in sql/0002_endpoints_jobs.sql,
 * written by lib/db/tb_queue.c and service/q_jobs.c.  One function per
 * statement (the SQL beside it in q_events.c), columns read by name; each
 * returns the row count or TB_DB_SOFT / TB_DB_HARD.
 */
#ifndef TB_Q_EVENTS_H
#define TB_Q_EVENTS_H

#include <stddef.h>
#include <stdint.h>

#include "db/tb_db.h"
#include "base/tb_util.h"

/* The most events one tb_q_events_next reads. */
#define TB_Q_EVENTS_BATCH 200

/* 1 when job id is one of project_id's, else 0. */
int tb_q_events_job_exists(struct tb_db *db, const char *id, const char *project_id) TB_MUST_CHECK;

/* One event (strings borrowed for the call; data is its JSON text, on one
 * line).  Returns false to stop. */
typedef bool (*tb_q_events_fn)(void *cls, int64_t id, const char *kind, const char *data,
                               size_t len);
/* The job's events after event id after, oldest first, at most
 * TB_Q_EVENTS_BATCH, each given to fn until it returns false; the job's
 * state into state.  Returns 0 when there is no such job, else > 0 (even
 * with no new event). */
int tb_q_events_next(struct tb_db *db, const char *job_id, int64_t after, char state[16],
                     tb_q_events_fn fn, void *cls) TB_MUST_CHECK;

#endif
