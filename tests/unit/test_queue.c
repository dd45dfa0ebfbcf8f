/* Unit tests: tb_queue, every statement of a job's life, on a throwaway
 * cluster (pgtmp.h) with the real migrations: claim order and busy keys,
 * the lease fence on every write, cells stored once, progress, header,
 * finish, release, expired leases claimed again or closed past
 * max_attempts, cancel while queued, the events each step writes, loading
 * endpoints, and claims racing from several connections. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "pgtmp.h"
#include "pgq.h"
#include "db/tb_migrate.h"
#include "db/tb_queue.h"

static struct tb_db *db;
static char project[40], endpoint[40];

/* One value of SQL on the test's connection (pgq.h). */
#define q1(out, len, ...) pgq_one(tb_db_conn(db), out, len, __VA_ARGS__)

static int
group_setup(void **state)
{
  (void)state;
  if (!pgq_cluster_up(&pgtmp_cluster, &db))
    return -1;
  pgq_endpoint(tb_db_conn(db), project, endpoint, "{\"gpu\":\"H100\"}", "{\"kind\":\"vllm\"}");
  return 0;
}

static int
group_teardown(void **state)
{
  (void)state;
  tb_db_close(db);
  pgtmp_down(&pgtmp_cluster);
  return 0;
}

/* Empties the queue between tests. */
static int
clean(void **state)
{
  (void)state;
  char v[8];
  q1(v, sizeof v, "DELETE FROM jobs");
  return 0;
}

static void
job_in(char id[40], const char *proj, int priority, const char *busy_key, int max_attempts)
{
  q1(id, 40,
     "INSERT INTO jobs (project_id, endpoint_id, spec, priority, busy_key, max_attempts)"
     " VALUES ('%s', '%s', '{\"max_output\":64}', %d, '%s', %d) RETURNING id",
     proj, endpoint, priority, busy_key, max_attempts);
}

static void
job_new(char id[40], int priority, const char *busy_key, int max_attempts)
{
  job_in(id, project, priority, busy_key, max_attempts);
}

static void
col(char *out, size_t len, const char *id, const char *column)
{
  q1(out, len, "SELECT %s FROM jobs WHERE id = '%s'", column, id);
}

static void
test_claim_order_and_busy_keys(void **state)
{
  (void)state;
  struct tb_queue_job j;
  char closed[TB_QUEUE_ID_LEN + 1];
  assert_int_equal(tb_queue_claim(db, "w1", 60, 0, &j, closed), TB_QUEUE_EMPTY);
  char a[40], b[40], c[40];
  job_new(a, 0, "k1", 3);
  job_new(b, 5, "k1", 3);
  job_new(c, 0, "k2", 3);
  assert_int_equal(tb_queue_claim(db, "w1", 60, 0, &j, closed), TB_QUEUE_CLAIMED);
  assert_string_equal(j.lease.job_id, b); /* the highest priority first */
  assert_string_equal(j.lease.owner, "w1");
  assert_int_equal(j.lease.attempt, 1);
  assert_int_equal(j.max_attempts, 3);
  assert_string_equal(j.endpoint_id, endpoint);
  assert_string_equal(j.request_id, "");
  assert_int_equal(json_integer_value(json_object_get(j.spec, "max_output")), 64);
  char v[64];
  col(v, sizeof v, b, "state");
  assert_string_equal(v, "running");
  col(v, sizeof v, b, "started_at IS NOT NULL");
  assert_string_equal(v, "t");
  tb_queue_job_clear(&j);
  assert_null(j.spec);
  /* a is older than c but its key is busy */
  assert_int_equal(tb_queue_claim(db, "w2", 60, 0, &j, closed), TB_QUEUE_CLAIMED);
  assert_string_equal(j.lease.job_id, c);
  tb_queue_job_clear(&j);
  assert_int_equal(tb_queue_claim(db, "w3", 60, 0, &j, closed), TB_QUEUE_EMPTY);
  /* an owner name past its cap is refused before any SQL */
  char longname[TB_QUEUE_OWNER_MAX + 2];
  memset(longname, 'w', sizeof longname - 1);
  longname[sizeof longname - 1] = '\0';
  assert_int_equal(tb_queue_claim(db, longname, 60, 0, &j, closed), TB_DB_HARD);
}

