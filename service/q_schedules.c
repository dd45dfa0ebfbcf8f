/*
 * q_schedules: see q_schedules.h.  One static tb_db_stmt per function, the
 * SQL beside the C that binds it.
 */
#include "q_schedules.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SCHEDULE_JSON                                                                        \
  "json_build_object('id', s.id, 'endpoint_id', s.endpoint_id, 'preset', s.preset_name, "    \
  "'spec', s.spec, 'cron', s.cron, 'timezone', s.timezone, 'labels', s.labels, "             \
  "'paused', s.paused, 'paused_reason', s.paused_reason, 'next_run_at', s.next_run_at, "     \
  "'last_run_at', s.last_run_at, 'last_job_id', s.last_job_id, 'last_error', s.last_error, " \
  "'last_error_at', s.last_error_at, 'runs', s.runs, 'created_at', s.created_at, "           \
  "'updated_at', s.updated_at)"

static const struct tb_db_stmt sched_now = {
  "sched_now",
  "SELECT floor(extract(epoch FROM now()) + $1::float8)::bigint AS now_s",
};

int
tb_q_schedules_now(struct tb_db *db, int64_t offset_s, int64_t *now_s)
{
  char off[24];
  snprintf(off, sizeof off, "%lld", (long long)offset_s);
  const char *p[] = { off };
  PGresult *res = NULL;
  int rc = tb_db_exec(db, &sched_now, 1, p, &res);
  if (rc == 1)
    *now_s = tb_db_i64(res, 0, "now_s");
  else if (rc == 0)
    rc = TB_DB_HARD;
  PQclear(res);
  return rc;
}

/* ------------------------------------------------------------------ insert */

static const struct tb_db_stmt lock_project = {
  "sched_lock_project",
  "SELECT 1 FROM projects WHERE id = $1::uuid FOR NO KEY UPDATE",
};

/* Always one row: doc NULL when nothing was written, and why. */
static const struct tb_db_stmt sched_insert = {
  "sched_insert",
  "WITH e AS (SELECT id FROM endpoints "
  "  WHERE id = $2::uuid AND project_id = $1::uuid AND deleted_at IS NULL), "
  "pr AS (SELECT id FROM presets WHERE project_id = $1::uuid AND name = $3), "
  "n AS (SELECT count(*) AS n FROM schedules WHERE project_id = $1::uuid), "
  "s AS (INSERT INTO schedules (project_id, endpoint_id, preset_id, preset_name, spec, cron, "
  "    timezone, labels, paused, next_run_at) "
  "  SELECT $1::uuid, e.id, (SELECT id FROM pr), $3, $4::jsonb, $5, $6, "
  "    coalesce($7::jsonb, '{}'), $8::boolean, to_timestamp($9::float8) FROM e "
  "   WHERE ($3 IS NULL OR EXISTS (SELECT 1 FROM pr)) "
  "     AND ($10::int <= 0 OR (SELECT n FROM n) < $10::int) "
  "  RETURNING *) "
  "SELECT (SELECT " SCHEDULE_JSON "::text FROM s) AS doc, (SELECT count(*) FROM e) AS endpoint, "
  "  (SELECT count(*) FROM pr) AS preset, (SELECT n FROM n) AS n",
};

/* The answer of sched_insert or sched_update (one row): 1 with *doc, or
 * why nothing was written. */
static int
written(PGresult *res, const struct tb_q_schedules_row *row, char **doc)
{
  *doc = tb_db_dup(res, 0, "doc");
  if (*doc != NULL)
    return 1;
  if (tb_db_i64(res, 0, "endpoint") == 0)
    return TB_Q_SCHEDULES_NO_ENDPOINT;
  if (row->preset_name != NULL && tb_db_i64(res, 0, "preset") == 0)
    return TB_Q_SCHEDULES_NO_PRESET;
  return 0;
}

static int
insert_once(struct tb_db *db, const char *project_id, const struct tb_q_schedules_row *w,
            const char *cap, char **doc, int64_t *count)
{
  const char *lp[] = { project_id };
  int rc = tb_db_exec(db, &lock_project, 1, lp, NULL);
  if (rc < 0)
    return rc;
  const char *p[10] = { project_id,     w->endpoint_id,
                        w->preset_name, w->spec,
                        w->cron,        w->timezone,
                        w->labels,      w->paused ? "true" : "false",
                        w->next_run_s,  cap };
  PGresult *res = NULL;
  rc = tb_db_exec(db, &sched_insert, 10, p, &res);
  if (rc == 1) {
    rc = written(res, w, doc);
    if (rc == 0) {
      *count = tb_db_i64(res, 0, "n");
      rc = TB_Q_SCHEDULES_FULL;
    }
  } else if (rc == 0) {
    rc = TB_DB_HARD;
  }
  PQclear(res);
  return rc;
}

