/*
 * tb_pareto: the frontier across jobs.  See tb_pareto.h.
 */
#include "result/tb_pareto.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/tb_json.h"

static const char *const y_names[] = { "tps_per_gpu", "cost_per_m_output_tokens",
                                       "j_per_output_token" };

bool
tb_pareto_y_parse(const char *s, enum tb_pareto_y *out)
{
  for (size_t i = 0; s != NULL && i < TB_ARRAY_LEN(y_names); i++)
    if (strcmp(s, y_names[i]) == 0) {
      *out = (enum tb_pareto_y)i;
      return true;
    }
  return false;
}

const char *
tb_pareto_y_name(enum tb_pareto_y y)
{
  return y_names[y];
}

static bool
higher_better(enum tb_pareto_y y)
{
  return y == TB_PARETO_TPS_PER_GPU;
}

/* [lo, hi] of ci (an array of two numbers) times k into out; else [v, v]. */
static void
interval(const json_t *ci, double k, double v, double out[2])
{
  const json_t *l = json_array_get(ci, 0), *h = json_array_get(ci, 1);
  if (json_is_array(ci) && json_is_number(l) && json_is_number(h)) {
    out[0] = json_number_value(l) * k;
    out[1] = json_number_value(h) * k;
  } else {
    out[0] = out[1] = v;
  }
}

static json_t *
pair(const double v[2])
{
  return json_pack("[f,f]", v[0], v[1]);
}

/* The launch command's flags: its words that start with '-'. */
static json_t *
flags_of(const char *lc)
{
  json_t *a = json_array();
  while (lc != NULL && *lc != '\0') {
    while (*lc == ' ' || *lc == '\t' || *lc == '\n')
      lc++;
    size_t n = strcspn(lc, " \t\n");
    if (n > 0 && lc[0] == '-' && json_array_size(a) < 64)
      json_array_append_new(a, json_stringn(lc, n < 200 ? n : 200));
    lc += n;
  }
  return a;
}

/* The point's configuration (see the header); its key joins the parts. */
static json_t *
config_of(const json_t *doc, const char *endpoint_name, int64_t gpus)
{
  const json_t *eng = json_object_get(doc, "engine");
  const json_t *cost = json_object_get(doc, "cost");
  const json_t *hw = json_object_get(doc, "hardware");
  const char *gpu = tb_json_str(json_object_get(cost, "gpu"), "name");
  if (gpu == NULL)
    gpu = tb_json_str(hw, "gpu") ? tb_json_str(hw, "gpu") : tb_json_str(hw, "type");
  char engine[160];
  snprintf(engine, sizeof engine, "%s%s%s",
           tb_json_str(eng, "name") ? tb_json_str(eng, "name") : "",
           tb_json_str(eng, "version") ? " " : "",
           tb_json_str(eng, "version") ? tb_json_str(eng, "version") : "");
  json_t *flags = flags_of(tb_json_str(doc, "launch_command"));
  char *ftxt = json_dumps(flags, JSON_COMPACT);
  char *key = tb_xasprintf("%s | %s | %" PRId64 "x %s | %s", endpoint_name ? endpoint_name : "",
                           engine, gpus, gpu ? gpu : "GPU", ftxt ? ftxt : "[]");
  json_t *c =
    json_pack("{s:s, s:s, s:s, s:o, s:I, s:o}", "key", key, "endpoint",
              endpoint_name ? endpoint_name : "", "engine", engine, "gpu",
              gpu ? json_string(gpu) : json_null(), "gpus", (json_int_t)gpus, "flags", flags);
  free(key);
  free(ftxt);
  return c;
}

/* The document's GPUs; *assumed when none is said. */
static int64_t
gpus_of(const json_t *doc, bool *assumed)
{
  int64_t n = 0;
  *assumed = false;
  if (tb_json_int(json_object_get(json_object_get(doc, "cost"), "gpu"), "count", &n) && n > 0)
    return n;
  if (tb_json_int(json_object_get(doc, "hardware"), "count", &n) && n > 0)
    return n;
  if (tb_json_int(json_object_get(doc, "hardware"), "gpu_count", &n) && n > 0)
    return n;
  *assumed = true;
  return 1;
}

