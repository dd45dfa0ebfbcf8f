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
#include "engine/tb_sampler.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/tb_json.h"
#include "net/tb_prom.h"

enum fig {
  F_RUN,
  F_WAIT,
  F_KV,
  F_PRE,
  F_HITS,
  F_QUERIES,
  F_RATE,
  F_GEN,
  F_EVAL, /* prompt tokens evaluated, the cached ones not among them */
  F_N
};

/* Why an engine's generation counter cannot give tokens/s per interval.
 * llama-server (b11669-Debian, read live: make real-engine) adds a request's
 * tokens to llamacpp:tokens_predicted_total only when the request ends, so
 * the per-interval figure read 0 or a burst (gen_tps 0 then 1,019 at 4
 * streams of ~340 tok/s) and the ratio to the client's tokens 0.70 where
 * both agreed.  Its per-step counter (llamacpp:n_decode_total) counts
 * batches, not tokens. */
#define GEN_UNKNOWN_LLAMACPP                                                         \
  "llamacpp:tokens_predicted_total counts a request's tokens when it ends, not per " \
  "decode step"

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
  /* published by builds before llama.cpp PR #13660 (May 2025), which took
   * the KV-cache fields out of /metrics (its README's list: PR #22879);
   * b11669-Debian has none, read live: peak_kv_pct is left out */
  { TB_KIND_LLAMACPP, F_KV, { "llamacpp:kv_cache_usage_ratio", NULL } },
  /* prompt tokens from the cache and evaluated ("excluding cached tokens"),
   * both added when a prompt is evaluated (b11669, read live: make
   * real-engine): the queries are their sum */
  { TB_KIND_LLAMACPP, F_HITS, { "llamacpp:prompt_tokens_cached_total", NULL } },
  { TB_KIND_LLAMACPP, F_EVAL, { "llamacpp:prompt_tokens_total", NULL } },
  /* no F_GEN: llamacpp:tokens_predicted_total counts a request's tokens when
   * it ends (GEN_UNKNOWN_LLAMACPP) */
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
acc_sample(void *cls, const char *name, size_t name_len, const char *labels, size_t labels_len,
           double value)
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
tb_sampler_parse(enum tb_engine_kind kind, const char *text, size_t len, struct tb_sampler_point *p)
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
  /* an engine that counts hits and evaluated tokens, not queries */
  p->prefix_queries = isnan(out[F_QUERIES]) ? out[F_EVAL] + out[F_HITS] : out[F_QUERIES];
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
    double **arrs[] = { &s->t,    &s->running, &s->waiting, &s->kv, &s->preempt,
                        &s->hits, &s->queries, &s->rate,    &s->gen };
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
tb_sampler_feed(struct tb_sampler *s, enum tb_engine_kind kind, int64_t now, const char *body,
                size_t len)
{
  if (kind == TB_KIND_LLAMACPP)
    s->gen_unknown = GEN_UNKNOWN_LLAMACPP;
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
tb_sampler_cut(const struct tb_sampler *s, int64_t w0, int64_t w1, struct tb_sampler *out)
{
  memset(out, 0, sizeof *out);
  tb_sampler_begin(out, w0);
  out->skipped = s->skipped;
  out->gen_unknown = s->gen_unknown;
  for (size_t i = 0; i < s->n; i++) {
    int64_t at = s->t0 + (int64_t)llround(s->t[i] * 1e9);
    if (at < w0 || at > w1)
      continue;
    struct tb_sampler_point p = {
      .running = s->running[i],
      .waiting = s->waiting[i],
      .kv_frac = s->kv[i],
      .preemptions = s->preempt[i],
      .prefix_hits = s->hits[i],
      .prefix_queries = s->queries[i],
      .prefix_rate = s->rate[i],
      .gen_tokens = s->gen[i],
    };
    tb_sampler_add(out, at, &p);
  }
  out->truncated = out->truncated || s->truncated;
}

void
tb_sampler_free(struct tb_sampler *s)
{
  double *arrs[] = { s->t,    s->running, s->waiting, s->kv, s->preempt,
                     s->hits, s->queries, s->rate,    s->gen };
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
  if (s->gen_unknown != NULL)
    json_object_set_new(sum, "server_tps_unknown", json_string(s->gen_unknown));
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
