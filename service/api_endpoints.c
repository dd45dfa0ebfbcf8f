/*
 * api_endpoints: /v1/endpoints, the GPU endpoints of the caller's project.
 *   POST   /v1/endpoints             register -> 201 + Location
 *   GET    /v1/endpoints             list (not deleted)
 *   GET    /v1/endpoints/{id}        one
 *   PATCH  /v1/endpoints/{id}        change the fields given (null clears)
 *   DELETE /v1/endpoints/{id}        soft delete -> 204
 *   POST   /v1/endpoints/{id}/probe  discovery now (tb_engine_probe)
 *
 * The endpoint's API key is write-only: sealed with AES-256-GCM under the
 * master key, associated data = the endpoint id and the origin (scheme,
 * host, port) of base_url (tb_masterkey_seal_endpoint_key: a sealed value
 * copied to another row, or a row pointed elsewhere, does not open), never
 * returned ("api_key_set": true), never logged, wiped from memory once
 * sealed.  A PATCH that moves base_url to another origin drops the key in
 * the same UPDATE unless it sets a new one, so a writer cannot send a key
 * to a listener of its own.  Every query names the project: another
 * project's endpoint is "not found".
 *
 * base_url passes the egress policy (api_egress.h) on create and patch.
 * The probe runs on the probe pool (api_probe.h), never on a request
 * thread.
 */
#include <openssl/crypto.h>
#include <string.h>

#include "api_egress.h"
#include "api_handlers.h"
#include "api_probe.h"
#include "api_spec.h"
#include "tb_egress.h"
#include "tb_log.h"
#include "tb_masterkey.h"

#define EP_DOC                                                                            \
  "json_build_object('id', id, 'name', name, 'base_url', base_url, "                      \
  "'api_key_set', api_key_sealed IS NOT NULL, 'engine_hint', engine_hint, "               \
  "'hardware', hardware, 'engine', engine, 'launch_command', launch_command, "            \
  "'exclusive_group', exclusive_group, 'created_at', created_at, 'updated_at', updated_at)"

static const struct tb_db_stmt ep_insert = {
  "api_ep_insert",
  "INSERT INTO endpoints (id, project_id, name, base_url, api_key_sealed, engine_hint, "
  "  hardware, engine, launch_command, exclusive_group, api_key_origin) "
  "VALUES ($1, $2, $3, $4, $5, $6, coalesce($7::jsonb, '{}'), coalesce($8::jsonb, '{}'), $9, $10, "
  "  $11) "
  "RETURNING " EP_DOC "::text",
};

static const struct tb_db_stmt ep_list = {
  "api_ep_list",
  "SELECT coalesce(json_agg(" EP_DOC " ORDER BY created_at, id), '[]')::text "
  "FROM endpoints WHERE project_id = $1 AND deleted_at IS NULL",
};

static const struct tb_db_stmt ep_get = {
  "api_ep_get",
  "SELECT " EP_DOC "::text FROM endpoints "
  "WHERE id = $1 AND project_id = $2 AND deleted_at IS NULL",
};

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
  "  updated_at = now() "
  "WHERE id = $1 AND project_id = $2 AND deleted_at IS NULL "
  "RETURNING " EP_DOC "::text",
};

static const struct tb_db_stmt ep_delete = {
  "api_ep_delete",
  "UPDATE endpoints SET deleted_at = now(), updated_at = now() "
  "WHERE id = $1 AND project_id = $2 AND deleted_at IS NULL",
};

static const struct tb_db_stmt ep_secret = {
  "api_ep_secret",
  "SELECT base_url, api_key_sealed, api_key_origin FROM endpoints "
  "WHERE id = $1 AND project_id = $2 AND deleted_at IS NULL",
};

static const struct tb_db_stmt ep_legacy = {
  "api_ep_legacy",
  "SELECT id, base_url, api_key_sealed FROM endpoints "
  "WHERE api_key_sealed IS NOT NULL AND api_key_origin IS NULL",
};

