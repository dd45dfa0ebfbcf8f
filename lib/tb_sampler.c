/*
 * tb_sampler: the server's view of a cell and the cell's self-checks.  See
 * tb_sampler.h.
 *
 * Dialects.  One table: for each engine kind and figure, the metric names
 * in order of preference (the first present wins), and how several series
 * of one name combine (summed for request gauges and counters, as
 * tb_discover_parse_load sums running/waiting over vLLM's engines and
 * SGLang's dp ranks; the largest for usage fractions and rate gauges, since
 * a sum of fractions means nothing).  The text is walked once.
 *
 * Sources of the names (checked with the search tool):
 *  - vLLM: docs/design/metrics.md of vllm-project/vllm (V0 list:
 *    num_requests_running/waiting, gpu_cache_usage_perc, gpu_prefix_cache_
 *    hit_rate gauge, num_preemptions_total, generation_tokens_total; V1:
 *    kv_cache_usage_perc, prefix_cache_queries_total/prefix_cache_hits_total
 *    counters, in tokens); tests/fixtures/servers/vllm-0.7 … vllm-2026.
 *  - SGLang: docs/references/production_metrics.md of sgl-project/sglang
 *    (num_running_reqs, num_queue_reqs, token_usage, cache_hit_rate gauge,
 *    generation_tokens_total counter); python/sglang/srt/metrics/
 *    collector.py (num_retracted_requests_total: the counter of
 *    retractions, SGLang's preemptions; num_retracted_reqs is a gauge of
 *    the last batch and is not used); ≤ 0.3 names from
 *    tests/fixtures/servers/sglang-0.3.
 *  - llama.cpp: tools/server/README.md of ggml-org/llama.cpp
 *    (requests_processing, requests_deferred, kv_cache_usage_ratio — absent
 *    from recent builds — tokens_predicted_total); no preemption or
 *    prefix-cache counters.
 *  - TGI: running and waiting only (tgi_batch_current_size, tgi_queue_size).
 */
#include "tb_sampler.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tb_json.h"
#include "tb_prom.h"

enum fig { F_RUN, F_WAIT, F_KV, F_PRE, F_HITS, F_QUERIES, F_RATE, F_GEN, F_N };

#define NAMES_MAX 2 /* candidate names of a figure */

struct dialect_row {
  enum tb_engine_kind kind;
  enum fig fig;
  const char *names[NAMES_MAX];
};

static const struct dialect_row dialect[] = {
  { TB_KIND_VLLM, F_RUN, { "vllm:num_requests_running", NULL } },
  { TB_KIND_VLLM, F_WAIT, { "vllm:num_requests_waiting", NULL } },
  /* 0.10 has both (gpu_ deprecated); 0.11+ only kv_; ≤ 0.9 only gpu_ */
  { TB_KIND_VLLM, F_KV, { "vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc" } },
  { TB_KIND_VLLM, F_PRE, { "vllm:num_preemptions_total", NULL } },
  { TB_KIND_VLLM, F_HITS, { "vllm:prefix_cache_hits_total", NULL } },
  { TB_KIND_VLLM, F_QUERIES, { "vllm:prefix_cache_queries_total", NULL } },
  { TB_KIND_VLLM, F_RATE, { "vllm:gpu_prefix_cache_hit_rate", NULL } }, /* V0 */
  { TB_KIND_VLLM, F_GEN, { "vllm:generation_tokens_total", NULL } },
  { TB_KIND_SGLANG, F_RUN, { "sglang:num_running_reqs", "sglang:num_requests_running" } },
  { TB_KIND_SGLANG, F_WAIT, { "sglang:num_queue_reqs", "sglang:num_requests_waiting" } },
  { TB_KIND_SGLANG, F_KV, { "sglang:token_usage", NULL } },
  { TB_KIND_SGLANG, F_PRE, { "sglang:num_retracted_requests_total", NULL } },
  { TB_KIND_SGLANG, F_RATE, { "sglang:cache_hit_rate", NULL } },
  { TB_KIND_SGLANG, F_GEN, { "sglang:generation_tokens_total", NULL } },
  { TB_KIND_LLAMACPP, F_RUN, { "llamacpp:requests_processing", NULL } },
  { TB_KIND_LLAMACPP, F_WAIT, { "llamacpp:requests_deferred", NULL } },
  { TB_KIND_LLAMACPP, F_KV, { "llamacpp:kv_cache_usage_ratio", NULL } },
  { TB_KIND_LLAMACPP, F_GEN, { "llamacpp:tokens_predicted_total", NULL } },
  { TB_KIND_TGI, F_RUN, { "tgi_batch_current_size", NULL } },
  { TB_KIND_TGI, F_WAIT, { "tgi_queue_size", NULL } },
};

