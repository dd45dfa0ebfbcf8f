/* Unit tests: tb_shards against a real PostgreSQL (a throwaway cluster,
 * pgtmp.h, with the real migrations): a sharded cell's barrier from open
 * to merged, one shard per worker, the common start set by the last shard
 * ready, the clock offset to clock_timestamp(), samples stored as bytea and
 * collected byte for byte, and the faults: a barrier that does not fill by
 * its deadline, a shard whose lease lapses, writes fenced out after either,
 * and an open by a worker that lost the job's lease. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <libpq-fe.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "pgtmp.h"
#include "pgq.h"
#include "db/tb_migrate.h"
#include "db/tb_queue.h"
#include "db/tb_shards.h"
#include "result/tb_samples.h"

static struct pgtmp pgtmp_cluster;
static struct tb_db *db;
static struct tb_queue_job job;

/* One value of SQL on the test's connection (pgq.h). */
#define q1(out, len, ...) pgq_one(tb_db_conn(db), out, len, __VA_ARGS__)

static int
group_setup(void **state)
{
  (void)state;
  if (!pgq_cluster_up(&pgtmp_cluster, &db))
    return -1;
  char project[40], endpoint[40], id[40], closed[TB_QUEUE_ID_LEN + 1];
  pgq_endpoint(tb_db_conn(db), project, endpoint, "{}", "{}");
  q1(id, sizeof id,
     "INSERT INTO jobs (project_id, endpoint_id, spec, busy_key, max_attempts)"
     " VALUES ('%s', '%s', '{\"shards\":3}', 'k', 3) RETURNING id",
     project, endpoint);
  if (tb_queue_claim(db, "coordinator", 600, 0, &job, closed) != TB_QUEUE_CLAIMED)
    return -1;
  return 0;
}

static int
group_teardown(void **state)
{
  (void)state;
  tb_queue_job_clear(&job);
  tb_db_close(db);
  pgtmp_down(&pgtmp_cluster);
  return 0;
}

static struct tb_shards_key
key_of(const char *cell, int attempt)
{
  struct tb_shards_key k = { .attempt = attempt };
  snprintf(k.job_id, sizeof k.job_id, "%s", job.lease.job_id);
  snprintf(k.cell_key, sizeof k.cell_key, "%s", cell);
  return k;
}

static void
sleep_ms(long ms)
{
  struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };
  nanosleep(&ts, NULL);
}

/* one shard's samples, encoded: n TTFTs of base + i us */
static void
blob(int64_t base, int n, unsigned char **buf, size_t *len)
{
  struct tb_samples m;
  tb_samples_init(&m);
  for (int i = 0; i < n; i++)
    tb_samples_add(&m, TB_SAMPLES_TTFT, base + i);
  int64_t sl[2] = { n, n };
  assert_true(tb_samples_set_slices(&m, 1000000, sl, 2));
  tb_samples_encode(&m, buf, len);
  tb_samples_free(&m);
}

