/*
 * api_reply: the one place where replies are built (JSON bodies and RFC 9457
 * problem documents, with the common headers), and the small request
 * helpers every handler uses.
 */
#include <openssl/crypto.h>
#include <string.h>
#include <strings.h>

#include "api.h"
#include "base/tb_log.h"

const char *
tb_api_header(struct tb_api_req *r, const char *name)
{
  return MHD_lookup_connection_value(r->conn, MHD_HEADER_KIND, name);
}

const char *
tb_api_arg(struct tb_api_req *r, const char *name)
{
  return MHD_lookup_connection_value(r->conn, MHD_GET_ARGUMENT_KIND, name);
}

struct tb_db *
tb_api_db_get(struct tb_api_req *r)
{
  return tb_db_pool_get(r->api->pool);
}

void
tb_api_db_put(struct tb_api_req *r, struct tb_db *db)
{
  tb_db_pool_put(r->api->pool, db);
}

bool
tb_api_is_uuid(const char *s)
{
  if (s == NULL)
    return false;
  for (int i = 0; i < TB_API_ID_LEN; i++) {
    char c = s[i];
    if (i == 8 || i == 13 || i == 18 || i == 23) {
      if (c != '-')
        return false;
    } else if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F'))) {
      return false;
    }
  }
  return s[TB_API_ID_LEN] == '\0';
}

static bool
origin_allowed(const struct tb_api *api, const char *origin)
{
  if (api->cors_origins == NULL || origin == NULL)
    return false;
  for (char **o = api->cors_origins; *o != NULL; o++)
    if (strcmp(*o, origin) == 0)
      return true;
  return false;
}

void
tb_api_add_common_headers(struct tb_api_req *r, struct MHD_Response *resp)
{
  MHD_add_response_header(resp, "X-Request-Id", r->request_id);
  MHD_add_response_header(resp, "X-Content-Type-Options", "nosniff");
  if (r->api->cors_any || r->api->cors_origins != NULL) {
    const char *origin = tb_api_header(r, "Origin");
    if (r->api->cors_any) {
      MHD_add_response_header(resp, "Access-Control-Allow-Origin", "*");
    } else if (origin_allowed(r->api, origin)) {
      MHD_add_response_header(resp, "Access-Control-Allow-Origin", origin);
      MHD_add_response_header(resp, "Vary", "Origin");
    }
    MHD_add_response_header(resp, "Access-Control-Expose-Headers",
                            "Location, ETag, Retry-After, X-Request-Id, WWW-Authenticate");
  }
}

enum MHD_Result
tb_api_reply(struct tb_api_req *r, unsigned status, const char *ctype, const char *body, size_t len,
             const char *const *headers)
{
  struct MHD_Response *resp =
    MHD_create_response_from_buffer(len, (void *)body, MHD_RESPMEM_MUST_COPY);
  if (resp == NULL)
    return MHD_NO;
  if (ctype != NULL)
    MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, ctype);
  MHD_add_response_header(resp, "Cache-Control", "no-store");
  tb_api_add_common_headers(r, resp);
  for (size_t i = 0; headers != NULL && headers[i] != NULL; i += 2)
    if (headers[i + 1] != NULL)
      MHD_add_response_header(resp, headers[i], headers[i + 1]);
  r->status = status;
  r->replied = true;
  enum MHD_Result ret = MHD_queue_response(r->conn, status, resp);
  MHD_destroy_response(resp);
  return ret;
}

enum MHD_Result
tb_api_reply_text(struct tb_api_req *r, unsigned status, const char *json,
                  const char *const *headers)
{
  return tb_api_reply(r, status, "application/json", json, strlen(json), headers);
}

enum MHD_Result
tb_api_reply_at(struct tb_api_req *r, unsigned status, const char *json, const char *prefix,
                const char *id)
{
  char *loc = tb_xasprintf("%s%s", prefix, id);
  const char *h[] = { "Location", loc, NULL };
  enum MHD_Result ret = tb_api_reply_text(r, status, json, h);
  free(loc);
  return ret;
}

enum MHD_Result
tb_api_reply_secret(struct tb_api_req *r, json_t *o, const char *prefix, const char *const *secret)
{
  const char *id = json_string_value(json_object_get(o, "id"));
  char *loc = tb_xasprintf("%s%s", prefix, id != NULL ? id : "");
  const char *h[] = { "Location", loc, NULL };
  char *body = json_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER);
  for (size_t i = 0; secret[i] != NULL; i++) {
    json_t *v = json_object_get(o, secret[i]);
    const char *t = json_string_value(v);
    if (t != NULL) /* jansson's copy, then an empty string in its place */
      OPENSSL_cleanse((void *)t, strlen(t));
    json_string_setn(v, "", 0);
  }
  json_decref(o);
  enum MHD_Result ret = body != NULL ? tb_api_reply_text(r, MHD_HTTP_CREATED, body, h)
                                     : tb_api_reply_error(r, TB_EC_INTERNAL, NULL, NULL);
  if (body != NULL)
    OPENSSL_cleanse(body, strlen(body));
  free(body);
  free(loc);
  return ret;
}

