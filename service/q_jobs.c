/*
 * q_jobs: see q_jobs.h.  One static tb_db_stmt per function, the SQL beside
 * the C that binds it (the list: one per filter set, written once at first
 * use).
 */
#include "q_jobs.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define JOB_MEMBERS                                                                      \
  "'id', j.id, 'endpoint_id', j.endpoint_id, 'state', j.state, "                         \
  "'cancel_requested', j.cancel_requested, 'priority', j.priority, 'labels', j.labels, " \
  "'spec', j.spec, 'progress', json_build_object('cells_done', j.cells_done, "           \
  "'cells_total', j.cells_total, 'current_cell', j.current_cell, 'eta_s', j.eta_s), "    \
  "'attempts', j.attempts, 'max_attempts', j.max_attempts, 'error', j.error, "           \
  "'created_at', j.created_at, 'started_at', j.started_at, "                             \
  "'finished_at', j.finished_at, 'updated_at', j.updated_at, 'schedule_id', j.schedule_id"

#define JOB_CELLS                                                      \
  "coalesce((SELECT json_agg(c.cell ORDER BY c.seq) FROM job_cells c " \
  "WHERE c.job_id = j.id), '[]'::json)"

#define UPDATED_US "(extract(epoch FROM j.updated_at) * 1000000)::bigint"

/* ------------------------------------------------------------------ insert */

/* The project's row lock that orders its submits (see q_jobs.h).  NO KEY
 * UPDATE: it does not wait for, nor hold up, the KEY SHARE locks that the
 * foreign keys of other inserts take on the row. */
static const struct tb_db_stmt lock_project = {
  "api_job_lock_project",
  "SELECT 1 FROM projects WHERE id = $1::uuid FOR NO KEY UPDATE",
};

/* $12: the queued limit (0: none); q counts only when it applies.  $13,
 * $14: the schedule and slot that made the job (NULL: none).  Always
 * one row: id and doc NULL when nothing was written, endpoint 0 when the
 * endpoint is not the project's, queued the count before the insert. */
static const struct tb_db_stmt job_insert = {
  "api_job_insert",
  "WITH e AS (SELECT id, exclusive_group FROM endpoints "
  "  WHERE id = $1::uuid AND project_id = $2 AND deleted_at IS NULL), "
  "q AS (SELECT count(*) AS n FROM jobs "
  "  WHERE $12::int > 0 AND $9::jsonb IS NULL AND project_id = $2 AND state = 'queued'), "
  "j AS (INSERT INTO jobs (project_id, endpoint_id, spec, labels, priority, busy_key, "
  "    max_attempts, request_id, state, result, cells_total, cells_done, started_at, "
  "    finished_at, schedule_id, schedule_slot) "
  "  SELECT $2, e.id, $3::jsonb, coalesce($4::jsonb, '{}'), coalesce($5::int, 0), "
  "    CASE WHEN $9::jsonb IS NOT NULL THEN 'import:' || gen_random_uuid()::text "
  "      WHEN coalesce($6, e.exclusive_group) IS NULL THEN e.id::text "
  "      WHEN coalesce($6, e.exclusive_group) = ANY (string_to_array($11, ',')) "
  "        THEN 'shared:' || coalesce($6, e.exclusive_group) "
  "      ELSE 'group:' || $2::text || ':' || coalesce($6, e.exclusive_group) END, "
  "    coalesce($7::int, 3), $8, CASE WHEN $9::jsonb IS NULL THEN 'queued' ELSE 'succeeded' END, "
  "    $9::jsonb, $10::int, coalesce($10::int, 0), "
  "    CASE WHEN $9::jsonb IS NULL THEN NULL ELSE now() END, "
  "    CASE WHEN $9::jsonb IS NULL THEN NULL ELSE now() END, $13::uuid, $14::timestamptz FROM e "
  "   WHERE $9::jsonb IS NOT NULL OR $12::int <= 0 OR (SELECT n FROM q) < $12::int "
  "  RETURNING *) "
  "SELECT (SELECT j.id::text FROM j) AS id, "
  "  (SELECT json_build_object(" JOB_MEMBERS ", 'cells', '[]'::json)::text FROM j) AS doc, "
  "  (SELECT count(*) FROM e) AS endpoint, (SELECT n FROM q) AS queued",
};

