/*
 * tb_verdict: the statistics behind a regression verdict (issue 14).  Pure:
 * numbers in, numbers out; no I/O, no JSON, no allocation the caller sees.
 *
 * A series is one figure (a cell's total tok/s, its median TTFT, ...) over
 * the jobs of one endpoint and label set, oldest first; its last point is the
 * job being judged.  The verdict of that job:
 *
 *   1. Change points over the series (tb_verdict_change_points): E-Divisive
 *      (energy distance, Matteson & James 2014) picks the best split of a
 *      segment; a two-sample t-test between the two sides confirms it at
 *      p <= TB_VERDICT_CP_ALPHA (0.001, as Apache Otava does); confirmed
 *      splits are split again, recursively.
 *   2. The new group: when the last change point lies at most
 *      TB_VERDICT_CONFIRM points before the end, the points since it (the
 *      runs that confirm a step, 1 to 3 of them); else the new point alone.
 *   3. The baseline: at most TB_VERDICT_WINDOW points before the new group,
 *      after the change point before it (the level the new group is judged
 *      against never straddles an older step).
 *   4. A two-sample t-test of the new group against the baseline, on the
 *      run-to-run variance pooled over both (the new group has 1 to 3 runs:
 *      too few for a variance of its own).  A run's standard error (its
 *      within-run noise, from the engine) adds to the new value's variance
 *      when it exceeds the baseline's typical one: a short, noisy run is
 *      judged with its own noise, never with less than the run-to-run noise
 *      the history shows (a run's SE alone knows nothing of drift between
 *      runs, and would raise false alarms).
 *   5. The effect is mean(new) / mean(baseline) - 1, with its 95% CI (the
 *      t interval of the difference over the baseline mean) and the
 *      two-sided p-value of "no change".  With min_effect the threshold
 *      (the smallest change that matters) and alpha the significance:
 *        worse / better  p <= alpha and the effect is beyond min_effect in
 *                        the bad / good direction;
 *        same            the whole CI lies within +-min_effect;
 *        inconclusive    anything else.
 *   6. Fewer than TB_VERDICT_MIN_HISTORY earlier points: outcome
 *      TB_VERDICT_TOO_LITTLE; the caller falls back to comparing two runs
 *      and says so.
 *
 * The matrix verdict (tb_verdict_matrix) judges one series built from the
 * cells: each job's geometric mean, over the cells of the judged job it
 * holds, of value / the cell's baseline median.  Cells with too little
 * history drop out of it.
 */
#ifndef TB_VERDICT_H
#define TB_VERDICT_H

#include <stdbool.h>
#include <stddef.h>

#include "base/tb_stats.h"
#include "base/tb_util.h"

#define TB_VERDICT_MIN_HISTORY 3           /* earlier points below which: two-run fallback */
#define TB_VERDICT_WINDOW 30               /* baseline: at most this many earlier points */
#define TB_VERDICT_CONFIRM 3               /* a step is "new" for this many points */
#define TB_VERDICT_CP_ALPHA 0.001          /* change point confirmation (two-sided) */
#define TB_VERDICT_ALPHA 0.001             /* a verdict's significance (two-sided) */
#define TB_VERDICT_DEFAULT_MIN_EFFECT 0.02 /* no threshold set: 2% matters */
/* Points read from one series; older points are dropped by the caller. */
#define TB_VERDICT_MAX_POINTS 400u

enum tb_verdict_outcome {
  TB_VERDICT_SAME = 0,
  TB_VERDICT_BETTER,
  TB_VERDICT_WORSE,
  TB_VERDICT_INCONCLUSIVE,
  TB_VERDICT_TOO_LITTLE, /* too little history: fall back to two runs */
};

struct tb_verdict_point {
  long job;     /* order key shared by the cells of one job (matrix only) */
  double value; /* > 0 and finite, else the point is ignored */
  double se;    /* standard error within the run; NAN when unknown */
};

struct tb_verdict {
  enum tb_verdict_outcome outcome;
  double effect;       /* mean(new) / mean(baseline) - 1; NAN when none */
  double mean_base;    /* the baseline's mean; NAN when none */
  double mean_new;     /* the new group's mean; NAN when none */
  double ci_lo, ci_hi; /* 95% CI of effect */
  double p;            /* two-sided p-value of "no change"; NAN when none */
  size_t n_base;       /* earlier points in the baseline */
  size_t n_new;        /* points in the new group (1..TB_VERDICT_CONFIRM) */
  size_t new_from;     /* index (in the usable points) where the new group starts */
  bool step;           /* the new group starts at a confirmed change point */
};

/* The significance each cell of a job of ncells cells is judged at:
 * TB_VERDICT_ALPHA / ncells (Bonferroni), so that a job's chance of one
 * false "worse" among its cells stays within TB_VERDICT_ALPHA. */
double tb_verdict_cell_alpha(size_t ncells);

/* "same", "better", "worse", "inconclusive", "too_little_history". */
const char *tb_verdict_outcome_name(enum tb_verdict_outcome o);

/* Welch's two-sample t-test from summaries (mean, variance, size of each;
 * n >= 2 and a variance >= 0 each, not both zero): the statistic t =
 * (m2 - m1) / se, se, the Welch-Satterthwaite degrees of freedom and the
 * two-sided p-value.  Returns false when the inputs allow no test. */
bool tb_verdict_welch(double m1, double v1, double n1, double m2, double v2, double n2, double *t,
                      double *df, double *p) TB_MUST_CHECK;

/*
 * Change points of y[0..n) (values, no NAN): indices i (0 < i < n) where a
 * new level starts, ascending, at most cap of them into out.  alpha is the
 * confirmation level (TB_VERDICT_CP_ALPHA).  Returns how many were found
 * (written: min(found, cap)).  O(n^2) per level of recursion; n is capped by
 * the caller (TB_VERDICT_MAX_POINTS).
 */
size_t tb_verdict_change_points(const double *y, size_t n, double alpha, size_t *out, size_t cap);

/*
 * Judges the last of pts[0..n) against the earlier ones (steps 1-6 above).
 * Points whose value is not > 0 and finite are skipped (new_from counts the
 * usable ones).  min_effect in [0, 1); higher_better: throughput true,
 * latency false; alpha in (0, 1).  Fills *v.
 */
void tb_verdict_judge(const struct tb_verdict_point *pts, size_t n, double min_effect,
                      bool higher_better, double alpha, struct tb_verdict *v);

/*
 * The matrix verdict: cells[c] is cell c's series (oldest first, the judged
 * job last, pts[].job the order key), ncells of them.  Builds the series of
 * geometric means described above and judges it like a cell.  mean_out
 * (may be NULL, room for cap points) receives the built series' values,
 * jobs_out (may be NULL) their keys; *nout their count.
 */
void tb_verdict_matrix(const struct tb_verdict_point *const *cells, const size_t *ncell,
                       size_t ncells, double min_effect, bool higher_better, double alpha,
                       struct tb_verdict *v, double *mean_out, long *jobs_out, size_t cap,
                       size_t *nout);

#endif
