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
 * that reads them: one round trip per request, no re-encoding in C.  GET
 * /v1/jobs/{id} goes through the job-document cache (api_jobcache.h),
 * dropped per job by NOTIFY tb_job_changed: polling costs no round trip.
 */
#include <stdlib.h>
#include <string.h>

#include "api_jobs.h"

#include "api_handlers.h"
#include "api_jobcache.h"
#include "api_notify.h"
#include "api_spec.h"
#include "api_streams.h"
#include "tb_jobdoc.h"
#include "tb_log.h"

#define JOB_MEMBERS                                                                       \
  "'id', j.id, 'endpoint_id', j.endpoint_id, 'state', j.state, "                          \
  "'cancel_requested', j.cancel_requested, 'priority', j.priority, 'labels', j.labels, "  \
  "'spec', j.spec, 'progress', json_build_object('cells_done', j.cells_done, "            \
  "'cells_total', j.cells_total, 'current_cell', j.current_cell, 'eta_s', j.eta_s), "     \
  "'attempts', j.attempts, 'max_attempts', j.max_attempts, 'error', j.error, "            \
  "'created_at', j.created_at, 'started_at', j.started_at, "                              \
  "'finished_at', j.finished_at, 'updated_at', j.updated_at"

#define JOB_CELLS                                                                         \
  "coalesce((SELECT json_agg(c.cell ORDER BY c.seq) FROM job_cells c "                   \
  "WHERE c.job_id = j.id), '[]'::json)"

#define UPDATED_US "(extract(epoch FROM j.updated_at) * 1000000)::bigint"

/* The one job insert: a queued job (tb_api_job_insert) or, with a result
 * document in $9, a finished one (tb_api_job_insert_finished: an import,
 * with a busy key of its own so it never holds an endpoint).  The busy key
 * of a queued job (one running job per key): its exclusive group (the
 * spec's, else the endpoint's) scoped to the project, 'shared:<name>' for a
 * group of TOKBENCH_SHARED_GROUPS ($11, comma list), else the endpoint. */
static const struct tb_db_stmt job_insert = {
  "api_job_insert",
  "WITH e AS (SELECT id, exclusive_group FROM endpoints "
  "  WHERE id = $1::uuid AND project_id = $2 AND deleted_at IS NULL), "
  "j AS (INSERT INTO jobs (project_id, endpoint_id, spec, labels, priority, busy_key, "
  "    max_attempts, request_id, state, result, cells_total, cells_done, started_at, "
  "    finished_at) "
  "  SELECT $2, e.id, $3::jsonb, coalesce($4::jsonb, '{}'), coalesce($5::int, 0), "
  "    CASE WHEN $9::jsonb IS NOT NULL THEN 'import:' || gen_random_uuid()::text "
  "      WHEN coalesce($6, e.exclusive_group) IS NULL THEN e.id::text "
  "      WHEN coalesce($6, e.exclusive_group) = ANY (string_to_array($11, ',')) "
  "        THEN 'shared:' || coalesce($6, e.exclusive_group) "
  "      ELSE 'group:' || $2::text || ':' || coalesce($6, e.exclusive_group) END, "
  "    coalesce($7::int, 3), $8, CASE WHEN $9::jsonb IS NULL THEN 'queued' ELSE 'succeeded' END, "
  "    $9::jsonb, $10::int, coalesce($10::int, 0), "
  "    CASE WHEN $9::jsonb IS NULL THEN NULL ELSE now() END, "
  "    CASE WHEN $9::jsonb IS NULL THEN NULL ELSE now() END FROM e "
  "  RETURNING *) "
  "SELECT j.id::text, NULL, "
  "  json_build_object(" JOB_MEMBERS ", 'cells', '[]'::json)::text FROM j",
};

/* Outside the insert's transaction, on purpose: PostgreSQL serializes the
 * commits of transactions that NOTIFY (a cluster-wide lock held through the
 * WAL flush), so a NOTIFY inside each insert made every POST wait for the
 * fsync of the one before: no group commit.  A transaction with nothing but
 * a NOTIFY writes no WAL and commits at once. */
