/*
 * tb_result: the result document.  See tb_result.h.
 *
 * Every builder here makes new JSON with json_*_new, so a caller owns
 * exactly what it is handed back; nothing here measures or reads a file.
 * The vocabulary of statuses lives here once: the engine writes from it,
 * import checks against it.
 */
#include "result/tb_result.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/tb_json.h"
#include "result/tb_checks.h"
#include "result/tb_cost.h"

static const char *const doc_statuses[] = { "complete",  "partial", "failed",
                                            "cancelled", "running", "queued" };
static const char *const cell_statuses[] = { "valid", "over_capacity", "skipped", "error" };

static bool
one_of(const char *s, const char *const *set, size_t n)
{
  for (size_t i = 0; s && i < n; i++)
    if (strcmp(s, set[i]) == 0)
      return true;
  return false;
}

bool
tb_result_doc_status_known(const char *s)
{
  return one_of(s, doc_statuses, TB_ARRAY_LEN(doc_statuses));
}

bool
tb_result_cell_status_known(const char *s)
{
  return one_of(s, cell_statuses, TB_ARRAY_LEN(cell_statuses));
}

bool
tb_result_over_capacity(int64_t conc, int64_t context, int64_t max_output, int64_t budget)
{
  return tb_over_capacity(conc, context, max_output, budget);
}

/* ------------------------------------------------------------------ cells */

json_t *
tb_result_cell_new(const char *phase, int64_t ctx, int64_t conc)
{
  char label[32];
  tb_format_tokens(ctx, label, sizeof label);
  json_t *c = json_object();
  json_object_set_new(c, "phase", json_string(phase));
  json_object_set_new(c, "context", json_integer(ctx));
  json_object_set_new(c, "context_label", json_string(label));
  json_object_set_new(c, "concurrency", json_integer(conc));
  return c;
}

void
tb_result_cell_set_status(json_t *cell, const char *status, const char *reason)
{
  json_object_set_new(cell, "status", json_string(status));
  if (reason != NULL)
    json_object_set_new(cell, "reason", json_string(reason));
}

int
tb_result_key_cmp(int phase_a, int64_t ctx_a, int64_t conc_a, int phase_b, int64_t ctx_b,
                  int64_t conc_b)
{
  if (phase_a != phase_b)
    return phase_a < phase_b ? -1 : 1;
  if (ctx_a != ctx_b)
    return ctx_a < ctx_b ? -1 : 1;
  if (conc_a != conc_b)
    return conc_a < conc_b ? -1 : 1;
  return 0;
}

const json_t *
tb_result_find_cell(const json_t *done, const char *phase, int64_t ctx, int64_t conc)
{
  size_t i;
  const json_t *c;
  json_array_foreach (done, i, c) {
    const char *p = json_string_value(json_object_get(c, "phase"));
    if (p != NULL && strcmp(p, phase) == 0 &&
        json_integer_value(json_object_get(c, "context")) == ctx &&
        json_integer_value(json_object_get(c, "concurrency")) == conc)
      return c;
  }
  return NULL;
}

static json_t *
num_or_null(double v)
{
  return isfinite(v) ? json_real(v) : json_null();
}

/* p50/p90/p99 of a sample of nanoseconds, in milliseconds. */
static json_t *
pct_ms(struct tb_stats *s)
{
  return json_pack("{s:o, s:o, s:o}", "p50", num_or_null(tb_stats_quantile(s, 0.5) / 1e6), "p90",
                   num_or_null(tb_stats_quantile(s, 0.9) / 1e6), "p99",
                   num_or_null(tb_stats_quantile(s, 0.99) / 1e6));
}

/* [lo, hi], or null when either is not finite. */
static json_t *
interval(double lo, double hi)
{
  if (!isfinite(lo) || !isfinite(hi))
    return json_null();
  return json_pack("[f, f]", lo, hi);
}

/* The order-statistic interval of a sample's median (ns), in ms. */
static json_t *
median_ci_ms(struct tb_stats *s)
{
  double lo, hi;
  if (!tb_stats_median_ci95(s, &lo, &hi))
    return json_null();
  return interval(lo / 1e6, hi / 1e6);
}

/* A sample of ns as ms, at most TB_RESULT_SAMPLES_MAX. */
static json_t *
sample_ms(const struct tb_stats *s)
{
  json_t *a = json_array();
  for (size_t i = 0; i < s->n && i < TB_RESULT_SAMPLES_MAX; i++)
    json_array_append_new(a, json_real((double)s->v[i] / 1e6));
  return a;
}

