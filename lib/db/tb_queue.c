/*
 * tb_queue: see tb_queue.h.
 *
 * Each function is one statement.  Where a change needs several writes (a
 * state change, its event, its notification) they are data-modifying CTEs of
 * that one statement, so they commit together or not at all, and a retry
 * after a lost connection repeats all or nothing.  pg_notify() sits in the
 * statement's own select list (a CTE that only SELECTs, and is not
 * referenced, would not run).
 *
 * The lease test "id = $1 AND lease_owner = $2 AND attempts = $3 AND state =
 * 'running'" is the fence written into every worker statement.  Writes that
 * must not pass a concurrent claim take the row lock first (FOR UPDATE, or
 * the UPDATE itself): READ COMMITTED then re-checks the fence on the newest
 * row version, so a claim that committed meanwhile wins.
 */
#include "db/tb_queue.h"

#include <math.h>
#include <openssl/crypto.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/tb_log.h"

/* How often a claim that met the one-running-per-busy-key index is retried
 * (another worker claimed a job of the same key between our snapshot and our
 * update; the retry sees it and skips the key). */
#define TB_QUEUE_CLAIM_RETRIES 4
/* Jobs each project offers to one claim (see claim_stmt). */
#define TB_QUEUE_CLAIM_WIDTH "8"
/* Caps on what we read back from our own database: a stored cell or spec
 * bigger than this is corrupt, not data. */
#define TB_QUEUE_JSON_MAX (16u << 20)

#define FENCE \
  "id = $1::uuid AND lease_owner = $2::text AND attempts = $3::int AND state = 'running'"
/* The same, for a statement whose FROM names another table (jobs.FENCE_J). */
#define FENCE_J                                                                    \
  "id = $1::uuid AND jobs.lease_owner = $2::text AND jobs.attempts = $3::int AND " \
  "jobs.state = 'running'"

void
tb_queue_job_clear(struct tb_queue_job *job)
{
  if (job == NULL)
    return;
  json_decref(job->spec);
  memset(job, 0, sizeof *job);
}

static json_t *
parse_json(const PGresult *r, int row, int col)
{
  if (PQgetisnull(r, row, col))
    return NULL;
  size_t len = (size_t)PQgetlength(r, row, col);
  if (len > TB_QUEUE_JSON_MAX)
    return NULL;
  return json_loadb(PQgetvalue(r, row, col), len, 0, NULL);
}

static void
copy_id(char dst[TB_QUEUE_ID_LEN + 1], const char *src)
{
  snprintf(dst, TB_QUEUE_ID_LEN + 1, "%s", src ? src : "");
}

/* ------------------------------------------------------------------ claim */

/*
 * Candidates: queued jobs, and running jobs whose lease expired (their worker
 * died: they are claimed again directly, so their busy key never looks free
 * to another job meanwhile).  A candidate whose busy key has another running
 * job is skipped, unless it is only going to be closed (cancel requested, or
 * no attempts left), which frees rather than takes the key.
 *
 * Fair share: a queued candidate needs a free run slot of its project (the
 * smallest slot no running job of the project holds: 1, or one past a held
 * slot, that is not held; at most $3, 0 = no limit).  The unique index
 * jobs_project_run_slot makes two claims racing for one slot meet, like
 * busy keys.  Order: the project with the fewest running jobs, then the one
 * whose last job started longest ago (never first), and only then priority
 * and age, which therefore order jobs inside a project only.
 *
 * Cost: a project's figures are computed once per claim, for the projects
 * with candidates (p), and each project offers its first
 * TB_QUEUE_CLAIM_WIDTH jobs by priority (c, from the index
 * jobs_project_queue), so a claim never sorts the whole queue.  The rows
 * are locked only in the last step (FOR UPDATE SKIP LOCKED re-checks the
 * state of a row another claim changed meanwhile); the width leaves that
 * many alternatives per project to claims racing for the same jobs.
 */
