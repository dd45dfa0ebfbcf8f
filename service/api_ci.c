/*
 * api_ci: see api_ci.h.
 */
#include "api_ci.h"

#include <openssl/crypto.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api_jobs.h"
#include "api_spec.h"
#include "tb_crypto.h"

bool
tb_api_ci_uuid(char out[TB_API_ID_LEN + 1])
{
  unsigned char b[16];
  char hex[33];
  if (!tb_crypto_random(b, sizeof b))
    return false;
  b[6] = (unsigned char)((b[6] & 0x0f) | 0x40);
  b[8] = (unsigned char)((b[8] & 0x3f) | 0x80);
  tb_hex_encode(b, sizeof b, hex);
  snprintf(out, TB_API_ID_LEN + 1, "%.8s-%.4s-%.4s-%.4s-%.12s", hex, hex + 8, hex + 12,
           hex + 16, hex + 20);
  return true;
}

bool
tb_api_ci_new_secret(struct tb_api_req *r, char *(*make)(void), const char *no_master_key,
                     char id[TB_API_ID_LEN + 1], char **secret, char **sealed,
                     enum MHD_Result *ret)
{
  if (!r->api->has_master_key) {
    *ret = tb_api_reply_error(r, TB_EC_NO_MASTER_KEY, no_master_key, NULL);
    return false;
  }
  if (!tb_api_ci_uuid(id) || (*secret = make()) == NULL ||
      (*sealed = tb_crypto_seal(r->api->master_key, *secret, id)) == NULL) {
    *ret = tb_api_reply_error(r, TB_EC_INTERNAL, "cannot make a secret", NULL);
    return false;
  }
  return true;
}

void
tb_api_ci_secret_free(char *secret, char *sealed)
{
  if (secret != NULL) {
    OPENSSL_cleanse(secret, strlen(secret));
    free(secret);
  }
  free(sealed);
}

enum MHD_Result
tb_api_ci_reply_created(struct tb_api_req *r, const char *doc_text, const char *id,
                        const char *secret, const char *base, bool with_url)
{
  json_error_t jerr;
  json_t *doc = json_loads(doc_text != NULL ? doc_text : "", 0, &jerr);
  if (doc == NULL)
    return tb_api_reply_error(r, TB_EC_INTERNAL, "cannot read the new document", NULL);
  char *loc = tb_xasprintf("%s%s", base, id);
  if (with_url) {
    char *url = tb_xasprintf("%s%s", tb_api_ci_public_url(r->api), loc);
    json_object_set_new(doc, "url", json_string(url));
    free(url);
  }
  json_object_set_new(doc, "secret", json_string(secret));
  enum MHD_Result ret = tb_api_reply_secret_created(r, doc, loc);
  free(loc);
  return ret;
}

const char *
tb_api_ci_public_url(struct tb_api *api)
{
  static __thread char buf[128];
  const char *u = tb_cfg_get(api->cfg, "TOKBENCH_PUBLIC_URL");
  if (u != NULL && u[0] != '\0')
    return u;
  snprintf(buf, sizeof buf, "http://%s:%s", tb_cfg_get(api->cfg, "TOKBENCH_LISTEN_HOST"),
           tb_cfg_get(api->cfg, "TOKBENCH_LISTEN_PORT"));
  return buf;
}

int
tb_api_ci_start_job(struct tb_db *db, const struct tb_tenancy *ten, const char *project_id,
                    const char *request_id, const json_t *preset_spec,
                    const json_t *extra_labels, char job_id[TB_API_ID_LEN + 1], char **doc,
                    json_t **errors, struct tb_tenancy_refusal *why)
{
  /* the members a preset's job may set over the preset: tb_spec's table */
  json_t *extra = json_pack("{s:O?}", "labels", (json_t *)extra_labels);
  json_t *merged = tb_spec_override(preset_spec, extra), *spec = NULL;
  char *text = NULL;
  int rc;
  *errors = NULL;
  json_decref(extra);
  text = json_dumps(merged, JSON_COMPACT);
  if (text == NULL || tb_spec_job(text, strlen(text), &spec, errors) != TB_SPEC_OK) {
    if (*errors == NULL)
      *errors = json_array();
    rc = 2;
    goto out;
  }
  rc = tb_api_job_insert(db, ten, project_id, request_id, spec, job_id, doc, why);
out:
  free(text);
  json_decref(spec);
  json_decref(merged);
  return rc;
}
