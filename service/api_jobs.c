/*
 * api_jobs: /v1/jobs, benchmark jobs of the caller's project.
 *   POST /v1/jobs               submit a spec (api_spec.c) -> 202 + Location;
 *                               Idempotency-Key replays the first answer
 *   GET  /v1/jobs               list: ?state= &endpoint_id= &label=k:v (repeat)
 *                               &limit= (<= 100) &cursor= (opaque)
 *   GET  /v1/jobs/{id}          state, progress, timestamps, cells so far;
 *                               ETag W/"state-cells_done-updated_us";
 *                               ?wait=N (<= 60 s) long-polls with
 *                               If-None-Match or ?since=<cells_done>
 *   POST /v1/jobs/{id}/cancel   queued -> cancelled (200); running ->
 *                               cancel_requested (202); finished -> 409
 *   GET  /v1/jobs/{id}/result   the result document: api_result.c
 *
 * Documents are built by PostgreSQL (json_build_object) in the one query
 * that reads them (service/q_jobs.c, every statement of this file): one
 * round trip per request, no re-encoding in C.  GET
 * /v1/jobs/{id} goes through the job-document cache (api_jobcache.h),
 * dropped per job by NOTIFY tb_job_changed: polling costs no round trip.
 */
#include <stdlib.h>
#include <string.h>

#include "api_jobs.h"

#include "api_handlers.h"
#include "api_jobcache.h"
#include "api_notify.h"
#include "api_page.h"
#include "api_spec.h"
#include "api_streams.h"
#include "api_traces.h"
#include "q_jobs.h"
#include "result/tb_jobdoc.h"
#include "base/tb_log.h"
#include "spec/tb_plan.h"
#include "db/tb_workers.h"

/* A job row from spec, within ten's limits (see tb_api_job_insert). */
static int
insert(struct tb_db *db, const struct tb_tenancy *ten, const struct tb_q_jobs_row *row,
       char job_id[TB_API_ID_LEN + 1], char **doc, struct tb_tenancy_refusal *why)
{
  int64_t queued = 0;
  int rc = tb_q_jobs_insert(db, row, job_id, doc, &queued);
  if (rc == TB_Q_JOBS_FULL) {
    tb_tenancy_refuse_queued(ten, queued, why);
    return TB_API_JOB_REFUSED;
  }
  return rc;
}

/* A job of N shards (a number, not "auto": that is the worker's to
 * decide) needs N + 1 live workers: 1, or TB_API_JOB_REFUSED with *why,
 * or TB_DB_SOFT / TB_DB_HARD. */
static int
shards_room(struct tb_db *db, const struct tb_tenancy *ten, const json_t *spec,
            struct tb_tenancy_refusal *why)
{
  const json_t *sh = json_object_get(spec, "shards");
  if (!json_is_integer(sh) || json_integer_value(sh) <= 1)
    return 1;
  int64_t live = 0;
  int rc = tb_workers_live(db, ten->worker_live_s, &live);
  if (rc < 0)
    return rc;
  return tb_tenancy_check_shards(ten, json_integer_value(sh), live, why) ? 1 : TB_API_JOB_REFUSED;
}

int
tb_api_job_insert(struct tb_db *db, const struct tb_tenancy *ten, const char *project_id,
                  const char *request_id, const json_t *spec, double trace_span_s,
                  char job_id[TB_API_ID_LEN + 1], char **doc, struct tb_tenancy_refusal *why)
{
  return tb_api_job_insert_from(db, ten, project_id, request_id, spec, trace_span_s, NULL, job_id,
                                doc, why);
}