/* The statement(s) of one attempt; see tb_q_jobs_insert. */
static int
insert_once(struct tb_db *db, const struct tb_q_jobs_row *w, bool limit, char *job_id, char **doc,
            int64_t *queued)
{
  char maxq[24];
  snprintf(maxq, sizeof maxq, "%lld", limit ? (long long)w->max_queued : 0LL);
  if (limit) {
    const char *lp[] = { w->project_id };
    int lrc = tb_db_exec(db, &lock_project, 1, lp, NULL);
    if (lrc < 0)
      return lrc;
  }
  const char *p[14] = {
    w->endpoint_id,  w->project_id,    w->spec,   w->labels, w->priority,      w->exclusive_group,
    w->max_attempts, w->request_id,    w->result, w->cells,  w->shared_groups, maxq,
    w->schedule_id,  w->schedule_slot,
  };
  PGresult *res = NULL;
  int rc = tb_db_exec(db, &job_insert, 14, p, &res);
  if (rc == 1) {
    const char *id = tb_db_str(res, 0, "id");
    if (id != NULL) {
      tb_db_copy(res, 0, "id", job_id, TB_Q_JOBS_ID_LEN + 1);
      if (doc != NULL)
        *doc = tb_db_dup(res, 0, "doc");
    } else if (tb_db_i64(res, 0, "endpoint") == 0) {
      rc = 0;
    } else {
      *queued = tb_db_i64(res, 0, "queued");
      rc = TB_Q_JOBS_FULL;
    }
  } else if (rc == 0) {
    rc = TB_DB_HARD; /* the statement always answers one row */
  }
  PQclear(res);
  return rc;
}

int
tb_q_jobs_insert(struct tb_db *db, const struct tb_q_jobs_row *row,
                 char job_id[TB_Q_JOBS_ID_LEN + 1], char **doc, int64_t *queued)
{
  bool limit = row->result == NULL && row->max_queued > 0;
  if (doc != NULL)
    *doc = NULL;
  *queued = 0;
  if (!limit || tb_db_in_tx(db))
    return insert_once(db, row, limit, job_id, doc, queued);
  /* A transaction of our own, to hold the project's lock through the
   * commit; tried twice like a lone statement (tb_db retries those once). */
  int rc = TB_DB_SOFT;
  for (int attempt = 0; attempt < 2 && rc == TB_DB_SOFT; attempt++) {
    if ((rc = tb_db_begin(db)) < 0)
      continue;
    rc = insert_once(db, row, limit, job_id, doc, queued);
    if (rc == 1) {
      int crc = tb_db_commit(db);
      if (crc < 0) {
        rc = crc;
        if (doc != NULL) {
          free(*doc);
          *doc = NULL;
        }
      }
    } else {
      tb_db_rollback(db);
    }
  }
  return rc;
}

/* Outside the insert's transaction, on purpose: PostgreSQL serializes the
 * commits of transactions that NOTIFY (a cluster-wide lock held through the
 * WAL flush), so a NOTIFY inside each insert made every POST wait for the
 * fsync of the one before: no group commit.  A transaction with nothing but
 * a NOTIFY writes no WAL and commits at once. */
static const struct tb_db_stmt job_queued = {
  "api_job_queued",
  "SELECT pg_notify('tb_jobs_queued', $1)",
};

int
tb_q_jobs_notify_queued(struct tb_db *db, const char *job_id)
{
  const char *p[] = { job_id };
  return tb_db_exec(db, &job_queued, 1, p, NULL);
}

/* --------------------------------------------------------------------- get */

static const struct tb_db_stmt job_get = {
  "api_job_get",
  "SELECT j.state, j.cells_done, " UPDATED_US " AS updated_us, "
  "  json_build_object(" JOB_MEMBERS ", 'cells', " JOB_CELLS ")::text AS doc "
  "FROM jobs j WHERE j.id = $1 AND j.project_id = $2",
};

