/*
 * q_metrics: see q_metrics.h.
 */
#include "q_metrics.h"

#include <stdlib.h>
#include <string.h>

static const struct tb_db_stmt metrics_query = {
  "ci_metrics",
  "SELECT "
  " (SELECT coalesce(json_object_agg(state, n), '{}') FROM "
  "   (SELECT state, count(*) AS n FROM jobs GROUP BY state) s)::text AS jobs_by_state, "
  " (SELECT count(*) FROM jobs WHERE state = 'queued') AS queued, "
  " (SELECT coalesce(extract(epoch FROM now() - min(created_at)), 0)::float8 "
  "   FROM jobs WHERE state = 'queued') AS oldest_s, "
  " (SELECT count(*) FROM job_cells) AS cells, "
  " (SELECT coalesce(json_object_agg(lease_owner, left_s), '{}') FROM "
  "   (SELECT lease_owner, max(extract(epoch FROM lease_expires_at - now()))::float8 AS left_s "
  "    FROM jobs WHERE state = 'running' AND lease_owner IS NOT NULL "
  "    GROUP BY lease_owner LIMIT 500) w)::text AS leases, "
  " (SELECT coalesce(json_object_agg(status, n), '{}') FROM "
  "   (SELECT status, count(*) AS n FROM webhook_deliveries GROUP BY status) d)::text "
  "   AS deliveries",
};

static double
num(const PGresult *res, const char *col)
{
  const char *s = tb_db_str(res, 0, col);
  return s != NULL ? strtod(s, NULL) : 0;
}

int
tb_q_metrics_read(struct tb_db *db, struct tb_q_metrics *out)
{
  memset(out, 0, sizeof *out);
  PGresult *res = NULL;
  int rc = tb_db_exec(db, &metrics_query, 0, NULL, &res);
  if (rc > 0) {
    out->jobs_by_state = tb_db_dup(res, 0, "jobs_by_state");
    out->queued = num(res, "queued");
    out->oldest_s = num(res, "oldest_s");
    out->cells = num(res, "cells");
    out->leases = tb_db_dup(res, 0, "leases");
    out->deliveries = tb_db_dup(res, 0, "deliveries");
  }
  PQclear(res);
  return rc;
}

void
tb_q_metrics_clear(struct tb_q_metrics *m)
{
  free(m->jobs_by_state);
  free(m->leases);
  free(m->deliveries);
  memset(m, 0, sizeof *m);
}
