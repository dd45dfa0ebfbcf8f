/*
 * tb_migrate: schema migrations.
 *
 * sql/NNNN_name.sql files are compiled into the binaries (scripts/embed-sql.sh
 * makes the tb_migrations table).  tb_migrate_run applies, in order, each one
 * not yet recorded in tb_schema_version, each inside its own transaction
 * together with its record, under an advisory lock so that two api replicas
 * starting at once do not race.  Running it again is a no-op.
 */
#ifndef TB_MIGRATE_H
#define TB_MIGRATE_H

#include "db/tb_db.h"

struct tb_migration {
  int version;
  const char *name;
  const char *sql;
};

extern const struct tb_migration tb_migrations[];
extern const unsigned int tb_migrations_count;

/* Applies what is missing.  Returns the number applied (>= 0), or -1 with
 * *err set (caller frees). */
int tb_migrate_run(struct tb_db *db, char **err) TB_MUST_CHECK;
/* The highest applied version, 0 when none, -1 on error. */
int tb_migrate_current(struct tb_db *db);

#endif
