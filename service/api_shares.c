/*
 * api_shares: making, listing and revoking share links (see api_shares.h;
 * the page they open is api_sharepage.c).
 *
 * A share names what it shows by id, checked to be the caller's project's
 * in the insert itself (q_shares.c): a job or an endpoint of the path that
 * is not the project's is 404 "no such job" / "no such endpoint", as on
 * every other route; a comparison's base or head that is not is 422
 * naming the field, as POST /v1/jobs names endpoint_id.  The token is 32
 * bytes of the CSPRNG (tb_crypto) in base64url, stored only as the SHA-256
 * of its text (as API keys are, lib/db/tb_auth), returned once in the 201
 * and wiped from every copy this process made.
 */
#include "api_shares.h"

#include <openssl/crypto.h>
#include <string.h>

#include "api_ci.h"
#include "api_compare.h"
#include "api_handlers.h"
#include "api_jobs.h"
#include "api_quota.h"
#include "api_report.h"
#include "api_series.h"
#include "base/tb_crypto.h"
#include "base/tb_tz.h"
#include "q_shares.h"

#define PRIVATE_LABELS_MAX 16
#define LABEL_KEY_MAX 64

bool
tb_api_shares_config(struct tb_api *api, char **err)
{
  int64_t rate, burst, ttl, max, limit;
  if (!tb_cfg_get_int(api->cfg, "TOKBENCH_LIMIT_SHARES", 0, 100000000, &limit, err) ||
      !tb_cfg_get_int(api->cfg, "TOKBENCH_SHARE_RATE", 0, 1000000, &rate, err) ||
      !tb_cfg_get_int(api->cfg, "TOKBENCH_SHARE_BURST", 1, 10000000, &burst, err) ||
      !tb_cfg_get_int(api->cfg, "TOKBENCH_SHARE_TTL_S", 0, INT32_MAX, &ttl, err) ||
      !tb_cfg_get_int(api->cfg, "TOKBENCH_SHARE_MAX_TTL_S", 1, INT32_MAX, &max, err))
    return false;
  if (ttl > max) {
    *err = tb_xstrdup("TOKBENCH_SHARE_TTL_S is longer than TOKBENCH_SHARE_MAX_TTL_S");
    return false;
  }
  struct tb_api_shares *s = tb_xcalloc(1, sizeof *s);
  s->rate = tb_api_quota_new((double)rate, (double)burst);
  s->rate_per_s = (double)rate;
  s->ttl_s = ttl;
  s->max_ttl_s = max;
  s->limit = limit;
  api->shares = s;
  return true;
}

void
tb_api_shares_free(struct tb_api_shares *s)
{
  if (s == NULL)
    return;
  tb_api_quota_free(s->rate);
  free(s);
}

bool
tb_api_share_token_ok(const char *s, size_t n)
{
  if (n != TB_API_SHARE_TOKEN_LEN)
    return false;
  for (size_t i = 0; i < n; i++) {
    char c = s[i];
    if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' ||
          c == '_'))
      return false;
  }
  return true;
}

/* A new token (caller wipes and frees), or NULL when the RNG fails. */
static char *
new_token(void)
{
  unsigned char raw[TB_API_SHARE_TOKEN_BYTES];
  if (!tb_crypto_random(raw, sizeof raw))
    return NULL;
  char *t = tb_base64_encode(raw, sizeof raw);
  OPENSSL_cleanse(raw, sizeof raw);
  size_t n = 0;
  for (char *p = t; *p && *p != '='; p++, n++) /* base64url, no padding */
    *p = *p == '+' ? '-' : *p == '/' ? '_' : *p;
  t[n] = '\0';
  return t;
}

/* --------------------------------------------------------------- expiry */

/* The share's life from the body: expires_in_s (seconds) or expires_at
 * (RFC 3339, in the future), at most TOKBENCH_SHARE_MAX_TTL_S; neither:
 * TOKBENCH_SHARE_TTL_S (0: never).  True with *secs (0: never), else false
 * with a 422 naming the field queued into *ret. */
