/*
 * api_report: reports, comparisons, thresholds, result import and the static
 * web frontend (issue 6).  See api_report.h for the routes.
 *
 * Reports are rendered by lib/tb_report from the same document GET
 * /v1/jobs/{id}/result returns: the stored result of a finished job, or, while
 * it runs, its header and the cells measured so far (status "running", so the
 * report says it is partial).  The format comes from ?format=, else the first
 * media type of Accept we know (text/html, text/markdown, text/csv,
 * application/json), else HTML.  HTML replies carry a Content-Security-Policy
 * that allows no script at all: the report is static, and every string in it
 * came from users or endpoints.
 *
 * Static files: one path segment (the router already limits it to
 * [A-Za-z0-9._~-]), no leading dot, an extension from a fixed table, opened
 * with O_NOFOLLOW relative to the web directory's descriptor, a regular file
 * of at most TB_API_WEB_FILE_MAX bytes.  No path is ever built from the
 * request, so there is nothing to traverse.
 */
#include "api_report.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tb_compare.h"
#include "tb_import.h"
#include "tb_log.h"
#include "tb_regress.h"
#include "tb_report.h"

/* ------------------------------------------------------------ statements */

static const struct tb_db_stmt st_job_doc = {
  "report_job_doc",
  "SELECT j.state, j.result::text, j.header::text, "
  "  coalesce((SELECT json_agg(c.cell ORDER BY c.seq) FROM job_cells c "
  "            WHERE c.job_id = j.id), '[]'::json)::text, "
  "  j.error, j.cells_total, j.labels::text "
  "FROM jobs j WHERE j.id = $1::uuid AND j.project_id = $2::uuid",
};

static const struct tb_db_stmt st_import = {
  "report_import",
  "WITH e AS (SELECT id FROM endpoints "
  "  WHERE id = $1::uuid AND project_id = $2::uuid AND deleted_at IS NULL) "
  "INSERT INTO jobs (project_id, endpoint_id, spec, labels, busy_key, state, result, "
  "  cells_total, cells_done, attempts, started_at, finished_at, request_id) "
  "SELECT $2::uuid, e.id, $3::jsonb, $4::jsonb, 'import:' || gen_random_uuid()::text, "
  "  'succeeded', $5::jsonb, $6::int, $6::int, 0, now(), now(), $7 FROM e "
  "RETURNING id::text",
};

static const struct tb_db_stmt st_regressed = {
  "report_regressed",
  "SELECT (result -> 'regressions')::text FROM jobs WHERE id = $1::uuid",
};

#define THRESHOLD_JSON                                                                   \
  "json_build_object('id', t.id, 'labels', t.labels, 'tolerance_pct', t.tolerance * 100, " \
  "'created_at', t.created_at, 'updated_at', t.updated_at)"

static const struct tb_db_stmt st_thr_list = {
  "report_thr_list",
  "SELECT coalesce(json_agg(" THRESHOLD_JSON " ORDER BY t.created_at, t.id), '[]'::json)::text "
  "FROM thresholds t WHERE t.project_id = $1::uuid",
};

static const struct tb_db_stmt st_thr_put = {
  "report_thr_put",
  "INSERT INTO thresholds AS t (project_id, labels, tolerance) "
  "VALUES ($1::uuid, $2::jsonb, $3::float8) "
  "ON CONFLICT (project_id, labels) DO UPDATE SET tolerance = EXCLUDED.tolerance, "
  "  updated_at = now() "
  "RETURNING " THRESHOLD_JSON "::text, (t.xmax = 0)",
};

static const struct tb_db_stmt st_thr_delete = {
  "report_thr_delete",
  "DELETE FROM thresholds WHERE id = $1::uuid AND project_id = $2::uuid",
};

/* ------------------------------------------------------------- helpers */

static bool
terminal(const char *state)
{
  return strcmp(state, "succeeded") == 0 || strcmp(state, "failed") == 0 ||
         strcmp(state, "cancelled") == 0;
}