/* max_running: a project's run slots; the other project goes first */
static void
test_project_limit(void **state)
{
  (void)state;
  char p2[40], a1[40], a2[40], b1[40], v[64];
  q1(p2, sizeof p2,
     "INSERT INTO projects (name) VALUES ('unit2')"
     " ON CONFLICT (name) DO UPDATE SET name = EXCLUDED.name RETURNING id");
  job_new(a1, 0, "pa1", 3);
  job_new(a2, 9, "pa2", 3);
  job_in(b1, p2, 0, "pb1", 3);
  struct tb_queue_job j;
  assert_int_equal(tb_queue_claim(db, "w1", 60, 1, &j, NULL), TB_QUEUE_CLAIMED);
  char first[40];
  snprintf(first, sizeof first, "%s", j.lease.job_id);
  tb_queue_job_clear(&j);
  col(v, sizeof v, first, "run_slot");
  assert_string_equal(v, "1");
  /* the project that got the first job has no slot left at max_running 1:
   * the other project's job comes next, then nothing */
  assert_int_equal(tb_queue_claim(db, "w2", 60, 1, &j, NULL), TB_QUEUE_CLAIMED);
  if (strcmp(first, b1) == 0)
    assert_string_equal(j.lease.job_id, a2); /* the higher priority of the two */
  else
    assert_string_equal(j.lease.job_id, b1);
  tb_queue_job_clear(&j);
  assert_int_equal(tb_queue_claim(db, "w3", 60, 1, &j, NULL), TB_QUEUE_EMPTY);
  /* no limit: the rest runs */
  assert_int_equal(tb_queue_claim(db, "w3", 60, 0, &j, NULL), TB_QUEUE_CLAIMED);
  tb_queue_job_clear(&j);
  q1(v, sizeof v, "SELECT count(*) FROM jobs WHERE state = 'running'");
  assert_string_equal(v, "3");
  q1(v, sizeof v,
     "SELECT count(DISTINCT run_slot) FROM jobs WHERE project_id = '%s'"
     " AND state = 'running'",
     project);
  assert_string_equal(v, "2");
}

