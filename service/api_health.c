/*
 * api_health: GET /healthz (the process answers) and GET /readyz (the
 * database answers too).  Neither needs a key.
 */
#include "api_handlers.h"

enum MHD_Result
tb_api_healthz(struct tb_api_req *r)
{
  return tb_api_reply_text(r, MHD_HTTP_OK, "{\"status\":\"ok\"}", NULL);
}

enum MHD_Result
tb_api_readyz(struct tb_api_req *r)
{
  struct tb_db *db = tb_api_db_get(r);
  bool ok = tb_db_ping(db);
  tb_api_db_put(r, db);
  if (!ok)
    return tb_api_reply_error(r, TB_EC_NOT_READY, "the database does not answer", NULL);
  return tb_api_reply_text(r, MHD_HTTP_OK, "{\"status\":\"ready\"}", NULL);
}
