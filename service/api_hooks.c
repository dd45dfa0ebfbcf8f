/*
 * api_hooks: inbound webhooks, a CI system starting jobs (issue 7).
 *   POST   /v1/hooks         {preset, kind: github|generic, events?, name?}
 *                            -> 201 with "secret" and "url" (the secret is
 *                            shown this once, stored sealed)
 *   GET    /v1/hooks         list (never the secret)
 *   GET    /v1/hooks/{id}    one
 *   DELETE /v1/hooks/{id}    204
 *   POST   /v1/hooks/{id}    a delivery; no API key: the signature is the
 *                            authentication (tb_webhook.h has the formats)
 *
 * A delivery, in order: unknown or deleted hook -> 404; signature checked
 * in constant time against the hook's secret -> 401 (nothing written); for
 * GitHub, "ping" -> 200 {"pong": true}, an event the hook is not configured
 * for -> 202 {"ignored": true}; the delivery id (X-GitHub-Delivery, or
 * X-Tokbench-Delivery, or the signature itself for the generic form) and a
 * digest (GitHub: SHA-256 of the payload; generic: of the signature) are
 * recorded in hook_deliveries_in in the same transaction that queues the
 * job, so a delivery seen before, by either, answers 200 {"duplicate":
 * true, "job_id"} and never starts a second job: a signed payload sent
 * again under a new delivery id is a replay (issue 13).  Rows are kept
 * TOKBENCH_REPLAY_RETENTION_S (pruned by the workers).  A job the
 * project's limits refuse -> 429 / 422 (tb_tenancy.h), nothing recorded.
 * A new job -> 202 + Location.
 *
 * Labels of the job: the preset's, plus ref, sha, repository, event and
 * delivery taken from the GitHub payload (tb_webhook_github_labels), or the
 * generic body's "labels" object when it has one.  The statements:
 * service/q_hooks.c.
 */
#include <openssl/crypto.h>
#include <string.h>

#include "api_handlers.h"
#include "api_ci.h"
#include "api_jobs.h"
#include "api_spec.h"
#include "q_hooks.h"
#include "base/tb_log.h"
#include "tb_metrics.h"
#include "tb_webhook.h"

#define DELIVERY_ID_MAX 200

/* tokbench_hook_requests_total{kind,outcome} */
static struct tb_metric *
hook_metric(void)
{
  static const char *const labels[] = { "kind", "outcome", NULL };
  return tb_metrics_family(tb_metrics_global(), TB_METRIC_COUNTER, "tokbench_hook_requests_total",
                           "Inbound webhook deliveries by kind and outcome.", labels, NULL, 0);
}

static void
count(const char *kind, const char *outcome)
{
  const char *v[] = { kind, outcome };
  tb_metric_add(hook_metric(), v, 1);
}

/* A GitHub event name a hook may take ("*": all). */
static bool
hook_event_ok(const char *s)
{
  bool ok = s[0] != '\0' && strlen(s) <= 64;
  for (const char *c = s; ok && *c; c++)
    ok = (*c >= 'a' && *c <= 'z') || *c == '_' || *c == '*' || *c == '.';
  return ok;
}

enum MHD_Result
tb_api_hooks_create(struct tb_api_req *r)
{
  enum MHD_Result ret;
  struct tb_api_ci_new n = { 0 };
  static const char *const allowed[] = { "preset", "kind", "events", "name", NULL };
  if (!tb_api_ci_new_body(r, allowed, &n, &ret))
    goto out;
  const char *preset = json_string_value(json_object_get(n.body, "preset"));
  const char *kind = json_string_value(json_object_get(n.body, "kind"));
  const char *name = json_string_value(json_object_get(n.body, "name"));
  if (preset == NULL || preset[0] == '\0' || strlen(preset) > 100) {
    ret = tb_api_reply_invalid(r, "preset", "the name of a preset of this project");
    goto out;
  }
  if (kind == NULL)
    kind = "github";
  if (strcmp(kind, "github") != 0 && strcmp(kind, "generic") != 0) {
    ret = tb_api_reply_invalid(r, "kind", "github or generic");
    goto out;
  }
  if (json_object_get(n.body, "name") != NULL && (name == NULL || strlen(name) > 200)) {
    ret = tb_api_reply_invalid(r, "name", "a string of at most 200 characters");
    goto out;
  }
  if (!tb_api_ci_new_events(r, &n, "[\"push\",\"workflow_run\"]", 0, 32, hook_event_ok,
                            "an array of at most 32 GitHub event names",
                            "event names are 1 to 64 of [a-z_.] or \"*\"", &ret) ||
      !tb_api_ci_new_secret(r, tb_webhook_secret_new_inbound,
                            "hook secrets are sealed with the master key", n.id, &n.secret,
                            &n.sealed, &ret))
    goto out;
  struct tb_db *db = tb_api_db_get(r);
  int rc = tb_q_hooks_insert(db, n.id, r->project_id, preset, name ? name : "", kind, n.events,
                             n.sealed, &n.doc);
  tb_api_db_put(r, db);
  if (rc < 0)
    ret = tb_api_reply_db(r, rc);
  else if (rc == 0)
    ret = tb_api_reply_invalid(r, "preset", "no preset of this name in this project");
  else
    ret = tb_api_ci_reply_created(r, &n, "/v1/hooks/", true);
out:
  tb_api_ci_new_clear(&n);
  return ret;
}

