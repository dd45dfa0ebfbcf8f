/*
 * tokbench-api: shared state of the HTTP service.
 *
 * One struct tb_api holds what every handler needs: the database pool, the
 * configuration and the master key.  Handlers live one endpoint family per
 * file (api_<family>.c) and are found through the static routing table in
 * api_routes.c.
 */
#ifndef TB_API_H
#define TB_API_H

#include <microhttpd.h>
#include <stdbool.h>

#include "tb_cfg.h"
#include "tb_db.h"

struct tb_api {
  struct tb_cfg *cfg;
  struct tb_db_pool *pool;
  struct MHD_Daemon *daemon;
  volatile bool stopping;
};

/* Replies: every reply goes through these, so headers (CORS, request id,
 * content type) are set in one place.  They return an MHD_Result. */
enum MHD_Result tb_api_reply_json(struct MHD_Connection *c, unsigned status, const char *body);
enum MHD_Result tb_api_reply_problem(struct MHD_Connection *c, unsigned status,
                                     const char *type, const char *title, const char *detail);

#endif
