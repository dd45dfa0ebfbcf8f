/*
 * q_keys: the statements of /v1/keys (service/api_keys.c) and the key
 * lookup of every authenticated request (service/api_auth.c); table
 * api_keys in sql/0001_projects_keys.sql.  Making and revoking keys is
 * lib/db/tb_auth.c (the CLI does it too).  One function per statement (the
 * SQL beside it in q_keys.c), columns read by name; each returns the row
 * count or TB_DB_SOFT / TB_DB_HARD.
 */
#ifndef TB_Q_KEYS_H
#define TB_Q_KEYS_H

#include <stdbool.h>

#include "db/tb_db.h"
#include "base/tb_util.h"

/* The project's keys as a JSON array (*doc, new; no hashes); always 1 row. */
int tb_q_keys_list(struct tb_db *db, const char *project_id, char **doc) TB_MUST_CHECK;

/* What a request's key is allowed (texts as stored). */
struct tb_q_keys_record {
  char id[37], project_id[37];
  char scopes[64];     /* "read,write,admin" */
  char expires_us[24]; /* microseconds since the epoch; "0": never */
  bool revoked;
  char key_hash[65];
};
/* The key whose hash is key_hash, marking it used now; 1, or 0 when there
 * is none. */
int tb_q_keys_lookup(struct tb_db *db, const char *key_hash,
                     struct tb_q_keys_record *out) TB_MUST_CHECK;

#endif
