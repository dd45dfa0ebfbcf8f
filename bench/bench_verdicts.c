/*
 * bench_verdicts: how often the verdict (lib/result/tb_verdict) cries wolf, and how
 * quickly it sees a real 5% step, over simulated histories (issue 14).
 *
 * The noise model, drawn directly (no simulator process: thousands of jobs
 * would take hours, and the engine's own noise is not what is measured here):
 *   - a job measures a matrix of TB_CELLS decode cells (2 contexts x 3
 *     concurrencies), each with its own true throughput;
 *   - run-to-run drift: each job's figure of a cell is its truth times
 *     (1 + D + d), D ~ N(0, common) shared by every cell of the job (clock
 *     boost, temperature), d ~ N(0, cell) of the cell alone (scheduler,
 *     neighbours);
 *   - per-step jitter: a cell's figure is the mean of SLICES per-second
 *     slices, each off by N(0, JITTER); the cell's standard error is the
 *     slices' own (what the engine reports as total_tps_se);
 *   - a step: from job STEP_AT on, every cell's truth is 5% lower.
 * Each job is judged like the service judges one (tb_verdict_judge per cell
 * at tb_verdict_cell_alpha, tb_verdict_matrix over the cells): regressed when
 * any of them says worse.  Minimum effect: TB_VERDICT_DEFAULT_MIN_EFFECT.
 *
 * Printed: for the model of the issue (2% run-to-run drift of each cell's
 * figure, split as below) the two floors' figures, then the same for the
 * hardest split (all drift shared by the cells of a job) for information.
 *   verdict_false_alarm_rate X   share of verdicts "regressed" in histories
 *                                without a change (verdicts with enough
 *                                history, all jobs of HISTORIES histories)
 *   verdict_power_5pct_3runs Y   share of histories with a 5% step in which
 *                                one of the 3 jobs from the step on says
 *                                regressed
 * Seeded (xorshift, Box-Muller): the figures are the same on every run.
 */
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "result/tb_verdict.h"

#define TB_CELLS 6
#define HISTORIES 400
#define RUNS 30     /* jobs in a history without a change */
#define STEP_AT 20  /* jobs before the step */
#define SLICES 30   /* per-second slices of a 30 s cell window */
#define JITTER 0.05 /* per-slice jitter */
#define STEP 0.05

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;

static double
uniform(void)
{
  rng_state ^= rng_state << 13;
  rng_state ^= rng_state >> 7;
  rng_state ^= rng_state << 17;
  return ((double)(rng_state >> 11) + 0.5) / 9007199254740992.0;
}

static double
normal(void)
{
  return sqrt(-2.0 * log(uniform())) * cos(2.0 * M_PI * uniform());
}

struct model {
  double common, cell; /* drift sd shared by a job's cells / of one cell */
};

static const double truth[TB_CELLS] = { 2400, 4100, 6300, 1500, 2600, 3900 };

/* One history of n jobs; step_at < n: truth falls by STEP from it on. */
static void
draw(const struct model *m, size_t n, size_t step_at, struct tb_verdict_point pts[][RUNS])
{
  for (size_t j = 0; j < n; j++) {
    double shared = m->common * normal();
    for (size_t c = 0; c < TB_CELLS; c++) {
      double level = truth[c] * (1.0 + shared + m->cell * normal());
      if (j >= step_at)
        level *= 1.0 - STEP;
      double s = 0, ss = 0;
      for (int k = 0; k < SLICES; k++) {
        double x = level * (1.0 + JITTER * normal());
        s += x;
        ss += x * x;
      }
      double mean = s / SLICES, var = (ss - SLICES * mean * mean) / (SLICES - 1);
      pts[c][j].job = (long)j;
      pts[c][j].value = mean;
      pts[c][j].se = sqrt(var > 0 ? var : 0) / sqrt((double)SLICES);
    }
  }
}

/* The verdict of job upto (its points: [0, upto]): regressed?  *enough:
 * whether the history sufficed for a statistical verdict. */
static bool
regressed(struct tb_verdict_point pts[][RUNS], size_t upto, bool *enough)
{
  const struct tb_verdict_point *cells[TB_CELLS];
  size_t ncell[TB_CELLS];
  bool worse = false;
  *enough = false;
  double a = tb_verdict_cell_alpha(TB_CELLS);
  for (size_t c = 0; c < TB_CELLS; c++) {
    struct tb_verdict v;
    tb_verdict_judge(pts[c], upto + 1, TB_VERDICT_DEFAULT_MIN_EFFECT, true, a, &v);
    if (v.outcome != TB_VERDICT_TOO_LITTLE)
      *enough = true;
    worse |= v.outcome == TB_VERDICT_WORSE;
    cells[c] = pts[c];
    ncell[c] = upto + 1;
  }
  struct tb_verdict mv;
  size_t nout;
  tb_verdict_matrix(cells, ncell, TB_CELLS, TB_VERDICT_DEFAULT_MIN_EFFECT, true, TB_VERDICT_ALPHA,
                    &mv, NULL, NULL, 0, &nout);
  worse |= mv.outcome == TB_VERDICT_WORSE;
  return worse;
}

static void
run(const struct model *m, const char *suffix)
{
  static struct tb_verdict_point pts[TB_CELLS][RUNS];
  size_t verdicts = 0, alarms = 0, flagged = 0;
  for (int h = 0; h < HISTORIES; h++) {
    draw(m, RUNS, RUNS, pts);
    for (size_t j = 1; j < RUNS; j++) {
      bool enough;
      bool r = regressed(pts, j, &enough);
      if (!enough)
        continue;
      verdicts++;
      alarms += r;
    }
  }
  for (int h = 0; h < HISTORIES; h++) {
    draw(m, STEP_AT + 3, STEP_AT, pts);
    bool hit = false;
    for (size_t j = STEP_AT; j < STEP_AT + 3 && !hit; j++) {
      bool enough;
      hit = regressed(pts, j, &enough);
    }
    flagged += hit;
  }
  printf("verdict_false_alarm_rate%s %.4f\n", suffix, (double)alarms / (double)verdicts);
  printf("verdict_power_5pct_3runs%s %.4f\n", suffix, (double)flagged / HISTORIES);
  printf("  (%zu verdicts over %d histories of %d jobs; %d histories with a 5%% step "
         "after %d jobs; drift sd: %.1f%% shared by a job's cells, %.1f%% per cell; "
         "jitter %.0f%% over %d slices)\n",
         verdicts, HISTORIES, RUNS, HISTORIES, STEP_AT, m->common * 100, m->cell * 100,
         JITTER * 100, SLICES);
}

int
main(void)
{
  /* the model: 2% run-to-run drift of each cell's figure */
  struct model per_cell = { .common = 0.0, .cell = 0.02 };
  run(&per_cell, "");
  /* the hardest reading: all of it shared by the cells of a job */
  struct model shared = { .common = 0.02, .cell = 0.0 };
  run(&shared, "_shared_drift");
  return 0;
}
