/*
 * q_traces: the statements of /v1/traces (service/api_traces.c) and the
 * trace check of a job's submission; table traces in sql/0014_traces.sql.
 * One function per statement (the SQL beside it in q_traces.c), columns
 * read by name; each returns the row count or TB_DB_SOFT / TB_DB_HARD.
 * The worker's statement (loading a job's trace) is lib/db/tb_tracestore.
 */
#ifndef TB_Q_TRACES_H
#define TB_Q_TRACES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "db/tb_db.h"
#include "q_page.h"
#include "base/tb_util.h"

/* A trace to store: the bytes as sent, what tb_trace read of them. */
struct tb_q_traces_row {
  const char *project_id;
  const char *name;
  const char *format; /* tb_trace_format_name's */
  const void *data;
  size_t len;
  bool gzip;
  const char *sha256;  /* 64 hex */
  const char *summary; /* tb_tracesum_json's, as text */
  int64_t max_count;   /* TOKBENCH_LIMIT_TRACES (<= 0: no cap) */
  int64_t max_bytes;   /* TOKBENCH_LIMIT_TRACE_BYTES (<= 0: no cap) */
};

/* Inserts row when the project stays within both caps with it, in a
 * transaction of its own that holds the project's trace lock, so two
 * uploads at once cannot both take the last room.  1 with the trace's
 * document (*doc, new) and its id; 0 refused by a cap; either way *count
 * and *bytes hold the project's traces and stored bytes before it. */
int tb_q_traces_insert(struct tb_db *db, const struct tb_q_traces_row *row, char **doc, char id[37],
                       int64_t *count, int64_t *bytes) TB_MUST_CHECK;

/* The project's traces (*count) and their stored bytes (*bytes): 1. */
int tb_q_traces_usage(struct tb_db *db, const char *project_id, int64_t *count,
                      int64_t *bytes) TB_MUST_CHECK;

/* One listed trace: its creation (µs since the epoch) and id make the
 * cursor; doc is its document (borrowed, len bytes). */
typedef tb_q_page_item_fn tb_q_traces_item_fn;
/* The project's traces, newest first, after the cursor (after_us and
 * after_id, both NULL: from the newest), at most limit; fn for each. */
int tb_q_traces_list(struct tb_db *db, const char *project_id, const char *after_us,
                     const char *after_id, int limit, tb_q_traces_item_fn fn,
                     void *cls) TB_MUST_CHECK;
/* Trace id of project_id: 1 with its document (*doc, new); 0 none. */
int tb_q_traces_get(struct tb_db *db, const char *id, const char *project_id,
                    char **doc) TB_MUST_CHECK;
/* Deletes trace id of project_id unless a queued or running job of the
 * project names it: 1 deleted; 0 not, with *in_use (true: such a job;
 * false: no such trace).  A transaction of its own that locks the row
 * before it looks for jobs, so a job being queued with the trace (which
 * holds the row through tb_q_traces_format) is seen once committed. */
int tb_q_traces_delete(struct tb_db *db, const char *id, const char *project_id,
                       bool *in_use) TB_MUST_CHECK;
/* The format of trace id of project_id into format, and its summary's
 * span_s (first arrival to last, seconds; 0 when unknown) into *span_s:
 * 1; 0 none.  The row stays locked FOR KEY SHARE to the end of the
 * caller's transaction if any (a DELETE of it waits: tb_q_traces_delete). */
int tb_q_traces_format(struct tb_db *db, const char *id, const char *project_id, char format[16],
                       double *span_s) TB_MUST_CHECK;

#endif