enum MHD_Result
tb_api_hooks_list(struct tb_api_req *r)
{
  return tb_api_reply_list(r, tb_q_hooks_list, "hooks");
}

enum MHD_Result
tb_api_hooks_get(struct tb_api_req *r)
{
  return tb_api_reply_get(r, tb_q_hooks_get, "no such hook");
}

enum MHD_Result
tb_api_hooks_delete(struct tb_api_req *r)
{
  return tb_api_reply_delete(r, tb_q_hooks_delete, "no such hook");
}

/* A header value usable as a delivery id: 1..DELIVERY_ID_MAX printable ASCII. */
static bool
delivery_id_ok(const char *s)
{
  size_t n = s ? strlen(s) : 0;
  if (n == 0 || n > DELIVERY_ID_MAX)
    return false;
  for (size_t i = 0; i < n; i++)
    if (s[i] < 0x21 || s[i] > 0x7e)
      return false;
  return true;
}

static enum MHD_Result
reply_small(struct tb_api_req *r, unsigned status, json_t *doc)
{
  return tb_api_reply_json(r, status, doc, NULL);
}

/* One delivery to a hook, as it is read and checked. */
struct delivery {
  struct tb_q_hooks_hook hook;
  const char *kind; /* "github", "generic" or, before the hook is loaded, "unknown" */
  const char *sig_header, *event, *id;
  char digest[65]; /* the delivery's digest: the body's, or the signature's */
  char sig_id[80]; /* "sig:<signature>", the id of a generic delivery without one */
  bool signed_id;  /* a generic delivery's id was under the signature */
  json_t *payload; /* the body as JSON, or NULL */
  json_t *labels;  /* the job's labels */
  json_t *events;  /* the hook's events (github) */
};

/* The hook's secret opened and the body's signature checked with it.
 * false: refused, the reply queued into *ret. */
static bool
verify(struct tb_api_req *r, struct delivery *d, enum MHD_Result *ret)
{
  char *secret = NULL;
  if (!r->api->has_master_key || d->hook.secret_sealed == NULL ||
      (secret = tb_crypto_open(r->api->master_key, d->hook.secret_sealed, r->id)) == NULL) {
    tb_log(TB_LOG_ERROR, "a hook's secret does not open (master key changed?)", "hook", TB_LS,
           r->id, "request_id", TB_LS, r->request_id, NULL);
    *ret = tb_api_reply_error(r, TB_EC_NO_MASTER_KEY, "the hook's secret cannot be opened", NULL);
    return false;
  }
  const char *body = r->body ? r->body : "";
  enum tb_webhook_verdict v;
  if (strcmp(d->kind, "github") == 0) {
    d->sig_header = tb_api_header(r, "X-Hub-Signature-256");
    v = tb_webhook_verify_github(secret, strlen(secret), d->sig_header, body, r->body_len);
    tb_crypto_sha256_hex(body, r->body_len, d->digest);
  } else {
    d->sig_header = tb_api_header(r, "X-Tokbench-Signature");
    v = tb_webhook_verify_generic_id(secret, strlen(secret), d->sig_header,
                                     tb_api_header(r, "X-Tokbench-Timestamp"),
                                     tb_api_header(r, "X-Tokbench-Delivery"), body, r->body_len,
                                     tb_time_real_us() / 1000000, &d->signed_id);
    if (v == TB_WEBHOOK_OK && !tb_webhook_signature_digest(d->sig_header, d->digest))
      v = TB_WEBHOOK_MALFORMED; /* cannot happen: it verified */
  }
  OPENSSL_cleanse(secret, strlen(secret));
  free(secret);
  if (v == TB_WEBHOOK_OK)
    return true;
  count(d->kind, v == TB_WEBHOOK_STALE ? "stale" : "bad_signature");
  tb_log(TB_LOG_WARN, "hook delivery refused", "hook", TB_LS, r->id, "reason", TB_LS,
         tb_webhook_verdict_str(v), "request_id", TB_LS, r->request_id, NULL);
  *ret = tb_api_reply_error(r, TB_EC_BAD_SIGNATURE, tb_webhook_verdict_str(v), NULL);
  return false;
}