static const struct tb_db_stmt claim_stmt = {
  "tb_queue_claim",
  "WITH p AS MATERIALIZED ("
  "  SELECT q.project_id,"
  "    (SELECT count(*) FROM jobs r"
  "      WHERE r.project_id = q.project_id AND r.state = 'running') AS running,"
  "    (SELECT max(r.started_at) FROM jobs r WHERE r.project_id = q.project_id) AS served,"
  "    (SELECT min(c.x) FROM ("
  "       SELECT 1 AS x UNION ALL"
  "       SELECT r.run_slot + 1 FROM jobs r"
  "        WHERE r.project_id = q.project_id AND r.state = 'running'"
  "          AND r.run_slot IS NOT NULL) c"
  "      WHERE NOT EXISTS (SELECT 1 FROM jobs u"
  "                         WHERE u.project_id = q.project_id AND u.state = 'running'"
  "                           AND u.run_slot = c.x)) AS slot"
  "    FROM (SELECT DISTINCT project_id FROM jobs"
  "           WHERE state = 'queued'"
  "              OR (state = 'running' AND lease_expires_at < now())) q"
  "), c AS MATERIALIZED ("
  "  SELECT x.id, p.slot, row_number() OVER (ORDER BY p.running, p.served NULLS FIRST,"
  "           x.priority DESC, x.created_at, x.id) AS rank"
  "    FROM p CROSS JOIN LATERAL ("
  "      (SELECT j.id, j.priority, j.created_at FROM jobs j"
  "        WHERE j.project_id = p.project_id AND j.state = 'queued'"
  "          AND NOT (j.id = ANY (coalesce($4::uuid[], '{}')))"
  "          AND (j.cancel_requested OR j.attempts >= j.max_attempts"
  "               OR (($3::int = 0 OR p.slot <= $3::int)"
  "                   AND NOT EXISTS (SELECT 1 FROM jobs r WHERE r.busy_key = j.busy_key"
  "                                     AND r.state = 'running')))"
  "        ORDER BY j.priority DESC, j.created_at, j.id LIMIT " TB_QUEUE_CLAIM_WIDTH ")"
  "      UNION ALL"
  "      (SELECT j.id, j.priority, j.created_at FROM jobs j"
  "        WHERE j.project_id = p.project_id AND j.state = 'running'"
  "          AND j.lease_expires_at < now()"
  "        ORDER BY j.priority DESC, j.created_at, j.id LIMIT " TB_QUEUE_CLAIM_WIDTH ")) x"
  "), cand AS ("
  "  SELECT j.id, c.slot FROM jobs j JOIN c ON c.id = j.id"
  "   WHERE j.state = 'queued' OR (j.state = 'running' AND j.lease_expires_at < now())"
  "   ORDER BY c.rank"
  "   LIMIT 1"
  "   FOR UPDATE OF j SKIP LOCKED"
  "), upd AS ("
  "  UPDATE jobs SET"
  "    state = CASE WHEN jobs.cancel_requested THEN 'cancelled'"
  "                 WHEN jobs.attempts >= jobs.max_attempts THEN 'failed'"
  "                 ELSE 'running' END,"
  "    error = CASE WHEN jobs.cancel_requested THEN jobs.error"
  "                 WHEN jobs.attempts >= jobs.max_attempts AND jobs.state = 'running' THEN"
  "                   format('attempt %s of %s lost its lease (worker %s stopped renewing it);"
  " no attempts left', jobs.attempts, jobs.max_attempts, jobs.lease_owner)"
  "                 WHEN jobs.attempts >= jobs.max_attempts THEN"
  "                   format('no attempts left (%s of %s used)', jobs.attempts, jobs.max_attempts)"
  "                 ELSE jobs.error END,"
  "    lease_owner = CASE WHEN jobs.cancel_requested OR jobs.attempts >= jobs.max_attempts"
  "                       THEN NULL ELSE $1::text END,"
  "    lease_expires_at = CASE WHEN jobs.cancel_requested OR jobs.attempts >= jobs.max_attempts"
  "                       THEN NULL ELSE now() + make_interval(secs => $2::int) END,"
  "    attempts = CASE WHEN jobs.cancel_requested OR jobs.attempts >= jobs.max_attempts"
  "                    THEN jobs.attempts ELSE jobs.attempts + 1 END,"
  "    started_at = CASE WHEN jobs.cancel_requested OR jobs.attempts >= jobs.max_attempts"
  "                      THEN jobs.started_at ELSE coalesce(jobs.started_at, now()) END,"
  "    finished_at = CASE WHEN jobs.cancel_requested OR jobs.attempts >= jobs.max_attempts"
  "                       THEN now() ELSE NULL END,"
  "    run_slot = CASE WHEN jobs.state = 'running' AND jobs.run_slot IS NOT NULL"
  "                    THEN jobs.run_slot ELSE cand.slot END,"
  "    current_cell = NULL, eta_s = NULL, updated_at = now()"
  "   FROM cand WHERE jobs.id = cand.id"
  "  RETURNING jobs.id, jobs.endpoint_id, jobs.spec, jobs.attempts, jobs.max_attempts,"
  "            jobs.state, jobs.error, jobs.request_id"
  "), ev AS ("
  "  INSERT INTO job_events (job_id, kind, data)"
  "  SELECT id, 'state', jsonb_build_object('state', state, 'attempt', attempts,"
  "                                         'worker', $1::text, 'error', error)"
  "    FROM upd"
  ")"
  "SELECT id, endpoint_id, spec, attempts, max_attempts, state, request_id,"
  "       pg_notify('tb_job_changed', id::text) FROM upd",
};

