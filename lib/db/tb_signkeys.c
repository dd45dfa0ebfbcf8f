/*
 * tb_signkeys: one statement per function (see tb_signkeys.h).  Times are
 * written as RFC 3339 UTC by the database itself (to_char at UTC), so the
 * JWK set reads the same whatever the session's time zone.
 */
#include "db/tb_signkeys.h"

#include <stdlib.h>
#include <string.h>

#define UTC_TEXT(col) "to_char(" col " AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS.MS\"Z\"')"

static const struct tb_db_stmt st_record = {
  "signkeys_record",
  /* DO UPDATE (of nothing) so that an existing row answers too */
  "INSERT INTO signing_keys (kid, public_key) VALUES ($1, $2) "
  "ON CONFLICT (kid) DO UPDATE SET kid = EXCLUDED.kid "
  "RETURNING revoked_at IS NOT NULL AS revoked",
};

int
tb_signkeys_record(struct tb_db *db, const unsigned char pub[TB_SIGN_PUB_LEN], bool *revoked)
{
  char kid[TB_SIGN_KID_LEN + 1], *x = tb_b64url_encode(pub, TB_SIGN_PUB_LEN);
  tb_sign_kid(pub, kid);
  const char *p[] = { kid, x };
  PGresult *res = NULL;
  *revoked = false;
  int rc = tb_db_exec(db, &st_record, 2, p, &res);
  if (rc > 0)
    *revoked = tb_db_bool(res, 0, "revoked");
  PQclear(res);
  free(x);
  return rc < 0 ? rc : 1;
}

static const struct tb_db_stmt st_revoked = {
  "signkeys_revoked",
  "SELECT revoked_at IS NOT NULL AS revoked FROM signing_keys WHERE kid = $1",
};

int
tb_signkeys_revoked(struct tb_db *db, const char *kid, bool *revoked)
{
  const char *p[] = { kid };
  PGresult *res = NULL;
  *revoked = false;
  int rc = tb_db_exec(db, &st_revoked, 1, p, &res);
  if (rc > 0)
    *revoked = tb_db_bool(res, 0, "revoked");
  PQclear(res);
  return rc;
}

static const struct tb_db_stmt st_list = {
  "signkeys_list",
  "SELECT kid, public_key, " UTC_TEXT("created_at") " AS created_at, " UTC_TEXT(
    "revoked_at") " AS revoked_at FROM signing_keys ORDER BY created_at, kid",
};

int
tb_signkeys_jwks(struct tb_db *db, json_t **jwks)
{
  PGresult *res = NULL;
  *jwks = NULL;
  int rc = tb_db_exec(db, &st_list, 0, NULL, &res);
  if (rc < 0)
    return rc;
  json_t *keys = json_array();
  for (int i = 0; i < rc; i++) {
    unsigned char pub[TB_SIGN_PUB_LEN];
    const char *x = tb_db_str(res, i, "public_key");
    if (x == NULL || !tb_b64url_decode(x, pub, sizeof pub))
      continue; /* the table's CHECK makes this unreachable */
    json_t *k = tb_sign_jwk(pub);
    const char *created = tb_db_str(res, i, "created_at");
    const char *revoked = tb_db_str(res, i, "revoked_at");
    json_object_set_new(k, "created_at", json_string(created != NULL ? created : ""));
    if (revoked != NULL)
      json_object_set_new(k, "revoked_at", json_string(revoked));
    json_array_append_new(keys, k);
  }
  PQclear(res);
  *jwks = json_pack("{s:o}", "keys", keys);
  return (int)json_array_size(keys);
}

static const struct tb_db_stmt st_revoke = {
  "signkeys_revoke",
  "UPDATE signing_keys SET revoked_at = coalesce(revoked_at, now()) WHERE kid = $1 "
  /* the api's cached signed results go (service/api_notify.c) */
  "RETURNING pg_notify('tb_signing_keys_changed', kid)",
};

int
tb_signkeys_revoke(struct tb_db *db, const char *kid)
{
  const char *p[] = { kid };
  return tb_db_exec(db, &st_revoke, 1, p, NULL);
}
