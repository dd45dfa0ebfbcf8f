/*
 * tb_compare: cell-by-cell comparison of two result documents (base, head)
 * and regression detection.  Pure: JSON in, JSON out; no I/O.
 *
 * The comparison document ("tokbench.compare/v1"):
 *   schema      "tokbench.compare/v1"
 *   tolerance   tolerated loss as a fraction (0.05 = 5%)
 *   base, head  each document's header: run_id, status, started_at,
 *               finished_at, endpoint, engine, hardware, model (copies)
 *   cells       one per (phase, context, concurrency) found in either
 *               document, prefill first, then decode, each sorted by context
 *               then concurrency:
 *     phase, context, context_label, concurrency,
 *     base_status, head_status   the cell's status, or null when absent
 *     mark        "both" (valid in both), "base_only" / "head_only" (valid in
 *                 one and not the other), "neither"
 *     metrics     { name: { base, head, ratio } } for the phase's metrics;
 *                 ratio = head / base, null unless both are valid and > 0
 *   summary     { name: { geomean, cells, better } }: geometric mean of the
 *               metric's ratios over the cells valid in both (null if none),
 *               how many, and "higher" or "lower" (which way is better)
 *   regressions [ { phase, context, context_label, concurrency, metric,
 *               base, head, ratio, change_pct, kind } ]
 *               kind "worse": a throughput fell below (1 - tolerance) x base,
 *               or a latency rose above (1 + tolerance) x base;
 *               kind "lost": valid in base, error or over_capacity in head
 *               (metric "status").  A cell absent from head is not a
 *               regression (the matrices may differ); it is marked base_only.
 *   regressed   true when regressions is not empty
 *
 * Metrics: decode total_tps (higher is better), ttft_p50_ms and tbt_p50_ms
 * (lower); prefill prompt_tps (higher) and ttft_ms (lower).
 *
 * Cost and energy (issue 26; tb_cost's `efficiency` of a cell): a decode or
 * rate cell where either side has them gets
 *   efficiency  { name: { base, head, ratio, by_interval } } for
 *               tb_compare_eff_metrics() (cost_per_m_output_tokens,
 *               cost_per_m_tokens, j_per_output_token: lower is better, a
 *               cheaper configuration is a better one; tps_per_gpu: higher);
 *               by_interval "better" / "worse" when the two 95% intervals
 *               are disjoint, "same" when they overlap, null without both
 * and summary.efficiency { name: { geomean, cells, better } }; neither is
 * there when no cell has them, and they make no regression.
 */
#ifndef TB_COMPARE_H
#define TB_COMPARE_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#include "base/tb_util.h"

#define TB_COMPARE_SCHEMA "tokbench.compare/v1"
#define TB_COMPARE_DEFAULT_TOLERANCE 0.05
/* Cells read from each document; more is an error. */
#define TB_COMPARE_MAX_CELLS 20000u

struct tb_compare_metric {
  const char *name;   /* "total_tps" */
  const char *phase;  /* "decode" | "prefill" */
  const char *label;  /* "Total tok/s" */
  bool higher_better; /* throughput: true; latency: false */
  bool efficiency;    /* a member of the cell's "efficiency" (tb_cost) */
  bool advisory;      /* judged against history, never a regression: money
                         (a price change is not the server's) */
};

/* The metric table (static), and its length in *n. */
const struct tb_compare_metric *tb_compare_metrics(size_t *n);
/* The cost and energy metrics (static), and their length in *n. */
const struct tb_compare_metric *tb_compare_eff_metrics(size_t *n);
/* The metrics the verdict against history judges (tb_regress): those of
 * tb_compare_metrics() first, in their order, then cost_per_m_output_tokens,
 * cost_per_m_tokens (advisory) and j_per_output_token. */
const struct tb_compare_metric *tb_compare_verdict_metrics(size_t *n);

/*
 * Compares head against base (both borrowed result documents).  tolerance is
 * a fraction in [0, 1) (TB_COMPARE_DEFAULT_TOLERANCE when unsure).  Returns a
 * new comparison document, or NULL with *err (new string, caller frees) when
 * either is not a result document (an object with a "cells" array) or the
 * tolerance is out of range.
 */
json_t *tb_compare(const json_t *base, const json_t *head, double tolerance,
                   char **err) TB_MUST_CHECK;

/* Geometric mean of n positive finite ratios (others are skipped); NAN when
 * none is usable. */
double tb_compare_geomean(const double *ratios, size_t n);

/* A cell's figure for a metric (NAN when absent or not a finite number):
 * reads total_tps, prompt_tps, ttft_ms (number, or object .p50 for
 * "ttft_p50_ms"), tbt_ms.p50, and the efficiency metrics from the cell's
 * "efficiency".  cell is borrowed. */
double tb_compare_cell_value(const json_t *cell, const char *metric);

#endif
