/*
 * q_result: the statements of a job's result document: GET
 * /v1/jobs/{id}/result, /report and /v1/compare (service/api_result.c) and
 * the regressions of an imported one (POST /v1/results,
 * service/api_import.c); columns jobs.result, header, labels
 * (sql/0002_endpoints_jobs.sql, sql/0003_api.sql) and job_cells.  One
 * function per statement (the SQL beside it in q_result.c), columns read by
 * name; each returns the row count or TB_DB_SOFT / TB_DB_HARD.
 */
#ifndef TB_Q_RESULT_H
#define TB_Q_RESULT_H

#include "db/tb_db.h"
#include "base/tb_util.h"

/* What a job's document is built from (new strings, NULL when NULL). */
struct tb_q_result_job {
  char *state, *result, *header;
  char *cells; /* JSON array of the cells stored, in order */
  char *error, *labels;
  char *cells_total; /* integer text, NULL when unknown */
  bool imported;     /* POST /v1/results made it (its spec says "imported") */
  char *spec;        /* jobs.spec */
};
/* Reads job id of project_id; 1, or 0 when there is none.  Free with
 * tb_q_result_job_clear. */
int tb_q_result_job(struct tb_db *db, const char *id, const char *project_id,
                    struct tb_q_result_job *out) TB_MUST_CHECK;
void tb_q_result_job_clear(struct tb_q_result_job *j);

/* The regressions member of job id's stored result (*json, new; NULL when
 * none). */
int tb_q_result_regressions(struct tb_db *db, const char *id, char **json) TB_MUST_CHECK;

#endif
