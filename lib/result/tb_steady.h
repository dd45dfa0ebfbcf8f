/*
 * tb_steady: the steady-state window of a cell (issue 25, part 6).
 *
 * A rate, conversation or trace cell ramps up from nothing and drains at
 * its end; its figures over the whole cell mix those edges with the load it
 * was meant to hold.  A closed-loop cell's steady-state window is the
 * longest span in which the requests in flight stayed at or above
 * TB_STEADY_SHARE of its target (its users).  An open-loop cell
 * (rates, open-loop conversations, a trace) has no target: its reference is
 * its level L, the time-averaged count in flight over its offered span
 * (first arrival to last arrival; Little's law: the offered rate x the mean
 * time in system), and its window runs from the first instant the count
 * reaches ceil(TB_STEADY_SHARE x L) (at least 1) to the last arrival, so
 * that the ramp-up and the drain (after the last arrival the schedule adds
 * nothing) are left out.  Its peak is a brief crest: a window held at 95%
 * of it lasted 29 ms of a 20-request cell at 12 req/s.
 * In flight is counted over half-open intervals
 * [start, end) of each request that started, a departure before an arrival
 * at the same instant: the rule `vllm bench serve` counts its peak
 * concurrency by (vllm-project/vllm, vllm/benchmarks/serve.py, "sweep-line
 * over half-open intervals").  Of two spans equally long, the earlier.
 * A closed-loop cell counts its users instead: each user busy from its
 * first request's start to its last one's end (the caller's spans), so the
 * instant between one request's end and the user's next start, and a
 * conversation's think time, are not a dip in its load.
 *
 * Inside the window [a, b):
 *  - requests: those that started in it; completed: those that ended
 *    soundly in (a, b]; rps = completed / (b - a);
 *  - output_tps: every sound request's output tokens spread evenly over its
 *    decode span [start + TTFT, end], the share of that span inside the
 *    window counted (a span of zero length counts whole where it falls);
 *  - TTFT and TPOT p50 and p99 (tb_stats, type 7) of the sound requests
 *    that started in it.
 *
 * Pure: per-request times in, numbers and JSON out; a sharded cell calls it
 * on the union of its shards' requests (the times on one timeline).
 */
#ifndef TB_STEADY_H
#define TB_STEADY_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/tb_util.h"

/* The share of the reference the in-flight count must hold. */
#define TB_STEADY_SHARE 0.95

/* A span of time in microseconds from the cell's start, [start, end). */
struct tb_steady_span {
  int64_t start_us, end_us;
};

/* One request that started: times in microseconds from the cell's start. */
struct tb_steady_req {
  int64_t start_us, end_us; /* end_us < start_us is taken as start_us */
  bool ok;                  /* ended soundly (its figures count) */
  double ttft_ms;           /* NAN: none */
  double tpot_ms;           /* NAN: none (one output token, or failed) */
  int64_t tokens;           /* output tokens */
};

struct tb_steady {
  bool found;
  const char *reason; /* why none (static text), or NULL */
  int64_t peak;       /* the most in flight at once */
  int64_t target;     /* the cell's target (0: none; the level is the reference) */
  double level;       /* without a target: the mean in flight over the offered
                         span (NAN: no span, fewer than 2 arrivals or at one instant) */
  double threshold;   /* TB_STEADY_SHARE x the reference (NAN: no level) */
  int64_t start_us, end_us;
  int64_t requests, completed;
  double rps, output_tps;
  double ttft_p50, ttft_p99, tpot_p50, tpot_p99; /* ms; NAN when none */
};

/*
 * The window of the n requests r (any order; not changed) against target
 * (0: none) into *out.  The count is of the nbusy spans busy (a closed-loop
 * cell's users), or with busy NULL of the requests' own [start, end).
 * found is false, with the reason, when n is 0, when the count never
 * reaches the threshold (a target the cell never reached) or when the span
 * it holds has no length; without a target, when fewer than 2 requests
 * arrived, all at one instant, or the level is 0 (no request in flight
 * before the last arrival).
 */
void tb_steady_compute(const struct tb_steady_req *r, size_t n, const struct tb_steady_span *busy,
                       size_t nbusy, int64_t target, struct tb_steady *out);

/*
 * The requests of a rate cell's `samples` (start_ms, end_ms, ttft_ms,
 * tpot_ms, output_tokens: the first TB_RESULT_SAMPLES_MAX requests) into
 * *out (tb_xmalloc'd; the caller frees), their count returned: a request
 * with no start (dropped) is left out, one with a TTFT ended soundly.  So a
 * merge of several cells' samples (a sharded cell's, on one timeline) can
 * compute the window of their union.  0 (and *out NULL) when samples holds
 * no start_ms or its arrays differ in length.
 */
size_t tb_steady_reqs_from_samples(const json_t *samples, struct tb_steady_req **out);

/* The cell's `steady` object (new reference):
 *   {found, reference ("target"|"level"; "peak" in documents before the
 *    level rule), peak_in_flight, target (when one) or level (without:
 *    null when none), threshold (null when no level), and when found: start_s, end_s, length_s, requests,
 *    completed, rps, output_tps, ttft_ms {p50, p99}, tpot_ms {p50, p99};
 *    when not: reason} */
json_t *tb_steady_json(const struct tb_steady *w) TB_MUST_CHECK;

#endif