static const struct tb_db_stmt ep_reseal = {
  "api_ep_reseal",
  "UPDATE endpoints SET api_key_sealed = $2, api_key_origin = $3 "
  "WHERE id = $1 AND api_key_sealed = $4 AND api_key_origin IS NULL",
};

/* A new random (version 4) UUID into out[37]. */
static bool
new_uuid(char out[37])
{
  unsigned char b[16];
  if (!tb_crypto_random(b, sizeof b))
    return false;
  b[6] = (unsigned char)((b[6] & 0x0f) | 0x40);
  b[8] = (unsigned char)((b[8] & 0x3f) | 0x80);
  char hex[33];
  tb_hex_encode(b, sizeof b, hex);
  snprintf(out, 37, "%.8s-%.4s-%.4s-%.4s-%.12s", hex, hex + 8, hex + 12, hex + 16, hex + 20);
  return true;
}

/* Wipes jansson's copy of the api_key in spec, if there is one. */
static void
wipe_spec_key(json_t *spec)
{
  json_t *k = json_object_get(spec, "api_key");
  if (json_is_string(k))
    OPENSSL_cleanse((void *)json_string_value(k), json_string_length(k));
}

/* Takes the api_key out of spec (wiping jansson's copy) and seals it for
 * endpoint id at the origin of base_url.  *sealed and *origin: new strings,
 * or NULL when the key is null/absent.  False when a key was given but
 * there is no master key or sealing failed. */
static bool
take_and_seal(struct tb_api *api, json_t *spec, const char *id, const char *base_url,
              char **sealed, char **origin, enum tb_api_ec *ec)
{
  *sealed = NULL;
  *origin = NULL;
  json_t *k = json_object_get(spec, "api_key");
  if (k == NULL)
    return true;
  bool ok = true;
  if (json_is_string(k)) {
    if (!api->has_master_key) {
      *ec = TB_EC_NO_MASTER_KEY;
      ok = false;
    } else {
      *sealed = tb_masterkey_seal_endpoint_key(api->master_key, json_string_value(k), id,
                                               base_url ? base_url : "", origin);
      if (*sealed == NULL) {
        *ec = TB_EC_INTERNAL;
        ok = false;
      }
    }
    wipe_spec_key(spec);
  }
  /* keep the member as a marker that the key is set or cleared */
  json_object_set_new(spec, "api_key", json_boolean(*sealed != NULL));
  return ok;
}

static char *
dump_or_null(const json_t *v)
{
  return v ? json_dumps(v, JSON_COMPACT) : NULL;
}

