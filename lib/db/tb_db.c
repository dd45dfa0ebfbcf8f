/*
 * tb_db: see tb_db.h.
 *
 * Reconnects: a broken connection is detected after a failed statement
 * (PQstatus != CONNECTION_OK).  We reconnect with exponential backoff from
 * 50 ms to 2 s, for at most TB_DB_RECONNECT_MS per call, so that a request
 * thread does not hang forever while PostgreSQL restarts: it gets TB_DB_SOFT
 * and its caller answers 503 or retries later.
 */
#include "db/tb_db.h"

#include <poll.h>
#include <stdio.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/tb_crypto.h"
#include "base/tb_log.h"

#define TB_DB_RECONNECT_MS 3000
#define TB_DB_MAX_PREPARED 256
#define TB_DB_MAX_LISTEN 8

struct tb_db {
  char *url;
  PGconn *conn;
  const struct tb_db_stmt *prepared[TB_DB_MAX_PREPARED];
  unsigned n_prepared;
  char *listen[TB_DB_MAX_LISTEN];
  unsigned n_listen;
  bool in_tx;
};

static void
sleep_ms(int ms)
{
  struct timespec ts = { .tv_sec = ms / 1000, .tv_nsec = (long)(ms % 1000) * 1000000L };
  nanosleep(&ts, NULL);
}

static void
quiet_notice(void *arg, const char *message)
{
  (void)arg;
  (void)message;
}

static bool
try_connect(struct tb_db *db, char **err)
{
  if (db->conn != NULL)
    PQfinish(db->conn);
  db->n_prepared = 0;
  db->in_tx = false;
  db->conn = PQconnectdb(db->url);
  if (PQstatus(db->conn) != CONNECTION_OK) {
    if (err != NULL) {
      const char *m = PQerrorMessage(db->conn);
      size_t len = strlen(m);
      while (len > 0 && (m[len - 1] == '\n' || m[len - 1] == ' '))
        len--;
      *err = tb_xstrndup(m, len);
    }
    return false;
  }
  PQsetNoticeProcessor(db->conn, quiet_notice, NULL);
  for (unsigned i = 0; i < db->n_listen; i++) {
    char *sql = tb_xasprintf("LISTEN %s", db->listen[i]);
    PGresult *r = PQexec(db->conn, sql);
    free(sql);
    bool ok = PQresultStatus(r) == PGRES_COMMAND_OK;
    PQclear(r);
    if (!ok) {
      if (err != NULL)
        *err = tb_xstrdup("LISTEN failed");
      return false;
    }
  }
  return true;
}

static bool
reconnect(struct tb_db *db, int wait_ms, char **err)
{
  int64_t deadline = tb_time_mono_ns() + (int64_t)wait_ms * 1000000;
  int backoff = 50;
  for (;;) {
    char *e = NULL;
    if (try_connect(db, &e)) {
      free(e);
      return true;
    }
    if (tb_time_mono_ns() + (int64_t)backoff * 1000000 > deadline) {
      if (err != NULL)
        *err = e;
      else
        free(e);
      return false;
    }
    free(e);
    sleep_ms(backoff);
    backoff = backoff * 2 > 2000 ? 2000 : backoff * 2;
  }
}

struct tb_db *
tb_db_connect(const char *url, int wait_ms, char **err)
{
  struct tb_db *db = tb_xcalloc(1, sizeof *db);
  db->url = tb_xstrdup(url);
  if (!reconnect(db, wait_ms, err)) {
    tb_db_close(db);
    return NULL;
  }
  return db;
}

void
tb_db_close(struct tb_db *db)
{
  if (db == NULL)
    return;
  if (db->conn != NULL)
    PQfinish(db->conn);
  for (unsigned i = 0; i < db->n_listen; i++)
    free(db->listen[i]);
  free(db->url);
  free(db);
}

PGconn *
tb_db_conn(struct tb_db *db)
{
  return db->conn;
}

static bool
ensure_connected(struct tb_db *db)
{
  if (PQstatus(db->conn) == CONNECTION_OK)
    return true;
  return reconnect(db, TB_DB_RECONNECT_MS, NULL);
}

