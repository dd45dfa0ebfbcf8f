/*
 * api_pareto: GET /v1/pareto, the frontier across a project's jobs (issue
 * 26; lib/result/tb_pareto.h, docs/reports.md "The frontier").
 *
 * Query: endpoint_id (optional; an endpoint of the project), labels (a JSON
 * object: the jobs' labels contain it), since / until (RFC 3339, on the
 * job's creation), y (tps_per_gpu, cost_per_m_output_tokens or
 * j_per_output_token; default tps_per_gpu).  The SLO question, asked when
 * any of its bounds is given: ttft_p50_ms, tbt_p50_ms (at most),
 * min_tps_per_user, context and concurrency (the load: at least), objective
 * (default y; the cheapest, the fewest joules, or the most tok/s per GPU).
 * Answer: {y, better, jobs, points [tb_pareto's points, each with
 * frontier], frontier (how many), best (tb_pareto_best's answer, or null
 * when no SLO was asked)}.  Imported results take part as the engine's do.
 * Every row is the project's: another project's endpoint is 404.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "api_handlers.h"
#include "api_report.h"
#include "q_endpoints.h"
#include "q_pareto.h"
#include "result/tb_pareto.h"

#define PARETO_ARG_MAX 4096 /* bytes of the labels argument */

struct collect {
  json_t *points;
  enum tb_pareto_y y;
  int jobs;
  const char *skip; /* a job left out (NULL: none) */
};

static void
collect_job(void *cls, const char *job_id, const char *endpoint_id, const char *endpoint_name,
            const json_t *labels, json_t *doc)
{
  struct collect *c = cls;
  if (c->skip == NULL || strcmp(c->skip, job_id) != 0) {
    c->jobs++;
    tb_pareto_add_job(c->points, job_id, endpoint_id, endpoint_name, labels, doc, c->y);
  }
  json_decref(doc);
}

void
tb_api_pareto_report(struct tb_api_req *r, json_t *doc)
{
  struct collect c = { json_array(), TB_PARETO_TPS_PER_GPU, 0, r->id };
  struct tb_db *db = tb_api_db_get(r);
  int rc = tb_q_pareto_jobs(db, r->project_id, NULL, NULL, NULL, NULL, collect_job, &c);
  tb_api_db_put(r, db);
  size_t others = json_array_size(c.points);
  tb_pareto_add_job(c.points, r->id, "", "", NULL, doc, c.y);
  if (rc < 0 || json_array_size(c.points) == others || others == 0) {
    json_decref(c.points); /* no frontier to place the job against */
    return;
  }
  tb_pareto_mark(c.points, c.y);
  json_t *pts = json_array();
  size_t i;
  const json_t *p;
  json_array_foreach (c.points, i, p) {
    json_t *o = json_pack("{s:O, s:O, s:O, s:O, s:b}", "x", json_object_get(p, "x"), "y",
                          json_object_get(p, "y"), "concurrency", json_object_get(p, "concurrency"),
                          "frontier", json_object_get(p, "frontier"), "own", i >= others);
    json_object_set(o, "context", json_object_get(p, "context"));
    json_array_append_new(pts, o);
  }
  json_decref(c.points);
  json_object_set_new(doc, "project_frontier",
                      json_pack("{s:i, s:o}", "jobs", c.jobs, "points", pts));
}

/* A number argument into *out (NAN when absent); false when it does not
 * parse. */
static bool
num_arg(struct tb_api_req *r, const char *name, double *out)
{
  const char *v = tb_api_arg(r, name);
  *out = NAN;
  if (v == NULL)
    return true;
  char *end = NULL;
  double d = strtod(v, &end);
  if (end == v || *end != '\0' || !isfinite(d) || d < 0)
    return false;
  *out = d;
  return true;
}

/* The SLO of the query; *asked when any bound is given.  false: a bound
 * does not parse (*bad names it). */
static bool
slo_args(struct tb_api_req *r, struct tb_pareto_slo *s, bool *asked, const char **bad)
{
  memset(s, 0, sizeof *s);
  *asked = false;
  static const char *const nums[] = { "ttft_p50_ms", "tbt_p50_ms", "min_tps_per_user" };
  double *dst[] = { &s->ttft_p50_ms, &s->tbt_p50_ms, &s->min_tps_per_user };
  for (size_t i = 0; i < TB_ARRAY_LEN(nums); i++) {
    if (!num_arg(r, nums[i], dst[i])) {
      *bad = nums[i];
      return false;
    }
    *asked |= isfinite(*dst[i]);
  }
  const char *ctx = tb_api_arg(r, "context"), *conc = tb_api_arg(r, "concurrency");
  if (ctx != NULL && (!tb_parse_tokens(ctx, &s->context) || s->context < 0)) {
    *bad = "context";
    return false;
  }
  if (conc != NULL && !tb_parse_i64(conc, 1, 1 << 20, &s->concurrency)) {
    *bad = "concurrency";
    return false;
  }
  *asked |= ctx != NULL || conc != NULL || tb_api_arg(r, "objective") != NULL;
  return true;
}

