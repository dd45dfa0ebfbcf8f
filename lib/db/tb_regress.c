/*
 * tb_regress: judges a finished job against its history and records the
 * outcome in its result.  See tb_regress.h.  The SQL lives in tb_history;
 * the statistics in tb_verdict; this file joins them: it reads the job,
 * records its points, reads the earlier points and the last good job,
 * judges (tb_regress_judge, pure) and writes.  No transaction of its own:
 * the worker wraps it in its own; each write is one statement, and a
 * concurrent recheck would compute the same thing.
 */
#include "db/tb_regress.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "result/tb_compare.h"
#include "db/tb_history.h"
#include "result/tb_verdict.h"

double
tb_regress_tolerance(struct tb_db *db, const char *project_id, const char *labels, int *rc)
{
  PGresult *res = NULL;
  double tol = TB_REGRESS_DEFAULT_TOLERANCE;
  int n = tb_history_threshold(db, project_id, labels, &res);
  *rc = n < 0 ? n : 0;
  const char *t = n > 0 ? tb_db_str(res, 0, "tolerance") : NULL;
  if (t != NULL) {
    double d = strtod(t, NULL);
    if (d >= 0 && d < 1)
      tol = d;
  }
  PQclear(res);
  return tol;
}

/* ---- the points of a result -------------------------------------------- */

static double
num(const json_t *v)
{
  double d = json_is_number(v) ? json_number_value(v) : NAN;
  return isfinite(d) ? d : NAN;
}

static json_t *
jnum(double d)
{
  return isfinite(d) ? json_real(d) : json_null();
}

/* A cell's uncertainty of a metric (the engine's fields, issue 14 item 1;
 * tb_cost's for an efficiency metric): the standard error and the 95%
 * interval, NAN when absent. */
static void
cell_uncertainty(const json_t *cell, const char *metric, bool efficiency, double *se, double *lo,
                 double *hi)
{
  *se = *lo = *hi = NAN;
  const char *ci = NULL;
  if (strcmp(metric, "total_tps") == 0) {
    *se = num(json_object_get(cell, "total_tps_se"));
    ci = "total_tps_ci95";
  } else if (strcmp(metric, "ttft_p50_ms") == 0) {
    ci = "ttft_p50_ci95";
  } else if (strcmp(metric, "tbt_p50_ms") == 0) {
    ci = "tbt_p50_ci95";
  } else if (strcmp(metric, "prompt_tps") == 0) {
    *se = num(json_object_get(cell, "prompt_tps_se"));
  }
  char eff_ci[64];
  const json_t *where = cell;
  if (efficiency) {
    /* tb_cost's figures: "<name>_ci95" beside them in "efficiency" */
    snprintf(eff_ci, sizeof eff_ci, "%.40s_ci95", metric);
    ci = eff_ci;
    where = json_object_get(cell, "efficiency");
  }
  const json_t *a = ci ? json_object_get(where, ci) : NULL;
  if (json_is_array(a) && json_array_size(a) == 2) {
    *lo = num(json_array_get(a, 0));
    *hi = num(json_array_get(a, 1));
    if (!isfinite(*se) && isfinite(*lo) && isfinite(*hi) && *hi >= *lo)
      *se = (*hi - *lo) / (2 * 1.959963984540054);
  }
}

static bool
cell_is_valid(const json_t *c)
{
  const char *s = json_string_value(json_object_get(c, "status"));
  return s != NULL && strcmp(s, "valid") == 0;
}

/* The key of a cell; false when it has none. */
static bool
cell_key(const json_t *c, int *phase, int64_t *ctx, int64_t *conc)
{
  const char *ph = json_string_value(json_object_get(c, "phase"));
  const json_t *x = json_object_get(c, "context"), *y = json_object_get(c, "concurrency");
  if (ph == NULL || !json_is_integer(x))
    return false;
  *phase = strcmp(ph, "decode") == 0 ? 1 : strcmp(ph, "prefill") == 0 ? 0 : -1;
  *ctx = json_integer_value(x);
  *conc = json_is_integer(y) ? json_integer_value(y) : 1;
  return *phase >= 0 && *ctx > 0 && *conc > 0;
}

