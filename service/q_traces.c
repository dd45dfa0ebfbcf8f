/*
 * q_traces: see q_traces.h.
 */
#include "q_traces.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define TRACE_JSON                                                     \
  "json_build_object('id', t.id, 'name', t.name, 'format', t.format, " \
  "'size_bytes', t.size_bytes, 'gzip', t.gzip, 'sha256', t.sha256, "   \
  "'summary', t.summary, 'created_at', t.created_at)"

/* The project's uploads one at a time: the caps are counted and the row
 * inserted under this lock, in one transaction (a statement of its own, so
 * the insert's snapshot sees what the previous holder committed). */
static const struct tb_db_stmt trace_lock = {
  "api_trace_lock",
  "SELECT pg_advisory_xact_lock(hashtextextended('tb_traces:' || $1::text, 0))",
};

static const struct tb_db_stmt trace_insert = {
  "api_trace_insert",
  "WITH u AS (SELECT count(*) AS n, coalesce(sum(size_bytes), 0)::bigint AS b "
  "  FROM traces WHERE project_id = $1::uuid), "
  "ins AS (INSERT INTO traces AS t (project_id, name, format, data, sha256, size_bytes, gzip, "
  "    summary) "
  "  SELECT $1::uuid, $2, $3, $4::bytea, $5, length($4::bytea), $6::boolean, $7::jsonb FROM u "
  "  WHERE ($8::bigint <= 0 OR u.n < $8::bigint) "
  "    AND ($9::bigint <= 0 OR u.b + length($4::bytea) <= $9::bigint) "
  "  RETURNING t.id::text AS id, " TRACE_JSON "::text AS doc) "
  "SELECT u.n, u.b, (SELECT id FROM ins) AS id, (SELECT doc FROM ins) AS doc FROM u",
};

int
tb_q_traces_insert(struct tb_db *db, const struct tb_q_traces_row *row, char **doc, char id[37],
                   int64_t *count, int64_t *bytes)
{
  *doc = NULL;
  id[0] = '\0';
  *count = *bytes = 0;
  char maxn[24], maxb[24];
  snprintf(maxn, sizeof maxn, "%lld", (long long)row->max_count);
  snprintf(maxb, sizeof maxb, "%lld", (long long)row->max_bytes);
  char *hex = tb_db_bytea_hex(row->data, row->len);
  const char *p[] = {
    row->project_id, row->name, row->format, hex, row->sha256, row->gzip ? "true" : "false",
    row->summary,    maxn,      maxb
  };
  PGresult *res = NULL;
  int rc = tb_db_begin(db);
  if (rc >= 0)
    rc = tb_db_exec(db, &trace_lock, 1, p, NULL);
  if (rc >= 0)
    rc = tb_db_exec(db, &trace_insert, 9, p, &res);
  if (rc > 0) {
    *count = tb_db_i64(res, 0, "n");
    *bytes = tb_db_i64(res, 0, "b");
    rc = tb_db_isnull(res, 0, "id") ? 0 : 1;
    if (rc == 1) {
      tb_db_copy(res, 0, "id", id, 37);
      *doc = tb_db_dup(res, 0, "doc");
    }
  }
  PQclear(res);
  free(hex);
  if (rc >= 0) {
    int crc = tb_db_commit(db);
    if (crc < 0) {
      free(*doc);
      *doc = NULL;
      rc = crc;
    }
  } else if (tb_db_in_tx(db)) {
    tb_db_rollback(db);
  }
  return rc;
}

static const struct tb_db_stmt trace_usage = {
  "api_trace_usage",
  "SELECT count(*) AS n, coalesce(sum(size_bytes), 0)::bigint AS b FROM traces "
  "WHERE project_id = $1::uuid",
};

int
tb_q_traces_usage(struct tb_db *db, const char *project_id, int64_t *count, int64_t *bytes)
{
  const char *p[] = { project_id };
  PGresult *res = NULL;
  *count = *bytes = 0;
  int rc = tb_db_exec(db, &trace_usage, 1, p, &res);
  if (rc > 0) {
    *count = tb_db_i64(res, 0, "n");
    *bytes = tb_db_i64(res, 0, "b");
  }
  PQclear(res);
  return rc;
}

static const struct tb_db_stmt trace_list = {
  "api_trace_list",
  TB_Q_PAGE_SQL("t", "  " TRACE_JSON "::text AS doc ", "FROM traces t WHERE t.project_id = $1 ",
                "2", "3", "4"),
};

