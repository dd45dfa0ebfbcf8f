/*
 * sim_profile: profile loading and interpolation.  Tables are small (a few
 * dozen points), so lookups are linear scans: they run once per decode step,
 * not per token.
 */
#include "sim_profile.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

static bool
fail(char *err, size_t errlen, const char *msg)
{
  snprintf(err, errlen, "%s", msg);
  return false;
}

static bool
get_text(const json_t *o, const char *key, char *out, bool required)
{
  const json_t *v = json_object_get(o, key);
  if (!json_is_string(v)) {
    out[0] = '\0';
    return !required;
  }
  snprintf(out, SIM_PROFILE_TEXT_CAP, "%s", json_string_value(v));
  return true;
}

static bool
get_int(const json_t *o, const char *key, int64_t *out, int64_t min)
{
  const json_t *v = json_object_get(o, key);
  if (!json_is_integer(v) || json_integer_value(v) < min)
    return false;
  *out = json_integer_value(v);
  return true;
}

/* Reads an increasing array of positive numbers into out; returns count or -1. */
static int
get_axis(const json_t *a, double *out)
{
  if (!json_is_array(a) || json_array_size(a) == 0 || json_array_size(a) > SIM_PROFILE_MAX_POINTS)
    return -1;
  size_t i;
  const json_t *v;
  json_array_foreach (a, i, v) {
    if (!json_is_number(v))
      return -1;
    out[i] = json_number_value(v);
    if (!(out[i] > 0) || (i > 0 && out[i] <= out[i - 1]))
      return -1;
  }
  return (int)json_array_size(a);
}

static bool
get_grid(const json_t *o, const char *vkey, struct sim_grid *g)
{
  g->nctx = get_axis(json_object_get(o, "contexts"), g->ctx);
  g->nbatch = get_axis(json_object_get(o, "batches"), g->batch);
  const json_t *rows = json_object_get(o, vkey);
  if (g->nctx < 0 || g->nbatch < 0 || !json_is_array(rows) ||
      json_array_size(rows) != (size_t)g->nctx)
    return false;
  for (int i = 0; i < g->nctx; i++) {
    const json_t *row = json_array_get(rows, (size_t)i);
    if (!json_is_array(row) || json_array_size(row) != (size_t)g->nbatch)
      return false;
    for (int j = 0; j < g->nbatch; j++) {
      const json_t *v = json_array_get(row, (size_t)j);
      if (!json_is_number(v) || !(json_number_value(v) > 0))
        return false;
      g->v[i][j] = json_number_value(v);
    }
  }
  return true;
}

/* The power model (sim_power.h): defaults for a profile without one. */
static bool
power_of(struct sim_profile *p, const json_t *eng, const json_t *pw, char *err, size_t errlen)
{
  json_int_t g = json_integer_value(json_object_get(eng, "gpu_count"));
  p->gpus = g >= 1 && g <= 64 ? (int)g : 1;
  p->idle_w = 100;
  p->j_decode = 0.5;
  p->j_prefill = 0.01;
  p->sm_mhz = 1980;
  if (pw == NULL)
    return true;
  const char *k[] = { "idle_w", "j_per_decode_token", "j_per_prefill_token", "sm_clock_mhz" };
  double *d[] = { &p->idle_w, &p->j_decode, &p->j_prefill, &p->sm_mhz };
  for (size_t i = 0; i < TB_ARRAY_LEN(k); i++) {
    const json_t *v = json_object_get(pw, k[i]);
    if (v == NULL)
      continue;
    if (!json_is_number(v) || json_number_value(v) < 0 || json_number_value(v) > 1e6) {
      snprintf(err, errlen, "profile: power.%s must be a number from 0 to 1e6", k[i]);
      return false;
    }
    *d[i] = json_number_value(v);
  }
  return true;
}