static bool
share_life(struct tb_api_req *r, const json_t *body, int64_t *secs, enum MHD_Result *ret)
{
  const struct tb_api_shares *cfg = r->api->shares;
  const json_t *in = json_object_get(body, "expires_in_s"),
               *at = json_object_get(body, "expires_at");
  char d[160];
  if (in != NULL && at != NULL) {
    *ret = tb_api_reply_invalid(r, "expires_at", "give expires_in_s or expires_at, not both");
    return false;
  }
  *secs = cfg->ttl_s;
  if (in != NULL) {
    if (!json_is_integer(in) || json_integer_value(in) < 1 ||
        json_integer_value(in) > cfg->max_ttl_s) {
      snprintf(d, sizeof d, "an integer of seconds from 1 to %lld (TOKBENCH_SHARE_MAX_TTL_S)",
               (long long)cfg->max_ttl_s);
      *ret = tb_api_reply_invalid(r, "expires_in_s", d);
      return false;
    }
    *secs = (int64_t)json_integer_value(in);
  } else if (at != NULL) {
    int64_t t = 0, now = tb_time_real_us() / 1000000;
    if (!json_is_string(at) || !tb_tz_parse_rfc3339(json_string_value(at), &t)) {
      *ret = tb_api_reply_invalid(r, "expires_at",
                                  "an RFC 3339 date-time, e.g. "
                                  "2026-07-01T12:00:00Z");
      return false;
    }
    if (t <= now || t - now > cfg->max_ttl_s) {
      snprintf(d, sizeof d,
               "a time in the future, at most %lld s from now "
               "(TOKBENCH_SHARE_MAX_TTL_S)",
               (long long)cfg->max_ttl_s);
      *ret = tb_api_reply_invalid(r, "expires_at", d);
      return false;
    }
    *secs = t - now;
  }
  return true;
}

/* private_labels: at most PRIVATE_LABELS_MAX label keys.  True, else a
 * 422 naming the field. */
static bool
private_labels_ok(struct tb_api_req *r, const json_t *v, enum MHD_Result *ret)
{
  bool ok = v == NULL || (json_is_array(v) && json_array_size(v) <= PRIVATE_LABELS_MAX);
  size_t i;
  const json_t *k;
  json_array_foreach (v, i, k)
    ok = ok && json_is_string(k) &&
         tb_api_segment_ok(json_string_value(k), json_string_length(k), LABEL_KEY_MAX) &&
         strchr(json_string_value(k), '~') == NULL;
  if (!ok)
    *ret = tb_api_reply_invalid(r, "private_labels",
                                "an array of at most 16 label keys (1 to 64 of [A-Za-z0-9._-])");
  return ok;
}

/* -------------------------------------------------------------- create */

/* What a new share names (borrowed; NULL: none). */
struct share_what {
  const char *kind, *job_id, *base_job_id, *endpoint_id;
  const json_t *params;  /* the view's settings */
  const char *not_found; /* the 404 detail when a path id is not the project's */
};

/* The body of a POST .../shares: {} when empty, else a JSON object of
 * allowed members only (new), or NULL with a reply queued. */
static json_t *
share_body(struct tb_api_req *r, const char *const *allowed, enum MHD_Result *ret)
{
  if (r->body_len == 0)
    return json_object();
  json_t *body = tb_api_body_json(r, ret);
  if (body != NULL && !tb_api_only_members(r, body, allowed, ret)) {
    json_decref(body);
    return NULL;
  }
  return body;
}

/* 201 with the share's document doc (a JSON text) and its url and token
 * (wiped from every copy made here). */
static enum MHD_Result
reply_made(struct tb_api_req *r, const char *doc, const char *token)
{
  json_t *o = json_loads(doc, 0, NULL);
  if (o == NULL)
    return tb_api_reply_error(r, TB_EC_INTERNAL, "cannot read the new share", NULL);
  char *url = tb_xasprintf("%s/s/%s", tb_api_ci_public_url(r->api), token);
  json_object_set_new(o, "url", json_string(url));
  json_object_set_new(o, "token", json_string(token));
  static const char *const secret[] = { "token", "url", NULL };
  enum MHD_Result ret = tb_api_reply_secret(r, o, "/v1/shares/", secret);
  OPENSSL_cleanse(url, strlen(url));
  free(url);
  return ret;
}

/* True when the project may make one more share (TOKBENCH_LIMIT_SHARES:
 * counted before the insert, so racing requests may pass it by a few);
 * else false with 429 limit-reached queued. */
static bool
share_room(struct tb_api_req *r, enum MHD_Result *ret)
{
  int64_t max = r->api->shares->limit, n = 0;
  if (max == 0)
    return true;
  struct tb_db *db = tb_api_db_get(r);
  int rc = tb_q_shares_live(db, r->project_id, &n);
  tb_api_db_put(r, db);
  if (rc < 0) {
    *ret = tb_api_reply_db(r, rc);
    return false;
  }
  if (n < max)
    return true;
  char d[200];
  snprintf(d, sizeof d,
           "this project holds %lld live share links, the most allowed "
           "(TOKBENCH_LIMIT_SHARES=%lld): revoke one first",
           (long long)n, (long long)max);
  r->retry_after_s = TB_API_LIMIT_RETRY_S;
  *ret = tb_api_reply_error(r, TB_EC_LIMIT_REACHED, d,
                            json_pack("{s:s,s:s,s:I}", "limit", "share_links", "setting",
                                      "TOKBENCH_LIMIT_SHARES", "max", (json_int_t)max));
  return false;
}