static void
set_fig(json_t *p, const json_t *ef, const char *name)
{
  double v = tb_json_num(ef, name);
  if (!isfinite(v))
    return;
  json_object_set_new(p, name, json_real(v));
  char key[96];
  snprintf(key, sizeof key, "%s_ci95", name);
  const json_t *ci = json_object_get(ef, key);
  if (json_is_array(ci))
    json_object_set_new(p, key, json_deep_copy(ci));
}

/* The point of one valid decode cell c; NULL without the y figure. */
static json_t *
point_of(const json_t *c, const json_t *doc, int64_t gpus, bool assumed, enum tb_pareto_y y)
{
  int64_t ctx, conc;
  double tps = tb_json_num(c, "total_tps");
  if (!tb_json_int(c, "context", &ctx) || !tb_json_int(c, "concurrency", &conc) || conc < 1 ||
      !(tps > 0))
    return NULL;
  const json_t *ef = json_object_get(c, "efficiency");
  const json_t *ci = json_object_get(c, "total_tps_ci95");
  double x[2], yv[2], yval;
  interval(ci, 1.0 / (double)conc, tps / (double)conc, x);
  if (y == TB_PARETO_TPS_PER_GPU) {
    yval = tps / (double)gpus;
    interval(ci, 1.0 / (double)gpus, yval, yv);
  } else {
    yval = tb_json_num(ef, y_names[y]);
    if (!isfinite(yval))
      return NULL;
    char key[96];
    snprintf(key, sizeof key, "%s_ci95", y_names[y]);
    interval(json_object_get(ef, key), 1.0, yval, yv);
    if (!isfinite(yv[0]) || !isfinite(yv[1]))
      yv[0] = yv[1] = yval;
  }
  json_t *p = json_pack("{s:I, s:I, s:f, s:o, s:f, s:o, s:f, s:f, s:b}", "context", (json_int_t)ctx,
                        "concurrency", (json_int_t)conc, "x", tps / (double)conc, "x_ci95", pair(x),
                        "y", yval, "y_ci95", pair(yv), "total_tps", tps, "tps_per_gpu",
                        tps / (double)gpus, "gpus_assumed", assumed);
  set_fig(p, ef, "cost_per_m_output_tokens");
  set_fig(p, ef, "cost_per_m_tokens");
  set_fig(p, ef, "j_per_output_token");
  if (tb_json_str(ef, "currency") != NULL)
    json_object_set_new(p, "currency", json_string(tb_json_str(ef, "currency")));
  json_object_set_new(p, "ttft_p50_ms", json_real(tb_json_pct(c, "ttft_ms", "p50")));
  json_object_set_new(p, "tbt_p50_ms", json_real(tb_json_pct(c, "tbt_ms", "p50")));
  const json_t *ch = json_object_get(c, "checks");
  json_object_set_new(p, "checks_ok",
                      json_is_object(ch) ? json_boolean(json_is_true(json_object_get(ch, "ok")))
                                         : json_null());
  (void)doc;
  return p;
}

void
tb_pareto_add_job(json_t *points, const char *job_id, const char *endpoint_id,
                  const char *endpoint_name, const json_t *labels, const json_t *doc,
                  enum tb_pareto_y y)
{
  bool assumed;
  int64_t gpus = gpus_of(doc, &assumed);
  json_t *config = NULL;
  size_t i;
  const json_t *c;
  json_array_foreach (json_object_get(doc, "cells"), i, c) {
    if (json_array_size(points) >= TB_PARETO_MAX_POINTS)
      break;
    const char *ph = tb_json_str(c, "phase"), *st = tb_json_str(c, "status");
    if (ph == NULL || st == NULL || strcmp(ph, "decode") != 0 || strcmp(st, "valid") != 0)
      continue;
    json_t *p = point_of(c, doc, gpus, assumed, y);
    if (p == NULL)
      continue;
    if (config == NULL)
      config = config_of(doc, endpoint_name, gpus);
    json_object_set_new(p, "job_id", json_string(job_id));
    json_object_set_new(p, "endpoint_id", json_string(endpoint_id));
    json_object_set_new(p, "endpoint", json_string(endpoint_name ? endpoint_name : ""));
    json_object_set(p, "config", config);
    json_object_set_new(p, "labels",
                        json_is_object(labels) ? json_deep_copy(labels) : json_object());
    json_object_set_new(p, "imported", json_boolean(json_object_get(doc, "imported_from") != NULL));
    json_array_append_new(points, p);
  }
  json_decref(config);
}