int
tb_api_job_insert_from(struct tb_db *db, const struct tb_tenancy *ten, const char *project_id,
                       const char *request_id, const json_t *spec, double trace_span_s,
                       const struct tb_api_job_origin *origin, char job_id[TB_API_ID_LEN + 1],
                       char **doc, struct tb_tenancy_refusal *why)
{
  struct tb_spec_job_row jr;
  tb_spec_job_row(spec, &jr);
  /* the size only when limited: it plans every cell */
  double secs = ten->job_seconds > 0 ? tb_plan_job_seconds(spec, trace_span_s) : -1;
  if (!tb_tenancy_check_job(ten, secs, jr.max_attempts_given ? jr.max_attempts : 0, why))
    return TB_API_JOB_REFUSED;
  int rc = shards_room(db, ten, spec, why);
  if (rc != 1)
    return rc;
  /* not given: the table's default, within the operator's limit */
  if (!jr.max_attempts_given && jr.max_attempts > ten->max_attempts)
    jr.max_attempts = ten->max_attempts;
  char *spec_text = json_dumps(spec, JSON_COMPACT | JSON_SORT_KEYS);
  char *labels_text = jr.labels ? json_dumps(jr.labels, JSON_COMPACT) : NULL;
  char prio[24], attempts[24];
  snprintf(prio, sizeof prio, "%lld", (long long)jr.priority);
  snprintf(attempts, sizeof attempts, "%lld", (long long)jr.max_attempts);
  struct tb_q_jobs_row row = {
    .endpoint_id = json_string_value(json_object_get(spec, "endpoint_id")),
    .project_id = project_id,
    .spec = spec_text,
    .labels = labels_text,
    .priority = prio,
    .exclusive_group = jr.exclusive_group,
    .max_attempts = attempts,
    .request_id = request_id != NULL && request_id[0] != '\0' ? request_id : NULL,
    .shared_groups = ten->shared_groups,
    .max_queued = ten->queued,
    .schedule_id = origin != NULL ? origin->schedule_id : NULL,
    .schedule_slot = origin != NULL ? origin->schedule_slot : NULL,
  };
  rc = spec_text == NULL ? TB_DB_HARD : insert(db, ten, &row, job_id, doc, why);
  free(spec_text);
  free(labels_text);
  return rc;
}

int
tb_api_job_insert_finished(struct tb_db *db, const char *project_id, const char *request_id,
                           const char *endpoint_id, const json_t *spec, const json_t *labels,
                           const json_t *result, char job_id[TB_API_ID_LEN + 1])
{
  char *spec_text = json_dumps(spec, JSON_COMPACT | JSON_SORT_KEYS);
  char *labels_text = json_is_object(labels) ? json_dumps(labels, JSON_COMPACT) : NULL;
  char *result_text = json_dumps(result, JSON_COMPACT);
  char ncells[24];
  snprintf(ncells, sizeof ncells, "%zu", json_array_size(json_object_get(result, "cells")));
  struct tb_q_jobs_row row = {
    .endpoint_id = endpoint_id,
    .project_id = project_id,
    .spec = spec_text,
    .labels = labels_text,
    .request_id = request_id != NULL && request_id[0] != '\0' ? request_id : NULL,
    .result = result_text,
    .cells = ncells,
  };
  int64_t queued;
  int rc = spec_text == NULL || result_text == NULL
             ? TB_DB_HARD
             : tb_q_jobs_insert(db, &row, job_id, NULL, &queued);
  free(spec_text);
  free(labels_text);
  free(result_text);
  return rc;
}

/* The answer to replay for an Idempotency-Key seen before. */
static enum MHD_Result
replay(struct tb_api_req *r, const struct tb_q_jobs_idem *first, const char *hash)
{
  if (first->request_hash == NULL || strcmp(first->request_hash, hash) != 0)
    return tb_api_reply_error(r, TB_EC_IDEMPOTENCY_MISMATCH,
                              "this Idempotency-Key was used with another request body", NULL);
  int64_t st = 0;
  if (!tb_parse_i64(first->status, 100, 599, &st))
    return tb_api_reply_error(r, TB_EC_DB_UNAVAILABLE, "the first request is still running", NULL);
  const char *h[] = { "Location", first->location, "Idempotent-Replayed", "true", NULL };
  return tb_api_reply_text(r, (unsigned)st, first->body != NULL ? first->body : "", h);
}

enum MHD_Result
tb_api_reply_refusal(struct tb_api_req *r, const struct tb_tenancy_refusal *why)
{
  json_t *extra = json_pack("{s:s,s:s,s:I,s:f}", "limit", why->limit, "setting", why->setting,
                            "max", (json_int_t)why->max, "value", why->value);
  if (why->too_large)
    return tb_api_reply_error(r, TB_EC_JOB_TOO_LARGE, why->detail, extra);
  r->retry_after_s = TB_API_LIMIT_RETRY_S;
  return tb_api_reply_error(r, TB_EC_LIMIT_REACHED, why->detail, extra);
}

void
tb_api_job_queued(struct tb_db *db, const char *job_id)
{
  if (tb_q_jobs_notify_queued(db, job_id) < 0) /* the workers' polling floor */
    tb_log(TB_LOG_WARN, "cannot notify the workers of a new job", "job", TB_LS, job_id, NULL);
}

