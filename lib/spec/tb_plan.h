/*
 * tb_plan: the one plan of a job's cells (issue 22).  Pure: a parsed spec
 * (tb_spec) and what discovery found go in; out come the cells in the order
 * the engine runs them, each with its window and settle, and the job's
 * bound in seconds.  Everyone who needs the plan reads it here:
 *
 *   engine    tb_engine_run: the matrix (contexts, prefill scouts,
 *             concurrency, repeats, which cells cannot run), the header's
 *             lists, the effective KV budget, progress's total
 *   rate      tb_rate_run: the rate cells and the sweep's probes
 *   api       the job-size limit (tb_tenancy: TOKBENCH_LIMIT_JOB_SECONDS)
 *             from tb_plan_job_seconds, before anything is discovered
 *
 * The order: repeats passes over the matrix (each pass the same cells: by
 * context ascending over the union of decode and prefill contexts, at each
 * context its prefill scout first, then its decode cells by concurrency),
 * then the rate cells (the spec's rates in order), the trace cell (the
 * spec's trace), then the sweep's probes.
 * The plan holds the matrix once (cells[0 .. n_matrix)), the passes being
 * repeats.
 *
 * Lists the spec leaves to the engine (contexts, prefill_contexts) come from
 * the server's max_model_len: 8K, 16K, ... 128K below the top context, and
 * the top one (tb_plan_top_context); the prefill scouts are those contexts
 * (not 0) and the full length.  A server that does not say its length is
 * taken as TB_PLAN_DEFAULT_LENGTH long.  Before discovery (facts NULL: the
 * api at submit) the length is not known at all, and the plan counts the
 * most the engine may pick: a model of TB_SPEC_MAX_CONTEXT tokens (6
 * decode contexts and 7 scouts with the defaults).
 *
 * A matrix cell's gate says whether it runs: skipped when context +
 * max_output passes max_model_len or concurrency passes the server's
 * max running requests, over capacity by the rule of METHOD.md
 * (tb_over_capacity) on the KV budget (the spec's kv_budget, else the
 * server's).  A scheduler cap the engine measures during the run is the
 * engine's own, not the plan's.
 *
 * The bound is what TOKBENCH_LIMIT_JOB_SECONDS limits: matrix cells x
 * repeats x (duration_s + settle_s), a prefill scout counted as one cell
 * and gated cells too, plus each rate cell's arrivals (rate_requests /
 * rate when given, else rate_duration_s; a conversation's later turns
 * adding (turns - 1) x think_time_s), the sweep counted at max_probes
 * probes of its first (lowest, so longest) one.
 */
#ifndef TB_PLAN_H
#define TB_PLAN_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "spec/tb_spec.h"
#include "base/tb_util.h"

/* The top decode context as the seeds choose it: the largest multiple of
 * 1024 with context + max_output + TB_PLAN_CTX_MARGIN <= max_model_len
 * (262144, 4096 -> 257024 = "251K").  With less than 1024 tokens of room,
 * the room itself (a small model still gets one context); <= 0 when no
 * room is left. */
#define TB_PLAN_CTX_MARGIN 64
int64_t tb_plan_top_context(int64_t max_model_len, int64_t max_output);

/* The length of a server that does not say its max_model_len. */
#define TB_PLAN_DEFAULT_LENGTH 262144

/* What discovery found that the plan depends on (tb_discover); <= 0:
 * the server did not say. */
struct tb_plan_facts {
  int64_t max_model_len;
  int64_t kv_budget;   /* tokens */
  int64_t max_running; /* requests the server runs at once */
};

enum tb_plan_phase {
  TB_PLAN_PREFILL, /* a prefill scout: one request, its TTFT */
  TB_PLAN_DECODE,  /* a decode cell: context x concurrency */
  TB_PLAN_RATE,    /* a rate cell of the spec's rates */
  TB_PLAN_SWEEP,   /* a probe of the sweep (at most max_probes) */
  TB_PLAN_TRACE,   /* the spec's trace replayed (a rate cell of its own) */
};

/* Whether a matrix cell runs (rate cells and probes always do). */
enum tb_plan_gate {
  TB_PLAN_RUN = 0,
  TB_PLAN_TOO_LONG, /* context + max_output > max_model_len: skipped */
  TB_PLAN_TOO_MANY, /* concurrency > the server's max running: skipped */
  TB_PLAN_OVER_KV,  /* concurrency x (context + max_output) > KV budget */
};

