/*
 * tb_auth: see tb_auth.h.  The SQL for projects and key creation lives here,
 * beside the C that binds it, so that the CLI and the api make keys the same
 * way.
 */
#include "db/tb_auth.h"

#include <openssl/crypto.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/tb_crypto.h"

bool
tb_auth_key_wellformed(const char *key, size_t len)
{
  const size_t pl = sizeof TB_AUTH_KEY_PREFIX - 1;
  if (key == NULL || len != TB_AUTH_KEY_LEN || memcmp(key, TB_AUTH_KEY_PREFIX, pl) != 0)
    return false;
  for (size_t i = pl; i < len; i++) {
    char c = key[i];
    if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9')))
      return false;
  }
  return true;
}

void
tb_auth_key_hash(const char *key, size_t len, char hex[65])
{
  tb_crypto_sha256_hex(key, len, hex);
}

static const struct tb_db_stmt project_ensure = {
  "auth_project_ensure",
  "INSERT INTO projects (name) VALUES ($1) "
  "ON CONFLICT (name) DO UPDATE SET name = EXCLUDED.name RETURNING id::text",
};

int
tb_auth_project_ensure(struct tb_db *db, const char *name, char id[37])
{
  PGresult *r = NULL;
  const char *p[] = { name };
  int rc = tb_db_exec(db, &project_ensure, 1, p, &r);
  if (rc < 0)
    return rc;
  if (rc != 1) {
    PQclear(r);
    return TB_DB_HARD;
  }
  snprintf(id, 37, "%s", PQgetvalue(r, 0, 0));
  PQclear(r);
  return 1;
}

/* With a parent ($7): only while the parent is live, expiring no later than
 * it (least() skips a NULL: "never" is the other one). */
static const struct tb_db_stmt key_insert = {
  "auth_key_insert",
  "INSERT INTO api_keys AS k (project_id, name, prefix, key_hash, scopes, expires_at, parent_id) "
  "SELECT $1::uuid, $2::text, $3::text, $4::text, string_to_array($5, ','), "
  "  least(CASE WHEN $6::bigint > 0 THEN now() + $6::bigint * interval '1 second' END, "
  "        p.expires_at), p.id "
  "FROM (SELECT NULL::uuid AS id, NULL::timestamptz AS expires_at WHERE $7::uuid IS NULL "
  "      UNION ALL "
  "      SELECT id, expires_at FROM api_keys WHERE id = $7::uuid AND project_id = $1 "
  "        AND revoked_at IS NULL AND (expires_at IS NULL OR expires_at > now())) p "
  "RETURNING " TB_AUTH_KEY_JSON "::text",
};

/* Issue 27: the keys cap.  Key creations of one project take turns on a
 * transaction-scoped advisory lock (not the project's row, which job
 * submits lock), so the count they read holds until their insert commits. */
static const struct tb_db_stmt keys_lock = {
  "auth_keys_lock",
  "SELECT pg_advisory_xact_lock(hashtextextended('tb_auth_keys:' || $1::text, 0))",
};

static const struct tb_db_stmt keys_live = {
  "auth_keys_live",
  "SELECT count(*) AS n FROM api_keys WHERE project_id = $1::uuid AND revoked_at IS NULL "
  "  AND (expires_at IS NULL OR expires_at > now())",
};

/* The statements of one attempt: the cap (max_keys > 0), then the insert. */
static int
insert_once(struct tb_db *db, const char *const p[7], int64_t max_keys, PGresult **r)
{
  if (max_keys > 0) {
    PGresult *c = NULL;
    int rc = tb_db_exec(db, &keys_lock, 1, p, NULL);
    if (rc >= 0)
      rc = tb_db_exec(db, &keys_live, 1, p, &c);
    int64_t n = rc == 1 ? tb_db_i64(c, 0, "n") : 0;
    PQclear(c);
    if (rc < 0)
      return rc;
    if (n >= max_keys)
      return TB_AUTH_KEYS_FULL;
  }
  return tb_db_exec(db, &key_insert, 7, p, r);
}

/* insert_once in a transaction of its own when there is a cap (tried twice
 * like a lone statement). */