int
tb_q_jobs_get(struct tb_db *db, const char *id, const char *project_id, struct tb_q_jobs_doc *out)
{
  memset(out, 0, sizeof *out);
  const char *p[] = { id, project_id };
  PGresult *res = NULL;
  int rc = tb_db_exec(db, &job_get, 2, p, &res);
  if (rc > 0) {
    tb_db_copy(res, 0, "state", out->state, sizeof out->state);
    tb_db_copy(res, 0, "cells_done", out->cells_done, sizeof out->cells_done);
    tb_db_copy(res, 0, "updated_us", out->updated_us, sizeof out->updated_us);
    int c = PQfnumber(res, "doc");
    out->len = (size_t)PQgetlength(res, 0, c);
    out->doc = tb_xmalloc(out->len + 1);
    memcpy(out->doc, PQgetvalue(res, 0, c), out->len + 1);
  }
  PQclear(res);
  return rc;
}

/* -------------------------------------------------------------------- list */

/* One statement per set of filters given (state, endpoint, labels) and per
 * page (the first, or after a cursor), so that each has a plan of its own
 * that an index serves: jobs_project_state_created or
 * jobs_endpoint_state_created for a state (sql/0020), jobs_endpoint_created
 * for an endpoint, jobs_project_created else, each walked newest first from
 * the cursor.  (One statement of "$n IS NULL OR ..." filters would get one
 * generic plan for every combination, and walk the project's jobs for rare
 * matches.)  A filter not given keeps its parameter, NULL, in a test of
 * its own that involves no column. */
#define JL_STATE(on) ((on) ? "  AND j.state = $2 " : "  AND $2::text IS NULL ")
#define JL_EP(on) ((on) ? "  AND j.endpoint_id = $3::uuid " : "  AND $3::uuid IS NULL ")
#define JL_LABELS(on) ((on) ? "  AND j.labels @> $4::jsonb " : "  AND $4::jsonb IS NULL ")
enum {
  JL_N = 16
};

static struct tb_db_stmt job_list[JL_N];
static char job_list_name[JL_N][24];
static pthread_once_t job_list_once = PTHREAD_ONCE_INIT;

static void
job_list_init(void)
{
  for (unsigned m = 0; m < JL_N; m++) {
    snprintf(job_list_name[m], sizeof job_list_name[m], "api_job_list_%u", m);
    job_list[m].name = job_list_name[m];
    job_list[m].sql = tb_xasprintf(
      "%s%s%s%s%s%s%s", TB_Q_PAGE_HEAD("j", "  json_build_object(" JOB_MEMBERS ")::text AS doc "),
      "FROM jobs j WHERE j.project_id = $1 ", JL_STATE(m & 1), JL_EP(m & 2), JL_LABELS(m & 4),
      (m & 8) ? "  AND " TB_Q_PAGE_OLDER("j", "5", "6") " " : TB_Q_PAGE_FIRST("5", "6"),
      TB_Q_PAGE_TAIL("j", "7"));
  }
}

int
tb_q_jobs_list(struct tb_db *db, const struct tb_q_jobs_filter *f, tb_q_jobs_item_fn fn, void *cls)
{
  pthread_once(&job_list_once, job_list_init);
  char lim[24];
  snprintf(lim, sizeof lim, "%d", f->limit);
  bool next = f->after_us != NULL && f->after_id != NULL;
  unsigned m = (f->state != NULL) | (f->endpoint_id != NULL) << 1 | (f->labels != NULL) << 2 |
               (unsigned)next << 3;
  const char *p[] = { f->project_id,
                      f->state,
                      f->endpoint_id,
                      f->labels,
                      next ? f->after_us : NULL,
                      next ? f->after_id : NULL,
                      lim };
  return tb_q_page_exec(db, &job_list[m], 7, p, fn, cls);
}

/* ------------------------------------------------------------------ cancel */

