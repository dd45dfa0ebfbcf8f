/*
 * tb_checks: see tb_checks.h.
 */
#include "result/tb_checks.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/tb_json.h"
#include "base/tb_util.h"

static json_t *
tri(int v)
{
  return v < 0 ? json_null() : json_boolean(v > 0);
}

/* Rate cells.  The start lag: latencies are taken from each request's
 * actual start, so a late start never enters them; it shifts the arrival
 * process the server sees.  A tenth of the mean gap keeps that shift small
 * against the process's own spread (at 200 req/s, 0.5 ms); the 5 ms floor
 * is below one decode step of any engine (10-50 ms), so at low rates a
 * start that late lands in the same batch step it was meant for.
 *
 * The inter-arrival CV: the gaps of gamma arrivals of shape k have CV
 * c = 1/sqrt(k), skewness 2/sqrt(k) and kurtosis 3 + 6/k.  By the delta
 * method the sample CV of n gaps has variance
 *   c^2/n * (c^2 - c*skewness + (kurtosis - 1)/4) = c^2 (1 + c^2) / (2n)
 * (Poisson: 1/n; normal gaps would give c^2 (1/2 + c^2) / n).  Four
 * standard errors would be a false alarm once in 16,000 cells were the
 * sample CV normal; it is skewed, and over simulated schedules (Poisson and
 * gamma:4, 50 to 1,000 gaps) at most about one in 400 fails, while a loop
 * that bunches or flattens its starts moves the CV by far more.
 * test_sampler holds this to tb_arrival's own generator.  The absolute
 * floor covers constant arrivals (c = 0), whose actual gaps differ only by
 * the timer's jitter. */
double
tb_checks_lag_limit_ms(double rate_rps)
{
  double share = rate_rps > 0 ? TB_CHECK_LAG_GAP_SHARE * 1000.0 / rate_rps : 0;
  return share > TB_CHECK_LAG_MIN_MS ? share : TB_CHECK_LAG_MIN_MS;
}

double
tb_checks_cv_tolerance(double expected, double n)
{
  if (!(n >= 2) || !isfinite(expected) || expected < 0)
    return NAN;
  double se = expected * sqrt((1 + expected * expected) / (2 * n));
  return TB_CHECK_CV_SE * se > TB_CHECK_CV_ABS ? TB_CHECK_CV_SE * se : TB_CHECK_CV_ABS;
}

static double
round_to(double v, double scale)
{
  return round(v * scale) / scale;
}

static void
rate_checks(const struct tb_checks_in *in, json_t *o, json_t *failed)
{
  char why[200];
  if (isfinite(in->lag_p99_ms)) {
    double lim = tb_checks_lag_limit_ms(in->rate_rps);
    json_object_set_new(o, "schedule_lag_p99_ms", json_real(round_to(in->lag_p99_ms, 1e4)));
    json_object_set_new(o, "schedule_lag_limit_ms", json_real(round_to(lim, 1e4)));
    if (in->lag_p99_ms > lim) {
      snprintf(why, sizeof why, "start lag p99 %.3f ms over %.3f ms", in->lag_p99_ms, lim);
      json_array_append_new(failed, json_string(why));
    }
  }
  if (isfinite(in->dropped)) {
    json_object_set_new(o, "dropped", json_integer((json_int_t)in->dropped));
    if (in->dropped > 0) {
      snprintf(why, sizeof why, "%.0f arrivals dropped (no connection slot free)", in->dropped);
      json_array_append_new(failed, json_string(why));
    }
  }
  /* The server can hold no more of the cell's requests than the cell had
   * in flight: a request ends on the server before its last bytes reach
   * the client.  More is another client's work during the cell (or a
   * request the client cut that the server still runs). */
  if (isfinite(in->server_peak) && isfinite(in->max_in_flight)) {
    json_object_set_new(o, "server_peak_requests", json_real(in->server_peak));
    json_object_set_new(o, "max_in_flight", json_integer((json_int_t)in->max_in_flight));
    if (in->server_peak > in->max_in_flight + 0.5) {
      snprintf(why, sizeof why,
               "the server held %.0f requests, more than the %.0f this cell had in flight",
               in->server_peak, in->max_in_flight);
      json_array_append_new(failed, json_string(why));
    }
  }
  double tol = tb_checks_cv_tolerance(in->cv_expected, in->gaps);
  if (isfinite(in->cv) && isfinite(tol)) {
    json_object_set_new(o, "interarrival_cv", json_real(round_to(in->cv, 1e4)));
    json_object_set_new(o, "interarrival_cv_expected", json_real(round_to(in->cv_expected, 1e4)));
    json_object_set_new(o, "interarrival_cv_tolerance", json_real(round_to(tol, 1e4)));
    if (fabs(in->cv - in->cv_expected) > tol) {
      snprintf(why, sizeof why,
               "inter-arrival CV %.3f vs %.3f expected (tolerance %.3f over %.0f gaps)", in->cv,
               in->cv_expected, tol, in->gaps);
      json_array_append_new(failed, json_string(why));
    }
  }
}

