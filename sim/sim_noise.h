/*
 * sim_noise: the simulator's seeded noise model and injectable slowdown,
 * ground truth for tokbench's statistics (issue 14).
 *
 *   --noise drift=2%,jitter=5%,seed=7
 *     drift   run-to-run drift: every run gets its own factor on its decode
 *             step times, exp(drift x z), z standard normal drawn from the
 *             seed and the run's name.  A run is what the prompts' tag
 *             names ([BENCH_<run>_CTX_...], METHOD.md; each repeat pass of
 *             `tokbench run` tags its prompts apart, so its passes drift
 *             apart as a server does over time); requests without a tag
 *             share one process-wide factor.  The batch steps at the
 *             factor of the latest request's run.
 *     jitter  per-step jitter: each decode step's time times
 *             exp(jitter x z - jitter^2 / 2), a fresh z per step (mean 1:
 *             the long-run rate is unchanged, only its spread grows).
 *     seed    the generator's seed (default 1): the same seed, requests and
 *             steps give the same draws.
 *   Percentages or fractions: "2%" and "0.02" are the same; each at most
 *   100%.
 *
 *   --slowdown 5%[@requests=N|@t=S]
 *     from the N-th generation request (counted from 1 since the process
 *     started), or S seconds after it started (modelled time, so divided by
 *     --time-scale; default: from the start), every decode step lasts
 *     1 / (1 - 5%) as long: decode throughput 5% lower.
 *
 * /sim/expected keeps the noise-free model; GET /sim/noise reports the
 * settings, the current drift factor and whether the slowdown is on.
 * Nothing here knows HTTP or the server: a benchmark may draw from the
 * model directly (sim_noise_drift_factor, sim_noise_step_factor).
 */
#ifndef SIM_NOISE_H
#define SIM_NOISE_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/tb_util.h"

#define SIM_NOISE_SPEC_CAP 256
#define SIM_NOISE_TAG_CAP 128 /* the run name taken from a prompt's tag */

struct sim_noise {
  /* settings */
  double drift, jitter; /* relative, 0..1 */
  uint64_t seed;
  double slowdown;       /* 0: none; else 0 < s < 1 */
  int64_t slow_requests; /* from this request on (1-based); 0: unused */
  double slow_after_s;   /* from this time after start; < 0: unused */
  /* state */
  uint64_t rng;      /* jitter's generator */
  double run_factor; /* drift factor of the current run */
  char run[SIM_NOISE_TAG_CAP];
  int64_t requests; /* generation requests seen */
  int64_t start_ns; /* sim_noise_start's clock */
  bool slow_on;
};

/* No noise, no slowdown, seed 1. */
void sim_noise_init(struct sim_noise *n);
/* "drift=2%,jitter=5%,seed=7" over *n.  false with a message in err. */
bool sim_noise_parse(struct sim_noise *n, const char *spec, char *err, size_t errlen) TB_MUST_CHECK;
/* "5%", "5%@requests=100", "0.05@t=30" over *n.  false with a message. */
bool sim_noise_parse_slowdown(struct sim_noise *n, const char *spec, char *err,
                              size_t errlen) TB_MUST_CHECK;
/* True when any noise or slowdown is set. */
bool sim_noise_active(const struct sim_noise *n);
/* Starts the model's clock (now_ns: CLOCK_MONOTONIC) and its generator. */
void sim_noise_start(struct sim_noise *n, int64_t now_ns);

/* The drift factor of a run named run (len bytes, may be 0) under seed:
 * exp(drift x z), z from a generator seeded by seed and the name. */
double sim_noise_drift_factor(double drift, uint64_t seed, const char *run, size_t len);

/* A generation request whose prompt text is text (len bytes; may be NULL):
 * counts it (the slowdown's request count) and, when its tag names a run,
 * makes that run's drift the current one. */
void sim_noise_request(struct sim_noise *n, const char *text, size_t len);

/* sim_noise_request for a request body (borrowed): the text of a chat's
 * messages (string contents and text parts) or a completion's prompt
 * string; the first tag found names the run. */
void sim_noise_request_body(struct sim_noise *n, const json_t *body);

/* GET /sim/noise: {active, drift, jitter, seed, run, drift_factor,
 * slowdown, slowdown_after_requests, slowdown_after_s, slowdown_on,
 * requests}.  New reference. */
json_t *sim_noise_json(const struct sim_noise *n) TB_MUST_CHECK;

/* The factor the next decode step's modelled time is multiplied by: the
 * current run's drift, a fresh jitter draw and the slowdown when on.  1
 * when nothing is set (and no draw is made).  now_ns: the clock. */
double sim_noise_step_factor(struct sim_noise *n, int64_t now_ns, double time_scale);

#endif