/*
 * The result document of job id in the caller's project.  Returns 1 with
 * *doc (new) and *labels (new string, may be NULL), 0 when there is no such
 * job, or TB_DB_SOFT / TB_DB_HARD.
 */
static int
job_doc(struct tb_api_req *r, const char *id, json_t **doc, char **labels)
{
  const char *p[] = { id, r->project_id };
  PGresult *res = NULL;
  struct tb_db *db = tb_api_db_get(r);
  int rc = tb_db_exec(db, &st_job_doc, 2, p, &res);
  tb_api_db_put(r, db);
  *doc = NULL;
  if (labels)
    *labels = NULL;
  if (rc <= 0) {
    PQclear(res);
    return rc;
  }
  const char *state = PQgetvalue(res, 0, 0);
  json_t *d = NULL;
  if (terminal(state) && !PQgetisnull(res, 0, 1))
    d = json_loads(PQgetvalue(res, 0, 1), 0, NULL);
  if (!json_is_object(d)) {
    /* Not finished (or finished without a document): header + cells so far. */
    json_decref(d);
    d = PQgetisnull(res, 0, 2) ? NULL : json_loads(PQgetvalue(res, 0, 2), 0, NULL);
    if (!json_is_object(d)) {
      json_decref(d);
      d = json_object();
    }
    json_t *cells = json_loads(PQgetvalue(res, 0, 3), 0, NULL);
    json_object_set_new(d, "cells", json_is_array(cells) ? cells : json_array());
    if (!json_is_array(cells))
      json_decref(cells);
    const char *status = strcmp(state, "succeeded") == 0 ? "complete"
                         : terminal(state)               ? state
                                                         : "running";
    json_object_set_new(d, "status", json_string(status));
    json_object_set_new(d, "error", PQgetisnull(res, 0, 4) ? json_null()
                                                           : json_string(PQgetvalue(res, 0, 4)));
    if (!PQgetisnull(res, 0, 5))
      json_object_set_new(d, "progress",
                          json_pack("{s:I}", "cells_total",
                                    (json_int_t)strtoll(PQgetvalue(res, 0, 5), NULL, 10)));
  }
  json_object_set_new(d, "job_id", json_string(id));
  json_object_set_new(d, "state", json_string(state));
  if (labels)
    *labels = tb_xstrdup(PQgetvalue(res, 0, 6));
  PQclear(res);
  *doc = d;
  return 1;
}

/* Picks the format: ?format=, else Accept, else dflt.  False (reply queued
 * into *ret) on an unknown ?format=. */
static bool
pick_format(struct tb_api_req *r, enum tb_report_format dflt, enum tb_report_format *f,
            enum MHD_Result *ret)
{
  const char *q = tb_api_arg(r, "format");
  if (q != NULL) {
    if (tb_report_format_parse(q, f))
      return true;
    *ret = tb_api_reply_error(r, TB_EC_BAD_REQUEST,
                              "format must be html, md, csv or json", NULL);
    return false;
  }
  *f = dflt;
  const char *acc = tb_api_header(r, MHD_HTTP_HEADER_ACCEPT);
  while (acc != NULL && *acc) {
    size_t n = strcspn(acc, ",");
    size_t m = strcspn(acc, ";,");
    const char *a = acc;
    while (m > 0 && (*a == ' ' || *a == '\t')) {
      a++;
      m--;
    }
    while (m > 0 && (a[m - 1] == ' ' || a[m - 1] == '\t'))
      m--;
    char item[64];
    if (m > 0 && m < sizeof item) {
      memcpy(item, a, m);
      item[m] = '\0';
      if (strcmp(item, "*/*") == 0 || strcmp(item, "text/*") == 0)
        return true;
      if (strchr(item, '/') != NULL && tb_report_format_parse(item, f))
        return true;
    }
    acc += n;
    if (*acc == ',')
      acc++;
  }
  *f = dflt;
  return true;
}

/* The HTML of a report allows no script, no remote anything. */
static const char report_csp[] =
    "default-src 'none'; style-src 'unsafe-inline'; img-src data:; base-uri 'none'; "
    "form-action 'none'";

