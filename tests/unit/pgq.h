/*
 * pgq.h: one value of SQL run directly on a test's connection (set-up and
 * checks of the modules that are nothing without a database: tb_queue,
 * tb_shards, the worker's shard merge), or "" for none; a failed statement
 * fails the test; a migrated cluster and an endpoint to queue jobs for.
 * Include after cmocka.h.
 */
#ifndef TB_TEST_PGQ_H
#define TB_TEST_PGQ_H

#include <libpq-fe.h>
#include <stdarg.h>
#include <stdio.h>

#include "base/tb_util.h"
#include "db/tb_db.h"
#include "db/tb_migrate.h"
#include "pgtmp.h"

static inline void TB_PRINTF(4, 5)
  pgq_one(PGconn *conn, char *out, size_t len, const char *fmt, ...)
{
  va_list ap;
  va_start(ap, fmt);
  char sql[2048];
  vsnprintf(sql, sizeof sql, fmt, ap);
  va_end(ap);
  PGresult *r = PQexec(conn, sql);
  ExecStatusType st = PQresultStatus(r);
  if (st != PGRES_TUPLES_OK && st != PGRES_COMMAND_OK)
    fail_msg("%s: %s", sql, PQerrorMessage(conn));
  snprintf(out, len, "%s",
           st == PGRES_TUPLES_OK && PQntuples(r) > 0 && !PQgetisnull(r, 0, 0) ? PQgetvalue(r, 0, 0)
                                                                              : "");
  PQclear(r);
}

/* A temporary cluster up, connected (*db) and migrated; false with the
 * reason on stderr. */
static inline bool
pgq_cluster_up(struct pgtmp *cluster, struct tb_db **db)
{
  char *err = NULL;
  if (!pgtmp_up(cluster) || (*db = tb_db_connect(cluster->url, 5000, &err)) == NULL ||
      tb_migrate_run(*db, &err) < 0) {
    fprintf(stderr, "# set-up: %s\n", err ? err : "cluster");
    free(err);
    return false;
  }
  return true;
}

/* A project and its endpoint (a vLLM at 10.0.0.1:8000 with the hardware
 * and engine JSON given) into project and endpoint (40 bytes each). */
static inline void
pgq_endpoint(PGconn *conn, char project[40], char endpoint[40], const char *hardware,
             const char *engine)
{
  pgq_one(conn, project, 40, "INSERT INTO projects (name) VALUES ('unit') RETURNING id");
  pgq_one(conn, endpoint, 40,
          "INSERT INTO endpoints (project_id, name, base_url, api_key_sealed, launch_command,"
          " hardware, engine, api_key_origin) VALUES ('%s', 'gpu', 'http://10.0.0.1:8000',"
          " 'sealed', 'vllm serve m', '%s', '%s', 'http://10.0.0.1:8000') RETURNING id",
          project, hardware, engine);
}

#endif
