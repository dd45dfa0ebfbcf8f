/*
 * api_result: GET /v1/jobs/{id}/result, and the one reader of a job's
 * document (tb_api_result_doc) that /report and /v1/compare render.  The
 * document itself is built by lib/tb_jobdoc, which also holds the words for
 * states (queued ... cancelled) and statuses (complete ... running).
 */
#include "api_result.h"

#include <stdlib.h>

#include "api_handlers.h"
#include "tb_jobdoc.h"

static const struct tb_db_stmt st_job_doc = {
  "result_job_doc",
  "SELECT j.state, j.result::text, j.header::text, "
  "  coalesce((SELECT json_agg(c.cell ORDER BY c.seq) FROM job_cells c "
  "            WHERE c.job_id = j.id), '[]'::json)::text, "
  "  j.error, j.cells_total, j.labels::text "
  "FROM jobs j WHERE j.id = $1::uuid AND j.project_id = $2::uuid",
};

static const char *
col(PGresult *res, int c)
{
  return PQgetisnull(res, 0, c) ? NULL : PQgetvalue(res, 0, c);
}

int
tb_api_result_doc(struct tb_api_req *r, const char *id, json_t **doc, char **labels)
{
  const char *p[] = { id, r->project_id };
  PGresult *res = NULL;
  struct tb_db *db = tb_api_db_get(r);
  int rc = tb_db_exec(db, &st_job_doc, 2, p, &res);
  tb_api_db_put(r, db);
  *doc = NULL;
  if (labels != NULL)
    *labels = NULL;
  if (rc <= 0) {
    PQclear(res);
    return rc;
  }
  int64_t total = -1;
  if (col(res, 5) != NULL && !tb_parse_i64(col(res, 5), 0, INT64_MAX, &total))
    total = -1;
  struct tb_jobdoc_row row = {
    .job_id = id, .state = col(res, 0), .result = col(res, 1), .header = col(res, 2),
    .cells = col(res, 3), .error = col(res, 4), .cells_total = total,
  };
  *doc = tb_jobdoc_build(&row);
  if (labels != NULL)
    *labels = tb_xstrdup(PQgetvalue(res, 0, 6));
  PQclear(res);
  return 1;
}

bool
tb_api_result_get(struct tb_api_req *r, json_t **doc, enum MHD_Result *ret)
{
  int rc = tb_api_result_doc(r, r->id, doc, NULL);
  if (rc < 0)
    *ret = tb_api_reply_db(r, rc);
  else if (rc == 0)
    *ret = tb_api_reply_error(r, TB_EC_NOT_FOUND, "no such job", NULL);
  return rc > 0;
}

enum MHD_Result
tb_api_jobs_result(struct tb_api_req *r)
{
  json_t *doc = NULL;
  enum MHD_Result ret;
  if (!tb_api_result_get(r, &doc, &ret))
    return ret;
  return tb_api_reply_json(r, MHD_HTTP_OK, doc, NULL);
}
