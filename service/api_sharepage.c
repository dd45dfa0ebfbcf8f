/*
 * api_sharepage: GET /s/{token}, the page a share link opens, with no API
 * key (api_shares.h).
 *
 * The path is the token, or the token and a format's extension
 * (/s/TOKEN.md, .csv, .json, .html); without one the format is ?format=,
 * else Accept, else HTML (api_report.h).  The token's SHA-256 finds the
 * share (q_shares.c): none, a malformed token or a revoked share is 404,
 * an expired one 410, never the page; a share over its rate
 * (TOKBENCH_SHARE_RATE per second per link, TOKBENCH_SHARE_BURST at once,
 * the buckets of api_quota.h keyed by the share's id) is 429.
 *
 * The document is the one the owner's routes show, read the same way on
 * the share's project (api_result.c, api_compare.c, api_series.c), then
 * stripped by lib/result/tb_sharedoc of all but what it shares (the
 * endpoints' URLs and keys, read here and hidden, the project's ids, other
 * jobs, private labels), then rendered by the report's own renderer
 * (tb_report, tb_cmpreport, tb_seriesview) and given its meta tags and
 * signature line by lib/render/tb_sharepage.  A document that was signed
 * (a finished job's, a comparison's) is signed again once stripped, in its
 * JSON form only (the other formats' line names the original's key), by
 * the key it is served with (api_signkeys.h): the copy's JSON, its "shared"
 * block with the original's signature included, passes `tokbench verify`
 * against GET /v1/signing-keys.  The page runs no script
 * (the report's Content-Security-Policy) and sends no Referer (its URL
 * holds the token); the token is never logged (main.c logs /s/(token)).
 */
#include <openssl/crypto.h>
#include <string.h>

#include "api_compare.h"
#include "api_handlers.h"
#include "api_quota.h"
#include "api_report.h"
#include "api_result.h"
#include "api_series.h"
#include "api_shares.h"
#include "api_signkeys.h"
#include "base/tb_crypto.h"
#include "base/tb_json.h"
#include "net/tb_masterkey.h"
#include "q_shares.h"
#include "render/tb_cmpreport.h"
#include "render/tb_seriesview.h"
#include "render/tb_sharepage.h"
#include "result/tb_sharedoc.h"

/* What opening one share holds, freed in one place (page_clear). */
struct page {
  struct tb_q_shares_open s;
  struct tb_sharedoc_hide hide;
  json_t *priv; /* the private label keys (an array) */
  json_t *doc;  /* the document shown, once built */
  enum tb_sharepage_kind kind;
};

static void
page_clear(struct page *p)
{
  tb_q_shares_open_clear(&p->s);
  tb_sharedoc_hide_clear(&p->hide);
  json_decref(p->priv);
  json_decref(p->doc);
}

/* The token (into token) and the format of the path.  False with a reply
 * queued: 404 for a path that is no token, 400 for an unknown ?format=. */
static bool
page_path(struct tb_api_req *r, char token[TB_API_SHARE_TOKEN_LEN + 1], enum tb_report_format *f,
          enum MHD_Result *ret)
{
  const char *dot = strchr(r->param, '.');
  size_t n = dot != NULL ? (size_t)(dot - r->param) : strlen(r->param);
  if (!tb_api_share_token_ok(r->param, n) ||
      (dot != NULL && (strcmp(dot + 1, "markdown") == 0 || !tb_report_format_parse(dot + 1, f)))) {
    *ret = tb_api_reply_error(r, TB_EC_NOT_FOUND, "no such share link", NULL);
    return false;
  }
  memcpy(token, r->param, n);
  token[n] = '\0';
  return dot != NULL || tb_api_report_format(r, TB_REPORT_HTML, f, ret);
}

/* Every URL and key of the endpoints the share shows, hidden. */
static int
hide_endpoints(struct tb_api_req *r, struct page *p)
{
  PGresult *res = NULL;
  struct tb_db *db = tb_api_db_get(r);
  int n = tb_q_shares_endpoints(db, p->s.project_id, p->s.endpoint_id, p->s.job_id,
                                p->s.base_job_id, &res);
  tb_api_db_put(r, db);
  for (int i = 0; i < n; i++) {
    const char *url = tb_db_str(res, i, "base_url"), *sealed = tb_db_str(res, i, "api_key_sealed");
    tb_sharedoc_hide_url(&p->hide, url);
    tb_sharedoc_hide_url(&p->hide, tb_db_str(res, i, "telemetry_url"));
    if (sealed == NULL || !r->api->has_master_key)
      continue;
    const char *why = NULL;
    char *key = tb_masterkey_open_endpoint_key(r->api->master_key, sealed, tb_db_str(res, i, "id"),
                                               tb_db_str(res, i, "api_key_origin"), url, &why);
    if (key != NULL) {
      tb_sharedoc_hide_str(&p->hide, key);
      OPENSSL_cleanse(key, strlen(key));
      free(key);
    }
  }
  PQclear(res);
  return n < 0 ? n : 0;
}

