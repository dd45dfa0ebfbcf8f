/*
 * tb_tracestore: the worker's statement on uploaded traces (sql/0014_traces.sql;
 * the api's are service/q_traces.c): the bytes of the trace a job names,
 * read only through the job's own project.
 */
#ifndef TB_TRACESTORE_H
#define TB_TRACESTORE_H

#include <stddef.h>

#include "db/tb_db.h"
#include "base/tb_util.h"

/* The settings of uploaded traces (README's configuration table): the
 * api's; the worker accepts them too, so that one config file serves both
 * (docs/deploy.md, Limits and fair share). */
#define TB_TRACESTORE_CFG_KEYS                                                                     \
  { "TOKBENCH_TRACE_MAX_BYTES", "33554432",                                                        \
    "largest trace a POST /v1/traces may send, in bytes as sent (gzip or not; 413 above)",         \
    false },                                                                                       \
    { "TOKBENCH_TRACE_MAX_MEMORY", "536870912",                                                    \
      "memory one trace's reading may take, in bytes: its inflated text, its tables and one JSON " \
      "line or conversation's tree, estimated before it is built (422 above; at most 536870912)",  \
      false },                                                                                     \
    { "TOKBENCH_LIMIT_TRACES", "100", "traces stored per project (429 above; 0: no cap)", false }, \
    { "TOKBENCH_LIMIT_TRACE_BYTES", "1073741824",                                                  \
      "bytes of traces stored per project, as sent (429 above; 0: no cap)", false },               \
  {                                                                                                \
    "TOKBENCH_TRACE_UPLOADS_PER_PROJECT", "2",                                                     \
      "trace uploads of one project being sent or read at once (429 above; 0: no cap)", false      \
  }

/* A stored trace as uploaded. */
struct tb_tracestore_blob {
  char format[16];     /* tb_trace_format_name's */
  char sha256[65];     /* of data */
  unsigned char *data; /* the bytes as sent (gzip or not); tb_xmalloc'd */
  size_t len;
};

/* The trace trace_id of job_id's project into *out: 1; 0 when that
 * project has no such trace (deleted, or another project's); TB_DB_SOFT /
 * TB_DB_HARD.  Free with tb_tracestore_blob_clear. */
int tb_tracestore_load(struct tb_db *db, const char *job_id, const char *trace_id,
                       struct tb_tracestore_blob *out) TB_MUST_CHECK;
void tb_tracestore_blob_clear(struct tb_tracestore_blob *b);

#endif
