/* api_health: liveness and readiness probes. */
#ifndef TB_API_HEALTH_H
#define TB_API_HEALTH_H

#include "api.h"

enum MHD_Result tb_api_healthz(struct tb_api *api, struct MHD_Connection *c);
enum MHD_Result tb_api_readyz(struct tb_api *api, struct MHD_Connection *c);

#endif
