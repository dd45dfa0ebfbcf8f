/* Unit tests: the schedules' ticker (service/api_schedtick.c) on a
 * throwaway cluster (pgtmp.h) with the real migrations, its clock moved
 * by the offset it takes (the test clock of TOKBENCH_SCHEDULE_CLOCK_OFFSET_S)
 * instead of waited for.
 *
 *   - exactly once: eight threads, each on its own connection, tick
 *     together over 60 due schedules, with the unique index on (schedule,
 *     slot) dropped so that the claim alone (FOR UPDATE SKIP LOCKED) is
 *     what is tested; then the index's own guard against a second job
 *   - a restart across due times: ten slots missed make one job, and the
 *     next slot is the first after the clock now
 *   - the clock: not due an hour early, due once it is moved an hour on
 *   - DST through the ticker: 02:30 in New York on 2026-03-08 (skipped)
 *     fires at 07:00 UTC, and the next slot is 2026-03-09 06:30 UTC
 *   - a limit's refusal is recorded and the schedule goes on; an endpoint
 *     the egress policy refuses pauses it with the reason */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "pgtmp.h"
#include "pgq.h"
#include "api_schedules.h"
#include "base/tb_tz.h"
#include "net/tb_egress.h"

static struct pgtmp cluster;
static struct tb_db *db;
static char project[40], endpoint[40];
static struct tb_tenancy ten;
static struct tb_api_schedtick_opts opts;

#define q1(out, len, ...) pgq_one(tb_db_conn(db), out, len, __VA_ARGS__)

static int
group_setup(void **state)
{
  (void)state;
  if (!pgq_cluster_up(&cluster, &db))
    return -1;
  pgq_endpoint(tb_db_conn(db), project, endpoint, "{}", "{}");
  ten = (struct tb_tenancy){ .max_attempts = 5, .shared_groups = "", .worker_live_s = 30 };
  opts = (struct tb_api_schedtick_opts){ .ten = &ten, .zoneinfo_dir = TB_TZ_DIR_DEFAULT };
  return 0;
}

static int
group_teardown(void **state)
{
  (void)state;
  tb_db_close(db);
  pgtmp_down(&cluster);
  return 0;
}

static int
clean(void **state)
{
  (void)state;
  char v[8];
  q1(v, sizeof v, "DELETE FROM jobs");
  q1(v, sizeof v, "DELETE FROM schedules");
  ten.queued = 0;
  opts.clock_offset_s = 0;
  return 0;
}

/* A schedule of the test's project, its next slot next (SQL). */
static void
sched(char id[40], const char *cron, const char *tz, const char *next)
{
  q1(id, 40,
     "INSERT INTO schedules (project_id, endpoint_id, spec, cron, timezone, next_run_at) VALUES "
     "('%s', '%s', '{\"contexts\": [1024], \"concurrency\": [1], \"duration_s\": 1}', '%s', '%s', "
     "%s) RETURNING id",
     project, endpoint, cron, tz, next);
}

/* count(*) of the jobs of schedule id, or of all scheduled jobs (NULL). */
static long
jobs_of(const char *id)
{
  char v[32];
  if (id != NULL)
    q1(v, sizeof v, "SELECT count(*) FROM jobs WHERE schedule_id = '%s'", id);
  else
    q1(v, sizeof v, "SELECT count(*) FROM jobs WHERE schedule_id IS NOT NULL");
  return strtol(v, NULL, 10);
}

/* One count(*) of SQL without arguments. */
static long
count_sql(const char *sql)
{
  char v[32];
  q1(v, sizeof v, "%s", sql);
  return strtol(v, NULL, 10);
}

/* ------------------------------------------------------------ exactly once */

#define THREADS 8
#define SCHEDULES 60

static pthread_barrier_t go;

static void *
ticker_thread(void *arg)
{
  long *handled = arg;
  char *err = NULL;
  struct tb_db *mine = tb_db_connect(cluster.url, 5000, &err);
  if (mine == NULL) {
    free(err);
    *handled = -1;
    return NULL;
  }
  pthread_barrier_wait(&go);
  for (;;) {
    int n = tb_api_schedtick_run(mine, &opts, 3);
    if (n < 0) {
      *handled = -1000;
      break;
    }
    if (n == 0)
      break;
    *handled += n;
  }
  tb_db_close(mine);
  return NULL;
}

