/*
 * tb_ratefig: a rate cell's figures.  See tb_ratefig.h.
 *
 * tb_ratefig_cell writes them from a struct rcell, whether the cell's loop
 * counted it (tb_ratecell) or its shards' merged samples filled it
 * (tb_rate_cell_merged): count_figures, latency_figures, the steady-state
 * window (tb_steady), the conversation's and the trace's own figures, then
 * a measured cell's samples, the server's view and the checks
 * (tb_ratewatch), the prefix check (tb_checks) and the energy
 * (tb_telemetry); a merged cell's checks are those of its figures.
 */
#include "engine/tb_ratefig.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "base/tb_stats.h"
#include "engine/tb_engine.h"
#include "engine/tb_ratecell.h"
#include "engine/tb_ratewatch.h"
#include "engine/tb_telemetry.h"
#include "result/tb_checks.h"
#include "result/tb_samples.h"
#include "result/tb_srvtime.h"
#include "result/tb_steady.h"

json_t *
tb_ratefig_slo(const struct tb_spec_slo *slo)
{
  json_t *o = json_object();
  if (slo->ttft_ms > 0)
    json_object_set_new(o, "ttft_ms", json_real(slo->ttft_ms));
  if (slo->tpot_ms > 0)
    json_object_set_new(o, "tpot_ms", json_real(slo->tpot_ms));
  if (slo->tbt_ms > 0)
    json_object_set_new(o, "tbt_ms", json_real(slo->tbt_ms));
  if (slo->e2e_ms > 0)
    json_object_set_new(o, "e2e_ms", json_real(slo->e2e_ms));
  return o;
}

/* The percentiles of a sample of ns as ms, with the max. */
static json_t *
pct(struct tb_stats *st)
{
  json_t *o = json_object();
  bool any = st->n > 0;
  json_object_set_new(o, "p50", any ? json_real(tb_stats_quantile(st, 0.5) / 1e6) : json_null());
  json_object_set_new(o, "p90", any ? json_real(tb_stats_quantile(st, 0.9) / 1e6) : json_null());
  json_object_set_new(o, "p99", any ? json_real(tb_stats_quantile(st, 0.99) / 1e6) : json_null());
  return o;
}

/* A conversation cell's own figures: its conversations, and per turn the
 * requests, TTFT and the share of the prompt the server's cache held (the
 * later turns carry the earlier ones: what a cache can serve grows). */
static void
conversation_figures(struct rcell *c, json_t *cell)
{
  json_object_set_new(cell, "conversations",
                      json_pack("{s:I, s:I, s:I, s:I}", "started", (json_int_t)c->conv_started,
                                "completed", (json_int_t)c->conv_completed, "abandoned",
                                (json_int_t)c->conv_abandoned, "dropped",
                                (json_int_t)c->conv_dropped));
  json_t *turns = json_array();
  for (int64_t t = 0; t < c->r->s->conversation.turns; t++) {
    struct turnstat *ts = &c->turns[t];
    json_t *o =
      json_pack("{s:I, s:I, s:I, s:o}", "turn", (json_int_t)(t + 1), "requests",
                (json_int_t)ts->sent, "completed", (json_int_t)ts->ok, "ttft_ms", pct(&ts->ttft));
    json_object_set_new(o, "prompt_tokens_mean",
                        ts->pr.n ? json_real((double)ts->pr.sum / (double)ts->pr.n) : json_null());
    json_object_set_new(o, "cached_pct",
                        ts->pr.cached_prompt_sum > 0 ? json_real(100.0 * (double)ts->pr.cached_sum /
                                                                 (double)ts->pr.cached_prompt_sum)
                                                     : json_null());
    json_array_append_new(turns, o);
  }
  json_object_set_new(cell, "turns", turns);
}

/* The cold-cell check (tb_checks_prefix_cell): what the cell's own prompts
 * share, from the spec's workload and what the server counted. */
