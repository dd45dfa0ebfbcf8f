/*
 * api_compare: GET /v1/compare?base=JOB&head=JOB[&tolerance=PCT][&format=]:
 * two jobs' documents (api_result.c) cell by cell (lib/result/tb_compare), rendered
 * as a report is (api_report.h).  Without ?tolerance= the tolerance is the
 * project's threshold for the head job's labels (lib/db/tb_regress).
 */
#include <errno.h>
#include <math.h>
#include <stdlib.h>

#include "api_compare.h"
#include "api_handlers.h"
#include "api_report.h"
#include "api_result.h"
#include "render/tb_cmpreport.h"
#include "result/tb_compare.h"
#include "db/tb_regress.h"

bool
tb_api_compare_make(struct tb_api_req *r, const struct tb_api_compare_side *base,
                    const struct tb_api_compare_side *head, double tol, json_t **cmp,
                    enum MHD_Result *ret)
{
  *cmp = NULL;
  if (isnan(tol)) {
    int rc = 0;
    struct tb_db *db = tb_api_db_get(r);
    tol = tb_regress_tolerance(db, r->project_id, head->labels, &rc);
    tb_api_db_put(r, db);
    if (rc < 0) {
      *ret = tb_api_reply_db(r, rc);
      return false;
    }
  }
  char *err = NULL;
  *cmp = tb_compare(base->doc, head->doc, tol, &err);
  if (*cmp == NULL) {
    *ret = tb_api_reply_error(r, TB_EC_INTERNAL, err, NULL);
    free(err);
    return false;
  }
  json_object_set_new(json_object_get(*cmp, "base"), "job_id", json_string(base->job_id));
  json_object_set_new(json_object_get(*cmp, "head"), "job_id", json_string(head->job_id));
  return true;
}

enum MHD_Result
tb_api_compare(struct tb_api_req *r)
{
  enum tb_report_format f;
  enum MHD_Result ret;
  if (!tb_api_report_format(r, TB_REPORT_HTML, &f, &ret))
    return ret;
  const char *base_id = tb_api_arg(r, "base"), *head_id = tb_api_arg(r, "head");
  if (base_id == NULL || head_id == NULL || !tb_api_is_uuid(base_id) || !tb_api_is_uuid(head_id))
    return tb_api_reply_error(r, TB_EC_BAD_REQUEST, "base and head must be job ids (UUIDs)", NULL);
  double tol = NAN;
  const char *t = tb_api_arg(r, "tolerance");
  if (t != NULL && !tb_api_compare_tolerance(t, &tol))
    return tb_api_reply_error(r, TB_EC_BAD_REQUEST, "tolerance is a percentage in [0, 100)", NULL);
  json_t *base = NULL, *head = NULL, *cmp = NULL;
  char *labels = NULL, *err = NULL, *body = NULL;
  int rc = tb_api_result_doc(r, base_id, &base, NULL);
  if (rc > 0)
    rc = tb_api_result_doc(r, head_id, &head, &labels);
  if (rc < 0) {
    ret = tb_api_reply_db(r, rc);
    goto out;
  }
  if (rc == 0) {
    ret = tb_api_reply_error(r, TB_EC_NOT_FOUND,
                             base == NULL ? "no such job: base" : "no such job: head", NULL);
    goto out;
  }
  const struct tb_api_compare_side bs = { .job_id = base_id, .doc = base },
                                   hs = { .job_id = head_id, .doc = head, .labels = labels };
  if (!tb_api_compare_make(r, &bs, &hs, tol, &cmp, &ret))
    goto out;
  size_t len = 0;
  body = tb_cmpreport_render(cmp, f, &len, &err);
  ret = tb_api_report_reply(r, f, body, len, err);
out:
  free(body);
  free(err);
  free(labels);
  json_decref(cmp);
  json_decref(base);
  json_decref(head);
  return ret;
}

bool
tb_api_compare_tolerance(const char *t, double *tol)
{
  char *end = NULL;
  errno = 0;
  double pct = strtod(t, &end);
  if (errno != 0 || end == t || *end != '\0' || !(pct >= 0 && pct < 100))
    return false;
  *tol = pct / 100.0;
  return true;
}
