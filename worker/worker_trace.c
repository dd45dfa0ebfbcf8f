/*
 * worker_trace: the uploaded trace a job names (the spec's trace.id; issue
 * 25, docs/traces.md "Traces in the service").  The bytes come from
 * PostgreSQL (lib/db/tb_tracestore, through the job's own project, so a
 * job can never replay another project's trace even if its spec names
 * one), and are read by tb_trace_parse, the reader `tokbench run --trace
 * FILE` uses; the engine gets the result the same way (its target's
 * trace).  The api checked the trace when the job was queued, and wrote
 * its format into the spec if the spec gave none; the format is taken from
 * the store here too, for a spec stored otherwise.  A DELETE of the trace
 * answers 409 while a queued or running job names it, and cannot slip in
 * between the api's check and the job's insert (both hold the trace's row:
 * service/q_traces.c), so the trace is still there when the job runs; if
 * it is not (removed behind the api's back), the job fails naming the
 * trace and that it is no longer in the job's project.
 */
#include <string.h>

#include "db/tb_tracestore.h"
#include "spec/tb_spec.h"
#include "spec/tb_trace.h"
#include "worker.h"

int
worker_trace_load(struct tb_db *db, const struct tb_queue_job *job, struct tb_spec *spec,
                  struct tb_trace *t, char **why)
{
  *why = NULL;
  memset(t, 0, sizeof *t);
  const char *id = json_string_value(json_object_get(json_object_get(job->spec, "trace"), "id"));
  if (id == NULL)
    return 0;
  struct tb_tracestore_blob b;
  int rc = tb_tracestore_load(db, job->lease.job_id, id, &b);
  if (rc < 0)
    return rc;
  if (rc == 0) {
    *why = tb_xasprintf("trace.id: the trace %s is not in the job's project: it was deleted after "
                        "the job was queued (or never was the project's)",
                        id);
    return WORKER_TRACE_BAD;
  }
  if (spec->trace.format[0] == '\0') /* left out: the stored trace's */
    snprintf(spec->trace.format, sizeof spec->trace.format, "%s", b.format);
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
