/*
 * tb_ranby: who ran each cell of a job (issue 35, item 3; tables in
 * sql/0018_signing_keys.sql): the worker of each attempt and its clock
 * offset to the database (job_attempts), and the worker and attempt that
 * stored each cell (job_cells.worker, attempt: set from the job's lease by
 * a trigger as the cell is stored).  The worker records its attempt when
 * it starts one and reads the whole job's back when it finishes, for the
 * result's provenance (lib/result/tb_provenance).
 *
 * Return vocabulary as tb_queue: 1 done (or a count), 0 (lease lost),
 * TB_DB_SOFT / TB_DB_HARD.
 */
#ifndef TB_RANBY_H
#define TB_RANBY_H

#include <jansson.h>
#include <stdint.h>

#include "base/tb_util.h"
#include "db/tb_db.h"
#include "db/tb_queue.h"

/* Records lease l's attempt: its worker (the lease's owner) and clock
 * offset (database clock - the worker's wall clock, us) with its
 * uncertainty, if the lease is held.  Returns 1, 0 or TB_DB_SOFT /
 * TB_DB_HARD. */
int tb_ranby_attempt(struct tb_db *db, const struct tb_queue_lease *l, int64_t offset_us,
                     int64_t uncert_us) TB_MUST_CHECK;

/*
 * Every stored cell of job_id, in storage order, into *out (a new array):
 * {phase, context, concurrency, worker (or null), attempt (or null),
 * clock_offset_us, clock_uncert_us (null when that attempt recorded none)}.
 * Returns the count or TB_DB_SOFT / TB_DB_HARD.
 */
int tb_ranby_cells(struct tb_db *db, const char *job_id, json_t **out) TB_MUST_CHECK;

#endif
