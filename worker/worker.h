/*
 * tokbench-worker internals, shared by main.c and the worker_*.c modules
 * (linked into build/libworker.a so that unit tests can reach them).
 *
 *   worker_spec.c  what the worker adds to a job spec: its endpoint, a run id
 *   worker_trace.c the uploaded trace a job names, loaded for the engine
 *   worker_beat.c  the heartbeat thread: renews the lease, reads cancel
 *   worker_job.c   runs one claimed job with the engine, start to finish
 *   worker_shard.c the merge of a sharded cell's stored shards
 *                  (worker_shard.h)
 *   worker_prov.c  the worker's part of a result's provenance
 */
#ifndef WORKER_H
#define WORKER_H

#include <jansson.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>

#include "base/tb_crypto.h"
#include "db/tb_db.h"
#include "db/tb_queue.h"
#include "engine/tb_engine.h"
#include "base/tb_util.h"
#include "worker_shard.h"

/* ----------------------------------------------------------- worker_spec */

/*
 * The report header's endpoint block for the engine (struct
 * tb_engine_target's endpoint): name, hardware, engine (with engine_hint as
 * "hint" unless the engine object has one) and launch_command.  The job's
 * settings are not here: the worker parses them with tb_spec_parse, so the
 * only thing it adds to a job spec is its endpoint.  Returns a new object.
 */
json_t *worker_endpoint_header(const struct tb_queue_endpoint *ep);
/* A run id unique to this execution of the job: "<job id>.<attempt>.<6 hex>"
 * (prompts of two runs never share a cached prefix).  New string. */
char *worker_run_id(const char *job_id, int attempt);

/* ---------------------------------------------------------- worker_trace */

struct tb_spec;
struct tb_trace;
/*
 * The trace the job's spec names by trace.id (an upload, POST /v1/traces),
 * read from the job's own project and parsed by tb_trace_parse into *t,
 * as `tokbench run --trace FILE` reads a file; the engine replays it
 * (tb_engine_target.trace).  t->id is the trace's id and t->sha256 its
 * bytes', which the trace cell records.  1 loaded; 0 when the spec names
 * no uploaded trace (nothing to load; the engine says so in the trace
 * cell when the spec has a trace object); WORKER_TRACE_BAD with *why
 * (new) when the trace cannot be replayed (gone, another format,
 * malformed); TB_DB_SOFT / TB_DB_HARD on database errors.  A spec that
 * leaves trace.format out gets the stored trace's in spec->trace.format.
 */
#define WORKER_TRACE_BAD 2
int worker_trace_load(struct tb_db *db, const struct tb_queue_job *job, struct tb_spec *spec,
                      struct tb_trace *t, char **why) TB_MUST_CHECK;

/* ----------------------------------------------------------- worker_beat */

/*
 * The heartbeat: one thread, its own database connection (LISTEN
 * tb_job_changed), alive for the whole process.  The main thread hands it
 * the current lease; it renews it every interval and at once when a
 * tb_job_changed notification arrives (a cancel), and publishes what it
 * learns.  Everything shared is behind mu.
 */
struct worker_beat {
  pthread_t thread;
  struct tb_db *db; /* owned by the thread while it runs */
  int lease_s, interval_s;

  pthread_mutex_t mu;
  bool quit;
  uint64_t gen; /* bumped at every set/clear */
  bool has_job;
  struct tb_queue_lease lease;
  bool cancel_requested; /* for gen */
  bool lease_lost;       /* for gen */
  bool ending;           /* for gen: the job's last write is under way */
};

/* Starts the thread (takes db).  False on failure (db closed). */
bool worker_beat_start(struct worker_beat *b, struct tb_db *db, int lease_s,
                       int interval_s) TB_MUST_CHECK;
/* The lease to renew from now on, or none (NULL). */
void worker_beat_set(struct worker_beat *b, const struct tb_queue_lease *lease);
/* The job's last write (its end, or its hand-back) begins: a renewal
 * refused from now on is most often that write's doing, and is not logged
 * as a lost lease (the write's own answer tells whether the lease held). */
void worker_beat_ending(struct worker_beat *b);
/* What the thread learnt about the current lease. */
void worker_beat_state(struct worker_beat *b, bool *cancel_requested, bool *lease_lost);
/* Stops the thread and closes its connection. */
void worker_beat_stop(struct worker_beat *b);

/* ------------------------------------------------------------ worker_job */

struct worker_ctx {
  struct tb_db *db; /* the main connection (claims, cell stores) */
  struct worker_beat *beat;
  const char *worker_id;
  int lease_s;
  bool have_master_key;
  /* the operator's part of every job's target: cell_memory_max
   * (TOKBENCH_CELL_MEMORY_KB in bytes) and the switches (TB_ENGINE_CFG_KEYS) */
  struct tb_engine_target engine;
  int egress_give_up_s;          /* TOKBENCH_EGRESS_GIVE_UP_S (tb_queue_refuse) */
  struct worker_shard_cfg shard; /* TB_SHARD_CFG_KEYS (issue 24) */
  unsigned char master_key[TB_CRYPTO_KEY_LEN];
  volatile sig_atomic_t *stopping; /* set by SIGTERM/SIGINT */
};

enum worker_job_outcome {
  WORKER_JOB_DONE,      /* finished: succeeded, failed or cancelled */
  WORKER_JOB_RELEASED,  /* handed back (stopping) */
  WORKER_JOB_REFUSED,   /* handed back: this worker's egress policy refuses
                           the endpoint (do not claim it again for
                           egress_give_up_s) */
  WORKER_JOB_LOST,      /* the lease was lost: another worker has it */
  WORKER_JOB_ABANDONED, /* could not write the end (database away while
                           stopping): the lease will expire */
};

/* ----------------------------------------------------------- worker_prov */

/* Measures this worker's clock offset to the database and records it for
 * lease l's attempt (lib/db/tb_ranby); a failure is logged, never fatal. */
void worker_prov_clock(struct worker_ctx *w, const struct tb_queue_lease *l);
/* Completes result's provenance (its engine-made block; none: nothing):
 * the hash of job's spec, this binary, and who ran each cell with the
 * clock offset of its attempt, read from the cells' rows. */
void worker_prov_finish(struct worker_ctx *w, const struct tb_queue_job *job, json_t *result);

/* Runs the claimed job (borrowed) to its end. */
enum worker_job_outcome worker_run_job(struct worker_ctx *w, const struct tb_queue_job *job);

#endif
