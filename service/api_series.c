/*
 * api_series: GET /v1/series, one history series of the project (issue 14):
 * the points the regression check recorded as jobs finished (sql/0010,
 * lib/db/tb_history) and the change points over them (lib/result/tb_verdict).
 *
 * Query: endpoint_id (required), labels (a JSON object, exactly the jobs'
 * labels; default {}), phase (decode | prefill; default decode), context
 * (tokens or "8k"), concurrency (default 1), metric (one of
 * tb_compare_verdict_metrics() of the phase; default total_tps / prompt_tps).
 * Answer: { endpoint_id, labels, phase, context, concurrency, metric,
 * better, scope, points: [ { job_id, at, value, se, ci95 } ], change_points:
 * [ { index, job_id, at, before, after, change_pct } ] }: the newest
 * TB_HISTORY_SERIES_MAX points, oldest first; before/after are the means of
 * the segments either side of the change point.
 * Without context, the series is the matrix's (scope "matrix"; context and
 * concurrency null): per job, the geometric mean over its cells of the
 * cell's figure over the cell's median (lib/result/tb_verdict's matrix series;
 * a cell counts once it has TB_VERDICT_MIN_HISTORY points), se and ci95
 * null.
 * An endpoint id that is not the project's is 404 not-found, as on every
 * other route (it was 200 with no points).
 */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "api_handlers.h"
#include "api_series.h"
#include "api_report.h"
#include "q_endpoints.h"
#include "result/tb_compare.h"
#include "db/tb_history.h"
#include "result/tb_verdict.h"

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

/* Change points of y[0..n) as the answer's array; job ids and times from
 * ids[] and at[] (borrowed). */
static json_t *
change_points(const double *y, size_t n, const char *const *ids, const char *const *at)
{
  size_t *cp = tb_xcalloc(n + 1, sizeof *cp);
  size_t ncp = tb_verdict_change_points(y, n, TB_VERDICT_CP_ALPHA, cp, n);
  if (ncp > n)
    ncp = n;
  json_t *cps = json_array();
  for (size_t k = 0; k < ncp; k++) {
    size_t lo = k > 0 ? cp[k - 1] : 0, hi = k + 1 < ncp ? cp[k + 1] : n;
    double before = seg_mean(y, lo, cp[k]), after = seg_mean(y, cp[k], hi);
    json_array_append_new(cps,
                          json_pack("{s:I, s:s, s:s, s:f, s:f, s:f}", "index", (json_int_t)cp[k],
                                    "job_id", ids[cp[k]], "at", at[cp[k]], "before", before,
                                    "after", after, "change_pct", (after / before - 1.0) * 100.0));
  }
  free(cp);
  return cps;
}

/* One cell's series: points and change points into doc.  Returns 0 or a
 * tb_db error. */
static int
cell_series(struct tb_api_req *r, const char *ep, const char *ltxt, const char *phase,
            int64_t context, int64_t concurrency, const char *metric, json_t *doc)
{
  char cs[32], ks[32];
  snprintf(cs, sizeof cs, "%lld", (long long)context);
  snprintf(ks, sizeof ks, "%lld", (long long)concurrency);
  PGresult *res = NULL;
  struct tb_db *db = tb_api_db_get(r);
  int n = tb_history_series(db, r->project_id, ep, ltxt, phase, cs, ks, metric, &res);
  tb_api_db_put(r, db);
  if (n < 0)
    return n;
  double *y = tb_xcalloc((size_t)n + 1, sizeof *y);
  const char **ids = tb_xcalloc((size_t)n + 1, sizeof *ids),
             **at = tb_xcalloc((size_t)n + 1, sizeof *at);
  json_t *points = json_array();
  for (int i = 0; i < n; i++) {
    const char *v = tb_db_str(res, i, "value");
    y[i] = v ? strtod(v, NULL) : 0;
    ids[i] = tb_db_str(res, i, "job_id");
    at[i] = tb_db_str(res, i, "at");
    json_t *ci = json_null();
    if (!tb_db_isnull(res, i, "ci_lo") && !tb_db_isnull(res, i, "ci_hi")) {
      ci = json_array();
      json_array_append_new(ci, num_or_null(res, i, "ci_lo"));
      json_array_append_new(ci, num_or_null(res, i, "ci_hi"));
    }
    json_array_append_new(points, json_pack("{s:s, s:s, s:o, s:o, s:o}", "job_id", ids[i], "at",
                                            at[i], "value", num_or_null(res, i, "value"), "se",
                                            num_or_null(res, i, "se"), "ci95", ci));
  }
  json_object_set_new(doc, "points", points);
  json_object_set_new(doc, "change_points", change_points(y, (size_t)n, ids, at));
  free(at);
  free(ids);
  free(y);
  PQclear(res);
  return 0;
}

