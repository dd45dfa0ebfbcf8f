/*
 * api_traces: what the rest of the api shares with /v1/traces
 * (api_traces.c): its settings, and the check of a job naming a trace.
 */
#ifndef TB_API_TRACES_H
#define TB_API_TRACES_H

#include "api.h"
#include "api_jobs.h"
#include "db/tb_tracestore.h"

/* Reads TB_TRACESTORE_CFG_KEYS (db/tb_tracestore.h) into api (trace_body_max, limit_traces,
 * limit_trace_bytes) and its streams table (api->streams, made before:
 * the uploads' cap).  False with *err (new) on a bad value. */
bool tb_api_traces_config(struct tb_api *api, char **err) TB_MUST_CHECK;

/* tb_api_traces_job_insert's answer for a spec naming no good trace. */
#define TB_API_TRACES_BAD 2

/*
 * Queues the job of spec (as tb_spec_job normalised it; a spec without a
 * trace goes straight to tb_api_job_insert, api_jobs.h, whose arguments
 * and answers these are) after checking the trace it names: through the
 * service a trace object must name an uploaded trace by "id", one of
 * project_id's; its "format" may be left out (the stored trace's is then
 * written into spec) and must be the stored trace's when given.
 * TB_API_TRACES_BAD with *errors (new: [{field, detail}], as
 * tb_spec_job's) when it does not — a trace of another project is "no
 * such trace" as a missing one is.  The check and the insert run in one
 * transaction (the caller's if any) holding the trace's row, so a DELETE
 * of the trace (tb_q_traces_delete) either ends before, and the job is
 * refused, or waits for the job and answers 409.
 */
int tb_api_traces_job_insert(struct tb_db *db, const struct tb_tenancy *ten, const char *project_id,
                             const char *request_id, json_t *spec, char job_id[TB_API_ID_LEN + 1],
                             char **doc, json_t **errors,
                             struct tb_tenancy_refusal *why) TB_MUST_CHECK;
/* The same for a job of an origin (api_jobs.h; NULL: none): a schedule's
 * slot (issue 35). */
int tb_api_traces_job_insert_from(struct tb_db *db, const struct tb_tenancy *ten,
                                  const char *project_id, const char *request_id, json_t *spec,
                                  const struct tb_api_job_origin *origin,
                                  char job_id[TB_API_ID_LEN + 1], char **doc, json_t **errors,
                                  struct tb_tenancy_refusal *why) TB_MUST_CHECK;

#endif
