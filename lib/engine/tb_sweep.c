/*
 * tb_sweep: a sweep's search.  See tb_sweep.h.
 */
#include "engine/tb_sweep.h"

#include <math.h>
#include <stdio.h>

#include "engine/tb_rate.h"
#include "engine/tb_ratecell.h"
#include "engine/tb_ratefig.h"
#include "spec/tb_plan.h"

/* A key of the sweep's object: "<what>_rps" over rate, or
 * "<what>_concurrency" over concurrency (static buffer). */
static const char *
sweep_key(bool closed, const char *what)
{
  static char k[48];
  snprintf(k, sizeof k, "%s_%s", what, closed ? "concurrency" : "rps");
  return k;
}

/* The sweep: its probes (cells), then its object (docs/engine.md,
 * "Sweeps"). */
json_t *
tb_sweep_run(struct rrun *r)
{
  const struct tb_spec_sweep *sw = &r->s->sweep;
  bool closed = r->p->sweep_closed;
  double target = sw->attainment_pct / 100.0;
  double vals[64];
  bool pass[64];
  size_t n = 0;
  double found = 0, hi = 0, att;
  json_t *probes = json_array();
  for (;;) {
    double next = tb_plan_sweep_next(sw, vals, pass, n, &found, &hi);
    if (next <= 0 || n >= TB_ARRAY_LEN(vals))
      break;
    unsigned index = r->index + 1;
    unsigned users = closed ? (unsigned)llround(next) : 0;
    if (!tb_rate_one_cell(r, closed ? 0 : next, users, "sweep", &att))
      break;
    vals[n] = next;
    pass[n] = isfinite(att) && att >= target - 1e-12;
    json_t *pr = json_pack("{s:I, s:o, s:b}", "cell", (json_int_t)index, "attainment",
                           isfinite(att) ? json_real(att) : json_null(), "pass", pass[n]);
    json_object_set_new(pr, closed ? "users" : "rate_rps",
                        closed ? json_integer(users) : json_real(next));
    json_array_append_new(probes, pr);
    n++;
  }
  (void)tb_plan_sweep_next(sw, vals, pass, n, &found, &hi);
  double vmax = closed ? (double)sw->max_concurrency : sw->max_rps;
  double step = closed ? (double)sw->step_concurrency : sw->step_rps;
  json_t *o = json_object();
  json_object_set_new(o, "over", json_string(closed ? "concurrency" : "rate"));
  json_object_set_new(o, "attainment_pct", json_real(sw->attainment_pct));
  json_object_set_new(o, "slo", tb_ratefig_slo(&r->s->slo));
  json_object_set_new(o, sweep_key(closed, "min"),
                      closed ? json_integer(sw->min_concurrency) : json_real(sw->min_rps));
  json_object_set_new(o, sweep_key(closed, "max"),
                      closed ? json_integer(sw->max_concurrency) : json_real(sw->max_rps));
  json_object_set_new(o, sweep_key(closed, "step"),
                      closed ? json_integer(sw->step_concurrency) : json_real(sw->step_rps));
  json_object_set_new(o, "max_probes", json_integer(sw->max_probes));
  json_object_set_new(o, "probes", probes);
  json_object_set_new(o, sweep_key(closed, "found"), found > 0 ? json_real(found) : json_null());
  json_object_set_new(o, sweep_key(closed, "fails_at"), hi > 0 ? json_real(hi) : json_null());
  char why[48];
  snprintf(why, sizeof why, "%s",
           r->cancelled                                ? "cancelled"
           : found == 0                                ? sweep_key(closed, "below_min")
           : hi == 0 && found >= vmax                  ? sweep_key(closed, "at_max")
           : hi > 0 && hi - found <= step * (1 + 1e-9) ? "converged"
                                                       : "out_of_probes");
  json_object_set_new(o, "outcome", json_string(why));
  return o;
}
