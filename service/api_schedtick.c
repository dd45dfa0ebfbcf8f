/*
 * api_schedtick: the ticker that fires the schedules (api_schedules.h).
 *
 * Every api process runs one thread, on a database connection of its own,
 * that ticks every TOKBENCH_SCHEDULE_TICK_MS.  A tick handles the due
 * schedules one by one, each in a transaction of its own:
 *
 *   BEGIN
 *   claim      the soonest due row, FOR UPDATE SKIP LOCKED (q_schedules.c):
 *              another replica holding it is skipped, one that fired it
 *              and committed is seen as fired (not due) when the row is
 *              read again under the lock
 *   check      zone and cron (the next slot, strictly after now), the
 *              endpoint (not deleted, not refused by the egress policy),
 *              the preset, the job spec (tb_spec_job)
 *   insert     the job through the one job insert (tb_api_job_insert_from:
 *              the queued limit, the job size, fair share as for any
 *              submit), naming its schedule and slot
 *   advance    next_run_at to the next slot after now: after downtime the
 *              slots missed are one run, not one each
 *   COMMIT     then NOTIFY the workers (outside, as api_jobs.c does)
 *
 * One schedule a transaction, not a batch: the job insert takes the
 * project's row lock (q_jobs.c), and replicas holding several schedules of
 * several projects could take those locks in opposite orders.  A refusal
 * by a limit (the project's queued jobs) is written on the schedule
 * (last_error) and the slot counts as done: a project's storm of schedules
 * neither retries nor holds up other projects' (the tick goes on with the
 * next row).  A hard database error on one schedule skips its slot with
 * the error recorded, so that one bad row cannot stall the tick for every
 * other; a soft one (a lost connection, a serialization failure) leaves the
 * slot due for the next tick.
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "api_jobs.h"
#include "api_schedules.h"
#include "api_traces.h"
#include "q_schedules.h"
#include "base/tb_log.h"
#include "net/tb_egress.h"
#include "spec/tb_spec.h"

/* Slots one tick handles at most before it sleeps (the next tick goes on
 * at once when it had this many). */
#define TICK_BATCH 50
/* Room for a reason in schedules.paused_reason / last_error (500). */
#define REASON_MAX 480

/* s cut to at most REASON_MAX bytes, never inside a UTF-8 sequence. */
static void
reason_cut(char *s)
{
  size_t n = strlen(s);
  if (n <= REASON_MAX)
    return;
  n = REASON_MAX;
  while (n > 0 && ((unsigned char)s[n] & 0xc0) == 0x80)
    n--;
  s[n] = '\0';
}

/* How a claimed slot ended. */
enum outcome {
  FIRED,   /* a job was queued */
  REFUSED, /* a limit refused the job: recorded, the schedule goes on */
  PAUSED,  /* the schedule paused itself */
};

/* What a claimed slot is handled with, freed in one place. */
struct slot {
  struct tb_q_schedules_due d;
  char next[24];
  char *base_url, *preset_spec;
  json_t *job, *errors;
  char job_id[TB_API_ID_LEN + 1];
  char reason[REASON_MAX + 64];
};

static void
slot_clear(struct slot *s)
{
  tb_q_schedules_due_clear(&s->d);
  free(s->base_url);
  free(s->preset_spec);
  json_decref(s->job);
  json_decref(s->errors);
}

/* The first error of a tb_spec_job error array, "field: detail". */
static void
first_error(const json_t *errors, char *out, size_t len)
{
  const json_t *e = json_array_get(errors, 0);
  const char *f = json_string_value(json_object_get(e, "field"));
  const char *d = json_string_value(json_object_get(e, "detail"));
  snprintf(out, len, "%s: %s", f ? f : "spec", d ? d : "invalid");
}

/* The slot's job spec into s->job, or false with the reason to pause in
 * s->reason; < 0 on a database error. */
