/*
 * tb_auth: API keys, shared by tokbench-api (which checks and manages them)
 * and `tokbench keys` (which makes the first one, straight in the database).
 *
 * A key is "tkb_" followed by 40 characters of [A-Za-z0-9] from OpenSSL's
 * CSPRNG (about 238 bits).  It is shown once; the database keeps only its
 * SHA-256 (hex, api_keys.key_hash) and a display prefix ("tkb_" + the first
 * 8 random characters).  Scopes (read, write, admin; admin implies write
 * implies read) and expiry are base/tb_scope.
 */
#ifndef TB_AUTH_H
#define TB_AUTH_H

#include <stdbool.h>
#include <stdint.h>

#include "db/tb_db.h"
#include "base/tb_scope.h"
#include "base/tb_util.h"

#define TB_AUTH_KEY_PREFIX "tkb_"
#define TB_AUTH_KEY_CHARS 40
#define TB_AUTH_KEY_LEN (sizeof TB_AUTH_KEY_PREFIX - 1 + TB_AUTH_KEY_CHARS)
#define TB_AUTH_DISPLAY_CHARS 8

/* The public record of a key (api_keys row k) as a json_build_object
 * expression: what every reply about a key shows (never the hash). */
#define TB_AUTH_KEY_JSON                                                         \
  "json_build_object('id', k.id, 'name', k.name, 'prefix', k.prefix, "           \
  "'scopes', k.scopes, 'created_at', k.created_at, 'expires_at', k.expires_at, " \
  "'revoked_at', k.revoked_at, 'last_used_at', k.last_used_at)"

/* True when key has the exact shape of a key (prefix, length, alphabet). */
bool tb_auth_key_wellformed(const char *key, size_t len);
/* SHA-256 of the key as 64 hex characters + NUL. */
void tb_auth_key_hash(const char *key, size_t len, char hex[65]);

/* The id of the project called name, created when missing.  Returns 1, or
 * TB_DB_SOFT / TB_DB_HARD. */
int tb_auth_project_ensure(struct tb_db *db, const char *name, char id[37]) TB_MUST_CHECK;

/*
 * Creates a key in project_id with the scopes of mask (stored as given,
 * implications are applied when checking), expiring expires_in_s seconds
 * from now (0: never).  parent_id: the key that asks (the api), NULL for
 * the operator (`tokbench keys`): the new key then expires no later than
 * its parent and is revoked with it (tb_auth_key_revoke); the caller checks
 * that mask is within the parent's scopes.  On success returns 1 with *key
 * (the key itself: the caller shows it once, wipes it with OPENSSL_cleanse
 * and frees it) and *doc (a new JSON text of the key's public record: id,
 * name, prefix, scopes, created_at, expires_at, revoked_at, last_used_at;
 * caller frees).  Returns 0 when the parent is not a live key of the
 * project, TB_DB_SOFT / TB_DB_HARD on failure, and sets nothing then.
 */
int tb_auth_key_create(struct tb_db *db, const char *project_id, const char *parent_id,
                       const char *name, unsigned mask, int64_t expires_in_s, char **key,
                       char **doc) TB_MUST_CHECK;
/* As tb_auth_key_create, with a cap (issue 27): when max_keys > 0 and the
 * project already holds max_keys live keys (neither revoked nor expired),
 * nothing is made and TB_AUTH_KEYS_FULL is returned.  Concurrent creations
 * in one project take turns, so the cap holds under them. */
#define TB_AUTH_KEYS_FULL 2
int tb_auth_key_create_capped(struct tb_db *db, const char *project_id, const char *parent_id,
                              const char *name, unsigned mask, int64_t expires_in_s,
                              int64_t max_keys, char **key, char **doc) TB_MUST_CHECK;

/*
 * The keys of the project called project (every project when NULL), oldest
 * first, as a new JSON text (caller frees): an array of key records
 * (TB_AUTH_KEY_JSON) each with a "project" member (the project's name).
 * Returns 1 (also for an empty list or an unknown project), or TB_DB_SOFT /
 * TB_DB_HARD with *json unset.
 */
int tb_auth_keys_list(struct tb_db *db, const char *project, char **json) TB_MUST_CHECK;
/*
 * Revokes key id (a UUID; revoking twice keeps the first time), and every
 * key made under it at any depth, and sends NOTIFY tb_keys_changed so that
 * every api process drops its cached copies at once.  project_id: the
 * project the key must belong to (NULL: any, for the operator).  Returns 1
 * with *doc (new JSON text of the record of id, caller frees), 0 when no
 * key has this id (in that project), or TB_DB_SOFT / TB_DB_HARD.
 */
int tb_auth_key_revoke(struct tb_db *db, const char *id, const char *project_id,
                       char **doc) TB_MUST_CHECK;

#endif