enum MHD_Result
tb_api_reply_json(struct tb_api_req *r, unsigned status, json_t *v, const char *const *headers)
{
  char *body = v ? json_dumps(v, JSON_COMPACT | JSON_PRESERVE_ORDER) : NULL;
  json_decref(v);
  if (body == NULL)
    return tb_api_reply_error(r, TB_EC_INTERNAL, "cannot encode the reply", NULL);
  enum MHD_Result ret = tb_api_reply_text(r, status, body, headers);
  free(body);
  return ret;
}

enum MHD_Result
tb_api_reply_error(struct tb_api_req *r, enum tb_api_ec code, const char *detail, json_t *extra)
{
  const struct tb_api_error_def *d = tb_api_error_def(code);
  if (d->status == MHD_HTTP_NOT_MODIFIED) {
    json_decref(extra);
    return tb_api_reply(r, d->status, NULL, "", 0, NULL);
  }
  json_t *o = json_object();
  char *t = tb_xasprintf(TB_API_PROBLEM_BASE "%s", d->type);
  json_object_set_new(o, "type", json_string(t));
  free(t);
  json_object_set_new(o, "title", json_string(d->title));
  json_object_set_new(o, "status", json_integer(d->status));
  if (detail != NULL) {
    json_t *dj = json_string(detail);
    json_object_set_new(o, "detail", dj ? dj : json_string("(detail not UTF-8)"));
  }
  if (r->url != NULL) {
    json_t *inst = json_string(r->url);
    if (inst != NULL)
      json_object_set_new(o, "instance", inst);
  }
  json_object_set_new(o, "request_id", json_string(r->request_id));
  if (extra != NULL) {
    json_object_update(o, extra);
    json_decref(extra);
  }
  char *body = json_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER);
  json_decref(o);
  char retry[24];
  snprintf(retry, sizeof retry, "%d", r->retry_after_s > 0 ? r->retry_after_s : 1);
  const char *hdrs[8];
  size_t n = 0;
  if (d->status == MHD_HTTP_UNAUTHORIZED) {
    hdrs[n++] = "WWW-Authenticate";
    hdrs[n++] = "Bearer realm=\"tokbench\"";
  } else if (d->status == MHD_HTTP_METHOD_NOT_ALLOWED) {
    hdrs[n++] = "Allow";
    hdrs[n++] = r->allow;
  } else if (d->status == MHD_HTTP_TOO_MANY_REQUESTS || d->status == MHD_HTTP_SERVICE_UNAVAILABLE) {
    hdrs[n++] = "Retry-After";
    hdrs[n++] = retry;
  }
  hdrs[n] = NULL;
  enum MHD_Result ret;
  if (body == NULL) {
    ret = tb_api_reply(r, d->status, "application/problem+json", "{}", 2, hdrs);
  } else {
    ret = tb_api_reply(r, d->status, "application/problem+json", body, strlen(body), hdrs);
    free(body);
  }
  return ret;
}

enum MHD_Result
tb_api_reply_db(struct tb_api_req *r, int db_rc)
{
  if (db_rc == TB_DB_SOFT)
    return tb_api_reply_error(r, TB_EC_DB_UNAVAILABLE, "the database does not answer; retry", NULL);
  return tb_api_reply_error(r, TB_EC_INTERNAL, "database error", NULL);
}

json_t *
tb_api_body_json(struct tb_api_req *r, enum MHD_Result *ret)
{
  json_error_t e;
  json_t *v = json_loadb(r->body ? r->body : "", r->body_len, JSON_REJECT_DUPLICATES, &e);
  if (v == NULL) {
    char *d = tb_xasprintf("line %d, column %d: %s", e.line, e.column, e.text);
    *ret = tb_api_reply_error(r, TB_EC_BAD_JSON, d, NULL);
    free(d);
    return NULL;
  }
  if (!json_is_object(v)) {
    json_decref(v);
    *ret = tb_api_reply_error(r, TB_EC_BAD_JSON, "the body must be a JSON object", NULL);
    return NULL;
  }
  return v;
}