static int
build_job(struct tb_db *db, struct slot *s)
{
  bool deleted = false;
  int rc = tb_q_schedules_endpoint(db, s->d.endpoint_id, s->d.project_id, &s->base_url, &deleted);
  if (rc < 0)
    return rc;
  char why[TB_EGRESS_WHY_MAX];
  if (rc == 0 || deleted || s->base_url == NULL) {
    snprintf(s->reason, sizeof s->reason, "the endpoint %s was deleted", s->d.endpoint_id);
    return 0;
  }
  if (!tb_egress_url_ok(tb_egress_current(), s->base_url, why, sizeof why)) {
    snprintf(s->reason, sizeof s->reason, "the endpoint's base_url is refused: %s", why);
    return 0;
  }
  json_t *base = NULL;
  if (s->d.preset_name != NULL) {
    rc = s->d.preset_id[0] != '\0'
           ? tb_q_schedules_preset_spec(db, s->d.preset_id, s->d.project_id, &s->preset_spec)
           : 0;
    if (rc < 0)
      return rc;
    if (rc == 0 || s->preset_spec == NULL) {
      snprintf(s->reason, sizeof s->reason, "the preset \"%s\" was deleted", s->d.preset_name);
      return 0;
    }
    base = json_loads(s->preset_spec, 0, NULL);
  } else {
    base = json_loads(s->d.spec != NULL ? s->d.spec : "", 0, NULL);
  }
  json_t *labels = json_loads(s->d.labels != NULL ? s->d.labels : "{}", 0, NULL);
  rc = tb_api_schedules_job_spec(base, s->d.endpoint_id, labels, s->d.id, &s->job, &s->errors);
  json_decref(base);
  json_decref(labels);
  if (rc != TB_SPEC_OK) {
    char e[300];
    first_error(s->errors, e, sizeof e);
    snprintf(s->reason, sizeof s->reason, "the job spec no longer passes: %s", e);
    return 0;
  }
  return 1;
}

/* The slot claimed in s, inside the claim's transaction: its outcome into
 * *out, or < 0 on a database error. */
static int
handle(struct tb_db *db, const struct tb_api_schedtick_opts *o, struct slot *s, enum outcome *out)
{
  struct tb_api_schedules_why why;
  int64_t next = 0;
  *out = PAUSED;
  if (!tb_api_schedules_next(o->zoneinfo_dir, s->d.cron, s->d.timezone, s->d.now_s, 0, &next,
                             &why)) {
    snprintf(s->reason, sizeof s->reason, "%s: %s", why.field, why.detail);
    goto pause;
  }
  snprintf(s->next, sizeof s->next, "%lld", (long long)next);
  int rc = build_job(db, s);
  if (rc < 0)
    return rc;
  if (rc == 0)
    goto pause;
  json_t *terr = NULL;
  struct tb_tenancy_refusal refusal;
  struct tb_api_job_origin origin = { .schedule_id = s->d.id, .schedule_slot = s->d.slot };
  rc = tb_api_traces_job_insert_from(db, o->ten, s->d.project_id, NULL, s->job, &origin, s->job_id,
                                     NULL, &terr, &refusal);
  if (rc == TB_API_TRACES_BAD) {
    char e[300];
    first_error(terr, e, sizeof e);
    snprintf(s->reason, sizeof s->reason, "the job spec no longer passes: %s", e);
  } else if (rc == 0) {
    snprintf(s->reason, sizeof s->reason, "the endpoint %s was deleted", s->d.endpoint_id);
  } else if (rc == TB_API_JOB_REFUSED) {
    *out = REFUSED;
    snprintf(s->reason, sizeof s->reason, "%s", refusal.detail);
    rc = tb_q_schedules_advance(db, s->d.id, s->d.slot, s->next, NULL, s->reason);
  } else if (rc == 1) {
    *out = FIRED;
    rc = tb_q_schedules_advance(db, s->d.id, s->d.slot, s->next, s->job_id, NULL);
  }
  json_decref(terr);
  if (rc < 0)
    return rc;
  if (*out != PAUSED)
    return 1;
pause:
  reason_cut(s->reason);
  rc = tb_q_schedules_pause(db, s->d.id, s->reason);
  return rc == 0 ? TB_DB_HARD : rc; /* the row is locked: it is there */
}