int
tb_queue_claim(struct tb_db *db, const char *owner, int lease_s, int max_running,
               struct tb_queue_job *job, char *closed_id)
{
  return tb_queue_claim_skip(db, owner, lease_s, max_running, NULL, job, closed_id);
}

int
tb_queue_claim_skip(struct tb_db *db, const char *owner, int lease_s, int max_running,
                    const char *skip, struct tb_queue_job *job, char *closed_id)
{
  memset(job, 0, sizeof *job);
  if (strlen(owner) > TB_QUEUE_OWNER_MAX)
    return TB_DB_HARD;
  char lease[16], running[16];
  snprintf(lease, sizeof lease, "%d", lease_s);
  snprintf(running, sizeof running, "%d", max_running > 0 ? max_running : 0);
  const char *params[] = { owner, lease, running, skip };
  PGresult *r = NULL;
  int rc = TB_DB_SOFT;
  for (int i = 0; i < TB_QUEUE_CLAIM_RETRIES; i++) {
    bool uv = false;
    rc = tb_db_exec_uv(db, &claim_stmt, 4, params, &r, &uv);
    if (!uv)
      break;
    rc = TB_DB_SOFT; /* lost a race for a busy key or a run slot: look again */
  }
  if (rc <= 0) {
    PQclear(r);
    return rc;
  }
  const char *state = tb_db_str(r, 0, "state");
  if (state == NULL || strcmp(state, "running") != 0) {
    if (closed_id != NULL)
      copy_id(closed_id, tb_db_str(r, 0, "id"));
    PQclear(r);
    return TB_QUEUE_CLOSED;
  }
  copy_id(job->lease.job_id, tb_db_str(r, 0, "id"));
  copy_id(job->endpoint_id, tb_db_str(r, 0, "endpoint_id"));
  snprintf(job->lease.owner, sizeof job->lease.owner, "%s", owner);
  job->lease.attempt = (int)tb_db_i64(r, 0, "attempts");
  job->max_attempts = (int)tb_db_i64(r, 0, "max_attempts");
  snprintf(job->request_id, sizeof job->request_id, "%s",
           tb_db_str(r, 0, "request_id") ? tb_db_str(r, 0, "request_id") : "");
  job->spec = parse_json(r, 0, PQfnumber(r, "spec"));
  if (job->spec == NULL)
    job->spec = json_object(); /* jsonb NOT NULL: cannot happen; the engine says what is missing */
  PQclear(r);
  return TB_QUEUE_CLAIMED;
}

/* -------------------------------------------------------------- heartbeat */

static const struct tb_db_stmt heartbeat_stmt = {
  "tb_queue_heartbeat",
  "UPDATE jobs SET lease_expires_at = now() + make_interval(secs => $4::int)"
  " WHERE " FENCE " RETURNING cancel_requested",
};

