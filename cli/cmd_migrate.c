/*
 * tokbench migrate: applies the embedded migrations to TOKBENCH_DATABASE_URL
 * (or --database-url).  Running it again applies nothing.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "base/tb_log.h"
#include "db/tb_migrate.h"

int
tb_cli_migrate(int argc, char **argv)
{
  const char *url = getenv("TOKBENCH_DATABASE_URL");
  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "--help") == 0) {
      printf("usage: tokbench migrate [--database-url URL]\n\n"
             "Applies the database migrations that are missing, each in its own\n"
             "transaction, recorded in tb_schema_version.  The URL defaults to\n"
             "TOKBENCH_DATABASE_URL.\n");
      return 0;
    }
    if (strcmp(argv[i], "--database-url") == 0 && i + 1 < argc) {
      url = argv[++i];
      continue;
    }
    fprintf(stderr, "tokbench migrate: unknown argument '%s'\n", argv[i]);
    return 2;
  }
  if (url == NULL) {
    fprintf(stderr, "tokbench migrate: TOKBENCH_DATABASE_URL is not set\n");
    return 2;
  }
  tb_log_init("migrate", TB_LOG_WARN);
  char *err = NULL;
  struct tb_db *db = tb_db_connect(url, 5000, &err);
  if (db == NULL) {
    fprintf(stderr, "tokbench migrate: cannot connect: %s\n", err);
    free(err);
    return 1;
  }
  int n = tb_migrate_run(db, &err);
  int rc = 0;
  if (n < 0) {
    fprintf(stderr, "tokbench migrate: %s\n", err);
    free(err);
    rc = 1;
  } else {
    printf("%d applied, schema version %d\n", n, tb_migrate_current(db));
  }
  tb_db_close(db);
  return rc;
}