/* A point's intervals turned so that higher is better on both axes: q
 * lies wholly beyond p when q.xlo > p.xhi and q.ylo > p.yhi. */
struct span {
  double xlo, xhi, ylo, yhi;
};

static void
span_of(const json_t *p, bool y_higher, struct span *s)
{
  const json_t *xi = json_object_get(p, "x_ci95"), *yi = json_object_get(p, "y_ci95");
  s->xlo = json_number_value(json_array_get(xi, 0));
  s->xhi = json_number_value(json_array_get(xi, 1));
  double lo = json_number_value(json_array_get(yi, 0)),
         hi = json_number_value(json_array_get(yi, 1));
  s->ylo = y_higher ? lo : -hi;
  s->yhi = y_higher ? hi : -lo;
}

/* The lower ends of a point's intervals, sorted by xlo, highest first. */
struct lows {
  double xlo, ylo;
};

static int
by_xlo_desc(const void *a, const void *b)
{
  double x = ((const struct lows *)a)->xlo, y = ((const struct lows *)b)->xlo;
  return x > y ? -1 : x < y ? 1 : 0;
}

static bool
dominated_scan(const struct span *s, size_t n, size_t i)
{
  for (size_t j = 0; j < n; j++)
    if (j != i && s[j].xlo > s[i].xhi && s[j].ylo > s[i].yhi)
      return true;
  return false;
}

/* A point is on the frontier when no other point's intervals lie wholly
 * beyond its own on both axes.  O(n log n): the points by xlo, highest
 * first, with the running maximum of their ylo; p is dominated when the
 * maximum over those with xlo > p.xhi exceeds p.yhi.  A point whose own
 * interval is turned (xlo > xhi: it would count itself) is checked one by
 * one.  The spans are copied out of the JSON first (issue 36: 3,200
 * points took 170 ms in pairwise JSON lookups). */
size_t
tb_pareto_mark(json_t *points, enum tb_pareto_y y)
{
  size_t n = json_array_size(points), on = 0;
  if (n == 0)
    return 0;
  struct span *s = tb_xmalloc(n * sizeof *s);
  struct lows *by_x = tb_xmalloc(n * sizeof *by_x);
  double *ymax = tb_xmalloc(n * sizeof *ymax);
  for (size_t i = 0; i < n; i++) {
    span_of(json_array_get(points, i), higher_better(y), &s[i]);
    by_x[i] = (struct lows){ s[i].xlo, s[i].ylo };
  }
  qsort(by_x, n, sizeof *by_x, by_xlo_desc);
  for (size_t k = 0; k < n; k++)
    ymax[k] = k == 0 || by_x[k].ylo > ymax[k - 1] ? by_x[k].ylo : ymax[k - 1];
  for (size_t i = 0; i < n; i++) {
    bool dominated;
    if (s[i].xlo > s[i].xhi) {
      dominated = dominated_scan(s, n, i);
    } else {
      size_t lo = 0, hi = n; /* the count of points with xlo > s[i].xhi */
      while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (by_x[mid].xlo > s[i].xhi)
          lo = mid + 1;
        else
          hi = mid;
      }
      dominated = lo > 0 && ymax[lo - 1] > s[i].yhi;
    }
    json_object_set_new(json_array_get(points, i), "frontier", json_boolean(!dominated));
    on += !dominated;
  }
  free(s);
  free(by_x);
  free(ymax);
  return on;
}

