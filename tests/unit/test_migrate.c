/* Unit tests: tb_migrate.  The embedded table against sql/ (every file, in
 * order, byte for byte), then, on a throwaway cluster (pgtmp.h): a first run
 * applies everything, a second nothing; a migration that fails leaves no
 * trace and stops the run; two runs at once on a fresh database apply each
 * migration once (the advisory lock). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <dirent.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "pgtmp.h"
#include "db/tb_migrate.h"

static int
cmp_str(const void *a, const void *b)
{
  return strcmp(*(char *const *)a, *(char *const *)b);
}

static void
test_table_matches_sql_dir(void **state)
{
  (void)state;
  DIR *d = opendir("sql");
  assert_non_null(d); /* run from the repository's root */
  char *names[256];
  unsigned n = 0;
  struct dirent *e;
  while ((e = readdir(d)) != NULL && n < 256) {
    size_t l = strlen(e->d_name);
    if (l > 4 && strcmp(e->d_name + l - 4, ".sql") == 0)
      names[n++] = tb_xstrndup(e->d_name, l - 4);
  }
  closedir(d);
  qsort(names, n, sizeof names[0], cmp_str);
  assert_int_equal(tb_migrations_count, n);
  for (unsigned i = 0; i < n; i++) {
    const struct tb_migration *m = &tb_migrations[i];
    assert_string_equal(m->name, names[i]);
    assert_int_equal(m->version, strtol(names[i], NULL, 10));
    assert_true(m->version > 0);
    if (i > 0)
      assert_true(m->version > tb_migrations[i - 1].version);
    char *path = tb_xasprintf("sql/%s.sql", names[i]);
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    fseek(f, 0, SEEK_END);
    long len = ftell(f);
    rewind(f);
    char *text = tb_xmalloc((size_t)len + 1);
    assert_int_equal(fread(text, 1, (size_t)len, f), (size_t)len);
    text[len] = '\0';
    fclose(f);
    assert_int_equal(strlen(m->sql), (size_t)len);
    assert_memory_equal(m->sql, text, (size_t)len);
    free(text);
    free(path);
    free(names[i]);
  }
}

/* The URL of database name on the test cluster (new string). */
static char *
db_url(const char *name)
{
  const char *q = strstr(pgtmp_cluster.url, "/tokbench?");
  assert_non_null(q);
  return tb_xasprintf("%.*s/%s%s", (int)(q - pgtmp_cluster.url), pgtmp_cluster.url, name,
                      q + strlen("/tokbench"));
}

static struct tb_db *
fresh_db(const char *name)
{
  char *err = NULL;
  struct tb_db *admin = tb_db_connect(pgtmp_cluster.url, 5000, &err);
  assert_non_null(admin);
  char *sql = tb_xasprintf("CREATE DATABASE %s", name);
  assert_int_equal(tb_db_exec_sql(admin, sql), 0);
  free(sql);
  tb_db_close(admin);
  char *url = db_url(name);
  struct tb_db *db = tb_db_connect(url, 5000, &err);
  if (db == NULL)
    fail_msg("connect %s: %s", url, err);
  free(url);
  return db;
}

static int
count(struct tb_db *db, const char *sql)
{
  PGresult *r = PQexec(tb_db_conn(db), sql);
  assert_int_equal(PQresultStatus(r), PGRES_TUPLES_OK);
  int n = (int)strtol(PQgetvalue(r, 0, 0), NULL, 10);
  PQclear(r);
  return n;
}