enum MHD_Result
tb_api_jobs_submit(struct tb_api_req *r)
{
  json_t *spec = NULL, *errors = NULL;
  int src = tb_spec_job(r->body ? r->body : "", r->body_len, &spec, &errors);
  if (src != TB_SPEC_OK)
    return tb_api_reply_spec_errors(r, src, errors);
  const char *idem = tb_api_header(r, "Idempotency-Key");
  if (idem != NULL && (idem[0] == '\0' || strlen(idem) > TB_API_IDEM_KEY_MAX)) {
    json_decref(spec);
    return tb_api_reply_error(r, TB_EC_BAD_REQUEST, "Idempotency-Key must be 1 to 255 characters",
                              NULL);
  }
  char hash[65] = "";
  if (idem != NULL) { /* the body's hash matters to a replay only */
    size_t n = r->body_len + 16;
    char *buf = tb_xmalloc(n);
    memcpy(buf, "POST /v1/jobs\n", 14);
    if (r->body_len > 0)
      memcpy(buf + 14, r->body, r->body_len);
    tb_crypto_sha256_hex(buf, 14 + r->body_len, hash);
    free(buf);
  }
  enum MHD_Result ret;
  struct tb_q_jobs_idem first = { 0 };
  char *body = NULL;
  struct tb_db *db = tb_api_db_get(r);
  int rc;
  bool in_tx = false;
  if (idem != NULL) {
    if ((rc = tb_db_begin(db)) < 0) {
      ret = tb_api_reply_db(r, rc);
      goto out;
    }
    in_tx = true;
    rc = tb_q_jobs_idem_claim(db, r->key_id, idem, hash);
    if (rc < 0) {
      ret = tb_api_reply_db(r, rc);
      goto out;
    }
    if (rc == 0) { /* seen before: replay its answer */
      tb_db_rollback(db);
      in_tx = false;
      rc = tb_q_jobs_idem_get(db, r->key_id, idem, &first);
      if (rc < 0)
        ret = tb_api_reply_db(r, rc);
      else if (rc == 0)
        ret = tb_api_reply_error(r, TB_EC_DB_UNAVAILABLE, "retry", NULL);
      else
        ret = replay(r, &first, hash);
      goto out;
    }
  }
  json_t *terr = NULL; /* issue 25: the uploaded trace it names, checked with the insert */
  char job_id[TB_API_ID_LEN + 1];
  struct tb_tenancy_refusal why;
  rc = tb_api_traces_job_insert(db, &r->api->tenancy, r->project_id, r->request_id, spec, job_id,
                                &body, &terr, &why);
  if (rc == TB_API_TRACES_BAD) {
    ret = tb_api_reply_spec_errors(r, TB_SPEC_INVALID, terr);
    goto out;
  }
  if (rc < 0) {
    ret = tb_api_reply_db(r, rc);
    goto out;
  }
  if (rc == TB_API_JOB_REFUSED) { /* nothing stored: the Idempotency-Key is rolled back too */
    ret = tb_api_reply_refusal(r, &why);
    goto out;
  }
  if (rc == 0) {
    json_t *e = json_array();
    json_array_append_new(e, json_pack("{s:s,s:s}", "field", "endpoint_id", "detail",
                                       "no such endpoint in this project"));
    ret = tb_api_reply_spec_errors(r, TB_SPEC_INVALID, e);
    goto out;
  }
  char loc[64];
  snprintf(loc, sizeof loc, "/v1/jobs/%s", job_id);
  if (in_tx) {
    rc = tb_q_jobs_idem_store(db, r->key_id, idem, "202", loc, body);
    if (rc >= 0)
      rc = tb_db_commit(db);
    in_tx = false;
    if (rc < 0) {
      tb_db_rollback(db);
      ret = tb_api_reply_db(r, rc);
      goto out;
    }
  }
  tb_api_job_queued(db, job_id);
  const char *h[] = { "Location", loc, NULL };
  ret = tb_api_reply_text(r, MHD_HTTP_ACCEPTED, body, h);
out:
  if (in_tx)
    tb_db_rollback(db);
  tb_api_db_put(r, db);
  tb_q_jobs_idem_clear(&first);
  free(body);
  json_decref(spec);
  return ret;
}

/* -------------------------------------------------------------------- list */

