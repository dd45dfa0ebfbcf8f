/*
 * api_egress: the egress policy (lib/net/tb_egress) at the api's door.  A URL a
 * tenant registers (an endpoint's base_url, a callback's url) is judged
 * when it is created or changed, without resolving it; the connection is
 * judged again on its resolved address when it is made.
 */
#ifndef TB_API_EGRESS_H
#define TB_API_EGRESS_H

#include "api.h"

/* True when url passes the policy; else false with a 422 problem
 * (egress-refused) queued into *ret, naming field and, in "rule", the rule
 * that refused it. */
bool tb_api_egress_check(struct tb_api_req *r, const char *field, const char *url,
                         enum MHD_Result *ret) TB_MUST_CHECK;

#endif
