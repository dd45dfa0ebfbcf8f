/*
 * tb_tracestore: see tb_tracestore.h.
 */
#include "db/tb_tracestore.h"

#include <stdlib.h>
#include <string.h>

static const struct tb_db_stmt load_stmt = {
  "trace_load",
  "SELECT t.format, t.sha256, t.data FROM traces t JOIN jobs j ON j.project_id = t.project_id "
  "WHERE j.id = $1::uuid AND t.id = $2::uuid",
};

int
tb_tracestore_load(struct tb_db *db, const char *job_id, const char *trace_id,
                   struct tb_tracestore_blob *out)
{
  memset(out, 0, sizeof *out);
  const char *p[] = { job_id, trace_id };
  PGresult *res = NULL;
  int rc = tb_db_exec(db, &load_stmt, 2, p, &res);
  if (rc > 0) {
    tb_db_copy(res, 0, "format", out->format, sizeof out->format);
    tb_db_copy(res, 0, "sha256", out->sha256, sizeof out->sha256);
    /* bytea in its hex text form, unescaped by libpq */
    const char *hex = tb_db_str(res, 0, "data");
    size_t n = 0;
    unsigned char *raw = hex ? PQunescapeBytea((const unsigned char *)hex, &n) : NULL;
    if (raw == NULL) {
      rc = TB_DB_HARD;
    } else {
      out->data = tb_xmalloc(n ? n : 1);
      memcpy(out->data, raw, n);
      out->len = n;
      PQfreemem(raw);
    }
  }
  PQclear(res);
  return rc;
}

void
tb_tracestore_blob_clear(struct tb_tracestore_blob *b)
{
  free(b->data);
  memset(b, 0, sizeof *b);
}
