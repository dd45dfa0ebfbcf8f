/*
 * api_import: POST /v1/results, a result from elsewhere (a `tokbench run
 * --output` file, another service's document, llm-inference-bench's JSON)
 * checked and converted by lib/result/tb_import (which redacts its launch command)
 * and written as a finished job by the one job insert (api_jobs.h), then
 * checked for regressions (lib/db/tb_regress) like a job the workers ran.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "result/tb_cost.h"
#include "api_handlers.h"
#include "api_jobs.h"
#include "api_report.h"
#include "q_result.h"
#include "result/tb_import.h"
#include "base/tb_log.h"
#include "db/tb_regress.h"

enum MHD_Result
tb_api_results_import(struct tb_api_req *r)
{
  enum MHD_Result ret;
  json_t *body = tb_api_body_json(r, &ret);
  if (body == NULL)
    return ret;
  json_t *doc = NULL, *spec = NULL;
  char *err = NULL, *id = NULL, *regressions = NULL;
  /* Either {endpoint_id, labels?, result} or the document itself with
   * ?endpoint_id=. */
  const json_t *in = body, *labels = NULL;
  const char *endpoint = tb_api_arg(r, "endpoint_id");
  if (json_is_object(json_object_get(body, "result"))) {
    in = json_object_get(body, "result");
    labels = json_object_get(body, "labels");
    if (json_is_string(json_object_get(body, "endpoint_id")))
      endpoint = json_string_value(json_object_get(body, "endpoint_id"));
  }
  if (endpoint == NULL || !tb_api_is_uuid(endpoint)) {
    ret = tb_api_reply_error(r, TB_EC_INVALID,
                             "endpoint_id: the endpoint the result belongs to (a UUID)",
                             json_pack("{s:[{s:s, s:s}]}", "errors", "field", "endpoint_id",
                                       "detail", "required, a UUID"));
    goto out;
  }
  if (labels != NULL && !json_is_null(labels) && !tb_api_labels_ok(labels)) {
    ret = tb_api_reply_invalid(r, "labels", "an object of at most 16 string values");
    goto out;
  }
  enum tb_import_source src;
  doc = tb_import(in, &src, &err);
  if (doc == NULL) {
    ret =
      tb_api_reply_error(r, TB_EC_INVALID, err,
                         json_pack("{s:[{s:s, s:s}]}", "errors", "field", "result", "detail", err));
    goto out;
  }
  /* issue 35: a signature it came with no longer holds (the document gets
   * this job's id and state) and is no word of this service: dropped, and
   * an import is not signed here either */
  json_object_del(doc, "signature");
  /* issue 26: an import's price and GPUs come from its labels */
  (void)tb_cost_apply_labels(doc, json_is_object(labels) ? labels : NULL);
  spec = json_pack("{s:b, s:s}", "imported", 1, "source",
                   src == TB_IMPORT_LLM_INFERENCE_BENCH ? "llm-inference-bench" : "tokbench");
  char job_id[TB_API_ID_LEN + 1];
  struct tb_db *db = tb_api_db_get(r);
  int rc = tb_api_job_insert_finished(db, r->project_id, r->request_id, endpoint, spec,
                                      json_is_object(labels) ? labels : NULL, doc, job_id);
  if (rc == 1) {
    id = tb_xstrdup(job_id);
    int cr = tb_regress_check(db, id);
    if (cr < 0)
      tb_log(TB_LOG_WARN, "regression check failed", "job", TB_LS, id, "request_id", TB_LS,
             r->request_id, NULL);
    if (tb_q_result_regressions(db, id, &regressions) < 0)
      regressions = NULL;
  }
  tb_api_db_put(r, db);
  if (rc < 0) {
    ret = tb_api_reply_db(r, rc);
    goto out;
  }
  if (rc == 0) {
    ret = tb_api_reply_error(r, TB_EC_NOT_FOUND, "no such endpoint", NULL);
    goto out;
  }
  json_t *reg = regressions != NULL ? json_loads(regressions, 0, NULL) : NULL;
  json_t *reply = json_pack(
    "{s:s, s:s, s:s, s:O, s:I, s:o}", "job_id", id, "source",
    src == TB_IMPORT_LLM_INFERENCE_BENCH ? "llm-inference-bench" : "tokbench", "state", "succeeded",
    "status", json_object_get(doc, "status") ? json_object_get(doc, "status") : json_null(),
    "cells", (json_int_t)json_array_size(json_object_get(doc, "cells")), "regressions",
    reg ? reg : json_null());
  char *loc = tb_xasprintf("/v1/jobs/%s", id);
  const char *hdr[] = { "Location", loc, NULL };
  ret = tb_api_reply_json(r, MHD_HTTP_CREATED, reply, hdr);
  free(loc);
out:
  free(regressions);
  free(id);
  free(err);
  json_decref(spec);
  json_decref(doc);
  json_decref(body);
  return ret;
}