static bool
from_json(struct sim_profile *p, json_t *root, char *err, size_t errlen)
{
  if (!json_is_object(root))
    return fail(err, errlen, "profile: not a JSON object");
  if (!get_text(root, "name", p->name, true) || !get_text(root, "model", p->model, true))
    return fail(err, errlen, "profile: name and model are required strings");
  get_text(root, "model_root", p->model_root, false);
  if (p->model_root[0] == '\0')
    snprintf(p->model_root, sizeof(p->model_root), "%s", p->model);
  if (!get_int(root, "max_model_len", &p->max_model_len, 16) ||
      !get_int(root, "kv_budget_tokens", &p->kv_budget, 16) ||
      !get_int(root, "max_running_requests", &p->max_running, 1))
    return fail(err, errlen,
                "profile: max_model_len, kv_budget_tokens, max_running_requests required");
  if (!get_int(root, "block_size", &p->block_size, 1))
    p->block_size = 16;
  json_t *eng = json_object_get(root, "engine");
  if (!json_is_object(eng))
    return fail(err, errlen, "profile: engine object required");
  p->engine = json_incref(eng);
  get_text(eng, "name", p->engine_name, false);
  get_text(eng, "version", p->engine_version, false);
  get_text(eng, "hardware", p->hardware, false);
  const json_t *pre = json_object_get(root, "prefill");
  p->nprefill = get_axis(json_object_get(pre, "contexts"), p->prefill_ctx);
  const json_t *tps = json_object_get(pre, "tokens_per_s");
  if (p->nprefill < 0 || !json_is_array(tps) || json_array_size(tps) != (size_t)p->nprefill)
    return fail(err, errlen, "profile: prefill.contexts / tokens_per_s");
  for (int i = 0; i < p->nprefill; i++) {
    const json_t *v = json_array_get(tps, (size_t)i);
    if (!json_is_number(v) || !(json_number_value(v) > 0))
      return fail(err, errlen, "profile: prefill.tokens_per_s must be positive");
    p->prefill_tps[i] = json_number_value(v);
  }
  if (!get_grid(json_object_get(root, "decode"), "step_ms", &p->decode))
    return fail(err, errlen, "profile: decode {contexts, batches, step_ms}");
  if (!get_grid(json_object_get(root, "cached_ttft"), "ms", &p->cached))
    return fail(err, errlen, "profile: cached_ttft {contexts, batches, ms}");
  return power_of(p, eng, json_object_get(root, "power"), err, errlen);
}

/* Fills p from root (consumed); on failure frees what was filled. */
static bool
from_root(struct sim_profile *p, json_t *root, char *err, size_t errlen)
{
  bool ok = from_json(p, root, err, errlen);
  json_decref(root);
  if (!ok)
    sim_profile_free(p);
  return ok;
}

bool
sim_profile_parse(struct sim_profile *p, const char *text, char *err, size_t errlen)
{
  memset(p, 0, sizeof(*p));
  json_error_t je;
  json_t *root = json_loads(text, 0, &je);
  if (root == NULL) {
    snprintf(err, errlen, "profile: %s (line %d)", je.text, je.line);
    return false;
  }
  return from_root(p, root, err, errlen);
}

bool
sim_profile_load(struct sim_profile *p, const char *path, char *err, size_t errlen)
{
  memset(p, 0, sizeof(*p));
  json_error_t je;
  json_t *root = json_load_file(path, 0, &je);
  if (root == NULL) {
    snprintf(err, errlen, "profile %s: %s (line %d)", path, je.text, je.line);
    return false;
  }
  return from_root(p, root, err, errlen);
}

void
sim_profile_free(struct sim_profile *p)
{
  json_decref(p->engine);
  p->engine = NULL;
}

/* Index i and weight w such that x ~ axis[i] * (1 - w) + axis[i + 1] * w,
 * clamped to the ends. */
static void
locate(const double *axis, int n, double x, int *i, double *w)
{
  if (n == 1 || x <= axis[0]) {
    *i = 0;
    *w = 0;
    return;
  }
  if (x >= axis[n - 1]) {
    *i = n - 2;
    *w = 1;
    return;
  }
  int k = 0;
  while (k + 1 < n && axis[k + 1] < x)
    k++;
  *i = k;
  *w = (x - axis[k]) / (axis[k + 1] - axis[k]);
}