static void
test_fence_cells_and_finish(void **state)
{
  (void)state;
  char id[40];
  job_new(id, 0, "k1", 3);
  struct tb_queue_job j;
  assert_int_equal(tb_queue_claim(db, "w1", 60, 0, &j, NULL), TB_QUEUE_CLAIMED);
  struct tb_queue_lease l = j.lease;
  tb_queue_job_clear(&j);
  bool cancel = true;
  assert_int_equal(tb_queue_heartbeat(db, &l, 60, &cancel), 1);
  assert_false(cancel);
  assert_int_equal(tb_queue_check(db, &l, &cancel), 1);
  assert_false(cancel);

  /* every write of another owner, or of an older attempt, changes nothing */
  struct tb_queue_lease other = l, older = l;
  snprintf(other.owner, sizeof other.owner, "w9");
  older.attempt = l.attempt + 1;
  json_t *cell = json_pack("{s:s,s:i,s:i,s:f}", "phase", "decode", "context", 8192, "concurrency",
                           4, "total_tps", 123.5);
  const struct tb_queue_lease *bad[] = { &other, &older };
  for (int i = 0; i < 2; i++) {
    assert_int_equal(tb_queue_heartbeat(db, bad[i], 60, &cancel), 0);
    assert_int_equal(tb_queue_check(db, bad[i], &cancel), 0);
    assert_int_equal(tb_queue_store_cell(db, bad[i], cell), 0);
    assert_int_equal(tb_queue_progress(db, bad[i], cell, 9, 1.0), 0);
    assert_int_equal(tb_queue_header(db, bad[i], cell), 0);
    assert_int_equal(tb_queue_finish(db, bad[i], "succeeded", NULL, NULL), 0);
    assert_int_equal(tb_queue_release(db, bad[i], "stop"), 0);
  }
  char v[256];
  col(v, sizeof v, id, "cells_done::text || state || coalesce(header::text, '-')");
  assert_string_equal(v, "0running-");

  /* a cell is stored once */
  assert_int_equal(tb_queue_store_cell(db, &l, cell), 1);
  assert_int_equal(tb_queue_store_cell(db, &l, cell), 1);
  col(v, sizeof v, id, "cells_done");
  assert_string_equal(v, "1");
  json_t *cell2 = json_pack("{s:s,s:i,s:i}", "phase", "prefill", "context", 8192, "concurrency", 1);
  assert_int_equal(tb_queue_store_cell(db, &l, cell2), 1);
  col(v, sizeof v, id, "cells_done");
  assert_string_equal(v, "2");
  /* cells the table cannot hold: refused, nothing written */
  const char *junk[] = { "{\"context\":1,\"concurrency\":1}",
                         "{\"phase\":\"decode\",\"context\":-1,\"concurrency\":1}",
                         "{\"phase\":\"decode\",\"context\":1,\"concurrency\":4294967296}",
                         "{\"phase\":\"decode\",\"context\":\"8K\",\"concurrency\":1}",
                         "{\"phase\":\"bogus\",\"context\":1,\"concurrency\":1}",
                         "[]" };
  for (size_t i = 0; i < sizeof junk / sizeof junk[0]; i++) {
    json_t *jc = json_loads(junk[i], 0, NULL);
    assert_non_null(jc);
    assert_int_equal(tb_queue_store_cell(db, &l, jc), TB_DB_HARD);
    json_decref(jc);
  }
  col(v, sizeof v, id, "cells_done");
  assert_string_equal(v, "2");
  json_t *cells = NULL;
  assert_int_equal(tb_queue_load_cells(db, id, &cells), 2);
  assert_string_equal(json_string_value(json_object_get(json_array_get(cells, 0), "phase")),
                      "decode"); /* storage order */
  assert_true(json_real_value(json_object_get(json_array_get(cells, 0), "total_tps")) == 123.5);
  json_decref(cells);

  /* progress and header; a non-finite eta is stored as 0 */
  json_t *cur = json_pack("{s:s,s:i}", "phase", "decode", "context", 8192);
  assert_int_equal(tb_queue_progress(db, &l, cur, 9, NAN), 1);
  col(v, sizeof v, id,
      "cells_total::text || '/' || eta_s::text || '/' || (current_cell->>'context')");
  assert_string_equal(v, "9/0/8192");
  assert_int_equal(tb_queue_progress(db, &l, cur, 10, 12.5), 1);
  col(v, sizeof v, id, "eta_s");
  assert_string_equal(v, "12.5");
  json_decref(cur);
  json_t *hdr = json_pack("{s:s}", "model", "m");
  assert_int_equal(tb_queue_header(db, &l, hdr), 1);
  json_decref(hdr);
  col(v, sizeof v, id, "header->>'model'");
  assert_string_equal(v, "m");

  /* a state that is not an end changes nothing */
  assert_int_equal(tb_queue_finish(db, &l, "running", NULL, NULL), 0);
  assert_int_equal(tb_queue_finish(db, &l, "queued", NULL, NULL), 0);
  json_t *res = json_pack("{s:[]}", "cells");
  assert_int_equal(tb_queue_finish(db, &l, "succeeded", res, NULL), 1);
  json_decref(res);
  col(v, sizeof v, id,
      "state || '/' || coalesce(lease_owner, '-') || '/' || (finished_at IS NOT NULL) || '/' ||"
      " (result IS NOT NULL) || '/' || eta_s");
  assert_string_equal(v, "succeeded/-/true/true/0");
  /* once ended, the lease is gone: nothing more is written */
  assert_int_equal(tb_queue_finish(db, &l, "failed", NULL, "late"), 0);
  assert_int_equal(tb_queue_store_cell(db, &l, cell), 0);
  assert_int_equal(tb_queue_heartbeat(db, &l, 60, &cancel), 0);

  /* the events, in order */
  q1(v, sizeof v,
     "SELECT string_agg(kind || coalesce(':' || (data->>'state'), ''), ',' ORDER BY id)"
     " FROM job_events WHERE job_id = '%s'",
     id);
  assert_string_equal(v, "state:running,cell,cell,progress,progress,state:succeeded");
  json_decref(cell);
  json_decref(cell2);
}

