/*
 * tokbench signing-keys: the public keys results are signed with, straight
 * in the database (TOKBENCH_DATABASE_URL; lib/db/tb_signkeys), as `tokbench
 * keys` does for API keys.  Revocation is the operator's, not a tenant's:
 * the keys belong to the whole service, so no API route revokes them.
 *
 *   tokbench signing-keys create FILE
 *   tokbench signing-keys list [--json] [--database-url URL]
 *   tokbench signing-keys revoke KID [--database-url URL]
 *
 * create writes a new private key file (mode 0600; an existing file is left
 * alone) for TOKBENCH_SIGNING_KEY_FILE and prints its kid; no database.
 * list prints each key's id, created and revoked times (--json: the JWK
 * set GET /v1/signing-keys serves).  revoke marks the key revoked: `tokbench
 * verify` fails (exit 1) on what it signed, and an api process holding it
 * signs nothing more with it (it checks before each document); exit 1 when
 * no key has that id.  To rotate, give the api a new key file and restart
 * it: the old key stays listed, and what it signed still verifies.
 */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/tb_log.h"
#include "base/tb_sign.h"
#include "cli.h"
#include "db/tb_migrate.h"
#include "db/tb_signkeys.h"

static const char signkeys_usage[] =
  "usage: tokbench signing-keys create FILE\n"
  "       tokbench signing-keys list [--json] [--database-url URL]\n"
  "       tokbench signing-keys revoke KID [--database-url URL]\n"
  "\n"
  "create: a new Ed25519 private key file (mode 0600) for\n"
  "TOKBENCH_SIGNING_KEY_FILE, unless FILE exists; prints its key id.\n"
  "list: every key results were signed with (id, created, revoked); --json\n"
  "prints the JWK set that GET /v1/signing-keys serves.\n"
  "revoke: marks key KID revoked; results it signed no longer verify and\n"
  "the api stops signing with it.  Exit 1 when no key has this id.\n"
  "The database URL defaults to TOKBENCH_DATABASE_URL.\n";

/* The database at url, migrated; NULL after a message on stderr. */
static struct tb_db *
connect_db(const char *url)
{
  char *err = NULL;
  if (url == NULL || url[0] == '\0') {
    fprintf(stderr, "tokbench signing-keys: TOKBENCH_DATABASE_URL is not set\n");
    return NULL;
  }
  tb_log_init("signing-keys", TB_LOG_WARN);
  struct tb_db *db = tb_db_connect(url, 5000, &err);
  if (db != NULL && tb_migrate_run(db, &err) < 0) {
    tb_db_close(db);
    db = NULL;
  }
  if (db == NULL) {
    fprintf(stderr, "tokbench signing-keys: %s\n", err != NULL ? err : "cannot connect");
    free(err);
  }
  return db;
}

static int
list(struct tb_db *db, bool as_json)
{
  json_t *set = NULL;
  if (tb_signkeys_jwks(db, &set) < 0) {
    fprintf(stderr, "tokbench signing-keys: cannot list the keys\n");
    return 1;
  }
  if (as_json) {
    char *text = json_dumps(set, JSON_INDENT(2));
    printf("%s\n", text != NULL ? text : "{}");
    free(text);
  } else {
    printf("%-16s  %-24s  %s\n", "KID", "CREATED", "REVOKED");
    size_t i;
    const json_t *k;
    json_array_foreach (json_object_get(set, "keys"), i, k) {
      const char *rv = json_string_value(json_object_get(k, "revoked_at"));
      printf("%-16s  %-24s  %s\n", json_string_value(json_object_get(k, "kid")),
             json_string_value(json_object_get(k, "created_at")), rv != NULL ? rv : "-");
    }
  }
  json_decref(set);
  return 0;
}

static bool
kid_ok(const char *s)
{
  if (strlen(s) != TB_SIGN_KID_LEN)
    return false;
  for (const char *c = s; *c != '\0'; c++)
    if (!((*c >= '0' && *c <= '9') || (*c >= 'a' && *c <= 'f')))
      return false;
  return true;
}

static int
revoke(struct tb_db *db, const char *kid)
{
  int rc = tb_signkeys_revoke(db, kid);
  if (rc < 0) {
    fprintf(stderr, "tokbench signing-keys: cannot revoke the key\n");
    return 1;
  }
  if (rc == 0) {
    fprintf(stderr, "tokbench signing-keys: no key has id %s\n", kid);
    return 1;
  }
  printf("revoked %s\n", kid);
  return 0;
}

/* create FILE: exit 0 with the kid on stdout, 1 on a failure. */
static int
create(const char *path)
{
  char *err = NULL;
  struct tb_sign_key *k = NULL;
  if (!tb_sign_create_file(path, &err) || (k = tb_sign_key_load(path, &err)) == NULL) {
    fprintf(stderr, "tokbench signing-keys: %s\n", err);
    free(err);
    return 1;
  }
  printf("%s\n", tb_sign_key_id(k));
  tb_sign_key_free(k);
  return 0;
}

int
tb_cli_signing_keys(int argc, char **argv)
{
  const char *url = getenv("TOKBENCH_DATABASE_URL"), *cmd = argc > 1 ? argv[1] : NULL;
  const char *kid = NULL;
  bool as_json = false;
  if (cmd == NULL || strcmp(cmd, "--help") == 0 || strcmp(cmd, "help") == 0) {
    fputs(signkeys_usage, cmd == NULL ? stderr : stdout);
    return cmd == NULL ? 2 : 0;
  }
  if (strcmp(cmd, "create") == 0) {
    if (argc != 3 || argv[2][0] == '-') {
      fputs(signkeys_usage, stderr);
      return 2;
    }
    return create(argv[2]);
  }
  bool is_list = strcmp(cmd, "list") == 0, is_revoke = strcmp(cmd, "revoke") == 0;
  for (int i = 2; i < argc; i++) {
    if (strcmp(argv[i], "--database-url") == 0 && i + 1 < argc)
      url = argv[++i];
    else if (is_list && strcmp(argv[i], "--json") == 0)
      as_json = true;
    else if (is_revoke && kid == NULL && argv[i][0] != '-')
      kid = argv[i];
    else {
      fprintf(stderr, "tokbench signing-keys: unknown argument '%s'\n%s", argv[i], signkeys_usage);
      return 2;
    }
  }
  if (!is_list && !is_revoke) {
    fprintf(stderr, "tokbench signing-keys: unknown subcommand '%s'\n%s", cmd, signkeys_usage);
    return 2;
  }
  if (is_revoke && (kid == NULL || !kid_ok(kid))) {
    fprintf(stderr, "tokbench signing-keys: revoke KID: 16 lower-case hex digits, as list "
                    "shows them\n");
    return 2;
  }
  struct tb_db *db = connect_db(url);
  if (db == NULL)
    return 1;
  int rc = is_list ? list(db, as_json) : revoke(db, kid);
  tb_db_close(db);
  return rc;
}