struct mcell {
  int64_t ctx, conc;
  struct tb_verdict_point *p;
  size_t n;
};

/* The matrix's series (see the top of the file) into doc. */
static int
matrix_series(struct tb_api_req *r, const char *ep, const char *ltxt, const char *phase,
              const struct tb_compare_metric *mm, json_t *doc)
{
  PGresult *res = NULL;
  struct tb_db *db = tb_api_db_get(r);
  int n = tb_history_matrix(db, r->project_id, ep, ltxt, phase, mm->name, &res);
  tb_api_db_put(r, db);
  if (n < 0)
    return n;
  size_t rows = (size_t)n, ncell = 0, njob = 0;
  struct mcell *cells = tb_xcalloc(rows + 1, sizeof *cells);
  const char **ids = tb_xcalloc(rows + 1, sizeof *ids), **at = tb_xcalloc(rows + 1, sizeof *at);
  for (size_t i = 0; i < rows; i++) {
    const char *id = tb_db_str(res, (int)i, "job_id");
    if (id == NULL)
      continue;
    if (njob == 0 || strcmp(ids[njob - 1], id) != 0) {
      ids[njob] = id;
      at[njob++] = tb_db_str(res, (int)i, "at");
    }
    int64_t ctx = tb_db_i64(res, (int)i, "context"), conc = tb_db_i64(res, (int)i, "concurrency");
    size_t c = 0;
    while (c < ncell && !(cells[c].ctx == ctx && cells[c].conc == conc))
      c++;
    if (c == ncell) {
      cells[ncell].ctx = ctx;
      cells[ncell].conc = conc;
      cells[ncell++].p = tb_xcalloc(TB_HISTORY_MATRIX_JOBS + 1, sizeof *cells[c].p);
    }
    const char *v = tb_db_str(res, (int)i, "value");
    if (cells[c].n < TB_HISTORY_MATRIX_JOBS + 1)
      cells[c].p[cells[c].n++] = (struct tb_verdict_point){ .job = (long)(njob - 1),
                                                            .value = v ? strtod(v, NULL) : NAN,
                                                            .se = NAN };
  }
  const struct tb_verdict_point **cp = tb_xcalloc(ncell + 1, sizeof *cp);
  size_t *cn = tb_xcalloc(ncell + 1, sizeof *cn);
  for (size_t c = 0; c < ncell; c++) {
    cp[c] = cells[c].p;
    cn[c] = cells[c].n;
  }
  double *y = tb_xcalloc(njob + 1, sizeof *y);
  long *jobs = tb_xcalloc(njob + 1, sizeof *jobs);
  size_t ns = 0;
  struct tb_verdict v;
  tb_verdict_matrix(cp, cn, ncell, TB_VERDICT_DEFAULT_MIN_EFFECT, mm->higher_better,
                    TB_VERDICT_ALPHA, &v, y, jobs, njob, &ns);
  if (ns > njob)
    ns = njob;
  const char **sid = tb_xcalloc(ns + 1, sizeof *sid), **sat = tb_xcalloc(ns + 1, sizeof *sat);
  json_t *points = json_array();
  for (size_t i = 0; i < ns; i++) {
    sid[i] = ids[jobs[i]];
    sat[i] = at[jobs[i]];
    json_array_append_new(points, json_pack("{s:s, s:s, s:f, s:n, s:n}", "job_id", sid[i], "at",
                                            sat[i], "value", y[i], "se", "ci95"));
  }
  json_object_set_new(doc, "points", points);
  json_object_set_new(doc, "change_points", change_points(y, ns, sid, sat));
  free(sat);
  free(sid);
  free(jobs);
  free(y);
  free(cn);
  free(cp);
  for (size_t c = 0; c < ncell; c++)
    free(cells[c].p);
  free(cells);
  free(at);
  free(ids);
  PQclear(res);
  return 0;
}

