/*
 * tb_workers: the worker pool's presence rows (see tb_workers.h).  Three
 * statements; the count is one query over the rows and the running jobs'
 * lease owners, so a worker busy for hours (renewing its job's lease, not
 * its row) still counts.
 */
#include "db/tb_workers.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdint.h>

static const struct tb_db_stmt seen = {
  "workers_seen",
  "INSERT INTO workers (id, seen_at) VALUES ($1, now()) "
  "ON CONFLICT (id) DO UPDATE SET seen_at = now()",
};

static const struct tb_db_stmt gone = {
  "workers_gone",
  "DELETE FROM workers WHERE id = $1",
};

static const struct tb_db_stmt live = {
  "workers_live",
  "SELECT count(*) AS n FROM ("
  "  SELECT id FROM workers WHERE seen_at > now() - make_interval(secs => $1::float8) "
  "  UNION SELECT lease_owner FROM jobs "
  "  WHERE state = 'running' AND lease_owner IS NOT NULL AND lease_expires_at > now()) w",
};

int
tb_workers_seen(struct tb_db *db, const char *id)
{
  const char *p[] = { id };
  int rc = tb_db_exec(db, &seen, 1, p, NULL);
  return rc < 0 ? rc : 1;
}

int
tb_workers_gone(struct tb_db *db, const char *id)
{
  const char *p[] = { id };
  return tb_db_exec(db, &gone, 1, p, NULL);
}

int
tb_workers_live(struct tb_db *db, int64_t window_s, int64_t *n)
{
  char w[24];
  snprintf(w, sizeof w, "%" PRId64, window_s);
  const char *p[] = { w };
  PGresult *res = NULL;
  *n = 0;
  int rc = tb_db_exec(db, &live, 1, p, &res);
  if (rc > 0) {
    char v[24];
    tb_db_copy(res, 0, "n", v, sizeof v);
    if (!tb_parse_i64(v, 0, INT64_MAX, n))
      *n = 0;
  }
  PQclear(res);
  return rc < 0 ? rc : 1;
}
