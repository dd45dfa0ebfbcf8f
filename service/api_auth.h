/*
 * api_auth: Bearer keys on every non-public route, with a cache.
 *
 * A key is looked up by its SHA-256 (hex) in an in-memory cache, else in
 * api_keys (which also bumps last_used_at, so at most once per key per
 * TTL).  Cached records live TOKBENCH_KEY_CACHE_MS (default 5 s); a revocation
 * made through any api process is seen at once everywhere, because revoking
 * sends NOTIFY tb_keys_changed and every process's listener flushes its
 * cache (api_notify.c).  Expiry is checked on every request.
 *
 * The same table holds a token bucket per key for the rate limit
 * (TOKBENCH_RATE_LIMIT per second, TOKBENCH_RATE_BURST at once).
 */
#ifndef TB_API_AUTH_H
#define TB_API_AUTH_H

#include "api.h"

struct tb_api_keycache *tb_api_keycache_new(int64_t ttl_ms);
void tb_api_keycache_free(struct tb_api_keycache *kc);
/* Forgets every cached key (revocation seen, listener reconnected). */
void tb_api_keycache_flush(struct tb_api_keycache *kc);

/*
 * Authenticates r with the scope the route needs (TB_SCOPE_READ/WRITE/ADMIN)
 * and charges the rate limit.  True: r->key_id, r->project_id, r->scopes are
 * set.  False: an error reply (401, 403, 429, 503) was queued and *ret holds
 * its result; the handler returns *ret.
 */
bool tb_api_authenticate(struct tb_api_req *r, unsigned need, enum MHD_Result *ret) TB_MUST_CHECK;

#endif