int
tb_q_traces_list(struct tb_db *db, const char *project_id, const char *after_us,
                 const char *after_id, int limit, tb_q_traces_item_fn fn, void *cls)
{
  char lim[24];
  snprintf(lim, sizeof lim, "%d", limit);
  const char *p[] = { project_id, after_us, after_id, lim };
  return tb_q_page_exec(db, &trace_list, 4, p, fn, cls);
}

static const struct tb_db_stmt trace_get = {
  "api_trace_get",
  "SELECT " TRACE_JSON "::text AS doc FROM traces t WHERE t.id = $1 AND t.project_id = $2",
};

int
tb_q_traces_get(struct tb_db *db, const char *id, const char *project_id, char **doc)
{
  const char *p[] = { id, project_id };
  return tb_db_exec_str(db, &trace_get, 2, p, "doc", doc, NULL);
}

/* The trace's row, locked against the FOR KEY SHARE of a job being queued
 * with it (trace_format): the delete's next statement, a snapshot of its
 * own, then sees that job once it is committed. */
static const struct tb_db_stmt trace_lock_row = {
  "api_trace_lock_row",
  "SELECT 1 FROM traces t WHERE t.id = $1::uuid AND t.project_id = $2::uuid FOR UPDATE",
};

/* A queued or running job of the project naming the trace holds it. */
static const struct tb_db_stmt trace_delete = {
  "api_trace_delete",
  "WITH used AS (SELECT count(*) AS n FROM jobs j WHERE j.project_id = $2::uuid "
  "  AND j.state IN ('queued', 'running') AND j.spec->'trace'->>'id' = $1::text), "
  "del AS (DELETE FROM traces t WHERE t.id = $1::uuid AND t.project_id = $2::uuid "
  "  AND (SELECT n FROM used) = 0 RETURNING 1) "
  "SELECT (SELECT count(*) FROM del) AS deleted, (SELECT n FROM used) AS used, "
  "  (SELECT count(*) FROM traces t WHERE t.id = $1::uuid AND t.project_id = $2::uuid) AS found",
};

int
tb_q_traces_delete(struct tb_db *db, const char *id, const char *project_id, bool *in_use)
{
  const char *p[] = { id, project_id };
  *in_use = false;
  /* in a transaction of its own, the row locked first (trace_lock_row);
   * tried twice like a lone statement */
  int rc = TB_DB_SOFT;
  for (int attempt = 0; attempt < 2 && rc == TB_DB_SOFT; attempt++) {
    PGresult *res = NULL;
    if ((rc = tb_db_begin(db)) < 0)
      continue;
    rc = tb_db_exec(db, &trace_lock_row, 2, p, NULL);
    if (rc > 0)
      rc = tb_db_exec(db, &trace_delete, 2, p, &res);
    if (rc > 0) {
      rc = tb_db_i64(res, 0, "deleted") > 0 ? 1 : 0;
      *in_use = rc == 0 && tb_db_i64(res, 0, "used") > 0 && tb_db_i64(res, 0, "found") > 0;
    }
    PQclear(res);
    if (rc >= 0) {
      int crc = tb_db_commit(db);
      if (crc < 0)
        rc = crc;
    } else {
      tb_db_rollback(db);
    }
  }
  return rc;
}

static const struct tb_db_stmt trace_format = {
  "api_trace_format",
  "SELECT t.format, coalesce((t.summary->>'span_s')::float8, 0) AS span_s FROM traces t "
  "WHERE t.id = $1 AND t.project_id = $2 FOR KEY SHARE",
};

int
tb_q_traces_format(struct tb_db *db, const char *id, const char *project_id, char format[16],
                   double *span_s)
{
  const char *p[] = { id, project_id };
  PGresult *res = NULL;
  format[0] = '\0';
  *span_s = 0;
  int rc = tb_db_exec(db, &trace_format, 2, p, &res);
  if (rc > 0) {
    tb_db_copy(res, 0, "format", format, 16);
    char span[64];
    tb_db_copy(res, 0, "span_s", span, sizeof span);
    char *end = NULL;
    double v = strtod(span, &end);
    *span_s = end != span && isfinite(v) && v > 0 ? v : 0;
  }
  PQclear(res);
  return rc;
}
