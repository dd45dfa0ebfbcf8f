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
 * The statements: service/q_endpoints.c.
 * base_url and telemetry_url (issue 26: GPU telemetry, read by the engine
 * during cells) pass the egress policy (api_egress.h) on create and patch.
 * The probe runs on the probe pool (api_probe.h), never on a request
 * thread.
 */
#include <openssl/crypto.h>
#include <string.h>

#include "api_ci.h"
#include "api_egress.h"
#include "api_handlers.h"
#include "api_probe.h"
#include "api_spec.h"
#include "net/tb_egress.h"
#include "base/tb_log.h"
#include "q_endpoints.h"
#include "net/tb_masterkey.h"

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
take_and_seal(struct tb_api *api, json_t *spec, const char *id, const char *base_url, char **sealed,
              char **origin, enum tb_api_ec *ec)
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

/* The endpoint body of r, checked (patch: the members given), the raw body
 * wiped (it held the endpoint's key), its base_url (*base, borrowed from
 * the result; NULL when absent) through the egress policy.  NULL with a
 * reply queued into *ret. */
static json_t *
endpoint_body(struct tb_api_req *r, bool patch, const char **base, enum MHD_Result *ret)
{
  json_t *spec = NULL, *errors = NULL;
  int src = tb_api_spec_endpoint(r->body ? r->body : "", r->body_len, patch, &spec, &errors);
  if (r->body != NULL)
    OPENSSL_cleanse(r->body, r->body_len);
  if (src != TB_SPEC_OK) {
    *ret = tb_api_reply_spec_errors(r, src, errors);
    return NULL;
  }
  *base = json_string_value(json_object_get(spec, "base_url"));
  const char *tel = json_string_value(json_object_get(spec, "telemetry_url"));
  if (!tb_api_egress_check(r, "base_url", *base, ret) ||
      !tb_api_egress_check(r, "telemetry_url", tel, ret)) {
    wipe_spec_key(spec);
    json_decref(spec);
    return NULL;
  }
  return spec;
}

enum MHD_Result
tb_api_endpoints_create(struct tb_api_req *r)
{
  enum MHD_Result ret;
  const char *base;
  json_t *spec = endpoint_body(r, false, &base, &ret);
  if (spec == NULL)
    return ret;
  char id[37];
  char *sealed = NULL, *origin = NULL, *hw = NULL, *eng = NULL, *gpu = NULL, *price = NULL;
  enum tb_api_ec ec = TB_EC_INTERNAL;
  if (!tb_api_ci_uuid(id)) {
    ret = tb_api_reply_error(r, TB_EC_INTERNAL, NULL, NULL);
    goto out;
  }
  if (!take_and_seal(r->api, spec, id, base, &sealed, &origin, &ec)) {
    ret = tb_api_reply_error(r, ec,
                             ec == TB_EC_NO_MASTER_KEY
                               ? "set TOKBENCH_MASTER_KEY or TOKBENCH_MASTER_KEY_FILE to store "
                                 "endpoint API keys"
                               : NULL,
                             NULL);
    goto out;
  }
  hw = dump_or_null(json_object_get(spec, "hardware"));
  eng = dump_or_null(json_object_get(spec, "engine"));
  gpu = dump_or_null(json_object_get(spec, "gpu"));
  if (json_is_number(json_object_get(spec, "price_per_hour")))
    price = tb_xasprintf("%.17g", json_number_value(json_object_get(spec, "price_per_hour")));
  struct tb_q_endpoints_new e = {
    .id = id,
    .project_id = r->project_id,
    .name = json_string_value(json_object_get(spec, "name")),
    .base_url = json_string_value(json_object_get(spec, "base_url")),
    .api_key_sealed = sealed,
    .engine_hint = json_string_value(json_object_get(spec, "engine_hint")),
    .hardware = hw,
    .engine = eng,
    .launch_command = json_string_value(json_object_get(spec, "launch_command")),
    .exclusive_group = json_string_value(json_object_get(spec, "exclusive_group")),
    .api_key_origin = origin,
    .gpu = gpu,
    .price_per_hour = price,
    .currency = json_string_value(json_object_get(spec, "currency")),
    .telemetry_url = json_string_value(json_object_get(spec, "telemetry_url")),
  };
  char *doc = NULL;
  bool uv = false;
  struct tb_db *db = tb_api_db_get(r);
  int rc = tb_q_endpoints_insert(db, &e, &doc, &uv);
  tb_api_db_put(r, db);
  if (uv) {
    ret = tb_api_reply_error(r, TB_EC_NAME_TAKEN, "an endpoint of this name exists already", NULL);
  } else if (rc != 1 || doc == NULL) {
    ret = tb_api_reply_db(r, rc < 0 ? rc : TB_DB_HARD);
  } else {
    ret = tb_api_reply_at(r, MHD_HTTP_CREATED, doc, "/v1/endpoints/", id);
  }
  free(doc);
out:
  json_decref(spec);
  free(sealed);
  free(origin);
  free(hw);
  free(eng);
  free(gpu);
  free(price);
  return ret;
}

enum MHD_Result
tb_api_endpoints_list(struct tb_api_req *r)
{
  return tb_api_reply_list(r, tb_q_endpoints_list, "endpoints");
}

