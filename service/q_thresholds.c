/*
 * q_thresholds: see q_thresholds.h.
 */
#include "q_thresholds.h"

#define THRESHOLD_JSON                                                                     \
  "json_build_object('id', t.id, 'labels', t.labels, 'tolerance_pct', t.tolerance * 100, " \
  "'created_at', t.created_at, 'updated_at', t.updated_at)"

static const struct tb_db_stmt st_thr_list = {
  "thr_list",
  "SELECT coalesce(json_agg(" THRESHOLD_JSON " ORDER BY t.created_at, t.id), '[]'::json)::text "
  "  AS doc FROM thresholds t WHERE t.project_id = $1::uuid",
};

int
tb_q_thresholds_list(struct tb_db *db, const char *project_id, char **doc)
{
  const char *p[] = { project_id };
  return tb_db_exec_str(db, &st_thr_list, 1, p, "doc", doc, NULL);
}

static const struct tb_db_stmt st_thr_put = {
  "thr_put",
  "INSERT INTO thresholds AS t (project_id, labels, tolerance) "
  "VALUES ($1::uuid, $2::jsonb, $3::float8) "
  "ON CONFLICT (project_id, labels) DO UPDATE SET tolerance = EXCLUDED.tolerance, "
  "  updated_at = now() "
  "RETURNING " THRESHOLD_JSON "::text AS doc, (t.xmax = 0) AS created",
};

int
tb_q_thresholds_put(struct tb_db *db, const char *project_id, const char *labels,
                    const char *tolerance, char **doc, bool *created)
{
  const char *p[] = { project_id, labels, tolerance };
  PGresult *res = NULL;
  *doc = NULL;
  *created = false;
  int rc = tb_db_exec(db, &st_thr_put, 3, p, &res);
  if (rc > 0) {
    *doc = tb_db_dup(res, 0, "doc");
    *created = tb_db_bool(res, 0, "created");
  }
  PQclear(res);
  return rc;
}

static const struct tb_db_stmt st_thr_delete = {
  "thr_delete",
  "DELETE FROM thresholds WHERE id = $1::uuid AND project_id = $2::uuid",
};

int
tb_q_thresholds_delete(struct tb_db *db, const char *id, const char *project_id)
{
  const char *p[] = { id, project_id };
  return tb_db_exec(db, &st_thr_delete, 2, p, NULL);
}