static void
prefix_check(const struct rcell *c, json_t *cell)
{
  const struct rrun *r = c->r;
  const struct tb_spec *s = r->s;
  size_t nt = c->turns != NULL ? (size_t)s->conversation.turns : 0;
  double *tn = tb_xcalloc(nt ? nt : 1, sizeof *tn), *tp = tb_xcalloc(nt ? nt : 1, sizeof *tp);
  for (size_t t = 0; t < nt; t++) {
    const struct prompts *pt = &c->turns[t].pr;
    tn[t] = (double)pt->n;
    tp[t] = pt->n ? (double)pt->sum / (double)pt->n : NAN;
  }
  const struct tb_checks_prefix in = {
    .requests = (double)c->pr.n,
    .prompt_mean = c->pr.n ? (double)c->pr.sum / (double)c->pr.n : NAN,
    .prefix_tokens = (double)s->prefix.tokens,
    .suffixes = (double)s->prefix.suffixes,
    .first_turns = nt > 0 ? (double)c->conv_started : (double)c->pr.n,
    .turn_requests = tn,
    .turn_prompt = tp,
    .turns = nt,
    .implied_pct = r->trace_cell ? 100.0 * r->tr_sum.implied_hit_rate : NAN,
  };
  tb_checks_prefix_cell(cell, &in);
  free(tn);
  free(tp);
}

/* A rate cell's counts and rates: status, requests, errors, the offered,
 * achieved and goodput rates over arrivals_s and the span, the SLOs, the
 * tokens, the prompts and what the server's cache held, and its own
 * timings where it gives them. */
static void
count_figures(struct rcell *c, json_t *cell, double dur, double arr)
{
  const struct tb_spec *s = c->r->s;
  json_object_set_new(cell, "status", json_string(c->ok > 0 ? "valid" : "error"));
  if (c->ok == 0)
    json_object_set_new(cell, "reason",
                        json_string(c->first_error[0] ? c->first_error : "no request finished"));
  json_object_set_new(cell, "requests", json_integer((json_int_t)c->scheduled));
  json_object_set_new(cell, "completed", json_integer((json_int_t)c->ok));
  json_object_set_new(cell, "requests_started", json_integer((json_int_t)c->started));
  json_object_set_new(cell, "errors", json_integer((json_int_t)c->errors));
  json_object_set_new(cell, "dropped", json_integer((json_int_t)c->dropped));
  json_object_set_new(cell, "good", json_integer((json_int_t)c->good));
  json_object_set_new(cell, "error_share",
                      json_real(c->scheduled ? (double)c->errors / (double)c->scheduled : 0));
  if (c->first_error[0] && c->ok > 0)
    json_object_set_new(cell, "first_error", json_string(c->first_error));
  json_object_set_new(cell, "offered_rps", json_real(arr > 0 ? (double)c->started / arr : 0));
  json_object_set_new(cell, "achieved_rps", json_real(dur > 0 ? (double)c->ok / dur : 0));
  json_object_set_new(cell, "goodput_rps", json_real(dur > 0 ? (double)c->good / dur : 0));
  json_object_set_new(cell, "attainment",
                      json_real(c->scheduled ? (double)c->good / (double)c->scheduled : 0));
  json_object_set_new(cell, "slo", tb_ratefig_slo(&s->slo));
  json_object_set_new(cell, "total_tps", json_real(dur > 0 ? (double)c->out_tokens / dur : 0));
  json_object_set_new(cell, "output_tokens", json_integer(c->out_tokens));
  json_object_set_new(cell, "prompt_tokens_mean",
                      c->pr.n ? json_real((double)c->pr.sum / (double)c->pr.n) : json_null());
  const struct prompts *pr = &c->pr;
  if (pr->cached_n > 0) { /* the server said how much of the prompts its cache held */
    json_t *pc = json_pack(
      "{s:I, s:I, s:I, s:f}", "requests", (json_int_t)pr->cached_n, "prompt_tokens",
      (json_int_t)pr->cached_prompt_sum, "cached_tokens", (json_int_t)pr->cached_sum, "hit_pct",
      pr->cached_prompt_sum > 0 ? 100.0 * (double)pr->cached_sum / (double)pr->cached_prompt_sum
                                : 0.0);
    json_object_set_new(cell, "prefix_cache", pc);
  }
  json_t *srv = tb_srvtime_json(&c->srv);
  if (srv != NULL)
    json_object_set_new(cell, "server_timings", srv);
}

/* A rate cell's span, its latencies' percentiles, the schedule lag, the
 * arrivals' CV and the requests in flight. */