/* After a hard error: the slot skipped with the error written, in a
 * statement of its own, unless another replica moved it meanwhile.  False
 * when even that fails (the tick ends there: no loop on one bad row). */
static bool
skip_slot(struct tb_db *db, struct slot *s, const struct tb_api_schedtick_opts *o)
{
  struct tb_api_schedules_why why;
  int64_t next = 0;
  if (!tb_api_schedules_next(o->zoneinfo_dir, s->d.cron, s->d.timezone, s->d.now_s, 0, &next, &why))
    return false; /* handle() pauses it, once the database lets it */
  snprintf(s->next, sizeof s->next, "%lld", (long long)next);
  if (tb_q_schedules_advance(db, s->d.id, s->d.slot, s->next, NULL,
                             "the job could not be written (a database error): this slot was "
                             "skipped") < 0) {
    tb_log(TB_LOG_WARN, "cannot skip a schedule's slot", "schedule", TB_LS, s->d.id, NULL);
    return false;
  }
  return true;
}

/* One due slot: 1 handled (*queued: a job to announce in job_id; its
 * schedule's id into sched_id), 0 none was due, < 0 a database error. */
static int
fire_one(struct tb_db *db, const struct tb_api_schedtick_opts *o, char job_id[TB_API_ID_LEN + 1],
         bool *queued, char sched_id[TB_API_ID_LEN + 1])
{
  struct slot s = { 0 };
  enum outcome out = PAUSED;
  *queued = false;
  int rc = tb_db_begin(db);
  if (rc < 0)
    return rc;
  rc = tb_q_schedules_claim(db, o->clock_offset_s, &s.d);
  if (rc <= 0) {
    tb_db_rollback(db);
    slot_clear(&s);
    return rc;
  }
  memcpy(sched_id, s.d.id, sizeof s.d.id);
  rc = handle(db, o, &s, &out);
  if (rc >= 0)
    rc = tb_db_commit(db);
  else
    tb_db_rollback(db);
  if (rc == TB_DB_HARD) {
    tb_log(TB_LOG_WARN, "a schedule's slot failed", "schedule", TB_LS, s.d.id, "slot", TB_LS,
           s.d.slot, NULL);
    rc = skip_slot(db, &s, o) ? 1 : TB_DB_HARD;
  } else if (rc >= 0) {
    rc = 1;
    *queued = out == FIRED;
    memcpy(job_id, s.job_id, sizeof s.job_id);
    tb_log(out == FIRED ? TB_LOG_INFO : TB_LOG_WARN,
           out == FIRED     ? "schedule fired"
           : out == REFUSED ? "schedule refused"
                            : "schedule paused",
           "schedule", TB_LS, s.d.id, "slot", TB_LS, s.d.slot, "job", TB_LS,
           out == FIRED ? s.job_id : NULL, "reason", TB_LS, out == FIRED ? NULL : s.reason, NULL);
  }
  slot_clear(&s);
  return rc;
}

int
tb_api_schedtick_run(struct tb_db *db, const struct tb_api_schedtick_opts *o, int max)
{
  int done = 0;
  char last[TB_API_ID_LEN + 1] = "";
  while (done < max) {
    char job_id[TB_API_ID_LEN + 1], sched_id[TB_API_ID_LEN + 1] = "";
    bool queued = false;
    int rc = fire_one(db, o, job_id, &queued, sched_id);
    if (rc < 0)
      return done > 0 ? done : rc;
    if (rc == 0)
      break;
    if (queued)
      tb_api_job_queued(db, job_id);
    done++;
    /* a handled slot leaves its row not due; the same row again means it
     * did not (a bug): end the tick rather than spin on it */
    if (strcmp(sched_id, last) == 0) {
      tb_log(TB_LOG_ERROR, "a schedule stayed due after its slot was handled", "schedule", TB_LS,
             sched_id, NULL);
      break;
    }
    memcpy(last, sched_id, sizeof last);
  }
  return done;
}