json_t *
tb_regress_points(const json_t *head)
{
  size_t nm;
  const struct tb_compare_metric *m = tb_compare_verdict_metrics(&nm);
  json_t *out = json_array();
  const json_t *cells = json_object_get(head, "cells");
  size_t n = json_array_size(cells);
  for (size_t i = 0; i < n && i < TB_COMPARE_MAX_CELLS; i++) {
    const json_t *c = json_array_get(cells, i);
    int ph;
    int64_t ctx, conc;
    if (!cell_is_valid(c) || !cell_key(c, &ph, &ctx, &conc))
      continue;
    for (size_t k = 0; k < nm; k++) {
      if (strcmp(m[k].phase, ph ? "decode" : "prefill") != 0)
        continue;
      double v = tb_compare_cell_value(c, m[k].name), se, lo, hi;
      if (!(v > 0))
        continue;
      cell_uncertainty(c, m[k].name, m[k].efficiency, &se, &lo, &hi);
      json_array_append_new(out, json_pack("{s:s, s:I, s:I, s:s, s:f, s:o, s:o, s:o}", "phase",
                                           m[k].phase, "context", (json_int_t)ctx, "concurrency",
                                           (json_int_t)conc, "metric", m[k].name, "value", v, "se",
                                           jnum(se), "ci_lo", jnum(lo), "ci_hi", jnum(hi)));
    }
  }
  return out;
}

/* A point of tb_regress_points as a tb_regress_point of job; false when
 * its metric is not one of tb_compare_verdict_metrics(). */
static bool
point_of(const json_t *o, long job, struct tb_regress_point *out)
{
  size_t nm;
  const struct tb_compare_metric *m = tb_compare_verdict_metrics(&nm);
  const char *metric = json_string_value(json_object_get(o, "metric"));
  const char *ph = json_string_value(json_object_get(o, "phase"));
  size_t mi = nm;
  for (size_t t = 0; t < nm && metric != NULL; t++)
    if (strcmp(m[t].name, metric) == 0)
      mi = t;
  if (mi == nm || ph == NULL)
    return false;
  *out = (struct tb_regress_point){
    .job = job,
    .phase = strcmp(ph, "decode") == 0,
    .context = json_integer_value(json_object_get(o, "context")),
    .concurrency = json_integer_value(json_object_get(o, "concurrency")),
    .metric = mi,
    .value = num(json_object_get(o, "value")),
    .se = num(json_object_get(o, "se")),
  };
  return true;
}

/* ---- the verdicts ------------------------------------------------------- */

static int
point_cmp(const void *a, const void *b)
{
  const struct tb_regress_point *x = a, *y = b;
  if (x->phase != y->phase)
    return x->phase < y->phase ? -1 : 1;
  if (x->context != y->context)
    return x->context < y->context ? -1 : 1;
  if (x->concurrency != y->concurrency)
    return x->concurrency < y->concurrency ? -1 : 1;
  if (x->metric != y->metric)
    return x->metric < y->metric ? -1 : 1;
  return x->job < y->job ? -1 : x->job > y->job;
}

/* The first of the sorted points with the key of k (job ignored), or n. */
static size_t
first_of(const struct tb_regress_point *p, size_t n, const struct tb_regress_point *k)
{
  size_t lo = 0, hi = n;
  struct tb_regress_point key = *k;
  key.job = -1;
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    if (point_cmp(&p[mid], &key) < 0)
      lo = mid + 1;
    else
      hi = mid;
  }
  return lo;
}

/* The last TB_REGRESS_HISTORY_SHOWN values of a series (the judged job
 * last), for the charts of the reports. */
static json_t *
history_of(const double *y, size_t n)
{
  json_t *a = json_array();
  for (size_t i = n > TB_REGRESS_HISTORY_SHOWN ? n - TB_REGRESS_HISTORY_SHOWN : 0; i < n; i++)
    json_array_append_new(a, jnum(y[i]));
  return a;
}

static json_t *
ci_pct(const struct tb_verdict *v)
{
  if (!isfinite(v->ci_lo) || !isfinite(v->ci_hi))
    return json_null();
  return json_pack("[f, f]", v->ci_lo * 100, v->ci_hi * 100);
}

static json_t *
verdict_json(const struct tb_verdict *v)
{
  return json_pack("{s:s, s:o, s:o, s:o, s:I, s:I, s:b}", "outcome",
                   tb_verdict_outcome_name(v->outcome), "change_pct", jnum(v->effect * 100),
                   "ci95_pct", ci_pct(v), "p", jnum(v->p), "earlier_runs", (json_int_t)v->n_base,
                   "new_runs", (json_int_t)v->n_new, "step", v->step);
}