/* Fractions and rates: the largest series; the rest: summed. */
static bool
fig_is_max(enum fig f)
{
  return f == F_KV || f == F_RATE;
}

struct acc {
  enum tb_engine_kind kind;
  double v[F_N][NAMES_MAX];
  bool seen[F_N][NAMES_MAX];
};

static bool
acc_sample(void *cls, const char *name, size_t name_len, const char *labels,
           size_t labels_len, double value)
{
  (void)labels;
  (void)labels_len;
  struct acc *a = cls;
  if (!isfinite(value))
    return true;
  for (size_t i = 0; i < TB_ARRAY_LEN(dialect); i++) {
    const struct dialect_row *d = &dialect[i];
    if (d->kind != a->kind)
      continue;
    for (size_t k = 0; k < NAMES_MAX && d->names[k] != NULL; k++) {
      if (strlen(d->names[k]) != name_len || memcmp(d->names[k], name, name_len) != 0)
        continue;
      double *v = &a->v[d->fig][k];
      if (!a->seen[d->fig][k])
        *v = value;
      else if (fig_is_max(d->fig))
        *v = value > *v ? value : *v;
      else
        *v += value;
      a->seen[d->fig][k] = true;
      return true;
    }
  }
  return true;
}

bool
tb_sampler_parse(enum tb_engine_kind kind, const char *text, size_t len,
                 struct tb_sampler_point *p)
{
  struct acc a;
  memset(&a, 0, sizeof a);
  a.kind = kind;
  double out[F_N];
  for (int f = 0; f < F_N; f++)
    out[f] = NAN;
  if (text != NULL && tb_prom_parse(text, len, acc_sample, &a) >= 0)
    for (int f = 0; f < F_N; f++)
      for (int k = 0; k < NAMES_MAX; k++)
        if (a.seen[f][k]) {
          out[f] = a.v[f][k];
          break;
        }
  p->running = out[F_RUN];
  p->waiting = isnan(out[F_WAIT]) && !isnan(out[F_RUN]) ? 0 : out[F_WAIT];
  p->kv_frac = out[F_KV];
  p->preemptions = out[F_PRE];
  p->prefix_hits = out[F_HITS];
  p->prefix_queries = out[F_QUERIES];
  p->prefix_rate = out[F_RATE];
  p->gen_tokens = out[F_GEN];
  return !isnan(p->running);
}

/* ------------------------------------------------------------ series */

void
tb_sampler_begin(struct tb_sampler *s, int64_t t0)
{
  tb_sampler_free(s);
  s->t0 = t0;
  s->next = t0;
  s->on = true;
}

bool
tb_sampler_due(const struct tb_sampler *s, int64_t now)
{
  return s->on && now >= s->next && !s->truncated;
}

void
tb_sampler_add(struct tb_sampler *s, int64_t now, const struct tb_sampler_point *p)
{
  if (!s->on)
    return;
  if (s->n >= TB_SAMPLER_MAX_POINTS) {
    s->truncated = true;
    return;
  }
  if (s->n == s->cap) {
    /* 64 points (a minute) first, then doubling up to the cap: small
     * allocations from the heap, a handful a cell */
    size_t cap = s->cap == 0 ? 64 : s->cap * 2;
    if (cap > TB_SAMPLER_MAX_POINTS)
      cap = TB_SAMPLER_MAX_POINTS;
    double **arrs[] = { &s->t, &s->running, &s->waiting, &s->kv, &s->preempt,
                        &s->hits, &s->queries, &s->rate, &s->gen };
    for (size_t i = 0; i < TB_ARRAY_LEN(arrs); i++)
      *arrs[i] = tb_xrealloc(*arrs[i], cap * sizeof(double));
    s->cap = cap;
  }
  size_t i = s->n++;
  s->t[i] = (double)(now - s->t0) / 1e9;
  s->running[i] = p->running;
  s->waiting[i] = p->waiting;
  s->kv[i] = p->kv_frac;
  s->preempt[i] = p->preemptions;
  s->hits[i] = p->prefix_hits;
  s->queries[i] = p->prefix_queries;
  s->rate[i] = p->prefix_rate;
  s->gen[i] = p->gen_tokens;
  /* the next slot of the 1 s grid after now: a late read does not shift
   * the grid, a slow server does not make bursts */
  while (s->next <= now)
    s->next += TB_SAMPLER_INTERVAL_NS;
}