/* ---------------------------------------------------------------- thread */

struct tb_api_schedtick {
  pthread_t thread;
  pthread_mutex_t lock;
  pthread_cond_t wake;
  bool stop;
  struct tb_db *db;
  struct tb_api_schedtick_opts o;
  int64_t tick_ms;
};

static void *
ticker(void *arg)
{
  struct tb_api_schedtick *t = arg;
  bool warned = false;
  pthread_mutex_lock(&t->lock);
  while (!t->stop) {
    pthread_mutex_unlock(&t->lock);
    int n = tb_api_schedtick_run(t->db, &t->o, TICK_BATCH);
    if (n < 0 && !warned) /* once until it works again: the database is down */
      tb_log(TB_LOG_WARN, "schedules: the database failed; retrying every tick", NULL);
    warned = n < 0;
    pthread_mutex_lock(&t->lock);
    if (n == TICK_BATCH || t->stop)
      continue;
    struct timespec until;
    clock_gettime(CLOCK_MONOTONIC, &until);
    int64_t ns = until.tv_nsec + (t->tick_ms % 1000) * 1000000;
    until.tv_sec += (time_t)(t->tick_ms / 1000 + ns / 1000000000);
    until.tv_nsec = (long)(ns % 1000000000);
    pthread_cond_timedwait(&t->wake, &t->lock, &until);
  }
  pthread_mutex_unlock(&t->lock);
  return NULL;
}

bool
tb_api_schedtick_start(struct tb_api *api)
{
  if (api->schedule_tick_ms <= 0) {
    tb_log(TB_LOG_INFO, "schedule ticker off (TOKBENCH_SCHEDULE_TICK_MS=0)", NULL);
    return true;
  }
  char *err = NULL;
  struct tb_db *db = tb_db_connect(tb_cfg_get(api->cfg, "TOKBENCH_DATABASE_URL"), 0, &err);
  if (db == NULL) {
    tb_log(TB_LOG_ERROR, "schedule ticker: cannot connect", "error", TB_LS, err, NULL);
    free(err);
    return false;
  }
  struct tb_api_schedtick *t = tb_xcalloc(1, sizeof *t);
  t->db = db;
  t->tick_ms = api->schedule_tick_ms;
  t->o = (struct tb_api_schedtick_opts){ .ten = &api->tenancy,
                                         .zoneinfo_dir = api->zoneinfo_dir,
                                         .clock_offset_s = api->schedule_clock_offset_s };
  pthread_condattr_t ca;
  pthread_condattr_init(&ca);
  pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
  pthread_cond_init(&t->wake, &ca);
  pthread_condattr_destroy(&ca);
  pthread_mutex_init(&t->lock, NULL);
  if (pthread_create(&t->thread, NULL, ticker, t) != 0) {
    tb_log(TB_LOG_ERROR, "schedule ticker: cannot start its thread", NULL);
    pthread_cond_destroy(&t->wake);
    pthread_mutex_destroy(&t->lock);
    tb_db_close(db);
    free(t);
    return false;
  }
  api->schedtick = t;
  return true;
}

void
tb_api_schedtick_stop(struct tb_api *api)
{
  struct tb_api_schedtick *t = api->schedtick;
  if (t == NULL)
    return;
  pthread_mutex_lock(&t->lock);
  t->stop = true;
  pthread_cond_signal(&t->wake);
  pthread_mutex_unlock(&t->lock);
  pthread_join(t->thread, NULL);
  pthread_cond_destroy(&t->wake);
  pthread_mutex_destroy(&t->lock);
  tb_db_close(t->db);
  free(t);
  api->schedtick = NULL;
}