/* a's interval lies wholly beyond b's on the better side. */
static bool
beyond(const json_t *a, const json_t *b, const char *key, bool higher)
{
  const json_t *ai = json_object_get(a, key), *bi = json_object_get(b, key);
  double alo = json_number_value(json_array_get(ai, 0)),
         ahi = json_number_value(json_array_get(ai, 1));
  double blo = json_number_value(json_array_get(bi, 0)),
         bhi = json_number_value(json_array_get(bi, 1));
  return higher ? alo > bhi : ahi < blo;
}

static bool
meets(const json_t *p, const struct tb_pareto_slo *s)
{
  int64_t ctx = 0, conc = 0;
  (void)tb_json_int(p, "context", &ctx);
  (void)tb_json_int(p, "concurrency", &conc);
  double ttft = tb_json_num(p, "ttft_p50_ms"), tbt = tb_json_num(p, "tbt_p50_ms");
  if (isfinite(s->ttft_p50_ms) && !(ttft <= s->ttft_p50_ms))
    return false;
  if (isfinite(s->tbt_p50_ms) && !(tbt <= s->tbt_p50_ms))
    return false;
  if (isfinite(s->min_tps_per_user) && !(tb_json_num(p, "x") >= s->min_tps_per_user))
    return false;
  return ctx >= s->context && conc >= s->concurrency;
}

struct ranked {
  const json_t *p;
  double v;
};

static int
rank_cmp(const void *a, const void *b)
{
  double x = ((const struct ranked *)a)->v, y = ((const struct ranked *)b)->v;
  return x < y ? -1 : x > y ? 1 : 0;
}

static json_t *
slo_echo(const struct tb_pareto_slo *s)
{
  json_t *o = json_object();
  if (isfinite(s->ttft_p50_ms))
    json_object_set_new(o, "ttft_p50_ms", json_real(s->ttft_p50_ms));
  if (isfinite(s->tbt_p50_ms))
    json_object_set_new(o, "tbt_p50_ms", json_real(s->tbt_p50_ms));
  if (isfinite(s->min_tps_per_user))
    json_object_set_new(o, "min_tps_per_user", json_real(s->min_tps_per_user));
  if (s->context > 0)
    json_object_set_new(o, "context", json_integer(s->context));
  if (s->concurrency > 0)
    json_object_set_new(o, "concurrency", json_integer(s->concurrency));
  return o;
}

json_t *
tb_pareto_best(const json_t *points, const struct tb_pareto_slo *slo, enum tb_pareto_y objective)
{
  size_t n = json_array_size(points), m = 0;
  struct ranked *r = tb_xcalloc(n + 1, sizeof *r);
  bool hb = higher_better(objective);
  for (size_t i = 0; i < n; i++) {
    const json_t *p = json_array_get(points, i);
    if (meets(p, slo) && isfinite(tb_json_num(p, "y")))
      r[m++] = (struct ranked){ p, hb ? -tb_json_num(p, "y") : tb_json_num(p, "y") };
  }
  qsort(r, m, sizeof *r, rank_cmp);
  json_t *out =
    json_pack("{s:s, s:s, s:o, s:I}", "answer", m ? "found" : "no configuration yet", "objective",
              y_names[objective], "slo", slo_echo(slo), "meeting", (json_int_t)m);
  json_t *ev = json_array();
  size_t ties = 0;
  for (size_t i = 0; i < m; i++) {
    if (i < 5)
      json_array_append_new(ev, json_deep_copy(r[i].p));
    if (i > 0 && !beyond(r[0].p, r[i].p, "y_ci95", hb))
      ties++;
  }
  json_object_set_new(out, "best", m ? json_deep_copy(r[0].p) : json_null());
  json_object_set_new(out, "evidence", ev);
  json_object_set_new(out, "ties", json_integer((json_int_t)ties));
  free(r);
  return out;
}
