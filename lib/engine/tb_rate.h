/*
 * tb_rate: rate cells and sweeps (issue 15; docs/engine.md, "Rate cells").
 *
 * A rate cell (phase "rate") sends requests that arrive at a given rate,
 * on a seeded schedule (tb_arrival: Poisson, gamma with a burstiness
 * factor, or constant), for rate_duration_s or rate_requests requests, each
 * with a prompt of its own (cold: no prefix shared with another request;
 * or, with the spec's prefix, a system prompt shared by all and one of
 * prefix.suffixes user messages) and its own output length.  It is an open-loop generator: a request
 * starts at its scheduled time however many are in flight, on its own
 * connection slot, from a timerfd deadline on the cell's epoll loop; what
 * is late is measured (schedule_lag_ms = actual start - scheduled start),
 * never hidden.  Arrival times are the kernel's receive stamps, as in the
 * matrix (tb_direct, tb_rxts).
 *
 * Conversations (the spec's conversation.turns): each arrival starts a
 * conversation; its turn t is sent a think time (seeded) after turn t - 1
 * ended and carries the earlier turns, the server's answers as it streamed
 * them (tb_convo).  A failed turn ends its conversation (abandoned).  The
 * cell's arrivals are conversations; its figures count requests, and per
 * turn (TTFT, prompt tokens, the server's cached share).
 *
 * Closed-loop cells (a sweep over concurrency): N users, each sending its
 * next request (or conversation turn) when its last one ended, plus the
 * think time in a conversation, for rate_duration_s (or until
 * rate_requests arrivals started).  Lag is then actual start minus the
 * moment the user was due.
 *
 * A sweep looks for the highest rate (or concurrency) at which at least
 * attainment_pct of the requests meet every SLO of the spec: values double
 * from the minimum until one fails (or the maximum), then bisection to the
 * step, at most max_probes probes; each probe is a cell (the search:
 * tb_plan_sweep_next).  Which cells and how long they take: tb_plan.
 *
 * A cell's key: phase "rate", context = the mean prompt tokens asked,
 * concurrency = the cell's number in the run (1, 2, ...: the spec's rates
 * in order, then the sweep's probes), rate_rps (open loop) or users
 * (closed loop).  Its figures: see
 * tb_ratefig_cell in tb_ratefig.c and docs/engine.md.
 *
 * The module owns its loop (an epoll set, a timerfd, a tb_direct of its
 * own); the engine calls tb_rate_run after the matrix, on its thread.  Its
 * files: tb_rate.c (the settings, the driver, a merged cell), tb_ratecell
 * (one cell's loop, and the structures the files share), tb_ratefig (a
 * cell's figures), tb_sweep (the sweep's search) and tb_tracecell (the
 * trace cell).
 */
#ifndef TB_RATE_H
#define TB_RATE_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include "engine/tb_discover.h"
#include "spec/tb_plan.h"
#include "spec/tb_spec.h"
#include "base/tb_util.h"

struct tb_telemetry;
struct tb_engine_shard;
struct tb_samples;
struct tb_cache_reset_memo;

/* Requests a rate cell keeps in flight at most (one connection each);
 * an arrival with none free is an error of that request ("dropped"). */
#define TB_RATE_MAX_INFLIGHT 2048u
/* Conversations alive in a cell at most (in flight or thinking); an
 * arrival past it is dropped, as is one while the live conversations'
 * text is over the cell's memory budget. */
#define TB_RATE_MAX_SESSIONS 8192u
/* Distinct prompt lengths of a uniform input distribution (each prompt is
 * sized on the server's tokenizer once). */
#define TB_RATE_INPUT_POOL 8u

/* What a run lends its rate cells (all borrowed). */
struct tb_trace;

