/*
 * q_page: the rows of a paginated list's statement (GET /v1/jobs, GET
 * /v1/traces; api_page), read once for every family.  The statement
 * returns the columns created_us (its row's creation, µs since the epoch,
 * as text), id and doc (the row's document as JSON text), newest first.
 */
#ifndef TB_Q_PAGE_H
#define TB_Q_PAGE_H

#include <stddef.h>

#include "db/tb_db.h"

/* One listed row: created_us and id make the cursor; doc is its document
 * (borrowed for the call, len bytes). */
typedef void (*tb_q_page_item_fn)(void *cls, const char *created_us, const char *id,
                                  const char *doc, size_t len);

/* Runs stmt and gives each row to fn.  Returns the row count or TB_DB_SOFT
 * / TB_DB_HARD. */
int tb_q_page_exec(struct tb_db *db, const struct tb_db_stmt *stmt, int nparams,
                   const char *const *params, tb_q_page_item_fn fn, void *cls) TB_MUST_CHECK;

#endif