enum MHD_Result
tb_api_endpoints_get(struct tb_api_req *r)
{
  return tb_api_reply_get(r, tb_q_endpoints_get, "no such endpoint");
}

enum MHD_Result
tb_api_endpoints_patch(struct tb_api_req *r)
{
  enum MHD_Result ret;
  const char *base;
  json_t *spec = endpoint_body(r, true, &base, &ret);
  if (spec == NULL)
    return ret;
  char *sealed = NULL, *key_origin = NULL, *new_origin = NULL, *cur_base = NULL, *patch = NULL;
  enum tb_api_ec ec = TB_EC_INTERNAL;
  if (base != NULL)
    new_origin = tb_egress_origin(base);
  if (base == NULL && json_is_string(json_object_get(spec, "api_key"))) {
    /* a new key alone is sealed for the current base_url; should base_url
     * move meanwhile, the key no longer opens (fails closed) */
    struct tb_q_endpoints_secret s;
    struct tb_db *db = tb_api_db_get(r);
    int rc = tb_q_endpoints_secret(db, r->id, r->project_id, &s);
    tb_api_db_put(r, db);
    cur_base = s.base_url;
    s.base_url = NULL;
    tb_q_endpoints_secret_clear(&s);
    if (!tb_api_found(r, rc, "no such endpoint", &ret)) {
      wipe_spec_key(spec);
      goto out;
    }
  }
  if (!take_and_seal(r->api, spec, r->id, base != NULL ? base : cur_base, &sealed, &key_origin,
                     &ec)) {
    ret = tb_api_reply_error(r, ec, NULL, NULL);
    goto out;
  }
  patch = json_dumps(spec, JSON_COMPACT);
  char *doc = NULL;
  bool uv = false;
  struct tb_db *db = tb_api_db_get(r);
  int rc = tb_q_endpoints_patch(db, r->id, r->project_id, patch, sealed, new_origin, key_origin,
                                &doc, &uv);
  tb_api_db_put(r, db);
  if (uv) {
    free(doc);
    ret = tb_api_reply_error(r, TB_EC_NAME_TAKEN, "an endpoint of this name exists already", NULL);
  } else {
    ret = tb_api_reply_doc(r, rc, doc, MHD_HTTP_OK, NULL, "no such endpoint");
  }
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
  return tb_api_reply_delete(r, tb_q_endpoints_delete, "no such endpoint");
}

enum MHD_Result
tb_api_endpoints_probe(struct tb_api_req *r)
{
  if (r->state != NULL) /* resumed: the pool has the answer */
    return tb_api_probe_reply(r);
  struct tb_q_endpoints_secret s;
  struct tb_db *db = tb_api_db_get(r);
  int rc = tb_q_endpoints_secret(db, r->id, r->project_id, &s);
  tb_api_db_put(r, db);
  enum MHD_Result ret;
  char *key = NULL;
  if (!tb_api_found(r, rc, "no such endpoint", &ret))
    goto fail;
  if (s.api_key_sealed != NULL) {
    if (!r->api->has_master_key) {
      ret = tb_api_reply_error(r, TB_EC_NO_MASTER_KEY, NULL, NULL);
      goto fail;
    }
    const char *why = NULL;
    key = tb_masterkey_open_endpoint_key(r->api->master_key, s.api_key_sealed, r->id,
                                         s.api_key_origin, s.base_url, &why);
    if (key == NULL) {
      ret = tb_api_reply_error(r, TB_EC_INTERNAL, why, NULL);
      goto fail;
    }
  }
  char *base = s.base_url;
  s.base_url = NULL;
  tb_q_endpoints_secret_clear(&s);
  return tb_api_probe_start(r, base, key);
fail:
  tb_q_endpoints_secret_clear(&s);
  return ret;
}

/* Re-seals one legacy key (tb_api_endpoints_reseal). */
struct reseal {
  struct tb_api *api;
  struct tb_db *db;
  int done;
};

static void
reseal_one(void *cls, const char *id, const char *base, const char *old)
{
  struct reseal *rs = cls;
  char *plain = tb_crypto_open(rs->api->master_key, old, id);
  if (plain == NULL)
    return; /* another master key's: left as it is */
  char *origin = NULL;
  char *sealed = tb_masterkey_seal_endpoint_key(rs->api->master_key, plain, id, base, &origin);
  OPENSSL_cleanse(plain, strlen(plain));
  free(plain);
  if (sealed != NULL && tb_q_endpoints_reseal(rs->db, id, sealed, origin, old) == 1)
    rs->done++;
  free(sealed);
  free(origin);
}

int
tb_api_endpoints_reseal(struct tb_api *api, struct tb_db *db)
{
  if (!api->has_master_key)
    return 0;
  struct reseal rs = { .api = api, .db = db };
  int n = tb_q_endpoints_legacy(db, reseal_one, &rs);
  if (rs.done > 0)
    tb_log(TB_LOG_INFO, "endpoint keys re-sealed to their origin", "count", TB_LI, (int64_t)rs.done,
           NULL);
  return n < 0 ? n : rs.done;
}