void
tb_sampler_feed(struct tb_sampler *s, enum tb_engine_kind kind, int64_t now,
                const char *body, size_t len)
{
  if (!tb_sampler_due(s, now))
    return;
  struct tb_sampler_point p;
  if (len > TB_SAMPLER_BODY_MAX || !tb_sampler_parse(kind, body, len, &p)) {
    s->skipped++;
    while (s->next <= now)
      s->next += TB_SAMPLER_INTERVAL_NS;
    return;
  }
  tb_sampler_add(s, now, &p);
}

void
tb_sampler_free(struct tb_sampler *s)
{
  double *arrs[] = { s->t, s->running, s->waiting, s->kv, s->preempt,
                     s->hits, s->queries, s->rate, s->gen };
  for (size_t i = 0; i < TB_ARRAY_LEN(arrs); i++)
    free(arrs[i]);
  memset(s, 0, sizeof *s);
}

/* ------------------------------------------------------------- JSON */

static json_t *
num_or_null(double v)
{
  return isfinite(v) ? json_real(round(v * 1000.0) / 1000.0) : json_null();
}

static bool
any_finite(const double *v, size_t n)
{
  for (size_t i = 0; i < n; i++)
    if (isfinite(v[i]))
      return true;
  return false;
}

/* v scaled by k, or left out when the engine never said. */
static void
put_array(json_t *o, const char *key, const double *v, size_t n, double k)
{
  if (!any_finite(v, n))
    return;
  json_t *a = json_array();
  for (size_t i = 0; i < n; i++)
    json_array_append_new(a, num_or_null(v[i] * k));
  json_object_set_new(o, key, a);
}

static void
put_num(json_t *o, const char *key, double v)
{
  if (isfinite(v))
    json_object_set_new(o, key, json_real(round(v * 1000.0) / 1000.0));
}

/* Counter delta between the first and the last finite sample; NAN when
 * there are not two, or the counter went back (a restarted server). */
static double
counter_delta(const double *t, const double *v, size_t n, double *dt)
{
  size_t a = n, b = n;
  for (size_t i = 0; i < n; i++)
    if (isfinite(v[i])) {
      if (a == n)
        a = i;
      b = i;
    }
  if (a == n || a == b || v[b] < v[a])
    return NAN;
  if (dt != NULL)
    *dt = t[b] - t[a];
  return v[b] - v[a];
}