static void
test_barrier_from_open_to_merged(void **state)
{
  (void)state;
  struct tb_shards_key k = key_of("decode/1024/96", 1);
  json_t *spec = json_pack("{s:i}", "concurrency", 96);
  assert_int_equal(tb_shards_open(db, &job.lease, &k, 3, spec, 60), 1);
  /* the same key twice is a bug of the caller */
  assert_int_equal(tb_shards_open(db, &job.lease, &k, 3, spec, 60), TB_DB_HARD);
  json_decref(spec);
  struct tb_shard s[3], extra;
  const char *w[3] = { "w0", "w1", "w2" };
  for (int i = 0; i < 3; i++) {
    assert_int_equal(tb_shards_claim(db, w[i], "host-a", 60, &s[i]), 1);
    assert_int_equal(s[i].shard, i);
    assert_int_equal(s[i].nshards, 3);
    assert_string_equal(s[i].key.cell_key, "decode/1024/96");
    assert_int_equal(json_integer_value(json_object_get(s[i].spec, "concurrency")), 96);
    /* one shard per worker */
    assert_int_equal(tb_shards_claim(db, w[i], "host-a", 60, &extra), 0);
  }
  assert_int_equal(tb_shards_claim(db, "w9", "host-b", 60, &extra), 0); /* none left */
  /* the clock: same machine, so the offset maps now to the real clock */
  struct tb_clock_offset off;
  assert_int_equal(tb_shards_clock(db, 8, &off), 1);
  assert_int_equal(off.probes, 8);
  assert_true(off.uncert_ns >= 0 && off.uncert_ns < 50000000);
  int64_t srv = tb_clock_to_server_us(&off, tb_time_mono_ns()), real = tb_time_real_us();
  assert_true(llabs(srv - real) < 50000);
  char st[16], why[200];
  int64_t t0 = 0;
  assert_int_equal(tb_shards_ready(db, &s[0], &off, 0.25), 1);
  assert_int_equal(tb_shards_ready(db, &s[1], &off, 0.25), 1);
  assert_int_equal(tb_shards_barrier(db, &k, st, &t0, why, sizeof why), 1);
  assert_string_equal(st, "waiting");
  /* a shard cannot store before the start */
  unsigned char *b[3];
  size_t len[3];
  for (int i = 0; i < 3; i++)
    blob(1000 * (i + 1), 50 + i, &b[i], &len[i]);
  assert_int_equal(tb_shards_store(db, &s[0], b[0], len[0], 10), 0);
  int64_t before = tb_time_real_us();
  assert_int_equal(tb_shards_ready(db, &s[2], &off, 0.25), 1);
  assert_int_equal(tb_shards_barrier(db, &k, st, &t0, why, sizeof why), 1);
  assert_string_equal(st, "started");
  assert_true(t0 >= before + 200000 && t0 < before + 5000000); /* now + the lead */
  assert_int_equal(tb_shards_beat(db, &s[1], 60), 1);
  struct tb_shard_row *rows = NULL;
  for (int i = 0; i < 3; i++) {
    assert_int_equal(tb_shards_collect(db, &k, &rows), 0); /* not all done */
    assert_int_equal(tb_shards_store(db, &s[i], b[i], len[i], 100 * i - 100), 1);
  }
  assert_int_equal(tb_shards_store(db, &s[0], b[0], len[0], 0), 0); /* once */
  assert_int_equal(tb_shards_collect(db, &k, &rows), 3);
  for (int i = 0; i < 3; i++) {
    assert_int_equal(rows[i].shard, i);
    assert_string_equal(rows[i].worker, w[i]);
    assert_string_equal(rows[i].host, "host-a");
    assert_int_equal(rows[i].skew_us, 100 * i - 100);
    assert_int_equal(rows[i].uncert_ns, off.uncert_ns);
    assert_int_equal(rows[i].len, len[i]);
    assert_memory_equal(rows[i].samples, b[i], len[i]);
    struct tb_samples m;
    char err[100];
    assert_true(tb_samples_decode(rows[i].samples, rows[i].len, &m, err, sizeof err));
    assert_int_equal(m.s[TB_SAMPLES_TTFT].n, 50 + i);
    tb_samples_free(&m);
    free(b[i]);
    tb_shard_clear(&s[i]);
  }
  tb_shards_rows_free(rows, 3);
  assert_int_equal(tb_shards_close(db, &job.lease, &k, "merged", NULL), 1);
  assert_int_equal(tb_shards_barrier(db, &k, st, &t0, why, sizeof why), 1);
  assert_string_equal(st, "merged");
  assert_int_equal(tb_shards_expire(db, job.lease.job_id), 0);
}

