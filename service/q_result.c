/*
 * q_result: see q_result.h.
 */
#include "q_result.h"

#include <stdlib.h>
#include <string.h>

static const struct tb_db_stmt st_job_doc = {
  "result_job_doc",
  "SELECT j.state, j.result::text AS result, j.header::text AS header, "
  /* a finished job's stored document holds its cells (tb_jobdoc_build
   * reads these only without one): not read twice (issue 36) */
  "  CASE WHEN j.result IS NULL OR j.state NOT IN ('succeeded', 'failed', 'cancelled') THEN "
  "  coalesce((SELECT json_agg(c.cell ORDER BY c.seq) FROM job_cells c "
  "            WHERE c.job_id = j.id), '[]'::json)::text END AS cells, "
  "  j.error, j.cells_total, j.labels::text AS labels, "
  "  coalesce(j.spec @> '{\"imported\": true}', false) AS imported, j.spec::text AS spec "
  "FROM jobs j WHERE j.id = $1::uuid AND j.project_id = $2::uuid",
};

int
tb_q_result_job(struct tb_db *db, const char *id, const char *project_id,
                struct tb_q_result_job *out)
{
  memset(out, 0, sizeof *out);
  const char *p[] = { id, project_id };
  PGresult *res = NULL;
  int rc = tb_db_exec(db, &st_job_doc, 2, p, &res);
  if (rc > 0) {
    out->state = tb_db_dup(res, 0, "state");
    out->result = tb_db_dup(res, 0, "result");
    out->header = tb_db_dup(res, 0, "header");
    out->cells = tb_db_dup(res, 0, "cells");
    out->error = tb_db_dup(res, 0, "error");
    out->cells_total = tb_db_dup(res, 0, "cells_total");
    out->labels = tb_db_dup(res, 0, "labels");
    out->imported = tb_db_bool(res, 0, "imported");
    out->spec = tb_db_dup(res, 0, "spec");
  }
  PQclear(res);
  return rc;
}

void
tb_q_result_job_clear(struct tb_q_result_job *j)
{
  free(j->state);
  free(j->result);
  free(j->header);
  free(j->cells);
  free(j->error);
  free(j->labels);
  free(j->cells_total);
  free(j->spec);
  memset(j, 0, sizeof *j);
}

static const struct tb_db_stmt st_regressed = {
  "import_regressed",
  "SELECT (result -> 'regressions')::text AS regressions FROM jobs WHERE id = $1::uuid",
};

int
tb_q_result_regressions(struct tb_db *db, const char *id, char **json)
{
  const char *p[] = { id };
  return tb_db_exec_str(db, &st_regressed, 1, p, "regressions", json, NULL);
}