static json_t *
sample_d(const double *x, size_t n)
{
  json_t *a = json_array();
  for (size_t i = 0; i < n && i < TB_RESULT_SAMPLES_MAX; i++)
    json_array_append_new(a, num_or_null(x[i]));
  return a;
}

/* total_tps_se, its method and total_tps_ci95 of mean with se on df. */
static void
set_total_ci(json_t *cell, double mean, double se, unsigned df, const char *method)
{
  double lo, hi;
  bool ok = tb_stats_ci95(mean, se, df, &lo, &hi);
  if (ok && lo < 0)
    lo = 0; /* a rate */
  json_object_set_new(cell, "total_tps_se", ok ? json_real(se) : json_null());
  json_object_set_new(cell, "total_tps_se_method", json_string(method));
  json_object_set_new(cell, "total_tps_ci95", interval(lo, hi));
}

void
tb_result_cell_set_decode(json_t *cell, const struct tb_result_decode *d)
{
  double total = (double)d->output_tokens / d->measured_s;
  json_object_set_new(cell, "status", json_string("valid"));
  json_object_set_new(cell, "total_tps", json_real(total));
  unsigned df;
  double se = tb_stats_batch_se(d->slices, d->n_slices, &df);
  /* The count's resolution.  The window cuts every stream between two of
   * its chunks, so its count is off by less than one chunk per stream, at
   * most resolution_tokens together: a uniform phase error of variance at
   * most (resolution / 2)^2.  Batch means cannot see it when the slices
   * happen to fall in step with the server's steps (a steady simulator
   * gives 24, 24, 24, ... tokens and an SE of 0); a real server's noise
   * dwarfs it. */
  double res = (double)d->resolution_tokens / 2 / d->measured_s;
  if (isfinite(se))
    se = sqrt(se * se + res * res);
  set_total_ci(cell, total, se, df, "batch_means");
  json_object_set_new(cell, "per_request_tps", json_real(total / (double)d->conc));
  /* the samples in arrival order, before the percentiles sort them */
  json_t *samples = json_object();
  json_object_set_new(samples, "slice_s", num_or_null(d->slice_s));
  json_object_set_new(samples, "total_tps", sample_d(d->slices, d->n_slices));
  json_object_set_new(samples, "ttft_ms", sample_ms(d->ttft));
  json_object_set_new(samples, "tbt_ms", sample_ms(d->tbt));
  json_object_set_new(cell, "ttft_ms", pct_ms(d->ttft));
  json_object_set_new(cell, "ttft_p50_ci95", median_ci_ms(d->ttft));
  json_object_set_new(cell, "tbt_ms", pct_ms(d->tbt));
  json_object_set_new(cell, "tbt_p50_ci95", median_ci_ms(d->tbt));
  json_object_set_new(cell, "avg_active", json_real(d->avg_active));
  json_object_set_new(cell, "avg_active_source",
                      json_string(d->avg_active_server ? "server" : "client"));
  json_object_set_new(cell, "completed", json_integer(d->completed));
  json_object_set_new(cell, "requests_started", json_integer(d->started));
  json_object_set_new(cell, "output_tokens", json_integer(d->output_tokens));
  json_object_set_new(cell, "measured_s", json_real(d->measured_s));
  json_object_set_new(cell, "token_source", json_string(d->chunk_source ? "chunks" : "usage"));
  json_object_set_new(cell, "kernel_stamped", json_real(d->kernel_stamped));
  json_object_set_new(cell, "readiness", json_string(d->client_ready ? "client" : "server"));
  if (d->client_ready != NULL)
    json_object_set_new(cell, "readiness_reason", json_string(d->client_ready));
  json_object_set_new(cell, "samples", samples);
}

void
tb_result_cell_set_prompt_estimate(json_t *cell, const char *how)
{
  json_object_set_new(cell, "prompt_tokens_source", json_string("estimate"));
  json_object_set_new(cell, "prompt_tokens_estimate", json_string(how));
}

void
tb_result_cell_set_sched_cap(json_t *cell, int64_t cap, const char *reason)
{
  tb_result_cell_set_status(cell, "over_capacity", reason);
  json_object_set_new(cell, "scheduler_cap", json_integer(cap));
}

void
tb_result_cell_set_prefill(json_t *cell, int64_t prompt_tokens, bool from_usage, double ttft_s)
{
  json_object_set_new(cell, "status", json_string("valid"));
  json_object_set_new(cell, "prompt_tokens", json_integer(prompt_tokens));
  json_object_set_new(cell, "prompt_tokens_source",
                      json_string(from_usage ? "usage" : "tokenizer"));
  json_object_set_new(cell, "ttft_ms", json_real(ttft_s * 1e3));
  json_object_set_new(cell, "prompt_tps",
                      json_real(ttft_s > 0 ? (double)prompt_tokens / ttft_s : 0));
  json_object_set_new(cell, "completed", json_integer(1));
}

