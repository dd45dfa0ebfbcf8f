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
 * The self-checks of a cell that these figures feed are result/tb_checks.
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

#include "engine/tb_discover.h"
#include "base/tb_util.h"
#include "result/tb_checks.h"
#include "result/tb_result.h"

/* One sample a second (the rate; the engine polls /metrics more
 * often for readiness, and only one body a second is read here). */
#define TB_SAMPLER_INTERVAL_NS 1000000000LL
/* An hour of samples: a cell longer than that keeps its first hour and says
 * `truncated` (a series of 3,600 points is ~100 KiB of JSON). */
#define TB_SAMPLER_MAX_POINTS TB_RESULT_SERIES_MAX_POINTS
/* A /metrics body over 1 MiB is not parsed for the series: a real vLLM or
 * SGLang text is 20–200 KiB, and parsing stays well under a millisecond of
 * the event loop (the engine's own cap on the body is larger). */
#define TB_SAMPLER_BODY_MAX (1024u * 1024u)

/* One /metrics text, in the engine's dialect.  NAN where the engine does
 * not publish the figure. */
struct tb_sampler_point {
  double running, waiting;
  double kv_frac;                     /* KV-cache usage, 0..1 */
  double preemptions;                 /* counter */
  double prefix_hits, prefix_queries; /* counters */
  double prefix_rate;                 /* gauge 0..1, used without the counters */
  double gen_tokens;                  /* counter */
};

/* Reads text in kind's dialect into *p.  False when the running gauge is
 * missing (not this engine's metrics, or a gateway's own). */
bool tb_sampler_parse(enum tb_engine_kind kind, const char *text, size_t len,
                      struct tb_sampler_point *p) TB_MUST_CHECK;

struct tb_sampler {
  int64_t t0, next; /* window start, next sample due (ns) */
  size_t n, cap;
  double *t, *running, *waiting, *kv, *preempt, *hits, *queries, *rate, *gen;
  unsigned skipped; /* bodies unread: over the cap or unparseable */
  bool truncated;
  bool on;                 /* begun */
  const char *gen_unknown; /* why the engine's tokens/s is left out (static) */
};

/* Starts a series at the window's start t0 (monotonic ns). */
void tb_sampler_begin(struct tb_sampler *s, int64_t t0);
/* True when a body read at now would be sampled. */
bool tb_sampler_due(const struct tb_sampler *s, int64_t now);
/* Offers the /metrics body read at now (monotonic ns); sampled when due. */
void tb_sampler_feed(struct tb_sampler *s, enum tb_engine_kind kind, int64_t now, const char *body,
                     size_t len);
/* Adds one parsed point at now (ns), as tb_sampler_feed does when due. */
void tb_sampler_add(struct tb_sampler *s, int64_t now, const struct tb_sampler_point *p);
void tb_sampler_free(struct tb_sampler *s);
/* The points of s read in [w0, w1] (monotonic ns) into out (a new series
 * begun at w0: its t_s count from w0), with s's skipped count and why its
 * tokens/s is unknown.  A sharded cell's series is its coordinator's watch
 * cut to the shards' common window.  Free out with tb_sampler_free. */
void tb_sampler_cut(const struct tb_sampler *s, int64_t w0, int64_t w1, struct tb_sampler *out);

/*
 * The cell's `server_series` (new reference), or NULL without samples:
 *   {interval_s, t_s[], running[], waiting[], kv_pct[], preemptions[]
 *    (since the first sample), prefix_hit_pct[] (per interval), gen_tps[]
 *    (per interval; null at the first), skipped, truncated,
 *    summary: {samples, peak_kv_pct, preemptions, prefix_hit_pct,
 *              server_tps, client_tps, server_client_ratio}}
 * Where the engine's generation counter is not counted per step (llama.cpp),
 * gen_tps, server_tps and the ratio are left out and the summary says why in
 * server_tps_unknown.
 * An array whose figure the engine does not publish is left out, as is a
 * summary member that cannot be computed.  client_tps: the cell's total
 * tok/s (NAN: left out).
 */
json_t *tb_sampler_json(const struct tb_sampler *s, double client_tps) TB_MUST_CHECK;

#endif
