/*
 * worker_trace: the uploaded trace a job names (the spec's trace.id; issue
 * 25, docs/traces.md "Traces in the service").  The bytes come from
 * PostgreSQL (lib/db/tb_tracestore, through the job's own project, so a
 * job can never replay another project's trace even if its spec names
 * one), and are read by tb_trace_parse, the reader `tokbench run --trace
 * FILE` uses; the engine gets the result the same way (its target's
 * trace).  The api checked the trace when the job was queued; it may be
 * gone since (DELETE waits for no job that is not queued or running, and
 * a job queued in the same instant as a delete is possible): the job then
 * fails with that reason.
 */
#include <string.h>

#include "db/tb_tracestore.h"
#include "spec/tb_spec.h"
#include "spec/tb_trace.h"
#include "worker.h"

int
worker_trace_load(struct tb_db *db, const struct tb_queue_job *job, const struct tb_spec *spec,
                  struct tb_trace *t, char **why)
{
  *why = NULL;
  memset(t, 0, sizeof *t);
  const char *id = json_string_value(json_object_get(json_object_get(job->spec, "trace"), "id"));
  if (spec->trace.format[0] == '\0' || id == NULL)
    return 0;
  struct tb_tracestore_blob b;
  int rc = tb_tracestore_load(db, job->lease.job_id, id, &b);
  if (rc < 0)
    return rc;
  if (rc == 0) {
    *why = tb_xasprintf("trace.id: the trace %s is not in the job's project (deleted?)", id);
    return WORKER_TRACE_BAD;
  }
  enum tb_trace_format f;
  char err[TB_TRACE_ERR_MAX];
  if (strcmp(b.format, spec->trace.format) != 0 || !tb_trace_format_parse(b.format, &f)) {
    *why = tb_xasprintf("trace.format: the trace %s is in format \"%s\", not \"%s\"", id, b.format,
                        spec->trace.format);
    rc = WORKER_TRACE_BAD;
  } else if (tb_trace_parse(b.data, b.len, f, t, err, sizeof err) != 0) {
    *why = tb_xasprintf("trace %s: %s", id, err);
    rc = WORKER_TRACE_BAD;
  } else {
    snprintf(t->id, sizeof t->id, "%s", id);
    rc = 1;
  }
  tb_tracestore_blob_clear(&b);
  return rc;
}