static void
latency_figures(struct rcell *c, json_t *cell, double dur, double arr)
{
  json_object_set_new(cell, "measured_s", json_real(dur));
  json_object_set_new(cell, "arrivals_s", json_real(arr));
  json_object_set_new(cell, "ttft_ms", pct(&c->ttft));
  json_object_set_new(cell, "tpot_ms", pct(&c->tpot));
  json_object_set_new(cell, "tbt_ms", pct(&c->tbt));
  json_object_set_new(cell, "e2e_ms", pct(&c->e2e));
  json_t *lag = pct(&c->lag);
  json_object_del(lag, "p90");
  json_object_set_new(lag, "max",
                      c->lag.n ? json_real(tb_stats_quantile(&c->lag, 1) / 1e6) : json_null());
  json_object_set_new(cell, "schedule_lag_ms", lag);
  double cv = NAN;
  if (c->gap_n > 1) {
    double m = c->gap_sum / (double)c->gap_n;
    double var = (c->gap_sum2 - c->gap_sum * m) / (double)(c->gap_n - 1);
    cv = var > 0 && m > 0 ? sqrt(var) / m : 0;
  }
  json_object_set_new(cell, "interarrival_cv", isfinite(cv) ? json_real(cv) : json_null());
  json_object_set_new(cell, "max_in_flight", json_integer(c->max_inflight));
  /* the time-weighted mean from the first start to the last end */
  double span = c->flight_t > c->t0 ? (double)(c->flight_t - c->t0) : 0;
  json_object_set_new(cell, "avg_in_flight",
                      span > 0 ? json_real(c->flight_area / span) : json_null());
}

/* A measured (not merged) cell's per-request samples, handed over to the
 * cell, then the server's view, the prefix check and the energy. */
static void
sample_figures(struct rcell *c, json_t *cell)
{
  json_t *smp = json_object();
  json_object_set_new(smp, "lag_ms", c->s_lag);
  json_object_set_new(smp, "ttft_ms", c->s_ttft);
  json_object_set_new(smp, "tpot_ms", c->s_tpot);
  json_object_set_new(smp, "e2e_ms", c->s_e2e);
  json_object_set_new(smp, "max_tbt_ms", c->s_maxtbt);
  json_object_set_new(smp, "output_tokens", c->s_tokens);
  json_object_set_new(smp, "good", c->s_good);
  json_object_set_new(smp, "sched_ms", c->s_sched);
  json_object_set_new(smp, "start_ms", c->s_start);
  json_object_set_new(smp, "end_ms", c->s_end);
  c->s_lag = c->s_ttft = c->s_tpot = c->s_e2e = c->s_maxtbt = c->s_tokens = c->s_good = NULL;
  c->s_start = c->s_end = c->s_sched = NULL;
  json_object_set_new(cell, "samples", smp);
  tb_ratewatch_cell(c->watch, cell, c->r->env->kernel_stamps);
  prefix_check(c, cell);
  tb_telemetry_cell(c->r->env->telemetry, c->r->env->endpoint, cell, c->t0,
                    c->t_last_end > c->t0 ? c->t_last_end : tb_time_mono_ns());
}

/* The trace cell's own figures beside the rate cell's: the replay (its
 * requests, sessions, span and rate: the trace's own rate after the
 * window, speed-up and scale) against what was offered and achieved
 * (offered_rps, achieved_rps), and the prefix-cache hit rate the trace
 * implies beside the server's (prefix_cache.hit_pct, where it says). */
static void
trace_figures(struct rcell *c, json_t *cell)
{
  const struct rrun *r = c->r;
  const struct tb_spec_trace *t = &r->s->trace;
  const struct tb_tracesum *sm = &r->tr_sum;
  json_t *o = json_pack("{s:s, s:I, s:I, s:f, s:f, s:f, s:f, s:I, s:I}", "format", t->format,
                        "requests", (json_int_t)sm->requests, "sessions", (json_int_t)sm->sessions,
                        "span_s", sm->span_s, "trace_rps", sm->rate, "speedup", t->speedup,
                        "rate_scale", t->rate_scale, "block_tokens", (json_int_t)sm->block_tokens,
                        "abandoned", (json_int_t)c->tr_abandoned);
  json_object_set_new(o, "implied_hit_pct", json_real(100.0 * sm->implied_hit_rate));
  /* which trace: its bytes' SHA-256, and the uploaded trace's id (a job) */
  if (r->tr.sha256[0] != '\0')
    json_object_set_new(o, "sha256", json_string(r->tr.sha256));
  if (r->tr.id[0] != '\0')
    json_object_set_new(o, "id", json_string(r->tr.id));
  const struct prompts *pr = &c->pr;
  json_object_set_new(o, "hit_pct",
                      pr->cached_prompt_sum > 0
                        ? json_real(100.0 * (double)pr->cached_sum / (double)pr->cached_prompt_sum)
                        : json_null());
  json_object_set_new(cell, "trace", o);
}

