/*
 * api_thresholds: /v1/thresholds, the tolerated loss per label set that
 * /v1/compare and the regression check (lib/db/tb_regress) apply.
 *   GET    /v1/thresholds         the project's thresholds
 *   POST   /v1/thresholds         {labels, tolerance_pct}: create or replace
 *   DELETE /v1/thresholds/{id}
 * Labels are checked as import checks them (tb_api_labels_ok).  The
 * statements: service/q_thresholds.c.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api_handlers.h"
#include "api_report.h"
#include "q_thresholds.h"

#define LABELS_MAX 16
#define LABEL_KEY_MAX 64
#define LABEL_VALUE_MAX 200

/* Labels as the api takes them elsewhere: an object of at most LABELS_MAX
 * string values, keys of [A-Za-z0-9._-]. */
bool
tb_api_labels_ok(const json_t *l)
{
  if (!json_is_object(l) || json_object_size(l) > LABELS_MAX)
    return false;
  const char *k;
  const json_t *v;
  json_object_foreach ((json_t *)l, k, v) {
    size_t n = strlen(k);
    if (n == 0 || n > LABEL_KEY_MAX ||
        strspn(k, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-") != n)
      return false;
    if (!json_is_string(v) || json_string_length(v) > LABEL_VALUE_MAX)
      return false;
  }
  return true;
}

enum MHD_Result
tb_api_thresholds_list(struct tb_api_req *r)
{
  return tb_api_reply_list(r, tb_q_thresholds_list, "thresholds");
}

enum MHD_Result
tb_api_thresholds_put(struct tb_api_req *r)
{
  enum MHD_Result ret;
  json_t *body = tb_api_body_json(r, &ret);
  if (body == NULL)
    return ret;
  const json_t *labels = json_object_get(body, "labels");
  const json_t *pct = json_object_get(body, "tolerance_pct");
  const char *bad = NULL;
  if (labels != NULL && !json_is_null(labels) && !tb_api_labels_ok(labels))
    bad = "labels";
  else if (!json_is_number(pct) || !(json_number_value(pct) >= 0 && json_number_value(pct) < 100))
    bad = "tolerance_pct";
  if (bad != NULL) {
    const char *d = strcmp(bad, "labels") == 0
                      ? "an object of at most 16 string values (keys [A-Za-z0-9._-])"
                      : "a number in [0, 100): the tolerated loss in percent";
    ret = tb_api_reply_invalid(r, bad, d);
    json_decref(body);
    return ret;
  }
  char *ltxt =
    json_is_object(labels) ? json_dumps(labels, JSON_COMPACT | JSON_SORT_KEYS) : tb_xstrdup("{}");
  char tol[48];
  snprintf(tol, sizeof tol, "%.17g", json_number_value(pct) / 100.0);
  char *doc = NULL;
  bool inserted = false;
  struct tb_db *db = tb_api_db_get(r);
  int rc = tb_q_thresholds_put(db, r->project_id, ltxt, tol, &doc, &inserted);
  tb_api_db_put(r, db);
  free(ltxt);
  json_decref(body);
  return tb_api_reply_doc(r, rc, doc, inserted ? MHD_HTTP_CREATED : MHD_HTTP_OK, NULL, NULL);
}

enum MHD_Result
tb_api_thresholds_delete(struct tb_api_req *r)
{
  return tb_api_reply_delete(r, tb_q_thresholds_delete, "no such threshold");
}
