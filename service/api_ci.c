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
#include "api_traces.h"
#include "base/tb_crypto.h"

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
  snprintf(out, TB_API_ID_LEN + 1, "%.8s-%.4s-%.4s-%.4s-%.12s", hex, hex + 8, hex + 12, hex + 16,
           hex + 20);
  return true;
}

bool
tb_api_ci_new_secret(struct tb_api_req *r, char *(*make)(void), const char *no_master_key,
                     char id[TB_API_ID_LEN + 1], char **secret, char **sealed, enum MHD_Result *ret)
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

bool
tb_api_ci_new_body(struct tb_api_req *r, const char *const *allowed, struct tb_api_ci_new *n,
                   enum MHD_Result *ret)
{
  n->body = tb_api_body_json(r, ret);
  return n->body != NULL && tb_api_only_members(r, n->body, allowed, ret);
}

bool
tb_api_ci_new_events(struct tb_api_req *r, struct tb_api_ci_new *n, const char *def, size_t min,
                     size_t max, bool (*name_ok)(const char *), const char *bad_array,
                     const char *bad_name, enum MHD_Result *ret)
{
  json_t *events = json_object_get(n->body, "events"), *e;
  size_t i;
  if (events == NULL) {
    n->events = tb_xstrdup(def);
    return true;
  }
  if (!json_is_array(events) || json_array_size(events) < min || json_array_size(events) > max) {
    *ret = tb_api_reply_invalid(r, "events", bad_array);
    return false;
  }
  json_array_foreach (events, i, e) {
    if (!json_is_string(e) || !name_ok(json_string_value(e))) {
      *ret = tb_api_reply_invalid(r, "events", bad_name);
      return false;
    }
  }
  n->events = json_dumps(events, JSON_COMPACT);
  return true;
}

void
tb_api_ci_new_clear(struct tb_api_ci_new *n)
{
  if (n->secret != NULL)
    OPENSSL_cleanse(n->secret, strlen(n->secret));
  free(n->secret);
  free(n->sealed);
  free(n->events);
  free(n->doc);
  json_decref(n->body);
  memset(n, 0, sizeof *n);
}

enum MHD_Result
tb_api_ci_reply_created(struct tb_api_req *r, const struct tb_api_ci_new *n, const char *base,
                        bool with_url)
{
  json_error_t jerr;
  json_t *doc = json_loads(n->doc != NULL ? n->doc : "", 0, &jerr);
  if (doc == NULL)
    return tb_api_reply_error(r, TB_EC_INTERNAL, "cannot read the new document", NULL);
  char *loc = tb_xasprintf("%s%s", base, n->id);
  if (with_url) {
    char *url = tb_xasprintf("%s%s", tb_api_ci_public_url(r->api), loc);
    json_object_set_new(doc, "url", json_string(url));
    free(url);
  }
  json_object_set_new(doc, "secret", json_string(n->secret));
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
                    const char *request_id, const json_t *preset_spec, const json_t *extra_labels,
                    char job_id[TB_API_ID_LEN + 1], char **doc, json_t **errors,
                    struct tb_tenancy_refusal *why)
{
  /* the members a preset's job may set over the preset: tb_spec's table */
  json_t *extra = json_object(); /* no labels given: the preset's stand */
  if (extra_labels != NULL)
    json_object_set(extra, "labels", (json_t *)extra_labels);
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
  /* issue 25: the uploaded trace it names, checked with the insert (2: bad) */
  rc = tb_api_traces_job_insert(db, ten, project_id, request_id, spec, job_id, doc, errors, why);
out:
  free(text);
  json_decref(spec);
  json_decref(merged);
  return rc;
}