/* A job's document (r->project_id is the share's) and its labels: 1, 0
 * when the job is gone, < 0 a database error.  *labels (new) is the
 * labels object, {} when unreadable. */
static int
job_doc(struct tb_api_req *r, const char *id, json_t **doc, json_t **labels)
{
  char *text = NULL;
  int rc = tb_api_result_doc(r, id, doc, &text);
  *labels = NULL;
  if (rc > 0) {
    *labels = text != NULL ? json_loads(text, 0, NULL) : NULL;
    if (!json_is_object(*labels)) {
      json_decref(*labels);
      *labels = json_object();
    }
  }
  free(text);
  return rc;
}

static int
build_job(struct tb_api_req *r, struct page *p)
{
  json_t *labels = NULL;
  int rc = job_doc(r, p->s.job_id, &p->doc, &labels);
  if (rc <= 0)
    return rc;
  tb_sharedoc_keep_job(&p->hide, p->s.job_id);
  tb_sharedoc_hide_labels(&p->hide, p->priv, labels);
  json_object_set_new(p->doc, "labels", labels); /* the public ones, once stripped */
  p->kind = TB_SHAREPAGE_JOB;
  return 1;
}

/* The comparison: 1, 0 (a job gone), < 0, or 2 with a reply queued into
 * *ret (the comparison could not be made). */
static int
build_compare(struct tb_api_req *r, struct page *p, enum MHD_Result *ret)
{
  json_t *base = NULL, *head = NULL, *bl = NULL, *hl = NULL;
  int rc = job_doc(r, p->s.base_job_id, &base, &bl);
  if (rc > 0)
    rc = job_doc(r, p->s.job_id, &head, &hl);
  if (rc > 0) {
    tb_sharedoc_keep_job(&p->hide, p->s.base_job_id);
    tb_sharedoc_keep_job(&p->hide, p->s.job_id);
    tb_sharedoc_hide_labels(&p->hide, p->priv, bl);
    tb_sharedoc_hide_labels(&p->hide, p->priv, hl);
    json_t *params = p->s.params != NULL ? json_loads(p->s.params, 0, NULL) : NULL;
    double tol = tb_json_num(params, "tolerance");
    json_decref(params);
    char *htxt = json_dumps(hl, JSON_COMPACT | JSON_SORT_KEYS);
    const struct tb_api_compare_side bs = { .job_id = p->s.base_job_id, .doc = base },
                                     hs = { .job_id = p->s.job_id, .doc = head, .labels = htxt };
    if (!tb_api_compare_make(r, &bs, &hs, isfinite(tol) ? tol / 100.0 : NAN, &p->doc, ret))
      rc = 2;
    free(htxt);
    p->kind = TB_SHAREPAGE_COMPARE;
  }
  json_decref(base);
  json_decref(head);
  json_decref(bl);
  json_decref(hl);
  return rc;
}

static int
build_series(struct tb_api_req *r, struct page *p)
{
  json_t *params = p->s.params != NULL ? json_loads(p->s.params, 0, NULL) : NULL;
  const char *phase = tb_json_str(params, "phase");
  const json_t *labels = json_object_get(params, "labels");
  const struct tb_compare_metric *m =
    tb_api_series_metric(phase ? phase : "decode", tb_json_str(params, "metric"));
  int rc = 0; /* a share stored with settings no longer known shows nothing */
  if (m != NULL && json_is_object(labels)) {
    tb_sharedoc_hide_labels(&p->hide, p->priv, labels);
    int64_t ctx = 0, conc = 1;
    bool cell = tb_json_int(params, "context", &ctx) && tb_json_int(params, "concurrency", &conc);
    const struct tb_api_series_query q = { .endpoint_id = p->s.endpoint_id,
                                           .labels = labels,
                                           .phase = m->phase,
                                           .cell = cell,
                                           .context = ctx,
                                           .concurrency = conc,
                                           .metric = m };
    rc = tb_api_series_doc(r, &q, &p->doc);
  }
  json_decref(params);
  p->kind = TB_SHAREPAGE_SERIES;
  return rc;
}