/* An RFC 3339 time argument (checked by PostgreSQL's cast too): digits,
 * 'T', ':', '-', '+', '.', 'Z' only, at most 40 bytes. */
static bool
time_ok(const char *v)
{
  if (v == NULL)
    return true;
  size_t n = strlen(v);
  return n >= 10 && n <= 40 && strspn(v, "0123456789-:T.+Z") == n;
}

enum MHD_Result
tb_api_pareto(struct tb_api_req *r)
{
  const char *ep = tb_api_arg(r, "endpoint_id"), *labels = tb_api_arg(r, "labels");
  const char *since = tb_api_arg(r, "since"), *until = tb_api_arg(r, "until");
  enum tb_pareto_y y = TB_PARETO_TPS_PER_GPU, obj;
  if (tb_api_arg(r, "y") != NULL && !tb_pareto_y_parse(tb_api_arg(r, "y"), &y))
    return tb_api_reply_invalid(r, "y",
                                "tps_per_gpu, cost_per_m_output_tokens or "
                                "j_per_output_token");
  obj = y;
  if (tb_api_arg(r, "objective") != NULL && !tb_pareto_y_parse(tb_api_arg(r, "objective"), &obj))
    return tb_api_reply_invalid(r, "objective",
                                "tps_per_gpu, cost_per_m_output_tokens or "
                                "j_per_output_token");
  if (ep != NULL && !tb_api_is_uuid(ep))
    return tb_api_reply_invalid(r, "endpoint_id", "an endpoint id (UUID)");
  if (!time_ok(since) || !time_ok(until))
    return tb_api_reply_invalid(r, since && !time_ok(since) ? "since" : "until",
                                "an RFC 3339 time (2026-12-03T14:00:00Z)");
  struct tb_pareto_slo slo;
  bool asked;
  const char *bad = NULL;
  if (!slo_args(r, &slo, &asked, &bad))
    return tb_api_reply_invalid(r, bad, "a number >= 0 (context: tokens, e.g. 8k)");
  json_t *lj = NULL;
  if (labels != NULL) {
    if (strlen(labels) <= PARETO_ARG_MAX)
      lj = json_loads(labels, 0, NULL);
    if (!tb_api_labels_ok(lj)) {
      json_decref(lj);
      return tb_api_reply_invalid(r, "labels", "a JSON object of string values");
    }
  }
  char *ltxt = lj ? json_dumps(lj, JSON_COMPACT) : NULL;
  json_decref(lj);
  struct collect c = { json_array(), y, 0, NULL };
  /* the points are collected with the objective's y when the SLO asks for
   * another one: the frontier is then drawn on that axis */
  if (asked)
    c.y = y = obj;
  struct tb_db *db = tb_api_db_get(r);
  int rc = ep != NULL ? tb_q_endpoints_owned(db, ep, r->project_id) : 1;
  enum MHD_Result ret;
  if (rc == 1)
    rc = tb_q_pareto_jobs(db, r->project_id, ep, ltxt, since, until, collect_job, &c);
  else if (rc == 0)
    rc = -1000; /* another project's endpoint, or none */
  tb_api_db_put(r, db);
  free(ltxt);
  if (rc < 0) {
    json_decref(c.points);
    if (!tb_api_found(r, rc == -1000 ? 0 : rc, "no such endpoint", &ret))
      return ret;
    return tb_api_reply_db(r, rc);
  }
  size_t on = tb_pareto_mark(c.points, y);
  json_t *doc = json_pack(
    "{s:s, s:s, s:s, s:i, s:I}", "x", "tps_per_user", "y", tb_pareto_y_name(y), "better",
    y == TB_PARETO_TPS_PER_GPU ? "higher" : "lower", "jobs", c.jobs, "frontier", (json_int_t)on);
  json_object_set_new(doc, "best", asked ? tb_pareto_best(c.points, &slo, obj) : json_null());
  json_object_set_new(doc, "points", c.points);
  return tb_api_reply_json(r, MHD_HTTP_OK, doc, NULL);
}
