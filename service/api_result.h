/*
 * api_result: a job's document (lib/result/tb_jobdoc: the stored result of a
 * finished job, else its header and the cells so far), read by one
 * statement for GET /v1/jobs/{id}/result, /report and /v1/compare.
 */
#ifndef TB_API_RESULT_H
#define TB_API_RESULT_H

#include "api.h"

/*
 * The document of job id in the caller's project (tb_jobdoc_build).  Returns
 * 1 with *doc (new) and, when labels is not NULL, *labels (the job's labels
 * as JSON text, new string); 0 when there is no such job; TB_DB_SOFT /
 * TB_DB_HARD on database errors.
 */
int tb_api_result_doc(struct tb_api_req *r, const char *id, json_t **doc,
                      char **labels) TB_MUST_CHECK;

/* The document of the job r->id names: true with *doc (new), else false
 * with a reply queued into *ret (404 no such job, or the database error). */
bool tb_api_result_get(struct tb_api_req *r, json_t **doc, enum MHD_Result *ret) TB_MUST_CHECK;

#endif