json_t *
tb_sampler_json(const struct tb_sampler *s, double client_tps)
{
  if (s->n == 0)
    return NULL;
  size_t n = s->n;
  json_t *o = json_object();
  json_object_set_new(o, "interval_s", json_real((double)TB_SAMPLER_INTERVAL_NS / 1e9));
  put_array(o, "t_s", s->t, n, 1.0);
  put_array(o, "running", s->running, n, 1.0);
  put_array(o, "waiting", s->waiting, n, 1.0);
  put_array(o, "kv_pct", s->kv, n, 100.0);
  json_t *sum = json_object();
  json_object_set_new(sum, "samples", json_integer((json_int_t)n));
  double peak = NAN;
  for (size_t i = 0; i < n; i++)
    if (isfinite(s->kv[i]) && !(s->kv[i] <= peak))
      peak = s->kv[i];
  put_num(sum, "peak_kv_pct", peak * 100.0);
  /* preemptions: counted from the first sample, so the series starts at 0 */
  if (any_finite(s->preempt, n)) {
    double first = NAN;
    json_t *a = json_array();
    for (size_t i = 0; i < n; i++) {
      if (isnan(first) && isfinite(s->preempt[i]))
        first = s->preempt[i];
      json_array_append_new(a, num_or_null(s->preempt[i] - first));
    }
    json_object_set_new(o, "preemptions", a);
    put_num(sum, "preemptions", counter_delta(s->t, s->preempt, n, NULL));
  }
  /* prefix-cache hit rate: per interval from the counters, else the gauge */
  bool counters = any_finite(s->hits, n) && any_finite(s->queries, n);
  if (counters) {
    json_t *a = json_array();
    for (size_t i = 0; i < n; i++) {
      double dq = i > 0 ? s->queries[i] - s->queries[i - 1] : NAN;
      double dh = i > 0 ? s->hits[i] - s->hits[i - 1] : NAN;
      json_array_append_new(a, num_or_null(dq > 0 && dh >= 0 ? 100.0 * dh / dq : NAN));
    }
    json_object_set_new(o, "prefix_hit_pct", a);
    double dh = counter_delta(s->t, s->hits, n, NULL);
    double dq = counter_delta(s->t, s->queries, n, NULL);
    if (dq > 0)
      put_num(sum, "prefix_hit_pct", 100.0 * dh / dq);
    json_object_set_new(sum, "prefix_hit_source", json_string("counters"));
  } else if (any_finite(s->rate, n)) {
    put_array(o, "prefix_hit_pct", s->rate, n, 100.0);
    double acc = 0;
    size_t k = 0;
    for (size_t i = 0; i < n; i++)
      if (isfinite(s->rate[i])) {
        acc += s->rate[i];
        k++;
      }
    put_num(sum, "prefix_hit_pct", 100.0 * acc / (double)k);
    json_object_set_new(sum, "prefix_hit_source", json_string("gauge"));
  }
  /* the server's generation throughput */
  if (any_finite(s->gen, n)) {
    json_t *a = json_array();
    for (size_t i = 0; i < n; i++) {
      double dt = i > 0 ? s->t[i] - s->t[i - 1] : 0;
      double dg = i > 0 ? s->gen[i] - s->gen[i - 1] : NAN;
      json_array_append_new(a, num_or_null(dt > 0 && dg >= 0 ? dg / dt : NAN));
    }
    json_object_set_new(o, "gen_tps", a);
    double dt = 0;
    double dg = counter_delta(s->t, s->gen, n, &dt);
    if (dt > 0)
      put_num(sum, "server_tps", dg / dt);
  }
  put_num(sum, "client_tps", client_tps);
  double stps = tb_json_num(sum, "server_tps");
  if (isfinite(stps) && isfinite(client_tps) && client_tps > 0)
    json_object_set_new(sum, "server_client_ratio",
                        json_real(round(stps / client_tps * 10000.0) / 10000.0));
  if (s->skipped > 0)
    json_object_set_new(o, "skipped", json_integer(s->skipped));
  if (s->truncated)
    json_object_set_new(o, "truncated", json_true());
  json_object_set_new(o, "summary", sum);
  return o;
}

/* ------------------------------------------------------------ checks */

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
tb_sampler_lag_limit_ms(double rate_rps)
{
  double share = rate_rps > 0 ? TB_CHECK_LAG_GAP_SHARE * 1000.0 / rate_rps : 0;
  return share > TB_CHECK_LAG_MIN_MS ? share : TB_CHECK_LAG_MIN_MS;
}

double
tb_sampler_cv_tolerance(double expected, double n)
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
rate_checks(const struct tb_sampler_checks_in *in, json_t *o, json_t *failed)
{
  char why[200];
  if (isfinite(in->lag_p99_ms)) {
    double lim = tb_sampler_lag_limit_ms(in->rate_rps);
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
  double tol = tb_sampler_cv_tolerance(in->cv_expected, in->gaps);
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
tb_sampler_checks(const struct tb_sampler_checks_in *in)
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
    double tol = TB_CHECK_CONC_REL * c > TB_CHECK_CONC_ABS ? TB_CHECK_CONC_REL * c
                                                          : TB_CHECK_CONC_ABS;
    if (fabs(in->achieved - c) > tol) {
      snprintf(why, sizeof why,
               "achieved concurrency %.2f (%s) vs %u requested", in->achieved,
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
      snprintf(why, sizeof why, "only %.0f%% of reads kernel-stamped",
               100.0 * in->kernel_stamped);
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
tb_sampler_failed_text(const json_t *cell, char *buf, size_t len)
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
  json_array_foreach(f, i, v) {
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

/* ------------------------------------------------------------ repeats */

json_t *
tb_sampler_combine_checks(json_t *const *reps, size_t n)
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
    json_int_t pass = json_integer_value(json_object_get(reps[r], "repeat"));
    size_t i;
    const json_t *v;
    json_array_foreach(json_object_get(ch, "failed"), i, v) {
      char *why = tb_xasprintf("repeat %lld: %s", (long long)(pass > 0 ? pass : (json_int_t)r + 1),
                               json_string_value(v) ? json_string_value(v) : "");
      json_array_append_new(failed, json_string(why));
      free(why);
    }
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
    const json_t *b = json_object_get(ch, "drained_before"), *f = json_object_get(ch, "drained_after");
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
