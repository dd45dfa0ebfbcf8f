/*
 * tb_cost: a cell's cost and energy.  See tb_cost.h.
 */
#include "result/tb_cost.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/tb_json.h"
#include "result/tb_checks.h"

static void
price_init(struct tb_cost_price *p)
{
  memset(p, 0, sizeof *p);
  p->per_hour = NAN;
  memcpy(p->currency, "USD", 4);
}

static void
set_currency(struct tb_cost_price *p, const char *c)
{
  if (c == NULL || strlen(c) != 3)
    return;
  for (int i = 0; i < 3; i++)
    if (c[i] < 'A' || c[i] > 'Z')
      return;
  memcpy(p->currency, c, 4);
}

bool
tb_cost_price_of(const json_t *obj, struct tb_cost_price *p)
{
  price_init(p);
  if (!json_is_object(obj))
    return false;
  const json_t *gpu = json_object_get(obj, "gpu");
  const json_t *hw = json_object_get(obj, "hardware");
  const char *name = NULL;
  int64_t count = 0;
  if (json_is_object(gpu)) {
    name = tb_json_str(gpu, "name");
    if (!tb_json_int(gpu, "count", &count))
      count = 0;
  }
  if (json_is_object(hw)) {
    if (name == NULL)
      name = tb_json_str(hw, "gpu") ? tb_json_str(hw, "gpu") : tb_json_str(hw, "type");
    if (count <= 0 && !tb_json_int(hw, "count", &count))
      count = 0;
  }
  if (name != NULL)
    snprintf(p->gpu, sizeof p->gpu, "%s", name);
  p->gpus = count > 0 ? count : 0;
  double price = tb_json_num(obj, "price_per_hour");
  if (isfinite(price) && price >= 0)
    p->per_hour = price;
  set_currency(p, tb_json_str(obj, "currency"));
  return isfinite(p->per_hour) || p->gpus > 0;
}

bool
tb_cost_price_of_labels(const json_t *labels, struct tb_cost_price *p)
{
  price_init(p);
  if (!json_is_object(labels))
    return false;
  const char *v = tb_json_str(labels, "gpu");
  if (v != NULL)
    snprintf(p->gpu, sizeof p->gpu, "%s", v);
  int64_t n;
  v = tb_json_str(labels, "gpu_count");
  if (v != NULL && tb_parse_i64(v, 1, 1 << 20, &n))
    p->gpus = n;
  v = tb_json_str(labels, "price_per_hour");
  if (v != NULL) {
    char *end = NULL;
    double x = strtod(v, &end);
    if (end != v && *end == '\0' && isfinite(x) && x >= 0)
      p->per_hour = x;
  }
  set_currency(p, tb_json_str(labels, "currency"));
  return isfinite(p->per_hour) || p->gpus > 0;
}

json_t *
tb_cost_header(const struct tb_cost_price *p, bool telemetry)
{
  json_t *o = json_object();
  json_t *g = json_object();
  json_object_set_new(g, "name", p->gpu[0] ? json_string(p->gpu) : json_null());
  json_object_set_new(g, "count", p->gpus > 0 ? json_integer(p->gpus) : json_null());
  json_object_set_new(o, "gpu", g);
  json_object_set_new(o, "price_per_hour",
                      isfinite(p->per_hour) ? json_real(p->per_hour) : json_null());
  json_object_set_new(o, "currency", json_string(p->currency));
  json_object_set_new(o, "telemetry", telemetry ? json_string("dcgm") : json_null());
  return o;
}

/* ------------------------------------------------------------- the window */

/* The value of field at t from the samples that have it (linear between
 * the two around t); false when none is at or before t, or none at or
 * after it. */
static bool
value_at(const struct tb_cost_sample *s, size_t n, size_t off, int64_t t, double *out)
{
  const struct tb_cost_sample *lo = NULL, *hi = NULL;
  for (size_t i = 0; i < n; i++) {
    double v = *(const double *)((const char *)&s[i] + off);
    if (!isfinite(v))
      continue;
    if (s[i].t_ns <= t)
      lo = &s[i];
    if (s[i].t_ns >= t && hi == NULL)
      hi = &s[i];
  }
  if (lo == NULL || hi == NULL)
    return false;
  double vl = *(const double *)((const char *)lo + off);
  double vh = *(const double *)((const char *)hi + off);
  if (hi->t_ns == lo->t_ns) {
    *out = vl;
    return true;
  }
  double w = (double)(t - lo->t_ns) / (double)(hi->t_ns - lo->t_ns);
  *out = vl + (vh - vl) * w;
  return true;
}

