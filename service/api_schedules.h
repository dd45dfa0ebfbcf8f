/*
 * api_schedules: what the schedules' routes (api_schedules.c) and their
 * ticker (api_schedtick.c) share (issue 35, item 1): the settings, the job
 * spec of a run, the next fire of a cron, and the ticker itself.
 *
 * The rule of a schedule's times (docs/ci.md, "Schedules"): a five-field
 * cron expression (lib/base/tb_cron) in an IANA time zone read from its
 * TZif file (lib/base/tb_tz); a local time the clock skips fires once at the
 * end of the gap, one it shows twice fires once, at the first.  Each due
 * slot fires exactly once with any number of api replicas: the ticker
 * claims the row with FOR UPDATE SKIP LOCKED and inserts the job and the
 * next slot in one transaction (q_schedules.h, sql/0016_schedules.sql).
 */
#ifndef TB_API_SCHEDULES_H
#define TB_API_SCHEDULES_H

#include "api.h"

/* The config keys, for tokbench-api's key table. */
#define TB_API_SCHEDULE_CFG_KEYS                                                                \
  { "TOKBENCH_LIMIT_SCHEDULES", "20",                                                           \
    "schedules per project (POST /v1/schedules: 429 above; 0: "                                 \
    "no cap)",                                                                                  \
    false },                                                                                    \
    { "TOKBENCH_SCHEDULE_MIN_INTERVAL_S", "60",                                                 \
      "the shortest time a schedule may leave between two runs, over a year of its fires, DST " \
      "included (422 below)",                                                                   \
      false },                                                                                  \
    { "TOKBENCH_SCHEDULE_TICK_MS", "1000",                                                      \
      "how often this process looks for due schedules (0: never, other replicas fire them)",    \
      false },                                                                                  \
    { "TOKBENCH_SCHEDULE_CLOCK_OFFSET_S", "0",                                                  \
      "tests only: seconds added to the database's clock when schedules are due and planned",   \
      false },                                                                                  \
  {                                                                                             \
    "TOKBENCH_ZONEINFO_DIR", "/usr/share/zoneinfo",                                             \
      "the IANA time zones' TZif files (Debian's tzdata) that schedules name", false            \
  }

/* Reads TB_API_SCHEDULE_CFG_KEYS into api.  False with *err (new) on a bad
 * value. */
bool tb_api_schedules_config(struct tb_api *api, char **err) TB_MUST_CHECK;

/* Label a schedule's runs carry: its id (one series of history per
 * schedule; the slot is jobs.schedule_slot, not a label). */
#define TB_API_SCHEDULE_LABEL "schedule"

/*
 * The job spec of a run: base (a preset's spec or the schedule's own,
 * borrowed) with endpoint_id set, and labels: base's, then labels'
 * (borrowed, may be NULL), then TB_API_SCHEDULE_LABEL: schedule_id when
 * schedule_id is not NULL; validated by tb_spec_job as POST /v1/jobs
 * validates a body.  TB_SPEC_OK with *out (new), else *errors (new array,
 * fields named under "spec.").
 */
int tb_api_schedules_job_spec(const json_t *base, const char *endpoint_id, const json_t *labels,
                              const char *schedule_id, json_t **out, json_t **errors) TB_MUST_CHECK;

/* Why a cron or a zone cannot be planned: which field, and the sentence. */
struct tb_api_schedules_why {
  const char *field; /* "cron" or "timezone" */
  char detail[200];
};
/*
 * The first fire of cron in the time zone named zone (read from dir) strictly after
 * after_s (epoch seconds) into *next_s; with min_interval_s > 0, also that
 * no two fires over the year after it are closer (DST transitions
 * included).  False with *why: a cron that is not one, a zone unknown, a
 * cron that never fires or fires more often than min_interval_s.
 */
bool tb_api_schedules_next(const char *dir, const char *cron, const char *zone, int64_t after_s,
                           int64_t min_interval_s, int64_t *next_s,
                           struct tb_api_schedules_why *why) TB_MUST_CHECK;

/* ------------------------------------------------------------- the ticker */

struct tb_api_schedtick_opts {
  const struct tb_tenancy *ten; /* the limits every job is queued within */
  const char *zoneinfo_dir;
  int64_t clock_offset_s; /* added to the database's now(): the test clock */
};

/*
 * One tick: fires up to max due schedules, each in a transaction of its
 * own (claim, job insert, next slot; see q_schedules.h), as of the
 * database's now() + o->clock_offset_s.  A slot whose job a limit refuses
 * records why (last_error) and the schedule goes on; a schedule whose
 * endpoint is gone or refused by the egress policy, whose preset was
 * deleted or whose spec no longer passes pauses itself with the reason.
 * Returns the slots handled (0: none was due), or TB_DB_SOFT / TB_DB_HARD
 * when the database failed before any.  The queued jobs are announced
 * (NOTIFY) after each commit.
 */
int tb_api_schedtick_run(struct tb_db *db, const struct tb_api_schedtick_opts *o,
                         int max) TB_MUST_CHECK;

/* Starts the ticker thread of the process (TOKBENCH_SCHEDULE_TICK_MS; 0:
 * none), on a database connection of its own; false (logged) when it
 * cannot.  Stop joins it. */
bool tb_api_schedtick_start(struct tb_api *api) TB_MUST_CHECK;
void tb_api_schedtick_stop(struct tb_api *api);

#endif
