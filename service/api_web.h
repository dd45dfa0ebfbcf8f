/*
 * api_web: the static web frontend (GET /, GET /web/{name}; handlers in
 * api_handlers.h).
 */
#ifndef TB_API_WEB_H
#define TB_API_WEB_H

#include "api.h"

#define TB_API_WEB_FILE_MAX (4 * 1024 * 1024)

/* The directory the static files are served from (api->web_dir), resolved
 * once at start: configured (TOKBENCH_WEB_DIR) when set and not empty, else
 * <binary>/../web, <binary>/../../web or <binary>/../share/tokbench/web,
 * the first holding index.html, else ./web.  Returns a new string (free). */
char *tb_api_web_dir_resolve(const char *configured) TB_MUST_CHECK;

#endif
