/*
 * q_pareto: see q_pareto.h.
 */
#include "q_pareto.h"

#include <string.h>

static const struct tb_db_stmt pareto_jobs = {
  "api_pareto_jobs",
  "SELECT j.id::text AS id, j.endpoint_id::text AS endpoint_id, e.name AS endpoint_name, "
  "  j.labels::text AS labels, "
  /* pareto_doc: the result without what the frontier does not read
   * (sql/0019_history_reads.sql); made here only for a result without cells */
  "  coalesce(j.pareto_doc, "
  "  coalesce(j.result, '{}'::jsonb) - 'cells' || jsonb_build_object('cells', "
  "    (SELECT coalesce(jsonb_agg(c - 'samples' - 'server_series' - 'repeat_runs'), '[]') "
  "       FROM jsonb_array_elements(coalesce(j.result->'cells', "
  "         (SELECT jsonb_agg(x.cell ORDER BY x.seq) FROM job_cells x WHERE x.job_id = j.id), "
  "         '[]'::jsonb)) c "
  "      WHERE c->>'phase' = 'decode' AND c->>'status' = 'valid')))::text AS doc "
  "FROM jobs j JOIN endpoints e ON e.id = j.endpoint_id "
  "WHERE j.project_id = $1 AND j.state = 'succeeded' "
  "  AND ($2::uuid IS NULL OR j.endpoint_id = $2::uuid) "
  "  AND j.labels @> coalesce($3::jsonb, '{}'::jsonb) "
  "  AND ($4::timestamptz IS NULL OR j.created_at >= $4::timestamptz) "
  "  AND ($5::timestamptz IS NULL OR j.created_at < $5::timestamptz) "
  "ORDER BY j.created_at DESC, j.id LIMIT 200", /* TB_Q_PARETO_JOBS */
};

int
tb_q_pareto_jobs(struct tb_db *db, const char *project_id, const char *endpoint_id,
                 const char *labels, const char *since, const char *until, tb_q_pareto_fn fn,
                 void *cls)
{
  const char *p[] = { project_id, endpoint_id, labels, since, until };
  PGresult *res = NULL;
  int rc = tb_db_exec(db, &pareto_jobs, 5, p, &res);
  for (int i = 0; i < rc; i++) {
    json_t *doc = json_loads(tb_db_str(res, i, "doc"), 0, NULL);
    json_t *lab = json_loads(tb_db_str(res, i, "labels"), 0, NULL);
    if (doc != NULL)
      fn(cls, tb_db_str(res, i, "id"), tb_db_str(res, i, "endpoint_id"),
         tb_db_str(res, i, "endpoint_name"), lab, doc);
    json_decref(lab);
  }
  PQclear(res);
  return rc;
}