void
tb_result_cell_set_prefill_cached(json_t *cell, int64_t cached)
{
  int64_t tokens = json_integer_value(json_object_get(cell, "prompt_tokens"));
  double ttft_s = tb_json_num(cell, "ttft_ms") / 1e3;
  if (cached <= 0 || cached >= tokens)
    return;
  json_object_set_new(cell, "prompt_tokens_cached", json_integer(cached));
  json_object_set_new(cell, "prompt_tps",
                      json_real(ttft_s > 0 ? (double)(tokens - cached) / ttft_s : 0));
}

/* ---------------------------------------------------------------- repeats */

static double
fig(const json_t *cell, const char *k)
{
  const json_t *v = json_object_get(cell, k);
  return json_is_number(v) ? json_number_value(v) : NAN;
}

/* Appends the ms values of samples[k] of every repeat to s (as ns), at
 * most TB_RESULT_SAMPLES_MAX in all. */
static void
pool_ms(json_t *const *reps, size_t n, const char *k, struct tb_stats *s)
{
  for (size_t r = 0; r < n; r++) {
    const json_t *a = json_object_get(json_object_get(reps[r], "samples"), k);
    size_t i;
    const json_t *v;
    json_array_foreach (a, i, v) {
      if (s->n >= TB_RESULT_SAMPLES_MAX)
        return;
      if (json_is_number(v) && isfinite(json_number_value(v)))
        tb_stats_add(s, (int64_t)llround(json_number_value(v) * 1e6));
    }
  }
}

static json_t *
pool_slices(json_t *const *reps, size_t n)
{
  json_t *a = json_array();
  for (size_t r = 0; r < n; r++) {
    const json_t *sl = json_object_get(json_object_get(reps[r], "samples"), "total_tps");
    size_t i;
    const json_t *v;
    json_array_foreach (sl, i, v) {
      if (json_array_size(a) >= TB_RESULT_SAMPLES_MAX)
        return a;
      json_array_append(a, (json_t *)v);
    }
  }
  return a;
}

/* Each repeat's pass, seq and figure (with its interval when it has one). */
static json_t *
repeat_runs(json_t *const *reps, size_t n, const char *figure, const char *ci)
{
  json_t *a = json_array();
  for (size_t r = 0; r < n; r++) {
    json_t *o = json_object();
    const json_t *pass = json_object_get(reps[r], "repeat");
    const json_t *seq = json_object_get(reps[r], "seq");
    json_object_set_new(o, "repeat",
                        json_is_integer(pass) ? json_copy((json_t *)pass)
                                              : json_integer((json_int_t)r + 1));
    if (json_is_integer(seq))
      json_object_set_new(o, "seq", json_copy((json_t *)seq));
    json_object_set_new(o, figure, num_or_null(fig(reps[r], figure)));
    /* each repeat's server series stays with its run (tb_sampler) */
    const json_t *ss = json_object_get(reps[r], "server_series");
    if (json_is_object(ss))
      json_object_set_new(o, "server_series", json_deep_copy(ss));
    /* and a sharded repeat's shards (issue 24: each measured whole) */
    const json_t *sh = json_object_get(reps[r], "shards");
    if (json_is_object(sh))
      json_object_set_new(o, "shards", json_deep_copy(sh));
    const json_t *iv = ci ? json_object_get(reps[r], ci) : NULL;
    if (iv != NULL)
      json_object_set_new(o, ci, json_deep_copy(iv));
    json_array_append_new(a, o);
  }
  return a;
}

/* The SE of the mean of the repeats' tok/s and its degrees of freedom:
 * their spread ("repeats"), or what the windows themselves say when that
 * is more ("batch_means"), recomputed from each repeat's slices (its
 * degrees of freedom are not stored): two repeats can agree by chance,
 * and the spread of a few is a rough estimate.  Returns the method. */
