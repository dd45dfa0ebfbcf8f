/*
 * q_hooks: see q_hooks.h.
 */
#include "q_hooks.h"

#include <openssl/crypto.h>
#include <stdlib.h>
#include <string.h>

#define HOOK_JSON                                                                      \
  "json_build_object('id', h.id, 'name', h.name, 'kind', h.kind, 'events', h.events, " \
  "'preset', p.name, 'created_at', h.created_at)"

static const struct tb_db_stmt hook_insert = {
  "ci_hook_insert",
  "WITH p AS (SELECT id, name FROM presets WHERE project_id = $2 AND name = $3), "
  "h AS (INSERT INTO hooks (id, project_id, preset_id, name, kind, events, secret_sealed) "
  "  SELECT $1, $2, p.id, $4, $5, ARRAY(SELECT json_array_elements_text($6::json)), $7 "
  "  FROM p RETURNING *) "
  "SELECT " HOOK_JSON "::text AS doc FROM h JOIN p ON p.id = h.preset_id",
};

int
tb_q_hooks_insert(struct tb_db *db, const char *id, const char *project_id, const char *preset,
                  const char *name, const char *kind, const char *events, const char *sealed,
                  char **doc)
{
  const char *p[] = { id, project_id, preset, name, kind, events, sealed };
  return tb_db_exec_str(db, &hook_insert, 7, p, "doc", doc, NULL);
}

static const struct tb_db_stmt hook_list = {
  "ci_hook_list",
  "SELECT coalesce(json_agg(" HOOK_JSON " ORDER BY h.created_at), '[]')::text AS doc "
  "FROM hooks h JOIN presets p ON p.id = h.preset_id "
  "WHERE h.project_id = $1 AND h.deleted_at IS NULL",
};

int
tb_q_hooks_list(struct tb_db *db, const char *project_id, char **doc)
{
  const char *p[] = { project_id };
  return tb_db_exec_str(db, &hook_list, 1, p, "doc", doc, NULL);
}

static const struct tb_db_stmt hook_get = {
  "ci_hook_get",
  "SELECT " HOOK_JSON "::text AS doc FROM hooks h JOIN presets p ON p.id = h.preset_id "
  "WHERE h.id = $1 AND h.project_id = $2 AND h.deleted_at IS NULL",
};

int
tb_q_hooks_get(struct tb_db *db, const char *id, const char *project_id, char **doc)
{
  const char *p[] = { id, project_id };
  return tb_db_exec_str(db, &hook_get, 2, p, "doc", doc, NULL);
}

static const struct tb_db_stmt hook_delete = {
  "ci_hook_delete",
  "UPDATE hooks SET deleted_at = now() WHERE id = $1 AND project_id = $2 "
  "AND deleted_at IS NULL",
};

int
tb_q_hooks_delete(struct tb_db *db, const char *id, const char *project_id)
{
  const char *p[] = { id, project_id };
  return tb_db_exec(db, &hook_delete, 2, p, NULL);
}

/* Everything a delivery needs, by hook id alone (public route). */
static const struct tb_db_stmt hook_load = {
  "ci_hook_load",
  "SELECT h.project_id::text AS project_id, h.kind, h.secret_sealed, "
  "  array_to_json(h.events)::text AS events, p.spec::text AS spec "
  "FROM hooks h JOIN presets p ON p.id = h.preset_id "
  "WHERE h.id = $1 AND h.deleted_at IS NULL",
};

int
tb_q_hooks_load(struct tb_db *db, const char *id, struct tb_q_hooks_hook *out)
{
  memset(out, 0, sizeof *out);
  const char *p[] = { id };
  PGresult *res = NULL;
  int rc = tb_db_exec(db, &hook_load, 1, p, &res);
  if (rc > 0) {
    out->project_id = tb_db_dup(res, 0, "project_id");
    out->kind = tb_db_dup(res, 0, "kind");
    out->secret_sealed = tb_db_dup(res, 0, "secret_sealed");
    out->events = tb_db_dup(res, 0, "events");
    out->spec = tb_db_dup(res, 0, "spec");
  }
  PQclear(res);
  return rc;
}

void
tb_q_hooks_hook_clear(struct tb_q_hooks_hook *h)
{
  if (h->secret_sealed != NULL)
    OPENSSL_cleanse(h->secret_sealed, strlen(h->secret_sealed));
  free(h->project_id);
  free(h->kind);
  free(h->secret_sealed);
  free(h->events);
  free(h->spec);
  memset(h, 0, sizeof *h);
}

/* A conflict on either the delivery id (primary key) or the digest (unique
 * index hook_deliveries_in_digest) inserts nothing. */
static const struct tb_db_stmt delivery_claim = {
  "ci_hook_delivery_claim",
  "INSERT INTO hook_deliveries_in (hook_id, delivery_id, event, digest) "
  "VALUES ($1, $2, $3, $4) ON CONFLICT DO NOTHING",
};

int
tb_q_hooks_delivery_claim(struct tb_db *db, const char *hook_id, const char *delivery_id,
                          const char *event, const char *digest)
{
  const char *p[] = { hook_id, delivery_id, event, digest };
  return tb_db_exec(db, &delivery_claim, 4, p, NULL);
}

static const struct tb_db_stmt delivery_seen = {
  "ci_hook_delivery_seen",
  "SELECT job_id::text AS job_id FROM hook_deliveries_in "
  "WHERE hook_id = $1 AND (delivery_id = $2 OR digest = $3) "
  "ORDER BY received_at LIMIT 1",
};

int
tb_q_hooks_delivery_seen(struct tb_db *db, const char *hook_id, const char *delivery_id,
                         const char *digest, char **job_id)
{
  const char *p[] = { hook_id, delivery_id, digest };
  return tb_db_exec_str(db, &delivery_seen, 3, p, "job_id", job_id, NULL);
}

static const struct tb_db_stmt delivery_job = {
  "ci_hook_delivery_job",
  "UPDATE hook_deliveries_in SET job_id = $3 WHERE hook_id = $1 AND delivery_id = $2",
};

int
tb_q_hooks_delivery_job(struct tb_db *db, const char *hook_id, const char *delivery_id,
                        const char *job_id)
{
  const char *p[] = { hook_id, delivery_id, job_id };
  return tb_db_exec(db, &delivery_job, 3, p, NULL);
}

static const struct tb_db_stmt hook_exists = {
  "ci_hook_exists",
  "SELECT 1 FROM hooks WHERE id = $1 AND deleted_at IS NULL",
};

int
tb_q_hooks_exists(struct tb_db *db, const char *id)
{
  const char *p[] = { id };
  return tb_db_exec(db, &hook_exists, 1, p, NULL);
}