json_t *
tb_checks_json(const struct tb_checks_in *in)
{
  json_t *o = json_object();
  json_t *failed = json_array();
  char why[200];
  double c = (double)in->requested;
  if (in->requested > 0)
    json_object_set_new(o, "requested_concurrency", json_integer((json_int_t)in->requested));
  if (in->requested > 0 && isfinite(in->achieved)) {
    json_object_set_new(o, "achieved_concurrency",
                        json_real(round(in->achieved * 1000.0) / 1000.0));
    json_object_set_new(o, "achieved_source",
                        json_string(in->achieved_server ? "server" : "client"));
    double tol =
      TB_CHECK_CONC_REL * c > TB_CHECK_CONC_ABS ? TB_CHECK_CONC_REL * c : TB_CHECK_CONC_ABS;
    if (fabs(in->achieved - c) > tol) {
      snprintf(why, sizeof why, "achieved concurrency %.2f (%s) vs %u requested", in->achieved,
               in->achieved_what != NULL ? in->achieved_what
               : in->achieved_server     ? "server's running gauge"
                                         : "client in flight",
               in->requested);
      json_array_append_new(failed, json_string(why));
    }
  }
  if (isfinite(in->cpu_share)) {
    json_object_set_new(o, "client_cpu_share", json_real(round(in->cpu_share * 1000.0) / 1000.0));
    if (in->cpu_share > TB_CHECK_CPU_MAX) {
      snprintf(why, sizeof why, "client CPU-bound: %.0f%% of the window on CPU",
               100.0 * in->cpu_share);
      json_array_append_new(failed, json_string(why));
    }
  }
  if (isfinite(in->kernel_stamped)) {
    json_object_set_new(o, "kernel_stamped",
                        json_real(round(in->kernel_stamped * 10000.0) / 10000.0));
    if (in->kernel_wanted && in->kernel_stamped < TB_CHECK_KERNEL_MIN) {
      snprintf(why, sizeof why, "only %.0f%% of reads kernel-stamped", 100.0 * in->kernel_stamped);
      json_array_append_new(failed, json_string(why));
    }
  }
  if (in->rate)
    rate_checks(in, o, failed);
  json_object_set_new(o, "drained_before", tri(in->drained_before));
  json_object_set_new(o, "drained_after", tri(in->drained_after));
  if (in->drained_before == 0) {
    snprintf(why, sizeof why, "server not drained before the cell (%.0f running, %.0f waiting)",
             isfinite(in->before_running) ? in->before_running : 0,
             isfinite(in->before_waiting) ? in->before_waiting : 0);
    json_array_append_new(failed, json_string(why));
  }
  if (in->drained_after == 0)
    json_array_append_new(failed, json_string("server not drained after the cell "
                                              "(within the drain timeout)"));
  json_object_set_new(o, "ok", json_boolean(json_array_size(failed) == 0));
  json_object_set_new(o, "failed", failed);
  return o;
}

const char *
tb_checks_failed_text(const json_t *cell, char *buf, size_t len)
{
  if (len == 0)
    return buf;
  buf[0] = '\0';
  const json_t *ch = json_object_get(cell, "checks");
  if (!json_is_object(ch) || json_is_true(json_object_get(ch, "ok")))
    return buf;
  const json_t *f = json_object_get(ch, "failed");
  size_t o = 0, i;
  const json_t *v;
  json_array_foreach (f, i, v) {
    const char *s = json_string_value(v);
    if (s == NULL)
      continue;
    int w = snprintf(buf + o, len - o, "%s%s", o ? "; " : "", s);
    if (w < 0 || (size_t)w >= len - o)
      break;
    o += (size_t)w;
  }
  return buf;
}