const struct tb_compare_metric *
tb_api_series_metric(const char *phase, const char *metric)
{
  size_t nm;
  const struct tb_compare_metric *m = tb_compare_verdict_metrics(&nm);
  for (size_t i = 0; i < nm; i++)
    if (strcmp(m[i].phase, phase) == 0 &&
        (metric == NULL ? (m[i].higher_better) : strcmp(m[i].name, metric) == 0))
      return &m[i];
  return NULL;
}

int
tb_api_series_doc(struct tb_api_req *r, const struct tb_api_series_query *q, json_t **out)
{
  *out = NULL;
  struct tb_db *db = tb_api_db_get(r);
  int own = tb_q_endpoints_owned(db, q->endpoint_id, r->project_id);
  tb_api_db_put(r, db);
  if (own <= 0)
    return own;
  char *ltxt = json_dumps(q->labels, JSON_COMPACT | JSON_SORT_KEYS);
  json_t *doc =
    json_pack("{s:s, s:O, s:s, s:s, s:s, s:s}", "endpoint_id", q->endpoint_id, "labels", q->labels,
              "phase", q->phase, "metric", q->metric->name, "better",
              q->metric->higher_better ? "higher" : "lower", "scope", q->cell ? "cell" : "matrix");
  json_object_set_new(doc, "context", q->cell ? json_integer(q->context) : json_null());
  json_object_set_new(doc, "concurrency", q->cell ? json_integer(q->concurrency) : json_null());
  int rc = q->cell ? cell_series(r, q->endpoint_id, ltxt, q->phase, q->context, q->concurrency,
                                 q->metric->name, doc)
                   : matrix_series(r, q->endpoint_id, ltxt, q->phase, q->metric, doc);
  free(ltxt);
  if (rc < 0) {
    json_decref(doc);
    return rc;
  }
  *out = doc;
  return 1;
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
  if (ctx != NULL && (!tb_parse_tokens(ctx, &context) || context <= 0))
    return tb_api_reply_error(r, TB_EC_BAD_REQUEST, "context is a token count (e.g. 8192 or 8k)",
                              NULL);
  if (conc != NULL && !tb_parse_i64(conc, 1, 1 << 20, &concurrency))
    return tb_api_reply_error(r, TB_EC_BAD_REQUEST, "concurrency is a positive integer", NULL);
  const struct tb_compare_metric *mm = tb_api_series_metric(phase, metric);
  if (mm == NULL)
    return tb_api_reply_error(r, TB_EC_BAD_REQUEST, TB_API_SERIES_METRICS, NULL);
  json_t *lj = NULL;
  if (labels != NULL) {
    if (strlen(labels) <= SERIES_LABELS_MAX)
      lj = json_loads(labels, 0, NULL);
    if (!tb_api_labels_ok(lj)) {
      json_decref(lj);
      return tb_api_reply_error(r, TB_EC_BAD_REQUEST, "labels is a JSON object of string values",
                                NULL);
    }
  } else {
    lj = json_object();
  }
  const struct tb_api_series_query q = { .endpoint_id = ep,
                                         .labels = lj,
                                         .phase = phase,
                                         .cell = ctx != NULL,
                                         .context = context,
                                         .concurrency = concurrency,
                                         .metric = mm };
  json_t *doc = NULL;
  int rc = tb_api_series_doc(r, &q, &doc);
  json_decref(lj);
  enum MHD_Result ret;
  if (!tb_api_found(r, rc, "no such endpoint", &ret))
    return ret;
  return tb_api_reply_json(r, MHD_HTTP_OK, doc, NULL);
}