bool
tb_db_ping(struct tb_db *db)
{
  return tb_db_exec_sql(db, "SELECT 1") >= 0;
}

static bool
is_prepared(const struct tb_db *db, const struct tb_db_stmt *stmt)
{
  for (unsigned i = 0; i < db->n_prepared; i++)
    if (db->prepared[i] == stmt)
      return true;
  return false;
}

/* Classifies a failed result: soft for retryable SQLSTATEs and lost links. */
static int
classify(struct tb_db *db, PGresult *r, const char *what, bool *uv)
{
  const char *state = r ? PQresultErrorField(r, PG_DIAG_SQLSTATE) : NULL;
  if (PQstatus(db->conn) != CONNECTION_OK) {
    tb_log(TB_LOG_WARN, "database connection lost", "stmt", TB_LS, what, NULL);
    return TB_DB_SOFT;
  }
  if (state != NULL && (strcmp(state, "40001") == 0 || strcmp(state, "40P01") == 0 ||
                        strncmp(state, "08", 2) == 0 || strcmp(state, "57P01") == 0))
    return TB_DB_SOFT;
  if (state != NULL && strcmp(state, "23505") == 0 && uv != NULL) {
    *uv = true;
    return TB_DB_HARD;
  }
  const char *msg = r ? PQresultErrorField(r, PG_DIAG_MESSAGE_PRIMARY) : NULL;
  tb_log(TB_LOG_ERROR, "database statement failed", "stmt", TB_LS, what, "sqlstate", TB_LS,
         state ? state : "", "error", TB_LS, msg ? msg : PQerrorMessage(db->conn), NULL);
  return TB_DB_HARD;
}

static int
exec_once(struct tb_db *db, const struct tb_db_stmt *stmt, int nparams, const char *const *params,
          PGresult **res, bool *uv)
{
  const char *name = stmt->name;
  if (!is_prepared(db, stmt)) {
    /* With the table full, the unnamed statement, prepared on each use (a
     * named one would be "already prepared" on its next use). */
    bool keep = db->n_prepared < TB_DB_MAX_PREPARED;
    if (!keep)
      name = "";
    PGresult *p = PQprepare(db->conn, name, stmt->sql, 0, NULL);
    if (PQresultStatus(p) != PGRES_COMMAND_OK) {
      int rc = classify(db, p, stmt->name, NULL);
      PQclear(p);
      return rc;
    }
    PQclear(p);
    if (keep)
      db->prepared[db->n_prepared++] = stmt;
  }
  PGresult *r = PQexecPrepared(db->conn, name, nparams, params, NULL, NULL, 0);
  ExecStatusType st = PQresultStatus(r);
  if (st != PGRES_TUPLES_OK && st != PGRES_COMMAND_OK) {
    int rc = classify(db, r, stmt->name, uv);
    PQclear(r);
    return rc;
  }
  int n = st == PGRES_TUPLES_OK ? PQntuples(r) : (int)strtol(PQcmdTuples(r), NULL, 10); /* "": 0 */
  if (res != NULL)
    *res = r;
  else
    PQclear(r);
  return n;
}

int
tb_db_exec_uv(struct tb_db *db, const struct tb_db_stmt *stmt, int nparams,
              const char *const *params, PGresult **res, bool *unique_violation)
{
  if (res != NULL)
    *res = NULL;
  if (unique_violation != NULL)
    *unique_violation = false;
  if (!db->in_tx && !ensure_connected(db))
    return TB_DB_SOFT;
  int rc = exec_once(db, stmt, nparams, params, res, unique_violation);
  if (rc == TB_DB_SOFT && !db->in_tx && PQstatus(db->conn) != CONNECTION_OK && ensure_connected(db))
    rc = exec_once(db, stmt, nparams, params, res, unique_violation);
  return rc;
}

int
tb_db_exec(struct tb_db *db, const struct tb_db_stmt *stmt, int nparams, const char *const *params,
           PGresult **res)
{
  return tb_db_exec_uv(db, stmt, nparams, params, res, NULL);
}

