/*
 * tb_sampler: the server's own view of a cell (issue 15, items 5 and 6).
 *
 * During a cell's window the engine already reads /metrics on its event
 * loop (readiness, average running).  Once a second one of those bodies is
 * also handed here and read in the engine's dialect (vLLM V0/V1, SGLang
 * 0.3–0.5, llama.cpp; the names per version are in the table in
 * tb_sampler.c, with their sources): running and waiting requests, KV-cache
 * usage, the preemption counter, the prefix-cache hit rate (hits/queries
 * counters where the engine has them, else its own gauge) and the server's
 * generation-token counter.  The cell stores them as `server_series`
 * (arrays of t_s and of each value, compact) with a summary: peak KV %,
 * preemptions during the window, server-counted against client-counted
 * tok/s.
 *
 * The self-checks of a cell (tb_sampler_checks) hold its measurement to
 * named thresholds: achieved against requested concurrency, the client's
 * CPU share, the kernel-stamped share of reads, the server drained before
 * and after.  A failed check flags the cell with the reason; it does not
 * change its status.
 *
 * Pure and allocation-bounded: at most TB_SAMPLER_MAX_POINTS samples a cell,
 * bodies over TB_SAMPLER_BODY_MAX are not read (counted as skipped).
 */
#ifndef TB_SAMPLER_H
#define TB_SAMPLER_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tb_discover.h"
#include "tb_util.h"

/* One sample a second (the rate; the engine polls /metrics more
 * often for readiness, and only one body a second is read here). */
#define TB_SAMPLER_INTERVAL_NS 1000000000LL
/* An hour of samples: a cell longer than that keeps its first hour and says
 * `truncated` (a series of 3,600 points is ~100 KiB of JSON). */
#define TB_SAMPLER_MAX_POINTS 3600u
/* A /metrics body over 1 MiB is not parsed for the series: a real vLLM or
 * SGLang text is 20–200 KiB, and parsing stays well under a millisecond of
 * the event loop (the engine's own cap on the body is larger). */
#define TB_SAMPLER_BODY_MAX (1024u * 1024u)

/* The self-checks' thresholds (docs/engine.md, "Self-checks"). */
/* Achieved concurrency may differ from the requested C by this much... */
#define TB_CHECK_CONC_ABS 0.5
/* ...or this share of C, whichever is larger (a stream replaced at its end
 * shows as a brief dip; a foreign client adds whole requests). */
#define TB_CHECK_CONC_REL 0.05
/* The client's CPU time over the window's wall time above this: the loop
 * was busy most of the time, and queueing inside it could distort reads. */
#define TB_CHECK_CPU_MAX 0.9
/* With kernel receive stamps wanted, at least this share of reads carries
 * one; below, arrival times came from the client's clock. */
#define TB_CHECK_KERNEL_MIN 0.9
/* Rate cells: the p99 of the start lag (actual - scheduled start) may reach
 * this share of the mean inter-arrival gap 1 / rate... */
#define TB_CHECK_LAG_GAP_SHARE 0.1
/* ...or this many ms, whichever is larger. */
#define TB_CHECK_LAG_MIN_MS 5.0
/* The inter-arrival CV of the actual starts may differ from the arrival
 * process's by this many standard errors of a sample CV of that many gaps
 * (tb_sampler_cv_tolerance)... */
#define TB_CHECK_CV_SE 4.0
/* ...or by this much, whichever is larger (constant arrivals: CV 0, a
 * standard error of 0, and the timer's own jitter). */
#define TB_CHECK_CV_ABS 0.05

/* One /metrics text, in the engine's dialect.  NAN where the engine does
 * not publish the figure. */
struct tb_sampler_point {
  double running, waiting;
  double kv_frac;             /* KV-cache usage, 0..1 */
  double preemptions;         /* counter */
  double prefix_hits, prefix_queries; /* counters */
  double prefix_rate;         /* gauge 0..1, used without the counters */
  double gen_tokens;          /* counter */
};

/* Reads text in kind's dialect into *p.  False when the running gauge is
 * missing (not this engine's metrics, or a gateway's own). */
bool tb_sampler_parse(enum tb_engine_kind kind, const char *text, size_t len,
                      struct tb_sampler_point *p) TB_MUST_CHECK;

struct tb_sampler {
  int64_t t0, next;           /* window start, next sample due (ns) */
  size_t n, cap;
  double *t, *running, *waiting, *kv, *preempt, *hits, *queries, *rate, *gen;
  unsigned skipped;           /* bodies unread: over the cap or unparseable */
  bool truncated;
  bool on;                    /* begun */
};