enum MHD_Result
tb_api_endpoints_create(struct tb_api_req *r)
{
  json_t *spec = NULL, *errors = NULL;
  int src = tb_api_spec_endpoint(r->body ? r->body : "", r->body_len, false, &spec, &errors);
  if (r->body != NULL) /* the raw body held the endpoint's key: wipe it */
    OPENSSL_cleanse(r->body, r->body_len);
  if (src != TB_SPEC_OK)
    return tb_api_reply_spec_errors(r, src, errors);
  char id[37];
  char *sealed = NULL, *origin = NULL, *hw = NULL, *eng = NULL;
  enum MHD_Result ret;
  enum tb_api_ec ec = TB_EC_INTERNAL;
  const char *base = json_string_value(json_object_get(spec, "base_url"));
  if (!tb_api_egress_check(r, "base_url", base, &ret)) {
    wipe_spec_key(spec);
    goto out;
  }
  if (!new_uuid(id)) {
    ret = tb_api_reply_error(r, TB_EC_INTERNAL, NULL, NULL);
    goto out;
  }
  if (!take_and_seal(r->api, spec, id, base, &sealed, &origin, &ec)) {
    ret = tb_api_reply_error(r, ec, ec == TB_EC_NO_MASTER_KEY ?
                             "set TOKBENCH_MASTER_KEY or TOKBENCH_MASTER_KEY_FILE to store "
                             "endpoint API keys" : NULL, NULL);
    goto out;
  }
  hw = dump_or_null(json_object_get(spec, "hardware"));
  eng = dump_or_null(json_object_get(spec, "engine"));
  const char *p[] = {
    id, r->project_id,
    json_string_value(json_object_get(spec, "name")),
    json_string_value(json_object_get(spec, "base_url")),
    sealed,
    json_string_value(json_object_get(spec, "engine_hint")),
    hw, eng,
    json_string_value(json_object_get(spec, "launch_command")),
    json_string_value(json_object_get(spec, "exclusive_group")),
    origin,
  };
  PGresult *res = NULL;
  bool uv = false;
  struct tb_db *db = tb_api_db_get(r);
  int rc = tb_db_exec_uv(db, &ep_insert, 11, p, &res, &uv);
  tb_api_db_put(r, db);
  if (uv) {
    ret = tb_api_reply_error(r, TB_EC_NAME_TAKEN, "an endpoint of this name exists already",
                             NULL);
  } else if (rc != 1) {
    ret = tb_api_reply_db(r, rc < 0 ? rc : TB_DB_HARD);
  } else {
    char loc[64];
    snprintf(loc, sizeof loc, "/v1/endpoints/%s", id);
    const char *h[] = { "Location", loc, NULL };
    ret = tb_api_reply_text(r, MHD_HTTP_CREATED, PQgetvalue(res, 0, 0), h);
  }
  PQclear(res);
out:
  json_decref(spec);
  free(sealed);
  free(origin);
  free(hw);
  free(eng);
  return ret;
}

enum MHD_Result
tb_api_endpoints_list(struct tb_api_req *r)
{
  const char *p[] = { r->project_id };
  return tb_api_reply_query(r, &ep_list, 1, p, MHD_HTTP_OK, "endpoints", NULL);
}

enum MHD_Result
tb_api_endpoints_get(struct tb_api_req *r)
{
  const char *p[] = { r->id, r->project_id };
  return tb_api_reply_query(r, &ep_get, 2, p, MHD_HTTP_OK, NULL, "no such endpoint");
}

enum MHD_Result
tb_api_endpoints_patch(struct tb_api_req *r)
{
  json_t *spec = NULL, *errors = NULL;
  int src = tb_api_spec_endpoint(r->body ? r->body : "", r->body_len, true, &spec, &errors);
  if (r->body != NULL)
    OPENSSL_cleanse(r->body, r->body_len);
  if (src != TB_SPEC_OK)
    return tb_api_reply_spec_errors(r, src, errors);
  char *sealed = NULL, *key_origin = NULL, *new_origin = NULL, *cur_base = NULL, *patch = NULL;
  enum MHD_Result ret;
  enum tb_api_ec ec = TB_EC_INTERNAL;
  const char *base = json_string_value(json_object_get(spec, "base_url"));
  if (!tb_api_egress_check(r, "base_url", base, &ret)) {
    wipe_spec_key(spec);
    goto out;
  }
  if (base != NULL)
    new_origin = tb_egress_origin(base);
  if (base == NULL && json_is_string(json_object_get(spec, "api_key"))) {
    /* a new key alone is sealed for the current base_url; should base_url
     * move meanwhile, the key no longer opens (fails closed) */
    const char *p[] = { r->id, r->project_id };
    PGresult *res = NULL;
    if (!tb_api_query_row(r, &ep_secret, 2, p, "no such endpoint", &res, &ret)) {
      wipe_spec_key(spec);
      goto out;
    }
    cur_base = tb_xstrdup(PQgetvalue(res, 0, 0));
    PQclear(res);
  }
  if (!take_and_seal(r->api, spec, r->id, base != NULL ? base : cur_base, &sealed, &key_origin,
                     &ec)) {
    ret = tb_api_reply_error(r, ec, NULL, NULL);
    goto out;
  }
  patch = json_dumps(spec, JSON_COMPACT);
  const char *p[] = { r->id, r->project_id, patch, sealed, new_origin, key_origin };
  PGresult *res = NULL;
  bool uv = false;
  struct tb_db *db = tb_api_db_get(r);
  int rc = tb_db_exec_uv(db, &ep_patch, 6, p, &res, &uv);
  tb_api_db_put(r, db);
  if (uv)
    ret = tb_api_reply_error(r, TB_EC_NAME_TAKEN, "an endpoint of this name exists already",
                             NULL);
  else if (rc < 0)
    ret = tb_api_reply_db(r, rc);
  else if (rc == 0)
    ret = tb_api_reply_error(r, TB_EC_NOT_FOUND, "no such endpoint", NULL);
  else
    ret = tb_api_reply_text(r, MHD_HTTP_OK, PQgetvalue(res, 0, 0), NULL);
  PQclear(res);
out:
  json_decref(spec);
  free(sealed);
  free(key_origin);
  free(new_origin);
  free(cur_base);
  free(patch);
  return ret;
}