static const char *
repeats_se(json_t *const *reps, size_t n, const double *tps, double *se, unsigned *df)
{
  *se = tb_stats_sd(tps, n) / sqrt((double)n);
  *df = (unsigned)(n - 1);
  double within = 0;
  unsigned wdf = 0;
  for (size_t r = 0; r < n; r++) {
    double se_r = fig(reps[r], "total_tps_se");
    const json_t *sl = json_object_get(json_object_get(reps[r], "samples"), "total_tps");
    size_t ns = json_array_size(sl);
    double *x = tb_xcalloc(ns ? ns : 1, sizeof *x);
    for (size_t i = 0; i < ns; i++)
      x[i] = json_number_value(json_array_get(sl, i));
    unsigned df_r;
    (void)tb_stats_batch_se(x, ns, &df_r);
    free(x);
    within += se_r * se_r;
    wdf += df_r;
  }
  within = sqrt(within) / (double)n;
  if (isfinite(within) && wdf > 0 && !(*se >= within)) {
    *se = within;
    *df = wdf;
    return "batch_means";
  }
  return "repeats";
}

/* The flags: the readiness of any repeat that had the client's alone, a
 * prompt size estimated. */
static void
combine_flags(json_t *cell, json_t *const *reps, size_t n)
{
  json_object_set_new(cell, "readiness", json_string("server"));
  for (size_t r = 0; r < n; r++) {
    const json_t *why = json_object_get(reps[r], "readiness_reason");
    if (json_is_string(why)) {
      json_object_set_new(cell, "readiness", json_string("client"));
      json_object_set_new(cell, "readiness_reason", json_copy((json_t *)why));
      break;
    }
  }
  const json_t *est = json_object_get(reps[0], "prompt_tokens_estimate");
  if (json_is_string(est))
    tb_result_cell_set_prompt_estimate(cell, json_string_value(est));
}

static json_t *
combine_decode(json_t *const *reps, size_t n)
{
  const json_t *r0 = reps[0];
  json_t *cell = tb_result_cell_new("decode", json_integer_value(json_object_get(r0, "context")),
                                    json_integer_value(json_object_get(r0, "concurrency")));
  double *tps = tb_xcalloc(n, sizeof *tps);
  double active = 0, kernel = 0, measured = 0;
  json_int_t completed = 0, started = 0, tokens = 0;
  bool chunks = false;
  for (size_t r = 0; r < n; r++) {
    const json_t *c = reps[r];
    tps[r] = fig(c, "total_tps");
    active += fig(c, "avg_active") / (double)n;
    kernel += fig(c, "kernel_stamped") / (double)n;
    measured += fig(c, "measured_s");
    completed += json_integer_value(json_object_get(c, "completed"));
    started += json_integer_value(json_object_get(c, "requests_started"));
    tokens += json_integer_value(json_object_get(c, "output_tokens"));
    const char *ts = json_string_value(json_object_get(c, "token_source"));
    chunks = chunks || (ts != NULL && strcmp(ts, "chunks") == 0);
  }
  double total = tb_stats_mean(tps, n);
  double se;
  unsigned df;
  const char *method = repeats_se(reps, n, tps, &se, &df);
  free(tps);
  struct tb_stats ttft = { 0 }, tbt = { 0 };
  pool_ms(reps, n, "ttft_ms", &ttft);
  pool_ms(reps, n, "tbt_ms", &tbt);
  json_int_t conc = json_integer_value(json_object_get(r0, "concurrency"));
  json_t *samples = json_object();
  const json_t *slice_s = json_object_get(json_object_get(r0, "samples"), "slice_s");
  if (json_is_number(slice_s))
    json_object_set_new(samples, "slice_s", json_copy((json_t *)slice_s));
  json_object_set_new(samples, "total_tps", pool_slices(reps, n));
  json_object_set_new(samples, "ttft_ms", sample_ms(&ttft));
  json_object_set_new(samples, "tbt_ms", sample_ms(&tbt));
  json_object_set_new(cell, "status", json_string("valid"));
  json_object_set_new(cell, "total_tps", num_or_null(total));
  set_total_ci(cell, total, se, df, method);
  json_object_set_new(cell, "per_request_tps", num_or_null(total / (double)(conc > 0 ? conc : 1)));
  json_object_set_new(cell, "ttft_ms", pct_ms(&ttft));
  json_object_set_new(cell, "ttft_p50_ci95", median_ci_ms(&ttft));
  json_object_set_new(cell, "tbt_ms", pct_ms(&tbt));
  json_object_set_new(cell, "tbt_p50_ci95", median_ci_ms(&tbt));
  json_object_set_new(cell, "avg_active", num_or_null(active));
  json_object_set_new(cell, "avg_active_source",
                      json_copy(json_object_get(r0, "avg_active_source")));
  json_object_set_new(cell, "completed", json_integer(completed));
  json_object_set_new(cell, "requests_started", json_integer(started));
  json_object_set_new(cell, "output_tokens", json_integer(tokens));
  json_object_set_new(cell, "measured_s", num_or_null(measured));
  json_object_set_new(cell, "token_source", json_string(chunks ? "chunks" : "usage"));
  json_object_set_new(cell, "kernel_stamped", num_or_null(kernel));
  combine_flags(cell, reps, n);
  json_object_set_new(cell, "repeats", json_integer((json_int_t)n));
  json_object_set_new(cell, "repeat_runs", repeat_runs(reps, n, "total_tps", "total_tps_ci95"));
  json_t *checks = tb_checks_combine(reps, n);
  if (checks != NULL)
    json_object_set_new(cell, "checks", checks);
  json_object_set_new(cell, "samples", samples);
  tb_stats_free(&ttft);
  tb_stats_free(&tbt);
  return cell;
}