static void
test_cancel_release_expiry(void **state)
{
  (void)state;
  char a[40], v[256];
  job_new(a, 0, "k1", 2);
  struct tb_queue_job j;
  assert_int_equal(tb_queue_claim(db, "w1", 60, 0, &j, NULL), TB_QUEUE_CLAIMED);
  struct tb_queue_lease l = j.lease;
  tb_queue_job_clear(&j);
  /* a cancel request reaches the worker through heartbeat and check */
  q1(v, sizeof v, "UPDATE jobs SET cancel_requested = true WHERE id = '%s'", a);
  bool cancel = false;
  assert_int_equal(tb_queue_heartbeat(db, &l, 60, &cancel), 1);
  assert_true(cancel);
  cancel = false;
  assert_int_equal(tb_queue_check(db, &l, &cancel), 1);
  assert_true(cancel);
  q1(v, sizeof v, "UPDATE jobs SET cancel_requested = false WHERE id = '%s'", a);

  /* release: back to the queue, this attempt not counted */
  assert_int_equal(tb_queue_release(db, &l, "worker stopping"), 1);
  col(v, sizeof v, a, "state || '/' || attempts || '/' || coalesce(lease_owner, '-')");
  assert_string_equal(v, "queued/0/-");
  assert_int_equal(tb_queue_claim(db, "w2", 60, 0, &j, NULL), TB_QUEUE_CLAIMED);
  assert_string_equal(j.lease.job_id, a);
  assert_int_equal(j.lease.attempt, 1);
  l = j.lease;
  tb_queue_job_clear(&j);

  /* the lease expires: another worker takes the job (attempt 2); the first
   * worker's writes are refused from then on */
  q1(v, sizeof v, "UPDATE jobs SET lease_expires_at = now() - interval '1 second' WHERE id = '%s'",
     a);
  assert_int_equal(tb_queue_claim(db, "w3", 60, 0, &j, NULL), TB_QUEUE_CLAIMED);
  assert_string_equal(j.lease.job_id, a);
  assert_int_equal(j.lease.attempt, 2);
  struct tb_queue_lease l3 = j.lease;
  tb_queue_job_clear(&j);
  assert_int_equal(tb_queue_heartbeat(db, &l, 60, &cancel), 0);
  assert_int_equal(tb_queue_heartbeat(db, &l3, 60, &cancel), 1);

  /* expired again with no attempts left: closed as failed, not claimed */
  q1(v, sizeof v, "UPDATE jobs SET lease_expires_at = now() - interval '1 second' WHERE id = '%s'",
     a);
  char closed[TB_QUEUE_ID_LEN + 1] = "";
  assert_int_equal(tb_queue_claim(db, "w4", 60, 0, &j, closed), TB_QUEUE_CLOSED);
  assert_string_equal(closed, a);
  col(v, sizeof v, a, "state || '/' || coalesce(lease_owner, '-')");
  assert_string_equal(v, "failed/-");
  col(v, sizeof v, a, "error");
  assert_non_null(strstr(v, "lost its lease"));
  assert_non_null(strstr(v, "w3"));
  assert_int_equal(tb_queue_heartbeat(db, &l3, 60, &cancel), 0);

  /* cancelled while queued: closed as cancelled; then the queue is empty */
  char b[40];
  job_new(b, 0, "k9", 3);
  q1(v, sizeof v, "UPDATE jobs SET cancel_requested = true WHERE id = '%s'", b);
  assert_int_equal(tb_queue_claim(db, "w1", 60, 0, &j, closed), TB_QUEUE_CLOSED);
  assert_string_equal(closed, b);
  col(v, sizeof v, b, "state || '/' || attempts");
  assert_string_equal(v, "cancelled/0");
  assert_int_equal(tb_queue_claim(db, "w1", 60, 0, &j, NULL), TB_QUEUE_EMPTY);
  /* NULL closed_id is allowed */
  char c[40];
  job_new(c, 0, "k9", 0);
  assert_int_equal(tb_queue_claim(db, "w1", 60, 0, &j, NULL), TB_QUEUE_CLOSED);
}

