/*
 * tb_repcsv: a result document as CSV.  See tb_repcsv.h.
 *
 * The columns are one table, cols[] below: each column's name (the header)
 * and its writer with what it reads (the rows), so the header and the rows
 * cannot drift apart.  A column reads the cell itself, its self-checks or
 * its server series' summary (tb_cellview's), or the row's own key (phase,
 * context, concurrency); a rate cell's columns are empty for other cells.
 */
#include "render/tb_repcsv.h"

#include <inttypes.h>
#include <string.h>

#include "base/tb_json.h"
#include "render/tb_cellview.h"
#include "render/tb_ratereport.h"
#include "result/tb_checks.h"

/* A row: a cell and where it stands (phase 0 prefill, 1 decode, 2 rate). */
struct row {
  const json_t *c;
  int phase;
  int64_t ctx, conc;
};

/* What a column reads from. */
enum src {
  CELL = 0,
  CHECKS,  /* the cell's self-checks */
  SUMMARY, /* its server series' summary */
  RATE,    /* the cell, when it is a rate cell (else the field is empty) */
  SRVTIME, /* the server's own timings (server_timings); these columns are
            * there only when some cell has them */
  EFF,     /* its cost and energy (tb_cost's "efficiency"); these columns
            * are there only when some cell has them (issue 26) */
  STEADY,  /* its steady-state window (tb_steady's "steady"); these columns
            * are there only when some cell has one (issue 25) */
};

struct col {
  const char *name;
  void (*put)(struct tb_render_buf *b, const struct row *r, const json_t *o, const struct col *k);
  const char *key, *sub; /* the member; a percentile ("p50") or an interval's end */
  enum src src;
};

static void
put_phase(struct tb_render_buf *b, const struct row *r, const json_t *o, const struct col *k)
{
  tb_render_puts(b, r->phase == 2 ? "rate" : r->phase ? "decode" : "prefill");
}

static void
put_context(struct tb_render_buf *b, const struct row *r, const json_t *o, const struct col *k)
{
  tb_render_printf(b, "%" PRId64, r->ctx);
}

static void
put_label(struct tb_render_buf *b, const struct row *r, const json_t *o, const struct col *k)
{
  char lab[32];
  tb_format_tokens(r->ctx, lab, sizeof lab);
  tb_render_puts(b, lab);
}

static void
put_conc(struct tb_render_buf *b, const struct row *r, const json_t *o, const struct col *k)
{
  tb_render_printf(b, "%" PRId64, r->conc);
}

static void
put_str(struct tb_render_buf *b, const struct row *r, const json_t *o, const struct col *k)
{
  tb_render_csv_str(b, tb_json_str(o, k->key));
}

static void
put_num(struct tb_render_buf *b, const struct row *r, const json_t *o, const struct col *k)
{
  tb_render_csv_num(b, tb_json_num(o, k->key));
}

static void
put_int(struct tb_render_buf *b, const struct row *r, const json_t *o, const struct col *k)
{
  int64_t v;
  if (tb_json_int(o, k->key, &v))
    tb_render_printf(b, "%" PRId64, v);
}

/* A percentile (sub) of a figure. */
static void
put_pct(struct tb_render_buf *b, const struct row *r, const json_t *o, const struct col *k)
{
  tb_render_csv_num(b, tb_json_pct(o, k->key, k->sub));
}

/* An end (sub: "lo" or "hi") of a 95% interval; empty without one. */
static void
put_ci(struct tb_render_buf *b, const struct row *r, const json_t *o, const struct col *k)
{
  double lo, hi;
  (void)tb_render_ci(o, k->key, &lo, &hi); /* NAN: an empty field */
  tb_render_csv_num(b, k->sub[0] == 'l' ? lo : hi);
}

static void
put_bool(struct tb_render_buf *b, const struct row *r, const json_t *o, const struct col *k)
{
  const json_t *v = json_object_get(o, k->key);
  tb_render_puts(b, json_is_true(v) ? "true" : json_is_false(v) ? "false" : "");
}

/* A member (sub) of an object member (key): {mean, min, max}. */
static void
put_sub(struct tb_render_buf *b, const struct row *r, const json_t *o, const struct col *k)
{
  tb_render_csv_num(b, tb_json_num(json_object_get(o, k->key), k->sub));
}