/* A scout's cache reset and its cold-cell check over its repeats (issue
 * 25): "done" when every repeat's reset was, else the first other outcome
 * with its detail; the check combined (tb_checks_combine_prefix). */
static void
combine_cold(json_t *cell, json_t *const *reps, size_t n)
{
  const json_t *pick = NULL;
  for (size_t r = 0; r < n; r++) {
    const char *cr = tb_json_str(reps[r], "cache_reset");
    if (cr == NULL)
      return; /* kept, or not asked: none */
    if (pick == NULL || strcmp(cr, "done") != 0)
      pick = reps[r];
    if (strcmp(cr, "done") != 0)
      break;
  }
  if (pick == NULL)
    return;
  json_object_set_new(cell, "cache_reset", json_string(tb_json_str(pick, "cache_reset")));
  const char *detail = tb_json_str(pick, "cache_reset_detail");
  if (detail != NULL)
    json_object_set_new(cell, "cache_reset_detail", json_string(detail));
  json_t *checks = tb_checks_combine_prefix(reps, n);
  if (checks != NULL)
    json_object_set_new(cell, "checks", checks);
}

static json_t *
combine_prefill(json_t *const *reps, size_t n)
{
  const json_t *r0 = reps[0];
  json_t *cell =
    tb_result_cell_new("prefill", json_integer_value(json_object_get(r0, "context")), 1);
  double *tps = tb_xcalloc(n, sizeof *tps), *ttft = tb_xcalloc(n, sizeof *ttft);
  double mn = INFINITY, mx = -INFINITY;
  for (size_t r = 0; r < n; r++) {
    tps[r] = fig(reps[r], "prompt_tps");
    ttft[r] = fig(reps[r], "ttft_ms");
    mn = fmin(mn, tps[r]);
    mx = fmax(mx, tps[r]);
  }
  double mean = tb_stats_mean(tps, n);
  double se = tb_stats_sd(tps, n) / sqrt((double)n), lo, hi;
  bool ok = tb_stats_ci95(mean, se, (unsigned)(n - 1), &lo, &hi);
  if (ok && lo < 0)
    lo = 0; /* a rate */
  json_object_set_new(cell, "status", json_string("valid"));
  json_object_set_new(cell, "prompt_tokens", json_copy(json_object_get(r0, "prompt_tokens")));
  json_object_set_new(cell, "prompt_tokens_source",
                      json_copy(json_object_get(r0, "prompt_tokens_source")));
  const json_t *est = json_object_get(r0, "prompt_tokens_estimate");
  if (json_is_string(est))
    json_object_set_new(cell, "prompt_tokens_estimate", json_copy((json_t *)est));
  json_object_set_new(cell, "ttft_ms", num_or_null(tb_stats_mean(ttft, n)));
  json_object_set_new(cell, "prompt_tps", num_or_null(mean));
  json_object_set_new(cell, "prompt_tps_se", ok ? json_real(se) : json_null());
  json_object_set_new(cell, "prompt_tps_ci95", interval(lo, hi));
  json_object_set_new(cell, "prompt_tps_min", num_or_null(mn));
  json_object_set_new(cell, "prompt_tps_max", num_or_null(mx));
  json_object_set_new(cell, "completed", json_integer((json_int_t)n));
  json_object_set_new(cell, "repeats", json_integer((json_int_t)n));
  json_object_set_new(cell, "repeat_runs", repeat_runs(reps, n, "prompt_tps", NULL));
  combine_cold(cell, reps, n);
  json_object_set_new(
    cell, "samples",
    json_pack("{s:o, s:o}", "prompt_tps", sample_d(tps, n), "ttft_ms", sample_d(ttft, n)));
  free(tps);
  free(ttft);
  return cell;
}

