/*
 * api_deliveries: outbound webhooks of the caller's project (issue 7).
 *   POST   /v1/callbacks        {url, scope: all|named, events?} -> 201 with
 *                               "secret" ("whsec_...", shown this once)
 *   GET    /v1/callbacks        list (never the secret)
 *   DELETE /v1/callbacks/{id}   204
 *   GET    /v1/deliveries       the deliveries with their outcome, newest
 *                               first: ?job_id= &status= &limit= (<= 200)
 *
 * The dispatcher that sends them (service/tb_deliver.c) runs as a thread of this
 * process: tb_api_deliveries_start / _stop, called by main.c.  The
 * statements of the routes: service/q_deliveries.c.
 */
#include <openssl/crypto.h>
#include <string.h>

#include "api_egress.h"
#include "api_handlers.h"
#include "api_ci.h"
#include "api_deliveries.h"
#include "api_spec.h"
#include "q_deliveries.h"
#include "tb_deliver.h"
#include "base/tb_log.h"
#include "tb_webhook.h"
#include "spec/tb_specwalk.h"

/* An event a callback may be sent for. */
static bool
callback_event_ok(const char *s)
{
  return strcmp(s, "succeeded") == 0 || strcmp(s, "failed") == 0 || strcmp(s, "cancelled") == 0;
}

enum MHD_Result
tb_api_deliveries_callback_create(struct tb_api_req *r)
{
  enum MHD_Result ret;
  struct tb_api_ci_new n = { 0 };
  static const char *const allowed[] = { "url", "scope", "events", NULL };
  if (!tb_api_ci_new_body(r, allowed, &n, &ret))
    goto out;
  const char *url = json_string_value(json_object_get(n.body, "url"));
  const char *scope = json_string_value(json_object_get(n.body, "scope"));
  if (url == NULL || !tb_specwalk_url_ok(url)) {
    ret = tb_api_reply_invalid(r, "url", "an http:// or https:// URL without credentials");
    goto out;
  }
  if (!tb_api_egress_check(r, "url", url, &ret))
    goto out;
  if (scope == NULL)
    scope = "all";
  if (strcmp(scope, "all") != 0 && strcmp(scope, "named") != 0) {
    ret = tb_api_reply_invalid(r, "scope",
                               "all (every job of the project) or named (jobs whose spec lists "
                               "the URL in callbacks)");
    goto out;
  }
  static const char *const bad = "a non-empty array of succeeded, failed, cancelled";
  if (!tb_api_ci_new_events(r, &n, "[\"succeeded\",\"failed\",\"cancelled\"]", 1, 3,
                            callback_event_ok, bad, bad, &ret) ||
      !tb_api_ci_new_secret(r, tb_webhook_secret_new_outbound,
                            "callback secrets are sealed with the master key", n.id, &n.secret,
                            &n.sealed, &ret))
    goto out;
  struct tb_db *db = tb_api_db_get(r);
  int rc = tb_q_deliveries_callback_insert(db, n.id, r->project_id, url, scope, n.events, n.sealed,
                                           &n.doc);
  tb_api_db_put(r, db);
  if (rc <= 0 || n.doc == NULL)
    ret = tb_api_reply_db(r, rc < 0 ? rc : TB_DB_HARD);
  else
    ret = tb_api_ci_reply_created(r, &n, "/v1/callbacks/", false);
out:
  tb_api_ci_new_clear(&n);
  return ret;
}

enum MHD_Result
tb_api_deliveries_callback_list(struct tb_api_req *r)
{
  return tb_api_reply_list(r, tb_q_deliveries_callback_list, "callbacks");
}

enum MHD_Result
tb_api_deliveries_callback_delete(struct tb_api_req *r)
{
  return tb_api_reply_delete(r, tb_q_deliveries_callback_delete, "no such callback");
}

enum MHD_Result
tb_api_deliveries_list(struct tb_api_req *r)
{
  const char *job = tb_api_arg(r, "job_id"), *status = tb_api_arg(r, "status");
  const char *limit_s = tb_api_arg(r, "limit");
  int64_t limit = 50;
  if (job != NULL && !tb_api_is_uuid(job))
    return tb_api_reply_error(r, TB_EC_BAD_REQUEST, "job_id: a job id", NULL);
  if (status != NULL && strcmp(status, "pending") != 0 && strcmp(status, "sending") != 0 &&
      strcmp(status, "succeeded") != 0 && strcmp(status, "failed") != 0)
    return tb_api_reply_error(r, TB_EC_BAD_REQUEST, "status: pending, sending, succeeded or failed",
                              NULL);
  if (limit_s != NULL && !tb_parse_i64(limit_s, 1, 200, &limit))
    return tb_api_reply_error(r, TB_EC_BAD_REQUEST, "limit: 1 to 200", NULL);
  char *doc = NULL;
  struct tb_db *db = tb_api_db_get(r);
  int rc = tb_q_deliveries_list(db, r->project_id, job, status, (int)limit, &doc);
  tb_api_db_put(r, db);
  return tb_api_reply_doc(r, rc, doc, MHD_HTTP_OK, "deliveries", NULL);
}

/* ---- the dispatcher thread ------------------------------------------- */

static struct tb_deliver *dispatcher;

bool
tb_api_deliveries_start(struct tb_api *api)
{
  const char *on = tb_cfg_get(api->cfg, "TOKBENCH_DELIVERIES");
  if (on != NULL && strcmp(on, "0") == 0) {
    tb_log(TB_LOG_INFO, "webhook dispatcher off (TOKBENCH_DELIVERIES=0)", NULL);
    return true;
  }
  int64_t base_ms = 30000, timeout_ms = 10000;
  char *err = NULL;
  if (!tb_cfg_get_int(api->cfg, "TOKBENCH_DELIVERY_BACKOFF_MS", 1, 3600000, &base_ms, &err) ||
      !tb_cfg_get_int(api->cfg, "TOKBENCH_DELIVERY_TIMEOUT_MS", 100, 600000, &timeout_ms, &err)) {
    tb_log(TB_LOG_ERROR, "webhook dispatcher", "error", TB_LS, err, NULL);
    free(err);
    return false;
  }
  struct tb_deliver_opts o = {
    .db_url = tb_cfg_get(api->cfg, "TOKBENCH_DATABASE_URL"),
    .master_key = api->has_master_key ? api->master_key : NULL,
    .public_url = tb_api_ci_public_url(api),
    .backoff_base_ms = base_ms,
    .timeout_ms = (long)timeout_ms,
    .batch = 16,
    .poll_ms = 1000,
    .lease_s = (int)(timeout_ms / 1000) + 60,
  };
  dispatcher = tb_deliver_start(&o, &err);
  if (dispatcher == NULL) {
    tb_log(TB_LOG_ERROR, "webhook dispatcher", "error", TB_LS, err, NULL);
    free(err);
    return false;
  }
  return true;
}

void
tb_api_deliveries_stop(void)
{
  tb_deliver_stop(dispatcher);
  dispatcher = NULL;
}