/* The stripped document rendered in f with the page's additions. */
static enum MHD_Result
page_reply(struct tb_api_req *r, struct page *p, enum tb_report_format f, const char *token)
{
  char *err = NULL, *title = NULL, *desc = NULL, *url = NULL, *page = NULL;
  size_t len = 0, plen = 0;
  char *body = p->kind == TB_SHAREPAGE_COMPARE  ? tb_cmpreport_render(p->doc, f, &len, &err)
               : p->kind == TB_SHAREPAGE_SERIES ? tb_seriesview_render(p->doc, f, &len, &err)
                                                : tb_report_render(p->doc, f, &len, &err);
  enum MHD_Result ret;
  if (body == NULL) {
    ret = tb_api_reply_error(r, TB_EC_INTERNAL, err ? err : "cannot render", NULL);
    goto out;
  }
  tb_sharepage_describe(p->doc, p->kind, &title, &desc);
  const char *pub = tb_cfg_get(r->api->cfg, "TOKBENCH_PUBLIC_URL");
  if (pub != NULL && pub[0] != '\0')
    url = tb_xasprintf("%s/s/%s", pub, token);
  struct tb_sharepage sp = { .title = title, .description = desc, .url = url };
  if (!tb_sharedoc_signature(p->doc, &sp.kid, &sp.signed_at))
    sp.kid = sp.signed_at = NULL;
  page = tb_sharepage_wrap(f, body, len, &sp, &plen);
  if (page == NULL) {
    ret = tb_api_reply_error(r, TB_EC_INTERNAL, "the page is too large", NULL);
    goto out;
  }
  const char *h[] = { "Content-Security-Policy",
                      f == TB_REPORT_HTML ? TB_API_REPORT_CSP : NULL,
                      "X-Robots-Tag",
                      "noindex",
                      "Referrer-Policy",
                      "no-referrer",
                      NULL };
  ret = tb_api_reply(r, MHD_HTTP_OK, tb_report_content_type(f), page, plen, h);
out:
  if (url != NULL)
    OPENSSL_cleanse(url, strlen(url));
  free(url);
  free(page);
  free(title);
  free(desc);
  free(body);
  free(err);
  return ret;
}

/* 404, 410 or 429 for a share that opens nothing now; true when it opens. */
static bool
page_open(struct tb_api_req *r, const struct page *p, enum MHD_Result *ret)
{
  if (p->s.revoked) {
    *ret = tb_api_reply_error(r, TB_EC_NOT_FOUND, "no such share link", NULL);
    return false;
  }
  if (p->s.expired) {
    *ret = tb_api_reply_error(r, TB_EC_SHARE_EXPIRED, "this share link has expired", NULL);
    return false;
  }
  int retry = 1;
  if (!tb_api_quota_charge(r->api->shares->rate, p->s.id, tb_time_mono_ns(), &retry)) {
    char d[160];
    snprintf(d, sizeof d,
             "this share link is opened too often: it may take %.0f requests per second "
             "(TOKBENCH_SHARE_RATE)",
             r->api->shares->rate_per_s);
    r->retry_after_s = retry;
    *ret = tb_api_reply_error(r, TB_EC_RATE_LIMITED, d,
                              json_pack("{ss}", "limit", "TOKBENCH_SHARE_RATE"));
    return false;
  }
  return true;
}

enum MHD_Result
tb_api_shares_open(struct tb_api_req *r)
{
  char token[TB_API_SHARE_TOKEN_LEN + 1], hash[65];
  enum tb_report_format f = TB_REPORT_HTML;
  enum MHD_Result ret;
  if (!page_path(r, token, &f, &ret))
    return ret;
  tb_crypto_sha256_hex(token, strlen(token), hash);
  struct page p = { 0 };
  struct tb_db *db = tb_api_db_get(r);
  int rc = tb_q_shares_by_token(db, hash, &p.s);
  tb_api_db_put(r, db);
  if (!tb_api_found(r, rc, "no such share link", &ret) || !page_open(r, &p, &ret))
    goto out;
  /* the share's project, for the owner's readers (no key is authed) */
  memcpy(r->project_id, p.s.project_id, sizeof r->project_id);
  p.priv = p.s.private_labels != NULL ? json_loads(p.s.private_labels, 0, NULL) : NULL;
  rc = hide_endpoints(r, &p);
  if (rc == 0) {
    if (strcmp(p.s.kind, "job") == 0)
      rc = build_job(r, &p);
    else if (strcmp(p.s.kind, "compare") == 0)
      rc = build_compare(r, &p, &ret);
    else
      rc = build_series(r, &p);
  }
  if (rc == 2) /* the reply is queued */
    goto out;
  if (!tb_api_found(r, rc, "no such share link", &ret))
    goto out;
  bool signed_doc = json_is_object(json_object_get(p.doc, "signature"));
  tb_sharedoc_strip(p.doc, &p.hide);
  if (signed_doc && f == TB_REPORT_JSON) /* the copy, "shared" and all, signed as served */
    tb_api_signkeys_sign(r, p.doc);
  ret = page_reply(r, &p, f, token);
out:
  OPENSSL_cleanse(token, sizeof token);
  page_clear(&p);
  return ret;
}