/* The reasons of the cell's failed self-checks. */
static void
put_failed(struct tb_render_buf *b, const struct row *r, const json_t *o, const struct col *k)
{
  char why[600];
  tb_render_csv_str(b, tb_checks_failed_text(r->c, why, sizeof why));
}

static const struct col cols[] = {
  { "phase", put_phase, NULL, NULL, CELL },
  { "context", put_context, NULL, NULL, CELL },
  { "context_label", put_label, NULL, NULL, CELL },
  { "concurrency", put_conc, NULL, NULL, CELL },
  { "status", put_str, "status", NULL, CELL },
  { "reason", put_str, "reason", NULL, CELL },
  { "prompt_tokens", put_int, "prompt_tokens", NULL, CELL },
  { "prompt_tps", put_num, "prompt_tps", NULL, CELL },
  { "total_tps", put_num, "total_tps", NULL, CELL },
  { "per_request_tps", put_num, "per_request_tps", NULL, CELL },
  { "ttft_p50_ms", put_pct, "ttft_ms", "p50", CELL },
  { "ttft_p90_ms", put_pct, "ttft_ms", "p90", CELL },
  { "ttft_p99_ms", put_pct, "ttft_ms", "p99", CELL },
  { "tbt_p50_ms", put_pct, "tbt_ms", "p50", CELL },
  { "tbt_p90_ms", put_pct, "tbt_ms", "p90", CELL },
  { "tbt_p99_ms", put_pct, "tbt_ms", "p99", CELL },
  { "avg_active", put_num, "avg_active", NULL, CELL },
  { "avg_active_source", put_str, "avg_active_source", NULL, CELL },
  { "completed", put_int, "completed", NULL, CELL },
  { "output_tokens", put_int, "output_tokens", NULL, CELL },
  { "measured_s", put_num, "measured_s", NULL, CELL },
  { "token_source", put_str, "token_source", NULL, CELL },
  { "total_tps_se", put_num, "total_tps_se", NULL, CELL },
  { "total_tps_ci95_lo", put_ci, "total_tps_ci95", "lo", CELL },
  { "total_tps_ci95_hi", put_ci, "total_tps_ci95", "hi", CELL },
  { "ttft_p50_ci95_lo_ms", put_ci, "ttft_p50_ci95", "lo", CELL },
  { "ttft_p50_ci95_hi_ms", put_ci, "ttft_p50_ci95", "hi", CELL },
  { "tbt_p50_ci95_lo_ms", put_ci, "tbt_p50_ci95", "lo", CELL },
  { "tbt_p50_ci95_hi_ms", put_ci, "tbt_p50_ci95", "hi", CELL },
  { "prompt_tps_ci95_lo", put_ci, "prompt_tps_ci95", "lo", CELL },
  { "prompt_tps_ci95_hi", put_ci, "prompt_tps_ci95", "hi", CELL },
  { "repeats", put_int, "repeats", NULL, CELL },
  { "total_tps_capacity_limited", put_num, "total_tps_capacity_limited", NULL, CELL },
  { "readiness", put_str, "readiness", NULL, CELL },
  { "readiness_reason", put_str, "readiness_reason", NULL, CELL },
  { "prompt_tokens_source", put_str, "prompt_tokens_source", NULL, CELL },
  { "scheduler_cap", put_int, "scheduler_cap", NULL, CELL },
  /* the self-checks and the server view (tb_cellview) */
  { "checks_ok", put_bool, "ok", NULL, CHECKS },
  { "checks_failed", put_failed, NULL, NULL, CELL },
  { "achieved_concurrency", put_num, "achieved_concurrency", NULL, CHECKS },
  { "achieved_source", put_str, "achieved_source", NULL, CHECKS },
  { "client_cpu_share", put_num, "client_cpu_share", NULL, CHECKS },
  { "kernel_stamped", put_num, "kernel_stamped", NULL, CHECKS },
  { "drained_before", put_bool, "drained_before", NULL, CHECKS },
  { "drained_after", put_bool, "drained_after", NULL, CHECKS },
  { "peak_kv_pct", put_num, "peak_kv_pct", NULL, SUMMARY },
  { "preemptions", put_num, "preemptions", NULL, SUMMARY },
  { "prefix_hit_pct", put_num, "prefix_hit_pct", NULL, SUMMARY },
  { "server_tps", put_num, "server_tps", NULL, SUMMARY },
  { "server_client_ratio", put_num, "server_client_ratio", NULL, SUMMARY },
  { "server_samples", put_num, "samples", NULL, SUMMARY },
  /* rate cells (tb_ratereport) */
  { "rate_rps", put_num, "rate_rps", NULL, RATE },
  { "arrival", put_str, "arrival", NULL, RATE },
  { "offered_rps", put_num, "offered_rps", NULL, RATE },
  { "achieved_rps", put_num, "achieved_rps", NULL, RATE },
  { "goodput_rps", put_num, "goodput_rps", NULL, RATE },
  { "attainment", put_num, "attainment", NULL, RATE },
  { "error_share", put_num, "error_share", NULL, RATE },
  { "tpot_p50_ms", put_pct, "tpot_ms", "p50", RATE },
  { "tpot_p90_ms", put_pct, "tpot_ms", "p90", RATE },
  { "tpot_p99_ms", put_pct, "tpot_ms", "p99", RATE },
  { "e2e_p50_ms", put_pct, "e2e_ms", "p50", RATE },
  { "e2e_p90_ms", put_pct, "e2e_ms", "p90", RATE },
  { "e2e_p99_ms", put_pct, "e2e_ms", "p99", RATE },
  { "schedule_lag_p50_ms", put_pct, "schedule_lag_ms", "p50", RATE },
  { "schedule_lag_p99_ms", put_pct, "schedule_lag_ms", "p99", RATE },
  { "users", put_num, "users", NULL, RATE },
  { "avg_in_flight", put_num, "avg_in_flight", NULL, RATE },
  /* the server's own timing of the cell's requests (tb_srvtime) */
  { "server_timing_requests", put_int, "requests", NULL, SRVTIME },
  { "server_prompt_p50_ms", put_pct, "prompt_ms", "p50", SRVTIME },
  { "server_prompt_tps_p50", put_pct, "prompt_tps", "p50", SRVTIME },
  { "server_tpot_p50_ms", put_pct, "tpot_ms", "p50", SRVTIME },
  { "server_predicted_n_p50", put_pct, "predicted_n", "p50", SRVTIME },
  { "ttft_minus_server_prompt_p50_ms", put_pct, "ttft_minus_prompt_ms", "p50", SRVTIME },
  { "server_tokens_equal", put_int, "tokens_equal", NULL, SRVTIME },
  { "server_cache_n", put_int, "cache_n", NULL, SRVTIME },
  /* cost and energy (tb_cost) */
  { "gpus", put_int, "gpus", NULL, EFF },
  { "tps_per_gpu", put_num, "tps_per_gpu", NULL, EFF },
  { "currency", put_str, "currency", NULL, EFF },
  { "cost_per_m_output_tokens", put_num, "cost_per_m_output_tokens", NULL, EFF },
  { "cost_per_m_output_tokens_ci95_lo", put_ci, "cost_per_m_output_tokens_ci95", "lo", EFF },
  { "cost_per_m_output_tokens_ci95_hi", put_ci, "cost_per_m_output_tokens_ci95", "hi", EFF },
  { "cost_per_m_tokens", put_num, "cost_per_m_tokens", NULL, EFF },
  { "j_per_output_token", put_num, "j_per_output_token", NULL, EFF },
  { "j_per_output_token_ci95_lo", put_ci, "j_per_output_token_ci95", "lo", EFF },
  { "j_per_output_token_ci95_hi", put_ci, "j_per_output_token_ci95", "hi", EFF },
  { "avg_power_w", put_num, "avg_power_w", NULL, EFF },
  { "energy_source", put_str, "energy_source", NULL, EFF },
  { "gpu_util_mean_pct", put_sub, "gpu_util_pct", "mean", EFF },
  { "sm_clock_mean_mhz", put_sub, "sm_clock_mhz", "mean", EFF },
  { "sm_clock_min_mhz", put_sub, "sm_clock_mhz", "min", EFF },
  { "gpu_temp_max_c", put_num, "gpu_temp_c_max", NULL, EFF },
  { "gpu_throttled", put_bool, "gpu_throttled", NULL, CHECKS },
  /* the steady-state window of a rate, conversation or trace cell */
  { "steady_found", put_bool, "found", NULL, STEADY },
  { "steady_start_s", put_num, "start_s", NULL, STEADY },
  { "steady_end_s", put_num, "end_s", NULL, STEADY },
  { "steady_length_s", put_num, "length_s", NULL, STEADY },
  { "steady_requests", put_int, "requests", NULL, STEADY },
  { "steady_output_tps", put_num, "output_tps", NULL, STEADY },
  { "steady_rps", put_num, "rps", NULL, STEADY },
  { "steady_ttft_p50_ms", put_pct, "ttft_ms", "p50", STEADY },
  { "steady_ttft_p99_ms", put_pct, "ttft_ms", "p99", STEADY },
  { "steady_tpot_p50_ms", put_pct, "tpot_ms", "p50", STEADY },
  { "steady_tpot_p99_ms", put_pct, "tpot_ms", "p99", STEADY },
};