static enum MHD_Result
reply_rendered(struct tb_api_req *r, enum tb_report_format f, char *body, size_t len,
               const char *err)
{
  if (body == NULL)
    return tb_api_reply_error(r, TB_EC_INTERNAL, err ? err : "cannot render", NULL);
  const char *html_headers[] = { "Content-Security-Policy", report_csp, NULL };
  enum MHD_Result ret = tb_api_reply(r, MHD_HTTP_OK, tb_report_content_type(f), body, len,
                                     f == TB_REPORT_HTML ? html_headers : NULL);
  return ret;
}

/* ---------------------------------------------------------------- report */

enum MHD_Result
tb_api_jobs_report(struct tb_api_req *r)
{
  enum tb_report_format f;
  enum MHD_Result ret;
  if (!pick_format(r, TB_REPORT_HTML, &f, &ret))
    return ret;
  json_t *doc = NULL;
  int rc = job_doc(r, r->id, &doc, NULL);
  if (rc < 0)
    return tb_api_reply_db(r, rc);
  if (rc == 0)
    return tb_api_reply_error(r, TB_EC_NOT_FOUND, "no such job", NULL);
  char *err = NULL;
  size_t len = 0;
  char *body = tb_report_render(doc, f, &len, &err);
  json_decref(doc);
  ret = reply_rendered(r, f, body, len, err);
  free(body);
  free(err);
  return ret;
}

/* --------------------------------------------------------------- compare */

enum MHD_Result
tb_api_compare(struct tb_api_req *r)
{
  enum tb_report_format f;
  enum MHD_Result ret;
  if (!pick_format(r, TB_REPORT_HTML, &f, &ret))
    return ret;
  const char *base_id = tb_api_arg(r, "base"), *head_id = tb_api_arg(r, "head");
  if (base_id == NULL || head_id == NULL || !tb_api_is_uuid(base_id) ||
      !tb_api_is_uuid(head_id))
    return tb_api_reply_error(r, TB_EC_BAD_REQUEST,
                              "base and head must be job ids (UUIDs)", NULL);
  double tol = NAN;
  const char *t = tb_api_arg(r, "tolerance");
  if (t != NULL) {
    char *end = NULL;
    errno = 0;
    double pct = strtod(t, &end);
    if (errno != 0 || end == t || *end != '\0' || !(pct >= 0 && pct < 100))
      return tb_api_reply_error(r, TB_EC_BAD_REQUEST,
                                "tolerance is a percentage in [0, 100)", NULL);
    tol = pct / 100.0;
  }
  json_t *base = NULL, *head = NULL, *cmp = NULL;
  char *labels = NULL, *err = NULL, *body = NULL;
  int rc = job_doc(r, base_id, &base, NULL);
  if (rc > 0)
    rc = job_doc(r, head_id, &head, &labels);
  if (rc < 0) {
    ret = tb_api_reply_db(r, rc);
    goto out;
  }
  if (rc == 0) {
    ret = tb_api_reply_error(r, TB_EC_NOT_FOUND,
                             base == NULL ? "no such job: base" : "no such job: head", NULL);
    goto out;
  }
  if (isnan(tol)) {
    struct tb_db *db = tb_api_db_get(r);
    tol = tb_regress_tolerance(db, r->project_id, labels, &rc);
    tb_api_db_put(r, db);
    if (rc < 0) {
      ret = tb_api_reply_db(r, rc);
      goto out;
    }
  }
  cmp = tb_compare(base, head, tol, &err);
  if (cmp == NULL) {
    ret = tb_api_reply_error(r, TB_EC_INTERNAL, err, NULL);
    goto out;
  }
  json_object_set_new(json_object_get(cmp, "base"), "job_id", json_string(base_id));
  json_object_set_new(json_object_get(cmp, "head"), "job_id", json_string(head_id));
  size_t len = 0;
  body = tb_report_render_compare(cmp, f, &len, &err);
  ret = reply_rendered(r, f, body, len, err);
out:
  free(body);
  free(err);
  free(labels);
  json_decref(cmp);
  json_decref(base);
  json_decref(head);
  return ret;
}

