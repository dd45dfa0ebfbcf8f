/*
 * api_handlers: every route handler, one endpoint family per file.  To add a
 * route: write the handler in service/api_<family>.c, declare it here, and
 * add its row to routes[] in api_routes.c (method, path, scope, json_body).
 */
#ifndef TB_API_HANDLERS_H
#define TB_API_HANDLERS_H

#include "api.h"

/* api_health.c (public) */
enum MHD_Result tb_api_healthz(struct tb_api_req *r);
enum MHD_Result tb_api_readyz(struct tb_api_req *r);

/* api_keys.c */
enum MHD_Result tb_api_keys_create(struct tb_api_req *r);
enum MHD_Result tb_api_keys_list(struct tb_api_req *r);
enum MHD_Result tb_api_keys_revoke(struct tb_api_req *r);

/* api_endpoints.c */
enum MHD_Result tb_api_endpoints_create(struct tb_api_req *r);
enum MHD_Result tb_api_endpoints_list(struct tb_api_req *r);
enum MHD_Result tb_api_endpoints_get(struct tb_api_req *r);
enum MHD_Result tb_api_endpoints_patch(struct tb_api_req *r);
enum MHD_Result tb_api_endpoints_delete(struct tb_api_req *r);
enum MHD_Result tb_api_endpoints_probe(struct tb_api_req *r);
/* At start: re-seals the endpoint keys sealed before they were bound to
 * their origin (sql/0008).  The count re-sealed, or < 0 on a database error. */
int tb_api_endpoints_reseal(struct tb_api *api, struct tb_db *db);

/* api_jobs.c */
enum MHD_Result tb_api_jobs_submit(struct tb_api_req *r);
enum MHD_Result tb_api_jobs_list(struct tb_api_req *r);
enum MHD_Result tb_api_jobs_get(struct tb_api_req *r);
enum MHD_Result tb_api_jobs_cancel(struct tb_api_req *r);

/* api_result.c */
enum MHD_Result tb_api_jobs_result(struct tb_api_req *r);

/* api_signkeys.c (public: the JWK set of the keys results are signed with) */
enum MHD_Result tb_api_signing_keys(struct tb_api_req *r);

/* api_events.c */
enum MHD_Result tb_api_jobs_events(struct tb_api_req *r);

/* reports and results (issue 6): api_report.c, api_compare.c, api_import.c,
 * api_thresholds.c, api_web.c (public); shared helpers in api_report.h */
enum MHD_Result tb_api_jobs_report(struct tb_api_req *r);
enum MHD_Result tb_api_compare(struct tb_api_req *r);
enum MHD_Result tb_api_results_import(struct tb_api_req *r);
enum MHD_Result tb_api_thresholds_list(struct tb_api_req *r);
/* api_series.c: GET /v1/series (issue 14) */
enum MHD_Result tb_api_series(struct tb_api_req *r);
/* api_pareto.c: GET /v1/pareto (issue 26) */
enum MHD_Result tb_api_pareto(struct tb_api_req *r);
/* Adds "project_frontier" to a job's document (edited) for its HTML report:
 * the project's other succeeded jobs' points and the job's own (x, y
 * tok/s per GPU, frontier, own); nothing when either side has none. */
void tb_api_pareto_report(struct tb_api_req *r, json_t *doc);
enum MHD_Result tb_api_thresholds_put(struct tb_api_req *r);
enum MHD_Result tb_api_thresholds_delete(struct tb_api_req *r);
enum MHD_Result tb_api_web_index(struct tb_api_req *r);
enum MHD_Result tb_api_web_file(struct tb_api_req *r);

/* CI integration (issue 7): api_presets.c, api_hooks.c, api_deliveries.c,
 * api_metrics.c; shared helpers in api_ci.h. */
enum MHD_Result tb_api_presets_create(struct tb_api_req *r);
enum MHD_Result tb_api_presets_list(struct tb_api_req *r);
enum MHD_Result tb_api_presets_get(struct tb_api_req *r);
enum MHD_Result tb_api_presets_put(struct tb_api_req *r);
enum MHD_Result tb_api_presets_delete(struct tb_api_req *r);
enum MHD_Result tb_api_presets_run(struct tb_api_req *r);
enum MHD_Result tb_api_hooks_create(struct tb_api_req *r);
enum MHD_Result tb_api_hooks_list(struct tb_api_req *r);
enum MHD_Result tb_api_hooks_get(struct tb_api_req *r);
enum MHD_Result tb_api_hooks_delete(struct tb_api_req *r);
enum MHD_Result tb_api_hooks_receive(struct tb_api_req *r);
/* The admit of POST /v1/hooks/{id} (api.h): true when the hook exists, so
 * a body larger than TOKBENCH_PREAUTH_BODY is read only for a real hook
 * (its signature is checked on the whole body). */
bool tb_api_hooks_admit(struct tb_api_req *r);
enum MHD_Result tb_api_deliveries_callback_create(struct tb_api_req *r);
enum MHD_Result tb_api_deliveries_callback_list(struct tb_api_req *r);
enum MHD_Result tb_api_deliveries_callback_delete(struct tb_api_req *r);
enum MHD_Result tb_api_deliveries_list(struct tb_api_req *r);
enum MHD_Result tb_api_metrics(struct tb_api_req *r);

/* api_traces.c: production traces (issue 25); shared parts in api_traces.h */
enum MHD_Result tb_api_traces_upload(struct tb_api_req *r);
enum MHD_Result tb_api_traces_list(struct tb_api_req *r);
enum MHD_Result tb_api_traces_get(struct tb_api_req *r);
enum MHD_Result tb_api_traces_delete(struct tb_api_req *r);

/* api_schedules.c: schedules (issue 35); the ticker in api_schedtick.c */
enum MHD_Result tb_api_schedules_create(struct tb_api_req *r);
enum MHD_Result tb_api_schedules_list(struct tb_api_req *r);
enum MHD_Result tb_api_schedules_get(struct tb_api_req *r);
enum MHD_Result tb_api_schedules_patch(struct tb_api_req *r);
enum MHD_Result tb_api_schedules_delete(struct tb_api_req *r);
/* api_shares.c, api_sharepage.c: share links (issue 35); shared parts in
 * api_shares.h */
enum MHD_Result tb_api_shares_job(struct tb_api_req *r);
enum MHD_Result tb_api_shares_compare(struct tb_api_req *r);
enum MHD_Result tb_api_shares_endpoint(struct tb_api_req *r);
enum MHD_Result tb_api_shares_list(struct tb_api_req *r);
enum MHD_Result tb_api_shares_revoke(struct tb_api_req *r);
enum MHD_Result tb_api_shares_open(struct tb_api_req *r);

#endif