json_t *
tb_result_combine(json_t *const *reps, size_t n)
{
  for (size_t r = 0; r < n; r++) {
    const char *st = json_string_value(json_object_get(reps[r], "status"));
    if (st == NULL || strcmp(st, "valid") != 0 || n == 1) {
      json_t *c = json_deep_copy(reps[r]);
      json_object_del(c, "repeat");
      json_object_del(c, "seq");
      const json_t *pass = json_object_get(reps[r], "repeat");
      if (json_is_integer(pass)) {
        const char *why = json_string_value(json_object_get(c, "reason"));
        char *reason = tb_xasprintf("repeat %" JSON_INTEGER_FORMAT ": %s", json_integer_value(pass),
                                    why ? why : "not valid");
        json_object_set_new(c, "reason", json_string(reason));
        free(reason);
      }
      return c;
    }
  }
  const char *ph = json_string_value(json_object_get(reps[0], "phase"));
  if (ph != NULL && strcmp(ph, "prefill") == 0)
    return combine_prefill(reps, n);
  json_t *c = combine_decode(reps, n);
  tb_cost_combine(c, reps, n); /* issue 26: the repeats' cost and energy */
  return c;
}

/* ----------------------------------------------------------------- header */

static json_t *
int_list(const int64_t *v, size_t n)
{
  json_t *a = json_array();
  for (size_t i = 0; i < n; i++)
    json_array_append_new(a, json_integer(v[i]));
  return a;
}

/* The members every document begins with. */
static void
set_preamble(json_t *doc, const char *run_id, int64_t started_us)
{
  char ts[40];
  tb_time_rfc3339(started_us, ts, sizeof ts);
  json_object_set_new(doc, "schema", json_string(TB_RESULT_SCHEMA));
  json_object_set_new(doc, "tokbench_version", json_string(TB_VERSION));
  json_object_set_new(doc, "run_id", run_id ? json_string(run_id) : json_null());
  json_object_set_new(doc, "started_at", json_string(ts));
}

json_t *
tb_result_header_new(const struct tb_result_header *hd)
{
  json_t *h = json_object();
  const json_t *ep = hd->endpoint;
  set_preamble(h, hd->run_id, hd->started_us);
  json_t *epo = json_object();
  json_object_set_new(epo, "url", json_string(hd->url));
  const char *name = json_string_value(json_object_get(ep, "name"));
  json_object_set_new(epo, "name", name ? json_string(name) : json_null());
  json_object_set_new(h, "endpoint", epo);
  json_t *eng = json_object();
  const json_t *hint = json_object_get(ep, "engine");
  if (json_is_object(hint))
    json_object_update(eng, (json_t *)hint);
  json_object_set_new(eng, "name", json_string(hd->engine));
  json_object_set_new(eng, "version",
                      hd->engine_version ? json_string(hd->engine_version) : json_null());
  json_object_set_new(h, "engine", eng);
  const json_t *hw = json_object_get(ep, "hardware");
  json_object_set_new(h, "hardware", json_is_object(hw) ? json_deep_copy(hw) : json_null());
  json_t *model = json_object();
  json_object_set_new(model, "served", json_string(hd->model));
  json_object_set_new(model, "max_model_len",
                      hd->max_model_len > 0 ? json_integer(hd->max_model_len) : json_null());
  json_object_set_new(h, "model", model);
  json_object_set_new(h, "launch_command",
                      hd->launch_command ? json_string(hd->launch_command) : json_null());
  json_t *cap = json_object();
  json_object_set_new(cap, "kv_budget_tokens",
                      hd->kv_budget > 0 ? json_integer(hd->kv_budget) : json_null());
  json_object_set_new(cap, "source", json_string(hd->kv_source));
  json_object_set_new(cap, "max_running_requests",
                      hd->max_running > 0 ? json_integer(hd->max_running) : json_null());
  json_object_set_new(cap, "metrics", json_boolean(hd->metrics));
  if (json_is_object(hd->provenance)) {
    json_t *pv = json_deep_copy(hd->provenance);
    if (hd->kv_budget > 0) /* the job's override */
      json_object_del(json_object_get(pv, "unknown"), "kv_budget_tokens");
    json_object_update(cap, pv);
    json_decref(pv);
  }
  json_object_set_new(h, "capacity", cap);
  struct tb_cost_price price;
  if (json_object_get(ep, "price_per_hour") != NULL || json_object_get(ep, "gpu") != NULL ||
      hd->telemetry) {
    (void)tb_cost_price_of(ep, &price);
    json_object_set_new(h, "cost", tb_cost_header(&price, hd->telemetry));
  }
  json_t *st = json_object();
  json_object_set_new(st, "contexts", int_list(hd->contexts, hd->n_contexts));
  json_object_set_new(st, "concurrency", int_list(hd->concurrency, hd->n_concurrency));
  json_object_set_new(st, "prefill_contexts", int_list(hd->prefill, hd->n_prefill));
  json_object_set_new(st, "duration_s", json_real(hd->duration_s));
  json_object_set_new(st, "max_output", json_integer(hd->max_output));
  json_object_set_new(st, "settle_s", json_real(hd->settle_s));
  json_object_set_new(st, "repeats", json_integer(hd->repeats > 1 ? hd->repeats : 1));
  json_object_set_new(st, "decode_test", json_string("fixed_duration"));
  json_object_set_new(st, "prefill_mode", json_string("decode_warmup"));
  json_object_set_new(h, "settings", st);
  return h;
}