/* The cell members every entry starts with. */
static json_t *
cell_head(int phase, int64_t ctx, int64_t conc, const char *metric)
{
  char label[32];
  tb_format_tokens(ctx, label, sizeof label);
  return json_pack("{s:s, s:I, s:s, s:I, s:s}", "phase", phase ? "decode" : "prefill", "context",
                   (json_int_t)ctx, "context_label", label, "concurrency", (json_int_t)conc,
                   "metric", metric);
}

/* Does the two-run regression g concern this cell and metric? */
static bool
same_cell(const json_t *g, int phase, int64_t ctx, int64_t conc, const char *metric)
{
  const char *ph = json_string_value(json_object_get(g, "phase"));
  const char *m = json_string_value(json_object_get(g, "metric"));
  return ph != NULL && m != NULL && strcmp(ph, phase ? "decode" : "prefill") == 0 &&
         json_integer_value(json_object_get(g, "context")) == ctx &&
         json_integer_value(json_object_get(g, "concurrency")) == conc && strcmp(m, metric) == 0;
}

struct judged {
  int phase;
  int64_t ctx, conc;
  size_t metric;
  struct tb_verdict_point *pts; /* the series, head last */
  size_t n;
};

/* The series of every valid head cell and metric: the newest
 * TB_VERDICT_MAX_POINTS - 1 earlier points of its cell and metric, then
 * the head's (as the job after the newest earlier one).  earlier is
 * sorted; *nj series. */
static struct judged *
gather(const json_t *head, struct tb_regress_point *earlier, size_t n, size_t *nj)
{
  qsort(earlier, n, sizeof *earlier, point_cmp);
  long head_job = 0;
  for (size_t i = 0; i < n; i++)
    if (earlier[i].job >= head_job)
      head_job = earlier[i].job + 1;
  json_t *hp = tb_regress_points(head);
  size_t nh = json_array_size(hp);
  struct judged *j = tb_xcalloc(nh + 1, sizeof *j);
  *nj = 0;
  for (size_t i = 0; i < nh; i++) {
    struct tb_regress_point key;
    if (!point_of(json_array_get(hp, i), head_job, &key))
      continue;
    size_t f = first_of(earlier, n, &key), e = f;
    while (e < n && earlier[e].phase == key.phase && earlier[e].context == key.context &&
           earlier[e].concurrency == key.concurrency && earlier[e].metric == key.metric)
      e++;
    if (e - f > TB_VERDICT_MAX_POINTS - 1)
      f = e - (TB_VERDICT_MAX_POINTS - 1);
    struct judged *q = &j[(*nj)++];
    q->phase = key.phase;
    q->ctx = key.context;
    q->conc = key.concurrency;
    q->metric = key.metric;
    q->n = e - f + 1;
    q->pts = tb_xcalloc(q->n, sizeof *q->pts);
    for (size_t t = f; t < e; t++)
      q->pts[t - f] = (struct tb_verdict_point){ .job = earlier[t].job,
                                                 .value = earlier[t].value,
                                                 .se = earlier[t].se };
    q->pts[q->n - 1] =
      (struct tb_verdict_point){ .job = head_job, .value = key.value, .se = key.se };
  }
  json_decref(hp);
  return j;
}

/* What the judging of one job gathers. */
struct judging {
  const struct tb_compare_metric *m;
  size_t nm;
  const struct judged *j;
  size_t nj;
  double min_effect;
  const json_t *two; /* the two-run comparison's regressions, or NULL */
  json_t *regs, *verdicts, *matrix;
  size_t most;
  bool any_history, regressed;
};

/* A cell with too little history: the two-run comparison's "worse" entries
 * of it speak for it, flagged as a fallback. */
static void
fall_back(struct judging *s, const struct judged *q, const char *metric)
{
  for (size_t g = 0; g < json_array_size(s->two); g++) {
    const json_t *r = json_array_get(s->two, g);
    const char *kind = json_string_value(json_object_get(r, "kind"));
    if (kind != NULL && strcmp(kind, "worse") == 0 &&
        same_cell(r, q->phase, q->ctx, q->conc, metric)) {
      json_t *copy = json_deep_copy(r);
      json_object_set_new(copy, "fallback", json_true());
      json_array_append_new(s->regs, copy);
      s->regressed = true;
    }
  }
}

