/*
 * q_page: see q_page.h.
 */
#include "q_page.h"

int
tb_q_page_exec(struct tb_db *db, const struct tb_db_stmt *stmt, int nparams,
               const char *const *params, tb_q_page_item_fn fn, void *cls)
{
  PGresult *res = NULL;
  int rc = tb_db_exec(db, stmt, nparams, params, &res);
  if (rc > 0) {
    int cu = PQfnumber(res, "created_us"), ci = PQfnumber(res, "id"), cd = PQfnumber(res, "doc");
    for (int i = 0; i < rc; i++)
      fn(cls, PQgetvalue(res, i, cu), PQgetvalue(res, i, ci), PQgetvalue(res, i, cd),
         (size_t)PQgetlength(res, i, cd));
  }
  PQclear(res);
  return rc;
}
