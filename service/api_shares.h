/*
 * api_shares: share links (issue 35, item 2; docs/reports.md, "Share
 * links").  A share gives read-only access, without an API key, to one
 * report of a project: a job's, a comparison's or an endpoint's history.
 *
 *   POST   /v1/jobs/{id}/shares        a job's report (write)
 *   POST   /v1/compare/shares          {base, head, tolerance?}: a comparison
 *   POST   /v1/endpoints/{id}/shares   {labels?, phase?, metric?}: the
 *                                      endpoint's history (GET /v1/series's
 *                                      matrix series)
 *          each with {expires_in_s? | expires_at?, private_labels?} and
 *          answering 201 {id, kind, ..., url, token, expires_at,
 *          created_at}: the token is shown this once
 *   GET    /v1/shares                  the project's shares (read; never a
 *                                      token)
 *   DELETE /v1/shares/{id}             revoke (write): 204
 *   GET    /s/{token}                  the page (no key; api_sharepage.c):
 *                                      html, or ?format=md|csv|json, or
 *                                      /s/{token}.md and so on
 *
 * The management routes are api_shares.c, the page api_sharepage.c, the
 * statements service/q_shares.c, the table sql/0017_shares.sql.
 */
#ifndef TB_API_SHARES_H
#define TB_API_SHARES_H

#include "api.h"

/* A token: 32 random bytes in base64url without padding. */
#define TB_API_SHARE_TOKEN_BYTES 32
#define TB_API_SHARE_TOKEN_LEN 43

/* The settings (TOKBENCH_SHARE_*): the per-link rate limit's buckets and
 * the lifetimes.  Made at start by tb_api_shares_config. */
struct tb_api_shares {
  struct tb_api_quota *rate; /* per share id: TOKBENCH_SHARE_RATE, _BURST */
  double rate_per_s;
  int64_t ttl_s;     /* TOKBENCH_SHARE_TTL_S: a share's life when none is asked; 0 never ends */
  int64_t max_ttl_s; /* TOKBENCH_SHARE_MAX_TTL_S: the longest one may ask */
  int64_t limit;     /* TOKBENCH_LIMIT_SHARES: live shares per project, 0 no cap */
};

/* The settings of share links, for the api's tb_cfg table. */
#define TB_API_SHARES_CFG_KEYS                                                                  \
  { "TOKBENCH_SHARE_RATE", "5",                                                                 \
    "requests per second one share link (GET /s/{token}) may take, from anyone (429 above; "    \
    "0: no limit)",                                                                             \
    false },                                                                                    \
    { "TOKBENCH_SHARE_BURST", "20", "requests a share link may take at once above its rate",    \
      false },                                                                                  \
    { "TOKBENCH_SHARE_TTL_S", "2592000",                                                        \
      "life of a share link that asks for none, in seconds (0: it never expires)", false },     \
    { "TOKBENCH_SHARE_MAX_TTL_S", "31536000",                                                   \
      "the longest life a share link may ask for, in seconds", false },                         \
  {                                                                                             \
    "TOKBENCH_LIMIT_SHARES", "1000",                                                            \
      "live share links per project, neither revoked nor expired (429 above; 0: no cap)", false \
  }

/* Reads the settings into api->shares (new).  False with *err (new). */
bool tb_api_shares_config(struct tb_api *api, char **err) TB_MUST_CHECK;
void tb_api_shares_free(struct tb_api_shares *s);

/* True when s[0..n) is a token's shape (TB_API_SHARE_TOKEN_LEN characters
 * of the base64url alphabet). */
bool tb_api_share_token_ok(const char *s, size_t n);

#endif