/* The power gauge integrated over [t0, t1] (J): trapezoids between the
 * gauge's points, the edges interpolated (or held from the nearest point
 * inside when no sample lies beyond them).  False under two points. */
static bool
power_integral(const struct tb_cost_sample *s, size_t n, int64_t t0, int64_t t1, double *j)
{
  double ts[2 + 4096], ps[2 + 4096];
  size_t k = 0;
  double p0;
  bool edge0 = value_at(s, n, offsetof(struct tb_cost_sample, power_w), t0, &p0);
  if (edge0) {
    ts[k] = 0;
    ps[k++] = p0;
  }
  for (size_t i = 0; i < n && k < 4096; i++)
    if (isfinite(s[i].power_w) && s[i].t_ns > t0 && s[i].t_ns < t1) {
      ts[k] = (double)(s[i].t_ns - t0) / 1e9;
      ps[k++] = s[i].power_w;
    }
  double p1;
  bool edge1 = value_at(s, n, offsetof(struct tb_cost_sample, power_w), t1, &p1);
  if (edge1) {
    ts[k] = (double)(t1 - t0) / 1e9;
    ps[k++] = p1;
  }
  if (k < 2)
    return false;
  double sum = 0;
  for (size_t i = 1; i < k; i++)
    sum += (ps[i] + ps[i - 1]) / 2 * (ts[i] - ts[i - 1]);
  /* an edge without a sample beyond it: the nearest point held */
  if (!edge0)
    sum += ps[0] * ts[0];
  if (!edge1)
    sum += ps[k - 1] * ((double)(t1 - t0) / 1e9 - ts[k - 1]);
  *j = sum;
  return true;
}

/* min, mean, max of field over samples inside [t0, t1] (or the nearest
 * sample when none is inside). */
static void
summary(const struct tb_cost_sample *s, size_t n, size_t off, int64_t t0, int64_t t1, double *mean,
        double *mn, double *mx)
{
  double sum = 0, lo = INFINITY, hi = -INFINITY;
  size_t k = 0, near = n;
  int64_t best = INT64_MAX;
  for (size_t i = 0; i < n; i++) {
    double v = *(const double *)((const char *)&s[i] + off);
    if (!isfinite(v))
      continue;
    int64_t d = s[i].t_ns < t0 ? t0 - s[i].t_ns : s[i].t_ns > t1 ? s[i].t_ns - t1 : 0;
    if (d < best) {
      best = d;
      near = i;
    }
    if (d != 0)
      continue;
    sum += v;
    lo = v < lo ? v : lo;
    hi = v > hi ? v : hi;
    k++;
  }
  if (k == 0 && near < n) {
    double v = *(const double *)((const char *)&s[near] + off);
    sum = lo = hi = v;
    k = 1;
  }
  *mean = k ? sum / (double)k : NAN;
  *mn = k ? lo : NAN;
  *mx = k ? hi : NAN;
}

void
tb_cost_window(const struct tb_cost_sample *s, size_t n, int64_t t0, int64_t t1,
               struct tb_cost_energy *out)
{
  memset(out, 0, sizeof *out);
  out->span_s = (double)(t1 - t0) / 1e9;
  double e0, e1, j;
  if (value_at(s, n, offsetof(struct tb_cost_sample, energy_mj), t0, &e0) &&
      value_at(s, n, offsetof(struct tb_cost_sample, energy_mj), t1, &e1) && e1 >= e0) {
    out->ok = true;
    out->source = "energy_counter";
    out->joules = (e1 - e0) / 1e3;
  } else if (power_integral(s, n, t0, t1, &j)) {
    out->ok = true;
    out->source = "power_gauge";
    out->joules = j;
  }
  out->avg_w = out->ok && out->span_s > 0 ? out->joules / out->span_s : NAN;
  double dummy;
  summary(s, n, offsetof(struct tb_cost_sample, util_pct), t0, t1, &out->util_mean, &out->util_min,
          &out->util_max);
  summary(s, n, offsetof(struct tb_cost_sample, sm_mhz), t0, t1, &out->sm_mean, &out->sm_min,
          &out->sm_max);
  summary(s, n, offsetof(struct tb_cost_sample, temp_c), t0, t1, &dummy, &dummy, &out->temp_max);
  /* reasons from the sample at or before t0 to the one at or after t1 */
  size_t first = 0, last = n;
  for (size_t i = 0; i < n; i++) {
    if (s[i].t_ns <= t0)
      first = i;
    if (s[i].t_ns >= t1 && last == n)
      last = i;
  }
  for (size_t i = first; i < n && i <= last; i++) {
    if (s[i].t_ns > t0 && s[i].t_ns < t1)
      out->samples++;
    if (s[i].gpus > out->gpus)
      out->gpus = s[i].gpus;
    if (s[i].has_reasons) {
      out->reasons_known = true;
      out->reasons |= s[i].reasons;
    }
  }
}

