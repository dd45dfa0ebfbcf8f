/*
 * api_presets: /v1/presets, named job templates of the caller's project.
 *   POST   /v1/presets              {name, spec} -> 201 (409 name taken)
 *   GET    /v1/presets              list
 *   GET    /v1/presets/{name}       one
 *   PUT    /v1/presets/{name}       {spec} -> 200 (created: 201)
 *   DELETE /v1/presets/{name}       204 (409 while hooks use it)
 *   POST   /v1/presets/{name}/jobs  {labels?} -> 202 + Location: a job from
 *                                   the preset (`tokbench submit --preset`)
 *
 * The spec is the body of POST /v1/jobs and is validated by the same
 * function (tb_spec_job) when saved and again, merged with the extra
 * labels, when a job is made from it.  The statements: service/q_presets.c.
 */
#include <string.h>

#include "api_handlers.h"
#include "api_ci.h"
#include "api_jobs.h"
#include "api_spec.h"
#include "q_presets.h"

/* Validates a preset spec (any JSON value) with tb_spec_job; on success
 * *norm is the normalized spec text (new).  Else a reply is queued. */
static bool
check_spec(struct tb_api_req *r, const json_t *spec, char **norm, enum MHD_Result *ret)
{
  json_t *out = NULL, *errors = NULL;
  if (!json_is_object(spec)) {
    *ret = tb_api_reply_error(
      r, TB_EC_INVALID, "spec: an object (the body of POST /v1/jobs)",
      json_pack("{s:[{s:s,s:s}]}", "errors", "field", "spec", "detail", "an object"));
    return false;
  }
  char *text = json_dumps(spec, JSON_COMPACT);
  int rc = tb_spec_job(text, strlen(text), &out, &errors);
  free(text);
  if (rc != TB_SPEC_OK) {
    /* name the fields under spec. */
    size_t i;
    json_t *e;
    json_array_foreach (errors, i, e) {
      const char *f = json_string_value(json_object_get(e, "field"));
      char *nf = tb_xasprintf("spec.%s", f ? f : "");
      json_object_set_new(e, "field", json_string(nf));
      free(nf);
    }
    *ret = tb_api_reply_spec_errors(r, TB_SPEC_INVALID, errors);
    return false;
  }
  *norm = json_dumps(out, JSON_COMPACT | JSON_SORT_KEYS);
  json_decref(out);
  return true;
}

#define TB_PRESET_NAME_MAX 100

static bool
name_ok(const char *s)
{
  return s != NULL && tb_api_segment_ok(s, strlen(s), TB_PRESET_NAME_MAX);
}

/* POST /v1/presets (put false: the name from the body, 409 when taken) and
 * PUT /v1/presets/{name} (put true: the name from the path, which a name in
 * the body must equal; created or replaced). */
static enum MHD_Result
save(struct tb_api_req *r, bool put)
{
  static const char *const allowed[] = { "name", "spec", NULL };
  enum MHD_Result ret;
  json_t *body = tb_api_body_json(r, &ret);
  if (body == NULL)
    return ret;
  char *norm = NULL, *doc = NULL;
  const char *name = json_string_value(json_object_get(body, "name"));
  if (!tb_api_only_members(r, body, allowed, &ret))
    goto out;
  if (put && name != NULL && strcmp(name, r->param) != 0) {
    ret = tb_api_reply_error(r, TB_EC_INVALID, "name: differs from the path", NULL);
    goto out;
  }
  if (put)
    name = r->param;
  if (!name_ok(name)) {
    ret = tb_api_reply_invalid(r, "name", "1 to 100 of [A-Za-z0-9._~-]");
    goto out;
  }
  if (!check_spec(r, json_object_get(body, "spec"), &norm, &ret))
    goto out;
  struct tb_db *db = tb_api_db_get(r);
  bool uv = false, created = true;
  int rc = put ? tb_q_presets_put(db, r->project_id, name, norm, &doc, &created)
               : tb_q_presets_insert(db, r->project_id, name, norm, &doc, &uv);
  tb_api_db_put(r, db);
  if (uv) {
    ret = tb_api_reply_error(r, TB_EC_NAME_TAKEN, "a preset of this project has this name", NULL);
  } else if (rc <= 0 || doc == NULL) {
    ret = tb_api_reply_db(r, rc < 0 ? rc : TB_DB_HARD);
  } else {
    char *loc = tb_xasprintf("/v1/presets/%s", name);
    const char *h[] = { "Location", created ? loc : NULL, NULL };
    ret = tb_api_reply_text(r, created ? MHD_HTTP_CREATED : MHD_HTTP_OK, doc, h);
    free(loc);
  }
out:
  free(doc);
  free(norm);
  json_decref(body);
  return ret;
}

