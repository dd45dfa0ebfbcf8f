/*
 * api_report: the routes of issue 6 (reports, comparisons, thresholds,
 * import, and the static web frontend).  Handlers in api_report.c; their rows
 * are in api_routes.c.
 *
 *   GET    /v1/jobs/{id}/report   report of a job (?format= or Accept: html,
 *                                 md, csv, json); partial while it runs
 *   GET    /v1/compare            ?base=JOB&head=JOB[&tolerance=PCT][&format=]
 *   POST   /v1/results            import a result (ours or llm-inference-bench's)
 *   GET    /v1/thresholds         the project's thresholds
 *   POST   /v1/thresholds         {labels, tolerance_pct}: create or replace
 *   DELETE /v1/thresholds/{id}
 *   GET    /                      web/index.html (no key)
 *   GET    /web/{name}            web/<name> (no key; one path segment, a
 *                                 known extension, a regular file)
 */
#ifndef TB_API_REPORT_H
#define TB_API_REPORT_H

#include "api.h"

#define TB_API_WEB_FILE_MAX (4 * 1024 * 1024)

/* The directory the static files are served from (api->web_dir), resolved
 * once at start: configured (TOKBENCH_WEB_DIR) when set and not empty, else
 * <binary>/../web, <binary>/../../web or <binary>/../share/tokbench/web,
 * the first holding index.html, else ./web.  Returns a new string (free). */
char *tb_api_web_dir_resolve(const char *configured) TB_MUST_CHECK;

enum MHD_Result tb_api_jobs_report(struct tb_api_req *r);
enum MHD_Result tb_api_compare(struct tb_api_req *r);
enum MHD_Result tb_api_results_import(struct tb_api_req *r);
enum MHD_Result tb_api_thresholds_list(struct tb_api_req *r);
enum MHD_Result tb_api_thresholds_put(struct tb_api_req *r);
enum MHD_Result tb_api_thresholds_delete(struct tb_api_req *r);
enum MHD_Result tb_api_web_index(struct tb_api_req *r);
enum MHD_Result tb_api_web_file(struct tb_api_req *r);

#endif
