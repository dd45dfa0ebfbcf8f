/*
 * api_traces: /v1/traces, production traces of the caller's project
 * (issue 25, part 4; docs/traces.md "Traces in the service").
 *   POST   /v1/traces?format=F&name=N  the body is the trace file as is
 *                                (gzip or not; curl --data-binary @FILE)
 *                                -> 201 + Location and the trace's summary;
 *                                422 naming the line and field of a
 *                                malformed trace (tb_trace's message), 413
 *                                over TOKBENCH_TRACE_MAX_BYTES, 429 over the
 *                                project's TOKBENCH_LIMIT_TRACES or
 *                                TOKBENCH_LIMIT_TRACE_BYTES
 *   GET    /v1/traces            list, newest first (?limit= ?cursor=)
 *   GET    /v1/traces/{id}       one, with its summary
 *   DELETE /v1/traces/{id}       204; 409 while a queued or running job
 *                                names it (the row locked before the jobs
 *                                are counted, against a job being queued
 *                                with it: tb_api_traces_job_insert)
 *
 * The body is read as it comes, up to TOKBENCH_TRACE_MAX_BYTES (the route's
 * upload flag: main.c refuses a larger Content-Length before reading a
 * byte), then read whole by lib/spec/tb_trace (gzip inflated to its own
 * caps) before anything is stored: a trace in the database is one the
 * worker can replay.  The bytes are stored as sent, with their SHA-256,
 * which the trace cell of a job records.  A trace of another project is
 * 404 everywhere (q_traces scopes every statement by project).
 */
#include <stdlib.h>
#include <string.h>

#include "api_handlers.h"
#include "api_page.h"
#include "api_streams.h"
#include "api_traces.h"
#include "q_traces.h"
#include "spec/tb_trace.h"
#include "spec/tb_tracesum.h"

#define TB_TRACE_NAME_MAX 100

bool
tb_api_traces_config(struct tb_api *api, char **err)
{
  int64_t body, n, bytes, uploads, mem;
  if (!tb_cfg_get_int(api->cfg, "TOKBENCH_TRACE_MAX_BYTES", 1024, TB_TRACE_MAX_BYTES, &body, err) ||
      !tb_cfg_get_int(api->cfg, "TOKBENCH_TRACE_MAX_MEMORY", 1 << 20, TB_TRACE_MAX_MEMORY, &mem,
                      err) ||
      !tb_cfg_get_int(api->cfg, "TOKBENCH_TRACE_UPLOADS_PER_PROJECT", 0, 1024, &uploads, err) ||
      !tb_cfg_get_int(api->cfg, "TOKBENCH_LIMIT_TRACES", 0, 1000000, &n, err) ||
      !tb_cfg_get_int(api->cfg, "TOKBENCH_LIMIT_TRACE_BYTES", 0, INT64_MAX / 2, &bytes, err))
    return false;
  api->trace_body_max = (size_t)body;
  api->trace_max_memory = (size_t)mem;
  api->limit_traces = n;
  api->limit_trace_bytes = bytes;
  tb_api_streams_cap_uploads(api->streams, (unsigned)uploads);
  return true;
}

/* A name: 1 to 100 bytes of printable text (UTF-8 allowed, no control
 * characters). */
static bool
name_ok(const char *s)
{
  size_t n = strlen(s);
  if (n == 0 || n > TB_TRACE_NAME_MAX)
    return false;
  for (size_t i = 0; i < n; i++)
    if ((unsigned char)s[i] < 0x20 || s[i] == 0x7f)
      return false;
  json_t *v = json_string(s); /* NULL: not UTF-8 */
  bool ok = v != NULL;
  json_decref(v);
  return ok;
}

/* 429 (or 422 for a trace that could never fit) naming the cap. */
static enum MHD_Result
reply_cap(struct tb_api_req *r, const char *limit, const char *setting, int64_t max, int64_t value,
          bool never)
{
  char *d = never
              ? tb_xasprintf("the trace's %lld bytes are more than the project may store in all "
                             "(%s = %lld)",
                             (long long)value, setting, (long long)max)
              : tb_xasprintf("the project is at its limit of %s = %lld (it holds %lld); delete a "
                             "trace first",
                             setting, (long long)max, (long long)value);
  json_t *extra = json_pack("{s:s,s:s,s:I,s:I}", "limit", limit, "setting", setting, "max",
                            (json_int_t)max, "value", (json_int_t)value);
  enum MHD_Result ret;
  if (never) {
    ret = tb_api_reply_error(r, TB_EC_INVALID, d, extra);
  } else {
    r->retry_after_s = 60;
    ret = tb_api_reply_error(r, TB_EC_LIMIT_REACHED, d, extra);
  }
  free(d);
  return ret;
}

/* The query parameters: the format (required) and the name (the format's
 * when not given).  False with a 400 queued. */