const char *
tb_cost_reasons_text(uint64_t reasons, char *buf, size_t len)
{
  /* NVML's nvmlClocksEventReasons bits (docs.nvidia.com/deploy/nvml-api,
   * group__nvmlClocksEventReasons) */
  static const struct {
    uint64_t bit;
    const char *name;
  } names[] = {
    { 0x2, "applications_clocks_setting" },
    { 0x4, "sw_power_cap" },
    { 0x8, "hw_slowdown" },
    { 0x10, "sync_boost" },
    { 0x20, "sw_thermal_slowdown" },
    { 0x40, "hw_thermal_slowdown" },
    { 0x80, "hw_power_brake_slowdown" },
    { 0x100, "display_clock_setting" },
  };
  size_t at = 0;
  if (len > 0)
    buf[0] = '\0';
  uint64_t known = TB_COST_REASON_IDLE;
  for (size_t i = 0; i < TB_ARRAY_LEN(names); i++) {
    known |= names[i].bit;
    if ((reasons & names[i].bit) && at < len)
      at += (size_t)snprintf(buf + at, len - at, "%s%s", at ? ", " : "", names[i].name);
  }
  if ((reasons & ~known) && at < len)
    snprintf(buf + at, len - at, "%sother (0x%llx)", at ? ", " : "",
             (unsigned long long)(reasons & ~known));
  return buf;
}

/* ----------------------------------------------------------------- a cell */

static json_t *
num(double v)
{
  return isfinite(v) ? json_real(v) : json_null();
}

/* [lo, hi] of k / x over x's interval [xl, xh] (k / xh, k / xl); null when
 * it has none. */
static json_t *
inverse_ci(double k, const json_t *ci)
{
  if (!json_is_array(ci) || json_array_size(ci) != 2)
    return json_null();
  double xl = json_number_value(json_array_get(ci, 0));
  double xh = json_number_value(json_array_get(ci, 1));
  if (!(xh > 0) || !isfinite(k))
    return json_null();
  return json_pack("[o,o]", json_real(k / xh), xl > 0 ? json_real(k / xl) : json_null());
}

static json_t *
scaled_ci(double k, const json_t *ci)
{
  if (!json_is_array(ci) || json_array_size(ci) != 2 || !isfinite(k))
    return json_null();
  return json_pack("[f,f]", json_number_value(json_array_get(ci, 0)) * k,
                   json_number_value(json_array_get(ci, 1)) * k);
}

static json_t *
triple(double mean, double mn, double mx)
{
  if (!isfinite(mean))
    return NULL;
  return json_pack("{s:f, s:f, s:f}", "mean", mean, "min", mn, "max", mx);
}

/* The prompt tokens of the requests the cell started. */
static double
input_tokens(const json_t *cell)
{
  int64_t started = 0;
  if (!tb_json_int(cell, "requests_started", &started) || started <= 0)
    return NAN;
  const char *phase = tb_json_str(cell, "phase");
  double per = phase != NULL && strcmp(phase, "rate") == 0 ? tb_json_num(cell, "prompt_tokens_mean")
                                                           : tb_json_num(cell, "context");
  return isfinite(per) ? per * (double)started : NAN;
}

static void
money(json_t *o, const json_t *cell, const struct tb_cost_price *p, double out_tokens,
      double window_s)
{
  json_object_set_new(o, "currency", json_string(p->currency));
  json_object_set_new(o, "price_per_hour", json_real(p->per_hour));
  double cost = p->per_hour * window_s / 3600.0;
  double tps = tb_json_num(cell, "total_tps");
  double in = input_tokens(cell);
  if (out_tokens > 0 && window_s > 0) {
    json_object_set_new(o, "cost_per_m_output_tokens", json_real(cost / out_tokens * 1e6));
    json_object_set_new(
      o, "cost_per_m_output_tokens_ci95",
      inverse_ci(p->per_hour / 3600.0 * 1e6, json_object_get(cell, "total_tps_ci95")));
  }
  if (isfinite(in)) {
    json_object_set_new(o, "input_tokens", json_integer((json_int_t)in));
    if (out_tokens + in > 0)
      json_object_set_new(o, "cost_per_m_tokens", json_real(cost / (out_tokens + in) * 1e6));
  }
  (void)tps;
}

