/*
 * tb_tenancy: what one project may take of the shared service (issue 13).
 *
 * tokbench is one api, one worker pool and one database for many projects.
 * The operator sets, for every project alike (docs/deploy.md, "Limits and
 * fair share"):
 *
 *   TOKBENCH_LIMIT_QUEUED        queued jobs of a project (api: 429 above)
 *   TOKBENCH_LIMIT_RUNNING       running jobs of a project (workers: the
 *                                rest wait queued; a run slot per job,
 *                                sql/0009_tenancy.sql)
 *   TOKBENCH_LIMIT_JOB_SECONDS   a job's size: cells x (duration_s +
 *                                settle_s) seconds (api: 422 above)
 *   TOKBENCH_LIMIT_MAX_ATTEMPTS  a job's max_attempts (api: 422 above)
 *   TOKBENCH_SHARED_GROUPS       exclusive groups shared by every project
 *                                (any other group is the project's own)
 *   TOKBENCH_REPLAY_RETENTION_S  how long hook deliveries and
 *                                Idempotency-Keys are kept (replays are
 *                                recognised that long), pruned every
 *                                TOKBENCH_PRUNE_INTERVAL_S by the workers
 *
 * Fair share itself is the claim's order (lib/db/tb_queue.c): the project with
 * the fewest running jobs, then the one served least recently; priority
 * orders jobs inside a project only.
 *
 * The size of a job is counted before it runs, from its spec, by the one
 * plan of its cells (lib/spec/tb_plan.h, its bound: contexts x concurrency
 * decode cells plus the prefill cells, each one window (duration_s) and
 * one settle (settle_s) per repeat, plus the rate cells); the api passes
 * the figure in, so this module knows nothing of specs or cells.
 */
#ifndef TB_TENANCY_H
#define TB_TENANCY_H

#include <stdbool.h>
#include <stdint.h>

#include "base/tb_cfg.h"
#include "db/tb_db.h"
#include "base/tb_util.h"

/* TOKBENCH_SHARED_GROUPS: at most this many names, each an exclusive_group
 * (1 to 100 of [A-Za-z0-9._-]). */
#define TB_TENANCY_SHARED_MAX 64
#define TB_TENANCY_GROUP_MAX 100

/* The config keys, for the key tables of tokbench-api and tokbench-worker. */
#define TB_TENANCY_CFG_KEYS                                                                      \
  { "TOKBENCH_LIMIT_QUEUED", "100", "queued jobs per project (429 above; 0: no limit)", false }, \
    { "TOKBENCH_LIMIT_RUNNING", "8", "running jobs per project (more wait queued; 0: no limit)", \
      false },                                                                                   \
    { "TOKBENCH_LIMIT_JOB_SECONDS", "21600",                                                     \
      "largest job: cells x repeats x (duration_s + settle_s) seconds (422 above; 0: no limit)", \
      false },                                                                                   \
    { "TOKBENCH_LIMIT_MAX_ATTEMPTS", "5", "largest max_attempts of a job (422 above)", false },  \
    { "TOKBENCH_SHARED_GROUPS", "",                                                              \
      "exclusive groups shared by all projects, comma-separated (others are per project)",       \
      false },                                                                                   \
    { "TOKBENCH_WORKER_LIVE_S", "30",                                                            \
      "a worker seen this recently is live: a job of N shards needs N + 1 (422 below)", false }, \
    { "TOKBENCH_REPLAY_RETENTION_S", "604800",                                                   \
      "seconds hook deliveries and Idempotency-Keys are kept (replays recognised)", false },     \
  {                                                                                              \
    "TOKBENCH_PRUNE_INTERVAL_S", "3600", "seconds between prunes of those (by workers)", false   \
  }

struct tb_tenancy {
  int64_t queued;      /* 0: no limit */
  int64_t running;     /* 0: no limit */
  int64_t job_seconds; /* 0: no limit */
  int64_t max_attempts;
  char *shared_groups; /* "a,b" without spaces; "" for none (owned) */
  int64_t retention_s;
  int64_t prune_interval_s;
  int64_t worker_live_s; /* tb_workers_live's window */
};

/* Why a job is refused: the limit's name as the api shows it ("queued_jobs",
 * "running_jobs", "job_seconds", "max_attempts"), the setting, the limit and
 * what the job (or the project) has. */
struct tb_tenancy_refusal {
  const char *limit;
  const char *setting;
  int64_t max;
  double value;
  bool too_large; /* 422 (the job itself) rather than 429 (the project's count) */
  char detail[160];
};

/* Reads the TB_TENANCY_CFG_KEYS of cfg into *t.  False with *err (new
 * string) on a value out of range or a shared group that is not a group
 * name; *t then holds nothing to clear. */
bool tb_tenancy_from_cfg(struct tb_tenancy *t, const struct tb_cfg *cfg, char **err) TB_MUST_CHECK;
void tb_tenancy_clear(struct tb_tenancy *t);

/* Checks a job's own limits against t: job_seconds, its size (tb_plan's
 * bound, tb_plan_job_seconds; negative: not known, not limited), and
 * max_attempts, the job's own (<= 0: not given; the default is the api's,
 * within the limit).  True when the job fits; false with *why filled
 * (too_large set). */
bool tb_tenancy_check_job(const struct tb_tenancy *t, double job_seconds, int64_t max_attempts,
                          struct tb_tenancy_refusal *why) TB_MUST_CHECK;

/* A job of shards shards (> 1) needs shards + 1 live workers (one holds it,
 * one drives each shard: docs/deploy.md): true when live is enough, else
 * false with *why filled (422, limit "live_workers", max: the shards live
 * workers can drive, value: shards). */
bool tb_tenancy_check_shards(const struct tb_tenancy *t, int64_t shards, int64_t live,
                             struct tb_tenancy_refusal *why) TB_MUST_CHECK;

/* Fills *why for a project that may not queue one more job: it has queued
 * (>= t->queued) queued jobs (TOKBENCH_LIMIT_QUEUED).  The count itself is
 * part of the job insert (service/q_jobs.h), under the project's lock, so
 * concurrent submits cannot pass the limit together. */
void tb_tenancy_refuse_queued(const struct tb_tenancy *t, int64_t queued,
                              struct tb_tenancy_refusal *why);

/* Deletes hook deliveries received and Idempotency-Keys created more than
 * retention_s seconds ago.  Returns the number of rows deleted, or
 * TB_DB_SOFT / TB_DB_HARD. */
int tb_tenancy_prune(struct tb_db *db, int64_t retention_s) TB_MUST_CHECK;

#endif
