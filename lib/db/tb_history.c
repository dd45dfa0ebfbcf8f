/*
 * tb_history: one prepared statement per function, the SQL beside the C
 * that binds it.  See tb_history.h.  The points of a job are written in one
 * statement from a JSON array (jsonb_to_recordset), so that recording a
 * matrix of any size is one round trip.
 */
#include "db/tb_history.h"

#define STR_(x) #x
#define STR(x) STR_(x)

static const struct tb_db_stmt st_job = {
  "history_job",
  "SELECT j.project_id::text AS project_id, j.endpoint_id::text AS endpoint_id, "
  "  j.labels::text AS labels, j.result::text AS result, j.state, "
  "  coalesce(j.finished_at, now())::text AS finished_at "
  "FROM jobs j WHERE j.id = $1::uuid",
};

/* "Last good": succeeded, a complete result, finished before the job. */
static const struct tb_db_stmt st_last_good = {
  "history_last_good",
  "SELECT j.id::text AS id, j.result::text AS result FROM jobs j "
  "WHERE j.endpoint_id = $1::uuid AND j.labels = $2::jsonb AND j.state = 'succeeded' "
  "  AND j.id <> $3::uuid AND j.result IS NOT NULL "
  "  AND j.result ->> 'status' = 'complete' "
  "  AND j.finished_at <= $4::timestamptz "
  "ORDER BY j.finished_at DESC, j.id DESC LIMIT 1",
};

static const struct tb_db_stmt st_threshold = {
  "history_threshold",
  "SELECT t.tolerance FROM thresholds t "
  "WHERE t.project_id = $1::uuid AND coalesce($2::jsonb, '{}'::jsonb) @> t.labels "
  "ORDER BY (SELECT count(*) FROM jsonb_object_keys(t.labels)) DESC, t.updated_at DESC "
  "LIMIT 1",
};

static const struct tb_db_stmt st_write = {
  "history_write_regressions",
  "UPDATE jobs SET result = jsonb_set(result, '{regressions}', $2::jsonb), "
  "  updated_at = now() "
  "WHERE id = $1::uuid AND result IS NOT NULL "
  /* the api's cached renders of the result go (service/api_result.c) */
  "RETURNING pg_notify('tb_job_changed', id::text)",
};

static const struct tb_db_stmt st_record = {
  "history_record",
  "INSERT INTO series_points (job_id, project_id, endpoint_id, labels, phase, context, "
  "  concurrency, metric, at, value, se, ci_lo, ci_hi) "
  "SELECT j.id, j.project_id, j.endpoint_id, j.labels, p.phase, p.context, p.concurrency, "
  "  p.metric, coalesce(j.finished_at, now()), p.value, p.se, p.ci_lo, p.ci_hi "
  "FROM jobs j, jsonb_to_recordset($2::jsonb) AS p(phase text, context bigint, "
  "  concurrency integer, metric text, value double precision, se double precision, "
  "  ci_lo double precision, ci_hi double precision) "
  "WHERE j.id = $1::uuid AND p.value IS NOT NULL "
  "ON CONFLICT (job_id, phase, context, concurrency, metric) DO UPDATE SET "
  "  value = EXCLUDED.value, se = EXCLUDED.se, ci_lo = EXCLUDED.ci_lo, "
  "  ci_hi = EXCLUDED.ci_hi, at = EXCLUDED.at",
};

static const struct tb_db_stmt st_earlier = {
  "history_earlier",
  "WITH me AS (SELECT project_id, endpoint_id, labels, coalesce(finished_at, now()) AS at "
  "            FROM jobs WHERE id = $1::uuid), "
  "prior AS (SELECT p.job_id, max(p.at) AS at FROM series_points p, me "
  "          WHERE p.project_id = me.project_id AND p.endpoint_id = me.endpoint_id "
  "            AND p.labels = me.labels AND p.at <= me.at AND p.job_id <> $1::uuid "
  "          GROUP BY p.job_id ORDER BY max(p.at) DESC, p.job_id DESC "
  "          LIMIT " STR(
    TB_HISTORY_JOBS) ") "
                     "SELECT p.job_id::text AS job_id, p.at::text AS at, p.phase, p.context, "
                     "p.concurrency, "
                     "  p.metric, p.value, p.se "
                     "FROM series_points p JOIN prior ON prior.job_id = p.job_id "
                     "ORDER BY prior.at, p.job_id",
};

