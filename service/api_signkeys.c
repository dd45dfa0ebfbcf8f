/*
 * api_signkeys: see api_signkeys.h.  The statements are lib/db/tb_signkeys'
 * (the CLI runs them too).
 */
#include "api_signkeys.h"

#include <stdlib.h>

#include "api_handlers.h"
#include "base/tb_log.h"
#include "base/tb_sign.h"
#include "db/tb_signkeys.h"

bool
tb_api_signkeys_load(struct tb_api *api, char **err)
{
  const char *path = tb_cfg_get(api->cfg, "TOKBENCH_SIGNING_KEY_FILE");
  *err = NULL;
  if (path == NULL || path[0] == '\0') {
    tb_log(TB_LOG_WARN, "no signing key (TOKBENCH_SIGNING_KEY_FILE): results are not signed", NULL);
    return true;
  }
  api->sign_key = tb_sign_key_load(path, err);
  return api->sign_key != NULL;
}

bool
tb_api_signkeys_record(struct tb_api *api, struct tb_db *db)
{
  if (api->sign_key == NULL)
    return true;
  bool revoked = false;
  if (tb_signkeys_record(db, tb_sign_key_pub(api->sign_key), &revoked) < 0) {
    tb_log(TB_LOG_ERROR, "cannot record the signing key", NULL);
    return false;
  }
  tb_log(revoked ? TB_LOG_WARN : TB_LOG_INFO,
         revoked ? "the signing key is revoked: results are not signed" : "signing results", "kid",
         TB_LS, tb_sign_key_id(api->sign_key), NULL);
  return true;
}

/* 1: the api's key may sign (its row there and not revoked), 0: revoked,
 * < 0: a database error. */
static int
key_usable(struct tb_api_req *r, const struct tb_sign_key *k)
{
  bool revoked = false;
  struct tb_db *db = tb_api_db_get(r);
  int rc = tb_signkeys_revoked(db, tb_sign_key_id(k), &revoked);
  if (rc == 0) /* the row is gone (a restored database): record it again */
    rc = tb_signkeys_record(db, tb_sign_key_pub(k), &revoked);
  tb_api_db_put(r, db);
  return rc < 0 ? rc : !revoked;
}

bool
tb_api_signkeys_usable(struct tb_api_req *r)
{
  return r->api->sign_key == NULL || key_usable(r, r->api->sign_key) == 1;
}

void
tb_api_signkeys_sign(struct tb_api_req *r, json_t *doc)
{
  const struct tb_sign_key *k = r->api->sign_key;
  if (k == NULL || !json_is_object(doc))
    return;
  int rc = key_usable(r, k);
  bool revoked = rc == 0;
  char *err = NULL;
  if (rc <= 0) {
    /* unsigned rather than signed by a key no reader may trust */
    json_object_del(doc, "signature");
    tb_log(TB_LOG_WARN,
           revoked ? "the signing key is revoked: a result goes unsigned"
                   : "cannot check the signing key: a result goes unsigned",
           "kid", TB_LS, tb_sign_key_id(k), "request_id", TB_LS, r->request_id, NULL);
    return;
  }
  if (!tb_sign_doc(k, doc, tb_time_real_us(), &err)) {
    tb_log(TB_LOG_WARN, "cannot sign a result", "error", TB_LS, err, "request_id", TB_LS,
           r->request_id, NULL);
    free(err);
  }
}

void
tb_api_signkeys_free(struct tb_api *api)
{
  tb_sign_key_free(api->sign_key);
  api->sign_key = NULL;
}

/* GET /v1/signing-keys: the JWK set (RFC 7517) of every key, revoked ones
 * with revoked_at. */
enum MHD_Result
tb_api_signing_keys(struct tb_api_req *r)
{
  json_t *jwks = NULL;
  struct tb_db *db = tb_api_db_get(r);
  int rc = tb_signkeys_jwks(db, &jwks);
  tb_api_db_put(r, db);
  if (rc < 0)
    return tb_api_reply_db(r, rc);
  return tb_api_reply_json(r, MHD_HTTP_OK, jwks, NULL);
}