enum MHD_Result
tb_api_reply_spec_errors(struct tb_api_req *r, int rc, json_t *errors)
{
  const char *d = json_string_value(json_object_get(json_array_get(errors, 0), "detail"));
  if (rc == 1 /* TB_SPEC_BAD_JSON */) {
    char *dd = tb_xstrdup(d ? d : "not JSON");
    json_decref(errors);
    enum MHD_Result ret = tb_api_reply_error(r, TB_EC_BAD_JSON, dd, NULL);
    free(dd);
    return ret;
  }
  const char *f = json_string_value(json_object_get(json_array_get(errors, 0), "field"));
  char *detail = tb_xasprintf("%s: %s%s", f ? f : "?", d ? d : "invalid",
                              json_array_size(errors) > 1 ? " (and more, see errors)" : "");
  enum MHD_Result ret =
    tb_api_reply_error(r, TB_EC_INVALID, detail, json_pack("{s:o}", "errors", errors));
  free(detail);
  return ret;
}

bool
tb_api_found(struct tb_api_req *r, int rc, const char *not_found, enum MHD_Result *ret)
{
  if (rc > 0)
    return true;
  *ret = rc < 0 ? tb_api_reply_db(r, rc) : tb_api_reply_error(r, TB_EC_NOT_FOUND, not_found, NULL);
  return false;
}

enum MHD_Result
tb_api_reply_doc(struct tb_api_req *r, int rc, char *doc, unsigned status, const char *wrap,
                 const char *not_found)
{
  enum MHD_Result ret;
  if (!tb_api_found(r, rc > 0 && doc == NULL ? 0 : rc, not_found, &ret)) {
    free(doc);
    return ret;
  }
  if (wrap != NULL) {
    char *body = tb_xasprintf("{\"%s\":%s}", wrap, doc);
    ret = tb_api_reply_text(r, status, body, NULL);
    free(body);
  } else {
    ret = tb_api_reply_text(r, status, doc, NULL);
  }
  free(doc);
  return ret;
}

enum MHD_Result
tb_api_reply_deleted(struct tb_api_req *r, int rc, const char *not_found)
{
  enum MHD_Result ret;
  if (!tb_api_found(r, rc, not_found, &ret))
    return ret;
  return tb_api_reply(r, MHD_HTTP_NO_CONTENT, NULL, "", 0, NULL);
}

enum MHD_Result
tb_api_reply_list(struct tb_api_req *r, tb_api_list_fn q, const char *wrap)
{
  char *doc = NULL;
  struct tb_db *db = tb_api_db_get(r);
  int rc = q(db, r->project_id, &doc);
  tb_api_db_put(r, db);
  return tb_api_reply_doc(r, rc, doc, MHD_HTTP_OK, wrap, NULL);
}

enum MHD_Result
tb_api_reply_get(struct tb_api_req *r, tb_api_get_fn q, const char *not_found)
{
  char *doc = NULL;
  struct tb_db *db = tb_api_db_get(r);
  int rc = q(db, r->id, r->project_id, &doc);
  tb_api_db_put(r, db);
  return tb_api_reply_doc(r, rc, doc, MHD_HTTP_OK, NULL, not_found);
}

enum MHD_Result
tb_api_reply_delete(struct tb_api_req *r, tb_api_delete_fn q, const char *not_found)
{
  struct tb_db *db = tb_api_db_get(r);
  int rc = q(db, r->id, r->project_id);
  tb_api_db_put(r, db);
  return tb_api_reply_deleted(r, rc, not_found);
}

enum MHD_Result
tb_api_reply_secret_created(struct tb_api_req *r, json_t *doc, const char *loc)
{
  char *text = json_dumps(doc, JSON_COMPACT | JSON_PRESERVE_ORDER);
  json_t *js = json_object_get(doc, "secret");
  if (json_is_string(js))
    OPENSSL_cleanse((char *)json_string_value(js), json_string_length(js));
  json_decref(doc);
  if (text == NULL)
    return tb_api_reply_error(r, TB_EC_INTERNAL, "cannot encode the reply", NULL);
  const char *h[] = { "Location", loc, NULL };
  enum MHD_Result ret = tb_api_reply_text(r, MHD_HTTP_CREATED, text, h);
  OPENSSL_cleanse(text, strlen(text));
  free(text);
  return ret;
}

enum MHD_Result
tb_api_reply_invalid(struct tb_api_req *r, const char *field, const char *detail)
{
  char *d = tb_xasprintf("%s: %s", field, detail);
  enum MHD_Result ret = tb_api_reply_error(
    r, TB_EC_INVALID, d, json_pack("{s:[{s:s,s:s}]}", "errors", "field", field, "detail", detail));
  free(d);
  return ret;
}

bool
tb_api_only_members(struct tb_api_req *r, json_t *body, const char *const *allowed,
                    enum MHD_Result *ret)
{
  const char *k;
  json_t *v;
  json_object_foreach (body, k, v) {
    bool ok = false;
    for (size_t i = 0; allowed[i] != NULL && !ok; i++)
      ok = strcmp(allowed[i], k) == 0;
    if (!ok) {
      *ret = tb_api_reply_invalid(r, k, "unknown field");
      return false;
    }
  }
  return true;
}