/* ----------------------------------------------------------------- status */

const char *
tb_result_status_of_cells(const json_t *cells)
{
  size_t i;
  const json_t *c;
  json_array_foreach (cells, i, c) {
    const char *cs = json_string_value(json_object_get(c, "status"));
    if (cs != NULL && strcmp(cs, "error") == 0)
      return "partial";
  }
  return "complete";
}

json_t *
tb_result_finish(json_t *doc, const char *run_id, int64_t started_us, const char *status,
                 const char *error, json_t *cells)
{
  if (doc == NULL) {
    doc = json_object();
    set_preamble(doc, run_id, started_us);
  }
  char ts[40];
  tb_time_rfc3339(tb_time_real_us(), ts, sizeof ts);
  json_object_set_new(doc, "finished_at", json_string(ts));
  json_object_set_new(doc, "status", json_string(status));
  json_object_set_new(doc, "error", error ? json_string(error) : json_null());
  json_object_set_new(doc, "cells", cells);
  return doc;
}

/* ------------------------------------------------------------------ check */

/* Figures that must be numbers when present (null allowed). */
static const char *const num_members[] = { "total_tps",      "per_request_tps", "prompt_tps",
                                           "avg_active",     "measured_s",      "total_tps_se",
                                           "prompt_tps_se",  "prompt_tps_min",  "prompt_tps_max",
                                           "rate_rps",       "achieved_rps",    "goodput_rps",
                                           "offered_rps",    "attainment",      "error_share",
                                           "interarrival_cv" };
static const char *const int_members[] = { "prompt_tokens",    "completed", "output_tokens",
                                           "requests_started", "repeats",   "requests",
                                           "errors",           "good" };
/* 95% intervals: [lo, hi] or null when present. */
static const char *const ci_members[] = { "total_tps_ci95", "ttft_p50_ci95", "tbt_p50_ci95",
                                          "prompt_tps_ci95" };

/* samples: an object of number lists (at most TB_RESULT_SAMPLES_MAX) and
 * slice_s. */
static bool
check_samples(const json_t *v, size_t i, char **err)
{
  if (v == NULL || json_is_null(v))
    return true;
  if (!json_is_object(v)) {
    *err = tb_xasprintf("cells[%zu].samples must be an object", i);
    return false;
  }
  const char *k;
  const json_t *a;
  json_object_foreach ((json_t *)v, k, a) {
    if (strcmp(k, "slice_s") == 0 && (json_is_number(a) || json_is_null(a)))
      continue;
    bool ok = json_is_array(a) && json_array_size(a) <= TB_RESULT_SAMPLES_MAX;
    size_t j;
    const json_t *x;
    json_array_foreach (a, j, x) {
      if (!json_is_number(x) && !json_is_null(x))
        ok = false;
    }
    if (!ok) {
      *err = tb_xasprintf("cells[%zu].samples.%.40s must be a list of at most %u numbers", i, k,
                          TB_RESULT_SAMPLES_MAX);
      return false;
    }
  }
  return true;
}

