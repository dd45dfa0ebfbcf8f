/*
 * tb_srvtime: see tb_srvtime.h.
 */
#include "result/tb_srvtime.h"

#include <math.h>
#include <string.h>

static void
add_scaled(struct tb_stats *s, double v, double scale)
{
  if (isfinite(v) && fabs(v * scale) < 9.0e15)
    tb_stats_add(s, (int64_t)llround(v * scale));
}

void
tb_srvtime_add(struct tb_srvtime *t, const struct tb_srvtime_req *r)
{
  if (!isfinite(r->prompt_ms) && !isfinite(r->predicted_n))
    return;
  t->requests++;
  if (isfinite(r->cache_n))
    t->cache_n += r->cache_n;
  if (isfinite(r->prompt_n))
    t->prompt_n += r->prompt_n;
  add_scaled(&t->prompt_us, r->prompt_ms, 1e3);
  if (isfinite(r->prompt_n) && r->prompt_ms > 0)
    add_scaled(&t->prompt_mtps, r->prompt_n / r->prompt_ms * 1e3, 1e3);
  /* one output token has no time between tokens (llama.cpp says 0) */
  if (r->predicted_n >= 2) {
    add_scaled(&t->tpot_us, r->predicted_per_token_ms, 1e3);
    /* its first to last token over the n - 1 intervals, as tokbench's
     * TPOT counts them (NAN without predicted_ms: not added) */
    double span = r->predicted_ms / (r->predicted_n - 1);
    if (isfinite(span) && span > 0)
      add_scaled(&t->span_us, span, 1e3);
    if (isfinite(r->tpot_ms) && r->tpot_ms > 0 && isfinite(span) && span > 0)
      add_scaled(&t->diff_ppm, r->tpot_ms / span - 1.0, 1e6);
  }
  add_scaled(&t->predicted, r->predicted_n, 1.0);
  if (isfinite(r->ttft_ms))
    add_scaled(&t->gap_us, r->ttft_ms - r->prompt_ms, 1e3);
  if (isfinite(r->predicted_n) && (double)r->tokens == r->predicted_n)
    t->tokens_equal++;
}

/* {p50, p90} of s divided by scale, rounded to 1e-4; NULL when empty. */
static json_t *
pcts(struct tb_stats *s, double scale)
{
  if (s->n == 0)
    return NULL;
  double p50 = tb_stats_quantile(s, 0.5) / scale, p90 = tb_stats_quantile(s, 0.9) / scale;
  return json_pack("{s:f, s:f}", "p50", round(p50 * 1e4) / 1e4, "p90", round(p90 * 1e4) / 1e4);
}

static void
put(json_t *o, const char *k, json_t *v)
{
  if (v != NULL)
    json_object_set_new(o, k, v);
}

json_t *
tb_srvtime_json(struct tb_srvtime *t)
{
  if (t->requests == 0)
    return NULL;
  json_t *o = json_object();
  json_object_set_new(o, "source", json_string(t->source ? t->source : "server timings"));
  json_object_set_new(o, "requests", json_integer(t->requests));
  put(o, "prompt_ms", pcts(&t->prompt_us, 1e3));
  put(o, "prompt_tps", pcts(&t->prompt_mtps, 1e3));
  put(o, "tpot_ms", pcts(&t->tpot_us, 1e3));
  put(o, "tpot_span_ms", pcts(&t->span_us, 1e3));
  put(o, "tpot_vs_server_pct", pcts(&t->diff_ppm, 1e4));
  put(o, "predicted_n", pcts(&t->predicted, 1.0));
  json_t *gap = pcts(&t->gap_us, 1e3);
  if (gap != NULL) /* the smallest too: a TTFT shorter than the server's prompt time is a fault */
    json_object_set_new(gap, "min",
                        json_real(round(tb_stats_quantile(&t->gap_us, 0) / 1e3 * 1e4) / 1e4));
  put(o, "ttft_minus_prompt_ms", gap);
  json_object_set_new(o, "tokens_equal", json_integer(t->tokens_equal));
  json_object_set_new(o, "cache_n", json_integer((json_int_t)t->cache_n));
  json_object_set_new(o, "prompt_n", json_integer((json_int_t)t->prompt_n));
  return o;
}

static void
append(struct tb_stats *into, const struct tb_stats *from)
{
  for (size_t i = 0; i < from->n; i++)
    tb_stats_add(into, from->v[i]);
}

void
tb_srvtime_merge(struct tb_srvtime *into, const struct tb_srvtime *from)
{
  if (from->requests == 0)
    return;
  if (into->source == NULL)
    into->source = from->source;
  into->requests += from->requests;
  into->tokens_equal += from->tokens_equal;
  into->cache_n += from->cache_n;
  into->prompt_n += from->prompt_n;
  append(&into->prompt_us, &from->prompt_us);
  append(&into->prompt_mtps, &from->prompt_mtps);
  append(&into->tpot_us, &from->tpot_us);
  append(&into->predicted, &from->predicted);
  append(&into->gap_us, &from->gap_us);
  append(&into->span_us, &from->span_us);
  append(&into->diff_ppm, &from->diff_ppm);
}

void
tb_srvtime_free(struct tb_srvtime *t)
{
  tb_stats_free(&t->prompt_us);
  tb_stats_free(&t->prompt_mtps);
  tb_stats_free(&t->tpot_us);
  tb_stats_free(&t->predicted);
  tb_stats_free(&t->gap_us);
  tb_stats_free(&t->span_us);
  tb_stats_free(&t->diff_ppm);
  memset(t, 0, sizeof *t);
}