static void
energy(json_t *o, const json_t *cell, const struct tb_cost_energy *e, double out_tokens)
{
  if (e->ok) {
    json_object_set_new(o, "energy_source", json_string(e->source));
    json_object_set_new(o, "joules", json_real(e->joules));
    json_object_set_new(o, "avg_power_w", num(e->avg_w));
    if (out_tokens > 0) {
      json_object_set_new(o, "j_per_output_token", json_real(e->joules / out_tokens));
      json_object_set_new(o, "j_per_output_token_ci95",
                          inverse_ci(e->avg_w, json_object_get(cell, "total_tps_ci95")));
    }
  }
  json_object_set_new(o, "telemetry_samples", json_integer((json_int_t)e->samples));
  json_t *u = triple(e->util_mean, e->util_min, e->util_max);
  if (u != NULL)
    json_object_set_new(o, "gpu_util_pct", u);
  json_t *c = triple(e->sm_mean, e->sm_min, e->sm_max);
  if (c != NULL)
    json_object_set_new(o, "sm_clock_mhz", c);
  if (isfinite(e->temp_max))
    json_object_set_new(o, "gpu_temp_c_max", json_real(e->temp_max));
  if (e->reasons_known) {
    char buf[256];
    tb_cost_reasons_text(e->reasons, buf, sizeof buf);
    json_t *a = json_array();
    for (char *tok = buf; *tok != '\0';) {
      char *sep = strstr(tok, ", ");
      size_t l = sep ? (size_t)(sep - tok) : strlen(tok);
      json_array_append_new(a, json_stringn(tok, l));
      tok += l + (sep ? 2 : 0);
    }
    json_object_set_new(o, "clock_event_reasons", a);
  }
}

/* checks.gpu_throttled, and the check's failure when it is true. */
static void
throttle_check(json_t *cell, const struct tb_cost_energy *e)
{
  json_t *ch = json_object_get(cell, "checks");
  if (!json_is_object(ch)) {
    ch = json_pack("{s:b, s:[]}", "ok", 1, "failed");
    json_object_set_new(cell, "checks", ch);
  }
  bool thr = (e->reasons & ~TB_COST_REASON_IDLE) != 0;
  json_object_set_new(ch, "gpu_throttled", json_boolean(thr));
  if (!thr)
    return;
  char buf[256], why[320];
  tb_cost_reasons_text(e->reasons, buf, sizeof buf);
  snprintf(why, sizeof why, "GPU clocks throttled in the window (%s)", buf);
  tb_checks_fail(ch, why);
}

void
tb_cost_cell(json_t *cell, const struct tb_cost_price *p, const struct tb_cost_energy *e)
{
  const char *st = tb_json_str(cell, "status"), *phase = tb_json_str(cell, "phase");
  if (st == NULL || strcmp(st, "valid") != 0 || phase == NULL || strcmp(phase, "prefill") == 0)
    return;
  bool priced = p != NULL && isfinite(p->per_hour);
  bool gpus = p != NULL && p->gpus > 0;
  if (!priced && !gpus && e == NULL)
    return;
  double window = tb_json_num(cell, "measured_s");
  if (!isfinite(window)) {
    window = tb_json_num(cell, "duration_s");
  }
  double out = tb_json_num(cell, "output_tokens");
  json_t *o = json_object();
  if (gpus || (e != NULL && e->gpus > 0)) {
    int64_t g = gpus ? p->gpus : e->gpus;
    json_object_set_new(o, "gpus", json_integer(g));
    if (p != NULL && p->gpu[0])
      json_object_set_new(o, "gpu", json_string(p->gpu));
    json_object_set_new(o, "tps_per_gpu", num(tb_json_num(cell, "total_tps") / (double)g));
    json_object_set_new(o, "tps_per_gpu_ci95",
                        scaled_ci(1.0 / (double)g, json_object_get(cell, "total_tps_ci95")));
  }
  if (priced)
    money(o, cell, p, isfinite(out) ? out : 0, isfinite(window) ? window : 0);
  if (e != NULL)
    energy(o, cell, e, isfinite(out) ? out : 0);
  json_object_set_new(cell, "efficiency", o);
  if (e != NULL && e->reasons_known)
    throttle_check(cell, e);
}