int
tb_db_exec_str(struct tb_db *db, const struct tb_db_stmt *stmt, int nparams,
               const char *const *params, const char *col, char **out, bool *unique_violation)
{
  PGresult *r = NULL;
  *out = NULL;
  int rc = tb_db_exec_uv(db, stmt, nparams, params, &r, unique_violation);
  if (rc > 0)
    *out = tb_db_dup(r, 0, col);
  PQclear(r);
  return rc;
}

int
tb_db_exec_counted(struct tb_db *db, const struct tb_db_stmt *stmt, int nparams,
                   const char *const *params, const char *col)
{
  PGresult *r = NULL;
  int rc = tb_db_exec(db, stmt, nparams, params, &r);
  if (rc == 1)
    rc = tb_db_i64(r, 0, col) > 0 ? 1 : 0;
  else if (rc >= 0)
    rc = TB_DB_HARD;
  PQclear(r);
  return rc;
}

static int
exec_sql_once(struct tb_db *db, const char *sql)
{
  PGresult *r = PQexec(db->conn, sql);
  ExecStatusType st = PQresultStatus(r);
  int rc;
  if (st != PGRES_TUPLES_OK && st != PGRES_COMMAND_OK)
    rc = classify(db, r, "sql", NULL);
  else
    rc = st == PGRES_TUPLES_OK ? PQntuples(r) : 0;
  PQclear(r);
  return rc;
}

int
tb_db_exec_sql(struct tb_db *db, const char *sql)
{
  if (!db->in_tx && !ensure_connected(db))
    return TB_DB_SOFT;
  int rc = exec_sql_once(db, sql);
  /* as tb_db_exec: a connection found broken is retried once, outside a
   * transaction */
  if (rc == TB_DB_SOFT && !db->in_tx && PQstatus(db->conn) != CONNECTION_OK && ensure_connected(db))
    rc = exec_sql_once(db, sql);
  return rc;
}

int
tb_db_begin(struct tb_db *db)
{
  int rc = tb_db_exec_sql(db, "BEGIN ISOLATION LEVEL READ COMMITTED");
  if (rc >= 0)
    db->in_tx = true;
  return rc;
}

int
tb_db_commit(struct tb_db *db)
{
  /* COMMIT of a transaction a statement failed in rolls it back, without
   * an error: that is no success */
  bool failed = PQtransactionStatus(db->conn) == PQTRANS_INERROR;
  int rc = tb_db_exec_sql(db, "COMMIT");
  db->in_tx = false;
  if (rc >= 0 && failed) {
    tb_log(TB_LOG_ERROR, "commit of a failed transaction: rolled back", NULL);
    return TB_DB_HARD;
  }
  return rc;
}

void
tb_db_rollback(struct tb_db *db)
{
  if (PQstatus(db->conn) == CONNECTION_OK) {
    PGresult *r = PQexec(db->conn, "ROLLBACK");
    PQclear(r);
  }
  db->in_tx = false;
}

bool
tb_db_in_tx(const struct tb_db *db)
{
  return db->in_tx;
}

bool
tb_db_listen(struct tb_db *db, const char *channel)
{
  if (db->n_listen >= TB_DB_MAX_LISTEN)
    return false;
  char *sql = tb_xasprintf("LISTEN %s", channel);
  int rc = tb_db_exec_sql(db, sql);
  free(sql);
  if (rc < 0)
    return false;
  db->listen[db->n_listen++] = tb_xstrdup(channel);
  return true;
}

bool
tb_db_wait_notify(struct tb_db *db, int timeout_ms, char *payload, size_t payload_len)
{
  if (!ensure_connected(db)) {
    sleep_ms(timeout_ms > 200 ? 200 : timeout_ms);
    return false;
  }
  bool got = false;
  PGnotify *n;
  PQconsumeInput(db->conn);
  while ((n = PQnotifies(db->conn)) != NULL) {
    if (!got && payload != NULL && payload_len > 0)
      snprintf(payload, payload_len, "%s", n->extra);
    got = true;
    PQfreemem(n);
  }
  if (got)
    return true;
  struct pollfd pfd = { .fd = PQsocket(db->conn), .events = POLLIN };
  if (pfd.fd < 0)
    return false;
  if (poll(&pfd, 1, timeout_ms) <= 0)
    return false;
  if (PQconsumeInput(db->conn) == 0) {
    tb_log(TB_LOG_WARN, "database connection lost while listening", NULL);
    return false;
  }
  while ((n = PQnotifies(db->conn)) != NULL) {
    if (!got && payload != NULL && payload_len > 0)
      snprintf(payload, payload_len, "%s", n->extra);
    got = true;
    PQfreemem(n);
  }
  return got;
}

