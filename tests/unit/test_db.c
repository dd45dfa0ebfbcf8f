/* Unit tests: tb_db against a throwaway PostgreSQL cluster (pgtmp.h):
 * connect errors (no secret in them), prepared statements with text and
 * NULL parameters, reading columns by name, the result vocabulary (unique
 * violation, hard errors), transactions, reconnecting after the server ends
 * the connection (retried outside a transaction, soft inside one), LISTEN /
 * NOTIFY with the payload cap, the pool across threads, and more distinct
 * statements than the prepared-statement table holds. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "pgtmp.h"
#include "db/tb_db.h"

static struct tb_db *
db_open(void)
{
  char *err = NULL;
  struct tb_db *db = tb_db_connect(pgtmp_cluster.url, 5000, &err);
  if (db == NULL)
    fail_msg("connect: %s", err);
  return db;
}

static void
test_connect_errors(void **state)
{
  (void)state;
  char *err = NULL;
  char *url =
    tb_xasprintf("postgresql://tb:s3cretpw@/tokbench?host=%s/nowhere&port=1", pgtmp_cluster.dir);
  assert_null(tb_db_connect(url, 0, &err));
  assert_non_null(err);
  assert_true(err[0] != '\0');
  assert_null(strstr(err, "s3cretpw"));
  assert_true(err[strlen(err) - 1] != '\n'); /* one line, trimmed */
  free(err);
  free(url);
  err = NULL;
  assert_null(tb_db_connect("this is = not a valid = connection string", 0, &err));
  assert_non_null(err);
  free(err);
  tb_db_close(NULL);
  err = NULL;
  assert_null(tb_db_pool_new("host=/nonexistent-dir port=1", 2, 0, &err));
  assert_non_null(err);
  free(err);
}

static const struct tb_db_stmt st_insert = {
  "t_insert", "INSERT INTO t (id, name, n) VALUES ($1::int, $2, $3::bigint)"
};
static const struct tb_db_stmt st_bools = {
  "test_bools",
  "SELECT true AS yes, false AS no, NULL::bool AS none",
};

static const struct tb_db_stmt st_select = { "t_select",
                                             "SELECT id, name, n FROM t WHERE id = $1::int" };
static const struct tb_db_stmt st_count = { "t_count", "SELECT count(*) AS c FROM t" };
static const struct tb_db_stmt st_bad = { "t_bad", "SELEKT nonsense" };
static const struct tb_db_stmt st_pid = { "t_pid", "SELECT pg_backend_pid()::text AS pid" };

static int64_t
count_rows(struct tb_db *db)
{
  PGresult *r = NULL;
  assert_int_equal(tb_db_exec(db, &st_count, 0, NULL, &r), 1);
  int64_t c = tb_db_i64(r, 0, "c");
  PQclear(r);
  return c;
}