/* The three fence parameters; attempt is formatted into buf. */
static void
fence_params(const struct tb_queue_lease *l, char buf[16], const char **params)
{
  snprintf(buf, 16, "%d", l->attempt);
  params[0] = l->job_id;
  params[1] = l->owner;
  params[2] = buf;
}

int
tb_queue_heartbeat(struct tb_db *db, const struct tb_queue_lease *l, int lease_s, bool *cancel)
{
  char att[16], lease[16];
  const char *params[4];
  fence_params(l, att, params);
  snprintf(lease, sizeof lease, "%d", lease_s);
  params[3] = lease;
  PGresult *r = NULL;
  int rc = tb_db_exec(db, &heartbeat_stmt, 4, params, &r);
  if (rc == 1)
    *cancel = tb_db_bool(r, 0, "cancel_requested");
  PQclear(r);
  return rc;
}

static const struct tb_db_stmt check_stmt = {
  "tb_queue_check",
  "SELECT cancel_requested FROM jobs WHERE " FENCE,
};

int
tb_queue_check(struct tb_db *db, const struct tb_queue_lease *l, bool *cancel)
{
  char att[16];
  const char *params[3];
  fence_params(l, att, params);
  PGresult *r = NULL;
  int rc = tb_db_exec(db, &check_stmt, 3, params, &r);
  if (rc == 1)
    *cancel = tb_db_bool(r, 0, "cancel_requested");
  PQclear(r);
  return rc;
}

/* -------------------------------------------------------------- store cell */

static const struct tb_db_stmt store_cell_stmt = {
  "tb_queue_store_cell",
  "WITH lease AS ("
  "  SELECT id FROM jobs WHERE " FENCE " FOR UPDATE"
  "), ins AS ("
  "  INSERT INTO job_cells (job_id, phase, context, concurrency, cell)"
  "  SELECT id, $4::text, $5::int, $6::int, $7::jsonb FROM lease"
  "  ON CONFLICT DO NOTHING"
  "  RETURNING job_id"
  "), upd AS ("
  "  UPDATE jobs SET cells_done = jobs.cells_done + 1, updated_at = now()"
  "    FROM ins WHERE jobs.id = ins.job_id"
  "  RETURNING jobs.id, jobs.cells_done, jobs.cells_total"
  "), ev AS ("
  "  INSERT INTO job_events (job_id, kind, data)"
  "  SELECT id, 'cell', jsonb_build_object('cell', $7::jsonb, 'cells_done', cells_done,"
  "                                        'cells_total', cells_total)"
  "    FROM upd"
  ")"
  "SELECT (SELECT count(*) FROM lease) AS leased,"
  "       (SELECT count(*) FROM (SELECT pg_notify('tb_job_changed', id::text) FROM upd) n)"
  "         AS stored",
};

int
tb_queue_store_cell(struct tb_db *db, const struct tb_queue_lease *l, const json_t *cell)
{
  const char *phase = json_string_value(json_object_get(cell, "phase"));
  const json_t *ctx = json_object_get(cell, "context");
  const json_t *conc = json_object_get(cell, "concurrency");
  if (phase == NULL || !json_is_integer(ctx) || !json_is_integer(conc) ||
      json_integer_value(ctx) < 0 || json_integer_value(ctx) > INT32_MAX ||
      json_integer_value(conc) < 0 || json_integer_value(conc) > INT32_MAX)
    return TB_DB_HARD;
  char *text = json_dumps(cell, JSON_COMPACT);
  if (text == NULL)
    return TB_DB_HARD;
  char att[16], cbuf[24], nbuf[24];
  const char *params[7];
  fence_params(l, att, params);
  snprintf(cbuf, sizeof cbuf, "%lld", (long long)json_integer_value(ctx));
  snprintf(nbuf, sizeof nbuf, "%lld", (long long)json_integer_value(conc));
  params[3] = phase;
  params[4] = cbuf;
  params[5] = nbuf;
  params[6] = text;
  int rc = tb_db_exec_counted(db, &store_cell_stmt, 7, params, "leased");
  free(text);
  return rc;
}