bool
tb_cost_apply_labels(json_t *doc, const json_t *labels)
{
  struct tb_cost_price p;
  if (json_object_get(doc, "cost") != NULL || !tb_cost_price_of_labels(labels, &p))
    return false;
  json_object_set_new(doc, "cost", tb_cost_header(&p, false));
  size_t i;
  json_t *c;
  json_array_foreach (json_object_get(doc, "cells"), i, c) {
    if (json_object_get(c, "efficiency") == NULL)
      tb_cost_cell(c, &p, NULL);
  }
  return true;
}

/* min, mean, max of an object member {mean, min, max} pooled over reps. */
static void
pool3(json_t *const *reps, size_t n, const char *key, double *mean, double *mn, double *mx)
{
  double sum = 0, lo = INFINITY, hi = -INFINITY;
  size_t k = 0;
  for (size_t i = 0; i < n; i++) {
    const json_t *o = json_object_get(json_object_get(reps[i], "efficiency"), key);
    if (!json_is_object(o))
      continue;
    sum += tb_json_num(o, "mean");
    lo = fmin(lo, tb_json_num(o, "min"));
    hi = fmax(hi, tb_json_num(o, "max"));
    k++;
  }
  *mean = k ? sum / (double)k : NAN;
  *mn = k ? lo : NAN;
  *mx = k ? hi : NAN;
}

void
tb_cost_combine(json_t *cell, json_t *const *reps, size_t n)
{
  const json_t *ef0 = json_object_get(reps[0], "efficiency");
  if (!json_is_object(ef0))
    return;
  struct tb_cost_price p;
  price_init(&p);
  p.per_hour = tb_json_num(ef0, "price_per_hour");
  set_currency(&p, tb_json_str(ef0, "currency"));
  int64_t g = 0;
  p.gpus = tb_json_int(ef0, "gpus", &g) ? g : 0;
  if (tb_json_str(ef0, "gpu") != NULL)
    snprintf(p.gpu, sizeof p.gpu, "%s", tb_json_str(ef0, "gpu"));
  struct tb_cost_energy e = { .ok = true, .source = NULL };
  bool throttled = false, any_energy = false;
  for (size_t i = 0; i < n; i++) {
    const json_t *ef = json_object_get(reps[i], "efficiency");
    double j = tb_json_num(ef, "joules");
    const char *src = tb_json_str(ef, "energy_source");
    if (!isfinite(j) || src == NULL)
      e.ok = false;
    else {
      any_energy = true;
      e.joules += j;
      e.source = e.source                             ? e.source
                 : strcmp(src, "energy_counter") == 0 ? "energy_counter"
                                                      : "power_gauge";
    }
    e.span_s += tb_json_num(reps[i], "measured_s");
    e.samples += (size_t)json_integer_value(json_object_get(ef, "telemetry_samples"));
    throttled |= json_is_true(json_object_get(json_object_get(reps[i], "checks"), "gpu_throttled"));
  }
  e.ok = e.ok && any_energy;
  e.avg_w = e.ok && e.span_s > 0 ? e.joules / e.span_s : NAN;
  e.gpus = (int)p.gpus;
  pool3(reps, n, "gpu_util_pct", &e.util_mean, &e.util_min, &e.util_max);
  pool3(reps, n, "sm_clock_mhz", &e.sm_mean, &e.sm_min, &e.sm_max);
  e.temp_max = NAN;
  for (size_t i = 0; i < n; i++)
    e.temp_max =
      fmax(e.temp_max, tb_json_num(json_object_get(reps[i], "efficiency"), "gpu_temp_c_max"));
  bool telemetry = any_energy || json_object_get(ef0, "telemetry_samples") != NULL;
  tb_cost_cell(cell, isfinite(p.per_hour) || p.gpus > 0 ? &p : NULL, telemetry ? &e : NULL);
  json_t *ch = json_object_get(cell, "checks");
  if (json_is_object(ch) &&
      json_object_get(json_object_get(reps[0], "checks"), "gpu_throttled") != NULL)
    json_object_set_new(ch, "gpu_throttled", json_boolean(throttled));
}

double
tb_cost_figure(const json_t *cell, const char *name)
{
  return tb_json_num(json_object_get(cell, "efficiency"), name);
}