/* The regression entry of a cell its history judged worse. */
static json_t *
worse_entry(const struct judged *q, const char *metric, const struct tb_verdict *v)
{
  json_t *g = cell_head(q->phase, q->ctx, q->conc, metric);
  json_object_set_new(g, "base", jnum(v->mean_base));
  json_object_set_new(g, "head", jnum(q->pts[q->n - 1].value));
  json_object_set_new(g, "ratio", jnum(1 + v->effect));
  json_object_set_new(g, "kind", json_string("worse"));
  json_object_update_missing_new(g, verdict_json(v));
  json_object_del(g, "outcome");
  double *y = tb_xcalloc(q->n, sizeof *y);
  for (size_t t = 0; t < q->n; t++)
    y[t] = q->pts[t].value;
  json_object_set_new(g, "history", history_of(y, q->n));
  free(y);
  return g;
}

/* One cell and metric against its history, at cell_alpha. */
static void
judge_cell(struct judging *s, const struct judged *q, double cell_alpha)
{
  const struct tb_compare_metric *mm = &s->m[q->metric];
  struct tb_verdict v;
  tb_verdict_judge(q->pts, q->n, s->min_effect, mm->higher_better, cell_alpha, &v);
  json_t *e = cell_head(q->phase, q->ctx, q->conc, mm->name);
  json_object_update_missing_new(e, verdict_json(&v));
  json_array_append_new(s->verdicts, e);
  if (v.outcome == TB_VERDICT_TOO_LITTLE) {
    fall_back(s, q, mm->name);
    return;
  }
  s->any_history = true;
  if (v.n_base > s->most)
    s->most = v.n_base;
  if (v.outcome == TB_VERDICT_WORSE && !mm->advisory) {
    json_array_append_new(s->regs, worse_entry(q, mm->name, &v));
    s->regressed = true;
  }
}

/* Lost cells: valid before, an error or over capacity now. */
static void
add_lost(struct judging *s)
{
  for (size_t g = 0; g < json_array_size(s->two); g++) {
    const json_t *r = json_array_get(s->two, g);
    const char *kind = json_string_value(json_object_get(r, "kind"));
    if (kind != NULL && strcmp(kind, "lost") == 0) {
      json_array_append(s->regs, (json_t *)r);
      s->regressed = true;
    }
  }
}

/* The matrix's verdict of metric k over all its cells, at matrix_alpha. */
static void
judge_matrix(struct judging *s, size_t k, double matrix_alpha)
{
  const struct tb_verdict_point **sc = tb_xcalloc(s->nj + 1, sizeof *sc);
  size_t *sn = tb_xcalloc(s->nj + 1, sizeof *sn), ns = 0;
  for (size_t t = 0; t < s->nj; t++)
    if (s->j[t].metric == k) {
      sc[ns] = s->j[t].pts;
      sn[ns++] = s->j[t].n;
    }
  if (ns > 0) {
    struct tb_verdict v;
    size_t nout = 0;
    double *y = tb_xcalloc(TB_VERDICT_MAX_POINTS + 1, sizeof *y);
    tb_verdict_matrix(sc, sn, ns, s->min_effect, s->m[k].higher_better, matrix_alpha, &v, y, NULL,
                      TB_VERDICT_MAX_POINTS, &nout);
    json_t *e = verdict_json(&v);
    json_object_set_new(e, "cells", json_integer((json_int_t)ns));
    json_object_set_new(e, "history",
                        history_of(y, nout < TB_VERDICT_MAX_POINTS ? nout : TB_VERDICT_MAX_POINTS));
    free(y);
    json_object_set_new(s->matrix, s->m[k].name, e);
    if (v.outcome == TB_VERDICT_WORSE && !s->m[k].advisory)
      s->regressed = true;
  }
  free(sn);
  free(sc);
}