enum MHD_Result
tb_api_presets_create(struct tb_api_req *r)
{
  return save(r, false);
}

enum MHD_Result
tb_api_presets_put(struct tb_api_req *r)
{
  return save(r, true);
}

enum MHD_Result
tb_api_presets_list(struct tb_api_req *r)
{
  return tb_api_reply_list(r, tb_q_presets_list, "presets");
}

enum MHD_Result
tb_api_presets_get(struct tb_api_req *r)
{
  char *doc = NULL;
  struct tb_db *db = tb_api_db_get(r);
  int rc = tb_q_presets_get(db, r->project_id, r->param, &doc, NULL);
  tb_api_db_put(r, db);
  return tb_api_reply_doc(r, rc, doc, MHD_HTTP_OK, NULL, "no preset of this name");
}

enum MHD_Result
tb_api_presets_delete(struct tb_api_req *r)
{
  struct tb_db *db = tb_api_db_get(r);
  bool in_use = false;
  int rc = tb_q_presets_delete(db, r->project_id, r->param, &in_use);
  tb_api_db_put(r, db);
  if (rc == 0 && in_use)
    return tb_api_reply_error(r, TB_EC_NAME_TAKEN, "hooks use this preset: delete them first",
                              NULL);
  return tb_api_reply_deleted(r, rc, "no preset of this name");
}

enum MHD_Result
tb_api_presets_run(struct tb_api_req *r)
{
  static const char *const allowed[] = { "labels", NULL };
  enum MHD_Result ret;
  json_t *body = NULL, *spec = NULL, *errors = NULL;
  if (r->body_len > 0) {
    body = tb_api_body_json(r, &ret);
    if (body == NULL)
      return ret;
    if (!tb_api_only_members(r, body, allowed, &ret))
      goto out_body;
  }
  struct tb_db *db = tb_api_db_get(r);
  char *doc = NULL, *text = NULL;
  int rc = tb_q_presets_get(db, r->project_id, r->param, NULL, &text);
  if (rc < 0) {
    ret = tb_api_reply_db(r, rc);
    goto out;
  }
  if (rc == 0) {
    ret = tb_api_reply_error(r, TB_EC_NOT_FOUND, "no preset of this name", NULL);
    goto out;
  }
  json_error_t jerr;
  spec = json_loads(text != NULL ? text : "", 0, &jerr);
  char job_id[TB_API_ID_LEN + 1];
  struct tb_tenancy_refusal why;
  rc = tb_api_ci_start_job(db, &r->api->tenancy, r->project_id, r->request_id, spec,
                           json_object_get(body, "labels"), job_id, &doc, &errors, &why);
  if (rc == TB_API_JOB_REFUSED) {
    ret = tb_api_reply_refusal(r, &why);
  } else if (rc == 2) {
    ret = tb_api_reply_spec_errors(r, TB_SPEC_INVALID, errors);
    errors = NULL;
  } else if (rc < 0) {
    ret = tb_api_reply_db(r, rc);
  } else if (rc == 0) {
    ret = tb_api_reply_error(r, TB_EC_INVALID, "the preset's endpoint is gone",
                             json_pack("{s:[{s:s,s:s}]}", "errors", "field", "spec.endpoint_id",
                                       "detail", "no such endpoint"));
  } else {
    tb_api_job_queued(db, job_id);
    ret = tb_api_reply_at(r, MHD_HTTP_ACCEPTED, doc, "/v1/jobs/", job_id);
  }
out:
  tb_api_db_put(r, db);
  free(text);
  free(doc);
  json_decref(spec);
  json_decref(errors);
out_body:
  json_decref(body);
  return ret;
}
