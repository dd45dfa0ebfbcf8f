/* Unit tests: worker_shard_merge on a real PostgreSQL (pgtmp.h, the real
 * migrations): three shards of random samples stored through tb_shards as
 * bytea, merged by the worker; its cell's percentiles are identical to a
 * recomputation from the stored samples (read back with SQL and decoded
 * here, all in one place), the additive figures add, the shards say where
 * they ran, a skew over the limit fails the cell, a damaged blob is refused
 * with the shard named, and a barrier not yet done merges nothing; a rate
 * cell's shards (issue 24, part 1) merged by worker_shard_merge_rate the
 * same way: percentiles of the union, counts added, rates over the common
 * timeline. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <libpq-fe.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <math.h>
#include <time.h>

#include "pgtmp.h"
#include "pgq.h"
#include "db/tb_migrate.h"
#include "db/tb_queue.h"
#include "db/tb_shards.h"
#include "result/tb_samples.h"
#include "result/tb_steady.h"
#include "spec/tb_spec.h"
#include "worker_shard.h"

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

static uint64_t
next(uint64_t *x)
{
  uint64_t z = (*x += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

/* A rate shard's section (issue 24, part 1): reqs requests, each whole,
 * over 4 s after t0. */
static void
rate_section(struct tb_samples *m, int reqs, uint64_t *seed)
{
  for (int r = 0; r < reqs; r++) {
    int64_t st = (int64_t)(next(seed) % 4000000);
    tb_samples_radd(m, TB_SAMPLES_LAG, (int64_t)(next(seed) % 3000));
    tb_samples_radd(m, TB_SAMPLES_START, st);
    tb_samples_radd(m, TB_SAMPLES_END, st + 900000 + (int64_t)(next(seed) % 400000));
    tb_samples_radd(m, TB_SAMPLES_SCHED, st);
    tb_samples_radd(m, TB_SAMPLES_ROK, 1);
    tb_samples_radd(m, TB_SAMPLES_RTTFT, m->s[TB_SAMPLES_TTFT].v[r] + 1);
    tb_samples_radd(m, TB_SAMPLES_RTPOT, m->s[TB_SAMPLES_TPOT].v[r] + 1);
    tb_samples_radd(m, TB_SAMPLES_RTOKENS, 64);
  }
  m->rate.scheduled = reqs;
  m->rate.arrivals_us = 4000000;
  m->rate.last_end_us = 5400000 + (int64_t)(next(seed) % 1000);
  m->rate.pr_sum = 256 * (int64_t)reqs;
  m->rate.pr_n = reqs;
  m->good = reqs / 2;
}

/* Opens a barrier of n shards, claims, readies and stores each with random
 * samples (skews[i] us; a rate cell's too when rate); key into *k. */
static void
run_shards(const char *cell, int n, const int64_t *skews, struct tb_shards_key *k, bool rate)
{
  memset(k, 0, sizeof *k);
  snprintf(k->job_id, sizeof k->job_id, "%s", job.lease.job_id);
  snprintf(k->cell_key, sizeof k->cell_key, "%s", cell);
  k->attempt = 1;
  json_t *spec = json_object();
  assert_int_equal(tb_shards_open(db, &job.lease, k, n, spec, 60), 1);
  json_decref(spec);
  struct tb_shard s[8];
  struct tb_clock_offset off;
  assert_int_equal(tb_shards_clock(db, 4, &off), 1);
  for (int i = 0; i < n; i++) {
    char w[16];
    snprintf(w, sizeof w, "w%d", i);
    assert_int_equal(tb_shards_claim(db, w, i % 2 ? "host-b" : "host-a", 60, &s[i]), 1);
  }
  for (int i = 0; i < n; i++)
    assert_int_equal(tb_shards_ready(db, &s[i], &off, 0), 1);
  uint64_t seed = 24 + (uint64_t)n;
  for (int i = 0; i < n; i++) {
    struct tb_samples m;
    tb_samples_init(&m);
    int reqs = 200 + (int)(next(&seed) % 300);
    for (int r = 0; r < reqs; r++) {
      tb_samples_add(&m, TB_SAMPLES_TTFT, 50000 + (int64_t)(next(&seed) % 90000));
      tb_samples_add(&m, TB_SAMPLES_E2E, 900000 + (int64_t)(next(&seed) % 400000));
      tb_samples_add(&m, TB_SAMPLES_TPOT, 9000 + (int64_t)(next(&seed) % 6000));
      for (int g = 0; g < 20; g++)
        tb_samples_add(&m, TB_SAMPLES_GAP, 8000 + (int64_t)(next(&seed) % 9000));
    }
    int64_t sl[10];
    m.tokens = 0;
    for (int j = 0; j < 10; j++)
      m.tokens += (sl[j] = 900 + (int64_t)(next(&seed) % 200));
    if (rate) {
      m.tokens = 64 * (int64_t)reqs;
      rate_section(&m, reqs, &seed);
    } else {
      assert_true(tb_samples_set_slices(&m, 1000000, sl, 10));
    }
    m.completed = reqs;
    m.started = reqs + 8;
    m.streams = 32;
    m.resolution = 32;
    m.active_milli = 32000;
    m.reads = m.stamped_reads = 1000;
    unsigned char *b;
    size_t len;
    tb_samples_encode(&m, &b, &len);
    assert_int_equal(tb_shards_store(db, &s[i], b, len, skews[i]), 1);
    free(b);
    tb_samples_free(&m);
    tb_shard_clear(&s[i]);
  }
}