static void
test_barrier_timeout_releases_claims(void **state)
{
  (void)state;
  struct tb_shards_key k = key_of("decode/1024/8", 1);
  json_t *spec = json_object();
  assert_int_equal(tb_shards_open(db, &job.lease, &k, 2, spec, 0.3), 1);
  json_decref(spec);
  struct tb_shard s;
  assert_int_equal(tb_shards_claim(db, "w0", "h", 60, &s), 1);
  struct tb_clock_offset off = { 0 };
  assert_int_equal(tb_shards_ready(db, &s, &off, 0.1), 1);
  assert_int_equal(tb_shards_expire(db, job.lease.job_id), 0); /* not yet */
  sleep_ms(400);
  struct tb_shard late;
  assert_int_equal(tb_shards_claim(db, "w1", "h", 60, &late), 0); /* past its deadline */
  assert_int_equal(tb_shards_expire(db, job.lease.job_id), 1);
  char st[16], why[200], v[64];
  int64_t t0;
  assert_int_equal(tb_shards_barrier(db, &k, st, &t0, why, sizeof why), 1);
  assert_string_equal(st, "failed");
  assert_string_equal(why, "barrier timeout: 1 of 2 shards ready after 0.3 s");
  q1(v, sizeof v,
     "SELECT string_agg(state, ',' ORDER BY shard) FROM cell_shards WHERE cell_key = '%s'",
     k.cell_key);
  assert_string_equal(v, "failed,failed");
  assert_int_equal(tb_shards_beat(db, &s, 60), 0);
  unsigned char one = 0;
  assert_int_equal(tb_shards_store(db, &s, &one, 1, 0), 0);
  tb_shard_clear(&s);
}

static void
test_lapsed_shard_fails_the_attempt(void **state)
{
  (void)state;
  struct tb_shards_key k = key_of("decode/0/4", 1);
  json_t *spec = json_object();
  assert_int_equal(tb_shards_open(db, &job.lease, &k, 2, spec, 60), 1);
  struct tb_shard a, b;
  assert_int_equal(tb_shards_claim(db, "wa", "h1", 1, &a), 1);
  assert_int_equal(tb_shards_claim(db, "wb", "h2", 60, &b), 1);
  struct tb_clock_offset off = { 0 };
  assert_int_equal(tb_shards_ready(db, &a, &off, 0), 1);
  assert_int_equal(tb_shards_ready(db, &b, &off, 0), 1);
  sleep_ms(1300); /* wa's lease of 1 s lapses: its worker died */
  assert_int_equal(tb_shards_beat(db, &b, 60), 1);
  assert_int_equal(tb_shards_expire(db, job.lease.job_id), 1);
  char st[16], why[200];
  int64_t t0;
  assert_int_equal(tb_shards_barrier(db, &k, st, &t0, why, sizeof why), 1);
  assert_string_equal(st, "failed");
  assert_string_equal(why, "shard 0's worker wa lost its lease");
  /* the survivor is fenced out: never half merged */
  unsigned char one = 0;
  assert_int_equal(tb_shards_store(db, &b, &one, 1, 0), 0);
  struct tb_shard_row *rows;
  assert_int_equal(tb_shards_collect(db, &k, &rows), 0);
  /* the cell is measured again whole: attempt 2, both shards open */
  struct tb_shards_key k2 = key_of("decode/0/4", 2);
  assert_int_equal(tb_shards_open(db, &job.lease, &k2, 2, spec, 60), 1);
  struct tb_shard a2;
  assert_int_equal(tb_shards_claim(db, "wb", "h2", 60, &a2), 1);
  assert_int_equal(a2.key.attempt, 2);
  assert_int_equal(a2.shard, 0);
  assert_int_equal(tb_shards_close(db, &job.lease, &k2, "failed", "test over"), 1);
  assert_int_equal(tb_shards_claim(db, "wc", "h3", 60, &a), 0);
  json_decref(spec);
  tb_shard_clear(&a);
  tb_shard_clear(&b);
  tb_shard_clear(&a2);
}

/* A shard that cannot run fails its barrier at once with why (its claims
 * released, the others fenced out); a shard of another worker, or of a
 * barrier already over, cannot; a reason cut inside a UTF-8 sequence is
 * stored without the cut sequence. */