static void
test_load_endpoint_and_cells(void **state)
{
  (void)state;
  struct tb_queue_endpoint ep;
  assert_int_equal(tb_queue_load_endpoint(db, endpoint, &ep), 1);
  assert_string_equal(ep.name, "gpu");
  assert_string_equal(ep.base_url, "http://10.0.0.1:8000");
  assert_string_equal(ep.api_key_sealed, "sealed");
  assert_string_equal(ep.api_key_origin, "http://10.0.0.1:8000");
  assert_string_equal(ep.launch_command, "vllm serve m");
  assert_null(ep.engine_hint);
  assert_string_equal(json_string_value(json_object_get(ep.hardware, "gpu")), "H100");
  assert_string_equal(json_string_value(json_object_get(ep.engine, "kind")), "vllm");
  assert_false(ep.deleted);
  tb_queue_endpoint_clear(&ep);
  assert_null(ep.name);
  tb_queue_endpoint_clear(NULL);
  assert_int_equal(tb_queue_load_endpoint(db, "00000000-0000-0000-0000-000000000000", &ep), 0);
  assert_int_equal(tb_queue_load_endpoint(db, "not-a-uuid", &ep), TB_DB_HARD);
  assert_null(ep.name);
  json_t *cells = (json_t *)1;
  assert_int_equal(tb_queue_load_cells(db, "00000000-0000-0000-0000-000000000000", &cells), 0);
  assert_int_equal(json_array_size(cells), 0);
  json_decref(cells);
  assert_int_equal(tb_queue_load_cells(db, "not-a-uuid", &cells), TB_DB_HARD);
  assert_null(cells);
}

struct claimer {
  char name[16];
  int claimed;
  bool failed;
  char ids[64][40];
};

static void *
claimer_main(void *arg)
{
  struct claimer *c = arg;
  char *err = NULL;
  struct tb_db *mine = tb_db_connect(pgtmp_cluster.url, 5000, &err);
  if (mine == NULL) {
    free(err);
    c->failed = true;
    return NULL;
  }
  for (;;) {
    struct tb_queue_job j;
    int rc = tb_queue_claim(mine, c->name, 60, 0, &j, NULL);
    if (rc == TB_QUEUE_EMPTY)
      break;
    if (rc == TB_DB_SOFT)
      continue; /* lost every retry of a race: look again, as the worker does */
    if (rc != TB_QUEUE_CLAIMED || c->claimed >= 64) {
      c->failed = true;
      break;
    }
    snprintf(c->ids[c->claimed++], 40, "%s", j.lease.job_id);
    tb_queue_job_clear(&j);
  }
  tb_db_close(mine);
  return NULL;
}

