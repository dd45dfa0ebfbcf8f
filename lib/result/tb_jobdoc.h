/*
 * tb_jobdoc: the one vocabulary of a job's states and the one builder of the
 * document GET /v1/jobs/{id}/result and /report return (and `tokbench
 * submit` prints).
 *
 * Two words, never mixed:
 *   state   the job's life (jobs.state; "state" in every api answer and
 *           event):  queued -> running -> succeeded | failed | cancelled.
 *           The last three are terminal: nothing changes after them.
 *   status  the result document's verdict on its cells ("status" in a
 *           result document, api/result.schema.json):
 *             complete   every cell done, none in error
 *             partial    every cell done, some in error
 *             failed     the run could not go on (see error); the cells
 *                        hold what was measured before
 *             cancelled  stopped by the caller
 *             running    the job has not finished (state queued or
 *                        running): the header and the cells so far
 * A job that finished with a stored document answers with that document; a
 * terminal job without one (cancelled before it started, failed in
 * discovery) gets the status of its state (succeeded -> complete).
 */
#ifndef TB_JOBDOC_H
#define TB_JOBDOC_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include "base/tb_util.h"

/* True for succeeded, failed and cancelled; false for anything else
 * (queued, running, NULL). */
bool tb_jobdoc_terminal(const char *state);

/* True for the five job states. */
bool tb_jobdoc_state_ok(const char *state);

/* The status of a document of a job in state that has no stored result
 * document: "running" (queued, running), "complete" (succeeded), "failed",
 * "cancelled".  A static string. */
const char *tb_jobdoc_status_of(const char *state);

/* One job's row, all borrowed (text as the database gives it; NULL = SQL
 * NULL). */
struct tb_jobdoc_row {
  const char *job_id;
  const char *state;
  const char *result;  /* jobs.result: the engine's final document */
  const char *header;  /* jobs.header: known once discovery is done */
  const char *cells;   /* JSON array of the cells measured so far */
  const char *error;   /* jobs.error */
  int64_t cells_total; /* < 0: unknown */
};

/*
 * The job's document: the stored result when the job is terminal and has
 * one, else the header (or {}) with "cells", "status" (tb_jobdoc_status_of),
 * "error" and, when known, "progress": {"cells_total"}.  Either way with
 * "job_id" and "state" set, and the launch command redacted (tb_redact), so
 * a result stored before redaction shows no secret.  New reference.
 */
json_t *tb_jobdoc_build(const struct tb_jobdoc_row *row) TB_MUST_CHECK;

#endif
