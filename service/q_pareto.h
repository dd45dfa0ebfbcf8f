/*
 * q_pareto: the statement of GET /v1/pareto (service/api_pareto.c): a
 * project's succeeded jobs (sql/0002_endpoints_jobs.sql), filtered by
 * endpoint, labels (the jobs' labels contain them) and a time range on
 * created_at, newest first, at most TB_Q_PARETO_JOBS; each with its
 * endpoint's name and its result document's header and decode cells
 * (without samples, series or repeat runs).  Columns read by name.
 */
#ifndef TB_Q_PARETO_H
#define TB_Q_PARETO_H

#include <jansson.h>

#include "db/tb_db.h"
#include "base/tb_util.h"

#define TB_Q_PARETO_JOBS 200

/* fn gets each row (strings borrowed for the call; doc a new reference the
 * callee may keep, labels borrowed).  endpoint_id, labels (a JSON object's
 * text), since and until (RFC 3339) may be NULL.  Returns the row count or
 * TB_DB_SOFT / TB_DB_HARD. */
typedef void (*tb_q_pareto_fn)(void *cls, const char *job_id, const char *endpoint_id,
                               const char *endpoint_name, const json_t *labels, json_t *doc);
int tb_q_pareto_jobs(struct tb_db *db, const char *project_id, const char *endpoint_id,
                     const char *labels, const char *since, const char *until, tb_q_pareto_fn fn,
                     void *cls) TB_MUST_CHECK;

#endif
