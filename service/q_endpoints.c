/*
 * q_endpoints: see q_endpoints.h.
 */
#include "q_endpoints.h"

#include <openssl/crypto.h>
#include <stdlib.h>
#include <string.h>

#define EP_DOC                                                                         \
  "json_build_object('id', id, 'name', name, 'base_url', base_url, "                   \
  "'api_key_set', api_key_sealed IS NOT NULL, 'engine_hint', engine_hint, "            \
  "'hardware', hardware, 'engine', engine, 'launch_command', launch_command, "         \
  "'exclusive_group', exclusive_group, 'gpu', gpu, 'price_per_hour', price_per_hour, " \
  "'currency', currency, 'telemetry_url', telemetry_url, "                             \
  "'created_at', created_at, 'updated_at', updated_at)"

static const struct tb_db_stmt ep_insert = {
  "api_ep_insert",
  "INSERT INTO endpoints (id, project_id, name, base_url, api_key_sealed, engine_hint, "
  "  hardware, engine, launch_command, exclusive_group, api_key_origin, gpu, price_per_hour, "
  "  currency, telemetry_url) "
  "VALUES ($1, $2, $3, $4, $5, $6, coalesce($7::jsonb, '{}'), coalesce($8::jsonb, '{}'), $9, $10, "
  "  $11, $12::jsonb, $13::double precision, $14, $15) "
  "RETURNING " EP_DOC "::text AS doc",
};

int
tb_q_endpoints_insert(struct tb_db *db, const struct tb_q_endpoints_new *e, char **doc,
                      bool *name_taken)
{
  const char *p[] = { e->id,
                      e->project_id,
                      e->name,
                      e->base_url,
                      e->api_key_sealed,
                      e->engine_hint,
                      e->hardware,
                      e->engine,
                      e->launch_command,
                      e->exclusive_group,
                      e->api_key_origin,
                      e->gpu,
                      e->price_per_hour,
                      e->currency,
                      e->telemetry_url };
  return tb_db_exec_str(db, &ep_insert, 15, p, "doc", doc, name_taken);
}

static const struct tb_db_stmt ep_list = {
  "api_ep_list",
  "SELECT coalesce(json_agg(" EP_DOC " ORDER BY created_at, id), '[]')::text AS doc "
  "FROM endpoints WHERE project_id = $1 AND deleted_at IS NULL",
};

int
tb_q_endpoints_list(struct tb_db *db, const char *project_id, char **doc)
{
  const char *p[] = { project_id };
  return tb_db_exec_str(db, &ep_list, 1, p, "doc", doc, NULL);
}

static const struct tb_db_stmt ep_get = {
  "api_ep_get",
  "SELECT " EP_DOC "::text AS doc FROM endpoints "
  "WHERE id = $1 AND project_id = $2 AND deleted_at IS NULL",
};

int
tb_q_endpoints_get(struct tb_db *db, const char *id, const char *project_id, char **doc)
{
  const char *p[] = { id, project_id };
  return tb_db_exec_str(db, &ep_get, 2, p, "doc", doc, NULL);
}

static const struct tb_db_stmt ep_owned = {
  "api_ep_owned",
  "SELECT 1 AS one FROM endpoints WHERE id = $1 AND project_id = $2",
};

int
tb_q_endpoints_owned(struct tb_db *db, const char *id, const char *project_id)
{
  const char *p[] = { id, project_id };
  return tb_db_exec(db, &ep_owned, 2, p, NULL);
}

static const struct tb_db_stmt ep_patch = {
  "api_ep_patch",
  "UPDATE endpoints SET "
  "  name = CASE WHEN $3::jsonb ? 'name' THEN $3::jsonb->>'name' ELSE name END, "
  "  base_url = CASE WHEN $3::jsonb ? 'base_url' THEN $3::jsonb->>'base_url' ELSE base_url END, "
  /* $5: the origin of the new base_url (NULL when the patch has none); $6:
   * the origin a new key was sealed for.  Another origin drops the key. */
  "  api_key_sealed = CASE WHEN $3::jsonb ? 'api_key' THEN $4 "
  "    WHEN $3::jsonb ? 'base_url' AND $5::text IS DISTINCT FROM api_key_origin THEN NULL "
  "    ELSE api_key_sealed END, "
  "  api_key_origin = CASE WHEN $3::jsonb ? 'api_key' THEN $6 "
  "    WHEN $3::jsonb ? 'base_url' AND $5::text IS DISTINCT FROM api_key_origin THEN NULL "
  "    ELSE api_key_origin END, "
  "  engine_hint = CASE WHEN $3::jsonb ? 'engine_hint' THEN $3::jsonb->>'engine_hint' "
  "    ELSE engine_hint END, "
  "  hardware = CASE WHEN $3::jsonb ? 'hardware' THEN $3::jsonb->'hardware' ELSE hardware END, "
  "  engine = CASE WHEN $3::jsonb ? 'engine' THEN $3::jsonb->'engine' ELSE engine END, "
  "  launch_command = CASE WHEN $3::jsonb ? 'launch_command' "
  "    THEN $3::jsonb->>'launch_command' ELSE launch_command END, "
  "  exclusive_group = CASE WHEN $3::jsonb ? 'exclusive_group' "
  "    THEN $3::jsonb->>'exclusive_group' ELSE exclusive_group END, "
  "  gpu = CASE WHEN $3::jsonb ? 'gpu' THEN nullif($3::jsonb->'gpu', 'null') ELSE gpu END, "
  "  price_per_hour = CASE WHEN $3::jsonb ? 'price_per_hour' "
  "    THEN ($3::jsonb->>'price_per_hour')::double precision ELSE price_per_hour END, "
  "  currency = CASE WHEN $3::jsonb ? 'currency' THEN $3::jsonb->>'currency' ELSE currency END, "
  "  telemetry_url = CASE WHEN $3::jsonb ? 'telemetry_url' "
  "    THEN $3::jsonb->>'telemetry_url' ELSE telemetry_url END, "
  "  updated_at = now() "
  "WHERE id = $1 AND project_id = $2 AND deleted_at IS NULL "
  "RETURNING " EP_DOC "::text AS doc",
};

