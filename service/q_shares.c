/*
 * q_shares: see q_shares.h.
 */
#include "q_shares.h"

#include <stdlib.h>
#include <string.h>

/* A share as the api shows it: never its token or the token's hash. */
#define SHARE_DOC                                                                           \
  "json_build_object('id', s.id, 'kind', s.kind, "                                          \
  "  'job_id', CASE WHEN s.kind = 'job' THEN s.job_id END, "                                \
  "  'base_job_id', s.base_job_id, "                                                        \
  "  'head_job_id', CASE WHEN s.kind = 'compare' THEN s.job_id END, "                       \
  "  'endpoint_id', s.endpoint_id, 'params', s.params, "                                    \
  "  'private_labels', to_json(s.private_labels), 'created_at', s.created_at, "             \
  "  'expires_at', s.expires_at, 'revoked_at', s.revoked_at, "                              \
  "  'state', CASE WHEN s.revoked_at IS NOT NULL THEN 'revoked' "                           \
  "                WHEN s.expires_at IS NOT NULL AND s.expires_at <= now() THEN 'expired' " \
  "                ELSE 'active' END)"

static const struct tb_db_stmt st_insert = {
  "share_insert",
  "WITH s AS ("
  "  INSERT INTO shares (project_id, kind, job_id, base_job_id, endpoint_id, params, "
  "    private_labels, token_hash, created_by, expires_at) "
  "  SELECT $1::uuid, $2, $3::uuid, $4::uuid, $5::uuid, coalesce($6::jsonb, '{}'), "
  "    ARRAY(SELECT jsonb_array_elements_text(coalesce($7::jsonb, '[]'))), $8, $9::uuid, "
  "    CASE WHEN $10::bigint IS NULL THEN NULL "
  "         ELSE now() + $10::bigint * interval '1 second' END "
  "  WHERE ($3::uuid IS NULL OR EXISTS "
  "          (SELECT 1 FROM jobs WHERE id = $3::uuid AND project_id = $1::uuid)) "
  "    AND ($4::uuid IS NULL OR EXISTS "
  "          (SELECT 1 FROM jobs WHERE id = $4::uuid AND project_id = $1::uuid)) "
  "    AND ($5::uuid IS NULL OR EXISTS "
  "          (SELECT 1 FROM endpoints WHERE id = $5::uuid AND project_id = $1::uuid "
  "             AND deleted_at IS NULL)) "
  "  RETURNING *) "
  "SELECT " SHARE_DOC "::text AS doc FROM s",
};

int
tb_q_shares_insert(struct tb_db *db, const struct tb_q_shares_new *s, char **doc)
{
  const char *p[] = { s->project_id,  s->kind,        s->job_id,         s->base_job_id,
                      s->endpoint_id, s->params,      s->private_labels, s->token_hash,
                      s->created_by,  s->expires_in_s };
  return tb_db_exec_str(db, &st_insert, 10, p, "doc", doc, NULL);
}

static const struct tb_db_stmt st_live = {
  "share_live",
  "SELECT count(*) AS n FROM shares WHERE project_id = $1::uuid AND revoked_at IS NULL "
  "  AND (expires_at IS NULL OR expires_at > now())",
};

int
tb_q_shares_live(struct tb_db *db, const char *project_id, int64_t *n)
{
  const char *p[] = { project_id };
  PGresult *res = NULL;
  int rc = tb_db_exec(db, &st_live, 1, p, &res);
  *n = rc > 0 ? tb_db_i64(res, 0, "n") : 0;
  PQclear(res);
  return rc;
}

static const struct tb_db_stmt st_job_owned = {
  "share_job_owned",
  "SELECT 1 AS one FROM jobs WHERE id = $1::uuid AND project_id = $2::uuid",
};

int
tb_q_shares_job_owned(struct tb_db *db, const char *id, const char *project_id)
{
  const char *p[] = { id, project_id };
  return tb_db_exec(db, &st_job_owned, 2, p, NULL);
}

static const struct tb_db_stmt st_list = {
  "share_list",
  "SELECT coalesce(json_agg(" SHARE_DOC " ORDER BY s.created_at, s.id), '[]')::text AS doc "
  "FROM shares s WHERE s.project_id = $1::uuid",
};

int
tb_q_shares_list(struct tb_db *db, const char *project_id, char **doc)
{
  const char *p[] = { project_id };
  return tb_db_exec_str(db, &st_list, 1, p, "doc", doc, NULL);
}

static const struct tb_db_stmt st_revoke = {
  "share_revoke",
  "UPDATE shares SET revoked_at = now() "
  "WHERE id = $1::uuid AND project_id = $2::uuid AND revoked_at IS NULL",
};

int
tb_q_shares_revoke(struct tb_db *db, const char *id, const char *project_id)
{
  const char *p[] = { id, project_id };
  return tb_db_exec(db, &st_revoke, 2, p, NULL);
}

static const struct tb_db_stmt st_by_token = {
  "share_by_token",
  "SELECT id::text AS id, project_id::text AS project_id, kind, job_id::text AS job_id, "
  "  base_job_id::text AS base_job_id, endpoint_id::text AS endpoint_id, "
  "  params::text AS params, to_json(private_labels)::text AS private_labels, "
  "  revoked_at IS NOT NULL AS revoked, "
  "  (expires_at IS NOT NULL AND expires_at <= now()) AS expired "
  "FROM shares WHERE token_hash = $1",
};

int
tb_q_shares_by_token(struct tb_db *db, const char *token_hash, struct tb_q_shares_open *out)
{
  memset(out, 0, sizeof *out);
  const char *p[] = { token_hash };
  PGresult *res = NULL;
  int rc = tb_db_exec(db, &st_by_token, 1, p, &res);
  if (rc > 0) {
    tb_db_copy(res, 0, "id", out->id, sizeof out->id);
    tb_db_copy(res, 0, "project_id", out->project_id, sizeof out->project_id);
    tb_db_copy(res, 0, "kind", out->kind, sizeof out->kind);
    out->job_id = tb_db_dup(res, 0, "job_id");
    out->base_job_id = tb_db_dup(res, 0, "base_job_id");
    out->endpoint_id = tb_db_dup(res, 0, "endpoint_id");
    out->params = tb_db_dup(res, 0, "params");
    out->private_labels = tb_db_dup(res, 0, "private_labels");
    out->revoked = tb_db_bool(res, 0, "revoked");
    out->expired = tb_db_bool(res, 0, "expired");
  }
  PQclear(res);
  return rc;
}

void
tb_q_shares_open_clear(struct tb_q_shares_open *s)
{
  free(s->job_id);
  free(s->base_job_id);
  free(s->endpoint_id);
  free(s->params);
  free(s->private_labels);
  memset(s, 0, sizeof *s);
}

static const struct tb_db_stmt st_endpoints = {
  "share_endpoints",
  "SELECT e.id::text AS id, e.base_url, e.api_key_sealed, e.api_key_origin, e.telemetry_url "
  "FROM endpoints e WHERE e.project_id = $1::uuid AND (e.id = $2::uuid OR e.id IN "
  "  (SELECT j.endpoint_id FROM jobs j WHERE j.project_id = $1::uuid "
  "     AND (j.id = $3::uuid OR j.id = $4::uuid)))",
};

int
tb_q_shares_endpoints(struct tb_db *db, const char *project_id, const char *endpoint_id,
                      const char *job_a, const char *job_b, PGresult **res)
{
  const char *p[] = { project_id, endpoint_id, job_a, job_b };
  return tb_db_exec(db, &st_endpoints, 4, p, res);
}
