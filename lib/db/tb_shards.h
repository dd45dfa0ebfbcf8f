/*
 * tb_shards: every statement of a sharded cell's life (issue 24; tables in
 * sql/0013_cell_shards.sql).
 *
 *   the job's worker:  tb_shards_open (barrier + N open shards, attempt a)
 *   any worker:        tb_shards_claim --> claimed (lease of its own)
 *                      tb_shards_clock  (offset to clock_timestamp())
 *                      tb_shards_ready  --> ready; the last one sets t0
 *                                           (NOTIFY tb_shards_start)
 *                      tb_shards_barrier (t0 or why not), tb_shards_beat
 *                      tb_shards_store  --> done (samples, skew)
 *   the job's worker:  tb_shards_expire (timeouts, lost leases: the
 *                      attempt fails with its reason, its claims released)
 *                      tb_shards_collect (every shard's samples, once all
 *                      are done), tb_shards_close (merged or failed)
 *
 * A barrier is (job, cell key, attempt).  Its shards are fenced on (worker,
 * the barrier's state): a shard whose barrier failed writes nothing more,
 * and its worker learns it from tb_shards_beat or tb_shards_store (0).
 * A worker never holds two shards of one barrier: one process per shard.
 * Shards are claimed in the order barriers were opened, lowest shard first.
 *
 * Return vocabulary as tb_queue: 1 done, 0 (nothing to claim, or fenced
 * out), TB_DB_SOFT / TB_DB_HARD.
 */
#ifndef TB_SHARDS_H
#define TB_SHARDS_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/tb_clock.h"
#include "base/tb_util.h"
#include "db/tb_db.h"
#include "db/tb_queue.h"

#define TB_SHARDS_KEY_MAX 128 /* a cell key's length cap */
#define TB_SHARDS_HOST_MAX 255

/* One barrier: (job, cell key, attempt). */
struct tb_shards_key {
  char job_id[TB_QUEUE_ID_LEN + 1];
  char cell_key[TB_SHARDS_KEY_MAX + 1];
  int attempt;
};

/* A claimed shard.  spec is a new reference (tb_shards_clear). */
struct tb_shard {
  struct tb_shards_key key;
  int shard, nshards;
  char worker[TB_QUEUE_OWNER_MAX + 1];
  json_t *spec;
};
void tb_shard_clear(struct tb_shard *s);

/*
 * Opens attempt key->attempt of a sharded cell: its barrier (spec borrowed,
 * what every shard runs; deadline timeout_s from now) and nshards open
 * shards, if the job's lease l is held; NOTIFY tb_shards_open.  Returns 1,
 * 0 (lease lost: nothing written) or TB_DB_SOFT / TB_DB_HARD (a barrier of
 * that key already there is TB_DB_HARD).
 */
int tb_shards_open(struct tb_db *db, const struct tb_queue_lease *l,
                   const struct tb_shards_key *key, int nshards, const json_t *spec,
                   double timeout_s) TB_MUST_CHECK;

/*
 * Claims one open shard of a waiting barrier before its deadline, of which
 * worker holds no shard yet, with FOR UPDATE SKIP LOCKED: state claimed,
 * worker, host, lease lease_s seconds.  Returns 1 (*out filled), 0 (none)
 * or TB_DB_SOFT / TB_DB_HARD.
 */
int tb_shards_claim(struct tb_db *db, const char *worker, const char *host, int lease_s,
                    struct tb_shard *out) TB_MUST_CHECK;

/* Measures this process's offset to the database's clock_timestamp() from
 * probes round trips (tb_clock), and against the wall clock too (out's
 * wall_offset_ns, has_wall).  Returns 1 or TB_DB_SOFT / TB_DB_HARD. */
int tb_shards_clock(struct tb_db *db, unsigned probes, struct tb_clock_offset *out) TB_MUST_CHECK;

