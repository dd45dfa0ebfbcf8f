/*
 * api_jobs: what other endpoint families share with api_jobs.c.  Every job
 * the api queues (POST /v1/jobs, POST /v1/presets/{name}/jobs, POST
 * /v1/hooks/{id}, a schedule's slot) and every result imported (POST /v1/results) is written by
 * the one statement behind tb_api_job_insert and tb_api_job_insert_finished:
 * the same row (busy key, defaults), the same NOTIFY to the workers, the same
 * document in the reply.
 */
#ifndef TB_API_JOBS_H
#define TB_API_JOBS_H

#include "api.h"

/* tb_api_job_insert's answer when a limit of ten refuses the job. */
#define TB_API_JOB_REFUSED 3
/* Retry-After of a 429 for the project's queued jobs: they drain at the
 * pace of jobs, not of requests. */
#define TB_API_LIMIT_RETRY_S 60

/*
 * Queues the job of spec (borrowed; a spec tb_spec_job accepted, so its
 * members have the types it checks) in project_id, recording request_id
 * (the X-Request-Id of the request that asked; may be NULL), within the
 * limits of ten (borrowed: the api's tb_tenancy; its shared groups make the
 * busy key).  Runs inside the caller's transaction if any; once that is
 * committed (at once without one), the caller wakes the workers with
 * tb_api_job_queued.  Returns 1 and writes the job id into job_id and the
 * job document (as GET /v1/jobs/{id} returns it, new string: free) into
 * *doc when doc is not NULL; 0 when the spec's endpoint is not one of the
 * project's (or was deleted); TB_API_JOB_REFUSED with *why filled when a
 * limit refuses it (nothing written; reply with tb_api_reply_refusal: the
 * job's seconds count the replay of a trace of trace_span_s, the stored
 * trace's span, tb_plan_job_seconds);
 * TB_DB_SOFT / TB_DB_HARD on database errors.
 */
int tb_api_job_insert(struct tb_db *db, const struct tb_tenancy *ten, const char *project_id,
                      const char *request_id, const json_t *spec, double trace_span_s,
                      char job_id[TB_API_ID_LEN + 1], char **doc,
                      struct tb_tenancy_refusal *why) TB_MUST_CHECK;

/* Where a job comes from besides a request (issue 35): the schedule and
 * the slot (RFC 3339 text) whose run it is; written into the job's row by
 * the same insert (one job per slot: sql/0016_schedules.sql). */
struct tb_api_job_origin {
  const char *schedule_id, *schedule_slot;
};
/* tb_api_job_insert with the job's origin (borrowed; NULL: none). */
int tb_api_job_insert_from(struct tb_db *db, const struct tb_tenancy *ten, const char *project_id,
                           const char *request_id, const json_t *spec, double trace_span_s,
                           const struct tb_api_job_origin *origin, char job_id[TB_API_ID_LEN + 1],
                           char **doc, struct tb_tenancy_refusal *why) TB_MUST_CHECK;

/* The problem+json of a refusal: 422 job-too-large for the job's own size
 * or attempts, 429 limit-reached (Retry-After) for the project's count; both
 * name the limit ("limit", "setting", "max", "value"). */
enum MHD_Result tb_api_reply_refusal(struct tb_api_req *r, const struct tb_tenancy_refusal *why);

/*
 * Writes a finished job (state succeeded, started and finished now) holding
 * result (borrowed: a document tb_import accepted) for endpoint_id in
 * project_id, with spec and labels (borrowed; labels may be NULL) and
 * request_id (may be NULL); its busy key is its own, so it never holds the
 * endpoint.  Returns 1 with the id in job_id, 0 when the endpoint is not one
 * of the project's, TB_DB_SOFT / TB_DB_HARD on database errors.
 */
int tb_api_job_insert_finished(struct tb_db *db, const char *project_id, const char *request_id,
                               const char *endpoint_id, const json_t *spec, const json_t *labels,
                               const json_t *result, char job_id[TB_API_ID_LEN + 1]) TB_MUST_CHECK;

/* NOTIFY tb_jobs_queued '<job_id>' in a transaction of its own (not inside
 * one: see api_jobs.c); a failure is logged, the workers' polling floor
 * finds the job anyway. */
void tb_api_job_queued(struct tb_db *db, const char *job_id);

#endif