/* Makes the share of w with the body's life and private labels. */
static enum MHD_Result
share_create(struct tb_api_req *r, const struct share_what *w, const json_t *body)
{
  enum MHD_Result ret;
  int64_t secs = 0;
  const json_t *priv = json_object_get(body, "private_labels");
  if (!share_life(r, body, &secs, &ret) || !private_labels_ok(r, priv, &ret) ||
      !share_room(r, &ret))
    return ret;
  char *token = new_token();
  if (token == NULL)
    return tb_api_reply_error(r, TB_EC_INTERNAL, "the random number generator failed", NULL);
  char hash[65], life[24];
  tb_crypto_sha256_hex(token, strlen(token), hash);
  snprintf(life, sizeof life, "%lld", (long long)secs);
  char *params = w->params != NULL ? json_dumps(w->params, JSON_COMPACT | JSON_SORT_KEYS) : NULL;
  char *ptxt = priv != NULL ? json_dumps(priv, JSON_COMPACT) : NULL;
  const struct tb_q_shares_new n = { .project_id = r->project_id,
                                     .kind = w->kind,
                                     .job_id = w->job_id,
                                     .base_job_id = w->base_job_id,
                                     .endpoint_id = w->endpoint_id,
                                     .params = params,
                                     .private_labels = ptxt,
                                     .token_hash = hash,
                                     .created_by = r->key_id,
                                     .expires_in_s = secs > 0 ? life : NULL };
  char *doc = NULL;
  struct tb_db *db = tb_api_db_get(r);
  int rc = tb_q_shares_insert(db, &n, &doc);
  tb_api_db_put(r, db);
  if (rc < 0)
    ret = tb_api_reply_db(r, rc);
  else if (rc == 0)
    ret = tb_api_reply_error(r, TB_EC_NOT_FOUND, w->not_found, NULL);
  else if (doc == NULL)
    ret = tb_api_reply_error(r, TB_EC_INTERNAL, NULL, NULL);
  else
    ret = reply_made(r, doc, token);
  OPENSSL_cleanse(token, strlen(token));
  free(token);
  free(doc);
  free(ptxt);
  free(params);
  return ret;
}

enum MHD_Result
tb_api_shares_job(struct tb_api_req *r)
{
  static const char *const allowed[] = { "expires_in_s", "expires_at", "private_labels", NULL };
  enum MHD_Result ret;
  json_t *body = share_body(r, allowed, &ret);
  if (body == NULL)
    return ret;
  const struct share_what w = { .kind = "job", .job_id = r->id, .not_found = "no such job" };
  ret = share_create(r, &w, body);
  json_decref(body);
  return ret;
}

/* A comparison's side: a job id of the project, else a 422 naming it. */
static bool
compare_side(struct tb_api_req *r, const json_t *body, const char *field, enum MHD_Result *ret)
{
  const char *id = json_string_value(json_object_get(body, field));
  if (id == NULL || !tb_api_is_uuid(id)) {
    *ret = tb_api_reply_invalid(r, field, "required, a job id (UUID)");
    return false;
  }
  struct tb_db *db = tb_api_db_get(r);
  int rc = tb_q_shares_job_owned(db, id, r->project_id);
  tb_api_db_put(r, db);
  if (rc < 0)
    *ret = tb_api_reply_db(r, rc);
  else if (rc == 0)
    *ret = tb_api_reply_invalid(r, field, "no such job in this project");
  return rc > 0;
}