static const struct tb_db_stmt st_series = {
  "history_series",
  "SELECT job_id::text AS job_id, "
  "  to_char(at AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS.US\"Z\"') AS at, "
  "  value, se, ci_lo, ci_hi FROM ("
  "  SELECT * FROM series_points "
  "  WHERE project_id = $1::uuid AND endpoint_id = $2::uuid AND labels = $3::jsonb "
  "    AND phase = $4 AND context = $5::bigint AND concurrency = $6::integer "
  "    AND metric = $7 "
  "  ORDER BY at DESC, job_id DESC LIMIT " STR(TB_HISTORY_SERIES_MAX) ") s "
                                                                      "ORDER BY at, job_id",
};

/* The newest jobs of the key first, from the front of series_points_matrix
 * (sql/0019_history_reads.sql: a job's points share their at), then each
 * one's points from the same index (index-only): it reads what it returns
 * however long the history (issue 36). */
/* clang-format off */
static const struct tb_db_stmt st_matrix = {
  "history_matrix",
  "WITH jobs AS (SELECT DISTINCT at, job_id FROM series_points "
  "              WHERE project_id = $1::uuid AND endpoint_id = $2::uuid "
  "                AND labels = $3::jsonb AND phase = $4 AND metric = $5 "
  "              ORDER BY at DESC, job_id DESC LIMIT " STR(TB_HISTORY_MATRIX_JOBS) ") "
  "SELECT k.job_id::text AS job_id, "
  "  to_char(jobs.at AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS.US\"Z\"') AS at, "
  "  k.context, k.concurrency, k.value "
  "FROM jobs JOIN series_points k ON k.project_id = $1::uuid AND k.endpoint_id = $2::uuid "
  "  AND k.labels = $3::jsonb AND k.phase = $4 AND k.metric = $5 "
  "  AND k.at = jobs.at AND k.job_id = jobs.job_id "
  "ORDER BY jobs.at, k.job_id, k.context, k.concurrency",
};
/* clang-format on */

int
tb_history_matrix(struct tb_db *db, const char *project_id, const char *endpoint_id,
                  const char *labels, const char *phase, const char *metric, PGresult **res)
{
  const char *p[] = { project_id, endpoint_id, labels, phase, metric };
  return tb_db_exec(db, &st_matrix, 5, p, res);
}

int
tb_history_job(struct tb_db *db, const char *job_id, PGresult **res)
{
  const char *p[] = { job_id };
  return tb_db_exec(db, &st_job, 1, p, res);
}

int
tb_history_last_good(struct tb_db *db, const char *endpoint_id, const char *labels,
                     const char *job_id, const char *finished_at, PGresult **res)
{
  const char *p[] = { endpoint_id, labels, job_id, finished_at };
  return tb_db_exec(db, &st_last_good, 4, p, res);
}

int
tb_history_threshold(struct tb_db *db, const char *project_id, const char *labels, PGresult **res)
{
  const char *p[] = { project_id, labels };
  return tb_db_exec(db, &st_threshold, 2, p, res);
}

int
tb_history_write_regressions(struct tb_db *db, const char *job_id, const char *regressions)
{
  const char *p[] = { job_id, regressions };
  return tb_db_exec(db, &st_write, 2, p, NULL);
}

int
tb_history_record(struct tb_db *db, const char *job_id, const char *points)
{
  const char *p[] = { job_id, points };
  return tb_db_exec(db, &st_record, 2, p, NULL);
}

int
tb_history_earlier(struct tb_db *db, const char *job_id, PGresult **res)
{
  const char *p[] = { job_id };
  return tb_db_exec(db, &st_earlier, 1, p, res);
}

int
tb_history_series(struct tb_db *db, const char *project_id, const char *endpoint_id,
                  const char *labels, const char *phase, const char *context,
                  const char *concurrency, const char *metric, PGresult **res)
{
  const char *p[] = { project_id, endpoint_id, labels, phase, context, concurrency, metric };
  return tb_db_exec(db, &st_series, 7, p, res);
}