/* The stored samples, read back with SQL (not tb_shards) and merged in one
 * place. */
static void
recompute(const struct tb_shards_key *k, struct tb_samples *all)
{
  char sql[512];
  snprintf(sql, sizeof sql,
           "SELECT samples FROM cell_shards WHERE job_id = '%s' AND cell_key = '%s'"
           " AND attempt = %d ORDER BY shard",
           k->job_id, k->cell_key, k->attempt);
  PGresult *r = PQexecParams(tb_db_conn(db), sql, 0, NULL, NULL, NULL, NULL, 1);
  assert_int_equal(PQresultStatus(r), PGRES_TUPLES_OK);
  tb_samples_init(all);
  for (int i = 0; i < PQntuples(r); i++) {
    struct tb_samples one;
    char err[200];
    assert_true(tb_samples_decode((const unsigned char *)PQgetvalue(r, i, 0),
                                  (size_t)PQgetlength(r, i, 0), &one, err, sizeof err));
    for (int s = 0; s < TB_SAMPLES_NSERIES; s++)
      for (size_t j = 0; j < one.s[s].n; j++)
        tb_samples_add(all, (enum tb_samples_series)s, one.s[s].v[j]);
    all->tokens += one.tokens;
    all->completed += one.completed;
    tb_samples_free(&one);
  }
  PQclear(r);
}

/* The steady window of every request the shards of k stored, computed
 * here from the blobs read back with SQL. */
static json_t *
union_steady(const struct tb_shards_key *k)
{
  char sql[512];
  snprintf(sql, sizeof sql,
           "SELECT samples FROM cell_shards WHERE job_id = '%s' AND cell_key = '%s'"
           " AND attempt = %d ORDER BY shard",
           k->job_id, k->cell_key, k->attempt);
  PGresult *r = PQexecParams(tb_db_conn(db), sql, 0, NULL, NULL, NULL, NULL, 1);
  assert_int_equal(PQresultStatus(r), PGRES_TUPLES_OK);
  struct tb_steady_req *req = NULL;
  size_t n = 0;
  for (int i = 0; i < PQntuples(r); i++) {
    struct tb_samples one;
    char err[200];
    assert_true(tb_samples_decode((const unsigned char *)PQgetvalue(r, i, 0),
                                  (size_t)PQgetlength(r, i, 0), &one, err, sizeof err));
    const struct tb_stats *x = one.rate.s;
    req = tb_xrealloc(req, (n + x[TB_SAMPLES_START].n) * sizeof *req);
    for (size_t j = 0; j < x[TB_SAMPLES_START].n; j++) {
      int64_t ttft = x[TB_SAMPLES_RTTFT].v[j], tpot = x[TB_SAMPLES_RTPOT].v[j];
      bool ok = x[TB_SAMPLES_ROK].v[j] != 0;
      req[n++] = (struct tb_steady_req){ .start_us = x[TB_SAMPLES_START].v[j],
                                         .end_us = x[TB_SAMPLES_END].v[j],
                                         .ok = ok,
                                         .ttft_ms = ttft ? (double)(ttft - 1) / 1e3 : NAN,
                                         .tpot_ms = tpot ? (double)(tpot - 1) / 1e3 : NAN,
                                         .tokens = ok ? x[TB_SAMPLES_RTOKENS].v[j] : 0 };
    }
    tb_samples_free(&one);
  }
  PQclear(r);
  struct tb_steady w;
  tb_steady_compute(req, n, NULL, 0, 0, &w);
  free(req);
  return tb_steady_json(&w);
}

static double
pct(json_t *cell, const char *member, const char *p)
{
  return json_real_value(json_object_get(json_object_get(cell, member), p));
}

/* A rate cell's merge: written by the rate cells' writer from the union,
 * every percentile identical to the one-place recomputation, the counts
 * added, the rates over the common timeline. */
