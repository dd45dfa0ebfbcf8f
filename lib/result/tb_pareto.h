/*
 * tb_pareto: the frontier across jobs (issue 26, GET /v1/pareto;
 * docs/reports.md "The frontier").  Pure: rows of finished jobs in, points,
 * their frontier and the answer to "the best configuration meeting these
 * SLOs at this load" out.
 *
 * A point is one valid decode cell of a job: x = tokens/s per user (the
 * cell's per_request_tps, its interval total_tps_ci95 / C), y = one of
 *   tps_per_gpu                total_tps / GPUs (higher is better)
 *   cost_per_m_output_tokens   (lower is better)
 *   j_per_output_token         (lower is better)
 * with the interval tb_cost gave it (a figure without one: its value).
 * The GPUs: the document's cost.gpu.count, else hardware.count, else 1
 * (gpus_assumed true).
 *
 * The frontier: a point is on it when no other point is better on both
 * axes *beyond their 95% intervals* (the other's interval lies wholly above
 * this one's on x, and wholly on the better side on y).  Two points whose
 * intervals overlap on an axis cannot rule each other out: the frontier is
 * what the measurements can tell apart, not the best values alone.
 *
 * A configuration (what a point is coloured by): the endpoint's name, the
 * engine and its version, the GPU and count, and the launch command's flags
 * (its words that start with "-", redacted as stored).
 */
#ifndef TB_PARETO_H
#define TB_PARETO_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/tb_util.h"

/* The most points an answer holds (the newest jobs' first). */
#define TB_PARETO_MAX_POINTS 5000u

enum tb_pareto_y {
  TB_PARETO_TPS_PER_GPU = 0,
  TB_PARETO_COST,
  TB_PARETO_ENERGY
};

/* The y axis named s ("tps_per_gpu", "cost_per_m_output_tokens",
 * "j_per_output_token"); false when unknown. */
bool tb_pareto_y_parse(const char *s, enum tb_pareto_y *out) TB_MUST_CHECK;
const char *tb_pareto_y_name(enum tb_pareto_y y);

/*
 * The points of one job's result document (borrowed), appended to points
 * (a JSON array): each {job_id, endpoint_id, endpoint, config {key,
 * endpoint, engine, gpu, gpus, flags}, labels, context, concurrency, x,
 * x_ci95, y, y_ci95, tps_per_gpu, cost_per_m_output_tokens,
 * cost_per_m_tokens, currency, j_per_output_token (each with its _ci95 when
 * known, absent when unknown), ttft_p50_ms, tbt_p50_ms, total_tps,
 * gpus_assumed, checks_ok, imported}.  A cell without the y figure is left
 * out.  Strings are copied.  Stops at TB_PARETO_MAX_POINTS.
 */
void tb_pareto_add_job(json_t *points, const char *job_id, const char *endpoint_id,
                       const char *endpoint_name, const json_t *labels, const json_t *doc,
                       enum tb_pareto_y y);

/* Marks each point's "frontier" (true or false) as the header says; y's
 * direction from enum tb_pareto_y.  Returns how many are on it. */
size_t tb_pareto_mark(json_t *points, enum tb_pareto_y y);

/* What "meeting these SLOs at this load" means: NAN / 0 when not asked. */
struct tb_pareto_slo {
  double ttft_p50_ms, tbt_p50_ms; /* at most */
  double min_tps_per_user;        /* x at least */
  int64_t context;                /* the cell's context at least */
  int64_t concurrency;            /* the cell's concurrency at least (the load) */
};

/*
 * The best point meeting slo (each bound on the point's figure), by
 * objective (the y axis: cheapest cost, fewest joules, or most tok/s per
 * GPU).  New object: {answer: "found" | "no configuration yet", objective,
 * slo (echo), best (the point, or null), evidence: [up to 5 points meeting
 * the SLOs, best first: their jobs, cells and intervals], meeting (count),
 * ties: how many of them the best one's interval cannot tell apart from it
 * (their intervals on the objective overlap)}.
 */
json_t *tb_pareto_best(const json_t *points, const struct tb_pareto_slo *slo,
                       enum tb_pareto_y objective) TB_MUST_CHECK;

#endif
