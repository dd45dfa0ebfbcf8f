/*
 * worker_shard: the merge of a sharded cell by the worker running its job
 * (issue 24; lib/db/tb_shards, lib/result/tb_samples).
 */
#ifndef WORKER_SHARD_H
#define WORKER_SHARD_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "db/tb_db.h"
#include "db/tb_queue.h"
#include "db/tb_shards.h"
#include "spec/tb_spec.h"

/* A stored shard's samples do not decode or merge: the attempt cannot be
 * judged (err says which shard and why). */
#define WORKER_SHARD_BAD (-3)

/*
 * When every shard of barrier key is done: their samples merged into cell
 * (the caller's cell object, its phase, context and concurrency already
 * set): the figures of the union (tb_samples_cell), shards {count, where,
 * skew, clock uncertainty, merge_ms: reading, decoding, merging and
 * writing them} and the skew self-check over window_s (the cell
 * becomes an error above it).  client_ready as tb_samples_cell.  Returns 1
 * (merged), 0 (not all done yet), WORKER_SHARD_BAD, or TB_DB_SOFT /
 * TB_DB_HARD.
 */
int worker_shard_merge(struct tb_db *db, const struct tb_shards_key *key, double window_s,
                       const char *client_ready, json_t *cell, char *err, size_t errlen);

/* The same for a rate cell (issue 24): the union of the shards' samples
 * written by the rate cells' writer (tb_rate_cell_merged) with spec, and
 * the shards' skew over window_s (its arrivals' window). */
int worker_shard_merge_rate(struct tb_db *db, const struct tb_shards_key *key,
                            const struct tb_spec *spec, double window_s, json_t *cell, char *err,
                            size_t errlen);

struct worker_ctx;

/* The settings that bound a shard and the barrier (worker config keys,
 * TB_SHARD_CFG_KEYS), handed in struct worker_ctx. */
struct worker_shard_cfg {
  int64_t max_streams; /* TOKBENCH_SHARD_MAX_STREAMS: streams one shard drives
                        * at most ("auto" splits a cell into as many shards) */
  int64_t max_rps;     /* TOKBENCH_SHARD_MAX_RPS: arrivals per second one shard
                        * of a rate cell sends at most (the same for "auto") */
  double barrier_s;    /* TOKBENCH_SHARD_BARRIER_S: how long a barrier waits
                        * for its shards */
  double lead_s;       /* TOKBENCH_SHARD_LEAD_MS / 1000: t0 is this long after
                        * the last shard is ready */
  int lease_s;         /* TOKBENCH_SHARD_LEASE_S: a shard's lease, renewed
                        * every second while it runs */
  int attempts;        /* TOKBENCH_SHARD_ATTEMPTS: tries at a sharded cell */
};

#define TB_SHARD_CFG_KEYS                                                                      \
  { "TOKBENCH_SHARD_MAX_STREAMS", "2048",                                                      \
    "streams one shard of a sharded cell drives at most (shards: \"auto\")", false },          \
    { "TOKBENCH_SHARD_MAX_RPS", "500",                                                         \
      "arrivals per second one shard of a sharded rate cell sends at most (shards: \"auto\")", \
      false },                                                                                 \
    { "TOKBENCH_SHARD_BARRIER_S", "60",                                                        \
      "seconds a sharded cell waits for all its shards to be claimed and warm", false },       \
    { "TOKBENCH_SHARD_LEAD_MS", "500",                                                         \
      "milliseconds between the last shard ready and the common start t0", false },            \
    { "TOKBENCH_SHARD_LEASE_S", "5",                                                           \
      "a shard's lease in seconds: a silent shard fails its cell's attempt after it", false }, \
  {                                                                                            \
    "TOKBENCH_SHARD_ATTEMPTS", "3", "attempts at a sharded cell, each with all shards", false  \
  }

/* How many shards a decode cell of conc streams gets: the spec's shards
 * (0: "auto", ceil(conc / max_streams)), at most conc and 64, at least 1. */
int worker_shard_count(const struct worker_shard_cfg *cfg, int64_t spec_shards, int64_t conc);

/* What the job's worker knows when the engine hands it a sharded cell. */
struct worker_shard_job {
  struct worker_ctx *w;
  const struct tb_queue_lease *lease;
  const struct tb_spec *spec; /* parsed */
  const json_t *job_spec;     /* as stored: each shard parses it again */
  const char *endpoint_id, *run_id;
  bool (*cancelled)(void *cls); /* the job's cancel poll */
  void *cls;
  json_t *passes; /* owned by the caller: how many times each sharded decode
                   * cell was measured (its repeats: one barrier each) */
  /* this run's own mark in its barriers' keys (16 hex, random): a job
   * handed back keeps its attempt number, and its next run must not meet
   * the barriers of the last one */
  char tag[17];
};

/*
 * The engine's hook for a decode cell (phase, context, concurrency set in
 * cell): when the spec shards it (worker_shard_count > 1), the cell is
 * measured by shards (with repeats, each pass's measurement whole, all its
 * shards together, a barrier of its own: "/r<pass>" on its key): a barrier of n open shards, their
 * shares of conc, claimed by idle workers (worker_shard_try), merged
 * (worker_shard_merge).  A failed attempt (barrier timeout, a shard's lease
 * lapsed, a bad blob) is measured again whole, all shards together, up to
 * TOKBENCH_SHARD_ATTEMPTS times; then the cell is an error with the last
 * reason.  Returns false (cell untouched) when the cell is not sharded.
 * window_ns: the merged attempt's common window [t0, t0 + duration_s] on
 * this process's monotonic clock (t0 through its own clock offset to the
 * database), left 0 when the offset could not be read.
 */
bool worker_shard_cell(const struct worker_shard_job *j, int64_t ctx, int64_t conc, json_t *cell,
                       int64_t window_ns[2]);

/*
 * The engine's hook for a rate cell of the spec's rates (open loop at rate,
 * the index-th cell of the run, its key in cell): when the spec shards it
 * (tb_plan_rate_shards > 1; rate cells have no repeats), its n shards each
 * walk the cell's one seeded schedule and send the arrivals i with
 * i mod n == k, t0 their schedule's common origin; merged by
 * worker_shard_merge_rate.  Attempts and failures as worker_shard_cell.
 */
bool worker_shard_rate(const struct worker_shard_job *j, double rate, unsigned index, json_t *cell,
                       int64_t window_ns[2]);

/* Claims one shard of any sharded cell and runs it to its end (store, or
 * the barrier's failure).  Returns true when it claimed one. */
bool worker_shard_try(struct worker_ctx *w);

#endif
