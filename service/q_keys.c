/*
 * q_keys: see q_keys.h.
 */
#include "q_keys.h"

#include <stdio.h>
#include <string.h>

#include "db/tb_auth.h"

static const struct tb_db_stmt keys_list = {
  "api_keys_list",
  "SELECT coalesce(json_agg(" TB_AUTH_KEY_JSON " ORDER BY k.created_at, k.id), '[]')::text "
  "  AS doc FROM api_keys k WHERE k.project_id = $1",
};

int
tb_q_keys_list(struct tb_db *db, const char *project_id, char **doc)
{
  const char *p[] = { project_id };
  return tb_db_exec_str(db, &keys_list, 1, p, "doc", doc, NULL);
}

static const struct tb_db_stmt key_lookup = {
  "api_key_lookup",
  "UPDATE api_keys SET last_used_at = now() WHERE key_hash = $1 "
  "RETURNING id::text AS id, project_id::text AS project_id, "
  "  array_to_string(scopes, ',') AS scopes, "
  "  coalesce((extract(epoch FROM expires_at) * 1000000)::bigint, 0) AS expires_us, "
  "  revoked_at IS NOT NULL AS revoked, key_hash",
};

int
tb_q_keys_lookup(struct tb_db *db, const char *key_hash, struct tb_q_keys_record *out)
{
  memset(out, 0, sizeof *out);
  const char *p[] = { key_hash };
  PGresult *res = NULL;
  int rc = tb_db_exec(db, &key_lookup, 1, p, &res);
  if (rc > 0) {
    tb_db_copy(res, 0, "id", out->id, sizeof out->id);
    tb_db_copy(res, 0, "project_id", out->project_id, sizeof out->project_id);
    tb_db_copy(res, 0, "scopes", out->scopes, sizeof out->scopes);
    tb_db_copy(res, 0, "expires_us", out->expires_us, sizeof out->expires_us);
    out->revoked = tb_db_bool(res, 0, "revoked");
    tb_db_copy(res, 0, "key_hash", out->key_hash, sizeof out->key_hash);
  }
  PQclear(res);
  return rc;
}