struct tb_rate_env {
  const struct tb_discover *d; /* endpoint: base_url, model, max_model_len */
  const char *api_key;         /* may be NULL; never logged */
  const char *run_id;
  size_t cell_memory_max; /* SSE buffers of a cell, all requests */
  bool kernel_stamps;
  bool server_series;           /* /metrics sampled during cells (tb_ratewatch) */
  bool curl_streams;            /* no tb_direct (tb_engine_target): the cells fail */
  bool error_bodies;            /* tb_engine_hooks.error_bodies */
  const json_t *done_cells;     /* cells of an earlier attempt (may be NULL) */
  const struct tb_trace *trace; /* the spec's trace (tb_engine_target.trace) or NULL */
  void *cls;
  /* a finished cell (stolen); false stops the run */
  bool (*emit)(void *cls, json_t *cell);
  /* a cell of done_cells kept as it is (borrowed) */
  void (*keep)(void *cls, const json_t *cell);
  /* the cell about to run (its key, borrowed); may be NULL */
  void (*progress)(void *cls, const json_t *key);
  /* polled every 100 ms; true cancels; may be NULL */
  bool (*cancelled)(void *cls);
  /* issue 26: the run's GPU telemetry (may be NULL) and the endpoint
   * object its price and GPUs come from (may be NULL): each valid cell's
   * cost and energy (tb_telemetry_cell) */
  struct tb_telemetry *telemetry;
  const json_t *endpoint;
  /* issue 24: a rate cell of the spec's rates (not a sweep's probe, not
   * the trace's) about to run, its key in cell: true when the caller's
   * shards measured it (cell filled; window_ns[0]: the common start t0 on
   * this process's monotonic clock, 0 unknown); may be NULL */
  bool (*shard_cell)(void *cls, double rate, unsigned index, json_t *cell, int64_t window_ns[2]);
  /* this run is one shard of a rate cell (tb_engine_shard; NULL: whole):
   * the spec's one rate cell, numbered shard->index, its arrivals those of
   * shard k of n, its start t0 from shard->start, no cache reset and no
   * drain wait (the coordinator's), its samples into shard->samples */
  struct tb_engine_shard *shard;
  /* the run's memory of its cache resets (tb_cachereset.h; NULL: every
   * cell asks) */
  struct tb_cache_reset_memo *reset_memo;
};

enum tb_rate_status {
  TB_RATE_OK = 0,
  TB_RATE_CANCELLED = 1
};

/* The settings of rate cells for the result header's settings.rate (new). */
json_t *tb_rate_settings_json(const struct tb_spec *s) TB_MUST_CHECK;

/*
 * Runs the rate cells of plan p (tb_plan: its spec's rates), then its
 * sweep, against env.  Every cell goes out through env->emit (or env->keep
 * when done_cells holds it).  *sweep: a new object describing the sweep
 * (probes, found_rps), or NULL when p has none.  A setup problem (no
 * plain-HTTP transport, prompts that cannot be built) makes each cell an
 * error with the reason.
 */
enum tb_rate_status tb_rate_run(const struct tb_plan *p, const struct tb_rate_env *env,
                                json_t **sweep) TB_MUST_CHECK;

/*
 * A sharded rate cell's figures from its shards' merged samples m
 * (tb_samples_merge of every shard; m->rate.on), written into cell (its key
 * set) by the writer of a one-process cell: requests, completed, errors,
 * goodput and tokens add; TTFT, TPOT, time between tokens, e2e and schedule
 * lag are percentiles of the union; offered and achieved rates, in flight
 * and the inter-arrival CV over the common timeline (the union's starts
 * and ends after t0).  No per-request samples arrays, no server series, no
 * server timings.  Sorts m's series.  false with why when m is no rate
 * cell's.
 */
bool tb_rate_cell_merged(const struct tb_spec *s, struct tb_samples *m, json_t *cell, char *err,
                         size_t errlen);

/* For the rate cells' own files (tb_sweep, tb_tracecell; struct rrun:
 * tb_ratecell.h). */
struct rrun;

/* One cell of run r, open loop at rate (users 0) or closed loop with
 * users, role "rate" or "sweep": kept from done_cells, or measured and
 * emitted.  The cell's attainment into *att (NAN when not valid).  false:
 * stop. */
bool tb_rate_one_cell(struct rrun *r, double rate, unsigned users, const char *role, double *att);

/* The server's prefix cache emptied before a cell of r when the spec says
 * so (cache: reset), the outcome in cell (tb_cachereset). */
void tb_rate_cache_reset(const struct rrun *r, json_t *cell);

#endif