/* ------------------------------------------------------ prefix hits */

double
tb_checks_prefix_explained(const struct tb_checks_prefix *p)
{
  if (!(p->requests > 0) || !(p->prompt_mean > 0))
    return NAN;
  double total = p->requests * p->prompt_mean, t = TB_CHECK_TEMPLATE_TOKENS;
  double px = p->prefix_tokens > 0 ? p->prefix_tokens : 0, base = 0;
  if (isfinite(p->implied_pct)) {
    base = total * p->implied_pct / 100.0 + p->requests * t;
  } else if (p->turns > 0 && p->turn_requests != NULL && p->turn_prompt != NULL) {
    double first = p->turn_prompt[0];
    for (size_t k = 0; k < p->turns; k++) {
      double n = p->turn_requests[k], pr = p->turn_prompt[k];
      if (!(n > 0) || !isfinite(pr))
        continue;
      double carried = k > 0 && isfinite(first) && pr > first ? pr - first : 0;
      base += n * fmin(pr, carried + px + t);
    }
  } else {
    base = p->requests * fmin(p->prompt_mean, px + t);
  }
  /* a shared prefix's user messages repeat past the first `suffixes`: what
   * began with a repeat may hit whole */
  double firsts = p->first_turns > 0 ? p->first_turns : p->requests;
  if (px > 0 && p->suffixes > 0 && firsts > p->suffixes) {
    double rep = (firsts - p->suffixes) / firsts;
    base = (1 - rep) * base + rep * total;
  }
  double pct = 100.0 * base / total;
  return pct < 100.0 ? pct : 100.0;
}

void
tb_checks_prefix_cell(json_t *cell, const struct tb_checks_prefix *p)
{
  const char *cr = tb_json_str(cell, "cache_reset");
  if (cr == NULL || strcmp(cr, "done") != 0)
    return;
  const json_t *sum = json_object_get(json_object_get(cell, "server_series"), "summary");
  double hit = tb_json_num(sum, "prefix_hit_pct");
  const char *src = tb_json_str(sum, "prefix_hit_source");
  char source[48];
  snprintf(source, sizeof source, "server series, %s", src ? src : "counters");
  if (!isfinite(hit)) { /* no series: what the server said of each answer */
    hit = tb_json_num(json_object_get(cell, "prefix_cache"), "hit_pct");
    snprintf(source, sizeof source, "usage");
  }
  if (!isfinite(hit) && p->have_hit)
    hit = p->hit_pct;
  double expl = tb_checks_prefix_explained(p);
  if (!isfinite(hit) || !isfinite(expl))
    return;
  json_t *ch = json_object_get(cell, "checks");
  if (!json_is_object(ch)) {
    ch = json_pack("{s:b, s:[]}", "ok", 1, "failed");
    json_object_set_new(cell, "checks", ch);
  }
  bool bad = hit > expl + TB_CHECK_HIT_SLACK_PTS;
  json_object_set_new(ch, "prefix_hit_pct", json_real(round_to(hit, 1e4)));
  json_object_set_new(ch, "prefix_hit_source", json_string(source));
  json_object_set_new(ch, "prefix_hit_explained_pct", json_real(round_to(expl, 1e4)));
  json_object_set_new(ch, "prefix_hits_unexplained", json_boolean(bad));
  if (!bad)
    return;
  char why[300];
  snprintf(why, sizeof why,
           "prefix hits unexplained: after a cache reset the server's prefix cache held "
           "%.1f%% of prompt tokens (%s), this cell's own prompts explain at most %.1f%% "
           "(+%.0f points)",
           hit, source, expl, TB_CHECK_HIT_SLACK_PTS);
  tb_checks_fail(ch, why);
}

void
tb_checks_fail(json_t *ch, const char *why)
{
  json_t *failed = json_object_get(ch, "failed");
  if (!json_is_array(failed)) {
    failed = json_array();
    json_object_set_new(ch, "failed", failed);
  }
  json_array_append_new(failed, json_string(why));
  json_object_set_new(ch, "ok", json_false());
}

/* ------------------------------------------------------------ repeats */

/* The failed self-checks of repeat number r (reps[r], its checks ch) added
 * to failed as "repeat N: <reason>", N the repeat's own number when it has
 * one. */
