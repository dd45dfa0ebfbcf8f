/*
 * tb_db: PostgreSQL through libpq.
 *
 * A tb_db is one connection that reconnects itself: when a statement finds
 * the connection broken it reconnects (backoff up to a deadline) and, when
 * it is safe (outside a transaction), retries the statement once.  Statements
 * are declared as static tb_db_stmt values (name + SQL beside the C that binds
 * them) and prepared on first use on each connection, again after a reconnect.
 *
 * Result vocabulary (as GNU Taler's exchange): TB_DB_HARD (a bug or a
 * constraint we did not expect: give up), TB_DB_SOFT (serialization failure,
 * deadlock, lost connection: retry the transaction), else the number of rows.
 *
 * A tb_db_pool hands connections to threads (the api's request threads).
 */
#ifndef TB_DB_H
#define TB_DB_H

#include <libpq-fe.h>
#include <stdbool.h>
#include <stdint.h>

#include "base/tb_util.h"

enum {
  TB_DB_HARD = -2,
  TB_DB_SOFT = -1
};

struct tb_db_stmt {
  const char *name; /* unique, e.g. "jobs_claim" */
  const char *sql;
};

struct tb_db;

/* Connects to url (libpq URL or key=value string).  Retries for up to
 * wait_ms milliseconds (0: one attempt).  Returns NULL with *err (caller frees). */
struct tb_db *tb_db_connect(const char *url, int wait_ms, char **err) TB_MUST_CHECK;
void tb_db_close(struct tb_db *db);
/* True when the server answers (SELECT 1), reconnecting if needed. */
bool tb_db_ping(struct tb_db *db);
/* The raw connection (borrowed), e.g. for PQsocket. */
PGconn *tb_db_conn(struct tb_db *db);

/*
 * Runs a prepared statement with text parameters (NULL = SQL NULL).
 * On success returns the row count (>= 0) and, when res is not NULL, the
 * result in *res (caller PQclear()s).  On failure returns TB_DB_SOFT or
 * TB_DB_HARD, *res is NULL, and the error is logged (without parameters:
 * they may be secrets).  When the statement fails with a unique violation
 * and unique_violation is not NULL, *unique_violation is set true and the
 * return is TB_DB_HARD.
 */
int tb_db_exec(struct tb_db *db, const struct tb_db_stmt *stmt, int nparams,
               const char *const *params, PGresult **res) TB_MUST_CHECK;
/* As tb_db_exec, reporting unique violations (SQLSTATE 23505) separately. */
int tb_db_exec_uv(struct tb_db *db, const struct tb_db_stmt *stmt, int nparams,
                  const char *const *params, PGresult **res, bool *unique_violation) TB_MUST_CHECK;
/* Runs stmt as tb_db_exec_uv (unique_violation may be NULL) and copies the
 * column named col of its first row into *out: a new string (caller frees),
 * or NULL when there is no row or the value is SQL NULL.  Returns as
 * tb_db_exec.  The shape of the statements that answer one JSON document. */
int tb_db_exec_str(struct tb_db *db, const struct tb_db_stmt *stmt, int nparams,
                   const char *const *params, const char *col, char **out,
                   bool *unique_violation) TB_MUST_CHECK;
/* Runs stmt, whose one row counts in column col what it did (the shape of
 * the statements fenced by a lease: "SELECT (SELECT count(*) FROM lease) AS
 * leased, ..."), and returns 1 when that count is above 0, 0 when it is 0
 * (the lease or the row was not there: nothing was done), TB_DB_HARD when
 * the statement answered no row or several, else TB_DB_SOFT / TB_DB_HARD
 * as tb_db_exec. */
int tb_db_exec_counted(struct tb_db *db, const struct tb_db_stmt *stmt, int nparams,
                       const char *const *params, const char *col) TB_MUST_CHECK;
/* Runs SQL text without parameters (DDL, BEGIN, COMMIT, LISTEN); returns
 * the row count or TB_DB_SOFT / TB_DB_HARD, retrying as tb_db_exec does. */
int tb_db_exec_sql(struct tb_db *db, const char *sql) TB_MUST_CHECK;

/* Transactions: begin/commit/rollback.  commit returns TB_DB_SOFT when the
 * caller should retry the whole transaction, TB_DB_HARD when a statement
 * failed in it (the server rolled it back). */
int tb_db_begin(struct tb_db *db) TB_MUST_CHECK;
int tb_db_commit(struct tb_db *db) TB_MUST_CHECK;
void tb_db_rollback(struct tb_db *db);
/* True between tb_db_begin and its commit or rollback. */
bool tb_db_in_tx(const struct tb_db *db);

/* LISTEN on channel (re-issued after reconnects). */
bool tb_db_listen(struct tb_db *db, const char *channel) TB_MUST_CHECK;
/* Waits up to timeout_ms for a notification; true when one (or more) came.
 * The payload of the first is copied into payload (may be NULL). */
bool tb_db_wait_notify(struct tb_db *db, int timeout_ms, char *payload, size_t payload_len);

/* A fixed-size pool of connections for threads. */
struct tb_db_pool;
struct tb_db_pool *tb_db_pool_new(const char *url, unsigned size, int wait_ms,
                                  char **err) TB_MUST_CHECK;
/* Blocks until a connection is free; the caller gives it back with put. */
struct tb_db *tb_db_pool_get(struct tb_db_pool *pool);
void tb_db_pool_put(struct tb_db_pool *pool, struct tb_db *db);
void tb_db_pool_free(struct tb_db_pool *pool);

/* data (len bytes) as bytea's hex text form, "\\x" and two lower-case
 * digits a byte, for a text parameter of type bytea: a new string (caller
 * frees). */
char *tb_db_bytea_hex(const unsigned char *data, size_t len);

/* Helpers for reading results. */
const char *tb_db_str(const PGresult *r, int row, const char *col); /* NULL if NULL */
int64_t tb_db_i64(const PGresult *r, int row, const char *col);     /* 0 if NULL */
bool tb_db_isnull(const PGresult *r, int row, const char *col);
/* Column col of row is boolean true ('t'); false when false or NULL. */
bool tb_db_bool(const PGresult *r, int row, const char *col);
/* Column col of row copied into dst (cap bytes, truncated); "" if NULL. */
void tb_db_copy(const PGresult *r, int row, const char *col, char *dst, size_t cap);
/* Column col of row as a new string (caller frees); NULL if NULL. */
char *tb_db_dup(const PGresult *r, int row, const char *col);

#endif