/* ---------------------------------------------------------------- import */

#define LABELS_MAX 16
#define LABEL_KEY_MAX 64
#define LABEL_VALUE_MAX 200

/* Labels as the api takes them elsewhere: an object of at most LABELS_MAX
 * string values, keys of [A-Za-z0-9._-]. */
static bool
labels_ok(const json_t *l)
{
  if (!json_is_object(l) || json_object_size(l) > LABELS_MAX)
    return false;
  const char *k;
  const json_t *v;
  json_object_foreach((json_t *)l, k, v) {
    size_t n = strlen(k);
    if (n == 0 || n > LABEL_KEY_MAX || strspn(k, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-") != n)
      return false;
    if (!json_is_string(v) || json_string_length(v) > LABEL_VALUE_MAX)
      return false;
  }
  return true;
}

enum MHD_Result
tb_api_results_import(struct tb_api_req *r)
{
  enum MHD_Result ret;
  json_t *body = tb_api_body_json(r, &ret);
  if (body == NULL)
    return ret;
  json_t *doc = NULL, *spec = NULL;
  char *err = NULL, *doc_txt = NULL, *spec_txt = NULL, *labels_txt = NULL, *id = NULL;
  PGresult *res = NULL;
  /* Either {endpoint_id, labels?, result} or the document itself with
   * ?endpoint_id=. */
  const json_t *in = body, *labels = NULL;
  const char *endpoint = tb_api_arg(r, "endpoint_id");
  if (json_is_object(json_object_get(body, "result"))) {
    in = json_object_get(body, "result");
    labels = json_object_get(body, "labels");
    if (json_is_string(json_object_get(body, "endpoint_id")))
      endpoint = json_string_value(json_object_get(body, "endpoint_id"));
  }
  if (endpoint == NULL || !tb_api_is_uuid(endpoint)) {
    ret = tb_api_reply_error(r, TB_EC_INVALID,
                             "endpoint_id: the endpoint the result belongs to (a UUID)",
                             json_pack("{s:[{s:s, s:s}]}", "errors", "field", "endpoint_id",
                                       "detail", "required, a UUID"));
    goto out;
  }
  if (labels != NULL && !json_is_null(labels) && !labels_ok(labels)) {
    ret = tb_api_reply_invalid(r, "labels", "an object of at most 16 string values");
    goto out;
  }
  enum tb_import_source src;
  doc = tb_import(in, &src, &err);
  if (doc == NULL) {
    ret = tb_api_reply_error(r, TB_EC_INVALID, err,
                             json_pack("{s:[{s:s, s:s}]}", "errors", "field", "result",
                                       "detail", err));
    goto out;
  }
  spec = json_pack("{s:b, s:s}", "imported", 1, "source",
                   src == TB_IMPORT_LLM_INFERENCE_BENCH ? "llm-inference-bench" : "tokbench");
  doc_txt = json_dumps(doc, JSON_COMPACT);
  spec_txt = json_dumps(spec, JSON_COMPACT);
  labels_txt = json_is_object(labels) ? json_dumps(labels, JSON_COMPACT) : tb_xstrdup("{}");
  char ncells[24];
  snprintf(ncells, sizeof ncells, "%zu", json_array_size(json_object_get(doc, "cells")));
  const char *p[] = { endpoint, r->project_id, spec_txt, labels_txt, doc_txt, ncells,
                      r->request_id };
  struct tb_db *db = tb_api_db_get(r);
  int rc = tb_db_exec(db, &st_import, 7, p, &res);
  if (rc == 1) {
    id = tb_xstrdup(PQgetvalue(res, 0, 0));
    int cr = tb_regress_check(db, id);
    if (cr < 0)
      tb_log(TB_LOG_WARN, "regression check failed", "job", TB_LS, id, "request_id", TB_LS,
             r->request_id, NULL);
    PQclear(res);
    res = NULL;
    const char *p2[] = { id };
    if (tb_db_exec(db, &st_regressed, 1, p2, &res) < 0) {
      PQclear(res);
      res = NULL;
    }
  }
  tb_api_db_put(r, db);
  if (rc < 0) {
    ret = tb_api_reply_db(r, rc);
    goto out;
  }
  if (rc == 0) {
    ret = tb_api_reply_error(r, TB_EC_NOT_FOUND, "no such endpoint", NULL);
    goto out;
  }
  json_t *reg = res && PQntuples(res) == 1 && !PQgetisnull(res, 0, 0)
                    ? json_loads(PQgetvalue(res, 0, 0), 0, NULL)
                    : NULL;
  json_t *reply = json_pack("{s:s, s:s, s:s, s:O, s:I, s:o}", "job_id", id, "source",
                            src == TB_IMPORT_LLM_INFERENCE_BENCH ? "llm-inference-bench"
                                                                 : "tokbench",
                            "state", "succeeded", "status",
                            json_object_get(doc, "status") ? json_object_get(doc, "status")
                                                           : json_null(),
                            "cells", (json_int_t)json_array_size(json_object_get(doc, "cells")),
                            "regressions", reg ? reg : json_null());
  char *loc = tb_xasprintf("/v1/jobs/%s", id);
  const char *hdr[] = { "Location", loc, NULL };
  ret = tb_api_reply_json(r, MHD_HTTP_CREATED, reply, hdr);
  free(loc);
out:
  PQclear(res);
  free(id);
  free(doc_txt);
  free(spec_txt);
  free(labels_txt);
  free(err);
  json_decref(spec);
  json_decref(doc);
  json_decref(body);
  return ret;
}

/* ------------------------------------------------------------ thresholds */

enum MHD_Result
tb_api_thresholds_list(struct tb_api_req *r)
{
  const char *p[] = { r->project_id };
  return tb_api_reply_query(r, &st_thr_list, 1, p, MHD_HTTP_OK, "thresholds", NULL);
}

enum MHD_Result
tb_api_thresholds_put(struct tb_api_req *r)
{
  enum MHD_Result ret;
  json_t *body = tb_api_body_json(r, &ret);
  if (body == NULL)
    return ret;
  const json_t *labels = json_object_get(body, "labels");
  const json_t *pct = json_object_get(body, "tolerance_pct");
  const char *bad = NULL;
  if (labels != NULL && !json_is_null(labels) && !labels_ok(labels))
    bad = "labels";
  else if (!json_is_number(pct) || !(json_number_value(pct) >= 0 && json_number_value(pct) < 100))
    bad = "tolerance_pct";
  if (bad != NULL) {
    const char *d = strcmp(bad, "labels") == 0
                        ? "an object of at most 16 string values (keys [A-Za-z0-9._-])"
                        : "a number in [0, 100): the tolerated loss in percent";
    ret = tb_api_reply_invalid(r, bad, d);
    json_decref(body);
    return ret;
  }
  char *ltxt = json_is_object(labels) ? json_dumps(labels, JSON_COMPACT | JSON_SORT_KEYS)
                                      : tb_xstrdup("{}");
  char tol[48];
  snprintf(tol, sizeof tol, "%.17g", json_number_value(pct) / 100.0);
  const char *p[] = { r->project_id, ltxt, tol };
  PGresult *res = NULL;
  struct tb_db *db = tb_api_db_get(r);
  int rc = tb_db_exec(db, &st_thr_put, 3, p, &res);
  tb_api_db_put(r, db);
  free(ltxt);
  json_decref(body);
  if (rc < 0)
    return tb_api_reply_db(r, rc);
  bool inserted = strcmp(PQgetvalue(res, 0, 1), "t") == 0;
  ret = tb_api_reply(r, inserted ? MHD_HTTP_CREATED : MHD_HTTP_OK, "application/json",
                     PQgetvalue(res, 0, 0), (size_t)PQgetlength(res, 0, 0), NULL);
  PQclear(res);
  return ret;
}

enum MHD_Result
tb_api_thresholds_delete(struct tb_api_req *r)
{
  const char *p[] = { r->id, r->project_id };
  return tb_api_reply_delete(r, &st_thr_delete, 2, p, "no such threshold");
}

/* ------------------------------------------------------------ web files */

static const struct {
  const char *ext, *ctype;
} web_types[] = {
  { ".html", "text/html; charset=utf-8" },
  { ".js", "text/javascript; charset=utf-8" },
  { ".css", "text/css; charset=utf-8" },
  { ".svg", "image/svg+xml" },
  { ".png", "image/png" },
  { ".ico", "image/x-icon" },
  { ".json", "application/json" },
  { ".txt", "text/plain; charset=utf-8" },
};

/* The web app may run its own scripts and talk to this origin, nothing else;
 * the reports it shows in sandboxed srcdoc frames need inline styles. */
static const char web_csp[] =
    "default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; "
    "img-src 'self' data:; connect-src 'self'; frame-src 'self'; object-src 'none'; "
    "base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

static bool
has_index(const char *dir)
{
  char p[PATH_MAX];
  int n = snprintf(p, sizeof p, "%s/index.html", dir);
  return n > 0 && (size_t)n < sizeof p && access(p, R_OK) == 0;
}

char *
tb_api_web_dir_resolve(const char *configured)
{
  if (configured != NULL && configured[0] != '\0')
    return tb_xstrdup(configured);
  char exe[PATH_MAX];
  ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
  if (n > 0) {
    exe[n] = '\0';
    char *slash = strrchr(exe, '/');
    if (slash != NULL) {
      *slash = '\0';
      static const char *const rel[] = { "/../web", "/../../web", "/../share/tokbench/web" };
      for (size_t i = 0; i < TB_ARRAY_LEN(rel); i++) {
        char cand[PATH_MAX];
        int m = snprintf(cand, sizeof cand, "%s%s", exe, rel[i]);
        if (m > 0 && (size_t)m < sizeof cand && has_index(cand))
          return tb_xstrdup(cand);
      }
    }
  }
  return tb_xstrdup("web");
}

static enum MHD_Result
serve(struct tb_api_req *r, const char *name)
{
  const char *ctype = NULL;
  size_t nl = strlen(name);
  if (nl == 0 || name[0] == '.' || strchr(name, '/') != NULL)
    return tb_api_reply_error(r, TB_EC_NOT_FOUND, "no such file", NULL);
  for (size_t i = 0; i < TB_ARRAY_LEN(web_types) && ctype == NULL; i++) {
    size_t el = strlen(web_types[i].ext);
    if (nl > el && strcmp(name + nl - el, web_types[i].ext) == 0)
      ctype = web_types[i].ctype;
  }
  if (ctype == NULL)
    return tb_api_reply_error(r, TB_EC_NOT_FOUND, "no such file", NULL);
  int dfd = open(r->api->web_dir != NULL ? r->api->web_dir : "web", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  int fd = dfd < 0 ? -1 : openat(dfd, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
  if (dfd >= 0)
    close(dfd);
  struct stat st;
  if (fd < 0 || fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) ||
      st.st_size > TB_API_WEB_FILE_MAX) {
    if (fd >= 0)
      close(fd);
    return tb_api_reply_error(r, TB_EC_NOT_FOUND, "no such file", NULL);
  }
  size_t size = (size_t)st.st_size, got = 0;
  char *buf = tb_xmalloc(size + 1);
  while (got < size) {
    ssize_t k = read(fd, buf + got, size - got);
    if (k < 0 && errno == EINTR)
      continue;
    if (k <= 0)
      break;
    got += (size_t)k;
  }
  close(fd);
  const char *html_headers[] = { "Content-Security-Policy", web_csp, "X-Frame-Options", "DENY",
                                 "Referrer-Policy", "no-referrer", NULL };
  enum MHD_Result ret = tb_api_reply(r, MHD_HTTP_OK, ctype, buf, got,
                                     strncmp(ctype, "text/html", 9) == 0 ? html_headers : NULL);
  free(buf);
  return ret;
}

enum MHD_Result
tb_api_web_index(struct tb_api_req *r)
{
  return serve(r, "index.html");
}

enum MHD_Result
tb_api_web_file(struct tb_api_req *r)
{
  return serve(r, r->param);
}
