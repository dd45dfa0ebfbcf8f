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

/* The rows of cols[]: a column whose name is the member it reads (NUM,
 * INT, STR, BOOL) or that member after a prefix (PFX), a member's
 * percentiles named <stem>_<p>_ms (PCT), the two ends of a 95% interval
 * named <key>_lo<unit> and <key>_hi<unit> (CI); one row a line, as
 * clang-format would break them. */
/* clang-format off */
#define NUM(src, key) { key, put_num, key, NULL, src }
#define INT(src, key) { key, put_int, key, NULL, src }
#define STR(src, key) { key, put_str, key, NULL, src }
#define BOOL(src, key) { key, put_bool, key, NULL, src }
#define PFX(src, put, prefix, key) { prefix key, put, key, NULL, src }
#define PCT(src, stem, key, p) { stem "_" p "_ms", put_pct, key, p, src }
#define PCT3(src, stem, key) \
  PCT(src, stem, key, "p50"), PCT(src, stem, key, "p90"), PCT(src, stem, key, "p99")
#define CI(src, key, unit) \
  { key "_lo" unit, put_ci, key, "lo", src }, { key "_hi" unit, put_ci, key, "hi", src }
/* clang-format on */

static const struct col cols[] = {
  { "phase", put_phase, NULL, NULL, CELL },
  { "context", put_context, NULL, NULL, CELL },
  { "context_label", put_label, NULL, NULL, CELL },
  { "concurrency", put_conc, NULL, NULL, CELL },
  STR(CELL, "status"),
  STR(CELL, "reason"),
  INT(CELL, "prompt_tokens"),
  NUM(CELL, "prompt_tps"),
  NUM(CELL, "total_tps"),
  NUM(CELL, "per_request_tps"),
  PCT3(CELL, "ttft", "ttft_ms"),
  PCT3(CELL, "tbt", "tbt_ms"),
  NUM(CELL, "avg_active"),
  STR(CELL, "avg_active_source"),
  INT(CELL, "completed"),
  INT(CELL, "output_tokens"),
  NUM(CELL, "measured_s"),
  STR(CELL, "token_source"),
  NUM(CELL, "total_tps_se"),
  CI(CELL, "total_tps_ci95", ""),
  CI(CELL, "ttft_p50_ci95", "_ms"),
  CI(CELL, "tbt_p50_ci95", "_ms"),
  CI(CELL, "prompt_tps_ci95", ""),
  INT(CELL, "repeats"),
  NUM(CELL, "total_tps_capacity_limited"),
  STR(CELL, "readiness"),
  STR(CELL, "readiness_reason"),
  STR(CELL, "prompt_tokens_source"),
  INT(CELL, "scheduler_cap"),
  /* the self-checks and the server view (tb_cellview) */
  { "checks_ok", put_bool, "ok", NULL, CHECKS },
  { "checks_failed", put_failed, NULL, NULL, CELL },
  NUM(CHECKS, "achieved_concurrency"),
  STR(CHECKS, "achieved_source"),
  NUM(CHECKS, "client_cpu_share"),
  NUM(CHECKS, "kernel_stamped"),
  BOOL(CHECKS, "drained_before"),
  BOOL(CHECKS, "drained_after"),
  NUM(SUMMARY, "peak_kv_pct"),
  NUM(SUMMARY, "preemptions"),
  NUM(SUMMARY, "prefix_hit_pct"),
  NUM(SUMMARY, "server_tps"),
  NUM(SUMMARY, "server_client_ratio"),
  PFX(SUMMARY, put_num, "server_", "samples"),
  /* rate cells (tb_ratereport) */
  NUM(RATE, "rate_rps"),
  STR(RATE, "arrival"),
  NUM(RATE, "offered_rps"),
  NUM(RATE, "achieved_rps"),
  NUM(RATE, "goodput_rps"),
  NUM(RATE, "attainment"),
  NUM(RATE, "error_share"),
  PCT3(RATE, "tpot", "tpot_ms"),
  PCT3(RATE, "e2e", "e2e_ms"),
  PCT(RATE, "schedule_lag", "schedule_lag_ms", "p50"),
  PCT(RATE, "schedule_lag", "schedule_lag_ms", "p99"),
  NUM(RATE, "users"),
  NUM(RATE, "avg_in_flight"),
  /* the server's own timing of the cell's requests (tb_srvtime) */
  { "server_timing_requests", put_int, "requests", NULL, SRVTIME },
  PCT(SRVTIME, "server_prompt", "prompt_ms", "p50"),
  { "server_prompt_tps_p50", put_pct, "prompt_tps", "p50", SRVTIME },
  PCT(SRVTIME, "server_tpot", "tpot_ms", "p50"),
  PCT(SRVTIME, "server_tpot_span", "tpot_span_ms", "p50"),
  { "tpot_vs_server_span_pct_p50", put_pct, "tpot_vs_server_pct", "p50", SRVTIME },
  { "server_predicted_n_p50", put_pct, "predicted_n", "p50", SRVTIME },
  PCT(SRVTIME, "ttft_minus_server_prompt", "ttft_minus_prompt_ms", "p50"),
  PFX(SRVTIME, put_int, "server_", "tokens_equal"),
  PFX(SRVTIME, put_int, "server_", "cache_n"),
  /* cost and energy (tb_cost) */
  INT(EFF, "gpus"),
  NUM(EFF, "tps_per_gpu"),
  STR(EFF, "currency"),
  NUM(EFF, "cost_per_m_output_tokens"),
  CI(EFF, "cost_per_m_output_tokens_ci95", ""),
  NUM(EFF, "cost_per_m_tokens"),
  NUM(EFF, "j_per_output_token"),
  CI(EFF, "j_per_output_token_ci95", ""),
  NUM(EFF, "avg_power_w"),
  STR(EFF, "energy_source"),
  { "gpu_util_mean_pct", put_sub, "gpu_util_pct", "mean", EFF },
  { "sm_clock_mean_mhz", put_sub, "sm_clock_mhz", "mean", EFF },
  { "sm_clock_min_mhz", put_sub, "sm_clock_mhz", "min", EFF },
  { "gpu_temp_max_c", put_num, "gpu_temp_c_max", NULL, EFF },
  BOOL(CHECKS, "gpu_throttled"),
  /* the steady-state window of a rate, conversation or trace cell: its
   * members, named steady_<member> */
  PFX(STEADY, put_bool, "steady_", "found"),
  PFX(STEADY, put_num, "steady_", "start_s"),
  PFX(STEADY, put_num, "steady_", "end_s"),
  PFX(STEADY, put_num, "steady_", "length_s"),
  PFX(STEADY, put_int, "steady_", "requests"),
  PFX(STEADY, put_num, "steady_", "output_tps"),
  PFX(STEADY, put_num, "steady_", "rps"),
  PCT(STEADY, "steady_ttft", "ttft_ms", "p50"),
  PCT(STEADY, "steady_ttft", "ttft_ms", "p99"),
  PCT(STEADY, "steady_tpot", "tpot_ms", "p50"),
  PCT(STEADY, "steady_tpot", "tpot_ms", "p99"),
};
#undef NUM
#undef INT
#undef STR
#undef BOOL
#undef PFX
#undef PCT
#undef PCT3
#undef CI

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