enum MHD_Result
tb_api_endpoints_delete(struct tb_api_req *r)
{
  const char *p[] = { r->id, r->project_id };
  return tb_api_reply_delete(r, &ep_delete, 2, p, "no such endpoint");
}

enum MHD_Result
tb_api_endpoints_probe(struct tb_api_req *r)
{
  if (r->state != NULL) /* resumed: the pool has the answer */
    return tb_api_probe_reply(r);
  const char *p[] = { r->id, r->project_id };
  PGresult *res = NULL;
  enum MHD_Result ret;
  if (!tb_api_query_row(r, &ep_secret, 2, p, "no such endpoint", &res, &ret))
    return ret;
  char *base = tb_xstrdup(PQgetvalue(res, 0, 0));
  char *key = NULL;
  if (!PQgetisnull(res, 0, 1)) {
    if (!r->api->has_master_key) {
      PQclear(res);
      free(base);
      return tb_api_reply_error(r, TB_EC_NO_MASTER_KEY, NULL, NULL);
    }
    const char *why = NULL;
    key = tb_masterkey_open_endpoint_key(r->api->master_key, PQgetvalue(res, 0, 1), r->id,
                                         PQgetisnull(res, 0, 2) ? NULL : PQgetvalue(res, 0, 2),
                                         base, &why);
    if (key == NULL) {
      PQclear(res);
      free(base);
      return tb_api_reply_error(r, TB_EC_INTERNAL, why, NULL);
    }
  }
  PQclear(res);
  return tb_api_probe_start(r, base, key);
}

int
tb_api_endpoints_reseal(struct tb_api *api, struct tb_db *db)
{
  if (!api->has_master_key)
    return 0;
  PGresult *res = NULL;
  int n = tb_db_exec(db, &ep_legacy, 0, NULL, &res);
  int done = 0;
  for (int i = 0; i < n; i++) {
    const char *id = PQgetvalue(res, i, 0), *base = PQgetvalue(res, i, 1);
    const char *old = PQgetvalue(res, i, 2);
    char *plain = tb_crypto_open(api->master_key, old, id);
    if (plain == NULL)
      continue; /* another master key's: left as it is */
    char *origin = NULL;
    char *sealed = tb_masterkey_seal_endpoint_key(api->master_key, plain, id, base, &origin);
    OPENSSL_cleanse(plain, strlen(plain));
    free(plain);
    if (sealed != NULL) {
      const char *up[] = { id, sealed, origin, old };
      if (tb_db_exec(db, &ep_reseal, 4, up, NULL) == 1)
        done++;
    }
    free(sealed);
    free(origin);
  }
  PQclear(res);
  if (done > 0)
    tb_log(TB_LOG_INFO, "endpoint keys re-sealed to their origin", "count", TB_LI, (int64_t)done,
           NULL);
  return n < 0 ? n : done;
}
