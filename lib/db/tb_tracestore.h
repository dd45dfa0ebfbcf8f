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