static void
test_shard_fails_its_barrier(void **state)
{
  (void)state;
  struct tb_shards_key k = key_of("rate/3", 1);
  json_t *spec = json_object();
  assert_int_equal(tb_shards_open(db, &job.lease, &k, 2, spec, 60), 1);
  struct tb_shard a, b;
  assert_int_equal(tb_shards_claim(db, "fa", "h1", 60, &a), 1);
  assert_int_equal(tb_shards_claim(db, "fb", "h2", 60, &b), 1);
  struct tb_shard other = a;
  snprintf(other.worker, sizeof other.worker, "not-fa"); /* fenced: the shard is fa's */
  assert_int_equal(tb_shards_fail(db, &other, "no"), 0);
  char why[TB_SHARDS_REASON_MAX + 8];
  assert_int_equal(tb_shards_fail(db, &a, "cannot load the endpoint"), 1);
  char st[16], reason[400];
  int64_t t0;
  assert_int_equal(tb_shards_barrier(db, &k, st, &t0, reason, sizeof reason), 1);
  assert_string_equal(st, "failed");
  assert_string_equal(reason, "shard 0 (worker fa): cannot load the endpoint");
  char n[16];
  q1(n, sizeof n,
     "SELECT count(*) FROM cell_shards WHERE job_id = '%s' AND cell_key = 'rate/3'"
     " AND state <> 'failed'",
     job.lease.job_id);
  assert_string_equal(n, "0");
  /* over already: the second shard's failure changes nothing */
  assert_int_equal(tb_shards_fail(db, &b, "later"), 0);
  unsigned char one = 0;
  assert_int_equal(tb_shards_store(db, &b, &one, 1, 0), 0);
  /* a long reason with a multi-byte character at the cut: stored */
  struct tb_shards_key k2 = key_of("rate/3", 2);
  assert_int_equal(tb_shards_open(db, &job.lease, &k2, 1, spec, 60), 1);
  struct tb_shard c;
  assert_int_equal(tb_shards_claim(db, "fc", "h3", 60, &c), 1);
  memset(why, 'y', sizeof why);
  memcpy(why + TB_SHARDS_REASON_MAX - 1, "\xc3\xa9", 2); /* cut after its first byte */
  why[sizeof why - 1] = '\0';
  assert_int_equal(tb_shards_fail(db, &c, why), 1);
  json_decref(spec);
  tb_shard_clear(&a);
  tb_shard_clear(&b);
  tb_shard_clear(&c);
}

static void
test_open_needs_the_jobs_lease(void **state)
{
  (void)state;
  struct tb_queue_lease stale = job.lease;
  stale.attempt++;
  struct tb_shards_key k = key_of("decode/2048/2", 1);
  json_t *spec = json_object();
  assert_int_equal(tb_shards_open(db, &stale, &k, 2, spec, 60), 0);
  assert_int_equal(tb_shards_open(db, &job.lease, &k, 0, spec, 60), TB_DB_HARD);
  assert_int_equal(tb_shards_open(db, &job.lease, &k, 65, spec, 60), TB_DB_HARD);
  struct tb_shard s;
  assert_int_equal(tb_shards_claim(db, "w", "h", 60, &s), 0);
  assert_int_equal(tb_shards_close(db, &stale, &k, "merged", NULL), 0);
  assert_int_equal(tb_shards_close(db, &job.lease, &k, "bogus", NULL), TB_DB_HARD);
  json_decref(spec);
}

int
main(void)
{
  const struct CMUnitTest tests[] = {
    cmocka_unit_test(test_barrier_from_open_to_merged),
    cmocka_unit_test(test_barrier_timeout_releases_claims),
    cmocka_unit_test(test_lapsed_shard_fails_the_attempt),
    cmocka_unit_test(test_shard_fails_its_barrier),
    cmocka_unit_test(test_open_needs_the_jobs_lease),
  };
  return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
