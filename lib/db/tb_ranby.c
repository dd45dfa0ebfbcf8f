/*
 * tb_ranby: see tb_ranby.h.  The attempt's row is written under the job's
 * lease (the fence tb_queue's writes use: owner, attempt, running), so a
 * worker that lost the job records nothing; a repeated write of the same
 * attempt keeps the newer measurement.
 */
#include "db/tb_ranby.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>

static const struct tb_db_stmt st_attempt = {
  "ranby_attempt",
  "WITH lease AS (SELECT id, attempts, lease_owner FROM jobs "
  "  WHERE id = $1::uuid AND lease_owner = $2::text AND attempts = $3::int "
  "    AND state = 'running'), "
  "ins AS (INSERT INTO job_attempts (job_id, attempt, worker, clock_offset_us, clock_uncert_us) "
  "  SELECT id, attempts, lease_owner, $4::bigint, $5::bigint FROM lease "
  "  ON CONFLICT (job_id, attempt) DO UPDATE SET worker = EXCLUDED.worker, "
  "    clock_offset_us = EXCLUDED.clock_offset_us, clock_uncert_us = EXCLUDED.clock_uncert_us, "
  "    measured_at = now() "
  "  RETURNING job_id) "
  "SELECT (SELECT count(*) FROM ins) AS leased",
};

int
tb_ranby_attempt(struct tb_db *db, const struct tb_queue_lease *l, int64_t offset_us,
                 int64_t uncert_us)
{
  char att[16], off[24], unc[24];
  snprintf(att, sizeof att, "%d", l->attempt);
  snprintf(off, sizeof off, "%" PRId64, offset_us);
  snprintf(unc, sizeof unc, "%" PRId64, uncert_us < 0 ? 0 : uncert_us);
  const char *p[] = { l->job_id, l->owner, att, off, unc };
  return tb_db_exec_counted(db, &st_attempt, 5, p, "leased");
}

static const struct tb_db_stmt st_cells = {
  "ranby_cells",
  "SELECT coalesce(json_agg(json_build_object('phase', c.phase, 'context', c.context, "
  "  'concurrency', c.concurrency, 'worker', c.worker, 'attempt', c.attempt, "
  "  'clock_offset_us', a.clock_offset_us, 'clock_uncert_us', a.clock_uncert_us) "
  "  ORDER BY c.seq), '[]'::json)::text AS cells "
  "FROM job_cells c LEFT JOIN job_attempts a ON a.job_id = c.job_id AND a.attempt = c.attempt "
  "WHERE c.job_id = $1::uuid",
};

int
tb_ranby_cells(struct tb_db *db, const char *job_id, json_t **out)
{
  const char *p[] = { job_id };
  char *text = NULL;
  *out = NULL;
  int rc = tb_db_exec_str(db, &st_cells, 1, p, "cells", &text, NULL);
  if (rc < 0)
    return rc;
  json_t *a = text != NULL ? json_loads(text, 0, NULL) : NULL;
  free(text);
  if (!json_is_array(a)) {
    json_decref(a);
    a = json_array();
  }
  *out = a;
  return (int)json_array_size(a);
}