int
tb_q_schedules_insert(struct tb_db *db, const char *project_id,
                      const struct tb_q_schedules_row *row, int64_t cap, char **doc, int64_t *count)
{
  char c[24];
  snprintf(c, sizeof c, "%lld", (long long)cap);
  *doc = NULL;
  *count = 0;
  if (tb_db_in_tx(db))
    return insert_once(db, project_id, row, c, doc, count);
  /* a transaction of our own holds the project's lock through the commit;
   * tried twice like a lone statement */
  int rc = TB_DB_SOFT;
  for (int attempt = 0; attempt < 2 && rc == TB_DB_SOFT; attempt++) {
    if ((rc = tb_db_begin(db)) < 0)
      continue;
    rc = insert_once(db, project_id, row, c, doc, count);
    if (rc == 1) {
      int crc = tb_db_commit(db);
      if (crc < 0) {
        rc = crc;
        free(*doc);
        *doc = NULL;
      }
    } else {
      tb_db_rollback(db);
    }
  }
  return rc;
}

/* ------------------------------------------------------------ read, change */

static const struct tb_db_stmt sched_list = {
  "sched_list",
  "SELECT coalesce(json_agg(" SCHEDULE_JSON " ORDER BY s.created_at, s.id), '[]')::text AS doc "
  "FROM schedules s WHERE s.project_id = $1::uuid",
};

int
tb_q_schedules_list(struct tb_db *db, const char *project_id, char **doc)
{
  const char *p[] = { project_id };
  return tb_db_exec_str(db, &sched_list, 1, p, "doc", doc, NULL);
}

static const struct tb_db_stmt sched_get = {
  "sched_get",
  "SELECT " SCHEDULE_JSON "::text AS doc FROM schedules s "
  "WHERE s.id = $1::uuid AND s.project_id = $2::uuid",
};

int
tb_q_schedules_get(struct tb_db *db, const char *id, const char *project_id, char **doc)
{
  const char *p[] = { id, project_id };
  return tb_db_exec_str(db, &sched_get, 2, p, "doc", doc, NULL);
}

/* $11: reschedule (next_run_at from $10, else kept). */
static const struct tb_db_stmt sched_update = {
  "sched_update",
  "WITH e AS (SELECT id FROM endpoints "
  "  WHERE id = $3::uuid AND project_id = $2::uuid AND deleted_at IS NULL), "
  "pr AS (SELECT id FROM presets WHERE project_id = $2::uuid AND name = $4), "
  "s AS (UPDATE schedules s SET endpoint_id = (SELECT id FROM e), "
  "    preset_id = (SELECT id FROM pr), preset_name = $4, spec = $5::jsonb, cron = $6, "
  "    timezone = $7, labels = coalesce($8::jsonb, '{}'), paused = $9::boolean, "
  "    paused_reason = CASE WHEN $9::boolean THEN s.paused_reason END, "
  "    next_run_at = CASE WHEN $11::boolean THEN to_timestamp($10::float8) "
  "      ELSE s.next_run_at END, updated_at = now() "
  "  WHERE s.id = $1::uuid AND s.project_id = $2::uuid AND EXISTS (SELECT 1 FROM e) "
  "    AND ($4 IS NULL OR EXISTS (SELECT 1 FROM pr)) RETURNING s.*) "
  "SELECT (SELECT " SCHEDULE_JSON "::text FROM s) AS doc, (SELECT count(*) FROM e) AS endpoint, "
  "  (SELECT count(*) FROM pr) AS preset",
};

int
tb_q_schedules_update(struct tb_db *db, const char *id, const char *project_id,
                      const struct tb_q_schedules_row *w, bool reschedule, char **doc)
{
  const char *p[11] = { id,
                        project_id,
                        w->endpoint_id,
                        w->preset_name,
                        w->spec,
                        w->cron,
                        w->timezone,
                        w->labels,
                        w->paused ? "true" : "false",
                        w->next_run_s,
                        reschedule ? "true" : "false" };
  PGresult *res = NULL;
  *doc = NULL;
  int rc = tb_db_exec(db, &sched_update, 11, p, &res);
  if (rc == 1)
    rc = written(res, w, doc);
  else if (rc == 0)
    rc = TB_DB_HARD;
  PQclear(res);
  return rc;
}

static const struct tb_db_stmt sched_delete = {
  "sched_delete",
  "DELETE FROM schedules WHERE id = $1::uuid AND project_id = $2::uuid",
};

int
tb_q_schedules_delete(struct tb_db *db, const char *id, const char *project_id)
{
  const char *p[] = { id, project_id };
  return tb_db_exec(db, &sched_delete, 2, p, NULL);
}

/* ---------------------------------------------------------------- ticker */

/* OF s: the row of the schedule only.  A row another ticker holds is
 * skipped; one it changed and committed meanwhile is checked again against
 * the WHERE as it is now (READ COMMITTED re-reads an updated row before it
 * locks it), so a slot fired elsewhere is no longer due here. */
