/*
 * tb_ratewatch: the server's view and the self-checks of a rate cell
 * (issue 15, items 5 and 6; docs/engine.md, "Self-checks").
 *
 * A rate cell's loop (tb_rate) must never wait on the server's /metrics, so
 * a watch samples them on a thread of its own: from just before the cell's
 * first arrival until its last request ended, it GETs <base_url>/metrics
 * once a second (tb_http: the process's egress policy and TLS trust, a
 * short timeout, bodies over TB_SAMPLER_BODY_MAX not read) and feeds a
 * tb_sampler in the engine's dialect, so the cell's `server_series` has the
 * shape of a decode cell's, plus a last sample when the cell ended.  Before
 * the cell it reads /metrics once
 * (drained_before); after the cell it waits, up to the drain timeout, for
 * running = waiting = 0 (drained_after).  It also reads the cell thread's
 * CPU time over the cell (the client's CPU share).
 *
 * The checks of the cell (tb_checks_json) are judged from the cell's own
 * figures (schedule_lag_ms, interarrival_cv, dropped, kernel_stamped,
 * max_in_flight; users in closed loop) and the watch's (the series' peak
 * and mean of running + waiting).  An endpoint without the engine's gauges
 * (a gateway, an unknown engine) has no series, and drained is unknown
 * (null).
 *
 * Threads: begin, end, cell and free are called from the cell's thread;
 * the sampler belongs to the watch's thread until end joins it.
 */
#ifndef TB_RATEWATCH_H
#define TB_RATEWATCH_H

#include <jansson.h>
#include <stdbool.h>

#include "engine/tb_discover.h"
#include "base/tb_util.h"

/* The /metrics call's total timeout: under the interval, so a slow server
 * costs a sample, never the pace. */
#define TB_RATEWATCH_TIMEOUT_MS 800L

struct tb_ratewatch;

/*
 * Before a rate cell, on its thread: reads /metrics once (drained before),
 * then, when series is true and the endpoint has the engine's gauges,
 * starts sampling once a second.  d and api_key are borrowed until
 * tb_ratewatch_free.  Never NULL (a thread that cannot start: no series).
 */
struct tb_ratewatch *tb_ratewatch_begin(const struct tb_discover *d, const char *api_key,
                                        bool series) TB_MUST_CHECK;

/*
 * When the cell's last request ended, on the same thread: stops sampling
 * and the CPU clock, reads /metrics once more (the series' last sample, at
 * the cell's end), then waits up to drain_s seconds (polling every 20 ms)
 * for the server to be drained.  drain_s <= 0 (a cancelled cell): no wait,
 * drained after unknown.  cancelled (may be NULL) is asked at every poll;
 * true ends the wait (drained after unknown).
 */
void tb_ratewatch_end(struct tb_ratewatch *w, double drain_s, bool (*cancelled)(void *cls),
                      void *cls);

/*
 * Adds `server_series` and `checks` to a valid rate cell (nothing to a cell
 * in error).  Reads from cell: rate_rps, arrival, users, turns, arrivals_s,
 * schedule_lag_ms.p99, interarrival_cv, requests_started, dropped,
 * max_in_flight, kernel_stamped, total_tps.
 * kernel_wanted: kernel receive stamps were asked for.  w NULL: a cell no
 * watch saw (a sharded cell's merge, issue 24): no server series, the
 * drains, the server's peak and the client's CPU unknown, the rest judged.
 */
void tb_ratewatch_cell(const struct tb_ratewatch *w, json_t *cell, bool kernel_wanted);

/*
 * A sharded decode cell's server view and checks (issue 34, item 5): the
 * job's worker watches the server while the shards measure (begun before
 * the barrier opened, ended after the merge), and the valid merged cell
 * gets `server_series` cut to the shards' common window [w0, w1] (this
 * process's monotonic ns, the common start mapped through its own clock
 * offset; 0: unknown, no series) and the decode checks: conc requested
 * against the server's mean running gauge over the window (else the
 * shards' streams in flight, added), the drains (drained_after the
 * caller's wait after the cell), kernel stamps from the merged figure; the
 * client's CPU share is each shard's and left out.
 */
void tb_ratewatch_decode_cell(const struct tb_ratewatch *w, json_t *cell, int64_t w0, int64_t w1,
                              unsigned conc, bool kernel_wanted, int drained_after);

/*
 * A sharded rate cell's watch (issue 34, item 5), after tb_ratewatch_end:
 * its series cut to the shards' common span [w0, w1] (this process's
 * monotonic ns, t0 through its own clock offset), t_s from w0 as the
 * shards' timeline counts, and the client's CPU share unknown (each
 * shard's own).  tb_ratewatch_cell then judges the merged cell with it.
 */
void tb_ratewatch_window(struct tb_ratewatch *w, int64_t w0, int64_t w1);

/* Stops a watch still running and frees it.  NULL is fine. */
void tb_ratewatch_free(struct tb_ratewatch *w);

#endif
