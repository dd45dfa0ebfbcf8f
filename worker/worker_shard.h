/*
 * worker_shard: the merge of a sharded cell by the worker running its job
 * (issue 24; lib/db/tb_shards, lib/result/tb_samples).
 */
#ifndef WORKER_SHARD_H
#define WORKER_SHARD_H

#include <jansson.h>
#include <stddef.h>

#include "db/tb_db.h"
#include "db/tb_shards.h"

/* A stored shard's samples do not decode or merge: the attempt cannot be
 * judged (err says which shard and why). */
#define WORKER_SHARD_BAD (-3)

/*
 * When every shard of barrier key is done: their samples merged into cell
 * (the caller's cell object, its phase, context and concurrency already
 * set): the figures of the union (tb_samples_cell), shards {count, where,
 * skew, clock uncertainty} and the skew self-check over window_s (the cell
 * becomes an error above it).  client_ready as tb_samples_cell.  Returns 1
 * (merged), 0 (not all done yet), WORKER_SHARD_BAD, or TB_DB_SOFT /
 * TB_DB_HARD.
 */
int worker_shard_merge(struct tb_db *db, const struct tb_shards_key *key, double window_s,
                       const char *client_ready, json_t *cell, char *err, size_t errlen);

#endif
