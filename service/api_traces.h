/*
 * api_traces: what the rest of the api shares with /v1/traces
 * (api_traces.c): its settings, and the check of a job naming a trace.
 */
#ifndef TB_API_TRACES_H
#define TB_API_TRACES_H

#include "api.h"

/* The settings of uploaded traces (README's configuration table). */
#define TB_API_TRACES_CFG_KEYS                                                                     \
  { "TOKBENCH_TRACE_MAX_BYTES", "33554432",                                                        \
    "largest trace a POST /v1/traces may send, in bytes as sent (gzip or not; 413 above)",         \
    false },                                                                                       \
    { "TOKBENCH_LIMIT_TRACES", "100", "traces stored per project (429 above; 0: no cap)", false }, \
  {                                                                                                \
    "TOKBENCH_LIMIT_TRACE_BYTES", "1073741824",                                                    \
      "bytes of traces stored per project, as sent (429 above; 0: no cap)", false                  \
  }

/* Reads the keys above into api (trace_body_max, limit_traces,
 * limit_trace_bytes).  False with *err (new) on a bad value. */
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