static bool
check_cell(const json_t *c, size_t i, char **err)
{
  if (!json_is_object(c)) {
    *err = tb_xasprintf("cells[%zu] is not an object", i);
    return false;
  }
  const char *ph = tb_json_str(c, "phase");
  if (ph == NULL ||
      (strcmp(ph, "prefill") != 0 && strcmp(ph, "decode") != 0 && strcmp(ph, "rate") != 0)) {
    *err = tb_xasprintf("cells[%zu].phase must be \"prefill\", \"decode\" or \"rate\"", i);
    return false;
  }
  const json_t *ctx = json_object_get(c, "context");
  if (!json_is_integer(ctx) || json_integer_value(ctx) < 0 ||
      json_integer_value(ctx) > TB_RESULT_AXIS_MAX) {
    *err = tb_xasprintf("cells[%zu].context must be an integer >= 0", i);
    return false;
  }
  const json_t *conc = json_object_get(c, "concurrency");
  if (conc == NULL ? strcmp(ph, "prefill") != 0
                   : (!json_is_integer(conc) || json_integer_value(conc) < 1 ||
                      json_integer_value(conc) > TB_RESULT_AXIS_MAX)) {
    *err = tb_xasprintf("cells[%zu].concurrency must be an integer >= 1", i);
    return false;
  }
  if (!tb_result_cell_status_known(tb_json_str(c, "status"))) {
    *err = tb_xasprintf("cells[%zu].status must be valid, over_capacity, skipped or error", i);
    return false;
  }
  for (size_t k = 0; k < TB_ARRAY_LEN(num_members); k++) {
    const json_t *v = json_object_get(c, num_members[k]);
    if (v != NULL && !json_is_null(v) && !json_is_number(v)) {
      *err = tb_xasprintf("cells[%zu].%s must be a number", i, num_members[k]);
      return false;
    }
  }
  for (size_t k = 0; k < TB_ARRAY_LEN(int_members); k++) {
    const json_t *v = json_object_get(c, int_members[k]);
    if (v != NULL && !json_is_null(v) && !json_is_integer(v)) {
      *err = tb_xasprintf("cells[%zu].%s must be an integer", i, int_members[k]);
      return false;
    }
  }
  for (size_t k = 0; k < TB_ARRAY_LEN(ci_members); k++) {
    const json_t *v = json_object_get(c, ci_members[k]);
    if (v == NULL || json_is_null(v))
      continue;
    if (!json_is_array(v) || json_array_size(v) != 2 || !json_is_number(json_array_get(v, 0)) ||
        !json_is_number(json_array_get(v, 1))) {
      *err = tb_xasprintf("cells[%zu].%s must be [lo, hi] or null", i, ci_members[k]);
      return false;
    }
  }
  if (!check_samples(json_object_get(c, "samples"), i, err))
    return false;
  static const char *const pct[] = { "ttft_ms", "tbt_ms", "tpot_ms", "e2e_ms", "schedule_lag_ms" };
  for (size_t k = 0; k < TB_ARRAY_LEN(pct); k++) {
    const json_t *v = json_object_get(c, pct[k]);
    if (v == NULL || json_is_null(v) || json_is_number(v))
      continue;
    if (!json_is_object(v)) {
      *err = tb_xasprintf("cells[%zu].%s must be a number or {p50, p90, p99}", i, pct[k]);
      return false;
    }
    static const char *const p[] = { "p50", "p90", "p99", "max" };
    for (size_t j = 0; j < TB_ARRAY_LEN(p); j++) {
      const json_t *x = json_object_get(v, p[j]);
      if (x != NULL && !json_is_null(x) && !json_is_number(x)) {
        *err = tb_xasprintf("cells[%zu].%s.%s must be a number", i, pct[k], p[j]);
        return false;
      }
    }
  }
  return true;
}

bool
tb_result_check(const json_t *doc, size_t max_cells, char **err)
{
  const char *schema = tb_json_str(doc, "schema");
  if (schema == NULL || strcmp(schema, TB_RESULT_SCHEMA) != 0) {
    *err = tb_xasprintf("unsupported schema (want %s)", TB_RESULT_SCHEMA);
    return false;
  }
  const json_t *cells = json_object_get(doc, "cells");
  if (!json_is_array(cells)) {
    *err = tb_xstrdup("cells must be an array");
    return false;
  }
  if (json_array_size(cells) > max_cells) {
    *err = tb_xasprintf("too many cells (at most %zu)", max_cells);
    return false;
  }
  const json_t *st = json_object_get(doc, "status");
  if (st != NULL && !tb_result_doc_status_known(json_string_value(st))) {
    *err = tb_xstrdup("status must be complete, partial, failed, cancelled or running");
    return false;
  }
  static const char *const objs[] = { "endpoint", "engine",   "hardware",
                                      "model",    "capacity", "settings" };
  for (size_t k = 0; k < TB_ARRAY_LEN(objs); k++) {
    const json_t *v = json_object_get(doc, objs[k]);
    if (v != NULL && !json_is_null(v) && !json_is_object(v)) {
      *err = tb_xasprintf("%s must be an object", objs[k]);
      return false;
    }
  }
  size_t i;
  const json_t *c;
  json_array_foreach (cells, i, c) {
    if (!check_cell(c, i, err))
      return false;
  }
  return true;
}