static void
test_racing_tickers_fire_each_slot_once(void **state)
{
  (void)state;
  char v[64], id[40];
  /* the claim alone: without the index's guard a double fire would stand */
  q1(v, sizeof v, "DROP INDEX jobs_schedule_slot");
  for (int i = 0; i < SCHEDULES; i++)
    sched(id, "* * * * *", "UTC", "now() - interval '30 seconds'");
  pthread_t th[THREADS];
  long handled[THREADS] = { 0 };
  pthread_barrier_init(&go, NULL, THREADS);
  for (int i = 0; i < THREADS; i++)
    pthread_create(&th[i], NULL, ticker_thread, &handled[i]);
  long total = 0, busy = 0;
  for (int i = 0; i < THREADS; i++) {
    pthread_join(th[i], NULL);
    assert_true(handled[i] >= 0);
    total += handled[i];
    busy += handled[i] > 0;
  }
  pthread_barrier_destroy(&go);
  assert_int_equal(total, SCHEDULES);
  assert_true(busy >= 2); /* they did race */
  assert_int_equal(jobs_of(NULL), SCHEDULES);
  assert_int_equal(count_sql("SELECT count(*) FROM (SELECT schedule_id, schedule_slot FROM jobs "
                             "GROUP BY 1, 2 HAVING count(*) > 1) d"),
                   0);
  assert_int_equal(
    count_sql("SELECT count(*) FROM schedules WHERE runs = 1 AND next_run_at > now()"), SCHEDULES);
  q1(v, sizeof v,
     "CREATE UNIQUE INDEX jobs_schedule_slot ON jobs (schedule_id, schedule_slot) "
     "WHERE schedule_id IS NOT NULL");
}

/* A job of the slot written already (by a broken claim, say): the index
 * refuses the second, and the slot is skipped with the error recorded
 * rather than stalling the tick. */
static void
test_the_index_refuses_a_second_job_of_a_slot(void **state)
{
  (void)state;
  char id[40], v[64], other[40];
  sched(id, "* * * * *", "UTC", "timestamptz '2026-01-01 00:00:00+00'");
  sched(other, "* * * * *", "UTC", "timestamptz '2026-01-01 00:01:00+00'");
  q1(v, sizeof v,
     "INSERT INTO jobs (project_id, endpoint_id, spec, busy_key, schedule_id, schedule_slot) "
     "VALUES ('%s', '%s', '{}', 'x', '%s', timestamptz '2026-01-01 00:00:00+00') RETURNING 1",
     project, endpoint, id);
  assert_int_equal(tb_api_schedtick_run(db, &opts, 10), 2);
  assert_int_equal(jobs_of(id), 1);
  q1(v, sizeof v, "SELECT last_error FROM schedules WHERE id = '%s'", id);
  assert_non_null(strstr(v, "could not be written"));
  /* the other schedule of the tick was not held up */
  assert_int_equal(jobs_of(other), 1);
  assert_int_equal(tb_api_schedtick_run(db, &opts, 10), 0);
}

/* ------------------------------------------------------------------ clock */

static void
test_restart_across_due_times_fires_once(void **state)
{
  (void)state;
  char id[40], v[64];
  /* every minute, last run ten minutes ago: ten slots missed */
  sched(id, "* * * * *", "UTC", "date_trunc('minute', now()) - interval '9 minutes'");
  assert_int_equal(tb_api_schedtick_run(db, &opts, 10), 1);
  assert_int_equal(jobs_of(id), 1);
  /* the next slot: the first whole minute after now */
  q1(v, sizeof v,
     "SELECT next_run_at = date_trunc('minute', now()) + interval '1 minute' "
     "FROM schedules WHERE id = '%s'",
     id);
  assert_string_equal(v, "t");
  assert_int_equal(tb_api_schedtick_run(db, &opts, 10), 0);
}

