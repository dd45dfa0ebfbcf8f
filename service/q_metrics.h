/*
 * q_metrics: the statement of GET /metrics (service/api_metrics.c): the
 * cluster-wide gauges, read from jobs, job_cells and webhook_deliveries
 * (sql/0002_endpoints_jobs.sql, sql/0006_hooks_deliveries.sql) at scrape
 * time.  Columns read by name.
 */
#ifndef TB_Q_METRICS_H
#define TB_Q_METRICS_H

#include "db/tb_db.h"
#include "base/tb_util.h"

struct tb_q_metrics {
  char *jobs_by_state; /* JSON object {state: count}, new */
  double queued;       /* jobs waiting */
  double oldest_s;     /* age of the oldest queued job */
  double cells;        /* cells stored */
  char *leases;        /* JSON object {worker: seconds left on its lease}, new */
  char *deliveries;    /* JSON object {status: count}, new */
};
/* Reads them into *out (free with tb_q_metrics_clear).  Returns 1 or
 * TB_DB_SOFT / TB_DB_HARD. */
int tb_q_metrics_read(struct tb_db *db, struct tb_q_metrics *out) TB_MUST_CHECK;
void tb_q_metrics_clear(struct tb_q_metrics *m);

#endif
