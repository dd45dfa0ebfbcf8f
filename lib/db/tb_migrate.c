/*
 * tb_migrate: see tb_migrate.h.
 */
#include "db/tb_migrate.h"

#include <stdlib.h>
#include <string.h>

#include "base/tb_log.h"

#define TB_MIGRATE_LOCK "7305124417" /* pg_advisory_lock key: "tokbench" */

static const struct tb_db_stmt stmt_applied = {
  "migrate_applied", "SELECT 1 FROM tb_schema_version WHERE version = $1"
};
static const struct tb_db_stmt stmt_record = {
  "migrate_record", "INSERT INTO tb_schema_version (version, name) VALUES ($1, $2)"
};
static const struct tb_db_stmt stmt_current = {
  "migrate_current", "SELECT COALESCE(max(version), 0) AS v FROM tb_schema_version"
};

static int
apply_one(struct tb_db *db, const struct tb_migration *m, char **err)
{
  char ver[16];
  snprintf(ver, sizeof ver, "%d", m->version);
  const char *p1[] = { ver };
  int rc = tb_db_exec(db, &stmt_applied, 1, p1, NULL);
  if (rc < 0) {
    *err = tb_xasprintf("reading tb_schema_version failed");
    return -1;
  }
  if (rc == 1)
    return 0;
  if (tb_db_begin(db) < 0) {
    *err = tb_xasprintf("BEGIN failed");
    return -1;
  }
  if (tb_db_exec_sql(db, m->sql) < 0) {
    tb_db_rollback(db);
    *err = tb_xasprintf("migration %s failed", m->name);
    return -1;
  }
  const char *p2[] = { ver, m->name };
  if (tb_db_exec(db, &stmt_record, 2, p2, NULL) != 1 || tb_db_commit(db) < 0) {
    tb_db_rollback(db);
    *err = tb_xasprintf("recording migration %s failed", m->name);
    return -1;
  }
  tb_log(TB_LOG_INFO, "migration applied", "version", TB_LI, (int64_t)m->version, "name", TB_LS,
         m->name, NULL);
  return 1;
}

int
tb_migrate_run(struct tb_db *db, char **err)
{
  if (tb_db_exec_sql(db, "SELECT pg_advisory_lock(" TB_MIGRATE_LOCK ")") < 0) {
    *err = tb_xstrdup("cannot take the migration lock");
    return -1;
  }
  int applied = 0;
  if (tb_db_exec_sql(db, "CREATE TABLE IF NOT EXISTS tb_schema_version ("
                         " version integer PRIMARY KEY,"
                         " name text NOT NULL,"
                         " applied_at timestamptz NOT NULL DEFAULT now())") < 0) {
    *err = tb_xstrdup("cannot create tb_schema_version");
    applied = -1;
    goto out;
  }
  for (unsigned i = 0; i < tb_migrations_count; i++) {
    int rc = apply_one(db, &tb_migrations[i], err);
    if (rc < 0) {
      applied = -1;
      goto out;
    }
    applied += rc;
  }
out:
  if (tb_db_exec_sql(db, "SELECT pg_advisory_unlock(" TB_MIGRATE_LOCK ")") < 0)
    tb_log(TB_LOG_WARN, "cannot release the migration lock", NULL);
  return applied;
}

int
tb_migrate_current(struct tb_db *db)
{
  PGresult *r = NULL;
  if (tb_db_exec(db, &stmt_current, 0, NULL, &r) != 1)
    return -1;
  int v = (int)tb_db_i64(r, 0, "v");
  PQclear(r);
  return v;
}
