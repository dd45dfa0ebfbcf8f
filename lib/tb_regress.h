/*
 * tb_regress: the regression check of a finished job (issue 6).
 *
 * A job that succeeded is compared (tb_compare) with the last good job of the
 * same endpoint and the same labels: state succeeded, result status
 * "complete", finished before it.  The tolerated loss is the project's
 * threshold for the job's labels (table thresholds, sql/0005: the most
 * specific label set the job carries), else TB_REGRESS_DEFAULT_TOLERANCE.
 * The outcome is written into the job's result document as
 *
 *   "regressions": {
 *     "base_job_id": "<uuid>" | null,   null: no earlier good job to compare
 *     "base_run_id": "..." | null,
 *     "tolerance": 0.05,
 *     "regressed": true | false,
 *     "cells": [ { phase, context, context_label, concurrency, metric,
 *                  base, head, ratio, change_pct, kind } ],  (tb_compare.h)
 *     "summary": { metric: { geomean, cells, better } },
 *     "checked_at": "<RFC 3339>"
 *   }
 *
 * Who calls it: the worker, right after it marks a job succeeded (outside
 * that transaction; a failure here must not fail the job), and the api after
 * POST /v1/results.  Calling it again recomputes and overwrites.
 */
#ifndef TB_REGRESS_H
#define TB_REGRESS_H

#include <jansson.h>

#include "tb_db.h"
#include "tb_util.h"

#define TB_REGRESS_DEFAULT_TOLERANCE 0.05

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

/*
 * The tolerated loss (fraction) for a job of project_id carrying labels (a
 * JSON object text, may be NULL = {}): the most specific matching threshold,
 * else TB_REGRESS_DEFAULT_TOLERANCE.  *rc: 0, or TB_DB_SOFT / TB_DB_HARD
 * (then the default is returned).
 */
double tb_regress_tolerance(struct tb_db *db, const char *project_id, const char *labels,
                            int *rc);

#endif
