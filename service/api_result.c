/*
 * api_result: GET /v1/jobs/{id}/result, and the one reader of a job's
 * document (tb_api_result_doc) that /report and /v1/compare render, signed
 * when the job has finished (api_signkeys.h; imports aside).  The
 * document itself is built by lib/result/tb_jobdoc, which also holds the words for
 * states (queued ... cancelled) and statuses (complete ... running).  The
 * statement: service/q_result.c.
 */
#include "api_result.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api_handlers.h"
#include "api_jobcache.h"
#include "api_signkeys.h"
#include "base/tb_json.h"
#include "q_result.h"
#include "result/tb_jobdoc.h"
#include "result/tb_provenance.h"

/* A job that ended with no document of the engine's (cancelled before a
 * worker took it, failed before its run) still says what is known of it:
 * the spec's hash and the api's build; the rest is unknown, for that
 * reason (lib/result/tb_provenance).  A stored document (an older build's
 * without the block among them) is left as its run wrote it: the api's
 * build is not the one that ran it. */
static void
provenance(json_t *doc, const char *spec_text)
{
  if (json_object_get(doc, "provenance") != NULL)
    return;
  struct tb_provenance_run none = {
    .gpus_why = "the job ended before a run (see error)",
  };
  json_t *p = tb_provenance_new(&none), *spec = NULL;
  if (spec_text != NULL)
    spec = json_loads(spec_text, 0, NULL);
  tb_provenance_set_spec(p, spec, "tokbench-api");
  json_decref(spec);
  json_object_set_new(doc, "provenance", p);
}

int
tb_api_result_doc(struct tb_api_req *r, const char *id, json_t **doc, char **labels)
{
  struct tb_q_result_job j;
  struct tb_db *db = tb_api_db_get(r);
  int rc = tb_q_result_job(db, id, r->project_id, &j);
  tb_api_db_put(r, db);
  *doc = NULL;
  if (labels != NULL)
    *labels = NULL;
  if (rc <= 0)
    return rc;
  int64_t total = -1;
  if (j.cells_total != NULL && !tb_parse_i64(j.cells_total, 0, INT64_MAX, &total))
    total = -1;
  struct tb_jobdoc_row row = {
    .job_id = id,
    .state = j.state,
    .result = j.result,
    .header = j.header,
    .cells = j.cells,
    .error = j.error,
    .cells_total = total,
  };
  *doc = tb_jobdoc_build(&row);
  if (tb_jobdoc_terminal(j.state) && !j.imported) { /* issue 35 */
    if (j.result == NULL)                           /* a stored document keeps what its run wrote */
      provenance(*doc, j.spec);
    tb_api_signkeys_sign(r, *doc);
  }
  if (labels != NULL)
    *labels = tb_xstrdup(j.labels != NULL ? j.labels : "");
  tb_q_result_job_clear(&j);
  return 1;
}

bool
tb_api_result_get(struct tb_api_req *r, json_t **doc, enum MHD_Result *ret)
{
  int rc = tb_api_result_doc(r, r->id, doc, NULL);
  if (rc < 0)
    *ret = tb_api_reply_db(r, rc);
  else if (rc == 0)
    *ret = tb_api_reply_error(r, TB_EC_NOT_FOUND, "no such job", NULL);
  return rc > 0;
}

/* A finished job's document, rendered and signed once, is kept in
 * results_cache (api_jobcache.h: dropped at the job's next NOTIFY
 * tb_job_changed, the verdict's write included, and after
 * TOKBENCH_RESULT_CACHE_MS): the 180 KB document of a 20-cell matrix took
 * 5 ms of CPU to parse, redact, canonicalise, sign and print (issue 36). */
enum MHD_Result
tb_api_jobs_result(struct tb_api_req *r)
{
  struct tb_api_jobcache *c = r->api->results_cache;
  struct tb_api_jobdoc *hit = tb_api_jobcache_get(c, r->id, r->project_id);
  if (hit != NULL && !tb_api_signkeys_usable(r)) { /* signed by a key revoked since */
    tb_api_jobcache_release(c, hit);
    tb_api_jobcache_flush(c);
    hit = NULL;
  }
  if (hit != NULL) {
    enum MHD_Result ret = tb_api_reply_text(r, MHD_HTTP_OK, hit->doc, NULL);
    tb_api_jobcache_release(c, hit);
    return ret;
  }
  uint64_t ticket = tb_api_jobcache_ticket(c, r->id);
  json_t *doc = NULL;
  enum MHD_Result ret;
  if (!tb_api_result_get(r, &doc, &ret))
    return ret;
  char *body = json_dumps(doc, JSON_COMPACT | JSON_PRESERVE_ORDER);
  char state[16];
  snprintf(state, sizeof state, "%s", tb_json_str(doc, "state") ? tb_json_str(doc, "state") : "");
  /* a document left unsigned by a passing database error is not kept */
  bool keep = r->api->sign_key == NULL || json_object_get(doc, "signature") != NULL;
  json_decref(doc);
  if (body == NULL)
    return tb_api_reply_error(r, TB_EC_INTERNAL, "cannot write the result", NULL);
  if (keep && tb_jobdoc_terminal(state))
    tb_api_jobcache_put(c, ticket, r->id, r->project_id, state, 0, "", body, strlen(body));
  ret = tb_api_reply_text(r, MHD_HTTP_OK, body, NULL);
  free(body);
  return ret;
}
