/*
 * api_ci: what the CI-integration files of the api share (api_presets.c,
 * api_hooks.c, api_deliveries.c; issue 7): ids and sealed secrets of hooks
 * and callbacks, the public URL of links, and a job from a preset.
 */
#ifndef TB_API_CI_H
#define TB_API_CI_H

#include "api.h"

/* A new random (version 4) UUID into out[37]; false when the RNG fails. */
bool tb_api_ci_uuid(char out[TB_API_ID_LEN + 1]) TB_MUST_CHECK;

/*
 * Queues a job from a preset's spec (borrowed, as stored) with extra labels
 * merged over the preset's (borrowed, may be NULL).  The merged spec is
 * validated again with tb_spec_job, so a job made from a preset obeys the
 * same rules as POST /v1/jobs, and written by the same tb_api_job_insert
 * (api_jobs.h), recording request_id, within the limits of ten.  On success
 * returns 1 and writes the job id into job_id and the job document (new
 * string) into *doc when doc is not NULL.  Returns 0 when the preset's
 * endpoint is gone, TB_DB_SOFT / TB_DB_HARD on database errors, 2 with
 * *errors (new array) when the merged spec is invalid or names no trace of
 * the project (tb_api_traces_job_insert), and
 * TB_API_JOB_REFUSED with *why when a limit refuses the job.  Runs inside the caller's transaction if any; the
 * caller sends tb_api_job_queued once it is committed.
 */
int tb_api_ci_start_job(struct tb_db *db, const struct tb_tenancy *ten, const char *project_id,
                        const char *request_id, const json_t *preset_spec,
                        const json_t *extra_labels, char job_id[TB_API_ID_LEN + 1], char **doc,
                        json_t **errors, struct tb_tenancy_refusal *why) TB_MUST_CHECK;

/*
 * The id and signing secret of a new hook or callback: a random UUID into
 * id, *secret = make() (new; the caller wipes and frees it) and *sealed
 * (new) the secret sealed under the master key with id as associated data.
 * False with a reply queued into *ret: no master key (no_master_key detail
 * names what needs it) or a failing RNG / cipher (500).
 */
bool tb_api_ci_new_secret(struct tb_api_req *r, char *(*make)(void), const char *no_master_key,
                          char id[TB_API_ID_LEN + 1], char **secret, char **sealed,
                          enum MHD_Result *ret) TB_MUST_CHECK;

/* What the create handler of a hook or a callback holds, freed in one
 * place (tb_api_ci_new_clear, the secret wiped). */
struct tb_api_ci_new {
  json_t *body; /* the request's JSON object */
  char *events; /* its "events" as a JSON array text */
  char id[TB_API_ID_LEN + 1];
  char *secret, *sealed;
  char *doc; /* the new row's document, as the insert returned it */
};
/* Reads r's body into n->body (a JSON object of the allowed members
 * only).  False with a reply queued into *ret. */
bool tb_api_ci_new_body(struct tb_api_req *r, const char *const *allowed, struct tb_api_ci_new *n,
                        enum MHD_Result *ret) TB_MUST_CHECK;
/* n->body's "events" into n->events: def when absent, else an array of
 * min to max strings that name_ok accepts (422 on "events": bad_array for
 * the array, bad_name for a name).  False with a reply queued into *ret. */
bool tb_api_ci_new_events(struct tb_api_req *r, struct tb_api_ci_new *n, const char *def,
                          size_t min, size_t max, bool (*name_ok)(const char *),
                          const char *bad_array, const char *bad_name,
                          enum MHD_Result *ret) TB_MUST_CHECK;
void tb_api_ci_new_clear(struct tb_api_ci_new *n);

/* 201 for the new hook or callback n: n->doc with "secret" (shown this
 * once: tb_api_reply_secret_created) and, when with_url, "url" (the public
 * URL of the Location); Location: base followed by n->id. */
enum MHD_Result tb_api_ci_reply_created(struct tb_api_req *r, const struct tb_api_ci_new *n,
                                        const char *base, bool with_url);

/* The public base URL for links (TOKBENCH_PUBLIC_URL, else
 * http://<listen host>:<port>); borrowed from the config or a static. */
const char *tb_api_ci_public_url(struct tb_api *api);

#endif