/* Which optional column groups a document has. */
struct on {
  bool srvtime, eff, steady;
};

/* Whether column k is written at all: the server's timings only where some
 * cell of the document has them; the cost and energy ones (and the
 * throttle check) likewise (issue 26), so that a document without keeps
 * its CSV as it was. */
static bool
col_on(const struct col *k, const struct on *on)
{
  if (k->src == SRVTIME)
    return on->srvtime;
  if (k->src == STEADY)
    return on->steady;
  return on->eff || (k->src != EFF && strcmp(k->name, "gpu_throttled") != 0);
}

static void
csv_row(struct tb_render_buf *b, const json_t *c, int phase, int64_t ctx, int64_t conc,
        const struct on *on)
{
  const struct row r = { c, phase, ctx, conc };
  const json_t *st = json_object_get(c, "server_timings");
  const json_t *from[] = { c,
                           tb_cellview_checks(c),
                           tb_cellview_summary(c),
                           tb_ratereport_is_rate(c) ? c : NULL,
                           json_is_object(st) ? st : NULL,
                           json_object_get(c, "efficiency"),
                           json_is_object(json_object_get(c, "steady"))
                             ? json_object_get(c, "steady")
                             : NULL };
  for (size_t i = 0; i < TB_ARRAY_LEN(cols); i++) {
    if (!col_on(&cols[i], on))
      continue;
    if (i > 0)
      tb_render_puts(b, ",");
    if (cols[i].src < RATE || from[cols[i].src] != NULL)
      cols[i].put(b, &r, from[cols[i].src], &cols[i]);
  }
  tb_render_puts(b, "\r\n");
}