static void
add_failed(json_t *failed, const json_t *rep, const json_t *ch, size_t r)
{
  json_int_t pass = json_integer_value(json_object_get(rep, "repeat"));
  size_t i;
  const json_t *v;
  json_array_foreach (json_object_get(ch, "failed"), i, v) {
    char *why = tb_xasprintf("repeat %lld: %s", (long long)(pass > 0 ? pass : (json_int_t)r + 1),
                             json_string_value(v) ? json_string_value(v) : "");
    json_array_append_new(failed, json_string(why));
    free(why);
  }
}

json_t *
tb_checks_combine_prefix(json_t *const *reps, size_t n)
{
  json_t *o = NULL, *failed = NULL;
  double hit = NAN, expl = NAN;
  bool bad = false;
  for (size_t r = 0; r < n; r++) {
    const json_t *ch = json_object_get(reps[r], "checks");
    if (!json_is_boolean(json_object_get(ch, "prefix_hits_unexplained")))
      continue;
    if (o == NULL) {
      o = json_object();
      failed = json_array();
      json_object_set_new(o, "prefix_hit_source",
                          json_string(tb_json_str(ch, "prefix_hit_source")
                                        ? tb_json_str(ch, "prefix_hit_source")
                                        : "usage"));
    }
    bad = bad || json_is_true(json_object_get(ch, "prefix_hits_unexplained"));
    double h = tb_json_num(ch, "prefix_hit_pct"), e = tb_json_num(ch, "prefix_hit_explained_pct");
    if (isfinite(h) && !(h <= hit))
      hit = h;
    if (isfinite(e) && !(e >= expl))
      expl = e;
    add_failed(failed, reps[r], ch, r);
  }
  if (o == NULL)
    return NULL;
  if (isfinite(hit))
    json_object_set_new(o, "prefix_hit_pct", json_real(hit));
  if (isfinite(expl))
    json_object_set_new(o, "prefix_hit_explained_pct", json_real(expl));
  json_object_set_new(o, "prefix_hits_unexplained", json_boolean(bad));
  json_object_set_new(o, "ok", json_boolean(json_array_size(failed) == 0));
  json_object_set_new(o, "failed", failed);
  return o;
}

json_t *
tb_checks_combine(json_t *const *reps, size_t n)
{
  json_t *o = NULL, *failed = NULL;
  double ach = 0, cpu = NAN, kern = NAN;
  size_t n_ach = 0;
  int before = 1, after = 1;
  for (size_t r = 0; r < n; r++) {
    const json_t *ch = json_object_get(reps[r], "checks");
    if (!json_is_object(ch))
      continue;
    if (o == NULL) {
      o = json_object();
      failed = json_array();
      json_object_set(o, "requested_concurrency", json_object_get(ch, "requested_concurrency"));
      json_object_set(o, "achieved_source", json_object_get(ch, "achieved_source"));
    }
    add_failed(failed, reps[r], ch, r);
    double a = tb_json_num(ch, "achieved_concurrency");
    if (isfinite(a)) {
      ach += a;
      n_ach++;
    }
    double c = tb_json_num(ch, "client_cpu_share"), k = tb_json_num(ch, "kernel_stamped");
    if (isfinite(c) && !(c <= cpu))
      cpu = c;
    if (isfinite(k) && !(k >= kern))
      kern = k;
    const json_t *b = json_object_get(ch, "drained_before"),
                 *f = json_object_get(ch, "drained_after");
    before = !json_is_boolean(b) ? -1 : before < 0 ? -1 : before && json_is_true(b);
    after = !json_is_boolean(f) ? -1 : after < 0 ? -1 : after && json_is_true(f);
  }
  if (o == NULL)
    return NULL;
  if (n_ach > 0)
    json_object_set_new(o, "achieved_concurrency",
                        json_real(round(ach / (double)n_ach * 1000.0) / 1000.0));
  if (isfinite(cpu))
    json_object_set_new(o, "client_cpu_share", json_real(cpu));
  if (isfinite(kern))
    json_object_set_new(o, "kernel_stamped", json_real(kern));
  json_object_set_new(o, "drained_before", tri(before));
  json_object_set_new(o, "drained_after", tri(after));
  json_object_set_new(o, "ok", json_boolean(json_array_size(failed) == 0));
  json_object_set_new(o, "failed", failed);
  return o;
}
