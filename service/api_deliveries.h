/*
 * api_deliveries: the outbound delivery dispatcher of the api (webhook
 * callbacks; its routes are in api_handlers.h).
 */
#ifndef TB_API_DELIVERIES_H
#define TB_API_DELIVERIES_H

#include "api.h"

/* Starts / stops the outbound delivery dispatcher (api_deliveries.c), one
 * per api process; TOKBENCH_DELIVERIES=0 leaves it off.  Start returns
 * false (logged) when it cannot start. */
bool tb_api_deliveries_start(struct tb_api *api);
void tb_api_deliveries_stop(void);

#endif