static int
insert_key(struct tb_db *db, const char *const p[7], int64_t max_keys, PGresult **r)
{
  if (max_keys <= 0 || tb_db_in_tx(db))
    return insert_once(db, p, max_keys, r);
  int rc = TB_DB_SOFT;
  for (int attempt = 0; attempt < 2 && rc == TB_DB_SOFT; attempt++) {
    if ((rc = tb_db_begin(db)) < 0)
      continue;
    rc = insert_once(db, p, max_keys, r);
    if (rc == 1) {
      int crc = tb_db_commit(db);
      if (crc < 0) {
        rc = crc;
        PQclear(*r);
        *r = NULL;
      }
    } else {
      tb_db_rollback(db);
    }
  }
  return rc;
}

int
tb_auth_key_create(struct tb_db *db, const char *project_id, const char *parent_id,
                   const char *name, unsigned mask, int64_t expires_in_s, char **key, char **doc)
{
  return tb_auth_key_create_capped(db, project_id, parent_id, name, mask, expires_in_s, 0, key,
                                   doc);
}

int
tb_auth_key_create_capped(struct tb_db *db, const char *project_id, const char *parent_id,
                          const char *name, unsigned mask, int64_t expires_in_s, int64_t max_keys,
                          char **key, char **doc)
{
  char hash[65], scopes[32], prefix[32], exp[24];
  PGresult *r = NULL;
  char *k = tb_crypto_token(TB_AUTH_KEY_PREFIX, TB_AUTH_KEY_CHARS);
  if (k == NULL)
    return TB_DB_HARD;
  tb_auth_key_hash(k, strlen(k), hash);
  tb_scope_csv(mask, scopes, sizeof scopes);
  snprintf(prefix, sizeof prefix, "%.*s",
           (int)(sizeof TB_AUTH_KEY_PREFIX - 1 + TB_AUTH_DISPLAY_CHARS), k);
  snprintf(exp, sizeof exp, "%lld", (long long)expires_in_s);
  const char *p[] = { project_id, name ? name : "", prefix, hash, scopes, exp, parent_id };
  int rc = insert_key(db, p, max_keys, &r);
  if (rc == 1) {
    *key = k;
    *doc = tb_xstrdup(PQgetvalue(r, 0, 0));
    k = NULL;
  } else if (rc == 0 && parent_id == NULL) {
    rc = TB_DB_HARD;
  }
  PQclear(r);
  if (k != NULL) {
    OPENSSL_cleanse(k, strlen(k));
    free(k);
  }
  return rc;
}

static const struct tb_db_stmt keys_list = {
  "auth_keys_list",
  "SELECT coalesce(json_agg((" TB_AUTH_KEY_JSON "::jsonb || "
  "  jsonb_build_object('project', p.name)) ORDER BY k.created_at, k.id), '[]')::text "
  "FROM api_keys k JOIN projects p ON p.id = k.project_id "
  "WHERE $1::text IS NULL OR p.name = $1",
};

int
tb_auth_keys_list(struct tb_db *db, const char *project, char **json)
{
  PGresult *res = NULL;
  const char *p[] = { project };
  int rc = tb_db_exec(db, &keys_list, 1, p, &res);
  if (rc >= 0) {
    *json = tb_xstrdup(rc > 0 ? PQgetvalue(res, 0, 0) : "[]");
    rc = 1;
  }
  PQclear(res);
  return rc;
}

/* The key and every key made under it, at any depth. */
static const struct tb_db_stmt key_revoke = {
  "auth_key_revoke",
  "WITH RECURSIVE d AS ("
  "  SELECT id FROM api_keys WHERE id = $1::uuid AND ($2::uuid IS NULL OR project_id = $2::uuid)"
  "  UNION SELECT c.id FROM api_keys c JOIN d ON c.parent_id = d.id), "
  "u AS (UPDATE api_keys SET revoked_at = coalesce(revoked_at, now()) "
  "  WHERE id IN (SELECT id FROM d) RETURNING *) "
  "SELECT " TB_AUTH_KEY_JSON "::text, pg_notify('tb_keys_changed', k.id::text) "
  "FROM u k WHERE k.id = $1::uuid",
};

int
tb_auth_key_revoke(struct tb_db *db, const char *id, const char *project_id, char **doc)
{
  PGresult *res = NULL;
  const char *p[] = { id, project_id };
  int rc = tb_db_exec(db, &key_revoke, 2, p, &res);
  if (rc == 1)
    *doc = tb_xstrdup(PQgetvalue(res, 0, 0));
  PQclear(res);
  return rc;
}