static void
test_exec_and_read(void **state)
{
  (void)state;
  struct tb_db *db = db_open();
  assert_true(tb_db_ping(db));
  assert_int_equal(tb_db_exec_sql(db, "DROP TABLE IF EXISTS t"), 0);
  assert_int_equal(tb_db_exec_sql(db, "CREATE TABLE t (id int PRIMARY KEY, name text, n bigint)"),
                   0);
  const char *p1[] = { "1", "it's \"quoted\"; DROP TABLE t; --", "9223372036854775807" };
  assert_int_equal(tb_db_exec(db, &st_insert, 3, p1, NULL), 1);
  const char *p2[] = { "2", NULL, NULL }; /* SQL NULLs */
  assert_int_equal(tb_db_exec(db, &st_insert, 3, p2, NULL), 1);

  PGresult *r = NULL;
  const char *k1[] = { "1" };
  assert_int_equal(tb_db_exec(db, &st_select, 1, k1, &r), 1);
  assert_string_equal(tb_db_str(r, 0, "name"), p1[1]); /* parameters are data */
  assert_true(tb_db_i64(r, 0, "n") == INT64_MAX);
  assert_false(tb_db_isnull(r, 0, "name"));
  assert_null(tb_db_str(r, 0, "no_such_column"));
  assert_true(tb_db_isnull(r, 0, "no_such_column"));
  assert_null(tb_db_str(r, 5, "name")); /* no such row */
  PQclear(r);
  const char *k2[] = { "2" };
  assert_int_equal(tb_db_exec(db, &st_select, 1, k2, &r), 1);
  assert_null(tb_db_str(r, 0, "name"));
  assert_int_equal(tb_db_i64(r, 0, "n"), 0);
  assert_true(tb_db_isnull(r, 0, "n"));
  PQclear(r);
  const char *k3[] = { "3" };
  assert_int_equal(tb_db_exec(db, &st_select, 1, k3, &r), 0);
  PQclear(r);

  /* the vocabulary: a unique violation, reported or not; a bad statement */
  bool uv = false;
  r = (PGresult *)1;
  assert_int_equal(tb_db_exec_uv(db, &st_insert, 3, p1, &r, &uv), TB_DB_HARD);
  assert_true(uv);
  assert_null(r); /* nothing to clear on failure */
  assert_int_equal(tb_db_exec(db, &st_insert, 3, p1, NULL), TB_DB_HARD);
  assert_int_equal(tb_db_exec(db, &st_bad, 0, NULL, NULL), TB_DB_HARD);
  assert_int_equal(tb_db_exec(db, &st_bad, 0, NULL, NULL), TB_DB_HARD);
  const char *notint[] = { "one" };
  assert_int_equal(tb_db_exec(db, &st_select, 1, notint, NULL), TB_DB_HARD);
  assert_int_equal(tb_db_exec_sql(db, "SELECT 1/0"), TB_DB_HARD);
  /* the connection goes on after all that */
  assert_int_equal(count_rows(db), 2);
  uv = true;
  const char *p3[] = { "3", "x", "3" };
  assert_int_equal(tb_db_exec_uv(db, &st_insert, 3, p3, NULL, &uv), 1);
  assert_false(uv);

  /* one column by name: copied, duplicated, or the first row's into a string */
  assert_int_equal(tb_db_exec(db, &st_select, 1, k1, &r), 1);
  char small[8];
  tb_db_copy(r, 0, "name", small, sizeof small);
  assert_string_equal(small, "it's \"q"); /* truncated to its cap */
  char *d = tb_db_dup(r, 0, "name");
  assert_string_equal(d, p1[1]);
  free(d);
  assert_null(tb_db_dup(r, 0, "no_such_column"));
  PQclear(r);
  assert_int_equal(tb_db_exec(db, &st_select, 1, k2, &r), 1);
  tb_db_copy(r, 0, "name", small, sizeof small);
  assert_string_equal(small, ""); /* SQL NULL */
  PQclear(r);
  char *s = (char *)1;
  assert_int_equal(tb_db_exec_str(db, &st_select, 1, k1, "name", &s, NULL), 1);
  assert_string_equal(s, p1[1]);
  free(s);
  assert_int_equal(tb_db_exec_str(db, &st_select, 1, k3, "name", &s, NULL), 1);
  assert_string_equal(s, "x");
  free(s);
  const char *k4[] = { "4" };
  assert_int_equal(tb_db_exec_str(db, &st_select, 1, k4, "name", &s, NULL), 0);
  assert_null(s); /* no row */
  uv = false;
  assert_int_equal(tb_db_exec_str(db, &st_insert, 3, p3, "name", &s, &uv), TB_DB_HARD);
  assert_true(uv);
  assert_null(s);
  assert_int_equal(tb_db_exec(db, &st_bools, 0, NULL, &r), 1);
  assert_true(tb_db_bool(r, 0, "yes"));
  assert_false(tb_db_bool(r, 0, "no"));
  assert_false(tb_db_bool(r, 0, "none"));
  PQclear(r);
  tb_db_close(db);
}

