/*
 * tb_regress: compares a finished job with the last good job of the same
 * endpoint and labels, and records the outcome in its result.  See
 * tb_regress.h.  Three reads and one write, each one statement; no
 * transaction: the write is a single UPDATE of one row, and a concurrent
 * recheck would compute the same thing.
 */
#include "tb_regress.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "tb_compare.h"

static const struct tb_db_stmt st_job = {
  "regress_job",
  "SELECT j.project_id::text, j.endpoint_id::text, j.labels::text, j.result::text, "
  "  j.state, coalesce(j.finished_at, now())::text "
  "FROM jobs j WHERE j.id = $1::uuid",
};

/* "Last good": succeeded, a complete result, finished before the job. */
static const struct tb_db_stmt st_base = {
  "regress_base",
  "SELECT j.id::text, j.result::text FROM jobs j "
  "WHERE j.endpoint_id = $1::uuid AND j.labels = $2::jsonb AND j.state = 'succeeded' "
  "  AND j.id <> $3::uuid AND j.result IS NOT NULL "
  "  AND j.result ->> 'status' = 'complete' "
  "  AND j.finished_at <= $4::timestamptz "
  "ORDER BY j.finished_at DESC, j.id DESC LIMIT 1",
};

static const struct tb_db_stmt st_threshold = {
  "regress_threshold",
  "SELECT t.tolerance FROM thresholds t "
  "WHERE t.project_id = $1::uuid AND coalesce($2::jsonb, '{}'::jsonb) @> t.labels "
  "ORDER BY (SELECT count(*) FROM jsonb_object_keys(t.labels)) DESC, t.updated_at DESC "
  "LIMIT 1",
};

static const struct tb_db_stmt st_write = {
  "regress_write",
  "UPDATE jobs SET result = jsonb_set(result, '{regressions}', $2::jsonb), "
  "  updated_at = now() "
  "WHERE id = $1::uuid AND result IS NOT NULL",
};

double
tb_regress_tolerance(struct tb_db *db, const char *project_id, const char *labels, int *rc)
{
  const char *p[] = { project_id, labels };
  PGresult *res = NULL;
  double tol = TB_REGRESS_DEFAULT_TOLERANCE;
  int n = tb_db_exec(db, &st_threshold, 2, p, &res);
  *rc = n < 0 ? n : 0;
  if (n > 0 && !PQgetisnull(res, 0, 0)) {
    double t = strtod(PQgetvalue(res, 0, 0), NULL);
    if (t >= 0 && t < 1)
      tol = t;
  }
  PQclear(res);
  return tol;
}

int
tb_regress_check(struct tb_db *db, const char *job_id)
{
  PGresult *job = NULL, *base = NULL;
  json_t *head_doc = NULL, *base_doc = NULL, *cmp = NULL, *out = NULL;
  char *text = NULL, *err = NULL;
  int ret;
  const char *p1[] = { job_id };
  int n = tb_db_exec(db, &st_job, 1, p1, &job);
  if (n < 0) {
    ret = n;
    goto out;
  }
  ret = TB_REGRESS_SKIP;
  if (n == 0 || PQgetisnull(job, 0, 3) || strcmp(PQgetvalue(job, 0, 4), "succeeded") != 0)
    goto out;
  const char *project = PQgetvalue(job, 0, 0), *endpoint = PQgetvalue(job, 0, 1);
  const char *labels = PQgetvalue(job, 0, 2), *finished = PQgetvalue(job, 0, 5);
  head_doc = json_loads(PQgetvalue(job, 0, 3), 0, NULL);
  if (!json_is_object(head_doc))
    goto out;

  int rc = 0;
  double tol = tb_regress_tolerance(db, project, labels, &rc);
  if (rc < 0) {
    ret = rc;
    goto out;
  }
  const char *p2[] = { endpoint, labels, job_id, finished };
  n = tb_db_exec(db, &st_base, 4, p2, &base);
  if (n < 0) {
    ret = n;
    goto out;
  }
  char ts[40];
  tb_time_rfc3339(tb_time_real_us(), ts, sizeof ts);
  out = json_object();
  json_object_set_new(out, "tolerance", json_real(tol));
  json_object_set_new(out, "checked_at", json_string(ts));
  if (n > 0)
    base_doc = json_loads(PQgetvalue(base, 0, 1), 0, NULL);
  if (json_is_object(base_doc))
    cmp = tb_compare(base_doc, head_doc, tol, &err);
  if (cmp != NULL) {
    const char *brun = json_string_value(json_object_get(base_doc, "run_id"));
    json_object_set_new(out, "base_job_id", json_string(PQgetvalue(base, 0, 0)));
    json_object_set_new(out, "base_run_id", brun ? json_string(brun) : json_null());
    json_object_set(out, "regressed", json_object_get(cmp, "regressed"));
    json_object_set(out, "cells", json_object_get(cmp, "regressions"));
    json_object_set(out, "summary", json_object_get(cmp, "summary"));
  } else {
    json_object_set_new(out, "base_job_id", json_null());
    json_object_set_new(out, "base_run_id", json_null());
    json_object_set_new(out, "regressed", json_false());
    json_object_set_new(out, "cells", json_array());
    json_object_set_new(out, "note",
                        json_string(err ? err
                                        : "no earlier complete job of this endpoint with "
                                          "the same labels"));
  }
  text = json_dumps(out, JSON_COMPACT);
  const char *p3[] = { job_id, text };
  n = tb_db_exec(db, &st_write, 2, p3, NULL);
  if (n < 0) {
    ret = n;
    goto out;
  }
  ret = json_is_true(json_object_get(out, "regressed")) ? TB_REGRESS_FOUND : TB_REGRESS_NONE;
out:
  free(text);
  free(err);
  json_decref(out);
  json_decref(cmp);
  json_decref(base_doc);
  json_decref(head_doc);
  PQclear(base);
  PQclear(job);
  return ret;
}
