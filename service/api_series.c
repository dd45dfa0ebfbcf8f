/*
 * api_series: GET /v1/series, one history series of the project (issue 14):
 * the points the regression check recorded as jobs finished (sql/0010,
 * lib/tb_history) and the change points over them (lib/tb_verdict).
 *
 * Query: endpoint_id (required), labels (a JSON object, exactly the jobs'
 * labels; default {}), phase (decode | prefill; default decode), context
 * (tokens or "8k"; required), concurrency (default 1), metric (one of
 * tb_compare_metrics() of the phase; default total_tps / prompt_tps).
 * Answer: { endpoint_id, labels, phase, context, concurrency, metric,
 * better, points: [ { job_id, at, value, se, ci95 } ], change_points:
 * [ { index, job_id, at, before, after, change_pct } ] }: the newest
 * TB_HISTORY_SERIES_MAX points, oldest first; before/after are the means of
 * the segments either side of the change point.
 */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "api_handlers.h"
#include "api_report.h"
#include "tb_compare.h"
#include "tb_history.h"
#include "tb_verdict.h"

#define SERIES_LABELS_MAX 4096 /* bytes of the labels argument */

static json_t *
num_or_null(const PGresult *res, int row, const char *col)
{
  const char *s = tb_db_str(res, row, col);
  double d = s ? strtod(s, NULL) : NAN;
  return isfinite(d) ? json_real(d) : json_null();
}

static double
seg_mean(const double *y, size_t lo, size_t hi)
{
  double s = 0;
  for (size_t i = lo; i < hi; i++)
    s += y[i];
  return hi > lo ? s / (double)(hi - lo) : NAN;
}

enum MHD_Result
tb_api_series(struct tb_api_req *r)
{
  const char *ep = tb_api_arg(r, "endpoint_id"), *labels = tb_api_arg(r, "labels");
  const char *phase = tb_api_arg(r, "phase"), *ctx = tb_api_arg(r, "context");
  const char *conc = tb_api_arg(r, "concurrency"), *metric = tb_api_arg(r, "metric");
  if (ep == NULL || !tb_api_is_uuid(ep))
    return tb_api_reply_error(r, TB_EC_BAD_REQUEST, "endpoint_id must be an endpoint id (UUID)",
                              NULL);
  if (phase == NULL)
    phase = "decode";
  if (strcmp(phase, "decode") != 0 && strcmp(phase, "prefill") != 0)
    return tb_api_reply_error(r, TB_EC_BAD_REQUEST, "phase is decode or prefill", NULL);
  int64_t context = 0, concurrency = 1;
  if (ctx == NULL || !tb_parse_tokens(ctx, &context) || context <= 0)
    return tb_api_reply_error(r, TB_EC_BAD_REQUEST,
                              "context is a token count (e.g. 8192 or 8k)", NULL);
  if (conc != NULL && !tb_parse_i64(conc, 1, 1 << 20, &concurrency))
    return tb_api_reply_error(r, TB_EC_BAD_REQUEST, "concurrency is a positive integer", NULL);
  size_t nm;
  const struct tb_compare_metric *m = tb_compare_metrics(&nm), *mm = NULL;
  for (size_t i = 0; i < nm; i++)
    if (strcmp(m[i].phase, phase) == 0 &&
        (metric == NULL ? (m[i].higher_better) : strcmp(m[i].name, metric) == 0)) {
      mm = &m[i];
      break;
    }
  if (mm == NULL)
    return tb_api_reply_error(r, TB_EC_BAD_REQUEST,
                              "metric is one of the phase's: prompt_tps, ttft_ms (prefill); "
                              "total_tps, ttft_p50_ms, tbt_p50_ms (decode)",
                              NULL);
  json_t *lj = NULL;
  if (labels != NULL) {
    if (strlen(labels) <= SERIES_LABELS_MAX)
      lj = json_loads(labels, 0, NULL);
    if (!tb_api_labels_ok(lj)) {
      json_decref(lj);
      return tb_api_reply_error(r, TB_EC_BAD_REQUEST,
                                "labels is a JSON object of string values", NULL);
    }
  } else {
    lj = json_object();
  }
  char *ltxt = json_dumps(lj, JSON_COMPACT | JSON_SORT_KEYS);
  char cs[32], ks[32];
  snprintf(cs, sizeof cs, "%lld", (long long)context);
  snprintf(ks, sizeof ks, "%lld", (long long)concurrency);
  PGresult *res = NULL;
  struct tb_db *db = tb_api_db_get(r);
  int n = tb_history_series(db, r->project_id, ep, ltxt, phase, cs, ks, mm->name, &res);
  tb_api_db_put(r, db);
  free(ltxt);
  if (n < 0) {
    json_decref(lj);
    return tb_api_reply_db(r, n);
  }
  double *y = tb_xcalloc((size_t)n + 1, sizeof *y);
  size_t *cp = tb_xcalloc((size_t)n + 1, sizeof *cp);
  json_t *points = json_array();
  for (int i = 0; i < n; i++) {
    const char *v = tb_db_str(res, i, "value");
    y[i] = v ? strtod(v, NULL) : 0;
    json_t *ci = json_null();
    if (!tb_db_isnull(res, i, "ci_lo") && !tb_db_isnull(res, i, "ci_hi")) {
      ci = json_array();
      json_array_append_new(ci, num_or_null(res, i, "ci_lo"));
      json_array_append_new(ci, num_or_null(res, i, "ci_hi"));
    }
    json_array_append_new(points,
                          json_pack("{s:s, s:s, s:o, s:o, s:o}", "job_id",
                                    tb_db_str(res, i, "job_id"), "at", tb_db_str(res, i, "at"),
                                    "value", num_or_null(res, i, "value"), "se",
                                    num_or_null(res, i, "se"), "ci95", ci));
  }
  size_t ncp = tb_verdict_change_points(y, (size_t)n, TB_VERDICT_CP_ALPHA, cp, (size_t)n);
  if (ncp > (size_t)n)
    ncp = (size_t)n;
  json_t *cps = json_array();
  for (size_t k = 0; k < ncp; k++) {
    size_t lo = k > 0 ? cp[k - 1] : 0, hi = k + 1 < ncp ? cp[k + 1] : (size_t)n;
    double before = seg_mean(y, lo, cp[k]), after = seg_mean(y, cp[k], hi);
    json_array_append_new(cps, json_pack("{s:I, s:s, s:s, s:f, s:f, s:f}", "index",
                                         (json_int_t)cp[k], "job_id",
                                         tb_db_str(res, (int)cp[k], "job_id"), "at",
                                         tb_db_str(res, (int)cp[k], "at"), "before", before,
                                         "after", after, "change_pct",
                                         (after / before - 1.0) * 100.0));
  }
  PQclear(res);
  free(cp);
  free(y);
  json_t *doc = json_pack("{s:s, s:o, s:s, s:I, s:I, s:s, s:s, s:o, s:o}", "endpoint_id", ep,
                          "labels", lj, "phase", phase, "context", (json_int_t)context,
                          "concurrency", (json_int_t)concurrency, "metric", mm->name,
                          "better", mm->higher_better ? "higher" : "lower", "points", points,
                          "change_points", cps);
  return tb_api_reply_json(r, MHD_HTTP_OK, doc, NULL);
}