/* The figures of a measured cell (or of a merged one: no samples). */
void
tb_ratefig_cell(struct rcell *c, json_t *cell)
{
  double dur = c->t_last_end > c->t0 ? (double)(c->t_last_end - c->t0) / 1e9 : 0;
  double arr = (double)(c->t_end_arrivals - c->t0) / 1e9;
  count_figures(c, cell, dur, arr);
  latency_figures(c, cell, dur, arr);
  /* the steady-state window (tb_steady): a closed-loop cell's target is its
   * users, counted busy; an open-loop cell's reference is its level, the
   * mean in flight over its offered span */
  struct tb_steady w;
  tb_steady_compute(c->sreq, c->nsreq, c->users > 0 ? c->busy : NULL, c->nbusy, c->users, &w);
  json_object_set_new(cell, "steady", tb_steady_json(&w));
  json_object_set_new(cell, "load", json_string(c->users > 0 ? "closed" : "open"));
  if (c->users > 0)
    json_object_set_new(cell, "users", json_integer(c->users));
  if (c->turns != NULL)
    conversation_figures(c, cell);
  if (c->r->trace_cell)
    trace_figures(c, cell);
  uint64_t reads = c->ds.rx_kernel + c->ds.rx_user;
  json_object_set_new(cell, "kernel_stamped",
                      json_real(reads ? (double)c->ds.rx_kernel / (double)reads : 0));
  if (c->watch == NULL) { /* a merged cell (tb_rate_cell_merged): no samples
                          * arrays, no server series; the checks of its figures */
    tb_ratewatch_cell(NULL, cell, false);
    prefix_check(c, cell);
    return;
  }
  sample_figures(c, cell);
}

/* A shard's cell, over: what it adds into its samples (tb_samples' rate
 * section; START and END were added as requests ended), in microseconds. */
void
tb_ratefig_shard(struct rcell *c)
{
  struct tb_samples *m = c->r->env->shard->samples;
  struct tb_samples_rate *x = &m->rate;
  x->on = true;
  struct tb_stats *const from[] = { &c->ttft, &c->tpot, &c->e2e, &c->tbt };
  const enum tb_samples_series to[] = { TB_SAMPLES_TTFT, TB_SAMPLES_TPOT, TB_SAMPLES_E2E,
                                        TB_SAMPLES_GAP };
  for (size_t k = 0; k < TB_ARRAY_LEN(from); k++)
    for (size_t i = 0; i < from[k]->n; i++)
      tb_samples_add(m, to[k], from[k]->v[i] / 1000);
  m->tokens = c->out_tokens;
  m->completed = (int64_t)c->ok;
  m->started = (int64_t)c->started;
  m->good = (int64_t)c->good;
  m->reads = (int64_t)(c->ds.rx_kernel + c->ds.rx_user);
  m->stamped_reads = (int64_t)c->ds.rx_kernel;
  x->scheduled = (int64_t)c->scheduled;
  x->errors = (int64_t)c->errors;
  x->dropped = (int64_t)c->dropped;
  x->pr_sum = c->pr.sum;
  x->pr_n = (int64_t)c->pr.n;
  x->cached_sum = c->pr.cached_sum;
  x->cached_prompt_sum = c->pr.cached_prompt_sum;
  x->cached_n = (int64_t)c->pr.cached_n;
  x->conv_started = (int64_t)c->conv_started;
  x->conv_completed = (int64_t)c->conv_completed;
  x->conv_abandoned = (int64_t)c->conv_abandoned;
  x->conv_dropped = (int64_t)c->conv_dropped;
  x->arrivals_us = (c->t_end_arrivals - c->t0) / 1000;
  x->last_end_us = c->t_last_end > c->t0 ? (c->t_last_end - c->t0) / 1000 : 0;
  tb_srvtime_merge(&m->srv, &c->srv);
  snprintf(x->first_error, sizeof x->first_error, "%s", c->first_error);
  for (int64_t t = 0; c->turns != NULL && t < c->r->s->conversation.turns; t++) {
    struct turnstat *ts = &c->turns[t];
    struct tb_samples_turn *o = tb_samples_turn(m, (size_t)t);
    if (o == NULL)
      break;
    *o = (struct tb_samples_turn){ .sent = (int64_t)ts->sent,
                                   .ok = (int64_t)ts->ok,
                                   .pr_sum = ts->pr.sum,
                                   .pr_n = (int64_t)ts->pr.n,
                                   .cached_sum = ts->pr.cached_sum,
                                   .cached_prompt_sum = ts->pr.cached_prompt_sum };
    for (size_t i = 0; i < ts->ttft.n; i++)
      tb_stats_add(&o->ttft, ts->ttft.v[i] / 1000);
  }
}