/* ---------------------------------------------------------------- progress */

static const struct tb_db_stmt progress_stmt = {
  "tb_queue_progress",
  "WITH upd AS ("
  "  UPDATE jobs SET current_cell = $4::jsonb, cells_total = $5::int, eta_s = $6::float8,"
  "                  updated_at = now()"
  "   WHERE " FENCE "  RETURNING id, cells_done, cells_total, eta_s, current_cell"
  "), ev AS ("
  "  INSERT INTO job_events (job_id, kind, data)"
  "  SELECT id, 'progress', jsonb_build_object('current_cell', current_cell,"
  "           'cells_done', cells_done, 'cells_total', cells_total, 'eta_s', eta_s)"
  "    FROM upd"
  ")"
  "SELECT pg_notify('tb_job_changed', id::text) FROM upd",
};

int
tb_queue_progress(struct tb_db *db, const struct tb_queue_lease *l, const json_t *current_cell,
                  unsigned cells_total, double eta_s)
{
  char *text = json_dumps(current_cell, JSON_COMPACT | JSON_ENCODE_ANY);
  if (text == NULL)
    return TB_DB_HARD;
  char att[16], tbuf[16], ebuf[32];
  const char *params[6];
  fence_params(l, att, params);
  snprintf(tbuf, sizeof tbuf, "%u", cells_total > INT32_MAX ? INT32_MAX : cells_total);
  if (!(eta_s >= 0 && eta_s < 1e9))
    eta_s = 0;
  snprintf(ebuf, sizeof ebuf, "%.3f", eta_s);
  params[3] = text;
  params[4] = tbuf;
  params[5] = ebuf;
  int rc = tb_db_exec(db, &progress_stmt, 6, params, NULL);
  free(text);
  return rc;
}

/* ------------------------------------------------------------------ header */

static const struct tb_db_stmt header_stmt = {
  "tb_queue_header",
  "UPDATE jobs SET header = $4::jsonb, updated_at = now()"
  " WHERE " FENCE " RETURNING pg_notify('tb_job_changed', id::text)",
};

int
tb_queue_header(struct tb_db *db, const struct tb_queue_lease *l, const json_t *header)
{
  char *text = json_dumps(header, JSON_COMPACT);
  if (text == NULL)
    return TB_DB_HARD;
  char att[16];
  const char *params[4];
  fence_params(l, att, params);
  params[3] = text;
  int rc = tb_db_exec(db, &header_stmt, 4, params, NULL);
  free(text);
  return rc;
}

/* ------------------------------------------------------------------ finish */

static const struct tb_db_stmt finish_stmt = {
  "tb_queue_finish",
  "WITH upd AS ("
  "  UPDATE jobs SET state = $4::text, result = $5::jsonb, error = $6::text,"
  "                  finished_at = now(), updated_at = now(), lease_owner = NULL,"
  "                  lease_expires_at = NULL, current_cell = NULL,"
  "                  eta_s = CASE WHEN $4::text = 'succeeded' THEN 0 ELSE NULL END"
  "   WHERE " FENCE " AND $4::text IN ('succeeded', 'failed', 'cancelled')"
  "  RETURNING id, state, attempts, error"
  "), ev AS ("
  "  INSERT INTO job_events (job_id, kind, data)"
  "  SELECT id, 'state', jsonb_build_object('state', state, 'attempt', attempts,"
  "                                         'worker', $2::text, 'error', error)"
  "    FROM upd"
  ")"
  "SELECT pg_notify('tb_job_changed', id::text) FROM upd",
};

int
tb_queue_finish(struct tb_db *db, const struct tb_queue_lease *l, const char *state,
                const json_t *result, const char *error)
{
  char *text = result != NULL ? json_dumps(result, JSON_COMPACT) : NULL;
  if (result != NULL && text == NULL)
    return TB_DB_HARD;
  char att[16];
  const char *params[6];
  fence_params(l, att, params);
  params[3] = state;
  params[4] = text;
  params[5] = error;
  int rc = tb_db_exec(db, &finish_stmt, 6, params, NULL);
  free(text);
  return rc;
}