static bool
upload_args(struct tb_api_req *r, enum tb_trace_format *f, const char **name, enum MHD_Result *ret)
{
  const char *fmt = tb_api_arg(r, "format");
  if (fmt == NULL || !tb_trace_format_parse(fmt, f)) {
    *ret = tb_api_reply_error(r, TB_EC_BAD_REQUEST,
                              "format: the query parameter ?format= is one of mooncake, azure, "
                              "burstgpt, bailian or weka",
                              NULL);
    return false;
  }
  *name = tb_api_arg(r, "name");
  if (*name == NULL)
    *name = tb_trace_format_name(*f);
  if (!name_ok(*name)) {
    *ret = tb_api_reply_error(r, TB_EC_BAD_REQUEST,
                              "name: 1 to 100 bytes of text without control characters", NULL);
    return false;
  }
  return true;
}

/* The project's caps with the body added, before the body is read (the
 * insert checks them again under the project's lock): true when it fits;
 * else false with the reply queued into *ret. */
static bool
room(struct tb_api_req *r, int64_t count, int64_t bytes, enum MHD_Result *ret)
{
  struct tb_api *api = r->api;
  int64_t len = (int64_t)r->body_len;
  if (api->limit_trace_bytes > 0 && len > api->limit_trace_bytes)
    *ret =
      reply_cap(r, "trace_bytes", "TOKBENCH_LIMIT_TRACE_BYTES", api->limit_trace_bytes, len, true);
  else if (api->limit_traces > 0 && count >= api->limit_traces)
    *ret = reply_cap(r, "traces", "TOKBENCH_LIMIT_TRACES", api->limit_traces, count, false);
  else if (api->limit_trace_bytes > 0 && bytes + len > api->limit_trace_bytes)
    *ret = reply_cap(r, "trace_bytes", "TOKBENCH_LIMIT_TRACE_BYTES", api->limit_trace_bytes, bytes,
                     false);
  else
    return true;
  return false;
}

/* Stores the parsed trace t read from the body; 201, or the cap's reply. */
static enum MHD_Result
store(struct tb_api_req *r, const struct tb_trace *t, const char *name)
{
  struct tb_api *api = r->api;
  struct tb_tracesum sm;
  tb_tracesum_of(t, &sm);
  json_t *sj = tb_tracesum_json(&sm);
  char *summary = json_dumps(sj, JSON_COMPACT);
  json_decref(sj);
  struct tb_q_traces_row row = {
    .project_id = r->project_id,
    .name = name,
    .format = tb_trace_format_name(t->format),
    .data = r->body,
    .len = r->body_len,
    .gzip = t->gzipped,
    .sha256 = t->sha256,
    .summary = summary,
    .max_count = api->limit_traces,
    .max_bytes = api->limit_trace_bytes,
  };
  char *doc = NULL, id[37];
  int64_t count = 0, bytes = 0;
  struct tb_db *db = tb_api_db_get(r);
  int rc = tb_q_traces_insert(db, &row, &doc, id, &count, &bytes);
  tb_api_db_put(r, db);
  free(summary);
  enum MHD_Result ret;
  if (rc < 0)
    return tb_api_reply_db(r, rc);
  if (rc == 0 && !room(r, count, bytes, &ret))
    return ret;
  if (rc == 0) /* cannot be: the statement refused what room() allows */
    return tb_api_reply_error(r, TB_EC_INTERNAL, "the trace could not be stored", NULL);
  ret = tb_api_reply_at(r, MHD_HTTP_CREATED, doc, "/v1/traces/", id);
  free(doc);
  return ret;
}

static enum MHD_Result
upload(struct tb_api_req *r)
{
  enum MHD_Result ret;
  enum tb_trace_format f;
  const char *name;
  if (!upload_args(r, &f, &name, &ret))
    return ret;
  if (r->body_len == 0)
    return tb_api_reply_invalid(
      r, "body", "empty: send the trace file as the body (curl --data-binary @FILE)");
  /* a project without room is told so before its trace is parsed */
  int64_t count = 0, bytes = 0;
  struct tb_db *db = tb_api_db_get(r);
  int rc = tb_q_traces_usage(db, r->project_id, &count, &bytes);
  tb_api_db_put(r, db);
  if (rc < 0)
    return tb_api_reply_db(r, rc);
  if (!room(r, count, bytes, &ret))
    return ret;
  struct tb_trace t;
  char why[TB_TRACE_ERR_MAX];
  if (tb_trace_parse_within(r->body, r->body_len, f, r->api->trace_max_memory, &t, why,
                            sizeof why) != 0)
    return tb_api_reply_invalid(r, "body", why);
  ret = store(r, &t, name);
  tb_trace_free(&t);
  return ret;
}

/* The upload's slot and body are given back once its reply is queued, not
 * when MHD completes the request: a client that has read the reply may send
 * its next upload before completed() runs, and must find the slot free. */
enum MHD_Result
tb_api_traces_upload(struct tb_api_req *r)
{
  enum MHD_Result ret = upload(r);
  free(r->body);
  r->body = NULL;
  r->body_len = 0;
  r->body_cap = 0;
  tb_api_streams_release(r);
  return ret;
}