static void
test_rate_merge_is_the_recomputation(void **state)
{
  (void)state;
  struct tb_shards_key k;
  int64_t skews[3] = { 0, 0, 0 };
  run_shards("rate/1", 3, skews, &k, true);
  struct tb_spec spec;
  tb_spec_init(&spec);
  json_t *cell = json_pack("{s:s, s:i, s:i, s:f}", "phase", "rate", "context", 256, "concurrency",
                           1, "rate_rps", 30.0);
  char err[200];
  assert_int_equal(worker_shard_merge_rate(db, &k, &spec, 4, cell, err, sizeof err), 1);
  struct tb_samples all;
  recompute(&k, &all);
  const char *ps[3] = { "p50", "p90", "p99" };
  const double q[3] = { 0.5, 0.9, 0.99 };
  const char *members[4] = { "ttft_ms", "tpot_ms", "e2e_ms", "tbt_ms" };
  const enum tb_samples_series ser[4] = { TB_SAMPLES_TTFT, TB_SAMPLES_TPOT, TB_SAMPLES_E2E,
                                          TB_SAMPLES_GAP };
  for (int m = 0; m < 4; m++)
    for (int i = 0; i < 3; i++) {
      struct tb_stats ns = { 0 };
      for (size_t j = 0; j < all.s[ser[m]].n; j++)
        tb_stats_add(&ns, all.s[ser[m]].v[j] * 1000);
      assert_true(pct(cell, members[m], ps[i]) == tb_stats_quantile(&ns, q[i]) / 1e6);
      tb_stats_free(&ns);
    }
  assert_string_equal(json_string_value(json_object_get(cell, "status")), "valid");
  assert_int_equal(json_integer_value(json_object_get(cell, "completed")), all.completed);
  assert_int_equal(json_integer_value(json_object_get(cell, "output_tokens")), all.tokens);
  assert_int_equal(json_integer_value(json_object_get(cell, "requests")), all.completed);
  /* the common timeline: achieved over t0 to the latest shard's last end */
  double dur = json_real_value(json_object_get(cell, "measured_s"));
  assert_true(dur > 5.4 && dur < 5.402);
  assert_true(fabs(json_real_value(json_object_get(cell, "achieved_rps")) -
                   (double)all.completed / dur) < 1e-9);
  assert_true(json_real_value(json_object_get(cell, "arrivals_s")) == 4.0);
  assert_non_null(json_object_get(cell, "checks"));
  assert_null(json_object_get(cell, "samples"));
  assert_int_equal(json_integer_value(json_object_get(json_object_get(cell, "shards"), "count")),
                   3);
  /* the steady-state window (issue 25) of the union: every request of
   * every stored shard, read back here, through tb_steady */
  json_t *want = union_steady(&k);
  assert_true(json_equal(json_object_get(cell, "steady"), want));
  assert_true(json_is_true(json_object_get(want, "found")));
  json_decref(want);
  /* a decode cell's merge refuses a rate cell's shards, and the rate merge
   * a decode cell's */
  json_t *d = json_pack("{s:s}", "phase", "decode");
  assert_int_equal(worker_shard_merge(db, &k, 4, NULL, d, err, sizeof err), WORKER_SHARD_BAD);
  json_decref(d);
  tb_samples_free(&all);
  tb_spec_free(&spec);
  json_decref(cell);
}