/*
 * The shard is warm: state ready, its clock offset stored.  When it is the
 * last of its barrier to be ready, t0 = clock_timestamp() + lead_s and the
 * barrier starts (NOTIFY tb_shards_start '<job>/<attempt>/<cell key>').
 * Returns 1, 0 (fenced out: the barrier failed or the shard is not ours)
 * or TB_DB_SOFT / TB_DB_HARD.
 */
int tb_shards_ready(struct tb_db *db, const struct tb_shard *s, const struct tb_clock_offset *off,
                    double lead_s) TB_MUST_CHECK;

/* The barrier's state: "waiting", "started" (*t0_us: t0, epoch us),
 * "failed" (reason into why, may be NULL) or "merged", into state (16
 * bytes).  Returns 1, 0 (no such barrier) or TB_DB_SOFT / TB_DB_HARD. */
int tb_shards_barrier(struct tb_db *db, const struct tb_shards_key *key, char state[16],
                      int64_t *t0_us, char *why, size_t why_len) TB_MUST_CHECK;

/* Renews the shard's lease.  Returns 1 (held, barrier alive), 0 (fenced
 * out: stop, write nothing more) or TB_DB_SOFT / TB_DB_HARD. */
int tb_shards_beat(struct tb_db *db, const struct tb_shard *s, int lease_s) TB_MUST_CHECK;

/* Stores the shard's samples (len bytes, tb_samples' encoding) and its
 * start skew: state done.  Returns 1, 0 (fenced out) or TB_DB_SOFT /
 * TB_DB_HARD. */
int tb_shards_store(struct tb_db *db, const struct tb_shard *s, const unsigned char *samples,
                    size_t len, int64_t skew_us) TB_MUST_CHECK;

/* A shard that cannot run (its endpoint, its spec, its cell failed) fails
 * its barrier at once with why (capped at TB_SHARDS_REASON_MAX bytes), its
 * claims released, rather than leaving it to its lease: "shard K (worker
 * W): why".  Returns 1, 0 (fenced out or the barrier already over) or
 * TB_DB_SOFT / TB_DB_HARD. */
#define TB_SHARDS_REASON_MAX 300
int tb_shards_fail(struct tb_db *db, const struct tb_shard *s, const char *why) TB_MUST_CHECK;

/*
 * Fails the barriers of job_id that cannot finish: waiting past their
 * deadline ("barrier timeout: K of N shards ready after T s"), or with a
 * claimed, ready or started shard whose lease lapsed ("shard K's worker W
 * lost its lease").  Their shards that were not done become failed (claims
 * released).  Returns the count failed (>= 0) or TB_DB_SOFT / TB_DB_HARD.
 */
int tb_shards_expire(struct tb_db *db, const char *job_id) TB_MUST_CHECK;

/* One stored shard, as tb_shards_collect reads it. */
struct tb_shard_row {
  int shard;
  char *worker, *host; /* new strings */
  int64_t skew_us, uncert_ns;
  int64_t wall_offset_us; /* the database's clock - the shard worker's wall clock */
  bool has_wall;          /* (sql/0018; NULL: measured before, or not at all) */
  unsigned char *samples; /* new (PQunescapeBytea'd into tb_xmalloc) */
  size_t len;
};
/*
 * When every shard of a started barrier is done: its rows in shard order
 * into *rows (tb_xmalloc'd; free with tb_shards_rows_free) and their count.
 * Returns the count (>= 1), 0 (not all done yet, or no such barrier) or
 * TB_DB_SOFT / TB_DB_HARD.
 */
int tb_shards_collect(struct tb_db *db, const struct tb_shards_key *key,
                      struct tb_shard_row **rows) TB_MUST_CHECK;
void tb_shards_rows_free(struct tb_shard_row *rows, int n);

/* Ends a barrier: "merged", or "failed" with reason (may be NULL), if the
 * job's lease l is held.  Returns 1, 0 or TB_DB_SOFT / TB_DB_HARD. */
int tb_shards_close(struct tb_db *db, const struct tb_queue_lease *l,
                    const struct tb_shards_key *key, const char *state,
                    const char *reason) TB_MUST_CHECK;

#endif