/* ----------------------------------------------------------------- release */

static const struct tb_db_stmt release_stmt = {
  "tb_queue_release",
  "WITH upd AS ("
  "  UPDATE jobs SET state = 'queued', lease_owner = NULL, lease_expires_at = NULL,"
  "                  attempts = greatest(attempts - 1, 0), current_cell = NULL,"
  "                  eta_s = NULL, updated_at = now()"
  "   WHERE " FENCE "  RETURNING id, attempts"
  "), ev AS ("
  "  INSERT INTO job_events (job_id, kind, data)"
  "  SELECT id, 'state', jsonb_build_object('state', 'queued', 'attempt', attempts,"
  "                                         'worker', $2::text, 'error', NULL,"
  "                                         'reason', $4::text)"
  "    FROM upd"
  ")"
  "SELECT pg_notify('tb_job_changed', id::text), pg_notify('tb_jobs_queued', id::text)"
  "  FROM upd",
};

int
tb_queue_release(struct tb_db *db, const struct tb_queue_lease *l, const char *reason)
{
  char att[16];
  const char *params[4];
  fence_params(l, att, params);
  params[3] = reason;
  return tb_db_exec(db, &release_stmt, 4, params, NULL);
}

/* ------------------------------------------------------------------ refuse */

/* A hand-back (as release) by a worker whose egress policy refuses the
 * endpoint, marked "egress_refused" in its event; or, when the first such
 * hand-back of the job is $5 seconds old or more, the job's end: failed
 * with the reason ($4) and how long it waited. */
static const struct tb_db_stmt refuse_stmt = {
  "tb_queue_refuse",
  "WITH first AS ("
  "  SELECT min(created_at) AS at FROM job_events"
  "   WHERE job_id = $1::uuid AND kind = 'state' AND data ? 'egress_refused'"
  "), upd AS ("
  "  UPDATE jobs SET"
  "    state = CASE WHEN first.at <= now() - make_interval(secs => $5::int)"
  "                 THEN 'failed' ELSE 'queued' END,"
  "    error = CASE WHEN first.at <= now() - make_interval(secs => $5::int)"
  "                 THEN format('no worker may reach the endpoint: %s (handed back for %s s)',"
  "                             $4::text, round(extract(epoch FROM now() - first.at)))"
  "                 ELSE jobs.error END,"
  "    finished_at = CASE WHEN first.at <= now() - make_interval(secs => $5::int)"
  "                       THEN now() ELSE NULL END,"
  "    attempts = CASE WHEN first.at <= now() - make_interval(secs => $5::int)"
  "                    THEN jobs.attempts ELSE greatest(jobs.attempts - 1, 0) END,"
  "    lease_owner = NULL, lease_expires_at = NULL, current_cell = NULL, eta_s = NULL,"
  "    updated_at = now()"
  "   FROM first WHERE jobs." FENCE_J "  RETURNING jobs.id, jobs.state, jobs.attempts, jobs.error"
  "), ev AS ("
  "  INSERT INTO job_events (job_id, kind, data)"
  "  SELECT id, 'state', jsonb_build_object('state', state, 'attempt', attempts,"
  "                                         'worker', $2::text, 'error', error,"
  "                                         'reason', $4::text, 'egress_refused', true)"
  "    FROM upd"
  ")"
  "SELECT state, pg_notify('tb_job_changed', id::text),"
  "       CASE WHEN state = 'queued' THEN pg_notify('tb_jobs_queued', id::text) END"
  "  FROM upd",
};

int
tb_queue_refuse(struct tb_db *db, const struct tb_queue_lease *l, const char *reason, int give_up_s,
                bool *failed)
{
  char att[16], gu[16];
  const char *params[5];
  fence_params(l, att, params);
  params[3] = reason;
  snprintf(gu, sizeof gu, "%d", give_up_s > 0 ? give_up_s : 0);
  params[4] = gu;
  PGresult *r = NULL;
  int rc = tb_db_exec(db, &refuse_stmt, 5, params, &r);
  *failed =
    rc == 1 && tb_db_str(r, 0, "state") != NULL && strcmp(tb_db_str(r, 0, "state"), "failed") == 0;
  PQclear(r);
  return rc;
}

