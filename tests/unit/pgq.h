/*
 * pgq.h: one value of SQL run directly on a test's connection (set-up and
 * checks of the modules that are nothing without a database: tb_queue,
 * tb_shards, the worker's shard merge), or "" for none; a failed statement
 * fails the test.  Include after cmocka.h.
 */
#ifndef TB_TEST_PGQ_H
#define TB_TEST_PGQ_H

#include <libpq-fe.h>
#include <stdarg.h>
#include <stdio.h>

#include "base/tb_util.h"

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

#endif