static const struct tb_db_stmt job_queued = {
  "api_job_queued",
  "SELECT pg_notify('tb_jobs_queued', $1)",
};

static const struct tb_db_stmt job_get = {
  "api_job_get",
  "SELECT j.state, j.cells_done, " UPDATED_US ", "
  "  json_build_object(" JOB_MEMBERS ", 'cells', " JOB_CELLS ")::text "
  "FROM jobs j WHERE j.id = $1 AND j.project_id = $2",
};

static const struct tb_db_stmt job_list = {
  "api_job_list",
  "SELECT (extract(epoch FROM j.created_at) * 1000000)::bigint, j.id::text, "
  "  json_build_object(" JOB_MEMBERS ")::text "
  "FROM jobs j WHERE j.project_id = $1 "
  "  AND ($2::text IS NULL OR j.state = $2) "
  "  AND ($3::uuid IS NULL OR j.endpoint_id = $3::uuid) "
  "  AND ($4::jsonb IS NULL OR j.labels @> $4::jsonb) "
  "  AND ($5::bigint IS NULL OR (j.created_at, j.id) < "
  "       (timestamptz 'epoch' + $5::bigint * interval '1 microsecond', $6::uuid)) "
  "ORDER BY j.created_at DESC, j.id DESC LIMIT $7::int",
};

static const struct tb_db_stmt job_cancel = {
  "api_job_cancel",
  "WITH old AS (SELECT id, state FROM jobs WHERE id = $1 AND project_id = $2 FOR UPDATE), "
  "upd AS (UPDATE jobs j SET "
  "    state = CASE WHEN old.state = 'queued' THEN 'cancelled' ELSE j.state END, "
  "    cancel_requested = true, "
  "    finished_at = CASE WHEN old.state = 'queued' THEN now() ELSE j.finished_at END, "
  "    updated_at = now() "
  "  FROM old WHERE j.id = old.id AND old.state IN ('queued', 'running') RETURNING j.*), "
  "ev AS (INSERT INTO job_events (job_id, kind, data) "
  "  SELECT id, 'state', json_build_object('state', 'cancelled', "
  "    'reason', 'cancelled before it started') FROM upd WHERE state = 'cancelled' "
  "  RETURNING job_id) "
  "SELECT old.state, "
  "  (SELECT count(*) FROM (SELECT pg_notify('tb_job_changed', id::text) FROM upd) n), "
  "  (SELECT count(*) FROM ev), "
  "  (SELECT json_build_object(" JOB_MEMBERS ")::text FROM upd j) FROM old",
};

static const struct tb_db_stmt idem_claim = {
  "api_idem_claim",
  "INSERT INTO idempotency_keys (api_key_id, idem_key, request_hash, status, body) "
  "VALUES ($1, $2, $3, 0, '') ON CONFLICT DO NOTHING",
};

static const struct tb_db_stmt idem_get = {
  "api_idem_get",
  "SELECT request_hash, status, location, body FROM idempotency_keys "
  "WHERE api_key_id = $1 AND idem_key = $2",
};

static const struct tb_db_stmt idem_store = {
  "api_idem_store",
  "UPDATE idempotency_keys SET status = $3, location = $4, body = $5 "
  "WHERE api_key_id = $1 AND idem_key = $2",
};

/* ------------------------------------------------------------------ submit */

/* Runs job_insert with its eleven parameters (p[8], p[9] NULL for a
 * queued job); see tb_api_job_insert. */
static int
insert_row(struct tb_db *db, const char *const p[11], char job_id[TB_API_ID_LEN + 1],
           char **doc)
{
  PGresult *res = NULL;
  int rc = tb_db_exec(db, &job_insert, 11, p, &res);
  if (rc == 1) {
    snprintf(job_id, TB_API_ID_LEN + 1, "%s", PQgetvalue(res, 0, 0));
    if (doc != NULL)
      *doc = tb_xstrdup(PQgetvalue(res, 0, 2));
  }
  PQclear(res);
  return rc;
}