static const struct tb_db_stmt sched_claim = {
  "sched_claim",
  "SELECT s.id, s.project_id, s.endpoint_id, s.preset_id, s.preset_name, s.spec::text AS spec, "
  "  s.cron, s.timezone, s.labels::text AS labels, s.next_run_at::text AS slot, "
  "  floor(extract(epoch FROM now()) + $1::float8)::bigint AS now_s "
  "FROM schedules s "
  "WHERE NOT s.paused AND s.next_run_at <= now() + make_interval(secs => $1::float8) "
  "ORDER BY s.next_run_at, s.id FOR UPDATE OF s SKIP LOCKED LIMIT 1",
};

int
tb_q_schedules_claim(struct tb_db *db, int64_t offset_s, struct tb_q_schedules_due *out)
{
  char off[24];
  snprintf(off, sizeof off, "%lld", (long long)offset_s);
  const char *p[] = { off };
  PGresult *res = NULL;
  memset(out, 0, sizeof *out);
  int rc = tb_db_exec(db, &sched_claim, 1, p, &res);
  if (rc == 1) {
    tb_db_copy(res, 0, "id", out->id, sizeof out->id);
    tb_db_copy(res, 0, "project_id", out->project_id, sizeof out->project_id);
    tb_db_copy(res, 0, "endpoint_id", out->endpoint_id, sizeof out->endpoint_id);
    tb_db_copy(res, 0, "preset_id", out->preset_id, sizeof out->preset_id);
    tb_db_copy(res, 0, "cron", out->cron, sizeof out->cron);
    tb_db_copy(res, 0, "timezone", out->timezone, sizeof out->timezone);
    tb_db_copy(res, 0, "slot", out->slot, sizeof out->slot);
    out->preset_name = tb_db_dup(res, 0, "preset_name");
    out->spec = tb_db_dup(res, 0, "spec");
    out->labels = tb_db_dup(res, 0, "labels");
    out->now_s = tb_db_i64(res, 0, "now_s");
  }
  PQclear(res);
  return rc;
}

void
tb_q_schedules_due_clear(struct tb_q_schedules_due *d)
{
  free(d->preset_name);
  free(d->spec);
  free(d->labels);
  memset(d, 0, sizeof *d);
}

static const struct tb_db_stmt sched_endpoint = {
  "sched_endpoint",
  "SELECT base_url, deleted_at IS NOT NULL AS deleted FROM endpoints "
  "WHERE id = $1::uuid AND project_id = $2::uuid",
};

int
tb_q_schedules_endpoint(struct tb_db *db, const char *endpoint_id, const char *project_id,
                        char **base_url, bool *deleted)
{
  const char *p[] = { endpoint_id, project_id };
  PGresult *res = NULL;
  *base_url = NULL;
  *deleted = false;
  int rc = tb_db_exec(db, &sched_endpoint, 2, p, &res);
  if (rc == 1) {
    *base_url = tb_db_dup(res, 0, "base_url");
    *deleted = tb_db_bool(res, 0, "deleted");
  }
  PQclear(res);
  return rc;
}

static const struct tb_db_stmt sched_preset_spec = {
  "sched_preset_spec",
  "SELECT spec::text AS spec FROM presets WHERE id = $1::uuid AND project_id = $2::uuid",
};

int
tb_q_schedules_preset_spec(struct tb_db *db, const char *preset_id, const char *project_id,
                           char **spec)
{
  const char *p[] = { preset_id, project_id };
  return tb_db_exec_str(db, &sched_preset_spec, 2, p, "spec", spec, NULL);
}

static const struct tb_db_stmt sched_advance = {
  "sched_advance",
  "UPDATE schedules SET next_run_at = to_timestamp($3::float8), "
  "  last_run_at = CASE WHEN $4::uuid IS NULL THEN last_run_at ELSE $2::timestamptz END, "
  "  last_job_id = coalesce($4::uuid, last_job_id), "
  "  runs = runs + CASE WHEN $4::uuid IS NULL THEN 0 ELSE 1 END, "
  "  last_error = $5::text, last_error_at = CASE WHEN $5::text IS NULL THEN NULL ELSE now() END "
  "WHERE id = $1::uuid AND next_run_at = $2::timestamptz",
};

int
tb_q_schedules_advance(struct tb_db *db, const char *id, const char *slot, const char *next_s,
                       const char *job_id, const char *error)
{
  const char *p[] = { id, slot, next_s, job_id, error };
  return tb_db_exec(db, &sched_advance, 5, p, NULL);
}

static const struct tb_db_stmt sched_pause = {
  "sched_pause",
  "UPDATE schedules SET paused = true, paused_reason = $2::text, next_run_at = NULL, "
  "  last_error = $2::text, last_error_at = now(), updated_at = now() WHERE id = $1::uuid",
};

int
tb_q_schedules_pause(struct tb_db *db, const char *id, const char *reason)
{
  const char *p[] = { id, reason };
  return tb_db_exec(db, &sched_pause, 2, p, NULL);
}
