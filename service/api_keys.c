/*
 * api_keys: /v1/keys, API keys of the caller's project (admin scope).
 *   POST   /v1/keys        {name?, scopes?, expires_in?} -> 201, the key once
 *   GET    /v1/keys        the project's keys (no hashes, no keys)
 *   DELETE /v1/keys/{id}   revoke (NOTIFY tb_keys_changed: every api process
 *                          forgets its cached copy at once)
 *
 * A key made here is the child of the key that asked (issue 13): its
 * scopes are within the parent's (403 otherwise), it expires no later than
 * the parent (an expiry asked beyond it, or none, is the parent's), and
 * revoking the parent revokes it (tb_auth.h).  A project holds at most
 * TOKBENCH_LIMIT_KEYS live keys (issue 27; 429 limit-reached above).  The list's statement:
 * service/q_keys.c; making and revoking keys: lib/db/tb_auth.c.
 */
#include <openssl/crypto.h>
#include <string.h>

#include "api_auth.h"
#include "api_handlers.h"
#include "api_jobs.h"
#include "api_spec.h"
#include "q_keys.h"

/* 429 limit-reached: the project holds TOKBENCH_LIMIT_KEYS live keys. */
static enum MHD_Result
keys_full(struct tb_api_req *r)
{
  char d[160];
  long long max = (long long)r->api->limit_keys;
  snprintf(d, sizeof d,
           "this project holds %lld live API keys, the most allowed (TOKBENCH_LIMIT_KEYS=%lld): "
           "revoke one first",
           max, max);
  r->retry_after_s = TB_API_LIMIT_RETRY_S;
  return tb_api_reply_error(r, TB_EC_LIMIT_REACHED, d,
                            json_pack("{s:s,s:s,s:I}", "limit", "api_keys", "setting",
                                      "TOKBENCH_LIMIT_KEYS", "max", (json_int_t)max));
}

enum MHD_Result
tb_api_keys_create(struct tb_api_req *r)
{
  json_t *spec = NULL, *errors = NULL;
  enum tb_spec_rc src = tb_api_spec_key(r->body ? r->body : "", r->body_len, &spec, &errors);
  if (src != TB_SPEC_OK)
    return tb_api_reply_spec_errors(r, src, errors);
  unsigned mask = TB_SCOPE_READ | TB_SCOPE_WRITE;
  if (json_object_get(spec, "scopes") != NULL)
    mask = (unsigned)json_integer_value(json_object_get(spec, "scopes"));
  int64_t exp = json_integer_value(json_object_get(spec, "expires_in"));
  const char *name = json_string_value(json_object_get(spec, "name"));
  if ((tb_scope_effective(mask) & ~r->scopes) != 0) {
    json_decref(spec);
    return tb_api_reply_error(r, TB_EC_FORBIDDEN,
                              "a key cannot make a key with a scope it does not hold", NULL);
  }
  char *key = NULL, *doc = NULL;
  struct tb_db *db = tb_api_db_get(r);
  int rc = tb_auth_key_create_capped(db, r->project_id, r->key_id, name ? name : "", mask, exp,
                                     r->api->limit_keys, &key, &doc);
  tb_api_db_put(r, db);
  json_decref(spec);
  if (rc == TB_AUTH_KEYS_FULL)
    return keys_full(r);
  if (rc == 0) /* revoked or expired since it was checked */
    return tb_api_reply_error(r, TB_EC_KEY_REVOKED, "this API key is no longer valid", NULL);
  if (rc != 1)
    return tb_api_reply_db(r, rc);
  json_t *o = json_loads(doc, 0, NULL);
  free(doc);
  enum MHD_Result ret;
  if (o == NULL) {
    ret = tb_api_reply_error(r, TB_EC_INTERNAL, NULL, NULL);
  } else {
    json_object_set_new(o, "key", json_string(key));
    static const char *const secret[] = { "key", NULL };
    ret = tb_api_reply_secret(r, o, "/v1/keys/", secret);
  }
  OPENSSL_cleanse(key, strlen(key));
  free(key);
  return ret;
}

enum MHD_Result
tb_api_keys_list(struct tb_api_req *r)
{
  return tb_api_reply_list(r, tb_q_keys_list, "keys");
}

enum MHD_Result
tb_api_keys_revoke(struct tb_api_req *r)
{
  char *doc = NULL;
  struct tb_db *db = tb_api_db_get(r);
  int rc = tb_auth_key_revoke(db, r->id, r->project_id, &doc);
  tb_api_db_put(r, db);
  if (rc < 0)
    return tb_api_reply_db(r, rc);
  if (rc == 0)
    return tb_api_reply_error(r, TB_EC_NOT_FOUND, "no such key", NULL);
  tb_api_keycache_flush(r->api->keys);
  enum MHD_Result ret = tb_api_reply_text(r, MHD_HTTP_OK, doc, NULL);
  free(doc);
  return ret;
}
