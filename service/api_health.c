/*
 * api_health: GET /healthz (the process answers) and GET /readyz (the
 * database answers too).  Neither needs a key.
 */
#include "api_health.h"

enum MHD_Result
tb_api_healthz(struct tb_api *api, struct MHD_Connection *c)
{
  (void)api;
  return tb_api_reply_json(c, MHD_HTTP_OK, "{\"status\":\"ok\"}");
}

enum MHD_Result
tb_api_readyz(struct tb_api *api, struct MHD_Connection *c)
{
  struct tb_db *db = tb_db_pool_get(api->pool);
  bool ok = tb_db_ping(db);
  tb_db_pool_put(api->pool, db);
  if (!ok)
    return tb_api_reply_problem(c, MHD_HTTP_SERVICE_UNAVAILABLE, "not-ready",
                                "Not ready", "the database does not answer");
  return tb_api_reply_json(c, MHD_HTTP_OK, "{\"status\":\"ready\"}");
}