json_t *
tb_regress_judge(const json_t *head, struct tb_regress_point *earlier, size_t n, const json_t *cmp,
                 double tolerance, double min_effect)
{
  struct judging s = { .min_effect = min_effect,
                       .two = cmp ? json_object_get(cmp, "regressions") : NULL,
                       .regs = json_array(),
                       .verdicts = json_array(),
                       .matrix = json_object() };
  s.m = tb_compare_verdict_metrics(&s.nm);
  struct judged *j = gather(head, earlier, n, &s.nj);
  s.j = j;
  /* Bonferroni: the job's alpha over its verdicts, the matrix's over metrics */
  size_t metrics_used = 0;
  for (size_t k = 0; k < s.nm; k++)
    for (size_t t = 0; t < s.nj; t++)
      if (j[t].metric == k) {
        metrics_used++;
        break;
      }
  double cell_alpha = tb_verdict_cell_alpha(s.nj);
  for (size_t t = 0; t < s.nj; t++)
    judge_cell(&s, &j[t], cell_alpha);
  add_lost(&s);
  for (size_t k = 0; k < s.nm; k++)
    judge_matrix(&s, k, tb_verdict_cell_alpha(metrics_used));

  json_t *out = json_object();
  json_object_set_new(out, "method", json_string(s.any_history ? "history" : "two_run"));
  json_object_set_new(out, "tolerance", json_real(tolerance));
  json_object_set_new(out, "min_effect", json_real(min_effect));
  json_object_set_new(out, "alpha", json_real(TB_VERDICT_ALPHA));
  json_object_set_new(out, "history_runs", json_integer((json_int_t)s.most));
  json_object_set_new(out, "regressed", json_boolean(s.regressed));
  json_object_set_new(out, "cells", s.regs);
  json_object_set_new(out, "verdicts", s.verdicts);
  json_object_set_new(out, "matrix", s.matrix);
  if (cmp != NULL)
    json_object_set(out, "summary", json_object_get(cmp, "summary"));
  for (size_t t = 0; t < s.nj; t++)
    free(j[t].pts);
  free(j);
  return out;
}

json_t *
tb_regress_judge_docs(const json_t *const *earlier, size_t n, const json_t *head, const json_t *cmp,
                      double tolerance, double min_effect)
{
  size_t cap = 0, k = 0;
  struct tb_regress_point *p = NULL;
  for (size_t d = 0; d < n; d++) {
    json_t *pts = tb_regress_points(earlier[d]);
    size_t np = json_array_size(pts);
    if (k + np + 1 > cap) {
      cap = 2 * (k + np + 1);
      p = tb_xrealloc(p, cap * sizeof *p);
    }
    for (size_t i = 0; i < np; i++)
      if (point_of(json_array_get(pts, i), (long)d, &p[k]))
        k++;
    json_decref(pts);
  }
  json_t *out = tb_regress_judge(head, p, k, cmp, tolerance, min_effect);
  free(p);
  return out;
}

/* ---- the check ---------------------------------------------------------- */

/* The earlier points of the job's series, as tb_regress_point (new array,
 * *n of them), or a negative tb_db code. */
static int
read_earlier(struct tb_db *db, const char *job_id, struct tb_regress_point **out, size_t *n)
{
  PGresult *res = NULL;
  *out = NULL;
  *n = 0;
  int rows = tb_history_earlier(db, job_id, &res);
  if (rows < 0)
    return rows;
  size_t nm;
  const struct tb_compare_metric *m = tb_compare_verdict_metrics(&nm);
  struct tb_regress_point *p = tb_xcalloc((size_t)rows + 1, sizeof *p);
  size_t k = 0;
  long job = -1;
  const char *last = NULL;
  for (int r = 0; r < rows; r++) {
    const char *id = tb_db_str(res, r, "job_id"), *ph = tb_db_str(res, r, "phase");
    const char *metric = tb_db_str(res, r, "metric"), *v = tb_db_str(res, r, "value");
    const char *se = tb_db_str(res, r, "se");
    if (id == NULL || ph == NULL || metric == NULL || v == NULL)
      continue;
    if (last == NULL || strcmp(last, id) != 0)
      job++;
    last = id;
    size_t mi = nm;
    for (size_t i = 0; i < nm; i++)
      if (strcmp(m[i].name, metric) == 0)
        mi = i;
    if (mi == nm)
      continue;
    p[k] = (struct tb_regress_point){
      .job = job,
      .phase = strcmp(ph, "decode") == 0,
      .context = tb_db_i64(res, r, "context"),
      .concurrency = tb_db_i64(res, r, "concurrency"),
      .metric = mi,
      .value = strtod(v, NULL),
      .se = se ? strtod(se, NULL) : NAN,
    };
    k++;
  }
  PQclear(res);
  *out = p;
  *n = k;
  return 0;
}

/* The project's threshold for these labels: the two-run tolerance and the
 * verdict's minimum effect (the defaults where none is set); < 0 when the
 * database failed. */