static void
test_transactions(void **state)
{
  (void)state;
  struct tb_db *db = db_open();
  int64_t before = count_rows(db);
  assert_false(tb_db_in_tx(db));
  assert_int_equal(tb_db_begin(db), 0);
  assert_true(tb_db_in_tx(db));
  const char *p[] = { "100", "tx", "1" };
  assert_int_equal(tb_db_exec(db, &st_insert, 3, p, NULL), 1);
  tb_db_rollback(db);
  assert_false(tb_db_in_tx(db));
  assert_int_equal(count_rows(db), before);
  assert_int_equal(tb_db_begin(db), 0);
  assert_int_equal(tb_db_exec(db, &st_insert, 3, p, NULL), 1);
  assert_int_equal(tb_db_commit(db), 0);
  assert_int_equal(count_rows(db), before + 1);
  /* a transaction that failed does not commit, and says so */
  const char *q[] = { "101", "tx", "1" };
  assert_int_equal(tb_db_begin(db), 0);
  assert_int_equal(tb_db_exec(db, &st_insert, 3, q, NULL), 1);
  assert_int_equal(tb_db_exec(db, &st_insert, 3, p, NULL), TB_DB_HARD); /* duplicate */
  assert_true(tb_db_commit(db) < 0);
  assert_int_equal(count_rows(db), before + 1);
  tb_db_close(db);
}

/* Ends db's server process from another connection (as a restart would). */
static void
terminate(struct tb_db *db)
{
  PGresult *r = NULL;
  assert_int_equal(tb_db_exec(db, &st_pid, 0, NULL, &r), 1);
  char *sql = tb_xasprintf("SELECT pg_terminate_backend(%s)", tb_db_str(r, 0, "pid"));
  PQclear(r);
  struct tb_db *other = db_open();
  assert_int_equal(tb_db_exec_sql(other, sql), 1);
  tb_db_close(other);
  free(sql);
}

static void
test_reconnect(void **state)
{
  (void)state;
  struct tb_db *db = db_open();
  int64_t rows = count_rows(db); /* st_count is prepared on this connection */
  terminate(db);
  /* outside a transaction: reconnects, prepares again, retries once */
  assert_int_equal(count_rows(db), rows);
  assert_true(tb_db_ping(db));
  /* inside one: soft, for the caller to retry the whole transaction */
  assert_int_equal(tb_db_begin(db), 0);
  terminate(db);
  assert_int_equal(tb_db_exec(db, &st_count, 0, NULL, NULL), TB_DB_SOFT);
  tb_db_rollback(db);
  assert_int_equal(count_rows(db), rows);
  tb_db_close(db);
}

static void
test_listen_notify(void **state)
{
  (void)state;
  struct tb_db *l = db_open(), *s = db_open();
  char buf[6];
  assert_true(tb_db_listen(l, "tb_unit"));
  assert_false(tb_db_wait_notify(l, 50, buf, sizeof buf));
  assert_int_equal(tb_db_exec_sql(s, "NOTIFY tb_unit, 'hello world'"), 0);
  assert_true(tb_db_wait_notify(l, 5000, buf, sizeof buf));
  assert_string_equal(buf, "hello"); /* cut to the caller's cap */
  /* several at once: one wake-up, the first payload */
  assert_int_equal(tb_db_exec_sql(s, "NOTIFY tb_unit, 'a'"), 0);
  assert_int_equal(tb_db_exec_sql(s, "NOTIFY tb_unit, 'b'"), 0);
  assert_true(tb_db_wait_notify(l, 5000, buf, sizeof buf));
  assert_string_equal(buf, "a");
  while (tb_db_wait_notify(l, 100, NULL, 0)) /* drain "b" if it came apart */
    ;
  /* LISTEN is issued again after a reconnect */
  terminate(l);
  assert_true(tb_db_ping(l));
  assert_int_equal(tb_db_exec_sql(s, "NOTIFY tb_unit, 'again'"), 0);
  assert_true(tb_db_wait_notify(l, 5000, buf, sizeof buf));
  assert_string_equal(buf, "again");
  /* a named cap on channels */
  char name[32];
  int ok = 1;
  for (int i = 0; i < 20; i++) {
    snprintf(name, sizeof name, "tb_unit_%d", i);
    if (!tb_db_listen(l, name))
      break;
    ok++;
  }
  assert_true(ok < 20);
  tb_db_close(s);
  tb_db_close(l);
}

