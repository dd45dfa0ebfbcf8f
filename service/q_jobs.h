/*
 * q_jobs: the statements of /v1/jobs (service/api_jobs.c) and of the
 * Idempotency-Keys of POST /v1/jobs; tables in sql/0002_endpoints_jobs.sql,
 * sql/0003_api.sql, sql/0007_job_request_id.sql, sql/0009_tenancy.sql,
 * sql/0016_schedules.sql.
 *
 * One function per statement, the SQL beside it in q_jobs.c (as
 * lib/db/tb_queue.c does), result columns read by name.  Every function takes a
 * connection (the caller's, inside its transaction if it has one) and
 * returns the row count or TB_DB_SOFT / TB_DB_HARD unless it says otherwise.
 * Documents are built by PostgreSQL (json_build_object) in the statement
 * that reads them and handed over as text.
 */
#ifndef TB_Q_JOBS_H
#define TB_Q_JOBS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "db/tb_db.h"
#include "q_page.h"
#include "base/tb_util.h"

#define TB_Q_JOBS_ID_LEN 36

/* What the one job insert writes (strings borrowed; NULL = SQL NULL). */
struct tb_q_jobs_row {
  const char *endpoint_id, *project_id;
  const char *spec, *labels;   /* JSON texts; labels NULL: {} */
  const char *priority;        /* integer text; NULL: 0 */
  const char *exclusive_group; /* the spec's; NULL: the endpoint's */
  const char *max_attempts;    /* integer text; NULL: 3 */
  const char *request_id;
  const char *result;        /* a finished job's document; NULL: a queued job */
  const char *cells;         /* with result: its cell count */
  const char *shared_groups; /* TOKBENCH_SHARED_GROUPS, "a,b" */
  int64_t max_queued;        /* TOKBENCH_LIMIT_QUEUED; <= 0: no limit */
  /* issue 35: the schedule and slot (RFC 3339 text) that made the job;
   * NULL: none (sql/0016_schedules.sql: one job per slot) */
  const char *schedule_id, *schedule_slot;
};

/* tb_q_jobs_insert's answer when the project's queued jobs are at max_queued. */
#define TB_Q_JOBS_FULL 2

/*
 * The one job insert: a queued job or, with row->result, a finished one
 * (an import: a busy key of its own, so it never holds an endpoint).  The
 * busy key of a queued job: its exclusive group (the spec's, else the
 * endpoint's) scoped to the project, 'shared:<name>' for a shared group,
 * else the endpoint.
 *
 * The per-project queued limit is part of the insert: a queued job is
 * written only while the project has fewer than max_queued queued jobs,
 * counted after taking the project's row lock (FOR NO KEY UPDATE, held to
 * the end of the transaction; a transaction of its own when the caller has
 * none), so concurrent submits of one project are counted one after the
 * other and never pass the limit together.
 *
 * Returns 1 with the id in job_id and, when doc is not NULL, the job
 * document (as GET /v1/jobs/{id} returns it; new string) in *doc; 0 when
 * the endpoint is not one of the project's (or was deleted);
 * TB_Q_JOBS_FULL with the project's queued count in *queued (nothing
 * written); TB_DB_SOFT / TB_DB_HARD.
 */
int tb_q_jobs_insert(struct tb_db *db, const struct tb_q_jobs_row *row,
                     char job_id[TB_Q_JOBS_ID_LEN + 1], char **doc, int64_t *queued) TB_MUST_CHECK;

/* NOTIFY tb_jobs_queued '<job_id>': outside the insert's transaction (see
 * q_jobs.c). */
int tb_q_jobs_notify_queued(struct tb_db *db, const char *job_id) TB_MUST_CHECK;

/* A job's document with what its ETag is made of (GET /v1/jobs/{id}). */
struct tb_q_jobs_doc {
  char state[16];
  char cells_done[24]; /* integer text */
  char updated_us[24]; /* updated_at in microseconds since the epoch, text */
  char *doc;           /* new: the job document, cells included */
  size_t len;
};
/* Reads job id of project_id into *out (free out->doc).  Returns 1, 0 (no
 * such job in the project), TB_DB_SOFT / TB_DB_HARD. */
int tb_q_jobs_get(struct tb_db *db, const char *id, const char *project_id,
                  struct tb_q_jobs_doc *out) TB_MUST_CHECK;

/* GET /v1/jobs filters (borrowed; NULL: any).  after_us/after_id: the
 * keyset cursor (jobs strictly older than it). */
struct tb_q_jobs_filter {
  const char *project_id, *state, *endpoint_id, *labels, *after_us, *after_id;
  int limit;
};
/* One row of the list: created_at in microseconds (text), id and the job
 * document without cells (borrowed for the call). */
typedef tb_q_page_item_fn tb_q_jobs_item_fn;
/* The project's jobs, newest first, at most f->limit, each given to fn.
 * Returns the count. */
int tb_q_jobs_list(struct tb_db *db, const struct tb_q_jobs_filter *f, tb_q_jobs_item_fn fn,
                   void *cls) TB_MUST_CHECK;

/* Cancels job id of project_id: a queued job is cancelled at once (with a
 * 'state' event), a running one gets cancel_requested; NOTIFY
 * tb_job_changed.  Returns 1 with its state before (old_state) and, when it
 * was queued or running, its document after (*doc, new; else NULL); 0 no
 * such job; TB_DB_SOFT / TB_DB_HARD. */
int tb_q_jobs_cancel(struct tb_db *db, const char *id, const char *project_id, char old_state[16],
                     char **doc) TB_MUST_CHECK;

/* Idempotency-Key: claims (api_key_id, key) for a request of hash (a new
 * row with status 0).  Returns 1 (claimed), 0 (seen before). */
int tb_q_jobs_idem_claim(struct tb_db *db, const char *api_key_id, const char *key,
                         const char *hash) TB_MUST_CHECK;
/* The first answer under an Idempotency-Key (strings new or NULL). */
struct tb_q_jobs_idem {
  char *request_hash, *location, *body;
  char status[8]; /* "0" while the first request runs */
};
/* Reads it (free with tb_q_jobs_idem_clear).  Returns 1 or 0 (none). */
int tb_q_jobs_idem_get(struct tb_db *db, const char *api_key_id, const char *key,
                       struct tb_q_jobs_idem *out) TB_MUST_CHECK;
void tb_q_jobs_idem_clear(struct tb_q_jobs_idem *i);
/* Stores the answer (status, location, body) of the claimed key. */
int tb_q_jobs_idem_store(struct tb_db *db, const char *api_key_id, const char *key,
                         const char *status, const char *location, const char *body) TB_MUST_CHECK;

#endif