static double
grid_at(const struct sim_grid *g, double batch, double ctx)
{
  int ci, bi;
  double cw, bw;
  locate(g->ctx, g->nctx, ctx, &ci, &cw);
  locate(g->batch, g->nbatch, batch, &bi, &bw);
  int ci2 = g->nctx > 1 ? ci + 1 : ci, bi2 = g->nbatch > 1 ? bi + 1 : bi;
  double a = g->v[ci][bi] * (1 - bw) + g->v[ci][bi2] * bw;
  double b = g->v[ci2][bi] * (1 - bw) + g->v[ci2][bi2] * bw;
  return a * (1 - cw) + b * cw;
}

double
sim_profile_step_ms(const struct sim_profile *p, double batch, double ctx)
{
  return grid_at(&p->decode, batch < 1 ? 1 : batch, ctx);
}

double
sim_profile_cached_ms(const struct sim_profile *p, double batch, double ctx)
{
  return grid_at(&p->cached, batch < 1 ? 1 : batch, ctx);
}

double
sim_profile_prefill_ms(const struct sim_profile *p, double ctx)
{
  int i;
  double w;
  locate(p->prefill_ctx, p->nprefill, ctx, &i, &w);
  int i2 = p->nprefill > 1 ? i + 1 : i;
  double tps = p->prefill_tps[i] * (1 - w) + p->prefill_tps[i2] * w;
  return ctx * 1000.0 / tps;
}

double
sim_profile_prefix_ms(const struct sim_profile *p, double batch, double ctx, double cached)
{
  double ms = sim_profile_prefill_ms(p, ctx);
  if (cached <= 0)
    return ms;
  ms -= sim_profile_prefill_ms(p, cached < ctx ? cached : ctx);
  double hit = sim_profile_cached_ms(p, batch, ctx);
  return ms < hit ? hit : ms;
}

json_t *
sim_profile_expected(const struct sim_profile *p, int64_t ctx, int64_t conc, int64_t max_tokens,
                     double scale)
{
  double step = sim_profile_step_ms(p, (double)conc, (double)ctx) / scale;
  double prefill = sim_profile_prefill_ms(p, (double)ctx) / scale;
  double cached = sim_profile_cached_ms(p, (double)conc, (double)ctx) / scale;
  bool len_ok = ctx + max_tokens <= p->max_model_len;
  bool kv_ok = conc * (ctx + max_tokens) <= p->kv_budget;
  bool run_ok = conc <= p->max_running;
  const char *why = !len_ok   ? "context + max_tokens > max_model_len"
                    : !kv_ok  ? "concurrency x (context + max_tokens) > kv_budget_tokens"
                    : !run_ok ? "concurrency > max_running_requests"
                              : NULL;
  json_t *o =
    json_pack("{s:s, s:I, s:I, s:I, s:f, s:f, s:f, s:f, s:f, s:f, s:f, s:b, s:b, "
              "s:b, s:b, s:I, s:I, s:I}",
              "profile", p->name, "context", (json_int_t)ctx, "concurrency", (json_int_t)conc,
              "max_tokens", (json_int_t)max_tokens, "time_scale", scale, "tbt_ms", step, "step_ms",
              step, "total_tok_s", (double)conc * 1000.0 / step, "per_request_tok_s", 1000.0 / step,
              "prefill_ttft_ms", prefill, "prefill_tok_s", (double)ctx * 1000.0 / prefill, "fits",
              len_ok && kv_ok && run_ok, "fits_kv", kv_ok, "fits_running", run_ok, "fits_model_len",
              len_ok, "kv_budget_tokens", (json_int_t)p->kv_budget, "max_running_requests",
              (json_int_t)p->max_running, "max_model_len", (json_int_t)p->max_model_len);
  json_object_set_new(o, "cached_ttft_ms", json_real(cached));
  json_object_set_new(o, "reason", why ? json_string(why) : json_null());
  return o;
}