#define TB_JOBS_LABELS_MAX 16

struct label_args {
  json_t *obj;
  bool bad;
  unsigned n;
};

static enum MHD_Result
collect_label(void *cls, enum MHD_ValueKind kind, const char *key, const char *value)
{
  struct label_args *la = cls;
  (void)kind;
  if (strcmp(key, "label") != 0)
    return MHD_YES;
  const char *colon = value ? strchr(value, ':') : NULL;
  if (colon == NULL || colon == value || ++la->n > TB_JOBS_LABELS_MAX ||
      (size_t)(colon - value) > TB_SPEC_MAX_LABEL_KEY) {
    la->bad = true;
    return MHD_NO;
  }
  char k[TB_SPEC_MAX_LABEL_KEY + 1];
  memcpy(k, value, (size_t)(colon - value));
  k[colon - value] = '\0';
  json_t *v = json_string(colon + 1);
  if (v == NULL || json_object_get(la->obj, k) != NULL) {
    json_decref(v);
    la->bad = true;
    return MHD_NO;
  }
  json_object_set_new(la->obj, k, v);
  return MHD_YES;
}

enum MHD_Result
tb_api_jobs_list(struct tb_api_req *r)
{
  const char *state = tb_api_arg(r, "state");
  const char *ep = tb_api_arg(r, "endpoint_id");
  if (state != NULL && !tb_jobdoc_state_ok(state))
    return tb_api_reply_error(r, TB_EC_BAD_REQUEST,
                              "state: queued, running, succeeded, failed or cancelled", NULL);
  if (ep != NULL && !tb_api_is_uuid(ep))
    return tb_api_reply_error(r, TB_EC_BAD_REQUEST, "endpoint_id must be a UUID", NULL);
  enum MHD_Result ret;
  struct tb_api_page pg;
  if (!tb_api_page_args(r, &pg, "jobs", &ret))
    return ret;
  struct label_args la = { .obj = json_object() };
  MHD_get_connection_values(r->conn, MHD_GET_ARGUMENT_KIND, collect_label, &la);
  if (la.bad) {
    json_decref(la.obj);
    free(pg.buf);
    return tb_api_reply_error(r, TB_EC_BAD_REQUEST,
                              "label must be key:value (at most 16, each key once)", NULL);
  }
  char *labels = json_object_size(la.obj) ? json_dumps(la.obj, JSON_COMPACT) : NULL;
  json_decref(la.obj);
  struct tb_q_jobs_filter f = {
    .project_id = r->project_id,
    .state = state,
    .endpoint_id = ep,
    .labels = labels,
    .after_us = pg.after_us,
    .after_id = pg.after_id,
    .limit = pg.limit + 1,
  };
  struct tb_db *db = tb_api_db_get(r);
  int rc = tb_q_jobs_list(db, &f, tb_api_page_item, &pg);
  tb_api_db_put(r, db);
  free(labels);
  return tb_api_page_reply(r, &pg, rc);
}

/* --------------------------------------------------------------------- get */

/* The job document of r->id through the cache: 1 with *out (release it),
 * 0 no such job in this project, < 0 a database error. */
static int
job_doc(struct tb_api_req *r, struct tb_api_jobdoc **out)
{
  struct tb_api_jobcache *c = r->api->jobs_cache;
  *out = tb_api_jobcache_get(c, r->id, r->project_id);
  if (*out != NULL)
    return 1;
  uint64_t ticket = tb_api_jobcache_ticket(c, r->id);
  struct tb_q_jobs_doc q;
  struct tb_db *db = tb_api_db_get(r);
  int rc = tb_q_jobs_get(db, r->id, r->project_id, &q);
  tb_api_db_put(r, db);
  if (rc <= 0)
    return rc;
  int64_t done = 0;
  if (!tb_parse_i64(q.cells_done, 0, INT64_MAX, &done))
    done = 0;
  char etag[96];
  snprintf(etag, sizeof etag, "W/\"%s-%s-%s\"", q.state, q.cells_done, q.updated_us);
  size_t len = q.len;
  tb_api_jobcache_put(c, ticket, r->id, r->project_id, q.state, done, etag, q.doc, len);
  /* this request's own copy (the cache may have refused or dropped it) */
  struct tb_api_jobdoc *d = tb_xmalloc(sizeof *d + len + 1);
  snprintf(d->job_id, sizeof d->job_id, "%s", r->id);
  snprintf(d->project_id, sizeof d->project_id, "%s", r->project_id);
  snprintf(d->state, sizeof d->state, "%s", q.state);
  memcpy(d->etag, etag, sizeof etag);
  d->cells_done = done;
  d->len = len;
  d->refs = -1; /* not the cache's: freed by job_doc_release */
  memcpy(d->doc, q.doc, len + 1);
  free(q.doc);
  *out = d;
  return 1;
}