static void
test_racing_claims(void **state)
{
  (void)state;
  /* 40 jobs on 20 keys (two each): exactly 20 can run at once */
  char id[40];
  for (int i = 0; i < 40; i++) {
    char key[16];
    snprintf(key, sizeof key, "race%d", i % 20);
    job_new(id, 0, key, 3);
  }
  enum {
    T = 4
  };
  struct claimer *c = calloc(T, sizeof *c);
  pthread_t th[T];
  for (int i = 0; i < T; i++) {
    snprintf(c[i].name, sizeof c[i].name, "racer%d", i);
    assert_int_equal(pthread_create(&th[i], NULL, claimer_main, &c[i]), 0);
  }
  int total = 0;
  for (int i = 0; i < T; i++) {
    pthread_join(th[i], NULL);
    assert_false(c[i].failed);
    total += c[i].claimed;
  }
  assert_int_equal(total, 20);
  char v[64];
  q1(v, sizeof v, "SELECT count(*) FROM jobs WHERE state = 'running'");
  assert_string_equal(v, "20");
  q1(v, sizeof v, "SELECT count(DISTINCT busy_key) FROM jobs WHERE state = 'running'");
  assert_string_equal(v, "20");
  q1(v, sizeof v, "SELECT count(*) FROM jobs WHERE attempts > 1");
  assert_string_equal(v, "0"); /* nobody claimed a job twice */
  free(c);
}

/* Issue 27: a worker whose egress policy refuses the endpoint hands the job
 * back without spending an attempt, passes it over in its claims, and the
 * job fails with the reason once the first hand-back is give_up_s old. */
static void
test_refuse_hands_back_then_gives_up(void **state)
{
  (void)state;
  struct tb_queue_job j;
  char a[40], v[256], skip[48];
  bool failed = true;
  job_new(a, 0, "k1", 1);
  assert_int_equal(tb_queue_claim(db, "w1", 60, 0, &j, NULL), TB_QUEUE_CLAIMED);
  assert_int_equal(tb_queue_refuse(db, &j.lease, "worker w1: egress refused: x", 600, &failed), 1);
  assert_false(failed);
  col(v, sizeof v, a, "state || ' ' || attempts || ' ' || (lease_owner IS NULL)");
  assert_string_equal(v, "queued 0 true");
  q1(v, sizeof v,
     "SELECT data->>'worker' || ' ' || (data->>'reason') FROM job_events "
     "WHERE job_id = '%s' AND data ? 'egress_refused'",
     a);
  assert_string_equal(v, "w1 worker w1: egress refused: x");
  /* a second refusal through a stale lease writes nothing */
  assert_int_equal(tb_queue_refuse(db, &j.lease, "again", 600, &failed), 0);
  tb_queue_job_clear(&j);
  snprintf(skip, sizeof skip, "{%s}", a);
  assert_int_equal(tb_queue_claim_skip(db, "w1", 60, 0, skip, &j, NULL), TB_QUEUE_EMPTY);
  /* another worker claims it with its one attempt still there */
  assert_int_equal(tb_queue_claim_skip(db, "w2", 60, 0, NULL, &j, NULL), TB_QUEUE_CLAIMED);
  assert_int_equal(j.lease.attempt, 1);
  /* refused again, past the give-up time (0 s): failed with the reason */
  assert_int_equal(tb_queue_refuse(db, &j.lease, "worker w2: egress refused: y", 0, &failed), 1);
  assert_true(failed);
  col(v, sizeof v, a, "state || ' ' || attempts || ' ' || error");
  assert_non_null(
    strstr(v, "failed 1 no worker may reach the endpoint: worker w2: egress refused: y"));
  tb_queue_job_clear(&j);
}

int
main(void)
{
  const struct CMUnitTest tests[] = {
    cmocka_unit_test_setup(test_claim_order_and_busy_keys, clean),
    cmocka_unit_test_setup(test_project_limit, clean),
    cmocka_unit_test_setup(test_fence_cells_and_finish, clean),
    cmocka_unit_test_setup(test_cancel_release_expiry, clean),
    cmocka_unit_test_setup(test_load_endpoint_and_cells, clean),
    cmocka_unit_test_setup(test_racing_claims, clean),
    cmocka_unit_test_setup(test_refuse_hands_back_then_gives_up, clean),
  };
  return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
