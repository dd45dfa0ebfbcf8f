/*
 * api_quota: the request rate of a project (issue 27, finding 1).  The
 * per-key token bucket (api_auth.c, TOKBENCH_RATE_LIMIT) bounds one key; a
 * project can make keys, so the same rate is also bounded per project,
 * across all its keys: TOKBENCH_RATE_LIMIT_PROJECT requests per second and
 * TOKBENCH_RATE_BURST_PROJECT at once (unset: 4 x the per-key rate, and
 * twice the project's rate; 0: no project limit).  Each api process holds
 * its own buckets, as it does the keys'.
 */
#ifndef TB_API_QUOTA_H
#define TB_API_QUOTA_H

#include <stdbool.h>

#include "api.h"

/* A new table of buckets of rate_per_s refilled up to burst (rate 0: every
 * charge passes).  Never fails. */
struct tb_api_quota *tb_api_quota_new(double rate_per_s, double burst);
void tb_api_quota_free(struct tb_api_quota *q);

/* Charges one request to project_id at now_ns (monotonic).  True when the
 * project had a token; else false with *retry_after_s (>= 1). */
bool tb_api_quota_charge(struct tb_api_quota *q, const char *project_id, int64_t now_ns,
                         int *retry_after_s);

#endif