/* Starts a series at the window's start t0 (monotonic ns). */
void tb_sampler_begin(struct tb_sampler *s, int64_t t0);
/* True when a body read at now would be sampled. */
bool tb_sampler_due(const struct tb_sampler *s, int64_t now);
/* Offers the /metrics body read at now (monotonic ns); sampled when due. */
void tb_sampler_feed(struct tb_sampler *s, enum tb_engine_kind kind, int64_t now,
                     const char *body, size_t len);
/* Adds one parsed point at now (ns), as tb_sampler_feed does when due. */
void tb_sampler_add(struct tb_sampler *s, int64_t now, const struct tb_sampler_point *p);
void tb_sampler_free(struct tb_sampler *s);

/*
 * The cell's `server_series` (new reference), or NULL without samples:
 *   {interval_s, t_s[], running[], waiting[], kv_pct[], preemptions[]
 *    (since the first sample), prefix_hit_pct[] (per interval), gen_tps[]
 *    (per interval; null at the first), skipped, truncated,
 *    summary: {samples, peak_kv_pct, preemptions, prefix_hit_pct,
 *              server_tps, client_tps, server_client_ratio}}
 * An array whose figure the engine does not publish is left out, as is a
 * summary member that cannot be computed.  client_tps: the cell's total
 * tok/s (NAN: left out).
 */
json_t *tb_sampler_json(const struct tb_sampler *s, double client_tps) TB_MUST_CHECK;

/* What the checks look at.  Unknown figures: NAN, or -1 for the tri-states. */
struct tb_sampler_checks_in {
  unsigned requested;          /* C */
  double achieved;             /* average running (server) or in flight */
  bool achieved_server;        /* achieved is the server's running gauge */
  const char *achieved_what;   /* what achieved is, for the reason (NULL: the
                                * running gauge, or the client's in flight) */
  double cpu_share;            /* client CPU time / window wall time */
  double kernel_stamped;       /* share of reads with a kernel stamp */
  bool kernel_wanted;          /* stamping on (not TB_ENGINE_CLIENT_STAMPS) */
  int drained_before, drained_after; /* 1 yes, 0 no, -1 unknown */
  double before_running, before_waiting; /* what was seen when not drained */
  /* Rate cells (tb_ratewatch): rate set; requested 0 in open loop (no
   * concurrency is requested, so none is judged), the users in closed
   * loop. */
  bool rate;
  double rate_rps;             /* requests the schedule starts a second (NAN:
                                * closed loop; the lag limit is its floor) */
  double lag_p99_ms;           /* schedule_lag_ms.p99 */
  double cv, cv_expected;      /* inter-arrival CV: actual starts, the process's */
  double gaps;                 /* inter-arrival gaps the CV is of */
  double dropped;              /* arrivals with no connection slot free */
  double server_peak;          /* largest running + waiting the series saw */
  double max_in_flight;        /* the most requests the cell had in flight */
};

/* The p99 start lag a rate cell at rate_rps may have (ms). */
double tb_sampler_lag_limit_ms(double rate_rps);
/* How far the CV of n gaps may be from expected (a gamma process; see
 * tb_sampler.c); NAN when n < 2. */
double tb_sampler_cv_tolerance(double expected, double n);

/*
 * The cell's `checks` (new reference):
 *   {ok, failed: [reason, ...], requested_concurrency, achieved_concurrency,
 *    achieved_source ("server"|"client"), client_cpu_share, kernel_stamped,
 *    drained_before, drained_after (true|false|null)}
 * requested 0 leaves out the three concurrency members; a rate cell adds
 *   schedule_lag_p99_ms, schedule_lag_limit_ms, dropped, interarrival_cv,
 *   interarrival_cv_expected, interarrival_cv_tolerance, server_peak_requests,
 *   max_in_flight.
 */
json_t *tb_sampler_checks(const struct tb_sampler_checks_in *in) TB_MUST_CHECK;

/* The checks of a cell combined from its repeats (tb_result_combine):
 * ok when every repeat's were, each failed reason prefixed "repeat N: ",
 * achieved concurrency the mean, CPU share the largest, kernel-stamped share
 * the smallest, drained the conjunction (null when one is unknown).  NULL
 * when no repeat has checks.  New reference. */
json_t *tb_sampler_combine_checks(json_t *const *reps, size_t n) TB_MUST_CHECK;

/* "reason; reason" of a cell's failed checks into buf, "" when none (or no
 * checks).  Returns buf. */
const char *tb_sampler_failed_text(const json_t *cell, char *buf, size_t len);

#endif