static void
job_doc_release(struct tb_api_req *r, struct tb_api_jobdoc *d)
{
  if (d != NULL && d->refs == -1)
    free(d);
  else
    tb_api_jobcache_release(r->api->jobs_cache, d);
}

enum MHD_Result
tb_api_jobs_get(struct tb_api_req *r)
{
  const char *wait_s = tb_api_arg(r, "wait");
  const char *since_s = tb_api_arg(r, "since");
  const char *inm = tb_api_header(r, MHD_HTTP_HEADER_IF_NONE_MATCH);
  int64_t wait = 0, since = -1;
  if (wait_s != NULL && !tb_parse_i64(wait_s, 0, r->api->wait_max_s, &wait))
    return tb_api_reply_error(r, TB_EC_BAD_REQUEST, "wait must be 0 to 60 (seconds)", NULL);
  if (since_s != NULL && !tb_parse_i64(since_s, 0, INT32_MAX, &since))
    return tb_api_reply_error(r, TB_EC_BAD_REQUEST, "since must be a cell count", NULL);
  if (wait > 0 && r->wait_deadline_ns == 0) {
    enum MHD_Result busy; /* TOKBENCH_WAIT_PER_KEY long-polls at once */
    if (!tb_api_streams_take(r, TB_API_STREAM_WAIT, &busy))
      return busy;
    r->wait_deadline_ns = tb_time_mono_ns() + wait * 1000000000LL;
  }
  for (;;) {
    bool waiting = wait > 0 && tb_time_mono_ns() < r->wait_deadline_ns && !r->api->stopping;
    if (waiting) /* before the query: a NOTIFY after it is not lost */
      tb_api_notify_arm(r, r->id, r->wait_deadline_ns);
    struct tb_api_jobdoc *d = NULL;
    int rc = job_doc(r, &d);
    if (rc <= 0) {
      tb_api_notify_disarm(r);
      if (rc == 0)
        return tb_api_reply_error(r, TB_EC_NOT_FOUND, "no such job", NULL);
      return tb_api_reply_db(r, rc);
    }
    bool etag_same = inm != NULL && strcmp(inm, d->etag) == 0;
    bool unchanged =
      etag_same || (since >= 0 && d->cells_done <= since && !tb_jobdoc_terminal(d->state));
    if (unchanged && waiting && !tb_jobdoc_terminal(d->state)) {
      job_doc_release(r, d);
      if (tb_api_notify_suspend(r))
        return MHD_YES; /* called again on resume */
      continue;         /* it fired meanwhile: look again */
    }
    tb_api_notify_disarm(r);
    const char *h[] = { "ETag", d->etag, NULL };
    enum MHD_Result ret;
    if (etag_same)
      ret = tb_api_reply(r, MHD_HTTP_NOT_MODIFIED, NULL, "", 0, h);
    else
      ret = tb_api_reply(r, MHD_HTTP_OK, "application/json", d->doc, d->len, h);
    job_doc_release(r, d);
    return ret;
  }
}

/* ------------------------------------------------------------------ cancel */

enum MHD_Result
tb_api_jobs_cancel(struct tb_api_req *r)
{
  char old[16], *doc = NULL;
  struct tb_db *db = tb_api_db_get(r);
  int rc = tb_q_jobs_cancel(db, r->id, r->project_id, old, &doc);
  tb_api_db_put(r, db);
  enum MHD_Result ret;
  if (!tb_api_found(r, rc, "no such job", &ret))
    return ret;
  if (doc == NULL) {
    char d[96];
    snprintf(d, sizeof d, "the job has %s already", old);
    ret = tb_api_reply_error(r, TB_EC_JOB_FINISHED, d, NULL);
  } else {
    ret =
      tb_api_reply_text(r, strcmp(old, "queued") == 0 ? MHD_HTTP_OK : MHD_HTTP_ACCEPTED, doc, NULL);
  }
  free(doc);
  return ret;
}