int
tb_api_job_insert(struct tb_db *db, const struct tb_tenancy *ten, const char *project_id,
                  const char *request_id, const json_t *spec, char job_id[TB_API_ID_LEN + 1],
                  char **doc, struct tb_tenancy_refusal *why)
{
  if (!tb_tenancy_check_spec(ten, spec, why))
    return TB_API_JOB_REFUSED;
  int lrc = tb_tenancy_check_queued(db, ten, project_id, why);
  if (lrc <= 0)
    return lrc == 0 ? TB_API_JOB_REFUSED : lrc;
  char *spec_text = json_dumps(spec, JSON_COMPACT | JSON_SORT_KEYS);
  json_t *labels = json_object_get(spec, "labels");
  char *labels_text = labels ? json_dumps(labels, JSON_COMPACT) : NULL;
  char prio[24], attempts[24];
  json_t *pv = json_object_get(spec, "priority"), *av = json_object_get(spec, "max_attempts");
  snprintf(prio, sizeof prio, "%lld", (long long)json_integer_value(pv));
  /* not given: the table's default, within the operator's limit */
  const struct tb_spec_field *af = tb_spec_field("max_attempts");
  long long att = av != NULL ? (long long)json_integer_value(av)
                             : (af != NULL && af->def != NULL ? atoll(af->def) : 3);
  if (av == NULL && att > ten->max_attempts)
    att = ten->max_attempts;
  snprintf(attempts, sizeof attempts, "%lld", att);
  const char *p[11] = {
    json_string_value(json_object_get(spec, "endpoint_id")), project_id, spec_text,
    labels_text, pv ? prio : NULL, json_string_value(json_object_get(spec, "exclusive_group")),
    attempts, request_id != NULL && request_id[0] != '\0' ? request_id : NULL,
    NULL, NULL, ten->shared_groups,
  };
  int rc = spec_text == NULL ? TB_DB_HARD : insert_row(db, p, job_id, doc);
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
  const char *p[11] = {
    endpoint_id, project_id, spec_text, labels_text, NULL, NULL, NULL,
    request_id != NULL && request_id[0] != '\0' ? request_id : NULL, result_text, ncells, NULL,
  };
  int rc = spec_text == NULL || result_text == NULL ? TB_DB_HARD
                                                     : insert_row(db, p, job_id, NULL);
  free(spec_text);
  free(labels_text);
  free(result_text);
  return rc;
}

/* The answer to replay for an Idempotency-Key seen before. */
static enum MHD_Result
replay(struct tb_api_req *r, PGresult *res, const char *hash)
{
  if (strcmp(PQgetvalue(res, 0, 0), hash) != 0)
    return tb_api_reply_error(r, TB_EC_IDEMPOTENCY_MISMATCH,
                              "this Idempotency-Key was used with another request body", NULL);
  int64_t st = 0;
  if (!tb_parse_i64(PQgetvalue(res, 0, 1), 100, 599, &st))
    return tb_api_reply_error(r, TB_EC_DB_UNAVAILABLE, "the first request is still running",
                              NULL);
  const char *loc = PQgetisnull(res, 0, 2) ? NULL : PQgetvalue(res, 0, 2);
  const char *h[] = { "Location", loc, "Idempotent-Replayed", "true", NULL };
  return tb_api_reply_text(r, (unsigned)st, PQgetvalue(res, 0, 3), h);
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
  const char *p[] = { job_id };
  if (tb_db_exec(db, &job_queued, 1, p, NULL) < 0) /* the workers' polling floor */
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
  PGresult *res = NULL;
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
    const char *ip[] = { r->key_id, idem, hash };
    rc = tb_db_exec(db, &idem_claim, 3, ip, NULL);
    if (rc < 0) {
      ret = tb_api_reply_db(r, rc);
      goto out;
    }
    if (rc == 0) { /* seen before: replay its answer */
      tb_db_rollback(db);
      in_tx = false;
      rc = tb_db_exec(db, &idem_get, 2, ip, &res);
      if (rc < 0)
        ret = tb_api_reply_db(r, rc);
      else if (rc == 0)
        ret = tb_api_reply_error(r, TB_EC_DB_UNAVAILABLE, "retry", NULL);
      else
        ret = replay(r, res, hash);
      goto out;
    }
  }
  char job_id[TB_API_ID_LEN + 1];
  struct tb_tenancy_refusal why;
  rc = tb_api_job_insert(db, &r->api->tenancy, r->project_id, r->request_id, spec, job_id, &body,
                         &why);
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
    const char *sp[] = { r->key_id, idem, "202", loc, body };
    rc = tb_db_exec(db, &idem_store, 5, sp, NULL);
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
  PQclear(res);
  free(body);
  json_decref(spec);
  return ret;
}