int
tb_q_endpoints_patch(struct tb_db *db, const char *id, const char *project_id, const char *patch,
                     const char *sealed, const char *new_origin, const char *key_origin, char **doc,
                     bool *name_taken)
{
  const char *p[] = { id, project_id, patch, sealed, new_origin, key_origin };
  return tb_db_exec_str(db, &ep_patch, 6, p, "doc", doc, name_taken);
}

static const struct tb_db_stmt ep_delete = {
  "api_ep_delete",
  "UPDATE endpoints SET deleted_at = now(), updated_at = now() "
  "WHERE id = $1 AND project_id = $2 AND deleted_at IS NULL",
};

int
tb_q_endpoints_delete(struct tb_db *db, const char *id, const char *project_id)
{
  const char *p[] = { id, project_id };
  return tb_db_exec(db, &ep_delete, 2, p, NULL);
}

static const struct tb_db_stmt ep_secret = {
  "api_ep_secret",
  "SELECT base_url, api_key_sealed, api_key_origin FROM endpoints "
  "WHERE id = $1 AND project_id = $2 AND deleted_at IS NULL",
};

int
tb_q_endpoints_secret(struct tb_db *db, const char *id, const char *project_id,
                      struct tb_q_endpoints_secret *out)
{
  memset(out, 0, sizeof *out);
  const char *p[] = { id, project_id };
  PGresult *res = NULL;
  int rc = tb_db_exec(db, &ep_secret, 2, p, &res);
  if (rc > 0) {
    out->base_url = tb_db_dup(res, 0, "base_url");
    out->api_key_sealed = tb_db_dup(res, 0, "api_key_sealed");
    out->api_key_origin = tb_db_dup(res, 0, "api_key_origin");
  }
  PQclear(res);
  return rc;
}

void
tb_q_endpoints_secret_clear(struct tb_q_endpoints_secret *s)
{
  if (s->api_key_sealed != NULL)
    OPENSSL_cleanse(s->api_key_sealed, strlen(s->api_key_sealed));
  free(s->base_url);
  free(s->api_key_sealed);
  free(s->api_key_origin);
  memset(s, 0, sizeof *s);
}

static const struct tb_db_stmt ep_legacy = {
  "api_ep_legacy",
  "SELECT id, base_url, api_key_sealed FROM endpoints "
  "WHERE api_key_sealed IS NOT NULL AND api_key_origin IS NULL",
};

int
tb_q_endpoints_legacy(struct tb_db *db, tb_q_endpoints_legacy_fn fn, void *cls)
{
  PGresult *res = NULL;
  int rc = tb_db_exec(db, &ep_legacy, 0, NULL, &res);
  if (rc > 0) {
    int ci = PQfnumber(res, "id"), cb = PQfnumber(res, "base_url");
    int cs = PQfnumber(res, "api_key_sealed");
    for (int i = 0; i < rc; i++)
      fn(cls, PQgetvalue(res, i, ci), PQgetvalue(res, i, cb), PQgetvalue(res, i, cs));
  }
  PQclear(res);
  return rc;
}

static const struct tb_db_stmt ep_reseal = {
  "api_ep_reseal",
  "UPDATE endpoints SET api_key_sealed = $2, api_key_origin = $3 "
  "WHERE id = $1 AND api_key_sealed = $4 AND api_key_origin IS NULL",
};

int
tb_q_endpoints_reseal(struct tb_db *db, const char *id, const char *sealed, const char *origin,
                      const char *old)
{
  const char *p[] = { id, sealed, origin, old };
  return tb_db_exec(db, &ep_reseal, 4, p, NULL);
}