struct tb_db_pool {
  pthread_mutex_t lock;
  pthread_cond_t cond;
  struct tb_db **conns;
  bool *busy;
  unsigned size;
};

struct tb_db_pool *
tb_db_pool_new(const char *url, unsigned size, int wait_ms, char **err)
{
  struct tb_db_pool *p = tb_xcalloc(1, sizeof *p);
  pthread_mutex_init(&p->lock, NULL);
  pthread_cond_init(&p->cond, NULL);
  p->conns = tb_xcalloc(size, sizeof *p->conns);
  p->busy = tb_xcalloc(size, sizeof *p->busy);
  p->size = size;
  for (unsigned i = 0; i < size; i++) {
    p->conns[i] = tb_db_connect(url, i == 0 ? wait_ms : 0, err);
    if (p->conns[i] == NULL) {
      tb_db_pool_free(p);
      return NULL;
    }
  }
  return p;
}

struct tb_db *
tb_db_pool_get(struct tb_db_pool *p)
{
  pthread_mutex_lock(&p->lock);
  for (;;) {
    for (unsigned i = 0; i < p->size; i++) {
      if (!p->busy[i]) {
        p->busy[i] = true;
        pthread_mutex_unlock(&p->lock);
        return p->conns[i];
      }
    }
    pthread_cond_wait(&p->cond, &p->lock);
  }
}

void
tb_db_pool_put(struct tb_db_pool *p, struct tb_db *db)
{
  pthread_mutex_lock(&p->lock);
  for (unsigned i = 0; i < p->size; i++)
    if (p->conns[i] == db)
      p->busy[i] = false;
  pthread_cond_signal(&p->cond);
  pthread_mutex_unlock(&p->lock);
}

void
tb_db_pool_free(struct tb_db_pool *p)
{
  if (p == NULL)
    return;
  for (unsigned i = 0; i < p->size; i++)
    tb_db_close(p->conns[i]);
  free(p->conns);
  free(p->busy);
  pthread_mutex_destroy(&p->lock);
  pthread_cond_destroy(&p->cond);
  free(p);
}

const char *
tb_db_str(const PGresult *r, int row, const char *col)
{
  int c = PQfnumber(r, col);
  if (c < 0 || PQgetisnull(r, row, c))
    return NULL;
  return PQgetvalue(r, row, c);
}

int64_t
tb_db_i64(const PGresult *r, int row, const char *col)
{
  const char *s = tb_db_str(r, row, col);
  return s ? strtoll(s, NULL, 10) : 0;
}

bool
tb_db_bool(const PGresult *r, int row, const char *col)
{
  const char *s = tb_db_str(r, row, col);
  return s != NULL && s[0] == 't';
}

void
tb_db_copy(const PGresult *r, int row, const char *col, char *dst, size_t cap)
{
  const char *s = tb_db_str(r, row, col);
  snprintf(dst, cap, "%s", s != NULL ? s : "");
}

char *
tb_db_dup(const PGresult *r, int row, const char *col)
{
  const char *s = tb_db_str(r, row, col);
  return s != NULL ? tb_xstrdup(s) : NULL;
}

bool
tb_db_isnull(const PGresult *r, int row, const char *col)
{
  int c = PQfnumber(r, col);
  return c < 0 || PQgetisnull(r, row, c);
}

char *
tb_db_bytea_hex(const unsigned char *data, size_t len)
{
  char *hex = tb_xmalloc(2 * len + 3);
  hex[0] = '\\';
  hex[1] = 'x';
  tb_hex_encode(data, len, hex + 2);
  return hex;
}