static const struct tb_db_stmt job_cancel = {
  "api_job_cancel",
  "WITH old AS (SELECT id, state FROM jobs WHERE id = $1 AND project_id = $2 FOR UPDATE), "
  "upd AS (UPDATE jobs j SET "
  "    state = CASE WHEN old.state = 'queued' THEN 'cancelled' ELSE j.state END, "
  "    cancel_requested = true, "
  "    finished_at = CASE WHEN old.state = 'queued' THEN now() ELSE j.finished_at END, "
  "    updated_at = now() "
  "  FROM old WHERE j.id = old.id AND old.state IN ('queued', 'running') RETURNING j.*), "
  "ev AS (INSERT INTO job_events (job_id, kind, data) "
  "  SELECT id, 'state', json_build_object('state', 'cancelled', "
  "    'reason', 'cancelled before it started') FROM upd WHERE state = 'cancelled' "
  "  RETURNING job_id) "
  "SELECT old.state AS old_state, "
  "  (SELECT count(*) FROM (SELECT pg_notify('tb_job_changed', id::text) FROM upd) n), "
  "  (SELECT count(*) FROM ev), "
  "  (SELECT json_build_object(" JOB_MEMBERS ")::text FROM upd j) AS doc FROM old",
};

int
tb_q_jobs_cancel(struct tb_db *db, const char *id, const char *project_id, char old_state[16],
                 char **doc)
{
  *doc = NULL;
  old_state[0] = '\0';
  const char *p[] = { id, project_id };
  PGresult *res = NULL;
  int rc = tb_db_exec(db, &job_cancel, 2, p, &res);
  if (rc > 0) {
    tb_db_copy(res, 0, "old_state", old_state, 16);
    *doc = tb_db_dup(res, 0, "doc");
  }
  PQclear(res);
  return rc;
}

/* --------------------------------------------------------- Idempotency-Key */

static const struct tb_db_stmt idem_claim = {
  "api_idem_claim",
  "INSERT INTO idempotency_keys (api_key_id, idem_key, request_hash, status, body) "
  "VALUES ($1, $2, $3, 0, '') ON CONFLICT DO NOTHING",
};

int
tb_q_jobs_idem_claim(struct tb_db *db, const char *api_key_id, const char *key, const char *hash)
{
  const char *p[] = { api_key_id, key, hash };
  return tb_db_exec(db, &idem_claim, 3, p, NULL);
}

static const struct tb_db_stmt idem_get = {
  "api_idem_get",
  "SELECT request_hash, status, location, body FROM idempotency_keys "
  "WHERE api_key_id = $1 AND idem_key = $2",
};

int
tb_q_jobs_idem_get(struct tb_db *db, const char *api_key_id, const char *key,
                   struct tb_q_jobs_idem *out)
{
  memset(out, 0, sizeof *out);
  const char *p[] = { api_key_id, key };
  PGresult *res = NULL;
  int rc = tb_db_exec(db, &idem_get, 2, p, &res);
  if (rc > 0) {
    out->request_hash = tb_db_dup(res, 0, "request_hash");
    out->location = tb_db_dup(res, 0, "location");
    out->body = tb_db_dup(res, 0, "body");
    tb_db_copy(res, 0, "status", out->status, sizeof out->status);
  }
  PQclear(res);
  return rc;
}

void
tb_q_jobs_idem_clear(struct tb_q_jobs_idem *i)
{
  free(i->request_hash);
  free(i->location);
  free(i->body);
  memset(i, 0, sizeof *i);
}

static const struct tb_db_stmt idem_store = {
  "api_idem_store",
  "UPDATE idempotency_keys SET status = $3, location = $4, body = $5 "
  "WHERE api_key_id = $1 AND idem_key = $2",
};

int
tb_q_jobs_idem_store(struct tb_db *db, const char *api_key_id, const char *key, const char *status,
                     const char *location, const char *body)
{
  const char *p[] = { api_key_id, key, status, location, body };
  return tb_db_exec(db, &idem_store, 5, p, NULL);
}