static int
read_tolerance(struct tb_db *db, const char *project, const char *labels, double *tol,
               double *min_effect)
{
  PGresult *thr = NULL;
  int n = tb_history_threshold(db, project, labels, &thr);
  *tol = TB_REGRESS_DEFAULT_TOLERANCE;
  *min_effect = TB_VERDICT_DEFAULT_MIN_EFFECT;
  const char *t = n > 0 ? tb_db_str(thr, 0, "tolerance") : NULL;
  if (t != NULL) {
    double d = strtod(t, NULL);
    if (d >= 0 && d < 1)
      *tol = *min_effect = d;
  }
  PQclear(thr);
  return n < 0 ? n : 0;
}

/* The verdict's two-run side: the job it was compared with (base, NULL
 * when none was), or why there was none. */
static void
set_base(json_t *out, const PGresult *base, const json_t *base_doc, const char *err)
{
  if (base != NULL) {
    const char *brun = json_string_value(json_object_get(base_doc, "run_id"));
    json_object_set_new(out, "base_job_id", json_string(tb_db_str(base, 0, "id")));
    json_object_set_new(out, "base_run_id", brun ? json_string(brun) : json_null());
  } else {
    json_object_set_new(out, "base_job_id", json_null());
    json_object_set_new(out, "base_run_id", json_null());
    json_object_set_new(out, "note",
                        json_string(err ? err
                                        : "no earlier complete job of this endpoint with "
                                          "the same labels"));
  }
}

int
tb_regress_check(struct tb_db *db, const char *job_id)
{
  PGresult *job = NULL, *base = NULL;
  json_t *head_doc = NULL, *base_doc = NULL, *cmp = NULL, *out = NULL, *points = NULL;
  char *text = NULL, *err = NULL;
  struct tb_regress_point *earlier = NULL;
  size_t nearlier = 0;
  int ret;
  int n = tb_history_job(db, job_id, &job);
  if (n < 0) {
    ret = n;
    goto out;
  }
  ret = TB_REGRESS_SKIP;
  const char *state = n > 0 ? tb_db_str(job, 0, "state") : NULL;
  const char *result = n > 0 ? tb_db_str(job, 0, "result") : NULL;
  if (result == NULL || state == NULL || strcmp(state, "succeeded") != 0)
    goto out;
  const char *project = tb_db_str(job, 0, "project_id");
  const char *endpoint = tb_db_str(job, 0, "endpoint_id");
  const char *labels = tb_db_str(job, 0, "labels");
  const char *finished = tb_db_str(job, 0, "finished_at");
  head_doc = json_loads(result, 0, NULL);
  if (!json_is_object(head_doc) || project == NULL || endpoint == NULL || labels == NULL ||
      finished == NULL)
    goto out;

  double tol, min_effect;
  n = read_tolerance(db, project, labels, &tol, &min_effect);
  if (n < 0) {
    ret = n;
    goto out;
  }

  /* this job's points, then the earlier ones */
  points = tb_regress_points(head_doc);
  text = json_dumps(points, JSON_COMPACT);
  n = tb_history_record(db, job_id, text);
  free(text);
  text = NULL;
  if (n < 0 || (n = read_earlier(db, job_id, &earlier, &nearlier)) < 0) {
    ret = n;
    goto out;
  }

  /* the two-run side: the last good job */
  n = tb_history_last_good(db, endpoint, labels, job_id, finished, &base);
  if (n < 0) {
    ret = n;
    goto out;
  }
  if (n > 0 && tb_db_str(base, 0, "result") != NULL)
    base_doc = json_loads(tb_db_str(base, 0, "result"), 0, NULL);
  if (json_is_object(base_doc))
    cmp = tb_compare(base_doc, head_doc, tol, &err);

  out = tb_regress_judge(head_doc, earlier, nearlier, cmp, tol, min_effect);
  char ts[40];
  tb_time_rfc3339(tb_time_real_us(), ts, sizeof ts);
  json_object_set_new(out, "checked_at", json_string(ts));
  set_base(out, cmp != NULL ? base : NULL, base_doc, err);
  text = json_dumps(out, JSON_COMPACT);
  n = tb_history_write_regressions(db, job_id, text);
  if (n < 0) {
    ret = n;
    goto out;
  }
  ret = json_is_true(json_object_get(out, "regressed")) ? TB_REGRESS_FOUND : TB_REGRESS_NONE;
out:
  free(text);
  free(err);
  free(earlier);
  json_decref(points);
  json_decref(out);
  json_decref(cmp);
  json_decref(base_doc);
  json_decref(head_doc);
  PQclear(base);
  PQclear(job);
  return ret;
}