struct tb_plan_cell {
  enum tb_plan_phase phase;
  enum tb_plan_gate gate;
  int64_t context;     /* matrix: tokens (0: no prompt context) */
  int64_t concurrency; /* decode: requests at once; prefill 1; else 0 */
  /* rate: arrivals per second; sweep: its first probe's (over rate) or
   * users (over concurrency); 0 for the later probes, which follow from
   * the earlier ones' outcomes (tb_plan_sweep_next) */
  double rate_rps;
  unsigned users;
  /* what the bound counts for it: a matrix cell duration_s and settle_s;
   * a rate cell or probe its arrivals (a later probe: at most the
   * first's), no settle */
  double window_s, settle_s;
};

struct tb_plan {
  const struct tb_spec *spec; /* borrowed */
  bool matrix;                /* false: rate cells alone (rates or a sweep, and none
                       * of contexts, concurrency, prefill_contexts given) */
  bool rate;                  /* rate cells or a sweep */
  bool sweep, sweep_closed;   /* a sweep; over concurrency (closed loop) */
  bool trace;                 /* the spec's trace: one trace cell after the rate cells */
  /* the matrix's axes, sorted (empty without a matrix) */
  int64_t contexts[TB_SPEC_MAX_LIST];
  size_t n_contexts;
  int64_t prefill[TB_SPEC_MAX_LIST];
  size_t n_prefill;
  int64_t concurrency[TB_SPEC_MAX_LIST];
  size_t n_concurrency;
  int64_t max_concurrency; /* the largest of them (1 without a matrix) */
  unsigned repeats;        /* passes over the matrix */
  int64_t kv_budget;       /* the spec's override, else the server's (<= 0 unknown) */
  bool kv_override;
  struct tb_plan_facts facts; /* as given (zeros before discovery) */
  struct tb_plan_cell *cells; /* n_matrix + n_rate + n_sweep, in order */
  size_t n_cells, n_matrix, n_rate, n_sweep, n_trace;
  double bound_s;
};

/*
 * The plan of spec (borrowed, kept in p->spec; from tb_spec_parse) on a
 * server with facts (borrowed; NULL before discovery).  Free with
 * tb_plan_free.
 */
void tb_plan_init(struct tb_plan *p, const struct tb_spec *spec, const struct tb_plan_facts *facts);
void tb_plan_free(struct tb_plan *p);

/* The bound of a job spec (borrowed JSON; tb_spec_job's output) before
 * discovery, in seconds; negative when it does not parse.  trace_span_s:
 * the span of the trace the spec replays, first arrival to last, in the
 * trace's own seconds (its summary's span_s; 0 when none or unknown): a
 * trace cell whose spec gives no duration_s replays all of it from
 * start_s, at speedup x rate_scale, and counts that long. */
double tb_plan_job_seconds(const json_t *spec, double trace_span_s);

/* Shards of a decode cell (issue 24; worker_shard.h runs them): how many a
 * cell of conc streams gets, the spec's shards (0: "auto", as many as
 * max_streams per shard needs: ceil(conc / max_streams)), at most conc and
 * TB_SPEC_MAX_SHARDS, at least 1. */
int tb_plan_shards(int64_t spec_shards, int64_t conc, int64_t max_streams);
/* Shard k of n's share of a cell's conc streams: conc / n, one more for
 * k < conc mod n, so that the shares add up to conc; 0 for k outside
 * [0, n). */
int64_t tb_plan_shard_share(int64_t conc, int n, int k);
/* Shards of a rate cell of the spec's rates (open loop at rate; its
 * arrival i goes to shard i mod n): the spec's shards, or for "auto" (0)
 * as many as max_rps arrivals per second per shard needs:
 * ceil(rate / max_rps); at most arrivals when the spec counts them
 * (rate_requests; 0: not counted), at most TB_SPEC_MAX_SHARDS, at least 1.
 * Sweep probes and the trace cell are not sharded. */
int tb_plan_rate_shards(int64_t spec_shards, double rate, double max_rps, int64_t arrivals);
/* How long a rate cell's arrivals last at rate: rate_requests / rate when
 * the spec counts requests, else rate_duration_s (its skew limit's window). */
double tb_plan_rate_window_s(const struct tb_spec *s, double rate);

/*
 * The sweep's next probe: given the probes so far (vals[i] and whether
 * each passed, in order), the bounds and step of sw (its rps ones, or its
 * concurrency ones when sw->over is "concurrency"), the next value to
 * probe, or a value <= 0 when the search is over (then *found: the highest
 * passing value, 0 when none; *hi: the lowest failing value above it, 0
 * when none).  The first probe (n 0) is the lowest value.
 */
double tb_plan_sweep_next(const struct tb_spec_sweep *sw, const double *vals, const bool *pass,
                          size_t n, double *found, double *hi);

#endif
