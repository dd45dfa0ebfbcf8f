/*
 * tb_regress: the regression check of a finished job (issues 6 and 14).
 *
 * A job that succeeded is judged against its history (lib/result/tb_verdict): the
 * points of the earlier jobs of the same endpoint and labels (sql/0010,
 * lib/db/tb_history), each cell and metric by a t-test of the new value
 * against the recent window, change points marking steps, and the matrix
 * by the geometric mean of the cells.  The threshold of the project for the
 * job's labels (table thresholds, sql/0005: the most specific label set the
 * job carries) is the minimum effect that matters; without one it is
 * TB_VERDICT_DEFAULT_MIN_EFFECT for the verdict.  A cell with fewer than
 * TB_VERDICT_MIN_HISTORY earlier points falls back to the comparison with
 * the last good job (state succeeded, result status "complete", finished
 * before it) at the tolerance (the threshold, else
 * TB_REGRESS_DEFAULT_TOLERANCE), flagged "fallback": true.  The job's
 * points are recorded first (a recheck replaces them).  The outcome is
 * written into the job's result document as
 *
 *   "regressions": {
 *     "method": "history" | "two_run",  history: some cell had enough history
 *     "base_job_id": "<uuid>" | null,   the last good job (two-run side)
 *     "base_run_id": "..." | null,
 *     "tolerance": 0.05,                the two-run tolerance
 *     "min_effect": 0.02,               the verdict's minimum effect
 *     "alpha": 0.001,                   the job's significance (split over
 *                                       its verdicts, tb_verdict.h)
 *     "history_runs": 12,               most earlier runs any cell had
 *     "regressed": true | false,        a cell or the matrix is worse, or a
 *                                       cell was lost
 *     "cells": [ { phase, context, context_label, concurrency, metric,
 *                  base, head, ratio, change_pct, kind, ... } ]
 *              the regressions: kind "worse" with, from the verdict,
 *              ci95_pct [lo, hi], p, earlier_runs, new_runs, step and
 *              history (the series' last TB_REGRESS_HISTORY_SHOWN values,
 *              this job last), or
 *              "fallback": true from the two-run comparison; kind "lost"
 *     "verdicts": [ { phase, context, context_label, concurrency, metric,
 *                     outcome, change_pct, ci95_pct, p, earlier_runs,
 *                     new_runs, step } ]   every judged cell and metric
 *     "matrix": { metric: { outcome, change_pct, ci95_pct, p,
 *                           earlier_runs, cells, history } }  history: the
 *              matrix series (geometric mean of each cell over its median)
 *     "summary": { metric: { geomean, cells, better } }  (two-run)
 *     "note": "...",                    when there was nothing to compare
 *     "checked_at": "<RFC 3339>"
 *   }
 *   outcome: "better", "worse", "same", "inconclusive", "too_little_history".
 *
 * lib/result/tb_regdoc reads and tells that object (whether it regressed,
 * why, its headline) without the database.
 *
 * Who calls it: the worker, right after it marks a job succeeded (in that
 * transaction, behind a savepoint; a failure here must not fail the job),
 * and the api after POST /v1/results.  Calling it again recomputes and
 * overwrites.
 */
#ifndef TB_REGRESS_H
#define TB_REGRESS_H

#include <jansson.h>

#include <stdbool.h>
#include <stdint.h>

#include "db/tb_db.h"
#include "base/tb_util.h"

#define TB_REGRESS_DEFAULT_TOLERANCE 0.05
/* Values of a series a regression or the matrix carries for the charts. */
#define TB_REGRESS_HISTORY_SHOWN 31

enum {
  TB_REGRESS_NONE = 0,  /* checked: no regression (or nothing to compare with) */
  TB_REGRESS_FOUND = 1, /* checked: regressions recorded in the result */
  TB_REGRESS_SKIP = 2,  /* the job has not succeeded or has no result */
};

/*
 * Checks job_id (a UUID in text) and records "regressions" in its result.
 * Returns TB_REGRESS_NONE, _FOUND or _SKIP, or TB_DB_SOFT / TB_DB_HARD (from
 * tb_db.h) when the database failed (nothing was written; retry later).
 */
int tb_regress_check(struct tb_db *db, const char *job_id) TB_MUST_CHECK;

/* One earlier point of a series (a row of tb_history_earlier). */
struct tb_regress_point {
  long job;  /* order: 0 the oldest earlier job, ascending */
  int phase; /* 0 prefill, 1 decode */
  int64_t context, concurrency;
  size_t metric; /* index into tb_compare_verdict_metrics() */
  double value, se;
};

/*
 * The "regressions" document (above) of head (a result document, borrowed)
 * judged against earlier[0..n) (any order; reordered in place) and the
 * two-run comparison cmp (tb_compare of the last good job and head,
 * borrowed, may be NULL).  tolerance: the two-run tolerance; min_effect:
 * the verdict's.  Pure; returns a new object without checked_at and the
 * base ids (the caller adds them).
 */
json_t *tb_regress_judge(const json_t *head, struct tb_regress_point *earlier, size_t n,
                         const json_t *cmp, double tolerance, double min_effect);

/*
 * tb_regress_judge over documents (all borrowed): earlier[0..n) oldest
 * first, then head.  For `tokbench compare`, which has files, not a
 * database.  Returns a new "regressions" object (no checked_at, no base ids).
 */
json_t *tb_regress_judge_docs(const json_t *const *earlier, size_t n, const json_t *head,
                              const json_t *cmp, double tolerance, double min_effect);

/* The points of head's valid cells for tb_history_record: a new JSON array
 * of { phase, context, concurrency, metric, value, se, ci_lo, ci_hi }. */
json_t *tb_regress_points(const json_t *head);

/*
 * The tolerated loss (fraction) for a job of project_id carrying labels (a
 * JSON object text, may be NULL = {}): the most specific matching threshold,
 * else TB_REGRESS_DEFAULT_TOLERANCE.  *rc: 0, or TB_DB_SOFT / TB_DB_HARD
 * (then the default is returned).
 */
double tb_regress_tolerance(struct tb_db *db, const char *project_id, const char *labels, int *rc);

#endif