static void
test_run_twice(void **state)
{
  (void)state;
  struct tb_db *db = fresh_db("m_twice");
  char *err = NULL;
  assert_int_equal(tb_migrate_run(db, &err), (int)tb_migrations_count);
  assert_null(err);
  int last = tb_migrations[tb_migrations_count - 1].version;
  assert_int_equal(tb_migrate_current(db), last);
  assert_int_equal(count(db, "SELECT count(*) FROM tb_schema_version"), (int)tb_migrations_count);
  /* the schema is there: the first migration's tables */
  assert_int_equal(count(db, "SELECT count(*) FROM projects"), 0);
  assert_int_equal(tb_migrate_run(db, &err), 0);
  assert_null(err);
  assert_int_equal(tb_migrate_current(db), last);
  /* the lock was released: another session can take it at once */
  assert_int_equal(count(db, "SELECT pg_try_advisory_lock(7305124417)::int"), 1);
  assert_int_equal(count(db, "SELECT pg_advisory_unlock(7305124417)::int"), 1);
  tb_db_close(db);
}

static void
test_failure_leaves_no_trace(void **state)
{
  (void)state;
  struct tb_db *db = fresh_db("m_fail");
  /* the first migration makes projects, then api_keys: with an api_keys
   * already there it fails half-way, and must leave nothing behind */
  PGresult *r = PQexec(tb_db_conn(db), "CREATE TABLE api_keys (x int)");
  assert_int_equal(PQresultStatus(r), PGRES_COMMAND_OK);
  PQclear(r);
  char *err = NULL;
  assert_int_equal(tb_migrate_run(db, &err), -1);
  assert_non_null(err);
  assert_non_null(strstr(err, tb_migrations[0].name));
  free(err);
  err = NULL;
  assert_int_equal(tb_migrate_current(db), 0);
  assert_int_equal(count(db, "SELECT count(*) FROM pg_tables WHERE tablename = 'projects'"), 0);
  /* the lock is released after a failure too */
  assert_int_equal(count(db, "SELECT pg_try_advisory_lock(7305124417)::int"), 1);
  assert_int_equal(count(db, "SELECT pg_advisory_unlock(7305124417)::int"), 1);
  r = PQexec(tb_db_conn(db), "DROP TABLE api_keys");
  assert_int_equal(PQresultStatus(r), PGRES_COMMAND_OK);
  PQclear(r);
  /* then a run applies everything */
  assert_int_equal(tb_migrate_run(db, &err), (int)tb_migrations_count);
  assert_null(err);
  assert_int_equal(tb_migrate_current(db), tb_migrations[tb_migrations_count - 1].version);
  tb_db_close(db);
}

struct racer {
  char *url;
  int applied;
};

static void *
race(void *arg)
{
  struct racer *r = arg;
  char *err = NULL;
  struct tb_db *db = tb_db_connect(r->url, 5000, &err);
  if (db == NULL) {
    free(err);
    r->applied = -2;
    return NULL;
  }
  r->applied = tb_migrate_run(db, &err);
  free(err);
  tb_db_close(db);
  return NULL;
}

static void
test_concurrent_runs(void **state)
{
  (void)state;
  struct tb_db *db = fresh_db("m_race");
  struct racer r[3];
  pthread_t th[3];
  for (int i = 0; i < 3; i++) {
    r[i] = (struct racer){ db_url("m_race"), -3 };
    assert_int_equal(pthread_create(&th[i], NULL, race, &r[i]), 0);
  }
  int total = 0;
  for (int i = 0; i < 3; i++) {
    pthread_join(th[i], NULL);
    assert_true(r[i].applied >= 0);
    total += r[i].applied;
    free(r[i].url);
  }
  assert_int_equal(total, (int)tb_migrations_count);
  assert_int_equal(count(db, "SELECT count(*) FROM tb_schema_version"), (int)tb_migrations_count);
  tb_db_close(db);
}

int
main(void)
{
  const struct CMUnitTest tests[] = {
    cmocka_unit_test(test_table_matches_sql_dir),
    cmocka_unit_test(test_run_twice),
    cmocka_unit_test(test_failure_leaves_no_trace),
    cmocka_unit_test(test_concurrent_runs),
  };
  return cmocka_run_group_tests(tests, pgtmp_group_setup, pgtmp_group_teardown);
}
