/*
 * tokbench keys: API keys straight in the database (TOKBENCH_DATABASE_URL),
 * for the first admin key of a project, before any key exists to call
 * /v1/keys with.
 *
 *   tokbench keys create --project NAME [--admin] [--scopes read,write]
 *                        [--name N] [--expires-in 30d] [--database-url URL]
 *
 * Applies the migrations first, creates the project when missing, and prints
 * only the key on stdout (so that `KEY=$(tokbench keys create ...)` works);
 * the key is never stored anywhere but in that output.
 */
#include <openssl/crypto.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "tb_auth.h"
#include "tb_log.h"
#include "tb_migrate.h"

static void
usage(FILE *out)
{
  fprintf(out,
          "usage: tokbench keys create --project NAME [--admin] [--scopes LIST]\n"
          "                            [--name NAME] [--expires-in DURATION]\n"
          "                            [--database-url URL]\n\n"
          "Creates an API key in project NAME (created when missing) and prints\n"
          "the key, once, on stdout.  --admin grants read,write,admin; --scopes\n"
          "takes a comma list of read, write, admin (default read,write).\n"
          "DURATION: 3600, 45s, 15m, 12h, 30d, 2w (default: never expires).\n"
          "The database URL defaults to TOKBENCH_DATABASE_URL; the migrations\n"
          "are applied first.\n");
}

static int
keys_create(int argc, char **argv)
{
  const char *url = getenv("TOKBENCH_DATABASE_URL");
  const char *project = NULL, *name = "", *scopes = NULL;
  bool admin = false;
  int64_t expires = 0;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    bool has_arg = i + 1 < argc;
    if (strcmp(a, "--help") == 0) {
      usage(stdout);
      return 0;
    } else if (strcmp(a, "--admin") == 0) {
      admin = true;
    } else if (strcmp(a, "--project") == 0 && has_arg) {
      project = argv[++i];
    } else if (strcmp(a, "--name") == 0 && has_arg) {
      name = argv[++i];
    } else if (strcmp(a, "--scopes") == 0 && has_arg) {
      scopes = argv[++i];
    } else if (strcmp(a, "--database-url") == 0 && has_arg) {
      url = argv[++i];
    } else if (strcmp(a, "--expires-in") == 0 && has_arg) {
      if (!tb_auth_parse_duration(argv[++i], &expires)) {
        fprintf(stderr, "tokbench keys: bad --expires-in '%s'\n", argv[i]);
        return 2;
      }
    } else {
      fprintf(stderr, "tokbench keys: unknown argument '%s'\n", a);
      usage(stderr);
      return 2;
    }
  }
  unsigned mask = TB_SCOPE_READ | TB_SCOPE_WRITE;
  if (scopes != NULL && !tb_auth_parse_scopes(scopes, &mask)) {
    fprintf(stderr, "tokbench keys: bad --scopes '%s' (read, write, admin)\n", scopes);
    return 2;
  }
  if (admin)
    mask |= TB_SCOPE_READ | TB_SCOPE_WRITE | TB_SCOPE_ADMIN;
  if (project == NULL || project[0] == '\0' || strlen(project) > 100) {
    fprintf(stderr, "tokbench keys: --project NAME (1 to 100 characters) is required\n");
    return 2;
  }
  if (strlen(name) > 200) {
    fprintf(stderr, "tokbench keys: --name is too long\n");
    return 2;
  }
  if (url == NULL) {
    fprintf(stderr, "tokbench keys: TOKBENCH_DATABASE_URL is not set\n");
    return 2;
  }
  tb_log_init("keys", TB_LOG_WARN);
  char *err = NULL, *key = NULL, *doc = NULL;
  char pid[37];
  int rc = 1;
  struct tb_db *db = tb_db_connect(url, 5000, &err);
  if (db == NULL) {
    fprintf(stderr, "tokbench keys: cannot connect: %s\n", err);
    free(err);
    return 1;
  }
  if (tb_migrate_run(db, &err) < 0) {
    fprintf(stderr, "tokbench keys: migrations: %s\n", err);
    free(err);
    goto out;
  }
  if (tb_auth_project_ensure(db, project, pid) != 1) {
    fprintf(stderr, "tokbench keys: cannot create project '%s'\n", project);
    goto out;
  }
  if (tb_auth_key_create(db, pid, name, mask, expires, &key, &doc) != 1) {
    fprintf(stderr, "tokbench keys: cannot create the key\n");
    goto out;
  }
  printf("%s\n", key);
  fflush(stdout);
  rc = 0;
out:
  if (key != NULL) {
    OPENSSL_cleanse(key, strlen(key));
    free(key);
  }
  free(doc);
  tb_db_close(db);
  return rc;
}

int
tb_cli_keys(int argc, char **argv)
{
  if (argc < 2 || strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "help") == 0) {
    usage(argc < 2 ? stderr : stdout);
    return argc < 2 ? 2 : 0;
  }
  if (strcmp(argv[1], "create") == 0)
    return keys_create(argc - 1, argv + 1);
  fprintf(stderr, "tokbench keys: unknown subcommand '%s'\n", argv[1]);
  return 2;
}
