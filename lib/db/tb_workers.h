/*
 * tb_workers: which workers are alive, as the database sees it (issue 34,
 * item 3; sql/0015_workers.sql).
 *
 * A worker marks itself seen between jobs (tb_workers_seen: at most every
 * TB_WORKERS_SEEN_EVERY_S, from its claim loop, which turns at least every
 * TOKBENCH_POLL_S) and removes its row when it stops (tb_workers_gone).
 * The api counts the live workers (tb_workers_live) before it queues a job
 * of several shards: those seen in the last window, and those holding a
 * running job's lease (a busy worker renews its lease, not its row).
 */
#ifndef TB_WORKERS_H
#define TB_WORKERS_H

#include <stdint.h>

#include "db/tb_db.h"
#include "base/tb_util.h"

/* How often a worker writes its row at most (seconds). */
#define TB_WORKERS_SEEN_EVERY_S 2

/* Marks worker id seen now (an upsert).  1, or TB_DB_SOFT / TB_DB_HARD. */
int tb_workers_seen(struct tb_db *db, const char *id) TB_MUST_CHECK;

/* Removes worker id's row (it stops).  Its count, or TB_DB_SOFT / TB_DB_HARD. */
int tb_workers_gone(struct tb_db *db, const char *id) TB_MUST_CHECK;

/* The live workers into *n: seen within window_s seconds, or holding the
 * lease of a running job, each once.  1, or TB_DB_SOFT / TB_DB_HARD. */
int tb_workers_live(struct tb_db *db, int64_t window_s, int64_t *n) TB_MUST_CHECK;

#endif
