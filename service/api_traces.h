/*
 * api_traces: what the rest of the api shares with /v1/traces
 * (api_traces.c): its settings, and the check of a job naming a trace.
 */
#ifndef TB_API_TRACES_H
#define TB_API_TRACES_H

#include "api.h"
#include "db/tb_tracestore.h"

/* Reads TB_TRACESTORE_CFG_KEYS (db/tb_tracestore.h) into api (trace_body_max, limit_traces,
 * limit_trace_bytes) and its streams table (api->streams, made before:
 * the uploads' cap).  False with *err (new) on a bad value. */
bool tb_api_traces_config(struct tb_api *api, char **err) TB_MUST_CHECK;

/*
 * The trace a job's spec (borrowed, as tb_spec_job normalised it) names,
 * checked before the job is queued: through the service a trace object
 * must name an uploaded trace by "id", one of project_id's, of the
 * spec's "format".  1 when the spec has no trace or names a good one; 0
 * with *errors (new: [{field, detail}], as tb_spec_job's) when not — a
 * trace of another project is "no such trace" as a missing one is;
 * TB_DB_SOFT / TB_DB_HARD on database errors.
 */
int tb_api_traces_check_job(struct tb_db *db, const char *project_id, const json_t *spec,
                            json_t **errors) TB_MUST_CHECK;

#endif