/* -------------------------------------------------------------- load cells */

static const struct tb_db_stmt load_cells_stmt = {
  "tb_queue_load_cells",
  "SELECT cell FROM job_cells WHERE job_id = $1::uuid ORDER BY seq",
};

int
tb_queue_load_cells(struct tb_db *db, const char *job_id, json_t **cells)
{
  *cells = NULL;
  const char *params[] = { job_id };
  PGresult *r = NULL;
  int rc = tb_db_exec(db, &load_cells_stmt, 1, params, &r);
  if (rc < 0)
    return rc;
  json_t *a = json_array();
  for (int i = 0; i < rc; i++) {
    json_t *c = parse_json(r, i, 0);
    if (json_is_object(c))
      json_array_append_new(a, c);
    else
      json_decref(c);
  }
  PQclear(r);
  *cells = a;
  return (int)json_array_size(a);
}

/* ----------------------------------------------------------- load endpoint */

static const struct tb_db_stmt load_endpoint_stmt = {
  "tb_queue_load_endpoint",
  "SELECT name, base_url, api_key_sealed, api_key_origin, launch_command, engine_hint, hardware, "
  "engine,"
  "       gpu, price_per_hour, currency, telemetry_url,"
  "       deleted_at IS NOT NULL AS deleted"
  "  FROM endpoints WHERE id = $1::uuid",
};

int
tb_queue_load_endpoint(struct tb_db *db, const char *endpoint_id, struct tb_queue_endpoint *ep)
{
  memset(ep, 0, sizeof *ep);
  const char *params[] = { endpoint_id };
  PGresult *r = NULL;
  int rc = tb_db_exec(db, &load_endpoint_stmt, 1, params, &r);
  if (rc <= 0) {
    PQclear(r);
    return rc;
  }
  ep->name = tb_db_dup(r, 0, "name");
  ep->base_url = tb_db_dup(r, 0, "base_url");
  ep->api_key_sealed = tb_db_dup(r, 0, "api_key_sealed");
  ep->api_key_origin = tb_db_dup(r, 0, "api_key_origin");
  ep->launch_command = tb_db_dup(r, 0, "launch_command");
  ep->engine_hint = tb_db_dup(r, 0, "engine_hint");
  ep->hardware = parse_json(r, 0, PQfnumber(r, "hardware"));
  ep->engine = parse_json(r, 0, PQfnumber(r, "engine"));
  ep->deleted = tb_db_bool(r, 0, "deleted");
  int cg = PQfnumber(r, "gpu"), cp = PQfnumber(r, "price_per_hour");
  ep->gpu = PQgetisnull(r, 0, cg) ? NULL : parse_json(r, 0, cg);
  ep->price_per_hour = NAN;
  if (!PQgetisnull(r, 0, cp)) {
    char *end = NULL;
    double v = strtod(PQgetvalue(r, 0, cp), &end);
    if (end != NULL && *end == '\0' && isfinite(v))
      ep->price_per_hour = v;
  }
  ep->currency = tb_db_dup(r, 0, "currency");
  ep->telemetry_url = tb_db_dup(r, 0, "telemetry_url");
  PQclear(r);
  return 1;
}

void
tb_queue_endpoint_clear(struct tb_queue_endpoint *ep)
{
  if (ep == NULL)
    return;
  if (ep->api_key_sealed != NULL)
    OPENSSL_cleanse(ep->api_key_sealed, strlen(ep->api_key_sealed));
  free(ep->name);
  free(ep->base_url);
  free(ep->api_key_sealed);
  free(ep->api_key_origin);
  free(ep->launch_command);
  free(ep->engine_hint);
  json_decref(ep->hardware);
  json_decref(ep->engine);
  json_decref(ep->gpu);
  free(ep->currency);
  free(ep->telemetry_url);
  memset(ep, 0, sizeof *ep);
}
