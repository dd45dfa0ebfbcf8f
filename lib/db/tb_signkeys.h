/*
 * tb_signkeys: the public keys results are signed with (issue 35, item 4;
 * sql/0018_signing_keys.sql).  The api records its key when it loads it
 * (tb_signkeys_record) and serves the set (tb_signkeys_jwks, GET
 * /v1/signing-keys); `tokbench signing-keys` lists and revokes them
 * (tb_signkeys_revoke).  The key material itself is lib/base/tb_sign's.
 *
 * Return vocabulary as tb_queue: >= 0 a count (or 1 done), TB_DB_SOFT /
 * TB_DB_HARD.
 */
#ifndef TB_SIGNKEYS_H
#define TB_SIGNKEYS_H

#include <jansson.h>
#include <stdbool.h>

#include "base/tb_sign.h"
#include "base/tb_util.h"
#include "db/tb_db.h"

/* Records the raw public key pub under its kid (an existing row is kept:
 * its created_at and revoked_at stand).  *revoked: whether that key is
 * revoked.  Returns 1 or TB_DB_SOFT / TB_DB_HARD. */
int tb_signkeys_record(struct tb_db *db, const unsigned char pub[TB_SIGN_PUB_LEN],
                       bool *revoked) TB_MUST_CHECK;

/* Whether kid is revoked now (*revoked); returns 1, 0 (no such key) or
 * TB_DB_SOFT / TB_DB_HARD. */
int tb_signkeys_revoked(struct tb_db *db, const char *kid, bool *revoked) TB_MUST_CHECK;

/* Every key as a JWK set, oldest first: {"keys": [tb_sign_jwk + created_at
 * (RFC 3339) and, for a revoked one, revoked_at]} into *jwks (new).
 * Returns the count or TB_DB_SOFT / TB_DB_HARD. */
int tb_signkeys_jwks(struct tb_db *db, json_t **jwks) TB_MUST_CHECK;

/* Revokes kid (revoked_at now, if it was not revoked before).  Returns 1
 * (revoked now or before), 0 (no such key) or TB_DB_SOFT / TB_DB_HARD. */
int tb_signkeys_revoke(struct tb_db *db, const char *kid) TB_MUST_CHECK;

#endif