/* A GitHub delivery's event, id and labels.  false: answered (a ping, an
 * event the hook ignores, a missing header), the reply into *ret. */
static bool
github_delivery(struct tb_api_req *r, struct delivery *d, enum MHD_Result *ret)
{
  d->event = tb_api_header(r, "X-GitHub-Event");
  d->id = tb_api_header(r, "X-GitHub-Delivery");
  if (d->event == NULL || !delivery_id_ok(d->event)) {
    *ret = tb_api_reply_error(r, TB_EC_BAD_REQUEST, "X-GitHub-Event is missing", NULL);
    return false;
  }
  if (strcmp(d->event, "ping") == 0) {
    count(d->kind, "ping");
    *ret = reply_small(r, MHD_HTTP_OK, json_pack("{s:b,s:s}", "pong", 1, "hook", r->id));
    return false;
  }
  json_error_t e;
  d->events = json_loads(d->hook.events != NULL ? d->hook.events : "", 0, &e);
  if (!tb_webhook_event_accepted(d->events, d->event)) {
    count(d->kind, "ignored");
    *ret =
      reply_small(r, MHD_HTTP_ACCEPTED, json_pack("{s:b,s:s}", "ignored", 1, "event", d->event));
    return false;
  }
  if (!delivery_id_ok(d->id)) {
    *ret = tb_api_reply_error(r, TB_EC_BAD_REQUEST, "X-GitHub-Delivery is missing", NULL);
    return false;
  }
  tb_webhook_github_labels(d->payload, d->event, d->id, d->labels);
  return true;
}

/* A generic delivery's id (its header, else its signature) and labels (the
 * body's "labels", else what GitHub's shape gives; ref, sha and repository
 * when the body has them).  false: a bad id, the reply into *ret. */
static bool
generic_delivery(struct tb_api_req *r, struct delivery *d, enum MHD_Result *ret)
{
  d->event = "generic";
  d->id = tb_api_header(r, "X-Tokbench-Delivery");
  if (d->id != NULL && !delivery_id_ok(d->id)) {
    *ret =
      tb_api_reply_error(r, TB_EC_BAD_REQUEST, "X-Tokbench-Delivery: 1 to 200 characters", NULL);
    return false;
  }
  if (d->id == NULL) { /* the signature is unique per (timestamp, body) */
    snprintf(d->sig_id, sizeof d->sig_id, "sig:%s", d->sig_header + 7);
    d->id = d->sig_id;
  }
  json_t *given = json_object_get(d->payload, "labels");
  if (json_is_object(given))
    json_object_update(d->labels, given);
  else
    tb_webhook_github_labels(d->payload, NULL, NULL, d->labels); /* ref/sha/repository */
  json_t *fields[] = { json_object_get(d->payload, "ref"), json_object_get(d->payload, "sha"),
                       json_object_get(d->payload, "repository") };
  static const char *const names[] = { "ref", "sha", "repository" };
  for (size_t i = 0; i < 3; i++)
    if (json_is_string(fields[i]) && json_string_length(fields[i]) <= TB_WEBHOOK_LABEL_MAX)
      json_object_set(d->labels, names[i], fields[i]);
  return true;
}

/* The refusal of a job the delivery could not start (rc of
 * tb_api_ci_start_job); *errors is taken. */
static enum MHD_Result
reply_not_started(struct tb_api_req *r, int rc, const struct tb_tenancy_refusal *why,
                  json_t **errors)
{
  if (rc == TB_API_JOB_REFUSED)
    return tb_api_reply_refusal(r, why);
  if (rc == 2) {
    enum MHD_Result ret = tb_api_reply_spec_errors(r, TB_SPEC_INVALID, *errors);
    *errors = NULL;
    return ret;
  }
  if (rc == 0)
    return tb_api_reply_error(r, TB_EC_INVALID, "the preset's endpoint is gone", NULL);
  return tb_api_reply_db(r, rc);
}

