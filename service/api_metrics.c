/*
 * api_metrics: GET /metrics, Prometheus text (exposition format 0.0.4).
 *
 * Auth: its own bearer token, TOKBENCH_METRICS_TOKEN (a Prometheus scraper
 * holds no project key), compared in constant time as SHA-256 digests so the
 * length leaks nothing either.  Without the token configured the route
 * answers 404: metrics are off rather than public.
 *
 * What it serves: the process registry (tb_metrics_global: requests by route
 * and status, latency histograms, inbound hook outcomes, outbound delivery
 * attempts) plus gauges read from PostgreSQL at scrape time, so every api
 * replica reports the same cluster-wide figures: jobs by state, queue depth
 * and age of the oldest queued job, cells measured, workers holding a lease
 * and the seconds left on each lease (the heartbeat), deliveries by status
 * (the statement: service/q_metrics.c).
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "api_handlers.h"
#include "q_metrics.h"
#include "tb_metrics.h"

static pthread_mutex_t scrape_mu = PTHREAD_MUTEX_INITIALIZER;

static bool
token_ok(struct tb_api_req *r)
{
  const char *want = tb_cfg_get(r->api->cfg, "TOKBENCH_METRICS_TOKEN");
  const char *auth = tb_api_header(r, "Authorization");
  if (auth == NULL || strncmp(auth, "Bearer ", 7) != 0)
    return false;
  unsigned char a[TB_SHA256_LEN], b[TB_SHA256_LEN];
  tb_crypto_sha256(want, strlen(want), a);
  tb_crypto_sha256(auth + 7, strlen(auth + 7), b);
  return tb_ct_equal(a, b, sizeof a);
}

/* Sets gauge family f from a JSON object {label value: number}. */
static void
set_from_object(struct tb_metric *f, const char *json, const char *const *always)
{
  json_error_t e;
  json_t *o = json_loads(json, 0, &e);
  tb_metric_reset(f);
  for (size_t i = 0; always != NULL && always[i] != NULL; i++) {
    const char *v[] = { always[i] };
    tb_metric_set(f, v, 0);
  }
  const char *k;
  json_t *n;
  json_object_foreach (o, k, n) {
    const char *v[] = { k };
    tb_metric_set(f, v, json_number_value(n));
  }
  json_decref(o);
}

enum MHD_Result
tb_api_metrics(struct tb_api_req *r)
{
  static const char *const state_l[] = { "state", NULL };
  static const char *const status_l[] = { "status", NULL };
  static const char *const worker_l[] = { "worker", NULL };
  static const char *const states[] = { "queued", "running",   "succeeded",
                                        "failed", "cancelled", NULL };
  static const char *const dstates[] = { "pending", "sending", "succeeded", "failed", NULL };
  const char *want = tb_cfg_get(r->api->cfg, "TOKBENCH_METRICS_TOKEN");
  if (want == NULL || want[0] == '\0')
    return tb_api_reply_error(r, TB_EC_NOT_FOUND, "metrics are off: set TOKBENCH_METRICS_TOKEN",
                              NULL);
  if (!token_ok(r))
    return tb_api_reply_error(r, TB_EC_UNAUTHORIZED,
                              "send Authorization: Bearer "
                              "<TOKBENCH_METRICS_TOKEN>",
                              NULL);
  struct tb_metrics *m = tb_metrics_global();
  struct tb_metric *jobs = tb_metrics_family(m, TB_METRIC_GAUGE, "tokbench_jobs",
                                             "Jobs by state (cluster-wide).", state_l, NULL, 0);
  struct tb_metric *depth = tb_metrics_family(m, TB_METRIC_GAUGE, "tokbench_queue_depth",
                                              "Jobs waiting in the queue.", NULL, NULL, 0);
  struct tb_metric *age = tb_metrics_family(m, TB_METRIC_GAUGE, "tokbench_queue_oldest_seconds",
                                            "Age of the oldest queued job.", NULL, NULL, 0);
  struct tb_metric *cells =
    tb_metrics_family(m, TB_METRIC_GAUGE, "tokbench_cells_measured",
                      "Cells measured and stored (cluster-wide).", NULL, NULL, 0);
  struct tb_metric *workers = tb_metrics_family(m, TB_METRIC_GAUGE, "tokbench_workers_busy",
                                                "Workers holding a job lease.", NULL, NULL, 0);
  struct tb_metric *lease =
    tb_metrics_family(m, TB_METRIC_GAUGE, "tokbench_worker_lease_remaining_seconds",
                      "Seconds left on each busy worker's lease (renewed by its heartbeat; "
                      "negative: the heartbeat stopped).",
                      worker_l, NULL, 0);
  struct tb_metric *dl =
    tb_metrics_family(m, TB_METRIC_GAUGE, "tokbench_webhook_deliveries",
                      "Outbound webhook deliveries by status.", status_l, NULL, 0);
  struct tb_metric *up =
    tb_metrics_family(m, TB_METRIC_GAUGE, "tokbench_database_up",
                      "1 when the scrape could read the database.", NULL, NULL, 0);
  struct tb_db *db = tb_api_db_get(r);
  struct tb_q_metrics q;
  int rc = tb_q_metrics_read(db, &q);
  tb_api_db_put(r, db);
  pthread_mutex_lock(&scrape_mu);
  tb_metric_set(up, NULL, rc > 0 ? 1 : 0);
  if (rc > 0) {
    set_from_object(jobs, q.jobs_by_state ? q.jobs_by_state : "{}", states);
    tb_metric_set(depth, NULL, q.queued);
    tb_metric_set(age, NULL, q.oldest_s);
    tb_metric_set(cells, NULL, q.cells);
    set_from_object(lease, q.leases ? q.leases : "{}", NULL);
    json_error_t e;
    json_t *w = json_loads(q.leases ? q.leases : "{}", 0, &e);
    tb_metric_set(workers, NULL, (double)json_object_size(w));
    json_decref(w);
    set_from_object(dl, q.deliveries ? q.deliveries : "{}", dstates);
  }
  char *text = tb_metrics_render(m);
  pthread_mutex_unlock(&scrape_mu);
  tb_q_metrics_clear(&q);
  enum MHD_Result ret = tb_api_reply(r, MHD_HTTP_OK, "text/plain; version=0.0.4; charset=utf-8",
                                     text, strlen(text), NULL);
  free(text);
  return ret;
}