enum MHD_Result
tb_api_traces_list(struct tb_api_req *r)
{
  enum MHD_Result ret;
  struct tb_api_page pg;
  if (!tb_api_page_args(r, &pg, "traces", &ret))
    return ret;
  struct tb_db *db = tb_api_db_get(r);
  int rc = tb_q_traces_list(db, r->project_id, pg.after_us, pg.after_id, pg.limit + 1,
                            tb_api_page_item, &pg);
  tb_api_db_put(r, db);
  return tb_api_page_reply(r, &pg, rc);
}

enum MHD_Result
tb_api_traces_get(struct tb_api_req *r)
{
  return tb_api_reply_get(r, tb_q_traces_get, "no such trace");
}

enum MHD_Result
tb_api_traces_delete(struct tb_api_req *r)
{
  bool in_use = false;
  struct tb_db *db = tb_api_db_get(r);
  int rc = tb_q_traces_delete(db, r->id, r->project_id, &in_use);
  tb_api_db_put(r, db);
  if (rc == 0 && in_use)
    return tb_api_reply_error(r, TB_EC_TRACE_IN_USE,
                              "a queued or running job names this trace: cancel it or let it end",
                              NULL);
  return tb_api_reply_deleted(r, rc, "no such trace");
}

/* One error of the job check, as tb_spec_job writes them. */
static int
job_error(json_t **errors, const char *field, const char *detail)
{
  *errors = json_pack("[{s:s,s:s}]", "field", field, "detail", detail);
  return 0;
}

/* The trace spec names (borrowed), of project_id, of its format; the
 * stored format written into spec when it gives none (what the job's
 * result records, and what tb_plan sizes), its span into *span_s (what
 * the job's seconds count, tb_plan_job_seconds).  Inside a transaction the
 * trace's row stays locked (FOR KEY SHARE) until it ends. */
static int
check_job(struct tb_db *db, const char *project_id, json_t *spec, json_t **errors, double *span_s)
{
  *span_s = 0;
  json_t *t = json_object_get(spec, "trace");
  if (t == NULL)
    return 1;
  const char *id = json_string_value(json_object_get(t, "id"));
  const char *fmt = json_string_value(json_object_get(t, "format"));
  if (id == NULL)
    return job_error(errors, "trace.id",
                     "a job through the service replays an uploaded trace: name it by its id "
                     "(POST /v1/traces)");
  char have[16];
  int rc = tb_q_traces_format(db, id, project_id, have, span_s);
  if (rc < 0)
    return rc;
  if (rc == 0)
    return job_error(errors, "trace.id", "no such trace in this project");
  if (fmt != NULL && strcmp(fmt, have) != 0) {
    char d[160];
    snprintf(d, sizeof d,
             "the trace %s is in format \"%s\", not \"%s\": leave trace.format out (the "
             "stored trace's is used) or give \"%s\"",
             id, have, fmt, have);
    return job_error(errors, "trace.format", d);
  }
  if (fmt == NULL)
    json_object_set_new(t, "format", json_string(have));
  return 1;
}

_Static_assert(TB_API_TRACES_BAD != 0 && TB_API_TRACES_BAD != 1 &&
                 TB_API_TRACES_BAD != TB_API_JOB_REFUSED,
               "tb_api_traces_job_insert's answers are tb_api_job_insert's and one more");

/* check_job then tb_api_job_insert, in the caller's transaction or one of
 * its own; tried twice like tb_q_jobs_insert. */
int
tb_api_traces_job_insert(struct tb_db *db, const struct tb_tenancy *ten, const char *project_id,
                         const char *request_id, json_t *spec, char job_id[TB_API_ID_LEN + 1],
                         char **doc, json_t **errors, struct tb_tenancy_refusal *why)
{
  return tb_api_traces_job_insert_from(db, ten, project_id, request_id, spec, NULL, job_id, doc,
                                       errors, why);
}

int
tb_api_traces_job_insert_from(struct tb_db *db, const struct tb_tenancy *ten,
                              const char *project_id, const char *request_id, json_t *spec,
                              const struct tb_api_job_origin *origin,
                              char job_id[TB_API_ID_LEN + 1], char **doc, json_t **errors,
                              struct tb_tenancy_refusal *why)
{
  *errors = NULL;
  if (doc != NULL)
    *doc = NULL;
  bool own = json_object_get(spec, "trace") != NULL && !tb_db_in_tx(db);
  int rc = TB_DB_SOFT;
  for (int attempt = 0; attempt < (own ? 2 : 1) && rc == TB_DB_SOFT; attempt++) {
    if (own && (rc = tb_db_begin(db)) < 0)
      continue;
    double span_s;
    rc = check_job(db, project_id, spec, errors, &span_s);
    if (rc == 0)
      rc = TB_API_TRACES_BAD;
    else if (rc > 0)
      rc = tb_api_job_insert_from(db, ten, project_id, request_id, spec, span_s, origin, job_id,
                                  doc, why);
    if (!own)
      break;
    int crc = rc == 1 ? tb_db_commit(db) : 0;
    if (rc != 1)
      tb_db_rollback(db);
    if (crc < 0) {
      rc = crc;
      if (doc != NULL) {
        free(*doc);
        *doc = NULL;
      }
    }
  }
  return rc;
}
