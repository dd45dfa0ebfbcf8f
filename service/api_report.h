/*
 * api_report: what the report family's files share (issue 6: api_report.c,
 * api_compare.c, api_import.c, api_thresholds.c; the static files are
 * api_web.h).  Their route handlers are declared in api_handlers.h:
 *
 *   GET    /v1/jobs/{id}/report   report of a job (?format= or Accept: html,
 *                                 md, csv, json); partial while it runs
 *   GET    /v1/compare            ?base=JOB&head=JOB[&tolerance=PCT][&format=]
 *   POST   /v1/results            import a result (ours or llm-inference-bench's)
 *   GET    /v1/thresholds         the project's thresholds
 *   POST   /v1/thresholds         {labels, tolerance_pct}: create or replace
 *   DELETE /v1/thresholds/{id}
 */
#ifndef TB_API_REPORT_H
#define TB_API_REPORT_H

#include "api.h"
#include "render/tb_report.h"

/* The format of a rendered answer: ?format=, else the first known media type
 * of Accept, else dflt.  False (a 400 queued into *ret) on an unknown
 * ?format=. */
bool tb_api_report_format(struct tb_api_req *r, enum tb_report_format dflt,
                          enum tb_report_format *f, enum MHD_Result *ret) TB_MUST_CHECK;

/* The Content-Security-Policy of a report's HTML (and of a share link's
 * page): no script, no remote anything. */
#define TB_API_REPORT_CSP                                                           \
  "default-src 'none'; style-src 'unsafe-inline'; img-src data:; base-uri 'none'; " \
  "form-action 'none'"

/* Replies 200 with body (borrowed; len bytes) in format f (HTML with a
 * Content-Security-Policy that allows no script), or 500 with err when body
 * is NULL. */
enum MHD_Result tb_api_report_reply(struct tb_api_req *r, enum tb_report_format f, char *body,
                                    size_t len, const char *err);

/* Labels as import and thresholds take them: an object of at most 16 string
 * values of at most 200 bytes, keys 1 to 64 of [A-Za-z0-9._-]. */
bool tb_api_labels_ok(const json_t *labels);

#endif