static void
test_merge_is_the_recomputation(void **state)
{
  (void)state;
  struct tb_shards_key k;
  int64_t skews[3] = { 300, -700, 1200 };
  run_shards("decode/1024/96", 3, skews, &k, false);
  json_t *cell =
    json_pack("{s:s, s:i, s:i}", "phase", "decode", "context", 1024, "concurrency", 96);
  char err[200];
  assert_int_equal(worker_shard_merge(db, &k, 10, NULL, cell, err, sizeof err), 1);
  struct tb_samples all;
  recompute(&k, &all);
  const char *ps[3] = { "p50", "p90", "p99" };
  const double q[3] = { 0.5, 0.9, 0.99 };
  for (int i = 0; i < 3; i++) {
    /* identical: the same doubles, ms from us as the writer computes them */
    assert_true(pct(cell, "e2e_ms", ps[i]) ==
                tb_samples_quantile(&all, TB_SAMPLES_E2E, q[i]) / 1e3);
    assert_true(pct(cell, "itl_ms", ps[i]) ==
                tb_samples_quantile(&all, TB_SAMPLES_GAP, q[i]) / 1e3);
    struct tb_stats ns = { 0 };
    for (size_t j = 0; j < all.s[TB_SAMPLES_TTFT].n; j++)
      tb_stats_add(&ns, all.s[TB_SAMPLES_TTFT].v[j] * 1000);
    assert_true(pct(cell, "ttft_ms", ps[i]) == tb_stats_quantile(&ns, q[i]) / 1e6);
    tb_stats_free(&ns);
  }
  assert_int_equal(json_integer_value(json_object_get(cell, "output_tokens")), all.tokens);
  assert_int_equal(json_integer_value(json_object_get(cell, "completed")), all.completed);
  assert_true(
    fabs(json_real_value(json_object_get(cell, "total_tps")) - (double)all.tokens / 10.0) < 1e-9);
  assert_true(fabs(json_real_value(json_object_get(cell, "avg_active")) - 96.0) < 1e-12);
  assert_string_equal(json_string_value(json_object_get(cell, "status")), "valid");
  json_t *sh = json_object_get(cell, "shards");
  assert_int_equal(json_integer_value(json_object_get(sh, "count")), 3);
  assert_true(json_real_value(json_object_get(sh, "merge_ms")) > 0);
  assert_true(fabs(json_real_value(json_object_get(sh, "skew_max_ms")) - 1.2) < 1e-12);
  json_t *w1 = json_array_get(json_object_get(sh, "where"), 1);
  assert_string_equal(json_string_value(json_object_get(w1, "worker")), "w1");
  assert_string_equal(json_string_value(json_object_get(w1, "host")), "host-b");
  tb_samples_free(&all);
  json_decref(cell);
}

static void
test_skew_over_the_limit_fails_the_cell(void **state)
{
  (void)state;
  struct tb_shards_key k;
  int64_t skews[2] = { 100, 2500 }; /* 2.5 ms over a 0.1 s window: limit 2 ms */
  run_shards("decode/0/8", 2, skews, &k, false);
  json_t *cell = json_pack("{s:s}", "phase", "decode");
  char err[200];
  assert_int_equal(worker_shard_merge(db, &k, 0.1, NULL, cell, err, sizeof err), 1);
  assert_string_equal(json_string_value(json_object_get(cell, "status")), "error");
  json_decref(cell);
}

static void
test_bad_blob_and_not_done(void **state)
{
  (void)state;
  struct tb_shards_key k;
  int64_t skews[2] = { 0, 0 };
  run_shards("decode/4096/2", 2, skews, &k, false);
  char v[8];
  q1(v, sizeof v,
     "UPDATE cell_shards SET samples = '\\x5442533101'::bytea WHERE cell_key = '%s'"
     " AND shard = 1",
     k.cell_key);
  json_t *cell = json_object();
  char err[200];
  assert_int_equal(worker_shard_merge(db, &k, 10, NULL, cell, err, sizeof err), WORKER_SHARD_BAD);
  assert_non_null(strstr(err, "shard 1 (worker w1)"));
  /* a barrier whose shards are not all done: nothing */
  q1(v, sizeof v, "UPDATE cell_shards SET state = 'ready' WHERE cell_key = '%s' AND shard = 1",
     k.cell_key);
  assert_int_equal(worker_shard_merge(db, &k, 10, NULL, cell, err, sizeof err), 0);
  json_decref(cell);
}

/* How many shards: the spec's N, at most the streams and 64; "auto" (0)
 * from TOKBENCH_SHARD_MAX_STREAMS. */
static void
test_shard_count(void **state)
{
  (void)state;
  struct worker_shard_cfg cfg = { .max_streams = 2048 };
  assert_int_equal(worker_shard_count(&cfg, 3, 8), 3);
  assert_int_equal(worker_shard_count(&cfg, 4, 2), 2); /* not more than the streams */
  assert_int_equal(worker_shard_count(&cfg, 1, 512), 1);
  assert_int_equal(worker_shard_count(&cfg, 0, 10), 1); /* auto: one shard holds them */
  assert_int_equal(worker_shard_count(&cfg, 0, 2048), 1);
  assert_int_equal(worker_shard_count(&cfg, 0, 2049), 2);
  assert_int_equal(worker_shard_count(&cfg, 0, 5000), 3);
  cfg.max_streams = 1;
  assert_int_equal(worker_shard_count(&cfg, 0, 1000), 64); /* the cap */
}

int
main(void)
{
  const struct CMUnitTest tests[] = {
    cmocka_unit_test(test_merge_is_the_recomputation),
    cmocka_unit_test(test_rate_merge_is_the_recomputation),
    cmocka_unit_test(test_skew_over_the_limit_fails_the_cell),
    cmocka_unit_test(test_bad_blob_and_not_done),
    cmocka_unit_test(test_shard_count),
  };
  return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