struct pool_arg {
  struct tb_db_pool *pool;
  int base;
};

static const struct tb_db_stmt st_pool_insert = {
  "t_pool_insert", "INSERT INTO t (id, name) VALUES ($1::int, 'pool')"
};

static void *
pool_worker(void *arg)
{
  struct pool_arg *a = arg;
  for (int i = 0; i < 25; i++) {
    struct tb_db *db = tb_db_pool_get(a->pool);
    char id[16];
    snprintf(id, sizeof id, "%d", a->base + i);
    const char *p[] = { id };
    if (tb_db_exec(db, &st_pool_insert, 1, p, NULL) != 1)
      a->base = -1;
    tb_db_pool_put(a->pool, db);
    if (a->base < 0)
      break;
  }
  return NULL;
}

static void
test_pool(void **state)
{
  (void)state;
  char *err = NULL;
  struct tb_db_pool *pool = tb_db_pool_new(pgtmp_cluster.url, 2, 5000, &err);
  assert_non_null(pool);
  struct tb_db *db = db_open();
  int64_t before = count_rows(db);
  pthread_t th[4];
  struct pool_arg a[4];
  for (int i = 0; i < 4; i++) {
    a[i] = (struct pool_arg){ pool, 1000 + 100 * i };
    assert_int_equal(pthread_create(&th[i], NULL, pool_worker, &a[i]), 0);
  }
  for (int i = 0; i < 4; i++) {
    pthread_join(th[i], NULL);
    assert_true(a[i].base >= 0);
  }
  assert_int_equal(count_rows(db), before + 100);
  tb_db_close(db);
  tb_db_pool_free(pool);
  tb_db_pool_free(NULL);
}

/* More distinct statements on one connection than tb_db remembers as
 * prepared: each must still run, and run again. */
static void
test_many_statements(void **state)
{
  (void)state;
  enum {
    N = 300
  };
  static struct tb_db_stmt st[N];
  static char names[N][16], sqls[N][48];
  for (int i = 0; i < N; i++) {
    snprintf(names[i], sizeof names[i], "many_%d", i);
    snprintf(sqls[i], sizeof sqls[i], "SELECT $1::int + %d AS v", i);
    st[i] = (struct tb_db_stmt){ names[i], sqls[i] };
  }
  struct tb_db *db = db_open();
  for (int round = 0; round < 2; round++) {
    for (int i = 0; i < N; i++) {
      PGresult *r = NULL;
      const char *p[] = { "1000" };
      int rc = tb_db_exec(db, &st[i], 1, p, &r);
      if (rc != 1)
        fail_msg("statement %d, round %d: %d", i, round, rc);
      assert_int_equal(tb_db_i64(r, 0, "v"), 1000 + i);
      PQclear(r);
    }
  }
  tb_db_close(db);
}

int
main(void)
{
  const struct CMUnitTest tests[] = {
    cmocka_unit_test(test_connect_errors),  cmocka_unit_test(test_exec_and_read),
    cmocka_unit_test(test_transactions),    cmocka_unit_test(test_reconnect),
    cmocka_unit_test(test_listen_notify),   cmocka_unit_test(test_pool),
    cmocka_unit_test(test_many_statements),
  };
  return cmocka_run_group_tests(tests, pgtmp_group_setup, pgtmp_group_teardown);
}