static void
test_the_clock_moves_by_the_offset(void **state)
{
  (void)state;
  char id[40], v[64];
  sched(id, "0 * * * *", "UTC", "now() + interval '1 hour'");
  assert_int_equal(tb_api_schedtick_run(db, &opts, 10), 0);
  opts.clock_offset_s = 3590; /* still early */
  assert_int_equal(tb_api_schedtick_run(db, &opts, 10), 0);
  opts.clock_offset_s = 3610;
  assert_int_equal(tb_api_schedtick_run(db, &opts, 10), 1);
  /* the next slot: the first whole hour after the moved clock */
  q1(v, sizeof v,
     "SELECT next_run_at = date_trunc('hour', now() + interval '3610 seconds') + interval '1 hour' "
     "FROM schedules WHERE id = '%s'",
     id);
  assert_string_equal(v, "t");
}

static void
test_dst_gap_through_the_ticker(void **state)
{
  (void)state;
  char id[40], v[64];
  /* 02:30 every day in New York; its slot on 2026-03-08, a time that day
   * skips, is 07:00 UTC (03:00 EDT) */
  sched(id, "30 2 * * *", "America/New_York", "timestamptz '2026-03-08 07:00:00+00'");
  char off[32];
  q1(off, sizeof off,
     "SELECT (extract(epoch FROM timestamptz '2026-03-08 07:00:30+00') - "
     "extract(epoch FROM now()))::bigint");
  opts.clock_offset_s = strtoll(off, NULL, 10);
  assert_int_equal(tb_api_schedtick_run(db, &opts, 10), 1);
  q1(v, sizeof v,
     "SELECT next_run_at = timestamptz '2026-03-09 06:30:00+00' FROM schedules "
     "WHERE id = '%s'",
     id);
  assert_string_equal(v, "t");
  q1(v, sizeof v,
     "SELECT schedule_slot = timestamptz '2026-03-08 07:00:00+00' FROM jobs WHERE schedule_id = "
     "'%s'",
     id);
  assert_string_equal(v, "t");
}

/* ---------------------------------------------------------------- limits */

static void
test_refusal_recorded_and_egress_pauses(void **state)
{
  (void)state;
  char a[40], b[40], v[200];
  ten.queued = 1;
  sched(a, "* * * * *", "UTC", "now() - interval '2 minutes'");
  sched(b, "* * * * *", "UTC", "now() - interval '1 minute'");
  assert_int_equal(tb_api_schedtick_run(db, &opts, 10), 2);
  q1(v, sizeof v,
     "SELECT runs || ' ' || paused || ' ' || coalesce(last_error, '') FROM schedules "
     "WHERE id = '%s'",
     b);
  assert_non_null(strstr(v, "0 false the project has queued jobs: 1"));
  q1(v, sizeof v, "SELECT next_run_at > now() FROM schedules WHERE id = '%s'", b);
  assert_string_equal(v, "t");
  /* the endpoint (10.0.0.1) refused by the policy now: the schedule pauses */
  char *err = NULL;
  struct tb_egress *p = tb_egress_new("", "10.0.0.0/8", &err);
  assert_non_null(p);
  tb_egress_install(p);
  ten.queued = 0;
  q1(v, sizeof v, "UPDATE schedules SET next_run_at = now() WHERE id = '%s' RETURNING 1", a);
  assert_int_equal(tb_api_schedtick_run(db, &opts, 10), 1);
  tb_egress_install(NULL);
  q1(v, sizeof v, "SELECT paused || ' ' || paused_reason FROM schedules WHERE id = '%s'", a);
  assert_non_null(strstr(v, "true the endpoint's base_url is refused: egress refused: 10.0.0.1"));
  assert_int_equal(jobs_of(a), 1);
}

int
main(void)
{
  const struct CMUnitTest tests[] = {
    cmocka_unit_test_setup(test_racing_tickers_fire_each_slot_once, clean),
    cmocka_unit_test_setup(test_the_index_refuses_a_second_job_of_a_slot, clean),
    cmocka_unit_test_setup(test_restart_across_due_times_fires_once, clean),
    cmocka_unit_test_setup(test_the_clock_moves_by_the_offset, clean),
    cmocka_unit_test_setup(test_dst_gap_through_the_ticker, clean),
    cmocka_unit_test_setup(test_refusal_recorded_and_egress_pauses, clean),
  };
  return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