enum MHD_Result
tb_api_shares_compare(struct tb_api_req *r)
{
  static const char *const allowed[] = {
    "base", "head", "tolerance", "expires_in_s", "expires_at", "private_labels", NULL
  };
  enum MHD_Result ret;
  json_t *body = share_body(r, allowed, &ret), *params = NULL;
  if (body == NULL)
    return ret;
  if (!compare_side(r, body, "base", &ret) || !compare_side(r, body, "head", &ret))
    goto out;
  const json_t *tol = json_object_get(body, "tolerance");
  if (tol != NULL &&
      !(json_is_number(tol) && json_number_value(tol) >= 0 && json_number_value(tol) < 100)) {
    ret = tb_api_reply_invalid(r, "tolerance", "a percentage in [0, 100)");
    goto out;
  }
  params = json_object();
  if (tol != NULL)
    json_object_set_new(params, "tolerance", json_real(json_number_value(tol)));
  const struct share_what w = { .kind = "compare",
                                .job_id = json_string_value(json_object_get(body, "head")),
                                .base_job_id = json_string_value(json_object_get(body, "base")),
                                .params = params,
                                .not_found = "no such job" };
  ret = share_create(r, &w, body);
out:
  json_decref(params);
  json_decref(body);
  return ret;
}

/* An endpoint share's cell: context (tokens, or "8k") and concurrency
 * (default 1), as GET /v1/series takes them; *ctx stays 0 without a
 * context (the matrix's series).  False with a 422 naming the field. */
static bool
series_cell(struct tb_api_req *r, const json_t *body, int64_t *ctx, int64_t *conc,
            enum MHD_Result *ret)
{
  const json_t *c = json_object_get(body, "context"), *k = json_object_get(body, "concurrency");
  if (c == NULL && k != NULL) {
    *ret = tb_api_reply_invalid(r, "concurrency", "only with a context");
    return false;
  }
  if (c == NULL)
    return true;
  bool ok = json_is_integer(c) ? (*ctx = (int64_t)json_integer_value(c)) > 0
                               : json_is_string(c) && tb_parse_tokens(json_string_value(c), ctx);
  if (!ok || *ctx <= 0 || *ctx > ((int64_t)1 << 40)) {
    *ret = tb_api_reply_invalid(r, "context", "a token count (e.g. 8192 or \"8k\")");
    return false;
  }
  if (k != NULL &&
      !(json_is_integer(k) && json_integer_value(k) >= 1 && json_integer_value(k) <= (1 << 20))) {
    *ret = tb_api_reply_invalid(r, "concurrency", "a positive integer");
    return false;
  }
  if (k != NULL)
    *conc = (int64_t)json_integer_value(k);
  return true;
}

enum MHD_Result
tb_api_shares_endpoint(struct tb_api_req *r)
{
  static const char *const allowed[] = { "labels",     "phase",          "metric",
                                         "context",    "concurrency",    "expires_in_s",
                                         "expires_at", "private_labels", NULL };
  enum MHD_Result ret;
  json_t *body = share_body(r, allowed, &ret), *params = NULL;
  if (body == NULL)
    return ret;
  const json_t *labels = json_object_get(body, "labels"), *metric = json_object_get(body, "metric");
  const char *phase = json_string_value(json_object_get(body, "phase"));
  if (labels != NULL && !tb_api_labels_ok(labels)) {
    ret = tb_api_reply_invalid(r, "labels", "an object of at most 16 string values");
    goto out;
  }
  if (json_object_get(body, "phase") != NULL &&
      (phase == NULL || (strcmp(phase, "decode") != 0 && strcmp(phase, "prefill") != 0))) {
    ret = tb_api_reply_invalid(r, "phase", "decode or prefill");
    goto out;
  }
  if (phase == NULL)
    phase = "decode";
  const struct tb_compare_metric *m = tb_api_series_metric(phase, json_string_value(metric));
  if (m == NULL || (metric != NULL && !json_is_string(metric))) {
    ret = tb_api_reply_invalid(r, "metric", TB_API_SERIES_METRICS);
    goto out;
  }
  int64_t ctx = 0, conc = 1;
  if (!series_cell(r, body, &ctx, &conc, &ret))
    goto out;
  params = json_pack("{s:o, s:s, s:s}", "labels", labels ? json_deep_copy(labels) : json_object(),
                     "phase", phase, "metric", m->name);
  if (ctx > 0) {
    json_object_set_new(params, "context", json_integer(ctx));
    json_object_set_new(params, "concurrency", json_integer(conc));
  }
  const struct share_what w = {
    .kind = "endpoint", .endpoint_id = r->id, .params = params, .not_found = "no such endpoint"
  };
  ret = share_create(r, &w, body);
out:
  json_decref(params);
  json_decref(body);
  return ret;
}

/* -------------------------------------------------------- list, revoke */

enum MHD_Result
tb_api_shares_list(struct tb_api_req *r)
{
  return tb_api_reply_list(r, tb_q_shares_list, "shares");
}

enum MHD_Result
tb_api_shares_revoke(struct tb_api_req *r)
{
  return tb_api_reply_delete(r, tb_q_shares_revoke, "no such share");
}
