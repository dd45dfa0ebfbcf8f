/*
 * tb_checks: the self-checks of a cell (issue 15, items 5 and 6): its
 * measurement held to named thresholds.  Achieved against requested
 * concurrency, the client's CPU share, the kernel-stamped share of reads,
 * the server drained before and after; for rate cells the start lag, drops,
 * the inter-arrival CV and the server's peak against the cell's own
 * requests.  A failed check flags the cell with the reason; it does not
 * change its status.  Pure: the engine (tb_sampler, tb_ratewatch) gathers
 * the figures, the result model combines repeats, the renderers show the
 * reasons.
 */
#ifndef TB_CHECKS_H
#define TB_CHECKS_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#include "base/tb_util.h"

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
 * (tb_checks_cv_tolerance)... */
#define TB_CHECK_CV_SE 4.0
/* ...or by this much, whichever is larger (constant arrivals: CV 0, a
 * standard error of 0, and the timer's own jitter). */
#define TB_CHECK_CV_ABS 0.05

/* What the checks look at.  Unknown figures: NAN, or -1 for the tri-states. */
struct tb_checks_in {
  unsigned requested;                    /* C */
  double achieved;                       /* average running (server) or in flight */
  bool achieved_server;                  /* achieved is the server's running gauge */
  const char *achieved_what;             /* what achieved is, for the reason (NULL: the
                                * running gauge, or the client's in flight) */
  double cpu_share;                      /* client CPU time / window wall time */
  double kernel_stamped;                 /* share of reads with a kernel stamp */
  bool kernel_wanted;                    /* stamping on (not TB_ENGINE_CLIENT_STAMPS) */
  int drained_before, drained_after;     /* 1 yes, 0 no, -1 unknown */
  double before_running, before_waiting; /* what was seen when not drained */
  /* Rate cells (tb_ratewatch): rate set; requested 0 in open loop (no
   * concurrency is requested, so none is judged), the users in closed
   * loop. */
  bool rate;
  double rate_rps;        /* requests the schedule starts a second (NAN:
                                * closed loop; the lag limit is its floor) */
  double lag_p99_ms;      /* schedule_lag_ms.p99 */
  double cv, cv_expected; /* inter-arrival CV: actual starts, the process's */
  double gaps;            /* inter-arrival gaps the CV is of */
  double dropped;         /* arrivals with no connection slot free */
  double server_peak;     /* largest running + waiting the series saw */
  double max_in_flight;   /* the most requests the cell had in flight */
};

/* The p99 start lag a rate cell at rate_rps may have (ms). */
double tb_checks_lag_limit_ms(double rate_rps);
/* How far the CV of n gaps may be from expected (a gamma process; see
 * tb_sampler.c); NAN when n < 2. */
double tb_checks_cv_tolerance(double expected, double n);

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
json_t *tb_checks_json(const struct tb_checks_in *in) TB_MUST_CHECK;

/* The checks of a cell combined from its repeats (tb_result_combine):
 * ok when every repeat's were, each failed reason prefixed "repeat N: ",
 * achieved concurrency the mean, CPU share the largest, kernel-stamped share
 * the smallest, drained the conjunction (null when one is unknown).  NULL
 * when no repeat has checks.  New reference. */
json_t *tb_checks_combine(json_t *const *reps, size_t n) TB_MUST_CHECK;

/*
 * Issue 25: prefix_hits_unexplained.  A cold cell (cache_reset "done": the
 * server's prefix cache emptied just before it) can only hit on what its
 * own prompts share.  What they share, as tokens of the prompts:
 *  - every request: the chat template's tokens before its text (a few:
 *    less than a block on vLLM; SGLang's radix cache matches them token by
 *    token, and Llama 3.1's template puts a system header with its
 *    "Cutting Knowledge Date" and "Today Date" lines before every user
 *    message, about 30 tokens: meta-llama/Llama-3.1-8B-Instruct's
 *    tokenizer_config.json chat_template, as vLLM's examples copy it) and the
 *    run's id at the head of its text, before the request's own marker
 *    (tb_prompt's tag): TB_CHECK_TEMPLATE_TOKENS as a bound;
 *  - a shared prefix: its tokens, and a whole prompt for each request
 *    repeating an earlier one's user message (past the first `suffixes`);
 *  - a conversation: each turn the earlier turns it carries (its prompt less
 *    the first turn's);
 *  - a trace: the hit rate it implies (tb_trace), the template besides.
 * The server's share (its series' prefix_hit_pct over the cell, else the
 * usage's prefix_cache.hit_pct, else the caller's) above that by more than
 * TB_CHECK_HIT_SLACK_PTS is something else warming the cache behind the
 * cell's back (another client, a cache the reset did not empty), and
 * inflates its figures (vLLM #52884).
 */
#define TB_CHECK_TEMPLATE_TOKENS 64.0
#define TB_CHECK_HIT_SLACK_PTS 2.0

/* What a cell's own prompts share (see above).  Unknown: NAN or 0. */
struct tb_checks_prefix {
  double requests;                           /* requests whose prompt the server counted */
  double prompt_mean;                        /* their mean prompt tokens */
  double prefix_tokens;                      /* a shared prefix's tokens (0: none) */
  double suffixes;                           /* its distinct user messages */
  double first_turns;                        /* requests that began something new: a
                         * conversation's first turns (else the requests) */
  const double *turn_requests, *turn_prompt; /* per turn of a conversation */
  size_t turns;                              /* 0: no conversation */
  double implied_pct;                        /* a trace's implied hit rate (NAN: not a trace) */
  /* the server's share when the cell holds none (a prefill scout: its one
   * answer's cached tokens over its prompt's), with have_hit */
  bool have_hit;
  double hit_pct;
};

/* The share of prompt tokens (%) a cell's own prompts explain, at most 100;
 * NAN when the prompts are unknown. */
double tb_checks_prefix_explained(const struct tb_checks_prefix *p);

/* The check on a finished cell: nothing unless cache_reset is "done" and
 * the server said a hit rate; then checks (made when absent) gets
 * prefix_hit_pct, prefix_hit_source ("server series, counters", "server
 * series, gauge" or "usage"), prefix_hit_explained_pct and
 * prefix_hits_unexplained, and a failed reason with the numbers when true. */
void tb_checks_prefix_cell(json_t *cell, const struct tb_checks_prefix *p);

/* The cold-cell check of a prefill scout measured in repeats (only these
 * members): ok when every repeat's was, each failed reason prefixed
 * "repeat N: ", prefix_hits_unexplained when one repeat's was,
 * prefix_hit_pct the largest, prefix_hit_explained_pct the smallest.  NULL
 * when no repeat has them.  New reference. */
json_t *tb_checks_combine_prefix(json_t *const *reps, size_t n) TB_MUST_CHECK;

/* Fails the self-checks object ch (a cell's "checks") with why: appended
 * to its "failed" array (made when it has none) and "ok" set false.  why
 * is copied. */
void tb_checks_fail(json_t *ch, const char *why);

/* "reason; reason" of a cell's failed checks into buf, "" when none (or no
 * checks).  Returns buf. */
const char *tb_checks_failed_text(const json_t *cell, char *buf, size_t len);

#endif
