/*
 * q_schedules: the statements of /v1/schedules (service/api_schedules.c)
 * and of the ticker that fires them (service/api_schedtick.c); table
 * schedules and jobs.schedule_id / schedule_slot in sql/0016_schedules.sql.
 *
 * One function per statement (the SQL beside it in q_schedules.c), columns
 * read by name; each returns the row count or TB_DB_SOFT / TB_DB_HARD
 * unless it says otherwise.  Every statement of the routes names the
 * project: another project's schedule is no row.  The schedule document
 * (SCHEDULE_JSON) is built by PostgreSQL in the statement that reads it.
 *
 * Instants cross as text: epoch seconds ("1772953200") into next_run_at,
 * and a slot as PostgreSQL's own text of the timestamptz it read, handed
 * back unchanged (so it compares equal).
 */
#ifndef TB_Q_SCHEDULES_H
#define TB_Q_SCHEDULES_H

#include <stdbool.h>
#include <stdint.h>

#include "db/tb_db.h"
#include "base/tb_util.h"

#define TB_Q_SCHEDULES_ID_LEN 36

/* The database's clock now, plus offset_s (the schedules' test clock,
 * TOKBENCH_SCHEDULE_CLOCK_OFFSET_S), in whole seconds since the epoch
 * (floor).  Returns 1. */
int tb_q_schedules_now(struct tb_db *db, int64_t offset_s, int64_t *now_s) TB_MUST_CHECK;

/* What a create or a change writes (strings borrowed; NULL = SQL NULL):
 * exactly one of preset_name and spec (a normalised job spec's JSON text);
 * labels a JSON object's text (NULL: {}); next_run_s the first fire as
 * epoch seconds' text, NULL while paused. */
struct tb_q_schedules_row {
  const char *endpoint_id, *preset_name, *spec, *cron, *timezone, *labels;
  bool paused;
  const char *next_run_s;
};

/* Answers besides 1 and 0 of insert and update: the project holds cap
 * schedules already; the endpoint is not one of the project's live ones;
 * the project has no preset of that name. */
#define TB_Q_SCHEDULES_FULL 2
#define TB_Q_SCHEDULES_NO_ENDPOINT 3
#define TB_Q_SCHEDULES_NO_PRESET 4

/*
 * Inserts a schedule of project_id while the project has fewer than cap
 * schedules (cap <= 0: no cap), counted after taking the project's row
 * lock (FOR NO KEY UPDATE, in a transaction of its own unless the caller
 * is in one), so concurrent creates cannot pass the cap together.
 * Returns 1 with its document (*doc, new), TB_Q_SCHEDULES_FULL with the
 * project's count in *count, TB_Q_SCHEDULES_NO_ENDPOINT,
 * TB_Q_SCHEDULES_NO_PRESET, or TB_DB_SOFT / TB_DB_HARD.
 */
int tb_q_schedules_insert(struct tb_db *db, const char *project_id,
                          const struct tb_q_schedules_row *row, int64_t cap, char **doc,
                          int64_t *count) TB_MUST_CHECK;
/* The project's schedules, oldest first, as a JSON array (*doc, new);
 * always 1 row. */
int tb_q_schedules_list(struct tb_db *db, const char *project_id, char **doc) TB_MUST_CHECK;
/* One schedule's document (*doc, new); 0: no such schedule. */
int tb_q_schedules_get(struct tb_db *db, const char *id, const char *project_id,
                       char **doc) TB_MUST_CHECK;
/*
 * Replaces what row says of schedule id; next_run_at too only when
 * reschedule (a new cron, zone or pause state: else the ticker's stays, so
 * a change of labels never brings back a slot that fired).  Resuming
 * clears paused_reason.  Returns 1 with the document (*doc, new), 0 no
 * such schedule, TB_Q_SCHEDULES_NO_ENDPOINT, TB_Q_SCHEDULES_NO_PRESET,
 * TB_DB_SOFT / TB_DB_HARD.
 */
int tb_q_schedules_update(struct tb_db *db, const char *id, const char *project_id,
                          const struct tb_q_schedules_row *row, bool reschedule,
                          char **doc) TB_MUST_CHECK;
/* Deletes it (its jobs stay, their schedule_id cleared); 1 or 0. */
int tb_q_schedules_delete(struct tb_db *db, const char *id, const char *project_id) TB_MUST_CHECK;

/* ---------------------------------------------------------------- ticker */

/* A due schedule the ticker holds (FOR UPDATE) until its transaction
 * ends. */
struct tb_q_schedules_due {
  char id[TB_Q_SCHEDULES_ID_LEN + 1], project_id[TB_Q_SCHEDULES_ID_LEN + 1];
  char endpoint_id[TB_Q_SCHEDULES_ID_LEN + 1];
  char preset_id[TB_Q_SCHEDULES_ID_LEN + 1]; /* "" when none (or deleted) */
  char *preset_name, *spec, *labels;         /* new or NULL */
  char cron[260], timezone[68];
  char slot[64]; /* next_run_at, the slot being fired, as PostgreSQL wrote it */
  int64_t now_s; /* the clock of the claim (with the offset) */
};
/* Inside the caller's transaction: locks the soonest schedule that is not
 * paused and whose next_run_at is at or before now() + offset_s, skipping
 * those another transaction holds (FOR UPDATE SKIP LOCKED).  1 with *out
 * (clear with tb_q_schedules_due_clear), 0 when none is due. */
int tb_q_schedules_claim(struct tb_db *db, int64_t offset_s,
                         struct tb_q_schedules_due *out) TB_MUST_CHECK;
void tb_q_schedules_due_clear(struct tb_q_schedules_due *d);
/* The endpoint's base URL (*base_url, new) and whether it was deleted; 0
 * when the project has no such endpoint. */
int tb_q_schedules_endpoint(struct tb_db *db, const char *endpoint_id, const char *project_id,
                            char **base_url, bool *deleted) TB_MUST_CHECK;
/* The spec of preset preset_id of project_id (*spec, new); 0 when gone. */
int tb_q_schedules_preset_spec(struct tb_db *db, const char *preset_id, const char *project_id,
                               char **spec) TB_MUST_CHECK;
/* The slot of schedule id is done: next_run_at becomes next_s (epoch
 * seconds' text); with job_id (may be NULL) the slot ran (last_run_at,
 * last_job_id, runs + 1), with error (may be NULL) why it did not
 * (last_error).  Only while next_run_at is still slot: 1, else 0. */
int tb_q_schedules_advance(struct tb_db *db, const char *id, const char *slot, const char *next_s,
                           const char *job_id, const char *error) TB_MUST_CHECK;
/* Schedule id pauses itself for reason (paused_reason and last_error). */
int tb_q_schedules_pause(struct tb_db *db, const char *id, const char *reason) TB_MUST_CHECK;

#endif