/* The delivery claimed once (a repeat answers the job of the first) and
 * the preset's job started with its labels, in one transaction. */
static enum MHD_Result
start_job(struct tb_api_req *r, struct tb_db *db, struct delivery *d)
{
  int rc;
  if ((rc = tb_db_begin(db)) < 0)
    return tb_api_reply_db(r, rc);
  rc = tb_q_hooks_delivery_claim(db, r->id, d->id, d->event, d->digest);
  if (rc <= 0) {
    tb_db_rollback(db);
    if (rc < 0)
      return tb_api_reply_db(r, rc);
    char *seen = NULL; /* seen before */
    rc = tb_q_hooks_delivery_seen(db, r->id, d->id, d->digest, &seen);
    count(d->kind, "duplicate");
    enum MHD_Result ret =
      reply_small(r, MHD_HTTP_OK, json_pack("{s:b,s:s?}", "duplicate", 1, "job_id", seen));
    free(seen);
    return ret;
  }
  char job_id[TB_API_ID_LEN + 1], *doc = NULL;
  json_error_t jerr;
  json_t *spec = json_loads(d->hook.spec != NULL ? d->hook.spec : "", 0, &jerr), *errors = NULL;
  struct tb_tenancy_refusal why;
  rc = tb_api_ci_start_job(db, &r->api->tenancy, d->hook.project_id ? d->hook.project_id : "",
                           r->request_id, spec, d->labels, job_id, &doc, &errors, &why);
  json_decref(spec);
  enum MHD_Result ret;
  if (rc != 1) {
    tb_db_rollback(db);
    count(d->kind, rc == TB_API_JOB_REFUSED ? "limit" : "error");
    ret = reply_not_started(r, rc, &why, &errors);
  } else if ((rc = tb_q_hooks_delivery_job(db, r->id, d->id, job_id)) < 0 ||
             (rc = tb_db_commit(db)) < 0) {
    if (tb_db_in_tx(db))
      tb_db_rollback(db);
    ret = tb_api_reply_db(r, rc);
  } else {
    tb_api_job_queued(db, job_id);
    count(d->kind, "job");
    tb_log(TB_LOG_INFO, "hook started a job", "hook", TB_LS, r->id, "job", TB_LS, job_id, "event",
           TB_LS, d->event, "delivery_signed", TB_LI, (int64_t)d->signed_id, "request_id", TB_LS,
           r->request_id, NULL);
    ret = tb_api_reply_at(r, MHD_HTTP_ACCEPTED, doc, "/v1/jobs/", job_id);
  }
  json_decref(errors);
  free(doc);
  return ret;
}

enum MHD_Result
tb_api_hooks_receive(struct tb_api_req *r)
{
  enum MHD_Result ret = MHD_NO;
  struct delivery d = { .kind = "unknown" };
  struct tb_db *db = tb_api_db_get(r);
  int rc = tb_q_hooks_load(db, r->id, &d.hook);
  if (rc < 0) {
    ret = tb_api_reply_db(r, rc);
    goto out;
  }
  if (rc == 0) {
    count(d.kind, "unknown_hook");
    ret = tb_api_reply_error(r, TB_EC_NOT_FOUND, "no such hook", NULL);
    goto out;
  }
  d.kind = d.hook.kind != NULL && strcmp(d.hook.kind, "github") == 0 ? "github" : "generic";
  if (!verify(r, &d, &ret))
    goto out;
  /* Authentic from here on. */
  json_error_t jerr;
  d.payload = json_loadb(r->body ? r->body : "", r->body_len, 0, &jerr); /* NULL: not JSON */
  d.labels = json_object();
  if (strcmp(d.kind, "github") == 0 ? !github_delivery(r, &d, &ret)
                                    : !generic_delivery(r, &d, &ret))
    goto out;
  ret = start_job(r, db, &d);
out:
  tb_api_db_put(r, db);
  tb_q_hooks_hook_clear(&d.hook);
  json_decref(d.events);
  json_decref(d.payload);
  json_decref(d.labels);
  return ret;
}

/* ------------------------------------------------------------------ admit */

bool
tb_api_hooks_admit(struct tb_api_req *r)
{
  struct tb_db *db = tb_api_db_get(r);
  int rc = tb_q_hooks_exists(db, r->id);
  tb_api_db_put(r, db);
  return rc > 0;
}