static bool
any_srvtime(const struct tb_repview *v)
{
  const json_t *cells = json_object_get(v->doc, "cells");
  for (size_t i = 0; i < v->ncells; i++)
    if (json_is_object(json_object_get(json_array_get(cells, i), "server_timings")))
      return true;
  return false;
}

void
tb_repcsv_render(struct tb_render_buf *b, const struct tb_repview *v)
{
  const json_t *cells = json_object_get(v->doc, "cells");
  struct on on = { .srvtime = any_srvtime(v) };
  for (size_t i = 0; i < json_array_size(cells); i++) {
    const json_t *c = json_array_get(cells, i);
    on.eff = on.eff || json_object_get(c, "efficiency") != NULL;
    on.steady = on.steady || json_is_object(json_object_get(c, "steady"));
  }
  for (size_t i = 0; i < TB_ARRAY_LEN(cols); i++)
    if (col_on(&cols[i], &on))
      tb_render_printf(b, "%s%s", i > 0 ? "," : "", cols[i].name);
  tb_render_puts(b, "\r\n");
  for (size_t i = 0; i < v->pctx.n; i++)
    if (v->pcell[i])
      csv_row(b, v->pcell[i], 0, v->pctx.v[i], 1, &on);
  for (size_t r = 0; r < v->dctx.n; r++)
    for (size_t k = 0; k < v->conc.n; k++)
      if (tb_repview_at(v, r, k))
        csv_row(b, tb_repview_at(v, r, k), 1, v->dctx.v[r], v->conc.v[k], &on);
  for (size_t i = 0; i < v->ncells; i++) {
    const json_t *c = json_array_get(cells, i);
    int64_t ctx, conc;
    if (tb_ratereport_is_rate(c) && tb_json_int(c, "context", &ctx) &&
        tb_json_int(c, "concurrency", &conc))
      csv_row(b, c, 2, ctx, conc, &on); /* a rate cell: its number as concurrency */
  }
}
