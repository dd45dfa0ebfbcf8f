/*
 * q_page: the rows of a paginated list's statement (GET /v1/jobs, GET
 * /v1/traces; api_page), read once for every family.  The statement
 * returns the columns created_us (its row's creation, µs since the epoch,
 * as text), id and doc (the row's document as JSON text), newest first;
 * TB_Q_PAGE_SQL writes it around a family's document, table and filters.
 */
#ifndef TB_Q_PAGE_H
#define TB_Q_PAGE_H

#include <stddef.h>

#include "db/tb_db.h"

/* The statement of a page of the table whose alias is a ("j"): the
 * cursor's columns (created_us, id), the doc column (doc: "<expression>
 * ::text AS doc "), from_where ("FROM jobs j WHERE j.project_id = $1 ",
 * with any filters), then the keyset: the rows strictly older than the
 * cursor ($us: its created_us, NULL for the first page; $id: its id),
 * newest first, at most $lim.  us, id and lim are parameter numbers ("5"). */
#define TB_Q_PAGE_SQL(a, doc, from_where, us, id, lim) \
  TB_Q_PAGE_HEAD(a, doc)                               \
  from_where "  AND ($" us                             \
             "::bigint IS NULL OR " TB_Q_PAGE_OLDER(a, us, id) ") " TB_Q_PAGE_TAIL(a, lim)
/* Its parts, for a family that writes a statement per filter set and per
 * page (GET /v1/jobs: q_jobs.c), so that a generic plan can bound the index
 * scan by the cursor, which the OR above does not: the head (columns), the
 * keyset's clause after a cursor (TB_Q_PAGE_OLDER) or on the first page
 * (TB_Q_PAGE_FIRST: the cursor's parameters NULL), the order and limit. */
#define TB_Q_PAGE_HEAD(a, doc)                                                        \
  "SELECT (extract(epoch FROM " a ".created_at) * 1000000)::bigint AS created_us, " a \
  ".id::text, " doc
#define TB_Q_PAGE_OLDER(a, us, id)                             \
  "(" a ".created_at, " a ".id) < (timestamptz 'epoch' + $" us \
  "::bigint * interval '1 microsecond', $" id "::uuid)"
#define TB_Q_PAGE_FIRST(us, id) "  AND $" us "::bigint IS NULL AND $" id "::uuid IS NULL "
#define TB_Q_PAGE_TAIL(a, lim) "ORDER BY " a ".created_at DESC, " a ".id DESC LIMIT $" lim "::int"

/* One listed row: created_us and id make the cursor; doc is its document
 * (borrowed for the call, len bytes). */
typedef void (*tb_q_page_item_fn)(void *cls, const char *created_us, const char *id,
                                  const char *doc, size_t len);

/* Runs stmt and gives each row to fn.  Returns the row count or TB_DB_SOFT
 * / TB_DB_HARD. */
int tb_q_page_exec(struct tb_db *db, const struct tb_db_stmt *stmt, int nparams,
                   const char *const *params, tb_q_page_item_fn fn, void *cls) TB_MUST_CHECK;

#endif