/* -------------------------------------------------------------------- list */

#define TB_JOBS_LIST_MAX 100
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
  const char *lim = tb_api_arg(r, "limit");
  const char *cur = tb_api_arg(r, "cursor");
  int64_t limit = 20;
  if (state != NULL && !tb_jobdoc_state_ok(state))
    return tb_api_reply_error(r, TB_EC_BAD_REQUEST,
                              "state: queued, running, succeeded, failed or cancelled", NULL);
  if (ep != NULL && !tb_api_is_uuid(ep))
    return tb_api_reply_error(r, TB_EC_BAD_REQUEST, "endpoint_id must be a UUID", NULL);
  if (lim != NULL && !tb_parse_i64(lim, 1, TB_JOBS_LIST_MAX, &limit))
    return tb_api_reply_error(r, TB_EC_BAD_REQUEST, "limit must be 1 to 100", NULL);
  /* cursor: hex of "<created_us>/<id>" */
  char cur_us[24] = "", cur_id[TB_API_ID_LEN + 1] = "";
  if (cur != NULL) {
    char text[64];
    size_t cl = strlen(cur);
    bool ok = cl % 2 == 0 && cl / 2 < sizeof text && tb_hex_decode(cur, text, cl / 2);
    if (ok) {
      text[cl / 2] = '\0';
      char *slash = strchr(text, '/');
      int64_t us;
      ok = slash != NULL && (size_t)(slash - text) < sizeof cur_us;
      if (ok) {
        *slash = '\0';
        ok = tb_parse_i64(text, 0, INT64_MAX, &us) && tb_api_is_uuid(slash + 1);
        snprintf(cur_us, sizeof cur_us, "%lld", (long long)us);
        snprintf(cur_id, sizeof cur_id, "%s", slash + 1);
      }
    }
    if (!ok)
      return tb_api_reply_error(r, TB_EC_BAD_REQUEST, "cursor is not one we gave", NULL);
  }
  struct label_args la = { .obj = json_object() };
  MHD_get_connection_values(r->conn, MHD_GET_ARGUMENT_KIND, collect_label, &la);
  if (la.bad) {
    json_decref(la.obj);
    return tb_api_reply_error(r, TB_EC_BAD_REQUEST,
                              "label must be key:value (at most 16, each key once)", NULL);
  }
  char *labels = json_object_size(la.obj) ? json_dumps(la.obj, JSON_COMPACT) : NULL;
  json_decref(la.obj);
  char limtxt[24];
  snprintf(limtxt, sizeof limtxt, "%lld", (long long)limit + 1);
  const char *p[] = { r->project_id, state, ep, labels, cur ? cur_us : NULL,
                      cur ? cur_id : NULL, limtxt };
  PGresult *res = NULL;
  struct tb_db *db = tb_api_db_get(r);
  int rc = tb_db_exec(db, &job_list, 7, p, &res);
  tb_api_db_put(r, db);
  free(labels);
  if (rc < 0)
    return tb_api_reply_db(r, rc);
  int n = rc > limit ? (int)limit : rc;
  size_t len = 32;
  for (int i = 0; i < n; i++)
    len += (size_t)PQgetlength(res, i, 2) + 1;
  char *body = tb_xmalloc(len + 256);
  size_t o = 0;
  memcpy(body + o, "{\"jobs\":[", 9);
  o += 9;
  for (int i = 0; i < n; i++) {
    if (i > 0)
      body[o++] = ',';
    size_t l = (size_t)PQgetlength(res, i, 2);
    memcpy(body + o, PQgetvalue(res, i, 2), l);
    o += l;
  }
  if (rc > limit) {
    char text[64], hex[130];
    snprintf(text, sizeof text, "%s/%s", PQgetvalue(res, n - 1, 0), PQgetvalue(res, n - 1, 1));
    tb_hex_encode(text, strlen(text), hex);
    o += (size_t)snprintf(body + o, 200, "],\"next_cursor\":\"%s\"}", hex);
  } else {
    memcpy(body + o, "],\"next_cursor\":null}", 22);
    o += 21;
  }
  PQclear(res);
  enum MHD_Result ret = tb_api_reply(r, MHD_HTTP_OK, "application/json", body, o, NULL);
  free(body);
  return ret;
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
  const char *p[] = { r->id, r->project_id };
  PGresult *res = NULL;
  struct tb_db *db = tb_api_db_get(r);
  int rc = tb_db_exec(db, &job_get, 2, p, &res);
  tb_api_db_put(r, db);
  if (rc <= 0) {
    PQclear(res);
    return rc;
  }
  const char *state = PQgetvalue(res, 0, 0);
  int64_t done = 0;
  if (!tb_parse_i64(PQgetvalue(res, 0, 1), 0, INT64_MAX, &done))
    done = 0;
  char etag[96];
  snprintf(etag, sizeof etag, "W/\"%s-%s-%s\"", state, PQgetvalue(res, 0, 1),
           PQgetvalue(res, 0, 2));
  size_t len = (size_t)PQgetlength(res, 0, 3);
  tb_api_jobcache_put(c, ticket, r->id, r->project_id, state, done, etag,
                      PQgetvalue(res, 0, 3), len);
  /* this request's own copy (the cache may have refused or dropped it) */
  struct tb_api_jobdoc *d = tb_xmalloc(sizeof *d + len + 1);
  snprintf(d->job_id, sizeof d->job_id, "%s", r->id);
  snprintf(d->project_id, sizeof d->project_id, "%s", r->project_id);
  snprintf(d->state, sizeof d->state, "%s", state);
  memcpy(d->etag, etag, sizeof etag);
  d->cells_done = done;
  d->len = len;
  d->refs = -1; /* not the cache's: freed by job_doc_release */
  memcpy(d->doc, PQgetvalue(res, 0, 3), len + 1);
  PQclear(res);
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
    bool unchanged = etag_same || (since >= 0 && d->cells_done <= since && !tb_jobdoc_terminal(d->state));
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
  const char *p[] = { r->id, r->project_id };
  PGresult *res;
  enum MHD_Result ret;
  if (!tb_api_query_row(r, &job_cancel, 2, p, "no such job", &res, &ret))
    return ret;
  const char *old = PQgetvalue(res, 0, 0);
  if (PQgetisnull(res, 0, 3)) {
    char d[96];
    snprintf(d, sizeof d, "the job has %s already", old);
    ret = tb_api_reply_error(r, TB_EC_JOB_FINISHED, d, NULL);
  } else {
    ret = tb_api_reply_text(r, strcmp(old, "queued") == 0 ? MHD_HTTP_OK : MHD_HTTP_ACCEPTED,
                            PQgetvalue(res, 0, 3), NULL);
  }
  PQclear(res);
  return ret;
}
